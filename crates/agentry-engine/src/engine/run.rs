//! Running an execution: the step loop, its checkpoints, retries, composite steps and
//! sub-workflows.

use super::*;

/// A run in this process: who gets its events, and the signal that stops its steps.
pub(super) struct LiveRun {
    pub(super) subscribers: Vec<mpsc::UnboundedSender<WorkflowEvent>>,
    /// The number of the last stored event sent to the subscribers: a write of another process
    /// (a cancel) is read from the log after it.
    pub(super) sent: i64,
    /// Fires when the execution is cancelled, or this process no longer holds it.
    pub(super) stop: CancellationToken,
    /// Whether the run waits for the database (see [`RunHandle::finish_for_client`]).
    pub(super) stalled: tokio::sync::watch::Sender<bool>,
}

/// What every step of one run shares.
struct RunScope<'a> {
    wf: &'a Workflow,
    id: String,
    /// The lease the run started with: every write of the run is fenced by it.
    lease: Option<&'a Lease>,
    workflow_input: Arc<Value>,
    context: Arc<Map<String, Value>>,
}

/// An `andForEach` as its context made it: the items, how many at once, the mapped step.
struct ForEach<'a> {
    items: Value,
    concurrency: usize,
    step: &'a Step,
}

/// The step a run is at.
struct StepAt<'a> {
    step: &'a Step,
    index: usize,
}

/// What only the first step of a run sees: the resume that began it, or its timer.
struct FirstRun {
    resume: Option<(Option<Value>, Option<Value>)>,
    timed_out: bool,
}

/// How an attempt ended: its output (and whether it ran: not a skipped `andWhen`), or why not.
type StepOutcome = Result<(Value, bool), StepError>;

/// The last attempt of a step: how it ended, the records and events its checkpoint is to
/// write (its children's, its journal's deferred ones), and the record in hand.
struct Attempted {
    outcome: StepOutcome,
    unstored: Deferred,
    rec: ExecutionRecord,
}

/// Where a run begins.
pub(super) struct Entry {
    /// The index of the first step to run.
    pub(super) step: usize,
    /// Resume data (none when a deadline passed), and the data that step suspended with.
    pub(super) resume: Option<(Option<Value>, Option<Value>)>,
    /// Whether the write that began this run recorded the first step's start (else the run
    /// records it, with `workflow-start`: a recovery).
    pub(super) begun: bool,
    /// The events of the write that began this run, sent once the run's subscribers are in.
    pub(super) announce: Vec<WorkflowEvent>,
    /// The run follows a suspension whose deadline passed (a timer fired).
    pub(super) timed_out: bool,
}

/// What a suspended step is woken with (a resume's data, its own suspend data, or its timer),
/// stored with the write that wakes it (`<step>/$wake`): a run that continues the step after a
/// crash or a hand-off hands it the same, so an acknowledged resume is never lost.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Woken {
    pub(super) resume_data: Option<Value>,
    pub(super) suspend_data: Option<Value>,
    pub(super) timed_out: bool,
}

/// The end of the id of a wake's record (`<step>/$wake`).
const WAKE_RECORD: &str = "/$wake";

/// Whether the record `id` is a wake's: the engine's own, not a step's (states leave it out).
pub fn is_wake_record(id: &str) -> bool {
    id.ends_with(WAKE_RECORD)
}

impl Woken {
    /// The id of the record of `step`'s last wake.
    pub(super) fn record_id(step: &str) -> String {
        format!("{step}{WAKE_RECORD}")
    }

    /// The record of this wake, for the step's `attempt`: the suspend data as its input, the
    /// resume as its output.
    pub(super) fn record(&self, attempt: u32, at: chrono::DateTime<chrono::Utc>) -> StepRecord {
        let output = serde_json::json!({
            "resumeData": self.resume_data,
            "timedOut": self.timed_out,
        });
        StepRecord::started(
            self.suspend_data.clone().unwrap_or(Value::Null),
            attempt,
            at,
        )
        .finished(output, true, at)
    }

    /// What `step` was last woken with, if the step is still at that wake's attempt and has
    /// not finished since (`rec` as a claim found it).
    pub(super) fn of(rec: &ExecutionRecord, step: &str) -> Option<Woken> {
        let running = rec.progress.steps.get(step)?;
        let record = rec.progress.steps.get(&Self::record_id(step))?;
        if running.status != StepStatus::Running || record.attempt != running.attempt {
            return None;
        }
        let output = record.output.as_ref()?;
        Some(Woken {
            resume_data: output.get("resumeData").filter(|v| !v.is_null()).cloned(),
            suspend_data: Some(record.input.clone()).filter(|v| !v.is_null()),
            timed_out: output.get("timedOut").and_then(Value::as_bool) == Some(true),
        })
    }
}

/// The records of a composite step's children, as they finish. With a lease, the children of
/// `andAll` and `andRace` are stored at once (so that a re-run skips them); the rest are
/// stored with the step's checkpoint.
#[derive(Clone)]
pub(super) struct Children {
    execution_id: Arc<str>,
    lease: Option<Lease>,
    /// Each record, and whether it is stored already.
    records: Arc<Mutex<Vec<(String, StepRecord, bool)>>>,
}

impl Children {
    pub(super) fn new(execution_id: &str, lease: Option<&Lease>) -> Self {
        Self {
            execution_id: execution_id.into(),
            lease: lease.cloned(),
            records: Arc::default(),
        }
    }

    pub(super) fn execution_id(&self) -> &str {
        &self.execution_id
    }

    /// Keeps a record for the step's checkpoint.
    pub(super) fn keep(&self, id: &str, record: StepRecord) {
        lock(&self.records).push((id.to_owned(), record, false));
    }

    /// Stores a record now; `false` when the lease is lost (the step must stop).
    pub(super) async fn store(
        &self,
        store: &dyn ExecutionStore,
        id: &str,
        record: StepRecord,
    ) -> Result<bool, StoreError> {
        let stored = match &self.lease {
            Some(lease) => {
                store
                    .record_step(&self.execution_id, lease, id, &record)
                    .await?
            }
            None => {
                self.keep(id, record);
                return Ok(true);
            }
        };
        if stored {
            lock(&self.records).push((id.to_owned(), record, true));
        }
        Ok(stored)
    }

    /// Puts the stored records into `progress` (they are in the database already) and returns
    /// the others, for the checkpoint to write.
    pub(super) fn merge_into(&self, progress: &mut Progress) -> Vec<(String, StepRecord)> {
        let mut unstored = Vec::new();
        for (id, record, stored) in lock(&self.records).drain(..) {
            if stored {
                progress.steps_mut().insert(id, Arc::new(record));
            } else {
                unstored.push((id, record));
            }
        }
        unstored
    }
}

impl Engine {
    pub(super) fn spawn_run(
        &self,
        wf: Arc<Workflow>,
        record: ExecutionRecord,
        entry: Entry,
    ) -> RunHandle {
        self.spawn_run_if(wf, record, entry, |_| true)
            .expect("always spawned")
    }

