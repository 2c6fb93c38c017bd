//! `ModelRequest` -> chat completions request body.
//!
//! The body is built with async-openai's typed request (so field names and shapes follow its
//! schema), then turned into JSON so provider options can be merged in as extra fields.

use agentry_agents::{Message, ModelError, ModelRequest, Role, ToolCall, ToolSpec};
use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls,
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestMessage, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestToolMessage,
    ChatCompletionRequestToolMessageContent, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent, ChatCompletionTool, ChatCompletionTools,
    CreateChatCompletionRequest, FunctionCall, FunctionObject, ResponseFormat,
    ResponseFormatJsonSchema, StopConfiguration,
};
use serde_json::{Map, Value};

/// The body of `POST /chat/completions` for `request`.
#[allow(deprecated)] // `seed` is deprecated in async-openai's schema but still honoured by OpenAI.
pub(crate) fn build_body(
    model: &str,
    request: &ModelRequest,
    stream: bool,
) -> Result<Value, ModelError> {
    let s = &request.settings;
    let messages = request
        .messages
        .iter()
        .map(message)
        .collect::<Result<Vec<_>, _>>()?;
    let tools = (!request.tools.is_empty()).then(|| request.tools.iter().map(tool).collect());
    let options = provider_options(s.provider_options.as_ref());
    let strict = options
        .as_ref()
        .and_then(|o| o.get("strict_json_schema"))
        .and_then(Value::as_bool);

    let typed = CreateChatCompletionRequest {
        model: model.to_owned(),
        messages,
        tools,
        seed: s.seed,
        stop: (!s.stop_sequences.is_empty())
            .then(|| StopConfiguration::StringArray(s.stop_sequences.clone())),
        max_completion_tokens: Some(s.max_output_tokens),
        response_format: request
            .output_schema
            .as_ref()
            .map(|schema| ResponseFormat::JsonSchema {
                json_schema: ResponseFormatJsonSchema {
                    description: schema
                        .get("description")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    name: schema_name(schema),
                    schema: schema.clone(),
                    strict: Some(strict.unwrap_or(false)),
                },
            }),
        ..Default::default()
    };
    let mut body = serde_json::to_value(&typed)
        .map_err(|e| ModelError::new(format!("could not encode the request: {e}")))?;
    let Value::Object(fields) = &mut body else {
        unreachable!("a request serializes to an object")
    };
    // Sampling numbers go in as the f64s they are: async-openai's fields are f32, which would put
    // 0.20000000298023224 on the wire for 0.2.
    let numbers = [
        ("temperature", Some(s.temperature)),
        ("top_p", (s.top_p != 1.0).then_some(s.top_p)),
        (
            "frequency_penalty",
            (s.frequency_penalty != 0.0).then_some(s.frequency_penalty),
        ),
        (
            "presence_penalty",
            (s.presence_penalty != 0.0).then_some(s.presence_penalty),
        ),
    ];
    for (key, value) in numbers {
        if let Some(n) = value.and_then(serde_json::Number::from_f64) {
            fields.insert(key.into(), Value::Number(n));
        }
    }

    if let Some(options) = options {
        for (key, value) in options {
            if key == "strict_json_schema" {
                continue;
            }
            if value.is_null() {
                fields.remove(&key);
                continue;
            }
            // For servers that only know the older limit field: send one limit, not two.
            if key == "max_tokens" {
                fields.remove("max_completion_tokens");
            }
            fields.insert(key, value);
        }
    }

    // `stream` is ours to decide; usage always comes with a stream (other stream options given
    // as provider options, e.g. `include_obfuscation`, are kept).
    let stream_options = fields.remove("stream_options");
    fields.insert("stream".into(), Value::Bool(stream));
    if stream {
        let mut options = match stream_options {
            Some(Value::Object(o)) => o,
            _ => Map::new(),
        };
        options.insert("include_usage".into(), Value::Bool(true));
        fields.insert("stream_options".into(), Value::Object(options));
    }
    Ok(body)
}

