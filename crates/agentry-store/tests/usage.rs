//! The contract of `UsageStore`, run against every store: in memory, SQLite (a fresh file) and
//! PostgreSQL (a fresh database per test). The daily token budgets rely on exactly this: adds
//! from many callers at once all count, per agent, user and day.

use agentry_agents::usage::{InMemoryUsageStore, UsageKey, UsageStore};
use agentry_store::Database;
use chrono::NaiveDate;
use std::sync::Arc;

fn key(agent: &str, user: &str, day: NaiveDate) -> UsageKey {
    UsageKey {
        agent_id: agent.into(),
        user_id: user.into(),
        day,
    }
}

async fn contract(store: Arc<dyn UsageStore>) {
    let d1 = NaiveDate::from_ymd_opt(2026, 11, 28).unwrap();
    let d2 = d1.succ_opt().unwrap();
    assert_eq!(store.used(&key("a", "u", d1)).await.unwrap(), 0);
    // Adds at once all count (one upsert each).
    let adds = (0..20).map(|_| {
        let store = store.clone();
        async move { store.add(&key("a", "u", d1), 5).await.unwrap() }
    });
    futures::future::join_all(adds).await;
    store.add(&key("a", "u", d2), 7).await.unwrap();
    store.add(&key("a", "other", d1), 1).await.unwrap();
    store.add(&key("b", "u", d1), 2).await.unwrap();
    assert_eq!(store.used(&key("a", "u", d1)).await.unwrap(), 100);
    assert_eq!(store.used(&key("a", "u", d2)).await.unwrap(), 7);
    assert_eq!(store.used(&key("a", "other", d1)).await.unwrap(), 1);
    assert_eq!(
        store.days("a", "u", d1, d2).await.unwrap(),
        [(d1, 100), (d2, 7)]
    );
    assert_eq!(store.days("a", "u", d2, d2).await.unwrap(), [(d2, 7)]);
    assert!(store.days("a", "nobody", d1, d2).await.unwrap().is_empty());
}

#[tokio::test]
async fn memory() {
    contract(Arc::new(InMemoryUsageStore::default())).await;
}

#[tokio::test]
async fn sqlite() {
    let path = std::env::temp_dir().join(format!(
        "agentry-usage-{}.db",
        uuid::Uuid::new_v4().simple()
    ));
    let db = Database::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    db.migrate().await.unwrap();
    contract(db.usage_store()).await;
    db.close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

#[tokio::test]
async fn postgres() {
    let pg = agentry_testdb::PgDatabase::create("agentry_usage")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let db = Database::connect(&pg.url).await.unwrap();
    db.migrate().await.unwrap();
    contract(db.usage_store()).await;
    db.close().await;
    pg.drop_now().await;
}
