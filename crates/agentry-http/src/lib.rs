//! agentry-http: the actix-web adapter.
//!
//! Routes, the envelope, SSE, WebSockets and `/doc`: the HTTP front end of `agentry-app`, whose
//! use cases every handler calls (parse, call one command, render). It decides no access and
//! knows no SQL. It also runs the server the other front ends (MCP, A2A, the console) are
//! mounted on beside it ([`mount`]), behind the same middleware; `agentry-server` composes them.

pub mod access;
pub mod agents;
pub mod auth;
pub mod definitions;
pub mod envelope;
pub mod error;
pub mod executions;
pub mod fallback;
pub mod forwarded;
pub mod health;
pub mod host;
pub mod hosts;
pub mod intake;
pub mod landing;
pub mod logs;
pub mod metrics;
pub mod mount;
pub mod openapi;
pub mod operations;
pub mod origin;
pub mod page;
pub mod queues;
pub mod registration;
pub mod request_log;
pub mod runs;
pub mod schedules;
pub mod server_info;
pub mod trace;
pub mod ui_stream;
pub mod validate;
pub mod wire;
pub mod workflows;
pub mod working_memory;
pub mod ws;

use std::net::TcpListener;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use actix_web::body::{BoxBody, EitherBody, MessageBody};
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::middleware::{Next, from_fn};
use actix_web::{App, HttpRequest, HttpServer, web};

pub use agentry_auth as authn;
pub use auth::{AuthGate, AuthenticatedUser, authenticated_user};
pub use error::ApiError;
pub use forwarded::{PublicUrl, TrustedProxies};
pub use host::{Host, HostError};
pub use hosts::AllowedHosts;
pub use mount::{FrontEnds, Mount};
pub use origin::AllowedOrigins;
pub use registration::Routes;
pub use validate::{Valid, Validate};

/// HTTP settings: sizes, time-outs and connection limits (docs/SECURITY.md lists them all).
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Largest accepted JSON body, in bytes.
    pub body_limit: usize,
    /// How long in-flight requests may take to finish on shutdown, in seconds.
    pub shutdown_timeout_secs: u64,
    /// How often the server pings an open WebSocket (keeps proxies from closing an idle one and
    /// finds dead peers).
    pub ws_keepalive: Duration,
    /// How long a client has to send a request's head (line and headers) once connected, or
    /// once its previous request is answered (`AGENTRY_HEADER_TIMEOUT`): 408, then closed.
    pub header_timeout: Duration,
    /// How long a client has to send a request's body once the handler reads it
    /// (`AGENTRY_BODY_TIMEOUT`): 408, then closed.
    pub body_timeout: Duration,
    /// How long an idle keep-alive connection stays open (`AGENTRY_KEEP_ALIVE`).
    pub keep_alive: Duration,
    /// The most connections each worker thread holds at once (`AGENTRY_MAX_CONNECTIONS`); more
    /// wait in the listen backlog.
    pub max_connections: usize,
    /// Browser origins allowed besides the server's own, on WebSockets and state-changing
    /// requests, and for CORS (`AGENTRY_ALLOWED_ORIGINS`; none: CORS off).
    pub allowed_origins: AllowedOrigins,
    /// The hosts the server answers for (`AGENTRY_ALLOWED_HOSTS`); `None`: decided by the
    /// address [`serve`] listens on ([`AllowedHosts::by_address`]), or any host for an [`app`]
    /// a host serves itself.
    pub allowed_hosts: Option<AllowedHosts>,
    /// The peers whose forwarding headers are believed (`AGENTRY_TRUSTED_PROXIES`; none).
    pub trusted_proxies: TrustedProxies,
    /// The server's public base URL (`AGENTRY_PUBLIC_URL`), which the A2A cards' URLs start
    /// with; `None`: the host and scheme each request was sent to.
    pub public_url: Option<PublicUrl>,
    /// `GET /metrics` is served on its own address (`--metrics-bind`, see [`serve_metrics`]),
    /// not on this one.
    pub metrics_elsewhere: bool,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            body_limit: 1024 * 1024,
            shutdown_timeout_secs: 30,
            ws_keepalive: Duration::from_secs(20),
            header_timeout: Duration::from_secs(5),
            body_timeout: Duration::from_secs(30),
            keep_alive: Duration::from_secs(5),
            max_connections: 10_000,
            allowed_origins: AllowedOrigins::default(),
            allowed_hosts: None,
            trusted_proxies: TrustedProxies::default(),
            public_url: None,
            metrics_elsewhere: false,
        }
    }
}

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The application: its use cases, access rules and metrics.
    pub app: agentry_app::App,
    pub config: HttpConfig,
    /// Authentication: the provider (if any) and which routes need it.
    pub auth: Arc<AuthGate>,
    /// What a host added: routes, middleware, not-found and error handlers.
    pub ext: host::Extensions,
    /// GET /agents's answer, made once per state of the registry.
    pub agent_list: Arc<agents::AgentListCache>,
    /// Where executions are kept (`sqlite`, `postgres`, `memory`), as `GET /api/info` says.
    pub database: String,
    /// The front ends mounted beside the HTTP API (MCP, A2A, the console).
    front_ends: FrontEnds,
    /// `/doc`'s document as JSON, made once from the routes served.
    doc: Arc<OnceLock<web::Bytes>>,
}

