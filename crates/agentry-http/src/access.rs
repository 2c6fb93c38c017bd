//! Which built-in route needs a token: the one place where that is decided.
//!
//! Every route the server registers in [`crate::configure`] has exactly one row here, public or
//! protected; the protected rows are spec section 5's default protected set. A test registers
//! the real routes, lists them from the router and fails on any route without a row (or a row
//! without a route), so a new route cannot slip past authentication unnoticed.

use std::sync::OnceLock;

use agentry_auth::{Access, RoutePattern, RouteRules};

/// One built-in route: method, actix path pattern, access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinRoute {
    pub method: &'static str,
    pub path: &'static str,
    pub access: Access,
}

const fn public(method: &'static str, path: &'static str) -> BuiltinRoute {
    BuiltinRoute {
        method,
        path,
        access: Access::Public,
    }
}

const fn protected(method: &'static str, path: &'static str) -> BuiltinRoute {
    BuiltinRoute {
        method,
        path,
        access: Access::Protected,
    }
}

/// Every built-in route.
pub const BUILTIN_ROUTES: &[BuiltinRoute] = &[
    // Agents.
    public("GET", "/agents"),
    public("GET", "/agents/{id}"),
    protected("POST", "/agents/{id}/text"),
    protected("POST", "/agents/{id}/stream"),
    protected("POST", "/agents/{id}/object"),
    protected("POST", "/agents/{id}/stream-object"),
    // Not in the default protected set (spec section 5, rule 3).
    public("POST", "/agents/{id}/chat"),
    // Workflows.
    public("GET", "/workflows"),
    public("GET", "/workflows/{id}"),
    protected("POST", "/workflows/{id}/execute"),
    protected("POST", "/workflows/{id}/stream"),
    // Not in the default protected set (spec section 5, rules 1 and 3): a host guards them with
    // `protected_route("POST /workflows/*")` or AGENTRY_PROTECTED_ROUTES.
    public("POST", "/workflows/{id}/executions/{execution_id}/suspend"),
    public("POST", "/workflows/{id}/executions/{execution_id}/resume"),
    public("GET", "/workflows/{id}/executions/{execution_id}/state"),
    // Other built-in routes (spec section 4): public; WebSockets are unauthenticated (rule 2).
    public("GET", "/"),
    public("GET", "/api/logs"),
    public("GET", "/ws/logs"),
    public("GET", "/ws/executions/{execution_id}"),
    // The OpenAPI document and the API explorer: Swagger UI's page (`/ui` redirects to `/ui/`)
    // and its files.
    public("GET", "/doc"),
    public("GET", "/ui"),
    public("GET", "/ui/{tail:.*}"),
];

/// Every row with its path parsed as a pattern, once.
fn patterns() -> &'static [(BuiltinRoute, RoutePattern)] {
    static PATTERNS: OnceLock<Vec<(BuiltinRoute, RoutePattern)>> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        BUILTIN_ROUTES
            .iter()
            .map(|r| {
                let p = RoutePattern::parse(&format!("{} {}", r.method, r.path))
                    .expect("built-in route patterns are valid");
                (*r, p)
            })
            .collect()
    })
}

/// The rules of the built-in routes: protected rows as protected patterns, public rows as
/// public-by-default patterns (they stay public when a host makes everything else private).
pub fn builtin_rules() -> RouteRules {
    patterns()
        .iter()
        .fold(RouteRules::new(), |rules, (r, p)| match r.access {
            Access::Protected => rules.protected(p.clone()),
            Access::Public => rules.public_by_default(p.clone()),
        })
}

/// The methods the built-in routes serve on `path` (for a 405's `Allow`).
pub fn allowed_methods(path: &str) -> Vec<&'static str> {
    patterns()
        .iter()
        .filter(|(r, p)| p.matches(r.method, path))
        .map(|(r, _)| r.method)
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use actix_web::test as atest;
    use actix_web::{App, HttpRequest, HttpResponse, web};
    use agentry_core::Engine;

    use super::*;
    use crate::{AppState, configure};

    /// The patterns of every resource registered by `configure`, read off the router.
    async fn served_patterns() -> BTreeSet<String> {
        let app = atest::init_service(
            App::new()
                .configure(configure(AppState::new(Engine::in_memory())))
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
        let app = atest::init_service(crate::app(AppState::new(Engine::in_memory()))).await;
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

    #[actix_web::test]
    async fn every_served_route_is_classified_exactly_once() {
        let mut rows = BTreeSet::new();
        for r in BUILTIN_ROUTES {
            assert!(rows.insert((r.method, r.path)), "duplicate row {r:?}");
        }
        let patterns = served_patterns().await;
        let mut served = BTreeSet::new();
        for p in &patterns {
            let concrete = p
                .split('/')
                .map(|s| if s.starts_with('{') { "x" } else { s })
                .collect::<Vec<_>>()
                .join("/");
            let concrete = if concrete.is_empty() {
                "/".to_owned()
            } else {
                concrete
            };
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

    #[test]
    fn the_protected_set_is_the_spec_default() {
        let protected: BTreeSet<_> = BUILTIN_ROUTES
            .iter()
            .filter(|r| r.access == Access::Protected)
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        let spec: BTreeSet<_> = [
            "POST /agents/{id}/text",
            "POST /agents/{id}/stream",
            "POST /agents/{id}/object",
            "POST /agents/{id}/stream-object",
            "POST /workflows/{id}/execute",
            "POST /workflows/{id}/stream",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        assert_eq!(protected, spec);
        let rules = builtin_rules();
        assert_eq!(rules.access("POST", "/agents/a/text"), Access::Protected);
        assert_eq!(rules.access("POST", "/agents/a/chat"), Access::Public);
        assert_eq!(
            rules.access("POST", "/workflows/w/executions/e/resume"),
            Access::Public
        );
    }
}
