//! The persistence boundary: what the engine stores, and the trait a database implements.
//!
//! Every write of an execution is a compare-and-set on its `version`: the store writes the new
//! record only if the stored version is still the one the writer read. Two concurrent resumes (or
//! a suspend request racing a checkpoint) therefore never both win; the loser re-reads and
//! re-applies its transition to the fresh state, where the state machine may refuse it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::state::{ExecutionState, Status};

/// One execution of a workflow, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionRecord {
    pub id: String,
    pub workflow_id: String,
    pub state: ExecutionState,
    /// The input the execution was started with.
    pub input: Value,
    /// The context map: caller-supplied entries, `userId` and `user` when known.
    pub context: Map<String, Value>,
    pub user_id: Option<String>,
    /// The verified user who started it (`None` when authentication was off): in strict mode
    /// only this user, or an admin, may read or act on it.
    pub owner: Option<String>,
    /// The process running it (while `running`), and the fencing epoch of that hold.
    pub lease: Option<Lease>,
    pub start_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub progress: Progress,
    /// Incremented by every write; the compare-and-set token.
    pub version: i64,
}

/// A process's hold on a running execution. Its expiry lives in the database only (renewed by
/// every write and heartbeat, compared with the database's clock), so no two hosts' clocks are
/// ever compared. Every claim bumps `epoch`: a process that lost its lease finds a newer epoch at
/// its next write and stops, so it can never commit for that execution again (fencing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The node id of the process holding it.
    pub node: String,
    /// Bumped by every claim.
    pub epoch: i64,
    /// How long the holder may stay silent before the lease expires.
    pub ttl: Duration,
}

impl Lease {
    /// Whether `other` is this very hold (same node, same epoch).
    pub fn is(&self, other: &Lease) -> bool {
        self.node == other.node && self.epoch == other.epoch
    }

    /// The ttl in whole milliseconds, as stored.
    pub fn ttl_ms(&self) -> i64 {
        i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX)
    }
}

/// How far an execution got: the checkpoint written after every step.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// Index of the next step to run.
    pub next_step: usize,
    /// Every step that ran so far, by step id (children of `andAll`/`andRace` included).
    pub steps: Map<String, Value>,
}

/// The stored outcome of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepRecord {
    pub input: Value,
    pub output: Value,
    /// `completed`, or `skipped` for an `andWhen` whose condition did not hold.
    pub status: String,
}

/// Which executions to list.
#[derive(Debug, Clone, Default)]
pub struct ExecutionFilter {
    pub workflow_id: Option<String>,
    pub status: Option<Status>,
    pub limit: Option<u32>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("execution {0} already exists")]
    Duplicate(String),
    #[error("stored execution {id} is corrupt: {reason}")]
    Corrupt { id: String, reason: String },
    #[error("database error: {0}")]
    Database(String),
}

/// Where executions live. Implemented in memory here and on SQLite and PostgreSQL by
/// `agentry-store`.
#[async_trait]
pub trait ExecutionStore: Send + Sync + 'static {
    /// Adds a new execution; [`StoreError::Duplicate`] if the id is taken.
    async fn insert(&self, record: &ExecutionRecord) -> Result<(), StoreError>;

    /// Reads one execution.
    async fn get(&self, id: &str) -> Result<Option<ExecutionRecord>, StoreError>;

    /// Replaces the stored execution with `record` if the stored version is `expected_version`.
    /// Returns `false` (and writes nothing) when the version has moved on or the row is gone.
    async fn compare_and_set(
        &self,
        record: &ExecutionRecord,
        expected_version: i64,
    ) -> Result<bool, StoreError>;

    /// Lists executions, oldest first.
    async fn list(&self, filter: &ExecutionFilter) -> Result<Vec<ExecutionRecord>, StoreError>;

    /// Extends every lease `node` holds on a running execution by its ttl, in one statement that
    /// writes no execution data. Returns how many were renewed.
    async fn renew_leases(&self, node: &str) -> Result<u64, StoreError>;

    /// Takes up to `limit` running executions whose lease has expired (or that have none), and,
    /// with `own`, those `node` itself holds (a restarted process fencing its previous
    /// incarnation): each gets a lease for `node` with a bumped epoch and a bumped version, in
    /// one conditional statement, so that of several processes claiming at once only one gets
    /// each execution.
    async fn claim_orphans(
        &self,
        node: &str,
        ttl: Duration,
        own: bool,
        limit: u32,
    ) -> Result<Vec<ExecutionRecord>, StoreError>;

    /// Lets the leases `node` holds on running executions expire now, so that another process
    /// takes them at once (a graceful shutdown hands its work over).
    async fn release_leases(&self, node: &str) -> Result<u64, StoreError>;
}

