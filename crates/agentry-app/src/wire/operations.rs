//! The workflow operations' bodies and answers: events into executions (to one, or by key),
//! retry and fork.

use agentry_engine::ExecutionRecord;
use agentry_engine::engine::{Delivered, MailboxEvent, Published};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::{Timestamp, WorkflowStatus};

/// The body of `POST /workflows/{id}/executions/{executionId}/events/{name}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventRequest {
    /// The event's data: valid against the schema the workflow declares for the event.
    #[serde(default)]
    pub data: Value,
    /// Names the event: the same id again is delivered once (the answer is the first
    /// delivery's). A fresh one when absent. 1 to 256 letters, digits, `-`, `_`, `.` or `:`.
    #[serde(default)]
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,256}$")]
    pub event_id: Option<String>,
}

/// The body of `POST /events/{name}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PublishRequest {
    /// Which executions take it: those waiting for the event with this key (an order id, an
    /// email thread). At most 256 characters.
    #[schema(min_length = 1, max_length = 256)]
    pub key: String,
    /// The event's data: valid against the schema of every workflow that declares the event.
    #[serde(default)]
    pub data: Value,
    /// Names the event: the same id again is sent once (the answer is the first sending's).
    /// 1 to 256 letters, digits, `-`, `_`, `.` or `:`.
    #[serde(default)]
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,256}$")]
    pub event_id: Option<String>,
}

/// What a delivery to one execution did.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventDelivery {
    pub event_id: String,
    pub workflow_id: String,
    pub execution_id: String,
    /// `resumed`: the step waiting for the event took it and the execution runs on; `queued`:
    /// it waits in the execution's mailbox for the step that waits for it.
    #[schema(example = "resumed")]
    pub delivery: String,
    /// The id was delivered before: this is that delivery's outcome (nothing was delivered
    /// again).
    pub duplicate: bool,
    /// The execution's status after the delivery.
    pub status: WorkflowStatus,
}

impl From<&Delivered> for EventDelivery {
    fn from(d: &Delivered) -> Self {
        Self {
            event_id: d.event_id.clone(),
            workflow_id: d.record.workflow_id.clone(),
            execution_id: d.record.id.clone(),
            delivery: d.delivery.as_str().to_owned(),
            duplicate: d.duplicate,
            status: d.record.state.status().into(),
        }
    }
}

/// An execution an event woke.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WokenExecution {
    pub workflow_id: String,
    pub execution_id: String,
}

impl From<&ExecutionRecord> for WokenExecution {
    fn from(r: &ExecutionRecord) -> Self {
        Self {
            workflow_id: r.workflow_id.clone(),
            execution_id: r.id.clone(),
        }
    }
}

/// What an event sent by key did.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventPublished {
    pub event_id: String,
    pub name: String,
    pub key: String,
    /// The executions that waited for it and took it (for a duplicate: the first sending's).
    pub woken: Vec<WokenExecution>,
    /// The id was sent before: nothing was sent again.
    pub duplicate: bool,
    /// Until when an execution that waits for it later (with this key) still takes it.
    pub kept_until: Timestamp,
}

impl EventPublished {
    pub fn of(p: &Published, name: &str, key: &str) -> Self {
        Self {
            event_id: p.event_id.clone(),
            name: name.to_owned(),
            key: key.to_owned(),
            woken: p.woken.iter().map(Into::into).collect(),
            duplicate: p.duplicate,
            kept_until: p.kept_until.into(),
        }
    }
}

/// What a CloudEvent sent to `POST /events` did: it was sent by each key its listeners wait
/// with (read from it by each workflow that listens for its type).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloudEventPublished {
    /// The CloudEvent's `id`.
    pub id: String,
    /// The CloudEvent's `type`: the event's name.
    #[serde(rename = "type")]
    pub type_: String,
    /// One sending per key (none when no workflow listens for the type).
    pub sent: Vec<EventPublished>,
}

/// An event in an execution's mailbox, as its state shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MailboxEntry {
    pub event_id: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub key: Option<String>,
    pub data: Value,
    pub received_at: Timestamp,
    /// `waiting` (no step took it yet) or `taken`.
    #[schema(example = "taken")]
    pub status: &'static str,
    /// The step that took it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub taken_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub taken_at: Option<Timestamp>,
}

impl From<&MailboxEvent> for MailboxEntry {
    fn from(e: &MailboxEvent) -> Self {
        // The journal entry that took it is `<step>/event-<n>`: the state names the step.
        let taken_by = e
            .taken
            .as_ref()
            .map(|(entry, _)| entry.split('/').next().unwrap_or(entry).to_owned());
        Self {
            event_id: e.event_id.clone(),
            name: e.name.clone(),
            key: e.key.clone(),
            data: e.data.clone(),
            received_at: e.received_at.into(),
            status: if e.taken.is_some() {
                "taken"
            } else {
                "waiting"
            },
            taken_by,
            taken_at: e.taken.as_ref().map(|(_, at)| Timestamp(*at)),
        }
    }
}

/// The body of `POST /workflows/{id}/executions/{executionId}/fork`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForkRequest {
    /// The first step that runs again; the steps before it are copied from the source
    /// execution (their outputs; each must have finished there).
    pub from_step: String,
    /// The new execution's input (valid against the workflow's input schema); the source's
    /// when absent.
    #[serde(default)]
    pub input: Option<Value>,
    /// The new execution's id (a fresh one when absent).
    #[serde(default)]
    pub execution_id: Option<String>,
}

/// Where a forked execution comes from.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForkedFrom {
    pub execution_id: String,
    /// The step it ran again from.
    pub step_id: String,
}

impl ForkedFrom {
    /// The origin a forked execution's context names.
    pub fn of(r: &ExecutionRecord) -> Option<Self> {
        let origin = r.context.get(agentry_engine::engine::FORKED_FROM)?;
        Some(Self {
            execution_id: origin.get("executionId")?.as_str()?.to_owned(),
            step_id: origin.get("stepId")?.as_str()?.to_owned(),
        })
    }
}
