//! The process's log buffer ([`LogHub`]), and how a record is bounded and counted as it is kept.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;
use std::sync::{Mutex, MutexGuard, OnceLock};

use serde_json::Value;
use tokio::sync::broadcast;

use crate::{
    DEFAULT_CAPACITY, DEFAULT_MAX_BYTES, LogQuery, LogRecord, MAX_FIELD_BYTES, MAX_FIELDS,
    MAX_MESSAGE_BYTES, truncate,
};

/// How many records a live subscriber may fall behind before it misses some.
const LIVE_CAPACITY: usize = 1024;
/// What a kept record costs beyond its JSON form (the struct, the `Arc`, the map), in bytes.
const RECORD_OVERHEAD: usize = 256;
/// What each field costs beyond its JSON form (a map entry), in bytes.
const FIELD_OVERHEAD: usize = 64;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LogLevel;
    use crate::testing::{assert_truncated, hub, hub_with, messages, record};

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
}
