//! Durability as an operator meets it: real `agentry` processes killed with -9, frozen with
//! SIGSTOP, stopped with SIGTERM, on one SQLite file or several replicas on one PostgreSQL
//! database (each test its own, created and dropped here).

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::replica::{
    PATIENCE, Replica, Sse, client, read_sse, sqlite_url, state_of, wait_for_state,
};
use serde_json::{Value, json};

async fn state(r: &Replica, id: &str) -> Value {
    state_if_any(r, id).await.expect("the execution exists")
}

/// The state of the `countdown` execution `id`, `None` while it does not exist (yet).
async fn state_if_any(r: &Replica, id: &str) -> Option<Value> {
    state_of(r, "countdown", id).await
}

/// Polls `r`'s state of the `countdown` execution `id` until `done` holds; fails after
/// [`PATIENCE`].
async fn wait_for(r: &Replica, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    wait_for_state(r, "countdown", id, what, done).await
}

/// Starts `countdown` on `r` under `id` with a client that waits for its answer (in a task).
fn start_countdown(
    r: &Replica,
    id: &str,
    step_ms: u64,
) -> tokio::task::JoinHandle<Option<(u16, Value)>> {
    let url = r.url("/workflows/countdown/execute");
    let body = json!({"input": {"stepDelayMs": step_ms}, "options": {"executionId": id}});
    tokio::spawn(async move {
        let resp = client().post(url).json(&body).send().await.ok()?;
        let status = resp.status().as_u16();
        Some((status, resp.json().await.ok()?))
    })
}

/// Streams `countdown` from `r` under `id` (in a task): the events' JSON, in order, until the
/// stream ends.
fn stream_countdown(r: &Replica, id: &str, step_ms: u64) -> tokio::task::JoinHandle<Vec<Value>> {
    use futures::StreamExt;
    let url = r.url("/workflows/countdown/stream");
    let body = json!({"input": {"stepDelayMs": step_ms}, "options": {"executionId": id}});
    tokio::spawn(async move {
        let Ok(resp) = client().post(url).json(&body).send().await else {
            return Vec::new();
        };
        let mut text = String::new();
        let mut chunks = resp.bytes_stream();
        while let Some(Ok(chunk)) = chunks.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        text.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str(d).ok())
            .collect()
    })
}

/// A fresh PostgreSQL database for one test, dropped when it ends.
struct PgDatabase(agentry_testdb::PgDatabase);

impl std::ops::Deref for PgDatabase {
    type Target = agentry_testdb::PgDatabase;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl PgDatabase {
    async fn create() -> PgDatabase {
        match agentry_testdb::PgDatabase::create("agentry_dur").await {
            Ok(db) => PgDatabase(db),
            Err(e) => panic!("{e}"),
        }
    }
}

fn step_done(s: &Value, step: &str) -> bool {
    s["steps"][step]["status"] == "completed"
}

const TICKS: [&str; 5] = ["tick-5", "tick-4", "tick-3", "tick-2", "tick-1"];

/// Every step of a finished `countdown` completed, each started once except `rerun`, started
/// twice (the one a crash interrupted): no step was committed twice.
fn assert_each_step_once(s: &Value, rerun: &str) {
    assert_eq!(s["status"], "completed", "{s}");
    assert_eq!(s["result"], json!({"remaining": 0}));
    for tick in TICKS {
        let step = &s["steps"][tick];
        assert_eq!(step["status"], "completed", "{tick}: {s}");
        let attempts = if tick == rerun { 2 } else { 1 };
        assert_eq!(step["attempt"], attempts, "{tick}: {s}");
    }
}

/// The step of a finished `countdown` that was started twice.
fn rerun_step(s: &Value) -> &'static str {
    TICKS
        .into_iter()
        .find(|t| s["steps"][*t]["attempt"] != 1)
        .unwrap_or_else(|| panic!("no step ran twice: {s}"))
}

