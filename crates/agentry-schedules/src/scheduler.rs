//! The [`Scheduler`]: the schedules' operations (create, declare, read, pause, delete, trigger,
//! backfill) and the loop every replica runs, which fires the schedules that fall due.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde_json::{Map, Value, json};
use tokio::sync::Notify;
use tokio::sync::broadcast::{
    self,
    error::{RecvError, TryRecvError},
};
use tokio::task::JoinHandle;

use super::{
    DEFAULT_MAX_SCHEDULES_PER_USER, Fire, FireOrigin, FireState, MAX_BACKFILL_TICKS,
    MAX_CATCHUP_WINDOW, MAX_FIRES_PER_PASS, MAX_INPUT_BYTES, MAX_SCHEDULE_ID_LEN, MAX_SCHEDULES,
    MIN_CATCHUP_WINDOW, Schedule, ScheduleError, ScheduleSpec, ScheduleStore, Timetable,
    fire_time_text, plan, truncate_to_millis,
};
use agentry_engine::engine::{Engine, EngineError, ExecuteOptions, WAKE_ALL};
use agentry_engine::id::{UserId, WorkflowId};
use agentry_engine::state::Status;
use agentry_engine::store::StoreError;

/// How long a pending fire is left to the process that decided it before any other starts it
/// (the decider died between its decision and the start).
pub const PENDING_GRACE: Duration = Duration::from_secs(5);

/// How many due schedules one round of the loop reads.
const DUE_BATCH: u32 = 100;
/// How many due schedules one round handles at once.
const PASSES_AT_ONCE: usize = 8;
/// How many fires of one backfill start at once.
const BACKFILL_STARTS_AT_ONCE: usize = 16;
/// How many times a change re-reads a schedule that another write changed first.
const CAS_TRIES: usize = 20;
/// A round of the loop begins this long after each whole second (ticks fall on whole seconds).
const AFTER_THE_SECOND: Duration = Duration::from_millis(5);

/// What a backfill did.
#[derive(Debug, Clone)]
pub struct Backfill {
    /// The ticks of the range.
    pub ticks: usize,
    /// The fires it started (the others already had their execution).
    pub started: Vec<Fire>,
}

/// The schedules of an engine: their operations and the loop that fires them. Cheap to clone.
#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    store: Arc<dyn ScheduleStore>,
    /// The host's schedules, written to the store by [`Scheduler::start`].
    declared: Mutex<Vec<ScheduleSpec>>,
    /// Wakes the loop at once (a schedule created or unpaused here).
    wake: Notify,
    /// The most schedules one user creates.
    max_per_user: u64,
    /// The active fires that a buffered tick waits for (`buffer-one`), by execution id: the
    /// schedule whose pass runs as soon as one of them is written (it may have ended).
    watched: Mutex<HashMap<String, String>>,
}

/// Whether a fire's start failed for a passing reason (the database, a drain): it stays
/// pending and is started again later.
fn passing(e: &EngineError) -> bool {
    match e {
        EngineError::Store(StoreError::Invalid(_) | StoreError::Duplicate(_)) => false,
        EngineError::Store(_)
        | EngineError::ShuttingDown
        | EngineError::Contention(_)
        | EngineError::LeaseLost(_)
        | EngineError::HandedOver(_) => true,
        _ => false,
    }
}

impl Scheduler {
    /// The schedules of `engine`, kept in `store`, read on the engine's clock, at most
    /// [`DEFAULT_MAX_SCHEDULES_PER_USER`] for each user.
    pub fn new(engine: Engine, store: Arc<dyn ScheduleStore>) -> Self {
        Self::made(engine, store, Vec::new(), DEFAULT_MAX_SCHEDULES_PER_USER)
    }

