//! agentry's Prometheus metrics: one [`Metrics`] registry per server, fed by the engine and
//! the agents through core's [`Telemetry`] trait, by the HTTP layer (requests, open streams and
//! WebSockets), and rendered in the text exposition format for `GET /metrics`.
//!
//! Label values come from what the server registered (workflow, step, agent, tool and model
//! names, route templates, status codes), never from raw client input, so the number of series
//! stays bounded.

use std::sync::Arc;
use std::time::Duration;

use agentry_agents::telemetry::{
    AgentTelemetry, GuardrailReport, ModelCallReport, ScoreReport, ToolCallReport,
};
use agentry_engine::event::{EventKind, WorkflowEvent};
use agentry_engine::store::ExecutionRecord;
use agentry_engine::telemetry::Telemetry;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

/// Buckets of request, step and model durations, in seconds: 1 ms to 1 minute.
const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Buckets of the time executions wait in a queue, in seconds: 1 ms to 1 hour.
const WAIT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];

/// Buckets of store commits, in seconds: 100 µs to 5 s.
const COMMIT_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// Buckets of live scores, from 0 to 1.
const SCORE_BUCKETS: &[f64] = &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];

/// Every metric of one server.
pub struct Metrics {
    registry: Registry,
    http_requests: IntCounterVec,
    http_duration: HistogramVec,
    executions_started: IntCounterVec,
    executions_completed: IntCounterVec,
    executions_failed: IntCounterVec,
    executions_cancelled: IntCounterVec,
    executions_suspended: IntCounterVec,
    step_duration: HistogramVec,
    step_retries: IntCounterVec,
    leases_held: IntGauge,
    lease_takeovers: IntCounter,
    open_streams: IntGauge,
    open_websockets: IntGauge,
    model_calls: IntCounterVec,
    model_duration: HistogramVec,
    model_tokens: IntCounterVec,
    tool_calls: IntCounterVec,
    guardrails: IntCounterVec,
    commit_duration: HistogramVec,
    spans_dropped: IntCounter,
    queue_depth: IntGaugeVec,
    queue_wait: HistogramVec,
    queue_starts: IntCounterVec,
    scores: HistogramVec,
    scores_dropped: IntCounterVec,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

fn counter(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("a valid counter");
    registry
        .register(Box::new(c.clone()))
        .expect("registered once");
    c
}

fn histogram(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
    buckets: &[f64],
) -> HistogramVec {
    let h = HistogramVec::new(
        HistogramOpts::new(name, help).buckets(buckets.to_vec()),
        labels,
    )
    .expect("a valid histogram");
    registry
        .register(Box::new(h.clone()))
        .expect("registered once");
    h
}

fn gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).expect("a valid gauge");
    registry
        .register(Box::new(g.clone()))
        .expect("registered once");
    g
}