impl Replica {
    /// Waits for the process to end by itself (a crash point aborted it).
    async fn exited(&mut self) -> std::process::ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(started.elapsed() < PATIENCE, "never exited: {}", self.log());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// What a crash left on disk for `id`: read with the store itself, no server running.
async fn on_disk(database_url: &str, id: &str) -> agentry_engine::ExecutionRecord {
    let db = agentry_store::Database::connect(database_url)
        .await
        .expect("open the database");
    let rec = db.execution_store().get(id).await.expect("read");
    db.close().await;
    rec.expect("the execution is on disk")
}

/// The crash points, on one database: for each, a process aborts at it in `tick-3` of
/// `countdown`; the disk holds exactly what the point promises; a restarted process (the same
/// node) continues at once and finishes with each step committed once.
async fn crash_points(database_url: &str) {
    use agentry_engine::store::StepStatus;
    for (point, rerun) in [
        ("before-step", "tick-3"),
        ("after-effect", "tick-3"),
        ("after-checkpoint", "tick-2"),
    ] {
        let id = format!("cd-{point}-{}", uuid::Uuid::new_v4().simple());
        let crash = format!("{point}:countdown:tick-3");
        let env = [
            ("AGENTRY_LEASE_TTL", "60s"),
            ("AGENTRY_CRASH_AT", crash.as_str()),
        ];
        let mut crashing = Replica::start(database_url, "n1", &env);
        let _client = start_countdown(&crashing, &id, 20);
        let exit = crashing.exited().await;
        assert!(!exit.success(), "{point}: {exit:?}");
        assert!(crashing.log().contains("crash point"), "{}", crashing.log());

        let rec = on_disk(database_url, &id).await;
        let steps = &rec.progress.steps;
        let status = |id: &str| steps.get(id).map(|s| (s.status, s.attempt));
        assert_eq!(
            rec.state.status(),
            agentry_engine::Status::Running,
            "{point}"
        );
        assert_eq!(
            status("tick-4"),
            Some((StepStatus::Completed, 1)),
            "{point}"
        );
        if point == "after-checkpoint" {
            // tick-3 committed, and the start of tick-2 with it.
            assert_eq!(rec.progress.next_step, 3, "{point}");
            assert_eq!(
                status("tick-3"),
                Some((StepStatus::Completed, 1)),
                "{point}"
            );
            assert_eq!(status("tick-2"), Some((StepStatus::Running, 1)), "{point}");
        } else {
            // tick-3 started, and whether or not its effect happened, nothing of it is
            // committed: it runs again.
            assert_eq!(rec.progress.next_step, 2, "{point}");
            assert_eq!(status("tick-3"), Some((StepStatus::Running, 1)), "{point}");
            assert_eq!(status("tick-2"), None, "{point}");
        }
        drop(crashing);

        let restarted = Replica::start(database_url, "n1", &[("AGENTRY_LEASE_TTL", "60s")]);
        let done = wait_for(&restarted, &id, "completion after the crash", |s| {
            s["status"] == "completed"
        })
        .await;
        assert_each_step_once(&done, rerun);
        drop(restarted);
    }
}

on_both_databases!(
    crash_points,
    crash_points_on_sqlite,
    crash_points_on_postgres
);

/// An acknowledged resume is never lost: the resume's write commits (its data with it), then
/// the process aborts before the resumed step runs. The restarted process continues the step
/// with the resume's data: the expense is approved by the manager the resume named, not
/// suspended again for want of an answer.
async fn a_resume_survives_a_crash_before_its_step(database_url: &str) {
    let id = format!("ea-{}", uuid::Uuid::new_v4().simple());
    let first = Replica::start(database_url, "n1", &[("AGENTRY_LEASE_TTL", "60s")]);
    let input = json!({"employeeId": "e-1", "amount": 1500, "category": "travel"});
    let (status, body) = common::replica::post(
        &first,
        "/workflows/expense-approval/execute",
        json!({"input": input, "options": {"executionId": id}}),
        None,
    )
    .await;
    assert_eq!(
        (status, body["data"]["status"].as_str()),
        (200, Some("suspended")),
        "{body}"
    );
    first.signal("-TERM");
    drop(first);

    // The step that the resume wakes aborts the process before it runs.
    let crash = [
        ("AGENTRY_LEASE_TTL", "60s"),
        (
            "AGENTRY_CRASH_AT",
            "before-step:expense-approval:check-approval",
        ),
    ];
    let mut crashing = Replica::start(database_url, "n1", &crash);
    let resume = client()
        .post(crashing.url(&format!(
            "/workflows/expense-approval/executions/{id}/resume"
        )))
        .json(&json!({"resumeData": {"approved": true, "managerId": "m-7"}}))
        .send()
        .await;
    assert!(!crashing.exited().await.success());
    assert!(crashing.log().contains("crash point"), "{}", crashing.log());
    assert!(resume.is_err(), "the crash answered the resume: {resume:?}");
    drop(crashing);

    let restarted = Replica::start(database_url, "n1", &[("AGENTRY_LEASE_TTL", "60s")]);
    let done = wait_for_state(
        &restarted,
        "expense-approval",
        &id,
        "the resumed run's end",
        |s| s["status"] != "running" && !s.is_null(),
    )
    .await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["approvedBy"], "m-7", "{done}");
    drop(restarted);
}

on_both_databases!(
    a_resume_survives_a_crash_before_its_step,
    a_resume_survives_a_crash_before_its_step_on_sqlite,
    a_resume_survives_a_crash_before_its_step_on_postgres
);

/// kill -9 mid-run, restart with the same node id on the same SQLite file: the new process
/// continues its own interrupted execution at once (no waiting out the lease), from the step
/// that was interrupted, to the same result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_and_restart_on_sqlite_continues_at_once() {
    let (url, path) = sqlite_url();
    let id = format!("cd-{}", uuid::Uuid::new_v4().simple());
    let first = Replica::start(&url, "n1", &[("AGENTRY_LEASE_TTL", "60s")]);
    let _client = start_countdown(&first, &id, 400);
    wait_for(&first, &id, "tick-5 checkpointed", |s| {
        step_done(s, "tick-5")
    })
    .await;
    first.signal("-KILL");
    drop(first);

    let second = Replica::start(&url, "n1", &[("AGENTRY_LEASE_TTL", "60s")]);
    let listening = Instant::now();
    let s = wait_for(&second, &id, "completion after restart", |s| {
        s["status"] == "completed"
    })
    .await;
    let took = listening.elapsed();
    // The step the kill interrupted (tick-4, unless the poll was slow) alone ran twice.
    assert_each_step_once(&s, rerun_step(&s));
    // The lease had 60 s left: only continuing its own orphans at start finishes this soon
    // (at most the four remaining 400 ms steps, and the interrupted one again).
    assert!(took < Duration::from_secs(10), "continued after {took:?}");
    assert!(
        second
            .log()
            .contains("continuing this node's interrupted executions"),
        "{}",
        second.log()
    );
    drop(second);
    let _ = std::fs::remove_file(&path);
}

