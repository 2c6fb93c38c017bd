//! The host application API: a builder with which a host adds its own routes, middleware,
//! authentication provider and rules, not-found and error handling to agentry's HTTP front end,
//! under the same authentication rules as the built-in routes. Its agents, workflows and
//! schedules go to the application instead (`agentry_app::AppBuilder`), which [`Host::build`]
//! serves; `agentry_server::compose` mounts MCP, A2A and the console beside it.
//!
//! ```no_run
//! use actix_web::{HttpResponse, web};
//! use agentry_app::AppBuilder;
//! use agentry_auth::JwtProvider;
//! use agentry_http::{AuthenticatedUser, Host};
//!
//! async fn profile(user: AuthenticatedUser) -> HttpResponse {
//!     HttpResponse::Ok().json(serde_json::json!({"success": true, "data": user.user()}))
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let app = AppBuilder::in_memory().build()?;
//! let state = Host::new()
//!     .auth(JwtProvider::hs256("change-me"))
//!     .get("/health", || async { HttpResponse::Ok().body("ok") })
//!     .get("/api/profile", profile)
//!     .protected_route("GET /api/*")
//!     .public_route("POST /webhooks/*")
//!     .build(app)?;
//! let listener = std::net::TcpListener::bind("127.0.0.1:3141")?;
//! agentry_http::serve(listener, state)?.await?;
//! # Ok(()) }
//! ```

use std::future::Future;
use std::sync::Arc;

use actix_web::body::BoxBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::{Error, FromRequest, Handler, HttpRequest, HttpResponse, Responder, web};
use agentry_app::App;
use agentry_auth::{AuthConfigError, AuthProvider, RoutePattern};
use futures::future::LocalBoxFuture;

use crate::auth::AuthGate;
use crate::{AppState, HttpConfig};

/// Registers routes on the app (run once per server worker).
pub type Configure = Arc<dyn Fn(&mut web::ServiceConfig) + Send + Sync>;
/// A host middleware: gets the request and the rest of the chain.
pub type MiddlewareFn =
    Arc<dyn Fn(ServiceRequest, Next) -> LocalBoxFuture<'static, MiddlewareResult> + Send + Sync>;
pub type MiddlewareResult = Result<ServiceResponse<BoxBody>, Error>;
/// Answers requests no route matched.
pub type NotFoundFn =
    Arc<dyn Fn(HttpRequest) -> LocalBoxFuture<'static, HttpResponse> + Send + Sync>;
/// Replaces the response of a failed request (`None` keeps agentry's failure envelope).
pub type ErrorFn = Arc<dyn Fn(&HttpRequest, &Error) -> Option<HttpResponse> + Send + Sync>;

/// What a host added to the app.
#[derive(Clone, Default)]
pub struct Extensions {
    pub routes: Vec<Configure>,
    pub middleware: Arc<Vec<MiddlewareFn>>,
    pub not_found: Option<NotFoundFn>,
    pub on_error: Option<ErrorFn>,
}

/// The rest of the middleware chain, as a host middleware sees it.
pub struct Next {
    chain: Arc<Vec<MiddlewareFn>>,
    index: usize,
    inner: actix_web::middleware::Next<BoxBody>,
}

impl Next {
    /// Passes the request on to the next middleware, and at the end to the route.
    pub async fn call(self, req: ServiceRequest) -> MiddlewareResult {
        match self.chain.get(self.index).cloned() {
            Some(mw) => {
                let next = Next {
                    index: self.index + 1,
                    ..self
                };
                mw(req, next).await
            }
            None => self.inner.call(req).await,
        }
    }
}

/// Runs the host's middleware chain in front of the routes.
pub(crate) async fn run_chain(
    chain: Arc<Vec<MiddlewareFn>>,
    req: ServiceRequest,
    inner: actix_web::middleware::Next<BoxBody>,
) -> MiddlewareResult {
    Next {
        chain,
        index: 0,
        inner,
    }
    .call(req)
    .await
}

