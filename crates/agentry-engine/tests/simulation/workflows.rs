//! The simulated workflows: random shapes over every step type, built with the public builder,
//! a model of what each computes, and the side table of step effects.
//!
//! Every step body records its effect (execution, step, attempt, entry) when it starts, and its
//! output carries the attempt and the entry that produced it, so the checks can tell which run
//! of a step the stored output came from. The numbers flow: each effect step adds 1 to `v`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentry_engine::AgentRunner;
use agentry_engine::workflow::{MapFn, Step, StepContext, StepError, Workflow, step};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::rng::Rng;
use crate::world::{Trace, lock};

/// What a step does.
#[derive(Debug, Clone)]
pub enum Shape {
    /// `andThen`: v + 1.
    Plain,
    /// `andThen` that sleeps this many milliseconds on the engine's clock (cancellable).
    Slow(u64),
    /// `andThen` with retries whose first `fails` attempts fail.
    Flaky {
        fails: u32,
        retries: u32,
        backoff_ms: u64,
    },
    /// `andThen` with a 50 ms time-out and retries, whose first attempt takes 200 ms.
    Timeout { retries: u32 },
    /// `andThen` that suspends (with a deadline, in seconds, or none) until resumed.
    Wait { deadline_s: Option<u64> },
    /// `andThen` with a durable sleep of this many seconds (`sleep_until`).
    Sleep(u64),
    /// `andThen` that fails when the workflow's input says `fail` (the planned failure).
    Fail,
    /// `andTap`: its effect, the input passes through.
    Tap,
    /// `andWhen` on an even `v`, with a plain child.
    When,
    /// `andAll` of children sleeping these milliseconds (0: plain).
    All(Vec<u64>),
    /// `andRace` of children sleeping these milliseconds.
    Race(Vec<u64>),
    /// `andAgent` on the echo agent.
    Agent,
    /// `andWorkflow` of a child workflow.
    Sub(&'static str),
}

impl Shape {
    fn name(&self) -> String {
        match self {
            Shape::Plain => "plain".into(),
            Shape::Slow(ms) => format!("slow({ms}ms)"),
            Shape::Flaky {
                fails,
                retries,
                backoff_ms,
            } => format!("flaky(fails {fails}, retries {retries}, backoff {backoff_ms}ms)"),
            Shape::Timeout { retries } => format!("timeout(retries {retries})"),
            Shape::Wait { deadline_s } => match deadline_s {
                Some(s) => format!("wait(deadline {s}s)"),
                None => "wait".into(),
            },
            Shape::Sleep(s) => format!("sleep({s}s)"),
            Shape::Fail => "fail-if-asked".into(),
            Shape::Tap => "tap".into(),
            Shape::When => "when(even)".into(),
            Shape::All(c) => format!("all{c:?}"),
            Shape::Race(c) => format!("race{c:?}"),
            Shape::Agent => "agent".into(),
            Shape::Sub(w) => format!("sub({w})"),
        }
    }

    /// Whether the step's own output names the attempt and entry that produced it (a step whose
    /// effect is its output; not a pass-through, a composite or a sub-workflow).
    pub fn is_leaf(&self) -> bool {
        !matches!(
            self,
            Shape::Tap | Shape::When | Shape::All(_) | Shape::Race(_) | Shape::Sub(_)
        )
    }
}

/// A workflow of the simulation.
#[derive(Debug, Clone)]
pub struct Spec {
    pub id: String,
    pub shapes: Vec<Shape>,
    /// Started by the driver (else only as a sub-workflow).
    pub top: bool,
}

impl Spec {
    pub fn describe(&self) -> String {
        let shapes: Vec<String> = self.shapes.iter().map(Shape::name).collect();
        format!("{} = [{}]", self.id, shapes.join(", "))
    }

    pub fn step_id(i: usize) -> String {
        format!("s{i}")
    }

    pub fn has_fail(&self) -> bool {
        self.shapes.iter().any(|s| matches!(s, Shape::Fail))
    }

