//! The schedules' unit tests, on the engine's manual clock (the black-box ones, through the
//! binary on SQLite and PostgreSQL, are the server's `tests/schedules.rs`).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::*;
use agentry_engine::clock::ManualClock;
use agentry_engine::engine::{Engine, EngineConfig};
use agentry_engine::store::{ExecutionStore, InMemoryExecutionStore, ListQuery};
use agentry_engine::workflow::{StepContext, Workflow, step};

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// One replica: an engine and its scheduler on shared stores, reading `clock`.
struct Replica {
    engine: Engine,
    scheduler: Scheduler,
}

fn replica(
    executions: Arc<dyn ExecutionStore>,
    schedules: Arc<dyn ScheduleStore>,
    clock: Arc<ManualClock>,
    node: &str,
) -> Replica {
    let config = EngineConfig {
        node_id: node.into(),
        ..EngineConfig::default()
    };
    let engine = Engine::with(executions, clock, config);
    // `quick` completes at once; `hold` suspends until resumed (an active fire).
    engine
        .register(
            Workflow::new("quick", "Quick")
                .and_then(step("done", |ctx: StepContext| async move {
                    Ok(json!({"schedule": ctx.context.get("schedule").cloned()}))
                }))
                .build()
                .unwrap(),
        )
        .unwrap();
    engine
        .register(
            Workflow::new("hold", "Hold")
                .and_then(step("wait", |ctx: StepContext| async move {
                    if ctx.resume_data.is_some() {
                        return Ok(json!("released"));
                    }
                    Err::<Value, _>(ctx.suspend("held", None))
                }))
                .build()
                .unwrap(),
        )
        .unwrap();
    let scheduler = Scheduler::new(engine.clone(), schedules);
    Replica { engine, scheduler }
}

struct World {
    clock: Arc<ManualClock>,
    executions: Arc<dyn ExecutionStore>,
    replicas: Vec<Replica>,
}

fn world(replicas: usize, start: &str) -> World {
    let clock = Arc::new(ManualClock::new(at(start)));
    let executions: Arc<dyn ExecutionStore> = Arc::new(InMemoryExecutionStore::new());
    let schedules: Arc<dyn ScheduleStore> = Arc::new(InMemoryScheduleStore::new());
    let replicas = (0..replicas)
        .map(|n| {
            replica(
                executions.clone(),
                schedules.clone(),
                clock.clone(),
                &format!("node-{n}"),
            )
        })
        .collect();
    World {
        clock,
        executions,
        replicas,
    }
}

impl World {
    fn scheduler(&self) -> &Scheduler {
        &self.replicas[0].scheduler
    }

    /// Every replica's round, at once.
    async fn round(&self) {
        let rounds = self.replicas.iter().map(|r| r.scheduler.round());
        for r in futures::future::join_all(rounds).await {
            r.unwrap();
        }
        // Let the spawned runs write.
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    async fn advance(&self, secs: u64) {
        self.clock.advance(Duration::from_secs(secs));
    }

    /// Every execution's id, sorted.
    async fn execution_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .executions
            .list(&ListQuery {
                workflow_id: None,
                family: Default::default(),
                status: None,
                owner: None,
                before: None,
                limit: 10_000,
            })
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect();
        ids.sort();
        ids
    }
}

fn every_second(id: &str, workflow: &str) -> ScheduleSpec {
    ScheduleSpec::new(id, workflow, "* * * * * *")
}

#[test]
fn fire_ids_are_the_schedule_and_the_fire_time() {
    assert_eq!(
        fire_execution_id("nightly-report", at("2026-11-27T02:00:00Z")),
        "nightly-report@2026-11-27T02:00:00Z"
    );
    assert_eq!(
        fire_execution_id("s", at("2026-11-27T02:00:00.250123Z")),
        "s@2026-11-27T02:00:00.250Z"
    );
    let longest = "s".repeat(MAX_SCHEDULE_ID_LEN);
    assert!(agentry_engine::id::is_execution_id(&fire_execution_id(
        &longest,
        at("2026-11-27T02:00:00.999Z")
    )));
}

