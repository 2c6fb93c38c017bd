//! Workflow events, as the engine emits them to subscribers.
//!
//! The events an execution's writes report are stored with them, in the same transaction, each
//! with the next number of the execution's sequence (`seq`): the durable event log that a client
//! re-attaches to. The last event of a run (`workflow-result`) and the notice of a handover are
//! not stored: they are about one connection, not the execution.
//!
//! The wire shape (`workflow-start`, `step-start`, ... with `from` and ISO timestamps) is decided
//! by the HTTP adapter; these are the domain events it converts.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent::{ApprovalAnswer, ApprovalRequest, FinishReason, ToolCall, ToolResult, Usage};
use crate::state::{Cancellation, Suspension};
use crate::store::ExecutionRecord;
use crate::workflow::StepType;

/// One thing that happened to one execution.
#[derive(Debug, Clone)]
pub struct WorkflowEvent {
    pub execution_id: String,
    pub workflow_id: String,
    /// Its number in the execution's event log (1, 2, ...); `None` for an event that is not
    /// stored.
    pub seq: Option<i64>,
    pub timestamp: DateTime<Utc>,
    pub kind: EventKind,
}

/// What happened. Stored as JSON (internally tagged), so the log reads back what was written.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
pub enum EventKind {
    /// The execution waits in its workflow's queue (its first event, for a queued workflow;
    /// again after a retry), until a replica with room starts it (`workflow-start`).
    WorkflowQueued {
        queue: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
        priority: i64,
    },
    /// The execution started (or continued after a resume, with `resumed` set).
    WorkflowStart {
        input: Value,
        resumed: bool,
    },
    StepStart {
        step_id: String,
        step_index: usize,
        step_type: StepType,
        input: Value,
    },
    StepComplete {
        step_id: String,
        step_index: usize,
        step_type: StepType,
        output: Value,
        /// False for an `andWhen` whose condition did not hold.
        ran: bool,
    },
    /// An attempt of a step with retries failed; the next one starts after `delay_ms`.
    StepRetry {
        step_id: String,
        step_index: usize,
        attempt: u32,
        error: String,
        next_attempt: u32,
        delay_ms: u64,
    },
    WorkflowSuspended {
        suspension: Suspension,
    },
    WorkflowComplete {
        result: Value,
    },
    WorkflowError {
        error: String,
        /// The step that failed (none when the engine itself gave up).
        #[serde(default)]
        step_id: Option<String>,
    },
    /// Cancelled through the API (the last stored event of the execution).
    WorkflowCancelled {
        cancellation: Cancellation,
    },
    /// A failed execution runs again from `step_id` (its `attempt`), retried by an operator;
    /// `error` is the failure it had.
    WorkflowRetried {
        step_id: String,
        attempt: u32,
        error: String,
    },
    /// An event was delivered to the execution: it resumed the step that waited for it
    /// (`delivery: "resumed"`), or waits in its mailbox (`"queued"`).
    WorkflowEventReceived {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
        event_id: String,
        data: Value,
        delivery: String,
    },
    /// A step's own output while it runs (`StepContext::emit`): progress, partial results.
    StepOutput {
        step_id: String,
        data: Value,
    },
    /// A durable agent run's model call answered: its text, the tools it asks for, its usage.
    /// `call` counts the run's model calls from 1.
    AgentModelCall {
        call: u32,
        text: String,
        tool_calls: Vec<ToolCall>,
        usage: Usage,
        finish_reason: FinishReason,
    },
    /// A tool call of a durable agent run ended (a denied call too: its result says so).
    AgentToolResult {
        result: ToolResult,
        attempt: u32,
    },
    /// A tool call of a durable agent run waits for a person's approval.
    AgentApprovalRequest {
        request: ApprovalRequest,
    },
    /// A tool approval was answered (by a person, or by its deadline: a denial).
    AgentApprovalAnswer {
        answer: ApprovalAnswer,
    },
    /// A piece of a durable run's text as the model streams it, for the run's live subscribers
    /// in this process. Not stored (the model call's event carries the whole text).
    #[serde(skip)]
    AgentTextDelta {
        delta: String,
    },
    /// A tool call of a durable run reported progress, for the run's live subscribers in this
    /// process. Not stored.
    #[serde(skip)]
    AgentToolProgress {
        tool_call_id: String,
        tool_name: String,
        data: Value,
    },
    /// The last event of a run: the execution as it now stands. Not stored.
    #[serde(skip)]
    WorkflowResult {
        execution: Box<ExecutionRecord>,
    },
    /// The last event of a run this process stopped without ending the execution: it shut down
    /// (and handed the execution over) or lost its lease. The execution continues elsewhere.
    /// Not stored.
    #[serde(skip)]
    WorkflowHandover {
        message: String,
    },
}

impl EventKind {
    /// Whether the event is part of the execution's stored log.
    pub fn is_stored(&self) -> bool {
        !matches!(
            self,
            EventKind::WorkflowResult { .. }
                | EventKind::WorkflowHandover { .. }
                | EventKind::AgentTextDelta { .. }
                | EventKind::AgentToolProgress { .. }
        )
    }

    /// The spec's event type name.
    pub fn type_name(&self) -> &'static str {
        match self {
            EventKind::WorkflowQueued { .. } => "workflow-queued",
            EventKind::WorkflowStart { .. } => "workflow-start",
            EventKind::StepStart { .. } => "step-start",
            EventKind::StepComplete { .. } => "step-complete",
            EventKind::StepRetry { .. } => "step-retry",
            EventKind::WorkflowSuspended { .. } => "workflow-suspended",
            EventKind::WorkflowComplete { .. } => "workflow-complete",
            EventKind::WorkflowError { .. } => "workflow-error",
            EventKind::WorkflowCancelled { .. } => "workflow-cancelled",
            EventKind::WorkflowResult { .. } => "workflow-result",
            EventKind::WorkflowHandover { .. } => "workflow-handover",
            EventKind::StepOutput { .. } => "step-output",
            EventKind::WorkflowEventReceived { .. } => "workflow-event-received",
            EventKind::WorkflowRetried { .. } => "workflow-retried",
            EventKind::AgentModelCall { .. } => "agent-model-call",
            EventKind::AgentToolResult { .. } => "agent-tool-result",
            EventKind::AgentApprovalRequest { .. } => "agent-approval-request",
            EventKind::AgentApprovalAnswer { .. } => "agent-approval-answer",
            EventKind::AgentTextDelta { .. } => "agent-text-delta",
            EventKind::AgentToolProgress { .. } => "agent-tool-progress",
        }
    }
}
