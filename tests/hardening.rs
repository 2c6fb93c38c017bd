//! Hardening II (issue 23) through the real server: the NUL character in every id, cursor and
//! value on both databases, the probes and the pages' headers, metrics series that a model
//! cannot grow, and state reads that are never torn on PostgreSQL. Hardening III (issue 35):
//! the one bound of every id a client chooses, on every front end.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentry_agents::{
    Agent, ChunkStream, FinishReason, FnTool, Model, ModelChunk, ModelError, ModelRequest,
    ModelResponse, ToolCall, Usage,
};
use agentry_server::AuthSettings;
use agentry_tests::{Backend, TestServer, assert_failure, backend_tests, new_id, ok_data};
use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};

backend_tests!(
    nul_is_refused_in_keys_and_kept_exactly_in_values,
    every_id_a_client_chooses_has_one_bound,
);

/// The decision of docs/SECURITY.md: text that keys something (ids, user ids, cursors,
/// filters) is refused with a 400 naming the field; JSON values (inputs, context, reasons,
/// resume data, messages) are stored and returned exactly. Never a 500, on either database.
async fn nul_is_refused_in_keys_and_kept_exactly_in_values(backend: Backend) {
    let s = TestServer::start(backend).await;
    let refused = |status: StatusCode, body: &Value, field: &str| {
        let msg = assert_failure(status, body, 400);
        assert_eq!(
            msg,
            format!("{field} must not contain the NUL character"),
            "{body}"
        );
    };
    // Ids in paths.
    for (path, field) in [
        ("/executions/%00", "executionId"),
        ("/executions/x%00y", "executionId"),
        ("/workflows/countdown/executions/a%00/state", "executionId"),
        ("/workflows/countdown/executions/a%00/stream", "executionId"),
        ("/workflows/x%00/executions/a/state", "id"),
        ("/agents/assistant%00", "id"),
    ] {
        let (status, body) = s.get_json(path).await;
        refused(status, &body, field);
    }
    for path in [
        "/workflows/countdown/executions/a%00/suspend",
        "/workflows/countdown/executions/a%00/resume",
        "/workflows/countdown/executions/a%00/cancel",
    ] {
        let (status, body) = s.post_json(path, &json!({"resumeData": {}})).await;
        refused(status, &body, "executionId");
    }
    // Cursors and filters.
    for (query, field) in [
        ("/executions?cursor=1.%00", "cursor"),
        ("/workflows/countdown/executions?cursor=1.%00", "cursor"),
        ("/executions?workflowId=%00", "workflowId"),
        ("/executions?status=running%00", "status"),
    ] {
        let (status, body) = s.get_json(query).await;
        refused(status, &body, field);
    }
    // Keys in bodies.
    let (status, body) = s
        .post_json(
            "/workflows/word-count/execute",
            &json!({"input": {"text": "a b"}, "options": {"userId": "u\u{0}"}}),
        )
        .await;
    refused(status, &body, "options.userId");
    let (status, body) = s
        .post_json(
            "/workflows/word-count/execute",
            &json!({"input": {"text": "a b"}, "options": {"executionId": "e\u{0}"}}),
        )
        .await;
    assert_failure(status, &body, 400);
    let (status, body) = s
        .post_json(
            "/agents/assistant/text",
            &json!({"input": "hi", "options": {"userId": "u\u{0}", "conversationId": "c"}}),
        )
        .await;
    refused(status, &body, "options.userId");
    let (status, body) = s
        .post_json(
            "/agents/assistant/text",
            &json!({"input": "hi", "options": {"userId": "u", "conversationId": "c\u{0}"}}),
        )
        .await;
    refused(status, &body, "options.conversationId");

    // Values: stored and returned exactly.
    let text = "nul\u{0}inside \u{0}";
    let id = new_id();
    let data = ok_data_of(
        s.post_json(
            "/workflows/word-count/execute",
            &json!({"input": {"text": text}, "options": {"executionId": id,
                "context": {"note": "c\u{0}"}}}),
        )
        .await,
    );
    assert_eq!(data["status"], "completed", "{data}");
    let state = ok_data_of(
        s.get_json(&format!("/workflows/word-count/executions/{id}/state"))
            .await,
    );
    assert_eq!(state["input"]["text"], text);
    assert_eq!(state["context"]["note"], "c\u{0}");
    // A reason with NUL, through suspend, and resume data with NUL.
    let id = new_id();
    let started = ok_data_of(
        s.post_json(
            "/workflows/expense-approval/execute",
            &json!({"input": {"employeeId": "e\u{0}1", "amount": 5000, "category": "travel"},
                "options": {"executionId": id}}),
        )
        .await,
    );
    assert_eq!(started["status"], "suspended", "{started}");
    let resumed = ok_data_of(
        s.post_json(
            &format!("/workflows/expense-approval/executions/{id}/resume"),
            &json!({"resumeData": {"approved": true, "managerId": "m\u{0}"}}),
        )
        .await,
    );
    assert_eq!(resumed["status"], "completed", "{resumed}");
    assert_eq!(resumed["result"]["approvedBy"], "m\u{0}", "{resumed}");
    let id = new_id();
    let handle = s
        .client
        .post(s.url("/workflows/countdown/execute"))
        .json(&json!({"input": {"stepDelayMs": 300}, "options": {"executionId": id}}));
    let running = tokio::spawn(async move { handle.send().await });
    wait_until_running(&s, "countdown", &id).await;
    let cancelled = ok_data_of(
        s.post_json(
            &format!("/workflows/countdown/executions/{id}/cancel"),
            &json!({"reason": "why\u{0}"}),
        )
        .await,
    );
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    let _ = running.await;
    let state = ok_data_of(
        s.get_json(&format!("/workflows/countdown/executions/{id}/state"))
            .await,
    );
    assert_eq!(state["cancellation"]["reason"], "why\u{0}", "{state}");
    // A message with NUL reaches the agent and its memory.
    let data = ok_data_of(
        s.post_json(
            "/agents/assistant/text",
            &json!({"input": "echo\u{0} this", "options": {"userId": "u", "conversationId": "c"}}),
        )
        .await,
    );
    assert!(data["text"].is_string(), "{data}");
    // And the server lives on.
    let (status, _) = s.get_json("/workflows").await;
    assert_eq!(status, StatusCode::OK);
    s.stop().await;
}

