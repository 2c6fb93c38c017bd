//! `/chat` consumed by the real `ai` npm package: its `DefaultChatTransport` (what `useChat`
//! uses) posts to the running server and `readUIMessageStream` assembles the reply. The package
//! is installed into `tests/node` by `scripts/install-test-deps.sh` (the README's set-up).

use std::path::PathBuf;
use std::process::Command;

use agentry_tests::{Backend, TestServer};
use serde_json::Value;

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

async fn run_chat(server: &TestServer, agent: &str, text: &str) -> Value {
    let base = server.base_url.clone();
    let (agent, text) = (agent.to_owned(), text.to_owned());
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .args(["chat.mjs", &base, &agent, &text])
            .current_dir(node_dir())
            .output()
            .expect("running node")
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "node failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).expect("the script prints the assembled message")
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
