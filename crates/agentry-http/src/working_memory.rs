//! GET and PUT /agents/{id}/memory/working: an agent's working memory, read and set as the
//! caller; GET /agents/{id}/usage: the tokens the agent spent for the caller (whose memory and
//! usage it is, the policy decides in `agentry-app`).

use actix_web::{HttpResponse, get, put, web};
use agentry_app::WorkingMemoryQuery;
use agentry_app::working_memory::WorkingMemoryBody;
use serde_json::Value;

use crate::AppState;
use crate::auth::Requester;
use crate::envelope::{self, Success};
use crate::error::ApiError;
use crate::wire::agents::{UsageView, WorkingMemoryView};

/// The query of both routes: whose working memory.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct WorkingMemoryParams {
    /// The user (a trusted setup takes it at its word; a verified caller may only name
    /// themselves, and is the user when it names nobody).
    user_id: Option<String>,
    /// The conversation (required when the agent's working memory is per conversation).
    conversation_id: Option<String>,
}

impl From<WorkingMemoryParams> for WorkingMemoryQuery {
    fn from(p: WorkingMemoryParams) -> Self {
        WorkingMemoryQuery {
            user_id: p.user_id,
            conversation_id: p.conversation_id,
        }
    }
}

/// GET /agents/{id}/memory/working
#[utoipa::path(
    tag = "agents",
    operation_id = "getWorkingMemory",
    summary = "An agent's working memory",
    description = "The working memory the agent keeps for a user (scope `user`) or a \
        conversation (scope `conversation`): its value (`null` when none was written), its \
        schema or template, and when it was last written. The model sees it with its \
        instructions and replaces it through the tool `update_working_memory`.",
    params(
        ("id" = String, Path, description = "The agent's id.", example = "assistant"),
        WorkingMemoryParams,
    ),
    responses(
        (status = 200, description = "The working memory.", body = Success<WorkingMemoryView>),
    ),
)]
#[get("/agents/{id}/memory/working")]
pub async fn get_working_memory(
    app: web::Data<AppState>,
    id: web::Path<String>,
    params: web::Query<WorkingMemoryParams>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner().into();
    let query = params.into_inner().into();
    Ok(envelope::ok(
        app.app.working_memory(&caller.0, &id, query).await?,
    ))
}

/// PUT /agents/{id}/memory/working
#[utoipa::path(
    tag = "agents",
    operation_id = "setWorkingMemory",
    summary = "Set an agent's working memory",
    description = "Replaces the working memory the agent keeps for a user or a conversation \
        with `value`: valid against the agent's schema (or Markdown text, for a template), at \
        most 16 KiB.",
    params(
        ("id" = String, Path, description = "The agent's id.", example = "assistant"),
        WorkingMemoryParams,
    ),
    request_body = WorkingMemoryBody,
    responses(
        (status = 200, description = "The working memory as written.", body = Success<WorkingMemoryView>),
    ),
)]
#[put("/agents/{id}/memory/working")]
pub async fn set_working_memory(
    app: web::Data<AppState>,
    id: web::Path<String>,
    params: web::Query<WorkingMemoryParams>,
    body: web::Json<Value>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner().into();
    let query = params.into_inner().into();
    Ok(envelope::ok(
        app.app
            .set_working_memory(&caller.0, &id, query, body.into_inner())
            .await?,
    ))
}

/// The query of the usage route: whose, and how many days.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct UsageParams {
    /// The user (a trusted setup takes it at its word; a verified caller may only name
    /// themselves, and is the user when it names nobody).
    user_id: Option<String>,
    /// How many UTC days back, today included: 1 to 90 (default 7).
    days: Option<String>,
}

/// GET /agents/{id}/usage
#[utoipa::path(
    tag = "agents",
    operation_id = "getAgentUsage",
    summary = "The tokens an agent spent for a user",
    description = "The tokens the agent's model calls spent for a user, per UTC day, beside \
        the agent's budgets: today's, what is left of the day's budget (a generation beyond it \
        is refused with `429 budget_exceeded` and `Retry-After`) and when it resets.",
    params(
        ("id" = String, Path, description = "The agent's id.", example = "assistant"),
        UsageParams,
    ),
    responses((status = 200, description = "The usage.", body = Success<UsageView>)),
)]
#[get("/agents/{id}/usage")]
pub async fn get_usage(
    app: web::Data<AppState>,
    id: web::Path<String>,
    params: web::Query<UsageParams>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner().into();
    let p = params.into_inner();
    let query = agentry_app::UsageQuery {
        user_id: p.user_id,
        days: p.days,
    };
    Ok(envelope::ok(app.app.usage(&caller.0, &id, query).await?))
}

/// Registers the three routes.
pub fn routes(cfg: &mut crate::registration::Routes<'_, '_>) {
    cfg.service(get_working_memory)
        .service(set_working_memory)
        .service(get_usage);
}