/// What a key over the bound is told.
const TOO_LONG: &str = "must be at most 256 characters";
/// What a key with the NUL character is told.
const HAS_NUL: &str = "must not contain the NUL character";

/// `n` pseudo-random characters (letters and digits, or `four_bytes` characters of four bytes
/// in UTF-8): text that does not compress, as PostgreSQL compresses an index entry before it
/// measures it against the most a row may hold.
fn scrambled(n: usize, four_bytes: bool) -> String {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if four_bytes {
                char::from_u32(0x1_0000 + (x % 0xF_0000) as u32).expect("a scalar value")
            } else {
                ALNUM[(x % ALNUM.len() as u64) as usize] as char
            }
        })
        .collect()
}

/// A 400 `invalid_request` whose message is `<field> <why>`.
fn refused_as((status, body): (StatusCode, Value), field: &str, why: &str) {
    let msg = assert_failure(status, &body, 400);
    assert_eq!(msg, format!("{field} {why}"), "{body}");
    assert_eq!(body["code"], "invalid_request", "{body}");
}

/// Finding 10 of issue 35: an id a client chooses is at most 256 characters without NUL, on
/// every front end, and a longer one is a 400 naming the field before anything runs (it was a
/// 500 on PostgreSQL, whose index rows hold about 2,700 bytes): the options of the agent routes
/// (memory, durable runs, streams, chat), of execute and stream, the verified user's id, an MCP
/// tool's `conversationId`, an A2A message's `contextId` (`-32602`). Execution and event ids
/// keep their alphabet, up to the same 256. The longest keys, in 4-byte characters, are kept.
async fn every_id_a_client_chooses_has_one_bound(backend: Backend) {
    let s = TestServer::start(backend).await;
    let long = scrambled(4000, false);
    // The agent routes, whole, streamed, durable and chat.
    for route in ["text", "stream", "chat"] {
        let path = format!("/agents/assistant/{route}");
        for (options, field, why) in [
            (
                json!({"conversationId": long}),
                "options.conversationId",
                TOO_LONG,
            ),
            (
                json!({"conversationId": long, "durable": true}),
                "options.conversationId",
                TOO_LONG,
            ),
            (json!({"userId": long}), "options.userId", TOO_LONG),
            (
                json!({"userId": long, "durable": true}),
                "options.userId",
                TOO_LONG,
            ),
            (json!({"runId": long}), "options.runId", TOO_LONG),
            (json!({"runId": "r\u{0}"}), "options.runId", HAS_NUL),
            (
                json!({"context": {"userId": long}}),
                "options.context.userId",
                TOO_LONG,
            ),
            (
                json!({"context": {"userId": "u\u{0}"}}),
                "options.context.userId",
                HAS_NUL,
            ),
        ] {
            let body = json!({"input": "hi", "options": options});
            refused_as(s.post_json(&path, &body).await, field, why);
        }
    }
    let chat = |id: &str| json!({"id": id, "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]});
    refused_as(
        s.post_json("/agents/assistant/chat", &chat(&long)).await,
        "id",
        TOO_LONG,
    );
    refused_as(
        s.post_json("/agents/assistant/chat", &chat("c\u{0}")).await,
        "id",
        HAS_NUL,
    );
    // Execute and stream.
    for route in ["execute", "stream"] {
        let path = format!("/workflows/word-count/{route}");
        for (options, field, why) in [
            (json!({"userId": long}), "options.userId", TOO_LONG),
            (
                json!({"conversationId": long}),
                "options.conversationId",
                TOO_LONG,
            ),
            (
                json!({"conversationId": "c\u{0}"}),
                "options.conversationId",
                HAS_NUL,
            ),
            (
                json!({"context": {"user": {"id": long}}}),
                "options.context.user.id",
                TOO_LONG,
            ),
        ] {
            let body = json!({"input": {"text": "a b"}, "options": options});
            refused_as(s.post_json(&path, &body).await, field, why);
        }
        let body = json!({"input": {"text": "a b"}, "options": {"executionId": "e".repeat(257)}});
        let (status, body) = s.post_json(&path, &body).await;
        assert_failure(status, &body, 400);
        assert_eq!(body["code"], "invalid_execution_id", "{body}");
    }
    // Events by key: the key and the event id.
    let paid = json!({"amount": 1, "status": "paid"});
    for (event, field) in [
        (json!({"key": "k".repeat(257), "data": paid}), "key"),
        (
            json!({"key": "k", "eventId": "e".repeat(257), "data": paid}),
            "eventId",
        ),
    ] {
        let (status, body) = s.post_json("/events/payment", &event).await;
        let msg = assert_failure(status, &body, 400);
        assert_eq!(body["code"], "invalid_event", "{body}");
        assert!(msg.contains(field) && msg.contains("256"), "{msg}");
    }
    // An MCP tool.
    let mcp = McpClient::open(&s).await;
    for (conversation, why) in [(long.as_str(), TOO_LONG), ("c\u{0}", HAS_NUL)] {
        let args = json!({"input": "hi", "conversationId": conversation});
        let result = mcp.call("ask_assistant", args).await;
        assert_eq!(result["isError"], true, "{result}");
        assert_eq!(
            result["structuredContent"]["code"], "invalid_request",
            "{result}"
        );
        assert_eq!(
            result["structuredContent"]["error"],
            format!("conversationId {why}"),
            "{result}"
        );
    }
    // A2A: a 500 KB context id, and one with NUL.
    for (context, why) in [
        ("c".repeat(500_000), TOO_LONG),
        ("c\u{0}".to_owned(), HAS_NUL),
    ] {
        let message = json!({"messageId": new_id(), "role": "ROLE_USER",
            "parts": [{"text": "hi"}], "contextId": context});
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": message}});
        let (_, answer) = s.post_json("/a2a/assistant", &request).await;
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        assert_eq!(
            answer["error"]["message"],
            format!("message.contextId {why}"),
            "{answer}"
        );
        assert_eq!(
            answer["error"]["data"][0]["metadata"]["code"],
            "invalid_request"
        );
    }
    // Nothing ran.
    assert_eq!(s.get_data("/agent-runs").await["runs"], json!([]));
    assert_eq!(s.get_data("/executions").await["executions"], json!([]));

    // The longest keys, in characters of four bytes, are kept on both databases: memory, a
    // durable run, an execution, an event.
    let wide = scrambled(256, true);
    for durable in [false, true] {
        let body = json!({"input": "hi", "options": {"userId": wide, "conversationId": wide, "durable": durable}});
        let data = s.post_data("/agents/assistant/text", &body).await;
        assert!(data["text"].is_string(), "{data}");
    }
    let id = "e".repeat(256);
    let body = json!({"input": {"text": "a b"}, "options": {"executionId": id, "userId": wide, "conversationId": wide}});
    let data = s.post_data("/workflows/word-count/execute", &body).await;
    assert_eq!(data["status"], "completed", "{data}");
    assert_eq!(data["executionId"], id.as_str());
    let event = json!({"key": wide, "eventId": "v".repeat(256), "data": paid});
    let sent = s.post_data("/events/payment", &event).await;
    assert_eq!(sent["eventId"], "v".repeat(256), "{sent}");
    s.stop().await;

    // The verified user's id is such a key too: a token naming a longer one is refused.
    const SECRET: &str = "hardening-tests-secret-of-32-bytes!";
    let auth = AuthSettings {
        jwt_secret: Some(SECRET.into()),
        ..Default::default()
    };
    let s = TestServer::start_with(backend, auth, |h| h).await;
    let token = |sub: &str| {
        agentry_auth::create_token(
            &json!({"sub": sub}),
            SECRET.as_bytes(),
            &agentry_auth::TokenOptions::default(),
        )
        .unwrap()
    };
    let ask = |sub: &str| {
        s.client
            .post(s.url("/agents/assistant/text"))
            .bearer_auth(token(sub))
            .json(&json!({"input": "hi", "options": {"conversationId": "c"}}))
    };
    let r = s.send(ask(&"u".repeat(257))).await;
    let msg = assert_failure(r.status, &r.body, 401);
    assert_eq!(
        msg,
        "Invalid token: the user's id must be at most 256 characters"
    );
    let r = s.send(ask("u\u{0}")).await;
    let msg = assert_failure(r.status, &r.body, 401);
    assert_eq!(
        msg,
        "Invalid token: the user's id must not contain the NUL character"
    );
    let r = s.send(ask(&wide)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    s.stop().await;
}

/// A raw MCP client of a server without a provider: one session.
struct McpClient<'a> {
    s: &'a TestServer,
    session: String,
}

impl<'a> McpClient<'a> {
    /// `initialize`, then the `initialized` notification.
    async fn open(s: &'a TestServer) -> McpClient<'a> {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}});
        let resp = s
            .client
            .post(s.url("/mcp"))
            .header("accept", MCP_ACCEPT)
            .json(&init)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let session = resp.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let client = McpClient { s, session };
        client
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        client
    }

    async fn post(&self, body: &Value) -> String {
        let resp = self
            .s
            .client
            .post(self.s.url("/mcp"))
            .header("accept", MCP_ACCEPT)
            .header("mcp-session-id", &self.session)
            .json(body)
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "{}", resp.status());
        resp.text().await.unwrap()
    }

    /// `tools/call`: the call's result.
    async fn call(&self, name: &str, args: Value) -> Value {
        let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": name, "arguments": args}});
        let text = self.post(&call).await;
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .chain(std::iter::once(text.as_str()))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| m["id"] == 9)
            .unwrap_or_else(|| panic!("no answer to {name}: {text}"))["result"]
            .clone()
    }
}

