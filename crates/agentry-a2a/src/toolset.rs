//! Remote A2A agents as tools of agentry's agents (like `McpToolset` for MCP servers): each
//! remote agent, named by its card's URL, is the tool `ask_<agent id>` taking `{task}`. A call
//! reads the card (once, then kept), sends the task with `SendStreamingMessage`, follows the
//! task to its end (the words of its `working` updates reported as the call's progress: the
//! caller's stream shows them as `tool-progress`) and answers `{agent, taskId, state, text}`. A remote that fails, refuses,
//! waits for input or cannot be reached is a tool error naming why (the model sees it as
//! such: `isError` in `toolResults`).

use std::sync::Arc;
use std::time::Duration;

use agentry_agents::{Tool, ToolContext};
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::wire::{AgentCard, JSONRPC_BINDING, PROTOCOL_VERSION, StreamResponse, TaskState};

/// The longest a call waits for the remote task's end.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(300);

/// The most bytes of a remote's card, and of one of its stream's events.
const MAX_BYTES: usize = 1 << 20;

/// Why a remote agent cannot be lent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum A2aToolsetError {
    #[error("{0:?} is not an agent card URL (http:// or https://)")]
    BadUrl(String),
    #[error("cannot name the agent of {0:?}: its URL has no agent id before .well-known")]
    NoAgentId(String),
}

/// Remote A2A agents, each lent as a tool.
#[derive(Default)]
pub struct A2aToolset {
    tools: Vec<Arc<dyn Tool>>,
}

impl A2aToolset {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the agent whose card is at `card_url` (`.../a2a/<id>/.well-known/agent-card.json`
    /// names it `<id>`), called with `token` as a Bearer token when given.
    pub fn agent(mut self, card_url: &str, token: Option<String>) -> Result<Self, A2aToolsetError> {
        self.tools
            .push(Arc::new(RemoteAgent::new(card_url, token)?));
        Ok(self)
    }

    /// The tools, one per remote agent: `ask_<agent id>`.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools.clone()
    }
}

/// The agent id a card URL names: the path segment before `.well-known` (agentry's
/// `/a2a/<id>/.well-known/agent-card.json`), or the last one.
fn agent_id_of(card_url: &str) -> Option<String> {
    let path = card_url.split_once("://")?.1.split_once('/')?.1;
    let segments: Vec<&str> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .take_while(|s| *s != ".well-known")
        .collect();
    let id = segments.last()?;
    agentry_engine::id::is_valid_id(id).then(|| (*id).to_owned())
}

/// One remote agent as the tool `ask_<id>`.
struct RemoteAgent {
    id: String,
    name: String,
    description: String,
    parameters: Value,
    card_url: String,
    token: Option<String>,
    /// Built at the first call (no TLS roots loaded for an agent never asked).
    http: std::sync::OnceLock<reqwest::Client>,
    /// The JSON-RPC endpoint, once the card was read.
    endpoint: OnceCell<String>,
}

impl RemoteAgent {
    fn new(card_url: &str, token: Option<String>) -> Result<Self, A2aToolsetError> {
        if !(card_url.starts_with("http://") || card_url.starts_with("https://")) {
            return Err(A2aToolsetError::BadUrl(card_url.to_owned()));
        }
        let id =
            agent_id_of(card_url).ok_or_else(|| A2aToolsetError::NoAgentId(card_url.to_owned()))?;
        Ok(Self {
            name: format!("ask_{id}"),
            description: format!(
                "Asks the remote agent {id} (over A2A, {card_url}) to do a task; answers with its reply."
            ),
            parameters: json!({
                "type": "object",
                "properties": {"task": {"type": "string", "minLength": 1, "maxLength": agentry_app::limits::MAX_MESSAGE_CHARS,
                    "description": "What the remote agent should do, in words."}},
                "required": ["task"]
            }),
            id,
            card_url: card_url.to_owned(),
            token,
            http: std::sync::OnceLock::new(),
            endpoint: OnceCell::new(),
        })
    }

    fn http(&self) -> &reqwest::Client {
        self.http.get_or_init(|| {
            reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .build()
                .unwrap_or_default()
        })
    }

