//! A captured record and its severity, as `/api/logs` and `/ws/logs` send them, with their
//! schemas for the OpenAPI document.

use std::fmt;

use chrono::{DateTime, SecondsFormat, SubsecRound, Utc};
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};
use tracing::Level;
use utoipa::ToSchema;
use utoipa::openapi::schema::{Ref, RefBuilder};

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
    #[serde(serialize_with = "serialize_iso")]
    #[schema(schema_with = timestamp_schema)]
    pub timestamp: DateTime<Utc>,
    pub level: LogLevel,
    /// The event's target (usually the module path, e.g. `agentry_engine::engine`).
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

/// The name of the schema of every time on the wire, `agentry_app::wire::Timestamp` (in
/// `agentry-app`, which depends on this crate); agentry-app's tests check the two agree.
const TIMESTAMP_SCHEMA: &str = "Timestamp";

/// The wire's form of a time, as `agentry_app::wire::iso` writes it: ISO 8601, UTC, to the
/// millisecond, with `Z` (agentry-app's tests check the two agree).
fn serialize_iso<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&t.to_rfc3339_opts(SecondsFormat::Millis, true))
}

/// The schema of [`LogRecord::timestamp`]: a reference to the wire's [`TIMESTAMP_SCHEMA`], with
/// the field's description.
fn timestamp_schema() -> Ref {
    RefBuilder::new()
        .ref_location_from_schema_name(TIMESTAMP_SCHEMA)
        .description(Some(
            "When the event happened, to the millisecond (ISO 8601, UTC).",
        ))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_serializes_in_camel_case_with_a_millisecond_timestamp() {
        let mut r = LogRecord::now(LogLevel::Warn, "t", "m");
        r.execution_id = Some("e-1".into());
        let v = serde_json::to_value(&r).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
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
        assert_eq!(v["level"], "warn");
        assert_eq!(v["agentId"], Value::Null);
        assert_eq!(v["executionId"], "e-1");
        let ts = v["timestamp"].as_str().unwrap();
        assert!(
            ts.ends_with('Z') && ts.len() == "2026-01-31T12:00:00.000Z".len(),
            "{ts}"
        );
        let at = DateTime::parse_from_rfc3339("2026-01-31T12:00:00.1234Z").unwrap();
        r.timestamp = at.with_timezone(&Utc);
        assert_eq!(
            serde_json::to_value(&r).unwrap()["timestamp"],
            "2026-01-31T12:00:00.123Z"
        );
    }
}