    /// [`Engine::spawn_run`] when `idle` holds of this process's runs (checked under their
    /// lock, so two callers never both start one execution); `None` otherwise.
    pub(super) fn spawn_run_if(
        &self,
        wf: Arc<Workflow>,
        record: ExecutionRecord,
        mut entry: Entry,
        idle: impl FnOnce(&HashMap<String, LiveRun>) -> bool,
    ) -> Option<RunHandle> {
        let (tx, rx) = mpsc::unbounded_channel();
        let id = record.id.clone();
        let (stalled, stalled_rx) = tokio::sync::watch::channel(false);
        let run = LiveRun {
            subscribers: vec![tx],
            sent: record.last_event - entry.announce.len() as i64,
            stop: self.inner.shutdown.child_token(),
            stalled,
        };
        {
            let mut live = lock(&self.inner.live);
            if !idle(&live) {
                return None;
            }
            live.insert(id.clone(), run);
        }
        self.publish(std::mem::take(&mut entry.announce));
        // Made here, in the caller's context: a run started by a request is part of its trace.
        let span = tracing::info_span!(
            "execution",
            otel.name = %format_args!("execution {}", wf.id()),
            workflow_id = %wf.id(),
            execution_id = %id,
            from_step = entry.step as i64,
        );
        if let Some(trace) = &self.inner.config.trace {
            crate::telemetry::link_to_start(trace.as_ref(), &span, &record.context);
        }
        let engine = self.clone();
        let outcome = tokio::spawn(async move { engine.run(wf, record, entry, span).await });
        Some(RunHandle {
            execution_id: ExecutionId::from(id),
            events: rx,
            outcome,
            stalled: stalled_rx,
            patience: self.inner.config.db_patience,
            queue_wait: None,
        })
    }

    /// Runs, then emits the final `workflow-result` and ends the live event streams.
    pub(super) async fn run(
        &self,
        wf: Arc<Workflow>,
        record: ExecutionRecord,
        entry: Entry,
        span: tracing::Span,
    ) -> Result<ExecutionRecord, EngineError> {
        let id = record.id.clone();
        let workflow_id = record.workflow_id.clone();
        let lease = record.lease.clone();
        tracing::info!(execution_id = %id, workflow_id = %record.workflow_id, from_step = entry.step, "execution started");
        let outcome = {
            use tracing::Instrument;
            self.drive(wf, record, entry).instrument(span).await
        };
        let outcome = match outcome {
            Ok(rec) => Ok(rec),
            // Cancelled through the API while a step ran: the cancel wrote the end.
            Err(EngineError::Cancelled(_)) => {
                tracing::info!(execution_id = %id, "cancelled: its run stopped");
                Box::pin(self.catch_up(&id)).await;
                match self.inner.store.get(&id).await {
                    Ok(Some(rec)) => Ok(rec),
                    Ok(None) => Err(EngineError::Internal(format!("execution {id} disappeared"))),
                    Err(e) => Err(e.into()),
                }
            }
            // The database failed this run (it went away and this process stops before it came
            // back, or it refused a statement): the execution is not failed; it continues where
            // its lease is taken over. Only the workflow's own code fails a workflow.
            Err(EngineError::Store(e)) if !e.is_the_datas() => {
                tracing::warn!(execution_id = %id, error = %e, "the database failed this run: the execution continues where its lease is taken over");
                let e = EngineError::HandedOver(id.clone());
                let message = e.to_string();
                self.emit_for(&id, &workflow_id, EventKind::WorkflowHandover { message });
                Err(e)
            }
            Err(e @ (EngineError::LeaseLost(_) | EngineError::HandedOver(_))) => {
                if matches!(e, EngineError::LeaseLost(_)) {
                    tracing::warn!(execution_id = %id, "lease lost: another process runs this execution now; stopping here");
                } else {
                    tracing::info!(execution_id = %id, "handed over at a step boundary: shutting down");
                }
                let message = e.to_string();
                self.emit_for(&id, &workflow_id, EventKind::WorkflowHandover { message });
                Err(e)
            }
            Err(err) => {
                tracing::error!(execution_id = %id, error = %err, "execution stopped by an engine error");
                // Keep the store truthful: an execution the engine gave up on ends in error.
                let message = err.to_string();
                let fail = Transition::Fail {
                    message: message.clone(),
                    step_id: None,
                    at: self.inner.clock.now(),
                };
                match self.apply(lease.as_ref(), None, &id, fail, None).await {
                    Ok(rec) => Ok(rec),
                    Err(_) => Err(err),
                }
            }
        };
        if let Ok(rec) = &outcome {
            tracing::info!(execution_id = %id, workflow_id = %rec.workflow_id, status = %rec.state.status(), "execution finished");
            let result = EventKind::WorkflowResult {
                execution: Box::new(rec.clone()),
            };
            self.emit_for(&id, &workflow_id, result);
        }
        lock(&self.inner.live).remove(&id);
        // An execution of a queued workflow that ended leaves its slot to the next.
        if let Ok(rec) = &outcome
            && rec.queue.is_some()
            && rec.state.status().is_final()
        {
            self.nudge_queues();
        }
        // Suspended to wait for an event: one delivered meanwhile is handed over now.
        if let Ok(rec) = &outcome
            && rec.state.suspension().is_some_and(|s| s.event.is_some())
        {
            let engine = self.clone();
            let rec = rec.clone();
            tokio::spawn(async move { engine.look_again_for_event(rec).await });
        }
        outcome
    }

    pub(super) fn input_for(wf: &Workflow, rec: &ExecutionRecord, index: usize) -> Value {
        if index == 0 {
            return rec.input.clone();
        }
        wf.steps()
            .get(index - 1)
            .and_then(|prev| rec.progress.steps.get(&prev.id))
            .and_then(|r| r.output.clone())
            .unwrap_or(Value::Null)
    }

    /// Records in `progress` that `step` starts now with `input`: its next attempt. A step that
    /// was interrupted keeps its finished children (a re-run skips them); one that finished
    /// before and runs again (a resume from an earlier step) starts afresh, without them.
    pub(super) fn begin(&self, progress: &mut Progress, step: &Step, input: Value) {
        let previous = progress.steps.get(&step.id);
        let attempt = previous.map_or(1, |r| r.attempt + 1);
        let interrupted = previous.is_some_and(|r| r.status == StepStatus::Running);
        // An interrupted step keeps the failures of its earlier attempts.
        let failures = match previous {
            Some(r) if interrupted => r.failures.clone(),
            _ => Vec::new(),
        };
        if previous.is_some() && !interrupted {
            // Its children's and its own records (`<step>/...`: a foreach's items, a journal's
            // entries) are of the run that finished.
            let own = format!("{}/", step.id);
            let steps = progress.steps_mut();
            for child in step.descendants() {
                steps.remove(child);
            }
            steps.retain(|id, _| !id.starts_with(&own));
        }
        let now = self.inner.clock.now();
        progress.steps_mut().insert(
            step.id.clone(),
            Arc::new(StepRecord {
                failures,
                ..StepRecord::started(input, attempt, now)
            }),
        );
    }

    /// The signal that stops this process's run of `execution_id` (cancelled, or no longer
    /// held here), or the shutdown's.
    pub(super) fn stop_signal(&self, execution_id: &str) -> CancellationToken {
        match lock(&self.inner.live).get(execution_id) {
            Some(run) => run.stop.child_token(),
            None => self.inner.shutdown.child_token(),
        }
    }

    /// Stops the steps of this process's run of `execution_id`, if any.
    pub(super) fn stop_run(&self, execution_id: &str) {
        if let Some(run) = lock(&self.inner.live).get(execution_id) {
            run.stop.cancel();
        }
    }

