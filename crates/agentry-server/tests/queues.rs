//! Queues (issue 27, item 2) through the real binary, on one SQLite replica and on three
//! PostgreSQL replicas sharing one database: the global and per-key concurrency limits never
//! exceeded (read back from the stored step times), round-robin fairness between keys, priority
//! order, the sliding-window rate limits, a replica killed with -9 in the middle of a queue, the
//! cancel of a queued execution, `/execute`'s 202 and `/stream`'s `workflow-queued` while an
//! execution waits, `GET /queues` (and strict mode's view of it), the lists, counts and metrics
//! of queued executions, and a malformed `AGENTRY_TEST_QUEUE` refused at start.
//!
//! The hidden test registry (`AGENTRY_TEST_AGENTS`, see `src/test_agents.rs`) adds
//! `tester-queued` (`{tenant, work, priority?}`: one step `work` that sleeps `work` ms, in the
//! queue `tester-queued` keyed by `/tenant`, limits from `AGENTRY_TEST_QUEUE`), whose step logs
//! each start and end with its node and the time (`tools.log`).
//!
//! A test parks a queue behind a "blocker" (an execution whose step sleeps a minute) where it
//! needs every execution queued before the first is dequeued, and cancels the blocker to let
//! the queue go: nothing depends on how fast the test enqueues.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use common::replica::{
    PATIENCE, Replica, SECRET, client, get, log_lines, post, read_sse, scratch_dir, sqlite_url,
    state_of, token, wait_for_state,
};
use serde_json::{Value, json};

const WF: &str = "tester-queued";

/// The replicas of one test on one database (one on SQLite, three on PostgreSQL, nodes `q1`,
/// `q2`, `q3`), with the test registry logging to one directory.
struct Cluster {
    replicas: Vec<Replica>,
    dir: PathBuf,
}

impl Cluster {
    /// Starts the replicas with `AGENTRY_TEST_QUEUE=queue` and `extra` on top.
    fn start(url: &str, queue: &str, extra: &[(&str, &str)]) -> Cluster {
        let count = if url.starts_with("sqlite") { 1 } else { 3 };
        Cluster::start_n(url, count, queue, extra)
    }

    fn start_n(url: &str, count: usize, queue: &str, extra: &[(&str, &str)]) -> Cluster {
        let dir = scratch_dir();
        let mut env = vec![("AGENTRY_TEST_QUEUE", queue)];
        env.extend_from_slice(extra);
        let replicas = (1..=count)
            .map(|i| Replica::with_test_registry(url, &format!("q{i}"), &dir, &env))
            .collect();
        Cluster { replicas, dir }
    }

    /// The `i`-th replica, round the ring (spreads a test's requests over the replicas).
    fn at(&self, i: usize) -> &Replica {
        &self.replicas[i % self.replicas.len()]
    }

    /// The last replica: on PostgreSQL another process than `at(0)`, for the reads and cancels
    /// that go elsewhere than the first enqueue.
    fn other(&self) -> &Replica {
        self.replicas.last().expect("a replica")
    }

