//! The working memory use cases: reading and setting an agent's working memory (GET and PUT
//! `/agents/{id}/memory/working`) as a caller. Whose memory is decided once: the policy says
//! whom the caller may name ([`crate::Policy::memory_owner`]), and the agents' namespace
//! rule (the one of conversation memory) makes the key, so a generation and these routes always
//! reach the same memory.

use std::sync::Arc;

use agentry_agents::{Agent, AgentError, WorkingMemory, WorkingMemoryError, WorkingMemoryKey};
use agentry_engine::AgentId;
use serde_json::Value;

use crate::App;
use crate::caller::Caller;
use crate::error::{AppError, Code};
use crate::input::check_key;
use crate::wire::agents::WorkingMemoryView;

/// Whose working memory a request names (the query's `userId` and `conversationId`).
#[derive(Debug, Clone, Default)]
pub struct WorkingMemoryQuery {
    pub user_id: Option<String>,
    pub conversation_id: Option<String>,
}

/// The body of PUT /agents/{id}/memory/working.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkingMemoryBody {
    /// The new working memory, whole: a JSON value valid against the agent's schema, or the
    /// Markdown text (a string) of an agent with a template; at most 16 KiB.
    #[schema(value_type = Object)]
    pub value: Value,
}

/// The memory a request reaches: the agent, its working memory, the key, and whose it is as
/// the answer shows it.
struct Reached {
    agent: Arc<Agent>,
    memory: WorkingMemory,
    key: WorkingMemoryKey,
    whose: (Option<String>, Option<String>),
}

/// A refusal of a working memory's key or value.
fn refusal(e: WorkingMemoryError) -> AppError {
    match e {
        WorkingMemoryError::TooLarge { .. } => AppError::new(
            Code::PayloadTooLarge,
            format!("Invalid working memory: {e}"),
        ),
        WorkingMemoryError::NoOwner => AppError::new(
            Code::AuthenticationRequired,
            "Authentication required: a working memory belongs to a verified user",
        ),
        WorkingMemoryError::Invalid(_)
        | WorkingMemoryError::NotText
        | WorkingMemoryError::NoConversation => {
            AppError::bad_request(format!("Invalid working memory: {e}"))
        }
    }
}

/// A store's failure: the database did not answer (503), or anything else (500).
fn store_failure(e: AgentError) -> AppError {
    match e {
        AgentError::MemoryUnavailable(_) => AppError::agent(e),
        other => AppError::internal(other.to_string()),
    }
}

impl App {
    /// The caller's working memory of agent `id` in the scope `query` names.
    pub async fn working_memory(
        &self,
        caller: &Caller,
        id: &AgentId,
        query: WorkingMemoryQuery,
    ) -> Result<WorkingMemoryView, AppError> {
        let r = self.reach_working_memory(caller, id, query)?;
        let stored = self
            .agents()
            .working_memory(&r.key)
            .await
            .map_err(store_failure)?;
        Ok(WorkingMemoryView::new(&r.agent, &r.memory, r.whose, stored))
    }

    /// Replaces the caller's working memory of agent `id` with the body's `value` (valid against its
    /// schema, or Markdown text for a template; at most
    /// [`crate::limits::MAX_WORKING_MEMORY_BYTES`]).
    pub async fn set_working_memory(
        &self,
        caller: &Caller,
        id: &AgentId,
        query: WorkingMemoryQuery,
        body: Value,
    ) -> Result<WorkingMemoryView, AppError> {
        let r = self.reach_working_memory(caller, id, query)?;
        let WorkingMemoryBody { value } = serde_json::from_value(body).map_err(|e| {
            AppError::bad_request(format!(
                "Invalid working memory: the body is {{value}} ({e})"
            ))
        })?;
        r.memory.check(&value).map_err(refusal)?;
        let stored = self
            .agents()
            .set_working_memory(&r.memory, &r.key, &value)
            .await
            .map_err(store_failure)?;
        Ok(WorkingMemoryView::new(
            &r.agent,
            &r.memory,
            r.whose,
            Some(stored),
        ))
    }

    /// The working memory a request reaches: 404 for an unknown agent or one without a
    /// working memory, 400 for a malformed id, then the policy's owner rule.
    fn reach_working_memory(
        &self,
        caller: &Caller,
        id: &AgentId,
        query: WorkingMemoryQuery,
    ) -> Result<Reached, AppError> {
        let agent = self.agents().require(id).map_err(AppError::agent)?;
        let memory = agent.working_memory.clone().ok_or_else(|| {
            AppError::new(
                Code::NoWorkingMemory,
                format!("Agent {} has no working memory", agent.id),
            )
        })?;
        if let Some(u) = &query.user_id {
            check_key("userId", u)?;
        }
        if let Some(c) = &query.conversation_id {
            check_key("conversationId", c)?;
        }
        let owner = self
            .policy()
            .memory_owner(caller, query.user_id.as_deref())?;
        let key = memory
            .key(
                &agent.id,
                &owner,
                query.user_id.as_deref(),
                query.conversation_id.as_deref(),
            )
            .map_err(refusal)?;
        let user_id = caller
            .user_id()
            .map(agentry_engine::UserId::into_string)
            .or(query.user_id);
        let conversation_id = key.conversation_id.clone();
        Ok(Reached {
            agent,
            memory,
            key,
            whose: (user_id, conversation_id),
        })
    }
}
