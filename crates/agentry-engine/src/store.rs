//! The persistence boundary: what the engine stores, and the trait a database implements.
//!
//! An execution is stored as a header (its state, progress and lease) and one record per step.
//! Every write of the header is a compare-and-set on its `version`: the store writes it only if
//! the stored version is still the one the writer read, together with the step records that
//! changed, in one transaction. Two concurrent resumes (or a suspend request racing a
//! checkpoint) therefore never both win; the loser re-reads and re-applies its transition to the
//! fresh state, where the state machine may refuse it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::event::WorkflowEvent;
use crate::id::{UserId, WorkflowId};
use crate::queue::{Candidate, Load, Queue, QueueCount};
pub use crate::record::{
    AttemptFailure, ExecutionRecord, Lease, Progress, StepRecord, StepRecords, StepStatus,
    waiting_for, waiting_for_among, waiting_for_several, workflow_key,
};
use crate::state::{ExecutionState, Status};

/// Which executions a list holds: those of the hosts' workflows, those of the internal
/// workflows (the durable agent runs: [`crate::id::is_internal_workflow`]), or both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Family {
    #[default]
    Workflows,
    Internal,
    All,
}

impl Family {
    /// Whether an execution of `workflow_id` belongs to it.
    pub fn holds(self, workflow_id: &str) -> bool {
        let run = crate::id::is_internal_workflow(workflow_id);
        match self {
            Family::Workflows => !run,
            Family::Internal => run,
            Family::All => true,
        }
    }
}

/// A page of executions, newest first: of one workflow, or of all of them.
#[derive(Debug, Clone)]
pub struct ListQuery {
    /// Only this workflow's executions; `None`: every workflow's (of `family`).
    pub workflow_id: Option<WorkflowId>,
    /// Which executions (ignored when `workflow_id` names one).
    pub family: Family,
    pub status: Option<Status>,
    /// Only the executions this user started (strict mode).
    pub owner: Option<UserId>,
    /// Only those older than this one, by start then id (the page's cursor).
    pub before: Option<(DateTime<Utc>, String)>,
    pub limit: u32,
}

/// How many executions of one workflow are in one status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusCount {
    pub workflow_id: String,
    pub status: Status,
    pub count: u64,
}

/// An event sent by key (`POST /events/{name}`): delivered to the executions waiting for it
/// then, and kept for those that wait for it later, within the retention window
/// ([`crate::engine::EVENT_RETENTION`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PublishedEvent {
    pub name: String,
    /// Whose ids it shares: the verified user who sent it, `""` for a sender without a token
    /// (or a server without a provider). An id is unique per name within its scope, so one
    /// user's id can neither block nor reveal another's.
    pub scope: String,
    /// Unique per name and scope: the same id sent again is the same event (delivered once).
    pub event_id: String,
    pub key: String,
    pub data: Value,
    pub published_at: DateTime<Utc>,
    /// Only executions of this owner may take it (sent by a user in strict mode); `None`: any.
    pub owner: Option<String>,
    /// The executions it woke when it was sent; `None` until its sender recorded them.
    pub woken: Option<Vec<String>>,
}

/// The events kept by key ([`ExecutionStore::published_load`]): with one name and key, and in
/// all; their number and the bytes of their data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PublishedLoad {
    pub key_count: u64,
    pub key_bytes: u64,
    pub count: u64,
    pub bytes: u64,
}

impl PublishedEvent {
    /// The bytes of its data as stored (compact JSON).
    pub fn bytes(&self) -> u64 {
        self.data.to_string().len() as u64
    }
}

/// What a recovery pass may take.
#[derive(Debug, Clone)]
pub struct Claim<'a> {
    /// The claiming process.
    pub node: &'a str,
    /// The ttl of the leases it takes.
    pub ttl: Duration,
    /// Also the executions `node` holds, expired or not: a restarted process fencing its
    /// previous incarnation.
    pub own: bool,
    /// Only executions of these workflow versions, by [`workflow_key`]: the ones the claiming
    /// process can run.
    pub workflows: &'a [String],
    /// At most this many.
    pub limit: u32,
}

