//! Wire types: how workflows, executions and events look over HTTP (camelCase, ISO 8601
//! timestamps). Only this crate decides the wire shape; the engine's types carry meaning.

use agentry_core::state::{Cancellation, Status, Suspension};
use agentry_core::store::StepRecord;
use agentry_core::workflow::{Step, Workflow};
use agentry_core::{EventKind, ExecutionRecord, ExecutionState, WorkflowEvent};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::ToSchema;

/// ISO 8601 with milliseconds and `Z`.
pub fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A workflow (items of GET /workflows).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowSummary {
    pub id: String,
    pub name: String,
    pub purpose: String,
    pub steps_count: usize,
    #[schema(value_type = crate::openapi::WorkflowStatus)]
    pub status: &'static str,
}

impl From<&Workflow> for WorkflowSummary {
    fn from(w: &Workflow) -> Self {
        Self {
            id: w.id().to_owned(),
            name: w.name().to_owned(),
            purpose: w.purpose().to_owned(),
            steps_count: w.steps().len(),
            status: "idle",
        }
    }
}

/// A step of a workflow; its schemas (JSON Schema) are present when the step declares them.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepView {
    pub id: String,
    pub name: String,
    #[serde(rename = "type")]
    #[schema(value_type = crate::openapi::StepType)]
    pub step_type: &'static str,
    pub purpose: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, value_type = Option<Object>)]
    pub input_schema: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, value_type = Option<Object>)]
    pub output_schema: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, value_type = Option<Object>)]
    pub suspend_schema: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, value_type = Option<Object>)]
    pub resume_schema: Option<Value>,
}

impl From<&Step> for StepView {
    fn from(s: &Step) -> Self {
        Self {
            id: s.id.clone(),
            name: s.name.clone(),
            step_type: s.step_type().as_str(),
            purpose: s.purpose.clone(),
            input_schema: s.input_schema.clone(),
            output_schema: s.output_schema.clone(),
            suspend_schema: s.suspend_schema.clone(),
            resume_schema: s.resume_schema.clone(),
        }
    }
}

/// A workflow with its steps and schemas (JSON Schema; `null` when it declares none).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowDetail {
    pub id: String,
    pub name: String,
    pub purpose: String,
    #[schema(value_type = crate::openapi::WorkflowStatus)]
    pub status: &'static str,
    pub steps_count: usize,
    pub steps: Vec<StepView>,
    #[schema(value_type = Object)]
    pub input_schema: Value,
    #[schema(required = true, value_type = Option<Object>)]
    pub suspend_schema: Option<Value>,
    #[schema(required = true, value_type = Option<Object>)]
    pub resume_schema: Option<Value>,
}

impl From<&Workflow> for WorkflowDetail {
    fn from(w: &Workflow) -> Self {
        Self {
            id: w.id().to_owned(),
            name: w.name().to_owned(),
            purpose: w.purpose().to_owned(),
            status: "idle",
            steps_count: w.steps().len(),
            steps: w.steps().iter().map(StepView::from).collect(),
            input_schema: w.input_schema_json(),
            suspend_schema: w.suspend_schema_json().cloned(),
            resume_schema: w.resume_schema_json().cloned(),
        }
    }
}

/// `options` of execute and stream.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowOptions {
    /// User id for tracking.
    pub user_id: Option<String>,
    /// Conversation context.
    pub conversation_id: Option<String>,
    /// The execution's id, chosen by the caller (default: a new UUID v7). Reusing one is a 409.
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$", example = "exp-1")]
    pub execution_id: Option<String>,
    /// Additional context data, handed to the steps.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub context: Option<Map<String, Value>>,
}

/// Body of execute and stream.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(example = json!({"input": {"employeeId": "e-42", "amount": 1500, "category": "travel"}, "options": {"executionId": "exp-1", "userId": "u-1"}}))]
pub struct ExecuteRequest {
    /// The workflow's input, valid against its input schema (else a 400).
    #[schema(value_type = Object)]
    pub input: Value,
    #[serde(default)]
    pub options: Option<WorkflowOptions>,
}

/// Body of suspend (optional: an empty body suspends with the default reason).
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SuspendRequest {
    /// Why (default `Suspended by request`).
    #[serde(default)]
    pub reason: Option<String>,
}

/// Body of cancel (optional).
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CancelRequest {
    /// Why (recorded in the state's `cancellation`).
    #[serde(default)]
    pub reason: Option<String>,
}

