//! Workflow definitions deployed through the API: the answers of `PUT`, `GET` and `DELETE
//! /definitions/workflows/{name}`.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::Timestamp;

/// The answer of a deploy: the version stored (`created`: new; `false`: the same document was
/// deployed already).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DefinitionDeployed {
    #[schema(example = "order-saga")]
    pub name: String,
    #[schema(example = "1.0.0")]
    pub version: String,
    /// A digest of the document's content (the same for the document as JSON or YAML).
    pub digest: String,
    pub created: bool,
}

/// One deployed version of a definition.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DefinitionVersion {
    pub version: String,
    pub digest: String,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    /// The user who deployed it, when one was verified.
    pub created_by: Option<String>,
    /// Executions running, suspended or queued on it (it cannot be deleted while there are).
    pub in_flight: u64,
}

/// A deployed definition's version: its document as sent and as JSON, and every version of the
/// name.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DefinitionView {
    pub name: String,
    pub version: String,
    pub digest: String,
    /// The media type it was deployed as (`application/json` or `application/yaml`).
    pub content_type: String,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    pub created_by: Option<String>,
    /// The document's text, as deployed.
    pub source: String,
    /// The document, as JSON.
    #[schema(value_type = Object)]
    pub document: Value,
    /// Every deployed version of the name, the oldest first.
    pub versions: Vec<DefinitionVersion>,
}

/// The answer of a delete.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DefinitionDeleted {
    pub name: String,
    pub version: String,
    pub deleted: bool,
}
