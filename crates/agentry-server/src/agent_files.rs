//! Agent files (`--definitions DIR`'s `agents/*.{yaml,yml}`; docs/DEFINITIONS.md "Agent
//! files"): `agentry_definitions::agents` reads and checks them; this makes each an [`Agent`]
//! with real parts and registers it through `AppBuilder::agent`, like a compiled one (so it is
//! in `/agents`, the console, MCP and A2A). Its model is `agentry-openai`'s (the offline model
//! when it has no key); its tools are an MCP server's (`agentry_mcp::McpToolset`), a remote A2A
//! agent (`agentry_a2a::A2aToolset`), HTTP endpoints (through the definitions' outbound client,
//! under its policy) and registered workflows (run as the calling user), each with the
//! approval rule the file gives it ([`WithApproval`]) and every secret the agent reads hidden
//! from what its tools answer ([`Redacting`]). Any problem of any file stops the start, with
//! every problem found.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use agentry_agents::guardrail::{
    DenyList, Guardrail, Guardrails, JudgeGuardrail, MaxLength, PiiRedaction,
};
use agentry_agents::{
    Agent, AgentHub, Approval, Budget, FnTool, MemoryConfig, Model, OfflineModel, Tool,
    ToolContext, ToolProgress, WithApproval, WorkingMemory, WorkingMemoryScope,
};
use agentry_app::AppBuilder;
use agentry_app::definitions::CompiledDefinition;
use agentry_definitions::Problem;
use agentry_definitions::agents::{
    AgentFile, ApprovalRule, GuardrailKind, GuardrailSpec, HttpTool, McpTransport, ToolKind,
    ToolSource, WorkingMemorySpec, bearer, stdio_environment,
};
use agentry_definitions::outbound::Outbound;
use agentry_definitions::secrets::Redacted;
use agentry_engine::engine::ExecuteOptions;
use agentry_engine::{Engine, Status, UserId, WorkflowId};
use async_trait::async_trait;
use serde_json::{Value, json};

use crate::Settings;
use crate::definitions::report;

/// What building the agents needs.
struct Context<'a> {
    engine: &'a Engine,
    dir: &'a Path,
    trusted: bool,
    outbound: Arc<Outbound>,
    secrets: &'a agentry_definitions::secrets::Secrets,
    /// Every agent id a sub-agent may name: the registered agents and the files'.
    known: HashSet<String>,
    /// The folder's workflow definitions, which a workflow tool may name.
    documents: &'a [CompiledDefinition],
}

/// Reads the agent files of `dir` and registers their agents on `builder` (after the
/// workflows, which their workflow tools name). `agents` is the hub the registered agents are
/// on (an id taken there is a problem).
pub async fn register(
    builder: AppBuilder,
    engine: &Engine,
    agents: &AgentHub,
    dir: &Path,
    settings: &Settings,
    documents: &[CompiledDefinition],
) -> anyhow::Result<AppBuilder> {
    let refused = |problems: Vec<Problem>| {
        anyhow::anyhow!(
            "the agent files in {} are refused:\n{}",
            dir.display(),
            report(&problems)
        )
    };
    let files = agentry_definitions::agents::read_dir(dir).map_err(refused)?;
    if files.is_empty() {
        return Ok(builder);
    }
    let services = crate::definitions::services(settings, None)?;
    let registered: Vec<String> = agents.agents().iter().map(|a| a.id.clone()).collect();
    let cx = Context {
        engine,
        dir,
        trusted: settings.definitions_trusted,
        outbound: services.outbound.clone(),
        secrets: &services.secrets,
        known: registered
            .iter()
            .cloned()
            .chain(files.iter().map(|f| f.id.clone()))
            .collect(),
        documents,
    };
    let mut problems = Vec::new();
    let mut built = Vec::new();
    for file in &files {
        if registered.contains(&file.id) {
            problems.push(Problem::new(
                &file.file,
                "/id",
                format!(
                    "the agent {} is already registered (an example's or a host's): rename it, \
                     or start with --no-examples",
                    file.id
                ),
            ));
            continue;
        }
        match agent(file, &cx).await {
            Ok(agent) => built.push(agent),
            Err(p) => problems.extend(p),
        }
    }
    if !problems.is_empty() {
        return Err(refused(problems));
    }
    Ok(built.into_iter().fold(builder, |b, agent| {
        tracing::info!(agent = %agent.id, tools = agent.tools.len(), "registered an agent file");
        b.agent(agent)
    }))
}