const MCP_ACCEPT: &str = "application/json, text/event-stream";

/// The server's `/metrics`, as text.
async fn metrics_text(s: &TestServer) -> String {
    let resp = s.client.get(s.url("/metrics")).send().await.unwrap();
    resp.text().await.unwrap()
}

fn ok_data_of((status, body): (StatusCode, Value)) -> Value {
    ok_data(status, body)
}

async fn wait_until_running(s: &TestServer, workflow: &str, id: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = s
            .get_json(&format!("/workflows/{workflow}/executions/{id}/state"))
            .await;
        if status == StatusCode::OK && body["data"]["status"] == "running" {
            return;
        }
        assert!(Instant::now() < deadline, "{id} never ran: {body}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `/healthz` and `/readyz` (public, outside the envelope, not logged, not counted), and the
/// headers of every HTML page: a content security policy and `nosniff`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_answer_and_pages_carry_their_policy() {
    let s = TestServer::start(Backend::Sqlite).await;
    let (status, body) = s.get_json("/healthz").await;
    assert_eq!((status, body), (StatusCode::OK, json!({"status": "ok"})));
    let (status, body) = s.get_json("/readyz").await;
    assert_eq!((status, body), (StatusCode::OK, json!({"status": "ready"})));
    let metrics = metrics_text(&s).await;
    assert!(
        !metrics.contains("/healthz") && !metrics.contains("/readyz"),
        "probes are not traffic"
    );
    for path in ["/", "/ui", "/ui/", "/console", "/console/executions"] {
        let resp = s.client.get(s.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        assert!(header("content-type").starts_with("text/html"), "{path}");
        let csp = header("content-security-policy");
        assert!(
            csp.contains("default-src 'self'") && csp.contains("script-src 'self'"),
            "{path}: {csp:?}"
        );
        assert_eq!(header("x-content-type-options"), "nosniff", "{path}");
    }
    s.stop().await;
}

/// A model that asks for `remaining` made-up tools, 100 per answer, then answers with text.
struct Inventor {
    remaining: AtomicUsize,
}

#[async_trait::async_trait]
impl Model for Inventor {
    fn name(&self) -> &str {
        "inventor"
    }
    async fn generate(&self, _r: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let left = self.remaining.load(Ordering::SeqCst);
        if left == 0 {
            return Ok(ModelResponse {
                text: "done".into(),
                tool_calls: Vec::new(),
                finish_reason: FinishReason::Stop,
                usage: Usage::default(),
                model: None,
            });
        }
        let n = left.min(100);
        self.remaining.fetch_sub(n, Ordering::SeqCst);
        let tool_calls = (0..n)
            .map(|i| ToolCall {
                tool_call_id: format!("call-{left}-{i}"),
                tool_name: format!("made_up_{}_{}", left, uuid::Uuid::new_v4().simple()),
                args: json!({}),
            })
            .collect();
        Ok(ModelResponse {
            text: String::new(),
            tool_calls,
            finish_reason: FinishReason::ToolCalls,
            usage: Usage::default(),
            model: None,
        })
    }
    async fn stream(&self, r: &ModelRequest) -> Result<ChunkStream, ModelError> {
        let answer = self.generate(r).await?;
        let mut chunks: Vec<Result<ModelChunk, ModelError>> = answer
            .tool_calls
            .into_iter()
            .map(|c| Ok(ModelChunk::ToolCall(c)))
            .collect();
        chunks.push(Ok(ModelChunk::Finish {
            finish_reason: answer.finish_reason,
            usage: answer.usage,
        }));
        Ok(futures::stream::iter(chunks).boxed())
    }
}

/// A model that calls 1,000 tools it made up adds one `tool` series (`unknown`), beside the
/// registered tool's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_up_tool_names_do_not_grow_the_series() {
    let s = TestServer::start(Backend::Sqlite).await;
    let echo = FnTool::new(
        "echo",
        "Echoes.",
        json!({"type": "object"}),
        |args, _| async move { Ok(args) },
    );
    s.agents
        .register(
            Agent::new("inventor", "Inventor")
                .model(Arc::new(Inventor {
                    remaining: AtomicUsize::new(1000),
                }))
                .tool(Arc::new(echo)),
        )
        .unwrap();
    let data = ok_data_of(
        s.post_json(
            "/agents/inventor/text",
            &json!({"input": "go", "options": {"maxSteps": 20}}),
        )
        .await,
    );
    assert_eq!(data["text"], "done", "{data}");
    let metrics = metrics_text(&s).await;
    let series: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("agentry_tool_calls_total{"))
        .collect();
    assert_eq!(series.len(), 1, "{series:#?}");
    assert!(series[0].contains("tool=\"unknown\""), "{}", series[0]);
    assert!(series[0].trim_end().ends_with(" 1000"), "{}", series[0]);
    assert!(!metrics.contains("made_up_"));
    s.stop().await;
}

