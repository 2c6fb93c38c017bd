//! Failures as JSON-RPC errors: the A2A code a client maps to its exception, and in `data` the
//! `google.rpc.ErrorInfo` the SDKs read, whose `metadata.code` is the row of agentry's error
//! table (the same `code` as every other route's envelope).

use agentry_app::{AppError, Code};
use serde_json::{Value, json};

use crate::wire::RpcError;

/// A JSON-RPC error code of A2A (JSON-RPC's own, then A2A's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RpcCode {
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    InternalError,
    TaskNotFound,
    TaskNotCancelable,
    PushNotificationNotSupported,
    UnsupportedOperation,
    ContentTypeNotSupported,
    VersionNotSupported,
}

impl RpcCode {
    /// Its number.
    pub const fn code(self) -> i64 {
        match self {
            RpcCode::ParseError => -32700,
            RpcCode::InvalidRequest => -32600,
            RpcCode::MethodNotFound => -32601,
            RpcCode::InvalidParams => -32602,
            RpcCode::InternalError => -32603,
            RpcCode::TaskNotFound => -32001,
            RpcCode::TaskNotCancelable => -32002,
            RpcCode::PushNotificationNotSupported => -32003,
            RpcCode::UnsupportedOperation => -32004,
            RpcCode::ContentTypeNotSupported => -32005,
            RpcCode::VersionNotSupported => -32009,
        }
    }

    /// Its `reason` (the `ErrorInfo`'s).
    pub const fn reason(self) -> &'static str {
        match self {
            RpcCode::ParseError => "PARSE_ERROR",
            RpcCode::InvalidRequest => "INVALID_REQUEST",
            RpcCode::MethodNotFound => "METHOD_NOT_FOUND",
            RpcCode::InvalidParams => "INVALID_PARAMS",
            RpcCode::InternalError => "INTERNAL_ERROR",
            RpcCode::TaskNotFound => "TASK_NOT_FOUND",
            RpcCode::TaskNotCancelable => "TASK_NOT_CANCELABLE",
            RpcCode::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            RpcCode::UnsupportedOperation => "UNSUPPORTED_OPERATION",
            RpcCode::ContentTypeNotSupported => "CONTENT_TYPE_NOT_SUPPORTED",
            RpcCode::VersionNotSupported => "VERSION_NOT_SUPPORTED",
        }
    }
}

/// An error of A2A `code` with `message`, naming agentry's `table_code`.
pub fn rpc_error(code: RpcCode, message: impl Into<String>, table_code: Code) -> RpcError {
    RpcError {
        code: code.code(),
        message: message.into(),
        data: vec![json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": code.reason(),
            "domain": "a2a-protocol.org",
            "metadata": {"code": table_code.as_str()},
        })],
    }
}

/// A request the protocol refuses before any use case runs.
pub fn invalid_params(message: impl Into<String>) -> RpcError {
    rpc_error(RpcCode::InvalidParams, message, Code::InvalidRequest)
}

/// The A2A code of each row of the error table: a run that is not found (or that the caller
/// may not see) is a task not found; the request's own faults (the rows answered 400) are
/// invalid params; an approval that is not pending (or not found) is an unsupported
/// operation; the rest is an internal error. Every row is named: a new row does not compile
/// until it has its A2A code (`scripts/check-layers.sh` refuses a `_` arm here).
pub fn rpc_code(code: Code) -> RpcCode {
    match code {
        Code::RunNotFound | Code::ExecutionNotFound | Code::Forbidden => RpcCode::TaskNotFound,
        Code::NotCancellable => RpcCode::TaskNotCancelable,
        Code::ApprovalNotPending | Code::ApprovalNotFound => RpcCode::UnsupportedOperation,
        Code::InvalidRequest
        | Code::InvalidInput
        | Code::InvalidResumeData
        | Code::InvalidExecutionId
        | Code::UnknownStep
        | Code::InvalidSchedule
        | Code::InvalidBackfill
        | Code::NotSuspendable
        | Code::NotRetryable
        | Code::NotForkable
        | Code::InvalidEvent
        | Code::InvalidDefinition
        | Code::ClientClosedRequest => RpcCode::InvalidParams,
        Code::AuthenticationRequired
        | Code::InvalidToken
        | Code::TokenExpired
        | Code::ApprovalRequired
        | Code::RouteNotFound
        | Code::WorkflowNotFound
        | Code::AgentNotFound
        | Code::QueueNotFound
        | Code::ScheduleNotFound
        | Code::EventNotFound
        | Code::DefinitionNotFound
        | Code::DefinitionConflict
        | Code::DefinitionInUse
        | Code::ExecutionNotSuspended
        | Code::NoWorkingMemory
        | Code::McpSessionNotFound
        | Code::MethodNotAllowed
        | Code::NotAcceptable
        | Code::RequestTimeout
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
        | Code::ToolFailed
        | Code::TooManyEvents
        | Code::BudgetExceeded
        | Code::GuardrailTripped
        | Code::ExecutionFailed
        | Code::GenerationFailed
        | Code::ModelRefused
        | Code::ModelUnauthorized
        | Code::ModelUnavailable
        | Code::ModelRateLimited
        | Code::ModelTimedOut
        | Code::Internal
        | Code::ExecutionContinuesElsewhere
        | Code::ServerShuttingDown
        | Code::DatabaseUnavailable
        | Code::McpSessionLimit => RpcCode::InternalError,
    }
}

/// A use case's failure: its row of the table, under the A2A code that means the same. A run
/// the caller may not see is answered as not found, like one that does not exist.
pub fn from_app(e: AppError) -> RpcError {
    let code = rpc_code(e.code);
    if e.code == Code::Forbidden {
        return rpc_error(code, "Task not found", Code::RunNotFound);
    }
    rpc_error(code, e.message, e.code)
}

/// The JSON of an error (for a stream's last event).
pub fn to_value(e: &RpcError) -> Value {
    serde_json::to_value(e).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The A2A code of every row, as the mapping had it when it was a rule on the status.
    #[test]
    fn every_row_has_the_a2a_code_of_its_kind() {
        for &code in Code::ALL {
            let expected = match code {
                Code::RunNotFound | Code::ExecutionNotFound | Code::Forbidden => {
                    RpcCode::TaskNotFound
                }
                Code::NotCancellable => RpcCode::TaskNotCancelable,
                Code::ApprovalNotPending | Code::ApprovalNotFound => RpcCode::UnsupportedOperation,
                c if c.status() == 400 => RpcCode::InvalidParams,
                _ => RpcCode::InternalError,
            };
            assert_eq!(rpc_code(code), expected, "{code:?}");
        }
    }

    #[test]
    fn a_run_the_caller_may_not_see_is_not_found() {
        let e = from_app(AppError::new(Code::Forbidden, "Forbidden: another user's"));
        assert_eq!(e.code, -32001);
        assert_eq!(e.message, "Task not found");
        assert_eq!(e.data[0]["metadata"]["code"], "run_not_found");
        assert_eq!(e.data[0]["reason"], "TASK_NOT_FOUND");
        let e = from_app(AppError::new(Code::ApprovalNotPending, "answered"));
        assert_eq!((e.code, e.message.as_str()), (-32004, "answered"));
        assert_eq!(e.data[0]["metadata"]["code"], "approval_not_pending");
        assert_eq!(e.data[0]["reason"], "UNSUPPORTED_OPERATION");
    }
}
