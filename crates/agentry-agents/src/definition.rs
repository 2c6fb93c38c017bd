//! What an agent is: identity, instructions (fixed or dynamic), model, tools, sub-agents, memory.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::guardrail::{Guardrail, Guardrails};
use super::model::Model;
use super::tool::Tool;
use super::working_memory::WorkingMemory;

/// What dynamic instructions can read.
#[derive(Debug, Clone, Copy)]
pub struct InstructionContext<'a> {
    /// The request's context map (`options.context`, with `user` when authenticated).
    pub context: &'a Map<String, Value>,
    pub user: Option<&'a Value>,
    pub user_id: Option<&'a str>,
}

pub type InstructionsFn = Arc<dyn Fn(&InstructionContext<'_>) -> String + Send + Sync>;

/// What an agent hook sees of one operation (spec section 5: `userId` is a direct property; the
/// key/value map carries `user` when the request was authenticated).
#[derive(Debug, Clone)]
pub struct OperationContext {
    pub agent_id: String,
    /// `generateText`, `streamText`, `generateObject` or `streamObject`.
    pub operation: &'static str,
    pub user_id: Option<String>,
    pub conversation_id: Option<String>,
    pub context: Map<String, Value>,
}

impl OperationContext {
    /// The authenticated user, when there is one.
    pub fn user(&self) -> Option<&Value> {
        self.context.get("user")
    }
}

/// How an operation ended: its text (or object as JSON), or its error.
pub type Outcome<'a> = Result<&'a str, &'a str>;

/// Observers of an agent's operations and tool calls (like VoltAgent's `onStart`, `onEnd`,
/// `onToolStart`, `onToolEnd`). They run inline and should be quick.
#[derive(Clone, Default)]
pub struct Hooks {
    pub on_start: Option<StartHook>,
    pub on_end: Option<EndHook>,
    pub on_tool_start: Option<ToolStartHook>,
    pub on_tool_end: Option<ToolEndHook>,
}

pub type StartHook = Arc<dyn Fn(&OperationContext) + Send + Sync>;
pub type EndHook = Arc<dyn Fn(&OperationContext, Outcome<'_>) + Send + Sync>;
/// Tool name and arguments.
pub type ToolStartHook = Arc<dyn Fn(&OperationContext, &str, &Value) + Send + Sync>;
/// Tool name, result and whether it is an error.
pub type ToolEndHook = Arc<dyn Fn(&OperationContext, &str, &Value, bool) + Send + Sync>;

/// Fixed text, or a function of the request's context.
#[derive(Clone)]
pub enum Instructions {
    Static(String),
    Dynamic(InstructionsFn),
}

impl Instructions {
    pub fn render(&self, ctx: &InstructionContext<'_>) -> String {
        match self {
            Instructions::Static(s) => s.clone(),
            Instructions::Dynamic(f) => f(ctx),
        }
    }
}

/// Conversation memory settings of an agent.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryConfig {
    /// Messages loaded into a call when the request does not say (`options.contextLimit`).
    pub default_context_limit: usize,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            default_context_limit: 10,
        }
    }
}

impl MemoryConfig {
    /// The `config` object shown by GET /agents.
    pub fn describe(&self, storage: &str) -> Value {
        json!({
            "storage": storage,
            "scope": "agentId, userId, conversationId",
            "contextLimit": self.default_context_limit,
        })
    }
}

/// An agent.
#[derive(Clone)]
pub struct Agent {
    pub id: String,
    pub name: String,
    pub description: String,
    pub instructions: Instructions,
    /// `None`: the hub's default model.
    pub model: Option<Arc<dyn Model>>,
    pub tools: Vec<Arc<dyn Tool>>,
    /// Ids of registered agents this one may delegate to (through `delegate_task`).
    pub sub_agents: Vec<String>,
    pub memory: Option<MemoryConfig>,
    /// What the agent keeps up to date about a user or a conversation
    /// (`crate::working_memory`).
    pub working_memory: Option<WorkingMemory>,
    pub telemetry: bool,
    pub hooks: Hooks,
    /// Every generation of this agent is a durable run (recorded call by call), as if each
    /// request asked for `options.durable`.
    pub durable: bool,
    /// Checks of its input, its output and its tool calls.
    pub guardrails: Guardrails,
    /// Models tried in order when the model fails with a retryable error (throttled, down,
    /// timed out).
    pub fallback_models: Vec<Arc<dyn Model>>,
    /// Its token budgets.
    pub budget: Budget,
    /// Semantic recall of the scope's earlier messages (needs conversation memory).
    pub recall: Option<crate::recall::SemanticRecall>,
    /// Scorers run on a sample of its generations, after the answer.
    pub live_scoring: Option<crate::scorers::LiveScoring>,
}

