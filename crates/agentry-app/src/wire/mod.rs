//! Wire types: every answer and every stream event of the API, as a `Serialize + ToSchema` type
//! declared once. Handlers build these from the domain's types and serialize them; `/doc`
//! derives its schemas from the very same types, so what is documented is what is sent.
//!
//! Every front end sends these same shapes (HTTP in its envelope, MCP as a tool's structured
//! content). Only this module decides the wire shape (camelCase, ISO 8601 timestamps to the
//! millisecond); the domain's types carry meaning. The bodies of the agent routes are in
//! `crate::input`, where each type is both the parser of a body and its schema.

pub mod agents;
pub mod chat;
pub mod definitions;
pub mod events;
pub mod operations;
pub mod queues;
pub mod runs;
pub mod schedules;
pub mod scores;
pub mod server;
pub mod workflows;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Serialize, Serializer};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, Schema, SchemaFormat, Type};
use utoipa::{PartialSchema, ToSchema};

pub use workflows::*;

/// ISO 8601 with milliseconds and `Z`.
pub fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A point in time on the wire: ISO 8601, UTC, to the millisecond (`2026-11-23T10:00:00.002Z`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timestamp(pub DateTime<Utc>);

impl From<DateTime<Utc>> for Timestamp {
    fn from(t: DateTime<Utc>) -> Self {
        Self(t)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_iso(&self.0, s)
    }
}

/// Serializes a time as a [`Timestamp`] (for `#[serde(serialize_with)]`).
pub fn serialize_iso<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&iso(*t))
}

impl PartialSchema for Timestamp {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .description(Some("ISO 8601, UTC, to the millisecond."))
            .examples([serde_json::json!("2026-11-23T10:00:00.002Z")])
            .into()
    }
}

impl ToSchema for Timestamp {}

/// A failure as a tool's structured answer (MCP's tool errors): the failure envelope's `error`
/// and `code` (a row of the error table), and the execution it concerns when it names one.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolFailure {
    /// What went wrong, for a person.
    pub error: String,
    /// What went wrong, for a program: a row of the error table.
    pub code: crate::error::Code,
    /// The execution it concerns (it goes on), when it names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub execution_id: Option<String>,
}

impl From<&crate::error::AppError> for ToolFailure {
    fn from(e: &crate::error::AppError) -> Self {
        Self {
            error: e.message.clone(),
            code: e.code,
            execution_id: e.execution_id.clone(),
        }
    }
}