/// The agent of one file, or every problem of it.
async fn agent(file: &AgentFile, cx: &Context<'_>) -> Result<Agent, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut problem =
        |pointer: &str, reason: String| problems.push(Problem::new(&file.file, pointer, reason));
    for (i, sub) in file.sub_agents.iter().enumerate() {
        if sub == &file.id || !cx.known.contains(sub) {
            problem(
                &format!("/subAgents/{i}"),
                format!("{sub} is not another registered agent"),
            );
        }
    }
    let secrets = Arc::new(file.secret_values(cx.secrets));
    let endpoint = endpoint(file, &secrets).unwrap_or_else(|reason| {
        problem("/model/key", reason);
        Endpoint::Default
    });
    let model = endpoint.model();
    let judge = model.clone().unwrap_or_else(crate::default_model);
    let mut guardrails = Guardrails::default();
    for (specs, into) in [
        (&file.guardrails.input, &mut guardrails.input),
        (&file.guardrails.output, &mut guardrails.output),
        (&file.guardrails.tool, &mut guardrails.tool),
    ] {
        for spec in specs {
            match guardrail(spec, &judge) {
                Ok(g) => into.push(g),
                Err((pointer, reason)) => problem(&pointer, reason),
            }
        }
    }
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    let mut every_tool = true;
    for source in &file.tools {
        match tools_of(source, cx, &secrets).await {
            Ok(t) => tools.extend(t),
            Err((pointer, reason)) => {
                every_tool = false;
                problem(&pointer, reason);
            }
        }
    }
    let mut names = HashSet::new();
    for t in &tools {
        if !names.insert(t.name().to_owned()) {
            problem("/tools", format!("two tools are named {}", t.name()));
        }
    }
    for (name, rule) in &file.approvals {
        match tools.iter_mut().find(|t| t.name() == name) {
            Some(t) => *t = Arc::new(WithApproval::new(t.clone(), approval(rule))),
            None if every_tool => problem(
                &format!("/approvals/{}", name.replace('~', "~0").replace('/', "~1")),
                format!("no tool of this agent is named {name}"),
            ),
            None => {}
        }
    }
    let working_memory = file.working_memory.as_ref().and_then(|spec| {
        working_memory(spec)
            .map_err(|(pointer, reason)| problem(pointer, reason))
            .ok()
    });
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut agent = Agent::new(&file.id, &file.name)
        .description(&file.description)
        .instructions(&file.instructions);
    agent.model = model;
    agent.sub_agents = file.sub_agents.clone();
    agent.memory = file.memory.map(|limit| MemoryConfig {
        default_context_limit: limit.unwrap_or(MemoryConfig::default().default_context_limit),
    });
    agent.working_memory = working_memory;
    agent.durable = file.durable;
    agent.fallback_models = endpoint.fallbacks(file);
    agent.guardrails = guardrails;
    agent.budget = Budget {
        tokens_per_run: file.budget.0,
        tokens_per_user_day: file.budget.1,
    };
    agent.tools = tools
        .into_iter()
        .map(|tool| Redacting::wrap(tool, &secrets))
        .collect();
    Ok(agent)
}

/// A file's `workingMemory` as the agents' [`WorkingMemory`], or where and why it cannot be
/// (a schema that is not a valid JSON Schema, or over the size a working memory's shape may
/// have).
fn working_memory(spec: &WorkingMemorySpec) -> Result<WorkingMemory, (&'static str, String)> {
    let scope = WorkingMemoryScope::parse(&spec.scope).ok_or((
        "/workingMemory/scope",
        format!("{:?} is not a scope (conversation or user)", spec.scope),
    ))?;
    match (&spec.schema, &spec.template) {
        (Some(schema), _) => {
            WorkingMemory::schema(scope, schema.clone()).map_err(|e| ("/workingMemory/schema", e))
        }
        (None, Some(template)) => {
            WorkingMemory::template(scope, template).map_err(|e| ("/workingMemory/template", e))
        }
        (None, None) => Err((
            "/workingMemory",
            "a working memory needs a schema or a template".to_owned(),
        )),
    }
}

