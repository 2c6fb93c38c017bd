//! The durable agent run use cases: starting a run (a generation that is recorded call by call),
//! waiting for it or streaming it, listing and reading runs, re-attaching to one, answering a
//! tool approval, cancelling. A run is an execution of its agent's run workflow
//! (`agent:<agent id>`), so every rule of executions holds: strict mode's ownership, leases,
//! the event log.

use std::collections::VecDeque;

use agentry_agents::{
    self as agent, AgentError, AgentEvent, ApprovalAnswer, FinishReason, RunEvent, RunInput,
    RunJournal, Usage, agent_of_run, run_workflow_id,
};
use agentry_engine::store::Family;
use agentry_engine::{
    AgentId, EventKind, ExecuteOptions, ExecutionId, ExecutionRecord, RunHandle, Status,
    WorkflowEvent,
};
use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::App;
use crate::caller::Caller;
use crate::error::{AppError, Code};
use crate::input::Generation;
use crate::wire::agents::TextResult;
use crate::wire::runs::{ApprovalResult, RunList, RunState, RunSummary, TextAnswer};
use crate::wire::{self, CancelResult, WorkflowStatus};
use crate::workflows::{ListRequest, MAX_PAGE};

const RUN_FAILED: &str = "Failed to run the agent";
const READ_FAILED: &str = "Failed to read the run";

pub use crate::limits::MAX_REASON_CHARS;

/// How long an answer to a pending approval waits for its run to suspend (the run announces a
/// request before it writes its suspension, after its other calls of the same model answer).
const SUSPENSION_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How many of an agent's newest live runs the chat resume URL looks through for the
/// conversation's.
const ACTIVE_SCAN: u32 = 100;

/// How many of an agent's newest runs a run search looks through.
pub const SEARCH_SCAN: u32 = 1000;

impl App {
    /// Registers the run workflow of every agent that has none yet (agents a host added after
    /// the application was made). Safe to call again.
    pub fn register_run_workflows(&self) {
        for agent in self.agents.agents() {
            let id = run_workflow_id(&agent.id);
            if self.engine.workflow(&id).is_none() {
                // A race with another caller registering it is harmless: one of them wins.
                let _ = self.engine.register(self.agents.run_workflow(&agent));
            }
        }
    }

    /// Whether a generation of `id` runs durably: asked by the request (`durable`, `runId`),
    /// declared by the agent's host, or implied by a tool that may wait for a person.
    pub fn is_durable(&self, id: &AgentId, generation: &Generation) -> bool {
        generation.durability.durable
            || self
                .agents
                .agent(id)
                .is_some_and(|a| a.durable || a.may_wait_for_approval())
    }

    /// Starts a durable run of `generation` (or rejoins the one its `runId` names, with the same
    /// input and owner). `stream`: its model text is announced as it comes.
    async fn start_run(
        &self,
        caller: &Caller,
        id: &AgentId,
        generation: Generation,
        stream: bool,
    ) -> Result<RunHandle, AppError> {
        if generation.schema.is_some() {
            return Err(AppError::bad_request(
                "Invalid options: durable runs generate text (/text, /stream, /chat), not objects",
            ));
        }
        // An agent a host registered after the application was made.
        if self.engine.workflow(&run_workflow_id(id)).is_none() {
            self.register_run_workflows();
        }
        let Generation {
            input,
            options,
            durability,
            ..
        } = generation;
        let mut context = options.context.clone();
        if let Some(c) = &options.conversation_id {
            context.insert("conversationId".into(), Value::String(c.clone()));
        }
        if let Some(u) = &options.user_id {
            context.insert("userId".into(), Value::String(u.to_string()));
        }
        let run = RunInput::new(input, &options, stream);
        let input = serde_json::to_value(&run).map_err(|e| AppError::internal(e.to_string()))?;
        let execute = ExecuteOptions {
            execution_id: durability.run_id.map(ExecutionId::from),
            user_id: options.user_id.clone(),
            context,
            owner: caller.user_id(),
            last_event_id: None,
            priority: None,
            version: None,
        };
        self.engine
            .start(&run_workflow_id(id), input, execute)
            .await
            .map_err(|e| AppError::engine(e, RUN_FAILED))
    }

