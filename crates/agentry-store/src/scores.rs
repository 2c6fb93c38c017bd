//! Live scores of agents' generations (`agent_scores`), written once for both databases: a row
//! per run and scorer, replaced when the run is scored again.

use agentry_agents::scorers::{ScoreQuery, ScoreStore, StoredScore};
use agentry_engine::store::StoreError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Database, Encode, Executor, IntoArguments, Pool, QueryBuilder, Type};

use crate::row::db_err;
use crate::sql::Dialect;

/// Scores in a SQL database (SQLite or PostgreSQL).
#[derive(Debug)]
pub struct SqlScoreStore<DB: Database> {
    pool: Pool<DB>,
}

impl<DB: Database> SqlScoreStore<DB> {
    pub fn new(pool: Pool<DB>) -> Self {
        Self { pool }
    }
}

/// A stored row.
#[derive(sqlx::FromRow)]
struct ScoreRow {
    agent_id: String,
    run_id: String,
    owner: Option<String>,
    scorer: String,
    value: f64,
    passed: i64,
    reason: String,
    created_ms: i64,
}

impl From<ScoreRow> for StoredScore {
    fn from(row: ScoreRow) -> Self {
        StoredScore {
            agent_id: row.agent_id,
            run_id: row.run_id,
            owner: row.owner,
            scorer: row.scorer,
            value: row.value,
            passed: row.passed != 0,
            reason: row.reason,
            created_at: DateTime::<Utc>::from_timestamp_millis(row.created_ms).unwrap_or_default(),
        }
    }
}

const SELECT: &str =
    "SELECT agent_id, run_id, owner, scorer, value, passed, reason, created_ms FROM agent_scores";

/// The `WHERE` of `q`, its cursor included.
fn filter<DB>(b: &mut QueryBuilder<DB>, q: &ScoreQuery)
where
    DB: Database,
    for<'t> String: Encode<'t, DB> + Type<DB>,
    for<'t> i64: Encode<'t, DB> + Type<DB>,
{
    filter_all(b, q);
    if let Some(a) = &q.after {
        let ms = a.created_at.timestamp_millis();
        b.push(" AND (created_ms < ")
            .push_bind(ms)
            .push(" OR (created_ms = ")
            .push_bind(ms)
            .push(" AND (run_id < ")
            .push_bind(a.run_id.clone())
            .push(" OR (run_id = ")
            .push_bind(a.run_id.clone())
            .push(" AND scorer < ")
            .push_bind(a.scorer.clone())
            .push("))))");
    }
}

/// The `WHERE` of `q` without its cursor.
fn filter_all<DB>(b: &mut QueryBuilder<DB>, q: &ScoreQuery)
where
    DB: Database,
    for<'t> String: Encode<'t, DB> + Type<DB>,
{
    b.push(" WHERE agent_id = ").push_bind(q.agent_id.clone());
    if let Some(s) = &q.scorer {
        b.push(" AND scorer = ").push_bind(s.clone());
    }
    if let Some(o) = &q.owner {
        b.push(" AND owner = ").push_bind(o.clone());
    }
}

#[async_trait]
impl<DB> ScoreStore for SqlScoreStore<DB>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB> + sqlx::Decode<'t, DB>,
    for<'t> Option<String>: Encode<'t, DB> + Type<DB>,
    for<'t> i64: Encode<'t, DB> + Type<DB> + sqlx::Decode<'t, DB>,
    for<'t> f64: Encode<'t, DB> + Type<DB>,
    ScoreRow: for<'r> sqlx::FromRow<'r, DB::Row>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    /// All of them in one statement.
    async fn record(&self, scores: &[StoredScore]) -> Result<(), StoreError> {
        let _turn = DB::write_turn(&self.pool).await;
        if scores.is_empty() {
            return Ok(());
        }
        let mut q = QueryBuilder::<DB>::new(
            "INSERT INTO agent_scores \
             (agent_id, run_id, owner, scorer, value, passed, reason, created_ms) ",
        );
        q.push_values(scores, |mut row, s| {
            row.push_bind(s.agent_id.clone())
                .push_bind(s.run_id.clone())
                .push_bind(s.owner.clone())
                .push_bind(s.scorer.clone())
                .push_bind(s.value)
                .push_bind(i64::from(s.passed))
                .push_bind(s.reason.clone())
                .push_bind(s.created_at.timestamp_millis());
        });
        q.push(
            " ON CONFLICT (agent_id, run_id, scorer) DO UPDATE SET owner = excluded.owner, \
             value = excluded.value, passed = excluded.passed, reason = excluded.reason, \
             created_ms = excluded.created_ms",
        );
        q.build().execute(&self.pool).await.map_err(db_err)?;
        Ok(())
    }

    async fn of_run(&self, agent_id: &str, run_id: &str) -> Result<Vec<StoredScore>, StoreError> {
        let mut q = QueryBuilder::<DB>::new(SELECT);
        q.push(" WHERE agent_id = ")
            .push_bind(agent_id.to_owned())
            .push(" AND run_id = ")
            .push_bind(run_id.to_owned())
            .push(" ORDER BY scorer");
        let rows: Vec<ScoreRow> = q
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn list(&self, query: &ScoreQuery) -> Result<(Vec<StoredScore>, u64), StoreError> {
        let mut count = QueryBuilder::<DB>::new("SELECT COUNT(*) FROM agent_scores");
        filter_all(&mut count, query);
        let (total,): (i64,) = count
            .build_query_as()
            .fetch_one(&self.pool)
            .await
            .map_err(db_err)?;
        let mut q = QueryBuilder::<DB>::new(SELECT);
        filter(&mut q, query);
        q.push(" ORDER BY created_ms DESC, run_id DESC, scorer DESC LIMIT ")
            .push_bind(i64::try_from(query.limit).unwrap_or(i64::MAX));
        let rows: Vec<ScoreRow> = q
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        Ok((
            rows.into_iter().map(Into::into).collect(),
            u64::try_from(total).unwrap_or_default(),
        ))
    }
}
