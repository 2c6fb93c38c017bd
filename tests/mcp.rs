//! MCP with the official Python SDK (pip `mcp`, installed into `.venv-tools` by
//! `scripts/install-test-deps.sh`): `tests/mcp/test_mcp_server.py` drives `/mcp` of real
//! servers started here, one without authentication and one with the JWT provider on; and an
//! agent uses the tools of `tests/mcp/weather_server.py`, a real MCP server written with the
//! same SDK, over Streamable HTTP and over stdio.

use std::process::Command;
use std::time::Duration;

use agentry_agents::{Agent, FnTool};
use agentry_auth::{TokenOptions, create_token};
use agentry_engine::id::digest;
use agentry_engine::workflow::{StepContext, Workflow, step};
use agentry_mcp::{McpServer, McpToolset, SessionLimits};
use agentry_server::AuthSettings;
use agentry_tests::{Backend, TestServer, pytest, repo, tools_python};
use serde_json::{Value, json};

const SECRET: &str = "mcp-tests-secret-of-at-least-32-bytes";

/// initialize, tools with their schemas, `calculate`, `ask_assistant`, `run_word-count`, a
/// suspending workflow, bad arguments as tool errors in a session that lives on, and with JWT
/// on: refused without a token, working (as the token's user) with one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_sdk_uses_agentry_over_mcp() {
    let open = TestServer::start(Backend::Sqlite).await;
    let auth = AuthSettings {
        jwt_secret: Some(SECRET.into()),
        ..Default::default()
    };
    let guarded = TestServer::start_with(Backend::Sqlite, auth, |h| h).await;
    let token = create_token(
        &json!({"sub": "mcp-user", "name": "MCP"}),
        SECRET.as_bytes(),
        &TokenOptions {
            expires_in: Some(Duration::from_secs(3600)),
            ..Default::default()
        },
    )
    .expect("a token");
    pytest(
        "tests/mcp/test_mcp_server.py",
        "mcp, pytest",
        vec![
            ("AGENTRY_MCP_URL", open.url("/mcp")),
            ("AGENTRY_MCP_JWT_URL", guarded.url("/mcp")),
            ("AGENTRY_MCP_TOKEN", token),
        ],
    )
    .await;
    open.stop().await;
    guarded.stop().await;
}

/// The weather station of `tests/mcp/weather_server.py`, killed when dropped.
struct Station(std::process::Child);

impl Drop for Station {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the station on a free port and waits until it accepts connections.
fn start_station(python: &std::path::Path) -> (Station, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(python)
        .args(["tests/mcp/weather_server.py", &port.to_string()])
        .current_dir(repo())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starting the MCP server");
    let station = Station(child);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the MCP server never listened"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (station, format!("http://127.0.0.1:{port}/mcp"))
}

async fn text(s: &TestServer, agent: &str, input: &str) -> Value {
    let resp = s
        .client
        .post(s.url(&format!("/agents/{agent}/text")))
        .json(&json!({"input": input}))
        .send()
        .await
        .expect("text");
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.expect("JSON");
    body["data"].clone()
}

/// An agent with the tools of a real MCP server: its detail lists them with their real names
/// and schemas, `/text` uses one, and once the server is gone the call is a clear tool error
/// while the agent still answers. The same server over stdio lends the same tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_uses_the_tools_of_a_real_mcp_server() {
    let python = tokio::task::spawn_blocking(|| tools_python("mcp"))
        .await
        .unwrap();
    let (station, url) = {
        let python = python.clone();
        tokio::task::spawn_blocking(move || start_station(&python))
            .await
            .unwrap()
    };
    let set = McpToolset::connect(McpServer::Http {
        url: url.clone(),
        bearer: None,
    })
    .await
    .expect("connecting to the MCP server");
    let stdio = McpToolset::connect(McpServer::Stdio {
        program: python.display().to_string(),
        args: vec![
            repo()
                .join("tests/mcp/weather_server.py")
                .display()
                .to_string(),
            "stdio".into(),
        ],
    })
    .await
    .expect("starting the MCP server over stdio");
    let s = TestServer::start_with_app(Backend::Sqlite, AuthSettings::default(), move |h| {
        let station = set.tools().into_iter().fold(
            Agent::new("station", "Station").description("Reads the weather station."),
            |a, t| a.tool(t),
        );
        let local = stdio
            .tools()
            .into_iter()
            .fold(Agent::new("local-station", "Local station"), |a, t| {
                a.tool(t)
            });
        h.agent(station).agent(local)
    })
    .await;

