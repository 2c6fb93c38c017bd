//! The seven agent routes of spec section 4: each parses, calls one use case of `agentry-app`
//! and renders its answer (the envelope, Server-Sent Events, or the AI SDK's UI message stream).

use std::convert::Infallible;
use std::time::Duration;

use actix_web::{HttpResponse, Responder, get, post, web};
use actix_web_lab::sse;
use agentry_agents::AgentEvent;
use agentry_app::App;
use agentry_app::input::{AgentRequest, BodyKind, ObjectRequest};
use futures::{Stream, StreamExt};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::AppState;
use crate::auth::Requester;
use crate::envelope::{self, Success};
use crate::error::ApiError;
use crate::ui_stream::{self, UiMessageStream};
use crate::wire::agents::{AgentDetail, AgentEvent as WireEvent, AgentSummary, ObjectEvent};
use agentry_app::runs::{AgentStream, RunEventId};
use agentry_app::wire::runs::TextAnswer;

/// GET /agents
#[utoipa::path(
    tag = "agents",
    operation_id = "listAgents",
    summary = "List the agents",
    responses((status = 200, description = "The registered agents.", body = Success<Vec<AgentSummary>>)),
)]
#[get("/agents")]
pub async fn list_agents(app: web::Data<AppState>) -> HttpResponse {
    let body = app.agent_list.body(&app.app);
    HttpResponse::Ok()
        .content_type(actix_web::http::header::ContentType::json())
        .body(body)
}

/// GET /agents's answer, serialized once per state of the registry (see [`App::agent_count`]).
#[derive(Debug, Default)]
pub struct AgentListCache(std::sync::Mutex<Option<(usize, web::Bytes)>>);

impl AgentListCache {
    fn body(&self, app: &App) -> web::Bytes {
        let count = app.agent_count();
        let mut cached = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((cached_count, body)) = cached.as_ref()
            && *cached_count == count
        {
            return body.clone();
        }
        let body = web::Bytes::from(
            serde_json::to_vec(&Success::new(app.agent_summaries()))
                .expect("the agent list serializes"),
        );
        *cached = Some((count, body.clone()));
        body
    }
}

/// GET /agents/{id}
#[utoipa::path(
    tag = "agents",
    operation_id = "getAgent",
    summary = "An agent",
    params(("id" = String, Path, description = "The agent's id.", example = "assistant")),
    responses(
        (status = 200, description = "The agent, with its tools' definitions.", body = Success<AgentDetail>),
    ),
)]
#[get("/agents/{id}")]
pub async fn get_agent(
    app: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    Ok(envelope::ok(app.app.agent(&id.into_inner().into())?))
}

/// Cancels generation when the request's future is dropped (the client went away).
fn cancel_on_drop() -> (CancellationToken, DropGuard) {
    let t = CancellationToken::new();
    (t.clone(), t.drop_guard())
}

/// POST /agents/{id}/text
#[utoipa::path(
    tag = "agents",
    operation_id = "generateText",
    summary = "Generate text",
    description = "Runs the agent (instructions, memory, model, tools until the model stops or \
        `maxSteps`) and answers with the text. Closing the connection cancels the generation, \
        unless it is a durable run (`options.durable`, `options.runId`, or an agent declared \
        durable or with a tool that needs approval): that one is recorded call by call, goes \
        on without the client, and answers once it completes or waits for a tool's approval \
        (`status: suspended`, `pendingApprovals`).",
    params(("id" = String, Path, description = "The agent's id.", example = "assistant")),
    request_body = AgentRequest,
    responses(
        (status = 200, description = "The generated text (for a durable run also its `runId`, its \
            `status`, and the tool calls waiting for approval).", body = Success<TextAnswer>),
    ),
)]
#[post("/agents/{id}/text")]
pub async fn generate_text(
    app: web::Data<AppState>,
    id: web::Path<String>,
    body: web::Json<Value>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner().into();
    let generation = app.app.generation(&caller.0, &id, &body, BodyKind::Text)?;
    let (cancel, _guard) = cancel_on_drop();
    Ok(envelope::ok(
        app.app.text(&caller.0, &id, generation, cancel).await?,
    ))
}

