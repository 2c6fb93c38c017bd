//! Durability of Serverless Workflow definitions (`agentry serve --definitions DIR`) with real
//! processes: an `agentry` killed with -9 while a `call: http` is in flight (or while a `wait`
//! sleeps, or while an emitted event's POST to the events sink is in flight after a `listen`),
//! then a server started again on the same SQLite file, or another PostgreSQL replica
//! left running. The execution completes once, with the right result, and the stand-in service
//! the calls reach answers each `Idempotency-Key` once: a request cut by the crash arrives again
//! with the same key (the point of the key), a call recorded before the crash is not sent again.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::replica::{PATIENCE, Replica, client, wait_for_state};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// The longest the stand-in holds a request: past it, the connection is dropped unanswered.
const HOLD_AT_MOST: Duration = Duration::from_secs(25);
/// The largest request head and body the stand-in reads.
const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// What the stand-in saw of one `Idempotency-Key`.
#[derive(Debug, Clone, Default)]
struct Seen {
    /// Requests that arrived with the key (a request cut by a crash counts).
    arrived: u32,
    /// Requests answered (the effect applied).
    completed: u32,
    /// The body of the first request.
    body: Value,
    /// When the first request arrived.
    first_arrival: Option<Instant>,
}

/// Which requests the stand-in holds (never answers) until their client goes away: the first
/// request of each key whose body satisfies it.
type HoldRule = Arc<dyn Fn(&Value) -> bool + Send + Sync>;

/// An HTTP service the definitions call: it answers `{"got": <request body>}`, counts requests
/// by their `Idempotency-Key`, and holds the requests its rule names, telling the test through
/// a channel when one arrives, so the test can kill the caller while it is in flight.
struct StandIn {
    addr: SocketAddr,
    seen: Arc<Mutex<BTreeMap<String, Seen>>>,
    held: mpsc::UnboundedReceiver<String>,
    answered: mpsc::UnboundedReceiver<String>,
    stop: Arc<AtomicBool>,
}

/// What the connections of a stand-in share.
#[derive(Clone)]
struct Shared {
    seen: Arc<Mutex<BTreeMap<String, Seen>>>,
    hold: HoldRule,
    held: mpsc::UnboundedSender<String>,
    answered: mpsc::UnboundedSender<String>,
}

impl StandIn {
    /// Listens on a free port of 127.0.0.1, one thread per connection.
    fn start(hold: impl Fn(&Value) -> bool + Send + Sync + 'static) -> StandIn {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the stand-in");
        let addr = listener.local_addr().expect("the stand-in's address");
        let (held_tx, held) = mpsc::unbounded_channel();
        let (answered_tx, answered) = mpsc::unbounded_channel();
        let seen = Arc::new(Mutex::new(BTreeMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Shared {
            seen: seen.clone(),
            hold: Arc::new(hold),
            held: held_tx,
            answered: answered_tx,
        };
        let stopping = stop.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let shared = shared.clone();
                std::thread::spawn(move || serve(conn, &shared));
            }
        });
        StandIn {
            addr,
            seen,
            held,
            answered,
            stop,
        }
    }

    /// The endpoint definitions call.
    fn url(&self) -> String {
        format!("http://{}/effects", self.addr)
    }

    /// What was seen so far, by key.
    fn seen(&self) -> BTreeMap<String, Seen> {
        self.seen.lock().expect("seen").clone()
    }

    /// The key of the next request held; fails after [`PATIENCE`] with `log`.
    async fn next_held(&mut self, log: impl Fn() -> String) -> String {
        match tokio::time::timeout(PATIENCE, self.held.recv()).await {
            Ok(Some(key)) => key,
            _ => panic!(
                "no request was held; seen {:?}; log:\n{}",
                self.seen(),
                log()
            ),
        }
    }

    /// The key of the next request answered; fails after [`PATIENCE`] with `log`.
    async fn next_answered(&mut self, log: impl Fn() -> String) -> String {
        match tokio::time::timeout(PATIENCE, self.answered.recv()).await {
            Ok(Some(key)) => key,
            _ => panic!(
                "no request was answered; seen {:?}; log:\n{}",
                self.seen(),
                log()
            ),
        }
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

/// One request as the stand-in reads it: its `Idempotency-Key` and its JSON body.
struct Incoming {
    key: String,
    body: Value,
}

/// Reads one request from `reader`: `None` when it is not a whole request with a key.
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Incoming> {
    let mut head_bytes = 0;
    let mut key = None;
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        let n = reader.read_line(&mut line).ok()?;
        head_bytes += n;
        if n == 0 || head_bytes > MAX_REQUEST_BYTES {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "idempotency-key" => key = Some(value.trim().to_owned()),
                "content-length" => length = value.trim().parse().ok()?,
                _ => {}
            }
        }
    }
    if length > MAX_REQUEST_BYTES {
        return None;
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Incoming {
        key: key?,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    })
}

