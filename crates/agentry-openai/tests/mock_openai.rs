//! `OpenAiModel` against a local mock of the OpenAI chat completions API (wiremock), answering
//! with the real wire format: `chat.completion` objects, `chat.completion.chunk` server-sent
//! events ending with `data: [DONE]`, and OpenAI error objects.

use std::time::Duration;

use agentry_agents::{
    FinishReason, GenerationSettings, Message, Model, ModelChunk, ModelErrorKind, ModelRequest,
    ToolCall, ToolResult, ToolSpec, Usage,
};
use agentry_openai::{OpenAiModel, OpenAiSettings};
use futures::StreamExt;
use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const COMPLETIONS: &str = "/v1/chat/completions";

fn model_for(server: &MockServer) -> OpenAiModel {
    OpenAiModel::new(OpenAiSettings {
        api_key: Some("sk-test".into()),
        base_url: Some(format!("{}/v1", server.uri())),
        model: "gpt-4o-mini".into(),
    })
}

fn request(messages: Vec<Message>) -> ModelRequest {
    ModelRequest {
        messages,
        tools: Vec::new(),
        settings: GenerationSettings::default(),
        output_schema: None,
    }
}

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Current weather of a city".into(),
        parameters: json!({
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"]
        }),
    }
}

fn completion(message: Value, finish_reason: &str, usage: Value) -> Value {
    json!({
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion",
        "created": 1741570283,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason
        }],
        "usage": usage,
        "service_tier": "default",
        "system_fingerprint": "fp_06737a9306"
    })
}

/// A `chat.completion.chunk` event line.
fn chunk(choices: Value, usage: Value) -> String {
    let event = json!({
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1694268190,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_44709d6fcb",
        "choices": choices,
        "usage": usage,
    });
    format!("data: {event}\n\n")
}

fn sse(events: &[String]) -> ResponseTemplate {
    let mut body = events.concat();
    body.push_str("data: [DONE]\n\n");
    ResponseTemplate::new(200)
        .insert_header("cache-control", "no-cache")
        .set_body_raw(body, "text/event-stream")
}

async fn sent_body(server: &MockServer) -> Value {
    let requests = server.received_requests().await.expect("recording is on");
    let last = requests.last().expect("a request was sent");
    assert_eq!(last.url.path(), COMPLETIONS);
    last.body_json().expect("the request body is JSON")
}

async fn collect(model: &OpenAiModel, req: &ModelRequest) -> Vec<ModelChunk> {
    let stream = model.stream(req).await.expect("the stream opens");
    stream.map(|c| c.expect("no stream error")).collect().await
}

#[tokio::test]
async fn plain_completion_returns_text_usage_and_finish_reason() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .and(header("authorization", "Bearer sk-test"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(
            json!({"role": "assistant", "content": "Hello there!", "refusal": null,
                   "annotations": []}),
            "stop",
            json!({
                "prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29,
                "prompt_tokens_details": {"cached_tokens": 8, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 3, "audio_tokens": 0,
                    "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
            }),
        )))
        .expect(1)
        .mount(&server)
        .await;

    let model = model_for(&server);
    assert_eq!(model.name(), "gpt-4o-mini");
    let req = request(vec![Message::system("Be nice."), Message::user("Hi!")]);
    let response = model.generate(&req).await.unwrap();
    assert_eq!(response.text, "Hello there!");
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(
        response.usage,
        Usage {
            prompt_tokens: 19,
            completion_tokens: 10,
            total_tokens: 29,
            cached_input_tokens: 8,
            reasoning_tokens: 3,
        }
    );

    let body = sent_body(&server).await;
    assert_eq!(body["model"], "gpt-4o-mini");
    assert_eq!(body["stream"], false);
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "Be nice."},
            {"role": "user", "content": "Hi!"}
        ])
    );
    assert!(body.get("tools").is_none());
    assert!(body.get("response_format").is_none());
}

