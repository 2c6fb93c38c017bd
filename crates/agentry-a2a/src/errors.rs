//! Failures as JSON-RPC errors: the A2A code a client maps to its exception, and in `data` the
//! `google.rpc.ErrorInfo` the SDKs read, whose `metadata.code` is the row of agentry's error
//! table (the same `code` as every other route's envelope).

use agentry_app::{AppError, Code};
use serde_json::{Value, json};

use crate::wire::RpcError;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
pub const TASK_NOT_FOUND: i64 = -32001;
pub const TASK_NOT_CANCELABLE: i64 = -32002;
pub const PUSH_NOTIFICATION_NOT_SUPPORTED: i64 = -32003;
pub const UNSUPPORTED_OPERATION: i64 = -32004;
pub const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
pub const VERSION_NOT_SUPPORTED: i64 = -32009;

/// The `reason` of an A2A code.
fn reason(code: i64) -> &'static str {
    match code {
        PARSE_ERROR => "PARSE_ERROR",
        INVALID_REQUEST => "INVALID_REQUEST",
        METHOD_NOT_FOUND => "METHOD_NOT_FOUND",
        INVALID_PARAMS => "INVALID_PARAMS",
        TASK_NOT_FOUND => "TASK_NOT_FOUND",
        TASK_NOT_CANCELABLE => "TASK_NOT_CANCELABLE",
        PUSH_NOTIFICATION_NOT_SUPPORTED => "PUSH_NOTIFICATION_NOT_SUPPORTED",
        UNSUPPORTED_OPERATION => "UNSUPPORTED_OPERATION",
        CONTENT_TYPE_NOT_SUPPORTED => "CONTENT_TYPE_NOT_SUPPORTED",
        VERSION_NOT_SUPPORTED => "VERSION_NOT_SUPPORTED",
        _ => "INTERNAL_ERROR",
    }
}

/// An error of A2A `code` with `message`, naming agentry's `table_code`.
pub fn rpc_error(code: i64, message: impl Into<String>, table_code: Code) -> RpcError {
    RpcError {
        code,
        message: message.into(),
        data: vec![json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": reason(code),
            "domain": "a2a-protocol.org",
            "metadata": {"code": table_code.as_str()},
        })],
    }
}

/// A request the protocol refuses before any use case runs.
pub fn invalid_params(message: impl Into<String>) -> RpcError {
    rpc_error(INVALID_PARAMS, message, Code::InvalidRequest)
}

/// A use case's failure: its row of the table, under the A2A code that means the same. A run
/// the caller may not see is answered as not found, like one that does not exist.
pub fn from_app(e: AppError) -> RpcError {
    let code = match e.code {
        Code::RunNotFound | Code::ExecutionNotFound | Code::Forbidden => TASK_NOT_FOUND,
        Code::NotCancellable => TASK_NOT_CANCELABLE,
        Code::ApprovalNotPending | Code::ApprovalNotFound => UNSUPPORTED_OPERATION,
        c if c.status() == 400 => INVALID_PARAMS,
        _ => INTERNAL_ERROR,
    };
    let table_code = match e.code {
        // Not found, as a run of another's is.
        Code::Forbidden => Code::RunNotFound,
        c => c,
    };
    let message = if table_code == e.code {
        e.message
    } else {
        "Task not found".to_owned()
    };
    rpc_error(code, message, table_code)
}

/// The JSON of an error (for a stream's last event).
pub fn to_value(e: &RpcError) -> Value {
    serde_json::to_value(e).unwrap_or(Value::Null)
}
