//! Defining workflows: steps, step kinds and the context a step runs with.
//!
//! ```
//! use agentry_engine::workflow::{Workflow, step};
//! use serde_json::json;
//!
//! let wf = Workflow::new("double", "Double")
//!     .purpose("doubles a number")
//!     .input_schema(json!({"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}))
//!     .and_then(step("double", |ctx| async move {
//!         Ok(json!({"n": ctx.input["n"].as_f64().unwrap_or(0.0) * 2.0}))
//!     }))
//!     .build()
//!     .unwrap();
//! assert_eq!(wf.steps().len(), 1);
//! ```

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::event::EventKind;
use crate::queue::Queue;
use crate::record::{StepRecord, StepStatus};
use crate::schema::{Schema, SchemaError};
use crate::state::{AwaitedEvent, EventWait};
pub use crate::step_type::StepType;

/// What a step returns.
pub type StepResult = Result<Value, StepError>;
/// A boxed step future.
pub type StepFuture = Pin<Box<dyn Future<Output = StepResult> + Send>>;
/// A step body: an async function of its context.
pub type StepFn = Arc<dyn Fn(StepContext) -> StepFuture + Send + Sync>;
/// How many items of an `andForEach` run at once, from its context.
pub type ConcurrencyFn = Arc<dyn Fn(&StepContext) -> usize + Send + Sync>;
/// The condition of an `andWhen` step.
pub type ConditionFn =
    Arc<dyn Fn(StepContext) -> Pin<Box<dyn Future<Output = bool> + Send>> + Send + Sync>;
/// Reads, from an event sent without a key (a CloudEvent), the keys under which executions of
/// a workflow wait for it ([`WorkflowBuilder::event_keys`]).
pub type EventKeysFn = Arc<dyn Fn(&Value) -> Vec<String> + Send + Sync>;
/// Reads an event (its data as sent: a CloudEvent's whole envelope) and answers the input of
/// the execution it starts, or `None` when it starts none ([`WorkflowBuilder::started_by`]).
pub type EventStartFn = Arc<dyn Fn(&Value) -> Option<Value> + Send + Sync>;
/// Builds the input of an `andAgent` or `andWorkflow` step from its context.
pub type MapFn = Arc<dyn Fn(&StepContext) -> Value + Send + Sync>;

/// Why a step did not produce an output.
#[derive(Debug, Clone, PartialEq)]
pub enum StepError {
    /// The step asks the execution to pause; resume data comes back to this step. With a
    /// `deadline`, the execution resumes by itself then if nobody resumed it before (a durable
    /// timer), and the step sees `StepContext::timed_out`.
    Suspend {
        reason: String,
        data: Option<Value>,
        deadline: Option<DateTime<Utc>>,
        /// The event whose delivery resumes it ([`StepContext::wait_for_event`]).
        event: Option<Box<EventWait>>,
    },
    /// The step failed; the execution ends in `error` with this message.
    Failed(String),
    /// The step failed with a description of the failure (a definition's DSL error object):
    /// kept as the failed step's output, and shown with the execution's error. Retried like
    /// [`StepError::Failed`].
    Fault {
        message: String,
        details: Box<Value>,
    },
    /// The step noticed its cancellation signal (a lost race) and gave up.
    Cancelled,
}

impl StepError {
    pub fn failed(msg: impl Into<String>) -> Self {
        StepError::Failed(msg.into())
    }
}

impl From<String> for StepError {
    fn from(s: String) -> Self {
        StepError::Failed(s)
    }
}

impl From<&str> for StepError {
    fn from(s: &str) -> Self {
        StepError::Failed(s.to_owned())
    }
}

/// Everything a step can see.
#[derive(Clone)]
pub struct StepContext {
    pub execution_id: String,
    pub workflow_id: String,
    pub step_id: String,
    pub step_index: usize,
    /// The previous step's output (the workflow input for the first step).
    pub input: Value,
    /// The input the execution was started with.
    pub workflow_input: Arc<Value>,
    /// The context map: caller entries, and `user` / `userId` when authenticated.
    pub context: Arc<Map<String, Value>>,
    /// The verified user who started the execution, when authentication is on.
    pub owner: Option<String>,
    /// Data given to resume, for the step that runs first after a resume.
    pub resume_data: Option<Value>,
    /// The data this step suspended with, when it is being resumed.
    pub suspend_data: Option<Value>,
    /// Fires when the step should stop (it lost a race, or the engine shuts down).
    pub cancel: CancellationToken,
    /// How many times this step was started, this time included: 1 on the first run, more
    /// when a crash, a lost lease or a shutdown interrupted an earlier attempt, which may have
    /// done some or all of its work (steps run at least once). Children of a composite step
    /// share its attempt.
    pub attempt: u32,
    /// When this attempt of the step started (kept across a suspension: a resumed step
    /// continues its attempt).
    pub started_at: DateTime<Utc>,
    /// Set when the step runs because the deadline of its suspension passed (nobody resumed
    /// it in time): a durable timer fired.
    pub timed_out: bool,
    pub(crate) steps: Arc<crate::record::StepRecords>,
    /// The engine's clock: what [`StepContext::now`], the durable and the in-step sleeps read.
    pub(crate) clock: Arc<dyn Clock>,
    /// Where the step records its own progress ([`StepContext::journal`]).
    pub(crate) journal: Option<Arc<dyn StepJournal>>,
    /// The item it runs for, when an `andForEach` maps it.
    pub(crate) foreach_item: Option<ForEachItem>,
}