#[tokio::test]
async fn tool_call_completion_and_tool_result_round_trip() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(
            json!({
                "role": "assistant",
                "content": null,
                "tool_calls": [{
                    "id": "call_abc123",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}
                }],
                "refusal": null,
                "annotations": []
            }),
            "tool_calls",
            json!({"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99}),
        )))
        .mount(&server)
        .await;

    let model = model_for(&server);
    let mut req = request(vec![Message::user("What's the weather in Paris?")]);
    req.tools.push(weather_tool());
    let response = model.generate(&req).await.unwrap();
    assert_eq!(response.text, "");
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.tool_calls,
        vec![ToolCall {
            tool_call_id: "call_abc123".into(),
            tool_name: "get_weather".into(),
            args: json!({"city": "Paris"}),
        }]
    );
    assert_eq!(response.usage.total_tokens, 99);
    assert_eq!(response.usage.cached_input_tokens, 0);

    let body = sent_body(&server).await;
    assert_eq!(
        body["tools"],
        json!([{
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather of a city",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"]
                }
            }
        }])
    );

    // The next step sends the call and its result back.
    let call = response.tool_calls[0].clone();
    req.messages
        .push(Message::tool_calls("", vec![call.clone()]));
    req.messages.push(Message::tool_result(ToolResult {
        tool_call_id: call.tool_call_id.clone(),
        tool_name: call.tool_name.clone(),
        args: call.args.clone(),
        result: json!({"city": "Paris", "temperatureC": 18, "condition": "cloudy"}),
        is_error: false,
    }));
    model.generate(&req).await.unwrap();
    let body = sent_body(&server).await;
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "tool_calls": [{
            "id": "call_abc123", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}
        }]})
    );
    let tool_message = &body["messages"][2];
    assert_eq!(tool_message["role"], "tool");
    assert_eq!(tool_message["tool_call_id"], "call_abc123");
    let content: Value = serde_json::from_str(tool_message["content"].as_str().unwrap()).unwrap();
    assert_eq!(
        content,
        json!({"city": "Paris", "temperatureC": 18, "condition": "cloudy"})
    );
}

#[tokio::test]
async fn streamed_text_arrives_as_deltas_then_one_finish() {
    let server = MockServer::start().await;
    let events = [
        chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "content": "", "refusal": null},
                    "logprobs": null, "finish_reason": null}]),
            Value::Null,
        ),
        chunk(
            json!([{"index": 0, "delta": {"content": "Hello"}, "logprobs": null,
                    "finish_reason": null}]),
            Value::Null,
        ),
        chunk(
            json!([{"index": 0, "delta": {"content": " world"}, "logprobs": null,
                    "finish_reason": null}]),
            Value::Null,
        ),
        chunk(
            json!([{"index": 0, "delta": {"content": "!"}, "logprobs": null,
                    "finish_reason": null}]),
            Value::Null,
        ),
        chunk(
            json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": "stop"}]),
            Value::Null,
        ),
        chunk(
            json!([]),
            json!({"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12,
                   "prompt_tokens_details": {"cached_tokens": 2, "audio_tokens": 0},
                   "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}}),
        ),
    ];
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .and(body_partial_json(
            json!({"stream": true, "stream_options": {"include_usage": true}}),
        ))
        .respond_with(sse(&events))
        .expect(1)
        .mount(&server)
        .await;

    let model = model_for(&server);
    let chunks = collect(&model, &request(vec![Message::user("Say hello")])).await;
    assert_eq!(
        chunks,
        vec![
            ModelChunk::TextDelta("Hello".into()),
            ModelChunk::TextDelta(" world".into()),
            ModelChunk::TextDelta("!".into()),
            ModelChunk::Finish {
                finish_reason: FinishReason::Stop,
                usage: Usage {
                    prompt_tokens: 9,
                    completion_tokens: 3,
                    total_tokens: 12,
                    cached_input_tokens: 2,
                    reasoning_tokens: 0,
                },
            },
        ]
    );
}