/// Milliseconds since the epoch by this process's clock (the in-memory store's "database clock").
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A store that keeps everything in process memory: for tests, examples and tools that need no
/// database.
#[derive(Debug, Default)]
pub struct MemoryStore {
    rows: Mutex<HashMap<String, (ExecutionRecord, Option<i64>)>>,
}

/// When a lease written now on `r` expires (none unless it runs and is held).
fn expiry(r: &ExecutionRecord) -> Option<i64> {
    match (&r.lease, r.state.status()) {
        (Some(l), Status::Running) => Some(now_ms().saturating_add(l.ttl_ms())),
        _ => None,
    }
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the expiry of every lease `node` holds on a running execution; returns how many.
    fn set_expiries(
        &self,
        node: &str,
        expires_at: impl Fn(&ExecutionRecord) -> Option<i64>,
    ) -> u64 {
        let mut n = 0;
        for (r, expires) in self.rows().values_mut() {
            if r.state.status() == Status::Running
                && r.lease.as_ref().is_some_and(|l| l.node == node)
            {
                *expires = expires_at(r);
                n += 1;
            }
        }
        n
    }

    fn rows(&self) -> std::sync::MutexGuard<'_, HashMap<String, (ExecutionRecord, Option<i64>)>> {
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl ExecutionStore for MemoryStore {
    async fn insert(&self, record: &ExecutionRecord) -> Result<(), StoreError> {
        let mut rows = self.rows();
        if rows.contains_key(&record.id) {
            return Err(StoreError::Duplicate(record.id.clone()));
        }
        rows.insert(record.id.clone(), (record.clone(), expiry(record)));
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<ExecutionRecord>, StoreError> {
        Ok(self.rows().get(id).map(|(r, _)| r.clone()))
    }

    async fn compare_and_set(
        &self,
        record: &ExecutionRecord,
        expected_version: i64,
    ) -> Result<bool, StoreError> {
        let mut rows = self.rows();
        match rows.get_mut(&record.id) {
            Some(row) if row.0.version == expected_version => {
                // The same hold keeps its expiry (only heartbeats renew it); a new one gets a
                // full ttl; a stopped execution none.
                let same_hold =
                    row.0.state.status() == Status::Running && row.0.lease == record.lease;
                let expires = match record.state.status() {
                    Status::Running if same_hold => row.1,
                    _ => expiry(record),
                };
                *row = (record.clone(), expires);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn list(&self, filter: &ExecutionFilter) -> Result<Vec<ExecutionRecord>, StoreError> {
        let mut out: Vec<ExecutionRecord> = self
            .rows()
            .values()
            .map(|(r, _)| r)
            .filter(|r| {
                filter
                    .workflow_id
                    .as_ref()
                    .is_none_or(|w| *w == r.workflow_id)
                    && filter.status.is_none_or(|s| s == r.state.status())
            })
            .cloned()
            .collect();
        out.sort_by(|a, b| a.start_at.cmp(&b.start_at).then(a.id.cmp(&b.id)));
        if let Some(limit) = filter.limit {
            out.truncate(limit as usize);
        }
        Ok(out)
    }

    async fn renew_leases(&self, node: &str) -> Result<u64, StoreError> {
        Ok(self.set_expiries(node, expiry))
    }

    async fn claim_orphans(
        &self,
        node: &str,
        ttl: Duration,
        own: bool,
        limit: u32,
    ) -> Result<Vec<ExecutionRecord>, StoreError> {
        let now = now_ms();
        let mut out = Vec::new();
        for (r, expires) in self.rows().values_mut() {
            if out.len() >= limit as usize {
                break;
            }
            let held_by_me = r.lease.as_ref().is_some_and(|l| l.node == node);
            let claimable = r.state.status() == Status::Running
                && (expires.is_none_or(|e| e < now) || (own && held_by_me));
            if !claimable {
                continue;
            }
            r.lease = Some(Lease {
                node: node.to_owned(),
                epoch: r.lease.as_ref().map_or(0, |l| l.epoch) + 1,
                ttl,
            });
            r.version += 1;
            *expires = expiry(r);
            out.push(r.clone());
        }
        Ok(out)
    }

    async fn release_leases(&self, node: &str) -> Result<u64, StoreError> {
        Ok(self.set_expiries(node, |_| Some(0)))
    }
}