    let detail = s.get_data("/agents/station").await;
    assert_eq!(detail["tools"], json!(["get_weather"]), "{detail}");
    let tool = &detail["toolDefinitions"][0];
    assert_eq!(tool["name"], "get_weather");
    assert!(
        tool["description"]
            .as_str()
            .unwrap()
            .contains("station measures"),
        "{tool}"
    );
    assert_eq!(
        tool["parameters"]["properties"]["city"]["type"], "string",
        "{tool}"
    );
    assert_eq!(tool["parameters"]["required"], json!(["city"]), "{tool}");

    let answer = text(&s, "station", "What is the weather in London?").await;
    assert_eq!(
        answer["toolCalls"][0]["toolName"], "get_weather",
        "{answer}"
    );
    assert_eq!(
        answer["toolResults"][0]["result"]["station"], "mcp",
        "{answer}"
    );
    let said = answer["text"].as_str().unwrap();
    assert!(said.contains('9') && said.contains("foggy"), "{said}");

    let local = text(&s, "local-station", "What is the weather in Oslo?").await;
    assert_eq!(local["toolResults"][0]["result"]["city"], "Oslo", "{local}");
    assert_eq!(
        local["toolResults"][0]["result"]["station"], "mcp",
        "{local}"
    );

    drop(station);
    let answer = text(&s, "station", "What is the weather in Paris?").await;
    let failed = &answer["toolResults"][0];
    assert_eq!(failed["isError"], true, "{answer}");
    let error = failed["result"]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("MCP server") && error.contains("unavailable"),
        "a clear tool error: {answer}"
    );
    assert!(
        answer["text"].is_string(),
        "the agent still answers: {answer}"
    );
    s.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Sessions that belong to someone and cost little (hardening II): raw Streamable HTTP.

const ACCEPT_BOTH: &str = "application/json, text/event-stream";

fn token_of(sub: &str) -> String {
    create_token(
        &json!({"sub": sub}),
        SECRET.as_bytes(),
        &TokenOptions {
            expires_in: Some(Duration::from_secs(3600)),
            ..Default::default()
        },
    )
    .expect("a token")
}

fn initialize_body() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}
        }
    })
}

/// A request to `/mcp` as an MCP client sends it: `token`, `session` and a JSON body.
fn mcp_request(
    s: &TestServer,
    method: reqwest::Method,
    token: Option<&str>,
    session: Option<&str>,
    body: Option<&Value>,
) -> reqwest::RequestBuilder {
    let accept = if method == reqwest::Method::GET {
        "text/event-stream"
    } else {
        ACCEPT_BOTH
    };
    let mut req = s
        .client
        .request(method, s.url("/mcp"))
        .header("accept", accept);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(id) = session {
        req = req.header("mcp-session-id", id);
    }
    if let Some(b) = body {
        req = req.json(b);
    }
    req
}

/// The JSON-RPC messages of an SSE (or JSON) answer.
async fn messages(resp: reqwest::Response) -> Vec<Value> {
    let json = resp
        .headers()
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap().starts_with("application/json"));
    let text = resp.text().await.expect("the body");
    if json {
        return vec![serde_json::from_str(&text).expect("JSON")];
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| serde_json::from_str(d).expect("a JSON-RPC message"))
        .collect()
}

/// Opens a session for `token` (initialize, then the initialized notification): its id.
async fn open_session(s: &TestServer, token: Option<&str>) -> String {
    let resp = mcp_request(
        s,
        reqwest::Method::POST,
        token,
        None,
        Some(&initialize_body()),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);
    let id = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let init = messages(resp).await;
    assert_eq!(
        init[0]["result"]["serverInfo"]["name"], "agentry",
        "{init:?}"
    );
    let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let resp = mcp_request(s, reqwest::Method::POST, token, Some(&id), Some(&done))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    id
}

