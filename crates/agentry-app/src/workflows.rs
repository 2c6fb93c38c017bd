//! The workflow use cases: the catalogue, starting an execution (with idempotent rejoin),
//! suspending, resuming, cancelling, reading one, listing and counting them, and re-attaching to
//! their events. Each checks the caller against the [`crate::Policy`] before it touches an
//! execution.

use std::sync::Arc;

use agentry_engine::id::is_internal_workflow;
use agentry_engine::store::{Family, ListQuery};
use agentry_engine::workflow::Workflow;
use agentry_engine::{
    ExecuteOptions, ExecutionId, ExecutionRecord, RunHandle, Status, UserId, WorkflowId,
};
use serde_json::{Map, Value};

use crate::App;
use crate::caller::Caller;
use crate::error::{AppError, Code};
use crate::input::check_key;
use crate::wire::{
    self, CancelResult, ExecutionCounts, ExecutionList, ExecutionResult, ExecutionStateView,
    ExecutionSummary, SuspendResult, WorkflowDetail, WorkflowSummary,
};

const EXECUTE_FAILED: &str = "Failed to execute workflow";
const READ_FAILED: &str = "Failed to read execution state";

/// What a client asks of a new execution besides its input (execute's and stream's `options`).
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// A caller-chosen id: the same id with the same workflow and input rejoins that execution.
    pub execution_id: Option<ExecutionId>,
    pub user_id: Option<UserId>,
    pub conversation_id: Option<String>,
    pub context: Map<String, Value>,
    /// On a rejoin, replay only the events after this number (a client's `Last-Event-ID`).
    pub last_event_id: Option<i64>,
    /// Its priority in its workflow's queue.
    pub priority: Option<i64>,
}

impl From<Option<wire::WorkflowOptions>> for StartOptions {
    fn from(options: Option<wire::WorkflowOptions>) -> Self {
        let o = options.unwrap_or_default();
        Self {
            execution_id: o.execution_id.map(ExecutionId::from),
            user_id: o.user_id.map(UserId::from),
            conversation_id: o.conversation_id,
            context: o.context.unwrap_or_default(),
            last_event_id: None,
            priority: o.priority,
        }
    }
}

/// A page of executions as a client asks for it: each value as sent (an empty one counts as
/// absent), checked here.
#[derive(Debug, Clone, Default)]
pub struct ListRequest {
    pub workflow_id: Option<WorkflowId>,
    /// Which executions: the workflows' (the default) or the durable agent runs'.
    pub family: Family,
    pub status: Option<String>,
    pub limit: Option<String>,
    pub cursor: Option<String>,
}

pub use crate::limits::MAX_PAGE;
/// The executions one page holds unless asked otherwise.
pub const DEFAULT_PAGE: u32 = 20;

/// A value of a query, with an empty one counting as absent.
fn given(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.is_empty())
}

/// A page's size from a query's `limit` (empty or absent: [`DEFAULT_PAGE`]), or the 400.
pub(crate) fn page_size(limit: Option<&str>) -> Result<u32, AppError> {
    match limit.filter(|l| !l.is_empty()) {
        None => Ok(DEFAULT_PAGE),
        Some(l) => l
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_PAGE).contains(n))
            .ok_or_else(|| {
                AppError::bad_request(format!(
                    "Invalid limit {l:?}: expected a number from 1 to {MAX_PAGE}"
                ))
            }),
    }
}

impl ListRequest {
    /// The store's query, or the 400 naming what is wrong.
    fn query(self, owner: Option<UserId>) -> Result<ListQuery, AppError> {
        let status = match given(self.status) {
            None => None,
            Some(s) => Some(Status::parse(&s).ok_or_else(|| {
                AppError::bad_request(format!(
                    "Invalid status {s:?}: expected queued, running, suspended, completed, error or cancelled"
                ))
            })?),
        };
        let limit = page_size(self.limit.as_deref())?;
        let before = match given(self.cursor) {
            None => None,
            Some(c) => Some(
                wire::parse_list_cursor(&c)
                    .ok_or_else(|| AppError::bad_request("Invalid cursor"))?,
            ),
        };
        Ok(ListQuery {
            workflow_id: self.workflow_id.filter(|w| !w.is_empty()),
            family: self.family,
            status,
            owner,
            before,
            limit,
        })
    }
}