/// POST /agents/{id}/object
#[utoipa::path(
    tag = "agents",
    operation_id = "generateObject",
    summary = "Generate an object",
    description = "Answers with an object (or array) valid against the request's `schema`. \
        Closing the connection cancels the generation.",
    params(("id" = String, Path, description = "The agent's id.", example = "assistant")),
    request_body = ObjectRequest,
    responses(
        (status = 200, description = "The generated object.", body = Success<Value>),
    ),
)]
#[post("/agents/{id}/object")]
pub async fn generate_object(
    app: web::Data<AppState>,
    id: web::Path<String>,
    body: web::Json<Value>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner().into();
    let generation = app
        .app
        .generation(&caller.0, &id, &body, BodyKind::Object)?;
    let (cancel, _guard) = cancel_on_drop();
    Ok(envelope::ok(
        app.app.generate_object(&id, generation, cancel).await?,
    ))
}

/// One event as an SSE `data:` line.
fn data<T: serde::Serialize>(event: &T) -> Result<sse::Event, Infallible> {
    let json = serde_json::to_string(event).expect("a stream event serializes");
    Ok(sse::Event::Data(sse::Data::new(json)))
}

fn receiver_stream(rx: mpsc::Receiver<AgentEvent>) -> impl Stream<Item = AgentEvent> {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) })
}

fn sse_of<T: serde::Serialize>(events: impl Stream<Item = T> + 'static) -> impl Responder {
    sse::Sse::from_stream(events.map(|v| data(&v))).with_keep_alive(Duration::from_secs(15))
}

/// POST /agents/{id}/stream: the raw full-stream events.
#[utoipa::path(
    tag = "agents",
    operation_id = "streamText",
    summary = "Generate text, streaming the raw events",
    description = "Server-Sent Events, one `data: <JSON>` line each: `text-delta` (`delta`, \
        `text`), `tool-call` (`toolCallId`, `toolName`, `args`), `tool-result` (the same and \
        `result`), `finish` (`finishReason`, `usage`, `text`), or `error` (`error`) and the end. \
        Closing the connection cancels the generation, unless it is a durable run (header \
        `x-run-id`): then each stored event carries its number as the SSE `id:` and each \
        `text-delta` `<number>.<characters>`, which `Last-Event-ID` of the run's stream route \
        resumes after.",
    params(("id" = String, Path, description = "The agent's id.", example = "assistant")),
    request_body = AgentRequest,
    responses(
        (status = 200, description = "The generation's events.", content_type = "text/event-stream", body = crate::openapi::AgentStreamEvent),
    ),
)]
#[post("/agents/{id}/stream")]
pub async fn stream_text(
    app: web::Data<AppState>,
    id: web::Path<String>,
    body: web::Json<Value>,
    caller: Requester,
) -> Result<impl Responder, ApiError> {
    let id = id.into_inner().into();
    let generation = app.app.generation(&caller.0, &id, &body, BodyKind::Text)?;
    let events = app.app.stream(&caller.0, &id, generation).await?;
    Ok(raw_stream(events))
}

/// An agent stream as Server-Sent Events of the raw full-stream events: each that stands for a
/// stored event of a durable run with its number as the SSE `id:`, each live text piece with
/// its `<number>.<characters>` (what `Last-Event-ID` sends back to the run's stream route), and
/// the run's id in the header `X-Run-Id`.
pub(crate) fn raw_stream(events: AgentStream) -> impl Responder {
    let run_id = events.run_id().map(str::to_owned);
    let body = agent_events(events).map(|(id, ev)| {
        let json = serde_json::to_string(&WireEvent::from(&ev)).expect("a stream event serializes");
        let data = sse::Data::new(json);
        Ok::<_, Infallible>(sse::Event::Data(match id {
            Some(id) => data.id(id.to_string()),
            None => data,
        }))
    });
    let mut response = sse::Sse::from_stream(body)
        .with_keep_alive(Duration::from_secs(15))
        .customize();
    if let Some(run_id) = run_id {
        response = response.insert_header((RUN_ID_HEADER, run_id));
    }
    response
}

/// The header that names a durable run's id on its streams.
pub const RUN_ID_HEADER: &str = "x-run-id";

/// An agent stream's events, each with its id in the run's stream when it has one.
fn agent_events(events: AgentStream) -> impl Stream<Item = (Option<RunEventId>, AgentEvent)> {
    futures::stream::unfold(events, |mut events| async move {
        events.next().await.map(|ev| (ev, events))
    })
}

