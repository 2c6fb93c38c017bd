//! One log record per HTTP request: method, path (never the query string, which may carry a
//! token), status and duration, logged at info level with target `agentry_http::request` once
//! the response is ready (for a stream or a WebSocket: once it has started).

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;

/// The middleware function; wrap the app with `actix_web::middleware::from_fn(log_request)`.
pub async fn log_request(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let started = Instant::now();
    let method = req.method().clone();
    let path = req.path().to_owned();
    let res = next.call(req).await;
    // Probes every few seconds would drown the log.
    if crate::health::PROBES.contains(&path.as_str()) {
        return res;
    }
    let status = match &res {
        Ok(r) => r.status(),
        Err(e) => e.as_response_error().status_code(),
    };
    let elapsed = started.elapsed();
    let duration_ms = (elapsed.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0;
    tracing::info!(
        target: "agentry_http::request",
        method = %method,
        path = %path,
        status = status.as_u16(),
        duration_ms,
        "{method} {path} {} in {duration_ms} ms",
        status.as_u16()
    );
    res
}
