//! The row shapes both databases share, and their conversion to and from the core records.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentry_engine::WorkflowEvent;
use agentry_engine::queue::QueuePlace;
use agentry_engine::state::{ExecutionState, StateParts, Status};
use agentry_engine::store::{
    ExecutionRecord, Lease, Progress, PublishedEvent, StepRecord, StepStatus, StoreError,
};
use chrono::{DateTime, Utc};
use serde_json::Value;

/// One `workflow_executions` row (the execution's header), JSON columns as text.
#[derive(Debug, sqlx::FromRow)]
pub struct ExecutionRow {
    pub id: String,
    pub workflow_id: String,
    pub workflow_version: Option<String>,
    pub status: String,
    pub input: String,
    pub context: String,
    pub user_id: Option<String>,
    pub owner: Option<String>,
    pub start_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub end_at: Option<DateTime<Utc>>,
    pub result: Option<String>,
    pub error: Option<String>,
    pub suspension: Option<String>,
    pub suspend_request: Option<String>,
    pub next_step: i64,
    pub version: i64,
    pub lease_node: Option<String>,
    pub lease_epoch: i64,
    pub lease_ttl_ms: Option<i64>,
    pub last_event: i64,
    pub cancellation: Option<String>,
    pub error_step_id: Option<String>,
    /// When a timer resumes it (a suspension's deadline), in milliseconds since the epoch:
    /// derived from the state, written for the timer query, never read back.
    #[sqlx(default)]
    pub wake_at: Option<i64>,
    /// The event and key its step waits for ([`ExecutionRecord::waiting_for`]): derived from
    /// the state, written for the lookup by key, never read back.
    #[sqlx(default)]
    pub waiting_for: Option<String>,
    /// Its place in its workflow's queue (`QueuePlace`): the queue, key and priority set at
    /// the insert, `queued_at` when it entered (again), `dequeued_at_ms` written by a dequeue
    /// from the database's clock.
    pub queue_name: Option<String>,
    pub queue_key: Option<String>,
    pub queue_priority: i64,
    pub queued_at: Option<DateTime<Utc>>,
    pub dequeued_at_ms: Option<i64>,
}

/// A queued execution as a dequeue pass reads it.
#[derive(Debug, sqlx::FromRow)]
pub struct CandidateRow {
    pub id: String,
    pub queue_key: Option<String>,
    pub queue_priority: i64,
    pub queued_at: DateTime<Utc>,
    pub served: Option<i64>,
}

/// How many of a queue's executions are in a status, per key (and the oldest `queued_at`).
#[derive(Debug, sqlx::FromRow)]
pub struct QueueCountRow {
    pub queue_key: Option<String>,
    pub status: String,
    pub count: i64,
    pub oldest: Option<DateTime<Utc>>,
}

/// How many of a queue's executions hold a slot, or started in its window, per key.
#[derive(Debug, sqlx::FromRow)]
pub struct KeyCountRow {
    pub queue_key: Option<String>,
    pub count: i64,
}

/// A queue's pass number.
#[derive(Debug, sqlx::FromRow)]
pub struct PassRow {
    pub passes: i64,
}

/// A step row's key, as the write of child steps returns it.
#[derive(Debug, sqlx::FromRow)]
pub struct StepKeyRow {
    pub execution_id: String,
    pub step_id: String,
}

/// An execution id, as some statements return it.
#[derive(Debug, sqlx::FromRow)]
pub struct IdRow {
    pub id: String,
}

/// How many executions of a workflow are in a status.
#[derive(Debug, sqlx::FromRow)]
pub struct CountRow {
    pub workflow_id: String,
    pub status: String,
    pub count: i64,
}

/// A live node's workflow versions (a JSON array of keys, as text).
#[derive(Debug, sqlx::FromRow)]
pub struct NodeRow {
    pub versions: String,
}

/// How many executions of a workflow are in flight on a version.
#[derive(Debug, sqlx::FromRow)]
pub struct VersionCountRow {
    pub workflow_version: Option<String>,
    pub count: i64,
}

/// One `workflow_events` row, with its execution's workflow id.
#[derive(Debug, sqlx::FromRow)]
pub struct EventRow {
    pub execution_id: String,
    pub workflow_id: String,
    pub seq: i64,
    pub at: DateTime<Utc>,
    pub data: String,
}

