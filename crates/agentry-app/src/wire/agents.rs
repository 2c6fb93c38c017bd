//! Agents: their detail, the results of a generation and the events of the agent streams. (The
//! bodies of the agent routes are in `crate::input`: each is its own parser and schema.)

use agentry_agents::guardrail::GuardPoint;
use agentry_agents::{
    self as agent, Agent, AgentError, AgentEvent as DomainEvent, AgentHub, Budget,
};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::error::Code;

// ---------------------------------------------------------------------------------------------
// An agent.

/// A sub-agent as the agent that delegates to it shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct SubAgentRef {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub description: Option<String>,
}

/// An agent's memory settings.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentMemory {
    /// Where and how the conversation history is kept, e.g.
    /// `{"storage": "sqlite", "scope": "agentId, userId, conversationId", "contextLimit": 10}`.
    #[schema(value_type = Object)]
    pub config: Value,
}

impl AgentMemory {
    /// The conversation memory's settings, with `workingMemory` (its scope and format) when the
    /// agent keeps one; `None` when it keeps neither.
    fn of(a: &Agent, storage: &str) -> Option<Self> {
        let mut config = match (&a.memory, &a.working_memory) {
            (None, None) => return None,
            (Some(m), _) => m.describe(storage),
            (None, Some(_)) => serde_json::json!({"storage": storage}),
        };
        if let (Some(w), Some(map)) = (&a.working_memory, config.as_object_mut()) {
            map.insert("workingMemory".into(), w.describe());
        }
        Some(Self { config })
    }
}

/// GET and PUT /agents/{id}/memory/working: an agent's working memory in the scope the query
/// named.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkingMemoryView {
    pub agent_id: String,
    /// `user` (one per user, across their conversations) or `conversation`.
    #[schema(example = "user")]
    pub scope: &'static str,
    /// The user whose memory it is: the verified user's id, else the query's `userId`
    /// (absent for a trusted caller that named none).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub user_id: Option<String>,
    /// The conversation (scope `conversation` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub conversation_id: Option<String>,
    /// The JSON Schema of the value (a working memory of JSON values).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Object, nullable = false)]
    pub schema: Option<Value>,
    /// The Markdown template (a working memory of Markdown text, whose value is a string).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub template: Option<String>,
    /// The current value (a JSON value, or the Markdown text of a template); `null` when none
    /// was written.
    #[schema(required = true)]
    pub value: Option<Value>,
    /// When the value was last written; `null` when none was.
    #[schema(value_type = Option<crate::wire::Timestamp>, required = true)]
    pub updated_at: Option<crate::wire::Timestamp>,
}

impl WorkingMemoryView {
    pub fn new(
        agent: &Agent,
        memory: &agent::WorkingMemory,
        whose: (Option<String>, Option<String>),
        stored: Option<agent::StoredWorkingMemory>,
    ) -> Self {
        let (user_id, conversation_id) = whose;
        let (value, updated_at) = match stored {
            Some(s) => (Some(s.value), Some(s.updated_at.into())),
            None => (None, None),
        };
        Self {
            agent_id: agent.id.clone(),
            scope: memory.scope.as_str(),
            user_id,
            conversation_id,
            schema: memory.json_schema().cloned(),
            template: memory.markdown_template().map(str::to_owned),
            value,
            updated_at,
        }
    }
}

/// The only status an agent shows.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AgentStatus {
    Idle,
}

/// An agent (items of GET /agents, and GET /agents/{id}).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentSummary {
    pub id: String,
    pub name: String,
    pub description: String,
    pub status: AgentStatus,
    /// The model's name (`offline` for the built-in model).
    pub model: String,
    /// The names of its tools.
    pub tools: Vec<String>,
    pub sub_agents: Vec<SubAgentRef>,
    /// `null` when the agent keeps no memory.
    #[schema(required = true)]
    pub memory: Option<AgentMemory>,
    pub is_telemetry_enabled: bool,
}

