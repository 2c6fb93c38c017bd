//! A2A with the official SDKs: `tests/a2a/test_a2a_server.py` (Python `a2a-sdk`, installed into
//! `.venv-tools` by `scripts/install-test-deps.sh`) and `tests/node/a2a.mjs` (`@a2a-js/sdk`, in
//! `tests/node`) drive `/a2a/{agentId}` of real servers started here: one without
//! authentication (with `slow`, an agent whose weather tool takes 4 s), one with the JWT
//! provider on, one in strict mode.

use std::time::Duration;

use agentry_auth::{TokenOptions, create_token};
use agentry_core::agent::{Agent, FnTool};
use agentry_server::AuthSettings;
use agentry_tests::{Backend, TestServer, pytest, repo, run_to_success};
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
