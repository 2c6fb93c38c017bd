//! Logs over HTTP: a `tracing` layer that keeps the process's recent log records in a bounded
//! ring buffer (and broadcasts each new one to live subscribers), the filter of `GET /api/logs`
//! and `/ws/logs`, and the `GET /api/logs` route.
//!
//! Each record carries the execution, workflow and agent it belongs to, taken from the event's
//! own `execution_id`, `workflow_id` and `agent_id` fields or from the nearest enclosing span
//! that has them (the engine runs every execution inside an `execution` span carrying both).
//!
//! Records carry client-controlled text (request paths, error messages echoing input), so every
//! part of a record is bounded, and so is the buffer as a whole:
//!
//! - a record's message is cut to [`MAX_MESSAGE_BYTES`] (2 KiB), each other string value, each
//!   id and a bridged `log` record's target to [`MAX_FIELD_BYTES`] (512 bytes), as the values are
//!   recorded (a value formatted with `Debug` or `Display` is never held whole); a cut text ends
//!   with `…[truncated N bytes]` and stays within its limit ([`truncate`]);
//! - a record keeps its first [`MAX_FIELDS`] (32) fields, the rest are dropped;
//! - the buffer keeps the last [`DEFAULT_CAPACITY`] (2000) records and at most
//!   [`DEFAULT_MAX_BYTES`] (4 MiB) of them, measured as each record's JSON plus a fixed overhead:
//!   the oldest records go first, so `GET /api/logs` never answers much more than 4 MiB.
//!
//! The stderr output gets the same limits through [`stderr_fields`].

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt::{self, Write as _};
use std::sync::{Mutex, MutexGuard, OnceLock};

use actix_web::{HttpResponse, get, web};
use chrono::{DateTime, SubsecRound, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::broadcast;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::filter::{FilterExt, Targets, filter_fn};
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::layer::{Context, Filter};
use tracing_subscriber::registry::LookupSpan;
use utoipa::ToSchema;

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
/// How many bytes of records the process keeps by default (see [`LogHub::bytes`]).
pub const DEFAULT_MAX_BYTES: usize = 4 * 1024 * 1024;
/// The most bytes of a record's message, [`truncate`]d beyond.
pub const MAX_MESSAGE_BYTES: usize = 2048;
/// The most bytes of each other string value of a record (each field, each id, a bridged `log`
/// record's target), [`truncate`]d beyond.
pub const MAX_FIELD_BYTES: usize = 512;
/// The most fields a record keeps (the first ones recorded); the others are dropped.
pub const MAX_FIELDS: usize = 32;
/// What a kept record costs beyond its JSON form (the struct, the `Arc`, the map), in bytes.
const RECORD_OVERHEAD: usize = 256;
/// What each field costs beyond its JSON form (a map entry), in bytes.
const FIELD_OVERHEAD: usize = 64;

/// `text` itself when it is at most `max` bytes long. Otherwise its longest prefix, cut at a
/// char boundary, followed by `…[truncated N bytes]` (N the bytes removed), the whole at most
/// `max` bytes; when `max` is too small even for the marker, the prefix alone.
pub fn truncate(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(shorten(text, text.len(), max))
    }
}

/// The length of `…[truncated N bytes]`.
fn marker_len(n: usize) -> usize {
    let digits = n.checked_ilog10().map_or(1, |d| d as usize + 1);
    "…[truncated  bytes]".len() + digits
}

/// A text of `total` bytes (`total > max`), of which `head` holds at least the first `max`
/// bytes (or all up to the char that straddles them), cut to `max` bytes with the marker.
fn shorten(head: &str, total: usize, max: usize) -> String {
    // N is at most `total`, so its marker is at most this long.
    let reserve = marker_len(total);
    if reserve > max {
        return head[..head.floor_char_boundary(max)].to_owned();
    }
    let cut = head.floor_char_boundary(max - reserve);
    let mut out = String::with_capacity(max);
    out.push_str(&head[..cut]);
    let _ = write!(out, "…[truncated {} bytes]", total - cut);
    out
}

