//! Every agent as an A2A server: its card, and the JSON-RPC methods of A2A 1.0 on its durable
//! runs. A task is a run (`SendMessage` starts one, its id the run's, its context the run's
//! conversation); a run waiting for a tool's approval is `input-required`, and a follow-up
//! message in the task whose data part is `{approved, reason?, approvalId?}` answers it. Each
//! method calls use cases of `agentry-app` (who may do what is decided there) and renders.

use agentry_agents::AgentEvent;
use agentry_app::limits::{self, MAX_PAGE};
use agentry_app::runs::{FollowUp, FollowUpAnswer, RunEvents, RunSearch};
use agentry_app::wire::runs::RunState;
use agentry_app::{App, AppError, Caller, Code};
use agentry_engine::{AgentId, ExecutionId};
use futures::stream::BoxStream;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::card::card_of;
use crate::errors::{RpcCode, from_app, invalid_params, rpc_error};
use crate::task::{agent_message, answer_artifact_id, task_of};
use crate::wire::{
    AgentCard, Artifact, ListTasksParams, ListTasksResult, Message, Part, Request, Role, RpcError,
    SendMessageParams, StreamResponse, Task, TaskArtifactUpdateEvent, TaskParams, TaskState,
    TaskStatus, TaskStatusUpdateEvent, response,
};

/// The context entry that names where a run came from (the console shows it).
pub const ORIGIN: &str = "origin";

/// The longest text of one message, in characters: the application's message limit.
pub const MAX_TEXT_CHARS: usize = limits::MAX_MESSAGE_CHARS;

/// The most parts of one message.
pub const MAX_PARTS: usize = limits::MAX_MESSAGE_PARTS;

/// The tasks a `ListTasks` page holds unless asked otherwise (the specification's default).
pub const DEFAULT_TASK_PAGE: u32 = 50;

/// The answer to one request: a JSON-RPC response, or (a streaming method) the JSON-RPC
/// responses of its events, ending at the task's first terminal or interrupted state.
pub enum Reply {
    Json(Value),
    Stream(BoxStream<'static, Value>),
}

/// The A2A front end over an [`App`] (cheap to make: the application is shared).
#[derive(Clone)]
pub struct A2aServer {
    app: App,
}

impl A2aServer {
    pub fn new(app: App) -> Self {
        Self { app }
    }

    /// Agent `id`'s card, its JSON-RPC interface at `url`; `authenticated`: a token is asked
    /// for (the card names the Bearer scheme).
    pub fn card(
        &self,
        id: &AgentId,
        url: &str,
        authenticated: bool,
    ) -> Result<AgentCard, AppError> {
        let detail = self.app.agent(id)?;
        Ok(card_of(&detail, url, authenticated))
    }

