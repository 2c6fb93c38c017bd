//! `call: mcp`: one method of an MCP server, in a session of its own: `initialize` (with
//! `protocolVersion`, [`DEFAULT_PROTOCOL_VERSION`] unless given, and `client` as `clientInfo`,
//! agentry's name and version unless given), `notifications/initialized`, then the method with
//! `parameters`; the output is the method's JSON-RPC result. A `tools/call` result with
//! `isError: true` is the DSL's `runtime` error, the tool's text in `detail`. The whole exchange
//! takes at most `timeout` ([`DEFAULT_TIMEOUT`] unless given), else the DSL's `timeout` error.
//!
//! **Streamable HTTP** (`transport.http`): each message is a POST to the endpoint (with
//! `transport.http.headers` and the endpoint's authentication), through the outbound client; an
//! answer is JSON or a stream of server-sent events, read until the response to the request.
//! The `Mcp-Session-Id` the server gives with `initialize` is sent with every later request, as
//! is `MCP-Protocol-Version` (the version the server chose); the session is ended with a
//! `DELETE` at the end (best effort, [`END_TIMEOUT`]).
//!
//! **stdio** (`transport.stdio`): the command runs with its `arguments`, in an environment of
//! only [`PASSED_ENV`] (those of the server's own variables that are set) and `environment`
//! (never the server's secrets), and is killed at the end. Messages are JSON lines on its stdin
//! and stdout (at most [`MAX_RESPONSE_BYTES`] read, [`super::MAX_MESSAGES`] messages an
//! answer); a `ping` it sends is answered, any other request refused (`-32601`); what it
//! writes on stderr is quoted (its first [`STDERR_QUOTED`] bytes) when it ends without an
//! answer. Only when the operator allows commands ([`Outbound::with_stdio`]), else the DSL's
//! `authorization` error (403). `transport.options` is not read.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::{
    MAX_DETAIL, MAX_MESSAGES, Post, answers, check_endpoint, check_method, check_strings, clip,
    endpoint, parameters_object, rpc_failure, rpc_request, scalar,
};
use crate::error::{DslError, ErrorType};
use crate::model::parse_duration;
use crate::outbound::{Credentials, MAX_RESPONSE_BYTES, Outbound, Request};

/// The MCP version asked for unless `protocolVersion` says otherwise (the DSL's default).
pub const DEFAULT_PROTOCOL_VERSION: &str = "2025-06-18";
/// How long a call may take unless `timeout` says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the `DELETE` that ends an HTTP session may take.
pub const END_TIMEOUT: Duration = Duration::from_secs(5);
/// The server's environment variables a stdio command gets (when set).
pub const PASSED_ENV: [&str; 7] = ["PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ"];
/// How much of a command's stderr an error quotes.
pub const STDERR_QUOTED: usize = 2_000;

/// The methods the DSL names.
const METHODS: [&str; 7] = [
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
];

/// The id of `initialize`, and of the call.
const INITIALIZE_ID: u64 = 1;
const CALL_ID: u64 = 2;

/// Agentry's rules for an MCP call's `with`.
pub(super) fn check(with: &Map<String, Value>, problems: &mut Vec<(String, String)>) {
    check_method(with, &METHODS, problems);
    if with.get("protocolVersion").is_some_and(|v| !v.is_string()) {
        problems.push(("/protocolVersion".into(), "must be a string".into()));
    }
    if let Some(t) = with.get("timeout") {
        match parse_duration(t) {
            Ok(d) if d.is_zero() => {
                problems.push(("/timeout".into(), "must be more than 0".into()))
            }
            Ok(_) => {}
            Err(why) => problems.push(("/timeout".into(), why)),
        }
    }
    if let Some(client) = with.get("client") {
        let ok = ["name", "version"]
            .iter()
            .all(|k| client.get(k).is_some_and(Value::is_string));
        if !ok {
            problems.push((
                "/client".into(),
                "`name` and `version` (strings) are required".into(),
            ));
        }
    }
    let Some(transport) = with.get("transport").and_then(Value::as_object) else {
        problems.push((
            "/transport".into(),
            "`transport` (`http` or `stdio`) is required".into(),
        ));
        return;
    };
    match (transport.get("http"), transport.get("stdio")) {
        (Some(http), None) => {
            check_endpoint(http.get("endpoint"), "/transport/http/endpoint", problems);
            check_strings(http.get("headers"), "/transport/http/headers", problems);
        }
        (None, Some(stdio)) => {
            if !stdio.get("command").is_some_and(Value::is_string) {
                problems.push((
                    "/transport/stdio/command".into(),
                    "`command` (a string) is required".into(),
                ));
            }
            let arguments_ok = match stdio.get("arguments") {
                None => true,
                Some(Value::Array(a)) => a.iter().all(Value::is_string),
                Some(_) => false,
            };
            if !arguments_ok {
                problems.push((
                    "/transport/stdio/arguments".into(),
                    "must be an array of strings".into(),
                ));
            }
            check_strings(
                stdio.get("environment"),
                "/transport/stdio/environment",
                problems,
            );
        }
        _ => problems.push((
            "/transport".into(),
            "exactly one of `http` and `stdio` is required".into(),
        )),
    }
}

