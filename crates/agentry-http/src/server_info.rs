//! What the server says of itself and of its caller (beyond the spec; the console reads them):
//! `GET /api/info` (version, database, whether tokens are asked for) and `GET /api/me` (the
//! user a token stands for; protected, so a client can check a token before using it).

use actix_web::{HttpResponse, get, web};

use crate::AppState;
use crate::auth::AuthenticatedUser;
use crate::envelope::{self, Success};
use crate::wire::server::{AuthenticationInfo, Me, ServerInfo};

/// GET /api/info
#[utoipa::path(
    tag = "server",
    operation_id = "serverInfo",
    summary = "The server: version, database, authentication",
    responses((status = 200, description = "What the server is.", body = Success<ServerInfo>)),
)]
#[get("/api/info")]
pub async fn info(app: web::Data<AppState>) -> HttpResponse {
    envelope::ok(ServerInfo {
        name: "agentry",
        version: env!("CARGO_PKG_VERSION"),
        database: app.database.clone(),
        authentication: AuthenticationInfo {
            enabled: app.auth.provider.is_some(),
            strict: app.auth.strict,
        },
    })
}

/// GET /api/me
#[utoipa::path(
    tag = "server",
    operation_id = "currentUser",
    summary = "The user the request's token stands for",
    description = "Protected: with a provider configured, a missing, expired or invalid token \
        is refused with its 401 (`Authentication required`, `Token expired`, `Invalid token: \
        ...`), so a client can check a token before it uses it. Without a provider, `user` is \
        `null`.",
    responses(
        (status = 200, description = "The authenticated user.", body = Success<Me>),
    ),
)]
#[get("/api/me")]
pub async fn me(user: Option<AuthenticatedUser>) -> HttpResponse {
    envelope::ok(Me {
        user: user.map(|u| u.0.into_json()),
    })
}

pub fn routes(cfg: &mut crate::registration::Routes<'_, '_>) {
    cfg.service(info).service(me);
}
