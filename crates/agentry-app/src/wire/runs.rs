//! Durable agent runs: a run's summary, its state (messages, steps, pending approvals), the
//! answer to an approval, and a durable `/text`'s answer.

use agentry_agents::{
    self as agent, ApprovalAnswer, EntryKind, Message, RunInput, RunJournal, agent_of_run,
};
use agentry_engine::ExecutionRecord;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::agents::{ApprovalRequest, FinishReason, TextResult, ToolCall, ToolResult, Usage};
use super::workflows::CancellationRecord;
use super::{Timestamp, WorkflowStatus};

/// One durable run of a list: what finds it again.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    pub run_id: String,
    pub agent_id: String,
    /// `running`, `suspended` (waiting for a tool's approval), `completed`, `error` or
    /// `cancelled`.
    pub status: WorkflowStatus,
    #[schema(required = true)]
    pub conversation_id: Option<String>,
    #[schema(required = true)]
    pub user_id: Option<String>,
    pub start_at: Timestamp,
    pub updated_at: Timestamp,
    #[schema(required = true)]
    pub end_at: Option<Timestamp>,
    /// Present when suspended: why (`Tool approval required: <tool>`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub reason: Option<String>,
    /// Where it was started from, when not the agent routes: `a2a` (an A2A task).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, example = "a2a")]
    pub origin: Option<String>,
}

impl From<&ExecutionRecord> for RunSummary {
    fn from(r: &ExecutionRecord) -> Self {
        Self {
            run_id: r.id.clone(),
            agent_id: agent_of_run(&r.workflow_id).unwrap_or_default().to_owned(),
            status: r.state.status().into(),
            conversation_id: r
                .context
                .get("conversationId")
                .and_then(Value::as_str)
                .map(str::to_owned),
            user_id: r.user_id.clone(),
            start_at: r.start_at.into(),
            updated_at: r.updated_at.into(),
            end_at: r.state.end_at().map(Timestamp),
            reason: r.state.suspension().map(|s| s.reason.clone()),
            origin: r
                .context
                .get("origin")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }
    }
}

/// `data` of the run lists.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunList {
    pub runs: Vec<RunSummary>,
    /// The `cursor` of the next page; `null` on the last one.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

/// What one step of a run did.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RunStepKind {
    ModelCall,
    ToolCall,
    Approval,
}

/// One recorded step of a run: a model call, a tool call, or an approval.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunStep {
    /// Its name in the run (`model-1`, `tool-1-0`, `approval-1-0`).
    pub id: String,
    pub kind: RunStepKind,
    /// `running`, `completed`, `suspended` (an approval waiting for its answer).
    pub status: String,
    /// How many times it was started (a tool call interrupted by a crash runs again).
    pub attempt: u32,
    pub started_at: Timestamp,
    #[schema(required = true)]
    pub ended_at: Option<Timestamp>,
    /// A model call's token counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub usage: Option<Usage>,
    /// A model call's model: the one that answered (the agent's, or a fallback).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub model: Option<String>,
    /// A model call's text.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub text: Option<String>,
    /// The first model call's: the earlier messages semantic recall added to its context.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recalled: Vec<RunMessage>,
    /// A model call's tool calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// A tool call's (or an approval's) call.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub call: Option<ToolCall>,
    /// A finished tool call's output: what the tool answered (or, when it failed, the failure
    /// the model was told of).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub result: Option<Value>,
    /// Present (`true`) when the tool call failed (or was denied); `result` then describes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub is_error: Option<bool>,
    /// An answered approval's answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub approval: Option<ApprovalOutcome>,
}

/// How an approval was answered.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalOutcome {
    pub approved: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub reason: Option<String>,
    /// Nobody answered before the deadline.
    pub expired: bool,
    /// Who answered (the verified user), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub by: Option<String>,
}

impl From<&ApprovalAnswer> for ApprovalOutcome {
    fn from(a: &ApprovalAnswer) -> Self {
        Self {
            approved: a.approved,
            reason: a.reason.clone(),
            expired: a.expired,
            by: a.by.clone(),
        }
    }
}

/// A message of a run, as the model sees it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunMessage {
    /// `user`, `assistant`, `tool` (or `system`).
    pub role: String,
    pub content: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub tool_result: Option<ToolResult>,
}

impl From<&Message> for RunMessage {
    fn from(m: &Message) -> Self {
        Self {
            role: serde_json::to_value(m.role)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            content: m.content.clone(),
            tool_calls: m.tool_calls.iter().map(Into::into).collect(),
            tool_result: m.tool_result.as_ref().map(Into::into),
        }
    }
}

