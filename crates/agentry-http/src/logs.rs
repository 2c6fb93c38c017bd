//! Logs over HTTP: the `GET /api/logs` route. The capture (the `tracing` layer, the bounded
//! buffer of recent records, the query and its limits) is `agentry-logs`'s; who may read the
//! logs is `agentry-app`'s ([`agentry_app::App::log_query`], [`agentry_app::App::logs`]).

use actix_web::{HttpResponse, get, web};
use agentry_logs::{LogQueryParams, LogRecord};

use crate::envelope;
use crate::error::ApiError;

/// GET /api/logs: the captured records matching the query, oldest first.
#[utoipa::path(
    tag = "observability",
    operation_id = "listLogs",
    summary = "Recent log records",
    description = "The process's recent log records (a ring buffer of the last 2000, at most \
        4 MiB in all; a message longer than 2048 bytes and any other value longer than 512 \
        bytes is cut, ending with `…[truncated N bytes]`) matching the query, oldest first. Each carries the agent, workflow and execution it \
        belongs to. An empty parameter counts as absent.",
    params(LogQueryParams),
    responses(
        (status = 200, description = "The matching records, oldest first.", body = crate::envelope::Success<Vec<LogRecord>>),
    ),
)]
#[get("/api/logs")]
pub async fn list(
    app: web::Data<crate::AppState>,
    params: web::Query<LogQueryParams>,
    caller: crate::auth::Requester,
) -> Result<HttpResponse, ApiError> {
    let query = app.app.log_query(&caller.0, params.into_inner())?;
    let records = app.app.logs(&caller.0, &query)?;
    let records: Vec<&LogRecord> = records.iter().map(|r| r.as_ref()).collect();
    Ok(envelope::ok(records))
}

/// Registers the log routes.
pub fn routes(cfg: &mut crate::registration::Routes<'_, '_>) {
    cfg.service(list);
}
