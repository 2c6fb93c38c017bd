//! The front ends side by side on one server and port, each on the same `App`: the HTTP API
//! (`agentry-http`, with what a host added), MCP (`agentry-mcp`), A2A (`agentry-a2a`) and the
//! operator console (`agentry-console`). The last three know no web framework
//! (`scripts/check-layers.sh`), so their actix glue lives here, in the composition root: each
//! module adapts actix's request to its protocol crate and the answer back, and gives a
//! [`Mount`](agentry_http::Mount) that `agentry-http` registers in its place, behind its
//! middleware (authentication, the host guard, CORS, limits, metrics) and in its `/doc`.

pub mod a2a;
pub mod console;
pub mod mcp;

use agentry_app::App;
use agentry_http::{AppState, FrontEnds, Host, HostError};
use agentry_mcp::SessionLimits;

/// The front ends mounted beside the HTTP API on `app`: MCP (its sessions kept to
/// `mcp_sessions`, its messages to `body_limit`), A2A and the console.
pub fn front_ends(app: &App, body_limit: usize, mcp_sessions: SessionLimits) -> FrontEnds {
    FrontEnds {
        mcp: Some(mcp::mount(app.clone(), body_limit, mcp_sessions)),
        a2a: Some(a2a::mount()),
        console: Some(console::mount()),
    }
}

/// The state that serves `app` with every front end: the HTTP API with the host's additions
/// ([`Host::build`]), and MCP, A2A and the console beside it. Serve it with
/// [`agentry_http::serve`].
pub fn compose(app: App, host: Host, mcp_sessions: SessionLimits) -> Result<AppState, HostError> {
    let state = host.build(app)?;
    let front_ends = front_ends(&state.app, state.config.body_limit, mcp_sessions);
    Ok(state.mount(front_ends))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use actix_web::test as atest;
    use actix_web::{HttpRequest, HttpResponse, web};
    use agentry_app::AppBuilder;
    use agentry_http::access::{BUILTIN_ROUTES, example_path};
    use agentry_http::authn::Access;
    use agentry_http::openapi::{builtin_route, doc_path, document, operations_mut};

    use super::*;

    /// Every front end on an application in memory, no host additions.
    fn state() -> AppState {
        let app = AppBuilder::in_memory().build().expect("the application");
        compose(app, Host::new(), SessionLimits::default()).expect("the state")
    }

    /// The patterns of every resource registered by `configure`, read off the router.
    async fn served_patterns() -> BTreeSet<String> {
        let app = atest::init_service(
            actix_web::App::new()
                .configure(agentry_http::configure(state()))
                .default_service(web::to(|req: HttpRequest| async move {
                    HttpResponse::Ok().body(format!("{:?}", req.resource_map()))
                })),
        )
        .await;
        let req = atest::TestRequest::get()
            .uri("/__no_such_route__")
            .to_request();
        let dump = String::from_utf8(atest::call_and_read_body(&app, req).await.to_vec()).unwrap();
        let mut out = BTreeSet::new();
        let mut rest = dump.as_str();
        while let Some(i) = rest.find("Single(\"") {
            rest = &rest[i + 8..];
            let end = rest.find('"').unwrap();
            if !rest[..end].is_empty() {
                out.insert(rest[..end].to_owned());
            }
            rest = &rest[end..];
        }
        assert!(out.len() > 5, "could not read the router: {dump}");
        out
    }

    /// Whether the router serves `method` on `path` (anything but its not-found answer).
    async fn serves(method: &str, path: &str) -> bool {
        let app = atest::init_service(agentry_http::app(state())).await;
        let req = atest::TestRequest::default()
            .method(method.parse().unwrap())
            .uri(path)
            .insert_header(("content-type", "application/json"))
            .set_payload("{}")
            .to_request();
        let resp = atest::call_service(&app, req).await;
        if resp.status() == 405 {
            return false;
        }
        if resp.status() != 404 {
            return true;
        }
        let body: serde_json::Value =
            serde_json::from_slice(&atest::read_body(resp).await).unwrap_or_default();
        let msg = body["error"].as_str().unwrap_or_default();
        !msg.starts_with("Route ")
    }

    /// Every route served on the port, the front ends' too, has exactly one row of the access
    /// table (`agentry-http`'s `access.rs`), and every row a route.
    #[actix_web::test]
    async fn every_served_route_is_classified_exactly_once() {
        let mut rows = BTreeSet::new();
        for r in BUILTIN_ROUTES {
            assert!(rows.insert((r.method, r.path)), "duplicate row {r:?}");
        }
        let patterns = served_patterns().await;
        let mut served = BTreeSet::new();
        for p in &patterns {
            let concrete = example_path(p);
            for m in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
                if serves(m, &concrete).await {
                    served.insert((m, p.as_str()));
                }
            }
        }
        let unclassified: Vec<_> = served.difference(&rows).collect();
        assert!(
            unclassified.is_empty(),
            "routes served without an access row in access.rs: {unclassified:?}"
        );
        let stale: Vec<_> = rows.iter().filter(|r| !served.contains(r)).collect();
        assert!(stale.is_empty(), "rows for routes nobody serves: {stale:?}");
    }

    /// A row that says its route reads a JSON body is documented with one; the only other
    /// bodies are MCP's JSON-RPC (rmcp reads it) and a deployed definition's document (JSON or
    /// YAML, which its handler reads). (A2A's JSON-RPC is a JSON body: its content type and
    /// size are checked as every route's, its parse errors are JSON-RPC's.)
    #[actix_web::test]
    async fn json_bodies_are_the_documented_bodies() {
        for (path, item) in &document(state().front_ends()).paths.paths {
            let mut item = item.clone();
            for (method, op) in operations_mut(&mut item) {
                let row = builtin_route(method, path).expect("every operation has a row");
                let documented = op.request_body.is_some();
                let other_body =
                    path == "/mcp" || path == agentry_app::routes::DEPLOY_DEFINITION.path;
                assert_eq!(row.json_body, documented && !other_body, "{method} {path}");
            }
        }
    }

    /// Every row of the access table is documented, protected exactly when the row is.
    #[actix_web::test]
    async fn every_builtin_route_is_documented_with_its_access() {
        let doc = document(state().front_ends());
        for r in BUILTIN_ROUTES {
            let path = doc_path(r.path);
            let mut item = doc
                .paths
                .paths
                .get(&path)
                .unwrap_or_else(|| panic!("{} {path} is not documented", r.method))
                .clone();
            let op = operations_mut(&mut item)
                .find(|(m, _)| *m == r.method)
                .map(|(_, op)| op.clone())
                .unwrap_or_else(|| panic!("{} {path} is not documented", r.method));
            assert_eq!(
                op.security.is_some(),
                r.access == Access::Protected,
                "{} {path}",
                r.method
            );
        }
        let documented: usize = doc
            .paths
            .paths
            .values()
            .map(|item| operations_mut(&mut item.clone()).count())
            .sum();
        assert_eq!(documented, BUILTIN_ROUTES.len(), "documented operations");
    }
}
