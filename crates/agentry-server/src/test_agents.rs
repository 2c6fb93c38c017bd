//! The agent the durability tests drive (registered only when `AGENTRY_TEST_AGENTS` names a
//! directory; hidden, like `AGENTRY_CRASH_AT`): `tester`, a durable agent whose scripted model
//! calls one tool per model call, in the order the last user message lists them, and whose
//! tools write what they do to `<dir>/tools.log`, so that a test counts how often each ran
//! across processes killed and restarted.
//!
//! The message `steps a:1500 ok:b c` makes the model call `slow_step {label: "a", ms: 1500}`,
//! then `needs_ok {label: "b"}` (a tool that always waits for a person's approval, within
//! `AGENTRY_TEST_APPROVAL_MS` milliseconds, default one hour), then `slow_step {label: "c", ms:
//! 0}`, then answer `done: <each result's label and outcome>`; `ok:b+ok:c` asks for both calls
//! in one answer; `~200` streams the answer word by word, 200 ms apart. `slow_step` appends `start
//! <label> <attempt>` before it sleeps and `end <label> <attempt>` after; `needs_ok` appends
//! `ran <label> <attempt>`.
//!
//! `tester-memory` is `tester` with a working memory of the scope `user` (`{city?, units?}`):
//! the step `memory:<City>:<units>` calls `update_working_memory {city, units}` (answered as
//! `memory ok`).
//!
//! Two workflows come with it: `tester-foreach` (`{items: [ms, ...]}`: maps `sleep-item` over
//! the items, two at once, each appending `start <index> <attempt>` before it sleeps its item's
//! milliseconds and `end <index>` after) and `tester-mailbox` (`{ms}`: sleeps, then waits for
//! the event `ping`, any object, up to `timeoutMs` when given, and outputs `{got, timedOut}`).
//! `AGENTRY_TEST_VERSIONS=a,b` registers `tester-versioned` in those versions, in that order
//! (the last one new executions start on): `a` is one step `gate` that waits for a resume and
//! answers `{v: "a"}` (with `napMs` in the input it sleeps that long first; with `timeoutMs` its
//! wait ends by itself that long after the step started); `b` is `prepare` then `gate`, answering `{v: "b"}`; with
//! `AGENTRY_TEST_PATCH` set, `gate` asks `ctx.patched("gate-v2")` and answers `{v, patched}`.
//!
//! `tester-queued` (`{tenant, work, priority?}`) is a queued workflow (queue `tester-queued`,
//! key pointer `/tenant`, priority pointer `/priority`): one step `work` that sleeps `work`
//! milliseconds and answers `{tenant}`, appending `start <executionId> <tenant> <node> <attempt>
//! <µs>` before it sleeps and `end ...` (the same fields) after, where `<node>` is
//! `AGENTRY_NODE_ID` and `<µs>` the wall clock in microseconds since the Unix epoch (these two
//! lines are not synced to disk: a kill -9 keeps them, only a power loss would not). Its limits
//! come from `AGENTRY_TEST_QUEUE`, a comma list of `concurrency=N`, `keyLimit=N`, `rate=N/<ms>`
//! (a sliding window over all keys) or `rateKey=N/<ms>` (per key; a queue has one rate limit),
//! and `wait=<ms>` (how long `/execute` waits before its 202, 30 s by default); unset (or
//! empty): `concurrency=2`. A malformed value stops the server at its start.
//! `tester-unqueued` is the same workflow without a queue (the queue benchmark's baseline).
//!
//! With `AGENTRY_TEST_CHAINS` set too, `tester-chain-1`, `tester-chain-10` and `tester-chain-100`
//! (any input object) are chains of
//! that many no-op `andThen` steps, `s1` to `sN`, step `k` answering `{"k": k, "calledUs": µs}`
//! (the wall clock when the engine called it, in microseconds since the Unix epoch; the result is
//! the last step's): what one durable step costs (the interval between two steps' calls) and
//! how it grows with a workflow's length, in `just bench` (scripts/bench.py, `agentry-bench
//! steps`).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agentry_agents::{
    Agent, AgentHub, Approval, ChunkStream, FinishReason, FnTool, Model, ModelChunk, ModelError,
    ModelRequest, ModelResponse, Role, ToolCall, Usage, WorkingMemory, WorkingMemoryScope,
};
use agentry_engine::Engine;
use agentry_engine::queue::Queue;
use agentry_engine::workflow::{DefinitionError, StepContext, Workflow, step};
use anyhow::{Context, bail};
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};

