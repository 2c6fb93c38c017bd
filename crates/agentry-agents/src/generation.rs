//! The generation loop, written once: model calls until one asks for no tool (or `maxSteps`),
//! each followed by its tool calls, whose results go back to the model. What happens at each
//! point is its [`Recorder`]'s: a generation held in memory streams its events as they come
//! (`runtime.rs`); a durable run journals each call and replays what it recorded after a crash,
//! a hand-off or a resume (`durable.rs`).

use std::sync::Arc;

use agentry_engine::id::UserId;
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::definition::{Agent, OperationContext};
use crate::guardrail::Tripped;
use crate::message::{FinishReason, Message, ToolCall, ToolResult, Usage};
use crate::model::{GenerationSettings, Model, ModelError, ModelRequest, ModelResponse, ToolSpec};
use crate::tool::{Tool, ToolContext};

/// Steps the loop takes when the request gives no `maxSteps`.
pub const DEFAULT_MAX_STEPS: u32 = 10;
/// Whose conversation memory a generation may read and write, as far as the server could verify
/// who asks (the application layer decides it from its caller).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MemoryOwner {
    /// No authentication is configured (a trusted, single-tenant setup): the request's `userId`
    /// is taken at its word.
    #[default]
    Trusted,
    /// Authentication is on and the token was verified: memory belongs to this user id, whatever
    /// `userId` the request claims.
    Verified(String),
    /// Authentication is on and the caller has no valid token: no conversation memory at all
    /// (nothing is read, nothing is written), so an anonymous caller can never reach a user's
    /// history by naming that user.
    Anonymous,
}

/// Options of one generation, validated and defaulted.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    pub user_id: Option<UserId>,
    pub conversation_id: Option<String>,
    pub context_limit: usize,
    pub max_steps: Option<u32>,
    pub settings: GenerationSettings,
    pub context: Map<String, Value>,
    /// Whose memory it reads and writes (decides the memory namespace).
    pub memory_owner: MemoryOwner,
}

impl GenerateOptions {
    /// Who is asking: `userId`, else the context's `userId` (what instructions and hooks see).
    pub fn caller_id(&self) -> Option<&str> {
        self.user_id
            .as_deref()
            .or_else(|| self.context.get("userId").and_then(Value::as_str))
    }
}

impl Default for GenerateOptions {
    fn default() -> Self {
        Self {
            user_id: None,
            conversation_id: None,
            context_limit: 10,
            max_steps: None,
            settings: GenerationSettings::default(),
            context: Map::new(),
            memory_owner: MemoryOwner::Trusted,
        }
    }
}

/// The result of a text generation.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextResult {
    pub text: String,
    pub usage: Usage,
    pub finish_reason: FinishReason,
    pub tool_calls: Vec<ToolCall>,
    pub tool_results: Vec<ToolResult>,
}

/// The result of an object generation.
#[derive(Debug, Clone)]
pub struct ObjectResult {
    pub object: Value,
    pub usage: Usage,
    pub finish_reason: FinishReason,
}

/// What a streamed generation emits, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    TextDelta(String),
    ToolCall(ToolCall),
    ToolResult(ToolResult),
    /// A tool call waits for a person's approval (durable runs only); the run suspends.
    ToolApprovalRequest(crate::run_log::ApprovalRequest),
    /// A tool call's progress while it runs ([`ToolContext::report_progress`]).
    ToolProgress {
        tool_call_id: String,
        tool_name: String,
        data: Value,
    },
    /// A partial object (stream-object only), each larger than the last.
    PartialObject(Value),
    Finish {
        finish_reason: FinishReason,
        usage: Usage,
        text: String,
        /// The validated object (stream-object only).
        object: Option<Value>,
    },
    /// The generation failed; the last event.
    Error(AgentError),
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AgentError {
    #[error("Agent {0} not found")]
    NotFound(String),
    #[error("Agent {0} is already registered")]
    Duplicate(String),
    #[error("agent id {0:?} is not usable in a path (use letters, digits, '-', '_', '.')")]
    InvalidId(String),
    #[error("Invalid request: {0}")]
    InvalidRequest(String),
    #[error("Model error: {0}")]
    Model(ModelError),
    #[error("The model's object does not match the schema: {0}")]
    InvalidObject(String),
    #[error("Memory error: {0}")]
    Memory(String),
    /// The conversation memory's database could not be reached in time.
    #[error("Memory unavailable: {0}")]
    MemoryUnavailable(String),
    /// A guardrail tripped: the generation ends with it.
    #[error("Guardrail {} tripped on the {}: {}", .0.guardrail, .0.point.as_str(), .0.reason)]
    GuardrailTripped(Tripped),
    /// A token budget is spent; `retry_after`: when it resets, if it does.
    #[error("Budget exceeded: {message}")]
    BudgetExceeded {
        message: String,
        retry_after: Option<std::time::Duration>,
    },
    #[error("Generation cancelled")]
    Cancelled,
    /// A durable run ended without its answer (failed, cancelled, or handed over).
    #[error("The run did not finish: {0}")]
    Run(String),
}