    /// A durable `/text`: starts the run and waits until it completes or waits for an approval.
    /// Closing the connection does not stop it (cancel it through its route).
    pub async fn run_text(
        &self,
        caller: &Caller,
        id: &AgentId,
        generation: Generation,
    ) -> Result<TextAnswer, AppError> {
        let handle = self.start_run(caller, id, generation, false).await?;
        let run_id = handle.execution_id.clone();
        let rec = handle
            .finish_for_client()
            .await
            .map_err(|e| AppError::engine(e, RUN_FAILED).about(run_id.as_str()))?;
        run_text_result(&rec)
    }

    /// A streamed generation: a durable run's events (`Some` run id), or the events of a
    /// generation held in memory.
    pub async fn stream(
        &self,
        caller: &Caller,
        id: &AgentId,
        generation: Generation,
    ) -> Result<AgentStream, AppError> {
        if self.is_durable(id, &generation) {
            let handle = self.start_run(caller, id, generation, true).await?;
            return Ok(AgentStream::Run(RunEvents::new(handle, None)));
        }
        Ok(AgentStream::Memory(self.stream_text(id, generation)?))
    }

    /// A run of agent `id`, once the caller may see it (strict mode's ownership rule).
    async fn owned_run(
        &self,
        caller: &Caller,
        id: &AgentId,
        run_id: &ExecutionId,
    ) -> Result<ExecutionRecord, AppError> {
        self.agents.require(id).map_err(AppError::agent)?;
        let not_found = || {
            AppError::new(
                Code::RunNotFound,
                format!("Run {run_id} of agent {id} not found"),
            )
        };
        let rec = self
            .engine
            .store()
            .get(run_id)
            .await
            .map_err(|e| AppError::engine(e.into(), READ_FAILED))?
            .ok_or_else(not_found)?;
        if agent_of_run(&rec.workflow_id) != Some(id.as_str()) {
            return Err(not_found());
        }
        self.policy.authorize_execution(caller, &rec)?;
        Ok(rec)
    }

    /// One page of durable runs, of one agent or of all, newest first; in strict mode only the
    /// caller's (an admin's: all).
    pub async fn runs(
        &self,
        caller: &Caller,
        agent: Option<&AgentId>,
        mut request: ListRequest,
    ) -> Result<RunList, AppError> {
        if let Some(id) = agent {
            self.agents.require(id).map_err(AppError::agent)?;
            request.workflow_id = Some(run_workflow_id(id));
        } else if let Some(w) = request.workflow_id.take() {
            // `agentId` of /agent-runs.
            request.workflow_id = Some(run_workflow_id(&w));
        }
        request.family = Family::Internal;
        let page = self.list_page(caller, request).await?;
        Ok(RunList {
            runs: page.records.iter().map(RunSummary::from).collect(),
            next_cursor: page.next_cursor,
        })
    }

