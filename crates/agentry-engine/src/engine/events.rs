//! The durable event log as the engine writes and follows it: events are numbered and sent
//! once their write is committed; followers replay the stored log and wait for wake-ups.

use super::*;

/// How many stored events a follower reads at once.
pub(super) const FOLLOW_BATCH: u32 = 500;

/// The wake-up that concerns every execution (the database's notifications may have been
/// missed: a listener reconnected).
pub const WAKE_ALL: &str = "*";

impl Engine {
    /// Re-attaches to an execution of `workflow_id`: its events after number `after` (0: all),
    /// then each new one as it is written, on whichever process runs it, until it stops running;
    /// then its `workflow-result`.
    pub async fn attach(
        &self,
        workflow_id: &WorkflowId,
        execution_id: &ExecutionId,
        after: i64,
    ) -> Result<RunHandle, EngineError> {
        self.require_workflow(workflow_id)?;
        self.load(workflow_id, execution_id).await?;
        Ok(self.follower(execution_id, after))
    }

    /// [`Engine::attach`] to an execution of whichever workflow (`None` when there is no such
    /// execution).
    pub async fn attach_any(
        &self,
        execution_id: &ExecutionId,
        after: i64,
    ) -> Result<Option<RunHandle>, EngineError> {
        let found = self.inner.store.get(execution_id).await?;
        Ok(found.map(|_| self.follower(execution_id, after)))
    }

    /// A handle whose events follow `execution_id`'s log after `after`, in a task of its own.
    pub(super) fn follower(&self, execution_id: &str, after: i64) -> RunHandle {
        let (tx, rx) = mpsc::unbounded_channel();
        let engine = self.clone();
        let id = ExecutionId::from(execution_id);
        RunHandle {
            execution_id: id.clone(),
            events: rx,
            outcome: tokio::spawn(async move { engine.follow(&id, after, tx).await }),
            // A follower reads the store: a database away fails its reads at once.
            stalled: tokio::sync::watch::channel(false).1,
            patience: self.inner.config.db_patience,
            queue_wait: None,
        }
    }

    /// Sends `id`'s stored events after number `after` to `tx`, then each new one as it is
    /// written (woken by this process's writes, or by the database's notifications of another
    /// process's), until the execution stops running (or waiting in its queue); then its
    /// `workflow-result`. Answers with
    /// the record it ended with (or stood at when the receiver went away). When this process
    /// begins to drain, the last event is a `workflow-handover` instead (the client follows on
    /// another server).
    pub(super) async fn follow(
        &self,
        id: &str,
        mut after: i64,
        tx: mpsc::UnboundedSender<WorkflowEvent>,
    ) -> Result<ExecutionRecord, EngineError> {
        let gone = || EngineError::Internal(format!("execution {id} disappeared"));
        // Subscribed before the first read: no write between a read and the wait is missed.
        let mut wakeups = self.inner.wakeups.subscribe();
        loop {
            // The header before the events: the events of a status change are written with it,
            // so the events read next include them all.
            let rec = self.inner.store.get(id).await?.ok_or_else(gone)?;
            loop {
                let batch = self
                    .inner
                    .store
                    .events_after(id, after, FOLLOW_BATCH)
                    .await?;
                let full = batch.len() == FOLLOW_BATCH as usize;
                for ev in batch {
                    after = ev.seq.unwrap_or(after);
                    if tx.send(ev).is_err() {
                        return Ok(rec);
                    }
                }
                if !full {
                    break;
                }
            }
            if !matches!(rec.state.status(), Status::Running | Status::Queued) {
                let _ = tx.send(WorkflowEvent {
                    execution_id: rec.id.clone(),
                    workflow_id: rec.workflow_id.clone(),
                    seq: None,
                    timestamp: rec.updated_at,
                    kind: EventKind::WorkflowResult {
                        execution: Box::new(rec.clone()),
                    },
                });
                return Ok(rec);
            }
            loop {
                tokio::select! {
                    woke = wakeups.recv() => match woke {
                        Ok(w) if &*w == id || &*w == WAKE_ALL => break,
                        Ok(_) => {}
                        Err(broadcast::error::RecvError::Lagged(_)) => break,
                        Err(broadcast::error::RecvError::Closed) => return Ok(rec),
                    },
                    _ = tx.closed() => return Ok(rec),
                    // This server stops: the follower goes to another one.
                    _ = self.inner.draining.cancelled() => {
                        let handover = EngineError::HandedOver(rec.id.clone());
                        let _ = tx.send(WorkflowEvent {
                            execution_id: rec.id.clone(),
                            workflow_id: rec.workflow_id.clone(),
                            seq: None,
                            timestamp: self.inner.clock.now(),
                            kind: EventKind::WorkflowHandover {
                                message: handover.to_string(),
                            },
                        });
                        return Err(handover);
                    }
                }
            }
        }
    }