    /// The `step-start` event of `step`.
    pub(super) fn step_start(step: &Step, index: usize, input: Value) -> EventKind {
        EventKind::StepStart {
            step_id: step.id.clone(),
            step_index: index,
            step_type: step.step_type(),
            input,
        }
    }

    /// `state` after `t` (which the engine only takes where the state machine allows it), and
    /// the event that reports it.
    fn transitioned(
        state: &ExecutionState,
        t: Transition,
        events: &mut Vec<EventKind>,
    ) -> Result<ExecutionState, EngineError> {
        let next =
            transition(state, t.clone()).map_err(|e| EngineError::Internal(e.to_string()))?;
        events.extend(Self::reported(&t));
        Ok(next)
    }

    /// The event a transition reports, if any.
    pub(super) fn reported(t: &Transition) -> Option<EventKind> {
        match t {
            Transition::Suspend(suspension) => Some(EventKind::WorkflowSuspended {
                suspension: suspension.clone(),
            }),
            Transition::Complete { result, .. } => Some(EventKind::WorkflowComplete {
                result: result.clone(),
            }),
            Transition::Fail {
                message, step_id, ..
            } => Some(EventKind::WorkflowError {
                error: message.clone(),
                step_id: step_id.clone(),
            }),
            Transition::Cancel(cancellation) => Some(EventKind::WorkflowCancelled {
                cancellation: cancellation.clone(),
            }),
            Transition::Start
            | Transition::Enqueue
            | Transition::RequestSuspend(_)
            | Transition::Resume
            | Transition::Retry => None,
        }
    }

    /// Calls the crash hook, when one is installed (durability tests).
    pub(super) fn crash_point(
        &self,
        point: CrashPoint,
        workflow_id: &str,
        step_id: &str,
        attempt: u32,
    ) {
        if let Some(hook) = &self.inner.config.crash_hook {
            (hook.0)(point, workflow_id, step_id, attempt);
        }
    }

    pub(super) async fn drive(
        &self,
        wf: Arc<Workflow>,
        mut rec: ExecutionRecord,
        entry: Entry,
    ) -> Result<ExecutionRecord, EngineError> {
        // Every write of the run is fenced by the lease it started with.
        let lease = rec.lease.clone();
        let run = RunScope {
            wf: &wf,
            id: rec.id.clone(),
            lease: lease.as_ref(),
            workflow_input: Arc::new(rec.input.clone()),
            context: Arc::new(rec.context.clone()),
        };
        let mut input = Self::input_for(&wf, &rec, entry.step);
        let mut first = FirstRun {
            resume: entry.resume,
            timed_out: entry.timed_out,
        };
        // Whether the current step's start is recorded. Every write that ends a step records
        // the next one's start with it (the last one, the completion), so a step costs one
        // write; a recorded start is always followed by the run, so a shutdown stops a run only
        // where no start is recorded.
        let mut begun = entry.begun;
        for (index, step) in wf.steps().iter().enumerate().skip(entry.step) {
            let at = StepAt { step, index };
            if !begun {
                if self.inner.draining.is_cancelled() {
                    return Err(EngineError::HandedOver(run.id.clone()));
                }
                rec = self.restart_at(&run, rec, &at, &input).await?;
            }
            if let Some(message) = Self::attempts_spent(&at, &rec) {
                return self.fail_now(run.lease, rec, &step.id, message).await;
            }
            let attempted = self
                .run_attempts(&run, rec, &at, &input, &mut first)
                .await?;
            rec = attempted.rec;
            let unstored = attempted.unstored;
            match attempted.outcome {
                Ok((output, ran)) => {
                    let (next, begun_next) = self
                        .checkpoint_step(&run, rec, &at, &input, (output.clone(), ran), unstored)
                        .await?;
                    rec = next;
                    // Suspended at this boundary, or completed by the last step's write.
                    if rec.state.status() != Status::Running {
                        return Ok(rec);
                    }
                    input = output;
                    begun = begun_next;
                }
                Err(error) => return self.stop_at_step(&run, rec, &at, error).await,
            }
        }
        let complete = Transition::Complete {
            result: input,
            at: self.inner.clock.now(),
        };
        self.apply(run.lease, Some(rec), &run.id, complete, None)
            .await
    }

    /// A recovery, or the start of a dequeued execution: records that the run starts (again)
    /// at `at` (its next attempt) with `workflow-start`.
    async fn restart_at(
        &self,
        run: &RunScope<'_>,
        rec: ExecutionRecord,
        at: &StepAt<'_>,
        input: &Value,
    ) -> Result<ExecutionRecord, EngineError> {
        self.update_held(run.lease, Some(rec), &run.id, |r, events| {
            let mut next = r.clone();
            // A step that never began here is a first start (a queued execution dequeued).
            let resumed = r.progress.steps.contains_key(&at.step.id);
            self.begin(&mut next.progress, at.step, input.clone());
            events.push(EventKind::WorkflowStart {
                input: r.input.clone(),
                resumed,
            });
            events.push(Self::step_start(at.step, at.index, input.clone()));
            Ok(next)
        })
        .await
    }

    /// Why a step with retries may not run again: crashes used up its attempts.
    fn attempts_spent(at: &StepAt<'_>, rec: &ExecutionRecord) -> Option<String> {
        let retry = at.step.retry?;
        let record = rec.progress.steps.get(&at.step.id)?;
        (record.attempt - record.budget_start() + 1 > retry.max_attempts()).then(|| {
            format!(
                "Step {} failed: no attempt left ({} started, the last ones interrupted)",
                at.step.id,
                retry.max_attempts()
            )
        })
    }

    /// Runs the step at `at` until an attempt succeeds, suspends or fails for good (a step with
    /// retries runs again after each failed attempt, its failure recorded first).
    async fn run_attempts(
        &self,
        run: &RunScope<'_>,
        mut rec: ExecutionRecord,
        at: &StepAt<'_>,
        input: &Value,
        first: &mut FirstRun,
    ) -> Result<Attempted, EngineError> {
        loop {
            let children = Children::new(&run.id, run.lease);
            let journal = Journal::new(self, &rec, &at.step.id, run.lease);
            let (attempt, result) = self
                .run_attempt(
                    run,
                    &rec,
                    at,
                    input,
                    first,
                    (children.clone(), journal.clone()),
                )
                .await;
            // What the step's journal wrote is the record in hand; children already stored as
            // they finished are part of it.
            let (written, mut unstored) = journal.finish().await;
            if let Some(written) = written {
                rec = written;
            }
            unstored
                .entries
                .extend(children.merge_into(&mut rec.progress));
            // Attempts count from the first of the step's budget (a retry of the execution
            // gives a fresh one; the numbers go on).
            let budget_start = rec
                .progress
                .steps
                .get(&at.step.id)
                .map_or(1, |r| r.budget_start());
            let (error, retry) = match (&result, at.step.retry) {
                (
                    Err(StepError::Failed(error) | StepError::Fault { message: error, .. }),
                    Some(retry),
                ) if attempt - budget_start + 1 < retry.max_attempts()
                    && !self.inner.draining.is_cancelled() =>
                {
                    (error.clone(), retry)
                }
                _ => {
                    return Ok(Attempted {
                        outcome: result,
                        unstored,
                        rec,
                    });
                }
            };
            let delay = retry.delay(attempt);
            // The next attempt is due `delay` after the failure, by the engine's clock.
            let next_attempt = self.inner.clock.sleep(delay);
            rec = self
                .record_retry(run, rec, at, attempt, &error, delay)
                .await?;
            tracing::info!(execution_id = %run.id, step_id = %at.step.id, attempt, error = %error, "step attempt failed; retrying");
            let cancelled = self.stop_signal(&run.id);
            tokio::select! {
                _ = next_attempt => {}
                // A shutdown: the next attempt runs wherever the execution continues.
                _ = self.inner.draining.cancelled() => {
                    return Err(EngineError::HandedOver(run.id.clone()));
                }
                // A cancel: the next write finds it and stops.
                _ = cancelled.cancelled() => {}
            }
        }
    }

