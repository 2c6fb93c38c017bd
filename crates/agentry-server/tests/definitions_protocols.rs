//! `call: a2a` and `call: mcp` of Serverless Workflow definitions, black-box, with the real
//! binary: one `agentry serve --definitions DIR` (the caller, without the examples) calls
//! another `agentry serve` with the examples (the remote):
//!
//! - `call: a2a` to the remote's example agent `assistant`, by its card
//!   (`/a2a/assistant/.well-known/agent-card.json`, A2A 1.0: the DSL's `message/send` sent as
//!   `SendMessage`) and by its `server` URL (`message/stream`: the stream's results); a JSON-RPC
//!   error (an unknown task) is the DSL's `runtime` error;
//! - `call: mcp` to the remote's `/mcp` (Streamable HTTP): `tools/list` shows the example
//!   workflow `run_word-count`, `tools/call` runs it;
//! - `call: mcp` over stdio: refused by default (`authorization`), run with
//!   `--definitions-trusted`.
//!
//! Every test has its own servers, and its own time limit ([`TEST_LIMIT`]).

mod common;

use std::future::Future;
use std::process::Command;
use std::time::{Duration, Instant};

use common::definitions::Server;
use serde_json::{Value, json};

/// The longest any test of this file may take.
const TEST_LIMIT: Duration = Duration::from_secs(60);
/// The longest one wait for an execution's end may take.
const PATIENCE: Duration = Duration::from_secs(30);

/// The DSL's standard error types (`dsl-reference.md`, "Standard error types").
const ERRORS: &str = "https://serverlessworkflow.io/spec/1.0.0/errors/";

/// Runs a test's body within [`TEST_LIMIT`].
async fn within(body: impl Future<Output = ()>) {
    tokio::time::timeout(TEST_LIMIT, body)
        .await
        .unwrap_or_else(|_| panic!("the test took longer than {TEST_LIMIT:?}"));
}

// ---------------------------------------------------------------------------------------------
// HTTP.
// ---------------------------------------------------------------------------------------------

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(40))
        .no_proxy()
        .build()
        .expect("a client")
}

