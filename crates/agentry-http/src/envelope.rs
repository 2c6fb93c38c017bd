//! The success envelope `{success: true, data: <payload>}`.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use serde::Serialize;
use serde_json::json;

/// Answers 200 with `data` in the envelope.
pub fn ok<T: Serialize>(data: T) -> HttpResponse {
    with_status(StatusCode::OK, data)
}

/// Answers `status` with `data` in the envelope.
pub fn with_status<T: Serialize>(status: StatusCode, data: T) -> HttpResponse {
    HttpResponse::build(status).json(json!({"success": true, "data": data}))
}
