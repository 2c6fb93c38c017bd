//! The workflow routes of spec section 4: each parses, calls one use case of `agentry-app`,
//! and renders its answer (the envelope, or Server-Sent Events).

use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, get, post, web};
use actix_web_lab::sse;
use agentry_app::App;
use agentry_app::workflows::{ListRequest, StartOptions};
use agentry_engine::{ExecutionId, RunHandle, WorkflowId};
use futures::StreamExt;

use crate::AppState;
use crate::auth::Requester;
use crate::envelope::{self, Success};
use crate::error::ApiError;
use crate::executions::ListParams;
use crate::wire::events::WorkflowEvent;
use crate::wire::{
    self, CancelResult, ExecuteRequest, ExecutionList, ExecutionResult, ExecutionStateView,
    ResumeRequest, SuspendRequest, SuspendResult, WorkflowDetail, WorkflowSummary,
};

/// The workflow and execution a path names.
pub(crate) fn ids(path: web::Path<(String, String)>) -> (WorkflowId, ExecutionId) {
    let (id, execution_id) = path.into_inner();
    (id.into(), execution_id.into())
}

/// The execute/resume answer once the run stops: 200 with the execution result, or the
/// failure (naming the execution in `X-Execution-Id` when it goes on or ended in error); 202
/// with where it stands when an execution of a queued workflow did not end within its queue's
/// wait (it goes on).
pub(crate) async fn answer_when_finished(
    app: &App,
    handle: RunHandle,
) -> Result<HttpResponse, ApiError> {
    let result = app.outcome(handle).await?;
    let pending = matches!(
        result.outcome.status,
        wire::WorkflowStatus::Queued | wire::WorkflowStatus::Running
    );
    Ok(if pending {
        envelope::with_status(StatusCode::ACCEPTED, result)
    } else {
        envelope::ok(result)
    })
}

/// GET /workflows
#[utoipa::path(
    tag = "workflows",
    operation_id = "listWorkflows",
    summary = "List the workflows",
    responses((status = 200, description = "The registered workflows.", body = Success<Vec<WorkflowSummary>>)),
)]
#[get("/workflows")]
pub async fn list(app: web::Data<AppState>) -> HttpResponse {
    envelope::ok(app.app.workflows())
}

/// GET /workflows/{id}
#[utoipa::path(
    tag = "workflows",
    operation_id = "getWorkflow",
    summary = "A workflow: its steps and schemas",
    params(("id" = String, Path, description = "The workflow's id.", example = "expense-approval")),
    responses(
        (status = 200, description = "The workflow.", body = Success<WorkflowDetail>),
    ),
)]
#[get("/workflows/{id}")]
pub async fn detail(
    app: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    Ok(envelope::ok(
        app.app.workflow(&id.into_inner().into()).await?,
    ))
}

/// POST /workflows/{id}/execute
#[utoipa::path(
    tag = "workflows",
    operation_id = "executeWorkflow",
    summary = "Run a workflow to its end or its suspension",
    description = "Starts an execution and answers when it completes or suspends. The run is \
        durable: checkpointed after every step, and a client that hangs up does not stop it. \
        A workflow with a queue starts its execution as `queued` (started by whichever replica \
        has room, within the queue's limits; `options.priority` orders it); when it has not \
        ended within the queue's wait, the answer is 202 with its status.",
    params(("id" = String, Path, description = "The workflow's id.", example = "expense-approval")),
    request_body = ExecuteRequest,
    responses(
        (status = 202, description = "A queued workflow's execution that did not end within its queue's wait (30 s by default): where it stands (`queued` or `running`). It goes on; follow it by its state or its stream.", body = Success<ExecutionResult>),
        (status = 200, description = "The execution completed or suspended.", body = Success<ExecutionResult>,
            links(
                ("state" = (operation_id = "getExecutionState", description = "The execution's state.",
                    parameters(("id" = "$request.path.id"), ("execution_id" = "$response.body#/data/executionId")))),
                ("resume" = (operation_id = "resumeExecution", description = "Resume it, when suspended.",
                    parameters(("id" = "$request.path.id"), ("execution_id" = "$response.body#/data/executionId")))),
                ("suspend" = (operation_id = "suspendExecution", description = "Suspend it (a 400 once it has completed).",
                    parameters(("id" = "$request.path.id"), ("execution_id" = "$response.body#/data/executionId")))),
            )),
    ),
)]
#[post("/workflows/{id}/execute")]
pub async fn execute(
    app: web::Data<AppState>,
    id: web::Path<String>,
    body: web::Json<ExecuteRequest>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let handle = app
        .app
        .start(
            &caller.0,
            &id.into_inner().into(),
            body.input,
            body.options.into(),
        )
        .await?;
    // The run goes on in its own task: a client that hangs up does not stop a durable execution.
    answer_when_finished(&app.app, handle).await
}