    fn log(&self) -> Vec<String> {
        log_lines(&self.dir)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.replicas.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The execute/stream body of `tester-queued` `id`: input and options.
fn body(id: &str, tenant: &str, work: u64) -> Value {
    json!({"input": {"tenant": tenant, "work": work}, "options": {"executionId": id}})
}

/// Starts an execution through `/stream` and closes the stream at its first event, which must
/// be `workflow-queued`: once it is returned, the execution is in the queue (or already
/// dequeued). The event.
async fn enqueue(r: &Replica, body: Value) -> Value {
    let resp = client()
        .post(r.url(&format!("/workflows/{WF}/stream")))
        .json(&body)
        .send()
        .await
        .expect("stream");
    assert_eq!(resp.status(), 200, "{body}");
    let events = read_sse(resp, |evs| !evs.is_empty()).await;
    let first = events.first().map(|(_, e)| e.clone()).unwrap_or_default();
    assert_eq!(
        first["type"], "workflow-queued",
        "first event of {body}: {first}"
    );
    assert_eq!(
        first["executionId"], body["options"]["executionId"],
        "{first}"
    );
    first
}

/// Starts the blocker `id` (a step that sleeps a minute) and waits until it runs: the queue's
/// slot (with `concurrency=1`) is taken.
async fn block(c: &Cluster, id: &str, tenant: &str) {
    enqueue(c.at(0), body(id, tenant, 60_000)).await;
    wait_for_state(c.other(), WF, id, "the blocker running", |s| {
        s["status"] == "running"
    })
    .await;
}

/// Cancels `id` through `r`: the answer's `data`.
async fn cancel(r: &Replica, id: &str) -> Value {
    let (status, answer) = post(
        r,
        &format!("/workflows/{WF}/executions/{id}/cancel"),
        json!({"reason": "test"}),
        None,
    )
    .await;
    assert_eq!(status, 200, "cancel {id}: {answer}");
    answer["data"].clone()
}

/// Waits until each of `ids` ended (any final status): their states, in the order of `ids`.
async fn wait_all_ended(r: &Replica, ids: &[String]) -> Vec<Value> {
    let mut states = Vec::new();
    for id in ids {
        states.push(
            wait_for_state(r, WF, id, "the end", |s| {
                matches!(
                    s["status"].as_str(),
                    Some("completed" | "error" | "cancelled")
                )
            })
            .await,
        );
    }
    states
}

/// Waits until each of `ids` completed: their states (each checked to be its tenant's).
async fn wait_all_completed(r: &Replica, ids: &[String]) -> Vec<Value> {
    let states = wait_all_ended(r, ids).await;
    for s in &states {
        assert_eq!(s["status"], "completed", "{s}");
        assert_eq!(s["result"], json!({"tenant": s["input"]["tenant"]}), "{s}");
    }
    states
}

fn time(v: &Value) -> DateTime<Utc> {
    let s = v.as_str().unwrap_or_else(|| panic!("a timestamp: {v}"));
    DateTime::parse_from_rfc3339(s)
        .unwrap_or_else(|e| panic!("{s}: {e}"))
        .with_timezone(&Utc)
}

/// One run of a step: which execution, its tenant, when it started and ended.
#[derive(Debug, Clone)]
struct Run {
    id: String,
    tenant: String,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
}

/// The stored run of each state's `work` step.
fn stored_runs(states: &[Value]) -> Vec<Run> {
    states
        .iter()
        .map(|s| {
            let step = &s["steps"]["work"];
            Run {
                id: s["executionId"].as_str().unwrap_or("?").to_owned(),
                tenant: s["input"]["tenant"].as_str().unwrap_or("?").to_owned(),
                start: time(&step["startedAt"]),
                end: time(&step["endedAt"]),
            }
        })
        .collect()
}

/// The most runs that overlap at one instant, and one such instant's runs. An end at the
/// instant of a start is not an overlap (ends are swept first).
fn max_overlap<'a>(runs: impl IntoIterator<Item = &'a Run>) -> (usize, Vec<String>) {
    let mut points: Vec<(DateTime<Utc>, bool, &Run)> = Vec::new();
    for r in runs {
        assert!(r.end >= r.start, "{r:?}");
        points.push((r.start, true, r));
        points.push((r.end, false, r));
    }
    // At one instant, ends (false) before starts (true).
    points.sort_by_key(|(t, start, _)| (*t, *start));
    let mut open: BTreeMap<&str, &Run> = BTreeMap::new();
    let (mut most, mut at) = (0, Vec::new());
    for (_, start, r) in points {
        if start {
            open.insert(r.id.as_str(), r);
            if open.len() > most {
                most = open.len();
                at = open
                    .values()
                    .map(|r| format!("{} ({}) {} → {}", r.id, r.tenant, r.start, r.end))
                    .collect();
            }
        } else {
            open.remove(r.id.as_str());
        }
    }
    (most, at)
}

/// No instant had more than `global` runs at once, nor more than `per_key` of one tenant: the
/// highest overlaps seen (global, the highest of one tenant).
fn assert_limits(runs: &[Run], global: usize, per_key: usize, what: &str) -> (usize, usize) {
    let (most, at) = max_overlap(runs);
    assert!(
        most <= global,
        "{what}: {most} runs at once, the limit is {global}: {at:#?}"
    );
    let tenants: BTreeSet<&str> = runs.iter().map(|r| r.tenant.as_str()).collect();
    let mut most_of_one = 0;
    for t in tenants {
        let (n, at) = max_overlap(runs.iter().filter(|r| r.tenant == t));
        assert!(
            n <= per_key,
            "{what}: {n} runs of {t} at once, the key limit is {per_key}: {at:#?}"
        );
        most_of_one = most_of_one.max(n);
    }
    (most, most_of_one)
}

/// One line of `tools.log` written by `tester-queued`'s step.
#[derive(Debug, Clone)]
struct Logged {
    start: bool,
    id: String,
    tenant: String,
    node: String,
    attempt: u32,
    at: DateTime<Utc>,
}

fn logged(lines: &[String]) -> Vec<Logged> {
    lines
        .iter()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let [what @ ("start" | "end"), id, tenant, node, attempt, micros] = f[..] else {
                return None;
            };
            Some(Logged {
                start: what == "start",
                id: id.to_owned(),
                tenant: tenant.to_owned(),
                node: node.to_owned(),
                attempt: attempt.parse().ok()?,
                at: DateTime::from_timestamp_micros(micros.parse().ok()?)?,
            })
        })
        .collect()
}

/// The nodes that started `id`'s step, in the order of the log.
fn nodes_of(log: &[Logged], id: &str) -> Vec<String> {
    log.iter()
        .filter(|l| l.start && l.id == id)
        .map(|l| l.node.clone())
        .collect()
}

/// The executions in the order their step started (the stored times).
fn start_order(states: &[Value]) -> Vec<String> {
    let mut runs = stored_runs(states);
    runs.sort_by_key(|r| r.start);
    runs.into_iter().map(|r| r.id).collect()
}

on_both_databases!(
    the_limits_are_never_exceeded,
    the_limits_are_never_exceeded_on_sqlite,
    the_limits_are_never_exceeded_on_postgres
);

/// 40 executions over 4 tenants (16, 12, 8 and 4 of them, so that the key limit binds once
/// only the first tenant is left), 100 to 200 ms each, `concurrency=4,keyLimit=2`, submitted at
/// once over the replicas: all complete; the stored step times never show more than 4 at once
/// nor more than 2 of one tenant; on PostgreSQL, more than one replica ran them.
async fn the_limits_are_never_exceeded(url: &str) {
    let c = Cluster::start(url, "concurrency=4,keyLimit=2", &[]);
    let tenants = [("a", 16), ("b", 12), ("c", 8), ("d", 4)];
    let mut ids = Vec::new();
    let mut submits = Vec::new();
    for (tenant, n) in tenants {
        for i in 0..n {
            let id = format!("lim-{tenant}-{i}");
            let url = c.at(ids.len()).url(&format!("/workflows/{WF}/execute"));
            let work = 100 + (ids.len() as u64 * 37) % 101;
            let b = body(&id, tenant, work);
            submits.push(tokio::spawn(async move {
                let resp = client().post(url).json(&b).send().await.expect("execute");
                let status = resp.status().as_u16();
                (status, resp.json::<Value>().await.unwrap_or(Value::Null))
            }));
            ids.push(id);
        }
    }
    // Each waits for its result (all well within the 30 s `/execute` waits).
    for s in submits {
        let (status, answer) = s.await.expect("task");
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["data"]["status"], "completed", "{answer}");
    }
    let states = wait_all_completed(c.other(), &ids).await;
    for s in &states {
        assert_eq!(s["queue"]["name"], WF, "{s}");
        assert_eq!(s["queue"]["key"], s["input"]["tenant"], "{s}");
        assert_eq!(s["queue"]["priority"], 0, "{s}");
        assert!(s["queue"]["queuedAt"].is_string(), "{s}");
        assert!(s["queue"]["startedAt"].is_string(), "{s}");
        assert!(
            time(&s["queue"]["startedAt"]) >= time(&s["queue"]["queuedAt"]),
            "{s}"
        );
        assert_eq!(s["steps"]["work"]["attempt"], 1, "{s}");
    }
    let (most, most_of_one) = assert_limits(&stored_runs(&states), 4, 2, "stored step times");
    eprintln!("at most {most} at once, {most_of_one} of one tenant");
    // It ran them concurrently at all (no claim on how close to the limit).
    assert!(most >= 2, "never more than one at once");
    // The log of the step's own starts and ends says the same.
    let log = logged(&c.log());
    let log_runs: Vec<Run> = ids
        .iter()
        .map(|id| {
            let of = |start: bool| {
                let mine: Vec<&Logged> = log
                    .iter()
                    .filter(|l| l.id == *id && l.start == start)
                    .collect();
                assert_eq!(mine.len(), 1, "{id}: {mine:?}");
                mine[0].clone()
            };
            let (s, e) = (of(true), of(false));
            Run {
                id: id.clone(),
                tenant: s.tenant,
                start: s.at,
                end: e.at,
            }
        })
        .collect();
    assert_limits(&log_runs, 4, 2, "the step's own log");
    let nodes: BTreeSet<String> = ids.iter().flat_map(|id| nodes_of(&log, id)).collect();
    eprintln!("ran on {nodes:?}");
    if c.replicas.len() > 1 {
        assert!(nodes.len() > 1, "all ran on {nodes:?}");
    }
}

