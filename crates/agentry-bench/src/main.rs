//! `agentry-bench`: the parts of `just bench` (scripts/bench.py) that wrk cannot do, and the
//! limits the server's figures are compared with. Each subcommand prints one `BENCH {json}` line.
//!
//! - `bare`: a bare actix-web server answering `GET /agents` with fixed bytes from memory (the
//!   limit of an HTTP route on this machine);
//! - `commit-rate`: the database's raw commit rate, empty transactions and one-row inserts, on a
//!   pool opened exactly as the server opens its own;
//! - `cycle`: expense-approval cycles (execute over 1000, suspended; resume, completed);
//! - `agent-stream`: `POST /agents/assistant/stream`, time to the first event and to the last;
//! - `streams`: N workflow streams open at once: event delivery latency and the server's RSS
//!   per open stream;
//! - `steps`: executions of a chain of no-op steps (`tester-chain-N`, the server started with
//!   `AGENTRY_TEST_AGENTS`), and what one durable step costs: each step answers the time it was
//!   called (µs), and the engine calls step k+1 only once step k's checkpoint is committed, so
//!   the interval between two steps' calls is one step's call to its acknowledged checkpoint
//!   (and the hand-off to the next). The intervals are read back from the executions' states
//!   after the load (the wire's timestamps are to the millisecond; these are to the µs); the
//!   CPU time of the processes given with `--cpu-of` is measured over the load alone.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use futures::StreamExt;
use serde_json::{Value, json};

#[derive(Parser)]
#[command(
    name = "agentry-bench",
    about = "Load cases and limits of `just bench`"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serves GET /agents with the bytes of BODY, from memory, on BIND (until killed).
    Bare {
        #[arg(long)]
        bind: String,
        #[arg(long)]
        body: PathBuf,
    },
    /// Commits empty transactions, then one-row inserts, from CONNECTIONS tasks for SECONDS each.
    CommitRate {
        #[arg(long)]
        database: String,
        #[arg(long, default_value_t = 32)]
        connections: usize,
        #[arg(long, default_value_t = 10)]
        seconds: u64,
    },
    /// expense-approval cycles from CONNECTIONS clients for SECONDS.
    Cycle(Load),
    /// Streamed agent answers from CONNECTIONS clients for SECONDS.
    AgentStream(Load),
    /// COUNT countdown streams open at once; PID is the server's, for its RSS.
    Streams {
        #[arg(long)]
        url: String,
        #[arg(long, default_value_t = 1000)]
        count: usize,
        #[arg(long)]
        pid: u32,
    },
    /// Executions of WORKFLOW (a `tester-chain-N`) from CONNECTIONS clients for SECONDS, then
    /// the intervals between its steps' calls, read back from at most STATES executions.
    Steps {
        #[command(flatten)]
        load: Load,
        #[arg(long, default_value = "tester-chain-10")]
        workflow: String,
        #[arg(long, default_value_t = 2000)]
        states: usize,
        /// Processes whose CPU time (with their children's) is measured over the load alone,
        /// not the reading of the states: `NAME=PID`, e.g. `agentry=123`.
        #[arg(long = "cpu-of", value_parser = parse_named_pid)]
        cpu_of: Vec<(String, u32)>,
        /// The kernel's clock ticks per second (`getconf CLK_TCK`), for /proc's CPU times.
        #[arg(long, default_value_t = 100)]
        clock_ticks: u64,
    },
}

fn parse_named_pid(s: &str) -> Result<(String, u32), String> {
    let (name, pid) = s.split_once('=').ok_or("NAME=PID")?;
    Ok((name.to_owned(), pid.parse().map_err(|_| "NAME=PID")?))
}

/// A closed-loop load on the server at URL.
#[derive(clap::Args)]
struct Load {
    #[arg(long)]
    url: String,
    #[arg(long, default_value_t = 32)]
    connections: usize,
    #[arg(long, default_value_t = 10)]
    seconds: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().cmd {
        Cmd::Bare { bind, body } => bare(&bind, body).await,
        Cmd::CommitRate {
            database,
            connections,
            seconds,
        } => commit_rate(&database, connections, Duration::from_secs(seconds)).await,
        Cmd::Cycle(l) => cycle(&l.url, l.connections, Duration::from_secs(l.seconds)).await,
        Cmd::AgentStream(l) => {
            agent_stream(&l.url, l.connections, Duration::from_secs(l.seconds)).await
        }
        Cmd::Streams { url, count, pid } => streams(&url, count, pid).await,
        Cmd::Steps {
            load,
            workflow,
            states,
            cpu_of,
            clock_ticks,
        } => steps(&load, &workflow, states, &cpu_of, clock_ticks).await,
    }
}

