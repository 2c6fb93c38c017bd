//! The cost of one checkpoint as an execution's history grows, on SQLite and PostgreSQL.
//!
//! `cargo run --release -p agentry-store --example checkpoint_cost [postgres-admin-url]`
//!
//! One running execution takes 200 checkpoints as the engine writes them: each completes one
//! step with a 1 KB output and records the start of the next; the mean time of the first 20 and
//! of the last 20 is printed per database.

use std::time::{Duration, Instant};

use agentry_engine::state::ExecutionState;
use agentry_engine::store::{ExecutionRecord, Lease, Progress, StepRecord};
use agentry_store::Database;
use chrono::Utc;
use serde_json::{Map, json};

const CHECKPOINTS: usize = 200;
const WINDOW: usize = 20;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let admin = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let file = std::env::temp_dir().join(format!("agentry-bench-{}.db", std::process::id()));
    run("sqlite", &format!("sqlite://{}", file.display())).await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
    let name = format!("agentry_bench_{}", std::process::id());
    let admin_db = Database::connect(&admin).await.expect("PostgreSQL");
    let Database::Postgres(pool) = &admin_db else {
        panic!("not a PostgreSQL URL")
    };
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(pool)
        .await
        .expect("create database");
    let url = match admin.rsplit_once('/') {
        Some((base, _)) => format!("{base}/{name}"),
        None => panic!("bad URL"),
    };
    run("postgres", &url).await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE {name} WITH (FORCE)"
    )))
    .execute(pool)
    .await
    .expect("drop database");
}

async fn run(kind: &str, url: &str) {
    let db = Database::connect(url).await.expect("connect");
    db.migrate().await.expect("migrate");
    let store = db.execution_store();
    let now = Utc::now();
    let mut rec = ExecutionRecord {
        id: format!("bench-{}", uuid::Uuid::new_v4().simple()),
        workflow_id: "bench".into(),
        workflow_version: None,
        state: ExecutionState::Running {
            suspend_request: None,
        },
        input: json!({"text": "x".repeat(1024)}),
        context: Map::new(),
        user_id: None,
        owner: None,
        lease: Some(Lease {
            node: "bench".into(),
            epoch: 1,
            ttl: Duration::from_secs(10),
        }),
        start_at: now,
        updated_at: now,
        progress: Progress::default(),
        version: 1,
        last_event: 0,
        queue: None,
    };
    store.insert(&rec, &[]).await.expect("insert");
    let mut times = Vec::with_capacity(CHECKPOINTS);
    for i in 0..CHECKPOINTS {
        let before = rec.clone();
        rec.version += 1;
        rec.progress.next_step = i + 1;
        let now = Utc::now();
        let done =
            StepRecord::started(json!(i), 1, now).finished(json!("y".repeat(1024)), true, now);
        rec.progress
            .steps_mut()
            .insert(format!("step-{i}"), done.into());
        rec.progress.steps_mut().insert(
            format!("step-{}", i + 1),
            StepRecord::started(json!("y".repeat(1024)), 1, now).into(),
        );
        let changed = rec.progress.changed_since(&before.progress);
        let t = Instant::now();
        let written = store
            .compare_and_set(&rec, before.version, &changed, &[])
            .await
            .expect("write");
        times.push(t.elapsed());
        assert!(written);
    }
    let mean = |s: &[Duration]| s.iter().sum::<Duration>() / s.len() as u32;
    println!(
        "{kind}: one checkpoint, steps 1-{WINDOW}: {:?}; steps {}-{CHECKPOINTS}: {:?}",
        mean(&times[..WINDOW]),
        CHECKPOINTS - WINDOW + 1,
        mean(&times[CHECKPOINTS - WINDOW..])
    );
    db.close().await;
}