#[tokio::test]
async fn streamed_tool_call_fragments_are_assembled() {
    let server = MockServer::start().await;
    let call_start = |index: u32, id: &str, name: &str| {
        chunk(
            json!([{"index": 0, "delta": {"tool_calls": [{"index": index, "id": id,
                "type": "function", "function": {"name": name, "arguments": ""}}]},
                "logprobs": null, "finish_reason": null}]),
            Value::Null,
        )
    };
    let args = |index: u32, piece: &str| {
        chunk(
            json!([{"index": 0, "delta": {"tool_calls": [{"index": index,
                "function": {"arguments": piece}}]}, "logprobs": null, "finish_reason": null}]),
            Value::Null,
        )
    };
    let events = [
        chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "content": null},
                    "logprobs": null, "finish_reason": null}]),
            Value::Null,
        ),
        call_start(0, "call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather"),
        args(0, "{\""),
        args(0, "city"),
        args(0, "\":\""),
        args(0, "Paris"),
        args(0, "\"}"),
        call_start(1, "call_2", "calculate"),
        args(1, "{\"expression\":"),
        args(1, " \"2+2\"}"),
        chunk(
            json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": "tool_calls"}]),
            Value::Null,
        ),
        chunk(
            json!([]),
            json!({"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}),
        ),
    ];
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .respond_with(sse(&events))
        .mount(&server)
        .await;

    let model = model_for(&server);
    let mut req = request(vec![Message::user("weather in Paris and 2+2")]);
    req.tools.push(weather_tool());
    let chunks = collect(&model, &req).await;
    assert_eq!(
        chunks,
        vec![
            ModelChunk::ToolCall(ToolCall {
                tool_call_id: "call_DdmO9pD3xa9XTPNJ32zg2hcA".into(),
                tool_name: "get_weather".into(),
                args: json!({"city": "Paris"}),
            }),
            ModelChunk::ToolCall(ToolCall {
                tool_call_id: "call_2".into(),
                tool_name: "calculate".into(),
                args: json!({"expression": "2+2"}),
            }),
            ModelChunk::Finish {
                finish_reason: FinishReason::ToolCalls,
                usage: Usage {
                    prompt_tokens: 50,
                    completion_tokens: 20,
                    total_tokens: 70,
                    cached_input_tokens: 0,
                    reasoning_tokens: 0,
                },
            },
        ]
    );
    assert!(sent_body(&server).await["tools"].is_array());
}

#[tokio::test]
async fn streamed_unparsable_arguments_are_kept_as_a_string() {
    let server = MockServer::start().await;
    let events = [
        chunk(
            json!([{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_x",
                "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": "}}]},
                "finish_reason": null}]),
            Value::Null,
        ),
        chunk(
            json!([{"index": 0, "delta": {}, "finish_reason": "length"}]),
            Value::Null,
        ),
    ];
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .respond_with(sse(&events))
        .mount(&server)
        .await;
    let chunks = collect(&model_for(&server), &request(vec![Message::user("x")])).await;
    assert_eq!(
        chunks,
        vec![
            ModelChunk::ToolCall(ToolCall {
                tool_call_id: "call_x".into(),
                tool_name: "get_weather".into(),
                args: json!("{\"city\": "),
            }),
            ModelChunk::Finish {
                finish_reason: FinishReason::Length,
                usage: Usage::default(),
            },
        ]
    );
}

#[tokio::test]
async fn object_generation_sends_the_json_schema_response_format() {
    let server = MockServer::start().await;
    let schema = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "temperatureC": {"type": "number"}
        },
        "required": ["city", "temperatureC"],
        "additionalProperties": false
    });
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .and(body_partial_json(json!({
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": schema, "strict": false}
            }
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(
            json!({"role": "assistant",
                   "content": "{\"city\":\"Paris\",\"temperatureC\":18}",
                   "refusal": null}),
            "stop",
            json!({"prompt_tokens": 60, "completion_tokens": 12, "total_tokens": 72}),
        )))
        .expect(1)
        .mount(&server)
        .await;

    let model = model_for(&server);
    let mut req = request(vec![Message::user("Weather in Paris as JSON")]);
    req.output_schema = Some(schema);
    let response = model.generate(&req).await.unwrap();
    let object: Value = serde_json::from_str(&response.text).unwrap();
    assert_eq!(object, json!({"city": "Paris", "temperatureC": 18}));
    assert_eq!(response.finish_reason, FinishReason::Stop);
}

