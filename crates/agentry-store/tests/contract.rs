//! The contract of `ExecutionStore`, run against every store: the in-memory one of
//! `agentry-core`, SQLite (a fresh file) and PostgreSQL (a fresh database per test, created and
//! dropped here). The engine relies on exactly these behaviours.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentry_engine::queue::{Queue, QueuePlace};
use agentry_engine::state::{ExecutionState, Status, SuspendRequest};
use agentry_engine::store::Dequeue;
use agentry_engine::store::{
    Claim, ExecutionRecord, ExecutionStore, Family, InMemoryExecutionStore, Lease, ListQuery,
    Progress, StatusCount, StepRecord, StoreError,
};
use agentry_engine::{EventKind, WorkflowEvent};
use agentry_store::Database;
use chrono::{DateTime, SubsecRound, Utc};
use serde_json::{Map, json};

/// Instantiates each named `async fn(&dyn ExecutionStore)` once per store.
macro_rules! contract {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(&super::InMemoryExecutionStore::new()).await;
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let db = super::TestDb::sqlite().await;
                    super::$name(db.store.as_ref()).await;
                    db.remove().await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let db = super::TestDb::postgres().await;
                    super::$name(db.store.as_ref()).await;
                    db.remove().await;
                }
            )*
        }
    };
}

contract!(
    a_record_reads_back_as_written,
    an_id_is_taken_once,
    a_write_needs_the_version_read,
    a_write_stores_the_header_and_the_named_steps_only,
    a_step_record_is_stored_only_under_the_lease,
    a_heartbeat_renews_the_named_runs_only,
    expired_leases_are_claimed_with_a_new_epoch,
    own_claims_take_the_node_s_live_leases,
    claims_take_registered_workflows_up_to_the_limit,
    concurrent_claimers_never_share_an_execution,
    a_write_by_the_same_hold_does_not_renew_its_lease,
    released_leases_are_claimable_at_once,
    events_are_stored_with_the_write_that_reports_them,
    lists_page_newest_first_by_status_and_owner,
    concurrent_writes_each_get_their_own_outcome,
    events_sent_by_key_are_kept_once_and_found_by_key,
    claims_and_timers_take_only_the_versions_named,
    live_nodes_are_known_by_their_versions,
    a_dequeue_starts_what_the_limits_allow,
    concurrent_dequeues_never_exceed_the_limits,
    a_dequeue_serves_priorities_then_keys_in_turn,
    a_dequeue_keeps_to_the_rate_window,
    queue_counts_are_per_key_and_status,
    a_pruned_key_is_forgotten,
);

/// A database for one test.
struct TestDb {
    database: Database,
    store: Arc<dyn ExecutionStore>,
    cleanup: Cleanup,
}

enum Cleanup {
    File(std::path::PathBuf),
    Postgres(Box<agentry_testdb::PgDatabase>),
}

impl TestDb {
    async fn sqlite() -> TestDb {
        let path = std::env::temp_dir().join(format!(
            "agentry-contract-{}.db",
            uuid::Uuid::new_v4().simple()
        ));
        Self::open(&format!("sqlite://{}", path.display()), Cleanup::File(path)).await
    }

    async fn postgres() -> TestDb {
        let db = agentry_testdb::PgDatabase::create("agentry_contract")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let url = db.url.clone();
        Self::open(&url, Cleanup::Postgres(Box::new(db))).await
    }

    async fn open(url: &str, cleanup: Cleanup) -> TestDb {
        let database = Database::connect(url).await.expect("connect");
        database.migrate().await.expect("migrate");
        let store = database.execution_store();
        TestDb {
            database,
            store,
            cleanup,
        }
    }

    async fn remove(self) {
        self.database.close().await;
        match self.cleanup {
            Cleanup::File(path) => {
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
            }
            Cleanup::Postgres(db) => db.drop_now().await,
        }
    }
}

/// Now, to the microsecond (what every store keeps).
fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
}

fn lease(node: &str, epoch: i64, ttl: Duration) -> Lease {
    Lease {
        node: node.into(),
        epoch,
        ttl,
    }
}

fn running() -> ExecutionState {
    ExecutionState::Running {
        suspend_request: None,
    }
}

/// A running execution of `workflow` held by `lease`, its first step done and its second
/// started, with a child record.
fn record(workflow: &str, lease: Option<Lease>) -> ExecutionRecord {
    let at = now();
    let mut steps = BTreeMap::new();
    steps.insert(
        "first".to_owned(),
        StepRecord::started(json!({"n": 1}), 1, at).finished(json!({"n": 2}), true, at),
    );
    steps.insert(
        "child".to_owned(),
        StepRecord {
            parent: Some("first".into()),
            ..StepRecord::started(json!({"n": 1}), 1, at).finished(json!("c"), false, at)
        },
    );
    steps.insert(
        "second".to_owned(),
        StepRecord::started(json!({"n": 2}), 2, at),
    );
    let mut context = Map::new();
    context.insert("userId".into(), json!("u-1"));
    ExecutionRecord {
        id: format!("x-{}", uuid::Uuid::new_v4().simple()),
        workflow_id: workflow.into(),
        workflow_version: Some(VERSION.into()),
        state: running(),
        input: json!({"text": "ünïcode", "list": [1, 2.5, null]}),
        context,
        user_id: Some("u-1".into()),
        owner: Some("owner-1".into()),
        lease,
        start_at: at,
        updated_at: at,
        progress: Progress {
            next_step: 1,
            steps: std::sync::Arc::new(steps.into_iter().map(|(k, v)| (k, v.into())).collect()),
        },
        version: 1,
        last_event: 0,
        queue: None,
    }
}

fn held() -> Option<Lease> {
    Some(lease("n1", 1, Duration::from_secs(60)))
}

async fn get(store: &dyn ExecutionStore, id: &str) -> ExecutionRecord {
    store.get(id).await.expect("get").expect("the execution")
}

/// Writes `next` over `before` (its version bumped), naming the steps that changed.
async fn write(
    store: &dyn ExecutionStore,
    before: &ExecutionRecord,
    mut next: ExecutionRecord,
) -> (bool, ExecutionRecord) {
    next.version = before.version + 1;
    let changed = next.progress.changed_since(&before.progress);
    let ok = store
        .compare_and_set(&next, before.version, &changed, &[])
        .await
        .expect("write");
    (ok, next)
}

