//! The error table: every failure agentry answers is a row here, declared once, with a stable
//! snake_case code and its HTTP status. Use cases never pick a status: they fail with an
//! [`AppError`], which names a [`Code`]; the domain's errors (engine, agents, authentication)
//! convert into one through exhaustive matches, so a new kind of failure does not compile until
//! it has its row. HTTP renders the failure envelope from it (`{success: false, error, code}`),
//! MCP a tool error with the same `code`. The table is published in `/doc` (the `ErrorCode`
//! schema, and each operation's failure responses) and in `docs/ERRORS.md` (checked against this
//! table by a test).

use agentry_agents::{AgentError, ModelErrorKind};
use agentry_auth::AuthError;
use agentry_engine::EngineError;
use agentry_engine::store::StoreError;
use agentry_schedules::ScheduleError;

/// The HTTP statuses of the table's rows, by name (this crate knows no web framework).
#[allow(dead_code)]
mod status {
    pub const BAD_REQUEST: u16 = 400;
    pub const UNAUTHORIZED: u16 = 401;
    pub const FORBIDDEN: u16 = 403;
    pub const NOT_FOUND: u16 = 404;
    pub const METHOD_NOT_ALLOWED: u16 = 405;
    pub const NOT_ACCEPTABLE: u16 = 406;
    pub const REQUEST_TIMEOUT: u16 = 408;
    pub const CONFLICT: u16 = 409;
    pub const PAYLOAD_TOO_LARGE: u16 = 413;
    pub const UNSUPPORTED_MEDIA_TYPE: u16 = 415;
    pub const MISDIRECTED_REQUEST: u16 = 421;
    pub const UNPROCESSABLE_ENTITY: u16 = 422;
    pub const TOO_MANY_REQUESTS: u16 = 429;
    pub const INTERNAL_SERVER_ERROR: u16 = 500;
    pub const BAD_GATEWAY: u16 = 502;
    pub const SERVICE_UNAVAILABLE: u16 = 503;
    pub const GATEWAY_TIMEOUT: u16 = 504;
}

/// Declares [`Code`]: one line per row, `Variant => STATUS, "code", "when";` (the code is the
/// variant in snake_case, as serde writes it: a test checks they agree).
macro_rules! error_table {
    ($($variant:ident => $status:ident, $code:literal, $when:literal;)*) => {
        /// A failure the API can answer: its stable code and status.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, utoipa::ToSchema)]
        #[schema(as = ErrorCode)]
        #[serde(rename_all = "snake_case")]
        pub enum Code {
            $(
                #[doc = $when]
                $variant,
            )*
        }

        impl Code {
            /// Every row, in the table's order.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            /// The stable snake_case code clients match on.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $code,)*
                }
            }

            /// The HTTP status it is answered with.
            pub fn status(self) -> u16 {
                match self {
                    $(Code::$variant => status::$status,)*
                }
            }

            /// When it is answered.
            pub fn when(self) -> &'static str {
                match self {
                    $(Code::$variant => $when,)*
                }
            }
        }
    };
}