on_both_databases!(
    keys_are_served_round_robin,
    keys_are_served_round_robin_on_sqlite,
    keys_are_served_round_robin_on_postgres
);

/// `concurrency=1`: 20 executions of a busy tenant (the first one the blocker), then 2 of a
/// quiet one. Once the blocker goes, the quiet tenant's two start among the first four, not
/// after the busy tenant's nineteen; each tenant's own executions start in their order.
async fn keys_are_served_round_robin(url: &str) {
    let c = Cluster::start(url, "concurrency=1", &[]);
    block(&c, "rr-busy-00", "busy").await;
    let mut ids = Vec::new();
    for i in 1..20 {
        let id = format!("rr-busy-{i:02}");
        enqueue(c.at(i), body(&id, "busy", 30)).await;
        ids.push(id);
    }
    for i in 0..2 {
        let id = format!("rr-quiet-{i}");
        enqueue(c.at(i), body(&id, "quiet", 30)).await;
        ids.push(id);
    }
    cancel(c.other(), "rr-busy-00").await;
    let states = wait_all_completed(c.at(0), &ids).await;
    assert_limits(&stored_runs(&states), 1, 1, "concurrency=1");
    let order = start_order(&states);
    for quiet in ["rr-quiet-0", "rr-quiet-1"] {
        let at = order.iter().position(|id| id == quiet).unwrap();
        assert!(at < 4, "{quiet} started {}th: {order:?}", at + 1);
    }
    let busy: Vec<&String> = order.iter().filter(|id| id.contains("busy")).collect();
    let mut sorted = busy.clone();
    sorted.sort();
    assert_eq!(busy, sorted, "FIFO within a key");
}

on_both_databases!(
    higher_priorities_start_first,
    higher_priorities_start_first_on_sqlite,
    higher_priorities_start_first_on_postgres
);