/// `tools/list` in session `id`: its status (200 with the tools, or the refusal's).
async fn list_tools(s: &TestServer, token: Option<&str>, id: &str) -> reqwest::StatusCode {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"});
    let resp = mcp_request(s, reqwest::Method::POST, token, Some(id), Some(&body))
        .send()
        .await
        .unwrap();
    let status = resp.status();
    if status == 200 {
        let m = messages(resp).await;
        assert!(m[0]["result"]["tools"].is_array(), "{m:?}");
    }
    status
}

/// The refusal of an unknown (or someone else's) session: 404 `mcp_session_not_found`.
async fn assert_session_not_found(resp: reqwest::Response, what: &str) -> Value {
    assert_eq!(resp.status(), 404, "{what}");
    let body: Value = resp.json().await.expect("an envelope");
    assert_eq!(body["code"], "mcp_session_not_found", "{what}: {body}");
    assert_eq!(body["success"], false, "{what}: {body}");
    body
}

/// Strict mode: bob, with alice's session id, gets exactly what an unknown id gets (404) on
/// GET with `Last-Event-ID`, POST and DELETE, while alice's `run_countdown` completes for her
/// in that session; without a token, `/mcp` is the 401 envelope with `WWW-Authenticate`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_user_cannot_take_anothers_mcp_session() {
    let auth = AuthSettings {
        jwt_secret: Some(SECRET.into()),
        strict: true,
        ..Default::default()
    };
    let s = TestServer::start_with(Backend::Sqlite, auth, |h| h).await;
    let (alice, bob) = (token_of("alice"), token_of("bob"));
    let id = open_session(&s, Some(&alice)).await;

    // Alice's countdown: five steps of 300 ms, answered on this request's stream.
    let call = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "run_countdown", "arguments": {"stepDelayMs": 300}}
    });
    let running = mcp_request(
        &s,
        reqwest::Method::POST,
        Some(&alice),
        Some(&id),
        Some(&call),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(running.status(), 200);
    let alices_call = tokio::spawn(messages(running));

    let unknown = uuid::Uuid::new_v4().to_string();
    let mut answers = Vec::new();
    for session in [id.as_str(), unknown.as_str()] {
        let resume = mcp_request(&s, reqwest::Method::GET, Some(&bob), Some(session), None)
            .header("last-event-id", "0/0")
            .send()
            .await
            .unwrap();
        let get = assert_session_not_found(resume, "bob's GET with Last-Event-ID").await;
        let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
        let post = mcp_request(
            &s,
            reqwest::Method::POST,
            Some(&bob),
            Some(session),
            Some(&list),
        )
        .send()
        .await
        .unwrap();
        let post = assert_session_not_found(post, "bob's POST").await;
        let delete = mcp_request(&s, reqwest::Method::DELETE, Some(&bob), Some(session), None)
            .send()
            .await
            .unwrap();
        let delete = assert_session_not_found(delete, "bob's DELETE").await;
        answers.push((get, post, delete));
    }
    assert_eq!(
        answers[0], answers[1],
        "alice's session and an unknown one look the same to bob"
    );

    let outcome = tokio::time::timeout(Duration::from_secs(20), alices_call)
        .await
        .expect("alice's call answers")
        .unwrap();
    let result = outcome
        .iter()
        .find(|m| m["id"] == 1)
        .unwrap_or_else(|| panic!("no answer to alice's call: {outcome:?}"));
    assert_eq!(
        result["result"]["structuredContent"]["status"], "completed",
        "{result}"
    );
    assert_eq!(
        result["result"]["structuredContent"]["result"],
        json!({"remaining": 0}),
        "{result}"
    );
    assert_eq!(list_tools(&s, Some(&alice), &id).await, 200, "still hers");

    // No token: the 401 envelope, whatever the session.
    let anonymous = mcp_request(&s, reqwest::Method::POST, None, Some(&id), Some(&call))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    assert_eq!(anonymous.headers()["www-authenticate"], "Bearer");
    let body: Value = anonymous.json().await.unwrap();
    assert_eq!(body["code"], "authentication_required", "{body}");

    // Alice ends her session; then it is unknown to her too.
    let end = mcp_request(&s, reqwest::Method::DELETE, Some(&alice), Some(&id), None)
        .send()
        .await
        .unwrap();
    assert_eq!(end.status(), 204);
    assert_eq!(list_tools(&s, Some(&alice), &id).await, 404);
    s.stop().await;
}