/// The classic lease bug: the owner freezes (SIGSTOP) past its lease, a replica takes the
/// execution over and finishes it, then the owner wakes (SIGCONT). The woken process finds its
/// lease gone at its next write and commits nothing more for that execution.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_owner_is_fenced_on_postgres() {
    let db = PgDatabase::create().await;
    let short = [("AGENTRY_LEASE_TTL", "1s")];
    let owner = Replica::start(&db.url, "a", &short);
    let survivor = Replica::start(&db.url, "b", &short);
    let id = format!("cd-{}", uuid::Uuid::new_v4().simple());
    let _client = start_countdown(&owner, &id, 1000);
    wait_for(&survivor, &id, "tick-5 checkpointed", |s| {
        step_done(s, "tick-5")
    })
    .await;
    owner.signal("-STOP");
    let done = wait_for(&survivor, &id, "the survivor finishing", |s| {
        s["status"] == "completed"
    })
    .await;
    assert_eq!(done["result"], json!({"remaining": 0}));
    assert!(
        survivor
            .log()
            .contains("took over executions whose lease expired"),
        "{}",
        survivor.log()
    );
    owner.signal("-CONT");
    // The woken owner's interrupted step ends and its checkpoint is refused.
    let started = Instant::now();
    while !owner.log().contains("lease lost") {
        assert!(started.elapsed() < PATIENCE, "{}", owner.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let after = state(&survivor, &id).await;
    assert_eq!(after, done, "the fenced owner wrote nothing");
    drop(owner);
    drop(survivor);
    db.drop_now().await;
}

/// SIGTERM mid-run: the stopping process checkpoints, hands the execution over and exits within
/// its grace; the waiting client is told the execution continues (503 naming it); a replica
/// continues it, and it is never seen `suspended`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_hands_running_executions_over_on_postgres() {
    let db = PgDatabase::create().await;
    let env = [
        ("AGENTRY_LEASE_TTL", "3s"),
        ("AGENTRY_SHUTDOWN_GRACE", "5s"),
    ];
    let mut leaving = Replica::start(&db.url, "a", &env);
    let staying = Replica::start(&db.url, "b", &env);
    let id = format!("cd-{}", uuid::Uuid::new_v4().simple());
    let waiting = start_countdown(&leaving, &id, 600);
    let streamed_id = format!("cd-{}", uuid::Uuid::new_v4().simple());
    let streaming = stream_countdown(&leaving, &streamed_id, 600);
    wait_for(&staying, &id, "tick-5 checkpointed", |s| {
        step_done(s, "tick-5")
    })
    .await;
    wait_for(&staying, &streamed_id, "tick-5 streamed", |s| {
        step_done(s, "tick-5")
    })
    .await;
    leaving.signal("-TERM");
    let stopping = Instant::now();
    let (status, body) = waiting
        .await
        .expect("task")
        .expect("an answer, not a reset");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["success"], false);
    let message = body["error"].as_str().unwrap_or_default();
    assert!(
        message.contains(&id) && message.contains("continues"),
        "{message}"
    );
    // A stream's last event says the same.
    let events = streaming.await.expect("task");
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(last["type"], "workflow-handover", "{events:?}");
    assert_eq!(last["executionId"], streamed_id.as_str());
    let exit = leaving.child.wait().expect("wait");
    assert!(exit.success(), "{exit:?}");
    assert!(
        stopping.elapsed() < Duration::from_secs(8),
        "{:?}",
        stopping.elapsed()
    );

    let started = Instant::now();
    loop {
        let s = state(&staying, &id).await;
        assert_ne!(s["status"], "suspended", "a shutdown never suspends: {s}");
        if s["status"] == "completed" {
            assert_eq!(s["result"], json!({"remaining": 0}));
            break;
        }
        assert!(started.elapsed() < PATIENCE, "never continued: {s}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let streamed = wait_for(&staying, &streamed_id, "the streamed one continuing", |s| {
        s["status"] == "completed"
    })
    .await;
    assert_eq!(streamed["result"], json!({"remaining": 0}));
    drop(leaving);
    drop(staying);
    db.drop_now().await;
}