    fn made(
        engine: Engine,
        store: Arc<dyn ScheduleStore>,
        declared: Vec<ScheduleSpec>,
        max_per_user: u64,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                engine,
                store,
                declared: Mutex::new(declared),
                wake: Notify::new(),
                max_per_user,
                watched: Mutex::default(),
            }),
        }
    }

    /// The declared schedules so far.
    fn declared(&self) -> Vec<ScheduleSpec> {
        self.inner
            .declared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The same schedules kept in `store` instead (the declared ones go with them).
    pub fn with_store(&self, store: Arc<dyn ScheduleStore>) -> Self {
        let i = &self.inner;
        Self::made(i.engine.clone(), store, self.declared(), i.max_per_user)
    }

    /// The same schedules, each user creating at most `max` of them (under the server's
    /// [`MAX_SCHEDULES`]); a host's declared schedules are no user's.
    pub fn with_max_per_user(&self, max: u64) -> Self {
        let i = &self.inner;
        Self::made(i.engine.clone(), i.store.clone(), self.declared(), max)
    }

    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    pub fn store(&self) -> &Arc<dyn ScheduleStore> {
        &self.inner.store
    }

    fn now(&self) -> DateTime<Utc> {
        self.inner.engine.clock().now()
    }

    /// A schedule of the host's, written to the store when the scheduler starts: created (with
    /// the spec's `paused`) if it is not there, else given this definition and left in its state
    /// (paused or not, its fires and skips).
    pub fn declare(&self, spec: ScheduleSpec) {
        self.inner
            .declared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(spec);
    }

    /// Writes the declared schedules, then runs the loop until the engine drains.
    pub async fn start(&self) -> Result<JoinHandle<()>, ScheduleError> {
        let declared = std::mem::take(
            &mut *self
                .inner
                .declared
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        for spec in declared {
            self.write_declared(spec).await?;
        }
        let this = self.clone();
        Ok(tokio::spawn(async move { this.run().await }))
    }

    async fn write_declared(&self, spec: ScheduleSpec) -> Result<(), ScheduleError> {
        let mut wanted = self.validate(spec, None)?;
        wanted.declared = true;
        match self.inner.store.insert(&wanted).await {
            Ok(()) => return Ok(()),
            Err(StoreError::Duplicate(_)) => {}
            Err(e) => return Err(e.into()),
        }
        self.update(&wanted.id, |s| {
            if !s.same_definition(&wanted) || !s.declared {
                s.workflow_id = wanted.workflow_id.clone();
                s.cron = wanted.cron.clone();
                s.timezone = wanted.timezone.clone();
                s.input = wanted.input.clone();
                s.overlap = wanted.overlap;
                s.catchup_window = wanted.catchup_window;
                s.declared = true;
            }
            Ok(())
        })
        .await
        .map(drop)
    }

    /// Checks a spec and makes the schedule it asks for, handling the ticks after now.
    fn validate(
        &self,
        spec: ScheduleSpec,
        owner: Option<UserId>,
    ) -> Result<Schedule, ScheduleError> {
        let id = match spec.id {
            Some(id) => check_id(id)?,
            None => uuid::Uuid::now_v7().to_string(),
        };
        if !agentry_engine::id::is_valid_id(&spec.workflow_id) {
            return Err(ScheduleError::invalid(
                "workflowId",
                "no workflow has such an id (1 to 128 letters, digits, '-', '_' or '.')",
            ));
        }
        let workflow = self
            .inner
            .engine
            .workflow(&spec.workflow_id)
            .filter(|w| !w.is_internal())
            .ok_or_else(|| {
                ScheduleError::invalid(
                    "workflowId",
                    format!("workflow {} not found", spec.workflow_id),
                )
            })?;
        let size = serde_json::to_vec(&spec.input).map_or(usize::MAX, |b| b.len());
        if size > MAX_INPUT_BYTES {
            return Err(ScheduleError::invalid(
                "input",
                format!("{size} bytes of JSON, more than {MAX_INPUT_BYTES}"),
            ));
        }
        workflow
            .validate_input(&spec.input)
            .map_err(|e| ScheduleError::invalid("input", e))?;
        let timetable = Timetable::parse(&spec.cron, &spec.timezone)?;
        if !(MIN_CATCHUP_WINDOW..=MAX_CATCHUP_WINDOW).contains(&spec.catchup_window) {
            return Err(ScheduleError::invalid(
                "catchupWindow",
                format!(
                    "from {}s to {}d",
                    MIN_CATCHUP_WINDOW.as_secs(),
                    MAX_CATCHUP_WINDOW.as_secs() / 86_400
                ),
            ));
        }
        let now = truncate_to_millis(self.now());
        let mut schedule = Schedule {
            id,
            workflow_id: spec.workflow_id.into_string(),
            cron: spec.cron,
            timezone: spec.timezone,
            input: spec.input,
            overlap: spec.overlap,
            catchup_window: spec.catchup_window,
            owner: owner.map(UserId::into_string),
            declared: false,
            paused: spec.paused,
            created_at: now,
            updated_at: now,
            cursor: now,
            buffered: None,
            skipped: 0,
            fires: Vec::new(),
            due_at: None,
            version: 1,
        };
        schedule.due_at = schedule.next_due(&timetable, now);
        Ok(schedule)
    }

    /// Creates a schedule owned by `owner` (its fires are theirs), within the server's limit
    /// and the owner's. (Concurrent creations may pass a limit by as many as run at once.)
    pub async fn create(
        &self,
        spec: ScheduleSpec,
        owner: Option<UserId>,
    ) -> Result<Schedule, ScheduleError> {
        let schedule = self.validate(spec, owner)?;
        let store = &self.inner.store;
        if store.count(None).await? >= MAX_SCHEDULES {
            return Err(ScheduleError::Limit);
        }
        if let Some(owner) = &schedule.owner
            && store.count(Some(owner)).await? >= self.inner.max_per_user
        {
            return Err(ScheduleError::UserLimit(self.inner.max_per_user));
        }
        match self.inner.store.insert(&schedule).await {
            Err(StoreError::Duplicate(_)) => return Err(ScheduleError::Exists(schedule.id)),
            other => other?,
        }
        tracing::info!(schedule_id = %schedule.id, workflow_id = %schedule.workflow_id, cron = %schedule.cron, "schedule created");
        self.inner.wake.notify_one();
        Ok(schedule)
    }

    pub async fn get(&self, id: &str) -> Result<Schedule, ScheduleError> {
        self.inner
            .store
            .get(id)
            .await?
            .ok_or_else(|| ScheduleError::NotFound(id.to_owned()))
    }

    /// Every schedule (only `owner`'s when given), by id.
    pub async fn list(&self, owner: Option<&UserId>) -> Result<Vec<Schedule>, ScheduleError> {
        Ok(self.inner.store.list(owner.map(UserId::as_str)).await?)
    }

    /// Deletes a schedule; its executions stay.
    pub async fn delete(&self, id: &str) -> Result<(), ScheduleError> {
        self.forget(id);
        if self.inner.store.delete(id).await? {
            tracing::info!(schedule_id = %id, "schedule deleted");
            Ok(())
        } else {
            Err(ScheduleError::NotFound(id.to_owned()))
        }
    }

    /// Pauses (it fires nothing; a trigger still does) or unpauses a schedule. Unpausing
    /// starts from the next tick: the ticks of the pause are not caught up (a backfill fires
    /// them if wanted). A tick buffered before the pause (`buffer-one`) stays buffered through
    /// it: the unpause fires it at once when nothing is active any more, else as the active
    /// fire ends.
    pub async fn set_paused(&self, id: &str, paused: bool) -> Result<Schedule, ScheduleError> {
        let now = self.now();
        let schedule = self
            .update(id, |s| {
                if s.paused && !paused {
                    s.cursor = s.cursor.max(truncate_to_millis(now));
                }
                s.paused = paused;
                Ok(())
            })
            .await?;
        tracing::info!(schedule_id = %id, paused, "schedule paused or unpaused");
        self.inner.wake.notify_one();
        if paused || schedule.buffered.is_none() {
            return Ok(schedule);
        }
        match self.pass(id).await {
            Ok(()) => self.get(id).await,
            Err(e) => {
                // The loop's next round passes it again.
                tracing::warn!(schedule_id = %id, error = %e, "schedules: a pass failed");
                Ok(schedule)
            }
        }
    }

    /// Fires a schedule now (also when paused), whatever its overlap policy.
    pub async fn trigger(&self, id: &str) -> Result<Fire, ScheduleError> {
        let schedule = self.get(id).await?;
        let now = truncate_to_millis(self.now());
        let fire = Fire::new(id, now, FireOrigin::Trigger, FireState::Started, now);
        self.start_fire(&schedule, &fire).await?;
        let recorded = fire.clone();
        self.update(id, move |s| {
            s.record(recorded.clone());
            Ok(())
        })
        .await?;
        tracing::info!(schedule_id = %id, execution_id = %fire.execution_id, "schedule triggered");
        Ok(fire)
    }

    /// Fires every tick from `from` to `to` (both included) that has no execution yet: a
    /// repeated backfill fires nothing more. At most [`MAX_BACKFILL_TICKS`] ticks; `to` not in
    /// the future.
    pub async fn backfill(
        &self,
        id: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Backfill, ScheduleError> {
        let schedule = self.get(id).await?;
        let now = self.now();
        if to < from {
            return Err(ScheduleError::invalid_backfill("to", "is before from"));
        }
        if to > now {
            return Err(ScheduleError::invalid_backfill(
                "to",
                "is in the future: a backfill fires ticks that have passed",
            ));
        }
        let ticks = ticks_between(&schedule.timetable()?, from, to, MAX_BACKFILL_TICKS + 1);
        if ticks.len() > MAX_BACKFILL_TICKS {
            return Err(ScheduleError::invalid_backfill(
                "to",
                format!(
                    "the range holds more than {MAX_BACKFILL_TICKS} ticks: backfill a shorter one at a time"
                ),
            ));
        }
        let decided_at = truncate_to_millis(now);
        let outcomes: Vec<Result<Option<Fire>, ScheduleError>> = futures::stream::iter(&ticks)
            .map(|tick| {
                let fire = Fire::new(
                    id,
                    *tick,
                    FireOrigin::Backfill,
                    FireState::Started,
                    decided_at,
                );
                self.backfill_one(&schedule, fire)
            })
            .buffered(BACKFILL_STARTS_AT_ONCE)
            .collect()
            .await;
        let mut started = Vec::new();
        let mut failure = None;
        for outcome in outcomes {
            match outcome {
                Ok(Some(fire)) => started.push(fire),
                Ok(None) => {}
                Err(e) => failure = failure.or(Some(e)),
            }
        }
        if !started.is_empty() {
            let recorded = started.clone();
            self.update(id, move |s| {
                for fire in &recorded {
                    s.record(fire.clone());
                }
                Ok(())
            })
            .await?;
        }
        tracing::info!(schedule_id = %id, ticks = ticks.len(), started = started.len(), "schedule backfilled");
        match failure {
            Some(e) => Err(e),
            None => Ok(Backfill {
                ticks: ticks.len(),
                started,
            }),
        }
    }

    /// Starts a backfilled tick unless its execution exists: `None` when it does.
    async fn backfill_one(
        &self,
        schedule: &Schedule,
        fire: Fire,
    ) -> Result<Option<Fire>, ScheduleError> {
        let store = self.inner.engine.store();
        if store.get(&fire.execution_id).await?.is_some() {
            return Ok(None);
        }
        self.start_fire(schedule, &fire).await?;
        Ok(Some(fire))
    }

    /// The status of each fire's execution now (`None`: it has none: pending, failed, or
    /// deleted).
    pub async fn fire_statuses(
        &self,
        schedule: &Schedule,
    ) -> Result<Vec<Option<Status>>, ScheduleError> {
        let store = self.inner.engine.store();
        let reads = schedule.fires.iter().map(|f| async move {
            match f.state {
                FireState::Pending | FireState::Failed { .. } => Ok(None),
                _ => Ok(store.get(&f.execution_id).await?.map(|r| r.state.status())),
            }
        });
        futures::future::join_all(reads).await.into_iter().collect()
    }

    /// Starts the execution of `fire`: the schedule's workflow and input, owned by the
    /// schedule's owner, its context naming the schedule and the fire time
    /// (`context.schedule = {id, fireTime}`). Idempotent: the same fire again rejoins it.
    async fn start_fire(&self, schedule: &Schedule, fire: &Fire) -> Result<(), EngineError> {
        let mut context = Map::new();
        context.insert(
            "schedule".into(),
            json!({"id": schedule.id, "fireTime": fire_time_text(fire.fire_time)}),
        );
        let owner = schedule.owner.clone().map(UserId::from);
        if let Some(owner) = &owner {
            context.insert("userId".into(), Value::String(owner.to_string()));
        }
        let options = ExecuteOptions {
            execution_id: Some(fire.execution_id.clone().into()),
            user_id: owner.clone(),
            context,
            owner,
            last_event_id: None,
            priority: None,
            version: None,
        };
        self.inner
            .engine
            .start(
                &WorkflowId::from(&schedule.workflow_id),
                schedule.input.clone(),
                options,
            )
            .await
            .map(drop)
    }

    /// Reads `id`, changes it with `change` and writes it back (a compare-and-set on its
    /// version, re-read and re-applied when another write came first).
    async fn update(
        &self,
        id: &str,
        mut change: impl FnMut(&mut Schedule) -> Result<(), ScheduleError>,
    ) -> Result<Schedule, ScheduleError> {
        for _ in 0..CAS_TRIES {
            let mut schedule = self.get(id).await?;
            let expected = schedule.version;
            change(&mut schedule)?;
            if self.write(&mut schedule, expected).await? {
                return Ok(schedule);
            }
        }
        Err(ScheduleError::Contention(id.to_owned()))
    }

    /// Writes a changed schedule over version `expected`: its next due time, its new version.
    async fn write(&self, schedule: &mut Schedule, expected: i64) -> Result<bool, ScheduleError> {
        let now = truncate_to_millis(self.now());
        schedule.updated_at = now;
        schedule.due_at = schedule.next_due(&schedule.timetable()?, now);
        schedule.version = expected + 1;
        Ok(self.inner.store.compare_and_set(schedule, expected).await?)
    }

    /// The loop every replica runs: a round at each whole second (ticks fall on whole seconds),
    /// or at once when a schedule is created or unpaused here; between rounds, the pass of a
    /// schedule whose buffered tick waits for a fire as soon as that fire's execution is written
    /// (here or, on PostgreSQL, by any replica): the buffered tick starts as the fire ends, not
    /// at the next round. Until the engine drains.
    pub async fn run(&self) {
        let drain = self.inner.engine.drain_signal();
        let clock = self.inner.engine.clock().clone();
        let mut wakeups = self.inner.engine.subscribe_wakeups();
        'rounds: loop {
            if drain.is_cancelled() {
                break;
            }
            if let Err(e) = self.round().await {
                tracing::warn!(error = %e, "schedules: a round failed; trying again");
            }
            let now = clock.now();
            let next = DateTime::from_timestamp(now.timestamp() + 1, 0).unwrap_or(now)
                + chrono::Duration::from_std(AFTER_THE_SECOND).unwrap_or_default();
            loop {
                let woken = tokio::select! {
                    _ = drain.cancelled() => break 'rounds,
                    _ = clock.sleep_until(next) => break,
                    _ = self.inner.wake.notified() => break,
                    woken = wakeups.recv() => woken,
                };
                if !self.pass_woken(woken, &mut wakeups).await {
                    break 'rounds;
                }
            }
        }
        tracing::info!("schedules: stopped (the server drains)");
    }

    /// The passes of the schedules whose watched fires were written, by the wake-up `first`
    /// and those that came meanwhile: one pass per schedule for them all. `false` when the
    /// engine's wake-ups are over.
    async fn pass_woken(
        &self,
        first: Result<Arc<str>, RecvError>,
        wakeups: &mut broadcast::Receiver<Arc<str>>,
    ) -> bool {
        let mut woken = vec![first];
        loop {
            match wakeups.try_recv() {
                Ok(id) => woken.push(Ok(id)),
                Err(TryRecvError::Lagged(n)) => woken.push(Err(RecvError::Lagged(n))),
                Err(_) => break,
            }
        }
        let mut schedules = Vec::new();
        for w in woken {
            match w {
                Ok(id) => schedules.extend(self.watching(Some(&id))),
                // Some were missed: any watched fire may have ended.
                Err(RecvError::Lagged(_)) => schedules.extend(self.watching(None)),
                Err(RecvError::Closed) => return false,
            }
        }
        schedules.sort();
        schedules.dedup();
        for id in schedules {
            if let Err(e) = self.pass(&id).await {
                tracing::warn!(schedule_id = %id, error = %e, "schedules: a pass failed");
            }
        }
        true
    }

    /// The schedules whose buffered tick waits for the execution `woken` (`None` or
    /// [`WAKE_ALL`]: any execution).
    fn watching(&self, woken: Option<&str>) -> Vec<String> {
        let watched = self.inner.watched.lock().unwrap_or_else(|p| p.into_inner());
        match woken.filter(|id| *id != WAKE_ALL) {
            Some(id) => watched.get(id).cloned().into_iter().collect(),
            None => watched.values().cloned().collect(),
        }
    }

    /// Stops watching the fires of the schedule `id` (deleted).
    fn forget(&self, id: &str) {
        self.inner
            .watched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|_, s| s != id);
    }

    /// Watches the active fires of `schedule` while a tick of it is buffered, for the loop to
    /// pass it as soon as one of them is written.
    fn watch(&self, schedule: &Schedule) {
        let mut watched = self.inner.watched.lock().unwrap_or_else(|p| p.into_inner());
        watched.retain(|_, id| *id != schedule.id);
        if schedule.buffered.is_some() {
            for fire in schedule.fires.iter().filter(|f| f.is_active()) {
                watched.insert(fire.execution_id.clone(), schedule.id.clone());
            }
        }
    }

    /// One round: every schedule due now gets its pass. Answers how many were due.
    pub async fn round(&self) -> Result<usize, ScheduleError> {
        let due = self.inner.store.due(self.now(), DUE_BATCH).await?;
        let count = due.len();
        futures::stream::iter(due)
            .for_each_concurrent(PASSES_AT_ONCE, |id| async move {
                if let Err(e) = self.pass(&id).await {
                    tracing::warn!(schedule_id = %id, error = %e, "schedules: a pass failed");
                }
            })
            .await;
        Ok(count)
    }

    /// One schedule's pass: the fires seen to end, the decision of [`plan`] written (one
    /// replica's wins; the others re-read it), then the starts of the fires it decided and of
    /// pending fires left past their grace, then their outcomes.
    pub async fn pass(&self, id: &str) -> Result<(), ScheduleError> {
        let mut decided = Vec::new();
        let mut written = None;
        for _ in 0..CAS_TRIES {
            let Some(mut schedule) = self.inner.store.get(id).await? else {
                self.forget(id);
                return Ok(());
            };
            let ended = self.ended_fires(&schedule).await?;
            let before = schedule.clone();
            decided = advance(&mut schedule, &ended, self.now())?;
            if schedule == before || self.write(&mut schedule, before.version).await? {
                written = Some(schedule);
                break;
            }
        }
        let schedule = written.ok_or_else(|| ScheduleError::Contention(id.to_owned()))?;
        self.watch(&schedule);
        let grace = chrono::Duration::from_std(PENDING_GRACE).unwrap_or_default();
        let now = self.now();
        let to_start: Vec<&Fire> = schedule
            .fires
            .iter()
            .filter(|f| f.state == FireState::Pending)
            .filter(|f| decided.contains(&f.execution_id) || f.decided_at + grace <= now)
            .collect();
        if to_start.is_empty() {
            return Ok(());
        }
        let starts = to_start.iter().map(|fire| async {
            let outcome = match self.start_fire(&schedule, fire).await {
                Ok(()) => Some(FireState::Started),
                Err(e) if passing(&e) => {
                    tracing::warn!(execution_id = %fire.execution_id, error = %e, "schedules: a fire's start failed; it is tried again");
                    None
                }
                Err(e) => {
                    tracing::warn!(execution_id = %fire.execution_id, error = %e, "schedules: a fire's start was refused");
                    Some(FireState::Failed {
                        error: e.to_string(),
                    })
                }
            };
            (fire.execution_id.clone(), outcome)
        });
        let outcomes: HashMap<String, FireState> = futures::future::join_all(starts)
            .await
            .into_iter()
            .filter_map(|(id, outcome)| outcome.map(|o| (id, o)))
            .collect();
        if outcomes.is_empty() {
            return Ok(());
        }
        tracing::info!(schedule_id = %id, fires = outcomes.len(), "schedule fired");
        self.update(id, |s| {
            for fire in s.fires.iter_mut().filter(|f| f.state == FireState::Pending) {
                if let Some(state) = outcomes.get(&fire.execution_id) {
                    fire.state = state.clone();
                }
            }
            Ok(())
        })
        .await
        .map(drop)
    }

    /// The new state of each started fire whose execution ended (or is gone).
    async fn ended_fires(
        &self,
        schedule: &Schedule,
    ) -> Result<HashMap<String, FireState>, ScheduleError> {
        let store = self.inner.engine.store();
        let mut ended = HashMap::new();
        for fire in schedule
            .fires
            .iter()
            .filter(|f| f.state == FireState::Started)
        {
            let state = match store.get(&fire.execution_id).await? {
                None => FireState::Gone,
                Some(r) if r.state.status().is_final() => FireState::Ended {
                    status: r.state.status(),
                },
                Some(_) => continue,
            };
            ended.insert(fire.execution_id.clone(), state);
        }
        Ok(ended)
    }
}

