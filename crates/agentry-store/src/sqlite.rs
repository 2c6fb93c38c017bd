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
     result, error, suspension, suspend_request, next_step, steps, version, owner, lease_node, \
     lease_epoch, lease_ttl_ms";

/// The database's clock, in milliseconds since the epoch: lease expiries are compared with it,
/// never with a host's clock.
const NOW_MS: &str = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";

/// A checkpoint's new lease expiry (binds: status, lease node, lease epoch, ttl): none once the
/// execution stops running; unchanged while the same hold writes (only heartbeats renew it, so a
/// suspend request from another process never keeps a dead owner's lease alive); a full ttl
/// when the hold is new.
const KEEP_OR_NEW_EXPIRY: &str = "CASE WHEN ? <> 'running' THEN NULL \
     WHEN status = 'running' AND lease_node IS ? AND lease_epoch = ? THEN lease_expires_at \
     ELSE CAST(unixepoch('subsec') * 1000 AS INTEGER) + ? END";

#[async_trait]
impl ExecutionStore for SqliteStore {
    async fn insert(&self, record: &ExecutionRecord) -> Result<(), StoreError> {
        let r = ExecutionRow::from_record(record);
        let sql = format!(
            "INSERT INTO workflow_executions (id, workflow_id, status, input, context, user_id, \
             start_at, updated_at, end_at, result, error, suspension, suspend_request, next_step, \
             steps, version, owner, lease_node, lease_epoch, lease_ttl_ms, lease_expires_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, \
             CASE WHEN ? = 'running' THEN {NOW_MS} + ? END)"
        );
        let res = sqlx::query(sqlx::AssertSqlSafe(sql))
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
            .bind(&r.lease_node)
            .bind(r.lease_epoch)
            .bind(r.lease_ttl_ms)
            .bind(&r.status)
            .bind(r.lease_ttl_ms)
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
        let sql = format!(
            "UPDATE workflow_executions SET status = ?, input = ?, context = ?, user_id = ?, \
             updated_at = ?, end_at = ?, result = ?, error = ?, suspension = ?, \
             suspend_request = ?, next_step = ?, steps = ?, version = ?, lease_node = ?, \
             lease_epoch = ?, lease_ttl_ms = ?, \
             lease_expires_at = {KEEP_OR_NEW_EXPIRY} \
             WHERE id = ? AND version = ?"
        );
        let res = sqlx::query(sqlx::AssertSqlSafe(sql))
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
            .bind(&r.lease_node)
            .bind(r.lease_epoch)
            .bind(r.lease_ttl_ms)
            .bind(&r.status)
            .bind(&r.lease_node)
            .bind(r.lease_epoch)
            .bind(r.lease_ttl_ms)
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

    async fn renew_leases(&self, node: &str) -> Result<u64, StoreError> {
        let sql = format!(
            "UPDATE workflow_executions SET lease_expires_at = {NOW_MS} + lease_ttl_ms \
             WHERE lease_node = ? AND status = 'running'"
        );
        let res = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(node)
            .execute(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(res.rows_affected())
    }

    async fn claim_orphans(
        &self,
        node: &str,
        ttl: Duration,
        own: bool,
        limit: u32,
    ) -> Result<Vec<ExecutionRecord>, StoreError> {
        // One statement: SQLite has one writer at a time, so no two claimers see the same row.
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        let sql = format!(
            "UPDATE workflow_executions SET lease_node = ?, lease_epoch = lease_epoch + 1, \
             lease_ttl_ms = ?, lease_expires_at = {NOW_MS} + ?, version = version + 1 \
             WHERE id IN (SELECT id FROM workflow_executions WHERE status = 'running' \
               AND (lease_expires_at IS NULL OR lease_expires_at < {NOW_MS} \
                    OR (? AND lease_node = ?)) \
               ORDER BY start_at LIMIT ?) \
             RETURNING {COLUMNS}"
        );
        let rows: Vec<ExecutionRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(node)
            .bind(ttl_ms)
            .bind(ttl_ms)
            .bind(own)
            .bind(node)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        rows.into_iter().map(ExecutionRow::into_record).collect()
    }

    async fn release_leases(&self, node: &str) -> Result<u64, StoreError> {
        let res = sqlx::query(
            "UPDATE workflow_executions SET lease_expires_at = 0 \
             WHERE lease_node = ? AND status = 'running'",
        )
        .bind(node)
        .execute(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(res.rows_affected())
    }
}
