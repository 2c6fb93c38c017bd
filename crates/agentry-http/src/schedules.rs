//! Schedules (issue "workflow operations"): create, list, read, delete, pause, unpause, trigger
//! and backfill. Each parses, calls one use case of `agentry-app` and renders.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, delete, get, post, web};

use crate::AppState;
use crate::auth::Requester;
use crate::envelope::{self, Success};
use crate::error::ApiError;
use crate::wire::schedules::{
    BackfillRequest, BackfillResult, FireView, ScheduleDeleted, ScheduleList, ScheduleRequest,
    ScheduleView,
};

/// GET /schedules
#[utoipa::path(
    tag = "schedules",
    operation_id = "listSchedules",
    summary = "The schedules",
    description = "Every schedule, by id, with its next fire times, its skip count and its \
        recent fires (their status as the schedule last saw it; read one schedule for its \
        executions' statuses now). In strict mode a user sees only the schedules they created \
        (an admin sees all).",
    responses((status = 200, description = "The schedules.", body = Success<ScheduleList>)),
)]
#[get("/schedules")]
pub async fn list(app: web::Data<AppState>, caller: Requester) -> Result<HttpResponse, ApiError> {
    Ok(envelope::ok(app.app.schedules(&caller.0).await?))
}

/// POST /schedules
#[utoipa::path(
    tag = "schedules",
    operation_id = "createSchedule",
    summary = "Create a schedule",
    description = "A schedule starts `workflowId` with `input` at each tick of `cron` (5 \
        fields, or 6 with seconds first) read in `timezone`. Each fire is the execution \
        `<id>@<fire time>` (RFC 3339, UTC: `nightly-report@2026-11-27T02:00:00Z`), owned by the \
        schedule's creator: replicas racing for a tick start it once. Ticks missed while no \
        server ran are fired when the next server starts if within `catchupWindow` (oldest \
        first), skipped and counted beyond it; `overlap` says what a tick does while an earlier \
        fire still runs.",
    request_body = ScheduleRequest,
    responses((status = 201, description = "The schedule created.", body = Success<ScheduleView>)),
)]
#[post("/schedules")]
pub async fn create(
    app: web::Data<AppState>,
    body: web::Json<ScheduleRequest>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let view = app
        .app
        .create_schedule(&caller.0, body.into_inner())
        .await?;
    Ok(envelope::with_status(StatusCode::CREATED, view))
}

/// GET /schedules/{id}
#[utoipa::path(
    tag = "schedules",
    operation_id = "getSchedule",
    summary = "A schedule's state",
    description = "Its definition, its next fire times (none while paused), the tick waiting \
        under `buffer-one`, its skip count, and its recent fires with their executions' \
        statuses now.",
    params(("id" = String, Path, description = "The schedule's id.", example = "nightly-report")),
    responses((status = 200, description = "The schedule.", body = Success<ScheduleView>)),
)]
#[get("/schedules/{id}")]
pub async fn detail(
    app: web::Data<AppState>,
    id: web::Path<String>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    Ok(envelope::ok(app.app.schedule(&caller.0, &id).await?))
}

/// DELETE /schedules/{id}
#[utoipa::path(
    tag = "schedules",
    operation_id = "deleteSchedule",
    summary = "Delete a schedule",
    description = "It fires no more; its executions stay. A schedule the host declares is \
        declared again when the server starts.",
    params(("id" = String, Path, description = "The schedule's id.", example = "nightly-report")),
    responses((status = 200, description = "Deleted.", body = Success<ScheduleDeleted>)),
)]
#[delete("/schedules/{id}")]
pub async fn remove(
    app: web::Data<AppState>,
    id: web::Path<String>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    Ok(envelope::ok(app.app.delete_schedule(&caller.0, &id).await?))
}

/// POST /schedules/{id}/pause
#[utoipa::path(
    tag = "schedules",
    operation_id = "pauseSchedule",
    summary = "Pause a schedule",
    description = "It fires nothing until unpaused (a trigger still fires).",
    params(("id" = String, Path, description = "The schedule's id.", example = "nightly-report")),
    responses((status = 200, description = "The schedule, paused.", body = Success<ScheduleView>)),
)]
#[post("/schedules/{id}/pause")]
pub async fn pause(
    app: web::Data<AppState>,
    id: web::Path<String>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    Ok(envelope::ok(
        app.app.pause_schedule(&caller.0, &id, true).await?,
    ))
}

/// POST /schedules/{id}/unpause
#[utoipa::path(
    tag = "schedules",
    operation_id = "unpauseSchedule",
    summary = "Unpause a schedule",
    description = "It fires again from its next tick; the ticks of the pause are not caught up \
        (a backfill fires them).",
    params(("id" = String, Path, description = "The schedule's id.", example = "nightly-report")),
    responses((status = 200, description = "The schedule, unpaused.", body = Success<ScheduleView>)),
)]
#[post("/schedules/{id}/unpause")]
pub async fn unpause(
    app: web::Data<AppState>,
    id: web::Path<String>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    Ok(envelope::ok(
        app.app.pause_schedule(&caller.0, &id, false).await?,
    ))
}

/// POST /schedules/{id}/trigger
#[utoipa::path(
    tag = "schedules",
    operation_id = "triggerSchedule",
    summary = "Fire a schedule now",
    description = "Starts its workflow now, also when paused, whatever its overlap policy: the \
        execution `<id>@<now, to the millisecond>`, owned by the schedule's owner. Answers once \
        it has started.",
    params(("id" = String, Path, description = "The schedule's id.", example = "nightly-report")),
    responses((status = 200, description = "The fire.", body = Success<FireView>)),
)]
#[post("/schedules/{id}/trigger")]
pub async fn trigger(
    app: web::Data<AppState>,
    id: web::Path<String>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    Ok(envelope::ok(
        app.app.trigger_schedule(&caller.0, &id).await?,
    ))
}

/// POST /schedules/{id}/backfill
#[utoipa::path(
    tag = "schedules",
    operation_id = "backfillSchedule",
    summary = "Fire the ticks of a past range",
    description = "Starts each tick from `from` to `to` (both included) that has no execution \
        yet, with the tick's own id: a repeated backfill, or one over ticks that fired, adds \
        nothing. At most 1000 ticks; `to` not in the future.",
    params(("id" = String, Path, description = "The schedule's id.", example = "nightly-report")),
    request_body = BackfillRequest,
    responses((status = 200, description = "What it started.", body = Success<BackfillResult>)),
)]
#[post("/schedules/{id}/backfill")]
pub async fn backfill(
    app: web::Data<AppState>,
    id: web::Path<String>,
    body: web::Json<BackfillRequest>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    Ok(envelope::ok(
        app.app
            .backfill_schedule(&caller.0, &id, body.into_inner())
            .await?,
    ))
}

pub fn routes(cfg: &mut crate::registration::Routes<'_, '_>) {
    cfg.service(list)
        .service(create)
        .service(detail)
        .service(remove)
        .service(pause)
        .service(unpause)
        .service(trigger)
        .service(backfill);
}
