//! The agent hub: the registry of agents, their models, tools and memory, and the generations
//! held in memory (text, streams, objects) on the generation loop of [`crate::generation`].

use std::sync::{Arc, RwLock, Weak};
use std::time::Instant;

use async_trait::async_trait;
use futures::StreamExt;
use futures::future::join_all;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::definition::{Agent, InstructionContext, OperationContext};
use super::generation::{
    AgentError, AgentEvent, GenerateOptions, Generation, MemoryOwner, ObjectResult, Recorder,
    TextResult, TokenLimit, emit, generation_loop, tool_specs,
};
use super::guardrail::{self, Applied, GuardPoint, Guardrail, StreamGuard, Tripped};
use super::memory::{ConversationKey, ConversationStore};
use super::message::{FinishReason, Message, Role, ToolCall, ToolResult, Usage};
use super::model::{Model, ModelChunk, ModelRequest, ModelResponse, ToolSpec};
use super::partial::parse_partial;
use super::recall::{self, RecallStore};
use super::tool::{Tool, ToolContext};
use super::usage::{InMemoryUsageStore, UsageCounter, UsageKey, UsageStore, usage_user};
use super::working_memory::{InMemoryWorkingMemoryStore, WorkingMemoryStore};
use crate::telemetry::{
    AgentTelemetry, GuardrailReport, ModelCallReport, NoTelemetry, ToolCallReport, UNKNOWN,
};
use agentry_engine::clock::{Clock, SystemClock};
use agentry_engine::engine::AgentRunner;
use agentry_engine::id::{AgentId, UserId};
use agentry_engine::schema::Schema;
use agentry_engine::store::StoreError;
use chrono::NaiveDate;

/// How deep delegation may nest.
pub const MAX_DELEGATION_DEPTH: u32 = 3;
/// The largest `contextLimit` (messages of history loaded per call).
pub const MAX_CONTEXT_LIMIT: usize = 100;
/// The most bytes of history text loaded per call: the oldest of the `contextLimit` messages are
/// left out beyond it.
pub const MAX_HISTORY_BYTES: usize = 64 * 1024;

/// A conversation store's failure as the agent's: an unreachable database, a value it cannot
/// hold (the client's), or anything else.
fn memory_error(e: StoreError) -> AgentError {
    match e {
        StoreError::Unavailable(m) => AgentError::MemoryUnavailable(m),
        StoreError::Invalid(m) => AgentError::InvalidRequest(m),
        other => AgentError::Memory(other.to_string()),
    }
}

struct Inner {
    agents: RwLock<Vec<Arc<Agent>>>,
    default_model: RwLock<Arc<dyn Model>>,
    memory: Option<Arc<dyn ConversationStore>>,
    /// Who is told of every model and tool call (metrics).
    telemetry: RwLock<Arc<dyn AgentTelemetry>>,
    /// Where semantic recall keeps and searches embeddings (none: no recall).
    recall: RwLock<Option<Arc<dyn RecallStore>>>,
    /// Wakes the embedding loop when messages are remembered.
    embed_wake: Arc<tokio::sync::Notify>,
    /// Stops the hub's background work.
    background: CancellationToken,
    /// Tokens spent per agent, user and day (the daily budgets).
    usage: RwLock<Arc<UsageCounter>>,
    /// What day it is (the daily budgets).
    clock: RwLock<Arc<dyn Clock>>,
    /// Where working memories are kept (`crate::working_memory`).
    working_memory: RwLock<Arc<dyn WorkingMemoryStore>>,
    /// Live scoring's queue and where its scores are stored.
    scoring: Arc<crate::scorers::ScoringQueue>,
}

/// The registry of agents and their generation loop. Cheap to clone.
#[derive(Clone)]
pub struct AgentHub {
    inner: Arc<Inner>,
}

/// The span of one generation of an agent (OpenTelemetry GenAI `invoke_agent`).
pub(super) fn generation_span(agent: &Agent, operation: &str) -> tracing::Span {
    tracing::info_span!(
        "invoke_agent",
        otel.name = %format_args!("invoke_agent {}", agent.id),
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.id = %agent.id,
        gen_ai.agent.name = %agent.name,
        agent_id = %agent.id,
        agentry.operation = operation,
    )
}

/// The most characters of a name a model chose that a span records.
const MAX_NAME_CHARS: usize = 128;

/// A guardrail that tripped: logged in the generation's span (a span event of the trace) and
/// counted.
fn report_trip(telemetry: &dyn AgentTelemetry, agent: &Agent, t: &Tripped) {
    tracing::warn!(agent_id = %agent.id, guardrail = %t.guardrail, point = t.point.as_str(), reason = %t.reason, "guardrail tripped");
    telemetry.guardrail(&GuardrailReport {
        agent: &agent.id,
        guardrail: &t.guardrail,
        point: t.point,
        tripped: true,
    });
}

/// Rewrites that guardrails made: logged in the generation's span and counted.
fn report_rewrites(telemetry: &dyn AgentTelemetry, agent: &Agent, applied: &Applied) {
    for r in &applied.rewrites {
        tracing::info!(agent_id = %agent.id, guardrail = %r.guardrail, point = r.point.as_str(), "guardrail rewrote the text");
        telemetry.guardrail(&GuardrailReport {
            agent: &agent.id,
            guardrail: &r.guardrail,
            point: r.point,
            tripped: false,
        });
    }
}

/// The tool fan-out: the calls of one model answer, run at once, their results in call order.
async fn call_tools(
    g: &Generation<'_>,
    op: &OperationContext,
    tools: &[Arc<dyn Tool>],
    calls: &[ToolCall],
    telemetry: &dyn AgentTelemetry,
) -> Result<Vec<ToolResult>, AgentError> {
    let ctx = g.tool_context();
    join_all(
        calls
            .iter()
            .map(|c| observed_call(g, op, tools, (c, false), ctx.clone(), telemetry)),
    )
    .await
    .into_iter()
    .collect()
}

