//! Which built-in route needs a token: the one place where that is decided.
//!
//! Every route the server registers in [`crate::configure`] has exactly one row here, public or
//! protected; the protected rows are spec section 5's default protected set. The *sensitive* rows
//! are public by default (as the spec requires) but read or change executions, memory or logs:
//! strict mode (`AGENTRY_AUTH_STRICT=1`) protects them too. A test registers
//! the real routes, lists them from the router and fails on any route without a row (or a row
//! without a route), so a new route cannot slip past authentication unnoticed.

use std::sync::OnceLock;

use agentry_auth::{Access, RoutePattern, RouteRules};

/// One built-in route: method, actix path pattern, access by default, and whether strict mode
/// protects it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinRoute {
    pub method: &'static str,
    pub path: &'static str,
    /// The access of the spec's defaults.
    pub access: Access,
    /// It reads or changes executions, conversation memory or logs: protected in strict mode.
    pub sensitive: bool,
}

impl BuiltinRoute {
    /// The route's access in strict mode (`strict`) or by the spec's defaults.
    pub fn access_in(&self, strict: bool) -> Access {
        if strict && self.sensitive {
            Access::Protected
        } else {
            self.access
        }
    }

    /// The path with every `{param}` replaced by `x`: a path the route serves.
    pub fn example_path(&self) -> String {
        example_path(self.path)
    }
}

/// An actix path pattern with every `{param}` replaced by `x` (`/` for the root).
fn example_path(pattern: &str) -> String {
    let path: Vec<&str> = pattern
        .split('/')
        .map(|s| if s.starts_with('{') { "x" } else { s })
        .collect();
    match path.join("/") {
        p if p.is_empty() => "/".to_owned(),
        p => p,
    }
}

const fn public(method: &'static str, path: &'static str) -> BuiltinRoute {
    BuiltinRoute {
        method,
        path,
        access: Access::Public,
        sensitive: false,
    }
}

const fn protected(method: &'static str, path: &'static str) -> BuiltinRoute {
    BuiltinRoute {
        method,
        path,
        access: Access::Protected,
        sensitive: false,
    }
}