/// `options` of resume.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResumeOptions {
    /// The step to resume from (default: the suspended step).
    pub step_id: Option<String>,
}

/// Body of resume.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"resumeData": {"approved": true, "managerId": "m-7"}}))]
pub struct ResumeRequest {
    /// Handed to the resumed step; valid against the workflow's resume schema (else a 400).
    #[serde(default)]
    pub resume_data: Value,
    #[serde(default)]
    pub options: Option<ResumeOptions>,
}

fn suspension_short(s: &Suspension) -> Value {
    let mut out = json!({
        "suspendedAt": iso(s.suspended_at),
        "reason": s.reason,
        "suspendedStepIndex": s.step_index,
        "stepId": s.step_id,
    });
    if let Some(deadline) = s.deadline {
        out["deadline"] = json!(iso(deadline));
    }
    out
}

/// When and why an execution was cancelled.
fn cancellation_json(c: &Cancellation) -> Value {
    json!({"cancelledAt": iso(c.cancelled_at), "reason": c.reason})
}

/// `data` of execute and resume: the completed or suspended form.
pub fn execution_result(r: &ExecutionRecord) -> Value {
    let mut out = json!({
        "executionId": r.id,
        "startAt": iso(r.start_at),
        "endAt": r.state.end_at().map(iso),
        "status": r.state.status().as_str(),
        "result": r.state.result().cloned().unwrap_or(Value::Null),
    });
    if let ExecutionState::Suspended(s) = &r.state {
        out["suspension"] = suspension_short(s);
    }
    if let ExecutionState::Error { message, .. } = &r.state {
        out["error"] = json!(message);
    }
    if let ExecutionState::Cancelled(c) = &r.state {
        out["cancellation"] = cancellation_json(c);
    }
    out
}

/// One execution of a list: what finds it again.
pub fn execution_summary(r: &ExecutionRecord) -> Value {
    let mut out = json!({
        "executionId": r.id,
        "workflowId": r.workflow_id,
        "status": r.state.status().as_str(),
        "startAt": iso(r.start_at),
        "endAt": r.state.end_at().map(iso),
        "updatedAt": iso(r.updated_at),
        "userId": r.user_id,
    });
    if let ExecutionState::Suspended(s) = &r.state {
        out["suspension"] = suspension_short(s);
    }
    out
}

/// The cursor of the page after `last`: its start (nanoseconds) and id, opaque to clients.
pub fn list_cursor(last: &ExecutionRecord) -> Option<String> {
    let nanos = last.start_at.timestamp_nanos_opt()?;
    Some(format!("{nanos}.{}", last.id))
}

/// Reads a cursor of [`list_cursor`].
pub fn parse_list_cursor(cursor: &str) -> Option<(DateTime<Utc>, String)> {
    let (nanos, id) = cursor.split_once('.')?;
    let at = DateTime::from_timestamp_nanos(nanos.parse().ok()?);
    (!id.is_empty()).then(|| (at, id.to_owned()))
}

/// `data` of cancel.
pub fn cancel_result(r: &ExecutionRecord) -> Value {
    json!({
        "executionId": r.id,
        "status": r.state.status().as_str(),
        "cancellation": r.state.cancellation().map(cancellation_json),
    })
}

/// `data` of suspend.
pub fn suspend_result(r: &ExecutionRecord) -> Value {
    match &r.state {
        ExecutionState::Suspended(s) => json!({
            "executionId": r.id,
            "status": "suspended",
            "suspension": {
                "suspendedAt": iso(s.suspended_at),
                "reason": s.reason,
                "stepIndex": s.step_index,
                "stepId": s.step_id,
            },
        }),
        // Still running after the wait: the request is recorded and takes effect at the next
        // step boundary.
        other => json!({
            "executionId": r.id,
            "status": other.status().as_str(),
            "suspension": other.suspend_request().map(|q| json!({
                "requestedAt": iso(q.requested_at),
                "reason": q.reason,
                "pending": true,
            })),
        }),
    }
}