    /// The page of agent `id`'s durable runs that `search` asks for, of those the caller may
    /// see (in strict mode only the caller's; an admin's: all), newest update first. It looks
    /// through the agent's newest [`SEARCH_SCAN`] runs (by start) that the caller may see.
    pub async fn search_runs(
        &self,
        caller: &Caller,
        id: &AgentId,
        search: RunSearch,
    ) -> Result<RunSearchPage, AppError> {
        self.agents.require(id).map_err(AppError::agent)?;
        if !(1..=MAX_PAGE).contains(&search.limit) {
            return Err(AppError::bad_request(format!(
                "Invalid limit {}: expected a number from 1 to {MAX_PAGE}",
                search.limit
            )));
        }
        let after = match search.cursor.as_deref().filter(|c| !c.is_empty()) {
            None => None,
            Some(c) => Some(
                wire::parse_list_cursor(c)
                    .ok_or_else(|| AppError::bad_request("Invalid cursor"))?,
            ),
        };
        // The matches' keys only: the scan holds one page of records at a time.
        let mut matches: Vec<(DateTime<Utc>, String)> = Vec::new();
        let mut cursor = None;
        for _ in 0..SEARCH_SCAN.div_ceil(MAX_PAGE) {
            let request = ListRequest {
                workflow_id: Some(run_workflow_id(id)),
                family: Family::Internal,
                status: None,
                limit: Some(MAX_PAGE.to_string()),
                cursor: cursor.take(),
            };
            let page = self.list_page(caller, request).await?;
            matches.extend(
                page.records
                    .iter()
                    .filter(|r| search.matches(r))
                    .map(|r| (r.updated_at, r.id.clone())),
            );
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        matches.sort_unstable_by(|a, b| b.cmp(a));
        let total = matches.len();
        let mut rest = matches
            .into_iter()
            .filter(|m| after.as_ref().is_none_or(|a| m < a));
        let keys: Vec<(DateTime<Utc>, String)> =
            rest.by_ref().take(search.limit as usize).collect();
        let next_cursor = match (rest.next(), keys.last()) {
            (Some(_), Some((at, last))) => wire::cursor_at(*at, last),
            _ => None,
        };
        let mut runs = Vec::with_capacity(keys.len());
        for (_, run_id) in keys {
            match self.owned_run(caller, id, &ExecutionId::from(run_id)).await {
                Ok(rec) => runs.push(RunState::new(&rec)),
                // Pruned since the scan.
                Err(e) if e.code == Code::RunNotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(RunSearchPage {
            runs,
            total,
            next_cursor,
        })
    }

    /// A run's state: its messages, its steps, its pending approvals.
    pub async fn run(
        &self,
        caller: &Caller,
        id: &AgentId,
        run_id: &ExecutionId,
    ) -> Result<RunState, AppError> {
        let rec = self.owned_run(caller, id, run_id).await?;
        let mut state = RunState::new(&rec);
        state.scores = self.run_scores(id, run_id.as_str()).await?;
        Ok(state)
    }

    /// Re-attaches to a run's events after `after` (the default: all), following it live until
    /// it stops running (or waits for an approval). An id in the middle of a model call's text
    /// replays only the rest of that text.
    pub async fn attach_run(
        &self,
        caller: &Caller,
        id: &AgentId,
        run_id: &ExecutionId,
        after: RunEventId,
    ) -> Result<RunEvents, AppError> {
        let rec = self.owned_run(caller, id, run_id).await?;
        let handle = self
            .engine
            .attach(&rec.workflow_id.as_str().into(), run_id, after.seq)
            .await
            .map_err(|e| AppError::engine(e, READ_FAILED))?;
        Ok(RunEvents::new(handle, Some(after)))
    }

    /// A run as it stands and its events from then on, live until it stops running (or waits
    /// for an approval): a snapshot and its continuation, with nothing missed or repeated
    /// between them (A2A's `SubscribeToTask`).
    pub async fn follow_run(
        &self,
        caller: &Caller,
        id: &AgentId,
        run_id: &ExecutionId,
    ) -> Result<(RunState, RunEvents), AppError> {
        let rec = self.owned_run(caller, id, run_id).await?;
        let handle = self
            .engine
            .attach(&rec.workflow_id.as_str().into(), run_id, rec.last_event)
            .await
            .map_err(|e| AppError::engine(e, READ_FAILED))?;
        let after = RunEventId::after(rec.last_event);
        Ok((RunState::new(&rec), RunEvents::new(handle, Some(after))))
    }

    /// The conversation's active durable run (running, or waiting for an approval) of agent
    /// `id`, from its first event: the AI SDK's chat resume URL. `None` when there is none.
    pub async fn active_chat_run(
        &self,
        caller: &Caller,
        id: &AgentId,
        conversation_id: &str,
    ) -> Result<Option<RunEvents>, AppError> {
        self.agents.require(id).map_err(AppError::agent)?;
        let mut found: Option<ExecutionRecord> = None;
        for status in ["running", "suspended"] {
            let request = ListRequest {
                workflow_id: Some(run_workflow_id(id)),
                family: Family::Internal,
                status: Some(status.into()),
                limit: Some(ACTIVE_SCAN.to_string()),
                cursor: None,
            };
            let page = self.list_page(caller, request).await?;
            let mine = page.records.into_iter().find(|r| {
                r.context.get("conversationId").and_then(Value::as_str) == Some(conversation_id)
                    && self.policy.may_join_conversation(caller, r)
            });
            if let Some(r) = mine
                && found.as_ref().is_none_or(|f| r.start_at > f.start_at)
            {
                found = Some(r);
            }
        }
        let Some(rec) = found else {
            return Ok(None);
        };
        let handle = self
            .engine
            .attach(&rec.workflow_id.as_str().into(), &rec.id.as_str().into(), 0)
            .await
            .map_err(|e| AppError::engine(e, READ_FAILED))?;
        Ok(Some(RunEvents::new(handle, Some(RunEventId::default()))))
    }

    /// Cancels a running or suspended run.
    pub async fn cancel_run(
        &self,
        caller: &Caller,
        id: &AgentId,
        run_id: &ExecutionId,
        reason: Option<String>,
    ) -> Result<CancelResult, AppError> {
        let rec = self.owned_run(caller, id, run_id).await?;
        let rec = self
            .engine
            .cancel(&rec.workflow_id.as_str().into(), run_id, reason)
            .await
            .map_err(|e| AppError::engine(e, "Failed to cancel the run"))?;
        Ok(CancelResult::from(&rec))
    }

    /// Answers pending tool approvals of a run: the run continues (on this server) with the
    /// answers stored before any tool runs. Of two answers to one request, one wins; the other
    /// is `approval_not_pending`. Answers the run's events from the resume on.
    pub async fn answer_approvals(
        &self,
        caller: &Caller,
        id: &AgentId,
        run_id: &ExecutionId,
        answers: Vec<ApprovalAnswer>,
    ) -> Result<(ApprovalResult, RunEvents), AppError> {
        if answers.iter().any(|a| {
            a.reason
                .as_ref()
                .is_some_and(|r| r.chars().count() > MAX_REASON_CHARS)
        }) {
            return Err(AppError::bad_request(format!(
                "Invalid reason: at most {MAX_REASON_CHARS} characters"
            )));
        }
        let mut rec = self.owned_run(caller, id, run_id).await?;
        // A request is announced before the run's suspension is written (its other calls may
        // still be finishing): an answer that comes in between waits for it, a while.
        let waited = std::time::Instant::now();
        while rec.state.status() == Status::Running
            && answers.iter().all(|a| {
                matches!(
                    RunJournal::of(&rec).approval(&a.approval_id),
                    Some((_, false))
                )
            })
            && waited.elapsed() < SUSPENSION_WAIT
        {
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
            rec = self.owned_run(caller, id, run_id).await?;
        }
        let journal = RunJournal::of(&rec);
        let pending = |approval_id: &str| {
            AppError::new(
                Code::ApprovalNotPending,
                format!(
                    "Approval {approval_id} of run {run_id} is not pending (answered already, \
                     expired, or the run ended)"
                ),
            )
        };
        for a in &answers {
            match journal.approval(&a.approval_id) {
                None => {
                    return Err(AppError::new(
                        Code::ApprovalNotFound,
                        format!("Approval {} not found in run {run_id}", a.approval_id),
                    ));
                }
                Some((_, true)) => return Err(pending(&a.approval_id)),
                Some((_, false)) if rec.state.status() != Status::Suspended => {
                    return Err(pending(&a.approval_id));
                }
                Some(_) => {}
            }
        }
        let first = answers
            .first()
            .cloned()
            .ok_or_else(|| AppError::bad_request("Invalid request: no approval answer given"))?;
        let answers: Vec<ApprovalAnswer> = answers
            .into_iter()
            .map(|mut a| {
                a.by = caller.user_id().map(|u| u.into_string());
                a
            })
            .collect();
        let handle = self
            .engine
            .start_resume(
                &rec.workflow_id.as_str().into(),
                run_id,
                agent::resume_data(&answers),
                None,
            )
            .await
            .map_err(|e| match e {
                // Another answer resumed it first (or it was cancelled): this one lost.
                agentry_engine::EngineError::NotSuspended { .. } => pending(&first.approval_id),
                other => AppError::engine(other, "Failed to answer the approval"),
            })?;
        let result = ApprovalResult {
            run_id: run_id.to_string(),
            approval_id: first.approval_id.clone(),
            approved: first.approved,
            status: WorkflowStatus::Running,
        };
        Ok((result, RunEvents::new(handle, None)))
    }

    /// A client's follow-up message in a run (A2A's message in a task): whether the run takes
    /// one, and which of its approvals it answers; then the answer as
    /// [`answer_approvals`](Self::answer_approvals) gives it (the rule of the approval routes
    /// and the chat). The run takes a message while it waits for input (suspended on its
    /// approvals): one that ended, or is working, is `approval_not_pending`. A message that
    /// names another conversation than the run's is refused; one that names no approval
    /// answers the only one the run waits for.
    pub async fn answer_follow_up(
        &self,
        caller: &Caller,
        id: &AgentId,
        run_id: &ExecutionId,
        follow_up: FollowUp,
    ) -> Result<(ApprovalResult, RunEvents), AppError> {
        let rec = self.owned_run(caller, id, run_id).await?;
        if let Some((field, conversation)) = &follow_up.conversation {
            let own = rec
                .context
                .get("conversationId")
                .and_then(Value::as_str)
                .unwrap_or(rec.id.as_str());
            if !conversation.is_empty() && conversation != own {
                return Err(AppError::bad_request(format!(
                    "{field} is not the conversation of run {run_id}"
                )));
            }
        }
        let why = match rec.state.status() {
            Status::Suspended => None,
            Status::Completed | Status::Error | Status::Cancelled => Some("it ended"),
            Status::Idle | Status::Queued | Status::Running => {
                Some("it is working, not waiting for input")
            }
        };
        if let Some(why) = why {
            return Err(AppError::new(
                Code::ApprovalNotPending,
                format!("Run {run_id} takes no message now: {why}"),
            ));
        }
        let answer = follow_up.answer?;
        let approval_id = match answer.approval_id {
            Some(approval_id) => approval_id,
            None => match RunJournal::of(&rec).pending().as_slice() {
                [one] => one.approval_id.clone(),
                pending => {
                    return Err(AppError::bad_request(format!(
                        "run {run_id} waits for {} approvals: name one with \"approvalId\"",
                        pending.len()
                    )));
                }
            },
        };
        let answer = ApprovalAnswer {
            approval_id,
            approved: answer.approved,
            reason: answer.reason,
            expired: false,
            by: None,
        };
        self.answer_approvals(caller, id, run_id, vec![answer])
            .await
    }
}

/// A client's follow-up message in a durable run, as its front end read it
/// ([`App::answer_follow_up`]).
#[derive(Debug, Clone)]
pub struct FollowUp {
    /// The conversation the message says it belongs to, and the field that said it (which a
    /// refusal names); `None` or empty: it does not say.
    pub conversation: Option<(&'static str, String)>,
    /// Its answer to an approval, or the refusal of what the front end could not read as one
    /// (answered only once the run is known to take a message).
    pub answer: Result<FollowUpAnswer, AppError>,
}

/// A follow-up's answer to one of the run's approvals.
#[derive(Debug, Clone)]
pub struct FollowUpAnswer {
    /// `true` lets the tool run; `false` denies it.
    pub approved: bool,
    /// Why (shown to the model on a denial; at most [`MAX_REASON_CHARS`] characters).
    pub reason: Option<String>,
    /// The approval it answers; `None`: the only one the run waits for.
    pub approval_id: Option<String>,
}

/// A search of one agent's durable runs ([`App::search_runs`]; A2A's `ListTasks`): each
/// filter given narrows it.
#[derive(Debug, Clone, Default)]
pub struct RunSearch {
    /// Only the runs of this conversation.
    pub conversation_id: Option<String>,
    /// Only the runs in one of these statuses (`None`: any; empty: none).
    pub statuses: Option<Vec<WorkflowStatus>>,
    /// Only the runs updated at or after this time.
    pub updated_since: Option<DateTime<Utc>>,
    /// How many runs a page holds: 1 to [`MAX_PAGE`].
    pub limit: u32,
    /// The page after this one (a page's `next_cursor`).
    pub cursor: Option<String>,
}

impl RunSearch {
    fn matches(&self, r: &ExecutionRecord) -> bool {
        let conversation = r.context.get("conversationId").and_then(Value::as_str);
        self.conversation_id
            .as_deref()
            .is_none_or(|c| conversation == Some(c))
            && self
                .statuses
                .as_ref()
                .is_none_or(|s| s.contains(&r.state.status().into()))
            && self.updated_since.is_none_or(|t| r.updated_at >= t)
    }
}

/// One page of a run search.
#[derive(Debug)]
pub struct RunSearchPage {
    /// The page's runs, newest update first.
    pub runs: Vec<RunState>,
    /// How many runs match the search, on every page.
    pub total: usize,
    /// The cursor of the next page; `None` on the last one.
    pub next_cursor: Option<String>,
}

/// The answer of a durable `/text` from the run's record: completed (its result), suspended
/// (the text so far and the pending approvals), or its failure.
fn run_text_result(rec: &ExecutionRecord) -> Result<TextAnswer, AppError> {
    let journal = RunJournal::of(rec);
    let pending = journal.pending().iter().map(Into::into).collect();
    let result = match rec.state.status() {
        Status::Completed => {
            let r = rec
                .state
                .result()
                .and_then(agent::run_result)
                .ok_or_else(|| AppError::internal("The run's result is unreadable"))?;
            TextResult::from(&r)
        }
        Status::Suspended | Status::Running | Status::Queued => {
            let (text, usage) = journal.totals();
            TextResult::from(&agent::TextResult {
                text,
                usage,
                finish_reason: FinishReason::ToolCalls,
                tool_calls: Vec::new(),
                tool_results: Vec::new(),
            })
        }
        Status::Cancelled => {
            return Err(AppError::new(
                Code::GenerationFailed,
                format!("The run {} was cancelled", rec.id),
            )
            .about(&rec.id));
        }
        Status::Error | Status::Idle => {
            // The failure's own code (a provider's, a guardrail's, a budget's) when the run
            // recorded it.
            if let Some(failure) = journal.failure() {
                return Err(AppError::agent(failure.to_error()).about(&rec.id));
            }
            let reason = rec.state.error().unwrap_or("unknown error");
            tracing::warn!(run_id = %rec.id, error = %reason, "{RUN_FAILED}");
            return Err(AppError::new(
                Code::GenerationFailed,
                format!("Failed to generate: {reason}"),
            )
            .about(&rec.id));
        }
    };
    Ok(TextAnswer {
        result,
        run_id: Some(rec.id.clone()),
        status: Some(rec.state.status().into()),
        pending_approvals: Some(pending),
    })
}

/// Where a client stands in a durable run's stream: after its stored event number `seq`, and
/// `text` characters into the model text that follows it. A stored event's SSE `id:` is its
/// number (`<seq>`); a live `text-delta`'s is `<seq>.<text>`: the last stored event before it
/// and how many characters of the model call's text the client has with this delta. Sent back
/// as `Last-Event-ID`, either resumes right after it: the stored events after `seq`, the first
/// model call's text without its first `text` characters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunEventId {
    pub seq: i64,
    pub text: usize,
}

impl RunEventId {
    /// Right after the stored event `seq`.
    pub fn after(seq: i64) -> Self {
        Self { seq, text: 0 }
    }

    /// A client's `Last-Event-ID`: `<seq>` or `<seq>.<text>`, non-negative whole numbers.
    pub fn parse(id: &str) -> Result<Self, AppError> {
        fn number<T: std::str::FromStr>(part: &str) -> Option<T> {
            let digits = !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
            digits.then(|| part.parse().ok()).flatten()
        }
        let parsed = match id.split_once('.') {
            Some((seq, text)) => number(seq).zip(number(text)),
            None => number(id).map(|seq| (seq, 0)),
        };
        parsed.map(|(seq, text)| Self { seq, text }).ok_or_else(|| {
            AppError::bad_request(format!(
                "Invalid Last-Event-ID {id:?}: expected the id of an event of the run \
                 (<number> or <number>.<characters>)"
            ))
        })
    }
}

impl std::fmt::Display for RunEventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.text {
            0 => write!(f, "{}", self.seq),
            text => write!(f, "{}.{text}", self.seq),
        }
    }
}

/// A streamed generation: one held in memory (no ids), or a durable run (each stored event
/// with its number, each live text piece with its [`RunEventId`]).
pub enum AgentStream {
    Memory(mpsc::Receiver<AgentEvent>),
    Run(RunEvents),
}

impl AgentStream {
    /// The run's id, for a durable run.
    pub fn run_id(&self) -> Option<&str> {
        match self {
            AgentStream::Memory(_) => None,
            AgentStream::Run(r) => Some(r.run_id()),
        }
    }

