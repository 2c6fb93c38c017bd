//! `/mcp`: agentry as an MCP server over Streamable HTTP (`agentry-mcp`, on rmcp), mounted beside
//! the HTTP API on its server, behind the same middleware as every route: authentication (protected by default once a provider is on;
//! the same Bearer token), the cross-site guard, body limits and time-outs. This module only
//! adapts actix's request to `agentry-mcp`'s service and its answer back: the caller the
//! middleware verified goes with the request, so agents and workflows see the same user as on
//! the HTTP routes, and its sessions are its own. A refusal of `agentry-mcp`'s (another user's
//! or an unknown session, the session limit, an `initialize` too large) or an HTTP-level refusal
//! of rmcp's (a wrong `Accept`) leaves as the failure envelope, like every other failure; a body
//! that is not one JSON-RPC message gets its JSON-RPC error (400).

use std::sync::Arc;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, delete, get, post, web};
use agentry_app::App;
use agentry_http::AppState;
use agentry_http::auth::Requester;
use agentry_http::error::{ApiError, Code, Failure, code_for_status, failure_body};
use agentry_http::mount::Mount;
use agentry_mcp::{McpCaller, McpRefusal, McpService, SessionLimits};
use http_body_util::BodyExt;
use serde_json::Value;
use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};

/// The largest refusal text of rmcp's that is quoted in an envelope.
const MAX_REFUSAL: usize = 1024;

/// The answer to an unknown, ended or someone else's session: the same for all three.
const SESSION_NOT_FOUND: &str = "MCP session not found: unknown or ended (initialize again)";

/// The MCP front end on `app`: one service (its sessions) shared by every server worker.
/// `max_body` is the HTTP body limit, which an MCP message keeps to too.
pub fn mount(app: App, max_body: usize, sessions: SessionLimits) -> Mount {
    let service = Arc::new(agentry_mcp::service(app, max_body, sessions));
    Mount::new(move |cfg| {
        cfg.app_data(web::Data::from(service.clone()))
            .service(mcp_post)
            .service(mcp_get)
            .service(mcp_delete);
    })
}

async fn forward(
    app: web::Data<AppState>,
    mcp: web::Data<McpService>,
    req: HttpRequest,
    body: web::Bytes,
    caller: Requester,
) -> HttpResponse {
    let mut builder = http::Request::builder()
        .method(req.method().as_str())
        .uri(req.uri().to_string());
    for (name, value) in req.headers() {
        builder = builder.header(name.as_str(), value.as_bytes());
    }
    let caller = McpCaller(caller.0);
    let request = match builder.body(body) {
        Ok(r) => r,
        Err(e) => {
            return actix_web::ResponseError::error_response(&ApiError::bad_request(format!(
                "Invalid MCP request: {e}"
            )));
        }
    };
    let response = match mcp.handle(request, caller).await {
        Ok(r) => r,
        Err(refusal) => return refused(refusal),
    };
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
            // A 404 from rmcp is always about the session (the route exists): a session that
            // ended between the owner's check and rmcp's.
            if status == StatusCode::NOT_FOUND {
                return refused(McpRefusal::SessionNotFound);
            }
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
            let mut out = HttpResponse::build(status);
            copy_headers(&mut out, &parts.headers, false);
            return out.json(failure_body(code_for_status(status), &message));
        }
    }
    let mut out = HttpResponse::build(status);
    copy_headers(&mut out, &parts.headers, true);
    // A session's stream of server messages (GET) never ends by itself: it ends when this
    // server begins to drain (the client reconnects, to another replica), so it does not hold
    // the shutdown. A POST's stream ends with its answer.
    let stream = body.into_data_stream();
    if req.method() == actix_web::http::Method::GET {
        let drained = app.app.drain_signal().cancelled_owned();
        out.streaming(futures::StreamExt::take_until(stream, drained))
    } else {
        out.streaming(stream)
    }
}

/// The answer to a request `agentry-mcp` refused.
fn refused(refusal: McpRefusal) -> HttpResponse {
    match refusal {
        McpRefusal::NotJsonRpc(error) => HttpResponse::BadRequest().json(error),
        McpRefusal::SessionNotFound => {
            HttpResponse::NotFound().json(failure_body(Code::McpSessionNotFound, SESSION_NOT_FOUND))
        }
        McpRefusal::SessionLimit(full) => {
            let secs = full.retry_after.as_secs() + u64::from(full.retry_after.subsec_nanos() > 0);
            HttpResponse::ServiceUnavailable()
                .insert_header((actix_web::http::header::RETRY_AFTER, secs.to_string()))
                .json(failure_body(
                    Code::McpSessionLimit,
                    "The server holds as many MCP sessions as it may: try again later",
                ))
        }
        McpRefusal::InitializeTooLarge(why) => {
            HttpResponse::PayloadTooLarge().json(failure_body(Code::PayloadTooLarge, &why))
        }
    }
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

/// A JSON-RPC 2.0 error answer: a body that is not one JSON-RPC message (parse error `-32700`,
/// invalid request `-32600`), or a message rmcp refuses before any handler (such as
/// `MCP-Protocol-Version` disagreeing with the body).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct JsonRpcFailure {
    #[schema(schema_with = jsonrpc_version)]
    pub jsonrpc: String,
    /// The request's id when it could be read, else `null`.
    #[schema(schema_with = jsonrpc_id)]
    pub id: Value,
    pub error: JsonRpcErrorObject,
}

