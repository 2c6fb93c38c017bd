//! Where the built-in routes are registered: on a server worker's `App`, only served, or
//! through utoipa-actix-web, served and documented (`/doc`'s document, made once, on demand).
//! Each server worker builds its own `App`; documenting every route there too would build the
//! whole OpenAPI document once per worker at start, for nothing (megabytes, then thrown away).

use actix_web::dev::HttpServiceFactory;
use actix_web::web;
use utoipa_actix_web::OpenApiFactory;

/// The built-in routes' registration (see the module's documentation).
pub enum Routes<'a, 's> {
    /// On a server worker's `App`.
    Served(&'a mut web::ServiceConfig),
    /// Collected into the OpenAPI document as well.
    Documented(&'a mut utoipa_actix_web::service_config::ServiceConfig<'s>),
}

impl Routes<'_, '_> {
    /// Registers a handler (and, documented, its `#[utoipa::path]`).
    pub fn service<F>(&mut self, factory: F) -> &mut Self
    where
        F: HttpServiceFactory + OpenApiFactory + 'static,
    {
        match self {
            Routes::Served(cfg) => {
                cfg.service(factory);
            }
            Routes::Documented(cfg) => {
                cfg.service(factory);
            }
        }
        self
    }

    /// Shared data for the handlers registered here.
    pub fn app_data<U: 'static>(&mut self, data: U) -> &mut Self {
        match self {
            Routes::Served(cfg) => {
                cfg.app_data(data);
            }
            Routes::Documented(cfg) => {
                cfg.app_data(data);
            }
        }
        self
    }

    /// Runs a module's registration.
    pub fn configure(&mut self, routes: impl FnOnce(&mut Self)) -> &mut Self {
        routes(self);
        self
    }
}