/// `concurrency=1`, one tenant, the slot held: three executions at priority -5 (the request's
/// `options.priority`), one without a priority, three at 10 (the input's `priority`), one whose
/// input says -100 and whose request says 5 (the request wins). Once the slot frees they start
/// 10, 10, 10, 5, 0, -5, -5, -5, in the order they were enqueued within each priority.
async fn higher_priorities_start_first(url: &str) {
    let c = Cluster::start(url, "concurrency=1", &[]);
    block(&c, "pri-blocker", "t").await;
    let mut submitted = Vec::new();
    let mut enq = |id: &str, input_priority: Option<i64>, option_priority: Option<i64>| {
        let mut b = body(id, "t", 20);
        if let Some(p) = input_priority {
            b["input"]["priority"] = json!(p);
        }
        if let Some(p) = option_priority {
            b["options"]["priority"] = json!(p);
        }
        submitted.push(id.to_owned());
        b
    };
    let bodies = [
        enq("pri-low-1", None, Some(-5)),
        enq("pri-low-2", None, Some(-5)),
        enq("pri-none", None, None),
        enq("pri-low-3", Some(7), Some(-5)),
        enq("pri-high-1", Some(10), None),
        enq("pri-high-2", Some(10), None),
        enq("pri-override", Some(-100), Some(5)),
        enq("pri-high-3", Some(10), None),
    ];
    for (i, b) in bodies.into_iter().enumerate() {
        let event = enqueue(c.at(i), b.clone()).await;
        let expected = b["options"]["priority"]
            .as_i64()
            .or(b["input"]["priority"].as_i64())
            .unwrap_or(0);
        assert_eq!(event["queue"]["name"], WF, "{event}");
        assert_eq!(event["queue"]["key"], "t", "{event}");
        assert_eq!(event["queue"]["priority"], expected, "{event}");
    }
    for id in &submitted {
        let s = state_of(c.other(), WF, id).await.expect("the execution");
        assert_eq!(s["status"], "queued", "{s}");
        assert!(s["steps"].as_object().is_none_or(|m| m.is_empty()), "{s}");
        assert!(s["queue"]["startedAt"].is_null(), "{s}");
    }
    cancel(c.other(), "pri-blocker").await;
    let states = wait_all_completed(c.at(0), &submitted).await;
    let priorities: BTreeMap<String, i64> = states
        .iter()
        .map(|s| {
            (
                s["executionId"].as_str().unwrap().to_owned(),
                s["queue"]["priority"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(priorities["pri-override"], 5);
    assert_eq!(priorities["pri-low-3"], -5);
    assert_eq!(priorities["pri-none"], 0);
    assert_eq!(
        start_order(&states),
        [
            "pri-high-1",
            "pri-high-2",
            "pri-high-3",
            "pri-override",
            "pri-none",
            "pri-low-1",
            "pri-low-2",
            "pri-low-3"
        ]
    );
    assert_limits(&stored_runs(&states), 1, 1, "concurrency=1");
}

/// Enqueues `per_tenant` executions of 10 ms for each of `tenants` (taking turns) on a cluster
/// with `AGENTRY_TEST_QUEUE=queue` and waits for them: their dequeue times
/// (`queue.startedAt`, what a rate limit counts) and their steps' stored starts (written a
/// little after the dequeue, by whichever process runs it), each sorted, with their tenants.
async fn rated_starts(url: &str, queue: &str, tenants: &[&str], per_tenant: usize) -> [Starts; 2] {
    let c = Cluster::start(url, queue, &[]);
    let ids: Vec<String> = (0..tenants.len() * per_tenant)
        .map(|i| format!("rate-{i:02}"))
        .collect();
    for (i, id) in ids.iter().enumerate() {
        enqueue(c.at(i), body(id, tenants[i % tenants.len()], 10)).await;
    }
    let states = wait_all_completed(c.other(), &ids).await;
    let key = |s: &Value| s["queue"]["key"].as_str().unwrap_or("?").to_owned();
    let sorted = |at: &dyn Fn(&Value) -> &Value| {
        let mut starts: Starts = states.iter().map(|s| (time(at(s)), key(s))).collect();
        starts.sort();
        starts
    };
    [
        sorted(&|s| &s["queue"]["startedAt"]),
        sorted(&|s| &s["steps"]["work"]["startedAt"]),
    ]
}

/// Start times, sorted, with their tenants.
type Starts = Vec<(DateTime<Utc>, String)>;

/// The slack of the window checks: none (1 ms of rounding) on the dequeue times, which the
/// limit counts; 250 ms on the steps' starts, which a busy machine may delay after their
/// dequeue by different amounts.
const RATE_SLACK_MS: [i64; 2] = [1, 250];

/// No window of 1000 ms (less `slack_ms`) holds more than `limit` of `starts`.
fn assert_window(starts: &[(DateTime<Utc>, String)], limit: usize, slack_ms: i64, what: &str) {
    let window = chrono::Duration::milliseconds(1000 - slack_ms);
    let times: Vec<DateTime<Utc>> = starts.iter().map(|(t, _)| *t).collect();
    for (i, pair) in times.windows(limit + 1).enumerate() {
        let span = pair[limit] - pair[0];
        assert!(
            span >= window,
            "{what}: starts {i} to {} within {span} (limit {limit} per 1000 ms): {times:?}",
            i + limit
        );
    }
}

on_both_databases!(
    a_rate_limit_spreads_the_starts,
    a_rate_limit_spreads_the_starts_on_sqlite,
    a_rate_limit_spreads_the_starts_on_postgres
);

/// `rate=5/1000`, no concurrency limit: 20 executions of 10 ms over 4 tenants, enqueued at
/// once. No 1000 ms window holds more than 5 starts; the batch takes at least 3 s.
async fn a_rate_limit_spreads_the_starts(url: &str) {
    let both = rated_starts(url, "rate=5/1000", &["a", "b", "c", "d"], 5).await;
    for (starts, (slack, what)) in both
        .iter()
        .zip(RATE_SLACK_MS.into_iter().zip(["dequeues", "step starts"]))
    {
        assert_window(starts, 5, slack, what);
    }
    let dequeued = &both[0];
    let took = dequeued.last().unwrap().0 - dequeued[0].0;
    assert!(
        took >= chrono::Duration::milliseconds(2999),
        "20 starts at 5 per second within {took}"
    );
}

on_both_databases!(
    a_rate_limit_per_key_spreads_each_keys_starts,
    a_rate_limit_per_key_spreads_each_keys_starts_on_sqlite,
    a_rate_limit_per_key_spreads_each_keys_starts_on_postgres
);

/// `rateKey=2/1000`: 5 executions of 10 ms for each of 3 tenants, enqueued at once. No 1000 ms
/// window holds more than 2 starts of one tenant (each tenant's five take at least 2 s), but
/// the tenants do not wait for each other: the first window holds more than 2 starts.
async fn a_rate_limit_per_key_spreads_each_keys_starts(url: &str) {
    let tenants = ["a", "b", "c"];
    let both = rated_starts(url, "rateKey=2/1000", &tenants, 5).await;
    for (starts, (slack, what)) in both
        .iter()
        .zip(RATE_SLACK_MS.into_iter().zip(["dequeues", "step starts"]))
    {
        for t in tenants {
            let mine: Starts = starts.iter().filter(|(_, k)| k == t).cloned().collect();
            assert_eq!(mine.len(), 5, "{mine:?}");
            assert_window(&mine, 2, slack, &format!("{what} of {t}"));
        }
    }
    let dequeued = &both[0];
    for t in tenants {
        let mine: Vec<DateTime<Utc>> = dequeued
            .iter()
            .filter(|(_, k)| k == t)
            .map(|(at, _)| *at)
            .collect();
        assert!(
            mine[4] - mine[0] >= chrono::Duration::milliseconds(1999),
            "{t}: {mine:?}"
        );
    }
    let first_window = dequeued
        .iter()
        .filter(|(at, _)| *at - dequeued[0].0 < chrono::Duration::milliseconds(1000))
        .count();
    assert!(first_window > 2, "the limit is per key: {dequeued:?}");
}

/// SQLite has one server: killed -9 while a step runs and others wait, it is started again on
/// the same database and node id, continues the started executions (their interrupted step once
/// more) and drains the queue; nothing is lost, and the limits hold across the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_queue_loses_nothing_on_sqlite() {
    let (url, path) = sqlite_url();
    let queue = "concurrency=2,keyLimit=1";
    let mut c = Cluster::start_n(&url, 1, queue, &[]);
    let ids: Vec<String> = (0..10).map(|i| format!("skill-{i:02}")).collect();
    for (i, id) in ids.iter().enumerate() {
        enqueue(c.at(0), body(id, &format!("t{}", i % 5), 600)).await;
    }
    // A step runs now (started less than 300 ms ago, not ended) while others wait.
    let started = Instant::now();
    loop {
        let log = logged(&c.log());
        let now = Utc::now();
        let running = log.iter().any(|l| {
            l.start
                && now - l.at < chrono::Duration::milliseconds(300)
                && !log.iter().any(|e| !e.start && e.id == l.id)
        });
        let (_, q) = get(c.at(0), &format!("/queues/{WF}"), None).await;
        if running && q["data"]["queued"].as_u64().unwrap_or(0) > 0 {
            break;
        }
        assert!(started.elapsed() < PATIENCE, "nothing ran: {log:?} {q}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    c.replicas[0].signal("-KILL");
    let _ = c.replicas[0].child.wait();
    let killed_at = Utc::now();
    let env = [("AGENTRY_TEST_QUEUE", queue)];
    c.replicas[0] = Replica::with_test_registry(&url, "q1", &c.dir, &env);
    let states = wait_all_completed(c.at(0), &ids).await;

    let log = logged(&c.log());
    let mut interrupted = 0;
    for s in &states {
        let id = s["executionId"].as_str().unwrap();
        let starts: Vec<&Logged> = log.iter().filter(|l| l.start && l.id == id).collect();
        let ends: Vec<&Logged> = log.iter().filter(|l| !l.start && l.id == id).collect();
        // Ended once; started once, or twice when the kill interrupted its step.
        assert_eq!(ends.len(), 1, "{id}: {starts:?} {ends:?}");
        assert!(matches!(starts.len(), 1 | 2), "{id}: {starts:?}");
        if starts.len() == 2 {
            interrupted += 1;
            assert!(
                starts[0].at < killed_at && starts[1].at > killed_at,
                "{id}: {starts:?}"
            );
        }
        let last = starts.last().expect("a start");
        assert_eq!(s["steps"]["work"]["attempt"], last.attempt, "{id}: {s}");
    }
    assert!(interrupted > 0, "the kill interrupted nothing: {log:?}");
    assert_limits(&stored_runs(&states), 2, 1, "stored step times");
    let (_, q) = get(c.at(0), &format!("/queues/{WF}"), None).await;
    assert_eq!(q["data"]["queued"], 0, "{q}");
    drop(c);
    let _ = std::fs::remove_file(&path);
}

/// Three PostgreSQL replicas, `concurrency=4,keyLimit=1`, a 1 s lease: 24 executions of 800 ms
/// over 6 tenants. Once a replica runs some of them and others still wait, it is killed with
/// -9. Every execution completes exactly once in the end (those it interrupted started again
/// once, elsewhere; the others ran once); the limits held throughout, counting the interrupted
/// attempts until the kill; the queue is empty after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_queue_loses_nothing_on_postgres() {
    let db = agentry_testdb::PgDatabase::create("agentry_queue")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let c = Cluster::start_n(
        &db.url,
        3,
        "concurrency=4,keyLimit=1",
        &[("AGENTRY_LEASE_TTL", "1s")],
    );
    let ids: Vec<String> = (0..24).map(|i| format!("kill-{i:02}")).collect();
    for (i, id) in ids.iter().enumerate() {
        enqueue(c.at(i), body(id, &format!("t{}", i % 6), 800)).await;
    }
    // A replica that runs a step now (started less than 300 ms ago, not ended: the kill lands
    // well within its 800 ms), while others wait.
    let started = Instant::now();
    let victim = loop {
        let log = logged(&c.log());
        let now = Utc::now();
        let running = log.iter().find(|l| {
            l.start
                && now - l.at < chrono::Duration::milliseconds(300)
                && !log
                    .iter()
                    .any(|e| !e.start && e.id == l.id && e.node == l.node)
        });
        let (_, queue) = get(c.at(0), &format!("/queues/{WF}"), None).await;
        if let Some(l) = running
            && queue["data"]["queued"].as_u64().unwrap_or(0) > 0
        {
            break l.node.clone();
        }
        assert!(started.elapsed() < PATIENCE, "nothing ran: {log:?} {queue}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Node `q<i + 1>` is the `i`-th replica.
    let at = (0..c.replicas.len())
        .find(|i| victim == format!("q{}", i + 1))
        .expect("the victim");
    c.replicas[at].signal("-KILL");
    let killed_at = Utc::now();
    let survivor = c.at(at + 1);
    let states = wait_all_completed(survivor, &ids).await;

    let log = logged(&c.log());
    // The attempts the kill interrupted: started on the victim, never ended there.
    let interrupted: BTreeSet<String> = log
        .iter()
        .filter(|l| {
            l.start
                && l.node == victim
                && !log
                    .iter()
                    .any(|e| !e.start && e.id == l.id && e.node == victim)
        })
        .map(|l| l.id.clone())
        .collect();
    eprintln!("killed {victim}; it interrupted {interrupted:?}");
    assert!(
        !interrupted.is_empty(),
        "the kill interrupted nothing: {log:?}"
    );
    for s in &states {
        let id = s["executionId"].as_str().unwrap();
        let starts: Vec<&Logged> = log.iter().filter(|l| l.start && l.id == id).collect();
        let ends: Vec<&Logged> = log.iter().filter(|l| !l.start && l.id == id).collect();
        assert!(!ends.is_empty(), "{id} never ended: {starts:?}");
        // No attempt ran twice; the stored attempt is the last one started.
        let attempts: BTreeSet<u32> = starts.iter().map(|l| l.attempt).collect();
        assert_eq!(attempts.len(), starts.len(), "{id}: {starts:?}");
        let last = starts.last().expect("a start");
        assert_eq!(s["steps"]["work"]["attempt"], last.attempt, "{id}: {s}");
        if interrupted.contains(id) {
            // Started again once, by a survivor, which ended it.
            assert_eq!(starts.len(), 2, "{id}: {starts:?}");
            assert_ne!(last.node, victim, "{id}");
            assert_eq!(ends.len(), 1, "{id}: {ends:?}");
            assert_eq!(ends[0].node, last.node, "{id}: {ends:?}");
        } else if starts.iter().all(|l| l.node != victim) {
            // Exactly once. (Its attempt is 2 if the victim had dequeued it and recorded its
            // step's start but had not run the step yet.)
            assert_eq!(
                (starts.len(), ends.len()),
                (1, 1),
                "{id}: {starts:?} {ends:?}"
            );
        }
        // Ended on the victim before the kill: done, unless the kill beat its checkpoint (then
        // it ran again, once, as the checks above say).
    }
    assert_limits(&stored_runs(&states), 4, 1, "stored step times");
    // Every attempt the log shows, the interrupted ones until the kill.
    let mut runs = Vec::new();
    for l in log.iter().filter(|l| l.start) {
        let end = log
            .iter()
            .find(|e| !e.start && e.id == l.id && e.node == l.node && e.attempt == l.attempt)
            .map_or(killed_at, |e| e.at);
        runs.push(Run {
            id: format!("{} #{}", l.id, l.attempt),
            tenant: l.tenant.clone(),
            start: l.at,
            end,
        });
    }
    assert_limits(
        &runs,
        4,
        1,
        "every attempt, the interrupted ones until the kill",
    );
    let (_, queue) = get(survivor, &format!("/queues/{WF}"), None).await;
    assert_eq!(queue["data"]["queued"], 0, "{queue}");
    assert_eq!(queue["data"]["running"], 0, "{queue}");
    drop(c);
    db.drop_now().await;
}

on_both_databases!(
    a_queued_execution_is_cancelled_before_it_starts,
    a_queued_execution_is_cancelled_before_it_starts_on_sqlite,
    a_queued_execution_is_cancelled_before_it_starts_on_postgres
);

/// `concurrency=1`, the slot held, three queued; the second cancelled (through another replica
/// than the one it was queued on): `cancelled` at once, no step, never started; the other two
/// run once the slot frees.
async fn a_queued_execution_is_cancelled_before_it_starts(url: &str) {
    let c = Cluster::start(url, "concurrency=1", &[]);
    block(&c, "can-blocker", "a").await;
    let ids: Vec<String> = ["can-1", "can-2", "can-3"].map(String::from).to_vec();
    for (i, (id, tenant)) in ids.iter().zip(["a", "b", "c"]).enumerate() {
        enqueue(c.at(i), body(id, tenant, 30)).await;
    }
    let answer = cancel(c.other(), "can-2").await;
    assert_eq!(answer["status"], "cancelled", "{answer}");
    let s = state_of(c.at(0), WF, "can-2").await.expect("can-2");
    assert_eq!(s["status"], "cancelled", "{s}");
    assert!(s["cancellation"].is_object(), "{s}");
    assert!(s["steps"].as_object().is_none_or(|m| m.is_empty()), "{s}");
    assert!(s["queue"]["startedAt"].is_null(), "{s}");
    let (_, queue) = get(c.at(0), &format!("/queues/{WF}"), None).await;
    assert_eq!(queue["data"]["queued"], 2, "{queue}");
    // Cancelled is an end: cancelling it again is refused as for any ended execution.
    let (status, again) = post(
        c.at(0),
        &format!("/workflows/{WF}/executions/can-2/cancel"),
        json!({}),
        None,
    )
    .await;
    assert_eq!(
        (status, &again["code"]),
        (400, &json!("not_cancellable")),
        "{again}"
    );

    cancel(c.other(), "can-blocker").await;
    let done = wait_all_completed(c.at(0), &["can-1".to_owned(), "can-3".to_owned()]).await;
    assert_limits(&stored_runs(&done), 1, 1, "concurrency=1");
    let s = state_of(c.other(), WF, "can-2").await.expect("can-2");
    assert_eq!(s["status"], "cancelled", "{s}");
    assert!(s["steps"].as_object().is_none_or(|m| m.is_empty()), "{s}");
    let log = logged(&c.log());
    assert!(nodes_of(&log, "can-2").is_empty(), "can-2 started: {log:?}");
}

/// `/execute` with the default wait (30 s), on SQLite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_answers_202_while_it_waits_and_stream_shows_the_queue_on_sqlite() {
    let (url, path) = sqlite_url();
    execute_answers_202_while_it_waits_and_stream_shows_the_queue(&url, None).await;
    let _ = std::fs::remove_file(&path);
}

/// `/execute` with a wait of 2 s (the queue's `execute_wait`), on three PostgreSQL replicas.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_answers_202_while_it_waits_and_stream_shows_the_queue_on_postgres() {
    let db = agentry_testdb::PgDatabase::create("agentry_queue")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    execute_answers_202_while_it_waits_and_stream_shows_the_queue(&db.url, Some(2_000)).await;
    db.drop_now().await;
}

/// `concurrency=1` (and `wait=wait_ms` when given, else the default 30 s). An `/execute` whose
/// execution runs past the wait answers 202 `running`; one queued behind it all that time
/// answers 202 `queued`; a `/stream` queued behind both shows `workflow-queued` first and
/// `workflow-start` once it is dequeued, then the rest to its result.
async fn execute_answers_202_while_it_waits_and_stream_shows_the_queue(
    url: &str,
    wait_ms: Option<u64>,
) {
    let queue = match wait_ms {
        Some(ms) => format!("concurrency=1,wait={ms}"),
        None => "concurrency=1".to_owned(),
    };
    let wait = Duration::from_millis(wait_ms.unwrap_or(30_000));
    let c = Cluster::start(url, &queue, &[]);
    let execute = |r: &Replica, body: Value| {
        let url = r.url(&format!("/workflows/{WF}/execute"));
        tokio::spawn(async move {
            let sent = Instant::now();
            let resp = client()
                .post(url)
                .json(&body)
                .send()
                .await
                .expect("execute");
            let status = resp.status().as_u16();
            let answer = resp.json::<Value>().await.unwrap_or(Value::Null);
            (status, answer, sent.elapsed())
        })
    };
    let long = execute(c.at(0), body("x-long", "a", 45_000));
    wait_for_state(c.other(), WF, "x-long", "x-long running", |s| {
        s["status"] == "running"
    })
    .await;
    let waiting = execute(c.at(1), body("x-waiting", "b", 20));
    wait_for_state(c.other(), WF, "x-waiting", "x-waiting queued", |s| {
        s["status"] == "queued"
    })
    .await;
    let resp = client()
        .post(c.at(2).url(&format!("/workflows/{WF}/stream")))
        .json(&body("x-stream", "c", 20))
        .send()
        .await
        .expect("stream");
    let streaming = tokio::spawn(read_sse(resp, |evs| {
        evs.iter().any(|(_, e)| e["type"] == "workflow-result")
    }));

    for (task, status, id) in [
        (long, "running", "x-long"),
        (waiting, "queued", "x-waiting"),
    ] {
        let (code, answer, took) = task.await.expect("task");
        assert_eq!(code, 202, "{id}: {answer}");
        assert_eq!(answer["success"], true, "{answer}");
        let data = &answer["data"];
        assert_eq!(data["executionId"], id, "{answer}");
        assert_eq!(data["status"], status, "{answer}");
        assert!(data["startAt"].is_string(), "{answer}");
        assert!(data["endAt"].is_null(), "{answer}");
        assert!(data["result"].is_null(), "{answer}");
        // Not before the wait (less the test's own scheduling), not long after it.
        assert!(
            took + Duration::from_millis(200) >= wait && took < wait + Duration::from_secs(10),
            "{id} answered after {took:?}, the wait is {wait:?}"
        );
    }
    assert_eq!(
        state_of(c.at(0), WF, "x-stream").await.unwrap()["status"],
        "queued"
    );
    cancel(c.other(), "x-long").await;
    let events = streaming.await.expect("task");
    let types: Vec<&str> = events
        .iter()
        .filter_map(|(_, e)| e["type"].as_str())
        .collect();
    assert_eq!(types.first(), Some(&"workflow-queued"), "{types:?}");
    let queued = &events[0].1;
    assert_eq!(queued["executionId"], "x-stream", "{queued}");
    assert_eq!(queued["workflowId"], WF, "{queued}");
    assert!(queued["timestamp"].is_string(), "{queued}");
    assert_eq!(
        queued["queue"],
        json!({"name": WF, "key": "c", "priority": 0}),
        "{queued}"
    );
    let at = |t: &str| types.iter().position(|x| *x == t);
    assert!(
        at("workflow-start").is_some() && at("workflow-start") < at("workflow-complete"),
        "{types:?}"
    );
    assert_eq!(
        types.iter().filter(|t| **t == "workflow-queued").count(),
        1,
        "{types:?}"
    );
    let result = events
        .iter()
        .find(|(_, e)| e["type"] == "workflow-result")
        .map(|(_, e)| e.clone())
        .unwrap();
    assert_eq!(result["result"], json!({"tenant": "c"}), "{result}");
    wait_all_completed(c.at(0), &["x-waiting".to_owned(), "x-stream".to_owned()]).await;
}

on_both_databases!(
    queues_show_their_depth_per_key,
    queues_show_their_depth_per_key_on_sqlite,
    queues_show_their_depth_per_key_on_postgres
);

/// `concurrency=1,keyLimit=1`, the slot held by tenant `a`; two more of `a` and three of `b`
/// queued. `GET /queues` (asked of another replica) shows the limits, 5 queued, 1 running and
/// the oldest wait; `GET /queues/tester-queued` the same per key, the most queued first; the
/// lists and counts know `queued`; an unknown queue is a 404. Once all ran, the queue is empty.
async fn queues_show_their_depth_per_key(url: &str) {
    let c = Cluster::start(url, "concurrency=1,keyLimit=1", &[]);
    block(&c, "qs-blocker", "a").await;
    let mut ids = Vec::new();
    for (i, tenant) in ["a", "b", "b", "a", "b"].into_iter().enumerate() {
        let id = format!("qs-{i}");
        enqueue(c.at(i), body(&id, tenant, 20)).await;
        ids.push(id);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = c.other();

    let (status, all) = get(r, "/queues", None).await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(all["success"], true, "{all}");
    let queues = all["data"].as_array().expect("a list");
    let find = |name: &str| {
        queues
            .iter()
            .find(|q| q["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {all}"))
            .clone()
    };
    let q = find(WF);
    assert_eq!(q["workflowId"], WF, "{q}");
    assert_eq!(q["concurrency"], 1, "{q}");
    assert_eq!(
        q["concurrencyKey"],
        json!({"pointer": "/tenant", "limit": 1}),
        "{q}"
    );
    assert!(q["rateLimit"].is_null(), "{q}");
    assert_eq!(q["priority"], "/priority", "{q}");
    assert_eq!(
        (&q["queued"], &q["running"], &q["suspended"]),
        (&json!(5), &json!(1), &json!(0)),
        "{q}"
    );
    assert!(q["oldestQueuedAt"].is_string(), "{q}");
    assert!(q["oldestWaitMs"].as_i64().unwrap_or(0) >= 250, "{q}");
    let enrich = find("enrich-customer");
    assert_eq!(enrich["workflowId"], "enrich-customer", "{enrich}");
    assert_eq!(enrich["concurrency"], 4, "{enrich}");
    assert_eq!(
        enrich["concurrencyKey"],
        json!({"pointer": "/customerId", "limit": 1}),
        "{enrich}"
    );
    assert_eq!(
        enrich["rateLimit"],
        json!({"limit": 50, "periodMs": 1000, "perKey": false}),
        "{enrich}"
    );
    assert_eq!(enrich["queued"], 0, "{enrich}");

    let (status, one) = get(r, &format!("/queues/{WF}"), None).await;
    assert_eq!(status, 200, "{one}");
    let one = &one["data"];
    for field in [
        "name",
        "workflowId",
        "concurrency",
        "concurrencyKey",
        "queued",
        "running",
    ] {
        assert_eq!(one[field], q[field], "{field}: {one}");
    }
    let keys = one["keys"].as_array().expect("keys");
    assert_eq!(keys.len(), 2, "{one}");
    assert_eq!(
        (&keys[0]["key"], &keys[0]["queued"], &keys[0]["running"]),
        (&json!("b"), &json!(3), &json!(0)),
        "{one}"
    );
    assert_eq!(
        (&keys[1]["key"], &keys[1]["queued"], &keys[1]["running"]),
        (&json!("a"), &json!(2), &json!(1)),
        "{one}"
    );
    assert!(keys[0]["oldestQueuedAt"].is_string(), "{one}");
    let (status, missing) = get(r, "/queues/no-such-queue", None).await;
    assert_eq!(status, 404, "{missing}");
    assert_eq!(missing["code"], "queue_not_found", "{missing}");

    // The lists and the counts.
    let listed = |answer: &Value| -> BTreeSet<String> {
        answer["data"]["executions"]
            .as_array()
            .unwrap_or_else(|| panic!("{answer}"))
            .iter()
            .map(|e| {
                assert_eq!(e["status"], "queued", "{e}");
                e["executionId"].as_str().unwrap().to_owned()
            })
            .collect()
    };
    let expected: BTreeSet<String> = ids.iter().cloned().collect();
    let (_, list) = get(
        r,
        &format!("/workflows/{WF}/executions?status=queued"),
        None,
    )
    .await;
    assert_eq!(listed(&list), expected);
    let (_, list) = get(r, "/executions?status=queued", None).await;
    assert_eq!(listed(&list), expected);
    let (_, counts) = get(r, "/api/execution-counts", None).await;
    let mine = counts["data"]["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["workflowId"] == WF)
        .unwrap_or_else(|| panic!("{counts}"))
        .clone();
    // Checked at the end, so that a wrong count does not hide what follows.
    let counts_while_queued = mine["counts"].clone();

    // The metrics: the replicas report the depth (as they last read it, every second), the
    // starts and the waits of their own dequeues.
    let started = Instant::now();
    loop {
        let mut metrics = String::new();
        for r in &c.replicas {
            metrics += &client()
                .get(r.url("/metrics"))
                .send()
                .await
                .expect("metrics")
                .text()
                .await
                .unwrap_or_default();
        }
        let of_queue = |name: &str| -> Vec<&str> {
            metrics
                .lines()
                .filter(|l| l.starts_with(name) && l.contains(&format!("queue=\"{WF}\"")))
                .collect()
        };
        let depth_5 = of_queue("agentry_queue_depth")
            .iter()
            .any(|l| l.ends_with(" 5"));
        if depth_5
            && !of_queue("agentry_queue_starts_total").is_empty()
            && !of_queue("agentry_queue_wait_seconds").is_empty()
        {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the queue's metrics: depth {:?}, starts {:?}, waits {:?}",
            of_queue("agentry_queue_depth"),
            of_queue("agentry_queue_starts_total"),
            of_queue("agentry_queue_wait_seconds").first()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    cancel(c.at(0), "qs-blocker").await;
    wait_all_completed(c.at(0), &ids).await;
    let (_, after) = get(r, &format!("/queues/{WF}"), None).await;
    let after = &after["data"];
    assert_eq!(
        (&after["queued"], &after["running"]),
        (&json!(0), &json!(0)),
        "{after}"
    );
    assert!(after["oldestQueuedAt"].is_null(), "{after}");
    assert!(after["oldestWaitMs"].is_null(), "{after}");
    assert_eq!(
        (
            &counts_while_queued["queued"],
            &counts_while_queued["running"]
        ),
        (&json!(5), &json!(1)),
        "GET /api/execution-counts while 5 were queued and 1 ran: {counts_while_queued}"
    );
}

/// Strict mode: `GET /queues` needs a token and counts the caller's own executions (an
/// admin's: all).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_mode_counts_only_the_callers_executions() {
    let (url, path) = sqlite_url();
    let c = Cluster::start_n(
        &url,
        1,
        "concurrency=1",
        &[("AGENTRY_JWT_SECRET", SECRET), ("AGENTRY_AUTH_STRICT", "1")],
    );
    let r = c.at(0);
    let (alice, bob, root) = (
        token("alice", &[]),
        token("bob", &[]),
        token("root", &["admin"]),
    );
    let start = |who: &str, id: &str, work: u64| {
        let req = client()
            .post(r.url(&format!("/workflows/{WF}/stream")))
            .bearer_auth(who)
            .json(&body(id, "t", work));
        async move {
            let resp = req.send().await.expect("stream");
            assert_eq!(resp.status(), 200);
            let first = read_sse(resp, |evs| !evs.is_empty()).await;
            assert_eq!(first[0].1["type"], "workflow-queued", "{first:?}");
        }
    };
    start(&bob, "st-bob", 60_000).await;
    let started = Instant::now();
    loop {
        let (_, q) = get(r, &format!("/queues/{WF}"), Some(&root)).await;
        if q["data"]["running"] == 1 {
            break;
        }
        assert!(started.elapsed() < PATIENCE, "{q}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    start(&alice, "st-alice-1", 10).await;
    start(&alice, "st-alice-2", 10).await;
    for path in ["/queues".to_owned(), format!("/queues/{WF}")] {
        let (status, body) = get(r, &path, None).await;
        assert_eq!(status, 401, "{path}: {body}");
        assert_eq!(body["code"], "authentication_required", "{body}");
    }
    for (who, t, queued, running) in [
        ("alice", &alice, 2, 0),
        ("bob", &bob, 0, 1),
        ("root", &root, 2, 1),
    ] {
        let (status, q) = get(r, &format!("/queues/{WF}"), Some(t)).await;
        assert_eq!(status, 200, "{who}: {q}");
        assert_eq!(
            (&q["data"]["queued"], &q["data"]["running"]),
            (&json!(queued), &json!(running)),
            "{who}: {q}"
        );
    }
    let resp = client()
        .post(r.url(&format!("/workflows/{WF}/executions/st-bob/cancel")))
        .bearer_auth(&bob)
        .json(&json!({}))
        .send()
        .await
        .expect("cancel");
    assert_eq!(resp.status(), 200);
    drop(c);
    let _ = std::fs::remove_file(&path);
}

/// A malformed `AGENTRY_TEST_QUEUE` stops the server at its start, naming the variable.
#[test]
fn a_malformed_test_queue_is_refused_at_start() {
    use std::process::{Command, Stdio};
    let dir = scratch_dir();
    let db = format!("sqlite://{}", dir.join("agentry.db").display());
    for bad in [
        "concurrency=0",
        "rate=5",
        "burst=3",
        "concurrency=2,concurrency=3",
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agentry"))
            .args(["serve", "--bind", "127.0.0.1:0", "--database-url", &db])
            .env_remove("AGENTRY_JWT_SECRET")
            .env_remove("AGENTRY_NO_EXAMPLES")
            .env("AGENTRY_TEST_AGENTS", &dir)
            .env("AGENTRY_TEST_QUEUE", bad)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn agentry");
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                break status;
            }
            if started.elapsed() > PATIENCE {
                let _ = child.kill();
                panic!("{bad}: the server started");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert!(!status.success(), "{bad}: {status:?}");
        assert!(err.contains("AGENTRY_TEST_QUEUE"), "{bad}: {err}");
    }
    let _ = std::fs::remove_dir_all(dir);
}
