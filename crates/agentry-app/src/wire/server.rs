//! What the server says of itself (`GET /api/info`) and of the caller (`GET /api/me`).

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// `data` of GET /api/info.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(example = json!({"name": "agentry", "version": "0.1.0", "database": "sqlite",
    "authentication": {"enabled": false, "strict": false}}))]
pub struct ServerInfo {
    /// Always `agentry`.
    pub name: &'static str,
    /// The server's version.
    pub version: &'static str,
    /// Where executions are kept: `sqlite`, `postgres`, or `memory`.
    pub database: String,
    pub authentication: AuthenticationInfo,
}

/// Whether the server asks for tokens.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AuthenticationInfo {
    /// A provider is configured: protected routes need `Authorization: Bearer <token>`.
    pub enabled: bool,
    /// Strict mode: every route that reads or changes executions, memory or logs needs a
    /// token, and a user sees only their own executions.
    pub strict: bool,
}

/// `data` of GET /api/me.
#[derive(Debug, Serialize, ToSchema)]
pub struct Me {
    /// The authenticated user object the provider made from the token (`id`, `email`, `name`,
    /// `roles`, ... for the JWT provider); `null` when no provider is configured.
    #[schema(required = true, value_type = Option<Object>)]
    pub user: Option<Value>,
}

/// GET /healthz (not in the envelope: what probes read).
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"status": "ok"}))]
pub struct Health {
    /// Always `ok`: the process serves.
    pub status: &'static str,
}

/// GET /readyz (not in the envelope: what probes read).
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"status": "not_ready", "reason": "draining", "detail": "the server is shutting down"}))]
pub struct Readiness {
    /// `ready`, or `not_ready`.
    pub status: &'static str,
    /// Why not: `draining` (a graceful shutdown began), `database` (it does not answer),
    /// `migrations` (some are not applied).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// The reason, for a person.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}