impl AppState {
    /// The built-in routes on `app`, no front end beside them, no authentication.
    pub fn new(app: agentry_app::App) -> Self {
        Self::with_parts(
            app,
            HttpConfig::default(),
            AuthGate::default(),
            host::Extensions::default(),
            "memory".to_owned(),
        )
    }

    pub(crate) fn with_parts(
        app: agentry_app::App,
        config: HttpConfig,
        auth: AuthGate,
        ext: host::Extensions,
        database: String,
    ) -> Self {
        Self {
            app,
            config,
            auth: Arc::new(auth),
            ext,
            agent_list: Arc::default(),
            database,
            front_ends: FrontEnds::default(),
            doc: Arc::default(),
        }
    }

    /// The same state with these front ends mounted beside the HTTP API: served on its server
    /// behind its middleware, and described by its `/doc`.
    pub fn mount(mut self, front_ends: FrontEnds) -> Self {
        self.front_ends = front_ends;
        self.doc = Arc::default();
        self
    }

    /// The front ends mounted beside the HTTP API.
    pub fn front_ends(&self) -> &FrontEnds {
        &self.front_ends
    }

    /// `/doc`'s document as JSON: the built-in routes and those of the front ends mounted.
    pub fn doc_json(&self) -> web::Bytes {
        self.doc
            .get_or_init(|| {
                openapi::document(&self.front_ends)
                    .to_json()
                    .expect("the OpenAPI document serializes")
                    .into()
            })
            .clone()
    }
}

/// Registers every built-in route, the extractor error handlers and the shared state.
pub fn configure(state: AppState) -> impl FnOnce(&mut web::ServiceConfig) {
    move |cfg: &mut web::ServiceConfig| {
        let limit = state.config.body_limit;
        let front_ends = state.front_ends.clone();
        cfg.app_data(web::Data::new(state))
            .app_data(
                web::JsonConfig::default()
                    .limit(limit)
                    .error_handler(error::json_error),
            )
            .app_data(web::PayloadConfig::default().limit(limit))
            .app_data(web::PathConfig::default().error_handler(error::path_error))
            .app_data(web::QueryConfig::default().error_handler(error::query_error));
        builtin_routes(&mut Routes::Served(cfg), &front_ends);
    }
}

/// Every built-in route, and those of the front ends mounted beside them in their places,
/// registered through utoipa-actix-web: each `.service(handler)` both serves the handler and
/// adds its `#[utoipa::path]` to the OpenAPI document, which [`openapi::document`] collects by
/// running this same function (so what is served is what is documented).
pub fn builtin_routes(cfg: &mut Routes<'_, '_>, front_ends: &FrontEnds) {
    fn mount(cfg: &mut Routes<'_, '_>, front_end: &Option<Mount>) {
        if let Some(m) = front_end {
            m.register(cfg);
        }
    }
    cfg.configure(agents::routes)
        .configure(working_memory::routes)
        .configure(runs::routes)
        .configure(workflows::routes)
        .configure(operations::routes)
        .configure(executions::routes)
        .configure(queues::routes)
        .configure(schedules::routes)
        .configure(definitions::routes)
        .configure(server_info::routes)
        .configure(health::routes)
        .configure(logs::routes)
        .configure(metrics::routes)
        .configure(|cfg| mount(cfg, &front_ends.mcp))
        .configure(|cfg| mount(cfg, &front_ends.a2a))
        .configure(ws::routes)
        .configure(landing::routes)
        .configure(openapi::routes)
        .configure(|cfg| mount(cfg, &front_ends.console));
}

