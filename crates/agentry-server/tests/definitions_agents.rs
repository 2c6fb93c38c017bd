//! Agent files (`DIR/agents/*.yaml`), black-box, with the real binary: the examples of
//! `examples/definitions/agents/` listed in `/agents`, chatting through `/chat` with the `ai`
//! package's client, the tools of a file-defined MCP server (over stdio), an approval rule that
//! fails closed (denied, or past its deadline, the model is told), a remote A2A agent and a
//! workflow as tools; a secret used as a header or a model's key never stored nor logged;
//! `agentry check` on good and bad agent files.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::definitions::*;
use serde_json::{Value, json};

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fresh definitions folder with `files` (path under it, text); removed on drop.
struct Folder(PathBuf);

impl Folder {
    fn new(files: &[(String, String)]) -> Folder {
        let dir = std::env::temp_dir().join(format!("agentry-agents-{}", uuid::Uuid::new_v4()));
        for (path, text) in files {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).expect("a folder");
            std::fs::write(path, text).expect("a file");
        }
        Folder(dir)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The files of `examples/definitions/` (path under it, text), `127.0.0.1:3141` made `port`.
fn examples(port: u16) -> Vec<(String, String)> {
    let root = repo().join("examples/definitions");
    let mut files = Vec::new();
    for sub in ["workflows", "agents", "mcp"] {
        for entry in std::fs::read_dir(root.join(sub)).expect("the examples") {
            let path = entry.expect("an example").path();
            let text = std::fs::read_to_string(&path)
                .expect("an example")
                .replace("127.0.0.1:3141", &format!("127.0.0.1:{port}"));
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            files.push((format!("{sub}/{name}"), text));
        }
    }
    files
}

/// Serves `dir` (trusted to run commands) with `env`, no examples unless `env` says.
fn serve(dir: &Folder, env: &[(&str, &str)]) -> Server {
    let mut all = vec![("AGENTRY_NO_EXAMPLES", "1")];
    all.extend_from_slice(env);
    Server::serve(
        None,
        &all,
        &["--definitions", dir.path(), "--definitions-trusted"],
    )
}

/// `POST /agents/{agent}/text` with `text`: the answer's `data`.
async fn ask(s: &Server, agent: &str, text: &str) -> Value {
    let (status, body) = post(
        s,
        &format!("/agents/{agent}/text"),
        &json!({"input": text}),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}\n{}", s.log());
    body["data"].clone()
}

/// One user message through the `ai` package's chat transport (tests/node/chat.mjs): the
/// assembled assistant message.
fn chat_with_the_ai_package(s: &Server, agent: &str, text: &str) -> Value {
    let node = repo().join("tests/node");
    assert!(
        node.join("node_modules/ai/package.json").exists(),
        "tests/node/node_modules/ai is missing: run scripts/install-test-deps.sh first"
    );
    let out = Command::new("node")
        .args(["chat.mjs", &s.url(""), agent, text])
        .current_dir(node)
        .output()
        .expect("running node");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        s.log()
    );
    serde_json::from_slice(&out.stdout).expect("chat.mjs prints JSON")
}

/// The part of a UI message for the tool `name`.
fn tool_part<'a>(msg: &'a Value, name: &str) -> &'a Value {
    msg["parts"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["type"] == format!("tool-{name}")))
        .unwrap_or_else(|| panic!("no tool-{name} part in {msg}"))
}