/// The most tokens an agent may spend: per run, and per user per UTC day (a generation over a
/// budget is refused with `budget_exceeded`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Budget {
    pub tokens_per_run: Option<u64>,
    pub tokens_per_user_day: Option<u64>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent").field("id", &self.id).finish()
    }
}

impl Agent {
    pub fn new(id: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            description: String::new(),
            instructions: Instructions::Static(String::new()),
            model: None,
            tools: Vec::new(),
            sub_agents: Vec::new(),
            memory: None,
            working_memory: None,
            telemetry: false,
            hooks: Hooks::default(),
            durable: false,
            guardrails: Guardrails::default(),
            fallback_models: Vec::new(),
            budget: Budget::default(),
            recall: None,
            live_scoring: None,
        }
    }

    /// Adds semantic recall: before each generation, the earlier messages of the scope nearest
    /// to the request are added to the context.
    pub fn semantic_recall(mut self, recall: crate::recall::SemanticRecall) -> Self {
        self.recall = Some(recall);
        self
    }

    /// Scores a sample of its generations after each answer, off the request path.
    pub fn live_scoring(mut self, scoring: crate::scorers::LiveScoring) -> Self {
        self.live_scoring = Some(scoring);
        self
    }

    /// Adds a guardrail of the request's messages, checked before the model.
    pub fn input_guardrail(mut self, g: Arc<dyn Guardrail>) -> Self {
        self.guardrails.input.push(g);
        self
    }

    /// Adds a guardrail of the model's text (on streams, as the text comes).
    pub fn output_guardrail(mut self, g: Arc<dyn Guardrail>) -> Self {
        self.guardrails.output.push(g);
        self
    }

    /// Adds a guardrail of tool calls' arguments, checked before a tool runs.
    pub fn tool_guardrail(mut self, g: Arc<dyn Guardrail>) -> Self {
        self.guardrails.tool.push(g);
        self
    }

    /// Adds a model tried when the ones before it fail with a retryable error.
    pub fn fallback_model(mut self, m: Arc<dyn Model>) -> Self {
        self.fallback_models.push(m);
        self
    }

    /// Sets the agent's token budgets.
    pub fn budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// Makes every generation of this agent a durable run.
    pub fn durable(mut self) -> Self {
        self.durable = true;
        self
    }

    /// Whether a call of this agent may wait for a person (one of its tools needs approval):
    /// such a call is made durable, since the answer may come days later.
    pub fn may_wait_for_approval(&self) -> bool {
        self.tools.iter().any(|t| t.approval().is_some())
    }

    pub fn description(mut self, d: impl Into<String>) -> Self {
        self.description = d.into();
        self
    }

    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Instructions::Static(text.into());
        self
    }

    /// Instructions computed per request from its context and user.
    pub fn dynamic_instructions<F>(mut self, f: F) -> Self
    where
        F: Fn(&InstructionContext<'_>) -> String + Send + Sync + 'static,
    {
        self.instructions = Instructions::Dynamic(Arc::new(f));
        self
    }

    pub fn model(mut self, m: Arc<dyn Model>) -> Self {
        self.model = Some(m);
        self
    }

    pub fn tool(mut self, t: Arc<dyn Tool>) -> Self {
        self.tools.push(t);
        self
    }

    pub fn sub_agent(mut self, id: impl Into<String>) -> Self {
        self.sub_agents.push(id.into());
        self
    }

    pub fn memory(mut self, m: MemoryConfig) -> Self {
        self.memory = Some(m);
        self
    }

    /// Gives the agent a working memory: the model sees it with the instructions and replaces
    /// it through the built-in tool `update_working_memory`.
    pub fn working_memory(mut self, m: WorkingMemory) -> Self {
        self.working_memory = Some(m);
        self
    }

    pub fn telemetry(mut self, on: bool) -> Self {
        self.telemetry = on;
        self
    }

    /// Called when an operation of this agent starts.
    pub fn on_start(mut self, f: impl Fn(&OperationContext) + Send + Sync + 'static) -> Self {
        self.hooks.on_start = Some(Arc::new(f));
        self
    }

    /// Called when an operation ends, with its text or its error (not when it was cancelled).
    pub fn on_end(
        mut self,
        f: impl Fn(&OperationContext, Outcome<'_>) + Send + Sync + 'static,
    ) -> Self {
        self.hooks.on_end = Some(Arc::new(f));
        self
    }

    /// Called before each tool call.
    pub fn on_tool_start(
        mut self,
        f: impl Fn(&OperationContext, &str, &Value) + Send + Sync + 'static,
    ) -> Self {
        self.hooks.on_tool_start = Some(Arc::new(f));
        self
    }

    /// Called after each tool call.
    pub fn on_tool_end(
        mut self,
        f: impl Fn(&OperationContext, &str, &Value, bool) + Send + Sync + 'static,
    ) -> Self {
        self.hooks.on_tool_end = Some(Arc::new(f));
        self
    }
}
