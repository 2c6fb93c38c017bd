//! The workflow operations through the real binary, on SQLite and PostgreSQL: events delivered
//! before and after their wait (to one execution and by key), a duplicated `eventId`, a bad
//! payload, a deadline that passes first, an event through another replica; the retry of a
//! failed execution and a fork from a step; step output live and on re-attach; a foreach killed
//! with -9 that runs only its unfinished items again; strict mode on every new route.
//!
//! The hidden test registry (`AGENTRY_TEST_AGENTS`, see `src/test_agents.rs`) adds
//! `tester-mailbox` (a nap, then a wait for `ping`) and `tester-foreach` (slow items that log
//! their starts and ends).

mod common;

use std::time::{Duration, Instant};

use common::replica::{
    PATIENCE, Replica, SECRET, client, get, log_lines, post, read_sse, scratch_dir, sqlite_url,
    state_of, token, wait_for_state,
};
use serde_json::{Value, json};

/// The execution's state (`data`), or `Null` while it does not exist.
async fn state(r: &Replica, workflow: &str, id: &str) -> Value {
    state_of(r, workflow, id).await.unwrap_or(Value::Null)
}

fn status_is(s: &Value, status: &str) -> bool {
    s["status"] == status
}

on_both_databases!(
    events_reach_executions_before_and_after_their_wait,
    events_reach_executions_before_and_after_their_wait_on_sqlite,
    events_reach_executions_before_and_after_their_wait_on_postgres
);

/// `payment-webhook` by key, after and before its wait; a delivery to one execution; the same
/// `eventId` twice; a bad payload; an event nobody declares; an event after the end; an event
/// waiting in the mailbox of an execution that does not wait yet; a deadline that passes first.
async fn events_reach_executions_before_and_after_their_wait(url: &str) {
    let dir = scratch_dir();
    let r = Replica::with_test_registry(url, "ev", &dir, &[]);

    // By key, after the wait.
    let (status, body) = post(
        &r,
        "/workflows/payment-webhook/execute",
        json!({"input": {"orderId": "o-1"}, "options": {"executionId": "pw-1"}}),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let suspension = &body["data"]["suspension"];
    assert_eq!(suspension["reason"], "Waiting for event payment", "{body}");
    assert_eq!(
        suspension["event"],
        json!({"name": "payment", "key": "o-1"})
    );
    assert!(suspension["deadline"].is_string(), "{body}");
    let s = state(&r, "payment-webhook", "pw-1").await;
    assert_eq!(s["suspension"]["event"]["key"], "o-1", "{s}");
    let paid =
        json!({"key": "o-1", "data": {"amount": 12.5, "status": "paid"}, "eventId": "pay-1"});
    let (status, body) = post(&r, "/events/payment", paid.clone(), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["data"]["woken"],
        json!([{"workflowId": "payment-webhook", "executionId": "pw-1"}])
    );
    assert_eq!(body["data"]["duplicate"], false);
    let done = wait_for_state(&r, "payment-webhook", "pw-1", "paid", |s| {
        status_is(s, "completed")
    })
    .await;
    assert_eq!(
        done["result"],
        json!({"orderId": "o-1", "status": "paid", "amount": 12.5})
    );
    assert_eq!(done["mailbox"][0]["eventId"], "pay-1", "{done}");
    assert_eq!(done["mailbox"][0]["status"], "taken");
    assert_eq!(done["mailbox"][0]["takenBy"], "await-payment");
    // The same id again: not delivered again, the first outcome answered.
    let (status, body) = post(&r, "/events/payment", paid, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["duplicate"], true);
    assert_eq!(body["data"]["woken"][0]["executionId"], "pw-1");

    // By key, before the wait: kept, and taken by the execution that waits for it later.
    let early = json!({"key": "o-early", "data": {"amount": 5, "status": "paid"}});
    let (status, body) = post(&r, "/events/payment", early, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["woken"], json!([]));
    assert!(body["data"]["keptUntil"].is_string(), "{body}");
    let (status, body) = post(
        &r,
        "/workflows/payment-webhook/execute",
        json!({"input": {"orderId": "o-early"}}),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["data"]["result"],
        json!({"orderId": "o-early", "status": "paid", "amount": 5}),
        "{body}"
    );

    // To one execution, after its wait; twice with one id; once more after the end.
    post(
        &r,
        "/workflows/payment-webhook/execute",
        json!({"input": {"orderId": "o-2"}, "options": {"executionId": "pw-2"}}),
        None,
    )
    .await;
    let path = "/workflows/payment-webhook/executions/pw-2/events/payment";
    let bad = json!({"data": {"amount": -1, "status": "paid"}});
    let (status, body) = post(&r, path, bad, None).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "invalid_event");
    assert!(body["error"].as_str().unwrap().contains("amount"), "{body}");
    let (status, body) = post(
        &r,
        "/workflows/payment-webhook/executions/pw-2/events/refund",
        json!({"data": {}}),
        None,
    )
    .await;
    assert_eq!((status, &body["code"]), (404, &json!("event_not_found")));
    let (status, body) = post(
        &r,
        "/workflows/payment-webhook/executions/nobody/events/payment",
        json!({"data": {"amount": 1, "status": "paid"}}),
        None,
    )
    .await;
    assert_eq!(
        (status, &body["code"]),
        (404, &json!("execution_not_found"))
    );
    let failed = json!({"data": {"amount": 1, "status": "failed"}, "eventId": "d-1"});
    let (status, body) = post(&r, path, failed.clone(), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["delivery"], "resumed");
    assert_eq!(body["data"]["duplicate"], false);
    let done = wait_for_state(&r, "payment-webhook", "pw-2", "failed payment", |s| {
        status_is(s, "completed")
    })
    .await;
    assert_eq!(done["result"]["status"], "failed");
    let (status, body) = post(&r, path, failed, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["duplicate"], true);
    assert_eq!(body["data"]["delivery"], "resumed");
    let (status, body) = post(
        &r,
        path,
        json!({"data": {"amount": 2, "status": "paid"}}),
        None,
    )
    .await;
    assert_eq!((status, &body["code"]), (409, &json!("execution_ended")));

    // Before its wait: the event waits in the mailbox, and the wait takes it.
    let napping = tokio::spawn({
        let url = r.url("/workflows/tester-mailbox/execute");
        async move {
            let resp = client()
                .post(url)
                .json(&json!({"input": {"ms": 1500}, "options": {"executionId": "tm-1"}}))
                .send()
                .await
                .expect("execute");
            resp.json::<Value>().await.expect("json")
        }
    });
    wait_for_state(&r, "tester-mailbox", "tm-1", "the nap", |s| {
        status_is(s, "running")
    })
    .await;
    let (status, body) = post(
        &r,
        "/workflows/tester-mailbox/executions/tm-1/events/ping",
        json!({"data": {"n": 1}}),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["delivery"], "queued");
    let answer = napping.await.expect("answer");
    assert_eq!(
        answer["data"]["result"],
        json!({"got": {"n": 1}, "timedOut": false}),
        "{answer}"
    );

    // A deadline that passes first.
    let (status, body) = post(
        &r,
        "/workflows/tester-mailbox/execute",
        json!({"input": {"timeoutMs": 300}, "options": {"executionId": "tm-2"}}),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["status"], "suspended");
    let done = wait_for_state(&r, "tester-mailbox", "tm-2", "the deadline", |s| {
        status_is(s, "completed")
    })
    .await;
    assert_eq!(done["result"], json!({"got": null, "timedOut": true}));
    drop(r);
    let _ = std::fs::remove_dir_all(dir);
}