    /// One attempt of the step at `at`, within its time-out; returns its number and outcome.
    async fn run_attempt(
        &self,
        run: &RunScope<'_>,
        rec: &ExecutionRecord,
        at: &StepAt<'_>,
        input: &Value,
        first: &mut FirstRun,
        (children, journal): (Children, Journal),
    ) -> (u32, StepOutcome) {
        let step = at.step;
        let (attempt, started_at) = rec
            .progress
            .steps
            .get(&step.id)
            .map_or((1, self.inner.clock.now()), |r| (r.attempt, r.started_at));
        self.crash_point(CrashPoint::BeforeStep, run.wf.id(), &step.id, attempt);
        let (resume_data, suspend_data) = first.resume.take().unwrap_or_default();
        let stop = self.stop_signal(&run.id);
        let ctx = StepContext {
            execution_id: run.id.clone(),
            workflow_id: run.wf.id().to_owned(),
            step_id: step.id.clone(),
            step_index: at.index,
            input: input.clone(),
            workflow_input: run.workflow_input.clone(),
            context: run.context.clone(),
            owner: rec.owner.clone(),
            resume_data,
            suspend_data,
            cancel: stop.clone(),
            attempt,
            started_at,
            timed_out: std::mem::take(&mut first.timed_out),
            steps: rec.progress.steps.clone(),
            clock: self.inner.clock.clone(),
            journal: Some(Arc::new(journal)),
            foreach_item: None,
        };
        let span = tracing::info_span!(
            "step",
            otel.name = %format_args!("step {}", step.id),
            workflow_id = %run.wf.id(),
            step_id = %step.id,
            // Signed: OpenTelemetry's integer attributes are i64.
            step_index = at.index as i64,
            attempt = i64::from(attempt),
        );
        let running = {
            use tracing::Instrument;
            self.run_step(step, ctx, children).instrument(span)
        };
        let result = match step.timeout {
            Some(limit) => match tokio::time::timeout(limit, running).await {
                Ok(result) => result,
                Err(_) => {
                    stop.cancel();
                    Err(StepError::Failed(format!(
                        "attempt {attempt} timed out after {} ms",
                        limit.as_millis()
                    )))
                }
            },
            None => running.await,
        };
        (attempt, result)
    }

    /// Records a failed attempt and the next attempt's number, before it runs.
    async fn record_retry(
        &self,
        run: &RunScope<'_>,
        rec: ExecutionRecord,
        at: &StepAt<'_>,
        attempt: u32,
        error: &str,
        delay: Duration,
    ) -> Result<ExecutionRecord, EngineError> {
        self.update_held(run.lease, Some(rec), &run.id, |r, events| {
            let now = self.inner.clock.now();
            let mut next = r.clone();
            if let Some(record) = next.progress.steps_mut().get_mut(&at.step.id) {
                let record = Arc::make_mut(record);
                record.failures.push(AttemptFailure {
                    attempt,
                    error: error.to_owned(),
                    at: now,
                    execution_retried: false,
                });
                record.attempt = attempt + 1;
                record.started_at = now;
            }
            events.push(EventKind::StepRetry {
                step_id: at.step.id.clone(),
                step_index: at.index,
                attempt,
                error: error.to_owned(),
                next_attempt: attempt + 1,
                delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            });
            Ok(next)
        })
        .await
    }

    /// The checkpoint of a step that ended with `output`: its record, the next step's start
    /// (or the suspension a request asked for meanwhile; after the last step, the execution's
    /// completion), in one write. Returns the record and whether the next step's start is
    /// recorded.
    async fn checkpoint_step(
        &self,
        run: &RunScope<'_>,
        rec: ExecutionRecord,
        at: &StepAt<'_>,
        input: &Value,
        (output, ran): (Value, bool),
        unstored: Deferred,
    ) -> Result<(ExecutionRecord, bool), EngineError> {
        let step = at.step;
        let index = at.index;
        let attempt = rec.progress.steps.get(&step.id).map_or(1, |r| r.attempt);
        self.crash_point(CrashPoint::AfterEffect, run.wf.id(), &step.id, attempt);
        let following = run.wf.steps().get(index + 1);
        let begin_next = !self.inner.draining.is_cancelled();
        let rec = self
            .update_held(run.lease, Some(rec), &run.id, |r, events| {
                if r.state.status() != Status::Running {
                    return Err(EngineError::Internal(format!(
                        "execution became {} while its step {} ran",
                        r.state.status(),
                        step.id
                    )));
                }
                let now = self.inner.clock.now();
                let mut next = r.clone();
                next.progress.steps_mut().extend(
                    unstored
                        .entries
                        .iter()
                        .map(|(id, r)| (id.clone(), Arc::new(r.clone()))),
                );
                events.extend(unstored.events.iter().cloned());
                let done = r
                    .progress
                    .steps
                    .get(&step.id)
                    .map(|s| StepRecord::clone(s))
                    .unwrap_or_else(|| StepRecord::started(input.clone(), 1, now))
                    .finished(output.clone(), ran, now);
                next.progress
                    .steps_mut()
                    .insert(step.id.clone(), Arc::new(done));
                next.progress.next_step = index + 1;
                events.push(EventKind::StepComplete {
                    step_id: step.id.clone(),
                    step_index: index,
                    step_type: step.step_type(),
                    output: output.clone(),
                    ran,
                });
                match (r.state.suspend_request(), following) {
                    // A suspend asked for while the step ran: it takes effect at this boundary,
                    // in this same write.
                    (Some(req), Some(following)) => {
                        let suspension = Suspension {
                            suspended_at: now,
                            reason: req.reason.clone(),
                            step_index: index + 1,
                            step_id: following.id.clone(),
                            data: None,
                            deadline: None,
                            event: None,
                        };
                        next.state =
                            Self::transitioned(&r.state, Transition::Suspend(suspension), events)?;
                    }
                    (None, Some(following)) if begin_next => {
                        self.begin(&mut next.progress, following, output.clone());
                        events.push(Self::step_start(following, index + 1, output.clone()));
                    }
                    // The last step: its end is the execution's, in this same write.
                    (_, None) => {
                        let complete = Transition::Complete {
                            result: output.clone(),
                            at: now,
                        };
                        next.state = Self::transitioned(&r.state, complete, events)?;
                    }
                    _ => {}
                }
                Ok(next)
            })
            .await?;
        self.crash_point(CrashPoint::AfterCheckpoint, run.wf.id(), &step.id, attempt);
        Ok((rec, begin_next))
    }

