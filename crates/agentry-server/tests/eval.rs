//! `agentry eval`, the real binary: `examples/evals/assistant.jsonl` passes every deterministic
//! scorer at 1.0 in process and against a running server (with a token when it asks for one);
//! a dataset the agent fails exits 1 below its threshold, as does one it cannot answer; the JUnit file is read back by
//! Python's XML parser (an independent reader) and checked, as is the JSON; a bad line is an
//! error that names it.

mod common;

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{Killed, printed};
use serde_json::Value;

const SECRET: &str = "eval-test-secret-of-32-bytes-or-more";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("agentry-eval-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn agentry() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_agentry"));
    c.env_remove("AGENTRY_JWT_SECRET")
        .env_remove("AGENTRY_EVAL_TOKEN")
        .env_remove("AGENTRY_DEFINITIONS")
        .env_remove("OPENAI_API_KEY")
        .env_remove("AGENTRY_OPENAI_BASE_URL")
        .env("RUST_LOG", "warn");
    c
}

fn eval(args: &[&str]) -> Output {
    let out = agentry().arg("eval").args(args).output().unwrap();
    eprintln!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The JUnit file as Python's `xml.etree` reads it: `{suite: {tests, failures, errors},
/// cases: [{classname, name, failure, error}]}`.
fn junit(path: &Path) -> Value {
    let script = r#"
import json, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "testsuites", root.tag
suite = root.find("testsuite")
cases = []
for c in suite.findall("testcase"):
    f, e = c.find("failure"), c.find("error")
    cases.append({"classname": c.get("classname"), "name": c.get("name"),
                  "failure": None if f is None else f.get("message"),
                  "error": None if e is None else e.get("message")})
print(json.dumps({"suite": {k: int(suite.get(k)) for k in ("tests", "failures", "errors")},
                  "cases": cases}))
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn dataset() -> String {
    repo()
        .join("examples/evals/assistant.jsonl")
        .display()
        .to_string()
}

const STRICT: [&str; 8] = [
    "--threshold",
    "exact=1",
    "--threshold",
    "contains=1",
    "--threshold",
    "tool-calls=1",
    "--threshold",
    "tokens=1",
];

/// The example dataset passed: every deterministic scorer at 1.0, in the table, the JSON and
/// the JUnit file.
fn check_passed(out: &Output, json: &Path, xml: &Path) {
    assert!(out.status.success(), "{out:?}");
    let table = String::from_utf8_lossy(&out.stdout);
    for scorer in ["exact", "contains", "tool-calls", "latency", "tokens"] {
        assert!(
            table
                .lines()
                .any(|l| l.starts_with(scorer) && l.contains("1.000")),
            "{scorer}: {table}"
        );
    }
    assert!(table.contains("no failures"), "{table}");
    assert!(table.contains("every threshold is met"), "{table}");

    let report: Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    assert_eq!(report["passed"], true);
    assert_eq!(report["agent"], "assistant");
    let cases = report["cases"].as_array().unwrap();
    assert!(cases.len() >= 5, "{report}");
    for s in report["summary"].as_array().unwrap() {
        assert_eq!(s["mean"], 1.0, "{s}");
        assert_eq!(s["scored"].as_u64().unwrap() as usize, cases.len(), "{s}");
    }
    let tools: Vec<&str> = cases.iter().filter_map(|c| c["answer"].as_str()).collect();
    assert!(tools.iter().any(|a| a.contains("°C")), "a weather case");
    assert!(
        tools.iter().any(|a| a.starts_with("The result of")),
        "arithmetic"
    );
    assert!(
        tools.iter().any(|a| a.starts_with("You said")),
        "plain text"
    );

    let x = junit(xml);
    // A test case per line and scorer (five scorers), and one per threshold (four).
    assert_eq!(x["suite"]["tests"], cases.len() * 5 + 4, "{x}");
    assert_eq!(x["suite"]["failures"], 0, "{x}");
    assert_eq!(x["suite"]["errors"], 0, "{x}");
    let names: Vec<&str> = x["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"line 1: weather in Paris"), "{names:?}");
    assert!(names.contains(&"mean tool-calls >= 1"), "{names:?}");
}

#[test]
fn the_example_dataset_passes_in_process() {
    let d = dir();
    let (json, xml) = (d.join("report.json"), d.join("report.xml"));
    let mut args = vec![
        dataset(),
        "--agent".into(),
        "assistant".into(),
        "--json".into(),
        json.display().to_string(),
        "--junit".into(),
        xml.display().to_string(),
    ];
    args.extend(STRICT.map(str::to_owned));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    check_passed(&eval(&args), &json, &xml);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn below_a_threshold_it_exits_1_with_the_failures_in_junit() {
    let d = dir();
    let data = d.join("wrong.jsonl");
    std::fs::write(
        &data,
        concat!(
            r#"{"input": "weather in Oslo", "expected": "rainy", "expectedToolCalls": [{"toolName": "get_weather", "args": {"city": "Oslo"}}]}"#,
            "\n",
            r#"{"input": "Hello <there> & you", "expected": "You said: Hello <there> & you", "expectedToolCalls": [{"toolName": "calculate"}]}"#,
            "\n",
            r#"{"input": "Answer in JSON", "schema": {"type": "object"}}"#,
            "\n",
        ),
    )
    .unwrap();
    let (json, xml) = (d.join("r.json"), d.join("r.xml"));
    let out = eval(&[
        data.to_str().unwrap(),
        "--agent",
        "assistant",
        "--threshold",
        "contains=0.5",
        "--threshold",
        "tool-calls=0.9",
        "--json",
        json.to_str().unwrap(),
        "--junit",
        xml.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("below thresholds: tool-calls 0.500 < 0.900"),
        "{table}"
    );
    assert!(table.contains("line 1 contains (0.000)"), "{table}");
    assert!(table.contains("line 2 tool-calls (0.000)"), "{table}");
    assert!(table.contains("line 3 json (0.000)"), "{table}");

    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["passed"], false);
    let summary = |name: &str| {
        report["summary"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["scorer"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(summary("contains")["mean"], 0.5);
    assert_eq!(summary("contains")["met"], true);
    assert_eq!(summary("tool-calls")["met"], false);
    assert_eq!(summary("json")["scored"], 1);

    let x = junit(&xml);
    let cases = x["cases"].as_array().unwrap();
    let failed = |classname: &str, line: &str| {
        cases
            .iter()
            .find(|c| c["classname"] == classname && c["name"].as_str().unwrap().starts_with(line))
            .unwrap_or_else(|| panic!("{classname} {line}: {x}"))["failure"]
            .clone()
    };
    assert!(
        failed("assistant.contains", "line 1:")
            .as_str()
            .unwrap()
            .contains("lacks \"rainy\""),
        "{x}"
    );
    assert_eq!(failed("assistant.contains", "line 2:"), Value::Null);
    assert!(
        failed("assistant.tool-calls", "line 2:")
            .as_str()
            .unwrap()
            .contains("missing calculate"),
        "{x}"
    );
    assert_eq!(
        failed("assistant.thresholds", "mean tool-calls"),
        "mean 0.500 is below 0.9"
    );
    assert_eq!(failed("assistant.thresholds", "mean contains"), Value::Null);
    // The input's markup is escaped: the name reads back as it was.
    assert!(
        cases
            .iter()
            .any(|c| c["name"] == "line 2: Hello <there> & you"),
        "{x}"
    );
    // exact and contains of line 1, tool-calls of line 2, json of line 3, a threshold.
    assert_eq!(x["suite"]["failures"], 5, "{x}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn in_process_it_runs_the_agent_files_of_a_definitions_folder() {
    let d = dir();
    std::fs::create_dir_all(d.join("defs/agents")).unwrap();
    std::fs::write(
        d.join("defs/agents/echo.yaml"),
        "id: echo\nname: Echo\ninstructions: Repeat what you are told.\n",
    )
    .unwrap();
    let data = d.join("echo.jsonl");
    std::fs::write(
        &data,
        r#"{"input": "ping", "expected": "You said: ping", "expectedToolCalls": []}"#,
    )
    .unwrap();
    let defs = d.join("defs");
    let out = eval(&[
        data.to_str().unwrap(),
        "--agent",
        "echo",
        "--definitions",
        defs.to_str().unwrap(),
        "--threshold",
        "exact=1",
    ]);
    assert!(out.status.success(), "{out:?}");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("1 cases of"), "{table}");
    assert!(table.contains("every threshold is met"), "{table}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_bad_line_or_agent_is_an_error_that_names_it() {
    let d = dir();
    let data = d.join("bad.jsonl");
    std::fs::write(
        &data,
        "{\"input\": \"hi\"}\n{\"input\": \"x\", \"expected\": 3}\n",
    )
    .unwrap();
    let out = eval(&[data.to_str().unwrap(), "--agent", "assistant"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2: not a case"), "{err}");

    let out = eval(&[&dataset(), "--agent", "nobody"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("agent nobody: HTTP 404"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_example_dataset_passes_against_a_running_server_with_a_token() {
    let mut child = agentry()
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--database-url",
            "sqlite::memory:",
        ])
        .env("AGENTRY_JWT_SECRET", SECRET)
        .env("AGENTRY_AUTH_STRICT", "1")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let addr = printed(&mut stdout, "agentry listening on http://");
    let _server = Killed(child);
    let url = format!("http://{addr}");

    // Without the token the server refuses each case: no answer fails the eval, without any
    // threshold.
    let out = eval(&[&dataset(), "--agent", "assistant", "--server", &url]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("line 1: no answer: HTTP 401: authentication_required"),
        "{table}"
    );
    assert!(table.contains("6 cases had no answer"), "{table}");

    let token = agentry()
        .args(["token", "--sub", "ci"])
        .env("AGENTRY_JWT_SECRET", SECRET)
        .output()
        .unwrap();
    let token = String::from_utf8(token.stdout).unwrap().trim().to_owned();
    let d = dir();
    let (json, xml) = (d.join("report.json"), d.join("report.xml"));
    let mut args = vec![
        dataset(),
        "--agent".into(),
        "assistant".into(),
        "--server".into(),
        url.clone(),
        "--json".into(),
        json.display().to_string(),
        "--junit".into(),
        xml.display().to_string(),
    ];
    args.extend(STRICT.map(str::to_owned));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = agentry()
        .arg("eval")
        .args(&args)
        .env("AGENTRY_EVAL_TOKEN", &token)
        .output()
        .unwrap();
    check_passed(&out, &json, &xml);
    let _ = std::fs::remove_dir_all(&d);
}