/// Latency samples in microseconds, and what they summarise to.
#[derive(Default)]
struct Samples(Vec<u64>);

impl Samples {
    fn pct(&self, p: f64) -> u64 {
        if self.0.is_empty() {
            return 0;
        }
        let i = ((self.0.len() as f64 - 1.0) * p / 100.0).round() as usize;
        self.0[i]
    }

    fn summary(mut self, elapsed: Duration, errors: u64) -> Value {
        self.0.sort_unstable();
        let n = self.0.len() as u64;
        json!({
            "requests": n,
            "duration_us": elapsed.as_micros() as u64,
            "rate": n as f64 / elapsed.as_secs_f64(),
            "errors": errors,
            "p50_us": self.pct(50.0),
            "p90_us": self.pct(90.0),
            "p99_us": self.pct(99.0),
            "p999_us": self.pct(99.9),
            "max_us": self.0.last().copied().unwrap_or(0),
        })
    }
}

fn print(v: Value) {
    println!("BENCH {v}");
}

/// Runs `one` from `connections` tasks until `duration` passes; each call returns the latency of
/// what it measured (or an error). The samples of every task, merged.
async fn closed_loop<F, Fut>(
    connections: usize,
    duration: Duration,
    one: F,
) -> (Samples, u64, Duration)
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<Vec<u64>>> + Send,
{
    let one = Arc::new(one);
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let tasks: Vec<_> = (0..connections)
        .map(|_| {
            let (one, stop) = (one.clone(), stop.clone());
            tokio::spawn(async move {
                let (mut samples, mut errors) = (Vec::new(), 0u64);
                while !stop.load(Ordering::Relaxed) {
                    match one().await {
                        Ok(s) => samples.extend(s),
                        Err(_) => errors += 1,
                    }
                }
                (samples, errors)
            })
        })
        .collect();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let (mut all, mut errors) = (Samples::default(), 0);
    for t in tasks {
        let (s, e) = t.await.expect("a load task");
        all.0.extend(s);
        errors += e;
    }
    (all, errors, start.elapsed())
}

async fn bare(bind: &str, body: PathBuf) -> anyhow::Result<()> {
    use actix_web::{App, HttpResponse, HttpServer, web};
    let bytes = web::Bytes::from(std::fs::read(&body).with_context(|| format!("{body:?}"))?);
    HttpServer::new(move || {
        let bytes = bytes.clone();
        App::new().route(
            "/agents",
            web::get().to(move || {
                let bytes = bytes.clone();
                async move {
                    HttpResponse::Ok()
                        .content_type("application/json")
                        .body(bytes)
                }
            }),
        )
    })
    .bind(bind)?
    .run()
    .await?;
    Ok(())
}

async fn commit_rate(url: &str, connections: usize, duration: Duration) -> anyhow::Result<()> {
    let db = agentry_store::Database::connect(url).await?;
    // A table of this tool's own in the benchmark's fresh database.
    const INSERT: &str = "INSERT INTO bench_commit (v) VALUES ('x')";
    let db = Arc::new(db);
    match db.as_ref() {
        agentry_store::Database::Sqlite(p) => {
            sqlx::query("CREATE TABLE IF NOT EXISTS bench_commit (id INTEGER PRIMARY KEY, v TEXT)")
                .execute(p)
                .await?;
        }
        agentry_store::Database::Postgres(p) => {
            sqlx::query(
                "CREATE TABLE IF NOT EXISTS bench_commit (id BIGSERIAL PRIMARY KEY, v TEXT)",
            )
            .execute(p)
            .await?;
        }
    }
    for insert in [false, true] {
        let db = db.clone();
        let (samples, errors, elapsed) = closed_loop(connections, duration, move || {
            let db = db.clone();
            async move {
                let t = Instant::now();
                match db.as_ref() {
                    agentry_store::Database::Sqlite(p) => {
                        let mut tx = p.begin().await?;
                        if insert {
                            sqlx::query(INSERT).execute(&mut *tx).await?;
                        }
                        tx.commit().await?;
                    }
                    agentry_store::Database::Postgres(p) => {
                        let mut tx = p.begin().await?;
                        if insert {
                            sqlx::query(INSERT).execute(&mut *tx).await?;
                        }
                        tx.commit().await?;
                    }
                }
                Ok(vec![t.elapsed().as_micros() as u64])
            }
        })
        .await;
        let mut v = samples.summary(elapsed, errors);
        v["case"] = json!(if insert {
            "one-row insert"
        } else {
            "empty transaction"
        });
        print(v);
    }
    const DROP: &str = "DROP TABLE bench_commit";
    match db.as_ref() {
        agentry_store::Database::Sqlite(p) => {
            sqlx::query(DROP).execute(p).await?;
        }
        agentry_store::Database::Postgres(p) => {
            sqlx::query(DROP).execute(p).await?;
        }
    }
    Ok(())
}

