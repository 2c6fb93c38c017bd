//! agentry's model provider for OpenAI-compatible chat completion endpoints.
//!
//! [`OpenAiModel`] implements [`agentry_agents::Model`] on top of
//! [async-openai](https://docs.rs/async-openai) 0.43: `POST {base_url}/chat/completions`, plain or
//! streamed (server-sent events). It talks to OpenAI itself and to anything that speaks the same
//! wire format (vLLM, Ollama, LM Studio, LiteLLM, OpenRouter, Azure-style proxies...).
//!
//! # Settings
//!
//! [`OpenAiSettings::from_env`] reads `OPENAI_API_KEY`, `OPENAI_BASE_URL` and `AGENTRY_MODEL`
//! (default [`DEFAULT_MODEL`]); it returns `None` when neither a key nor a base URL is set, so the
//! caller can fall back to the offline model. The base URL includes the API version segment, as
//! with OpenAI's own SDKs (`https://api.openai.com/v1`, `http://localhost:11434/v1`).
//!
//! # What is mapped
//!
//! - Messages: system, user, assistant (with its tool calls, arguments re-encoded as JSON text),
//!   tool (with `tool_call_id` and the result JSON as content).
//! - Tools: function tools with their JSON Schema parameters.
//! - Settings: `temperature`, `top_p`, `frequency_penalty`, `presence_penalty`, `seed`, `stop`
//!   and the output limit as `max_completion_tokens` (async-openai's non-deprecated field; OpenAI
//!   rejects `max_tokens` for reasoning models). `top_p` and the penalties are left out when they
//!   hold the API's own defaults (1 and 0), since some models reject them at all.
//! - `provider_options`: either namespaced (`{"openai": {...}}`, other namespaces ignored) or a
//!   flat object; its top-level keys are converted from the AI SDK's camelCase to the wire's
//!   snake_case (`reasoningEffort` -> `reasoning_effort`, `textVerbosity` -> `verbosity`) and
//!   merged into the request body, overriding what the settings produced; a `null` value removes
//!   the field (e.g. `{"openai": {"temperature": null}}` for models that reject it).
//!   `strictJsonSchema: true` turns on strict mode for the JSON Schema response format;
//!   `maxTokens`/`max_tokens` replaces `max_completion_tokens` for servers that only know the
//!   older field.
//! - `output_schema`: the `json_schema` response format (strict off unless asked), the JSON text
//!   is returned as the response text.
//! - Results: finish reasons (`stop`, `length`, `tool_calls`/`function_call`, `content_filter`,
//!   anything else is `Other`) and usage (prompt, completion, total, cached input tokens,
//!   reasoning tokens; missing counts are 0).
//!
//! # Embeddings
//!
//! [`OpenAiEmbedder`] implements [`agentry_agents::Embedder`] on `POST {base_url}/embeddings`
//! (`{model, input: [...]}`, vectors read from `data[].embedding` by `index`), with the chat
//! model's HTTP client, time-outs, headers and error mapping; a 429's `Retry-After` (in seconds)
//! is kept in the error's `retry_after`.
//!
//! # Errors and streams
//!
//! Failures become `ModelError`s naming the cause: `HTTP 401 Unauthorized: invalid_request_error:
//! Incorrect API key provided... (code: invalid_api_key)`, the transport error with the base URL,
//! or an unreadable body. async-openai retries 429 (except `insufficient_quota`), 5xx and
//! connection errors three times with backoff before giving up. A 4xx whose body is not an
//! OpenAI error object is reported with its body but without its status code (async-openai does
//! not pass the status on in that case).
//!
//! A stream yields text deltas as they come, each tool call once complete (fragments assembled
//! by index, arguments parsed from the joined JSON text, kept as a string when that text is not
//! JSON), then one `Finish`. Dropping it drops async-openai's event stream, which closes the
//! upstream connection.
//!
//! Responses are decoded into lenient local types (async-openai's "bring your own types" API)
//! rather than async-openai's typed response, so compatible servers that omit fields or report
//! unknown finish reasons still work.

mod embedding;
mod error;
mod request;
mod response;
mod stream;

use std::fmt;
use std::time::Duration;

pub use embedding::OpenAiEmbedder;

use agentry_agents::{ChunkStream, Model, ModelError, ModelRequest, ModelResponse};
use async_openai::Client;
use async_openai::config::{OPENAI_API_BASE, OpenAIConfig};
use async_trait::async_trait;
use serde_json::Value;

/// The model used when `AGENTRY_MODEL` is not set.
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";

/// Where and what to call.
#[derive(Clone, PartialEq, Eq)]
pub struct OpenAiSettings {
    /// Sent as `Authorization: Bearer ...`; `None` sends an empty bearer (fine for local servers).
    pub api_key: Option<String>,
    /// The API base, e.g. `http://localhost:8000/v1`; `None` is OpenAI's
    /// (`https://api.openai.com/v1`).
    pub base_url: Option<String>,
    /// The model name sent with every request and shown in agent listings.
    pub model: String,
}

impl OpenAiSettings {
    /// Settings from `OPENAI_API_KEY`, `OPENAI_BASE_URL` and `AGENTRY_MODEL` (default
    /// `gpt-4o-mini`). `None` when neither a key nor a base URL is set (empty values count as
    /// unset).
    pub fn from_env() -> Option<Self> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Like [`OpenAiSettings::from_env`], reading variables through `lookup`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Option<Self> {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let api_key = get("OPENAI_API_KEY");
        let base_url = get("OPENAI_BASE_URL");
        if api_key.is_none() && base_url.is_none() {
            return None;
        }
        Some(Self {
            api_key,
            base_url,
            model: get("AGENTRY_MODEL").unwrap_or_else(|| DEFAULT_MODEL.to_owned()),
        })
    }
}