/// Where streamed events go; `None` for a one-piece generation.
pub(crate) type Sink<'a> = Option<&'a mpsc::Sender<AgentEvent>>;

pub(crate) async fn emit(sink: Sink<'_>, ev: AgentEvent) -> Result<(), AgentError> {
    match sink {
        Some(tx) => tx.send(ev).await.map_err(|_| AgentError::Cancelled),
        None => Ok(()),
    }
}

/// One generation: what it is asked, of which agent, and where its events go.
pub(crate) struct Generation<'a> {
    pub(crate) agent: &'a Agent,
    pub(crate) input: &'a [Message],
    pub(crate) opts: &'a GenerateOptions,
    pub(crate) sink: Sink<'a>,
    pub(crate) cancel: &'a CancellationToken,
    /// How deep in a delegation chain (0 for a generation asked over the API).
    pub(crate) depth: u32,
    /// The tokens it may spend ([`crate::Budget`]), when the agent has a budget.
    pub(crate) limit: Option<TokenLimit>,
}

/// The tokens a generation may spend, and what its refusal says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TokenLimit {
    pub(crate) tokens: u64,
    /// The caller's daily budget is the tighter one (else the run's).
    pub(crate) daily: bool,
    /// Until the daily budget resets.
    pub(crate) resets_in: Option<std::time::Duration>,
}

impl TokenLimit {
    /// The refusal of a generation that spent `spent` of it.
    pub(crate) fn exceeded(&self, spent: u64) -> AgentError {
        let message = if self.daily {
            format!(
                "the daily token budget for this user is spent ({spent} of {} tokens); it resets at midnight UTC",
                self.tokens
            )
        } else {
            format!(
                "the run spent {spent} tokens of its budget of {}",
                self.tokens
            )
        };
        AgentError::BudgetExceeded {
            message,
            retry_after: self.resets_in,
        }
    }
}

impl<'a> Generation<'a> {
    pub(crate) fn new(
        agent: &'a Agent,
        input: &'a [Message],
        opts: &'a GenerateOptions,
        sink: Sink<'a>,
        cancel: &'a CancellationToken,
    ) -> Self {
        Self {
            agent,
            input,
            opts,
            sink,
            cancel,
            depth: 0,
            limit: None,
        }
    }

    /// Whether its events are streamed.
    pub(crate) fn streams(&self) -> bool {
        self.sink.is_some()
    }

    /// The same generation with its streamed events going to `sink` instead.
    pub(crate) fn with_sink<'b>(&'b self, sink: &'b mpsc::Sender<AgentEvent>) -> Generation<'b> {
        Generation {
            sink: Some(sink),
            ..*self
        }
    }

