//! A Serverless Workflow document as agentry runs it: read from its JSON form (YAML is read into
//! JSON first), every expression compiled, every reference resolved, and every construct agentry
//! cannot run refused with its JSON pointer. What [`Document::read`] accepts, the runtime runs.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::expr::{self, Expr, Template};
use crate::problem::Problem;

/// The runtime expression arguments every expression may use (`$context`, ...), without `$`.
pub const ARGUMENTS: [&str; 8] = [
    "context",
    "input",
    "output",
    "secrets",
    "task",
    "workflow",
    "runtime",
    "authorization",
];

/// The most tasks one document holds, all levels counted.
pub const MAX_TASKS: usize = 1_000;
/// The deepest nesting of tasks in a document.
pub const MAX_DEPTH: usize = 16;

/// A document that agentry can run.
#[derive(Debug)]
pub struct Document {
    /// `document.namespace`.
    pub namespace: String,
    /// `document.name`: the workflow's id.
    pub name: String,
    /// `document.version`.
    pub version: String,
    /// `document.dsl`.
    pub dsl: String,
    pub title: Option<String>,
    pub summary: Option<String>,
    /// The workflow's `input.schema` (its JSON Schema document), when given.
    pub input_schema: Option<Value>,
    /// The workflow's `input.from`.
    pub input_from: Option<Template>,
    /// The workflow's `output.as`.
    pub output_as: Option<Template>,
    /// The workflow's `output.schema`: its output, after `as`, is checked against it.
    pub output_schema: Option<Value>,
    /// The top-level `do`.
    pub tasks: Arc<TaskList>,
    /// The event types its `listen` tasks wait for.
    pub listened: Vec<String>,
    /// The secrets it reads (`use.secrets`): only these are in `$secrets`.
    pub secrets: Vec<String>,
    /// When it starts by itself (`schedule.cron`, or `schedule.every` as a cron expression).
    pub schedule: Option<String>,
    /// `schedule.after`: it starts again this long after each run that completed.
    pub restart_after: Option<Duration>,
    /// `schedule.on`: each event of any of these filters starts a run, on the event.
    pub started_by: Vec<EventFilter>,
    /// The definition as written (for `$workflow.definition` and the console).
    pub source: Value,
}

/// A list of tasks (a `do`), with each name's index for flow directives.
#[derive(Debug, Default)]
pub struct TaskList {
    pub tasks: Vec<Task>,
    index: HashMap<String, usize>,
}

impl TaskList {
    /// The index of the task `name` in this list.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }
}

/// One task, with the properties every task has.
#[derive(Debug)]
pub struct Task {
    pub name: String,
    /// Its JSON pointer in the document (`/do/0/getPet`): the DSL's task reference.
    pub reference: String,
    pub kind: TaskKind,
    /// `if`: the task runs only when it holds.
    pub when: Option<Expr>,
    pub input_from: Option<Template>,
    pub input_schema: Option<Value>,
    pub output_as: Option<Template>,
    /// `output.schema`: the output, after `output.as`, is checked against it.
    pub output_schema: Option<Value>,
    pub export_as: Option<Template>,
    /// `export.schema`: the context, after `export.as`, is checked against it.
    pub export_schema: Option<Value>,
    pub timeout: Option<Duration>,
    pub then: Flow,
    /// The task as written (for `$task.definition`).
    pub definition: Value,
    /// Whether it, or a task inside it, waits for events (a `listen`): a re-run of the step
    /// walks it again even when it is recorded as ended, so that its waits take their
    /// recorded events in the same order.
    pub waits: bool,
}

/// Where the flow goes after a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flow {
    /// The next task of the list (`continue`, or no `then`).
    Continue,
    /// Leaves the list: the composite task containing it ends (`exit`).
    Exit,
    /// Ends the workflow gracefully (`end`).
    End,
    /// The task of this name in the same list.
    Goto(String),
}

/// What a task does.
#[derive(Debug)]
pub enum TaskKind {
    Set(Template),
    Do(Arc<TaskList>),
    Switch(Vec<SwitchCase>),
    For(Box<ForLoop>),
    Fork {
        branches: Arc<TaskList>,
        compete: bool,
    },
    Try(Box<TryCatch>),
    Raise(Box<ErrorTemplate>),
    Wait(Duration),
    Emit(Template),
    Listen(Box<Listen>),
    CallHttp(Box<HttpCall>),
    CallOpenApi(Box<OpenApiCall>),
    /// `call: a2a` or `call: mcp`.
    CallProtocol(Box<ProtocolCall>),
    /// `run: workflow`: a child execution of a registered workflow.
    RunWorkflow(Box<RunWorkflow>),
}

/// A `run: workflow`.
#[derive(Debug)]
pub struct RunWorkflow {
    /// `workflow.name`: the workflow's id.
    pub name: String,
    /// `workflow.namespace` (not matched: docs/DEFINITIONS.md) and `workflow.version` (the
    /// version that runs; `latest`: the newest registered).
    pub namespace: String,
    pub version: String,
    /// `workflow.input` (default: the task's input).
    pub input: Option<Template>,
}

impl TaskKind {
    /// The DSL's name of the task's type (`set`, `call`, ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            TaskKind::Set(_) => "set",
            TaskKind::Do(_) => "do",
            TaskKind::Switch(_) => "switch",
            TaskKind::For(_) => "for",
            TaskKind::Fork { .. } => "fork",
            TaskKind::Try(_) => "try",
            TaskKind::Raise(_) => "raise",
            TaskKind::Wait(_) => "wait",
            TaskKind::Emit(_) => "emit",
            TaskKind::Listen(_) => "listen",
            TaskKind::CallHttp(_) | TaskKind::CallOpenApi(_) | TaskKind::CallProtocol(_) => "call",
            TaskKind::RunWorkflow(_) => "run",
        }
    }
}

impl TaskKind {
    /// Whether a task of this kind waits for events, itself or in a task inside it.
    fn waits(&self) -> bool {
        let any = |l: &TaskList| l.tasks.iter().any(|t| t.waits);
        match self {
            TaskKind::Listen(_) => true,
            TaskKind::Do(l) | TaskKind::Fork { branches: l, .. } => any(l),
            TaskKind::For(f) => any(&f.body),
            TaskKind::Try(t) => any(&t.body) || t.handler.as_deref().is_some_and(any),
            _ => false,
        }
    }
}

/// One case of a `switch`.
#[derive(Debug)]
pub struct SwitchCase {
    pub name: String,
    /// None: the default case.
    pub when: Option<Expr>,
    pub then: Flow,
}

/// A `for` task.
#[derive(Debug)]
pub struct ForLoop {
    /// The variable of the item (`each`, default `item`).
    pub each: String,
    /// The variable of the index (`at`, default `index`).
    pub at: String,
    /// The collection (`in`).
    pub items: Expr,
    /// Checked before each iteration (`while`).
    pub while_: Option<Expr>,
    pub body: Arc<TaskList>,
}

/// A `try` task.
#[derive(Debug)]
pub struct TryCatch {
    pub body: Arc<TaskList>,
    /// Which errors it catches (`catch.errors.with`): each given field must equal the error's.
    pub filter: Map<String, Value>,
    /// The variable of the caught error (`catch.as`, default `error`).
    pub as_: String,
    pub when: Option<Expr>,
    pub except_when: Option<Expr>,
    pub retry: Option<RetryPolicy>,
    /// `catch.do`.
    pub handler: Option<Arc<TaskList>>,
}

