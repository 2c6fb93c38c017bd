//! The engine: runs executions step by step, checkpoints after every step, emits events,
//! suspends and resumes.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use futures::future::{BoxFuture, select_all, try_join_all};
use serde_json::{Map, Value, json};
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, SystemClock};
use crate::event::{EventKind, WorkflowEvent};
use crate::id::{ExecutionId, UserId, WorkflowId};
use crate::queue::Queue;
use crate::state::{
    Cancellation, ExecutionState, Status, SuspendRequest, Suspension, Transition, TransitionError,
    transition,
};
use crate::store::{
    AttemptFailure, Claim, ExecutionRecord, ExecutionStore, InMemoryExecutionStore, Lease,
    ListQuery, Progress, StepRecord, StepStatus, StoreError,
};
use crate::telemetry::{NoTelemetry, Telemetry};
use crate::workflow::{ForEachItem, Step, StepContext, StepError, StepJournal, StepKind, Workflow};

mod crash;
mod dispatch;
mod events;
mod journal;
mod mailbox;
mod recovery;
mod repair;
mod run;
#[cfg(test)]
mod tests;

pub use crash::{CrashFn, CrashHook, CrashPoint};
pub use events::WAKE_ALL;
use journal::Deferred;
pub use journal::{Journal, entry_id};
pub use mailbox::{
    Delivered, Delivery, EVENT_RETENTION, EventDelivery, MAX_EVENT_BYTES, MAX_EVENT_KEY_CHARS,
    MAX_PENDING_EVENTS, MailboxEvent, Published, mailbox,
};
pub use repair::{FORKED_FROM, ForkRequest};
pub use run::is_wake_record;
use run::{Entry, LiveRun, Woken};

/// Runs an agent for an `andAgent` step. The agents layer implements it.
#[async_trait]
pub trait AgentRunner: Send + Sync + 'static {
    /// Runs `agent_id` on `prompt` with the execution's context map; returns the agent's answer.
    async fn run_agent(
        &self,
        agent_id: &str,
        prompt: Value,
        context: &Map<String, Value>,
        cancel: CancellationToken,
    ) -> Result<Value, String>;
}

/// Why the engine refused or failed an operation.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("Workflow {0} not found")]
    WorkflowNotFound(String),
    #[error("Workflow {0} is already registered")]
    DuplicateWorkflow(String),
    #[error("Input validation failed: {0}")]
    InvalidInput(String),
    #[error("Invalid executionId: {0}")]
    InvalidExecutionId(String),
    /// An option the store cannot key by (a user id with the NUL character).
    #[error("{0}")]
    InvalidOptions(String),
    /// The id is taken by an execution of another workflow, input or owner (the same ones
    /// rejoin it instead: the idempotent start).
    #[error("Execution {0} already exists with another workflow or input")]
    ExecutionExists(String),
    /// This process lost its lease on the execution: another one runs it now, and this one
    /// wrote nothing more for it.
    #[error("Execution {0} continues in another process")]
    LeaseLost(String),
    /// This process is shutting down: it checkpointed the execution and released it to another
    /// process (or to itself, restarted), which continues it.
    #[error("Execution {0} continues on another server: this one is shutting down")]
    HandedOver(String),
    #[error("Execution {execution_id} of workflow {workflow_id} not found")]
    ExecutionNotFound {
        workflow_id: String,
        execution_id: String,
    },
    /// No execution has this id (looked up without its workflow).
    #[error("Execution {0} not found")]
    UnknownExecution(String),
    #[error("Execution {id} cannot be suspended: {reason}")]
    NotSuspendable { id: String, reason: String },
    #[error("Execution {id} is not suspended (status: {status})")]
    NotSuspended { id: String, status: Status },
    #[error("Execution {id} cannot be cancelled: it is {status}")]
    NotCancellable { id: String, status: Status },
    /// A timer that is not due (any more): the execution was resumed meanwhile.
    #[error("Execution {0} has no deadline that passed")]
    NotDue(String),
    /// The execution was cancelled while this process ran it: it stopped, writing nothing more.
    #[error("Execution {0} was cancelled")]
    Cancelled(String),
    #[error("Resume data validation failed: {0}")]
    InvalidResumeData(String),
    #[error("Step {step_id} not found in workflow {workflow_id}")]
    UnknownStep {
        workflow_id: String,
        step_id: String,
    },
    /// This process is draining before it stops: it starts and resumes nothing more (another
    /// replica, or this one restarted, will).
    #[error(
        "This server is shutting down: send the request again (to another replica, or after the restart)"
    )]
    ShuttingDown,
    #[error("Execution {0} is being changed by too many writers at once")]
    Contention(String),
    /// The event is not declared by the workflow (or, sent by key, by any workflow).
    #[error("{}", match workflow_id {
        Some(w) => format!("Workflow {w} declares no event {name}"),
        None => format!("No workflow declares the event {name}"),
    })]
    UnknownEvent {
        workflow_id: Option<String>,
        name: String,
    },
    #[error("Event validation failed: {0}")]
    InvalidEventData(String),
    /// An event for an execution that ended: nothing will ever take it.
    #[error("Execution {id} is {status}: it takes no more events")]
    EventAfterEnd { id: String, status: Status },
    #[error("Execution {0} has too many events waiting in its mailbox")]
    MailboxFull(String),
    /// The execution's mailbox holds as many bytes of events as it may.
    #[error(
        "Execution {id}'s mailbox holds {limit} bytes of events already (AGENTRY_MAILBOX_MAX_BYTES)"
    )]
    MailboxTooLarge { id: String, limit: u64 },
    /// The events kept by key are at a cap (per key or in all): a sending passes again once
    /// older ones leave the retention window.
    #[error("Too many events kept: {0}")]
    TooManyEvents(String),
    /// A retry of an execution that did not fail.
    #[error("Execution {id} cannot be retried: it is {status} (only a failed execution can)")]
    NotRetryable { id: String, status: Status },
    #[error("Execution {id} cannot be forked there: {reason}")]
    NotForkable { id: String, reason: String },
    /// The execution started on a version of its workflow this server does not have: a
    /// server that has it continues it.
    #[error(
        "Execution of workflow {workflow_id} version {version} needs a server that has that version"
    )]
    VersionUnavailable {
        workflow_id: String,
        version: String,
    },
    /// A change found nothing to write (a closure of a write says so; never answered).
    #[error("nothing to write")]
    Unchanged,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Internal(String),
}

