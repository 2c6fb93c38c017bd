//! The PostgreSQL store: compare-and-set updates; JSON columns keep documents byte for byte.

use std::time::Duration;

use agentry_core::store::{ExecutionFilter, ExecutionRecord, ExecutionStore, StoreError};
use async_trait::async_trait;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{Postgres, QueryBuilder};

use crate::row::{ExecutionRow, db_err, is_unique_violation};

/// Executions in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
}

/// Connects to the PostgreSQL database at `url`.
pub async fn connect(url: &str) -> Result<PgPool, sqlx::Error> {
    PgPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(10))
        .connect(url)
        .await
}

impl PgStore {
    pub fn new(pool: PgPool) -> Self {
        Self { pool }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

/// JSON columns are read back as text so that both backends share one row shape.
const COLUMNS: &str = "id, workflow_id, status, input::text AS input, context::text AS context, \
     user_id, start_at, updated_at, end_at, result::text AS result, error, \
     suspension::text AS suspension, suspend_request::text AS suspend_request, \
     next_step::bigint AS next_step, steps::text AS steps, version, owner, lease_node, \
     lease_epoch, lease_ttl_ms";

/// The database's clock, in milliseconds since the epoch: lease expiries are compared with it,
/// never with a host's clock.
const NOW_MS: &str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint";

#[async_trait]
impl ExecutionStore for PgStore {
    async fn insert(&self, record: &ExecutionRecord) -> Result<(), StoreError> {
        let r = ExecutionRow::from_record(record);
        let sql = format!(
            "INSERT INTO workflow_executions (id, workflow_id, status, input, context, user_id, \
             start_at, updated_at, end_at, result, error, suspension, suspend_request, next_step, \
             steps, version, owner, lease_node, lease_epoch, lease_ttl_ms, lease_expires_at) \
             VALUES ($1, $2, $3, $4::json, $5::json, $6, $7, $8, $9, $10::json, $11, $12::json, \
             $13::json, $14, $15::json, $16, $17, $18, $19, $20::bigint, \
             CASE WHEN $3 = 'running' THEN {NOW_MS} + $20::bigint END)"
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
            .bind(r.next_step as i32)
            .bind(&r.steps)
            .bind(r.version)
            .bind(&r.owner)
            .bind(&r.lease_node)
            .bind(r.lease_epoch)
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
        let sql = format!("SELECT {COLUMNS} FROM workflow_executions WHERE id = $1");
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
            "UPDATE workflow_executions SET status = $1, input = $2::json, context = $3::json, \
             user_id = $4, updated_at = $5, end_at = $6, result = $7::json, error = $8, \
             suspension = $9::json, suspend_request = $10::json, next_step = $11, \
             steps = $12::json, version = $13, lease_node = $16, lease_epoch = $17, \
             lease_ttl_ms = $18::bigint, \
             lease_expires_at = CASE WHEN $1 <> 'running' THEN NULL \
               WHEN status = 'running' AND lease_node IS NOT DISTINCT FROM $16 \
                 AND lease_epoch = $17 THEN lease_expires_at \
               ELSE {NOW_MS} + $18::bigint END \
             WHERE id = $14 AND version = $15"
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
            .bind(r.next_step as i32)
            .bind(&r.steps)
            .bind(r.version)
            .bind(&r.id)
            .bind(expected_version)
            .bind(&r.lease_node)
            .bind(r.lease_epoch)
            .bind(r.lease_ttl_ms)
            .execute(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(res.rows_affected() == 1)
    }

    async fn list(&self, filter: &ExecutionFilter) -> Result<Vec<ExecutionRecord>, StoreError> {
        let mut q: QueryBuilder<Postgres> = QueryBuilder::new(format!(
            "SELECT {COLUMNS} FROM workflow_executions WHERE TRUE"
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
             WHERE lease_node = $1 AND status = 'running'"
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
        // SKIP LOCKED: replicas claiming at once each take different rows, none waits.
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        let sql = format!(
            "UPDATE workflow_executions SET lease_node = $1, lease_epoch = lease_epoch + 1, \
             lease_ttl_ms = $2, lease_expires_at = {NOW_MS} + $2, version = version + 1 \
             WHERE id IN (SELECT id FROM workflow_executions WHERE status = 'running' \
               AND (lease_expires_at IS NULL OR lease_expires_at < {NOW_MS} \
                    OR ($3 AND lease_node = $1)) \
               ORDER BY start_at LIMIT $4 FOR UPDATE SKIP LOCKED) \
             RETURNING {COLUMNS}"
        );
        let rows: Vec<ExecutionRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(node)
            .bind(ttl_ms)
            .bind(own)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        rows.into_iter().map(ExecutionRow::into_record).collect()
    }

    async fn release_leases(&self, node: &str) -> Result<u64, StoreError> {
        let res = sqlx::query(
            "UPDATE workflow_executions SET lease_expires_at = 0 \
             WHERE lease_node = $1 AND status = 'running'",
        )
        .bind(node)
        .execute(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(res.rows_affected())
    }
}
