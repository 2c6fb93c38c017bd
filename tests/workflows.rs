//! The workflow routes of the HTTP contract (spec sections 2-4, 6, 7) and the example workflows
//! of `examples.md`, against the real server over HTTP, on SQLite and on PostgreSQL.
//!
//! Every test body is an `async fn(Backend)`; `agentry_tests::backend_tests!` instantiates each
//! one as `sqlite::<name>` and `postgres::<name>`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentry_tests::{Backend, TestServer, assert_failure, assert_iso, new_id, ok_data};
use serde_json::{Value, json};

agentry_tests::backend_tests!(
    lists_the_example_workflows,
    workflow_detail_lists_steps_and_schemas,
    unknown_workflow_is_404,
    expense_under_limit_completes,
    expense_over_limit_suspends_and_resumes,
    expense_resume_and_suspend_errors,
    wrong_workflow_in_path_is_404,
    order_fulfillment_worked_example,
    order_fulfillment_without_express,
    order_fulfillment_large_order_scores_fraud,
    word_count_counts_words,
    request_errors_are_envelopes,
    caller_chosen_execution_id,
    stream_of_order_fulfillment,
    stream_of_suspending_expense,
    stream_with_invalid_input_is_400,
    countdown_suspends_while_running_and_resumes,
    concurrent_resumes_resume_once,
    idempotent_start_rejoins_a_running_execution,
    cancel_a_running_execution,
    cancel_a_suspended_execution,
    cancel_refusals,
    executions_are_listed_newest_first_in_pages,
    executions_across_workflows,
    flaky_step_is_retried_until_it_succeeds,
    flaky_step_fails_after_its_last_attempt,
    flaky_step_attempts_time_out,
    approval_deadline_approved_in_time,
    approval_deadline_expires_by_itself,
);

const APPROVAL_REASON: &str = "Manager approval required for amounts over 1000";

fn worked_order(order_id: &str, express: bool) -> Value {
    json!({
        "orderId": order_id,
        "items": [
            {"sku": "A", "quantity": 2, "unitPrice": 10},
            {"sku": "B", "quantity": 1, "unitPrice": 5.5}
        ],
        "express": express
    })
}

fn expense(employee: &str, amount: i64) -> Value {
    json!({"employeeId": employee, "amount": amount, "category": "travel"})
}

fn exec_path(workflow: &str, id: &str, action: &str) -> String {
    format!("/workflows/{workflow}/executions/{id}/{action}")
}

/// Asserts the completed form of an execution result and returns `result`.
fn assert_completed(data: &Value) -> Value {
    assert_eq!(data["status"], "completed", "{data}");
    assert!(data["executionId"].is_string(), "{data}");
    let start = assert_iso(&data["startAt"]);
    let end = assert_iso(&data["endAt"]);
    assert!(end >= start, "endAt before startAt: {data}");
    assert!(data.get("suspension").is_none(), "{data}");
    data["result"].clone()
}

/// Starts an expense-approval over 1000 and returns its execution id, checking the suspended form.
async fn start_suspended_expense(s: &TestServer, employee: &str) -> String {
    let data = s
        .post_data(
            "/workflows/expense-approval/execute",
            &json!({"input": expense(employee, 1500)}),
        )
        .await;
    assert_eq!(data["status"], "suspended", "{data}");
    data["executionId"].as_str().unwrap().to_owned()
}

async fn state_of(s: &TestServer, workflow: &str, id: &str) -> Value {
    s.get_data(&exec_path(workflow, id, "state")).await
}

// ---------------------------------------------------------------------------------------------
// Listing and detail
// ---------------------------------------------------------------------------------------------

async fn lists_the_example_workflows(backend: Backend) {
    let s = TestServer::start(backend).await;
    let data = s.get_data("/workflows").await;
    assert_eq!(
        data,
        json!([
            {
                "id": "expense-approval",
                "name": "Expense Approval",
                "purpose": "Approves an expense; amounts over 1000 wait for a manager.",
                "stepsCount": 2,
                "status": "idle"
            },
            {
                "id": "order-fulfillment",
                "name": "Order Fulfillment",
                "purpose": "Prices, checks and ships an order: every control-flow step type.",
                "stepsCount": 6,
                "status": "idle"
            },
            {
                "id": "word-count",
                "name": "Word Count",
                "purpose": "Counts the whitespace-separated words of a text.",
                "stepsCount": 1,
                "status": "idle"
            },
            {
                "id": "countdown",
                "name": "Countdown",
                "purpose": "A slow workflow of five ticks, for suspending a running execution.",
                "stepsCount": 5,
                "status": "idle"
            },
            {
                "id": "content-pipeline",
                "name": "Content Pipeline",
                "purpose": "Drafts a text on a topic with the writer agent, counts its words, packages both.",
                "stepsCount": 3,
                "status": "idle"
            },
            {
                "id": "flaky-step",
                "name": "Flaky Step",
                "purpose": "One step that fails failTimes times before it succeeds: retries and time-outs.",
                "stepsCount": 1,
                "status": "idle"
            },
            {
                "id": "approval-deadline",
                "name": "Approval With a Deadline",
                "purpose": "Waits for an approval, at most timeoutMs: then it expires by itself.",
                "stepsCount": 1,
                "status": "idle"
            },
            {
                "id": "payment-webhook",
                "name": "Payment Webhook",
                "purpose": "Waits for the payment event of an order (by its id, up to an hour), then confirms it.",
                "stepsCount": 2,
                "status": "idle"
            },
            {
                "id": "nightly-report",
                "name": "Nightly Report",
                "purpose": "Counts the executions of every workflow that started on a day; its schedule runs it each night.",
                "stepsCount": 1,
                "status": "idle"
            },
            {
                "id": "batch-enrich",
                "name": "Batch Enrich",
                "purpose": "Enriches each item (at most concurrency at once), streaming the progress; then totals.",
                "stepsCount": 2,
                "status": "idle"
            },
            {
                "id": "enrich-customer",
                "name": "Enrich Customer",
                "purpose": "Enriches a customer's record through a rate-limited provider: queued, 4 at once, one per customer, 50 starts a second.",
                "stepsCount": 1,
                "status": "idle"
            }
        ])
    );
    s.stop().await;
}

