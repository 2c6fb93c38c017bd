//! A host application that embeds agentry: the example registry and the built-in routes, plus
//! its own routes under the same authentication rules (added to the HTTP front end with
//! `Host`), and its own agent (added to the application with `AppBuilder`).
//!
//! - `GET /health`: public.
//! - `GET /api/profile`: protected (pattern `GET /api/*`), answers the authenticated user.
//! - `GET /api/admin/stats`: protected; 403 with its own body unless the user has role `admin`.
//! - `POST /webhooks/{source}`: public through the pattern `POST /webhooks/*`, validated body.
//! - A custom provider, when `AGENTRY_JWT_SECRET` is unset: API keys read from the `api_key`
//!   query parameter or the `agentry_session` cookie (or a bearer header).
//! - An agent with the tools of an MCP server, when `AGENTRY_EXAMPLE_MCP_SERVER` names one: a
//!   Streamable HTTP URL (`http://127.0.0.1:8000/mcp`), or a command that speaks MCP on stdio
//!   (`npx -y @modelcontextprotocol/server-everything`). The agent `mcp-assistant` lists the
//!   server's tools with their own names and schemas (`GET /agents/mcp-assistant`).
//!
//! ```text
//! cargo run -p agentry-server --example host
//! curl -s 'http://127.0.0.1:3141/api/profile?api_key=demo-admin-key'
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use actix_web::dev::ServiceRequest;
use actix_web::{HttpRequest, HttpResponse, web};
use agentry_auth::{AuthError, AuthProvider, AuthRequest, User, bearer_token};
use agentry_http::host::Next;
use agentry_http::{AuthenticatedUser, Host, Valid, Validate};
use agentry_server::{AuthSettings, Settings};
use serde::Deserialize;
use serde_json::json;

/// API keys from the `api_key` query parameter, the `agentry_session` cookie or a bearer header.
pub struct ApiKeyProvider {
    keys: HashMap<String, User>,
}

impl ApiKeyProvider {
    /// Two demo keys: `demo-admin-key` (roles admin) and `demo-user-key` (no roles).
    pub fn demo() -> Self {
        let mut keys = HashMap::new();
        keys.insert(
            "demo-admin-key".to_owned(),
            User::new(
                json!({"id": "admin-1", "name": "Ada Admin", "email": "ada@example.com",
                              "roles": ["admin"], "tier": "pro"}),
            ),
        );
        keys.insert(
            "demo-user-key".to_owned(),
            User::new(
                json!({"id": "user-1", "name": "Uma User", "email": "uma@example.com",
                              "roles": [], "tier": "free"}),
            ),
        );
        Self { keys }
    }
}

#[async_trait::async_trait]
impl AuthProvider for ApiKeyProvider {
    fn kind(&self) -> &str {
        "api-key"
    }

    fn extract_token(&self, req: &AuthRequest) -> Option<String> {
        req.query_param("api_key")
            .or_else(|| req.cookie("agentry_session"))
            .or_else(|| bearer_token(req))
    }

    async fn verify_token(&self, token: &str, _req: &AuthRequest) -> Result<User, AuthError> {
        self.keys
            .get(token)
            .cloned()
            .ok_or_else(|| AuthError::invalid("unknown API key"))
    }
}

async fn health() -> HttpResponse {
    HttpResponse::Ok().json(json!({"success": true, "data": {"status": "ok"}}))
}

async fn profile(user: AuthenticatedUser) -> HttpResponse {
    HttpResponse::Ok().json(json!({"success": true, "data": user.user()}))
}

async fn admin_stats(
    user: AuthenticatedUser,
    app: web::Data<agentry_http::AppState>,
) -> HttpResponse {
    if !user.user().has_role("admin") {
        return HttpResponse::Forbidden().json(json!({
            "success": false,
            "error": "Forbidden: the admin role is required",
            "requiredRole": "admin",
        }));
    }
    HttpResponse::Ok().json(json!({
        "success": true,
        "data": {"workflows": app.app.workflow_count()},
    }))
}

#[derive(Debug, Deserialize)]
pub struct Webhook {
    pub event: String,
    #[serde(default)]
    pub payload: serde_json::Value,
}

