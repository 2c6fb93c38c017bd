//! Durable agent runs through the real binary: kill -9 in the middle of a slow tool, a dropped
//! stream re-attached with `Last-Event-ID` (on the same process, and on another PostgreSQL
//! replica), the SIGTERM hand-off, tool approvals (approved, denied, expired by their deadline,
//! raced), strict mode's ownership of runs and approvals, and a working memory written once
//! across a kill -9.
//!
//! The `tester` agent (`AGENTRY_TEST_AGENTS`, see `src/test_agents.rs`) calls the tools its
//! message lists and writes what each does to a log file, so a test counts how often each tool
//! ran across processes.

mod common;

use std::time::{Duration, Instant};

use common::replica::{
    PATIENCE, Replica, SECRET, client, log_lines, read_sse, read_sse_as, scratch_dir, sqlite_url,
    token,
};

use serde_json::{Value, json};

fn count(lines: &[String], line: &str) -> usize {
    lines.iter().filter(|l| *l == line).count()
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < PATIENCE, "{what}: never happened");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The run's state, `None` while it does not exist.
async fn run_state(r: &Replica, agent: &str, run: &str) -> Option<Value> {
    let resp = client()
        .get(r.url(&format!("/agents/{agent}/runs/{run}")))
        .send()
        .await
        .expect("run state");
    if resp.status() == 404 {
        return None;
    }
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["success"], true, "{body}");
    Some(body["data"].clone())
}

