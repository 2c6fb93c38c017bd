//! agentry-app: the application layer. Its use cases (start, suspend, resume, cancel, read and
//! list executions, re-attach, generate with an agent, read the catalogue, read the logs, manage
//! schedules) as
//! typed commands and queries on [`App`], each taking a verified [`Caller`] and a typed input
//! and answering a wire type or an [`AppError`] (a row of the error table). Who may do what ([`Policy`]), the
//! context's `user`/`userId` and the memory namespace are decided here, once, for every front
//! end: HTTP (`agentry-http`), MCP (`agentry-mcp`) and the ones to come only parse, call one
//! command and render.
//!
//! It knows no HTTP framework, no SQL and no MCP: `scripts/check-layers.sh` keeps actix, sqlx
//! and rmcp out of its dependencies.
//!
//! [`AppBuilder`] is the one composition root: it registers the agents, workflows and
//! schedules, sets the access rules and wires the metrics, and gives the `App`. The engine and
//! the agents underneath stay inside this crate: a front end asks `App`, never them.

pub mod agents;
pub mod builder;
pub mod caller;
pub mod definitions;
pub mod error;
pub mod health;
pub mod input;
pub mod limits;
pub mod logs;
pub mod operations;
pub mod policy;
pub mod queues;
pub mod routes;
pub mod runs;
pub mod schedules;
pub mod scores;
pub mod usage;
pub mod wire;
pub mod workflows;
pub mod working_memory;

use std::sync::Arc;

use agentry_agents::AgentHub;
use agentry_engine::Engine;
use agentry_metrics::Metrics;
use agentry_schedules::{InMemoryScheduleStore, ScheduleStore, Scheduler};

pub use builder::{AppBuilder, BuildError, IntoWorkflow};
pub use caller::Caller;
pub use error::{AppError, Code};
pub use policy::{ADMIN_ROLE, ExecutionPolicy, Policy, owner_or_admin};
pub use usage::UsageQuery;
pub use working_memory::WorkingMemoryQuery;

/// The application: the engine and the agents it runs, the access rules, and the metrics they
/// report to. Cheap to clone; every front end holds one.
#[derive(Clone)]
pub struct App {
    engine: Engine,
    agents: AgentHub,
    policy: Arc<Policy>,
    metrics: Arc<Metrics>,
    /// The schedules of the engine (in memory until [`App::with_schedule_store`]).
    scheduler: Scheduler,
    /// The workflows registered from documents (none read until [`App::with_definitions`]).
    definitions: Arc<definitions::Definitions>,
}

impl App {
    /// The application on an engine and agents (whose stores the host chose): the engine's
    /// `andAgent` steps run on these agents, and both report to this application's metrics.
    /// This is where the parts are joined, for [`AppBuilder`]; a front end only receives the
    /// result.
    pub(crate) fn new(engine: Engine, agents: AgentHub) -> Self {
        engine.set_agent_runner(Arc::new(agents.clone()));
        let metrics = Arc::new(Metrics::new());
        engine.set_telemetry(metrics.clone());
        agents.set_telemetry(metrics.clone());
        let scheduler = Scheduler::new(engine.clone(), Arc::new(InMemoryScheduleStore::new()));
        let app = Self {
            engine,
            agents,
            policy: Arc::new(Policy::default()),
            metrics,
            scheduler,
            definitions: Arc::default(),
        };
        app.register_run_workflows();
        app
    }

    /// The same application under these access rules.
    pub(crate) fn with_policy(mut self, policy: Policy) -> Self {
        self.policy = Arc::new(policy);
        self
    }

    /// The same application keeping its schedules in `store` (the schedules declared so far
    /// go with them).
    pub(crate) fn with_schedule_store(mut self, store: Arc<dyn ScheduleStore>) -> Self {
        self.scheduler = self.scheduler.with_store(store);
        self
    }

    /// The same application reading workflow documents with `compiler`, and keeping those
    /// deployed through the API in `store`.
    pub(crate) fn with_definitions(
        mut self,
        compiler: Arc<dyn definitions::DefinitionCompiler>,
        store: Arc<dyn agentry_engine::definition_store::DefinitionStore>,
    ) -> Self {
        self.definitions = Arc::new(definitions::Definitions::new(compiler, store));
        self
    }

    /// The same application with each user creating at most `max` schedules (under the
    /// server's 1000).
    pub(crate) fn with_max_schedules_per_user(mut self, max: u64) -> Self {
        self.scheduler = self.scheduler.with_max_per_user(max);
        self
    }

    /// The schedules: declare them ([`Scheduler::declare`]), then start the loop that fires
    /// them ([`Scheduler::start`]).
    pub fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    /// The engine underneath: for this crate only (the builder and the use cases).
    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The agents underneath: for this crate only (the builder and the use cases).
    pub(crate) fn agents(&self) -> &AgentHub {
        &self.agents
    }

    /// Cancelled when the application begins to drain (shutting down): a stream that never
    /// ends by itself (an MCP session's server messages) ends then, so that it does not hold
    /// the shutdown.
    pub fn drain_signal(&self) -> tokio_util::sync::CancellationToken {
        self.engine.drain_signal()
    }

    /// How many workflows are registered, the agents' run workflows among them.
    pub fn workflow_count(&self) -> usize {
        self.engine.workflows().len()
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The metrics the engine and the agents report to.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }
}