    fn authorized(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    /// The card's JSON-RPC interface (read once).
    async fn endpoint(&self) -> Result<&String, String> {
        self.endpoint
            .get_or_try_init(|| async {
                let res = self
                    .authorized(self.http().get(&self.card_url))
                    .timeout(Duration::from_secs(30))
                    .send()
                    .await
                    .map_err(|e| format!("cannot reach {}: {e}", self.card_url))?;
                if !res.status().is_success() {
                    return Err(format!("{} answered {}", self.card_url, res.status()));
                }
                let bytes = res.bytes().await.map_err(|e| e.to_string())?;
                if bytes.len() > MAX_BYTES {
                    return Err(format!("the card at {} is too large", self.card_url));
                }
                let card: AgentCard = serde_json::from_slice(&bytes).map_err(|e| {
                    format!("the card at {} is not an A2A card: {e}", self.card_url)
                })?;
                card.supported_interfaces
                    .into_iter()
                    .find(|i| i.protocol_binding == JSONRPC_BINDING)
                    .map(|i| i.url)
                    .ok_or_else(|| format!("{} offers no JSON-RPC interface", self.card_url))
            })
            .await
    }

    /// Sends `task` and follows it to its end: the answer's text.
    async fn ask(&self, task: &str, ctx: &ToolContext) -> Result<Value, String> {
        let endpoint = self.endpoint().await?.clone();
        let mut message = json!({
            "messageId": uuid::Uuid::new_v4().to_string(),
            "role": "ROLE_USER",
            "parts": [{"text": task}],
        });
        if let Some(c) = &ctx.conversation_id {
            message["contextId"] = Value::from(format!("{}-{c}", ctx.agent_id));
        }
        let request = json!({
            "jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
            "params": {"message": message},
        });
        let res = self
            .authorized(self.http().post(&endpoint))
            .header("A2A-Version", PROTOCOL_VERSION)
            .header("Accept", "text/event-stream")
            .json(&request)
            .send()
            .await
            .map_err(|e| format!("cannot reach the remote agent {}: {e}", self.id))?;
        if !res.status().is_success() {
            return Err(format!(
                "the remote agent {} answered {}",
                self.id,
                res.status()
            ));
        }
        let streamed = res
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !streamed {
            // An error before the stream: one JSON-RPC response.
            let body: Value = res.json().await.map_err(|e| e.to_string())?;
            return Err(rpc_failure(&self.id, &body));
        }
        let mut outcome = Outcome::default();
        let mut buffer: Vec<u8> = Vec::new();
        let mut body = res.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk =
                chunk.map_err(|e| format!("the remote agent {} went away: {e}", self.id))?;
            buffer.extend_from_slice(&chunk);
            while let Some(end) = find_event_end(&buffer) {
                let event: Vec<u8> = buffer.drain(..end).collect();
                if let Some(words) = outcome.take(&self.id, &event)? {
                    ctx.report_progress(json!({"agent": self.id, "text": words}));
                }
            }
            if buffer.len() > MAX_BYTES {
                return Err(format!(
                    "the remote agent {} sent an event too large",
                    self.id
                ));
            }
        }
        outcome.answer(&self.id)
    }
}

/// Where an event ends in `buffer` (its blank line included), if it does.
fn find_event_end(buffer: &[u8]) -> Option<usize> {
    let lf = buffer.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    let crlf = buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A JSON-RPC error's words.
fn rpc_failure(agent: &str, body: &Value) -> String {
    let message = body["error"]["message"].as_str().unwrap_or("no answer");
    format!("the remote agent {agent} refused: {message}")
}

/// What a remote task's stream said so far.
#[derive(Default)]
struct Outcome {
    task_id: Option<String>,
    state: Option<TaskState>,
    text: String,
    /// The words of the last status message (a failure's reason, an input request).
    status_text: String,
}

impl Outcome {
    /// Takes one event of the stream; answers the words of a `working` status message (the
    /// remote's progress), if it has some.
    fn take(&mut self, agent: &str, event: &[u8]) -> Result<Option<String>, String> {
        let text = String::from_utf8_lossy(event);
        let data: String = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim_start)
            .collect::<Vec<_>>()
            .join("\n");
        if data.is_empty() {
            return Ok(None); // a comment (keep-alive)
        }
        let body: Value = serde_json::from_str(&data)
            .map_err(|e| format!("the remote agent {agent} sent an unreadable event: {e}"))?;
        if body.get("error").is_some() {
            return Err(rpc_failure(agent, &body));
        }
        let Ok(event) = serde_json::from_value::<StreamResponse>(body["result"].clone()) else {
            return Ok(None); // an event of a later protocol: skipped
        };
        let words = |parts: &[crate::wire::Part]| {
            parts
                .iter()
                .filter_map(|p| p.text.clone())
                .collect::<Vec<_>>()
                .join(" ")
        };
        match event {
            StreamResponse::Task(t) => {
                self.task_id = Some(t.id);
                self.state = Some(t.status.state);
            }
            StreamResponse::Message(m) => {
                self.text = words(&m.parts);
                self.state = Some(TaskState::TaskStateCompleted);
            }
            StreamResponse::StatusUpdate(u) => {
                self.task_id = Some(u.task_id);
                self.state = Some(u.status.state);
                if let Some(m) = &u.status.message {
                    self.status_text = words(&m.parts);
                    if u.status.state == TaskState::TaskStateWorking && !self.status_text.is_empty()
                    {
                        return Ok(Some(self.status_text.clone()));
                    }
                }
            }
            StreamResponse::ArtifactUpdate(u) => {
                let piece = words(&u.artifact.parts);
                if u.append {
                    self.text.push_str(&piece);
                } else {
                    self.text = piece;
                }
            }
        }
        Ok(None)
    }

    fn answer(self, agent: &str) -> Result<Value, String> {
        let state = self
            .state
            .ok_or_else(|| format!("the remote agent {agent} said nothing"))?;
        let why = if self.status_text.is_empty() {
            String::new()
        } else {
            format!(": {}", self.status_text)
        };
        match state {
            TaskState::TaskStateCompleted => Ok(json!({
                "agent": agent,
                "taskId": self.task_id,
                "state": "completed",
                "text": self.text,
            })),
            TaskState::TaskStateInputRequired | TaskState::TaskStateAuthRequired => Err(format!(
                "the remote agent {agent} waits for input (task {}){why}",
                self.task_id.unwrap_or_default()
            )),
            TaskState::TaskStateFailed | TaskState::TaskStateRejected => {
                Err(format!("the remote agent {agent} failed{why}"))
            }
            TaskState::TaskStateCanceled => {
                Err(format!("the remote agent {agent}'s task was cancelled"))
            }
            TaskState::TaskStateSubmitted | TaskState::TaskStateWorking => Err(format!(
                "the remote agent {agent} stopped answering before its task ended"
            )),
        }
    }
}