    /// Cancelled, or its stream's reader went away.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled() || self.sink.is_some_and(|s| s.is_closed())
    }

    /// What a tool called in this generation knows of it.
    pub(crate) fn tool_context(&self) -> ToolContext {
        ToolContext {
            agent_id: self.agent.id.clone(),
            user_id: self.opts.user_id.clone().map(UserId::into_string),
            owner: match &self.opts.memory_owner {
                MemoryOwner::Verified(id) => Some(id.clone()),
                MemoryOwner::Trusted | MemoryOwner::Anonymous => None,
            },
            conversation_id: self.opts.conversation_id.clone(),
            context: self.opts.context.clone(),
            cancel: self.cancel.clone(),
            depth: self.depth,
            run_id: None,
            attempt: 1,
            progress: None,
        }
    }

    /// The progress sink of call `c`: its reports go to the stream as `tool-progress` (none
    /// when the generation does not stream).
    pub(crate) fn progress_of(&self, c: &ToolCall) -> Option<super::tool::ToolProgress> {
        let sink = self.sink?.clone();
        let (id, name) = (c.tool_call_id.clone(), c.tool_name.clone());
        Some(super::tool::ToolProgress::new(move |data| {
            let size = serde_json::to_vec(&data).map_or(usize::MAX, |b| b.len());
            if size <= super::tool::MAX_PROGRESS_BYTES {
                let _ = sink.try_send(AgentEvent::ToolProgress {
                    tool_call_id: id.clone(),
                    tool_name: name.clone(),
                    data,
                });
            }
        }))
    }
}

/// What the model is told of the tools.
pub(crate) fn tool_specs(tools: &[Arc<dyn Tool>]) -> Vec<ToolSpec> {
    tools
        .iter()
        .map(|t| ToolSpec {
            name: t.name().to_owned(),
            description: t.description().to_owned(),
            parameters: t.parameters().clone(),
        })
        .collect()
}

/// What the loop does at each of its points.
pub(crate) trait Recorder {
    /// How it fails: a generation's failure, or (a durable run) its step's, which may also
    /// suspend it.
    type Error: From<AgentError>;

    /// The tools offered to the model.
    fn tools(&self) -> &[Arc<dyn Tool>];

    /// The messages of the first model call: the instructions, the memory and the request.
    async fn history(&self, g: &Generation<'_>) -> Result<Vec<Message>, Self::Error>;

    /// The answer of model call number `call` (from 1) to `req`.
    async fn model_call(
        &self,
        g: &Generation<'_>,
        model: &dyn Model,
        req: &ModelRequest,
        call: u32,
    ) -> Result<ModelResponse, Self::Error>;

    /// The results of the tool calls `calls` of answer number `call`, in call order.
    async fn tool_calls(
        &self,
        g: &Generation<'_>,
        op: &OperationContext,
        call: u32,
        calls: &[ToolCall],
    ) -> Result<Vec<ToolResult>, Self::Error>;

    /// The generation ended with `text`: its exchange is remembered.
    async fn remember(&self, g: &Generation<'_>, text: &str) -> Result<(), Self::Error>;
}

/// The loop of one text generation.
pub(crate) async fn generation_loop<R: Recorder>(
    model: &dyn Model,
    g: &Generation<'_>,
    op: &OperationContext,
    recorder: &R,
) -> Result<TextResult, R::Error> {
    let specs = tool_specs(recorder.tools());
    let mut messages = recorder.history(g).await?;
    let max_steps = g.opts.max_steps.unwrap_or(DEFAULT_MAX_STEPS).max(1);
    let mut result = TextResult {
        text: String::new(),
        usage: Usage::default(),
        finish_reason: FinishReason::Stop,
        tool_calls: Vec::new(),
        tool_results: Vec::new(),
    };
    for call in 1..=max_steps {
        // A budget stops the loop before a call it cannot pay for.
        if let Some(limit) = g.limit
            && result.usage.total_tokens >= limit.tokens
        {
            return Err(limit.exceeded(result.usage.total_tokens).into());
        }
        let req = ModelRequest {
            messages: messages.clone(),
            tools: specs.clone(),
            settings: g.opts.settings.clone(),
            output_schema: None,
        };
        let resp = recorder.model_call(g, model, &req, call).await?;
        result.usage += resp.usage;
        result.text.push_str(&resp.text);
        result.finish_reason = resp.finish_reason;
        if resp.tool_calls.is_empty() {
            break;
        }
        let results = recorder.tool_calls(g, op, call, &resp.tool_calls).await?;
        messages.push(Message::tool_calls(
            resp.text.clone(),
            resp.tool_calls.clone(),
        ));
        messages.extend(results.iter().cloned().map(Message::tool_result));
        result.tool_calls.extend(resp.tool_calls);
        result.tool_results.extend(results);
    }
    recorder.remember(g, &result.text).await?;
    Ok(result)
}
