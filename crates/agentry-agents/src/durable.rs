//! Durable agent runs: the generation loop as an execution of the engine, each model call and
//! each tool call recorded as it ends, so that a crash, a takeover or a resume replays what is
//! recorded and does again only the call that was in flight.
//!
//! Each agent has a run workflow (`agent:<agent id>`, [`run_workflow_id`]) of one step, `run`,
//! whose journal ([`agentry_engine::workflow::StepJournal`]) holds the run's calls:
//!
//! - `run/model-<k>`: the k-th model call's answer (`input`: for the first, the messages it was
//!   sent, memory included, so that a replay sends the next ones from the same history);
//! - `run/tool-<k>-<i>`: the i-th tool call of that answer: started (with its attempt) in the
//!   write that records the answer, finished (its result) in a write of its own;
//! - `run/approval-<k>-<i>`: a tool call that waits for a person's approval (its
//!   [`ApprovalRequest`]), then its [`ApprovalAnswer`].
//!
//! Leases, fencing, takeover, the SIGTERM hand-off and the event log are the engine's, unchanged.
//! A tool call that needs approval suspends the run (reason `Tool approval required: <tool>`,
//! with a deadline when the tool's rule has one); nothing runs the tool until the answer for
//! that very call is stored; an answer resumes the run (the engine's resume: of two racing
//! answers one wins), a denial or the deadline becomes the tool's result and the model goes on.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures::future::join_all;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::definition::Agent;
use super::generation::{
    AgentError, AgentEvent, GenerateOptions, Generation, MemoryOwner, TextResult,
};
use super::generation::{Recorder, generation_loop};
use super::message::{Message, ToolCall, ToolResult};
use super::model::{GenerationSettings, ModelRequest, ModelResponse};
use super::runtime::{AgentHub, generation_span, observed_call, operation};
use super::tool::Tool;
use agentry_engine::event::EventKind;

use crate::run_log::{ApprovalAnswer, ApprovalRequest, RUN_STEP, RunFailure};
use crate::run_log::{EntryKind, RunEvent, approval_id};
use agentry_engine::id::{UserId, WorkflowId};
use agentry_engine::store::{StepRecord, StepStatus};
use agentry_engine::workflow::{StepContext, StepError, StepJournal, Workflow, step};

/// The namespace of the run workflows: internal workflows `agent:<agent id>`.
const RUN_NAMESPACE: &str = "agent";

/// The id of the workflow that runs `agent_id`'s durable runs.
pub fn run_workflow_id(agent_id: &str) -> WorkflowId {
    agentry_engine::id::internal_workflow_id(RUN_NAMESPACE, agent_id)
}

/// The agent whose runs the workflow `workflow_id` holds (none for a workflow of a host).
pub fn agent_of_run(workflow_id: &str) -> Option<&str> {
    agentry_engine::id::internal_parts(workflow_id)
        .filter(|(namespace, _)| *namespace == RUN_NAMESPACE)
        .map(|(_, agent)| agent)
}

/// What the reason of an expired approval says.
pub const EXPIRED_REASON: &str = "nobody answered before the approval deadline";

/// What a durable run is started with: the execution's input (the same id with the same input
/// rejoins the run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunInput {
    pub messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    pub context_limit: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
    pub settings: GenerationSettings,
    /// Stored as `caller`, its name before it was the memory owner.
    #[serde(rename = "caller")]
    pub memory_owner: MemoryOwner,
    /// The model's text is streamed to the run's live subscribers as it comes.
    #[serde(default)]
    pub stream: bool,
}

impl RunInput {
    /// The input of a run of `messages` with `opts`.
    pub fn new(messages: Vec<Message>, opts: &GenerateOptions, stream: bool) -> Self {
        Self {
            messages,
            user_id: opts.user_id.clone().map(UserId::into_string),
            conversation_id: opts.conversation_id.clone(),
            context_limit: opts.context_limit,
            max_steps: opts.max_steps,
            settings: opts.settings.clone(),
            memory_owner: opts.memory_owner.clone(),
            stream,
        }
    }