    /// Whether a leaf step (see [`Shape::is_leaf`]) has this id: a top-level one, or a child of
    /// a composite (`s{i}c{j}`), whose children are all plain or slow.
    pub fn is_leaf_step(&self, step_id: &str) -> bool {
        let Some(rest) = step_id.strip_prefix('s') else {
            return false;
        };
        match rest.split_once('c') {
            Some(_) => true,
            None => rest
                .parse::<usize>()
                .ok()
                .and_then(|i| self.shapes.get(i))
                .is_some_and(Shape::is_leaf),
        }
    }
}

/// The sub-workflows: one that waits for a resume (through its parent), one that sleeps.
pub fn children() -> Vec<Spec> {
    vec![
        Spec {
            id: "child-wait".into(),
            shapes: vec![Shape::Plain, Shape::Wait { deadline_s: None }, Shape::Plain],
            top: false,
        },
        Spec {
            id: "child-quick".into(),
            shapes: vec![Shape::Plain, Shape::Slow(300)],
            top: false,
        },
    ]
}

/// A random shape for a top-level workflow.
fn shape(rng: &mut Rng) -> Shape {
    let weights = [3, 3, 2, 1, 3, 1, 1, 1, 1, 2, 2, 1, 2];
    match rng.weighted(&weights) {
        0 => Shape::Plain,
        1 => Shape::Slow(rng.range(1, 40) * 100),
        2 => {
            let retries = rng.range(1, 3) as u32;
            Shape::Flaky {
                fails: rng.range(0, u64::from(retries)) as u32,
                retries,
                backoff_ms: rng.range(1, 20) * 100,
            }
        }
        3 => Shape::Timeout {
            retries: rng.range(1, 2) as u32,
        },
        4 => Shape::Wait {
            deadline_s: rng.chance(0.5).then(|| rng.range(10, 600)),
        },
        5 => Shape::Sleep(rng.range(5, 600)),
        6 => Shape::Fail,
        7 => Shape::Tap,
        8 => Shape::When,
        9 | 10 => {
            let n = rng.range(2, 3);
            let delays = (0..n)
                .map(|_| {
                    if rng.chance(0.3) {
                        0
                    } else {
                        rng.range(1, 30) * 100
                    }
                })
                .collect();
            if rng.chance(0.5) {
                Shape::All(delays)
            } else {
                Shape::Race(delays)
            }
        }
        11 => Shape::Agent,
        _ => Shape::Sub(if rng.chance(0.5) {
            "child-wait"
        } else {
            "child-quick"
        }),
    }
}

/// The workflows of one run: `n` random top-level ones (the first always waits for a resume)
/// and the sub-workflows.
pub fn catalog(rng: &mut Rng, n: usize) -> Vec<Spec> {
    let mut specs = Vec::new();
    for w in 0..n {
        let len = rng.range(2, 6) as usize;
        let mut shapes: Vec<Shape> = (0..len).map(|_| shape(rng)).collect();
        if w == 0 && !shapes.iter().any(|s| matches!(s, Shape::Wait { .. })) {
            let at = rng.below(len as u64) as usize;
            shapes[at] = Shape::Wait {
                deadline_s: rng.chance(0.5).then(|| rng.range(10, 600)),
            };
        }
        specs.push(Spec {
            id: format!("w{w}"),
            shapes,
            top: true,
        });
    }
    specs.extend(children());
    specs
}

/// `v` of a step's input: an object's `v`, the largest of an array's (after `andAll`).
pub fn v_of(x: &Value) -> i64 {
    match x {
        Value::Array(xs) => xs.iter().map(v_of).max().unwrap_or(0),
        Value::Object(m) => m.get("v").and_then(Value::as_i64).unwrap_or(0),
        _ => 0,
    }
}

/// What a completed execution of `spec` on `v0` returns (its `v`).
pub fn expected(spec: &Spec, specs: &HashMap<String, Spec>, v0: i64) -> i64 {
    spec.shapes.iter().fold(v0, |v, s| match s {
        Shape::Tap => v,
        Shape::When if v % 2 == 0 => v + 1,
        Shape::When => v,
        Shape::Sub(child) => expected(&specs[*child], specs, v),
        _ => v + 1,
    })
}

/// How a run of a step began: `fresh`, `timer` (its deadline passed), or the resume delivery
/// that began it.
pub fn entry(ctx: &StepContext) -> String {
    match (&ctx.resume_data, ctx.timed_out) {
        (Some(d), _) => d
            .get("delivery")
            .and_then(Value::as_str)
            .unwrap_or("resume")
            .to_owned(),
        (None, true) => "timer".into(),
        _ => "fresh".into(),
    }
}

/// One run of a step's body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Effect {
    pub exec: String,
    pub step: String,
    pub attempt: u32,
    pub entry: String,
}

/// The side table of effects (what a step with outside effects would have done).
pub struct Effects {
    pub list: Mutex<Vec<Effect>>,
    trace: Arc<Trace>,
}

impl Effects {
    pub fn new(trace: Arc<Trace>) -> Self {
        Self {
            list: Mutex::new(Vec::new()),
            trace,
        }
    }

    fn record(&self, exec: &str, step: &str, attempt: u32, entry: String) {
        self.trace.line(format!(
            "effect {} {step} a{attempt} {entry}",
            self.trace.name(exec)
        ));
        lock(&self.list).push(Effect {
            exec: exec.to_owned(),
            step: step.to_owned(),
            attempt,
            entry,
        });
    }

    fn ran(&self, ctx: &StepContext) {
        self.record(&ctx.execution_id, &ctx.step_id, ctx.attempt, entry(ctx));
    }
}

fn out(v: i64, ctx: &StepContext) -> Value {
    json!({"v": v, "a": ctx.attempt, "e": entry(ctx)})
}

