//! The execution store, written once for both databases: the SQL below is shared, and
//! [`Dialect`] names the few places where SQLite and PostgreSQL differ.
//!
//! An execution is a `workflow_executions` row (its header: state, progress, lease) and one
//! `workflow_steps` row per step record. A checkpoint updates the header with a compare-and-set
//! on `version`, fenced by the lease, and writes the step rows that changed, in one
//! transaction; a heartbeat touches lease expiries only.
//!
//! **Group commit.** Inserts, checkpoints and the records of finished child steps do not each
//! open a transaction: the caller turns its record into rows ([`Job`]) and hands them to the
//! store's committer, one task that writes every job waiting at that moment in one transaction,
//! then answers each caller. A caller goes on only after the transaction holding its write has
//! committed: an acknowledged checkpoint is as durable as one committed alone. No timer delays a
//! write: a batch is whatever arrived while the previous commit was in flight (at most
//! [`MAX_BATCH`]), so a lone write commits at once and a crowd shares one commit. A write that
//! fails for a reason of its own (a database error) fails alone: the batch is rolled back and
//! its writes are retried one by one. On SQLite, where the database has one writer, every write
//! of the runs goes through the one committer (no connection ever waits in SQLite's busy
//! handler for another); on PostgreSQL a few batches commit in parallel, each locking the
//! executions it changes in the order of their ids.

use agentry_engine::Status;
use agentry_engine::WorkflowEvent;
use agentry_engine::queue::QueueCount;
use agentry_engine::store::{
    Claim, Dequeue, ExecutionRecord, ExecutionStore, Family, Lease, ListQuery, PublishedEvent,
    PublishedLoad, StatusCount, StepRecord, StoreError,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::query_builder::Separated;
use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Pool, QueryBuilder, Type};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

use crate::row::{
    CandidateRow, CountRow, EventRow, ExecutionRow, IdRow, KeyCountRow, LoadRow, NodeRow, PassRow,
    PublishedRow, QueueCountRow, StepKeyRow, StepRow, VersionCountRow, db_err, to_json,
};

/// What differs between the databases.
pub trait Dialect: Database {
    /// The database's short name (`sqlite`, `postgres`), as `GET /api/info` says it.
    const NAME: &'static str;
    /// The database's clock, in milliseconds since the epoch: lease expiries are compared with
    /// it, never with a host's clock.
    const NOW_MS: &'static str;
    /// Follows a bound JSON text so that it is stored in a JSON column.
    const AS_JSON: &'static str;
    /// Follows a JSON column so that it reads as text.
    const AS_TEXT: &'static str;
    /// Null-safe equality.
    const IS: &'static str;
    /// Ends the sub-select of a claim: rows another claimer is taking are skipped.
    const SKIP_LOCKED: &'static str;
    /// Ends the fencing check of a step record: a concurrent claim waits, or is waited for.
    const FOR_SHARE: &'static str;
    /// Ends a select that locks the rows it reads for the transaction (PostgreSQL's
    /// `FOR UPDATE`; empty on SQLite, whose one writer holds the whole database). Transactions
    /// that change several executions lock them first, in the order of their ids, so that two
    /// of them (parallel batches, a heartbeat) never wait for each other in a cycle.
    const FOR_UPDATE: &'static str;
    /// Added to the `RETURNING id` of a write of an execution's header that reports events:
    /// tells the other processes following its log (`, pg_notify(...)` on PostgreSQL, sent on
    /// commit; nothing on SQLite, where one process runs everything).
    const NOTIFY: &'static str;
    /// Begins a read-only transaction whose reads all see one snapshot (PostgreSQL's
    /// `REPEATABLE READ`; SQLite's read transaction under WAL).
    const BEGIN_SNAPSHOT: &'static str;
    /// The migrations of this database (`migrations/<database>/`, embedded).
    fn migrator() -> &'static sqlx::migrate::Migrator;
    /// How many group commits may be in flight at once: one where the database has one writer
    /// (SQLite), more where transactions commit in parallel (PostgreSQL).
    const COMMITTERS: usize;

    fn rows_affected(result: &Self::QueryResult) -> u64;

    /// Waits for this process's turn to write to `pool`'s database, held until dropped: on
    /// SQLite, whose database has one writer, the process's writers (the group commit, the
    /// heartbeat, the claims, the other stores) take turns here instead of meeting at the
    /// database's lock, where the one that loses sleeps in SQLite's busy handler (1 to 100 ms
    /// at a time) even once the lock is free. None on PostgreSQL, whose writers lock rows.
    /// Taken before a connection of the pool, never while holding one.
    fn write_turn(
        pool: &Pool<Self>,
    ) -> impl std::future::Future<Output = Option<tokio::sync::OwnedMutexGuard<()>>> + Send;
}

/// Executions in a SQL database: [`crate::SqliteStore`] or [`crate::PgStore`].
#[derive(Debug)]
pub struct SqlStore<DB: Database> {
    pool: Pool<DB>,
    /// The committer's queue, started by the first write (a store may be made outside a
    /// runtime); it stops when the last clone of the store is dropped.
    committer: Arc<OnceLock<mpsc::Sender<Pending>>>,
}

impl<DB: Database> Clone for SqlStore<DB> {
    fn clone(&self) -> Self {
        Self {
            pool: self.pool.clone(),
            committer: self.committer.clone(),
        }
    }
}

impl<DB: Database> SqlStore<DB> {
    pub fn new(pool: Pool<DB>) -> Self {
        Self {
            pool,
            committer: Arc::new(OnceLock::new()),
        }
    }

    pub fn pool(&self) -> &Pool<DB> {
        &self.pool
    }
}

impl<DB: Dialect> SqlStore<DB> {
    /// `SELECT` of the kept events sent by key, up to its `WHERE `.
    fn select_published() -> QueryBuilder<DB> {
        QueryBuilder::new(format!(
            "SELECT name, scope, event_id, event_key, data{t} AS data, published_at, owner, \
             woken{t} AS woken FROM workflow_published_events WHERE ",
            t = DB::AS_TEXT
        ))
    }
}

/// Runs `work` on a task of its own and waits for its outcome: store work that opens a
/// transaction always runs to its end, whatever becomes of its caller (a client that hung up, a
/// `select!` that took another branch, a time-out). sqlx 0.9 is not cancel-safe there on
/// PostgreSQL: a future dropped while its `BEGIN` is in flight leaves the session inside a
/// transaction that nothing ends, and the pool lends that connection to the next caller, whose
/// statements run inside it and fail (`cannot execute UPDATE in a read-only transaction`, then
/// `current transaction is aborted` for every statement after the first error;
/// transact-rs/sqlx#4393, fixed upstream after 0.9.0). A check when a connection returns to the
/// pool would cost a round trip on every use (sqlx does not expose the session's transaction
/// status); a task costs microseconds and leaves no window. Every `begin` of this crate is
/// inside one (the committers are tasks of their own): `scripts/check-layers.sh` refuses a line
/// that begins a transaction without the `to_the_end` mark.
pub(crate) async fn to_the_end<T: Send + 'static>(
    work: impl Future<Output = Result<T, StoreError>> + Send + 'static,
) -> Result<T, StoreError> {
    match tokio::spawn(work).await {
        Ok(outcome) => outcome,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(StoreError::Unavailable(format!(
            "the store's task stopped: {e}"
        ))),
    }
}

/// The most writes one group commit holds.
pub const MAX_BATCH: usize = 128;

