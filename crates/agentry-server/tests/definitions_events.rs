//! Events and call failures of Serverless Workflow definitions, black-box, with the real binary
//! (`agentry serve --definitions DIR` on a fresh SQLite file):
//!
//! - `listen` satisfied by an event delivered to one execution
//!   (`POST /workflows/{id}/executions/{executionId}/events/{type}`), by key
//!   (`POST /events/{type}`), and by a CloudEvent in structured mode (`POST /events`), whose
//!   `id` deduplicates and which is kept for an execution that waits for it later;
//! - `emit` in one workflow reaching another execution's `listen`;
//! - a filter's data predicate, `read: envelope`;
//! - the refusals of `POST /events`, and strict mode's ownership of CloudEvents;
//! - `call: http` failures as the DSL's standard error types (`communication`, `timeout`,
//!   `authorization`), and a `try`/`catch` with `retry` that gets through.
//!
//! Every test has its own server, and its own time limit ([`TEST_LIMIT`]).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::definitions::*;
use common::replica::{SECRET, token};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// How long a test watches for something that must NOT happen (an event that must not wake an
/// execution): longer than a delivery takes on this machine.
const QUIET: Duration = Duration::from_millis(400);

/// The DSL's standard error types (`dsl-reference.md`, "Standard error types").
const ERRORS: &str = "https://serverlessworkflow.io/spec/1.0.0/errors/";

/// POSTs `body` as a CloudEvent in structured mode to `POST /events`.
async fn send_cloud_event(s: &Server, body: &str, token: Option<&str>) -> (u16, Value) {
    let mut req = client()
        .post(s.url("/events"))
        .header("content-type", "application/cloudevents+json")
        .body(body.to_owned());
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    answer(req).await
}

/// Sends the CloudEvent `event`, which must be accepted: its answer's `data`.
async fn cloud_event(s: &Server, event: &Value, token: Option<&str>) -> Value {
    let (status, body) = send_cloud_event(s, &event.to_string(), token).await;
    assert_eq!(status, 200, "{body}\n{}", s.log());
    assert_eq!(body["success"], true, "{body}");
    body["data"].clone()
}

/// A CloudEvent of `type_` with `id` and `data`.
fn cloud(id: &str, type_: &str, data: Value) -> Value {
    json!({
        "specversion": "1.0",
        "id": id,
        "source": "https://shop.example/tests",
        "type": type_,
        "datacontenttype": "application/json",
        "data": data,
    })
}

/// Waits until the execution is suspended waiting for `event` with `key`: its state.
async fn waiting_for(
    s: &Server,
    workflow: &str,
    id: &str,
    token: Option<&str>,
    event: &str,
    key: &str,
) -> Value {
    wait_for(s, workflow, id, token, "the wait for the event", |st| {
        st["status"] == "suspended"
            && st["suspension"]["event"] == json!({"name": event, "key": key})
    })
    .await
}

/// Watches the execution for [`QUIET`]: it must stay suspended, with `taken` events taken.
async fn stays_suspended(s: &Server, workflow: &str, id: &str, token: Option<&str>, taken: usize) {
    tokio::time::sleep(QUIET).await;
    let st = state(s, workflow, id, token).await;
    assert_eq!(st["status"], "suspended", "{st:#}");
    assert_eq!(mailbox(&st).len(), taken, "{st:#}");
}

/// The events an execution's state shows in its mailbox.
fn mailbox(st: &Value) -> Vec<Value> {
    st["mailbox"].as_array().cloned().unwrap_or_default()
}