/// Where an agent file's model answers.
enum Endpoint {
    /// The server's default model.
    Default,
    /// The offline model (no key for the file's endpoint).
    Offline,
    OpenAi(agentry_openai::OpenAiSettings),
}

/// The agent's endpoint: the server's default without `model`; the endpoint when it has a key,
/// or a base URL and no `key` at all (a local server); else the offline model.
fn endpoint(file: &AgentFile, secrets: &Redacted) -> Result<Endpoint, String> {
    let Some(spec) = &file.model else {
        return Ok(Endpoint::Default);
    };
    let key = spec.key(secrets)?;
    if key.is_none() && (spec.key.is_some() || spec.base_url.is_none()) {
        tracing::info!(agent = %file.id, "no key for the agent's model: the offline model serves it");
        return Ok(Endpoint::Offline);
    }
    Ok(Endpoint::OpenAi(agentry_openai::OpenAiSettings {
        api_key: key,
        base_url: spec.base_url.clone(),
        model: spec.name.clone(),
    }))
}

impl Endpoint {
    /// The agent's model (`None`: the server's default).
    fn model(&self) -> Option<Arc<dyn Model>> {
        match self {
            Endpoint::Default => None,
            Endpoint::Offline => Some(Arc::new(OfflineModel)),
            Endpoint::OpenAi(settings) => {
                Some(Arc::new(agentry_openai::OpenAiModel::new(settings.clone())))
            }
        }
    }

    /// The models `names` on the same endpoint (none on the offline model, which never fails).
    fn fallbacks(&self, file: &AgentFile) -> Vec<Arc<dyn Model>> {
        let settings = match self {
            Endpoint::OpenAi(settings) => Some(settings.clone()),
            Endpoint::Default => crate::default_model_settings(),
            Endpoint::Offline => None,
        };
        let Some(settings) = settings else {
            if !file.fallback_models.is_empty() {
                tracing::info!(agent = %file.id, "the offline model serves the agent: its fallback models are not used");
            }
            return Vec::new();
        };
        file.fallback_models
            .iter()
            .map(|name| {
                Arc::new(agentry_openai::OpenAiModel::new(
                    agentry_openai::OpenAiSettings {
                        model: name.clone(),
                        ..settings.clone()
                    },
                )) as Arc<dyn Model>
            })
            .collect()
    }
}

/// A file's guardrail as the agents' (a judge reads with `judge`, the agent's model); a deny
/// list's pattern that does not compile is refused.
fn guardrail(
    spec: &GuardrailSpec,
    judge: &Arc<dyn Model>,
) -> Result<Arc<dyn Guardrail>, (String, String)> {
    let g: Arc<dyn Guardrail> = match (&spec.kind, spec.name.clone()) {
        (GuardrailKind::MaxLength(n), name) => {
            let g = MaxLength::new(*n);
            Arc::new(match name {
                Some(name) => g.named(name),
                None => g,
            })
        }
        (GuardrailKind::DenyList(patterns), name) => {
            let g =
                DenyList::new(patterns).map_err(|e| (format!("{}/denyList", spec.pointer), e))?;
            Arc::new(match name {
                Some(name) => g.named(name),
                None => g,
            })
        }
        (GuardrailKind::PiiRedaction, name) => {
            let g = PiiRedaction::new();
            Arc::new(match name {
                Some(name) => g.named(name),
                None => g,
            })
        }
        (
            GuardrailKind::Judge {
                criteria,
                threshold,
            },
            name,
        ) => {
            let g = JudgeGuardrail::new(criteria, judge.clone()).threshold(*threshold);
            Arc::new(match name {
                Some(name) => g.named(name),
                None => g,
            })
        }
    };
    Ok(g)
}

