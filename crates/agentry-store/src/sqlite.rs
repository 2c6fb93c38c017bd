//! The SQLite store (the embedded default): WAL journal, a busy timeout, compare-and-set updates.

use std::str::FromStr;
use std::time::Duration;

use agentry_core::store::{ExecutionFilter, ExecutionRecord, ExecutionStore, StoreError};
use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{QueryBuilder, Sqlite, SqlitePool};

use crate::row::{ExecutionRow, db_err, is_unique_violation};

/// Executions in SQLite.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

/// Opens (creating if missing) the SQLite database at `url` (`sqlite://PATH` or
/// `sqlite::memory:`).
pub async fn connect(url: &str) -> Result<SqlitePool, sqlx::Error> {
    let in_memory = url.contains(":memory:") || url.contains("mode=memory");
    let options = SqliteConnectOptions::from_str(url)?
        .create_if_missing(true)
        .journal_mode(if in_memory {
            SqliteJournalMode::Memory
        } else {
            SqliteJournalMode::Wal
        })
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10))
        .foreign_keys(true);
    let mut pool = SqlitePoolOptions::new();
    if in_memory {
        // Every connection to `:memory:` is its own database: keep exactly one, forever.
        pool = pool
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None);
    } else {
        pool = pool.max_connections(8);
    }
    pool.connect_with(options).await
}

impl SqliteStore {
    pub fn new(pool: SqlitePool) -> Self {
        Self { pool }
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }
}

const COLUMNS: &str = "id, workflow_id, status, input, context, user_id, start_at, updated_at, end_at, \
     result, error, suspension, suspend_request, next_step, steps, version, owner";

#[async_trait]
impl ExecutionStore for SqliteStore {
    async fn insert(&self, record: &ExecutionRecord) -> Result<(), StoreError> {
        let r = ExecutionRow::from_record(record);
        let res = sqlx::query(
            "INSERT INTO workflow_executions (id, workflow_id, status, input, context, user_id, \
             start_at, updated_at, end_at, result, error, suspension, suspend_request, next_step, \
             steps, version, owner) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&r.id)
        .bind(&r.workflow_id)
        .bind(&r.status)
        .bind(&r.input)
        .bind(&r.context)
        .bind(&r.user_id)
        .bind(r.start_at)
        .bind(r.updated_at)
        .bind(r.end_at)
        .bind(&r.result)
        .bind(&r.error)
        .bind(&r.suspension)
        .bind(&r.suspend_request)
        .bind(r.next_step)
        .bind(&r.steps)
        .bind(r.version)
        .bind(&r.owner)
        .execute(&self.pool)
        .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) if is_unique_violation(&e) => Err(StoreError::Duplicate(record.id.clone())),
            Err(e) => Err(db_err(e)),
        }
    }

    async fn get(&self, id: &str) -> Result<Option<ExecutionRecord>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM workflow_executions WHERE id = ?");
        let row: Option<ExecutionRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err)?;
        row.map(ExecutionRow::into_record).transpose()
    }

    async fn compare_and_set(
        &self,
        record: &ExecutionRecord,
        expected_version: i64,
    ) -> Result<bool, StoreError> {
        let r = ExecutionRow::from_record(record);
        let res = sqlx::query(
            "UPDATE workflow_executions SET status = ?, input = ?, context = ?, user_id = ?, \
             updated_at = ?, end_at = ?, result = ?, error = ?, suspension = ?, \
             suspend_request = ?, next_step = ?, steps = ?, version = ? \
             WHERE id = ? AND version = ?",
        )
        .bind(&r.status)
        .bind(&r.input)
        .bind(&r.context)
        .bind(&r.user_id)
        .bind(r.updated_at)
        .bind(r.end_at)
        .bind(&r.result)
        .bind(&r.error)
        .bind(&r.suspension)
        .bind(&r.suspend_request)
        .bind(r.next_step)
        .bind(&r.steps)
        .bind(r.version)
        .bind(&r.id)
        .bind(expected_version)
        .execute(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(res.rows_affected() == 1)
    }

    async fn list(&self, filter: &ExecutionFilter) -> Result<Vec<ExecutionRecord>, StoreError> {
        let mut q: QueryBuilder<Sqlite> = QueryBuilder::new(format!(
            "SELECT {COLUMNS} FROM workflow_executions WHERE 1 = 1"
        ));
        if let Some(w) = &filter.workflow_id {
            q.push(" AND workflow_id = ").push_bind(w.clone());
        }
        if let Some(s) = filter.status {
            q.push(" AND status = ").push_bind(s.as_str());
        }
        q.push(" ORDER BY start_at, id");
        if let Some(limit) = filter.limit {
            q.push(" LIMIT ").push_bind(i64::from(limit));
        }
        let rows: Vec<ExecutionRow> = q
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        rows.into_iter().map(ExecutionRow::into_record).collect()
    }
}