    /// The options it stands for, with the execution's context map.
    pub fn options(&self, context: &Map<String, Value>) -> GenerateOptions {
        GenerateOptions {
            user_id: self.user_id.clone().map(UserId::from),
            conversation_id: self.conversation_id.clone(),
            context_limit: self.context_limit,
            max_steps: self.max_steps,
            settings: self.settings.clone(),
            context: context.clone(),
            memory_owner: self.memory_owner.clone(),
        }
    }
}

/// What the resume of a run carries: answers to its pending approvals (`approvals`, each
/// `{approvalId, approved, reason?, by?}`).
pub fn resume_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "approvals": {
                "type": "array",
                "minItems": 1,
                "maxItems": 100,
                "items": {
                    "type": "object",
                    "properties": {
                        "approvalId": {"type": "string", "maxLength": 128},
                        "approved": {"type": "boolean"},
                        "reason": {"type": "string", "maxLength": 2000},
                        "by": {"type": "string", "maxLength": 256}
                    },
                    "required": ["approvalId", "approved"]
                }
            }
        },
        "required": ["approvals"]
    })
}

/// The resume data that answers approvals.
pub fn resume_data(answers: &[ApprovalAnswer]) -> Value {
    json!({ "approvals": answers })
}

/// How one tool call of a round ended, or why it has not.
enum CallOutcome {
    Done(ToolResult),
    Pending(ApprovalRequest),
}

/// What the approval of a call lets happen.
enum Gate {
    /// No answer yet.
    Pending(ApprovalRequest),
    /// Denied (or expired): the denial is the call's result.
    Denied(ToolResult),
    /// The call runs as this attempt (`approved`: a person approved it).
    Run { attempt: u32, approved: bool },
}

/// A generation's failure as its step's: the failure itself is the step's output
/// ([`RunFailure`]), so the run answers with its code.
fn failed(e: AgentError) -> StepError {
    match e {
        AgentError::Cancelled => StepError::Cancelled,
        other => StepError::Fault {
            message: other.to_string(),
            details: Box::new(stored(&RunFailure::from(&other))),
        },
    }
}

/// A generation's failure fails the run's step (a cancellation stops it).
impl From<AgentError> for StepError {
    fn from(e: AgentError) -> Self {
        failed(e)
    }
}

fn stored<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn read<T: for<'de> Deserialize<'de>>(value: Option<&Value>, what: &str) -> Result<T, StepError> {
    let value = value.ok_or_else(|| StepError::failed(format!("the run's {what} is missing")))?;
    serde_json::from_value(value.clone())
        .map_err(|e| StepError::failed(format!("the run's {what} is unreadable: {e}")))
}

/// A finished journal record.
fn finished_record(ctx: &StepContext, input: Value, output: Value, attempt: u32) -> StepRecord {
    let now = ctx.now();
    StepRecord::started(input, attempt, now).finished(output, true, now)
}

/// A completed run's result: the `run` step's output, which is the execution's result.
pub fn run_result(result: &Value) -> Option<TextResult> {
    serde_json::from_value(result.clone()).ok()
}

/// Whether a tool result is a denial: a call a person (or the deadline) did not approve, which
/// did not run.
pub fn is_denial(result: &ToolResult) -> bool {
    result.is_error && result.result.get("denied") == Some(&Value::Bool(true))
}

/// What the model is told of a denied call.
fn denial(tool: Option<&Arc<dyn Tool>>, call: &ToolCall, answer: &ApprovalAnswer) -> ToolResult {
    let reason = answer
        .reason
        .clone()
        .filter(|r| !r.trim().is_empty())
        .unwrap_or_else(|| "no reason given".to_owned());
    let prefix = tool
        .and_then(|t| t.approval())
        .and_then(|a| a.denial.clone())
        .unwrap_or_else(|| format!("Tool call {} not approved", call.tool_name));
    ToolResult {
        tool_call_id: call.tool_call_id.clone(),
        tool_name: call.tool_name.clone(),
        args: call.args.clone(),
        result: json!({"error": format!("{prefix}: {reason}"), "denied": true, "reason": reason}),
        is_error: true,
    }
}

/// One run of the `run` step: what it replays and what it does.
struct DurableRun<'a> {
    hub: &'a AgentHub,
    ctx: &'a StepContext,
    journal: &'a dyn StepJournal,
    tools: Vec<Arc<dyn Tool>>,
}

