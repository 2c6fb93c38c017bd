//! A span per HTTP request, for OpenTelemetry (only while traces are exported): named
//! `<METHOD> <route template>`, with the request's method, path, route and status, the child of
//! the caller's span when the request carries a W3C `traceparent`. What runs for the request
//! (an execution, an agent's generation) is part of the same trace.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use tracing::Instrument;
use tracing::field::Empty;

/// The middleware; wrap the app with `from_fn(trace_request)`.
pub async fn trace_request(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    if !agentry_otel::enabled() {
        return next.call(req).await;
    }
    let method = req.method().as_str().to_owned();
    let span = tracing::info_span!(
        "http_request",
        otel.name = %method,
        otel.kind = "server",
        otel.status_code = Empty,
        http.request.method = %method,
        url.path = %req.path(),
        http.route = Empty,
        http.response.status_code = Empty,
    );
    agentry_otel::continue_trace(
        &span,
        req.headers()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?))),
    );
    let res = next.call(req).instrument(span.clone()).await;
    let (route, status) = match &res {
        Ok(r) => (
            r.request()
                .match_pattern()
                .unwrap_or_else(|| "unmatched".to_owned()),
            r.status(),
        ),
        Err(e) => ("unmatched".to_owned(), e.as_response_error().status_code()),
    };
    // The route is known once routed: the span, started by then, is renamed.
    agentry_otel::rename(&span, format!("{method} {route}"));
    span.record("http.route", route.as_str());
    span.record("http.response.status_code", i64::from(status.as_u16()));
    if status.is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
    res
}
