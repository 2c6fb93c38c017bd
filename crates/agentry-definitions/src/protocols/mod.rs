//! `call: a2a` and `call: mcp`: the agent protocols, as a definition calls them
//! (`dsl-reference.md`, "A2A Call" and "MCP Call"). Both are JSON-RPC 2.0; over HTTP, every
//! request goes through the outbound client ([`Outbound::open`]), so under the outbound policy,
//! its redirect rules and the response size limit ([`MAX_RESPONSE_BYTES`]).
//!
//! - [`a2a`]: an agent's method, found by its card (`agentCard`) or at its `server`, in the
//!   A2A version the card declares (0.3's method names as the DSL writes them, or 1.0's).
//! - [`mcp`]: one method of an MCP server, over Streamable HTTP or a command's stdio (only when
//!   the operator allows commands: [`Outbound::with_stdio`]).
//!
//! **`with`** (but `parameters`) is checked at load by [`check`] (agentry's rules: what it can
//! run; the document's shape is schema.rs's), and rendered when the task runs like a template:
//! each `${ }` string is evaluated with the task input and the arguments. An `authentication`
//! (`basic` or `bearer`, or `use` of one of `use.authentications`) is sent with every request
//! to its endpoint. `parameters` is rendered the same way; it is an object (or null: none).
//!
//! **Errors**: a failed call (a JSON-RPC error, an HTTP failure or error status, an answer that
//! is not JSON-RPC, a tool result with `isError`) is the DSL's `runtime` error (500), the
//! JSON-RPC error's message (or the tool's text) in `detail`, as the reference says. A time-out
//! is `timeout` (408), as for `call: http`; the outbound policy's refusal `authorization` (403); a
//! bad URL `configuration` (400); an expression that fails `expression` (400).
//!
//! **Bounded**: each answer at most [`MAX_RESPONSE_BYTES`], at most [`MAX_MESSAGES`] server-sent
//! events (or stdio messages) an answer, and time (each protocol's time-out).

mod a2a;
mod mcp;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::error::{DslError, ErrorType};
use crate::expr::Template;
use crate::model::{Protocol, ProtocolCall};
use crate::outbound::{Credentials, MAX_RESPONSE_BYTES, Outbound, Request, clip, scalar};

use crate::run::{Args, Stop};
pub(crate) use mcp::PASSED_ENV;

/// The most messages (server-sent events, stdio lines) one answer may hold.
pub const MAX_MESSAGES: usize = 1_000;
/// The most characters of a remote's text (an error's message, a tool's text) in an error.
pub const MAX_DETAIL: usize = 1_000;
/// How long a kept agent card (or what a server's A2A version turned out to be) is used.
pub const CACHE_TTL: Duration = Duration::from_secs(5 * 60);
/// The most entries [`State`] keeps.
pub const MAX_CACHED: usize = 64;

/// What the agent protocols keep between calls: agent cards by URI, and whether a definition
/// may run a command (an MCP stdio transport).
#[derive(Debug, Default)]
pub(crate) struct State {
    cache: Cache,
    /// Whether an MCP stdio transport may run its command ([`Outbound::with_stdio`]).
    stdio: bool,
}

/// Values kept by key, each for [`CACHE_TTL`], at most [`MAX_CACHED`] (the oldest dropped).
#[derive(Debug, Default)]
struct Cache {
    entries: Mutex<HashMap<String, (Instant, Value)>>,
}

impl Cache {
    fn get(&self, key: &str) -> Option<Value> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(key)
            .filter(|(at, _)| at.elapsed() < CACHE_TTL)
            .map(|(_, v)| v.clone())
    }

    fn put(&self, key: &str, value: Value) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.retain(|_, (at, _)| at.elapsed() < CACHE_TTL);
        while entries.len() >= MAX_CACHED && !entries.contains_key(key) {
            let oldest = entries
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => entries.remove(&k),
                None => break,
            };
        }
        entries.insert(key.to_owned(), (Instant::now(), value));
    }
}

/// The problems of a call's `with` (without `parameters`): `(pointer under with, reason)`.
pub(crate) fn check(protocol: Protocol, with: &Map<String, Value>) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    match protocol {
        Protocol::A2a => a2a::check(with, &mut problems),
        Protocol::Mcp => mcp::check(with, &mut problems),
    }
    problems
}

impl Outbound {
    /// Allows (or not) an MCP call to run the command of its stdio transport: off unless the
    /// operator trusts the definitions (`AGENTRY_DEFINITIONS_TRUSTED=1`,
    /// `--definitions-trusted`). Without it, such a call is the DSL's `authorization` error.
    pub fn with_stdio(mut self, allowed: bool) -> Self {
        self.protocols.stdio = allowed;
        self
    }