/// Three replicas on one database: start on one, read on a second, suspend through the second,
/// resume through the third; kill -9 the process running it and a survivor finishes it. Then 30
/// concurrent resumes of one approval spread over the two survivors: exactly one wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_share_one_postgres_database() {
    let db = PgDatabase::create().await;
    let short = [("AGENTRY_LEASE_TTL", "1s")];
    let replicas = [
        Replica::start(&db.url, "r1", &short),
        Replica::start(&db.url, "r2", &short),
        Replica::start(&db.url, "r3", &short),
    ];
    let [r1, r2, r3] = &replicas;
    let id = format!("cd-{}", uuid::Uuid::new_v4().simple());
    let _client = start_countdown(r1, &id, 800);
    wait_for(r2, &id, "tick-5 checkpointed", |s| step_done(s, "tick-5")).await;
    let suspended: Value = client()
        .post(r2.url(&format!("/workflows/countdown/executions/{id}/suspend")))
        .json(&json!({"reason": "pause"}))
        .send()
        .await
        .expect("suspend")
        .json()
        .await
        .expect("json");
    assert_eq!(suspended["data"]["status"], "suspended", "{suspended}");
    let resume_url = r3.url(&format!("/workflows/countdown/executions/{id}/resume"));
    let resumed = tokio::spawn(async move {
        let _ = client().post(resume_url).json(&json!({})).send().await;
    });
    // r3 runs it now: kill it after its next checkpoint; r1 or r2 takes over and finishes.
    let at = state(r2, &id).await["nextStepIndex"].as_u64().unwrap_or(0);
    wait_for(r2, &id, "a step after the resume", |s| {
        s["status"] == "running" && s["nextStepIndex"].as_u64().unwrap_or(0) > at
    })
    .await;
    r3.signal("-KILL");
    let _ = resumed.await;
    let done = wait_for(r1, &id, "a survivor finishing", |s| {
        s["status"] == "completed"
    })
    .await;
    assert_eq!(done["result"], json!({"remaining": 0}));

    // 30 concurrent resumes over the two survivors: one wins.
    let exp = format!("exp-{}", uuid::Uuid::new_v4().simple());
    let started: Value = client()
        .post(r1.url("/workflows/expense-approval/execute"))
        .json(
            &json!({"input": {"employeeId": "e", "amount": 1500, "category": "travel"},
                      "options": {"executionId": exp}}),
        )
        .send()
        .await
        .expect("execute")
        .json()
        .await
        .expect("json");
    assert_eq!(started["data"]["status"], "suspended", "{started}");
    let urls: Vec<String> = (0..30)
        .map(|i| {
            let r = if i % 2 == 0 { r1 } else { r2 };
            r.url(&format!(
                "/workflows/expense-approval/executions/{exp}/resume"
            ))
        })
        .collect();
    let answers = futures::future::join_all(urls.into_iter().map(|u| async move {
        client()
            .post(u)
            .json(&json!({"resumeData": {"approved": true, "managerId": "m"}}))
            .send()
            .await
            .expect("resume")
            .status()
            .as_u16()
    }))
    .await;
    let wins = answers.iter().filter(|s| **s == 200).count();
    assert_eq!(wins, 1, "{answers:?}");
    assert!(
        answers.iter().all(|s| matches!(s, 200 | 404 | 409)),
        "{answers:?}"
    );
    drop(replicas);
    db.drop_now().await;
}

/// GET the re-attach stream of `id` on `r`, after `last` (sent as `Last-Event-ID`).
async fn reattach(r: &Replica, id: &str, last: Option<i64>) -> Vec<Sse> {
    let mut req = client().get(r.url(&format!("/workflows/countdown/executions/{id}/stream")));
    if let Some(last) = last {
        req = req.header("Last-Event-ID", last.to_string());
    }
    let resp = req.send().await.expect("re-attach");
    assert_eq!(resp.status(), 200);
    read_sse(resp, |_| false).await
}

