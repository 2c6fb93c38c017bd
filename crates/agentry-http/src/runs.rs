//! Durable agent runs (issue "durable agent runs"): the lists, a run's state, re-attaching to its
//! stream (raw events, or the AI SDK's UI message stream), the chat resume URL, cancel, the
//! answer to a tool approval, and an agent's live scores. Each parses, calls one use case of
//! `agentry-app` and renders.

use actix_web::Either;
use actix_web::{HttpRequest, HttpResponse, Responder, get, post, web};
use agentry_agents::ApprovalAnswer;
use agentry_app::workflows::ListRequest;
use agentry_engine::{AgentId, ExecutionId};

use crate::AppState;
use crate::agents::{raw_stream, ui_stream};
use crate::auth::Requester;
use crate::envelope::{self, Success};
use crate::error::ApiError;
use crate::wire::runs::{ApprovalResult, RunList, RunState};
use crate::wire::scores::ScoreList;
use crate::workflows::last_event_text;
use agentry_app::runs::{AgentStream, RunEventId};
use agentry_app::scores::ScoreListRequest;

/// The query of a run list: a status, the page size and the cursor.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RunListParams {
    /// Only runs with this status (`running`, `suspended`, `completed`, `error`,
    /// `cancelled`).
    status: Option<String>,
    /// How many per page: 1 to 100 (default 20).
    limit: Option<String>,
    /// The `nextCursor` of the previous page.
    cursor: Option<String>,
}

/// The query of the list across agents: [`RunListParams`] and an optional agent.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct AllRunListParams {
    /// Only this agent's runs.
    agent_id: Option<String>,
    /// Only runs with this status (`running`, `suspended`, `completed`, `error`,
    /// `cancelled`).
    status: Option<String>,
    /// How many per page: 1 to 100 (default 20).
    limit: Option<String>,
    /// The `nextCursor` of the previous page.
    cursor: Option<String>,
}

/// The query of an agent's score list: a scorer, the page size and the cursor.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ScoreListParams {
    /// Only this scorer's scores (`relevance`, `latency`, ...).
    scorer: Option<String>,
    /// How many per page: 1 to 100 (default 20).
    limit: Option<String>,
    /// The `nextCursor` of the previous page.
    cursor: Option<String>,
}

/// A run stream's format: the raw agent events (default) or the AI SDK's UI message stream.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StreamParams {
    /// `ui` for the AI SDK's UI message stream (as `/chat` sends it); else the raw events of
    /// `/stream`.
    format: Option<String>,
    /// The last event already seen (instead of the `Last-Event-ID` header).
    #[serde(rename = "lastEventId")]
    #[allow(dead_code)]
    last_event_id: Option<String>,
}

/// The answer to a tool approval.
#[derive(Debug, Default, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalDecision {
    /// `true` lets the tool run; `false` denies it (the model is told, with the reason).
    pub approved: bool,
    /// Why (shown to the model on a denial).
    #[schema(max_length = 2000)]
    pub reason: Option<String>,
}

// utoipa takes only a literal as `max_length`: the one above is the application's bound.
const _: () = assert!(agentry_app::limits::MAX_REASON_CHARS == 2000);

fn run_ids(path: web::Path<(String, String)>) -> (AgentId, ExecutionId) {
    let (id, run) = path.into_inner();
    (id.into(), run.into())
}

/// GET /agents/{id}/runs
#[utoipa::path(
    tag = "runs",
    operation_id = "listAgentRuns",
    summary = "An agent's durable runs, newest first",
    description = "Pages through the agent's durable runs, newest first, optionally of one \
        status (`suspended`: waiting for a tool's approval); `nextCursor` (null on the last \
        page) fetches the next page. In strict mode a user sees only their own runs (an admin \
        sees all).",
    params(("id" = String, Path, description = "The agent's id.", example = "operator"), RunListParams),
    responses((status = 200, description = "One page.", body = Success<RunList>)),
)]
#[get("/agents/{id}/runs")]
pub async fn list_agent_runs(
    app: web::Data<AppState>,
    id: web::Path<String>,
    params: web::Query<RunListParams>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let p = params.into_inner();
    let request = ListRequest {
        status: p.status,
        limit: p.limit,
        cursor: p.cursor,
        ..Default::default()
    };
    let id = AgentId::from(id.into_inner());
    Ok(envelope::ok(
        app.app.runs(&caller.0, Some(&id), request).await?,
    ))
}