/// Polls the run's state until `done` holds.
async fn wait_for_run(
    r: &Replica,
    agent: &str,
    run: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let started = Instant::now();
    loop {
        let s = run_state(r, agent, run).await.unwrap_or(Value::Null);
        if done(&s) {
            return s;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{what}: never happened; last {s}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// POSTs a durable `/text` of `agent` in a task (its client may be cut off by a kill).
fn start_text(
    r: &Replica,
    agent: &str,
    run: &str,
    input: &str,
) -> tokio::task::JoinHandle<Option<(u16, Value)>> {
    let url = r.url(&format!("/agents/{agent}/text"));
    let body = json!({"input": input, "options": {"runId": run}});
    tokio::spawn(async move {
        let resp = client().post(url).json(&body).send().await.ok()?;
        let status = resp.status().as_u16();
        Some((status, resp.json().await.ok()?))
    })
}

/// kill -9 while the run's second tool sleeps; restarted, the run completes: the interrupted
/// tool ran again (its attempt 2), every tool that had completed ran once, and no model call
/// or tool before it was made again.
async fn kill_9_mid_tool_then_restart(database_url: &str) {
    let dir = scratch_dir();
    let env = [("AGENTRY_LEASE_TTL", "2s")];
    let mut first = Replica::with_test_registry(database_url, "k9", &dir, &env);
    let run = format!("run-{}", uuid::Uuid::new_v4().simple());
    let waiting = start_text(&first, "tester", &run, "steps a:0 b:3000 c:0");
    wait_until("tool b started", || {
        log_lines(&dir).contains(&"start b 1".to_owned())
    })
    .await;
    first.signal("-KILL");
    let _ = first.child.wait();
    let _ = waiting.await;
    // The same node again: it continues its runs at once.
    let again = Replica::with_test_registry(database_url, "k9", &dir, &env);
    let done = wait_for_run(&again, "tester", &run, "the run completes", |s| {
        s["status"] == "completed"
    })
    .await;
    assert_eq!(done["text"], "done: a ok, b ok, c ok", "{done}");
    let log = log_lines(&dir);
    assert_eq!(count(&log, "start a 1"), 1, "{log:?}");
    assert_eq!(count(&log, "end a 1"), 1, "{log:?}");
    assert_eq!(count(&log, "start b 1"), 1, "{log:?}");
    assert_eq!(count(&log, "end b 1"), 0, "{log:?}");
    assert_eq!(count(&log, "end b 2"), 1, "{log:?}");
    assert_eq!(count(&log, "end c 1"), 1, "{log:?}");
    assert_eq!(log.len(), 7, "{log:?}");
    let steps = done["steps"].as_array().expect("steps");
    let b = steps
        .iter()
        .find(|s| s["id"] == "tool-2-0")
        .expect("tool b's step");
    assert_eq!(b["attempt"], 2, "{b}");
    // A tool step's result is the tool's output, not the call again.
    assert_eq!(b["result"], json!({"label": "b", "attempt": 2}), "{b}");
    assert!(b.get("isError").is_none(), "{b}");
    let models: Vec<&Value> = steps.iter().filter(|s| s["kind"] == "model-call").collect();
    assert_eq!(models.len(), 4, "{steps:?}");
    assert!(models.iter().all(|m| m["attempt"] == 1), "{steps:?}");
    drop(again);
    let _ = std::fs::remove_dir_all(&dir);
}

on_both_databases!(
    kill_9_mid_tool_then_restart,
    kill_9_mid_tool_then_restart_on_sqlite,
    kill_9_mid_tool_then_restart_on_postgres
);

/// The working memory of `tester-memory`'s user `u1` (`null` when none was written).
async fn working_memory_of(r: &Replica) -> Value {
    let body: Value = client()
        .get(r.url("/agents/tester-memory/memory/working?userId=u1"))
        .send()
        .await
        .expect("working memory")
        .json()
        .await
        .expect("json");
    assert_eq!(body["success"], true, "{body}");
    body["data"]["value"].clone()
}

/// kill -9 once a durable run recorded its `update_working_memory` call (while its next tool
/// sleeps, before the answer); restarted, the run continues and the memory was written once:
/// the replay reads the recorded result and does not write again, so a value the user set
/// through the route in between stays.
async fn working_memory_across_a_kill_9(database_url: &str) {
    let dir = scratch_dir();
    let env = [("AGENTRY_LEASE_TTL", "2s")];
    let mut first = Replica::with_test_registry(database_url, "wm", &dir, &env);
    let run = format!("run-{}", uuid::Uuid::new_v4().simple());
    let url = first.url("/agents/tester-memory/text");
    let body = json!({
        "input": "steps memory:Paris:metric b:3000",
        "options": {"runId": run, "userId": "u1"}
    });
    let waiting = tokio::spawn(async move { client().post(url).json(&body).send().await.ok() });
    wait_until("tool b started", || {
        log_lines(&dir).contains(&"start b 1".to_owned())
    })
    .await;
    // The tool call is recorded with its result, and the memory written.
    let s = run_state(&first, "tester-memory", &run)
        .await
        .expect("the run");
    let update = s["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|s| s["id"] == "tool-1-0")
        .cloned()
        .expect("the update's step");
    let paris = json!({"city": "Paris", "units": "metric"});
    assert_eq!(
        update["result"],
        json!({"workingMemory": paris}),
        "{update}"
    );
    assert_eq!(working_memory_of(&first).await, paris);
    // The user changes it before the crash.
    let rome = json!({"city": "Rome", "units": "metric"});
    let resp = client()
        .put(first.url("/agents/tester-memory/memory/working?userId=u1"))
        .json(&json!({"value": rome}))
        .send()
        .await
        .expect("put");
    assert_eq!(resp.status(), 200);
    first.signal("-KILL");
    let _ = first.child.wait();
    let _ = waiting.await;

    let again = Replica::with_test_registry(database_url, "wm", &dir, &env);
    let done = wait_for_run(&again, "tester-memory", &run, "the run completes", |s| {
        s["status"] == "completed"
    })
    .await;
    assert_eq!(done["text"], "done: memory ok, b ok", "{done}");
    let steps = done["steps"].as_array().expect("steps");
    let update = steps
        .iter()
        .find(|s| s["id"] == "tool-1-0")
        .expect("the update's step");
    assert_eq!(update["attempt"], 1, "{update}");
    assert_eq!(
        update["result"],
        json!({"workingMemory": paris}),
        "{update}"
    );
    // Written once, before the crash: the replay did not write Paris over Rome.
    assert_eq!(working_memory_of(&again).await, rome);
    let log = log_lines(&dir);
    assert_eq!(count(&log, "end b 2"), 1, "{log:?}");
    drop(again);
    let _ = std::fs::remove_dir_all(&dir);
}

on_both_databases!(
    working_memory_across_a_kill_9,
    working_memory_across_a_kill_9_on_sqlite,
    working_memory_across_a_kill_9_on_postgres
);

/// A stream of `tester` dropped after its first tool result, re-attached with `Last-Event-ID`
/// on `again`: what was missed comes once, numbered on, and the whole makes the run's story
/// (each tool call and result once, the final text once).
async fn reattach_after_a_drop(first: &Replica, again: &Replica) {
    let run = format!("run-{}", uuid::Uuid::new_v4().simple());
    let resp = client()
        .post(first.url("/agents/tester/stream"))
        .json(&json!({"input": "steps a:200 b:400 c:200", "options": {"runId": run}}))
        .send()
        .await
        .expect("stream");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-run-id"], run.as_str());
    let seen = read_sse(resp, |evs| {
        evs.iter().any(|(_, e)| e["type"] == "tool-result")
    })
    .await;
    let last = seen.iter().filter_map(|(id, _)| *id).max().expect("an id");
    let resp = client()
        .get(again.url(&format!("/agents/tester/runs/{run}/stream")))
        .header("Last-Event-ID", last.to_string())
        .send()
        .await
        .expect("re-attach");
    assert_eq!(resp.status(), 200);
    let rest = read_sse(resp, |_| false).await;
    let ids: Vec<i64> = seen
        .iter()
        .chain(rest.iter())
        .filter_map(|(id, _)| *id)
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(ids, sorted, "ids in order, none twice: {ids:?}");
    assert!(rest.iter().filter_map(|(id, _)| *id).all(|id| id > last));
    let all: Vec<&Value> = seen.iter().chain(rest.iter()).map(|(_, e)| e).collect();
    let of = |t: &str| all.iter().filter(|e| e["type"] == t).count();
    assert_eq!(of("tool-call"), 3, "{all:?}");
    assert_eq!(of("tool-result"), 3, "{all:?}");
    assert_eq!(of("finish"), 1, "{all:?}");
    let finish = all.last().expect("events");
    assert_eq!(finish["type"], "finish", "{all:?}");
    assert_eq!(finish["text"], "done: a ok, b ok, c ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reattach_after_a_dropped_stream_on_sqlite() {
    let (url, path) = sqlite_url();
    let dir = scratch_dir();
    let r = Replica::with_test_registry(&url, "re", &dir, &[]);
    reattach_after_a_drop(&r, &r).await;
    drop(r);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reattach_on_another_replica_on_postgres() {
    let db = agentry_testdb::PgDatabase::create("agentry_runs")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = scratch_dir();
    let a = Replica::with_test_registry(&db.url, "ra", &dir, &[]);
    let b = Replica::with_test_registry(&db.url, "rb", &dir, &[]);
    reattach_after_a_drop(&a, &b).await;
    drop((a, b));
    db.drop_now().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The text pieces of a stream: (id, delta) of each `text-delta`.
fn text_pieces(events: &[(Option<String>, Value)]) -> Vec<(Option<String>, String)> {
    events
        .iter()
        .filter(|(_, e)| e["type"] == "text-delta")
        .map(|(id, e)| (id.clone(), e["delta"].as_str().expect("delta").to_owned()))
        .collect()
}

/// A durable run's live text pieces carry ids `<seq>.<characters so far>`; a stream dropped in
/// the middle of a text and re-attached with the last piece's id (raw events, or the AI SDK
/// stream with `lastEventId`) gets only the rest of the text, then the end: the text whole,
/// nothing twice. A malformed id is a 400.
async fn reattach_in_the_middle_of_a_text(database_url: &str) {
    let dir = scratch_dir();
    let r = Replica::with_test_registry(database_url, "mid", &dir, &[]);
    let run = format!("run-{}", uuid::Uuid::new_v4().simple());
    let resp = client()
        .post(r.url("/agents/tester/stream"))
        .json(&json!({"input": "steps a:0 ~300", "options": {"runId": run}}))
        .send()
        .await
        .expect("stream");
    assert_eq!(resp.status(), 200);
    let id_text = |id: &str| Some(id.to_owned());
    let seen = read_sse_as(resp, id_text, |evs| text_pieces(evs).len() == 2).await;
    let pieces = text_pieces(&seen);
    let stored: Vec<i64> = seen
        .iter()
        .filter_map(|(id, _)| id.as_deref()?.parse().ok())
        .collect();
    let mut had = 0;
    for (id, delta) in &pieces {
        had += delta.chars().count();
        let id = id
            .as_deref()
            .unwrap_or_else(|| panic!("a live piece has an id: {seen:?}"));
        let (seq, chars) = id.split_once('.').expect("<seq>.<characters>");
        assert_eq!(chars.parse::<usize>().ok(), Some(had), "{seen:?}");
        // The last stored event before it (which the stream may not show).
        let seq: i64 = seq.parse().expect("a number");
        assert!(stored.last().is_some_and(|s| seq >= *s), "{seen:?}");
    }
    let last = pieces.last().and_then(|(id, _)| id.clone()).expect("an id");
    let seen_text: String = pieces.iter().map(|(_, d)| d.as_str()).collect();
    assert_eq!(seen_text, "done: a ");

    let resp = client()
        .get(r.url(&format!("/agents/tester/runs/{run}/stream")))
        .header("Last-Event-ID", &last)
        .send()
        .await
        .expect("re-attach");
    assert_eq!(resp.status(), 200);
    let rest = read_sse_as(resp, id_text, |_| false).await;
    let rest_text: String = text_pieces(&rest).iter().map(|(_, d)| d.as_str()).collect();
    assert_eq!(rest_text, "ok", "only the rest of the text: {rest:?}");
    assert!(
        rest.iter().all(|(_, e)| e["type"] != "tool-call"),
        "{rest:?}"
    );
    let (_, finish) = rest.last().expect("events");
    assert_eq!(finish["type"], "finish", "{rest:?}");
    assert_eq!(finish["text"], "done: a ok");

    // The AI SDK stream, with the id as a query parameter.
    let resp = client()
        .get(r.url(&format!(
            "/agents/tester/runs/{run}/stream?format=ui&lastEventId={last}"
        )))
        .send()
        .await
        .expect("re-attach as ui");
    assert_eq!(resp.status(), 200);
    let ui = read_sse_as(resp, id_text, |_| false).await;
    let ui_text: String = ui
        .iter()
        .filter(|(_, c)| c["type"] == "text-delta")
        .map(|(_, c)| c["delta"].as_str().expect("delta"))
        .collect();
    assert_eq!(ui_text, "ok", "{ui:?}");

    for bad in ["3.x", "-1", "1.2.3", "."] {
        let resp = client()
            .get(r.url(&format!("/agents/tester/runs/{run}/stream")))
            .header("Last-Event-ID", bad)
            .send()
            .await
            .expect("bad id");
        assert_eq!(resp.status(), 400, "{bad}");
        let body: Value = resp.json().await.expect("json");
        assert_eq!(body["code"], "invalid_request", "{body}");
    }
    drop(r);
    let _ = std::fs::remove_dir_all(&dir);
}

on_both_databases!(
    reattach_in_the_middle_of_a_text,
    reattach_in_the_middle_of_a_text_on_sqlite,
    reattach_in_the_middle_of_a_text_on_postgres
);

/// SIGTERM while a tool runs: the tool finishes within the grace, the stopping process hands the
/// run over before its next call, and the other replica finishes it; each tool ran once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_hands_a_run_over_on_postgres() {
    let db = agentry_testdb::PgDatabase::create("agentry_runs")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = scratch_dir();
    let env = [
        ("AGENTRY_LEASE_TTL", "3s"),
        ("AGENTRY_SHUTDOWN_GRACE", "5s"),
    ];
    let mut leaving = Replica::with_test_registry(&db.url, "ta", &dir, &env);
    let staying = Replica::with_test_registry(&db.url, "tb", &dir, &env);
    let run = format!("run-{}", uuid::Uuid::new_v4().simple());
    let waiting = start_text(&leaving, "tester", &run, "steps a:1500 b:0");
    wait_until("tool a started", || {
        log_lines(&dir).contains(&"start a 1".to_owned())
    })
    .await;
    leaving.signal("-TERM");
    let (status, body) = waiting.await.expect("task").expect("an answer");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"], "execution_continues_elsewhere", "{body}");
    let exit = leaving.child.wait().expect("wait");
    assert!(exit.success(), "{exit:?}");
    let done = wait_for_run(
        &staying,
        "tester",
        &run,
        "the other replica finishes it",
        |s| s["status"] == "completed",
    )
    .await;
    assert_eq!(done["text"], "done: a ok, b ok", "{done}");
    let log = log_lines(&dir);
    assert_eq!(
        log,
        ["start a 1", "end a 1", "start b 1", "end b 1"],
        "{}",
        leaving.log()
    );
    drop((leaving, staying));
    db.drop_now().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// POSTs an answer to an approval: the status and the body.
async fn answer(r: &Replica, agent: &str, run: &str, approval: &str, body: Value) -> (u16, Value) {
    let resp = client()
        .post(r.url(&format!("/agents/{agent}/runs/{run}/approvals/{approval}")))
        .json(&body)
        .send()
        .await
        .expect("approval");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// The `operator` refund over 100: it waits for approval (suspended, with the request in its
/// state and the answer of `/text`); approved, the refund runs once and the model says so;
/// denied, it never runs and the model gives the reason; answered again, 409; an approval the
/// run never asked for, 404.
async fn operator_refunds_wait_for_approval(database_url: &str) {
    let dir = scratch_dir();
    let r = Replica::with_test_registry(database_url, "op", &dir, &[]);
    for (approved, reason) in [(true, None), (false, Some("the box was fine"))] {
        let run = format!("refund-{}", uuid::Uuid::new_v4().simple());
        let resp = client()
            .post(r.url("/agents/operator/text"))
            .json(&json!({"input": "refund order o-1 250 damaged box", "options": {"runId": run}}))
            .send()
            .await
            .expect("text");
        let body: Value = resp.json().await.expect("json");
        assert_eq!(body["data"]["status"], "suspended", "{body}");
        assert_eq!(body["data"]["runId"], run.as_str());
        let pending = &body["data"]["pendingApprovals"][0];
        assert_eq!(pending["toolName"], "issue_refund", "{body}");
        assert_eq!(pending["args"]["amount"], 250);
        assert!(pending["deadline"].is_string(), "{pending}");
        let approval = pending["approvalId"].as_str().expect("an approval id");

        let state = run_state(&r, "operator", &run).await.expect("the run");
        assert_eq!(state["status"], "suspended");
        assert_eq!(state["reason"], "Tool approval required: issue_refund");
        assert_eq!(state["pendingApprovals"][0]["approvalId"], approval);
        let (status, wrong) =
            answer(&r, "operator", &run, "ap-9-9", json!({"approved": true})).await;
        assert_eq!(status, 404, "{wrong}");
        assert_eq!(wrong["code"], "approval_not_found");

        let mut decision = json!({"approved": approved});
        if let Some(reason) = reason {
            decision["reason"] = json!(reason);
        }
        let (status, took) = answer(&r, "operator", &run, approval, decision.clone()).await;
        assert_eq!(status, 200, "{took}");
        assert_eq!(took["data"]["approved"], approved);
        let done = wait_for_run(&r, "operator", &run, "the run ends", |s| {
            s["status"] == "completed"
        })
        .await;
        let refunds: Vec<&Value> = done["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .filter(|s| s["call"]["toolName"] == "issue_refund" && s["kind"] == "tool-call")
            .collect();
        assert_eq!(refunds.len(), 1, "{done}");
        // Each step is a call of the run: none of the engine's own records.
        let ids: Vec<&str> = done["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .map(|s| s["id"].as_str().expect("an id"))
            .collect();
        assert_eq!(
            ids,
            [
                "model-1",
                "tool-1-0",
                "model-2",
                "approval-2-0",
                "tool-2-0",
                "model-3"
            ],
            "{done}"
        );
        if approved {
            assert_eq!(done["text"], "Refunded 250 for order o-1.", "{done}");
            assert_eq!(refunds[0]["result"]["refundId"], "rf-o-1", "{done}");
            assert_eq!(refunds[0]["call"]["args"]["amount"], 250, "{done}");
            assert_eq!(refunds[0]["attempt"], 1);
        } else {
            assert_eq!(
                done["text"], "The refund of 250 for order o-1 was not approved: the box was fine.",
                "{done}"
            );
            assert_eq!(refunds[0]["result"]["denied"], true, "{done}");
            assert_eq!(refunds[0]["isError"], true, "{done}");
        }
        let (status, again) = answer(&r, "operator", &run, approval, decision).await;
        assert_eq!(status, 409, "{again}");
        assert_eq!(again["code"], "approval_not_pending");
    }
    // The same runId with the same input rejoins the run; with another input it is refused.
    let run = format!("refund-{}", uuid::Uuid::new_v4().simple());
    let post = |input: &'static str| {
        client()
            .post(r.url("/agents/operator/text"))
            .json(&json!({"input": input, "options": {"runId": run.clone()}}))
            .send()
    };
    let first: Value = post("refund order o-3 300 lost")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let again: Value = post("refund order o-3 300 lost")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(first["data"]["runId"], again["data"]["runId"], "{again}");
    assert_eq!(again["data"]["status"], "suspended", "{again}");
    let other = post("refund order o-4 300 lost").await.unwrap();
    assert_eq!(other.status(), 409);
    let other: Value = other.json().await.unwrap();
    assert_eq!(other["code"], "execution_exists", "{other}");
    // Cancelled, its state says when and why.
    let before = chrono::Utc::now() - chrono::Duration::seconds(1);
    let resp = client()
        .post(r.url(&format!("/agents/operator/runs/{run}/cancel")))
        .json(&json!({"reason": "the customer withdrew"}))
        .send()
        .await
        .expect("cancel");
    assert_eq!(resp.status(), 200);
    let cancelled = run_state(&r, "operator", &run).await.expect("the run");
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert_eq!(
        cancelled["cancellation"]["reason"], "the customer withdrew",
        "{cancelled}"
    );
    let at = cancelled["cancellation"]["cancelledAt"]
        .as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .unwrap_or_else(|| panic!("cancelledAt: {cancelled}"));
    assert!(at >= before && at <= chrono::Utc::now(), "{cancelled}");
    // Under 100: no approval, one call, completed at once.
    let resp = client()
        .post(r.url("/agents/operator/text"))
        .json(&json!({"input": "refund order o-2 40 late"}))
        .send()
        .await
        .expect("text");
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["data"]["status"], "completed", "{body}");
    assert_eq!(body["data"]["text"], "Refunded 40 for order o-2.");
    drop(r);
    let _ = std::fs::remove_dir_all(&dir);
}

on_both_databases!(
    operator_refunds_wait_for_approval,
    operator_refunds_wait_for_approval_on_sqlite,
    operator_refunds_wait_for_approval_on_postgres
);

/// A deadline that passes is a denial: the guarded tool never runs, the model is told, and the
/// run completes by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_approval_expires_at_its_deadline() {
    let (url, path) = sqlite_url();
    let dir = scratch_dir();
    let r = Replica::with_test_registry(&url, "ex", &dir, &[("AGENTRY_TEST_APPROVAL_MS", "800")]);
    let run = format!("run-{}", uuid::Uuid::new_v4().simple());
    let resp = client()
        .post(r.url("/agents/tester/text"))
        .json(&json!({"input": "steps ok:x", "options": {"runId": run}}))
        .send()
        .await
        .expect("text");
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["data"]["status"], "suspended", "{body}");
    let done = wait_for_run(&r, "tester", &run, "the deadline passes", |s| {
        s["status"] == "completed"
    })
    .await;
    let text = done["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("refused") && text.contains("not approved"),
        "{done}"
    );
    let approval = done["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|s| s["kind"] == "approval")
        .cloned()
        .expect("the approval step");
    assert_eq!(approval["approval"]["expired"], true, "{approval}");
    assert!(log_lines(&dir).is_empty(), "{:?}", log_lines(&dir));
    let (status, late) = answer(&r, "tester", &run, "ap-1-0", json!({"approved": true})).await;
    assert_eq!(status, 409, "{late}");
    drop(r);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Twenty answers to one approval at once, over two PostgreSQL replicas: exactly one is taken,
/// the tool runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_approvals_have_one_winner_on_postgres() {
    let db = agentry_testdb::PgDatabase::create("agentry_runs")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = scratch_dir();
    let a = Replica::with_test_registry(&db.url, "pa", &dir, &[]);
    let b = Replica::with_test_registry(&db.url, "pb", &dir, &[]);
    let run = format!("run-{}", uuid::Uuid::new_v4().simple());
    let resp = client()
        .post(a.url("/agents/tester/text"))
        .json(&json!({"input": "steps ok:x", "options": {"runId": run}}))
        .send()
        .await
        .expect("text");
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["data"]["status"], "suspended", "{body}");
    let answers = futures::future::join_all((0..20).map(|i| {
        let r = if i % 2 == 0 { &a } else { &b };
        answer(r, "tester", &run, "ap-1-0", json!({"approved": true}))
    }))
    .await;
    let statuses: Vec<u16> = answers.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        1,
        "{answers:?}"
    );
    assert!(
        statuses.iter().all(|s| matches!(s, 200 | 409)),
        "{answers:?}"
    );
    wait_for_run(&a, "tester", &run, "the run completes", |s| {
        s["status"] == "completed"
    })
    .await;
    assert_eq!(log_lines(&dir), ["ran x 1"]);
    drop((a, b));
    db.drop_now().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Strict mode: a run and its approvals are its owner's (and an admin's); another user neither
/// sees it in a list, nor reads it, nor answers its approval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_mode_owns_runs_and_approvals() {
    let (url, path) = sqlite_url();
    let dir = scratch_dir();
    let r = Replica::with_test_registry(
        &url,
        "st",
        &dir,
        &[("AGENTRY_JWT_SECRET", SECRET), ("AGENTRY_AUTH_STRICT", "1")],
    );
    let (alice, bob, admin) = (
        token("alice", &[]),
        token("bob", &[]),
        token("root", &["admin"]),
    );
    let run = format!("run-{}", uuid::Uuid::new_v4().simple());
    let resp = client()
        .post(r.url("/agents/operator/text"))
        .bearer_auth(&alice)
        .json(&json!({"input": "refund order o-1 250 damaged box", "options": {"runId": run}}))
        .send()
        .await
        .expect("text");
    assert_eq!(resp.status(), 200);
    let get = |who: &str, path: String| {
        client()
            .get(r.url(&path))
            .bearer_auth(who.to_owned())
            .send()
    };
    let state_path = format!("/agents/operator/runs/{run}");
    assert_eq!(get(&alice, state_path.clone()).await.unwrap().status(), 200);
    assert_eq!(get(&admin, state_path.clone()).await.unwrap().status(), 200);
    let denied = get(&bob, state_path.clone()).await.unwrap();
    assert_eq!(denied.status(), 403);
    let anonymous = client().get(r.url(&state_path)).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    for (who, seen) in [(&alice, 1), (&bob, 0), (&admin, 1)] {
        let list: Value = get(who, "/agent-runs?agentId=operator".into())
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let runs = list["data"]["runs"].as_array().expect("runs");
        assert_eq!(
            runs.iter().filter(|x| x["runId"] == run.as_str()).count(),
            seen,
            "{list}"
        );
    }
    let attach = get(&bob, format!("/agents/operator/runs/{run}/stream"))
        .await
        .unwrap();
    assert_eq!(attach.status(), 403);
    let by_bob = client()
        .post(r.url(&format!("/agents/operator/runs/{run}/approvals/ap-2-0")))
        .bearer_auth(&bob)
        .json(&json!({"approved": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(by_bob.status(), 403);
    let by_alice = client()
        .post(r.url(&format!("/agents/operator/runs/{run}/approvals/ap-2-0")))
        .bearer_auth(&alice)
        .json(&json!({"approved": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(by_alice.status(), 200);
    let done = {
        let started = Instant::now();
        loop {
            let s: Value = get(&alice, state_path.clone())
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if s["data"]["status"] == "completed" {
                break s["data"].clone();
            }
            assert!(started.elapsed() < PATIENCE, "{s}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let approval = done["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "approval")
        .cloned()
        .unwrap();
    assert_eq!(approval["approval"]["by"], "alice", "{approval}");
    drop(r);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two calls of one model answer wait for approval: the run waits for both; answering one runs
/// it and the run waits again for the other; answering that one completes the run. Each ran
/// once, after its own approval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_approvals_in_one_answer_are_answered_one_by_one() {
    let (url, path) = sqlite_url();
    let dir = scratch_dir();
    let r = Replica::with_test_registry(&url, "two", &dir, &[]);
    let run = format!("run-{}", uuid::Uuid::new_v4().simple());
    let resp = client()
        .post(r.url("/agents/tester/text"))
        .json(&json!({"input": "steps ok:x+ok:y", "options": {"runId": run}}))
        .send()
        .await
        .expect("text");
    let body: Value = resp.json().await.expect("json");
    let pending: Vec<&str> = body["data"]["pendingApprovals"]
        .as_array()
        .expect("pending approvals")
        .iter()
        .map(|a| a["approvalId"].as_str().unwrap())
        .collect();
    assert_eq!(pending, ["ap-1-0", "ap-1-1"], "{body}");
    let (status, _) = answer(&r, "tester", &run, "ap-1-1", json!({"approved": true})).await;
    assert_eq!(status, 200);
    let waiting = wait_for_run(&r, "tester", &run, "the run waits for the other", |s| {
        s["status"] == "suspended"
            && s["pendingApprovals"]
                .as_array()
                .is_some_and(|p| p.len() == 1)
    })
    .await;
    assert_eq!(waiting["pendingApprovals"][0]["approvalId"], "ap-1-0");
    assert_eq!(log_lines(&dir), ["ran y 1"]);
    let (status, _) = answer(&r, "tester", &run, "ap-1-0", json!({"approved": true})).await;
    assert_eq!(status, 200);
    let done = wait_for_run(&r, "tester", &run, "the run completes", |s| {
        s["status"] == "completed"
    })
    .await;
    assert_eq!(done["text"], "done: x ok, y ok", "{done}");
    assert_eq!(log_lines(&dir), ["ran y 1", "ran x 1"]);
    drop(r);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `/chat` conversation started by a verified user is that user's, also outside strict mode
/// (provider on): another user, or a caller without a token, finds no active run at its resume
/// URL (204) and cannot answer its approval (404); its owner can.
async fn a_chat_conversation_is_its_user_s(database_url: &str) {
    let dir = scratch_dir();
    let r = Replica::with_test_registry(
        database_url,
        "chat",
        &dir,
        &[("AGENTRY_JWT_SECRET", SECRET)],
    );
    let (alice, bob) = (token("alice", &[]), token("bob", &[]));
    let chat = |who: &str, messages: Value| {
        client()
            .post(r.url("/agents/operator/chat"))
            .bearer_auth(who)
            .json(&json!({"messages": messages, "options": {"conversationId": "c-1"}}))
            .send()
    };
    let asked = chat(
        &alice,
        json!([{"id": "u-1", "role": "user",
                "parts": [{"type": "text", "text": "refund order o-1 250 damaged box"}]}]),
    )
    .await
    .expect("chat");
    assert_eq!(asked.status(), 200);
    let run = asked.headers()["x-run-id"].to_str().unwrap().to_owned();
    let _ = asked.text().await;
    let state = wait_for_run(&r, "operator", &run, "the approval", |s| {
        s["status"] == "suspended"
    })
    .await;
    let approval = state["pendingApprovals"][0]["approvalId"]
        .as_str()
        .expect("a pending approval")
        .to_owned();

    let resume_url = r.url("/agents/operator/chat/c-1/stream");
    for who in [Some(&bob), None] {
        let mut req = client().get(&resume_url);
        if let Some(t) = who {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.expect("resume");
        assert_eq!(
            resp.status(),
            204,
            "{who:?}: another's conversation is not theirs"
        );
    }
    let resp = client()
        .get(&resume_url)
        .bearer_auth(&alice)
        .send()
        .await
        .expect("resume");
    assert_eq!(resp.status(), 200);
    assert!(resp.text().await.unwrap().contains("tool-approval-request"));

    let answer = json!([{"id": run, "role": "assistant", "parts": [{
        "type": "tool-issue_refund", "toolCallId": "x", "state": "approval-responded",
        "input": {"orderId": "o-1", "amount": 250},
        "approval": {"id": approval, "approved": true}}]}]);
    let refused = chat(&bob, answer.clone()).await.expect("chat");
    assert_eq!(refused.status(), 404);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["code"], "run_not_found", "{body}");
    let state = run_state(&r, "operator", &run).await.unwrap();
    assert_eq!(
        state["status"], "suspended",
        "bob's answer ran alice's refund: {state}"
    );

    let accepted = chat(&alice, answer).await.expect("chat");
    assert_eq!(accepted.status(), 200);
    let _ = accepted.text().await;
    let done = wait_for_run(&r, "operator", &run, "the refund", |s| {
        s["status"] == "completed"
    })
    .await;
    assert_eq!(done["status"], "completed", "{done}");
}

on_both_databases!(
    a_chat_conversation_is_its_user_s,
    a_chat_conversation_is_its_user_s_on_sqlite,
    a_chat_conversation_is_its_user_s_on_postgres
);