/// What a step writes of its own progress while it runs: entries under the step (`<step>/<key>`)
/// written with their events in one fenced write of the execution, so that a re-run of the
/// step (after a crash, a takeover or a resume) replays what is recorded instead of doing it
/// again. The engine keeps it ([`crate::engine::Journal`]); a step reaches it through
/// [`StepContext::journal`].
#[async_trait::async_trait]
pub trait StepJournal: Send + Sync + std::fmt::Debug {
    /// The step whose journal it is.
    fn step_id(&self) -> &str;

    /// The entry `key` as the execution now stands: written by this run of the step, or by an
    /// earlier one (a replay reads what is recorded here). None after a refused write (the step
    /// stops).
    async fn entry(&self, key: &str) -> Option<StepRecord>;

    /// Whether an earlier run of this step recorded anything under it (an entry, an event it
    /// took, a foreach item).
    async fn has_entries(&self) -> bool;

    /// Writes the entries (by key) and reports `events`, in one fenced write; an entry with the
    /// key of an earlier one replaces it. A lost lease or a cancelled execution is
    /// [`StepError::Cancelled`]: the step must stop (its run ends the way a checkpoint's would).
    async fn write(
        &self,
        entries: Vec<(String, StepRecord)>,
        events: Vec<EventKind>,
    ) -> Result<(), StepError>;

    /// Leaves entries and events for the step's checkpoint to write (when the step ends with an
    /// output; a step that fails or suspends after this loses them, and a re-run does their
    /// work again).
    fn defer(&self, entries: Vec<(String, StepRecord)>, events: Vec<EventKind>);

    /// How many events the execution's log holds, as this step last wrote it.
    async fn logged_events(&self) -> i64;

    /// Whether this process is shutting down: a step that records its progress stops at its
    /// next entry ([`StepError::Cancelled`]), so that its execution is handed over there.
    fn draining(&self) -> bool;

    /// Sends an event to the execution's live subscribers in this process now, unstored (a
    /// piece of text as a model streams it).
    fn announce(&self, kind: EventKind);

    /// Runs the workflow `workflow_id` (in `version`; by default its newest) on `input` as a
    /// child execution whose id is derived
    /// from this execution and `key` (the same on every run of the step: a re-run joins the
    /// child it started): its result; a child that suspends suspends this step, and resuming
    /// this step resumes the child; a failed child is [`StepError::Failed`].
    async fn run_workflow(
        &self,
        ctx: &StepContext,
        workflow_id: &str,
        version: Option<&str>,
        input: Value,
        key: &str,
    ) -> Result<Value, StepError>;

    /// [`StepContext::wait_for_any_event`] (and [`StepContext::wait_for_event`]), which call
    /// it.
    async fn wait_for_any_event(
        &self,
        ctx: &StepContext,
        awaited: &[AwaitedEvent],
        deadline: Option<DateTime<Utc>>,
    ) -> Result<Option<(usize, Value)>, StepError>;
}

/// The item of an `andForEach` a mapped step runs for ([`StepContext::foreach_item`]).
#[derive(Debug, Clone)]
pub struct ForEachItem {
    /// Its index in the items.
    pub index: usize,
    /// How many items the foreach maps.
    pub count: usize,
    /// Items reported done so far (in this run and the earlier ones).
    done: Arc<std::sync::atomic::AtomicUsize>,
}

impl ForEachItem {
    pub(crate) fn new(
        index: usize,
        count: usize,
        done: Arc<std::sync::atomic::AtomicUsize>,
    ) -> Self {
        Self { index, count, done }
    }

    /// Reports this item's work done (call it once, at its end): the number of the foreach's
    /// items done now, this one included (for progress: `{done: n}` of `count`). Items that
    /// finished in an earlier run of the step count too.
    pub fn done(&self) -> usize {
        self.done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
    }
}

impl StepContext {
    /// The step's journal: records of its own progress, written as it goes (a durable agent
    /// run records each model call and tool call), read back through
    /// [`StepJournal::entry`] when the step runs again.
    pub fn journal(&self) -> Option<&Arc<dyn StepJournal>> {
        self.journal.as_ref()
    }

    /// The item an `andForEach` runs this step for (`None` outside one).
    pub fn foreach_item(&self) -> Option<&ForEachItem> {
        self.foreach_item.as_ref()
    }

    /// The stored record of an earlier step (or child step).
    pub fn step(&self, id: &str) -> Option<&StepRecord> {
        self.steps.get(id).map(Arc::as_ref)
    }

    /// An earlier step's output.
    pub fn step_output(&self, id: &str) -> Option<&Value> {
        self.steps.get(id).and_then(|r| r.output.as_ref())
    }

    /// An earlier step's input.
    pub fn step_input(&self, id: &str) -> Option<&Value> {
        self.steps.get(id).map(|r| &r.input)
    }

    /// Whether an earlier step actually ran (an `andWhen` whose condition failed did not).
    pub fn step_ran(&self, id: &str) -> bool {
        self.steps
            .get(id)
            .is_some_and(|r| r.status == StepStatus::Completed)
    }

    /// The authenticated user, when there is one.
    pub fn user(&self) -> Option<&Value> {
        self.context.get("user")
    }

    /// The user id, when known.
    pub fn user_id(&self) -> Option<&str> {
        self.context.get("userId").and_then(Value::as_str)
    }

    /// Builds the error that suspends the execution at this step.
    pub fn suspend(&self, reason: impl Into<String>, data: Option<Value>) -> StepError {
        StepError::Suspend {
            reason: reason.into(),
            data,
            deadline: None,
            event: None,
        }
    }