    /// Answers one JSON-RPC request of `caller` to agent `agent`. `version` is the request's
    /// `A2A-Version` header (absent: taken as 1.0, curl-friendly).
    pub async fn handle(
        &self,
        caller: Caller,
        agent: AgentId,
        body: &[u8],
        version: Option<&str>,
    ) -> Reply {
        let request: Request = match serde_json::from_slice::<Value>(body) {
            Err(e) => {
                let e = rpc_error(
                    RpcCode::ParseError,
                    format!("Invalid JSON: {e}"),
                    Code::InvalidRequest,
                );
                return Reply::Json(response(&Value::Null, Err(e)));
            }
            Ok(Value::Object(o)) => match serde_json::from_value(Value::Object(o)) {
                Ok(r) => r,
                Err(e) => return Reply::Json(response(&Value::Null, Err(invalid_request(e)))),
            },
            Ok(_) => {
                let e = invalid_request("a request is one JSON-RPC object (no batches)");
                return Reply::Json(response(&Value::Null, Err(e)));
            }
        };
        let id = request.id.clone();
        if let Err(e) = check_envelope(&request, version) {
            return Reply::Json(response(&id, Err(e)));
        }
        let method = request.method.as_deref().unwrap_or_default();
        let call = Call {
            app: self.app.clone(),
            caller,
            agent,
        };
        let outcome = match method {
            "SendMessage" => call.send(request.params).await,
            "SendStreamingMessage" => match call.send_streaming(request.params).await {
                Ok(events) => return Reply::Stream(rpc_stream(id, events)),
                Err(e) => Err(e),
            },
            "GetTask" => call.get(request.params).await,
            "ListTasks" => call.list(request.params).await,
            "CancelTask" => call.cancel(request.params).await,
            "SubscribeToTask" => match call.subscribe(request.params).await {
                Ok(events) => return Reply::Stream(rpc_stream(id, events)),
                Err(e) => Err(e),
            },
            "GetExtendedAgentCard" => Err(rpc_error(
                RpcCode::UnsupportedOperation,
                "This agent's card declares no extended card: its public card is the whole card",
                Code::InvalidRequest,
            )),
            "CreateTaskPushNotificationConfig"
            | "GetTaskPushNotificationConfig"
            | "ListTaskPushNotificationConfigs"
            | "DeleteTaskPushNotificationConfig" => Err(rpc_error(
                RpcCode::PushNotificationNotSupported,
                "Push notifications are not supported: stream the task or subscribe to it",
                Code::InvalidRequest,
            )),
            other => Err(rpc_error(
                RpcCode::MethodNotFound,
                format!("Method {other:?} not found"),
                Code::InvalidRequest,
            )),
        };
        Reply::Json(response(&id, outcome))
    }
}

fn invalid_request(e: impl std::fmt::Display) -> RpcError {
    rpc_error(
        RpcCode::InvalidRequest,
        format!("Invalid JSON-RPC request: {e}"),
        Code::InvalidRequest,
    )
}

/// The envelope's rules: JSON-RPC 2.0, a method, an id that is a string or a number, and a
/// protocol version of 1.x.
fn check_envelope(request: &Request, version: Option<&str>) -> Result<(), RpcError> {
    if request.jsonrpc.as_deref() != Some("2.0") {
        return Err(invalid_request("\"jsonrpc\" must be \"2.0\""));
    }
    if request.method.is_none() {
        return Err(invalid_request("no method"));
    }
    if !matches!(request.id, Value::String(_) | Value::Number(_)) {
        return Err(invalid_request("\"id\" must be a string or a number"));
    }
    if let Some(v) = version.map(str::trim).filter(|v| !v.is_empty())
        && v.split('.').next() != Some("1")
    {
        return Err(rpc_error(
            RpcCode::VersionNotSupported,
            format!("A2A version {v} is not supported: this server speaks 1.0"),
            Code::InvalidRequest,
        ));
    }
    Ok(())
}

/// Each event as a JSON-RPC response to request `id`.
fn rpc_stream(
    id: Value,
    events: mpsc::Receiver<Result<StreamResponse, RpcError>>,
) -> BoxStream<'static, Value> {
    Box::pin(futures::stream::unfold(events, move |mut events| {
        let id = id.clone();
        async move {
            let event = events.recv().await?;
            let value = event.map(|e| serde_json::to_value(e).unwrap_or(Value::Null));
            Some((response(&id, value), events))
        }
    }))
}

/// One request's use cases: the application, who asks, of which agent.
#[derive(Clone)]
struct Call {
    app: App,
    caller: Caller,
    agent: AgentId,
}

/// What a message asks: a new task (its text), or the answers to a task's pending approvals.
enum Ask {
    New { text: String, context: String },
    Answer { task: String, follow_up: FollowUp },
}

impl Call {
    async fn state(&self, task: &str) -> Result<RunState, RpcError> {
        self.app
            .run(&self.caller, &self.agent, &ExecutionId::from(task))
            .await
            .map_err(from_app)
    }

    /// `SendMessage`: the task once it ended or waits for the client (or at once, with
    /// `returnImmediately`).
    async fn send(&self, params: Value) -> Result<Value, RpcError> {
        let params: SendMessageParams = parse(params)?;
        let configuration = params.configuration.clone().unwrap_or_default();
        let history = history_limit(configuration.history_length)?;
        let mut events = self.start(&params.message).await?;
        let task = events.run_id().to_owned();
        if !configuration.return_immediately {
            while events.next().await.is_some() {}
        }
        let run = self.state(&task).await?;
        let task = task_of(&run, history);
        Ok(json!({"task": task}))
    }