/// Serves one connection: one request, answered or held.
fn serve(conn: TcpStream, shared: &Shared) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let Ok(writer) = conn.try_clone() else { return };
    let mut reader = BufReader::new(conn);
    let Some(Incoming { key, body }) = read_request(&mut reader) else {
        return;
    };
    let first = {
        let mut seen = shared.seen.lock().expect("seen");
        let s = seen.entry(key.clone()).or_default();
        s.arrived += 1;
        if s.arrived == 1 {
            s.body = body.clone();
            s.first_arrival = Some(Instant::now());
        }
        s.arrived == 1
    };
    if first && (shared.hold)(&body) {
        let _ = shared.held.send(key);
        hold_until_closed(reader);
        return;
    }
    if answer(writer, &json!({"got": body})).is_ok() {
        let mut seen = shared.seen.lock().expect("seen");
        let s = seen.entry(key.clone()).or_default();
        s.completed += 1;
        drop(seen);
        let _ = shared.answered.send(key);
    }
}

/// Keeps a held request unanswered until its client closes the connection (a killed process's
/// connections close), or [`HOLD_AT_MOST`] passes.
fn hold_until_closed(mut reader: BufReader<TcpStream>) {
    let until = Instant::now() + HOLD_AT_MOST;
    let mut byte = [0u8; 1];
    while Instant::now() < until {
        match reader.read(&mut byte) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return,
        }
    }
}

/// Writes a 200 with the JSON `body` and closes.
fn answer(mut writer: TcpStream, body: &Value) -> std::io::Result<()> {
    let body = body.to_string();
    write!(
        writer,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )?;
    writer.flush()
}

/// A definitions folder holding `yaml` as its one workflow, `workflows/<name>.yaml`.
fn definitions(name: &str, yaml: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agentry-defs-{}", uuid::Uuid::new_v4()));
    let workflows = dir.join("workflows");
    std::fs::create_dir_all(&workflows).expect("the definitions folder");
    std::fs::write(workflows.join(format!("{name}.yaml")), yaml).expect("the definition");
    dir
}

/// A document's header.
fn header(name: &str) -> String {
    format!(
        "document:\n  dsl: '1.0.0'\n  namespace: durability\n  name: {name}\n  version: '1.0.0'\n"
    )
}

/// `do`: set, call, set, call, set.
fn do_list(endpoint: &str) -> String {
    header("durable-do")
        + &format!(
            r#"do:
  - prepare:
      set:
        n: '${{ .n }}'
        step: a
  - callA:
      call: http
      with:
        method: post
        endpoint: {endpoint}
        body: '${{ . }}'
  - between:
      set:
        a: '${{ .got }}'
        step: b
  - callB:
      call: http
      with:
        method: post
        endpoint: {endpoint}
        body: '${{ . }}'
  - summarize:
      set:
        first: '${{ .got.a }}'
        second: '${{ .got.step }}'
"#
        )
}

/// `for` over `.items`: one call per item, the answers gathered in `results`.
fn for_loop(endpoint: &str) -> String {
    header("durable-for")
        + &format!(
            r#"do:
  - each:
      for:
        each: item
        in: '${{ .items }}'
      do:
        - send:
            call: http
            with:
              method: post
              endpoint: {endpoint}
              body:
                item: '${{ $item }}'
            output:
              as: '${{ $input + {{results: (($input.results // []) + [.got.item])}} }}'
"#
        )
}