/// A file's approval rule as the agents' [`Approval`] (its predicate fails closed).
fn approval(rule: &ApprovalRule) -> Approval {
    let predicate = rule.clone();
    let mut approval = Approval::when(move |args| predicate.applies(args));
    if let Some(d) = rule.within {
        approval = approval.within(d);
    }
    if let Some(text) = &rule.denial {
        approval = approval.denial(text);
    }
    approval
}

/// The tools one entry of `tools` gives, or where and why it cannot.
async fn tools_of(
    source: &ToolSource,
    cx: &Context<'_>,
    secrets: &Arc<Redacted>,
) -> Result<Vec<Arc<dyn Tool>>, (String, String)> {
    let at = |suffix: &str| format!("{}{suffix}", source.pointer);
    match &source.kind {
        ToolKind::Mcp { transport, only } => {
            let server = mcp_server(transport, cx, secrets).map_err(|e| (at("/mcp"), e))?;
            let set = agentry_mcp::McpToolset::connect(server)
                .await
                .map_err(|e| (at("/mcp"), e.to_string()))?;
            let tools = set.tools();
            let Some(only) = only else {
                return Ok(tools);
            };
            let mut chosen = Vec::new();
            for (i, name) in only.iter().enumerate() {
                match tools.iter().find(|t| t.name() == name) {
                    Some(t) => chosen.push(t.clone()),
                    None => {
                        let has: Vec<&str> = tools.iter().map(|t| t.name()).collect();
                        return Err((
                            at(&format!("/mcp/tools/{i}")),
                            format!("the MCP server has no tool {name} (it has {has:?})"),
                        ));
                    }
                }
            }
            Ok(chosen)
        }
        ToolKind::A2a {
            card,
            bearer: token,
        } => {
            let token = bearer(token.as_ref(), secrets).map_err(|e| (at("/a2a/bearer"), e))?;
            let set = agentry_a2a::A2aToolset::new()
                .agent(card, token)
                .map_err(|e| (at("/a2a/card"), e.to_string()))?;
            Ok(set.tools())
        }
        ToolKind::Http(http) => Ok(vec![http_tool(http, cx, secrets)]),
        ToolKind::Workflow {
            id,
            name,
            description,
        } => {
            // A compiled workflow, or one of the folder's (registered once the application is
            // built).
            let compiled = cx
                .engine
                .workflow(&id.as_str().into())
                .filter(|w| !w.is_internal());
            let workflow = compiled
                .as_deref()
                .or_else(|| {
                    cx.documents
                        .iter()
                        .map(|d| &d.workflow)
                        .find(|w| w.id() == id.as_str())
                })
                .ok_or_else(|| {
                    (
                        at("/workflow/id"),
                        format!("no workflow {id} is registered"),
                    )
                })?;
            let schema = workflow.input_schema_json();
            let parameters = if schema.get("type") == Some(&json!("object")) {
                schema
            } else {
                json!({"type": "object"})
            };
            Ok(vec![Arc::new(WorkflowTool {
                engine: cx.engine.clone(),
                workflow: id.as_str().into(),
                name: name.clone(),
                description: description.clone().unwrap_or_else(|| {
                    format!(
                        "Runs the workflow {}: {}",
                        workflow.name(),
                        workflow.purpose()
                    )
                }),
                parameters,
            })])
        }
    }
}

/// Where an entry's MCP server is: over stdio only in a trusted definitions directory (the
/// command runs in it, with the few variables `call: mcp` passes and its own `environment`).
fn mcp_server(
    transport: &McpTransport,
    cx: &Context<'_>,
    secrets: &Redacted,
) -> Result<agentry_mcp::McpServer, String> {
    Ok(match transport {
        McpTransport::Http {
            endpoint,
            bearer: token,
        } => agentry_mcp::McpServer::Http {
            url: endpoint.clone(),
            bearer: bearer(token.as_ref(), secrets)?,
        },
        McpTransport::Stdio { .. } if !cx.trusted => {
            return Err(
                "an MCP server over stdio runs a command on this host: only in a \
                        trusted definitions directory (--definitions-trusted, \
                        AGENTRY_DEFINITIONS_TRUSTED=1)"
                    .into(),
            );
        }
        McpTransport::Stdio {
            command,
            arguments,
            environment,
        } => agentry_mcp::McpServer::StdioWith {
            program: command.clone(),
            args: arguments.clone(),
            env: stdio_environment(environment, secrets)?,
            dir: Some(cx.dir.to_path_buf()),
        },
    })
}