    /// `SendStreamingMessage`: the task, then its progress, to its end or its wait.
    async fn send_streaming(
        &self,
        params: Value,
    ) -> Result<mpsc::Receiver<Result<StreamResponse, RpcError>>, RpcError> {
        let params: SendMessageParams = parse(params)?;
        let events = self.start(&params.message).await?;
        let run = self.state(events.run_id()).await?;
        Ok(self.forward(run, events))
    }

    /// `SubscribeToTask`: the task as it stands, then its progress (a re-attach: nothing
    /// between the two is missed).
    async fn subscribe(
        &self,
        params: Value,
    ) -> Result<mpsc::Receiver<Result<StreamResponse, RpcError>>, RpcError> {
        let params: TaskParams = parse(params)?;
        let (run, events) = self
            .app
            .follow_run(
                &self.caller,
                &self.agent,
                &ExecutionId::from(params.id.as_str()),
            )
            .await
            .map_err(from_app)?;
        let state = crate::task::state_of(run.summary.status);
        if state.is_terminal() {
            return Err(rpc_error(
                RpcCode::UnsupportedOperation,
                format!("Task {} ended: there is nothing to subscribe to", params.id),
                Code::ExecutionEnded,
            ));
        }
        Ok(self.forward(run, events))
    }

    async fn get(&self, params: Value) -> Result<Value, RpcError> {
        let params: TaskParams = parse(params)?;
        let history = history_limit(params.history_length)?;
        let run = self.state(&params.id).await?;
        to_json(task_of(&run, history))
    }

    /// `ListTasks`: the caller's tasks of this agent (every run of it the caller may see),
    /// newest status first, filtered and paged as the params ask.
    async fn list(&self, params: Value) -> Result<Value, RpcError> {
        let params: ListTasksParams = parse(params)?;
        let history = history_limit(params.history_length)?;
        let limit = match params.page_size {
            None => DEFAULT_TASK_PAGE,
            Some(n) => u32::try_from(n)
                .ok()
                .filter(|n| (1..=MAX_PAGE).contains(n))
                .ok_or_else(|| {
                    invalid_params(format!("pageSize must be from 1 to {MAX_PAGE}, got {n}"))
                })?,
        };
        let statuses = match params.status.as_deref() {
            None | Some("" | "TASK_STATE_UNSPECIFIED") => None,
            Some(name) => {
                let state: TaskState = serde_json::from_value(Value::from(name))
                    .map_err(|_| invalid_params(format!("status {name:?} is not a task state")))?;
                Some(crate::task::statuses_of(state))
            }
        };
        let updated_since = match params.status_timestamp_after.as_deref() {
            None | Some("") => None,
            Some(t) => Some(
                chrono::DateTime::parse_from_rfc3339(t)
                    .map_err(|_| {
                        invalid_params(format!(
                            "statusTimestampAfter {t:?} is not an RFC 3339 time"
                        ))
                    })?
                    .to_utc(),
            ),
        };
        let search = RunSearch {
            conversation_id: params.context_id.filter(|c| !c.is_empty()),
            statuses,
            updated_since,
            limit,
            cursor: params.page_token,
        };
        let page = self
            .app
            .search_runs(&self.caller, &self.agent, search)
            .await
            .map_err(from_app)?;
        let tasks: Vec<Task> = page
            .runs
            .iter()
            .map(|run| {
                let mut task = task_of(run, history);
                if !params.include_artifacts {
                    task.artifacts.clear();
                }
                task
            })
            .collect();
        to_json(ListTasksResult {
            page_size: tasks.len(),
            total_size: page.total,
            next_page_token: page.next_cursor.unwrap_or_default(),
            tasks,
        })
    }

    async fn cancel(&self, params: Value) -> Result<Value, RpcError> {
        let params: TaskParams = parse(params)?;
        let history = history_limit(params.history_length)?;
        let id = ExecutionId::from(params.id.as_str());
        self.app
            .cancel_run(
                &self.caller,
                &self.agent,
                &id,
                Some("cancelled through A2A".into()),
            )
            .await
            .map_err(from_app)?;
        let run = self.state(&params.id).await?;
        to_json(task_of(&run, history))
    }

