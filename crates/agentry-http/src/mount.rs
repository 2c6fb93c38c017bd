//! The front ends served beside the HTTP API: MCP, A2A and the console, mounted by
//! `agentry-server` (the composition root) on this crate's server. They share its port and its
//! middleware (authentication, the host guard, CORS, intake's limits, the metrics), its access
//! table (`access.rs` has their rows) and `/doc`, but this crate does not know their
//! protocols: each is a [`Mount`], a function that registers its routes.

use std::sync::Arc;

use crate::registration::Routes;

/// A front end's routes, registered through utoipa-actix-web (so that `/doc` describes what is
/// served). Run once per server worker, and once more to collect the document.
#[derive(Clone)]
pub struct Mount(Arc<dyn Fn(&mut Routes<'_, '_>) + Send + Sync>);

impl Mount {
    pub fn new(routes: impl Fn(&mut Routes<'_, '_>) + Send + Sync + 'static) -> Self {
        Self(Arc::new(routes))
    }

    pub(crate) fn register(&self, cfg: &mut Routes<'_, '_>) {
        (self.0)(cfg)
    }
}

/// The front ends beside the HTTP API, each in its place in the route table (and in `/doc`'s
/// order of paths): MCP and A2A after the HTTP API's `/metrics`, the console last. One left out
/// is not served (its paths answer 404).
#[derive(Clone, Default)]
pub struct FrontEnds {
    /// `/mcp`: the Model Context Protocol (Streamable HTTP).
    pub mcp: Option<Mount>,
    /// `/a2a/{id}`: the Agent2Agent protocol.
    pub a2a: Option<Mount>,
    /// `/console`: the operator console's pages.
    pub console: Option<Mount>,
}