fn claim<'a>(node: &'a str, own: bool, workflows: &'a [String], limit: u32) -> Claim<'a> {
    Claim {
        node,
        ttl: Duration::from_secs(60),
        own,
        workflows,
        limit,
    }
}

/// The version the records of these tests start on.
const VERSION: &str = "2026-11-27";

/// The claim keys of `names` in [`VERSION`].
fn wf(names: &[&str]) -> Vec<String> {
    names
        .iter()
        .map(|s| agentry_engine::store::workflow_key(s, Some(VERSION)))
        .collect()
}

async fn a_record_reads_back_as_written(store: &dyn ExecutionStore) {
    let rec = record("w", held());
    store.insert(&rec, &[]).await.expect("insert");
    assert_eq!(get(store, &rec.id).await, rec);
    assert!(store.get("x-missing").await.expect("get").is_none());
    // A finished one too: result, end, no lease.
    let mut done = record("w", None);
    done.state = ExecutionState::Completed {
        result: json!({"ok": true}),
        end_at: now(),
    };
    store.insert(&done, &[]).await.expect("insert");
    assert_eq!(get(store, &done.id).await, done);
    // Cancelled, failed in a step, suspended with a deadline: each reads back as written.
    let mut cancelled = record("w", None);
    cancelled.state = ExecutionState::Cancelled(agentry_engine::state::Cancellation {
        cancelled_at: now(),
        reason: Some("not needed".into()),
    });
    let mut failed = record("w", None);
    failed.state = ExecutionState::Error {
        message: "boom".into(),
        step_id: Some("second".into()),
        end_at: now(),
    };
    let mut waiting = record("w", None);
    waiting.state = ExecutionState::Suspended(agentry_engine::Suspension {
        suspended_at: now(),
        reason: "approval".into(),
        step_index: 1,
        step_id: "second".into(),
        data: Some(json!({"a": 1})),
        deadline: Some(now() + chrono::Duration::hours(1)),
        event: Some(agentry_engine::state::EventWait {
            name: "payment".into(),
            key: Some("o-1".into()),
            entry: "event-0".into(),
            also: vec![agentry_engine::state::AwaitedEvent::new(
                "refund",
                Some("o_1%"),
            )],
        }),
    });
    for r in [&cancelled, &failed, &waiting] {
        store.insert(r, &[]).await.expect("insert");
        assert_eq!(&get(store, &r.id).await, r);
    }
    // Read to be changed (without the snapshot), at rest it is the same record.
    for r in [&rec, &done, &cancelled, &failed, &waiting] {
        let again = store.get_to_update(&r.id).await.expect("get_to_update");
        assert_eq!(again.as_ref(), Some(r));
    }
    assert!(
        store
            .get_to_update("x-missing")
            .await
            .expect("get_to_update")
            .is_none()
    );
}

async fn an_id_is_taken_once(store: &dyn ExecutionStore) {
    let rec = record("w", held());
    store.insert(&rec, &[]).await.expect("insert");
    let again = record("other", None);
    let again = ExecutionRecord {
        id: rec.id.clone(),
        ..again
    };
    assert!(matches!(
        store.insert(&again, &[]).await,
        Err(StoreError::Duplicate(id)) if id == rec.id
    ));
    assert_eq!(get(store, &rec.id).await, rec, "the first one is untouched");
}

async fn a_write_needs_the_version_read(store: &dyn ExecutionStore) {
    let rec = record("w", held());
    store.insert(&rec, &[]).await.expect("insert");
    let mut next = rec.clone();
    next.state = ExecutionState::Running {
        suspend_request: Some(SuspendRequest {
            requested_at: now(),
            reason: "pause".into(),
        }),
    };
    let (ok, written) = write(store, &rec, next.clone()).await;
    assert!(ok);
    assert_eq!(get(store, &rec.id).await, written);
    // The same write again is from a stale read: refused, nothing written.
    let (ok, _) = write(store, &rec, next).await;
    assert!(!ok);
    assert_eq!(get(store, &rec.id).await, written);
    // A write to an execution that does not exist writes nothing.
    let ghost = record("w", held());
    let (ok, _) = write(store, &ghost, ghost.clone()).await;
    assert!(!ok);
    assert!(store.get(&ghost.id).await.expect("get").is_none());
}

async fn a_write_stores_the_header_and_the_named_steps_only(store: &dyn ExecutionStore) {
    let rec = record("w", held());
    store.insert(&rec, &[]).await.expect("insert");
    let at = now();
    let mut next = rec.clone();
    next.progress.next_step = 2;
    let done =
        StepRecord::clone(&next.progress.steps["second"]).finished(json!({"n": 3}), true, at);
    next.progress
        .steps_mut()
        .insert("second".into(), done.into());
    next.progress.steps_mut().insert(
        "third".into(),
        StepRecord::started(json!({"n": 3}), 1, at).into(),
    );
    next.progress.steps_mut().remove("child");
    let mut expected = next.clone();
    expected.version = rec.version + 1;
    // Only "second", "third" and "child" (removed) are named: a change elsewhere is not
    // written.
    let mut sneaky = next.clone();
    sneaky.version = rec.version + 1;
    std::sync::Arc::make_mut(sneaky.progress.steps_mut().get_mut("first").expect("first"))
        .attempt = 9;
    let ok = store
        .compare_and_set(&sneaky, rec.version, &["second", "third", "child"], &[])
        .await
        .expect("write");
    assert!(ok);
    let stored = get(store, &rec.id).await;
    assert_eq!(stored, expected);
    assert_eq!(stored.progress.steps["first"].attempt, 1);
    // The input, context, user and owner are the insert's, whatever a write carries.
    let mut other = stored.clone();
    other.input = json!("changed");
    other.context = Map::new();
    other.owner = None;
    other.user_id = None;
    let (ok, _) = write(store, &stored, other).await;
    assert!(ok);
    let again = get(store, &rec.id).await;
    assert_eq!(
        (&again.input, &again.context, &again.owner, &again.user_id),
        (&rec.input, &rec.context, &rec.owner, &rec.user_id)
    );
}

