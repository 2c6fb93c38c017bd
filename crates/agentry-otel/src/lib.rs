//! OpenTelemetry traces for agentry: the spans its crates open with `tracing` (an HTTP request,
//! an execution, a step, an agent's generation, a model call, a tool call) exported over OTLP by
//! the official SDK, set up by the standard variables and off when no endpoint is set:
//!
//! | variable | meaning |
//! |---|---|
//! | `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) | the collector; unset: no export |
//! | `OTEL_EXPORTER_OTLP_PROTOCOL` | `http/protobuf` (default), `grpc` |
//! | `OTEL_SERVICE_NAME` | the service's name (default `agentry`) |
//! | `OTEL_TRACES_SAMPLER` (`_ARG`) | `parentbased_always_on` (default), `traceidratio`, ... |
//! | `OTEL_RESOURCE_ATTRIBUTES` | more resource attributes, `k=v,k2=v2` |
//!
//! Export never holds up a request: spans go to a bounded queue that a background task sends in
//! batches; when the collector is down or the queue is full they are dropped, and counted
//! ([`dropped_spans`], which `/metrics` shows as `agentry_otel_spans_dropped_total`).
//!
//! W3C trace context: [`continue_trace`] makes a span the child of an incoming `traceparent`;
//! [`traceparent`] is the current span's, to store and to link to later ([`link_to`]).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter,
};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Spans a batch may hold in its queue before new ones are dropped.
const MAX_QUEUE: usize = 4096;

static DROPPED: AtomicU64 = AtomicU64::new(0);
static ENABLED: OnceLock<bool> = OnceLock::new();

/// Spans that were not exported: the collector refused them or could not be reached.
pub fn dropped_spans() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Whether traces are exported (an endpoint is configured and [`init`] ran).
pub fn enabled() -> bool {
    ENABLED.get().copied().unwrap_or(false)
}

/// An exporter that counts the spans of every batch it failed to send.
#[derive(Debug)]
struct Counting<E>(E);

impl<E: SpanExporter> SpanExporter for Counting<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len() as u64;
        let result = self.0.export(batch).await;
        if result.is_err() {
            DROPPED.fetch_add(n, Ordering::Relaxed);
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.0.set_resource(resource);
    }
}

/// What keeps the export running; dropping it (or [`Tracing::shutdown`]) flushes what is queued.
#[derive(Debug)]
pub struct Tracing {
    provider: SdkTracerProvider,
}

impl Tracing {
    /// Sends what is queued, within a few seconds, and stops.
    pub fn shutdown(self) {
        let _ = self.provider.shutdown_with_timeout(Duration::from_secs(5));
    }
}

/// Whether the standard variables name a collector.
fn endpoint_configured() -> bool {
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|v| std::env::var(v).is_ok_and(|s| !s.trim().is_empty()))
}

/// Sets up the export from the standard variables: `None` (and nothing exported) when no
/// endpoint is set; else the `tracing` layer to add to the subscriber, and the handle that keeps
/// the export running. Must run inside a Tokio runtime.
pub fn init<S>() -> Result<Option<(impl tracing_subscriber::Layer<S> + 'static, Tracing)>, String>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    if !endpoint_configured() {
        let _ = ENABLED.set(false);
        return Ok(None);
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .build()
        .map_err(|e| format!("OTLP exporter: {e}"))?;
    let processor = BatchSpanProcessor::builder(Counting(exporter))
        .with_batch_config(
            BatchConfigBuilder::default()
                .with_max_queue_size(MAX_QUEUE)
                .with_scheduled_delay(Duration::from_millis(500))
                .build(),
        )
        .build();
    let mut resource = Resource::builder();
    if std::env::var("OTEL_SERVICE_NAME").is_err() {
        resource = resource.with_service_name("agentry");
    }
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource.build())
        .build();
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let tracer = provider.tracer("agentry");
    let _ = ENABLED.set(true);
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_tracked_inactivity(false);
    Ok(Some((layer, Tracing { provider })))
}

/// Headers to read a trace context from.
struct Headers<'a>(Vec<(&'a str, &'a str)>);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| *v)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|(k, _)| *k).collect()
    }
}

/// Makes `span` the child of the W3C trace context in `headers` (`traceparent`, `tracestate`),
/// when there is a valid one.
pub fn continue_trace<'a>(span: &tracing::Span, headers: impl Iterator<Item = (&'a str, &'a str)>) {
    let headers = Headers(headers.collect());
    if headers.get("traceparent").is_none() {
        return;
    }
    let cx = TraceContextPropagator::new().extract(&headers);
    if cx.span().span_context().is_valid() {
        let _ = span.set_parent(cx);
    }
}

/// The current span's W3C `traceparent`, when traces are exported and the span is sampled.
pub fn traceparent() -> Option<String> {
    if !enabled() {
        return None;
    }
    let cx = tracing::Span::current().context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        )
    })
}

/// Renames `span` (its OpenTelemetry name), also once it has started.
pub fn rename(span: &tracing::Span, name: String) {
    if enabled() {
        span.context().span().update_name(name);
    }
}

/// Links `span` to the span a `traceparent` names (a resumed or recovered execution to the
/// trace that started it).
pub fn link_to(span: &tracing::Span, traceparent: &str) {
    let headers = Headers(vec![("traceparent", traceparent)]);
    let cx = TraceContextPropagator::new().extract(&headers);
    let sc = cx.span().span_context().clone();
    if sc.is_valid() {
        span.add_link(sc);
    }
}

/// Core's [`TraceContext`](agentry_engine::telemetry::TraceContext) on OpenTelemetry: what an
/// engine is given when traces are exported, so that executions join their traces.
#[derive(Debug, Default, Clone, Copy)]
pub struct OtelTraceContext;

impl agentry_engine::telemetry::TraceContext for OtelTraceContext {
    fn current(&self) -> Option<String> {
        traceparent()
    }

    fn link(&self, span: &tracing::Span, traceparent: &str) {
        link_to(span, traceparent);
    }
}
