//! agentry-engine: the workflow engine of agentry.
//!
//! Workflows ([`workflow`]), the execution state machine ([`state`]), the engine that runs,
//! checkpoints, suspends and resumes executions ([`engine`]), the events it emits ([`event`]),
//! the store trait it persists through ([`store`]) and the queues that bound how many run at once
//! ([`queue`]). Agents (`agentry-agents`) and schedules (`agentry-schedules`) are built on top of
//! it; it knows neither.
//!
//! This crate knows nothing of HTTP, SQL or any model vendor: it is reused by the server, by
//! tests and by any tool that wants to run workflows in-process (see
//! `cargo run -p agentry-engine --example in_process`).

pub mod clock;
pub mod definition_store;
pub mod engine;
pub mod event;
pub mod id;
pub mod queue;
pub mod record;
pub mod schema;
pub mod state;
pub mod step_type;
pub mod store;
pub mod telemetry;
pub mod workflow;

pub use engine::{AgentRunner, Engine, EngineConfig, EngineError, ExecuteOptions, RunHandle};
pub use event::{EventKind, WorkflowEvent};
pub use id::{AgentId, ExecutionId, UserId, WorkflowId};
pub use state::{ExecutionState, Status, Suspension};
pub use store::{ExecutionRecord, ExecutionStore, InMemoryExecutionStore};
pub use workflow::{Step, StepContext, StepError, StepType, Workflow, step};