/// Registers `tester` and the test workflows when `AGENTRY_TEST_AGENTS` is set.
pub fn register_from_env(hub: &AgentHub, engine: &Engine) -> anyhow::Result<()> {
    let Some(dir) = std::env::var_os("AGENTRY_TEST_AGENTS") else {
        return Ok(());
    };
    let limits = match std::env::var("AGENTRY_TEST_QUEUE") {
        Ok(spec) => QueueLimits::parse(&spec).context("AGENTRY_TEST_QUEUE")?,
        Err(_) => QueueLimits::parse("")?,
    };
    for wf in [
        tester_foreach(PathBuf::from(&dir)),
        tester_mailbox(),
        tester_queued(PathBuf::from(&dir), &limits),
        tester_unqueued(PathBuf::from(&dir)),
    ] {
        engine.register(wf?)?;
    }
    // Only for the benchmarks (a hundred-step workflow more in every test server is not free).
    if std::env::var_os("AGENTRY_TEST_CHAINS").is_some() {
        for steps in [1, 10, 100] {
            engine.register(tester_chain(steps)?)?;
        }
    }
    if let Ok(versions) = std::env::var("AGENTRY_TEST_VERSIONS") {
        for version in versions.split(',').filter(|v| !v.is_empty()) {
            engine.register(tester_versioned(version)?)?;
        }
    }
    let approval_ms = std::env::var("AGENTRY_TEST_APPROVAL_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3_600_000);
    let tester = tester(PathBuf::from(dir), Duration::from_millis(approval_ms));
    hub.register(tester_memory(&tester))?;
    hub.register(tester)?;
    Ok(())
}

type Def = Result<Workflow, DefinitionError>;

/// `tester-foreach`: sleeps each item's milliseconds, two items at once, logging each start
/// (with its attempt) and end.
fn tester_foreach(dir: PathBuf) -> Def {
    Workflow::new("tester-foreach", "Tester Foreach")
        .input_schema(json!({
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 60000}}},
            "required": ["items"]
        }))
        .and_for_each(
            "sleep-all",
            |ctx| ctx.input["items"].clone(),
            |_| 2,
            step("sleep-item", move |ctx: StepContext| {
                let dir = dir.clone();
                async move {
                    let index = ctx.foreach_item().map_or(0, |i| i.index);
                    append(&dir, &format!("start {index} {}", ctx.attempt));
                    let ms = ctx.input.as_u64().unwrap_or(0);
                    ctx.sleep(Duration::from_millis(ms)).await?;
                    append(&dir, &format!("end {index}"));
                    Ok(json!(index))
                }
            }),
        )
        .build()
}

/// `tester-versioned` in `version` (`a`: one step; anything else: two). With
/// `AGENTRY_TEST_PATCH` set, its `gate` asks `ctx.patched("gate-v2")` first and answers
/// `{v, patched}`.
fn tester_versioned(version: &str) -> Def {
    let tag = version.to_owned();
    let patch = std::env::var_os("AGENTRY_TEST_PATCH").is_some();
    let gate = step("gate", move |ctx: StepContext| {
        let tag = tag.clone();
        async move {
            let patched = if patch {
                Some(ctx.patched("gate-v2").await?)
            } else {
                None
            };
            if ctx.resume_data.is_none() && !ctx.timed_out {
                if let Some(ms) = ctx.workflow_input["napMs"].as_u64() {
                    ctx.sleep(Duration::from_millis(ms)).await?;
                }
                let reason = "Waiting for a resume";
                return Err(match ctx.workflow_input["timeoutMs"].as_i64() {
                    Some(ms) => ctx.suspend_until(
                        reason,
                        None,
                        ctx.started_at + chrono::Duration::milliseconds(ms),
                    ),
                    None => ctx.suspend(reason, None),
                });
            }
            Ok(match patched {
                Some(p) => json!({"v": tag, "patched": p}),
                None => json!({"v": tag}),
            })
        }
    });
    let builder = Workflow::new("tester-versioned", "Tester Versioned").version(version);
    let builder = if version == "a" {
        builder
    } else {
        builder.and_then(step(
            "prepare",
            |_ctx: StepContext| async move { Ok(json!({})) },
        ))
    };
    builder.and_then(gate).build()
}