#[tokio::test]
async fn settings_and_provider_options_are_mapped_into_the_body() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(
            json!({"role": "assistant", "content": "ok"}),
            "stop",
            json!({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}),
        )))
        .mount(&server)
        .await;

    let model = model_for(&server);
    let mut req = request(vec![Message::user("hi")]);
    req.settings = GenerationSettings {
        temperature: 0.2,
        max_output_tokens: 123,
        top_p: 0.9,
        frequency_penalty: 0.5,
        presence_penalty: -0.25,
        seed: Some(42),
        stop_sequences: vec!["END".into(), "STOP".into()],
        provider_options: Some(json!({
            "openai": {"reasoningEffort": "low", "user": "user-1"}
        })),
    };
    model.generate(&req).await.unwrap();
    let body = sent_body(&server).await;
    assert_eq!(body["temperature"].as_f64(), Some(0.2));
    assert_eq!(body["top_p"].as_f64(), Some(0.9));
    assert_eq!(body["frequency_penalty"].as_f64(), Some(0.5));
    assert_eq!(body["presence_penalty"].as_f64(), Some(-0.25));
    assert_eq!(body["seed"], 42);
    assert_eq!(body["stop"], json!(["END", "STOP"]));
    assert_eq!(body["max_completion_tokens"], 123);
    assert_eq!(body["reasoning_effort"], "low");
    assert_eq!(body["user"], "user-1");

    // A flat object is passed through too, and the stream body gets the same settings.
    req.settings.provider_options = Some(json!({"service_tier": "flex", "temperature": null}));
    let events = [chunk(
        json!([{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]),
        Value::Null,
    )];
    server.reset().await;
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .respond_with(sse(&events))
        .mount(&server)
        .await;
    collect(&model, &req).await;
    let body = sent_body(&server).await;
    assert_eq!(body["service_tier"], "flex");
    assert!(body.get("temperature").is_none(), "null removes a field");
    assert_eq!(body["seed"], 42);
    assert_eq!(body["max_completion_tokens"], 123);
    assert_eq!(body["stream"], true);
}

/// A 401 is `Unauthorized`, naming the endpoint and never echoing the provider's text (which
/// may quote the key), on a call and on a stream alike.
#[tokio::test]
async fn unauthorized_is_typed_and_does_not_echo_the_key() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({
            "error": {
                "message": "Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.",
                "type": "invalid_request_error",
                "param": null,
                "code": "invalid_api_key"
            }
        })))
        .mount(&server)
        .await;

    let model = model_for(&server);
    let req = request(vec![Message::user("hi")]);
    let error = model.generate(&req).await.unwrap_err();
    let stream_error = match model.stream(&req).await {
        Err(e) => e,
        Ok(_) => panic!("a 401 must not open a stream"),
    };
    for error in [error, stream_error] {
        assert_eq!(
            error.kind,
            ModelErrorKind::Unauthorized,
            "{}",
            error.message
        );
        assert!(error.message.contains("401"), "{}", error.message);
        assert!(error.message.contains(&server.uri()), "{}", error.message);
        assert!(!error.message.contains("sk-test"), "{}", error.message);
    }
}