fn schedule_at(cursor: &str, overlap: Overlap, window: u64) -> (Schedule, Timetable) {
    let s = Schedule {
        id: "s".into(),
        workflow_id: "quick".into(),
        cron: "* * * * * *".into(),
        timezone: "UTC".into(),
        input: json!({}),
        overlap,
        catchup_window: Duration::from_secs(window),
        owner: None,
        declared: false,
        paused: false,
        created_at: at(cursor),
        updated_at: at(cursor),
        cursor: at(cursor),
        buffered: None,
        skipped: 0,
        fires: Vec::new(),
        due_at: None,
        version: 1,
    };
    let t = s.timetable().unwrap();
    (s, t)
}

#[test]
fn a_plan_fires_within_the_window_oldest_first_and_skips_what_is_older() {
    let (s, t) = schedule_at("2026-11-27T02:00:00Z", Overlap::Allow, 3);
    let p = plan(&s, &t, at("2026-11-27T02:00:10Z"), false);
    assert_eq!(
        p.fires,
        vec![
            at("2026-11-27T02:00:07Z"),
            at("2026-11-27T02:00:08Z"),
            at("2026-11-27T02:00:09Z"),
            at("2026-11-27T02:00:10Z")
        ]
    );
    assert_eq!(p.skipped, 6);
    assert_eq!(p.cursor, at("2026-11-27T02:00:10Z"));
}

#[test]
fn a_plan_follows_the_overlap_policy() {
    let now = at("2026-11-27T02:00:03Z");
    let (skip, t) = schedule_at("2026-11-27T02:00:00Z", Overlap::Skip, 60);
    let p = plan(&skip, &t, now, false);
    assert_eq!(
        (p.fires.len(), p.skipped),
        (1, 2),
        "the first fires, then it is active"
    );
    let p = plan(&skip, &t, now, true);
    assert_eq!((p.fires.len(), p.skipped), (0, 3));

    let (mut buffer, t) = schedule_at("2026-11-27T02:00:00Z", Overlap::BufferOne, 60);
    let p = plan(&buffer, &t, now, true);
    assert!(p.fires.is_empty());
    assert_eq!(p.buffered, Some(at("2026-11-27T02:00:01Z")));
    assert_eq!(p.skipped, 2);
    // Once the active fire ended, the buffered tick fires first, then the new ones wait.
    buffer.buffered = p.buffered;
    buffer.cursor = p.cursor;
    let p = plan(&buffer, &t, at("2026-11-27T02:00:04Z"), false);
    assert_eq!(p.fires, vec![at("2026-11-27T02:00:01Z")]);
    assert_eq!(p.buffered, Some(at("2026-11-27T02:00:04Z")));

    let (allow, t) = schedule_at("2026-11-27T02:00:00Z", Overlap::Allow, 60);
    let p = plan(&allow, &t, now, true);
    assert_eq!((p.fires.len(), p.skipped), (3, 0));
}

#[test]
fn a_plan_looks_at_a_bounded_number_of_ticks() {
    let (s, t) = schedule_at("2026-11-27T00:00:00Z", Overlap::Allow, 60);
    let now = at("2026-11-28T00:00:00Z");
    let p = plan(&s, &t, now, false);
    assert_eq!(p.skipped, MAX_TICKS_PER_PASS as u64);
    assert!(p.fires.is_empty());
    assert!(p.cursor < now);
}

#[tokio::test]
async fn a_schedule_fires_each_tick_once_with_its_id_and_context() {
    let w = world(1, "2026-11-27T02:00:00.400Z");
    let s = w
        .scheduler()
        .create(every_second("tick", "quick"), None)
        .await
        .unwrap();
    assert_eq!(s.due_at, Some(at("2026-11-27T02:00:01Z")));
    w.round().await;
    assert!(w.execution_ids().await.is_empty(), "no tick is due yet");
    for _ in 0..3 {
        w.advance(1).await;
        w.round().await;
        w.round().await;
    }
    assert_eq!(
        w.execution_ids().await,
        vec![
            "tick@2026-11-27T02:00:01Z",
            "tick@2026-11-27T02:00:02Z",
            "tick@2026-11-27T02:00:03Z"
        ]
    );
    let rec = w
        .executions
        .get("tick@2026-11-27T02:00:02Z")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        rec.context["schedule"],
        json!({"id": "tick", "fireTime": "2026-11-27T02:00:02Z"})
    );
    let s = w.scheduler().get("tick").await.unwrap();
    assert_eq!(s.fires.len(), 3);
    assert!(s.fires.iter().all(|f| f.state != FireState::Pending));
    assert_eq!(s.skipped, 0);
    assert_eq!(s.due_at, Some(at("2026-11-27T02:00:04Z")));
}

