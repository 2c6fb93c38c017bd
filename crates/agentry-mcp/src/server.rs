//! agentry as an MCP server: every registered tool under its own name, every agent as
//! `ask_<agentId>`, every workflow of the host as `run_<workflowId>` (each name made a valid MCP
//! tool name by [`tool_name`]), with descriptions and JSON Schemas from the application layer.
//! A tool that fails answers an MCP tool error (`isError`), never a broken session; an unknown
//! tool is the protocol's invalid-params error (-32602). The transport is rmcp's Streamable HTTP service ([`crate::service`]); the HTTP layer in
//! front of it authenticates the caller and hands it over as a [`McpCaller`] in the request's
//! extensions, so agents and workflows see the same user as on the HTTP routes.

use std::borrow::Cow;
use std::sync::Arc;

use agentry_app::{App, AppError, Caller, limits};
use agentry_engine::{AgentId, WorkflowId};
use rmcp::ErrorData as McpError;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The prefix of an agent's tool.
pub const ASK: &str = "ask_";
/// The prefix of a workflow's tool.
pub const RUN: &str = "run_";
/// The tool that reads an execution's state (`GET /executions/{executionId}`).
pub const GET_EXECUTION: &str = "get_execution";
/// The tool that resumes a suspended execution (`POST .../resume`).
pub const RESUME_EXECUTION: &str = "resume_execution";

/// Who calls, as the HTTP layer authenticated the request (trusted when no provider is on).
#[derive(Debug, Clone, Default)]
pub struct McpCaller(pub Caller);

/// The MCP server of one agentry application.
#[derive(Clone)]
pub struct AgentryMcp {
    app: App,
}

/// The longest tool name the MCP specification allows.
pub const MAX_TOOL_NAME: usize = 128;

/// The MCP tool name of `name` (a registered tool's name, `ask_<agentId>`, `run_<workflowId>`):
/// itself when it is 1 to [`MAX_TOOL_NAME`] characters of `A-Z a-z 0-9 _ - .`; otherwise each
/// other character becomes `_`, the whole is cut to 119 characters, and `-` and the first 8
/// hexadecimal digits of its digest (FNV-1a, `agentry_engine::id::digest`) follow. The same name
/// always gives the same tool name.
pub fn tool_name(name: &str) -> String {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if !name.is_empty() && name.len() <= MAX_TOOL_NAME && name.chars().all(allowed) {
        return name.to_owned();
    }
    let digest = agentry_engine::id::digest(name);
    let plain: String = name
        .chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .take(MAX_TOOL_NAME - 9)
        .collect();
    format!("{plain}-{}", &digest[..8])
}

/// What a tool of this server calls.
#[derive(Debug, Clone)]
enum Target {
    GetExecution,
    ResumeExecution,
    Agent(AgentId),
    Workflow(WorkflowId),
    /// A registered tool, by its own name.
    Tool(String),
}

/// One tool this server offers and what it calls.
struct Entry {
    tool: Tool,
    target: Target,
}

impl AgentryMcp {
    pub fn new(app: App) -> Self {
        Self { app }
    }

    /// Every tool this server offers, in a stable order: the execution tools, agents,
    /// workflows, then the registered tools.
    pub fn tools(&self) -> Vec<Tool> {
        self.catalogue().into_iter().map(|e| e.tool).collect()
    }

