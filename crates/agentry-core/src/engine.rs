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
use crate::state::{
    Cancellation, ExecutionState, Status, SuspendRequest, Suspension, Transition, TransitionError,
    transition,
};
use crate::store::{
    AttemptFailure, Claim, ExecutionRecord, ExecutionStore, Lease, ListQuery, MemoryStore,
    Progress, StepRecord, StepStatus, StoreError,
};
use crate::workflow::{Step, StepContext, StepError, StepKind, Workflow};

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
    #[error("Execution {0} is being changed by too many writers at once")]
    Contention(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Internal(String),
}

/// Options of an execute call.
#[derive(Debug, Clone, Default)]
pub struct ExecuteOptions {
    pub execution_id: Option<String>,
    pub user_id: Option<String>,
    pub conversation_id: Option<String>,
    /// Caller-supplied context entries (`user` among them when authenticated).
    pub context: Map<String, Value>,
    /// The verified user starting the execution (its owner), when authentication is on.
    pub owner: Option<String>,
    /// When the id is taken by the same execution (a retried start): replay only its events
    /// after this number (a client's `Last-Event-ID`).
    pub last_event_id: Option<i64>,
}

/// A point in a step's life where a test can stop the process, to prove what a crash there
/// leaves on disk and that recovery finishes the run with no step committed twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// The step's start is recorded (its attempt counted); it has not run.
    BeforeStep,
    /// The step ran (its effect happened); its checkpoint is not written.
    AfterEffect,
    /// The step's checkpoint is written.
    AfterCheckpoint,
}

impl CrashPoint {
    /// `before-step`, `after-effect`, `after-checkpoint`.
    pub fn as_str(self) -> &'static str {
        match self {
            CrashPoint::BeforeStep => "before-step",
            CrashPoint::AfterEffect => "after-effect",
            CrashPoint::AfterCheckpoint => "after-checkpoint",
        }
    }

    pub fn parse(s: &str) -> Option<CrashPoint> {
        [
            CrashPoint::BeforeStep,
            CrashPoint::AfterEffect,
            CrashPoint::AfterCheckpoint,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
    }
}

/// What a [`CrashHook`] calls: the point, the workflow id, the step id and the attempt.
pub type CrashFn = dyn Fn(CrashPoint, &str, &str, u32) + Send + Sync;

/// Called at every [`CrashPoint`] of every top-level step with the workflow and step ids; a
/// test harness makes it stop the process at the one it names.
#[derive(Clone)]
pub struct CrashHook(pub Arc<CrashFn>);

impl std::fmt::Debug for CrashHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CrashHook")
    }
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
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            suspend_wait: Duration::from_secs(120),
            node_id: "local".into(),
            lease_ttl: Duration::from_secs(10),
            crash_hook: None,
        }
    }
}

/// How many orphaned executions one recovery pass claims at most.
const CLAIM_BATCH: u32 = 100;

/// A run in progress: its events as they happen and its final record.
pub struct RunHandle {
    pub execution_id: String,
    pub events: mpsc::UnboundedReceiver<WorkflowEvent>,
    pub outcome: JoinHandle<Result<ExecutionRecord, EngineError>>,
}

impl RunHandle {
    /// Waits for the run to stop (completed, suspended or error).
    pub async fn finish(self) -> Result<ExecutionRecord, EngineError> {
        match self.outcome.await {
            Ok(r) => r,
            Err(e) => Err(EngineError::Internal(format!("execution task failed: {e}"))),
        }
    }
}

/// How many stored events a follower reads at once.
const FOLLOW_BATCH: u32 = 500;

/// The wake-up that concerns every execution (the database's notifications may have been
/// missed: a listener reconnected).
pub const WAKE_ALL: &str = "*";

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
}

/// What wakes a suspended execution.
enum Wake<'a> {
    /// A resume with its data (and the step to resume from, when not the suspended one).
    Resume(Value, Option<&'a str>),
    /// Its suspension's deadline passed.
    Deadline,
}

/// A run in this process: who gets its events, and the signal that stops its steps.
struct LiveRun {
    subscribers: Vec<mpsc::UnboundedSender<WorkflowEvent>>,
    /// Fires when the execution is cancelled, or this process no longer holds it.
    stop: CancellationToken,
}

/// Where a run begins.
struct Entry {
    /// The index of the first step to run.
    step: usize,
    /// Resume data (none when a deadline passed), and the data that step suspended with.
    resume: Option<(Option<Value>, Option<Value>)>,
    /// Whether the write that began this run recorded the first step's start (else the run
    /// records it, with `workflow-start`: a recovery).
    begun: bool,
    /// The events of the write that began this run, sent once the run's subscribers are in.
    announce: Vec<WorkflowEvent>,
    /// The run follows a suspension whose deadline passed (a timer fired).
    timed_out: bool,
}

/// The records of a composite step's children, as they finish. With a lease, the children of
/// `andAll` and `andRace` are stored at once (so that a re-run skips them); the rest are
/// stored with the step's checkpoint.
#[derive(Clone)]
struct Children {
    execution_id: Arc<str>,
    lease: Option<Lease>,
    /// Each record, and whether it is stored already.
    records: Arc<Mutex<Vec<(String, StepRecord, bool)>>>,
}

impl Children {
    fn new(execution_id: &str, lease: Option<&Lease>) -> Self {
        Self {
            execution_id: execution_id.into(),
            lease: lease.cloned(),
            records: Arc::default(),
        }
    }

    /// Keeps a record for the step's checkpoint.
    fn keep(&self, id: &str, record: StepRecord) {
        lock(&self.records).push((id.to_owned(), record, false));
    }

    /// Stores a record now; `false` when the lease is lost (the step must stop).
    async fn store(
        &self,
        store: &dyn ExecutionStore,
        id: &str,
        record: StepRecord,
    ) -> Result<bool, StoreError> {
        let stored = match &self.lease {
            Some(lease) => {
                store
                    .record_step(&self.execution_id, lease, id, &record)
                    .await?
            }
            None => {
                self.keep(id, record);
                return Ok(true);
            }
        };
        if stored {
            lock(&self.records).push((id.to_owned(), record, true));
        }
        Ok(stored)
    }