#[async_trait]
impl Tool for RemoteAgent {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    async fn call(&self, args: Value, ctx: ToolContext) -> Result<Value, String> {
        let task = args["task"]
            .as_str()
            .filter(|t| !t.trim().is_empty())
            .ok_or("task must be a text")?
            .to_owned();
        let cancel = ctx.cancel.clone();
        tokio::select! {
            answer = tokio::time::timeout(CALL_TIMEOUT, self.ask(&task, &ctx)) => {
                answer.map_err(|_| format!("the remote agent {} did not answer within {} s", self.id, CALL_TIMEOUT.as_secs()))?
            }
            _ = cancel.cancelled() => Err("cancelled".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_card_url_names_its_agent() {
        assert_eq!(
            agent_id_of("http://h:1/a2a/weather/.well-known/agent-card.json").as_deref(),
            Some("weather")
        );
        assert_eq!(agent_id_of("https://h/agents/x").as_deref(), Some("x"));
        assert_eq!(agent_id_of("http://h/.well-known/agent-card.json"), None);
        assert!(A2aToolset::new().agent("ftp://h/a2a/x", None).is_err());
        let set = A2aToolset::new()
            .agent("http://h/a2a/weather/.well-known/agent-card.json", None)
            .unwrap();
        assert_eq!(set.tools()[0].name(), "ask_weather");
    }

    #[test]
    fn a_stream_is_read_to_its_answer_or_its_failure() {
        let mut o = Outcome::default();
        let ev = |v: Value| {
            format!(
                "data: {}\n\n",
                json!({"jsonrpc": "2.0", "id": 1, "result": v})
            )
        };
        o.take("w", ev(json!({"task": {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}})).as_bytes()).unwrap();
        o.take("w", b": keep-alive\n\n").unwrap();
        o.take("w", ev(json!({"artifactUpdate": {"taskId": "t", "contextId": "c", "artifact": {"artifactId": "a", "parts": [{"text": "Sunny"}]}}})).as_bytes()).unwrap();
        o.take("w", ev(json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}})).as_bytes()).unwrap();
        let answer = o.answer("w").unwrap();
        assert_eq!(answer["text"], "Sunny");
        assert_eq!(answer["taskId"], "t");
        let mut failed = Outcome::default();
        failed.take("w", ev(json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_FAILED", "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "boom"}]}}}})).as_bytes()).unwrap();
        assert!(failed.answer("w").unwrap_err().contains("boom"));
        let mut refused = Outcome::default();
        let err = refused
            .take("w", format!("data: {}\n\n", json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "Task not found"}})).as_bytes())
            .unwrap_err();
        assert!(err.contains("Task not found"));
        assert_eq!(find_event_end(b"data: x\r\n\r\nrest"), Some(11));
    }
}
