//! Security regressions (docs/SECURITY.md), each an attack against the real server over HTTP:
//! inputs that crashed or stalled it, memory and executions reachable by another identity,
//! schema bombs, browsers turned against it, slow clients, and the smaller gaps. Tests that store
//! executions or memory run on SQLite and PostgreSQL.
//!
//! One test measures the process's resident memory: it runs alone (it takes [`ALONE`] for
//! writing, every other test takes it for reading), so other tests' servers do not count.

use std::time::{Duration, Instant};

use agentry_agents::Agent;
use agentry_auth::{TokenOptions, create_token};
use agentry_server::AuthSettings;
use agentry_tests::{Backend, TestServer, assert_failure, new_id, ok_data};
use reqwest::StatusCode;
use reqwest::header::CONTENT_TYPE;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

agentry_tests::backend_tests!(
    memory_belongs_to_a_verified_identity,
    without_a_provider_the_client_user_id_keys_memory,
    strict_mode_guards_executions_and_logs,
    strict_mode_covers_the_list_reattach_and_cancel,
    a_host_policy_replaces_the_ownership_rule,
    without_strict_mode_the_spec_defaults_stay_with_a_warning,
    a_non_finite_number_fails_the_execution,
);

/// Taken for reading by every test, for writing by the one that measures resident memory.
static ALONE: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// An HS256 secret of 32 bytes or more.
const SECRET: &str = "security-tests-secret-0123456789abcdef";

/// How long a raw client waits for the server to answer or to close the connection.
const RAW_TIMEOUT: Duration = Duration::from_secs(15);

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn jwt(strict: bool) -> AuthSettings {
    AuthSettings {
        jwt_secret: Some(SECRET.into()),
        strict,
        ..Default::default()
    }
}

fn token_for(payload: Value) -> String {
    create_token(
        &payload,
        SECRET.as_bytes(),
        &TokenOptions {
            expires_in: Some(Duration::from_secs(600)),
            ..Default::default()
        },
    )
    .expect("a token")
}

fn token(sub: &str, roles: &[&str]) -> String {
    token_for(
        json!({"sub": sub, "name": sub, "email": format!("{sub}@example.com"),
                     "roles": roles}),
    )
}

