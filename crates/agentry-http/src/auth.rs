//! The authentication middleware, the `authenticatedUser` extractor and the user's way into
//! request contexts (spec section 5).

use std::future::{Ready, ready};
use std::sync::Arc;

use actix_web::body::BoxBody;
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{FromRequest, HttpMessage, HttpRequest, HttpResponse, ResponseError};
use agentry_app::{AppError, Caller};
use agentry_auth::{Access, AuthError, AuthProvider, AuthRequest, RouteRules, User};

use crate::error::ApiError;

/// The provider (none: authentication is off), the rules deciding which routes need it, and
/// whether strict mode protects the sensitive routes (the rest of strict mode, who may act on
/// what, is `agentry-app`'s [`agentry_app::Policy`]).
#[derive(Clone)]
pub struct AuthGate {
    pub provider: Option<Arc<dyn AuthProvider>>,
    pub rules: RouteRules,
    /// Strict mode: the sensitive routes are protected (see `access.rs`).
    pub strict: bool,
}

impl Default for AuthGate {
    fn default() -> Self {
        Self {
            provider: None,
            rules: crate::access::builtin_rules(false),
            strict: false,
        }
    }
}

impl AuthGate {
    /// What a request needs.
    pub fn access(&self, method: &str, path: &str) -> Access {
        self.rules.access(method, path)
    }
}

/// The caller of a request, for the application's use cases: the verified user, anonymous, or
/// trusted when no provider is configured.
#[derive(Debug, Clone)]
pub struct Requester(pub Caller);

impl FromRequest for Requester {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let provider_on = req
            .app_data::<actix_web::web::Data<crate::AppState>>()
            .is_some_and(|app| app.auth.provider.is_some());
        ready(Ok(Requester(Caller::of(
            provider_on,
            authenticated_user(req),
        ))))
    }
}

/// The authenticated user of a request (the spec's `authenticatedUser` request variable).
/// As an extractor it answers 401 `Authentication required` when there is none; use
/// `Option<AuthenticatedUser>` where a user is optional.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthenticatedUser(pub User);

impl AuthenticatedUser {
    pub fn user(&self) -> &User {
        &self.0
    }
}

impl FromRequest for AuthenticatedUser {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(
            authenticated_user(req)
                .map(AuthenticatedUser)
                .ok_or_else(|| unauthorized(&AuthError::Missing)),
        )
    }
}

/// The request's authenticated user, if any.
pub fn authenticated_user(req: &HttpRequest) -> Option<User> {
    req.extensions()
        .get::<AuthenticatedUser>()
        .map(|u| u.0.clone())
}

fn unauthorized(e: &AuthError) -> ApiError {
    AppError::auth(e).into()
}

fn snapshot(req: &ServiceRequest) -> AuthRequest {
    AuthRequest {
        method: req.method().as_str().to_owned(),
        // The path as the router sees it (percent-decoded where actix decodes), so that an
        // encoded spelling cannot route to a protected handler while missing its pattern.
        path: req.match_info().as_str().to_owned(),
        query: req.query_string().to_owned(),
        headers: req
            .headers()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect(),
    }
}

/// The middleware: protected routes need a verified token; on any route a valid token makes
/// the user known to the handler. Refusals are 401 failure envelopes with the exact messages of
/// spec section 7.
pub async fn guard(
    gate: Arc<AuthGate>,
    req: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Some(provider) = gate.provider.clone() else {
        return next.call(req).await;
    };
    let areq = snapshot(&req);
    let access = gate.access(&areq.method, &areq.path);
    let outcome = match provider.extract_token(&areq) {
        None => Err(AuthError::Missing),
        // The user object needs an id: memory and executions belong to it, so it is a key
        // like any other (bounded, without NUL).
        Some(token) => {
            provider
                .verify_token(&token, &areq)
                .await
                .and_then(|user| match user.id() {
                    Some(id) => agentry_engine::id::check_key("the user's id", &id)
                        .map(|()| user)
                        .map_err(AuthError::invalid),
                    None => Err(AuthError::invalid("the user has no id")),
                })
        }
    };
    match (outcome, access) {
        (Ok(user), _) => {
            req.extensions_mut().insert(AuthenticatedUser(user));
            next.call(req).await
        }
        (Err(_), Access::Public) => next.call(req).await,
        (Err(e), Access::Protected) => {
            tracing::info!(
                method = %areq.method,
                path = %areq.path,
                reason = %e,
                "authentication refused"
            );
            let mut resp: HttpResponse = unauthorized(&e).error_response();
            resp.headers_mut().insert(
                actix_web::http::header::WWW_AUTHENTICATE,
                actix_web::http::header::HeaderValue::from_static("Bearer"),
            );
            Ok(req.into_response(resp))
        }
    }
}