    /// The next event, with its id in the run's stream when it has one.
    pub async fn next(&mut self) -> Option<(Option<RunEventId>, AgentEvent)> {
        match self {
            AgentStream::Memory(rx) => rx.recv().await.map(|e| (None, e)),
            AgentStream::Run(r) => r.next().await,
        }
    }
}

/// A durable run's events as an agent stream shows them: text (live, as the model streams it,
/// or each model call's whole text when replayed), tool calls and results, approval requests,
/// and the end (`finish`, also when the run waits for an approval, or `error`). Each event
/// that stands for a stored one carries its number (the last of those it expands into); each
/// live text piece its [`RunEventId`].
pub struct RunEvents {
    handle: RunHandle,
    queue: VecDeque<(Option<RunEventId>, AgentEvent)>,
    /// The number of the last stored event seen (unknown until one is, for a new run).
    seq: Option<i64>,
    /// How many characters of the model call in progress (or, re-attached with an id in the
    /// middle of a text, of the next one stored) the client has.
    had: usize,
    done: bool,
    /// Why the run failed, from its `agent-failed` event (the engine's `workflow-error`
    /// follows it).
    failure: Option<AgentError>,
}

impl RunEvents {
    /// The events of `handle`, which follows the run after `after` (`None`: a run this process
    /// runs for the client, live from its first event).
    fn new(handle: RunHandle, after: Option<RunEventId>) -> Self {
        Self {
            handle,
            queue: VecDeque::new(),
            seq: after.map(|a| a.seq),
            had: after.map_or(0, |a| a.text),
            done: false,
            failure: None,
        }
    }

