//! Agent files: `DIR/agents/*.{yaml,yml}`, each one agent as data (docs/DEFINITIONS.md "Agent
//! files"). This module reads and checks them (the shape in `schema/agent.rs`, then the rules
//! below: ids, expressions, durations, tool names, approvals) and runs what needs no other
//! agentry crate: an HTTP tool's request under the outbound policy ([`HttpTool::call`]), an
//! approval rule's predicate ([`ApprovalRule::applies`]), the values read from `$secrets`.
//! `agentry-server` makes the agents of them (models, MCP and A2A toolsets, workflow tools).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::expr::{self, Expr, Template};
use crate::load::{MAX_FILES, parse, read_text};
use crate::outbound::{Outbound, Request, scalar};
use crate::problem::Problem;
use crate::secrets::{self, Redacted};

/// The variables an agent file's expressions may read.
const VARS: &[&str] = &["secrets"];

/// One agent file, read and checked.
#[derive(Debug)]
pub struct AgentFile {
    /// The file, relative to the definitions directory (`agents/desk.yaml`).
    pub file: String,
    pub id: String,
    pub name: String,
    pub description: String,
    pub instructions: String,
    /// `None`: the server's default model.
    pub model: Option<ModelSpec>,
    pub sub_agents: Vec<String>,
    /// `memory.contextLimit`; `None` without `memory` (no conversation memory).
    pub memory: Option<Option<usize>>,
    /// `workingMemory`; `None` without it.
    pub working_memory: Option<WorkingMemorySpec>,
    pub durable: bool,
    /// The secrets it reads (`$secrets.<name>`).
    pub secrets: Vec<String>,
    pub tools: Vec<ToolSource>,
    /// Tool name and its rule.
    pub approvals: Vec<(String, ApprovalRule)>,
    /// Its guardrails, by where they stand.
    pub guardrails: GuardrailSpecs,
    /// Models of its model's endpoint tried in order when the model fails with a retryable
    /// error.
    pub fallback_models: Vec<String>,
    /// `budget.tokensPerRun` and `budget.tokensPerUserDay`.
    pub budget: (Option<u64>, Option<u64>),
}

/// An agent file's guardrails, by where they stand, in order.
#[derive(Debug, Default)]
pub struct GuardrailSpecs {
    pub input: Vec<GuardrailSpec>,
    pub output: Vec<GuardrailSpec>,
    pub tool: Vec<GuardrailSpec>,
}

/// One guardrail of an agent file: its name (`None`: the built-in's) and kind.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardrailSpec {
    pub name: Option<String>,
    pub kind: GuardrailKind,
    /// Where it is in the file (a refusal of its patterns names it).
    pub pointer: String,
}

/// The built-in guardrails an agent file may declare.
#[derive(Debug, Clone, PartialEq)]
pub enum GuardrailKind {
    /// Trips on a text longer than this many characters.
    MaxLength(usize),
    /// Trips on a text that matches any of these patterns (regular expressions).
    DenyList(Vec<String>),
    /// Redacts e-mail addresses, phone and card numbers.
    PiiRedaction,
    /// A judge (the agent's model) scores the text against `criteria`; under `threshold`, it
    /// trips.
    Judge { criteria: String, threshold: f64 },
}

impl AgentFile {
    /// Its `$secrets`: those of its declared secrets that are set, and what hides them.
    pub fn secret_values(&self, secrets: &secrets::Secrets) -> Redacted {
        secrets.available(&self.secrets)
    }
}

/// An agent's `workingMemory`: what it keeps up to date about a user or a conversation, as
/// JSON valid against `schema` or as Markdown text in `template`'s shape (exactly one is
/// given). The schema's validity and the bounds are checked where the agent is built.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkingMemorySpec {
    /// `conversation` or `user`.
    pub scope: String,
    pub schema: Option<Value>,
    pub template: Option<String>,
}

/// The model of an agent: an OpenAI-compatible endpoint.
#[derive(Debug)]
pub struct ModelSpec {
    pub name: String,
    /// `None`: OpenAI's.
    pub base_url: Option<String>,
    /// The key's template (`${ $secrets.openaiKey }`); `None`: none given.
    pub key: Option<Template>,
}

