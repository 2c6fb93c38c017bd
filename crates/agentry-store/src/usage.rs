//! Token usage (`agent_usage`), written once for both databases: one row per agent, user and
//! UTC day, added to with one upsert (the same SQL on SQLite and PostgreSQL).

use agentry_agents::usage::{UsageKey, UsageStore};
use agentry_engine::store::StoreError;
use async_trait::async_trait;
use chrono::NaiveDate;
use sqlx::{Database, Encode, Executor, IntoArguments, Pool, QueryBuilder, Type};

use crate::row::db_err;

/// Token usage in a SQL database (SQLite or PostgreSQL).
#[derive(Debug)]
pub struct SqlUsageStore<DB: Database> {
    pool: Pool<DB>,
}

impl<DB: Database> SqlUsageStore<DB> {
    pub fn new(pool: Pool<DB>) -> Self {
        Self { pool }
    }
}

fn day_text(day: NaiveDate) -> String {
    day.format("%Y-%m-%d").to_string()
}

fn tokens(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[async_trait]
impl<DB> UsageStore for SqlUsageStore<DB>
where
    DB: crate::sql::Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB> + sqlx::Decode<'t, DB>,
    for<'t> i64: Encode<'t, DB> + Type<DB> + sqlx::Decode<'t, DB>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
    (String, i64): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    async fn add(&self, key: &UsageKey, n: u64) -> Result<(), StoreError> {
        let _turn = DB::write_turn(&self.pool).await;
        let mut q = QueryBuilder::<DB>::new(
            "INSERT INTO agent_usage (agent_id, user_id, day, tokens) VALUES (",
        );
        q.push_bind(key.agent_id.clone())
            .push(", ")
            .push_bind(key.user_id.clone())
            .push(", ")
            .push_bind(day_text(key.day))
            .push(", ")
            .push_bind(tokens(n))
            .push(
                ") ON CONFLICT (agent_id, user_id, day) \
                 DO UPDATE SET tokens = agent_usage.tokens + excluded.tokens",
            );
        q.build().execute(&self.pool).await.map_err(db_err)?;
        Ok(())
    }

    async fn used(&self, key: &UsageKey) -> Result<u64, StoreError> {
        let mut q = QueryBuilder::<DB>::new("SELECT tokens FROM agent_usage WHERE agent_id = ");
        q.push_bind(key.agent_id.clone())
            .push(" AND user_id = ")
            .push_bind(key.user_id.clone())
            .push(" AND day = ")
            .push_bind(day_text(key.day));
        let row: Option<(i64,)> = q
            .build_query_as()
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(row.map_or(0, |(n,)| u64::try_from(n).unwrap_or(0)))
    }

    async fn days(
        &self,
        agent_id: &str,
        user_id: &str,
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<Vec<(NaiveDate, u64)>, StoreError> {
        let mut q =
            QueryBuilder::<DB>::new("SELECT day, tokens FROM agent_usage WHERE agent_id = ");
        q.push_bind(agent_id.to_owned())
            .push(" AND user_id = ")
            .push_bind(user_id.to_owned())
            .push(" AND day >= ")
            .push_bind(day_text(from))
            .push(" AND day <= ")
            .push_bind(day_text(to))
            .push(" ORDER BY day");
        let rows: Vec<(String, i64)> = q
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        rows.into_iter()
            .map(|(day, n)| {
                let day = NaiveDate::parse_from_str(&day, "%Y-%m-%d").map_err(|e| {
                    StoreError::Corrupt {
                        id: "agent_usage".into(),
                        reason: e.to_string(),
                    }
                })?;
                Ok((day, u64::try_from(n).unwrap_or(0)))
            })
            .collect()
    }
}
