//! The built-in offline model (`offline`): deterministic, tool-using, schema-valid objects, no
//! network. It lets the whole service run, demo and be tested anywhere.
//!
//! - Text: `You said: <last user message>`, streamed a word at a time.
//! - Tools: `weather in <City>` calls `get_weather`, `calculate <expr>` calls `calculate`,
//!   `ask <agent> to <task>` calls `delegate_task`, when the agent has that tool; once the results
//!   are in, it answers with a sentence that contains them.
//! - Objects: an instance of the requested schema (required properties filled with type-correct
//!   values, `enum`, `minimum`/`maximum` honoured), streamed as growing JSON.
//! - `maxOutputTokens` truncates the answer to that many words, with `finishReason: length`.

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Map, Value, json};

use super::message::{FinishReason, Message, Role, ToolCall, Usage};
use super::model::{ChunkStream, Model, ModelChunk, ModelError, ModelRequest, ModelResponse};

/// The offline model.
#[derive(Debug, Default, Clone, Copy)]
pub struct OfflineModel;

fn words(s: &str) -> u64 {
    s.split_whitespace().count() as u64
}

/// Text after `marker` (case-insensitive), up to sentence punctuation.
fn after<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    let lower = text.to_lowercase();
    let at = lower.find(marker)?;
    // Lowercasing can change byte lengths for non-ASCII text; only trust ASCII positions.
    if !text.is_char_boundary(at + marker.len()) || lower.len() != text.len() {
        return None;
    }
    Some(text[at + marker.len()..].trim())
}

fn city_of(text: &str) -> Option<String> {
    let rest = after(text, "weather in ")?;
    let city: String = rest
        .chars()
        .take_while(|c| !matches!(c, '?' | '!' | ',' | ';' | '.' | '\n'))
        .collect();
    let city = city.trim();
    (!city.is_empty()).then(|| city.to_owned())
}

fn expression_of(text: &str) -> Option<String> {
    let rest = after(text, "calculate ")?;
    let expr = rest
        .trim_end_matches(['?', '!', '\n', ' '])
        .trim_end_matches('.')
        .trim();
    (!expr.is_empty()).then(|| expr.to_owned())
}

fn delegation_of(text: &str) -> Option<(String, String)> {
    let t = text.trim();
    if !t.to_lowercase().starts_with("ask ") {
        return None;
    }
    let rest = &t[4..];
    let (agent, task) = rest.split_once(" to ")?;
    let agent = agent.trim();
    let task = task.trim();
    (!agent.is_empty() && !task.is_empty() && !agent.contains(' '))
        .then(|| (agent.to_owned(), task.to_owned()))
}

fn describe_result(name: &str, result: &Value, is_error: bool) -> String {
    if is_error {
        let msg = result
            .get("error")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| result.to_string());
        return format!("The {name} tool failed: {msg}.");
    }
    match name {
        "get_weather" => format!(
            "The weather in {} is {} at {}°C.",
            result["city"].as_str().unwrap_or("that city"),
            result["condition"].as_str().unwrap_or("unknown"),
            result["temperatureC"]
        ),
        "calculate" => format!(
            "The result of {} is {}.",
            result["expression"].as_str().unwrap_or("the expression"),
            result["result"]
        ),
        "delegate_task" => format!(
            "{} answered: {}",
            result["agent"].as_str().unwrap_or("The agent"),
            result["text"].as_str().unwrap_or("")
        ),
        _ => format!("The {name} tool returned {result}."),
    }
}