    /// The events of a write to `rec`, numbered after `last` (and `rec.last_event` set to the
    /// last one's number).
    pub(super) fn numbered(
        &self,
        rec: &mut ExecutionRecord,
        last: i64,
        kinds: Vec<EventKind>,
    ) -> Vec<WorkflowEvent> {
        let at = self.inner.clock.now();
        let events: Vec<WorkflowEvent> = kinds
            .into_iter()
            .zip(last + 1..)
            .map(|(kind, seq)| WorkflowEvent {
                execution_id: rec.id.clone(),
                workflow_id: rec.workflow_id.clone(),
                seq: Some(seq),
                timestamp: at,
                kind,
            })
            .collect();
        rec.last_event = last + events.len() as i64;
        events
    }

    /// Sends committed events to this process's subscribers, and wakes the followers of their
    /// execution.
    pub(super) fn publish(&self, events: Vec<WorkflowEvent>) {
        let Some(first) = events.first() else {
            return;
        };
        let id = first.execution_id.clone();
        for ev in events {
            self.send(ev);
        }
        self.wake_up_followers(&id);
    }

    /// Sends an event that is not stored (the end of a run, a handover).
    pub(super) fn emit_for(&self, execution_id: &str, workflow_id: &str, kind: EventKind) {
        self.send(WorkflowEvent {
            execution_id: execution_id.to_owned(),
            workflow_id: workflow_id.to_owned(),
            seq: None,
            timestamp: self.inner.clock.now(),
            kind,
        });
    }

    pub(super) fn send(&self, ev: WorkflowEvent) {
        // Cloned for each receiver but the last, which takes the event itself (a run usually
        // has one subscriber and nobody listens to every event).
        let everyone = self.inner.all_events.receiver_count() > 0;
        let mut live = lock(&self.inner.live);
        let run = live.get_mut(&ev.execution_id);
        let mut ev = Some(ev);
        if let Some(run) = run {
            if let Some(seq) = ev.as_ref().and_then(|e| e.seq) {
                run.sent = run.sent.max(seq);
            }
            let last = run.subscribers.len().saturating_sub(1);
            let mut i = 0;
            run.subscribers.retain(|s| {
                let this = if i == last && !everyone {
                    ev.take()
                } else {
                    ev.clone()
                };
                i += 1;
                this.is_some_and(|e| s.send(e).is_ok())
            });
        }
        drop(live);
        if let Some(ev) = ev.filter(|_| everyone) {
            let _ = self.inner.all_events.send(ev);
        }
    }

    /// Wakes whoever follows `execution_id`'s log in this process: its log has grown or its
    /// status changed. The store's notifications from other processes (PostgreSQL
    /// `LISTEN/NOTIFY`) come in here too; [`WAKE_ALL`] as the id wakes every follower.
    pub fn wake(&self, execution_id: &ExecutionId) {
        self.wake_up_followers(execution_id);
    }

    /// The ids of the executions whose log grew or whose status changed, as this process learns
    /// of them (its own writes, the database's notifications of other processes'), and
    /// [`WAKE_ALL`] when any may have.
    pub fn subscribe_wakeups(&self) -> broadcast::Receiver<Arc<str>> {
        self.inner.wakeups.subscribe()
    }

    /// [`Engine::wake`] by the id's text (the ids of stored records, [`WAKE_ALL`]).
    pub(super) fn wake_up_followers(&self, execution_id: &str) {
        let _ = self.inner.wakeups.send(execution_id.into());
    }
}