/// A response format name: the schema's `title` when usable, else `response`
/// (names must match `^[a-zA-Z0-9_-]{1,64}$`).
fn schema_name(schema: &Value) -> String {
    let title: String = schema
        .get("title")
        .and_then(Value::as_str)
        .unwrap_or("")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if title.trim_matches('_').is_empty() {
        "response".to_owned()
    } else {
        title
    }
}

fn message(m: &Message) -> Result<ChatCompletionRequestMessage, ModelError> {
    Ok(match m.role {
        Role::System => ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
            content: ChatCompletionRequestSystemMessageContent::Text(m.content.clone()),
            name: None,
        }),
        Role::User => ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
            content: ChatCompletionRequestUserMessageContent::Text(m.content.clone()),
            name: None,
        }),
        Role::Assistant => {
            ChatCompletionRequestMessage::Assistant(ChatCompletionRequestAssistantMessage {
                // `content` may be omitted only when there are tool calls.
                content: (!m.content.is_empty() || m.tool_calls.is_empty())
                    .then(|| ChatCompletionRequestAssistantMessageContent::Text(m.content.clone())),
                tool_calls: (!m.tool_calls.is_empty())
                    .then(|| m.tool_calls.iter().map(tool_call).collect()),
                ..Default::default()
            })
        }
        Role::Tool => {
            let result = m.tool_result.as_ref().ok_or_else(|| {
                ModelError::new("a tool message has no tool result (its tool_call_id is unknown)")
            })?;
            ChatCompletionRequestMessage::Tool(ChatCompletionRequestToolMessage {
                content: ChatCompletionRequestToolMessageContent::Text(result.result.to_string()),
                tool_call_id: result.tool_call_id.clone(),
            })
        }
    })
}

fn tool_call(c: &ToolCall) -> ChatCompletionMessageToolCalls {
    ChatCompletionMessageToolCalls::Function(ChatCompletionMessageToolCall {
        id: c.tool_call_id.clone(),
        function: FunctionCall {
            name: c.tool_name.clone(),
            arguments: arguments_text(&c.args),
        },
    })
}

/// Tool call arguments as the JSON text the model produced. Arguments that could not be parsed
/// were kept as a string holding the raw text; that text is sent back as it was.
fn arguments_text(args: &Value) -> String {
    match args {
        Value::String(raw) if serde_json::from_str::<Value>(raw).is_err() => raw.clone(),
        other => other.to_string(),
    }
}

fn tool(t: &ToolSpec) -> ChatCompletionTools {
    ChatCompletionTools::Function(ChatCompletionTool {
        function: FunctionObject {
            name: t.name.clone(),
            description: (!t.description.is_empty()).then(|| t.description.clone()),
            parameters: Some(t.parameters.clone()),
            strict: None,
        },
    })
}

/// The provider options that apply here, keys in wire (snake_case) form: the `openai` namespace
/// when there is one, else the whole (flat) object.
fn provider_options(options: Option<&Value>) -> Option<Map<String, Value>> {
    let Value::Object(all) = options? else {
        return None;
    };
    let chosen = match all.get("openai") {
        Some(Value::Object(ns)) => ns,
        Some(_) => return None,
        None => all,
    };
    Some(
        chosen
            .iter()
            .map(|(k, v)| (wire_key(k), v.clone()))
            .collect(),
    )
}