/// A value valid against `schema` (the subset agents use: type, properties, items, required,
/// enum, const, minimum/maximum, minItems, minLength/maxLength, format).
pub fn instance_of(schema: &Value, hint: &str) -> Value {
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    if let Some(first) = schema
        .get("anyOf")
        .or_else(|| schema.get("oneOf"))
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return instance_of(first, hint);
    }
    let ty = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if schema.get("properties").is_some() => "object",
        _ if schema.get("items").is_some() => "array",
        _ => "string",
    };
    match ty {
        "object" => {
            let mut out = Map::new();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, v) in props {
                    out.insert(k.clone(), instance_of(v, k));
                }
            }
            if let Some(req) = schema.get("required").and_then(Value::as_array) {
                for k in req.iter().filter_map(Value::as_str) {
                    out.entry(k.to_owned()).or_insert_with(|| json!(k));
                }
            }
            Value::Object(out)
        }
        "array" => {
            let n = schema.get("minItems").and_then(Value::as_u64).unwrap_or(1);
            let item = schema.get("items").cloned().unwrap_or(json!({}));
            Value::Array((0..n).map(|_| instance_of(&item, hint)).collect())
        }
        "integer" | "number" => {
            let min = schema.get("minimum").and_then(Value::as_f64).or_else(|| {
                schema
                    .get("exclusiveMinimum")
                    .and_then(Value::as_f64)
                    .map(|m| m.floor() + 1.0)
            });
            let max = schema.get("maximum").and_then(Value::as_f64).or_else(|| {
                schema
                    .get("exclusiveMaximum")
                    .and_then(Value::as_f64)
                    .map(|m| m.ceil() - 1.0)
            });
            let mut x = min.unwrap_or(1.0).max(1.0_f64.min(max.unwrap_or(1.0)));
            if let Some(m) = min {
                x = x.max(m);
            }
            if let Some(m) = max {
                x = x.min(m);
            }
            if ty == "integer" || x.fract() == 0.0 {
                json!(x.ceil() as i64)
            } else {
                json!(x)
            }
        }
        "boolean" => json!(true),
        "null" => Value::Null,
        _ => {
            let s = match schema.get("format").and_then(Value::as_str) {
                Some("date-time") => "2026-01-01T00:00:00Z".to_owned(),
                Some("date") => "2026-01-01".to_owned(),
                Some("time") => "00:00:00Z".to_owned(),
                Some("email") => "user@example.com".to_owned(),
                Some("uri") | Some("url") => "https://example.com/".to_owned(),
                Some("uuid") => "00000000-0000-4000-8000-000000000000".to_owned(),
                Some("ipv4") => "127.0.0.1".to_owned(),
                _ => format!("example {hint}"),
            };
            let min = schema.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
            let max = schema
                .get("maxLength")
                .and_then(Value::as_u64)
                .map(|m| m as usize);
            let mut s = s;
            while s.chars().count() < min {
                s.push('x');
            }
            if let Some(m) = max {
                s = s.chars().take(m).collect();
            }
            json!(s)
        }
    }
}

impl OfflineModel {
    /// The whole answer, deterministically, from the request.
    pub fn answer(&self, req: &ModelRequest) -> ModelResponse {
        let prompt_tokens = req
            .messages
            .iter()
            .map(|m| words(&m.content))
            .sum::<u64>()
            .max(1);
        let has_tool = |n: &str| req.tools.iter().any(|t| t.name == n);
        let last_user = req.messages.iter().rposition(|m| m.role == Role::User);
        let user_text = last_user
            .map(|i| req.messages[i].content.clone())
            .unwrap_or_default();
        let since_user: &[Message] = match last_user {
            Some(i) => &req.messages[i + 1..],
            None => &[],
        };
        let results: Vec<_> = since_user
            .iter()
            .filter_map(|m| m.tool_result.as_ref())
            .collect();

        let (mut text, tool_calls) = if let Some(schema) = &req.output_schema {
            (instance_of(schema, "value").to_string(), Vec::new())
        } else if !results.is_empty() {
            let parts: Vec<String> = results
                .iter()
                .map(|r| describe_result(&r.tool_name, &r.result, r.is_error))
                .collect();
            (parts.join(" "), Vec::new())
        } else {
            let n = req.messages.iter().filter(|m| m.role == Role::Tool).count();
            let call = |name: &str, args: Value| ToolCall {
                tool_call_id: format!("call_{}", n + 1),
                tool_name: name.to_owned(),
                args,
            };
            let pick = if has_tool("delegate_task")
                && let Some((agent, task)) = delegation_of(&user_text)
            {
                Some(call("delegate_task", json!({"agent": agent, "task": task})))
            } else if has_tool("get_weather")
                && let Some(city) = city_of(&user_text)
            {
                Some(call("get_weather", json!({"city": city})))
            } else if has_tool("calculate")
                && let Some(expr) = expression_of(&user_text)
            {
                Some(call("calculate", json!({"expression": expr})))
            } else {
                None
            };
            match pick {
                Some(c) => (String::new(), vec![c]),
                None => (format!("You said: {user_text}"), Vec::new()),
            }
        };

        let mut finish_reason = if tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        };
        let limit = req.settings.max_output_tokens as usize;
        if req.output_schema.is_none() && text.split_whitespace().count() > limit {
            text = text
                .split_whitespace()
                .take(limit)
                .collect::<Vec<_>>()
                .join(" ");
            finish_reason = FinishReason::Length;
        }
        let completion_tokens = (words(&text) + tool_calls.len() as u64).max(1);
        ModelResponse {
            text,
            tool_calls,
            finish_reason,
            usage: Usage {
                prompt_tokens,
                completion_tokens,
                total_tokens: prompt_tokens + completion_tokens,
                cached_input_tokens: 0,
                reasoning_tokens: 0,
            },
        }
    }
}