/// Two sessions per user, three in all: a user's third ends their least recently used; a new
/// user beyond the total is refused with 503 `mcp_session_limit` and `Retry-After`, while a user
/// at their own limit still opens one (ending their least recently used); a session ended by its
/// user makes room; an idle session ends and makes room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_sessions_are_capped_per_user_and_in_all() {
    let limits = SessionLimits {
        per_user: 2,
        total: 3,
        idle: Duration::from_secs(60),
    };
    let s = TestServer::start_configured(
        Backend::Sqlite,
        move |settings| {
            settings.auth = AuthSettings {
                jwt_secret: Some(SECRET.into()),
                ..Default::default()
            };
            settings.mcp_sessions = limits;
        },
        |h| h,
    )
    .await;
    let (alice, bob, carol) = (token_of("alice"), token_of("bob"), token_of("carol"));
    let a1 = open_session(&s, Some(&alice)).await;
    let a2 = open_session(&s, Some(&alice)).await;
    assert_eq!(list_tools(&s, Some(&alice), &a1).await, 200);
    let a3 = open_session(&s, Some(&alice)).await;
    assert_eq!(
        list_tools(&s, Some(&alice), &a2).await,
        404,
        "a2 was her least recently used"
    );
    assert_eq!(list_tools(&s, Some(&alice), &a1).await, 200);
    assert_eq!(list_tools(&s, Some(&alice), &a3).await, 200);

    let b1 = open_session(&s, Some(&bob)).await;
    let refused = mcp_request(
        &s,
        reqwest::Method::POST,
        Some(&carol),
        None,
        Some(&initialize_body()),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(refused.status(), 503);
    let retry: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .expect("Retry-After in seconds");
    assert!((1..=60).contains(&retry), "Retry-After: {retry}");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["code"], "mcp_session_limit", "{body}");

    // Alice holds as many as she may: her fourth ends her least recently used (a1).
    let a4 = open_session(&s, Some(&alice)).await;
    assert_eq!(list_tools(&s, Some(&alice), &a1).await, 404);
    assert_eq!(list_tools(&s, Some(&alice), &a3).await, 200);
    assert_eq!(list_tools(&s, Some(&alice), &a4).await, 200);

    // Bob ends his: carol gets a place.
    let end = mcp_request(&s, reqwest::Method::DELETE, Some(&bob), Some(&b1), None)
        .send()
        .await
        .unwrap();
    assert_eq!(end.status(), 204);
    let c1 = open_session(&s, Some(&carol)).await;
    assert_eq!(list_tools(&s, Some(&carol), &c1).await, 200);
    s.stop().await;

    // Idle sessions end: with room for one session, an idle one gives its place up.
    let s = TestServer::start_configured(
        Backend::Sqlite,
        |settings| {
            settings.mcp_sessions = SessionLimits {
                per_user: 1,
                total: 1,
                idle: Duration::from_secs(1),
            };
        },
        |h| h,
    )
    .await;
    let first = open_session(&s, None).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(list_tools(&s, None, &first).await, 404, "ended when idle");
    let second = open_session(&s, None).await;
    assert_eq!(list_tools(&s, None, &second).await, 200);
    s.stop().await;
}

