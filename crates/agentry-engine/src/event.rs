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
use serde_json::{Map, Value};

use crate::record::ExecutionRecord;
use crate::state::{Cancellation, Suspension};
use crate::step_type::StepType;

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
    /// What a layer built on the engine (the agents, ...) reports about a step as it runs, in a
    /// type of its own. Written last: a stored event whose type is none of the engine's reads
    /// back as this.
    #[serde(untagged)]
    Layer(LayerEvent),
}

/// An event of a layer built on the engine: its own type (`{"type": "agent-model-call", ...}`)
/// and fields, which the engine stores and reports without reading them. The layer that writes
/// a type reads it ([`LayerEvent::decode`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LayerEvent {
    /// `type` first, then the event's fields.
    fields: Map<String, Value>,
    /// For the execution's live subscribers in this process only, never stored (a piece of
    /// streamed text, a tool's progress).
    #[serde(skip)]
    live: bool,
}

impl LayerEvent {
    /// The event `event` (a value that serializes as an object with a `type`), to be stored
    /// in the execution's log.
    pub fn stored<T: Serialize>(event: &T) -> Self {
        Self::new(event, false)
    }

    /// The event `event`, for the execution's live subscribers in this process only.
    pub fn live<T: Serialize>(event: &T) -> Self {
        Self::new(event, true)
    }

    fn new<T: Serialize>(event: &T, live: bool) -> Self {
        let fields = match serde_json::to_value(event) {
            Ok(Value::Object(fields)) => fields,
            _ => Map::new(),
        };
        Self { fields, live }
    }

    /// Its type, as its layer named it.
    pub fn type_name(&self) -> &str {
        self.fields
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// Its fields, `type` among them.
    pub fn fields(&self) -> &Map<String, Value> {
        &self.fields
    }

    /// Read back as the type its layer wrote it with; `None` for an event of another layer.
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        T::deserialize(&Value::Object(self.fields.clone())).ok()
    }
}

impl EventKind {
    /// Whether the event is part of the execution's stored log.
    pub fn is_stored(&self) -> bool {
        !matches!(
            self,
            EventKind::WorkflowResult { .. } | EventKind::WorkflowHandover { .. }
        ) && !matches!(self, EventKind::Layer(layer) if layer.live)
    }

    /// The spec's event type name (a layer's event: the name its layer gave it).
    pub fn type_name(&self) -> &str {
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
            EventKind::Layer(layer) => layer.type_name(),
        }
    }
}
