//! Defines and runs a workflow in-process: no HTTP, no database.
//!
//! `cargo run -p agentry-engine --example in_process`

use std::time::Duration;

use agentry_engine::workflow::{StepContext, Workflow, step};
use agentry_engine::{Engine, EventKind, ExecuteOptions, WorkflowId};
use serde_json::{Value, json};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let review = Workflow::new("publish-post", "Publish post")
        .purpose("Checks a post, waits for an editor when it is long, then publishes it")
        .input_schema(json!({
            "type": "object",
            "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
            "required": ["title", "body"]
        }))
        .resume_schema(json!({
            "type": "object",
            "properties": {"editor": {"type": "string"}},
            "required": ["editor"]
        }))
        .and_all(
            "checks",
            vec![
                step("spelling", |_ctx: StepContext| async move {
                    Ok(json!({"spelling": "ok"}))
                }),
                step("length", |ctx: StepContext| async move {
                    let words = ctx.input["body"]
                        .as_str()
                        .unwrap_or("")
                        .split_whitespace()
                        .count();
                    Ok(json!({"words": words}))
                }),
            ],
        )
        .and_then(step("editor", |ctx: StepContext| async move {
            if let Some(r) = &ctx.resume_data {
                return Ok(json!({"approvedBy": r["editor"]}));
            }
            let words = ctx.input[1]["words"].as_u64().unwrap_or(0);
            if words > 5 {
                return Err(ctx.suspend("long posts need an editor", None));
            }
            Ok(json!({"approvedBy": "nobody needed"}))
        }))
        .and_then(step("publish", |ctx: StepContext| async move {
            ctx.sleep(Duration::from_millis(5)).await?;
            Ok(json!({
                "published": ctx.workflow_input["title"],
                "approvedBy": ctx.input["approvedBy"],
            }))
        }))
        .build()?;

    let engine = Engine::in_memory();
    engine.register(review)?;

    let workflow = WorkflowId::from("publish-post");
    let mut run = engine
        .start(
            &workflow,
            json!({"title": "Hello", "body": "one two three four five six seven"}),
            ExecuteOptions::default(),
        )
        .await?;
    while let Some(ev) = run.events.recv().await {
        let from = match &ev.kind {
            EventKind::StepStart { step_id, .. } | EventKind::StepComplete { step_id, .. } => {
                step_id.as_str()
            }
            _ => "",
        };
        println!("event {} {from}", ev.kind.type_name());
    }
    let run_id = run.execution_id.clone();
    let rec = run.finish().await?;
    println!(
        "status {} at step {:?}",
        rec.state.status(),
        rec.state.suspension().map(|s| &s.step_id)
    );

    let done = engine
        .resume(&workflow, &run_id, json!({"editor": "ada"}), None)
        .await?;
    println!(
        "status {} result {}",
        done.state.status(),
        done.state.result().unwrap_or(&Value::Null)
    );
    Ok(())
}