/// A pass's change of `schedule` at `now`: the fires in `ended` marked, then (unless paused) the
/// [`plan`] applied, its fires recorded pending. Answers the execution ids of those fires.
pub(crate) fn advance(
    schedule: &mut Schedule,
    ended: &HashMap<String, FireState>,
    now: DateTime<Utc>,
) -> Result<Vec<String>, ScheduleError> {
    for fire in &mut schedule.fires {
        if let Some(state) = ended.get(&fire.execution_id) {
            fire.state = state.clone();
        }
    }
    if schedule.paused {
        return Ok(Vec::new());
    }
    let active = schedule.fires.iter().any(Fire::is_active);
    let planned = plan(schedule, &schedule.timetable()?, now, active);
    debug_assert!(planned.fires.len() <= MAX_FIRES_PER_PASS);
    schedule.cursor = planned.cursor;
    schedule.buffered = planned.buffered;
    schedule.skipped += planned.skipped;
    let decided_at = truncate_to_millis(now);
    let mut decided = Vec::with_capacity(planned.fires.len());
    for tick in planned.fires {
        let fire = Fire::new(
            &schedule.id,
            tick,
            FireOrigin::Schedule,
            FireState::Pending,
            decided_at,
        );
        decided.push(fire.execution_id.clone());
        schedule.record(fire);
    }
    Ok(decided)
}

/// The ticks from `from` to `to`, both included, at most `limit`.
fn ticks_between(
    timetable: &Timetable,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    limit: usize,
) -> Vec<DateTime<Utc>> {
    let before_from = from - chrono::Duration::milliseconds(1);
    std::iter::successors(timetable.next_after(before_from), |t| {
        timetable.next_after(*t)
    })
    .take_while(|t| *t <= to)
    .take(limit)
    .collect()
}

/// A client's schedule id: a plain word (letters, digits, `-`, `_`, `.`) of at most
/// [`MAX_SCHEDULE_ID_LEN`] characters.
fn check_id(id: String) -> Result<String, ScheduleError> {
    if id.len() <= MAX_SCHEDULE_ID_LEN && agentry_engine::id::is_valid_id(&id) {
        Ok(id)
    } else {
        Err(ScheduleError::invalid(
            "id",
            format!("use 1 to {MAX_SCHEDULE_ID_LEN} letters, digits, '-', '_' or '.'"),
        ))
    }
}