fn text_of(msg: &Value) -> String {
    msg["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["text"].as_str())
        .collect()
}

/// An agent file like the example refund desk whose approvals expire after a second.
const HASTY_DESK: &str = r#"
id: hasty-desk
instructions: You refund orders.
tools:
  - mcp:
      stdio: { command: python3, arguments: [mcp/orders.py] }
      tools: [lookup_order, issue_refund]
approvals:
  issue_refund: { within: PT1S, denial: Nobody was there }
"#;

/// A workflow that "calculates", and an agent whose tool `calculate` runs it.
const CALC_WORKFLOW: &str = "
document: { dsl: '1.0.3', namespace: t, name: calc, version: '1.0.0' }
input:
  schema: { format: json, document: { type: object, properties: { expression: { type: string } }, required: [expression] } }
do:
  - answer:
      set:
        expression: '${ .expression }'
        result: 42
        execution: '${ $workflow.id }'
";
const CALCULATOR: &str = "
id: calculator
tools:
  - workflow: { id: calc, name: calculate, description: Calculates. }
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_agents_are_listed_chat_and_use_their_tools() {
    within(async {
        let port = common::free_port();
        let mut files = examples(port);
        files.push(("agents/hasty-desk.yaml".into(), HASTY_DESK.into()));
        files.push(("workflows/calc.yaml".into(), CALC_WORKFLOW.into()));
        files.push(("agents/calculator.yaml".into(), CALCULATOR.into()));
        let dir = Folder::new(&files);
        let bind = format!("127.0.0.1:{port}");
        let s = serve(
            &dir,
            &[
                ("AGENTRY_NO_EXAMPLES", "0"),
                ("AGENTRY_BIND", &bind),
                ("AGENTRY_LEASE_TTL", "1s"),
            ],
        );

        // Listed like the compiled agents, with their tools and model.
        let (_, agents) = answer(client().get(s.url("/agents"))).await;
        let find = |id: &str| {
            agents["data"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["id"] == id)
                .cloned()
                .unwrap_or_else(|| panic!("no agent {id} in {agents}"))
        };
        let desk = find("refund-desk");
        assert_eq!(
            desk["tools"],
            json!(["lookup_order", "issue_refund"]),
            "{desk}"
        );
        assert_eq!(desk["model"], "offline");
        assert_eq!(desk["memory"]["config"]["contextLimit"], 20);
        let concierge = find("concierge");
        assert_eq!(
            concierge["tools"],
            json!([
                "ask_assistant",
                "count_words",
                "server_health",
                "delegate_task"
            ]),
            "{concierge}"
        );
        assert_eq!(concierge["model"], "offline", "no key: the offline model");
        // MCP and A2A show them too.
        let (status, card) =
            answer(client().get(s.url("/a2a/refund-desk/.well-known/agent-card.json"))).await;
        assert_eq!(status, 200, "{card}");

        // The MCP server's tools through /chat, with the `ai` package's client.
        let s2 = &s;
        let msg = tokio::task::block_in_place(|| {
            chat_with_the_ai_package(s2, "refund-desk", "refund order o-1 40 damaged")
        });
        let refund = tool_part(&msg, "issue_refund");
        assert_eq!(refund["state"], "output-available", "{msg}");
        assert_eq!(refund["output"]["refundId"], "rf-o-1", "{msg}");
        assert_eq!(text_of(&msg), "Refunded 40 for order o-1.", "{msg}");

        // Over 50: the durable run waits for a person; denied, the model is told.
        let waiting = ask(&s, "refund-desk", "refund order o-2 80 damaged").await;
        assert_eq!(waiting["status"], "suspended", "{waiting}");
        let pending = &waiting["pendingApprovals"][0];
        assert_eq!(pending["toolName"], "issue_refund", "{waiting}");
        let run = waiting["runId"].as_str().unwrap();
        let path = format!(
            "/agents/refund-desk/runs/{run}/approvals/{}",
            pending["approvalId"].as_str().unwrap()
        );
        let (status, body) = post(
            &s,
            &path,
            &json!({"approved": false, "reason": "too much"}),
            None,
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let done = wait_for_run(&s, "refund-desk", run).await;
        assert_eq!(
            done["text"], "The refund of 80 for order o-2 was not approved: too much.",
            "{done}"
        );
        let denial = serde_json::to_string(&done).unwrap();
        assert!(
            denial.contains("Refund not approved by the desk: too much"),
            "{done}"
        );

        // Past its deadline, a request counts as denied.
        let waiting = ask(&s, "hasty-desk", "refund order o-3 5 late").await;
        assert_eq!(waiting["status"], "suspended", "{waiting}");
        let run = waiting["runId"].as_str().unwrap();
        let done = wait_for_run(&s, "hasty-desk", run).await;
        let told = serde_json::to_string(&done).unwrap();
        assert!(
            told.contains("Nobody was there: nobody answered before the approval deadline"),
            "{done}"
        );

        // A remote A2A agent (the example assistant, over this server's A2A).
        let asked = ask(&s, "concierge", "ask assistant to say hello").await;
        assert_eq!(
            asked["text"], "assistant answered: You said: say hello",
            "{asked}"
        );

        // A workflow as a tool: an execution for the calling user.
        let calc = ask(&s, "calculator", "calculate 6 * 7").await;
        let result = &calc["toolResults"][0]["result"];
        assert_eq!(
            (&result["expression"], &result["result"]),
            (&json!("6 * 7"), &json!(42)),
            "{calc}"
        );
        assert!(calc["text"].as_str().unwrap().contains("42"), "{calc}");
    })
    .await;
}

const JWT_SECRET: &str = "agent-files-tests-secret-of-32-bytes";

fn token(sub: &str) -> String {
    agentry_auth::create_token(
        &json!({"sub": sub, "roles": []}),
        JWT_SECRET.as_bytes(),
        &agentry_auth::TokenOptions::default(),
    )
    .expect("a token")
}

/// In strict mode, the execution a workflow tool starts is the calling user's: its context
/// names them, and another user is refused it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_tool_runs_as_the_calling_user() {
    within(async {
        let dir = Folder::new(&[
            ("workflows/calc.yaml".into(), CALC_WORKFLOW.into()),
            ("agents/calculator.yaml".into(), CALCULATOR.into()),
        ]);
        let s = serve(
            &dir,
            &[
                ("AGENTRY_JWT_SECRET", JWT_SECRET),
                ("AGENTRY_AUTH_STRICT", "1"),
            ],
        );
        let (alice, bob) = (token("alice"), token("bob"));
        let (status, body) = post(
            &s,
            "/agents/calculator/text",
            &json!({"input": "calculate 6 * 7"}),
            Some(&alice),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let result = &body["data"]["toolResults"][0]["result"];
        let execution = result["execution"].as_str().expect("the execution's id");
        let path = format!("/workflows/calc/executions/{execution}/state");
        let (status, mine) = answer(client().get(s.url(&path)).bearer_auth(&alice)).await;
        assert_eq!(
            (status, &mine["data"]["status"]),
            (200, &json!("completed")),
            "{mine}"
        );
        assert_eq!(mine["data"]["context"]["userId"], "alice", "{mine}");
        let (status, theirs) = answer(client().get(s.url(&path)).bearer_auth(&bob)).await;
        assert_eq!(
            (status, &theirs["code"]),
            (403, &json!("forbidden")),
            "{theirs}"
        );
    })
    .await;
}

/// Polls a durable run until it completes: its state's `data`.
async fn wait_for_run(s: &Server, agent: &str, run: &str) -> Value {
    let started = std::time::Instant::now();
    loop {
        let (status, body) =
            answer(client().get(s.url(&format!("/agents/{agent}/runs/{run}")))).await;
        assert_eq!(status, 200, "{body}");
        if body["data"]["status"] == "completed" {
            return body["data"].clone();
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the run never completed: {body}\n{}",
            s.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// A stand-in for a weather service that answers with the `Authorization` header it got.
struct EchoAuthorization;

impl wiremock::Respond for EchoAuthorization {
    fn respond(&self, request: &wiremock::Request) -> wiremock::ResponseTemplate {
        let auth = request
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        wiremock::ResponseTemplate::new(200).set_body_json(
            json!({"city": "Paris", "temperatureC": 12, "condition": format!("seen by {auth}")}),
        )
    }
}

const SECRET: &str = "s3cr3t-weather-token-7f1c";
const MODEL_KEY: &str = "sk-model-key-9e2b";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_used_as_a_header_or_a_key_is_never_stored_nor_logged() {
    within(async {
        let weather = wiremock::MockServer::start().await;
        wiremock::Mock::given(wiremock::matchers::method("GET"))
            .respond_with(EchoAuthorization)
            .mount(&weather)
            .await;
        let agent = format!(
            r#"
id: forecaster
secrets: [weatherToken]
tools:
  - http:
      name: get_weather
      description: The weather at a city.
      input: {{ type: object, properties: {{ city: {{ type: string }} }}, required: [city] }}
      request:
        method: get
        endpoint: '{}/weather/{{city}}'
        headers: {{ Authorization: '${{ "Bearer " + $secrets.weatherToken }}' }}
"#,
            weather.uri()
        );
        // The same agent on a model of its own, with a key: listed with that model.
        let keyed = "
id: keyed
model: { name: house-model, baseUrl: 'http://127.0.0.1:9/v1', key: '${ $secrets.modelKey }' }
secrets: [modelKey]
";
        let dir = Folder::new(&[
            ("agents/forecaster.yaml".into(), agent),
            ("agents/keyed.yaml".into(), keyed.into()),
        ]);
        let s = serve(
            &dir,
            &[
                ("AGENTRY_SECRET_WEATHERTOKEN", SECRET),
                ("AGENTRY_SECRET_MODELKEY", MODEL_KEY),
                ("RUST_LOG", "debug"),
            ],
        );
        let (_, agents) = answer(client().get(s.url("/agents"))).await;
        assert!(
            agents.to_string().contains("\"model\":\"house-model\""),
            "{agents}"
        );

        let answered = ask(&s, "forecaster", "What is the weather in Paris?").await;
        assert_eq!(answered["status"], "completed", "{answered}");
        // The header was sent, and its answer came back with the secret hidden.
        let got = weather.received_requests().await.unwrap();
        assert_eq!(
            got[0].headers.get("authorization").unwrap(),
            &format!("Bearer {SECRET}")
        );
        assert_eq!(
            answered["toolResults"][0]["result"]["condition"], "seen by Bearer ***",
            "{answered}"
        );
        let run = answered["runId"].as_str().unwrap();
        let (_, state) =
            answer(client().get(s.url(&format!("/agents/forecaster/runs/{run}")))).await;
        assert!(state.to_string().contains("Bearer ***"), "{state}");
        // Neither the state nor the event log (the database, whole) nor the log hold them.
        for secret in [SECRET, MODEL_KEY] {
            assert!(!answered.to_string().contains(secret));
            assert!(!state.to_string().contains(secret), "{state}");
            for file in ["agentry.db", "agentry.db-wal"] {
                let bytes = std::fs::read(s.dir.join(file)).unwrap_or_default();
                let found = bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
                assert!(!found, "{secret} is in {file}");
            }
            assert!(!s.log().contains(secret), "{secret} is in the log");
        }
    })
    .await;
}

/// Runs `agentry check DIR`: its exit code and what it printed.
fn check(dir: &Folder) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_agentry"))
        .args(["check", dir.path()])
        .env("NO_COLOR", "1")
        .output()
        .expect("agentry check");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// An agent file keeping the user's preferences (`workingMemory` with a schema, scope `user`).
const PREFERENCES: &str = "
id: prefs
instructions: You keep the user's preferences.
workingMemory:
  scope: user
  schema:
    type: object
    properties:
      city: { type: string }
      units: { enum: [metric, imperial] }
    additionalProperties: false
";

/// An agent file keeping notes per conversation (`workingMemory` with a Markdown template).
const NOTES: &str = "
id: notes
workingMemory: { scope: conversation, template: \"# Notes\\n- \" }
";

/// A working memory declared in agent files: the model keeps it, the route reads it, and its
/// shape is checked by `agentry check`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_working_memory_declared_in_an_agent_file() {
    within(async {
        let dir = Folder::new(&[
            ("agents/prefs.yaml".into(), PREFERENCES.into()),
            ("agents/notes.yaml".into(), NOTES.into()),
        ]);
        let (code, out) = check(&dir);
        assert_eq!(code, 0, "{out}");
        let s = serve(&dir, &[]);
        let (status, body) = post(
            &s,
            "/agents/prefs/text",
            &json!({"input": "remember that I prefer metric units in Paris", "options": {"userId": "u1"}}),
            None,
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["data"]["text"], "Noted: Paris, metric.", "{body}");
        let (status, body) =
            answer(client().get(s.url("/agents/prefs/memory/working?userId=u1"))).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["data"]["scope"], "user");
        assert_eq!(
            body["data"]["value"],
            json!({"city": "Paris", "units": "metric"})
        );
        let (status, body) =
            answer(client().get(s.url("/agents/notes/memory/working?conversationId=c1"))).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["data"]["scope"], "conversation");
        assert_eq!(body["data"]["template"], "# Notes\n- ");
        assert_eq!(body["data"]["value"], Value::Null);
    })
    .await;

    let bad = Folder::new(&[
        (
            "agents/a.yaml".into(),
            "id: a\nworkingMemory: { scope: team, schema: { type: object }, template: x }\n".into(),
        ),
        (
            "agents/b.yaml".into(),
            "id: b\nworkingMemory: { scope: user, schema: { type: 7 } }\n".into(),
        ),
    ]);
    let (code, out) = check(&bad);
    assert_eq!(code, 1, "{out}");
    for want in [
        "agents/a.yaml: /workingMemory/scope:",
        "agents/a.yaml: /workingMemory:",
        "agents/b.yaml: /workingMemory/schema:",
    ] {
        assert!(out.contains(want), "{want}\n{out}");
    }
}

#[test]
fn check_passes_good_agent_files_and_names_each_problem_of_bad_ones() {
    let good = Folder::new(&examples(3141));
    let (code, out) = check(&good);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("6 definitions"), "{out}");

    let bad = Folder::new(&[
        (
            "agents/a.yaml".into(),
            "id: a\ninstruction: hi\nmodel: { name: m, baseUrl: not-a-url }\n".into(),
        ),
        ("agents/b.yml".into(), "id: twin\n".into()),
        ("agents/e.yaml".into(), "id: twin\n".into()),
        (
            "agents/c.yaml".into(),
            "id: c\ntools:\n  - http: { name: t, request: { method: get, endpoint: 'http://x/' } }\napprovals:\n  t: { when: '${ .a | nope }' }\n  u: always\n"
                .into(),
        ),
        ("agents/d.yaml".into(), "id: d\ntools: [{ mcp: { stdio: { command: x } }, a2a: { card: 'http://x/' } }]\n".into()),
        (
            "agents/f.yaml".into(),
            "id: f\nguardrails:\n  input: [{ maxLength: 3, denyList: [a] }]\nbudget: { tokensPerDay: 3 }\n".into(),
        ),
        (
            "agents/g.yaml".into(),
            "id: g\nguardrails:\n  output: [{ judge: { criteria: x, threshold: 2 } }]\n".into(),
        ),
    ]);
    let (code, out) = check(&bad);
    assert_eq!(code, 1, "{out}");
    for want in [
        "agents/a.yaml: /instruction: unknown property `instruction` of the agent; did you mean `instructions`?",
        "agents/a.yaml: /model/baseUrl:",
        "agents/e.yaml: /id: the agent twin is also defined in agents/b.yml",
        "agents/c.yaml: /approvals/t/when:",
        "agents/c.yaml: /approvals/u: no tool of this agent is named u",
        "agents/d.yaml: /tools/0: a tool has both",
        "agents/f.yaml: /guardrails/input/0: a guardrail has both",
        "agents/g.yaml: /guardrails/output/0/judge/threshold: `threshold` is a number from 0 to 1",
        "agents/f.yaml: /budget/tokensPerDay: unknown property",
    ] {
        assert!(out.contains(want), "{want}\n{out}");
    }
}

#[test]
fn a_start_on_a_refused_agent_file_stops_with_its_problem() {
    // Over stdio without trust, an MCP server is refused, and the server does not start.
    let dir = Folder::new(&[(
        "agents/x.yaml".into(),
        "id: x\ntools: [{ mcp: { stdio: { command: python3 } } }]\n".into(),
    )]);
    let out = Command::new(env!("CARGO_BIN_EXE_agentry"))
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--database-url",
            "sqlite::memory:",
        ])
        .args(["--definitions", dir.path()])
        .env("AGENTRY_NO_EXAMPLES", "1")
        .env_remove("AGENTRY_DEFINITIONS_TRUSTED")
        .output()
        .expect("agentry serve");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("agents/x.yaml: /tools/0/mcp: an MCP server over stdio runs a command"),
        "{err}"
    );
}