    /// Puts the stored records into `progress` (they are in the database already) and returns
    /// the others, for the checkpoint to write.
    fn merge_into(&self, progress: &mut Progress) -> Vec<(String, StepRecord)> {
        let mut unstored = Vec::new();
        for (id, record, stored) in lock(&self.records).drain(..) {
            if stored {
                progress.steps.insert(id, record);
            } else {
                unstored.push((id, record));
            }
        }
        unstored
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Execution ids are used in paths: keep them to a safe alphabet.
fn check_execution_id(id: &str) -> Result<(), EngineError> {
    // The rule of agent and workflow ids, and `:` (for ids such as `order:42`).
    if crate::id::is_plain_word(id, &[':']) {
        Ok(())
    } else {
        Err(EngineError::InvalidExecutionId(
            "use 1 to 128 letters, digits, '-', '_', '.' or ':'".into(),
        ))
    }
}

impl Engine {
    /// An engine over `store` with the wall clock and default settings.
    pub fn new(store: Arc<dyn ExecutionStore>) -> Self {
        Self::with(store, Arc::new(SystemClock), EngineConfig::default())
    }

    /// An engine that keeps executions in memory.
    pub fn in_memory() -> Self {
        Self::new(Arc::new(MemoryStore::new()))
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
            }),
        }
    }

    /// Registers a workflow; ids are unique.
    pub fn register(&self, wf: Workflow) -> Result<(), EngineError> {
        let mut wfs = self
            .inner
            .workflows
            .write()
            .unwrap_or_else(|p| p.into_inner());
        if wfs.iter().any(|w| w.id() == wf.id()) {
            return Err(EngineError::DuplicateWorkflow(wf.id().to_owned()));
        }
        wfs.push(Arc::new(wf));
        Ok(())
    }

    /// Sets what runs `andAgent` steps.
    pub fn set_agent_runner(&self, runner: Arc<dyn AgentRunner>) {
        *self.inner.agents.write().unwrap_or_else(|p| p.into_inner()) = Some(runner);
    }

    /// Registered workflows, in registration order.
    pub fn workflows(&self) -> Vec<Arc<Workflow>> {
        self.inner
            .workflows
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn workflow(&self, id: &str) -> Option<Arc<Workflow>> {
        self.inner
            .workflows
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|w| w.id() == id)
            .cloned()
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
        self.workflow(id)
            .ok_or_else(|| EngineError::WorkflowNotFound(id.to_owned()))
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
        workflow_id: &str,
        input: Value,
        options: ExecuteOptions,
    ) -> Result<RunHandle, EngineError> {
        let wf = self.require_workflow(workflow_id)?;
        wf.validate_input(&input)
            .map_err(EngineError::InvalidInput)?;
        let id = match options.execution_id {
            Some(id) => {
                check_execution_id(&id)?;
                id
            }
            None => uuid::Uuid::now_v7().to_string(),
        };
        let mut context = options.context;
        let user_id = options.user_id.or_else(|| {
            context
                .get("user")
                .and_then(|u| u.get("id"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        if let Some(uid) = &user_id {
            context.insert("userId".into(), Value::String(uid.clone()));
        }
        if let Some(cid) = &options.conversation_id {
            context.insert("conversationId".into(), Value::String(cid.clone()));
        }
        let now = self.inner.clock.now();
        let state = transition(&ExecutionState::Idle, Transition::Start)
            .map_err(|e| EngineError::Internal(e.to_string()))?;
        // The first step's start is written with the execution itself.
        let mut progress = Progress::default();
        let mut kinds = vec![EventKind::WorkflowStart {
            input: input.clone(),
            resumed: false,
        }];
        if let Some(first) = wf.steps().first() {
            self.begin(&mut progress, first, input.clone());
            kinds.push(Self::step_start(first, 0, input.clone()));
        }
        let mut record = ExecutionRecord {
            id: id.clone(),
            workflow_id: wf.id().to_owned(),
            state,
            input,
            context,
            user_id,
            owner: options.owner,
            lease: Some(self.new_lease(0)),
            start_at: now,
            updated_at: now,
            progress,
            version: 1,
            last_event: 0,
        };
        let events = self.numbered(&mut record, 0, kinds);
        match self.inner.store.insert(&record, &events).await {
            Err(StoreError::Duplicate(_)) => {
                return self
                    .rejoin(&record, options.last_event_id.unwrap_or(0))
                    .await;
            }
            other => other?,
        }
        let entry = Entry {
            step: 0,
            resume: None,
            begun: true,
            announce: events,
            timed_out: false,
        };
        Ok(self.spawn_run(wf, record, entry))
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
        Ok(self.follower(&found.id, after))
    }

    /// Re-attaches to an execution of `workflow_id`: its events after number `after` (0: all),
    /// then each new one as it is written, on whichever process runs it, until it stops running;
    /// then its `workflow-result`.
    pub async fn attach(
        &self,
        workflow_id: &str,
        execution_id: &str,
        after: i64,
    ) -> Result<RunHandle, EngineError> {
        self.require_workflow(workflow_id)?;
        self.load(workflow_id, execution_id).await?;
        Ok(self.follower(execution_id, after))
    }

    /// [`Engine::attach`] to an execution of whichever workflow (`None` when there is no such
    /// execution).
    pub async fn attach_any(
        &self,
        execution_id: &str,
        after: i64,
    ) -> Result<Option<RunHandle>, EngineError> {
        let found = self.inner.store.get(execution_id).await?;
        Ok(found.map(|_| self.follower(execution_id, after)))
    }

    /// A handle whose events follow `execution_id`'s log after `after`, in a task of its own.
    fn follower(&self, execution_id: &str, after: i64) -> RunHandle {
        let (tx, rx) = mpsc::unbounded_channel();
        let engine = self.clone();
        let id = execution_id.to_owned();
        RunHandle {
            execution_id: id.clone(),
            events: rx,
            outcome: tokio::spawn(async move { engine.follow(&id, after, tx).await }),
        }
    }

    /// Sends `id`'s stored events after number `after` to `tx`, then each new one as it is
    /// written (woken by this process's writes, or by the database's notifications of another
    /// process's), until the execution stops running; then its `workflow-result`. Answers with
    /// the record it ended with (or stood at when the receiver went away).
    async fn follow(
        &self,
        id: &str,
        mut after: i64,
        tx: mpsc::UnboundedSender<WorkflowEvent>,
    ) -> Result<ExecutionRecord, EngineError> {
        let gone = || EngineError::Internal(format!("execution {id} disappeared"));
        // Subscribed before the first read: no write between a read and the wait is missed.
        let mut wakeups = self.inner.wakeups.subscribe();
        loop {
            // The header before the events: the events of a status change are written with it,
            // so the events read next include them all.
            let rec = self.inner.store.get(id).await?.ok_or_else(gone)?;
            loop {
                let batch = self
                    .inner
                    .store
                    .events_after(id, after, FOLLOW_BATCH)
                    .await?;
                let full = batch.len() == FOLLOW_BATCH as usize;
                for ev in batch {
                    after = ev.seq.unwrap_or(after);
                    if tx.send(ev).is_err() {
                        return Ok(rec);
                    }
                }
                if !full {
                    break;
                }
            }
            if rec.state.status() != Status::Running {
                let _ = tx.send(WorkflowEvent {
                    execution_id: rec.id.clone(),
                    workflow_id: rec.workflow_id.clone(),
                    seq: None,
                    timestamp: rec.updated_at,
                    kind: EventKind::WorkflowResult {
                        execution: Box::new(rec.clone()),
                    },
                });
                return Ok(rec);
            }
            loop {
                tokio::select! {
                    woke = wakeups.recv() => match woke {
                        Ok(w) if &*w == id || &*w == WAKE_ALL => break,
                        Ok(_) => {}
                        Err(broadcast::error::RecvError::Lagged(_)) => break,
                        Err(broadcast::error::RecvError::Closed) => return Ok(rec),
                    },
                    _ = tx.closed() => return Ok(rec),
                }
            }
        }
    }

    /// Runs an execution to its end (completed, suspended or error).
    pub async fn execute(
        &self,
        workflow_id: &str,
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
        workflow_id: &str,
        execution_id: &str,
    ) -> Result<ExecutionRecord, EngineError> {
        self.require_workflow(workflow_id)?;
        self.load(workflow_id, execution_id).await
    }

    async fn load(
        &self,
        workflow_id: &str,
        execution_id: &str,
    ) -> Result<ExecutionRecord, EngineError> {
        let not_found = || EngineError::ExecutionNotFound {
            workflow_id: workflow_id.to_owned(),
            execution_id: execution_id.to_owned(),
        };
        let rec = self
            .inner
            .store
            .get(execution_id)
            .await?
            .ok_or_else(not_found)?;
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
        workflow_id: &str,
        execution_id: &str,
        reason: String,
    ) -> Result<ExecutionRecord, EngineError> {
        self.require_workflow(workflow_id)?;
        let current = self.load(workflow_id, execution_id).await?;
        let request = SuspendRequest {
            requested_at: self.inner.clock.now(),
            reason,
        };
        let id = execution_id.to_owned();
        self.update(Some(current), &id, |r, _| {
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
        workflow_id: &str,
        execution_id: &str,
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

    /// Resumes a suspended execution whose deadline has passed (a durable timer fired): its
    /// step runs again with `StepContext::timed_out` set. `Ok(None)` when there is nothing to do
    /// (resumed or cancelled meanwhile, or not due).
    pub async fn fire_timer(&self, execution_id: &str) -> Result<Option<RunHandle>, EngineError> {
        let Some(rec) = self.inner.store.get(execution_id).await? else {
            return Ok(None);
        };
        match self
            .wake_up(&rec.workflow_id, execution_id, Wake::Deadline)
            .await
        {
            Ok(handle) => Ok(Some(handle)),
            Err(EngineError::NotSuspended { .. } | EngineError::NotDue(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Moves a suspended execution back to running and runs it from its suspended step (or the
    /// step a resume names).
    async fn wake_up(
        &self,
        workflow_id: &str,
        execution_id: &str,
        wake: Wake<'_>,
    ) -> Result<RunHandle, EngineError> {
        let wf = self.require_workflow(workflow_id)?;
        let current = self.load(workflow_id, execution_id).await?;
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
        let (rec, events) = self
            .commit(Some(current), execution_id, |r, events| {
                let due = r
                    .state
                    .suspension()
                    .and_then(|s| s.deadline)
                    .is_some_and(|d| d <= now);
                if matches!(wake, Wake::Deadline) && !due {
                    return Err(EngineError::NotDue(r.id.clone()));
                }
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
                // The step starts again with this same write: the step that suspended
                // continues its attempt; any other starts its next one.
                events.push(EventKind::WorkflowStart {
                    input: r.input.clone(),
                    resumed: true,
                });
                if let Some(step) = wf.steps().get(index) {
                    let input = Self::input_for(&wf, r, index);
                    match next.progress.steps.get_mut(&step.id) {
                        Some(rec) if rec.status == StepStatus::Suspended => {
                            rec.status = StepStatus::Running;
                        }
                        _ => self.begin(&mut next.progress, step, input.clone()),
                    }
                    events.push(Self::step_start(step, index, input));
                }
                Ok(next)
            })
            .await?;
        if matches!(wake, Wake::Deadline) {
            tracing::info!(execution_id = %execution_id, "deadline passed: resuming with the time-out marker");
        }
        let suspend_data = (index == suspension.step_index)
            .then_some(suspension.data)
            .flatten();
        let entry = Entry {
            step: index,
            resume: Some((resume_data, suspend_data)),
            begun: true,
            announce: events,
            timed_out: matches!(wake, Wake::Deadline),
        };
        Ok(self.spawn_run(wf, rec, entry))
    }

    /// A page of `workflow_id`'s executions, newest first (see [`ListQuery`]).
    pub async fn list(&self, query: &ListQuery) -> Result<Vec<ExecutionRecord>, EngineError> {
        self.require_workflow(&query.workflow_id)?;
        Ok(self.inner.store.list(query).await?)
    }

    /// Cancels a running or suspended execution: it ends `cancelled` at once (a
    /// `workflow-cancelled` event ends its log), and the step running, here or on another
    /// process, sees its cancellation signal (here at once; elsewhere at that process's next
    /// heartbeat) and commits nothing more.
    pub async fn cancel(
        &self,
        workflow_id: &str,
        execution_id: &str,
        reason: Option<String>,
    ) -> Result<ExecutionRecord, EngineError> {
        self.require_workflow(workflow_id)?;
        let current = self.load(workflow_id, execution_id).await?;
        let cancellation = Cancellation {
            cancelled_at: self.inner.clock.now(),
            reason,
        };
        let cancel = Transition::Cancel(cancellation);
        let rec = self
            .update(Some(current), execution_id, |r, events| {
                let state = transition(&r.state, cancel.clone()).map_err(|_| {
                    EngineError::NotCancellable {
                        id: r.id.clone(),
                        status: r.state.status(),
                    }
                })?;
                events.extend(Self::reported(&cancel));
                Ok(ExecutionRecord { state, ..r.clone() })
            })
            .await?;
        tracing::info!(execution_id = %execution_id, "execution cancelled");
        self.stop_run(execution_id);
        Ok(rec)
    }

    /// Resumes and waits for the run to stop again.
    pub async fn resume(
        &self,
        workflow_id: &str,
        execution_id: &str,
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
    }

    /// Waits up to `limit` for this process's runs to stop.
    async fn wait_for_runs(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while !lock(&self.inner.live).is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Number of executions running in this process.
    pub fn running_here(&self) -> usize {
        lock(&self.inner.live).len()
    }

    /// Renews the leases of the runs alive in this process, in one statement that writes no
    /// execution data. Call it more often than the lease ttl (the server does every third of
    /// it).
    pub async fn heartbeat(&self) {
        let alive: Vec<String> = lock(&self.inner.live).keys().cloned().collect();
        if alive.is_empty() {
            return;
        }
        match self
            .inner
            .store
            .renew_leases(&self.inner.config.node_id, &alive)
            .await
        {
            // A run whose lease was not renewed is no longer this process's to run: it was
            // cancelled, or taken over. Its steps are told to stop.
            Ok(renewed) => {
                for id in alive.iter().filter(|id| !renewed.contains(id)) {
                    tracing::info!(execution_id = %id, "no longer held here (cancelled or taken over): stopping its step");
                    self.stop_run(id);
                }
            }
            Err(e) => tracing::warn!(error = %e, "renewing leases failed"),
        }
    }

    /// Continues the executions this node held before it restarted (a crash, a kill), at once:
    /// the claim bumps their epoch, fencing the previous incarnation should it still be alive.
    pub async fn recover_own(&self) -> Result<usize, EngineError> {
        self.claim_and_continue(true).await
    }

    /// Picks up executions whose lease expired: their process died, froze or lost the database.
    /// Each is claimed with one conditional statement, so of several processes recovering at once
    /// only one runs it; it continues from its last checkpoint (the step it was in runs again),
    /// or suspends there when a suspend was pending. Returns how many were taken over.
    pub async fn recover(&self) -> Result<usize, EngineError> {
        self.claim_and_continue(false).await
    }

    /// Resumes the suspended executions whose deadline passed (by the database's clock), on
    /// whichever process gets there first; also those whose deadline passed while every server
    /// was down. Returns how many this process resumed.
    pub async fn fire_due_timers(&self) -> Result<usize, EngineError> {
        let workflows: Vec<String> = self.workflows().iter().map(|w| w.id().to_owned()).collect();
        let due = self.inner.store.due_timers(&workflows, CLAIM_BATCH).await?;
        let mut fired = 0;
        for id in due {
            match self.fire_timer(&id).await {
                Ok(Some(_)) => fired += 1,
                Ok(None) => {}
                Err(e) => tracing::warn!(execution_id = %id, error = %e, "firing a timer failed"),
            }
        }
        Ok(fired)
    }

    /// Fires `execution_id`'s timer in this process at `deadline` (the periodic pass of every
    /// process fires it otherwise, for instance after a restart).
    fn schedule_timer(&self, execution_id: &str, deadline: chrono::DateTime<chrono::Utc>) {
        let engine = self.clone();
        let id = execution_id.to_owned();
        let wait = (deadline - self.inner.clock.now())
            .to_std()
            .unwrap_or(Duration::ZERO);
        let shutdown = self.inner.draining.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.cancelled() => return,
            }
            if let Err(e) = engine.fire_timer(&id).await {
                tracing::warn!(execution_id = %id, error = %e, "firing a timer failed");
            }
        });
    }

    async fn claim_and_continue(&self, own: bool) -> Result<usize, EngineError> {
        let config = &self.inner.config;
        let workflows: Vec<String> = self.workflows().iter().map(|w| w.id().to_owned()).collect();
        let claim = Claim {
            node: &config.node_id,
            ttl: config.lease_ttl,
            own,
            workflows: &workflows,
            limit: CLAIM_BATCH,
        };
        let claimed = self.inner.store.claim_orphans(&claim).await?;
        let taken = claimed.len();
        for rec in claimed {
            if lock(&self.inner.live).contains_key(&rec.id) {
                // A run of ours whose lease expired (this process froze past its ttl): the
                // claim fenced it, so it stops at its next write; continue once it has.
                let engine = self.clone();
                tokio::spawn(async move {
                    while lock(&engine.inner.live).contains_key(&rec.id) {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    if let Err(e) = engine.continue_claimed(rec).await {
                        tracing::warn!(error = %e, "continuing a claimed execution failed");
                    }
                });
                continue;
            }
            if let Err(e) = self.continue_claimed(rec).await {
                tracing::warn!(error = %e, "continuing a claimed execution failed");
            }
        }
        Ok(taken)
    }

    async fn continue_claimed(&self, claimed: ExecutionRecord) -> Result<(), EngineError> {
        let Some(wf) = self.workflow(&claimed.workflow_id) else {
            tracing::warn!(execution_id = %claimed.id, workflow_id = %claimed.workflow_id,
                "cannot recover an execution of an unregistered workflow");
            return Ok(());
        };
        let start = claimed.progress.next_step.min(wf.steps().len());
        tracing::info!(execution_id = %claimed.id, step = start, "recovering an interrupted execution");
        if let Some(req) = claimed.state.suspend_request().cloned()
            && let Some(step) = wf.steps().get(start)
        {
            let suspension = Suspension {
                suspended_at: self.inner.clock.now(),
                reason: req.reason,
                step_index: start,
                step_id: step.id.clone(),
                data: None,
                deadline: None,
            };
            let lease = claimed.lease.clone();
            self.suspend_now(lease.as_ref(), claimed, suspension, false)
                .await?;
            return Ok(());
        }
        let entry = Entry {
            step: start,
            resume: None,
            begun: false,
            announce: Vec::new(),
            timed_out: false,
        };
        drop(self.spawn_run(wf, claimed, entry));
        Ok(())
    }

    fn spawn_run(&self, wf: Arc<Workflow>, record: ExecutionRecord, mut entry: Entry) -> RunHandle {
        let (tx, rx) = mpsc::unbounded_channel();
        let id = record.id.clone();
        let run = LiveRun {
            subscribers: vec![tx],
            stop: self.inner.shutdown.child_token(),
        };
        lock(&self.inner.live).insert(id.clone(), run);
        self.publish(std::mem::take(&mut entry.announce));
        let engine = self.clone();
        let outcome = tokio::spawn(async move { engine.run(wf, record, entry).await });
        RunHandle {
            execution_id: id,
            events: rx,
            outcome,
        }
    }

    /// The events of a write to `rec`, numbered after `last` (and `rec.last_event` set to the
    /// last one's number).
    fn numbered(
        &self,
        rec: &mut ExecutionRecord,
        last: i64,
        kinds: Vec<EventKind>,
    ) -> Vec<WorkflowEvent> {
        let at = self.inner.clock.now();
        let events: Vec<WorkflowEvent> = kinds
            .into_iter()
            .zip(last + 1..)
            .map(|(kind, seq)| WorkflowEvent {
                execution_id: rec.id.clone(),
                workflow_id: rec.workflow_id.clone(),
                seq: Some(seq),
                timestamp: at,
                kind,
            })
            .collect();
        rec.last_event = last + events.len() as i64;
        events
    }

    /// Sends committed events to this process's subscribers, and wakes the followers of their
    /// execution.
    fn publish(&self, events: Vec<WorkflowEvent>) {
        let Some(first) = events.first() else {
            return;
        };
        let id = first.execution_id.clone();
        for ev in events {
            self.send(ev);
        }
        self.wake(&id);
    }

    /// Sends an event that is not stored (the end of a run, a handover).
    fn emit_for(&self, execution_id: &str, workflow_id: &str, kind: EventKind) {
        self.send(WorkflowEvent {
            execution_id: execution_id.to_owned(),
            workflow_id: workflow_id.to_owned(),
            seq: None,
            timestamp: self.inner.clock.now(),
            kind,
        });
    }

    fn send(&self, ev: WorkflowEvent) {
        if let Some(run) = lock(&self.inner.live).get_mut(&ev.execution_id) {
            run.subscribers.retain(|s| s.send(ev.clone()).is_ok());
        }
        let _ = self.inner.all_events.send(ev);
    }

    /// Wakes whoever follows `execution_id`'s log in this process: its log has grown or its
    /// status changed. The store's notifications from other processes (PostgreSQL
    /// `LISTEN/NOTIFY`) come in here too.
    pub fn wake(&self, execution_id: &str) {
        let _ = self.inner.wakeups.send(execution_id.into());
    }

    /// Runs, then emits the final `workflow-result` and ends the live event streams.
    async fn run(
        &self,
        wf: Arc<Workflow>,
        record: ExecutionRecord,
        entry: Entry,
    ) -> Result<ExecutionRecord, EngineError> {
        let id = record.id.clone();
        let workflow_id = record.workflow_id.clone();
        let lease = record.lease.clone();
        tracing::info!(execution_id = %id, workflow_id = %record.workflow_id, from_step = entry.step, "execution started");
        let span =
            tracing::info_span!("execution", workflow_id = %record.workflow_id, execution_id = %id);
        let outcome = {
            use tracing::Instrument;
            self.drive(wf, record, entry).instrument(span).await
        };
        let outcome = match outcome {
            Ok(rec) => Ok(rec),
            // Cancelled through the API while a step ran: the cancel wrote the end.
            Err(EngineError::Cancelled(_)) => {
                tracing::info!(execution_id = %id, "cancelled: its run stopped");
                match self.inner.store.get(&id).await {
                    Ok(Some(rec)) => Ok(rec),
                    Ok(None) => Err(EngineError::Internal(format!("execution {id} disappeared"))),
                    Err(e) => Err(e.into()),
                }
            }
            Err(e @ (EngineError::LeaseLost(_) | EngineError::HandedOver(_))) => {
                if matches!(e, EngineError::LeaseLost(_)) {
                    tracing::warn!(execution_id = %id, "lease lost: another process runs this execution now; stopping here");
                } else {
                    tracing::info!(execution_id = %id, "handed over at a step boundary: shutting down");
                }
                let message = e.to_string();
                self.emit_for(&id, &workflow_id, EventKind::WorkflowHandover { message });
                Err(e)
            }
            Err(err) => {
                tracing::error!(execution_id = %id, error = %err, "execution stopped by an engine error");
                // Keep the store truthful: an execution the engine gave up on ends in error.
                let message = err.to_string();
                let fail = Transition::Fail {
                    message: message.clone(),
                    step_id: None,
                    at: self.inner.clock.now(),
                };
                match self.apply(lease.as_ref(), None, &id, fail, None).await {
                    Ok(rec) => Ok(rec),
                    Err(_) => Err(err),
                }
            }
        };
        if let Ok(rec) = &outcome {
            tracing::info!(execution_id = %id, workflow_id = %rec.workflow_id, status = %rec.state.status(), "execution finished");
            let result = EventKind::WorkflowResult {
                execution: Box::new(rec.clone()),
            };
            self.emit_for(&id, &workflow_id, result);
        }
        lock(&self.inner.live).remove(&id);
        outcome
    }

    fn input_for(wf: &Workflow, rec: &ExecutionRecord, index: usize) -> Value {
        if index == 0 {
            return rec.input.clone();
        }
        wf.steps()
            .get(index - 1)
            .and_then(|prev| rec.progress.steps.get(&prev.id))
            .and_then(|r| r.output.clone())
            .unwrap_or(Value::Null)
    }

    /// Records in `progress` that `step` starts now with `input`: its next attempt. A step that
    /// was interrupted keeps its finished children (a re-run skips them); one that finished
    /// before and runs again (a resume from an earlier step) starts afresh, without them.
    fn begin(&self, progress: &mut Progress, step: &Step, input: Value) {
        let previous = progress.steps.get(&step.id);
        let attempt = previous.map_or(1, |r| r.attempt + 1);
        let interrupted = previous.is_some_and(|r| r.status == StepStatus::Running);
        // An interrupted step keeps the failures of its earlier attempts.
        let failures = match previous {
            Some(r) if interrupted => r.failures.clone(),
            _ => Vec::new(),
        };
        if previous.is_some() && !interrupted {
            for child in step.descendants() {
                progress.steps.remove(child);
            }
        }
        let now = self.inner.clock.now();
        progress.steps.insert(
            step.id.clone(),
            StepRecord {
                failures,
                ..StepRecord::started(input, attempt, now)
            },
        );
    }

    /// The signal that stops this process's run of `execution_id` (cancelled, or no longer
    /// held here), or the shutdown's.
    fn stop_signal(&self, execution_id: &str) -> CancellationToken {
        match lock(&self.inner.live).get(execution_id) {
            Some(run) => run.stop.child_token(),
            None => self.inner.shutdown.child_token(),
        }
    }

    /// Stops the steps of this process's run of `execution_id`, if any.
    fn stop_run(&self, execution_id: &str) {
        if let Some(run) = lock(&self.inner.live).get(execution_id) {
            run.stop.cancel();
        }
    }

    /// The `step-start` event of `step`.
    fn step_start(step: &Step, index: usize, input: Value) -> EventKind {
        EventKind::StepStart {
            step_id: step.id.clone(),
            step_index: index,
            step_type: step.step_type(),
            input,
        }
    }

    /// The event a transition reports, if any.
    fn reported(t: &Transition) -> Option<EventKind> {
        match t {
            Transition::Suspend(suspension) => Some(EventKind::WorkflowSuspended {
                suspension: suspension.clone(),
            }),
            Transition::Complete { result, .. } => Some(EventKind::WorkflowComplete {
                result: result.clone(),
            }),
            Transition::Fail {
                message, step_id, ..
            } => Some(EventKind::WorkflowError {
                error: message.clone(),
                step_id: step_id.clone(),
            }),
            Transition::Cancel(cancellation) => Some(EventKind::WorkflowCancelled {
                cancellation: cancellation.clone(),
            }),
            Transition::Start | Transition::RequestSuspend(_) | Transition::Resume => None,
        }
    }

    /// Calls the crash hook, when one is installed (durability tests).
    fn crash_point(&self, point: CrashPoint, workflow_id: &str, step_id: &str, attempt: u32) {
        if let Some(hook) = &self.inner.config.crash_hook {
            (hook.0)(point, workflow_id, step_id, attempt);
        }
    }

    async fn drive(
        &self,
        wf: Arc<Workflow>,
        mut rec: ExecutionRecord,
        entry: Entry,
    ) -> Result<ExecutionRecord, EngineError> {
        let id = rec.id.clone();
        // Every write of the run is fenced by the lease it started with.
        let lease = rec.lease.clone();
        let lease = lease.as_ref();
        let workflow_input = Arc::new(rec.input.clone());
        let context = Arc::new(rec.context.clone());
        let steps = wf.steps();
        let mut input = Self::input_for(&wf, &rec, entry.step);
        let mut resume = entry.resume;
        let mut timed_out = entry.timed_out;
        // Whether the current step's start is recorded. Every write that ends a step records
        // the next one's start with it, so a step costs one write; a recorded start is always
        // followed by the run, so a shutdown stops a run only where no start is recorded.
        let mut begun = entry.begun;
        for (index, step) in steps.iter().enumerate().skip(entry.step) {
            if !begun {
                if self.inner.draining.is_cancelled() {
                    return Err(EngineError::HandedOver(id));
                }
                // A recovery: the run starts again here.
                rec = self
                    .update_held(lease, Some(rec), &id, |r, events| {
                        let mut next = r.clone();
                        self.begin(&mut next.progress, step, input.clone());
                        events.push(EventKind::WorkflowStart {
                            input: r.input.clone(),
                            resumed: true,
                        });
                        events.push(Self::step_start(step, index, input.clone()));
                        Ok(next)
                    })
                    .await?;
            }
            // A step with retries that crashes left without an attempt fails here, unrun.
            if let Some(retry) = step.retry
                && rec
                    .progress
                    .steps
                    .get(&step.id)
                    .is_some_and(|r| r.attempt > retry.max_attempts())
            {
                let message = format!(
                    "Step {} failed: no attempt left ({} started, the last ones interrupted)",
                    step.id,
                    retry.max_attempts()
                );
                return self.fail_now(lease, rec, &step.id, message).await;
            }
            let mut first_run = resume.take();
            let (result, unstored) = loop {
                let (attempt, started_at) = rec
                    .progress
                    .steps
                    .get(&step.id)
                    .map_or((1, self.inner.clock.now()), |r| (r.attempt, r.started_at));
                self.crash_point(CrashPoint::BeforeStep, wf.id(), &step.id, attempt);
                let (resume_data, suspend_data) = first_run.take().unwrap_or_default();
                let stop = self.stop_signal(&id);
                let ctx = StepContext {
                    execution_id: id.clone(),
                    workflow_id: wf.id().to_owned(),
                    step_id: step.id.clone(),
                    step_index: index,
                    input: input.clone(),
                    workflow_input: workflow_input.clone(),
                    context: context.clone(),
                    owner: rec.owner.clone(),
                    resume_data,
                    suspend_data,
                    cancel: stop.clone(),
                    attempt,
                    started_at,
                    timed_out: std::mem::take(&mut timed_out),
                    steps: Arc::new(rec.progress.steps.clone()),
                };
                let children = Children::new(&id, lease);
                let run = self.run_step(step, ctx, children.clone());
                let result = match step.timeout {
                    Some(limit) => match tokio::time::timeout(limit, run).await {
                        Ok(result) => result,
                        Err(_) => {
                            stop.cancel();
                            Err(StepError::Failed(format!(
                                "attempt {attempt} timed out after {} ms",
                                limit.as_millis()
                            )))
                        }
                    },
                    None => run.await,
                };
                // Children already stored as they finished are part of the record in hand.
                let unstored = children.merge_into(&mut rec.progress);
                let (error, retry) = match (&result, step.retry) {
                    (Err(StepError::Failed(error)), Some(retry))
                        if attempt < retry.max_attempts()
                            && !self.inner.draining.is_cancelled() =>
                    {
                        (error.clone(), retry)
                    }
                    _ => break (result, unstored),
                };
                let delay = retry.delay(attempt);
                // The failure and the next attempt's number, written before it runs.
                rec = self
                    .update_held(lease, Some(rec), &id, |r, events| {
                        let now = self.inner.clock.now();
                        let mut next = r.clone();
                        if let Some(record) = next.progress.steps.get_mut(&step.id) {
                            record.failures.push(AttemptFailure {
                                attempt,
                                error: error.clone(),
                                at: now,
                            });
                            record.attempt = attempt + 1;
                            record.started_at = now;
                        }
                        events.push(EventKind::StepRetry {
                            step_id: step.id.clone(),
                            step_index: index,
                            attempt,
                            error: error.clone(),
                            next_attempt: attempt + 1,
                            delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                        });
                        Ok(next)
                    })
                    .await?;
                tracing::info!(execution_id = %id, step_id = %step.id, attempt, error = %error, "step attempt failed; retrying");
                let cancelled = self.stop_signal(&id);
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    // A shutdown: the next attempt runs wherever the execution continues.
                    _ = self.inner.draining.cancelled() => return Err(EngineError::HandedOver(id)),
                    // A cancel: the next write finds it and stops.
                    _ = cancelled.cancelled() => {}
                }
            };
            match result {
                Ok((output, ran)) => {
                    let attempt = rec.progress.steps.get(&step.id).map_or(1, |r| r.attempt);
                    self.crash_point(CrashPoint::AfterEffect, wf.id(), &step.id, attempt);
                    let following = steps.get(index + 1);
                    let begin_next = !self.inner.draining.is_cancelled();
                    rec = self
                        .update_held(lease, Some(rec), &id, |r, events| {
                            if r.state.status() != Status::Running {
                                return Err(EngineError::Internal(format!(
                                    "execution became {} while its step {} ran",
                                    r.state.status(),
                                    step.id
                                )));
                            }
                            let now = self.inner.clock.now();
                            let mut next = r.clone();
                            next.progress.steps.extend(unstored.iter().cloned());
                            let done = r
                                .progress
                                .steps
                                .get(&step.id)
                                .cloned()
                                .unwrap_or_else(|| StepRecord::started(input.clone(), 1, now))
                                .finished(output.clone(), ran, now);
                            next.progress.steps.insert(step.id.clone(), done);
                            next.progress.next_step = index + 1;
                            events.push(EventKind::StepComplete {
                                step_id: step.id.clone(),
                                step_index: index,
                                step_type: step.step_type(),
                                output: output.clone(),
                                ran,
                            });
                            match (r.state.suspend_request(), following) {
                                // A suspend asked for while the step ran: it takes effect at
                                // this boundary, in this same write.
                                (Some(req), Some(following)) => {
                                    let suspension = Suspension {
                                        suspended_at: now,
                                        reason: req.reason.clone(),
                                        step_index: index + 1,
                                        step_id: following.id.clone(),
                                        data: None,
                                        deadline: None,
                                    };
                                    next.state = transition(
                                        &r.state,
                                        Transition::Suspend(suspension.clone()),
                                    )
                                    .map_err(|e| EngineError::Internal(e.to_string()))?;
                                    events.push(EventKind::WorkflowSuspended { suspension });
                                }
                                (None, Some(following)) if begin_next => {
                                    self.begin(&mut next.progress, following, output.clone());
                                    events.push(Self::step_start(
                                        following,
                                        index + 1,
                                        output.clone(),
                                    ));
                                }
                                _ => {}
                            }
                            Ok(next)
                        })
                        .await?;
                    self.crash_point(CrashPoint::AfterCheckpoint, wf.id(), &step.id, attempt);
                    if rec.state.status() == Status::Suspended {
                        return Ok(rec);
                    }
                    input = output;
                    begun = begin_next;
                }
                Err(StepError::Suspend {
                    reason,
                    data,
                    deadline,
                }) => {
                    if let Some(d) = &data
                        && !matches!(step.kind, StepKind::Workflow { .. })
                        && let Err(detail) = wf.validate_suspend(index, d)
                    {
                        let message =
                            format!("Step {} suspended with invalid data: {detail}", step.id);
                        return self.fail_now(lease, rec, &step.id, message).await;
                    }
                    let suspension = Suspension {
                        suspended_at: self.inner.clock.now(),
                        reason,
                        step_index: index,
                        step_id: step.id.clone(),
                        // `null` suspend data is no data: stored either way, it reads back
                        // as none, so the record in hand never differs from the stored one.
                        data: data.filter(|d| !d.is_null()),
                        deadline,
                    };
                    return self.suspend_now(lease, rec, suspension, true).await;
                }
                Err(StepError::Failed(message)) => {
                    let message = format!("Step {} failed: {message}", step.id);
                    return self.fail_now(lease, rec, &step.id, message).await;
                }
                Err(StepError::Cancelled) if self.inner.draining.is_cancelled() => {
                    return Err(EngineError::HandedOver(id));
                }
                Err(StepError::Cancelled) => {
                    let message = format!("Step {} was cancelled", step.id);
                    return self.fail_now(lease, rec, &step.id, message).await;
                }
            }
        }
        let at = self.inner.clock.now();
        let result = input;
        let complete = Transition::Complete { result, at };
        self.apply(lease, Some(rec), &id, complete, None).await
    }

    /// Moves the stored execution through `t` (a refused move is an internal error here: the
    /// engine only asks for moves its own run allows), marking the step `mark` names.
    async fn apply(
        &self,
        lease: Option<&Lease>,
        known: Option<ExecutionRecord>,
        id: &str,
        t: Transition,
        mark: Option<(&str, StepStatus)>,
    ) -> Result<ExecutionRecord, EngineError> {
        self.update_held(lease, known, id, |r, events| {
            let state = transition(&r.state, t.clone())
                .map_err(|e| EngineError::Internal(e.to_string()))?;
            events.extend(Self::reported(&t));
            let mut next = r.clone();
            if let ExecutionState::Suspended(s) = &state {
                next.progress.next_step = s.step_index;
            }
            if let Some((step_id, status)) = mark
                && let Some(step) = next.progress.steps.get_mut(step_id)
            {
                step.status = status;
                if status == StepStatus::Failed {
                    step.ended_at = Some(self.inner.clock.now());
                }
            }
            next.state = state;
            Ok(next)
        })
        .await
    }

    /// Suspends at `suspension`'s step: `by_step` when that step asked for it (it is marked
    /// suspended, and a resume continues its attempt), else at a step boundary.
    async fn suspend_now(
        &self,
        lease: Option<&Lease>,
        rec: ExecutionRecord,
        suspension: Suspension,
        by_step: bool,
    ) -> Result<ExecutionRecord, EngineError> {
        let id = rec.id.clone();
        let step_id = suspension.step_id.clone();
        let deadline = suspension.deadline;
        let suspend = Transition::Suspend(suspension);
        let mark = by_step.then_some((step_id.as_str(), StepStatus::Suspended));
        let rec = self.apply(lease, Some(rec), &id, suspend, mark).await?;
        if let Some(deadline) = deadline {
            self.schedule_timer(&id, deadline);
        }
        Ok(rec)
    }

    async fn fail_now(
        &self,
        lease: Option<&Lease>,
        rec: ExecutionRecord,
        step_id: &str,
        message: String,
    ) -> Result<ExecutionRecord, EngineError> {
        let id = rec.id.clone();
        let at = self.inner.clock.now();
        tracing::warn!(execution_id = %id, error = %message, "execution failed");
        let fail = Transition::Fail {
            message: message.clone(),
            step_id: Some(step_id.to_owned()),
            at,
        };
        let mark = Some((step_id, StepStatus::Failed));
        self.apply(lease, Some(rec), &id, fail, mark).await
    }

    /// [`Engine::update`] on behalf of the holder of `lease` (when given): if the stored
    /// execution is held by anyone else, or by an older epoch of this node, nothing is written
    /// and the answer is [`EngineError::LeaseLost`] (fencing).
    async fn update_held<F>(
        &self,
        lease: Option<&Lease>,
        known: Option<ExecutionRecord>,
        id: &str,
        f: F,
    ) -> Result<ExecutionRecord, EngineError>
    where
        F: Fn(&ExecutionRecord, &mut Vec<EventKind>) -> Result<ExecutionRecord, EngineError>,
    {
        self.update(known, id, |r, events| {
            if lease.is_some() && r.state.status() == Status::Cancelled {
                return Err(EngineError::Cancelled(r.id.clone()));
            }
            if let Some(mine) = lease
                && !r.lease.as_ref().is_some_and(|held| held.is(mine))
            {
                return Err(EngineError::LeaseLost(r.id.clone()));
            }
            f(r, events)
        })
        .await
    }

    /// Applies `f` to the stored record and writes the result with a compare-and-set on the
    /// version, re-reading and re-applying on a conflict. `known` saves the first read. The
    /// events `f` reports are numbered, stored with the write and, once it is committed, sent to
    /// the subscribers.
    async fn update<F>(
        &self,
        known: Option<ExecutionRecord>,
        id: &str,
        f: F,
    ) -> Result<ExecutionRecord, EngineError>
    where
        F: Fn(&ExecutionRecord, &mut Vec<EventKind>) -> Result<ExecutionRecord, EngineError>,
    {
        let (rec, events) = self.commit(known, id, f).await?;
        self.publish(events);
        Ok(rec)
    }

    /// [`Engine::update`], handing the committed events back instead of sending them.
    async fn commit<F>(
        &self,
        known: Option<ExecutionRecord>,
        id: &str,
        f: F,
    ) -> Result<(ExecutionRecord, Vec<WorkflowEvent>), EngineError>
    where
        F: Fn(&ExecutionRecord, &mut Vec<EventKind>) -> Result<ExecutionRecord, EngineError>,
    {
        let mut current = known;
        for attempt in 0..200u32 {
            let cur = match current.take() {
                Some(c) => c,
                None => self.inner.store.get(id).await?.ok_or_else(|| {
                    EngineError::Internal(format!("execution {id} disappeared from the store"))
                })?,
            };
            let mut kinds = Vec::new();
            let mut next = f(&cur, &mut kinds)?;
            next.version = cur.version + 1;
            next.updated_at = self.inner.clock.now();
            let events = self.numbered(&mut next, cur.last_event, kinds);
            let changed = next.progress.changed_since(&cur.progress);
            let store = &self.inner.store;
            if store
                .compare_and_set(&next, cur.version, &changed, &events)
                .await?
            {
                return Ok((next, events));
            }
            if attempt > 2 {
                tokio::time::sleep(Duration::from_millis(u64::from(attempt.min(20)))).await;
            }
        }
        Err(EngineError::Contention(id.to_owned()))
    }

    fn child_ctx(parent: &StepContext, child: &Step, cancel: CancellationToken) -> StepContext {
        StepContext {
            step_id: child.id.clone(),
            cancel,
            ..parent.clone()
        }
    }

    /// The record of `child` of the step `parent` runs, started at `started_at`.
    fn child_record(
        &self,
        parent: &StepContext,
        input: Value,
        started_at: chrono::DateTime<chrono::Utc>,
        output: Value,
        ran: bool,
    ) -> StepRecord {
        StepRecord {
            parent: Some(parent.step_id.clone()),
            ..StepRecord::started(input, parent.attempt, started_at)
        }
        .finished(output, ran, self.inner.clock.now())
    }

    /// The output an earlier attempt of the parent step recorded for `child`, if it finished.
    fn finished_child(parent: &StepContext, child: &Step) -> Option<Value> {
        parent
            .step(&child.id)
            .filter(|r| r.is_finished())
            .map(|r| r.output.clone().unwrap_or(Value::Null))
    }

    /// Runs one child of `parent` unless an earlier attempt finished it, and returns its output
    /// with its record (stored already when `store` and the run holds a lease).
    async fn run_child_step(
        &self,
        parent: &StepContext,
        child: &Step,
        cancel: CancellationToken,
        children: &Children,
    ) -> Result<(Value, StepRecord), StepError> {
        let cctx = Self::child_ctx(parent, child, cancel);
        let input = cctx.input.clone();
        let started_at = self.inner.clock.now();
        let (out, ran) = self.run_step(child, cctx, children.clone()).await?;
        Ok((
            out.clone(),
            self.child_record(parent, input, started_at, out, ran),
        ))
    }

    /// Stores a finished child's record now: a lost lease stops the step.
    async fn store_child(
        &self,
        children: &Children,
        child: &Step,
        record: StepRecord,
    ) -> Result<(), StepError> {
        match children
            .store(self.inner.store.as_ref(), &child.id, record)
            .await
        {
            Ok(true) => Ok(()),
            Ok(false) => Err(StepError::Cancelled),
            Err(e) => Err(StepError::failed(format!(
                "recording step {}: {e}",
                child.id
            ))),
        }
    }

    /// Runs one step of any kind; returns its output and whether it ran (false for a skipped
    /// `andWhen`). The records of its children go to `children`.
    fn run_step(
        &self,
        step: &Step,
        ctx: StepContext,
        children: Children,
    ) -> BoxFuture<'static, Result<(Value, bool), StepError>> {
        let step = step.clone();
        let engine = self.clone();
        Box::pin(async move {
            match &step.kind {
                StepKind::Then(f) => guarded(f(ctx)).await.map(|v| (v, true)),
                StepKind::Tap(f) => {
                    let input = ctx.input.clone();
                    guarded(f(ctx)).await?;
                    Ok((input, true))
                }
                StepKind::When {
                    condition,
                    step: child,
                } => {
                    let holds = AssertUnwindSafe(condition(ctx.clone()))
                        .catch_unwind()
                        .await
                        .map_err(|_| StepError::failed("the condition panicked"))?;
                    if !holds {
                        return Ok((ctx.input, false));
                    }
                    let (out, record) = engine
                        .run_child_step(&ctx, child, ctx.cancel.clone(), &children)
                        .await?;
                    // Stored with this step's checkpoint, which comes right after.
                    children.keep(&child.id, record);
                    Ok((out, true))
                }
                StepKind::All(list) => {
                    // Each child is stored as it finishes; a re-run skips the finished ones.
                    let futs = list.iter().map(|c| {
                        let (engine, ctx, children) = (&engine, &ctx, &children);
                        async move {
                            if let Some(out) = Self::finished_child(ctx, c) {
                                return Ok(out);
                            }
                            let (out, record) = engine
                                .run_child_step(ctx, c, ctx.cancel.child_token(), children)
                                .await?;
                            engine.store_child(children, c, record).await?;
                            Ok::<_, StepError>(out)
                        }
                    });
                    let outs = try_join_all(futs).await?;
                    Ok((Value::Array(outs), true))
                }
                StepKind::Race(list) => {
                    if list.is_empty() {
                        return Ok((ctx.input, true));
                    }
                    // The winner of an interrupted attempt wins again.
                    if let Some(out) = list.iter().find_map(|c| Self::finished_child(&ctx, c)) {
                        return Ok((out, true));
                    }
                    let tokens: Vec<CancellationToken> =
                        list.iter().map(|_| ctx.cancel.child_token()).collect();
                    let futs: Vec<_> = list
                        .iter()
                        .zip(&tokens)
                        .map(|(c, t)| {
                            let (engine, ctx, children) = (&engine, &ctx, &children);
                            Box::pin(async move {
                                engine.run_child_step(ctx, c, t.clone(), children).await
                            })
                        })
                        .collect();
                    let (result, winner, rest) = select_all(futs).await;
                    for (i, t) in tokens.iter().enumerate() {
                        if i != winner {
                            t.cancel();
                        }
                    }
                    drop(rest);
                    let (out, record) = result?;
                    // Only the winner is stored: one record, so a re-run finds one winner.
                    engine.store_child(&children, &list[winner], record).await?;
                    Ok((out, true))
                }
                StepKind::Agent {
                    agent_id,
                    prompt,
                    output,
                } => {
                    let runner = engine
                        .inner
                        .agents
                        .read()
                        .unwrap_or_else(|p| p.into_inner())
                        .clone()
                        .ok_or_else(|| StepError::failed("no agent runner is configured"))?;
                    let p = prompt(&ctx);
                    let answer = runner
                        .run_agent(agent_id, p, &ctx.context, ctx.cancel.clone())
                        .await
                        .map_err(|e| StepError::failed(format!("agent {agent_id}: {e}")))?;
                    let out = match output {
                        Some(map) => map(answer),
                        None => answer,
                    };
                    Ok((out, true))
                }
                StepKind::Workflow { workflow_id, input } => {
                    let out = engine.run_child(workflow_id, input.as_ref(), &ctx).await?;
                    Ok((out, true))
                }
            }
        })
    }

    /// Runs a sub-workflow as a child execution; a child that suspends suspends the parent
    /// step, and resuming the parent resumes the child.
    async fn run_child(
        &self,
        workflow_id: &str,
        input_map: Option<&crate::workflow::MapFn>,
        ctx: &StepContext,
    ) -> Result<Value, StepError> {
        let child_id = ctx
            .suspend_data
            .as_ref()
            .and_then(|d| d.get("childExecutionId"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let outcome = match (child_id, &ctx.resume_data) {
            (Some(child_id), Some(resume)) => {
                self.resume(workflow_id, &child_id, resume.clone(), None)
                    .await
            }
            _ => {
                let input = input_map
                    .map(|m| m(ctx))
                    .unwrap_or_else(|| ctx.input.clone());
                let mut context = (*ctx.context).clone();
                context.insert("parentExecutionId".into(), json!(ctx.execution_id));
                context.insert("parentStepId".into(), json!(ctx.step_id));
                self.execute(
                    workflow_id,
                    input,
                    ExecuteOptions {
                        user_id: ctx.user_id().map(str::to_owned),
                        context,
                        // A sub-workflow belongs to whoever owns its parent.
                        owner: ctx.owner.clone(),
                        ..Default::default()
                    },
                )
                .await
            }
        };
        let rec = outcome.map_err(|e| match e {
            // The child stopped for the shutdown: so does the parent, at this step.
            EngineError::HandedOver(_) | EngineError::LeaseLost(_) => StepError::Cancelled,
            e => StepError::failed(format!("sub-workflow {workflow_id}: {e}")),
        })?;
        match rec.state {
            ExecutionState::Completed { result, .. } => Ok(result),
            ExecutionState::Error { message, .. } => Err(StepError::failed(format!(
                "sub-workflow {workflow_id} failed: {message}"
            ))),
            // The child's own deadline, if any, resumes the child, not this step.
            ExecutionState::Suspended(s) => Err(StepError::Suspend {
                deadline: None,
                reason: s.reason,
                data: Some(
                    json!({"childExecutionId": rec.id, "childWorkflowId": workflow_id, "data": s.data}),
                ),
            }),
            other => Err(StepError::failed(format!(
                "sub-workflow {workflow_id} stopped while {}",
                other.status()
            ))),
        }
    }
}

/// Awaits a user step, turning a panic into a step failure.
async fn guarded(fut: crate::workflow::StepFuture) -> Result<Value, StepError> {
    match AssertUnwindSafe(fut).catch_unwind().await {
        Ok(r) => r,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(StepError::failed(format!("the step panicked: {msg}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::step;

    fn counting() -> Workflow {
        Workflow::new("count", "Count")
            .and_then(step("one", |_ctx: StepContext| async move { Ok(json!(1)) }))
            .and_then(step("two", |ctx: StepContext| async move {
                Ok(json!(ctx.input.as_i64().unwrap_or(0) + 1))
            }))
            .and_then(step("three", |ctx: StepContext| async move {
                Ok(json!(ctx.input.as_i64().unwrap_or(0) + 1))
            }))
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn null_suspend_data_is_stored_as_none() {
        let engine = Engine::in_memory();
        engine
            .register(
                Workflow::new("wait", "Wait")
                    .and_then(step("gate", |ctx: StepContext| async move {
                        Err::<Value, _>(ctx.suspend("later", Some(Value::Null)))
                    }))
                    .build()
                    .unwrap(),
            )
            .unwrap();
        let rec = engine
            .execute("wait", json!({}), ExecuteOptions::default())
            .await
            .unwrap();
        let s = rec.state.suspension().expect("suspended");
        assert_eq!(s.data, None);
    }

    /// An execution left `running` at its checkpoint after step `one`: by a dead process when
    /// `lease` is `None` (a row written before leases, or whose holder is gone), else held.
    fn orphan(id: &str, lease: Option<Lease>) -> ExecutionRecord {
        let then = chrono::Utc::now() - chrono::Duration::seconds(120);
        let mut steps = std::collections::BTreeMap::new();
        steps.insert(
            "one".into(),
            StepRecord::started(json!({}), 1, then).finished(json!(1), true, then),
        );
        ExecutionRecord {
            id: id.into(),
            workflow_id: "count".into(),
            state: ExecutionState::Running {
                suspend_request: None,
            },
            input: json!({}),
            context: Map::new(),
            user_id: None,
            owner: None,
            lease,
            start_at: then,
            updated_at: then,
            progress: Progress {
                next_step: 1,
                steps,
            },
            version: 3,
            last_event: 0,
        }
    }

    #[tokio::test]
    async fn recovers_orphans_from_their_checkpoint_once() {
        let engine = Engine::in_memory();
        engine.register(counting()).unwrap();
        engine
            .store()
            .insert(&orphan("old", None), &[])
            .await
            .unwrap();
        engine
            .store()
            .insert(
                &orphan(
                    "fresh",
                    Some(Lease {
                        node: "other".into(),
                        epoch: 1,
                        ttl: Duration::from_secs(60),
                    }),
                ),
                &[],
            )
            .await
            .unwrap();
        assert_eq!(engine.recover().await.unwrap(), 1);
        for _ in 0..100 {
            let rec = engine.store().get("old").await.unwrap().unwrap();
            if rec.state.status() == Status::Completed {
                assert_eq!(rec.state.result(), Some(&json!(3)));
                let fresh = engine.store().get("fresh").await.unwrap().unwrap();
                assert_eq!(fresh.state.status(), Status::Running, "its lease is alive");
                // Nothing is left to take over.
                assert_eq!(engine.recover().await.unwrap(), 0);
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the orphan was not recovered");
    }

    #[tokio::test]
    async fn a_pending_suspend_takes_effect_on_recovery() {
        let engine = Engine::in_memory();
        engine.register(counting()).unwrap();
        let mut rec = orphan("o", None);
        rec.state = ExecutionState::Running {
            suspend_request: Some(SuspendRequest {
                requested_at: chrono::Utc::now(),
                reason: "server shutting down".into(),
            }),
        };
        engine.store().insert(&rec, &[]).await.unwrap();
        assert_eq!(engine.recover().await.unwrap(), 1);
        let rec = engine.store().get("o").await.unwrap().unwrap();
        let s = rec.state.suspension().expect("suspended");
        assert_eq!((s.step_index, s.step_id.as_str()), (1, "two"));
        let done = engine
            .resume("count", "o", Value::Null, None)
            .await
            .unwrap();
        assert_eq!(done.state.result(), Some(&json!(3)));
    }

    #[tokio::test]
    async fn concurrent_resumes_run_once() {
        let engine = Engine::in_memory();
        engine
            .register(
                Workflow::new("gate", "Gate")
                    .and_then(step("wait", |ctx: StepContext| async move {
                        match ctx.resume_data {
                            Some(_) => Ok(json!("opened")),
                            None => Err(ctx.suspend("closed", None)),
                        }
                    }))
                    .build()
                    .unwrap(),
            )
            .unwrap();
        let rec = engine
            .execute("gate", json!({}), ExecuteOptions::default())
            .await
            .unwrap();
        let attempts = (0..50).map(|_| engine.resume("gate", &rec.id, json!(1), None));
        let results = futures::future::join_all(attempts).await;
        let ok = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(ok, 1);
        assert!(
            results
                .iter()
                .filter_map(|r| r.as_ref().err())
                .all(|e| matches!(e, EngineError::NotSuspended { .. }))
        );
    }

    /// Counts the runs of each step id.
    #[derive(Clone, Default)]
    struct Runs(Arc<Mutex<HashMap<String, u32>>>);

    impl Runs {
        fn step(&self, id: &str) -> Step {
            let runs = self.clone();
            let sid = id.to_owned();
            step(id, move |ctx: StepContext| {
                let (runs, sid) = (runs.clone(), sid.clone());
                async move {
                    *lock(&runs.0).entry(sid.clone()).or_default() += 1;
                    Ok(json!({"id": sid, "attempt": ctx.attempt}))
                }
            })
        }

        fn of(&self, id: &str) -> u32 {
            lock(&self.0).get(id).copied().unwrap_or(0)
        }
    }

    /// A running execution of `workflow` left by a dead process in its first step, with
    /// `steps` recorded.
    fn interrupted(workflow: &str, steps: &[(&str, StepRecord)]) -> ExecutionRecord {
        let mut rec = orphan(&format!("{workflow}-1"), None);
        rec.workflow_id = workflow.into();
        rec.progress = Progress {
            next_step: 0,
            steps: steps
                .iter()
                .map(|(id, r)| ((*id).to_owned(), r.clone()))
                .collect(),
        };
        rec
    }

    async fn recovered(engine: &Engine, id: &str) -> ExecutionRecord {
        assert_eq!(engine.recover().await.unwrap(), 1);
        for _ in 0..200 {
            let rec = engine.store().get(id).await.unwrap().unwrap();
            if rec.state.status() != Status::Running {
                return rec;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("{id} was not recovered");
    }

    fn child_of(parent: &str, output: Value) -> StepRecord {
        let at = chrono::Utc::now();
        StepRecord {
            parent: Some(parent.into()),
            ..StepRecord::started(json!({}), 1, at).finished(output, true, at)
        }
    }

    #[tokio::test]
    async fn an_interrupted_and_all_runs_only_its_unfinished_children() {
        let runs = Runs::default();
        let engine = Engine::in_memory();
        let wf = Workflow::new("fan", "Fan")
            .and_all("fan", vec![runs.step("a"), runs.step("b"), runs.step("c")])
            .build()
            .unwrap();
        engine.register(wf).unwrap();
        let started = StepRecord::started(json!({}), 1, chrono::Utc::now());
        let rec = interrupted(
            "fan",
            &[("fan", started), ("a", child_of("fan", json!("a, before")))],
        );
        engine.store().insert(&rec, &[]).await.unwrap();
        let done = recovered(&engine, &rec.id).await;
        assert_eq!((runs.of("a"), runs.of("b"), runs.of("c")), (0, 1, 1));
        assert_eq!(
            done.state.result(),
            Some(&json!(["a, before", {"id": "b", "attempt": 2}, {"id": "c", "attempt": 2}]))
        );
        let fan = &done.progress.steps["fan"];
        assert_eq!((fan.status, fan.attempt), (StepStatus::Completed, 2));
        assert_eq!(done.progress.steps["b"].parent.as_deref(), Some("fan"));
    }

    #[tokio::test]
    async fn an_interrupted_race_keeps_its_winner() {
        let runs = Runs::default();
        let engine = Engine::in_memory();
        let wf = Workflow::new("race", "Race")
            .and_race("race", vec![runs.step("x"), runs.step("y")])
            .build()
            .unwrap();
        engine.register(wf).unwrap();
        let started = StepRecord::started(json!({}), 1, chrono::Utc::now());
        let rec = interrupted(
            "race",
            &[("race", started), ("y", child_of("race", json!("y won")))],
        );
        engine.store().insert(&rec, &[]).await.unwrap();
        let done = recovered(&engine, &rec.id).await;
        assert_eq!(done.state.result(), Some(&json!("y won")));
        assert_eq!((runs.of("x"), runs.of("y")), (0, 0));
    }

    #[tokio::test]
    async fn children_of_and_all_are_stored_as_they_finish() {
        let gate = Arc::new(tokio::sync::Notify::new());
        let engine = Engine::in_memory();
        let wait = gate.clone();
        let slow = step("slow", move |_ctx: StepContext| {
            let wait = wait.clone();
            async move {
                wait.notified().await;
                Ok(json!("slow"))
            }
        });
        let fast = step("fast", |_ctx: StepContext| async move { Ok(json!("fast")) });
        let wf = Workflow::new("both", "Both")
            .and_all("both", vec![fast, slow])
            .build()
            .unwrap();
        engine.register(wf).unwrap();
        let run = engine
            .start("both", json!({}), ExecuteOptions::default())
            .await
            .unwrap();
        let id = run.execution_id.clone();
        let mut stored = None;
        for _ in 0..200 {
            let rec = engine.store().get(&id).await.unwrap().unwrap();
            if let Some(fast) = rec.progress.steps.get("fast") {
                stored = Some(fast.clone());
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let fast = stored.expect("the fast child was stored while the slow one ran");
        assert_eq!(fast.output, Some(json!("fast")));
        gate.notify_one();
        let done = run.finish().await.unwrap();
        assert_eq!(done.state.result(), Some(&json!(["fast", "slow"])));
    }

    #[tokio::test]
    async fn a_resumed_step_continues_its_attempt() {
        let engine = Engine::in_memory();
        engine
            .register(
                Workflow::new("gate", "Gate")
                    .and_then(step("wait", |ctx: StepContext| async move {
                        match ctx.resume_data {
                            Some(_) => Ok(json!({"attempt": ctx.attempt})),
                            None => Err(ctx.suspend("closed", None)),
                        }
                    }))
                    .build()
                    .unwrap(),
            )
            .unwrap();
        let rec = engine
            .execute("gate", json!({}), ExecuteOptions::default())
            .await
            .unwrap();
        let wait = &rec.progress.steps["wait"];
        assert_eq!((wait.status, wait.attempt), (StepStatus::Suspended, 1));
        let done = engine
            .resume("gate", &rec.id, json!(1), None)
            .await
            .unwrap();
        assert_eq!(done.state.result(), Some(&json!({"attempt": 1})));
    }

    /// A durable sleep is a suspension with a deadline: a new engine on the same store (a
    /// restart: the first one's in-memory timer is gone) wakes it once it is due, and the step
    /// sees that its timer fired.
    #[tokio::test]
    async fn a_durable_sleep_survives_a_restart() {
        let store: Arc<dyn ExecutionStore> = Arc::new(MemoryStore::new());
        let nap = || {
            Workflow::new("nap", "Nap")
                .and_then(step("nap", |ctx: StepContext| async move {
                    ctx.sleep_until(ctx.started_at + chrono::Duration::milliseconds(200))?;
                    Ok(json!({"woke": ctx.timed_out}))
                }))
                .build()
                .unwrap()
        };
        let first = Engine::new(store.clone());
        first.register(nap()).unwrap();
        let rec = first
            .execute("nap", json!({}), ExecuteOptions::default())
            .await
            .unwrap();
        let s = rec.state.suspension().expect("asleep");
        assert!(s.reason.starts_with("Sleeping until"), "{}", s.reason);
        assert!(s.deadline.is_some());
        first.shutdown(Duration::ZERO).await;

        let second = Engine::new(store.clone());
        second.register(nap()).unwrap();
        assert_eq!(second.fire_due_timers().await.unwrap(), 0, "not due yet");
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(second.fire_due_timers().await.unwrap(), 1);
        for _ in 0..200 {
            let rec = store.get(&rec.id).await.unwrap().unwrap();
            if rec.state.status() == Status::Completed {
                assert_eq!(rec.state.result(), Some(&json!({"woke": true})));
                assert_eq!(rec.progress.steps["nap"].attempt, 1, "a wake is no re-run");
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("never woke");
    }

    /// A timer of a suspension that was resumed in time fires nothing: the resume won.
    #[tokio::test]
    async fn a_timer_after_a_resume_does_nothing() {
        let engine = Engine::in_memory();
        engine
            .register(
                Workflow::new("gate", "Gate")
                    .and_then(step("wait", |ctx: StepContext| async move {
                        if ctx.timed_out {
                            return Ok(json!("expired"));
                        }
                        match ctx.resume_data {
                            Some(_) => Ok(json!("opened")),
                            None => Err(ctx.suspend_until(
                                "closed",
                                None,
                                chrono::Utc::now() + chrono::Duration::milliseconds(50),
                            )),
                        }
                    }))
                    .build()
                    .unwrap(),
            )
            .unwrap();
        let rec = engine
            .execute("gate", json!({}), ExecuteOptions::default())
            .await
            .unwrap();
        let done = engine
            .resume("gate", &rec.id, json!(1), None)
            .await
            .unwrap();
        assert_eq!(done.state.result(), Some(&json!("opened")));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(engine.fire_timer(&rec.id).await.unwrap().is_none());
        assert_eq!(engine.fire_due_timers().await.unwrap(), 0);
        let after = engine.store().get(&rec.id).await.unwrap().unwrap();
        assert_eq!(after.state.result(), Some(&json!("opened")));
    }
}