/// A failure while composing the host application.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Auth(#[from] AuthConfigError),
    #[error("strict mode needs an authentication provider (set a JWT secret or key)")]
    StrictWithoutProvider,
    #[error("route {method} {path}: {reason}")]
    Route {
        method: String,
        path: String,
        reason: String,
    },
}

/// The builder. Registration problems (a bad pattern, a bad method) are collected and reported
/// by [`Host::build`], so that the chain reads top to bottom.
pub struct Host {
    config: HttpConfig,
    provider: Option<Arc<dyn AuthProvider>>,
    public: Vec<String>,
    protected: Vec<String>,
    default_private: bool,
    ext: Extensions,
    middleware: Vec<MiddlewareFn>,
    errors: Vec<HostError>,
    database: String,
}

impl Default for Host {
    fn default() -> Self {
        Self::new()
    }
}

impl Host {
    /// Nothing added yet: the built-in routes alone, no authentication.
    pub fn new() -> Self {
        Self {
            config: HttpConfig::default(),
            provider: None,
            public: Vec::new(),
            protected: Vec::new(),
            default_private: false,
            ext: Extensions::default(),
            middleware: Vec::new(),
            errors: Vec::new(),
            database: "memory".to_owned(),
        }
    }

    pub fn config(mut self, config: HttpConfig) -> Self {
        self.config = config;
        self
    }

    /// The kind of database the engine's store uses (`sqlite`, `postgres`), as `GET /api/info`
    /// reports it; `memory` unless set.
    pub fn database(mut self, kind: impl Into<String>) -> Self {
        self.database = kind.into();
        self
    }

    /// Turns authentication on with this provider.
    pub fn auth(self, provider: impl AuthProvider) -> Self {
        self.auth_shared(Arc::new(provider))
    }

    pub fn auth_shared(mut self, provider: Arc<dyn AuthProvider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// Exempts matching routes (`METHOD /path`, trailing `/*` wildcard) from authentication.
    pub fn public_route(mut self, pattern: impl Into<String>) -> Self {
        self.public.push(pattern.into());
        self
    }

    /// Requires a token on matching routes (built-in ones too, e.g. `POST /workflows/*` guards
    /// suspend and resume).
    pub fn protected_route(mut self, pattern: impl Into<String>) -> Self {
        self.protected.push(pattern.into());
        self
    }

    /// Requires a token on every route but the built-in public ones and public patterns.
    pub fn default_private(mut self, yes: bool) -> Self {
        self.default_private = yes;
        self
    }

    /// Adds a route: any method, an actix path (`/items/{id}`, `/files/{tail:.*}`) and a
    /// handler, which may take [`crate::AuthenticatedUser`], [`crate::Valid`] and any actix
    /// extractor.
    pub fn route<F, Args>(mut self, method: &str, path: &str, handler: F) -> Self
    where
        F: Handler<Args> + Clone + Send + Sync,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        let method = match Method::from_bytes(method.to_ascii_uppercase().as_bytes()) {
            Ok(m) => m,
            Err(e) => {
                self.errors.push(HostError::Route {
                    method: method.to_owned(),
                    path: path.to_owned(),
                    reason: e.to_string(),
                });
                return self;
            }
        };
        let path = path.to_owned();
        self.ext.routes.push(Arc::new(move |cfg| {
            cfg.route(&path, web::method(method.clone()).to(handler.clone()));
        }));
        self
    }