impl AgentSummary {
    pub fn new(hub: &AgentHub, a: &Agent) -> Self {
        let sub_agents = a
            .sub_agents
            .iter()
            .map(|id| match hub.agent(&id.into()) {
                Some(s) => SubAgentRef {
                    id: s.id.clone(),
                    name: Some(s.name.clone()),
                    description: Some(s.description.clone()),
                },
                None => SubAgentRef {
                    id: id.clone(),
                    name: None,
                    description: None,
                },
            })
            .collect();
        let storage = hub.memory_storage().unwrap_or_else(|| "memory".into());
        Self {
            id: a.id.clone(),
            name: a.name.clone(),
            description: a.description.clone(),
            status: AgentStatus::Idle,
            model: hub.model_of(a).name().to_owned(),
            tools: hub.tool_names(a),
            sub_agents,
            memory: AgentMemory::of(a, &storage),
            is_telemetry_enabled: a.telemetry,
        }
    }
}

/// GET /agents/{id}: the agent, and what its model is told of each tool.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentDetail {
    #[serde(flatten)]
    pub agent: AgentSummary,
    /// Each tool of `tools`: its name, description and the JSON Schema of its arguments (tools
    /// from MCP servers with the schemas their servers declared).
    pub tool_definitions: Vec<ToolDefinition>,
    /// When the agent scores its generations live: its scorers and on what share.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub live_scoring: Option<LiveScoringConfig>,
    /// Its guardrails' names, by where they stand (absent when it has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub guardrails: Option<GuardrailNames>,
    /// The models tried in order when its model fails with a retryable error.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fallback_models: Vec<String>,
    /// Its token budgets (absent when it has none; its usage: `GET /agents/{id}/usage`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub budget: Option<BudgetConfig>,
}

/// An agent's guardrails' names, by where they stand.
#[derive(Debug, Serialize, ToSchema)]
pub struct GuardrailNames {
    pub input: Vec<String>,
    pub output: Vec<String>,
    pub tool: Vec<String>,
}

/// An agent's token budgets.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BudgetConfig {
    /// The most tokens one run may spend (`null`: no limit).
    #[schema(required = true)]
    pub tokens_per_run: Option<u64>,
    /// The most tokens one user may spend per UTC day (`null`: no limit).
    #[schema(required = true)]
    pub tokens_per_user_day: Option<u64>,
}

/// An agent's live scoring, as its detail shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LiveScoringConfig {
    /// The scorers' names (`GET /agents/{id}/scores?scorer=` takes each).
    pub scorers: Vec<String>,
    /// The share of its generations scored, from 0 to 1.
    pub sample_rate: f64,
}

/// One tool as the model sees it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments.
    #[schema(value_type = Object)]
    pub parameters: Value,
}

