//! Runs a document inside one engine step, durably: every task's start and end are entries of
//! the step's journal (`<reference>`, and `<reference>#<n>` for its n-th run when a loop or a
//! flow directive runs it again), so a re-run of the step (after a crash, a takeover, a resume)
//! replays what is recorded and does again only what was not finished.
//!
//! What costs a write: a task with an effect (a call, an emitted event) writes its start before
//! the effect, with every record that waited; a suspension (`wait`, `listen`, a retry's delay)
//! writes what waited before it suspends; a task's end waits for the next write, or for the
//! step's checkpoint. Tasks without effects (`set`, `switch`, ...) cost no write of their own:
//! after a crash they run again, to the same result.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use serde::Serialize;
use serde_json::{Map, Value, json};

use agentry_engine::event::{EventKind, LayerEvent};
use agentry_engine::record::{StepRecord, StepStatus};
use agentry_engine::state::AwaitedEvent;
use agentry_engine::workflow::{StepContext, StepError, StepJournal};

use crate::error::DslError;
use crate::expr::{Expr, Template};
use crate::model::{
    ANY_KEY, Backoff, Consumption, Document, EventFilter, Flow, ForLoop, Listen, ReadMode,
    RetryPolicy, SwitchCase, Task, TaskKind, TaskList, TryCatch, Until, key_text,
};
use crate::outbound::Outbound;
use crate::secrets::Redacted;

/// The most task runs of one execution (a flow directive can loop).
pub const MAX_TASK_RUNS: u32 = 100_000;
/// The most events one `listen` consumes (an `any` with an `until`).
pub const MAX_LISTENED_EVENTS: usize = 10_000;
/// The most items one `for` iterates.
pub const MAX_FOR_ITEMS: usize = 10_000;
/// A wait (or a retry's delay) up to this long sleeps in the process; a longer one suspends
/// the execution with a durable timer.
pub const IN_PROCESS_WAIT: Duration = Duration::from_secs(10);

/// Where emitted events go: to the executions listening for them (and beyond).
#[async_trait::async_trait]
pub trait EventSink: Send + Sync {
    /// Publishes a CloudEvent (its `id` deduplicates: the same event published again after a
    /// crash is published once), on behalf of the execution's `owner`.
    async fn publish(&self, event: &Value, owner: Option<&str>) -> Result<(), String>;
}

/// Starts executions: the next run of a document with `schedule.after`.
#[async_trait::async_trait]
pub trait Starter: Send + Sync {
    /// Starts an execution of `workflow` under `execution_id` (an id taken already is not
    /// started again), with `context` beside the caller's (`owner`'s).
    async fn start(
        &self,
        workflow: &str,
        execution_id: &str,
        input: Value,
        context: Map<String, Value>,
        owner: Option<&str>,
    ) -> Result<(), String>;
}

/// What a runtime needs from outside: outbound calls, secrets, emitted events' sink.
#[derive(Clone)]
pub struct Services {
    pub outbound: Arc<Outbound>,
    /// Where `emit` publishes (none: an emitted event is only recorded).
    pub events: Option<Arc<dyn EventSink>>,
    /// The URL every emitted event is also POSTed to, as a CloudEvent in structured mode
    /// (`AGENTRY_EVENTS_SINK`), under the outbound policy.
    pub events_sink: Option<String>,
    /// What starts a document's next run (`schedule.after`).
    pub starter: Option<Arc<dyn Starter>>,
    /// The secrets documents may declare (`$secrets`).
    pub secrets: Arc<crate::secrets::Secrets>,
    /// The runtime descriptor (`$runtime`).
    pub runtime: Arc<Value>,
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services").finish_non_exhaustive()
    }
}

/// What a layer event of a task says (`task-start`, `task-complete`, `task-fault`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TaskEvent<'a> {
    #[serde(rename = "type")]
    type_: &'a str,
    /// The journal entry's step id (`workflow/do/0/getPet`).
    step_id: String,
    task: &'a str,
    reference: &'a str,
    task_type: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    input: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Value>,
}

/// Why a list of tasks stopped short.
#[derive(Debug)]
pub(crate) enum Stop {
    /// An uncaught error.
    Fault(DslError),
    /// The engine's own reasons: a suspension, a cancellation.
    Engine(StepError),
    /// `then: end`: the workflow ends with this output.
    End(Value),
}

impl From<DslError> for Stop {
    fn from(e: DslError) -> Self {
        Stop::Fault(e)
    }
}

/// Journal entries and their events, waiting for the next write.
type Pending = (Vec<(String, StepRecord)>, Vec<EventKind>);

/// The values of an expression's arguments and variables, by name.
pub(crate) type Args<'a> = Vec<(&'a str, Cow<'a, Value>)>;

/// The arguments as the expressions take them.
pub(crate) fn refs<'a>(args: &'a Args<'_>) -> Vec<(&'a str, &'a Value)> {
    args.iter().map(|(k, v)| (*k, v.as_ref())).collect()
}

/// Variables in scope besides the arguments (`$item`, `$index`, `$error`, ...).
type Scope = Arc<Vec<(String, Value)>>;