/// A client streams `countdown` from one process, loses its connection after three events and
/// re-attaches with `Last-Event-ID` to `again` (another replica, or the same process): it gets
/// exactly the events it missed, numbered on from the last it saw, then follows to the end.
async fn reattach_replays_what_was_missed(first: &Replica, again: &Replica) {
    let id = format!("cd-{}", uuid::Uuid::new_v4().simple());
    let body = json!({"input": {"stepDelayMs": 200}, "options": {"executionId": id}});
    let resp = client()
        .post(first.url("/workflows/countdown/stream"))
        .json(&body)
        .send()
        .await
        .expect("stream");
    let seen = read_sse(resp, |e| e.len() == 3).await;
    assert_eq!(seen.len(), 3, "{seen:?}");
    let ids: Vec<Option<i64>> = seen.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, [Some(1), Some(2), Some(3)], "{seen:?}");
    assert_eq!(seen[0].1["type"], "workflow-start");

    let rest = reattach(again, &id, Some(3)).await;
    let (last, stored) = rest.split_last().expect("events");
    assert_eq!(last.0, None, "workflow-result is not in the log");
    assert_eq!(last.1["type"], "workflow-result", "{rest:?}");
    assert_eq!(last.1["status"], "completed");
    let numbers: Vec<i64> = stored.iter().filter_map(|(id, _)| *id).collect();
    let expected: Vec<i64> = (4..4 + stored.len() as i64).collect();
    assert_eq!(numbers, expected, "no duplicate, no gap: {rest:?}");
    assert_eq!(
        stored.last().map(|e| &e.1["type"]),
        Some(&json!("workflow-complete"))
    );

    // The whole log, read again from the start, is what the two connections saw.
    let all = reattach(again, &id, None).await;
    let all: Vec<&Sse> = all.iter().filter(|(id, _)| id.is_some()).collect();
    let both: Vec<&Sse> = seen.iter().chain(stored).collect();
    assert_eq!(all, both);
    // `?lastEventId=` works where a client cannot set headers; a bad one is a 400 envelope.
    let url = again.url(&format!(
        "/workflows/countdown/executions/{id}/stream?lastEventId={}",
        all.len() - 1
    ));
    let resp = client().get(url).send().await.expect("re-attach");
    let tail = read_sse(resp, |_| false).await;
    assert_eq!(tail.len(), 2, "{tail:?}");
    let bad = client()
        .get(again.url(&format!("/workflows/countdown/executions/{id}/stream")))
        .header("Last-Event-ID", "soon")
        .send()
        .await
        .expect("re-attach");
    assert_eq!(bad.status(), 400);
    let body: Value = bad.json().await.expect("envelope");
    assert_eq!(body["success"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reattach_after_a_dropped_connection_on_sqlite() {
    let (url, path) = sqlite_url();
    let only = Replica::start(&url, "n1", &[]);
    reattach_replays_what_was_missed(&only, &only).await;
    drop(only);
    let _ = std::fs::remove_file(&path);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reattach_on_another_replica_on_postgres() {
    let db = PgDatabase::create().await;
    let a = Replica::start(&db.url, "a", &[]);
    let b = Replica::start(&db.url, "b", &[]);
    reattach_replays_what_was_missed(&a, &b).await;

    // A WebSocket on the replica that does not run the execution gets every event, live.
    let id = format!("cd-{}", uuid::Uuid::new_v4().simple());
    let _client = start_countdown(&a, &id, 200);
    wait_for(&b, &id, "the execution exists", |s| {
        s["status"] == "running"
    })
    .await;
    let messages = websocket_until_result(&b, &id).await;
    let types: Vec<&str> = messages.iter().filter_map(|m| m["type"].as_str()).collect();
    assert_eq!(types.first(), Some(&"execution-state"), "{types:?}");
    assert_eq!(types[1], "workflow-start", "{types:?}");
    assert_eq!(
        types.iter().filter(|t| **t == "step-complete").count(),
        5,
        "{types:?}"
    );
    assert_eq!(types[types.len() - 2], "workflow-complete", "{types:?}");
    assert_eq!(types.last(), Some(&"workflow-result"));
    drop(a);
    drop(b);
    db.drop_now().await;
}

/// The messages of `/ws/executions/{id}` on `r` up to its `workflow-result`.
async fn websocket_until_result(r: &Replica, id: &str) -> Vec<Value> {
    use futures::StreamExt;
    let url = format!("ws://{}/ws/executions/{id}", r.addr);
    let (mut socket, _) = tokio_tungstenite::connect_async(url)
        .await
        .expect("websocket");
    let mut out = Vec::new();
    let started = Instant::now();
    while let Some(Ok(msg)) = socket.next().await {
        if let tokio_tungstenite::tungstenite::Message::Text(text) = msg {
            let v: Value = serde_json::from_str(&text).expect("json");
            let done = v["type"] == "workflow-result";
            out.push(v);
            if done {
                break;
            }
        }
        assert!(started.elapsed() < PATIENCE, "{out:?}");
    }
    out
}

/// Cancel through another replica: the execution is `cancelled` at once; the step running on
/// the owner sees its cancellation signal at the owner's next heartbeat (well before the step
/// would end), commits nothing, and the client waiting on the owner gets the cancelled answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_through_another_replica_on_postgres() {
    let db = PgDatabase::create().await;
    let short = [("AGENTRY_LEASE_TTL", "1s")];
    let owner = Replica::start(&db.url, "a", &short);
    let other = Replica::start(&db.url, "b", &short);
    let id = format!("cd-{}", uuid::Uuid::new_v4().simple());
    let waiting = start_countdown(&owner, &id, 10_000);
    wait_for(&other, &id, "tick-5 running", |s| {
        s["steps"]["tick-5"]["status"] == "running"
    })
    .await;
    let asked = Instant::now();
    let resp: Value = client()
        .post(other.url(&format!("/workflows/countdown/executions/{id}/cancel")))
        .json(&json!({"reason": "stop"}))
        .send()
        .await
        .expect("cancel")
        .json()
        .await
        .expect("json");
    assert_eq!(resp["data"]["status"], "cancelled", "{resp}");
    let (status, body) = waiting.await.expect("task").expect("an answer");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["status"], "cancelled");
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "the 10 s step was not stopped: {:?}",
        asked.elapsed()
    );
    assert!(
        owner.log().contains("no longer held here"),
        "{}",
        owner.log()
    );
    let s = state(&other, &id).await;
    assert_eq!(s["status"], "cancelled");
    assert_eq!(s["steps"]["tick-5"]["status"], "running", "{s}");
    drop(owner);
    drop(other);
    db.drop_now().await;
}

/// POSTs `body` to `path` on `r` and returns the envelope's `data`.
async fn post_data(r: &Replica, path: &str, body: Value) -> Value {
    let resp: Value = client()
        .post(r.url(path))
        .json(&body)
        .send()
        .await
        .expect("post")
        .json()
        .await
        .expect("json");
    assert_eq!(resp["success"], true, "{resp}");
    resp["data"].clone()
}