/// A `fmt::Write` that keeps the first `max` bytes written and only counts the rest, so that
/// formatting a huge value never holds it whole.
struct Bounded {
    head: String,
    total: usize,
    max: usize,
}

impl Bounded {
    fn new(max: usize) -> Self {
        Self {
            head: String::new(),
            total: 0,
            max,
        }
    }

    /// What was written, [`truncate`]d to `max` bytes.
    fn finish(self) -> String {
        if self.total <= self.max {
            self.head
        } else {
            shorten(&self.head, self.total, self.max)
        }
    }
}

impl fmt::Write for Bounded {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // Once something was dropped, nothing more is kept: the head stays a prefix.
        if self.total == self.head.len() {
            let room = self.max - self.head.len();
            let take = if s.len() <= room {
                s.len()
            } else {
                s.floor_char_boundary(room)
            };
            self.head.push_str(&s[..take]);
        }
        self.total = self.total.saturating_add(s.len());
        Ok(())
    }
}

/// `value`'s `Debug` form, [`truncate`]d to `max` bytes.
fn debug_bounded(value: &dyn fmt::Debug, max: usize) -> String {
    let mut w = Bounded::new(max);
    let _ = write!(w, "{value:?}");
    w.finish()
}

/// `value`'s `Display` form, [`truncate`]d to `max` bytes.
fn display_bounded(value: &dyn fmt::Display, max: usize) -> String {
    let mut w = Bounded::new(max);
    let _ = write!(w, "{value}");
    w.finish()
}

/// An `io::Write` that only counts the bytes written to it.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The bytes a kept record is counted for: its JSON form (what `/api/logs` answers for it, so
/// message, target, fields and ids, escapes included) plus fixed overheads.
fn record_size(r: &LogRecord) -> usize {
    let mut json = ByteCount(0);
    // Serializing a record cannot fail: string keys, and every number is finite.
    let _ = serde_json::to_writer(&mut json, r);
    json.0 + RECORD_OVERHEAD + r.fields.len() * FIELD_OVERHEAD
}

/// Cuts a record's texts to their limits and drops its fields beyond [`MAX_FIELDS`] (a no-op
/// for a record within them).
fn bound(r: &mut LogRecord) {
    fn cut(text: &mut String, max: usize) {
        if let Cow::Owned(short) = truncate(text, max) {
            *text = short;
        }
    }
    cut(&mut r.message, MAX_MESSAGE_BYTES);
    cut(&mut r.target, MAX_FIELD_BYTES);
    for id in [&mut r.agent_id, &mut r.workflow_id, &mut r.execution_id]
        .into_iter()
        .flatten()
    {
        cut(id, MAX_FIELD_BYTES);
    }
    if r.fields.len() > MAX_FIELDS {
        r.fields = std::mem::take(&mut r.fields)
            .into_iter()
            .take(MAX_FIELDS)
            .collect();
    }
    for v in r.fields.values_mut() {
        if let Value::String(text) = v {
            cut(text, MAX_FIELD_BYTES);
        }
    }
}

/// Severity of a record, least severe first (so `>=` means "at least as severe").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
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

/// One captured log record, as `/api/logs` and `/ws/logs` show it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogRecord {
    /// When the event happened, to the millisecond (ISO 8601, UTC).
    #[serde(serialize_with = "wire::serialize_iso")]
    #[schema(value_type = wire::Timestamp)]
    pub timestamp: DateTime<Utc>,
    pub level: LogLevel,
    /// The event's target (usually the module path, e.g. `agentry_core::engine`).
    pub target: String,
    pub message: String,
    /// The event's other fields, by the names they were logged with.
    #[schema(value_type = Object)]
    pub fields: Map<String, Value>,
    #[schema(required = true)]
    pub agent_id: Option<String>,
    #[schema(required = true)]
    pub workflow_id: Option<String>,
    #[schema(required = true)]
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
}