    /// Runs a `call: a2a` or `call: mcp`: the JSON-RPC result.
    pub(crate) async fn protocol(
        &self,
        call: &ProtocolCall,
        input: &Value,
        args: &Args<'_>,
        idempotency_key: &str,
    ) -> Result<Value, Stop> {
        let (with, parameters) = render(call, input, args)?;
        let output = match call.protocol {
            Protocol::A2a => self.a2a(&with, parameters, idempotency_key).await,
            Protocol::Mcp => self.mcp(&with, parameters, idempotency_key).await,
        };
        Ok(output.map_err(failed)?)
    }
}

/// `with` and `parameters`, rendered with the task input and the arguments (each `use` of an
/// authentication replaced by the one it names first).
fn render(
    call: &ProtocolCall,
    input: &Value,
    args: &Args<'_>,
) -> Result<(Map<String, Value>, Value), DslError> {
    let refs = crate::run::refs(args);
    let names: Vec<&str> = args.iter().map(|(k, _)| *k).collect();
    let definition = refs
        .iter()
        .find(|(k, _)| *k == "workflow")
        .map(|(_, w)| &w["definition"])
        .unwrap_or(&Value::Null);
    let mut with = Value::Object(call.with.clone());
    for at in [
        "/agentCard/endpoint/authentication",
        "/server/authentication",
        "/transport/http/endpoint/authentication",
    ] {
        if let Some(auth) = with.pointer_mut(at) {
            resolve_use(auth, definition)?;
        }
    }
    let template = Template::compile(&with, &names)
        .map_err(|(at, why)| DslError::expression(format!("with{at}: {why}")))?;
    let eval = |t: &Template| {
        t.eval(input, &refs)
            .map_err(|e| DslError::expression(e.to_string()))
    };
    let with = match eval(&template)? {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let parameters = match &call.parameters {
        Some(t) => eval(t)?,
        None => Value::Null,
    };
    Ok((with, parameters))
}

/// Replaces an authentication that is `{use: name}` by `use.authentications.<name>` of the
/// definition.
fn resolve_use(auth: &mut Value, definition: &Value) -> Result<(), DslError> {
    let Some(name) = auth.get("use").and_then(Value::as_str) else {
        return Ok(());
    };
    match definition.pointer(&format!("/use/authentications/{}", escape(name))) {
        Some(found) => {
            *auth = found.clone();
            Ok(())
        }
        None => Err(configuration(format!(
            "no authentication named {name} in `use.authentications`"
        ))),
    }
}

/// A JSON pointer segment of `name`.
fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

fn configuration(detail: impl Into<String>) -> DslError {
    DslError::standard(ErrorType::Configuration, "Configuration Error", detail)
}

/// A failed call as the reference has it: `runtime` (500), but for the errors of the
/// definition or the operator's policy (`configuration`, `expression`, `validation`,
/// `authorization`) and time-outs, which keep their type.
fn failed(e: DslError) -> DslError {
    if e.type_ != ErrorType::Communication.uri() {
        return e;
    }
    DslError {
        status: ErrorType::Runtime.default_status(),
        type_: ErrorType::Runtime.uri(),
        title: Some("Runtime Error".to_owned()),
        ..e
    }
}

/// The runtime error of a JSON-RPC `error` object: its message in `detail`.
fn rpc_failure(protocol: &str, error: &Value) -> DslError {
    let message = match error.get("message") {
        Some(Value::String(m)) => m.clone(),
        _ => error.to_string(),
    };
    let mut e = DslError::runtime(clip(&message, MAX_DETAIL));
    e.title = Some(match error.get("code").and_then(Value::as_i64) {
        Some(code) => format!("{protocol} Error {code}"),
        None => format!("{protocol} Error"),
    });
    e
}

// ---------------------------------------------------------------------------------------------
// `with`'s pieces, checked at load and read when the task runs.
// ---------------------------------------------------------------------------------------------

/// Checks an endpoint (`uri` or `{uri, authentication}`) at `at`.
fn check_endpoint(v: Option<&Value>, at: &str, problems: &mut Vec<(String, String)>) {
    match v {
        Some(Value::String(_)) => {}
        Some(Value::Object(e)) => {
            if !e.get("uri").is_some_and(Value::is_string) {
                problems.push((format!("{at}/uri"), "`uri` is required".to_owned()));
            }
            if let Some(auth) = e.get("authentication") {
                check_authentication(auth, &format!("{at}/authentication"), problems);
            }
        }
        Some(_) => problems.push((
            at.to_owned(),
            "an endpoint is a URI or an object with `uri`".to_owned(),
        )),
        None => problems.push((at.to_owned(), "an endpoint is required".to_owned())),
    }
}

/// Checks an authentication: `use`, `basic` or `bearer` (the schemes agentry sends).
fn check_authentication(v: &Value, at: &str, problems: &mut Vec<(String, String)>) {
    let ok = v.get("use").is_some_and(Value::is_string)
        || v.get("basic").is_some_and(Value::is_object)
        || v.get("bearer").is_some_and(Value::is_object);
    if !ok {
        problems.push((
            at.to_owned(),
            "agentry sends `basic` and `bearer` authentication (or `use` of one)".to_owned(),
        ));
    }
}

/// Checks that `v`, when given, is an object of strings.
fn check_strings(v: Option<&Value>, at: &str, problems: &mut Vec<(String, String)>) {
    let ok = match v {
        None => true,
        Some(Value::Object(m)) => m.values().all(Value::is_string),
        Some(_) => false,
    };
    if !ok {
        problems.push((at.to_owned(), "must be an object of strings".to_owned()));
    }
}

/// Checks that `with.method` is one of `supported`.
fn check_method(
    with: &Map<String, Value>,
    supported: &[&str],
    problems: &mut Vec<(String, String)>,
) {
    match with.get("method") {
        None => problems.push(("/method".to_owned(), "`method` is required".to_owned())),
        Some(Value::String(m)) if supported.contains(&m.as_str()) => {}
        Some(other) => problems.push((
            "/method".to_owned(),
            format!(
                "unsupported method {other}: one of {}",
                supported.join(", ")
            ),
        )),
    }
}

/// A rendered endpoint: its URI and its credentials.
fn endpoint(v: Option<&Value>, what: &str) -> Result<(String, Option<Credentials>), DslError> {
    match v {
        Some(Value::String(uri)) => Ok((uri.clone(), None)),
        Some(Value::Object(e)) => match e.get("uri") {
            Some(Value::String(uri)) => {
                let auth = match e.get("authentication") {
                    Some(a) => Some(credentials(a)?),
                    None => None,
                };
                Ok((uri.clone(), auth))
            }
            _ => Err(configuration(format!("{what} has no `uri` string"))),
        },
        _ => Err(configuration(format!("{what} is not a URI"))),
    }
}

/// The credentials of a rendered authentication.
fn credentials(auth: &Value) -> Result<Credentials, DslError> {
    let text = |v: &Value, key: &str| v.get(key).map(scalar).unwrap_or_default();
    if let Some(basic) = auth.get("basic") {
        return Ok(Credentials::Basic {
            username: text(basic, "username"),
            password: text(basic, "password"),
        });
    }
    if let Some(bearer) = auth.get("bearer") {
        return Ok(Credentials::Bearer {
            token: text(bearer, "token"),
        });
    }
    Err(configuration(
        "agentry sends `basic` and `bearer` authentication only",
    ))
}

/// The rendered `parameters`: an object, or none (null).
fn parameters_object(parameters: Value, protocol: &str) -> Result<Option<Value>, DslError> {
    match parameters {
        Value::Null => Ok(None),
        Value::Object(m) => Ok(Some(Value::Object(m))),
        other => Err(DslError::validation(format!(
            "the parameters of {protocol} call are not an object: {}",
            clip(&other.to_string(), 100)
        ))),
    }
}

/// A JSON-RPC request (a notification when `id` is `None`).
fn rpc_request(id: Option<u64>, method: &str, params: Option<Value>) -> Value {
    let mut m = Map::new();
    m.insert("jsonrpc".into(), json!("2.0"));
    if let Some(id) = id {
        m.insert("id".into(), json!(id));
    }
    m.insert("method".into(), json!(method));
    if let Some(p) = params {
        m.insert("params".into(), p);
    }
    Value::Object(m)
}

/// Whether `message` is the response to request `id`.
fn answers(message: &Value, id: u64) -> bool {
    message.get("id").and_then(Value::as_u64) == Some(id)
        && (message.get("result").is_some() || message.get("error").is_some())
}

// ---------------------------------------------------------------------------------------------
// JSON-RPC over HTTP: a POST answered by a JSON body or a stream of server-sent events.
// ---------------------------------------------------------------------------------------------

/// One JSON-RPC message to POST.
struct Post {
    url: String,
    headers: Vec<(String, String)>,
    auth: Option<Credentials>,
    body: Value,
    timeout: Duration,
}

/// What a POST was answered: its headers and the JSON-RPC messages read.
struct Answer {
    headers: reqwest::header::HeaderMap,
    messages: Vec<Value>,
}

impl Outbound {
    /// POSTs a JSON-RPC message and reads the answer: the one message of a JSON body (each of a
    /// batch), or each event of a `text/event-stream`, until `done` holds for one (the rest of
    /// the stream is not read) or the stream ends. An error status is a `runtime` error.
    async fn post_rpc(
        &self,
        post: Post,
        idempotency_key: &str,
        mut done: impl FnMut(&Value) -> bool,
    ) -> Result<Answer, DslError> {
        let mut request = Request::new("POST", &post.url)?;
        request.headers = post.headers;
        request.auth = post.auth;
        request.body = Some(post.body);
        request.timeout = Some(post.timeout);
        let (mut response, url, _) = self.open(request, idempotency_key).await?;
        let status = response.status();
        let headers = response.headers().clone();
        if !status.is_success() {
            let body = read_body(response).await.unwrap_or_default();
            return Err(DslError::runtime(format!(
                "POST {url} answered {status}: {}",
                clip(&String::from_utf8_lossy(&body), 300)
            )));
        }
        let content_type = headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        let mut messages = Vec::new();
        if content_type.starts_with("text/event-stream") {
            let mut sse = Sse::default();
            while let Some(chunk) = response.chunk().await.map_err(reading)? {
                // An event without data (a stream's priming event) carries no message.
                for data in sse.push(&chunk)?.iter().filter(|d| !d.trim().is_empty()) {
                    let message = json_message(data)?;
                    let stop = done(&message);
                    messages.push(message);
                    if stop {
                        return Ok(Answer { headers, messages });
                    }
                }
            }
            for data in sse.finish()?.iter().filter(|d| !d.trim().is_empty()) {
                messages.push(json_message(data)?);
            }
        } else {
            let body = read_body(response).await?;
            if !body.iter().all(u8::is_ascii_whitespace) {
                match serde_json::from_slice::<Value>(&body) {
                    Ok(Value::Array(batch)) => messages.extend(batch),
                    Ok(one) => messages.push(one),
                    Err(_) => {
                        return Err(DslError::runtime(format!(
                            "POST {url} answered what is not JSON: {}",
                            clip(&String::from_utf8_lossy(&body), 300)
                        )));
                    }
                }
            }
        }
        Ok(Answer { headers, messages })
    }
}

/// A JSON-RPC message of an event's data.
fn json_message(data: &str) -> Result<Value, DslError> {
    serde_json::from_str(data).map_err(|_| {
        DslError::runtime(format!(
            "an event of the answer is not JSON: {}",
            clip(data, 300)
        ))
    })
}

/// The error of a response body that could not be read.
fn reading(e: reqwest::Error) -> DslError {
    if e.is_timeout() {
        DslError::timeout(format!("reading the answer: {e}"))
    } else {
        DslError::runtime(format!("reading the answer: {e}"))
    }
}

/// A whole response body, refused past [`MAX_RESPONSE_BYTES`].
async fn read_body(mut response: reqwest::Response) -> Result<Vec<u8>, DslError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(reading)? {
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn too_large() -> DslError {
    DslError::runtime(format!(
        "the answer is larger than {MAX_RESPONSE_BYTES} bytes"
    ))
}

fn too_many() -> DslError {
    DslError::runtime(format!(
        "the answer holds more than {MAX_MESSAGES} messages"
    ))
}

/// A reader of server-sent events (the `data` of each; comments and other fields are
/// skipped), at most [`MAX_RESPONSE_BYTES`] and [`MAX_MESSAGES`] events.
#[derive(Debug, Default)]
struct Sse {
    line: Vec<u8>,
    data: String,
    has_data: bool,
    read: usize,
    events: usize,
}

impl Sse {
    /// Reads a chunk: the data of the events it completes.
    fn push(&mut self, chunk: &[u8]) -> Result<Vec<String>, DslError> {
        self.read += chunk.len();
        if self.read > MAX_RESPONSE_BYTES {
            return Err(too_large());
        }
        let mut out = Vec::new();
        for &b in chunk {
            if b == b'\n' {
                let line = std::mem::take(&mut self.line);
                self.line_done(line, &mut out)?;
            } else {
                self.line.push(b);
            }
        }
        Ok(out)
    }

    /// The end of the stream: the event it cut short, if any.
    fn finish(&mut self) -> Result<Vec<String>, DslError> {
        let mut out = Vec::new();
        let line = std::mem::take(&mut self.line);
        if !line.is_empty() {
            self.line_done(line, &mut out)?;
        }
        self.line_done(Vec::new(), &mut out)?;
        Ok(out)
    }

    fn line_done(&mut self, mut line: Vec<u8>, out: &mut Vec<String>) -> Result<(), DslError> {
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.is_empty() {
            if self.has_data {
                self.events += 1;
                if self.events > MAX_MESSAGES {
                    return Err(too_many());
                }
                out.push(std::mem::take(&mut self.data));
                self.has_data = false;
            }
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&line);
        let (field, value) = match text.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (text.as_ref(), ""),
        };
        if field == "data" {
            if self.has_data {
                self.data.push('\n');
            }
            self.data.push_str(value);
            self.has_data = true;
        }
        Ok(())
    }
}