/// `agentry prune` on `database_url` with `args`; returns what it printed.
fn prune_cli(database_url: &str, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_agentry"))
        .args(["prune", "--database-url", database_url])
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("prune");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `agentry prune` deletes the finished executions it is asked to, with their steps and events,
/// and nothing else (not a suspended one, not a recent one).
async fn prune_deletes_finished_executions(database_url: &str) {
    let r = Replica::start(database_url, "n1", &[]);
    let mut done = Vec::new();
    for text in ["a b", "c d e"] {
        let d = post_data(
            &r,
            "/workflows/word-count/execute",
            json!({"input": {"text": text}}),
        )
        .await;
        done.push(d["executionId"].as_str().expect("id").to_owned());
    }
    let expense = json!({"input": {"employeeId": "e", "amount": 5000, "category": "travel"}});
    let waiting = post_data(&r, "/workflows/expense-approval/execute", expense.clone()).await;
    let waiting = waiting["executionId"].as_str().expect("id").to_owned();
    let gone = post_data(&r, "/workflows/expense-approval/execute", expense).await;
    let gone = gone["executionId"].as_str().expect("id").to_owned();
    post_data(
        &r,
        &format!("/workflows/expense-approval/executions/{gone}/cancel"),
        json!({}),
    )
    .await;
    drop(r);

    assert_eq!(
        prune_cli(database_url, &["--older-than", "1h"]),
        "pruned 0 executions"
    );
    assert_eq!(
        prune_cli(
            database_url,
            &["--older-than", "0s", "--status", "cancelled"]
        ),
        "pruned 1 executions"
    );
    assert_eq!(
        prune_cli(database_url, &["--older-than", "0s"]),
        "pruned 2 executions"
    );
    let db = agentry_store::Database::connect(database_url)
        .await
        .expect("open");
    let store = db.execution_store();
    for id in done.iter().chain([&gone]) {
        assert!(store.get(id).await.expect("get").is_none(), "{id} is gone");
        let events = store.events_after(id, 0, 10).await.expect("events");
        assert!(events.is_empty(), "its events went with it");
    }
    let kept = store.get(&waiting).await.expect("get").expect("kept");
    assert_eq!(kept.state.status(), agentry_engine::Status::Suspended);
    assert!(!kept.progress.steps.is_empty());
    db.close().await;
    let bad = Command::new(env!("CARGO_BIN_EXE_agentry"))
        .args([
            "prune",
            "--database-url",
            database_url,
            "--older-than",
            "1d",
        ])
        .args(["--status", "running"])
        .output()
        .expect("prune");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a finished status"));
}

on_both_databases!(
    prune_deletes_finished_executions,
    prune_on_sqlite,
    prune_on_postgres
);

/// With `AGENTRY_RETENTION`, finished executions past it are deleted in the background.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_prunes_in_the_background() {
    let (url, path) = sqlite_url();
    let r = Replica::start(&url, "n1", &[("AGENTRY_RETENTION", "1s")]);
    let d = post_data(
        &r,
        "/workflows/word-count/execute",
        json!({"input": {"text": "x"}}),
    )
    .await;
    let id = d["executionId"].as_str().expect("id").to_owned();
    let started = Instant::now();
    loop {
        let status = client()
            .get(r.url(&format!("/workflows/word-count/executions/{id}/state")))
            .send()
            .await
            .expect("state")
            .status();
        if status == 404 {
            break;
        }
        assert!(started.elapsed() < PATIENCE, "never pruned");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        r.log().contains("pruned finished executions"),
        "{}",
        r.log()
    );
    drop(r);
    let _ = std::fs::remove_file(&path);
}

/// An approval whose deadline passes while no server runs: the first server to start resumes it
/// with the time-out marker, and it expires.
async fn a_deadline_passes_while_every_server_is_down(database_url: &str) {
    let first = Replica::start(database_url, "n1", &[]);
    let id = format!("ad-{}", uuid::Uuid::new_v4().simple());
    let d = post_data(
        &first,
        "/workflows/approval-deadline/execute",
        json!({"input": {"requestId": "r-9", "timeoutMs": 400}, "options": {"executionId": id}}),
    )
    .await;
    assert_eq!(d["status"], "suspended");
    first.signal("-KILL");
    drop(first);
    tokio::time::sleep(Duration::from_millis(800)).await;
    let rec = on_disk(database_url, &id).await;
    assert_eq!(
        rec.state.status(),
        agentry_engine::Status::Suspended,
        "nobody fired it"
    );

    let second = Replica::start(database_url, "n2", &[]);
    let done = wait_for_state(&second, "approval-deadline", &id, "the expiry", |s| {
        s["status"] == "completed"
    })
    .await;
    assert_eq!(
        done["result"],
        json!({"requestId": "r-9", "status": "expired"})
    );
    assert!(
        second
            .log()
            .contains("resumed executions whose deadline passed"),
        "{}",
        second.log()
    );
    drop(second);
}

on_both_databases!(
    a_deadline_passes_while_every_server_is_down,
    a_deadline_passes_while_down_on_sqlite,
    a_deadline_passes_while_down_on_postgres
);