/// A response's status and JSON body (`Null` when it has none).
async fn answer(resp: reqwest::RequestBuilder) -> (u16, Value) {
    let resp = resp.send().await.expect("a response");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// A fresh id with a readable prefix.
fn new_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// Runs `workflow` with `input` to its end: its state (`completed` or `error`).
async fn execute(s: &Server, workflow: &str, input: Value) -> Value {
    let id = new_id(workflow);
    let body = json!({"input": input, "options": {"executionId": id}});
    let (status, started) = answer(
        client()
            .post(s.url(&format!("/workflows/{workflow}/execute")))
            .json(&body),
    )
    .await;
    assert!(
        status == 200 || started["code"] == "execution_failed",
        "{status} {started}\n{}",
        s.log()
    );
    let began = Instant::now();
    loop {
        let (status, st) =
            answer(client().get(s.url(&format!("/workflows/{workflow}/executions/{id}/state"))))
                .await;
        if status == 200 && matches!(st["data"]["status"].as_str(), Some("completed" | "error")) {
            return st["data"].clone();
        }
        assert!(
            began.elapsed() < PATIENCE,
            "{workflow} did not end: {st:#}\n{}",
            s.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs `workflow`, which must complete: its result.
async fn result_of(s: &Server, workflow: &str, input: Value) -> Value {
    let st = execute(s, workflow, input).await;
    assert_eq!(st["status"], "completed", "{st:#}\n{}", s.log());
    st["result"].clone()
}

/// Runs `workflow`, which must fail: its error.
async fn error_of(s: &Server, workflow: &str, input: Value) -> Value {
    let st = execute(s, workflow, input).await;
    assert_eq!(st["status"], "error", "{st:#}\n{}", s.log());
    st["error"].clone()
}

fn assert_dsl_error(error: &Value, kind: &str, status: u64) {
    assert_eq!(error["type"], format!("{ERRORS}{kind}"), "{error:#}");
    assert_eq!(error["status"], status, "{error:#}");
}

// ---------------------------------------------------------------------------------------------
// The definitions.
// ---------------------------------------------------------------------------------------------

/// A document of one task, `call`, whose `with` is `with` (YAML, indented for its place).
fn one_call(name: &str, function: &str, with: &str) -> (String, String) {
    let yaml = format!(
        "document:\n  dsl: '1.0.3'\n  namespace: protocols\n  name: {name}\n  version: '1.0.0'\n\
         do:\n  - callAgent:\n      call: {function}\n      with:\n{with}"
    );
    (name.to_owned(), yaml)
}

/// `message/send` to the agent whose card is `.card`, the question `.question`.
fn ask_by_card() -> (String, String) {
    one_call(
        "ask-by-card",
        "a2a",
        r#"        method: message/send
        agentCard:
          endpoint: ${ .card }
        parameters:
          message:
            parts:
              - kind: text
                text: ${ .question }
"#,
    )
}

/// `message/stream` to the agent at `.server`, the question `.question`.
fn stream_by_server() -> (String, String) {
    one_call(
        "stream-by-server",
        "a2a",
        r#"        method: message/stream
        server: ${ .server }
        parameters:
          message:
            parts:
              - kind: text
                text: ${ .question }
"#,
    )
}

/// `tasks/get` of the task `.task` of the agent at `.server`.
fn get_task() -> (String, String) {
    one_call(
        "get-task",
        "a2a",
        r#"        method: tasks/get
        server: ${ .server }
        parameters:
          id: ${ .task }
"#,
    )
}

/// `tools/list` of the MCP server at `.mcp`.
fn list_tools() -> (String, String) {
    one_call(
        "list-tools",
        "mcp",
        r#"        method: tools/list
        transport:
          http:
            endpoint: ${ .mcp }
"#,
    )
}

/// `tools/call` of `run_word-count` on `.text`, at the MCP server `.mcp`.
fn count_words() -> (String, String) {
    one_call(
        "count-words",
        "mcp",
        r#"        method: tools/call
        parameters:
          name: run_word-count
          arguments:
            text: ${ .text }
        client:
          name: definitions-test
          version: '1.0'
        transport:
          http:
            endpoint: ${ .mcp }
"#,
    )
}

/// `tools/call` of `echo` on `.text`, at an MCP server over stdio (Python, `.python`).
fn stdio_echo() -> (String, String) {
    one_call(
        "stdio-echo",
        "mcp",
        r#"        method: tools/call
        parameters:
          name: echo
          arguments:
            text: ${ .text }
        timeout:
          seconds: 20
        transport:
          stdio:
            command: ${ .python }
            arguments:
              - -c
              - |
                import sys, json
                for line in sys.stdin:
                    m = json.loads(line)
                    if "id" not in m:
                        continue
                    if m["method"] == "initialize":
                        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {}, "serverInfo": {"name": "py", "version": "1"}}
                    else:
                        r = {"content": [{"type": "text", "text": m["params"]["arguments"]["text"]}]}
                    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
"#,
    )
}

/// The Python interpreter's own path.
fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    String::from_utf8(out.stdout)
        .expect("a path")
        .trim()
        .to_owned()
}

fn all_definitions() -> Vec<(String, String)> {
    vec![
        ask_by_card(),
        stream_by_server(),
        get_task(),
        list_tools(),
        count_words(),
        stdio_echo(),
    ]
}

fn caller(args: &[&str]) -> Server {
    let defs = all_definitions();
    let refs: Vec<(&str, String)> = defs.iter().map(|(n, y)| (n.as_str(), y.clone())).collect();
    Server::serve(Some(&refs), &[], args)
}

// ---------------------------------------------------------------------------------------------
// The tests.
// ---------------------------------------------------------------------------------------------

const QUESTION: &str = "What is the weather in Paris?";

/// A definition asks the remote's `assistant` by its A2A 1.0 card: the answer is the task,
/// completed, its artifact the assistant's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a2a_asks_another_agentrys_agent_by_its_card() {
    within(async {
        let remote = Server::serve(None, &[], &[]);
        let caller = caller(&[]);
        let card = remote.url("/a2a/assistant/.well-known/agent-card.json");
        let got = result_of(
            &caller,
            "ask-by-card",
            json!({"card": card, "question": QUESTION}),
        )
        .await;
        let task = &got["task"];
        assert_eq!(
            task["status"]["state"],
            "TASK_STATE_COMPLETED",
            "{got:#}\n{}",
            remote.log()
        );
        let text = task["artifacts"][0]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.contains("Paris"), "{got:#}");
        // The message went as 1.0 spells it (the role `ROLE_USER`, the part without `kind`).
        let asked = task["history"]
            .as_array()
            .and_then(|h| h.iter().find(|m| m["role"] == "ROLE_USER"))
            .unwrap_or_else(|| panic!("the question in the history: {got:#}"));
        assert_eq!(asked["parts"][0]["text"], QUESTION, "{got:#}");
    })
    .await;
}