/// One run of a document in one run of its engine step.
pub(crate) struct Run {
    ctx: StepContext,
    journal: Arc<dyn StepJournal>,
    doc: Arc<Document>,
    services: Services,
    /// `$context`.
    context: Mutex<Value>,
    /// `$workflow`.
    workflow: Value,
    /// `$secrets`, and what hides them in whatever the run records.
    secrets: Redacted,
    /// Runs of each task reference so far (the n-th run's entry is `<reference>#<n>`).
    runs: Mutex<HashMap<String, u32>>,
    total_runs: std::sync::atomic::AtomicU32,
    /// Entries and events waiting for the next write.
    pending: Mutex<Pending>,
}

/// The `dateTimeDescriptor` of a time.
fn date_time(t: DateTime<Utc>) -> Value {
    json!({
        "iso8601": t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "epoch": {"seconds": t.timestamp(), "milliseconds": t.timestamp_millis()},
    })
}

/// Runs the document as the body of its engine step: the workflow's output, or why not.
pub(crate) async fn run_document(
    doc: Arc<Document>,
    services: Services,
    ctx: StepContext,
) -> Result<Value, StepError> {
    let journal = ctx
        .journal()
        .cloned()
        .ok_or_else(|| StepError::failed("a definition runs with the engine's journal"))?;
    let raw_input = (*ctx.workflow_input).clone();
    let workflow = json!({
        "id": ctx.execution_id,
        "definition": doc.source,
        "input": raw_input,
        "startedAt": date_time(ctx.started_at),
    });
    let secrets = match services.secrets.for_document(&doc.secrets) {
        Ok(s) => s,
        Err(e) => {
            return Err(StepError::Fault {
                message: fault_message(&e),
                details: Box::new(e.to_value()),
            });
        }
    };
    let run = Run {
        ctx,
        journal,
        doc: doc.clone(),
        services,
        secrets,
        context: Mutex::new(Value::Object(Map::new())),
        workflow,
        runs: Mutex::default(),
        total_runs: Default::default(),
        pending: Mutex::default(),
    };
    let outcome = match run.workflow_output(raw_input).await {
        Err(Stop::End(output)) => run.workflow_output_as(output).map_err(Stop::Fault),
        other => other,
    };
    match outcome {
        // An end was made the workflow's output above.
        Ok(mut output) | Err(Stop::End(mut output)) => {
            run.defer_pending();
            run.start_next().await?;
            run.secrets.value(&mut output);
            Ok(output)
        }
        Err(Stop::Fault(e)) => {
            // The failed task's record shows where and why; the message says what.
            let _ = run.flush().await;
            let mut details = e.to_value();
            run.secrets.value(&mut details);
            Err(StepError::Fault {
                message: run.secrets.text(&fault_message(&e)),
                details: Box::new(details),
            })
        }
        Err(Stop::Engine(e)) => {
            if matches!(e, StepError::Suspend { .. }) {
                run.flush().await?;
            }
            Err(e)
        }
    }
}

