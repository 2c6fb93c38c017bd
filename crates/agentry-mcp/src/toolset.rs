//! The tools of an MCP server as tools of agentry's agents: [`McpToolset::connect`] reaches a
//! server (Streamable HTTP, or a program speaking MCP on its standard input and output), lists
//! its tools with their real names, descriptions and input schemas, and [`McpToolset::tools`]
//! gives them to an agent. A call goes to the server; a server that went away, answers with an
//! error, or stays silent past [`CALL_TIMEOUT`] makes that tool call fail with a clear message
//! (which the model reads), never the agent. A lost HTTP connection is re-established at the
//! next call.

use std::sync::Arc;
use std::time::Duration;

use agentry_agents::{Tool, ToolContext};
use async_trait::async_trait;
use rmcp::model::{CallToolRequestParams, ContentBlock};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use tokio::sync::Mutex;

/// How long connecting, listing the tools or one tool call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Where an MCP server is.
#[derive(Clone)]
pub enum McpServer {
    /// Streamable HTTP at `url`, with `Authorization: Bearer <bearer>` when given.
    Http { url: String, bearer: Option<String> },
    /// A program started by agentry, speaking MCP on its standard input and output.
    Stdio { program: String, args: Vec<String> },
    /// [`McpServer::Stdio`] with only the variables of `env` (none of agentry's own), run in
    /// `dir` when given.
    StdioWith {
        program: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        dir: Option<std::path::PathBuf>,
    },
}

/// Shows where the server is, never a token or a variable's value.
impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            McpServer::Http { url, bearer } => f
                .debug_struct("Http")
                .field("url", url)
                .field("bearer", &bearer.as_ref().map(|_| "<redacted>"))
                .finish(),
            McpServer::Stdio { program, args } => f
                .debug_struct("Stdio")
                .field("program", program)
                .field("args", args)
                .finish(),
            McpServer::StdioWith {
                program, args, env, ..
            } => f
                .debug_struct("StdioWith")
                .field("program", program)
                .field("args", args)
                .field("env", &env.iter().map(|(k, _)| k).collect::<Vec<_>>())
                .finish_non_exhaustive(),
        }
    }
}

/// Why a toolset could not be had.
#[derive(Debug, thiserror::Error)]
#[error("MCP server {server}: {reason}")]
pub struct McpToolsetError {
    pub server: String,
    pub reason: String,
}

type Client = RunningService<RoleClient, ()>;

impl McpServer {
    fn describe(&self) -> String {
        match self {
            McpServer::Http { url, .. } => url.clone(),
            McpServer::Stdio { program, .. } | McpServer::StdioWith { program, .. } => {
                program.clone()
            }
        }
    }

    async fn connect(&self) -> Result<Client, String> {
        let connecting = async {
            match self {
                McpServer::Http { url, bearer } => {
                    let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                    if let Some(token) = bearer {
                        config = config.auth_header(token.clone());
                    }
                    let transport = StreamableHttpClientTransport::from_config(config);
                    ().serve(transport).await.map_err(|e| e.to_string())
                }
                McpServer::Stdio { program, args } => {
                    let mut command = tokio::process::Command::new(program);
                    command.args(args);
                    let transport = TokioChildProcess::new(command).map_err(|e| e.to_string())?;
                    ().serve(transport).await.map_err(|e| e.to_string())
                }
                McpServer::StdioWith {
                    program,
                    args,
                    env,
                    dir,
                } => {
                    let mut command = tokio::process::Command::new(program);
                    command.args(args).env_clear().envs(env.iter().cloned());
                    if let Some(dir) = dir {
                        command.current_dir(dir);
                    }
                    let transport = TokioChildProcess::new(command).map_err(|e| e.to_string())?;
                    ().serve(transport).await.map_err(|e| e.to_string())
                }
            }
        };
        tokio::time::timeout(CALL_TIMEOUT, connecting)
            .await
            .map_err(|_| format!("no answer within {}s", CALL_TIMEOUT.as_secs()))?
    }
}

