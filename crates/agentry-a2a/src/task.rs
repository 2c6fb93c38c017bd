//! A durable agent run as an A2A task: its id the run's, its context the run's conversation,
//! its history the run's messages, its artifact the final text, its state the run's status (a
//! run waiting for a tool's approval is `input-required`, its status message naming the
//! pending approvals).

use agentry_app::wire::WorkflowStatus;
use agentry_app::wire::runs::{RunMessage, RunState};
use serde_json::{Value, json};

use crate::wire::{Artifact, Message, Part, Role, Task, TaskState, TaskStatus};

/// The id of a task's answer artifact.
pub fn answer_artifact_id(task_id: &str) -> String {
    format!("{task_id}-answer")
}

/// A run's status as a task's state.
pub fn state_of(status: WorkflowStatus) -> TaskState {
    match status {
        WorkflowStatus::Idle | WorkflowStatus::Queued => TaskState::TaskStateSubmitted,
        WorkflowStatus::Running => TaskState::TaskStateWorking,
        WorkflowStatus::Suspended => TaskState::TaskStateInputRequired,
        WorkflowStatus::Completed => TaskState::TaskStateCompleted,
        WorkflowStatus::Error => TaskState::TaskStateFailed,
        WorkflowStatus::Cancelled => TaskState::TaskStateCanceled,
    }
}

/// The run statuses that are task state `state` (none for the states no run has).
pub fn statuses_of(state: TaskState) -> Vec<WorkflowStatus> {
    [
        WorkflowStatus::Idle,
        WorkflowStatus::Queued,
        WorkflowStatus::Running,
        WorkflowStatus::Suspended,
        WorkflowStatus::Completed,
        WorkflowStatus::Error,
        WorkflowStatus::Cancelled,
    ]
    .into_iter()
    .filter(|s| state_of(*s) == state)
    .collect()
}

/// An agent's message in task `task_id` of `context_id`.
pub fn agent_message(id: String, task_id: &str, context_id: &str, parts: Vec<Part>) -> Message {
    Message {
        message_id: id,
        role: Role::Agent,
        parts,
        context_id: Some(context_id.to_owned()),
        task_id: Some(task_id.to_owned()),
    }
}

/// The context of a run: its conversation (the run's id when it has none).
pub fn context_of(run: &RunState) -> String {
    run.summary
        .conversation_id
        .clone()
        .unwrap_or_else(|| run.summary.run_id.clone())
}

/// The parts that ask for the pending approvals: a sentence, and the approvals as data (what
/// the answer's data part names: `{approved, reason?, approvalId?}`).
fn approval_parts(run: &RunState) -> Vec<Part> {
    let tools: Vec<&str> = run
        .pending_approvals
        .iter()
        .map(|a| a.tool_name.as_str())
        .collect();
    vec![
        Part::text(format!(
            "Approval required: {}. Answer with a data part {{\"approved\": true|false, \"reason\"?, \"approvalId\"?}}.",
            tools.join(", ")
        )),
        Part::data(json!({
            "pendingApprovals": serde_json::to_value(&run.pending_approvals).unwrap_or(Value::Null)
        })),
    ]
}

/// The task a run is, with at most `history_length` messages of its history (all when none;
/// none for 0).
pub fn task_of(run: &RunState, history_length: Option<usize>) -> Task {
    let id = run.summary.run_id.clone();
    let context = context_of(run);
    let state = state_of(run.summary.status);
    let message = match state {
        TaskState::TaskStateInputRequired => Some(agent_message(
            format!("{id}-status"),
            &id,
            &context,
            approval_parts(run),
        )),
        TaskState::TaskStateFailed => Some(agent_message(
            format!("{id}-status"),
            &id,
            &context,
            vec![Part::text(
                run.error.clone().unwrap_or_else(|| "failed".into()),
            )],
        )),
        _ => None,
    };
    let artifacts = if state == TaskState::TaskStateCompleted {
        vec![Artifact {
            artifact_id: answer_artifact_id(&id),
            name: Some("answer".into()),
            parts: vec![Part::text(run.text.clone())],
        }]
    } else {
        Vec::new()
    };
    let mut history: Vec<Message> = run
        .messages
        .iter()
        .enumerate()
        .filter_map(|(i, m)| history_message(m, format!("{id}-m{i}"), &id, &context))
        .collect();
    if let Some(keep) = history_length {
        history.drain(..history.len().saturating_sub(keep));
    }
    Task {
        id: id.clone(),
        context_id: context,
        status: TaskStatus {
            state,
            message,
            timestamp: Some(agentry_app::wire::iso(run.summary.updated_at.0)),
        },
        artifacts,
        history,
        metadata: None,
    }
}

/// A run's message in a task's history: the user's as the user's, the model's and the tools'
/// as the agent's (tool calls and results as data parts); system messages are not shown.
fn history_message(m: &RunMessage, id: String, task_id: &str, context: &str) -> Option<Message> {
    let role = match m.role.as_str() {
        "user" => Role::User,
        "assistant" | "tool" => Role::Agent,
        _ => return None,
    };
    let mut parts = Vec::new();
    if !m.content.is_empty() {
        parts.push(Part::text(m.content.clone()));
    }
    if !m.tool_calls.is_empty() {
        parts.push(Part::data(json!({
            "toolCalls": serde_json::to_value(&m.tool_calls).unwrap_or(Value::Null)
        })));
    }
    if let Some(result) = &m.tool_result {
        parts.push(Part::data(json!({
            "toolResult": serde_json::to_value(result).unwrap_or(Value::Null)
        })));
    }
    if parts.is_empty() {
        return None;
    }
    Some(Message {
        message_id: id,
        role,
        parts,
        context_id: Some(context.to_owned()),
        task_id: Some(task_id.to_owned()),
    })
}
