//! Logs over HTTP: a `tracing` layer that keeps the process's recent log records in a bounded
//! ring buffer (and broadcasts each new one to live subscribers), the filter of `GET /api/logs`
//! and `/ws/logs`, and the `GET /api/logs` route.
//!
//! Each record carries the execution, workflow and agent it belongs to, taken from the event's
//! own `execution_id`, `workflow_id` and `agent_id` fields or from the nearest enclosing span
//! that has them (the engine runs every execution inside an `execution` span carrying both).

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Mutex, MutexGuard, OnceLock};

use actix_web::{HttpResponse, get, web};
use chrono::{DateTime, SubsecRound, Utc};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};
use tokio::sync::broadcast;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{FilterExt, Targets, filter_fn};
use tracing_subscriber::layer::{Context, Filter};
use tracing_subscriber::registry::LookupSpan;

use crate::envelope;
use crate::error::ApiError;
use crate::wire;

/// How many records the process keeps by default.
pub const DEFAULT_CAPACITY: usize = 2000;
/// How many records a query returns when it names no `limit`.
pub const DEFAULT_LIMIT: usize = 100;
/// The most records one query returns (a larger `limit` is lowered to this).
pub const MAX_LIMIT: usize = 1000;
/// How many records a live subscriber may fall behind before it misses some.
const LIVE_CAPACITY: usize = 1024;

/// Severity of a record, least severe first (so `>=` means "at least as severe").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

impl LogLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }

    /// Parses `trace`, `debug`, `info`, `warn` (or `warning`) and `error`, in any case.
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "trace" => Some(LogLevel::Trace),
            "debug" => Some(LogLevel::Debug),
            "info" => Some(LogLevel::Info),
            "warn" | "warning" => Some(LogLevel::Warn),
            "error" => Some(LogLevel::Error),
            _ => None,
        }
    }
}

impl From<Level> for LogLevel {
    fn from(l: Level) -> Self {
        match l {
            Level::TRACE => LogLevel::Trace,
            Level::DEBUG => LogLevel::Debug,
            Level::INFO => LogLevel::Info,
            Level::WARN => LogLevel::Warn,
            _ => LogLevel::Error,
        }
    }
}

impl fmt::Display for LogLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for LogLevel {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

fn serialize_iso<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&wire::iso(*t))
}

/// One captured log record, as `/api/logs` and `/ws/logs` show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogRecord {
    /// When the event happened, to the millisecond (ISO 8601, UTC).
    #[serde(serialize_with = "serialize_iso")]
    pub timestamp: DateTime<Utc>,
    pub level: LogLevel,
    /// The event's target (usually the module path, e.g. `agentry_core::engine`).
    pub target: String,
    pub message: String,
    /// The event's other fields, by the names they were logged with.
    pub fields: Map<String, Value>,
    pub agent_id: Option<String>,
    pub workflow_id: Option<String>,
    pub execution_id: Option<String>,
}

impl LogRecord {
    /// A record stamped now (truncated to the millisecond, the precision of the wire format, so
    /// that `since=<a record's timestamp>` excludes that record).
    pub fn now(level: LogLevel, target: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            timestamp: Utc::now().trunc_subsecs(3),
            level,
            target: target.into(),
            message: message.into(),
            fields: Map::new(),
            agent_id: None,
            workflow_id: None,
            execution_id: None,
        }
    }

    /// The record as a JSON object whose first key is `"type": "log"` (a `/ws/logs` message).
    pub fn to_message(&self) -> Value {
        let mut out = Map::new();
        out.insert("type".into(), Value::String("log".into()));
        if let Ok(Value::Object(m)) = serde_json::to_value(self) {
            out.extend(m);
        }
        Value::Object(out)
    }
}

/// The captured records of the process: a ring buffer of the most recent ones and a broadcast
/// of each new one.
pub struct LogHub {
    capacity: usize,
    ring: Mutex<VecDeque<std::sync::Arc<LogRecord>>>,
    live: broadcast::Sender<std::sync::Arc<LogRecord>>,
}

impl fmt::Debug for LogHub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogHub")
            .field("capacity", &self.capacity)
            .field("len", &self.len())
            .finish()
    }
}

/// A record shared between the buffer and the live subscribers.
pub type SharedRecord = std::sync::Arc<LogRecord>;

