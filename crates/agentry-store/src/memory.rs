//! Agent conversation memory (`agent_messages`), written once for both databases through the
//! same [`Dialect`] as the executions.

use agentry_agents::{ConversationKey, ConversationStore, Message};
use agentry_engine::store::StoreError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Database, Encode, Executor, IntoArguments, Pool, QueryBuilder, Type};

use crate::row::db_err;
use crate::sql::Dialect;

/// Conversation memory in a SQL database (SQLite or PostgreSQL).
#[derive(Debug)]
pub struct SqlConversationStore<DB: Database> {
    pool: Pool<DB>,
}

impl<DB: Database> SqlConversationStore<DB> {
    pub fn new(pool: Pool<DB>) -> Self {
        Self { pool }
    }
}

fn decode(rows: Vec<String>) -> Result<Vec<Message>, StoreError> {
    let mut out: Vec<Message> = rows
        .iter()
        .map(|m| {
            serde_json::from_str(m).map_err(|e| StoreError::Corrupt {
                id: "agent_messages".into(),
                reason: e.to_string(),
            })
        })
        .collect::<Result<_, _>>()?;
    out.reverse();
    Ok(out)
}

#[async_trait]
impl<DB> ConversationStore for SqlConversationStore<DB>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB> + sqlx::Decode<'t, DB>,
    for<'t> i64: Encode<'t, DB> + Type<DB>,
    for<'t> DateTime<Utc>: Encode<'t, DB> + Type<DB>,
    (String,): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    async fn load(&self, key: &ConversationKey, limit: usize) -> Result<Vec<Message>, StoreError> {
        let mut q = QueryBuilder::<DB>::new(format!(
            "SELECT message{} FROM agent_messages WHERE agent_id = ",
            DB::AS_TEXT
        ));
        q.push_bind(key.agent_id.clone())
            .push(" AND user_id = ")
            .push_bind(key.user_id.clone())
            .push(" AND conversation_id = ")
            .push_bind(key.conversation_id.clone())
            .push(" ORDER BY id DESC LIMIT ")
            .push_bind(i64::try_from(limit).unwrap_or(i64::MAX));
        let rows: Vec<String> = q
            .build_query_scalar()
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        decode(rows)
    }

    /// The messages in one statement: all of them are remembered, or none.
    async fn append(&self, key: &ConversationKey, messages: &[Message]) -> Result<(), StoreError> {
        let _turn = DB::write_turn(&self.pool).await;
        if messages.is_empty() {
            return Ok(());
        }
        let now = Utc::now();
        let mut q = QueryBuilder::<DB>::new(
            "INSERT INTO agent_messages (agent_id, user_id, conversation_id, message, created_at) ",
        );
        q.push_values(messages, |mut row, m| {
            row.push_bind(key.agent_id.clone())
                .push_bind(key.user_id.clone())
                .push_bind(key.conversation_id.clone())
                .push_bind(serde_json::to_string(m).unwrap_or_else(|_| "{}".into()))
                .push_unseparated(DB::AS_JSON)
                .push_bind(now);
        });
        q.build().execute(&self.pool).await.map_err(db_err)?;
        Ok(())
    }

    fn storage(&self) -> &str {
        <DB as Dialect>::NAME
    }
}
