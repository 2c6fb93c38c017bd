//! The contract of semantic recall's `RecallStore`, run against every store: the in-memory one
//! of `agentry-agents`, SQLite (a fresh file) and PostgreSQL (a fresh database per test). Messages
//! are stored through conversation memory, embedded by the background loop (with an embedder and
//! a store that fail at first), then searched.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentry_agents::recall::{
    EmbedderSettings, MessageEmbedding, RecallAgents, RecentMessages, UnembeddedMessage,
    run_embedder,
};
use agentry_agents::{
    ConversationKey, ConversationStore, Embedder, InMemoryConversationStore, Message, ModelError,
    ModelErrorKind, OfflineEmbedder, RecallQuery, RecallStore, RecalledKind, RecalledMessage,
    ToolResult,
};
use agentry_engine::store::StoreError;
use agentry_store::{Database, SqlRecallStore};
use async_trait::async_trait;
use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

fn key(agent: &str, user: &str, conversation: &str) -> ConversationKey {
    ConversationKey {
        agent_id: agent.into(),
        user_id: user.into(),
        conversation_id: conversation.into(),
    }
}

/// The offline embedder, failing its first `failures` calls as a provider that is down.
struct Flaky {
    failures: usize,
    calls: AtomicUsize,
}

#[async_trait]
impl Embedder for Flaky {
    fn name(&self) -> &str {
        "offline"
    }

    fn dimensions(&self) -> usize {
        OfflineEmbedder.dimensions()
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) < self.failures {
            return Err(ModelError::of(ModelErrorKind::Unavailable, "HTTP 503"));
        }
        OfflineEmbedder.embed(texts).await
    }
}

/// A store whose first `failures` writes of embeddings fail as a database that is down.
struct FlakyStore<'a> {
    inner: &'a dyn RecallStore,
    failures: usize,
    writes: AtomicUsize,
}

#[async_trait]
impl RecallStore for FlakyStore<'static> {
    async fn unembedded(
        &self,
        agent_ids: &[String],
        after: i64,
        limit: usize,
    ) -> Result<Vec<UnembeddedMessage>, StoreError> {
        self.inner.unembedded(agent_ids, after, limit).await
    }

    async fn store_embeddings(
        &self,
        embedder: &str,
        embeddings: &[MessageEmbedding],
    ) -> Result<(), StoreError> {
        if self.writes.fetch_add(1, Ordering::SeqCst) < self.failures {
            return Err(StoreError::Unavailable("connection refused".into()));
        }
        self.inner.store_embeddings(embedder, embeddings).await
    }

    async fn search(&self, query: &RecallQuery) -> Result<Vec<RecalledMessage>, StoreError> {
        self.inner.search(query).await
    }
}

fn query(agent: &str, user: &str, text: &str) -> RecallQuery {
    RecallQuery {
        agent_id: agent.into(),
        user_id: user.into(),
        conversation_id: None,
        vector: OfflineEmbedder::vector(text),
        top_k: 5,
        before: 0,
        after: 0,
        exclude: None,
    }
}

fn texts(found: &[RecalledMessage]) -> Vec<&str> {
    found.iter().map(|r| r.message.content.as_str()).collect()
}