async fn a_step_record_is_stored_only_under_the_lease(store: &dyn ExecutionStore) {
    let rec = record("w", held());
    store.insert(&rec, &[]).await.expect("insert");
    let at = now();
    let child = StepRecord {
        parent: Some("second".into()),
        ..StepRecord::started(json!(1), 2, at).finished(json!(2), true, at)
    };
    let mine = rec.lease.clone().expect("lease");
    assert!(
        store
            .record_step(&rec.id, &mine, "a", &child)
            .await
            .expect("record")
    );
    let stale = lease("n1", 0, mine.ttl);
    let stranger = lease("n2", 1, mine.ttl);
    for other in [&stale, &stranger] {
        assert!(
            !store
                .record_step(&rec.id, other, "b", &child)
                .await
                .expect("record")
        );
    }
    let stored = get(store, &rec.id).await;
    assert_eq!(
        stored.progress.steps.get("a").map(|s| s.as_ref()),
        Some(&child)
    );
    assert!(!stored.progress.steps.contains_key("b"));
    assert_eq!(
        stored.version, rec.version,
        "a step record is not a new version"
    );
    // Not running any more: refused.
    let mut next = stored.clone();
    next.state = ExecutionState::Error {
        step_id: Some("second".into()),
        message: "boom".into(),
        end_at: now(),
    };
    assert!(write(store, &stored, next).await.0);
    assert!(
        !store
            .record_step(&rec.id, &mine, "c", &child)
            .await
            .expect("record")
    );
}

async fn a_heartbeat_renews_the_named_runs_only(store: &dyn ExecutionStore) {
    let short = Duration::from_millis(200);
    let alive = record("w", Some(lease("n1", 1, short)));
    let dead = record("w", Some(lease("n1", 1, short)));
    let others = record("w", Some(lease("n2", 1, short)));
    for r in [&alive, &dead, &others] {
        store.insert(r, &[]).await.expect("insert");
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let ids = vec![alive.id.clone(), others.id.clone()];
    let renewed = store.renew_leases("n1", &ids).await.expect("renew");
    assert_eq!(
        renewed,
        vec![alive.id.clone()],
        "only n1's, and only those named"
    );
    tokio::time::sleep(Duration::from_millis(150)).await;
    // `dead` expired; `alive` was renewed; `others` belongs to n2 (not renewed by n1).
    let workflows = wf(&["w"]);
    let claimed = store
        .claim_orphans(&claim("n3", false, &workflows, 10))
        .await
        .expect("claim");
    let mut ids: Vec<&str> = claimed.iter().map(|r| r.id.as_str()).collect();
    ids.sort_unstable();
    let mut expected = vec![dead.id.as_str(), others.id.as_str()];
    expected.sort_unstable();
    assert_eq!(ids, expected);
}

async fn expired_leases_are_claimed_with_a_new_epoch(store: &dyn ExecutionStore) {
    let rec = record("w", Some(lease("n1", 4, Duration::from_millis(50))));
    let fresh = record("w", held());
    let unheld = record("w", None);
    let mut suspended = record("w", None);
    suspended.state = ExecutionState::Error {
        step_id: None,
        message: "x".into(),
        end_at: now(),
    };
    for r in [&rec, &fresh, &unheld, &suspended] {
        store.insert(r, &[]).await.expect("insert");
    }
    tokio::time::sleep(Duration::from_millis(120)).await;
    let workflows = wf(&["w"]);
    let claimed = store
        .claim_orphans(&claim("n2", false, &workflows, 10))
        .await
        .expect("claim");
    assert_eq!(
        claimed.len(),
        2,
        "the expired one and the one without a lease"
    );
    let taken = claimed
        .iter()
        .find(|r| r.id == rec.id)
        .expect("the expired one");
    assert_eq!(taken.lease, Some(lease("n2", 5, Duration::from_secs(60))));
    assert_eq!(taken.version, rec.version + 1);
    assert_eq!(taken.progress, rec.progress, "claimed with its steps");
    assert_eq!(&get(store, &rec.id).await, taken);
    // Claimed now: nobody else gets them.
    let again = store
        .claim_orphans(&claim("n3", false, &workflows, 10))
        .await
        .expect("claim");
    assert!(again.is_empty(), "{again:?}");
}

async fn own_claims_take_the_node_s_live_leases(store: &dyn ExecutionStore) {
    let mine = record("w", held());
    let theirs = record("w", Some(lease("n2", 1, Duration::from_secs(60))));
    store.insert(&mine, &[]).await.expect("insert");
    store.insert(&theirs, &[]).await.expect("insert");
    let workflows = wf(&["w"]);
    let none = store
        .claim_orphans(&claim("n1", false, &workflows, 10))
        .await
        .expect("claim");
    assert!(none.is_empty());
    let own = store
        .claim_orphans(&claim("n1", true, &workflows, 10))
        .await
        .expect("claim");
    assert_eq!(own.len(), 1);
    assert_eq!(own[0].id, mine.id);
    assert_eq!(own[0].lease.as_ref().map(|l| l.epoch), Some(2), "fenced");
}

async fn claims_take_registered_workflows_up_to_the_limit(store: &dyn ExecutionStore) {
    let mut ids = Vec::new();
    for i in 0..5 {
        let mut r = record(if i < 4 { "known" } else { "unknown" }, None);
        r.start_at = now() + chrono::Duration::milliseconds(i);
        store.insert(&r, &[]).await.expect("insert");
        ids.push(r.id);
    }
    let workflows = wf(&["known"]);
    let first = store
        .claim_orphans(&claim("n1", false, &workflows, 3))
        .await
        .expect("claim");
    let got: Vec<&str> = first.iter().map(|r| r.id.as_str()).collect();
    let mut oldest: Vec<&str> = ids[..3].iter().map(String::as_str).collect();
    let mut sorted = got.clone();
    sorted.sort_unstable();
    oldest.sort_unstable();
    assert_eq!(sorted, oldest, "the oldest first");
    let rest = store
        .claim_orphans(&claim("n1", false, &workflows, 3))
        .await
        .expect("claim");
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].id, ids[3]);
    let nothing = store
        .claim_orphans(&claim("n1", false, &[], 3))
        .await
        .expect("claim");
    assert!(nothing.is_empty());
}