/// `fork`: two branches, one call each.
fn fork(endpoint: &str) -> String {
    header("durable-fork")
        + &format!(
            r#"do:
  - both:
      fork:
        branches:
          - left:
              call: http
              with:
                method: post
                endpoint: {endpoint}
                body:
                  branch: left
              output:
                as: '${{ .got.branch }}'
          - right:
              call: http
              with:
                method: post
                endpoint: {endpoint}
                body:
                  branch: right
              output:
                as: '${{ .got.branch }}'
"#
        )
}

/// `wait`: a call, a 3 s wait, a call.
fn wait(endpoint: &str) -> String {
    header("durable-wait")
        + &format!(
            r#"do:
  - before:
      call: http
      with:
        method: post
        endpoint: {endpoint}
        body:
          call: before
  - pause:
      wait:
        seconds: 3
  - after:
      call: http
      with:
        method: post
        endpoint: {endpoint}
        body:
          call: after
      output:
        as: '${{ {{before: $input.got.call, after: .got.call}} }}'
"#
        )
}

/// The environment of a server running the definitions in `dir`.
fn env_of(dir: &std::path::Path, lease_ttl: &str) -> Vec<(&'static str, String)> {
    vec![
        ("AGENTRY_DEFINITIONS", dir.display().to_string()),
        ("AGENTRY_LEASE_TTL", lease_ttl.to_owned()),
        ("AGENTRY_NO_EXAMPLES", "1".to_owned()),
    ]
}