impl LogHub {
    /// A hub keeping the last `capacity` records (at least one).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        let (live, _) = broadcast::channel(LIVE_CAPACITY);
        Self {
            capacity,
            ring: Mutex::new(VecDeque::with_capacity(capacity.min(4096))),
            live,
        }
    }

    /// The hub of the process, with [`DEFAULT_CAPACITY`] records; [`LogLayer::new`] writes to it
    /// and the routes read it.
    pub fn global() -> &'static LogHub {
        static HUB: OnceLock<LogHub> = OnceLock::new();
        HUB.get_or_init(|| LogHub::new(DEFAULT_CAPACITY))
    }

    fn ring(&self) -> MutexGuard<'_, VecDeque<SharedRecord>> {
        self.ring.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many records are kept now.
    pub fn len(&self) -> usize {
        self.ring().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keeps `record` (dropping the oldest one when full) and sends it to live subscribers.
    pub fn push(&self, record: LogRecord) {
        let record = SharedRecord::new(record);
        // Under the lock, so that `subscribe_with_backlog` sees every record exactly once.
        let mut ring = self.ring();
        if ring.len() == self.capacity {
            ring.pop_front();
        }
        ring.push_back(record.clone());
        // No subscriber is not an error.
        let _ = self.live.send(record);
    }

    /// The last `query.limit` records matching `query`, oldest first.
    pub fn query(&self, query: &LogQuery) -> Vec<SharedRecord> {
        Self::select(&self.ring(), query)
    }

    fn select(ring: &VecDeque<SharedRecord>, query: &LogQuery) -> Vec<SharedRecord> {
        let mut out: Vec<SharedRecord> = ring
            .iter()
            .rev()
            .filter(|r| query.matches(r))
            .take(query.limit)
            .cloned()
            .collect();
        out.reverse();
        out
    }

    /// Every record pushed from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<SharedRecord> {
        self.live.subscribe()
    }

    /// The records [`query`](Self::query) would answer and a subscription to every later record,
    /// taken at the same instant: nothing is missed and nothing comes twice.
    pub fn subscribe_with_backlog(
        &self,
        query: &LogQuery,
    ) -> (Vec<SharedRecord>, broadcast::Receiver<SharedRecord>) {
        let ring = self.ring();
        let rx = self.live.subscribe();
        (Self::select(&ring, query), rx)
    }
}

/// The query string of `/api/logs` and `/ws/logs`, as sent (every value a string, validated by
/// [`LogQuery::from_params`]); its documentation is both routes' parameters.
#[derive(Debug, Default, Clone, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct LogQueryParams {
    /// Minimum severity (`warning` is `warn`; any case).
    #[param(value_type = Option<crate::openapi::LogLevel>)]
    pub level: Option<String>,
    /// Only records of this agent.
    pub agent_id: Option<String>,
    /// Only records of this workflow.
    pub workflow_id: Option<String>,
    /// Only records of this execution.
    pub execution_id: Option<String>,
    /// Only records strictly after this ISO 8601 instant, e.g. `2026-01-31T12:00:00.000Z`.
    #[param(format = DateTime)]
    pub since: Option<String>,
    /// At most this many records, the newest (default 100; more than 1000 is lowered to 1000).
    #[param(value_type = Option<u32>, minimum = 1)]
    pub limit: Option<String>,
}

/// Which records to return.
#[derive(Debug, Clone, PartialEq)]
pub struct LogQuery {
    /// Minimum severity: a record passes when its level is at least this severe.
    pub level: Option<LogLevel>,
    pub agent_id: Option<String>,
    pub workflow_id: Option<String>,
    pub execution_id: Option<String>,
    /// Only records strictly after this instant.
    pub since: Option<DateTime<Utc>>,
    /// At most this many records (the newest ones).
    pub limit: usize,
}

impl Default for LogQuery {
    fn default() -> Self {
        Self {
            level: None,
            agent_id: None,
            workflow_id: None,
            execution_id: None,
            since: None,
            limit: DEFAULT_LIMIT,
        }
    }
}

/// An empty parameter counts as absent.
fn present(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.trim().is_empty())
}

