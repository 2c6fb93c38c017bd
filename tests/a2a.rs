//! A2A with the official SDKs: `tests/a2a/test_a2a_server.py` (Python `a2a-sdk`, installed into
//! `.venv-tools` by `scripts/install-test-deps.sh`) and `tests/node/a2a.mjs` (`@a2a-js/sdk`, in
//! `tests/node`) drive `/a2a/{agentId}` of real servers started here: one without
//! authentication (with `slow`, an agent whose weather tool takes 4 s), one with the JWT
//! provider on, one in strict mode.

use std::time::Duration;

use agentry_agents::{Agent, FnTool};
use agentry_auth::{TokenOptions, create_token};
use agentry_server::AuthSettings;
use agentry_tests::{Backend, TestServer, new_id, pytest, repo, run_to_success};
use serde_json::json;

const SECRET: &str = "a2a-tests-secret-of-at-least-32-bytes";

fn token(sub: &str) -> String {
    create_token(
        &json!({"sub": sub, "name": sub}),
        SECRET.as_bytes(),
        &TokenOptions {
            expires_in: Some(Duration::from_secs(3600)),
            ..Default::default()
        },
    )
    .expect("a token")
}

/// An agent whose weather takes 4 s: a task to cancel, a stream to drop and re-attach to.
fn slow() -> Agent {
    let weather = FnTool::new(
        "get_weather",
        "Gets the weather of a city, slowly.",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        |args, _ctx| async move {
            tokio::time::sleep(Duration::from_secs(4)).await;
            Ok(json!({"city": args["city"], "temperatureC": 12, "condition": "cloudy"}))
        },
    );
    Agent::new("slow", "Slow").tool(std::sync::Arc::new(weather))
}

async fn servers() -> (TestServer, TestServer, TestServer) {
    let open = TestServer::start_with_app(Backend::Sqlite, AuthSettings::default(), |app| {
        app.agent(slow())
    })
    .await;
    let jwt = AuthSettings {
        jwt_secret: Some(SECRET.into()),
        ..Default::default()
    };
    let guarded = TestServer::start_with(Backend::Sqlite, jwt.clone(), |h| h).await;
    let strict = AuthSettings {
        strict: true,
        ..jwt
    };
    let strict = TestServer::start_with(Backend::Postgres, strict, |h| h).await;
    (open, guarded, strict)
}

/// Cards, a message, a stream in order, a task read, a slow run cancelled, a dropped stream
/// re-subscribed, the operator's refund through `input-required` and its approval, a token
/// required, another user's task not found in strict mode, and refusals as JSON-RPC errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_sdk_talks_to_every_agent() {
    let (open, guarded, strict) = servers().await;
    pytest(
        "tests/a2a/test_a2a_server.py",
        "a2a, pytest",
        vec![
            ("AGENTRY_A2A_URL", open.url("")),
            ("AGENTRY_A2A_JWT_URL", guarded.url("")),
            ("AGENTRY_A2A_TOKEN", token("a2a-user")),
            ("AGENTRY_A2A_STRICT_URL", strict.url("")),
            ("AGENTRY_A2A_TOKEN_ALICE", token("alice")),
            ("AGENTRY_A2A_TOKEN_BOB", token("bob")),
        ],
    )
    .await;
    open.stop().await;
    guarded.stop().await;
    strict.stop().await;
}

/// The JS SDK's default client: one message, one stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_js_sdk_sends_and_streams() {
    let open = TestServer::start(Backend::Sqlite).await;
    let mut node = std::process::Command::new("node");
    node.arg(repo().join("tests/node/a2a.mjs"))
        .arg(open.url("/a2a/assistant/"))
        .current_dir(repo().join("tests/node"));
    run_to_success(node, "tests/node/a2a.mjs").await;
    open.stop().await;
}

/// Two servers: an agent on one asks an agent on the other through `A2aToolset` (the tool
/// `ask_assistant`, called by the offline model for "ask assistant to ..."); once the remote
/// is stopped, the call is a clear tool error and the agent still answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_asks_an_agent_of_another_server() {
    let remote = TestServer::start(Backend::Sqlite).await;
    let card = remote.url("/a2a/assistant/.well-known/agent-card.json");
    let tools = agentry_a2a::A2aToolset::new()
        .agent(&card, None)
        .expect("a card URL")
        .tools();
    let local = TestServer::start_with_app(Backend::Sqlite, AuthSettings::default(), move |h| {
        h.agent(
            tools
                .into_iter()
                .fold(Agent::new("relay", "Relay"), Agent::tool),
        )
    })
    .await;
    let ask = json!({"input": "ask assistant to tell me the weather in Paris"});
    let answer = local.post_data("/agents/relay/text", &ask).await;
    let result = &answer["toolResults"][0];
    assert_eq!(result["toolName"], "ask_assistant", "{answer}");
    assert_ne!(result["isError"], true, "{answer}");
    assert_eq!(result["result"]["agent"], "assistant");
    let remote_text = result["result"]["text"].as_str().unwrap();
    assert!(
        remote_text.contains("Paris") && remote_text.contains("°C"),
        "{answer}"
    );
    assert_eq!(
        answer["text"],
        format!("assistant answered: {remote_text}"),
        "{answer}"
    );
    // Streamed, the remote's progress shows as the call's `tool-progress`.
    let events = local
        .sse_events(
            "/agents/relay/stream",
            &json!({"input": "ask assistant to tell me the weather in Rome"}),
        )
        .await;
    let progress: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "tool-progress")
        .collect();
    assert!(!progress.is_empty(), "{events:?}");
    assert!(
        progress
            .iter()
            .all(|p| p["toolName"] == "ask_assistant" && p["data"]["agent"] == "assistant")
    );
    let words: Vec<&str> = progress
        .iter()
        .filter_map(|p| p["data"]["text"].as_str())
        .collect();
    assert!(words.concat().contains("Rome"), "{words:?}");
    let call = events
        .iter()
        .position(|e| e["type"] == "tool-call")
        .unwrap();
    let done = events
        .iter()
        .position(|e| e["type"] == "tool-result")
        .unwrap();
    let first = events
        .iter()
        .position(|e| e["type"] == "tool-progress")
        .unwrap();
    assert!(call < first && first < done, "{events:?}");
    // The remote's task is a durable run there, from A2A.
    let task = result["result"]["taskId"].as_str().unwrap();
    let run = remote
        .get_data(&format!("/agents/assistant/runs/{task}"))
        .await;
    assert_eq!(run["status"], "completed", "{run}");

    remote.stop().await;
    let answer = local.post_data("/agents/relay/text", &ask).await;
    let result = &answer["toolResults"][0];
    assert_eq!(result["isError"], true, "{answer}");
    let error = result["result"].to_string();
    assert!(
        error.contains("cannot reach") || error.contains("went away"),
        "{answer}"
    );
    assert!(
        answer["text"]
            .as_str()
            .unwrap()
            .contains("The ask_assistant tool failed"),
        "{answer}"
    );
    local.stop().await;
}

