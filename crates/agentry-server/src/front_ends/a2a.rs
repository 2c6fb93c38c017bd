//! `/a2a/{agentId}`: every agent over the Agent2Agent protocol (A2A 1.0, JSON-RPC), as
//! `agentry-a2a` answers it, mounted beside the HTTP API on its server. The card is public (clients fetch it before they have a token);
//! the JSON-RPC endpoint is protected by default like execute, so the authentication, strict
//! mode's ownership, the body limit and the JSON content type (415) apply as on every route. A
//! JSON-RPC error leaves with HTTP 200 (the SDKs read the body only then), its `data` naming
//! the error table's code; a streaming method's events are Server-Sent Events, each a JSON-RPC
//! response, with a comment every two seconds (the Python SDK's client gives up after five
//! silent ones).

use std::time::Duration;

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, Responder, get, post, web};
use actix_web_lab::sse;
use agentry_a2a::{A2aServer, Reply};
use agentry_engine::AgentId;
use agentry_http::auth::Requester;
use agentry_http::error::ApiError;
use agentry_http::mount::Mount;
use agentry_http::{AppState, forwarded, intake};
use futures::StreamExt;

/// How often a silent stream sends a comment.
const KEEP_ALIVE: Duration = Duration::from_secs(2);

/// How long a card may be kept: five minutes, about as long as a deploy takes to be seen.
/// Shared caches may keep it only when its URL is the configured public one; a URL made from
/// the request names the host the client used, so only that client keeps it.
const CARD_CACHE_PUBLIC: &str = "public, max-age=300";
const CARD_CACHE_PRIVATE: &str = "private, max-age=300";

/// The agent's JSON-RPC endpoint, absolute (the card's interface URL), with the card's
/// `Cache-Control`: under `AGENTRY_PUBLIC_URL` when it is set, else at the scheme and host the
/// request was sent to ([`forwarded::seen`]: a trusted proxy's, else the request's own, which
/// the host guard has checked; the connection's address when it names none).
fn endpoint(app: &AppState, req: &HttpRequest, id: &str) -> (String, &'static str) {
    let path = format!("/a2a/{id}");
    if let Some(public) = &app.config.public_url {
        return (public.join(&path), CARD_CACHE_PUBLIC);
    }
    let seen = forwarded::seen(req, &app.config.trusted_proxies);
    let host = match seen.host {
        Some(host) => host.to_string(),
        None => req.app_config().local_addr().to_string(),
    };
    (
        format!("{}://{host}{path}", seen.scheme),
        CARD_CACHE_PRIVATE,
    )
}

/// GET /a2a/{id}/.well-known/agent-card.json
#[utoipa::path(
    tag = "a2a",
    operation_id = "a2aAgentCard",
    summary = "A2A: an agent's card",
    description = "The agent's A2A card (protocol 1.0): its name and description, its tools as \
        skills, its JSON-RPC interface (`POST /a2a/{id}`), streaming, and the Bearer JWT scheme \
        when a provider is configured. Public: clients read it before they call. The interface \
        URL starts with `AGENTRY_PUBLIC_URL` when it is set (`Cache-Control: public, \
        max-age=300`), else with the scheme and host the request was sent to (`private, \
        max-age=300`).",
    params(("id" = String, Path, description = "The agent's id.", example = "assistant")),
    responses((status = 200, description = "The agent card.", body = Object, headers(
        ("Cache-Control" = String, description = "`public, max-age=300` under `AGENTRY_PUBLIC_URL`, else `private, max-age=300`."),
    ))),
)]
#[get("/a2a/{id}/.well-known/agent-card.json")]
pub async fn card(
    app: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let authenticated = app.auth.provider.is_some();
    let (url, cache) = endpoint(&app, &req, &id);
    let card =
        A2aServer::new(app.app.clone()).card(&AgentId::from(id.as_str()), &url, authenticated)?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, cache))
        .json(card))
}

/// POST /a2a/{id}
#[utoipa::path(
    tag = "a2a",
    operation_id = "a2aJsonRpc",
    summary = "A2A: the agent's JSON-RPC endpoint",
    description = "A2A 1.0 over JSON-RPC 2.0, one request per call: `SendMessage`, \
        `SendStreamingMessage` (Server-Sent Events), `GetTask`, `CancelTask`, `SubscribeToTask` \
        (Server-Sent Events). A task is a durable run of the agent (its id the run's, its context \
        the conversation); a run waiting for a tool's approval is `TASK_STATE_INPUT_REQUIRED`, \
        answered by a message in the task whose data part is `{approved, reason?, approvalId?}`. \
        A JSON-RPC error is answered with 200, its `data` an `ErrorInfo` whose `metadata.code` \
        is the error table's code.",
    params(("id" = String, Path, description = "The agent's id.", example = "assistant")),
    request_body(content = Object, description = "A JSON-RPC 2.0 request.", content_type = "application/json"),
    responses(
        (status = 200, description = "The JSON-RPC response, or (a streaming method) a stream of them.", content(
            (Object = "application/json"),
            (String = "text/event-stream"),
        )),
    ),
)]
#[post("/a2a/{id}")]
pub async fn rpc(
    app: web::Data<AppState>,
    req: HttpRequest,
    id: web::Path<String>,
    payload: web::Payload,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let body = intake::json_bytes(&req, payload, app.config.body_limit).await?;
    let id = AgentId::from(id.into_inner());
    // An unknown agent is the route's 404, before any JSON-RPC.
    app.app.agent(&id)?;
    let version = req
        .headers()
        .get("a2a-version")
        .and_then(|v| v.to_str().ok());
    let reply = A2aServer::new(app.app.clone())
        .handle(caller.0, id, &body, version)
        .await;
    Ok(match reply {
        Reply::Json(value) => HttpResponse::Ok().json(value),
        Reply::Stream(events) => {
            let events = events.map(|v| {
                Ok::<_, std::convert::Infallible>(sse::Event::Data(sse::Data::new(v.to_string())))
            });
            sse::Sse::from_stream(events)
                .with_keep_alive(KEEP_ALIVE)
                .respond_to(&req)
        }
    })
}

/// The A2A front end: every agent's card and JSON-RPC endpoint, on the application the HTTP
/// state serves.
pub fn mount() -> Mount {
    Mount::new(|cfg| {
        cfg.service(card).service(rpc);
    })
}