    /// The catalogue, from the application layer: its agents, the host's workflows (never an
    /// agent's internal run workflow) and the agents' tools, each under its [`tool_name`]; a
    /// name already taken by an earlier entry is left out.
    fn catalogue(&self) -> Vec<Entry> {
        let mut entries = vec![
            Entry {
                tool: Tool::new(
                    GET_EXECUTION,
                    "An execution's complete state, by its id: status, steps, result, suspension.",
                    object_schema(&json!({
                        "type": "object",
                        "properties": {
                            "executionId": {"type": "string", "description": "The execution's id."}
                        },
                        "required": ["executionId"],
                        "additionalProperties": false
                    })),
                ),
                target: Target::GetExecution,
            },
            Entry {
                tool: Tool::new(
                    RESUME_EXECUTION,
                    "Resume a suspended execution with its resume data (valid against the \
                     workflow's resume schema); answers like run_<workflowId>.",
                    object_schema(&json!({
                        "type": "object",
                        "properties": {
                            "workflowId": {"type": "string", "description": "The execution's workflow."},
                            "executionId": {"type": "string", "description": "The execution's id."},
                            "resumeData": {"description": "Handed to the resumed step."},
                            "stepId": {"type": "string", "description": "The step to resume from (default: the suspended one)."}
                        },
                        "required": ["workflowId", "executionId"],
                        "additionalProperties": false
                    })),
                ),
                target: Target::ResumeExecution,
            },
        ];
        for agent in self.app.agent_summaries() {
            let description = format!(
                "Ask the agent {} ({}): {} Answers with its text; a conversationId keeps its \
                 memory between calls.",
                agent.id, agent.name, agent.description
            );
            entries.push(Entry {
                tool: Tool::new(
                    tool_name(&format!("{ASK}{}", agent.id)),
                    description,
                    object_schema(&json!({
                        "type": "object",
                        "properties": {
                            "input": {"type": "string", "description": "What to ask.", "maxLength": limits::MAX_MESSAGE_CHARS},
                            "conversationId": {"type": "string", "description": "Continues a conversation (the agent's memory)."}
                        },
                        "required": ["input"],
                        "additionalProperties": false
                    })),
                ),
                target: Target::Agent(AgentId::from(agent.id)),
            });
        }
        for wf in self.app.host_workflows() {
            let description = format!(
                "Run the workflow {} ({}): {} Answers with its result when it completes, or with \
                 its execution id and what a resume needs when it suspends.",
                wf.id(),
                wf.name(),
                wf.purpose()
            );
            entries.push(Entry {
                tool: Tool::new(
                    tool_name(&format!("{RUN}{}", wf.id())),
                    description,
                    object_schema(&wf.input_schema_json()),
                ),
                target: Target::Workflow(WorkflowId::from(wf.id())),
            });
        }
        for (_, t) in self.app.tools() {
            entries.push(Entry {
                tool: Tool::new(
                    tool_name(t.name()),
                    t.description().to_owned(),
                    object_schema(t.parameters()),
                ),
                target: Target::Tool(t.name().to_owned()),
            });
        }
        let mut seen = std::collections::HashSet::new();
        entries.retain(|e| seen.insert(e.tool.name.clone()));
        entries
    }

