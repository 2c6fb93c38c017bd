//! What the engine reports as it works, for whoever measures it (the Prometheus metrics of
//! `agentry-metrics`). Every method has an empty default, and [`NoTelemetry`] is what an
//! engine reports to until one is set.
//!
//! Calls are made on the path of the work they describe: an implementation must be quick
//! (count, observe, return) and must never block.

use std::time::Duration;

use crate::event::WorkflowEvent;
use crate::record::ExecutionRecord;

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