/// A state read while steps commit sees a header and steps of one moment: the completed steps
/// of a running countdown are always the `nextStepIndex` first ones. Countdowns run back to back
/// (eight at a time) while their states are read, a few thousand times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_reads_are_never_torn_on_postgres() {
    const STEPS: [&str; 5] = ["tick-5", "tick-4", "tick-3", "tick-2", "tick-1"];
    const READS: usize = 3000;
    let s = TestServer::start(Backend::Postgres).await;
    let ids: Vec<String> = (0..8).map(|_| new_id()).collect();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut launchers = Vec::new();
    for lane in &ids {
        let (client, url, lane, done) = (
            s.client.clone(),
            s.url("/workflows/countdown/execute"),
            lane.clone(),
            done.clone(),
        );
        launchers.push(tokio::spawn(async move {
            let mut n = 0;
            while !done.load(Ordering::SeqCst) {
                let body = json!({"input": {"stepDelayMs": 2},
                    "options": {"executionId": format!("{lane}-{n}")}});
                let _ = client.post(&url).json(&body).send().await;
                n += 1;
            }
        }));
    }
    let mut reads = 0;
    // Each lane's oldest countdown not yet seen completed.
    let mut oldest = vec![0usize; ids.len()];
    let deadline = Instant::now() + Duration::from_secs(120);
    while reads < READS {
        assert!(Instant::now() < deadline, "only {reads} reads");
        for (lane, oldest) in ids.iter().zip(oldest.iter_mut()) {
            // The lane's countdowns from the oldest not seen completed (one of them runs).
            for n in *oldest..*oldest + 2 {
                let (status, body) = s
                    .get_json(&format!("/workflows/countdown/executions/{lane}-{n}/state"))
                    .await;
                if status == StatusCode::NOT_FOUND {
                    continue;
                }
                let state = ok_data(status, body);
                reads += 1;
                let next = state["nextStepIndex"].as_u64().unwrap() as usize;
                let completed: Vec<&str> = STEPS
                    .iter()
                    .copied()
                    .filter(|step| state["steps"][step]["status"] == "completed")
                    .collect();
                assert_eq!(
                    completed,
                    STEPS[..next.min(STEPS.len())],
                    "a torn read after {reads}: {state}"
                );
                if state["status"] == "completed" && n == *oldest {
                    *oldest += 1;
                }
            }
        }
    }
    done.store(true, Ordering::SeqCst);
    for launcher in launchers {
        let _ = launcher.await;
    }
    s.stop().await;
}