    /// Builds the error that suspends the execution at this step until `deadline` at the
    /// latest: then it resumes by itself, on whichever server is up (also after every server
    /// was down at that time), and this step runs again with [`StepContext::timed_out`] set.
    pub fn suspend_until(
        &self,
        reason: impl Into<String>,
        data: Option<Value>,
        deadline: DateTime<Utc>,
    ) -> StepError {
        StepError::Suspend {
            reason: reason.into(),
            data,
            deadline: Some(deadline),
            event: None,
        }
    }

    /// A durable sleep: `Ok` once `until` has passed (or the timer fired), else the error that
    /// suspends the execution until then (`Sleeping until <time>`). The step runs again from its
    /// start when it wakes, so `until` must be the same on every run: derive it from the input
    /// or from [`StepContext::started_at`], not from the clock.
    pub fn sleep_until(&self, until: DateTime<Utc>) -> Result<(), StepError> {
        if self.timed_out || self.now() >= until {
            return Ok(());
        }
        Err(self.suspend_until(
            format!("Sleeping until {}", until.to_rfc3339()),
            None,
            until,
        ))
    }

    /// Sleeps, or returns [`StepError::Cancelled`] as soon as the step is cancelled.
    pub async fn sleep(&self, d: Duration) -> Result<(), StepError> {
        // Biased: when the cancel and the end of the sleep come together, the cancel wins, and
        // always the same way (the deterministic simulation, tests/simulation.rs, replays a
        // seed; an unbiased select picks at random).
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => Err(StepError::Cancelled),
            _ = self.clock.sleep(d) => Ok(()),
        }
    }

    /// Now, by the engine's clock (a test's manual clock, or the wall clock).
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Sends `data` to the execution's streams now, as a `step-output` event of this step
    /// (progress, partial results): stored in its event log (one fenced write), so a client
    /// that re-attaches sees it too. At most [`MAX_STEP_OUTPUT_BYTES`] of JSON per event, and
    /// no more once the execution's log holds [`MAX_LOGGED_EVENTS`] events: over either, a
    /// [`StepError::Failed`] naming the bound. A step whose lease is lost or whose execution
    /// was cancelled gets [`StepError::Cancelled`].
    pub async fn emit(&self, data: Value) -> Result<(), StepError> {
        let size = serde_json::to_vec(&data).map_or(usize::MAX, |b| b.len());
        if size > MAX_STEP_OUTPUT_BYTES {
            return Err(StepError::failed(format!(
                "step output of {size} bytes is over the limit of {MAX_STEP_OUTPUT_BYTES}"
            )));
        }
        let journal = self
            .journal
            .as_ref()
            .ok_or_else(|| StepError::failed("step output needs the engine's journal"))?;
        if journal.logged_events().await >= MAX_LOGGED_EVENTS {
            return Err(StepError::failed(format!(
                "the execution's event log holds {MAX_LOGGED_EVENTS} events: no more step output"
            )));
        }
        let event = crate::event::EventKind::StepOutput {
            step_id: self.step_id.clone(),
            data,
        };
        journal.write(Vec::new(), vec![event]).await
    }

    /// Whether this execution takes the branch of the change `change_id` (Temporal's
    /// patching): one definition serves the executions started before a change of a step's
    /// body and those after it. The first call records the answer in the step's journal
    /// (`patch-<change_id>`), so every later run of the step (a crash, a takeover, a resume)
    /// takes the same branch. That first answer is `true`, unless the step runs again without
    /// the record after a suspension or an interrupted attempt (a crash, a takeover): it began
    /// under the code before the change, whose effects the old branch expects. (A retry after
    /// a failed attempt is a first run: the failed attempt ran this very code.)
    pub async fn patched(&self, change_id: &str) -> Result<bool, StepError> {
        let journal = self
            .journal
            .as_ref()
            .ok_or_else(|| StepError::failed("patching needs the engine's journal"))?;
        let key = format!("patch-{change_id}");
        if let Some(marker) = journal.entry(&key).await {
            return Ok(marker.output.and_then(|o| o.as_bool()).unwrap_or(false));
        }
        // Each failed attempt that was tried again is recorded; an interrupted one is not.
        let failed_attempts = self.step(&self.step_id).map_or(0, |r| r.failures.len());
        let interrupted = self.attempt as usize > 1 + failed_attempts;
        let resumed = self.resume_data.is_some() || self.suspend_data.is_some() || self.timed_out;
        let first_run = !interrupted && !resumed && !journal.has_entries().await;
        let now = self.now();
        let marker = StepRecord {
            parent: Some(self.step_id.clone()),
            ..StepRecord::started(json!({"patch": change_id}), self.attempt, now)
        }
        .finished(json!(first_run), true, now);
        journal.write(vec![(key, marker)], Vec::new()).await?;
        Ok(first_run)
    }

    /// Waits for the event `name` (declared with [`WorkflowBuilder::event`]): its data once it
    /// is delivered, `None` when `deadline` passed first (then [`StepContext::timed_out`] is
    /// set). An event delivered to this execution before the step waits is in its mailbox and
    /// is taken at once; with a `key`, so is an event sent by key (`POST /events/{name}`)
    /// within the retention window ([`crate::engine::EVENT_RETENTION`]). Else the execution
    /// suspends (`Waiting for event <name>`) until a delivery resumes it: use it with `?`.
    ///
    /// Each wait of a step is recorded in the step's journal under `event-<n>` (its n-th
    /// wait), so a step that runs again (resumed, recovered) gets the same events back in the
    /// same order: the step's waits must come in the same order on every run.
    pub async fn wait_for_event(
        &self,
        name: &str,
        key: Option<&str>,
        deadline: Option<DateTime<Utc>>,
    ) -> Result<Option<Value>, StepError> {
        let awaited = [AwaitedEvent::new(name, key)];
        let got = self.wait_for_any_event(&awaited, deadline).await?;
        Ok(got.map(|(_, data)| data))
    }

    /// Waits for the first of several events (each as [`StepContext::wait_for_event`] waits
    /// for one: its name, and the key it must carry): which of `awaited` came (its index) and
    /// its data, or `None` when `deadline` passed first. The suspension shows them all; a
    /// delivery of any of them resumes it. Recorded like a wait for one.
    pub async fn wait_for_any_event(
        &self,
        awaited: &[AwaitedEvent],
        deadline: Option<DateTime<Utc>>,
    ) -> Result<Option<(usize, Value)>, StepError> {
        let journal = self
            .journal
            .as_ref()
            .ok_or_else(|| StepError::failed("waiting for an event needs the engine's journal"))?;
        journal.wait_for_any_event(self, awaited, deadline).await
    }
}

