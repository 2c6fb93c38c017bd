//! `call: a2a`: one JSON-RPC method of an A2A agent.
//!
//! **Where**: with `agentCard`, the card is read (a `GET` of its endpoint, kept
//! [`super::CACHE_TTL`] by URI) and its JSON-RPC interface is called: an A2A 1.0 card's first
//! `supportedInterfaces` entry of binding `JSONRPC` (its `protocolVersion` says the version), or
//! a 0.3 card's `url` (or its `additionalInterfaces` entry of transport `JSONRPC`) with the
//! card's `protocolVersion`; a relative URL is resolved against the card's. With `server` (no
//! card), the version is not known: the method is sent as 0.3 names it, and when the server
//! does not know that method (`-32601`) or that version (`-32009`) it is sent again as 1.0
//! names it (a server that refuses a method did nothing), and the server is known as 1.0 for
//! [`super::CACHE_TTL`]. The endpoint's authentication is sent with the card's `GET` and every
//! call (the card's `securitySchemes` are not read).
//!
//! **Versions**: the DSL names A2A 0.3's methods (`message/send`, `tasks/get`, ...). For an
//! agent of A2A 1.0 (agentry's own), the method is sent under its 1.0 name (`SendMessage`,
//! `GetTask`, ...) with the header `A2A-Version: 1.0`, and a message's 0.3 spelling is
//! rewritten as 1.0 spells it: its role (`user` → `ROLE_USER`, `agent` → `ROLE_AGENT`), its
//! parts (`{kind: text, text}` → `{text}`, `{kind: data, data}` → `{data}`, `{kind: file,
//! file: {uri | bytes, mimeType, name}}` → `{url | raw, mediaType, filename}`) and the
//! configuration's `blocking: false` (`returnImmediately: true`). What is already in 1.0's
//! spelling is kept. The result is the agent's, as it sent it.
//!
//! **Messages** (`message/send`, `message/stream`): `message.messageId` defaults to a UUID
//! derived from the call's idempotency key (a request sent again after a crash carries the same
//! id; another run of the task, another id), `message.role` to `user`.
//!
//! **Streams** (`message/stream`, `tasks/resubscribe`): the output is the array of every
//! event's result, in order, once the agent ends the stream; an event that is a JSON-RPC error
//! fails the call. Every request may take [`A2A_TIMEOUT`] (the task's `timeout` bounds it more).

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::{Post, check_endpoint, check_method, endpoint, parameters_object, rpc_failure};
use crate::error::DslError;
use crate::outbound::{Credentials, Outbound, Request};

/// How long one A2A request (a message's whole answer, a stream to its end) may take.
pub const A2A_TIMEOUT: Duration = Duration::from_secs(300);

/// The methods the DSL names (A2A 0.3), and their A2A 1.0 names.
const METHODS: [(&str, &str); 11] = [
    ("message/send", "SendMessage"),
    ("message/stream", "SendStreamingMessage"),
    ("tasks/get", "GetTask"),
    ("tasks/list", "ListTasks"),
    ("tasks/cancel", "CancelTask"),
    ("tasks/resubscribe", "SubscribeToTask"),
    (
        "tasks/pushNotificationConfig/set",
        "CreateTaskPushNotificationConfig",
    ),
    (
        "tasks/pushNotificationConfig/get",
        "GetTaskPushNotificationConfig",
    ),
    (
        "tasks/pushNotificationConfig/list",
        "ListTaskPushNotificationConfigs",
    ),
    (
        "tasks/pushNotificationConfig/delete",
        "DeleteTaskPushNotificationConfig",
    ),
    ("agent/getAuthenticatedExtendedCard", "GetExtendedAgentCard"),
];

/// JSON-RPC's "method not found" and A2A 1.0's "version not supported".
const NOT_THIS_VERSION: [i64; 2] = [-32601, -32009];

/// The A2A version an agent speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Version {
    /// 0.3 (and earlier 0.x): the DSL's method names.
    V03,
    /// 1.x.
    V1,
}

impl Version {
    /// The version a card or an interface declares (`0.3.0`, `1.0`, ...): 0.x is 0.3, any
    /// other 1.0.
    fn of(declared: &str) -> Version {
        if declared.trim().starts_with("0.") || declared.trim() == "0" {
            Version::V03
        } else {
            Version::V1
        }
    }

    /// The name of the DSL's `method` in this version.
    fn method(self, method: &str) -> &str {
        match self {
            Version::V03 => method,
            Version::V1 => METHODS
                .iter()
                .find(|(old, _)| *old == method)
                .map(|(_, new)| *new)
                .unwrap_or(method),
        }
    }
}

/// Agentry's rules for an A2A call's `with`.
pub(super) fn check(with: &Map<String, Value>, problems: &mut Vec<(String, String)>) {
    let names: Vec<&str> = METHODS.iter().map(|(m, _)| *m).collect();
    check_method(with, &names, problems);
    match (with.get("agentCard"), with.get("server")) {
        (Some(card), _) => match card.get("endpoint") {
            Some(e) => check_endpoint(Some(e), "/agentCard/endpoint", problems),
            None => problems.push((
                "/agentCard/endpoint".to_owned(),
                "the card's `endpoint` is required".to_owned(),
            )),
        },
        (None, Some(server)) => check_endpoint(Some(server), "/server", problems),
        (None, None) => problems.push((
            String::new(),
            "`agentCard` or `server` is required".to_owned(),
        )),
    }
}