fn client(connections: usize) -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(connections)
        .build()
        .expect("an HTTP client")
}

async fn post_data(c: &reqwest::Client, url: String, body: &Value) -> anyhow::Result<Value> {
    let resp = c.post(url).json(body).send().await?;
    if !resp.status().is_success() {
        bail!("status {}", resp.status());
    }
    let v: Value = resp.json().await?;
    Ok(v["data"].clone())
}

async fn cycle(url: &str, connections: usize, duration: Duration) -> anyhow::Result<()> {
    let c = client(connections);
    let base = url.trim_end_matches('/').to_owned();
    let (samples, errors, elapsed) = closed_loop(connections, duration, move || {
        let (c, base) = (c.clone(), base.clone());
        async move {
            let t = Instant::now();
            let input =
                json!({"input": {"employeeId": "e-1", "amount": 1500, "category": "travel"}});
            let d = post_data(
                &c,
                format!("{base}/workflows/expense-approval/execute"),
                &input,
            )
            .await?;
            if d["status"] != "suspended" {
                bail!("not suspended: {d}");
            }
            let id = d["executionId"].as_str().context("executionId")?;
            let resume = json!({"resumeData": {"approved": true, "managerId": "m-1"}});
            let url = format!("{base}/workflows/expense-approval/executions/{id}/resume");
            let d = post_data(&c, url, &resume).await?;
            if d["status"] != "completed" {
                bail!("not completed: {d}");
            }
            Ok(vec![t.elapsed().as_micros() as u64])
        }
    })
    .await;
    let mut v = samples.summary(elapsed, errors);
    v["case"] = json!("expense-approval cycle");
    print(v);
    Ok(())
}

/// The `data:` payloads of an SSE body, as they arrive.
fn sse_events(resp: reqwest::Response) -> impl futures::Stream<Item = anyhow::Result<String>> {
    let mut buf = String::new();
    resp.bytes_stream().flat_map(move |chunk| {
        let mut out = Vec::new();
        match chunk {
            Ok(bytes) => {
                buf.push_str(&String::from_utf8_lossy(&bytes));
                while let Some(end) = buf.find("\n\n") {
                    let block: String = buf.drain(..end + 2).collect();
                    for line in block.lines() {
                        if let Some(data) = line.strip_prefix("data:") {
                            out.push(Ok(data.trim_start().to_owned()));
                        }
                    }
                }
            }
            Err(e) => out.push(Err(e.into())),
        }
        futures::stream::iter(out)
    })
}

async fn agent_stream(url: &str, connections: usize, duration: Duration) -> anyhow::Result<()> {
    let c = client(connections);
    let base = url.trim_end_matches('/').to_owned();
    let firsts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let firsts_in = firsts.clone();
    let (samples, errors, elapsed) = closed_loop(connections, duration, move || {
        let (c, base, firsts) = (c.clone(), base.clone(), firsts_in.clone());
        async move {
            let t = Instant::now();
            let body = json!({"input": "What is the weather in Paris?"});
            let resp = c
                .post(format!("{base}/agents/assistant/stream"))
                .json(&body)
                .send()
                .await?;
            if !resp.status().is_success() {
                bail!("status {}", resp.status());
            }
            let mut events = Box::pin(sse_events(resp));
            let mut first = None;
            while let Some(ev) = events.next().await {
                ev?;
                first.get_or_insert_with(|| t.elapsed().as_micros() as u64);
            }
            firsts.lock().unwrap().push(first.context("no event")?);
            Ok(vec![t.elapsed().as_micros() as u64])
        }
    })
    .await;
    let mut v = samples.summary(elapsed, errors);
    let first = Samples(std::mem::take(&mut *firsts.lock().unwrap())).summary(elapsed, 0);
    v["case"] = json!("agent stream (to the last event)");
    v["first_event"] = first;
    print(v);
    Ok(())
}

