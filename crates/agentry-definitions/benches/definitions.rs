//! What a definition's expressions and tasks cost, with no I/O.
//! `cargo bench -p agentry-definitions --bench definitions` (docs/PERFORMANCE.md reads the
//! figures):
//!
//! - `expr .text | length` and `expr word count`: one evaluation of a compiled expression with
//!   the arguments a task passes (`$context`, `$input`, `$task`, `$workflow`, ...): a typical
//!   small one, and the one of `word-count-dsl`'s `set`
//!   (`crates/agentry-bench/definitions/workflows/word-count-dsl.yaml`);
//! - `word-count compiled` and `word-count-dsl`: one execution on the in-memory engine of the
//!   examples' `word-count` (one `andThen` step, as `crates/agentry-server/src/examples.rs`
//!   writes it) and of the same workflow as a definition (one engine step running one `set`
//!   task); the difference is what running the document costs over the compiled step.

use std::sync::Arc;
use std::time::Instant;

use agentry_definitions::expr::Expr;
use agentry_definitions::model::ARGUMENTS;
use agentry_definitions::outbound::{Outbound, Policy};
use agentry_definitions::secrets::Secrets;
use agentry_definitions::{Services, load, workflow};
use agentry_engine::workflow::step;
use agentry_engine::{Engine, ExecuteOptions, ExecutionState, StepContext, Workflow, WorkflowId};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

const WORD_COUNT_DSL: &str =
    include_str!("../../agentry-bench/definitions/workflows/word-count-dsl.yaml");

/// The input of both workflows (and of the expressions).
fn input() -> Value {
    json!({"text": "the quick brown fox jumps over the lazy dog"})
}

/// The examples' `word-count`, compiled.
fn compiled() -> Workflow {
    Workflow::new("word-count", "Word Count")
        .input_schema(json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"]
        }))
        .and_then(step("count", |ctx: StepContext| async move {
            let text = ctx.input.get("text").and_then(Value::as_str).unwrap_or("");
            Ok(json!({"words": text.split_whitespace().count()}))
        }))
        .build()
        .expect("a workflow")
}

fn services() -> Services {
    Services {
        outbound: Arc::new(Outbound::new(Policy::default()).expect("an outbound client")),
        events: None,
        events_sink: None,
        starter: None,
        secrets: Arc::new(Secrets::default()),
        runtime: Arc::new(json!({"name": "agentry", "version": "bench", "metadata": {}})),
    }
}

fn word_count_dsl() -> Workflow {
    let source = load::parse("word-count-dsl.yaml", WORD_COUNT_DSL, false).expect("YAML");
    let doc = load::read("word-count-dsl.yaml", source).expect("a valid definition");
    workflow::workflow(Arc::new(doc), services()).expect("a workflow")
}

/// A fresh engine for each sample (the in-memory store keeps every execution).
fn fresh_engine() -> Engine {
    let engine = Engine::in_memory();
    engine.register(compiled()).expect("registered");
    engine.register(word_count_dsl()).expect("registered");
    engine
}

fn expression_benches(c: &mut Criterion) {
    let input = input();
    // The arguments as a task of word-count-dsl has them (run.rs: `Run::args`).
    let task = json!({
        "name": "count",
        "reference": "/do/0/count",
        "definition": {"set": {"words": "${ ... }"}},
        "input": input,
        "startedAt": {"iso8601": "2026-11-28T00:00:00.000Z",
                      "epoch": {"seconds": 1_795_824_000, "milliseconds": 1_795_824_000_000_u64}},
    });
    let workflow =
        json!({"id": "e-1", "definition": {}, "input": input, "startedAt": task["startedAt"]});
    let (context, null, secrets) = (json!({}), Value::Null, json!({}));
    let runtime = json!({"name": "agentry", "version": "bench", "metadata": {}});
    let args: Vec<(&str, &Value)> = vec![
        ("context", &context),
        ("input", &input),
        ("output", &null),
        ("secrets", &secrets),
        ("task", &task),
        ("workflow", &workflow),
        ("runtime", &runtime),
        ("authorization", &null),
    ];
    let cases = [
        ("expr .text | length", ".text | length"),
        (
            "expr word count",
            r#"[.text | splits("\\s+") | select(length > 0)] | length"#,
        ),
    ];
    for (name, src) in cases {
        let expr = Expr::compile(src, &ARGUMENTS).expect("an expression");
        c.bench_function(name, |b| {
            b.iter(|| expr.eval(&input, &args).expect("evaluated"))
        });
    }
}

fn workflow_benches(c: &mut Criterion) {
    // One thread: the work itself, not the cost of waking another thread per execution.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let run = |id: &'static str, iters: u64| {
        let engine = fresh_engine();
        let id = WorkflowId::from(id);
        rt.block_on(async {
            let start = Instant::now();
            for _ in 0..iters {
                engine
                    .execute(&id, input(), ExecuteOptions::default())
                    .await
                    .expect("an execution");
            }
            start.elapsed()
        })
    };
    // Both give the same result.
    for id in ["word-count", "word-count-dsl"] {
        let engine = fresh_engine();
        let rec = rt
            .block_on(engine.execute(&WorkflowId::from(id), input(), ExecuteOptions::default()))
            .expect("an execution");
        match rec.state {
            ExecutionState::Completed { result, .. } => assert_eq!(result, json!({"words": 9})),
            other => panic!("{id}: {other:?}"),
        }
    }
    c.bench_function("word-count compiled", |b| {
        b.iter_custom(|n| run("word-count", n))
    });
    c.bench_function("word-count-dsl", |b| {
        b.iter_custom(|n| run("word-count-dsl", n))
    });
}

criterion_group!(benches, expression_benches, workflow_benches);
criterion_main!(benches);
