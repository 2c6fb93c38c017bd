//! The contract of `ScheduleStore`, run against every store: the in-memory one of
//! `agentry-core`, SQLite (a fresh file) and PostgreSQL (a fresh database per test). The
//! scheduler relies on exactly these behaviours.

use std::time::Duration;

use agentry_engine::store::StoreError;
use agentry_schedules::{
    Fire, FireOrigin, FireState, InMemoryScheduleStore, Overlap, Schedule, ScheduleStore,
    fire_execution_id,
};
use agentry_store::Database;
use chrono::{DateTime, Utc};
use serde_json::json;

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn schedule(id: &str, owner: Option<&str>, due: Option<&str>) -> Schedule {
    let t = at("2026-11-27T02:00:00.125Z");
    Schedule {
        id: id.into(),
        workflow_id: "word-count".into(),
        cron: "*/10 * * * * *".into(),
        timezone: "Europe/Paris".into(),
        input: json!({"text": "a b", "nested": {"z": 1, "a": [true, null]}}),
        overlap: Overlap::BufferOne,
        catchup_window: Duration::from_secs(3600),
        owner: owner.map(str::to_owned),
        declared: false,
        paused: false,
        created_at: t,
        updated_at: t,
        cursor: t,
        buffered: Some(at("2026-11-27T02:00:10Z")),
        skipped: 3,
        fires: vec![Fire {
            fire_time: t,
            execution_id: fire_execution_id(id, t),
            origin: FireOrigin::Trigger,
            state: FireState::Failed {
                error: "Workflow x not found".into(),
            },
            decided_at: t,
        }],
        due_at: due.map(at),
        version: 1,
    }
}

async fn contract(store: &dyn ScheduleStore) {
    let a = schedule("a", Some("alice"), Some("2026-11-27T02:00:20Z"));
    store.insert(&a).await.unwrap();
    assert!(matches!(
        store.insert(&a).await,
        Err(StoreError::Duplicate(_))
    ));
    assert_eq!(store.get("a").await.unwrap(), Some(a.clone()));
    assert_eq!(store.get("nope").await.unwrap(), None);

    let b = schedule("b", Some("bob"), Some("2026-11-27T02:00:10Z"));
    let c = schedule("c", None, None);
    store.insert(&b).await.unwrap();
    store.insert(&c).await.unwrap();
    assert_eq!(store.count(None).await.unwrap(), 3);
    assert_eq!(store.count(Some("bob")).await.unwrap(), 1);
    assert_eq!(store.count(Some("nobody")).await.unwrap(), 0);
    let ids = |v: Vec<Schedule>| v.into_iter().map(|s| s.id).collect::<Vec<_>>();
    assert_eq!(ids(store.list(None).await.unwrap()), ["a", "b", "c"]);
    assert_eq!(ids(store.list(Some("bob")).await.unwrap()), ["b"]);

    // Due: at or before now, the most overdue first; never one without a due time.
    assert_eq!(
        store.due(at("2026-11-27T02:00:20Z"), 10).await.unwrap(),
        ["b", "a"]
    );
    assert_eq!(
        store.due(at("2026-11-27T02:00:15Z"), 10).await.unwrap(),
        ["b"]
    );
    assert_eq!(
        store.due(at("2026-11-27T02:00:20Z"), 1).await.unwrap(),
        ["b"]
    );

    // A write needs the version read.
    let mut next = a.clone();
    next.skipped = 4;
    next.due_at = None;
    next.version = 2;
    assert!(store.compare_and_set(&next, 1).await.unwrap());
    assert!(!store.compare_and_set(&next, 1).await.unwrap());
    assert_eq!(store.get("a").await.unwrap(), Some(next.clone()));
    assert_eq!(
        store.due(at("2026-11-27T03:00:00Z"), 10).await.unwrap(),
        ["b"]
    );

    assert!(store.delete("a").await.unwrap());
    assert!(!store.delete("a").await.unwrap());
    assert!(!store.compare_and_set(&next, 2).await.unwrap());
    assert_eq!(store.count(None).await.unwrap(), 2);
}

#[tokio::test]
async fn memory() {
    contract(&InMemoryScheduleStore::new()).await;
}

#[tokio::test]
async fn sqlite() {
    let path = std::env::temp_dir().join(format!(
        "agentry-schedules-{}.db",
        uuid::Uuid::new_v4().simple()
    ));
    let db = Database::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    db.migrate().await.unwrap();
    contract(db.schedule_store().as_ref()).await;
    db.close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

#[tokio::test]
async fn postgres() {
    let pg = agentry_testdb::PgDatabase::create("agentry_schedules")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let db = Database::connect(&pg.url).await.unwrap();
    db.migrate().await.unwrap();
    contract(db.schedule_store().as_ref()).await;
    db.close().await;
    pg.drop_now().await;
}