    /// Starts what `message` asks: a new durable run, or the continuation of a task waiting for
    /// its approvals.
    async fn start(&self, message: &Message) -> Result<RunEvents, RpcError> {
        match self.ask(message)? {
            Ask::New { text, context } => {
                let mut generation = self
                    .app
                    .question(
                        &self.caller,
                        &self.agent,
                        &text,
                        Some(("message.contextId", context)),
                    )
                    .map_err(from_app)?;
                generation.durability.durable = true;
                generation
                    .options
                    .context
                    .insert(ORIGIN.into(), Value::from("a2a"));
                match self
                    .app
                    .stream(&self.caller, &self.agent, generation)
                    .await
                    .map_err(from_app)?
                {
                    agentry_app::runs::AgentStream::Run(events) => Ok(events),
                    agentry_app::runs::AgentStream::Memory(_) => Err(from_app(AppError::internal(
                        "an A2A task must be a durable run",
                    ))),
                }
            }
            Ask::Answer { task, follow_up } => {
                let (_, events) = self
                    .app
                    .answer_follow_up(
                        &self.caller,
                        &self.agent,
                        &ExecutionId::from(task.as_str()),
                        follow_up,
                    )
                    .await
                    .map_err(from_app)?;
                Ok(events)
            }
        }
    }

    /// What `message` asks, checked: a user's message of 1 to [`MAX_PARTS`] parts, each with
    /// one content; a new task's text from its text parts (data parts as their JSON); a
    /// follow-up in a task, its answer to the task's approvals.
    fn ask(&self, message: &Message) -> Result<Ask, RpcError> {
        if message.role != Role::User {
            return Err(invalid_params("message.role must be ROLE_USER"));
        }
        if message.parts.is_empty() || message.parts.len() > MAX_PARTS {
            return Err(invalid_params(format!(
                "message.parts must hold 1 to {MAX_PARTS} parts"
            )));
        }
        if let Some(i) = message.parts.iter().position(|p| p.contents() != 1) {
            return Err(invalid_params(format!(
                "message.parts[{i}] must have exactly one of text, data, url or raw"
            )));
        }
        if message
            .parts
            .iter()
            .any(|p| p.url.is_some() || p.raw.is_some())
        {
            return Err(rpc_error(
                RpcCode::ContentTypeNotSupported,
                "Only text and data parts are supported",
                Code::InvalidRequest,
            ));
        }
        match &message.task_id {
            Some(task) => Ok(Ask::Answer {
                task: task.clone(),
                follow_up: Self::follow_up(message),
            }),
            None => {
                let text = message
                    .parts
                    .iter()
                    .map(|p| match (&p.text, &p.data) {
                        (Some(t), _) => t.clone(),
                        (_, Some(d)) => d.to_string(),
                        _ => String::new(),
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                if text.chars().count() > MAX_TEXT_CHARS {
                    return Err(invalid_params(format!(
                        "the message's text must be at most {MAX_TEXT_CHARS} characters"
                    )));
                }
                let context = match &message.context_id {
                    Some(c) if !c.is_empty() => c.clone(),
                    _ => uuid::Uuid::new_v4().to_string(),
                };
                Ok(Ask::New { text, context })
            }
        }
    }

    /// A follow-up message in a task: its context, and its data part read as the answer to one
    /// of the task's approvals (whether the task takes it, and which approval it answers, the
    /// application decides: [`App::answer_follow_up`]).
    fn follow_up(message: &Message) -> FollowUp {
        FollowUp {
            conversation: message.context_id.clone().map(|c| ("message.contextId", c)),
            answer: approval_answer(message),
        }
    }

    /// The task `run` as it stands, then its events as A2A's, then its end (read again, so
    /// that the last state is the stored one).
    fn forward(
        &self,
        run: RunState,
        mut events: RunEvents,
    ) -> mpsc::Receiver<Result<StreamResponse, RpcError>> {
        let (tx, rx) = mpsc::channel(64);
        let call = self.clone();
        tokio::spawn(async move {
            let task = task_of(&run, None);
            let (id, context) = (task.id.clone(), task.context_id.clone());
            let first_state = task.status.state;
            if tx.send(Ok(StreamResponse::Task(task))).await.is_err() || first_state.ends_a_stream()
            {
                return;
            }
            let mut n = 0;
            while let Some((_, event)) = events.next().await {
                let Some(update) = progress(&id, &context, &mut n, event) else {
                    continue;
                };
                if tx.send(Ok(update)).await.is_err() {
                    return;
                }
            }
            drop(events);
            let ended = match call.state(&id).await {
                Ok(run) => run,
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            };
            for update in ending(&ended) {
                if tx.send(Ok(update)).await.is_err() {
                    return;
                }
            }
        });
        rx
    }
}

/// The answer a follow-up message's data part gives: `{approved, reason?, approvalId?}`.
fn approval_answer(message: &Message) -> Result<FollowUpAnswer, AppError> {
    let answer = message
        .parts
        .iter()
        .find_map(|p| p.data.as_ref())
        .ok_or_else(|| {
            AppError::bad_request(
                "answer the task's approval with a data part {\"approved\": true|false, \"reason\"?, \"approvalId\"?}",
            )
        })?;
    let approved = answer
        .get("approved")
        .and_then(Value::as_bool)
        .ok_or_else(|| {
            AppError::bad_request("the data part's \"approved\" must be true or false")
        })?;
    let reason = match answer.get("reason") {
        None | Some(Value::Null) => None,
        Some(Value::String(r)) => Some(r.clone()),
        Some(_) => {
            return Err(AppError::bad_request(
                "the data part's \"reason\" must be text",
            ));
        }
    };
    let approval_id = match answer.get("approvalId") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id.clone()),
        Some(_) => {
            return Err(AppError::bad_request(
                "the data part's \"approvalId\" must be text",
            ));
        }
    };
    Ok(FollowUpAnswer {
        approved,
        reason,
        approval_id,
    })
}