/// What a committer writes: an execution's header with its steps and events, or the record of
/// a finished child step.
// Moved once, into the committer's queue: boxing the larger variant would only allocate.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Job {
    Execution(Write),
    Child(ChildWrite),
}

/// A finished child step's record (of an `andAll`, `andRace` or `andWhen`), written while its
/// run still holds the lease it names (fencing).
#[derive(Debug)]
struct ChildWrite {
    execution_id: String,
    lease_node: String,
    lease_epoch: i64,
    row: StepRow,
}

/// One execution's write, as rows ready to bind.
#[derive(Debug)]
struct Write {
    header: ExecutionRow,
    kind: WriteKind,
    /// Step rows to write (insert or overwrite).
    steps: Vec<StepRow>,
    /// Step ids whose rows go (records the execution no longer has).
    gone: Vec<String>,
    events: Vec<NewEvent>,
}

#[derive(Debug, Clone, Copy)]
enum WriteKind {
    /// A new execution: written unless its id is taken.
    Insert,
    /// A checkpoint: written if the stored version is still this one.
    Update { expected_version: i64 },
}

/// An event ready to append.
#[derive(Debug)]
struct NewEvent {
    execution_id: String,
    seq: i64,
    kind: String,
    at: DateTime<Utc>,
    data: String,
}

impl Write {
    fn new(
        record: &ExecutionRecord,
        kind: WriteKind,
        steps: &[&str],
        events: &[WorkflowEvent],
    ) -> Self {
        let (present, gone): (Vec<&str>, Vec<&str>) = steps
            .iter()
            .partition(|id| record.progress.steps.contains_key(**id));
        Self {
            header: match kind {
                WriteKind::Insert => ExecutionRow::from_record(record),
                WriteKind::Update { .. } => ExecutionRow::checkpoint_of(record),
            },
            kind,
            steps: present
                .into_iter()
                .map(|id| StepRow::from_record(id, &record.progress.steps[id]))
                .collect(),
            gone: gone.into_iter().map(str::to_owned).collect(),
            events: events
                .iter()
                .map(|ev| NewEvent {
                    execution_id: ev.execution_id.clone(),
                    seq: ev.seq.unwrap_or(0),
                    kind: ev.kind.type_name().to_owned(),
                    at: ev.timestamp,
                    data: to_json(&ev.kind),
                })
                .collect(),
        }
    }
}

/// A write waiting for its commit, and where its outcome goes: whether it was written (`false`:
/// the id was taken, or the version moved on).
struct Pending {
    job: Job,
    done: oneshot::Sender<Result<bool, StoreError>>,
}

/// A header column's value in an [`ExecutionRow`], as it is bound.
enum Cell<'a> {
    Text(&'a str),
    MaybeText(Option<&'a str>),
    Int(i64),
    MaybeInt(Option<i64>),
    Time(DateTime<Utc>),
    MaybeTime(Option<DateTime<Utc>>),
}

/// One column of an execution's header (`workflow_executions`): its name, whether it holds JSON
/// (bound as text, cast by [`Dialect::AS_JSON`], read back as text), whether it is read back into
/// an [`ExecutionRow`], whether a checkpoint writes it (the others never change after the
/// insert), and its value in a row. The insert writes every column.
struct Column {
    name: &'static str,
    json: bool,
    read: bool,
    checkpoint: bool,
    value: fn(&ExecutionRow) -> Cell<'_>,
}

/// The header's columns: the one place that lists them (with `lease_expires_at`, which the
/// writes compute from the database's clock).
static COLUMNS: [Column; 30] = {
    use Cell::*;
    const fn column(
        name: &'static str,
        json: bool,
        checkpoint: bool,
        value: fn(&ExecutionRow) -> Cell<'_>,
    ) -> Column {
        Column {
            name,
            json,
            read: true,
            checkpoint,
            value,
        }
    }
    [
        column("id", false, false, |r| Text(&r.id)),
        column("workflow_id", false, false, |r| Text(&r.workflow_id)),
        column("workflow_version", false, false, |r| {
            MaybeText(r.workflow_version.as_deref())
        }),
        column("status", false, true, |r| Text(&r.status)),
        column("input", true, false, |r| Text(&r.input)),
        column("context", true, false, |r| Text(&r.context)),
        column("user_id", false, false, |r| MaybeText(r.user_id.as_deref())),
        column("owner", false, false, |r| MaybeText(r.owner.as_deref())),
        column("start_at", false, false, |r| Time(r.start_at)),
        column("updated_at", false, true, |r| Time(r.updated_at)),
        column("end_at", false, true, |r| MaybeTime(r.end_at)),
        column("result", true, true, |r| MaybeText(r.result.as_deref())),
        column("error", false, true, |r| MaybeText(r.error.as_deref())),
        column("suspension", true, true, |r| {
            MaybeText(r.suspension.as_deref())
        }),
        column("suspend_request", true, true, |r| {
            MaybeText(r.suspend_request.as_deref())
        }),
        column("next_step", false, true, |r| Int(r.next_step)),
        column("version", false, true, |r| Int(r.version)),
        column("lease_node", false, true, |r| {
            MaybeText(r.lease_node.as_deref())
        }),
        column("lease_epoch", false, true, |r| Int(r.lease_epoch)),
        column("lease_ttl_ms", false, true, |r| MaybeInt(r.lease_ttl_ms)),
        column("last_event", false, true, |r| Int(r.last_event)),
        column("cancellation", true, true, |r| {
            MaybeText(r.cancellation.as_deref())
        }),
        column("error_step_id", false, true, |r| {
            MaybeText(r.error_step_id.as_deref())
        }),
        column("queue_name", false, false, |r| {
            MaybeText(r.queue_name.as_deref())
        }),
        column("queue_key", false, false, |r| {
            MaybeText(r.queue_key.as_deref())
        }),
        column("queue_priority", false, false, |r| Int(r.queue_priority)),
        // Set again when a retry puts the execution back into its queue.
        column("queued_at", false, true, |r| MaybeTime(r.queued_at)),
        // Written by a dequeue, from the database's clock; a checkpoint keeps it.
        column("dequeued_at_ms", false, false, |r| {
            MaybeInt(r.dequeued_at_ms)
        }),
        // Derived from the state for the timer query; never read back.
        Column {
            name: "wake_at",
            json: false,
            read: false,
            checkpoint: true,
            value: |r| MaybeInt(r.wake_at),
        },
        // Derived from the state for the lookup of an event sent by key; never read back.
        Column {
            name: "waiting_for",
            json: false,
            read: false,
            checkpoint: true,
            value: |r| MaybeText(r.waiting_for.as_deref()),
        },
    ]
};

/// The columns an [`ExecutionRow`] reads.
fn read_columns() -> impl Iterator<Item = &'static Column> {
    COLUMNS.iter().filter(|c| c.read)
}

/// The columns a checkpoint sets, beside the lease expiry.
fn checkpoint_columns() -> Vec<&'static Column> {
    COLUMNS.iter().filter(|c| c.checkpoint).collect()
}

/// The names of `columns`.
fn names<'a>(columns: impl IntoIterator<Item = &'a Column>) -> Vec<&'static str> {
    columns.into_iter().map(|c| c.name).collect()
}

/// The step columns (after `execution_id`), in the order of [`StepRow`].
const STEP: [&str; 9] = [
    "step_id",
    "parent_step_id",
    "status",
    "attempt",
    "input",
    "output",
    "started_at",
    "ended_at",
    "failures",
];

