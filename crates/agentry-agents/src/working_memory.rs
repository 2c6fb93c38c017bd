//! Working memory: what an agent keeps up to date about a user or a conversation, as a JSON value
//! valid against a schema (or as Markdown text in a template's shape). The current value goes to
//! the model with the instructions (a section of the system message, written and read here
//! only: [`prompt_section`], [`read_prompt`]); the model replaces it through the built-in tool
//! `update_working_memory` ([`TOOL_NAME`]), whose arguments are the new value (for a template:
//! `{markdown}`), checked against the schema and [`MAX_WORKING_MEMORY_BYTES`]. In a durable run
//! that tool call is journaled like any other: a replay reads its recorded result and does not
//! write again.
//!
//! Whose memory: the agent, the memory namespace of the caller ([`crate::memory::namespace`],
//! the rule of conversation memory) and, for the scope `conversation`, the conversation id.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::definition::Agent;
use crate::generation::{AgentError, GenerateOptions, MemoryOwner};
use crate::message::{Message, Role};
use crate::runtime::AgentHub;
use crate::tool::{Tool, ToolContext};
use agentry_engine::schema::Schema;
use agentry_engine::store::StoreError;

/// The name of the built-in tool through which the model replaces the working memory.
pub const TOOL_NAME: &str = "update_working_memory";

/// The most bytes a working memory holds: its JSON text (for a template, its Markdown text).
/// Larger values are refused, through the tool and the route alike.
pub const MAX_WORKING_MEMORY_BYTES: usize = 16 * 1024;

/// The most bytes of a working memory's schema or template (it goes into every system message).
pub const MAX_SHAPE_BYTES: usize = 16 * 1024;

/// Whose working memory: one per user (across their conversations), or one per conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkingMemoryScope {
    Conversation,
    User,
}

impl WorkingMemoryScope {
    /// `conversation` or `user`.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkingMemoryScope::Conversation => "conversation",
            WorkingMemoryScope::User => "user",
        }
    }

    /// The scope named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "conversation" => Some(WorkingMemoryScope::Conversation),
            "user" => Some(WorkingMemoryScope::User),
            _ => None,
        }
    }
}

/// What a working memory holds: a JSON value valid against a schema, or Markdown text that
/// follows a template.
#[derive(Debug, Clone)]
pub enum WorkingMemoryShape {
    Schema(Arc<Schema>),
    Template(String),
}

/// An agent's working memory: its scope and its shape.
#[derive(Debug, Clone)]
pub struct WorkingMemory {
    pub scope: WorkingMemoryScope,
    pub shape: WorkingMemoryShape,
}

/// Why a working memory could not be read or written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WorkingMemoryError {
    #[error(
        "the working memory would be {size} bytes, over the {MAX_WORKING_MEMORY_BYTES} it may hold"
    )]
    TooLarge { size: usize },
    #[error("the working memory does not match its schema: {0}")]
    Invalid(String),
    #[error("a working memory kept as a template is Markdown text (a JSON string)")]
    NotText,
    #[error("this caller has no working memory (authentication is on and no user was verified)")]
    NoOwner,
    #[error("this agent's working memory is per conversation: a conversationId is needed")]
    NoConversation,
}

impl WorkingMemory {
    /// A working memory holding JSON values valid against `schema` (refused when it is not a
    /// valid JSON Schema or is over [`MAX_SHAPE_BYTES`]).
    pub fn schema(scope: WorkingMemoryScope, schema: Value) -> Result<Self, String> {
        let size = serde_json::to_vec(&schema).map_or(usize::MAX, |b| b.len());
        if size > MAX_SHAPE_BYTES {
            return Err(format!(
                "the working memory's schema is {size} bytes, over {MAX_SHAPE_BYTES}"
            ));
        }
        let schema = Schema::compile(schema).map_err(|e| e.to_string())?;
        Ok(Self {
            scope,
            shape: WorkingMemoryShape::Schema(Arc::new(schema)),
        })
    }

