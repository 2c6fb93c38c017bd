//! The authentication middleware, the `authenticatedUser` extractor and the user's way into
//! request contexts (spec section 5).

use std::future::{Ready, ready};
use std::sync::Arc;

use actix_web::body::BoxBody;
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{FromRequest, HttpMessage, HttpRequest, HttpResponse, ResponseError};
use agentry_auth::{Access, AuthError, AuthProvider, AuthRequest, RouteRules, User};
use agentry_core::ExecutionRecord;
use agentry_core::agent::Caller;
use serde_json::{Map, Value};

use crate::error::{ApiError, Code};

/// Who may act on an execution in strict mode: given the verified user and the execution.
pub type ExecutionPolicy = Arc<dyn Fn(&User, &ExecutionRecord) -> bool + Send + Sync>;

/// The role that may act on every execution and read the logs in strict mode.
pub const ADMIN_ROLE: &str = "admin";

/// The default ownership rule of strict mode: the user who started the execution, or an admin.
pub fn owner_or_admin(user: &User, execution: &ExecutionRecord) -> bool {
    user.has_role(ADMIN_ROLE) || (execution.owner.is_some() && execution.owner == user.id())
}

/// The provider (none: authentication is off), the rules deciding which routes need it, and
/// strict mode with its ownership policy.
#[derive(Clone)]
pub struct AuthGate {
    pub provider: Option<Arc<dyn AuthProvider>>,
    pub rules: RouteRules,
    /// Strict mode: the sensitive routes are protected (see `access.rs`), an execution is only
    /// for its owner (or whom `policy` allows) and the logs only for admins.
    pub strict: bool,
    pub policy: ExecutionPolicy,
}

impl Default for AuthGate {
    fn default() -> Self {
        Self {
            provider: None,
            rules: crate::access::builtin_rules(false),
            strict: false,
            policy: Arc::new(owner_or_admin),
        }
    }
}

impl AuthGate {
    /// What a request needs.
    pub fn access(&self, method: &str, path: &str) -> Access {
        self.rules.access(method, path)
    }

    /// Who is asking, for conversation memory: the verified user when authentication is on,
    /// anonymous without a token, and the client's word when there is no provider.
    pub fn caller(&self, user: Option<&AuthenticatedUser>) -> Caller {
        match (&self.provider, user.and_then(|u| u.0.id())) {
            (None, _) => Caller::Trusted,
            (Some(_), Some(id)) => Caller::Verified(id),
            (Some(_), None) => Caller::Anonymous,
        }
    }

    /// In strict mode, refuses a user who may not act on `execution` (403), or a request
    /// without a user (401, a route a host made public again). Outside strict mode, anyone may.
    pub fn authorize_execution(
        &self,
        user: Option<&AuthenticatedUser>,
        execution: &ExecutionRecord,
    ) -> Result<(), ApiError> {
        if !self.strict {
            return Ok(());
        }
        let user = user.ok_or_else(|| unauthorized(&AuthError::Missing))?;
        if (self.policy)(&user.0, execution) {
            Ok(())
        } else {
            Err(ApiError::new(
                Code::Forbidden,
                "Forbidden: execution belongs to another user",
            ))
        }
    }

    /// Whose executions a list may show: everyone's outside strict mode and for an admin; in
    /// strict mode only the user's own (`Some(user id)`; 401 without a user). The execution
    /// policy then filters the page too.
    pub fn list_owner(&self, user: Option<&AuthenticatedUser>) -> Result<Option<String>, ApiError> {
        if !self.strict {
            return Ok(None);
        }
        let user = user.ok_or_else(|| unauthorized(&AuthError::Missing))?;
        if user.0.has_role(ADMIN_ROLE) {
            return Ok(None);
        }
        // A user without an id owns nothing: an id no execution has.
        Ok(Some(user.0.id().unwrap_or_default()))
    }

    /// Whether the execution policy lets `user` see `execution` (always outside strict mode).
    pub fn may_see(&self, user: Option<&AuthenticatedUser>, execution: &ExecutionRecord) -> bool {
        self.authorize_execution(user, execution).is_ok()
    }

    /// In strict mode the logs (every user's requests and executions) are for admins only.
    pub fn authorize_logs(&self, user: Option<&AuthenticatedUser>) -> Result<(), ApiError> {
        if !self.strict {
            return Ok(());
        }
        let user = user.ok_or_else(|| unauthorized(&AuthError::Missing))?;
        if user.0.has_role(ADMIN_ROLE) {
            Ok(())
        } else {
            Err(ApiError::new(
                Code::Forbidden,
                "Forbidden: the logs need the admin role",
            ))
        }
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
    let code = match e {
        AuthError::Missing => Code::AuthenticationRequired,
        AuthError::Invalid(_) => Code::InvalidToken,
        AuthError::Expired => Code::TokenExpired,
    };
    ApiError::new(code, e.to_string())
}

/// Context injection: `user` into the context map and the user's id as `userId`. The
/// authenticated identity wins over a `userId` or `user` the client sent.
pub fn inject_user(user: &User, context: &mut Map<String, Value>, user_id: &mut Option<String>) {
    context.insert("user".into(), user.as_json().clone());
    if let Some(id) = user.id() {
        context.insert("userId".into(), Value::String(id.clone()));
        *user_id = Some(id);
    }
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
        // The user object needs an id: memory and executions belong to it.
        Some(token) => {
            provider
                .verify_token(&token, &areq)
                .await
                .and_then(|user| match user.id() {
                    Some(_) => Ok(user),
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn injection_overrides_client_identity() {
        let mut ctx = Map::new();
        ctx.insert("user".into(), json!({"id": "forged"}));
        ctx.insert("locale".into(), json!("fr"));
        let mut uid = Some("forged".to_owned());
        inject_user(
            &User::new(json!({"id": "u1", "roles": []})),
            &mut ctx,
            &mut uid,
        );
        assert_eq!(uid.as_deref(), Some("u1"));
        assert_eq!(ctx["user"]["id"], "u1");
        assert_eq!(ctx["userId"], "u1");
        assert_eq!(ctx["locale"], "fr");
    }
}
