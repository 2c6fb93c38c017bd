//! The built-in pages and the live views: the landing page (`GET /`), logs over HTTP
//! (`GET /api/logs`), the request log, and the WebSockets `/ws/logs` and
//! `/ws/executions/{executionId}`, against the real server. WebSockets are spoken with a real
//! client (tokio-tungstenite). Tests that run executions run on SQLite and PostgreSQL.
//!
//! The captured logs are process-wide and the tests of this file run in parallel: every check
//! filters by an execution id of its own, or looks only for records it made.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentry_engine::{StepContext, StepError, Workflow, step};
use agentry_tests::{Backend, TestServer, assert_failure, assert_iso, new_id, ok_data};
use futures::{SinkExt, StreamExt};
use reqwest::header::CONTENT_TYPE;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

agentry_tests::backend_tests!(
    logs_of_an_execution_by_id_workflow_and_level,
    logs_limit_and_since,
    ws_follows_a_running_countdown,
    ws_of_a_completed_execution,
    ws_of_a_suspended_execution,
    ws_of_an_unknown_execution,
    ws_logs_streams_an_execution_live,
);

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// `agentry_http::ws::close_all` closes the sockets of the whole process: the test calling it
/// takes this lock for writing, every other WebSocket test for reading.
static SOCKETS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// How long a test waits for one WebSocket message.
const MESSAGE_TIMEOUT: Duration = Duration::from_secs(20);

fn ws_url(s: &TestServer, path: &str) -> String {
    let base = s
        .base_url
        .strip_prefix("http://")
        .expect("the test server speaks plain HTTP");
    format!("ws://{base}{path}")
}

/// Opens a WebSocket; hold [`SOCKETS`] (for reading) while it is open.
async fn connect(s: &TestServer, path: &str) -> Socket {
    let (socket, resp) = tokio_tungstenite::connect_async(ws_url(s, path))
        .await
        .unwrap_or_else(|e| panic!("WebSocket handshake of {path} failed: {e}"));
    assert_eq!(resp.status().as_u16(), 101);
    socket
}

/// What the server sent next: a JSON text message, or the close frame's code.
#[derive(Debug)]
enum Received {
    Json(Value),
    Close(Option<u16>),
}

