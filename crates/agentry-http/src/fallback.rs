//! The safety net: any error response that is not already JSON (actix's own plaintext answers to
//! an oversized payload, a bad header, a panic caught by actix, ...) is rewritten into the failure
//! envelope with the same status. A body a handler wrote itself (a custom route's own 403 page)
//! is left alone. Then the host's error handler, if any, may replace the response.

use actix_web::dev::ServiceResponse;
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::{ErrorHandlerResponse, ErrorHandlers};

fn is_json_or_stream(res: &ServiceResponse<impl actix_web::body::MessageBody>) -> bool {
    res.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/json") || ct.starts_with("text/event-stream"))
}

fn envelope<B: actix_web::body::MessageBody + 'static>(
    res: ServiceResponse<B>,
) -> actix_web::Result<ErrorHandlerResponse<B>> {
    let generated = res.response().error().is_some()
        || matches!(
            res.response().body().size(),
            actix_web::body::BodySize::Sized(0) | actix_web::body::BodySize::None
        );
    if is_json_or_stream(&res) || !generated {
        return Ok(ErrorHandlerResponse::Response(res.map_into_left_body()));
    }
    let status = res.status();
    let message = res
        .response()
        .error()
        .map(|e| e.to_string())
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| status.canonical_reason().unwrap_or("Error").to_owned());
    let failure = crate::error::failure_body(crate::error::code_for_status(status), &message);
    let body = serde_json::to_string(&failure).expect("a failure serializes");
    let (req, mut resp) = res.into_parts();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let resp = resp.set_body(body).map_into_boxed_body();
    Ok(ErrorHandlerResponse::Response(
        ServiceResponse::new(req, resp).map_into_right_body(),
    ))
}

/// The middleware; wrap the app with it.
pub fn json_errors<B: actix_web::body::MessageBody + 'static>() -> ErrorHandlers<B> {
    ErrorHandlers::new().default_handler(envelope)
}

/// The host's error handler: sees every response that carries an error and may replace it.
pub async fn host_errors<B: actix_web::body::MessageBody + 'static>(
    handler: Option<crate::host::ErrorFn>,
    req: actix_web::dev::ServiceRequest,
    next: actix_web::middleware::Next<B>,
) -> Result<ServiceResponse<actix_web::body::BoxBody>, actix_web::Error> {
    let res = next.call(req).await?.map_into_boxed_body();
    let Some(handler) = handler else {
        return Ok(res);
    };
    let replacement = match res.response().error() {
        Some(err) => handler(res.request(), err),
        None => None,
    };
    Ok(match replacement {
        Some(resp) => res.into_response(resp),
        None => res,
    })
}