/// An event sent to one replica wakes an execution another replica suspended (and the first
/// runs it on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_through_another_replica_wakes_the_execution() {
    let db = agentry_testdb::PgDatabase::create("agentry_ops")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = scratch_dir();
    let a = Replica::with_test_registry(&db.url, "ev-a", &dir, &[]);
    let b = Replica::with_test_registry(&db.url, "ev-b", &dir, &[]);
    post(
        &a,
        "/workflows/payment-webhook/execute",
        json!({"input": {"orderId": "o-x"}, "options": {"executionId": "px-1"}}),
        None,
    )
    .await;
    post(
        &a,
        "/workflows/payment-webhook/execute",
        json!({"input": {"orderId": "o-y"}, "options": {"executionId": "py-1"}}),
        None,
    )
    .await;
    let (status, body) = post(
        &b,
        "/workflows/payment-webhook/executions/px-1/events/payment",
        json!({"data": {"amount": 3, "status": "paid"}}),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = post(
        &b,
        "/events/payment",
        json!({"key": "o-y", "data": {"amount": 4, "status": "paid"}}),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["woken"][0]["executionId"], "py-1");
    for (id, amount) in [("px-1", 3), ("py-1", 4)] {
        let done = wait_for_state(&a, "payment-webhook", id, "woken elsewhere", |s| {
            status_is(s, "completed")
        })
        .await;
        assert_eq!(done["result"]["amount"], amount);
    }
    drop((a, b));
    db.drop_now().await;
    let _ = std::fs::remove_dir_all(dir);
}

on_both_databases!(
    a_failed_execution_is_retried_and_another_forked,
    a_failed_execution_is_retried_and_another_forked_on_sqlite,
    a_failed_execution_is_retried_and_another_forked_on_postgres
);

