//! A step's own checkpoints: a step that does many things (a durable agent run: model calls and
//! tool calls) records each as it ends, so that a re-run of the step (after a crash, a takeover
//! or a resume) replays what is recorded instead of doing it again.
//!
//! Each entry is a record under the step (`<step>/<key>`) written with its events in one
//! fenced write of the execution (like a checkpoint: a compare-and-set on the version, refused
//! when the lease is lost or the execution was cancelled). Entries a step [`Journal::defer`]s
//! are written with the step's own checkpoint instead (no write of their own), so a step's last
//! entry costs nothing extra.

use super::*;
use chrono::{DateTime, Utc};

/// What a step writes of its own progress while it runs. Cheap to clone.
#[derive(Clone)]
pub struct Journal {
    pub(super) engine: Engine,
    execution_id: Arc<str>,
    workflow_id: Arc<str>,
    step_id: Arc<str>,
    lease: Option<Lease>,
    /// The record as last written (each write starts from it: no read), handed to the run when
    /// the step ends. Held across a write: the step's writes never race each other.
    latest: Arc<tokio::sync::Mutex<Option<ExecutionRecord>>>,
    /// Entries and events to write with the step's checkpoint.
    deferred: Arc<Mutex<Deferred>>,
    /// The step's waits for events in this run of it.
    pub(super) waits: Arc<super::mailbox::Waits>,
}

/// What a step left for its checkpoint to write.
#[derive(Default)]
pub(super) struct Deferred {
    pub(super) entries: Vec<(String, StepRecord)>,
    pub(super) events: Vec<EventKind>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("execution_id", &self.execution_id)
            .field("step_id", &self.step_id)
            .finish()
    }
}

impl Journal {
    pub(super) fn new(
        engine: &Engine,
        rec: &ExecutionRecord,
        step_id: &str,
        lease: Option<&Lease>,
    ) -> Self {
        Self {
            engine: engine.clone(),
            execution_id: rec.id.as_str().into(),
            workflow_id: rec.workflow_id.as_str().into(),
            step_id: step_id.into(),
            lease: lease.cloned(),
            latest: Arc::new(tokio::sync::Mutex::new(Some(rec.clone()))),
            deferred: Arc::default(),
            waits: Arc::default(),
        }
    }

    /// The record id of the entry `key` of this step.
    pub fn entry_id(&self, key: &str) -> String {
        entry_id(&self.step_id, key)
    }

    /// Writes what `change` makes of the execution as it stands (its records, its events) in
    /// one fenced write, like [`Journal::write`]; `change` answers
    /// [`EngineError::Unchanged`] when there is nothing to write: then `Ok(false)`.
    pub(super) async fn write_if<F>(&self, change: F) -> Result<bool, StepError>
    where
        F: Fn(&ExecutionRecord, &mut Vec<EventKind>) -> Result<ExecutionRecord, EngineError>,
    {
        let mut latest = self.latest.lock().await;
        let written = self
            .engine
            .update_held(
                self.lease.as_ref(),
                latest.take(),
                &self.execution_id,
                |r, evs| {
                    if r.state.status() != Status::Running {
                        return Err(EngineError::Cancelled(r.id.clone()));
                    }
                    change(r, evs)
                },
            )
            .await;
        match written {
            Ok(rec) => {
                *latest = Some(rec);
                Ok(true)
            }
            Err(EngineError::Unchanged) => {
                // Nothing written; the record in hand was moved into the write: read it back.
                *latest = self
                    .engine
                    .inner
                    .store
                    .get_to_update(&self.execution_id)
                    .await
                    .ok()
                    .flatten();
                Ok(false)
            }
            Err(e) => {
                tracing::info!(execution_id = %self.execution_id, step_id = %self.step_id, error = %e, "a step's journal write was refused: the step stops");
                Err(StepError::Cancelled)
            }
        }
    }

    /// The execution as this step's writes last left it.
    pub(super) async fn latest(&self) -> Option<ExecutionRecord> {
        self.latest.lock().await.clone()
    }

    /// The record as the step's writes left it (the one it started from when they wrote
    /// nothing; none when a write failed), and what they deferred.
    pub(super) async fn finish(&self) -> (Option<ExecutionRecord>, Deferred) {
        let latest = self.latest.lock().await.take();
        let deferred = std::mem::take(&mut *lock(&self.deferred));
        (latest, deferred)
    }
}

/// The record id of the entry `key` of step `step_id`.
pub fn entry_id(step_id: &str, key: &str) -> String {
    format!("{step_id}/{key}")
}

#[async_trait::async_trait]
impl StepJournal for Journal {
    fn step_id(&self) -> &str {
        &self.step_id
    }

    async fn entry(&self, key: &str) -> Option<StepRecord> {
        let latest = self.latest.lock().await;
        let record = latest.as_ref()?.progress.steps.get(&self.entry_id(key))?;
        Some(StepRecord::clone(record))
    }

    async fn has_entries(&self) -> bool {
        let latest = self.latest.lock().await;
        let prefix = self.entry_id("");
        latest.as_ref().is_some_and(|r| {
            r.progress
                .steps
                .range(prefix.clone()..)
                .next()
                .is_some_and(|(id, _)| id.starts_with(&prefix))
        })
    }

    async fn write(
        &self,
        entries: Vec<(String, StepRecord)>,
        events: Vec<EventKind>,
    ) -> Result<(), StepError> {
        let entries: Vec<(String, Arc<StepRecord>)> = entries
            .into_iter()
            .map(|(key, r)| (self.entry_id(&key), Arc::new(r)))
            .collect();
        self.write_if(|r, evs| {
            let mut next = r.clone();
            next.progress.steps_mut().extend(entries.iter().cloned());
            evs.extend(events.iter().cloned());
            Ok(next)
        })
        .await
        .map(|_| ())
    }

    fn defer(&self, entries: Vec<(String, StepRecord)>, events: Vec<EventKind>) {
        let mut deferred = lock(&self.deferred);
        deferred
            .entries
            .extend(entries.into_iter().map(|(key, r)| (self.entry_id(&key), r)));
        deferred.events.extend(events);
    }

    async fn logged_events(&self) -> i64 {
        self.latest
            .lock()
            .await
            .as_ref()
            .map_or(0, |r| r.last_event)
    }

    fn draining(&self) -> bool {
        self.engine.is_draining()
    }

    fn announce(&self, kind: EventKind) {
        self.engine
            .emit_for(&self.execution_id, &self.workflow_id, kind);
    }

    async fn run_workflow(
        &self,
        ctx: &StepContext,
        workflow_id: &str,
        version: Option<&str>,
        input: Value,
        key: &str,
    ) -> Result<Value, StepError> {
        // An id's characters only: `p1:workflow.do.0.child` for the key `workflow/do/0/child`.
        let key: String = key
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.:@".contains(c) {
                    c
                } else {
                    '.'
                }
            })
            .collect();
        let id = super::run::bounded_child_id(format!("{}:{key}", ctx.execution_id));
        self.engine
            .run_child_as(workflow_id, version, input, ctx, id)
            .await
    }

    async fn wait_for_any_event(
        &self,
        ctx: &StepContext,
        awaited: &[crate::state::AwaitedEvent],
        deadline: Option<DateTime<Utc>>,
    ) -> Result<Option<(usize, Value)>, StepError> {
        self.wait_for(ctx, awaited, deadline).await
    }
}
