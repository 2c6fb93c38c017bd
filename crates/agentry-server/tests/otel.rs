//! OpenTelemetry traces from the real binary to a real OTLP receiver
//! (`tests/otel/otlp_receiver.py`, decoding `ExportTraceServiceRequest` with pip
//! `opentelemetry-proto`, over HTTP or, with `grpcio`, over gRPC; installed into `.venv-tools`
//! by `scripts/install-test-deps.sh`): the spans of a workflow run and of an agent call with a
//! tool arrive with their parents, names and GenAI attributes, and its live scores as the events of
//! a `score` span linked to the agent's; a client's `traceparent` is
//! continued; a resumed execution links to the trace that started it; the same over gRPC; and
//! with the collector down, requests are served and the dropped spans are counted in
//! `/metrics`.

mod common;

use std::io::BufReader;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Killed, free_port, printed, request};
use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn data(body: &str) -> Value {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    v["data"].clone()
}

/// The binary, exporting traces to `endpoint` over `protocol` (`http/protobuf` or `grpc`).
fn start_agentry(endpoint: &str, protocol: &str) -> (Killed, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentry"))
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--database-url",
            "sqlite::memory:",
        ])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        .env("OTEL_SERVICE_NAME", "agentry-under-test")
        .env("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
        .env_remove("OTEL_TRACES_SAMPLER")
        .env_remove("AGENTRY_JWT_SECRET")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let addr = printed(&mut stdout, "agentry listening on http://");
    (Killed(child), addr)
}

/// The spans the receiver wrote so far.
fn spans(file: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

fn one<'a>(spans: &'a [Value], name: &str, trace: &str) -> &'a Value {
    spans
        .iter()
        .find(|s| s["name"] == name && s["traceId"] == trace)
        .unwrap_or_else(|| panic!("no span {name} in trace {trace}: {spans:#?}"))
}

const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const CALLER: &str = "b7ad6b7169203331";

/// A running OTLP receiver (`http` or `grpc`) and the file it writes the spans to.
struct Receiver {
    _process: Killed,
    port: u16,
    dir: PathBuf,
    out: PathBuf,
}