/// `flaky-step {failTimes: 4}` fails after its 4 attempts; retried, it completes with its 5th
/// (its log goes on with `workflow-retried`). `order-fulfillment` forked from `express-fee` with
/// a new input copies the steps before it and charges the express fee.
async fn a_failed_execution_is_retried_and_another_forked(url: &str) {
    let dir = scratch_dir();
    let r = Replica::with_test_registry(url, "rf", &dir, &[]);
    let (status, body) = post(
        &r,
        "/workflows/flaky-step/execute",
        json!({"input": {"failTimes": 4}, "options": {"executionId": "fl-1"}}),
        None,
    )
    .await;
    assert_eq!((status, &body["code"]), (500, &json!("execution_failed")));
    let (status, body) = post(
        &r,
        "/workflows/flaky-step/executions/fl-1/retry",
        json!({}),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["status"], "completed");
    assert_eq!(body["data"]["result"], json!({"attempts": 5}));
    let s = state(&r, "flaky-step", "fl-1").await;
    let failures = s["steps"]["attempt"]["failures"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(failures.len(), 4, "{s}");
    assert_eq!(failures[3]["executionRetried"], true, "{s}");
    let (status, body) = post(
        &r,
        "/workflows/flaky-step/executions/fl-1/retry",
        json!({}),
        None,
    )
    .await;
    assert_eq!((status, &body["code"]), (400, &json!("not_retryable")));
    // The log goes on: a re-attach replays the failure, the retry and the completion.
    let resp = client()
        .get(r.url("/workflows/flaky-step/executions/fl-1/stream"))
        .send()
        .await
        .expect("attach");
    let events = read_sse(resp, |evs| {
        evs.iter()
            .any(|(_, e)| e["type"] == "workflow-complete" || e["type"] == "workflow-result")
    })
    .await;
    let types: Vec<&str> = events
        .iter()
        .filter_map(|(_, e)| e["type"].as_str())
        .collect();
    let at = |t: &str| types.iter().position(|x| *x == t);
    assert!(
        at("workflow-error") < at("workflow-retried")
            && at("workflow-retried") < at("workflow-complete"),
        "{types:?}"
    );

    // Fork.
    let input =
        json!({"orderId": "ord-f", "items": [{"sku": "a", "quantity": 2, "unitPrice": 10}]});
    let (status, body) = post(
        &r,
        "/workflows/order-fulfillment/execute",
        json!({"input": input, "options": {"executionId": "ord-f"}}),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["result"]["total"], 27, "{body}");
    let source = state(&r, "order-fulfillment", "ord-f").await;
    let mut express = input.clone();
    express["express"] = json!(true);
    let (status, body) = post(
        &r,
        "/workflows/order-fulfillment/executions/ord-f/fork",
        json!({"fromStep": "express-fee", "input": express, "executionId": "ord-g"}),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["executionId"], "ord-g");
    assert_eq!(body["data"]["result"]["shippingFee"], 15, "{body}");
    assert_eq!(body["data"]["result"]["total"], 42, "{body}");
    let forked = state(&r, "order-fulfillment", "ord-g").await;
    assert_eq!(
        forked["forkedFrom"],
        json!({"executionId": "ord-f", "stepId": "express-fee"})
    );
    // Copied, not run again: the very records of the source.
    for step in ["price-order", "run-checks", "check-stock", "check-fraud"] {
        assert_eq!(forked["steps"][step], source["steps"][step], "{step}");
    }
    for (body, code, status) in [
        (json!({"fromStep": "nope"}), "unknown_step", 400),
        (
            json!({"fromStep": "run-checks", "input": {"orderId": 1}}),
            "invalid_input",
            400,
        ),
        (
            json!({"fromStep": "run-checks", "executionId": "ord-g"}),
            "execution_exists",
            409,
        ),
    ] {
        let (got, answer) = post(
            &r,
            "/workflows/order-fulfillment/executions/ord-f/fork",
            body,
            None,
        )
        .await;
        assert_eq!(
            (got, answer["code"].as_str()),
            (status, Some(code)),
            "{answer}"
        );
    }
    drop(r);
    let _ = std::fs::remove_dir_all(dir);
}

on_both_databases!(
    step_output_is_streamed_live_and_on_reattach,
    step_output_is_streamed_live_and_on_reattach_on_sqlite,
    step_output_is_streamed_live_and_on_reattach_on_postgres
);

/// `batch-enrich` streams each item's progress (`step-output`); a client that re-attaches
/// after the end replays the same events from the log.
async fn step_output_is_streamed_live_and_on_reattach(url: &str) {
    let dir = scratch_dir();
    let r = Replica::with_test_registry(url, "so", &dir, &[]);
    let resp = client()
        .post(r.url("/workflows/batch-enrich/stream"))
        .json(
            &json!({"input": {"items": ["a", "bb", "ccc", "dddd"], "concurrency": 2},
            "options": {"executionId": "be-1"}}),
        )
        .send()
        .await
        .expect("stream");
    let live = read_sse(resp, |evs| {
        evs.iter().any(|(_, e)| e["type"] == "workflow-result")
    })
    .await;
    let outputs = |events: &[(Option<i64>, Value)]| -> Vec<Value> {
        events
            .iter()
            .filter(|(_, e)| e["type"] == "step-output")
            .map(|(_, e)| {
                assert_eq!(e["from"], "enrich-item", "{e}");
                e["data"].clone()
            })
            .collect()
    };
    let mut done: Vec<u64> = outputs(&live)
        .iter()
        .map(|d| d["done"].as_u64().unwrap())
        .collect();
    done.sort_unstable();
    assert_eq!(done, [1, 2, 3, 4], "{live:?}");
    let result = live
        .iter()
        .find(|(_, e)| e["type"] == "workflow-result")
        .map(|(_, e)| e.clone())
        .unwrap();
    assert_eq!(
        result["result"],
        json!({"count": 4, "totalLength": 10}),
        "{result}"
    );
    let s = state(&r, "batch-enrich", "be-1").await;
    assert_eq!(
        s["steps"]["enrich/3"]["output"],
        json!({"item": "dddd", "length": 4})
    );
    assert_eq!(s["steps"]["enrich/3"]["parentStepId"], "enrich");

    let resp = client()
        .get(r.url("/workflows/batch-enrich/executions/be-1/stream"))
        .send()
        .await
        .expect("attach");
    let replayed = read_sse(resp, |evs| {
        evs.iter().any(|(_, e)| e["type"] == "workflow-result")
    })
    .await;
    assert_eq!(outputs(&replayed), outputs(&live));
    assert!(
        replayed
            .iter()
            .filter(|(_, e)| e["type"] == "step-output")
            .all(|(id, _)| id.is_some())
    );
    drop(r);
    let _ = std::fs::remove_dir_all(dir);
}

on_both_databases!(
    an_interrupted_foreach_runs_only_its_unfinished_items,
    an_interrupted_foreach_runs_only_its_unfinished_items_on_sqlite,
    an_interrupted_foreach_runs_only_its_unfinished_items_on_postgres
);

/// `tester-foreach` killed with -9 after four of its six items ended: the process that takes
/// over runs items 4 and 5 again and never 0 to 3.
async fn an_interrupted_foreach_runs_only_its_unfinished_items(url: &str) {
    let dir = scratch_dir();
    let first = Replica::with_test_registry(url, "fe", &dir, &[]);
    let input = json!({"items": [200, 200, 200, 200, 4000, 4000]});
    let url_execute = first.url("/workflows/tester-foreach/execute");
    let body = json!({"input": input, "options": {"executionId": "fe-1"}});
    let cut = tokio::spawn(async move { client().post(url_execute).json(&body).send().await });
    let started = Instant::now();
    while !log_lines(&dir).iter().any(|l| l.starts_with("start 5 ")) {
        assert!(started.elapsed() < PATIENCE, "{:?}", log_lines(&dir));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Items 0 to 3 are recorded (each as it ended): wait for the fourth's record.
    wait_for_state(
        &first,
        "tester-foreach",
        "fe-1",
        "four items recorded",
        |s| (0..4).all(|i| s["steps"][format!("sleep-all/{i}")]["status"] == "completed"),
    )
    .await;
    first.signal("-KILL");
    let _ = cut.await;
    drop(first);
    let second = Replica::with_test_registry(url, "fe", &dir, &[]);
    let done = wait_for_state(&second, "tester-foreach", "fe-1", "the rest", |s| {
        status_is(s, "completed")
    })
    .await;
    assert_eq!(done["result"], json!([0, 1, 2, 3, 4, 5]));
    let lines = log_lines(&dir);
    for i in 0..4 {
        let starts = lines
            .iter()
            .filter(|l| l.starts_with(&format!("start {i} ")))
            .count();
        assert_eq!(starts, 1, "item {i} ran again: {lines:?}");
    }
    for i in 4..6 {
        assert!(
            lines.contains(&format!("start {i} 2")),
            "item {i} did not run again: {lines:?}"
        );
        assert!(lines.contains(&format!("end {i}")), "{lines:?}");
    }
    drop(second);
    let _ = std::fs::remove_dir_all(dir);
}

/// Strict mode: each new route needs a token; an event to another user's execution, its retry
/// and its fork are refused; an event sent by key reaches only the sender's own executions (an
/// admin's reaches all).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_mode_guards_the_operations() {
    let (url, path) = sqlite_url();
    let dir = scratch_dir();
    let r = Replica::with_test_registry(
        &url,
        "st",
        &dir,
        &[("AGENTRY_JWT_SECRET", SECRET), ("AGENTRY_AUTH_STRICT", "1")],
    );
    let (alice, bob, root) = (
        token("alice", &[]),
        token("bob", &[]),
        token("root", &["admin"]),
    );
    let event = "/workflows/payment-webhook/executions/a-1/events/payment";
    let paid = json!({"data": {"amount": 1, "status": "paid"}});
    for path in [
        event,
        "/events/payment",
        "/workflows/flaky-step/executions/a-2/retry",
        "/workflows/flaky-step/executions/a-2/fork",
    ] {
        let (status, body) = post(&r, path, json!({}), None).await;
        assert_eq!(
            (status, &body["code"]),
            (401, &json!("authentication_required")),
            "{path}"
        );
    }
    post(
        &r,
        "/workflows/payment-webhook/execute",
        json!({"input": {"orderId": "o-s"}, "options": {"executionId": "a-1"}}),
        Some(&alice),
    )
    .await;
    post(
        &r,
        "/workflows/flaky-step/execute",
        json!({"input": {"failTimes": 4}, "options": {"executionId": "a-2"}}),
        Some(&alice),
    )
    .await;
    let (status, _) = post(&r, event, paid.clone(), Some(&bob)).await;
    assert_eq!(status, 403);
    let (status, _) = post(
        &r,
        "/workflows/flaky-step/executions/a-2/retry",
        json!({}),
        Some(&bob),
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = post(
        &r,
        "/workflows/flaky-step/executions/a-2/fork",
        json!({"fromStep": "attempt"}),
        Some(&bob),
    )
    .await;
    assert_eq!(status, 403);
    // Bob's event by key does not reach Alice's execution.
    let by_key = json!({"key": "o-s", "data": {"amount": 2, "status": "paid"}});
    let (status, body) = post(&r, "/events/payment", by_key.clone(), Some(&bob)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["woken"], json!([]));
    let (_, s) = get(
        &r,
        "/workflows/payment-webhook/executions/a-1/state",
        Some(&alice),
    )
    .await;
    assert_eq!(s["data"]["status"], "suspended", "{s}");
    // The admin's does.
    let (status, body) = post(&r, "/events/payment", by_key, Some(&root)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["woken"][0]["executionId"], "a-1");
    // Alice retries her own.
    let (status, body) = post(
        &r,
        "/workflows/flaky-step/executions/a-2/retry",
        json!({}),
        Some(&alice),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    drop(r);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(dir);
}

/// Starts `tester-versioned` as `id` on `r`: the answer's `data`.
async fn start_versioned(r: &Replica, id: &str) -> Value {
    let body = json!({"input": {}, "options": {"executionId": id}});
    let (status, answer) = post(r, "/workflows/tester-versioned/execute", body, None).await;
    assert_eq!(status, 200, "{answer}");
    answer["data"].clone()
}

/// Resumes `tester-versioned`'s `id` on `r`: the status and the answer.
async fn resume_versioned(r: &Replica, id: &str) -> (u16, Value) {
    let path = format!("/workflows/tester-versioned/executions/{id}/resume");
    post(r, &path, json!({"resumeData": {}}), None).await
}

on_both_databases!(
    a_version_is_continued_only_where_it_is_registered,
    a_version_is_continued_only_where_it_is_registered_on_sqlite,
    a_version_is_continued_only_where_it_is_registered_on_postgres
);

/// An execution suspended on version `a` is refused (`version_unavailable`) by a server that
/// has only `b`, which starts new executions on `b`; a server with both completes it on `a` and
/// starts new ones on `b` (registered last).
async fn a_version_is_continued_only_where_it_is_registered(url: &str) {
    let dir = scratch_dir();
    let with = |versions: &str| {
        Replica::with_test_registry(url, "ver", &dir, &[("AGENTRY_TEST_VERSIONS", versions)])
    };
    let old = with("a");
    assert_eq!(start_versioned(&old, "tv-1").await["status"], "suspended");
    drop(old);

    let new = with("b");
    let (status, body) = resume_versioned(&new, "tv-1").await;
    assert_eq!(
        (status, &body["code"]),
        (409, &json!("version_unavailable")),
        "{body}"
    );
    assert!(
        body["error"].as_str().unwrap().contains("version a"),
        "{body}"
    );
    assert_eq!(
        state(&new, "tester-versioned", "tv-1").await["version"],
        "a"
    );
    // No live server has `a`: the state says what the execution waits for.
    wait_for_state(&new, "tester-versioned", "tv-1", "waitingForVersion", |s| {
        s["waitingForVersion"] == "a"
    })
    .await;
    start_versioned(&new, "tv-2").await;
    assert_eq!(
        state(&new, "tester-versioned", "tv-2").await["version"],
        "b"
    );
    let (_, detail) = get(&new, "/workflows/tester-versioned", None).await;
    assert_eq!(detail["data"]["version"], "b");
    assert_eq!(
        detail["data"]["versions"],
        json!([
            {"version": "b", "current": true, "registered": true, "inFlight": 1},
            {"version": "a", "current": false, "registered": false, "inFlight": 1}
        ])
    );
    drop(new);

    let both = with("a,b");
    let (status, body) = resume_versioned(&both, "tv-1").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["result"], json!({"v": "a"}));
    assert!(state(&both, "tester-versioned", "tv-1").await["waitingForVersion"].is_null());
    start_versioned(&both, "tv-3").await;
    let (status, body) = resume_versioned(&both, "tv-3").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["result"], json!({"v": "b"}));
    drop(both);
    let _ = std::fs::remove_dir_all(dir);
}

on_both_databases!(
    executions_no_live_server_can_take_wait_for_their_version,
    executions_no_live_server_can_take_wait_for_their_version_on_sqlite,
    executions_no_live_server_can_take_wait_for_their_version_on_postgres
);

/// The only server with version `a` dies (kill -9) while one execution of `a` runs and another
/// waits with a timer that falls due meanwhile; a server with `b` alone cannot take either: both
/// show `waitingForVersion` once the dead server's lease is over (not three lease ttls later),
/// and a server with `a` takes both (the timer fires, the running one is taken over).
async fn executions_no_live_server_can_take_wait_for_their_version(url: &str) {
    const TTL_SECS: u64 = 3;
    let dir = scratch_dir();
    let ttl = format!("{TTL_SECS}s");
    let with = |node: &str, versions: &str| {
        Replica::with_test_registry(
            url,
            node,
            &dir,
            &[
                ("AGENTRY_TEST_VERSIONS", versions),
                ("AGENTRY_LEASE_TTL", ttl.as_str()),
            ],
        )
    };
    let mut old = with("v-old", "a");
    let execute = |id: &str, input: Value| {
        let body = json!({"input": input, "options": {"executionId": id}});
        let url = old.url("/workflows/tester-versioned/execute");
        // Its answer may never come (the server is killed).
        tokio::spawn(async move { client().post(url).json(&body).send().await.ok() })
    };
    let running = execute("tv-run", json!({"napMs": 60_000}));
    let timer = execute("tv-timer", json!({"timeoutMs": 1_000}));
    wait_for_state(&old, "tester-versioned", "tv-run", "running", |s| {
        status_is(s, "running")
    })
    .await;
    wait_for_state(&old, "tester-versioned", "tv-timer", "suspended", |s| {
        status_is(s, "suspended") && s["suspension"]["deadline"].is_string()
    })
    .await;
    old.signal("-KILL");
    let _ = old.child.wait();
    let killed = Instant::now();
    drop((running, timer));

    let new = with("v-new", "b");
    for id in ["tv-run", "tv-timer"] {
        let s = wait_for_state(&new, "tester-versioned", id, "waitingForVersion", |s| {
            s["waitingForVersion"] == "a"
        })
        .await;
        let expected = if id == "tv-run" {
            "running"
        } else {
            "suspended"
        };
        assert_eq!(s["status"], expected, "{s}");
    }
    let waited = killed.elapsed();
    assert!(
        waited < Duration::from_secs(2 * TTL_SECS),
        "waitingForVersion shown {waited:?} after the kill: more than two lease ttls"
    );
    drop(new);

    let both = with("v-both", "a,b");
    let done = wait_for_state(
        &both,
        "tester-versioned",
        "tv-timer",
        "the timer fires",
        |s| status_is(s, "completed"),
    )
    .await;
    assert_eq!(done["result"], json!({"v": "a"}), "{done}");
    let taken = wait_for_state(&both, "tester-versioned", "tv-run", "taken over", |s| {
        s["lease"]["node"] == "v-both"
    })
    .await;
    assert!(taken["waitingForVersion"].is_null(), "{taken}");
    drop(both);
    let _ = std::fs::remove_dir_all(dir);
}

on_both_databases!(
    patched_takes_the_recorded_branch_after_a_restart,
    patched_takes_the_recorded_branch_after_a_restart_on_sqlite,
    patched_takes_the_recorded_branch_after_a_restart_on_postgres
);

/// `ctx.patched` through the binary: an execution started before the patch was deployed takes
/// the old branch once resumed under the patched code; one started under it takes the new
/// branch, also after a kill -9 and a restart before its resume.
async fn patched_takes_the_recorded_branch_after_a_restart(url: &str) {
    let dir = scratch_dir();
    let server = |patch: bool| {
        let mut env = vec![("AGENTRY_TEST_VERSIONS", "b")];
        if patch {
            env.push(("AGENTRY_TEST_PATCH", "1"));
        }
        Replica::with_test_registry(url, "patch", &dir, &env)
    };
    let before = server(false);
    start_versioned(&before, "pt-old").await;
    drop(before);

    let patched = server(true);
    start_versioned(&patched, "pt-new").await;
    patched.signal("-KILL");
    drop(patched);
    let again = server(true);
    let (_, old) = resume_versioned(&again, "pt-old").await;
    assert_eq!(
        old["data"]["result"],
        json!({"v": "b", "patched": false}),
        "{old}"
    );
    let (_, new) = resume_versioned(&again, "pt-new").await;
    assert_eq!(
        new["data"]["result"],
        json!({"v": "b", "patched": true}),
        "{new}"
    );
    drop(again);
    let _ = std::fs::remove_dir_all(dir);
}

/// An event's id is its sender's (strict mode and provider mode alike): bob's `eventId` neither
/// blocks alice's event with the same id nor names bob's execution to her.
async fn one_user_s_event_id_is_not_another_s(url: &str) {
    let dir = scratch_dir();
    let r = Replica::with_test_registry(
        url,
        "scope",
        &dir,
        &[("AGENTRY_JWT_SECRET", SECRET), ("AGENTRY_AUTH_STRICT", "1")],
    );
    let (alice, bob) = (token("alice", &[]), token("bob", &[]));
    for (who, order) in [(&alice, "o-A"), (&bob, "o-B")] {
        let (status, body) = post(
            &r,
            "/workflows/payment-webhook/execute",
            json!({"input": {"orderId": order}, "options": {"executionId": format!("pw-{order}")}}),
            Some(who),
        )
        .await;
        assert_eq!(body["data"]["status"], "suspended", "{status} {body}");
    }
    let paid = |key: &str| json!({"key": key, "eventId": "evt_1001", "data": {"amount": 3, "status": "paid"}});
    let (status, body) = post(&r, "/events/payment", paid("o-B"), Some(&bob)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["duplicate"], false, "{body}");
    assert_eq!(body["data"]["woken"][0]["executionId"], "pw-o-B", "{body}");

    let (status, body) = post(&r, "/events/payment", paid("o-A"), Some(&alice)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["duplicate"], false, "{body}");
    assert_eq!(
        body["data"]["woken"],
        json!([{"workflowId": "payment-webhook", "executionId": "pw-o-A"}]),
        "alice's event is hers, and names no execution of bob's: {body}"
    );
    let deadline = Instant::now() + PATIENCE;
    loop {
        let path = "/workflows/payment-webhook/executions/pw-o-A/state";
        let (_, s) = get(&r, path, Some(&alice)).await;
        if status_is(&s["data"], "completed") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "alice's payment never landed: {s}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Her own id again is her duplicate.
    let (status, body) = post(&r, "/events/payment", paid("o-A"), Some(&alice)).await;
    assert_eq!(
        (status, &body["data"]["duplicate"]),
        (200, &json!(true)),
        "{body}"
    );
    assert_eq!(body["data"]["woken"][0]["executionId"], "pw-o-A", "{body}");
}

on_both_databases!(
    one_user_s_event_id_is_not_another_s,
    one_user_s_event_id_is_not_another_s_on_sqlite,
    one_user_s_event_id_is_not_another_s_on_postgres
);

/// The events kept by key are capped per name and key and in all (`429 too_many_events` with
/// `Retry-After`), and an execution's mailbox by its bytes (`413 mailbox_too_large`).
async fn events_are_capped(url: &str) {
    let dir = scratch_dir();
    let r = Replica::with_test_registry(
        url,
        "caps",
        &dir,
        &[
            ("AGENTRY_EVENTS_MAX_PER_KEY", "3"),
            ("AGENTRY_EVENTS_MAX", "5"),
            ("AGENTRY_MAILBOX_MAX_BYTES", "200KiB"),
        ],
    );
    let send = |key: &str| json!({"key": key, "data": {"amount": 1, "status": "paid"}});
    for _ in 0..3 {
        let (status, body) = post(&r, "/events/payment", send("k-1"), None).await;
        assert_eq!(status, 200, "{body}");
    }
    let refused = client()
        .post(r.url("/events/payment"))
        .json(&send("k-1"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "60");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["code"], "too_many_events", "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("AGENTRY_EVENTS_MAX_PER_KEY"),
        "{body}"
    );
    // Another key has room, until the cap of all events.
    for _ in 0..2 {
        let (status, body) = post(&r, "/events/payment", send("k-2"), None).await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = post(&r, "/events/payment", send("k-3"), None).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (429, Some("too_many_events")),
        "{body}"
    );
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("AGENTRY_EVENTS_MAX)"),
        "{body}"
    );

    // A mailbox of 200 KiB takes three events of 60 KB, not a fourth.
    // The execution naps a minute: the events wait in its mailbox (its execute is left
    // waiting).
    let execute = client()
        .post(r.url("/workflows/tester-mailbox/execute"))
        .json(&json!({"input": {"ms": 60000}, "options": {"executionId": "mb-1"}}))
        .send();
    let _waiting = tokio::spawn(execute);
    wait_for_state(&r, "tester-mailbox", "mb-1", "the nap", |s| {
        status_is(s, "running")
    })
    .await;
    let big = json!({"data": {"blob": "x".repeat(60_000)}});
    let path = "/workflows/tester-mailbox/executions/mb-1/events/ping";
    for _ in 0..3 {
        let (status, body) = post(&r, path, big.clone(), None).await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = post(&r, path, big, None).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (413, Some("mailbox_too_large")),
        "{body}"
    );
}

on_both_databases!(
    events_are_capped,
    events_are_capped_on_sqlite,
    events_are_capped_on_postgres
);

/// The server's resident memory (`VmRSS`), in MiB.
fn rss_mib(r: &Replica) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", r.child.id())).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS");
    kib / 1024
}