error_table! {
    InvalidRequest => BAD_REQUEST, "invalid_request", "The body, path, query or options are malformed or out of range (`Invalid ...`).";
    InvalidInput => BAD_REQUEST, "invalid_input", "A workflow's input fails its input schema (`Input validation failed: ...`).";
    InvalidResumeData => BAD_REQUEST, "invalid_resume_data", "Resume data fails the resume schema (`Resume data validation failed: ...`).";
    InvalidExecutionId => BAD_REQUEST, "invalid_execution_id", "A caller-chosen execution id outside the allowed alphabet.";
    UnknownStep => BAD_REQUEST, "unknown_step", "A resume from a step the workflow does not have.";
    InvalidSchedule => BAD_REQUEST, "invalid_schedule", "A schedule's field is wrong, and named (`Invalid schedule: <field>: ...`): an id outside the alphabet, an unknown workflow, an input its schema refuses or over 64 KiB, a cron expression that is not 5 or 6 fields or never fires, an unknown time zone, a duration that is not `30s`, `1m`, `1h`, `1d` or out of range, an unknown overlap policy.";
    InvalidBackfill => BAD_REQUEST, "invalid_backfill", "A backfill's `from` or `to` is wrong, and named (`Invalid backfill: <field>: ...`): not RFC 3339, `to` before `from` or in the future, a range of more than 1000 ticks.";
    NotSuspendable => BAD_REQUEST, "not_suspendable", "Suspend of an execution that is not running (completed, failed, cancelled or already suspended).";
    NotCancellable => BAD_REQUEST, "not_cancellable", "Cancel of an execution that is completed, failed or cancelled.";
    NotRetryable => BAD_REQUEST, "not_retryable", "Retry of an execution that did not fail (only one in `error` can be retried).";
    NotForkable => BAD_REQUEST, "not_forkable", "A fork from a step whose earlier steps did not all finish in the source execution.";
    InvalidDefinition => BAD_REQUEST, "invalid_definition", "A workflow definition deployed through `PUT /definitions/workflows/{name}` that agentry cannot run, with every problem (`Invalid definition: <file>:<JSON pointer>: <reason>; ...`), or whose `document.name` is not the path's.";
    InvalidEvent => BAD_REQUEST, "invalid_event", "An event whose data fails the event's schema or is over 64 KiB, or whose `eventId` or `key` is malformed (`Event validation failed: ...`).";
    AuthenticationRequired => UNAUTHORIZED, "authentication_required", "A protected route without a token (`Authentication required`).";
    InvalidToken => UNAUTHORIZED, "invalid_token", "A token that is malformed, badly signed, or for another audience or issuer (`Invalid token: ...`).";
    TokenExpired => UNAUTHORIZED, "token_expired", "An expired token (`Token expired`).";
    Forbidden => FORBIDDEN, "forbidden", "Strict mode: another user's execution, the logs without the admin role; a verified user without the admin role deploying or reading definitions (any mode); a cross-site browser request (`Forbidden: ...`).";
    ApprovalRequired => FORBIDDEN, "approval_required", "MCP: a direct call of a tool that needs a person's approval for these arguments (ask its agent: the run waits for the approval).";
    RouteNotFound => NOT_FOUND, "route_not_found", "No route has this path (`Route <METHOD> <path> not found`), or no such explorer file.";
    WorkflowNotFound => NOT_FOUND, "workflow_not_found", "An unknown workflow (`Workflow <id> not found`).";
    AgentNotFound => NOT_FOUND, "agent_not_found", "An unknown agent (`Agent <id> not found`).";
    ExecutionNotFound => NOT_FOUND, "execution_not_found", "An unknown execution, or one of another workflow (`Execution <id> of workflow <id> not found`, or `Execution <id> not found` by id alone).";
    QueueNotFound => NOT_FOUND, "queue_not_found", "An unknown queue (`Queue <name> not found`).";
    ScheduleNotFound => NOT_FOUND, "schedule_not_found", "An unknown schedule, or (strict mode) another user's (`Schedule <id> not found`).";
    RunNotFound => NOT_FOUND, "run_not_found", "An unknown durable run, or one of another agent (`Run <id> of agent <id> not found`).";
    ApprovalNotFound => NOT_FOUND, "approval_not_found", "An approval id that the run never asked for (`Approval <id> not found in run <id>`).";
    DefinitionNotFound => NOT_FOUND, "definition_not_found", "A definition (or a version of it) that was not deployed through the API (`Definition <name> version <v> not found`).";
    EventNotFound => NOT_FOUND, "event_not_found", "An event the workflow does not declare (or, sent by key, that no workflow declares).";
    ExecutionNotSuspended => NOT_FOUND, "execution_not_suspended", "Resume of an execution that is not suspended (`Execution <id> is not suspended (status: ...)`).";
    NoWorkingMemory => NOT_FOUND, "no_working_memory", "The working memory of an agent that declares none (`Agent <id> has no working memory`).";
    McpSessionNotFound => NOT_FOUND, "mcp_session_not_found", "MCP: an `Mcp-Session-Id` this server does not know, that ended, or that is another user's (the same answer for all three; initialize again).";
    MethodNotAllowed => METHOD_NOT_ALLOWED, "method_not_allowed", "A known path with a method it does not serve (header `Allow`).";
    NotAcceptable => NOT_ACCEPTABLE, "not_acceptable", "MCP: the request's `Accept` does not allow the answer's media types (`application/json`, `text/event-stream`).";
    RequestTimeout => REQUEST_TIMEOUT, "request_timeout", "The request's body came too slowly.";
    ApprovalNotPending => CONFLICT, "approval_not_pending", "An answer to a tool approval that is answered already (another answer won), expired, or whose run ended.";
    ExecutionEnded => CONFLICT, "execution_ended", "An event for an execution that completed, failed or was cancelled: no step will take it.";
    MailboxFull => CONFLICT, "mailbox_full", "An event for an execution whose mailbox already holds 100 events no step took.";
    MailboxTooLarge => PAYLOAD_TOO_LARGE, "mailbox_too_large", "An event for an execution whose mailbox (its events, taken or not) would hold more bytes than `AGENTRY_MAILBOX_MAX_BYTES` (1 MiB).";
    VersionUnavailable => CONFLICT, "version_unavailable", "A resume, event, retry or timer of an execution whose workflow version this server does not have (`... needs a server that has that version`): send it to a server that runs that version.";
    ExecutionExists => CONFLICT, "execution_exists", "`options.executionId` is taken by another workflow, input or owner.";
    ScheduleExists => CONFLICT, "schedule_exists", "A schedule with this id exists already (`Schedule <id> already exists`).";
    ScheduleLimit => CONFLICT, "schedule_limit", "The server keeps 1000 schedules already, or the caller keeps as many as one user may (`AGENTRY_MAX_SCHEDULES_PER_USER`, 100 by default; `You keep N schedules already ...`): delete one first.";
    DefinitionConflict => CONFLICT, "definition_conflict", "A deployed definition's version exists with another document (raise `document.version`: a version is never rewritten), or its name is a workflow compiled into the server or read from its definitions folder.";
    DefinitionInUse => CONFLICT, "definition_in_use", "A delete of a deployed definition's version that executions still run or wait on.";
    Conflict => CONFLICT, "conflict", "Too many concurrent changes of one execution; try again.";
    PayloadTooLarge => PAYLOAD_TOO_LARGE, "payload_too_large", "A body over the limit (1 MiB by default), or a working memory over the 16 KiB it may hold.";
    UnsupportedMediaType => UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", "A body that is not `application/json` (a definition's: nor `application/yaml`).";
    HostNotAllowed => MISDIRECTED_REQUEST, "host_not_allowed", "The request names a host this server does not answer for (its `Host`, or a trusted proxy's forwarded host): not in `AGENTRY_ALLOWED_HOSTS`, or, without it on a loopback address, not `localhost`, `127.0.0.1` or `[::1]` with the port. A guard against DNS rebinding; every route but the probes.";
    UnsatisfiableSchema => UNPROCESSABLE_ENTITY, "unsatisfiable_schema", "The model could not produce an object valid against the request's schema.";
    GuardrailTripped => UNPROCESSABLE_ENTITY, "guardrail_tripped", "A guardrail of the agent tripped on the request's input, the model's output or a tool call's arguments, and is named (`Guardrail <name> tripped on the <input|output|tool>: <reason>`); on a stream, an `error` event with this code. A durable run ends in `error` with it.";
    ToolFailed => UNPROCESSABLE_ENTITY, "tool_failed", "MCP: a tool called directly failed, with its own message (arguments it refused, or its work failed).";
    BudgetExceeded => TOO_MANY_REQUESTS, "budget_exceeded", "The agent's token budget is spent (`Budget exceeded: ...`): the run's own, or the caller's for the UTC day (header `Retry-After`: the seconds until it resets at midnight UTC).";
    TooManyEvents => TOO_MANY_REQUESTS, "too_many_events", "An event sent by key when the events kept are at a cap: per name and key (`AGENTRY_EVENTS_MAX_PER_KEY`, 100; `AGENTRY_EVENTS_MAX_BYTES_PER_KEY`, 1 MiB) or in all (`AGENTRY_EVENTS_MAX`, 10,000; `AGENTRY_EVENTS_MAX_BYTES`, 64 MiB); header `Retry-After`: older events leave the hour's retention.";
    ClientClosedRequest => BAD_REQUEST, "client_closed_request", "The client went away before the answer (logged; nobody reads it).";
    ExecutionFailed => INTERNAL_SERVER_ERROR, "execution_failed", "The execution ended in error (`Failed to execute workflow`; header `X-Execution-Id`; its state has the reason).";
    GenerationFailed => INTERNAL_SERVER_ERROR, "generation_failed", "The model or the server failed otherwise (`Failed to generate: ...`).";
    ModelRefused => BAD_GATEWAY, "model_refused", "The model provider refused the request (HTTP 400, 404, 422, ...), with its reason.";
    ModelUnauthorized => BAD_GATEWAY, "model_unauthorized", "The model provider refused agentry's credentials (HTTP 401 or 403); the provider is named, the key never echoed.";
    ModelUnavailable => BAD_GATEWAY, "model_unavailable", "The model provider is down or unreachable (HTTP 5xx, a failed connection).";
    ModelRateLimited => SERVICE_UNAVAILABLE, "model_rate_limited", "The model provider throttled the request (HTTP 429): try again later.";
    ModelTimedOut => GATEWAY_TIMEOUT, "model_timed_out", "The model provider stayed silent past the read time-out (60 s by default).";
    Internal => INTERNAL_SERVER_ERROR, "internal", "A failure of the server itself (logged with its cause).";
    ExecutionContinuesElsewhere => SERVICE_UNAVAILABLE, "execution_continues_elsewhere", "This server stopped (or lost) the execution mid-run: it continues on another; retry with the same executionId and input.";
    ServerShuttingDown => SERVICE_UNAVAILABLE, "server_shutting_down", "The server is draining before it stops (header `Retry-After`): send the request again, to another replica or after the restart.";
    DatabaseUnavailable => SERVICE_UNAVAILABLE, "database_unavailable", "The database did not answer in time (down, restarting, or every connection busy; header `Retry-After`): nothing was lost; try again.";
    McpSessionLimit => SERVICE_UNAVAILABLE, "mcp_session_limit", "MCP: the server holds as many sessions as it may (`AGENTRY_MCP_MAX_SESSIONS`; header `Retry-After`).";
}

/// The table as Markdown: `docs/ERRORS.md` and the `ErrorCode` schema of `/doc` show it.
pub fn markdown_table() -> String {
    let mut out = String::from("| code | status | when |\n|---|---|---|\n");
    for code in Code::ALL {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            code.as_str(),
            code.status(),
            code.when()
        ));
    }
    out
}