    pub fn get<F, Args>(self, path: &str, handler: F) -> Self
    where
        F: Handler<Args> + Clone + Send + Sync,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        self.route("GET", path, handler)
    }

    pub fn post<F, Args>(self, path: &str, handler: F) -> Self
    where
        F: Handler<Args> + Clone + Send + Sync,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        self.route("POST", path, handler)
    }

    pub fn put<F, Args>(self, path: &str, handler: F) -> Self
    where
        F: Handler<Args> + Clone + Send + Sync,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        self.route("PUT", path, handler)
    }

    pub fn delete<F, Args>(self, path: &str, handler: F) -> Self
    where
        F: Handler<Args> + Clone + Send + Sync,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        self.route("DELETE", path, handler)
    }

    /// A group of routes under a base path (an actix scope), e.g. `/api/v1`.
    pub fn group(
        mut self,
        base: &str,
        configure: impl Fn(&mut web::ServiceConfig) + Send + Sync + 'static,
    ) -> Self {
        let base = base.to_owned();
        let configure = Arc::new(configure);
        self.ext.routes.push(Arc::new(move |cfg| {
            let c = configure.clone();
            cfg.service(web::scope(&base).configure(move |s| c(s)));
        }));
        self
    }

    /// Anything else actix can register (services, resources, app data).
    pub fn configure(
        mut self,
        f: impl Fn(&mut web::ServiceConfig) + Send + Sync + 'static,
    ) -> Self {
        self.ext.routes.push(Arc::new(f));
        self
    }

    /// A middleware around every route, built-in and custom, run in the order added, after
    /// authentication (so it can read the user).
    ///
    /// ```no_run
    /// # use agentry_http::{Host, host::Next};
    /// # use actix_web::dev::ServiceRequest;
    /// Host::new().middleware(|req: ServiceRequest, next: Next| async move {
    ///     let mut res = next.call(req).await?;
    ///     res.headers_mut().insert(
    ///         actix_web::http::header::HeaderName::from_static("x-served-by"),
    ///         actix_web::http::header::HeaderValue::from_static("agentry"),
    ///     );
    ///     Ok(res)
    /// });
    /// ```
    pub fn middleware<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(ServiceRequest, Next) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = MiddlewareResult> + 'static,
    {
        self.middleware
            .push(Arc::new(move |req, next| Box::pin(f(req, next))));
        self
    }

    /// Answers requests that match no route (default: a 404 failure envelope).
    pub fn not_found<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(HttpRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HttpResponse> + 'static,
    {
        self.ext.not_found = Some(Arc::new(move |req| Box::pin(f(req))));
        self
    }

    /// Sees every failed request (a handler's or extractor's error, built-in or custom) and may
    /// replace its response; `None` keeps agentry's failure envelope.
    pub fn on_error(
        mut self,
        f: impl Fn(&HttpRequest, &Error) -> Option<HttpResponse> + Send + Sync + 'static,
    ) -> Self {
        self.ext.on_error = Some(Arc::new(f));
        self
    }

    /// Checks everything and gives the state that serves `app` with [`crate::serve`] or
    /// [`crate::app`]. Strict mode is the application's ([`agentry_app::AppBuilder::strict`]):
    /// it protects the sensitive routes too, and needs a provider.
    pub fn build(mut self, app: App) -> Result<AppState, HostError> {
        if let Some(e) = self.errors.drain(..).next() {
            return Err(e);
        }
        let strict = app.policy().strict;
        if strict && self.provider.is_none() {
            return Err(HostError::StrictWithoutProvider);
        }
        let mut rules = crate::access::builtin_rules(strict).default_private(self.default_private);
        for p in &self.protected {
            rules = rules.protected(RoutePattern::parse(p)?);
        }
        for p in &self.public {
            rules = rules.public(RoutePattern::parse(p)?);
        }
        if let Some(provider) = &self.provider {
            rules.extend_public(provider.public_routes());
        }
        if self.provider.is_some() && !strict {
            let open = crate::access::open_sensitive_routes(&rules);
            if !open.is_empty() {
                tracing::warn!(
                    "authentication is on, but these routes read or change executions, \
                     conversation memory or logs and need no token (the spec's defaults): {}; \
                     set AGENTRY_AUTH_STRICT=1 to protect them and enforce execution ownership",
                    open.join(", ")
                );
            }
        }
        let gate = AuthGate {
            provider: self.provider,
            rules,
            strict,
        };
        self.ext.middleware = Arc::new(self.middleware);
        Ok(AppState::with_parts(
            app,
            self.config,
            gate,
            self.ext,
            self.database,
        ))
    }
}
