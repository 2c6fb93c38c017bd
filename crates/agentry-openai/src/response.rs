//! The response side of the wire format, decoded leniently.
//!
//! async-openai's typed responses reject what some OpenAI-compatible servers send (unknown
//! finish reasons, missing `created`/`object`, `null` lists), so responses are decoded into these
//! local types through its bring-your-own-types methods (`create_byot`, `create_stream_byot`).

use agentry_agents::{FinishReason, ModelError, ModelResponse, ToolCall, Usage};
use serde::Deserialize;
use serde_json::Value;

/// `chat.completion`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireResponse {
    #[serde(default)]
    pub choices: Option<Vec<WireChoice>>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// Some proxies answer an upstream failure with 200 and an error object.
    #[serde(default)]
    pub error: Option<WireError>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireChoice {
    #[serde(default)]
    pub message: Option<WireMessage>,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireMessage {
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub refusal: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireToolCall {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub function: Option<WireFunction>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireFunction {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub arguments: Option<String>,
}

/// `chat.completion.chunk`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireChunk {
    #[serde(default)]
    pub choices: Option<Vec<WireStreamChoice>>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    #[serde(default)]
    pub error: Option<WireError>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireStreamChoice {
    #[serde(default)]
    pub delta: Option<WireDelta>,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireDelta {
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub refusal: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<WireToolCallChunk>>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireToolCallChunk {
    #[serde(default)]
    pub index: Option<u32>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub function: Option<WireFunction>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    #[serde(default)]
    pub total_tokens: Option<u64>,
    #[serde(default)]
    pub prompt_tokens_details: Option<WirePromptDetails>,
    #[serde(default)]
    pub completion_tokens_details: Option<WireCompletionDetails>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WirePromptDetails {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireCompletionDetails {
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireError {
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub code: Option<Value>,
}

impl WireError {
    pub fn describe(&self) -> String {
        let mut out = String::new();
        if let Some(kind) = &self.kind {
            out.push_str(kind);
            out.push_str(": ");
        }
        out.push_str(self.message.as_deref().unwrap_or("unknown error"));
        match &self.code {
            Some(Value::String(c)) => out.push_str(&format!(" (code: {c})")),
            Some(Value::Number(c)) => out.push_str(&format!(" (code: {c})")),
            _ => {}
        }
        out
    }
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        let prompt_tokens = u.prompt_tokens.unwrap_or(0);
        let completion_tokens = u.completion_tokens.unwrap_or(0);
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: u.total_tokens.unwrap_or(prompt_tokens + completion_tokens),
            cached_input_tokens: u
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
            reasoning_tokens: u
                .completion_tokens_details
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
        }
    }
}

pub(crate) fn finish_reason(reason: Option<&str>) -> FinishReason {
    match reason {
        Some("stop") => FinishReason::Stop,
        Some("length") => FinishReason::Length,
        Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
        Some("content_filter") => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

/// Tool call arguments from their JSON text: `{}` when empty, the raw text as a string when it is
/// not JSON.
pub(crate) fn parse_arguments(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

pub(crate) fn into_model_response(r: WireResponse) -> Result<ModelResponse, ModelError> {
    if let Some(e) = r.error {
        return Err(ModelError::new(format!(
            "the endpoint answered with an error: {}",
            e.describe()
        )));
    }
    let choice = r
        .choices
        .and_then(|c| c.into_iter().next())
        .ok_or_else(|| ModelError::new("the endpoint's response has no choices"))?;
    let message = choice.message.unwrap_or_default();
    let tool_calls = message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .filter_map(|(i, call)| {
            let function = call.function?;
            Some(ToolCall {
                tool_call_id: call.id.unwrap_or_else(|| format!("call_{i}")),
                tool_name: function.name.unwrap_or_default(),
                args: parse_arguments(function.arguments.as_deref().unwrap_or("")),
            })
        })
        .collect();
    Ok(ModelResponse {
        text: message.content.or(message.refusal).unwrap_or_default(),
        tool_calls,
        finish_reason: finish_reason(choice.finish_reason.as_deref()),
        usage: r.usage.map(Usage::from).unwrap_or_default(),
        model: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn usage_details_and_missing_counts() {
        let u: WireUsage = serde_json::from_value(json!({
            "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
            "prompt_tokens_details": {"cached_tokens": 4, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 2}
        }))
        .unwrap();
        assert_eq!(
            Usage::from(u),
            Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
                total_tokens: 15,
                cached_input_tokens: 4,
                reasoning_tokens: 2
            }
        );
        let u: WireUsage =
            serde_json::from_value(json!({"prompt_tokens": 3, "completion_tokens": 4})).unwrap();
        let u = Usage::from(u);
        assert_eq!((u.total_tokens, u.cached_input_tokens), (7, 0));
    }

    #[test]
    fn finish_reasons() {
        assert_eq!(finish_reason(Some("stop")), FinishReason::Stop);
        assert_eq!(finish_reason(Some("length")), FinishReason::Length);
        assert_eq!(finish_reason(Some("tool_calls")), FinishReason::ToolCalls);
        assert_eq!(
            finish_reason(Some("content_filter")),
            FinishReason::ContentFilter
        );
        assert_eq!(finish_reason(Some("eos")), FinishReason::Other);
        assert_eq!(finish_reason(None), FinishReason::Other);
    }

    #[test]
    fn lenient_response_decoding() {
        let r: WireResponse = serde_json::from_value(json!({
            "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
                {"type": "function", "function": {"name": "f", "arguments": ""}},
                {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{oops"}}
            ]}, "finish_reason": "eos"}]
        }))
        .unwrap();
        let r = into_model_response(r).unwrap();
        assert_eq!(r.text, "");
        assert_eq!(r.finish_reason, FinishReason::Other);
        assert_eq!(r.tool_calls[0].tool_call_id, "call_0");
        assert_eq!(r.tool_calls[0].args, json!({}));
        assert_eq!(r.tool_calls[1].args, json!("{oops"));
        assert_eq!(r.usage, Usage::default());
    }

    #[test]
    fn error_object_in_a_success_response() {
        let r: WireResponse =
            serde_json::from_value(json!({"error": {"message": "upstream down", "code": 502}}))
                .unwrap();
        let e = into_model_response(r).unwrap_err();
        assert!(e.message.contains("upstream down") && e.message.contains("502"));
    }
}
