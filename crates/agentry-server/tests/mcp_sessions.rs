//! MCP sessions cost little and never show their ids: the real `agentry` binary flooded with
//! `initialize` requests (the attack of hardening II: any token, or none without a provider),
//! its resident memory read from `/proc/<pid>/status`, its stderr searched for the session ids
//! it answered.

mod common;

use std::collections::HashSet;
use std::io::BufReader;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentry_mcp::endpoint::{INITIALIZE_BODY_LIMIT, INITIALIZE_VALUE_LIMIT};
use common::{Killed, printed};
use futures::StreamExt;
use serde_json::{Value, json};

const SECRET: &str = "mcp-sessions-secret-of-at-least-32-bytes";
/// How much one flood may raise the resident memory (hardening II's target).
const TARGET: u64 = 64 * 1024 * 1024;

struct Server {
    process: Killed,
    addr: String,
    stderr: std::path::PathBuf,
}

impl Server {
    /// The binary on a free port with an in-memory database, `RUST_LOG` unset (the default
    /// `info`) unless `env` sets it, stderr to a file.
    fn start(env: &[(&str, &str)]) -> Server {
        let stderr = std::env::temp_dir().join(format!(
            "agentry-mcp-sessions-{}.log",
            uuid::Uuid::new_v4().simple()
        ));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentry"));
        cmd.args(["serve", "--bind", "127.0.0.1:0"])
            .args(["--database-url", "sqlite::memory:"])
            .env_remove("RUST_LOG")
            .env_remove("AGENTRY_JWT_SECRET")
            .env_remove("AGENTRY_JWT_PUBLIC_KEY_FILE")
            .env_remove("AGENTRY_PUBLIC_ROUTES")
            .env_remove("AGENTRY_PROTECTED_ROUTES")
            .env_remove("AGENTRY_AUTH_STRICT")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap());
        let mut child = cmd.spawn().expect("starting agentry");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let addr = printed(&mut stdout, "agentry listening on http://");
        Server {
            process: Killed(child),
            addr,
            stderr,
        }
    }

    /// The process's resident memory (VmRSS), in bytes.
    fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.process.0.id()))
            .expect("/proc/<pid>/status");
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS");
        kb * 1024
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Stops the server and returns what it wrote to stderr.
    fn stop(mut self) -> String {
        let _ = self.process.0.kill();
        let _ = self.process.0.wait();
        let log = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let _ = std::fs::remove_file(&self.stderr);
        log
    }
}

fn initialize(name: &str, experimental: Option<Value>) -> Vec<u8> {
    let mut capabilities = json!({});
    if let Some(e) = experimental {
        capabilities["experimental"] = e;
    }
    serde_json::to_vec(&json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": capabilities,
            "clientInfo": {"name": name, "version": "1"}
        }
    }))
    .unwrap()
}

/// The largest `initialize` `/mcp` accepts, and the costliest to keep: exactly
/// `INITIALIZE_BODY_LIMIT` bytes with `INITIALIZE_VALUE_LIMIT` JSON values in its params (a
/// list of small numbers, the most values per byte), the rest a long client name.
fn largest_initialize() -> Vec<u8> {
    // params, protocolVersion, capabilities, experimental, x, list, clientInfo, name, version.
    let numbers = INITIALIZE_VALUE_LIMIT - 9;
    let experimental = Some(json!({"x": {"list": vec![0; numbers]}}));
    let base = initialize("", experimental.clone()).len();
    let body = initialize(&"n".repeat(INITIALIZE_BODY_LIMIT - base), experimental);
    assert_eq!(body.len(), INITIALIZE_BODY_LIMIT);
    body
}

