//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`, run on the
//! Node.js 22 of npm's `node` package; both installed into `tests/node` by
//! `scripts/install-test-deps.sh`) against `/mcp` of a real server: its server scenarios all
//! run, every scenario of a feature agentry offers passes, and exactly the scenarios of the
//! features it does not offer (the README's MCP section lists them) fail.
//!
//! The suite calls tools of fixed names for its tool scenarios: the server here lends them as
//! the tools of an agent `conformance` (`test_simple_text` answers text, `test_error_handling`
//! always fails), so that those scenarios go through agentry's own tool calls.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentry_agents::{Agent, FnTool};
use agentry_server::AuthSettings;
use agentry_tests::{Backend, TestServer, repo};
use serde_json::{Value, json};

/// The server scenarios of features agentry does not offer: logging, completions, tool results
/// other than text (images, audio, embedded resources), progress notifications, sampling,
/// elicitation, resources and prompts. The README's MCP section lists the same.
const NOT_OFFERED: &[&str] = &[
    "logging-set-level",
    "completion-complete",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "resources-subscribe",
    "resources-unsubscribe",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
];

/// The scenarios of what agentry offers: each must pass.
const OFFERED: &[&str] = &[
    "server-initialize",
    "ping",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-error",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
];

/// The longest the suite may take (it takes a few seconds).
const SUITE_TIMEOUT: Duration = Duration::from_secs(300);

/// The agent whose tools the suite's tool scenarios call by name.
fn conformance_agent() -> Agent {
    let text = FnTool::new(
        "test_simple_text",
        "Answers a simple text (the conformance suite's tools-call-simple-text).",
        json!({"type": "object", "properties": {}}),
        |_args, _ctx| async move { Ok(json!("This is a simple text response for testing.")) },
    );
    let error = FnTool::new(
        "test_error_handling",
        "Always fails (the conformance suite's tools-call-error).",
        json!({"type": "object", "properties": {}}),
        |_args, _ctx| async move {
            Err::<Value, String>("This tool intentionally returns an error for testing".into())
        },
    );
    Agent::new("conformance", "Conformance")
        .tool(Arc::new(text))
        .tool(Arc::new(error))
}

/// `tests/node`'s Node.js 22 and the suite's entry point, or a failure naming the script.
fn suite() -> (PathBuf, PathBuf) {
    let modules = repo().join("tests/node/node_modules");
    let node = modules.join(".bin/node");
    let cli = modules.join("@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        node.exists() && cli.exists(),
        "{} or {} is missing: run scripts/install-test-deps.sh (the README's set-up) first",
        node.display(),
        cli.display()
    );
    (node, cli)
}

/// Runs `command` to its end within `limit` (killed past it), printing its output.
fn run_bounded(mut command: Command, limit: Duration) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the conformance suite");
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("waiting for the suite").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the conformance suite took longer than {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().expect("the suite's output");
    println!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Each scenario the suite saved in `dir` (`server-<scenario>-<time>/checks.json`), with
/// whether it passed: no check failed nor warned (the suite's own rule).
fn outcomes(dir: &Path) -> Vec<(String, bool, String)> {
    // `-2026-11-28T11-54-28-696Z`
    const TIME_SUFFIX: usize = 25;
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("the suite's results") {
        let path = entry.expect("a result").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let scenario = name
            .strip_prefix("server-")
            .and_then(|n| n.get(..n.len().checked_sub(TIME_SUFFIX)?))
            .unwrap_or_else(|| panic!("an unexpected result folder {name}"))
            .to_owned();
        let checks: Vec<Value> = serde_json::from_str(
            &std::fs::read_to_string(path.join("checks.json")).expect("checks.json"),
        )
        .expect("checks.json is JSON");
        let passed = !checks.is_empty()
            && checks
                .iter()
                .all(|c| c["status"] != "FAILURE" && c["status"] != "WARNING");
        let why = checks
            .iter()
            .filter(|c| c["status"] != "SUCCESS")
            .map(|c| format!("{}: {}", c["name"], c["errorMessage"]))
            .collect::<Vec<_>>()
            .join("; ");
        out.push((scenario, passed, why));
    }
    out
}

/// Every server scenario of the suite against `/mcp`: what agentry offers passes, exactly the
/// README's list of what it does not offer fails (a regression, or a scenario that starts to
/// pass, fails this test), and the README names each scenario not offered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_mcp_conformance_suite_passes_what_agentry_offers() {
    let (node, cli) = suite();
    let s = TestServer::start_with_app(Backend::Sqlite, AuthSettings::default(), |h| {
        h.agent(conformance_agent())
    })
    .await;
    let results = std::env::temp_dir().join(format!(
        "agentry-mcp-conformance-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let mut command = Command::new(node);
    command
        .arg(cli)
        .args(["server", "--url", &s.url("/mcp"), "-o"])
        .arg(&results)
        .current_dir(repo().join("tests/node"));
    tokio::task::spawn_blocking(move || run_bounded(command, SUITE_TIMEOUT))
        .await
        .unwrap();
    s.stop().await;
    let outcomes = outcomes(&results);
    let _ = std::fs::remove_dir_all(&results);

    let ran: BTreeSet<&str> = outcomes.iter().map(|(s, _, _)| s.as_str()).collect();
    let failed: BTreeSet<&str> = outcomes
        .iter()
        .filter(|(_, passed, _)| !passed)
        .map(|(s, _, _)| s.as_str())
        .collect();
    let not_offered: BTreeSet<&str> = NOT_OFFERED.iter().copied().collect();
    for scenario in OFFERED.iter().chain(NOT_OFFERED) {
        assert!(ran.contains(scenario), "{scenario} did not run: {ran:?}");
    }
    let unexpected: Vec<String> = outcomes
        .iter()
        .filter(|(s, passed, _)| !passed && !not_offered.contains(s.as_str()))
        .map(|(s, _, why)| format!("{s} ({why})"))
        .collect();
    assert!(
        unexpected.is_empty(),
        "scenarios of what agentry offers failed: {unexpected:?}"
    );
    let now_passing: Vec<&&str> = not_offered.difference(&failed).collect();
    assert!(
        now_passing.is_empty(),
        "scenarios listed as not offered passed (update NOT_OFFERED and the README): \
         {now_passing:?}"
    );

    let readme = std::fs::read_to_string(repo().join("README.md")).expect("the README");
    let mcp = readme
        .split("## MCP")
        .nth(1)
        .expect("the README's MCP section");
    for scenario in NOT_OFFERED {
        assert!(
            mcp.contains(&format!("`{scenario}`")),
            "the README's MCP section does not list {scenario}"
        );
    }
}