/// A page of records, and the cursor of the next one.
pub(crate) struct Page {
    pub(crate) records: Vec<ExecutionRecord>,
    pub(crate) next_cursor: Option<String>,
}

/// Whether a suspend took effect at once, or waits for the next step boundary.
#[derive(Debug)]
pub struct Suspended {
    /// The execution is suspended now (else the request is recorded and pending).
    pub now: bool,
    pub result: SuspendResult,
}

impl App {
    /// Every registered workflow, in registration order.
    pub fn workflows(&self) -> Vec<WorkflowSummary> {
        self.host_workflows()
            .iter()
            .map(|w| WorkflowSummary::from(w.as_ref()))
            .collect()
    }

    /// The host's workflows, in registration order (newest version of each): what a client may
    /// start. The internal workflows (the agents' durable runs') are not among them.
    pub fn host_workflows(&self) -> Vec<Arc<Workflow>> {
        self.engine
            .workflows()
            .into_iter()
            .filter(|w| !w.is_internal())
            .collect()
    }

    /// One workflow: its steps and schemas (of its newest version), and its versions with their
    /// executions in flight.
    pub async fn workflow(&self, id: &WorkflowId) -> Result<WorkflowDetail, AppError> {
        self.host_workflow(id)?;
        let wf = self.engine.workflow(id).ok_or_else(|| {
            AppError::engine(
                agentry_engine::EngineError::WorkflowNotFound(id.to_string()),
                "",
            )
        })?;
        let versions = self
            .engine
            .versions_in_flight(id)
            .await
            .map_err(|e| AppError::engine(e, "Failed to read the workflow's versions"))?;
        Ok(WorkflowDetail::of(
            &wf,
            versions.iter().map(Into::into).collect(),
        ))
    }

    /// Starts an execution of `workflow_id` (or rejoins the one its `executionId` names, when
    /// it has the same workflow, input and owner). The caller owns it; its context holds the
    /// verified user (`user`, `userId`) and the conversation. The run is its own task: the
    /// handle's events follow it, and dropping the handle does not stop it.
    pub async fn start(
        &self,
        caller: &Caller,
        workflow_id: &WorkflowId,
        input: Value,
        options: StartOptions,
    ) -> Result<RunHandle, AppError> {
        self.host_workflow(workflow_id)?;
        let StartOptions {
            execution_id,
            mut user_id,
            conversation_id,
            mut context,
            last_event_id,
            priority,
        } = options;
        if let Some(p) = priority
            && !agentry_engine::queue::PRIORITY_RANGE.contains(&p)
        {
            return Err(AppError::new(
                Code::InvalidRequest,
                format!(
                    "Invalid options.priority: {p} is out of range ({}..={})",
                    agentry_engine::queue::PRIORITY_RANGE.start(),
                    agentry_engine::queue::PRIORITY_RANGE.end()
                ),
            ));
        }
        for (field, key) in [
            ("options.userId", user_id.as_deref()),
            ("options.conversationId", conversation_id.as_deref()),
        ] {
            if let Some(key) = key {
                check_key(field, key)?;
            }
        }
        caller.inject(&mut context, &mut user_id);
        // Whom the run is for: the client's `userId`, else its context's `user.id`.
        let user_id = match user_id {
            Some(id) => Some(id),
            None => match context
                .get("user")
                .and_then(|u| u.get("id"))
                .and_then(Value::as_str)
            {
                Some(id) => {
                    check_key("options.context.user.id", id)?;
                    Some(UserId::from(id))
                }
                None => None,
            },
        };
        if let Some(id) = &user_id {
            context.insert("userId".into(), Value::String(id.to_string()));
        }
        if let Some(id) = &conversation_id {
            context.insert("conversationId".into(), Value::String(id.clone()));
        }
        let options = ExecuteOptions {
            execution_id,
            user_id,
            context,
            owner: caller.user_id(),
            last_event_id,
            priority,
            version: None,
        };
        self.engine
            .start(workflow_id, input, options)
            .await
            .map_err(|e| AppError::engine(e, EXECUTE_FAILED))
    }

