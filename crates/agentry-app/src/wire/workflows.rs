//! Workflows and their executions: the answers of the workflow routes and their request bodies.

use std::collections::HashMap;

use agentry_engine::state::{Cancellation, Status, SuspendRequest as PendingRequest, Suspension};
use agentry_engine::store::{self, StepRecord};
use agentry_engine::workflow::{self, Step, Workflow};
use agentry_engine::{ExecutionRecord, ExecutionState};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::Timestamp;

/// A workflow or execution status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum WorkflowStatus {
    Idle,
    /// Waiting for a slot of its workflow's queue.
    Queued,
    Running,
    Suspended,
    Completed,
    Error,
    Cancelled,
}

impl From<Status> for WorkflowStatus {
    fn from(s: Status) -> Self {
        match s {
            Status::Idle => Self::Idle,
            Status::Queued => Self::Queued,
            Status::Running => Self::Running,
            Status::Suspended => Self::Suspended,
            Status::Completed => Self::Completed,
            Status::Error => Self::Error,
            Status::Cancelled => Self::Cancelled,
        }
    }
}

/// A step type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
pub enum StepType {
    #[serde(rename = "andThen")]
    AndThen,
    #[serde(rename = "andWhen")]
    AndWhen,
    #[serde(rename = "andAll")]
    AndAll,
    #[serde(rename = "andRace")]
    AndRace,
    #[serde(rename = "andTap")]
    AndTap,
    #[serde(rename = "andAgent")]
    AndAgent,
    #[serde(rename = "andWorkflow")]
    AndWorkflow,
    /// `andForEach`: a step mapped over an array.
    #[serde(rename = "foreach")]
    ForEach,
}

impl From<workflow::StepType> for StepType {
    fn from(t: workflow::StepType) -> Self {
        use workflow::StepType as T;
        match t {
            T::Then => Self::AndThen,
            T::When => Self::AndWhen,
            T::All => Self::AndAll,
            T::Race => Self::AndRace,
            T::Tap => Self::AndTap,
            T::Agent => Self::AndAgent,
            T::Workflow => Self::AndWorkflow,
            T::ForEach => Self::ForEach,
        }
    }
}

/// A workflow (items of GET /workflows).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowSummary {
    pub id: String,
    pub name: String,
    pub purpose: String,
    pub steps_count: usize,
    pub status: WorkflowStatus,
}

impl From<&Workflow> for WorkflowSummary {
    fn from(w: &Workflow) -> Self {
        Self {
            id: w.id().to_owned(),
            name: w.name().to_owned(),
            purpose: w.purpose().to_owned(),
            steps_count: w.steps().len(),
            status: WorkflowStatus::Idle,
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
    pub step_type: StepType,
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
            step_type: s.step_type().into(),
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
    pub status: WorkflowStatus,
    pub steps_count: usize,
    pub steps: Vec<StepView>,
    #[schema(value_type = Object)]
    pub input_schema: Value,
    #[schema(required = true, value_type = Option<Object>)]
    pub suspend_schema: Option<Value>,
    #[schema(required = true, value_type = Option<Object>)]
    pub resume_schema: Option<Value>,
    /// The events its steps may wait for (`POST .../events/{name}`, `POST /events/{name}`);
    /// absent when it declares none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<EventView>,
    /// The version new executions start on: declared by the host, or `g-<digest of the step
    /// graph>`.
    pub version: String,
    /// Each version this server has, or that executions still run or wait on, with how many.
    pub versions: Vec<VersionView>,
    /// The Serverless Workflow document a definition was read from (docs/DEFINITIONS.md);
    /// absent for a compiled workflow.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>, nullable = false)]
    pub definition: Option<Value>,
}

/// A version of a workflow and its executions in flight.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VersionView {
    /// `null`: the executions recorded before versions (continued on the newest).
    #[schema(required = true)]
    pub version: Option<String>,
    /// New executions start on it.
    pub current: bool,
    /// This server has it (and continues its executions).
    pub registered: bool,
    /// Its executions queued, running or suspended.
    pub in_flight: u64,
}

impl From<&agentry_engine::engine::VersionInFlight> for VersionView {
    fn from(v: &agentry_engine::engine::VersionInFlight) -> Self {
        Self {
            version: v.version.clone(),
            current: v.current,
            registered: v.registered,
            in_flight: v.in_flight,
        }
    }
}

/// An event a workflow declares, with the JSON Schema of its data.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventView {
    pub name: String,
    #[schema(value_type = Object)]
    pub schema: Value,
}