/// A JSON-RPC request to agent `agent`'s A2A endpoint: its response.
async fn a2a(
    s: &TestServer,
    agent: &str,
    method: &str,
    params: serde_json::Value,
) -> serde_json::Value {
    let resp = s
        .client
        .post(s.url(&format!("/a2a/{agent}")))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .expect("an A2A request");
    assert_eq!(resp.status(), 200);
    resp.json().await.expect("a JSON-RPC response")
}

/// A user's message in A2A's shape.
fn message(
    parts: serde_json::Value,
    task: Option<&str>,
    context: Option<&str>,
) -> serde_json::Value {
    let mut m = json!({"messageId": new_id(), "role": "ROLE_USER", "parts": parts});
    if let Some(t) = task {
        m["taskId"] = json!(t);
    }
    if let Some(c) = context {
        m["contextId"] = json!(c);
    }
    json!({"message": m})
}

/// Asserts a JSON-RPC error of A2A `code` naming the error table's `table`.
fn assert_rpc_error(response: &serde_json::Value, code: i64, table: &str) {
    let error = &response["error"];
    assert_eq!(error["code"], code, "{response}");
    assert_eq!(error["data"][0]["metadata"]["code"], table, "{response}");
}

/// The application's rules, over A2A: a message over the limit (100,000 characters) is
/// `-32602` `invalid_request` and starts nothing, one of the limit is taken; a follow-up in a
/// task that waits for an approval is refused when it names another context or gives no
/// answer, answers the only pending approval, and once the task ended is `-32004`
/// `approval_not_pending`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a2a_refuses_over_the_limit_and_follows_up_by_the_applications_rules() {
    let s = TestServer::start(Backend::Sqlite).await;
    let context = new_id();
    let over = message(json!([{"text": "x".repeat(100_001)}]), None, Some(&context));
    assert_rpc_error(
        &a2a(&s, "assistant", "SendMessage", over).await,
        -32602,
        "invalid_request",
    );
    let listed = a2a(&s, "assistant", "ListTasks", json!({"contextId": context})).await;
    assert_eq!(listed["result"]["totalSize"], 0, "{listed}");
    let mut longest = message(json!([{"text": "x".repeat(100_000)}]), None, Some(&context));
    longest["configuration"] = json!({"returnImmediately": true});
    let taken = a2a(&s, "assistant", "SendMessage", longest).await;
    assert!(taken["result"]["task"]["id"].is_string(), "{taken}");

    let asked = message(
        json!([{"text": "refund order o-78 250 damaged box"}]),
        None,
        None,
    );
    let task = a2a(&s, "operator", "SendMessage", asked).await["result"]["task"].clone();
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{task}"
    );
    let (id, context) = (
        task["id"].as_str().unwrap(),
        task["contextId"].as_str().unwrap(),
    );
    let approve = json!([{"data": {"approved": true}}]);
    let elsewhere = message(approve.clone(), Some(id), Some("another-context"));
    assert_rpc_error(
        &a2a(&s, "operator", "SendMessage", elsewhere).await,
        -32602,
        "invalid_request",
    );
    let words = message(json!([{"text": "yes"}]), Some(id), Some(context));
    assert_rpc_error(
        &a2a(&s, "operator", "SendMessage", words).await,
        -32602,
        "invalid_request",
    );
    let approved = a2a(
        &s,
        "operator",
        "SendMessage",
        message(approve.clone(), Some(id), Some(context)),
    )
    .await;
    assert_eq!(
        approved["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{approved}"
    );
    let again = a2a(
        &s,
        "operator",
        "SendMessage",
        message(approve.clone(), Some(id), None),
    )
    .await;
    assert_rpc_error(&again, -32004, "approval_not_pending");
    let unknown = a2a(
        &s,
        "operator",
        "SendMessage",
        message(approve, Some("no-such-task"), None),
    )
    .await;
    assert_rpc_error(&unknown, -32001, "run_not_found");
    s.stop().await;
}
