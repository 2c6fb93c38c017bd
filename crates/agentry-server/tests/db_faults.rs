//! The database's own faults, under a steady load of executions with suspensions and resumes:
//! a PostgreSQL server of the test's own (`common::private_pg`) restarted (fast and immediate),
//! its connections to agentry terminated, its pool exhausted behind a lock; an SQLite file on a
//! small file system that fills up or turns read-only (`common::small_fs`); `/healthz` and
//! `/readyz` through an outage and a drain.
//!
//! The contract (docs/DURABILITY.md, "The database's own faults"): a request that needs the
//! database while it is unreachable, or when no connection frees within `AGENTRY_DB_TIMEOUT`,
//! answers 503 `database_unavailable` with `Retry-After`, never 500 and never later than the
//! bound; a write that fails because the database went away never turns an execution into
//! `error` (the run retries it or the execution is taken over); no acknowledged execution is
//! lost or stuck, no step is committed twice; service resumes within 2 s of the database
//! accepting connections again, without restarting agentry.
//!
//! Every test collects each broken promise (a [`Verdict`]) and fails once at its end with all
//! of them, so that one run shows everything that is wrong. The tests run one at a time
//! ([`serial`]): their timings are claims.

mod common;

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::private_pg::{PrivatePg, Shutdown};
use common::small_fs::SmallFs;
use serde_json::{Value, json};

/// `AGENTRY_DB_TIMEOUT` of every server here: how long a request waits for a connection, and
/// the longest statement on PostgreSQL.
const DB_TIMEOUT: Duration = Duration::from_secs(2);
const DB_TIMEOUT_SETTING: &str = "2s";
/// The longest a request may take while the database is away: the database time-out and a
/// margin (the load's workflows take at most 250 ms of their own).
const ANSWER_BOUND: Duration = Duration::from_millis(5_500);
/// The longest a request may take while every connection is busy: a wait for a connection,
/// then a statement, each up to the database time-out, and a margin (the machine is shared by
/// the load, PostgreSQL and agentry).
const EXHAUSTED_BOUND: Duration = Duration::from_millis(5_500);
/// How soon after the database is back (accepting connections, space freed, writable again)
/// writes must succeed again.
const RESUMES_WITHIN: Duration = Duration::from_secs(2);
/// How long the database stays down in the restart tests (longer than the database time-out,
/// so requests cannot simply wait it out).
const OUTAGE: Duration = Duration::from_secs(3);
/// How long any wait for a state may take before the test gives up (never a timing claim).
const PATIENCE: Duration = Duration::from_secs(20);
/// How long the test tries to write after a fault before it stops trying (writes must succeed
/// within [`RESUMES_WITHIN`]; this only tells "late" from "never").
const GIVE_UP_WRITING: Duration = Duration::from_secs(10);

/// The tests run one at a time: each measures how fast service comes back.
async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    SERIAL.lock().await
}

// ---------------------------------------------------------------------------------------------
// The server

/// One `agentry serve` process (node `n1`), its stderr kept in a file.
struct Server {
    child: Child,
    addr: String,
    log: PathBuf,
}

impl Server {
    fn start(database_url: &str, extra_env: &[(&str, &str)]) -> Server {
        let log = std::env::temp_dir().join(format!("agentry-fault-{}.log", uuid::Uuid::new_v4()));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentry"));
        cmd.args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--database-url",
            database_url,
        ])
        .env_remove("AGENTRY_JWT_SECRET")
        .env_remove("AGENTRY_NO_EXAMPLES")
        .env("AGENTRY_NODE_ID", "n1")
        .env("AGENTRY_DB_TIMEOUT", DB_TIMEOUT_SETTING)
        .env("AGENTRY_LEASE_TTL", "3s")
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("log file"));
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn agentry");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("listening line");
        let addr = line
            .trim()
            .strip_prefix("agentry listening on http://")
            .unwrap_or_else(|| {
                panic!(
                    "unexpected first line {line:?}: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                )
            })
            .to_owned();
        Server { child, addr, log }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill {sig}");
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether the process is still running (it did not exit or crash).
    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The lines of its log that contain `needle` (at most `n`).
    fn log_lines(&self, needle: &str, n: usize) -> Vec<String> {
        let log = self.log();
        // Without the terminal colours.
        let plain = without_colours(&log);
        plain
            .lines()
            .filter(|l| l.contains(needle))
            .take(n)
            .map(|l| l.chars().take(300).collect())
            .collect()
    }
}

/// `text` without its ANSI escape sequences (`ESC [ ... m`).
fn without_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("agentry's log is kept in {}", self.log.display());
        } else {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Requests and their answers

/// One request and what came of it.
#[derive(Debug, Clone)]
struct Answer {
    what: String,
    /// None: no answer (a time-out of the client, or a connection error).
    status: Option<u16>,
    code: Option<String>,
    retry_after: Option<String>,
    error: Option<String>,
    took: Duration,
    body: Value,
}

impl Answer {
    fn describe(&self) -> String {
        let mut s = format!("{} -> ", self.what);
        match self.status {
            Some(st) => s += &st.to_string(),
            None => s += self.error.as_deref().unwrap_or("no answer"),
        }
        if let Some(code) = &self.code {
            s += &format!(" {code}");
        }
        if let Some(msg) = self.body["error"].as_str() {
            s += &format!(" {:?}", msg.chars().take(160).collect::<String>());
        }
        s + &format!(" after {:.2?}", self.took)
    }

    fn is(&self, status: u16, code: &str) -> bool {
        self.status == Some(status) && self.code.as_deref() == Some(code)
    }

    /// A 503 with `code` and a `Retry-After` of whole seconds.
    fn is_unavailable(&self, code: &str) -> bool {
        self.is(503, code)
            && self
                .retry_after
                .as_deref()
                .is_some_and(|v| v.trim().parse::<u64>().is_ok())
    }

    fn data(&self) -> &Value {
        &self.body["data"]
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("client")
}

/// `method` `url` (with a JSON `body`), waiting at most `bound` for the whole answer.
async fn call(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    body: Option<&Value>,
    bound: Duration,
    what: String,
) -> Answer {
    let started = Instant::now();
    let mut req = http.request(method, &url).timeout(bound);
    if let Some(b) = body {
        req = req.json(b);
    }
    let failed = |e: reqwest::Error, started: Instant, what: String| Answer {
        what,
        status: None,
        code: None,
        retry_after: None,
        error: Some(if e.is_timeout() {
            format!("no answer within {bound:?}")
        } else {
            format!("connection error: {e}")
        }),
        took: started.elapsed(),
        body: Value::Null,
    };
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) => return failed(e, started, what),
    };
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let text = match resp.text().await {
        Ok(t) => t,
        Err(e) => return failed(e, started, what),
    };
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Answer {
        what,
        status: Some(status),
        code: body["code"].as_str().map(str::to_owned),
        retry_after,
        error: None,
        took: started.elapsed(),
        body,
    }
}