/// The longest declared version.
pub const MAX_VERSION_LEN: usize = 64;

/// The version of a definition that declares none: `g-` and a digest of its step graph (each
/// step's id and type, its children in order), so that a change of the steps is a new version
/// and the same steps are the same version on every server.
fn graph_version(steps: &[Step]) -> String {
    fn describe(step: &Step, out: &mut String) {
        out.push_str(&step.id);
        out.push(':');
        out.push_str(step.step_type().as_str());
        out.push('(');
        for child in step.children() {
            describe(child, out);
            out.push(',');
        }
        out.push(')');
    }
    let mut graph = String::new();
    for step in steps {
        describe(step, &mut graph);
        graph.push(';');
    }
    format!("g-{}", &crate::id::digest(&graph)[..16])
}

/// The most items one `andForEach` maps.
pub const MAX_FOREACH_ITEMS: usize = 10_000;
/// The most items of one `andForEach` that run at once.
pub const MAX_FOREACH_CONCURRENCY: usize = 64;

/// The most JSON one `step-output` event may carry (64 KiB).
pub const MAX_STEP_OUTPUT_BYTES: usize = 64 * 1024;
/// An execution whose log holds this many events takes no more step output.
pub const MAX_LOGGED_EVENTS: i64 = 10_000;

/// What a step does.
#[derive(Clone)]
pub enum StepKind {
    /// Runs its function; the output flows on.
    Then(StepFn),
    /// Runs `step` only when `condition` holds; passes its input through otherwise.
    When {
        condition: ConditionFn,
        step: Box<Step>,
    },
    /// Runs its children concurrently; outputs their outputs in order.
    All(Vec<Step>),
    /// Runs its children concurrently; the first to finish wins, the rest are cancelled.
    Race(Vec<Step>),
    /// Runs its function for its effect; passes its input through.
    Tap(StepFn),
    /// Runs a registered agent with the prompt `prompt` builds; output is the agent's result,
    /// shaped by `output` when given.
    Agent {
        agent_id: String,
        prompt: MapFn,
        output: Option<Arc<dyn Fn(Value) -> Value + Send + Sync>>,
    },
    /// Runs a registered workflow as a child execution; output is its result.
    Workflow {
        workflow_id: String,
        input: Option<MapFn>,
    },
    /// Runs `step` once per item of the array `items` makes of its context (each item its
    /// input), at most `concurrency` at once; output is the array of their outputs, in order.
    ForEach {
        items: MapFn,
        concurrency: ConcurrencyFn,
        step: Box<Step>,
    },
}

/// One step of a workflow.
#[derive(Clone)]
pub struct Step {
    pub id: String,
    pub name: String,
    pub purpose: String,
    pub kind: StepKind,
    pub input_schema: Option<Value>,
    pub output_schema: Option<Value>,
    pub suspend_schema: Option<Value>,
    pub resume_schema: Option<Value>,
    /// How a failed attempt is tried again (none: a failure fails the execution).
    pub retry: Option<Retry>,
    /// How long one attempt may take; a slower one fails (and is retried when it may be).
    pub timeout: Option<Duration>,
}

/// How a failed step is tried again: `retries` more attempts, the first after `backoff`, each
/// next one after twice as long. The attempt number is written before each attempt runs, so an
/// attempt a crash interrupted counts too: a crash never grants an extra attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    pub retries: u32,
    pub backoff: Duration,
}

impl Retry {
    /// The most attempts a step gets.
    pub fn max_attempts(&self) -> u32 {
        self.retries.saturating_add(1)
    }

    /// The wait after failed attempt number `attempt` (1-based).
    pub fn delay(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(20);
        self.backoff
            .saturating_mul(1 << doublings)
            .min(Duration::from_secs(3600))
    }
}

impl std::fmt::Debug for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Step")
            .field("id", &self.id)
            .field("type", &self.step_type().as_str())
            .finish()
    }
}

