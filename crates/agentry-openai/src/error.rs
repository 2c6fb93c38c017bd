//! async-openai errors -> `ModelError`s that name their cause.

use std::error::Error as _;

use agentry_core::agent::ModelError;
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

pub(crate) fn model_error(base_url: &str, e: OpenAIError) -> ModelError {
    let message = match e {
        OpenAIError::ApiError(r) => {
            let status = r.status_code;
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
            if detail.is_empty() {
                format!("the OpenAI-compatible endpoint answered HTTP {status}")
            } else {
                format!("the OpenAI-compatible endpoint answered HTTP {status}: {detail}")
            }
        }
        OpenAIError::Reqwest(e) => {
            let mut text = format!("request to {base_url} failed: {e}");
            let mut source = e.source();
            while let Some(s) = source {
                text.push_str(&format!(": {s}"));
                source = s.source();
            }
            text
        }
        OpenAIError::JSONDeserialize(e, body) => format!(
            "could not read the endpoint's response ({e}); body: {}",
            truncate(&body)
        ),
        OpenAIError::StreamError(e) => match *e {
            StreamError::EventStream(msg) => format!("the response stream failed: {msg}"),
            other => format!("the response stream failed: {other}"),
        },
        other => other.to_string(),
    };
    ModelError::new(message)
}