impl WorkflowDetail {
    /// The detail of `w` (its newest version) with its `versions`.
    pub fn of(w: &Workflow, versions: Vec<VersionView>) -> Self {
        Self {
            id: w.id().to_owned(),
            name: w.name().to_owned(),
            purpose: w.purpose().to_owned(),
            status: WorkflowStatus::Idle,
            steps_count: w.steps().len(),
            steps: w.steps().iter().map(StepView::from).collect(),
            input_schema: w.input_schema_json(),
            suspend_schema: w.suspend_schema_json().cloned(),
            resume_schema: w.resume_schema_json().cloned(),
            events: w
                .events()
                .map(|(name, schema)| EventView {
                    name: name.to_owned(),
                    schema: schema.clone(),
                })
                .collect(),
            version: w.version().to_owned(),
            versions,
            definition: w.source().cloned(),
        }
    }
}

/// `options` of execute and stream.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowOptions {
    /// User id for tracking.
    #[schema(max_length = 256)]
    pub user_id: Option<String>,
    /// Conversation context.
    #[schema(max_length = 256)]
    pub conversation_id: Option<String>,
    /// The execution's id, chosen by the caller (default: a new UUID v7). Reusing one is a 409.
    #[schema(pattern = "^[A-Za-z0-9._:@-]{1,256}$", example = "exp-1")]
    pub execution_id: Option<String>,
    /// Additional context data, handed to the steps.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub context: Option<Map<String, Value>>,
    /// Its priority in its workflow's queue (a queued workflow's; higher starts first;
    /// default: the input's value at the queue's priority pointer, else 0).
    #[schema(minimum = -1000, maximum = 1000)]
    pub priority: Option<i64>,
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

/// The suspension of a suspended execution, as execute, resume, lists and events show it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResultSuspension {
    pub suspended_at: Timestamp,
    pub reason: String,
    /// Index of the step that runs on resume.
    pub suspended_step_index: usize,
    /// Id of the step that runs on resume.
    pub step_id: String,
    /// When it resumes by itself if nobody resumes it (a durable timer).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub deadline: Option<Timestamp>,
    /// What the suspending step attached (valid against the suspend schema), when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub suspend_data: Option<Value>,
    /// The event its step waits for (`ctx.wait_for_event`): a delivery resumes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub event: Option<AwaitedEvent>,
}

impl From<&Suspension> for ResultSuspension {
    fn from(s: &Suspension) -> Self {
        Self {
            suspended_at: s.suspended_at.into(),
            reason: s.reason.clone(),
            suspended_step_index: s.step_index,
            step_id: s.step_id.clone(),
            deadline: s.deadline.map(Timestamp),
            suspend_data: s.data.clone(),
            event: AwaitedEvent::of(s),
        }
    }
}

/// When and why an execution was cancelled.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CancellationRecord {
    pub cancelled_at: Timestamp,
    #[schema(required = true)]
    pub reason: Option<String>,
}

impl From<&Cancellation> for CancellationRecord {
    fn from(c: &Cancellation) -> Self {
        Self {
            cancelled_at: c.cancelled_at.into(),
            reason: c.reason.clone(),
        }
    }
}

/// `data` of execute and resume (and, without `executionId`, of a stream's `workflow-result`):
/// the completed or suspended form.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"executionId": "exp-1", "startAt": "2026-11-23T10:00:00.000Z", "endAt": null, "status": "suspended", "result": null,
    "suspension": {"suspendedAt": "2026-11-23T10:00:00.002Z", "reason": "Manager approval required for amounts over 1000", "suspendedStepIndex": 0, "stepId": "check-approval"}}))]
pub struct ExecutionResult {
    pub execution_id: String,
    #[serde(flatten)]
    pub outcome: ExecutionOutcome,
}

/// How a run ended: its status, result, and the suspension, error or cancellation that goes
/// with that status.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionOutcome {
    pub start_at: Timestamp,
    /// `null` while suspended.
    #[schema(required = true)]
    pub end_at: Option<Timestamp>,
    pub status: WorkflowStatus,
    /// The workflow's result; `null` unless completed.
    #[schema(required = true)]
    pub result: Option<Value>,
    /// Present when suspended.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub suspension: Option<ResultSuspension>,
    /// Present when failed: the message.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub error: Option<String>,
    /// Present when cancelled.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub cancellation: Option<CancellationRecord>,
}