impl AgentDetail {
    pub fn new(hub: &AgentHub, a: &Agent) -> Self {
        Self {
            agent: AgentSummary::new(hub, a),
            tool_definitions: hub
                .tool_specs(a)
                .into_iter()
                .map(|t| ToolDefinition {
                    name: t.name,
                    description: t.description,
                    parameters: t.parameters,
                })
                .collect(),
            live_scoring: a.live_scoring.as_ref().map(|l| LiveScoringConfig {
                scorers: l.scorers.iter().map(|s| s.name().to_owned()).collect(),
                sample_rate: l.rate,
            }),
            guardrails: (!a.guardrails.is_empty()).then(|| {
                let names = |point| {
                    a.guardrails
                        .at(point)
                        .iter()
                        .map(|g| g.name().to_owned())
                        .collect()
                };
                GuardrailNames {
                    input: names(GuardPoint::Input),
                    output: names(GuardPoint::Output),
                    tool: names(GuardPoint::Tool),
                }
            }),
            fallback_models: a
                .fallback_models
                .iter()
                .map(|m| m.name().to_owned())
                .collect(),
            budget: (a.budget != Budget::default()).then_some(BudgetConfig {
                tokens_per_run: a.budget.tokens_per_run,
                tokens_per_user_day: a.budget.tokens_per_user_day,
            }),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A generation's result.

/// Token counts of a generation.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub cached_input_tokens: u64,
    pub reasoning_tokens: u64,
}

impl From<agent::Usage> for Usage {
    fn from(u: agent::Usage) -> Self {
        Self {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u.total_tokens,
            cached_input_tokens: u.cached_input_tokens,
            reasoning_tokens: u.reasoning_tokens,
        }
    }
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FinishReason {
    Stop,
    Length,
    ContentFilter,
    ToolCalls,
    Error,
    Other,
}

impl From<agent::FinishReason> for FinishReason {
    fn from(r: agent::FinishReason) -> Self {
        use agent::FinishReason as F;
        match r {
            F::Stop => Self::Stop,
            F::Length => Self::Length,
            F::ContentFilter => Self::ContentFilter,
            F::ToolCalls => Self::ToolCalls,
            F::Error => Self::Error,
            F::Other => Self::Other,
        }
    }
}

/// A tool call the model asked for.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    pub tool_call_id: String,
    pub tool_name: String,
    pub args: Value,
}

impl From<&agent::ToolCall> for ToolCall {
    fn from(c: &agent::ToolCall) -> Self {
        Self {
            tool_call_id: c.tool_call_id.clone(),
            tool_name: c.tool_name.clone(),
            args: c.args.clone(),
        }
    }
}

/// A tool's result.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    pub tool_call_id: String,
    pub tool_name: String,
    pub args: Value,
    pub result: Value,
    /// Present (`true`) when the tool failed; `result` then describes the failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub is_error: Option<bool>,
}

impl From<&agent::ToolResult> for ToolResult {
    fn from(r: &agent::ToolResult) -> Self {
        Self {
            tool_call_id: r.tool_call_id.clone(),
            tool_name: r.tool_name.clone(),
            args: r.args.clone(),
            result: r.result.clone(),
            is_error: r.is_error.then_some(true),
        }
    }
}

/// `data` of POST /agents/{id}/text.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TextResult {
    pub text: String,
    pub usage: Usage,
    pub finish_reason: FinishReason,
    pub tool_calls: Vec<ToolCall>,
    pub tool_results: Vec<ToolResult>,
}

impl From<&agent::TextResult> for TextResult {
    fn from(r: &agent::TextResult) -> Self {
        Self {
            text: r.text.clone(),
            usage: r.usage.into(),
            finish_reason: r.finish_reason.into(),
            tool_calls: r.tool_calls.iter().map(Into::into).collect(),
            tool_results: r.tool_results.iter().map(Into::into).collect(),
        }
    }
}

/// A tool call that waits for a person's approval.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequest {
    /// Names the request in its run: the last segment of its approval route.
    pub approval_id: String,
    pub tool_call_id: String,
    pub tool_name: String,
    pub args: Value,
    /// After it, the request counts as denied.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub deadline: Option<super::Timestamp>,
}

