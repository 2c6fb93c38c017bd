//! The engine's unit tests (the black-box ones are in `tests/` and the server's).
use super::*;
use crate::clock::ManualClock;
use crate::workflow::step;

/// A test's workflow id.
fn wf_id(id: &str) -> WorkflowId {
    id.into()
}

/// A test's execution id.
fn ex_id(id: &str) -> ExecutionId {
    id.into()
}

fn counting() -> Workflow {
    Workflow::new("count", "Count")
        .and_then(step("one", |_ctx: StepContext| async move { Ok(json!(1)) }))
        .and_then(step("two", |ctx: StepContext| async move {
            Ok(json!(ctx.input.as_i64().unwrap_or(0) + 1))
        }))
        .and_then(step("three", |ctx: StepContext| async move {
            Ok(json!(ctx.input.as_i64().unwrap_or(0) + 1))
        }))
        .build()
        .unwrap()
}

#[tokio::test]
async fn null_suspend_data_is_stored_as_none() {
    let engine = Engine::in_memory();
    engine
        .register(
            Workflow::new("wait", "Wait")
                .and_then(step("gate", |ctx: StepContext| async move {
                    Err::<Value, _>(ctx.suspend("later", Some(Value::Null)))
                }))
                .build()
                .unwrap(),
        )
        .unwrap();
    let rec = engine
        .execute(&wf_id("wait"), json!({}), ExecuteOptions::default())
        .await
        .unwrap();
    let s = rec.state.suspension().expect("suspended");
    assert_eq!(s.data, None);
}

/// An execution left `running` at its checkpoint after step `one`: by a dead process when
/// `lease` is `None` (a row written before leases, or whose holder is gone), else held.
fn orphan(id: &str, lease: Option<Lease>) -> ExecutionRecord {
    let then = chrono::Utc::now() - chrono::Duration::seconds(120);
    let mut steps = std::collections::BTreeMap::new();
    steps.insert(
        "one".into(),
        Arc::new(StepRecord::started(json!({}), 1, then).finished(json!(1), true, then)),
    );
    ExecutionRecord {
        id: id.into(),
        workflow_id: "count".into(),
        workflow_version: None,
        state: ExecutionState::Running {
            suspend_request: None,
        },
        input: json!({}),
        context: Map::new(),
        user_id: None,
        owner: None,
        lease,
        start_at: then,
        updated_at: then,
        progress: Progress {
            next_step: 1,
            steps: Arc::new(steps),
        },
        version: 3,
        last_event: 0,
        queue: None,
    }
}