/// One MCP server's tools, and the connection they share.
pub struct McpToolset {
    server: McpServer,
    client: Mutex<Option<Arc<Client>>>,
    tools: Vec<rmcp::model::Tool>,
}

impl std::fmt::Debug for McpToolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpToolset")
            .field("server", &self.server)
            .field(
                "tools",
                &self.tools.iter().map(|t| &t.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl McpToolset {
    /// Connects to `server` and lists its tools.
    pub async fn connect(server: McpServer) -> Result<Arc<Self>, McpToolsetError> {
        let failed = |reason: String| McpToolsetError {
            server: server.describe(),
            reason,
        };
        let client = server.connect().await.map_err(failed)?;
        let tools = tokio::time::timeout(CALL_TIMEOUT, client.list_all_tools())
            .await
            .map_err(|_| failed("listing its tools timed out".into()))?
            .map_err(|e| failed(format!("listing its tools: {e}")))?;
        Ok(Arc::new(Self {
            server,
            client: Mutex::new(Some(Arc::new(client))),
            tools,
        }))
    }

    /// The server's tools, for an agent (`Agent::tool` each, or `tools`).
    pub fn tools(self: &Arc<Self>) -> Vec<Arc<dyn Tool>> {
        self.tools
            .iter()
            .map(|t| {
                Arc::new(McpTool {
                    set: self.clone(),
                    name: t.name.to_string(),
                    description: t.description.as_deref().unwrap_or_default().to_owned(),
                    parameters: Value::Object(t.input_schema.as_ref().clone()),
                }) as Arc<dyn Tool>
            })
            .collect()
    }

    /// The connection, re-established if a call lost it.
    async fn client(&self) -> Result<Arc<Client>, String> {
        let mut slot = self.client.lock().await;
        if let Some(c) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let client = Arc::new(self.server.connect().await?);
        *slot = Some(client.clone());
        Ok(client)
    }

    async fn forget(&self) {
        *self.client.lock().await = None;
    }

    async fn call(&self, name: &str, args: Value) -> Result<Value, String> {
        let server = self.server.describe();
        let unavailable = |e: String| format!("MCP server {server} is unavailable: {e}");
        let client = self.client().await.map_err(unavailable)?;
        let arguments = match args {
            Value::Object(o) => o,
            Value::Null => serde_json::Map::new(),
            other => return Err(format!("arguments must be an object, not {other}")),
        };
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        let result = match tokio::time::timeout(CALL_TIMEOUT, client.call_tool(params)).await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => {
                self.forget().await;
                return Err(unavailable(e.to_string()));
            }
            Err(_) => {
                self.forget().await;
                return Err(format!(
                    "MCP server {server} did not answer {name} within {}s",
                    CALL_TIMEOUT.as_secs()
                ));
            }
        };
        let text: Vec<String> = result
            .content
            .iter()
            .filter_map(|c| match c {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            })
            .collect();
        if result.is_error == Some(true) {
            return Err(if text.is_empty() {
                format!("{name} failed on MCP server {server}")
            } else {
                text.join("\n")
            });
        }
        // Structured content when the server gave it; else one text that is a JSON document
        // (what most servers send for a dict) as that document; else the text.
        Ok(match result.structured_content {
            Some(v) => v,
            None => match text.as_slice() {
                [one] => serde_json::from_str::<Value>(one)
                    .ok()
                    .filter(|v| v.is_object() || v.is_array())
                    .unwrap_or_else(|| Value::String(one.clone())),
                _ => Value::String(text.join("\n")),
            },
        })
    }
}

/// One tool of an MCP server.
struct McpTool {
    set: Arc<McpToolset>,
    name: String,
    description: String,
    parameters: Value,
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    async fn call(&self, args: Value, ctx: ToolContext) -> Result<Value, String> {
        tokio::select! {
            r = self.set.call(&self.name, args) => r,
            _ = ctx.cancel.cancelled() => Err("cancelled".into()),
        }
    }
}
