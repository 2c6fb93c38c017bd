//! MCP with the official Python SDK (pip `mcp`, installed into `.venv-tools` by
//! `scripts/install-test-deps.sh`): `tests/mcp/test_mcp_server.py` drives `/mcp` of real
//! servers started here, one without authentication and one with the JWT provider on.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use agentry_auth::{TokenOptions, create_token};
use agentry_server::AuthSettings;
use agentry_tests::{Backend, TestServer};
use serde_json::json;

const SECRET: &str = "mcp-tests-secret-of-at-least-32-bytes";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The virtualenv's Python, failing with the set-up script's name when the SDK is missing.
fn python() -> PathBuf {
    let python = repo().join(".venv-tools/bin/python");
    let ok = python.exists()
        && Command::new(&python)
            .args(["-c", "import mcp, pytest"])
            .status()
            .is_ok_and(|s| s.success());
    assert!(
        ok,
        "the MCP Python SDK is missing from .venv-tools: run scripts/install-test-deps.sh \
         (the README's set-up) first"
    );
    python
}

/// Runs pytest on `tests/mcp/<file>` with `env`; fails with its report.
pub async fn pytest(file: &str, env: Vec<(&'static str, String)>) {
    let python = tokio::task::spawn_blocking(python).await.unwrap();
    let target = format!("tests/mcp/{file}");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .args(["-m", "pytest", &target, "-q", "-p", "no:cacheprovider"])
            .current_dir(repo())
            .envs(env)
            .output()
            .expect("running pytest")
    })
    .await
    .unwrap();
    let report = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{report}");
    assert!(out.status.success(), "the MCP tests failed:\n{report}");
}

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
        "test_mcp_server.py",
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