impl LogQuery {
    /// Validates the query string; a bad value is a 400 naming the parameter.
    pub fn from_params(p: LogQueryParams) -> Result<Self, ApiError> {
        let level = match present(p.level) {
            None => None,
            Some(s) => Some(LogLevel::parse(s.trim()).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "Invalid level {s:?}: expected trace, debug, info, warn or error"
                ))
            })?),
        };
        let since = match present(p.since) {
            None => None,
            Some(s) => Some(
                DateTime::parse_from_rfc3339(s.trim())
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|e| {
                        ApiError::bad_request(format!(
                            "Invalid since {s:?}: expected an ISO 8601 timestamp such as \
                             2026-01-31T12:00:00.000Z ({e})"
                        ))
                    })?,
            ),
        };
        let limit = match present(p.limit) {
            None => DEFAULT_LIMIT,
            Some(s) => match s.trim().parse::<u64>() {
                Ok(n) if n >= 1 => usize::try_from(n).unwrap_or(MAX_LIMIT).min(MAX_LIMIT),
                _ => {
                    return Err(ApiError::bad_request(format!(
                        "Invalid limit {s:?}: expected a whole number from 1 to {MAX_LIMIT}"
                    )));
                }
            },
        };
        Ok(Self {
            level,
            agent_id: present(p.agent_id),
            workflow_id: present(p.workflow_id),
            execution_id: present(p.execution_id),
            since,
            limit,
        })
    }

    /// Whether `r` passes every filter (all but `limit`).
    pub fn matches(&self, r: &LogRecord) -> bool {
        fn same(want: &Option<String>, have: &Option<String>) -> bool {
            want.as_ref().is_none_or(|w| have.as_ref() == Some(w))
        }
        self.level.is_none_or(|l| r.level >= l)
            && same(&self.agent_id, &r.agent_id)
            && same(&self.workflow_id, &r.workflow_id)
            && same(&self.execution_id, &r.execution_id)
            && self.since.is_none_or(|s| r.timestamp > s)
    }
}

/// The ids a span carries, kept in its extensions.
#[derive(Debug, Default, Clone)]
struct SpanIds {
    agent_id: Option<String>,
    workflow_id: Option<String>,
    execution_id: Option<String>,
}

impl SpanIds {
    fn set(&mut self, name: &str, value: String) -> bool {
        let slot = match name {
            "agent_id" => &mut self.agent_id,
            "workflow_id" => &mut self.workflow_id,
            "execution_id" => &mut self.execution_id,
            _ => return false,
        };
        *slot = Some(value);
        true
    }

    fn is_empty(&self) -> bool {
        self.agent_id.is_none() && self.workflow_id.is_none() && self.execution_id.is_none()
    }
}

/// Collects the ids of a span.
struct IdVisitor<'a>(&'a mut SpanIds);

impl Visit for IdVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.set(field.name(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if matches!(field.name(), "agent_id" | "workflow_id" | "execution_id") {
            self.0.set(field.name(), format!("{value:?}"));
        }
    }
}

/// Collects an event's message, ids and other fields.
struct EventVisitor<'a> {
    message: Option<String>,
    ids: SpanIds,
    fields: &'a mut Map<String, Value>,
    log_target: Option<String>,
}

impl EventVisitor<'_> {
    fn put(&mut self, name: &str, value: Value) {
        let as_string = || match &value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match name {
            "message" => self.message = Some(as_string()),
            "agent_id" | "workflow_id" | "execution_id" => {
                self.ids.set(name, as_string());
            }
            // Records bridged from the `log` crate carry their origin in `log.*` fields.
            "log.target" => self.log_target = Some(as_string()),
            n if n.starts_with("log.") => {}
            n => {
                self.fields.insert(n.to_owned(), value);
            }
        }
    }
}

impl Visit for EventVisitor<'_> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        let v = serde_json::Number::from_f64(value)
            .map(Value::Number)
            .unwrap_or_else(|| Value::String(value.to_string()));
        self.put(field.name(), v);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field.name(), Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field.name(), Value::from(value));
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        let v = i64::try_from(value)
            .map(Value::from)
            .unwrap_or_else(|_| Value::String(value.to_string()));
        self.put(field.name(), v);
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        let v = u64::try_from(value)
            .map(Value::from)
            .unwrap_or_else(|_| Value::String(value.to_string()));
        self.put(field.name(), v);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field.name(), Value::Bool(value));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field.name(), Value::String(value.to_owned()));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field.name(), Value::String(value.to_string()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field.name(), Value::String(format!("{value:?}")));
    }
}

/// The `tracing` layer that captures every event it sees into a [`LogHub`]. Install it with a
/// filter (see [`capture_layer`]): it keeps whatever reaches it.
#[derive(Debug, Clone, Copy)]
pub struct LogLayer {
    hub: &'static LogHub,
}

impl Default for LogLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl LogLayer {
    /// A layer writing to [`LogHub::global`].
    pub fn new() -> Self {
        Self::with_hub(LogHub::global())
    }