/// The application: the built-in routes and the host's, authentication, the host's middleware,
/// failure envelopes for errors and unknown routes.
///
/// Layers, outermost first: CORS (only when origins are configured), the trace span, the
/// request log, the HTTP metrics, the host's error handler, the failure envelope for non-JSON
/// errors, the host guard, the cross-site guard, intake (HEAD as GET, NUL refused, the body
/// deadline), authentication, the host's middleware chain, then routing.
pub fn app(
    state: AppState,
) -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    let gate = state.auth.clone();
    let ext = state.ext.clone();
    let chain = ext.middleware.clone();
    let on_error = ext.on_error.clone();
    let not_found = ext.not_found.clone();
    let origins = state.config.allowed_origins.clone();
    let cors = origin::cors(&origins);
    let host_guard = Arc::new(hosts::HostGuard {
        hosts: state
            .config
            .allowed_hosts
            .clone()
            .unwrap_or(AllowedHosts::Any),
        trusted: state.config.trusted_proxies.clone(),
    });
    let body_timeout = state.config.body_timeout;
    let counted = state.app.metrics().clone();
    let mut app = App::new()
        .wrap(from_fn(move |req: ServiceRequest, next: Next<BoxBody>| {
            host::run_chain(chain.clone(), req, next)
        }))
        .wrap(from_fn(move |req: ServiceRequest, next: Next<BoxBody>| {
            auth::guard(gate.clone(), req, next)
        }))
        .wrap(from_fn(move |req: ServiceRequest, next: Next<BoxBody>| {
            intake::intake(body_timeout, req, next)
        }))
        .wrap(from_fn(move |req: ServiceRequest, next: Next<BoxBody>| {
            origin::refuse_cross_site(origins.clone(), req, next)
        }))
        .wrap(from_fn(move |req: ServiceRequest, next: Next<BoxBody>| {
            hosts::refuse_foreign_host(host_guard.clone(), req, next)
        }))
        .wrap(fallback::json_errors())
        .wrap(from_fn(
            move |req: ServiceRequest, next: Next<EitherBody<BoxBody>>| {
                fallback::host_errors(on_error.clone(), req, next)
            },
        ))
        .wrap(from_fn(move |req: ServiceRequest, next| {
            metrics::track(counted.clone(), req, next)
        }))
        .wrap(from_fn(request_log::log_request))
        .wrap(from_fn(trace::trace_request))
        .wrap(actix_web::middleware::Condition::new(
            cors.is_some(),
            cors.unwrap_or_default(),
        ))
        .configure(configure(state));
    for route in &ext.routes {
        app = app.configure(|cfg| route(cfg));
    }
    app.default_service(web::to(move |req: HttpRequest| {
        let custom = not_found.clone();
        async move {
            if let Some(resp) = error::method_not_allowed(&req) {
                return resp;
            }
            match custom {
                Some(f) => f(req).await,
                None => error::not_found(req).await,
            }
        }
    }))
}

/// Serves `GET /metrics` alone on `listener` (`--metrics-bind`), under the same authentication
/// rules as the main address; every other path is a 404 envelope. It answers the hosts of its
/// own address ([`AllowedHosts::by_address`]: the loopback names on a loopback address, else
/// any): a scraper names it by that address, not by the API's public names.
pub fn serve_metrics(
    listener: TcpListener,
    state: AppState,
) -> std::io::Result<actix_web::dev::Server> {
    let host_guard = Arc::new(hosts::HostGuard {
        hosts: AllowedHosts::by_address(listener.local_addr()?, None),
        trusted: state.config.trusted_proxies.clone(),
    });
    Ok(HttpServer::new(move || {
        let gate = state.auth.clone();
        let host_guard = host_guard.clone();
        App::new()
            .wrap(from_fn(move |req: ServiceRequest, next: Next<BoxBody>| {
                auth::guard(gate.clone(), req, next)
            }))
            .wrap(from_fn(move |req: ServiceRequest, next: Next<BoxBody>| {
                hosts::refuse_foreign_host(host_guard.clone(), req, next)
            }))
            .wrap(fallback::json_errors())
            .app_data(web::Data::new(state.clone()))
            .route(
                "/metrics",
                web::get().to(|app: web::Data<AppState>| async move { metrics::render(&app) }),
            )
            .default_service(web::to(error::not_found))
    })
    .workers(1)
    .listen(listener)?
    .disable_signals()
    .run())
}

/// Starts serving on `listener`; the returned server runs until stopped through its handle
/// (signals are left to the caller, which also has executions to wind down). Without
/// `allowed_hosts`, the hosts answered are decided by the listener's address; when that is
/// any host, a warning names the setting.
pub fn serve(
    listener: TcpListener,
    mut state: AppState,
) -> std::io::Result<actix_web::dev::Server> {
    if state.config.allowed_hosts.is_none() {
        let addr = listener.local_addr()?;
        let hosts = AllowedHosts::by_address(addr, state.config.public_url.as_ref());
        if hosts == AllowedHosts::Any {
            tracing::warn!(
                %addr,
                "the server answers requests for any host (it is not bound to a loopback \
                 address and AGENTRY_ALLOWED_HOSTS is not set): set AGENTRY_ALLOWED_HOSTS \
                 (--allowed-hosts) to the names clients use, to guard against DNS rebinding"
            );
        }
        state.config.allowed_hosts = Some(hosts);
    }
    let config = state.config.clone();
    Ok(HttpServer::new(move || app(state.clone()))
        .client_request_timeout(config.header_timeout)
        .keep_alive(config.keep_alive)
        .max_connections(config.max_connections)
        // A client that closes its side has gone away (no HTTP client half-closes and then waits
        // for an answer): the connection is shut and the handler's future dropped, which cancels
        // a generation in progress (spec section 4, agents rule 4).
        .h1_allow_half_closed(false)
        // Streams write many small pieces: without TCP_NODELAY each event after the first waits
        // for the client's delayed acknowledgement (about 40 ms on Linux).
        .on_connect(|conn, _| {
            if let Some(tcp) = conn.downcast_ref::<actix_web::rt::net::TcpStream>() {
                let _ = tcp.set_nodelay(true);
            }
        })
        .listen(listener)?
        .shutdown_timeout(config.shutdown_timeout_secs)
        .disable_signals()
        .run())
}