/// A dequeue pass over one queue: start what its limits allow, for `node`.
#[derive(Debug, Clone)]
pub struct Dequeue<'a> {
    pub queue: &'a Queue,
    /// The starting process and the ttl of the leases it takes.
    pub node: &'a str,
    pub ttl: Duration,
    /// Only executions of these workflow versions, by [`workflow_key`]: the ones the process
    /// can run.
    pub workflows: &'a [String],
    /// At most this many.
    pub limit: u32,
    /// The time written as the started executions' `updated_at`.
    pub now: DateTime<Utc>,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("execution {0} already exists")]
    Duplicate(String),
    #[error("stored execution {id} is corrupt: {reason}")]
    Corrupt { id: String, reason: String },
    #[error("database error: {0}")]
    Database(String),
    /// The database could not be reached, or did not answer in time (down, restarting, a lost
    /// connection, every connection busy, a disk that is full or read-only). Nothing is known
    /// to have failed for good: the same call may succeed later. A write that ends here may or
    /// may not have been committed.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// A value the database cannot hold (the NUL character in text), named.
    #[error("{0}")]
    Invalid(String),
    /// The database answers but lacks migrations this build needs.
    #[error("{0}")]
    Migrations(String),
}

impl StoreError {
    /// Whether the database was unreachable (a fault of the infrastructure, worth retrying),
    /// not the request or the data.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }

    /// Whether the failure is the data's: a value the database cannot hold. Trying again
    /// cannot help, and the step that made the value fails. Every other failure of the store
    /// is the infrastructure's (or a bug of the store), never the workflow's: a run waits for
    /// the database and tries again, or hands its execution over, and never fails it.
    pub fn is_the_datas(&self) -> bool {
        matches!(self, StoreError::Invalid(_))
    }
}