impl Receiver {
    fn start(mode: &str) -> Self {
        let python = repo().join(".venv-tools/bin/python");
        let ok = Command::new(&python)
            .args(["-c", "import opentelemetry.proto, grpc"])
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "opentelemetry-proto or grpcio is missing from .venv-tools: run \
             scripts/install-test-deps.sh first"
        );
        let dir = std::env::temp_dir().join(format!("agentry-otel-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("spans.jsonl");
        let port = free_port();
        let process = Killed(
            Command::new(&python)
                .arg(repo().join("tests/otel/otlp_receiver.py"))
                .arg(port.to_string())
                .arg(&out)
                .arg(mode)
                .spawn()
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the receiver never listened");
            std::thread::sleep(Duration::from_millis(100));
        }
        Self {
            _process: process,
            port,
            dir,
            out,
        }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The spans received so far, once `arrived` holds of them (batches leave every half
    /// second).
    fn spans_once(&self, arrived: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let all = spans(&self.out);
            if arrived(&all) {
                return all;
            }
            assert!(Instant::now() < deadline, "spans never arrived: {all:#?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A workflow run under the caller's trace: request > execution > step, the caller's span the
/// request's parent.
fn check_workflow_run(all: &[Value]) {
    let http = one(all, "POST /workflows/{id}/execute", TRACE);
    assert_eq!(
        http["parentSpanId"], CALLER,
        "the caller's span is the parent"
    );
    assert_eq!(http["attributes"]["http.route"], "/workflows/{id}/execute");
    assert_eq!(http["attributes"]["http.response.status_code"], 200);
    assert_eq!(http["kind"], 2, "a server span");
    let execution = one(all, "execution word-count", TRACE);
    assert_eq!(execution["parentSpanId"], http["spanId"]);
    let step = one(all, "step count", TRACE);
    assert_eq!(step["parentSpanId"], execution["spanId"]);
    assert_eq!(step["attributes"]["attempt"], 1);
    assert_eq!(http["resource"]["service.name"], "agentry-under-test");
    assert_eq!(http["resource"]["deployment.environment"], "test");
}

/// Runs word-count under the caller's trace.
fn run_word_count(addr: &str) {
    let traceparent = format!("00-{TRACE}-{CALLER}-01");
    let (status, body) = request(
        addr,
        "POST",
        "/workflows/word-count/execute",
        &[("traceparent", &traceparent)],
        r#"{"input":{"text":"one two"}}"#,
    );
    assert_eq!(status, 200, "{body}");
}

#[test]
fn spans_arrive_with_their_parents_names_and_genai_attributes() {
    let receiver = Receiver::start("http");
    let (_agentry, addr) = start_agentry(&receiver.endpoint(), "http/protobuf");

    run_word_count(&addr);
    let (status, body) = request(
        &addr,
        "POST",
        "/agents/assistant/text",
        &[],
        r#"{"input":"What is the weather in Paris?"}"#,
    );
    assert_eq!(status, 200, "{body}");
    let (_, body) = request(
        &addr,
        "POST",
        "/workflows/expense-approval/execute",
        &[],
        r#"{"input":{"employeeId":"e","amount":5000,"category":"travel"}}"#,
    );
    let waiting = data(&body)["executionId"].as_str().unwrap().to_owned();
    let (status, body) = request(
        &addr,
        "POST",
        &format!("/workflows/expense-approval/executions/{waiting}/resume"),
        &[],
        r#"{"resumeData":{"approved":true,"managerId":"m-1"}}"#,
    );
    assert_eq!(status, 200, "{body}");

    let all = receiver.spans_once(|all| {
        named(all, "execution expense-approval").len() >= 2
            && !named(all, "chat offline").is_empty()
            && !named(all, "score assistant").is_empty()
    });
    check_workflow_run(&all);

    // The agent call: request > invoke_agent > chat and execute_tool, with GenAI attributes.
    let agent_http = named(&all, "POST /agents/{id}/text")[0];
    let trace = agent_http["traceId"].as_str().unwrap();
    assert_eq!(agent_http["parentSpanId"], "", "a new trace");
    let invoke = one(&all, "invoke_agent assistant", trace);
    assert_eq!(invoke["parentSpanId"], agent_http["spanId"]);
    assert_eq!(
        invoke["attributes"]["gen_ai.operation.name"],
        "invoke_agent"
    );
    let chats: Vec<&Value> = all
        .iter()
        .filter(|s| s["name"] == "chat offline" && s["traceId"] == trace)
        .collect();
    assert_eq!(chats.len(), 2, "the tool call, then the answer");
    for chat in &chats {
        assert_eq!(chat["parentSpanId"], invoke["spanId"]);
        assert_eq!(chat["kind"], 3, "a client span");
        let a = &chat["attributes"];
        assert_eq!(a["gen_ai.operation.name"], "chat");
        assert_eq!(a["gen_ai.request.model"], "offline");
        assert!(
            a["gen_ai.usage.input_tokens"].as_i64().unwrap() > 0,
            "{chat}"
        );
        assert!(
            a["gen_ai.usage.output_tokens"].as_i64().unwrap() > 0,
            "{chat}"
        );
    }
    let reasons: Vec<&str> = chats
        .iter()
        .map(|c| {
            c["attributes"]["gen_ai.response.finish_reasons"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert!(
        reasons.contains(&"[\"tool-calls\"]") && reasons.contains(&"[\"stop\"]"),
        "{reasons:?}"
    );
    let tool = one(&all, "execute_tool get_weather", trace);
    assert_eq!(tool["parentSpanId"], invoke["spanId"]);
    assert_eq!(tool["attributes"]["gen_ai.tool.name"], "get_weather");

    // Its live scores, after the answer: a `score` span of its own, linked to the generation's,
    // with one event per scorer.
    let score = named(&all, "score assistant")[0];
    assert_eq!(score["links"][0]["spanId"], invoke["spanId"], "{score}");
    assert_eq!(score["links"][0]["traceId"], trace);
    let events = score["events"].as_array().unwrap();
    let value = |scorer: &str| {
        events
            .iter()
            .find(|e| e["name"] == "score" && e["attributes"]["agentry.score.scorer"] == scorer)
            .unwrap_or_else(|| panic!("no {scorer} event: {score}"))["attributes"]
            ["agentry.score.value"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(value("latency"), 1.0);
    assert_eq!(value("tokens"), 1.0);
    assert_eq!(value("faithfulness"), 1.0, "21°C is the tool's number");
    // `what` is the one word of the question of four letters or more the answer lacks.
    assert!((value("relevance") - 2.0 / 3.0).abs() < 1e-9, "{score}");

    // The resumed run links to the trace that started the execution.
    let runs = named(&all, "execution expense-approval");
    let started = runs
        .iter()
        .find(|s| s["links"] == serde_json::json!([]))
        .expect("the start");
    let resumed = runs
        .iter()
        .find(|s| s["links"] != serde_json::json!([]))
        .expect("the resume");
    assert_ne!(
        resumed["traceId"], started["traceId"],
        "the resume request's own trace"
    );
    assert_eq!(resumed["links"][0]["traceId"], started["traceId"]);
}

#[test]
fn spans_arrive_over_grpc_too() {
    let receiver = Receiver::start("grpc");
    let (_agentry, addr) = start_agentry(&receiver.endpoint(), "grpc");
    run_word_count(&addr);
    let all = receiver.spans_once(|all| !named(all, "step count").is_empty());
    check_workflow_run(&all);
}

#[test]
fn with_the_collector_down_requests_are_served_and_dropped_spans_counted() {
    let (_agentry, addr) = start_agentry(
        &format!("http://127.0.0.1:{}", free_port()),
        "http/protobuf",
    );
    for i in 0..20 {
        let (status, body) = request(
            &addr,
            "POST",
            "/workflows/word-count/execute",
            &[],
            &format!(r#"{{"input":{{"text":"run {i}"}}}}"#),
        );
        assert_eq!(status, 200, "{body}");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, text) = request(&addr, "GET", "/metrics", &[], "");
        let dropped = text
            .lines()
            .find_map(|l| l.strip_prefix("agentry_otel_spans_dropped_total "))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap_or(0);
        if dropped > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no dropped span counted:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}