/// Sends a request (with a bearer token and a JSON body when given) and parses the JSON answer.
async fn call(
    s: &TestServer,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> (StatusCode, Value) {
    let mut req = s.client.request(method, s.url(path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req.json(b);
    }
    let r = s.send(req).await;
    (r.status, r.body)
}

async fn get(s: &TestServer, path: &str, token: Option<&str>) -> (StatusCode, Value) {
    call(s, reqwest::Method::GET, path, token, None).await
}

async fn post(
    s: &TestServer,
    path: &str,
    token: Option<&str>,
    body: &Value,
) -> (StatusCode, Value) {
    call(s, reqwest::Method::POST, path, token, Some(body)).await
}

/// Asserts the failure envelope with `status` and exactly `message`.
fn assert_error(status: StatusCode, body: &Value, expected: u16, message: &str, what: &str) {
    let mut shown = body.to_string();
    if shown.len() > 500 {
        let cut = (0..=500)
            .rev()
            .find(|&i| shown.is_char_boundary(i))
            .unwrap_or(0);
        shown.truncate(cut);
        shown.push_str("...");
    }
    assert_eq!(status.as_u16(), expected, "{what}: {shown}");
    let got = assert_failure(status, body, expected);
    assert_eq!(got, message, "{what}");
}

fn prompt_tokens(data: &Value) -> u64 {
    data["usage"]["promptTokens"]
        .as_u64()
        .unwrap_or_else(|| panic!("no promptTokens: {data}"))
}

/// `POST /agents/{agent}/text`, expecting a success; returns `data`.
async fn text_as(s: &TestServer, agent: &str, token: Option<&str>, body: &Value) -> Value {
    let (status, resp) = post(s, &format!("/agents/{agent}/text"), token, body).await;
    ok_data(status, resp)
}

/// A timestamp a second before now, for `/api/logs?since=`.
fn a_second_ago() -> String {
    (chrono::Utc::now() - chrono::TimeDelta::seconds(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The log records of `/api/logs{query}` (as `token`).
async fn logs(s: &TestServer, query: &str, token: Option<&str>) -> Vec<Value> {
    let (status, body) = get(s, &format!("/api/logs{query}"), token).await;
    let data = ok_data(status, body);
    data.as_array()
        .unwrap_or_else(|| panic!("logs are not an array: {data}"))
        .clone()
}

fn host_port(s: &TestServer) -> &str {
    s.base_url
        .strip_prefix("http://")
        .expect("the test server speaks plain HTTP")
}

fn header(resp: &reqwest::Response, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Starts an `expense-approval` of 1500 (it suspends for a manager) as `token`; returns its id.
async fn start_expense(s: &TestServer, token: Option<&str>) -> String {
    let id = new_id();
    let (status, body) = post(
        s,
        "/workflows/expense-approval/execute",
        token,
        &json!({"input": {"employeeId": "e-1", "amount": 1500, "category": "travel"},
                "options": {"executionId": id}}),
    )
    .await;
    let data = ok_data(status, body);
    assert_eq!(data["status"], "suspended", "{data}");
    assert_eq!(data["executionId"], id.as_str());
    id
}

fn approval() -> Value {
    json!({"resumeData": {"approved": true, "managerId": "m-7"}})
}

// WebSockets ------------------------------------------------------------------------------------

fn ws_url(s: &TestServer, path: &str) -> String {
    format!("ws://{}{path}", host_port(s))
}

/// Opens a WebSocket (with a bearer token and an `Origin` when given); panics unless the server
/// upgrades.
async fn ws_open(s: &TestServer, path: &str, token: Option<&str>, origin: Option<&str>) -> Socket {
    let mut req = ws_url(s, path)
        .into_client_request()
        .expect("a WebSocket request");
    if let Some(t) = token {
        req.headers_mut().insert(
            "authorization",
            format!("Bearer {t}").parse().expect("a header value"),
        );
    }
    if let Some(o) = origin {
        req.headers_mut()
            .insert("origin", o.parse().expect("a header value"));
    }
    match tokio_tungstenite::connect_async(req).await {
        Ok((socket, resp)) => {
            assert_eq!(resp.status().as_u16(), 101, "{path}");
            socket
        }
        Err(tungstenite::Error::Http(resp)) => {
            let body = resp
                .body()
                .as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default()
                .into_owned();
            panic!(
                "{path} (token {}, origin {origin:?}) was not upgraded: {} {body}",
                token.is_some(),
                resp.status()
            )
        }
        Err(e) => panic!("WebSocket handshake of {path} failed: {e}"),
    }
}

/// Asks for a WebSocket upgrade of `path` expecting a refusal; returns the HTTP status and the
/// JSON envelope (the server must answer before any upgrade).
async fn ws_refused(
    s: &TestServer,
    path: &str,
    token: Option<&str>,
    origin: Option<&str>,
) -> (StatusCode, Value) {
    let mut req = s
        .client
        .get(s.url(path))
        .header("connection", "Upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==");
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(o) = origin {
        req = req.header("origin", o);
    }
    let resp = req.send().await.expect("the handshake request");
    let status = resp.status();
    assert_ne!(status.as_u16(), 101, "{path} was upgraded");
    let ct = header(&resp, "content-type").unwrap_or_default();
    let text = resp.text().await.expect("the refusal's body");
    assert!(
        ct.starts_with("application/json"),
        "{path}: {status} with Content-Type {ct:?}: {text}"
    );
    let body: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{path}: {status} with non-JSON ({e}): {text}"));
    (status, body)
}

/// The next JSON text message of a socket (pings skipped).
async fn ws_next_json(socket: &mut Socket) -> Value {
    use futures::StreamExt;
    loop {
        let next = tokio::time::timeout(Duration::from_secs(20), socket.next())
            .await
            .expect("no WebSocket message in time");
        match next {
            Some(Ok(tungstenite::Message::Text(t))) => {
                return serde_json::from_str(t.as_str())
                    .unwrap_or_else(|e| panic!("WebSocket text is not JSON ({e}): {t}"));
            }
            Some(Ok(tungstenite::Message::Ping(_) | tungstenite::Message::Pong(_))) => continue,
            other => panic!("expected a JSON message, got {other:?}"),
        }
    }
}

// Raw HTTP --------------------------------------------------------------------------------------

/// A response read off a raw connection.
#[derive(Debug)]
struct RawResponse {
    status: u16,
    /// Lower-case names.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl RawResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

fn parse_raw(buf: &[u8]) -> RawResponse {
    let end = head_end(buf).unwrap_or_else(|| {
        panic!(
            "no complete response head in {:?}",
            String::from_utf8_lossy(buf)
        )
    });
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    RawResponse {
        status,
        headers,
        body: buf[end..].to_vec(),
    }
}

/// Whether `buf` holds a whole response with a `Content-Length` body.
fn complete_response(buf: &[u8]) -> bool {
    let Some(end) = head_end(buf) else {
        return false;
    };
    parse_raw(&buf[..end])
        .header("content-length")
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|len| buf.len() >= end + len)
}

/// Reads until the peer closes the connection (or fails it), or until `done` says enough has
/// arrived; panics when neither happens within [`RAW_TIMEOUT`].
async fn read_until(stream: &mut TcpStream, done: impl Fn(&[u8]) -> bool) -> Vec<u8> {
    let read = async {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return buf,
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    if done(&buf) {
                        return buf;
                    }
                }
            }
        }
    };
    tokio::time::timeout(RAW_TIMEOUT, read)
        .await
        .expect("the server neither answered nor closed the connection within 15 s")
}

/// Sends `request` on a new connection (it should say `Connection: close`) and reads everything
/// until the server closes.
async fn raw_exchange(s: &TestServer, request: &str) -> RawResponse {
    let mut stream = TcpStream::connect(host_port(s)).await.expect("connect");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("write the request");
    let buf = read_until(&mut stream, |_| false).await;
    parse_raw(&buf)
}

/// The resident memory of this process (the server runs in it), in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in {status}"))
}

// ---------------------------------------------------------------------------------------------
// 1. The calculator crash
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_calculator_crash_is_refused_and_the_server_lives_on() {
    let _shared = ALONE.read().await;
    // No provider: /text and /stream are public too.
    let s = TestServer::start(Backend::Sqlite).await;
    // One character over the message limit (100,000), on every route, in memory and durable.
    let huge = format!("calculate {}", "-".repeat(100_000 - 9));
    let ui_input = json!([{"role": "user", "parts": [{"type": "text", "text": huge}]}]);
    let durable = json!({"durable": true});
    for (path, input, options) in [
        ("/agents/assistant/chat", &ui_input, None),
        ("/agents/assistant/text", &ui_input, None),
        ("/agents/assistant/stream", &ui_input, None),
        ("/agents/assistant/text", &json!(huge), None),
        (
            "/agents/assistant/text",
            &json!([{"role": "user", "content": huge}]),
            None,
        ),
        ("/agents/assistant/chat", &ui_input, Some(&durable)),
        ("/agents/assistant/text", &json!(huge), Some(&durable)),
        ("/agents/assistant/stream", &json!(huge), Some(&durable)),
    ] {
        let mut body = json!({"input": input});
        if let Some(options) = options {
            body["options"] = options.clone();
        }
        let (status, body) = s.post_json(path, &body).await;
        let msg = assert_failure(status, &body, 400);
        assert_eq!(body["code"], "invalid_request", "{path}: {body}");
        assert_eq!(
            msg,
            "Invalid request: input message 1 has 100001 characters, over the limit of 100000 characters",
            "{path} {options:?}"
        );
    }
    let (status, body) = s
        .post_json(
            "/agents/assistant/object",
            &json!({"input": huge, "schema": {"type": "object"}}),
        )
        .await;
    let msg = assert_failure(status, &body, 400);
    assert!(msg.contains("over the limit of 100000 characters"), "{msg}");
    // No run was started for the refused durable messages.
    let runs = s.get_data("/agents/assistant/runs").await;
    assert_eq!(runs["runs"], json!([]), "{runs}");
    // The server lives on, tools included.
    let (status, body) = s.get_json("/agents").await;
    assert_eq!(ok_data(status, body).as_array().map(Vec::len), Some(4));
    let data = text_as(&s, "assistant", None, &json!({"input": "calculate 2 + 3"})).await;
    assert_eq!(data["toolResults"][0]["result"]["expression"], "2 + 3");
    assert_eq!(
        data["toolResults"][0]["result"]["result"].as_f64(),
        Some(5.0),
        "{data}"
    );

    let tool_error = |data: &Value| -> String {
        let r = &data["toolResults"][0];
        assert_eq!(r["isError"], true, "{data}");
        r["result"]["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no error text: {data}"))
            .to_owned()
    };
    // Deep nesting within the message limit (and within the expression's 1000 characters):
    // refused by the depth limit, not by the stack.
    let nested = |levels: usize| format!("calculate {}1{}", "(".repeat(levels), ")".repeat(levels));
    let data = text_as(&s, "assistant", None, &json!({"input": nested(450)})).await;
    let err = tool_error(&data);
    assert!(err.contains("nests deeper than 64 levels"), "{err}");
    // The brief's 900 levels: 1801 characters, over both limits; either one refuses it.
    let data = text_as(&s, "assistant", None, &json!({"input": nested(900)})).await;
    let err = tool_error(&data);
    assert!(
        err.contains("nests deeper than 64 levels") || err.contains("longer than 1000 characters"),
        "{err}"
    );
    // 64 levels still evaluate.
    let data = text_as(&s, "assistant", None, &json!({"input": nested(64)})).await;
    assert_ne!(data["toolResults"][0]["isError"], true, "{data}");
    assert_eq!(
        data["toolResults"][0]["result"]["result"].as_f64(),
        Some(1.0),
        "{data}"
    );
    // A long flat expression.
    let long = format!("calculate {}1", "1+".repeat(700));
    let data = text_as(&s, "assistant", None, &json!({"input": long})).await;
    let err = tool_error(&data);
    assert!(err.contains("longer than 1000 characters"), "{err}");
    // Still alive.
    let (status, _) = s.get_json("/agents").await;
    assert_eq!(status, StatusCode::OK);
    s.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 2. Memory belongs to a verified identity
// ---------------------------------------------------------------------------------------------

async fn memory_belongs_to_a_verified_identity(backend: Backend) {
    let _shared = ALONE.read().await;
    // The supervisor: conversation memory, and no semantic recall (the assistant's would bring
    // a user's other conversations into a fresh one).
    let settings = AuthSettings {
        public_routes: Some("POST /agents/supervisor/text".into()),
        ..jwt(false)
    };
    let s = TestServer::start_with(backend, settings, |h| h).await;
    let u1 = token("u1", &[]);
    let conv = new_id();
    let body = |conversation: &str| {
        json!({"input": "remember the blue door",
               "options": {"userId": "u1", "conversationId": conversation}})
    };

    // u1, verified, in conversation c: the second call carries the first exchange (4 + 6 words).
    let first = prompt_tokens(&text_as(&s, "supervisor", Some(&u1), &body(&conv)).await);
    let second = prompt_tokens(&text_as(&s, "supervisor", Some(&u1), &body(&conv)).await);
    assert_eq!(second, first + 10);
    let fresh = prompt_tokens(&text_as(&s, "supervisor", Some(&u1), &body(&new_id())).await);
    assert_eq!(fresh, first, "a fresh conversation has no history");

    // An anonymous caller claiming u1 in the same conversation reads nothing: its prompt is that
    // of an anonymous call in a fresh conversation (whose instructions do not name a user).
    let anonymous_fresh = prompt_tokens(&text_as(&s, "supervisor", None, &body(&new_id())).await);
    let anonymous = prompt_tokens(&text_as(&s, "supervisor", None, &body(&conv)).await);
    assert_eq!(
        anonymous, anonymous_fresh,
        "the anonymous call read u1's history"
    );
    // ... and wrote nothing: u1 sees exactly its own two exchanges.
    let third = prompt_tokens(&text_as(&s, "supervisor", Some(&u1), &body(&conv)).await);
    assert_eq!(third, first + 20, "u1's history changed");

    // Without a token there is no memory at all, whatever userId and conversationId say.
    let conv2 = new_id();
    let anon_body = json!({"input": "remember the blue door",
                           "options": {"userId": "anon", "conversationId": conv2}});
    let a1 = prompt_tokens(&text_as(&s, "supervisor", None, &anon_body).await);
    let a2 = prompt_tokens(&text_as(&s, "supervisor", None, &anon_body).await);
    assert_eq!(a1, anonymous_fresh);
    assert_eq!(a2, a1, "anonymous calls accumulated memory");

    // A token without `sub` identifies nobody.
    let no_sub = token_for(json!({"name": "Nobody", "roles": ["admin"]}));
    for (path, body) in [
        (
            "/workflows/word-count/execute",
            json!({"input": {"text": "a b"}}),
        ),
        ("/agents/writer/text", json!({"input": "hi"})),
    ] {
        let (status, resp) = post(&s, path, Some(&no_sub), &body).await;
        assert_error(status, &resp, 401, "Invalid token: missing sub", path);
    }

    // contextLimit is 0 to 100.
    let (status, resp) = post(
        &s,
        "/agents/supervisor/text",
        Some(&u1),
        &json!({"input": "hi", "options": {"conversationId": conv, "contextLimit": 101}}),
    )
    .await;
    let msg = assert_failure(status, &resp, 400);
    assert!(msg.contains("options.contextLimit"), "{msg}");
    let data = text_as(
        &s,
        "supervisor",
        Some(&u1),
        &json!({"input": "remember the blue door",
                "options": {"conversationId": conv, "contextLimit": 100}}),
    )
    .await;
    assert_eq!(
        prompt_tokens(&data),
        first + 30,
        "contextLimit 100 loads all"
    );
    s.stop().await;
}

async fn without_a_provider_the_client_user_id_keys_memory(backend: Backend) {
    let _shared = ALONE.read().await;
    let s = TestServer::start(backend).await;
    let conv = new_id();
    let body = |user: &str| {
        json!({"input": "remember the blue door",
               "options": {"userId": user, "conversationId": conv}})
    };
    let first = prompt_tokens(&text_as(&s, "assistant", None, &body("u1")).await);
    let second = prompt_tokens(&text_as(&s, "assistant", None, &body("u1")).await);
    assert_eq!(second, first + 10, "no memory without a provider");
    let other = prompt_tokens(&text_as(&s, "assistant", None, &body("u2")).await);
    assert_eq!(other, first, "another userId read u1's memory");
    s.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 3. Schema bombs
// ---------------------------------------------------------------------------------------------

fn schema_bombs() -> Vec<(Value, &'static str)> {
    vec![
        (
            json!({"type": "object",
                   "properties": {"xs": {"type": "array", "minItems": 1_000_000,
                                         "items": {"type": "string"}}},
                   "required": ["xs"]}),
            "minItems 1000000 is over the limit of 1000",
        ),
        (
            json!({"type": "object",
                   "properties": {"s": {"type": "string", "minLength": 600_000}},
                   "required": ["s"]}),
            "minLength 600000 is over the limit of 10000",
        ),
        (
            json!({"type": "object",
                   "properties": {"m": {"type": "array", "minItems": 1000,
                                        "items": {"type": "array", "minItems": 1000,
                                                  "items": {"type": "string"}}}},
                   "required": ["m"]}),
            "over the limit of 1048576 bytes",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_bombs_are_refused_fast_and_memory_stays_flat() {
    // Alone: no other test's server allocates while resident memory is measured.
    let _alone = ALONE.write().await;
    let s = TestServer::start(Backend::Sqlite).await;
    let bombs = schema_bombs();
    let endpoints = ["/agents/writer/object", "/agents/writer/stream-object"];
    let fire = |schema: &Value| json!({"input": "make it", "schema": schema});
    // Once each, with the exact message (stream-object answers before any stream).
    for path in endpoints {
        for (schema, expected) in &bombs {
            let (status, body) = s.post_json(path, &fire(schema)).await;
            let msg = assert_failure(status, &body, 400);
            assert!(msg.contains(expected), "{path}: {msg}");
        }
    }
    // A satisfiable schema still works after them.
    let (status, body) = s
        .post_json(
            "/agents/writer/object",
            &json!({"input": "make it", "schema": {"type": "object",
                "properties": {"xs": {"type": "array", "minItems": 3, "items": {"type": "string"}}},
                "required": ["xs"]}}),
        )
        .await;
    let data = ok_data(status, body);
    assert!(
        data["xs"].as_array().is_some_and(|a| a.len() >= 3),
        "{data}"
    );

    let before = rss_kib();
    let started = Instant::now();
    for i in 0..30 {
        let (schema, expected) = &bombs[i % bombs.len()];
        let path = endpoints[(i / bombs.len()) % endpoints.len()];
        let (status, body) = s.post_json(path, &fire(schema)).await;
        let msg = assert_failure(status, &body, 400);
        assert!(msg.contains(expected), "{path}: {msg}");
    }
    let after = rss_kib();
    assert!(
        after.saturating_sub(before) < 50 * 1024,
        "resident memory grew by {} KiB over 30 refused schemas ({before} -> {after} KiB)",
        after.saturating_sub(before)
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "30 refusals took {:?}",
        started.elapsed()
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsatisfiable_schema_is_422_and_not_an_error_log() {
    let _shared = ALONE.read().await;
    let s = TestServer::start(Backend::Sqlite).await;
    let since = a_second_ago();
    let schema = json!({"type": "object",
                        "properties": {"code": {"type": "string", "pattern": "^[0-9]+$"}},
                        "required": ["code"]});
    let (status, body) = s
        .post_json(
            "/agents/writer/object",
            &json!({"input": "give me a code", "schema": schema}),
        )
        .await;
    let msg = assert_failure(status, &body, 422);
    assert!(
        msg.starts_with("The model's object does not match the schema"),
        "{msg}"
    );
    // The request was logged (the capture sees it)...
    let all = logs(&s, &format!("?since={since}&limit=1000"), None).await;
    assert!(
        all.iter().any(|r| r["fields"]["path"] == "/agents/writer/object"
            && r["fields"]["status"] == 422),
        "no request record of the 422: {all:?}"
    );
    // ... but not as an error.
    let errors = logs(
        &s,
        &format!("?level=error&agentId=writer&since={since}&limit=1000"),
        None,
    )
    .await;
    assert!(errors.is_empty(), "{errors:?}");
    let errors = logs(&s, &format!("?level=error&since={since}&limit=1000"), None).await;
    assert!(
        !errors
            .iter()
            .any(|r| r.to_string().contains("does not match the schema")),
        "{errors:?}"
    );
    s.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 4. Strict mode
// ---------------------------------------------------------------------------------------------

async fn strict_mode_guards_executions_and_logs(backend: Backend) {
    let _shared = ALONE.read().await;
    let s = TestServer::start_with(backend, jwt(true), |h| h).await;
    let (u1, u2, boss) = (
        token("u1", &[]),
        token("u2", &[]),
        token("boss", &["admin"]),
    );
    let id = start_expense(&s, Some(&u1)).await;
    let base = format!("/workflows/expense-approval/executions/{id}");

    // Without a token: 401 everywhere, before any upgrade for the sockets.
    let required = "Authentication required";
    let (st, b) = get(&s, &format!("{base}/state"), None).await;
    assert_error(st, &b, 401, required, "state");
    let (st, b) = post(
        &s,
        &format!("{base}/suspend"),
        None,
        &json!({"reason": "x"}),
    )
    .await;
    assert_error(st, &b, 401, required, "suspend");
    let (st, b) = post(&s, &format!("{base}/resume"), None, &approval()).await;
    assert_error(st, &b, 401, required, "resume");
    let (st, b) = post(&s, "/agents/assistant/chat", None, &json!({"input": "hi"})).await;
    assert_error(st, &b, 401, required, "chat");
    let (st, b) = get(&s, "/api/logs", None).await;
    assert_error(st, &b, 401, required, "/api/logs");
    let (st, b) = ws_refused(&s, "/ws/logs", None, None).await;
    assert_error(st, &b, 401, required, "/ws/logs");
    let (st, b) = ws_refused(&s, &format!("/ws/executions/{id}"), None, None).await;
    assert_error(st, &b, 401, required, "/ws/executions");

    // The owner and an admin read the state; another user does not.
    let (st, b) = get(&s, &format!("{base}/state"), Some(&u1)).await;
    let state = ok_data(st, b);
    assert_eq!(state["status"], "suspended", "{state}");
    assert_eq!(state["executionId"], id.as_str());
    let (st, b) = get(&s, &format!("{base}/state"), Some(&boss)).await;
    assert_eq!(ok_data(st, b)["executionId"], id.as_str());
    let foreign = "Forbidden: execution belongs to another user";
    let (st, b) = get(&s, &format!("{base}/state"), Some(&u2)).await;
    assert_error(st, &b, 403, foreign, "state by u2");
    // Nor rejoin it by re-posting its id and input (the idempotent start is the owner's).
    let (st, b) = post(
        &s,
        "/workflows/expense-approval/execute",
        Some(&u2),
        &json!({"input": {"employeeId": "e-1", "amount": 1500, "category": "travel"},
                "options": {"executionId": id}}),
    )
    .await;
    assert_failure(st, &b, 409);
    // Nor resume it; the owner can.
    let (st, b) = post(&s, &format!("{base}/resume"), Some(&u2), &approval()).await;
    assert_error(st, &b, 403, foreign, "resume by u2");
    let (st, b) = post(&s, &format!("{base}/resume"), Some(&u1), &approval()).await;
    let done = ok_data(st, b);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["approvedBy"], "m-7", "{done}");
    // An unknown execution is still a 404.
    let (st, b) = get(
        &s,
        &format!("/workflows/expense-approval/executions/{}/state", new_id()),
        Some(&boss),
    )
    .await;
    assert_failure(st, &b, 404);

    // A running countdown of u1: u2 can neither suspend it nor follow it.
    let cd = new_id();
    let run = {
        let client = s.client.clone();
        let url = s.url("/workflows/countdown/execute");
        let u1 = u1.clone();
        let body = json!({"input": {"stepDelayMs": 2000}, "options": {"executionId": cd}});
        tokio::spawn(async move {
            let resp = client
                .post(url)
                .bearer_auth(u1)
                .json(&body)
                .send()
                .await
                .expect("execute countdown");
            let status = resp.status();
            (status, resp.json::<Value>().await.expect("JSON"))
        })
    };
    let cd_base = format!("/workflows/countdown/executions/{cd}");
    let waited = Instant::now();
    loop {
        let (st, b) = get(&s, &format!("{cd_base}/state"), Some(&u1)).await;
        if st == StatusCode::OK {
            break;
        }
        assert_failure(st, &b, 404);
        assert!(
            waited.elapsed() < Duration::from_secs(15),
            "the countdown never appeared"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (st, b) = post(
        &s,
        &format!("{cd_base}/suspend"),
        Some(&u2),
        &json!({"reason": "mine now"}),
    )
    .await;
    assert_error(st, &b, 403, foreign, "suspend by u2");
    let (st, b) = ws_refused(&s, &format!("/ws/executions/{cd}"), Some(&u2), None).await;
    assert_error(st, &b, 403, foreign, "/ws/executions by u2");
    let mut socket = ws_open(&s, &format!("/ws/executions/{cd}"), Some(&u1), None).await;
    let first = ws_next_json(&mut socket).await;
    assert_eq!(first["type"], "execution-state", "{first}");
    assert_eq!(first["executionId"], cd.as_str(), "{first}");
    drop(socket);
    // The owner suspends it (which ends the run early).
    let (st, b) = post(
        &s,
        &format!("{cd_base}/suspend"),
        Some(&u1),
        &json!({"reason": "pause"}),
    )
    .await;
    assert_eq!(ok_data(st, b)["status"], "suspended");
    let (st, b) = run.await.expect("the countdown task");
    assert_eq!(ok_data(st, b)["status"], "suspended");

    // The logs need the admin role.
    let admin_only = "Forbidden: the logs need the admin role";
    let (st, b) = ws_refused(&s, "/ws/logs", Some(&u1), None).await;
    assert_error(st, &b, 403, admin_only, "/ws/logs by u1");
    let socket = ws_open(&s, "/ws/logs", Some(&boss), None).await;
    drop(socket);
    let records = logs(&s, &format!("?executionId={id}&limit=1000"), Some(&boss)).await;
    assert!(
        records.iter().any(|r| r["executionId"] == id.as_str()),
        "{records:?}"
    );
    let (st, b) = get(&s, "/api/logs", Some(&u1)).await;
    assert_error(st, &b, 403, admin_only, "/api/logs by u1");
    s.stop().await;
}

async fn a_host_policy_replaces_the_ownership_rule(backend: Backend) {
    let _shared = ALONE.read().await;
    let s = TestServer::start_with_app(backend, jwt(true), |h| {
        h.execution_policy(|user, _execution| user.has_role("auditor"))
    })
    .await;
    let (u1, u3) = (token("u1", &[]), token("u3", &["auditor"]));
    let id = start_expense(&s, Some(&u1)).await;
    let path = format!("/workflows/expense-approval/executions/{id}/state");
    let (st, b) = get(&s, &path, Some(&u3)).await;
    let state = ok_data(st, b);
    assert_eq!(state["executionId"], id.as_str());
    assert_eq!(state["status"], "suspended");
    let (st, b) = get(&s, &path, Some(&u1)).await;
    assert_error(
        st,
        &b,
        403,
        "Forbidden: execution belongs to another user",
        "the owner under the host's policy",
    );
    s.stop().await;
}

async fn without_strict_mode_the_spec_defaults_stay_with_a_warning(backend: Backend) {
    let _shared = ALONE.read().await;
    let since = a_second_ago();
    let s = TestServer::start_with(backend, jwt(false), |h| h).await;
    let warnings = logs(&s, &format!("?level=warn&since={since}&limit=1000"), None).await;
    assert!(
        warnings.iter().any(|r| r["message"]
            .as_str()
            .is_some_and(|m| m.contains("AGENTRY_AUTH_STRICT"))),
        "no warning about strict mode: {warnings:?}"
    );
    // Execute needs a token; state, suspend and resume do not (spec section 5).
    let (st, b) = post(
        &s,
        "/workflows/expense-approval/execute",
        None,
        &json!({"input": {"employeeId": "e", "amount": 1500, "category": "travel"}}),
    )
    .await;
    assert_error(st, &b, 401, "Authentication required", "execute");
    let id = start_expense(&s, Some(&token("u1", &[]))).await;
    let base = format!("/workflows/expense-approval/executions/{id}");
    let (st, b) = get(&s, &format!("{base}/state"), None).await;
    assert_eq!(ok_data(st, b)["status"], "suspended");
    let (st, b) = post(
        &s,
        &format!("{base}/suspend"),
        None,
        &json!({"reason": "x"}),
    )
    .await;
    assert_failure(st, &b, 400); // already suspended: reached, not refused
    let (st, b) = post(&s, &format!("{base}/resume"), None, &approval()).await;
    assert_eq!(ok_data(st, b)["status"], "completed");
    s.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 5. Browsers cannot be turned against it
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_requests_need_json_and_a_trusted_origin() {
    let _shared = ALONE.read().await;
    let s = TestServer::start(Backend::Sqlite).await;
    let unsupported = "Unsupported media type: Content-Type must be application/json";
    let unknown_suspend = format!("/workflows/countdown/executions/{}/suspend", new_id());
    let word = r#"{"input": {"text": "a b c"}}"#;

    // Bodies that are not JSON: 415, before any handler.
    for (path, content_type, body) in [
        (
            unknown_suspend.as_str(),
            Some("text/plain"),
            r#"{"reason":"x"}"#,
        ),
        ("/workflows/word-count/execute", Some("text/plain"), word),
        (
            "/workflows/word-count/execute",
            Some("application/x-www-form-urlencoded"),
            "input=1",
        ),
        ("/workflows/word-count/execute", None, word),
        (
            "/agents/writer/text",
            Some("text/plain"),
            r#"{"input": "hi"}"#,
        ),
    ] {
        let mut req = s.client.post(s.url(path)).body(body.to_owned());
        if let Some(ct) = content_type {
            req = req.header(CONTENT_TYPE, ct);
        }
        let r = s.send(req).await;
        assert_error(
            r.status,
            &r.body,
            415,
            unsupported,
            &format!("{path} with {content_type:?}"),
        );
    }
    // A suspend with no body and no Content-Type is fine (here: an unknown execution).
    let r = s.send(s.client.post(s.url(&unknown_suspend))).await;
    assert_failure(r.status, &r.body, 404);
    // JSON still works.
    let (st, b) = s
        .post_raw("/workflows/word-count/execute", "application/json", word)
        .await;
    assert_eq!(ok_data(st, b)["result"]["words"], 3);

    // Another site's origin cannot change anything.
    let evil = "https://evil.example";
    let refused = format!("Forbidden: origin {evil} is not allowed");
    for (path, body) in [
        (
            "/workflows/word-count/execute",
            json!({"input": {"text": "a b"}}),
        ),
        ("/agents/writer/text", json!({"input": "hi"})),
        ("/agents/assistant/chat", json!({"input": "hi"})),
        (unknown_suspend.as_str(), json!({"reason": "x"})),
    ] {
        let r = s
            .send(
                s.client
                    .post(s.url(path))
                    .header("origin", evil)
                    .json(&body),
            )
            .await;
        assert_error(r.status, &r.body, 403, &refused, path);
    }
    // The server's own origin is accepted; no CORS header either way.
    let own = s.base_url.clone();
    let resp = s
        .client
        .post(s.url("/workflows/word-count/execute"))
        .header("origin", &own)
        .json(&json!({"input": {"text": "x y"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(header(&resp, "access-control-allow-origin"), None);
    let st = resp.status();
    assert_eq!(
        ok_data(st, resp.json().await.unwrap())["result"]["words"],
        2
    );
    let data = s
        .send(
            s.client
                .post(s.url("/agents/writer/text"))
                .header("origin", &own)
                .json(&json!({"input": "hi"})),
        )
        .await;
    assert_eq!(ok_data(data.status, data.body)["text"], "You said: hi");

    // WebSockets: another site is refused before the upgrade; no Origin or its own upgrade.
    let (st, b) = ws_refused(&s, "/ws/logs", None, Some(evil)).await;
    assert_error(st, &b, 403, &refused, "/ws/logs from evil");
    drop(ws_open(&s, "/ws/logs", None, Some(&own)).await);
    drop(ws_open(&s, "/ws/logs", None, None).await);

    // CORS is off: nothing carries Access-Control-Allow-Origin.
    for resp in [
        s.client
            .get(s.url("/agents"))
            .header("origin", evil)
            .send()
            .await
            .unwrap(),
        s.client
            .get(s.url("/workflows"))
            .header("origin", &own)
            .send()
            .await
            .unwrap(),
        s.client
            .request(
                reqwest::Method::OPTIONS,
                s.url("/workflows/word-count/execute"),
            )
            .header("origin", evil)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "content-type, authorization",
            )
            .send()
            .await
            .unwrap(),
    ] {
        assert_eq!(
            header(&resp, "access-control-allow-origin"),
            None,
            "{} {:?}",
            resp.status(),
            resp.headers()
        );
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_origins_get_cors_and_websockets() {
    let _shared = ALONE.read().await;
    let app = "https://app.example";
    let s = TestServer::start_configured(
        Backend::Sqlite,
        |settings| {
            settings.http.allowed_origins =
                agentry_http::AllowedOrigins::parse_list(app).expect("an origin list");
        },
        |h| h,
    )
    .await;
    // Its WebSocket and its POSTs pass.
    drop(ws_open(&s, "/ws/logs", None, Some(app)).await);
    let resp = s
        .client
        .post(s.url("/workflows/word-count/execute"))
        .header("origin", app)
        .json(&json!({"input": {"text": "one two"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        header(&resp, "access-control-allow-origin").as_deref(),
        Some(app)
    );
    let st = resp.status();
    assert_eq!(
        ok_data(st, resp.json().await.unwrap())["result"]["words"],
        2
    );

    let preflight = |origin: &'static str| {
        s.client
            .request(
                reqwest::Method::OPTIONS,
                s.url("/workflows/word-count/execute"),
            )
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "content-type, authorization",
            )
            .send()
    };
    let resp = preflight(app).await.unwrap();
    assert!(
        resp.status().is_success(),
        "{} {:?}",
        resp.status(),
        resp.headers()
    );
    assert_eq!(
        header(&resp, "access-control-allow-origin").as_deref(),
        Some(app),
        "{:?}",
        resp.headers()
    );
    // Another origin gets nothing, and still cannot POST or open a socket.
    let resp = preflight("https://other.example").await.unwrap();
    assert_eq!(
        header(&resp, "access-control-allow-origin"),
        None,
        "{:?}",
        resp.headers()
    );
    let r = s
        .send(
            s.client
                .post(s.url("/workflows/word-count/execute"))
                .header("origin", "https://other.example")
                .json(&json!({"input": {"text": "a"}})),
        )
        .await;
    assert_error(
        r.status,
        &r.body,
        403,
        "Forbidden: origin https://other.example is not allowed",
        "other origin",
    );
    let (st, b) = ws_refused(&s, "/ws/logs", None, Some("https://other.example")).await;
    assert_failure(st, &b, 403);
    s.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 6. Time-outs
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_body_gets_408_while_others_are_served() {
    let _shared = ALONE.read().await;
    let s = TestServer::start_configured(
        Backend::Sqlite,
        |settings| settings.http.body_timeout = Duration::from_secs(1),
        |h| h,
    )
    .await;
    let mut slow = TcpStream::connect(host_port(&s)).await.expect("connect");
    let head = format!(
        "POST /workflows/word-count/execute HTTP/1.1\r\nHost: {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n",
        host_port(&s)
    );
    let partial = br#"{"input": {"te"#;
    assert_eq!(partial.len(), 14);
    slow.write_all(head.as_bytes())
        .await
        .expect("write the head");
    slow.write_all(partial).await.expect("write 14 bytes");
    let sent = Instant::now();

    // Meanwhile another client is served.
    let (st, b) = s.get_json("/agents").await;
    assert_eq!(ok_data(st, b).as_array().map(Vec::len), Some(4));
    let data = s
        .post_data(
            "/workflows/word-count/execute",
            &json!({"input": {"text": "still served"}}),
        )
        .await;
    assert_eq!(data["result"]["words"], 2);

    let buf = read_until(&mut slow, complete_response).await;
    assert!(sent.elapsed() < RAW_TIMEOUT, "{:?}", sent.elapsed());
    assert!(!buf.is_empty(), "the slow body got no answer");
    {
        let resp = parse_raw(&buf);
        assert_eq!(resp.status, 408, "{resp:?}");
        assert!(
            resp.header("content-type")
                .is_some_and(|ct| ct.starts_with("application/json")),
            "{resp:?}"
        );
        let body: Value = serde_json::from_slice(&resp.body)
            .unwrap_or_else(|e| panic!("408 with a non-JSON body ({e}): {resp:?}"));
        let msg = assert_failure(StatusCode::REQUEST_TIMEOUT, &body, 408);
        assert!(msg.contains("body was not received"), "{msg}");
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_head_is_cut_off() {
    let _shared = ALONE.read().await;
    let s = TestServer::start_configured(
        Backend::Sqlite,
        |settings| settings.http.header_timeout = Duration::from_secs(1),
        |h| h,
    )
    .await;
    let mut slow = TcpStream::connect(host_port(&s)).await.expect("connect");
    let half = format!(
        "GET /agents HTTP/1.1\r\nHost: {}\r\nX-Slow: ",
        host_port(&s)
    );
    slow.write_all(half.as_bytes())
        .await
        .expect("write half a head");
    let sent = Instant::now();
    // Another client is served meanwhile.
    let (st, _) = s.get_json("/workflows").await;
    assert_eq!(st, StatusCode::OK);
    let buf = read_until(&mut slow, complete_response).await;
    assert!(sent.elapsed() < RAW_TIMEOUT, "{:?}", sent.elapsed());
    assert!(!buf.is_empty(), "the slow head got no answer");
    {
        let resp = parse_raw(&buf);
        assert_eq!(resp.status, 408, "{resp:?}");
    }
    s.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 7. Smaller gaps
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_answers_like_get_without_a_body() {
    let _shared = ALONE.read().await;
    let s = TestServer::start(Backend::Sqlite).await;
    for path in ["/agents", "/workflows/expense-approval"] {
        let resp = raw_exchange(
            &s,
            &format!(
                "HEAD {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
                host_port(&s)
            ),
        )
        .await;
        assert_eq!(resp.status, 200, "HEAD {path}: {resp:?}");
        assert!(
            resp.header("content-type")
                .is_some_and(|ct| ct.starts_with("application/json")),
            "HEAD {path}: {resp:?}"
        );
        assert!(resp.body.is_empty(), "HEAD {path} sent a body: {resp:?}");
    }
    let resp = raw_exchange(
        &s,
        &format!(
            "HEAD /agents/assistant/text HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            host_port(&s)
        ),
    )
    .await;
    assert_eq!(resp.status, 405, "{resp:?}");
    assert!(resp.body.is_empty(), "{resp:?}");
    // reqwest agrees.
    let resp = s.client.head(s.url("/agents")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(header(&resp, "content-type").is_some_and(|ct| ct.starts_with("application/json")));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encoded_paths_are_not_public_and_ids_are_plain_words() {
    let _shared = ALONE.read().await;
    let s = TestServer::start_with(Backend::Sqlite, jwt(false), |h| h).await;
    let (st, b) = post(&s, "/agents/x%3F/text", None, &json!({"input": "hi"})).await;
    assert_error(st, &b, 401, "Authentication required", "/agents/x%3F/text");
    for bad in ["x?", "a/b", "a b", ""] {
        assert!(
            s.agents.register(Agent::new(bad, "X")).is_err(),
            "agent id {bad:?} was accepted"
        );
    }
    s.agents
        .register(Agent::new("ok-id_1.2", "Ok"))
        .expect("a plain id");
    let (st, b) = get(&s, "/agents/ok-id_1.2", None).await;
    assert_eq!(ok_data(st, b)["id"], "ok-id_1.2");
    let (st, b) = get(&s, "/agents", None).await;
    let ids: Vec<Value> = ok_data(st, b)
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].clone())
        .collect();
    assert!(!ids.contains(&json!("x?")), "{ids:?}");
    s.stop().await;
}

async fn a_non_finite_number_fails_the_execution(backend: Backend) {
    let _shared = ALONE.read().await;
    let s = TestServer::start(backend).await;
    let resp = s
        .client
        .post(s.url("/workflows/order-fulfillment/execute"))
        .json(&json!({"input": {"orderId": "o-inf",
                                "items": [{"sku": "A", "quantity": 1e300, "unitPrice": 1e300}]}}))
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let execution_id = header(&resp, "x-execution-id");
    let body: Value = resp.json().await.expect("a JSON body");
    assert_error(
        status,
        &body,
        500,
        "Failed to execute workflow",
        "order of 1e300 x 1e300",
    );
    let execution_id = execution_id.expect("the 500 carries X-Execution-Id");
    let (st, b) = get(
        &s,
        &format!("/workflows/order-fulfillment/executions/{execution_id}/state"),
        None,
    )
    .await;
    let state = ok_data(st, b);
    assert_eq!(state["status"], "error", "{state}");
    assert!(
        state["error"]["message"]
            .as_str()
            .is_some_and(|e| e.contains("not a finite number")),
        "{state}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_jwt_secret_is_warned_about() {
    let _shared = ALONE.read().await;
    let since = a_second_ago();
    let s = TestServer::start_with(
        Backend::Sqlite,
        AuthSettings {
            jwt_secret: Some("short".into()),
            ..Default::default()
        },
        |h| h,
    )
    .await;
    let warnings = logs(&s, &format!("?level=warn&since={since}&limit=1000"), None).await;
    assert!(
        warnings.iter().any(|r| r["message"]
            .as_str()
            .is_some_and(|m| m.contains("shorter than 32 bytes"))),
        "no warning about the short secret: {warnings:?}"
    );
    s.stop().await;
}

/// The routes of durable execution II follow the ownership rule in strict mode: the list shows
/// a user only their own executions (an admin all of them); re-attach and cancel are the
/// owner's (or an admin's).
async fn strict_mode_covers_the_list_reattach_and_cancel(backend: Backend) {
    let _shared = ALONE.read().await;
    let s = TestServer::start_with(backend, jwt(true), |h| h).await;
    let (u1, u2, boss) = (
        token("u1", &[]),
        token("u2", &[]),
        token("boss", &["admin"]),
    );
    let mine = [
        start_expense(&s, Some(&u1)).await,
        start_expense(&s, Some(&u1)).await,
    ];
    let theirs = start_expense(&s, Some(&u2)).await;
    let ids = |data: &Value| -> Vec<String> {
        data["executions"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e["executionId"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let list = "/workflows/expense-approval/executions";
    let (st, b) = get(&s, list, None).await;
    assert_error(st, &b, 401, "Authentication required", "list");
    let (st, b) = get(&s, list, Some(&u1)).await;
    let listed = ids(&ok_data(st, b));
    assert_eq!(
        listed,
        vec![mine[1].clone(), mine[0].clone()],
        "newest first, u1's only"
    );
    let (st, b) = get(&s, list, Some(&u2)).await;
    assert_eq!(ids(&ok_data(st, b)), vec![theirs.clone()]);
    let (st, b) = get(&s, list, Some(&boss)).await;
    assert_eq!(ids(&ok_data(st, b)).len(), 3);

    let foreign = "Forbidden: execution belongs to another user";
    let attach = format!("/workflows/expense-approval/executions/{}/stream", mine[0]);
    let (st, b) = get(&s, &attach, Some(&u2)).await;
    assert_error(st, &b, 403, foreign, "re-attach by u2");
    let resp = s
        .client
        .get(s.url(&attach))
        .bearer_auth(&u1)
        .send()
        .await
        .expect("re-attach");
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.expect("events");
    assert!(text.contains("workflow-suspended"), "{text}");

    let cancel = format!("/workflows/expense-approval/executions/{}/cancel", mine[0]);
    let (st, b) = post(&s, &cancel, None, &json!({})).await;
    assert_error(st, &b, 401, "Authentication required", "cancel");
    let (st, b) = post(&s, &cancel, Some(&u2), &json!({})).await;
    assert_error(st, &b, 403, foreign, "cancel by u2");
    let (st, b) = post(&s, &cancel, Some(&u1), &json!({"reason": "mine"})).await;
    assert_eq!(ok_data(st, b)["status"], "cancelled");

    // The routes across workflows follow the same rule: the list and the counts are the
    // caller's own (an admin's are everyone's), an execution by id is its owner's.
    let all = "/executions?status=suspended";
    let (st, b) = get(&s, all, None).await;
    assert_error(
        st,
        &b,
        401,
        "Authentication required",
        "list across workflows",
    );
    let (st, b) = get(&s, all, Some(&u1)).await;
    assert_eq!(
        ids(&ok_data(st, b)),
        vec![mine[1].clone()],
        "u1's suspended one"
    );
    let (st, b) = get(&s, all, Some(&boss)).await;
    assert_eq!(ids(&ok_data(st, b)), vec![theirs.clone(), mine[1].clone()]);
    let suspended = |data: Value| -> u64 {
        let wf = data["workflows"]
            .as_array()
            .and_then(|w| w.iter().find(|w| w["workflowId"] == "expense-approval"))
            .cloned()
            .expect("expense-approval counted");
        wf["counts"]["suspended"].as_u64().expect("a count")
    };
    let (st, b) = get(&s, "/api/execution-counts", None).await;
    assert_error(st, &b, 401, "Authentication required", "counts");
    let (st, b) = get(&s, "/api/execution-counts", Some(&u2)).await;
    assert_eq!(suspended(ok_data(st, b)), 1, "u2 counts their own");
    let (st, b) = get(&s, "/api/execution-counts", Some(&boss)).await;
    assert_eq!(suspended(ok_data(st, b)), 2, "an admin counts all");
    let by_id = format!("/executions/{}", mine[1]);
    let (st, b) = get(&s, &by_id, Some(&u2)).await;
    assert_error(st, &b, 403, foreign, "by id, u2");
    let (st, b) = get(&s, &by_id, Some(&u1)).await;
    assert_eq!(ok_data(st, b)["workflowId"], "expense-approval");
    let (st, b) = get(&s, &by_id, Some(&boss)).await;
    assert_eq!(ok_data(st, b)["executionId"], mine[1].as_str());
    s.stop().await;
}
