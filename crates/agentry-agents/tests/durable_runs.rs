//! Durable agent runs on the engine, in memory, on a clock the test moves: a tool call that needs
//! approval suspends the run and never runs before its answer; an approval runs it once, a
//! denial never, a deadline that passes is a denial; a second answer finds nothing to answer;
//! and a generation held in memory refuses such a call (it fails closed).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use agentry_agents::{
    Agent, AgentHub, Approval, ApprovalAnswer, FnTool, GenerateOptions, Message, OfflineModel,
    RunInput, resume_data, run_workflow_id,
};
use agentry_engine::clock::ManualClock;
use agentry_engine::store::InMemoryExecutionStore;
use agentry_engine::{
    AgentId, Engine, EngineConfig, EngineError, ExecuteOptions, ExecutionId, ExecutionRecord,
    Status,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The operator's tools, the refund counting its runs.
fn operator(refunds: Arc<AtomicU32>) -> Agent {
    let lookup = FnTool::new(
        "lookup_order",
        "Looks up an order.",
        json!({"type": "object", "properties": {"orderId": {"type": "string"}}, "required": ["orderId"]}),
        |args, _| async move { Ok(json!({"orderId": args["orderId"], "total": 250})) },
    );
    let refund = FnTool::new(
        "issue_refund",
        "Refunds an order.",
        json!({"type": "object", "properties": {"orderId": {"type": "string"}, "amount": {"type": "number"}, "reason": {"type": "string"}}, "required": ["orderId", "amount", "reason"]}),
        move |args, _| {
            let refunds = refunds.clone();
            async move {
                refunds.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"orderId": args["orderId"], "refunded": args["amount"]}))
            }
        },
    )
    .needs_approval(
        Approval::when(|args| args["amount"].as_f64().is_none_or(|a| a > 100.0))
            .within(Duration::from_secs(3600))
            .denial("Refund not approved"),
    );
    Agent::new("operator", "Operator")
        .tool(Arc::new(lookup))
        .tool(Arc::new(refund))
        .durable()
}

struct World {
    engine: Engine,
    hub: AgentHub,
    clock: Arc<ManualClock>,
    refunds: Arc<AtomicU32>,
}

fn world() -> World {
    let clock = Arc::new(ManualClock::new(chrono::Utc::now()));
    let engine = Engine::with(
        Arc::new(InMemoryExecutionStore::new()),
        clock.clone(),
        EngineConfig::default(),
    );
    let hub = AgentHub::new(Arc::new(OfflineModel), None);
    let refunds = Arc::new(AtomicU32::new(0));
    hub.register(operator(refunds.clone())).unwrap();
    let agent = hub.agent(&AgentId::from("operator")).unwrap();
    engine.register(hub.run_workflow(&agent)).unwrap();
    World {
        engine,
        hub,
        clock,
        refunds,
    }
}

async fn start(w: &World, id: &str, text: &str) -> ExecutionRecord {
    let input = RunInput::new(
        vec![Message::user(text)],
        &GenerateOptions::default(),
        false,
    );
    w.engine
        .execute(
            &run_workflow_id("operator"),
            serde_json::to_value(input).unwrap(),
            ExecuteOptions {
                execution_id: Some(ExecutionId::from(id)),
                ..ExecuteOptions::default()
            },
        )
        .await
        .unwrap()
}

async fn answer(
    w: &World,
    id: &str,
    approved: bool,
    reason: Option<&str>,
) -> Result<ExecutionRecord, EngineError> {
    let answer = ApprovalAnswer {
        approval_id: "ap-2-0".into(),
        approved,
        reason: reason.map(str::to_owned),
        expired: false,
        by: None,
    };
    w.engine
        .resume(
            &run_workflow_id("operator"),
            &ExecutionId::from(id),
            resume_data(&[answer]),
            None,
        )
        .await
}

fn text(rec: &ExecutionRecord) -> String {
    rec.state.result().expect("a result")["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Waits (scheduler turns, no wall-clock time) until `id` is `status`.
async fn settles(engine: &Engine, id: &str, status: Status) -> ExecutionRecord {
    for _ in 0..10_000 {
        let rec = engine.store().get(id).await.unwrap().unwrap();
        if rec.state.status() == status {
            return rec;
        }
        tokio::task::yield_now().await;
    }
    panic!("{id} never became {status}");
}

#[tokio::test]
async fn an_approved_call_runs_once_and_a_second_answer_finds_nothing() {
    let w = world();
    let rec = start(&w, "r1", "refund order o-1 250 damaged box").await;
    assert_eq!(rec.state.status(), Status::Suspended);
    assert_eq!(
        rec.state.suspension().unwrap().reason,
        "Tool approval required: issue_refund"
    );
    assert_eq!(
        w.refunds.load(Ordering::SeqCst),
        0,
        "nothing runs before the answer"
    );
    let done = answer(&w, "r1", true, None).await.unwrap();
    assert_eq!(done.state.status(), Status::Completed);
    assert_eq!(text(&done), "Refunded 250 for order o-1.");
    assert_eq!(w.refunds.load(Ordering::SeqCst), 1);
    assert!(matches!(
        answer(&w, "r1", true, None).await,
        Err(EngineError::NotSuspended { .. })
    ));
    assert_eq!(w.refunds.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_denied_call_never_runs_and_the_model_hears_why() {
    let w = world();
    start(&w, "r2", "refund order o-1 250 damaged box").await;
    let done = answer(&w, "r2", false, Some("not ours")).await.unwrap();
    assert_eq!(
        text(&done),
        "The refund of 250 for order o-1 was not approved: not ours."
    );
    assert_eq!(w.refunds.load(Ordering::SeqCst), 0);
    let result = &done.progress.steps["run/tool-2-0"];
    assert_eq!(
        result.output.as_ref().unwrap()["result"]["error"],
        "Refund not approved: not ours"
    );
}

#[tokio::test]
async fn the_deadline_is_a_denial_when_the_clock_reaches_it() {
    let w = world();
    let rec = start(&w, "r3", "refund order o-1 250 damaged box").await;
    let id = ExecutionId::from(rec.id.as_str());
    w.clock.advance(Duration::from_secs(59 * 60));
    assert!(w.engine.fire_timer(&id).await.unwrap().is_none(), "not due");
    w.clock.advance(Duration::from_secs(2 * 60));
    let done = settles(&w.engine, &rec.id, Status::Completed).await;
    assert!(
        text(&done).contains("was not approved: nobody answered"),
        "{}",
        text(&done)
    );
    assert_eq!(w.refunds.load(Ordering::SeqCst), 0);
    let approval: Value = done.progress.steps["run/approval-2-0"]
        .output
        .clone()
        .unwrap();
    assert_eq!(approval["expired"], true);
}

#[tokio::test]
async fn a_call_under_the_threshold_needs_no_approval() {
    let w = world();
    let rec = start(&w, "r4", "refund order o-2 40 late").await;
    assert_eq!(rec.state.status(), Status::Completed);
    assert_eq!(text(&rec), "Refunded 40 for order o-2.");
    assert_eq!(w.refunds.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_generation_held_in_memory_refuses_a_call_that_needs_approval() {
    let w = world();
    let r = w
        .hub
        .generate_text(
            &AgentId::from("operator"),
            vec![Message::user("refund order o-1 250 damaged box")],
            GenerateOptions::default(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(w.refunds.load(Ordering::SeqCst), 0);
    assert!(r.tool_results[1].is_error, "{r:?}");
}