impl Code {
    /// The seconds a client should wait before it tries again (`Retry-After`), for the
    /// failures that pass. Every row is named (`scripts/check-layers.sh` refuses a `_` arm
    /// here): a new row says whether it passes.
    pub fn retry_after(self) -> Option<u32> {
        match self {
            Code::ServerShuttingDown | Code::DatabaseUnavailable | Code::McpSessionLimit => Some(2),
            Code::ExecutionContinuesElsewhere | Code::ModelRateLimited => Some(1),
            Code::TooManyEvents => Some(60),
            Code::InvalidRequest
            | Code::InvalidInput
            | Code::InvalidResumeData
            | Code::InvalidExecutionId
            | Code::UnknownStep
            | Code::InvalidSchedule
            | Code::InvalidBackfill
            | Code::NotSuspendable
            | Code::NotCancellable
            | Code::NotRetryable
            | Code::NotForkable
            | Code::InvalidEvent
            | Code::AuthenticationRequired
            | Code::InvalidToken
            | Code::TokenExpired
            | Code::Forbidden
            | Code::ApprovalRequired
            | Code::RouteNotFound
            | Code::WorkflowNotFound
            | Code::AgentNotFound
            | Code::ExecutionNotFound
            | Code::QueueNotFound
            | Code::ScheduleNotFound
            | Code::RunNotFound
            | Code::ApprovalNotFound
            | Code::EventNotFound
            | Code::InvalidDefinition
            | Code::DefinitionNotFound
            | Code::DefinitionConflict
            | Code::DefinitionInUse
            | Code::ExecutionNotSuspended
            | Code::NoWorkingMemory
            | Code::McpSessionNotFound
            | Code::MethodNotAllowed
            | Code::NotAcceptable
            | Code::RequestTimeout
            | Code::ApprovalNotPending
            | Code::ExecutionEnded
            | Code::MailboxFull
            | Code::MailboxTooLarge
            | Code::VersionUnavailable
            | Code::ExecutionExists
            | Code::ScheduleExists
            | Code::ScheduleLimit
            | Code::Conflict
            | Code::PayloadTooLarge
            | Code::UnsupportedMediaType
            | Code::HostNotAllowed
            | Code::UnsatisfiableSchema
            | Code::GuardrailTripped
            | Code::BudgetExceeded
            | Code::ToolFailed
            | Code::ClientClosedRequest
            | Code::ExecutionFailed
            | Code::GenerationFailed
            | Code::ModelRefused
            | Code::ModelUnauthorized
            | Code::ModelUnavailable
            | Code::ModelTimedOut
            | Code::Internal => None,
        }
    }
}