/// `message/stream` to the remote's `assistant` by its JSON-RPC URL (no card: sent as 0.3
/// names it, then as 1.0 once the server says it does not know that method): every result of
/// the stream, the task first, its completion last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a2a_streams_from_another_agentrys_agent_by_its_url() {
    within(async {
        let remote = Server::serve(None, &[], &[]);
        let caller = caller(&[]);
        let got = result_of(
            &caller,
            "stream-by-server",
            json!({"server": remote.url("/a2a/assistant"), "question": QUESTION}),
        )
        .await;
        let events = got
            .as_array()
            .unwrap_or_else(|| panic!("an array: {got:#}"));
        assert!(events.len() >= 2, "{got:#}");
        assert!(events[0].get("task").is_some(), "{got:#}");
        let last = events.last().unwrap_or(&Value::Null);
        assert_eq!(
            last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{got:#}"
        );
    })
    .await;
}

/// A JSON-RPC error of the agent (an unknown task) is the DSL's `runtime` error, its message
/// in `detail`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_a2a_error_is_a_runtime_error() {
    within(async {
        let remote = Server::serve(None, &[], &[]);
        let caller = caller(&[]);
        let error = error_of(
            &caller,
            "get-task",
            json!({"server": remote.url("/a2a/assistant"), "task": "no-such-task"}),
        )
        .await;
        assert_dsl_error(&error, "runtime", 500);
        assert_eq!(error["instance"], "/do/0/callAgent", "{error:#}");
        assert!(
            error["detail"].as_str().is_some_and(|d| !d.is_empty()),
            "{error:#}"
        );
    })
    .await;
}

/// `tools/list` of the remote's `/mcp` shows its example workflow as `run_word-count`, and
/// `tools/call` runs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_lists_and_calls_another_agentrys_tools() {
    within(async {
        let remote = Server::serve(None, &[], &[]);
        let caller = caller(&[]);
        let mcp = remote.url("/mcp");
        let listed = result_of(&caller, "list-tools", json!({"mcp": mcp})).await;
        let names: Vec<&str> = listed["tools"]
            .as_array()
            .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
            .unwrap_or_default();
        assert!(names.contains(&"run_word-count"), "{listed:#}");
        assert!(names.contains(&"ask_assistant"), "{listed:#}");

        let counted = result_of(
            &caller,
            "count-words",
            json!({"mcp": mcp, "text": "one two three four"}),
        )
        .await;
        assert_ne!(counted["isError"], true, "{counted:#}");
        let text = counted.to_string();
        assert!(text.contains("\"words\":4"), "{counted:#}");
    })
    .await;
}

/// An MCP stdio transport runs a command: refused unless the operator trusts the definitions,
/// as the DSL's `authorization` error naming the setting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_stdio_is_refused_by_default() {
    within(async {
        let caller = caller(&[]);
        let error = error_of(
            &caller,
            "stdio-echo",
            json!({"python": python(), "text": "hello"}),
        )
        .await;
        assert_dsl_error(&error, "authorization", 403);
        assert!(
            error["detail"]
                .as_str()
                .is_some_and(|d| d.contains("AGENTRY_DEFINITIONS_TRUSTED")),
            "{error:#}"
        );
    })
    .await;
}

/// With `--definitions-trusted`, an MCP stdio transport runs its command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_stdio_runs_when_the_definitions_are_trusted() {
    within(async {
        let caller = caller(&["--definitions-trusted"]);
        let got = result_of(
            &caller,
            "stdio-echo",
            json!({"python": python(), "text": "hello"}),
        )
        .await;
        assert_eq!(got["content"][0]["text"], "hello", "{got:#}");
    })
    .await;
}