/// Full mailboxes cost bounded memory (hardening III, finding 9): four executions' mailboxes
/// and one key's kept events filled with 60 KB events up to their caps, then 64 clients reading
/// the executions' states at once for ten seconds. The binary's RSS stays within 150 MiB of
/// what it was before the events (it grew by 500 MiB and more when nothing was capped; capped,
/// the peak is 80 to 105 MiB, more when the machine is busy and more of the 64 reads are in
/// flight at once).
async fn full_mailboxes_cost_bounded_memory(url: &str) {
    let dir = scratch_dir();
    let r = Replica::with_test_registry(url, "rss", &dir, &[]);
    let ids: Vec<String> = (0..4).map(|i| format!("full-{i}")).collect();
    let mut naps = Vec::new();
    for id in &ids {
        let execute = client()
            .post(r.url("/workflows/tester-mailbox/execute"))
            .json(&json!({"input": {"ms": 60_000}, "options": {"executionId": id}}))
            .send();
        naps.push(tokio::spawn(execute));
        wait_for_state(&r, "tester-mailbox", id, "the nap", |s| {
            status_is(s, "running")
        })
        .await;
    }
    let before = rss_mib(&r);
    let blob = json!({"blob": "x".repeat(60_000)});
    for id in &ids {
        let path = format!("/workflows/tester-mailbox/executions/{id}/events/ping");
        let mut taken = 0;
        loop {
            let (status, body) = post(&r, &path, json!({"data": blob}), None).await;
            if status == 413 {
                assert_eq!(body["code"], "mailbox_too_large", "{body}");
                break;
            }
            assert_eq!(status, 200, "{body}");
            taken += 1;
            assert!(taken <= 100, "the mailbox never filled");
        }
        assert!(
            (10..=20).contains(&taken),
            "{taken} events of 60 KB in 1 MiB"
        );
    }
    for n in 0.. {
        let (status, body) =
            post(&r, "/events/ping", json!({"key": "k", "data": blob}), None).await;
        if status == 429 {
            break;
        }
        assert_eq!(status, 200, "{body}");
        assert!(n < 100, "the key's events were never capped");
    }

    let stop = Instant::now() + Duration::from_secs(10);
    let readers: Vec<_> = (0..64)
        .map(|i| {
            let url = r.url(&format!("/executions/{}", ids[i % ids.len()]));
            tokio::spawn(async move {
                let c = client();
                let mut reads = 0u32;
                while Instant::now() < stop {
                    let resp = c.get(&url).send().await.expect("read");
                    assert_eq!(resp.status(), 200);
                    let body: Value = resp.json().await.expect("json");
                    assert!(
                        body["data"]["mailbox"]
                            .as_array()
                            .is_some_and(|m| !m.is_empty())
                    );
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let mut peak = before;
    while Instant::now() < stop {
        peak = peak.max(rss_mib(&r));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut reads = 0;
    for reader in readers {
        reads += reader.await.expect("reader");
    }
    peak = peak.max(rss_mib(&r));
    assert!(reads > 64, "{reads} reads");
    assert!(
        peak < before + 150,
        "RSS {before} MiB before the events, {peak} MiB at most after {reads} reads"
    );
    eprintln!("RSS {before} MiB before, {peak} MiB at most, {reads} state reads");
    drop(naps);
}

on_both_databases!(
    full_mailboxes_cost_bounded_memory,
    full_mailboxes_cost_bounded_memory_on_sqlite,
    full_mailboxes_cost_bounded_memory_on_postgres
);