impl EventRow {
    pub fn into_event(self) -> Result<WorkflowEvent, StoreError> {
        let kind = parse(&self.data).map_err(|reason| StoreError::Corrupt {
            id: self.execution_id.clone(),
            reason: format!("event {}: {reason}", self.seq),
        })?;
        Ok(WorkflowEvent {
            execution_id: self.execution_id,
            workflow_id: self.workflow_id,
            seq: Some(self.seq),
            timestamp: self.at,
            kind,
        })
    }
}

/// One `workflow_published_events` row, JSON columns as text.
#[derive(Debug, sqlx::FromRow)]
pub struct PublishedRow {
    pub name: String,
    pub scope: String,
    pub event_id: String,
    pub event_key: String,
    pub data: String,
    pub published_at: DateTime<Utc>,
    pub owner: Option<String>,
    pub woken: Option<String>,
}

/// What [`agentry_engine::store::ExecutionStore::published_load`] counts.
#[derive(Debug, sqlx::FromRow)]
pub struct LoadRow {
    pub count: i64,
    pub bytes: i64,
    pub key_count: i64,
    pub key_bytes: i64,
}

impl PublishedRow {
    pub fn into_event(self) -> Result<PublishedEvent, StoreError> {
        let corrupt = |reason: String| StoreError::Corrupt {
            id: format!("event {} {}", self.name, self.event_id),
            reason,
        };
        Ok(PublishedEvent {
            data: parse(&self.data).map_err(corrupt)?,
            woken: parse_opt(self.woken.as_deref()).map_err(corrupt)?,
            name: self.name,
            scope: self.scope,
            event_id: self.event_id,
            key: self.event_key,
            published_at: self.published_at,
            owner: self.owner,
        })
    }
}

/// One `workflow_steps` row, JSON columns as text.
#[derive(Debug, sqlx::FromRow)]
pub struct StepRow {
    pub step_id: String,
    pub parent_step_id: Option<String>,
    pub status: String,
    pub attempt: i64,
    pub input: String,
    pub output: Option<String>,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    pub failures: String,
}

