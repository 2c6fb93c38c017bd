//! Schedules through the real binary, on SQLite and PostgreSQL: three replicas racing for each
//! tick, ticks missed while no server ran, pause, unpause, trigger, backfill, delete, the
//! overlap policies with a slow workflow, strict mode's ownership, bad input, each user's cap,
//! and the `nightly-report` example. Every schedule here fires each second.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use common::replica::Replica;
use serde_json::{Value, json};

/// How long any wait here may take before the test fails (never a timing claim by itself).
const PATIENCE: Duration = Duration::from_secs(30);

/// A database of one test: a SQLite file, or a PostgreSQL database of its own.
struct Db {
    url: String,
    pg: Option<agentry_testdb::PgDatabase>,
    file: Option<PathBuf>,
}

impl Db {
    async fn sqlite() -> Db {
        let path = std::env::temp_dir().join(format!("agentry-sched-{}.db", uuid::Uuid::new_v4()));
        Db {
            url: format!("sqlite://{}", path.display()),
            pg: None,
            file: Some(path),
        }
    }

    async fn postgres() -> Db {
        let pg = agentry_testdb::PgDatabase::create("agentry_sched")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        Db {
            url: pg.url.clone(),
            pg: Some(pg),
            file: None,
        }
    }

    async fn of(backend: Backend) -> Db {
        match backend {
            Backend::Sqlite => Db::sqlite().await,
            Backend::Postgres => Db::postgres().await,
        }
    }