/// A leaf step's body.
fn leaf(id: String, shape: Shape, fx: Arc<Effects>) -> Step {
    let body = shape.clone();
    let s = step(id, move |ctx: StepContext| {
        let fx = fx.clone();
        let body = body.clone();
        async move {
            fx.ran(&ctx);
            let v = v_of(&ctx.input) + 1;
            match body {
                Shape::Slow(ms) => ctx.sleep(Duration::from_millis(ms)).await?,
                Shape::Flaky { fails, .. } if ctx.attempt <= fails => {
                    return Err(StepError::failed(format!(
                        "flaky: attempt {} fails",
                        ctx.attempt
                    )));
                }
                Shape::Timeout { .. } if ctx.attempt == 1 => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Shape::Wait { deadline_s } if ctx.resume_data.is_none() && !ctx.timed_out => {
                    return Err(match deadline_s {
                        Some(s) => ctx.suspend_until(
                            "waiting",
                            None,
                            ctx.started_at + chrono::Duration::seconds(s as i64),
                        ),
                        None => ctx.suspend("waiting", None),
                    });
                }
                Shape::Sleep(s) => {
                    ctx.sleep_until(ctx.started_at + chrono::Duration::seconds(s as i64))?;
                }
                Shape::Fail if ctx.workflow_input.get("fail") == Some(&Value::Bool(true)) => {
                    return Err(StepError::failed("planned failure"));
                }
                _ => {}
            }
            Ok(out(v, &ctx))
        }
    });
    match shape {
        Shape::Flaky {
            retries,
            backoff_ms,
            ..
        } => s.retries(retries, Duration::from_millis(backoff_ms)),
        Shape::Timeout { retries } => s
            .timeout(Duration::from_millis(50))
            .retries(retries, Duration::from_millis(500)),
        _ => s,
    }
}

fn child(id: String, delay: u64, fx: &Arc<Effects>) -> Step {
    let shape = if delay == 0 {
        Shape::Plain
    } else {
        Shape::Slow(delay)
    };
    leaf(id, shape, fx.clone())
}

/// The workflow `spec` describes, its steps recording into `fx`.
pub fn build(spec: &Spec, fx: &Arc<Effects>) -> Workflow {
    let mut b = Workflow::new(spec.id.clone(), spec.id.clone());
    for (i, shape) in spec.shapes.iter().enumerate() {
        let id = Spec::step_id(i);
        b = match shape {
            Shape::Tap => {
                let fx = fx.clone();
                b.and_tap(step(id, move |ctx: StepContext| {
                    let fx = fx.clone();
                    async move {
                        fx.ran(&ctx);
                        Ok(Value::Null)
                    }
                }))
            }
            Shape::When => b.and_when(
                id.clone(),
                |ctx: StepContext| async move { v_of(&ctx.input) % 2 == 0 },
                child(format!("{id}c0"), 0, fx),
            ),
            Shape::All(delays) => {
                let kids = delays
                    .iter()
                    .enumerate()
                    .map(|(j, d)| child(format!("{id}c{j}"), *d, fx))
                    .collect();
                b.and_all(id, kids)
            }
            Shape::Race(delays) => {
                let kids = delays
                    .iter()
                    .enumerate()
                    .map(|(j, d)| child(format!("{id}c{j}"), *d, fx))
                    .collect();
                b.and_race(id, kids)
            }
            Shape::Agent => b.and_agent(id, "echo", |ctx: &StepContext| {
                json!({
                    "exec": ctx.execution_id,
                    "step": ctx.step_id,
                    "attempt": ctx.attempt,
                    "entry": entry(ctx),
                    "v": v_of(&ctx.input),
                })
            }),
            Shape::Sub(w) => {
                let input: MapFn = Arc::new(|ctx: &StepContext| json!({"v": v_of(&ctx.input)}));
                b.and_workflow(id, *w, Some(input))
            }
            other => b.and_then(leaf(id, other.clone(), fx.clone())),
        };
    }
    b.build().expect("a valid simulated workflow")
}

/// The agent of `andAgent` steps: records its effect, answers `v + 1`.
pub struct EchoAgent(pub Arc<Effects>);

#[async_trait::async_trait]
impl AgentRunner for EchoAgent {
    async fn run_agent(
        &self,
        _agent_id: &str,
        prompt: Value,
        _context: &Map<String, Value>,
        _cancel: CancellationToken,
    ) -> Result<Value, String> {
        let text = |k: &str| prompt.get(k).and_then(Value::as_str).unwrap_or("?");
        let attempt = prompt.get("attempt").and_then(Value::as_u64).unwrap_or(0) as u32;
        self.0.record(
            text("exec"),
            text("step"),
            attempt,
            text("entry").to_owned(),
        );
        Ok(json!({
            "v": v_of(&prompt) + 1,
            "a": attempt,
            "e": text("entry"),
        }))
    }
}
