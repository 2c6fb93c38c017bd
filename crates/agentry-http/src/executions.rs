//! Executions across workflows (beyond the spec; the console reads them): the list of every
//! workflow's executions, one execution by its id alone, and how many each workflow has in each
//! status. The same rules as the per-workflow routes: public by default, protected in strict
//! mode, where a user sees only the executions they started (an admin sees all).

use actix_web::{HttpResponse, get, web};
use agentry_core::Status;
use agentry_core::store::ListQuery;

use crate::AppState;
use crate::auth::AuthenticatedUser;
use crate::envelope::{self, Success};
use crate::error::{ApiError, Failure, engine_error};
use crate::wire::{self, ExecutionCounts, ExecutionList, ExecutionStateView, ExecutionSummary};

/// The query of an executions list: a status, the page size and the cursor.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Only executions with this status (`running`, `suspended`, `completed`, `error`,
    /// `cancelled`).
    status: Option<String>,
    /// How many per page: 1 to 100 (default 20).
    limit: Option<String>,
    /// The `nextCursor` of the previous page.
    cursor: Option<String>,
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
    /// Only executions with this status (`running`, `suspended`, `completed`, `error`,
    /// `cancelled`).
    status: Option<String>,
    /// How many per page: 1 to 100 (default 20).
    limit: Option<String>,
    /// The `nextCursor` of the previous page.
    cursor: Option<String>,
}

/// The most executions one page holds.
const MAX_PAGE: u32 = 100;

/// A value of the query, with an empty one counting as absent.
fn given(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.is_empty())
}

/// One page of executions, of `workflow_id` or of every workflow: the answer of both lists.
pub async fn list_page(
    app: &AppState,
    workflow_id: Option<String>,
    params: ListParams,
    user: Option<AuthenticatedUser>,
) -> Result<HttpResponse, ApiError> {
    let status = match given(params.status) {
        None => None,
        Some(s) => Some(Status::parse(&s).ok_or_else(|| {
            ApiError::bad_request(format!(
                "Invalid status {s:?}: expected running, suspended, completed, error or cancelled"
            ))
        })?),
    };
    let limit = match given(params.limit) {
        None => 20,
        Some(l) => l
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_PAGE).contains(n))
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "Invalid limit {l:?}: expected a number from 1 to {MAX_PAGE}"
                ))
            })?,
    };
    let before = match given(params.cursor) {
        None => None,
        Some(c) => Some(
            wire::parse_list_cursor(&c).ok_or_else(|| ApiError::bad_request("Invalid cursor"))?,
        ),
    };
    let query = ListQuery {
        workflow_id,
        status,
        owner: app.auth.list_owner(user.as_ref())?,
        before,
        limit,
    };
    let page = app
        .engine
        .list(&query)
        .await
        .map_err(|e| engine_error(e, "Failed to list executions"))?;
    let next_cursor = if page.len() == limit as usize {
        page.last().and_then(wire::list_cursor)
    } else {
        None
    };
    let executions = page
        .iter()
        .filter(|r| app.auth.may_see(user.as_ref(), r))
        .map(ExecutionSummary::from)
        .collect();
    Ok(envelope::ok(ExecutionList {
        executions,
        next_cursor,
    }))
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
        (status = 400, description = "`Invalid status ...`, `Invalid limit ...` or `Invalid cursor`.", body = Failure),
        (status = 404, description = "`Workflow <id> not found`.", body = Failure),
    ),
)]
#[get("/executions")]
pub async fn list_all(
    app: web::Data<AppState>,
    params: web::Query<AllListParams>,
    user: Option<AuthenticatedUser>,
) -> Result<HttpResponse, ApiError> {
    let AllListParams {
        workflow_id,
        status,
        limit,
        cursor,
    } = params.into_inner();
    let params = ListParams {
        status,
        limit,
        cursor,
    };
    list_page(&app, given(workflow_id), params, user).await
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
        (status = 403, description = "Strict mode: `Forbidden: execution belongs to another user`.", body = Failure),
        (status = 404, description = "`Execution <executionId> not found`.", body = Failure),
    ),
)]
#[get("/executions/{execution_id}")]
pub async fn find(
    app: web::Data<AppState>,
    execution_id: web::Path<String>,
    user: Option<AuthenticatedUser>,
) -> Result<HttpResponse, ApiError> {
    let rec = app
        .engine
        .find(&execution_id)
        .await
        .map_err(|e| engine_error(e, "Failed to read execution state"))?;
    app.auth.authorize_execution(user.as_ref(), &rec)?;
    Ok(envelope::ok(ExecutionStateView::from(&rec)))
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
pub async fn counts(
    app: web::Data<AppState>,
    user: Option<AuthenticatedUser>,
) -> Result<HttpResponse, ApiError> {
    let owner = app.auth.list_owner(user.as_ref())?;
    let counts = app
        .engine
        .count_by_status(owner.as_deref())
        .await
        .map_err(|e| engine_error(e, "Failed to count executions"))?;
    Ok(envelope::ok(ExecutionCounts::from(counts)))
}

pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig<'_>) {
    cfg.service(list_all).service(find).service(counts);
}