#[tokio::test]
async fn recovers_orphans_from_their_checkpoint_once() {
    let engine = Engine::in_memory();
    engine.register(counting()).unwrap();
    engine
        .store()
        .insert(&orphan("old", None), &[])
        .await
        .unwrap();
    engine
        .store()
        .insert(
            &orphan(
                "fresh",
                Some(Lease {
                    node: "other".into(),
                    epoch: 1,
                    ttl: Duration::from_secs(60),
                }),
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(engine.recover().await.unwrap(), 1);
    for _ in 0..100 {
        let rec = engine.store().get("old").await.unwrap().unwrap();
        if rec.state.status() == Status::Completed {
            assert_eq!(rec.state.result(), Some(&json!(3)));
            let fresh = engine.store().get("fresh").await.unwrap().unwrap();
            assert_eq!(fresh.state.status(), Status::Running, "its lease is alive");
            // Nothing is left to take over.
            assert_eq!(engine.recover().await.unwrap(), 0);
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the orphan was not recovered");
}

#[tokio::test]
async fn a_pending_suspend_takes_effect_on_recovery() {
    let engine = Engine::in_memory();
    engine.register(counting()).unwrap();
    let mut rec = orphan("o", None);
    rec.state = ExecutionState::Running {
        suspend_request: Some(SuspendRequest {
            requested_at: chrono::Utc::now(),
            reason: "server shutting down".into(),
        }),
    };
    engine.store().insert(&rec, &[]).await.unwrap();
    assert_eq!(engine.recover().await.unwrap(), 1);
    let rec = engine.store().get("o").await.unwrap().unwrap();
    let s = rec.state.suspension().expect("suspended");
    assert_eq!((s.step_index, s.step_id.as_str()), (1, "two"));
    let done = engine
        .resume(&wf_id("count"), &ex_id("o"), Value::Null, None)
        .await
        .unwrap();
    assert_eq!(done.state.result(), Some(&json!(3)));
}

#[tokio::test]
async fn concurrent_resumes_run_once() {
    let engine = Engine::in_memory();
    engine
        .register(
            Workflow::new("gate", "Gate")
                .and_then(step("wait", |ctx: StepContext| async move {
                    match ctx.resume_data {
                        Some(_) => Ok(json!("opened")),
                        None => Err(ctx.suspend("closed", None)),
                    }
                }))
                .build()
                .unwrap(),
        )
        .unwrap();
    let rec = engine
        .execute(&wf_id("gate"), json!({}), ExecuteOptions::default())
        .await
        .unwrap();
    let (gate, id) = (wf_id("gate"), ex_id(&rec.id));
    let attempts = (0..50).map(|_| engine.resume(&gate, &id, json!(1), None));
    let results = futures::future::join_all(attempts).await;
    let ok = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(ok, 1);
    assert!(
        results
            .iter()
            .filter_map(|r| r.as_ref().err())
            .all(|e| matches!(e, EngineError::NotSuspended { .. }))
    );
}

/// Counts the runs of each step id.
#[derive(Clone, Default)]
struct Runs(Arc<Mutex<HashMap<String, u32>>>);

impl Runs {
    fn step(&self, id: &str) -> Step {
        let runs = self.clone();
        let sid = id.to_owned();
        step(id, move |ctx: StepContext| {
            let (runs, sid) = (runs.clone(), sid.clone());
            async move {
                *lock(&runs.0).entry(sid.clone()).or_default() += 1;
                Ok(json!({"id": sid, "attempt": ctx.attempt}))
            }
        })
    }

    fn of(&self, id: &str) -> u32 {
        lock(&self.0).get(id).copied().unwrap_or(0)
    }
}

/// A running execution of `workflow` left by a dead process in its first step, with
/// `steps` recorded.
fn interrupted(workflow: &str, steps: &[(&str, StepRecord)]) -> ExecutionRecord {
    let mut rec = orphan(&format!("{workflow}-1"), None);
    rec.workflow_id = workflow.into();
    rec.progress = Progress {
        next_step: 0,
        steps: Arc::new(
            steps
                .iter()
                .map(|(id, r)| ((*id).to_owned(), Arc::new(r.clone())))
                .collect(),
        ),
    };
    rec
}

async fn recovered(engine: &Engine, id: &str) -> ExecutionRecord {
    assert_eq!(engine.recover().await.unwrap(), 1);
    for _ in 0..200 {
        let rec = engine.store().get(id).await.unwrap().unwrap();
        if rec.state.status() != Status::Running {
            return rec;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{id} was not recovered");
}

fn child_of(parent: &str, output: Value) -> StepRecord {
    let at = chrono::Utc::now();
    StepRecord {
        parent: Some(parent.into()),
        ..StepRecord::started(json!({}), 1, at).finished(output, true, at)
    }
}

#[tokio::test]
async fn an_interrupted_and_all_runs_only_its_unfinished_children() {
    let runs = Runs::default();
    let engine = Engine::in_memory();
    let wf = Workflow::new("fan", "Fan")
        .and_all("fan", vec![runs.step("a"), runs.step("b"), runs.step("c")])
        .build()
        .unwrap();
    engine.register(wf).unwrap();
    let started = StepRecord::started(json!({}), 1, chrono::Utc::now());
    let rec = interrupted(
        "fan",
        &[("fan", started), ("a", child_of("fan", json!("a, before")))],
    );
    engine.store().insert(&rec, &[]).await.unwrap();
    let done = recovered(&engine, &rec.id).await;
    assert_eq!((runs.of("a"), runs.of("b"), runs.of("c")), (0, 1, 1));
    assert_eq!(
        done.state.result(),
        Some(&json!(["a, before", {"id": "b", "attempt": 2}, {"id": "c", "attempt": 2}]))
    );
    let fan = &done.progress.steps["fan"];
    assert_eq!((fan.status, fan.attempt), (StepStatus::Completed, 2));
    assert_eq!(done.progress.steps["b"].parent.as_deref(), Some("fan"));
}

#[tokio::test]
async fn an_interrupted_race_keeps_its_winner() {
    let runs = Runs::default();
    let engine = Engine::in_memory();
    let wf = Workflow::new("race", "Race")
        .and_race("race", vec![runs.step("x"), runs.step("y")])
        .build()
        .unwrap();
    engine.register(wf).unwrap();
    let started = StepRecord::started(json!({}), 1, chrono::Utc::now());
    let rec = interrupted(
        "race",
        &[("race", started), ("y", child_of("race", json!("y won")))],
    );
    engine.store().insert(&rec, &[]).await.unwrap();
    let done = recovered(&engine, &rec.id).await;
    assert_eq!(done.state.result(), Some(&json!("y won")));
    assert_eq!((runs.of("x"), runs.of("y")), (0, 0));
}

#[tokio::test]
async fn children_of_and_all_are_stored_as_they_finish() {
    let gate = Arc::new(tokio::sync::Notify::new());
    let engine = Engine::in_memory();
    let wait = gate.clone();
    let slow = step("slow", move |_ctx: StepContext| {
        let wait = wait.clone();
        async move {
            wait.notified().await;
            Ok(json!("slow"))
        }
    });
    let fast = step("fast", |_ctx: StepContext| async move { Ok(json!("fast")) });
    let wf = Workflow::new("both", "Both")
        .and_all("both", vec![fast, slow])
        .build()
        .unwrap();
    engine.register(wf).unwrap();
    let run = engine
        .start(&wf_id("both"), json!({}), ExecuteOptions::default())
        .await
        .unwrap();
    let id = run.execution_id.clone();
    let mut stored = None;
    for _ in 0..200 {
        let rec = engine.store().get(&id).await.unwrap().unwrap();
        if let Some(fast) = rec.progress.steps.get("fast") {
            stored = Some(fast.clone());
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let fast = stored.expect("the fast child was stored while the slow one ran");
    assert_eq!(fast.output, Some(json!("fast")));
    gate.notify_one();
    let done = run.finish().await.unwrap();
    assert_eq!(done.state.result(), Some(&json!(["fast", "slow"])));
}

#[tokio::test]
async fn a_resumed_step_continues_its_attempt() {
    let engine = Engine::in_memory();
    engine
        .register(
            Workflow::new("gate", "Gate")
                .and_then(step("wait", |ctx: StepContext| async move {
                    match ctx.resume_data {
                        Some(_) => Ok(json!({"attempt": ctx.attempt})),
                        None => Err(ctx.suspend("closed", None)),
                    }
                }))
                .build()
                .unwrap(),
        )
        .unwrap();
    let rec = engine
        .execute(&wf_id("gate"), json!({}), ExecuteOptions::default())
        .await
        .unwrap();
    let wait = &rec.progress.steps["wait"];
    assert_eq!((wait.status, wait.attempt), (StepStatus::Suspended, 1));
    let done = engine
        .resume(&wf_id("gate"), &ex_id(&rec.id), json!(1), None)
        .await
        .unwrap();
    assert_eq!(done.state.result(), Some(&json!({"attempt": 1})));
}

/// A durable sleep is a suspension with a deadline: a new engine on the same store (a
/// restart: the first one's in-memory timer is gone) wakes it once it is due, and the step
/// sees that its timer fired.
#[tokio::test]
async fn a_durable_sleep_survives_a_restart() {
    let store: Arc<dyn ExecutionStore> = Arc::new(InMemoryExecutionStore::new());
    let nap = || {
        Workflow::new("nap", "Nap")
            .and_then(step("nap", |ctx: StepContext| async move {
                ctx.sleep_until(ctx.started_at + chrono::Duration::milliseconds(200))?;
                Ok(json!({"woke": ctx.timed_out}))
            }))
            .build()
            .unwrap()
    };
    let first = Engine::new(store.clone());
    first.register(nap()).unwrap();
    let rec = first
        .execute(&wf_id("nap"), json!({}), ExecuteOptions::default())
        .await
        .unwrap();
    let s = rec.state.suspension().expect("asleep");
    assert!(s.reason.starts_with("Sleeping until"), "{}", s.reason);
    assert!(s.deadline.is_some());
    first.shutdown(Duration::ZERO).await;

    let second = Engine::new(store.clone());
    second.register(nap()).unwrap();
    assert_eq!(second.fire_due_timers().await.unwrap(), 0, "not due yet");
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(second.fire_due_timers().await.unwrap(), 1);
    for _ in 0..200 {
        let rec = store.get(&rec.id).await.unwrap().unwrap();
        if rec.state.status() == Status::Completed {
            assert_eq!(rec.state.result(), Some(&json!({"woke": true})));
            assert_eq!(rec.progress.steps["nap"].attempt, 1, "a wake is no re-run");
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("never woke");
}

/// An engine on the in-memory store whose time only moves when the test advances it.
fn on_manual_clock() -> (Engine, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(chrono::Utc::now()));
    let engine = Engine::with(
        Arc::new(InMemoryExecutionStore::new()),
        clock.clone(),
        EngineConfig::default(),
    );
    (engine, clock)
}

/// A gate that suspends until an hour after its step started, unless resumed before.
fn hour_gate() -> Workflow {
    Workflow::new("gate", "Gate")
        .and_then(step("wait", |ctx: StepContext| async move {
            if ctx.timed_out {
                return Ok(json!("expired"));
            }
            match ctx.resume_data {
                Some(_) => Ok(json!("opened")),
                None => Err(ctx.suspend_until(
                    "closed",
                    None,
                    ctx.started_at + chrono::Duration::hours(1),
                )),
            }
        }))
        .build()
        .unwrap()
}

/// Waits (a bounded number of scheduler turns, no wall-clock time) until `id` is `status`.
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

/// A suspension's deadline fires by itself when the engine's clock reaches it, not before.
#[tokio::test]
async fn a_deadline_fires_when_the_clock_reaches_it() {
    let (engine, clock) = on_manual_clock();
    engine.register(hour_gate()).unwrap();
    let rec = engine
        .execute(&wf_id("gate"), json!({}), ExecuteOptions::default())
        .await
        .unwrap();
    assert_eq!(rec.state.status(), Status::Suspended);
    clock.advance(Duration::from_secs(59 * 60));
    assert!(
        engine.fire_timer(&ex_id(&rec.id)).await.unwrap().is_none(),
        "not due"
    );
    assert_eq!(
        engine
            .store()
            .get(&rec.id)
            .await
            .unwrap()
            .unwrap()
            .state
            .status(),
        Status::Suspended
    );
    clock.advance(Duration::from_secs(60));
    let done = settles(&engine, &rec.id, Status::Completed).await;
    assert_eq!(done.state.result(), Some(&json!("expired")));
}

/// A timer of a suspension that was resumed in time fires nothing: the resume won.
#[tokio::test]
async fn a_timer_after_a_resume_does_nothing() {
    let (engine, clock) = on_manual_clock();
    engine.register(hour_gate()).unwrap();
    let rec = engine
        .execute(&wf_id("gate"), json!({}), ExecuteOptions::default())
        .await
        .unwrap();
    let done = engine
        .resume(&wf_id("gate"), &ex_id(&rec.id), json!(1), None)
        .await
        .unwrap();
    assert_eq!(done.state.result(), Some(&json!("opened")));
    clock.advance(Duration::from_secs(2 * 3600));
    assert!(engine.fire_timer(&ex_id(&rec.id)).await.unwrap().is_none());
    let after = engine.store().get(&rec.id).await.unwrap().unwrap();
    assert_eq!(after.state.result(), Some(&json!("opened")));
}

/// A failed attempt's retry waits its backoff on the engine's clock: ten minutes pass in no
/// time when the test advances them, and not a moment earlier.
#[tokio::test]
async fn a_retry_waits_its_backoff_on_the_engine_clock() {
    let (engine, clock) = on_manual_clock();
    engine
        .register(
            Workflow::new("flaky", "Flaky")
                .and_then(
                    step("try", |ctx: StepContext| async move {
                        match ctx.attempt {
                            1 => Err(StepError::Failed("not yet".into())),
                            n => Ok(json!({"attempt": n})),
                        }
                    })
                    .retries(1, Duration::from_secs(600)),
                )
                .build()
                .unwrap(),
        )
        .unwrap();
    let run = {
        let engine = engine.clone();
        tokio::spawn(async move {
            engine
                .execute(
                    &wf_id("flaky"),
                    json!({}),
                    ExecuteOptions {
                        execution_id: Some("f-1".into()),
                        ..Default::default()
                    },
                )
                .await
        })
    };
    // The failure is recorded before the wait begins, and the wait is due from it.
    for _ in 0..10_000 {
        let failed = match engine.store().get("f-1").await.unwrap() {
            Some(rec) => rec
                .progress
                .steps
                .get("try")
                .is_some_and(|s| !s.failures.is_empty()),
            None => false,
        };
        if failed {
            break;
        }
        tokio::task::yield_now().await;
    }
    clock.advance(Duration::from_secs(599));
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert!(!run.is_finished(), "retried before its backoff");
    clock.advance(Duration::from_secs(1));
    let done = run.await.unwrap().unwrap();
    assert_eq!(done.state.result(), Some(&json!({"attempt": 2})));
}

/// `ctx.emit` sends `step-output` events while the step runs: stored in the log (a re-attach
/// replays them, in order, between the step's start and its end); one over the size limit fails
/// the step, naming the limit.
#[tokio::test]
async fn step_output_is_stored_and_replayed() {
    let engine = Engine::in_memory();
    let wf = Workflow::new("progress", "Progress")
        .and_then(step("work", |ctx: StepContext| async move {
            ctx.emit(json!({"done": 1})).await?;
            ctx.emit(json!({"done": 2})).await?;
            if ctx.input["huge"].as_bool() == Some(true) {
                let big = "x".repeat(crate::workflow::MAX_STEP_OUTPUT_BYTES);
                ctx.emit(json!(big)).await?;
            }
            Ok(json!({"total": 2}))
        }))
        .build()
        .unwrap();
    engine.register(wf).unwrap();
    let rec = engine
        .execute(&wf_id("progress"), json!({}), ExecuteOptions::default())
        .await
        .unwrap();
    assert_eq!(rec.state.status(), Status::Completed);
    let events = engine.store().events_after(&rec.id, 0, 100).await.unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.type_name()).collect();
    assert_eq!(
        kinds,
        [
            "workflow-start",
            "step-start",
            "step-output",
            "step-output",
            "step-complete",
            "workflow-complete"
        ]
    );
    match &events[3].kind {
        EventKind::StepOutput { step_id, data } => {
            assert_eq!(step_id, "work");
            assert_eq!(data, &json!({"done": 2}));
        }
        other => panic!("{other:?}"),
    }
    let failed = engine
        .execute(
            &wf_id("progress"),
            json!({"huge": true}),
            ExecuteOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(failed.state.status(), Status::Error);
    assert!(
        failed
            .state
            .error()
            .unwrap()
            .contains("over the limit of 65536"),
        "{:?}",
        failed.state.error()
    );
}

/// `payment-webhook`'s shape: waits for `payment` keyed by the order id, up to a deadline.
fn awaiting_payment() -> Workflow {
    Workflow::new("pay", "Pay")
        .event(
            "payment",
            json!({"type": "object", "properties": {"amount": {"type": "number", "minimum": 0}}, "required": ["amount"]}),
        )
        .and_then(step("await", |ctx: StepContext| async move {
            let order = ctx.input["orderId"].as_str().unwrap_or_default().to_owned();
            let deadline = ctx.started_at + chrono::Duration::hours(1);
            let got = ctx
                .wait_for_event("payment", Some(&order), Some(deadline))
                .await?;
            Ok(json!({"orderId": order, "payment": got}))
        }))
        .build()
        .unwrap()
}

fn payment(amount: f64, id: Option<&str>) -> EventDelivery {
    EventDelivery {
        name: "payment".into(),
        data: json!({"amount": amount}),
        event_id: id.map(str::to_owned),
    }
}

async fn settle(engine: &Engine, id: &str) -> ExecutionRecord {
    for _ in 0..200 {
        let rec = engine.find(&ex_id(id)).await.unwrap();
        if rec.state.status() != Status::Running {
            return rec;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{id} still running")
}

#[tokio::test]
async fn an_event_resumes_the_step_that_waits_for_it_once() {
    let engine = Engine::in_memory();
    engine.register(awaiting_payment()).unwrap();
    let start = ExecuteOptions {
        execution_id: Some(ex_id("o-1")),
        ..Default::default()
    };
    let rec = engine
        .execute(&wf_id("pay"), json!({"orderId": "o-1"}), start)
        .await
        .unwrap();
    let s = rec.state.suspension().expect("waits");
    assert_eq!(s.reason, "Waiting for event payment");
    assert_eq!(s.event.as_ref().unwrap().key.as_deref(), Some("o-1"));
    assert!(s.deadline.is_some());
    assert_eq!(rec.waiting_for().as_deref(), Some(r#"["payment","o-1"]"#));

    // Bad data is refused, naming the field; an undeclared event too.
    let bad = engine
        .deliver_event(&wf_id("pay"), &ex_id("o-1"), payment(-1.0, None))
        .await
        .unwrap_err();
    assert!(
        matches!(bad, EngineError::InvalidEventData(ref m) if m.contains("amount")),
        "{bad}"
    );
    let unknown = EventDelivery {
        name: "refund".into(),
        ..payment(1.0, None)
    };
    assert!(matches!(
        engine
            .deliver_event(&wf_id("pay"), &ex_id("o-1"), unknown)
            .await,
        Err(EngineError::UnknownEvent { .. })
    ));

    let first = engine
        .deliver_event(&wf_id("pay"), &ex_id("o-1"), payment(12.5, Some("ev-1")))
        .await
        .unwrap();
    assert_eq!(first.delivery, Delivery::Resumed);
    assert!(!first.duplicate);
    let done = settle(&engine, "o-1").await;
    assert_eq!(
        done.state.result(),
        Some(&json!({"orderId": "o-1", "payment": {"amount": 12.5}}))
    );
    let again = engine
        .deliver_event(&wf_id("pay"), &ex_id("o-1"), payment(12.5, Some("ev-1")))
        .await
        .unwrap();
    assert!(again.duplicate);
    assert_eq!(again.delivery, Delivery::Resumed);
    // Another event to an execution that ended is refused.
    assert!(matches!(
        engine
            .deliver_event(&wf_id("pay"), &ex_id("o-1"), payment(1.0, None))
            .await,
        Err(EngineError::EventAfterEnd { .. })
    ));
    let taken = mailbox(&done);
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].taken.as_ref().unwrap().0, "await/event-0");
}

#[tokio::test]
async fn an_event_sent_before_the_wait_waits_in_the_mailbox() {
    let engine = Engine::in_memory();
    let gate = Arc::new(tokio::sync::Notify::new());
    let opened = gate.clone();
    engine
        .register(
            Workflow::new("late", "Late")
                .event("ping", json!({"type": "object"}))
                .and_then(step("slow", move |_ctx: StepContext| {
                    let opened = opened.clone();
                    async move {
                        opened.notified().await;
                        Ok(json!(null))
                    }
                }))
                .and_then(step("wait", |ctx: StepContext| async move {
                    let got = ctx.wait_for_event("ping", None, None).await?;
                    Ok(json!({"got": got}))
                }))
                .build()
                .unwrap(),
        )
        .unwrap();
    let start = ExecuteOptions {
        execution_id: Some(ex_id("l-1")),
        ..Default::default()
    };
    let handle = engine
        .start(&wf_id("late"), json!({}), start)
        .await
        .unwrap();
    let queued = engine
        .deliver_event(
            &wf_id("late"),
            &ex_id("l-1"),
            EventDelivery {
                name: "ping".into(),
                data: json!({"n": 1}),
                event_id: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(queued.delivery, Delivery::Queued);
    gate.notify_one();
    let done = handle.finish().await.unwrap();
    assert_eq!(done.state.result(), Some(&json!({"got": {"n": 1}})));
}

#[tokio::test]
async fn an_event_sent_by_key_wakes_the_waiting_and_is_kept_for_later_ones() {
    let engine = Engine::in_memory();
    engine.register(awaiting_payment()).unwrap();
    let start = |id: &str| ExecuteOptions {
        execution_id: Some(ex_id(id)),
        ..Default::default()
    };
    engine
        .execute(&wf_id("pay"), json!({"orderId": "o-7"}), start("a"))
        .await
        .unwrap();
    engine
        .execute(&wf_id("pay"), json!({"orderId": "o-8"}), start("b"))
        .await
        .unwrap();
    let sent = engine
        .publish_event(
            "payment",
            "o-7",
            json!({"amount": 3}),
            Some("p-1".into()),
            None,
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        sent.woken.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["a"]
    );
    assert_eq!(settle(&engine, "a").await.state.status(), Status::Completed);
    assert_eq!(
        engine.find(&ex_id("b")).await.unwrap().state.status(),
        Status::Suspended
    );
    // Sent again: not again.
    let again = engine
        .publish_event(
            "payment",
            "o-7",
            json!({"amount": 3}),
            Some("p-1".into()),
            None,
            None,
        )
        .await
        .unwrap();
    assert!(again.duplicate);
    assert_eq!(again.woken.len(), 1);
    // An execution that waits for it later takes it from the retention, without suspending.
    let later = engine
        .execute(&wf_id("pay"), json!({"orderId": "o-7"}), start("c"))
        .await
        .unwrap();
    assert_eq!(
        later.state.result(),
        Some(&json!({"orderId": "o-7", "payment": {"amount": 3}}))
    );
    // An event nobody declares is refused.
    assert!(matches!(
        engine
            .publish_event("nope", "k", json!({}), None, None, None)
            .await,
        Err(EngineError::UnknownEvent { .. })
    ));
}

#[tokio::test]
async fn a_deadline_that_passes_first_resumes_the_wait_with_none() {
    let clock = Arc::new(ManualClock::new(chrono::Utc::now()));
    let engine = Engine::with(
        Arc::new(InMemoryExecutionStore::new()),
        clock.clone(),
        EngineConfig::default(),
    );
    engine.register(awaiting_payment()).unwrap();
    let start = ExecuteOptions {
        execution_id: Some(ex_id("d-1")),
        ..Default::default()
    };
    let rec = engine
        .execute(&wf_id("pay"), json!({"orderId": "d-1"}), start)
        .await
        .unwrap();
    assert_eq!(rec.state.status(), Status::Suspended);
    clock.advance(Duration::from_secs(3601));
    let handle = engine
        .fire_timer(&ex_id("d-1"))
        .await
        .unwrap()
        .expect("the deadline passed");
    let done = handle.finish().await.unwrap();
    assert_eq!(
        done.state.result(),
        Some(&json!({"orderId": "d-1", "payment": null}))
    );
}

#[tokio::test]
async fn a_failed_execution_is_retried_from_its_failed_step_with_a_fresh_budget() {
    let engine = Engine::in_memory();
    let ran_first = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counter = ran_first.clone();
    engine
        .register(
            Workflow::new("flaky", "Flaky")
                .and_then(step("first", move |_ctx: StepContext| {
                    let counter = counter.clone();
                    async move {
                        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        Ok(json!("kept"))
                    }
                }))
                .and_then(
                    step("shaky", |ctx: StepContext| async move {
                        if ctx.attempt <= 4 {
                            return Err(StepError::failed(format!("attempt {}", ctx.attempt)));
                        }
                        Ok(json!({"attempts": ctx.attempt}))
                    })
                    .retries(3, Duration::from_millis(1)),
                )
                .build()
                .unwrap(),
        )
        .unwrap();
    let start = ExecuteOptions {
        execution_id: Some(ex_id("f-1")),
        ..Default::default()
    };
    let failed = engine
        .execute(&wf_id("flaky"), json!({}), start)
        .await
        .unwrap();
    assert_eq!(failed.state.status(), Status::Error);
    assert_eq!(failed.progress.steps["shaky"].attempt, 4);
    let done = engine
        .retry(&wf_id("flaky"), &ex_id("f-1"))
        .await
        .unwrap()
        .finish()
        .await
        .unwrap();
    assert_eq!(done.state.result(), Some(&json!({"attempts": 5})));
    assert_eq!(ran_first.load(std::sync::atomic::Ordering::SeqCst), 1);
    let shaky = &done.progress.steps["shaky"];
    assert_eq!(shaky.budget_start(), 5);
    assert!(
        shaky
            .failures
            .iter()
            .any(|f| f.execution_retried && f.attempt == 4)
    );
    let kinds: Vec<String> = engine
        .store()
        .events_after("f-1", 0, 100)
        .await
        .unwrap()
        .iter()
        .map(|e| e.kind.type_name().to_owned())
        .collect();
    assert!(kinds.contains(&"workflow-retried".to_owned()), "{kinds:?}");
    assert!(matches!(
        engine.retry(&wf_id("flaky"), &ex_id("f-1")).await,
        Err(EngineError::NotRetryable { .. })
    ));
}

#[tokio::test]
async fn a_fork_copies_the_steps_before_its_step_and_runs_the_rest() {
    let engine = Engine::in_memory();
    engine.register(counting()).unwrap();
    let start = ExecuteOptions {
        execution_id: Some(ex_id("c-1")),
        ..Default::default()
    };
    engine
        .execute(&wf_id("count"), json!({}), start)
        .await
        .unwrap();
    let fork = ForkRequest {
        from_step: "three".into(),
        input: Some(json!({"again": true})),
        execution_id: Some(ex_id("c-2")),
    };
    let forked = engine
        .fork(&wf_id("count"), &ex_id("c-1"), fork)
        .await
        .unwrap()
        .finish()
        .await
        .unwrap();
    assert_eq!(forked.state.result(), Some(&json!(3)));
    assert_eq!(forked.input, json!({"again": true}));
    assert_eq!(
        forked.context[FORKED_FROM],
        json!({"executionId": "c-1", "stepId": "three"})
    );
    let bad = ForkRequest {
        from_step: "four".into(),
        input: None,
        execution_id: None,
    };
    assert!(matches!(
        engine.fork(&wf_id("count"), &ex_id("c-1"), bad).await,
        Err(EngineError::UnknownStep { .. })
    ));
}

#[tokio::test]
async fn a_foreach_maps_its_step_over_the_items_in_order_within_its_bound() {
    let engine = Engine::in_memory();
    let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (now, peak) = (running.clone(), most.clone());
    engine
        .register(
            Workflow::new("each", "Each")
                .and_for_each(
                    "square",
                    |ctx| ctx.input["items"].clone(),
                    |ctx| ctx.input["concurrency"].as_u64().unwrap_or(1) as usize,
                    step("one", move |ctx: StepContext| {
                        let (now, peak) = (now.clone(), peak.clone());
                        async move {
                            use std::sync::atomic::Ordering::SeqCst;
                            let n = now.fetch_add(1, SeqCst) + 1;
                            peak.fetch_max(n, SeqCst);
                            let x = ctx.input.as_i64().unwrap_or(0);
                            // Later items finish first: the output keeps the items' order.
                            tokio::time::sleep(Duration::from_millis(20 - 3 * x as u64)).await;
                            now.fetch_sub(1, SeqCst);
                            Ok(json!(x * x))
                        }
                    }),
                )
                .build()
                .unwrap(),
        )
        .unwrap();
    let rec = engine
        .execute(
            &wf_id("each"),
            json!({"items": [1, 2, 3, 4, 5], "concurrency": 2}),
            ExecuteOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(rec.state.result(), Some(&json!([1, 4, 9, 16, 25])));
    assert_eq!(most.load(std::sync::atomic::Ordering::SeqCst), 2);
    assert_eq!(rec.progress.steps["square/4"].output, Some(json!(25)));
    assert_eq!(
        rec.progress.steps["square/4"].parent.as_deref(),
        Some("square")
    );
    let not_array = engine
        .execute(
            &wf_id("each"),
            json!({"items": 3}),
            ExecuteOptions::default(),
        )
        .await
        .unwrap();
    assert!(
        not_array
            .state
            .error()
            .unwrap()
            .contains("maps over an array")
    );
}

/// `approve` in a version: `v1` waits, then answers `{v: 1}`; `v2` has another step list.
fn versioned(version: &str) -> Workflow {
    let builder = Workflow::new("versioned", "Versioned").version(version);
    let builder = if version == "v1" {
        builder.and_then(step("gate", |ctx: StepContext| async move {
            if ctx.resume_data.is_none() {
                return Err(ctx.suspend("wait", None));
            }
            Ok(json!({"v": 1}))
        }))
    } else {
        builder
            .and_then(step(
                "first",
                |_ctx: StepContext| async move { Ok(json!(null)) },
            ))
            .and_then(step("second", |_ctx: StepContext| async move {
                Ok(json!({"v": 2}))
            }))
    };
    builder.build().unwrap()
}

#[tokio::test]
async fn an_execution_continues_only_on_the_version_it_started_on() {
    let store: Arc<dyn ExecutionStore> = Arc::new(InMemoryExecutionStore::new());
    let old = Engine::new(store.clone());
    old.register(versioned("v1")).unwrap();
    let start = ExecuteOptions {
        execution_id: Some(ex_id("vx-1")),
        ..Default::default()
    };
    let rec = old
        .execute(&wf_id("versioned"), json!({}), start)
        .await
        .unwrap();
    assert_eq!(rec.workflow_version.as_deref(), Some("v1"));
    assert_eq!(rec.state.status(), Status::Suspended);

    // A server with only v2 refuses to resume it, naming the version, and starts new ones on v2.
    let new = Engine::new(store.clone());
    new.register(versioned("v2")).unwrap();
    let refused = new
        .resume(&wf_id("versioned"), &ex_id("vx-1"), json!({}), None)
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, EngineError::VersionUnavailable { version, .. } if version == "v1"),
        "{refused}"
    );
    let fresh = new
        .execute(&wf_id("versioned"), json!({}), ExecuteOptions::default())
        .await
        .unwrap();
    assert_eq!(fresh.state.result(), Some(&json!({"v": 2})));

    // A server with both drains v1 and starts new executions on v2 (registered last).
    let both = Engine::new(store.clone());
    both.register(versioned("v1")).unwrap();
    both.register(versioned("v2")).unwrap();
    assert!(matches!(
        both.register(versioned("v2")),
        Err(EngineError::DuplicateWorkflow(_))
    ));
    assert_eq!(both.workflows().len(), 1);
    assert_eq!(both.workflow(&wf_id("versioned")).unwrap().version(), "v2");
    let done = both
        .resume(&wf_id("versioned"), &ex_id("vx-1"), json!({}), None)
        .await
        .unwrap();
    assert_eq!(done.state.result(), Some(&json!({"v": 1})));
    let versions = both.versions_in_flight(&wf_id("versioned")).await.unwrap();
    assert_eq!(
        versions
            .iter()
            .map(|v| (v.version.as_deref(), v.current, v.in_flight))
            .collect::<Vec<_>>(),
        [(Some("v1"), false, 0), (Some("v2"), true, 0)]
    );
}

#[test]
fn a_version_is_declared_or_the_digest_of_the_step_graph() {
    let noop = |id: &str| step(id, |_ctx: StepContext| async move { Ok(json!(null)) });
    let a = Workflow::new("g", "G").and_then(noop("x")).build().unwrap();
    let same = Workflow::new("g", "Renamed")
        .purpose("the same steps")
        .and_then(noop("x"))
        .build()
        .unwrap();
    let other = Workflow::new("g", "G")
        .and_then(noop("x"))
        .and_then(noop("y"))
        .build()
        .unwrap();
    assert!(a.version().starts_with("g-"), "{}", a.version());
    assert_eq!(a.version(), same.version());
    assert_ne!(a.version(), other.version());
    let declared = Workflow::new("g", "G")
        .version("2026-11-25")
        .and_then(noop("x"))
        .build()
        .unwrap();
    assert_eq!(declared.version(), "2026-11-25");
    assert!(
        Workflow::new("g", "G")
            .version("no spaces")
            .and_then(noop("x"))
            .build()
            .is_err()
    );
}

#[tokio::test]
async fn patched_answers_the_recorded_branch_when_the_step_runs_again() {
    let engine = Engine::in_memory();
    engine
        .register(
            Workflow::new("patchy", "Patchy")
                .and_then(step("charge", |ctx: StepContext| async move {
                    let new = ctx.patched("fee-v2").await?;
                    if ctx.resume_data.is_none() {
                        return Err(ctx.suspend("confirm", None));
                    }
                    Ok(json!({"new": new}))
                }))
                .build()
                .unwrap(),
        )
        .unwrap();
    let start = ExecuteOptions {
        execution_id: Some(ex_id("p-1")),
        ..Default::default()
    };
    engine
        .execute(&wf_id("patchy"), json!({}), start)
        .await
        .unwrap();
    // Resumed, the step runs again: the recorded answer (true), not a resumed step's (false).
    let done = engine
        .resume(&wf_id("patchy"), &ex_id("p-1"), json!({}), None)
        .await
        .unwrap();
    assert_eq!(done.state.result(), Some(&json!({"new": true})));
    assert_eq!(
        done.progress.steps["charge/patch-fee-v2"].output,
        Some(json!(true))
    );
}

#[tokio::test]
async fn an_execution_started_before_a_patch_takes_the_old_branch() {
    let store: Arc<dyn ExecutionStore> = Arc::new(InMemoryExecutionStore::new());
    let gate = |patch: bool| {
        Workflow::new("fees", "Fees")
            .version("1")
            .and_then(step("charge", move |ctx: StepContext| async move {
                let new = if patch {
                    ctx.patched("fee-v2").await?
                } else {
                    false
                };
                if ctx.resume_data.is_none() {
                    return Err(ctx.suspend("confirm", None));
                }
                Ok(json!({"new": new}))
            }))
            .build()
            .unwrap()
    };
    let before = Engine::new(store.clone());
    before.register(gate(false)).unwrap();
    let start = |id: &str| ExecuteOptions {
        execution_id: Some(ex_id(id)),
        ..Default::default()
    };
    before
        .execute(&wf_id("fees"), json!({}), start("old"))
        .await
        .unwrap();
    let after = Engine::new(store.clone());
    after.register(gate(true)).unwrap();
    let old = after
        .resume(&wf_id("fees"), &ex_id("old"), json!({}), None)
        .await
        .unwrap();
    assert_eq!(old.state.result(), Some(&json!({"new": false})));
    after
        .execute(&wf_id("fees"), json!({}), start("new"))
        .await
        .unwrap();
    let new = after
        .resume(&wf_id("fees"), &ex_id("new"), json!({}), None)
        .await
        .unwrap();
    assert_eq!(new.state.result(), Some(&json!({"new": true})));
}

/// A queued workflow whose step waits `ms` of its input, failing when `fail` is set and the
/// flag is up.
fn queued_workflow(concurrency: u32, fail: Arc<std::sync::atomic::AtomicBool>) -> Workflow {
    Workflow::new("queued", "Queued")
        .queue(crate::queue::Queue::new("queued").concurrency(concurrency))
        .and_then(step("work", move |ctx: StepContext| {
            let fail = fail.clone();
            async move {
                let ms = ctx.input["ms"].as_u64().unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                if ctx.input["fail"] == json!(true)
                    && fail.load(std::sync::atomic::Ordering::SeqCst)
                {
                    return Err(StepError::Failed("down".into()));
                }
                Ok(json!(ms))
            }
        }))
        .build()
        .unwrap()
}

fn queued_engine(concurrency: u32) -> (Engine, Arc<std::sync::atomic::AtomicBool>) {
    let engine = Engine::in_memory();
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(true));
    engine
        .register(queued_workflow(concurrency, fail.clone()))
        .unwrap();
    (engine, fail)
}

fn named(id: &str) -> ExecuteOptions {
    ExecuteOptions {
        execution_id: Some(ex_id(id)),
        ..Default::default()
    }
}

#[tokio::test]
async fn queued_executions_run_one_at_a_time_within_their_concurrency() {
    let (engine, _) = queued_engine(1);
    let mut handles = Vec::new();
    for i in 0..3 {
        let handle = engine
            .start(
                &wf_id("queued"),
                json!({"ms": 60}),
                named(&format!("q-{i}")),
            )
            .await
            .unwrap();
        assert_eq!(handle.queue_wait, Some(crate::queue::DEFAULT_EXECUTE_WAIT));
        handles.push(handle);
    }
    let mut spans = Vec::new();
    for handle in handles {
        let rec = handle.finish().await.unwrap();
        assert_eq!(rec.state.status(), Status::Completed);
        let work = &rec.progress.steps["work"];
        spans.push((work.started_at, work.ended_at.unwrap()));
        assert!(rec.queue.as_ref().unwrap().started_at.is_some());
    }
    spans.sort();
    for pair in spans.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "two ran at once: {spans:?}");
    }
}

#[tokio::test]
async fn a_queued_execution_is_cancelled_before_it_starts() {
    let (engine, _) = queued_engine(1);
    let first = engine
        .start(&wf_id("queued"), json!({"ms": 300}), named("busy"))
        .await
        .unwrap();
    engine
        .start(&wf_id("queued"), json!({"ms": 0}), named("waiting"))
        .await
        .unwrap();
    let waiting = engine
        .state(&wf_id("queued"), &ex_id("waiting"))
        .await
        .unwrap();
    assert_eq!(waiting.state.status(), Status::Queued);
    let cancelled = engine
        .cancel(
            &wf_id("queued"),
            &ex_id("waiting"),
            Some("not needed".into()),
        )
        .await
        .unwrap();
    assert_eq!(cancelled.state.status(), Status::Cancelled);
    first.finish().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = engine
        .state(&wf_id("queued"), &ex_id("waiting"))
        .await
        .unwrap();
    assert_eq!(after.state.status(), Status::Cancelled);
    assert!(after.progress.steps.is_empty(), "it never started");
}

#[tokio::test]
async fn a_retry_of_a_queued_execution_goes_through_its_queue() {
    let (engine, fail) = queued_engine(1);
    let rec = engine
        .execute(
            &wf_id("queued"),
            json!({"ms": 0, "fail": true}),
            named("r-1"),
        )
        .await
        .unwrap();
    assert_eq!(rec.state.status(), Status::Error);
    fail.store(false, std::sync::atomic::Ordering::SeqCst);
    let handle = engine.retry(&wf_id("queued"), &ex_id("r-1")).await.unwrap();
    let rec = handle.finish().await.unwrap();
    assert_eq!(rec.state.status(), Status::Completed);
    let work = &rec.progress.steps["work"];
    assert_eq!(work.attempt, 2);
    assert!(work.failures[0].execution_retried);
    let log = engine.store().events_after("r-1", 0, 100).await.unwrap();
    let types: Vec<&str> = log.iter().map(|e| e.kind.type_name()).collect();
    assert_eq!(
        types,
        [
            "workflow-queued",
            "workflow-start",
            "step-start",
            "workflow-error",
            "workflow-retried",
            "workflow-queued",
            "workflow-start",
            "step-start",
            "step-complete",
            "workflow-complete"
        ]
    );
}

/// Waits for the first of a payment and a cancellation of its order (both by key).
fn awaiting_payment_or_cancel() -> Workflow {
    Workflow::new("pay-or-cancel", "Pay or cancel")
        .event("payment", json!({"type": "object"}))
        .event("cancel", json!({"type": "object"}))
        .and_then(step("await", |ctx: StepContext| async move {
            let order = ctx.input["orderId"].as_str().unwrap_or_default().to_owned();
            let awaited = [
                crate::state::AwaitedEvent::new("payment", Some(&order)),
                crate::state::AwaitedEvent::new("cancel", Some(&order)),
            ];
            let (which, data) = ctx
                .wait_for_any_event(&awaited, None)
                .await?
                .expect("no deadline");
            Ok(json!({"which": which, "data": data}))
        }))
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_wait_for_any_of_several_events_resumes_on_the_first_that_comes() {
    let engine = Engine::in_memory();
    engine.register(awaiting_payment_or_cancel()).unwrap();
    for id in ["o-1", "o-2"] {
        let start = ExecuteOptions {
            execution_id: Some(ex_id(id)),
            ..Default::default()
        };
        let rec = engine
            .execute(&wf_id("pay-or-cancel"), json!({"orderId": id}), start)
            .await
            .unwrap();
        let s = rec.state.suspension().expect("waits");
        assert_eq!(s.reason, "Waiting for event payment or cancel");
        let wait = s.event.as_ref().unwrap();
        assert_eq!(
            wait.also,
            vec![crate::state::AwaitedEvent::new("cancel", Some(id))]
        );
        assert_eq!(
            rec.waiting_for(),
            Some(format!(r#"[["payment","{id}"],["cancel","{id}"]]"#))
        );
    }
    // The second event, by key: it wakes its order's execution only.
    let sent = engine
        .publish_event("cancel", "o-1", json!({"why": "late"}), None, None, None)
        .await
        .unwrap();
    assert_eq!(sent.woken.len(), 1);
    assert_eq!(sent.woken[0].id, "o-1");
    let done = settle(&engine, "o-1").await;
    assert_eq!(
        done.state.result(),
        Some(&json!({"which": 1, "data": {"why": "late"}}))
    );
    let other = engine.find(&ex_id("o-2")).await.unwrap();
    assert_eq!(other.state.status(), Status::Suspended);
    // The first, delivered to the execution.
    engine
        .deliver_event(
            &wf_id("pay-or-cancel"),
            &ex_id("o-2"),
            EventDelivery {
                name: "payment".into(),
                data: json!({"amount": 3}),
                event_id: None,
            },
        )
        .await
        .unwrap();
    let done = settle(&engine, "o-2").await;
    assert_eq!(
        done.state.result(),
        Some(&json!({"which": 0, "data": {"amount": 3}}))
    );
}

#[tokio::test]
async fn a_wait_for_several_events_takes_one_sent_before_it_waits() {
    let engine = Engine::in_memory();
    engine.register(awaiting_payment_or_cancel()).unwrap();
    engine
        .publish_event("payment", "o-9", json!({"amount": 1}), None, None, None)
        .await
        .unwrap();
    let start = ExecuteOptions {
        execution_id: Some(ex_id("o-9")),
        ..Default::default()
    };
    let rec = engine
        .execute(&wf_id("pay-or-cancel"), json!({"orderId": "o-9"}), start)
        .await
        .unwrap();
    assert_eq!(
        rec.state.result(),
        Some(&json!({"which": 0, "data": {"amount": 1}}))
    );
}

#[test]
fn a_pattern_finds_a_pair_among_several_and_escapes_like_wildcards() {
    use crate::record::{waiting_for_among, waiting_for_several};
    let several = waiting_for_several(&[("a", "k_1"), ("b", "50%")]);
    assert_eq!(several, r#"[["a","k_1"],["b","50%"]]"#);
    assert_eq!(waiting_for_among("a", "k_1"), r#"%["a","k\_1"]%"#);
    assert_eq!(waiting_for_among("b", "50%"), r#"%["b","50\%"]%"#);
}

#[tokio::test]
async fn an_event_starts_one_execution_of_the_workflow_it_starts_per_event_id() {
    let engine = Engine::in_memory();
    engine
        .register(
            Workflow::new("on-order", "On order")
                .started_by(
                    "order",
                    Arc::new(|data: &Value| {
                        (data["total"].as_i64() > Some(0)).then(|| json!({"order": data}))
                    }),
                )
                .and_then(step(
                    "take",
                    |ctx: StepContext| async move { Ok(ctx.input) },
                ))
                .build()
                .unwrap(),
        )
        .unwrap();
    let started = |event_id: &str| {
        let digest = crate::id::digest(&format!("on-order\0order\0{event_id}"));
        ex_id(&format!("on-{digest}"))
    };
    for _ in 0..2 {
        engine
            .publish_unkeyed("order", json!({"total": 5}), "ce-1", None, None)
            .await
            .unwrap();
    }
    engine
        .publish_event(
            "order",
            "k",
            json!({"total": 0}),
            Some("ev-0".into()),
            None,
            None,
        )
        .await
        .unwrap();
    engine
        .publish_event(
            "order",
            "k",
            json!({"total": 2}),
            Some("ev-2".into()),
            None,
            None,
        )
        .await
        .unwrap();
    let first = settle(&engine, started("ce-1").as_str()).await;
    assert_eq!(first.state.result(), Some(&json!({"order": {"total": 5}})));
    let keyed = settle(&engine, started("ev-2").as_str()).await;
    assert_eq!(keyed.state.result(), Some(&json!({"order": {"total": 2}})));
    assert!(engine.find(&started("ev-0")).await.is_err());
}