pub(crate) fn to_json<T: serde::Serialize>(v: &T) -> String {
    // Serialising a serde_json::Value or a plain derived struct cannot fail.
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

fn parse<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, String> {
    serde_json::from_str(s).map_err(|e| e.to_string())
}

fn parse_opt<T: serde::de::DeserializeOwned>(s: Option<&str>) -> Result<Option<T>, String> {
    s.map(parse).transpose()
}

impl ExecutionRow {
    pub fn from_record(r: &ExecutionRecord) -> Self {
        Self {
            input: to_json(&r.input),
            context: to_json(&r.context),
            ..Self::checkpoint_of(r)
        }
    }

    /// The row a checkpoint writes: every column but the input and the context, which never
    /// change after the insert (left empty here rather than serialized for nothing).
    pub fn checkpoint_of(r: &ExecutionRecord) -> Self {
        let parts = r.state.to_parts();
        Self {
            id: r.id.clone(),
            workflow_id: r.workflow_id.clone(),
            workflow_version: r.workflow_version.clone(),
            status: parts.status.as_str().to_owned(),
            input: String::new(),
            context: String::new(),
            user_id: r.user_id.clone(),
            owner: r.owner.clone(),
            start_at: r.start_at,
            updated_at: r.updated_at,
            end_at: parts.end_at,
            result: parts.result.as_ref().map(to_json),
            // A message for people, which may quote a step's data: PostgreSQL's text cannot
            // hold NUL, so neither database stores one (U+FFFD in its place).
            error: parts.error.map(|e| e.replace('\0', "\u{fffd}")),
            suspension: parts.suspension.as_ref().map(to_json),
            suspend_request: parts.suspend_request.as_ref().map(to_json),
            next_step: i64::try_from(r.progress.next_step).unwrap_or(i64::MAX),
            version: r.version,
            lease_node: r.lease.as_ref().map(|l| l.node.clone()),
            lease_epoch: r.lease.as_ref().map_or(0, |l| l.epoch),
            lease_ttl_ms: r.lease.as_ref().map(Lease::ttl_ms),
            last_event: r.last_event,
            cancellation: parts.cancellation.as_ref().map(to_json),
            error_step_id: parts.error_step,
            wake_at: parts
                .suspension
                .as_ref()
                .and_then(|s| s.deadline)
                .map(|d| d.timestamp_millis()),
            waiting_for: r.waiting_for(),
            queue_name: r.queue.as_ref().map(|q| q.name.clone()),
            queue_key: r.queue.as_ref().and_then(|q| q.key.clone()),
            queue_priority: r.queue.as_ref().map_or(0, |q| q.priority),
            queued_at: r.queue.as_ref().map(|q| q.queued_at),
            dequeued_at_ms: r
                .queue
                .as_ref()
                .and_then(|q| q.started_at)
                .map(|t| t.timestamp_millis()),
        }
    }

    /// The record, with `steps` as its step records.
    pub fn into_record(self, steps: Vec<StepRow>) -> Result<ExecutionRecord, StoreError> {
        let id = self.id.clone();
        let corrupt = |reason: String| StoreError::Corrupt {
            id: id.clone(),
            reason,
        };
        let status = Status::parse(&self.status)
            .ok_or_else(|| corrupt(format!("unknown status {}", self.status)))?;
        let parts = StateParts {
            status,
            end_at: self.end_at,
            result: parse_opt::<Value>(self.result.as_deref()).map_err(&corrupt)?,
            error: self.error,
            error_step: self.error_step_id,
            suspension: parse_opt(self.suspension.as_deref()).map_err(&corrupt)?,
            suspend_request: parse_opt(self.suspend_request.as_deref()).map_err(&corrupt)?,
            cancellation: parse_opt(self.cancellation.as_deref()).map_err(&corrupt)?,
        };
        let state = ExecutionState::from_parts(parts).map_err(&corrupt)?;
        let context = match parse::<Value>(&self.context).map_err(&corrupt)? {
            Value::Object(m) => m,
            _ => return Err(corrupt("context is not an object".into())),
        };
        let steps = steps
            .into_iter()
            .map(|s| Ok((s.step_id.clone(), Arc::new(s.into_record()?))))
            .collect::<Result<BTreeMap<_, _>, String>>()
            .map(Arc::new)
            .map_err(&corrupt)?;
        Ok(ExecutionRecord {
            id: self.id,
            workflow_id: self.workflow_id,
            workflow_version: self.workflow_version,
            state,
            input: parse(&self.input).map_err(&corrupt)?,
            context,
            user_id: self.user_id,
            owner: self.owner,
            lease: self.lease_node.map(|node| Lease {
                node,
                epoch: self.lease_epoch,
                ttl: Duration::from_millis(
                    u64::try_from(self.lease_ttl_ms.unwrap_or(0)).unwrap_or(0),
                ),
            }),
            start_at: self.start_at,
            updated_at: self.updated_at,
            progress: Progress {
                next_step: usize::try_from(self.next_step)
                    .map_err(|_| corrupt("negative next_step".into()))?,
                steps,
            },
            version: self.version,
            last_event: self.last_event,
            queue: match (self.queue_name, self.queued_at) {
                (Some(name), Some(queued_at)) => Some(QueuePlace {
                    name,
                    key: self.queue_key,
                    priority: self.queue_priority,
                    queued_at,
                    started_at: self
                        .dequeued_at_ms
                        .and_then(DateTime::from_timestamp_millis),
                }),
                _ => None,
            },
        })
    }
}

impl StepRow {
    pub fn from_record(step_id: &str, r: &StepRecord) -> Self {
        Self {
            step_id: step_id.to_owned(),
            parent_step_id: r.parent.clone(),
            status: r.status.as_str().to_owned(),
            attempt: i64::from(r.attempt),
            input: to_json(&r.input),
            output: r.output.as_ref().map(to_json),
            started_at: r.started_at,
            ended_at: r.ended_at,
            failures: to_json(&r.failures),
        }
    }

    fn into_record(self) -> Result<StepRecord, String> {
        let step = &self.step_id;
        Ok(StepRecord {
            status: StepStatus::parse(&self.status)
                .ok_or_else(|| format!("step {step} has the unknown status {}", self.status))?,
            attempt: u32::try_from(self.attempt)
                .map_err(|_| format!("step {step} has the attempt {}", self.attempt))?,
            parent: self.parent_step_id,
            input: parse(&self.input)?,
            output: parse_opt(self.output.as_deref())?,
            started_at: self.started_at,
            ended_at: self.ended_at,
            failures: parse(&self.failures)?,
        })
    }
}

/// A database failure as the store's: [`StoreError::Unavailable`] for every fault of the
/// database or the way to it, not of the statement (worth trying again: a run waits and tries
/// again, a request answers 503), [`StoreError::Invalid`] for a value it cannot hold,
/// [`StoreError::Database`] for the rest: a statement the database refuses, which is a bug
/// of this crate.
pub(crate) fn db_err(e: sqlx::Error) -> StoreError {
    let code = match &e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::BeginFailed => Code::Unavailable,
        sqlx::Error::Database(d) => match d.code() {
            Some(c) if d.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() => {
                Code::sqlite(c.parse().unwrap_or_default())
            }
            Some(c) => Code::postgres(&c),
            None => Code::Other,
        },
        _ => Code::Other,
    };
    match code {
        Code::Unavailable => StoreError::Unavailable(e.to_string()),
        Code::Unstorable => {
            StoreError::Invalid("a text value must not contain the NUL character".into())
        }
        Code::TooLarge => StoreError::Invalid(format!("a value is too large to store: {e}")),
        Code::Other => StoreError::Database(e.to_string()),
    }
}