/// Sends `count` `initialize` requests with `body`, eight at a time on kept-alive connections,
/// the i-th with `tokens[i % len]` (none when empty): the count of each status and the session
/// ids answered.
async fn flood(
    server: &Server,
    count: usize,
    body: Vec<u8>,
    tokens: &[String],
) -> (Vec<(u16, usize)>, Vec<String>) {
    let client = reqwest::Client::new();
    let body = Arc::new(body);
    let url = server.url("/mcp");
    let tokens = Arc::new(tokens.to_vec());
    let answers: Vec<(u16, Option<String>)> = futures::stream::iter(0..count)
        .map(|i| {
            let (client, url, body, tokens) =
                (client.clone(), url.clone(), body.clone(), tokens.clone());
            async move {
                let mut req = client
                    .post(url)
                    .header("accept", "application/json, text/event-stream")
                    .header("content-type", "application/json")
                    .body(body.as_ref().clone());
                if !tokens.is_empty() {
                    req = req.bearer_auth(&tokens[i % tokens.len()]);
                }
                let resp = req.send().await.expect("the server answers");
                let status = resp.status().as_u16();
                let id = resp
                    .headers()
                    .get("mcp-session-id")
                    .map(|v| v.to_str().unwrap().to_owned());
                resp.bytes().await.expect("the whole answer");
                (status, id)
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let mut statuses: Vec<(u16, usize)> = Vec::new();
    for (status, _) in &answers {
        match statuses.iter_mut().find(|(s, _)| s == status) {
            Some((_, n)) => *n += 1,
            None => statuses.push((*status, 1)),
        }
    }
    statuses.sort();
    (
        statuses,
        answers.into_iter().filter_map(|(_, id)| id).collect(),
    )
}

/// Whether the server still answers: a route, and a new MCP session that lists its tools.
async fn still_answers(server: &Server, token: Option<&str>) {
    let client = reqwest::Client::new();
    let workflows = client.get(server.url("/workflows")).send().await.unwrap();
    assert_eq!(workflows.status(), 200);
    let mut req = client
        .post(server.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(initialize("after", None));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200, "a new session after the flood");
    let id = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    resp.bytes().await.unwrap();
    let mut req = client
        .post(server.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &id)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    assert!(text.contains("run_countdown"), "{text}");
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Session ids (UUIDs) that appear in `log`.
fn ids_in(log: &str) -> HashSet<&str> {
    log.split(|c: char| !(c.is_ascii_hexdigit() || c == '-'))
        .filter(|w| w.len() == 36 && uuid::Uuid::parse_str(w).is_ok())
        .collect()
}

/// Without a provider (every caller is `anonymous`, so at most 16 sessions): 10,000 empty
/// `initialize` requests, then 1,000 of the largest and costliest one accepted, each raise the
/// resident memory by at most 64 MB and the server answers after each; one byte more is 413.
/// No session id appears on stderr (the binary's default `info` filter), while the digest that
/// stands for an ended session does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_floods_of_one_caller_cost_little_and_never_log_a_session_id() {
    let started = Instant::now();
    let server = Server::start(&[]);
    // Warm up: the first sessions allocate what every later one reuses.
    let (_, warm) = flood(&server, 100, initialize("warm", None), &[]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = server.rss();

    let (statuses, empty_ids) = flood(&server, 10_000, initialize("", None), &[]).await;
    assert_eq!(
        statuses,
        [(200, 10_000)],
        "each opens one, ending the oldest"
    );
    let after_empty = server.rss();
    eprintln!(
        "10,000 empty initializes: RSS {:.1} -> {:.1} MB (+{:.1} MB) in {:.1?}",
        mb(before),
        mb(after_empty),
        mb(after_empty.saturating_sub(before)),
        started.elapsed()
    );
    assert!(
        after_empty.saturating_sub(before) <= TARGET,
        "10,000 empty initializes raised RSS by {:.1} MB",
        mb(after_empty - before)
    );
    still_answers(&server, None).await;

    let largest = largest_initialize();
    let (statuses, large_ids) = flood(&server, 1_000, largest.clone(), &[]).await;
    assert_eq!(statuses, [(200, 1_000)]);
    let after_large = server.rss();
    eprintln!(
        "1,000 initializes of {} bytes: RSS {:.1} -> {:.1} MB (+{:.1} MB)",
        largest.len(),
        mb(after_empty),
        mb(after_large),
        mb(after_large.saturating_sub(after_empty))
    );
    assert!(
        after_large.saturating_sub(after_empty) <= TARGET,
        "1,000 of the largest initializes raised RSS by {:.1} MB",
        mb(after_large - after_empty)
    );
    still_answers(&server, None).await;

    let mut over = largest.clone();
    over.insert(over.len() - 1, b' ');
    let (statuses, _) = flood(&server, 1, over, &[]).await;
    assert_eq!(statuses, [(413, 1)], "one byte over the limit");

    let log = server.stop();
    let answered: HashSet<&str> = warm
        .iter()
        .chain(&empty_ids)
        .chain(&large_ids)
        .map(String::as_str)
        .collect();
    assert_eq!(answered.len(), 100 + 10_000 + 1_000, "every id is new");
    let logged = ids_in(&log);
    let leaked: Vec<&&str> = logged.intersection(&answered).collect();
    assert!(
        leaked.is_empty(),
        "{} session ids on stderr, such as {:?}",
        leaked.len(),
        leaked.first()
    );
    let evicted = agentry_mcp::sessions::digest(&empty_ids[0]);
    assert!(
        log.lines()
            .any(|l| l.contains("MCP session ended") && l.contains(&evicted)),
        "the eviction of the first session is logged with its digest {evicted}"
    );
}

/// With the JWT provider, a thousand users (each under their own limit) fill the sessions to
/// `AGENTRY_MCP_MAX_SESSIONS` (1,000) with the largest `initialize`: the next are refused with
/// 503 and `Retry-After`, memory stays bounded by the documented cost of a full server (at most
/// 128 KiB a session), and the server answers. Bob's session is not Alice's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_sessions_of_many_users_stop_at_the_total() {
    let server = Server::start(&[("AGENTRY_JWT_SECRET", SECRET)]);
    let token = |sub: &str| {
        agentry_auth::create_token(
            &json!({"sub": sub}),
            SECRET.as_bytes(),
            &agentry_auth::TokenOptions {
                expires_in: Some(Duration::from_secs(3600)),
                ..Default::default()
            },
        )
        .unwrap()
    };
    let tokens: Vec<String> = (0..1_000).map(|i| token(&format!("user-{i}"))).collect();
    // Warm up: a user of their own fills their 16.
    let warm = token("warm");
    let (_, _) = flood(
        &server,
        20,
        initialize("warm", None),
        std::slice::from_ref(&warm),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = server.rss();
    let (statuses, _) = flood(&server, 2_000, largest_initialize(), &tokens).await;
    let after = server.rss();
    eprintln!(
        "2,000 of the largest initializes by 1,000 users: {statuses:?}, RSS {:.1} -> {:.1} MB \
         (+{:.1} MB)",
        mb(before),
        mb(after),
        mb(after.saturating_sub(before))
    );
    let opened: usize = statuses
        .iter()
        .filter(|(s, _)| *s == 200)
        .map(|(_, n)| n)
        .sum();
    let refused: usize = statuses
        .iter()
        .filter(|(s, _)| *s == 503)
        .map(|(_, n)| n)
        .sum();
    assert_eq!(opened + refused, 2_000, "{statuses:?}");
    assert_eq!(opened, 1_000 - 16, "the total fills up: {statuses:?}");
    assert!(
        after.saturating_sub(before) <= 1_000 * 128 * 1024,
        "a full server holds {:.1} MB",
        mb(after - before)
    );
    let resp = reqwest::Client::new()
        .post(server.url("/mcp"))
        .bearer_auth(&tokens[500])
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(initialize("one more", None))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 503);
    assert!(resp.headers().contains_key("retry-after"));
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["code"], "mcp_session_limit", "{body}");
    // A user at their own limit still gets one: their least recently used makes room.
    still_answers(&server, Some(&warm)).await;
    server.stop();
}

/// At `RUST_LOG=trace`, a session's whole life (initialize, the initialized notification, a tool
/// call, a resumed stream, its end) logs plenty and never its id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_session_id_is_logged_even_at_trace() {
    let server = Server::start(&[("RUST_LOG", "trace")]);
    let client = reqwest::Client::new();
    let mut ids = Vec::new();
    for _ in 0..5 {
        let resp = client
            .post(server.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(initialize("traced", None))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let id = resp.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        resp.bytes().await.unwrap();
        let post = |body: Value| {
            client
                .post(server.url("/mcp"))
                .header("accept", "application/json, text/event-stream")
                .header("mcp-session-id", &id)
                .json(&body)
                .send()
        };
        let done = post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await
            .unwrap();
        assert_eq!(done.status(), 202);
        let call = post(json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "calculate", "arguments": {"expression": "6*7"}}
        }))
        .await
        .unwrap();
        assert!(call.text().await.unwrap().contains("42"));
        let resumed = client
            .get(server.url("/mcp"))
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &id)
            .header("last-event-id", "0/0")
            .timeout(Duration::from_millis(300))
            .send()
            .await
            .unwrap();
        assert_eq!(resumed.status(), 200);
        drop(resumed);
        let end = client
            .delete(server.url("/mcp"))
            .header("mcp-session-id", &id)
            .send()
            .await
            .unwrap();
        assert_eq!(end.status(), 204);
        ids.push(id);
    }
    let log = server.stop();
    assert!(log.lines().count() > 100, "trace logs plenty");
    for id in &ids {
        assert!(!log.contains(id.as_str()), "session id {id} on stderr");
    }
}
