//! The persistence boundary: what the engine stores, and the trait a database implements.
//!
//! Every write of an execution is a compare-and-set on its `version`: the store writes the new
//! record only if the stored version is still the one the writer read. Two concurrent resumes (or
//! a suspend request racing a checkpoint) therefore never both win; the loser re-reads and
//! re-applies its transition to the fresh state, where the state machine may refuse it.

use std::collections::HashMap;
use std::sync::Mutex;

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
    pub start_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub progress: Progress,
    /// Incremented by every write; the compare-and-set token.
    pub version: i64,
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
}

/// A store that keeps everything in process memory: for tests, examples and tools that need no
/// database.
#[derive(Debug, Default)]
pub struct MemoryStore {
    rows: Mutex<HashMap<String, ExecutionRecord>>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn rows(&self) -> std::sync::MutexGuard<'_, HashMap<String, ExecutionRecord>> {
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
        rows.insert(record.id.clone(), record.clone());
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<ExecutionRecord>, StoreError> {
        Ok(self.rows().get(id).cloned())
    }

    async fn compare_and_set(
        &self,
        record: &ExecutionRecord,
        expected_version: i64,
    ) -> Result<bool, StoreError> {
        let mut rows = self.rows();
        match rows.get_mut(&record.id) {
            Some(row) if row.version == expected_version => {
                *row = record.clone();
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn list(&self, filter: &ExecutionFilter) -> Result<Vec<ExecutionRecord>, StoreError> {
        let mut out: Vec<ExecutionRecord> = self
            .rows()
            .values()
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
}