/// POST /workflows/{id}/stream
#[utoipa::path(
    tag = "workflows",
    operation_id = "streamWorkflow",
    summary = "Run a workflow, streaming its events",
    description = "Same body as execute; answers with Server-Sent Events, one `data: <JSON>` line \
        per event: (`workflow-queued` first, for a queued workflow) `workflow-start`, \
        `step-start` / `step-complete` (with `from`, the step id), \
        then `workflow-complete`, `workflow-suspended` or `workflow-error`, and last \
        `workflow-result` with the execution result; or, when this server shuts down (or loses \
        the execution) mid-run, last `workflow-handover` with a `message`: the execution \
        continues elsewhere (re-post the same `executionId` and input to follow it). Every event \
        has `type`, `executionId`, `workflowId` and an ISO 8601 `timestamp`.",
    params(("id" = String, Path, description = "The workflow's id.", example = "order-fulfillment")),
    request_body = ExecuteRequest,
    responses(
        (status = 200, description = "The workflow's events.", content_type = "text/event-stream", body = crate::openapi::WorkflowStreamEvent),
    ),
)]
#[post("/workflows/{id}/stream")]
pub async fn stream(
    app: web::Data<AppState>,
    id: web::Path<String>,
    body: web::Json<ExecuteRequest>,
    req: HttpRequest,
    caller: Requester,
) -> Result<
    sse::Sse<impl futures::Stream<Item = Result<sse::Event, std::convert::Infallible>>>,
    ApiError,
> {
    let body = body.into_inner();
    let options = StartOptions {
        // A retried stream (the same executionId and input) replays what the client missed.
        last_event_id: last_event_id(&req)?,
        ..body.options.into()
    };
    let handle = app
        .app
        .start(&caller.0, &id.into_inner().into(), body.input, options)
        .await?;
    Ok(event_stream(handle))
}

/// The events of a run or of a re-attach as Server-Sent Events: each stored one with its number
/// in the execution's log as its `id:` (what a client sends back as `Last-Event-ID`).
fn event_stream(
    handle: RunHandle,
) -> sse::Sse<impl futures::Stream<Item = Result<sse::Event, std::convert::Infallible>>> {
    let events = futures::stream::unfold(handle.events, |mut rx| async move {
        rx.recv().await.map(|ev| (ev, rx))
    })
    .map(|ev| {
        let data = sse::Data::new(WorkflowEvent::to_json(&ev));
        Ok(sse::Event::Data(match ev.seq {
            Some(seq) => data.id(seq.to_string()),
            None => data,
        }))
    });
    sse::Sse::from_stream(events).with_keep_alive(Duration::from_secs(15))
}

/// The last event a re-attaching client saw: the `Last-Event-ID` header, or the `lastEventId`
/// query parameter (for clients that cannot set headers); none means from the start.
pub(crate) fn last_event_id(req: &HttpRequest) -> Result<Option<i64>, ApiError> {
    last_event_text(req)
        .map(|v| {
            v.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "Invalid Last-Event-ID {v:?}: expected the number of an event"
                ))
            })
        })
        .transpose()
}