    /// Ends the run at a step that did not produce an output: it suspended, failed, or was
    /// cancelled (by a shutdown: handed over; else the execution fails).
    async fn stop_at_step(
        &self,
        run: &RunScope<'_>,
        rec: ExecutionRecord,
        at: &StepAt<'_>,
        error: StepError,
    ) -> Result<ExecutionRecord, EngineError> {
        let step = at.step;
        let message = match error {
            StepError::Suspend {
                reason,
                data,
                deadline,
                event,
            } => {
                if let Some(d) = &data
                    && !matches!(step.kind, StepKind::Workflow { .. })
                    && let Err(detail) = run.wf.validate_suspend(at.index, d)
                {
                    format!("Step {} suspended with invalid data: {detail}", step.id)
                } else {
                    let suspension = Suspension {
                        suspended_at: self.inner.clock.now(),
                        reason,
                        step_index: at.index,
                        step_id: step.id.clone(),
                        // `null` suspend data is no data: stored either way, it reads back as
                        // none, so the record in hand never differs from the stored one.
                        data: data.filter(|d| !d.is_null()),
                        deadline,
                        event: event.map(|e| *e),
                    };
                    return self.suspend_now(run.lease, rec, suspension, true).await;
                }
            }
            StepError::Failed(message) => format!("Step {} failed: {message}", step.id),
            StepError::Fault { message, details } => {
                let message = format!("Step {} failed: {message}", step.id);
                return self
                    .fail_with(run.lease, rec, &step.id, message, Some(*details))
                    .await;
            }
            StepError::Cancelled if self.inner.draining.is_cancelled() => {
                return Err(EngineError::HandedOver(run.id.clone()));
            }
            StepError::Cancelled => format!("Step {} was cancelled", step.id),
        };
        self.fail_now(run.lease, rec, &step.id, message).await
    }

    /// Moves the stored execution through `t` (a refused move is an internal error here: the
    /// engine only asks for moves its own run allows), marking the step `mark` names.
    pub(super) async fn apply(
        &self,
        lease: Option<&Lease>,
        known: Option<ExecutionRecord>,
        id: &str,
        t: Transition,
        mark: Option<(&str, StepStatus)>,
    ) -> Result<ExecutionRecord, EngineError> {
        self.apply_marked(lease, known, id, t, mark, None).await
    }

    /// [`Engine::apply`], setting the marked step's output to `output` when given.
    async fn apply_marked(
        &self,
        lease: Option<&Lease>,
        known: Option<ExecutionRecord>,
        id: &str,
        t: Transition,
        mark: Option<(&str, StepStatus)>,
        output: Option<&Value>,
    ) -> Result<ExecutionRecord, EngineError> {
        self.update_held(lease, known, id, |r, events| {
            let state = Self::transitioned(&r.state, t.clone(), events)?;
            let mut next = r.clone();
            if let ExecutionState::Suspended(s) = &state {
                next.progress.next_step = s.step_index;
            }
            if let Some((step_id, status)) = mark
                && let Some(step) = next.progress.steps_mut().get_mut(step_id)
            {
                let step = Arc::make_mut(step);
                step.status = status;
                if status == StepStatus::Failed {
                    step.ended_at = Some(self.inner.clock.now());
                }
                if let Some(output) = output {
                    step.output = Some(output.clone());
                }
            }
            next.state = state;
            Ok(next)
        })
        .await
    }

    /// Suspends at `suspension`'s step: `by_step` when that step asked for it (it is marked
    /// suspended, and a resume continues its attempt), else at a step boundary.
    pub(super) async fn suspend_now(
        &self,
        lease: Option<&Lease>,
        rec: ExecutionRecord,
        suspension: Suspension,
        by_step: bool,
    ) -> Result<ExecutionRecord, EngineError> {
        let id = rec.id.clone();
        let step_id = suspension.step_id.clone();
        let deadline = suspension.deadline;
        let suspend = Transition::Suspend(suspension);
        let mark = by_step.then_some((step_id.as_str(), StepStatus::Suspended));
        let rec = self.apply(lease, Some(rec), &id, suspend, mark).await?;
        if let Some(deadline) = deadline {
            self.schedule_timer(&id, deadline);
        }
        Ok(rec)
    }

    pub(super) async fn fail_now(
        &self,
        lease: Option<&Lease>,
        rec: ExecutionRecord,
        step_id: &str,
        message: String,
    ) -> Result<ExecutionRecord, EngineError> {
        self.fail_with(lease, rec, step_id, message, None).await
    }

    /// [`Engine::fail_now`], keeping `details` (what the step said of its failure) as the
    /// failed step's output.
    pub(super) async fn fail_with(
        &self,
        lease: Option<&Lease>,
        rec: ExecutionRecord,
        step_id: &str,
        message: String,
        details: Option<Value>,
    ) -> Result<ExecutionRecord, EngineError> {
        let id = rec.id.clone();
        let at = self.inner.clock.now();
        tracing::warn!(execution_id = %id, error = %message, "execution failed");
        let fail = Transition::Fail {
            message: message.clone(),
            step_id: Some(step_id.to_owned()),
            at,
        };
        let mark = Some((step_id, StepStatus::Failed));
        self.apply_marked(lease, Some(rec), &id, fail, mark, details.as_ref())
            .await
    }

    /// [`Engine::update`] on behalf of the holder of `lease` (when given): if the stored
    /// execution is held by anyone else, or by an older epoch of this node, nothing is written
    /// and the answer is [`EngineError::LeaseLost`] (fencing).
    pub(super) async fn update_held<F>(
        &self,
        lease: Option<&Lease>,
        known: Option<ExecutionRecord>,
        id: &str,
        f: F,
    ) -> Result<ExecutionRecord, EngineError>
    where
        F: Fn(&ExecutionRecord, &mut Vec<EventKind>) -> Result<ExecutionRecord, EngineError>,
    {
        let patience = if lease.is_some() {
            Patience::Run
        } else {
            Patience::Request
        };
        self.update(known, id, patience, |r, events| {
            if lease.is_some() && r.state.status() == Status::Cancelled {
                return Err(EngineError::Cancelled(r.id.clone()));
            }
            if let Some(mine) = lease
                && !r.lease.as_ref().is_some_and(|held| held.is(mine))
            {
                return Err(EngineError::LeaseLost(r.id.clone()));
            }
            f(r, events)
        })
        .await
    }

    /// Applies `f` to the stored record and writes the result with a compare-and-set on the
    /// version, re-reading and re-applying on a conflict. `known` saves the first read. The
    /// events `f` reports are numbered, stored with the write and, once it is committed, sent to
    /// the subscribers.
    pub(super) async fn update<F>(
        &self,
        known: Option<ExecutionRecord>,
        id: &str,
        patience: Patience,
        f: F,
    ) -> Result<ExecutionRecord, EngineError>
    where
        F: Fn(&ExecutionRecord, &mut Vec<EventKind>) -> Result<ExecutionRecord, EngineError>,
    {
        let (rec, events) = self.commit(known, id, patience, f).await?;
        self.publish(events);
        Ok(rec)
    }