async fn concurrent_claimers_never_share_an_execution(store: &dyn ExecutionStore) {
    let mut ids = Vec::new();
    for _ in 0..40 {
        let r = record("w", None);
        store.insert(&r, &[]).await.expect("insert");
        ids.push(r.id);
    }
    let workflows = wf(&["w"]);
    let nodes: Vec<String> = (0..6).map(|i| format!("n{i}")).collect();
    let claims = nodes.iter().map(|node| {
        let workflows = &workflows;
        async move {
            let mut got = Vec::new();
            for _ in 0..5 {
                let batch = store
                    .claim_orphans(&claim(node, false, workflows, 4))
                    .await
                    .expect("claim");
                got.extend(batch.into_iter().map(|r| (r.id, node.clone())));
            }
            got
        }
    });
    let all: Vec<(String, String)> = futures::future::join_all(claims)
        .await
        .into_iter()
        .flatten()
        .collect();
    let mut claimed: Vec<&str> = all.iter().map(|(id, _)| id.as_str()).collect();
    claimed.sort_unstable();
    let before = claimed.len();
    claimed.dedup();
    assert_eq!(before, claimed.len(), "an execution was claimed twice");
    assert_eq!(claimed.len(), 40);
    for (id, node) in &all {
        let stored = get(store, id).await;
        assert_eq!(
            stored.lease.as_ref().map(|l| l.node.as_str()),
            Some(node.as_str())
        );
    }
}

async fn a_write_by_the_same_hold_does_not_renew_its_lease(store: &dyn ExecutionStore) {
    let rec = record("w", Some(lease("n1", 1, Duration::from_millis(100))));
    store.insert(&rec, &[]).await.expect("insert");
    tokio::time::sleep(Duration::from_millis(150)).await;
    // A suspend request written by another process keeps the dead owner's lease expired.
    let mut next = rec.clone();
    next.state = ExecutionState::Running {
        suspend_request: Some(SuspendRequest {
            requested_at: now(),
            reason: "pause".into(),
        }),
    };
    assert!(write(store, &rec, next).await.0);
    let workflows = wf(&["w"]);
    let claimed = store
        .claim_orphans(&claim("n2", false, &workflows, 10))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1);
    // A new hold written by a write (a resume) gets a full ttl.
    let taken = claimed[0].clone();
    let mut resumed = taken.clone();
    resumed.lease = Some(lease("n3", 9, Duration::from_secs(60)));
    assert!(write(store, &taken, resumed).await.0);
    let none = store
        .claim_orphans(&claim("n4", false, &workflows, 10))
        .await
        .expect("claim");
    assert!(none.is_empty());
}

async fn released_leases_are_claimable_at_once(store: &dyn ExecutionStore) {
    let rec = record("w", held());
    store.insert(&rec, &[]).await.expect("insert");
    let workflows = wf(&["w"]);
    assert!(
        store
            .claim_orphans(&claim("n2", false, &workflows, 10))
            .await
            .expect("claim")
            .is_empty()
    );
    assert_eq!(store.release_leases("n1").await.expect("release"), 1);
    let claimed = store
        .claim_orphans(&claim("n2", false, &workflows, 10))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].state, running());
}

fn event(rec: &ExecutionRecord, seq: i64, kind: EventKind) -> WorkflowEvent {
    WorkflowEvent {
        execution_id: rec.id.clone(),
        workflow_id: rec.workflow_id.clone(),
        seq: Some(seq),
        timestamp: now(),
        kind,
    }
}

fn kinds(events: &[WorkflowEvent]) -> Vec<(Option<i64>, String)> {
    events
        .iter()
        .map(|e| (e.seq, serde_json::to_string(&e.kind).expect("json")))
        .collect()
}

async fn events_are_stored_with_the_write_that_reports_them(store: &dyn ExecutionStore) {
    let mut rec = record("w", held());
    rec.last_event = 2;
    let first = vec![
        event(
            &rec,
            1,
            EventKind::WorkflowStart {
                input: rec.input.clone(),
                resumed: false,
            },
        ),
        event(
            &rec,
            2,
            EventKind::WorkflowComplete {
                result: json!({"ü": [1, null]}),
            },
        ),
    ];
    store.insert(&rec, &first).await.expect("insert");
    let mut next = rec.clone();
    next.version += 1;
    next.last_event = 3;
    let third = vec![event(
        &rec,
        3,
        EventKind::WorkflowError {
            step_id: None,
            error: "boom".into(),
        },
    )];
    assert!(
        store
            .compare_and_set(&next, rec.version, &[], &third)
            .await
            .expect("write")
    );
    // A refused write appends nothing.
    let late = vec![event(
        &rec,
        4,
        EventKind::WorkflowError {
            step_id: None,
            error: "late".into(),
        },
    )];
    assert!(
        !store
            .compare_and_set(&next, rec.version, &[], &late)
            .await
            .expect("write")
    );
    let all = store.events_after(&rec.id, 0, 100).await.expect("events");
    let mut expected = first.clone();
    expected.extend(third.clone());
    assert_eq!(kinds(&all), kinds(&expected));
    assert!(
        all.iter()
            .all(|e| e.workflow_id == "w" && e.execution_id == rec.id)
    );
    assert_eq!(all[0].timestamp, first[0].timestamp);
    let after = store.events_after(&rec.id, 1, 1).await.expect("events");
    assert_eq!(kinds(&after), kinds(&first[1..]));
    assert!(
        store
            .events_after(&rec.id, 3, 10)
            .await
            .expect("events")
            .is_empty()
    );
    assert!(
        store
            .events_after("x-none", 0, 10)
            .await
            .expect("events")
            .is_empty()
    );
    assert_eq!(get(store, &rec.id).await.last_event, 3);
}