/// A body that is not one JSON-RPC message gets the JSON-RPC error with HTTP 400, never 415:
/// malformed, empty, `null`, a batch, a 100,000-deep array. An `initialize` over its limits is
/// 413; a body that says it is not JSON is still 415.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_rpc_bodies_get_json_rpc_errors() {
    let s = TestServer::start(Backend::Sqlite).await;
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let batch =
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]"#;
    let cases: Vec<(&str, Vec<u8>, i64)> = vec![
        (
            "malformed",
            br#"{"jsonrpc": "2.0", "id": 1,"#.to_vec(),
            -32700,
        ),
        ("empty", Vec::new(), -32700),
        ("not UTF-8", vec![b'"', 0xff, 0xfe, b'"'], -32700),
        ("null", b"null".to_vec(), -32600),
        ("a number", b"42".to_vec(), -32600),
        ("a batch", batch.as_bytes().to_vec(), -32600),
        ("an empty batch", b"[]".to_vec(), -32600),
        ("100,000-deep array", deep.into_bytes(), -32700),
        (
            "an object that is no message",
            br#"{"hello": "world"}"#.to_vec(),
            -32600,
        ),
        (
            "a bad id",
            br#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#.to_vec(),
            -32600,
        ),
    ];
    for (what, body, code) in cases {
        for content_type in ["application/json", "application/json; charset=utf-8"] {
            let resp = s
                .client
                .post(s.url("/mcp"))
                .header("accept", ACCEPT_BOTH)
                .header("content-type", content_type)
                .body(body.clone())
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 400, "{what}");
            assert!(
                resp.headers()["content-type"]
                    .to_str()
                    .unwrap()
                    .starts_with("application/json"),
                "{what}"
            );
            let answer: Value = resp.json().await.unwrap();
            assert_eq!(answer["jsonrpc"], "2.0", "{what}: {answer}");
            assert_eq!(answer["id"], Value::Null, "{what}: {answer}");
            assert_eq!(answer["error"]["code"], code, "{what}: {answer}");
            assert!(answer["error"]["message"].is_string(), "{what}: {answer}");
        }
    }

    // An initialize is at most 4 KiB, with at most 64 JSON values in its params.
    let limit = agentry_mcp::endpoint::INITIALIZE_BODY_LIMIT;
    let mut big = initialize_body();
    let base = serde_json::to_vec(&big).unwrap().len();
    big["params"]["clientInfo"]["name"] = json!("x".repeat(limit - base + 3));
    assert_eq!(serde_json::to_vec(&big).unwrap().len(), limit);
    let ok = mcp_request(&s, reqwest::Method::POST, None, None, Some(&big))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200, "an initialize of exactly the limit");
    big["params"]["clientInfo"]["name"] = json!("x".repeat(limit - base + 4));
    let over = mcp_request(&s, reqwest::Method::POST, None, None, Some(&big))
        .send()
        .await
        .unwrap();
    assert_eq!(over.status(), 413);
    let body: Value = over.json().await.unwrap();
    assert_eq!(body["code"], "payload_too_large", "{body}");
    let mut many = initialize_body();
    many["params"]["capabilities"]["experimental"] = json!({"x": {"list": vec![0; 60]}});
    let over = mcp_request(&s, reqwest::Method::POST, None, None, Some(&many))
        .send()
        .await
        .unwrap();
    assert_eq!(over.status(), 413);
    let body: Value = over.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("JSON values"),
        "{body}"
    );

    // Not JSON by its own account: still 415.
    let resp = s
        .client
        .post(s.url("/mcp"))
        .header("accept", ACCEPT_BOTH)
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 415);
    s.stop().await;
}

// ---------------------------------------------------------------------------------------------
// One application layer (issue 24): an MCP tool's failure is the HTTP answer's row.

/// `tools/call` of `name` with `args` in session `id`, for `token`: the call's result.
async fn call_tool(s: &TestServer, token: &str, id: &str, name: &str, args: Value) -> Value {
    let call = json!({
        "jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": name, "arguments": args}
    });
    let resp = mcp_request(s, reqwest::Method::POST, Some(token), Some(id), Some(&call))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{name}");
    let m = messages(resp).await;
    m.into_iter()
        .find(|m| m["id"] == 9)
        .unwrap_or_else(|| panic!("no answer to {name}"))["result"]
        .clone()
}

/// The code of an HTTP failure, with `token`.
async fn http_code(
    s: &TestServer,
    method: reqwest::Method,
    token: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, String) {
    let mut req = s.client.request(method, s.url(path)).bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap();
    (status, body["code"].as_str().unwrap_or_default().to_owned())
}