fn gauges(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("a valid gauge");
    registry
        .register(Box::new(g.clone()))
        .expect("registered once");
    g
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let r = Registry::new();
        let takeovers = IntCounter::new(
            "agentry_lease_takeovers_total",
            "Executions this process took over after their owner went silent (or after its own restart).",
        )
        .expect("a valid counter");
        r.register(Box::new(takeovers.clone()))
            .expect("registered once");
        Self {
            http_requests: counter(
                &r,
                "agentry_http_requests_total",
                "HTTP requests answered, by method, route template and status.",
                &["method", "route", "status"],
            ),
            http_duration: histogram(
                &r,
                "agentry_http_request_duration_seconds",
                "Time to answer an HTTP request (to the start of a stream), by method, route template and status.",
                &["method", "route", "status"],
                LATENCY_BUCKETS,
            ),
            executions_started: counter(
                &r,
                "agentry_executions_started_total",
                "Executions started, by workflow.",
                &["workflow"],
            ),
            executions_completed: counter(
                &r,
                "agentry_executions_completed_total",
                "Executions that completed, by workflow.",
                &["workflow"],
            ),
            executions_failed: counter(
                &r,
                "agentry_executions_failed_total",
                "Executions that ended in error, by workflow.",
                &["workflow"],
            ),
            executions_cancelled: counter(
                &r,
                "agentry_executions_cancelled_total",
                "Executions cancelled, by workflow.",
                &["workflow"],
            ),
            executions_suspended: counter(
                &r,
                "agentry_executions_suspended_total",
                "Suspensions (a step waiting for a person or a deadline, or a suspend request), by workflow.",
                &["workflow"],
            ),
            step_duration: histogram(
                &r,
                "agentry_step_duration_seconds",
                "Time from a step's start to its completion, by workflow and step.",
                &["workflow", "step"],
                LATENCY_BUCKETS,
            ),
            step_retries: counter(
                &r,
                "agentry_step_retries_total",
                "Failed attempts of a step that were tried again, by workflow and step.",
                &["workflow", "step"],
            ),
            leases_held: gauge(
                &r,
                "agentry_leases_held",
                "Executions this process runs now (it holds their leases).",
            ),
            lease_takeovers: takeovers,
            open_streams: gauge(
                &r,
                "agentry_open_streams",
                "Server-Sent Event streams open now.",
            ),
            open_websockets: gauge(&r, "agentry_open_websockets", "WebSockets open now."),
            queue_depth: gauges(
                &r,
                "agentry_queue_depth",
                "Executions waiting in a queue (as this process last read it), by queue.",
                &["queue"],
            ),
            queue_wait: histogram(
                &r,
                "agentry_queue_wait_seconds",
                "Time an execution waited in its queue before a dequeue started it, by queue.",
                &["queue"],
                WAIT_BUCKETS,
            ),
            queue_starts: counter(
                &r,
                "agentry_queue_starts_total",
                "Executions this process started from a queue, by queue.",
                &["queue"],
            ),
            model_calls: counter(
                &r,
                "agentry_model_calls_total",
                "Model calls, by agent, model and outcome (ok or error).",
                &["agent", "model", "outcome"],
            ),
            model_duration: histogram(
                &r,
                "agentry_model_call_duration_seconds",
                "Time of a model call, by agent and model.",
                &["agent", "model"],
                LATENCY_BUCKETS,
            ),
            model_tokens: counter(
                &r,
                "agentry_model_tokens_total",
                "Tokens of model calls, by agent, model and kind (input or output).",
                &["agent", "model", "kind"],
            ),
            tool_calls: counter(
                &r,
                "agentry_tool_calls_total",
                "Tool calls, by agent, tool and outcome (ok or error).",
                &["agent", "tool", "outcome"],
            ),
            guardrails: counter(
                &r,
                "agentry_guardrail_actions_total",
                "Guardrails that acted, by agent, guardrail, point (input, output or tool) and action (tripped or rewrote).",
                &["agent", "guardrail", "point", "action"],
            ),
            scores: histogram(
                &r,
                "agentry_agent_score",
                "Live scores of agents' generations (0 to 1), by agent and scorer.",
                &["agent", "scorer"],
                SCORE_BUCKETS,
            ),
            scores_dropped: counter(
                &r,
                "agentry_agent_scores_dropped_total",
                "Generations sampled for live scoring but not scored (the scoring queue was full), by agent.",
                &["agent"],
            ),
            commit_duration: histogram(
                &r,
                "agentry_store_commit_duration_seconds",
                "Time for the store to acknowledge a durable write of an execution (group commit included), by kind (insert or checkpoint).",
                &["kind"],
                COMMIT_BUCKETS,
            ),
            spans_dropped: {
                let c = IntCounter::new(
                    "agentry_otel_spans_dropped_total",
                    "Trace spans not exported: the OTLP collector refused them or could not be reached.",
                )
                .expect("a valid counter");
                r.register(Box::new(c.clone())).expect("registered once");
                c
            },
            registry: r,
        }
    }

    /// Counts an answered HTTP request. `route` is the route's template (`/workflows/{id}`),
    /// never the raw path.
    pub fn http_request(&self, method: &str, route: &str, status: u16, duration: Duration) {
        let labels = [method, route, status_label(status)];
        self.http_requests.with_label_values(&labels).inc();
        self.http_duration
            .with_label_values(&labels)
            .observe(duration.as_secs_f64());
    }

    /// Counts an open Server-Sent Event stream until the guard is dropped.
    pub fn stream_opened(self: &Arc<Self>) -> OpenGuard {
        OpenGuard::new(self.open_streams.clone())
    }

    /// Counts an open WebSocket until the guard is dropped.
    pub fn websocket_opened(self: &Arc<Self>) -> OpenGuard {
        OpenGuard::new(self.open_websockets.clone())
    }

    /// The metrics in the text exposition format (`text/plain; version=0.0.4`), with the
    /// number of leases held now and of trace spans dropped so far.
    pub fn render(&self, leases_held: usize, spans_dropped: u64) -> String {
        self.leases_held
            .set(i64::try_from(leases_held).unwrap_or(i64::MAX));
        let seen = self.spans_dropped.get();
        if spans_dropped > seen {
            self.spans_dropped.inc_by(spans_dropped - seen);
        }
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .expect("the text encoder writes to memory");
        String::from_utf8(out).expect("the text format is UTF-8")
    }

    /// The content type of [`Metrics::render`]'s text.
    pub const CONTENT_TYPE: &'static str = "text/plain; version=0.0.4; charset=utf-8";
}

