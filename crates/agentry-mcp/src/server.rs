//! agentry as an MCP server: every registered tool under its own name, every agent as
//! `ask_<agentId>`, every workflow as `run_<workflowId>`, with descriptions and JSON Schemas from
//! the registry. A tool that fails answers an MCP tool error (`isError`), never a broken
//! session. The transport is rmcp's Streamable HTTP service ([`crate::service`]); the HTTP layer in
//! front of it authenticates the caller and hands it over as a [`McpCaller`] in the request's
//! extensions, so agents and workflows see the same user as on the HTTP routes.

use std::borrow::Cow;
use std::sync::Arc;

use agentry_core::agent::runtime::{Caller, GenerateOptions};
use agentry_core::agent::{AgentHub, Message, Tool as AgentTool, ToolContext};
use agentry_core::{Engine, ExecuteOptions, ExecutionRecord, ExecutionState};
use rmcp::ErrorData as McpError;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

/// The prefix of an agent's tool.
pub const ASK: &str = "ask_";
/// The prefix of a workflow's tool.
pub const RUN: &str = "run_";

/// Who calls, as the HTTP layer authenticated the request (none when no provider is on).
#[derive(Debug, Clone, Default)]
pub struct McpCaller {
    /// The authenticated user object (`context.user` for agents and workflows).
    pub user: Option<Value>,
    /// Its id (`userId`, the owner of what it starts).
    pub user_id: Option<String>,
    /// Whose conversation memory `ask_*` reads.
    pub caller: Caller,
}

impl McpCaller {
    /// The context map agents and workflows see: `user` and `userId` when authenticated.
    fn context(&self) -> Map<String, Value> {
        let mut context = Map::new();
        if let Some(user) = &self.user {
            context.insert("user".into(), user.clone());
        }
        if let Some(id) = &self.user_id {
            context.insert("userId".into(), Value::String(id.clone()));
        }
        context
    }
}

/// The MCP server of one agentry: its engine and agents.
#[derive(Clone)]
pub struct AgentryMcp {
    engine: Engine,
    agents: AgentHub,
}

impl AgentryMcp {
    pub fn new(engine: Engine, agents: AgentHub) -> Self {
        Self { engine, agents }
    }

    /// The agents' tools, each once (the first agent that has it lends its context).
    fn registered_tools(&self) -> Vec<(String, Arc<dyn AgentTool>)> {
        let mut tools: Vec<(String, Arc<dyn AgentTool>)> = Vec::new();
        for agent in self.agents.agents() {
            for tool in &agent.tools {
                if !tools.iter().any(|(_, t)| t.name() == tool.name()) {
                    tools.push((agent.id.clone(), tool.clone()));
                }
            }
        }
        tools
    }

    /// Every tool this server offers, in a stable order: tools, agents, workflows.
    pub fn tools(&self) -> Vec<Tool> {
        let mut out: Vec<Tool> = self
            .registered_tools()
            .into_iter()
            .map(|(_, t)| {
                Tool::new(
                    t.name().to_owned(),
                    t.description().to_owned(),
                    object_schema(t.parameters()),
                )
            })
            .collect();
        for agent in self.agents.agents() {
            let description = format!(
                "Ask the agent {} ({}): {} Answers with its text; a conversationId keeps its \
                 memory between calls.",
                agent.id, agent.name, agent.description
            );
            out.push(Tool::new(
                format!("{ASK}{}", agent.id),
                description,
                object_schema(&json!({
                    "type": "object",
                    "properties": {
                        "input": {"type": "string", "description": "What to ask.", "maxLength": 100_000},
                        "conversationId": {"type": "string", "description": "Continues a conversation (the agent's memory)."}
                    },
                    "required": ["input"],
                    "additionalProperties": false
                })),
            ));
        }
        for wf in self.engine.workflows() {
            let description = format!(
                "Run the workflow {} ({}): {} Answers with its result when it completes, or with \
                 its execution id and what a resume needs when it suspends.",
                wf.id(),
                wf.name(),
                wf.purpose()
            );
            out.push(Tool::new(
                format!("{RUN}{}", wf.id()),
                description,
                object_schema(&wf.input_schema_json()),
            ));
        }
        out
    }

    async fn call(
        &self,
        name: &str,
        args: Value,
        caller: McpCaller,
        cancel: CancellationToken,
    ) -> CallToolResult {
        let outcome = if let Some(agent) = name
            .strip_prefix(ASK)
            .filter(|a| self.agents.agent(a).is_some())
        {
            self.ask(agent, args, &caller, cancel).await
        } else if let Some(workflow) = name
            .strip_prefix(RUN)
            .filter(|w| self.engine.workflow(w).is_some())
        {
            self.run(workflow, args, &caller, cancel).await
        } else if let Some((agent, tool)) = self
            .registered_tools()
            .into_iter()
            .find(|(_, t)| t.name() == name)
        {
            let ctx = ToolContext {
                agent_id: agent,
                user_id: caller.user_id.clone(),
                conversation_id: None,
                context: caller.context(),
                cancel,
                depth: 0,
            };
            tool.call(args, ctx).await.map(structured)
        } else {
            Err(format!("Unknown tool {name}"))
        };
        outcome.unwrap_or_else(|message| CallToolResult::error(vec![ContentBlock::text(message)]))
    }