/// The AI SDK's camelCase option names in the API's snake_case.
fn wire_key(key: &str) -> String {
    if key == "textVerbosity" {
        return "verbosity".to_owned();
    }
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentry_agents::{GenerationSettings, ToolResult};
    use serde_json::json;

    fn req(messages: Vec<Message>) -> ModelRequest {
        ModelRequest {
            messages,
            tools: Vec::new(),
            settings: GenerationSettings::default(),
            output_schema: None,
        }
    }

    #[test]
    fn conversation_with_tool_calls_maps_to_the_wire_format() {
        let call = ToolCall {
            tool_call_id: "call_1".into(),
            tool_name: "get_weather".into(),
            args: json!({"city": "Paris"}),
        };
        let mut r = req(vec![
            Message::system("be brief"),
            Message::user("weather in Paris?"),
            Message::tool_calls("", vec![call.clone()]),
            Message::tool_result(ToolResult {
                tool_call_id: "call_1".into(),
                tool_name: "get_weather".into(),
                args: json!({"city": "Paris"}),
                result: json!({"temperatureC": 21}),
                is_error: false,
            }),
            Message::assistant("It is 21°C."),
        ]);
        r.tools.push(ToolSpec {
            name: "get_weather".into(),
            description: "Weather of a city".into(),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        });
        let body = build_body("gpt-4o-mini", &r, false).unwrap();
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "weather in Paris?"},
                {"role": "assistant", "tool_calls": [{"type": "function", "id": "call_1",
                    "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
                {"role": "tool", "content": "{\"temperatureC\":21}", "tool_call_id": "call_1"},
                {"role": "assistant", "content": "It is 21°C."},
            ])
        );
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "function": {"name": "get_weather",
                "description": "Weather of a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])
        );
        assert_eq!(body["model"], "gpt-4o-mini");
        assert_eq!(body["stream"], false);
        assert_eq!(body["max_completion_tokens"], 4000);
        assert!(body.get("top_p").is_none());
        assert!(body.get("frequency_penalty").is_none());
        assert!(body.get("stream_options").is_none());
    }

    #[test]
    fn tool_message_without_result_is_an_error() {
        let r = req(vec![Message::new(Role::Tool, "x")]);
        assert!(build_body("m", &r, false).is_err());
    }

    #[test]
    fn unparsed_arguments_go_back_verbatim() {
        assert_eq!(arguments_text(&json!("{\"a\": 1")), "{\"a\": 1");
        assert_eq!(arguments_text(&json!({"a": 1})), "{\"a\":1}");
        assert_eq!(arguments_text(&json!("\"s\"")), "\"\\\"s\\\"\"");
    }

    #[test]
    fn provider_options_are_merged_in_wire_form() {
        let mut r = req(vec![Message::user("hi")]);
        r.settings.provider_options = Some(json!({
            "openai": {"reasoningEffort": "low", "temperature": null, "textVerbosity": "low",
                       "parallelToolCalls": false},
            "anthropic": {"thinking": true}
        }));
        let body = build_body("m", &r, true).unwrap();
        assert_eq!(body["reasoning_effort"], "low");
        assert_eq!(body["verbosity"], "low");
        assert_eq!(body["parallel_tool_calls"], false);
        assert!(body.get("temperature").is_none());
        assert!(body.get("thinking").is_none() && body.get("anthropic").is_none());
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"], json!({"include_usage": true}));

        r.settings.provider_options = Some(json!({"logit_bias": {"50256": -100}, "user": "u1"}));
        let body = build_body("m", &r, false).unwrap();
        assert_eq!(body["logit_bias"], json!({"50256": -100}));
        assert_eq!(body["user"], "u1");
        assert_eq!(body["max_completion_tokens"], 4000);

        r.settings.provider_options = Some(json!({"maxTokens": 50}));
        let body = build_body("m", &r, false).unwrap();
        assert_eq!(body["max_tokens"], 50);
        assert!(body.get("max_completion_tokens").is_none());
    }

    #[test]
    fn output_schema_uses_the_json_schema_response_format() {
        let mut r = req(vec![Message::user("hi")]);
        let schema = json!({"title": "Weather report", "type": "object"});
        r.output_schema = Some(schema.clone());
        let body = build_body("m", &r, false).unwrap();
        assert_eq!(
            body["response_format"],
            json!({"type": "json_schema", "json_schema":
                {"name": "Weather_report", "schema": schema, "strict": false}})
        );
        r.settings.provider_options = Some(json!({"openai": {"strictJsonSchema": true}}));
        r.output_schema = Some(json!({"type": "object"}));
        let body = build_body("m", &r, false).unwrap();
        assert_eq!(body["response_format"]["json_schema"]["name"], "response");
        assert_eq!(body["response_format"]["json_schema"]["strict"], true);
        assert!(body.get("strict_json_schema").is_none());
    }
}