/// Where the calls go.
struct Target {
    url: String,
    auth: Option<Credentials>,
    /// `None`: not known (a `server` without a card).
    version: Option<Version>,
}

impl Outbound {
    /// Runs an A2A call (`with` rendered): the JSON-RPC result, or the array of a stream's.
    pub(super) async fn a2a(
        &self,
        with: &Map<String, Value>,
        parameters: Value,
        idempotency_key: &str,
    ) -> Result<Value, DslError> {
        let method = with
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let params = parameters_object(parameters, "an A2A")?.unwrap_or_else(|| json!({}));
        let target = self.a2a_target(with, idempotency_key).await?;
        let version = target.version.unwrap_or(Version::V03);
        let outcome = self
            .a2a_send(&target, version, method, &params, idempotency_key)
            .await?;
        let outcome = match outcome {
            Err(error)
                if target.version.is_none()
                    && error
                        .get("code")
                        .and_then(Value::as_i64)
                        .is_some_and(|c| NOT_THIS_VERSION.contains(&c)) =>
            {
                let again = self
                    .a2a_send(&target, Version::V1, method, &params, idempotency_key)
                    .await?;
                if again.is_ok() {
                    self.protocols
                        .cache
                        .put(&version_key(&target.url), json!("1.0"));
                }
                again
            }
            other => other,
        };
        outcome.map_err(|error| rpc_failure("A2A", &error))
    }

    /// The agent's JSON-RPC URL, credentials and version: from its card, or its `server`.
    async fn a2a_target(
        &self,
        with: &Map<String, Value>,
        idempotency_key: &str,
    ) -> Result<Target, DslError> {
        if let Some(card) = with.get("agentCard") {
            let (uri, auth) = endpoint(card.get("endpoint"), "the agent card's endpoint")?;
            let card = self.agent_card(&uri, auth.clone(), idempotency_key).await?;
            let (url, version) = interface(&card, &uri)?;
            return Ok(Target {
                url,
                auth,
                version: Some(version),
            });
        }
        let (url, auth) = endpoint(with.get("server"), "the A2A server")?;
        let version = self
            .protocols
            .cache
            .get(&version_key(&url))
            .and_then(|v| v.as_str().map(Version::of));
        Ok(Target { url, auth, version })
    }

    /// The card at `uri`: kept, or read and kept.
    async fn agent_card(
        &self,
        uri: &str,
        auth: Option<Credentials>,
        idempotency_key: &str,
    ) -> Result<Value, DslError> {
        let key = format!("card {uri}");
        if let Some(card) = self.protocols.cache.get(&key) {
            return Ok(card);
        }
        let mut request = Request::new("GET", uri)?;
        request
            .headers
            .push(("accept".to_owned(), "application/json".to_owned()));
        request.auth = auth;
        let card = self
            .send(request, &format!("{idempotency_key}/agentCard"))
            .await
            .map_err(|mut e| {
                e.detail = Some(format!(
                    "reading the agent card: {}",
                    e.detail.unwrap_or_default()
                ));
                e
            })?;
        if !card.is_object() {
            return Err(DslError::runtime(format!(
                "the agent card at {uri} is not a JSON object"
            )));
        }
        self.protocols.cache.put(&key, card.clone());
        Ok(card)
    }

    /// Sends the method in `version` to the target: its result (a stream's: the array of its
    /// results), or the JSON-RPC error the agent answered.
    async fn a2a_send(
        &self,
        target: &Target,
        version: Version,
        method: &str,
        params: &Value,
        idempotency_key: &str,
    ) -> Result<Result<Value, Value>, DslError> {
        let streaming = matches!(method, "message/stream" | "tasks/resubscribe");
        let params = prepare(method, params.clone(), version, idempotency_key);
        let mut headers = vec![(
            "accept".to_owned(),
            if streaming {
                "text/event-stream, application/json"
            } else {
                "application/json, text/event-stream"
            }
            .to_owned(),
        )];
        if version == Version::V1 {
            headers.push(("a2a-version".to_owned(), "1.0".to_owned()));
        }
        let post = Post {
            url: target.url.clone(),
            headers,
            auth: target.auth.clone(),
            body: super::rpc_request(Some(1), version.method(method), Some(params)),
            timeout: A2A_TIMEOUT,
        };
        let answer = self
            .post_rpc(post, idempotency_key, |m| {
                !streaming && super::answers(m, 1)
            })
            .await?;
        let mut results = Vec::new();
        for message in answer.messages {
            if let Some(error) = message.get("error") {
                return Ok(Err(error.clone()));
            }
            if let Some(result) = message.get("result") {
                results.push(result.clone());
            }
        }
        if streaming {
            return Ok(Ok(Value::Array(results)));
        }
        match results.into_iter().next() {
            Some(result) => Ok(Ok(result)),
            None => Err(DslError::runtime(format!(
                "{} answered no JSON-RPC result to {method}",
                target.url
            ))),
        }
    }
}