impl From<&ExecutionRecord> for ExecutionOutcome {
    fn from(r: &ExecutionRecord) -> Self {
        let state = &r.state;
        Self {
            start_at: r.start_at.into(),
            end_at: state.end_at().map(Timestamp),
            status: state.status().into(),
            result: state.result().cloned(),
            suspension: state.suspension().map(Into::into),
            error: state.error().map(str::to_owned),
            cancellation: state.cancellation().map(Into::into),
        }
    }
}

impl From<&ExecutionRecord> for ExecutionResult {
    fn from(r: &ExecutionRecord) -> Self {
        Self {
            execution_id: r.id.clone(),
            outcome: r.into(),
        }
    }
}

/// One execution of a list: what finds it again.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionSummary {
    pub execution_id: String,
    pub workflow_id: String,
    pub status: WorkflowStatus,
    pub start_at: Timestamp,
    #[schema(required = true)]
    pub end_at: Option<Timestamp>,
    pub updated_at: Timestamp,
    #[schema(required = true)]
    pub user_id: Option<String>,
    /// Present when suspended.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub suspension: Option<ResultSuspension>,
}

impl From<&ExecutionRecord> for ExecutionSummary {
    fn from(r: &ExecutionRecord) -> Self {
        Self {
            execution_id: r.id.clone(),
            workflow_id: r.workflow_id.clone(),
            status: r.state.status().into(),
            start_at: r.start_at.into(),
            end_at: r.state.end_at().map(Timestamp),
            updated_at: r.updated_at.into(),
            user_id: r.user_id.clone(),
            suspension: r.state.suspension().map(Into::into),
        }
    }
}

/// `data` of the executions list.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionList {
    pub executions: Vec<ExecutionSummary>,
    /// The `cursor` of the next page; `null` on the last one.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

/// How many executions one workflow has in each status.
#[derive(Debug, Serialize, ToSchema)]
pub struct StatusCounts {
    pub queued: u64,
    pub running: u64,
    pub suspended: u64,
    pub completed: u64,
    pub error: u64,
    pub cancelled: u64,
}

/// One workflow's counts.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowCounts {
    pub workflow_id: String,
    pub counts: StatusCounts,
}

/// `data` of the execution counts: every registered workflow.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExecutionCounts {
    pub workflows: Vec<WorkflowCounts>,
}

impl From<Vec<(String, HashMap<Status, u64>)>> for ExecutionCounts {
    fn from(counts: Vec<(String, HashMap<Status, u64>)>) -> Self {
        let workflows = counts
            .into_iter()
            .map(|(workflow_id, by_status)| {
                let n = |s| by_status.get(&s).copied().unwrap_or(0);
                WorkflowCounts {
                    workflow_id,
                    counts: StatusCounts {
                        queued: n(Status::Queued),
                        running: n(Status::Running),
                        suspended: n(Status::Suspended),
                        completed: n(Status::Completed),
                        error: n(Status::Error),
                        cancelled: n(Status::Cancelled),
                    },
                }
            })
            .collect();
        Self { workflows }
    }
}

/// The cursor of the page after `last`: its start (nanoseconds) and id, opaque to clients.
pub fn list_cursor(last: &ExecutionRecord) -> Option<String> {
    cursor_at(last.start_at, &last.id)
}

/// The cursor of the page after the item at time `at` with id `id` (a list's order: time,
/// then id), opaque to clients.
pub fn cursor_at(at: DateTime<Utc>, id: &str) -> Option<String> {
    let nanos = at.timestamp_nanos_opt()?;
    Some(format!("{nanos}.{id}"))
}

/// Reads a cursor of [`cursor_at`] (and so of [`list_cursor`]).
pub fn parse_list_cursor(cursor: &str) -> Option<(DateTime<Utc>, String)> {
    let (nanos, id) = cursor.split_once('.')?;
    let at = DateTime::from_timestamp_nanos(nanos.parse().ok()?);
    (!id.is_empty()).then(|| (at, id.to_owned()))
}

/// `data` of cancel.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CancelResult {
    pub execution_id: String,
    pub status: WorkflowStatus,
    #[schema(required = true)]
    pub cancellation: Option<CancellationRecord>,
}