/// `flaky-step` with failTimes 4 (every attempt fails) and a crash before its second attempt:
/// the restarted process does not get that attempt back: attempts 3 and 4 run, and the
/// execution ends in error after the fourth (an extra attempt would have succeeded).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_attempts_grants_no_extra_attempt() {
    let (url, path) = sqlite_url();
    let id = format!("fs-{}", uuid::Uuid::new_v4().simple());
    let env = [("AGENTRY_CRASH_AT", "before-step:flaky-step:attempt:2")];
    let mut crashing = Replica::start(&url, "n1", &env);
    let url_execute = crashing.url("/workflows/flaky-step/execute");
    let body = json!({"input": {"failTimes": 4}, "options": {"executionId": id}});
    let _client = tokio::spawn(async move { client().post(url_execute).json(&body).send().await });
    assert!(!crashing.exited().await.success());
    let rec = on_disk(&url, &id).await;
    let step = &rec.progress.steps["attempt"];
    assert_eq!(
        step.attempt, 2,
        "the second attempt was recorded before it ran"
    );
    assert_eq!(step.failures.len(), 1);
    drop(crashing);

    let restarted = Replica::start(&url, "n1", &[]);
    let done = wait_for_state(&restarted, "flaky-step", &id, "the end", |s| {
        s["status"] == "error" || s["status"] == "completed"
    })
    .await;
    assert_eq!(done["status"], "error", "{done}");
    assert_eq!(
        done["error"],
        json!({"message": "Step attempt failed: attempt 4 failed", "stepId": "attempt"})
    );
    let failed: Vec<u64> = done["steps"]["attempt"]["failures"]
        .as_array()
        .expect("failures")
        .iter()
        .filter_map(|f| f["attempt"].as_u64())
        .collect();
    assert_eq!(
        failed,
        [1, 3],
        "attempt 2 was lost to the crash, attempt 4 failed the run"
    );
    drop(restarted);
    let _ = std::fs::remove_file(&path);
}

/// Group commit loses nothing: 32 clients start `word-count` executions as fast as the server
/// answers, the server is killed with -9 in the middle of that load, and every execution it had
/// answered `completed` is on disk, completed with its result (a write is acknowledged only
/// after the commit that holds it).
async fn acknowledged_executions_survive_kill_9_under_load(database_url: &str) {
    let server = Replica::start(database_url, "n1", &[]);
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..32)
        .map(|c| {
            let (url, acked, stop) = (
                server.url("/workflows/word-count/execute"),
                acked.clone(),
                stop.clone(),
            );
            tokio::spawn(async move {
                let http = client();
                for n in 0.. {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    let id = format!("wc-{c}-{n}");
                    let body = json!({"input": {"text": format!("a b c {n}")},
                        "options": {"executionId": id}});
                    let Ok(resp) = http.post(&url).json(&body).send().await else {
                        break; // the server is gone
                    };
                    let Ok(v) = resp.json::<Value>().await else {
                        break;
                    };
                    if v["data"]["status"] == "completed" {
                        acked.lock().unwrap().push(id);
                    }
                }
            })
        })
        .collect();
    let started = Instant::now();
    while acked.lock().unwrap().len() < 300 {
        assert!(started.elapsed() < PATIENCE, "the load never got going");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.signal("-KILL");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for c in clients {
        let _ = c.await;
    }
    drop(server);
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= 300);
    let db = agentry_store::Database::connect(database_url)
        .await
        .expect("open the database");
    let store = db.execution_store();
    for id in &acked {
        let rec = store
            .get(id)
            .await
            .expect("read")
            .unwrap_or_else(|| panic!("{id} was acknowledged and is not on disk"));
        assert_eq!(
            rec.state.status(),
            agentry_engine::Status::Completed,
            "{id}"
        );
        assert_eq!(rec.state.result(), Some(&json!({"words": 4})), "{id}");
    }
    db.close().await;
}

on_both_databases!(
    acknowledged_executions_survive_kill_9_under_load,
    acknowledged_executions_survive_kill_9_under_load_on_sqlite,
    acknowledged_executions_survive_kill_9_under_load_on_postgres
);

/// A countdown streamed from one replica and cancelled through another: the live stream shows
/// the cancel (`workflow-cancelled`, then `workflow-result`), as the replay does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_through_another_replica_reaches_the_live_stream_on_postgres() {
    let db = PgDatabase::create().await;
    let short = [("AGENTRY_LEASE_TTL", "1s")];
    let streaming_from = Replica::start(&db.url, "s1", &short);
    let cancelling = Replica::start(&db.url, "s2", &short);
    let reading = Replica::start(&db.url, "s3", &short);
    let id = format!("cd-{}", uuid::Uuid::new_v4().simple());
    let streaming = stream_countdown(&streaming_from, &id, 10_000);
    wait_for(&reading, &id, "tick-5 running", |s| {
        s["steps"]["tick-5"]["status"] == "running"
    })
    .await;
    let cancelled = post_data(
        &cancelling,
        &format!("/workflows/countdown/executions/{id}/cancel"),
        json!({"reason": "from another replica"}),
    )
    .await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    let events = tokio::time::timeout(PATIENCE, streaming)
        .await
        .expect("the stream ends")
        .expect("task");
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        types,
        [
            "workflow-start",
            "step-start",
            "workflow-cancelled",
            "workflow-result"
        ],
        "{events:#?}"
    );
    assert_eq!(events[2]["cancellation"]["reason"], "from another replica");
    assert_eq!(events[3]["status"], "cancelled");
    drop((streaming_from, cancelling, reading));
    db.drop_now().await;
}

