//! The bodies of the agent routes, read by hand so that each failure names the field at fault:
//! the three input shapes and the generation options with their ranges (their schemas are in
//! `wire::agents`).

use agentry_core::agent::{GenerateOptions, GenerationSettings, MAX_CONTEXT_LIMIT, Message, Role};
use serde_json::{Map, Value};

use crate::error::AppError;

fn bad(msg: impl Into<String>) -> AppError {
    AppError::bad_request(msg)
}

fn role_of(v: &Value, at: &str, allow_tool: bool) -> Result<Role, AppError> {
    match v.as_str() {
        Some("system") => Ok(Role::System),
        Some("user") => Ok(Role::User),
        Some("assistant") => Ok(Role::Assistant),
        Some("tool") if allow_tool => Ok(Role::Tool),
        _ => Err(bad(format!(
            "{at}.role must be one of \"system\", \"user\", \"assistant\""
        ))),
    }
}

/// Normalises `input`: a string, an array of UIMessages (`role`, `parts`), or an array of
/// ModelMessages (`role`, `content`).
pub fn parse_input(input: Option<&Value>) -> Result<Vec<Message>, AppError> {
    const SHAPES: &str =
        "input must be a string, an array of UIMessages or an array of ModelMessages";
    let input = input.ok_or_else(|| bad("input is required"))?;
    match input {
        Value::String(s) => Ok(vec![Message::user(s.clone())]),
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let at = format!("input[{i}]");
                let obj = m
                    .as_object()
                    .ok_or_else(|| bad(format!("{SHAPES}: {at} is not an object")))?;
                let role = role_of(obj.get("role").unwrap_or(&Value::Null), &at, false)?;
                if let Some(parts) = obj.get("parts") {
                    let parts = parts
                        .as_array()
                        .ok_or_else(|| bad(format!("{at}.parts must be an array")))?;
                    let mut text = String::new();
                    for (j, p) in parts.iter().enumerate() {
                        match p.get("type").and_then(Value::as_str) {
                            Some("text") => {
                                text.push_str(p.get("text").and_then(Value::as_str).ok_or_else(
                                    || bad(format!("{at}.parts[{j}].text must be a string")),
                                )?)
                            }
                            Some(_) => {} // other part kinds (files, tools, steps) carry no prompt text
                            None => {
                                return Err(bad(format!("{at}.parts[{j}].type is required")));
                            }
                        }
                    }
                    Ok(Message::new(role, text))
                } else if let Some(content) = obj.get("content") {
                    match content {
                        Value::String(s) => Ok(Message::new(role, s.clone())),
                        Value::Array(parts) => {
                            // ModelMessage content parts: [{type: "text", text}]
                            let text: String = parts
                                .iter()
                                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                                .filter_map(|p| p.get("text").and_then(Value::as_str))
                                .collect();
                            Ok(Message::new(role, text))
                        }
                        _ => Err(bad(format!("{at}.content must be a string"))),
                    }
                } else {
                    Err(bad(format!("{SHAPES}: {at} has neither parts nor content")))
                }
            })
            .collect(),
        Value::Array(_) => Err(bad("input must not be empty")),
        _ => Err(bad(SHAPES)),
    }
}

fn number(o: &Map<String, Value>, key: &str, min: f64, max: f64) -> Result<Option<f64>, AppError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(x) if (min..=max).contains(&x) => Ok(Some(x)),
            _ => Err(bad(format!(
                "options.{key} must be a number between {min} and {max}"
            ))),
        },
    }
}

fn integer(o: &Map<String, Value>, key: &str, min: i64, max: i64) -> Result<Option<i64>, AppError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_i64().or_else(|| {
            v.as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                .map(|f| f as i64)
        }) {
            Some(x) if (min..=max).contains(&x) => Ok(Some(x)),
            _ => Err(bad(format!(
                "options.{key} must be an integer between {min} and {max}"
            ))),
        },
    }
}

fn string(o: &Map<String, Value>, key: &str) -> Result<Option<String>, AppError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            agentry_core::id::refuse_nul(&format!("options.{key}"), s).map_err(bad)?;
            Ok(Some(s.clone()))
        }
        Some(_) => Err(bad(format!("options.{key} must be a string"))),
    }
}

