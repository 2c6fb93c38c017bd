//! Failures as HTTP answers: the error table ([`Code`], in `agentry-app`) rendered as the failure
//! envelope `{success: false, error: <message>, code: <code>}` with the row's status, and the
//! failures actix itself finds (malformed JSON, paths and queries, unknown routes, methods).

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, ResponseError};
pub use agentry_app::error::{
    AppError, Code, DATABASE_UNAVAILABLE, agent_error_code, markdown_table,
};

/// The HTTP status of a row.
pub fn status_of(code: Code) -> StatusCode {
    StatusCode::from_u16(code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// An [`AppError`] answered with the failure envelope.
#[derive(Debug, Clone)]
pub struct ApiError(pub AppError);

impl ApiError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self(AppError::new(code, message))
    }

    /// A malformed or out-of-range request ([`Code::InvalidRequest`]).
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self(AppError::bad_request(message))
    }

    /// A failure of the server itself ([`Code::Internal`]); log its cause first.
    pub fn internal(message: impl Into<String>) -> Self {
        Self(AppError::internal(message))
    }

    pub fn status(&self) -> StatusCode {
        status_of(self.0.code)
    }
}

impl std::ops::Deref for ApiError {
    type Target = AppError;
    fn deref(&self) -> &AppError {
        &self.0
    }
}

impl From<AppError> for ApiError {
    fn from(e: AppError) -> Self {
        Self(e)
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
        f.write_str(&self.0.message)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status()
    }

    fn error_response(&self) -> HttpResponse {
        let mut out = HttpResponse::build(self.status());
        if let Some(seconds) = self.0.retry_after_secs() {
            out.insert_header((actix_web::http::header::RETRY_AFTER, seconds.to_string()));
        }
        if let Some(id) = &self.0.execution_id
            && let Ok(v) = actix_web::http::header::HeaderValue::from_str(id)
        {
            out.insert_header(("x-execution-id", v));
        }
        out.json(failure_body(self.0.code, &self.0.message))
    }
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