/// An HTTP endpoint as a tool: its arguments checked against its input schema, then its
/// request sent through the outbound client.
fn http_tool(http: &HttpTool, cx: &Context<'_>, secrets: &Arc<Redacted>) -> Arc<dyn Tool> {
    let (outbound, secrets) = (cx.outbound.clone(), secrets.clone());
    let name = http.name.clone();
    let spec = Arc::new(http.clone());
    Arc::new(FnTool::new(
        &http.name,
        &http.description,
        http.input.clone(),
        move |args, ctx: ToolContext| {
            let (outbound, secrets, spec) = (outbound.clone(), secrets.clone(), spec.clone());
            let key = format!(
                "{}:{name}:{}",
                ctx.run_id.as_deref().unwrap_or(&ctx.agent_id),
                uuid::Uuid::now_v7()
            );
            async move { spec.call(&outbound, &secrets, &args, &key).await }
        },
    ))
}

/// A registered workflow as a tool: a call starts an execution with the arguments as its
/// input, for the calling user (its owner when authenticated, as if the user had started it),
/// and answers its result; a suspended execution answers its id and status, a failed one is a
/// tool error. An execution of a queued workflow waits for its turn.
struct WorkflowTool {
    engine: Engine,
    workflow: WorkflowId,
    name: String,
    description: String,
    parameters: Value,
}

#[async_trait]
impl Tool for WorkflowTool {
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
        let cancel = ctx.cancel.clone();
        let options = ExecuteOptions {
            user_id: ctx.user_id.map(UserId::from),
            owner: ctx.owner.map(UserId::from),
            context: ctx.context,
            ..ExecuteOptions::default()
        };
        let failed = |e: String| format!("the workflow {} could not run: {e}", self.workflow);
        let handle = self
            .engine
            .start(&self.workflow, args, options)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let id = handle.execution_id.clone();
        // A call given up on (the generation was cancelled) leaves the execution going on.
        let record = tokio::select! {
            r = handle.finish() => r.map_err(|e| failed(e.to_string()))?,
            _ = cancel.cancelled() => return Err(format!("cancelled; the execution {id} goes on")),
        };
        match record.state.status() {
            Status::Completed => Ok(record.state.result().cloned().unwrap_or(Value::Null)),
            Status::Error => Err(format!(
                "the workflow {} failed (execution {id}): {}",
                self.workflow,
                record.state.error().unwrap_or("no reason given")
            )),
            other => Ok(json!({"executionId": id, "status": other.as_str()})),
        }
    }
}

/// A tool of an agent file, with every secret the agent reads hidden (`***`) in what it
/// answers, its errors and its progress: what the model, the run's journal, its events and
/// the logs see.
struct Redacting {
    tool: Arc<dyn Tool>,
    secrets: Arc<Redacted>,
}

impl Redacting {
    fn wrap(tool: Arc<dyn Tool>, secrets: &Arc<Redacted>) -> Arc<dyn Tool> {
        if secrets.is_empty() {
            return tool;
        }
        Arc::new(Redacting {
            tool,
            secrets: secrets.clone(),
        })
    }
}

#[async_trait]
impl Tool for Redacting {
    fn name(&self) -> &str {
        self.tool.name()
    }

    fn description(&self) -> &str {
        self.tool.description()
    }

    fn parameters(&self) -> &Value {
        self.tool.parameters()
    }

    async fn call(&self, args: Value, mut ctx: ToolContext) -> Result<Value, String> {
        if let Some(progress) = ctx.progress.take() {
            let secrets = self.secrets.clone();
            ctx.progress = Some(ToolProgress::new(move |mut data| {
                secrets.value(&mut data);
                progress.report(data);
            }));
        }
        match self.tool.call(args, ctx).await {
            Ok(mut value) => {
                self.secrets.value(&mut value);
                Ok(value)
            }
            Err(message) => Err(self.secrets.text(&message)),
        }
    }

    fn approval(&self) -> Option<&Approval> {
        self.tool.approval()
    }
}