    /// [`Engine::update`], handing the committed events back instead of sending them. A run's
    /// write ([`Patience::Run`]) outlasts a database that does not answer: it is tried again
    /// until it is taken; a write whose commit is in doubt (the connection failed after it was
    /// sent) is looked for first, so that it is never made twice.
    pub(super) async fn commit<F>(
        &self,
        known: Option<ExecutionRecord>,
        id: &str,
        patience: Patience,
        f: F,
    ) -> Result<(ExecutionRecord, Vec<WorkflowEvent>), EngineError>
    where
        F: Fn(&ExecutionRecord, &mut Vec<EventKind>) -> Result<ExecutionRecord, EngineError>,
    {
        let mut current = known;
        let mut conflicts = 0u32;
        let mut pause = DB_RETRY_FIRST;
        // A write sent when the database failed: it may have been committed. (The rare paths
        // of this loop are boxed, so that every run's future stays small.)
        let mut in_doubt: Option<Box<(ExecutionRecord, Vec<WorkflowEvent>)>> = None;
        loop {
            let cur = match current.take() {
                Some(c) => c,
                None => match self.inner.store.get_to_update(id).await {
                    Ok(Some(c)) => c,
                    Ok(None) => {
                        return Err(EngineError::Internal(format!(
                            "execution {id} disappeared from the store"
                        )));
                    }
                    Err(e) => {
                        Box::pin(self.outlast(id, patience, e, &mut pause)).await?;
                        continue;
                    }
                },
            };
            if let Some(doubt) = in_doubt.take() {
                let (sent, events) = *doubt;
                match Box::pin(self.was_committed(&cur, &sent, &events)).await {
                    Ok(true) => {
                        tracing::info!(execution_id = %id, version = sent.version, "a write in doubt was committed");
                        self.mark_stalled(id, false);
                        return Ok((sent, events));
                    }
                    Ok(false) => {}
                    Err(e) => {
                        in_doubt = Some(Box::new((sent, events)));
                        Box::pin(self.outlast(id, patience, e, &mut pause)).await?;
                        continue;
                    }
                }
            }
            let mut kinds = Vec::new();
            let mut next = f(&cur, &mut kinds)?;
            next.version = cur.version + 1;
            next.updated_at = self.inner.clock.now();
            let events = self.numbered(&mut next, cur.last_event, kinds);
            let changed = next.progress.changed_since(&cur.progress);
            let store = &self.inner.store;
            let began = std::time::Instant::now();
            match store
                .compare_and_set(&next, cur.version, &changed, &events)
                .await
            {
                Ok(true) => {
                    self.telemetry().committed(&next, &events, began.elapsed());
                    if pause != DB_RETRY_FIRST {
                        self.mark_stalled(id, false);
                    }
                    return Ok((next, events));
                }
                Ok(false) => {
                    conflicts += 1;
                    if conflicts >= 200 {
                        return Err(EngineError::Contention(id.to_owned()));
                    }
                    if conflicts > 3 {
                        tokio::time::sleep(Duration::from_millis(u64::from(conflicts.min(20))))
                            .await;
                    }
                }
                Err(e) if patience == Patience::Request && e.is_unavailable() => {
                    // A client waits: one look whether the database took the write before it
                    // failed (a lost answer), else the failure is answered.
                    if Box::pin(self.taken_after_all(id, &next, &events)).await {
                        self.telemetry().committed(&next, &events, began.elapsed());
                        return Ok((next, events));
                    }
                    return Err(e.into());
                }
                Err(e) => {
                    Box::pin(self.outlast(id, patience, e, &mut pause)).await?;
                    in_doubt = Some(Box::new((next, events)));
                }
            }
        }
    }

    /// After a store failure: a run's write waits for the database (`pause`, doubled for the
    /// next time) and is tried again; anything else fails. A process that shuts down meanwhile
    /// hands the run over.
    pub(super) async fn outlast(
        &self,
        id: &str,
        patience: Patience,
        error: StoreError,
        pause: &mut Duration,
    ) -> Result<(), EngineError> {
        if patience == Patience::Request || error.is_the_datas() {
            return Err(error.into());
        }
        if *pause == DB_RETRY_FIRST {
            tracing::warn!(execution_id = %id, error = %error, "the database did not take a write: trying again until it does");
            self.mark_stalled(id, true);
        }
        tokio::select! {
            _ = tokio::time::sleep(*pause) => {}
            _ = self.inner.shutdown.cancelled() => {}
        }
        if self.inner.shutdown.is_cancelled() {
            return Err(EngineError::HandedOver(id.to_owned()));
        }
        *pause = (*pause * 2).min(DB_RETRY_MAX);
        Ok(())
    }

    /// One look whether the database took `sent` although the write failed.
    async fn taken_after_all(
        &self,
        id: &str,
        sent: &ExecutionRecord,
        events: &[WorkflowEvent],
    ) -> bool {
        match self.inner.store.get(id).await {
            Ok(Some(cur)) => matches!(self.was_committed(&cur, sent, events).await, Ok(true)),
            _ => false,
        }
    }

    /// Whether `sent` (a write whose commit is in doubt) is in the store, read as `cur`: its
    /// first event is stored as it was sent, to the microsecond (every write of a run reports
    /// one; the log is never rewritten, so later writes do not hide it), or, without events,
    /// the stored header is still this write's.
    async fn was_committed(
        &self,
        cur: &ExecutionRecord,
        sent: &ExecutionRecord,
        events: &[WorkflowEvent],
    ) -> Result<bool, StoreError> {
        let at = |t: &chrono::DateTime<chrono::Utc>| t.timestamp_micros();
        let Some(first) = events.first() else {
            return Ok(cur.version == sent.version
                && at(&cur.updated_at) == at(&sent.updated_at)
                && cur.lease == sent.lease);
        };
        let seq = first.seq.unwrap_or(0);
        if cur.last_event < seq {
            return Ok(false);
        }
        let stored = self.inner.store.events_after(&cur.id, seq - 1, 1).await?;
        Ok(stored.first().is_some_and(|ev| {
            ev.seq == first.seq
                && at(&ev.timestamp) == at(&first.timestamp)
                && serde_json::to_value(&ev.kind).ok() == serde_json::to_value(&first.kind).ok()
        }))
    }

    /// Tells whoever waits on this process's run of `id` whether it waits for the database.
    fn mark_stalled(&self, id: &str, stalled: bool) {
        if let Some(run) = lock(&self.inner.live).get(id) {
            run.stalled.send_replace(stalled);
        }
    }

    /// Sends this run's subscribers the stored events it did not write itself (another
    /// process's cancel), after the last one they were sent.
    async fn catch_up(&self, id: &str) {
        let Some(sent) = lock(&self.inner.live).get(id).map(|run| run.sent) else {
            return;
        };
        match self
            .inner
            .store
            .events_after(id, sent, super::events::FOLLOW_BATCH)
            .await
        {
            Ok(events) => {
                for ev in events {
                    self.send(ev);
                }
            }
            Err(e) => {
                tracing::warn!(execution_id = %id, error = %e, "reading the events another process wrote failed")
            }
        }
    }

    pub(super) fn child_ctx(
        parent: &StepContext,
        child: &Step,
        cancel: CancellationToken,
    ) -> StepContext {
        StepContext {
            step_id: child.id.clone(),
            cancel,
            ..parent.clone()
        }
    }

    /// The record of `child` of the step `parent` runs, started at `started_at`.
    pub(super) fn child_record(
        &self,
        parent: &StepContext,
        input: Value,
        started_at: chrono::DateTime<chrono::Utc>,
        output: Value,
        ran: bool,
    ) -> StepRecord {
        StepRecord {
            parent: Some(parent.step_id.clone()),
            ..StepRecord::started(input, parent.attempt, started_at)
        }
        .finished(output, ran, self.inner.clock.now())
    }

    /// The output an earlier attempt of the parent step recorded for `child`, if it finished.
    pub(super) fn finished_child(parent: &StepContext, child: &Step) -> Option<Value> {
        parent
            .step(&child.id)
            .filter(|r| r.is_finished())
            .map(|r| r.output.clone().unwrap_or(Value::Null))
    }

