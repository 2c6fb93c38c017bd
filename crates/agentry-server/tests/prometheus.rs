//! `GET /metrics` as Prometheus reads it: the real binary with `--metrics-bind` (metrics on
//! their own address, a 404 on the main one), Debian's `promtool check metrics` on what it
//! serves, and a real `prometheus` server scraping it until a PromQL query counts the runs made
//! (and averages the example assistant's live scores).
//! Prometheus is installed by `scripts/install-test-deps.sh` (the README's set-up).

mod common;

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Killed, free_port, printed, request};
use serde_json::Value;

fn require(tool: &str) {
    assert!(
        std::path::Path::new(tool).exists(),
        "{tool} is missing: run scripts/install-test-deps.sh (the README's set-up) first"
    );
}

/// Starts the binary with `--metrics-bind`; returns it, its address and the metrics address.
fn start_agentry(db: &str) -> (Killed, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentry"))
        .args(["serve", "--bind", "127.0.0.1:0", "--database-url", db])
        .args(["--metrics-bind", "127.0.0.1:0"])
        .env_remove("AGENTRY_JWT_SECRET")
        .env_remove("AGENTRY_NO_EXAMPLES")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let addr = printed(&mut stdout, "agentry listening on http://");
    let metrics = printed(&mut stdout, "agentry metrics on http://");
    let metrics = metrics
        .strip_suffix("/metrics")
        .expect("the path")
        .to_owned();
    (Killed(child), addr, metrics)
}

/// Prometheus's HTTP API answer to `path`, once it answers with success.
fn prometheus_api(addr: &str, path: &str) -> Value {
    let (status, body) = request(addr, "GET", path, &[], "");
    assert_eq!(status, 200, "{path}: {body}");
    let v: Value = serde_json::from_str(body.trim()).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(v["status"], "success", "{v}");
    v["data"].clone()
}

#[test]
fn prometheus_scrapes_the_metrics_and_counts_the_runs() {
    require("/usr/bin/prometheus");
    require("/usr/bin/promtool");
    let dir = std::env::temp_dir().join(format!("agentry-prom-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = format!("sqlite://{}", dir.join("agentry.db").display());
    let (_agentry, addr, metrics) = start_agentry(&db);

    const RUNS: usize = 7;
    for i in 0..RUNS {
        let (status, body) = request(
            &addr,
            "POST",
            "/workflows/word-count/execute",
            &[],
            &format!(r#"{{"input":{{"text":"run {i}"}}}}"#),
        );
        assert_eq!(status, 200, "{body}");
    }
    // The example assistant scores each of its generations after the answer.
    let (status, body) = request(
        &addr,
        "POST",
        "/agents/assistant/text",
        &[],
        r#"{"input":"What is the weather in Paris?"}"#,
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = request(&addr, "GET", "/metrics", &[], "");
    assert_eq!(status, 404, "not on the main address: {body}");

    // promtool lints what is served (live scores included, once they are in): nothing to report.
    let scored = "agentry_agent_score_count{agent=\"assistant\",scorer=\"faithfulness\"} 1";
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = loop {
        let (status, text) = request(&metrics, "GET", "/metrics", &[], "");
        assert_eq!(status, 200, "GET /metrics on {metrics}: {text}");
        if text.contains(scored) {
            break text;
        }
        assert!(Instant::now() < deadline, "no live score: {text}");
        std::thread::sleep(Duration::from_millis(100));
    };
    for scorer in ["relevance", "latency", "tokens"] {
        let series =
            format!("agentry_agent_score_count{{agent=\"assistant\",scorer=\"{scorer}\"}} 1");
        assert!(text.contains(&series), "{series}: {text}");
    }
    assert!(
        text.contains(
            "agentry_agent_score_bucket{agent=\"assistant\",scorer=\"tokens\",le=\"1\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains("agentry_executions_completed_total{workflow=\"word-count\"} 7"),
        "{text}"
    );
    let mut lint = Command::new("/usr/bin/promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    lint.stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let lint = lint.wait_with_output().unwrap();
    assert!(
        lint.status.success() && lint.stdout.is_empty() && lint.stderr.is_empty(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&lint.stdout),
        String::from_utf8_lossy(&lint.stderr)
    );

    // A real Prometheus scraping it every second.
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: agentry\n    static_configs:\n      - targets: ['{metrics}']\n"
        ),
    )
    .unwrap();
    let prom_addr = format!("127.0.0.1:{}", free_port());
    let _prometheus = Killed(
        Command::new("/usr/bin/prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={prom_addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting prometheus"),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let query = "/api/v1/query?query=sum(agentry_executions_completed_total%7Bworkflow%3D%22word-count%22%7D)";
    let (mut up, mut counted) = (false, None);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        if TcpStream::connect(&prom_addr).is_err() {
            continue;
        }
        let targets = prometheus_api(&prom_addr, "/api/v1/targets");
        up = targets["activeTargets"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["health"] == "up"));
        if !up {
            continue;
        }
        let result = prometheus_api(&prom_addr, query);
        counted = result["result"][0]["value"][1].as_str().map(str::to_owned);
        if counted.is_some() {
            break;
        }
    }
    assert!(up, "the target never came up");
    assert_eq!(counted.as_deref(), Some("7"), "PromQL counts the runs made");
    // And the scores: the mean of the assistant's latency scores.
    let mean = prometheus_api(
        &prom_addr,
        "/api/v1/query?query=sum(agentry_agent_score_sum%7Bscorer%3D%22latency%22%7D)%2Fsum(agentry_agent_score_count%7Bscorer%3D%22latency%22%7D)",
    );
    assert_eq!(mean["result"][0]["value"][1], "1", "{mean}");
    let _ = std::fs::remove_dir_all(&dir);
}