    /// What a client waiting for a run is answered once it stops: the result (completed or
    /// suspended), or `execution_failed` when it ended in error. A failure after the start (the
    /// run waits for the database, or was handed over) names the execution: it goes on, and
    /// the same start again rejoins it.
    ///
    /// An execution of a queued workflow is waited for up to its queue's wait: then the
    /// answer is where it stands (`queued` or `running`; HTTP answers it with 202), and the
    /// execution goes on.
    pub async fn outcome(&self, handle: RunHandle) -> Result<ExecutionResult, AppError> {
        let id = handle.execution_id.clone();
        let finished = match handle.queue_wait {
            Some(wait) => tokio::time::timeout(wait, handle.finish_for_client()).await,
            None => Ok(handle.finish_for_client().await),
        };
        let Ok(finished) = finished else {
            let rec = self
                .engine
                .find(&id)
                .await
                .map_err(|e| AppError::engine(e, EXECUTE_FAILED).about(id))?;
            return Ok(ExecutionResult::from(&rec));
        };
        let rec = finished.map_err(|e| AppError::engine(e, EXECUTE_FAILED).about(id))?;
        if rec.state.status() == Status::Error {
            tracing::warn!(execution_id = %rec.id, error = ?rec.state.error(), "{EXECUTE_FAILED}");
            return Err(AppError::new(Code::ExecutionFailed, EXECUTE_FAILED).about(rec.id));
        }
        Ok(ExecutionResult::from(&rec))
    }

    /// A run's answer to a tool call: the result, and the resume link when it is suspended
    /// (built from the route table).
    pub fn run_answer(&self, workflow_id: &WorkflowId, result: ExecutionResult) -> wire::RunAnswer {
        let resume =
            (result.outcome.status == wire::WorkflowStatus::Suspended).then(|| wire::ResumeLink {
                method: crate::routes::RESUME.method,
                path: crate::routes::RESUME.link(&[workflow_id, &result.execution_id]),
                body: serde_json::json!({"resumeData": "<an instance of resumeSchema>"}),
                resume_schema: self
                    .engine
                    .workflow(workflow_id)
                    .and_then(|w| w.resume_schema_json().cloned()),
            });
        wire::RunAnswer { result, resume }
    }

    /// The execution, once the caller may act on it (strict mode's ownership rule).
    pub(crate) async fn owned(
        &self,
        caller: &Caller,
        workflow_id: &WorkflowId,
        execution_id: &ExecutionId,
    ) -> Result<ExecutionRecord, AppError> {
        self.host_workflow(workflow_id)?;
        let rec = self
            .engine
            .state(workflow_id, execution_id)
            .await
            .map_err(|e| AppError::engine(e, READ_FAILED))?;
        self.policy.authorize_execution(caller, &rec)?;
        Ok(rec)
    }

    /// In strict mode, the ownership check before a change (outside it, anyone holding the id
    /// may, and the change itself reports an unknown execution).
    pub(crate) async fn check_owner(
        &self,
        caller: &Caller,
        workflow_id: &WorkflowId,
        execution_id: &ExecutionId,
    ) -> Result<(), AppError> {
        self.host_workflow(workflow_id)?;
        if self.policy.strict {
            self.owned(caller, workflow_id, execution_id).await?;
        }
        Ok(())
    }

