//! A store call that its caller abandons (a client that hung up, a `select!` that took another
//! branch, a time-out) must not leave anything behind on the connection it used. sqlx 0.9 on
//! PostgreSQL leaves the session inside a transaction when a future is dropped while its
//! `BEGIN` round trip is in flight (transact-rs/sqlx#4393): the pool then lends that connection
//! to the next caller, whose statements run inside the stale, read-only transaction and fail.
//! Here every call of the store is abandoned at many points of its way on a pool of ONE
//! connection, and the calls after each must all succeed.

use std::time::Duration;

use agentry_engine::state::ExecutionState;
use agentry_engine::store::{ExecutionRecord, ExecutionStore, Progress};
use agentry_store::PgStore;
use chrono::Utc;
use serde_json::json;
use sqlx::postgres::PgPoolOptions;

fn record(id: &str) -> ExecutionRecord {
    let now = Utc::now();
    ExecutionRecord {
        id: id.into(),
        workflow_id: "wf".into(),
        workflow_version: None,
        state: ExecutionState::Running {
            suspend_request: None,
        },
        input: json!({}),
        context: Default::default(),
        user_id: None,
        owner: None,
        lease: None,
        start_at: now,
        updated_at: now,
        progress: Progress::default(),
        version: 1,
        last_event: 0,
        queue: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_calls_never_poison_the_pool() {
    let db = agentry_testdb::PgDatabase::create("agentry_cancel")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let migrated = agentry_store::Database::connect(&db.url).await.unwrap();
    migrated.migrate().await.unwrap();
    migrated.close().await;

    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(5))
        .connect(&db.url)
        .await
        .unwrap();
    let store = PgStore::new(pool.clone());
    let rec = record("e-1");
    store.insert(&rec, &[]).await.unwrap();

    // Another connection watches the sessions of this database.
    let watcher = PgPoolOptions::new()
        .max_connections(1)
        .connect(&db.url)
        .await
        .unwrap();

    // Abandon reads after 0, 10, 20, ... microseconds: some before their `BEGIN` is sent, some
    // while it is in flight, some mid-transaction, some after.
    for round in 0..400u64 {
        let abandoned = store.get("e-1");
        let _ = tokio::time::timeout(Duration::from_micros(round * 10 % 2_000), abandoned).await;
        // The next call finds a clean connection: a statement outside any transaction (here a
        // heartbeat's UPDATE, which a leaked `READ ONLY` transaction refuses).
        let renewed = store.renew_leases("n-1", &["e-1".to_owned()]).await;
        assert!(
            renewed.is_ok(),
            "round {round}: a statement after an abandoned read failed: {renewed:?}"
        );
        // A read that was abandoned still runs to its end, on its own (inside a transaction
        // for a moment); a leaked one stays forever.
        let mut stuck = 0;
        for _ in 0..100 {
            stuck = sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid() \
                 AND state LIKE 'idle in transaction%'",
            )
            .fetch_one(&watcher)
            .await
            .unwrap();
            if stuck == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            stuck, 0,
            "round {round}: a session was left inside a transaction"
        );
        let read = store.get("e-1").await;
        assert!(
            matches!(&read, Ok(Some(_))),
            "round {round}: a read after an abandoned one failed: {read:?}"
        );
    }
    watcher.close().await;
    pool.close().await;
    db.drop_now().await;
}
