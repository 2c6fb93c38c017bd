//! The failure envelope and the table of errors: every failure leaves as
//! `{success: false, error: <message>}` with its status.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, ResponseError};
use agentry_core::EngineError;
use serde_json::json;

/// An error answered with the failure envelope.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status).json(json!({"success": false, "error": self.message}))
    }
}

/// The status each engine error is answered with. Server-side failures (store, internal) are
/// logged with their cause and answered with `server_message`.
pub fn engine_error(err: EngineError, server_message: &str) -> ApiError {
    use EngineError as E;
    let status = match &err {
        E::WorkflowNotFound(_) | E::ExecutionNotFound { .. } | E::NotSuspended { .. } => {
            StatusCode::NOT_FOUND
        }
        E::InvalidInput(_)
        | E::InvalidExecutionId(_)
        | E::NotSuspendable { .. }
        | E::NotCancellable { .. }
        | E::InvalidResumeData(_)
        | E::UnknownStep { .. } => StatusCode::BAD_REQUEST,
        E::ExecutionExists(_) | E::Contention(_) => StatusCode::CONFLICT,
        // The execution is not lost: another process (or this one, restarted) continues it.
        E::LeaseLost(_) | E::HandedOver(_) => StatusCode::SERVICE_UNAVAILABLE,
        // Only inside a run (a cancel while a step ran), which answers with the record.
        E::Cancelled(_) | E::NotDue(_) => StatusCode::CONFLICT,
        E::DuplicateWorkflow(_) | E::Store(_) | E::Internal(_) => {
            tracing::error!(error = %err, "{server_message}");
            return ApiError::internal(server_message);
        }
    };
    ApiError::new(status, err.to_string())
}

/// Turns actix's JSON extractor failures into failure envelopes (400; 413 for a body over the
/// limit; 415 for a body that is not JSON; 408 for one that came too slowly) instead of its
/// plaintext default.
pub fn json_error(err: actix_web::error::JsonPayloadError, _req: &HttpRequest) -> actix_web::Error {
    use actix_web::error::JsonPayloadError as J;
    let api = match &err {
        J::OverflowKnownLength { length, limit } => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Request body is {length} bytes, over the limit of {limit} bytes"),
        ),
        J::Overflow { limit } => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
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
    ApiError::not_found(format!("Route {method} {} not found", req.path())).error_response()
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
        StatusCode::METHOD_NOT_ALLOWED,
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