impl From<&ExecutionRecord> for CancelResult {
    fn from(r: &ExecutionRecord) -> Self {
        Self {
            execution_id: r.id.clone(),
            status: r.state.status().into(),
            cancellation: r.state.cancellation().map(Into::into),
        }
    }
}

/// The suspension recorded by a suspend that took effect.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuspensionRecord {
    pub suspended_at: Timestamp,
    pub reason: String,
    /// Index of the step that runs on resume.
    pub step_index: usize,
    /// Id of the step that runs on resume.
    pub step_id: String,
}

/// A suspend request still waiting for the next step boundary.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingSuspension {
    pub requested_at: Timestamp,
    pub reason: String,
    pub pending: bool,
}

/// What a suspend request left.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum SuspendOutcome {
    Suspended(SuspensionRecord),
    Pending(PendingSuspension),
}

/// `data` of suspend: `suspended` with its suspension (200), or, when the step boundary was not
/// reached in time, the current status with the pending request (202).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuspendResult {
    pub execution_id: String,
    pub status: WorkflowStatus,
    /// `null` when the execution ended before the request took effect.
    #[schema(required = true)]
    pub suspension: Option<SuspendOutcome>,
}

impl From<&ExecutionRecord> for SuspendResult {
    fn from(r: &ExecutionRecord) -> Self {
        let suspension = match &r.state {
            ExecutionState::Suspended(s) => Some(SuspendOutcome::Suspended(SuspensionRecord {
                suspended_at: s.suspended_at.into(),
                reason: s.reason.clone(),
                step_index: s.step_index,
                step_id: s.step_id.clone(),
            })),
            // Still running after the wait: the request is recorded and takes effect at the
            // next step boundary.
            other => other.suspend_request().map(|q| {
                SuspendOutcome::Pending(PendingSuspension {
                    requested_at: q.requested_at.into(),
                    reason: q.reason.clone(),
                    pending: true,
                })
            }),
        };
        Self {
            execution_id: r.id.clone(),
            status: r.state.status().into(),
            suspension,
        }
    }
}

/// Where a step is: `skipped` for an `andWhen` whose condition did not hold.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum StepStatus {
    Running,
    Suspended,
    Completed,
    Skipped,
    Failed,
}

impl From<store::StepStatus> for StepStatus {
    fn from(s: store::StepStatus) -> Self {
        use store::StepStatus as S;
        match s {
            S::Running => Self::Running,
            S::Suspended => Self::Suspended,
            S::Completed => Self::Completed,
            S::Skipped => Self::Skipped,
            S::Failed => Self::Failed,
        }
    }
}

/// One failed attempt of a step.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttemptFailure {
    pub attempt: u32,
    pub error: String,
    pub at: Timestamp,
    /// This attempt failed the execution, which was then retried (`POST .../retry`): the
    /// attempts after it had a fresh budget.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub execution_retried: bool,
}

/// The record of one step (or child of a composite step).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepState {
    pub status: StepStatus,
    /// How many times the step was started: 1, or more when a crash, a lost lease or a shutdown
    /// interrupted an earlier attempt. Children of a composite step share its attempt.
    pub attempt: u32,
    pub input: Value,
    /// `null` until the step finishes.
    #[schema(required = true)]
    pub output: Option<Value>,
    pub started_at: Timestamp,
    #[schema(required = true)]
    pub ended_at: Option<Timestamp>,
    /// The failed attempts that were tried again (a step with retries).
    pub failures: Vec<AttemptFailure>,
    /// The composite step (`andAll`, `andRace`, `andWhen`) this one is a child of.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub parent_step_id: Option<String>,
}

impl From<&StepRecord> for StepState {
    fn from(s: &StepRecord) -> Self {
        Self {
            status: s.status.into(),
            attempt: s.attempt,
            input: s.input.clone(),
            output: s.output.clone(),
            started_at: s.started_at.into(),
            ended_at: s.ended_at.map(Timestamp),
            failures: s
                .failures
                .iter()
                .map(|f| AttemptFailure {
                    attempt: f.attempt,
                    error: f.error.clone(),
                    at: f.at.into(),
                    execution_retried: f.execution_retried,
                })
                .collect(),
            parent_step_id: s.parent.clone(),
        }
    }
}

/// The details a failed step left as its output (an object; reserved names left out).
fn failure_details(r: &ExecutionRecord, step_id: Option<&str>) -> Option<Map<String, Value>> {
    let step = r.progress.steps.get(step_id?)?;
    if step.status != agentry_engine::record::StepStatus::Failed {
        return None;
    }
    let Some(Value::Object(details)) = &step.output else {
        return None;
    };
    let details: Map<String, Value> = details
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "message" | "stepId"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!details.is_empty()).then_some(details)
}