/// `tester-mailbox`: sleeps `ms`, then waits for the event `ping`.
fn tester_mailbox() -> Def {
    Workflow::new("tester-mailbox", "Tester Mailbox")
        .input_schema(json!({
            "type": "object",
            "properties": {
                "ms": {"type": "integer", "minimum": 0, "maximum": 60000},
                "timeoutMs": {"type": "integer", "minimum": 1, "maximum": 3_600_000}
            }
        }))
        .event("ping", json!({"type": "object"}))
        .and_then(step("nap", |ctx: StepContext| async move {
            let ms = ctx.input["ms"].as_u64().unwrap_or(0);
            ctx.sleep(Duration::from_millis(ms)).await?;
            Ok(json!({}))
        }))
        .and_then(step("listen", |ctx: StepContext| async move {
            let deadline = ctx.workflow_input["timeoutMs"]
                .as_i64()
                .map(|ms| ctx.started_at + chrono::Duration::milliseconds(ms));
            let got = ctx.wait_for_event("ping", None, deadline).await?;
            Ok(json!({"got": got, "timedOut": ctx.timed_out}))
        }))
        .build()
}

/// `tester-chain-<steps>`: `steps` no-op `andThen` steps, `s1` to `s<steps>`, step `k`
/// answering `{"k": k, "calledUs": <the wall clock when it was called, µs>}`.
fn tester_chain(steps: u32) -> Def {
    let builder = Workflow::new(
        format!("tester-chain-{steps}"),
        format!("Tester Chain {steps}"),
    )
    .input_schema(json!({"type": "object"}));
    (1..=steps)
        .fold(builder, |b, k| {
            b.and_then(step(format!("s{k}"), move |_ctx: StepContext| async move {
                let called = chrono::Utc::now().timestamp_micros();
                Ok(json!({"k": k, "calledUs": called}))
            }))
        })
        .build()
}

/// The limits of `tester-queued`'s queue (`AGENTRY_TEST_QUEUE`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct QueueLimits {
    concurrency: Option<u32>,
    key_limit: Option<u32>,
    rate: Option<(u32, Duration)>,
    rate_per_key: Option<(u32, Duration)>,
    wait: Option<Duration>,
}

impl QueueLimits {
    /// `concurrency=N,keyLimit=N,rate=N/<ms>,rateKey=N/<ms>,wait=<ms>`, any of them (but not
    /// both rates), each at most once; an empty list is `concurrency=2`.
    fn parse(spec: &str) -> anyhow::Result<QueueLimits> {
        let mut limits = QueueLimits {
            concurrency: None,
            key_limit: None,
            rate: None,
            rate_per_key: None,
            wait: None,
        };
        let items: Vec<&str> = spec
            .split(',')
            .map(str::trim)
            .filter(|i| !i.is_empty())
            .collect();
        if items.is_empty() {
            limits.concurrency = Some(2);
            return Ok(limits);
        }
        for item in items {
            let Some((name, value)) = item.split_once('=') else {
                bail!("{item:?} is not name=value");
            };
            let (name, value) = (name.trim(), value.trim());
            let taken = match name {
                "concurrency" => limits.concurrency.replace(count(name, value)?).is_some(),
                "keyLimit" => limits.key_limit.replace(count(name, value)?).is_some(),
                "rate" => limits.rate.replace(window(name, value)?).is_some(),
                "rateKey" => limits.rate_per_key.replace(window(name, value)?).is_some(),
                "wait" => limits.wait.replace(millis(name, value)?).is_some(),
                _ => bail!("unknown limit {name:?} (concurrency, keyLimit, rate, rateKey or wait)"),
            };
            if taken {
                bail!("{name} is given twice");
            }
        }
        if limits.rate.is_some() && limits.rate_per_key.is_some() {
            bail!("a queue has one rate limit: rate or rateKey, not both");
        }
        Ok(limits)
    }