fn boxed<F, Fut>(f: F) -> StepFn
where
    F: Fn(StepContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = StepResult> + Send + 'static,
{
    Arc::new(move |ctx| Box::pin(f(ctx)))
}

/// A plain step (`andThen` unless added with another `and_*`).
pub fn step<F, Fut>(id: impl Into<String>, f: F) -> Step
where
    F: Fn(StepContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = StepResult> + Send + 'static,
{
    Step::with_kind(id, StepKind::Then(boxed(f)))
}

impl Step {
    /// The ids of its children, their children, and so on (composite steps only).
    pub fn descendants(&self) -> Vec<&str> {
        self.children()
            .into_iter()
            .flat_map(|c| std::iter::once(c.id.as_str()).chain(c.descendants()))
            .collect()
    }

    pub fn with_kind(id: impl Into<String>, kind: StepKind) -> Self {
        let id = id.into();
        Self {
            name: id.clone(),
            purpose: String::new(),
            id,
            kind,
            input_schema: None,
            output_schema: None,
            suspend_schema: None,
            resume_schema: None,
            retry: None,
            timeout: None,
        }
    }

    /// Tries a failed (or timed-out) attempt again, `retries` more times, waiting `backoff`
    /// before the first retry and twice as long before each next one.
    pub fn retries(mut self, retries: u32, backoff: Duration) -> Self {
        self.retry = Some(Retry { retries, backoff });
        self
    }

    /// Fails an attempt that takes longer than `limit` (its future is dropped and its
    /// cancellation signal fires).
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }

    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    pub fn purpose(mut self, purpose: impl Into<String>) -> Self {
        self.purpose = purpose.into();
        self
    }

    pub fn input_schema(mut self, s: Value) -> Self {
        self.input_schema = Some(s);
        self
    }

    pub fn output_schema(mut self, s: Value) -> Self {
        self.output_schema = Some(s);
        self
    }

    pub fn suspend_schema(mut self, s: Value) -> Self {
        self.suspend_schema = Some(s);
        self
    }

    pub fn resume_schema(mut self, s: Value) -> Self {
        self.resume_schema = Some(s);
        self
    }

    pub fn step_type(&self) -> StepType {
        match self.kind {
            StepKind::Then(_) => StepType::Then,
            StepKind::When { .. } => StepType::When,
            StepKind::All(_) => StepType::All,
            StepKind::Race(_) => StepType::Race,
            StepKind::Tap(_) => StepType::Tap,
            StepKind::Agent { .. } => StepType::Agent,
            StepKind::Workflow { .. } => StepType::Workflow,
            StepKind::ForEach { .. } => StepType::ForEach,
        }
    }

    /// Children of `andAll`, `andRace` and `andWhen`.
    pub fn children(&self) -> Vec<&Step> {
        match &self.kind {
            StepKind::All(c) | StepKind::Race(c) => c.iter().collect(),
            StepKind::When { step, .. } | StepKind::ForEach { step, .. } => vec![step.as_ref()],
            _ => Vec::new(),
        }
    }

    fn into_tap(self) -> Self {
        let kind = match self.kind {
            StepKind::Then(f) => StepKind::Tap(f),
            other => other,
        };
        Self { kind, ..self }
    }
}

/// A workflow being defined; [`WorkflowBuilder::build`] checks and compiles it.
pub struct WorkflowBuilder {
    id: String,
    name: String,
    purpose: String,
    input_schema: Option<Value>,
    suspend_schema: Option<Value>,
    resume_schema: Option<Value>,
    events: Vec<(String, Value)>,
    event_keys: Vec<(String, EventKeysFn)>,
    started_by: Vec<(String, EventStartFn)>,
    source: Option<Value>,
    version: Option<String>,
    queue: Option<Queue>,
    internal: bool,
    steps: Vec<Step>,
}

/// Why a workflow definition was refused.
#[derive(Debug, thiserror::Error)]
pub enum DefinitionError {
    #[error("workflow {0} has no steps")]
    NoSteps(String),
    #[error("workflow {workflow}: step id {step} is used twice")]
    DuplicateStep { workflow: String, step: String },
    #[error("workflow {workflow}: {what}: {source}")]
    Schema {
        workflow: String,
        what: String,
        source: SchemaError,
    },
    #[error("workflow id {0:?} is not usable in a path (use letters, digits, '-', '_', '.')")]
    BadId(String),
    #[error("workflow {workflow}: the step that {step} maps must be a plain step (andThen)")]
    ForEachStep { workflow: String, step: String },
    #[error(
        "workflow {workflow}: version {version:?} is not 1 to 64 letters, digits, '-', '_' or '.'"
    )]
    BadVersion { workflow: String, version: String },
    #[error("workflow {workflow}: event {event:?} is declared twice or is not usable in a path")]
    BadEvent { workflow: String, event: String },
    #[error("workflow {workflow}: {reason}")]
    BadQueue { workflow: String, reason: String },
}

impl WorkflowBuilder {
    pub fn purpose(mut self, purpose: impl Into<String>) -> Self {
        self.purpose = purpose.into();
        self
    }

    pub fn input_schema(mut self, s: Value) -> Self {
        self.input_schema = Some(s);
        self
    }

    pub fn suspend_schema(mut self, s: Value) -> Self {
        self.suspend_schema = Some(s);
        self
    }

    pub fn resume_schema(mut self, s: Value) -> Self {
        self.resume_schema = Some(s);
        self
    }

    /// Names this definition's version (1 to 64 letters, digits, `-`, `_` or `.`; a date like
    /// `2026-11-25` reads well). Without it, the version is a digest of the step graph (ids,
    /// types, nesting): a change of the steps is a new version. An execution is continued only
    /// by a server that has the version it started on.
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    /// Puts its executions through `queue`: each enters `queued` and starts when the queue's
    /// limits allow, on whichever replica has room ([`crate::queue`]).
    pub fn queue(mut self, queue: Queue) -> Self {
        self.queue = Some(queue);
        self
    }

    /// Declares it internal: a workflow a layer built on the engine registers for its own use
    /// (an agent's durable runs), hidden from the catalogue, the workflow routes and the
    /// schedules. Its id is `<namespace>:<name>` ([`crate::id::internal_workflow_id`]).
    pub fn internal(mut self) -> Self {
        self.internal = true;
        self
    }

