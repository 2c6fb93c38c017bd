//! agentry-http: the actix-web adapter.
//!
//! Routes, the envelope, the error table, the SSE wire format. Only this crate knows them; the
//! engine underneath is `agentry-core`.

pub mod agent_wire;
pub mod agents;
pub mod envelope;
pub mod error;
pub mod fallback;
pub mod landing;
pub mod logs;
pub mod request_log;
pub mod ui_stream;
pub mod wire;
pub mod workflows;
pub mod ws;

use std::net::TcpListener;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::{App, HttpServer, web};
use agentry_core::Engine;
use agentry_core::agent::AgentHub;

pub use error::ApiError;

/// HTTP settings.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Largest accepted JSON body, in bytes.
    pub body_limit: usize,
    /// How long in-flight requests may take to finish on shutdown, in seconds.
    pub shutdown_timeout_secs: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            body_limit: 1024 * 1024,
            shutdown_timeout_secs: 30,
        }
    }
}

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub engine: Engine,
    /// The agents; `None` serves the agent routes with an empty registry.
    pub agents: Option<AgentHub>,
    pub config: HttpConfig,
}

impl AppState {
    pub fn new(engine: Engine) -> Self {
        Self {
            engine,
            agents: None,
            config: HttpConfig::default(),
        }
    }
}

/// Registers every built-in route, the extractor error handlers and the shared state.
pub fn configure(state: AppState) -> impl FnOnce(&mut web::ServiceConfig) {
    move |cfg: &mut web::ServiceConfig| {
        let limit = state.config.body_limit;
        cfg.app_data(web::Data::new(state))
            .app_data(
                web::JsonConfig::default()
                    .limit(limit)
                    .error_handler(error::json_error),
            )
            .app_data(web::PayloadConfig::default().limit(limit))
            .app_data(web::PathConfig::default().error_handler(error::path_error))
            .app_data(web::QueryConfig::default().error_handler(error::query_error))
            .configure(agents::routes)
            .configure(workflows::routes)
            .configure(logs::routes)
            .configure(ws::routes)
            .configure(landing::routes);
    }
}

/// The application: built-in routes, envelopes for unknown routes.
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
    App::new()
        .wrap(fallback::json_errors())
        .configure(configure(state))
        .default_service(web::to(error::not_found))
        .wrap(actix_web::middleware::from_fn(request_log::log_request))
}

/// Starts serving on `listener`; the returned server runs until stopped through its handle
/// (signals are left to the caller, which also has executions to wind down).
pub fn serve(listener: TcpListener, state: AppState) -> std::io::Result<actix_web::dev::Server> {
    let timeout = state.config.shutdown_timeout_secs;
    Ok(HttpServer::new(move || app(state.clone()))
        // A client that closes its side has gone away (no HTTP client half-closes and then waits
        // for an answer): the connection is shut and the handler's future dropped, which cancels
        // a generation in progress (spec section 4, agents rule 4).
        .h1_allow_half_closed(false)
        .listen(listener)?
        .shutdown_timeout(timeout)
        .disable_signals()
        .run())
}
