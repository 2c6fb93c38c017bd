//! The tool trait and a closure-backed implementation.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use agentry_engine::schema::Schema;

/// What a tool call can see.
#[derive(Clone, Debug)]
pub struct ToolContext {
    pub agent_id: String,
    pub user_id: Option<String>,
    /// The verified user the call is made for (none without authentication): whoever owns
    /// what the call starts (a workflow run as a tool).
    pub owner: Option<String>,
    pub conversation_id: Option<String>,
    /// The request's context map (with `user` when authenticated).
    pub context: Map<String, Value>,
    pub cancel: CancellationToken,
    /// How deep in delegation this call is (0 for a top-level agent).
    pub depth: u32,
    /// The durable run this call belongs to (none for a call held only in memory).
    pub run_id: Option<String>,
    /// How many times this call was started, this time included: 1, or more in a durable run
    /// whose process died while the tool ran (tools run at least once).
    pub attempt: u32,
    /// Where the call reports its progress while it runs (none: the generation does not
    /// stream): see [`ToolContext::report_progress`].
    pub progress: Option<ToolProgress>,
}

impl ToolContext {
    /// Reports progress of this call (a remote agent's words, a long job's share done): it
    /// reaches the generation's stream as `tool-progress` (and a durable run's live
    /// subscribers), never the model. Dropped when the stream lags, or over
    /// [`MAX_PROGRESS_BYTES`].
    pub fn report_progress(&self, data: Value) {
        if let Some(p) = &self.progress {
            (p.0)(data);
        }
    }
}

/// The largest progress report, serialized (larger ones are dropped).
pub const MAX_PROGRESS_BYTES: usize = 16 * 1024;

/// A tool call's progress sink.
#[derive(Clone)]
pub struct ToolProgress(Arc<dyn Fn(Value) + Send + Sync>);

impl ToolProgress {
    pub fn new(f: impl Fn(Value) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Reports `data` to this sink.
    pub fn report(&self, data: Value) {
        (self.0)(data);
    }
}

impl std::fmt::Debug for ToolProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ToolProgress")
    }
}

#[async_trait]
pub trait Tool: Send + Sync + 'static {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// JSON Schema of the arguments.
    fn parameters(&self) -> &Value;
    /// Runs the tool; an `Err` is a tool error reported to the model, not a crash.
    async fn call(&self, args: Value, ctx: ToolContext) -> Result<Value, String>;
    /// When a call must wait for a person's approval before it runs (none: never).
    fn approval(&self) -> Option<&Approval> {
        None
    }
}

type ApprovalPredicate = Arc<dyn Fn(&Value) -> bool + Send + Sync>;

/// A tool's rule for calls that need a person's approval: always, or when a predicate on the
/// arguments holds; with an optional deadline, after which the request counts as denied. The
/// model is told of a denial as `<denial>: <reason>`.
#[derive(Clone)]
pub struct Approval {
    when: Option<ApprovalPredicate>,
    /// How long a request waits for an answer before it counts as denied.
    pub deadline: Option<Duration>,
    /// What the model is told before the reason of a denial.
    pub denial: Option<String>,
}

impl std::fmt::Debug for Approval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approval")
            .field("always", &self.when.is_none())
            .field("deadline", &self.deadline)
            .field("denial", &self.denial)
            .finish()
    }
}

impl Approval {
    /// Every call waits for approval.
    pub fn always() -> Self {
        Self {
            when: None,
            deadline: None,
            denial: None,
        }
    }

    /// A call waits for approval when `predicate` holds of its arguments.
    pub fn when(predicate: impl Fn(&Value) -> bool + Send + Sync + 'static) -> Self {
        Self {
            when: Some(Arc::new(predicate)),
            ..Self::always()
        }
    }

    /// A request unanswered after `deadline` counts as denied.
    pub fn within(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// What the model is told before a denial's reason (default: `Tool call <name> not
    /// approved`).
    pub fn denial(mut self, text: impl Into<String>) -> Self {
        self.denial = Some(text.into());
        self
    }

    /// Whether a call with `args` waits for approval. A predicate that panics counts as
    /// "needs approval" (fails closed).
    pub fn applies(&self, args: &Value) -> bool {
        match &self.when {
            None => true,
            Some(f) => {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(args))).unwrap_or(true)
            }
        }
    }
}

type ToolFn = Arc<
    dyn Fn(Value, ToolContext) -> Pin<Box<dyn Future<Output = Result<Value, String>> + Send>>
        + Send
        + Sync,
>;

/// A tool made of a closure, its arguments validated against its schema before each call.
pub struct FnTool {
    name: String,
    description: String,
    parameters: Value,
    schema: Option<Schema>,
    f: ToolFn,
    approval: Option<Approval>,
}

impl FnTool {
    pub fn new<F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        f: F,
    ) -> Self
    where
        F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, String>> + Send + 'static,
    {
        Self {
            name: name.into(),
            description: description.into(),
            schema: Schema::compile(parameters.clone()).ok(),
            parameters,
            f: Arc::new(move |a, c| Box::pin(f(a, c))),
            approval: None,
        }
    }

    /// Calls wait for a person's approval by `rule` (durable agent runs).
    pub fn needs_approval(mut self, rule: Approval) -> Self {
        self.approval = Some(rule);
        self
    }
}

#[async_trait]
impl Tool for FnTool {
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
        if let Some(s) = &self.schema {
            s.validate(&args)
                .map_err(|e| format!("invalid arguments for {}: {e}", self.name))?;
        }
        (self.f)(args, ctx).await
    }

    fn approval(&self) -> Option<&Approval> {
        self.approval.as_ref()
    }
}

/// Any tool, its calls waiting for a person's approval by a rule that is not its own (an MCP
/// server's tool, a remote agent, a tool an agent file declares): the same rule, deadline,
/// denial and fail-closed predicate as [`FnTool::needs_approval`].
pub struct WithApproval {
    tool: Arc<dyn Tool>,
    rule: Approval,
}

impl WithApproval {
    pub fn new(tool: Arc<dyn Tool>, rule: Approval) -> Self {
        Self { tool, rule }
    }
}

#[async_trait]
impl Tool for WithApproval {
    fn name(&self) -> &str {
        self.tool.name()
    }

    fn description(&self) -> &str {
        self.tool.description()
    }

    fn parameters(&self) -> &Value {
        self.tool.parameters()
    }

    async fn call(&self, args: Value, ctx: ToolContext) -> Result<Value, String> {
        self.tool.call(args, ctx).await
    }

    fn approval(&self) -> Option<&Approval> {
        Some(&self.rule)
    }
}
