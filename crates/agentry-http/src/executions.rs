//! Executions across workflows (beyond the spec; the console reads them): the list of every
//! workflow's executions, one execution by its id alone, and how many each workflow has in each
//! status. The same rules as the per-workflow routes (`agentry-app` applies them): public by
//! default, protected in strict mode, where a user sees only the executions they started (an
//! admin sees all).

use actix_web::{HttpResponse, get, web};
use agentry_app::workflows::ListRequest;

use crate::AppState;
use crate::auth::Requester;
use crate::envelope::{self, Success};
use crate::error::ApiError;
use crate::wire::{ExecutionCounts, ExecutionList, ExecutionStateView};

/// The query of an executions list: a status, the page size and the cursor.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Only executions with this status (`queued`, `running`, `suspended`, `completed`,
    /// `error`, `cancelled`).
    status: Option<String>,
    /// How many per page: 1 to 100 (default 20).
    limit: Option<String>,
    /// The `nextCursor` of the previous page.
    cursor: Option<String>,
}

impl From<ListParams> for ListRequest {
    fn from(p: ListParams) -> Self {
        ListRequest {
            workflow_id: None,
            family: Default::default(),
            status: p.status,
            limit: p.limit,
            cursor: p.cursor,
        }
    }
}

/// The query of the list across workflows: [`ListParams`] and an optional workflow. (Its fields
/// are repeated rather than flattened: utoipa would describe a flattened struct as one object
/// parameter in `/doc`, not as the query parameters it is.)
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct AllListParams {
    /// Only this workflow's executions.
    workflow_id: Option<String>,
    /// Only executions with this status (`queued`, `running`, `suspended`, `completed`,
    /// `error`, `cancelled`).
    status: Option<String>,
    /// How many per page: 1 to 100 (default 20).
    limit: Option<String>,
    /// The `nextCursor` of the previous page.
    cursor: Option<String>,
}

impl From<AllListParams> for ListRequest {
    fn from(p: AllListParams) -> Self {
        ListRequest {
            workflow_id: p.workflow_id.map(Into::into),
            family: Default::default(),
            status: p.status,
            limit: p.limit,
            cursor: p.cursor,
        }
    }
}

/// GET /executions
#[utoipa::path(
    tag = "executions",
    operation_id = "listAllExecutions",
    summary = "Every workflow's executions, newest first",
    description = "Pages through the executions of every workflow (or of `workflowId`), newest \
        first (by start, then id), optionally only those of one status (`suspended`: everything \
        waiting for a person); `nextCursor` (null on the last page) fetches the next page. Read \
        through an index. In strict mode a user sees only the executions they started (an admin \
        sees all).",
    params(AllListParams),
    responses(
        (status = 200, description = "One page.", body = Success<ExecutionList>),
    ),
)]
#[get("/executions")]
pub async fn list_all(
    app: web::Data<AppState>,
    params: web::Query<AllListParams>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    Ok(envelope::ok(
        app.app.list(&caller.0, params.into_inner().into()).await?,
    ))
}

/// GET /executions/{executionId}
#[utoipa::path(
    tag = "executions",
    operation_id = "getExecution",
    summary = "An execution's complete state, by its id alone",
    description = "The same record as `GET /workflows/{id}/executions/{executionId}/state` \
        (it names its `workflowId`), for a caller that knows only the execution's id.",
    params(("execution_id" = String, Path, description = "The execution's id.", example = "exp-1")),
    responses(
        (status = 200, description = "The execution's record.", body = Success<ExecutionStateView>),
    ),
)]
#[get("/executions/{execution_id}")]
pub async fn find(
    app: web::Data<AppState>,
    execution_id: web::Path<String>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    Ok(envelope::ok(
        app.app
            .find(&caller.0, &execution_id.into_inner().into())
            .await?,
    ))
}

/// GET /api/execution-counts
#[utoipa::path(
    tag = "executions",
    operation_id = "countExecutions",
    summary = "How many executions each workflow has, by status",
    description = "Every registered workflow, in the order of `GET /workflows`, with the number \
        of its executions in each status (zeros included). It reads every entry of an index: \
        for an overview page, not for a hot loop. In strict mode a user counts only the \
        executions they started (an admin counts all).",
    responses((status = 200, description = "The counts.", body = Success<ExecutionCounts>)),
)]
#[get("/api/execution-counts")]
pub async fn counts(app: web::Data<AppState>, caller: Requester) -> Result<HttpResponse, ApiError> {
    Ok(envelope::ok(app.app.counts(&caller.0).await?))
}

pub fn routes(cfg: &mut crate::registration::Routes<'_, '_>) {
    cfg.service(list_all).service(find).service(counts);
}