/// A version of a workflow and its executions in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionInFlight {
    /// `None`: the executions recorded before versions.
    pub version: Option<String>,
    /// Whether new executions start on it here.
    pub current: bool,
    /// Whether this process can continue its executions.
    pub registered: bool,
    /// How many of its executions are queued, running or suspended.
    pub in_flight: u64,
}

/// Options of an execute call.
#[derive(Debug, Clone, Default)]
pub struct ExecuteOptions {
    pub execution_id: Option<ExecutionId>,
    pub user_id: Option<UserId>,
    /// The context the steps see, as the caller made it (with `user`, `userId` and
    /// `conversationId` when it has them; the engine adds only its trace).
    pub context: Map<String, Value>,
    /// The verified user starting the execution (its owner), when authentication is on.
    pub owner: Option<UserId>,
    /// When the id is taken by the same execution (a retried start): replay only its events
    /// after this number (a client's `Last-Event-ID`).
    pub last_event_id: Option<i64>,
    /// Its priority in its workflow's queue (a queued workflow's; else the input's, else 0).
    pub priority: Option<i64>,
    /// The version to start (default: the newest registered); one this process does not have
    /// is [`EngineError::WorkflowNotFound`] naming it.
    pub version: Option<String>,
}

/// Engine settings.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// How long a suspend request waits for the execution to reach a step boundary.
    pub suspend_wait: Duration,
    /// This process's name in the leases it holds (`AGENTRY_NODE_ID`).
    pub node_id: String,
    /// How long this process may stay silent before another takes its executions over
    /// (`AGENTRY_LEASE_TTL`); it renews its leases every third of it.
    pub lease_ttl: Duration,
    /// Fault injection for durability tests (`AGENTRY_CRASH_AT`); none in production.
    pub crash_hook: Option<CrashHook>,
    /// How executions join distributed traces; `None` when traces are not exported.
    pub trace: Option<Arc<dyn crate::telemetry::TraceContext>>,
    /// How long a client waiting on a run ([`RunHandle::finish_for_client`]) bears with a
    /// database that does not take the run's writes (`AGENTRY_DB_TIMEOUT`).
    pub db_patience: Duration,
    /// What an execution's mailbox and the events kept by key may hold.
    pub event_limits: EventLimits,
}

/// What events may hold in memory and in the database: an execution's mailbox (its bytes; its
/// untaken events are [`MAX_PENDING_EVENTS`]), and the events sent by key kept for the
/// retention window, per name and key and in all (their number and bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventLimits {
    /// The bytes of the events (taken or not) one execution's mailbox holds
    /// (`AGENTRY_MAILBOX_MAX_BYTES`, 1 MiB).
    pub mailbox_bytes: u64,
    /// Events kept per name and key (`AGENTRY_EVENTS_MAX_PER_KEY`, 100).
    pub kept_per_key: u64,
    /// Their bytes per name and key (`AGENTRY_EVENTS_MAX_BYTES_PER_KEY`, 1 MiB).
    pub kept_bytes_per_key: u64,
    /// Events kept in all (`AGENTRY_EVENTS_MAX`, 10,000).
    pub kept: u64,
    /// Their bytes in all (`AGENTRY_EVENTS_MAX_BYTES`, 64 MiB).
    pub kept_bytes: u64,
}

impl Default for EventLimits {
    fn default() -> Self {
        Self {
            mailbox_bytes: 1 << 20,
            kept_per_key: 100,
            kept_bytes_per_key: 1 << 20,
            kept: 10_000,
            kept_bytes: 64 << 20,
        }
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            suspend_wait: Duration::from_secs(120),
            node_id: "local".into(),
            lease_ttl: Duration::from_secs(10),
            crash_hook: None,
            trace: None,
            db_patience: Duration::from_secs(5),
            event_limits: EventLimits::default(),
        }
    }
}

/// How many orphaned executions one recovery pass claims at most.
const CLAIM_BATCH: u32 = 100;

/// The first pause of a run before it tries a write the database did not take again; each
/// pause doubles, up to [`DB_RETRY_MAX`].
const DB_RETRY_FIRST: Duration = Duration::from_millis(20);
/// The longest pause between two tries: a database that is back is written to within it.
const DB_RETRY_MAX: Duration = Duration::from_millis(500);

/// A run in progress: its events as they happen and its final record.
pub struct RunHandle {
    pub execution_id: ExecutionId,
    pub events: mpsc::UnboundedReceiver<WorkflowEvent>,
    pub outcome: JoinHandle<Result<ExecutionRecord, EngineError>>,
    /// `true` while the run waits for a database that does not take its writes.
    pub(super) stalled: tokio::sync::watch::Receiver<bool>,
    /// How long a client waits for a stalled run ([`EngineConfig::db_patience`]).
    pub(super) patience: Duration,
    /// For an execution of a queued workflow: how long a client that waits for its end waits
    /// (its queue's [`crate::queue::Queue::wait`]), before it answers with where it stands.
    pub queue_wait: Option<Duration>,
}

