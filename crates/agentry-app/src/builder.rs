//! The composition root of the application: [`AppBuilder`] joins an engine and the agents it
//! runs, registers the host's agents, workflows (and the queues they declare) and schedules,
//! sets the access rules, wires the metrics and the telemetry, and gives the [`App`] that every
//! front end serves. Registration problems (a duplicate agent, a workflow that did not build)
//! are collected and reported by [`AppBuilder::build`], so that the chain reads top to bottom.
//!
//! ```
//! use agentry_app::AppBuilder;
//! use agentry_agents::Agent;
//!
//! let app = AppBuilder::in_memory()
//!     .agent(Agent::new("helper", "Helper"))
//!     .strict(false)
//!     .build()
//!     .expect("the application");
//! assert_eq!(app.agent_count(), 1);
//! ```

use std::sync::Arc;

use agentry_agents::{Agent, AgentHub, OfflineModel};
use agentry_auth::User;
use agentry_engine::{Engine, ExecutionRecord, Workflow};
use agentry_schedules::{ScheduleSpec, ScheduleStore};

use crate::{App, ExecutionPolicy, Policy};

/// A workflow, or a workflow definition that may have failed to build.
pub trait IntoWorkflow {
    fn into_workflow(self) -> Result<Workflow, String>;
}

impl IntoWorkflow for Workflow {
    fn into_workflow(self) -> Result<Workflow, String> {
        Ok(self)
    }
}

impl IntoWorkflow for Result<Workflow, agentry_engine::workflow::DefinitionError> {
    fn into_workflow(self) -> Result<Workflow, String> {
        self.map_err(|e| e.to_string())
    }
}

/// A registration that failed: the first one is what [`AppBuilder::build`] answers.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("agent {0}")]
    Agent(String),
    #[error("workflow {0}")]
    Workflow(String),
}

/// The builder of the [`App`].
pub struct AppBuilder {
    app: App,
    strict: bool,
    execution: ExecutionPolicy,
    errors: Vec<BuildError>,
}

impl AppBuilder {
    /// The application on an engine and agents whose stores the host chose: the engine's
    /// `andAgent` steps run on these agents, and both report to the application's metrics.
    /// What was registered on them before is kept.
    pub fn new(engine: Engine, agents: AgentHub) -> Self {
        Self {
            app: App::new(engine, agents),
            strict: false,
            execution: Arc::new(crate::owner_or_admin),
            errors: Vec::new(),
        }
    }

    /// Everything in memory, with the offline model and no conversation memory: for tests and
    /// demos.
    pub fn in_memory() -> Self {
        Self::on(Engine::in_memory())
    }

    /// The application on `engine`, with the offline model and no conversation memory.
    pub fn on(engine: Engine) -> Self {
        Self::new(engine, AgentHub::new(Arc::new(OfflineModel), None))
    }

    /// Registers an agent (and, at [`AppBuilder::build`], the workflow of its durable runs).
    pub fn agent(mut self, agent: Agent) -> Self {
        if let Err(e) = self.app.agents().register(agent) {
            self.errors.push(BuildError::Agent(e.to_string()));
        }
        self
    }

    /// Registers a workflow (with the queue it declares): a [`Workflow`] or the result of its
    /// builder's `build()`.
    pub fn workflow(mut self, workflow: impl IntoWorkflow) -> Self {
        match workflow.into_workflow() {
            Ok(wf) => {
                if let Err(e) = self.app.engine().register(wf) {
                    self.errors.push(BuildError::Workflow(e.to_string()));
                }
            }
            Err(e) => self.errors.push(BuildError::Workflow(e)),
        }
        self
    }

    /// Keeps the schedules in `store` (default: in memory, lost at a restart); the schedules
    /// declared so far go with them.
    pub fn schedule_store(mut self, store: Arc<dyn ScheduleStore>) -> Self {
        self.app = self.app.with_schedule_store(store);
        self
    }

    /// Each user (a verified caller) creates at most `max` schedules (default 100, under the
    /// server's 1000); the declared schedules and those made without a provider (owned by
    /// nobody) do not count.
    pub fn max_schedules_per_user(mut self, max: u64) -> Self {
        self.app = self.app.with_max_schedules_per_user(max);
        self
    }

    /// Declares a schedule in code: written to the store (created, or given this definition
    /// and left in its state) when the scheduler starts (`App::scheduler().start()`, which
    /// `agentry-server` calls before it serves).
    pub fn schedule(self, spec: ScheduleSpec) -> Self {
        self.app.scheduler().declare(spec);
        self
    }

    /// Strict mode (`AGENTRY_AUTH_STRICT=1`): an execution is only for the user who started it
    /// or an admin (see [`AppBuilder::execution_policy`]); the logs only for admins. Which
    /// routes then need a token is the front ends' (`agentry-http` reads it from
    /// [`App::policy`]).
    pub fn strict(mut self, yes: bool) -> Self {
        self.strict = yes;
        self
    }

    /// Reads workflow documents with `compiler` (the definitions folder's and those deployed
    /// through the API), keeping the deployed ones in `store`.
    pub fn definitions(
        mut self,
        compiler: Arc<dyn crate::definitions::DefinitionCompiler>,
        store: Arc<dyn agentry_engine::definition_store::DefinitionStore>,
    ) -> Self {
        self.app = self.app.with_definitions(compiler, store);
        self
    }

    /// Replaces strict mode's ownership rule (the owner, or a user with the `admin` role): `f`
    /// gets the verified user and the execution and says whether that user may read or act on it.
    pub fn execution_policy(
        mut self,
        f: impl Fn(&User, &ExecutionRecord) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.execution = Arc::new(f);
        self
    }

    /// The application, or the first registration that failed.
    pub fn build(mut self) -> Result<App, BuildError> {
        if let Some(e) = self.errors.drain(..).next() {
            return Err(e);
        }
        let app = self.app.with_policy(Policy {
            strict: self.strict,
            execution: self.execution,
        });
        // The run workflows of the agents registered after `AppBuilder::new`.
        app.register_run_workflows();
        Ok(app)
    }
}
