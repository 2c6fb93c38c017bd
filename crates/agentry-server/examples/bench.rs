//! Latency of the real server over HTTP on loopback: one `word-count` execute, one
//! suspend+resume cycle of `expense-approval` (execute over 1000, then resume), and one
//! `/agents/writer/text` call on the offline model (the server-side overhead of an agent call:
//! the offline model itself takes microseconds).
//!
//! `cargo run --release -p agentry-server --example bench -- [ITERATIONS] [DATABASE_URL]`
//! (defaults: 500 iterations, a fresh SQLite file in the temp directory).

use std::time::{Duration, Instant};

use agentry_server::{Settings, start};
use serde_json::{Value, json};

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let pct = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{name:<28} n={:<5} mean={:>8.3} ms  p50={:>8.3} ms  p95={:>8.3} ms  p99={:>8.3} ms",
        samples.len(),
        mean.as_secs_f64() * 1e3,
        pct(0.50).as_secs_f64() * 1e3,
        pct(0.95).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
    );
}

async fn post(client: &reqwest::Client, url: String, body: Value) -> Value {
    let resp = client.post(url).json(&body).send().await.expect("request");
    assert!(resp.status().is_success(), "status {}", resp.status());
    resp.json().await.expect("json")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(500);
    let temp = std::env::temp_dir().join(format!("agentry-bench-{}.db", uuid::Uuid::new_v4()));
    let url = args
        .next()
        .unwrap_or_else(|| format!("sqlite://{}", temp.display()));
    let running = start(&Settings {
        bind: "127.0.0.1:0".into(),
        database_url: url.clone(),
        ..Settings::default()
    })
    .await?;
    let base = format!("http://{}", running.addr);
    let handle = running.server.handle();
    tokio::spawn(running.server);
    println!(
        "agentry bench: {n} iterations against {base} on {}",
        running.database.kind()
    );
    let client = reqwest::Client::new();

    // Warm up connections and caches.
    for _ in 0..20 {
        post(
            &client,
            format!("{base}/workflows/word-count/execute"),
            json!({"input": {"text": "a b c"}}),
        )
        .await;
    }

    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let v = post(
            &client,
            format!("{base}/workflows/word-count/execute"),
            json!({"input": {"text": "the quick brown fox"}}),
        )
        .await;
        samples.push(t.elapsed());
        assert_eq!(v["data"]["result"]["words"], 4);
    }
    report("word-count execute", samples);

    let mut suspend = Vec::with_capacity(n);
    let mut resume = Vec::with_capacity(n);
    let mut cycle = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let v = post(
            &client,
            format!("{base}/workflows/expense-approval/execute"),
            json!({"input": {"employeeId": "e", "amount": 5000, "category": "x"}}),
        )
        .await;
        let t1 = t.elapsed();
        assert_eq!(v["data"]["status"], "suspended");
        let id = v["data"]["executionId"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let t2 = Instant::now();
        let v = post(
            &client,
            format!("{base}/workflows/expense-approval/executions/{id}/resume"),
            json!({"resumeData": {"approved": true, "managerId": "m"}}),
        )
        .await;
        resume.push(t2.elapsed());
        suspend.push(t1);
        cycle.push(t.elapsed());
        assert_eq!(v["data"]["status"], "completed");
    }
    report("expense execute->suspended", suspend);
    report("expense resume->completed", resume);
    report("suspend+resume cycle", cycle);

    let mut text = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let v = post(
            &client,
            format!("{base}/agents/writer/text"),
            json!({"input": "Write one line about the sea."}),
        )
        .await;
        text.push(t.elapsed());
        assert_eq!(v["data"]["finishReason"], "stop");
    }
    report("agent /text (offline model)", text);

    let mut tools = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let v = post(
            &client,
            format!("{base}/agents/assistant/text"),
            json!({"input": "What is the weather in Oslo?"}),
        )
        .await;
        tools.push(t.elapsed());
        assert_eq!(v["data"]["toolCalls"][0]["toolName"], "get_weather");
    }
    report("agent /text with a tool call", tools);

    handle.stop(true).await;
    running.database.close().await;
    let _ = std::fs::remove_file(&temp);
    Ok(())
}