impl AgentHub {
    /// The workflow that holds `agent`'s durable runs (register it with the engine).
    pub fn run_workflow(&self, agent: &Agent) -> Workflow {
        let hub = self.clone();
        let agent_id = agent.id.clone();
        Workflow::new(run_workflow_id(&agent.id).into_string(), agent.name.clone())
            .purpose(format!("Durable runs of the agent {}", agent.id))
            .internal()
            .resume_schema(resume_schema())
            .and_then(step(RUN_STEP, move |ctx| {
                let hub = hub.clone();
                let agent_id = agent_id.clone();
                async move { hub.run_durable(&agent_id, ctx).await }
            }))
            .build()
            .expect("a registered agent's id makes a valid run workflow")
    }

    /// The `run` step: the generation loop, replaying the journal's calls and recording new
    /// ones; its output is the [`TextResult`].
    async fn run_durable(&self, agent_id: &str, ctx: StepContext) -> Result<Value, StepError> {
        let agent = self.required(agent_id).map_err(failed)?;
        let input: RunInput = read(Some(ctx.workflow_input.as_ref()), "input")?;
        let opts = input.options(&ctx.context);
        let journal = ctx
            .journal()
            .cloned()
            .ok_or_else(|| StepError::failed("a durable run needs the engine's journal"))?;
        // The tools' progress goes to the run's live subscribers as it comes (the model's text
        // too: see `DurableRun::ask_model`).
        let (tx, forward) = if input.stream {
            let (tx, mut rx) = mpsc::channel::<AgentEvent>(64);
            let j = journal.clone();
            let forward = tokio::spawn(async move {
                while let Some(ev) = rx.recv().await {
                    if let AgentEvent::ToolProgress {
                        tool_call_id,
                        tool_name,
                        data,
                    } = ev
                    {
                        j.announce(
                            RunEvent::AgentToolProgress {
                                tool_call_id,
                                tool_name,
                                data,
                            }
                            .into(),
                        );
                    }
                }
            });
            (Some(tx), Some(forward))
        } else {
            (None, None)
        };
        let name = if input.stream {
            "streamText"
        } else {
            "generateText"
        };
        let op = operation(&agent, &opts, name);
        // The input guardrails again on every run of the step (they decide the same).
        let messages = match self.guard_input(&agent, &input.messages).await {
            Ok(m) => m,
            Err(e) => {
                drop(tx);
                return Err(self.run_failed(&ctx, journal.as_ref(), e).await);
            }
        };
        let limit = match self.token_limit(&agent, &opts).await {
            Ok(limit) => limit,
            Err(e) => {
                drop(tx);
                return Err(self.run_failed(&ctx, journal.as_ref(), e).await);
            }
        };
        let g = Generation {
            limit,
            ..Generation::new(&agent, &messages, &opts, tx.as_ref(), &ctx.cancel)
        };
        let run = DurableRun {
            hub: self,
            ctx: &ctx,
            journal: journal.as_ref(),
            tools: self.tools_of(&agent, 0, Some(&opts)),
        };
        let began = std::time::Instant::now();
        let span = generation_span(&agent, name);
        let outcome = {
            use tracing::Instrument;
            run.generate(&g, &op).instrument(span.clone()).await
        };
        if let Ok(r) = &outcome {
            let run_id = Some(ctx.execution_id.as_str());
            self.score_later(&g, run_id, r, began.elapsed(), &span);
        }
        drop(tx);
        if let Some(forward) = forward {
            let _ = forward.await;
        }
        let outcome = match outcome {
            Err(StepError::Fault { message, details }) => Err(self
                .announce_failure(&ctx, journal.as_ref(), message, details)
                .await),
            other => other,
        };
        if let Some(f) = &agent.hooks.on_end {
            match &outcome {
                Ok(r) => f(&op, Ok(&r.text)),
                Err(StepError::Failed(e) | StepError::Fault { message: e, .. }) => f(&op, Err(e)),
                Err(_) => {}
            }
        }
        outcome.map(|r| stored(&r))
    }
}

impl AgentHub {
    /// A run that failed before its loop (`e`): its failure, announced.
    async fn run_failed(
        &self,
        ctx: &StepContext,
        journal: &dyn StepJournal,
        e: AgentError,
    ) -> StepError {
        match failed(e) {
            StepError::Fault { message, details } => {
                self.announce_failure(ctx, journal, message, details).await
            }
            other => other,
        }
    }