/// A use case's failure: a row of the table, the message for a person, and the execution it
/// concerns when the execution goes on (a client retries with its id; HTTP sends it as
/// `X-Execution-Id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppError {
    pub code: Code,
    pub message: String,
    pub execution_id: Option<String>,
    /// Seconds to wait before trying again, when this failure knows them (a budget's reset, a
    /// provider's `Retry-After`); else its row's.
    pub retry_after: Option<u64>,
}

impl AppError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            execution_id: None,
            retry_after: None,
        }
    }

    /// The seconds a client should wait before it tries again: this failure's own, else its
    /// row's.
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after
            .or_else(|| self.code.retry_after().map(u64::from))
    }

    /// A malformed or out-of-range request ([`Code::InvalidRequest`]).
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(Code::InvalidRequest, message)
    }

    /// A failure of the server itself ([`Code::Internal`]); log its cause first.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Code::Internal, message)
    }

    /// The same failure, naming the execution it concerns.
    pub fn about(mut self, execution_id: impl Into<String>) -> Self {
        self.execution_id = Some(execution_id.into());
        self
    }

    /// The HTTP status of its row.
    pub fn status(&self) -> u16 {
        self.code.status()
    }

    /// An engine failure; server-side ones (the store, internal) are logged with their cause
    /// and answered with `server_message`.
    pub fn engine(err: EngineError, server_message: &str) -> Self {
        use EngineError as E;
        let code = match &err {
            E::WorkflowNotFound(_) => Code::WorkflowNotFound,
            E::ExecutionNotFound { .. } | E::UnknownExecution(_) => Code::ExecutionNotFound,
            E::NotSuspended { .. } => Code::ExecutionNotSuspended,
            E::InvalidInput(_) => Code::InvalidInput,
            E::InvalidExecutionId(_) => Code::InvalidExecutionId,
            E::InvalidOptions(_) => Code::InvalidRequest,
            E::NotSuspendable { .. } => Code::NotSuspendable,
            E::NotCancellable { .. } => Code::NotCancellable,
            E::InvalidResumeData(_) => Code::InvalidResumeData,
            E::UnknownStep { .. } => Code::UnknownStep,
            E::ExecutionExists(_) => Code::ExecutionExists,
            E::NotRetryable { .. } => Code::NotRetryable,
            E::NotForkable { .. } => Code::NotForkable,
            E::UnknownEvent { .. } => Code::EventNotFound,
            E::InvalidEventData(_) => Code::InvalidEvent,
            E::EventAfterEnd { .. } => Code::ExecutionEnded,
            E::MailboxFull(_) => Code::MailboxFull,
            E::MailboxTooLarge { .. } => Code::MailboxTooLarge,
            E::TooManyEvents(_) => Code::TooManyEvents,
            E::VersionUnavailable { .. } => Code::VersionUnavailable,
            // Only inside a run (a cancel while a step ran, a timer a resume beat), which
            // answers with the record instead.
            E::Contention(_) | E::Cancelled(_) | E::NotDue(_) => Code::Conflict,
            // The execution is not lost: another process (or this one, restarted) continues it.
            E::LeaseLost(_) | E::HandedOver(_) => Code::ExecutionContinuesElsewhere,
            E::ShuttingDown => Code::ServerShuttingDown,
            E::Store(StoreError::Unavailable(cause)) => {
                tracing::warn!(error = %cause, "{server_message}: the database is unavailable");
                return Self::new(Code::DatabaseUnavailable, DATABASE_UNAVAILABLE);
            }
            E::Store(StoreError::Invalid(_)) => Code::InvalidRequest,
            E::DuplicateWorkflow(_) | E::Store(_) | E::Internal(_) | E::Unchanged => {
                tracing::error!(error = %err, "{server_message}");
                return Self::internal(server_message);
            }
        };
        Self::new(code, err.to_string())
    }

    /// A schedule's failure: its own rows, or the engine's (a trigger's or a backfill's start)
    /// and the store's.
    pub fn schedule(err: ScheduleError) -> Self {
        const FAILED: &str = "Failed to handle the schedule";
        let code = match &err {
            ScheduleError::NotFound(_) => Code::ScheduleNotFound,
            ScheduleError::Exists(_) => Code::ScheduleExists,
            ScheduleError::Invalid { .. } => Code::InvalidSchedule,
            ScheduleError::InvalidBackfill { .. } => Code::InvalidBackfill,
            ScheduleError::Limit | ScheduleError::UserLimit(_) => Code::ScheduleLimit,
            ScheduleError::Contention(_) => Code::Conflict,
            ScheduleError::Engine(_) | ScheduleError::Store(_) => {
                return match err {
                    ScheduleError::Engine(e) => Self::engine(e, FAILED),
                    ScheduleError::Store(e) => Self::engine(e.into(), FAILED),
                    _ => Self::internal(FAILED),
                };
            }
        };
        Self::new(code, err.to_string())
    }

    /// An agent failure ([`agent_error_code`]), logged as it deserves.
    pub fn agent(err: AgentError) -> Self {
        let code = agent_error_code(&err);
        let wait = match &err {
            AgentError::Model(e) => e.retry_after,
            AgentError::BudgetExceeded { retry_after, .. } => *retry_after,
            _ => None,
        };
        let mut out = Self::agent_failure(code, &err);
        // Whole seconds, rounded up: a client that waits them finds the reset passed.
        out.retry_after = wait.map(|d| d.as_secs() + u64::from(d.subsec_nanos() > 0));
        out
    }

    fn agent_failure(code: Code, err: &AgentError) -> Self {
        match code {
            Code::AgentNotFound | Code::InvalidRequest | Code::ClientClosedRequest => {
                Self::new(code, err.to_string())
            }
            Code::DatabaseUnavailable => {
                tracing::warn!(error = %err, "conversation memory unavailable");
                Self::new(code, DATABASE_UNAVAILABLE)
            }
            Code::UnsatisfiableSchema => {
                tracing::warn!(error = %err, "no object valid against the schema");
                Self::new(code, err.to_string())
            }
            Code::GuardrailTripped | Code::BudgetExceeded => {
                tracing::info!(error = %err, code = code.as_str(), "generation refused");
                Self::new(code, err.to_string())
            }
            _ => {
                tracing::error!(error = %err, code = code.as_str(), "generation failed");
                Self::new(code, format!("Failed to generate: {err}"))
            }
        }
    }

    /// An authentication failure: the exact 401 messages of the spec.
    pub fn auth(err: &AuthError) -> Self {
        let code = match err {
            AuthError::Missing => Code::AuthenticationRequired,
            AuthError::Invalid(_) => Code::InvalidToken,
            AuthError::Expired => Code::TokenExpired,
        };
        Self::new(code, err.to_string())
    }
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for AppError {}

