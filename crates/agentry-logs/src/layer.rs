//! The `tracing` layer that captures events into a [`LogHub`], and the filter it is installed
//! with ([`capture_layer`]).

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{FilterExt, Targets, filter_fn};
use tracing_subscriber::layer::{Context, Filter};
use tracing_subscriber::registry::LookupSpan;

use crate::truncate::{debug_bounded, display_bounded};
use crate::{LogHub, LogRecord, MAX_FIELD_BYTES, MAX_FIELDS, MAX_MESSAGE_BYTES, truncate};

/// The ids a span carries, kept in its extensions.
#[derive(Debug, Default, Clone)]
struct SpanIds {
    agent_id: Option<String>,
    workflow_id: Option<String>,
    execution_id: Option<String>,
}

impl SpanIds {
    fn slot(&mut self, name: &str) -> Option<&mut Option<String>> {
        match name {
            "agent_id" => Some(&mut self.agent_id),
            "workflow_id" => Some(&mut self.workflow_id),
            "execution_id" => Some(&mut self.execution_id),
            _ => None,
        }
    }

    fn set(&mut self, name: &str, value: String) {
        if let Some(slot) = self.slot(name) {
            *slot = Some(value);
        }
    }

    fn is_empty(&self) -> bool {
        self.agent_id.is_none() && self.workflow_id.is_none() && self.execution_id.is_none()
    }
}

/// Collects the ids of a span, each cut to [`MAX_FIELD_BYTES`].
struct IdVisitor<'a>(&'a mut SpanIds);

impl Visit for IdVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if let Some(slot) = self.0.slot(field.name()) {
            *slot = Some(truncate(value, MAX_FIELD_BYTES).into_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if let Some(slot) = self.0.slot(field.name()) {
            *slot = Some(debug_bounded(value, MAX_FIELD_BYTES));
        }
    }
}

/// Where an event's field goes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Slot {
    Message,
    Id,
    /// The origin of a record bridged from the `log` crate.
    LogTarget,
    Field,
    /// Not kept: the other `log.*` fields, and fields beyond [`MAX_FIELDS`].
    Skip,
}

impl Slot {
    /// The most bytes of the value's text.
    fn limit(self) -> usize {
        match self {
            Slot::Message => MAX_MESSAGE_BYTES,
            _ => MAX_FIELD_BYTES,
        }
    }
}

/// Collects an event's message, ids and other fields, each value cut to its limit as it is
/// recorded.
struct EventVisitor<'a> {
    message: Option<String>,
    ids: SpanIds,
    fields: &'a mut Map<String, Value>,
    log_target: Option<String>,
}

impl EventVisitor<'_> {
    fn slot(&self, name: &str) -> Slot {
        match name {
            "message" => Slot::Message,
            "agent_id" | "workflow_id" | "execution_id" => Slot::Id,
            "log.target" => Slot::LogTarget,
            n if n.starts_with("log.") => Slot::Skip,
            n if self.fields.len() >= MAX_FIELDS && !self.fields.contains_key(n) => Slot::Skip,
            _ => Slot::Field,
        }
    }

    /// Keeps a value that is not text (a number, a boolean): short, but the message or an id
    /// takes it as text.
    fn put_value(&mut self, field: &Field, value: Value) {
        let name = field.name();
        match self.slot(name) {
            Slot::Skip => {}
            Slot::Field => {
                self.fields.insert(name.to_owned(), value);
            }
            slot => {
                let text = match value {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                let text = truncate(&text, slot.limit()).into_owned();
                self.put_text(name, slot, text);
            }
        }
    }

    /// Keeps a text value, made by `text` within the limit it is given.
    fn put_with(&mut self, field: &Field, text: impl FnOnce(usize) -> String) {
        let name = field.name();
        let slot = self.slot(name);
        if slot != Slot::Skip {
            let text = text(slot.limit());
            self.put_text(name, slot, text);
        }
    }

    fn put_text(&mut self, name: &str, slot: Slot, text: String) {
        match slot {
            Slot::Message => self.message = Some(text),
            Slot::Id => self.ids.set(name, text),
            Slot::LogTarget => self.log_target = Some(text),
            Slot::Field => {
                self.fields.insert(name.to_owned(), Value::String(text));
            }
            Slot::Skip => {}
        }
    }
}

