//! The probes orchestrators ask (beyond the spec): `GET /healthz`, the process serves, and `GET
//! /readyz`, it can take work: the database answers, every migration is applied, and it is not
//! draining (SIGTERM turns it to 503 at once). Public, small JSON bodies outside the envelope,
//! and left out of the request log and the HTTP metrics (probes would drown them).

use actix_web::{HttpResponse, get, web};

use crate::AppState;
use crate::wire::server::{Health, Readiness};

/// The paths of the probes (the request log and the metrics skip them).
pub const PROBES: [&str; 2] = ["/healthz", "/readyz"];

/// GET /healthz
#[utoipa::path(
    tag = "server",
    operation_id = "health",
    summary = "Liveness: the process serves",
    description = "Always 200 `{\"status\": \"ok\"}` while the process answers HTTP (whatever \
        the database does). Not in the envelope; public.",
    responses((status = 200, description = "The process serves.", body = Health)),
)]
#[get("/healthz")]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(Health { status: "ok" })
}

/// GET /readyz
#[utoipa::path(
    tag = "server",
    operation_id = "readiness",
    summary = "Readiness: the server can take work",
    description = "200 `{\"status\": \"ready\"}` when the database answers, every migration \
        this build knows is applied, and the server is not draining; else 503 with `reason` \
        (`draining`, `database`, `migrations`) and `detail`. Not in the envelope; public.",
    responses(
        (status = 200, description = "Ready.", body = Readiness),
        (status = 503, description = "Not ready, and why.", body = Readiness),
    ),
)]
#[get("/readyz")]
pub async fn readyz(app: web::Data<AppState>) -> HttpResponse {
    match app.app.readiness().await {
        Ok(()) => HttpResponse::Ok().json(Readiness {
            status: "ready",
            reason: None,
            detail: None,
        }),
        Err(unready) => HttpResponse::ServiceUnavailable().json(Readiness {
            status: "not_ready",
            reason: Some(unready.reason()),
            detail: Some(unready.detail()),
        }),
    }
}

pub fn routes(cfg: &mut crate::registration::Routes<'_, '_>) {
    cfg.service(healthz).service(readyz);
}