    async fn remove(self) {
        if let Some(pg) = &self.pg {
            pg.drop_now().await;
        }
        if let Some(path) = &self.file {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Backend {
    Sqlite,
    Postgres,
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client")
}

/// A request to `r` (with a bearer `token` and a JSON `body` when given): its status and body.
async fn call(
    r: &Replica,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = client().request(method.parse().expect("method"), r.url(path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// A request that must succeed: its `data`.
async fn ok(r: &Replica, method: &str, path: &str, body: Option<Value>) -> Value {
    let (status, body) = call(r, method, path, None, body).await;
    assert!(status < 300, "{method} {path}: {status} {body}");
    assert_eq!(body["success"], true, "{body}");
    body["data"].clone()
}

/// A schedule firing `workflow` with `input` each second.
fn each_second(id: &str, workflow: &str, input: Value) -> Value {
    json!({"id": id, "workflowId": workflow, "cron": "* * * * * *", "input": input})
}

/// The executions of schedule `id` (every workflow's list, filtered by the id's prefix), by fire
/// time: (fire time, execution summary).
async fn fires_of(r: &Replica, id: &str) -> Vec<(DateTime<Utc>, Value)> {
    let mut out = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = ok(
            r,
            "GET",
            &format!("/executions?limit=100&cursor={cursor}"),
            None,
        )
        .await;
        for e in page["executions"].as_array().expect("executions") {
            let eid = e["executionId"].as_str().expect("id");
            if let Some(time) = eid.strip_prefix(&format!("{id}@")) {
                let t = DateTime::parse_from_rfc3339(time)
                    .unwrap_or_else(|_| panic!("{eid}: not <id>@<RFC 3339>"))
                    .with_timezone(&Utc);
                out.push((t, e.clone()));
            }
        }
        match page["nextCursor"].as_str() {
            Some(c) => cursor = c.to_owned(),
            None => break,
        }
    }
    out.sort_by_key(|(t, _)| *t);
    out
}

/// Polls until `done` holds of the schedule's state; fails after [`PATIENCE`].
async fn wait_schedule(r: &Replica, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let s = ok(r, "GET", &format!("/schedules/{id}"), None).await;
        if done(&s) {
            return s;
        }
        assert!(started.elapsed() < PATIENCE, "{what}: never; last {s}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whole seconds between consecutive fire times.
fn gaps(fires: &[(DateTime<Utc>, Value)]) -> Vec<i64> {
    fires
        .windows(2)
        .map(|w| (w[1].0 - w[0].0).num_milliseconds() / 1000)
        .collect()
}

/// Three replicas on one PostgreSQL database, one schedule each second for 5 s: exactly one
/// execution per tick (no tick twice, none missing between the first and the last).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_fire_each_tick_exactly_once() {
    let db = Db::postgres().await;
    let replicas: Vec<Replica> = ["a", "b", "c"]
        .iter()
        .map(|n| Replica::start(&db.url, &format!("sched-{n}"), &[]))
        .collect();
    let first = &replicas[0];
    let created = ok(
        first,
        "POST",
        "/schedules",
        Some(json!({
            "id": "race", "workflowId": "word-count", "cron": "* * * * * *",
            "input": {"text": "one tick"}, "overlap": "allow"
        })),
    )
    .await;
    assert_eq!(created["nextFires"].as_array().map(Vec::len), Some(5));
    tokio::time::sleep(Duration::from_secs(5)).await;
    ok(&replicas[1], "POST", "/schedules/race/pause", None).await;
    // What was decided before the pause is started; then nothing more.
    let s = wait_schedule(first, "race", "every fire started", |s| {
        s["fires"].as_array().is_some_and(|f| {
            f.iter()
                .all(|x| x["status"] != "pending" && x["status"] != "running")
        })
    })
    .await;
    let fires = fires_of(first, "race").await;
    assert!(fires.len() >= 4, "{fires:?}");
    assert!(
        gaps(&fires).iter().all(|g| *g == 1),
        "a tick missed or twice: {:?}",
        gaps(&fires)
    );
    let recorded: Vec<&str> = s["fires"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["executionId"].as_str().unwrap())
        .collect();
    assert_eq!(recorded.len(), fires.len(), "{s}");
    assert!(fires.iter().all(|(_, e)| e["status"] == "completed"));
    assert_eq!(s["skipped"], 0);
    drop(replicas);
    db.remove().await;
}

/// Ticks missed while the only server was down: those within the catch-up window fire when it
/// starts again (late, oldest first), older ones are skipped and counted.
async fn missed_ticks_are_caught_up_within_the_window(backend: Backend) {
    let db = Db::of(backend).await;
    let r = Replica::start(&db.url, "catchup", &[]);
    ok(
        &r,
        "POST",
        "/schedules",
        Some(json!({
            "id": "late", "workflowId": "word-count", "cron": "* * * * * *",
            "input": {"text": "late"}, "overlap": "allow", "catchupWindow": "3s"
        })),
    )
    .await;
    wait_schedule(&r, "late", "a first fire", |s| {
        s["fires"].as_array().is_some_and(|f| !f.is_empty())
    })
    .await;
    drop(r);
    tokio::time::sleep(Duration::from_secs(8)).await;
    let r = Replica::start(&db.url, "catchup", &[]);
    let s = wait_schedule(&r, "late", "the catch-up", |s| {
        s["skipped"].as_u64().unwrap_or(0) >= 3
    })
    .await;
    ok(&r, "POST", "/schedules/late/pause", None).await;
    let fires = fires_of(&r, "late").await;
    // The outage is one gap of several seconds; right after it, the caught-up ticks started
    // late, at most the window (and a round) after their time.
    let g = gaps(&fires);
    let outage = g
        .iter()
        .position(|x| *x > 1)
        .expect("a gap where ticks were skipped");
    assert!(g[outage] >= 4, "{g:?}");
    let late: Vec<i64> = fires[outage + 1..]
        .iter()
        .map(|(t, e)| {
            let start = DateTime::parse_from_rfc3339(e["startAt"].as_str().unwrap()).unwrap();
            (start.with_timezone(&Utc) - *t).num_milliseconds()
        })
        .collect();
    // A fire on time starts within a few hundred milliseconds of its tick; the caught-up ones
    // (their tick passed before the server was up) start a second or more late.
    let caught_up = late.iter().take_while(|ms| **ms > 900).count();
    assert!(caught_up >= 2, "late starts: {late:?}");
    assert!(late.iter().all(|ms| *ms <= 4200), "late starts: {late:?}");
    let skipped = s["skipped"].as_u64().unwrap();
    assert_eq!(
        skipped,
        g[outage] as u64 - 1,
        "every tick of the gap is counted: {g:?} {s}"
    );
    drop(r);
    db.remove().await;
}

/// Pause (nothing fires), trigger (also when paused), unpause (from the next tick), backfill (a
/// repeated one adds nothing), delete.
async fn pause_trigger_unpause_backfill_delete(backend: Backend) {
    let db = Db::of(backend).await;
    let r = Replica::start(&db.url, "life", &[]);
    let created = ok(
        &r,
        "POST",
        "/schedules",
        Some(json!({
            "id": "life", "workflowId": "word-count", "cron": "* * * * * *",
            "input": {"text": "a b c"}, "paused": true
        })),
    )
    .await;
    assert_eq!(created["paused"], true);
    assert_eq!(created["nextFires"], json!([]));
    assert_eq!(created["timezone"], "UTC");
    assert_eq!(created["overlap"], "skip");
    assert_eq!(created["catchupWindow"], "1m");
    tokio::time::sleep(Duration::from_millis(2200)).await;
    assert!(
        fires_of(&r, "life").await.is_empty(),
        "paused: nothing fires"
    );

    let fire = ok(&r, "POST", "/schedules/life/trigger", None).await;
    assert_eq!(fire["origin"], "trigger");
    let id = fire["executionId"].as_str().unwrap().to_owned();
    assert!(id.starts_with("life@"), "{id}");
    let state = wait_state(&r, &id, "completed").await;
    assert_eq!(state["result"], json!({"words": 3}));
    assert_eq!(state["context"]["schedule"]["id"], "life");

    let unpaused = ok(&r, "POST", "/schedules/life/unpause", None).await;
    assert_eq!(unpaused["paused"], false);
    assert_eq!(unpaused["nextFires"].as_array().map(Vec::len), Some(5));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    ok(&r, "POST", "/schedules/life/pause", None).await;
    let fired = fires_of(&r, "life").await;
    assert!(
        fired.len() >= 3,
        "the trigger and two ticks at least: {fired:?}"
    );
    let (first_tick, _) = fired
        .iter()
        .find(|(_, e)| e["executionId"] != id.as_str())
        .expect("a tick after the unpause");
    let trigger_time = fired
        .iter()
        .find(|(_, e)| e["executionId"] == id.as_str())
        .unwrap()
        .0;
    assert!(
        *first_tick > trigger_time,
        "no tick of the pause was caught up"
    );

    // Backfill the ten seconds before the trigger: ten ticks, all new; again: nothing new.
    let to = DateTime::from_timestamp(trigger_time.timestamp() - 1, 0).unwrap();
    let from = to - chrono::Duration::seconds(9);
    let range = json!({"from": from.to_rfc3339(), "to": to.to_rfc3339()});
    let done = ok(&r, "POST", "/schedules/life/backfill", Some(range.clone())).await;
    assert_eq!(done["ticks"], 10, "{done}");
    assert_eq!(done["started"].as_array().map(Vec::len), Some(10), "{done}");
    assert_eq!(done["existing"], 0);
    let again = ok(&r, "POST", "/schedules/life/backfill", Some(range)).await;
    assert_eq!(
        (again["ticks"].clone(), again["existing"].clone()),
        (json!(10), json!(10))
    );
    assert_eq!(again["started"], json!([]));
    assert_eq!(fires_of(&r, "life").await.len(), fired.len() + 10);

    let s = ok(&r, "GET", "/schedules/life", None).await;
    assert!(s["fires"].as_array().unwrap().len() <= 20);
    assert!(
        s["fires"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["origin"] == "backfill")
    );
    let list = ok(&r, "GET", "/schedules", None).await;
    assert!(
        list["schedules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == "life")
    );
    let deleted = ok(&r, "DELETE", "/schedules/life", None).await;
    assert_eq!(deleted, json!({"id": "life", "deleted": true}));
    let (status, body) = call(&r, "GET", "/schedules/life", None, None).await;
    assert_eq!(
        (status, body["code"].clone()),
        (404, json!("schedule_not_found"))
    );
    // Its executions stay.
    assert_eq!(fires_of(&r, "life").await.len(), fired.len() + 10);
    drop(r);
    db.remove().await;
}

/// Polls the state of execution `id` (by id alone) until its status is `status`.
async fn wait_state(r: &Replica, id: &str, status: &str) -> Value {
    let started = Instant::now();
    loop {
        let (code, body) = call(r, "GET", &format!("/executions/{id}"), None, None).await;
        if code == 200 && body["data"]["status"] == status {
            return body["data"].clone();
        }
        assert!(started.elapsed() < PATIENCE, "{id} never {status}: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A slow workflow (a countdown of 5 × 400 ms) each second: `skip` skips the ticks while a fire
/// runs; `buffer-one` keeps one waiting, which fires when the running one ends.
async fn overlap_skip_and_buffer_one(backend: Backend) {
    let db = Db::of(backend).await;
    let r = Replica::start(&db.url, "overlap", &[]);
    for (id, overlap) in [("skipping", "skip"), ("buffering", "buffer-one")] {
        let mut body = each_second(id, "countdown", json!({"stepDelayMs": 400}));
        body["overlap"] = json!(overlap);
        ok(&r, "POST", "/schedules", Some(body)).await;
    }
    let buffered = wait_schedule(&r, "buffering", "a buffered tick", |s| {
        !s["buffered"].is_null()
    })
    .await;
    // A tick waits only while a fire is active (it may end as the state is read).
    let active = &buffered["fires"][0]["status"];
    assert!(active == "running" || active == "completed", "{buffered}");
    tokio::time::sleep(Duration::from_millis(4500)).await;
    for id in ["skipping", "buffering"] {
        ok(&r, "POST", &format!("/schedules/{id}/pause"), None).await;
    }
    let skipping = ok(&r, "GET", "/schedules/skipping", None).await;
    let fires = fires_of(&r, "skipping").await;
    assert!(fires.len() >= 2, "{fires:?}");
    assert!(skipping["skipped"].as_u64().unwrap() >= 2, "{skipping}");
    // Never two at once: each fire started after the previous one ended.
    assert_no_overlap(&r, &fires).await;

    let buffering = ok(&r, "GET", "/schedules/buffering", None).await;
    let fires = fires_of(&r, "buffering").await;
    assert!(fires.len() >= 2, "{fires:?}");
    assert_no_overlap(&r, &fires).await;
    // The buffered tick fired with its own time, late: after the one before it ended.
    let (t, e) = &fires[1];
    let start = DateTime::parse_from_rfc3339(e["startAt"].as_str().unwrap()).unwrap();
    assert!(
        start.with_timezone(&Utc) - *t >= chrono::Duration::milliseconds(900),
        "{e}"
    );
    assert!(buffering["skipped"].as_u64().unwrap() >= 1, "{buffering}");
    drop(r);
    db.remove().await;
}

/// `buffer-one` with a countdown of 5 × 300 ms each second: every buffered tick starts within
/// 250 ms of the end of the fire it waited for (a round is up to a second away); a tick buffered
/// before a pause stays buffered through it, and the unpause fires it.
async fn buffer_one_starts_as_the_fire_ends(backend: Backend) {
    let db = Db::of(backend).await;
    let r = Replica::start(&db.url, "prompt", &[]);
    let mut body = each_second("prompt", "countdown", json!({"stepDelayMs": 300}));
    body["overlap"] = json!("buffer-one");
    ok(&r, "POST", "/schedules", Some(body)).await;
    let started = Instant::now();
    let fires = loop {
        let fires = fires_of(&r, "prompt").await;
        if fires.len() >= 3 {
            break fires;
        }
        assert!(started.elapsed() < PATIENCE, "three fires: {fires:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let time = |s: &Value, field: &str| {
        DateTime::parse_from_rfc3339(s[field].as_str().unwrap_or_else(|| panic!("{field}: {s}")))
            .unwrap()
            .with_timezone(&Utc)
    };
    for pair in fires[..3].windows(2) {
        let before = wait_state(&r, pair[0].1["executionId"].as_str().unwrap(), "completed").await;
        let after = wait_state(&r, pair[1].1["executionId"].as_str().unwrap(), "completed").await;
        let gap = time(&after, "startAt") - time(&before, "endAt");
        assert!(
            gap >= chrono::Duration::zero() && gap <= chrono::Duration::milliseconds(250),
            "the buffered fire started {gap} after the one it waited for ended: {before} {after}"
        );
    }

    // Paused while a tick waits: it stays buffered however long the pause, and the unpause
    // fires it (the active fire ended meanwhile).
    let mut tries = 0;
    let paused = loop {
        wait_schedule(&r, "prompt", "a buffered tick", |s| {
            !s["buffered"].is_null()
        })
        .await;
        let paused = ok(&r, "POST", "/schedules/prompt/pause", None).await;
        if !paused["buffered"].is_null() {
            break paused;
        }
        // The active fire ended between the read and the pause: again.
        ok(&r, "POST", "/schedules/prompt/unpause", None).await;
        tries += 1;
        assert!(tries < 10, "never paused with a buffered tick");
    };
    let buffered = time(&paused, "buffered");
    for f in fires_of(&r, "prompt").await {
        wait_state(&r, f.1["executionId"].as_str().unwrap(), "completed").await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = fires_of(&r, "prompt").await;
    assert!(before.iter().all(|(t, _)| *t < buffered), "{before:?}");
    let still = ok(&r, "GET", "/schedules/prompt", None).await;
    assert_eq!(still["buffered"], paused["buffered"], "{still}");
    let unpaused = ok(&r, "POST", "/schedules/prompt/unpause", None).await;
    assert!(unpaused["buffered"].is_null(), "{unpaused}");
    let after = fires_of(&r, "prompt").await;
    assert_eq!(after.len(), before.len() + 1, "{after:?}");
    assert_eq!(after.last().map(|(t, _)| *t), Some(buffered), "{after:?}");
    ok(&r, "POST", "/schedules/prompt/pause", None).await;
    drop(r);
    db.remove().await;
}

/// Every fire of `fires` started after the one before it ended.
async fn assert_no_overlap(r: &Replica, fires: &[(DateTime<Utc>, Value)]) {
    let mut previous_end: Option<DateTime<Utc>> = None;
    for (_, e) in fires {
        let id = e["executionId"].as_str().unwrap();
        let state = wait_state(r, id, "completed").await;
        let start = DateTime::parse_from_rfc3339(state["startAt"].as_str().unwrap())
            .unwrap()
            .with_timezone(&Utc);
        if let Some(end) = previous_end {
            assert!(start >= end, "{id} started before the previous fire ended");
        }
        previous_end = Some(end_of(r, id).await);
    }
}

/// When execution `id` ended (from its stream's summary in the executions list).
async fn end_of(r: &Replica, id: &str) -> DateTime<Utc> {
    let page = ok(r, "GET", "/executions?workflowId=countdown&limit=100", None).await;
    let e = page["executions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["executionId"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{id} in the list"));
    DateTime::parse_from_rfc3339(e["endAt"].as_str().expect("ended"))
        .unwrap()
        .with_timezone(&Utc)
}

/// Bad input: each field named, with its code and status.
async fn bad_input_names_the_field(backend: Backend) {
    let db = Db::of(backend).await;
    let r = Replica::start(&db.url, "bad", &[]);
    let base = || each_second("bad", "word-count", json!({"text": "x"}));
    let with = |field: &str, value: Value| {
        let mut b = base();
        b[field] = value;
        b
    };
    let cases = [
        (
            with("cron", json!("every day at two")),
            400,
            "invalid_schedule",
            "cron",
        ),
        (
            with("cron", json!("0 0 30 2 *")),
            400,
            "invalid_schedule",
            "cron",
        ),
        (
            with("timezone", json!("Mars/Olympus")),
            400,
            "invalid_schedule",
            "timezone",
        ),
        (
            with("catchupWindow", json!("soon")),
            400,
            "invalid_schedule",
            "catchupWindow",
        ),
        (
            with("catchupWindow", json!("0s")),
            400,
            "invalid_schedule",
            "catchupWindow",
        ),
        (
            with("overlap", json!("sometimes")),
            400,
            "invalid_schedule",
            "overlap",
        ),
        (
            with("workflowId", json!("no-such-workflow")),
            400,
            "invalid_schedule",
            "workflowId",
        ),
        (
            with("input", json!({"words": 1})),
            400,
            "invalid_schedule",
            "input",
        ),
        (
            with("id", json!("has space")),
            400,
            "invalid_schedule",
            "id",
        ),
        (
            with("id", json!("x".repeat(101))),
            400,
            "invalid_schedule",
            "id",
        ),
        (with("cron", json!(7)), 400, "invalid_request", "cron"),
    ];
    for (body, status, code, field) in cases {
        let (got, answer) = call(&r, "POST", "/schedules", None, Some(body.clone())).await;
        assert_eq!(
            (got, answer["code"].as_str()),
            (status, Some(code)),
            "{body}: {answer}"
        );
        // A body of the wrong JSON types is refused before it is read (`invalid_request`);
        // a field whose value is wrong is named.
        if code == "invalid_schedule" {
            assert!(
                answer["error"].as_str().unwrap().contains(field),
                "{answer}"
            );
        }
    }
    ok(&r, "POST", "/schedules", Some(base())).await;
    let (status, answer) = call(&r, "POST", "/schedules", None, Some(base())).await;
    assert_eq!(
        (status, answer["code"].as_str()),
        (409, Some("schedule_exists"))
    );
    for (range, field) in [
        (
            json!({"from": "2020-01-01T00:00:00Z", "to": "2020-01-02T00:00:00Z"}),
            "more than 1000 ticks",
        ),
        (
            json!({"from": "yesterday", "to": "2020-01-02T00:00:00Z"}),
            "from",
        ),
        (
            json!({"from": "2020-01-02T00:00:00Z", "to": "2020-01-01T00:00:00Z"}),
            "before from",
        ),
        (
            json!({"from": "2020-01-02T00:00:00Z", "to": "2999-01-01T00:00:00Z"}),
            "future",
        ),
    ] {
        let (status, answer) = call(&r, "POST", "/schedules/bad/backfill", None, Some(range)).await;
        assert_eq!(
            (status, answer["code"].as_str()),
            (400, Some("invalid_backfill")),
            "{answer}"
        );
        assert!(
            answer["error"].as_str().unwrap().contains(field),
            "{answer}"
        );
    }
    for (method, path) in [
        ("GET", "/schedules/nope"),
        ("DELETE", "/schedules/nope"),
        ("POST", "/schedules/nope/pause"),
        ("POST", "/schedules/nope/trigger"),
    ] {
        let (status, answer) = call(&r, method, path, None, None).await;
        assert_eq!(
            (status, answer["code"].as_str()),
            (404, Some("schedule_not_found")),
            "{method} {path}"
        );
    }
    drop(r);
    db.remove().await;
}

const SECRET: &str = "schedule-tests-secret-of-32-bytes!";

fn token(sub: &str, roles: &[&str]) -> String {
    agentry_auth::create_token(
        &json!({"sub": sub, "roles": roles}),
        SECRET.as_bytes(),
        &agentry_auth::TokenOptions::default(),
    )
    .expect("a token")
}

/// Strict mode: a token is needed on every route; a schedule is its creator's (and an admin's):
/// another user finds nothing there; its fires are its owner's executions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_mode_owns_schedules_and_their_fires() {
    let db = Db::sqlite().await;
    let r = Replica::start(
        &db.url,
        "strict",
        &[("AGENTRY_JWT_SECRET", SECRET), ("AGENTRY_AUTH_STRICT", "1")],
    );
    let (alice, bob, admin) = (
        token("alice", &[]),
        token("bob", &[]),
        token("root", &["admin"]),
    );
    let body = each_second("mine", "word-count", json!({"text": "x"}));
    let (status, _) = call(&r, "POST", "/schedules", None, Some(body.clone())).await;
    assert_eq!(status, 401);
    let (status, created) = call(&r, "POST", "/schedules", Some(&alice), Some(body)).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["data"]["owner"], "alice");
    let paths = [
        ("GET", "/schedules/mine", None),
        ("DELETE", "/schedules/mine", None),
        ("POST", "/schedules/mine/pause", None),
        ("POST", "/schedules/mine/unpause", None),
        ("POST", "/schedules/mine/trigger", None),
        (
            "POST",
            "/schedules/mine/backfill",
            Some(json!({"from": "2020-01-01T00:00:00Z", "to": "2020-01-01T00:00:01Z"})),
        ),
    ];
    for (method, path, body) in &paths {
        let (status, _) = call(&r, method, path, None, body.clone()).await;
        assert_eq!(status, 401, "{method} {path} without a token");
        let (status, answer) = call(&r, method, path, Some(&bob), body.clone()).await;
        assert_eq!(
            (status, answer["code"].as_str()),
            (404, Some("schedule_not_found")),
            "{method} {path} by another user"
        );
    }
    let (status, _) = call(&r, "GET", "/schedules", None, None).await;
    assert_eq!(status, 401);
    for (who, seen) in [(&alice, 1), (&bob, 0), (&admin, 1)] {
        let (_, list) = call(&r, "GET", "/schedules", Some(who), None).await;
        let ids: Vec<&Value> = list["data"]["schedules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["id"] == "mine")
            .collect();
        assert_eq!(ids.len(), seen, "{list}");
    }
    // An admin triggers it: the fire is still alice's.
    let (status, fire) = call(&r, "POST", "/schedules/mine/trigger", Some(&admin), None).await;
    assert_eq!(status, 200, "{fire}");
    let id = fire["data"]["executionId"].as_str().unwrap();
    let path = format!("/executions/{id}");
    let started = Instant::now();
    loop {
        let (status, state) = call(&r, "GET", &path, Some(&alice), None).await;
        if status == 200 && state["data"]["status"] == "completed" {
            break;
        }
        assert!(started.elapsed() < PATIENCE, "{state}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, _) = call(&r, "GET", &path, Some(&bob), None).await;
    assert_eq!(status, 403);
    let (status, _) = call(&r, "POST", "/schedules/mine/pause", Some(&alice), None).await;
    assert_eq!(status, 200);
    let (status, _) = call(&r, "DELETE", "/schedules/mine", Some(&admin), None).await;
    assert_eq!(status, 200);
    drop(r);
    db.remove().await;
}

/// Finding 11 of issue 35: one user cannot take every schedule. With the provider on, alice
/// fills her cap (100 by default, the example's declared `nightly-report` not counted) and is
/// refused `409 schedule_limit` naming it; bob still creates his; an admin has the same cap;
/// a deleted schedule frees a place; `AGENTRY_MAX_SCHEDULES_PER_USER` moves the cap.
async fn each_user_has_a_cap_of_schedules(backend: Backend) {
    let db = Db::of(backend).await;
    let r = Replica::start(&db.url, "capped", &[("AGENTRY_JWT_SECRET", SECRET)]);
    let (alice, bob, admin) = (
        token("alice", &[]),
        token("bob", &[]),
        token("root", &["admin"]),
    );
    let daily = |id: String| {
        json!({"id": id, "workflowId": "word-count", "cron": "0 2 * * *",
            "input": {"text": "x"}, "paused": true})
    };
    let create = |who: &str, id: String| {
        let who = who.to_owned();
        let r = &r;
        async move { call(r, "POST", "/schedules", Some(&who), Some(daily(id))).await }
    };
    for n in 0..100 {
        let (status, body) = create(&alice, format!("a-{n}")).await;
        assert_eq!(status, 201, "alice's schedule {n}: {body}");
    }
    let refused = |(status, body): (u16, Value), n: u64| {
        assert_eq!(status, 409, "{body}");
        assert_eq!(body["code"], "schedule_limit", "{body}");
        assert_eq!(
            body["error"],
            format!("You keep {n} schedules already, the most one user may: delete one first")
        );
    };
    refused(create(&alice, "a-100".into()).await, 100);
    let (status, body) = create(&bob, "b-0".into()).await;
    assert_eq!(status, 201, "{body}");
    for n in 0..100 {
        let (status, body) = create(&admin, format!("root-{n}")).await;
        assert_eq!(status, 201, "{body}");
    }
    refused(create(&admin, "root-100".into()).await, 100);
    let (status, _) = call(&r, "DELETE", "/schedules/a-0", Some(&alice), None).await;
    assert_eq!(status, 200);
    let (status, body) = create(&alice, "a-100".into()).await;
    assert_eq!(status, 201, "{body}");
    refused(create(&alice, "a-101".into()).await, 100);
    drop(r);
    let r = Replica::start(
        &db.url,
        "capped",
        &[
            ("AGENTRY_JWT_SECRET", SECRET),
            ("AGENTRY_MAX_SCHEDULES_PER_USER", "102"),
        ],
    );
    let (status, body) = call(
        &r,
        "POST",
        "/schedules",
        Some(&alice),
        Some(daily("a-101".into())),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(
        &r,
        "POST",
        "/schedules",
        Some(&alice),
        Some(daily("a-102".into())),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(
        &r,
        "POST",
        "/schedules",
        Some(&alice),
        Some(daily("a-103".into())),
    )
    .await;
    refused((status, body), 102);
    drop(r);
    db.remove().await;
}

/// The example registry declares `nightly-report`, paused; a trigger runs the report of the
/// fire time's day.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nightly_report_is_declared_paused_and_reports_the_day() {
    let db = Db::sqlite().await;
    let r = Replica::start(&db.url, "nightly", &[]);
    let s = ok(&r, "GET", "/schedules/nightly-report", None).await;
    assert_eq!(s["workflowId"], "nightly-report");
    assert_eq!(s["cron"], "0 2 * * *");
    assert_eq!(s["timezone"], "UTC");
    assert_eq!(s["overlap"], "skip");
    assert_eq!(s["catchupWindow"], "1h");
    assert_eq!(s["paused"], true);
    assert_eq!(s["declared"], true);
    let words = ok(
        &r,
        "POST",
        "/workflows/word-count/execute",
        Some(json!({"input": {"text": "today"}})),
    )
    .await;
    assert_eq!(words["status"], "completed");
    let fire = ok(&r, "POST", "/schedules/nightly-report/trigger", None).await;
    let id = fire["executionId"].as_str().unwrap();
    let state = wait_state(&r, id, "completed").await;
    let today = Utc::now().date_naive().to_string();
    // The word count and the report itself started today.
    assert_eq!(
        state["result"],
        json!({"day": today, "executions": 2}),
        "{state}"
    );
    let other = ok(
        &r,
        "POST",
        "/workflows/nightly-report/execute",
        Some(json!({"input": {"day": "2020-01-01"}})),
    )
    .await;
    assert_eq!(
        other["result"],
        json!({"day": "2020-01-01", "executions": 0})
    );
    // Restarted, it is declared again and stays as it was (unpaused here).
    ok(&r, "POST", "/schedules/nightly-report/unpause", None).await;
    drop(r);
    let r = Replica::start(&db.url, "nightly", &[]);
    let s = ok(&r, "GET", "/schedules/nightly-report", None).await;
    assert_eq!(s["paused"], false, "{s}");
    assert_eq!(s["fires"][0]["executionId"], id);
    drop(r);
    db.remove().await;
}

/// Instantiates each test once per database.
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Backend::Sqlite).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Backend::Postgres).await;
                }
            )*
        }
    };
}

on_both!(
    missed_ticks_are_caught_up_within_the_window,
    pause_trigger_unpause_backfill_delete,
    overlap_skip_and_buffer_one,
    buffer_one_starts_as_the_fire_ends,
    bad_input_names_the_field,
    each_user_has_a_cap_of_schedules,
);
