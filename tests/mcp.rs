//! MCP with the official Python SDK (pip `mcp`, installed into `.venv-tools` by
//! `scripts/install-test-deps.sh`): `tests/mcp/test_mcp_server.py` drives `/mcp` of real
//! servers started here, one without authentication and one with the JWT provider on; and an
//! agent uses the tools of `tests/mcp/weather_server.py`, a real MCP server written with the
//! same SDK, over Streamable HTTP and over stdio.

use std::process::Command;
use std::time::Duration;

use agentry_auth::{TokenOptions, create_token};
use agentry_core::agent::Agent;
use agentry_mcp::{McpServer, McpToolset};
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
    let s = TestServer::start_with(Backend::Sqlite, AuthSettings::default(), move |h| {
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