async fn lists_page_newest_first_by_status_and_owner(store: &dyn ExecutionStore) {
    let base = now();
    let mut all = Vec::new();
    for i in 0..7i64 {
        let mut r = record(if i == 6 { "other" } else { "w" }, None);
        // Two share a start: the id breaks the tie.
        r.start_at = base + chrono::Duration::milliseconds(i.min(4));
        if i % 2 == 0 {
            r.owner = Some("alice".into());
        }
        if i == 3 {
            r.state = ExecutionState::Cancelled(agentry_engine::state::Cancellation {
                cancelled_at: now(),
                reason: None,
            });
        }
        store.insert(&r, &[]).await.expect("insert");
        all.push(r);
    }
    let mut expected: Vec<&ExecutionRecord> = all.iter().filter(|r| r.workflow_id == "w").collect();
    expected.sort_by(|a, b| (b.start_at, &b.id).cmp(&(a.start_at, &a.id)));
    let query = |before: Option<(DateTime<Utc>, String)>| ListQuery {
        family: Family::All,
        workflow_id: Some("w".into()),
        status: None,
        owner: None,
        before,
        limit: 2,
    };
    let mut seen = Vec::new();
    let mut before = None;
    loop {
        let page = store.list(&query(before.clone())).await.expect("list");
        assert!(
            page.iter().all(|r| r.progress.steps.is_empty()),
            "headers only"
        );
        seen.extend(page.iter().map(|r| r.id.clone()));
        match page.last() {
            Some(last) if page.len() == 2 => before = Some((last.start_at, last.id.clone())),
            _ => break,
        }
    }
    let ids: Vec<String> = expected.iter().map(|r| r.id.clone()).collect();
    assert_eq!(seen, ids);
    let cancelled = store
        .list(&ListQuery {
            family: Family::All,
            status: Some(agentry_engine::Status::Cancelled),
            limit: 10,
            ..query(None)
        })
        .await
        .expect("list");
    assert_eq!(cancelled.len(), 1);
    assert_eq!(cancelled[0].id, all[3].id);
    assert_eq!(cancelled[0].state, all[3].state);
    let alices = store
        .list(&ListQuery {
            family: Family::All,
            owner: Some("alice".into()),
            limit: 10,
            ..query(None)
        })
        .await
        .expect("list");
    assert_eq!(alices.len(), 3);
    assert!(alices.iter().all(|r| r.owner.as_deref() == Some("alice")));

    // Across workflows: every execution, newest first.
    let mut everyone: Vec<&ExecutionRecord> = all.iter().collect();
    everyone.sort_by(|a, b| (b.start_at, &b.id).cmp(&(a.start_at, &a.id)));
    let listed = store
        .list(&ListQuery {
            family: Family::All,
            workflow_id: None,
            limit: 10,
            ..query(None)
        })
        .await
        .expect("list");
    let ids = |rs: &[&ExecutionRecord]| rs.iter().map(|r| r.id.clone()).collect::<Vec<_>>();
    assert_eq!(
        listed.iter().map(|r| r.id.clone()).collect::<Vec<_>>(),
        ids(&everyone)
    );

    // Counts by workflow and status, everyone's or one owner's.
    let mut counts = store.count_by_status(None).await.expect("counts");
    counts.sort_by(|a, b| {
        (&a.workflow_id, a.status.as_str()).cmp(&(&b.workflow_id, b.status.as_str()))
    });
    let count = |workflow_id: &str, status: agentry_engine::Status, count: u64| StatusCount {
        workflow_id: workflow_id.into(),
        status,
        count,
    };
    use agentry_engine::Status as S;
    assert_eq!(
        counts,
        vec![
            count("other", S::Running, 1),
            count("w", S::Cancelled, 1),
            count("w", S::Running, 5),
        ]
    );
    let mut alices = store.count_by_status(Some("alice")).await.expect("counts");
    alices.sort_by(|a, b| a.workflow_id.cmp(&b.workflow_id));
    assert_eq!(
        alices,
        vec![count("other", S::Running, 1), count("w", S::Running, 3)]
    );
    assert!(
        store
            .count_by_status(Some("nobody"))
            .await
            .expect("counts")
            .is_empty()
    );
}

/// Many writes at once (the SQL stores commit them in groups): each caller gets the outcome of
/// its own write, whatever shares its commit: every distinct insert lands, of two inserts of one
/// id exactly one does, and of two checkpoints from the same read exactly one wins.
async fn concurrent_writes_each_get_their_own_outcome(store: &dyn ExecutionStore) {
    let records: Vec<ExecutionRecord> = (0..64).map(|_| record("w", held())).collect();
    let inserts = records.iter().chain(records.iter().take(8)).map(|r| {
        let events = [event(
            r,
            1,
            EventKind::WorkflowStart {
                input: r.input.clone(),
                resumed: false,
            },
        )];
        async move { store.insert(r, &events).await }
    });
    let outcomes = futures::future::join_all(inserts).await;
    let (ok, duplicate): (Vec<_>, Vec<_>) = outcomes.iter().partition(|o| o.is_ok());
    assert_eq!(ok.len(), 64, "every distinct id once");
    assert_eq!(duplicate.len(), 8);
    assert!(
        duplicate
            .iter()
            .all(|o| matches!(o, Err(StoreError::Duplicate(_)))),
        "{duplicate:?}"
    );
    for r in &records {
        assert_eq!(&get(store, &r.id).await, r);
        let log = store.events_after(&r.id, 0, 10).await.expect("events");
        assert_eq!(log.len(), 1);
        assert_eq!(log[0].seq, Some(1));
        assert_eq!(log[0].kind.type_name(), "workflow-start");
    }
    // Two checkpoints of each execution from the same read, all at once.
    let racing = records.iter().flat_map(|r| {
        [1u64, 2].map(|n| {
            let mut next = r.clone();
            next.state = ExecutionState::Running {
                suspend_request: Some(SuspendRequest {
                    requested_at: now(),
                    reason: format!("writer {n}"),
                }),
            };
            write(store, r, next)
        })
    });
    let outcomes = futures::future::join_all(racing).await;
    for (r, pair) in records.iter().zip(outcomes.chunks(2)) {
        let winners: Vec<&ExecutionRecord> =
            pair.iter().filter(|(ok, _)| *ok).map(|(_, w)| w).collect();
        assert_eq!(winners.len(), 1, "{}: exactly one checkpoint wins", r.id);
        assert_eq!(&get(store, &r.id).await, winners[0]);
    }
}

