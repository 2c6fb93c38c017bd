//! agentry-logs: the process's log capture. A `tracing` layer ([`LogLayer`], installed with its
//! filter by [`capture_layer`]) keeps the recent log records in a bounded ring buffer
//! ([`LogHub`]) and broadcasts each new one to live subscribers; [`LogQuery`] is the filter of
//! `GET /api/logs` and `/ws/logs`, read from their query string ([`LogQueryParams`]);
//! [`stderr_fields`] gives the stderr output the same limits. The routes themselves are
//! `agentry-http`'s, and who may read the logs is `agentry-app`'s (`App::logs`).
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
//!
//! It knows no HTTP framework, no SQL and no MCP: `scripts/check-layers.sh` keeps actix, sqlx
//! and rmcp out of its dependencies.

mod hub;
mod layer;
mod query;
mod record;
mod stderr;
mod truncate;

pub use hub::{LogHub, SharedRecord};
pub use layer::{Fresh, LogLayer, capture_filter, capture_layer};
pub use query::{InvalidQuery, LogQuery, LogQueryParams};
pub use record::{LogLevel, LogRecord};
pub use stderr::{BoundedFields, stderr_fields};
pub use truncate::truncate;

/// How many records the process keeps by default.
pub const DEFAULT_CAPACITY: usize = 2000;
/// How many records a query returns when it names no `limit`.
pub const DEFAULT_LIMIT: usize = 100;
/// The most records one query returns (a larger `limit` is lowered to this).
pub const MAX_LIMIT: usize = 1000;
/// How many bytes of records the process keeps by default (see [`LogHub::bytes`]).
pub const DEFAULT_MAX_BYTES: usize = 4 * 1024 * 1024;
/// The most bytes of a record's message, [`truncate`]d beyond.
pub const MAX_MESSAGE_BYTES: usize = 2048;
/// The most bytes of each other string value of a record (each field, each id, a bridged `log`
/// record's target), [`truncate`]d beyond.
pub const MAX_FIELD_BYTES: usize = 512;
/// The most fields a record keeps (the first ones recorded); the others are dropped.
pub const MAX_FIELDS: usize = 32;

/// What the tests of several modules share.
#[cfg(test)]
mod testing {
    use crate::{DEFAULT_MAX_BYTES, LogHub, LogLevel, LogRecord, SharedRecord};

    pub fn hub(capacity: usize) -> &'static LogHub {
        Box::leak(Box::new(LogHub::new(capacity, DEFAULT_MAX_BYTES)))
    }

    pub fn hub_with(capacity: usize, max_bytes: usize) -> &'static LogHub {
        Box::leak(Box::new(LogHub::new(capacity, max_bytes)))
    }

    pub fn record(level: LogLevel, message: &str) -> LogRecord {
        LogRecord::now(level, "test", message)
    }

    pub fn messages(rs: &[SharedRecord]) -> Vec<&str> {
        rs.iter().map(|r| r.message.as_str()).collect()
    }

    /// The number of a `…[truncated N bytes]` ending, and the text before it.
    pub fn split_marker(text: &str) -> Option<(&str, usize)> {
        let (kept, rest) = text.rsplit_once("…[truncated ")?;
        let n = rest.strip_suffix(" bytes]")?.parse().ok()?;
        Some((kept, n))
    }

    /// `cut` is `original` truncated to `max`: within the limit, a prefix cut at a char boundary
    /// with the marker counting exactly the bytes removed.
    pub fn assert_truncated(original: &str, cut: &str, max: usize) {
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
}