    /// The document it was read from, when it is written as data (a definition): shown with
    /// it, never run.
    pub fn source(mut self, document: Value) -> Self {
        self.source = Some(document);
        self
    }

    /// Declares the event `name` its steps may wait for
    /// ([`StepContext::wait_for_event`]) and the JSON Schema of its data: a delivery is
    /// validated against it.
    pub fn event(mut self, name: impl Into<String>, schema: Value) -> Self {
        self.events.push((name.into(), schema));
        self
    }

    /// How an event `name` (declared with [`WorkflowBuilder::event`]) sent without a key (a
    /// CloudEvent: [`crate::Engine::publish_unkeyed`]) finds the executions waiting for it:
    /// `keys` reads, from the event, the keys their steps wait with.
    pub fn event_keys(mut self, name: impl Into<String>, keys: EventKeysFn) -> Self {
        self.event_keys.push((name.into(), keys));
        self
    }

    /// Each event `name` sent (to the executions waiting for it, by key or without:
    /// [`crate::Engine::publish_event`], [`crate::Engine::publish_unkeyed`]) for which `start`
    /// answers an input starts one execution of this workflow on it, once per event id (its
    /// execution id derived from the event's). The event is declared, of any data.
    pub fn started_by(mut self, name: impl Into<String>, start: EventStartFn) -> Self {
        let name = name.into();
        if !self.events.iter().any(|(n, _)| *n == name) {
            self.events.push((name.clone(), serde_json::json!({})));
        }
        self.started_by.push((name, start));
        self
    }

    /// A sequential step.
    pub fn and_then(mut self, step: Step) -> Self {
        self.steps.push(step);
        self
    }

    /// A conditional step: `step` runs only when `condition` holds.
    pub fn and_when<C, Fut>(mut self, id: impl Into<String>, condition: C, step: Step) -> Self
    where
        C: Fn(StepContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = bool> + Send + 'static,
    {
        let condition: ConditionFn = Arc::new(move |ctx| Box::pin(condition(ctx)));
        self.steps.push(Step::with_kind(
            id,
            StepKind::When {
                condition,
                step: Box::new(step),
            },
        ));
        self
    }

    /// Parallel children; the output is the array of their outputs.
    pub fn and_all(mut self, id: impl Into<String>, children: Vec<Step>) -> Self {
        self.steps
            .push(Step::with_kind(id, StepKind::All(children)));
        self
    }

    /// Maps `step` (a plain step) over the array `items` makes of the context (usually from
    /// its input), at most `concurrency` items at once (at least 1, at most
    /// [`MAX_FOREACH_CONCURRENCY`]). Each item's result is recorded as it finishes (a record
    /// `<id>/<index>`), so a run interrupted midway runs only the unfinished items again. The
    /// output is the array of the results, in the items' order; the first item that fails
    /// fails the step.
    pub fn and_for_each<I, C>(
        mut self,
        id: impl Into<String>,
        items: I,
        concurrency: C,
        step: Step,
    ) -> Self
    where
        I: Fn(&StepContext) -> Value + Send + Sync + 'static,
        C: Fn(&StepContext) -> usize + Send + Sync + 'static,
    {
        self.steps.push(Step::with_kind(
            id,
            StepKind::ForEach {
                items: Arc::new(items),
                concurrency: Arc::new(concurrency),
                step: Box::new(step),
            },
        ));
        self
    }

    /// Racing children; the first to finish wins.
    pub fn and_race(mut self, id: impl Into<String>, children: Vec<Step>) -> Self {
        self.steps
            .push(Step::with_kind(id, StepKind::Race(children)));
        self
    }

    /// A side effect; the input passes through.
    pub fn and_tap(mut self, step: Step) -> Self {
        self.steps.push(step.into_tap());
        self
    }

    /// Runs a registered agent with the prompt built from the step context.
    pub fn and_agent<P>(
        mut self,
        id: impl Into<String>,
        agent_id: impl Into<String>,
        prompt: P,
    ) -> Self
    where
        P: Fn(&StepContext) -> Value + Send + Sync + 'static,
    {
        self.steps.push(Step::with_kind(
            id,
            StepKind::Agent {
                agent_id: agent_id.into(),
                prompt: Arc::new(prompt),
                output: None,
            },
        ));
        self
    }

    /// Runs a registered workflow as a sub-workflow, with `input` building its input (the step
    /// input when `None`).
    pub fn and_workflow(
        mut self,
        id: impl Into<String>,
        workflow_id: impl Into<String>,
        input: Option<MapFn>,
    ) -> Self {
        self.steps.push(Step::with_kind(
            id,
            StepKind::Workflow {
                workflow_id: workflow_id.into(),
                input,
            },
        ));
        self
    }

    /// Adds a fully built step of any kind (for setting a name, purpose or schemas on an
    /// `andWhen`/`andAll`/... step).
    pub fn step(mut self, step: Step) -> Self {
        self.steps.push(step);
        self
    }

    /// Changes the last added step (name, purpose, schemas).
    pub fn with_last(mut self, f: impl FnOnce(Step) -> Step) -> Self {
        if let Some(last) = self.steps.pop() {
            self.steps.push(f(last));
        }
        self
    }

    /// Checks the definition and compiles its schemas.
    pub fn build(self) -> Result<Workflow, DefinitionError> {
        let valid_id = if self.internal {
            crate::id::is_internal_workflow(&self.id)
        } else {
            crate::id::is_valid_id(&self.id)
        };
        if !valid_id {
            return Err(DefinitionError::BadId(self.id));
        }
        if self.steps.is_empty() {
            return Err(DefinitionError::NoSteps(self.id));
        }
        let mut seen = HashSet::new();
        fn walk<'a>(s: &'a Step, out: &mut Vec<&'a Step>) {
            out.push(s);
            for c in s.children() {
                walk(c, out);
            }
        }
        let mut all = Vec::new();
        for s in &self.steps {
            walk(s, &mut all);
        }
        for s in &all {
            if let StepKind::ForEach { step, .. } = &s.kind
                && !matches!(step.kind, StepKind::Then(_))
            {
                return Err(DefinitionError::ForEachStep {
                    workflow: self.id.clone(),
                    step: s.id.clone(),
                });
            }
            if !seen.insert(s.id.clone()) {
                return Err(DefinitionError::DuplicateStep {
                    workflow: self.id.clone(),
                    step: s.id.clone(),
                });
            }
        }
        let compile =
            |what: String, s: &Option<Value>| -> Result<Option<Schema>, DefinitionError> {
                s.clone()
                    .map(Schema::compile)
                    .transpose()
                    .map_err(|source| DefinitionError::Schema {
                        workflow: self.id.clone(),
                        what,
                        source,
                    })
            };
        let input = compile("inputSchema".into(), &self.input_schema)?;
        let suspend = compile("suspendSchema".into(), &self.suspend_schema)?;
        let resume = compile("resumeSchema".into(), &self.resume_schema)?;
        let mut step_resume = Vec::new();
        let mut step_suspend = Vec::new();
        for s in &self.steps {
            step_resume.push(compile(
                format!("step {} resumeSchema", s.id),
                &s.resume_schema,
            )?);
            step_suspend.push(compile(
                format!("step {} suspendSchema", s.id),
                &s.suspend_schema,
            )?);
        }
        let mut events = Vec::new();
        for (name, schema) in &self.events {
            if !crate::id::is_valid_id(name) || events.iter().any(|(n, _)| n == name) {
                return Err(DefinitionError::BadEvent {
                    workflow: self.id.clone(),
                    event: name.clone(),
                });
            }
            let what = format!("event {name} schema");
            let compiled = compile(what, &Some(schema.clone()))?.expect("a schema was given");
            events.push((name.clone(), compiled));
        }
        let version = match self.version {
            Some(v) if v.len() <= MAX_VERSION_LEN && crate::id::is_valid_id(&v) => v,
            Some(v) => {
                return Err(DefinitionError::BadVersion {
                    workflow: self.id,
                    version: v,
                });
            }
            None => graph_version(&self.steps),
        };
        if let Some(queue) = &self.queue {
            queue.check().map_err(|reason| DefinitionError::BadQueue {
                workflow: self.id.clone(),
                reason,
            })?;
        }
        Ok(Workflow {
            events,
            event_keys: self.event_keys,
            started_by: self.started_by,
            source: self.source,
            version,
            queue: self.queue,
            internal: self.internal,
            id: self.id,
            name: self.name,
            purpose: self.purpose,
            input_schema: input,
            suspend_schema: suspend,
            resume_schema: resume,
            step_resume_schemas: step_resume,
            step_suspend_schemas: step_suspend,
            steps: self.steps,
        })
    }
}