/// The text of the `Last-Event-ID` header, or of the `lastEventId` query parameter, trimmed;
/// none when absent or blank.
pub(crate) fn last_event_text(req: &HttpRequest) -> Option<String> {
    let header = req
        .headers()
        .get("last-event-id")
        .map(|v| v.to_str().unwrap_or("\u{fffd}").to_owned());
    let query = web::Query::<LastEventQuery>::from_query(req.query_string())
        .ok()
        .and_then(|q| q.into_inner().last_event_id);
    header
        .or(query)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct LastEventQuery {
    last_event_id: Option<String>,
}

/// GET /workflows/{id}/executions/{executionId}/stream
#[utoipa::path(
    tag = "workflows",
    operation_id = "attachExecution",
    summary = "Re-attach to an execution's events",
    description = "Replays the execution's stored events after `Last-Event-ID` (the header, or \
        the `lastEventId` query parameter; none means from the first), then follows new ones as \
        they are written, on whichever server runs it, until it stops running (completed, \
        error, cancelled or suspended); then `workflow-result`, and the stream ends. Each \
        stored event carries its number as the SSE `id:`.",
    params(
        ("id" = String, Path, description = "The workflow's id.", example = "countdown"),
        ("execution_id" = String, Path, description = "The execution's id.", example = "cd-1"),
        ("lastEventId" = Option<String>, Query, description = "The last event already seen (instead of the `Last-Event-ID` header)."),
        ("Last-Event-ID" = Option<String>, Header, description = "The last event already seen."),
    ),
    responses(
        (status = 200, description = "The execution's events.", content_type = "text/event-stream", body = crate::openapi::WorkflowStreamEvent),
    ),
)]
#[get("/workflows/{id}/executions/{execution_id}/stream")]
pub async fn attach(
    app: web::Data<AppState>,
    path: web::Path<(String, String)>,
    req: HttpRequest,
    caller: Requester,
) -> Result<
    sse::Sse<impl futures::Stream<Item = Result<sse::Event, std::convert::Infallible>>>,
    ApiError,
> {
    let (id, execution_id) = ids(path);
    let after = last_event_id(&req)?;
    let handle = app
        .app
        .attach(&caller.0, &id, &execution_id, after.unwrap_or(0))
        .await?;
    Ok(event_stream(handle))
}

/// POST /workflows/{id}/executions/{executionId}/suspend
#[utoipa::path(
    tag = "workflows",
    operation_id = "suspendExecution",
    summary = "Suspend a running execution",
    description = "The suspend takes effect at the next step boundary; the call waits for it (up \
        to 120 s) and answers with the real state, or 202 with the request still pending.",
    params(
        ("id" = String, Path, description = "The workflow's id.", example = "countdown"),
        ("execution_id" = String, Path, description = "The execution's id.", example = "cd-1"),
    ),
    request_body = Option<SuspendRequest>,
    responses(
        (status = 200, description = "The execution is suspended.", body = Success<SuspendResult>),
        (status = 202, description = "Not at a step boundary yet: the request is recorded and takes effect at the next one.", body = Success<SuspendResult>),
    ),
)]
#[post("/workflows/{id}/executions/{execution_id}/suspend")]
pub async fn suspend(
    app: web::Data<AppState>,
    path: web::Path<(String, String)>,
    req: HttpRequest,
    payload: web::Payload,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let (id, execution_id) = ids(path);
    // The body is optional here: none suspends with the default reason.
    let body: SuspendRequest = crate::intake::optional_json(&req, payload, app.config.body_limit)
        .await?
        .unwrap_or_default();
    let suspended = app
        .app
        .suspend(&caller.0, &id, &execution_id, body.reason)
        .await?;
    let status = if suspended.now {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok(envelope::with_status(status, suspended.result))
}

/// POST /workflows/{id}/executions/{executionId}/resume
#[utoipa::path(
    tag = "workflows",
    operation_id = "resumeExecution",
    summary = "Resume a suspended execution",
    description = "Runs the suspended execution on from its suspended step (or `options.stepId`) \
        with `resumeData`, and answers like execute. Two concurrent resumes never both run it.",
    params(
        ("id" = String, Path, description = "The workflow's id.", example = "expense-approval"),
        ("execution_id" = String, Path, description = "The execution's id.", example = "exp-1"),
    ),
    request_body = ResumeRequest,
    responses(
        (status = 200, description = "The execution completed or suspended again.", body = Success<ExecutionResult>),
    ),
)]
#[post("/workflows/{id}/executions/{execution_id}/resume")]
pub async fn resume(
    app: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: web::Json<ResumeRequest>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let (id, execution_id) = ids(path);
    let body = body.into_inner();
    let step_id = body.options.and_then(|o| o.step_id);
    let handle = app
        .app
        .resume(&caller.0, &id, &execution_id, body.resume_data, step_id)
        .await?;
    answer_when_finished(&app.app, handle).await
}

