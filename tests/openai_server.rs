//! An agent on the OpenAI-compatible provider, through the real server: the route, the
//! generation loop with a tool, and the provider against a local mock of the chat completions
//! API (wiremock, the real wire format). The provider's own details are tested in
//! `crates/agentry-openai/tests/mock_openai.rs`.

use std::sync::Arc;

use agentry_agents::Agent;
use agentry_openai::{OpenAiModel, OpenAiSettings};
use agentry_tests::{Backend, TestServer, ok_data};
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const COMPLETIONS: &str = "/v1/chat/completions";

fn completion(message: Value, finish_reason: &str, usage: Value) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1741570283,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": message, "logprobs": null,
                     "finish_reason": finish_reason}],
        "usage": usage
    })
}

fn chunk(choices: Value) -> String {
    let event = json!({
        "id": "chatcmpl-2", "object": "chat.completion.chunk", "created": 1694268190,
        "model": "gpt-4o-mini-2024-07-18", "choices": choices
    });
    format!("data: {event}\n\n")
}

async fn server_with_mock_agent(mock: &MockServer) -> TestServer {
    let server = TestServer::start(Backend::Sqlite).await;
    let model = OpenAiModel::new(OpenAiSettings {
        api_key: Some("sk-test".into()),
        base_url: Some(format!("{}/v1", mock.uri())),
        model: "gpt-4o-mini".into(),
    });
    server
        .agents
        .register(
            Agent::new("mock-gpt", "Mock GPT")
                .instructions("Use get_weather for weather questions.")
                .model(Arc::new(model))
                .tool(agentry_server::examples::get_weather()),
        )
        .unwrap();
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_runs_the_tool_loop_against_an_openai_compatible_endpoint() {
    let mock = MockServer::start().await;
    // Second call: the tool result is in the conversation, the model answers.
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .and(body_string_contains("\"role\":\"tool\""))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(
            json!({"role": "assistant", "content": "It is 21°C and sunny in Paris."}),
            "stop",
            json!({"prompt_tokens": 120, "completion_tokens": 10, "total_tokens": 130}),
        )))
        .with_priority(1)
        .mount(&mock)
        .await;
    // First call: the model asks for the weather.
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}),
            "tool_calls",
            json!({"prompt_tokens": 80, "completion_tokens": 15, "total_tokens": 95}),
        )))
        .with_priority(2)
        .mount(&mock)
        .await;
    let server = server_with_mock_agent(&mock).await;

    let (status, body) = server
        .post_json(
            "/agents/mock-gpt/text",
            &json!({"input": "What is the weather in Paris?",
                    "options": {"temperature": 0.2, "maxOutputTokens": 50}}),
        )
        .await;
    let data = ok_data(status, body);
    assert_eq!(data["text"], "It is 21°C and sunny in Paris.");
    assert_eq!(data["finishReason"], "stop");
    assert_eq!(data["toolCalls"][0]["toolName"], "get_weather");
    assert_eq!(data["toolCalls"][0]["args"], json!({"city": "Paris"}));
    assert_eq!(data["toolResults"][0]["result"]["condition"], "sunny");
    assert_eq!(data["usage"]["promptTokens"], 200);
    assert_eq!(data["usage"]["totalTokens"], 225);

    let requests = mock.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2);
    let first: Value = requests[0].body_json().unwrap();
    assert_eq!(first["model"], "gpt-4o-mini");
    assert_eq!(first["temperature"], 0.2);
    assert_eq!(first["messages"][0]["role"], "system");
    assert_eq!(first["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(
        requests[0].headers.get("authorization").unwrap(),
        "Bearer sk-test"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_relays_the_endpoints_deltas_and_its_failures() {
    let mock = MockServer::start().await;
    let mut body = [
        chunk(json!([{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}])),
        chunk(json!([{"index": 0, "delta": {"content": "lo"}}])),
        chunk(json!([{"index": 0, "delta": {}, "finish_reason": "stop"}])),
    ]
    .concat();
    body.push_str("data: [DONE]\n\n");
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
        .mount(&mock)
        .await;
    let server = server_with_mock_agent(&mock).await;
    let events = server
        .sse_events("/agents/mock-gpt/stream", &json!({"input": "hi"}))
        .await;
    let deltas: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "text-delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, ["Hel", "lo"]);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "finish");
    assert_eq!(last["finishReason"], "stop");

    // The endpoint refusing the key: 502, naming the provider, never echoing the key.
    mock.reset().await;
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({"error": {
            "message": "Incorrect API key provided: sk-test.", "type": "invalid_request_error",
            "param": null, "code": "invalid_api_key"}})))
        .mount(&mock)
        .await;
    let (status, body) = server
        .post_json("/agents/mock-gpt/text", &json!({"input": "hi"}))
        .await;
    assert_eq!(status.as_u16(), 502, "{body}");
    assert_eq!(body["code"], "model_unauthorized", "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(error.contains("refused the credentials"), "{error}");
    assert!(!error.contains("sk-test"), "{error}");
    server.stop().await;
}

/// Each kind of provider failure answers its own status and code, on `/text` and as the
/// `error` event of `/stream`: throttled 503, refused 502 with the provider's reason, down 502,
/// silent past the read time-out 504.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_failures_keep_their_kind() {
    for (upstream, status, code, reason) in [
        (429, 503, "model_rate_limited", "Rate limit reached"),
        (400, 502, "model_refused", "maximum context length"),
        (500, 502, "model_unavailable", "The server had an error"),
    ] {
        let mock = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(COMPLETIONS))
            .respond_with(
                ResponseTemplate::new(upstream).set_body_json(json!({"error": {
                "message": reason, "type": "some_error", "param": null, "code": null}})),
            )
            .mount(&mock)
            .await;
        let server = server_with_mock_agent(&mock).await;
        let (got, body) = server
            .post_json("/agents/mock-gpt/text", &json!({"input": "hi"}))
            .await;
        assert_eq!(got.as_u16(), status, "{upstream}: {body}");
        assert_eq!(body["code"], code, "{upstream}: {body}");
        assert!(
            body["error"].as_str().unwrap_or("").contains(reason),
            "{body}"
        );
        let events = server
            .sse_events("/agents/mock-gpt/stream", &json!({"input": "hi"}))
            .await;
        let last = events.last().cloned().unwrap_or_default();
        assert_eq!(last["type"], "error", "{events:?}");
        assert_eq!(last["code"], code, "{upstream}: {last}");
        server.stop().await;
    }

    // Silence past the read time-out.
    let mock = MockServer::start().await;
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
        .mount(&mock)
        .await;
    let server = TestServer::start(Backend::Sqlite).await;
    let model = OpenAiModel::new(OpenAiSettings {
        api_key: Some("sk-test".into()),
        base_url: Some(format!("{}/v1", mock.uri())),
        model: "gpt-4o-mini".into(),
    })
    .with_read_timeout(std::time::Duration::from_millis(300));
    server
        .agents
        .register(Agent::new("slow-gpt", "Slow GPT").model(Arc::new(model)))
        .unwrap();
    let (got, body) = server
        .post_json("/agents/slow-gpt/text", &json!({"input": "hi"}))
        .await;
    assert_eq!(got.as_u16(), 504, "{body}");
    assert_eq!(body["code"], "model_timed_out", "{body}");
    server.stop().await;
}
