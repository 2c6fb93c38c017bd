//! The tool trait and a closure-backed implementation.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::schema::Schema;

/// What a tool call can see.
#[derive(Clone, Debug)]
pub struct ToolContext {
    pub agent_id: String,
    pub user_id: Option<String>,
    pub conversation_id: Option<String>,
    /// The request's context map (with `user` when authenticated).
    pub context: Map<String, Value>,
    pub cancel: CancellationToken,
    /// How deep in delegation this call is (0 for a top-level agent).
    pub depth: u32,
}

#[async_trait]
pub trait Tool: Send + Sync + 'static {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// JSON Schema of the arguments.
    fn parameters(&self) -> &Value;
    /// Runs the tool; an `Err` is a tool error reported to the model, not a crash.
    async fn call(&self, args: Value, ctx: ToolContext) -> Result<Value, String>;
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
        }
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
}