impl fmt::Debug for OpenAiSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiSettings")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .finish()
    }
}

/// How long the endpoint may stay silent (no byte of an answer or of a stream) before the call
/// fails as timed out.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// How long connecting to the endpoint may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A model served by an OpenAI-compatible chat completions endpoint.
#[derive(Clone)]
pub struct OpenAiModel {
    client: Client<OpenAIConfig>,
    model: String,
    base_url: String,
}

/// The HTTP client of every call to the endpoint: its calls time out when the endpoint stays
/// silent for `read_timeout` (a hung provider fails as timed out instead of holding the
/// request). `None` when it cannot be built (the caller then uses a default one).
fn http_client(read_timeout: Duration) -> Option<reqwest::Client> {
    let http = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(read_timeout)
        .build();
    http.map_err(|e| {
        tracing::warn!(error = %e, "cannot build the HTTP client with time-outs; using the default one");
    })
    .ok()
}

/// The async-openai client of `config` on [`http_client`].
fn client(config: OpenAIConfig, read_timeout: Duration) -> Client<OpenAIConfig> {
    match http_client(read_timeout) {
        Some(http) => Client::with_config(config).with_http_client(http),
        None => Client::with_config(config),
    }
}

/// The configuration of `settings`, set explicitly: `OpenAIConfig::default()` would otherwise
/// read `OPENAI_API_KEY`/`OPENAI_BASE_URL` behind the settings' back. Also returns the base URL
/// (without a trailing slash).
fn config(settings: &OpenAiSettings) -> (OpenAIConfig, String) {
    let base_url = settings
        .base_url
        .as_deref()
        .unwrap_or(OPENAI_API_BASE)
        .trim_end_matches('/')
        .to_owned();
    let config = OpenAIConfig::new()
        .with_api_base(base_url.clone())
        .with_api_key(settings.api_key.clone().unwrap_or_default());
    (config, base_url)
}

impl fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl OpenAiModel {
    pub fn new(settings: OpenAiSettings) -> Self {
        let (config, base_url) = config(&settings);
        Self {
            client: client(config, DEFAULT_READ_TIMEOUT),
            model: settings.model,
            base_url,
        }
    }

    /// This model with another read time-out ([`DEFAULT_READ_TIMEOUT`] by default).
    pub fn with_read_timeout(mut self, read_timeout: Duration) -> Self {
        let config = self.client.config().clone();
        self.client = client(config, read_timeout);
        self
    }

    /// [`OpenAiModel::new`] with [`OpenAiSettings::from_env`]; `None` when no endpoint is set.
    pub fn from_env() -> Option<Self> {
        OpenAiSettings::from_env().map(Self::new)
    }

    /// The API base requests go to (without a trailing slash).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The JSON body this model would send for `request` (what `generate` sends when `stream`
    /// is false, what `stream` sends when it is true).
    pub fn request_body(&self, request: &ModelRequest, stream: bool) -> Result<Value, ModelError> {
        request::build_body(&self.model, request, stream)
    }
}

#[async_trait]
impl Model for OpenAiModel {
    fn name(&self) -> &str {
        &self.model
    }

    async fn generate(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let body = self.request_body(request, false)?;
        tracing::debug!(model = %self.model, base_url = %self.base_url, "chat completion");
        let response: response::WireResponse = self
            .client
            .chat()
            .create_byot(body)
            .await
            .map_err(|e| error::model_error(&self.base_url, e))?;
        response::into_model_response(response)
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ChunkStream, ModelError> {
        let body = self.request_body(request, true)?;
        tracing::debug!(model = %self.model, base_url = %self.base_url, "streamed chat completion");
        let upstream = self
            .client
            .chat()
            .create_stream_byot::<Value, response::WireChunk>(body)
            .await
            .map_err(|e| error::model_error(&self.base_url, e))?;
        Ok(stream::chunks(upstream, self.base_url.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn settings_need_a_key_or_a_base_url() {
        assert_eq!(OpenAiSettings::from_lookup(env(&[])), None);
        assert_eq!(
            OpenAiSettings::from_lookup(env(&[("AGENTRY_MODEL", "x"), ("OPENAI_API_KEY", " ")])),
            None
        );
        let s = OpenAiSettings::from_lookup(env(&[("OPENAI_API_KEY", "sk-1")])).unwrap();
        assert_eq!(s.api_key.as_deref(), Some("sk-1"));
        assert_eq!(s.base_url, None);
        assert_eq!(s.model, DEFAULT_MODEL);
        let s = OpenAiSettings::from_lookup(env(&[
            ("OPENAI_BASE_URL", "http://localhost:11434/v1"),
            ("AGENTRY_MODEL", "llama3.2"),
        ]))
        .unwrap();
        assert_eq!(s.api_key, None);
        assert_eq!(s.base_url.as_deref(), Some("http://localhost:11434/v1"));
        assert_eq!(s.model, "llama3.2");
    }

    #[test]
    fn debug_output_hides_the_key() {
        let s = OpenAiSettings {
            api_key: Some("sk-secret".into()),
            base_url: None,
            model: "m".into(),
        };
        assert!(!format!("{s:?}").contains("sk-secret"));
    }

    #[test]
    fn base_url_defaults_to_openai_and_loses_trailing_slash() {
        let m = OpenAiModel::new(OpenAiSettings {
            api_key: None,
            base_url: None,
            model: "m".into(),
        });
        assert_eq!(m.base_url(), "https://api.openai.com/v1");
        assert_eq!(m.name(), "m");
        let m = OpenAiModel::new(OpenAiSettings {
            api_key: None,
            base_url: Some("http://localhost:1234/v1/".into()),
            model: "m".into(),
        });
        assert_eq!(m.base_url(), "http://localhost:1234/v1");
    }
}