async fn workflow_detail_lists_steps_and_schemas(backend: Backend) {
    let s = TestServer::start(backend).await;

    let d = s.get_data("/workflows/expense-approval").await;
    assert_eq!(d["id"], "expense-approval");
    assert_eq!(d["name"], "Expense Approval");
    assert_eq!(
        d["purpose"],
        "Approves an expense; amounts over 1000 wait for a manager."
    );
    assert_eq!(d["status"], "idle");
    assert_eq!(d["stepsCount"], 2);
    assert_eq!(
        d["steps"],
        json!([
            {
                "id": "check-approval",
                "name": "Check approval",
                "type": "andThen",
                "purpose": "Approves up to 1000 automatically; above that, waits for a manager."
            },
            {
                "id": "record-decision",
                "name": "Record decision",
                "type": "andThen",
                "purpose": "Records the approval decision."
            }
        ])
    );
    assert_eq!(
        d["inputSchema"],
        json!({
            "type": "object",
            "properties": {
                "employeeId": {"type": "string"},
                "amount": {"type": "number", "minimum": 0},
                "category": {"type": "string"}
            },
            "required": ["employeeId", "amount", "category"]
        })
    );
    assert_eq!(
        d["suspendSchema"],
        json!({
            "type": "object",
            "properties": {"employeeId": {"type": "string"}, "amount": {"type": "number"}},
            "required": ["employeeId", "amount"]
        })
    );
    assert_eq!(
        d["resumeSchema"],
        json!({
            "type": "object",
            "properties": {"approved": {"type": "boolean"}, "managerId": {"type": "string"}},
            "required": ["approved", "managerId"]
        })
    );
    // No declared version: the digest of the step graph, the only one, nothing in flight.
    let version = d["version"].as_str().unwrap();
    assert!(version.starts_with("g-"), "{d}");
    assert_eq!(
        d["versions"],
        json!([{"version": version, "current": true, "registered": true, "inFlight": 0}])
    );

    let d = s.get_data("/workflows/order-fulfillment").await;
    assert_eq!(d["stepsCount"], 6);
    let steps: Vec<(String, String)> = d["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| {
            assert!(st["name"].is_string() && st["purpose"].is_string(), "{st}");
            (
                st["id"].as_str().unwrap().to_owned(),
                st["type"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("price-order", "andThen"),
        ("run-checks", "andAll"),
        ("express-fee", "andWhen"),
        ("pick-carrier", "andRace"),
        ("audit", "andTap"),
        ("summarize", "andThen"),
    ];
    assert_eq!(
        steps,
        expected
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>()
    );
    assert_eq!(d["inputSchema"]["required"], json!(["orderId", "items"]));
    assert_eq!(d["inputSchema"]["properties"]["items"]["minItems"], 1);
    assert_eq!(d["suspendSchema"], Value::Null);
    assert_eq!(d["resumeSchema"], Value::Null);

    let d = s.get_data("/workflows/word-count").await;
    assert_eq!(
        d,
        json!({
            "id": "word-count",
            "name": "Word Count",
            "purpose": "Counts the whitespace-separated words of a text.",
            "status": "idle",
            "stepsCount": 1,
            "steps": [{"id": "count", "name": "Count", "type": "andThen", "purpose": "Counts words."}],
            "inputSchema": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"]
            },
            "suspendSchema": null,
            "resumeSchema": null,
            // The digest of its step graph, the same on every server and build.
            "version": "g-ba74d58b8b23e7a8",
            "versions": [{"version": "g-ba74d58b8b23e7a8", "current": true, "registered": true, "inFlight": 0}]
        })
    );

    let d = s.get_data("/workflows/countdown").await;
    let ids: Vec<&str> = d["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| st["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["tick-5", "tick-4", "tick-3", "tick-2", "tick-1"]);
    assert_eq!(d["suspendSchema"], Value::Null);
    s.stop().await;
}

async fn unknown_workflow_is_404(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (status, body) = s.get_json("/workflows/nope").await;
    assert_eq!(
        body,
        json!({"success": false, "error": "Workflow nope not found", "code": "workflow_not_found"})
    );
    assert_eq!(status, 404);

    let (status, body) = s
        .post_json("/workflows/nope/execute", &json!({"input": {}}))
        .await;
    assert_eq!(
        assert_failure(status, &body, 404),
        "Workflow nope not found"
    );
    let (status, body) = s.get_json(&exec_path("nope", &new_id(), "state")).await;
    assert_failure(status, &body, 404);
    s.stop().await;
}

// ---------------------------------------------------------------------------------------------
// expense-approval: suspend and resume
// ---------------------------------------------------------------------------------------------

async fn expense_under_limit_completes(backend: Backend) {
    let s = TestServer::start(backend).await;
    let data = s
        .post_data(
            "/workflows/expense-approval/execute",
            &json!({"input": expense("e-1", 500)}),
        )
        .await;
    let result = assert_completed(&data);
    assert_eq!(
        result,
        json!({"status": "approved", "employeeId": "e-1", "amount": 500, "approvedBy": "auto"})
    );
    let id = data["executionId"].as_str().unwrap();
    let st = state_of(&s, "expense-approval", id).await;
    assert_eq!(st["status"], "completed");
    assert_eq!(st["workflowId"], "expense-approval");
    assert!(st.get("suspension").is_none(), "{st}");
    s.stop().await;
}

async fn expense_over_limit_suspends_and_resumes(backend: Backend) {
    let s = TestServer::start(backend).await;
    let input = expense("e-2", 1500);
    let data = s
        .post_data(
            "/workflows/expense-approval/execute",
            &json!({
                "input": input,
                "options": {"userId": "u-42", "context": {"tier": "gold", "region": "eu"}}
            }),
        )
        .await;
    assert_eq!(data["status"], "suspended", "{data}");
    assert_eq!(data["endAt"], Value::Null);
    assert_eq!(data["result"], Value::Null);
    assert_iso(&data["startAt"]);
    let susp = &data["suspension"];
    assert_iso(&susp["suspendedAt"]);
    assert_eq!(susp["reason"], APPROVAL_REASON);
    assert_eq!(susp["suspendedStepIndex"], 0);
    let id = data["executionId"].as_str().unwrap().to_owned();
    uuid::Uuid::parse_str(&id).expect("generated execution ids are uuids");

    let st = state_of(&s, "expense-approval", &id).await;
    assert_eq!(st["executionId"], id.as_str());
    assert_eq!(st["workflowId"], "expense-approval");
    assert_eq!(st["status"], "suspended");
    assert_eq!(st["startAt"], data["startAt"]);
    assert_eq!(st["input"], input);
    assert_eq!(st["suspension"]["reason"], APPROVAL_REASON);
    assert_eq!(st["suspension"]["stepIndex"], 0);
    assert_eq!(st["suspension"]["stepId"], "check-approval");
    assert_eq!(st["suspension"]["suspendedAt"], susp["suspendedAt"]);
    let ctx = st["context"].as_object().expect("context is an object");
    assert_eq!(ctx.get("userId"), Some(&json!("u-42")), "{st}");
    assert_eq!(ctx.get("tier"), Some(&json!("gold")), "{st}");
    assert_eq!(ctx.get("region"), Some(&json!("eu")), "{st}");

    let done = s
        .post_data(
            &exec_path("expense-approval", &id, "resume"),
            &json!({"resumeData": {"approved": true, "managerId": "m-7"}}),
        )
        .await;
    assert_eq!(done["executionId"], id.as_str());
    assert_eq!(done["startAt"], data["startAt"]);
    assert_eq!(
        assert_completed(&done),
        json!({"status": "approved", "employeeId": "e-2", "amount": 1500, "approvedBy": "m-7"})
    );
    let st = state_of(&s, "expense-approval", &id).await;
    assert_eq!(st["status"], "completed");
    assert!(st.get("suspension").is_none(), "{st}");

    // A manager can also reject.
    let id2 = start_suspended_expense(&s, "e-3").await;
    let done = s
        .post_data(
            &exec_path("expense-approval", &id2, "resume"),
            &json!({"resumeData": {"approved": false, "managerId": "m-8"}}),
        )
        .await;
    assert_eq!(
        assert_completed(&done),
        json!({"status": "rejected", "employeeId": "e-3", "amount": 1500, "approvedBy": "m-8"})
    );
    s.stop().await;
}

async fn expense_resume_and_suspend_errors(backend: Backend) {
    let s = TestServer::start(backend).await;
    let id = start_suspended_expense(&s, "e-4").await;
    let resume = exec_path("expense-approval", &id, "resume");
    let suspend = exec_path("expense-approval", &id, "suspend");

    // Invalid resume data: 400, and the execution stays suspended.
    for bad in [
        json!({"resumeData": {"approved": "yes", "managerId": "m-1"}}),
        json!({"resumeData": {"approved": true}}),
        json!({"resumeData": "approve"}),
    ] {
        let (status, body) = s.post_json(&resume, &bad).await;
        assert_failure(status, &body, 400);
    }
    let st = state_of(&s, "expense-approval", &id).await;
    assert_eq!(st["status"], "suspended", "{st}");

    // Suspending an already suspended execution: 400, unchanged.
    let (status, body) = s.post_json(&suspend, &json!({"reason": "again"})).await;
    assert_failure(status, &body, 400);
    let st = state_of(&s, "expense-approval", &id).await;
    assert_eq!(st["status"], "suspended");
    assert_eq!(st["suspension"]["reason"], APPROVAL_REASON);

    // Unknown executions: 404 for resume, suspend and state.
    let unknown = new_id();
    let (status, body) = s
        .post_json(
            &exec_path("expense-approval", &unknown, "resume"),
            &json!({"resumeData": {"approved": true, "managerId": "m"}}),
        )
        .await;
    assert_failure(status, &body, 404);
    let (status, body) = s
        .post_json(
            &exec_path("expense-approval", &unknown, "suspend"),
            &json!({"reason": "x"}),
        )
        .await;
    assert_failure(status, &body, 404);
    let (status, body) = s
        .get_json(&exec_path("expense-approval", &unknown, "state"))
        .await;
    assert_failure(status, &body, 404);

    // Resume for real, then: resume again is 404, suspend is 400.
    let done = s
        .post_data(
            &resume,
            &json!({"resumeData": {"approved": true, "managerId": "m-1"}}),
        )
        .await;
    assert_completed(&done);
    let (status, body) = s
        .post_json(
            &resume,
            &json!({"resumeData": {"approved": true, "managerId": "m-1"}}),
        )
        .await;
    assert_failure(status, &body, 404);
    let (status, body) = s.post_json(&suspend, &json!({"reason": "late"})).await;
    assert_failure(status, &body, 400);

    // A completed run (never suspended) cannot be suspended either.
    let data = s
        .post_data(
            "/workflows/expense-approval/execute",
            &json!({"input": expense("e-5", 10)}),
        )
        .await;
    let cid = data["executionId"].as_str().unwrap();
    let (status, body) = s
        .post_json(
            &exec_path("expense-approval", cid, "suspend"),
            &json!({"reason": "too late"}),
        )
        .await;
    assert_failure(status, &body, 400);
    let st = state_of(&s, "expense-approval", cid).await;
    assert_eq!(st["status"], "completed");
    s.stop().await;
}

async fn wrong_workflow_in_path_is_404(backend: Backend) {
    let s = TestServer::start(backend).await;
    let id = start_suspended_expense(&s, "e-6").await;
    for wf in ["word-count", "order-fulfillment"] {
        let (status, body) = s.get_json(&exec_path(wf, &id, "state")).await;
        assert_failure(status, &body, 404);
        let (status, body) = s
            .post_json(&exec_path(wf, &id, "suspend"), &json!({"reason": "x"}))
            .await;
        assert_failure(status, &body, 404);
        let (status, body) = s
            .post_json(
                &exec_path(wf, &id, "resume"),
                &json!({"resumeData": {"approved": true, "managerId": "m"}}),
            )
            .await;
        assert_failure(status, &body, 404);
    }
    // An unknown workflow id in the path.
    let (status, body) = s
        .post_json(
            &exec_path("nope", &id, "resume"),
            &json!({"resumeData": {"approved": true, "managerId": "m"}}),
        )
        .await;
    assert_failure(status, &body, 404);
    // Nothing of that touched the execution.
    let st = state_of(&s, "expense-approval", &id).await;
    assert_eq!(st["status"], "suspended");
    assert_eq!(st["suspension"]["reason"], APPROVAL_REASON);
    s.stop().await;
}

// ---------------------------------------------------------------------------------------------
// order-fulfillment and word-count
// ---------------------------------------------------------------------------------------------

async fn order_fulfillment_worked_example(backend: Backend) {
    let s = TestServer::start(backend).await;
    let data = s
        .post_data(
            "/workflows/order-fulfillment/execute",
            &json!({"input": worked_order("o-1", true)}),
        )
        .await;
    assert_eq!(
        assert_completed(&data),
        json!({
            "orderId": "o-1",
            "subtotal": 25.5,
            "shippingFee": 15,
            "carrier": "swift",
            "carrierCost": 7,
            "total": 47.5,
            "inStock": true,
            "fraudScore": 0.1
        })
    );
    // The stored execution carries the same result.
    let st = state_of(
        &s,
        "order-fulfillment",
        data["executionId"].as_str().unwrap(),
    )
    .await;
    assert_eq!(st["status"], "completed");
    assert_eq!(st["result"], data["result"]);
    s.stop().await;
}

async fn order_fulfillment_without_express(backend: Backend) {
    let s = TestServer::start(backend).await;
    let data = s
        .post_data(
            "/workflows/order-fulfillment/execute",
            &json!({"input": worked_order("o-2", false)}),
        )
        .await;
    assert_eq!(
        assert_completed(&data),
        json!({
            "orderId": "o-2",
            "subtotal": 25.5,
            "shippingFee": 0,
            "carrier": "swift",
            "carrierCost": 7,
            "total": 32.5,
            "inStock": true,
            "fraudScore": 0.1
        })
    );
    s.stop().await;
}

async fn order_fulfillment_large_order_scores_fraud(backend: Backend) {
    let s = TestServer::start(backend).await;
    // `express` left out: it defaults to false.
    let data = s
        .post_data(
            "/workflows/order-fulfillment/execute",
            &json!({"input": {
                "orderId": "o-3",
                "items": [{"sku": "GOLD", "quantity": 3, "unitPrice": 4000}]
            }}),
        )
        .await;
    assert_eq!(
        assert_completed(&data),
        json!({
            "orderId": "o-3",
            "subtotal": 12000,
            "shippingFee": 0,
            "carrier": "swift",
            "carrierCost": 7,
            "total": 12007,
            "inStock": true,
            "fraudScore": 0.9
        })
    );
    // Exactly at the threshold the score stays low.
    let data = s
        .post_data(
            "/workflows/order-fulfillment/execute",
            &json!({"input": {
                "orderId": "o-4",
                "items": [{"sku": "GOLD", "quantity": 1, "unitPrice": 10000}],
                "express": true
            }}),
        )
        .await;
    let r = assert_completed(&data);
    assert_eq!(r["fraudScore"], 0.1, "{r}");
    assert_eq!(r["total"], 10022, "{r}");
    s.stop().await;
}

async fn word_count_counts_words(backend: Backend) {
    let s = TestServer::start(backend).await;
    let data = s
        .post_data(
            "/workflows/word-count/execute",
            &json!({"input": {"text": "the quick  brown fox"}}),
        )
        .await;
    assert_eq!(assert_completed(&data), json!({"words": 4}));
    let data = s
        .post_data(
            "/workflows/word-count/execute",
            &json!({"input": {"text": " \n\t "}}),
        )
        .await;
    assert_eq!(assert_completed(&data), json!({"words": 0}));
    s.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Errors of section 7
// ---------------------------------------------------------------------------------------------

async fn request_errors_are_envelopes(backend: Backend) {
    let s = TestServer::start(backend).await;
    let execute = "/workflows/expense-approval/execute";

    // Input failing the schema.
    for input in [
        json!({"employeeId": "e", "amount": -1, "category": "c"}),
        json!({"employeeId": "e", "amount": "10", "category": "c"}),
        json!({"employeeId": "e", "category": "c"}),
        json!("not an object"),
    ] {
        let (status, body) = s.post_json(execute, &json!({"input": input})).await;
        let msg = assert_failure(status, &body, 400);
        assert!(
            msg.starts_with("Input validation failed: "),
            "{input} -> {msg}"
        );
    }
    let (status, body) = s
        .post_json(
            "/workflows/order-fulfillment/execute",
            &json!({"input": {"orderId": "o", "items": []}}),
        )
        .await;
    assert!(assert_failure(status, &body, 400).starts_with("Input validation failed: "));
    let (status, body) = s
        .post_json(
            "/workflows/order-fulfillment/execute",
            &json!({"input": {"orderId": "o", "items": [{"sku": "A", "quantity": 0, "unitPrice": 1}]}}),
        )
        .await;
    assert!(assert_failure(status, &body, 400).starts_with("Input validation failed: "));

    // Missing `input`.
    let (status, body) = s.post_json(execute, &json!({"options": {}})).await;
    assert_failure(status, &body, 400);
    // Malformed JSON.
    let (status, body) = s
        .post_raw(execute, "application/json", r#"{"input": {"employeeId": "#)
        .await;
    assert_failure(status, &body, 400);
    // Wrong Content-Type: 415 (a cross-site form or text/plain request never reaches the run).
    let (status, body) = s
        .post_raw(
            execute,
            "text/plain",
            json!({"input": expense("e", 1)}).to_string(),
        )
        .await;
    assert_failure(status, &body, 415);
    // Malformed JSON on resume and suspend.
    let some = exec_path("expense-approval", &new_id(), "resume");
    let (status, body) = s.post_raw(&some, "application/json", "{").await;
    assert_failure(status, &body, 400);
    let some = exec_path("expense-approval", &new_id(), "suspend");
    let (status, body) = s.post_raw(&some, "application/json", "{").await;
    assert_failure(status, &body, 400);

    // A body over 1 MiB: 413, on every route with a body.
    let big = json!({"input": {"text": "a ".repeat(600 * 1024)}}).to_string();
    assert!(big.len() > 1024 * 1024);
    let id = new_id();
    for path in [
        "/workflows/word-count/execute".to_owned(),
        "/workflows/word-count/stream".to_owned(),
        exec_path("expense-approval", &id, "resume"),
        exec_path("expense-approval", &id, "suspend"),
    ] {
        let (status, body) = s.post_raw(&path, "application/json", big.clone()).await;
        assert_failure(status, &body, 413);
    }

    // Unknown routes and methods.
    let (status, body) = s.get_json("/nope").await;
    assert_failure(status, &body, 404);
    // A known path with a method it does not serve: 405 naming both, with Allow.
    let (status, body) = s.post_json("/workflows", &json!({})).await;
    assert_eq!(
        assert_failure(status, &body, 405),
        "Method POST not allowed on /workflows"
    );
    let resp = s
        .client
        .get(s.url("/workflows/word-count/execute"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 405);
    assert_eq!(resp.headers()["allow"], "POST");
    let resp = s
        .client
        .delete(s.url("/agents/assistant"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 405);
    assert_eq!(resp.headers()["allow"], "GET");
    s.stop().await;
}

async fn caller_chosen_execution_id(backend: Backend) {
    let s = TestServer::start(backend).await;
    let id = format!("order-{}", new_id());
    let body = json!({"input": worked_order("o-5", true), "options": {"executionId": id}});
    let data = s
        .post_data("/workflows/order-fulfillment/execute", &body)
        .await;
    assert_eq!(data["executionId"], id.as_str());
    assert_completed(&data);
    let st = state_of(&s, "order-fulfillment", &id).await;
    assert_eq!(st["executionId"], id.as_str());
    assert_eq!(st["status"], "completed");

    // Reusing it with the same workflow and input answers like the first call (an idempotent
    // start); with another input or another workflow it is a 409 naming the id, and the stored
    // execution is untouched.
    let again = s
        .post_data("/workflows/order-fulfillment/execute", &body)
        .await;
    assert_eq!(again, data);
    let other_input = json!({"input": worked_order("o-6", true), "options": {"executionId": id}});
    let (status, resp) = s
        .post_json("/workflows/order-fulfillment/execute", &other_input)
        .await;
    let msg = assert_failure(status, &resp, 409);
    assert!(msg.contains(&id), "{msg}");
    let (status, resp) = s
        .post_json(
            "/workflows/word-count/execute",
            &json!({"input": {"text": "x"}, "options": {"executionId": id}}),
        )
        .await;
    assert_failure(status, &resp, 409);
    let (status, resp) = s
        .post_json(
            "/workflows/word-count/stream",
            &json!({"input": {"text": "x"}, "options": {"executionId": id}}),
        )
        .await;
    assert_failure(status, &resp, 409);
    let st2 = state_of(&s, "order-fulfillment", &id).await;
    assert_eq!(st2["result"], st["result"]);
    assert_eq!(st2["startAt"], st["startAt"]);

    // An id that cannot be used in a path is refused.
    let (status, resp) = s
        .post_json(
            "/workflows/word-count/execute",
            &json!({"input": {"text": "x"}, "options": {"executionId": "a/b c"}}),
        )
        .await;
    assert_failure(status, &resp, 400);
    s.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Streams (section 6)
// ---------------------------------------------------------------------------------------------

/// Checks the fields every workflow event has and returns the events' types.
fn check_common_fields(events: &[Value], execution_id: &str) -> Vec<String> {
    assert!(!events.is_empty(), "no events");
    let mut last = None;
    events
        .iter()
        .map(|ev| {
            assert_eq!(ev["executionId"], execution_id, "{ev}");
            let t = assert_iso(&ev["timestamp"]);
            if let Some(prev) = last {
                assert!(t >= prev, "timestamps go back: {ev}");
            }
            last = Some(t);
            ev["type"]
                .as_str()
                .unwrap_or_else(|| panic!("event without a type: {ev}"))
                .to_owned()
        })
        .collect()
}

async fn stream_of_order_fulfillment(backend: Backend) {
    let s = TestServer::start(backend).await;
    let id = new_id();
    let events = s
        .sse_events(
            "/workflows/order-fulfillment/stream",
            &json!({"input": worked_order("o-6", true), "options": {"executionId": id}}),
        )
        .await;
    let types = check_common_fields(&events, &id);
    let steps = [
        "price-order",
        "run-checks",
        "express-fee",
        "pick-carrier",
        "audit",
        "summarize",
    ];
    let mut expected = vec!["workflow-start".to_owned()];
    for _ in steps {
        expected.push("step-start".into());
        expected.push("step-complete".into());
    }
    expected.push("workflow-complete".into());
    expected.push("workflow-result".into());
    assert_eq!(types, expected, "{events:#?}");

    let froms: Vec<&str> = events[1..13]
        .iter()
        .map(|ev| ev["from"].as_str().unwrap_or_else(|| panic!("{ev}")))
        .collect();
    let expected_froms: Vec<&str> = steps.iter().flat_map(|st| [*st, *st]).collect();
    assert_eq!(froms, expected_froms);

    let want = json!({
        "orderId": "o-6",
        "subtotal": 25.5,
        "shippingFee": 15,
        "carrier": "swift",
        "carrierCost": 7,
        "total": 47.5,
        "inStock": true,
        "fraudScore": 0.1
    });
    let result = events.last().unwrap();
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["result"], want, "{result}");
    // The race step's output is the winner's.
    assert_eq!(events[8]["output"], json!({"carrier": "swift", "cost": 7}));

    // The stream's execution is stored like any other.
    let st = state_of(&s, "order-fulfillment", &id).await;
    assert_eq!(st["status"], "completed");
    assert_eq!(st["result"], want);
    s.stop().await;
}

async fn stream_of_suspending_expense(backend: Backend) {
    let s = TestServer::start(backend).await;
    let events = s
        .sse_events(
            "/workflows/expense-approval/stream",
            &json!({"input": expense("e-7", 2500)}),
        )
        .await;
    let id = events[0]["executionId"].as_str().expect("executionId");
    let types = check_common_fields(&events, id);
    assert_eq!(
        types,
        [
            "workflow-start",
            "step-start",
            "workflow-suspended",
            "workflow-result"
        ],
        "{events:#?}"
    );
    assert_eq!(events[1]["from"], "check-approval");
    let result = &events[3];
    assert_eq!(result["status"], "suspended", "{result}");
    assert_eq!(result["result"], Value::Null, "{result}");

    let st = state_of(&s, "expense-approval", id).await;
    assert_eq!(st["status"], "suspended");
    assert_eq!(st["suspension"]["stepId"], "check-approval");
    // The streamed execution resumes like any other.
    let done = s
        .post_data(
            &exec_path("expense-approval", id, "resume"),
            &json!({"resumeData": {"approved": true, "managerId": "m-9"}}),
        )
        .await;
    assert_eq!(assert_completed(&done)["approvedBy"], "m-9");
    s.stop().await;
}

async fn stream_with_invalid_input_is_400(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (status, body) = s
        .post_json(
            "/workflows/expense-approval/stream",
            &json!({"input": {"employeeId": "e", "amount": -5, "category": "c"}}),
        )
        .await;
    assert!(assert_failure(status, &body, 400).starts_with("Input validation failed: "));
    let (status, body) = s
        .post_json("/workflows/nope/stream", &json!({"input": {}}))
        .await;
    assert_eq!(
        assert_failure(status, &body, 404),
        "Workflow nope not found"
    );
    let (status, body) = s
        .post_raw("/workflows/word-count/stream", "application/json", "{")
        .await;
    assert_failure(status, &body, 400);
    s.stop().await;
}

// ---------------------------------------------------------------------------------------------
// countdown: suspending a running execution
// ---------------------------------------------------------------------------------------------

async fn countdown_suspends_while_running_and_resumes(backend: Backend) {
    let s = Arc::new(TestServer::start(backend).await);
    // The suspend must land while the run (5 ticks of 300 ms) is under way. On a machine that
    // stalls for over a second the run can end first: that attempt proves nothing either way
    // and is repeated; any other outcome is checked.
    let mut attempt = 0;
    let (id, suspended, exec) = loop {
        attempt += 1;
        match suspend_a_running_countdown(&s).await {
            Some(found) => break found,
            None if attempt < 3 => eprintln!("countdown ended before the suspend landed; again"),
            None => panic!("the countdown ended before the suspend landed {attempt} times"),
        }
    };
    assert_eq!(suspended["executionId"], id.as_str());
    assert_eq!(suspended["status"], "suspended", "{suspended}");
    assert_eq!(suspended["suspension"]["reason"], "pause");
    assert_iso(&suspended["suspension"]["suspendedAt"]);

    // The execute call ends with the suspended form.
    assert_eq!(exec["executionId"], id.as_str());
    assert_eq!(exec["status"], "suspended", "{exec}");
    assert_eq!(exec["endAt"], Value::Null);
    assert_eq!(exec["result"], Value::Null);
    assert_eq!(exec["suspension"]["reason"], "pause");
    assert_eq!(
        exec["suspension"]["suspendedAt"],
        suspended["suspension"]["suspendedAt"]
    );

    // The state names the next step to run; it is consistent with its index.
    let st = state_of(&s, "countdown", &id).await;
    assert_eq!(st["status"], "suspended", "{st}");
    assert_eq!(st["suspension"]["reason"], "pause");
    let index = st["suspension"]["stepIndex"]
        .as_u64()
        .unwrap_or_else(|| panic!("{st}"));
    assert!((1..=4).contains(&index), "suspended at step {index}: {st}");
    assert_eq!(st["suspension"]["stepId"], format!("tick-{}", 5 - index));
    assert_eq!(exec["suspension"]["suspendedStepIndex"], index);
    assert_eq!(
        suspended["suspension"]["stepId"],
        st["suspension"]["stepId"]
    );

    // Resume continues from that step to the end.
    let done = s
        .post_data(
            &exec_path("countdown", &id, "resume"),
            &json!({"resumeData": {}}),
        )
        .await;
    assert_eq!(assert_completed(&done), json!({"remaining": 0}));
    let st = state_of(&s, "countdown", &id).await;
    assert_eq!(st["status"], "completed");
    assert_eq!(st["result"], json!({"remaining": 0}));

    let s = Arc::into_inner(s).expect("the server is no longer shared");
    s.stop().await;
}

/// Starts a countdown (300 ms a tick) with a caller-chosen id in a task and asks it to suspend
/// once tick-5 is checkpointed (tick-4 under way). Returns the id, the suspend answer's `data`
/// and the execute answer's `data`; `None` when the run completed before the suspend landed.
async fn suspend_a_running_countdown(s: &Arc<TestServer>) -> Option<(String, Value, Value)> {
    let id = new_id();
    let started = Instant::now();
    let run = {
        let s = s.clone();
        let body = json!({"input": {"stepDelayMs": 300}, "options": {"executionId": id}});
        tokio::spawn(async move { s.post_json("/workflows/countdown/execute", &body).await })
    };
    // The gate: tick-5 is checkpointed (or the run is over).
    let state = exec_path("countdown", &id, "state");
    loop {
        let (status, body) = s.get_json(&state).await;
        if status == 200 {
            let st = &body["data"];
            assert!(
                st["status"] == "running" || st["status"] == "completed",
                "{body}"
            );
            if st["steps"]["tick-5"]["status"] == "completed" || st["status"] == "completed" {
                break;
            }
        } else {
            assert_failure(status, &body, 404);
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "tick-5 never ended"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let (status, body) = s
        .post_json(
            &exec_path("countdown", &id, "suspend"),
            &json!({"reason": "pause"}),
        )
        .await;
    let (exec_status, exec_body) = run.await.expect("execute task");
    let exec = ok_data(exec_status, exec_body);
    if status == 400 && exec["status"] == "completed" {
        assert_eq!(exec["result"], json!({"remaining": 0}));
        return None;
    }
    Some((id, ok_data(status, body), exec))
}

// ---------------------------------------------------------------------------------------------
// Concurrency
// ---------------------------------------------------------------------------------------------

async fn concurrent_resumes_resume_once(backend: Backend) {
    let s = TestServer::start(backend).await;
    let id = start_suspended_expense(&s, "e-8").await;
    let path = exec_path("expense-approval", &id, "resume");
    let requests = (0..50).map(|i| {
        let body = json!({"resumeData": {"approved": true, "managerId": format!("m-{i}")}});
        let path = path.clone();
        let s = &s;
        async move { s.post_json(&path, &body).await }
    });
    let answers = futures::future::join_all(requests).await;
    let mut winners = Vec::new();
    for (status, body) in answers {
        if status == 200 {
            winners.push(ok_data(status, body));
        } else {
            assert_failure(status, &body, 404);
        }
    }
    assert_eq!(winners.len(), 1, "exactly one resume wins: {winners:#?}");
    let won = &winners[0];
    let result = assert_completed(won);
    assert_eq!(result["status"], "approved");
    let by = result["approvedBy"].as_str().unwrap().to_owned();
    assert!(by.starts_with("m-"), "{result}");

    let st = state_of(&s, "expense-approval", &id).await;
    assert_eq!(st["status"], "completed");
    assert_eq!(st["result"], result);
    s.stop().await;
}

/// The same `executionId` and input while the first call still runs: the retry waits for the
/// same execution and answers with its result (nothing runs twice); `/stream` re-posted once it
/// is over replays its events and answers with its `workflow-result`.
async fn idempotent_start_rejoins_a_running_execution(backend: Backend) {
    let s = Arc::new(TestServer::start(backend).await);
    let id = format!("cd-{}", new_id());
    let body = json!({"input": {"stepDelayMs": 150}, "options": {"executionId": id}});
    let first = {
        let s = s.clone();
        let body = body.clone();
        tokio::spawn(async move { s.post_data("/workflows/countdown/execute", &body).await })
    };
    // The retry is sent once the first call's execution exists (and runs).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, _) = s
            .get_json(&format!("/workflows/countdown/executions/{id}/state"))
            .await;
        if status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the first execution never appeared"
        );
        tokio::task::yield_now().await;
    }
    let retry = s.post_data("/workflows/countdown/execute", &body).await;
    let first = first.await.unwrap();
    assert_eq!(retry["status"], "completed", "{retry}");
    assert_eq!(retry["result"], json!({"remaining": 0}));
    assert_eq!(retry["startAt"], first["startAt"]);
    assert_eq!(retry["executionId"], first["executionId"]);
    let st = state_of(&s, "countdown", &id).await;
    assert_eq!(st["startAt"], first["startAt"]);

    // Re-posted once it is over: its whole stored log again, then its `workflow-result`.
    let events = s.sse_events("/workflows/countdown/stream", &body).await;
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(types.first(), Some(&"workflow-start"), "{types:?}");
    assert_eq!(types.iter().filter(|t| **t == "step-complete").count(), 5);
    assert_eq!(types[types.len() - 2], "workflow-complete", "{types:?}");
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(last["type"], "workflow-result");
    assert_eq!(last["status"], "completed");
    assert_eq!(last["result"], json!({"remaining": 0}));
    if let Ok(s) = Arc::try_unwrap(s) {
        s.stop().await;
    }
}

/// Waits until `id`'s state satisfies `done`.
async fn wait_state(
    s: &TestServer,
    workflow: &str,
    id: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = s.get_json(&exec_path(workflow, id, "state")).await;
        if status == 200 && done(&body["data"]) {
            return body["data"].clone();
        }
        assert!(Instant::now() < deadline, "never happened: {body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A running `countdown` cancelled between its steps: `cancelled` at once with when and why, the
/// waiting `/execute` answers with the cancelled execution, the stream ends with
/// `workflow-cancelled` then `workflow-result`, and no step runs after the cancel.
async fn cancel_a_running_execution(backend: Backend) {
    let s = Arc::new(TestServer::start(backend).await);
    let id = format!("cd-{}", new_id());
    let body = json!({"input": {"stepDelayMs": 400}, "options": {"executionId": id}});
    let waiting = {
        let s = s.clone();
        let body = body.clone();
        tokio::spawn(async move { s.post_json("/workflows/countdown/execute", &body).await })
    };
    wait_state(&s, "countdown", &id, |st| {
        st["steps"]["tick-5"]["status"] == "completed"
    })
    .await;
    let cancelled = s
        .post_data(
            &exec_path("countdown", &id, "cancel"),
            &json!({"reason": "no longer needed"}),
        )
        .await;
    assert_eq!(cancelled["executionId"], id.as_str());
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(cancelled["cancellation"]["reason"], "no longer needed");
    assert_iso(&cancelled["cancellation"]["cancelledAt"]);

    let (status, answer) = waiting.await.expect("execute task");
    let answer = ok_data(status, answer);
    assert_eq!(answer["status"], "cancelled", "{answer}");
    assert_eq!(answer["cancellation"]["reason"], "no longer needed");

    let st = state_of(&s, "countdown", &id).await;
    assert_eq!(st["status"], "cancelled");
    assert_eq!(st["cancellation"], cancelled["cancellation"]);
    assert_iso(&st["endAt"]);
    // The step that ran when the cancel came committed nothing; nothing ran after it.
    assert_eq!(st["steps"]["tick-4"]["status"], "running", "{st}");
    assert!(st["steps"].get("tick-3").is_none(), "{st}");

    // Re-attached, its log ends with the cancel.
    let events = s.sse_events("/workflows/countdown/stream", &body).await;
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(types[types.len() - 2], "workflow-cancelled", "{types:?}");
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(last["type"], "workflow-result");
    assert_eq!(last["status"], "cancelled");
    if let Ok(s) = Arc::try_unwrap(s) {
        s.stop().await;
    }
}

/// A suspended approval cancelled without a body: `cancelled`, with no reason; resuming it then
/// is refused.
async fn cancel_a_suspended_execution(backend: Backend) {
    let s = TestServer::start(backend).await;
    let id = new_id();
    let data = s
        .post_data(
            "/workflows/expense-approval/execute",
            &json!({"input": {"employeeId": "e", "amount": 5000, "category": "travel"},
                    "options": {"executionId": id}}),
        )
        .await;
    assert_eq!(data["status"], "suspended");
    let resp = s
        .client
        .post(s.url(&exec_path("expense-approval", &id, "cancel")))
        .send()
        .await
        .expect("cancel");
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["data"]["status"], "cancelled");
    assert_eq!(body["data"]["cancellation"]["reason"], Value::Null);
    let st = state_of(&s, "expense-approval", &id).await;
    assert_eq!(st["status"], "cancelled");
    assert!(st.get("suspension").is_none(), "{st}");
    let (status, body) = s
        .post_json(
            &exec_path("expense-approval", &id, "resume"),
            &json!({"resumeData": {"approved": true, "managerId": "m"}}),
        )
        .await;
    assert_eq!(
        assert_failure(status, &body, 404),
        format!("Execution {id} is not suspended (status: cancelled)")
    );
    s.stop().await;
}

/// Finished executions cannot be cancelled (400, the status named); an unknown one is 404; a
/// cancelled one cannot be cancelled again; a bad body is a 400 envelope.
async fn cancel_refusals(backend: Backend) {
    let s = TestServer::start(backend).await;
    let id = new_id();
    let done = s
        .post_data(
            "/workflows/word-count/execute",
            &json!({"input": {"text": "a b"}, "options": {"executionId": id}}),
        )
        .await;
    assert_eq!(done["status"], "completed");
    let (status, body) = s
        .post_json(&exec_path("word-count", &id, "cancel"), &json!({}))
        .await;
    assert_eq!(
        assert_failure(status, &body, 400),
        format!("Execution {id} cannot be cancelled: it is completed")
    );
    let (status, body) = s
        .post_json(&exec_path("word-count", "nope", "cancel"), &json!({}))
        .await;
    assert_eq!(
        assert_failure(status, &body, 404),
        "Execution nope of workflow word-count not found"
    );
    let (status, body) = s
        .post_json(
            &exec_path("word-count", &id, "cancel"),
            &json!({"reason": 5}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["success"], false);

    let waiting = s
        .post_data(
            "/workflows/expense-approval/execute",
            &json!({"input": {"employeeId": "e", "amount": 5000, "category": "travel"}}),
        )
        .await;
    let wid = waiting["executionId"].as_str().expect("id").to_owned();
    let path = exec_path("expense-approval", &wid, "cancel");
    assert_eq!(s.post_data(&path, &json!({})).await["status"], "cancelled");
    let (status, body) = s.post_json(&path, &json!({})).await;
    assert_eq!(
        assert_failure(status, &body, 400),
        format!("Execution {wid} cannot be cancelled: it is cancelled")
    );
    s.stop().await;
}

/// The executions list: newest first, paged by its cursor with no duplicate and no gap, by
/// status, and its refusals.
async fn executions_are_listed_newest_first_in_pages(backend: Backend) {
    let s = TestServer::start(backend).await;
    let mut started = Vec::new();
    for i in 0..5 {
        let d = s
            .post_data(
                "/workflows/word-count/execute",
                &json!({"input": {"text": format!("w {i}")}}),
            )
            .await;
        started.push(d["executionId"].as_str().expect("id").to_owned());
    }
    started.reverse();
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(c) => format!("/workflows/word-count/executions?limit=2&cursor={c}"),
            None => "/workflows/word-count/executions?limit=2".to_owned(),
        };
        let page = s.get_data(&path).await;
        pages += 1;
        for e in page["executions"].as_array().expect("executions") {
            assert_eq!(e["workflowId"], "word-count");
            assert_eq!(e["status"], "completed");
            assert_iso(&e["startAt"]);
            assert_iso(&e["endAt"]);
            assert_iso(&e["updatedAt"]);
            seen.push(e["executionId"].as_str().expect("id").to_owned());
        }
        match page["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
        assert!(pages < 10, "the cursor never ends");
    }
    assert_eq!(seen, started, "newest first, each once");

    // By status: the suspended one, with its suspension.
    let waiting = s
        .post_data(
            "/workflows/expense-approval/execute",
            &json!({"input": {"employeeId": "e", "amount": 5000, "category": "travel"}}),
        )
        .await;
    let page = s
        .get_data("/workflows/expense-approval/executions?status=suspended")
        .await;
    let first = &page["executions"][0];
    assert_eq!(first["executionId"], waiting["executionId"]);
    assert_eq!(first["suspension"]["stepId"], "check-approval");
    assert_eq!(page["nextCursor"], Value::Null);
    let none = s
        .get_data("/workflows/expense-approval/executions?status=completed")
        .await;
    assert_eq!(none["executions"], json!([]));

    for (query, message) in [
        (
            "status=done",
            "Invalid status \"done\": expected queued, running, suspended, completed, error or cancelled",
        ),
        (
            "limit=0",
            "Invalid limit \"0\": expected a number from 1 to 100",
        ),
        (
            "limit=101",
            "Invalid limit \"101\": expected a number from 1 to 100",
        ),
        ("cursor=nope", "Invalid cursor"),
    ] {
        let (status, body) = s
            .get_json(&format!("/workflows/word-count/executions?{query}"))
            .await;
        assert_eq!(assert_failure(status, &body, 400), message, "{query}");
    }
    let (status, body) = s.get_json("/workflows/nope/executions").await;
    assert_eq!(
        assert_failure(status, &body, 404),
        "Workflow nope not found"
    );
    s.stop().await;
}

/// The routes across workflows: every workflow's executions newest first (by workflow, by
/// status, in pages), one execution by its id alone, the counts by workflow and status, and
/// what the server says of itself.
async fn executions_across_workflows(backend: Backend) {
    let s = TestServer::start(backend).await;
    let mut started = Vec::new();
    for text in ["one", "two words"] {
        let d = s
            .post_data(
                "/workflows/word-count/execute",
                &json!({"input": {"text": text}}),
            )
            .await;
        started.push(d["executionId"].as_str().expect("id").to_owned());
    }
    let waiting = start_suspended_expense(&s, "e-all").await;
    started.push(waiting.clone());
    started.reverse();

    let ids = |page: &Value| -> Vec<String> {
        page["executions"]
            .as_array()
            .expect("executions")
            .iter()
            .map(|e| e["executionId"].as_str().expect("id").to_owned())
            .collect()
    };
    let page = s.get_data("/executions").await;
    assert_eq!(ids(&page), started, "every workflow's, newest first");
    assert_eq!(page["nextCursor"], Value::Null);
    let mut paged = Vec::new();
    let mut path = "/executions?limit=2".to_owned();
    loop {
        let page = s.get_data(&path).await;
        paged.extend(ids(&page));
        match page["nextCursor"].as_str() {
            Some(c) => path = format!("/executions?limit=2&cursor={c}"),
            None => break,
        }
        assert!(paged.len() <= started.len(), "the cursor never ends");
    }
    assert_eq!(paged, started, "pages of two, each once");
    let page = s.get_data("/executions?workflowId=word-count").await;
    assert_eq!(ids(&page), started[1..].to_vec());
    let page = s.get_data("/executions?status=suspended&workflowId=").await;
    assert_eq!(ids(&page), vec![waiting.clone()]);
    let suspension = &page["executions"][0]["suspension"];
    assert_eq!(suspension["reason"], APPROVAL_REASON);
    assert_eq!(
        suspension["suspendData"],
        json!({"employeeId": "e-all", "amount": 1500})
    );
    let (status, body) = s.get_json("/executions?workflowId=nope").await;
    assert_eq!(
        assert_failure(status, &body, 404),
        "Workflow nope not found"
    );
    let (status, body) = s.get_json("/executions?status=done").await;
    assert_eq!(
        assert_failure(status, &body, 400),
        "Invalid status \"done\": expected queued, running, suspended, completed, error or cancelled"
    );

    // By id alone: the same record as the state endpoint.
    let found = s.get_data(&format!("/executions/{waiting}")).await;
    let state = state_of(&s, "expense-approval", &waiting).await;
    assert_eq!(found, state);
    assert_eq!(found["workflowId"], "expense-approval");
    let (status, body) = s.get_json("/executions/nope").await;
    assert_eq!(
        assert_failure(status, &body, 404),
        "Execution nope not found"
    );

    // Counts: every registered workflow, every status.
    let counts = s.get_data("/api/execution-counts").await;
    let workflows = counts["workflows"].as_array().expect("workflows");
    let listed: Vec<&str> = workflows
        .iter()
        .map(|w| w["workflowId"].as_str().expect("id"))
        .collect();
    let registered = s.get_data("/workflows").await;
    let registered: Vec<&str> = registered
        .as_array()
        .expect("workflows")
        .iter()
        .map(|w| w["id"].as_str().expect("id"))
        .collect();
    assert_eq!(
        listed, registered,
        "every workflow, in the order of GET /workflows"
    );
    let of = |id: &str| {
        workflows
            .iter()
            .find(|w| w["workflowId"] == id)
            .expect("counted")["counts"]
            .clone()
    };
    assert_eq!(
        of("word-count"),
        json!({"queued": 0, "running": 0, "suspended": 0, "completed": 2, "error": 0, "cancelled": 0})
    );
    assert_eq!(of("expense-approval")["suspended"], 1);
    assert_eq!(of("countdown")["completed"], 0);

    let info = s.get_data("/api/info").await;
    assert_eq!(info["name"], "agentry");
    assert_eq!(info["version"], env!("CARGO_PKG_VERSION"));
    let kind = match backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
    };
    assert_eq!(info["database"], kind);
    assert_eq!(
        info["authentication"],
        json!({"enabled": false, "strict": false})
    );
    assert_eq!(s.get_data("/api/me").await, json!({"user": null}));
    s.stop().await;
}

/// `flaky-step` with failTimes 2: two failed attempts, each in the state and a `step-retry`
/// event, then `{attempts: 3}`.
async fn flaky_step_is_retried_until_it_succeeds(backend: Backend) {
    let s = TestServer::start(backend).await;
    let id = new_id();
    let body = json!({"input": {"failTimes": 2}, "options": {"executionId": id}});
    let events = s.sse_events("/workflows/flaky-step/stream", &body).await;
    let retries: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "step-retry")
        .collect();
    assert_eq!(retries.len(), 2, "{events:?}");
    for (i, r) in retries.iter().enumerate() {
        let n = i as u64 + 1;
        assert_eq!(r["from"], "attempt");
        assert_eq!(r["attempt"], n);
        assert_eq!(r["nextAttempt"], n + 1);
        assert_eq!(r["error"], format!("attempt {n} failed"));
        assert_eq!(r["delayMs"], 50 * (1 << i));
    }
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(last["type"], "workflow-result");
    assert_eq!(last["result"], json!({"attempts": 3}));
    let st = state_of(&s, "flaky-step", &id).await;
    let step = &st["steps"]["attempt"];
    assert_eq!(step["status"], "completed");
    assert_eq!(step["attempt"], 3);
    let failures: Vec<(u64, &str)> = step["failures"]
        .as_array()
        .expect("failures")
        .iter()
        .map(|f| {
            (
                f["attempt"].as_u64().unwrap_or(0),
                f["error"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(failures, [(1, "attempt 1 failed"), (2, "attempt 2 failed")]);
    s.stop().await;
}

/// failTimes 4: the fourth attempt fails too, and the execution ends in `error` naming the step.
async fn flaky_step_fails_after_its_last_attempt(backend: Backend) {
    let s = TestServer::start(backend).await;
    let id = new_id();
    let (status, body) = s
        .post_json(
            "/workflows/flaky-step/execute",
            &json!({"input": {"failTimes": 4}, "options": {"executionId": id}}),
        )
        .await;
    assert_eq!(
        assert_failure(status, &body, 500),
        "Failed to execute workflow"
    );
    let st = state_of(&s, "flaky-step", &id).await;
    assert_eq!(st["status"], "error");
    assert_eq!(
        st["error"],
        json!({"message": "Step attempt failed: attempt 4 failed", "stepId": "attempt"})
    );
    assert_eq!(st["steps"]["attempt"]["attempt"], 4);
    assert_eq!(st["steps"]["attempt"]["status"], "failed");
    assert_eq!(
        st["steps"]["attempt"]["failures"].as_array().map(Vec::len),
        Some(3)
    );
    // Its log ends with a `workflow-error` carrying the step.
    let events = s
        .sse_events(
            "/workflows/flaky-step/stream",
            &json!({"input": {"failTimes": 4}, "options": {"executionId": id}}),
        )
        .await;
    let error = events
        .iter()
        .find(|e| e["type"] == "workflow-error")
        .expect("a workflow-error");
    assert_eq!(error["stepId"], "attempt");
    assert_eq!(error["error"], "Step attempt failed: attempt 4 failed");
    s.stop().await;
}

/// sleepMs 5000 with a 1 s time-out per attempt: every attempt times out, and the error says so.
async fn flaky_step_attempts_time_out(backend: Backend) {
    let s = TestServer::start(backend).await;
    let id = new_id();
    let (status, body) = s
        .post_json(
            "/workflows/flaky-step/execute",
            &json!({"input": {"failTimes": 0, "sleepMs": 5000}, "options": {"executionId": id}}),
        )
        .await;
    assert_eq!(
        assert_failure(status, &body, 500),
        "Failed to execute workflow"
    );
    let st = state_of(&s, "flaky-step", &id).await;
    let message = st["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("timed out after 1000 ms"), "{st}");
    let failures = st["steps"]["attempt"]["failures"]
        .as_array()
        .expect("failures");
    assert_eq!(failures.len(), 3);
    assert!(
        failures
            .iter()
            .all(|f| f["error"].as_str().unwrap_or("").contains("timed out"))
    );
    s.stop().await;
}

/// `approval-deadline` resumed before its deadline: approved or rejected; the deadline shows in
/// the state.
async fn approval_deadline_approved_in_time(backend: Backend) {
    let s = TestServer::start(backend).await;
    for (approved, status) in [(true, "approved"), (false, "rejected")] {
        let id = new_id();
        let d = s
            .post_data(
                "/workflows/approval-deadline/execute",
                &json!({"input": {"requestId": "r-1", "timeoutMs": 60000}, "options": {"executionId": id}}),
            )
            .await;
        assert_eq!(d["status"], "suspended");
        assert_eq!(
            d["suspension"]["reason"],
            "Approval required within 60000 ms"
        );
        let st = state_of(&s, "approval-deadline", &id).await;
        let deadline = st["suspension"]["deadline"].as_str().expect("a deadline");
        let deadline = chrono::DateTime::parse_from_rfc3339(deadline).expect("ISO 8601");
        let suspended = st["suspension"]["suspendedAt"]
            .as_str()
            .expect("suspendedAt");
        let suspended = chrono::DateTime::parse_from_rfc3339(suspended).expect("ISO 8601");
        let after = (deadline - suspended).num_milliseconds();
        assert!((59_000..=60_100).contains(&after), "{after} ms");
        let (code, body) = s
            .post_json(
                &exec_path("approval-deadline", &id, "resume"),
                &json!({"resumeData": {"approved": approved}}),
            )
            .await;
        let done = ok_data(code, body);
        assert_eq!(
            done["result"],
            json!({"requestId": "r-1", "status": status})
        );
    }
    s.stop().await;
}

/// Not resumed by its deadline, it resumes by itself and expires.
async fn approval_deadline_expires_by_itself(backend: Backend) {
    let s = TestServer::start(backend).await;
    let id = new_id();
    let d = s
        .post_data(
            "/workflows/approval-deadline/execute",
            &json!({"input": {"requestId": "r-2", "timeoutMs": 300}, "options": {"executionId": id}}),
        )
        .await;
    assert_eq!(d["status"], "suspended");
    let st = wait_state(&s, "approval-deadline", &id, |st| {
        st["status"] == "completed"
    })
    .await;
    assert_eq!(
        st["result"],
        json!({"requestId": "r-2", "status": "expired"})
    );
    s.stop().await;
}
