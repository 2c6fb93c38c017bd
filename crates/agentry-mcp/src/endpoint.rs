//! `/mcp` as one service ([`McpService`]): rmcp's Streamable HTTP service over [`AgentryMcp`]
//! and [`McpSessions`], behind the checks rmcp does not make:
//! - a request naming a session must come from the session's owner, else it is answered as
//!   for an unknown session ([`McpRefusal::SessionNotFound`]);
//! - a POST's JSON body must be one JSON-RPC message: anything else (malformed JSON, an empty
//!   body, `null`, a batch) gets the JSON-RPC error JSON-RPC 2.0 prescribes (parse error
//!   -32700, invalid request -32600; MCP has no batches since 2025-06-18), never rmcp's 415;
//! - an `initialize` must be small ([`INITIALIZE_BODY_LIMIT`], [`INITIALIZE_VALUE_LIMIT`]), for a
//!   session keeps its parameters for its whole life, and must find room among the sessions
//!   ([`McpSessions::admit`]).
//!
//! The HTTP layer in front turns a refusal into its answer and passes rmcp's through.

use std::convert::Infallible;
use std::sync::Arc;

use agentry_app::{App, limits};
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ErrorCode};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};

use crate::sessions::{McpSessions, Owner, SESSION_GONE, SessionLimitReached, SessionLimits};
use crate::{AgentryMcp, McpCaller};

/// The header that names a session.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// The largest `initialize` body, in bytes ([`limits::MCP_INITIALIZE_BYTES`]).
pub const INITIALIZE_BODY_LIMIT: usize = limits::MCP_INITIALIZE_BYTES;

/// The most JSON values in an `initialize`'s `params` ([`limits::MCP_INITIALIZE_VALUES`]).
pub const INITIALIZE_VALUE_LIMIT: usize = limits::MCP_INITIALIZE_VALUES;

/// rmcp's answer.
pub type McpResponse = http::Response<BoxBody<Bytes, Infallible>>;

/// Why `/mcp` refused a request before rmcp saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum McpRefusal {
    /// The body is not one JSON-RPC message: the JSON-RPC error to answer (with HTTP 400).
    NotJsonRpc(Value),
    /// The session named is unknown, ended, or another caller's (the same answer for all three).
    SessionNotFound,
    /// Every session is taken.
    SessionLimit(SessionLimitReached),
    /// An `initialize` over [`INITIALIZE_BODY_LIMIT`] or [`INITIALIZE_VALUE_LIMIT`]: why.
    InitializeTooLarge(String),
}

/// `/mcp`: rmcp's Streamable HTTP service and its sessions (module docs).
pub struct McpService {
    http: StreamableHttpService<AgentryMcp, McpSessions>,
    sessions: Arc<McpSessions>,
}

/// The MCP service of `app`. Host and origin checks are left to the HTTP layer
/// in front (its cross-site guard and authentication), which serves it on any address; request
/// bodies are bounded by `max_body` bytes (an `initialize` by [`INITIALIZE_BODY_LIMIT`]), the
/// sessions by `limits`.
pub fn service(app: App, max_body: usize, limits: SessionLimits) -> McpService {
    let server = AgentryMcp::new(app);
    let sessions = Arc::new(McpSessions::new(limits));
    let http = StreamableHttpService::new(
        move || Ok(server.clone()),
        sessions.clone(),
        StreamableHttpServerConfig::default()
            .disable_allowed_hosts()
            .with_max_request_body_bytes(max_body),
    );
    McpService { http, sessions }
}

impl McpService {
    /// The sessions and who owns them.
    pub fn sessions(&self) -> &McpSessions {
        &self.sessions
    }

    /// Serves `request` for `caller` (as the HTTP layer verified it): rmcp's answer, or why the
    /// request was refused before rmcp saw it.
    pub async fn handle(
        &self,
        mut request: http::Request<Bytes>,
        caller: McpCaller,
    ) -> Result<McpResponse, McpRefusal> {
        let owner = Owner::of(&caller);
        let session = request.headers().get(SESSION_HEADER);
        if let Some(id) = session {
            let id = id.to_str().map_err(|_| McpRefusal::SessionNotFound)?;
            if !self.sessions.claim(id, &owner) {
                return Err(McpRefusal::SessionNotFound);
            }
        }
        let mut admission = None;
        if request.method() == http::Method::POST && is_json(request.headers()) {
            let body = request.body();
            let message = read_message(body)?;
            if session.is_none() && is_initialize(&message.typed) {
                check_initialize(body.len(), message.params_values)?;
                admission = Some(
                    self.sessions
                        .admit(&owner)
                        .await
                        .map_err(McpRefusal::SessionLimit)?,
                );
            }
        }
        request.extensions_mut().insert(caller);
        let response = self.http.handle(request.map(Full::new)).await;
        // The new session (if any) is in the book by now: its held place is given back.
        drop(admission);
        if response.status() != http::StatusCode::INTERNAL_SERVER_ERROR {
            return Ok(response);
        }
        // A session that ended between the owner's check and rmcp's use of it (evicted, idle,
        // deleted) is an unknown session, not a failure of the server.
        let (parts, body) = response.into_parts();
        let text = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        if text.ends_with(SESSION_GONE.as_bytes()) {
            return Err(McpRefusal::SessionNotFound);
        }
        Ok(http::Response::from_parts(parts, Full::new(text).boxed()))
    }
}