/// GET /workflows/{id}/executions/{executionId}/state
#[utoipa::path(
    tag = "workflows",
    operation_id = "getExecutionState",
    summary = "An execution's complete state",
    params(
        ("id" = String, Path, description = "The workflow's id.", example = "expense-approval"),
        ("execution_id" = String, Path, description = "The execution's id.", example = "exp-1"),
    ),
    responses(
        (status = 200, description = "The execution's record.", body = Success<ExecutionStateView>),
    ),
)]
#[get("/workflows/{id}/executions/{execution_id}/state")]
pub async fn execution_state(
    app: web::Data<AppState>,
    path: web::Path<(String, String)>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let (id, execution_id) = ids(path);
    Ok(envelope::ok(
        app.app.state(&caller.0, &id, &execution_id).await?,
    ))
}

/// GET /workflows/{id}/executions
#[utoipa::path(
    tag = "workflows",
    operation_id = "listExecutions",
    summary = "A workflow's executions, newest first",
    description = "Pages through a workflow's executions, newest first (by start, then id), \
        optionally only those of one status; `nextCursor` (null on the last page) fetches the \
        next page. Read through an index: a page costs the same with a million executions. In \
        strict mode a user sees only the executions they started (an admin sees all).",
    params(
        ("id" = String, Path, description = "The workflow's id.", example = "expense-approval"),
        ListParams,
    ),
    responses(
        (status = 200, description = "One page.", body = Success<ExecutionList>),
    ),
)]
#[get("/workflows/{id}/executions")]
pub async fn list_executions(
    app: web::Data<AppState>,
    id: web::Path<String>,
    params: web::Query<ListParams>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let request = ListRequest {
        workflow_id: Some(id.into_inner().into()),
        ..params.into_inner().into()
    };
    Ok(envelope::ok(app.app.list(&caller.0, request).await?))
}

/// POST /workflows/{id}/executions/{executionId}/cancel
#[utoipa::path(
    tag = "workflows",
    operation_id = "cancelExecution",
    summary = "Cancel a queued, running or suspended execution",
    description = "The execution ends `cancelled` at once, with when and why in its state \
        (`cancellation`); its event log ends with `workflow-cancelled`. A step running it sees \
        its cancellation signal (on this server at once, on another at its next heartbeat) and \
        nothing more of the run is committed; a queued one never starts.",
    params(
        ("id" = String, Path, description = "The workflow's id.", example = "countdown"),
        ("execution_id" = String, Path, description = "The execution's id.", example = "cd-1"),
    ),
    request_body = Option<wire::CancelRequest>,
    responses(
        (status = 200, description = "The execution is cancelled.", body = Success<CancelResult>),
    ),
)]
#[post("/workflows/{id}/executions/{execution_id}/cancel")]
pub async fn cancel(
    app: web::Data<AppState>,
    path: web::Path<(String, String)>,
    req: HttpRequest,
    payload: web::Payload,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let (id, execution_id) = ids(path);
    let body: wire::CancelRequest =
        crate::intake::optional_json(&req, payload, app.config.body_limit)
            .await?
            .unwrap_or_default();
    Ok(envelope::ok(
        app.app
            .cancel(&caller.0, &id, &execution_id, body.reason)
            .await?,
    ))
}

/// Registers the workflow routes (each `.service` also adds its path to the OpenAPI document).
pub fn routes(cfg: &mut crate::registration::Routes<'_, '_>) {
    cfg.service(list)
        .service(detail)
        .service(execute)
        .service(stream)
        .service(suspend)
        .service(resume)
        .service(execution_state)
        .service(attach)
        .service(cancel)
        .service(list_executions);
}