/// GET /agent-runs
#[utoipa::path(
    tag = "runs",
    operation_id = "listAllAgentRuns",
    summary = "Every agent's durable runs, newest first",
    description = "Like the agent's list, across agents (or of `agentId`).",
    params(AllRunListParams),
    responses((status = 200, description = "One page.", body = Success<RunList>)),
)]
#[get("/agent-runs")]
pub async fn list_all_runs(
    app: web::Data<AppState>,
    params: web::Query<AllRunListParams>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let p = params.into_inner();
    let request = ListRequest {
        workflow_id: p.agent_id.filter(|a| !a.is_empty()).map(Into::into),
        status: p.status,
        limit: p.limit,
        cursor: p.cursor,
        ..Default::default()
    };
    Ok(envelope::ok(app.app.runs(&caller.0, None, request).await?))
}

/// GET /agents/{id}/runs/{runId}
#[utoipa::path(
    tag = "runs",
    operation_id = "getAgentRun",
    summary = "A durable run's state",
    description = "Its status (`running`, `suspended`, `completed`, `error`, `cancelled`), its \
        messages so far, each step (model call, tool call or approval, with its attempt, times \
        and usage; a tool call's `result` is the tool's output), the tool calls waiting for \
        approval, the text and usage, and once cancelled its `cancellation` (`reason`, \
        `cancelledAt`).",
    params(
        ("id" = String, Path, description = "The agent's id.", example = "operator"),
        ("run_id" = String, Path, description = "The run's id."),
    ),
    responses((status = 200, description = "The run.", body = Success<RunState>)),
)]
#[get("/agents/{id}/runs/{run_id}")]
pub async fn get_run(
    app: web::Data<AppState>,
    path: web::Path<(String, String)>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let (id, run_id) = run_ids(path);
    Ok(envelope::ok(app.app.run(&caller.0, &id, &run_id).await?))
}

/// GET /agents/{id}/runs/{runId}/stream
#[utoipa::path(
    tag = "runs",
    operation_id = "attachAgentRun",
    summary = "Re-attach to a durable run's stream",
    description = "Replays the run's stored events after `Last-Event-ID` (the header, or the \
        `lastEventId` query parameter; none means from the first), each with its number as the \
        SSE `id:`, then follows the run live, on whichever server runs it, until it ends or \
        waits for a tool's approval (`tool-approval-request`, then `finish`). The raw events of \
        `/stream`, or with `?format=ui` the AI SDK's UI message stream of `/chat`. Text is \
        stored per model call: a model call is replayed as one `text-delta`.",
    params(
        ("id" = String, Path, description = "The agent's id.", example = "operator"),
        ("run_id" = String, Path, description = "The run's id."),
        StreamParams,
        ("Last-Event-ID" = Option<String>, Header, description = "The last event already seen."),
    ),
    responses(
        (status = 200, description = "The run's events.", content_type = "text/event-stream", body = crate::openapi::AgentStreamEvent),
    ),
)]
#[get("/agents/{id}/runs/{run_id}/stream")]
pub async fn attach_run(
    app: web::Data<AppState>,
    path: web::Path<(String, String)>,
    params: web::Query<StreamParams>,
    req: HttpRequest,
    caller: Requester,
) -> Result<impl Responder, ApiError> {
    let (id, run_id) = run_ids(path);
    let ui = match params.format.as_deref() {
        None | Some("") | Some("raw") => false,
        Some("ui") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Invalid format {other:?}: expected ui or raw"
            )));
        }
    };
    let after = match last_event_text(&req) {
        Some(id) => RunEventId::parse(&id)?,
        None => RunEventId::default(),
    };
    let events = app.app.attach_run(&caller.0, &id, &run_id, after).await?;
    let events = AgentStream::Run(events);
    Ok(if ui {
        Either::Left(ui_stream(run_id.into_string(), events, false))
    } else {
        Either::Right(raw_stream(events))
    })
}

/// GET /agents/{id}/chat/{conversationId}/stream
#[utoipa::path(
    tag = "runs",
    operation_id = "resumeChatStream",
    summary = "The AI SDK's chat resume URL",
    description = "The conversation's active durable run (running, or waiting for a tool's \
        approval) as the UI message stream, from its start, so that `useChat({resume: true})` \
        with `/chat`'s `conversationId` as the chat id picks it up after a reload; a run that \
        waits for an approval replays up to its `tool-approval-request` and ends there. 204 \
        when the conversation has no active run.",
    params(
        ("id" = String, Path, description = "The agent's id.", example = "operator"),
        ("conversation_id" = String, Path, description = "The chat's id (`/chat`'s `conversationId`)."),
    ),
    responses(
        (status = 200, description = "The active run's UI message stream.", content_type = "text/event-stream", body = crate::openapi::ChatStreamEvent),
        (status = 204, description = "No active run in this conversation."),
    ),
)]
#[get("/agents/{id}/chat/{conversation_id}/stream")]
pub async fn resume_chat(
    app: web::Data<AppState>,
    path: web::Path<(String, String)>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let (id, conversation) = path.into_inner();
    let id = AgentId::from(id);
    Ok(
        match app
            .app
            .active_chat_run(&caller.0, &id, &conversation)
            .await?
        {
            Some(events) => {
                let run_id = events.run_id().to_owned();
                ui_stream(run_id, AgentStream::Run(events), false)
            }
            None => HttpResponse::NoContent().finish(),
        },
    )
}