/// Whether the request says its body is JSON (rmcp answers 415 to anything else).
fn is_json(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .eq_ignore_ascii_case("application/json")
        })
}

fn is_initialize(message: &ClientJsonRpcMessage) -> bool {
    matches!(message, ClientJsonRpcMessage::Request(r)
        if matches!(r.request, ClientRequest::InitializeRequest(_)))
}

/// A body read as one JSON-RPC message.
struct Message {
    typed: ClientJsonRpcMessage,
    /// How many JSON values its `params` hold (counted only for an `initialize`).
    params_values: usize,
}

/// The JSON-RPC 2.0 error answer with `code` and `message` (no id: none could be read).
pub fn jsonrpc_error(code: ErrorCode, message: impl Into<String>) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": code.0, "message": message.into()},
    })
}

/// `body` as one JSON-RPC message of a client, or the JSON-RPC error that refuses it.
fn read_message(body: &[u8]) -> Result<Message, McpRefusal> {
    let refuse = |code, message: String| McpRefusal::NotJsonRpc(jsonrpc_error(code, message));
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        let why = if body.iter().all(u8::is_ascii_whitespace) {
            "the body is empty".to_owned()
        } else {
            e.to_string()
        };
        refuse(ErrorCode::PARSE_ERROR, format!("Parse error: {why}"))
    })?;
    match &value {
        Value::Object(_) => {}
        Value::Array(_) => {
            return Err(refuse(
                ErrorCode::INVALID_REQUEST,
                "Invalid Request: batches are not supported (MCP has none since 2025-06-18); \
                 send one JSON-RPC message per request"
                    .into(),
            ));
        }
        _ => {
            return Err(refuse(
                ErrorCode::INVALID_REQUEST,
                "Invalid Request: a JSON-RPC message is a JSON object".into(),
            ));
        }
    }
    let params_values = if value.get("method").and_then(Value::as_str) == Some("initialize") {
        value.get("params").map_or(0, count_values)
    } else {
        0
    };
    let typed = serde_json::from_value(value).map_err(|e| {
        refuse(
            ErrorCode::INVALID_REQUEST,
            format!("Invalid Request: not a JSON-RPC 2.0 message of an MCP client: {e}"),
        )
    })?;
    Ok(Message {
        typed,
        params_values,
    })
}

/// How many JSON values `v` holds, itself included (object keys not counted apart).
fn count_values(v: &Value) -> usize {
    let mut count = 0;
    let mut todo = vec![v];
    while let Some(v) = todo.pop() {
        count += 1;
        match v {
            Value::Array(a) => todo.extend(a),
            Value::Object(o) => todo.extend(o.values()),
            _ => {}
        }
    }
    count
}

fn check_initialize(bytes: usize, values: usize) -> Result<(), McpRefusal> {
    if bytes > INITIALIZE_BODY_LIMIT {
        return Err(McpRefusal::InitializeTooLarge(format!(
            "An MCP initialize request is {bytes} bytes, over the limit of \
             {INITIALIZE_BODY_LIMIT} bytes"
        )));
    }
    if values > INITIALIZE_VALUE_LIMIT {
        return Err(McpRefusal::InitializeTooLarge(format!(
            "An MCP initialize request's params hold {values} JSON values, over the limit of \
             {INITIALIZE_VALUE_LIMIT}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(body: &str) -> i64 {
        match read_message(body.as_bytes()) {
            Err(McpRefusal::NotJsonRpc(v)) => {
                assert_eq!(v["jsonrpc"], "2.0");
                assert!(v["id"].is_null(), "{v}");
                v["error"]["code"].as_i64().unwrap()
            }
            Err(other) => panic!("{other:?}"),
            Ok(_) => 0,
        }
    }

    #[test]
    fn what_is_not_one_json_rpc_message_gets_its_json_rpc_error() {
        assert_eq!(code("{"), -32700);
        assert_eq!(code(""), -32700);
        assert_eq!(code("  \n"), -32700);
        assert_eq!(code("\u{feff}{}"), -32700);
        assert_eq!(code("null"), -32600);
        assert_eq!(code("42"), -32600);
        assert_eq!(code("[]"), -32600);
        assert_eq!(
            code(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#),
            -32600
        );
        assert_eq!(code("{}"), -32600);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#), -32600);
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(code(&deep), -32700, "too deep to read");
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), 0);
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            0
        );
    }

    #[test]
    fn an_initialize_is_counted() {
        let m = read_message(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"x","version":"1"}}}"#,
        )
        .unwrap();
        assert!(is_initialize(&m.typed));
        assert_eq!(m.params_values, 8);
        assert!(check_initialize(INITIALIZE_BODY_LIMIT, INITIALIZE_VALUE_LIMIT).is_ok());
        assert!(check_initialize(INITIALIZE_BODY_LIMIT + 1, 1).is_err());
        assert!(check_initialize(1, INITIALIZE_VALUE_LIMIT + 1).is_err());
    }
}
