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

pub mod agents;
pub mod caller;
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
pub mod wire;
pub mod workflows;

use std::sync::Arc;

use agentry_core::Engine;
use agentry_core::agent::{AgentHub, OfflineModel};
use agentry_core::schedule::{InMemoryScheduleStore, ScheduleStore, Scheduler};
use agentry_metrics::Metrics;

pub use caller::Caller;
pub use error::{AppError, Code};
pub use policy::{ADMIN_ROLE, ExecutionPolicy, Policy, owner_or_admin};

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
}

impl App {
    /// The application on an engine and agents (whose stores the host chose): the engine's
    /// `andAgent` steps run on these agents, and both report to this application's metrics.
    /// This is where the parts are joined; a front end only receives the result.
    pub fn new(engine: Engine, agents: AgentHub) -> Self {
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
        };
        app.register_run_workflows();
        app
    }

    /// An application on `engine` with no agents (the offline model, an empty registry).
    pub fn without_agents(engine: Engine) -> Self {
        Self::new(engine, AgentHub::new(Arc::new(OfflineModel), None))
    }

    /// The same application under these access rules.
    pub fn with_policy(mut self, policy: Policy) -> Self {
        self.policy = Arc::new(policy);
        self
    }

    /// The same application keeping its schedules in `store` (the schedules declared so far
    /// go with them).
    pub fn with_schedule_store(mut self, store: Arc<dyn ScheduleStore>) -> Self {
        self.scheduler = self.scheduler.with_store(store);
        self
    }

    /// The same application with each user creating at most `max` schedules (under the
    /// server's 1000).
    pub fn with_max_schedules_per_user(mut self, max: u64) -> Self {
        self.scheduler = self.scheduler.with_max_per_user(max);
        self
    }

    /// The schedules: declare them ([`Scheduler::declare`]), then start the loop that fires
    /// them ([`Scheduler::start`]).
    pub fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn agents(&self) -> &AgentHub {
        &self.agents
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The metrics the engine and the agents report to.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }
}