    /// A working memory holding Markdown text that follows `template` (refused over
    /// [`MAX_SHAPE_BYTES`]).
    pub fn template(
        scope: WorkingMemoryScope,
        template: impl Into<String>,
    ) -> Result<Self, String> {
        let template = template.into();
        if template.len() > MAX_SHAPE_BYTES {
            return Err(format!(
                "the working memory's template is {} bytes, over {MAX_SHAPE_BYTES}",
                template.len()
            ));
        }
        Ok(Self {
            scope,
            shape: WorkingMemoryShape::Template(template),
        })
    }

    /// The schema, when it holds JSON values.
    pub fn json_schema(&self) -> Option<&Value> {
        match &self.shape {
            WorkingMemoryShape::Schema(s) => Some(s.source()),
            WorkingMemoryShape::Template(_) => None,
        }
    }

    /// The template, when it holds Markdown text.
    pub fn markdown_template(&self) -> Option<&str> {
        match &self.shape {
            WorkingMemoryShape::Schema(_) => None,
            WorkingMemoryShape::Template(t) => Some(t),
        }
    }

    /// Whether `value` may be kept: within [`MAX_WORKING_MEMORY_BYTES`], and valid against the
    /// schema (a template's value is a string).
    pub fn check(&self, value: &Value) -> Result<(), WorkingMemoryError> {
        let size = match (&self.shape, value) {
            (WorkingMemoryShape::Template(_), Value::String(text)) => text.len(),
            (WorkingMemoryShape::Template(_), _) => return Err(WorkingMemoryError::NotText),
            (WorkingMemoryShape::Schema(_), v) => {
                serde_json::to_vec(v).map_or(usize::MAX, |b| b.len())
            }
        };
        if size > MAX_WORKING_MEMORY_BYTES {
            return Err(WorkingMemoryError::TooLarge { size });
        }
        match &self.shape {
            WorkingMemoryShape::Schema(schema) => {
                schema.validate(value).map_err(WorkingMemoryError::Invalid)
            }
            WorkingMemoryShape::Template(_) => Ok(()),
        }
    }

    /// Whose working memory a caller reaches: `owner` (what the server verified) with the
    /// `userId` it claims, and, for the scope `conversation`, the conversation.
    pub fn key(
        &self,
        agent_id: &str,
        owner: &MemoryOwner,
        user_id: Option<&str>,
        conversation_id: Option<&str>,
    ) -> Result<WorkingMemoryKey, WorkingMemoryError> {
        let user_id =
            crate::memory::namespace(owner, user_id).ok_or(WorkingMemoryError::NoOwner)?;
        let conversation_id = match self.scope {
            WorkingMemoryScope::User => None,
            WorkingMemoryScope::Conversation => Some(
                conversation_id
                    .ok_or(WorkingMemoryError::NoConversation)?
                    .to_owned(),
            ),
        };
        Ok(WorkingMemoryKey {
            agent_id: agent_id.to_owned(),
            user_id,
            conversation_id,
        })
    }

    /// The key of a generation's working memory.
    fn key_of(
        &self,
        agent: &Agent,
        opts: &GenerateOptions,
    ) -> Result<WorkingMemoryKey, WorkingMemoryError> {
        self.key(
            &agent.id,
            &opts.memory_owner,
            opts.user_id.as_deref(),
            opts.conversation_id.as_deref(),
        )
    }

    /// The arguments of `update_working_memory`: the value itself (its schema), or
    /// `{markdown}` for a template.
    fn tool_parameters(&self) -> Value {
        match &self.shape {
            WorkingMemoryShape::Schema(s) => s.source().clone(),
            WorkingMemoryShape::Template(_) => json!({
                "type": "object",
                "properties": {"markdown": {"type": "string", "description": "The whole new working memory, in the template's shape."}},
                "required": ["markdown"],
                "additionalProperties": false
            }),
        }
    }

    /// The `workingMemory` object shown by GET /agents' `memory.config`.
    pub fn describe(&self) -> Value {
        json!({
            "scope": self.scope.as_str(),
            "format": match self.shape {
                WorkingMemoryShape::Schema(_) => "json",
                WorkingMemoryShape::Template(_) => "markdown",
            },
        })
    }
}

