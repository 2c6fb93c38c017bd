//! The error table: every failure the API answers is a row here, declared once, with a stable
//! snake_case code and its HTTP status. Handlers never pick a status: they name a [`Code`], and
//! domain errors (engine, agents, auth, input) convert into one. Every failure leaves as
//! `{success: false, error: <message>, code: <code>}`. The table is published in `/doc` (the
//! `ErrorCode` schema) and in `docs/ERRORS.md` (checked against this table by a test).

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, ResponseError};
use agentry_core::EngineError;
use agentry_core::agent::{AgentError, ModelErrorKind};
use agentry_core::store::StoreError;

/// Declares [`Code`]: one line per row, `Variant => STATUS, "code", "when";` (the code is the
/// variant in snake_case, as serde writes it: a test checks they agree).
macro_rules! error_table {
    ($($variant:ident => $status:ident, $code:literal, $when:literal;)*) => {
        /// A failure the API can answer: its stable code and status.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, utoipa::ToSchema)]
        #[schema(as = ErrorCode)]
        #[serde(rename_all = "snake_case")]
        pub enum Code {
            $(
                #[doc = $when]
                $variant,
            )*
        }

        impl Code {
            /// Every row, in the table's order.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            /// The stable snake_case code clients match on.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $code,)*
                }
            }

            /// The HTTP status it is answered with.
            pub fn status(self) -> StatusCode {
                match self {
                    $(Code::$variant => StatusCode::$status,)*
                }
            }

            /// When it is answered.
            pub fn when(self) -> &'static str {
                match self {
                    $(Code::$variant => $when,)*
                }
            }
        }
    };
}

error_table! {
    InvalidRequest => BAD_REQUEST, "invalid_request", "The body, path, query or options are malformed or out of range (`Invalid ...`).";
    InvalidInput => BAD_REQUEST, "invalid_input", "A workflow's input fails its input schema (`Input validation failed: ...`).";
    InvalidResumeData => BAD_REQUEST, "invalid_resume_data", "Resume data fails the resume schema (`Resume data validation failed: ...`).";
    InvalidExecutionId => BAD_REQUEST, "invalid_execution_id", "A caller-chosen execution id outside the allowed alphabet.";
    UnknownStep => BAD_REQUEST, "unknown_step", "A resume from a step the workflow does not have.";
    NotSuspendable => BAD_REQUEST, "not_suspendable", "Suspend of an execution that is not running (completed, failed, cancelled or already suspended).";
    NotCancellable => BAD_REQUEST, "not_cancellable", "Cancel of an execution that is completed, failed or cancelled.";
    AuthenticationRequired => UNAUTHORIZED, "authentication_required", "A protected route without a token (`Authentication required`).";
    InvalidToken => UNAUTHORIZED, "invalid_token", "A token that is malformed, badly signed, or for another audience or issuer (`Invalid token: ...`).";
    TokenExpired => UNAUTHORIZED, "token_expired", "An expired token (`Token expired`).";
    Forbidden => FORBIDDEN, "forbidden", "Strict mode: another user's execution, the logs without the admin role; a cross-site browser request (`Forbidden: ...`).";
    RouteNotFound => NOT_FOUND, "route_not_found", "No route has this path (`Route <METHOD> <path> not found`), or no such explorer file.";
    WorkflowNotFound => NOT_FOUND, "workflow_not_found", "An unknown workflow (`Workflow <id> not found`).";
    AgentNotFound => NOT_FOUND, "agent_not_found", "An unknown agent (`Agent <id> not found`).";
    ExecutionNotFound => NOT_FOUND, "execution_not_found", "An unknown execution, or one of another workflow (`Execution <id> of workflow <id> not found`, or `Execution <id> not found` by id alone).";
    ExecutionNotSuspended => NOT_FOUND, "execution_not_suspended", "Resume of an execution that is not suspended (`Execution <id> is not suspended (status: ...)`).";
    McpSessionNotFound => NOT_FOUND, "mcp_session_not_found", "MCP: an `Mcp-Session-Id` this server does not know, that ended, or that is another user's (the same answer for all three; initialize again).";
    MethodNotAllowed => METHOD_NOT_ALLOWED, "method_not_allowed", "A known path with a method it does not serve (header `Allow`).";
    NotAcceptable => NOT_ACCEPTABLE, "not_acceptable", "MCP: the request's `Accept` does not allow the answer's media types (`application/json`, `text/event-stream`).";
    RequestTimeout => REQUEST_TIMEOUT, "request_timeout", "The request's body came too slowly.";
    ExecutionExists => CONFLICT, "execution_exists", "`options.executionId` is taken by another workflow, input or owner.";
    Conflict => CONFLICT, "conflict", "Too many concurrent changes of one execution; try again.";
    PayloadTooLarge => PAYLOAD_TOO_LARGE, "payload_too_large", "A body over the limit (1 MiB by default).";
    UnsupportedMediaType => UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", "A body that is not `application/json`.";
    UnsatisfiableSchema => UNPROCESSABLE_ENTITY, "unsatisfiable_schema", "The model could not produce an object valid against the request's schema.";
    ClientClosedRequest => BAD_REQUEST, "client_closed_request", "The client went away before the answer (logged; nobody reads it).";
    ExecutionFailed => INTERNAL_SERVER_ERROR, "execution_failed", "The execution ended in error (`Failed to execute workflow`; header `X-Execution-Id`; its state has the reason).";
    GenerationFailed => INTERNAL_SERVER_ERROR, "generation_failed", "The model or the server failed otherwise (`Failed to generate: ...`).";
    ModelRefused => BAD_GATEWAY, "model_refused", "The model provider refused the request (HTTP 400, 404, 422, ...), with its reason.";
    ModelUnauthorized => BAD_GATEWAY, "model_unauthorized", "The model provider refused agentry's credentials (HTTP 401 or 403); the provider is named, the key never echoed.";
    ModelUnavailable => BAD_GATEWAY, "model_unavailable", "The model provider is down or unreachable (HTTP 5xx, a failed connection).";
    ModelRateLimited => SERVICE_UNAVAILABLE, "model_rate_limited", "The model provider throttled the request (HTTP 429): try again later.";
    ModelTimedOut => GATEWAY_TIMEOUT, "model_timed_out", "The model provider stayed silent past the read time-out (60 s by default).";
    Internal => INTERNAL_SERVER_ERROR, "internal", "A failure of the server itself (logged with its cause).";
    ExecutionContinuesElsewhere => SERVICE_UNAVAILABLE, "execution_continues_elsewhere", "This server stopped (or lost) the execution mid-run: it continues on another; retry with the same executionId and input.";
    ServerShuttingDown => SERVICE_UNAVAILABLE, "server_shutting_down", "The server is draining before it stops (header `Retry-After`): send the request again, to another replica or after the restart.";
    DatabaseUnavailable => SERVICE_UNAVAILABLE, "database_unavailable", "The database did not answer in time (down, restarting, or every connection busy; header `Retry-After`): nothing was lost; try again.";
    McpSessionLimit => SERVICE_UNAVAILABLE, "mcp_session_limit", "MCP: the server holds as many sessions as it may (`AGENTRY_MCP_MAX_SESSIONS`; header `Retry-After`).";
}