impl RunHandle {
    /// Waits for the run to stop (completed, suspended or error).
    pub async fn finish(self) -> Result<ExecutionRecord, EngineError> {
        Self::ended(self.outcome.await)
    }

    /// [`RunHandle::finish`] for a client that waits: once the run has waited for the
    /// database for [`EngineConfig::db_patience`], the answer is
    /// [`StoreError::Unavailable`] (the run goes on, durable, and ends once the database is
    /// back; the same start again rejoins it).
    pub async fn finish_for_client(mut self) -> Result<ExecutionRecord, EngineError> {
        loop {
            let stalled = *self.stalled.borrow_and_update();
            let waited = async {
                if stalled {
                    tokio::time::sleep(self.patience).await;
                } else {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                ended = &mut self.outcome => return Self::ended(ended),
                _ = waited => {
                    return Err(EngineError::Store(StoreError::Unavailable(format!(
                        "execution {} waits for the database; it goes on once the database is back",
                        self.execution_id
                    ))));
                }
                changed = self.stalled.changed() => {
                    if changed.is_err() {
                        return Self::ended(self.outcome.await);
                    }
                }
            }
        }
    }

    fn ended(
        joined: Result<Result<ExecutionRecord, EngineError>, tokio::task::JoinError>,
    ) -> Result<ExecutionRecord, EngineError> {
        match joined {
            Ok(r) => r,
            Err(e) => Err(EngineError::Internal(format!("execution task failed: {e}"))),
        }
    }
}

/// The workflow engine. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    workflows: RwLock<Vec<Arc<Workflow>>>,
    store: Arc<dyn ExecutionStore>,
    clock: Arc<dyn Clock>,
    agents: RwLock<Option<Arc<dyn AgentRunner>>>,
    live: Mutex<HashMap<String, LiveRun>>,
    all_events: broadcast::Sender<WorkflowEvent>,
    /// The ids of executions whose log grew or whose status changed.
    wakeups: broadcast::Sender<Arc<str>>,
    config: EngineConfig,
    shutdown: CancellationToken,
    /// Set when a graceful shutdown begins: runs stop at their next step boundary.
    draining: CancellationToken,
    /// Who is told of every durable write and takeover.
    telemetry: RwLock<Arc<dyn Telemetry>>,
    /// Wakes this process's dispatcher: an execution entered a queue, or left a slot.
    queue_nudge: tokio::sync::Notify,
    /// Whether this process's dispatcher runs.
    dispatching: std::sync::atomic::AtomicBool,
}

/// What a write does when the database does not answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Patience {
    /// A client waits for the answer: the failure is answered at once (a 503; the client
    /// tries again).
    Request,
    /// A run's write: tried again, pausing longer each time, until the database takes it or
    /// this process shuts down (the run is handed over). A database that went away never ends
    /// a run in error.
    Run,
}

