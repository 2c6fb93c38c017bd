//! The messages of the WebSockets (`/ws/logs`, `/ws/executions/{executionId}`): JSON text
//! messages, each with a `type`. (OpenAPI has no way to describe a WebSocket's messages: the
//! routes' descriptions in `/doc` list them.)

use serde::Serialize;

use super::workflows::ExecutionStateView;
use crate::logs::LogRecord;

/// A message the server sends on a WebSocket.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum SocketMessage<'a> {
    /// `/ws/logs`: a log record.
    Log(&'a LogRecord),
    /// `/ws/logs`: the client was too slow and missed this many records.
    Lagged { missed: u64 },
    /// `/ws/executions/...`: the execution's state (the `data` of the state endpoint), first.
    ExecutionState(Box<ExecutionStateView>),
    /// `/ws/executions/...`: why the socket closes (an unknown execution, a store failure).
    Error { error: String },
}

impl SocketMessage<'_> {
    /// The message's text.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a socket message serializes")
    }
}