    /// Writes the run's `agent-failed` event (so that a stream of the run ends with the
    /// failure's code), then fails the step with it.
    async fn announce_failure(
        &self,
        ctx: &StepContext,
        journal: &dyn StepJournal,
        message: String,
        details: Box<Value>,
    ) -> StepError {
        if let Ok(failure) = serde_json::from_value::<RunFailure>((*details).clone()) {
            let event = RunEvent::AgentFailed { failure }.into();
            if let Err(e) = journal.write(Vec::new(), vec![event]).await {
                tracing::debug!(run_id = %ctx.execution_id, error = ?e, "the run's failure event was not written");
            }
        }
        StepError::Fault { message, details }
    }
}

/// A durable run: each call journaled as it ends, replayed after a crash, a hand-off or a
/// resume.
impl Recorder for DurableRun<'_> {
    type Error = StepError;

    fn tools(&self) -> &[Arc<dyn Tool>] {
        &self.tools
    }

    /// The first call's recorded messages, or the instructions, the memory and the request.
    async fn history(&self, g: &Generation<'_>) -> Result<Vec<Message>, StepError> {
        let first = self.journal.entry(&EntryKind::ModelCall.key(1, None)).await;
        match first {
            Some(r) if r.is_finished() => read(Some(&r.input), "history"),
            _ => {
                self.patiently(|| self.hub.prepare(g.agent, g.input, g.opts))
                    .await
            }
        }
    }

    async fn model_call(
        &self,
        g: &Generation<'_>,
        model: &dyn super::model::Model,
        req: &ModelRequest,
        call: u32,
    ) -> Result<ModelResponse, StepError> {
        // The first call's record holds the messages it was sent, memory included: a replay
        // sends the next ones from the same history.
        let history = (call == 1).then(|| stored(&req.messages));
        self.recorded_model_call(g, model, req, call, history).await
    }

    /// Each call's recorded result, approval answer or pending request, or its run; the run
    /// suspends while any waits for approval.
    async fn tool_calls(
        &self,
        g: &Generation<'_>,
        op: &super::definition::OperationContext,
        call: u32,
        calls: &[ToolCall],
    ) -> Result<Vec<ToolResult>, StepError> {
        if g.is_cancelled() {
            return Err(StepError::Cancelled);
        }
        let outcomes = join_all(
            calls
                .iter()
                .enumerate()
                .map(|(i, c)| self.tool_call(g, op, call, i, c)),
        )
        .await;
        let mut results = Vec::new();
        let mut pending = Vec::new();
        for outcome in outcomes {
            match outcome? {
                CallOutcome::Done(r) => results.push(r),
                CallOutcome::Pending(p) => pending.push(p),
            }
        }
        if !pending.is_empty() {
            return Err(self.wait_for(pending));
        }
        Ok(results)
    }

    async fn remember(&self, g: &Generation<'_>, text: &str) -> Result<(), StepError> {
        self.patiently(|| self.hub.remember(g.agent, g.input, text, g.opts))
            .await
    }
}