/// The same fault through HTTP and through an MCP tool has the same code (the error table's
/// row): an input the workflow's schema refuses, an unknown execution, and in strict mode
/// another user's execution (read and resumed). A failure is a tool error whose text is the
/// message and whose structured content is `{error, code}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_tool_failures_carry_the_codes_of_the_http_answers() {
    let auth = AuthSettings {
        jwt_secret: Some(SECRET.into()),
        strict: true,
        ..Default::default()
    };
    let s = TestServer::start_with(Backend::Sqlite, auth, |h| h).await;
    let (alice, bob) = (token_of("alice"), token_of("bob"));
    let alices = open_session(&s, Some(&alice)).await;
    let bobs = open_session(&s, Some(&bob)).await;
    let post = reqwest::Method::POST;
    let get = reqwest::Method::GET;

    // Alice's expense waits for a manager.
    let expense = json!({"employeeId": "e1", "amount": 5000, "category": "travel"});
    let (status, _) = http_code(
        &s,
        post.clone(),
        &alice,
        "/workflows/expense-approval/execute",
        Some(json!({"input": expense, "options": {"executionId": "mcp-exp-1"}})),
    )
    .await;
    assert_eq!(status, 200);

    let faults = [
        (
            http_code(
                &s,
                post.clone(),
                &alice,
                "/workflows/word-count/execute",
                Some(json!({"input": {"text": 42}})),
            )
            .await,
            call_tool(&s, &alice, &alices, "run_word-count", json!({"text": 42})).await,
            "invalid_input",
        ),
        (
            http_code(
                &s,
                get.clone(),
                &alice,
                "/executions/no-such-execution",
                None,
            )
            .await,
            call_tool(
                &s,
                &alice,
                &alices,
                "get_execution",
                json!({"executionId": "no-such-execution"}),
            )
            .await,
            "execution_not_found",
        ),
        (
            http_code(&s, get.clone(), &bob, "/executions/mcp-exp-1", None).await,
            call_tool(
                &s,
                &bob,
                &bobs,
                "get_execution",
                json!({"executionId": "mcp-exp-1"}),
            )
            .await,
            "forbidden",
        ),
        (
            http_code(
                &s,
                post.clone(),
                &bob,
                "/workflows/expense-approval/executions/mcp-exp-1/resume",
                Some(json!({"resumeData": {"approved": true, "managerId": "m1"}})),
            )
            .await,
            call_tool(
                &s,
                &bob,
                &bobs,
                "resume_execution",
                json!({"workflowId": "expense-approval", "executionId": "mcp-exp-1",
                       "resumeData": {"approved": true, "managerId": "m1"}}),
            )
            .await,
            "forbidden",
        ),
    ];
    for ((status, http), tool, expected) in faults {
        assert_eq!(http, expected, "the HTTP answer ({status})");
        assert_eq!(tool["isError"], true, "{tool}");
        assert_eq!(tool["structuredContent"]["code"], expected, "{tool}");
        assert_eq!(
            tool["content"][0]["text"], tool["structuredContent"]["error"],
            "{tool}"
        );
    }

    // Alice may: she reads her execution and resumes it over MCP.
    let state = call_tool(
        &s,
        &alice,
        &alices,
        "get_execution",
        json!({"executionId": "mcp-exp-1"}),
    )
    .await;
    assert_eq!(state["structuredContent"]["status"], "suspended", "{state}");
    let resumed = call_tool(
        &s,
        &alice,
        &alices,
        "resume_execution",
        json!({"workflowId": "expense-approval", "executionId": "mcp-exp-1",
               "resumeData": {"approved": true, "managerId": "m1"}}),
    )
    .await;
    assert_eq!(resumed["isError"], false, "{resumed}");
    assert_eq!(
        resumed["structuredContent"]["status"], "completed",
        "{resumed}"
    );
    assert_eq!(resumed["structuredContent"]["executionId"], "mcp-exp-1");
    s.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Durable agent runs: an MCP client meets a tool approval.