/// The resident set of process `pid`, in kB.
fn rss_kb(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("VmRSS")
}

async fn streams(url: &str, count: usize, pid: u32) -> anyhow::Result<()> {
    let c = reqwest::Client::builder()
        .pool_max_idle_per_host(count)
        .build()?;
    let base = url.trim_end_matches('/').to_owned();
    let before = rss_kb(pid)?;
    // Five ticks 2 s apart: every stream is open for ten seconds.
    let body = json!({"input": {"stepDelayMs": 2000}});
    let opened = Arc::new(tokio::sync::Barrier::new(count + 1));
    let tasks: Vec<_> = (0..count)
        .map(|_| {
            let (c, base, body, opened) = (c.clone(), base.clone(), body.clone(), opened.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let resp = c
                    .post(format!("{base}/workflows/countdown/stream"))
                    .json(&body)
                    .send()
                    .await;
                let mut events = match resp {
                    Ok(r) if r.status().is_success() => Box::pin(sse_events(r)),
                    _ => {
                        opened.wait().await;
                        return (latencies, 1u64);
                    }
                };
                let mut first = true;
                while let Some(ev) = events.next().await {
                    let Ok(ev) = ev else { return (latencies, 1) };
                    let Ok(v) = serde_json::from_str::<Value>(&ev) else {
                        continue;
                    };
                    if let Some(ts) = v["timestamp"].as_str()
                        && let Ok(at) = chrono::DateTime::parse_from_rfc3339(ts)
                    {
                        let late = chrono::Utc::now().signed_duration_since(at);
                        latencies.push((first, late.num_microseconds().unwrap_or(0).max(0) as u64));
                    }
                    if first {
                        first = false;
                        opened.wait().await;
                    }
                }
                (latencies, 0)
            })
        })
        .collect();
    let start = Instant::now();
    opened.wait().await;
    let open_after = start.elapsed();
    // Let the first tick's events pass, then read the server's RSS with every stream open.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let during = rss_kb(pid)?;
    let (mut all, mut errors) = (Samples::default(), 0);
    // The first event of each stream (written by its start, while the others start too) and
    // the later ones (the ticks), apart.
    let (mut firsts, mut later) = (Samples::default(), Samples::default());
    for t in tasks {
        let (l, e) = t.await?;
        for (first, late) in l {
            all.0.push(late);
            if first { &mut firsts } else { &mut later }.0.push(late);
        }
        errors += e;
    }
    let after = rss_kb(pid)?;
    let elapsed = start.elapsed();
    let mut v = all.summary(elapsed, errors);
    v["first_event"] = firsts.summary(elapsed, 0);
    v["later_events"] = later.summary(elapsed, 0);
    v["case"] = json!(format!(
        "{count} workflow streams open at once (event delivery)"
    ));
    v["streams"] = json!(count);
    v["all_open_after_ms"] = json!(open_after.as_millis() as u64);
    v["rss_before_kb"] = json!(before);
    v["rss_open_kb"] = json!(during);
    v["rss_after_kb"] = json!(after);
    v["rss_per_stream_kb"] = json!((during.saturating_sub(before)) as f64 / count as f64);
    print(v);
    Ok(())
}

