//! The workflow operations (issue "workflow operations"): events into executions (to one, or by
//! key), retry and fork. Each parses, calls one use case of `agentry-app` and renders.

use actix_web::{HttpResponse, post, web};

use crate::AppState;
use crate::auth::Requester;
use crate::envelope::{self, Success};
use crate::error::ApiError;
use crate::wire::ExecutionResult;
use crate::wire::operations::{
    CloudEventPublished, EventDelivery, EventPublished, EventRequest, ForkRequest, PublishRequest,
};
use crate::workflows::{answer_when_finished, ids};

/// POST /workflows/{id}/executions/{executionId}/events/{name}
#[utoipa::path(
    tag = "workflows",
    operation_id = "deliverEvent",
    summary = "Deliver an event to an execution",
    description = "Delivers the event `name` (declared by the workflow, its data valid against \
        the event's schema) to one execution, in one write with its `workflow-event-received` \
        event: the step waiting for it resumes at once (`delivery: resumed`, on this server), or \
        the event waits in the execution's mailbox until a step waits for it (`queued`): an \
        event sent before the wait is not lost. The same `eventId` again is delivered once; \
        the answer is the first delivery's, with `duplicate: true`.",
    params(
        ("id" = String, Path, description = "The workflow's id.", example = "payment-webhook"),
        ("execution_id" = String, Path, description = "The execution's id.", example = "o-1"),
        ("name" = String, Path, description = "The event's name.", example = "payment"),
    ),
    request_body = EventRequest,
    responses((status = 200, description = "Delivered (or delivered before).", body = Success<EventDelivery>)),
)]
#[post("/workflows/{id}/executions/{execution_id}/events/{name}")]
pub async fn deliver_event(
    app: web::Data<AppState>,
    path: web::Path<(String, String, String)>,
    body: web::Json<EventRequest>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let (id, execution_id, name) = path.into_inner();
    Ok(envelope::ok(
        app.app
            .deliver_event(
                &caller.0,
                &id.into(),
                &execution_id.into(),
                &name,
                body.into_inner(),
            )
            .await?,
    ))
}

/// POST /events/{name}
#[utoipa::path(
    tag = "workflows",
    operation_id = "sendEvent",
    summary = "Send an event by key",
    description = "Delivers the event `name` to every execution waiting for it with this `key` \
        (its data valid against the schema of every workflow that declares the event), and \
        keeps it for an hour (`keptUntil`) for the executions that wait for it later with that \
        key: a webhook that arrives before its execution reaches the wait is not lost. Answers \
        the executions it woke. The same `eventId` again is sent once. In strict mode only the \
        caller's own executions take it (an admin's reaches all).",
    params(("name" = String, Path, description = "The event's name.", example = "payment")),
    request_body = PublishRequest,
    responses((status = 200, description = "Sent (or sent before).", body = Success<EventPublished>)),
)]
#[post("/events/{name}")]
pub async fn send_event(
    app: web::Data<AppState>,
    name: web::Path<String>,
    body: web::Json<PublishRequest>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    Ok(envelope::ok(
        app.app
            .publish_event(&caller.0, &name.into_inner(), body.into_inner())
            .await?,
    ))
}

/// POST /events (a CloudEvent)
#[utoipa::path(
    tag = "workflows",
    operation_id = "sendCloudEvent",
    summary = "Send a CloudEvent",
    description = "A CloudEvent in structured mode (`content-type: application/cloudevents+json`; \
        `specversion` 1.0, `id`, `source`, `type`, `data`): its `type` is the event's name. Each \
        workflow that listens for that type reads from the event the keys its executions wait \
        with (a definition's `listen` with `correlate`: the correlation's `from`; without one, \
        `*`), and the event is sent by each key as `POST /events/{name}` sends it: to the \
        executions waiting now, and kept for an hour for those that wait later. The same `id` \
        again is sent once. In strict mode only the caller's own executions take it.",
    request_body(content = Object, content_type = "application/cloudevents+json", description = "The CloudEvent."),
    responses((status = 200, description = "Sent (or sent before).", body = Success<CloudEventPublished>)),
)]
#[post("/events")]
pub async fn send_cloud_event(
    app: web::Data<AppState>,
    body: web::Json<serde_json::Value>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    Ok(envelope::ok(
        app.app
            .publish_cloud_event(&caller.0, body.into_inner())
            .await?,
    ))
}

/// POST /workflows/{id}/executions/{executionId}/retry
#[utoipa::path(
    tag = "workflows",
    operation_id = "retryExecution",
    summary = "Retry a failed execution from its failed step",
    description = "An execution in `error` runs again from the step it failed in, under the same \
        id: its log goes on (`workflow-retried`), the steps before are not run again, the failed \
        step's attempt numbers go on with a fresh budget of retries. Answers like execute once \
        the run stops. Any other status is `not_retryable` (400).",
    params(
        ("id" = String, Path, description = "The workflow's id.", example = "flaky-step"),
        ("execution_id" = String, Path, description = "The execution's id.", example = "fl-1"),
    ),
    responses(
        (status = 200, description = "The execution completed or suspended.", body = Success<ExecutionResult>),
        (status = 202, description = "A queued workflow's execution, back in its queue, that did not end within the queue's wait: where it stands.", body = Success<ExecutionResult>),
    ),
)]
#[post("/workflows/{id}/executions/{execution_id}/retry")]
pub async fn retry(
    app: web::Data<AppState>,
    path: web::Path<(String, String)>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let (id, execution_id) = ids(path);
    let handle = app.app.retry(&caller.0, &id, &execution_id).await?;
    answer_when_finished(&app.app, handle).await
}

/// POST /workflows/{id}/executions/{executionId}/fork
#[utoipa::path(
    tag = "workflows",
    operation_id = "forkExecution",
    summary = "Fork a new execution from a step of another",
    description = "Starts a new execution of the workflow whose steps before `fromStep` are \
        copied from this one (their outputs, not run again: each must have finished here) and \
        which runs from `fromStep`, with this execution's input or a new one. Its state names \
        its origin (`forkedFrom`); it belongs to the source's owner. Answers like execute once \
        the run stops.",
    params(
        ("id" = String, Path, description = "The workflow's id.", example = "order-fulfillment"),
        ("execution_id" = String, Path, description = "The source execution's id.", example = "ord-1"),
    ),
    request_body = ForkRequest,
    responses(
        (status = 200, description = "The new execution completed or suspended.", body = Success<ExecutionResult>),
        (status = 202, description = "A queued workflow's new execution that did not end within the queue's wait: where it stands.", body = Success<ExecutionResult>),
    ),
)]
#[post("/workflows/{id}/executions/{execution_id}/fork")]
pub async fn fork(
    app: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: web::Json<ForkRequest>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let (id, execution_id) = ids(path);
    let handle = app
        .app
        .fork(&caller.0, &id, &execution_id, body.into_inner())
        .await?;
    answer_when_finished(&app.app, handle).await
}

/// Registers the operations' routes (each `.service` also adds its path to the OpenAPI
/// document).
pub fn routes(cfg: &mut crate::registration::Routes<'_, '_>) {
    cfg.service(deliver_event)
        .service(send_event)
        .service(send_cloud_event)
        .service(retry)
        .service(fork);
}
