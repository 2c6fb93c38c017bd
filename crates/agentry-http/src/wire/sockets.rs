//! The messages of the WebSockets (`/ws/logs`, `/ws/executions/{executionId}`): JSON text
//! messages, each with a `type`. (OpenAPI has no way to describe a WebSocket's messages: the
//! routes' descriptions in `/doc` list them.)

use agentry_logs::LogRecord;
use serde::Serialize;

use super::workflows::ExecutionStateView;

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

#[cfg(test)]
mod tests {
    use agentry_logs::LogLevel;
    use serde_json::Value;

    use super::*;

    #[test]
    fn a_log_message_is_its_type_then_the_record() {
        let mut r = LogRecord::now(LogLevel::Warn, "t", "step 3 done");
        r.execution_id = Some("e-1".into());
        let v: Value = serde_json::from_str(&SocketMessage::Log(&r).to_json()).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "type",
                "timestamp",
                "level",
                "target",
                "message",
                "fields",
                "agentId",
                "workflowId",
                "executionId"
            ]
        );
        assert_eq!(v["type"], "log");
        assert_eq!(v["level"], "warn");
        assert_eq!(v["executionId"], "e-1");
        let ts = v["timestamp"].as_str().unwrap();
        assert!(
            ts.ends_with('Z') && ts.len() == "2026-01-31T12:00:00.000Z".len(),
            "{ts}"
        );
    }
}
