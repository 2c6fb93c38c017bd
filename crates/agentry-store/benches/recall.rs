//! Semantic recall's speed on SQLite (a file database, as the server's): 100,000 messages of one
//! user (and 10,000 of another) stored through conversation memory, embedded by the background
//! loop with the offline embedder, then top-10 searches through `recall` (the query embedded, the
//! newest messages of the current conversation left out), as the hub runs them before a
//! generation. Prints the percentiles of the search's time.
//!
//! `cargo bench -p agentry-store --bench recall` (a release build).

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentry_agents::recall::{EmbedderSettings, RecallAgents, run_embedder};
use agentry_agents::{
    ConversationKey, Embedder, Message, OfflineEmbedder, RecallScope, RecallStore, SemanticRecall,
    recall,
};
use agentry_store::{Database, SqlRecallStore};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

const PER_CONVERSATION: usize = 100;
const VOCABULARY: u64 = 5_000;

/// A deterministic stream of words (a linear congruential generator over a made-up vocabulary).
struct Words(u64);

impl Words {
    fn sentence(&mut self, words: usize) -> String {
        (0..words)
            .map(|_| {
                self.0 = self
                    .0
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                format!("word{}", (self.0 >> 33) % VOCABULARY)
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

async fn store_user(db: &Database, user: &str, messages: usize, words: &mut Words) {
    let memory = db.conversation_store();
    for c in 0..messages / PER_CONVERSATION {
        let key = ConversationKey {
            agent_id: "assistant".into(),
            user_id: user.into(),
            conversation_id: format!("conversation-{c}"),
        };
        let batch: Vec<Message> = (0..PER_CONVERSATION)
            .map(|i| {
                let text = words.sentence(12);
                if i % 2 == 0 {
                    Message::user(text)
                } else {
                    Message::assistant(text)
                }
            })
            .collect();
        memory.append(&key, &batch).await.unwrap();
    }
}

#[tokio::main]
async fn main() {
    // `AGENTRY_RECALL_BENCH_MESSAGES` makes a smaller run (a check in a debug build).
    let messages: usize = std::env::var("AGENTRY_RECALL_BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let other_user = messages / 10;
    let searches = (messages / 100).clamp(10, 1_000);
    let path = std::env::temp_dir().join(format!(
        "agentry-recall-bench-{}.db",
        uuid::Uuid::new_v4().simple()
    ));
    let db = Database::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    db.migrate().await.unwrap();
    let Database::Sqlite(pool) = &db else {
        unreachable!("a SQLite URL")
    };

    let mut words = Words(7);
    let started = Instant::now();
    store_user(&db, "bench-user", messages, &mut words).await;
    store_user(&db, "other-user", other_user, &mut words).await;
    println!(
        "stored {} messages in {:.1} s",
        messages + other_user,
        started.elapsed().as_secs_f64()
    );

    // The background loop, as the server runs it.
    let store: Arc<dyn RecallStore> = Arc::new(SqlRecallStore::new(pool.clone()));
    let agents: RecallAgents = Arc::new(|| {
        vec![(
            "assistant".to_owned(),
            Arc::new(OfflineEmbedder) as Arc<dyn Embedder>,
        )]
    });
    let cancel = CancellationToken::new();
    let started = Instant::now();
    let task = tokio::spawn(run_embedder(
        store.clone(),
        agents,
        Arc::new(Notify::new()),
        cancel.clone(),
        EmbedderSettings::default(),
    ));
    let agent = ["assistant".to_owned()];
    while !store.unembedded(&agent, 0, 1).await.unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let embedding = started.elapsed();
    cancel.cancel();
    task.await.unwrap();
    println!(
        "embedded {} messages in {:.1} s ({:.0} messages/s, offline embedder, batches of 64)",
        messages + other_user,
        embedding.as_secs_f64(),
        (messages + other_user) as f64 / embedding.as_secs_f64()
    );
    let started = Instant::now();
    assert!(store.unembedded(&agent, 0, 64).await.unwrap().is_empty());
    println!(
        "a rescan for messages to embed, all embedded: {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );

    for (before, after) in [(0, 0), (2, 2)] {
        // A new process: its first search loads the index.
        let search = SqlRecallStore::new(pool.clone());
        let config = SemanticRecall::new(
            Arc::new(OfflineEmbedder),
            RecallScope::User,
            10,
            before,
            after,
        )
        .unwrap();
        let mut queries = Words(99);
        let mut times = Vec::with_capacity(searches);
        let mut found = 0;
        let first = Instant::now();
        recall(
            &search,
            &config,
            "assistant",
            "bench-user",
            "conversation-0",
            &queries.sentence(4),
            10,
        )
        .await
        .unwrap();
        let first = first.elapsed();
        for i in 0..searches {
            let conversation = format!("conversation-{}", i % (messages / PER_CONVERSATION));
            let text = queries.sentence(4);
            let started = Instant::now();
            let recalled = recall(
                &search,
                &config,
                "assistant",
                "bench-user",
                &conversation,
                &text,
                10,
            )
            .await
            .unwrap();
            times.push(started.elapsed());
            found += recalled.len();
        }
        times.sort();
        println!(
            "top-10 over {messages} messages of one user, {before} before and {after} after each \
             hit: first search (loads the index, {:.1} MiB) {:.0} ms; then {searches} searches: \
             p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({:.1} messages per answer)",
            search.index_bytes() as f64 / (1 << 20) as f64,
            first.as_secs_f64() * 1e3,
            percentile(&times, 0.5).as_secs_f64() * 1e3,
            percentile(&times, 0.99).as_secs_f64() * 1e3,
            times.last().unwrap().as_secs_f64() * 1e3,
            found as f64 / searches as f64
        );
    }

    db.close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}