/// An agent stream as the AI SDK's UI message stream (`useChat`): the message `message_id`
/// (a durable run's id), its chunks, then `[DONE]`.
pub(crate) fn ui_stream(message_id: String, events: AgentStream, continues: bool) -> HttpResponse {
    let run_id = events.run_id().map(str::to_owned);
    let mut ui = UiMessageStream::new(message_id);
    let head = futures::stream::iter(if continues { ui.resume() } else { ui.start() });
    let body_events =
        agent_events(events).flat_map(move |(_, ev)| futures::stream::iter(ui.on(&ev)));
    let lines = head
        .chain(body_events)
        .map(|chunk| {
            let json = serde_json::to_string(&chunk).expect("a chunk serializes");
            Ok::<_, Infallible>(web::Bytes::from(format!("data: {json}\n\n")))
        })
        .chain(futures::stream::once(async {
            Ok(web::Bytes::from_static(b"data: [DONE]\n\n"))
        }));
    let mut response = HttpResponse::Ok();
    response
        .content_type("text/event-stream")
        .insert_header(("cache-control", "no-cache"))
        .insert_header(("x-accel-buffering", "no"))
        .insert_header(ui_stream::HEADER);
    if let Some(run_id) = run_id {
        response.insert_header((RUN_ID_HEADER, run_id));
    }
    response.streaming(lines)
}

/// POST /agents/{id}/chat: the UI message stream protocol.
#[utoipa::path(
    tag = "agents",
    operation_id = "chat",
    summary = "Chat: the AI SDK UI message stream",
    description = "Server-Sent Events in the AI SDK's UI message stream protocol v1 (header \
        `x-vercel-ai-ui-message-stream: v1`), so `useChat` consumes it unchanged: `start`, \
        `start-step`, `text-start` / `text-delta` / `text-end`, `tool-input-start`, \
        `tool-input-available`, `tool-output-available` / `tool-output-error`, `finish-step`, \
        `finish` (or `error`), then `data: [DONE]`. Send the last UIMessage as `input`; a chat \
        transport's `messages` is accepted in its place.",
    params(("id" = String, Path, description = "The agent's id.", example = "assistant")),
    request_body = AgentRequest,
    responses(
        (status = 200, description = "The UI message stream.", content_type = "text/event-stream", body = crate::openapi::ChatStreamEvent,
            headers(("x-vercel-ai-ui-message-stream" = String, description = "`v1`"))),
    ),
)]
#[post("/agents/{id}/chat")]
pub async fn chat_stream(
    app: web::Data<AppState>,
    id: web::Path<String>,
    body: web::Json<Value>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner().into();
    let generation = app.app.generation(&caller.0, &id, &body, BodyKind::Chat)?;
    let approvals = agentry_app::input::chat_approvals(&body);
    let chat = app.app.chat(&caller.0, &id, generation, approvals).await?;
    Ok(ui_stream(chat.message_id, chat.events, chat.continues))
}

/// POST /agents/{id}/stream-object: partial objects as they grow, then the validated object.
#[utoipa::path(
    tag = "agents",
    operation_id = "streamObject",
    summary = "Generate an object, streaming it as it grows",
    description = "Server-Sent Events: `partial-object` (`object`, the part generated so far) as \
        it grows, then `object` (the validated object) and `finish` (`finishReason`, `usage`), \
        or `error`. Closing the connection cancels the generation.",
    params(("id" = String, Path, description = "The agent's id.", example = "assistant")),
    request_body = ObjectRequest,
    responses(
        (status = 200, description = "The object's events.", content_type = "text/event-stream", body = crate::openapi::ObjectStreamEvent),
    ),
)]
#[post("/agents/{id}/stream-object")]
pub async fn stream_object_route(
    app: web::Data<AppState>,
    id: web::Path<String>,
    body: web::Json<Value>,
    caller: Requester,
) -> Result<impl Responder, ApiError> {
    let id = id.into_inner().into();
    let generation = app
        .app
        .generation(&caller.0, &id, &body, BodyKind::Object)?;
    let rx = app.app.stream_object(&id, generation)?;
    let events = receiver_stream(rx).flat_map(|ev| futures::stream::iter(ObjectEvent::of(&ev)));
    Ok(sse_of(events))
}

/// Registers the agent routes (each `.service` also adds its path to the OpenAPI document).
pub fn routes(cfg: &mut crate::registration::Routes<'_, '_>) {
    cfg.service(list_agents)
        .service(get_agent)
        .service(generate_text)
        .service(stream_text)
        .service(chat_stream)
        .service(generate_object)
        .service(stream_object_route);
}