/// Executions of a `tester-chain-N` under a closed-loop load, then the intervals between the
/// calls of consecutive steps (from the steps' outputs, `{k, calledUs}`), read back from the
/// states of at most `max_states` of them, evenly spread over the run.
async fn steps(
    load: &Load,
    workflow: &str,
    max_states: usize,
    cpu_of: &[(String, u32)],
    clock_ticks: u64,
) -> anyhow::Result<()> {
    let c = client(load.connections);
    let base = load.url.trim_end_matches('/').to_owned();
    let ids = Arc::new(std::sync::Mutex::new(Vec::new()));
    let cpu_before: Vec<u64> = cpu_of.iter().map(|(_, pid)| tree_cpu_ticks(*pid)).collect();
    let (samples, errors, elapsed) = {
        let (c, base, ids, workflow) = (c.clone(), base.clone(), ids.clone(), workflow.to_owned());
        closed_loop(
            load.connections,
            Duration::from_secs(load.seconds),
            move || {
                let (c, base, ids, workflow) =
                    (c.clone(), base.clone(), ids.clone(), workflow.clone());
                async move {
                    let t = Instant::now();
                    let url = format!("{base}/workflows/{workflow}/execute");
                    let d = post_data(&c, url, &json!({"input": {}})).await?;
                    if d["status"] != "completed" {
                        bail!("not completed: {d}");
                    }
                    let took = t.elapsed().as_micros() as u64;
                    let id = d["executionId"].as_str().context("executionId")?;
                    ids.lock().unwrap().push(id.to_owned());
                    Ok(vec![took])
                }
            },
        )
        .await
    };
    let cpu_ticks: Vec<u64> = cpu_of
        .iter()
        .zip(cpu_before)
        .map(|((_, pid), before)| tree_cpu_ticks(*pid).saturating_sub(before))
        .collect();
    let ids = std::mem::take(&mut *ids.lock().unwrap());
    let picked: Vec<String> = if ids.len() <= max_states {
        ids.clone()
    } else {
        (0..max_states)
            .map(|i| ids[i * ids.len() / max_states].clone())
            .collect()
    };
    // The states, eight at a time, once the load is over.
    let intervals: Vec<anyhow::Result<Vec<u64>>> = futures::stream::iter(picked)
        .map(|id| {
            let (c, base) = (c.clone(), base.clone());
            let workflow = workflow.to_owned();
            async move {
                let url = format!("{base}/workflows/{workflow}/executions/{id}/state");
                let resp = c.get(url).send().await?;
                if !resp.status().is_success() {
                    bail!("state of {id}: status {}", resp.status());
                }
                let v: Value = resp.json().await?;
                call_intervals(&v["data"]["steps"])
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let mut step = Samples::default();
    let mut read = 0usize;
    for i in intervals {
        step.0.extend(i?);
        read += 1;
    }
    let step_count = step.0.len();
    let step_mean = step.0.iter().sum::<u64>() as f64 / step_count.max(1) as f64;
    let executions = samples.0.len();
    let mut v = samples.summary(elapsed, errors);
    let chain: u64 = workflow
        .rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    v["case"] = json!(format!(
        "{workflow} execute, {} connection{}",
        load.connections,
        if load.connections == 1 { "" } else { "s" }
    ));
    v["workflow"] = json!(workflow);
    v["chain_steps"] = json!(chain);
    v["connections"] = json!(load.connections);
    v["steps_per_s"] = json!(executions as f64 * chain as f64 / elapsed.as_secs_f64());
    let mut s = step.summary(elapsed, 0);
    if let Some(fields) = s.as_object_mut() {
        fields.retain(|k, _| k.ends_with("_us"));
    }
    s["mean_us"] = json!(step_mean);
    for ((name, _), ticks) in cpu_of.iter().zip(cpu_ticks) {
        let ms = ticks as f64 * 1e3 / clock_ticks.max(1) as f64;
        v[format!("{name}_cpu_ms_per_request")] = json!(ms / executions.max(1) as f64);
    }
    s["executions_read"] = json!(read);
    s["intervals"] = json!(step_count);
    v["step"] = s;
    print(v);
    Ok(())
}

/// The intervals in µs between the calls of steps `s1`, `s2`, ... of a `tester-chain-N`
/// execution's `steps` (each output `{k, calledUs}`).
fn call_intervals(steps: &Value) -> anyhow::Result<Vec<u64>> {
    let map = steps.as_object().context("no steps")?;
    let mut called = Vec::with_capacity(map.len());
    for k in 1..=map.len() {
        let us = map
            .get(&format!("s{k}"))
            .and_then(|s| s["output"]["calledUs"].as_i64())
            .with_context(|| format!("step s{k} has no calledUs"))?;
        called.push(us);
    }
    Ok(called
        .windows(2)
        .map(|w| (w[1] - w[0]).max(0) as u64)
        .collect())
}

/// (parent, own utime + stime, its ended children's) of process `pid` in clock ticks, if it
/// is there.
fn proc_times(pid: u32) -> Option<(u32, u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let n = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    Some((
        fields.get(1)?.parse().ok()?,
        n(11)? + n(12)?,
        n(13)? + n(14)?,
    ))
}

/// CPU clock ticks of process `pid` and its children, the ended ones included (a process's
/// waited-for children count in its own cutime and cstime).
fn tree_cpu_ticks(pid: u32) -> u64 {
    let Some((_, own, ended)) = proc_times(pid) else {
        return 0;
    };
    let children: u64 = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(proc_times)
        .filter(|(parent, _, _)| *parent == pid)
        .map(|(_, own, ended)| own + ended)
        .sum();
    own + ended + children
}