/// The row of each agent error: an object the model could not make valid against the request's
/// schema is the client's (its schema may be unsatisfiable); a provider's failure keeps its kind
/// (throttled, unauthorized, timed out, refused, down); anything else the model or the server
/// failed at is a generation failure with the cause named.
pub fn agent_error_code(err: &AgentError) -> Code {
    match err {
        AgentError::NotFound(_) => Code::AgentNotFound,
        AgentError::InvalidRequest(_) => Code::InvalidRequest,
        AgentError::InvalidObject(_) => Code::UnsatisfiableSchema,
        AgentError::Cancelled => Code::ClientClosedRequest,
        AgentError::Model(e) => match e.kind {
            ModelErrorKind::RateLimited => Code::ModelRateLimited,
            ModelErrorKind::Unauthorized => Code::ModelUnauthorized,
            ModelErrorKind::TimedOut => Code::ModelTimedOut,
            ModelErrorKind::Refused => Code::ModelRefused,
            ModelErrorKind::Unavailable => Code::ModelUnavailable,
            ModelErrorKind::Failed => Code::GenerationFailed,
        },
        AgentError::MemoryUnavailable(_) => Code::DatabaseUnavailable,
        AgentError::GuardrailTripped(_) => Code::GuardrailTripped,
        AgentError::BudgetExceeded { .. } => Code::BudgetExceeded,
        AgentError::Duplicate(_)
        | AgentError::InvalidId(_)
        | AgentError::Memory(_)
        | AgentError::Run(_) => Code::GenerationFailed,
    }
}

/// What `database_unavailable` says.
pub const DATABASE_UNAVAILABLE: &str =
    "The database is unavailable (down, restarting or busy): try again shortly";

#[cfg(test)]
mod table_tests {
    use super::*;

    #[test]
    fn codes_are_unique_snake_case_and_errors_have_error_statuses() {
        let mut seen = std::collections::HashSet::new();
        for code in Code::ALL {
            let name = code.as_str();
            assert!(seen.insert(name), "{name} twice");
            assert!(
                name.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "{name} is not snake_case"
            );
            assert!(code.status() >= 400, "{name}");
            assert_eq!(serde_json::to_value(code).unwrap(), serde_json::json!(name));
        }
    }

    /// `docs/ERRORS.md` shows exactly this table (paste `markdown_table()`'s output there when
    /// a row changes).
    #[test]
    fn the_published_table_is_this_one() {
        let doc = include_str!("../../../docs/ERRORS.md");
        let table = markdown_table();
        assert!(
            doc.contains(&table),
            "docs/ERRORS.md is out of date; its table should be:\n{table}"
        );
    }
}