/// Opens `/mcp`'s stream of server messages on `r`: an `initialize`, its session's `GET`. The
/// response, its body still open.
async fn open_mcp_stream(r: &Replica) -> reqwest::Response {
    let init = client()
        .post(r.url("/mcp"))
        .header("Accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "durability", "version": "1"}}}),
        )
        .send()
        .await
        .expect("initialize");
    assert_eq!(init.status(), 200);
    let session = init
        .headers()
        .get("mcp-session-id")
        .expect("a session")
        .to_str()
        .unwrap()
        .to_owned();
    drop(init);
    let initialized = client()
        .post(r.url("/mcp"))
        .header("Accept", "application/json, text/event-stream")
        .header("Mcp-Session-Id", &session)
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .expect("initialized");
    assert!(
        initialized.status().is_success(),
        "{}",
        initialized.status()
    );
    let stream = client()
        .get(r.url("/mcp"))
        .header("Accept", "text/event-stream")
        .header("Mcp-Session-Id", &session)
        .send()
        .await
        .expect("GET /mcp");
    assert_eq!(stream.status(), 200);
    stream
}

/// An execute's id, workflow, status and body.
type Answer = (String, &'static str, u16, Value);

/// SIGTERM in the middle of a burst of executes: no request is answered 500 (a start that
/// arrives during the drain is a 503 `server_shutting_down`, a run handed over a 503
/// `execution_continues_elsewhere`), the process exits within the grace plus 2 s although a
/// workflow stream, a re-attach stream and an MCP stream are open, and every execution it
/// acknowledged completes on the replica that stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_burst_answers_no_500_and_exits_within_the_grace_on_postgres() {
    use std::sync::{Arc, Mutex};
    let db = PgDatabase::create().await;
    let grace = Duration::from_secs(2);
    let env = [
        ("AGENTRY_LEASE_TTL", "2s"),
        ("AGENTRY_SHUTDOWN_GRACE", "2s"),
    ];
    let mut leaving = Replica::start(&db.url, "burst-a", &env);
    let staying = Replica::start(&db.url, "burst-b", &env);
    // Streams that would hold a shutdown open.
    let long = format!("cd-{}", uuid::Uuid::new_v4().simple());
    let streaming = stream_countdown(&leaving, &long, 20_000);
    wait_for(&staying, &long, "the long countdown running", |s| {
        s["status"] == "running"
    })
    .await;
    let reattached = client()
        .get(leaving.url(&format!("/workflows/countdown/executions/{long}/stream")))
        .send()
        .await
        .expect("re-attach");
    assert_eq!(reattached.status(), 200);
    let mcp = open_mcp_stream(&leaving).await;

    // The burst: word counts and short countdowns, each under an id of its own.
    let answers: Arc<Mutex<Vec<Answer>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut lanes = Vec::new();
    for lane in 0..8 {
        let (base, answers, stop) = (leaving.url(""), answers.clone(), stop.clone());
        lanes.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                n += 1;
                let id = format!("burst-{lane}-{n}-{}", uuid::Uuid::new_v4().simple());
                let (workflow, input) = if n % 2 == 0 {
                    ("word-count", json!({"text": "one two three"}))
                } else {
                    ("countdown", json!({"stepDelayMs": 150}))
                };
                let sent = client()
                    .post(format!("{base}/workflows/{workflow}/execute"))
                    .json(&json!({"input": input, "options": {"executionId": id}}))
                    .send()
                    .await;
                // Refused at the socket: the server has stopped listening.
                let Ok(resp) = sent else { break };
                let status = resp.status().as_u16();
                let body: Value = resp.json().await.unwrap_or(Value::Null);
                answers.lock().unwrap().push((id, workflow, status, body));
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    leaving.signal("-TERM");
    let stopping = Instant::now();
    let exit = loop {
        if let Some(status) = leaving.child.try_wait().expect("try_wait") {
            break status;
        }
        assert!(
            stopping.elapsed() < grace + Duration::from_secs(5),
            "still running after {:?}",
            stopping.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let took = stopping.elapsed();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for lane in lanes {
        lane.await.expect("lane");
    }
    assert!(exit.success(), "{exit:?}");
    assert!(
        took <= grace + Duration::from_secs(2),
        "SIGTERM took {took:?} with streams open (grace {grace:?}): {}",
        leaving.log()
    );
    let events = streaming.await.expect("task");
    assert_eq!(
        events.last().map(|e| e["type"].clone()),
        Some(json!("workflow-handover")),
        "{events:?}"
    );
    drop((reattached, mcp));

    let answers = answers.lock().unwrap().clone();
    assert!(answers.len() > 10, "only {} answers", answers.len());
    let mut acknowledged = Vec::new();
    for (id, workflow, status, body) in &answers {
        match (*status, body["code"].as_str()) {
            (200, _) => acknowledged.push((id.clone(), *workflow)),
            (503, Some("execution_continues_elsewhere")) => {
                acknowledged.push((id.clone(), *workflow))
            }
            (503, Some("server_shutting_down")) => {
                assert!(body["error"].is_string());
            }
            other => panic!("{id}: answered {other:?}: {body}"),
        }
    }
    let drained = answers
        .iter()
        .filter(|a| a.3["code"] == "server_shutting_down")
        .count();
    eprintln!(
        "{} answers, {} acknowledged, {drained} refused while draining; exit after {took:?}",
        answers.len(),
        acknowledged.len()
    );
    for (id, workflow) in acknowledged {
        let done = wait_for_state(&staying, workflow, &id, "completed", |s| {
            s["status"] == "completed"
        })
        .await;
        assert_ne!(done["status"], "error", "{done}");
    }
    drop((leaving, staying));
    db.drop_now().await;
}
