//! async-openai errors -> `ModelError`s that name their cause.

use std::error::Error as _;

use agentry_agents::{ModelError, ModelErrorKind};
use async_openai::error::{OpenAIError, StreamError, WrappedError};

/// How much of an unexpected response body goes into an error message.
const BODY_LIMIT: usize = 500;

fn truncate(text: &str) -> String {
    let text = text.trim();
    if text.len() <= BODY_LIMIT {
        return text.to_owned();
    }
    let mut end = BODY_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

/// The kind of a provider's HTTP error status.
fn kind_of_status(status: u16) -> ModelErrorKind {
    match status {
        429 => ModelErrorKind::RateLimited,
        401 | 403 => ModelErrorKind::Unauthorized,
        408 | 504 => ModelErrorKind::TimedOut,
        500..=599 => ModelErrorKind::Unavailable,
        _ => ModelErrorKind::Refused,
    }
}

pub(crate) fn model_error(base_url: &str, e: OpenAIError) -> ModelError {
    match e {
        OpenAIError::ApiError(r) => {
            let status = r.status_code;
            let kind = kind_of_status(status.as_u16());
            if kind == ModelErrorKind::Unauthorized {
                // The provider's text may quote the key: name the provider, never echo it.
                return ModelError::of(
                    kind,
                    format!(
                        "the OpenAI-compatible endpoint at {base_url} refused the credentials \
                         (HTTP {status}): check OPENAI_API_KEY"
                    ),
                );
            }
            let api = r.api_error;
            // async-openai keeps a 5xx body as raw text; it is often still an OpenAI error object.
            let detail = if api.r#type.is_none() && api.code.is_none() && api.param.is_none() {
                match serde_json::from_str::<WrappedError>(&api.message) {
                    Ok(w) => w.error.to_string(),
                    Err(_) => truncate(&api.message),
                }
            } else {
                api.to_string()
            };
            let message = if detail.is_empty() {
                format!("the OpenAI-compatible endpoint answered HTTP {status}")
            } else {
                format!("the OpenAI-compatible endpoint answered HTTP {status}: {detail}")
            };
            ModelError::of(kind, message)
        }
        OpenAIError::Reqwest(e) => {
            let kind = if e.is_timeout() {
                ModelErrorKind::TimedOut
            } else if e.is_connect() || e.is_request() {
                ModelErrorKind::Unavailable
            } else {
                ModelErrorKind::Failed
            };
            let mut text = format!("request to {base_url} failed: {e}");
            let mut source = e.source();
            while let Some(s) = source {
                text.push_str(&format!(": {s}"));
                source = s.source();
            }
            ModelError::of(kind, text)
        }
        OpenAIError::JSONDeserialize(e, body) => ModelError::new(format!(
            "could not read the endpoint's response ({e}); body: {}",
            truncate(&body)
        )),
        OpenAIError::StreamError(e) => ModelError::of(
            ModelErrorKind::Unavailable,
            match *e {
                StreamError::EventStream(msg) => format!("the response stream failed: {msg}"),
                other => format!("the response stream failed: {other}"),
            },
        ),
        other => ModelError::new(other.to_string()),
    }
}