/// Where a working memory is kept: the agent, the memory namespace of its user, and the
/// conversation for the scope `conversation` (`None` for the scope `user`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WorkingMemoryKey {
    pub agent_id: String,
    pub user_id: String,
    pub conversation_id: Option<String>,
}

/// A kept working memory and when it was last written.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredWorkingMemory {
    pub value: Value,
    pub updated_at: DateTime<Utc>,
}

/// Where working memories are kept (SQLite and PostgreSQL in `agentry-store`).
#[async_trait]
pub trait WorkingMemoryStore: Send + Sync + 'static {
    /// The working memory under `key`, if one was written.
    async fn get(&self, key: &WorkingMemoryKey) -> Result<Option<StoredWorkingMemory>, StoreError>;
    /// Replaces the working memory under `key` with `value`, written at `at`.
    async fn put(
        &self,
        key: &WorkingMemoryKey,
        value: &Value,
        at: DateTime<Utc>,
    ) -> Result<StoredWorkingMemory, StoreError>;
}

/// Working memories kept in process.
#[derive(Debug, Default)]
pub struct InMemoryWorkingMemoryStore {
    rows: Mutex<HashMap<WorkingMemoryKey, StoredWorkingMemory>>,
}

#[async_trait]
impl WorkingMemoryStore for InMemoryWorkingMemoryStore {
    async fn get(&self, key: &WorkingMemoryKey) -> Result<Option<StoredWorkingMemory>, StoreError> {
        let rows = self.rows.lock().unwrap_or_else(|p| p.into_inner());
        Ok(rows.get(key).cloned())
    }

    async fn put(
        &self,
        key: &WorkingMemoryKey,
        value: &Value,
        at: DateTime<Utc>,
    ) -> Result<StoredWorkingMemory, StoreError> {
        let stored = StoredWorkingMemory {
            value: value.clone(),
            updated_at: at,
        };
        let mut rows = self.rows.lock().unwrap_or_else(|p| p.into_inner());
        rows.insert(key.clone(), stored.clone());
        Ok(stored)
    }
}

/// The first line of the system message's working memory section.
const HEADING: &str = "## Working memory";
const OPEN_JSON: &str = "<working-memory format=\"json\">\n";
const OPEN_MARKDOWN: &str = "<working-memory format=\"markdown\">\n";
const CLOSE: &str = "\n</working-memory>";

/// The section of the system message that gives the model its working memory: what it is for,
/// its shape, and the current value between `<working-memory>` tags (JSON on one line, or the
/// Markdown text).
pub fn prompt_section(memory: &WorkingMemory, value: Option<&Value>) -> String {
    let whose = match memory.scope {
        WorkingMemoryScope::User => "this user, across their conversations",
        WorkingMemoryScope::Conversation => "this conversation",
    };
    let mut out = format!(
        "{HEADING}\nWhat you remember about {whose}. When you learn something that belongs \
         here, call `{TOOL_NAME}` with the whole new value.\n"
    );
    match &memory.shape {
        WorkingMemoryShape::Schema(schema) => {
            out.push_str(&format!(
                "Its JSON Schema: {}\n{OPEN_JSON}",
                schema.source()
            ));
            out.push_str(&value.map_or_else(|| "null".to_owned(), Value::to_string));
        }
        WorkingMemoryShape::Template(template) => {
            out.push_str(&format!(
                "Keep it in this Markdown template:\n{template}\n{OPEN_MARKDOWN}"
            ));
            out.push_str(value.and_then(Value::as_str).unwrap_or_default());
        }
    }
    out.push_str(CLOSE);
    out
}

/// The working memory a request's system messages carry ([`prompt_section`]): the JSON value,
/// or the Markdown text as a string; `None` when there is none or it is empty.
pub fn read_prompt(messages: &[Message]) -> Option<Value> {
    messages
        .iter()
        .filter(|m| m.role == Role::System)
        .rev()
        .find_map(|m| read_section(&m.content))
}