/// The execution's error message of a DSL error (the whole error object is its details).
pub fn fault_message(e: &DslError) -> String {
    match &e.instance {
        Some(at) => format!("{} ({}) at {at}", e.message(), e.status),
        None => format!("{} ({})", e.message(), e.status),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What a run started by `schedule.after` holds in its context: the run it follows, and when
/// it may start.
const RESTARTED: &str = "restartedAfter";

impl Run {
    /// `schedule.after`: starts the next run, which waits (a durable timer) until the delay
    /// after this one has passed. Its id is derived from this one's: a re-run of this step
    /// (after a crash) does not start it twice.
    async fn start_next(&self) -> Result<(), StepError> {
        let (Some(after), Some(starter)) = (self.doc.restart_after, &self.services.starter) else {
            return Ok(());
        };
        let not_before = self.ctx.now() + chrono_duration(after);
        let digest = agentry_engine::id::digest(&self.ctx.execution_id);
        let next = format!("after-{digest}");
        let mut context = Map::new();
        context.insert(
            RESTARTED.to_owned(),
            json!({
                "executionId": self.ctx.execution_id,
                "notBefore": not_before.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            }),
        );
        starter
            .start(
                &self.doc.name,
                &next,
                (*self.ctx.workflow_input).clone(),
                context,
                self.ctx.owner.as_deref(),
            )
            .await
            .map_err(|e| StepError::failed(format!("starting the next run (schedule.after): {e}")))
    }

    /// When a run started by `schedule.after` may start, if it is one.
    fn not_before(&self) -> Option<DateTime<Utc>> {
        let at = self
            .ctx
            .context
            .get(RESTARTED)?
            .get("notBefore")?
            .as_str()?;
        DateTime::parse_from_rfc3339(at)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }

    async fn workflow_output(&self, raw_input: Value) -> Result<Value, Stop> {
        if let Some(at) = self.not_before() {
            self.sleep_until(at, "Starting again (schedule.after)")
                .await?;
        }
        let input = match &self.doc.input_from {
            Some(from) => {
                let args = self.args(&Value::Null, &Value::Null, None, &[]);
                self.render(from, &raw_input, &args)
                    .map_err(|e| e.at("/input/from"))?
            }
            None => raw_input,
        };
        let output = self
            .run_list(&self.doc.tasks, input, Scope::default())
            .await?;
        Ok(self.workflow_output_as(output)?)
    }

    fn workflow_output_as(&self, output: Value) -> Result<Value, DslError> {
        let output = match &self.doc.output_as {
            Some(t) => {
                let args = self.args(&Value::Null, &Value::Null, None, &[]);
                self.render(t, &output, &args)
                    .map_err(|e| e.at("/output/as"))?
            }
            None => output,
        };
        if let Some(schema) = &self.doc.output_schema {
            check_schema(schema, &output)
                .map_err(|reason| DslError::validation(reason).at("/output/schema"))?;
        }
        Ok(output)
    }

    /// The arguments of an expression, with the variables in scope.
    fn args<'a>(
        &'a self,
        input: &'a Value,
        output: &'a Value,
        task: Option<&'a Value>,
        scope: &'a [(String, Value)],
    ) -> Args<'a> {
        const NULL: &Value = &Value::Null;
        let context = lock(&self.context).clone();
        let mut args: Args<'a> = vec![
            ("context", Cow::Owned(context)),
            ("input", Cow::Borrowed(input)),
            ("output", Cow::Borrowed(output)),
            ("secrets", Cow::Borrowed(&self.secrets.values)),
            ("task", Cow::Borrowed(task.unwrap_or(NULL))),
            ("workflow", Cow::Borrowed(&self.workflow)),
            ("runtime", Cow::Borrowed(&*self.services.runtime)),
            ("authorization", Cow::Borrowed(NULL)),
        ];
        args.extend(scope.iter().map(|(k, v)| (k.as_str(), Cow::Borrowed(v))));
        args
    }

    fn eval(&self, e: &Expr, on: &Value, args: &Args<'_>) -> Result<Value, DslError> {
        e.eval(on, &refs(args))
            .map_err(|err| DslError::expression(format!("{}: {err}", e.source())))
    }

    fn eval_bool(&self, e: &Expr, on: &Value, args: &Args<'_>) -> Result<bool, DslError> {
        e.eval_bool(on, &refs(args))
            .map_err(|err| DslError::expression(format!("{}: {err}", e.source())))
    }

    fn render(&self, t: &Template, on: &Value, args: &Args<'_>) -> Result<Value, DslError> {
        t.eval(on, &refs(args))
            .map_err(|err| DslError::expression(err.to_string()))
    }

    /// The journal key of the next run of `reference`.
    fn next_key(&self, reference: &str) -> Result<String, DslError> {
        let total = self
            .total_runs
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if total >= MAX_TASK_RUNS {
            return Err(DslError::runtime(format!(
                "the execution ran {MAX_TASK_RUNS} tasks: a loop that does not end?"
            )));
        }
        let mut runs = lock(&self.runs);
        let n = runs.entry(reference.to_owned()).or_insert(0);
        *n += 1;
        let base = reference.trim_start_matches('/');
        Ok(if *n == 1 {
            base.to_owned()
        } else {
            format!("{base}#{n}")
        })
    }

    /// The `Idempotency-Key` of a call: `<executionId>:<the task's step id>`, the same for
    /// every run of the step that sends it again (a crash, a takeover), another for each run of
    /// the task (a retry, a loop).
    fn idempotency_key(&self, key: &str) -> String {
        format!("{}:{}", self.ctx.execution_id, self.step_id(key))
    }

    fn step_id(&self, key: &str) -> String {
        format!("{}/{key}", self.journal.step_id())
    }

    /// Keeps an entry and its event for the next write, secrets hidden.
    fn record(&self, key: &str, mut rec: StepRecord, event: TaskEvent<'_>) {
        let event = if self.secrets.is_empty() {
            LayerEvent::stored(&event)
        } else {
            let mut fields = serde_json::to_value(&event).unwrap_or(Value::Null);
            self.secrets.value(&mut fields);
            self.secrets.value(&mut rec.input);
            if let Some(output) = rec.output.as_mut() {
                self.secrets.value(output);
            }
            LayerEvent::stored(&fields)
        };
        let mut pending = lock(&self.pending);
        pending.0.push((key.to_owned(), rec));
        pending.1.push(EventKind::Layer(event));
    }

    /// Writes what waits, in one fenced write.
    async fn flush(&self) -> Result<(), StepError> {
        let (entries, events) = std::mem::take(&mut *lock(&self.pending));
        if entries.is_empty() && events.is_empty() {
            return Ok(());
        }
        self.journal.write(entries, events).await
    }

    /// Leaves what waits to the step's checkpoint.
    fn defer_pending(&self) {
        let (entries, events) = std::mem::take(&mut *lock(&self.pending));
        if !entries.is_empty() || !events.is_empty() {
            self.journal.defer(entries, events);
        }
    }

    fn run_list<'a>(
        &'a self,
        list: &'a TaskList,
        input: Value,
        scope: Scope,
    ) -> BoxFuture<'a, Result<Value, Stop>> {
        Box::pin(async move {
            let mut value = input;
            let mut i = 0;
            while let Some(task) = list.tasks.get(i) {
                let (output, flow) = self.run_task(task, value, &scope).await?;
                value = output;
                match flow {
                    Flow::Continue => i += 1,
                    Flow::Exit => break,
                    Flow::End => return Err(Stop::End(value)),
                    Flow::Goto(name) => match list.position(&name) {
                        Some(p) => i = p,
                        None => {
                            return Err(DslError::runtime(format!("no task named {name}"))
                                .at(&task.reference)
                                .into());
                        }
                    },
                }
            }
            Ok(value)
        })
    }

    /// Runs one task on its raw input: its transformed output and where the flow goes.
    async fn run_task(
        &self,
        task: &Task,
        raw_input: Value,
        scope: &Scope,
    ) -> Result<(Value, Flow), Stop> {
        let at = |e: DslError| Stop::Fault(e.at(&task.reference));
        if let Some(cond) = &task.when {
            let args = self.args(&raw_input, &Value::Null, None, scope);
            if !self.eval_bool(cond, &raw_input, &args).map_err(at)? {
                return Ok((raw_input, Flow::Continue));
            }
        }
        let key = self.next_key(&task.reference).map_err(at)?;
        let recorded = self.journal.entry(&key).await;
        let started_at = recorded
            .as_ref()
            .map_or_else(|| self.ctx.now(), |r| r.started_at);
        let descriptor = json!({
            "name": task.name,
            "reference": task.reference,
            "definition": task.definition,
            "input": raw_input,
            "startedAt": date_time(started_at),
        });
        if let Some(rec) = recorded
            .as_ref()
            .filter(|r| r.status != StepStatus::Running)
        {
            if task.waits {
                // Its waits take their recorded events again, in order, so that the waits
                // after it take theirs (the engine numbers a step's waits in each run).
                let again = self.run_kind(task, &key, &rec.input, &descriptor, rec, scope);
                if let Err(Stop::Engine(e)) = again.await {
                    return Err(Stop::Engine(e));
                }
            }
            return self.replay(task, rec, scope);
        }
        let input = match &task.input_from {
            Some(from) => {
                let args = self.args(&raw_input, &Value::Null, Some(&descriptor), scope);
                self.render(from, &raw_input, &args).map_err(at)?
            }
            None => raw_input,
        };
        if let Some(schema) = &task.input_schema
            && let Err(reason) = check_schema(schema, &input)
        {
            return Err(at(DslError::validation(reason)));
        }
        let mut start = StepRecord::started(input.clone(), self.ctx.attempt, started_at);
        start.parent = Some(self.journal.step_id().to_owned());
        if recorded.is_none() {
            self.record(
                &key,
                start.clone(),
                self.event("task-start", &key, task, Some(&input), None, None),
            );
            if needs_durable_start(&task.kind) {
                self.flush().await.map_err(Stop::Engine)?;
            }
        }
        let body = self.run_kind(task, &key, &input, &descriptor, &start, scope);
        // A `listen` keeps its time-out across suspensions (its wait's deadline); any other task
        // is timed in this process.
        let in_process_limit = task
            .timeout
            .filter(|_| !matches!(task.kind, TaskKind::Listen(_)));
        let raw_output = match in_process_limit {
            Some(limit) => match tokio::time::timeout(limit, body).await {
                Ok(r) => r,
                Err(_) => Err(Stop::Fault(DslError::timeout(format!(
                    "the task took longer than {} ms",
                    limit.as_millis()
                )))),
            },
            None => body.await,
        };
        let (raw_output, flow) = match raw_output {
            Ok(done) => done,
            Err(Stop::Fault(e)) => {
                let e = e.at(&task.reference);
                let failed = StepRecord {
                    status: StepStatus::Failed,
                    output: Some(e.to_value()),
                    ended_at: Some(self.ctx.now()),
                    ..start
                };
                let event = self.event("task-fault", &key, task, None, None, Some(e.to_value()));
                self.record(&key, failed, event);
                return Err(Stop::Fault(e));
            }
            Err(other) => return Err(other),
        };
        let output = self
            .finish(task, &input, raw_output, &descriptor, scope)
            .map_err(at)?;
        let done = start.finished(output.clone(), true, self.ctx.now());
        self.record(
            &key,
            done,
            self.event("task-complete", &key, task, None, Some(&output), None),
        );
        Ok((output, flow))
    }

    /// A task recorded as ended: its output (or its error) again, its export applied again.
    fn replay(&self, task: &Task, rec: &StepRecord, scope: &Scope) -> Result<(Value, Flow), Stop> {
        let output = rec.output.clone().unwrap_or(Value::Null);
        if rec.status == StepStatus::Failed {
            return Err(Stop::Fault(DslError::from_value(&output)));
        }
        let flow = match &task.kind {
            TaskKind::Switch(cases) => self
                .choose(cases, &rec.input, scope)
                .map_err(|e| Stop::Fault(e.at(&task.reference)))?
                .unwrap_or_else(|| task.then.clone()),
            _ => task.then.clone(),
        };
        self.export(task, &rec.input, &output, None, scope)
            .map_err(|e| Stop::Fault(e.at(&task.reference)))?;
        Ok((output, flow))
    }

    /// `output.as` and `export.as` of a task that ran: its transformed output.
    fn finish(
        &self,
        task: &Task,
        input: &Value,
        raw_output: Value,
        descriptor: &Value,
        scope: &Scope,
    ) -> Result<Value, DslError> {
        let mut descriptor = descriptor.clone();
        descriptor["output"] = raw_output.clone();
        let output = match &task.output_as {
            Some(t) => {
                let args = self.args(input, &Value::Null, Some(&descriptor), scope);
                self.render(t, &raw_output, &args)?
            }
            None => raw_output,
        };
        if let Some(schema) = &task.output_schema {
            check_schema(schema, &output).map_err(DslError::validation)?;
        }
        self.export(task, input, &output, Some(&descriptor), scope)?;
        Ok(output)
    }

    fn export(
        &self,
        task: &Task,
        input: &Value,
        output: &Value,
        descriptor: Option<&Value>,
        scope: &Scope,
    ) -> Result<(), DslError> {
        if let Some(t) = &task.export_as {
            let args = self.args(input, output, descriptor, scope);
            let context = self.render(t, output, &args)?;
            if let Some(schema) = &task.export_schema {
                check_schema(schema, &context).map_err(DslError::validation)?;
            }
            *lock(&self.context) = context;
        }
        Ok(())
    }

    fn event<'a>(
        &self,
        type_: &'a str,
        key: &str,
        task: &'a Task,
        input: Option<&'a Value>,
        output: Option<&'a Value>,
        error: Option<Value>,
    ) -> TaskEvent<'a> {
        TaskEvent {
            type_,
            step_id: self.step_id(key),
            task: &task.name,
            reference: &task.reference,
            task_type: task.kind.type_name(),
            input,
            output,
            error,
        }
    }

    /// The first case of a `switch` that holds: where it sends the flow (`None`: none holds).
    fn choose(
        &self,
        cases: &[SwitchCase],
        input: &Value,
        scope: &Scope,
    ) -> Result<Option<Flow>, DslError> {
        let args = self.args(input, &Value::Null, None, scope);
        for case in cases {
            let holds = match &case.when {
                Some(cond) => self.eval_bool(cond, input, &args)?,
                None => true,
            };
            if holds {
                return Ok(Some(case.then.clone()));
            }
        }
        Ok(None)
    }

    /// What the task does: its raw output and where the flow goes.
    fn run_kind<'a>(
        &'a self,
        task: &'a Task,
        key: &'a str,
        input: &'a Value,
        descriptor: &'a Value,
        start: &'a StepRecord,
        scope: &'a Scope,
    ) -> BoxFuture<'a, Result<(Value, Flow), Stop>> {
        Box::pin(async move {
            let then = task.then.clone();
            let args = || self.args(input, &Value::Null, Some(descriptor), scope);
            match &task.kind {
                TaskKind::Set(t) => Ok((self.render(t, input, &args())?, then)),
                TaskKind::Do(list) => Ok((
                    self.run_list(list, input.clone(), scope.clone()).await?,
                    then,
                )),
                TaskKind::Switch(cases) => {
                    let flow = self.choose(cases, input, scope)?.unwrap_or(then);
                    Ok((input.clone(), flow))
                }
                TaskKind::For(f) => Ok((self.run_for(f, input, scope).await?, then)),
                TaskKind::Fork { branches, compete } => {
                    Ok((self.run_fork(branches, *compete, input, scope).await?, then))
                }
                TaskKind::Try(t) => Ok((self.run_try(t, key, input, start, scope).await?, then)),
                TaskKind::Raise(e) => {
                    let fields = self.render(&e.fields, input, &args())?;
                    Err(Stop::Fault(DslError::from_value(&fields)))
                }
                TaskKind::Wait(d) => {
                    self.sleep_until(start.started_at + chrono_duration(*d), "Waiting")
                        .await?;
                    Ok((input.clone(), then))
                }
                TaskKind::Emit(t) => Ok((self.emit(t, key, input, &args()).await?, then)),
                TaskKind::Listen(l) => {
                    let deadline = task.timeout.map(|t| start.started_at + chrono_duration(t));
                    Ok((self.listen(l, input, &args(), deadline, scope).await?, then))
                }
                TaskKind::CallHttp(call) => {
                    let out = self
                        .services
                        .outbound
                        .http(call, input, &args(), &self.idempotency_key(key))
                        .await?;
                    Ok((out, then))
                }
                TaskKind::CallProtocol(call) => {
                    let out = self
                        .services
                        .outbound
                        .protocol(call, input, &args(), &self.idempotency_key(key))
                        .await?;
                    Ok((out, then))
                }
                TaskKind::RunWorkflow(w) => {
                    let child_input = match &w.input {
                        Some(t) => self.render(t, input, &args())?,
                        None => input.clone(),
                    };
                    // `latest` (the DSL's default) is the newest version registered.
                    let version =
                        Some(w.version.as_str()).filter(|v| !v.is_empty() && *v != "latest");
                    let out = self
                        .journal
                        .run_workflow(&self.ctx, &w.name, version, child_input, &self.step_id(key))
                        .await
                        .map_err(|e| match e {
                            StepError::Failed(message) | StepError::Fault { message, .. } => {
                                Stop::Fault(DslError::runtime(message))
                            }
                            other => Stop::Engine(other),
                        })?;
                    Ok((out, then))
                }
                TaskKind::CallOpenApi(call) => {
                    let out = self
                        .services
                        .outbound
                        .openapi(call, input, &args(), &self.idempotency_key(key))
                        .await?;
                    Ok((out, then))
                }
            }
        })
    }

    /// Suspends the execution until `until` (a durable timer), or sleeps in the process when
    /// that is soon.
    async fn sleep_until(&self, until: DateTime<Utc>, why: &str) -> Result<(), Stop> {
        let now = self.ctx.now();
        if now >= until {
            return Ok(());
        }
        let left = (until - now).to_std().unwrap_or_default();
        if left <= IN_PROCESS_WAIT {
            return self.ctx.sleep(left).await.map_err(Stop::Engine);
        }
        Err(Stop::Engine(self.ctx.suspend_until(
            format!("{why} until {}", until.to_rfc3339()),
            None,
            until,
        )))
    }

    async fn run_for(&self, f: &ForLoop, input: &Value, scope: &Scope) -> Result<Value, Stop> {
        let args = self.args(input, &Value::Null, None, scope);
        let items = match self.eval(&f.items, input, &args)? {
            Value::Array(items) => items,
            Value::Null => Vec::new(),
            Value::Object(m) => m.into_iter().map(|(_, v)| v).collect(),
            other => {
                return Err(DslError::expression(format!(
                    "`for.in` must give a list, not {other}"
                ))
                .into());
            }
        };
        if items.len() > MAX_FOR_ITEMS {
            return Err(DslError::runtime(format!(
                "`for.in` gives {} items, more than {MAX_FOR_ITEMS}",
                items.len()
            ))
            .into());
        }
        let mut value = input.clone();
        for (index, item) in items.into_iter().enumerate() {
            let mut inner: Vec<(String, Value)> = (**scope).clone();
            inner.push((f.each.clone(), item));
            inner.push((f.at.clone(), json!(index)));
            let inner = Arc::new(inner);
            if let Some(cond) = &f.while_ {
                let args = self.args(&value, &Value::Null, None, &inner);
                if !self.eval_bool(cond, &value, &args)? {
                    break;
                }
            }
            value = self.run_list(&f.body, value, inner).await?;
        }
        Ok(value)
    }

    async fn run_fork(
        &self,
        branches: &TaskList,
        compete: bool,
        input: &Value,
        scope: &Scope,
    ) -> Result<Value, Stop> {
        let runs = branches.tasks.iter().map(|task| {
            let input = input.clone();
            async move { self.run_task(task, input, scope).await.map(|(v, _)| v) }
        });
        if !compete {
            let outputs = futures::future::join_all(runs).await;
            return outputs
                .into_iter()
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array);
        }
        // A race: the first branch to end well wins; the others are dropped (cancelled).
        let mut racing: FuturesUnordered<_> = runs.collect();
        let mut first_fault = None;
        while let Some(done) = racing.next().await {
            match done {
                Ok(v) => return Ok(v),
                Err(Stop::Fault(e)) => {
                    first_fault.get_or_insert(Stop::Fault(e));
                }
                Err(other) => return Err(other),
            }
        }
        Err(first_fault.unwrap_or_else(|| DslError::runtime("a fork without branches").into()))
    }

    async fn run_try(
        &self,
        t: &TryCatch,
        key: &str,
        input: &Value,
        start: &StepRecord,
        scope: &Scope,
    ) -> Result<Value, Stop> {
        let mut attempt: u32 = 1;
        loop {
            let error = match self.run_list(&t.body, input.clone(), scope.clone()).await {
                Err(Stop::Fault(e)) => e,
                other => return other,
            };
            if !error.matches(&t.filter) {
                return Err(Stop::Fault(error));
            }
            let mut inner: Vec<(String, Value)> = (**scope).clone();
            inner.push((t.as_.clone(), error.to_value()));
            let inner = Arc::new(inner);
            let args = self.args(input, &Value::Null, None, &inner);
            if let Some(cond) = &t.when
                && !self.eval_bool(cond, input, &args)?
            {
                return Err(Stop::Fault(error));
            }
            if let Some(cond) = &t.except_when
                && self.eval_bool(cond, input, &args)?
            {
                return Err(Stop::Fault(error));
            }
            if let Some(policy) = &t.retry
                && let Some(until) = self
                    .retry_until(policy, key, attempt, &error, start, input, &args)
                    .await?
            {
                self.sleep_until(until, "Retrying").await?;
                attempt += 1;
                continue;
            }
            return match &t.handler {
                Some(handler) => self.run_list(handler, input.clone(), inner).await,
                None => Ok(Value::Null),
            };
        }
    }

    /// When the attempt after `attempt` starts, or `None` when the policy gives up. The
    /// decision is recorded (`<try>/retry-<attempt>`, with a `task-retry` event), so that every
    /// later run of the step waits for the same time.
    #[allow(clippy::too_many_arguments)]
    async fn retry_until(
        &self,
        policy: &RetryPolicy,
        key: &str,
        attempt: u32,
        error: &DslError,
        start: &StepRecord,
        input: &Value,
        args: &Args<'_>,
    ) -> Result<Option<DateTime<Utc>>, Stop> {
        let retry_key = format!("{key}/retry-{attempt}");
        if let Some(rec) = self.journal.entry(&retry_key).await {
            let until = rec
                .output
                .as_ref()
                .and_then(|o| o.get("until"))
                .and_then(Value::as_str)
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.with_timezone(&Utc));
            return Ok(until);
        }
        let Some(delay) = self.retry_delay(policy, attempt, start, input, args)? else {
            return Ok(None);
        };
        let now = self.ctx.now();
        let until = now + chrono_duration(delay);
        let at = until.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let mut error = error.to_value();
        self.secrets.value(&mut error);
        let rec = StepRecord {
            parent: Some(self.journal.step_id().to_owned()),
            ..StepRecord::started(
                json!({"attempt": attempt, "error": error}),
                self.ctx.attempt,
                now,
            )
        }
        .finished(json!({"until": at}), true, now);
        let event = json!({
            "type": "task-retry",
            "stepId": self.step_id(&retry_key),
            "attempt": attempt,
            "error": error,
            "until": at,
        });
        let mut pending = lock(&self.pending);
        pending.0.push((retry_key, rec));
        pending.1.push(EventKind::Layer(LayerEvent::stored(&event)));
        Ok(Some(until))
    }

    /// The delay before the next attempt, or `None` when the policy gives up.
    fn retry_delay(
        &self,
        policy: &RetryPolicy,
        attempt: u32,
        start: &StepRecord,
        input: &Value,
        args: &Args<'_>,
    ) -> Result<Option<Duration>, DslError> {
        if let Some(cond) = &policy.when
            && !self.eval_bool(cond, input, args)?
        {
            return Ok(None);
        }
        if let Some(cond) = &policy.except_when
            && self.eval_bool(cond, input, args)?
        {
            return Ok(None);
        }
        if policy.max_attempts.is_some_and(|max| attempt >= max) {
            return Ok(None);
        }
        let factor = match policy.backoff {
            Backoff::Constant => 1,
            Backoff::Linear => attempt,
            Backoff::Exponential => 1u32 << attempt.saturating_sub(1).min(20),
        };
        let mut delay = policy.delay.saturating_mul(factor);
        if let Some((from, to)) = policy.jitter {
            // Derived from the execution and the attempt: the same on every run of the step.
            let seed = agentry_engine::id::digest(&format!("{}:{attempt}", self.ctx.execution_id));
            let unit =
                u64::from_str_radix(&seed[..8], 16).unwrap_or(0) as f64 / f64::from(u32::MAX);
            delay += from + (to - from).mul_f64(unit);
        }
        if let Some(max) = policy.max_duration {
            let spent = (self.ctx.now() - start.started_at)
                .to_std()
                .unwrap_or_default();
            if spent + delay > max {
                return Ok(None);
            }
        }
        Ok(Some(delay))
    }

    async fn emit(
        &self,
        t: &Template,
        key: &str,
        input: &Value,
        args: &Args<'_>,
    ) -> Result<Value, Stop> {
        let Value::Object(mut event) = self.render(t, input, args)? else {
            return Err(DslError::runtime("an event is an object").into());
        };
        let now = self.ctx.now();
        event
            .entry("id")
            .or_insert_with(|| json!(format!("{}:{key}", self.ctx.execution_id)));
        event.entry("specversion").or_insert_with(|| json!("1.0"));
        event
            .entry("time")
            .or_insert_with(|| json!(now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)));
        event
            .entry("source")
            .or_insert_with(|| json!(format!("agentry:{}", self.doc.name)));
        let event = Value::Object(event);
        if let Some(sink) = &self.services.events {
            sink.publish(&event, self.ctx.owner.as_deref())
                .await
                .map_err(|e| DslError::runtime(format!("publishing the event: {e}")))?;
        }
        if let Some(url) = &self.services.events_sink {
            // The same Idempotency-Key (and event id) on a re-run after a crash: the
            // receiver tells a second delivery by either.
            let mut request = crate::outbound::Request::new("POST", url)?;
            request.headers.push((
                "content-type".to_owned(),
                "application/cloudevents+json".to_owned(),
            ));
            request.body = Some(Value::String(event.to_string()));
            self.services
                .outbound
                .send(request, &self.idempotency_key(key))
                .await?;
        }
        Ok(event)
    }

    /// Waits for the events `l` asks for (and runs its `foreach` on each); past `deadline`
    /// (the task's time-out, from its start), the DSL's `timeout` error.
    async fn listen(
        &self,
        l: &Listen,
        input: &Value,
        args: &Args<'_>,
        deadline: Option<DateTime<Utc>>,
        scope: &Scope,
    ) -> Result<Value, Stop> {
        let mut got = Vec::new();
        let mut outputs = Vec::new();
        match l.strategy {
            Consumption::One | Consumption::All => {
                for filter in &l.filters {
                    let (_, envelope) = self.next_event(&[filter], input, args, deadline).await?;
                    self.consumed(l, envelope, &mut got, &mut outputs, scope)
                        .await?;
                }
            }
            Consumption::Any => {
                let ends: &[EventFilter] = match &l.until {
                    Some(Until::Event(filters)) => filters,
                    _ => &[],
                };
                let awaited: Vec<&EventFilter> = l.filters.iter().chain(ends).collect();
                loop {
                    if got.len() >= MAX_LISTENED_EVENTS {
                        return Err(DslError::runtime(format!(
                            "the listen consumed {MAX_LISTENED_EVENTS} events and its `until` did not end it"
                        ))
                        .into());
                    }
                    let (which, envelope) =
                        self.next_event(&awaited, input, args, deadline).await?;
                    if which >= l.filters.len() {
                        break;
                    }
                    self.consumed(l, envelope, &mut got, &mut outputs, scope)
                        .await?;
                    match &l.until {
                        None => break,
                        Some(Until::Holds(cond)) => {
                            let events = Value::Array(got.clone());
                            if self.eval_bool(cond, &events, args)? {
                                break;
                            }
                        }
                        Some(Until::Event(_)) => {}
                    }
                }
            }
        }
        Ok(Value::Array(if l.foreach.is_some() {
            outputs
        } else {
            got
        }))
    }

    /// An event a `listen` consumed: kept as `read` says, and its `foreach` run on it.
    async fn consumed(
        &self,
        l: &Listen,
        envelope: Value,
        got: &mut Vec<Value>,
        outputs: &mut Vec<Value>,
        scope: &Scope,
    ) -> Result<(), Stop> {
        let event = match l.read {
            ReadMode::Data => envelope.get("data").cloned().unwrap_or(Value::Null),
            ReadMode::Envelope | ReadMode::Raw => envelope,
        };
        if let Some(each) = &l.foreach {
            let mut inner: Vec<(String, Value)> = (**scope).clone();
            inner.push((each.item.clone(), event.clone()));
            inner.push((each.at.clone(), json!(got.len())));
            outputs.push(
                self.run_list(&each.body, event.clone(), Arc::new(inner))
                    .await?,
            );
        }
        got.push(event);
        Ok(())
    }

    /// The next event of any of `filters` (its correlation's key, its attributes): which one
    /// and its CloudEvent. An event that does not match its filter's attributes is taken and
    /// left aside; the wait goes on for the next one (each wait is recorded: a re-run takes
    /// the same events).
    async fn next_event(
        &self,
        filters: &[&EventFilter],
        input: &Value,
        args: &Args<'_>,
        deadline: Option<DateTime<Utc>>,
    ) -> Result<(usize, Value), Stop> {
        let mut awaited = Vec::with_capacity(filters.len());
        for filter in filters {
            let key = match &filter.correlate {
                Some(c) => key_text(&self.eval(&c.expect, input, args)?),
                None => ANY_KEY.to_owned(),
            };
            awaited.push(AwaitedEvent::new(filter.event_type.clone(), Some(&key)));
        }
        loop {
            let (which, delivered) = self
                .ctx
                .wait_for_any_event(&awaited, deadline)
                .await
                .map_err(Stop::Engine)?
                .ok_or_else(|| {
                    let types: Vec<&str> = filters.iter().map(|f| f.event_type.as_str()).collect();
                    DslError::timeout(format!(
                        "no event {} came before the task's time-out",
                        types.join(" or ")
                    ))
                })?;
            let came = awaited.get(which).ok_or_else(|| {
                DslError::runtime("an event the listen does not wait for".to_owned())
            })?;
            // The first filter of the event's type and key that its attributes match.
            for (i, filter) in filters.iter().enumerate() {
                if awaited[i] != *came {
                    continue;
                }
                let envelope = envelope_of(&filter.event_type, delivered.clone());
                if self.matches(filter, &envelope, args)? {
                    return Ok((i, envelope));
                }
            }
        }
    }

    /// Whether an event's attributes are as the filter says.
    fn matches(
        &self,
        filter: &EventFilter,
        envelope: &Value,
        args: &Args<'_>,
    ) -> Result<bool, DslError> {
        filter
            .matches(envelope, &refs(args))
            .map_err(DslError::expression)
    }
}