/// What a database's error code says.
#[derive(Debug, PartialEq, Eq)]
enum Code {
    /// Not the statement's fault: the database is unreachable, stopping, restarting, gone,
    /// out of space or of connections, busy past its time-out, read-only, or the session is in
    /// a state the statement did not make.
    Unavailable,
    /// A character the database cannot store (PostgreSQL's NUL in text).
    Unstorable,
    /// A value over a limit of the database (PostgreSQL's index row size).
    TooLarge,
    Other,
}

impl Code {
    /// SQLite's extended result code.
    fn sqlite(extended: i64) -> Code {
        // The primary codes BUSY, LOCKED, NOMEM, READONLY, IOERR, CORRUPT, FULL, CANTOPEN,
        // PROTOCOL and NOTADB.
        match extended & 0xff {
            5 | 6 | 7 | 8 | 10 | 11 | 13 | 14 | 15 | 26 => Code::Unavailable,
            18 => Code::TooLarge,
            _ => Code::Other,
        }
    }

    /// PostgreSQL's SQLSTATE, by its class (the first two characters) where the class says it.
    fn postgres(code: &str) -> Code {
        match code {
            // The NUL character in text or JSON.
            "22021" | "22P05" => Code::Unstorable,
            // A lock not available (`lock_timeout`), a database that does not exist (dropped
            // under the server), a table that does not exist (a schema dropped or not migrated).
            "55P03" | "3D000" | "42P01" => Code::Unavailable,
            // A program limit: an index row or a value over the database's size limits.
            c if c.starts_with("54") => Code::TooLarge,
            // Connection exceptions; invalid transaction state (a read-only transaction, a
            // failed one: a session the statement found so); invalid authorization (a role
            // dropped or its password changed); transaction rollback (serialization failure,
            // deadlock); insufficient resources (disk full, out of memory, too many
            // connections); operator intervention (shutdown, a statement time-out or
            // cancellation); system errors (I/O); the server's internal errors.
            c if ["08", "25", "28", "40", "53", "57", "58", "XX"]
                .iter()
                .any(|class| c.starts_with(class)) =>
            {
                Code::Unavailable
            }
            _ => Code::Other,
        }
    }
}

#[cfg(test)]
mod code_tests {
    use super::Code;

    #[test]
    fn database_codes_are_classified() {
        assert_eq!(Code::sqlite(5), Code::Unavailable); // SQLITE_BUSY
        assert_eq!(Code::sqlite(13), Code::Unavailable); // SQLITE_FULL
        assert_eq!(Code::sqlite(1032), Code::Unavailable); // SQLITE_READONLY_DBMOVED
        assert_eq!(Code::sqlite(2067), Code::Other); // SQLITE_CONSTRAINT_UNIQUE
        assert_eq!(Code::postgres("57P01"), Code::Unavailable); // admin_shutdown
        assert_eq!(Code::postgres("08006"), Code::Unavailable); // connection_failure
        assert_eq!(Code::postgres("53100"), Code::Unavailable); // disk_full
        assert_eq!(Code::postgres("22021"), Code::Unstorable);
        assert_eq!(Code::postgres("23505"), Code::Other); // unique_violation
        assert_eq!(Code::postgres("42601"), Code::Other); // syntax_error: a bug
        assert_eq!(Code::postgres("25P02"), Code::Unavailable); // in_failed_sql_transaction
        assert_eq!(Code::postgres("25006"), Code::Unavailable); // read_only_sql_transaction
        assert_eq!(Code::postgres("3D000"), Code::Unavailable); // invalid_catalog_name
        assert_eq!(Code::postgres("57014"), Code::Unavailable); // query_canceled
        assert_eq!(Code::postgres("54000"), Code::TooLarge); // program_limit_exceeded
        assert_eq!(Code::sqlite(18), Code::TooLarge); // SQLITE_TOOBIG
    }
}