/// One tool call in its span, reported to the telemetry; `approved` when a person approved it
/// (else a tool that needs approval for it is refused: it fails closed). Its arguments go
/// through the agent's tool guardrails first: a trip ends the generation.
pub(super) async fn observed_call(
    g: &Generation<'_>,
    op: &OperationContext,
    tools: &[Arc<dyn Tool>],
    (c, approved): (&ToolCall, bool),
    ctx: ToolContext,
    telemetry: &dyn AgentTelemetry,
) -> Result<ToolResult, AgentError> {
    let guards = &g.agent.guardrails.tool;
    let guarded;
    let c = if guards.is_empty() {
        c
    } else {
        let mut applied = Applied::default();
        match guardrail::apply_to_args(guards, &c.args, &mut applied).await {
            Ok(args) => {
                report_rewrites(telemetry, g.agent, &applied);
                guarded = ToolCall { args, ..c.clone() };
                &guarded
            }
            Err(t) => {
                report_trip(telemetry, g.agent, &t);
                return Err(AgentError::GuardrailTripped(t));
            }
        }
    };
    let tool = tools.iter().find(|t| t.name() == c.tool_name).cloned();
    // The model chooses the name: only a registered one names a span or a series.
    let label = tool.as_ref().map_or(UNKNOWN, |t| t.name()).to_owned();
    let asked: String = c.tool_name.chars().take(MAX_NAME_CHARS).collect();
    let span = tracing::info_span!(
        "execute_tool",
        otel.name = %format_args!("execute_tool {label}"),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %asked,
        gen_ai.tool.call.id = %c.tool_call_id,
        otel.status_code = tracing::field::Empty,
    );
    let began = Instant::now();
    let mut ctx = ctx;
    ctx.progress = g.progress_of(c);
    let result = {
        use tracing::Instrument;
        call_tool(g.agent, op, tool, (c, approved), ctx)
            .instrument(span.clone())
            .await
    };
    if result.is_error {
        span.record("otel.status_code", "ERROR");
    }
    telemetry.tool_call(&ToolCallReport {
        agent: &g.agent.id,
        tool: &label,
        duration: began.elapsed(),
        failed: result.is_error,
    });
    Ok(result)
}

/// One tool call between the agent's tool hooks; a failure (or an unknown tool) is a result
/// marked as an error, which the model reads.
async fn call_tool(
    agent: &Agent,
    op: &OperationContext,
    tool: Option<Arc<dyn Tool>>,
    (call, approved): (&ToolCall, bool),
    ctx: ToolContext,
) -> ToolResult {
    if let Some(f) = &agent.hooks.on_tool_start {
        f(op, &call.tool_name, &call.args);
    }
    let outcome = match tool {
        Some(t) if !approved && t.approval().is_some_and(|a| a.applies(&call.args)) => {
            Err(format!(
                "tool {} needs a person's approval for these arguments, and only a durable run can \
             wait for one",
                call.tool_name
            ))
        }
        Some(t) => t.call(call.args.clone(), ctx).await,
        None => Err(format!("unknown tool {}", call.tool_name)),
    };
    let (result, is_error) = match outcome {
        Ok(v) => (v, false),
        Err(e) => (json!({"error": e}), true),
    };
    if let Some(f) = &agent.hooks.on_tool_end {
        f(op, &call.tool_name, &result, is_error);
    }
    ToolResult {
        tool_call_id: call.tool_call_id.clone(),
        tool_name: call.tool_name.clone(),
        args: call.args.clone(),
        result,
        is_error,
    }
}

impl AgentHub {
    pub fn new(default_model: Arc<dyn Model>, memory: Option<Arc<dyn ConversationStore>>) -> Self {
        Self {
            inner: Arc::new(Inner {
                agents: RwLock::new(Vec::new()),
                default_model: RwLock::new(default_model),
                memory,
                telemetry: RwLock::new(Arc::new(NoTelemetry)),
                recall: RwLock::new(None),
                embed_wake: Arc::new(tokio::sync::Notify::new()),
                background: CancellationToken::new(),
                usage: RwLock::new(Arc::new(UsageCounter::new(Arc::new(
                    InMemoryUsageStore::default(),
                )))),
                clock: RwLock::new(Arc::new(SystemClock)),
                working_memory: RwLock::new(Arc::new(InMemoryWorkingMemoryStore::default())),
                scoring: Arc::default(),
            }),
        }
    }

    /// Sets where token usage is counted (by default, in process).
    pub fn set_usage_store(&self, usage: Arc<dyn UsageStore>) {
        *self.inner.usage.write().unwrap_or_else(|p| p.into_inner()) =
            Arc::new(UsageCounter::new(usage));
    }

    /// Where token usage is counted (the store, with what is counted and not written yet).
    pub fn usage_store(&self) -> Arc<dyn UsageStore> {
        self.usage_counter()
    }

    fn usage_counter(&self) -> Arc<UsageCounter> {
        self.inner
            .usage
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Writes the token usage counted and not written yet (at shutdown).
    pub async fn flush_usage(&self) {
        self.usage_counter().flush().await;
    }

    /// Sets the clock that says what day it is (tests move it).
    pub fn set_clock(&self, clock: Arc<dyn Clock>) {
        *self.inner.clock.write().unwrap_or_else(|p| p.into_inner()) = clock;
    }

    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.inner
            .clock
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .now()
    }

    /// Today (UTC), when tomorrow begins (when daily budgets reset), and how long until then,
    /// by the hub's clock.
    pub fn usage_day(
        &self,
    ) -> (
        NaiveDate,
        chrono::DateTime<chrono::Utc>,
        std::time::Duration,
    ) {
        let now = self.now();
        let today = now.date_naive();
        let tomorrow = today
            .succ_opt()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map_or(now, |t| t.and_utc());
        let left = (tomorrow - now).to_std().unwrap_or_default();
        (today, tomorrow, left)
    }

    /// The tokens a generation of `agent` may spend (none without a budget), or its refusal
    /// when the caller's daily budget is spent.
    pub(super) async fn token_limit(
        &self,
        agent: &Agent,
        opts: &GenerateOptions,
    ) -> Result<Option<TokenLimit>, AgentError> {
        let run = agent.budget.tokens_per_run.map(|tokens| TokenLimit {
            tokens,
            daily: false,
            resets_in: None,
        });
        let Some(per_day) = agent.budget.tokens_per_user_day else {
            return Ok(run);
        };
        let (day, _, resets_in) = self.usage_day();
        let key = UsageKey {
            agent_id: agent.id.clone(),
            user_id: usage_user(&opts.memory_owner, opts.user_id.as_deref()),
            day,
        };
        let used = self.usage_store().used(&key).await.map_err(memory_error)?;
        let daily = TokenLimit {
            tokens: per_day.saturating_sub(used),
            daily: true,
            resets_in: Some(resets_in),
        };
        if daily.tokens == 0 {
            return Err(TokenLimit {
                tokens: per_day,
                ..daily
            }
            .exceeded(used));
        }
        Ok(match run {
            Some(run) if run.tokens <= daily.tokens => Some(run),
            _ => Some(daily),
        })
    }

