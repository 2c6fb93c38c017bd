//! The example server's remote A2A agent (`AGENTRY_EXAMPLE_A2A_AGENT`), through the real
//! binary: one server lends another's `assistant` to its own `assistant` as `ask_assistant`.

mod common;

use common::replica::{Replica, get, post, sqlite_url};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_assistant_asks_the_remote_agent_it_was_given() {
    let (remote_db, _) = sqlite_url();
    let remote = Replica::start(&remote_db, "remote", &[]);
    let card = remote.url("/a2a/assistant/.well-known/agent-card.json");
    let (local_db, _) = sqlite_url();
    let local = Replica::start(
        &local_db,
        "local",
        &[("AGENTRY_EXAMPLE_A2A_AGENT", card.as_str())],
    );
    let (_, mine) = get(&local, "/a2a/assistant/.well-known/agent-card.json", None).await;
    let skills: Vec<&str> = mine["skills"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert!(skills.contains(&"ask_assistant"), "{mine}");
    let (_, answer) = post(
        &local,
        "/agents/assistant/text",
        json!({"input": "ask assistant to tell me the weather in Paris"}),
        None,
    )
    .await;
    let text = answer["data"]["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("assistant answered: The weather in Paris"),
        "{answer}"
    );
    assert_eq!(
        answer["data"]["toolResults"][0]["toolName"],
        "ask_assistant"
    );
}
