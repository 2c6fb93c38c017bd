//! Conversation memory: the trait a database implements, and an in-memory implementation.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;

use super::generation::MemoryOwner;
use super::message::Message;
use agentry_engine::store::StoreError;

/// The user part of a memory's key (conversation and working memory alike), or `None` when the
/// caller has no memory: a verified user's memories live under `user:<id>`, apart from the
/// unverified `userId`s of a trusted setup (taken at their word, `anonymous` when none is
/// given), so turning authentication on never hands a user a memory someone else wrote in their
/// name; an anonymous caller when authentication is on has none.
pub fn namespace(owner: &MemoryOwner, user_id: Option<&str>) -> Option<String> {
    match owner {
        MemoryOwner::Trusted => Some(user_id.unwrap_or("anonymous").to_owned()),
        MemoryOwner::Verified(id) => Some(format!("user:{id}")),
        MemoryOwner::Anonymous => None,
    }
}

/// Whose conversation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConversationKey {
    pub agent_id: String,
    pub user_id: String,
    pub conversation_id: String,
}

#[async_trait]
pub trait ConversationStore: Send + Sync + 'static {
    /// The last `limit` messages of the conversation, oldest first.
    async fn load(&self, key: &ConversationKey, limit: usize) -> Result<Vec<Message>, StoreError>;
    /// Appends messages to the conversation.
    async fn append(&self, key: &ConversationKey, messages: &[Message]) -> Result<(), StoreError>;
    /// A short name of where messages live (`sqlite`, `postgres`, `memory`).
    fn storage(&self) -> &str;
}

/// Memory kept in process. Each message gets an id, increasing in the order of appending (as
/// the databases' `agent_messages.id`), which semantic recall ([`crate::recall`]) refers to.
#[derive(Debug, Default)]
pub struct InMemoryConversationStore {
    rows: Mutex<Rows>,
}

/// What [`InMemoryConversationStore`] holds.
#[derive(Debug, Default)]
pub(crate) struct Rows {
    /// Each conversation's messages with their ids, oldest first.
    pub(crate) conversations: HashMap<ConversationKey, Vec<(i64, Message)>>,
    /// The id of the last message appended.
    pub(crate) last_id: i64,
    /// Semantic recall's embeddings, by message id (`None`: nothing to embed).
    pub(crate) embeddings: HashMap<i64, Option<Vec<f32>>>,
}

impl InMemoryConversationStore {
    pub(crate) fn rows(&self) -> MutexGuard<'_, Rows> {
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl ConversationStore for InMemoryConversationStore {
    async fn load(&self, key: &ConversationKey, limit: usize) -> Result<Vec<Message>, StoreError> {
        let rows = self.rows();
        let all = rows
            .conversations
            .get(key)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let skip = all.len().saturating_sub(limit);
        Ok(all[skip..].iter().map(|(_, m)| m.clone()).collect())
    }

    async fn append(&self, key: &ConversationKey, messages: &[Message]) -> Result<(), StoreError> {
        let mut rows = self.rows();
        let mut id = rows.last_id;
        let conversation = rows.conversations.entry(key.clone()).or_default();
        for m in messages {
            id += 1;
            conversation.push((id, m.clone()));
        }
        rows.last_id = id;
        Ok(())
    }

    fn storage(&self) -> &str {
        "memory"
    }
}