    pub fn run_id(&self) -> &str {
        self.handle.execution_id.as_str()
    }

    /// The next event, with its id when it stands for a stored one or is a live text piece.
    pub async fn next(&mut self) -> Option<(Option<RunEventId>, AgentEvent)> {
        loop {
            if let Some(ev) = self.queue.pop_front() {
                return Some(ev);
            }
            if self.done {
                return None;
            }
            match self.handle.events.recv().await {
                Some(ev) => self.translate(ev),
                None => {
                    self.done = true;
                }
            }
        }
    }

    /// Queues what a stored event (number `seq`, when it has one) expands into: the last of
    /// them carries its number.
    fn push(&mut self, events: Vec<AgentEvent>, seq: Option<i64>) {
        let n = events.len();
        for (i, ev) in events.into_iter().enumerate() {
            let id = if i + 1 == n {
                seq.map(RunEventId::after)
            } else {
                None
            };
            self.queue.push_back((id, ev));
        }
    }

    fn finish(&mut self, finish_reason: FinishReason, usage: Usage, text: String) -> AgentEvent {
        self.done = true;
        AgentEvent::Finish {
            finish_reason,
            usage,
            text,
            object: None,
        }
    }

    /// The end of a completed run: its `finish`, from its result.
    fn completed(&mut self, result: &Value) -> AgentEvent {
        match agent::run_result(result) {
            Some(r) => self.finish(r.finish_reason, r.usage, r.text),
            None => {
                self.done = true;
                AgentEvent::Error(AgentError::Run("the run's result is unreadable".into()))
            }
        }
    }