impl ModelSpec {
    /// The key, rendered with `$secrets`: `Ok(None)` when it is not given or renders to null
    /// or an empty string (a secret that is not set).
    pub fn key(&self, secrets: &Redacted) -> Result<Option<String>, String> {
        match &self.key {
            Some(t) => render(t, &Value::Null, secrets),
            None => Ok(None),
        }
    }
}

/// Where some of an agent's tools come from, and where in its file that is said.
#[derive(Debug)]
pub struct ToolSource {
    /// The JSON pointer of the entry (`/tools/0`).
    pub pointer: String,
    pub kind: ToolKind,
}

#[derive(Debug)]
pub enum ToolKind {
    /// The tools of an MCP server (only those named, when `only` says).
    Mcp {
        transport: McpTransport,
        only: Option<Vec<String>>,
    },
    /// A remote A2A agent, the tool `ask_<its id>`.
    A2a {
        card: String,
        bearer: Option<Template>,
    },
    /// An HTTP endpoint.
    Http(HttpTool),
    /// A registered workflow, run as the calling user.
    Workflow {
        id: String,
        /// The tool's name (default `run_<id>`, `-` as `_`).
        name: String,
        description: Option<String>,
    },
}

#[derive(Debug)]
pub enum McpTransport {
    Http {
        endpoint: String,
        bearer: Option<Template>,
    },
    /// A command run by the server (only in a trusted definitions directory), in the
    /// definitions directory, with only the variables of `environment` and a few of the server's.
    Stdio {
        command: String,
        arguments: Vec<String>,
        environment: Vec<(String, Template)>,
    },
}

/// The environment of an MCP server's command: the few variables of the server's that
/// `call: mcp` passes too (`PATH`, `HOME`, ...), then `environment` rendered with `$secrets`
/// (a variable whose secret is not set is refused).
pub fn stdio_environment(
    environment: &[(String, Template)],
    secrets: &Redacted,
) -> Result<Vec<(String, String)>, String> {
    let mut env: Vec<(String, String)> = crate::protocols::PASSED_ENV
        .iter()
        .filter_map(|name| Some((name.to_string(), std::env::var(name).ok()?)))
        .collect();
    for (name, t) in environment {
        let value = render(t, &Value::Null, secrets)
            .map_err(|e| format!("the variable {name}: {e}"))?
            .ok_or_else(|| format!("the variable {name} has no value (is its secret set?)"))?;
        env.push((name.clone(), value));
    }
    Ok(env)
}

/// A token's template rendered with `$secrets` (`None`: none given).
pub fn bearer(token: Option<&Template>, secrets: &Redacted) -> Result<Option<String>, String> {
    match token {
        None => Ok(None),
        Some(t) => render(t, &Value::Null, secrets)?
            .map(Some)
            .ok_or_else(|| "the bearer token has no value (is its secret set?)".to_owned()),
    }
}

/// When a tool's call waits for a person's approval.
#[derive(Debug, Clone)]
pub struct ApprovalRule {
    /// `None`: every call.
    pub when: Option<Expr>,
    /// After this long without an answer, the request counts as denied.
    pub within: Option<Duration>,
    /// What the model is told before a denial's reason.
    pub denial: Option<String>,
}

impl ApprovalRule {
    /// Whether a call with `args` waits for approval. A predicate that fails (an error, or
    /// anything but a boolean) counts as "needs approval": the rule fails closed.
    pub fn applies(&self, args: &Value) -> bool {
        match &self.when {
            None => true,
            Some(e) => e.eval_bool(args, &[]).unwrap_or(true),
        }
    }
}

/// An HTTP endpoint as a tool: its arguments (checked against `input`) fill the request.
#[derive(Debug, Clone)]
pub struct HttpTool {
    pub name: String,
    pub description: String,
    /// The JSON Schema of its arguments.
    pub input: Value,
    method: String,
    /// A URI template (`{city}` from the arguments) or an expression.
    endpoint: Endpoint,
    headers: Vec<(String, Template)>,
    query: Vec<(String, Template)>,
    body: Option<Template>,
}

#[derive(Debug, Clone)]
enum Endpoint {
    UriTemplate(String),
    Expression(Expr),
}