fn read_section(text: &str) -> Option<Value> {
    let (at, json) = match (text.rfind(OPEN_JSON), text.rfind(OPEN_MARKDOWN)) {
        (Some(j), Some(m)) if m > j => (m + OPEN_MARKDOWN.len(), false),
        (Some(j), _) => (j + OPEN_JSON.len(), true),
        (None, Some(m)) => (m + OPEN_MARKDOWN.len(), false),
        (None, None) => return None,
    };
    let body = &text[at..];
    let body = &body[..body.rfind(CLOSE)?];
    if json {
        serde_json::from_str(body)
            .ok()
            .filter(|v: &Value| !v.is_null())
    } else {
        (!body.trim().is_empty()).then(|| Value::String(body.to_owned()))
    }
}

/// A working memory store's failure as the agent's (as conversation memory's are).
fn store_error(e: StoreError) -> AgentError {
    match e {
        StoreError::Unavailable(m) => AgentError::MemoryUnavailable(m),
        StoreError::Invalid(m) => AgentError::InvalidRequest(m),
        other => AgentError::Memory(other.to_string()),
    }
}

/// `update_working_memory`: replaces the working memory of one generation's user (or
/// conversation) with its arguments, once they are checked.
struct UpdateWorkingMemory {
    memory: WorkingMemory,
    key: Result<WorkingMemoryKey, WorkingMemoryError>,
    store: Arc<dyn WorkingMemoryStore>,
    parameters: Value,
}

#[async_trait]
impl Tool for UpdateWorkingMemory {
    fn name(&self) -> &str {
        TOOL_NAME
    }

    fn description(&self) -> &str {
        "Replaces your working memory (shown in your instructions) with a new value: give the \
         whole value, not only what changed."
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    async fn call(&self, args: Value, _ctx: ToolContext) -> Result<Value, String> {
        let key = self.key.as_ref().map_err(ToString::to_string)?;
        let value = match &self.memory.shape {
            WorkingMemoryShape::Schema(_) => args,
            WorkingMemoryShape::Template(_) => args
                .get("markdown")
                .cloned()
                .ok_or("`markdown` is required")?,
        };
        self.memory.check(&value).map_err(|e| e.to_string())?;
        let stored = self
            .store
            .put(key, &value, Utc::now())
            .await
            .map_err(|e| format!("the working memory could not be written: {e}"))?;
        Ok(json!({"workingMemory": stored.value}))
    }
}

impl AgentHub {
    /// Keeps working memories in `store` (by default in process).
    pub fn set_working_memory_store(&self, store: Arc<dyn WorkingMemoryStore>) {
        *self
            .working_memory_slot()
            .write()
            .unwrap_or_else(|p| p.into_inner()) = store;
    }