/// The captured records of the process: a ring buffer of the most recent ones, bounded in
/// records and in bytes, and a broadcast of each new one.
pub struct LogHub {
    capacity: usize,
    max_bytes: usize,
    ring: Mutex<Ring>,
    live: broadcast::Sender<SharedRecord>,
}

/// The kept records, oldest first, with their sizes and the sum of those.
struct Ring {
    records: VecDeque<(SharedRecord, usize)>,
    bytes: usize,
}

impl Ring {
    /// The records, oldest first.
    fn records(&self) -> impl DoubleEndedIterator<Item = &SharedRecord> {
        self.records.iter().map(|(r, _)| r)
    }
}

impl fmt::Debug for LogHub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ring = self.ring();
        f.debug_struct("LogHub")
            .field("capacity", &self.capacity)
            .field("max_bytes", &self.max_bytes)
            .field("len", &ring.records.len())
            .field("bytes", &ring.bytes)
            .finish()
    }
}

/// A record shared between the buffer and the live subscribers.
pub type SharedRecord = std::sync::Arc<LogRecord>;

impl LogHub {
    /// A hub keeping the last `capacity` records (at least one) as long as they take at most
    /// `max_bytes` bytes in all (see [`bytes`](Self::bytes)); the newest record is always kept.
    pub fn new(capacity: usize, max_bytes: usize) -> Self {
        let capacity = capacity.max(1);
        let (live, _) = broadcast::channel(LIVE_CAPACITY);
        Self {
            capacity,
            max_bytes,
            ring: Mutex::new(Ring {
                records: VecDeque::with_capacity(capacity.min(4096)),
                bytes: 0,
            }),
            live,
        }
    }

    /// The hub of the process, with [`DEFAULT_CAPACITY`] records and [`DEFAULT_MAX_BYTES`];
    /// [`LogLayer::new`] writes to it and the routes read it.
    pub fn global() -> &'static LogHub {
        static HUB: OnceLock<LogHub> = OnceLock::new();
        HUB.get_or_init(|| LogHub::new(DEFAULT_CAPACITY, DEFAULT_MAX_BYTES))
    }

    fn ring(&self) -> MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The most records kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The most bytes of records kept (unless the newest record alone is larger).
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// How many records are kept now.
    pub fn len(&self) -> usize {
        self.ring().records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The approximate size of the records kept now, in bytes: each record's JSON form (as
    /// `/api/logs` answers it) plus a fixed overhead per record and per field.
    pub fn bytes(&self) -> usize {
        self.ring().bytes
    }

    /// Keeps `record` (dropping the oldest ones while over the record capacity or the byte cap)
    /// and sends it to live subscribers.
    pub fn push(&self, mut record: LogRecord) {
        // Records from `LogLayer` are within the limits already; others may not be.
        bound(&mut record);
        let size = record_size(&record);
        let record = SharedRecord::new(record);
        // Under the lock, so that `subscribe_with_backlog` sees every record exactly once.
        let mut ring = self.ring();
        ring.records.push_back((record.clone(), size));
        ring.bytes += size;
        while ring.records.len() > self.capacity
            || (ring.bytes > self.max_bytes && ring.records.len() > 1)
        {
            if let Some((_, old)) = ring.records.pop_front() {
                ring.bytes -= old;
            }
        }
        // No subscriber is not an error.
        let _ = self.live.send(record);
    }

    /// The last `query.limit` records matching `query`, oldest first.
    pub fn query(&self, query: &LogQuery) -> Vec<SharedRecord> {
        Self::select(&self.ring(), query)
    }

    fn select(ring: &Ring, query: &LogQuery) -> Vec<SharedRecord> {
        let mut out: Vec<SharedRecord> = ring
            .records()
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
    #[param(value_type = Option<LogLevel>)]
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

/// The field formatter of the stderr output, with the limits of the log buffer: formats an
/// event's (or a span's) fields like `tracing_subscriber`'s default formatter (the message
/// first, without a name, then `name=value` with the value's `Debug` form, so strings quoted,
/// separated by spaces; `log.*` fields left out), with the message [`truncate`]d to
/// [`MAX_MESSAGE_BYTES`] and every other value to [`MAX_FIELD_BYTES`]. Field names are not
/// styled, even on a terminal. See [`stderr_fields`].
#[derive(Debug, Clone, Copy, Default)]
pub struct BoundedFields;

/// The stderr output's field formatter:
/// `tracing_subscriber::fmt::layer().fmt_fields(stderr_fields())`, so that a client cannot flood
/// stderr with one huge path or error message either.
pub fn stderr_fields() -> BoundedFields {
    BoundedFields
}

impl<'w> FormatFields<'w> for BoundedFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut visitor = FieldWriter {
            writer,
            messages: true,
            empty: true,
            result: Ok(()),
        };
        // The message first, wherever it was recorded; then the other fields.
        fields.record(&mut visitor);
        visitor.messages = false;
        fields.record(&mut visitor);
        visitor.result
    }
}