/// A status code as a label, from a fixed set of strings.
fn status_label(status: u16) -> &'static str {
    const CODES: [(u16, &str); 20] = [
        (200, "200"),
        (201, "201"),
        (202, "202"),
        (204, "204"),
        (101, "101"),
        (304, "304"),
        (400, "400"),
        (401, "401"),
        (403, "403"),
        (404, "404"),
        (405, "405"),
        (408, "408"),
        (409, "409"),
        (413, "413"),
        (415, "415"),
        (429, "429"),
        (500, "500"),
        (502, "502"),
        (503, "503"),
        (504, "504"),
    ];
    CODES
        .iter()
        .find(|(c, _)| *c == status)
        .map(|(_, s)| *s)
        .unwrap_or(match status {
            100..=199 => "1xx",
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            _ => "5xx",
        })
}

/// Holds one unit of an "open now" gauge; gives it back when dropped.
#[derive(Debug)]
pub struct OpenGuard(IntGauge);

impl OpenGuard {
    fn new(gauge: IntGauge) -> Self {
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Telemetry for Metrics {
    fn committed(&self, record: &ExecutionRecord, events: &[WorkflowEvent], commit: Duration) {
        let workflow = record.workflow_id.as_str();
        let mut kind = "checkpoint";
        for ev in events {
            match &ev.kind {
                EventKind::WorkflowQueued { .. } => kind = "insert",
                EventKind::WorkflowStart { resumed, .. } => {
                    if !resumed {
                        kind = "insert";
                        self.executions_started.with_label_values(&[workflow]).inc();
                    }
                }
                EventKind::StepComplete { step_id, .. } => {
                    if let Some(step) = record.progress.steps.get(step_id)
                        && let Some(ended) = step.ended_at
                    {
                        let took = (ended - step.started_at).to_std().unwrap_or_default();
                        self.step_duration
                            .with_label_values(&[workflow, step_id])
                            .observe(took.as_secs_f64());
                    }
                }
                EventKind::StepRetry { step_id, .. } => {
                    self.step_retries
                        .with_label_values(&[workflow, step_id])
                        .inc();
                }
                EventKind::WorkflowSuspended { .. } => {
                    self.executions_suspended
                        .with_label_values(&[workflow])
                        .inc();
                }
                EventKind::WorkflowComplete { .. } => {
                    self.executions_completed
                        .with_label_values(&[workflow])
                        .inc();
                }
                EventKind::WorkflowError { .. } => {
                    self.executions_failed.with_label_values(&[workflow]).inc();
                }
                EventKind::WorkflowCancelled { .. } => {
                    self.executions_cancelled
                        .with_label_values(&[workflow])
                        .inc();
                }
                // A durable agent run's calls are counted as model and tool calls.
                EventKind::StepStart { .. }
                | EventKind::WorkflowResult { .. }
                | EventKind::WorkflowHandover { .. }
                | EventKind::StepOutput { .. }
                | EventKind::WorkflowEventReceived { .. }
                | EventKind::WorkflowRetried { .. }
                | EventKind::Layer(_) => {}
            }
        }
        self.commit_duration
            .with_label_values(&[kind])
            .observe(commit.as_secs_f64());
    }

    fn took_over(&self, count: usize) {
        self.lease_takeovers.inc_by(count as u64);
    }

    fn dequeued(&self, queue: &str, waits: &[Duration]) {
        self.queue_starts
            .with_label_values(&[queue])
            .inc_by(waits.len() as u64);
        let wait = self.queue_wait.with_label_values(&[queue]);
        for w in waits {
            wait.observe(w.as_secs_f64());
        }
    }

    fn queue_depth(&self, queue: &str, depth: u64) {
        self.queue_depth
            .with_label_values(&[queue])
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }
}

/// The agents' model and tool calls.
impl AgentTelemetry for Metrics {
    fn model_call(&self, call: &ModelCallReport<'_>) {
        let outcome = if call.tokens.is_some() { "ok" } else { "error" };
        self.model_calls
            .with_label_values(&[call.agent, call.model, outcome])
            .inc();
        self.model_duration
            .with_label_values(&[call.agent, call.model])
            .observe(call.duration.as_secs_f64());
        if let Some((input, output)) = call.tokens {
            self.model_tokens
                .with_label_values(&[call.agent, call.model, "input"])
                .inc_by(input);
            self.model_tokens
                .with_label_values(&[call.agent, call.model, "output"])
                .inc_by(output);
        }
    }

    fn tool_call(&self, call: &ToolCallReport<'_>) {
        let outcome = if call.failed { "error" } else { "ok" };
        self.tool_calls
            .with_label_values(&[call.agent, call.tool, outcome])
            .inc();
    }

    fn guardrail(&self, report: &GuardrailReport<'_>) {
        let action = if report.tripped { "tripped" } else { "rewrote" };
        self.guardrails
            .with_label_values(&[
                report.agent,
                report.guardrail,
                report.point.as_str(),
                action,
            ])
            .inc();
    }

    fn score(&self, score: &ScoreReport<'_>) {
        self.scores
            .with_label_values(&[score.agent, score.scorer])
            .observe(score.value);
    }

    fn score_dropped(&self, agent: &str) {
        self.scores_dropped.with_label_values(&[agent]).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_help_and_type_for_every_family() {
        let m = Arc::new(Metrics::new());
        m.http_request("GET", "/agents", 200, Duration::from_millis(3));
        m.took_over(2);
        m.model_call(&ModelCallReport {
            agent: "assistant",
            model: "offline",
            duration: Duration::from_millis(1),
            tokens: Some((3, 4)),
        });
        m.score(&ScoreReport {
            agent: "assistant",
            scorer: "relevance",
            value: 0.75,
        });
        m.dequeued("enrich-customer", &[Duration::from_millis(20)]);
        m.queue_depth("enrich-customer", 7);
        let guard = m.stream_opened();
        let text = m.render(5, 3);
        assert!(
            text.contains("agentry_queue_depth{queue=\"enrich-customer\"} 7"),
            "{text}"
        );
        assert!(
            text.contains("agentry_queue_starts_total{queue=\"enrich-customer\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("agentry_queue_wait_seconds_count{queue=\"enrich-customer\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE agentry_http_requests_total counter"),
            "{text}"
        );
        assert!(
            text.contains(
                "agentry_http_requests_total{method=\"GET\",route=\"/agents\",status=\"200\"} 1"
            ),
            "{text}"
        );
        assert!(text.contains("agentry_lease_takeovers_total 2"), "{text}");
        assert!(text.contains("agentry_leases_held 5"), "{text}");
        assert!(
            text.contains("agentry_otel_spans_dropped_total 3"),
            "{text}"
        );
        assert!(text.contains("agentry_open_streams 1"), "{text}");
        assert!(
            text.contains(
                "agentry_model_tokens_total{agent=\"assistant\",kind=\"output\",model=\"offline\"} 4"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "agentry_agent_score_bucket{agent=\"assistant\",scorer=\"relevance\",le=\"0.8\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("agentry_agent_score_sum{agent=\"assistant\",scorer=\"relevance\"} 0.75"),
            "{text}"
        );
        drop(guard);
        assert!(m.render(0, 3).contains("agentry_open_streams 0"));
    }

    #[test]
    fn odd_statuses_share_a_class_label() {
        assert_eq!(status_label(200), "200");
        assert_eq!(status_label(418), "4xx");
        assert_eq!(status_label(599), "5xx");
    }
}