    /// The queue these limits describe.
    fn queue(&self) -> Queue {
        let mut q = Queue::new("tester-queued").priority("/priority");
        if let Some(n) = self.concurrency {
            q = q.concurrency(n);
        }
        // The key is always `/tenant` (the keys take turns; `rateKey` counts per key).
        q = match self.key_limit {
            Some(n) => q.concurrency_key("/tenant", n),
            None => q.key("/tenant"),
        };
        if let Some((n, period)) = self.rate {
            q = q.rate_limit(n, period);
        }
        if let Some((n, period)) = self.rate_per_key {
            q = q.rate_limit_per_key(n, period);
        }
        if let Some(wait) = self.wait {
            q = q.execute_wait(wait);
        }
        q
    }
}

/// A positive integer.
fn count(name: &str, value: &str) -> anyhow::Result<u32> {
    match value.parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => bail!("{name}={value:?}: a positive integer"),
    }
}

/// A positive number of milliseconds.
fn millis(name: &str, value: &str) -> anyhow::Result<Duration> {
    match value.parse::<u64>() {
        Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
        _ => bail!("{name}={value:?}: a positive number of milliseconds"),
    }
}

/// `N/<ms>`: N starts in any window of `<ms>` milliseconds.
fn window(name: &str, value: &str) -> anyhow::Result<(u32, Duration)> {
    let Some((n, ms)) = value.split_once('/') else {
        bail!("{name}={value:?}: N/<milliseconds>");
    };
    Ok((count(name, n.trim())?, millis(name, ms.trim())?))
}

/// `tester-queued`: one step that sleeps `work` ms in the queue `tester-queued`, logging its
/// start and end with this process's node id.
fn tester_queued(dir: PathBuf, limits: &QueueLimits) -> Def {
    sleeper("tester-queued", "Tester Queued", dir, Some(limits.queue()))
}

/// `tester-unqueued`: `tester-queued` without the queue (what a queue costs, in the benchmark).
fn tester_unqueued(dir: PathBuf) -> Def {
    sleeper("tester-unqueued", "Tester Unqueued", dir, None)
}

/// One step `work` that sleeps `work` ms and answers `{tenant}`, logging its start and end.
fn sleeper(id: &str, name: &str, dir: PathBuf, queue: Option<Queue>) -> Def {
    let node = std::env::var("AGENTRY_NODE_ID").unwrap_or_else(|_| "?".to_owned());
    let builder = Workflow::new(id, name).input_schema(json!({
        "type": "object",
        "properties": {
            "tenant": {"type": "string", "minLength": 1},
            "work": {"type": "integer", "minimum": 0, "maximum": 600_000},
            "priority": {"type": "integer", "minimum": -1000, "maximum": 1000}
        },
        "required": ["tenant", "work"]
    }));
    let builder = match queue {
        Some(q) => builder.queue(q),
        None => builder,
    };
    builder
        .and_then(step("work", move |ctx: StepContext| {
            let dir = dir.clone();
            let node = node.clone();
            async move {
                let tenant = ctx.input["tenant"].as_str().unwrap_or("?").to_owned();
                let line = |what: &str| {
                    format!(
                        "{what} {} {tenant} {node} {} {}",
                        ctx.execution_id,
                        ctx.attempt,
                        chrono::Utc::now().timestamp_micros()
                    )
                };
                note(&dir, &line("start"));
                let ms = ctx.input["work"].as_u64().unwrap_or(0);
                ctx.sleep(Duration::from_millis(ms)).await?;
                note(&dir, &line("end"));
                Ok(json!({"tenant": tenant}))
            }
        }))
        .build()
}

/// Appends `line` to `<dir>/tools.log` without syncing it (a kill -9 keeps it all the same).
fn note(dir: &std::path::Path, line: &str) {
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("tools.log"))
    {
        let _ = f.write_all(format!("{line}\n").as_bytes());
    }
}

fn append(dir: &std::path::Path, line: &str) {
    let path = dir.join("tools.log");
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{line}");
        let _ = f.sync_all();
    }
}