/// Writes the fields of one pass of [`BoundedFields`].
struct FieldWriter<'w> {
    writer: Writer<'w>,
    /// Whether this pass writes the message (or the other fields).
    messages: bool,
    /// Whether nothing was written yet (no separator needed).
    empty: bool,
    result: fmt::Result,
}

impl FieldWriter<'_> {
    fn write(&mut self, name: &str, text: &str) -> fmt::Result {
        if !std::mem::take(&mut self.empty) {
            self.writer.write_char(' ')?;
        }
        if name != "message" {
            self.writer
                .write_str(name.strip_prefix("r#").unwrap_or(name))?;
            self.writer.write_char('=')?;
        }
        self.writer.write_str(text)
    }
}

impl Visit for FieldWriter<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"));
        } else {
            self.record_debug(field, &value);
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.record_debug(field, &format_args!("{value}"));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let name = field.name();
        let is_message = name == "message";
        if self.result.is_err() || is_message != self.messages || name.starts_with("log.") {
            return;
        }
        let limit = if is_message {
            MAX_MESSAGE_BYTES
        } else {
            MAX_FIELD_BYTES
        };
        let text = debug_bounded(value, limit);
        self.result = self.write(name, &text);
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
/// itself. rmcp's targets that name MCP session ids are never kept
/// (`agentry_mcp::sessions::QUIET_LOG_DIRECTIVES`).
pub fn capture_filter<S>() -> impl Filter<S> + Send + Sync + 'static
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let mut base = Targets::new()
        .with_target("agentry", Level::INFO)
        .with_default(Level::WARN);
    // MCP session ids are never kept (rmcp logs them).
    for directive in agentry_mcp::sessions::QUIET_LOG_DIRECTIVES {
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
    description = "The process's recent log records (a ring buffer of the last 2000, at most \
        4 MiB in all; a message longer than 2048 bytes and any other value longer than 512 \
        bytes is cut, ending with `…[truncated N bytes]`) matching the query, oldest first. Each carries the agent, workflow and execution it \
        belongs to. An empty parameter counts as absent.",
    params(LogQueryParams),
    responses(
        (status = 200, description = "The matching records, oldest first.", body = crate::envelope::Success<Vec<LogRecord>>),
    ),
)]
#[get("/api/logs")]
pub async fn list(
    app: web::Data<crate::AppState>,
    params: web::Query<LogQueryParams>,
    caller: crate::auth::Requester,
) -> Result<HttpResponse, ApiError> {
    app.app.policy().authorize_logs(&caller.0)?;
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
        Box::leak(Box::new(LogHub::new(capacity, DEFAULT_MAX_BYTES)))
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
            assert_eq!(err.status(), actix_web::http::StatusCode::BAD_REQUEST);
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

        let v: Value =
            serde_json::from_str(&crate::wire::sockets::SocketMessage::Log(r).to_json()).unwrap();
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

    /// The number of a `…[truncated N bytes]` ending, and the text before it.
    fn split_marker(text: &str) -> Option<(&str, usize)> {
        let (kept, rest) = text.rsplit_once("…[truncated ")?;
        let n = rest.strip_suffix(" bytes]")?.parse().ok()?;
        Some((kept, n))
    }

    /// `cut` is `original` truncated to `max`: within the limit, a prefix cut at a char boundary
    /// with the marker counting exactly the bytes removed.
    fn assert_truncated(original: &str, cut: &str, max: usize) {
        assert!(cut.len() <= max, "{} > {max}", cut.len());
        let (kept, n) = split_marker(cut).unwrap_or_else(|| panic!("no marker: {cut:?}"));
        assert!(original.starts_with(kept), "not a prefix: {kept:?}");
        assert_eq!(kept.len() + n, original.len(), "{cut:?}");
        // The longest prefix that fits, give or take the marker's digits.
        assert!(
            max - cut.len() <= 4,
            "{} bytes unused of {max}",
            max - cut.len()
        );
    }

    #[test]
    fn truncate_cuts_at_char_boundaries_within_the_limit() {
        assert!(matches!(truncate("short", 10), Cow::Borrowed("short")));
        let exact = "x".repeat(MAX_FIELD_BYTES);
        assert!(matches!(
            truncate(&exact, MAX_FIELD_BYTES),
            Cow::Borrowed(_)
        ));

        let ascii = "a".repeat(100_000);
        let cut = truncate(&ascii, MAX_MESSAGE_BYTES);
        assert_truncated(&ascii, &cut, MAX_MESSAGE_BYTES);
        assert!(cut.ends_with("a…[truncated 97979 bytes]"), "{cut}");

        // Two-, three- and four-byte chars, cut at every offset around the limit.
        let mixed = "aé日😀".repeat(1000);
        for max in 40..80 {
            let cut = truncate(&mixed, max);
            assert_truncated(&mixed, &cut, max);
        }
        for text in ["é".repeat(600), "日".repeat(600), "😀".repeat(600)] {
            assert_truncated(&text, &truncate(&text, MAX_FIELD_BYTES), MAX_FIELD_BYTES);
        }

        // Too small for the marker: the prefix alone, still at a char boundary.
        assert_eq!(truncate("日本語のテキスト", 7), "日本");
        assert_eq!(truncate("abc", 0), "");
    }

    #[test]
    fn bounded_formatting_equals_truncating_the_whole() {
        struct Pieces(&'static str, usize);
        impl fmt::Debug for Pieces {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                for _ in 0..self.1 {
                    f.write_str(self.0)?;
                }
                Ok(())
            }
        }
        for (piece, times) in [("aé日😀", 10_000), ("é", 3), ("x", 512), ("x", 513)] {
            let whole = piece.repeat(times);
            for max in [5, 30, 31, 32, 33, MAX_FIELD_BYTES, MAX_MESSAGE_BYTES] {
                assert_eq!(
                    debug_bounded(&Pieces(piece, times), max),
                    truncate(&whole, max),
                    "{piece:?} x {times}, max {max}"
                );
            }
        }
        let big = "日".repeat(10_000);
        assert_eq!(display_bounded(&big, 100), truncate(&big, 100));
        // `Debug` of a string quotes it; the quotes count.
        assert_eq!(debug_bounded(&"abc", 5), "\"abc\"");
    }

    #[test]
    fn byte_cap_evicts_the_oldest_records() {
        let one = record_size(&record(LogLevel::Info, &format!("m{:0>997}", 0)));
        let hub = Box::leak(Box::new(LogHub::new(100, 10 * one)));
        for i in 0..25 {
            hub.push(record(LogLevel::Info, &format!("m{i:0>997}")));
        }
        assert_eq!(hub.len(), 10);
        assert_eq!(hub.bytes(), 10 * one);
        assert!(hub.bytes() <= hub.max_bytes());
        let all = hub.query(&LogQuery::default());
        let kept: Vec<String> = (15..25).map(|i| format!("m{i:0>997}")).collect();
        assert_eq!(messages(&all), kept);

        // A smaller record makes room for itself only.
        hub.push(record(LogLevel::Info, "small"));
        assert_eq!(hub.len(), 10);
        assert!(hub.bytes() < 10 * one);
        assert_eq!(
            hub.bytes(),
            hub.query(&LogQuery::default())
                .iter()
                .map(|r| record_size(r))
                .sum::<usize>()
        );

        // A record pushed directly is bounded too.
        let long = "m".repeat(10_000);
        let mut wide = record(LogLevel::Info, &long);
        wide.execution_id = Some(long.clone());
        for i in 0..40 {
            wide.fields
                .insert(format!("f{i:02}"), Value::String(long.clone()));
        }
        let direct = hub_with(10, DEFAULT_MAX_BYTES);
        direct.push(wide);
        let r = &direct.query(&LogQuery::default())[0];
        assert_truncated(&long, &r.message, MAX_MESSAGE_BYTES);
        assert_truncated(&long, r.execution_id.as_ref().unwrap(), MAX_FIELD_BYTES);
        assert_eq!(r.fields.len(), MAX_FIELDS);
        for v in r.fields.values() {
            assert_truncated(&long, v.as_str().unwrap(), MAX_FIELD_BYTES);
        }

        // A record larger than the cap is still kept, alone.
        let tiny = hub_with(100, 10);
        tiny.push(record(LogLevel::Info, "a"));
        tiny.push(record(LogLevel::Info, "b"));
        assert_eq!(messages(&tiny.query(&LogQuery::default())), ["b"]);
        assert_eq!(tiny.bytes(), record_size(&record(LogLevel::Info, "b")));
    }

    fn hub_with(capacity: usize, max_bytes: usize) -> &'static LogHub {
        Box::leak(Box::new(LogHub::new(capacity, max_bytes)))
    }

    #[test]
    fn record_capacity_still_bounds_small_records() {
        let hub = hub_with(5, DEFAULT_MAX_BYTES);
        for i in 0..12 {
            hub.push(record(LogLevel::Info, &format!("m{i}")));
        }
        let all = hub.query(&LogQuery::default());
        assert_eq!(messages(&all), ["m7", "m8", "m9", "m10", "m11"]);
        assert_eq!(
            hub.bytes(),
            all.iter().map(|r| record_size(r)).sum::<usize>()
        );
        // The size counted is at least what /api/logs answers for the records.
        let json =
            serde_json::to_string(&all.iter().map(|r| r.as_ref()).collect::<Vec<_>>()).unwrap();
        assert!(json.len() <= hub.bytes());
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
                "agentry_http::logs::tests",
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

    /// A `MakeWriter` into a shared buffer.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
        type Writer = Captured;

        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    #[test]
    fn stderr_fields_truncate_like_the_buffer() {
        let out = Captured::default();
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .fmt_fields(stderr_fields())
                .with_writer(out.clone())
                .with_ansi(false),
        );
        let big = "é".repeat(50_000);
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(path = %big, n = 3, "{big}");
            let span = tracing::info_span!("request", r#type = "short", id = %big);
            let _g = span.enter();
            tracing::warn!(reason = "no", "short message");
        });
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");

        // The message first, without a name, then the fields.
        let (_, fields) = lines[0].split_once(": ").unwrap();
        let (message, rest) = fields.split_once(" path=").unwrap();
        assert_truncated(&big, message, MAX_MESSAGE_BYTES);
        let (path, n) = rest.rsplit_once(' ').unwrap();
        assert_truncated(&big, path, MAX_FIELD_BYTES);
        assert_eq!(n, "n=3");
        assert!(lines[0].len() < MAX_MESSAGE_BYTES + MAX_FIELD_BYTES + 200);

        // Span fields are cut too; a string field is quoted, a raw identifier loses its `r#`.
        assert!(
            lines[1].contains("request{type=\"short\" id=éé"),
            "{}",
            lines[1]
        );
        assert!(lines[1].contains("…[truncated "), "{}", lines[1]);
        assert!(
            lines[1].ends_with(": short message reason=\"no\""),
            "{}",
            lines[1]
        );
        assert!(lines[1].len() < MAX_FIELD_BYTES + 300);
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
