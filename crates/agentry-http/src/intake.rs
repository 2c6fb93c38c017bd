//! What every request goes through before routing: `HEAD` served as `GET` without a body, and
//! the body read under a deadline (a client that promises 100 bytes and sends 14 is answered 408
//! after `HttpConfig::body_timeout`, not held open). Also the JSON content-type rule of the
//! routes whose body is optional, or parsed by their handler.

use std::io;
use std::time::Duration;

use actix_web::body::BoxBody;
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::Method;
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpRequest, web};
use futures::StreamExt;

use crate::error::{ApiError, Code};

/// The method a request arrived with, when intake changed it (`HEAD` is routed as `GET`).
#[derive(Debug, Clone)]
pub struct ArrivedAs(pub Method);

/// The method to name in messages: the one the client sent.
pub fn arrived_method(req: &HttpRequest) -> Method {
    req.extensions()
        .get::<ArrivedAs>()
        .map(|m| m.0.clone())
        .unwrap_or_else(|| req.method().clone())
}

/// The middleware.
pub async fn intake(
    body_timeout: Duration,
    mut req: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    if let Some(field) = nul_in_path_or_query(&req) {
        let message = agentry_engine::id::nul_refused(&field);
        return Ok(req
            .error_response(ApiError::bad_request(message))
            .map_into_boxed_body());
    }
    if req.method() == Method::HEAD {
        // Routed as GET; the HTTP layer knows the request was HEAD and sends no body.
        req.extensions_mut().insert(ArrivedAs(Method::HEAD));
        req.head_mut().method = Method::GET;
    }
    // A WebSocket's payload is its frames, which last as long as the socket: no deadline there.
    if !req.head().upgrade() {
        match req.take_payload() {
            Payload::None => {}
            payload => req.set_payload(Payload::from(deadline(payload, body_timeout))),
        }
    }
    next.call(req).await
}

/// The path parameter or query parameter whose value holds the NUL character (`%00`), if
/// any: ids, cursors and filters are text keys, which no database column can hold it in (see
/// `agentry_engine::id::refuse_nul`). A path parameter is named as the route names it, in
/// camelCase (`executionId`). (A raw NUL never gets this far: the HTTP parser refuses it.)
fn nul_in_path_or_query(req: &ServiceRequest) -> Option<String> {
    const NUL: &str = "%00";
    let path = req.path();
    if path.contains(NUL) {
        let pattern = req.match_pattern().unwrap_or_default();
        let named = pattern
            .split('/')
            .zip(path.split('/'))
            .find(|(_, segment)| segment.contains(NUL))
            .and_then(|(param, _)| param.strip_prefix('{'))
            .map(|p| camel_case(p.trim_end_matches('}').split(':').next().unwrap_or(p)));
        return Some(named.unwrap_or_else(|| "the path".to_owned()));
    }
    req.query_string()
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .find(|(key, value)| key.contains(NUL) || value.contains(NUL))
        .map(|(key, _)| key.to_owned())
}

/// `execution_id` as `executionId`.
fn camel_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// A request body as actix reads it.
type BodyStream = std::pin::Pin<Box<dyn futures::Stream<Item = Result<web::Bytes, PayloadError>>>>;

/// The error a body stream ends with when its deadline passes.
fn timed_out(limit: Duration) -> PayloadError {
    PayloadError::Io(io::Error::new(
        io::ErrorKind::TimedOut,
        format!("the body was not received within {}", seconds(limit)),
    ))
}

fn seconds(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

/// `payload`, failing with a time-out once `limit` has passed since it was first read.
fn deadline(payload: Payload, limit: Duration) -> BodyStream {
    struct State {
        payload: Payload,
        ends_at: Option<tokio::time::Instant>,
        done: bool,
    }
    let state = State {
        payload,
        ends_at: None,
        done: false,
    };
    Box::pin(futures::stream::unfold(state, move |mut s| async move {
        if s.done {
            return None;
        }
        let ends_at = *s
            .ends_at
            .get_or_insert_with(|| tokio::time::Instant::now() + limit);
        match tokio::time::timeout_at(ends_at, s.payload.next()).await {
            Ok(Some(chunk)) => Some((chunk, s)),
            Ok(None) => None,
            Err(_) => {
                s.done = true;
                Some((Err(timed_out(limit)), s))
            }
        }
    }))
}

/// The failure envelope of a body that could not be read: 408 when it came too slowly, 413 when
/// it was too large, else 400.
pub fn payload_error(e: &PayloadError) -> ApiError {
    match e {
        PayloadError::Io(io) if io.kind() == io::ErrorKind::TimedOut => {
            ApiError::new(Code::RequestTimeout, format!("Request timeout: {io}"))
        }
        PayloadError::Overflow => {
            ApiError::new(Code::PayloadTooLarge, "Request body is over the limit")
        }
        other => ApiError::bad_request(format!("Invalid request body: {other}")),
    }
}

/// The answer to a body that is not JSON.
pub fn unsupported_media_type() -> ApiError {
    ApiError::new(
        Code::UnsupportedMediaType,
        "Unsupported media type: Content-Type must be application/json",
    )
}

/// Whether the request says its body is JSON (`application/json` or `…+json`).
fn says_json(req: &HttpRequest) -> bool {
    matches!(
        req.mime_type(),
        Ok(Some(m)) if m.subtype() == actix_web::mime::JSON
            || m.suffix() == Some(actix_web::mime::JSON)
    )
}

/// A JSON body as bytes, for a handler that parses it itself (`POST /a2a/{id}`, whose parse
/// errors are JSON-RPC's): a Content-Type that is not JSON, or none, is a 415 before the body
/// is read, as for every route that takes JSON; a slow body a 408, a large one a 413.
pub async fn json_bytes(
    req: &HttpRequest,
    payload: web::Payload,
    limit: usize,
) -> Result<web::Bytes, ApiError> {
    if !says_json(req) {
        return Err(unsupported_media_type());
    }
    read_body(payload, limit).await
}

/// An optional JSON body (`POST .../suspend`): `None` when the request has no body and no
/// Content-Type; a body or a Content-Type that is not JSON is a 415 (so a cross-site form or
/// `text/plain` request never reaches the handler), a slow body a 408, a large one a 413.
pub async fn optional_json<T: serde::de::DeserializeOwned>(
    req: &HttpRequest,
    payload: web::Payload,
    limit: usize,
) -> Result<Option<T>, ApiError> {
    let has_type = req
        .headers()
        .contains_key(actix_web::http::header::CONTENT_TYPE);
    if has_type && !says_json(req) {
        return Err(unsupported_media_type());
    }
    let body = read_body(payload, limit).await?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    if !has_type {
        return Err(unsupported_media_type());
    }
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| ApiError::bad_request(format!("Invalid request body: {e}")))
}

/// The whole body, at most `limit` bytes (413), under intake's deadline (408).
pub(crate) async fn read_body(payload: web::Payload, limit: usize) -> Result<web::Bytes, ApiError> {
    match payload.to_bytes_limited(limit).await {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(e)) => Err(match e.as_error::<PayloadError>() {
            Some(p) => payload_error(p),
            None => ApiError::bad_request(format!("Invalid request body: {e}")),
        }),
        Err(_) => Err(ApiError::new(
            Code::PayloadTooLarge,
            format!("Request body is over the limit of {limit} bytes"),
        )),
    }
}