/// What every transport sends: the method, its params, `initialize`'s params.
struct Exchange {
    method: String,
    params: Option<Value>,
    initialize: Value,
}

impl Outbound {
    /// Runs an MCP call (`with` rendered): the JSON-RPC result.
    pub(super) async fn mcp(
        &self,
        with: &Map<String, Value>,
        parameters: Value,
        idempotency_key: &str,
    ) -> Result<Value, DslError> {
        let method = with
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let params = parameters_object(parameters, "an MCP")?;
        let timeout = match with.get("timeout") {
            Some(t) => parse_duration(t).map_err(DslError::validation)?,
            None => DEFAULT_TIMEOUT,
        };
        let client = match with.get("client") {
            Some(c) => c.clone(),
            None => json!({"name": "agentry", "version": env!("CARGO_PKG_VERSION")}),
        };
        let version = with
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or(DEFAULT_PROTOCOL_VERSION);
        let exchange = Exchange {
            method,
            params,
            initialize: json!({
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": client,
            }),
        };
        let transport = with.get("transport").cloned().unwrap_or(Value::Null);
        let result = if let Some(stdio) = transport.get("stdio") {
            self.mcp_stdio(stdio, &exchange, timeout).await?
        } else {
            let http = transport.get("http").unwrap_or(&Value::Null);
            self.mcp_http(http, &exchange, timeout, idempotency_key)
                .await?
        };
        if exchange.method == "tools/call" && result.get("isError") == Some(&Value::Bool(true)) {
            let mut e = DslError::runtime(clip(&tool_text(&result), MAX_DETAIL));
            e.title = Some("MCP Tool Error".to_owned());
            return Err(e);
        }
        Ok(result)
    }

    /// The call over Streamable HTTP, in a session ended (best effort) at the end.
    async fn mcp_http(
        &self,
        http: &Value,
        exchange: &Exchange,
        timeout: Duration,
        idempotency_key: &str,
    ) -> Result<Value, DslError> {
        let (url, auth) = endpoint(http.get("endpoint"), "the MCP endpoint")?;
        let headers = match http.get("headers") {
            Some(Value::Object(h)) => h.iter().map(|(k, v)| (k.clone(), scalar(v))).collect(),
            _ => Vec::new(),
        };
        let mut session = HttpSession {
            outbound: self,
            url,
            auth,
            headers,
            session: None,
            version: None,
            timeout,
            key: idempotency_key.to_owned(),
        };
        let outcome = tokio::time::timeout(timeout, session.run(exchange)).await;
        session.end().await;
        match outcome {
            Ok(result) => result,
            Err(_) => Err(timed_out(timeout)),
        }
    }

    /// The call over a command's stdio, the command killed at the end.
    async fn mcp_stdio(
        &self,
        stdio: &Value,
        exchange: &Exchange,
        timeout: Duration,
    ) -> Result<Value, DslError> {
        if !self.protocols.stdio {
            return Err(DslError::standard(
                ErrorType::Authorization,
                "Command Refused",
                "an MCP stdio transport runs a command, which this server does not allow: \
                 the operator allows it with AGENTRY_DEFINITIONS_TRUSTED=1 \
                 (--definitions-trusted)",
            ));
        }
        let mut child = spawn(stdio)?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take().map(|e| tokio::spawn(read_stderr(e)));
        let outcome = match (stdin, stdout) {
            (Some(stdin), Some(stdout)) => {
                let mut pipes = Pipes {
                    stdin,
                    stdout: BufReader::new(stdout),
                    read: 0,
                };
                tokio::time::timeout(timeout, pipes.run(exchange)).await
            }
            _ => Ok(Err(DslError::runtime(
                "the command's stdio is not available",
            ))),
        };
        let _ = child.start_kill();
        let _ = tokio::time::timeout(END_TIMEOUT, child.wait()).await;
        match outcome {
            // A failure of the command (not a JSON-RPC error it answered): what it said.
            Ok(Err(mut e)) if e.title.as_deref() == Some("Runtime Error") => {
                if let Some(task) = stderr
                    && let Ok(Ok(text)) = tokio::time::timeout(END_TIMEOUT, task).await
                    && !text.trim().is_empty()
                {
                    let detail = e.detail.unwrap_or_default();
                    e.detail = Some(format!("{detail}; its stderr: {}", text.trim()));
                }
                Err(e)
            }
            Ok(result) => result,
            Err(_) => Err(timed_out(timeout)),
        }
    }
}