/// How a `try` is tried again.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    pub when: Option<Expr>,
    pub except_when: Option<Expr>,
    pub delay: Duration,
    pub backoff: Backoff,
    /// The most attempts (`limit.attempt.count`), the first included.
    pub max_attempts: Option<u32>,
    /// How long all attempts may take (`limit.duration` or `limit.attempt.duration`).
    pub max_duration: Option<Duration>,
    /// A random extra delay between `from` and `to`.
    pub jitter: Option<(Duration, Duration)>,
}

/// How the delay grows between attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backoff {
    Constant,
    Linear,
    Exponential,
}

/// An error to raise: each field a template.
#[derive(Debug)]
pub struct ErrorTemplate {
    pub fields: Template,
}

/// A `listen` task.
#[derive(Debug)]
pub struct Listen {
    pub strategy: Consumption,
    /// What an event must match: its type and other attributes (`with`), and its correlations.
    pub filters: Vec<EventFilter>,
    /// What of each event it gives (`read`).
    pub read: ReadMode,
    /// When an `any` stops consuming events (none: after its first).
    pub until: Option<Until>,
    /// The tasks run for each consumed event (`foreach`).
    pub foreach: Option<EventLoop>,
}

impl Listen {
    /// Every filter it waits on: its own, and its `until`'s.
    pub fn filters(&self) -> impl Iterator<Item = &EventFilter> {
        let until = match &self.until {
            Some(Until::Event(filters)) => filters.as_slice(),
            _ => &[],
        };
        self.filters.iter().chain(until)
    }
}

/// When a `listen` with `any` stops consuming events.
#[derive(Debug)]
pub enum Until {
    /// When this holds, evaluated on the events consumed so far (a list, as `read` gives
    /// them) after each one.
    Holds(Expr),
    /// When an event of any of these filters comes (`until: {one: ...}` or `{any: [...]}`);
    /// it is not one of the consumed events.
    Event(Vec<EventFilter>),
}

/// A `listen`'s `foreach`: the tasks run for each consumed event, the event as their input
/// and as `$<item>`, its index as `$<at>`.
#[derive(Debug)]
pub struct EventLoop {
    pub item: String,
    pub at: String,
    pub body: Arc<TaskList>,
}

/// Which events satisfy a `listen`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consumption {
    /// `one`: the first matching event.
    One,
    /// `all`: one event of each filter.
    All,
    /// `any`: an event of any filter.
    Any,
}

/// What a `listen` returns of each event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadMode {
    Data,
    Envelope,
    Raw,
}

/// One event filter of a `listen`.
#[derive(Debug)]
pub struct EventFilter {
    /// The event's type (the name the event routes deliver it under).
    pub event_type: String,
    /// What its other attributes must be (`data`, `source`, ...).
    pub with: Vec<(String, AttributeMatch)>,
    /// `correlate`: how the event's key is read from it (`from`, on the event) and which key
    /// this execution waits for (`expect`, on the task's input). None: any event of the type.
    pub correlate: Option<Correlation>,
}

impl EventFilter {
    /// Whether a CloudEvent's attributes are as the filter says (its predicates evaluated with
    /// `vars`); a failed predicate is the expression's error.
    pub fn matches(&self, envelope: &Value, vars: &[(&str, &Value)]) -> Result<bool, String> {
        for (name, want) in &self.with {
            let have = envelope.get(name).unwrap_or(&Value::Null);
            let holds = match want {
                AttributeMatch::Equals(v) => have == v,
                AttributeMatch::Holds(e) => e
                    .eval_bool(have, vars)
                    .map_err(|err| format!("{}: {err}", e.source()))?,
            };
            if !holds {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// One correlation of an event filter.
#[derive(Debug)]
pub struct Correlation {
    pub from: Expr,
    pub expect: Expr,
}

/// How an event's attribute must be.
#[derive(Debug)]
pub enum AttributeMatch {
    /// Equal to this.
    Equals(Value),
    /// This expression, run on the attribute, gives `true`.
    Holds(Expr),
}

/// A `call: http`.
#[derive(Debug)]
pub struct HttpCall {
    pub method: String,
    /// The endpoint: a URI template (`{name}` from the task input) or an expression.
    pub endpoint: Endpoint,
    pub headers: Option<Template>,
    pub query: Option<Template>,
    pub body: Option<Template>,
    pub output: HttpOutput,
    /// Whether a response with an error status is an error (`redirect` decides 3xx).
    pub redirect: bool,
    pub auth: Option<Authentication>,
}

/// A `call: openapi`: an operation of an OpenAPI (or Swagger 2.0) document.
#[derive(Debug)]
pub struct OpenApiCall {
    /// The document's URI (`with.document.endpoint`).
    pub document: String,
    /// `with.operationId`.
    pub operation_id: String,
    /// `with.parameters`: by name, for the operation's path, query, header and body parameters.
    pub parameters: Option<Template>,
    pub output: HttpOutput,
    pub redirect: bool,
    pub auth: Option<Authentication>,
}

/// A call of an agent protocol: `call: a2a` or `call: mcp` (read and run by
/// `crate::protocols`).
#[derive(Debug)]
pub struct ProtocolCall {
    pub protocol: Protocol,
    /// `with`, as written but for `parameters` (checked at load by `crate::protocols::check`).
    pub with: Map<String, Value>,
    /// `with.parameters`, rendered when the task runs.
    pub parameters: Option<Template>,
}

/// The agent protocols a definition calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    A2a,
    Mcp,
}

/// Where a call goes.
#[derive(Debug)]
pub enum Endpoint {
    /// A URI template, `{var}` read from the task input.
    UriTemplate(String),
    /// A runtime expression that yields the URI.
    Expression(Expr),
}

/// What a `call: http` outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpOutput {
    Content,
    Response,
    Raw,
}

/// How a call authenticates.
#[derive(Debug)]
pub enum Authentication {
    Basic {
        username: Template,
        password: Template,
    },
    Bearer {
        token: Template,
    },
}

/// Reads documents, collecting every problem of one.
struct Reader<'a> {
    file: &'a str,
    problems: Vec<Problem>,
    /// Reusable components (`use.errors`, `use.retries`, `use.authentications`).
    errors: Map<String, Value>,
    retries: Map<String, Value>,
    authentications: Map<String, Value>,
    tasks: usize,
    listened: Vec<String>,
}

impl Document {
    /// Reads a document (already parsed from YAML or JSON) that `file` holds. Every problem of
    /// it is reported: a document agentry cannot run is refused whole.
    pub fn read(file: &str, source: Value) -> Result<Document, Vec<Problem>> {
        let mut reader = Reader {
            file,
            problems: Vec::new(),
            errors: Map::new(),
            retries: Map::new(),
            authentications: Map::new(),
            tasks: 0,
            listened: Vec::new(),
        };
        let doc = reader.document(&source);
        match doc {
            Some(mut doc) if reader.problems.is_empty() => {
                doc.listened = std::mem::take(&mut reader.listened);
                doc.listened.sort();
                doc.listened.dedup();
                doc.source = source;
                Ok(doc)
            }
            _ => {
                if reader.problems.is_empty() {
                    reader.problem("", "the document cannot be read");
                }
                Err(reader.problems)
            }
        }
    }
}

impl Document {
    /// Calls `f` on every task, depth first in document order.
    pub fn each_task(&self, f: &mut dyn FnMut(&Task)) {
        fn walk(list: &TaskList, f: &mut dyn FnMut(&Task)) {
            for task in &list.tasks {
                f(task);
                match &task.kind {
                    TaskKind::Do(l) | TaskKind::Fork { branches: l, .. } => walk(l, f),
                    TaskKind::For(l) => walk(&l.body, f),
                    TaskKind::Listen(l) => {
                        if let Some(each) = &l.foreach {
                            walk(&each.body, f);
                        }
                    }
                    TaskKind::Try(t) => {
                        walk(&t.body, f);
                        if let Some(h) = &t.handler {
                            walk(h, f);
                        }
                    }
                    _ => {}
                }
            }
        }
        walk(&self.tasks, f);
    }