impl Visit for EventVisitor<'_> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        match serde_json::Number::from_f64(value) {
            Some(n) => self.put_value(field, Value::Number(n)),
            None => self.put_with(field, |max| display_bounded(&value, max)),
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put_value(field, Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put_value(field, Value::from(value));
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        match i64::try_from(value) {
            Ok(v) => self.put_value(field, Value::from(v)),
            Err(_) => self.put_with(field, |max| display_bounded(&value, max)),
        }
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        match u64::try_from(value) {
            Ok(v) => self.put_value(field, Value::from(v)),
            Err(_) => self.put_with(field, |max| display_bounded(&value, max)),
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put_value(field, Value::Bool(value));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put_with(field, |max| truncate(value, max).into_owned());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put_with(field, |max| display_bounded(value, max));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put_with(field, |max| debug_bounded(value, max));
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
///
/// `quiet` holds `target=level` directives whose targets are never kept beyond that level (nor
/// beyond warnings), whatever `RUST_LOG` says: the server passes rmcp's targets that name MCP
/// session ids (`agentry_mcp::sessions::QUIET_LOG_DIRECTIVES`), which its stderr filter holds
/// back too.
pub fn capture_filter<S>(quiet: &[&str]) -> impl Filter<S> + Send + Sync + 'static
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let mut base = Targets::new()
        .with_target("agentry", Level::INFO)
        .with_default(Level::WARN);
    for directive in quiet {
        if let Some((target, level)) = directive.split_once('=') {
            let level = level
                .parse()
                .unwrap_or(tracing_subscriber::filter::LevelFilter::OFF)
                .min(tracing_subscriber::filter::LevelFilter::WARN);
            base = base.with_target(target, level);
        }
    }
    let from_env = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| EnvFilter::new("off"));
    let agentry_only = filter_fn(|meta| meta.target().starts_with("agentry"));
    Fresh(base.or(agentry_only.and(from_env)))
}