/// The table as Markdown: `docs/ERRORS.md` and the `ErrorCode` schema of `/doc` show it.
pub fn markdown_table() -> String {
    let mut out = String::from("| code | status | when |\n|---|---|---|\n");
    for code in Code::ALL {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            code.as_str(),
            code.status().as_u16(),
            code.when()
        ));
    }
    out
}

/// An error answered with the failure envelope.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: Code,
    pub message: String,
}

impl ApiError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// A malformed or out-of-range request ([`Code::InvalidRequest`]).
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(Code::InvalidRequest, message)
    }

    /// A failure of the server itself ([`Code::Internal`]); log its cause first.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Code::Internal, message)
    }

    pub fn status(&self) -> StatusCode {
        self.code.status()
    }
}

/// The failure envelope: every error, of every route.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct Failure {
    #[schema(schema_with = crate::envelope::always_false)]
    pub success: bool,
    /// What went wrong, for a person.
    pub error: String,
    /// What went wrong, for a program: a row of the error table (stable).
    pub code: Code,
}

/// The failure envelope of `code` with `message`.
pub fn failure_body(code: Code, message: &str) -> Failure {
    Failure {
        success: false,
        error: message.to_owned(),
        code,
    }
}

impl Code {
    /// The seconds a client should wait before it tries again (`Retry-After`), for the
    /// failures that pass.
    pub fn retry_after(self) -> Option<u32> {
        match self {
            Code::ServerShuttingDown | Code::DatabaseUnavailable | Code::McpSessionLimit => Some(2),
            Code::ExecutionContinuesElsewhere | Code::ModelRateLimited => Some(1),
            _ => None,
        }
    }
}

