//! The engine's own cost, with no I/O: the in-memory store, the offline clock of the process.
//! `cargo bench -p agentry-engine --bench engine` (docs/PERFORMANCE.md reads the figures):
//!
//! - `andThen x1` and `andThen x11`: a workflow of one step and of eleven; the difference over ten
//!   is the overhead of one `andThen` step (its checkpoint, events and context);
//! - `andAll of 10`: one step running ten children concurrently;
//! - `suspend + resume`: an execution that suspends at its step, then its resume to the end.

use agentry_engine::workflow::step;
use agentry_engine::{
    Engine, ExecuteOptions, ExecutionId, StepContext, StepError, Workflow, WorkflowId,
};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use std::time::Instant;

fn add_one() -> impl Fn(StepContext) -> std::future::Ready<Result<Value, StepError>> {
    |ctx: StepContext| std::future::ready(Ok(json!(ctx.input.as_i64().unwrap_or(0) + 1)))
}

fn chain(id: &str, steps: usize) -> Workflow {
    let mut wf = Workflow::new(id, id);
    for i in 0..steps {
        wf = wf.and_then(step(format!("s{i}"), add_one()));
    }
    wf.build().expect("a workflow")
}

fn fan_out() -> Workflow {
    let children = (0..10).map(|i| step(format!("c{i}"), add_one())).collect();
    Workflow::new("fan", "fan")
        .and_all("all", children)
        .build()
        .expect("a workflow")
}

fn gate() -> Workflow {
    Workflow::new("gate", "gate")
        .and_then(step("wait", |ctx: StepContext| async move {
            match ctx.resume_data {
                Some(v) => Ok(v),
                None => Err(ctx.suspend("waiting", None)),
            }
        }))
        .build()
        .expect("a workflow")
}

/// A fresh engine for each sample: the in-memory store keeps every execution, and one that had
/// grown through every sample before would time its own growth (rehashing, page faults) instead
/// of the engine.
fn fresh_engine() -> Engine {
    let engine = Engine::in_memory();
    for wf in [chain("one", 1), chain("eleven", 11), fan_out(), gate()] {
        engine.register(wf).expect("registered");
    }
    engine
}

fn engine_benches(c: &mut Criterion) {
    // One thread: the engine's own work, not the cost of waking another thread per execution.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    // `iters` executions in one `block_on`, timed together.
    let run = |id: &'static str, iters: u64| {
        let engine = fresh_engine();
        let id = WorkflowId::from(id);
        rt.block_on(async {
            let start = Instant::now();
            for _ in 0..iters {
                engine
                    .execute(&id, json!(0), ExecuteOptions::default())
                    .await
                    .expect("an execution");
            }
            start.elapsed()
        })
    };
    c.bench_function("andThen x1", |b| b.iter_custom(|n| run("one", n)));
    c.bench_function("andThen x11", |b| b.iter_custom(|n| run("eleven", n)));
    c.bench_function("andAll of 10", |b| b.iter_custom(|n| run("fan", n)));
    c.bench_function("suspend + resume", |b| {
        b.iter_custom(|n| {
            let engine = fresh_engine();
            let gate = WorkflowId::from("gate");
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..n {
                    let rec = engine
                        .execute(&gate, json!(0), ExecuteOptions::default())
                        .await
                        .expect("suspended");
                    engine
                        .resume(&gate, &ExecutionId::from(rec.id), json!(1), None)
                        .await
                        .expect("resumed");
                }
                start.elapsed()
            })
        })
    });
}

criterion_group!(benches, engine_benches);
criterion_main!(benches);