    /// A live piece of the model's text: its id says how far into the call's text it reaches.
    fn live_text(&mut self, delta: String) {
        self.had += delta.chars().count();
        let id = self.seq.map(|seq| RunEventId {
            seq,
            text: self.had,
        });
        self.queue.push_back((id, AgentEvent::TextDelta(delta)));
    }

    /// A model call's whole text, stored: what the client has not had of it yet.
    fn rest_of_text(&mut self, text: &str) -> Option<String> {
        let had = std::mem::take(&mut self.had);
        let rest: String = text.chars().skip(had).collect();
        (!rest.is_empty()).then_some(rest)
    }

    fn translate(&mut self, ev: WorkflowEvent) {
        let seq = ev.seq;
        let run = RunEvent::of(&ev.kind);
        if let Some(RunEvent::AgentTextDelta { delta }) = run {
            return self.live_text(delta);
        }
        if seq.is_some() {
            self.seq = seq;
        }
        let out = match (run, ev.kind) {
            (
                Some(RunEvent::AgentModelCall {
                    text, tool_calls, ..
                }),
                _,
            ) => {
                let mut out: Vec<AgentEvent> = self
                    .rest_of_text(&text)
                    .map(AgentEvent::TextDelta)
                    .into_iter()
                    .collect();
                out.extend(tool_calls.into_iter().map(AgentEvent::ToolCall));
                out
            }
            (Some(RunEvent::AgentToolResult { result, .. }), _) => {
                vec![AgentEvent::ToolResult(result)]
            }
            (
                Some(RunEvent::AgentToolProgress {
                    tool_call_id,
                    tool_name,
                    data,
                }),
                _,
            ) => vec![AgentEvent::ToolProgress {
                tool_call_id,
                tool_name,
                data,
            }],
            (Some(RunEvent::AgentApprovalRequest { request }), _) => {
                vec![AgentEvent::ToolApprovalRequest(request)]
            }
            (Some(RunEvent::AgentFailed { failure }), _) => {
                self.failure = Some(failure.to_error());
                Vec::new()
            }
            (Some(_), _) => Vec::new(),
            // A suspension may be followed by the rest of the run (a replay of a run that went
            // on): whether the stream ends there, the end of the log says (`WorkflowResult`).
            (None, EventKind::WorkflowComplete { result }) => vec![self.completed(&result)],
            (None, EventKind::WorkflowError { error, .. }) => {
                self.done = true;
                let failure = self.failure.take();
                vec![AgentEvent::Error(failure.unwrap_or(AgentError::Run(error)))]
            }
            (None, EventKind::WorkflowCancelled { cancellation }) => {
                self.done = true;
                let reason = cancellation
                    .reason
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default();
                vec![AgentEvent::Error(AgentError::Run(format!(
                    "the run was cancelled{reason}"
                )))]
            }
            (None, EventKind::WorkflowHandover { message }) => {
                self.done = true;
                vec![AgentEvent::Error(AgentError::Run(format!(
                    "{message}; re-attach to the run's stream to follow it"
                )))]
            }
            // The end of the log without an end seen: the run's state says how it stands.
            (None, EventKind::WorkflowResult { execution }) => {
                self.done = true;
                match execution.state.status() {
                    // The run's text and usage so far.
                    Status::Suspended => {
                        let (text, usage) = RunJournal::of(&execution).totals();
                        vec![self.finish(FinishReason::ToolCalls, usage, text)]
                    }
                    Status::Completed => execution
                        .state
                        .result()
                        .map(|r| vec![self.completed(r)])
                        .unwrap_or_default(),
                    _ => Vec::new(),
                }
            }
            (None, _) => Vec::new(),
        };
        self.push(out, seq);
    }
}

/// What a `/chat` streams: a new generation, or the run that the client's approval answers
/// continue; and the id of the assistant message it writes (a durable run's id).
pub struct ChatStream {
    pub message_id: String,
    /// It continues a message the client has (approval answers resumed its run).
    pub continues: bool,
    pub events: AgentStream,
}

impl App {
    /// The routes that answer a suspended run's pending approvals (built from the route table).
    pub fn approval_links(
        &self,
        id: &AgentId,
        answer: &TextAnswer,
    ) -> Vec<crate::wire::ResumeLink> {
        let run_id = answer.run_id.as_deref().unwrap_or_default();
        answer
            .pending_approvals
            .iter()
            .flatten()
            .map(|a| crate::wire::ResumeLink {
                method: crate::routes::ANSWER_APPROVAL.method,
                path: crate::routes::ANSWER_APPROVAL.link(&[id, run_id, &a.approval_id]),
                body: serde_json::json!({"approved": true, "reason": "<optional, shown to the model on a denial>"}),
                resume_schema: None,
            })
            .collect()
    }

