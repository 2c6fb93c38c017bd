//! What the engine and the agents report as they work, for whoever measures them (the
//! Prometheus metrics of `agentry-metrics`). Every method has an empty default, and
//! [`NoTelemetry`] is what an engine or a hub reports to until one is set.
//!
//! Calls are made on the path of the work they describe: an implementation must be quick
//! (count, observe, return) and must never block.

use std::time::Duration;

use crate::event::WorkflowEvent;
use crate::store::ExecutionRecord;

/// A model call as the agents report it.
#[derive(Debug, Clone, Copy)]
pub struct ModelCallReport<'a> {
    pub agent: &'a str,
    /// The model's name (`offline`, `gpt-4o-mini`, ...).
    pub model: &'a str,
    pub duration: Duration,
    /// Token counts of a call that answered; `None` for one that failed.
    pub tokens: Option<(u64, u64)>,
}

/// The label of a name the server did not register (a tool a model made up).
pub const UNKNOWN: &str = "unknown";

/// A tool call as the agents report it.
#[derive(Debug, Clone, Copy)]
pub struct ToolCallReport<'a> {
    pub agent: &'a str,
    /// A tool the agent has, or [`UNKNOWN`] for a name the model made up: labels take only
    /// registered names, so the series stay bounded whatever a model answers.
    pub tool: &'a str,
    pub duration: Duration,
    /// The tool answered with an error (or does not exist).
    pub failed: bool,
}

pub trait Telemetry: Send + Sync + 'static {
    /// A write of `record` (as it stands after the write) committed `events` to the store,
    /// which took `commit` to acknowledge it (group commit included). Called once per durable
    /// write, by the process that made it.
    fn committed(&self, record: &ExecutionRecord, events: &[WorkflowEvent], commit: Duration) {
        let _ = (record, events, commit);
    }

    /// A dequeue pass of `queue` started executions that waited `waits` in it.
    fn dequeued(&self, queue: &str, waits: &[Duration]) {
        let _ = (queue, waits);
    }

    /// How many executions wait in `queue` (read about once a second by each replica).
    fn queue_depth(&self, queue: &str, depth: u64) {
        let _ = (queue, depth);
    }

    /// A recovery pass took over `count` executions whose owner went silent.
    fn took_over(&self, count: usize) {
        let _ = count;
    }

    fn model_call(&self, call: &ModelCallReport<'_>) {
        let _ = call;
    }

    fn tool_call(&self, call: &ToolCallReport<'_>) {
        let _ = call;
    }
}

/// Reports to nobody.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoTelemetry;

impl Telemetry for NoTelemetry {}

/// How executions join distributed traces: set (`EngineConfig::trace`) when traces are exported.
/// An execution started inside a traced request records that request's W3C `traceparent` in its
/// context (`context.traceparent`); a later run of it (a resume, a recovery on another process)
/// links its span to that trace.
pub trait TraceContext: Send + Sync + std::fmt::Debug + 'static {
    /// The current span's W3C `traceparent`, if it is sampled.
    fn current(&self) -> Option<String>;

    /// Links `span` to the span `traceparent` names.
    fn link(&self, span: &tracing::Span, traceparent: &str);
}

/// The context key of the `traceparent` an execution was started under.
pub const TRACEPARENT: &str = "traceparent";

/// Links a run's span to the trace that started its execution, unless this run is that start.
pub(crate) fn link_to_start(
    trace: &dyn TraceContext,
    span: &tracing::Span,
    context: &serde_json::Map<String, serde_json::Value>,
) {
    if let Some(start) = context.get(TRACEPARENT).and_then(|v| v.as_str())
        && trace.current().as_deref() != Some(start)
    {
        trace.link(span, start);
    }
}
