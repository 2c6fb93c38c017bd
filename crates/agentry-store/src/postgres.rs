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
     next_step::bigint AS next_step, steps::text AS steps, version, owner";

#[async_trait]
impl ExecutionStore for PgStore {
    async fn insert(&self, record: &ExecutionRecord) -> Result<(), StoreError> {
        let r = ExecutionRow::from_record(record);
        let res = sqlx::query(
            "INSERT INTO workflow_executions (id, workflow_id, status, input, context, user_id, \
             start_at, updated_at, end_at, result, error, suspension, suspend_request, next_step, \
             steps, version, owner) VALUES ($1, $2, $3, $4::json, $5::json, $6, $7, $8, $9, \
             $10::json, $11, $12::json, $13::json, $14, $15::json, $16, $17)",
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
        .bind(r.next_step as i32)
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
        let res = sqlx::query(
            "UPDATE workflow_executions SET status = $1, input = $2::json, context = $3::json, \
             user_id = $4, updated_at = $5, end_at = $6, result = $7::json, error = $8, \
             suspension = $9::json, suspend_request = $10::json, next_step = $11, \
             steps = $12::json, version = $13 WHERE id = $14 AND version = $15",
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
        .bind(r.next_step as i32)
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
}