/// Public by the spec's defaults, protected in strict mode.
const fn sensitive(method: &'static str, path: &'static str) -> BuiltinRoute {
    BuiltinRoute {
        method,
        path,
        access: Access::Public,
        sensitive: true,
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
    sensitive("POST", "/agents/{id}/chat"),
    // Workflows.
    public("GET", "/workflows"),
    public("GET", "/workflows/{id}"),
    protected("POST", "/workflows/{id}/execute"),
    protected("POST", "/workflows/{id}/stream"),
    // Not in the default protected set (spec section 5, rules 1 and 3): a host guards them with
    // `protected_route("POST /workflows/*")` or AGENTRY_PROTECTED_ROUTES.
    sensitive("POST", "/workflows/{id}/executions/{execution_id}/suspend"),
    sensitive("POST", "/workflows/{id}/executions/{execution_id}/resume"),
    sensitive("GET", "/workflows/{id}/executions/{execution_id}/state"),
    // Beyond the spec (extensions.md): public like state, protected in strict mode; cancel is
    // protected like execute.
    sensitive("GET", "/workflows/{id}/executions/{execution_id}/stream"),
    sensitive("GET", "/workflows/{id}/executions"),
    protected("POST", "/workflows/{id}/executions/{execution_id}/cancel"),
    // Executions across workflows (beyond the spec, for the console): like the per-workflow
    // list and state.
    sensitive("GET", "/executions"),
    sensitive("GET", "/executions/{execution_id}"),
    sensitive("GET", "/api/execution-counts"),
    // What the server is (public, like /doc), and whom a token stands for (protected: a client
    // checks its token with it).
    public("GET", "/api/info"),
    public("GET", "/healthz"),
    public("GET", "/readyz"),
    protected("GET", "/api/me"),
    // Other built-in routes (spec section 4): public; WebSockets are unauthenticated (rule 2).
    public("GET", "/"),
    sensitive("GET", "/api/logs"),
    // MCP (Streamable HTTP): protected like the routes that run agents and workflows.
    protected("POST", "/mcp"),
    protected("GET", "/mcp"),
    protected("DELETE", "/mcp"),
    // Prometheus metrics: public by default (counts, no execution data), like the spec's logs.
    public("GET", "/metrics"),
    sensitive("GET", "/ws/logs"),
    sensitive("GET", "/ws/executions/{execution_id}"),
    // The OpenAPI document and the API explorer: Swagger UI's page (`/ui`, and `/ui/`)
    // and its files.
    public("GET", "/doc"),
    public("GET", "/ui"),
    public("GET", "/ui/{tail:.*}"),
    // The operator console's pages and files: public; its data comes through the API.
    public("GET", "/console"),
    public("GET", "/console/{tail:.*}"),
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

/// The rules of the built-in routes: protected rows (and, in strict mode, sensitive ones) as
/// protected patterns, public rows as public-by-default patterns (they stay public when a host
/// makes everything else private).
pub fn builtin_rules(strict: bool) -> RouteRules {
    patterns().iter().fold(RouteRules::new(), |rules, (r, p)| {
        match r.access_in(strict) {
            Access::Protected => rules.protected(p.clone()),
            Access::Public => rules.public_by_default(p.clone()),
        }
    })
}

/// The sensitive built-in routes that `rules` leave open to anyone (`METHOD /path`), for the
/// warning logged when authentication is on without strict mode.
pub fn open_sensitive_routes(rules: &RouteRules) -> Vec<String> {
    BUILTIN_ROUTES
        .iter()
        .filter(|r| r.sensitive && rules.access(r.method, &r.example_path()) == Access::Public)
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
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
            // extensions.md: cancel, protected by default.
            "POST /workflows/{id}/executions/{execution_id}/cancel",
            // Whom a token stands for: protected, so that a client can check its token.
            "GET /api/me",
            // MCP: it runs agents and workflows.
            "POST /mcp",
            "GET /mcp",
            "DELETE /mcp",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        assert_eq!(protected, spec);
        let rules = builtin_rules(false);
        assert_eq!(rules.access("POST", "/agents/a/text"), Access::Protected);
        assert_eq!(rules.access("POST", "/agents/a/chat"), Access::Public);
        assert_eq!(
            rules.access("POST", "/workflows/w/executions/e/resume"),
            Access::Public
        );
    }

    #[test]
    fn strict_mode_protects_what_reads_or_changes_executions_memory_or_logs() {
        let sensitive: BTreeSet<_> = BUILTIN_ROUTES
            .iter()
            .filter(|r| r.sensitive)
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        let expected: BTreeSet<_> = [
            "POST /agents/{id}/chat",
            "POST /workflows/{id}/executions/{execution_id}/suspend",
            "POST /workflows/{id}/executions/{execution_id}/resume",
            "GET /workflows/{id}/executions/{execution_id}/state",
            "GET /workflows/{id}/executions/{execution_id}/stream",
            "GET /workflows/{id}/executions",
            "GET /executions",
            "GET /executions/{execution_id}",
            "GET /api/execution-counts",
            "GET /api/logs",
            "GET /ws/logs",
            "GET /ws/executions/{execution_id}",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        assert_eq!(sensitive, expected);
        let strict = builtin_rules(true);
        for r in BUILTIN_ROUTES {
            let want = if r.sensitive {
                Access::Protected
            } else {
                r.access
            };
            assert_eq!(strict.access(r.method, &r.example_path()), want, "{r:?}");
        }
        assert!(open_sensitive_routes(&strict).is_empty());
        assert_eq!(
            open_sensitive_routes(&builtin_rules(false)).len(),
            expected.len()
        );
        let guarded =
            builtin_rules(false).protected(RoutePattern::parse("POST /workflows/*").unwrap());
        assert_eq!(open_sensitive_routes(&guarded).len(), expected.len() - 2);
    }
}