    /// Counts the tokens of a model call's answer for the generation's user, off the request
    /// path (a failure to count is logged: the answer is not held up by it).
    fn count_usage(&self, g: &Generation<'_>, tokens: u64) {
        if tokens == 0 {
            return;
        }
        let key = UsageKey {
            agent_id: g.agent.id.clone(),
            user_id: usage_user(&g.opts.memory_owner, g.opts.user_id.as_deref()),
            day: self.usage_day().0,
        };
        self.usage_counter().count(key, tokens);
    }

    /// Sets who is told of every model and tool call (metrics).
    pub fn set_telemetry(&self, telemetry: Arc<dyn AgentTelemetry>) {
        *self
            .inner
            .telemetry
            .write()
            .unwrap_or_else(|p| p.into_inner()) = telemetry;
    }

    /// Where working memories are kept (`crate::working_memory` reads and sets it).
    pub(super) fn working_memory_slot(&self) -> &RwLock<Arc<dyn WorkingMemoryStore>> {
        &self.inner.working_memory
    }

    /// Keeps live scores in `store` (in memory until set).
    pub fn set_score_store(&self, store: Arc<dyn crate::scorers::ScoreStore>) {
        self.inner.scoring.set_store(store);
    }

    /// Where live scores are kept.
    pub fn score_store(&self) -> Arc<dyn crate::scorers::ScoreStore> {
        self.inner.scoring.store()
    }

    /// Generations sampled for scoring that were dropped because the scoring queue was full.
    pub fn scores_dropped(&self) -> u64 {
        self.inner.scoring.dropped()
    }

    pub(crate) fn scoring(&self) -> &Arc<crate::scorers::ScoringQueue> {
        &self.inner.scoring
    }