impl HttpTool {
    /// Sends the request for `args` (`.` in its expressions; `$secrets` too) through the
    /// outbound client (its policy, time-out and size limit): the response's content (JSON, or
    /// text), or why not. `key` is its `Idempotency-Key`.
    pub async fn call(
        &self,
        outbound: &Outbound,
        secrets: &Redacted,
        args: &Value,
        key: &str,
    ) -> Result<Value, String> {
        let vars = [("secrets", &secrets.values)];
        let uri = match &self.endpoint {
            Endpoint::UriTemplate(t) => expr::expand_uri_template(t, args)?,
            Endpoint::Expression(e) => match e.eval(args, &vars).map_err(|e| e.to_string())? {
                Value::String(s) => s,
                other => return Err(format!("the endpoint is not a string: {other}")),
            },
        };
        let mut request = Request::new(&self.method, &uri).map_err(|e| e.message())?;
        for (list, into) in [
            (&self.headers, &mut request.headers),
            (&self.query, &mut request.query),
        ] {
            for (name, t) in list {
                match render(t, args, secrets)? {
                    Some(v) => into.push((name.clone(), v)),
                    None => return Err(format!("{name} has no value (is its secret set?)")),
                }
            }
        }
        if let Some(b) = &self.body {
            request.body = Some(b.eval(args, &vars).map_err(|e| e.to_string())?);
        }
        outbound.send(request, key).await.map_err(|e| e.message())
    }
}

/// A template rendered to a string: `None` for null or an empty string; a number or a boolean
/// as its JSON text; anything else is refused.
fn render(t: &Template, input: &Value, secrets: &Redacted) -> Result<Option<String>, String> {
    match t
        .eval(input, &[("secrets", &secrets.values)])
        .map_err(|e| e.to_string())?
    {
        Value::Null => Ok(None),
        Value::String(s) if s.is_empty() => Ok(None),
        v @ (Value::String(_) | Value::Number(_) | Value::Bool(_)) => Ok(Some(scalar(&v))),
        other => Err(format!(
            "a {} where a string is expected",
            match other {
                Value::Array(_) => "list",
                _ => "object",
            }
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// Reading.

/// The agent files of `dir` (`dir/agents/*.{yaml,yml}`, sorted; none without that folder).
fn files(dir: &Path) -> Result<Vec<PathBuf>, Vec<Problem>> {
    let root = dir.join("agents");
    let entries = match std::fs::read_dir(&root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(vec![Problem::new(
                root.display().to_string(),
                "",
                e.to_string(),
            )]);
        }
    };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| e == "yaml" || e == "yml")
        })
        .take(MAX_FILES + 1)
        .collect();
    if found.len() > MAX_FILES {
        return Err(vec![Problem::new(
            root.display().to_string(),
            "",
            format!("more than {MAX_FILES} agent files"),
        )]);
    }
    found.sort();
    Ok(found)
}

/// Reads every agent file of `dir`. Any problem refuses them all; an id defined twice is a
/// problem naming both files.
pub fn read_dir(dir: &Path) -> Result<Vec<AgentFile>, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut agents = Vec::new();
    let mut seen: HashMap<String, String> = HashMap::new();
    for path in files(dir)? {
        let name = path
            .strip_prefix(dir)
            .unwrap_or(&path)
            .display()
            .to_string();
        let read = read_text(&path, &name)
            .and_then(|text| parse(&name, &text, false).map_err(|p| vec![p]))
            .and_then(|source| read(&name, &source));
        match read {
            Ok(agent) => {
                if let Some(first) = seen.insert(agent.id.clone(), name.clone()) {
                    problems.push(Problem::new(
                        &name,
                        "/id",
                        format!("the agent {} is also defined in {first}", agent.id),
                    ));
                }
                agents.push(agent);
            }
            Err(p) => problems.extend(p),
        }
    }
    if problems.is_empty() {
        Ok(agents)
    } else {
        Err(problems)
    }
}