async fn post(server: &Server, path: &str, body: &Value, bound: Duration) -> Answer {
    call(
        &http(),
        reqwest::Method::POST,
        server.url(path),
        Some(body),
        bound,
        format!("POST {path}"),
    )
    .await
}

async fn get(server: &Server, path: &str, bound: Duration) -> Answer {
    call(
        &http(),
        reqwest::Method::GET,
        server.url(path),
        None,
        bound,
        format!("GET {path}"),
    )
    .await
}

/// What is wrong with an answer given while the database misbehaves, if anything: it must be a
/// 200, a 503 the contract names (with `Retry-After` when it is about the database or the
/// drain), or one of `allowed` (the 404 or 409 the API defines for the request).
fn wrong(a: &Answer, allowed: &[u16]) -> Option<&'static str> {
    match a.status {
        None if a
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with("no answer")) =>
        {
            Some("no answer within the bound (a hang)")
        }
        None => Some("connection error"),
        Some(200) => None,
        Some(503) => match a.code.as_deref() {
            Some("execution_continues_elsewhere") => None,
            Some("database_unavailable" | "server_shutting_down") => {
                if a.is_unavailable(a.code.as_deref().unwrap_or_default()) {
                    None
                } else {
                    Some("503 without a Retry-After in seconds")
                }
            }
            _ => Some("503 with a code the contract does not name"),
        },
        Some(500) => Some("500"),
        Some(s) if allowed.contains(&s) => None,
        Some(_) => Some("another status"),
    }
}

// ---------------------------------------------------------------------------------------------
// What a test found

/// Every promise a test checks, broken ones grouped by what was broken; the test fails at its
/// end with all of them.
struct Verdict {
    test: &'static str,
    started: Instant,
    broken: BTreeMap<String, Vec<String>>,
    notes: Vec<String>,
}

impl Verdict {
    fn new(test: &'static str) -> Verdict {
        Verdict {
            test,
            started: Instant::now(),
            broken: BTreeMap::new(),
            notes: Vec::new(),
        }
    }

    fn check(&mut self, ok: bool, promise: &str, detail: impl FnOnce() -> String) {
        if !ok {
            self.broken
                .entry(promise.to_owned())
                .or_default()
                .push(detail());
        }
    }

    /// A measurement worth reading whether or not the test passes.
    fn note(&mut self, s: String) {
        eprintln!("[{}] {s}", self.test);
        self.notes.push(s);
    }

    /// Checks each answer of the load with [`wrong`] (a resume may also answer 404
    /// `execution_not_suspended`, when an earlier try did resume it, or 409 `conflict`).
    fn answers(&mut self, during: &str, answers: &[Answer]) {
        for a in answers {
            let allowed: &[u16] = if a.what.ends_with("/resume") {
                &[404, 409]
            } else {
                &[]
            };
            if let Some(what) = wrong(a, allowed) {
                self.check(false, &format!("{during}: {what}"), || a.describe());
            }
        }
    }

    fn finish(mut self) {
        let took = self.started.elapsed();
        self.note(format!("the test took {took:.1?}"));
        if self.broken.is_empty() {
            return;
        }
        let mut report = format!("{}: {} promise(s) broken\n", self.test, self.broken.len());
        for (promise, details) in &self.broken {
            report += &format!("- {promise} ({} times), e.g.:\n", details.len());
            for d in details.iter().take(4) {
                report += &format!("    {d}\n");
            }
        }
        report += "notes:\n";
        for n in &self.notes {
            report += &format!("    {n}\n");
        }
        panic!("{report}");
    }
}

// ---------------------------------------------------------------------------------------------
// The load

/// The three workflows of the load.
const WORD_COUNT: &str = "word-count";
const COUNTDOWN: &str = "countdown";
const EXPENSE: &str = "expense-approval";

#[derive(Default)]
struct Journal {
    answers: Vec<Answer>,
    /// Every acknowledged execution (a 200, or a 503 `execution_continues_elsewhere`), with
    /// its workflow.
    acked: BTreeMap<String, &'static str>,
    /// Every execution a start was sent for, acknowledged or not: one that exists must end
    /// well too.
    tried: BTreeMap<String, &'static str>,
    /// Suspended expenses waiting for their resume.
    to_resume: VecDeque<String>,
}

impl Journal {
    /// Records the answer to the start of `id` of `workflow`.
    fn started(&mut self, workflow: &'static str, id: &str, a: Answer) {
        self.tried.insert(id.to_owned(), workflow);
        if a.status == Some(200) || a.is(503, "execution_continues_elsewhere") {
            self.acked.insert(id.to_owned(), workflow);
            if workflow == EXPENSE && a.data()["status"] == "suspended" {
                self.to_resume.push_back(id.to_owned());
            }
        }
        self.answers.push(a);
    }
}

fn start_body(workflow: &str, id: &str, n: usize) -> Value {
    let input = match workflow {
        WORD_COUNT => json!({"text": format!("a b c {n}")}),
        COUNTDOWN => json!({"stepDelayMs": 50}),
        _ => json!({"employeeId": "e", "amount": 1500, "category": "travel"}),
    };
    json!({"input": input, "options": {"executionId": id}})
}

fn resume_body() -> Value {
    json!({"resumeData": {"approved": true, "managerId": "m"}})
}