impl From<&agent::ApprovalRequest> for ApprovalRequest {
    fn from(r: &agent::ApprovalRequest) -> Self {
        Self {
            approval_id: r.approval_id.clone(),
            tool_call_id: r.tool_call_id.clone(),
            tool_name: r.tool_name.clone(),
            args: r.args.clone(),
            deadline: r.deadline.map(Into::into),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Stream events.

/// The last event of a stream whose generation failed.
#[derive(Debug, Serialize, ToSchema)]
pub struct StreamError {
    /// What went wrong.
    pub error: String,
    /// The row of the error table (a provider's failure keeps its kind).
    pub code: Code,
}

impl From<&AgentError> for StreamError {
    fn from(e: &AgentError) -> Self {
        Self {
            error: e.to_string(),
            code: crate::error::agent_error_code(e),
        }
    }
}

/// A raw full-stream event of POST /agents/{id}/stream, by `type`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum AgentEvent {
    /// New text (`delta` and `text` both carry it).
    TextDelta {
        delta: String,
        text: String,
    },
    ToolCall(ToolCall),
    ToolResult(ToolResult),
    /// A tool call of a durable run waits for a person's approval: answer it with POST
    /// /agents/{id}/runs/{runId}/approvals/{approvalId}. The run suspends; the stream ends
    /// with `finish` (`finishReason: tool-calls`).
    ToolApprovalRequest(ApprovalRequest),
    /// A tool call's progress while it runs (a remote A2A agent's words, for one).
    #[serde(rename_all = "camelCase")]
    ToolProgress {
        tool_call_id: String,
        tool_name: String,
        #[schema(value_type = Object)]
        data: Value,
    },
    /// The object so far.
    ObjectDelta {
        object: Value,
    },
    /// The generation ended: why, its usage and the whole text.
    #[serde(rename_all = "camelCase")]
    Finish {
        finish_reason: FinishReason,
        usage: Usage,
        text: String,
    },
    Error(StreamError),
}

impl From<&DomainEvent> for AgentEvent {
    fn from(ev: &DomainEvent) -> Self {
        match ev {
            DomainEvent::TextDelta(d) => Self::TextDelta {
                delta: d.clone(),
                text: d.clone(),
            },
            DomainEvent::ToolCall(c) => Self::ToolCall(c.into()),
            DomainEvent::ToolResult(r) => Self::ToolResult(r.into()),
            DomainEvent::ToolApprovalRequest(r) => Self::ToolApprovalRequest(r.into()),
            DomainEvent::ToolProgress {
                tool_call_id,
                tool_name,
                data,
            } => Self::ToolProgress {
                tool_call_id: tool_call_id.clone(),
                tool_name: tool_name.clone(),
                data: data.clone(),
            },
            DomainEvent::PartialObject(o) => Self::ObjectDelta { object: o.clone() },
            DomainEvent::Finish {
                finish_reason,
                usage,
                text,
                ..
            } => Self::Finish {
                finish_reason: (*finish_reason).into(),
                usage: (*usage).into(),
                text: text.clone(),
            },
            DomainEvent::Error(e) => Self::Error(e.into()),
        }
    }
}

/// An event of POST /agents/{id}/stream-object, by `type`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ObjectEvent {
    /// The object so far.
    PartialObject {
        object: Value,
    },
    /// The validated object.
    Object {
        object: Value,
    },
    #[serde(rename_all = "camelCase")]
    Finish {
        finish_reason: FinishReason,
        usage: Usage,
    },
    Error(StreamError),
}

impl ObjectEvent {
    /// The events one agent event gives: an object stream shows partial objects, then the
    /// validated object and the finish, or the error.
    pub fn of(ev: &DomainEvent) -> Vec<Self> {
        match ev {
            DomainEvent::PartialObject(o) => vec![Self::PartialObject { object: o.clone() }],
            DomainEvent::Finish {
                finish_reason,
                usage,
                object,
                ..
            } => vec![
                Self::Object {
                    object: object.clone().unwrap_or(Value::Null),
                },
                Self::Finish {
                    finish_reason: (*finish_reason).into(),
                    usage: (*usage).into(),
                },
            ],
            DomainEvent::Error(e) => vec![Self::Error(e.into())],
            _ => Vec::new(),
        }
    }
}

/// An agent's token usage for a user (`GET /agents/{id}/usage`): today's, what is left of the
/// day's budget, and day by day.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageView {
    pub agent_id: String,
    /// The user: the verified user's id, else the query's `userId` (absent for a trusted
    /// caller that named none: the `anonymous` user's usage).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub user_id: Option<String>,
    /// The agent's budget per run (`null`: none).
    #[schema(required = true)]
    pub tokens_per_run: Option<u64>,
    /// The agent's budget per user per UTC day (`null`: none).
    #[schema(required = true)]
    pub tokens_per_user_day: Option<u64>,
    /// Today (UTC), `YYYY-MM-DD`.
    #[schema(example = "2026-11-29")]
    pub today: String,
    /// Tokens spent today.
    pub today_tokens: u64,
    /// What is left of today's budget (`null` without a daily budget).
    #[schema(required = true)]
    pub remaining_today: Option<u64>,
    /// When the day's budget resets (midnight UTC).
    pub resets_at: crate::wire::Timestamp,
    /// Tokens per day with any, oldest first, over the days asked for.
    pub days: Vec<DayUsage>,
}

/// The tokens spent on one UTC day.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DayUsage {
    #[schema(example = "2026-11-29")]
    pub day: String,
    pub tokens: u64,
}