fn timed_out(timeout: Duration) -> DslError {
    DslError::timeout(format!(
        "the MCP call took longer than its timeout of {timeout:?}"
    ))
}

/// The text of a tool's result: its text contents, else its structured content, else itself.
fn tool_text(result: &Value) -> String {
    let texts: Vec<&str> = result
        .get("content")
        .and_then(Value::as_array)
        .map(|c| {
            c.iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    if !texts.is_empty() {
        return texts.join("\n");
    }
    match result.get("structuredContent") {
        Some(s) => s.to_string(),
        None => result.to_string(),
    }
}

/// The result of the response to request `id` among `messages`, or its error.
fn response_to(messages: &[Value], id: u64, method: &str) -> Result<Value, DslError> {
    match messages.iter().find(|m| answers(m, id)) {
        Some(m) => match m.get("error") {
            Some(error) => Err(rpc_failure("MCP", error)),
            None => Ok(m.get("result").cloned().unwrap_or(Value::Null)),
        },
        None => Err(DslError::runtime(format!(
            "the MCP server did not answer {method}"
        ))),
    }
}

// ---------------------------------------------------------------------------------------------
// Streamable HTTP.
// ---------------------------------------------------------------------------------------------

/// One session with an MCP server over Streamable HTTP.
struct HttpSession<'a> {
    outbound: &'a Outbound,
    url: String,
    auth: Option<Credentials>,
    headers: Vec<(String, String)>,
    /// The `Mcp-Session-Id` the server gave.
    session: Option<String>,
    /// The protocol version the server chose.
    version: Option<String>,
    timeout: Duration,
    key: String,
}

impl HttpSession<'_> {
    async fn run(&mut self, exchange: &Exchange) -> Result<Value, DslError> {
        let init = rpc_request(
            Some(INITIALIZE_ID),
            "initialize",
            Some(exchange.initialize.clone()),
        );
        let (headers, messages) = self.post(init, "initialize", Some(INITIALIZE_ID)).await?;
        self.session = headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let initialized = response_to(&messages, INITIALIZE_ID, "initialize")?;
        self.version = initialized
            .get("protocolVersion")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let note = rpc_request(None, "notifications/initialized", None);
        self.post(note, "initialized", None).await?;
        let call = rpc_request(Some(CALL_ID), &exchange.method, exchange.params.clone());
        let (_, messages) = self.post(call, "", Some(CALL_ID)).await?;
        response_to(&messages, CALL_ID, &exchange.method)
    }

    /// POSTs a message (its idempotency key: the call's, with `/<what>` when `what` is not
    /// empty); reads the answer up to the response to `id`.
    async fn post(
        &self,
        body: Value,
        what: &str,
        id: Option<u64>,
    ) -> Result<(reqwest::header::HeaderMap, Vec<Value>), DslError> {
        let post = Post {
            url: self.url.clone(),
            headers: self.headers_with(&[("accept", "application/json, text/event-stream")]),
            auth: self.auth.clone(),
            body,
            timeout: self.timeout,
        };
        let key = if what.is_empty() {
            self.key.clone()
        } else {
            format!("{}/{what}", self.key)
        };
        let answer = self
            .outbound
            .post_rpc(post, &key, |m| id.is_some_and(|id| answers(m, id)))
            .await?;
        Ok((answer.headers, answer.messages))
    }

    /// The definition's headers, the session's, and `extra`.
    fn headers_with(&self, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut headers = self.headers.clone();
        if let Some(s) = &self.session {
            headers.push(("mcp-session-id".to_owned(), s.clone()));
        }
        if let Some(v) = &self.version {
            headers.push(("mcp-protocol-version".to_owned(), v.clone()));
        }
        for (k, v) in extra {
            headers.push(((*k).to_owned(), (*v).to_owned()));
        }
        headers
    }

    /// Ends the session, if the server opened one (best effort: any failure is ignored).
    async fn end(&self) {
        if self.session.is_none() {
            return;
        }
        let Ok(mut request) = Request::new("DELETE", &self.url) else {
            return;
        };
        request.headers = self.headers_with(&[]);
        request.auth = self.auth.clone();
        request.timeout = Some(END_TIMEOUT);
        let key = format!("{}/end", self.key);
        let _ = tokio::time::timeout(END_TIMEOUT, self.outbound.open(request, &key)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// stdio.
// ---------------------------------------------------------------------------------------------

/// The detail of a command that ended (or closed its stdout) without answering.
const EXITED: &str = "the MCP server's command ended without answering";

/// Starts the command of a stdio transport.
fn spawn(stdio: &Value) -> Result<Child, DslError> {
    let command = stdio
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let arguments: Vec<String> = stdio
        .get("arguments")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(scalar).collect())
        .unwrap_or_default();
    let mut cmd = Command::new(command);
    cmd.args(&arguments)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for name in PASSED_ENV {
        if let Some(v) = std::env::var_os(name) {
            cmd.env(name, v);
        }
    }
    if let Some(Value::Object(env)) = stdio.get("environment") {
        for (k, v) in env {
            cmd.env(k, scalar(v));
        }
    }
    cmd.spawn().map_err(|e| {
        DslError::runtime(format!(
            "cannot start the MCP server's command {command}: {e}"
        ))
    })
}

/// The first [`STDERR_QUOTED`] bytes a command writes on stderr (the rest is read and dropped,
/// so the command never blocks on it).
async fn read_stderr(mut stderr: tokio::process::ChildStderr) -> String {
    let mut kept = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n) = stderr.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        let room = STDERR_QUOTED.saturating_sub(kept.len());
        kept.extend_from_slice(&chunk[..n.min(room)]);
    }
    String::from_utf8_lossy(&kept).into_owned()
}

