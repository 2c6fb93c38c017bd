//! `/chat` consumed by the real `ai` npm package: its `DefaultChatTransport` (what `useChat`
//! uses) posts to the running server and `readUIMessageStream` assembles the reply; its `Chat`
//! (`AbstractChat`, what `useChat` wraps) answers tool approvals and resumes dropped streams
//! (`useChat({ resume: true })`). The package is installed into `tests/node` by
//! `scripts/install-test-deps.sh` (the README's set-up).

use std::path::PathBuf;
use std::process::Command;

use agentry_tests::{Backend, TestServer};
use serde_json::{Value, json};

fn node_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("node")
}

/// Fails, naming the set-up script, when the `ai` package is not installed.
fn install() {
    let package = node_dir().join("node_modules/ai/package.json");
    assert!(
        package.exists(),
        "{} is missing: run scripts/install-test-deps.sh (the README's set-up) first",
        package.display()
    );
}

/// Runs `node SCRIPT ARGS..` in `tests/node`; the script prints one JSON value.
async fn run_node(script: &str, args: Vec<String>) -> Value {
    let name = script.to_owned();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(&name)
            .args(&args)
            .current_dir(node_dir())
            .output()
            .expect("running node")
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "node {script} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{script} prints JSON: {e}\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

async fn run_chat(server: &TestServer, agent: &str, text: &str) -> Value {
    run_node(
        "chat.mjs",
        vec![server.base_url.clone(), agent.to_owned(), text.to_owned()],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ai_package_assembles_chat_replies() {
    tokio::task::spawn_blocking(install).await.unwrap();
    let server = TestServer::start(Backend::Sqlite).await;

    let msg = run_chat(&server, "writer", "hello from node").await;
    assert_eq!(msg["role"], "assistant", "{msg}");
    let parts = msg["parts"].as_array().unwrap();
    let text: String = parts
        .iter()
        .filter(|p| p["type"] == "text")
        .map(|p| p["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "You said: hello from node");

    let msg = run_chat(&server, "assistant", "What is the weather in Lisbon?").await;
    let parts = msg["parts"].as_array().unwrap();
    let tool = parts
        .iter()
        .find(|p| p["type"] == "tool-get_weather")
        .unwrap_or_else(|| panic!("no tool part in {msg}"));
    assert_eq!(tool["state"], "output-available", "{tool}");
    assert_eq!(tool["input"]["city"], "Lisbon");
    assert_eq!(tool["output"]["temperatureC"], 21);
    let text: String = parts
        .iter()
        .filter(|p| p["type"] == "text")
        .map(|p| p["text"].as_str().unwrap())
        .collect();
    assert!(text.contains("sunny"), "{msg}");
    server.stop().await;
}

/// The text of a message's text parts.
fn text_of(msg: &Value) -> String {
    msg["parts"]
        .as_array()
        .unwrap_or_else(|| panic!("no parts in {msg}"))
        .iter()
        .filter(|p| p["type"] == "text")
        .map(|p| p["text"].as_str().unwrap())
        .collect()
}

/// The part of `msg` for the tool `name` (`tool-<name>`), if any.
fn tool_part<'a>(msg: &'a Value, name: &str) -> Option<&'a Value> {
    let ty = format!("tool-{name}");
    msg["parts"].as_array()?.iter().find(|p| p["type"] == ty)
}

/// Runs approval.mjs: the `operator` agent's refund through the package's `Chat`, answered with
/// `addToolApprovalResponse` and sent by `sendAutomaticallyWhen` (`auto`) or `sendMessage()`
/// (`manual`). Checks what every round trip shares and returns the final assistant message.
async fn approval_round_trip(
    server: &TestServer,
    mode: &str,
    chat_id: &str,
    send: &str,
    reason: Option<&str>,
) -> Value {
    let mut args = vec![
        server.base_url.clone(),
        mode.to_owned(),
        chat_id.to_owned(),
        send.to_owned(),
    ];
    args.extend(reason.map(str::to_owned));
    let out = run_node("approval.mjs", args).await;
    let requests = out["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 2, "one request per turn: {out}");
    for r in requests {
        assert_eq!(r["method"], "POST", "{r}");
        assert_eq!(r["url"], server.url("/agents/operator/chat"), "{r}");
        assert_eq!(r["status"], 200, "{r}");
        assert_eq!(r["body"]["options"]["conversationId"], chat_id, "{r}");
    }
    // The message id of the stream is the run id (X-Run-Id), and the answer continues that run.
    let run_id = requests[0]["runId"].as_str().expect("X-Run-Id").to_owned();
    assert_eq!(requests[1]["runId"], run_id.as_str(), "{out}");

    let requested = &out["requested"];
    assert_eq!(requested["role"], "assistant", "{requested}");
    assert_eq!(requested["id"], run_id.as_str(), "{requested}");
    let lookup = tool_part(requested, "lookup_order")
        .unwrap_or_else(|| panic!("no lookup_order in {requested}"));
    assert_eq!(lookup["state"], "output-available", "{lookup}");
    assert_eq!(lookup["output"]["total"], 250, "{lookup}");
    let asked = tool_part(requested, "issue_refund")
        .unwrap_or_else(|| panic!("no issue_refund in {requested}"));
    assert_eq!(asked["state"], "approval-requested", "{asked}");
    assert_eq!(
        asked["input"],
        json!({"orderId": "o-1", "amount": 250, "reason": "damaged box"})
    );
    let approval_id = asked["approval"]["id"].as_str().expect("an approval id");
    assert!(!approval_id.is_empty(), "{asked}");

    // The answer: only the assistant message of the run, its part answered.
    let sent = requests[1]["body"]["messages"].as_array().unwrap();
    assert_eq!(sent.len(), 1, "{}", requests[1]);
    assert_eq!(sent[0]["id"], run_id.as_str(), "{}", requests[1]);
    assert_eq!(sent[0]["role"], "assistant");
    let answered = tool_part(&sent[0], "issue_refund").unwrap();
    assert_eq!(answered["state"], "approval-responded", "{answered}");
    assert_eq!(answered["approval"]["id"], approval_id, "{answered}");
    assert_eq!(
        answered["approval"]["approved"],
        mode == "approve",
        "{answered}"
    );

    // The continuation completed the same assistant message, not a new one.
    let messages = out["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{out}");
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["id"], run_id.as_str(), "{out}");
    let lookup = tool_part(&messages[1], "lookup_order").unwrap();
    assert_eq!(lookup["state"], "output-available", "{lookup}");
    messages[1].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ai_package_chat_approves_a_tool_call_and_the_run_completes() {
    tokio::task::spawn_blocking(install).await.unwrap();
    let server = TestServer::start(Backend::Sqlite).await;

    for send in ["auto", "manual"] {
        let chat_id = format!("approve-{send}");
        let msg = approval_round_trip(&server, "approve", &chat_id, send, None).await;
        let refund = tool_part(&msg, "issue_refund").unwrap();
        assert_eq!(refund["state"], "output-available", "{send}: {msg}");
        assert_eq!(
            refund["output"],
            json!({"orderId": "o-1", "refunded": 250, "refundId": "rf-o-1"}),
            "{send}: {msg}"
        );
        assert_eq!(refund["approval"]["approved"], true, "{send}: {msg}");
        let text = text_of(&msg);
        assert!(
            text.contains("Refunded 250 for order o-1."),
            "{send}: {msg}"
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ai_package_chat_denies_a_tool_call_with_a_reason() {
    tokio::task::spawn_blocking(install).await.unwrap();
    let server = TestServer::start(Backend::Sqlite).await;

    for send in ["auto", "manual"] {
        let chat_id = format!("deny-{send}");
        let msg = approval_round_trip(&server, "deny", &chat_id, send, Some("too much")).await;
        let refund = tool_part(&msg, "issue_refund").unwrap();
        assert_eq!(refund["state"], "output-denied", "{send}: {msg}");
        assert!(
            refund.get("output").is_none_or(Value::is_null),
            "{send}: {msg}"
        );
        assert_eq!(refund["approval"]["approved"], false, "{send}: {msg}");
        assert_eq!(refund["approval"]["reason"], "too much", "{send}: {msg}");
        let text = text_of(&msg);
        assert!(text.contains("was not approved: too much"), "{send}: {msg}");
        assert!(!text.contains("Refunded"), "{send}: {msg}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ai_package_chat_resumes_a_dropped_stream() {
    tokio::task::spawn_blocking(install).await.unwrap();
    let server = TestServer::start(Backend::Sqlite).await;
    let chat_id = "resume-1";

    // The connection drops after 3 events: start, start-step, tool-input-start.
    let out = run_node(
        "resume.mjs",
        vec![server.base_url.clone(), chat_id.to_owned(), "3".to_owned()],
    )
    .await;
    let run_id = out["runId"].as_str().expect("X-Run-Id").to_owned();
    let resume_url = server.url(&format!("/agents/operator/chat/{chat_id}/stream"));

    let requests = out["requests"].as_array().unwrap();
    let summary: Vec<(String, String, i64)> = requests
        .iter()
        .map(|r| {
            (
                r["method"].as_str().unwrap().to_owned(),
                r["url"].as_str().unwrap().to_owned(),
                r["status"].as_i64().unwrap(),
            )
        })
        .collect();
    let chat_url = server.url("/agents/operator/chat");
    assert_eq!(
        summary,
        [
            ("POST".to_owned(), chat_url.clone(), 200),
            // The package's default reconnect URL, `${api}/${chatId}/stream`.
            ("GET".to_owned(), resume_url.clone(), 200),
            ("GET".to_owned(), resume_url.clone(), 200),
            ("POST".to_owned(), chat_url, 200),
            ("GET".to_owned(), resume_url.clone(), 204),
            ("GET".to_owned(), resume_url, 204),
        ],
        "{out}"
    );
    for r in &requests[..4] {
        assert_eq!(r["runId"], run_id.as_str(), "{r}");
    }

    // Dropped as a network failure, before the approval request arrived.
    let dropped = &out["dropped"];
    assert_eq!(dropped["status"], "error", "{dropped}");
    assert_eq!(dropped["finish"]["isDisconnect"], true, "{dropped}");
    let partial = &dropped["messages"][1];
    assert_eq!(partial["id"], run_id.as_str(), "{dropped}");
    assert!(tool_part(partial, "issue_refund").is_none(), "{dropped}");

    // Resumed in the same chat and in a reloaded one: the run replayed up to its approval
    // request, in the one assistant message of the run.
    for which in ["resumed", "reloaded"] {
        let messages = out[which].as_array().unwrap();
        assert_eq!(messages.len(), 2, "{which}: {out}");
        assert_eq!(messages[0]["role"], "user");
        let msg = &messages[1];
        assert_eq!(msg["role"], "assistant", "{which}: {msg}");
        assert_eq!(msg["id"], run_id.as_str(), "{which}: {msg}");
        let lookup = tool_part(msg, "lookup_order").unwrap();
        assert_eq!(lookup["state"], "output-available", "{which}: {msg}");
        let refund = tool_part(msg, "issue_refund")
            .unwrap_or_else(|| panic!("{which}: no issue_refund in {msg}"));
        assert_eq!(refund["state"], "approval-requested", "{which}: {msg}");
        assert!(refund["approval"]["id"].is_string(), "{which}: {msg}");
    }

    // The reloaded chat's approval completed the run.
    let completed = out["completed"].as_array().unwrap();
    assert_eq!(completed.len(), 2, "{out}");
    let msg = &completed[1];
    assert_eq!(msg["id"], run_id.as_str(), "{msg}");
    let refund = tool_part(msg, "issue_refund").unwrap();
    assert_eq!(refund["state"], "output-available", "{msg}");
    assert_eq!(refund["output"]["refundId"], "rf-o-1", "{msg}");
    assert!(
        text_of(msg).contains("Refunded 250 for order o-1."),
        "{msg}"
    );

    // Nothing is active any more: 204, a null stream, a chat left empty and ready.
    let after = &out["afterCompletion"];
    assert!(after["reconnectToStream"].is_null(), "{after}");
    assert_eq!(after["status"], "ready", "{after}");
    assert!(after.get("error").is_none_or(Value::is_null), "{after}");
    assert_eq!(after["messages"], json!([]), "{after}");
    server.stop().await;
}