impl Validate for Webhook {
    fn validate(&self) -> Result<(), String> {
        if self.event.trim().is_empty() {
            return Err("event must not be empty".into());
        }
        Ok(())
    }
}

async fn webhook(
    source: web::Path<String>,
    body: Valid<Webhook>,
    user: Option<AuthenticatedUser>,
) -> HttpResponse {
    tracing::info!(source = %source, event = %body.event, "webhook received");
    HttpResponse::Accepted().json(json!({
        "success": true,
        "data": {
            "source": source.into_inner(),
            "event": body.event,
            "authenticated": user.is_some(),
        },
    }))
}

/// Stamps every response, to show host middleware.
async fn served_by(req: ServiceRequest, next: Next) -> agentry_http::host::MiddlewareResult {
    let mut res = next.call(req).await?;
    res.headers_mut().insert(
        actix_web::http::header::HeaderName::from_static("x-served-by"),
        actix_web::http::header::HeaderValue::from_static("agentry-host-example"),
    );
    Ok(res)
}

async fn not_found(req: HttpRequest) -> HttpResponse {
    HttpResponse::NotFound().json(json!({
        "success": false,
        "error": format!("Nothing at {} {}", req.method(), req.path()),
    }))
}

/// The host's additions; `provider` replaces the settings' provider when given.
pub fn customize(host: Host, provider: Option<Arc<dyn AuthProvider>>) -> Host {
    let host = match provider {
        Some(p) => host.auth_shared(p),
        None => host,
    };
    host.get("/health", health)
        .get("/api/profile", profile)
        .get("/api/admin/stats", admin_stats)
        .post("/webhooks/{source}", webhook)
        .protected_route("GET /api/*")
        .public_route("POST /webhooks/*")
        .middleware(served_by)
        .not_found(not_found)
}

/// An agent whose tools are those of the MCP server `spec` names: a URL (Streamable HTTP) or a
/// command line (stdio).
pub async fn mcp_agent(spec: &str) -> anyhow::Result<agentry_agents::Agent> {
    let server = if spec.starts_with("http://") || spec.starts_with("https://") {
        agentry_mcp::McpServer::Http {
            url: spec.to_owned(),
            bearer: std::env::var("AGENTRY_EXAMPLE_MCP_TOKEN").ok(),
        }
    } else {
        let mut words = spec.split_whitespace().map(str::to_owned);
        agentry_mcp::McpServer::Stdio {
            program: words.next().unwrap_or_default(),
            args: words.collect(),
        }
    };
    let tools = agentry_mcp::McpToolset::connect(server).await?.tools();
    Ok(tools.into_iter().fold(
        agentry_agents::Agent::new("mcp-assistant", "MCP assistant")
            .description("Answers with the tools of an MCP server."),
        |agent, tool| agent.tool(tool),
    ))
}

/// The provider of the example: JWT when `AGENTRY_JWT_SECRET` (or a key) is set, else API keys.
pub fn provider(auth: &AuthSettings) -> anyhow::Result<Arc<dyn AuthProvider>> {
    Ok(match auth.provider()? {
        Some(p) => p,
        None => Arc::new(ApiKeyProvider::demo()),
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let settings = Settings {
        bind: std::env::var("AGENTRY_BIND").unwrap_or_else(|_| "127.0.0.1:3141".into()),
        database_url: std::env::var("DATABASE_URL")
            .unwrap_or_else(|_| "sqlite://agentry.db".into()),
        auth: AuthSettings::from_env(),
        ..Settings::default()
    };
    let p = provider(&settings.auth)?;
    let kind = p.kind().to_owned();
    let mcp = match std::env::var("AGENTRY_EXAMPLE_MCP_SERVER") {
        Ok(spec) if !spec.trim().is_empty() => Some(mcp_agent(&spec).await?),
        _ => None,
    };
    let running = agentry_server::start_with(
        &settings,
        |app| match mcp {
            Some(agent) => app.agent(agent),
            None => app,
        },
        |h| customize(h, Some(p)),
    )
    .await?;
    println!(
        "agentry host example ({kind} auth) listening on http://{}",
        running.addr
    );
    running.serve_until_signal().await
}