/// A command's stdin and stdout, and how much was read of it.
struct Pipes {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    read: usize,
}

impl Pipes {
    async fn run(&mut self, exchange: &Exchange) -> Result<Value, DslError> {
        let init = rpc_request(
            Some(INITIALIZE_ID),
            "initialize",
            Some(exchange.initialize.clone()),
        );
        self.write(&init).await?;
        self.response(INITIALIZE_ID, "initialize").await?;
        self.write(&rpc_request(None, "notifications/initialized", None))
            .await?;
        let call = rpc_request(Some(CALL_ID), &exchange.method, exchange.params.clone());
        self.write(&call).await?;
        self.response(CALL_ID, &exchange.method).await
    }

    async fn write(&mut self, message: &Value) -> Result<(), DslError> {
        let mut line = message.to_string();
        line.push('\n');
        let failed = |e: std::io::Error| {
            DslError::runtime(format!("writing to the MCP server's command: {e}"))
        };
        self.stdin
            .write_all(line.as_bytes())
            .await
            .map_err(failed)?;
        self.stdin.flush().await.map_err(failed)
    }

    /// Reads messages up to the response to request `id` (answering the command's `ping`s).
    async fn response(&mut self, id: u64, method: &str) -> Result<Value, DslError> {
        for _ in 0..MAX_MESSAGES {
            let Some(line) = self.line().await? else {
                return Err(DslError::runtime(EXITED));
            };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let message: Value = serde_json::from_slice(&line).map_err(|_| {
                DslError::runtime(format!(
                    "the MCP server's command wrote what is not JSON-RPC: {}",
                    clip(&String::from_utf8_lossy(&line), 300)
                ))
            })?;
            if answers(&message, id) {
                return response_to(std::slice::from_ref(&message), id, method);
            }
            if let (Some(request), Some(rid)) = (
                message.get("method").and_then(Value::as_str),
                message.get("id"),
            ) {
                let reply = if request == "ping" {
                    json!({"jsonrpc": "2.0", "id": rid, "result": {}})
                } else {
                    json!({"jsonrpc": "2.0", "id": rid, "error": {
                        "code": -32601, "message": format!("agentry does not answer {request}")}})
                };
                self.write(&reply).await?;
            }
        }
        Err(super::too_many())
    }

    /// One line of stdout (without its end), `None` at its end; all lines together at most
    /// [`MAX_RESPONSE_BYTES`].
    async fn line(&mut self) -> Result<Option<Vec<u8>>, DslError> {
        let mut line = Vec::new();
        loop {
            let buf =
                self.stdout.fill_buf().await.map_err(|e| {
                    DslError::runtime(format!("reading the MCP server's command: {e}"))
                })?;
            if buf.is_empty() {
                return Ok((!line.is_empty()).then_some(line));
            }
            let (taken, end) = match buf.iter().position(|b| *b == b'\n') {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            line.extend_from_slice(&buf[..taken]);
            self.stdout.consume(taken);
            self.read += taken;
            if self.read > MAX_RESPONSE_BYTES {
                return Err(super::too_large());
            }
            if end {
                line.pop();
                return Ok(Some(line));
            }
        }
    }
}
