//! Queues: a queue's declaration and load (`GET /queues`, `GET /queues/{name}`), and an
//! execution's place in its queue (the state's `queue`).

use agentry_engine::queue::{Queue, QueuePlace};
use serde::Serialize;
use utoipa::ToSchema;

use super::Timestamp;

/// An execution's place in its workflow's queue.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueState {
    /// The queue's name.
    pub name: String,
    /// Its concurrency key's value (when the queue has a key).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub key: Option<String>,
    /// Higher starts first.
    pub priority: i64,
    /// When it entered the queue (again, after a retry).
    pub queued_at: Timestamp,
    /// When a replica started it (by the database's clock); absent while it waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub started_at: Option<Timestamp>,
}

impl From<&QueuePlace> for QueueState {
    fn from(p: &QueuePlace) -> Self {
        Self {
            name: p.name.clone(),
            key: p.key.clone(),
            priority: p.priority,
            queued_at: p.queued_at.into(),
            started_at: p.started_at.map(Timestamp),
        }
    }
}

/// A queue's per-key limit.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrencyKeyView {
    /// The JSON pointer into the input whose value is the key.
    #[schema(example = "/customerId")]
    pub pointer: String,
    /// At most this many in flight per key (`null`: no limit, the keys only take turns).
    #[schema(required = true)]
    pub limit: Option<u32>,
}

/// A queue's rate limit: at most `limit` starts in any window of `periodMs`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RateLimitView {
    pub limit: u32,
    pub period_ms: u64,
    /// Counted per key, not over the whole queue.
    pub per_key: bool,
}

/// How many executions of one key wait, run or are suspended (holding a slot).
#[derive(Debug, Default, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueLoad {
    pub queued: u64,
    pub running: u64,
    pub suspended: u64,
    /// When the oldest waiting one entered the queue.
    #[schema(required = true)]
    pub oldest_queued_at: Option<Timestamp>,
}

/// A queue: its declaration and how loaded it is.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueView {
    #[schema(example = "enrich-customer")]
    pub name: String,
    /// The workflow that declares it.
    pub workflow_id: String,
    /// At most this many in flight (running or suspended) across all replicas (`null`: no
    /// limit).
    #[schema(required = true)]
    pub concurrency: Option<u32>,
    #[schema(required = true)]
    pub concurrency_key: Option<ConcurrencyKeyView>,
    #[schema(required = true)]
    pub rate_limit: Option<RateLimitView>,
    /// The JSON pointer into the input of its priority (`null`: only `options.priority`).
    #[schema(required = true)]
    pub priority: Option<String>,
    #[serde(flatten)]
    pub load: QueueLoad,
    /// How long the oldest waiting one has waited, in milliseconds.
    #[schema(required = true)]
    pub oldest_wait_ms: Option<u64>,
}

impl QueueView {
    pub fn of(workflow_id: &str, q: &Queue, load: QueueLoad, oldest_wait_ms: Option<u64>) -> Self {
        Self {
            name: q.name().to_owned(),
            workflow_id: workflow_id.to_owned(),
            concurrency: q.concurrency_limit(),
            concurrency_key: q.key_rule().map(|k| ConcurrencyKeyView {
                pointer: k.pointer.clone(),
                limit: k.limit,
            }),
            rate_limit: q.rate().map(|r| RateLimitView {
                limit: r.limit,
                period_ms: u64::try_from(r.period.as_millis()).unwrap_or(u64::MAX),
                per_key: r.per_key,
            }),
            priority: q.priority_pointer().map(str::to_owned),
            load,
            oldest_wait_ms,
        }
    }
}

/// One key of a queue and its load.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueKeyView {
    /// The key's value (`""`: executions without one).
    pub key: String,
    #[serde(flatten)]
    pub load: QueueLoad,
}

/// `GET /queues/{name}`: the queue and its busiest keys.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueDetail {
    #[serde(flatten)]
    pub queue: QueueView,
    /// Its keys with executions waiting, running or suspended, the most waiting first (at
    /// most 100; none for a queue without a key).
    pub keys: Vec<QueueKeyView>,
}