    /// Asks a running execution to suspend at its next step boundary (`reason`, default
    /// `Suspended by request`), and waits for it (up to the engine's suspend wait).
    pub async fn suspend(
        &self,
        caller: &Caller,
        workflow_id: &WorkflowId,
        execution_id: &ExecutionId,
        reason: Option<String>,
    ) -> Result<Suspended, AppError> {
        self.check_owner(caller, workflow_id, execution_id).await?;
        let reason = reason.unwrap_or_else(|| "Suspended by request".to_owned());
        let rec = self
            .engine
            .suspend(workflow_id, execution_id, reason)
            .await
            .map_err(|e| AppError::engine(e, "Failed to suspend workflow"))?;
        Ok(Suspended {
            now: rec.state.status() == Status::Suspended,
            result: SuspendResult::from(&rec),
        })
    }

    /// Resumes a suspended execution from its suspended step (or `step_id`) with `data`.
    pub async fn resume(
        &self,
        caller: &Caller,
        workflow_id: &WorkflowId,
        execution_id: &ExecutionId,
        data: Value,
        step_id: Option<String>,
    ) -> Result<RunHandle, AppError> {
        self.check_owner(caller, workflow_id, execution_id).await?;
        self.engine
            .start_resume(workflow_id, execution_id, data, step_id.as_deref())
            .await
            .map_err(|e| AppError::engine(e, "Failed to resume workflow"))
    }

    /// Cancels a queued, running or suspended execution.
    pub async fn cancel(
        &self,
        caller: &Caller,
        workflow_id: &WorkflowId,
        execution_id: &ExecutionId,
        reason: Option<String>,
    ) -> Result<CancelResult, AppError> {
        self.check_owner(caller, workflow_id, execution_id).await?;
        let rec = self
            .engine
            .cancel(workflow_id, execution_id, reason)
            .await
            .map_err(|e| AppError::engine(e, "Failed to cancel execution"))?;
        Ok(CancelResult::from(&rec))
    }

    /// An execution's complete state.
    pub async fn state(
        &self,
        caller: &Caller,
        workflow_id: &WorkflowId,
        execution_id: &ExecutionId,
    ) -> Result<ExecutionStateView, AppError> {
        let rec = self.owned(caller, workflow_id, execution_id).await?;
        Ok(self.state_view(&rec).await)
    }

    /// An execution's state, with the version it waits for while no live server has it.
    async fn state_view(&self, rec: &ExecutionRecord) -> ExecutionStateView {
        ExecutionStateView {
            waiting_for_version: self.engine.waiting_for_version(rec).await,
            ..ExecutionStateView::from(rec)
        }
    }

    /// An execution's complete state, by its id alone.
    pub async fn find(
        &self,
        caller: &Caller,
        execution_id: &ExecutionId,
    ) -> Result<ExecutionStateView, AppError> {
        let rec = self
            .engine
            .find(execution_id)
            .await
            .map_err(|e| AppError::engine(e, READ_FAILED))?;
        if is_internal_workflow(&rec.workflow_id) {
            return Err(AppError::engine(
                agentry_engine::EngineError::UnknownExecution(execution_id.to_string()),
                READ_FAILED,
            ));
        }
        self.policy.authorize_execution(caller, &rec)?;
        Ok(self.state_view(&rec).await)
    }

    /// One page of executions, of one workflow or of all, newest first; in strict mode only
    /// those the caller may see.
    pub async fn list(
        &self,
        caller: &Caller,
        request: ListRequest,
    ) -> Result<ExecutionList, AppError> {
        if let Some(w) = &request.workflow_id {
            self.host_workflow(w)?;
        }
        let page = self.list_page(caller, request).await?;
        Ok(ExecutionList {
            executions: page.records.iter().map(ExecutionSummary::from).collect(),
            next_cursor: page.next_cursor,
        })
    }

    /// One page of executions (or runs) as the caller may see them, and the next page's cursor.
    pub(crate) async fn list_page(
        &self,
        caller: &Caller,
        request: ListRequest,
    ) -> Result<Page, AppError> {
        let query = request.query(self.policy.list_owner(caller)?)?;
        let limit = query.limit as usize;
        let page = self
            .engine
            .list(&query)
            .await
            .map_err(|e| AppError::engine(e, "Failed to list executions"))?;
        let next_cursor = if page.len() == limit {
            page.last().and_then(wire::list_cursor)
        } else {
            None
        };
        let records = page
            .into_iter()
            .filter(|r| self.policy.may_see(caller, r))
            .collect();
        Ok(Page {
            records,
            next_cursor,
        })
    }

