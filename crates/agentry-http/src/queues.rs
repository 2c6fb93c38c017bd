//! Queues (issue "versions and queues"): each queue's declaration and load. Each handler calls
//! one use case of `agentry-app` and renders.

use actix_web::{HttpResponse, get, web};

use crate::AppState;
use crate::auth::Requester;
use crate::envelope::{self, Success};
use crate::error::ApiError;
use crate::wire::queues::{QueueDetail, QueueView};

/// GET /queues
#[utoipa::path(
    tag = "queues",
    operation_id = "listQueues",
    summary = "The queues",
    description = "Every queue the registered workflows declare: its limits (`concurrency` \
        across all replicas, `concurrencyKey` with its per-key limit, `rateLimit` over a \
        sliding window, the `priority` pointer) and its load: executions `queued`, `running` \
        and `suspended` (a suspended one keeps its slot), and the oldest wait. In strict mode \
        a user's counts are of their own executions (an admin's: all).",
    responses((status = 200, description = "The queues.", body = Success<Vec<QueueView>>)),
)]
#[get("/queues")]
pub async fn list(app: web::Data<AppState>, caller: Requester) -> Result<HttpResponse, ApiError> {
    Ok(envelope::ok(app.app.queues(&caller.0).await?))
}

/// GET /queues/{name}
#[utoipa::path(
    tag = "queues",
    operation_id = "getQueue",
    summary = "A queue and its keys",
    description = "The queue as in the list, and its keys with executions waiting, running or \
        suspended (the most waiting first, at most 100): the depth per key.",
    params(("name" = String, Path, description = "The queue's name.", example = "enrich-customer")),
    responses((status = 200, description = "The queue.", body = Success<QueueDetail>)),
)]
#[get("/queues/{name}")]
pub async fn detail(
    app: web::Data<AppState>,
    name: web::Path<String>,
    caller: Requester,
) -> Result<HttpResponse, ApiError> {
    Ok(envelope::ok(app.app.queue(&caller.0, &name).await?))
}

pub fn routes(cfg: &mut crate::registration::Routes<'_, '_>) {
    cfg.service(list).service(detail);
}