/// The process that holds a running execution, and the fencing epoch of its hold.
#[derive(Debug, Serialize, ToSchema)]
pub struct LeaseRecord {
    pub node: String,
    pub epoch: i64,
}

/// The suspension of a suspended execution, as its state shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StateSuspension {
    pub suspended_at: Timestamp,
    pub reason: String,
    /// Index of the step that runs on resume.
    pub step_index: usize,
    /// Id of the step that runs on resume.
    pub step_id: String,
    /// What the suspending step attached (valid against the suspend schema), or `null`.
    #[schema(required = true)]
    pub suspend_data: Option<Value>,
    /// When it resumes by itself if nobody resumes it (a durable timer).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub deadline: Option<Timestamp>,
    /// The event its step waits for (`ctx.wait_for_event`): a delivery resumes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub event: Option<AwaitedEvent>,
}

/// The event a suspended step waits for.
#[derive(Debug, Serialize, ToSchema)]
pub struct AwaitedEvent {
    pub name: String,
    /// The key an event sent by key (`POST /events/{name}`) must carry; `null`: only a
    /// delivery to this execution wakes it.
    #[schema(required = true)]
    pub key: Option<String>,
    /// The other events that resume it as well, when it waits for the first of several
    /// (`ctx.wait_for_any_event`: a definition's `listen` with `any`, or with `until` an event).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<OtherAwaitedEvent>,
}

/// One of the other events a suspended step waits for.
#[derive(Debug, Serialize, ToSchema)]
pub struct OtherAwaitedEvent {
    pub name: String,
    /// The key it must carry; `null`: only a delivery to this execution.
    #[schema(required = true)]
    pub key: Option<String>,
}

impl AwaitedEvent {
    fn of(s: &Suspension) -> Option<Self> {
        s.event.as_ref().map(|e| Self {
            name: e.name.clone(),
            key: e.key.clone(),
            also: e
                .also
                .iter()
                .map(|a| OtherAwaitedEvent {
                    name: a.name.clone(),
                    key: a.key.clone(),
                })
                .collect(),
        })
    }
}

/// Why an execution failed.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StateError {
    pub message: String,
    /// The step that failed; `null` when the engine itself gave up.
    #[schema(required = true)]
    pub step_id: Option<String>,
    /// What the failed step said of its failure, when it said more than a message: for a
    /// definition (a Serverless Workflow document), the DSL's error object: `type`, `status`,
    /// `title`, `detail`, `instance`.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub details: Option<Map<String, Value>>,
}

/// A suspend requested from outside, waiting for the next step boundary.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuspendRequestRecord {
    pub requested_at: Timestamp,
    pub reason: String,
}

impl From<&PendingRequest> for SuspendRequestRecord {
    fn from(q: &PendingRequest) -> Self {
        Self {
            requested_at: q.requested_at.into(),
            reason: q.reason.clone(),
        }
    }
}

/// `data` of the state endpoint: the whole record of an execution.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionStateView {
    pub execution_id: String,
    pub workflow_id: String,
    /// The workflow version it started on (`null`: recorded before versions).
    #[schema(required = true)]
    pub version: Option<String>,
    /// Its version, while no live server has it: it waits (nothing continues it) until a
    /// server with that version runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub waiting_for_version: Option<String>,
    pub status: WorkflowStatus,
    pub start_at: Timestamp,
    #[schema(required = true)]
    pub end_at: Option<Timestamp>,
    pub updated_at: Timestamp,
    /// The input the execution was started with.
    pub input: Value,
    /// The context: the caller's entries, `userId` and the authenticated `user` when known.
    #[schema(value_type = Object)]
    pub context: Value,
    #[schema(required = true)]
    pub user_id: Option<String>,
    #[schema(required = true)]
    pub result: Option<Value>,
    /// Index of the next step to run.
    pub next_step_index: usize,
    /// Every step that started so far, by step id, in the order they started.
    #[schema(value_type = std::collections::BTreeMap<String, StepState>)]
    pub steps: StepsById,
    /// Which process runs it, while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub lease: Option<LeaseRecord>,
    /// Present when suspended.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub suspension: Option<StateSuspension>,
    /// Why it failed, when the execution failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub error: Option<StateError>,
    /// When and why, when the execution was cancelled.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub cancellation: Option<CancellationRecord>,
    /// Present while a suspend request waits for the next step boundary.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub suspend_request: Option<SuspendRequestRecord>,
    /// The events delivered to it (`POST .../events/{name}`, or sent by key and taken), oldest
    /// first: taken by a step, or waiting in its mailbox for the step that waits for them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mailbox: Vec<super::operations::MailboxEntry>,
    /// The execution and step it was forked from (`POST .../fork`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub forked_from: Option<super::operations::ForkedFrom>,
    /// Its place in its workflow's queue (an execution of a queued workflow).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub queue: Option<super::queues::QueueState>,
}

