//! The A2A 1.0 wire: the ProtoJSON of `lf.a2a.v1` as the official SDKs (`a2a-sdk` 1.3,
//! `@a2a-js/sdk` 1.3) send and read it. Keys are camelCase, enums UPPER_SNAKE names, a oneof
//! is a wrapper key (`{"task": ...}`), and an unset field is left out (never `null`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The protocol version agentry speaks (the card's interface, the `A2A-Version` header).
pub const PROTOCOL_VERSION: &str = "1.0";

/// The one binding agentry serves.
pub const JSONRPC_BINDING: &str = "JSONRPC";

/// An agent card (`/.well-known/agent-card.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCard {
    pub name: String,
    pub description: String,
    pub version: String,
    pub supported_interfaces: Vec<AgentInterface>,
    pub capabilities: AgentCapabilities,
    pub default_input_modes: Vec<String>,
    pub default_output_modes: Vec<String>,
    pub skills: Vec<AgentSkill>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_schemes: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_requirements: Option<Vec<Value>>,
}

/// Where and how an agent is reached.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentInterface {
    pub url: String,
    pub protocol_binding: String,
    pub protocol_version: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    #[serde(default)]
    pub streaming: bool,
    #[serde(default)]
    pub push_notifications: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSkill {
    pub id: String,
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    #[serde(rename = "ROLE_USER")]
    User,
    #[serde(rename = "ROLE_AGENT")]
    Agent,
    /// Any other spelling (a 0.3 `"user"`): refused where a role matters.
    #[serde(other, rename = "ROLE_UNSPECIFIED")]
    Unspecified,
}

/// One piece of a message or an artifact: exactly one of `text`, `data`, `url`, `raw`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
}

impl Part {
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: Some(text.into()),
            ..Self::default()
        }
    }

    pub fn data(data: Value) -> Self {
        Self {
            data: Some(data),
            media_type: Some("application/json".into()),
            ..Self::default()
        }
    }

    /// How many of the content fields it sets (a valid part sets one).
    pub fn contents(&self) -> usize {
        usize::from(self.text.is_some())
            + usize::from(self.data.is_some())
            + usize::from(self.url.is_some())
            + usize::from(self.raw.is_some())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub message_id: String,
    pub role: Role,
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

/// A task's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TaskState {
    TaskStateSubmitted,
    TaskStateWorking,
    TaskStateCompleted,
    TaskStateFailed,
    TaskStateCanceled,
    TaskStateInputRequired,
    TaskStateRejected,
    TaskStateAuthRequired,
}

impl TaskState {
    /// Ended for good.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::TaskStateCompleted
                | Self::TaskStateFailed
                | Self::TaskStateCanceled
                | Self::TaskStateRejected
        )
    }

    /// A stream ends here: the task ended, or waits for the client.
    pub fn ends_a_stream(self) -> bool {
        self.is_terminal()
            || matches!(
                self,
                Self::TaskStateInputRequired | Self::TaskStateAuthRequired
            )
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    pub artifact_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: String,
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    pub task_id: String,
    pub context_id: String,
    pub status: TaskStatus,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    pub task_id: String,
    pub context_id: String,
    pub artifact: Artifact,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub append: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub last_chunk: bool,
}

/// One event of a stream (and `SendMessage`'s result: `task` or `message`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse {
    Task(Task),
    Message(Message),
    StatusUpdate(TaskStatusUpdateEvent),
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

/// `SendMessage` and `SendStreamingMessage`'s params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageParams {
    pub message: Message,
    #[serde(default)]
    pub configuration: Option<SendConfiguration>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendConfiguration {
    #[serde(default)]
    pub history_length: Option<i32>,
    #[serde(default)]
    pub return_immediately: bool,
}

/// `GetTask`, `CancelTask` and `SubscribeToTask`'s params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskParams {
    pub id: String,
    #[serde(default)]
    pub history_length: Option<i32>,
}

/// `ListTasks`' params: filters, a page, and how much of each task to show.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksParams {
    #[serde(default)]
    pub context_id: Option<String>,
    /// A task state's name (`TASK_STATE_UNSPECIFIED` or empty: any state).
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub page_size: Option<i32>,
    #[serde(default)]
    pub page_token: Option<String>,
    #[serde(default)]
    pub history_length: Option<i32>,
    /// An RFC 3339 time: only the tasks whose status changed then or later.
    #[serde(default)]
    pub status_timestamp_after: Option<String>,
    #[serde(default)]
    pub include_artifacts: bool,
}

/// `ListTasks`' result: every field is always present (`nextPageToken` is empty on the last
/// page).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResult {
    pub tasks: Vec<Task>,
    pub next_page_token: String,
    /// How many tasks this page holds.
    pub page_size: usize,
    /// How many tasks match, on every page.
    pub total_size: usize,
}

/// A JSON-RPC request.
#[derive(Debug, Clone, Deserialize)]
pub struct Request {
    pub jsonrpc: Option<String>,
    /// A string or a number, echoed as it came.
    #[serde(default)]
    pub id: Value,
    pub method: Option<String>,
    #[serde(default)]
    pub params: Value,
}

/// A JSON-RPC error.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub data: Vec<Value>,
}

/// A JSON-RPC response (`result` or `error`).
pub fn response(id: &Value, outcome: Result<Value, RpcError>) -> Value {
    let mut out = Map::new();
    out.insert("jsonrpc".into(), Value::from("2.0"));
    out.insert("id".into(), id.clone());
    match outcome {
        Ok(result) => out.insert("result".into(), result),
        Err(error) => out.insert(
            "error".into(),
            serde_json::to_value(error).unwrap_or(Value::Null),
        ),
    };
    Value::Object(out)
}