    /// The keys under which this workflow's `listen` tasks wait for `event` (a CloudEvent of
    /// type `event_type`): each correlated filter's `from`, read from the event; [`ANY_KEY`]
    /// for a filter without a correlation.
    pub fn event_keys(&self, event_type: &str, event: &Value) -> Vec<String> {
        let mut keys = Vec::new();
        self.each_task(&mut |task| {
            let TaskKind::Listen(l) = &task.kind else {
                return;
            };
            for filter in l.filters().filter(|f| f.event_type == event_type) {
                match &filter.correlate {
                    None => keys.push(ANY_KEY.to_owned()),
                    Some(c) => {
                        if let Ok(v) = c.from.eval(event, &[]) {
                            keys.push(key_text(&v));
                        }
                    }
                }
            }
        });
        keys
    }
}

/// The key a `listen` without a correlation waits with: any event of its type sent without a
/// key reaches it (and one sent by `POST /events/{type}` with this key).
pub const ANY_KEY: &str = "*";

/// A correlation value as a key: a string as it is, anything else as its JSON.
pub fn key_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Joins a JSON pointer and a key (escaped as RFC 6901 says).
pub fn pointer(base: &str, key: &str) -> String {
    format!("{base}/{}", key.replace('~', "~0").replace('/', "~1"))
}

impl Reader<'_> {
    fn problem(&mut self, at: &str, reason: impl Into<String>) {
        self.problems.push(Problem::new(self.file, at, reason));
    }

    fn document(&mut self, source: &Value) -> Option<Document> {
        let Some(root) = source.as_object() else {
            self.problem("", "a workflow document is an object");
            return None;
        };
        let meta = self.object(root, "", "document")?;
        let dsl = self.string(meta, "/document", "dsl")?;
        if !dsl.starts_with("1.0") {
            self.problem(
                "/document/dsl",
                format!("DSL version {dsl} is not supported (1.0.x is)"),
            );
        }
        let namespace = self.string(meta, "/document", "namespace")?;
        let name = self.string(meta, "/document", "name")?;
        let version = self.string(meta, "/document", "version")?;
        let mut secrets = Vec::new();
        if let Some(uses) = root.get("use").and_then(Value::as_object) {
            match uses.get("secrets") {
                None => {}
                Some(Value::Array(names)) => {
                    for (i, name) in names.iter().enumerate() {
                        match name.as_str() {
                            Some(n) if crate::secrets::is_name(n) => secrets.push(n.to_owned()),
                            _ => self.problem(
                                &format!("/use/secrets/{i}"),
                                "a secret's name is 1 to 64 letters, digits, `_`, `-` or `.`",
                            ),
                        }
                    }
                }
                Some(_) => self.problem("/use/secrets", "must be a list of secret names"),
            }
            for (key, slot) in [
                ("errors", &mut self.errors),
                ("retries", &mut self.retries),
                ("authentications", &mut self.authentications),
            ] {
                if let Some(map) = uses.get(key).and_then(Value::as_object) {
                    *slot = map.clone();
                }
            }
            for key in uses.keys() {
                if !["errors", "retries", "authentications", "secrets"].contains(&key.as_str()) {
                    self.problem(
                        &pointer("/use", key),
                        format!("reusable `{key}` are not supported"),
                    );
                }
            }
        }
        let schedule = root.get("schedule").and_then(|v| self.schedule(v));
        let restart_after = root
            .get("schedule")
            .and_then(|v| v.get("after"))
            .and_then(|v| self.duration(v, "/schedule/after"));
        let started_by = match root.get("schedule").and_then(|v| v.get("on")) {
            Some(on) => self.schedule_on(on),
            None => Vec::new(),
        };
        for key in ["timeout", "evaluate", "extensions"] {
            if root.contains_key(key) {
                self.unsupported(&pointer("", key), &format!("`{key}`"));
            }
        }
        let (input_schema, input_from) = match root.get("input") {
            Some(v) => self.input(v, "/input"),
            None => (None, None),
        };
        let (output_as, output_schema) = match root.get("output") {
            Some(o) => self.output(o, "/output", &[]),
            None => (None, None),
        };
        let Some(do_) = root.get("do") else {
            self.problem("", "the document has no `do`");
            return None;
        };
        let tasks = self.task_list(do_, "/do", 0, &[])?;
        Some(Document {
            namespace,
            name,
            version,
            dsl,
            title: meta.get("title").and_then(Value::as_str).map(str::to_owned),
            summary: meta
                .get("summary")
                .and_then(Value::as_str)
                .map(str::to_owned),
            input_schema,
            input_from,
            output_as,
            output_schema,
            tasks: Arc::new(tasks),
            listened: Vec::new(),
            secrets,
            schedule,
            restart_after,
            started_by,
            source: Value::Null,
        })
    }

    /// `schedule.on`: the filters of its `one` or `any` (each event of any of them starts a
    /// run).
    fn schedule_on(&mut self, on: &Value) -> Vec<EventFilter> {
        let at = "/schedule/on";
        let filters: Vec<(&Value, String)> = if let Some(one) = on.get("one") {
            vec![(one, pointer(at, "one"))]
        } else if let Some(Value::Array(any)) = on.get("any") {
            if on.get("until").is_some() {
                self.unsupported(&pointer(at, "until"), "`schedule.on` with `until`");
            }
            any.iter()
                .enumerate()
                .map(|(i, f)| (f, format!("{at}/any/{i}")))
                .collect()
        } else {
            self.unsupported(
                at,
                "`schedule.on` other than `one` or `any` of event filters (`all`: a run started by several events)",
            );
            return Vec::new();
        };
        if filters.is_empty() {
            self.unsupported(&pointer(at, "any"), "`any: []` (any event at all)");
        }
        filters
            .into_iter()
            .filter_map(|(f, fat)| self.event_filter(f, &fat, &[], false))
            .collect()
    }

    /// `schedule`: a cron expression (`cron`, or `every` when a cron expression can say it).
    fn schedule(&mut self, v: &Value) -> Option<String> {
        let m = v.as_object()?;
        if m.len() > 1 {
            self.problem(
                "/schedule",
                "one of `cron`, `every`, `after` or `on`: a schedule says one way to start",
            );
        }
        if let Some(cron) = m.get("cron") {
            let Some(cron) = cron
                .as_str()
                .filter(|c| matches!(c.split_whitespace().count(), 5 | 6))
            else {
                self.problem(
                    "/schedule/cron",
                    "a cron expression of 5 fields (or 6, seconds first)",
                );
                return None;
            };
            return Some(cron.to_owned());
        }
        let every = m.get("every")?;
        let d = self.duration(every, "/schedule/every")?;
        match every_as_cron(d) {
            Some(cron) => Some(cron),
            None => {
                self.problem(
                    "/schedule/every",
                    "agentry schedules `every` when a cron expression can say it: a whole number of seconds dividing a minute, of minutes dividing an hour, of hours dividing a day, or one day",
                );
                None
            }
        }
    }