/// `ask_operator` of a refund over 100 answers with the run waiting for approval, its pending
/// request and the route that answers it (no MCP elicitation: the approval is a person's, through
/// the route, the console or a chat); a direct call of `issue_refund` over 100 is refused
/// (`approval_required`), one under it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_meets_a_tool_approval_with_its_route() {
    let auth = AuthSettings {
        jwt_secret: Some(SECRET.into()),
        ..Default::default()
    };
    let s = TestServer::start_with(Backend::Sqlite, auth, |h| h).await;
    let alice = token_of("alice");
    let session = open_session(&s, Some(&alice)).await;
    let asked = call_tool(
        &s,
        &alice,
        &session,
        "ask_operator",
        json!({"input": "refund order o-1 250 damaged box"}),
    )
    .await;
    assert_eq!(asked["isError"], false, "{asked}");
    let run = &asked["structuredContent"];
    assert_eq!(run["status"], "suspended", "{asked}");
    let run_id = run["runId"].as_str().expect("a run id");
    let route = &run["approvalRoutes"][0];
    assert_eq!(route["method"], "POST");
    assert_eq!(
        route["path"],
        format!("/agents/operator/runs/{run_id}/approvals/ap-2-0")
    );
    let text = asked["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("waits for a person's approval"), "{text}");
    // The route answers it; the run completes.
    let resp = s
        .client
        .post(s.url(route["path"].as_str().unwrap()))
        .bearer_auth(&alice)
        .json(&json!({"approved": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);

    let refused = call_tool(
        &s,
        &alice,
        &session,
        "issue_refund",
        json!({"orderId": "o-1", "amount": 250, "reason": "direct"}),
    )
    .await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(refused["structuredContent"]["code"], "approval_required");
    let small = call_tool(
        &s,
        &alice,
        &session,
        "issue_refund",
        json!({"orderId": "o-2", "amount": 40, "reason": "late"}),
    )
    .await;
    assert_eq!(small["isError"], false, "{small}");
    assert_eq!(small["structuredContent"]["refunded"], 40, "{small}");
    s.stop().await;
}

/// The message limit (100,000 characters) is the application's, and MCP states it: an
/// `ask_<agent>` over it is a tool error with `invalid_request` (the HTTP answer's row), for an
/// agent answering in memory and for one whose runs are durable (the operator's); the tools'
/// input schemas state the same `maxLength`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_refuses_a_question_over_the_message_limit() {
    let auth = AuthSettings {
        jwt_secret: Some(SECRET.into()),
        ..Default::default()
    };
    let s = TestServer::start_with(Backend::Sqlite, auth, |h| h).await;
    let alice = token_of("alice");
    let session = open_session(&s, Some(&alice)).await;
    let over = "x".repeat(100_001);
    for tool in ["ask_assistant", "ask_operator"] {
        let refused = call_tool(&s, &alice, &session, tool, json!({"input": over})).await;
        assert_eq!(refused["isError"], true, "{tool}: {refused}");
        assert_eq!(
            refused["structuredContent"]["code"], "invalid_request",
            "{tool}: {refused}"
        );
        assert_eq!(
            refused["content"][0]["text"],
            "Invalid request: input message 1 has 100001 characters, over the limit of 100000 \
             characters",
            "{tool}"
        );
    }
    // No run was started for the operator.
    let runs: Value = s
        .client
        .get(s.url("/agents/operator/runs"))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(runs["data"]["runs"], json!([]), "{runs}");
    let body = json!({"jsonrpc": "2.0", "id": 12, "method": "tools/list"});
    let resp = mcp_request(
        &s,
        reqwest::Method::POST,
        Some(&alice),
        Some(&session),
        Some(&body),
    )
    .send()
    .await
    .unwrap();
    let listed = messages(resp).await;
    let tools = listed[0]["result"]["tools"].as_array().expect("the tools");
    let ask = tools
        .iter()
        .find(|t| t["name"] == "ask_assistant")
        .expect("ask_assistant");
    assert_eq!(
        ask["inputSchema"]["properties"]["input"]["maxLength"],
        100_000
    );
    s.stop().await;
}

/// One JSON-RPC request in session `id` (no token): its answer.
async fn rpc(s: &TestServer, id: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 11, "method": method, "params": params});
    let resp = mcp_request(s, reqwest::Method::POST, None, Some(id), Some(&body))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{method}");
    messages(resp)
        .await
        .into_iter()
        .find(|m| m["id"] == 11)
        .unwrap_or_else(|| panic!("no answer to {method}"))
}