/// The step records of an execution by step id, in the order they started.
fn steps_json(r: &ExecutionRecord) -> Value {
    let mut steps: Vec<(&String, &StepRecord)> = r.progress.steps.iter().collect();
    steps.sort_by_key(|(id, s)| (s.started_at, *id));
    let mut out = Map::new();
    for (id, s) in steps {
        let mut step = json!({
            "status": s.status.as_str(),
            "attempt": s.attempt,
            "input": s.input,
            "output": s.output,
            "startedAt": iso(s.started_at),
            "endedAt": s.ended_at.map(iso),
            "failures": s.failures.iter().map(|f| json!({
                "attempt": f.attempt, "error": f.error, "at": iso(f.at),
            })).collect::<Vec<_>>(),
        });
        if let Some(parent) = &s.parent {
            step["parentStepId"] = json!(parent);
        }
        out.insert(id.clone(), step);
    }
    Value::Object(out)
}

/// `data` of the state endpoint: the whole truth about an execution.
pub fn execution_state(r: &ExecutionRecord) -> Value {
    let mut out = json!({
        "executionId": r.id,
        "workflowId": r.workflow_id,
        "status": r.state.status().as_str(),
        "startAt": iso(r.start_at),
        "endAt": r.state.end_at().map(iso),
        "updatedAt": iso(r.updated_at),
        "input": r.input,
        "context": r.context,
        "userId": r.user_id,
        "result": r.state.result().cloned().unwrap_or(Value::Null),
        "nextStepIndex": r.progress.next_step,
        "steps": steps_json(r),
    });
    if r.state.status() == Status::Running
        && let Some(lease) = &r.lease
    {
        out["lease"] = json!({"node": lease.node, "epoch": lease.epoch});
    }
    match &r.state {
        ExecutionState::Suspended(s) => {
            out["suspension"] = json!({
                "suspendedAt": iso(s.suspended_at),
                "reason": s.reason,
                "stepIndex": s.step_index,
                "stepId": s.step_id,
                "suspendData": s.data,
            });
            if let Some(deadline) = s.deadline {
                out["suspension"]["deadline"] = json!(iso(deadline));
            }
        }
        ExecutionState::Error {
            message, step_id, ..
        } => out["error"] = json!({"message": message, "stepId": step_id}),
        ExecutionState::Cancelled(c) => out["cancellation"] = cancellation_json(c),
        ExecutionState::Running {
            suspend_request: Some(q),
        } => {
            out["suspendRequest"] = json!({"requestedAt": iso(q.requested_at), "reason": q.reason});
        }
        _ => {}
    }
    out
}

/// One workflow event as the JSON object of an SSE `data:` line (and of WebSocket messages).
pub fn event_json(ev: &WorkflowEvent) -> Value {
    let mut out = json!({
        "type": ev.kind.type_name(),
        "executionId": ev.execution_id,
        "workflowId": ev.workflow_id,
        "timestamp": iso(ev.timestamp),
    });
    let extra = match &ev.kind {
        EventKind::WorkflowStart { input, resumed } => json!({"input": input, "resumed": resumed}),
        EventKind::StepStart {
            step_id,
            step_index,
            step_type,
            input,
        } => json!({
            "from": step_id,
            "stepIndex": step_index,
            "stepType": step_type.as_str(),
            "input": input,
        }),
        EventKind::StepComplete {
            step_id,
            step_index,
            step_type,
            output,
            ran,
        } => json!({
            "from": step_id,
            "stepIndex": step_index,
            "stepType": step_type.as_str(),
            "output": output,
            "skipped": !ran,
        }),
        EventKind::StepRetry {
            step_id,
            step_index,
            attempt,
            error,
            next_attempt,
            delay_ms,
        } => json!({
            "from": step_id,
            "stepIndex": step_index,
            "attempt": attempt,
            "error": error,
            "nextAttempt": next_attempt,
            "delayMs": delay_ms,
        }),
        EventKind::WorkflowSuspended { suspension } => {
            json!({"suspension": suspension_short(suspension), "suspendData": suspension.data})
        }
        EventKind::WorkflowComplete { result } => json!({"result": result}),
        EventKind::WorkflowError { error, step_id } => json!({"error": error, "stepId": step_id}),
        EventKind::WorkflowCancelled { cancellation } => {
            json!({"cancellation": cancellation_json(cancellation)})
        }
        EventKind::WorkflowHandover { message } => json!({"message": message}),
        EventKind::WorkflowResult { execution } => {
            let mut v = execution_result(execution);
            v.as_object_mut().map(|m| m.remove("executionId"));
            v
        }
    };
    if let (Some(o), Value::Object(e)) = (out.as_object_mut(), extra) {
        o.extend(e);
    }
    out
}