    fn unsupported(&mut self, at: &str, what: &str) {
        self.problem(
            at,
            format!("{what} is not supported by agentry yet (docs/DEFINITIONS.md)"),
        );
    }

    fn object<'v>(
        &mut self,
        parent: &'v Map<String, Value>,
        at: &str,
        key: &str,
    ) -> Option<&'v Map<String, Value>> {
        match parent.get(key) {
            Some(Value::Object(m)) => Some(m),
            Some(_) => {
                self.problem(&pointer(at, key), "must be an object");
                None
            }
            None => {
                self.problem(at, format!("`{key}` is required"));
                None
            }
        }
    }

    fn string(&mut self, parent: &Map<String, Value>, at: &str, key: &str) -> Option<String> {
        match parent.get(key) {
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(_) => {
                self.problem(&pointer(at, key), "must be a non-empty string");
                None
            }
            None => {
                self.problem(at, format!("`{key}` is required"));
                None
            }
        }
    }

    /// A runtime expression field (`${ }` optional).
    fn expr(&mut self, v: &Value, at: &str, vars: &[&str]) -> Option<Expr> {
        let Some(s) = v.as_str() else {
            self.problem(at, "must be a runtime expression (a string)");
            return None;
        };
        match expr::compile_loose(s, &vars_with(vars)) {
            Ok(e) => Some(e),
            Err(reason) => {
                self.problem(at, format!("bad expression: {reason}"));
                None
            }
        }
    }

    /// A value whose strings may be `${ }` expressions.
    fn template(&mut self, v: &Value, at: &str, vars: &[&str]) -> Option<Template> {
        match Template::compile(v, &vars_with(vars)) {
            Ok(t) => Some(t),
            Err((inner, reason)) => {
                self.problem(&format!("{at}{inner}"), format!("bad expression: {reason}"));
                None
            }
        }
    }

    /// `output.as` or `export.as`: a string is an expression, an object a template.
    fn transform(&mut self, v: &Value, at: &str, vars: &[&str]) -> Option<Template> {
        match v {
            Value::String(s) => {
                let e = self.expr(v, at, vars)?;
                let _ = s;
                Some(Template::expression(e))
            }
            other => self.template(other, at, vars),
        }
    }

    fn input(&mut self, v: &Value, at: &str) -> (Option<Value>, Option<Template>) {
        let Some(m) = v.as_object() else {
            self.problem(at, "must be an object");
            return (None, None);
        };
        let schema = m
            .get("schema")
            .and_then(|s| self.schema(s, &pointer(at, "schema")));
        let from = m
            .get("from")
            .and_then(|f| self.transform(f, &pointer(at, "from"), &[]));
        (schema, from)
    }

    /// An `output` or an `export`: its `as` and its `schema`.
    fn output(&mut self, v: &Value, at: &str, vars: &[&str]) -> (Option<Template>, Option<Value>) {
        let Some(m) = v.as_object() else {
            return (None, None);
        };
        let schema = m
            .get("schema")
            .and_then(|s| self.schema(s, &pointer(at, "schema")));
        let as_ = m
            .get("as")
            .and_then(|a| self.transform(a, &pointer(at, "as"), vars));
        (as_, schema)
    }

    /// A `schema` object: `{format: json, document: {...}}`.
    fn schema(&mut self, v: &Value, at: &str) -> Option<Value> {
        let m = v.as_object()?;
        if let Some(format) = m.get("format").and_then(Value::as_str)
            && !format.starts_with("json")
        {
            self.problem(
                &pointer(at, "format"),
                format!("schema format {format} is not supported (json is)"),
            );
            return None;
        }
        match m.get("document") {
            Some(doc) => match jsonschema::validator_for(doc) {
                Ok(_) => Some(doc.clone()),
                Err(e) => {
                    self.problem(&pointer(at, "document"), format!("not a JSON Schema: {e}"));
                    None
                }
            },
            None => {
                self.unsupported(at, "a schema by `resource`");
                None
            }
        }
    }

    fn task_list(&mut self, v: &Value, at: &str, depth: usize, vars: &[&str]) -> Option<TaskList> {
        if depth > MAX_DEPTH {
            self.problem(
                at,
                format!("tasks are nested deeper than {MAX_DEPTH} levels"),
            );
            return None;
        }
        let Some(items) = v.as_array() else {
            self.problem(at, "must be a list of tasks");
            return None;
        };
        let mut list = TaskList::default();
        for (i, item) in items.iter().enumerate() {
            let item_at = format!("{at}/{i}");
            let Some(entry) = item.as_object().filter(|m| m.len() == 1) else {
                self.problem(
                    &item_at,
                    "each item of a task list is a map of one task name to its task",
                );
                continue;
            };
            let (name, body) = entry.iter().next().expect("one entry");
            if list.index.insert(name.clone(), i).is_some() {
                self.problem(
                    &item_at,
                    format!("a task named {name} is defined twice in this list"),
                );
            }
            self.tasks += 1;
            if self.tasks > MAX_TASKS {
                self.problem(
                    &item_at,
                    format!("a document holds at most {MAX_TASKS} tasks"),
                );
                return None;
            }
            if let Some(task) = self.task(name, body, &pointer(&item_at, name), depth, vars) {
                list.tasks.push(task);
            }
        }
        // Flow directives name tasks of the same list.
        for task in &list.tasks {
            let mut targets = vec![&task.then];
            if let TaskKind::Switch(cases) = &task.kind {
                targets.extend(cases.iter().map(|c| &c.then));
            }
            for target in targets {
                if let Flow::Goto(name) = target
                    && list.position(name).is_none()
                {
                    self.problem(
                        &pointer(&task.reference, "then"),
                        format!("no task named {name} in this list"),
                    );
                }
            }
        }
        Some(list)
    }

    fn flow(&mut self, v: Option<&Value>, at: &str) -> Flow {
        match v {
            None => Flow::Continue,
            Some(Value::String(s)) => match s.as_str() {
                "continue" => Flow::Continue,
                "exit" => Flow::Exit,
                "end" => Flow::End,
                name => Flow::Goto(name.to_owned()),
            },
            Some(_) => {
                self.problem(
                    at,
                    "must be a flow directive (`continue`, `exit`, `end` or a task name)",
                );
                Flow::Continue
            }
        }
    }

    fn task(
        &mut self,
        name: &str,
        body: &Value,
        at: &str,
        depth: usize,
        vars: &[&str],
    ) -> Option<Task> {
        let Some(m) = body.as_object() else {
            self.problem(at, "a task is an object");
            return None;
        };
        let when = m
            .get("if")
            .and_then(|v| self.expr(v, &pointer(at, "if"), vars));
        let (input_schema, input_from) = match m.get("input") {
            Some(v) => self.input(v, &pointer(at, "input")),
            None => (None, None),
        };
        let (output_as, output_schema) = match m.get("output") {
            Some(o) => self.output(o, &pointer(at, "output"), vars),
            None => (None, None),
        };
        let (export_as, export_schema) = match m.get("export") {
            Some(e) => self.output(e, &pointer(at, "export"), vars),
            None => (None, None),
        };
        let timeout = m.get("timeout").and_then(|t| {
            let after = t.get("after").unwrap_or(t);
            self.duration(after, &pointer(at, "timeout"))
        });
        let then = self.flow(m.get("then"), &pointer(at, "then"));
        let kind = self.kind(m, at, depth, vars)?;
        let waits = kind.waits();
        Some(Task {
            waits,
            name: name.to_owned(),
            reference: at.to_owned(),
            kind,
            when,
            input_from,
            input_schema,
            output_as,
            output_schema,
            export_as,
            export_schema,
            timeout,
            then,
            definition: body.clone(),
        })
    }

    fn kind(
        &mut self,
        m: &Map<String, Value>,
        at: &str,
        depth: usize,
        vars: &[&str],
    ) -> Option<TaskKind> {
        if let Some(call) = m.get("call") {
            return self.call(call, m.get("with"), at, vars);
        }
        if let Some(set) = m.get("set") {
            return self
                .template(set, &pointer(at, "set"), vars)
                .map(TaskKind::Set);
        }
        if let Some(f) = m.get("for") {
            return self.for_loop(f, m, at, depth, vars);
        }
        if let Some(body) = m.get("do") {
            return self
                .task_list(body, &pointer(at, "do"), depth + 1, vars)
                .map(|l| TaskKind::Do(Arc::new(l)));
        }
        if let Some(cases) = m.get("switch") {
            return self.switch(cases, &pointer(at, "switch"), vars);
        }
        if let Some(fork) = m.get("fork") {
            let fat = pointer(at, "fork");
            let compete = fork
                .get("compete")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let branches = fork.get("branches")?;
            return self
                .task_list(branches, &pointer(&fat, "branches"), depth + 1, vars)
                .map(|l| TaskKind::Fork {
                    branches: Arc::new(l),
                    compete,
                });
        }
        if let Some(body) = m.get("try") {
            return self.try_catch(body, m.get("catch"), at, depth, vars);
        }
        if let Some(raise) = m.get("raise") {
            return self.raise(raise, &pointer(at, "raise"), vars);
        }
        if let Some(wait) = m.get("wait") {
            return self
                .duration(wait, &pointer(at, "wait"))
                .map(TaskKind::Wait);
        }
        if let Some(emit) = m.get("emit") {
            let eat = pointer(at, "emit");
            let Some(with) = emit.get("event").and_then(|e| e.get("with")) else {
                self.problem(&eat, "`emit.event.with` is required");
                return None;
            };
            if with.get("type").and_then(Value::as_str).is_none() {
                self.problem(
                    &pointer(&eat, "event/with"),
                    "the event's `type` is required",
                );
            }
            return self
                .template(with, &pointer(&eat, "event/with"), vars)
                .map(TaskKind::Emit);
        }
        if let Some(listen) = m.get("listen") {
            return self.listen(listen, m, &pointer(at, "listen"), depth, vars);
        }
        if let Some(run) = m.get("run") {
            return self.run(run, &pointer(at, "run"), vars);
        }
        self.problem(at, "unknown task: none of call, do, emit, for, fork, listen, raise, run, set, switch, try, wait");
        None
    }

    fn run(&mut self, v: &Value, at: &str, vars: &[&str]) -> Option<TaskKind> {
        let Some(m) = v.as_object() else {
            self.problem(at, "`run` is an object");
            return None;
        };
        if let Some(what) = ["container", "script", "shell"]
            .iter()
            .find(|k| m.contains_key(**k))
        {
            self.unsupported(&pointer(at, what), &format!("`run: {what}`"));
            return None;
        }
        if m.get("await").and_then(Value::as_bool) == Some(false) {
            self.unsupported(&pointer(at, "await"), "`run` without awaiting its end");
            return None;
        }
        let Some(w) = m.get("workflow").and_then(Value::as_object) else {
            self.problem(at, "`run.workflow` is required");
            return None;
        };
        let wat = pointer(at, "workflow");
        let name = self.string(w, &wat, "name")?;
        let namespace = self.string(w, &wat, "namespace")?;
        let version = w
            .get("version")
            .and_then(Value::as_str)
            .unwrap_or("latest")
            .to_owned();
        let input = match w.get("input") {
            Some(i) => Some(self.template(i, &pointer(&wat, "input"), vars)?),
            None => None,
        };
        Some(TaskKind::RunWorkflow(Box::new(RunWorkflow {
            name,
            namespace,
            version,
            input,
        })))
    }

    fn duration(&mut self, v: &Value, at: &str) -> Option<Duration> {
        match parse_duration(v) {
            Ok(d) => Some(d),
            Err(reason) => {
                self.problem(at, reason);
                None
            }
        }
    }

    fn switch(&mut self, v: &Value, at: &str, vars: &[&str]) -> Option<TaskKind> {
        let Some(items) = v.as_array() else {
            self.problem(at, "must be a list of cases");
            return None;
        };
        let mut cases = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let cat = format!("{at}/{i}");
            let Some((name, case)) = item
                .as_object()
                .filter(|m| m.len() == 1)
                .and_then(|m| m.iter().next())
            else {
                self.problem(&cat, "each case is a map of one case name to its case");
                continue;
            };
            let cat = pointer(&cat, name);
            let when = case
                .get("when")
                .and_then(|w| self.expr(w, &pointer(&cat, "when"), vars));
            let then = self.flow(case.get("then"), &pointer(&cat, "then"));
            cases.push(SwitchCase {
                name: name.clone(),
                when,
                then,
            });
        }
        Some(TaskKind::Switch(cases))
    }

    fn for_loop(
        &mut self,
        f: &Value,
        m: &Map<String, Value>,
        at: &str,
        depth: usize,
        vars: &[&str],
    ) -> Option<TaskKind> {
        let fat = pointer(at, "for");
        let each = f
            .get("each")
            .and_then(Value::as_str)
            .unwrap_or("item")
            .to_owned();
        let index = f
            .get("at")
            .and_then(Value::as_str)
            .unwrap_or("index")
            .to_owned();
        for (key, var) in [("each", &each), ("at", &index)] {
            if !is_variable(var) {
                self.problem(&pointer(&fat, key), format!("{var} is not a variable name"));
            }
        }
        let mut inner: Vec<&str> = vars.to_vec();
        inner.push(&each);
        inner.push(&index);
        let items = f
            .get("in")
            .and_then(|v| self.expr(v, &pointer(&fat, "in"), vars));
        if f.get("in").is_none() {
            self.problem(&fat, "`in` is required");
        }
        let while_ = m
            .get("while")
            .and_then(|w| self.expr(w, &pointer(at, "while"), &inner));
        let Some(body) = m.get("do") else {
            self.problem(at, "a `for` needs a `do`");
            return None;
        };
        let body = self.task_list(body, &pointer(at, "do"), depth + 1, &inner)?;
        Some(TaskKind::For(Box::new(ForLoop {
            each,
            at: index,
            items: items?,
            while_,
            body: Arc::new(body),
        })))
    }

    fn try_catch(
        &mut self,
        body: &Value,
        catch: Option<&Value>,
        at: &str,
        depth: usize,
        vars: &[&str],
    ) -> Option<TaskKind> {
        let body = self.task_list(body, &pointer(at, "try"), depth + 1, vars);
        let cat = pointer(at, "catch");
        let Some(catch) = catch.and_then(Value::as_object) else {
            self.problem(at, "a `try` needs a `catch` object");
            return None;
        };
        let as_ = catch
            .get("as")
            .and_then(Value::as_str)
            .unwrap_or("error")
            .to_owned();
        if !is_variable(&as_) {
            self.problem(
                &pointer(&cat, "as"),
                format!("{as_} is not a variable name"),
            );
        }
        let mut inner: Vec<&str> = vars.to_vec();
        inner.push(&as_);
        let filter = catch
            .get("errors")
            .and_then(|e| e.get("with"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let when = catch
            .get("when")
            .and_then(|w| self.expr(w, &pointer(&cat, "when"), &inner));
        let except_when = catch
            .get("exceptWhen")
            .and_then(|w| self.expr(w, &pointer(&cat, "exceptWhen"), &inner));
        let retry = match catch.get("retry") {
            None => None,
            Some(Value::String(name)) => match self.retries.get(name).cloned() {
                Some(policy) => self.retry(&policy, &format!("/use/retries/{name}"), &inner),
                None => {
                    self.problem(
                        &pointer(&cat, "retry"),
                        format!("no retry policy named {name} in `use.retries`"),
                    );
                    None
                }
            },
            Some(policy) => self.retry(policy, &pointer(&cat, "retry"), &inner),
        };
        let handler = match catch.get("do") {
            Some(d) => Some(Arc::new(self.task_list(
                d,
                &pointer(&cat, "do"),
                depth + 1,
                &inner,
            )?)),
            None => None,
        };
        Some(TaskKind::Try(Box::new(TryCatch {
            body: Arc::new(body?),
            filter,
            as_,
            when,
            except_when,
            retry,
            handler,
        })))
    }

    fn retry(&mut self, v: &Value, at: &str, vars: &[&str]) -> Option<RetryPolicy> {
        let Some(m) = v.as_object() else {
            self.problem(at, "a retry policy is an object");
            return None;
        };
        let delay = match m.get("delay") {
            Some(d) => self.duration(d, &pointer(at, "delay"))?,
            None => Duration::ZERO,
        };
        let backoff = match m.get("backoff").and_then(Value::as_object) {
            Some(b) if b.contains_key("exponential") => Backoff::Exponential,
            Some(b) if b.contains_key("linear") => Backoff::Linear,
            _ => Backoff::Constant,
        };
        let limit = m.get("limit");
        let max_attempts = limit
            .and_then(|l| l.pointer("/attempt/count"))
            .and_then(Value::as_u64)
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX));
        let max_duration = match limit
            .and_then(|l| l.get("duration").or_else(|| l.pointer("/attempt/duration")))
        {
            Some(d) => Some(self.duration(d, &pointer(at, "limit/duration"))?),
            None => None,
        };
        let jitter = match m.get("jitter") {
            Some(j) => {
                let from = self.duration(
                    j.get("from").unwrap_or(&Value::Null),
                    &pointer(at, "jitter/from"),
                )?;
                let to = self.duration(
                    j.get("to").unwrap_or(&Value::Null),
                    &pointer(at, "jitter/to"),
                )?;
                Some((from, to.max(from)))
            }
            None => None,
        };
        let when = m
            .get("when")
            .and_then(|w| self.expr(w, &pointer(at, "when"), vars));
        let except_when = m
            .get("exceptWhen")
            .and_then(|w| self.expr(w, &pointer(at, "exceptWhen"), vars));
        if max_attempts.is_none() && max_duration.is_none() {
            self.problem(
                at,
                "a retry policy needs a limit (`limit.attempt.count` or `limit.duration`)",
            );
        }
        Some(RetryPolicy {
            when,
            except_when,
            delay,
            backoff,
            max_attempts,
            max_duration,
            jitter,
        })
    }

    fn raise(&mut self, v: &Value, at: &str, vars: &[&str]) -> Option<TaskKind> {
        let error = match v.get("error") {
            Some(Value::String(name)) => match self.errors.get(name).cloned() {
                Some(e) => e,
                None => {
                    self.problem(
                        &pointer(at, "error"),
                        format!("no error named {name} in `use.errors`"),
                    );
                    return None;
                }
            },
            Some(e @ Value::Object(_)) => e.clone(),
            _ => {
                self.problem(
                    at,
                    "`raise.error` is required (an error, or the name of one in `use.errors`)",
                );
                return None;
            }
        };
        for key in ["type", "status"] {
            if error.get(key).is_none() {
                self.problem(
                    &pointer(at, "error"),
                    format!("the error's `{key}` is required"),
                );
            }
        }
        self.template(&error, &pointer(at, "error"), vars)
            .map(|fields| TaskKind::Raise(Box::new(ErrorTemplate { fields })))
    }

    fn listen(
        &mut self,
        v: &Value,
        task: &Map<String, Value>,
        at: &str,
        depth: usize,
        vars: &[&str],
    ) -> Option<TaskKind> {
        let Some(to) = v.get("to").and_then(Value::as_object) else {
            self.problem(at, "`listen.to` is required");
            return None;
        };
        let tat = pointer(at, "to");
        let (strategy, filters) = if let Some(one) = to.get("one") {
            (Consumption::One, vec![(one, pointer(&tat, "one"))])
        } else if let Some(Value::Array(all)) = to.get("all") {
            (
                Consumption::All,
                all.iter()
                    .enumerate()
                    .map(|(i, f)| (f, format!("{tat}/all/{i}")))
                    .collect(),
            )
        } else if let Some(Value::Array(any)) = to.get("any") {
            (
                Consumption::Any,
                any.iter()
                    .enumerate()
                    .map(|(i, f)| (f, format!("{tat}/any/{i}")))
                    .collect(),
            )
        } else {
            self.problem(
                &tat,
                "one of `one`, `all` (a list) or `any` (a list) is required",
            );
            return None;
        };
        if filters.is_empty() {
            self.unsupported(
                &tat,
                "an empty list of event filters (`any: []`: any event at all; agentry delivers events by type, and a wait names its types)",
            );
        }
        let out: Vec<EventFilter> = filters
            .into_iter()
            .filter_map(|(f, fat)| self.event_filter(f, &fat, vars, true))
            .collect();
        let until = match to.get("until") {
            None => None,
            Some(u) => self.until(u, &pointer(&tat, "until"), vars),
        };
        let read = match v.get("read").and_then(Value::as_str) {
            None | Some("data") => ReadMode::Data,
            Some("envelope") => ReadMode::Envelope,
            Some("raw") => ReadMode::Raw,
            Some(other) => {
                self.problem(&pointer(at, "read"), format!("unknown read mode {other}"));
                ReadMode::Data
            }
        };
        let task_at = at.strip_suffix("/listen").unwrap_or(at);
        let foreach = match task.get("foreach") {
            None => None,
            Some(f) => Some(self.event_loop(f, &pointer(task_at, "foreach"), depth, vars)?),
        };
        Some(TaskKind::Listen(Box::new(Listen {
            strategy,
            filters: out,
            read,
            until,
            foreach,
        })))
    }

    /// `listen.to.until`: an expression, or the events (`one`, or `any` of filters) that end
    /// the consumption.
    fn until(&mut self, u: &Value, at: &str, vars: &[&str]) -> Option<Until> {
        if u.is_string() {
            return self.expr(u, at, vars).map(Until::Holds);
        }
        let filters: Vec<(&Value, String)> = if let Some(one) = u.get("one") {
            vec![(one, pointer(at, "one"))]
        } else if let Some(Value::Array(any)) = u.get("any") {
            any.iter()
                .enumerate()
                .map(|(i, f)| (f, format!("{at}/any/{i}")))
                .collect()
        } else {
            self.unsupported(
                at,
                "an `until` of `all` events (agentry ends a consumption on one event: `one`, or `any` of several)",
            );
            return None;
        };
        if filters.is_empty() {
            self.unsupported(at, "an `until` of `any: []` (any event at all)");
            return None;
        }
        let filters: Vec<EventFilter> = filters
            .into_iter()
            .filter_map(|(f, fat)| self.event_filter(f, &fat, vars, true))
            .collect();
        Some(Until::Event(filters))
    }

    /// A `listen`'s `foreach`: `item`, `at`, `do` (its `output` and `export` are not read).
    fn event_loop(
        &mut self,
        f: &Value,
        at: &str,
        depth: usize,
        vars: &[&str],
    ) -> Option<EventLoop> {
        for key in ["output", "export"] {
            if f.get(key).is_some() {
                self.unsupported(&pointer(at, key), &format!("`foreach.{key}`"));
            }
        }
        let name = |key: &str, default: &str| {
            f.get(key)
                .and_then(Value::as_str)
                .unwrap_or(default)
                .to_owned()
        };
        let (item, index) = (name("item", "item"), name("at", "index"));
        for (key, var) in [("item", &item), ("at", &index)] {
            if !is_variable(var) {
                self.problem(&pointer(at, key), format!("{var} is not a variable name"));
            }
        }
        let mut inner: Vec<&str> = vars.to_vec();
        inner.push(&item);
        inner.push(&index);
        let Some(body) = f.get("do") else {
            self.problem(at, "a `foreach` needs a `do`");
            return None;
        };
        let body = self.task_list(body, &pointer(at, "do"), depth + 1, &inner)?;
        Some(EventLoop {
            item,
            at: index,
            body: Arc::new(body),
        })
    }

    /// One event filter: its type (a constant), its other attributes, its correlation. A
    /// filter a `listen` waits on is `listened` (the workflow declares its type).
    fn event_filter(
        &mut self,
        f: &Value,
        fat: &str,
        vars: &[&str],
        listened: bool,
    ) -> Option<EventFilter> {
        let mut with = f
            .get("with")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let Some(Value::String(event_type)) = with.remove("type") else {
            self.problem(fat, "the event filter needs `with.type`");
            return None;
        };
        if crate::expr::runtime_expression(&event_type).is_some() {
            self.problem(
                &pointer(fat, "with/type"),
                "the event type must be a constant",
            );
            return None;
        }
        let correlate = match f.get("correlate").and_then(Value::as_object) {
            None => None,
            Some(_) if !listened => {
                self.unsupported(
                    &pointer(fat, "correlate"),
                    "a correlation in `schedule.on` (a started run waits for nothing)",
                );
                None
            }
            Some(c) if c.len() == 1 => {
                let (name, corr) = c.iter().next().expect("one");
                let cat = format!("{fat}/correlate/{name}");
                let from = corr
                    .get("from")
                    .and_then(|e| self.expr(e, &pointer(&cat, "from"), &[]));
                let expect = match corr.get("expect") {
                    Some(e) => self.expr(e, &pointer(&cat, "expect"), vars),
                    None => {
                        self.unsupported(&cat, "a correlation without `expect`");
                        None
                    }
                };
                match (from, expect) {
                    (Some(from), Some(expect)) => Some(Correlation { from, expect }),
                    _ => None,
                }
            }
            Some(_) => {
                self.unsupported(&pointer(fat, "correlate"), "more than one correlation");
                None
            }
        };
        let mut attributes = Vec::new();
        for (name, want) in with {
            let matcher = match want.as_str().and_then(expr::runtime_expression) {
                Some(_) => match self.expr(&want, &format!("{fat}/with/{name}"), vars) {
                    Some(e) => AttributeMatch::Holds(e),
                    None => continue,
                },
                None => AttributeMatch::Equals(want),
            };
            attributes.push((name, matcher));
        }
        if listened {
            self.listened.push(event_type.clone());
        }
        Some(EventFilter {
            event_type,
            with: attributes,
            correlate,
        })
    }

    fn call(
        &mut self,
        call: &Value,
        with: Option<&Value>,
        at: &str,
        vars: &[&str],
    ) -> Option<TaskKind> {
        let Some(function) = call.as_str() else {
            self.problem(&pointer(at, "call"), "must be the name of a function");
            return None;
        };
        match function {
            "http" => {}
            "openapi" => return self.openapi(with, at, vars),
            "a2a" => return self.protocol_call(Protocol::A2a, with, at, vars),
            "mcp" => return self.protocol_call(Protocol::Mcp, with, at, vars),
            "grpc" | "asyncapi" => {
                self.unsupported(&pointer(at, "call"), &format!("`call: {function}`"));
                return None;
            }
            other => {
                self.problem(
                    &pointer(at, "call"),
                    format!("unknown function {other} (no catalog of custom functions yet)"),
                );
                return None;
            }
        }
        let wat = pointer(at, "with");
        let Some(with) = with.and_then(Value::as_object) else {
            self.problem(at, "`with` is required");
            return None;
        };
        let method = self.string(with, &wat, "method")?.to_ascii_uppercase();
        let Some(endpoint_v) = with.get("endpoint") else {
            self.problem(&wat, "`endpoint` is required");
            return None;
        };
        let eat = pointer(&wat, "endpoint");
        let (uri, auth_v) = match endpoint_v {
            Value::String(s) => (s.clone(), None),
            Value::Object(e) => match e.get("uri").and_then(Value::as_str) {
                Some(u) => (u.to_owned(), e.get("authentication")),
                None => {
                    self.problem(&eat, "`uri` is required");
                    return None;
                }
            },
            _ => {
                self.problem(&eat, "an endpoint is a URI or an object with `uri`");
                return None;
            }
        };
        let endpoint = match expr::runtime_expression(&uri) {
            Some(_) => Endpoint::Expression(self.expr(&Value::String(uri.clone()), &eat, vars)?),
            None => Endpoint::UriTemplate(uri),
        };
        let auth = match auth_v {
            Some(a) => Some(self.authentication(a, &pointer(&eat, "authentication"), vars)?),
            None => None,
        };
        let headers = with
            .get("headers")
            .and_then(|h| self.template(h, &pointer(&wat, "headers"), vars));
        let query = with
            .get("query")
            .and_then(|q| self.template(q, &pointer(&wat, "query"), vars));
        let body = with
            .get("body")
            .and_then(|b| self.template(b, &pointer(&wat, "body"), vars));
        let output = self.http_output(with, &wat)?;
        let redirect = with
            .get("redirect")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        Some(TaskKind::CallHttp(Box::new(HttpCall {
            method,
            endpoint,
            headers,
            query,
            body,
            output,
            redirect,
            auth,
        })))
    }

    fn protocol_call(
        &mut self,
        protocol: Protocol,
        with: Option<&Value>,
        at: &str,
        vars: &[&str],
    ) -> Option<TaskKind> {
        let wat = pointer(at, "with");
        let Some(with) = with.and_then(Value::as_object) else {
            self.problem(at, "`with` is required");
            return None;
        };
        let mut with = with.clone();
        let parameters = match with.remove("parameters") {
            Some(p) => Some(self.template(&p, &pointer(&wat, "parameters"), vars)?),
            None => None,
        };
        let problems = crate::protocols::check(protocol, &with);
        if !problems.is_empty() {
            for (inner, reason) in problems {
                self.problem(&format!("{wat}{inner}"), reason);
            }
            return None;
        }
        Some(TaskKind::CallProtocol(Box::new(ProtocolCall {
            protocol,
            with,
            parameters,
        })))
    }

    fn openapi(&mut self, with: Option<&Value>, at: &str, vars: &[&str]) -> Option<TaskKind> {
        let wat = pointer(at, "with");
        let Some(with) = with.and_then(Value::as_object) else {
            self.problem(at, "`with` is required");
            return None;
        };
        let document = match with.get("document").and_then(|d| d.get("endpoint")) {
            Some(Value::String(uri)) => uri.clone(),
            Some(Value::Object(e)) if e.get("uri").is_some_and(Value::is_string) => {
                e["uri"].as_str().unwrap_or_default().to_owned()
            }
            _ => {
                self.problem(
                    &pointer(&wat, "document"),
                    "`document.endpoint` (the document's URI) is required",
                );
                return None;
            }
        };
        if expr::runtime_expression(&document).is_some() {
            self.unsupported(
                &pointer(&wat, "document"),
                "a document URI from an expression",
            );
            return None;
        }
        let operation_id = self.string(with, &wat, "operationId")?;
        let parameters = with
            .get("parameters")
            .and_then(|p| self.template(p, &pointer(&wat, "parameters"), vars));
        let output = self.http_output(with, &wat)?;
        let redirect = with
            .get("redirect")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let auth = match with.get("authentication") {
            Some(a) => Some(self.authentication(a, &pointer(&wat, "authentication"), vars)?),
            None => None,
        };
        Some(TaskKind::CallOpenApi(Box::new(OpenApiCall {
            document,
            operation_id,
            parameters,
            output,
            redirect,
            auth,
        })))
    }

    fn http_output(&mut self, with: &Map<String, Value>, wat: &str) -> Option<HttpOutput> {
        match with.get("output").and_then(Value::as_str) {
            None | Some("content") => Some(HttpOutput::Content),
            Some("response") => Some(HttpOutput::Response),
            Some("raw") => Some(HttpOutput::Raw),
            Some(other) => {
                self.problem(&pointer(wat, "output"), format!("unknown output {other}"));
                None
            }
        }
    }

    fn authentication(&mut self, v: &Value, at: &str, vars: &[&str]) -> Option<Authentication> {
        let (v, at) = match v.get("use").and_then(Value::as_str) {
            Some(name) => match self.authentications.get(name).cloned() {
                Some(a) => (a, format!("/use/authentications/{name}")),
                None => {
                    self.problem(
                        &pointer(at, "use"),
                        format!("no authentication named {name} in `use.authentications`"),
                    );
                    return None;
                }
            },
            None => (v.clone(), at.to_owned()),
        };
        if let Some(basic) = v.get("basic") {
            let username = self.template(
                basic.get("username").unwrap_or(&Value::Null),
                &format!("{at}/basic/username"),
                vars,
            )?;
            let password = self.template(
                basic.get("password").unwrap_or(&Value::Null),
                &format!("{at}/basic/password"),
                vars,
            )?;
            return Some(Authentication::Basic { username, password });
        }
        if let Some(bearer) = v.get("bearer") {
            let token = self.template(
                bearer.get("token").unwrap_or(&Value::Null),
                &format!("{at}/bearer/token"),
                vars,
            )?;
            return Some(Authentication::Bearer { token });
        }
        self.unsupported(&at, "this authentication scheme (basic and bearer are)");
        None
    }
}