/// An event sent by key is kept once per name and id, found by key from a time on, records the
/// executions it woke, and is forgotten after the window; a suspended execution waiting for an
/// event by key is found by that key.
async fn events_sent_by_key_are_kept_once_and_found_by_key(store: &dyn ExecutionStore) {
    use agentry_engine::store::PublishedEvent;
    let sent = |id: &str, key: &str, at: DateTime<Utc>| PublishedEvent {
        name: "payment".into(),
        scope: "alice".into(),
        event_id: id.into(),
        key: key.into(),
        data: json!({"amount": 12.5, "text": "caf\u{e9} \u{1f600}"}),
        published_at: at,
        owner: Some("alice".into()),
        woken: None,
    };
    let old = now() - chrono::Duration::hours(2);
    let at = now();
    assert!(store.publish_event(&sent("e-1", "o-1", at)).await.unwrap());
    assert!(
        !store
            .publish_event(&sent("e-1", "o-2", now()))
            .await
            .unwrap()
    );
    // The same id in another sender's scope is another event.
    let bob_s = PublishedEvent {
        scope: "bob".into(),
        ..sent("e-1", "o-9", now())
    };
    assert!(store.publish_event(&bob_s).await.unwrap());
    assert!(store.publish_event(&sent("e-0", "o-1", old)).await.unwrap());
    assert!(
        store
            .publish_event(&sent("e-2", "o-2", now()))
            .await
            .unwrap()
    );
    let found = store
        .published_events("payment", "o-1", now() - chrono::Duration::hours(1), 10)
        .await
        .unwrap();
    assert_eq!(found, vec![sent("e-1", "o-1", at)]);
    store
        .record_woken("payment", "alice", "e-1", &["a".into(), "b".into()])
        .await
        .unwrap();
    let one = store
        .published_event("payment", "alice", "e-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(one.woken, Some(vec!["a".to_owned(), "b".to_owned()]));
    assert_eq!(one.owner.as_deref(), Some("alice"));
    let bob_s_read = store
        .published_event("payment", "bob", "e-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((bob_s_read.key.as_str(), bob_s_read.woken), ("o-9", None));
    // What is kept, by key and in all, with the bytes of the data.
    let load = store
        .published_load("payment", "o-1", now() - chrono::Duration::hours(1))
        .await
        .unwrap();
    let bytes = sent("e-1", "o-1", at).bytes();
    assert_eq!(
        load,
        agentry_engine::store::PublishedLoad {
            key_count: 1,
            key_bytes: bytes,
            count: 3,
            bytes: 3 * bytes,
        }
    );
    assert_eq!(
        store
            .prune_published(now() - chrono::Duration::hours(1))
            .await
            .unwrap(),
        1
    );
    assert!(
        store
            .published_event("payment", "alice", "e-0")
            .await
            .unwrap()
            .is_none()
    );

    let mut waiting = record("w", None);
    waiting.state = ExecutionState::Suspended(agentry_engine::Suspension {
        suspended_at: now(),
        reason: "Waiting for event payment".into(),
        step_index: 0,
        step_id: "first".into(),
        data: None,
        deadline: None,
        event: Some(agentry_engine::state::EventWait {
            name: "payment".into(),
            key: Some("o-1".into()),
            entry: "event-0".into(),
            also: Vec::new(),
        }),
    });
    store.insert(&waiting, &[]).await.unwrap();
    store.insert(&record("w", None), &[]).await.unwrap();
    assert_eq!(
        store.waiting_for_event("payment", "o-1", 10).await.unwrap(),
        vec![waiting.id.clone()]
    );
    // A step that waits for the first of several events is found by each of them, and by no
    // key its pattern's wildcards (`_`, `%`) would match.
    let mut either = record("w", None);
    let mut suspension = waiting.state.suspension().cloned().expect("suspended");
    if let Some(wait) = suspension.event.as_mut() {
        wait.key = Some("o_9%".into());
        wait.also = vec![agentry_engine::state::AwaitedEvent::new(
            "cancel",
            Some("o-9"),
        )];
    }
    either.state = ExecutionState::Suspended(suspension);
    store.insert(&either, &[]).await.unwrap();
    for (name, key) in [("payment", "o_9%"), ("cancel", "o-9")] {
        assert_eq!(
            store.waiting_for_event(name, key, 10).await.unwrap(),
            vec![either.id.clone()],
            "{name} {key}"
        );
    }
    for (name, key) in [("payment", "oX9%"), ("payment", "o_9x"), ("cancel", "o-9%")] {
        assert!(
            store
                .waiting_for_event(name, key, 10)
                .await
                .unwrap()
                .is_empty(),
            "{name} {key}"
        );
    }
    assert!(
        store
            .waiting_for_event("payment", "o-2", 10)
            .await
            .unwrap()
            .is_empty()
    );
    // Resumed, it waits no more.
    let mut resumed = waiting.clone();
    resumed.state = running();
    resumed.version = waiting.version + 1;
    assert!(
        store
            .compare_and_set(&resumed, waiting.version, &[], &[])
            .await
            .unwrap()
    );
    assert!(
        store
            .waiting_for_event("payment", "o-1", 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// A claim takes an execution only by its workflow version's key (an execution recorded before
/// versions by `<id>@`); so do due timers; in-flight executions are counted by version.
async fn claims_and_timers_take_only_the_versions_named(store: &dyn ExecutionStore) {
    let mut legacy = record("w", None);
    legacy.workflow_version = None;
    let mut other = record("w", None);
    other.workflow_version = Some("old".into());
    let current = record("w", None);
    for r in [&legacy, &other, &current] {
        store.insert(r, &[]).await.unwrap();
        assert_eq!(&get(store, &r.id).await, r);
    }
    let keys = vec![
        agentry_engine::store::workflow_key("w", Some(VERSION)),
        agentry_engine::store::workflow_key("w", None),
    ];
    let mut taken: Vec<String> = store
        .claim_orphans(&Claim {
            node: "n",
            ttl: Duration::from_secs(10),
            own: false,
            workflows: &keys,
            limit: 10,
        })
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    taken.sort();
    let mut want = vec![legacy.id.clone(), current.id.clone()];
    want.sort();
    assert_eq!(taken, want);
    let counts = store.in_flight_by_version("w").await.unwrap();
    assert_eq!(counts.iter().map(|(_, n)| n).sum::<u64>(), 3);
    assert!(counts.contains(&(Some("old".to_owned()), 1)), "{counts:?}");
    assert!(counts.contains(&(None, 1)), "{counts:?}");

    // A due timer of a version not named is not due for this claimer.
    let mut waiting = record("w", None);
    waiting.workflow_version = Some("old".into());
    waiting.state = ExecutionState::Suspended(agentry_engine::Suspension {
        suspended_at: now(),
        reason: "later".into(),
        step_index: 0,
        step_id: "first".into(),
        data: None,
        deadline: Some(now() - chrono::Duration::seconds(5)),
        event: None,
    });
    store.insert(&waiting, &[]).await.unwrap();
    assert!(store.due_timers(&keys, 10).await.unwrap().is_empty());
    let old = vec![agentry_engine::store::workflow_key("w", Some("old"))];
    assert_eq!(
        store.due_timers(&old, 10).await.unwrap(),
        vec![waiting.id.clone()]
    );
}

/// The versions of the nodes announced lately are live; a forgotten node's are not.
async fn live_nodes_are_known_by_their_versions(store: &dyn ExecutionStore) {
    let minute = Duration::from_secs(60);
    assert!(store.live_versions(minute).await.unwrap().is_empty());
    store
        .announce_node("a", &["w@1".into(), "w@2".into()])
        .await
        .unwrap();
    store.announce_node("b", &["w@2".into()]).await.unwrap();
    store.announce_node("b", &["v@9".into()]).await.unwrap();
    assert_eq!(
        store.live_versions(minute).await.unwrap(),
        ["v@9", "w@1", "w@2"]
    );
    store.forget_node("a").await.unwrap();
    assert_eq!(store.live_versions(minute).await.unwrap(), ["v@9"]);
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert!(
        store
            .live_versions(Duration::from_millis(10))
            .await
            .unwrap()
            .is_empty()
    );
}

// ---- queues ----

/// A queued execution of `w` in queue `q` with `key` and `priority`, entered `ms` after now.
fn queued(key: &str, priority: i64, ms: i64) -> ExecutionRecord {
    let at = now() + chrono::Duration::milliseconds(ms);
    ExecutionRecord {
        state: ExecutionState::Queued,
        lease: None,
        progress: Progress::default(),
        queue: Some(QueuePlace {
            name: "q".into(),
            key: Some(key.into()),
            priority,
            queued_at: at,
            started_at: None,
        }),
        ..record("w", None)
    }
}

fn pass<'a>(queue: &'a Queue, node: &'a str, workflows: &'a [String]) -> Dequeue<'a> {
    Dequeue {
        queue,
        node,
        ttl: Duration::from_secs(60),
        workflows,
        limit: 256,
        now: now(),
    }
}

/// One pass over `queue` by `node`: what it started.
async fn dequeue(
    store: &dyn ExecutionStore,
    queue: &Queue,
    node: &str,
    workflows: &[String],
) -> Vec<ExecutionRecord> {
    store
        .dequeue(&pass(queue, node, workflows))
        .await
        .expect("dequeue")
}

async fn enqueue(store: &dyn ExecutionStore, records: &[ExecutionRecord]) {
    for r in records {
        store.insert(r, &[]).await.expect("insert");
    }
}

/// Ends `ids` (completed): their slots free up.
async fn finish(store: &dyn ExecutionStore, ids: &[String]) {
    for id in ids {
        let before = get(store, id).await;
        let next = ExecutionRecord {
            state: ExecutionState::Completed {
                result: json!(1),
                end_at: now(),
            },
            ..before.clone()
        };
        assert!(write(store, &before, next).await.0);
    }
}

/// The ids of `records`, sorted (a dequeue answers in no particular order).
fn ids(records: &[ExecutionRecord]) -> Vec<String> {
    let mut ids: Vec<String> = records.iter().map(|r| r.id.clone()).collect();
    ids.sort();
    ids
}

fn sorted<const N: usize>(ids: [String; N]) -> Vec<String> {
    let mut ids = ids.to_vec();
    ids.sort();
    ids
}

async fn a_dequeue_starts_what_the_limits_allow(store: &dyn ExecutionStore) {
    let queue = Queue::new("q").concurrency(3).concurrency_key("/k", 1);
    let workflows = wf(&["w"]);
    // Two of key a, three of key b, one of c: one per key at once, three in all.
    let records: Vec<ExecutionRecord> =
        [("a", 0), ("a", 1), ("b", 2), ("b", 3), ("b", 4), ("c", 5)]
            .into_iter()
            .map(|(k, ms)| queued(k, 0, ms))
            .collect();
    enqueue(store, &records).await;
    let first = dequeue(store, &queue, "n1", &workflows).await;
    assert_eq!(
        ids(&first),
        sorted([
            records[0].id.clone(),
            records[2].id.clone(),
            records[5].id.clone()
        ])
    );
    for r in &first {
        assert_eq!(r.state.status(), Status::Running);
        assert_eq!(
            r.lease.as_ref().map(|l| (l.node.as_str(), l.epoch)),
            Some(("n1", 1))
        );
        let stored = get(store, &r.id).await;
        assert_eq!(stored.state.status(), Status::Running);
        assert!(stored.queue.as_ref().and_then(|q| q.started_at).is_some());
    }
    // Full: nothing more until one ends.
    assert!(dequeue(store, &queue, "n2", &workflows).await.is_empty());
    // A suspended one keeps its slot.
    let c = get(store, &records[5].id).await;
    let suspended = ExecutionRecord {
        state: ExecutionState::Suspended(agentry_engine::Suspension {
            suspended_at: now(),
            reason: "wait".into(),
            step_index: 0,
            step_id: "s".into(),
            data: None,
            deadline: None,
            event: None,
        }),
        ..c.clone()
    };
    assert!(write(store, &c, suspended).await.0);
    assert!(dequeue(store, &queue, "n2", &workflows).await.is_empty());
    // Key a's ends: its next goes.
    finish(store, &[records[0].id.clone()]).await;
    let next = dequeue(store, &queue, "n2", &workflows).await;
    assert_eq!(ids(&next), vec![records[1].id.clone()]);
    // Another version's executions are not this process's to start.
    finish(store, &[records[1].id.clone(), records[2].id.clone()]).await;
    let elsewhere = wf(&["other"]);
    assert!(dequeue(store, &queue, "n3", &elsewhere).await.is_empty());
    let last = dequeue(store, &queue, "n3", &workflows).await;
    assert_eq!(ids(&last), vec![records[3].id.clone()]);
}

async fn concurrent_dequeues_never_exceed_the_limits(store: &dyn ExecutionStore) {
    let queue = Queue::new("q").concurrency(5).concurrency_key("/k", 2);
    let workflows = wf(&["w"]);
    let records: Vec<ExecutionRecord> = (0..30)
        .map(|i| queued(&format!("k{}", i % 3), 0, i))
        .collect();
    enqueue(store, &records).await;
    // Six replicas pass at once, again and again, each ending what it started before its
    // next pass: the slots in use never exceed the limits.
    let nodes: Vec<String> = (0..6).map(|i| format!("n{i}")).collect();
    let started = std::sync::Mutex::new(Vec::<String>::new());
    let passes = nodes.iter().map(|node| {
        let (workflows, queue, started) = (&workflows, &queue, &started);
        async move {
            for _ in 0..12 {
                let got = dequeue(store, queue, node, workflows).await;
                let running = store.queue_counts("q", None).await.expect("counts");
                let total: u64 = running
                    .iter()
                    .filter(|c| c.status == Status::Running)
                    .map(|c| c.count)
                    .sum();
                assert!(total <= 5, "{total} running at once");
                for c in running.iter().filter(|c| c.status == Status::Running) {
                    assert!(c.count <= 2, "{} running for key {:?}", c.count, c.key);
                }
                started.lock().unwrap().extend(ids(&got));
                tokio::time::sleep(Duration::from_millis(5)).await;
                finish(store, &ids(&got)).await;
            }
        }
    });
    futures::future::join_all(passes).await;
    let mut all = started.into_inner().unwrap();
    all.sort();
    let n = all.len();
    all.dedup();
    assert_eq!(n, all.len(), "an execution was started twice");
    assert_eq!(all.len(), 30, "every one was started");
}

async fn a_dequeue_serves_priorities_then_keys_in_turn(store: &dyn ExecutionStore) {
    let queue = Queue::new("q").concurrency(1).key("/k");
    let workflows = wf(&["w"]);
    // Ten of a busy key, then two of a quiet one, then one urgent of the busy key.
    let mut records: Vec<ExecutionRecord> = (0..10).map(|i| queued("busy", 0, i)).collect();
    records.push(queued("quiet", 0, 20));
    records.push(queued("quiet", 0, 21));
    records.push(queued("busy", 5, 30));
    enqueue(store, &records).await;
    let mut order = Vec::new();
    for _ in 0..5 {
        let got = dequeue(store, &queue, "n1", &workflows).await;
        assert_eq!(got.len(), 1);
        order.push(got[0].id.clone());
        finish(store, &ids(&got)).await;
    }
    // The urgent one served the busy key last: the quiet key's turn comes next.
    let expected = [12, 10, 0, 11, 1].map(|i| records[i].id.clone());
    assert_eq!(
        order, expected,
        "urgent first, then the keys in turn, first in first"
    );
}

async fn a_dequeue_keeps_to_the_rate_window(store: &dyn ExecutionStore) {
    let queue = Queue::new("q").rate_limit(3, Duration::from_millis(700));
    let workflows = wf(&["w"]);
    let records: Vec<ExecutionRecord> = (0..5).map(|i| queued("k", 0, i)).collect();
    enqueue(store, &records).await;
    let first = dequeue(store, &queue, "n1", &workflows).await;
    assert_eq!(first.len(), 3);
    finish(store, &ids(&first)).await;
    // Ended, but still in the window.
    assert!(dequeue(store, &queue, "n1", &workflows).await.is_empty());
    tokio::time::sleep(Duration::from_millis(800)).await;
    let later = dequeue(store, &queue, "n1", &workflows).await;
    assert_eq!(later.len(), 2);
}

async fn queue_counts_are_per_key_and_status(store: &dyn ExecutionStore) {
    let queue = Queue::new("q").concurrency(1).key("/k");
    let workflows = wf(&["w"]);
    let records = vec![queued("a", 0, 0), queued("a", 0, 1), queued("b", 0, 2)];
    enqueue(store, &records).await;
    dequeue(store, &queue, "n1", &workflows).await;
    let mut counts: Vec<(Option<String>, Status, u64)> = store
        .queue_counts("q", None)
        .await
        .expect("counts")
        .into_iter()
        .map(|c| (c.key, c.status, c.count))
        .collect();
    counts.sort_by(|a, b| (&a.0, a.1.as_str()).cmp(&(&b.0, b.1.as_str())));
    assert_eq!(
        counts,
        vec![
            (Some("a".into()), Status::Queued, 1),
            (Some("a".into()), Status::Running, 1),
            (Some("b".into()), Status::Queued, 1),
        ]
    );
    let oldest = store
        .queue_counts("q", None)
        .await
        .expect("counts")
        .into_iter()
        .find(|c| c.key.as_deref() == Some("a") && c.status == Status::Queued)
        .and_then(|c| c.oldest);
    assert_eq!(
        oldest.map(|t| t.timestamp_millis()),
        records[1]
            .queue
            .as_ref()
            .map(|q| q.queued_at.timestamp_millis())
    );
    // Another owner's are not counted for them.
    assert!(
        store
            .queue_counts("q", Some("nobody"))
            .await
            .expect("counts")
            .is_empty()
    );
    assert!(
        store
            .queue_counts("other", None)
            .await
            .expect("counts")
            .is_empty()
    );
}

async fn a_pruned_key_is_forgotten(store: &dyn ExecutionStore) {
    let queue = Queue::new("q").concurrency(1).key("/k");
    let workflows = wf(&["w"]);
    // Key a served, then key b: a's turn comes before b's.
    for key in ["a", "b"] {
        enqueue(store, &[queued(key, 0, 0)]).await;
        let got = dequeue(store, &queue, "n1", &workflows).await;
        finish(store, &ids(&got)).await;
    }
    // Their executions pruned, both keys are forgotten: first in goes first again.
    let later = now() + chrono::Duration::seconds(60);
    assert_eq!(
        store
            .prune(later, &[Status::Completed], 100)
            .await
            .expect("prune"),
        2
    );
    let b = queued("b", 0, 10);
    let a = queued("a", 0, 20);
    enqueue(store, &[b.clone(), a]).await;
    let got = dequeue(store, &queue, "n1", &workflows).await;
    assert_eq!(ids(&got), vec![b.id]);
}