fn tester(dir: PathBuf, approval: Duration) -> Agent {
    let slow_dir = dir.clone();
    let slow = FnTool::new(
        "slow_step",
        "Sleeps `ms` milliseconds, writing its start and end.",
        json!({"type": "object", "properties": {"label": {"type": "string"}, "ms": {"type": "integer", "minimum": 0}}, "required": ["label"]}),
        move |args, ctx| {
            let dir = slow_dir.clone();
            async move {
                let label = args["label"].as_str().unwrap_or("?").to_owned();
                append(&dir, &format!("start {label} {}", ctx.attempt));
                let ms = args["ms"].as_u64().unwrap_or(0);
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
                    _ = ctx.cancel.cancelled() => return Err("cancelled".to_owned()),
                }
                append(&dir, &format!("end {label} {}", ctx.attempt));
                Ok(json!({"label": label, "attempt": ctx.attempt}))
            }
        },
    );
    let ok_dir = dir;
    let needs_ok = FnTool::new(
        "needs_ok",
        "Runs only once a person approved it.",
        json!({"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}),
        move |args, ctx| {
            let dir = ok_dir.clone();
            async move {
                let label = args["label"].as_str().unwrap_or("?").to_owned();
                append(&dir, &format!("ran {label} {}", ctx.attempt));
                Ok(json!({"label": label, "attempt": ctx.attempt}))
            }
        },
    )
    .needs_approval(Approval::always().within(approval));
    Agent::new("tester", "Tester")
        .description("Durability tests' agent: a scripted model calling slow and guarded tools.")
        .model(Arc::new(Scripted))
        .tool(Arc::new(slow))
        .tool(Arc::new(needs_ok))
        .durable()
}

/// `tester-memory`: `tester` with a working memory of the scope `user` (`{city?, units?}`), whose
/// step `memory:<City>:<units>` calls `update_working_memory`.
fn tester_memory(tester: &Agent) -> Agent {
    let memory = WorkingMemory::schema(
        WorkingMemoryScope::User,
        json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "units": {"enum": ["metric", "imperial"]}},
            "additionalProperties": false
        }),
    )
    .expect("a valid schema");
    let mut agent = tester.clone().working_memory(memory);
    agent.id = "tester-memory".into();
    agent.name = "Tester Memory".into();
    agent
}

/// A model that calls the tools the last user message lists (`steps a:100 ok:b`), one per
/// model call, then answers with what they returned; `~<ms>` in the message streams its text
/// word by word, `<ms>` milliseconds apart.
struct Scripted;

impl Scripted {
    /// The pause between streamed words that the last user message asks for (`~<ms>`).
    fn word_pause(req: &ModelRequest) -> Option<Duration> {
        let last_user = req.messages.iter().rfind(|m| m.role == Role::User)?;
        last_user
            .content
            .split_whitespace()
            .find_map(|w| w.strip_prefix('~')?.parse().ok())
            .map(Duration::from_millis)
    }