/// Reads one agent file's document (`file` names it): its shape, then agentry's rules.
pub fn read(file: &str, source: &Value) -> Result<AgentFile, Vec<Problem>> {
    let problems = crate::schema::agent::check(file, source);
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut r = Reader {
        file,
        problems: Vec::new(),
    };
    let agent = r.agent(source);
    if r.problems.is_empty() {
        Ok(agent)
    } else {
        Err(r.problems)
    }
}

/// Whether `name` can name a tool (what model providers accept).
fn is_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The default name of the tool that runs the workflow `id`.
fn workflow_tool_name(id: &str) -> String {
    format!(
        "run_{}",
        id.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
    )
}

/// Reads a document whose shape is right, collecting the problems of agentry's rules.
struct Reader<'a> {
    file: &'a str,
    problems: Vec<Problem>,
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn entries<'v>(v: &'v Value, key: &str) -> impl Iterator<Item = (&'v String, &'v Value)> {
    v.get(key).and_then(Value::as_object).into_iter().flatten()
}

fn child(at: &str, key: &str) -> String {
    format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"))
}

impl Reader<'_> {
    fn problem(&mut self, pointer: impl Into<String>, reason: impl Into<String>) {
        self.problems.push(Problem::new(self.file, pointer, reason));
    }

    fn agent(&mut self, doc: &Value) -> AgentFile {
        let id = text(doc, "id").unwrap_or_default();
        if !agentry_engine::id::is_valid_id(&id) {
            self.problem(
                "/id",
                format!("{id:?} is not an agent id (letters, digits, `-`, `_` and `.`)"),
            );
        }
        let secrets = strings(doc, "secrets");
        for (i, name) in secrets.iter().enumerate() {
            if !secrets::is_name(name) {
                self.problem(
                    format!("/secrets/{i}"),
                    format!("{name:?} is not a secret name"),
                );
            }
        }
        let model = doc.get("model").map(|m| ModelSpec {
            name: text(m, "name").unwrap_or_default(),
            base_url: text(m, "baseUrl"),
            key: m.get("key").and_then(|k| self.template(k, "/model/key")),
        });
        let tools: Vec<ToolSource> = doc
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .filter_map(|(i, t)| self.tool(t, &format!("/tools/{i}")))
            .collect();
        let approvals: Vec<(String, ApprovalRule)> = entries(doc, "approvals")
            .map(|(name, rule)| {
                (
                    name.clone(),
                    self.approval(rule, &child("/approvals", name)),
                )
            })
            .collect();
        self.names(&tools, &approvals);
        if let Some(schema) = doc.pointer("/workingMemory/schema")
            && let Err(e) = agentry_engine::schema::Schema::compile(schema.clone())
        {
            self.problem("/workingMemory/schema", e.to_string());
        }
        AgentFile {
            file: self.file.to_owned(),
            name: text(doc, "name").unwrap_or_else(|| id.clone()),
            id,
            description: text(doc, "description").unwrap_or_default(),
            instructions: text(doc, "instructions").unwrap_or_default(),
            model,
            sub_agents: strings(doc, "subAgents"),
            memory: doc.get("memory").map(|m| {
                m.get("contextLimit")
                    .and_then(Value::as_u64)
                    .map(|n| n as usize)
            }),
            working_memory: doc.get("workingMemory").map(|w| WorkingMemorySpec {
                scope: text(w, "scope").unwrap_or_default(),
                schema: w.get("schema").cloned(),
                template: text(w, "template"),
            }),
            durable: doc.get("durable").and_then(Value::as_bool).unwrap_or(true),
            secrets,
            tools,
            approvals,
            guardrails: GuardrailSpecs {
                input: self.guardrails(doc, "input"),
                output: self.guardrails(doc, "output"),
                tool: self.guardrails(doc, "tool"),
            },
            fallback_models: strings(doc, "fallbackModels"),
            budget: (
                doc.pointer("/budget/tokensPerRun").and_then(Value::as_u64),
                doc.pointer("/budget/tokensPerUserDay")
                    .and_then(Value::as_u64),
            ),
        }
    }

    /// The guardrails of `guardrails.<point>`.
    fn guardrails(&mut self, doc: &Value, point: &str) -> Vec<GuardrailSpec> {
        let list = doc
            .get("guardrails")
            .and_then(|g| g.get(point))
            .and_then(Value::as_array);
        let mut out = Vec::new();
        for (i, g) in list.into_iter().flatten().enumerate() {
            let pointer = format!("/guardrails/{point}/{i}");
            let kind = if let Some(n) = g.get("maxLength").and_then(Value::as_u64) {
                GuardrailKind::MaxLength(usize::try_from(n).unwrap_or(usize::MAX))
            } else if g.get("denyList").is_some() {
                GuardrailKind::DenyList(strings(g, "denyList"))
            } else if g.get("piiRedaction").is_some() {
                if g.get("piiRedaction") != Some(&Value::Bool(true)) {
                    self.problem(
                        format!("{pointer}/piiRedaction"),
                        "`piiRedaction` is `true` (leave the guardrail out to have none)",
                    );
                }
                GuardrailKind::PiiRedaction
            } else if let Some(j) = g.get("judge") {
                let threshold = match j.get("threshold") {
                    None => 0.5,
                    Some(t) => match t.as_f64().filter(|t| (0.0..=1.0).contains(t)) {
                        Some(t) => t,
                        None => {
                            self.problem(
                                format!("{pointer}/judge/threshold"),
                                "`threshold` is a number from 0 to 1",
                            );
                            0.5
                        }
                    },
                };
                GuardrailKind::Judge {
                    criteria: text(j, "criteria").unwrap_or_default(),
                    threshold,
                }
            } else {
                // The shape's problem (exactly one kind) is reported already.
                continue;
            };
            out.push(GuardrailSpec {
                name: text(g, "name"),
                kind,
                pointer,
            });
        }
        out
    }

    /// Checks the tool names known without reaching a server (HTTP and workflow tools): each
    /// valid and given once; and, when every name is known so, that each approval names one.
    fn names(&mut self, tools: &[ToolSource], approvals: &[(String, ApprovalRule)]) {
        let mut seen: Vec<&str> = Vec::new();
        let mut all_known = true;
        for t in tools {
            let name = match &t.kind {
                ToolKind::Http(h) => (h.name.as_str(), "/http/name"),
                ToolKind::Workflow { name, .. } => (name.as_str(), "/workflow/name"),
                ToolKind::Mcp { .. } | ToolKind::A2a { .. } => {
                    all_known = false;
                    continue;
                }
            };
            let at = format!("{}{}", t.pointer, name.1);
            if !is_tool_name(name.0) {
                self.problem(
                    &at,
                    format!(
                        "{:?} is not a tool name (1 to 64 letters, digits, `_` and `-`)",
                        name.0
                    ),
                );
            } else if seen.contains(&name.0) {
                self.problem(&at, format!("the tool {} is defined twice", name.0));
            }
            seen.push(name.0);
        }
        if all_known {
            for (name, _) in approvals {
                if !seen.contains(&name.as_str()) {
                    self.problem(
                        child("/approvals", name),
                        format!("no tool of this agent is named {name}"),
                    );
                }
            }
        }
    }

    fn template(&mut self, v: &Value, at: &str) -> Option<Template> {
        match Template::compile(v, VARS) {
            Ok(t) => Some(t),
            Err((pointer, reason)) => {
                self.problem(format!("{at}{pointer}"), reason);
                None
            }
        }
    }

    fn templates(&mut self, v: &Value, key: &str, at: &str) -> Vec<(String, Template)> {
        entries(v, key)
            .filter_map(|(name, value)| {
                let t = self.template(value, &child(&child(at, key), name))?;
                Some((name.clone(), t))
            })
            .collect()
    }

    fn tool(&mut self, t: &Value, at: &str) -> Option<ToolSource> {
        let kind = if let Some(m) = t.get("mcp") {
            let at = child(at, "mcp");
            let transport = if let Some(h) = m.get("http") {
                McpTransport::Http {
                    endpoint: text(h, "endpoint").unwrap_or_default(),
                    bearer: h
                        .get("bearer")
                        .and_then(|b| self.template(b, &format!("{at}/http/bearer"))),
                }
            } else {
                let s = m.get("stdio")?;
                McpTransport::Stdio {
                    command: text(s, "command").unwrap_or_default(),
                    arguments: strings(s, "arguments"),
                    environment: self.templates(s, "environment", &format!("{at}/stdio")),
                }
            };
            ToolKind::Mcp {
                transport,
                only: m.get("tools").map(|_| strings(m, "tools")),
            }
        } else if let Some(a) = t.get("a2a") {
            ToolKind::A2a {
                card: text(a, "card").unwrap_or_default(),
                bearer: a
                    .get("bearer")
                    .and_then(|b| self.template(b, &format!("{at}/a2a/bearer"))),
            }
        } else if let Some(h) = t.get("http") {
            ToolKind::Http(self.http(h, &child(at, "http"))?)
        } else {
            let w = t.get("workflow")?;
            let id = text(w, "id").unwrap_or_default();
            ToolKind::Workflow {
                name: text(w, "name").unwrap_or_else(|| workflow_tool_name(&id)),
                id,
                description: text(w, "description"),
            }
        };
        Some(ToolSource {
            pointer: at.to_owned(),
            kind,
        })
    }

    fn http(&mut self, h: &Value, at: &str) -> Option<HttpTool> {
        let request = h.get("request")?;
        let at_request = child(at, "request");
        let method = text(request, "method").unwrap_or_default();
        if Request::new(&method, "http://localhost/").is_err() {
            self.problem(
                child(&at_request, "method"),
                format!("{method:?} is not an HTTP method"),
            );
        }
        let endpoint = text(request, "endpoint").unwrap_or_default();
        let endpoint = match expr::runtime_expression(&endpoint) {
            Some(src) => match Expr::compile(src, VARS) {
                Ok(e) => Endpoint::Expression(e),
                Err(reason) => {
                    self.problem(child(&at_request, "endpoint"), reason);
                    return None;
                }
            },
            None => Endpoint::UriTemplate(endpoint),
        };
        let input = h
            .get("input")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object"}));
        if let Err(e) = agentry_engine::schema::Schema::compile(input.clone()) {
            self.problem(child(at, "input"), format!("not a JSON Schema: {e}"));
        }
        Some(HttpTool {
            name: text(h, "name").unwrap_or_default(),
            description: text(h, "description").unwrap_or_default(),
            input,
            method,
            endpoint,
            headers: self.templates(request, "headers", &at_request),
            query: self.templates(request, "query", &at_request),
            body: request
                .get("body")
                .and_then(|b| self.template(b, &child(&at_request, "body"))),
        })
    }

    fn approval(&mut self, rule: &Value, at: &str) -> ApprovalRule {
        let mut out = ApprovalRule {
            when: None,
            within: None,
            denial: text(rule, "denial"),
        };
        if let Some(when) = rule.get("when").and_then(Value::as_str) {
            match expr::compile_loose(when, &[]) {
                Ok(e) => out.when = Some(e),
                Err(reason) => self.problem(child(at, "when"), reason),
            }
        }
        if let Some(within) = rule.get("within") {
            match crate::model::parse_duration(within) {
                Ok(d) if !d.is_zero() => out.within = Some(d),
                Ok(_) => self.problem(child(at, "within"), "an approval deadline is longer than 0"),
                Err(reason) => self.problem(child(at, "within"), reason),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(yaml: &str) -> Value {
        serde_norway::from_str(yaml).unwrap()
    }

    fn problems(yaml: &str) -> Vec<String> {
        match read("agents/a.yaml", &doc(yaml)) {
            Ok(_) => Vec::new(),
            Err(p) => p.iter().map(ToString::to_string).collect(),
        }
    }

    const GOOD: &str = r#"
id: desk
name: Desk
instructions: You help.
model: { name: gpt-4o-mini, baseUrl: 'http://127.0.0.1:9/v1', key: '${ $secrets.openaiKey }' }
subAgents: [assistant]
memory: { contextLimit: 20 }
durable: false
secrets: [openaiKey, apiToken]
tools:
  - mcp: { stdio: { command: python3, arguments: [mcp/orders.py], environment: { TOKEN: '${ $secrets.apiToken }' } }, tools: [issue_refund] }
  - a2a: { card: 'http://127.0.0.1:9/a2a/assistant/.well-known/agent-card.json' }
  - http:
      name: get_weather
      input: { type: object, properties: { city: { type: string } }, required: [city] }
      request:
        method: post
        endpoint: 'http://127.0.0.1:9/weather/{city}'
        headers: { Authorization: 'Bearer ${ $secrets.apiToken }' }
        body: '${ {city: .city} }'
  - workflow: { id: word-count }
approvals:
  issue_refund: { when: '${ .amount > 50 }', within: PT1H, denial: Not approved }
  get_weather: always
"#;

    #[test]
    fn a_good_file_reads() {
        let a = read("agents/a.yaml", &doc(GOOD)).unwrap();
        assert_eq!((a.id.as_str(), a.name.as_str()), ("desk", "Desk"));
        assert_eq!(a.memory, Some(Some(20)));
        assert!(!a.durable);
        assert_eq!(a.tools.len(), 4);
        assert!(
            matches!(&a.tools[3].kind, ToolKind::Workflow { name, .. } if name == "run_word_count")
        );
        let (_, refund) = &a.approvals[0];
        assert_eq!(refund.within, Some(Duration::from_secs(3600)));
        assert!(refund.applies(&json!({"amount": 60})));
        assert!(!refund.applies(&json!({"amount": 10})));
        // Fails closed: an error, or not a boolean, needs approval.
        assert!(refund.applies(&json!({"amount": "ten"})) || refund.applies(&json!([])));
        assert!(refund.applies(&json!("not an object")));
        assert!(a.approvals[1].1.applies(&json!({})));
    }

    #[test]
    fn the_model_key_falls_back_when_its_secret_is_unset() {
        let a = read("agents/a.yaml", &doc(GOOD)).unwrap();
        let none = a.secret_values(&secrets::Secrets::default());
        assert_eq!(a.model.as_ref().unwrap().key(&none), Ok(None));
    }

    #[test]
    fn unknown_properties_are_named_with_a_suggestion() {
        let p = problems("id: a\ninstruction: hi\n");
        assert!(
            p[0].contains("agents/a.yaml: /instruction: unknown property"),
            "{p:?}"
        );
        assert!(p[0].contains("did you mean `instructions`"), "{p:?}");
        let p = problems(
            "id: a\ntools: [{http: {name: x, request: {method: get, endpont: 'http://x/'}}}]\n",
        );
        assert!(
            p.iter()
                .any(|p| p.contains("/tools/0/http/request/endpont")),
            "{p:?}"
        );
    }

    #[test]
    fn agentry_rules_are_checked() {
        let p = problems(
            r#"
id: 'not ok'
secrets: ['a b']
tools:
  - http: { name: 'bad name', request: { method: 'GE T', endpoint: 'http://x/' } }
  - workflow: { id: w, name: t }
  - workflow: { id: v, name: t }
approvals:
  nothing: { when: '${ .a | nope }', within: PT0S }
"#,
        );
        for want in [
            "/id: \"not ok\" is not an agent id",
            "/secrets/0:",
            "/tools/0/http/name:",
            "/tools/0/http/request/method:",
            "/tools/2/workflow/name: the tool t is defined twice",
            "/approvals/nothing: no tool of this agent is named nothing",
            "/approvals/nothing/when:",
            "/approvals/nothing/within:",
        ] {
            assert!(p.iter().any(|p| p.contains(want)), "{want}: {p:?}");
        }
    }

    #[test]
    fn a_directory_with_a_duplicate_id_is_refused_naming_both() {
        let dir = std::env::temp_dir().join(format!("agents-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(dir.join("agents")).unwrap();
        std::fs::write(dir.join("agents/a.yaml"), "id: same\n").unwrap();
        std::fs::write(dir.join("agents/b.yml"), "id: same\n").unwrap();
        std::fs::write(dir.join("agents/notes.txt"), "not an agent").unwrap();
        let p = read_dir(&dir).unwrap_err();
        assert_eq!(p.len(), 1);
        assert!(
            p[0].to_string()
                .contains("agents/b.yml: /id: the agent same is also defined in agents/a.yaml"),
            "{}",
            p[0]
        );
        let _ = std::fs::remove_dir_all(&dir);
        assert!(read_dir(&dir).unwrap().is_empty());
    }
}