/// An agent file's guardrails (each kind), budget and fallback models, through the real binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_file_declares_guardrails_and_a_budget() {
    within(async {
        let dir = Folder::new(&[(
            "agents/guarded.yaml".into(),
            r#"
id: guarded
durable: false
guardrails:
  input:
    - { name: short, maxLength: 60 }
  output:
    - piiRedaction: true
    - { name: no-secrets, denyList: ["secret\\s+plan"] }
    - { name: polite, judge: { criteria: 'Refuse text that mentions "rude".' } }
fallbackModels: [backup]
budget: { tokensPerRun: 1000 }
"#
            .into(),
        )]);
        let s = serve(&dir, &[]);
        assert_eq!(
            ask(&s, "guarded", "mail me at ada@example.com").await["text"],
            "You said: mail me at [email]"
        );
        for (text, guardrail) in [
            ("x".repeat(61), "short"),
            ("the secret  plan".to_owned(), "no-secrets"),
            ("you are rude".to_owned(), "polite"),
        ] {
            let (status, body) =
                post(&s, "/agents/guarded/text", &json!({"input": text}), None).await;
            assert_eq!(status, 422, "{body}");
            assert_eq!(body["code"], "guardrail_tripped");
            assert!(
                body["error"].as_str().unwrap().contains(guardrail),
                "{guardrail}: {body}"
            );
        }
    })
    .await;
    // A deny list's pattern that does not compile stops the start, naming it.
    let dir = Folder::new(&[(
        "agents/x.yaml".into(),
        "id: x\nguardrails: { output: [{ denyList: ['('] }] }\n".into(),
    )]);
    let out = Command::new(env!("CARGO_BIN_EXE_agentry"))
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--database-url",
            "sqlite::memory:",
        ])
        .args(["--definitions", dir.path()])
        .env("AGENTRY_NO_EXAMPLES", "1")
        .output()
        .expect("agentry serve");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("agents/x.yaml: /guardrails/output/0/denyList"),
        "{err}"
    );
}