/// Stores the messages, lets the loop embed them all (with an embedder down for its first
/// calls and a database down for its first writes), then searches. `other` is a second
/// process's store on the same database (the same store for memory).
async fn contract(
    memory: &dyn ConversationStore,
    store: &'static dyn RecallStore,
    other: &dyn RecallStore,
) {
    let tool = Message::tool_result(ToolResult {
        tool_call_id: "t1".into(),
        tool_name: "weather".into(),
        args: json!({"city": "pizza town"}),
        result: json!("pizza weather"),
        is_error: false,
    });
    memory
        .append(
            &key("a", "u1", "c1"),
            &[
                Message::user("I love pizza with olives"),
                Message::assistant("Noted."),
                Message::user("Will it rain in Paris?"),
                Message::assistant("Sunny all day."),
            ],
        )
        .await
        .unwrap();
    memory
        .append(
            &key("a", "u1", "c2"),
            &[
                Message::system("pizza instructions"),
                Message::user("Let us talk about trains"),
                tool,
                Message::assistant("Happy to."),
                Message::user(""),
            ],
        )
        .await
        .unwrap();
    // The same conversation id under another user, and the same user under another agent.
    memory
        .append(
            &key("a", "u2", "c1"),
            &[Message::user("My pizza has pepperoni")],
        )
        .await
        .unwrap();
    memory
        .append(&key("b", "u1", "c1"), &[Message::user("Pizza for agent b")])
        .await
        .unwrap();

    let all = |s: &'static dyn RecallStore| async move {
        s.unembedded(&["a".into(), "b".into()], 0, 100)
            .await
            .unwrap()
    };
    let pending = all(store).await;
    assert_eq!(pending.len(), 11);
    assert!(
        pending.windows(2).all(|w| w[0].id < w[1].id),
        "oldest first"
    );
    let only_b = store.unembedded(&["b".into()], 0, 100).await.unwrap();
    assert_eq!(only_b.len(), 1);
    assert_eq!(only_b[0].message.content, "Pizza for agent b");
    let bounded = store.unembedded(&["a".into()], 0, 3).await.unwrap();
    assert_eq!(bounded.len(), 3);
    let after = store
        .unembedded(&["a".into()], bounded[2].id, 100)
        .await
        .unwrap();
    assert_eq!(after.len(), 7);
    assert!(store.unembedded(&[], 0, 100).await.unwrap().is_empty());

    // The loop: the embedder is down for its first 3 calls, the database for the first 2 writes.
    let embedder = Arc::new(Flaky {
        failures: 3,
        calls: AtomicUsize::new(0),
    });
    let flaky_store: Arc<dyn RecallStore> = Arc::new(FlakyStore {
        inner: store,
        failures: 2,
        writes: AtomicUsize::new(0),
    });
    let listed = embedder.clone();
    let agents: RecallAgents = Arc::new(move || {
        ["a", "b"]
            .into_iter()
            .map(|a| (a.to_owned(), listed.clone() as Arc<dyn Embedder>))
            .collect()
    });
    let wake = Arc::new(Notify::new());
    let cancel = CancellationToken::new();
    let task = tokio::spawn(run_embedder(
        flaky_store,
        agents,
        wake.clone(),
        cancel.clone(),
        EmbedderSettings {
            interval: Duration::from_millis(20),
            batch: 4,
            min_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(40),
            rescan: Duration::from_secs(60),
        },
    ));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !all(store).await.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not embedded: {:?}",
            all(store).await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(embedder.calls.load(Ordering::SeqCst) > 3);
    // A message stored while the loop runs is embedded once the loop is woken.
    memory
        .append(&key("a", "u1", "c3"), &[Message::user("Olives are green")])
        .await
        .unwrap();
    wake.notify_one();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !all(store).await.is_empty() {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cancel.cancel();
    task.await.unwrap();

    // User scope: every conversation of u1 with agent a, never u2's nor agent b's.
    let found = store
        .search(&query("a", "u1", "what did I say about pizza"))
        .await
        .unwrap();
    assert_eq!(texts(&found), ["I love pizza with olives"]);
    assert_eq!(found[0].conversation_id, "c1");
    assert_eq!(found[0].kind, RecalledKind::Hit);
    assert!(found[0].score > 0.4, "{}", found[0].score);
    let found = other.search(&query("a", "u1", "olives")).await.unwrap();
    assert_eq!(
        texts(&found),
        ["I love pizza with olives", "Olives are green"]
    );
    assert_eq!(found[1].conversation_id, "c3");
    let found = store.search(&query("a", "u2", "pizza")).await.unwrap();
    assert_eq!(texts(&found), ["My pizza has pepperoni"]);
    let found = store.search(&query("b", "u1", "pizza")).await.unwrap();
    assert_eq!(texts(&found), ["Pizza for agent b"]);
    assert!(
        store
            .search(&query("c", "u1", "pizza"))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .search(&query("a", "u3", "pizza"))
            .await
            .unwrap()
            .is_empty()
    );
    // Tool and system messages are not embedded; nothing scores zero.
    let found = store
        .search(&query("a", "u1", "instructions"))
        .await
        .unwrap();
    assert!(found.is_empty(), "{found:?}");
    // A vector of another length compares with nothing.
    let mut short = query("a", "u1", "pizza");
    short.vector.truncate(8);
    assert!(store.search(&short).await.unwrap().is_empty());

    // Conversation scope.
    let mut in_c2 = query("a", "u1", "pizza trains");
    in_c2.conversation_id = Some("c2".into());
    assert_eq!(
        texts(&store.search(&in_c2).await.unwrap()),
        ["Let us talk about trains"]
    );
    in_c2.conversation_id = Some("c9".into());
    assert!(store.search(&in_c2).await.unwrap().is_empty());

    // The range around a hit stays in the hit's conversation, oldest first; a message is given
    // once, a hit stays a hit.
    let mut around = query("a", "u1", "rain Paris");
    around.before = 5;
    around.after = 5;
    let found = store.search(&around).await.unwrap();
    assert_eq!(
        texts(&found),
        [
            "I love pizza with olives",
            "Noted.",
            "Will it rain in Paris?",
            "Sunny all day."
        ]
    );
    let kinds: Vec<_> = found.iter().map(|r| r.kind).collect();
    assert_eq!(
        kinds,
        [
            RecalledKind::Neighbour,
            RecalledKind::Neighbour,
            RecalledKind::Hit,
            RecalledKind::Neighbour
        ]
    );
    assert!(found.iter().all(|r| r.score == found[2].score));
    let mut around = query("a", "u1", "trains");
    around.before = 1;
    around.after = 1;
    let found = store.search(&around).await.unwrap();
    assert_eq!(found.len(), 3);
    assert_eq!(found[0].message.content, "pizza instructions");
    assert_eq!(
        found[2].message.tool_result.as_ref().unwrap().tool_name,
        "weather"
    );
    let mut two = query("a", "u1", "pizza olives rain Paris");
    two.top_k = 2;
    two.after = 1;
    let found = store.search(&two).await.unwrap();
    assert_eq!(
        texts(&found),
        [
            "I love pizza with olives",
            "Noted.",
            "Will it rain in Paris?",
            "Sunny all day."
        ]
    );
    assert_eq!(found[2].kind, RecalledKind::Hit);
    let top1 = {
        let mut q = two.clone();
        q.top_k = 1;
        store.search(&q).await.unwrap()
    };
    assert_eq!(texts(&top1), ["Will it rain in Paris?", "Sunny all day."]);

    // Exclusion: the newest messages of the current conversation are in the context already.
    let mut recent = query("a", "u1", "pizza olives rain Paris");
    recent.after = 5;
    recent.exclude = Some(RecentMessages {
        conversation_id: "c1".into(),
        count: 2,
    });
    let found = store.search(&recent).await.unwrap();
    assert_eq!(
        texts(&found),
        ["I love pizza with olives", "Noted.", "Olives are green"]
    );
    recent.exclude = Some(RecentMessages {
        conversation_id: "c1".into(),
        count: 50,
    });
    assert_eq!(
        texts(&store.search(&recent).await.unwrap()),
        ["Olives are green"]
    );
    recent.exclude = Some(RecentMessages {
        conversation_id: "c2".into(),
        count: 50,
    });
    assert_eq!(store.search(&recent).await.unwrap().len(), 5);

    // Storing again is harmless: the first embedding stays; a message that does not exist is
    // skipped.
    let pizza_id = store.search(&query("a", "u1", "pizza")).await.unwrap()[0].id;
    store
        .store_embeddings(
            "offline",
            &[
                MessageEmbedding {
                    message_id: pizza_id,
                    vector: Some(OfflineEmbedder::vector("trains")),
                },
                MessageEmbedding {
                    message_id: pizza_id,
                    vector: None,
                },
                MessageEmbedding {
                    message_id: 1_000_000,
                    vector: Some(OfflineEmbedder::vector("ghost")),
                },
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        texts(&other.search(&query("a", "u1", "pizza")).await.unwrap()),
        ["I love pizza with olives"]
    );
    assert!(
        other
            .search(&query("a", "u1", "ghost"))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(all(store).await.is_empty());
}

#[tokio::test]
async fn memory() {
    let store: &'static InMemoryConversationStore =
        Box::leak(Box::new(InMemoryConversationStore::default()));
    contract(store, store, store).await;
}

#[tokio::test]
async fn sqlite() {
    let path = std::env::temp_dir().join(format!(
        "agentry-recall-{}.db",
        uuid::Uuid::new_v4().simple()
    ));
    let db = Database::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    db.migrate().await.unwrap();
    let leaked: &'static Arc<dyn RecallStore> = Box::leak(Box::new(db.recall_store()));
    let store: &'static dyn RecallStore = &**leaked;
    let other = db.recall_store();
    contract(db.conversation_store().as_ref(), store, other.as_ref()).await;
    db.close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

#[tokio::test]
async fn postgres() {
    let pg = agentry_testdb::PgDatabase::create("agentry_recall")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let db = Database::connect(&pg.url).await.unwrap();
    db.migrate().await.unwrap();
    let leaked: &'static Arc<dyn RecallStore> = Box::leak(Box::new(db.recall_store()));
    let store: &'static dyn RecallStore = &**leaked;
    let other = db.recall_store();
    contract(db.conversation_store().as_ref(), store, other.as_ref()).await;
    db.close().await;
    pg.drop_now().await;
}

/// Indexes past the memory budget are dropped, least lately used first (never the one just
/// used), and a dropped index is loaded again by its next search.
#[tokio::test]
async fn sqlite_indexes_stay_within_their_budget() {
    let db = Database::connect("sqlite::memory:").await.unwrap();
    db.migrate().await.unwrap();
    let Database::Sqlite(pool) = &db else {
        unreachable!()
    };
    let memory = db.conversation_store();
    let writer = SqlRecallStore::new(pool.clone());
    for user in ["u1", "u2"] {
        memory
            .append(
                &key("a", user, "c"),
                &[Message::user(format!("pizza for {user}"))],
            )
            .await
            .unwrap();
    }
    let pending = writer.unembedded(&["a".into()], 0, 10).await.unwrap();
    let embeddings: Vec<MessageEmbedding> = pending
        .iter()
        .map(|m| MessageEmbedding {
            message_id: m.id,
            vector: Some(OfflineEmbedder::vector(&m.message.content)),
        })
        .collect();
    writer
        .store_embeddings("offline", &embeddings)
        .await
        .unwrap();

    let store = SqlRecallStore::new(pool.clone()).with_memory_budget(1);
    let found = store.search(&query("a", "u1", "pizza")).await.unwrap();
    assert_eq!(texts(&found), ["pizza for u1"]);
    let one = store.index_bytes();
    assert!(one > 0);
    let found = store.search(&query("a", "u2", "pizza")).await.unwrap();
    assert_eq!(texts(&found), ["pizza for u2"]);
    // Only u2's index is left.
    assert!(
        store.index_bytes() <= one + 64,
        "{} {one}",
        store.index_bytes()
    );
    let unbounded = SqlRecallStore::new(pool.clone());
    unbounded.search(&query("a", "u1", "pizza")).await.unwrap();
    unbounded.search(&query("a", "u2", "pizza")).await.unwrap();
    assert!(unbounded.index_bytes() >= 2 * one - 64);
    let found = store.search(&query("a", "u1", "pizza")).await.unwrap();
    assert_eq!(texts(&found), ["pizza for u1"]);
    db.close().await;
}