    pub(super) fn telemetry(&self) -> Arc<dyn AgentTelemetry> {
        self.inner
            .telemetry
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn register(&self, agent: Agent) -> Result<(), AgentError> {
        if !agentry_engine::id::is_valid_id(&agent.id) {
            return Err(AgentError::InvalidId(agent.id));
        }
        let mut agents = self.inner.agents.write().unwrap_or_else(|p| p.into_inner());
        if agents.iter().any(|a| a.id == agent.id) {
            return Err(AgentError::Duplicate(agent.id));
        }
        agents.push(Arc::new(agent));
        Ok(())
    }

    pub fn agents(&self) -> Vec<Arc<Agent>> {
        self.inner
            .agents
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The registered agent `id`.
    pub fn agent(&self, id: &AgentId) -> Option<Arc<Agent>> {
        self.registered(id)
    }

    /// The registered agent `id`, or [`AgentError::NotFound`].
    pub fn require(&self, id: &AgentId) -> Result<Arc<Agent>, AgentError> {
        self.required(id)
    }

    /// [`AgentHub::agent`] by the id's text.
    fn registered(&self, id: &str) -> Option<Arc<Agent>> {
        self.agents().into_iter().find(|a| a.id == id)
    }

    /// [`AgentHub::require`] by the id's text (a sub-agent a model names).
    pub(super) fn required(&self, id: &str) -> Result<Arc<Agent>, AgentError> {
        self.registered(id)
            .ok_or_else(|| AgentError::NotFound(id.to_owned()))
    }

    pub fn default_model(&self) -> Arc<dyn Model> {
        self.inner
            .default_model
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The model an agent uses.
    pub fn model_of(&self, agent: &Agent) -> Arc<dyn Model> {
        agent.model.clone().unwrap_or_else(|| self.default_model())
    }

    /// Where memory is kept, for listings.
    pub fn memory_storage(&self) -> Option<String> {
        self.inner.memory.as_ref().map(|m| m.storage().to_owned())
    }

    /// Tool names an agent offers to its model (`delegate_task` when it has sub-agents,
    /// `update_working_memory` when it has a working memory).
    pub fn tool_names(&self, agent: &Agent) -> Vec<String> {
        self.tools_of(agent, 0, None)
            .iter()
            .map(|t| t.name().to_owned())
            .collect()
    }

    /// The tools an agent offers to its model, as the model is told of them (name,
    /// description, JSON Schema of the arguments).
    pub fn tool_specs(&self, agent: &Agent) -> Vec<ToolSpec> {
        tool_specs(&self.tools_of(agent, 0, None))
    }

    /// The tools of a generation of `agent` with `opts` (`None`: a listing).
    pub(super) fn tools_of(
        &self,
        agent: &Agent,
        depth: u32,
        opts: Option<&GenerateOptions>,
    ) -> Vec<Arc<dyn Tool>> {
        let mut tools = agent.tools.clone();
        tools.extend(self.working_memory_tool(agent, opts));
        if !agent.sub_agents.is_empty() {
            // A delegated task's memory is its caller's (a listing never calls the tool).
            let owner = opts.map_or(MemoryOwner::Anonymous, |o| o.memory_owner.clone());
            tools.push(Arc::new(DelegateTool::new(
                Arc::downgrade(&self.inner),
                agent.sub_agents.clone(),
                depth,
                owner,
            )));
        }
        tools
    }

    /// Whose conversation a call reads and writes, if any (the namespace rule of
    /// [`crate::memory::namespace`]).
    fn key(agent: &Agent, opts: &GenerateOptions) -> Option<ConversationKey> {
        agent.memory.as_ref()?;
        let user_id = crate::memory::namespace(&opts.memory_owner, opts.user_id.as_deref())?;
        Some(ConversationKey {
            agent_id: agent.id.clone(),
            user_id,
            conversation_id: opts.conversation_id.clone()?,
        })
    }

    pub(super) async fn prepare(
        &self,
        agent: &Agent,
        input: &[Message],
        opts: &GenerateOptions,
    ) -> Result<Vec<Message>, AgentError> {
        let user = opts.context.get("user");
        let user_id = opts.caller_id();
        let mut instructions = agent.instructions.render(&InstructionContext {
            context: &opts.context,
            user,
            user_id,
        });
        if let Some(section) = self.working_memory_prompt(agent, opts).await? {
            if !instructions.is_empty() {
                instructions.push_str("\n\n");
            }
            instructions.push_str(&section);
        }
        let mut messages = Vec::new();
        if !instructions.is_empty() {
            messages.push(Message::system(instructions));
        }
        if let (Some(mem), Some(key)) = (&self.inner.memory, Self::key(agent, opts)) {
            let history = mem
                .load(&key, opts.context_limit.min(MAX_CONTEXT_LIMIT))
                .await
                .map_err(memory_error)?;
            let history = newest_within(history, MAX_HISTORY_BYTES);
            if let Some(recalled) = self.recalled(agent, &key, input, history.len()).await {
                messages.push(recalled);
            }
            messages.extend(history);
        }
        messages.extend_from_slice(input);
        Ok(messages)
    }

    /// The messages semantic recall finds for the request's last user message in the scope's
    /// earlier messages (those already in the context left out), as one system message. A
    /// recall that fails (its embedder or database) is logged and left out: the generation goes
    /// on with its conversation memory.
    async fn recalled(
        &self,
        agent: &Agent,
        key: &ConversationKey,
        input: &[Message],
        in_context: usize,
    ) -> Option<Message> {
        let config = agent.recall.as_ref()?;
        let store = self.recall_store()?;
        let query = input.iter().rev().find(|m| m.role == Role::User)?;
        match recall::recall(
            store.as_ref(),
            config,
            &key.agent_id,
            &key.user_id,
            &key.conversation_id,
            &query.content,
            in_context,
        )
        .await
        {
            Ok(found) => {
                let hits = found
                    .iter()
                    .filter(|r| r.kind == recall::RecalledKind::Hit)
                    .count();
                tracing::info!(agent_id = %agent.id, hits, messages = found.len(), "semantic recall");
                recall::recall_prompt(&found)
            }
            Err(e) => {
                tracing::warn!(agent_id = %agent.id, error = %e, "semantic recall failed: the generation goes on without it");
                None
            }
        }
    }

    /// Where semantic recall searches, when it is set.
    pub fn recall_store(&self) -> Option<Arc<dyn RecallStore>> {
        self.inner
            .recall
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Sets where semantic recall keeps and searches its embeddings, and starts embedding the
    /// messages of the agents that have recall, off the request path, woken as messages are
    /// remembered (until [`AgentHub::shutdown`]). Call it once, inside the runtime.
    pub fn set_recall_store(&self, store: Arc<dyn RecallStore>) {
        *self.inner.recall.write().unwrap_or_else(|p| p.into_inner()) = Some(store.clone());
        let hub = Arc::downgrade(&self.inner);
        let agents: recall::RecallAgents = Arc::new(move || {
            let Some(inner) = hub.upgrade() else {
                return Vec::new();
            };
            let agents = inner.agents.read().unwrap_or_else(|p| p.into_inner());
            agents
                .iter()
                .filter_map(|a| Some((a.id.clone(), a.recall.as_ref()?.embedder().clone())))
                .collect()
        });
        tokio::spawn(recall::run_embedder(
            store,
            agents,
            self.inner.embed_wake.clone(),
            self.inner.background.child_token(),
            recall::EmbedderSettings::default(),
        ));
    }

    /// Stops the hub's background work (the embedding loop).
    pub fn shutdown(&self) {
        self.inner.background.cancel();
    }

    pub(super) async fn remember(
        &self,
        agent: &Agent,
        input: &[Message],
        answer: &str,
        opts: &GenerateOptions,
    ) -> Result<(), AgentError> {
        if let (Some(mem), Some(key)) = (&self.inner.memory, Self::key(agent, opts)) {
            let mut msgs: Vec<Message> = input
                .iter()
                .filter(|m| matches!(m.role, Role::User | Role::Assistant))
                .cloned()
                .collect();
            msgs.push(Message::assistant(answer));
            mem.append(&key, &msgs).await.map_err(memory_error)?;
            if agent.recall.is_some() {
                self.inner.embed_wake.notify_one();
            }
        }
        Ok(())
    }

    /// One model call (streamed into the generation's sink when it has one): the agent's model,
    /// then its fallback models in order while the failure is retryable (throttled, down, timed
    /// out) and nothing of the answer has reached the stream. The answer names the model that
    /// gave it; its text went through the output guardrails.
    pub(super) async fn model_step(
        &self,
        model: &dyn Model,
        req: &ModelRequest,
        g: &Generation<'_>,
        object_mode: bool,
    ) -> Result<ModelResponse, AgentError> {
        let mut streamed = false;
        let mut outcome = self
            .one_model_call(model, req, g, object_mode, &mut streamed)
            .await;
        for fallback in &g.agent.fallback_models {
            match &outcome {
                Err(AgentError::Model(e)) if e.kind.is_retryable() && !streamed => {
                    tracing::warn!(agent_id = %g.agent.id, fallback = %fallback.name(), error = %e, "the model failed: trying the next");
                    outcome = self
                        .one_model_call(fallback.as_ref(), req, g, object_mode, &mut streamed)
                        .await;
                }
                _ => break,
            }
        }
        if let Err(AgentError::GuardrailTripped(t)) = &outcome {
            self.report_trip(g.agent, t);
        }
        outcome
    }

    pub(super) fn report_trip(&self, agent: &Agent, t: &Tripped) {
        report_trip(self.telemetry().as_ref(), agent, t);
    }

    pub(super) fn report_rewrites(&self, agent: &Agent, applied: &Applied) {
        report_rewrites(self.telemetry().as_ref(), agent, applied);
    }

    /// The request's messages through the agent's input guardrails.
    pub(super) async fn guard_input(
        &self,
        agent: &Agent,
        input: &[Message],
    ) -> Result<Vec<Message>, AgentError> {
        let mut applied = Applied::default();
        match guardrail::apply_to_input(&agent.guardrails.input, input.to_vec(), &mut applied).await
        {
            Ok(input) => {
                self.report_rewrites(agent, &applied);
                Ok(input)
            }
            Err(t) => {
                self.report_trip(agent, &t);
                Err(AgentError::GuardrailTripped(t))
            }
        }
    }

    /// One model's call, in its span, reported to the telemetry; `streamed` is set once a piece
    /// of its answer reached the stream.
    async fn one_model_call(
        &self,
        model: &dyn Model,
        req: &ModelRequest,
        g: &Generation<'_>,
        object_mode: bool,
        streamed: &mut bool,
    ) -> Result<ModelResponse, AgentError> {
        let span = tracing::info_span!(
            "chat",
            otel.name = %format_args!("chat {}", model.name()),
            otel.kind = "client",
            gen_ai.operation.name = "chat",
            gen_ai.request.model = %model.name(),
            gen_ai.agent.name = %g.agent.id,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            gen_ai.response.finish_reasons = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let began = Instant::now();
        let outcome = {
            use tracing::Instrument;
            self.call_model(model, req, g, object_mode, streamed)
                .instrument(span.clone())
                .await
                .map(|mut r| {
                    r.model = Some(model.name().to_owned());
                    r
                })
        };
        if let Ok(r) = &outcome {
            self.count_usage(g, r.usage.total_tokens);
        }
        match &outcome {
            Ok(r) => {
                // Signed: OpenTelemetry's integer attributes are i64.
                span.record("gen_ai.usage.input_tokens", r.usage.prompt_tokens as i64);
                span.record(
                    "gen_ai.usage.output_tokens",
                    r.usage.completion_tokens as i64,
                );
                span.record(
                    "gen_ai.response.finish_reasons",
                    format!("[\"{}\"]", r.finish_reason.as_str()).as_str(),
                );
            }
            Err(e) => {
                span.record("otel.status_code", "ERROR");
                span.record("error.type", e.to_string().as_str());
            }
        }
        self.telemetry().model_call(&ModelCallReport {
            agent: &g.agent.id,
            model: model.name(),
            duration: began.elapsed(),
            tokens: outcome
                .as_ref()
                .ok()
                .map(|r| (r.usage.prompt_tokens, r.usage.completion_tokens)),
        });
        outcome
    }

    /// Asks the model once (streamed when the generation streams), until it finishes or the
    /// generation is cancelled.
    async fn call_model(
        &self,
        model: &dyn Model,
        req: &ModelRequest,
        g: &Generation<'_>,
        object_mode: bool,
        streamed: &mut bool,
    ) -> Result<ModelResponse, AgentError> {
        let (sink, cancel) = (g.sink, g.cancel);
        // An object is JSON for the client's schema: output guardrails read text.
        let guards: &[Arc<dyn Guardrail>] = if object_mode {
            &[]
        } else {
            &g.agent.guardrails.output
        };
        let tripped = |t: Tripped| AgentError::GuardrailTripped(t);
        let Some(tx) = sink else {
            let mut resp = tokio::select! {
                r = model.generate(req) => r.map_err(AgentError::Model),
                _ = cancel.cancelled() => Err(AgentError::Cancelled),
            }?;
            if !guards.is_empty() {
                let mut applied = Applied::default();
                let text = std::mem::take(&mut resp.text);
                resp.text = guardrail::apply(guards, GuardPoint::Output, text, &mut applied)
                    .await
                    .map_err(tripped)?;
                self.report_rewrites(g.agent, &applied);
            }
            return Ok(resp);
        };
        let mut guard = (!guards.is_empty()).then(|| StreamGuard::new(guards));
        let mut stream = model.stream(req).await.map_err(AgentError::Model)?;
        let mut text = String::new();
        let mut calls = Vec::new();
        let mut finish = (FinishReason::Stop, Usage::default());
        let mut last_partial: Option<Value> = None;
        let mut parsed_len = 0;
        loop {
            let chunk = tokio::select! {
                c = stream.next() => c,
                _ = tx.closed() => return Err(AgentError::Cancelled),
                _ = cancel.cancelled() => return Err(AgentError::Cancelled),
            };
            let Some(chunk) = chunk else { break };
            match chunk.map_err(AgentError::Model)? {
                ModelChunk::TextDelta(d) => {
                    text.push_str(&d);
                    if object_mode {
                        // Re-reading the whole document after every delta would be quadratic:
                        // read it again only once it has grown by a quarter (or a chunk).
                        if text.len() < parsed_len + (parsed_len / 4).max(8) {
                            continue;
                        }
                        parsed_len = text.len();
                        if let Some(p) = parse_partial(&text)
                            && last_partial.as_ref() != Some(&p)
                        {
                            last_partial = Some(p.clone());
                            *streamed = true;
                            emit(sink, AgentEvent::PartialObject(p)).await?;
                        }
                    } else {
                        let out = match guard.as_mut() {
                            Some(guard) => guard.push(&d).await.map_err(tripped)?,
                            None => d,
                        };
                        if !out.is_empty() {
                            *streamed = true;
                            emit(sink, AgentEvent::TextDelta(out)).await?;
                        }
                    }
                }
                ModelChunk::ToolCall(c) => calls.push(c),
                ModelChunk::Finish {
                    finish_reason,
                    usage,
                } => finish = (finish_reason, usage),
            }
        }
        if let Some(guard) = guard.as_mut() {
            let rest = guard.finish().await.map_err(tripped)?;
            if !rest.is_empty() {
                *streamed = true;
                emit(sink, AgentEvent::TextDelta(rest)).await?;
            }
            text = guard.text().to_owned();
            self.report_rewrites(g.agent, &guard.applied);
        }
        // The last partial object is the whole document, whatever the throttle skipped.
        if object_mode
            && parsed_len < text.len()
            && let Some(p) = parse_partial(&text)
            && last_partial.as_ref() != Some(&p)
        {
            emit(sink, AgentEvent::PartialObject(p)).await?;
        }
        Ok(ModelResponse {
            text,
            tool_calls: calls,
            finish_reason: finish.0,
            usage: finish.1,
            model: None,
        })
    }

    /// The loop shared by every text route, between the agent's start and end hooks.
    async fn run_text(&self, g: &Generation<'_>) -> Result<TextResult, AgentError> {
        let name = if g.sink.is_some() {
            "streamText"
        } else {
            "generateText"
        };
        let op = operation(g.agent, g.opts, name);
        let began = Instant::now();
        let outcome = {
            use tracing::Instrument;
            async {
                let input = self.guard_input(g.agent, g.input).await?;
                let limit = self.token_limit(g.agent, g.opts).await?;
                let g = Generation {
                    input: &input,
                    limit,
                    ..*g
                };
                let r = self.run_text_body(&g, &op).await?;
                // Scored later, of the input as guarded; the span is the generation's.
                self.score_later(&g, None, &r, began.elapsed(), &tracing::Span::current());
                Ok(r)
            }
            .instrument(generation_span(g.agent, name))
            .await
        };
        end_hook(g.agent, &op, outcome.as_ref().map(|r| r.text.as_str()));
        outcome
    }

    /// The generation loop, held in memory.
    async fn run_text_body(
        &self,
        g: &Generation<'_>,
        op: &OperationContext,
    ) -> Result<TextResult, AgentError> {
        let in_memory = InMemory {
            hub: self,
            tools: self.tools_of(g.agent, g.depth, Some(g.opts)),
        };
        let result = generation_loop(self.model_of(g.agent).as_ref(), g, op, &in_memory).await?;
        tracing::info!(agent_id = %g.agent.id, finish_reason = ?result.finish_reason, total_tokens = result.usage.total_tokens, "agent run finished");
        Ok(result)
    }

    /// Generates text in one piece.
    pub async fn generate_text(
        &self,
        agent_id: &AgentId,
        input: Vec<Message>,
        opts: GenerateOptions,
        cancel: CancellationToken,
    ) -> Result<TextResult, AgentError> {
        let agent = self.require(agent_id)?;
        self.run_text(&Generation::new(&agent, &input, &opts, None, &cancel))
            .await
    }

    /// Streams a text generation. The generation stops when the receiver is dropped (the
    /// client went away) or `cancel` fires.
    pub fn stream_text(
        &self,
        agent_id: &AgentId,
        input: Vec<Message>,
        opts: GenerateOptions,
        cancel: CancellationToken,
    ) -> Result<mpsc::Receiver<AgentEvent>, AgentError> {
        let agent = self.require(agent_id)?;
        let (tx, rx) = mpsc::channel(64);
        let hub = self.clone();
        tokio::spawn(async move {
            let outcome = hub
                .run_text(&Generation::new(&agent, &input, &opts, Some(&tx), &cancel))
                .await;
            let last = match outcome {
                Ok(r) => AgentEvent::Finish {
                    finish_reason: r.finish_reason,
                    usage: r.usage,
                    text: r.text,
                    object: None,
                },
                Err(AgentError::Cancelled) => {
                    tracing::info!(agent_id = %agent.id, "generation cancelled");
                    return;
                }
                Err(e) => AgentEvent::Error(e),
            };
            let _ = tx.send(last).await;
        });
        Ok(rx)
    }

    async fn run_object(
        &self,
        g: &Generation<'_>,
        schema: &Schema,
    ) -> Result<ObjectResult, AgentError> {
        let name = if g.sink.is_some() {
            "streamObject"
        } else {
            "generateObject"
        };
        let op = operation(g.agent, g.opts, name);
        let outcome = {
            use tracing::Instrument;
            async {
                let input = self.guard_input(g.agent, g.input).await?;
                self.token_limit(g.agent, g.opts).await?;
                let g = Generation {
                    input: &input,
                    ..*g
                };
                self.run_object_body(&g, schema).await
            }
            .instrument(generation_span(g.agent, name))
            .await
        };
        match &outcome {
            Ok(r) => end_hook(g.agent, &op, Ok(&r.object.to_string())),
            Err(e) => end_hook(g.agent, &op, Err(e)),
        }
        outcome
    }

    /// One model call in object mode, its answer read as JSON and validated against `schema`.
    async fn run_object_body(
        &self,
        g: &Generation<'_>,
        schema: &Schema,
    ) -> Result<ObjectResult, AgentError> {
        let model = self.model_of(g.agent);
        let messages = self.prepare(g.agent, g.input, g.opts).await?;
        let req = ModelRequest {
            messages,
            tools: Vec::new(),
            settings: g.opts.settings.clone(),
            output_schema: Some(schema.source().clone()),
        };
        let resp = self.model_step(model.as_ref(), &req, g, true).await?;
        let object: Value = serde_json::from_str(resp.text.trim()).map_err(|e| {
            AgentError::InvalidObject(format!("the model did not answer with JSON ({e})"))
        })?;
        schema
            .validate(&object)
            .map_err(AgentError::InvalidObject)?;
        self.remember(g.agent, g.input, &resp.text, g.opts).await?;
        Ok(ObjectResult {
            object,
            usage: resp.usage,
            finish_reason: resp.finish_reason,
        })
    }

    /// Generates an object valid against `schema`.
    pub async fn generate_object(
        &self,
        agent_id: &AgentId,
        input: Vec<Message>,
        schema: Value,
        opts: GenerateOptions,
        cancel: CancellationToken,
    ) -> Result<ObjectResult, AgentError> {
        let agent = self.require(agent_id)?;
        let schema = compile_object_schema(&schema)?;
        let g = Generation::new(&agent, &input, &opts, None, &cancel);
        self.run_object(&g, &schema).await
    }

    /// Streams partial objects, then a `Finish` carrying the validated object.
    pub fn stream_object(
        &self,
        agent_id: &AgentId,
        input: Vec<Message>,
        schema: Value,
        opts: GenerateOptions,
        cancel: CancellationToken,
    ) -> Result<mpsc::Receiver<AgentEvent>, AgentError> {
        let agent = self.require(agent_id)?;
        let schema = compile_object_schema(&schema)?;
        let (tx, rx) = mpsc::channel(64);
        let hub = self.clone();
        tokio::spawn(async move {
            let g = Generation::new(&agent, &input, &opts, Some(&tx), &cancel);
            let outcome = hub.run_object(&g, &schema).await;
            let last = match outcome {
                Ok(r) => AgentEvent::Finish {
                    finish_reason: r.finish_reason,
                    usage: r.usage,
                    text: r.object.to_string(),
                    object: Some(r.object),
                },
                Err(AgentError::Cancelled) => return,
                Err(e) => AgentEvent::Error(e),
            };
            let _ = tx.send(last).await;
        });
        Ok(rx)
    }
}

/// A client's object schema, compiled once: refused when it is not a valid JSON Schema or asks
/// for more than a model may generate (the limits of [`agentry_engine::schema::check_generation_limits`]).
fn compile_object_schema(schema: &Value) -> Result<Schema, AgentError> {
    let invalid = |e: String| AgentError::InvalidRequest(format!("schema: {e}"));
    agentry_engine::schema::check_generation_limits(schema).map_err(invalid)?;
    Schema::compile(schema.clone()).map_err(|e| invalid(e.to_string()))
}

/// The newest messages of `history` whose text fits in `max_bytes`, oldest first.
fn newest_within(history: Vec<Message>, max_bytes: usize) -> Vec<Message> {
    let mut total = 0;
    let keep = history
        .iter()
        .rev()
        .take_while(|m| {
            total += m.content.len();
            total <= max_bytes
        })
        .count();
    let skip = history.len() - keep;
    history.into_iter().skip(skip).collect()
}

/// The operation context of one run; fires the agent's start hook.
pub(super) fn operation(
    agent: &Agent,
    opts: &GenerateOptions,
    name: &'static str,
) -> OperationContext {
    let op = OperationContext {
        agent_id: agent.id.clone(),
        operation: name,
        user_id: opts.caller_id().map(str::to_owned),
        conversation_id: opts.conversation_id.clone(),
        context: opts.context.clone(),
    };
    if let Some(f) = &agent.hooks.on_start {
        f(&op);
    }
    op
}

/// Fires the end hook, unless the run was cancelled (nobody is there to see its end).
pub(super) fn end_hook(agent: &Agent, op: &OperationContext, outcome: Result<&str, &AgentError>) {
    let Some(f) = &agent.hooks.on_end else {
        return;
    };
    match outcome {
        Ok(text) => f(op, Ok(text)),
        Err(AgentError::Cancelled) => {}
        Err(e) => f(op, Err(&e.to_string())),
    }
}

/// `delegate_task`: runs a sub-agent on a task and returns `{agent, text}`.
struct DelegateTool {
    hub: Weak<Inner>,
    allowed: Vec<String>,
    parameters: Value,
    depth: u32,
    /// Whose memory the delegating generation reads: the sub-agent's is the same user's.
    owner: MemoryOwner,
}

impl DelegateTool {
    fn new(hub: Weak<Inner>, allowed: Vec<String>, depth: u32, owner: MemoryOwner) -> Self {
        let parameters = json!({
            "type": "object",
            "properties": {
                "agent": {"type": "string", "enum": allowed},
                "task": {"type": "string"}
            },
            "required": ["agent", "task"]
        });
        Self {
            hub,
            allowed,
            parameters,
            depth,
            owner,
        }
    }
}

#[async_trait]
impl Tool for DelegateTool {
    fn name(&self) -> &str {
        "delegate_task"
    }

    fn description(&self) -> &str {
        "Hands a task to one of this agent's sub-agents and returns its answer."
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    async fn call(&self, args: Value, ctx: ToolContext) -> Result<Value, String> {
        let agent_id = args
            .get("agent")
            .and_then(Value::as_str)
            .ok_or("`agent` is required")?;
        let task = args
            .get("task")
            .and_then(Value::as_str)
            .ok_or("`task` is required")?;
        if !self.allowed.iter().any(|a| a == agent_id) {
            return Err(format!(
                "{agent_id} is not a sub-agent (choose one of: {})",
                self.allowed.join(", ")
            ));
        }
        if self.depth >= MAX_DELEGATION_DEPTH {
            return Err("delegation is nested too deeply".into());
        }
        let hub = AgentHub {
            inner: self.hub.upgrade().ok_or("the agent hub is gone")?,
        };
        let agent = hub.required(agent_id).map_err(|e| e.to_string())?;
        let opts = GenerateOptions {
            user_id: ctx.user_id.as_ref().map(UserId::from),
            // A sub-agent keeps no conversation of its own for a delegated task.
            conversation_id: None,
            context: ctx.context.clone(),
            memory_owner: self.owner.clone(),
            ..GenerateOptions::default()
        };
        let input = [Message::user(task)];
        let g = Generation {
            depth: self.depth + 1,
            ..Generation::new(&agent, &input, &opts, None, &ctx.cancel)
        };
        let r = hub.run_text(&g).await.map_err(|e| e.to_string())?;
        Ok(json!({"agent": agent_id, "text": r.text}))
    }
}

/// Runs agents for `andAgent` workflow steps.
#[async_trait]
impl AgentRunner for AgentHub {
    async fn run_agent(
        &self,
        agent_id: &str,
        prompt: Value,
        context: &Map<String, Value>,
        cancel: CancellationToken,
    ) -> Result<Value, String> {
        let text = match prompt {
            Value::String(s) => s,
            other => other.to_string(),
        };
        let opts = GenerateOptions {
            user_id: context
                .get("userId")
                .and_then(Value::as_str)
                .map(UserId::from),
            context: context.clone(),
            ..GenerateOptions::default()
        };
        let r = self
            .generate_text(
                &AgentId::from(agent_id),
                vec![Message::user(text)],
                opts,
                cancel,
            )
            .await
            .map_err(|e| e.to_string())?;
        Ok(Value::String(r.text))
    }
}

/// A generation held in memory: its events go to its stream as they come.
struct InMemory<'a> {
    hub: &'a AgentHub,
    tools: Vec<Arc<dyn Tool>>,
}

impl Recorder for InMemory<'_> {
    type Error = AgentError;

    fn tools(&self) -> &[Arc<dyn Tool>] {
        &self.tools
    }

    async fn history(&self, g: &Generation<'_>) -> Result<Vec<Message>, AgentError> {
        self.hub.prepare(g.agent, g.input, g.opts).await
    }

    async fn model_call(
        &self,
        g: &Generation<'_>,
        model: &dyn Model,
        req: &ModelRequest,
        _call: u32,
    ) -> Result<ModelResponse, AgentError> {
        self.hub.model_step(model, req, g, false).await
    }

    async fn tool_calls(
        &self,
        g: &Generation<'_>,
        op: &OperationContext,
        _call: u32,
        calls: &[ToolCall],
    ) -> Result<Vec<ToolResult>, AgentError> {
        for c in calls {
            emit(g.sink, AgentEvent::ToolCall(c.clone())).await?;
        }
        if g.is_cancelled() {
            return Err(AgentError::Cancelled);
        }
        let results = call_tools(g, op, &self.tools, calls, self.hub.telemetry().as_ref()).await?;
        for r in &results {
            emit(g.sink, AgentEvent::ToolResult(r.clone())).await?;
        }
        Ok(results)
    }

    async fn remember(&self, g: &Generation<'_>, text: &str) -> Result<(), AgentError> {
        self.hub.remember(g.agent, g.input, text, g.opts).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::InMemoryConversationStore;
    use crate::offline::OfflineModel;
    use crate::tool::FnTool;

    fn hub() -> AgentHub {
        let hub = AgentHub::new(
            Arc::new(OfflineModel),
            Some(Arc::new(InMemoryConversationStore::default())),
        );
        let weather = FnTool::new(
            "get_weather",
            "weather",
            json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
            |args, _| async move {
                Ok(json!({"city": args["city"], "temperatureC": 21, "condition": "sunny"}))
            },
        );
        hub.register(
            Agent::new("a", "A")
                .tool(Arc::new(weather))
                .memory(Default::default()),
        )
        .unwrap();
        hub.register(Agent::new("w", "W")).unwrap();
        hub.register(Agent::new("s", "S").sub_agent("w")).unwrap();
        hub
    }

    #[tokio::test]
    async fn hooks_see_the_operation_its_user_and_its_tools() {
        let log = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let (a, b, c, d) = (log.clone(), log.clone(), log.clone(), log.clone());
        let weather = FnTool::new(
            "get_weather",
            "weather",
            json!({"type": "object"}),
            |_, _| async { Ok(json!({"temperatureC": 21, "condition": "sunny"})) },
        );
        let hub = AgentHub::new(Arc::new(OfflineModel), None);
        hub.register(
            Agent::new("h", "H")
                .tool(Arc::new(weather))
                .on_start(move |op| {
                    a.lock().unwrap().push(format!(
                        "start {} {:?} {}",
                        op.operation,
                        op.user_id,
                        op.user().map(|u| u["name"].to_string()).unwrap_or_default()
                    ))
                })
                .on_tool_start(move |_, name, args| {
                    b.lock().unwrap().push(format!("tool {name} {args}"))
                })
                .on_tool_end(move |_, name, result, err| {
                    c.lock()
                        .unwrap()
                        .push(format!("tool-end {name} {} {err}", result["condition"]))
                })
                .on_end(move |op, out| {
                    d.lock()
                        .unwrap()
                        .push(format!("end {:?} {}", op.user_id, out.is_ok()))
                }),
        )
        .unwrap();
        let mut opts = GenerateOptions::default();
        opts.context
            .insert("user".into(), json!({"id": "u1", "name": "Ada"}));
        opts.user_id = Some("u1".into());
        hub.generate_text(
            &"h".into(),
            vec![Message::user("weather in Oslo")],
            opts,
            CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(
            *log.lock().unwrap(),
            [
                r#"start generateText Some("u1") "Ada""#,
                r#"tool get_weather {"city":"Oslo"}"#,
                r#"tool-end get_weather "sunny" false"#,
                r#"end Some("u1") true"#,
            ]
        );
    }

    #[tokio::test]
    async fn tool_loop_feeds_results_back() {
        let r = hub()
            .generate_text(
                &"a".into(),
                vec![Message::user("weather in Oslo?")],
                GenerateOptions::default(),
                CancellationToken::new(),
            )
            .await
            .unwrap();
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.tool_results[0].result["city"], "Oslo");
        assert!(r.text.contains("sunny"), "{}", r.text);
        assert_eq!(r.finish_reason, FinishReason::Stop);
    }

    #[tokio::test]
    async fn delegation_runs_the_sub_agent() {
        let r = hub()
            .generate_text(
                &"s".into(),
                vec![Message::user("ask w to say hi")],
                GenerateOptions::default(),
                CancellationToken::new(),
            )
            .await
            .unwrap();
        assert_eq!(
            r.tool_results[0].result,
            json!({"agent": "w", "text": "You said: say hi"})
        );
        assert!(r.text.contains("You said: say hi"));
    }

    #[tokio::test]
    async fn memory_is_per_conversation() {
        let h = hub();
        let opts = |c: &str| GenerateOptions {
            user_id: Some("u".into()),
            conversation_id: Some(c.into()),
            ..GenerateOptions::default()
        };
        h.generate_text(
            &"a".into(),
            vec![Message::user("first")],
            opts("c1"),
            CancellationToken::new(),
        )
        .await
        .unwrap();
        let agent = h.require(&"a".into()).unwrap();
        let msgs = h.prepare(&agent, &[], &opts("c1")).await.unwrap();
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        let msgs = h.prepare(&agent, &[], &opts("c2")).await.unwrap();
        assert!(msgs.is_empty());
    }

    #[tokio::test]
    async fn working_memory_is_kept_per_user_and_shown_to_the_model() {
        use crate::working_memory::{WorkingMemory, WorkingMemoryScope};
        let h = hub();
        let memory = WorkingMemory::schema(
            WorkingMemoryScope::User,
            json!({"type": "object", "properties": {"city": {"type": "string"}, "units": {"enum": ["metric", "imperial"]}}, "additionalProperties": false}),
        )
        .unwrap();
        h.register(Agent::new("m", "M").working_memory(memory))
            .unwrap();
        let agent = h.require(&"m".into()).unwrap();
        assert!(
            h.tool_names(&agent)
                .contains(&"update_working_memory".to_owned())
        );
        let id: AgentId = "m".into();
        let ask = |user: &str, conversation: &str, text: &str| {
            let opts = GenerateOptions {
                user_id: Some(user.into()),
                conversation_id: Some(conversation.into()),
                ..GenerateOptions::default()
            };
            h.generate_text(
                &id,
                vec![Message::user(text)],
                opts,
                CancellationToken::new(),
            )
        };
        let r = ask("u1", "c1", "remember that I prefer metric units in Paris")
            .await
            .unwrap();
        assert_eq!(r.text, "Noted: Paris, metric.");
        let r = ask("u1", "c2", "what do you know about me").await.unwrap();
        assert_eq!(r.text, "You prefer metric units in Paris.");
        let r = ask("u2", "c1", "what do you know about me").await.unwrap();
        assert_eq!(r.text, "Nothing yet.");
        // The schema refuses what it does not allow: the model reads the tool's failure.
        let r = ask("u2", "c1", "remember that I prefer kelvin units in Oslo")
            .await
            .unwrap();
        assert!(r.tool_results[0].is_error, "{r:?}");
        assert!(r.text.contains("does not match its schema"), "{}", r.text);
    }

    #[tokio::test]
    async fn a_delegated_task_keeps_the_callers_working_memory() {
        use crate::working_memory::{WorkingMemory, WorkingMemoryKey, WorkingMemoryScope};
        let h = hub();
        let memory =
            WorkingMemory::schema(WorkingMemoryScope::User, json!({"type": "object"})).unwrap();
        h.register(Agent::new("m", "M").working_memory(memory))
            .unwrap();
        h.register(Agent::new("boss", "Boss").sub_agent("m"))
            .unwrap();
        let boss = AgentId::from("boss");
        let ask = |owner: MemoryOwner| {
            let opts = GenerateOptions {
                user_id: Some("u1".into()),
                memory_owner: owner,
                ..GenerateOptions::default()
            };
            h.generate_text(
                &boss,
                vec![Message::user(
                    "ask m to remember that I prefer metric units in Paris",
                )],
                opts,
                CancellationToken::new(),
            )
        };
        let key = |user: &str| WorkingMemoryKey {
            agent_id: "m".into(),
            user_id: user.into(),
            conversation_id: None,
        };
        let r = ask(MemoryOwner::Verified("u1".into())).await.unwrap();
        assert!(r.text.contains("Noted: Paris, metric."), "{}", r.text);
        let kept = h.working_memory(&key("user:u1")).await.unwrap();
        assert_eq!(
            kept.unwrap().value,
            json!({"city": "Paris", "units": "metric"})
        );
        // Never the unverified namespace of the same name, and nothing for an anonymous caller.
        assert_eq!(h.working_memory(&key("u1")).await.unwrap(), None);
        let r = ask(MemoryOwner::Anonymous).await.unwrap();
        assert!(r.text.contains("has no working memory"), "{}", r.text);
        assert_eq!(h.working_memory(&key("u1")).await.unwrap(), None);
    }

    #[tokio::test]
    async fn streamed_objects_grow_and_end_valid() {
        let schema = json!({"type": "object", "properties": {"title": {"type": "string"}, "n": {"type": "integer"}}, "required": ["title", "n"]});
        let mut rx = hub()
            .stream_object(
                &"w".into(),
                vec![Message::user("x")],
                schema,
                GenerateOptions::default(),
                CancellationToken::new(),
            )
            .unwrap();
        let mut partials = 0;
        let mut last = None;
        while let Some(ev) = rx.recv().await {
            match ev {
                AgentEvent::PartialObject(_) => partials += 1,
                AgentEvent::Finish { object, .. } => last = object,
                other => panic!("{other:?}"),
            }
        }
        assert!(partials >= 2);
        assert_eq!(last.unwrap(), json!({"title": "example title", "n": 1}));
    }
}