/// Splits text into chunks of about a word each, keeping the whitespace, so that concatenating
/// them gives the text back.
pub fn word_chunks(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.chars() {
        cur.push(c);
        if c == ' ' {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Splits a JSON document into small pieces (for streaming objects).
fn json_chunks(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(8).map(|c| c.iter().collect()).collect()
}

#[async_trait]
impl Model for OfflineModel {
    fn name(&self) -> &str {
        "offline"
    }

    async fn generate(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        Ok(self.answer(request))
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ChunkStream, ModelError> {
        let resp = self.answer(request);
        let pieces = if request.output_schema.is_some() {
            json_chunks(&resp.text)
        } else {
            word_chunks(&resp.text)
        };
        let mut chunks: Vec<Result<ModelChunk, ModelError>> = pieces
            .into_iter()
            .map(|p| Ok(ModelChunk::TextDelta(p)))
            .collect();
        chunks.extend(
            resp.tool_calls
                .into_iter()
                .map(|c| Ok(ModelChunk::ToolCall(c))),
        );
        chunks.push(Ok(ModelChunk::Finish {
            finish_reason: resp.finish_reason,
            usage: resp.usage,
        }));
        // Yield between chunks so that a consumer really sees them one by one.
        Ok(futures::stream::iter(chunks)
            .then(|c| async move {
                tokio::task::yield_now().await;
                c
            })
            .boxed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::model::{GenerationSettings, ToolSpec};
    use crate::schema::Schema;

    fn req(text: &str, tools: &[&str]) -> ModelRequest {
        ModelRequest {
            messages: vec![Message::system("be nice"), Message::user(text)],
            tools: tools
                .iter()
                .map(|n| ToolSpec {
                    name: (*n).into(),
                    description: String::new(),
                    parameters: json!({}),
                })
                .collect(),
            settings: GenerationSettings::default(),
            output_schema: None,
        }
    }

    #[test]
    fn echoes_deterministically() {
        let a = OfflineModel.answer(&req("hello there", &[]));
        assert_eq!(a.text, "You said: hello there");
        assert_eq!(a.finish_reason, FinishReason::Stop);
        assert_eq!(a, OfflineModel.answer(&req("hello there", &[])));
        assert_eq!(
            a.usage.total_tokens,
            a.usage.prompt_tokens + a.usage.completion_tokens
        );
        assert!(a.usage.prompt_tokens > 0 && a.usage.completion_tokens > 0);
    }

    #[test]
    fn picks_tools_only_when_the_agent_has_them() {
        let a = OfflineModel.answer(&req("What is the weather in New York?", &["get_weather"]));
        assert_eq!(a.tool_calls[0].tool_name, "get_weather");
        assert_eq!(a.tool_calls[0].args, json!({"city": "New York"}));
        let a = OfflineModel.answer(&req("What is the weather in Paris?", &[]));
        assert!(a.tool_calls.is_empty());
        let a = OfflineModel.answer(&req("please calculate (2 + 3) * 4.5?", &["calculate"]));
        assert_eq!(a.tool_calls[0].args, json!({"expression": "(2 + 3) * 4.5"}));
        let a = OfflineModel.answer(&req("ask writer to draft a haiku", &["delegate_task"]));
        assert_eq!(
            a.tool_calls[0].args,
            json!({"agent": "writer", "task": "draft a haiku"})
        );
    }

    #[test]
    fn answers_with_the_tool_result() {
        let mut r = req("weather in Paris", &["get_weather"]);
        let call = OfflineModel.answer(&r).tool_calls.remove(0);
        r.messages.push(Message::tool_calls("", vec![call.clone()]));
        r.messages
            .push(Message::tool_result(super::super::message::ToolResult {
                tool_call_id: call.tool_call_id,
                tool_name: call.tool_name,
                args: call.args,
                result: json!({"city": "Paris", "temperatureC": 21, "condition": "sunny"}),
                is_error: false,
            }));
        let a = OfflineModel.answer(&r);
        assert!(a.tool_calls.is_empty());
        assert!(
            a.text.contains("21") && a.text.contains("sunny"),
            "{}",
            a.text
        );
    }

    #[test]
    fn truncates_to_max_output_tokens() {
        let mut r = req("one two three four five", &[]);
        r.settings.max_output_tokens = 3;
        let a = OfflineModel.answer(&r);
        assert_eq!(a.text, "You said: one");
        assert_eq!(a.finish_reason, FinishReason::Length);
    }

    #[test]
    fn objects_validate_against_their_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 3},
                "age": {"type": "integer", "minimum": 18, "maximum": 99},
                "score": {"type": "number", "maximum": 0.5},
                "mood": {"type": "string", "enum": ["happy", "sad"]},
                "email": {"type": "string", "format": "email"},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
                "address": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
            },
            "required": ["name", "age", "mood", "tags"]
        });
        let mut r = req("make a person", &[]);
        r.output_schema = Some(schema.clone());
        let a = OfflineModel.answer(&r);
        let v: Value = serde_json::from_str(&a.text).unwrap();
        Schema::compile(schema).unwrap().validate(&v).unwrap();
        assert_eq!(v["age"], 18);
        assert_eq!(v["mood"], "happy");
        let arr = instance_of(&json!({"type": "array", "items": {"type": "integer"}}), "x");
        assert_eq!(arr, json!([1]));
    }

    #[test]
    fn chunks_concatenate_to_the_text() {
        let t = "You said: hello  big world";
        assert_eq!(word_chunks(t).concat(), t);
        assert!(word_chunks(t).len() >= 4);
    }
}