/// The next data or close message (pings and pongs are skipped); panics on a time-out, on a
/// non-JSON text, or when the connection ends without a close frame.
async fn receive(socket: &mut Socket) -> Received {
    loop {
        let next = tokio::time::timeout(MESSAGE_TIMEOUT, socket.next())
            .await
            .expect("no WebSocket message in time");
        match next {
            Some(Ok(Message::Text(t))) => {
                let v: Value = serde_json::from_str(t.as_str())
                    .unwrap_or_else(|e| panic!("WebSocket text is not JSON ({e}): {t}"));
                assert!(v["type"].is_string(), "message without a type: {v}");
                return Received::Json(v);
            }
            Some(Ok(Message::Close(frame))) => {
                return Received::Close(frame.map(|f| u16::from(f.code)));
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => continue,
            Some(Ok(Message::Binary(b))) => panic!("unexpected binary message: {b:?}"),
            Some(Err(e)) => panic!("WebSocket error: {e}"),
            None => panic!("the WebSocket ended without a close frame"),
        }
    }
}

async fn receive_json(socket: &mut Socket) -> Value {
    match receive(socket).await {
        Received::Json(v) => v,
        Received::Close(code) => panic!("closed ({code:?}) where a message was expected"),
    }
}

/// Expects the close frame with `code`, then the end of the stream.
async fn expect_close(socket: &mut Socket, code: CloseCode) {
    match receive(socket).await {
        Received::Close(got) => assert_eq!(got, Some(u16::from(code))),
        Received::Json(v) => panic!("expected the close frame, got {v}"),
    }
    // The client library answers the close; then the stream ends.
    let end = tokio::time::timeout(MESSAGE_TIMEOUT, socket.next())
        .await
        .expect("the WebSocket did not end after the close");
    assert!(
        matches!(end, None | Some(Err(_))),
        "message after the close: {end:?}"
    );
}

/// GET `path`, expecting a success envelope whose data is an array of log records.
async fn logs(s: &TestServer, query: &str) -> Vec<Value> {
    let data = s.get_data(&format!("/api/logs{query}")).await;
    let records = data
        .as_array()
        .unwrap_or_else(|| panic!("logs are not an array: {data}"))
        .clone();
    for r in &records {
        assert_record_shape(r);
    }
    records
}

fn assert_record_shape(r: &Value) {
    let obj = r
        .as_object()
        .unwrap_or_else(|| panic!("record is not an object: {r}"));
    assert_iso(&r["timestamp"]);
    assert!(
        ["trace", "debug", "info", "warn", "error"].contains(&r["level"].as_str().unwrap_or("")),
        "{r}"
    );
    assert!(r["target"].is_string(), "{r}");
    assert!(r["message"].is_string(), "{r}");
    assert!(r["fields"].is_object(), "{r}");
    for id in ["agentId", "workflowId", "executionId"] {
        assert!(
            obj.contains_key(id) && (r[id].is_string() || r[id].is_null()),
            "{id}: {r}"
        );
    }
}

fn messages(records: &[Value]) -> Vec<&str> {
    records
        .iter()
        .map(|r| r["message"].as_str().unwrap_or(""))
        .collect()
}

async fn word_count(s: &TestServer, id: &str, text: &str) -> Value {
    s.post_data(
        "/workflows/word-count/execute",
        &json!({"input": {"text": text}, "options": {"executionId": id}}),
    )
    .await
}

// ---------------------------------------------------------------------------------------------
// The landing page
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn landing_page_lists_agents_and_workflows() {
    let s = TestServer::start(Backend::Sqlite).await;
    let resp = s.client.get(s.url("/")).send().await.expect("GET /");
    assert_eq!(resp.status(), 200);
    let ct = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    assert_eq!(ct, "text/html; charset=utf-8");
    let page = resp.text().await.expect("the page");
    assert!(page.starts_with("<!doctype html>"), "{page}");
    assert!(page.contains("agentry"));
    assert!(page.contains(env!("CARGO_PKG_VERSION")), "{page}");
    for agent in ["assistant", "writer", "supervisor"] {
        assert!(
            page.contains(&format!("<code>{agent}</code>")),
            "{agent}: {page}"
        );
    }
    for wf in [
        "expense-approval",
        "order-fulfillment",
        "word-count",
        "countdown",
        "content-pipeline",
    ] {
        assert!(page.contains(&format!("<code>{wf}</code>")), "{wf}: {page}");
    }
    // A purpose, escaped where it needs to be.
    assert!(page.contains("Counts the whitespace-separated words of a text."));
    assert!(
        page.contains("href=\"/ui\"") && page.contains("href=\"/doc\""),
        "{page}"
    );
    assert!(!page.contains("<script"), "no scripts: {page}");
    s.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Logs over HTTP
// ---------------------------------------------------------------------------------------------

/// A workflow whose only step fails, registered on this server only.
fn failing_workflow() -> Workflow {
    Workflow::new("always-fails", "Always Fails")
        .purpose("Fails, to log a warning.")
        .input_schema(json!({"type": "object"}))
        .and_then(step("boom", |_ctx: StepContext| async move {
            Err::<Value, StepError>(StepError::Failed("boom".into()))
        }))
        .build()
        .expect("a valid workflow")
}

async fn logs_of_an_execution_by_id_workflow_and_level(backend: Backend) {
    let s = TestServer::start(backend).await;
    let id = new_id();
    let data = word_count(&s, &id, "one two three").await;
    assert_eq!(data["result"], json!({"words": 3}));

    // By execution: its start and finish, all carrying both ids, oldest first.
    let mine = logs(&s, &format!("?executionId={id}")).await;
    let msgs = messages(&mine);
    assert!(msgs.contains(&"execution started"), "{mine:?}");
    assert!(msgs.contains(&"execution finished"), "{mine:?}");
    for r in &mine {
        assert_eq!(r["executionId"], id.as_str(), "{r}");
        assert_eq!(r["workflowId"], "word-count", "{r}");
        assert_eq!(r["level"], "info", "{r}");
        assert!(r["target"].as_str().unwrap().starts_with("agentry"), "{r}");
    }
    let finished = mine
        .iter()
        .find(|r| r["message"] == "execution finished")
        .unwrap();
    assert_eq!(finished["fields"]["status"], "completed", "{finished}");
    let times: Vec<_> = mine.iter().map(|r| assert_iso(&r["timestamp"])).collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "not in order: {mine:?}"
    );

    // By workflow: this execution's records are among them; every one is of word-count.
    let by_workflow = logs(&s, "?workflowId=word-count&limit=1000").await;
    assert!(
        by_workflow.iter().any(|r| r["executionId"] == id.as_str()),
        "{by_workflow:?}"
    );
    assert!(by_workflow.iter().all(|r| r["workflowId"] == "word-count"));

    // By level: a failing execution logs a warning; `warn` keeps it and drops the info records,
    // `error` drops it too.
    s.engine.register(failing_workflow()).expect("register");
    let failed = new_id();
    let (status, body) = s
        .post_json(
            "/workflows/always-fails/execute",
            &json!({"input": {}, "options": {"executionId": failed}}),
        )
        .await;
    assert_failure(status, &body, 500);
    let all = logs(&s, &format!("?executionId={failed}")).await;
    assert!(all.iter().any(|r| r["level"] == "info"), "{all:?}");
    let warn = logs(&s, &format!("?executionId={failed}&level=warn")).await;
    assert!(!warn.is_empty(), "{all:?}");
    assert!(
        warn.iter()
            .all(|r| r["level"] == "warn" || r["level"] == "error"),
        "{warn:?}"
    );
    let warning = warn
        .iter()
        .find(|r| r["message"] == "execution failed")
        .unwrap_or_else(|| panic!("{warn:?}"));
    assert_eq!(warning["fields"]["error"], "Step boom failed: boom");
    assert_eq!(warning["workflowId"], "always-fails");
    assert!(
        logs(&s, &format!("?executionId={failed}&level=error"))
            .await
            .iter()
            .all(|r| r["level"] == "error")
    );
    assert!(
        logs(&s, &format!("?executionId={id}&level=warn"))
            .await
            .is_empty()
    );
    s.stop().await;
}

async fn logs_limit_and_since(backend: Backend) {
    let s = TestServer::start(backend).await;
    let id = new_id();
    word_count(&s, &id, "a b").await;
    let all = logs(&s, &format!("?executionId={id}")).await;
    assert!(all.len() >= 2, "{all:?}");

    // limit=1: one record, the newest.
    let last = logs(&s, &format!("?executionId={id}&limit=1")).await;
    assert_eq!(last.len(), 1);
    assert_eq!(last[0], *all.last().unwrap());
    assert_eq!(last[0]["message"], "execution finished");

    // since: strictly after; exactly the records newer than the first one.
    let first = all[0]["timestamp"].as_str().unwrap();
    let first_t = assert_iso(&all[0]["timestamp"]);
    let after = logs(&s, &format!("?executionId={id}&since={first}")).await;
    let expected: Vec<&Value> = all
        .iter()
        .filter(|r| assert_iso(&r["timestamp"]) > first_t)
        .collect();
    assert_eq!(after.iter().collect::<Vec<_>>(), expected);
    assert!(!after.iter().any(|r| r == &all[0]));
    assert_eq!(
        logs(&s, &format!("?executionId={id}&since=2000-01-01T00:00:00Z")).await,
        all
    );
    assert!(
        logs(
            &s,
            &format!("?executionId={id}&since=2999-01-01T00:00:00.000Z")
        )
        .await
        .is_empty()
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_of_an_agent_run() {
    let s = TestServer::start(Backend::Sqlite).await;
    let data = s
        .post_data(
            "/agents/writer/text",
            &json!({"input": "a haiku about logs"}),
        )
        .await;
    assert!(data["text"].is_string(), "{data}");
    let records = logs(&s, "?agentId=writer").await;
    let finished = records
        .iter()
        .rev()
        .find(|r| r["message"] == "agent run finished")
        .unwrap_or_else(|| panic!("{records:?}"));
    assert_eq!(finished["agentId"], "writer");
    assert_eq!(finished["fields"]["finish_reason"], "Stop", "{finished}");
    assert!(records.iter().all(|r| r["agentId"] == "writer"));
    s.stop().await;
}

/// The example assistant's live scores are logged (the events of its `score` span, which the
/// OTLP export sends as span events), with the agent's id, after the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_scores_of_an_agent_are_logged() {
    let s = TestServer::start(Backend::Sqlite).await;
    let data = s
        .post_data(
            "/agents/assistant/text",
            &json!({"input": "What is the weather in Oslo?"}),
        )
        .await;
    assert!(data["text"].is_string(), "{data}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let scores = loop {
        let scores: Vec<Value> = logs(&s, "?agentId=assistant")
            .await
            .into_iter()
            .filter(|r| r["message"] == "score")
            .collect();
        if scores.len() == 4 || Instant::now() > deadline {
            break scores;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut scorers: Vec<&str> = scores
        .iter()
        .map(|r| r["fields"]["agentry.score.scorer"].as_str().unwrap_or("?"))
        .collect();
    scorers.sort();
    assert_eq!(
        scorers,
        ["faithfulness", "latency", "relevance", "tokens"],
        "{scores:?}"
    );
    let tokens = scores
        .iter()
        .find(|r| r["fields"]["agentry.score.scorer"] == "tokens")
        .unwrap();
    assert_eq!(tokens["fields"]["agentry.score.value"], 1.0, "{tokens}");
    assert_eq!(tokens["fields"]["agentry.score.passed"], true, "{tokens}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_rejects_invalid_parameters() {
    let s = TestServer::start(Backend::Sqlite).await;
    for (query, name) in [
        ("level=verbose", "level"),
        ("limit=0", "limit"),
        ("limit=ten", "limit"),
        ("limit=-3", "limit"),
        ("since=yesterday", "since"),
        ("since=2026-13-01T00:00:00Z", "since"),
    ] {
        let (status, body) = s.get_json(&format!("/api/logs?{query}")).await;
        let msg = assert_failure(status, &body, 400);
        assert!(msg.contains(name), "{query}: {msg}");
    }
    // A valid query with every parameter.
    let data = s
        .get_data("/api/logs?level=info&agentId=assistant&workflowId=w&executionId=e&since=2020-01-01T00:00:00.000Z&limit=1000")
        .await;
    assert!(data.is_array(), "{data}");
    // The WebSocket takes the same query: an invalid one is a 400 envelope instead of an upgrade.
    let (status, body) = s.get_json("/ws/logs?level=loud").await;
    assert!(assert_failure(status, &body, 400).contains("level"));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_is_logged_without_its_query_string() {
    let s = TestServer::start(Backend::Sqlite).await;
    let marker = new_id();
    let path = format!("/workflows/no-such-{marker}");
    let (status, _) = s.get_json(&format!("{path}?token=secret-{marker}")).await;
    assert_eq!(status, 404);
    let records = logs(&s, "?level=info&limit=1000").await;
    let mine: Vec<&Value> = records
        .iter()
        .filter(|r| r.to_string().contains(&marker))
        .collect();
    assert_eq!(mine.len(), 1, "{mine:?}");
    let r = mine[0];
    assert_eq!(r["target"], "agentry_http::request", "{r}");
    assert_eq!(r["level"], "info");
    assert_eq!(r["fields"]["method"], "GET");
    assert_eq!(r["fields"]["path"], path.as_str());
    assert_eq!(r["fields"]["status"], 404);
    assert!(
        r["fields"]["duration_ms"]
            .as_f64()
            .is_some_and(|d| d >= 0.0),
        "{r}"
    );
    assert!(
        !r.to_string().contains("secret"),
        "the query string was logged: {r}"
    );
    s.stop().await;
}

/// Client-controlled text (60 KB request paths, which the request log records; bodies whose
/// error messages echo the input) leaves every record and the whole buffer within their limits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_client_text_keeps_the_logs_bounded() {
    use agentry_logs::{DEFAULT_MAX_BYTES, LogHub, MAX_FIELD_BYTES, MAX_MESSAGE_BYTES};
    let s = TestServer::start(Backend::Sqlite).await;
    let marker = new_id();
    let filler = "é".repeat(30 * 1024);
    let path_filler = "x".repeat(60 * 1024);
    for i in 0..50 {
        // Not JSON at all, and JSON whose values do not fit the workflow's input schema.
        let broken = format!("{{\"input\": {{\"text\": \"{marker}-{i}-{filler}\"");
        let (status, body) = s
            .post_raw("/workflows/word-count/execute", "application/json", broken)
            .await;
        assert_failure(status, &body, 400);
        let (status, body) = s
            .post_json(
                "/workflows/word-count/execute",
                &json!({"input": {"text": [format!("{marker}-{i}-{filler}")]}}),
            )
            .await;
        assert_failure(status, &body, 400);
    }
    for i in 0..100 {
        let (status, body) = s
            .get_json(&format!("/big-{marker}-{i}-{path_filler}"))
            .await;
        assert_failure(status, &body, 404);
    }

    let resp = s
        .client
        .get(s.url("/api/logs?limit=1000"))
        .send()
        .await
        .expect("GET /api/logs");
    let status = resp.status();
    let body = resp.bytes().await.expect("the logs");
    assert!(
        body.len() < DEFAULT_MAX_BYTES + 64 * 1024,
        "/api/logs answered {} bytes",
        body.len()
    );
    let body: Value = serde_json::from_slice(&body).expect("JSON");
    let records = ok_data(status, body);
    let records = records.as_array().expect("an array of records");
    for r in records {
        assert_record_shape(r);
        let message = r["message"].as_str().unwrap();
        assert!(
            message.len() <= MAX_MESSAGE_BYTES,
            "{} bytes",
            message.len()
        );
        for (name, v) in r["fields"].as_object().unwrap() {
            if let Some(text) = v.as_str() {
                assert!(
                    text.len() <= MAX_FIELD_BYTES,
                    "{name}: {} bytes",
                    text.len()
                );
            }
        }
        for id in ["agentId", "workflowId", "executionId"] {
            if let Some(text) = r[id].as_str() {
                assert!(text.len() <= MAX_FIELD_BYTES, "{id}: {} bytes", text.len());
            }
        }
    }
    // The last request was logged (before it was answered), cut with the marker.
    let last = format!("/big-{marker}-99-");
    let r = records
        .iter()
        .find(|r| {
            r["fields"]["path"]
                .as_str()
                .is_some_and(|p| p.starts_with(&last))
        })
        .unwrap_or_else(|| panic!("the request log of {last}... is missing"));
    assert_eq!(r["target"], "agentry_http::request", "{r}");
    for text in [&r["message"], &r["fields"]["path"]] {
        let text = text.as_str().unwrap();
        assert!(
            text.contains("…[truncated ") && text.ends_with(" bytes]"),
            "{text}"
        );
    }
    assert!(LogHub::global().bytes() <= DEFAULT_MAX_BYTES);
    s.stop().await;
}

// ---------------------------------------------------------------------------------------------
// /ws/executions/{executionId}
// ---------------------------------------------------------------------------------------------

/// The step events of a whole countdown run, in order.
fn countdown_step_events() -> Vec<(String, u64)> {
    (0..5)
        .flat_map(|i| {
            [
                ("step-start".to_owned(), i),
                ("step-complete".to_owned(), i),
            ]
        })
        .collect()
}

async fn ws_follows_a_running_countdown(backend: Backend) {
    let _sockets = SOCKETS.read().await;
    let s = Arc::new(TestServer::start(backend).await);
    let id = new_id();
    let run = {
        let s = s.clone();
        let body = json!({"input": {"stepDelayMs": 400}, "options": {"executionId": id}});
        tokio::spawn(async move { s.post_json("/workflows/countdown/execute", &body).await })
    };
    // Wait until the execution exists.
    let started = Instant::now();
    let state_path = format!("/workflows/countdown/executions/{id}/state");
    loop {
        let (status, body) = s.get_json(&state_path).await;
        if status == 200 {
            break;
        }
        assert_failure(status, &body, 404);
        assert!(started.elapsed() < Duration::from_secs(10), "no execution");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let mut socket = connect(&s, &format!("/ws/executions/{id}")).await;
    let state = receive_json(&mut socket).await;
    assert_eq!(state["type"], "execution-state", "{state}");
    assert_eq!(state["executionId"], id.as_str());
    assert_eq!(state["workflowId"], "countdown");
    assert_eq!(state["status"], "running", "{state}");
    assert_eq!(state["input"], json!({"stepDelayMs": 400}));
    assert_iso(&state["startAt"]);

    let mut events = Vec::new();
    loop {
        let ev = receive_json(&mut socket).await;
        assert_eq!(ev["executionId"], id.as_str(), "{ev}");
        assert_eq!(ev["workflowId"], "countdown", "{ev}");
        assert_iso(&ev["timestamp"]);
        let last = ev["type"] == "workflow-result";
        events.push(ev);
        if last {
            break;
        }
    }
    expect_close(&mut socket, CloseCode::Normal).await;

    // Step events: pairs with increasing indexes, a suffix of the whole run (the ones before the
    // socket attached are in the state), ending with the last tick.
    let steps: Vec<(String, u64)> = events
        .iter()
        .filter(|e| e["type"] == "step-start" || e["type"] == "step-complete")
        .map(|e| {
            assert_eq!(
                e["from"],
                format!("tick-{}", 5 - e["stepIndex"].as_u64().unwrap())
            );
            (
                e["type"].as_str().unwrap().to_owned(),
                e["stepIndex"].as_u64().unwrap(),
            )
        })
        .collect();
    let whole = countdown_step_events();
    assert!(
        steps.len() >= 6 && whole.ends_with(&steps),
        "step events {steps:?} are not the end of {whole:?}"
    );
    let n = events.len();
    assert_eq!(events[n - 2]["type"], "workflow-complete", "{events:?}");
    assert_eq!(events[n - 2]["result"], json!({"remaining": 0}));
    let result = &events[n - 1];
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["result"], json!({"remaining": 0}));
    assert_iso(&result["endAt"]);

    let (status, body) = run.await.expect("execute task");
    assert_eq!(ok_data(status, body)["status"], "completed");
    let s = Arc::into_inner(s).expect("the server is no longer shared");
    s.stop().await;
}

/// The messages of an execution socket up to its `workflow-result`.
async fn receive_until_result(socket: &mut Socket) -> Vec<Value> {
    let mut events = Vec::new();
    loop {
        let ev = receive_json(socket).await;
        let last = ev["type"] == "workflow-result";
        events.push(ev);
        if last || events.len() > 100 {
            return events;
        }
    }
}

async fn ws_of_a_completed_execution(backend: Backend) {
    let _sockets = SOCKETS.read().await;
    let s = TestServer::start(backend).await;
    let id = new_id();
    word_count(&s, &id, "to be or not to be").await;

    let mut socket = connect(&s, &format!("/ws/executions/{id}")).await;
    let state = receive_json(&mut socket).await;
    assert_eq!(state["type"], "execution-state", "{state}");
    assert_eq!(state["executionId"], id.as_str());
    assert_eq!(state["workflowId"], "word-count");
    assert_eq!(state["status"], "completed");
    assert_eq!(state["result"], json!({"words": 6}));
    // The whole stored log, from the start, on any replica; `workflow-result` last.
    let events = receive_until_result(&mut socket).await;
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(types.first(), Some(&"workflow-start"), "{types:?}");
    assert_eq!(types[types.len() - 2], "workflow-complete", "{types:?}");
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(last["type"], "workflow-result", "{last}");
    assert_eq!(last["executionId"], id.as_str());
    assert_eq!(last["workflowId"], "word-count");
    assert_eq!(last["status"], "completed");
    assert_eq!(last["result"], json!({"words": 6}));
    assert_eq!(last["endAt"], state["endAt"]);
    assert_iso(&last["timestamp"]);
    expect_close(&mut socket, CloseCode::Normal).await;
    s.stop().await;
}

async fn ws_of_a_suspended_execution(backend: Backend) {
    let _sockets = SOCKETS.read().await;
    let s = TestServer::start(backend).await;
    let id = new_id();
    let data = s
        .post_data(
            "/workflows/expense-approval/execute",
            &json!({
                "input": {"employeeId": "e-1", "amount": 5000, "category": "travel"},
                "options": {"executionId": id}
            }),
        )
        .await;
    assert_eq!(data["status"], "suspended");

    let mut socket = connect(&s, &format!("/ws/executions/{id}")).await;
    let state = receive_json(&mut socket).await;
    assert_eq!(state["type"], "execution-state", "{state}");
    assert_eq!(state["status"], "suspended");
    assert_eq!(state["suspension"]["stepId"], "check-approval");
    let events = receive_until_result(&mut socket).await;
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(types.first(), Some(&"workflow-start"), "{types:?}");
    assert_eq!(types[types.len() - 2], "workflow-suspended", "{types:?}");
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(last["type"], "workflow-result", "{last}");
    assert_eq!(last["status"], "suspended");
    assert_eq!(last["result"], Value::Null);
    assert_eq!(
        last["suspension"]["reason"],
        "Manager approval required for amounts over 1000"
    );
    expect_close(&mut socket, CloseCode::Normal).await;
    s.stop().await;
}

async fn ws_of_an_unknown_execution(backend: Backend) {
    let _sockets = SOCKETS.read().await;
    let s = TestServer::start(backend).await;
    let id = format!("missing-{}", new_id());
    let mut socket = connect(&s, &format!("/ws/executions/{id}")).await;
    let msg = receive_json(&mut socket).await;
    assert_eq!(
        msg,
        json!({"type": "error", "error": format!("Execution {id} not found")})
    );
    expect_close(&mut socket, CloseCode::Policy).await;
    s.stop().await;
}

// ---------------------------------------------------------------------------------------------
// /ws/logs
// ---------------------------------------------------------------------------------------------

/// Reads `log` messages until one has `message`; returns them all.
async fn logs_until(socket: &mut Socket, message: &str) -> Vec<Value> {
    let mut got = Vec::new();
    loop {
        let v = receive_json(socket).await;
        assert_eq!(v["type"], "log", "{v}");
        let mut record = v.clone();
        record.as_object_mut().unwrap().remove("type");
        assert_record_shape(&record);
        let done = v["message"] == message;
        got.push(v);
        if done {
            return got;
        }
    }
}

async fn ws_logs_streams_an_execution_live(backend: Backend) {
    let _sockets = SOCKETS.read().await;
    let s = TestServer::start(backend).await;
    let id = new_id();

    // Live only (no limit or since): nothing is sent until the execution runs.
    let mut live = connect(&s, &format!("/ws/logs?executionId={id}")).await;
    word_count(&s, &id, "live logs").await;
    let got = logs_until(&mut live, "execution finished").await;
    assert_eq!(got[0]["message"], "execution started", "{got:?}");
    for v in &got {
        assert_eq!(v["executionId"], id.as_str(), "{v}");
        assert_eq!(v["workflowId"], "word-count", "{v}");
    }

    // Pings are answered; a close from the client is echoed.
    live.send(Message::Ping(b"are you there".to_vec().into()))
        .await
        .expect("ping");
    let pong = tokio::time::timeout(MESSAGE_TIMEOUT, live.next())
        .await
        .expect("no pong in time");
    match pong {
        Some(Ok(Message::Pong(p))) => assert_eq!(&p[..], b"are you there"),
        other => panic!("expected a pong, got {other:?}"),
    }
    live.close(None).await.expect("close");
    let end = tokio::time::timeout(MESSAGE_TIMEOUT, async {
        while let Some(Ok(m)) = live.next().await {
            if let Message::Close(_) = m {
                continue;
            }
            panic!("message after the close: {m:?}");
        }
    })
    .await;
    assert!(end.is_ok(), "the server did not end the connection");

    // With a backlog (`limit`): the records logged before the socket opened come first.
    let mut backlog = connect(&s, &format!("/ws/logs?executionId={id}&limit=100")).await;
    let again = logs_until(&mut backlog, "execution finished").await;
    assert_eq!(again, got);
    // A warn-level filter on the same execution sends nothing from the backlog.
    let mut warn = connect(
        &s,
        &format!("/ws/logs?executionId={id}&level=warn&limit=10"),
    )
    .await;
    warn.send(Message::Ping(b"x".to_vec().into()))
        .await
        .expect("ping");
    match tokio::time::timeout(MESSAGE_TIMEOUT, warn.next()).await {
        Ok(Some(Ok(Message::Pong(_)))) => {}
        other => panic!("expected only the pong, got {other:?}"),
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_all_closes_open_log_sockets_only() {
    let _sockets = SOCKETS.write().await;
    let s = TestServer::start(Backend::Sqlite).await;
    let mut before = connect(&s, "/ws/logs?level=error").await;
    // The socket is attached once it answers a ping.
    before
        .send(Message::Ping(b"1".to_vec().into()))
        .await
        .expect("ping");
    match tokio::time::timeout(MESSAGE_TIMEOUT, before.next()).await {
        Ok(Some(Ok(Message::Pong(_)))) => {}
        other => panic!("expected a pong, got {other:?}"),
    }
    agentry_http::ws::close_all();
    expect_close(&mut before, CloseCode::Away).await;

    // A socket opened afterwards stays open.
    let mut after = connect(&s, "/ws/logs?level=error").await;
    after
        .send(Message::Ping(b"2".to_vec().into()))
        .await
        .expect("ping");
    match tokio::time::timeout(MESSAGE_TIMEOUT, after.next()).await {
        Ok(Some(Ok(Message::Pong(p)))) => assert_eq!(&p[..], b"2"),
        other => panic!("expected a pong, got {other:?}"),
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sockets_are_pinged() {
    let s = Arc::new(
        TestServer::start_configured(
            Backend::Sqlite,
            |settings| settings.http.ws_keepalive = Duration::from_millis(100),
            |h| h,
        )
        .await,
    );
    // A countdown whose steps take long: its socket is quiet between events.
    let id = new_id();
    let run = tokio::spawn({
        let s = s.clone();
        let id = id.clone();
        async move {
            s.post_json(
                "/workflows/countdown/execute",
                &json!({"input": {"from": 2, "stepDelayMs": 1500}, "options": {"executionId": id}}),
            )
            .await
        }
    });
    let state = format!("/workflows/countdown/executions/{id}/state");
    let started = Instant::now();
    while s.get_json(&state).await.0.as_u16() != 200 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the execution never appeared"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for path in [
        "/ws/logs?executionId=nothing-is-logged-here".to_owned(),
        format!("/ws/executions/{id}"),
    ] {
        let mut socket = connect(&s, &path).await;
        let mut pings = 0;
        while pings < 2 {
            match tokio::time::timeout(Duration::from_secs(5), socket.next()).await {
                Ok(Some(Ok(Message::Ping(_)))) => pings += 1,
                Ok(Some(Ok(Message::Text(_)))) => {}
                other => panic!("{path}: {other:?} after {pings} pings"),
            }
        }
    }
    let (status, body) = run.await.unwrap();
    assert_eq!(status.as_u16(), 200, "{body}");
    match Arc::try_unwrap(s) {
        Ok(s) => s.stop().await,
        Err(_) => panic!("the server is still shared"),
    }
}