/// Whether `name` is a tool name of the MCP specification: 1 to 128 of `A-Z a-z 0-9 _ - .`.
fn is_mcp_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// `tools/list` is the application's catalogue: every agent's `ask_`, the host's workflows'
/// `run_` and no agent's internal run workflow (`agent:<id>`, which no one may start), each
/// name a valid MCP tool name; a name outside the rule (a tool named with a space and a `/`, a
/// workflow id of 128 characters) gets the README's stable name, and calling it works. An
/// unknown tool (the old `run_agent:assistant` too) is JSON-RPC's -32602, not a tool result,
/// and the session lives on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_offers_the_catalogue_under_valid_names_and_refuses_unknown_tools() {
    let long_id = "w".repeat(128);
    let workflow_id = long_id.clone();
    let s = TestServer::start_with_app(Backend::Sqlite, AuthSettings::default(), move |h| {
        let lookup = FnTool::new(
            "stock price/lookup",
            "A stock's price.",
            json!({"type": "object", "properties": {"symbol": {"type": "string"}}}),
            |args, _ctx| async move { Ok(json!({"symbol": args["symbol"], "price": 42})) },
        );
        h.agent(Agent::new("naming", "Naming").tool(std::sync::Arc::new(lookup)))
            .workflow(
                Workflow::new(&workflow_id, "Long")
                    .input_schema(json!({"type": "object"}))
                    .and_then(step("done", |_ctx: StepContext| async move {
                        Ok(json!({"done": true}))
                    }))
                    .build(),
            )
    })
    .await;
    let session = open_session(&s, None).await;
    let listed = rpc(&s, &session, "tools/list", json!({})).await;
    let names: Vec<String> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    for name in &names {
        assert!(is_mcp_tool_name(name), "{name} in {names:?}");
        assert!(!name.starts_with("run_agent"), "{name} in {names:?}");
    }
    for agent in ["assistant", "operator", "supervisor", "writer", "naming"] {
        assert!(
            names.contains(&format!("ask_{agent}")),
            "{agent}: {names:?}"
        );
    }
    // The rule: characters outside the set become `_`, the name is cut to 119 characters, and
    // `-` with the first 8 hexadecimal digits of the digest of the whole name follows.
    let stock = format!("stock_price_lookup-{}", &digest("stock price/lookup")[..8]);
    let long = format!(
        "run_{}-{}",
        "w".repeat(115),
        &digest(&format!("run_{long_id}"))[..8]
    );
    assert_eq!(long.len(), 128);
    assert!(names.contains(&stock), "{names:?}");
    assert!(names.contains(&long), "{names:?}");
    assert_eq!(
        names.iter().filter(|n| **n == stock || **n == long).count(),
        2,
        "each once"
    );

    let priced = rpc(
        &s,
        &session,
        "tools/call",
        json!({"name": stock, "arguments": {"symbol": "ACME"}}),
    )
    .await;
    assert_ne!(priced["result"]["isError"], true, "{priced}");
    assert_eq!(
        priced["result"]["structuredContent"]["price"], 42,
        "{priced}"
    );
    let ran = rpc(
        &s,
        &session,
        "tools/call",
        json!({"name": long, "arguments": {}}),
    )
    .await;
    assert_eq!(
        ran["result"]["structuredContent"]["status"], "completed",
        "{ran}"
    );
    assert_eq!(
        ran["result"]["structuredContent"]["result"],
        json!({"done": true}),
        "{ran}"
    );

    for unknown in ["run_agent:assistant", "no_such_tool", "stock price/lookup"] {
        let refused = rpc(
            &s,
            &session,
            "tools/call",
            json!({"name": unknown, "arguments": {"input": "hi"}}),
        )
        .await;
        assert_eq!(refused["error"]["code"], -32602, "{unknown}: {refused}");
        assert_eq!(
            refused["error"]["message"],
            format!("Unknown tool: {unknown}"),
            "{refused}"
        );
        assert!(refused.get("result").is_none(), "{refused}");
    }
    let again = rpc(&s, &session, "tools/list", json!({})).await;
    assert!(again["result"]["tools"].is_array(), "{again}");
    s.stop().await;
}