/// The row of a status answered by something that is not a handler (actix itself).
pub fn code_for_status(status: StatusCode) -> Code {
    match status.as_u16() {
        401 => Code::AuthenticationRequired,
        403 => Code::Forbidden,
        404 => Code::RouteNotFound,
        405 => Code::MethodNotAllowed,
        406 => Code::NotAcceptable,
        408 => Code::RequestTimeout,
        409 => Code::Conflict,
        413 => Code::PayloadTooLarge,
        415 => Code::UnsupportedMediaType,
        400..=499 => Code::InvalidRequest,
        502 => Code::ModelUnavailable,
        503 => Code::ExecutionContinuesElsewhere,
        504 => Code::ModelTimedOut,
        _ => Code::Internal,
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status()
    }

    fn error_response(&self) -> HttpResponse {
        let mut out = HttpResponse::build(self.status());
        if let Some(seconds) = self.code.retry_after() {
            out.insert_header((actix_web::http::header::RETRY_AFTER, seconds.to_string()));
        }
        out.json(failure_body(self.code, &self.message))
    }
}

/// The row of each agent error: an object the model could not make valid against the request's
/// schema is the client's (its schema may be unsatisfiable); a provider's failure keeps its kind
/// (throttled, unauthorized, timed out, refused, down); anything else the model or the server
/// failed at is a generation failure with the cause named.
pub fn agent_error_code(err: &AgentError) -> Code {
    match err {
        AgentError::NotFound(_) => Code::AgentNotFound,
        AgentError::InvalidRequest(_) => Code::InvalidRequest,
        AgentError::InvalidObject(_) => Code::UnsatisfiableSchema,
        AgentError::Cancelled => Code::ClientClosedRequest,
        AgentError::Model(e) => match e.kind {
            ModelErrorKind::RateLimited => Code::ModelRateLimited,
            ModelErrorKind::Unauthorized => Code::ModelUnauthorized,
            ModelErrorKind::TimedOut => Code::ModelTimedOut,
            ModelErrorKind::Refused => Code::ModelRefused,
            ModelErrorKind::Unavailable => Code::ModelUnavailable,
            ModelErrorKind::Failed => Code::GenerationFailed,
        },
        AgentError::MemoryUnavailable(_) => Code::DatabaseUnavailable,
        AgentError::Duplicate(_) | AgentError::InvalidId(_) | AgentError::Memory(_) => {
            Code::GenerationFailed
        }
    }
}

/// [`agent_error_code`] as the answer, logged as it deserves.
pub fn agent_error(err: AgentError) -> ApiError {
    let code = agent_error_code(&err);
    match code {
        Code::AgentNotFound | Code::InvalidRequest | Code::ClientClosedRequest => {
            ApiError::new(code, err.to_string())
        }
        Code::DatabaseUnavailable => {
            tracing::warn!(error = %err, "conversation memory unavailable");
            ApiError::new(code, DATABASE_UNAVAILABLE)
        }
        Code::UnsatisfiableSchema => {
            tracing::warn!(error = %err, "no object valid against the schema");
            ApiError::new(code, err.to_string())
        }
        _ => {
            tracing::error!(error = %err, code = code.as_str(), "generation failed");
            ApiError::new(code, format!("Failed to generate: {err}"))
        }
    }
}

/// What `database_unavailable` says.
pub const DATABASE_UNAVAILABLE: &str =
    "The database is unavailable (down, restarting or busy): try again shortly";

/// The row of each engine error. Server-side failures (store, internal) are logged with their
/// cause and answered with `server_message`.
pub fn engine_error(err: EngineError, server_message: &str) -> ApiError {
    use EngineError as E;
    let code = match &err {
        E::WorkflowNotFound(_) => Code::WorkflowNotFound,
        E::ExecutionNotFound { .. } | E::UnknownExecution(_) => Code::ExecutionNotFound,
        E::NotSuspended { .. } => Code::ExecutionNotSuspended,
        E::InvalidInput(_) => Code::InvalidInput,
        E::InvalidExecutionId(_) => Code::InvalidExecutionId,
        E::InvalidOptions(_) => Code::InvalidRequest,
        E::NotSuspendable { .. } => Code::NotSuspendable,
        E::NotCancellable { .. } => Code::NotCancellable,
        E::InvalidResumeData(_) => Code::InvalidResumeData,
        E::UnknownStep { .. } => Code::UnknownStep,
        E::ExecutionExists(_) => Code::ExecutionExists,
        // Only inside a run (a cancel while a step ran, a timer a resume beat), which answers
        // with the record instead.
        E::Contention(_) | E::Cancelled(_) | E::NotDue(_) => Code::Conflict,
        // The execution is not lost: another process (or this one, restarted) continues it.
        E::LeaseLost(_) | E::HandedOver(_) => Code::ExecutionContinuesElsewhere,
        E::ShuttingDown => Code::ServerShuttingDown,
        E::Store(StoreError::Unavailable(cause)) => {
            tracing::warn!(error = %cause, "{server_message}: the database is unavailable");
            return ApiError::new(Code::DatabaseUnavailable, DATABASE_UNAVAILABLE);
        }
        E::Store(StoreError::Invalid(_)) => Code::InvalidRequest,
        E::DuplicateWorkflow(_) | E::Store(_) | E::Internal(_) => {
            tracing::error!(error = %err, "{server_message}");
            return ApiError::internal(server_message);
        }
    };
    ApiError::new(code, err.to_string())
}