    /// Runs one child of `parent` unless an earlier attempt finished it, and returns its output
    /// with its record (stored already when `store` and the run holds a lease).
    pub(super) async fn run_child_step(
        &self,
        parent: &StepContext,
        child: &Step,
        cancel: CancellationToken,
        children: &Children,
    ) -> Result<(Value, StepRecord), StepError> {
        let cctx = Self::child_ctx(parent, child, cancel);
        let input = cctx.input.clone();
        let started_at = self.inner.clock.now();
        let (out, ran) = self.run_step(child, cctx, children.clone()).await?;
        Ok((
            out.clone(),
            self.child_record(parent, input, started_at, out, ran),
        ))
    }

    /// Stores a finished child's record now (through a database that does not answer, as a
    /// run's writes: the record is the same each time): a lost lease, or a shutdown while the
    /// database is away, stops the step.
    pub(super) async fn store_child(
        &self,
        children: &Children,
        child_id: &str,
        record: StepRecord,
    ) -> Result<(), StepError> {
        let mut pause = DB_RETRY_FIRST;
        loop {
            match children
                .store(self.inner.store.as_ref(), child_id, record.clone())
                .await
            {
                Ok(true) => return Ok(()),
                Ok(false) => return Err(StepError::Cancelled),
                Err(e) if !e.is_the_datas() => {
                    let execution_id = children.execution_id();
                    if self
                        .outlast(execution_id, Patience::Run, e, &mut pause)
                        .await
                        .is_err()
                    {
                        return Err(StepError::Cancelled);
                    }
                }
                Err(e) => {
                    return Err(StepError::failed(format!("recording step {child_id}: {e}")));
                }
            }
        }
    }

