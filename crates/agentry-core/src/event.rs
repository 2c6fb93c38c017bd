//! Workflow events, as the engine emits them to subscribers.
//!
//! The wire shape (`workflow-start`, `step-start`, ... with `from` and ISO timestamps) is decided
//! by the HTTP adapter; these are the domain events it converts.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::state::Suspension;
use crate::store::ExecutionRecord;
use crate::workflow::StepType;

/// One thing that happened to one execution.
#[derive(Debug, Clone)]
pub struct WorkflowEvent {
    pub execution_id: String,
    pub workflow_id: String,
    pub timestamp: DateTime<Utc>,
    pub kind: EventKind,
}

#[derive(Debug, Clone)]
pub enum EventKind {
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
    WorkflowSuspended {
        suspension: Suspension,
    },
    WorkflowComplete {
        result: Value,
    },
    WorkflowError {
        error: String,
    },
    /// The last event of a run: the execution as it now stands.
    WorkflowResult {
        execution: Box<ExecutionRecord>,
    },
    /// The last event of a run this process stopped without ending the execution: it shut down
    /// (and handed the execution over) or lost its lease. The execution continues elsewhere.
    WorkflowHandover {
        message: String,
    },
}

impl EventKind {
    /// The spec's event type name.
    pub fn type_name(&self) -> &'static str {
        match self {
            EventKind::WorkflowStart { .. } => "workflow-start",
            EventKind::StepStart { .. } => "step-start",
            EventKind::StepComplete { .. } => "step-complete",
            EventKind::WorkflowSuspended { .. } => "workflow-suspended",
            EventKind::WorkflowComplete { .. } => "workflow-complete",
            EventKind::WorkflowError { .. } => "workflow-error",
            EventKind::WorkflowResult { .. } => "workflow-result",
            EventKind::WorkflowHandover { .. } => "workflow-handover",
        }
    }
}