/// The arguments and the extra variables in scope.
fn vars_with<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut all: Vec<&str> = ARGUMENTS.to_vec();
    all.extend_from_slice(extra);
    all
}

/// Whether `s` can name a jq variable.
fn is_variable(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A period as a cron expression, when one can say it (seconds first when it has seconds).
pub fn every_as_cron(d: Duration) -> Option<String> {
    let secs = d.as_secs();
    if d.subsec_nanos() != 0 || secs == 0 {
        return None;
    }
    let divides = |n: u64, of: u64| n > 0 && of.is_multiple_of(n);
    if secs < 60 && divides(secs, 60) {
        return Some(format!("*/{secs} * * * * *"));
    }
    let (mins, hours) = (secs / 60, secs / 3600);
    if secs.is_multiple_of(60) && mins < 60 && divides(mins, 60) {
        return Some(format!("*/{mins} * * * *"));
    }
    if secs.is_multiple_of(3600) && hours < 24 && divides(hours, 24) {
        return Some(format!("0 */{hours} * * *"));
    }
    (secs == 86_400).then(|| "0 0 * * *".to_owned())
}

/// The longest duration a definition may state (a year).
pub const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

/// A DSL duration: an object of `days`, `hours`, `minutes`, `seconds`, `milliseconds`, or an
/// ISO 8601 duration (`PT1M30S`, `P2D`).
pub fn parse_duration(v: &Value) -> Result<Duration, String> {
    let ms: f64 = match v {
        Value::Object(m) => {
            let mut total = 0.0;
            for (k, n) in m {
                let unit = match k.as_str() {
                    "days" => 86_400_000.0,
                    "hours" => 3_600_000.0,
                    "minutes" => 60_000.0,
                    "seconds" => 1000.0,
                    "milliseconds" => 1.0,
                    other => return Err(format!("unknown duration unit {other}")),
                };
                let n = n.as_f64().filter(|n| *n >= 0.0).ok_or_else(|| format!("`{k}` must be a number of at least 0"))?;
                total += n * unit;
            }
            total
        }
        Value::String(s) => iso8601_ms(s).ok_or_else(|| format!("{s} is not an ISO 8601 duration"))?,
        _ => return Err("a duration is an object (days, hours, minutes, seconds, milliseconds) or an ISO 8601 string".into()),
    };
    let d = Duration::from_secs_f64(ms / 1000.0);
    if d > MAX_DURATION {
        return Err("a duration is at most 366 days".into());
    }
    Ok(d)
}

/// Milliseconds of an ISO 8601 duration of days and time (`P1DT2H`, `PT0.5S`); years, months
/// and weeks are refused (their length varies).
fn iso8601_ms(s: &str) -> Option<f64> {
    let rest = s.strip_prefix('P')?;
    let (date, time) = match rest.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (rest, None),
    };
    let mut total = 0.0;
    let mut any = false;
    let mut read = |part: &str, units: &[(char, f64)]| -> Option<()> {
        let mut num = String::new();
        for c in part.chars() {
            if c.is_ascii_digit() || c == '.' {
                num.push(c);
            } else {
                let (_, unit) = units.iter().find(|(u, _)| *u == c)?;
                total += num.parse::<f64>().ok()? * unit;
                num.clear();
                any = true;
            }
        }
        num.is_empty().then_some(())
    };
    read(date, &[('D', 86_400_000.0)])?;
    if let Some(t) = time {
        read(t, &[('H', 3_600_000.0), ('M', 60_000.0), ('S', 1000.0)])?;
    }
    any.then_some(total)
}