    /// Refuses the run workflows of durable agent runs where a host's workflow is meant (they
    /// have routes of their own): they are not found there.
    pub(crate) fn host_workflow(&self, id: &WorkflowId) -> Result<(), AppError> {
        if is_internal_workflow(id) {
            return Err(AppError::engine(
                agentry_engine::EngineError::WorkflowNotFound(id.to_string()),
                "",
            ));
        }
        Ok(())
    }

    /// How many executions each workflow has in each status (the caller's own in strict mode).
    pub async fn counts(&self, caller: &Caller) -> Result<ExecutionCounts, AppError> {
        let owner = self.policy.list_owner(caller)?;
        let counts = self
            .engine
            .count_by_status(owner.as_ref())
            .await
            .map_err(|e| AppError::engine(e, "Failed to count executions"))?;
        let counts = counts
            .into_iter()
            .filter(|(workflow_id, _)| !is_internal_workflow(workflow_id))
            .collect::<Vec<_>>();
        Ok(ExecutionCounts::from(counts))
    }

    /// Re-attaches to an execution's events after number `after` (0: all), following it live
    /// until it stops running, then its `workflow-result`.
    pub async fn attach(
        &self,
        caller: &Caller,
        workflow_id: &WorkflowId,
        execution_id: &ExecutionId,
        after: i64,
    ) -> Result<RunHandle, AppError> {
        self.owned(caller, workflow_id, execution_id).await?;
        self.engine
            .attach(workflow_id, execution_id, after)
            .await
            .map_err(|e| AppError::engine(e, "Failed to read execution events"))
    }

    /// Watching an execution by its id alone (a WebSocket): refused when the caller may not see
    /// it; an unknown execution is the watch's own answer (its reads find nothing).
    pub async fn watch(
        &self,
        caller: &Caller,
        execution_id: &ExecutionId,
    ) -> Result<Watch, AppError> {
        if self.policy.strict
            && let Some(rec) = self.read(execution_id).await?
        {
            self.policy.authorize_execution(caller, &rec)?;
        }
        Ok(Watch {
            app: self.clone(),
            execution_id: execution_id.clone(),
        })
    }

    /// An execution by its id, if there is one: a database that does not answer is
    /// `database_unavailable`, like every other read of an execution.
    async fn read(&self, execution_id: &ExecutionId) -> Result<Option<ExecutionRecord>, AppError> {
        self.engine.store().get(execution_id).await.map_err(|e| {
            let _watched = tracing::info_span!("watch", execution_id = %execution_id).entered();
            AppError::engine(e.into(), READ_FAILED)
        })
    }
}

/// An execution a caller was allowed to watch: its state and its events, as often as asked.
#[derive(Clone)]
pub struct Watch {
    app: App,
    execution_id: ExecutionId,
}

impl Watch {
    pub fn execution_id(&self) -> &ExecutionId {
        &self.execution_id
    }

    /// Its state now (`None`: there is no such execution).
    pub async fn state(&self) -> Result<Option<ExecutionStateView>, AppError> {
        Ok(self
            .app
            .read(&self.execution_id)
            .await?
            .map(|rec| ExecutionStateView::from(&rec)))
    }

    /// Its whole event log, then each new event wherever it runs, `workflow-result` last
    /// (`None`: there is no such execution).
    pub async fn events(&self) -> Result<Option<RunHandle>, AppError> {
        self.app
            .engine
            .attach_any(&self.execution_id, 0)
            .await
            .map_err(|e| {
                tracing::error!(execution_id = %self.execution_id, error = %e, "following an execution");
                AppError::internal("Failed to read execution events")
            })
    }
}