/// The `error` of a JSON-RPC error answer.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct JsonRpcErrorObject {
    /// `-32700` (parse error: not JSON, empty, or nested too deep), `-32600` (invalid request:
    /// not one JSON-RPC message, a batch included), or another JSON-RPC or MCP error code.
    pub code: i32,
    /// What went wrong, for a person.
    pub message: String,
}

/// A 400 of `POST /mcp`: the failure envelope (a missing session) or a JSON-RPC error.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum McpBadRequest {
    Envelope(Failure),
    JsonRpc(JsonRpcFailure),
}

fn jsonrpc_version() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(["2.0"]))
        .description(Some("Always `2.0`."))
}

fn jsonrpc_id() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(SchemaType::Array(vec![
            Type::String,
            Type::Integer,
            Type::Null,
        ]))
        .description(Some("The request's id when it could be read, else `null`."))
}

// utoipa takes only a literal as a description: the `initialize` bounds it states are the
// application's.
const _: () = assert!(
    agentry_app::limits::MCP_INITIALIZE_BYTES == 4 * 1024
        && agentry_app::limits::MCP_INITIALIZE_VALUES == 64
);

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
        is configured (the same Bearer token as the HTTP routes).\n\n\
        A session belongs to the user who opened it (`anonymous` without a provider): with \
        anyone else's token its id is unknown (404). A user holds at most \
        `AGENTRY_MCP_MAX_SESSIONS_PER_USER` sessions (16; one more ends their least recently \
        used), the server at most `AGENTRY_MCP_MAX_SESSIONS` (1,000; beyond it 503); a session \
        idle for `AGENTRY_MCP_SESSION_IDLE` (5 minutes) ends. An `initialize` is at most 4 KiB \
        with at most 64 JSON values in its params; one JSON-RPC message per request (no \
        batches).",
    params(
        ("Mcp-Session-Id" = Option<String>, Header, description = "The session, as `initialize` answered it (every request after it)."),
    ),
    request_body(content = Object, description = "A JSON-RPC 2.0 message.", content_type = "application/json"),
    responses(
        (status = 200, description = "The JSON-RPC answer: JSON, or an SSE stream of JSON-RPC messages.", content(
            (Object = "application/json"),
            (String = "text/event-stream"),
        )),
        (status = 202, description = "A notification or response was accepted."),
        (status = 400, description = "A body that is not one JSON-RPC message: the JSON-RPC error \
            (`-32700` parse error: malformed, empty or too deeply nested JSON; `-32600` invalid \
            request: not a JSON-RPC message, or a batch), with `id: null`; or a message without \
            the session it needs (the failure envelope).", body = McpBadRequest),
    ),
)]
#[post("/mcp")]
pub async fn mcp_post(
    app: web::Data<AppState>,
    mcp: web::Data<McpService>,
    req: HttpRequest,
    body: web::Bytes,
    caller: Requester,
) -> HttpResponse {
    forward(app, mcp, req, body, caller).await
}

/// GET /mcp
#[utoipa::path(
    tag = "mcp",
    operation_id = "mcpGet",
    summary = "MCP: the session's stream of server messages",
    description = "Opens the Server-Sent Event stream of a session's server-to-client messages \
        (send its `Mcp-Session-Id`), or resumes one after `Last-Event-ID`. Only the session's \
        own user may.",
    params(
        ("Mcp-Session-Id" = Option<String>, Header, description = "The session."),
        ("Last-Event-ID" = Option<String>, Header, description = "Resume a stream after this event."),
    ),
    responses(
        (status = 200, description = "The stream of JSON-RPC messages.", body = String, content_type = "text/event-stream"),
    ),
)]
#[get("/mcp")]
pub async fn mcp_get(
    app: web::Data<AppState>,
    mcp: web::Data<McpService>,
    req: HttpRequest,
    caller: Requester,
) -> HttpResponse {
    forward(app, mcp, req, web::Bytes::new(), caller).await
}

/// DELETE /mcp
#[utoipa::path(
    tag = "mcp",
    operation_id = "mcpDelete",
    summary = "MCP: end a session",
    description = "Ends a session (send its `Mcp-Session-Id`). Only the session's own user may.",
    params(
        ("Mcp-Session-Id" = Option<String>, Header, description = "The session."),
    ),
    responses(
        (status = 204, description = "The session ended."),
    ),
)]
#[delete("/mcp")]
pub async fn mcp_delete(
    app: web::Data<AppState>,
    mcp: web::Data<McpService>,
    req: HttpRequest,
    caller: Requester,
) -> HttpResponse {
    forward(app, mcp, req, web::Bytes::new(), caller).await
}
