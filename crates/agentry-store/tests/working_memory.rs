//! The contract of `WorkingMemoryStore`, run against every store: the in-memory one of
//! `agentry-agents`, SQLite (a fresh file) and PostgreSQL (a fresh database per test). Agents'
//! working memories (the tool and the routes) rely on exactly these behaviours.

use agentry_agents::{InMemoryWorkingMemoryStore, WorkingMemoryKey, WorkingMemoryStore};
use agentry_store::Database;
use chrono::{DateTime, Duration, Utc};
use serde_json::json;

fn key(agent: &str, user: &str, conversation: Option<&str>) -> WorkingMemoryKey {
    WorkingMemoryKey {
        agent_id: agent.into(),
        user_id: user.into(),
        conversation_id: conversation.map(str::to_owned),
    }
}

async fn contract(store: &dyn WorkingMemoryStore) {
    // Milliseconds: what the databases keep.
    let t = DateTime::from_timestamp_millis(Utc::now().timestamp_millis()).unwrap();
    let mine = key("assistant", "user:u1", None);
    assert_eq!(store.get(&mine).await.unwrap(), None);

    let first = json!({"city": "Paris", "units": "metric", "note": "é ✓ \"quoted\""});
    let stored = store.put(&mine, &first, t).await.unwrap();
    assert_eq!(
        (stored.value.clone(), stored.updated_at),
        (first.clone(), t)
    );
    assert_eq!(store.get(&mine).await.unwrap(), Some(stored));

    // Replaced as a whole, with its new time.
    let later = t + Duration::seconds(5);
    let second = json!({"units": "imperial"});
    store.put(&mine, &second, later).await.unwrap();
    let read = store.get(&mine).await.unwrap().unwrap();
    assert_eq!((read.value, read.updated_at), (second.clone(), later));

    // Every part of the key keeps memories apart: the agent, the user, the conversation.
    for other in [
        key("other", "user:u1", None),
        key("assistant", "u1", None),
        key("assistant", "user:u2", None),
        key("assistant", "user:u1", Some("c1")),
    ] {
        assert_eq!(store.get(&other).await.unwrap(), None, "{other:?}");
    }
    let c1 = key("assistant", "user:u1", Some("c1"));
    let c2 = key("assistant", "user:u1", Some("c2"));
    let text = json!("# Notes\n- likes tea");
    store.put(&c1, &text, t).await.unwrap();
    assert_eq!(store.get(&c1).await.unwrap().unwrap().value, text);
    assert_eq!(store.get(&c2).await.unwrap(), None);
    assert_eq!(store.get(&mine).await.unwrap().unwrap().value, second);
}

#[tokio::test]
async fn memory() {
    contract(&InMemoryWorkingMemoryStore::default()).await;
}

#[tokio::test]
async fn sqlite() {
    let path = std::env::temp_dir().join(format!(
        "agentry-working-memory-{}.db",
        uuid::Uuid::new_v4().simple()
    ));
    let db = Database::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    db.migrate().await.unwrap();
    contract(db.working_memory_store().as_ref()).await;
    db.close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

#[tokio::test]
async fn postgres() {
    let pg = agentry_testdb::PgDatabase::create("agentry_working_memory")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let db = Database::connect(&pg.url).await.unwrap();
    db.migrate().await.unwrap();
    contract(db.working_memory_store().as_ref()).await;
    db.close().await;
    pg.drop_now().await;
}
