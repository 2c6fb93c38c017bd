//! The row shape both backends share, and its conversion to and from the core record.

use agentry_core::state::{ExecutionState, StateParts, Status};
use agentry_core::store::{ExecutionRecord, Lease, Progress, StoreError};
use chrono::{DateTime, Utc};
use serde_json::Value;

/// One `workflow_executions` row, JSON columns as text.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct ExecutionRow {
    pub id: String,
    pub workflow_id: String,
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
    pub steps: String,
    pub version: i64,
    pub lease_node: Option<String>,
    pub lease_epoch: i64,
    pub lease_ttl_ms: Option<i64>,
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    // Serialising a serde_json::Value or a plain derived struct cannot fail.
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

impl ExecutionRow {
    pub fn from_record(r: &ExecutionRecord) -> Self {
        let parts = r.state.to_parts();
        Self {
            id: r.id.clone(),
            workflow_id: r.workflow_id.clone(),
            status: parts.status.as_str().to_owned(),
            input: to_json(&r.input),
            context: to_json(&r.context),
            user_id: r.user_id.clone(),
            owner: r.owner.clone(),
            start_at: r.start_at,
            updated_at: r.updated_at,
            end_at: parts.end_at,
            result: parts.result.as_ref().map(to_json),
            error: parts.error,
            suspension: parts.suspension.as_ref().map(to_json),
            suspend_request: parts.suspend_request.as_ref().map(to_json),
            next_step: r.progress.next_step as i64,
            steps: to_json(&r.progress.steps),
            version: r.version,
            lease_node: r.lease.as_ref().map(|l| l.node.clone()),
            lease_epoch: r.lease.as_ref().map_or(0, |l| l.epoch),
            lease_ttl_ms: r.lease.as_ref().map(Lease::ttl_ms),
        }
    }

    pub fn into_record(self) -> Result<ExecutionRecord, StoreError> {
        let id = self.id.clone();
        let corrupt = |reason: String| StoreError::Corrupt {
            id: id.clone(),
            reason,
        };
        fn parse<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, String> {
            serde_json::from_str(s).map_err(|e| e.to_string())
        }
        fn parse_opt<T: serde::de::DeserializeOwned>(s: Option<&str>) -> Result<Option<T>, String> {
            s.map(parse).transpose()
        }
        let status = Status::parse(&self.status)
            .ok_or_else(|| corrupt(format!("unknown status {}", self.status)))?;
        let parts = StateParts {
            status,
            end_at: self.end_at,
            result: parse_opt::<Value>(self.result.as_deref()).map_err(&corrupt)?,
            error: self.error,
            suspension: parse_opt(self.suspension.as_deref()).map_err(&corrupt)?,
            suspend_request: parse_opt(self.suspend_request.as_deref()).map_err(&corrupt)?,
        };
        let state = ExecutionState::from_parts(parts).map_err(&corrupt)?;
        let context = match parse::<Value>(&self.context).map_err(&corrupt)? {
            Value::Object(m) => m,
            _ => return Err(corrupt("context is not an object".into())),
        };
        let steps = match parse::<Value>(&self.steps).map_err(&corrupt)? {
            Value::Object(m) => m,
            _ => return Err(corrupt("steps is not an object".into())),
        };
        Ok(ExecutionRecord {
            id: self.id,
            workflow_id: self.workflow_id,
            state,
            input: parse(&self.input).map_err(&corrupt)?,
            context,
            user_id: self.user_id,
            owner: self.owner,
            lease: self.lease_node.map(|node| Lease {
                node,
                epoch: self.lease_epoch,
                ttl: std::time::Duration::from_millis(
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
        })
    }
}

pub(crate) fn db_err(e: sqlx::Error) -> StoreError {
    StoreError::Database(e.to_string())
}

pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}
