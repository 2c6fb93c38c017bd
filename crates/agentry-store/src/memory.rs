//! Agent conversation memory on SQLite and PostgreSQL.

use agentry_core::agent::{ConversationKey, ConversationStore, Message};
use agentry_core::store::StoreError;
use async_trait::async_trait;
use chrono::Utc;

use crate::row::db_err;

/// Conversation memory in the connected database.
#[derive(Debug, Clone)]
pub enum SqlConversationStore {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
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
impl ConversationStore for SqlConversationStore {
    async fn load(&self, key: &ConversationKey, limit: usize) -> Result<Vec<Message>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows: Vec<String> = match self {
            SqlConversationStore::Sqlite(pool) => sqlx::query_scalar(
                "SELECT message FROM agent_messages WHERE agent_id = ? AND user_id = ? \
                 AND conversation_id = ? ORDER BY id DESC LIMIT ?",
            )
            .bind(&key.agent_id)
            .bind(&key.user_id)
            .bind(&key.conversation_id)
            .bind(limit)
            .fetch_all(pool)
            .await
            .map_err(db_err)?,
            SqlConversationStore::Postgres(pool) => sqlx::query_scalar(
                "SELECT message::text FROM agent_messages WHERE agent_id = $1 AND user_id = $2 \
                 AND conversation_id = $3 ORDER BY id DESC LIMIT $4",
            )
            .bind(&key.agent_id)
            .bind(&key.user_id)
            .bind(&key.conversation_id)
            .bind(limit)
            .fetch_all(pool)
            .await
            .map_err(db_err)?,
        };
        decode(rows)
    }

    async fn append(&self, key: &ConversationKey, messages: &[Message]) -> Result<(), StoreError> {
        let now = Utc::now();
        for m in messages {
            let json = serde_json::to_string(m).unwrap_or_else(|_| "{}".into());
            match self {
                SqlConversationStore::Sqlite(pool) => sqlx::query(
                    "INSERT INTO agent_messages (agent_id, user_id, conversation_id, message, \
                     created_at) VALUES (?, ?, ?, ?, ?)",
                )
                .bind(&key.agent_id)
                .bind(&key.user_id)
                .bind(&key.conversation_id)
                .bind(json)
                .bind(now)
                .execute(pool)
                .await
                .map(|_| ())
                .map_err(db_err)?,
                SqlConversationStore::Postgres(pool) => sqlx::query(
                    "INSERT INTO agent_messages (agent_id, user_id, conversation_id, message, \
                     created_at) VALUES ($1, $2, $3, $4::json, $5)",
                )
                .bind(&key.agent_id)
                .bind(&key.user_id)
                .bind(&key.conversation_id)
                .bind(json)
                .bind(now)
                .execute(pool)
                .await
                .map(|_| ())
                .map_err(db_err)?,
            }
        }
        Ok(())
    }

    fn storage(&self) -> &str {
        match self {
            SqlConversationStore::Sqlite(_) => "sqlite",
            SqlConversationStore::Postgres(_) => "postgres",
        }
    }
}