    /// A layer writing to `hub`.
    pub fn with_hub(hub: &'static LogHub) -> Self {
        Self { hub }
    }
}

impl<S> Layer<S> for LogLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut ids = SpanIds::default();
        attrs.record(&mut IdVisitor(&mut ids));
        if ids.is_empty() {
            return;
        }
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(ids);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        match ext.get_mut::<SpanIds>() {
            Some(ids) => values.record(&mut IdVisitor(ids)),
            None => {
                let mut ids = SpanIds::default();
                values.record(&mut IdVisitor(&mut ids));
                if !ids.is_empty() {
                    ext.insert(ids);
                }
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let meta = event.metadata();
        let mut record = LogRecord::now((*meta.level()).into(), meta.target(), "");
        let mut visitor = EventVisitor {
            message: None,
            ids: SpanIds::default(),
            fields: &mut record.fields,
            log_target: None,
        };
        event.record(&mut visitor);
        let EventVisitor {
            message,
            mut ids,
            log_target,
            ..
        } = visitor;
        // The innermost span naming an id wins; the event's own fields win over any span.
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope {
                if ids.agent_id.is_some() && ids.workflow_id.is_some() && ids.execution_id.is_some()
                {
                    break;
                }
                let ext = span.extensions();
                if let Some(s) = ext.get::<SpanIds>() {
                    ids.agent_id = ids.agent_id.or_else(|| s.agent_id.clone());
                    ids.workflow_id = ids.workflow_id.or_else(|| s.workflow_id.clone());
                    ids.execution_id = ids.execution_id.or_else(|| s.execution_id.clone());
                }
            }
        }
        record.message = message.unwrap_or_default();
        if let Some(t) = log_target {
            record.target = t;
        }
        record.agent_id = ids.agent_id;
        record.workflow_id = ids.workflow_id;
        record.execution_id = ids.execution_id;
        self.hub.push(record);
    }
}

/// A per-layer filter that never lets a callsite be cached as always enabled: `Interest::always`
/// becomes `sometimes`, so that `enabled` runs before every event.
///
/// Why: a per-layer filter hands its decision from `enabled` to `on_event` through a
/// thread-local bitmap. For an always-enabled callsite the `tracing` macros skip `enabled`, and
/// `on_event` reads whatever the previous `enabled` call on that thread left there. A bare
/// `enabled` call that this filter refused and that no event followed (sqlx's query logger makes
/// one after every query, through `log_enabled!`) makes the next always-enabled event vanish
/// from the layer: the engine's "execution started" on PostgreSQL, say (tokio-rs/tracing#2519).
/// Costs one filter check per event.
#[derive(Debug, Clone)]
pub struct Fresh<F>(pub F);

impl<S, F: Filter<S>> Filter<S> for Fresh<F> {
    fn enabled(&self, meta: &tracing::Metadata<'_>, cx: &Context<'_, S>) -> bool {
        self.0.enabled(meta, cx)
    }

    fn callsite_enabled(&self, meta: &'static tracing::Metadata<'static>) -> Interest {
        if self.0.callsite_enabled(meta).is_never() {
            Interest::never()
        } else {
            Interest::sometimes()
        }
    }

    fn event_enabled(&self, event: &Event<'_>, cx: &Context<'_, S>) -> bool {
        self.0.event_enabled(event, cx)
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        self.0.max_level_hint()
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        self.0.on_new_span(attrs, id, ctx)
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        self.0.on_record(id, values, ctx)
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        self.0.on_enter(id, ctx)
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        self.0.on_exit(id, ctx)
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        self.0.on_close(id, ctx)
    }
}

/// The filter of [`capture_layer`]: info and above from agentry's own crates (targets starting
/// with `agentry`), warnings and errors from every other crate, and whatever more `RUST_LOG`
/// enables for agentry's crates. Other crates stay at warnings whatever `RUST_LOG` says: their
/// debug and trace events fire for every frame a WebSocket sends, and `/ws/logs` would feed on
/// itself.
pub fn capture_filter<S>() -> impl Filter<S> + Send + Sync + 'static
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let base = Targets::new()
        .with_target("agentry", Level::INFO)
        .with_default(Level::WARN);
    let from_env = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| EnvFilter::new("off"));
    let agentry_only = filter_fn(|meta| meta.target().starts_with("agentry"));
    Fresh(base.or(agentry_only.and(from_env)))
}

/// [`LogLayer::new`] with [`capture_filter`]: add it to the process's subscriber registry beside
/// the output layer.
pub fn capture_layer<S>() -> impl Layer<S> + Send + Sync + 'static
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    LogLayer::new().with_filter(capture_filter())
}

