//! The envelopes every JSON answer is wrapped in: `{success: true, data}` ([`Success`]) and
//! `{success: false, error, code}` ([`crate::error::Failure`]).

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa::openapi::schema::{ObjectBuilder, Type};

/// The success envelope around `data`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Success<T> {
    #[schema(schema_with = always_true)]
    pub success: bool,
    pub data: T,
}

impl<T> Success<T> {
    pub fn new(data: T) -> Self {
        Self {
            success: true,
            data,
        }
    }
}

/// `success` of [`Success`]: always `true`.
fn always_true() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Boolean)
        .enum_values(Some([true]))
        .description(Some("Always `true`."))
}

/// `success` of the failure envelope: always `false`.
pub(crate) fn always_false() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Boolean)
        .enum_values(Some([false]))
        .description(Some("Always `false`."))
}

/// Answers 200 with `data` in the envelope.
pub fn ok<T: Serialize>(data: T) -> HttpResponse {
    with_status(StatusCode::OK, data)
}

/// Answers `status` with `data` in the envelope.
pub fn with_status<T: Serialize>(status: StatusCode, data: T) -> HttpResponse {
    HttpResponse::build(status).json(Success::new(data))
}