/// A checked, compiled workflow definition.
pub struct Workflow {
    id: String,
    name: String,
    purpose: String,
    input_schema: Option<Schema>,
    suspend_schema: Option<Schema>,
    resume_schema: Option<Schema>,
    step_resume_schemas: Vec<Option<Schema>>,
    step_suspend_schemas: Vec<Option<Schema>>,
    /// The events its steps may wait for, with the schema of their data.
    events: Vec<(String, Schema)>,
    /// How an event sent without a key finds its waiting executions, by event.
    event_keys: Vec<(String, EventKeysFn)>,
    /// The events that start an execution of it, by event.
    started_by: Vec<(String, EventStartFn)>,
    /// The document it was read from ([`WorkflowBuilder::source`]).
    source: Option<Value>,
    /// Declared, or the digest of its step graph.
    version: String,
    /// The queue its executions go through, if any.
    queue: Option<Queue>,
    /// Hidden from catalogues and routes ([`WorkflowBuilder::internal`]).
    internal: bool,
    steps: Vec<Step>,
}

impl std::fmt::Debug for Workflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workflow")
            .field("id", &self.id)
            .field("steps", &self.steps)
            .finish()
    }
}

impl Workflow {
    /// Starts a definition.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(id: impl Into<String>, name: impl Into<String>) -> WorkflowBuilder {
        WorkflowBuilder {
            id: id.into(),
            name: name.into(),
            purpose: String::new(),
            input_schema: None,
            suspend_schema: None,
            resume_schema: None,
            events: Vec::new(),
            event_keys: Vec::new(),
            started_by: Vec::new(),
            source: None,
            version: None,
            queue: None,
            internal: false,
            steps: Vec::new(),
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether it is internal ([`WorkflowBuilder::internal`]): not a host's workflow, hidden
    /// from catalogues and routes.
    pub fn is_internal(&self) -> bool {
        self.internal
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn purpose(&self) -> &str {
        &self.purpose
    }

    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Its version: declared ([`WorkflowBuilder::version`]), or `g-<digest of its step graph>`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The queue its executions go through, if it declares one.
    pub fn queue(&self) -> Option<&Queue> {
        self.queue.as_ref()
    }

    /// The input schema as JSON Schema; `{"type": "object"}` when none was given.
    pub fn input_schema_json(&self) -> Value {
        self.input_schema
            .as_ref()
            .map(|s| s.source().clone())
            .unwrap_or_else(|| json!({"type": "object"}))
    }

    pub fn suspend_schema_json(&self) -> Option<&Value> {
        self.suspend_schema.as_ref().map(Schema::source)
    }

    pub fn resume_schema_json(&self) -> Option<&Value> {
        self.resume_schema.as_ref().map(Schema::source)
    }

    /// Validates an execution input.
    pub fn validate_input(&self, input: &Value) -> Result<(), String> {
        match &self.input_schema {
            Some(s) => s.validate(input),
            None => Ok(()),
        }
    }

    /// Validates resume data for the step at `index`: its own resume schema, else the
    /// workflow's.
    pub fn validate_resume(&self, index: usize, data: &Value) -> Result<(), String> {
        let schema = self
            .step_resume_schemas
            .get(index)
            .and_then(Option::as_ref)
            .or(self.resume_schema.as_ref());
        match schema {
            Some(s) => s.validate(data),
            None => Ok(()),
        }
    }

    /// Validates suspend data of the step at `index`: its own suspend schema, else the
    /// workflow's.
    pub fn validate_suspend(&self, index: usize, data: &Value) -> Result<(), String> {
        let schema = self
            .step_suspend_schemas
            .get(index)
            .and_then(Option::as_ref)
            .or(self.suspend_schema.as_ref());
        match schema {
            Some(s) => s.validate(data),
            None => Ok(()),
        }
    }

    /// The events its steps may wait for, with the JSON Schema of their data.
    pub fn events(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.events.iter().map(|(n, s)| (n.as_str(), s.source()))
    }

    /// Whether it declares the event `name`.
    pub fn declares_event(&self, name: &str) -> bool {
        self.events.iter().any(|(n, _)| n == name)
    }

    /// Validates the data of a delivery of the event `name` against its declared schema
    /// (`Err` naming the field; an undeclared event is `Err` too).
    pub fn validate_event(&self, name: &str, data: &Value) -> Result<(), String> {
        match self.events.iter().find(|(n, _)| n == name) {
            Some((_, schema)) => schema.validate(data),
            None => Err(format!("workflow {} declares no event {name}", self.id)),
        }
    }

    /// The keys under which its executions wait for the event `name` sent without a key, read
    /// from the event ([`WorkflowBuilder::event_keys`]); none when it declares no such reading.
    pub fn event_keys(&self, name: &str, event: &Value) -> Vec<String> {
        self.event_keys
            .iter()
            .filter(|(n, _)| n == name)
            .flat_map(|(_, keys)| keys(event))
            .collect()
    }

    /// The input of the execution the event `name` (its data as sent) starts, if it starts
    /// one ([`WorkflowBuilder::started_by`]).
    pub fn start_input(&self, name: &str, event: &Value) -> Option<Value> {
        self.started_by
            .iter()
            .filter(|(n, _)| n == name)
            .find_map(|(_, start)| start(event))
    }

    /// Whether an event `name` may start executions of it.
    pub fn started_by_event(&self, name: &str) -> bool {
        self.started_by.iter().any(|(n, _)| n == name)
    }

    /// The document it was read from, when it is a definition.
    pub fn source(&self) -> Option<&Value> {
        self.source.as_ref()
    }

    /// Index of a top-level step.
    pub fn step_index(&self, id: &str) -> Option<usize> {
        self.steps.iter().position(|s| s.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noop(id: &str) -> Step {
        step(id, |ctx| async move { Ok(ctx.input) })
    }

    #[test]
    fn refuses_duplicate_ids_even_in_children() {
        let err = Workflow::new("w", "W")
            .and_then(noop("a"))
            .and_all("b", vec![noop("a")])
            .build()
            .unwrap_err();
        assert!(matches!(err, DefinitionError::DuplicateStep { .. }));
    }

    #[test]
    fn refuses_empty_and_bad_ids() {
        assert!(matches!(
            Workflow::new("w", "W").build(),
            Err(DefinitionError::NoSteps(_))
        ));
        assert!(matches!(
            Workflow::new("a/b", "W").and_then(noop("x")).build(),
            Err(DefinitionError::BadId(_))
        ));
    }

    #[test]
    fn step_types_follow_the_builder_method() {
        let wf = Workflow::new("w", "W")
            .and_then(noop("a"))
            .and_when("b", |_| async { true }, noop("b1"))
            .and_all("c", vec![noop("c1")])
            .and_race("d", vec![noop("d1")])
            .and_tap(noop("e"))
            .and_agent("f", "writer", |_| Value::Null)
            .and_workflow("g", "other", None)
            .build()
            .unwrap();
        let types: Vec<&str> = wf.steps().iter().map(|s| s.step_type().as_str()).collect();
        assert_eq!(
            types,
            [
                "andThen",
                "andWhen",
                "andAll",
                "andRace",
                "andTap",
                "andAgent",
                "andWorkflow"
            ]
        );
    }

    #[test]
    fn resume_schema_of_the_step_wins_over_the_workflows() {
        let wf = Workflow::new("w", "W")
            .resume_schema(json!({"type": "object"}))
            .and_then(noop("a").resume_schema(json!({"type": "string"})))
            .and_then(noop("b"))
            .build()
            .unwrap();
        assert!(wf.validate_resume(0, &json!("x")).is_ok());
        assert!(wf.validate_resume(0, &json!({})).is_err());
        assert!(wf.validate_resume(1, &json!({})).is_ok());
        assert!(wf.validate_resume(1, &json!("x")).is_err());
    }
}
