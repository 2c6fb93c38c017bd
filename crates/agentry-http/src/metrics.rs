//! Prometheus metrics over HTTP: the middleware that counts every request (by method, route
//! template and status, with its duration) and every open stream and WebSocket, and
//! `GET /metrics`, the text exposition format of the server's `agentry_metrics::Metrics`.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use actix_web::body::{BodySize, BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{Method, StatusCode, header};
use actix_web::middleware::Next;
use actix_web::web::Bytes;
use actix_web::{HttpResponse, ResponseError, get, web};
use agentry_metrics::{Metrics, OpenGuard};

use crate::AppState;
use crate::error::{ApiError, Code};

/// A method as a label: the standard ones by name, anything else as `other`.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// The middleware: counts the request once its response is ready (for a stream or a WebSocket:
/// once it has started), and keeps a stream or a WebSocket counted as open while its body is
/// being sent.
pub async fn track(
    metrics: Arc<Metrics>,
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<Tracked>, actix_web::Error> {
    let started = Instant::now();
    let method = method_label(req.method());
    let res = next.call(req).await?;
    let status = res.status();
    // The route's template, never the raw path (which would make a series per id).
    let route = res.request().match_pattern();
    // Probes are not traffic: left out of the request series.
    if !route
        .as_deref()
        .is_some_and(|r| crate::health::PROBES.contains(&r))
    {
        metrics.http_request(
            method,
            route.as_deref().unwrap_or("unmatched"),
            status.as_u16(),
            started.elapsed(),
        );
    }
    let is_stream = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let open = if status == StatusCode::SWITCHING_PROTOCOLS {
        Some(metrics.websocket_opened())
    } else if is_stream {
        Some(metrics.stream_opened())
    } else {
        None
    };
    Ok(res.map_body(|_, body| Tracked {
        body: body.boxed(),
        _open: open,
    }))
}

/// A response body that holds its "open now" count until it is dropped (sent, or its client
/// gone).
pub struct Tracked {
    body: BoxBody,
    _open: Option<OpenGuard>,
}

impl MessageBody for Tracked {
    type Error = Box<dyn std::error::Error>;

    fn size(&self) -> BodySize {
        self.body.size()
    }

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        Pin::new(&mut self.body).poll_next(cx)
    }
}

/// GET /metrics
#[utoipa::path(
    tag = "observability",
    operation_id = "metrics",
    summary = "Prometheus metrics",
    description = "The Prometheus text exposition format (0.0.4): HTTP requests and their \
        durations by route template and status; executions started, completed, failed, \
        cancelled and suspended by workflow; step durations and retries; leases held and \
        takeovers; open streams and WebSockets; model calls, their durations and tokens by agent \
        and model; tool calls; the store's commit latency. Public by default; a route rule can \
        protect it. When the server is started with `--metrics-bind`, it is served there \
        instead, and here answers 404.",
    responses(
        (status = 200, description = "The metrics.", body = String, content_type = "text/plain"),
    ),
)]
#[get("/metrics")]
pub async fn exposition(app: web::Data<AppState>) -> HttpResponse {
    if app.config.metrics_elsewhere {
        return ApiError::new(
            Code::RouteNotFound,
            "Route GET /metrics not found: metrics are served on their own address",
        )
        .error_response();
    }
    render(&app)
}

/// The metrics as an answer.
pub fn render(app: &AppState) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(Metrics::CONTENT_TYPE)
        .body(app.app.render_metrics(agentry_otel::dropped_spans()))
}

pub fn routes(cfg: &mut crate::registration::Routes<'_, '_>) {
    cfg.service(exposition);
}