    /// Calls tool `name`; an unknown name is the protocol's invalid-params error (no tool
    /// result: there is no tool to report it).
    async fn call(
        &self,
        name: &str,
        args: Value,
        caller: Caller,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, McpError> {
        let target = self
            .catalogue()
            .into_iter()
            .find(|e| e.tool.name == name)
            .map(|e| e.target)
            .ok_or_else(|| McpError::invalid_params(format!("Unknown tool: {name}"), None))?;
        let outcome = match target {
            Target::Agent(agent) => self.ask(&agent, args, &caller, cancel).await,
            Target::Workflow(workflow) => self.run(&workflow, args, &caller, cancel).await,
            Target::GetExecution => self.execution(args, &caller).await,
            Target::ResumeExecution => self.resume(args, &caller, cancel).await,
            Target::Tool(tool) => self
                .app
                .call_tool(&caller, &tool, args, cancel)
                .await
                .map(structured),
        };
        Ok(outcome.unwrap_or_else(tool_error))
    }

    async fn ask(
        &self,
        agent: &AgentId,
        args: Value,
        caller: &Caller,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, AppError> {
        let input = args
            .get("input")
            .and_then(Value::as_str)
            .ok_or_else(|| AppError::bad_request("input is required: the question, as a string"))?;
        let conversation_id = optional_string_arg(&args, "conversationId")?;
        let conversation = conversation_id.map(|c| ("conversationId", c));
        let generation = self.app.question(caller, agent, input, conversation)?;
        let answer = self.app.text(caller, agent, generation, cancel).await?;
        if answer.run_id.is_none() {
            return Ok(CallToolResult::success(vec![ContentBlock::text(
                answer.result.text,
            )]));
        }
        // A durable run: its text, or, while a tool call waits for a person's approval, the
        // pending requests and the route that answers each (structured: the run's answer with
        // `approvalRoutes`).
        let links = self.app.approval_links(agent, &answer);
        let text = if links.is_empty() {
            answer.result.text.clone()
        } else {
            let pending: Vec<String> = links
                .iter()
                .map(|l| format!("{} {} with {}", l.method, l.path, l.body))
                .collect();
            format!(
                "Run {} waits for a person's approval of a tool call; answer with {}.",
                answer.run_id.as_deref().unwrap_or_default(),
                pending.join("; ")
            )
        };
        let mut structured = serde_json::to_value(&answer).expect("a run's answer serializes");
        structured["approvalRoutes"] = serde_json::to_value(&links).expect("links serialize");
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        result.structured_content = Some(structured);
        Ok(result)
    }

    async fn execution(&self, args: Value, caller: &Caller) -> Result<CallToolResult, AppError> {
        let id = string_arg(&args, "executionId")?;
        let state = self.app.find(caller, &id.into()).await?;
        Ok(structured(
            serde_json::to_value(state).expect("a state serializes"),
        ))
    }

    async fn resume(
        &self,
        args: Value,
        caller: &Caller,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, AppError> {
        let workflow = string_arg(&args, "workflowId")?.into();
        let execution = string_arg(&args, "executionId")?.into();
        let step_id = optional_string_arg(&args, "stepId")?;
        let data = args.get("resumeData").cloned().unwrap_or(Value::Null);
        let handle = self
            .app
            .resume(caller, &workflow, &execution, data, step_id)
            .await?;
        self.answer(&workflow, handle, cancel).await
    }

    async fn run(
        &self,
        workflow: &WorkflowId,
        args: Value,
        caller: &Caller,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, AppError> {
        let handle = self
            .app
            .start(caller, workflow, args, Default::default())
            .await?;
        self.answer(workflow, handle, cancel).await
    }

    /// A run's answer once it stops (or the client stops waiting: the execution goes on).
    async fn answer(
        &self,
        workflow: &WorkflowId,
        handle: agentry_engine::RunHandle,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, AppError> {
        let id = handle.execution_id.clone();
        // A client that goes away stops waiting, not the execution: it is durable.
        let result = tokio::select! {
            r = self.app.outcome(handle) => r?,
            _ = cancel.cancelled() => return Err(AppError::new(
                agentry_app::Code::ClientClosedRequest,
                format!("Cancelled while waiting; execution {id} goes on"),
            ).about(id)),
        };
        let answer = self.app.run_answer(workflow, result);
        Ok(structured(
            serde_json::to_value(answer).expect("a run's answer serializes"),
        ))
    }
}

/// A required string argument of a tool.
fn string_arg(args: &Value, name: &str) -> Result<String, AppError> {
    args.get(name)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| AppError::bad_request(format!("{name} is required, as a string")))
}

/// An optional string argument of a tool (`null` is absent).
fn optional_string_arg(args: &Value, name: &str) -> Result<Option<String>, AppError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(AppError::bad_request(format!("{name} must be a string"))),
    }
}

/// A failure as an MCP tool error: the message as its text, and `{error, code}` (the error
/// table's row, as the HTTP failure envelope has it; `executionId` when it names one) as its
/// structured content.
fn tool_error(e: AppError) -> CallToolResult {
    let failure = agentry_app::wire::ToolFailure::from(&e);
    let mut r = CallToolResult::error(vec![ContentBlock::text(e.message)]);
    r.structured_content = Some(serde_json::to_value(failure).expect("a tool failure serializes"));
    r
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
            .unwrap_or_default()
            .0;
        let args = Value::Object(request.arguments.unwrap_or_default());
        let name: Cow<'_, str> = request.name;
        Ok(self
            .call(&name, args, caller, context.ct.clone())
            .await?
            .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_name_stays_and_any_other_gets_a_stable_valid_one() {
        assert_eq!(tool_name("run_word-count"), "run_word-count");
        assert_eq!(tool_name("v1.2_x"), "v1.2_x");
        let odd = tool_name("stock price/lookup");
        assert_eq!(odd, tool_name("stock price/lookup"), "stable");
        assert!(odd.starts_with("stock_price_lookup-"), "{odd}");
        assert_eq!(odd.len(), "stock_price_lookup-".len() + 8);
        // The same characters kept, another name: another tool name.
        assert_ne!(odd, tool_name("stock price:lookup"));
        let long = tool_name(&format!("run_{}", "w".repeat(128)));
        assert_eq!(long.len(), MAX_TOOL_NAME);
        for name in [odd, long, tool_name("ünïcode"), tool_name("")] {
            assert!(
                !name.is_empty()
                    && name.len() <= MAX_TOOL_NAME
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')),
                "{name}"
            );
        }
    }
}