/// An execution's workflow key (`agentry_engine::store::workflow_key`) in SQL.
pub(crate) const WORKFLOW_KEY: &str = "(workflow_id || '@' || COALESCE(workflow_version, ''))";

/// How many ids one statement binds at most.
const CHUNK: usize = 500;

/// The header's select list ([`ExecutionRow`]'s columns, JSON ones read as text).
pub(crate) fn header_select<DB: Dialect>() -> String {
    let json: Vec<&str> = names(read_columns().filter(|c| c.json));
    select_list::<DB>(&names(read_columns()), &json)
}

/// `columns` as a select list, JSON ones read as text.
fn select_list<DB: Dialect>(columns: &[&str], json: &[&str]) -> String {
    columns
        .iter()
        .map(|c| {
            if json.contains(c) {
                format!("{c}{} AS {c}", DB::AS_TEXT)
            } else {
                (*c).to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `columns`, each name behind `prefix`: the columns of a `WITH` list of values, apart from the
/// table's own.
fn prefixed<'a>(prefix: &str, columns: impl IntoIterator<Item = &'a &'a str>) -> Vec<String> {
    columns
        .into_iter()
        .map(|c| format!("{prefix}{c}"))
        .collect()
}

/// `items` (each with its index in the batch and its key) in rounds where no key appears twice:
/// an item whose key came before goes in the next round, after it. Each round is in the order
/// of its keys.
fn rounds<'a, K: Ord + std::hash::Hash + Copy + 'a, T>(
    items: impl Iterator<Item = (usize, K, T)>,
) -> Vec<Vec<(usize, T)>> {
    let mut rounds: Vec<Vec<(K, usize, T)>> = Vec::new();
    let mut seen: HashMap<K, usize> = HashMap::new();
    for (i, key, item) in items {
        let round = seen.entry(key).or_insert(0);
        if rounds.len() <= *round {
            rounds.push(Vec::new());
        }
        rounds[*round].push((key, i, item));
        *round += 1;
    }
    rounds
        .into_iter()
        .map(|mut round| {
            round.sort_by_key(|item| item.0);
            round.into_iter().map(|(_, i, item)| (i, item)).collect()
        })
        .collect()
}

#[async_trait]
impl<DB> ExecutionStore for SqlStore<DB>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB>,
    for<'t> Option<String>: Encode<'t, DB> + Type<DB>,
    for<'t> i64: Encode<'t, DB> + Type<DB>,
    for<'t> Option<i64>: Encode<'t, DB> + Type<DB>,
    for<'t> bool: Encode<'t, DB> + Type<DB>,
    for<'t> DateTime<Utc>: Encode<'t, DB> + Type<DB>,
    for<'t> Option<DateTime<Utc>>: Encode<'t, DB> + Type<DB>,
    for<'r> ExecutionRow: FromRow<'r, DB::Row>,
    for<'r> StepRow: FromRow<'r, DB::Row>,
    for<'r> EventRow: FromRow<'r, DB::Row>,
    for<'r> IdRow: FromRow<'r, DB::Row>,
    for<'r> StepKeyRow: FromRow<'r, DB::Row>,
    for<'r> CountRow: FromRow<'r, DB::Row>,
    for<'r> PublishedRow: FromRow<'r, DB::Row>,
    for<'r> VersionCountRow: FromRow<'r, DB::Row>,
    for<'r> NodeRow: FromRow<'r, DB::Row>,
    for<'r> CandidateRow: FromRow<'r, DB::Row>,
    for<'r> KeyCountRow: FromRow<'r, DB::Row>,
    for<'r> PassRow: FromRow<'r, DB::Row>,
    for<'r> QueueCountRow: FromRow<'r, DB::Row>,
    for<'r> LoadRow: FromRow<'r, DB::Row>,
{
    async fn check(&self) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await.map_err(db_err)?;
        let applied: CountRow = sqlx::query_as(
            "SELECT '' AS workflow_id, '' AS status, COUNT(*) AS count FROM _sqlx_migrations WHERE success",
        )
        .fetch_one(&mut *conn)
        .await
        .map_err(db_err)?;
        let known = DB::migrator().iter().count() as i64;
        if applied.count < known {
            return Err(StoreError::Migrations(format!(
                "migrations pending: {} of {known} applied (run `agentry migrate`)",
                applied.count
            )));
        }
        Ok(())
    }

    async fn insert(
        &self,
        record: &ExecutionRecord,
        events: &[WorkflowEvent],
    ) -> Result<(), StoreError> {
        let steps: Vec<&str> = record.progress.steps.keys().map(String::as_str).collect();
        let write = Write::new(record, WriteKind::Insert, &steps, events);
        if self.commit(Job::Execution(write)).await? {
            Ok(())
        } else {
            Err(StoreError::Duplicate(record.id.clone()))
        }
    }

    async fn get(&self, id: &str) -> Result<Option<ExecutionRecord>, StoreError> {
        let pool = self.pool.clone();
        let id = id.to_owned();
        to_the_end(async move {
            let mut conn = pool.acquire().await.map_err(db_err)?;
            // The header and its steps from one snapshot: a checkpoint committing meanwhile is
            // seen whole or not at all.
            let mut tx = sqlx::Connection::begin_with(&mut *conn, DB::BEGIN_SNAPSHOT) // to_the_end
                .await
                .map_err(db_err)?;
            let found = Self::read_record(&mut tx, &id).await?;
            tx.commit().await.map_err(db_err)?;
            Ok(found)
        })
        .await
    }

    /// The header, then its steps, without a transaction: two statements instead of four (on
    /// SQLite each is a trip to its worker thread). Steps newer than the header make a record
    /// whose compare-and-set fails (see the trait).
    async fn get_to_update(&self, id: &str) -> Result<Option<ExecutionRecord>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(db_err)?;
        Self::read_record(&mut conn, id).await
    }

    async fn compare_and_set(
        &self,
        record: &ExecutionRecord,
        expected_version: i64,
        changed_steps: &[&str],
        events: &[WorkflowEvent],
    ) -> Result<bool, StoreError> {
        let kind = WriteKind::Update { expected_version };
        self.commit(Job::Execution(Write::new(
            record,
            kind,
            changed_steps,
            events,
        )))
        .await
    }

    async fn list(&self, query: &ListQuery) -> Result<Vec<ExecutionRecord>, StoreError> {
        let mut q = QueryBuilder::<DB>::new(format!(
            "SELECT {} FROM workflow_executions WHERE 1 = 1",
            header_select::<DB>()
        ));
        let internal = format!("%{}%", agentry_engine::id::INTERNAL_SEPARATOR);
        match (&query.workflow_id, query.family) {
            (Some(workflow_id), _) => {
                q.push(" AND workflow_id = ")
                    .push_bind(workflow_id.as_str().to_owned());
            }
            (None, Family::Workflows) => {
                q.push(" AND workflow_id NOT LIKE ").push_bind(internal);
            }
            (None, Family::Internal) => {
                q.push(" AND workflow_id LIKE ").push_bind(internal);
            }
            (None, Family::All) => {}
        }
        if let Some(status) = query.status {
            q.push(" AND status = ")
                .push_bind(status.as_str().to_owned());
        }
        if let Some(owner) = &query.owner {
            q.push(" AND owner = ").push_bind(owner.as_str().to_owned());
        }
        if let Some((at, id)) = &query.before {
            q.push(" AND (start_at, id) < (")
                .push_bind(*at)
                .push(", ")
                .push_bind(id.clone())
                .push(")");
        }
        q.push(" ORDER BY start_at DESC, id DESC LIMIT ")
            .push_bind(i64::from(query.limit));
        let rows: Vec<ExecutionRow> = q
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        rows.into_iter()
            .map(|r| r.into_record(Vec::new()))
            .collect()
    }

    async fn count_by_status(&self, owner: Option<&str>) -> Result<Vec<StatusCount>, StoreError> {
        let mut q = QueryBuilder::<DB>::new(
            "SELECT workflow_id, status, COUNT(*) AS count FROM workflow_executions WHERE 1 = 1",
        );
        if let Some(owner) = owner {
            q.push(" AND owner = ").push_bind(owner.to_owned());
        }
        q.push(" GROUP BY workflow_id, status");
        let rows: Vec<CountRow> = q
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        rows.into_iter()
            .map(|r| {
                Ok(StatusCount {
                    status: Status::parse(&r.status).ok_or_else(|| StoreError::Corrupt {
                        id: r.workflow_id.clone(),
                        reason: format!("unknown status {:?}", r.status),
                    })?,
                    workflow_id: r.workflow_id,
                    count: u64::try_from(r.count).unwrap_or_default(),
                })
            })
            .collect()
    }

    async fn in_flight_by_version(
        &self,
        workflow_id: &str,
    ) -> Result<Vec<(Option<String>, u64)>, StoreError> {
        let mut q = QueryBuilder::<DB>::new(
            "SELECT workflow_version, COUNT(*) AS count FROM workflow_executions WHERE workflow_id = ",
        );
        q.push_bind(workflow_id.to_owned()).push(
            " AND status IN ('queued', 'running', 'suspended') GROUP BY workflow_version ORDER BY workflow_version",
        );
        let rows: Vec<VersionCountRow> = q
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(rows
            .into_iter()
            .map(|r| {
                (
                    r.workflow_version,
                    u64::try_from(r.count).unwrap_or_default(),
                )
            })
            .collect())
    }

    async fn due_timers(
        &self,
        workflows: &[String],
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        if workflows.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let mut q = QueryBuilder::<DB>::new(format!(
            "SELECT id FROM workflow_executions WHERE wake_at <= {} \
             AND status = 'suspended' AND {WORKFLOW_KEY} IN (",
            DB::NOW_MS
        ));
        Self::push_list(&mut q, &workflows[..workflows.len().min(CHUNK)]);
        q.push(") ORDER BY wake_at LIMIT ")
            .push_bind(i64::from(limit));
        let rows: Vec<IdRow> = q
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(rows.into_iter().map(|r| r.id).collect())
    }

    async fn prune(
        &self,
        ended_before: DateTime<Utc>,
        statuses: &[Status],
        limit: u32,
    ) -> Result<u64, StoreError> {
        let _turn = DB::write_turn(&self.pool).await;
        let finals: Vec<String> = statuses
            .iter()
            .filter(|s| s.is_final())
            .map(|s| s.as_str().to_owned())
            .collect();
        if finals.is_empty() || limit == 0 {
            return Ok(0);
        }
        // Steps and events go with their execution (ON DELETE CASCADE).
        let mut q = QueryBuilder::<DB>::new(
            "DELETE FROM workflow_executions WHERE id IN (SELECT id FROM workflow_executions \
             WHERE end_at < ",
        );
        q.push_bind(ended_before).push(" AND status IN (");
        Self::push_list(&mut q, &finals);
        q.push(") LIMIT ").push_bind(i64::from(limit)).push(")");
        let res = q.build().execute(&self.pool).await.map_err(db_err)?;
        let pruned = DB::rows_affected(&res);
        if pruned > 0 {
            // A queue's key is remembered (its last turn) while an execution of it is kept:
            // the keys a client's inputs made do not pile up.
            sqlx::query(
                "DELETE FROM workflow_queue_keys WHERE NOT EXISTS (SELECT 1 FROM \
                 workflow_executions e WHERE e.queue_name = workflow_queue_keys.queue_name \
                 AND (e.queue_key = workflow_queue_keys.queue_key \
                 OR (e.queue_key IS NULL AND workflow_queue_keys.queue_key = '')))",
            )
            .execute(&self.pool)
            .await
            .map_err(db_err)?;
        }
        Ok(pruned)
    }

    async fn events_after(
        &self,
        execution_id: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<WorkflowEvent>, StoreError> {
        let mut q = QueryBuilder::<DB>::new(format!(
            "SELECT e.execution_id, x.workflow_id, e.seq, e.at, e.data{} AS data \
             FROM workflow_events e JOIN workflow_executions x ON x.id = e.execution_id \
             WHERE e.execution_id = ",
            DB::AS_TEXT
        ));
        q.push_bind(execution_id.to_owned())
            .push(" AND e.seq > ")
            .push_bind(after)
            .push(" ORDER BY e.seq LIMIT ")
            .push_bind(i64::from(limit));
        let rows: Vec<EventRow> = q
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        rows.into_iter().map(EventRow::into_event).collect()
    }

    async fn record_step(
        &self,
        execution_id: &str,
        lease: &Lease,
        step_id: &str,
        step: &StepRecord,
    ) -> Result<bool, StoreError> {
        self.commit(Job::Child(ChildWrite {
            execution_id: execution_id.to_owned(),
            lease_node: lease.node.clone(),
            lease_epoch: lease.epoch,
            row: StepRow::from_record(step_id, step),
        }))
        .await
    }

    async fn renew_leases(&self, node: &str, ids: &[String]) -> Result<Vec<String>, StoreError> {
        let _turn = DB::write_turn(&self.pool).await;
        let mut renewed = Vec::new();
        let mut ids = ids.to_vec();
        ids.sort();
        for chunk in ids.chunks(CHUNK) {
            let mut q = QueryBuilder::<DB>::new(format!(
                "UPDATE workflow_executions SET lease_expires_at = {} + lease_ttl_ms \
                 WHERE id IN (SELECT id FROM workflow_executions \
                 WHERE status = 'running' AND lease_node = ",
                DB::NOW_MS
            ));
            q.push_bind(node.to_owned()).push(" AND id IN (");
            Self::push_list(&mut q, chunk);
            q.push(format!(") ORDER BY id{}) RETURNING id", DB::FOR_UPDATE));
            let ids: Vec<IdRow> = q
                .build_query_as()
                .fetch_all(&self.pool)
                .await
                .map_err(db_err)?;
            renewed.extend(ids.into_iter().map(|r| r.id));
        }
        Ok(renewed)
    }

    async fn claim_orphans(&self, claim: &Claim<'_>) -> Result<Vec<ExecutionRecord>, StoreError> {
        let _turn = DB::write_turn(&self.pool).await;
        if claim.workflows.is_empty() || claim.limit == 0 {
            return Ok(Vec::new());
        }
        let ttl_ms = i64::try_from(claim.ttl.as_millis()).unwrap_or(i64::MAX);
        let mut q = QueryBuilder::<DB>::new("UPDATE workflow_executions SET lease_node = ");
        q.push_bind(claim.node.to_owned())
            .push(", lease_epoch = lease_epoch + 1, lease_ttl_ms = ")
            .push_bind(ttl_ms)
            .push(format!(", lease_expires_at = {} + ", DB::NOW_MS))
            .push_bind(ttl_ms)
            .push(", version = version + 1 WHERE id IN (SELECT id FROM workflow_executions ")
            .push(format!("WHERE status = 'running' AND {WORKFLOW_KEY} IN ("));
        Self::push_list(&mut q, &claim.workflows[..claim.workflows.len().min(CHUNK)]);
        q.push(format!(
            ") AND (lease_expires_at IS NULL OR lease_expires_at < {} OR (",
            DB::NOW_MS
        ))
        .push_bind(claim.own)
        .push(" AND lease_node = ")
        .push_bind(claim.node.to_owned())
        .push(")) ORDER BY start_at LIMIT ")
        .push_bind(i64::from(claim.limit))
        .push(DB::SKIP_LOCKED)
        .push(format!(") RETURNING {}", header_select::<DB>()));
        let mut conn = self.pool.acquire().await.map_err(db_err)?;
        let rows: Vec<ExecutionRow> = q
            .build_query_as()
            .fetch_all(&mut *conn)
            .await
            .map_err(db_err)?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let steps = Self::read_steps(&mut conn, &row.id).await?;
            out.push(row.into_record(steps)?);
        }
        Ok(out)
    }

    async fn dequeue(&self, pass: &Dequeue<'_>) -> Result<Vec<ExecutionRecord>, StoreError> {
        let store = self.clone();
        let (queue, node, workflows) = (
            pass.queue.clone(),
            pass.node.to_owned(),
            pass.workflows.to_vec(),
        );
        let (ttl, limit, now) = (pass.ttl, pass.limit, pass.now);
        to_the_end(async move {
            let pass = Dequeue {
                queue: &queue,
                node: &node,
                ttl,
                workflows: &workflows,
                limit,
                now,
            };
            store.dequeue_pass(&pass).await
        })
        .await
    }

    async fn queue_counts(
        &self,
        queue: &str,
        owner: Option<&str>,
    ) -> Result<Vec<QueueCount>, StoreError> {
        self.queue_counts_of(queue, owner).await
    }

    async fn release_leases(&self, node: &str) -> Result<u64, StoreError> {
        let _turn = DB::write_turn(&self.pool).await;
        // Locks in id order, like a batch of checkpoints, so the two never deadlock.
        let mut q = QueryBuilder::<DB>::new(
            "UPDATE workflow_executions SET lease_expires_at = 0 \
             WHERE id IN (SELECT id FROM workflow_executions \
             WHERE status = 'running' AND lease_node = ",
        );
        q.push_bind(node.to_owned())
            .push(format!(" ORDER BY id{})", DB::FOR_UPDATE));
        let res = q.build().execute(&self.pool).await.map_err(db_err)?;
        Ok(DB::rows_affected(&res))
    }

    async fn announce_node(&self, node: &str, keys: &[String]) -> Result<(), StoreError> {
        let _turn = DB::write_turn(&self.pool).await;
        let mut q = QueryBuilder::<DB>::new(
            "INSERT INTO workflow_nodes (node_id, versions, seen_at_ms) VALUES (",
        );
        q.push_bind(node.to_owned())
            .push(", ")
            .push_bind(to_json(&keys))
            .push(format!(
                ", {now}) ON CONFLICT (node_id) DO UPDATE SET versions = excluded.versions, \
                 seen_at_ms = {now}",
                now = DB::NOW_MS
            ));
        q.build().execute(&self.pool).await.map_err(db_err)?;
        Ok(())
    }

    async fn forget_node(&self, node: &str) -> Result<(), StoreError> {
        let _turn = DB::write_turn(&self.pool).await;
        let mut q = QueryBuilder::<DB>::new("DELETE FROM workflow_nodes WHERE node_id = ");
        q.push_bind(node.to_owned());
        q.build().execute(&self.pool).await.map_err(db_err)?;
        Ok(())
    }

    async fn live_versions(&self, within: Duration) -> Result<Vec<String>, StoreError> {
        let within_ms = i64::try_from(within.as_millis()).unwrap_or(i64::MAX);
        let mut q = QueryBuilder::<DB>::new(format!(
            "SELECT versions FROM workflow_nodes WHERE seen_at_ms >= {} - ",
            DB::NOW_MS
        ));
        q.push_bind(within_ms);
        let rows: Vec<NodeRow> = q
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        let mut keys: Vec<String> = rows
            .iter()
            .filter_map(|r| serde_json::from_str::<Vec<String>>(&r.versions).ok())
            .flatten()
            .collect();
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    async fn publish_event(&self, event: &PublishedEvent) -> Result<bool, StoreError> {
        let _turn = DB::write_turn(&self.pool).await;
        let mut q = QueryBuilder::<DB>::new(
            "INSERT INTO workflow_published_events \
             (name, scope, event_id, event_key, data, bytes, published_at, owner) VALUES (",
        );
        let data = to_json(&event.data);
        let bytes = i64::try_from(data.len()).unwrap_or(i64::MAX);
        q.push_bind(event.name.clone())
            .push(", ")
            .push_bind(event.scope.clone())
            .push(", ")
            .push_bind(event.event_id.clone())
            .push(", ")
            .push_bind(event.key.clone())
            .push(", ")
            .push_bind(data)
            .push(DB::AS_JSON)
            .push(", ")
            .push_bind(bytes)
            .push(", ")
            .push_bind(event.published_at)
            .push(", ")
            .push_bind(event.owner.clone())
            .push(") ON CONFLICT (name, scope, event_id) DO NOTHING");
        let res = q.build().execute(&self.pool).await.map_err(db_err)?;
        Ok(DB::rows_affected(&res) == 1)
    }

    async fn published_event(
        &self,
        name: &str,
        scope: &str,
        event_id: &str,
    ) -> Result<Option<PublishedEvent>, StoreError> {
        let mut q = Self::select_published();
        q.push("name = ")
            .push_bind(name.to_owned())
            .push(" AND scope = ")
            .push_bind(scope.to_owned())
            .push(" AND event_id = ")
            .push_bind(event_id.to_owned());
        let row: Option<PublishedRow> = q
            .build_query_as()
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err)?;
        row.map(PublishedRow::into_event).transpose()
    }

    async fn published_events(
        &self,
        name: &str,
        key: &str,
        since: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<PublishedEvent>, StoreError> {
        let mut q = Self::select_published();
        q.push("name = ")
            .push_bind(name.to_owned())
            .push(" AND event_key = ")
            .push_bind(key.to_owned())
            .push(" AND published_at >= ")
            .push_bind(since)
            .push(" ORDER BY published_at, event_id LIMIT ")
            .push_bind(i64::from(limit));
        let rows: Vec<PublishedRow> = q
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        rows.into_iter().map(PublishedRow::into_event).collect()
    }

    async fn published_load(
        &self,
        name: &str,
        key: &str,
        since: DateTime<Utc>,
    ) -> Result<PublishedLoad, StoreError> {
        let mut q = QueryBuilder::<DB>::new(
            "SELECT count(*) AS count, CAST(COALESCE(SUM(bytes), 0) AS BIGINT) AS bytes, \
             CAST(COALESCE(SUM(CASE WHEN name = ",
        );
        q.push_bind(name.to_owned())
            .push(" AND event_key = ")
            .push_bind(key.to_owned())
            .push(" THEN 1 ELSE 0 END), 0) AS BIGINT) AS key_count, CAST(COALESCE(SUM(CASE WHEN name = ")
            .push_bind(name.to_owned())
            .push(" AND event_key = ")
            .push_bind(key.to_owned())
            .push(" THEN bytes ELSE 0 END), 0) AS BIGINT) AS key_bytes \
                   FROM workflow_published_events WHERE published_at >= ")
            .push_bind(since);
        let row: LoadRow = q
            .build_query_as()
            .fetch_one(&self.pool)
            .await
            .map_err(db_err)?;
        let n = |v: i64| u64::try_from(v).unwrap_or(0);
        Ok(PublishedLoad {
            key_count: n(row.key_count),
            key_bytes: n(row.key_bytes),
            count: n(row.count),
            bytes: n(row.bytes),
        })
    }

    async fn record_woken(
        &self,
        name: &str,
        scope: &str,
        event_id: &str,
        woken: &[String],
    ) -> Result<(), StoreError> {
        let _turn = DB::write_turn(&self.pool).await;
        let mut q = QueryBuilder::<DB>::new("UPDATE workflow_published_events SET woken = ");
        q.push_bind(to_json(&woken))
            .push(DB::AS_JSON)
            .push(" WHERE name = ")
            .push_bind(name.to_owned())
            .push(" AND scope = ")
            .push_bind(scope.to_owned())
            .push(" AND event_id = ")
            .push_bind(event_id.to_owned());
        q.build().execute(&self.pool).await.map_err(db_err)?;
        Ok(())
    }

    async fn prune_published(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        let _turn = DB::write_turn(&self.pool).await;
        let mut q =
            QueryBuilder::<DB>::new("DELETE FROM workflow_published_events WHERE published_at < ");
        q.push_bind(before);
        let res = q.build().execute(&self.pool).await.map_err(db_err)?;
        Ok(DB::rows_affected(&res))
    }

    async fn waiting_for_event(
        &self,
        name: &str,
        key: &str,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        let mut q = QueryBuilder::<DB>::new(
            "SELECT id FROM workflow_executions WHERE status = 'suspended' AND (waiting_for = ",
        );
        // One event (through the index), or one among several (`[[...`, by a pattern).
        q.push_bind(agentry_engine::store::waiting_for(name, key))
            .push(" OR (waiting_for LIKE '[[%' AND waiting_for LIKE ")
            .push_bind(agentry_engine::store::waiting_for_among(name, key))
            .push(" ESCAPE '\\'))")
            .push(" ORDER BY start_at, id LIMIT ")
            .push_bind(i64::from(limit));
        let rows: Vec<IdRow> = q
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(rows.into_iter().map(|r| r.id).collect())
    }
}

/// Makes an insert of step rows overwrite the rows it meets.
fn push_step_upsert<DB: Dialect>(q: &mut QueryBuilder<DB>) {
    let set: Vec<String> = STEP[1..]
        .iter()
        .map(|c| format!("{c} = excluded.{c}"))
        .collect();
    q.push(format!(
        " ON CONFLICT (execution_id, step_id) DO UPDATE SET {}",
        set.join(", ")
    ));
}

impl<DB> SqlStore<DB>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB>,
    for<'t> Option<String>: Encode<'t, DB> + Type<DB>,
    for<'t> i64: Encode<'t, DB> + Type<DB>,
    for<'t> Option<i64>: Encode<'t, DB> + Type<DB>,
    for<'t> bool: Encode<'t, DB> + Type<DB>,
    for<'t> DateTime<Utc>: Encode<'t, DB> + Type<DB>,
    for<'t> Option<DateTime<Utc>>: Encode<'t, DB> + Type<DB>,
    for<'r> ExecutionRow: FromRow<'r, DB::Row>,
    for<'r> StepRow: FromRow<'r, DB::Row>,
    for<'r> EventRow: FromRow<'r, DB::Row>,
    for<'r> IdRow: FromRow<'r, DB::Row>,
    for<'r> StepKeyRow: FromRow<'r, DB::Row>,
    for<'r> CountRow: FromRow<'r, DB::Row>,
{
    /// The values of the header's `columns` of `r`, in order.
    fn push_header_values(
        v: &mut Separated<'_, DB, &'static str>,
        r: &ExecutionRow,
        columns: &[&Column],
    ) {
        for column in columns {
            let bound = match (column.value)(r) {
                Cell::Text(t) => v.push_bind(t.to_owned()),
                Cell::MaybeText(t) => v.push_bind(t.map(str::to_owned)),
                Cell::Int(i) => v.push_bind(i),
                Cell::MaybeInt(i) => v.push_bind(i),
                Cell::Time(t) => v.push_bind(t),
                Cell::MaybeTime(t) => v.push_bind(t),
            };
            if column.json {
                bound.push_unseparated(DB::AS_JSON);
            }
        }
    }

    /// A step's values, in the order of [`STEP`].
    fn push_step_values(v: &mut Separated<'_, DB, &'static str>, s: &StepRow) {
        v.push_bind(s.step_id.clone());
        v.push_bind(s.parent_step_id.clone());
        v.push_bind(s.status.clone());
        v.push_bind(s.attempt);
        v.push_bind(s.input.clone()).push_unseparated(DB::AS_JSON);
        v.push_bind(s.output.clone()).push_unseparated(DB::AS_JSON);
        v.push_bind(s.started_at);
        v.push_bind(s.ended_at);
        v.push_bind(s.failures.clone())
            .push_unseparated(DB::AS_JSON);
    }

    /// `a, b, c` as bound parameters.
    pub(crate) fn push_list(q: &mut QueryBuilder<DB>, items: &[String]) {
        let mut list = q.separated(", ");
        for item in items {
            list.push_bind(item.clone());
        }
    }

    /// Commits `job` with the others waiting at that moment; its outcome once committed.
    async fn commit(&self, job: Job) -> Result<bool, StoreError> {
        let queue = self.committer.get_or_init(|| {
            let (tx, rx) = mpsc::channel(4 * MAX_BATCH);
            let rx = Arc::new(tokio::sync::Mutex::new(rx));
            for _ in 0..DB::COMMITTERS {
                tokio::spawn(Self::run_committer(self.pool.clone(), rx.clone()));
            }
            tx
        });
        let (done, outcome) = oneshot::channel();
        let gone = || StoreError::Database("the store's committer stopped".into());
        queue
            .send(Pending { job, done })
            .await
            .map_err(|_| gone())?;
        outcome.await.map_err(|_| gone())?
    }

    /// The committer: every write waiting, in one transaction, until the queue closes. It
    /// takes a connection of the pool for each batch (holding one would starve a pool of one,
    /// such as `sqlite::memory:`'s).
    async fn run_committer(
        pool: Pool<DB>,
        queue: Arc<tokio::sync::Mutex<mpsc::Receiver<Pending>>>,
    ) {
        let mut batch = Vec::with_capacity(MAX_BATCH);
        // The committers take turns at the queue; each writes its batch while the next one
        // gathers the writes that arrive meanwhile.
        while queue.lock().await.recv_many(&mut batch, MAX_BATCH).await > 0 {
            let jobs: Vec<&Job> = batch.iter().map(|p| &p.job).collect();
            match Self::write_on(&pool, &jobs).await {
                Ok(outcomes) => {
                    for (pending, outcome) in batch.drain(..).zip(outcomes) {
                        let _ = pending.done.send(Ok(outcome));
                    }
                }
                // One write's failure must not fail the others: each alone, in its own
                // transaction. (Not when the database is away: it fails them all alike.)
                Err(e) if batch.len() > 1 && !e.is_unavailable() => {
                    for pending in batch.drain(..) {
                        let outcome = Self::write_on(&pool, &[&pending.job]).await.map(|o| o[0]);
                        let _ = pending.done.send(outcome);
                    }
                }
                Err(e) => {
                    for pending in batch.drain(..) {
                        let _ = pending.done.send(Err(e.clone()));
                    }
                }
            }
        }
    }

    /// [`Self::write_batch`] on a connection of `pool`. A connection whose transaction failed
    /// because the database was unavailable is closed, not given back: the failure may have
    /// left it inside the transaction (SQLite after a full disk or on a read-only file), holding
    /// the database's write lock for good, or it may be broken (PostgreSQL restarted).
    async fn write_on(pool: &Pool<DB>, jobs: &[&Job]) -> Result<Vec<bool>, StoreError> {
        let _turn = DB::write_turn(pool).await;
        let mut conn = pool.acquire().await.map_err(db_err)?;
        let written = Self::write_batch(&mut conn, jobs).await;
        if written.as_ref().is_err_and(StoreError::is_unavailable) {
            let _ = conn.close().await;
        }
        written
    }

    /// Writes `jobs` in one transaction; whether each was written. The statements are few
    /// whatever the batch holds: one compare-and-set for every checkpoint (each row with the
    /// version it expects), one insert for every new header, one for every step row, one for
    /// every event of the writes that were written, and one for every child step's record.
    async fn write_batch(
        conn: &mut DB::Connection,
        jobs: &[&Job],
    ) -> Result<Vec<bool>, StoreError> {
        // to_the_end: the committers are tasks of their own.
        let mut tx = sqlx::Connection::begin(conn).await.map_err(db_err)?; // to_the_end
        Self::lock_in_order(&mut tx, jobs).await?;
        let mut outcomes = vec![false; jobs.len()];
        let writes: Vec<(usize, &Write)> = jobs
            .iter()
            .enumerate()
            .filter_map(|(i, job)| match job {
                Job::Execution(w) => Some((i, w)),
                Job::Child(_) => None,
            })
            .collect();
        // The checkpoints, in rounds (an execution's second checkpoint in the batch finds the
        // version moved on by its first, as if it had come alone), each round in the order of
        // the ids.
        let checkpoints = writes.iter().filter_map(|(i, w)| match w.kind {
            WriteKind::Update { expected_version } => {
                Some((*i, w.header.id.as_str(), (*w, expected_version)))
            }
            WriteKind::Insert => None,
        });
        for round in rounds(checkpoints) {
            let (index, checkpoints): (Vec<usize>, Vec<(&Write, i64)>) = round.into_iter().unzip();
            let updated = Self::update_headers(&mut tx, &checkpoints).await?;
            for (i, (w, _)) in index.into_iter().zip(checkpoints) {
                outcomes[i] = updated.contains(&w.header.id);
            }
        }
        let mut inserts: Vec<(usize, &Write)> = writes
            .iter()
            .filter(|(_, w)| matches!(w.kind, WriteKind::Insert))
            .copied()
            .collect();
        inserts.sort_by(|(_, a), (_, b)| a.header.id.cmp(&b.header.id));
        let headers: Vec<&Write> = inserts.iter().map(|(_, w)| *w).collect();
        let inserted = Self::insert_headers(&mut tx, &headers).await?;
        for (i, w) in inserts {
            outcomes[i] = inserted.contains(&w.header.id);
        }
        let written: Vec<&Write> = writes
            .iter()
            .filter(|(i, _)| outcomes[*i])
            .map(|(_, w)| *w)
            .collect();
        Self::write_steps(&mut tx, &written).await?;
        Self::write_events(&mut tx, &written).await?;
        // After the checkpoints: a child's fence sees the lease as this batch leaves it.
        let children = jobs.iter().enumerate().filter_map(|(i, job)| match job {
            Job::Child(c) => Some((i, (c.execution_id.as_str(), c.row.step_id.as_str()), c)),
            Job::Execution(_) => None,
        });
        for round in rounds(children) {
            let (index, children): (Vec<usize>, Vec<&ChildWrite>) = round.into_iter().unzip();
            let stored = Self::write_children(&mut tx, &children).await?;
            for (i, c) in index.into_iter().zip(children) {
                outcomes[i] = stored.contains(&(c.execution_id.clone(), c.row.step_id.clone()));
            }
        }
        tx.commit().await.map_err(db_err)?;
        Ok(outcomes)
    }

    /// Locks the executions that `jobs` change (not the new ones), in the order of their ids
    /// (see [`Dialect::FOR_UPDATE`]).
    async fn lock_in_order(conn: &mut DB::Connection, jobs: &[&Job]) -> Result<(), StoreError> {
        if DB::FOR_UPDATE.is_empty() {
            return Ok(());
        }
        let mut ids: Vec<String> = jobs
            .iter()
            .filter_map(|job| match job {
                Job::Execution(w) if matches!(w.kind, WriteKind::Update { .. }) => {
                    Some(w.header.id.clone())
                }
                Job::Execution(_) => None,
                Job::Child(c) => Some(c.execution_id.clone()),
            })
            .collect();
        ids.sort();
        ids.dedup();
        for chunk in ids.chunks(CHUNK) {
            let mut q = QueryBuilder::<DB>::new("SELECT id FROM workflow_executions WHERE id IN (");
            Self::push_list(&mut q, chunk);
            q.push(format!(") ORDER BY id{}", DB::FOR_UPDATE));
            q.build().execute(&mut *conn).await.map_err(db_err)?;
        }
        Ok(())
    }

    /// Finished child steps' records, where their runs still hold the leases they name (no
    /// step twice in `children`); the `(execution id, step id)` of those written.
    async fn write_children(
        conn: &mut DB::Connection,
        children: &[&ChildWrite],
    ) -> Result<HashSet<(String, String)>, StoreError> {
        let mut stored = HashSet::with_capacity(children.len());
        let columns = prefixed(
            "child_",
            ["execution_id", "lease_node", "lease_epoch"]
                .iter()
                .chain(&STEP),
        );
        let step_columns = prefixed("child_", &STEP);
        for chunk in children.chunks(CHUNK / columns.len()) {
            let mut q =
                QueryBuilder::<DB>::new(format!("WITH children ({}) AS (", columns.join(", ")));
            q.push_values(chunk, |mut v, c| {
                v.push_bind(c.execution_id.clone());
                v.push_bind(c.lease_node.clone());
                v.push_bind(c.lease_epoch);
                Self::push_step_values(&mut v, &c.row);
            });
            q.push(format!(
                ") INSERT INTO workflow_steps (execution_id, {}) \
                 SELECT child_execution_id, {} FROM children WHERE EXISTS (\
                 SELECT 1 FROM workflow_executions WHERE status = 'running' \
                 AND id = child_execution_id AND lease_node = child_lease_node \
                 AND lease_epoch = child_lease_epoch{})",
                STEP.join(", "),
                step_columns.join(", "),
                DB::FOR_SHARE,
            ));
            push_step_upsert(&mut q);
            q.push(" RETURNING execution_id, step_id");
            let rows: Vec<StepKeyRow> = q
                .build_query_as()
                .fetch_all(&mut *conn)
                .await
                .map_err(db_err)?;
            stored.extend(rows.into_iter().map(|r| (r.execution_id, r.step_id)));
        }
        Ok(stored)
    }

    /// Inserts new executions' headers, except those whose id is taken; the ids inserted.
    async fn insert_headers(
        conn: &mut DB::Connection,
        writes: &[&Write],
    ) -> Result<Vec<String>, StoreError> {
        let mut inserted = Vec::with_capacity(writes.len());
        let columns: Vec<&Column> = COLUMNS.iter().collect();
        for chunk in writes.chunks(CHUNK / (columns.len() + 1)) {
            let mut q = QueryBuilder::<DB>::new(format!(
                "INSERT INTO workflow_executions ({}, lease_expires_at) ",
                names(columns.iter().copied()).join(", ")
            ));
            q.push_values(chunk, |mut row, w| {
                let r = &w.header;
                Self::push_header_values(&mut row, r, &columns);
                if r.status == "running" {
                    row.push(format!("{} + ", DB::NOW_MS))
                        .push_bind_unseparated(r.lease_ttl_ms);
                } else {
                    row.push("NULL");
                }
            });
            q.push(" ON CONFLICT (id) DO NOTHING RETURNING id");
            if chunk.iter().any(|w| !w.events.is_empty()) {
                q.push(DB::NOTIFY);
            }
            let rows: Vec<IdRow> = q
                .build_query_as()
                .fetch_all(&mut *conn)
                .await
                .map_err(db_err)?;
            inserted.extend(rows.into_iter().map(|r| r.id));
        }
        Ok(inserted)
    }

    /// Checkpoints' compare-and-sets of their headers on the versions they expect, many in one
    /// statement (no id twice in `checkpoints`); the ids written.
    async fn update_headers(
        conn: &mut DB::Connection,
        checkpoints: &[(&Write, i64)],
    ) -> Result<HashSet<String>, StoreError> {
        let mut updated = HashSet::with_capacity(checkpoints.len());
        let checkpoint = checkpoint_columns();
        let changes = prefixed(
            "new_",
            ["id", "expected_version"]
                .iter()
                .chain(&names(checkpoint.iter().copied())),
        );
        let set: Vec<String> = checkpoint
            .iter()
            .map(|c| format!("{0} = new_{0}", c.name))
            .collect();
        for chunk in checkpoints.chunks(CHUNK / changes.len()) {
            let mut q =
                QueryBuilder::<DB>::new(format!("WITH changes ({}) AS (", changes.join(", ")));
            q.push_values(chunk, |mut v, (w, expected_version)| {
                v.push_bind(w.header.id.clone());
                v.push_bind(*expected_version);
                Self::push_header_values(&mut v, &w.header, &checkpoint);
            });
            // The lease expiry: none once the execution stops running; unchanged while the
            // same hold writes (only heartbeats renew it, so a suspend request from another
            // process never keeps a dead owner's lease alive); a full ttl when the hold is new.
            q.push(format!(
                ") UPDATE workflow_executions SET lease_expires_at = CASE \
                 WHEN new_status <> 'running' THEN NULL \
                 WHEN status = 'running' AND lease_node {is} new_lease_node \
                 AND lease_epoch = new_lease_epoch THEN lease_expires_at \
                 ELSE {now} + new_lease_ttl_ms END, {set} \
                 FROM changes WHERE id = new_id AND version = new_expected_version RETURNING id",
                is = DB::IS,
                now = DB::NOW_MS,
                set = set.join(", "),
            ));
            if chunk.iter().any(|(w, _)| !w.events.is_empty()) {
                q.push(DB::NOTIFY);
            }
            let rows: Vec<IdRow> = q
                .build_query_as()
                .fetch_all(&mut *conn)
                .await
                .map_err(db_err)?;
            updated.extend(rows.into_iter().map(|r| r.id));
        }
        Ok(updated)
    }

    /// Writes the step rows of `writes` (deleting those their executions no longer have).
    async fn write_steps(conn: &mut DB::Connection, writes: &[&Write]) -> Result<(), StoreError> {
        let rows: Vec<(&String, &StepRow)> = writes
            .iter()
            .flat_map(|w| w.steps.iter().map(move |s| (&w.header.id, s)))
            .collect();
        for chunk in rows.chunks(CHUNK / (STEP.len() + 1)) {
            let mut q = QueryBuilder::<DB>::new(format!(
                "INSERT INTO workflow_steps (execution_id, {}) ",
                STEP.join(", ")
            ));
            q.push_values(chunk, |mut row, (id, step)| {
                row.push_bind((*id).clone());
                Self::push_step_values(&mut row, step);
            });
            push_step_upsert(&mut q);
            q.build().execute(&mut *conn).await.map_err(db_err)?;
        }
        for w in writes.iter().filter(|w| !w.gone.is_empty()) {
            for chunk in w.gone.chunks(CHUNK) {
                let mut q =
                    QueryBuilder::<DB>::new("DELETE FROM workflow_steps WHERE execution_id = ");
                q.push_bind(w.header.id.clone()).push(" AND step_id IN (");
                Self::push_list(&mut q, chunk);
                q.push(")");
                q.build().execute(&mut *conn).await.map_err(db_err)?;
            }
        }
        Ok(())
    }

    /// Appends the events of `writes` to their executions' logs.
    async fn write_events(conn: &mut DB::Connection, writes: &[&Write]) -> Result<(), StoreError> {
        let events: Vec<&NewEvent> = writes.iter().flat_map(|w| &w.events).collect();
        for chunk in events.chunks(CHUNK / 5) {
            let mut q = QueryBuilder::<DB>::new(
                "INSERT INTO workflow_events (execution_id, seq, type, at, data) ",
            );
            q.push_values(chunk, |mut row, ev| {
                row.push_bind(ev.execution_id.clone());
                row.push_bind(ev.seq);
                row.push_bind(ev.kind.to_owned());
                row.push_bind(ev.at);
                row.push_bind(ev.data.clone()).push_unseparated(DB::AS_JSON);
            });
            q.build().execute(&mut *conn).await.map_err(db_err)?;
        }
        Ok(())
    }

    /// The step rows of an execution, in the order they started.
    /// An execution's header, then its steps, on `conn` (inside a snapshot or not: see `get`
    /// and `get_to_update`).
    async fn read_record(
        conn: &mut DB::Connection,
        id: &str,
    ) -> Result<Option<ExecutionRecord>, StoreError> {
        let mut q = QueryBuilder::<DB>::new(format!(
            "SELECT {} FROM workflow_executions WHERE id = ",
            header_select::<DB>()
        ));
        q.push_bind(id.to_owned());
        let row: Option<ExecutionRow> = q
            .build_query_as()
            .fetch_optional(&mut *conn)
            .await
            .map_err(db_err)?;
        match row {
            Some(row) => {
                let steps = Self::read_steps(conn, id).await?;
                row.into_record(steps).map(Some)
            }
            None => Ok(None),
        }
    }

    pub(crate) async fn read_steps(
        conn: &mut DB::Connection,
        id: &str,
    ) -> Result<Vec<StepRow>, StoreError> {
        let mut q = QueryBuilder::<DB>::new(format!(
            "SELECT {} FROM workflow_steps WHERE execution_id = ",
            select_list::<DB>(&STEP, &["input", "output", "failures"])
        ));
        q.push_bind(id.to_owned())
            .push(" ORDER BY started_at, step_id");
        q.build_query_as()
            .fetch_all(&mut *conn)
            .await
            .map_err(db_err)
    }
}