/// Starts a server on `database_url` as `node` with `env`.
fn server(database_url: &str, node: &str, env: &[(&'static str, String)]) -> Replica {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Replica::start(database_url, node, &env)
}

/// Starts `workflow` on `r` under `id` from a client that loses its connection when the server
/// dies (in a task, its error ignored).
fn start(r: &Replica, workflow: &str, id: &str, input: Value) -> tokio::task::JoinHandle<()> {
    let url = r.url(&format!("/workflows/{workflow}/execute"));
    let body = json!({"input": input, "options": {"executionId": id}});
    tokio::spawn(async move {
        let _ = client().post(url).json(&body).send().await;
    })
}

/// Waits on `r` for the execution's end: it must be `completed`. Its state.
async fn completed(r: &Replica, workflow: &str, id: &str) -> Value {
    let done = wait_for_state(r, workflow, id, "the execution's end", |s| {
        matches!(
            s["status"].as_str(),
            Some("completed" | "error" | "cancelled")
        )
    })
    .await;
    assert_eq!(done["status"], "completed", "{done}\n{}", r.log());
    done
}

/// What every scenario asserts of the stand-in: `calls` distinct keys, each of the execution
/// `id` (`<id>:<entry>`), none completed twice; each key's arrivals as `arrivals` says.
fn assert_effects_once(
    seen: &BTreeMap<String, Seen>,
    id: &str,
    calls: usize,
    arrivals: impl Fn(&Seen) -> u32,
) {
    assert_eq!(seen.len(), calls, "distinct keys: {seen:#?}");
    for (key, s) in seen {
        assert!(key.starts_with(&format!("{id}:")), "{key}");
        assert_eq!(
            s.completed, 1,
            "{key} answered {} times: {seen:#?}",
            s.completed
        );
        assert_eq!(s.arrived, arrivals(s), "{key}: {seen:#?}");
    }
}

/// Each key names its task's step in the execution's state (`<id>:<step id>`, the step id
/// `workflow/<entry>`), completed; a key sent twice (cut by the crash) is the step's second
/// attempt.
fn assert_keys_are_entries(done: &Value, seen: &BTreeMap<String, Seen>, id: &str) {
    for (key, s) in seen {
        let entry = key
            .strip_prefix(&format!("{id}:"))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("{key} is not a key of {id}"));
        let rec = &done["steps"][&entry];
        assert_eq!(rec["status"], "completed", "{entry}: {done:#}");
        if s.arrived == 2 {
            assert_eq!(rec["attempt"], 2, "{entry}: {done:#}");
        }
    }
}

/// A fresh id for an execution of `workflow`.
fn new_id(workflow: &str) -> String {
    format!("{workflow}-{}", uuid::Uuid::new_v4().simple())
}

/// How a scenario gets a server after killing the one that ran it: a new process on the same
/// SQLite file (the same node, so it continues at once), or the PostgreSQL replica left running.
enum After {
    Restart,
    Survivor(Replica),
}

/// The servers of a scenario on `database_url`: the one that runs the execution, and what
/// takes over after its kill.
fn servers(database_url: &str, env: &[(&'static str, String)]) -> (Replica, After) {
    if database_url.starts_with("sqlite") {
        (server(database_url, "n1", env), After::Restart)
    } else {
        let runner = server(database_url, "a", env);
        let survivor = server(database_url, "b", env);
        (runner, After::Survivor(survivor))
    }
}

/// Kills `runner` (-9) and gives the server that continues: restarted on SQLite, the survivor
/// on PostgreSQL.
fn kill_and_continue(
    runner: Replica,
    after: After,
    database_url: &str,
    env: &[(&'static str, String)],
) -> Replica {
    runner.signal("-KILL");
    drop(runner);
    match after {
        After::Restart => server(database_url, "n1", env),
        After::Survivor(r) => r,
    }
}

/// The continuing server says how it got the execution: the restarted node continued its own
/// (SQLite), or the survivor took it over once the lease expired (PostgreSQL).
fn assert_continued(r: &Replica, database_url: &str) {
    let said = if database_url.starts_with("sqlite") {
        "continuing this node's interrupted executions"
    } else {
        "took over executions whose lease expired"
    };
    assert!(r.log().contains(said), "{}", r.log());
}

/// The environment of a scenario: SQLite's restarted node continues its own executions at once
/// (a long lease shows it does not wait for it); PostgreSQL's survivor waits for a short lease.
fn scenario_env(dir: &std::path::Path, database_url: &str) -> Vec<(&'static str, String)> {
    let ttl = if database_url.starts_with("sqlite") {
        "60s"
    } else {
        "2s"
    };
    env_of(dir, ttl)
}

/// Scenario 1, `do`: kill -9 while the second call is held. The first call (recorded before
/// the crash) is not sent again; the second is sent again with the same key.
async fn a_do_list_survives_kill_9(database_url: &str) {
    let mut stand_in = StandIn::start(|body| body["step"] == "b");
    let dir = definitions("durable-do", &do_list(&stand_in.url()));
    let env = scenario_env(&dir, database_url);
    let (runner, after) = servers(database_url, &env);
    let id = new_id("do");
    let _client = start(&runner, "durable-do", &id, json!({"n": 7}));
    let held = stand_in.next_held(|| runner.log()).await;
    assert!(
        held.starts_with(&format!("{id}:")) && held.ends_with("do/3/callB"),
        "{held}"
    );
    let continuing = kill_and_continue(runner, after, database_url, &env);

    let done = completed(&continuing, "durable-do", &id).await;
    assert_eq!(
        done["result"],
        json!({"first": {"n": 7, "step": "a"}, "second": "b"}),
        "{done}"
    );
    let seen = stand_in.seen();
    assert_effects_once(&seen, &id, 2, |s| if s.body["step"] == "b" { 2 } else { 1 });
    assert_keys_are_entries(&done, &seen, &id);
    assert_continued(&continuing, database_url);
    assert!(seen.keys().any(|k| k.ends_with("do/1/callA")), "{seen:#?}");
    drop(continuing);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Scenario 2, `for` over 5 items: kill -9 while the third item's call is held. Items 1 and 2
/// (recorded) are not sent again; 5 distinct keys, each answered once.
async fn a_for_loop_survives_kill_9(database_url: &str) {
    let mut stand_in = StandIn::start(|body| body["item"] == 3);
    let dir = definitions("durable-for", &for_loop(&stand_in.url()));
    let env = scenario_env(&dir, database_url);
    let (runner, after) = servers(database_url, &env);
    let id = new_id("for");
    let items = json!([1, 2, 3, 4, 5]);
    let _client = start(&runner, "durable-for", &id, json!({"items": items}));
    stand_in.next_held(|| runner.log()).await;
    let before_kill = stand_in.seen();
    assert_eq!(before_kill.len(), 3, "{before_kill:#?}");
    let continuing = kill_and_continue(runner, after, database_url, &env);

    let done = completed(&continuing, "durable-for", &id).await;
    assert_eq!(
        done["result"],
        json!({"items": items, "results": items}),
        "{done}"
    );
    let seen = stand_in.seen();
    assert_effects_once(&seen, &id, 5, |s| if s.body["item"] == 3 { 2 } else { 1 });
    assert_keys_are_entries(&done, &seen, &id);
    assert_continued(&continuing, database_url);
    drop(continuing);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Scenario 3, `fork`: kill -9 while both branches' calls are held. Both are sent again with
/// their keys; the fork's output has both branches.
async fn a_fork_survives_kill_9(database_url: &str) {
    let mut stand_in = StandIn::start(|body| body.get("branch").is_some());
    let dir = definitions("durable-fork", &fork(&stand_in.url()));
    let env = scenario_env(&dir, database_url);
    let (runner, after) = servers(database_url, &env);
    let id = new_id("fork");
    let _client = start(&runner, "durable-fork", &id, json!({}));
    stand_in.next_held(|| runner.log()).await;
    stand_in.next_held(|| runner.log()).await;
    let continuing = kill_and_continue(runner, after, database_url, &env);

    let done = completed(&continuing, "durable-fork", &id).await;
    assert_eq!(done["result"], json!(["left", "right"]), "{done}");
    let seen = stand_in.seen();
    assert_effects_once(&seen, &id, 2, |_| 2);
    assert_keys_are_entries(&done, &seen, &id);
    assert_continued(&continuing, database_url);
    drop(continuing);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The journal entry of scenario 4's wait.
const PAUSE: &str = "workflow/do/1/pause";

/// Scenario 4, `wait`: kill -9 a second into a 3 s wait. The first call is not sent again; the
/// wait ends 3 s after its recorded start (not after the restart); then the second call.
async fn a_wait_survives_kill_9(database_url: &str) {
    let mut stand_in = StandIn::start(|_| false);
    let dir = definitions("durable-wait", &wait(&stand_in.url()));
    let env = scenario_env(&dir, database_url);
    let (runner, after) = servers(database_url, &env);
    let id = new_id("wait");
    let _client = start(&runner, "durable-wait", &id, json!({}));
    stand_in.next_answered(|| runner.log()).await;
    let wait_started = Instant::now();
    wait_for_state(
        &runner,
        "durable-wait",
        &id,
        "the wait's start recorded",
        |s| s["steps"][PAUSE]["status"] == "running",
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let killed_at = chrono::Utc::now();
    let continuing = kill_and_continue(runner, after, database_url, &env);

    let done = completed(&continuing, "durable-wait", &id).await;
    let took = wait_started.elapsed();
    assert_eq!(
        done["result"],
        json!({"before": "before", "after": "after"}),
        "{done}"
    );
    let seen = stand_in.seen();
    assert_effects_once(&seen, &id, 2, |_| 1);
    assert_keys_are_entries(&done, &seen, &id);
    assert_continued(&continuing, database_url);
    let arrival = |call: &str| {
        seen.values()
            .find(|s| s.body["call"] == call)
            .and_then(|s| s.first_arrival)
            .unwrap_or_else(|| panic!("no {call} call: {seen:#?}"))
    };
    let waited = arrival("after") - arrival("before");
    assert!(
        waited >= Duration::from_secs(3),
        "the second call came {waited:?} after the first"
    );
    assert!(
        took >= Duration::from_secs(3),
        "completed {took:?} after the wait's start"
    );
    // The run after the crash continued the wait from its recorded start.
    let pause = &done["steps"][PAUSE];
    let at = |field: &str| {
        pause[field]
            .as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .unwrap_or_else(|| panic!("the wait's {field}: {done:#}"))
    };
    assert!(at("startedAt") < killed_at, "{done:#}");
    assert!(
        at("endedAt") - at("startedAt") >= chrono::Duration::seconds(3),
        "{done:#}"
    );
    assert_eq!(pause["attempt"], 2, "{done:#}");
    drop(continuing);
    let _ = std::fs::remove_dir_all(&dir);
}

on_both_databases!(
    a_fork_survives_kill_9,
    a_fork_survives_kill_9_on_sqlite,
    a_fork_survives_kill_9_on_postgres
);
on_both_databases!(
    a_wait_survives_kill_9,
    a_wait_survives_kill_9_on_sqlite,
    a_wait_survives_kill_9_on_postgres
);

on_both_databases!(
    a_do_list_survives_kill_9,
    a_do_list_survives_kill_9_on_sqlite,
    a_do_list_survives_kill_9_on_postgres
);
on_both_databases!(
    a_for_loop_survives_kill_9,
    a_for_loop_survives_kill_9_on_sqlite,
    a_for_loop_survives_kill_9_on_postgres
);

/// `listen` for the first of two events, then `emit` (also POSTed to the events sink).
fn listen_then_emit() -> String {
    header("durable-listen")
        + r#"do:
  - awaitGo:
      listen:
        to:
          any:
            - with:
                type: com.example.go
            - with:
                type: com.example.abort
  - announce:
      emit:
        event:
          with:
            type: com.example.done
            source: https://durability.example
            data: '${ {got: .[0]} }'
"#
}

/// Scenario 5, `listen` and `emit`: the execution waits (suspended) for the first of two
/// events; one comes; kill -9 while the emitted event's POST to the events sink
/// (`AGENTRY_EVENTS_SINK`, the stand-in) is held. The server that continues sends it again with
/// the same `Idempotency-Key` and the same event id: the sink applies it once.
async fn a_listen_and_an_emit_survive_kill_9(database_url: &str) {
    let mut stand_in = StandIn::start(|body| body["type"] == "com.example.done");
    let dir = definitions("durable-listen", &listen_then_emit());
    let mut env = scenario_env(&dir, database_url);
    env.push(("AGENTRY_EVENTS_SINK", stand_in.url()));
    let (runner, after) = servers(database_url, &env);
    let id = new_id("listen");
    let _client = start(&runner, "durable-listen", &id, json!({}));
    wait_for_state(&runner, "durable-listen", &id, "the wait", |s| {
        s["status"] == "suspended"
            && s["suspension"]["event"]["also"][0]["name"] == "com.example.abort"
    })
    .await;
    let path = format!("/workflows/durable-listen/executions/{id}/events/com.example.go");
    let (status, body) =
        common::replica::post(&runner, &path, json!({"data": {"n": 1}}), None).await;
    assert_eq!(status, 200, "{body}");
    let held = stand_in.next_held(|| runner.log()).await;
    assert_eq!(held, format!("{id}:workflow/do/1/announce"));
    let continuing = kill_and_continue(runner, after, database_url, &env);

    let done = completed(&continuing, "durable-listen", &id).await;
    assert_eq!(done["result"]["type"], "com.example.done", "{done}");
    assert_eq!(done["result"]["data"], json!({"got": {"n": 1}}), "{done}");
    let seen = stand_in.seen();
    assert_effects_once(&seen, &id, 1, |_| 2);
    assert_eq!(seen[&held].body["id"], done["result"]["id"], "{seen:#?}");
    assert_keys_are_entries(&done, &seen, &id);
    assert_continued(&continuing, database_url);
    drop(continuing);
    let _ = std::fs::remove_dir_all(&dir);
}

on_both_databases!(
    a_listen_and_an_emit_survive_kill_9,
    a_listen_and_an_emit_survive_kill_9_on_sqlite,
    a_listen_and_an_emit_survive_kill_9_on_postgres
);