#[tokio::test]
async fn replicas_racing_for_the_same_ticks_fire_each_once() {
    let w = world(3, "2026-11-27T02:00:00Z");
    w.scheduler()
        .create(every_second("race", "quick"), None)
        .await
        .unwrap();
    for _ in 0..5 {
        w.advance(1).await;
        w.round().await;
    }
    let ids = w.execution_ids().await;
    assert_eq!(ids.len(), 5, "{ids:?}");
    let s = w.scheduler().get("race").await.unwrap();
    assert_eq!(s.fires.len(), 5);
    assert_eq!(s.skipped, 0);
}

#[tokio::test]
async fn missed_ticks_are_caught_up_within_the_window_and_skipped_beyond_it() {
    let w = world(1, "2026-11-27T02:00:00Z");
    w.scheduler()
        .create(
            every_second("late", "quick")
                .overlap(Overlap::Allow)
                .catchup_window(Duration::from_secs(3)),
            None,
        )
        .await
        .unwrap();
    // No round for ten seconds: no server ran.
    w.advance(10).await;
    w.round().await;
    assert_eq!(
        w.execution_ids().await,
        vec![
            "late@2026-11-27T02:00:07Z",
            "late@2026-11-27T02:00:08Z",
            "late@2026-11-27T02:00:09Z",
            "late@2026-11-27T02:00:10Z"
        ]
    );
    assert_eq!(w.scheduler().get("late").await.unwrap().skipped, 6);
}

#[tokio::test]
async fn skip_and_buffer_one_wait_for_the_active_fire() {
    let w = world(1, "2026-11-27T02:00:00Z");
    let sch = w.scheduler();
    sch.create(every_second("skip", "hold"), None)
        .await
        .unwrap();
    sch.create(
        every_second("buffer", "hold").overlap(Overlap::BufferOne),
        None,
    )
    .await
    .unwrap();
    for _ in 0..4 {
        w.advance(1).await;
        w.round().await;
    }
    let skip = sch.get("skip").await.unwrap();
    assert_eq!((skip.fires.len(), skip.skipped), (1, 3));
    let buffer = sch.get("buffer").await.unwrap();
    assert_eq!((buffer.fires.len(), buffer.skipped), (1, 2));
    assert_eq!(buffer.buffered, Some(at("2026-11-27T02:00:02Z")));
    // The held fire ends: the buffered tick fires at the next round, with its own time.
    let engine = &w.replicas[0].engine;
    engine
        .resume(
            &"hold".into(),
            &"buffer@2026-11-27T02:00:01Z".into(),
            json!({}),
            None,
        )
        .await
        .unwrap();
    w.advance(1).await;
    w.round().await;
    let buffer = sch.get("buffer").await.unwrap();
    let ids: Vec<&str> = buffer
        .fires
        .iter()
        .map(|f| f.execution_id.as_str())
        .collect();
    assert_eq!(
        ids,
        vec!["buffer@2026-11-27T02:00:01Z", "buffer@2026-11-27T02:00:02Z"]
    );
    assert_eq!(buffer.buffered, Some(at("2026-11-27T02:00:05Z")));
    assert_eq!(buffer.skipped, 2);
}

/// Waits (in real time: the manual clock stands still) until `done` holds of the executions.
async fn until_executions(w: &World, what: &str, done: impl Fn(&[String]) -> bool) {
    for _ in 0..200 {
        if done(&w.execution_ids().await) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what}: never; {:?}", w.execution_ids().await);
}