/// Where executions live. Implemented in memory here and on SQLite and PostgreSQL by
/// `agentry-store`.
#[async_trait]
pub trait ExecutionStore: Send + Sync + 'static {
    /// Adds a new execution and the first `events` of its log, in one transaction;
    /// [`StoreError::Duplicate`] if the id is taken.
    async fn insert(
        &self,
        record: &ExecutionRecord,
        events: &[WorkflowEvent],
    ) -> Result<(), StoreError>;

    /// Reads one execution, its header and its step records as they stood at one moment.
    async fn get(&self, id: &str) -> Result<Option<ExecutionRecord>, StoreError>;

    /// Reads one execution to write it back with [`ExecutionStore::compare_and_set`] on the
    /// version read: like [`ExecutionStore::get`], but a store may read the header first and
    /// its steps after, without a snapshot (cheaper). Its steps may then be newer than its
    /// header (a write landed between the two reads), which the compare-and-set, expecting the
    /// header's version, refuses: such a record is never written back.
    async fn get_to_update(&self, id: &str) -> Result<Option<ExecutionRecord>, StoreError> {
        self.get(id).await
    }

    /// Writes `record` if the stored version is `expected_version`, in one transaction: its
    /// header (state, progress, lease, version; the input, context, user and owner never change
    /// after the insert) and the step records named in `changed_steps` (each written as it is in
    /// `record`, or deleted when `record` has none), nothing else. Returns
    /// `false` (and writes nothing) when the version has moved on or the row is gone.
    async fn compare_and_set(
        &self,
        record: &ExecutionRecord,
        expected_version: i64,
        changed_steps: &[&str],
        events: &[WorkflowEvent],
    ) -> Result<bool, StoreError>;

    /// A page of executions, newest first (by start, then id), read through an index: the cost
    /// does not grow with the table. Headers only: their step records are not loaded.
    async fn list(&self, query: &ListQuery) -> Result<Vec<ExecutionRecord>, StoreError>;

    /// How many executions each workflow has in each status (only `owner`'s when given); a
    /// (workflow, status) pair with none is left out. Reads an index, but every entry of it:
    /// for an overview, not for a hot path.
    async fn count_by_status(&self, owner: Option<&str>) -> Result<Vec<StatusCount>, StoreError>;

    /// How many executions of `workflow_id` are queued, running or suspended on each version
    /// (`None`: recorded before versions); a version with none is left out.
    async fn in_flight_by_version(
        &self,
        workflow_id: &str,
    ) -> Result<Vec<(Option<String>, u64)>, StoreError>;

    /// Deletes up to `limit` finished executions of `statuses` (final ones only) that ended
    /// before `ended_before`, with their steps and events; returns how many. Call it again while
    /// it returns `limit`.
    async fn prune(
        &self,
        ended_before: DateTime<Utc>,
        statuses: &[Status],
        limit: u32,
    ) -> Result<u64, StoreError>;

    /// Up to `limit` suspended executions of the workflow versions `workflows` (by
    /// [`workflow_key`]) whose deadline has passed by the database's clock, the most overdue
    /// first (a durable timer is due). Their ids.
    async fn due_timers(&self, workflows: &[String], limit: u32)
    -> Result<Vec<String>, StoreError>;

    /// Whether the store can serve: its database answers and has every migration this build
    /// knows (`GET /readyz`). `Err` with the reason otherwise.
    async fn check(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Up to `limit` events of an execution's log after number `after`, in order.
    async fn events_after(
        &self,
        execution_id: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<WorkflowEvent>, StoreError>;

    /// Stores one step record of a running execution while `lease` still holds it, without
    /// touching the execution's version: the children of `andAll`/`andRace` as each finishes,
    /// so that a re-run of the composite step skips them. Returns `false` (and writes nothing)
    /// when the lease is no longer held (fencing).
    async fn record_step(
        &self,
        execution_id: &str,
        lease: &Lease,
        step_id: &str,
        step: &StepRecord,
    ) -> Result<bool, StoreError>;

    /// Extends the leases `node` holds on the running executions `ids` (the runs alive in that
    /// process) by their ttl, in one statement that writes no execution data. A lease of `node`
    /// on anything else (a run that died without writing its end) is left to expire, so that a
    /// recovery pass takes it. Returns the ids renewed: a run missing from them is no longer
    /// held by `node` (cancelled, finished elsewhere, or taken over).
    async fn renew_leases(&self, node: &str, ids: &[String]) -> Result<Vec<String>, StoreError>;

    /// Takes running executions whose lease has expired (or that have none), and, with
    /// `claim.own`, those the node itself holds: each gets a lease for the node with a bumped
    /// epoch and a bumped version, in one conditional statement, so that of several processes
    /// claiming at once only one gets each execution.
    async fn claim_orphans(&self, claim: &Claim<'_>) -> Result<Vec<ExecutionRecord>, StoreError>;

    /// One dequeue pass: under a lock of the queue that every replica's pass takes (so that
    /// two passes never both count the same free slot), reads the queue's slots in use and
    /// starts in the rate window, chooses by [`crate::queue::choose`] and starts the chosen
    /// (`queued` to `running`, a lease for `node`, `started_at` by the database's clock).
    /// Answers them, as claimed records to run.
    async fn dequeue(&self, pass: &Dequeue<'_>) -> Result<Vec<ExecutionRecord>, StoreError>;

    /// How many executions of `queue` are queued, running or suspended, per key and status
    /// (only `owner`'s when given).
    async fn queue_counts(
        &self,
        queue: &str,
        owner: Option<&str>,
    ) -> Result<Vec<QueueCount>, StoreError>;

    /// Lets the leases `node` holds on running executions expire now, so that another process
    /// takes them at once (a graceful shutdown hands its work over).
    async fn release_leases(&self, node: &str) -> Result<u64, StoreError>;

    /// Records that `node` is alive with the workflow versions `keys` ([`workflow_key`]), now
    /// by the database's clock.
    async fn announce_node(&self, node: &str, keys: &[String]) -> Result<(), StoreError>;

    /// Forgets `node` (it stops).
    async fn forget_node(&self, node: &str) -> Result<(), StoreError>;

    /// The workflow versions of the nodes announced within the last `within`, by key; empty
    /// when none was.
    async fn live_versions(&self, within: Duration) -> Result<Vec<String>, StoreError>;

    /// Keeps an event sent by key; `false` (and nothing written) when its name, scope and id
    /// are taken: it was sent before.
    async fn publish_event(&self, event: &PublishedEvent) -> Result<bool, StoreError>;

    /// The event `name` sent in `scope` with `event_id`, if kept.
    async fn published_event(
        &self,
        name: &str,
        scope: &str,
        event_id: &str,
    ) -> Result<Option<PublishedEvent>, StoreError>;

    /// How many events (and how many bytes of their data) are kept since `since`: with `name`
    /// and `key`, and in all.
    async fn published_load(
        &self,
        name: &str,
        key: &str,
        since: DateTime<Utc>,
    ) -> Result<PublishedLoad, StoreError>;

    /// Up to `limit` events `name` sent with `key` at `since` or later, oldest first.
    async fn published_events(
        &self,
        name: &str,
        key: &str,
        since: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<PublishedEvent>, StoreError>;

    /// Records which executions a sent event woke.
    async fn record_woken(
        &self,
        name: &str,
        scope: &str,
        event_id: &str,
        woken: &[String],
    ) -> Result<(), StoreError>;

    /// Forgets the events sent before `before`; returns how many.
    async fn prune_published(&self, before: DateTime<Utc>) -> Result<u64, StoreError>;

    /// Up to `limit` ids of suspended executions whose step waits for the event `name` with
    /// `key` (read through an index of [`ExecutionRecord::waiting_for`]; a step that waits for
    /// several events is found by [`waiting_for_among`]: it may find too many, never too
    /// few), oldest first.
    async fn waiting_for_event(
        &self,
        name: &str,
        key: &str,
        limit: u32,
    ) -> Result<Vec<String>, StoreError>;
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
pub struct InMemoryExecutionStore {
    rows: Mutex<HashMap<String, (ExecutionRecord, Option<i64>)>>,
    events: Mutex<HashMap<String, Vec<WorkflowEvent>>>,
    published: Mutex<Vec<PublishedEvent>>,
    nodes: Mutex<HashMap<String, (Vec<String>, i64)>>,
    queues: Mutex<HashMap<String, QueueTurns>>,
}

/// A queue's passes so far, and the pass that served each of its keys last (the round-robin).
type QueueTurns = (i64, HashMap<String, i64>);

/// When a lease written now on `r` expires (none unless it runs and is held).
fn expiry(r: &ExecutionRecord) -> Option<i64> {
    match (&r.lease, r.state.status()) {
        (Some(l), Status::Running) => Some(now_ms().saturating_add(l.ttl_ms())),
        _ => None,
    }
}

impl InMemoryExecutionStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the expiry of every lease `node` holds on a running execution (of those in `ids`,
    /// when given); returns their ids.
    fn set_expiries(
        &self,
        node: &str,
        ids: Option<&[String]>,
        expires_at: impl Fn(&ExecutionRecord) -> Option<i64>,
    ) -> Vec<String> {
        let mut set = Vec::new();
        for (r, expires) in self.rows().values_mut() {
            if r.state.status() == Status::Running
                && r.lease.as_ref().is_some_and(|l| l.node == node)
                && ids.is_none_or(|ids| ids.contains(&r.id))
            {
                *expires = expires_at(r);
                set.push(r.id.clone());
            }
        }
        set
    }

    fn rows(&self) -> std::sync::MutexGuard<'_, HashMap<String, (ExecutionRecord, Option<i64>)>> {
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn published(&self) -> std::sync::MutexGuard<'_, Vec<PublishedEvent>> {
        self.published.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The event logs (locked after `rows` when both are).
    fn log(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<WorkflowEvent>>> {
        self.events.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl ExecutionStore for InMemoryExecutionStore {
    async fn insert(
        &self,
        record: &ExecutionRecord,
        events: &[WorkflowEvent],
    ) -> Result<(), StoreError> {
        let mut rows = self.rows();
        if rows.contains_key(&record.id) {
            return Err(StoreError::Duplicate(record.id.clone()));
        }
        rows.insert(record.id.clone(), (record.clone(), expiry(record)));
        self.log().insert(record.id.clone(), events.to_vec());
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<ExecutionRecord>, StoreError> {
        Ok(self.rows().get(id).map(|(r, _)| r.clone()))
    }

    async fn compare_and_set(
        &self,
        record: &ExecutionRecord,
        expected_version: i64,
        changed_steps: &[&str],
        events: &[WorkflowEvent],
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
                // As the databases do: the header, and only the named step records.
                let mut progress = std::mem::take(&mut row.0.progress);
                for id in changed_steps {
                    match record.progress.steps.get(*id) {
                        Some(step) => progress.steps_mut().insert((*id).to_owned(), step.clone()),
                        None => progress.steps_mut().remove(*id),
                    };
                }
                let steps = progress.steps;
                // What the insert set never changes.
                let first = &row.0;
                let stored = ExecutionRecord {
                    workflow_id: first.workflow_id.clone(),
                    input: first.input.clone(),
                    context: first.context.clone(),
                    user_id: first.user_id.clone(),
                    owner: first.owner.clone(),
                    start_at: first.start_at,
                    progress: Progress {
                        next_step: record.progress.next_step,
                        steps,
                    },
                    ..record.clone()
                };
                *row = (stored, expires);
                self.log()
                    .entry(record.id.clone())
                    .or_default()
                    .extend_from_slice(events);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn list(&self, query: &ListQuery) -> Result<Vec<ExecutionRecord>, StoreError> {
        let mut page: Vec<ExecutionRecord> = self
            .rows()
            .values()
            .map(|(r, _)| r)
            .filter(|r| {
                query
                    .workflow_id
                    .as_ref()
                    .is_none_or(|w| r.workflow_id == w.as_str())
                    && (query.workflow_id.is_some() || query.family.holds(&r.workflow_id))
                    && query.status.is_none_or(|s| s == r.state.status())
                    && query
                        .owner
                        .as_ref()
                        .is_none_or(|o| r.owner.as_deref() == Some(o.as_str()))
                    && query
                        .before
                        .as_ref()
                        .is_none_or(|(at, id)| (r.start_at, &r.id) < (*at, id))
            })
            .map(|r| ExecutionRecord {
                progress: Progress {
                    next_step: r.progress.next_step,
                    steps: Arc::default(),
                },
                ..r.clone()
            })
            .collect();
        page.sort_by(|a, b| (b.start_at, &b.id).cmp(&(a.start_at, &a.id)));
        page.truncate(query.limit as usize);
        Ok(page)
    }

    async fn count_by_status(&self, owner: Option<&str>) -> Result<Vec<StatusCount>, StoreError> {
        let mut counts: BTreeMap<(String, &'static str), (Status, u64)> = BTreeMap::new();
        for (r, _) in self.rows().values() {
            if owner.is_some_and(|o| r.owner.as_deref() != Some(o)) {
                continue;
            }
            let status = r.state.status();
            counts
                .entry((r.workflow_id.clone(), status.as_str()))
                .or_insert((status, 0))
                .1 += 1;
        }
        Ok(counts
            .into_iter()
            .map(|((workflow_id, _), (status, count))| StatusCount {
                workflow_id,
                status,
                count,
            })
            .collect())
    }

    async fn in_flight_by_version(
        &self,
        workflow_id: &str,
    ) -> Result<Vec<(Option<String>, u64)>, StoreError> {
        let mut counts: BTreeMap<Option<String>, u64> = BTreeMap::new();
        for (r, _) in self.rows().values() {
            let live = matches!(
                r.state.status(),
                Status::Queued | Status::Running | Status::Suspended
            );
            if live && r.workflow_id == workflow_id {
                *counts.entry(r.workflow_version.clone()).or_default() += 1;
            }
        }
        Ok(counts.into_iter().collect())
    }

    async fn due_timers(
        &self,
        workflows: &[String],
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        let now = now_ms();
        let mut due: Vec<(i64, String)> = self
            .rows()
            .values()
            .filter(|(r, _)| workflows.contains(&r.workflow_key()))
            .filter_map(|(r, _)| {
                let at = r.state.suspension()?.deadline?.timestamp_millis();
                (at <= now).then(|| (at, r.id.clone()))
            })
            .collect();
        due.sort();
        Ok(due
            .into_iter()
            .take(limit as usize)
            .map(|(_, id)| id)
            .collect())
    }

    async fn prune(
        &self,
        ended_before: DateTime<Utc>,
        statuses: &[Status],
        limit: u32,
    ) -> Result<u64, StoreError> {
        let mut rows = self.rows();
        let doomed: Vec<String> = rows
            .values()
            .map(|(r, _)| r)
            .filter(|r| {
                let status = r.state.status();
                status.is_final()
                    && statuses.contains(&status)
                    && r.state.end_at().is_some_and(|end| end < ended_before)
            })
            .take(limit as usize)
            .map(|r| r.id.clone())
            .collect();
        let mut log = self.log();
        for id in &doomed {
            rows.remove(id);
            log.remove(id);
        }
        // A queue's key is remembered while an execution of it is kept.
        let kept: std::collections::HashSet<(String, String)> = rows
            .values()
            .filter_map(|(r, _)| r.queue.as_ref())
            .map(|q| (q.name.clone(), q.key.clone().unwrap_or_default()))
            .collect();
        for (queue, (_, served)) in self
            .queues
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter_mut()
        {
            served.retain(|key, _| kept.contains(&(queue.clone(), key.clone())));
        }
        Ok(doomed.len() as u64)
    }

    async fn events_after(
        &self,
        execution_id: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<WorkflowEvent>, StoreError> {
        Ok(self
            .log()
            .get(execution_id)
            .map(|log| {
                log.iter()
                    .filter(|e| e.seq.is_some_and(|s| s > after))
                    .take(limit as usize)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn record_step(
        &self,
        execution_id: &str,
        lease: &Lease,
        step_id: &str,
        step: &StepRecord,
    ) -> Result<bool, StoreError> {
        let mut rows = self.rows();
        match rows.get_mut(execution_id) {
            Some((r, _))
                if r.state.status() == Status::Running
                    && r.lease.as_ref().is_some_and(|held| held.is(lease)) =>
            {
                r.progress
                    .steps_mut()
                    .insert(step_id.to_owned(), Arc::new(step.clone()));
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn renew_leases(&self, node: &str, ids: &[String]) -> Result<Vec<String>, StoreError> {
        Ok(self.set_expiries(node, Some(ids), expiry))
    }

    async fn claim_orphans(&self, claim: &Claim<'_>) -> Result<Vec<ExecutionRecord>, StoreError> {
        let now = now_ms();
        let mut out = Vec::new();
        let mut rows = self.rows();
        let mut candidates: Vec<_> = rows.values_mut().collect();
        candidates.sort_by_key(|(r, _)| r.start_at);
        for (r, expires) in candidates {
            if out.len() >= claim.limit as usize {
                break;
            }
            let held_by_me = r.lease.as_ref().is_some_and(|l| l.node == claim.node);
            let claimable = r.state.status() == Status::Running
                && claim.workflows.contains(&r.workflow_key())
                && (expires.is_none_or(|e| e < now) || (claim.own && held_by_me));
            if !claimable {
                continue;
            }
            r.lease = Some(Lease {
                node: claim.node.to_owned(),
                epoch: r.lease.as_ref().map_or(0, |l| l.epoch) + 1,
                ttl: claim.ttl,
            });
            r.version += 1;
            *expires = expiry(r);
            out.push(r.clone());
        }
        Ok(out)
    }

    async fn dequeue(&self, pass: &Dequeue<'_>) -> Result<Vec<ExecutionRecord>, StoreError> {
        let name = pass.queue.name();
        let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        let (passes, served) = queues.entry(name.to_owned()).or_default();
        *passes += 1;
        let mut rows = self.rows();
        let window_start = pass
            .queue
            .rate()
            .map(|r| now_ms() - i64::try_from(r.period.as_millis()).unwrap_or(i64::MAX));
        let mut load = Load::default();
        let mut candidates = Vec::new();
        for (r, _) in rows.values() {
            let Some(place) = r.queue.as_ref().filter(|p| p.name == name) else {
                continue;
            };
            let key = place.key.clone().unwrap_or_default();
            if matches!(r.state.status(), Status::Running | Status::Suspended) {
                *load.in_flight.entry(key.clone()).or_default() += 1;
            }
            if let (Some(start), Some(since)) = (place.started_at, window_start)
                && start.timestamp_millis() > since
            {
                *load.in_window.entry(key.clone()).or_default() += 1;
            }
            if r.state.status() == Status::Queued && pass.workflows.contains(&r.workflow_key()) {
                candidates.push(Candidate {
                    served: served.get(&key).copied().unwrap_or(0),
                    id: r.id.clone(),
                    key,
                    priority: place.priority,
                    queued_at: place.queued_at,
                });
            }
        }
        let chosen = crate::queue::choose(pass.queue, &load, &candidates, pass.limit);
        let started = DateTime::from_timestamp_millis(now_ms()).unwrap_or(pass.now);
        let mut out = Vec::with_capacity(chosen.len());
        for id in chosen {
            let Some((r, expires)) = rows.get_mut(&id) else {
                continue;
            };
            r.state = ExecutionState::Running {
                suspend_request: None,
            };
            r.lease = Some(Lease {
                node: pass.node.to_owned(),
                epoch: r.lease.as_ref().map_or(0, |l| l.epoch) + 1,
                ttl: pass.ttl,
            });
            r.version += 1;
            r.updated_at = pass.now;
            if let Some(place) = r.queue.as_mut() {
                place.started_at = Some(started);
                served.insert(place.key.clone().unwrap_or_default(), *passes);
            }
            *expires = expiry(r);
            out.push(r.clone());
        }
        Ok(out)
    }

    async fn queue_counts(
        &self,
        queue: &str,
        owner: Option<&str>,
    ) -> Result<Vec<QueueCount>, StoreError> {
        let mut counts: BTreeMap<(Option<String>, &'static str), QueueCount> = BTreeMap::new();
        for (r, _) in self.rows().values() {
            let Some(place) = r.queue.as_ref().filter(|p| p.name == queue) else {
                continue;
            };
            let status = r.state.status();
            let counted = matches!(status, Status::Queued | Status::Running | Status::Suspended);
            if !counted || owner.is_some_and(|o| r.owner.as_deref() != Some(o)) {
                continue;
            }
            let entry = counts
                .entry((place.key.clone(), status.as_str()))
                .or_insert(QueueCount {
                    key: place.key.clone(),
                    status,
                    count: 0,
                    oldest: None,
                });
            entry.count += 1;
            entry.oldest = Some(
                entry
                    .oldest
                    .map_or(place.queued_at, |o| o.min(place.queued_at)),
            );
        }
        Ok(counts.into_values().collect())
    }

    async fn release_leases(&self, node: &str) -> Result<u64, StoreError> {
        Ok(self.set_expiries(node, None, |_| Some(0)).len() as u64)
    }

    async fn announce_node(&self, node: &str, keys: &[String]) -> Result<(), StoreError> {
        self.nodes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(node.to_owned(), (keys.to_vec(), now_ms()));
        Ok(())
    }

    async fn forget_node(&self, node: &str) -> Result<(), StoreError> {
        self.nodes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(node);
        Ok(())
    }

    async fn live_versions(&self, within: Duration) -> Result<Vec<String>, StoreError> {
        let since = now_ms().saturating_sub(i64::try_from(within.as_millis()).unwrap_or(i64::MAX));
        let mut keys: Vec<String> = self
            .nodes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|(_, seen)| *seen >= since)
            .flat_map(|(keys, _)| keys.iter().cloned())
            .collect();
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    async fn publish_event(&self, event: &PublishedEvent) -> Result<bool, StoreError> {
        let mut published = self.published();
        if published
            .iter()
            .any(|e| e.name == event.name && e.scope == event.scope && e.event_id == event.event_id)
        {
            return Ok(false);
        }
        published.push(event.clone());
        Ok(true)
    }

    async fn published_event(
        &self,
        name: &str,
        scope: &str,
        event_id: &str,
    ) -> Result<Option<PublishedEvent>, StoreError> {
        Ok(self
            .published()
            .iter()
            .find(|e| e.name == name && e.scope == scope && e.event_id == event_id)
            .cloned())
    }

    async fn published_load(
        &self,
        name: &str,
        key: &str,
        since: DateTime<Utc>,
    ) -> Result<PublishedLoad, StoreError> {
        let mut load = PublishedLoad::default();
        for e in self.published().iter().filter(|e| e.published_at >= since) {
            load.count += 1;
            load.bytes += e.bytes();
            if e.name == name && e.key == key {
                load.key_count += 1;
                load.key_bytes += e.bytes();
            }
        }
        Ok(load)
    }

    async fn published_events(
        &self,
        name: &str,
        key: &str,
        since: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<PublishedEvent>, StoreError> {
        let mut found: Vec<PublishedEvent> = self
            .published()
            .iter()
            .filter(|e| e.name == name && e.key == key && e.published_at >= since)
            .cloned()
            .collect();
        found.sort_by(|a, b| (a.published_at, &a.event_id).cmp(&(b.published_at, &b.event_id)));
        found.truncate(limit as usize);
        Ok(found)
    }

    async fn record_woken(
        &self,
        name: &str,
        scope: &str,
        event_id: &str,
        woken: &[String],
    ) -> Result<(), StoreError> {
        for e in self.published().iter_mut() {
            if e.name == name && e.scope == scope && e.event_id == event_id {
                e.woken = Some(woken.to_vec());
            }
        }
        Ok(())
    }

    async fn prune_published(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        let mut published = self.published();
        let had = published.len();
        published.retain(|e| e.published_at >= before);
        Ok((had - published.len()) as u64)
    }

    async fn waiting_for_event(
        &self,
        name: &str,
        key: &str,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        let mut found: Vec<(DateTime<Utc>, String)> = self
            .rows()
            .values()
            .filter(|(r, _)| r.awaits_by_key(name, key))
            .map(|(r, _)| (r.start_at, r.id.clone()))
            .collect();
        found.sort();
        Ok(found
            .into_iter()
            .take(limit as usize)
            .map(|(_, id)| id)
            .collect())
    }
}