/// Turns actix's JSON extractor failures into failure envelopes (400; 413 for a body over the
/// limit; 415 for a body that is not JSON; 408 for one that came too slowly) instead of its
/// plaintext default.
pub fn json_error(err: actix_web::error::JsonPayloadError, _req: &HttpRequest) -> actix_web::Error {
    use actix_web::error::JsonPayloadError as J;
    let api = match &err {
        J::OverflowKnownLength { length, limit } => ApiError::new(
            Code::PayloadTooLarge,
            format!("Request body is {length} bytes, over the limit of {limit} bytes"),
        ),
        J::Overflow { limit } => ApiError::new(
            Code::PayloadTooLarge,
            format!("Request body is over the limit of {limit} bytes"),
        ),
        J::ContentType => crate::intake::unsupported_media_type(),
        J::Payload(e) => crate::intake::payload_error(e),
        J::Deserialize(e) if e.is_data() => {
            ApiError::bad_request(format!("Invalid request body: {e}"))
        }
        J::Deserialize(e) => ApiError::bad_request(format!("Invalid JSON: {e}")),
        other => ApiError::bad_request(format!("Invalid request body: {other}")),
    };
    api.into()
}

/// Path and query extractor failures as envelopes.
pub fn path_error(err: actix_web::error::PathError, _req: &HttpRequest) -> actix_web::Error {
    ApiError::bad_request(format!("Invalid path: {err}")).into()
}

pub fn query_error(
    err: actix_web::error::QueryPayloadError,
    _req: &HttpRequest,
) -> actix_web::Error {
    ApiError::bad_request(format!("Invalid query: {err}")).into()
}

/// Unknown routes.
pub async fn not_found(req: HttpRequest) -> HttpResponse {
    let method = crate::intake::arrived_method(&req);
    ApiError::new(
        Code::RouteNotFound,
        format!("Route {method} {} not found", req.path()),
    )
    .error_response()
}

/// A known path asked with a method it does not serve: 405 with `Allow` (the methods of the
/// built-in routes on that path; a host's own routes are not listed). `None` when no route
/// has the path at all.
pub fn method_not_allowed(req: &HttpRequest) -> Option<HttpResponse> {
    if !req.resource_map().has_resource(req.path()) {
        return None;
    }
    let allow = crate::access::allowed_methods(req.path());
    let method = crate::intake::arrived_method(req);
    let mut resp = ApiError::new(
        Code::MethodNotAllowed,
        format!("Method {method} not allowed on {}", req.path()),
    )
    .error_response();
    if !allow.is_empty()
        && let Ok(v) = actix_web::http::header::HeaderValue::from_str(&allow.join(", "))
    {
        resp.headers_mut().insert(actix_web::http::header::ALLOW, v);
    }
    Some(resp)
}

#[cfg(test)]
mod table_tests {
    use super::*;

    #[test]
    fn codes_are_unique_snake_case_and_errors_have_error_statuses() {
        let mut seen = std::collections::HashSet::new();
        for code in Code::ALL {
            let name = code.as_str();
            assert!(seen.insert(name), "{name} twice");
            assert!(
                name.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "{name} is not snake_case"
            );
            assert!(code.status().as_u16() >= 400, "{name}");
            assert_eq!(serde_json::to_value(code).unwrap(), serde_json::json!(name));
        }
    }

    /// `docs/ERRORS.md` shows exactly this table (paste `markdown_table()`'s output there when
    /// a row changes).
    #[test]
    fn the_published_table_is_this_one() {
        let doc = include_str!("../../../docs/ERRORS.md");
        let table = markdown_table();
        assert!(
            doc.contains(&table),
            "docs/ERRORS.md is out of date; its table should be:\n{table}"
        );
    }
}
