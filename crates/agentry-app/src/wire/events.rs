//! Workflow events: the `data` of a workflow stream's Server-Sent Events and the messages of
//! `/ws/executions/{executionId}`.

use agentry_agents::RunEvent;
use agentry_engine::event::LayerEvent;
use agentry_engine::{EventKind, WorkflowEvent as DomainEvent};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::Timestamp;
use super::workflows::{CancellationRecord, ExecutionOutcome, ResultSuspension, StepType};

/// A workflow event: its kind (`type`) with that kind's fields, and which execution it is of.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowEvent {
    #[serde(flatten)]
    pub kind: WorkflowEventKind,
    pub execution_id: String,
    pub workflow_id: String,
    pub timestamp: Timestamp,
}

/// The kinds of workflow event, by `type`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum WorkflowEventKind {
    /// The execution waits in its workflow's queue (first, for a queued workflow; again after
    /// a retry) until a replica with room starts it (`workflow-start`).
    WorkflowQueued(WorkflowQueued),
    WorkflowStart(WorkflowStart),
    StepStart(StepStart),
    StepComplete(StepComplete),
    StepRetry(StepRetry),
    WorkflowSuspended(WorkflowSuspended),
    WorkflowComplete(WorkflowComplete),
    WorkflowError(WorkflowError),
    WorkflowCancelled(WorkflowCancelled),
    /// The last event of a run: the execution as it now stands.
    WorkflowResult(ExecutionOutcome),
    WorkflowHandover(WorkflowHandover),
    /// A step's own output while it runs (`ctx.emit`).
    StepOutput(StepOutput),
    /// An event was delivered to the execution (it resumed the waiting step, or waits in the
    /// mailbox).
    WorkflowEventReceived(WorkflowEventReceived),
    /// A failed execution runs again from its failed step (an operator's retry).
    WorkflowRetried(WorkflowRetried),
    /// A durable agent run's model call (seen as the execution it is, by its id).
    AgentModelCall(AgentRunRecord),
    /// A durable agent run's tool result.
    AgentToolResult(AgentRunRecord),
    /// A durable agent run's tool call waits for a person's approval.
    AgentApprovalRequest(AgentRunRecord),
    /// A durable agent run's tool approval was answered.
    AgentApprovalAnswer(AgentRunRecord),
    /// A piece of a durable agent run's text, live.
    AgentTextDelta(AgentRunRecord),
    /// A tool call of a durable agent run reported progress, live.
    AgentToolProgress(AgentRunRecord),
    /// A durable agent run failed: why, with its kind (`model`, `guardrail`, `budget`,
    /// `other`); the `workflow-error` follows.
    AgentFailed(AgentRunRecord),
}

/// A step's output while it runs: progress or partial results, as the step sent them.
#[derive(Debug, Serialize, ToSchema)]
pub struct StepOutput {
    /// The step's id.
    pub from: String,
    pub data: Value,
}

/// An event delivered to the execution.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowEventReceived {
    /// The event's name.
    pub name: String,
    /// The key it was sent with (`POST /events/{name}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub key: Option<String>,
    pub event_id: String,
    pub data: Value,
    /// `resumed` (the step waiting for it took it) or `queued` (it waits in the mailbox).
    pub delivery: String,
}

/// A failed execution runs again from its failed step.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowRetried {
    /// The step it runs again from.
    pub from: String,
    /// That step's attempt now (the numbers go on).
    pub attempt: u32,
    /// The failure it had.
    pub error: String,
}

/// What a durable agent run recorded, as stored (the agent routes show it as their streams'
/// events: `GET /agents/{id}/runs/{runId}/stream`).
#[derive(Debug, Serialize, ToSchema)]
#[schema(value_type = Object)]
pub struct AgentRunRecord(serde_json::Map<String, Value>);

/// The execution entered its workflow's queue.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkflowQueued {
    pub queue: QueueEntry,
}

/// Where an execution entered its queue.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueueEntry {
    /// The queue's name.
    pub name: String,
    /// Its concurrency key's value (when the queue has a key).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub key: Option<String>,
    /// Higher starts first.
    pub priority: i64,
}