    fn working_memory_store(&self) -> Arc<dyn WorkingMemoryStore> {
        self.working_memory_slot()
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The working memory under `key`, if one was written.
    pub async fn working_memory(
        &self,
        key: &WorkingMemoryKey,
    ) -> Result<Option<StoredWorkingMemory>, AgentError> {
        self.working_memory_store()
            .get(key)
            .await
            .map_err(store_error)
    }

    /// Replaces the working memory under `key` with `value`, checked against `memory`.
    pub async fn set_working_memory(
        &self,
        memory: &WorkingMemory,
        key: &WorkingMemoryKey,
        value: &Value,
    ) -> Result<StoredWorkingMemory, AgentError> {
        memory
            .check(value)
            .map_err(|e| AgentError::InvalidRequest(e.to_string()))?;
        self.working_memory_store()
            .put(key, value, Utc::now())
            .await
            .map_err(store_error)
    }

    /// The built-in `update_working_memory` of `agent`, when it declares a working memory:
    /// writing the memory of the generation `opts` (none: a listing, which never calls it).
    pub(crate) fn working_memory_tool(
        &self,
        agent: &Agent,
        opts: Option<&GenerateOptions>,
    ) -> Option<Arc<dyn Tool>> {
        let memory = agent.working_memory.clone()?;
        let key = opts.map_or(Err(WorkingMemoryError::NoOwner), |o| {
            memory.key_of(agent, o)
        });
        let parameters = memory.tool_parameters();
        Some(Arc::new(UpdateWorkingMemory {
            memory,
            key,
            store: self.working_memory_store(),
            parameters,
        }))
    }

    /// The working memory section of a generation's system message, when its agent declares a
    /// working memory and the generation has one (a caller without a user, or a conversation
    /// scope without a conversation, has none).
    pub(crate) async fn working_memory_prompt(
        &self,
        agent: &Agent,
        opts: &GenerateOptions,
    ) -> Result<Option<String>, AgentError> {
        let Some(memory) = &agent.working_memory else {
            return Ok(None);
        };
        let Ok(key) = memory.key_of(agent, opts) else {
            return Ok(None);
        };
        let stored = self.working_memory(&key).await?;
        Ok(Some(prompt_section(
            memory,
            stored.as_ref().map(|s| &s.value),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preferences() -> WorkingMemory {
        WorkingMemory::schema(
            WorkingMemoryScope::User,
            json!({
                "type": "object",
                "properties": {"city": {"type": "string"}, "units": {"enum": ["metric", "imperial"]}},
                "additionalProperties": false
            }),
        )
        .unwrap()
    }

    #[test]
    fn the_prompt_section_reads_back() {
        let m = preferences();
        let v = json!({"city": "Paris", "units": "metric"});
        let system = Message::system(format!("Be brief.\n\n{}", prompt_section(&m, Some(&v))));
        assert_eq!(read_prompt(&[system]), Some(v));
        let empty = Message::system(prompt_section(&m, None));
        assert_eq!(read_prompt(&[empty]), None);
        let t = WorkingMemory::template(WorkingMemoryScope::Conversation, "# Notes\n- ").unwrap();
        let text = json!("# Notes\n- likes tea\n</working-memory>");
        let system = Message::system(prompt_section(&t, Some(&text)));
        assert_eq!(read_prompt(&[system]), Some(text));
        assert_eq!(read_prompt(&[Message::system("no memory")]), None);
    }

    #[test]
    fn values_are_checked_and_bounded() {
        let m = preferences();
        assert!(m.check(&json!({"city": "Oslo"})).is_ok());
        assert!(matches!(
            m.check(&json!({"units": "kelvin"})),
            Err(WorkingMemoryError::Invalid(_))
        ));
        let big = json!({"city": "x".repeat(MAX_WORKING_MEMORY_BYTES)});
        assert!(matches!(
            m.check(&big),
            Err(WorkingMemoryError::TooLarge { .. })
        ));
        let t = WorkingMemory::template(WorkingMemoryScope::User, "# Notes").unwrap();
        assert_eq!(t.check(&json!({"a": 1})), Err(WorkingMemoryError::NotText));
        assert!(t.check(&json!("# Notes\n- tea")).is_ok());
    }

    #[test]
    fn keys_follow_the_memory_namespace_and_the_scope() {
        let m = preferences();
        let trusted = m
            .key("a", &MemoryOwner::Trusted, Some("u1"), Some("c"))
            .unwrap();
        assert_eq!(
            (trusted.user_id.as_str(), trusted.conversation_id),
            ("u1", None)
        );
        let verified = m
            .key("a", &MemoryOwner::Verified("u1".into()), Some("u2"), None)
            .unwrap();
        assert_eq!(verified.user_id, "user:u1");
        assert_eq!(
            m.key("a", &MemoryOwner::Anonymous, Some("u1"), None),
            Err(WorkingMemoryError::NoOwner)
        );
        let c = WorkingMemory::template(WorkingMemoryScope::Conversation, "").unwrap();
        assert_eq!(
            c.key("a", &MemoryOwner::Trusted, None, None),
            Err(WorkingMemoryError::NoConversation)
        );
        let k = c.key("a", &MemoryOwner::Trusted, None, Some("c1")).unwrap();
        assert_eq!(
            (k.user_id.as_str(), k.conversation_id.as_deref()),
            ("anonymous", Some("c1"))
        );
    }
}
