//! Schedules (`schedules`), written once for both databases through the same [`Dialect`] as the
//! executions: a row per schedule, its definition and state one JSON document, every change a
//! compare-and-set on `version`.

use agentry_engine::store::StoreError;
use agentry_schedules::{Schedule, ScheduleStore};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Database, Encode, Executor, IntoArguments, Pool, QueryBuilder, Type};

use crate::row::db_err;
use crate::sql::Dialect;

/// Schedules in a SQL database (SQLite or PostgreSQL).
#[derive(Debug)]
pub struct SqlScheduleStore<DB: Database> {
    pool: Pool<DB>,
}

impl<DB: Database> SqlScheduleStore<DB> {
    pub fn new(pool: Pool<DB>) -> Self {
        Self { pool }
    }
}

/// A stored row: the document and its version.
#[derive(sqlx::FromRow)]
struct ScheduleRow {
    record: String,
    version: i64,
}

impl ScheduleRow {
    fn into_schedule(self) -> Result<Schedule, StoreError> {
        let mut schedule: Schedule =
            serde_json::from_str(&self.record).map_err(|e| StoreError::Corrupt {
                id: "schedules".into(),
                reason: e.to_string(),
            })?;
        schedule.version = self.version;
        Ok(schedule)
    }
}

/// The document of a schedule.
fn document(schedule: &Schedule) -> Result<String, StoreError> {
    serde_json::to_string(schedule).map_err(|e| StoreError::Invalid(e.to_string()))
}

fn due_ms(schedule: &Schedule) -> Option<i64> {
    schedule.due_at.map(|t| t.timestamp_millis())
}

/// The select list of a row (the document read back as text).
fn select<DB: Dialect>() -> String {
    format!(
        "SELECT record{} AS record, version FROM schedules",
        DB::AS_TEXT
    )
}

#[async_trait]
impl<DB> ScheduleStore for SqlScheduleStore<DB>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB> + sqlx::Decode<'t, DB>,
    for<'t> Option<String>: Encode<'t, DB> + Type<DB>,
    for<'t> i64: Encode<'t, DB> + Type<DB> + sqlx::Decode<'t, DB>,
    for<'t> Option<i64>: Encode<'t, DB> + Type<DB>,
    ScheduleRow: for<'r> sqlx::FromRow<'r, DB::Row>,
    (String,): for<'r> sqlx::FromRow<'r, DB::Row>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    async fn insert(&self, schedule: &Schedule) -> Result<(), StoreError> {
        let _turn = DB::write_turn(&self.pool).await;
        let mut q = QueryBuilder::<DB>::new(
            "INSERT INTO schedules (id, owner, due_ms, record, version) VALUES (",
        );
        q.push_bind(schedule.id.clone())
            .push(", ")
            .push_bind(schedule.owner.clone())
            .push(", ")
            .push_bind(due_ms(schedule))
            .push(", ")
            .push_bind(document(schedule)?)
            .push(DB::AS_JSON)
            .push(", ")
            .push_bind(schedule.version)
            .push(") ON CONFLICT (id) DO NOTHING");
        let done = q.build().execute(&self.pool).await.map_err(db_err)?;
        if DB::rows_affected(&done) == 0 {
            return Err(StoreError::Duplicate(schedule.id.clone()));
        }
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<Schedule>, StoreError> {
        let mut q = QueryBuilder::<DB>::new(select::<DB>());
        q.push(" WHERE id = ").push_bind(id.to_owned());
        q.build_query_as::<ScheduleRow>()
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err)?
            .map(ScheduleRow::into_schedule)
            .transpose()
    }

    async fn list(&self, owner: Option<&str>) -> Result<Vec<Schedule>, StoreError> {
        let mut q = QueryBuilder::<DB>::new(select::<DB>());
        if let Some(owner) = owner {
            q.push(" WHERE owner = ").push_bind(owner.to_owned());
        }
        q.push(" ORDER BY id");
        q.build_query_as::<ScheduleRow>()
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?
            .into_iter()
            .map(ScheduleRow::into_schedule)
            .collect()
    }

    async fn count(&self, owner: Option<&str>) -> Result<u64, StoreError> {
        let mut q = QueryBuilder::<DB>::new("SELECT COUNT(*) FROM schedules");
        if let Some(owner) = owner {
            q.push(" WHERE owner = ").push_bind(owner.to_owned());
        }
        let (count,): (i64,) = q
            .build_query_as()
            .fetch_one(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(u64::try_from(count).unwrap_or_default())
    }

    async fn compare_and_set(
        &self,
        schedule: &Schedule,
        expected: i64,
    ) -> Result<bool, StoreError> {
        let _turn = DB::write_turn(&self.pool).await;
        let mut q = QueryBuilder::<DB>::new("UPDATE schedules SET due_ms = ");
        q.push_bind(due_ms(schedule))
            .push(", record = ")
            .push_bind(document(schedule)?)
            .push(DB::AS_JSON)
            .push(", version = ")
            .push_bind(schedule.version)
            .push(" WHERE id = ")
            .push_bind(schedule.id.clone())
            .push(" AND version = ")
            .push_bind(expected);
        let done = q.build().execute(&self.pool).await.map_err(db_err)?;
        Ok(DB::rows_affected(&done) == 1)
    }

    async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        let _turn = DB::write_turn(&self.pool).await;
        let mut q = QueryBuilder::<DB>::new("DELETE FROM schedules WHERE id = ");
        q.push_bind(id.to_owned());
        let done = q.build().execute(&self.pool).await.map_err(db_err)?;
        Ok(DB::rows_affected(&done) == 1)
    }

    async fn due(&self, now: DateTime<Utc>, limit: u32) -> Result<Vec<String>, StoreError> {
        let mut q = QueryBuilder::<DB>::new(
            "SELECT id FROM schedules WHERE due_ms IS NOT NULL AND due_ms <= ",
        );
        q.push_bind(now.timestamp_millis())
            .push(" ORDER BY due_ms LIMIT ")
            .push_bind(i64::from(limit));
        q.build_query_scalar()
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)
    }
}