/// The execution started, or continued after a resume.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkflowStart {
    /// The execution's input.
    pub input: Value,
    /// Whether this run resumes a suspended execution.
    pub resumed: bool,
}

/// A step started.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepStart {
    /// The step's id.
    pub from: String,
    pub step_index: usize,
    pub step_type: StepType,
    /// The step's input.
    pub input: Value,
}

/// A step finished.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepComplete {
    /// The step's id.
    pub from: String,
    pub step_index: usize,
    pub step_type: StepType,
    /// The step's output.
    pub output: Value,
    /// `true` for an `andWhen` whose condition did not hold.
    pub skipped: bool,
}

/// An attempt of a step with retries failed; the next one starts after `delayMs`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepRetry {
    /// The step's id.
    pub from: String,
    pub step_index: usize,
    /// The attempt that failed.
    pub attempt: u32,
    pub error: String,
    /// The attempt that starts next.
    pub next_attempt: u32,
    /// How long until it starts.
    pub delay_ms: u64,
}

/// The execution suspended.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowSuspended {
    pub suspension: ResultSuspension,
    /// What the suspending step attached, or `null`.
    #[schema(required = true)]
    pub suspend_data: Option<Value>,
}

/// The execution completed.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkflowComplete {
    pub result: Value,
}

/// The execution failed.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowError {
    pub error: String,
    /// The step that failed (`null` when the engine itself gave up).
    #[schema(required = true)]
    pub step_id: Option<String>,
}

/// The execution was cancelled (the last stored event of the execution).
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkflowCancelled {
    pub cancellation: CancellationRecord,
}

/// The last event when this server shut down or lost the execution: it continues elsewhere;
/// re-post with the same `executionId` and input to follow it.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkflowHandover {
    pub message: String,
}

impl WorkflowEventKind {
    /// The wire kind of `kind`; the event itself when it is a layer's whose type this wire
    /// does not know (no layer served today writes one).
    fn of(kind: &EventKind) -> Result<Self, &LayerEvent> {
        Ok(match kind {
            EventKind::WorkflowQueued {
                queue,
                key,
                priority,
            } => Self::WorkflowQueued(WorkflowQueued {
                queue: QueueEntry {
                    name: queue.clone(),
                    key: key.clone(),
                    priority: *priority,
                },
            }),
            EventKind::WorkflowStart { input, resumed } => Self::WorkflowStart(WorkflowStart {
                input: input.clone(),
                resumed: *resumed,
            }),
            EventKind::StepStart {
                step_id,
                step_index,
                step_type,
                input,
            } => Self::StepStart(StepStart {
                from: step_id.clone(),
                step_index: *step_index,
                step_type: (*step_type).into(),
                input: input.clone(),
            }),
            EventKind::StepComplete {
                step_id,
                step_index,
                step_type,
                output,
                ran,
            } => Self::StepComplete(StepComplete {
                from: step_id.clone(),
                step_index: *step_index,
                step_type: (*step_type).into(),
                output: output.clone(),
                skipped: !ran,
            }),
            EventKind::StepRetry {
                step_id,
                step_index,
                attempt,
                error,
                next_attempt,
                delay_ms,
            } => Self::StepRetry(StepRetry {
                from: step_id.clone(),
                step_index: *step_index,
                attempt: *attempt,
                error: error.clone(),
                next_attempt: *next_attempt,
                delay_ms: *delay_ms,
            }),
            EventKind::WorkflowSuspended { suspension } => {
                Self::WorkflowSuspended(WorkflowSuspended {
                    suspension: suspension.into(),
                    suspend_data: suspension.data.clone(),
                })
            }
            EventKind::WorkflowComplete { result } => Self::WorkflowComplete(WorkflowComplete {
                result: result.clone(),
            }),
            EventKind::WorkflowError { error, step_id } => Self::WorkflowError(WorkflowError {
                error: error.clone(),
                step_id: step_id.clone(),
            }),
            EventKind::WorkflowCancelled { cancellation } => {
                Self::WorkflowCancelled(WorkflowCancelled {
                    cancellation: cancellation.into(),
                })
            }
            EventKind::WorkflowHandover { message } => Self::WorkflowHandover(WorkflowHandover {
                message: message.clone(),
            }),
            EventKind::WorkflowResult { execution } => {
                Self::WorkflowResult(execution.as_ref().into())
            }
            EventKind::StepOutput { step_id, data } => Self::StepOutput(StepOutput {
                from: step_id.clone(),
                data: data.clone(),
            }),
            EventKind::WorkflowEventReceived {
                name,
                key,
                event_id,
                data,
                delivery,
            } => Self::WorkflowEventReceived(WorkflowEventReceived {
                name: name.clone(),
                key: key.clone(),
                event_id: event_id.clone(),
                data: data.clone(),
                delivery: delivery.clone(),
            }),
            EventKind::WorkflowRetried {
                step_id,
                attempt,
                error,
            } => Self::WorkflowRetried(WorkflowRetried {
                from: step_id.clone(),
                attempt: *attempt,
                error: error.clone(),
            }),
            EventKind::Layer(layer) => Self::of_layer(layer)?,
        })
    }