/// The executions an answer of `POST /events/{type}` (or one sending of a CloudEvent) woke.
fn woken(sent: &Value) -> Vec<String> {
    sent["woken"]
        .as_array()
        .map(|w| {
            w.iter()
                .filter_map(|e| e["executionId"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A fresh id with a readable prefix.
fn new_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

// ---------------------------------------------------------------------------------------------
// The definitions.
// ---------------------------------------------------------------------------------------------

/// A document's header.
fn header(name: &str) -> String {
    format!("document:\n  dsl: '1.0.0'\n  namespace: events\n  name: {name}\n  version: '1.0.0'\n")
}

const APPROVAL: &str = "com.example.approval";
const PAYMENT: &str = "com.example.payment";
const SHIPPED: &str = "com.example.shipped";
const READING: &str = "com.example.reading";
const NOTE: &str = "com.example.note";

/// Waits for an approval (no correlation); its output is the events' data.
fn await_approval() -> (&'static str, String) {
    let yaml = header("await-approval")
        + &format!(
            r#"do:
  - awaitApproval:
      listen:
        to:
          one:
            with:
              type: {APPROVAL}
"#
        );
    ("await-approval", yaml)
}

/// A `listen` for a payment of the order `.orderId` (its own task, correlated).
fn payment_listen(task: &str, indent: &str) -> String {
    let body = format!(
        r#"- {task}:
    listen:
      to:
        one:
          with:
            type: {PAYMENT}
          correlate:
            orderId:
              from: '${{ .data.orderId }}'
              expect: '${{ .orderId }}'
"#
    );
    body.lines()
        .map(|l| format!("{indent}{l}\n"))
        .collect::<String>()
}

/// Waits for the payment of its order (`.orderId`).
fn order_paid() -> (&'static str, String) {
    let yaml = header("order-paid") + "do:\n" + &payment_listen("awaitPayment", "  ");
    ("order-paid", yaml)
}

/// Waits 2 s, then for the payment of its order.
fn late_payment() -> (&'static str, String) {
    let yaml = header("late-payment")
        + "do:\n  - pause:\n      wait:\n        seconds: 2\n"
        + &payment_listen("awaitPayment", "  ");
    ("late-payment", yaml)
}

/// Waits 2 s, then for two payments of its order: `{orderId, first, second}`.
fn two_payments() -> (&'static str, String) {
    let first = payment_listen("first", "  ")
        + "      output:\n        as: '${ {orderId: $input.orderId, first: .[0]} }'\n";
    let second = payment_listen("second", "  ")
        + "      output:\n        as: '${ $input + {second: .[0]} }'\n";
    let yaml = header("two-payments")
        + "do:\n  - pause:\n      wait:\n        seconds: 2\n"
        + &first
        + &second;
    ("two-payments", yaml)
}

/// Emits `com.example.shipped` for its order: its output is the CloudEvent.
fn warehouse() -> (&'static str, String) {
    let yaml = header("warehouse")
        + &format!(
            r#"do:
  - ship:
      emit:
        event:
          with:
            type: {SHIPPED}
            source: https://warehouse.example
            data:
              orderId: '${{ .orderId }}'
              carrier: ups
"#
        );
    ("warehouse", yaml)
}

/// Waits for the shipment of its order (`.orderId`), correlated on the data's `orderId`.
fn delivery_tracker() -> (&'static str, String) {
    let yaml = header("delivery-tracker")
        + &format!(
            r#"do:
  - awaitShipment:
      listen:
        to:
          one:
            with:
              type: {SHIPPED}
            correlate:
              orderId:
                from: '${{ .data.orderId }}'
                expect: '${{ .orderId }}'
      output:
        as: '${{ {{orderId: $input.orderId, carrier: .[0].carrier}} }}'
"#
        );
    ("delivery-tracker", yaml)
}

/// Waits for a reading whose data's amount is over 10.
fn sensor() -> (&'static str, String) {
    let yaml = header("sensor")
        + &format!(
            r#"do:
  - awaitHighReading:
      listen:
        to:
          one:
            with:
              type: {READING}
              data: '${{ .amount > 10 }}'
"#
        );
    ("sensor", yaml)
}

/// Waits for a note and reads its envelope.
fn envelope_reader() -> (&'static str, String) {
    let yaml = header("envelope-reader")
        + &format!(
            r#"do:
  - awaitNote:
      listen:
        to:
          one:
            with:
              type: {NOTE}
        read: envelope
"#
        );
    ("envelope-reader", yaml)
}

/// Every event workflow: each test's server serves them all (a CloudEvent is sent by the keys
/// of every workflow that listens for its type).
fn event_workflows() -> Vec<(&'static str, String)> {
    vec![
        await_approval(),
        order_paid(),
        late_payment(),
        two_payments(),
        warehouse(),
        delivery_tracker(),
        sensor(),
        envelope_reader(),
    ]
}

// ---------------------------------------------------------------------------------------------
// 1. listen, satisfied per execution.
// ---------------------------------------------------------------------------------------------

/// A `listen` suspends its execution, which shows the awaited event; an event delivered to the
/// execution resumes it, and it completes with the event's data as its output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_is_satisfied_by_an_event_delivered_to_its_execution() {
    within(async {
        let s = Server::start(&event_workflows(), &[]);
        let id = new_id("approval");
        let started = execute(&s, "await-approval", &id, json!({"expense": 1500}), None).await;
        assert_eq!(started["status"], "suspended", "{started:#}");

        let st = state(&s, "await-approval", &id, None).await;
        assert_eq!(st["status"], "suspended", "{st:#}");
        assert_eq!(
            st["suspension"]["event"],
            json!({"name": APPROVAL, "key": "*"}),
            "{st:#}"
        );
        assert!(mailbox(&st).is_empty(), "{st:#}");

        let data = json!({"approved": true, "by": "manager-7"});
        let (status, delivered) = post(
            &s,
            &format!("/workflows/await-approval/executions/{id}/events/{APPROVAL}"),
            &json!({"data": data}),
            None,
        )
        .await;
        assert_eq!(status, 200, "{delivered}\n{}", s.log());
        assert_eq!(delivered["data"]["delivery"], "resumed", "{delivered}");
        assert_eq!(delivered["data"]["duplicate"], false, "{delivered}");

        let done = completed(&s, "await-approval", &id, None).await;
        assert_eq!(done["result"], json!([data]), "{done:#}");
        let taken = mailbox(&done);
        assert_eq!(taken.len(), 1, "{done:#}");
        assert_eq!(taken[0]["status"], "taken", "{done:#}");
        assert_eq!(taken[0]["data"], data, "{done:#}");
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 2. listen with correlate, satisfied by key.
// ---------------------------------------------------------------------------------------------

/// A correlated `listen` waits with the key its `expect` gives (the order id): an event sent by
/// another key does not reach it; one sent by its key completes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correlated_listen_is_satisfied_by_its_key_only() {
    within(async {
        let s = Server::start(&event_workflows(), &[]);
        let id = new_id("paid");
        let order = new_id("o");
        let started = execute(&s, "order-paid", &id, json!({"orderId": order}), None).await;
        assert_eq!(started["status"], "suspended", "{started:#}");
        waiting_for(&s, "order-paid", &id, None, PAYMENT, &order).await;

        let other = new_id("o");
        let (status, sent) = post(
            &s,
            &format!("/events/{PAYMENT}"),
            &json!({"key": other, "data": {"orderId": other, "amount": 1}}),
            None,
        )
        .await;
        assert_eq!(status, 200, "{sent}\n{}", s.log());
        assert!(woken(&sent["data"]).is_empty(), "{sent}");
        stays_suspended(&s, "order-paid", &id, None, 0).await;

        let data = json!({"orderId": order, "amount": 42});
        let (status, sent) = post(
            &s,
            &format!("/events/{PAYMENT}"),
            &json!({"key": order, "data": data}),
            None,
        )
        .await;
        assert_eq!(status, 200, "{sent}\n{}", s.log());
        assert_eq!(woken(&sent["data"]), vec![id.clone()], "{sent}");

        let done = completed(&s, "order-paid", &id, None).await;
        assert_eq!(done["result"], json!([data]), "{done:#}");
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 3. listen with correlate, satisfied by a CloudEvent.
// ---------------------------------------------------------------------------------------------

/// Starts `workflow` (whose first task is the 2 s `pause`) for `order` in the background, and
/// waits until its `pause` runs: the execute call, which answers at its first stop.
async fn start_paused(
    s: &Arc<Server>,
    workflow: &'static str,
    id: &str,
    order: &str,
) -> tokio::task::JoinHandle<Value> {
    let running = {
        let s = s.clone();
        let (id, order) = (id.to_owned(), order.to_owned());
        tokio::spawn(
            async move { execute(&s, workflow, &id, json!({"orderId": order}), None).await },
        )
    };
    wait_for(s, workflow, id, None, "the pause's start", |st| {
        st["steps"]["workflow/do/0/pause"]["status"] == "running"
    })
    .await;
    running
}

/// A CloudEvent whose data carries the order id reaches the waiting execution of that order
/// (the key is read from the event by the correlation's `from`); another order's does not. The
/// same CloudEvent again (same `id`) is sent once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correlated_listen_is_satisfied_by_a_cloud_event_sent_once() {
    within(async {
        let s = Server::start(&event_workflows(), &[]);
        let id = new_id("paid");
        let order = new_id("o");
        execute(&s, "order-paid", &id, json!({"orderId": order}), None).await;
        waiting_for(&s, "order-paid", &id, None, PAYMENT, &order).await;

        let other = new_id("o");
        let foreign = cloud(
            &new_id("ce"),
            PAYMENT,
            json!({"orderId": other, "amount": 9}),
        );
        let answer = cloud_event(&s, &foreign, None).await;
        assert_eq!(answer["sent"][0]["key"], json!(other), "{answer}");
        assert!(woken(&answer["sent"][0]).is_empty(), "{answer}");
        stays_suspended(&s, "order-paid", &id, None, 0).await;

        let event = cloud(
            &new_id("ce"),
            PAYMENT,
            json!({"orderId": order, "amount": 1}),
        );
        let answer = cloud_event(&s, &event, None).await;
        assert_eq!(answer["id"], event["id"], "{answer}");
        assert_eq!(answer["type"], PAYMENT, "{answer}");
        let sent = answer["sent"].as_array().cloned().unwrap_or_default();
        assert_eq!(sent.len(), 1, "one key (the order id): {answer}");
        assert_eq!(sent[0]["key"], json!(order), "{answer}");
        assert_eq!(sent[0]["duplicate"], false, "{answer}");
        assert_eq!(woken(&sent[0]), vec![id.clone()], "{answer}");
        let done = completed(&s, "order-paid", &id, None).await;
        assert_eq!(done["result"], json!([event["data"]]), "{done:#}");

        let again = cloud_event(&s, &event, None).await;
        assert_eq!(again["sent"][0]["duplicate"], true, "{again}");
        assert_eq!(again["sent"][0]["eventId"], sent[0]["eventId"], "{again}");
        let after = state(&s, "order-paid", &id, None).await;
        assert_eq!(mailbox(&after).len(), 1, "{after:#}");
    })
    .await;
}

/// A CloudEvent sent while the execution of its order is still in its `wait` (before its
/// `listen`) is kept, and taken when the `listen` comes: the execution completes with it by
/// itself. Another order's CloudEvent, sent at the same time, is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cloud_event_sent_before_the_listen_is_kept_for_it() {
    within(async {
        let s = Arc::new(Server::start(&event_workflows(), &[]));
        let id = new_id("late");
        let order = new_id("o");
        let running = start_paused(&s, "late-payment", &id, &order).await;

        let other = new_id("o");
        let foreign = cloud(
            &new_id("ce"),
            PAYMENT,
            json!({"orderId": other, "amount": 9}),
        );
        cloud_event(&s, &foreign, None).await;
        let event = cloud(
            &new_id("ce"),
            PAYMENT,
            json!({"orderId": order, "amount": 1}),
        );
        let answer = cloud_event(&s, &event, None).await;
        assert_eq!(answer["sent"][0]["key"], json!(order), "{answer}");
        assert!(
            woken(&answer["sent"][0]).is_empty(),
            "nobody listened yet: {answer}"
        );

        let started = running.await.expect("the execute call");
        assert_eq!(started["status"], "completed", "{started:#}\n{}", s.log());
        let done = completed(&s, "late-payment", &id, None).await;
        assert_eq!(done["result"], json!([event["data"]]), "{done:#}");
        assert_eq!(mailbox(&done).len(), 1, "{done:#}");
    })
    .await;
}

/// Two `listen`s of one execution, for the same order: the first takes the CloudEvent kept for
/// it; the same CloudEvent again is not delivered again, so the second waits on, until a new
/// payment of the order completes it with that payment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_listen_after_a_resume_takes_the_next_event() {
    within(async {
        let s = Arc::new(Server::start(&event_workflows(), &[]));
        let id = new_id("two");
        let order = new_id("o");
        let running = start_paused(&s, "two-payments", &id, &order).await;

        // Sent while the execution waits in `pause`: nobody listens yet; it is kept.
        let first = cloud(
            &new_id("ce"),
            PAYMENT,
            json!({"orderId": order, "amount": 1}),
        );
        let answer = cloud_event(&s, &first, None).await;
        assert!(
            woken(&answer["sent"][0]).is_empty(),
            "nobody listened yet: {answer}"
        );

        // The first `listen` took it; the second waits.
        let st = waiting_for(&s, "two-payments", &id, None, PAYMENT, &order).await;
        assert_eq!(
            st["steps"]["workflow/do/1/first"]["status"], "completed",
            "{st:#}"
        );
        let started = running.await.expect("the execute call");
        assert_eq!(started["status"], "suspended", "{started:#}");

        // The same CloudEvent again: sent once.
        let again = cloud_event(&s, &first, None).await;
        assert_eq!(again["sent"][0]["duplicate"], true, "{again}");
        stays_suspended(&s, "two-payments", &id, None, 1).await;

        // A new payment of its order completes it.
        let second = cloud(
            &new_id("ce"),
            PAYMENT,
            json!({"orderId": order, "amount": 2}),
        );
        let answer = cloud_event(&s, &second, None).await;
        assert_eq!(woken(&answer["sent"][0]), vec![id.clone()], "{answer}");

        let done = completed(&s, "two-payments", &id, None).await;
        assert_eq!(
            done["result"],
            json!({
                "orderId": order,
                "first": {"orderId": order, "amount": 1},
                "second": {"orderId": order, "amount": 2},
            }),
            "{done:#}"
        );
        assert_eq!(mailbox(&done).len(), 2, "{done:#}");
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 4. emit reaching another execution's listen.
// ---------------------------------------------------------------------------------------------

/// An `emit` of one workflow publishes its CloudEvent to the executions listening for its type:
/// the tracker of the same order completes with the shipment; the emitting execution's output
/// is the CloudEvent. The tracker of another order is not reached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emitted_event_reaches_another_executions_listen() {
    within(async {
        let s = Server::start(&event_workflows(), &[]);
        let order = new_id("o");
        let tracker = new_id("track");
        let started = execute(
            &s,
            "delivery-tracker",
            &tracker,
            json!({"orderId": order}),
            None,
        )
        .await;
        assert_eq!(started["status"], "suspended", "{started:#}");
        let bystander = new_id("track");
        let other = new_id("o");
        execute(
            &s,
            "delivery-tracker",
            &bystander,
            json!({"orderId": other}),
            None,
        )
        .await;
        waiting_for(&s, "delivery-tracker", &tracker, None, SHIPPED, &order).await;
        waiting_for(&s, "delivery-tracker", &bystander, None, SHIPPED, &other).await;

        let shipper = new_id("ship");
        let shipped = execute(&s, "warehouse", &shipper, json!({"orderId": order}), None).await;
        assert_eq!(shipped["status"], "completed", "{shipped:#}\n{}", s.log());
        let event = &shipped["result"];
        assert_eq!(event["specversion"], "1.0", "{event:#}");
        assert_eq!(event["type"], SHIPPED, "{event:#}");
        assert_eq!(event["source"], "https://warehouse.example", "{event:#}");
        assert_eq!(
            event["data"],
            json!({"orderId": order, "carrier": "ups"}),
            "{event:#}"
        );
        assert!(
            event["id"].as_str().is_some_and(|i| !i.is_empty()),
            "{event:#}"
        );

        let done = completed(&s, "delivery-tracker", &tracker, None).await;
        assert_eq!(
            done["result"],
            json!({"orderId": order, "carrier": "ups"}),
            "{done:#}"
        );
        stays_suspended(&s, "delivery-tracker", &bystander, None, 0).await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 5. a filter's data predicate.
// ---------------------------------------------------------------------------------------------

/// A filter `data: ${ .amount > 10 }`: an event whose data does not hold it is taken and
/// ignored (the execution waits on); one that holds it completes the execution.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_predicate_ignores_the_events_it_refuses() {
    within(async {
        let s = Server::start(&event_workflows(), &[]);
        let id = new_id("sensor");
        execute(&s, "sensor", &id, json!({}), None).await;
        waiting_for(&s, "sensor", &id, None, READING, "*").await;
        let deliver = |amount: u32| {
            let s = &s;
            let id = &id;
            async move {
                let (status, body) = post(
                    s,
                    &format!("/workflows/sensor/executions/{id}/events/{READING}"),
                    &json!({"data": {"amount": amount}}),
                    None,
                )
                .await;
                assert_eq!(status, 200, "{body}\n{}", s.log());
            }
        };

        deliver(5).await;
        let st = wait_for(&s, "sensor", &id, None, "the low reading taken", |st| {
            st["status"] == "suspended"
                && mailbox(st).first().is_some_and(|e| e["status"] == "taken")
        })
        .await;
        assert_eq!(
            st["suspension"]["event"],
            json!({"name": READING, "key": "*"}),
            "{st:#}"
        );
        stays_suspended(&s, "sensor", &id, None, 1).await;

        deliver(50).await;
        let done = completed(&s, "sensor", &id, None).await;
        assert_eq!(done["result"], json!([{"amount": 50}]), "{done:#}");
        let taken = mailbox(&done);
        assert_eq!(taken.len(), 2, "{done:#}");
        assert!(taken.iter().all(|e| e["status"] == "taken"), "{done:#}");
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 6. read: envelope.
// ---------------------------------------------------------------------------------------------

/// `read: envelope`: the output is the CloudEvent itself (every attribute as sent); an event
/// delivered to the execution without one is in an envelope of its type around its data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_envelope_gives_the_cloud_event() {
    within(async {
        let s = Server::start(&event_workflows(), &[]);

        // Delivered to the execution first: a CloudEvent sent later is kept for every
        // execution that waits for the type later.
        let plain = new_id("plain");
        execute(&s, "envelope-reader", &plain, json!({}), None).await;
        waiting_for(&s, "envelope-reader", &plain, None, NOTE, "*").await;
        let (status, body) = post(
            &s,
            &format!("/workflows/envelope-reader/executions/{plain}/events/{NOTE}"),
            &json!({"data": {"text": "plain"}}),
            None,
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let done = completed(&s, "envelope-reader", &plain, None).await;
        let envelope = &done["result"][0];
        assert_eq!(envelope["type"], NOTE, "{done:#}");
        assert_eq!(envelope["data"], json!({"text": "plain"}), "{done:#}");

        let id = new_id("note");
        execute(&s, "envelope-reader", &id, json!({}), None).await;
        waiting_for(&s, "envelope-reader", &id, None, NOTE, "*").await;
        let mut event = cloud(&new_id("ce"), NOTE, json!({"text": "hello"}));
        event["subject"] = json!("greetings");
        event["time"] = json!("2026-01-02T03:04:05Z");
        let answer = cloud_event(&s, &event, None).await;
        assert_eq!(answer["sent"][0]["key"], "*", "{answer}");
        assert_eq!(woken(&answer["sent"][0]), vec![id.clone()], "{answer}");

        let done = completed(&s, "envelope-reader", &id, None).await;
        assert_eq!(done["result"], json!([event]), "{done:#}");
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 7. refusals and strict mode.
// ---------------------------------------------------------------------------------------------

/// `POST /events` refuses what is not a CloudEvent 1.0 in structured mode: 400 `invalid_event`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_events_refuses_what_is_not_a_cloud_event() {
    within(async {
        let s = Server::start(&event_workflows(), &[]);
        let good = cloud("ce-1", PAYMENT, json!({"orderId": "o-1"}));
        let without = |attribute: &str| {
            let mut e = good.clone();
            e.as_object_mut().map(|m| m.remove(attribute));
            e.to_string()
        };
        let mut old_version = good.clone();
        old_version["specversion"] = json!("0.3");
        let mut numeric_version = good.clone();
        numeric_version["specversion"] = json!(1.0);
        let cases = [
            ("an array", "[1, 2, 3]".to_owned()),
            ("a string", "\"an event\"".to_owned()),
            ("a number", "42".to_owned()),
            ("specversion 0.3", old_version.to_string()),
            ("specversion as a number", numeric_version.to_string()),
            ("no specversion", without("specversion")),
            ("no id", without("id")),
            ("no source", without("source")),
            ("no type", without("type")),
        ];
        for (what, body) in cases {
            let (status, answer) = send_cloud_event(&s, &body, None).await;
            assert_eq!(status, 400, "{what}: {answer}");
            assert_eq!(answer["success"], false, "{what}: {answer}");
            assert_eq!(answer["code"], "invalid_event", "{what}: {answer}");
        }
        // The well-formed one is accepted (nobody listens with its key yet).
        let answer = cloud_event(&s, &good, None).await;
        assert_eq!(answer["id"], "ce-1", "{answer}");
    })
    .await;
}

/// Strict mode: a user's CloudEvent reaches only that user's executions, neither when the
/// execution waits already nor when it waits later (an event kept for its key); the owner's
/// own CloudEvent completes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_strict_mode_a_cloud_event_reaches_only_its_senders_executions() {
    within(async {
        let s = Server::start(
            &event_workflows(),
            &[("AGENTRY_JWT_SECRET", SECRET), ("AGENTRY_AUTH_STRICT", "1")],
        );
        let (alice, bob) = (token("alice", &[]), token("bob", &[]));
        let order = new_id("o");
        let event = |who: &str| {
            cloud(
                &new_id("ce"),
                PAYMENT,
                json!({"orderId": order, "payer": who}),
            )
        };

        // Without a token, refused.
        let (status, _) = send_cloud_event(&s, &event("nobody").to_string(), None).await;
        assert_eq!(status, 401);

        // Bob's payment before Alice's execution waits: kept, but not for her.
        let answer = cloud_event(&s, &event("bob"), Some(&bob)).await;
        assert!(woken(&answer["sent"][0]).is_empty(), "{answer}");
        let id = new_id("strict");
        let started = execute(
            &s,
            "order-paid",
            &id,
            json!({"orderId": order}),
            Some(&alice),
        )
        .await;
        assert_eq!(started["status"], "suspended", "{started:#}");
        waiting_for(&s, "order-paid", &id, Some(&alice), PAYMENT, &order).await;
        stays_suspended(&s, "order-paid", &id, Some(&alice), 0).await;

        // Bob's payment while she waits: not delivered to her.
        let answer = cloud_event(&s, &event("bob"), Some(&bob)).await;
        assert!(woken(&answer["sent"][0]).is_empty(), "{answer}");
        stays_suspended(&s, "order-paid", &id, Some(&alice), 0).await;

        // Hers completes it, with her event.
        let answer = cloud_event(&s, &event("alice"), Some(&alice)).await;
        assert_eq!(woken(&answer["sent"][0]), vec![id.clone()], "{answer}");
        let done = completed(&s, "order-paid", &id, Some(&alice)).await;
        assert_eq!(
            done["result"],
            json!([{"orderId": order, "payer": "alice"}]),
            "{done:#}"
        );
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 8. call: http failures as the DSL's standard errors.
// ---------------------------------------------------------------------------------------------

/// One `call: http` GET of `endpoint` as a workflow's only task (`callService`), with
/// `extra` task lines (such as a timeout).
fn one_call(name: &str, endpoint: &str, extra: &str) -> String {
    header(name)
        + &format!(
            r#"do:
  - callService:
      call: http
      with:
        method: get
        endpoint: {endpoint}
{extra}"#
        )
}

/// Runs `workflow` to its end, which must be an error (execute answers 500 `execution_failed`):
/// the state's `error`.
async fn failure(s: &Server, workflow: &str) -> Value {
    let id = new_id(workflow);
    let body = json!({"input": {}, "options": {"executionId": id}});
    let (status, answer) = post(s, &format!("/workflows/{workflow}/execute"), &body, None).await;
    assert_eq!(status, 500, "{answer}\n{}", s.log());
    assert_eq!(answer["code"], "execution_failed", "{answer}");
    let st = ended(s, workflow, &id, None).await;
    assert_eq!(st["status"], "error", "{st:#}\n{}", s.log());
    st["error"].clone()
}

/// The error is of the DSL's standard `kind` with `status`, raised by the task `callService`,
/// with every field of its problem details and the execution's message and step.
fn assert_dsl_error(error: &Value, kind: &str, status: u64) {
    assert_eq!(error["type"], format!("{ERRORS}{kind}"), "{error:#}");
    assert_eq!(error["status"], status, "{error:#}");
    assert_eq!(error["instance"], "/do/0/callService", "{error:#}");
    for field in ["title", "detail", "message"] {
        assert!(
            error[field].as_str().is_some_and(|t| !t.is_empty()),
            "{field}: {error:#}"
        );
    }
    assert_eq!(error["stepId"], "workflow", "{error:#}");
}

/// A stand-in service that answers `path` with `status` (after `delay`).
async fn stand_in(route: &str, status: u16, delay: Duration) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(route))
        .respond_with(
            ResponseTemplate::new(status)
                .set_body_json(json!({"from": route}))
                .set_delay(delay),
        )
        .mount(&server)
        .await;
    server
}

/// A 503 answer is a `communication` error with status 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_answer_is_a_communication_error() {
    within(async {
        let service = stand_in("/unavailable", 503, Duration::ZERO).await;
        let endpoint = format!("{}/unavailable", service.uri());
        let s = Server::start(
            &[("unavailable", one_call("unavailable", &endpoint, ""))],
            &[],
        );
        let error = failure(&s, "unavailable").await;
        assert_dsl_error(&error, "communication", 503);
        assert_eq!(
            service.received_requests().await.unwrap_or_default().len(),
            1
        );
    })
    .await;
}

/// A service nobody listens for is a `communication` error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_service_is_a_communication_error() {
    within(async {
        let port = common::free_port();
        let endpoint = format!("http://127.0.0.1:{port}/nothing");
        let s = Server::start(
            &[("unreachable", one_call("unreachable", &endpoint, ""))],
            &[],
        );
        let error = failure(&s, "unreachable").await;
        // No answer, so no status of its own: the type's default.
        assert_dsl_error(&error, "communication", 500);
    })
    .await;
}

/// A task's `timeout` passed while its call waits for a slow service is a `timeout` error (408),
/// long before the service would have answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_timeout_is_a_timeout_error() {
    within(async {
        let service = stand_in("/slow", 200, Duration::from_secs(8)).await;
        let endpoint = format!("{}/slow", service.uri());
        let timeout = "      timeout:\n        after:\n          milliseconds: 300\n";
        let s = Server::start(&[("slow", one_call("slow", &endpoint, timeout))], &[]);
        let started = Instant::now();
        let error = failure(&s, "slow").await;
        assert_dsl_error(&error, "timeout", 408);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "failed after {:?}",
            started.elapsed()
        );
    })
    .await;
}

/// `AGENTRY_OUTBOUND_ALLOW=10.0.0.0/8` refuses 127.0.0.1: an `authorization` error (403), and
/// the service gets no request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_the_outbound_policy_refuses_is_an_authorization_error() {
    within(async {
        let service = stand_in("/refused", 200, Duration::ZERO).await;
        let endpoint = format!("{}/refused", service.uri());
        let s = Server::start(
            &[("refused", one_call("refused", &endpoint, ""))],
            &[("AGENTRY_OUTBOUND_ALLOW", "10.0.0.0/8")],
        );
        let error = failure(&s, "refused").await;
        assert_dsl_error(&error, "authorization", 403);
        let got = service.received_requests().await.unwrap_or_default();
        assert!(got.is_empty(), "the service got {} requests", got.len());
    })
    .await;
}

/// A `try` whose `catch` takes the 503s (`errors.with.status: 503`) and retries them (a
/// constant 100 ms, at most 3 attempts), against a service that fails twice then answers: the
/// execution completes with the answer; the service got 3 requests, each with its own
/// `Idempotency-Key` (one per attempt), all of this execution.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caught_503_is_retried_until_the_service_answers() {
    within(async {
        let service = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/flaky"))
            .respond_with(ResponseTemplate::new(503))
            .up_to_n_times(2)
            .with_priority(1)
            .mount(&service)
            .await;
        Mock::given(method("GET"))
            .and(path("/flaky"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true})))
            .with_priority(2)
            .mount(&service)
            .await;
        let yaml = header("flaky")
            + &format!(
                r#"do:
  - guarded:
      try:
        - callService:
            call: http
            with:
              method: get
              endpoint: {}/flaky
      catch:
        errors:
          with:
            status: 503
        retry:
          delay:
            milliseconds: 100
          backoff:
            constant: {{}}
          limit:
            attempt:
              count: 3
"#,
                service.uri()
            );
        let s = Server::start(&[("flaky", yaml)], &[]);
        let id = new_id("flaky");
        execute(&s, "flaky", &id, json!({}), None).await;
        let done = completed(&s, "flaky", &id, None).await;
        assert_eq!(done["result"], json!({"ok": true}), "{done:#}");

        let requests = service.received_requests().await.unwrap_or_default();
        assert_eq!(requests.len(), 3, "{requests:#?}");
        let keys: Vec<String> = requests
            .iter()
            .map(|r| {
                r.headers
                    .get("idempotency-key")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        let distinct: std::collections::BTreeSet<&String> = keys.iter().collect();
        assert_eq!(distinct.len(), 3, "{keys:?}");
        assert!(
            keys.iter().all(|k| k.starts_with(&format!("{id}:"))),
            "{keys:?}"
        );
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 8. `listen` with `any` and `until`, `foreach`; `schedule.on`, `schedule.after`; the sink.
// ---------------------------------------------------------------------------------------------

const STOP: &str = "com.example.stop";
const ORDERED: &str = "com.example.ordered";

/// Waits for the first of an approval (no correlation) and a payment of its order.
fn approval_or_payment() -> (&'static str, String) {
    let yaml = header("approval-or-payment")
        + &format!(
            r#"do:
  - awaitEither:
      listen:
        to:
          any:
            - with:
                type: {APPROVAL}
            - with:
                type: {PAYMENT}
              correlate:
                orderId:
                  from: '${{ .data.orderId }}'
                  expect: '${{ .orderId }}'
        read: envelope
      output:
        as: '${{ {{type: .[0].type, data: .[0].data}} }}'
"#
        );
    ("approval-or-payment", yaml)
}

/// Consumes readings until their amounts add up to 10 or more.
fn until_enough() -> (&'static str, String) {
    let yaml = header("until-enough")
        + &format!(
            r#"do:
  - collect:
      listen:
        to:
          any:
            - with:
                type: {READING}
          until: '${{ (map(.amount) | add) >= 10 }}'
"#
        );
    ("until-enough", yaml)
}

/// Doubles each reading (`foreach`) until a stop event comes.
fn until_stopped() -> (&'static str, String) {
    let yaml = header("until-stopped")
        + &format!(
            r#"do:
  - collect:
      listen:
        to:
          any:
            - with:
                type: {READING}
          until:
            one:
              with:
                type: {STOP}
      foreach:
        item: reading
        at: n
        do:
          - double:
              set:
                n: '${{ $n }}'
                doubled: '${{ $reading.amount * 2 }}'
"#
        );
    ("until-stopped", yaml)
}

/// Started by each order event (`schedule.on`) whose data's total is over 0: its output is
/// the order (the event's data) and the event's id.
fn on_order() -> (&'static str, String) {
    let yaml = header("on-order")
        + &format!(
            r#"schedule:
  on:
    one:
      with:
        type: {ORDERED}
        data: '${{ .total > 0 }}'
do:
  - take:
      set:
        eventId: '${{ .id }}'
        order: '${{ .data }}'
"#
        );
    ("on-order", yaml)
}

/// Emits an order event (its data the input): for `schedule.on` and the sink.
fn order_emitter() -> (&'static str, String) {
    let yaml = header("order-emitter")
        + &format!(
            r#"do:
  - announce:
      emit:
        event:
          with:
            type: {ORDERED}
            source: https://shop.example
            data: '${{ . }}'
"#
        );
    ("order-emitter", yaml)
}

/// Counts to its input's `n`, and starts again 1 s after each completed run.
fn every_second_after() -> (&'static str, String) {
    let yaml = header("again-after")
        + r#"schedule:
  after:
    seconds: 1
do:
  - count:
      set:
        done: true
"#;
    ("again-after", yaml)
}

/// The executions of `workflow` (their summaries), oldest first.
async fn executions_of(s: &Server, workflow: &str) -> Vec<Value> {
    let (status, body) =
        answer(client().get(s.url(&format!("/workflows/{workflow}/executions?limit=100")))).await;
    assert_eq!(status, 200, "{body}");
    let mut all = body["data"]["executions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    all.sort_by_key(|e| e["startAt"].as_str().unwrap_or_default().to_owned());
    all
}

/// Polls until `workflow` has executions for which `done` holds; fails after [`PATIENCE`].
async fn executions_until(
    s: &Server,
    workflow: &str,
    what: &str,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let all = executions_of(s, workflow).await;
        if done(&all) {
            return all;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{what}: never; last {all:#?}\n{}",
            s.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A `listen` with `any` of two filters: the suspension shows both events (the second under
/// `also`, with its correlation's key), and the first event of either completes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_any_is_satisfied_by_the_first_of_its_events() {
    within(async {
        let s = Server::start(&[approval_or_payment()], &[]);
        let (paid, approved) = (new_id("either"), new_id("either"));
        let (order, other) = (new_id("o"), new_id("o"));
        for (id, order) in [(&paid, &order), (&approved, &other)] {
            execute(
                &s,
                "approval-or-payment",
                id,
                json!({"orderId": order}),
                None,
            )
            .await;
            let st = wait_for(&s, "approval-or-payment", id, None, "the wait", |st| {
                st["status"] == "suspended"
            })
            .await;
            assert_eq!(
                st["suspension"]["event"],
                json!({"name": APPROVAL, "key": "*", "also": [{"name": PAYMENT, "key": order}]}),
                "{st:#}"
            );
        }
        // By key: the payment of one order wakes that execution only.
        let (status, sent) = post(
            &s,
            &format!("/events/{PAYMENT}"),
            &json!({"key": order, "data": {"orderId": order, "amount": 5}}),
            None,
        )
        .await;
        assert_eq!(status, 200, "{sent}\n{}", s.log());
        let done = completed(&s, "approval-or-payment", &paid, None).await;
        assert_eq!(
            done["result"],
            json!({"type": PAYMENT, "data": {"orderId": order, "amount": 5}}),
            "{done:#}"
        );
        stays_suspended(&s, "approval-or-payment", &approved, None, 0).await;
        // A CloudEvent of the other type wakes the other.
        cloud_event(
            &s,
            &cloud(&new_id("ce"), APPROVAL, json!({"by": "ana"})),
            None,
        )
        .await;
        let done = completed(&s, "approval-or-payment", &approved, None).await;
        assert_eq!(
            done["result"],
            json!({"type": APPROVAL, "data": {"by": "ana"}}),
            "{done:#}"
        );
    })
    .await;
}

/// `until` an expression: the listen consumes readings (sent before and while it waits) until
/// their amounts add up to 10; its output is every reading consumed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_until_an_expression_consumes_events_until_it_holds() {
    within(async {
        let s = Server::start(&[until_enough()], &[]);
        let id = new_id("enough");
        execute(&s, "until-enough", &id, json!({}), None).await;
        // Some come while it waits, some before it waits again.
        for (i, amount) in [4, 5, 3, 8].iter().enumerate() {
            cloud_event(
                &s,
                &cloud(&format!("{id}-{i}"), READING, json!({"amount": amount})),
                None,
            )
            .await;
        }
        let done = completed(&s, "until-enough", &id, None).await;
        assert_eq!(
            done["result"],
            json!([{"amount": 4}, {"amount": 5}, {"amount": 3}]),
            "{done:#}"
        );
    })
    .await;
}

/// `until` an event, with `foreach`: each reading runs the loop's tasks (the reading as
/// `$reading`, its index as `$n`) as it comes; the stop event ends the listen (it is not
/// consumed); the output is the loop's outputs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_until_an_event_runs_its_foreach_on_each_event() {
    within(async {
        let s = Server::start(&[until_stopped()], &[]);
        let id = new_id("stopped");
        execute(&s, "until-stopped", &id, json!({}), None).await;
        let st = wait_for(&s, "until-stopped", &id, None, "the wait", |st| {
            st["status"] == "suspended"
        })
        .await;
        assert_eq!(
            st["suspension"]["event"],
            json!({"name": READING, "key": "*", "also": [{"name": STOP, "key": "*"}]}),
            "{st:#}"
        );
        for (i, amount) in [1, 2].iter().enumerate() {
            let path = format!("/workflows/until-stopped/executions/{id}/events/{READING}");
            let (status, body) = post(&s, &path, &json!({"data": {"amount": amount}}), None).await;
            assert_eq!(status, 200, "{body}");
            // Each reading runs the loop at once (the execution waits again after it).
            wait_for(&s, "until-stopped", &id, None, "the loop's run", |st| {
                st["status"] == "suspended"
                    && st["steps"].as_object().is_some_and(|steps| {
                        steps.keys().filter(|k| k.contains("/double")).count() == i + 1
                    })
            })
            .await;
        }
        let path = format!("/workflows/until-stopped/executions/{id}/events/{STOP}");
        let (status, body) = post(&s, &path, &json!({"data": {}}), None).await;
        assert_eq!(status, 200, "{body}");
        let done = completed(&s, "until-stopped", &id, None).await;
        assert_eq!(
            done["result"],
            json!([{"n": 0, "doubled": 2}, {"n": 1, "doubled": 4}]),
            "{done:#}"
        );
    })
    .await;
}

/// `schedule.on`: each matching event starts one execution on it, whether it comes as a
/// CloudEvent (`POST /events`; sent twice with one id, it starts one), by key
/// (`POST /events/{type}`) or from an `emit`; an event its filter refuses starts none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedule_on_starts_one_execution_per_event() {
    within(async {
        let s = Server::start(&[on_order(), order_emitter()], &[]);
        let first = cloud(&new_id("ce"), ORDERED, json!({"total": 12}));
        cloud_event(&s, &first, None).await;
        cloud_event(&s, &first, None).await;
        cloud_event(
            &s,
            &cloud(&new_id("ce"), ORDERED, json!({"total": 0})),
            None,
        )
        .await;
        let (status, body) = post(
            &s,
            &format!("/events/{ORDERED}"),
            &json!({"key": "any", "data": {"total": 7}, "eventId": "keyed-1"}),
            None,
        )
        .await;
        assert_eq!(status, 200, "{body}\n{}", s.log());
        let emitted = execute(
            &s,
            "order-emitter",
            &new_id("emit"),
            json!({"total": 3}),
            None,
        )
        .await;
        assert_eq!(emitted["status"], "completed", "{emitted:#}");

        let runs = executions_until(&s, "on-order", "three runs, completed", |all| {
            all.len() >= 3 && all.iter().all(|e| e["status"] == "completed")
        })
        .await;
        tokio::time::sleep(QUIET).await;
        let runs_now = executions_of(&s, "on-order").await;
        assert_eq!(runs_now.len(), 3, "{runs_now:#?}");
        let mut totals = Vec::new();
        for run in &runs {
            let id = run["executionId"].as_str().expect("an id");
            let st = completed(&s, "on-order", id, None).await;
            totals.push(st["result"]["order"]["total"].as_i64().expect("a total"));
            if st["result"]["order"]["total"] == 12 {
                assert_eq!(st["result"]["eventId"], first["id"], "{st:#}");
            }
        }
        totals.sort();
        assert_eq!(totals, vec![3, 7, 12]);
    })
    .await;
}

/// `schedule.after`: a run that completed starts the next one, which waits the delay first
/// (its context says which run it follows and when it may start).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedule_after_starts_the_next_run_after_the_delay() {
    within(async {
        let s = Server::start(&[every_second_after()], &[]);
        let first = new_id("first");
        let done = execute(&s, "again-after", &first, json!({"n": 1}), None).await;
        assert_eq!(done["status"], "completed", "{done:#}");
        let runs = executions_until(&s, "again-after", "two more runs", |all| {
            all.iter().filter(|e| e["status"] == "completed").count() >= 3
        })
        .await;
        let ids: Vec<&str> = runs
            .iter()
            .filter_map(|e| e["executionId"].as_str())
            .collect();
        let second = completed(&s, "again-after", ids[1], None).await;
        let first_state = completed(&s, "again-after", &first, None).await;
        let follows = &second["context"]["restartedAfter"];
        assert_eq!(follows["executionId"], first, "{second:#}");
        assert_eq!(second["input"], json!({"n": 1}), "{second:#}");
        let ended = |st: &Value| {
            chrono::DateTime::parse_from_rfc3339(st["endAt"].as_str().expect("endAt"))
                .expect("a time")
        };
        // The delay counts from the first run's last task, a moment before its end is written.
        let not_before =
            chrono::DateTime::parse_from_rfc3339(follows["notBefore"].as_str().expect("notBefore"))
                .expect("a time");
        assert!(ended(&second) >= not_before, "{second:#}");
        let gap = ended(&second) - ended(&first_state);
        assert!(gap >= chrono::Duration::milliseconds(900), "{gap}");
    })
    .await;
}

/// `AGENTRY_EVENTS_SINK`: an emitted event is also POSTed there once, as a CloudEvent in
/// structured mode, with the emit's `Idempotency-Key`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emitted_event_is_posted_to_the_sink_once() {
    within(async {
        let sink = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/in"))
            .respond_with(ResponseTemplate::new(202))
            .mount(&sink)
            .await;
        let url = format!("{}/in", sink.uri());
        let s = Server::start(&[order_emitter()], &[("AGENTRY_EVENTS_SINK", &url)]);
        let id = new_id("emit");
        let done = execute(&s, "order-emitter", &id, json!({"total": 9}), None).await;
        assert_eq!(done["status"], "completed", "{done:#}\n{}", s.log());
        let got = sink.received_requests().await.expect("the requests");
        assert_eq!(got.len(), 1, "{got:?}");
        let request = &got[0];
        let header = |name: &str| {
            request
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        assert_eq!(
            header("content-type").as_deref(),
            Some("application/cloudevents+json")
        );
        assert_eq!(
            header("idempotency-key"),
            Some(format!("{id}:workflow/do/0/announce"))
        );
        let event: Value = serde_json::from_slice(&request.body).expect("a JSON body");
        assert_eq!(event, done["result"], "{event:#}");
        assert_eq!(event["type"], ORDERED);
        assert_eq!(event["data"], json!({"total": 9}));
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 9. A scheduled definition on replicas.
// ---------------------------------------------------------------------------------------------

/// Runs each second (`schedule.every`).
fn ticking() -> (&'static str, String) {
    let yaml = header("ticking")
        + r#"schedule:
  every:
    seconds: 1
do:
  - tick:
      set:
        ticked: true
"#;
    ("ticking", yaml)
}

/// Two replicas on one PostgreSQL database serve a definition that runs each second: each tick
/// starts one execution (`definition-ticking@<fire time>`), none missing between the first
/// and the last, each completed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_definition_fires_once_per_tick_across_two_replicas() {
    let db = agentry_testdb::PgDatabase::create("agentry_defs_sched")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let replicas: Vec<Server> = ["a", "b"]
        .iter()
        .map(|n| Server::replica(&db.url, &format!("tick-{n}"), &[ticking()], &[]))
        .collect();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let fire_times = |all: &[Value]| -> Vec<chrono::DateTime<chrono::Utc>> {
        let mut times: Vec<_> = all
            .iter()
            .filter_map(|e| {
                e["executionId"]
                    .as_str()?
                    .strip_prefix("definition-ticking@")
            })
            .map(|t| {
                chrono::DateTime::parse_from_rfc3339(t)
                    .unwrap_or_else(|_| panic!("{t}: not RFC 3339"))
                    .with_timezone(&chrono::Utc)
            })
            .collect();
        times.sort();
        times
    };
    let runs = executions_until(&replicas[1], "ticking", "four runs", |all| all.len() >= 4).await;
    // Each run but the newest (which may have just started) completed.
    let ended = runs[..runs.len() - 1]
        .iter()
        .all(|e| e["status"] == "completed");
    assert!(ended, "{runs:#?}");
    let times = fire_times(&runs);
    assert_eq!(times.len(), runs.len(), "{runs:#?}");
    let gaps: Vec<i64> = times
        .windows(2)
        .map(|w| (w[1] - w[0]).num_milliseconds())
        .collect();
    assert!(
        gaps.iter().all(|g| *g == 1000),
        "a tick missed or twice: {gaps:?}"
    );
    // Both replicas serve the same executions.
    let seen_by_a = executions_of(&replicas[0], "ticking").await;
    assert!(seen_by_a.len() >= runs.len(), "{seen_by_a:#?}");
    drop(replicas);
    db.drop_now().await;
}
