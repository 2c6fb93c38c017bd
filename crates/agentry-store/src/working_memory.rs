//! Agents' working memories (`agent_working_memory`), written once for both databases: one row
//! per agent, user namespace and conversation (`''` for a memory of the scope `user`), replaced
//! in one statement.

use agentry_agents::{StoredWorkingMemory, WorkingMemoryKey, WorkingMemoryStore};
use agentry_engine::store::StoreError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{Database, Encode, Executor, IntoArguments, Pool, QueryBuilder, Type};

use crate::row::db_err;
use crate::sql::Dialect;

/// Working memories in a SQL database (SQLite or PostgreSQL).
#[derive(Debug)]
pub struct SqlWorkingMemoryStore<DB: Database> {
    pool: Pool<DB>,
}

impl<DB: Database> SqlWorkingMemoryStore<DB> {
    pub fn new(pool: Pool<DB>) -> Self {
        Self { pool }
    }
}

/// The conversation column of a key: `''` for a memory of the scope `user` (a conversation id
/// is never empty).
fn conversation(key: &WorkingMemoryKey) -> String {
    key.conversation_id.clone().unwrap_or_default()
}

fn decode(value: &str, updated_ms: i64) -> Result<StoredWorkingMemory, StoreError> {
    Ok(StoredWorkingMemory {
        value: serde_json::from_str(value).map_err(|e| StoreError::Corrupt {
            id: "agent_working_memory".into(),
            reason: e.to_string(),
        })?,
        updated_at: DateTime::<Utc>::from_timestamp_millis(updated_ms).unwrap_or_default(),
    })
}

#[async_trait]
impl<DB> WorkingMemoryStore for SqlWorkingMemoryStore<DB>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB> + sqlx::Decode<'t, DB>,
    for<'t> i64: Encode<'t, DB> + Type<DB> + sqlx::Decode<'t, DB>,
    (String, i64): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    async fn get(&self, key: &WorkingMemoryKey) -> Result<Option<StoredWorkingMemory>, StoreError> {
        let mut q = QueryBuilder::<DB>::new(format!(
            "SELECT value{}, updated_ms FROM agent_working_memory WHERE agent_id = ",
            DB::AS_TEXT
        ));
        q.push_bind(key.agent_id.clone())
            .push(" AND user_id = ")
            .push_bind(key.user_id.clone())
            .push(" AND conversation_id = ")
            .push_bind(conversation(key));
        let row: Option<(String, i64)> = q
            .build_query_as()
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err)?;
        row.map(|(value, ms)| decode(&value, ms)).transpose()
    }

    /// One statement: the row is inserted, or its value replaced.
    async fn put(
        &self,
        key: &WorkingMemoryKey,
        value: &Value,
        at: DateTime<Utc>,
    ) -> Result<StoredWorkingMemory, StoreError> {
        let _turn = DB::write_turn(&self.pool).await;
        let mut q = QueryBuilder::<DB>::new(
            "INSERT INTO agent_working_memory \
             (agent_id, user_id, conversation_id, value, updated_ms) VALUES (",
        );
        let mut values = q.separated(", ");
        values
            .push_bind(key.agent_id.clone())
            .push_bind(key.user_id.clone())
            .push_bind(conversation(key))
            .push_bind(value.to_string())
            .push_unseparated(DB::AS_JSON)
            .push_bind(at.timestamp_millis());
        q.push(
            ") ON CONFLICT (agent_id, user_id, conversation_id) DO UPDATE SET \
             value = excluded.value, updated_ms = excluded.updated_ms",
        );
        q.build().execute(&self.pool).await.map_err(db_err)?;
        Ok(StoredWorkingMemory {
            value: value.clone(),
            updated_at: DateTime::<Utc>::from_timestamp_millis(at.timestamp_millis()).unwrap_or(at),
        })
    }
}
