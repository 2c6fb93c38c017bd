//! `/mcp`: agentry as an MCP server over Streamable HTTP (`agentry-mcp`, on rmcp), behind the
//! same middleware as every route: authentication (protected by default once a provider is on;
//! the same Bearer token), the cross-site guard, body limits and time-outs. This module only
//! adapts actix's request to rmcp's `http` service and its answer back: the caller the
//! middleware verified goes with the request, so agents and workflows see the same user as on
//! the HTTP routes. An HTTP-level refusal from rmcp (a bad session, a wrong `Accept`) leaves as
//! the failure envelope, like every other failure.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, delete, get, post, web};
use agentry_mcp::McpCaller;
use http_body_util::BodyExt;

use crate::AppState;
use crate::auth::AuthenticatedUser;
use crate::error::{ApiError, Code, code_for_status, failure_body};

/// The largest refusal text of rmcp's that is quoted in an envelope.
const MAX_REFUSAL: usize = 1024;

async fn forward(
    app: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
    user: Option<AuthenticatedUser>,
) -> HttpResponse {
    let mcp = &app.mcp;
    let mut builder = http::Request::builder()
        .method(req.method().as_str())
        .uri(req.uri().to_string());
    for (name, value) in req.headers() {
        builder = builder.header(name.as_str(), value.as_bytes());
    }
    let caller = McpCaller {
        user: user.as_ref().map(|u| u.user().as_json().clone()),
        user_id: user.as_ref().and_then(|u| u.user().id()),
        caller: app.auth.caller(user.as_ref()),
    };
    let mut request = match builder.body(http_body_util::Full::new(body)) {
        Ok(r) => r,
        Err(e) => {
            return actix_web::ResponseError::error_response(&ApiError::bad_request(format!(
                "Invalid MCP request: {e}"
            )));
        }
    };
    request.extensions_mut().insert(caller);
    let response = mcp.handle(request).await;
    let (parts, body) = response.into_parts();
    let mut status = StatusCode::from_u16(parts.status.as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    // rmcp accepts a session's end with 202; clients (the official Python SDK among them) take
    // 200 or 204 as "ended" and warn on anything else.
    if req.method() == actix_web::http::Method::DELETE && status == StatusCode::ACCEPTED {
        status = StatusCode::NO_CONTENT;
    }
    if status.is_client_error() || status.is_server_error() {
        let is_json = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("application/json"));
        if !is_json {
            let text = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let text = String::from_utf8_lossy(&text[..text.len().min(MAX_REFUSAL)]).into_owned();
            let message = if text.trim().is_empty() {
                status.canonical_reason().unwrap_or("Error").to_owned()
            } else {
                text.trim().to_owned()
            };
            // A 404 from rmcp is always about the session (the route exists).
            let code = if status == StatusCode::NOT_FOUND {
                Code::McpSessionNotFound
            } else {
                code_for_status(status)
            };
            let mut out = HttpResponse::build(status);
            copy_headers(&mut out, &parts.headers, false);
            return out.json(failure_body(code, &message));
        }
    }
    let mut out = HttpResponse::build(status);
    copy_headers(&mut out, &parts.headers, true);
    out.streaming(body.into_data_stream())
}

/// rmcp's headers on actix's answer (the content type only for a body passed through).
fn copy_headers(
    out: &mut actix_web::HttpResponseBuilder,
    headers: &http::HeaderMap,
    with_content: bool,
) {
    for (name, value) in headers {
        let content = name == http::header::CONTENT_TYPE || name == http::header::CONTENT_LENGTH;
        if content && !with_content {
            continue;
        }
        if name == http::header::CONTENT_LENGTH {
            continue;
        }
        out.append_header((name.as_str(), value.as_bytes()));
    }
}

/// POST /mcp
#[utoipa::path(
    tag = "mcp",
    operation_id = "mcpPost",
    summary = "MCP: send a JSON-RPC message (Streamable HTTP)",
    description = "The Model Context Protocol's Streamable HTTP transport: a JSON-RPC request, \
        notification or response. Tools: every registered tool by its name, every agent as \
        `ask_<agentId>` (`{input, conversationId?}`, its text), every workflow as \
        `run_<workflowId>` (its input schema; the completed result, or the suspended form with \
        the execution id and what a resume needs). A failing tool is an MCP tool error \
        (`isError`). Send `Accept: application/json, text/event-stream`; after `initialize`, \
        send back the `Mcp-Session-Id` it answered with. Protected by default once a provider \
        is configured (the same Bearer token as the HTTP routes).",
    request_body(content = Object, description = "A JSON-RPC 2.0 message.", content_type = "application/json"),
    responses(
        (status = 200, description = "The JSON-RPC answer: JSON, or an SSE stream of JSON-RPC messages.", content(
            (Object = "application/json"),
            (String = "text/event-stream"),
        )),
        (status = 202, description = "A notification or response was accepted."),
        (status = 400, description = "Not a valid MCP message, or a missing session.", body = crate::error::Failure),
        (status = 404, description = "An unknown or ended session (initialize again).", body = crate::error::Failure),
        (status = 406, description = "`Accept` does not allow the answer's media types.", body = crate::error::Failure),
    ),
)]
#[post("/mcp")]
pub async fn mcp_post(
    app: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
    user: Option<AuthenticatedUser>,
) -> HttpResponse {
    forward(app, req, body, user).await
}

/// GET /mcp
#[utoipa::path(
    tag = "mcp",
    operation_id = "mcpGet",
    summary = "MCP: the session's stream of server messages",
    description = "Opens the Server-Sent Event stream of a session's server-to-client messages \
        (send its `Mcp-Session-Id`).",
    responses(
        (status = 200, description = "The stream of JSON-RPC messages.", body = String, content_type = "text/event-stream"),
        (status = 400, description = "No session named.", body = crate::error::Failure),
        (status = 404, description = "An unknown or ended session.", body = crate::error::Failure),
        (status = 405, description = "Streams are not served for this protocol version.", body = crate::error::Failure),
        (status = 406, description = "`Accept` does not allow `text/event-stream`.", body = crate::error::Failure),
    ),
)]
#[get("/mcp")]
pub async fn mcp_get(
    app: web::Data<AppState>,
    req: HttpRequest,
    user: Option<AuthenticatedUser>,
) -> HttpResponse {
    forward(app, req, web::Bytes::new(), user).await
}

/// DELETE /mcp
#[utoipa::path(
    tag = "mcp",
    operation_id = "mcpDelete",
    summary = "MCP: end a session",
    responses(
        (status = 204, description = "The session ended."),
        (status = 400, description = "No session named.", body = crate::error::Failure),
        (status = 404, description = "An unknown or ended session.", body = crate::error::Failure),
        (status = 405, description = "Sessions are not used by this protocol version.", body = crate::error::Failure),
    ),
)]
#[delete("/mcp")]
pub async fn mcp_delete(
    app: web::Data<AppState>,
    req: HttpRequest,
    user: Option<AuthenticatedUser>,
) -> HttpResponse {
    forward(app, req, web::Bytes::new(), user).await
}

pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig<'_>) {
    cfg.service(mcp_post).service(mcp_get).service(mcp_delete);
}
