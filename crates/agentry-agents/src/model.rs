//! The model trait: what an agent needs of a language model. Providers (the built-in offline
//! model here, OpenAI-compatible endpoints in `agentry-openai`) implement it.

use async_trait::async_trait;
use futures::stream::BoxStream;
use serde_json::Value;

use super::message::{FinishReason, Message, ToolCall, Usage};

/// Sampling and length settings, already validated and defaulted.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerationSettings {
    pub temperature: f64,
    pub max_output_tokens: u32,
    pub top_p: f64,
    pub frequency_penalty: f64,
    pub presence_penalty: f64,
    pub seed: Option<i64>,
    pub stop_sequences: Vec<String>,
    /// Passed to the provider untouched (e.g. `{"openai": {"reasoningEffort": "low"}}`).
    pub provider_options: Option<Value>,
}

impl Default for GenerationSettings {
    fn default() -> Self {
        Self {
            temperature: 0.7,
            max_output_tokens: 4000,
            top_p: 1.0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            seed: None,
            stop_sequences: Vec::new(),
            provider_options: None,
        }
    }
}

/// A tool as a model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
}

/// One call of a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub settings: GenerationSettings,
    /// When set, the model must answer with a JSON document valid against this schema.
    pub output_schema: Option<Value>,
}

/// A model's whole answer to one request.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelResponse {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: FinishReason,
    pub usage: Usage,
    /// The model that answered (set by the agent's loop: the agent's model or a fallback).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// A piece of a streamed answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelChunk {
    TextDelta(String),
    /// A complete tool call (providers assemble streamed argument fragments first).
    ToolCall(ToolCall),
    Finish {
        finish_reason: FinishReason,
        usage: Usage,
    },
}

/// Why a model (provider) call failed: a client answers each kind differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelErrorKind {
    /// The provider throttled the request (HTTP 429): try again later.
    RateLimited,
    /// The provider refused the credentials (HTTP 401 or 403).
    Unauthorized,
    /// The provider did not answer in time.
    TimedOut,
    /// The provider refused the request itself (HTTP 400, 404, 422, ...), with its reason.
    Refused,
    /// The provider is down or unreachable (HTTP 5xx, a connection that failed).
    Unavailable,
    /// Anything else (an unreadable answer, a request that could not be built, ...).
    Failed,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ModelError {
    pub kind: ModelErrorKind,
    pub message: String,
    /// How long the provider asked to wait (a rate limit's `Retry-After`), when it said.
    pub retry_after: Option<std::time::Duration>,
}

impl ModelError {
    /// A failure of no particular kind ([`ModelErrorKind::Failed`]).
    pub fn new(message: impl Into<String>) -> Self {
        Self::of(ModelErrorKind::Failed, message)
    }

    pub fn of(kind: ModelErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            retry_after: None,
        }
    }
}

impl ModelErrorKind {
    /// Whether another model (or a later try) may succeed where this one failed: throttled,
    /// down or timed out (model fallbacks are tried on these only).
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ModelErrorKind::RateLimited | ModelErrorKind::Unavailable | ModelErrorKind::TimedOut
        )
    }
}

pub type ChunkStream = BoxStream<'static, Result<ModelChunk, ModelError>>;

#[async_trait]
pub trait Model: Send + Sync + 'static {
    /// The model name shown in agent listings.
    fn name(&self) -> &str;

    /// Answers a request in one piece.
    async fn generate(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError>;

    /// Answers a request as a stream of chunks; dropping the stream abandons the request.
    async fn stream(&self, request: &ModelRequest) -> Result<ChunkStream, ModelError>;
}