    async fn ask(
        &self,
        agent: &str,
        args: Value,
        caller: &McpCaller,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, String> {
        let input = args
            .get("input")
            .and_then(Value::as_str)
            .ok_or("input is required: the question, as a string")?;
        let conversation_id = match args.get("conversationId") {
            None | Some(Value::Null) => None,
            Some(Value::String(c)) => Some(c.clone()),
            Some(_) => return Err("conversationId must be a string".into()),
        };
        let opts = GenerateOptions {
            user_id: caller.user_id.clone(),
            conversation_id,
            context: caller.context(),
            caller: caller.caller.clone(),
            ..GenerateOptions::default()
        };
        let result = self
            .agents
            .generate_text(agent, vec![Message::user(input)], opts, cancel)
            .await
            .map_err(|e| e.to_string())?;
        Ok(CallToolResult::success(vec![ContentBlock::text(
            result.text,
        )]))
    }

    async fn run(
        &self,
        workflow: &str,
        args: Value,
        caller: &McpCaller,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, String> {
        let opts = ExecuteOptions {
            user_id: caller.user_id.clone(),
            context: caller.context(),
            owner: caller.user_id.clone().filter(|_| caller.user.is_some()),
            ..ExecuteOptions::default()
        };
        let handle = self
            .engine
            .start(workflow, args, opts)
            .await
            .map_err(|e| e.to_string())?;
        let id = handle.execution_id.clone();
        // A client that goes away stops waiting, not the execution: it is durable.
        let rec = tokio::select! {
            r = handle.finish_for_client() => r.map_err(|e| e.to_string())?,
            _ = cancel.cancelled() => return Err(format!("Cancelled while waiting; execution {id} goes on")),
        };
        self.outcome(workflow, &rec)
    }

    /// A finished run as the tool's answer: the result, the suspended form, or a tool error.
    fn outcome(&self, workflow: &str, rec: &ExecutionRecord) -> Result<CallToolResult, String> {
        match &rec.state {
            ExecutionState::Completed { result, .. } => Ok(structured(json!({
                "executionId": rec.id,
                "status": "completed",
                "result": result,
            }))),
            ExecutionState::Suspended(s) => {
                let resume_schema = self
                    .engine
                    .workflow(workflow)
                    .and_then(|w| w.resume_schema_json().cloned());
                Ok(structured(json!({
                    "executionId": rec.id,
                    "status": "suspended",
                    "suspension": {
                        "reason": s.reason,
                        "stepId": s.step_id,
                        "suspendData": s.data,
                        "deadline": s.deadline.map(|d| d.to_rfc3339()),
                    },
                    "resume": {
                        "method": "POST",
                        "path": format!("/workflows/{workflow}/executions/{}/resume", rec.id),
                        "body": {"resumeData": "<an instance of resumeSchema>"},
                        "resumeSchema": resume_schema,
                    },
                })))
            }
            ExecutionState::Error { message, .. } => {
                Err(format!("Execution {} failed: {message}", rec.id))
            }
            other => Err(format!(
                "Execution {} ended {}",
                rec.id,
                other.status().as_str()
            )),
        }
    }
}

/// A JSON value as a tool's answer: its JSON as text, and as structured content when an object.
fn structured(v: Value) -> CallToolResult {
    let text = serde_json::to_string(&v).unwrap_or_default();
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    if v.is_object() {
        r.structured_content = Some(v);
    }
    r
}

/// A JSON Schema as MCP wants a tool's input schema: an object schema (anything else is wrapped
/// as an object with no declared properties).
fn object_schema(schema: &Value) -> Arc<JsonObject> {
    match schema {
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("object") => {
            Arc::new(o.clone())
        }
        _ => {
            let mut o = JsonObject::new();
            o.insert("type".into(), json!("object"));
            Arc::new(o)
        }
    }
}

impl ServerHandler for AgentryMcp {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("agentry", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "agentry's agents (ask_<agentId>), workflows (run_<workflowId>) and tools.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caller = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<McpCaller>())
            .cloned()
            .unwrap_or_default();
        let args = Value::Object(request.arguments.unwrap_or_default());
        let name: Cow<'_, str> = request.name;
        Ok(self
            .call(&name, args, caller, context.ct.clone())
            .await
            .into())
    }
}
