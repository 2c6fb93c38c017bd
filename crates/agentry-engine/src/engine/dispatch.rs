//! The dispatcher: starts queued executions where their queue's limits allow. Every process
//! runs one (from its first queued start, or [`Engine::start_dispatcher`] at boot); a pass
//! over a queue is the store's [`ExecutionStore::dequeue`], serialized across replicas, and
//! the executions it starts run in the process that dequeued them.

use std::sync::atomic::Ordering;

use super::*;
use crate::queue::{MAX_BATCH, Queue, QueueCount};
use crate::store::Dequeue;

/// How often a dispatcher looks at its queues without being woken (another replica freed a
/// slot, a rate window moved on).
pub const DISPATCH_POLL: Duration = Duration::from_millis(100);

/// How often a dispatcher reports its queues' depth to telemetry.
const DEPTH_EVERY: Duration = Duration::from_secs(1);

impl Engine {
    /// The queues of the registered workflows, each name once (the newest declaration).
    pub fn queues(&self) -> Vec<(Arc<Workflow>, Queue)> {
        let mut out: Vec<(Arc<Workflow>, Queue)> = Vec::new();
        for wf in self.all_versions() {
            let Some(queue) = wf.queue().cloned() else {
                continue;
            };
            match out.iter_mut().find(|(_, q)| q.name() == queue.name()) {
                Some(slot) => *slot = (wf.clone(), queue),
                None => out.push((wf.clone(), queue)),
            }
        }
        out
    }

    /// How many executions of queue `name` are queued, running or suspended, per key and
    /// status (only `owner`'s when given).
    pub async fn queue_counts(
        &self,
        name: &str,
        owner: Option<&UserId>,
    ) -> Result<Vec<QueueCount>, EngineError> {
        Ok(self
            .inner
            .store
            .queue_counts(name, owner.map(UserId::as_str))
            .await?)
    }

    /// Wakes this process's dispatcher (and starts it if it does not run yet).
    pub(super) fn nudge_queues(&self) {
        self.start_dispatcher();
        self.inner.queue_nudge.notify_one();
    }

    /// Starts this process's dispatcher, once: it passes over every queue when woken and
    /// every [`DISPATCH_POLL`], until the drain begins.
    pub fn start_dispatcher(&self) {
        if self.queues().is_empty() || self.inner.dispatching.swap(true, Ordering::SeqCst) {
            return;
        }
        let engine = self.clone();
        tokio::spawn(async move { engine.dispatch_loop().await });
    }

    async fn dispatch_loop(self) {
        let mut tick = tokio::time::interval(DISPATCH_POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut depth_at = tokio::time::Instant::now();
        loop {
            tokio::select! {
                _ = self.inner.queue_nudge.notified() => {}
                _ = tick.tick() => {}
                _ = self.inner.draining.cancelled() => return,
            }
            self.dispatch().await;
            if depth_at.elapsed() >= DEPTH_EVERY {
                depth_at = tokio::time::Instant::now();
                self.report_depths().await;
            }
        }
    }

    /// One round over every queue: each passed over until a pass starts less than a full
    /// batch. Returns how many executions this process started.
    pub async fn dispatch(&self) -> usize {
        let mut started = 0;
        for (_, queue) in self.queues() {
            loop {
                if self.is_draining() {
                    return started;
                }
                match self.dispatch_queue(&queue).await {
                    Ok(n) => {
                        started += n;
                        if n < MAX_BATCH as usize {
                            break;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(queue = queue.name(), error = %e, "a dequeue pass failed");
                        break;
                    }
                }
            }
        }
        started
    }

    /// One dequeue pass over `queue`: starts here what its limits allow.
    async fn dispatch_queue(&self, queue: &Queue) -> Result<usize, EngineError> {
        let workflows = self.runnable_keys();
        let pass = Dequeue {
            queue,
            node: &self.inner.config.node_id,
            ttl: self.inner.config.lease_ttl,
            workflows: &workflows,
            limit: MAX_BATCH,
            now: self.inner.clock.now(),
        };
        let started = self.inner.store.dequeue(&pass).await?;
        if started.is_empty() {
            return Ok(0);
        }
        let waits: Vec<Duration> = started
            .iter()
            .filter_map(|r| {
                let place = r.queue.as_ref()?;
                (place.started_at? - place.queued_at).to_std().ok()
            })
            .collect();
        self.telemetry().dequeued(queue.name(), &waits);
        let n = started.len();
        for rec in started {
            self.run_dequeued(rec);
        }
        Ok(n)
    }

    /// Runs a dequeued execution here from its next step (its start recorded by the run's
    /// first write, with `workflow-start`).
    fn run_dequeued(&self, rec: ExecutionRecord) {
        let Some(wf) = self.registered_for(&rec) else {
            // Not possible: a pass takes only the versions this process has.
            tracing::warn!(execution_id = %rec.id, "dequeued an execution of a version not here");
            return;
        };
        let id = rec.id.clone();
        tracing::info!(execution_id = %id, queue = rec.queue.as_ref().map_or("", |q| q.name.as_str()), "dequeued");
        let entry = Entry {
            step: rec.progress.next_step.min(wf.steps().len()),
            resume: None,
            begun: false,
            announce: Vec::new(),
            timed_out: false,
        };
        drop(self.spawn_run(wf, rec, entry));
    }

    async fn report_depths(&self) {
        let telemetry = self.telemetry();
        for (_, queue) in self.queues() {
            if let Ok(counts) = self.inner.store.queue_counts(queue.name(), None).await {
                let depth = counts
                    .iter()
                    .filter(|c| c.status == Status::Queued)
                    .map(|c| c.count)
                    .sum();
                telemetry.queue_depth(queue.name(), depth);
            }
        }
    }
}