/// Each upstream failure keeps its kind: 429 throttled, 400 refused (with the provider's
/// reason), 503 down, and silence past the read time-out timed out.
#[tokio::test]
async fn upstream_failures_keep_their_kind() {
    for (status, kind, reason) in [
        (
            429,
            ModelErrorKind::RateLimited,
            "Rate limit reached for requests",
        ),
        (
            400,
            ModelErrorKind::Refused,
            "maximum context length is 128000 tokens",
        ),
        (
            503,
            ModelErrorKind::Unavailable,
            "The engine is currently overloaded",
        ),
    ] {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(COMPLETIONS))
            .respond_with(ResponseTemplate::new(status).set_body_json(json!({
                "error": {"message": reason, "type": "some_error", "param": null, "code": null}
            })))
            .mount(&server)
            .await;
        let error = model_for(&server)
            .generate(&request(vec![Message::user("hi")]))
            .await
            .unwrap_err();
        assert_eq!(error.kind, kind, "{status}: {}", error.message);
        assert!(
            error.message.contains(reason),
            "{status}: {}",
            error.message
        );
    }

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .respond_with(
            ResponseTemplate::new(200)
                .set_delay(std::time::Duration::from_secs(3))
                .set_body_json(completion(
                    json!({"role": "assistant", "content": "late"}),
                    "stop",
                    json!(null),
                )),
        )
        .mount(&server)
        .await;
    let error = model_for(&server)
        .with_read_timeout(std::time::Duration::from_millis(300))
        .generate(&request(vec![Message::user("hi")]))
        .await
        .unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::TimedOut, "{}", error.message);
}

#[tokio::test]
async fn server_error_becomes_a_model_error_naming_it() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .respond_with(ResponseTemplate::new(500).set_body_json(json!({
            "error": {
                "message": "The server had an error while processing your request. Sorry about that!",
                "type": "server_error",
                "param": null,
                "code": null
            }
        })))
        .mount(&server)
        .await;

    let error = model_for(&server)
        .generate(&request(vec![Message::user("hi")]))
        .await
        .unwrap_err();
    assert!(error.message.contains("500"), "{}", error.message);
    assert_eq!(error.kind, ModelErrorKind::Unavailable);
    assert!(
        error.message.contains("The server had an error"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn unreachable_endpoint_is_a_model_error() {
    // A port nothing listens on: bind, note it, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let model = OpenAiModel::new(OpenAiSettings {
        api_key: None,
        base_url: Some(format!("http://127.0.0.1:{port}/v1")),
        model: "m".into(),
    });
    let error = model
        .generate(&request(vec![Message::user("hi")]))
        .await
        .unwrap_err();
    assert!(
        error.message.contains(&format!("127.0.0.1:{port}")),
        "{}",
        error.message
    );
    assert_eq!(error.kind, ModelErrorKind::Unavailable, "{}", error.message);
}

/// Dropping the stream closes the upstream connection even while the server is still sending.
#[tokio::test]
async fn dropping_the_stream_closes_the_upstream_connection() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        // Read the request head and body (the body ends the first read burst well enough here:
        // wait until the JSON body's closing brace has arrived).
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = socket.read(&mut buf).await.unwrap();
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen);
            if let Some(head_end) = text.find("\r\n\r\n") {
                let length: usize = text[..head_end]
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse().ok())?
                    })
                    .unwrap_or(0);
                if seen.len() >= head_end + 4 + length {
                    break;
                }
            }
        }
        let first = chunk(
            json!([{"index": 0, "delta": {"content": "tick"}, "finish_reason": null}]),
            Value::Null,
        );
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                    transfer-encoding: chunked\r\n\r\n";
        socket.write_all(head.as_bytes()).await.unwrap();
        socket
            .write_all(format!("{:x}\r\n{first}\r\n", first.len()).as_bytes())
            .await
            .unwrap();
        socket.flush().await.unwrap();
        // Never finish: wait for the client to hang up.
        let closed = loop {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => break true,
                Ok(_) => continue,
            }
        };
        let _ = closed_tx.send(closed);
    });

    let model = OpenAiModel::new(OpenAiSettings {
        api_key: Some("sk-test".into()),
        base_url: Some(format!("http://{addr}/v1")),
        model: "gpt-4o-mini".into(),
    });
    let mut stream = model
        .stream(&request(vec![Message::user("count forever")]))
        .await
        .unwrap();
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(first, ModelChunk::TextDelta("tick".into()));
    drop(stream);
    let closed = tokio::time::timeout(Duration::from_secs(5), closed_rx)
        .await
        .expect("the upstream connection is closed soon after the drop")
        .unwrap();
    assert!(closed);
}