/// GET /agents/{id}/runs/{runId}: a run as it stands.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunState {
    #[serde(flatten)]
    pub summary: RunSummary,
    /// The request's messages, then each model answer and tool result so far.
    pub messages: Vec<RunMessage>,
    /// Each model call, tool call and approval, in order.
    pub steps: Vec<RunStep>,
    /// The tool calls waiting for a person's approval.
    pub pending_approvals: Vec<ApprovalRequest>,
    /// The text so far (the final text once completed).
    pub text: String,
    /// The token counts so far.
    pub usage: Usage,
    /// Once completed: why the model stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub finish_reason: Option<FinishReason>,
    /// Once failed: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub error: Option<String>,
    /// Once cancelled: when and why (as an execution's state says it).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub cancellation: Option<CancellationRecord>,
    /// While it runs: the process that holds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub lease: Option<super::LeaseRecord>,
    /// Its live scores, by scorer (once it completed and was sampled for scoring).
    pub scores: Vec<super::scores::Score>,
}

impl From<&agent::JournalStep<'_>> for RunStep {
    fn from(step: &agent::JournalStep<'_>) -> Self {
        let r = step.record;
        let model = step.answer.as_ref();
        Self {
            id: step.key.to_owned(),
            kind: match step.kind {
                EntryKind::ModelCall => RunStepKind::ModelCall,
                EntryKind::ToolCall => RunStepKind::ToolCall,
                EntryKind::Approval => RunStepKind::Approval,
            },
            status: r.status.as_str().to_owned(),
            attempt: r.attempt,
            started_at: r.started_at.into(),
            ended_at: r.ended_at.map(Timestamp),
            usage: model.map(|m| m.usage.into()),
            model: model.and_then(|m| m.model.clone()),
            text: model.map(|m| m.text.clone()),
            recalled: step.recalled.iter().map(Into::into).collect(),
            tool_calls: model.map(|m| m.tool_calls.iter().map(Into::into).collect()),
            call: step.call.as_ref().map(Into::into),
            is_error: step
                .result
                .as_ref()
                .and_then(|r| r.is_error.then_some(true)),
            result: step.result.as_ref().map(|r| r.result.clone()),
            approval: step.approval.as_ref().map(Into::into),
        }
    }
}

impl RunState {
    pub fn new(rec: &ExecutionRecord) -> Self {
        let journal = RunJournal::of(rec);
        let input: Option<RunInput> = serde_json::from_value(rec.input.clone()).ok();
        let completed = rec.state.result().and_then(agent::run_result);
        let (text, usage) = match &completed {
            Some(r) => (r.text.clone(), r.usage),
            None => journal.totals(),
        };
        Self {
            summary: rec.into(),
            messages: journal
                .messages(input.as_ref().map_or(&[], |i| &i.messages))
                .iter()
                .map(Into::into)
                .collect(),
            steps: journal.steps().iter().map(Into::into).collect(),
            pending_approvals: journal.pending().iter().map(Into::into).collect(),
            text,
            usage: usage.into(),
            finish_reason: completed.as_ref().map(|r| r.finish_reason.into()),
            error: rec.state.error().map(str::to_owned),
            cancellation: rec.state.cancellation().map(Into::into),
            lease: rec
                .lease
                .as_ref()
                .filter(|_| rec.state.status() == agentry_engine::Status::Running)
                .map(|l| super::LeaseRecord {
                    node: l.node.clone(),
                    epoch: l.epoch,
                }),
            scores: Vec::new(),
        }
    }
}

/// POST /agents/{id}/runs/{runId}/approvals/{approvalId}: the answer was taken.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalResult {
    pub run_id: String,
    pub approval_id: String,
    pub approved: bool,
    /// The run's status now: `running` (it continues), or `suspended` when another of its
    /// calls still waits for an answer.
    pub status: WorkflowStatus,
}

/// `data` of POST /agents/{id}/text: the generation's result, and for a durable run the run
/// (`runId`, `status`: `completed`, or `suspended` while a tool call waits for approval, and
/// the calls waiting).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TextAnswer {
    #[serde(flatten)]
    pub result: TextResult,
    /// A durable run's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub run_id: Option<String>,
    /// A durable run's status: `completed`, or `suspended` when a tool call waits for approval.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub status: Option<WorkflowStatus>,
    /// A durable run's tool calls waiting for a person's approval.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub pending_approvals: Option<Vec<ApprovalRequest>>,
}

impl TextAnswer {
    /// The answer of a generation held in memory.
    pub fn memory(result: TextResult) -> Self {
        Self {
            result,
            run_id: None,
            status: None,
            pending_approvals: None,
        }
    }
}