/// What wakes a suspended execution.
enum Wake<'a> {
    /// A resume with its data (and the step to resume from, when not the suspended one).
    Resume(Value, Option<&'a str>),
    /// Its suspension's deadline passed.
    Deadline,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Execution ids are used in paths: keep them to a safe alphabet.
fn check_execution_id(id: &str) -> Result<(), EngineError> {
    // The rule of agent and workflow ids, `:` (for ids such as `order:42`) and `@` (a
    // schedule's fire, `<scheduleId>@<fire time>`): both may stand in a URL path unescaped.
    if crate::id::is_execution_id(id) {
        Ok(())
    } else {
        Err(EngineError::InvalidExecutionId(format!(
            "use 1 to {} letters, digits, '-', '_', '.', ':' or '@'",
            crate::id::MAX_KEY_CHARS
        )))
    }
}

impl Engine {
    /// An engine over `store` with the wall clock and default settings.
    pub fn new(store: Arc<dyn ExecutionStore>) -> Self {
        Self::with(store, Arc::new(SystemClock), EngineConfig::default())
    }

    /// An engine that keeps executions in memory.
    pub fn in_memory() -> Self {
        Self::new(Arc::new(InMemoryExecutionStore::new()))
    }

    pub fn with(
        store: Arc<dyn ExecutionStore>,
        clock: Arc<dyn Clock>,
        config: EngineConfig,
    ) -> Self {
        let (all_events, _) = broadcast::channel(1024);
        let (wakeups, _) = broadcast::channel(1024);
        Self {
            inner: Arc::new(Inner {
                workflows: RwLock::new(Vec::new()),
                store,
                clock,
                agents: RwLock::new(None),
                live: Mutex::new(HashMap::new()),
                all_events,
                wakeups,
                config,
                shutdown: CancellationToken::new(),
                draining: CancellationToken::new(),
                telemetry: RwLock::new(Arc::new(NoTelemetry)),
                queue_nudge: tokio::sync::Notify::new(),
                dispatching: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    /// Registers a workflow. Another version of a registered id is kept beside it: executions
    /// started on either are continued here, and new ones start on the version registered last
    /// (register the new definition after the old one it drains). The same id and version twice
    /// is [`EngineError::DuplicateWorkflow`].
    pub fn register(&self, wf: impl Into<Arc<Workflow>>) -> Result<(), EngineError> {
        let wf = wf.into();
        let mut wfs = self
            .inner
            .workflows
            .write()
            .unwrap_or_else(|p| p.into_inner());
        if wfs
            .iter()
            .any(|w| w.id() == wf.id() && w.version() == wf.version())
        {
            return Err(EngineError::DuplicateWorkflow(format!(
                "{} (version {})",
                wf.id(),
                wf.version()
            )));
        }
        wfs.push(wf);
        Ok(())
    }

    /// Forgets one version of a workflow (a definition deployed as data and deleted): new
    /// executions start on the newest version left; one still running on it can no longer be
    /// continued here. Answers the definition forgotten (register it again to undo).
    pub fn unregister(&self, id: &WorkflowId, version: &str) -> Option<Arc<Workflow>> {
        let mut wfs = self
            .inner
            .workflows
            .write()
            .unwrap_or_else(|p| p.into_inner());
        let at = wfs
            .iter()
            .position(|w| w.id() == id.as_str() && w.version() == version)?;
        Some(wfs.remove(at))
    }

    /// Sets who is told of every durable write and takeover (metrics).
    pub fn set_telemetry(&self, telemetry: Arc<dyn Telemetry>) {
        *self
            .inner
            .telemetry
            .write()
            .unwrap_or_else(|p| p.into_inner()) = telemetry;
    }

    pub(crate) fn telemetry(&self) -> Arc<dyn Telemetry> {
        self.inner
            .telemetry
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Sets what runs `andAgent` steps.
    pub fn set_agent_runner(&self, runner: Arc<dyn AgentRunner>) {
        *self.inner.agents.write().unwrap_or_else(|p| p.into_inner()) = Some(runner);
    }

    /// Every registered definition, each version of an id apart, in registration order.
    fn all_versions(&self) -> Vec<Arc<Workflow>> {
        self.inner
            .workflows
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Registered workflows, in the order their ids were first registered, each in its newest
    /// version (the one new executions start on).
    pub fn workflows(&self) -> Vec<Arc<Workflow>> {
        let mut newest: Vec<Arc<Workflow>> = Vec::new();
        for wf in self.all_versions() {
            match newest.iter_mut().find(|w| w.id() == wf.id()) {
                Some(slot) => *slot = wf,
                None => newest.push(wf),
            }
        }
        newest
    }

    /// The registered versions of workflow `id`, in registration order (the newest last).
    pub fn versions(&self, id: &WorkflowId) -> Vec<Arc<Workflow>> {
        self.all_versions()
            .into_iter()
            .filter(|w| w.id() == id.as_str())
            .collect()
    }

    /// Each version of workflow `id` this process has or that executions still run or wait on
    /// (registered ones first, in registration order), with how many are in flight on it.
    pub async fn versions_in_flight(
        &self,
        id: &WorkflowId,
    ) -> Result<Vec<VersionInFlight>, EngineError> {
        let registered = self.versions(id);
        let newest = registered.last().map(|w| w.version().to_owned());
        let mut counts = self.inner.store.in_flight_by_version(id).await?;
        let mut out: Vec<VersionInFlight> = registered
            .iter()
            .map(|w| {
                let version = Some(w.version().to_owned());
                let in_flight = counts
                    .iter()
                    .position(|(v, _)| *v == version)
                    .map_or(0, |i| counts.remove(i).1);
                VersionInFlight {
                    current: version == newest,
                    version,
                    registered: true,
                    in_flight,
                }
            })
            .collect();
        out.extend(
            counts
                .into_iter()
                .map(|(version, in_flight)| VersionInFlight {
                    // Recorded before versions: continued on the newest, which this process has.
                    registered: version.is_none() && newest.is_some(),
                    current: false,
                    version,
                    in_flight,
                }),
        );
        Ok(out)
    }

    /// The registered workflow `id`, in its newest version.
    pub fn workflow(&self, id: &WorkflowId) -> Option<Arc<Workflow>> {
        self.registered(id)
    }

    /// [`Engine::workflow`] by the id's text (the ids of stored records).
    fn registered(&self, id: &str) -> Option<Arc<Workflow>> {
        self.inner
            .workflows
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .rev()
            .find(|w| w.id() == id)
            .cloned()
    }

    /// The definition an execution continues on: the version it started on (the newest for
    /// an execution recorded before versions), if this process has it.
    fn registered_for(&self, rec: &ExecutionRecord) -> Option<Arc<Workflow>> {
        match &rec.workflow_version {
            Some(version) => self
                .all_versions()
                .into_iter()
                .find(|w| w.id() == rec.workflow_id && w.version() == version),
            None => self.registered(&rec.workflow_id),
        }
    }

    /// [`Engine::registered_for`], or [`EngineError::VersionUnavailable`] naming the version.
    fn version_of(&self, rec: &ExecutionRecord) -> Result<Arc<Workflow>, EngineError> {
        self.registered_for(rec)
            .ok_or_else(|| EngineError::VersionUnavailable {
                workflow_id: rec.workflow_id.clone(),
                version: rec.workflow_version.clone().unwrap_or_default(),
            })
    }

    /// The workflow keys ([`crate::store::workflow_key`]) of the executions this process can
    /// continue: each registered version's, and each id's without a version (recorded before
    /// versions, continued on the newest).
    fn runnable_keys(&self) -> Vec<String> {
        let all = self.all_versions();
        let mut keys: Vec<String> = all
            .iter()
            .map(|w| crate::store::workflow_key(w.id(), Some(w.version())))
            .collect();
        for w in &all {
            let legacy = crate::store::workflow_key(w.id(), None);
            if !keys.contains(&legacy) {
                keys.push(legacy);
            }
        }
        keys
    }

    /// This process's node id.
    pub fn node_id(&self) -> &str {
        &self.inner.config.node_id
    }

    /// A lease for this process, one epoch after `previous`.
    fn new_lease(&self, previous: i64) -> Lease {
        Lease {
            node: self.inner.config.node_id.clone(),
            epoch: previous + 1,
            ttl: self.inner.config.lease_ttl,
        }
    }

    fn require_workflow(&self, id: &str) -> Result<Arc<Workflow>, EngineError> {
        self.registered(id)
            .ok_or_else(|| EngineError::WorkflowNotFound(id.to_owned()))
    }

    /// The clock this engine reads and waits on (a schedule's ticks are read on it too).
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    pub fn store(&self) -> &Arc<dyn ExecutionStore> {
        &self.inner.store
    }

    /// Every event of every execution (for logs and dashboards); slow receivers may lag.
    pub fn all_events(&self) -> broadcast::Receiver<WorkflowEvent> {
        self.inner.all_events.subscribe()
    }

    /// Starts an execution and returns at once with its live events.
    pub async fn start(
        &self,
        workflow_id: &WorkflowId,
        input: Value,
        options: ExecuteOptions,
    ) -> Result<RunHandle, EngineError> {
        let wf = match &options.version {
            Some(version) => self
                .versions(workflow_id)
                .into_iter()
                .find(|w| w.version() == version)
                .ok_or_else(|| {
                    EngineError::WorkflowNotFound(format!("{workflow_id} (version {version})"))
                })?,
            None => self.require_workflow(workflow_id)?,
        };
        wf.validate_input(&input)
            .map_err(EngineError::InvalidInput)?;
        self.refuse_when_draining()?;
        let id = match options.execution_id {
            Some(id) => {
                check_execution_id(&id)?;
                id.into_string()
            }
            None => uuid::Uuid::now_v7().to_string(),
        };
        // The context is the caller's, as its application layer made it (`agentry-app` puts
        // the verified user, `userId` and `conversationId` in it); the engine adds only the
        // trace it starts in.
        let mut context = options.context;
        let user_id = options.user_id.map(UserId::into_string);
        let owner = options.owner.map(UserId::into_string);
        for (field, value) in [("userId", &user_id), ("owner", &owner)] {
            if let Some(v) = value {
                crate::id::refuse_nul(field, v).map_err(EngineError::InvalidOptions)?;
            }
        }
        // The trace this execution starts in, for its later runs to link to.
        if let Some(traceparent) = self.inner.config.trace.as_ref().and_then(|t| t.current()) {
            context.insert(
                crate::telemetry::TRACEPARENT.into(),
                Value::String(traceparent),
            );
        }
        let now = self.inner.clock.now();
        let place = wf
            .queue()
            .map(|q| q.place(&input, options.priority, now))
            .transpose()
            .map_err(EngineError::InvalidInput)?;
        let mut record = ExecutionRecord {
            id: id.clone(),
            workflow_id: wf.id().to_owned(),
            workflow_version: Some(wf.version().to_owned()),
            state: ExecutionState::Idle,
            input,
            context,
            user_id,
            owner,
            lease: None,
            start_at: now,
            updated_at: now,
            progress: Progress::default(),
            version: 1,
            last_event: 0,
            queue: place,
        };
        let kinds = self.admit(&wf, &mut record)?;
        let events = self.numbered(&mut record, 0, kinds);
        let began = std::time::Instant::now();
        match self.inner.store.insert(&record, &events).await {
            Err(StoreError::Duplicate(_)) => {
                let mut handle = self
                    .rejoin(&record, options.last_event_id.unwrap_or(0))
                    .await?;
                handle.queue_wait = wf.queue().map(Queue::wait);
                Ok(handle)
            }
            Err(e) => Err(e.into()),
            Ok(()) => {
                self.telemetry()
                    .committed(&record, &events, began.elapsed());
                Ok(self.entered(wf, record, events))
            }
        }
    }

    /// A new execution's first state, set in `record`, and the events of its insert: queued
    /// in its workflow's queue, or running here from its first step (recorded as begun with
    /// the insert).
    pub(super) fn admit(
        &self,
        wf: &Workflow,
        record: &mut ExecutionRecord,
    ) -> Result<Vec<EventKind>, EngineError> {
        let internal = |e: TransitionError| EngineError::Internal(e.to_string());
        if let Some(place) = &record.queue {
            record.state = transition(&record.state, Transition::Enqueue).map_err(internal)?;
            return Ok(vec![EventKind::WorkflowQueued {
                queue: place.name.clone(),
                key: place.key.clone(),
                priority: place.priority,
            }]);
        }
        record.state = transition(&record.state, Transition::Start).map_err(internal)?;
        record.lease = Some(self.new_lease(0));
        let mut kinds = vec![EventKind::WorkflowStart {
            input: record.input.clone(),
            resumed: !record.progress.steps.is_empty(),
        }];
        let at = record.progress.next_step;
        if let Some(step) = wf.steps().get(at) {
            let input = Self::input_for(wf, record, at);
            self.begin(&mut record.progress, step, input.clone());
            kinds.push(Self::step_start(step, at, input));
        }
        Ok(kinds)
    }

    /// A handle on an execution just written with `events` (inserted, or queued again): its
    /// run here, or (queued) a follower of its log from those events on while the dispatcher
    /// starts it wherever there is room.
    pub(super) fn entered(
        &self,
        wf: Arc<Workflow>,
        record: ExecutionRecord,
        events: Vec<WorkflowEvent>,
    ) -> RunHandle {
        if record.state.status() == Status::Queued {
            let before = record.last_event - events.len() as i64;
            self.publish(events);
            self.nudge_queues();
            let mut handle = self.follower(&record.id, before);
            handle.queue_wait = wf.queue().map(Queue::wait);
            return handle;
        }
        let entry = Entry {
            step: record.progress.next_step,
            resume: None,
            begun: true,
            announce: events,
            timed_out: false,
        };
        self.spawn_run(wf, record, entry)
    }

    /// The idempotent start: the same `executionId` again, for the same workflow with the same
    /// input (and the same owner), rejoins that execution: its handle replays the events after
    /// `after` and follows the rest (or gives its `workflow-result` at once when it is not
    /// running), and `finish` answers like the first call would now. Anything else under that id
    /// is [`EngineError::ExecutionExists`].
    async fn rejoin(
        &self,
        attempt: &ExecutionRecord,
        after: i64,
    ) -> Result<RunHandle, EngineError> {
        let exists = || EngineError::ExecutionExists(attempt.id.clone());
        let found = self
            .inner
            .store
            .get(&attempt.id)
            .await?
            .ok_or_else(exists)?;
        let same = found.workflow_id == attempt.workflow_id
            && found.input == attempt.input
            && found.owner == attempt.owner;
        if !same {
            return Err(exists());
        }
        tracing::info!(execution_id = %found.id, status = %found.state.status(), "execution rejoined");
        self.adopt(found);
        Ok(self.follower(&attempt.id, after))
    }

    /// Runs `found` here if it is this process's and nobody runs it: a start whose insert was
    /// committed although the database failed to say so (the start answered 503, and this is
    /// the client's retry). Without this, it would wait for its lease to expire.
    fn adopt(&self, found: ExecutionRecord) {
        let ours = found
            .lease
            .as_ref()
            .is_some_and(|l| l.node == self.inner.config.node_id);
        if found.state.status() != Status::Running || !ours || self.is_draining() {
            return;
        }
        let Some(wf) = self.registered_for(&found) else {
            return;
        };
        let id = found.id.clone();
        let entry = Entry {
            step: found.progress.next_step.min(wf.steps().len()),
            resume: None,
            // Never written since its insert: the insert recorded the first step's start.
            begun: found.version == 1,
            announce: Vec::new(),
            timed_out: false,
        };
        if self
            .spawn_run_if(wf, found, entry, |live| !live.contains_key(&id))
            .is_some()
        {
            tracing::info!(execution_id = %id, "an execution whose start was in doubt runs now");
        }
    }

    /// Runs an execution to its end (completed, suspended or error).
    pub async fn execute(
        &self,
        workflow_id: &WorkflowId,
        input: Value,
        options: ExecuteOptions,
    ) -> Result<ExecutionRecord, EngineError> {
        self.start(workflow_id, input, options)
            .await?
            .finish()
            .await
    }

    /// Reads an execution, checking it belongs to `workflow_id`.
    pub async fn state(
        &self,
        workflow_id: &WorkflowId,
        execution_id: &ExecutionId,
    ) -> Result<ExecutionRecord, EngineError> {
        self.require_workflow(workflow_id)?;
        self.load(workflow_id, execution_id).await
    }

    /// Reads an execution of `workflow_id` as it stood at one moment.
    async fn load(
        &self,
        workflow_id: &str,
        execution_id: &str,
    ) -> Result<ExecutionRecord, EngineError> {
        let found = self.inner.store.get(execution_id).await?;
        Self::of_workflow(found, workflow_id, execution_id)
    }

    /// Reads an execution of `workflow_id` to change it ([`ExecutionStore::get_to_update`]:
    /// every change is a compare-and-set on the version read).
    async fn load_to_update(
        &self,
        workflow_id: &str,
        execution_id: &str,
    ) -> Result<ExecutionRecord, EngineError> {
        let found = self.inner.store.get_to_update(execution_id).await?;
        Self::of_workflow(found, workflow_id, execution_id)
    }

    /// Reads an execution of `workflow_id` to continue it in this process (resume, event, retry),
    /// with the definition of the version it started on: refused while this process drains, or
    /// when it lacks that version ([`EngineError::VersionUnavailable`]).
    async fn load_to_continue(
        &self,
        workflow_id: &str,
        execution_id: &str,
    ) -> Result<(ExecutionRecord, Arc<Workflow>), EngineError> {
        self.require_workflow(workflow_id)?;
        self.refuse_when_draining()?;
        let current = self.load_to_update(workflow_id, execution_id).await?;
        let wf = self.version_of(&current)?;
        Ok((current, wf))
    }

    /// `found` when it is an execution of `workflow_id`.
    fn of_workflow(
        found: Option<ExecutionRecord>,
        workflow_id: &str,
        execution_id: &str,
    ) -> Result<ExecutionRecord, EngineError> {
        let not_found = || EngineError::ExecutionNotFound {
            workflow_id: workflow_id.to_owned(),
            execution_id: execution_id.to_owned(),
        };
        let rec = found.ok_or_else(not_found)?;
        if rec.workflow_id != workflow_id {
            return Err(not_found());
        }
        Ok(rec)
    }

    /// Asks a running execution to suspend at its next step boundary and waits until it has
    /// (or until the configured wait runs out, when the record is returned still running with
    /// the request pending).
    pub async fn suspend(
        &self,
        workflow_id: &WorkflowId,
        execution_id: &ExecutionId,
        reason: String,
    ) -> Result<ExecutionRecord, EngineError> {
        self.require_workflow(workflow_id)?;
        let current = self.load_to_update(workflow_id, execution_id).await?;
        let request = SuspendRequest {
            requested_at: self.inner.clock.now(),
            reason,
        };
        let id = execution_id.to_owned();
        self.update(Some(current), &id, Patience::Request, |r, _| {
            let state =
                transition(&r.state, Transition::RequestSuspend(request.clone())).map_err(|e| {
                    EngineError::NotSuspendable {
                        id: r.id.clone(),
                        reason: e.to_string(),
                    }
                })?;
            Ok(ExecutionRecord { state, ..r.clone() })
        })
        .await?;
        let deadline = tokio::time::Instant::now() + self.inner.config.suspend_wait;
        loop {
            let rec = self.load(workflow_id, execution_id).await?;
            match rec.state.status() {
                Status::Suspended => return Ok(rec),
                Status::Running if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Status::Running => return Ok(rec),
                other => {
                    return Err(EngineError::NotSuspendable {
                        id: rec.id,
                        reason: format!(
                            "execution is {other}: it ended before reaching a step boundary"
                        ),
                    });
                }
            }
        }
    }

    /// Resumes a suspended execution from its suspended step (or from `step_id`) and returns at
    /// once with its live events.
    pub async fn start_resume(
        &self,
        workflow_id: &WorkflowId,
        execution_id: &ExecutionId,
        resume_data: Value,
        step_id: Option<&str>,
    ) -> Result<RunHandle, EngineError> {
        self.wake_up(
            workflow_id,
            execution_id,
            Wake::Resume(resume_data, step_id),
        )
        .await
    }

    /// Moves a suspended execution back to running and runs it from its suspended step (or the
    /// step a resume names).
    async fn wake_up(
        &self,
        workflow_id: &str,
        execution_id: &str,
        wake: Wake<'_>,
    ) -> Result<RunHandle, EngineError> {
        let (current, wf) = self.load_to_continue(workflow_id, execution_id).await?;
        let suspension = match &current.state {
            ExecutionState::Suspended(s) => s.clone(),
            other => {
                return Err(EngineError::NotSuspended {
                    id: current.id.clone(),
                    status: other.status(),
                });
            }
        };
        let (index, resume_data) = match &wake {
            Wake::Resume(data, step_id) => {
                let index = match step_id {
                    Some(sid) => wf.step_index(sid).ok_or_else(|| EngineError::UnknownStep {
                        workflow_id: workflow_id.to_owned(),
                        step_id: (*sid).to_owned(),
                    })?,
                    None => suspension.step_index,
                };
                wf.validate_resume(index, data)
                    .map_err(EngineError::InvalidResumeData)?;
                (index, Some(data.clone()))
            }
            Wake::Deadline => (suspension.step_index, None),
        };
        let now = self.inner.clock.now();
        let woken = Woken {
            resume_data: resume_data.clone(),
            suspend_data: (index == suspension.step_index)
                .then(|| suspension.data.clone())
                .flatten(),
            timed_out: matches!(wake, Wake::Deadline),
        };
        let (rec, events) = self
            .commit(
                Some(current),
                execution_id,
                Patience::Request,
                |r, events| {
                    // Only the suspension read above is resumed: a conflict that finds another
                    // (it was resumed and suspended again meanwhile) is not this resume's.
                    if r.state.suspension() != Some(&suspension) {
                        return Err(EngineError::NotSuspended {
                            id: r.id.clone(),
                            status: r.state.status(),
                        });
                    }
                    let due = r
                        .state
                        .suspension()
                        .and_then(|s| s.deadline)
                        .is_some_and(|d| d <= now);
                    if matches!(wake, Wake::Deadline) && !due {
                        return Err(EngineError::NotDue(r.id.clone()));
                    }
                    self.resumed(&wf, r, index, &woken, events)
                },
            )
            .await?;
        if matches!(wake, Wake::Deadline) {
            tracing::info!(execution_id = %execution_id, "deadline passed: resuming with the time-out marker");
        }
        let entry = Entry {
            step: index,
            resume: Some((woken.resume_data, woken.suspend_data)),
            begun: true,
            announce: events,
            timed_out: woken.timed_out,
        };
        Ok(self.spawn_run(wf, rec, entry))
    }

    /// `r`, suspended, running again from the step at `index` for this process (a new lease),
    /// that step's start recorded with `workflow-start`, in the write that makes it.
    pub(super) fn resumed(
        &self,
        wf: &Workflow,
        r: &ExecutionRecord,
        index: usize,
        woken: &Woken,
        events: &mut Vec<EventKind>,
    ) -> Result<ExecutionRecord, EngineError> {
        let state = transition(&r.state, Transition::Resume).map_err(|e| match e {
            TransitionError::NotSuspended(status) => EngineError::NotSuspended {
                id: r.id.clone(),
                status,
            },
            other => EngineError::Internal(other.to_string()),
        })?;
        let mut next = r.clone();
        next.state = state;
        next.progress.next_step = index;
        next.lease = Some(self.new_lease(r.lease.as_ref().map_or(0, |l| l.epoch)));
        // The step starts again with this same write: the step that suspended continues its
        // attempt; any other starts its next one.
        events.push(EventKind::WorkflowStart {
            input: r.input.clone(),
            resumed: true,
        });
        if let Some(step) = wf.steps().get(index) {
            let input = Self::input_for(wf, r, index);
            match next.progress.steps_mut().get_mut(&step.id) {
                Some(rec) if rec.status == StepStatus::Suspended => {
                    Arc::make_mut(rec).status = StepStatus::Running;
                }
                _ => self.begin(&mut next.progress, step, input.clone()),
            }
            let attempt = next.progress.steps.get(&step.id).map_or(1, |r| r.attempt);
            let record = woken.record(attempt, self.inner.clock.now());
            next.progress
                .steps_mut()
                .insert(Woken::record_id(&step.id), Arc::new(record));
            events.push(Self::step_start(step, index, input));
        }
        Ok(next)
    }

    /// A page of executions, newest first (see [`ListQuery`]); a named workflow must be
    /// registered.
    pub async fn list(&self, query: &ListQuery) -> Result<Vec<ExecutionRecord>, EngineError> {
        if let Some(workflow_id) = &query.workflow_id {
            self.require_workflow(workflow_id)?;
        }
        Ok(self.inner.store.list(query).await?)
    }

    /// How many executions each registered workflow has in each status (only `owner`'s when
    /// given), in registration order; a status that is absent has none.
    pub async fn count_by_status(
        &self,
        owner: Option<&UserId>,
    ) -> Result<Vec<(String, HashMap<Status, u64>)>, EngineError> {
        let stored = self
            .inner
            .store
            .count_by_status(owner.map(UserId::as_str))
            .await?;
        Ok(self
            .workflows()
            .iter()
            .map(|wf| {
                let counts = stored
                    .iter()
                    .filter(|c| c.workflow_id == wf.id())
                    .map(|c| (c.status, c.count))
                    .collect();
                (wf.id().to_owned(), counts)
            })
            .collect())
    }

    /// Reads an execution by its id alone, whatever its workflow.
    pub async fn find(&self, execution_id: &ExecutionId) -> Result<ExecutionRecord, EngineError> {
        self.inner
            .store
            .get(execution_id)
            .await?
            .ok_or_else(|| EngineError::UnknownExecution(execution_id.to_string()))
    }

    /// Cancels a queued, running or suspended execution: it ends `cancelled` at once (a
    /// `workflow-cancelled` event ends its log), and the step running, here or on another
    /// process, sees its cancellation signal (here at once; elsewhere at that process's next
    /// heartbeat) and commits nothing more.
    pub async fn cancel(
        &self,
        workflow_id: &WorkflowId,
        execution_id: &ExecutionId,
        reason: Option<String>,
    ) -> Result<ExecutionRecord, EngineError> {
        self.require_workflow(workflow_id)?;
        let current = self.load_to_update(workflow_id, execution_id).await?;
        let cancellation = Cancellation {
            cancelled_at: self.inner.clock.now(),
            reason,
        };
        let cancel = Transition::Cancel(cancellation);
        let rec = self
            .update(
                Some(current),
                execution_id,
                Patience::Request,
                |r, events| {
                    let state = transition(&r.state, cancel.clone()).map_err(|_| {
                        EngineError::NotCancellable {
                            id: r.id.clone(),
                            status: r.state.status(),
                        }
                    })?;
                    events.extend(Self::reported(&cancel));
                    Ok(ExecutionRecord { state, ..r.clone() })
                },
            )
            .await?;
        tracing::info!(execution_id = %execution_id, "execution cancelled");
        self.stop_run(execution_id);
        if rec.queue.is_some() {
            // A queued one left its queue; a running one frees its slot.
            self.nudge_queues();
        }
        Ok(rec)
    }

    /// Resumes and waits for the run to stop again.
    pub async fn resume(
        &self,
        workflow_id: &WorkflowId,
        execution_id: &ExecutionId,
        resume_data: Value,
        step_id: Option<&str>,
    ) -> Result<ExecutionRecord, EngineError> {
        self.start_resume(workflow_id, execution_id, resume_data, step_id)
            .await?
            .finish()
            .await
    }

    /// Graceful stop that hands the work over: every run stops at its next step boundary (after
    /// checkpointing that step), steps still running after `grace` are cancelled (they run again
    /// wherever the execution continues), and every lease this process holds is released, so that
    /// another process (or this one, restarted) continues each execution at once. No execution
    /// is suspended by a shutdown; a caller waiting on a run gets
    /// [`EngineError::HandedOver`].
    pub async fn shutdown(&self, grace: Duration) {
        self.inner.draining.cancel();
        self.wait_for_runs(grace).await;
        self.inner.shutdown.cancel();
        self.wait_for_runs(Duration::from_secs(2)).await;
        match self
            .inner
            .store
            .release_leases(&self.inner.config.node_id)
            .await
        {
            Ok(n) if n > 0 => tracing::info!(count = n, "handed executions over"),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "releasing leases failed; they expire by themselves")
            }
        }
        // Its versions are no longer served here (else they age out of the live set).
        if let Err(e) = self
            .inner
            .store
            .forget_node(&self.inner.config.node_id)
            .await
        {
            tracing::warn!(error = %e, "forgetting this server failed; it ages out by itself");
        }
    }

    /// Waits up to `limit` for this process's runs to stop.
    async fn wait_for_runs(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while !lock(&self.inner.live).is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether this process is draining (a graceful shutdown began): it starts, resumes and
    /// takes over nothing more.
    pub fn is_draining(&self) -> bool {
        self.inner.draining.is_cancelled()
    }

    /// Fires when the drain begins (see [`Engine::shutdown`]).
    pub fn drain_signal(&self) -> CancellationToken {
        self.inner.draining.clone()
    }

    /// [`EngineError::ShuttingDown`] once the drain began.
    fn refuse_when_draining(&self) -> Result<(), EngineError> {
        if self.is_draining() {
            Err(EngineError::ShuttingDown)
        } else {
            Ok(())
        }
    }

    /// Number of executions running in this process.
    pub fn running_here(&self) -> usize {
        lock(&self.inner.live).len()
    }
}