/// The key of what a server's A2A version turned out to be.
fn version_key(url: &str) -> String {
    format!("a2a version {url}")
}

/// The card's JSON-RPC interface: its URL (resolved against the card's) and version.
fn interface(card: &Value, card_uri: &str) -> Result<(String, Version), DslError> {
    let is_jsonrpc = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .is_some_and(|b| b.eq_ignore_ascii_case("JSONRPC"))
    };
    let found = if let Some(list) = card.get("supportedInterfaces").and_then(Value::as_array) {
        list.iter()
            .find(|i| is_jsonrpc(i.get("protocolBinding")))
            .and_then(|i| {
                let version = i.get("protocolVersion").and_then(Value::as_str);
                Some((
                    i.get("url")?.as_str()?,
                    version.map_or(Version::V1, Version::of),
                ))
            })
    } else {
        let version = card
            .get("protocolVersion")
            .and_then(Value::as_str)
            .map_or(Version::V03, Version::of);
        let preferred = card.get("preferredTransport");
        let url = if preferred.is_none() || is_jsonrpc(preferred) {
            card.get("url").and_then(Value::as_str)
        } else {
            card.get("additionalInterfaces")
                .and_then(Value::as_array)
                .and_then(|l| l.iter().find(|i| is_jsonrpc(i.get("transport"))))
                .and_then(|i| i.get("url")?.as_str())
        };
        url.map(|u| (u, version))
    };
    let Some((url, version)) = found else {
        return Err(DslError::runtime(format!(
            "the agent card at {card_uri} names no JSON-RPC interface"
        )));
    };
    let base = reqwest::Url::parse(card_uri)
        .map_err(|e| super::configuration(format!("{card_uri}: {e}")))?;
    let url = base
        .join(url)
        .map_err(|e| DslError::runtime(format!("the agent card's URL {url} is not a URL: {e}")))?;
    Ok((url.to_string(), version))
}

/// The params as sent: a message's defaults, and 1.0's spelling for a 1.0 agent.
fn prepare(method: &str, mut params: Value, version: Version, idempotency_key: &str) -> Value {
    if !matches!(method, "message/send" | "message/stream") {
        return params;
    }
    if let Some(Value::Object(message)) = params.get_mut("message") {
        message
            .entry("messageId")
            .or_insert_with(|| json!(message_id(idempotency_key)));
        message.entry("role").or_insert_with(|| json!("user"));
        if version == Version::V1 {
            message_to_v1(message);
        }
    }
    if version == Version::V1
        && let Some(Value::Object(configuration)) = params.get_mut("configuration")
        && configuration.remove("blocking") == Some(Value::Bool(false))
    {
        configuration
            .entry("returnImmediately")
            .or_insert(Value::Bool(true));
    }
    params
}

/// The message id of a call: a name-based UUID (version 5, SHA-1) of its idempotency key.
pub(super) fn message_id(idempotency_key: &str) -> String {
    use sha1::{Digest, Sha1};
    /// agentry's namespace of A2A message ids (a random UUID, fixed).
    const NAMESPACE: [u8; 16] = [
        0x6b, 0x1f, 0x3c, 0x52, 0x9a, 0x0e, 0x4d, 0x7b, 0x8e, 0x21, 0x5f, 0xc4, 0x90, 0x3a, 0x17,
        0xd6,
    ];
    let mut hasher = Sha1::new();
    hasher.update(NAMESPACE);
    hasher.update(idempotency_key.as_bytes());
    let digest = hasher.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_sha1_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// Rewrites a 0.3 message as A2A 1.0 spells it (what is in 1.0's spelling is kept).
fn message_to_v1(message: &mut Map<String, Value>) {
    message.remove("kind");
    if let Some(role) = message.get_mut("role") {
        match role.as_str() {
            Some("user") => *role = json!("ROLE_USER"),
            Some("agent") => *role = json!("ROLE_AGENT"),
            _ => {}
        }
    }
    if let Some(Value::Array(parts)) = message.get_mut("parts") {
        for part in parts.iter_mut().filter_map(Value::as_object_mut) {
            part_to_v1(part);
        }
    }
}

/// Rewrites a 0.3 part (`kind`: `text`, `data`, `file`) as A2A 1.0 spells it.
fn part_to_v1(part: &mut Map<String, Value>) {
    let Some(kind) = part.remove("kind") else {
        return;
    };
    if kind != "file" {
        return;
    }
    let Some(Value::Object(file)) = part.remove("file") else {
        return;
    };
    for (old, new) in [
        ("uri", "url"),
        ("bytes", "raw"),
        ("mimeType", "mediaType"),
        ("name", "filename"),
    ] {
        if let Some(v) = file.get(old) {
            part.entry(new).or_insert_with(|| v.clone());
        }
    }
}