    fn answer(req: &ModelRequest) -> ModelResponse {
        let last_user = req.messages.iter().rposition(|m| m.role == Role::User);
        let text = last_user
            .map(|i| req.messages[i].content.clone())
            .unwrap_or_default();
        let since: &[agentry_agents::Message] = last_user
            .map(|i| &req.messages[i + 1..])
            .unwrap_or_default();
        let done: Vec<&Value> = since
            .iter()
            .filter_map(|m| m.tool_result.as_ref())
            .map(|r| &r.result)
            .collect();
        // Model answers with tool calls so far: the steps taken.
        let rounds = since.iter().filter(|m| !m.tool_calls.is_empty()).count();
        let steps: Vec<&str> = text
            .strip_prefix("steps")
            .unwrap_or_default()
            .split_whitespace()
            .filter(|s| !s.starts_with('~'))
            .collect();
        let usage = Usage {
            prompt_tokens: 1,
            completion_tokens: 1,
            total_tokens: 2,
            ..Usage::default()
        };
        match steps.get(rounds) {
            // `a+ok:b`: several calls in one answer.
            Some(step) => ModelResponse {
                text: String::new(),
                tool_calls: step
                    .split('+')
                    .enumerate()
                    .map(|(i, call)| {
                        let (name, args) = match call.split_once(':') {
                            Some(("ok", label)) => ("needs_ok", json!({"label": label})),
                            Some(("memory", preference)) => {
                                let (city, units) =
                                    preference.split_once(':').unwrap_or((preference, ""));
                                (
                                    agentry_agents::working_memory::TOOL_NAME,
                                    json!({"city": city, "units": units}),
                                )
                            }
                            Some((label, ms)) => (
                                "slow_step",
                                json!({"label": label, "ms": ms.parse::<u64>().unwrap_or(0)}),
                            ),
                            None => ("slow_step", json!({"label": call, "ms": 0})),
                        };
                        ToolCall {
                            tool_call_id: format!("call_{}_{}", rounds + 1, i + 1),
                            tool_name: name.to_owned(),
                            args,
                        }
                    })
                    .collect(),
                finish_reason: FinishReason::ToolCalls,
                usage,
                model: None,
            },
            None => {
                let outcomes: Vec<String> = done
                    .iter()
                    .map(|r| match (r.get("label"), r.get("workingMemory")) {
                        (Some(l), _) => format!("{} ok", l.as_str().unwrap_or("?")),
                        (None, Some(_)) => "memory ok".to_owned(),
                        (None, None) => {
                            format!("refused ({})", r["error"].as_str().unwrap_or("?"))
                        }
                    })
                    .collect();
                ModelResponse {
                    text: format!("done: {}", outcomes.join(", ")),
                    tool_calls: Vec::new(),
                    finish_reason: FinishReason::Stop,
                    usage,
                    model: None,
                }
            }
        }
    }
}

#[async_trait]
impl Model for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn generate(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        Ok(Self::answer(request))
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ChunkStream, ModelError> {
        let resp = Self::answer(request);
        let pause = Self::word_pause(request);
        let mut chunks: Vec<Result<ModelChunk, ModelError>> = Vec::new();
        match pause {
            // Word by word, each word with the space before it.
            Some(_) => chunks.extend(
                resp.text
                    .split_inclusive(' ')
                    .map(|w| Ok(ModelChunk::TextDelta(w.to_owned()))),
            ),
            None if !resp.text.is_empty() => chunks.push(Ok(ModelChunk::TextDelta(resp.text))),
            None => {}
        }
        chunks.extend(
            resp.tool_calls
                .into_iter()
                .map(|c| Ok(ModelChunk::ToolCall(c))),
        );
        chunks.push(Ok(ModelChunk::Finish {
            finish_reason: resp.finish_reason,
            usage: resp.usage,
        }));
        let pause = pause.unwrap_or_default();
        Ok(futures::stream::iter(chunks)
            .then(move |chunk| async move {
                tokio::time::sleep(pause).await;
                chunk
            })
            .boxed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_limits_parse() {
        let two = QueueLimits::parse("").unwrap();
        assert_eq!(two.concurrency, Some(2));
        assert_eq!(two.key_limit, None);
        let all = QueueLimits::parse("concurrency=3, keyLimit=1,rate=5/1000,wait=2000").unwrap();
        assert_eq!(
            all,
            QueueLimits {
                concurrency: Some(3),
                key_limit: Some(1),
                rate: Some((5, Duration::from_millis(1000))),
                rate_per_key: None,
                wait: Some(Duration::from_millis(2000)),
            }
        );
        let per_key = QueueLimits::parse("rateKey=2/500").unwrap();
        assert_eq!(per_key.rate_per_key, Some((2, Duration::from_millis(500))));
        let rate_only = QueueLimits::parse("rate=5/1000").unwrap();
        assert_eq!(rate_only.concurrency, None);
        for bad in [
            "concurrency",
            "concurrency=0",
            "concurrency=x",
            "concurrency=-1",
            "keyLimit=1.5",
            "rate=5",
            "rate=5/0",
            "rate=0/100",
            "rateKey=a/100",
            "burst=3",
            "concurrency=1,concurrency=2",
            "rate=5/1000,rateKey=2/1000",
            "wait=0",
        ] {
            assert!(QueueLimits::parse(bad).is_err(), "{bad}");
        }
    }
}