    /// `/text`: a generation held in memory (`cancel` stops it: the client went away), or a
    /// durable run (which the client's going away does not stop).
    pub async fn text(
        &self,
        caller: &Caller,
        id: &AgentId,
        generation: Generation,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<TextAnswer, AppError> {
        if self.is_durable(id, &generation) {
            return self.run_text(caller, id, generation).await;
        }
        let r = self.generate_text(id, generation, cancel).await?;
        Ok(TextAnswer::memory(TextResult::from(&r)))
    }

    /// `/chat`: the approval answers of the client's last message continue their run (a run
    /// of this agent the caller may act on); without any, a new generation.
    pub async fn chat(
        &self,
        caller: &Caller,
        id: &AgentId,
        generation: Generation,
        approvals: Option<(String, Vec<ApprovalAnswer>)>,
    ) -> Result<ChatStream, AppError> {
        if let Some((run_id, answers)) = approvals {
            let run_id = ExecutionId::from(run_id);
            // The conversation's owner's answers only: another caller's are answered as if
            // the run did not exist.
            let rec = self.owned_run(caller, id, &run_id).await?;
            if !self.policy.may_join_conversation(caller, &rec) {
                return Err(AppError::new(
                    Code::RunNotFound,
                    format!("Run {run_id} of agent {id} not found"),
                ));
            }
            let (_, events) = self.answer_approvals(caller, id, &run_id, answers).await?;
            return Ok(ChatStream {
                message_id: run_id.into_string(),
                continues: true,
                events: AgentStream::Run(events),
            });
        }
        let events = self.stream(caller, id, generation).await?;
        let message_id = match events.run_id() {
            Some(run) => run.to_owned(),
            None => format!("msg-{}", uuid::Uuid::now_v7().simple()),
        };
        Ok(ChatStream {
            message_id,
            continues: false,
            events,
        })
    }
}