    /// Runs one step of any kind; returns its output and whether it ran (false for a skipped
    /// `andWhen`). The records of its children go to `children`.
    pub(super) fn run_step(
        &self,
        step: &Step,
        ctx: StepContext,
        children: Children,
    ) -> BoxFuture<'static, StepOutcome> {
        let step = step.clone();
        let engine = self.clone();
        Box::pin(async move {
            match &step.kind {
                StepKind::Then(f) => guarded(f(ctx)).await.map(|v| (v, true)),
                StepKind::Tap(f) => {
                    let input = ctx.input.clone();
                    guarded(f(ctx)).await?;
                    Ok((input, true))
                }
                StepKind::When {
                    condition,
                    step: child,
                } => engine.run_when(condition, child, ctx, &children).await,
                StepKind::All(list) => engine.run_all(list, &ctx, &children).await,
                StepKind::Race(list) => engine.run_race(list, ctx, &children).await,
                StepKind::Agent {
                    agent_id,
                    prompt,
                    output,
                } => {
                    engine
                        .run_agent_step(agent_id, prompt, output.as_ref(), &ctx)
                        .await
                }
                StepKind::Workflow { workflow_id, input } => {
                    let out = engine.run_child(workflow_id, input.as_ref(), &ctx).await?;
                    Ok((out, true))
                }
                StepKind::ForEach {
                    items,
                    concurrency,
                    step: mapped,
                } => {
                    let each = ForEach {
                        items: items(&ctx),
                        concurrency: concurrency(&ctx),
                        step: mapped,
                    };
                    engine.run_for_each(each, &ctx, &children).await
                }
            }
        })
    }

    /// `andWhen`: its child when the condition holds (recorded with this step's checkpoint,
    /// which comes right after), else the input passes through, the step skipped.
    async fn run_when(
        &self,
        condition: &crate::workflow::ConditionFn,
        child: &Step,
        ctx: StepContext,
        children: &Children,
    ) -> StepOutcome {
        let holds = AssertUnwindSafe(condition(ctx.clone()))
            .catch_unwind()
            .await
            .map_err(|_| StepError::failed("the condition panicked"))?;
        if !holds {
            return Ok((ctx.input, false));
        }
        let (out, record) = self
            .run_child_step(&ctx, child, ctx.cancel.clone(), children)
            .await?;
        children.keep(&child.id, record);
        Ok((out, true))
    }

    /// `andAll`: every child at once, each stored as it finishes; a re-run skips the finished
    /// ones. The outputs in the children's order.
    async fn run_all(&self, list: &[Step], ctx: &StepContext, children: &Children) -> StepOutcome {
        let futs = list.iter().map(|c| async move {
            if let Some(out) = Self::finished_child(ctx, c) {
                return Ok(out);
            }
            let (out, record) = self
                .run_child_step(ctx, c, ctx.cancel.child_token(), children)
                .await?;
            self.store_child(children, &c.id, record).await?;
            Ok::<_, StepError>(out)
        });
        let outs = try_join_all(futs).await?;
        Ok((Value::Array(outs), true))
    }

    /// `andRace`: every child at once; the first to finish wins (and is stored: one record, so
    /// a re-run finds one winner), the others are cancelled.
    async fn run_race(&self, list: &[Step], ctx: StepContext, children: &Children) -> StepOutcome {
        if list.is_empty() {
            return Ok((ctx.input, true));
        }
        // The winner of an interrupted attempt wins again.
        if let Some(out) = list.iter().find_map(|c| Self::finished_child(&ctx, c)) {
            return Ok((out, true));
        }
        let tokens: Vec<CancellationToken> =
            list.iter().map(|_| ctx.cancel.child_token()).collect();
        let futs: Vec<_> = list
            .iter()
            .zip(&tokens)
            .map(|(c, t)| {
                let ctx = &ctx;
                Box::pin(async move { self.run_child_step(ctx, c, t.clone(), children).await })
            })
            .collect();
        let (result, winner, rest) = select_all(futs).await;
        for (i, t) in tokens.iter().enumerate() {
            if i != winner {
                t.cancel();
            }
        }
        drop(rest);
        let (out, record) = result?;
        self.store_child(children, &list[winner].id, record).await?;
        Ok((out, true))
    }

    /// `andForEach`: the mapped step on each item, at most `concurrency` at once, each item's
    /// record (`<step>/<index>`) stored as it finishes; a re-run skips the finished ones. The
    /// outputs in the items' order.
    async fn run_for_each(
        &self,
        each: ForEach<'_>,
        ctx: &StepContext,
        children: &Children,
    ) -> StepOutcome {
        use futures::{StreamExt, TryStreamExt};
        let items = match each.items {
            Value::Array(items) => items,
            other => {
                let got = match other {
                    Value::Null => "null",
                    Value::Bool(_) => "a boolean",
                    Value::Number(_) => "a number",
                    Value::String(_) => "a string",
                    _ => "an object",
                };
                return Err(StepError::failed(format!(
                    "andForEach {} maps over an array; it got {got}",
                    ctx.step_id
                )));
            }
        };
        if items.len() > crate::workflow::MAX_FOREACH_ITEMS {
            return Err(StepError::failed(format!(
                "andForEach {} maps at most {} items; it got {}",
                ctx.step_id,
                crate::workflow::MAX_FOREACH_ITEMS,
                items.len()
            )));
        }
        let concurrency = each
            .concurrency
            .clamp(1, crate::workflow::MAX_FOREACH_CONCURRENCY);
        let count = items.len();
        let finished_before = (0..count)
            .filter(|i| {
                ctx.step(&entry_id(&ctx.step_id, &i.to_string()))
                    .is_some_and(StepRecord::is_finished)
            })
            .count();
        let done = Arc::new(std::sync::atomic::AtomicUsize::new(finished_before));
        let mut outputs: Vec<Value> = vec![Value::Null; count];
        let results = futures::stream::iter(items.into_iter().enumerate())
            .map(|(index, item)| {
                let done = done.clone();
                async move {
                    let id = entry_id(&ctx.step_id, &index.to_string());
                    if let Some(done) = ctx.step(&id).filter(|r| r.is_finished()) {
                        return Ok((index, done.output.clone().unwrap_or(Value::Null)));
                    }
                    let item_ctx = StepContext {
                        input: item.clone(),
                        cancel: ctx.cancel.child_token(),
                        step_id: each.step.id.clone(),
                        foreach_item: Some(ForEachItem::new(index, count, done.clone())),
                        ..ctx.clone()
                    };
                    let started_at = self.inner.clock.now();
                    let (out, ran) = self.run_step(each.step, item_ctx, children.clone()).await?;
                    let record = self.child_record(ctx, item, started_at, out.clone(), ran);
                    self.store_child(children, &id, record).await?;
                    Ok::<_, StepError>((index, out))
                }
            })
            .buffer_unordered(concurrency);
        results
            .try_for_each(|(index, out)| {
                outputs[index] = out;
                std::future::ready(Ok(()))
            })
            .await?;
        Ok((Value::Array(outputs), true))
    }

    /// `andAgent`: the registered agent on the prompt the step builds, its answer shaped by
    /// `output` when given.
    async fn run_agent_step(
        &self,
        agent_id: &str,
        prompt: &crate::workflow::MapFn,
        output: Option<&Arc<dyn Fn(Value) -> Value + Send + Sync>>,
        ctx: &StepContext,
    ) -> StepOutcome {
        let runner = self
            .inner
            .agents
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| StepError::failed("no agent runner is configured"))?;
        let answer = runner
            .run_agent(agent_id, prompt(ctx), &ctx.context, ctx.cancel.clone())
            .await
            .map_err(|e| StepError::failed(format!("agent {agent_id}: {e}")))?;
        let out = match output {
            Some(map) => map(answer),
            None => answer,
        };
        Ok((out, true))
    }

    /// Runs a sub-workflow as a child execution; a child that suspends suspends the parent
    /// step, and resuming the parent resumes the child.
    pub(super) async fn run_child(
        &self,
        workflow_id: &str,
        input_map: Option<&crate::workflow::MapFn>,
        ctx: &StepContext,
    ) -> Result<Value, StepError> {
        let input = input_map
            .map(|m| m(ctx))
            .unwrap_or_else(|| ctx.input.clone());
        let id = child_execution_id(&ctx.execution_id, &ctx.step_id, ctx.attempt);
        self.run_child_as(workflow_id, None, input, ctx, id).await
    }

    /// [`Engine::run_child`] with its input and its execution id given (a step that starts
    /// several, [`crate::workflow::StepJournal::run_workflow`]).
    pub(crate) async fn run_child_as(
        &self,
        workflow_id: &str,
        version: Option<&str>,
        input: Value,
        ctx: &StepContext,
        id: String,
    ) -> Result<Value, StepError> {
        let workflow_id = &WorkflowId::from(workflow_id);
        // The child this step suspended for, when it is that one: a resume goes to it.
        let child_id = ctx
            .suspend_data
            .as_ref()
            .and_then(|d| d.get("childExecutionId"))
            .and_then(Value::as_str)
            .filter(|suspended_for| *suspended_for == id)
            .map(ExecutionId::from);
        let mut pause = DB_RETRY_FIRST;
        let outcome = loop {
            let tried = match (&child_id, &ctx.resume_data) {
                (Some(child_id), Some(resume)) => {
                    match self
                        .resume(workflow_id, child_id, resume.clone(), None)
                        .await
                    {
                        // The resume was taken already (sent before the database failed, or
                        // by this step's run that a crash or a hand-off interrupted): follow it.
                        Err(EngineError::NotSuspended { .. }) => {
                            match self.attach(workflow_id, child_id, 0).await {
                                Ok(handle) => handle.finish().await,
                                Err(e) => Err(e),
                            }
                        }
                        other => other,
                    }
                }
                _ => {
                    let input = input.clone();
                    let mut context = (*ctx.context).clone();
                    context.insert("parentExecutionId".into(), json!(ctx.execution_id));
                    context.insert("parentStepId".into(), json!(ctx.step_id));
                    self.execute(
                        workflow_id,
                        input,
                        ExecuteOptions {
                            // One child per attempt of the step, under an id of its own: a
                            // start tried again (the database failed) rejoins it.
                            execution_id: Some(ExecutionId::from(id.clone())),
                            user_id: ctx.user_id().map(UserId::from),
                            context,
                            // A sub-workflow belongs to whoever owns its parent.
                            owner: ctx.owner.as_ref().map(UserId::from),
                            version: version.map(str::to_owned),
                            ..Default::default()
                        },
                    )
                    .await
                }
            };
            match tried {
                // The database went away: try again (the parent's run waits, as its writes do).
                Err(EngineError::Store(e)) if !e.is_the_datas() => {
                    if self
                        .outlast(&ctx.execution_id, Patience::Run, e, &mut pause)
                        .await
                        .is_err()
                    {
                        return Err(StepError::Cancelled);
                    }
                }
                other => break other,
            }
        };
        let rec = outcome.map_err(|e| match e {
            // The child stopped for the shutdown: so does the parent, at this step.
            EngineError::HandedOver(_) | EngineError::LeaseLost(_) | EngineError::ShuttingDown => {
                StepError::Cancelled
            }
            e => StepError::failed(format!("sub-workflow {workflow_id}: {e}")),
        })?;
        match rec.state {
            ExecutionState::Completed { result, .. } => Ok(result),
            ExecutionState::Error { message, .. } => Err(StepError::failed(format!(
                "sub-workflow {workflow_id} failed: {message}"
            ))),
            // The child's own deadline, if any, resumes the child, not this step.
            ExecutionState::Suspended(s) => Err(StepError::Suspend {
                deadline: None,
                event: None,
                reason: s.reason,
                data: Some(
                    json!({"childExecutionId": rec.id, "childWorkflowId": workflow_id, "data": s.data}),
                ),
            }),
            other => Err(StepError::failed(format!(
                "sub-workflow {workflow_id} stopped while {}",
                other.status()
            ))),
        }
    }
}

/// The id of the sub-workflow that `attempt` of the step `step_id` of `parent` starts:
/// `<parent>:<step>:<attempt>`, or a digest of it when that is over the id's length limit.
fn child_execution_id(parent: &str, step_id: &str, attempt: u32) -> String {
    bounded_child_id(format!("{parent}:{step_id}:{attempt}"))
}

/// A child's execution id: `id`, or a digest of it when it is over the id's length limit.
pub(crate) fn bounded_child_id(id: String) -> String {
    if id.len() <= crate::id::MAX_ID_LEN {
        return id;
    }
    format!("child:{}", crate::id::digest(&id))
}

/// Awaits a user step, turning a panic into a step failure.
async fn guarded(fut: crate::workflow::StepFuture) -> Result<Value, StepError> {
    match AssertUnwindSafe(fut).catch_unwind().await {
        Ok(r) => r,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(StepError::failed(format!("the step panicked: {msg}")))
        }
    }
}