/// Step records by step id, in the order the steps started (a JSON object keeps that order).
#[derive(Debug)]
pub struct StepsById(Vec<(String, StepState)>);

impl Serialize for StepsById {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(id, step)| (id, step)))
    }
}

impl From<&ExecutionRecord> for StepsById {
    fn from(r: &ExecutionRecord) -> Self {
        // The mailbox's records are shown as the mailbox, not as steps; a wake's record is
        // the engine's own.
        let mut steps: Vec<(&String, &StepRecord)> = r
            .progress
            .steps
            .iter()
            .filter(|(id, _)| {
                !agentry_engine::engine::MailboxEvent::is_record(id)
                    && !agentry_engine::engine::is_wake_record(id)
            })
            .map(|(id, s)| (id, s.as_ref()))
            .collect();
        steps.sort_by_key(|(id, s)| (s.started_at, *id));
        Self(
            steps
                .into_iter()
                .map(|(id, s)| (id.clone(), s.into()))
                .collect(),
        )
    }
}

impl From<&ExecutionRecord> for ExecutionStateView {
    fn from(r: &ExecutionRecord) -> Self {
        let state = &r.state;
        Self {
            execution_id: r.id.clone(),
            workflow_id: r.workflow_id.clone(),
            version: r.workflow_version.clone(),
            waiting_for_version: None,
            queue: r.queue.as_ref().map(Into::into),
            status: state.status().into(),
            start_at: r.start_at.into(),
            end_at: state.end_at().map(Timestamp),
            updated_at: r.updated_at.into(),
            input: r.input.clone(),
            context: Value::Object(r.context.clone()),
            user_id: r.user_id.clone(),
            result: state.result().cloned(),
            next_step_index: r.progress.next_step,
            steps: r.into(),
            lease: r
                .lease
                .as_ref()
                .filter(|_| state.status() == Status::Running)
                .map(|l| LeaseRecord {
                    node: l.node.clone(),
                    epoch: l.epoch,
                }),
            suspension: match state {
                ExecutionState::Suspended(s) => Some(StateSuspension {
                    suspended_at: s.suspended_at.into(),
                    reason: s.reason.clone(),
                    step_index: s.step_index,
                    step_id: s.step_id.clone(),
                    suspend_data: s.data.clone(),
                    deadline: s.deadline.map(Timestamp),
                    event: AwaitedEvent::of(s),
                }),
                _ => None,
            },
            error: match state {
                ExecutionState::Error {
                    message, step_id, ..
                } => Some(StateError {
                    message: message.clone(),
                    step_id: step_id.clone(),
                    details: failure_details(r, step_id.as_deref()),
                }),
                _ => None,
            },
            cancellation: state.cancellation().map(Into::into),
            suspend_request: state.suspend_request().map(Into::into),
            mailbox: agentry_engine::engine::mailbox(r)
                .iter()
                .map(Into::into)
                .collect(),
            forked_from: super::operations::ForkedFrom::of(r),
        }
    }
}

/// A run's answer to a tool call (MCP's `run_<workflowId>`): the execution result, as execute
/// answers it, and when suspended how to resume it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunAnswer {
    #[serde(flatten)]
    pub result: ExecutionResult,
    /// Present when suspended.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub resume: Option<ResumeLink>,
}

/// How to resume a suspended execution over HTTP.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResumeLink {
    /// Always `POST`.
    pub method: &'static str,
    /// The resume route of this execution.
    pub path: String,
    /// The body's shape.
    #[schema(value_type = Object)]
    pub body: Value,
    /// The JSON Schema of `resumeData`, when the workflow declares one.
    #[schema(value_type = Option<Object>)]
    pub resume_schema: Option<Value>,
}
