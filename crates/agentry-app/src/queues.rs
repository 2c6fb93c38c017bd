//! The queues' use cases: each queue's declaration and load, counted from the store (strict
//! mode: only the caller's own executions, an admin's all).

use std::collections::BTreeMap;

use agentry_engine::Status;
use agentry_engine::queue::{Queue, QueueCount};

use crate::App;
use crate::caller::Caller;
use crate::error::{AppError, Code};
use crate::wire::Timestamp;
use crate::wire::queues::{QueueDetail, QueueKeyView, QueueLoad, QueueView};

/// The most keys `GET /queues/{name}` lists.
pub const MAX_KEYS_SHOWN: usize = 100;

impl QueueLoad {
    fn add(&mut self, c: &QueueCount) {
        match c.status {
            Status::Queued => {
                self.queued += c.count;
                if let Some(oldest) = c.oldest {
                    self.oldest_queued_at = Some(Timestamp(
                        self.oldest_queued_at.map_or(oldest, |t| t.0.min(oldest)),
                    ));
                }
            }
            Status::Running => self.running += c.count,
            Status::Suspended => self.suspended += c.count,
            _ => {}
        }
    }
}

impl App {
    /// Every queue the registered workflows declare, with its load.
    pub async fn queues(&self, caller: &Caller) -> Result<Vec<QueueView>, AppError> {
        let mut out = Vec::new();
        for (wf, queue) in self.engine.queues() {
            let counts = self.queue_counts(caller, &queue).await?;
            out.push(self.queue_view(wf.id(), &queue, &counts));
        }
        Ok(out)
    }

    /// One queue, with its load per key.
    pub async fn queue(&self, caller: &Caller, name: &str) -> Result<QueueDetail, AppError> {
        let (wf, queue) = self
            .engine
            .queues()
            .into_iter()
            .find(|(_, q)| q.name() == name)
            .ok_or_else(|| AppError::new(Code::QueueNotFound, format!("Queue {name} not found")))?;
        let counts = self.queue_counts(caller, &queue).await?;
        let mut keys: BTreeMap<String, QueueLoad> = BTreeMap::new();
        for c in counts.iter().filter(|c| c.key.is_some()) {
            keys.entry(c.key.clone().unwrap_or_default())
                .or_default()
                .add(c);
        }
        let mut keys: Vec<QueueKeyView> = keys
            .into_iter()
            .map(|(key, load)| QueueKeyView { key, load })
            .collect();
        keys.sort_by(|a, b| {
            (b.load.queued, b.load.running + b.load.suspended, &a.key).cmp(&(
                a.load.queued,
                a.load.running + a.load.suspended,
                &b.key,
            ))
        });
        keys.truncate(MAX_KEYS_SHOWN);
        Ok(QueueDetail {
            queue: self.queue_view(wf.id(), &queue, &counts),
            keys,
        })
    }

    async fn queue_counts(
        &self,
        caller: &Caller,
        queue: &Queue,
    ) -> Result<Vec<QueueCount>, AppError> {
        let owner = self.policy.list_owner(caller)?;
        self.engine
            .queue_counts(queue.name(), owner.as_ref())
            .await
            .map_err(|e| AppError::engine(e, "Failed to read the queue"))
    }

    fn queue_view(&self, workflow_id: &str, queue: &Queue, counts: &[QueueCount]) -> QueueView {
        let mut load = QueueLoad::default();
        for c in counts {
            load.add(c);
        }
        let now = self.engine.clock().now();
        let oldest_wait_ms = load
            .oldest_queued_at
            .map(|t| u64::try_from((now - t.0).num_milliseconds().max(0)).unwrap_or(0));
        QueueView::of(workflow_id, queue, load, oldest_wait_ms)
    }
}