/// Starts `id` of `workflow` and records the answer.
async fn start_one(
    server_url: &str,
    journal: &Mutex<Journal>,
    workflow: &'static str,
    id: &str,
    n: usize,
    bound: Duration,
) -> Answer {
    let a = call(
        &http(),
        reqwest::Method::POST,
        format!("{server_url}/workflows/{workflow}/execute"),
        Some(&start_body(workflow, id, n)),
        bound,
        format!("POST /workflows/{workflow}/execute {id}"),
    )
    .await;
    journal.lock().unwrap().started(workflow, id, a.clone());
    a
}

/// A steady load: a few clients, each starting `word-count`, `countdown` (5 steps of 50 ms)
/// and `expense-approval` (suspends) executions under their own ids in turn, and resuming the
/// suspended expenses, one request at a time with a short pause; every answer is recorded.
struct Load {
    stop: Arc<AtomicBool>,
    journal: Arc<Mutex<Journal>>,
    clients: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(server: &Server, clients: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let journal = Arc::new(Mutex::new(Journal::default()));
        let clients = (0..clients)
            .map(|c| {
                let (base, stop, journal) = (
                    format!("http://{}", server.addr),
                    stop.clone(),
                    journal.clone(),
                );
                tokio::spawn(async move {
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) {
                        n += 1;
                        let resume = if n % 4 == 0 {
                            journal.lock().unwrap().to_resume.pop_front()
                        } else {
                            None
                        };
                        if let Some(id) = resume {
                            let a = call(
                                &http(),
                                reqwest::Method::POST,
                                format!("{base}/workflows/{EXPENSE}/executions/{id}/resume"),
                                Some(&resume_body()),
                                ANSWER_BOUND,
                                format!("POST /workflows/{EXPENSE}/executions/{id}/resume"),
                            )
                            .await;
                            let mut j = journal.lock().unwrap();
                            // Not resumed for sure: try again later (a 404 says an earlier
                            // attempt did resume it).
                            if a.status != Some(200) && a.status != Some(404) {
                                j.to_resume.push_back(id);
                            }
                            j.answers.push(a);
                        } else {
                            let workflow = [WORD_COUNT, COUNTDOWN, EXPENSE][n % 3];
                            let id = format!("{workflow}-{c}-{n}");
                            start_one(&base, &journal, workflow, &id, n, ANSWER_BOUND).await;
                        }
                        tokio::time::sleep(Duration::from_millis(25)).await;
                    }
                })
            })
            .collect();
        Load {
            stop,
            journal,
            clients,
        }
    }

    fn acked(&self) -> usize {
        self.journal.lock().unwrap().acked.len()
    }

    fn answered(&self) -> usize {
        self.journal.lock().unwrap().answers.len()
    }

    /// Waits until `n` more executions are acknowledged (the load is steady).
    async fn until_acked(&self, n: usize) {
        let target = self.acked() + n;
        let started = Instant::now();
        while self.acked() < target {
            assert!(
                started.elapsed() < PATIENCE,
                "the load never got going: {:?}",
                self.journal
                    .lock()
                    .unwrap()
                    .answers
                    .iter()
                    .rev()
                    .take(5)
                    .map(Answer::describe)
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The answers given since the `from`-th.
    fn answers_since(&self, from: usize) -> Vec<Answer> {
        self.journal.lock().unwrap().answers[from..].to_vec()
    }

    async fn stop(self) -> Arc<Mutex<Journal>> {
        self.stop.store(true, Ordering::Relaxed);
        for c in self.clients {
            let _ = c.await;
        }
        self.journal
    }
}

/// Writes until one succeeds (a `word-count` start, each try bounded by the database time-out
/// and a second): how long after `since` the first success came, and the failures before it.
async fn first_write_after(
    server: &Server,
    journal: &Mutex<Journal>,
    since: Instant,
) -> (Option<Duration>, Vec<Answer>) {
    let base = format!("http://{}", server.addr);
    let mut failures = Vec::new();
    for n in 0.. {
        let id = format!("probe-{}", uuid::Uuid::new_v4().simple());
        let a = start_one(
            &base,
            journal,
            WORD_COUNT,
            &id,
            n,
            DB_TIMEOUT + Duration::from_secs(1),
        )
        .await;
        if a.status == Some(200) {
            return (Some(since.elapsed()), failures);
        }
        failures.push(a);
        if since.elapsed() > GIVE_UP_WRITING {
            return (None, failures);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    unreachable!()
}

/// Checks that writes come back within [`RESUMES_WITHIN`] of `since`.
async fn writes_resume(
    verdict: &mut Verdict,
    server: &Server,
    journal: &Mutex<Journal>,
    since: Instant,
    after_what: &str,
) {
    let (took, failures) = first_write_after(server, journal, since).await;
    verdict.note(format!(
        "first successful write {took:?} after {after_what} ({} failed tries before it{})",
        failures.len(),
        failures
            .last()
            .map(|a| format!(", the last: {}", a.describe()))
            .unwrap_or_default()
    ));
    verdict.check(
        took.is_some_and(|t| t <= RESUMES_WITHIN),
        &format!("writes succeed again within {RESUMES_WITHIN:?} of {after_what}"),
        || {
            format!(
                "first success after {took:?}; tries before it: {:?}",
                failures
                    .iter()
                    .take(3)
                    .map(Answer::describe)
                    .collect::<Vec<_>>()
            )
        },
    );
}

// ---------------------------------------------------------------------------------------------
// After the fault: every acknowledged execution

/// One SSE event of an execution's replayed log: its `id:` and data.
type Sse = (Option<i64>, Value);

/// The stored log of `id`, replayed through `GET .../stream` (which ends once the execution no
/// longer runs).
async fn replay(server: &Server, workflow: &str, id: &str) -> Result<Vec<Sse>, String> {
    let resp = http()
        .get(server.url(&format!("/workflows/{workflow}/executions/{id}/stream")))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .map_err(|e| format!("replay of {id}: {e}"))?;
    if resp.status() != 200 {
        return Err(format!("replay of {id}: {}", resp.status()));
    }
    let text = resp
        .text()
        .await
        .map_err(|e| format!("replay of {id}: {e}"))?;
    let mut events = Vec::new();
    for block in text.split("\n\n") {
        let mut seq = None;
        let mut data = None;
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("id: ") {
                seq = v.trim().parse().ok();
            } else if let Some(v) = line.strip_prefix("data: ") {
                data = serde_json::from_str(v).ok();
            }
        }
        if let Some(data) = data {
            events.push((seq, data));
        }
    }
    Ok(events)
}

/// What is wrong with the finished execution `id`'s state and log, if anything: every step
/// completed with the workflow's result; the log numbered without gap or repeat, each step
/// completed once in it, one `workflow-complete`, no `workflow-error`.
async fn check_finished(server: &Server, workflow: &str, id: &str, state: &Value) -> Vec<String> {
    let mut wrong = Vec::new();
    let (steps, result): (&[&str], Value) = match workflow {
        WORD_COUNT => (&["count"], Value::Null),
        COUNTDOWN => (
            &["tick-5", "tick-4", "tick-3", "tick-2", "tick-1"],
            json!({"remaining": 0}),
        ),
        _ => (&["check-approval", "record-decision"], Value::Null),
    };
    for step in steps {
        if state["steps"][step]["status"] != "completed" {
            wrong.push(format!(
                "{id}: step {step} not completed: {}",
                state["steps"]
            ));
        }
    }
    let result_ok = match workflow {
        WORD_COUNT => state["result"]["words"].is_u64(),
        EXPENSE => state["result"]["status"] == "approved",
        _ => state["result"] == result,
    };
    if !result_ok {
        wrong.push(format!("{id}: result {}", state["result"]));
    }
    match replay(server, workflow, id).await {
        Err(e) => wrong.push(e),
        Ok(events) => {
            let stored: Vec<&Sse> = events.iter().filter(|(seq, _)| seq.is_some()).collect();
            let numbers: Vec<i64> = stored.iter().filter_map(|(seq, _)| *seq).collect();
            let expected: Vec<i64> = (1..=numbers.len() as i64).collect();
            if numbers != expected {
                wrong.push(format!("{id}: log numbered {numbers:?}"));
            }
            let mut completions: BTreeMap<String, usize> = BTreeMap::new();
            for (_, e) in &stored {
                if e["type"] == "step-complete" {
                    // The wire names the step `from`.
                    let step = e["from"].as_str().unwrap_or("?").to_owned();
                    *completions.entry(step).or_default() += 1;
                }
            }
            for (step, n) in &completions {
                if *n > 1 {
                    wrong.push(format!("{id}: step {step} completed {n} times in the log"));
                }
            }
            let count = |t: &str| stored.iter().filter(|(_, e)| e["type"] == t).count();
            if count("workflow-complete") != 1 || count("workflow-error") != 0 {
                let types: Vec<&str> = stored
                    .iter()
                    .filter_map(|(_, e)| e["type"].as_str())
                    .collect();
                wrong.push(format!("{id}: log {types:?}"));
            }
        }
    }
    wrong
}

/// Brings every execution a start was sent for to its end (resuming the suspended expenses)
/// and checks each: no acknowledged one lost (404; an unacknowledged one may never have been
/// created), none stuck (still running after [`PATIENCE`]), none in `error`, each finished one
/// as [`check_finished`] wants it.
async fn settle(verdict: &mut Verdict, server: &Server, journal: &Mutex<Journal>) {
    let (acked, tried) = {
        let j = journal.lock().unwrap();
        (j.acked.clone(), j.tried.clone())
    };
    verdict.note(format!(
        "{} acknowledged executions ({} starts sent)",
        acked.len(),
        tried.len()
    ));
    let mut pending: BTreeMap<String, &'static str> = tried;
    let mut finished: Vec<(String, &'static str, Value)> = Vec::new();
    let started = Instant::now();
    let mut last_seen: BTreeMap<String, Value> = BTreeMap::new();
    while !pending.is_empty() && started.elapsed() < PATIENCE {
        let ids: Vec<(String, &'static str)> =
            pending.iter().map(|(k, v)| (k.clone(), *v)).collect();
        for (id, workflow) in ids {
            let a = get(
                server,
                &format!("/workflows/{workflow}/executions/{id}/state"),
                Duration::from_secs(5),
            )
            .await;
            if a.status == Some(404) {
                verdict.check(
                    !acked.contains_key(&id),
                    "no acknowledged execution is lost",
                    || format!("{id}: {}", a.describe()),
                );
                pending.remove(&id);
                continue;
            }
            if a.status != Some(200) {
                last_seen.insert(id, json!(a.describe()));
                continue;
            }
            let state = a.data().clone();
            match state["status"].as_str().unwrap_or_default() {
                "completed" => {
                    pending.remove(&id);
                    finished.push((id, workflow, state));
                }
                "suspended" if workflow == EXPENSE => {
                    let r = post(
                        server,
                        &format!("/workflows/{EXPENSE}/executions/{id}/resume"),
                        &resume_body(),
                        ANSWER_BOUND,
                    )
                    .await;
                    last_seen.insert(id, json!(r.describe()));
                }
                "running" => {
                    last_seen.insert(id, state);
                }
                _ => {
                    verdict.check(
                        false,
                        "no execution ends in error (or anything but completed)",
                        || {
                            format!(
                                "{id}{}: {} {}",
                                if acked.contains_key(&id) {
                                    " (acknowledged)"
                                } else {
                                    " (its start was not acknowledged)"
                                },
                                state["status"],
                                state["error"]
                                    .to_string()
                                    .chars()
                                    .take(300)
                                    .collect::<String>()
                            )
                        },
                    );
                    pending.remove(&id);
                }
            }
        }
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    for id in pending.keys() {
        verdict.check(false, "no execution is stuck", || {
            format!(
                "{id} after {PATIENCE:?}: {}",
                last_seen
                    .get(id)
                    .map(|s| s.to_string().chars().take(400).collect::<String>())
                    .unwrap_or_default()
            )
        });
    }
    for (id, workflow, state) in &finished {
        for w in check_finished(server, workflow, id, state).await {
            verdict.check(
                false,
                "every finished execution completed each step once",
                || w,
            );
        }
    }
    verdict.note(format!(
        "{} completed and checked in {:.1?}",
        finished.len(),
        started.elapsed()
    ));
}

/// Reads while the database misbehaves: the states of a few acknowledged executions, at once.
async fn read_some(
    server: &Server,
    journal: &Mutex<Journal>,
    n: usize,
    bound: Duration,
) -> Vec<Answer> {
    let some: Vec<(String, &'static str)> = journal
        .lock()
        .unwrap()
        .acked
        .iter()
        .take(n)
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    futures::future::join_all(some.iter().map(|(id, workflow)| {
        let path = format!("/workflows/{workflow}/executions/{id}/state");
        async move { get(server, &path, bound).await }
    }))
    .await
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

/// PostgreSQL stopped (`mode`) under load for [`OUTAGE`], then started again on the same port
/// and data: while it is down a write and a read answer 503 `database_unavailable` with
/// `Retry-After` within the bound, and no answer of the load is a 500 or a hang; writes succeed
/// again within 2 s of it accepting connections; then every acknowledged execution completes
/// (the expenses once resumed), each step once.
async fn restart_under_load(test: &'static str, mode: Shutdown) {
    let _one_at_a_time = serial().await;
    let mut verdict = Verdict::new(test);
    let pg = PrivatePg::start();
    let mut server = Server::start(&pg.url(), &[]);
    let load = Load::start(&server, 3);
    load.until_acked(20).await;
    let from = load.answered();

    pg.stop(mode);
    let down = Instant::now();
    verdict.check(!pg.accepting(), "harness: PostgreSQL is down", String::new);
    // A write and two reads at once (each may wait up to the database time-out).
    let base = format!("http://{}", server.addr);
    let (write, reads) = tokio::join!(
        start_one(
            &base,
            &load.journal,
            WORD_COUNT,
            "while-down",
            0,
            DB_TIMEOUT + Duration::from_secs(1),
        ),
        read_some(
            &server,
            &load.journal,
            2,
            DB_TIMEOUT + Duration::from_secs(1)
        )
    );
    for a in std::iter::once(&write).chain(&reads) {
        verdict.check(
            a.is_unavailable("database_unavailable") && a.took <= DB_TIMEOUT + Duration::from_secs(1),
            "while PostgreSQL is down, a request answers 503 database_unavailable with Retry-After within the database time-out + 1 s",
            || a.describe(),
        );
    }
    if let Some(left) = OUTAGE.checked_sub(down.elapsed()) {
        tokio::time::sleep(left).await;
    }
    let starting = Instant::now();
    let up = pg.start_again();
    verdict.note(format!(
        "PostgreSQL down for {:.2?} (its start took {:.2?})",
        up - down,
        up - starting
    ));
    writes_resume(
        &mut verdict,
        &server,
        &load.journal,
        up,
        "PostgreSQL accepting connections",
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    verdict.answers(
        "an answer of the load or a probe",
        &load.answers_since(from),
    );
    let journal = load.stop().await;
    settle(&mut verdict, &server, &journal).await;
    let running = server.running();
    verdict.check(
        running,
        "agentry keeps running through the fault (it is never restarted)",
        String::new,
    );
    verdict.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_fast_restart_under_load() {
    restart_under_load("postgres_fast_restart_under_load", Shutdown::Fast).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_immediate_restart_under_load() {
    restart_under_load("postgres_immediate_restart_under_load", Shutdown::Immediate).await;
}

/// Every connection agentry holds is killed with `pg_terminate_backend`, ten times 300 ms apart,
/// under load: no answer is a 500 or a hang, writes succeed within 2 s of the last kill, and
/// every acknowledged execution completes, each step once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_backends_terminated_under_load() {
    let _one_at_a_time = serial().await;
    let mut verdict = Verdict::new("postgres_backends_terminated_under_load");
    let pg = PrivatePg::start();
    let mut server = Server::start(&pg.url(), &[]);
    let load = Load::start(&server, 3);
    load.until_acked(20).await;
    let from = load.answered();
    let mut killed = Vec::new();
    for _ in 0..10 {
        killed.push(pg.terminate_agentry_connections());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let last = Instant::now();
    verdict.note(format!(
        "agentry's connections terminated, per round: {killed:?}"
    ));
    verdict.check(
        killed.iter().all(|n| *n > 0),
        "harness: every round terminates some of agentry's connections",
        || format!("{killed:?}"),
    );
    writes_resume(
        &mut verdict,
        &server,
        &load.journal,
        last,
        "the last termination",
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    verdict.answers(
        "an answer of the load or a probe",
        &load.answers_since(from),
    );
    let journal = load.stop().await;
    settle(&mut verdict, &server, &journal).await;
    let running = server.running();
    verdict.check(
        running,
        "agentry keeps running through the fault (it is never restarted)",
        String::new,
    );
    verdict.finish();
}

/// The test holds an exclusive lock on `workflow_executions` (in a transaction that sleeps):
/// every statement of agentry on it waits, until its pool has no free connection. 40 concurrent
/// requests (starts and state reads) each answer 503 `database_unavailable` with `Retry-After`
/// within [`EXHAUSTED_BOUND`] (never a hang); once the lock is released, writes succeed within
/// 2 s, and every acknowledged execution completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_pool_exhausted_by_a_held_lock() {
    let _one_at_a_time = serial().await;
    let mut verdict = Verdict::new("postgres_pool_exhausted_by_a_held_lock");
    let pg = PrivatePg::start();
    let mut server = Server::start(&pg.url(), &[]);
    let journal = Arc::new(Mutex::new(Journal::default()));
    let base = format!("http://{}", server.addr);
    for (n, workflow) in [WORD_COUNT, WORD_COUNT, EXPENSE, EXPENSE, COUNTDOWN]
        .into_iter()
        .enumerate()
    {
        let a = start_one(
            &base,
            &journal,
            workflow,
            &format!("before-{n}"),
            n,
            PATIENCE,
        )
        .await;
        assert_eq!(a.status, Some(200), "{}", a.describe());
    }

    let mut lock = pg.psql_in_background(
        "agentry-test-lock",
        "BEGIN; LOCK TABLE workflow_executions IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(600);",
    );
    let granted = "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation \
                   WHERE c.relname = 'workflow_executions' AND l.mode = 'AccessExclusiveLock' \
                   AND l.granted";
    let started = Instant::now();
    while pg.psql(granted) != "1" {
        assert!(started.elapsed() < PATIENCE, "the lock was never granted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let requests: Vec<_> = (0..40)
        .map(|n| {
            let (base, journal) = (base.clone(), journal.clone());
            tokio::spawn(async move {
                if n % 4 == 3 {
                    let id = format!("before-{}", (n / 4) % 2);
                    call(
                        &http(),
                        reqwest::Method::GET,
                        format!("{base}/workflows/{WORD_COUNT}/executions/{id}/state"),
                        None,
                        Duration::from_secs(10),
                        format!("GET state of {id}"),
                    )
                    .await
                } else {
                    let id = format!("during-{n}");
                    start_one(&base, &journal, WORD_COUNT, &id, n, Duration::from_secs(10)).await
                }
            })
        })
        .collect();
    // Watch agentry's sessions while the requests wait: how many wait on the lock, and
    // whether none of its pool's connections is left idle (the LISTEN connection aside).
    let sample = format!(
        "SELECT count(*), count(*) FILTER (WHERE wait_event_type = 'Lock'), \
         count(*) FILTER (WHERE state = 'idle' AND query NOT ILIKE 'listen%') \
         FROM pg_stat_activity WHERE {}",
        PrivatePg::AGENTRY_SESSIONS
    );
    let mut peak = (0, 0, usize::MAX);
    let mut exhausted = false;
    // Up to 3 s (the requests wait about 4 s for the database before they answer 503): on a
    // loaded machine the 40 requests take a while to reach it.
    let watching = Instant::now();
    while watching.elapsed() < Duration::from_millis(3000) && !exhausted {
        let row: Vec<usize> = pg
            .psql(&sample)
            .split('|')
            .map(|v| v.parse().unwrap_or(0))
            .collect();
        if row[1] >= peak.1 {
            peak = (row[0], row[1], row[2]);
        }
        exhausted |= row[1] > 0 && row[2] == 0;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    verdict.note(format!(
        "agentry's sessions at the peak: {} in all, {} waiting on the lock, {} idle",
        peak.0, peak.1, peak.2
    ));
    verdict.check(
        exhausted,
        "harness: agentry's statements wait on the test's lock with no idle connection left",
        || format!("{peak:?}"),
    );
    let mut answers = Vec::new();
    for r in requests {
        answers.push(r.await.expect("request task"));
    }
    for a in &answers {
        verdict.check(
            a.is_unavailable("database_unavailable") && a.took <= EXHAUSTED_BOUND,
            &format!(
                "with every connection busy, a request answers 503 database_unavailable with Retry-After within {EXHAUSTED_BOUND:?}"
            ),
            || a.describe(),
        );
    }
    let slowest = answers.iter().map(|a| a.took).max().unwrap_or_default();
    let mut by_status: BTreeMap<String, usize> = BTreeMap::new();
    for a in &answers {
        let key = match a.status {
            Some(s) => format!("{s} {}", a.code.as_deref().unwrap_or_default()),
            None => "no answer".to_owned(),
        };
        *by_status.entry(key).or_default() += 1;
    }
    verdict.note(format!(
        "the 40 answers: {by_status:?}, the slowest after {slowest:.2?}"
    ));

    pg.psql(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE application_name = 'agentry-test-lock'",
    );
    let released = Instant::now();
    let _ = lock.kill();
    let _ = lock.wait();
    writes_resume(
        &mut verdict,
        &server,
        &journal,
        released,
        "the lock's release",
    )
    .await;
    settle(&mut verdict, &server, &journal).await;
    let running = server.running();
    verdict.check(
        running,
        "agentry keeps running through the fault (it is never restarted)",
        String::new,
    );
    verdict.finish();
}

// ---------------------------------------------------------------------------------------------
// SQLite

/// The SQLite fault tests' common course: under load, `break_it` makes the database's disk
/// refuse writes; writes then answer 503 `database_unavailable` with `Retry-After` within the
/// bound, reads of acknowledged executions keep answering 200, and no answer of the load is a
/// 500 or a hang; `mend_it` gives the disk back, and writes succeed within 2 s; every
/// acknowledged execution completes, each step once. Returns the server, still running.
async fn sqlite_disk_fault(
    verdict: &mut Verdict,
    fs: &SmallFs,
    break_it: impl FnOnce(&SmallFs) -> String,
    mend_it: impl FnOnce(&SmallFs),
    mended: &str,
) -> Server {
    let url = format!("sqlite://{}", fs.dir.join("agentry.db").display());
    let mut server = Server::start(&url, &[]);
    let load = Load::start(&server, 3);
    load.until_acked(30).await;
    let from = load.answered();
    let acked_before: BTreeMap<String, &'static str> = load.journal.lock().unwrap().acked.clone();

    let how = break_it(fs);
    verdict.note(how);
    verdict.check(
        !fs.writable(),
        "harness: the folder refuses new data",
        String::new,
    );
    let broken = Instant::now();
    // The load writes on; wait until a write has failed (the WAL may still have room).
    let mut first_failure = None;
    while broken.elapsed() < Duration::from_secs(10) {
        let failed = load
            .answers_since(from)
            .into_iter()
            .find(|a| a.status != Some(200) && a.what.contains("/execute"));
        if let Some(a) = failed {
            first_failure = Some(a);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    verdict.note(format!(
        "first failed write {:.2?} after the fault: {}; agentry logged: {:?}",
        broken.elapsed(),
        first_failure
            .as_ref()
            .map(Answer::describe)
            .unwrap_or_default(),
        server.log_lines("ERROR", 2)
    ));
    verdict.check(
        first_failure.is_some(),
        "harness: SQLite writes fail once the disk refuses them",
        String::new,
    );
    // Now explicit writes and reads.
    let mut writes = Vec::new();
    for n in 0..3 {
        writes.push(
            start_one(
                &format!("http://{}", server.addr),
                &load.journal,
                WORD_COUNT,
                &format!("while-broken-{n}"),
                n,
                DB_TIMEOUT + Duration::from_secs(1),
            )
            .await,
        );
    }
    for a in &writes {
        verdict.check(
            a.is_unavailable("database_unavailable") && a.took <= DB_TIMEOUT + Duration::from_secs(1),
            "a write the disk refuses answers 503 database_unavailable with Retry-After within the database time-out + 1 s",
            || a.describe(),
        );
    }
    let reads = read_some(
        &server,
        &load.journal,
        10,
        DB_TIMEOUT + Duration::from_secs(1),
    )
    .await;
    for a in &reads {
        let id = a.what.split('/').nth(4).unwrap_or_default().to_owned();
        let known = acked_before.contains_key(&id);
        verdict.check(
            a.status == Some(200)
                && (!known
                    || matches!(
                        a.data()["status"].as_str(),
                        Some("completed" | "suspended" | "running")
                    )),
            "reads keep working while writes fail",
            || a.describe(),
        );
    }

    mend_it(fs);
    let mended_at = Instant::now();
    writes_resume(verdict, &server, &load.journal, mended_at, mended).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    verdict.answers(
        "an answer of the load or a probe",
        &load.answers_since(from),
    );
    let journal = load.stop().await;
    settle(verdict, &server, &journal).await;
    let running = server.running();
    verdict.check(
        running,
        "agentry keeps running through the fault (it is never restarted)",
        || server.log_lines("panicked", 3).join("\n"),
    );
    server
}

/// The SQLite file's disk fills up (a tmpfs of 8 MB, filled by the test) under load; then the
/// space is given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_disk_full_under_load() {
    let _one_at_a_time = serial().await;
    let mut verdict = Verdict::new("sqlite_disk_full_under_load");
    let fs = SmallFs::tmpfs("8m")
        .unwrap_or_else(|e| panic!("this test mounts a tmpfs (it needs root): {e}"));
    // Alive until the verdict, so that its log is kept when the test fails.
    let _server = sqlite_disk_fault(
        &mut verdict,
        &fs,
        |fs| format!("the disk filled: {} bytes of filler", fs.fill()),
        SmallFs::free,
        "the space's return",
    )
    .await;
    verdict.finish();
}

/// The SQLite file, its WAL and their folder turn read-only under load (a loop-mounted ext4 of
/// 32 MB; `chattr +i`, which ext4 enforces on descriptors already open); then writable again.
/// The `-shm` index stays writable (SQLite maps it in memory; readers need it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_read_only_under_load() {
    let _one_at_a_time = serial().await;
    let mut verdict = Verdict::new("sqlite_read_only_under_load");
    let fs = SmallFs::ext4(32)
        .unwrap_or_else(|e| panic!("this test loop-mounts an ext4 image (it needs root): {e}"));
    let files = |fs: &SmallFs| {
        vec![
            fs.dir.join("agentry.db"),
            fs.dir.join("agentry.db-wal"),
            fs.dir.clone(),
        ]
    };
    // Alive until the verdict, so that its log is kept when the test fails.
    let _server = sqlite_disk_fault(
        &mut verdict,
        &fs,
        |fs| {
            let paths = files(fs);
            let paths: Vec<&std::path::Path> = paths.iter().map(PathBuf::as_path).collect();
            fs.immutable(&paths, true);
            // An open descriptor is refused too (what agentry holds).
            let refused = std::fs::OpenOptions::new()
                .append(true)
                .open(fs.dir.join("agentry.db-wal"))
                .is_err();
            format!("the database, its WAL and its folder made read-only; opening the WAL for writing refused: {refused}")
        },
        |fs| {
            let paths = files(fs);
            let paths: Vec<&std::path::Path> = paths.iter().map(PathBuf::as_path).collect();
            fs.immutable(&paths, false);
        },
        "the folder's return to writable",
    )
    .await;
    verdict.finish();
}

// ---------------------------------------------------------------------------------------------
// Health

/// `GET path`: the status and the JSON body, and how long it took.
async fn probe(server: &Server, path: &str) -> Answer {
    get(server, path, DB_TIMEOUT + Duration::from_secs(1)).await
}

fn check_probe(verdict: &mut Verdict, a: &Answer, status: u16, body: Value, promise: &str) {
    let ok = a.status == Some(status)
        && body
            .as_object()
            .is_some_and(|want| want.iter().all(|(k, v)| &a.body[k] == v))
        && a.body.get("success").is_none();
    verdict.check(ok, promise, || format!("{} {}", a.describe(), a.body));
}

/// `/healthz` and `/readyz` through a PostgreSQL outage and a SIGTERM drain: /healthz 200
/// `{"status":"ok"}` throughout; /readyz 200 `{"status":"ready"}`, 503 `not_ready` with reason
/// `database` while PostgreSQL is down (within the database time-out + 1 s), 200 again within
/// 2 s of PostgreSQL accepting connections, and 503 with reason `draining` within 1 s of
/// SIGTERM while a long step still runs; a start during the drain answers 503
/// `server_shutting_down` with `Retry-After`; the process exits within its grace + 2 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_readiness_through_an_outage_and_a_drain() {
    let _one_at_a_time = serial().await;
    let mut verdict = Verdict::new("health_and_readiness_through_an_outage_and_a_drain");
    let pg = PrivatePg::start();
    let mut server = Server::start(&pg.url(), &[("AGENTRY_SHUTDOWN_GRACE", "6s")]);
    let ok = json!({"status": "ok"});
    let a = probe(&server, "/healthz").await;
    check_probe(
        &mut verdict,
        &a,
        200,
        ok.clone(),
        "/healthz answers 200 {\"status\":\"ok\"}",
    );
    let a = probe(&server, "/readyz").await;
    check_probe(
        &mut verdict,
        &a,
        200,
        json!({"status": "ready"}),
        "/readyz answers 200 {\"status\":\"ready\"} when the database answers",
    );

    pg.stop(Shutdown::Fast);
    let a = probe(&server, "/healthz").await;
    check_probe(
        &mut verdict,
        &a,
        200,
        ok.clone(),
        "/healthz answers 200 while PostgreSQL is down",
    );
    verdict.check(
        a.took < Duration::from_secs(1),
        "/healthz does not wait for the database",
        || a.describe(),
    );
    let a = probe(&server, "/readyz").await;
    check_probe(
        &mut verdict,
        &a,
        503,
        json!({"status": "not_ready", "reason": "database"}),
        "/readyz answers 503 not_ready (database) within the database time-out + 1 s while PostgreSQL is down",
    );
    verdict.check(
        a.body["detail"].is_string(),
        "/readyz's 503 has a detail",
        || a.body.to_string(),
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let up = pg.start_again();
    let mut ready_after = None;
    let mut last = None;
    while up.elapsed() < Duration::from_secs(10) {
        let a = probe(&server, "/readyz").await;
        if a.status == Some(200) {
            ready_after = Some(up.elapsed());
            break;
        }
        last = Some(a);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    verdict.note(format!(
        "/readyz 200 again {ready_after:?} after PostgreSQL accepted connections"
    ));
    verdict.check(
        ready_after.is_some_and(|t| t <= RESUMES_WITHIN),
        "/readyz answers 200 again within 2 s of PostgreSQL accepting connections",
        || {
            format!(
                "{ready_after:?}; last {}",
                last.map(|a| a.describe()).unwrap_or_default()
            )
        },
    );

    // A drain while a step of 3 s runs.
    let id = format!("cd-{}", uuid::Uuid::new_v4().simple());
    let waiting = {
        let url = server.url("/workflows/countdown/execute");
        let body = json!({"input": {"stepDelayMs": 3000}, "options": {"executionId": id}});
        tokio::spawn(async move {
            call(
                &http(),
                reqwest::Method::POST,
                url,
                Some(&body),
                Duration::from_secs(30),
                "POST /workflows/countdown/execute (a long step)".into(),
            )
            .await
        })
    };
    let started = Instant::now();
    loop {
        let a = get(
            &server,
            &format!("/workflows/countdown/executions/{id}/state"),
            Duration::from_secs(5),
        )
        .await;
        if a.data()["steps"]["tick-5"]["status"] == "running" {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the countdown never started: {}",
            a.describe()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.signal("-TERM");
    let term = Instant::now();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let a = probe(&server, "/readyz").await;
    check_probe(
        &mut verdict,
        &a,
        503,
        json!({"status": "not_ready", "reason": "draining"}),
        "/readyz answers 503 not_ready (draining) at the start of the drain",
    );
    verdict.check(
        term.elapsed() < Duration::from_secs(1),
        "/readyz flips within 1 s of SIGTERM",
        || format!("{:?}", term.elapsed()),
    );
    let a = probe(&server, "/healthz").await;
    check_probe(
        &mut verdict,
        &a,
        200,
        ok,
        "/healthz answers 200 during the drain (the process serves)",
    );
    let a = post(
        &server,
        "/workflows/word-count/execute",
        &json!({"input": {"text": "late"}}),
        Duration::from_secs(5),
    )
    .await;
    verdict.check(
        a.is_unavailable("server_shutting_down"),
        "a start during the drain answers 503 server_shutting_down with Retry-After",
        || a.describe(),
    );
    let a = waiting.await.expect("task");
    verdict.note(format!(
        "the client waiting on the long step: {}",
        a.describe()
    ));
    verdict.check(
        wrong(&a, &[]).is_none(),
        "the client waiting on the long step gets an answer of the contract",
        || a.describe(),
    );
    let exit = loop {
        if let Some(status) = server.child.try_wait().expect("try_wait") {
            break Some(status);
        }
        if term.elapsed() > Duration::from_secs(15) {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    verdict.note(format!(
        "exited {exit:?} {:.2?} after SIGTERM",
        term.elapsed()
    ));
    verdict.check(
        exit.is_some_and(|s| s.success()) && term.elapsed() <= Duration::from_secs(8),
        "the process exits cleanly within its grace (6 s) + 2 s",
        || format!("{exit:?} after {:?}", term.elapsed()),
    );
    verdict.finish();
}

/// The database itself dropped under a running server (`DROP DATABASE ... WITH (FORCE)`: its
/// connections cut, and every new one refused as `database ... does not exist`): every reading
/// route, and a start, answers 503 `database_unavailable` with `Retry-After` within the bound,
/// never 500.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_database_answers_503_on_every_route() {
    let _one_at_a_time = serial().await;
    let mut verdict = Verdict::new("a_dropped_database_answers_503_on_every_route");
    let db = agentry_testdb::PgDatabase::create("agentry_dropped")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(&db.url, &[]);
    let bound = DB_TIMEOUT + Duration::from_secs(2);
    let started = post(
        &server,
        "/workflows/expense-approval/execute",
        &json!({"input": {"employeeId": "e-1", "amount": 5000, "category": "travel"},
                "options": {"executionId": "ea-1"}}),
        bound,
    )
    .await;
    assert_eq!(started.status, Some(200), "{}", started.describe());
    db.drop_now().await;

    for path in [
        "/executions",
        "/executions/ea-1",
        "/workflows/expense-approval/executions",
        "/workflows/expense-approval/executions/ea-1/state",
        "/agent-runs",
        "/agents/assistant/runs",
        "/agents/assistant/runs/r-1",
        "/schedules",
        "/schedules/nightly-report",
        "/queues",
        "/api/execution-counts",
    ] {
        let a = get(&server, path, bound).await;
        verdict.check(
            a.is_unavailable("database_unavailable"),
            "a reading route answers 503 database_unavailable with Retry-After",
            || a.describe(),
        );
    }
    let a = post(
        &server,
        "/workflows/countdown/execute",
        &json!({"input": {"stepDelayMs": 1}}),
        bound,
    )
    .await;
    verdict.check(
        a.is_unavailable("database_unavailable"),
        "a start answers 503 database_unavailable with Retry-After",
        || a.describe(),
    );
    drop(server);
    verdict.finish();
}