/// Validates and defaults `options` (spec sections 2 and 8).
pub fn parse_options(options: Option<&Value>) -> Result<GenerateOptions, AppError> {
    let empty = Map::new();
    let o = match options {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(o)) => o,
        Some(_) => return Err(bad("options must be an object")),
    };
    let d = GenerationSettings::default();
    let stop_sequences = match o.get("stopSequences") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|s| s.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| bad("options.stopSequences must be an array of strings"))?,
        Some(_) => return Err(bad("options.stopSequences must be an array of strings")),
    };
    let provider_options = match o.get("providerOptions") {
        None | Some(Value::Null) => None,
        Some(v @ Value::Object(_)) => Some(v.clone()),
        Some(_) => return Err(bad("options.providerOptions must be an object")),
    };
    let context = match o.get("context") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(bad("options.context must be an object")),
    };
    let mut user_id = string(o, "userId")?;
    if user_id.is_none() {
        user_id = context
            .get("userId")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(u) = &user_id {
            agentry_core::id::refuse_nul("options.context.userId", u).map_err(bad)?;
        }
    }
    Ok(GenerateOptions {
        user_id: user_id.map(Into::into),
        conversation_id: string(o, "conversationId")?,
        context_limit: integer(o, "contextLimit", 0, MAX_CONTEXT_LIMIT as i64)?.unwrap_or(10)
            as usize,
        max_steps: integer(o, "maxSteps", 1, 100)?.map(|x| x as u32),
        settings: GenerationSettings {
            temperature: number(o, "temperature", 0.0, 1.0)?.unwrap_or(d.temperature),
            max_output_tokens: integer(o, "maxOutputTokens", 1, 1_000_000)?
                .map(|x| x as u32)
                .unwrap_or(d.max_output_tokens),
            top_p: number(o, "topP", 0.0, 1.0)?.unwrap_or(d.top_p),
            frequency_penalty: number(o, "frequencyPenalty", 0.0, 2.0)?
                .unwrap_or(d.frequency_penalty),
            presence_penalty: number(o, "presencePenalty", 0.0, 2.0)?.unwrap_or(d.presence_penalty),
            seed: integer(o, "seed", i64::MIN, i64::MAX)?,
            stop_sequences,
            provider_options,
        },
        // Who is asking is decided by authentication, not by the body (see `AuthGate::caller`).
        caller: Default::default(),
        context,
    })
}

/// What a generation route reads from its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// `{input, options?}`.
    Text,
    /// As `Text`, and a chat client's `messages` in place of `input`.
    Chat,
    /// `{input, schema, options?}`.
    Object,
}

/// A validated generation request: the messages, the options, and for an object the schema
/// (compiled, and checked against the generation limits, by the hub).
#[derive(Debug, Clone)]
pub struct Generation {
    pub input: Vec<Message>,
    pub options: GenerateOptions,
    pub schema: Option<Value>,
}

/// Reads a generation route's body.
pub fn read_body(body: &Value, kind: BodyKind) -> Result<Generation, AppError> {
    let obj = body
        .as_object()
        .ok_or_else(|| bad("Invalid request body: expected a JSON object"))?;
    // A chat client's default transport sends `messages`; the spec's shape is `input`.
    let input = obj.get("input").or_else(|| {
        (kind == BodyKind::Chat)
            .then(|| obj.get("messages"))
            .flatten()
    });
    let input = parse_input(input)?;
    let options = parse_options(obj.get("options"))?;
    let schema = if kind == BodyKind::Object {
        let s = obj.get("schema").ok_or_else(|| bad("schema is required"))?;
        match s.get("type").and_then(Value::as_str) {
            Some("object") | Some("array") => {}
            _ => {
                return Err(bad(
                    "schema must be a JSON Schema whose top-level type is \"object\" or \"array\"",
                ));
            }
        }
        Some(s.clone())
    } else {
        None
    };
    Ok(Generation {
        input,
        options,
        schema,
    })
}