/// A run's event as the task's progress: its text, tool calls and the tools' own progress as
/// the agent's messages of a `working` status (the answer comes whole as the artifact at the
/// end).
fn progress(task: &str, context: &str, n: &mut u32, event: AgentEvent) -> Option<StreamResponse> {
    let parts = match event {
        AgentEvent::TextDelta(t) if !t.is_empty() => vec![Part::text(t)],
        AgentEvent::ToolCall(call) => vec![Part::data(json!({"toolCall": call}))],
        AgentEvent::ToolResult(result) => vec![Part::data(json!({"toolResult": result}))],
        AgentEvent::ToolProgress {
            tool_call_id,
            tool_name,
            data,
        } => vec![Part::data(json!({"toolProgress": {
            "toolCallId": tool_call_id, "toolName": tool_name, "data": data,
        }}))],
        _ => return None,
    };
    *n += 1;
    Some(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: task.to_owned(),
        context_id: context.to_owned(),
        status: TaskStatus {
            state: TaskState::TaskStateWorking,
            message: Some(agent_message(format!("{task}-p{n}"), task, context, parts)),
            timestamp: Some(agentry_app::wire::iso(chrono::Utc::now())),
        },
    }))
}

/// The last events of a stream: the answer as the task's artifact (completed), then the
/// status it stopped in.
fn ending(run: &RunState) -> Vec<StreamResponse> {
    let task: Task = task_of(run, Some(0));
    let mut out = Vec::new();
    if task.status.state == TaskState::TaskStateCompleted {
        out.push(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: task.id.clone(),
            context_id: task.context_id.clone(),
            artifact: Artifact {
                artifact_id: answer_artifact_id(&task.id),
                name: Some("answer".into()),
                parts: vec![Part::text(run.text.clone())],
            },
            append: false,
            last_chunk: true,
        }));
    }
    // Its status as `task_of` makes it (waiting for input: the pending approvals named).
    out.push(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: task.id,
        context_id: task.context_id,
        status: task.status,
    }));
    out
}

/// A request's `historyLength`: how many of a task's newest messages to show (`None`: all).
/// Below 0 it is refused.
fn history_limit(history_length: Option<i32>) -> Result<Option<usize>, RpcError> {
    history_length
        .map(|n| {
            usize::try_from(n)
                .map_err(|_| invalid_params(format!("historyLength must be 0 or more, got {n}")))
        })
        .transpose()
}

fn parse<T: serde::de::DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    serde_json::from_value(params).map_err(|e| invalid_params(format!("Invalid params: {e}")))
}

fn to_json<T: serde::Serialize>(v: T) -> Result<Value, RpcError> {
    serde_json::to_value(v).map_err(|e| from_app(AppError::internal(e.to_string())))
}