/// POST /agents/{id}/runs/{runId}/cancel
#[utoipa::path(
    tag = "runs",
    operation_id = "cancelAgentRun",
    summary = "Cancel a durable run",
    description = "Ends a running or suspended run as `cancelled` (a tool call in flight is \
        told to stop; one waiting for approval never runs).",
    params(
        ("id" = String, Path, description = "The agent's id.", example = "operator"),
        ("run_id" = String, Path, description = "The run's id."),
    ),
    request_body = Option<crate::wire::CancelRequest>,
    responses((status = 200, description = "The run is cancelled.", body = Success<crate::wire::CancelResult>)),
)]
#[post("/agents/{id}/runs/{run_id}/cancel")]
pub async fn cancel_run(
    app: web::Data<AppState>,
    path: web::Path<(String, String)>,
    req: HttpRequest,
    payload: web::Payload,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let (id, run_id) = run_ids(path);
    let body: crate::wire::CancelRequest =
        crate::intake::optional_json(&req, payload, app.config.body_limit)
            .await?
            .unwrap_or_default();
    Ok(envelope::ok(
        app.app
            .cancel_run(&caller.0, &id, &run_id, body.reason)
            .await?,
    ))
}

/// POST /agents/{id}/runs/{runId}/approvals/{approvalId}
#[utoipa::path(
    tag = "runs",
    operation_id = "answerToolApproval",
    summary = "Approve or deny a tool call",
    description = "Answers a tool call that waits for a person's approval. The answer is \
        stored before anything runs, and the run continues (on this server): an approved tool \
        runs once, a denied one never (the model is told, with the reason). Of two answers to \
        one request one wins; the other is `approval_not_pending` (409).",
    params(
        ("id" = String, Path, description = "The agent's id.", example = "operator"),
        ("run_id" = String, Path, description = "The run's id."),
        ("approval_id" = String, Path, description = "The request's `approvalId`.", example = "ap-2-0"),
    ),
    request_body = ApprovalDecision,
    responses((status = 200, description = "The answer was taken; the run continues.", body = Success<ApprovalResult>)),
)]
#[post("/agents/{id}/runs/{run_id}/approvals/{approval_id}")]
pub async fn answer_approval(
    app: web::Data<AppState>,
    path: web::Path<(String, String, String)>,
    body: web::Json<ApprovalDecision>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let (id, run_id, approval_id) = path.into_inner();
    let decision = body.into_inner();
    let answer = ApprovalAnswer {
        approval_id,
        approved: decision.approved,
        reason: decision.reason,
        expired: false,
        by: None,
    };
    let (result, _events) = app
        .app
        .answer_approvals(&caller.0, &id.into(), &run_id.into(), vec![answer])
        .await?;
    Ok(envelope::ok(result))
}

/// GET /agents/{id}/scores
#[utoipa::path(
    tag = "runs",
    operation_id = "listAgentScores",
    summary = "An agent's live scores, newest first",
    description = "Pages through the scores the agent's live scorers gave its sampled \
        generations (after each answer, off the request path), newest first, optionally of one \
        scorer; `nextCursor` (null on the last page) fetches the next page. `runId` is a \
        durable run's id (whose detail carries its scores too) or an in-memory generation's \
        own (`gen_<uuid>`). In strict mode a user sees only the scores of their own \
        generations (an admin sees all).",
    params(("id" = String, Path, description = "The agent's id.", example = "assistant"), ScoreListParams),
    responses((status = 200, description = "One page.", body = Success<ScoreList>)),
)]
#[get("/agents/{id}/scores")]
pub async fn list_agent_scores(
    app: web::Data<AppState>,
    id: web::Path<String>,
    params: web::Query<ScoreListParams>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let p = params.into_inner();
    let request = ScoreListRequest {
        scorer: p.scorer,
        limit: p.limit,
        cursor: p.cursor,
    };
    let id = AgentId::from(id.into_inner());
    Ok(envelope::ok(app.app.scores(&caller.0, &id, request).await?))
}

/// Registers the run routes (each `.service` also adds its path to the OpenAPI document).
pub fn routes(cfg: &mut crate::registration::Routes<'_, '_>) {
    cfg.service(list_agent_runs)
        .service(list_all_runs)
        .service(get_run)
        .service(attach_run)
        .service(resume_chat)
        .service(cancel_run)
        .service(answer_approval)
        .service(list_agent_scores);
}