/// GET /api/logs: the captured records matching the query, oldest first.
#[utoipa::path(
    tag = "observability",
    operation_id = "listLogs",
    summary = "Recent log records",
    description = "The process's recent log records (a ring buffer of the last 2000) matching \
        the query, oldest first. Each carries the agent, workflow and execution it belongs to. \
        An empty parameter counts as absent.",
    params(LogQueryParams),
    responses(
        (status = 200, description = "The matching records, oldest first.", body = crate::openapi::LogListResponse),
        (status = 400, description = "An invalid parameter, named: `Invalid level ...`, `Invalid since ...`, `Invalid limit ...`.", body = crate::openapi::Failure),
    ),
)]
#[get("/api/logs")]
pub async fn list(params: web::Query<LogQueryParams>) -> Result<HttpResponse, ApiError> {
    let query = LogQuery::from_params(params.into_inner())?;
    let records = LogHub::global().query(&query);
    let records: Vec<&LogRecord> = records.iter().map(|r| r.as_ref()).collect();
    Ok(envelope::ok(records))
}

/// Registers the log routes.
pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig<'_>) {
    cfg.service(list);
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    fn hub(capacity: usize) -> &'static LogHub {
        Box::leak(Box::new(LogHub::new(capacity)))
    }

    fn record(level: LogLevel, message: &str) -> LogRecord {
        LogRecord::now(level, "test", message)
    }

    fn params(pairs: &[(&str, &str)]) -> LogQueryParams {
        let qs = pairs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&");
        web::Query::<LogQueryParams>::from_query(&qs)
            .expect("query string")
            .into_inner()
    }

    fn messages(rs: &[SharedRecord]) -> Vec<&str> {
        rs.iter().map(|r| r.message.as_str()).collect()
    }

    #[test]
    fn ring_buffer_keeps_the_newest_records() {
        let hub = hub(3);
        for i in 0..5 {
            hub.push(record(LogLevel::Info, &format!("m{i}")));
        }
        assert_eq!(hub.len(), 3);
        let all = hub.query(&LogQuery::default());
        assert_eq!(messages(&all), ["m2", "m3", "m4"]);
    }

    #[test]
    fn limit_returns_the_last_matching_records_in_order() {
        let hub = hub(10);
        for i in 0..6 {
            let level = if i % 2 == 0 {
                LogLevel::Info
            } else {
                LogLevel::Warn
            };
            hub.push(record(level, &format!("m{i}")));
        }
        let q = LogQuery {
            limit: 2,
            ..LogQuery::default()
        };
        assert_eq!(messages(&hub.query(&q)), ["m4", "m5"]);
        let q = LogQuery {
            limit: 2,
            level: Some(LogLevel::Warn),
            ..LogQuery::default()
        };
        assert_eq!(messages(&hub.query(&q)), ["m3", "m5"]);
    }

    #[test]
    fn level_is_a_minimum_severity() {
        let q = LogQuery {
            level: Some(LogLevel::Warn),
            ..LogQuery::default()
        };
        assert!(!q.matches(&record(LogLevel::Trace, "")));
        assert!(!q.matches(&record(LogLevel::Info, "")));
        assert!(q.matches(&record(LogLevel::Warn, "")));
        assert!(q.matches(&record(LogLevel::Error, "")));
    }

    #[test]
    fn ids_and_since_filter() {
        let mut r = record(LogLevel::Info, "x");
        r.execution_id = Some("e-1".into());
        r.workflow_id = Some("wf".into());
        let by = |f: fn(&mut LogQuery)| {
            let mut q = LogQuery::default();
            f(&mut q);
            q
        };
        assert!(by(|q| q.execution_id = Some("e-1".into())).matches(&r));
        assert!(!by(|q| q.execution_id = Some("e-2".into())).matches(&r));
        assert!(by(|q| q.workflow_id = Some("wf".into())).matches(&r));
        assert!(!by(|q| q.agent_id = Some("assistant".into())).matches(&r));
        let mut q = LogQuery {
            since: Some(r.timestamp),
            ..LogQuery::default()
        };
        assert!(!q.matches(&r), "since is exclusive");
        q.since = Some(r.timestamp - chrono::Duration::milliseconds(1));
        assert!(q.matches(&r));
    }

    #[test]
    fn params_are_validated() {
        let q = LogQuery::from_params(params(&[
            ("level", "WARN"),
            ("executionId", "e-1"),
            ("workflowId", "wf"),
            ("agentId", ""),
            ("since", "2026-01-31T12:00:00.123Z"),
            ("limit", "5"),
        ]))
        .unwrap();
        assert_eq!(q.level, Some(LogLevel::Warn));
        assert_eq!(q.execution_id.as_deref(), Some("e-1"));
        assert_eq!(q.workflow_id.as_deref(), Some("wf"));
        assert_eq!(q.agent_id, None);
        assert_eq!(
            q.since.map(wire::iso).as_deref(),
            Some("2026-01-31T12:00:00.123Z")
        );
        assert_eq!(q.limit, 5);

        assert_eq!(
            LogQuery::from_params(params(&[])).unwrap(),
            LogQuery::default()
        );
        let big = LogQuery::from_params(params(&[("limit", "100000")])).unwrap();
        assert_eq!(big.limit, MAX_LIMIT);

        for (name, bad) in [
            ("level", "verbose"),
            ("limit", "0"),
            ("limit", "-1"),
            ("limit", "ten"),
            ("since", "yesterday"),
        ] {
            let err = LogQuery::from_params(params(&[(name, bad)])).unwrap_err();
            assert_eq!(err.status, actix_web::http::StatusCode::BAD_REQUEST);
            assert!(
                err.message.contains(name) && err.message.contains(bad),
                "{name}={bad}: {}",
                err.message
            );
        }
    }

    #[test]
    fn backlog_and_subscription_meet_without_gap() {
        let hub = hub(10);
        hub.push(record(LogLevel::Info, "old"));
        let (backlog, mut rx) = hub.subscribe_with_backlog(&LogQuery::default());
        hub.push(record(LogLevel::Info, "new"));
        assert_eq!(messages(&backlog), ["old"]);
        assert_eq!(rx.try_recv().unwrap().message, "new");
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn layer_captures_fields_and_span_ids() {
        let hub = hub(10);
        let subscriber = tracing_subscriber::registry().with(LogLayer::with_hub(hub));
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("execution", workflow_id = "wf", execution_id = "e-1");
            let _g = span.enter();
            let inner = tracing::info_span!("agent", agent_id = tracing::field::Empty);
            inner.record("agent_id", "assistant");
            let _g2 = inner.enter();
            tracing::warn!(step = 3, ok = true, name = %"tick", "step {} done", 3);
            tracing::info!(execution_id = "e-override", "own id");
        });
        let all = hub.query(&LogQuery::default());
        assert_eq!(all.len(), 2);
        let r = &all[0];
        assert_eq!(r.level, LogLevel::Warn);
        assert_eq!(r.message, "step 3 done");
        assert_eq!(r.target, module_path!());
        assert_eq!(r.agent_id.as_deref(), Some("assistant"));
        assert_eq!(r.workflow_id.as_deref(), Some("wf"));
        assert_eq!(r.execution_id.as_deref(), Some("e-1"));
        assert_eq!(
            Value::Object(r.fields.clone()),
            serde_json::json!({"step": 3, "ok": true, "name": "tick"})
        );
        assert_eq!(all[1].execution_id.as_deref(), Some("e-override"));
        assert_eq!(all[1].workflow_id.as_deref(), Some("wf"));

        let v = r.to_message();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "type",
                "timestamp",
                "level",
                "target",
                "message",
                "fields",
                "agentId",
                "workflowId",
                "executionId"
            ]
        );
        assert_eq!(v["type"], "log");
        assert_eq!(v["level"], "warn");
        let ts = v["timestamp"].as_str().unwrap();
        assert!(
            ts.ends_with('Z') && ts.len() == "2026-01-31T12:00:00.000Z".len(),
            "{ts}"
        );
    }

    #[test]
    fn capture_filter_keeps_agentry_info_and_others_warn() {
        let hub = hub(10);
        let subscriber = tracing_subscriber::registry()
            .with(LogLayer::with_hub(hub).with_filter(capture_filter()));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "agentry_core::engine", "kept");
            tracing::debug!(target: "agentry_core::engine", "dropped unless RUST_LOG says so");
            tracing::info!(target: "actix_server::worker", "dropped");
            tracing::trace!(target: "actix_http::h1", "dropped");
            tracing::warn!(target: "sqlx::query", "kept too");
        });
        let all = hub.query(&LogQuery {
            level: Some(LogLevel::Info),
            ..LogQuery::default()
        });
        assert_eq!(messages(&all), ["kept", "kept too"]);
    }
}