/// Buffers a tick of a `buffer-one` schedule `buffer` of `hold`: its first fire
/// (`02:00:01`) holds, the tick `02:00:02` waits.
async fn buffered_world() -> World {
    let w = world(1, "2026-11-27T02:00:00Z");
    w.scheduler()
        .create(
            every_second("buffer", "hold").overlap(Overlap::BufferOne),
            None,
        )
        .await
        .unwrap();
    for _ in 0..2 {
        w.advance(1).await;
        w.round().await;
    }
    let buffer = w.scheduler().get("buffer").await.unwrap();
    assert_eq!(buffer.buffered, Some(at("2026-11-27T02:00:02Z")));
    w
}

async fn release(w: &World, execution: &str) {
    w.replicas[0]
        .engine
        .resume(&"hold".into(), &execution.into(), json!({}), None)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_buffered_tick_fires_as_its_fire_ends_not_at_the_next_round() {
    let w = buffered_world().await;
    let sch = w.scheduler().clone();
    let running = tokio::spawn(async move { sch.run().await });
    // The loop's first round changes nothing; the clock never moves from here.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(w.execution_ids().await, vec!["buffer@2026-11-27T02:00:01Z"]);
    release(&w, "buffer@2026-11-27T02:00:01Z").await;
    until_executions(&w, "the buffered tick fires", |ids| {
        ids.contains(&"buffer@2026-11-27T02:00:02Z".to_owned())
    })
    .await;
    running.abort();
    let buffer = w.scheduler().get("buffer").await.unwrap();
    assert_eq!(buffer.buffered, None);
}

#[tokio::test]
async fn a_tick_buffered_before_a_pause_fires_at_the_unpause() {
    let w = buffered_world().await;
    let sch = w.scheduler();
    sch.set_paused("buffer", true).await.unwrap();
    release(&w, "buffer@2026-11-27T02:00:01Z").await;
    for _ in 0..3 {
        w.advance(1).await;
        w.round().await;
    }
    assert_eq!(
        w.execution_ids().await,
        vec!["buffer@2026-11-27T02:00:01Z"],
        "paused: nothing fires"
    );
    let paused = sch.get("buffer").await.unwrap();
    assert_eq!(paused.buffered, Some(at("2026-11-27T02:00:02Z")));
    // Nothing is active any more: the unpause fires it at once; the ticks of the pause are
    // not caught up.
    let unpaused = sch.set_paused("buffer", false).await.unwrap();
    assert_eq!(unpaused.buffered, None);
    assert_eq!(
        w.execution_ids().await,
        vec!["buffer@2026-11-27T02:00:01Z", "buffer@2026-11-27T02:00:02Z"]
    );
}

#[tokio::test]
async fn pause_trigger_backfill_and_delete() {
    let w = world(1, "2026-11-27T02:00:00Z");
    let sch = w.scheduler();
    sch.create(
        every_second("p", "quick")
            .paused(true)
            .overlap(Overlap::Allow),
        None,
    )
    .await
    .unwrap();
    w.advance(3).await;
    w.round().await;
    assert!(w.execution_ids().await.is_empty(), "paused: nothing fires");
    let fire = sch.trigger("p").await.unwrap();
    assert_eq!(fire.execution_id, "p@2026-11-27T02:00:03Z");
    assert_eq!(fire.origin, FireOrigin::Trigger);
    // Unpaused: the ticks of the pause are not caught up.
    sch.set_paused("p", false).await.unwrap();
    w.advance(1).await;
    w.round().await;
    assert_eq!(
        w.execution_ids().await,
        vec!["p@2026-11-27T02:00:03Z", "p@2026-11-27T02:00:04Z"]
    );
    let done = sch
        .backfill("p", at("2026-11-27T02:00:01Z"), at("2026-11-27T02:00:04Z"))
        .await
        .unwrap();
    assert_eq!((done.ticks, done.started.len()), (4, 2));
    let again = sch
        .backfill("p", at("2026-11-27T02:00:01Z"), at("2026-11-27T02:00:04Z"))
        .await
        .unwrap();
    assert_eq!((again.ticks, again.started.len()), (4, 0));
    assert_eq!(w.execution_ids().await.len(), 4);
    let too_many = sch
        .backfill("p", at("2026-11-26T00:00:00Z"), at("2026-11-27T02:00:00Z"))
        .await;
    assert!(matches!(
        too_many,
        Err(ScheduleError::InvalidBackfill { field: "to", .. })
    ));
    let future = sch
        .backfill("p", at("2026-11-27T02:00:00Z"), at("2026-11-28T00:00:00Z"))
        .await;
    assert!(matches!(future, Err(ScheduleError::InvalidBackfill { .. })));
    sch.delete("p").await.unwrap();
    assert!(matches!(
        sch.get("p").await,
        Err(ScheduleError::NotFound(_))
    ));
    assert!(matches!(
        sch.delete("p").await,
        Err(ScheduleError::NotFound(_))
    ));
}

#[tokio::test]
async fn a_pending_fire_left_by_a_dead_decider_is_started_after_the_grace() {
    let w = world(1, "2026-11-27T02:00:00Z");
    let sch = w.scheduler();
    let mut s = sch
        .create(every_second("orphan", "quick").paused(true), None)
        .await
        .unwrap();
    // Another process decided this fire, then died before starting it.
    s.fires.push(Fire::new(
        "orphan",
        at("2026-11-27T02:00:00Z"),
        FireOrigin::Schedule,
        FireState::Pending,
        at("2026-11-27T02:00:00Z"),
    ));
    let expected = s.version;
    s.version += 1;
    s.due_at = s.next_due(&s.timetable().unwrap(), at("2026-11-27T02:00:00Z"));
    assert!(sch.store().compare_and_set(&s, expected).await.unwrap());
    w.advance(1).await;
    w.round().await;
    assert!(w.execution_ids().await.is_empty(), "left to its decider");
    w.advance(5).await;
    w.round().await;
    assert_eq!(w.execution_ids().await, vec!["orphan@2026-11-27T02:00:00Z"]);
    let s = sch.get("orphan").await.unwrap();
    assert_eq!(s.fires[0].state, FireState::Started);
    assert_eq!(s.due_at, None, "paused, nothing pending");
}

#[tokio::test]
async fn bad_schedules_name_their_field() {
    let w = world(1, "2026-11-27T02:00:00Z");
    let sch = w.scheduler();
    let cases = [
        (every_second("bad id!", "quick"), "id"),
        (every_second("x", "nope"), "workflowId"),
        (every_second("x", "agent:assistant"), "workflowId"),
        (every_second("x", &"w".repeat(10_000)), "workflowId"),
        (ScheduleSpec::new("x", "quick", "every day"), "cron"),
        (
            every_second("x", "quick").timezone("Nowhere/Else"),
            "timezone",
        ),
        (
            every_second("x", "quick").catchup_window(Duration::ZERO),
            "catchupWindow",
        ),
        (
            every_second("x", "quick").input(json!({"big": "x".repeat(MAX_INPUT_BYTES)})),
            "input",
        ),
    ];
    for (spec, field) in cases {
        match sch.create(spec, None).await {
            Err(ScheduleError::Invalid { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    sch.create(every_second("x", "quick"), None).await.unwrap();
    assert!(matches!(
        sch.create(every_second("x", "quick"), None).await,
        Err(ScheduleError::Exists(_))
    ));
}

#[tokio::test]
async fn a_declared_schedule_keeps_its_state_across_starts() {
    let w = world(1, "2026-11-27T02:00:00Z");
    let sch = w.scheduler();
    sch.declare(every_second("host", "quick").paused(true));
    sch.start().await.unwrap().abort();
    sch.set_paused("host", false).await.unwrap();
    // The next start declares it again, with a new definition: the state stays.
    sch.declare(
        every_second("host", "quick")
            .paused(true)
            .overlap(Overlap::Allow),
    );
    sch.start().await.unwrap().abort();
    let s = sch.get("host").await.unwrap();
    assert!(!s.paused);
    assert!(s.declared);
    assert_eq!(s.overlap, Overlap::Allow);
}