    /// A layer's event: a durable agent run's, by its kind.
    fn of_layer(layer: &LayerEvent) -> Result<Self, &LayerEvent> {
        let record = || {
            let mut fields = layer.fields().clone();
            fields.remove("type");
            AgentRunRecord(fields)
        };
        Ok(match layer.decode::<RunEvent>().ok_or(layer)? {
            RunEvent::AgentModelCall { .. } => Self::AgentModelCall(record()),
            RunEvent::AgentToolResult { .. } => Self::AgentToolResult(record()),
            RunEvent::AgentApprovalRequest { .. } => Self::AgentApprovalRequest(record()),
            RunEvent::AgentApprovalAnswer { .. } => Self::AgentApprovalAnswer(record()),
            RunEvent::AgentTextDelta { .. } => Self::AgentTextDelta(record()),
            RunEvent::AgentToolProgress { .. } => Self::AgentToolProgress(record()),
            RunEvent::AgentFailed { .. } => Self::AgentFailed(record()),
        })
    }
}

/// An event of a layer this wire does not know, as its layer wrote it (`type` first), with the
/// execution's ids and time.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LayerLine<'a> {
    #[serde(flatten)]
    fields: &'a serde_json::Map<String, Value>,
    execution_id: &'a str,
    workflow_id: &'a str,
    timestamp: Timestamp,
}

impl WorkflowEvent {
    /// The event as one line of JSON (an SSE `data:` line, a WebSocket message).
    pub fn to_json(ev: &DomainEvent) -> String {
        let line = match WorkflowEventKind::of(&ev.kind) {
            Ok(kind) => serde_json::to_string(&Self {
                kind,
                execution_id: ev.execution_id.clone(),
                workflow_id: ev.workflow_id.clone(),
                timestamp: ev.timestamp.into(),
            }),
            Err(layer) => serde_json::to_string(&LayerLine {
                fields: layer.fields(),
                execution_id: &ev.execution_id,
                workflow_id: &ev.workflow_id,
                timestamp: ev.timestamp.into(),
            }),
        };
        line.expect("a workflow event serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentry_engine::workflow::StepType as DomainStepType;
    use chrono::Utc;

    /// The wire's `type` is the domain's name of the event.
    #[test]
    fn types_are_the_domain_names() {
        for kind in [
            EventKind::WorkflowQueued {
                queue: "q".into(),
                key: None,
                priority: 0,
            },
            EventKind::WorkflowStart {
                input: Value::Null,
                resumed: false,
            },
            EventKind::StepRetry {
                step_id: "s".into(),
                step_index: 0,
                attempt: 1,
                error: "e".into(),
                next_attempt: 2,
                delay_ms: 5,
            },
            EventKind::StepComplete {
                step_id: "s".into(),
                step_index: 0,
                step_type: DomainStepType::Then,
                output: Value::Null,
                ran: false,
            },
            EventKind::WorkflowError {
                error: "e".into(),
                step_id: None,
            },
        ] {
            let ev = DomainEvent {
                kind,
                execution_id: "x".into(),
                workflow_id: "w".into(),
                seq: None,
                timestamp: Utc::now(),
            };
            let v: Value = serde_json::from_str(&WorkflowEvent::to_json(&ev)).unwrap();
            assert_eq!(v["type"], ev.kind.type_name());
            assert_eq!(v["executionId"], "x");
        }
    }
}