/// [`LogLayer::new`] with [`capture_filter`] (`quiet`, its held-back targets): add it to the
/// process's subscriber registry beside the output layer.
pub fn capture_layer<S>(quiet: &[&str]) -> impl Layer<S> + Send + Sync + 'static
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    LogLayer::new().with_filter(capture_filter(quiet))
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use super::*;
    use crate::testing::{assert_truncated, hub, messages, split_marker};
    use crate::{LogLevel, LogQuery};
    use tracing_subscriber::layer::SubscriberExt;

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
    }

    #[test]
    fn layer_truncates_messages_fields_and_ids() {
        let hub = hub(10);
        let big = "日本".repeat(20_000);
        let error = std::io::Error::other(big.clone());
        let subscriber = tracing_subscriber::registry().with(LogLayer::with_hub(hub));
        tracing::subscriber::with_default(subscriber, || {
            let span =
                tracing::info_span!("execution", execution_id = %big, workflow_id = big.as_str());
            let _g = span.enter();
            tracing::warn!(
                agent_id = ?big,
                path = %big,
                text = big.as_str(),
                error = &error as &(dyn std::error::Error + 'static),
                short = "kept whole",
                n = 7,
                "{big}"
            );
        });
        let all = hub.query(&LogQuery::default());
        let r = &all[0];
        assert_truncated(&big, &r.message, MAX_MESSAGE_BYTES);
        for name in ["path", "text", "error"] {
            let v = r.fields[name].as_str().unwrap();
            assert_truncated(&big, v, MAX_FIELD_BYTES);
        }
        assert_eq!(r.fields["short"], "kept whole");
        assert_eq!(r.fields["n"], 7);
        assert_truncated(&big, r.execution_id.as_deref().unwrap(), MAX_FIELD_BYTES);
        assert_truncated(&big, r.workflow_id.as_deref().unwrap(), MAX_FIELD_BYTES);
        // `?` formats the string quoted.
        let agent = r.agent_id.as_deref().unwrap();
        assert!(
            agent.len() <= MAX_FIELD_BYTES && agent.starts_with("\"日本"),
            "{agent}"
        );
        assert!(split_marker(agent).is_some(), "{agent}");
        assert!(hub.bytes() < MAX_MESSAGE_BYTES + 6 * MAX_FIELD_BYTES + 1024);
    }

    /// A callsite of an event with 100 fields (`f000` to `f099`), more than the macros allow.
    struct WideCallsite;
    static WIDE: WideCallsite = WideCallsite;

    impl tracing::callsite::Callsite for WideCallsite {
        fn set_interest(&self, _: Interest) {}

        fn metadata(&self) -> &tracing::Metadata<'_> {
            wide_metadata()
        }
    }

    fn wide_metadata() -> &'static tracing::Metadata<'static> {
        static META: OnceLock<tracing::Metadata<'static>> = OnceLock::new();
        META.get_or_init(|| {
            let names: Vec<&'static str> = (0..100)
                .map(|i| &*Box::leak(format!("f{i:03}").into_boxed_str()))
                .collect();
            tracing::Metadata::new(
                "wide",
                "agentry_logs::layer::tests",
                Level::INFO,
                None,
                None,
                None,
                tracing::field::FieldSet::new(
                    Box::leak(names.into_boxed_slice()),
                    tracing::callsite::Identifier(&WIDE),
                ),
                tracing::metadata::Kind::EVENT,
            )
        })
    }

    #[test]
    fn a_record_keeps_its_first_32_fields() {
        let hub = hub(10);
        let subscriber = tracing_subscriber::registry().with(LogLayer::with_hub(hub));
        let long = "x".repeat(10_000);
        tracing::subscriber::with_default(subscriber, || {
            let meta = wide_metadata();
            let fields: Vec<Field> = meta.fields().iter().collect();
            let numbers: Vec<i64> = (0..100).collect();
            let text: &str = &long;
            let pairs: [(&Field, Option<&dyn tracing::Value>); 100] = std::array::from_fn(|i| {
                let v: &dyn tracing::Value = if i % 2 == 0 { &numbers[i] } else { &text };
                (&fields[i], Some(v))
            });
            Event::dispatch(meta, &meta.fields().value_set(&pairs));
        });
        let all = hub.query(&LogQuery::default());
        assert_eq!(all.len(), 1);
        let fields = &all[0].fields;
        assert_eq!(fields.len(), MAX_FIELDS);
        for i in 0..MAX_FIELDS {
            let v = &fields[&format!("f{i:03}")];
            if i % 2 == 0 {
                assert_eq!(v, &Value::from(i));
            } else {
                assert_truncated(&long, v.as_str().unwrap(), MAX_FIELD_BYTES);
            }
        }
    }

    #[test]
    fn capture_filter_keeps_agentry_info_and_others_warn() {
        let hub = hub(10);
        let quiet = ["rmcp::transport::worker=warn", "noisy::ids=off"];
        let subscriber = tracing_subscriber::registry()
            .with(LogLayer::with_hub(hub).with_filter(capture_filter(&quiet)));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "agentry_engine::engine", "kept");
            tracing::debug!(target: "agentry_engine::engine", "dropped unless RUST_LOG says so");
            tracing::info!(target: "actix_server::worker", "dropped");
            tracing::trace!(target: "actix_http::h1", "dropped");
            tracing::warn!(target: "sqlx::query", "kept too");
            tracing::info!(target: "rmcp::transport::worker", "dropped: quiet");
            tracing::warn!(target: "rmcp::transport::worker", "kept: a warning");
            tracing::error!(target: "noisy::ids", "dropped: off");
        });
        let all = hub.query(&LogQuery {
            level: Some(LogLevel::Info),
            ..LogQuery::default()
        });
        assert_eq!(messages(&all), ["kept", "kept too", "kept: a warning"]);
    }
}