/// The CloudEvent an event was: itself when delivered as one (`POST /events`, an `emit`),
/// else an envelope of its type around its data (the event routes of the seed).
pub fn envelope_of(event_type: &str, delivered: Value) -> Value {
    let is_cloud_event = delivered.get("specversion").is_some_and(Value::is_string)
        && delivered.get("type").and_then(Value::as_str) == Some(event_type);
    if is_cloud_event {
        delivered
    } else {
        json!({"type": event_type, "data": delivered})
    }
}

/// Whether a task's start is written before it runs: it has an effect outside the execution,
/// or it waits.
fn needs_durable_start(kind: &TaskKind) -> bool {
    matches!(
        kind,
        TaskKind::CallHttp(_)
            | TaskKind::CallOpenApi(_)
            | TaskKind::Emit(_)
            | TaskKind::Wait(_)
            | TaskKind::Listen(_)
    )
}

fn chrono_duration(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

/// Checks `value` against a JSON Schema from a definition.
fn check_schema(schema: &Value, value: &Value) -> Result<(), String> {
    let validator = jsonschema::validator_for(schema).map_err(|e| format!("bad schema: {e}"))?;
    match validator.iter_errors(value).next() {
        None => Ok(()),
        Some(e) => Err(format!("{} at {}", e, e.instance_path())),
    }
}