impl DurableRun<'_> {
    async fn generate(
        &self,
        g: &Generation<'_>,
        op: &super::definition::OperationContext,
    ) -> Result<TextResult, StepError> {
        let result = generation_loop(self.hub.model_of(g.agent).as_ref(), g, op, self).await?;
        tracing::info!(agent_id = %g.agent.id, run_id = %self.ctx.execution_id, finish_reason = ?result.finish_reason, total_tokens = result.usage.total_tokens, "durable agent run finished");
        Ok(result)
    }

    /// Memory's reads and writes wait for the database as the run's own writes do: a memory
    /// that fails (down, or refusing a statement) never fails the run. A shutdown meanwhile
    /// hands the run over.
    async fn patiently<T, Fut>(&self, work: impl Fn() -> Fut) -> Result<T, StepError>
    where
        Fut: std::future::Future<Output = Result<T, AgentError>>,
    {
        let mut pause = std::time::Duration::from_millis(50);
        loop {
            match work().await {
                Err(e @ (AgentError::MemoryUnavailable(_) | AgentError::Memory(_))) => {
                    if self.journal.draining() {
                        return Err(StepError::Cancelled);
                    }
                    tracing::warn!(run_id = %self.ctx.execution_id, error = %e, "conversation memory failed: trying again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(std::time::Duration::from_secs(2));
                }
                other => return other.map_err(failed),
            }
        }
    }

    /// The model call number `call`: its recorded answer, or a new one, recorded with the
    /// start of the tool calls it asks for (and the approvals they wait for). The last call's
    /// record is written with the run's end.
    async fn recorded_model_call(
        &self,
        g: &Generation<'_>,
        model: &dyn super::model::Model,
        req: &ModelRequest,
        call: u32,
        history: Option<Value>,
    ) -> Result<ModelResponse, StepError> {
        let key = EntryKind::ModelCall.key(call, None);
        if let Some(r) = self.journal.entry(&key).await.filter(|r| r.is_finished()) {
            return read(r.output.as_ref(), "model answer");
        }
        // A shutdown hands the run over between calls (the next process makes this one).
        if self.journal.draining() {
            return Err(StepError::Cancelled);
        }
        let resp = self.ask_model(g, model, req).await.map_err(failed)?;
        let mut entries = vec![(
            key,
            finished_record(self.ctx, history.unwrap_or(Value::Null), stored(&resp), 1),
        )];
        let mut events = vec![
            RunEvent::AgentModelCall {
                call,
                text: resp.text.clone(),
                tool_calls: resp.tool_calls.clone(),
                usage: resp.usage,
                finish_reason: resp.finish_reason,
            }
            .into(),
        ];
        if resp.tool_calls.is_empty() {
            self.journal.defer(entries, events);
            return Ok(resp);
        }
        for (i, c) in resp.tool_calls.iter().enumerate() {
            match self.approval_rule(c) {
                Some(within) => {
                    let request = ApprovalRequest {
                        approval_id: approval_id(call, i),
                        tool_call_id: c.tool_call_id.clone(),
                        tool_name: c.tool_name.clone(),
                        args: c.args.clone(),
                        deadline: within.and_then(|d| {
                            chrono::Duration::from_std(d)
                                .ok()
                                .map(|d| self.ctx.now() + d)
                        }),
                    };
                    let mut pending = StepRecord::started(stored(&request), 1, self.ctx.now());
                    pending.status = StepStatus::Suspended;
                    entries.push((EntryKind::Approval.key(call, Some(i)), pending));
                    events.push(RunEvent::AgentApprovalRequest { request }.into());
                }
                None => entries.push((
                    EntryKind::ToolCall.key(call, Some(i)),
                    self.tool_start(c, 1),
                )),
            }
        }
        self.journal.write(entries, events).await?;
        Ok(resp)
    }

    /// Asks the model once. A streamed run announces the model's text to its live subscribers
    /// as it comes, every piece before this answers: before the call's record is written, so a
    /// subscriber sees a call's text, then its record, never a piece of it after.
    async fn ask_model(
        &self,
        g: &Generation<'_>,
        model: &dyn super::model::Model,
        req: &ModelRequest,
    ) -> Result<ModelResponse, AgentError> {
        if !g.streams() {
            return self.hub.model_step(model, req, g, false).await;
        }
        let (tx, mut rx) = mpsc::channel::<AgentEvent>(64);
        let ask = async move {
            let streamed = g.with_sink(&tx);
            self.hub.model_step(model, req, &streamed, false).await
        };
        let announce = async {
            while let Some(ev) = rx.recv().await {
                if let AgentEvent::TextDelta(delta) = ev {
                    self.journal
                        .announce(RunEvent::AgentTextDelta { delta }.into());
                }
            }
        };
        tokio::join!(ask, announce).0
    }

    /// Whether `c` waits for approval, and the rule's deadline.
    fn approval_rule(&self, c: &ToolCall) -> Option<Option<std::time::Duration>> {
        let tool = self.tools.iter().find(|t| t.name() == c.tool_name)?;
        let rule = tool.approval()?;
        rule.applies(&c.args).then_some(rule.deadline)
    }

    /// The record of a tool call that starts its `attempt`.
    fn tool_start(&self, c: &ToolCall, attempt: u32) -> StepRecord {
        let input = json!({"call": c, "stepAttempt": self.ctx.attempt});
        StepRecord::started(input, attempt, self.ctx.now())
    }

    /// The i-th tool call of model call `call`: its recorded result; or, for a call that waits
    /// for approval, its answer (recorded first) or its pending request; else it runs.
    async fn tool_call(
        &self,
        g: &Generation<'_>,
        op: &super::definition::OperationContext,
        call: u32,
        i: usize,
        c: &ToolCall,
    ) -> Result<CallOutcome, StepError> {
        let key = EntryKind::ToolCall.key(call, Some(i));
        let recorded = self.journal.entry(&key).await;
        if let Some(r) = recorded
            .as_ref()
            .filter(|r| r.status == StepStatus::Completed)
        {
            return Ok(CallOutcome::Done(read(r.output.as_ref(), "tool result")?));
        }
        let gate = match self
            .journal
            .entry(&EntryKind::Approval.key(call, Some(i)))
            .await
        {
            Some(approval) => {
                self.approval_gate(c, (call, i), &approval, recorded.as_ref())
                    .await?
            }
            None => Gate::Run {
                attempt: self
                    .start_attempt(c, &key, recorded.as_ref(), Vec::new())
                    .await?,
                approved: false,
            },
        };
        match gate {
            Gate::Pending(request) => Ok(CallOutcome::Pending(request)),
            Gate::Denied(result) => Ok(CallOutcome::Done(result)),
            Gate::Run { attempt, approved } => {
                self.run_tool(g, op, c, key, (attempt, approved)).await
            }
        }
    }

    /// A call that needs approval: its recorded answer, or the one this run of the step brings
    /// (recorded, with the tool's start when approved, before anything runs), or none yet.
    async fn approval_gate(
        &self,
        c: &ToolCall,
        (call, i): (u32, usize),
        approval: &StepRecord,
        recorded: Option<&StepRecord>,
    ) -> Result<Gate, StepError> {
        let request: ApprovalRequest = read(Some(&approval.input), "approval request")?;
        let (answer, new) = match &approval.output {
            Some(answer) => (
                read::<ApprovalAnswer>(Some(answer), "approval answer")?,
                false,
            ),
            None => match self.answer_to(&request) {
                Some(answer) => (answer, true),
                None => return Ok(Gate::Pending(request)),
            },
        };
        let mut recorded_answer = Vec::new();
        if new {
            let answered = StepRecord {
                status: StepStatus::Completed,
                output: Some(stored(&answer)),
                ended_at: Some(self.ctx.now()),
                ..approval.clone()
            };
            recorded_answer.push((
                EntryKind::Approval.key(call, Some(i)),
                answered,
                RunEvent::AgentApprovalAnswer {
                    answer: answer.clone(),
                }
                .into(),
            ));
        }
        let key = EntryKind::ToolCall.key(call, Some(i));
        if !answer.approved {
            let tool = self.tools.iter().find(|t| t.name() == c.tool_name);
            let result = denial(tool, c, &answer);
            let (mut entries, mut events): (Vec<_>, Vec<_>) = recorded_answer
                .into_iter()
                .map(|(k, r, e)| ((k, r), e))
                .unzip();
            entries.push((
                key,
                finished_record(self.ctx, stored(c), stored(&result), 1),
            ));
            events.push(
                RunEvent::AgentToolResult {
                    result: result.clone(),
                    attempt: 1,
                }
                .into(),
            );
            self.journal.write(entries, events).await?;
            return Ok(Gate::Denied(result));
        }
        let attempt = self
            .start_attempt(c, &key, recorded, recorded_answer)
            .await?;
        Ok(Gate::Run {
            attempt,
            approved: true,
        })
    }

    /// The attempt the tool call starts now: recorded first (with `with`, the records and
    /// events that go with it) when it is a new start (never started, or an earlier run of
    /// this step was interrupted in it); the recorded one when this run of the step recorded it.
    async fn start_attempt(
        &self,
        c: &ToolCall,
        key: &str,
        recorded: Option<&StepRecord>,
        with: Vec<(String, StepRecord, EventKind)>,
    ) -> Result<u32, StepError> {
        let (mut entries, events): (Vec<_>, Vec<_>) =
            with.into_iter().map(|(k, r, e)| ((k, r), e)).unzip();
        let attempt = self.next_attempt(recorded);
        if let Some(attempt) = attempt {
            entries.push((key.to_owned(), self.tool_start(c, attempt)));
        }
        if !entries.is_empty() {
            self.journal.write(entries, events).await?;
        }
        Ok(attempt.or(recorded.map(|r| r.attempt)).unwrap_or(1))
    }

    /// Runs the tool call (`approved`: a person approved it) as its `attempt`, and records its
    /// result.
    async fn run_tool(
        &self,
        g: &Generation<'_>,
        op: &super::definition::OperationContext,
        c: &ToolCall,
        key: String,
        (attempt, approved): (u32, bool),
    ) -> Result<CallOutcome, StepError> {
        if self.journal.draining() {
            return Err(StepError::Cancelled);
        }
        let mut tool_ctx = g.tool_context();
        tool_ctx.run_id = Some(self.ctx.execution_id.clone());
        tool_ctx.attempt = attempt;
        let telemetry = self.hub.telemetry();
        let result = observed_call(
            g,
            op,
            &self.tools,
            (c, approved),
            tool_ctx,
            telemetry.as_ref(),
        )
        .await
        .map_err(failed)?;
        if self.ctx.cancel.is_cancelled() {
            return Err(StepError::Cancelled);
        }
        let record = finished_record(self.ctx, stored(c), stored(&result), attempt);
        let event = RunEvent::AgentToolResult {
            result: result.clone(),
            attempt,
        }
        .into();
        self.journal.write(vec![(key, record)], vec![event]).await?;
        Ok(CallOutcome::Done(result))
    }

    /// The attempt a tool call starts now, when its start must be recorded first: a call never
    /// started, or one an earlier run of this step started and did not finish (it was
    /// interrupted: its next attempt). `None` when this run of the step recorded its start.
    fn next_attempt(&self, recorded: Option<&StepRecord>) -> Option<u32> {
        match recorded {
            None => Some(1),
            Some(r) => {
                let started_by = r.input.get("stepAttempt").and_then(Value::as_u64);
                (started_by != Some(u64::from(self.ctx.attempt))).then_some(r.attempt + 1)
            }
        }
    }

    /// The answer this run of the step brings for `request`: the resume's, when it answers
    /// this request, or the deadline's, when the timer that fired was this request's.
    fn answer_to(&self, request: &ApprovalRequest) -> Option<ApprovalAnswer> {
        let answered = self
            .ctx
            .resume_data
            .as_ref()
            .and_then(|d| d.get("approvals"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|a| a.get("approvalId").and_then(Value::as_str) == Some(&request.approval_id));
        if let Some(a) = answered {
            return Some(ApprovalAnswer {
                approval_id: request.approval_id.clone(),
                // Anything but an explicit `true` is a denial (fails closed).
                approved: a.get("approved").and_then(Value::as_bool) == Some(true),
                reason: a.get("reason").and_then(Value::as_str).map(str::to_owned),
                expired: false,
                by: a.get("by").and_then(Value::as_str).map(str::to_owned),
            });
        }
        let suspended_until = self
            .ctx
            .suspend_data
            .as_ref()
            .and_then(|d| d.get("deadline"))
            .and_then(|d| serde_json::from_value::<DateTime<Utc>>(d.clone()).ok());
        let expired = self.ctx.timed_out
            && request
                .deadline
                .zip(suspended_until)
                .is_some_and(|(mine, fired)| mine <= fired);
        expired.then(|| ApprovalAnswer {
            approval_id: request.approval_id.clone(),
            approved: false,
            reason: Some(EXPIRED_REASON.to_owned()),
            expired: true,
            by: None,
        })
    }

    /// The suspension of a run whose calls wait for approval: the earliest deadline is its
    /// timer; its data lists the requests.
    fn wait_for(&self, pending: Vec<ApprovalRequest>) -> StepError {
        let mut tools: Vec<&str> = pending.iter().map(|p| p.tool_name.as_str()).collect();
        tools.dedup();
        let reason = format!("Tool approval required: {}", tools.join(", "));
        let deadline = pending.iter().filter_map(|p| p.deadline).min();
        let mut data = BTreeMap::new();
        data.insert("approvals", stored(&pending));
        if let Some(d) = deadline {
            data.insert("deadline", stored(&d));
        }
        let data = Some(stored(&data));
        match deadline {
            Some(d) => StepError::Suspend {
                reason,
                data,
                deadline: Some(d),
                event: None,
            },
            None => self.ctx.suspend(reason, data),
        }
    }
}
