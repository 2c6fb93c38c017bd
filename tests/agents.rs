//! The agent routes of the HTTP contract (spec sections 2, 4, 6, 8) and the example agents of
//! `examples.md`, against the real server over HTTP with the offline model, on SQLite and on
//! PostgreSQL (memory lives in the database).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use agentry_agents::{
    Agent, ChunkStream, FinishReason, Model, ModelChunk, ModelError, ModelRequest, ModelResponse,
    Usage,
};
use agentry_tests::{Backend, TestServer, assert_failure, ok_data};
use futures::StreamExt;
use serde_json::{Value, json};

agentry_tests::backend_tests!(
    lists_the_example_agents,
    unknown_agent_is_404,
    text_accepts_the_three_input_shapes,
    weather_and_calculate_tools_loop,
    a_bad_expression_is_a_tool_error,
    supervisor_delegates_to_a_sub_agent,
    memory_spans_calls_of_one_conversation_and_isolates_users,
    context_reaches_dynamic_instructions,
    every_option_is_validated,
    max_output_tokens_truncates,
    invalid_bodies_are_400,
    raw_stream_events,
    chat_speaks_the_ui_message_stream,
    object_is_valid_against_the_schema,
    stream_object_grows_then_validates,
    model_failures_are_500_and_error_events,
    aborting_a_stream_cancels_generation,
    aborting_text_cancels_generation,
    content_pipeline_runs_agent_and_sub_workflow,
);

async fn text(server: &TestServer, agent: &str, body: Value) -> Value {
    let (status, resp) = server
        .post_json(&format!("/agents/{agent}/text"), &body)
        .await;
    ok_data(status, resp)
}

async fn lists_the_example_agents(backend: Backend) {
    let server = TestServer::start(backend).await;
    let (status, body) = server.get_json("/agents").await;
    let agents = ok_data(status, body);
    let ids: Vec<&str> = agents
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["assistant", "writer", "supervisor", "operator"]);
    let assistant = &agents[0];
    assert_eq!(assistant["name"], "Assistant");
    assert_eq!(
        assistant["description"],
        "Answers questions; can look up the weather and do arithmetic."
    );
    assert_eq!(assistant["status"], "idle");
    assert_eq!(assistant["model"], "offline");
    assert_eq!(
        assistant["tools"],
        json!(["get_weather", "calculate", "update_working_memory"])
    );
    assert_eq!(assistant["subAgents"], json!([]));
    assert!(assistant["memory"]["config"].is_object());
    assert_eq!(
        assistant["memory"]["config"]["workingMemory"],
        json!({"scope": "user", "format": "json"})
    );
    assert_eq!(assistant["isTelemetryEnabled"], false);
    assert_eq!(agents[1]["memory"], Value::Null);
    assert_eq!(agents[2]["tools"], json!(["delegate_task"]));
    let subs: Vec<&str> = agents[2]["subAgents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(subs, ["assistant", "writer"]);
    assert!(agents[2]["memory"]["config"].is_object());

    // The detail is the summary, and each tool's definition.
    let (status, body) = server.get_json("/agents/writer").await;
    let mut writer = ok_data(status, body);
    let definitions = writer
        .as_object_mut()
        .and_then(|w| w.remove("toolDefinitions"))
        .expect("toolDefinitions");
    assert_eq!(writer, agents[1]);
    assert_eq!(definitions, json!([]));
    let (status, body) = server.get_json("/agents/assistant").await;
    let assistant = ok_data(status, body);
    let names: Vec<&str> = assistant["toolDefinitions"]
        .as_array()
        .expect("definitions")
        .iter()
        .map(|t| t["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(names, ["get_weather", "calculate", "update_working_memory"]);
    assert_eq!(
        assistant["toolDefinitions"][0]["parameters"]["required"],
        json!(["city"])
    );
    server.stop().await;
}

async fn unknown_agent_is_404(backend: Backend) {
    let server = TestServer::start(backend).await;
    let (status, body) = server.get_json("/agents/nope").await;
    assert_eq!(assert_failure(status, &body, 404), "Agent nope not found");
    for route in ["text", "stream", "chat"] {
        let (status, body) = server
            .post_json(&format!("/agents/nope/{route}"), &json!({"input": "hi"}))
            .await;
        assert_eq!(assert_failure(status, &body, 404), "Agent nope not found");
    }
    for route in ["object", "stream-object"] {
        let (status, body) = server
            .post_json(
                &format!("/agents/nope/{route}"),
                &json!({"input": "hi", "schema": {"type": "object"}}),
            )
            .await;
        assert_eq!(assert_failure(status, &body, 404), "Agent nope not found");
    }
    server.stop().await;
}

async fn text_accepts_the_three_input_shapes(backend: Backend) {
    let server = TestServer::start(backend).await;
    let shapes = [
        json!("hello world"),
        json!([{"role": "user", "parts": [{"type": "text", "text": "hello world"}]}]),
        json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hello world"}
        ]),
    ];
    for input in shapes {
        let data = text(&server, "writer", json!({"input": input})).await;
        assert_eq!(data["text"], "You said: hello world", "{input}");
        assert_eq!(data["finishReason"], "stop");
        assert_eq!(data["toolCalls"], json!([]));
        assert_eq!(data["toolResults"], json!([]));
        let u = &data["usage"];
        for f in [
            "promptTokens",
            "completionTokens",
            "totalTokens",
            "cachedInputTokens",
            "reasoningTokens",
        ] {
            assert!(u[f].is_u64(), "usage.{f} in {u}");
        }
        assert!(u["promptTokens"].as_u64().unwrap() > 0);
        assert_eq!(
            u["totalTokens"].as_u64(),
            Some(u["promptTokens"].as_u64().unwrap() + u["completionTokens"].as_u64().unwrap())
        );
    }
    server.stop().await;
}

async fn weather_and_calculate_tools_loop(backend: Backend) {
    let server = TestServer::start(backend).await;
    let data = text(
        &server,
        "assistant",
        json!({"input": "What is the weather in Paris?"}),
    )
    .await;
    assert_eq!(data["toolCalls"][0]["toolName"], "get_weather");
    assert_eq!(data["toolCalls"][0]["args"], json!({"city": "Paris"}));
    assert_eq!(
        data["toolResults"][0]["result"],
        json!({"city": "Paris", "temperatureC": 21, "condition": "sunny"})
    );
    let t = data["text"].as_str().unwrap();
    assert!(t.contains("21") && t.contains("sunny"), "{t}");

    let data = text(
        &server,
        "assistant",
        json!({"input": "please calculate (2 + 3) * 4.5"}),
    )
    .await;
    assert_eq!(data["toolCalls"][0]["toolName"], "calculate");
    assert_eq!(
        data["toolResults"][0]["result"],
        json!({"expression": "(2 + 3) * 4.5", "result": 22.5})
    );
    assert!(data["text"].as_str().unwrap().contains("22.5"));
    server.stop().await;
}

async fn a_bad_expression_is_a_tool_error(backend: Backend) {
    let server = TestServer::start(backend).await;
    let data = text(&server, "assistant", json!({"input": "calculate 2 + * 3"})).await;
    let r = &data["toolResults"][0];
    assert_eq!(r["isError"], true, "{r}");
    assert!(r["result"]["error"].as_str().unwrap().contains("2 + * 3"));
    assert!(data["text"].as_str().unwrap().contains("failed"));
    server.stop().await;
}

async fn supervisor_delegates_to_a_sub_agent(backend: Backend) {
    let server = TestServer::start(backend).await;
    let data = text(
        &server,
        "supervisor",
        json!({"input": "ask writer to draft a haiku about rain"}),
    )
    .await;
    assert_eq!(data["toolCalls"][0]["toolName"], "delegate_task");
    assert_eq!(
        data["toolResults"][0]["result"],
        json!({"agent": "writer", "text": "You said: draft a haiku about rain"})
    );
    assert!(
        data["text"]
            .as_str()
            .unwrap()
            .contains("You said: draft a haiku about rain")
    );
    // Delegating to the assistant runs the assistant's own tool loop.
    let data = text(
        &server,
        "supervisor",
        json!({"input": "ask assistant to tell the weather in Rome"}),
    )
    .await;
    assert!(
        data["toolResults"][0]["result"]["text"]
            .as_str()
            .unwrap()
            .contains("sunny")
    );
    server.stop().await;
}

fn prompt_tokens(data: &Value) -> u64 {
    data["usage"]["promptTokens"].as_u64().unwrap()
}

async fn memory_spans_calls_of_one_conversation_and_isolates_users(backend: Backend) {
    let server = TestServer::start(backend).await;
    // The supervisor: conversation memory without semantic recall (the assistant's would add
    // the conversation's older messages to a call with a small contextLimit).
    let conv = agentry_tests::new_id();
    let body = |user: &str| json!({"input": "remember the blue door", "options": {"userId": user, "conversationId": conv}});
    let first = text(&server, "supervisor", body("u1")).await;
    let second = text(&server, "supervisor", body("u1")).await;
    // The second call carries the first exchange (4 + 6 words) in its prompt.
    assert_eq!(prompt_tokens(&second), prompt_tokens(&first) + 10);
    // Another user in a conversation of the same id sees nothing of it.
    let other = text(&server, "supervisor", body("u2")).await;
    assert_eq!(prompt_tokens(&other), prompt_tokens(&first));
    // contextLimit 1 loads only the last message (the answer: 6 words).
    let limited = text(
        &server,
        "supervisor",
        json!({"input": "remember the blue door", "options": {"userId": "u1", "conversationId": conv, "contextLimit": 1}}),
    )
    .await;
    assert_eq!(prompt_tokens(&limited), prompt_tokens(&first) + 6);
    // The writer has no memory: nothing accumulates.
    let w1 = text(&server, "writer", body("u1")).await;
    let w2 = text(&server, "writer", body("u1")).await;
    assert_eq!(prompt_tokens(&w1), prompt_tokens(&w2));
    server.stop().await;
}

async fn context_reaches_dynamic_instructions(backend: Backend) {
    let server = TestServer::start(backend).await;
    let plain = text(&server, "writer", json!({"input": "hi"})).await;
    let french = text(
        &server,
        "writer",
        json!({"input": "hi", "options": {"context": {"language": "French"}}}),
    )
    .await;
    // "Answer in French." is added to the writer's instructions.
    assert_eq!(prompt_tokens(&french), prompt_tokens(&plain) + 3);
    server.stop().await;
}

async fn every_option_is_validated(backend: Backend) {
    let server = TestServer::start(backend).await;
    let bad = [
        ("temperature", json!(1.5)),
        ("temperature", json!(-0.1)),
        ("topP", json!(1.01)),
        ("frequencyPenalty", json!(2.5)),
        ("presencePenalty", json!(-1)),
        ("maxOutputTokens", json!(0)),
        ("maxOutputTokens", json!("many")),
        ("contextLimit", json!(-1)),
        ("maxSteps", json!(0)),
        ("seed", json!(1.5)),
        ("stopSequences", json!([1])),
        ("providerOptions", json!("x")),
        ("context", json!(5)),
        ("userId", json!(5)),
        ("conversationId", json!(false)),
    ];
    for (field, value) in bad {
        let (status, body) = server
            .post_json(
                "/agents/writer/text",
                &json!({"input": "hi", "options": {field: value}}),
            )
            .await;
        let msg = assert_failure(status, &body, 400);
        assert!(
            msg.contains(&format!("options.{field}")),
            "{field}={value}: {msg}"
        );
    }
    let good = json!({"input": "hi", "options": {
        "userId": "u", "conversationId": "c", "contextLimit": 5, "maxSteps": 3,
        "temperature": 0, "maxOutputTokens": 100, "topP": 0.5, "frequencyPenalty": 2,
        "presencePenalty": 0, "seed": 42, "stopSequences": ["END"],
        "providerOptions": {"openai": {"reasoningEffort": "low"}}, "context": {"tier": "pro"}
    }});
    let data = text(&server, "writer", good).await;
    assert_eq!(data["text"], "You said: hi");
    server.stop().await;
}

async fn max_output_tokens_truncates(backend: Backend) {
    let server = TestServer::start(backend).await;
    let data = text(
        &server,
        "writer",
        json!({"input": "one two three four", "options": {"maxOutputTokens": 3}}),
    )
    .await;
    assert_eq!(data["text"], "You said: one");
    assert_eq!(data["finishReason"], "length");
    server.stop().await;
}

async fn invalid_bodies_are_400(backend: Backend) {
    let server = TestServer::start(backend).await;
    let cases = [
        (json!({}), "input is required"),
        (json!({"input": 5}), "input must be"),
        (json!({"input": []}), "input must not be empty"),
        (
            json!({"input": [{"role": "robot", "content": "x"}]}),
            "role",
        ),
        (
            json!({"input": [{"role": "user"}]}),
            "neither parts nor content",
        ),
        (
            json!({"input": "x", "options": []}),
            "options must be an object",
        ),
    ];
    for (body, needle) in cases {
        let (status, resp) = server.post_json("/agents/writer/text", &body).await;
        let msg = assert_failure(status, &resp, 400);
        assert!(msg.contains(needle), "{body}: {msg}");
    }
    let resp = server
        .client
        .post(server.url("/agents/writer/text"))
        .header("content-type", "application/json")
        .body("{\"input\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["success"], false);
    let (status, resp) = server
        .post_json("/agents/writer/object", &json!({"input": "x"}))
        .await;
    assert!(assert_failure(status, &resp, 400).contains("schema"));
    let (status, resp) = server
        .post_json(
            "/agents/writer/object",
            &json!({"input": "x", "schema": {"type": "string"}}),
        )
        .await;
    assert!(assert_failure(status, &resp, 400).contains("schema"));
    server.stop().await;
}

async fn raw_stream_events(backend: Backend) {
    let server = TestServer::start(backend).await;
    let events = server
        .sse_events(
            "/agents/assistant/stream",
            &json!({"input": [{"role": "user", "parts": [{"type": "text", "text": "weather in Oslo"}]}]}),
        )
        .await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types[0], "tool-call");
    assert_eq!(events[0]["toolName"], "get_weather");
    assert_eq!(types[1], "tool-result");
    assert_eq!(events[1]["result"]["temperatureC"], 21);
    assert_eq!(*types.last().unwrap(), "finish");
    let finish = events.last().unwrap();
    assert_eq!(finish["finishReason"], "stop");
    assert!(finish["usage"]["totalTokens"].as_u64().unwrap() > 0);
    let deltas: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "text-delta")
        .collect();
    assert!(deltas.len() >= 3, "streamed in several chunks: {types:?}");
    let text: String = deltas
        .iter()
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert!(text.contains("sunny") && text.contains("21"), "{text}");
    server.stop().await;
}

async fn chat_speaks_the_ui_message_stream(backend: Backend) {
    let server = TestServer::start(backend).await;
    let resp = server
        .client
        .post(server.url("/agents/assistant/chat"))
        .json(&json!({"input": [{"role": "user", "parts": [{"type": "text", "text": "calculate 6 * 7"}]}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(
        resp.headers()["x-vercel-ai-ui-message-stream"],
        "v1",
        "the protocol header"
    );
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let body = resp.text().await.unwrap();
    let datas: Vec<&str> = body
        .split("\n\n")
        .filter_map(|b| b.strip_prefix("data: "))
        .collect();
    assert_eq!(*datas.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = datas[..datas.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let types: Vec<&str> = chunks.iter().map(|c| c["type"].as_str().unwrap()).collect();
    assert_eq!(types[..2], ["start", "start-step"]);
    assert_eq!(*types.last().unwrap(), "finish");
    let input = chunks
        .iter()
        .find(|c| c["type"] == "tool-input-available")
        .unwrap();
    assert_eq!(input["toolName"], "calculate");
    assert_eq!(input["input"], json!({"expression": "6 * 7"}));
    let output = chunks
        .iter()
        .find(|c| c["type"] == "tool-output-available")
        .unwrap();
    assert_eq!(output["output"]["result"], 42);
    assert!(types.contains(&"text-start") && types.contains(&"text-end"));
    let text: String = chunks
        .iter()
        .filter(|c| c["type"] == "text-delta")
        .map(|c| c["delta"].as_str().unwrap())
        .collect();
    assert!(text.contains("42"), "{text}");
    server.stop().await;
}

async fn object_is_valid_against_the_schema(backend: Backend) {
    let server = TestServer::start(backend).await;
    let schema = json!({
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "rating": {"type": "integer", "minimum": 1, "maximum": 5},
            "genre": {"type": "string", "enum": ["drama", "comedy"]},
            "released": {"type": "string", "format": "date"},
            "tags": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["title", "rating", "genre"]
    });
    let (status, body) = server
        .post_json(
            "/agents/writer/object",
            &json!({"input": "a film", "schema": schema}),
        )
        .await;
    let obj = ok_data(status, body);
    assert!(obj["title"].is_string());
    assert_eq!(obj["rating"], 1);
    assert_eq!(obj["genre"], "drama");
    assert!(obj["tags"].is_array());
    let arr = json!({"type": "array", "items": {"type": "object", "properties": {"n": {"type": "number", "minimum": 3}}, "required": ["n"]}});
    let (status, body) = server
        .post_json(
            "/agents/writer/object",
            &json!({"input": "x", "schema": arr}),
        )
        .await;
    assert_eq!(ok_data(status, body), json!([{"n": 3}]));
    server.stop().await;
}

async fn stream_object_grows_then_validates(backend: Backend) {
    let server = TestServer::start(backend).await;
    let schema = json!({"type": "object", "properties": {"headline": {"type": "string"}, "words": {"type": "integer", "minimum": 10}}, "required": ["headline", "words"]});
    let events = server
        .sse_events(
            "/agents/writer/stream-object",
            &json!({"input": "news", "schema": schema}),
        )
        .await;
    let partials: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "partial-object")
        .collect();
    assert!(partials.len() >= 2, "{events:?}");
    let final_obj = events.iter().find(|e| e["type"] == "object").unwrap();
    assert_eq!(
        final_obj["object"],
        json!({"headline": "example headline", "words": 10})
    );
    assert_eq!(
        *partials.last().unwrap().get("object").unwrap(),
        final_obj["object"]
    );
    assert_eq!(events.last().unwrap()["type"], "finish");
    server.stop().await;
}

/// A model that always fails, naming why.
struct BrokenModel;

#[async_trait::async_trait]
impl Model for BrokenModel {
    fn name(&self) -> &str {
        "broken"
    }
    async fn generate(&self, _r: &ModelRequest) -> Result<ModelResponse, ModelError> {
        Err(ModelError::new("upstream said 503 Service Unavailable"))
    }
    async fn stream(&self, _r: &ModelRequest) -> Result<ChunkStream, ModelError> {
        Ok(futures::stream::iter(vec![
            Ok(ModelChunk::TextDelta("partial ".into())),
            Err(ModelError::new("upstream said 503 Service Unavailable")),
        ])
        .boxed())
    }
}

async fn model_failures_are_500_and_error_events(backend: Backend) {
    let server = TestServer::start(backend).await;
    server
        .agents
        .register(Agent::new("broken", "Broken").model(Arc::new(BrokenModel)))
        .unwrap();
    let (status, body) = server
        .post_json("/agents/broken/text", &json!({"input": "hi"}))
        .await;
    let msg = assert_failure(status, &body, 500);
    assert!(msg.contains("503 Service Unavailable"), "{msg}");
    let events = server
        .sse_events("/agents/broken/stream", &json!({"input": "hi"}))
        .await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["text-delta", "error"]);
    assert!(events[1]["error"].as_str().unwrap().contains("503"));
    server.stop().await;
}

/// A model that streams a word every 20 ms for a long time and records what happened.
struct SlowModel {
    chunks: Arc<AtomicUsize>,
    dropped: Arc<AtomicBool>,
}

struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[async_trait::async_trait]
impl Model for SlowModel {
    fn name(&self) -> &str {
        "slow"
    }
    async fn generate(&self, _r: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let _flag = DropFlag(self.dropped.clone());
        for _ in 0..1500 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            self.chunks.fetch_add(1, Ordering::SeqCst);
        }
        Ok(ModelResponse {
            text: "slow".into(),
            tool_calls: Vec::new(),
            finish_reason: FinishReason::Stop,
            usage: Usage::default(),
            model: None,
        })
    }
    async fn stream(&self, _r: &ModelRequest) -> Result<ChunkStream, ModelError> {
        let flag = DropFlag(self.dropped.clone());
        let chunks = self.chunks.clone();
        Ok(futures::stream::unfold((0u32, flag), move |(i, flag)| {
            let chunks = chunks.clone();
            async move {
                if i >= 1500 {
                    return None;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                chunks.fetch_add(1, Ordering::SeqCst);
                Some((Ok(ModelChunk::TextDelta(format!("w{i} "))), (i + 1, flag)))
            }
        })
        .boxed())
    }
}

fn slow_agent(server: &TestServer) -> (Arc<AtomicUsize>, Arc<AtomicBool>) {
    let chunks = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicBool::new(false));
    server
        .agents
        .register(Agent::new("slow", "Slow").model(Arc::new(SlowModel {
            chunks: chunks.clone(),
            dropped: dropped.clone(),
        })))
        .unwrap();
    (chunks, dropped)
}

async fn wait_for(flag: &AtomicBool) -> bool {
    for _ in 0..100 {
        if flag.load(Ordering::SeqCst) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

async fn aborting_a_stream_cancels_generation(backend: Backend) {
    let server = TestServer::start(backend).await;
    let (chunks, dropped) = slow_agent(&server);
    let resp = server
        .client
        .post(server.url("/agents/slow/stream"))
        .json(&json!({"input": "go"}))
        .send()
        .await
        .unwrap();
    let mut body = resp.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("w2 ") {
        let chunk = body.next().await.unwrap().unwrap();
        seen.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    drop(body);
    // The gate: the model's stream is dropped, so none of its code runs again (its chunk
    // count is final from here).
    assert!(wait_for(&dropped).await, "the model stream was not dropped");
    let at_drop = chunks.load(Ordering::SeqCst);
    assert!(at_drop < 100, "stopped early: {at_drop} chunks");
    server.stop().await;
}

async fn aborting_text_cancels_generation(backend: Backend) {
    let server = TestServer::start(backend).await;
    let (chunks, dropped) = slow_agent(&server);
    for route in ["text", "object"] {
        dropped.store(false, Ordering::SeqCst);
        let before = chunks.load(Ordering::SeqCst);
        let sent = server
            .client
            .post(server.url(&format!("/agents/slow/{route}")))
            .json(&json!({"input": "go", "schema": {"type": "object"}}))
            .timeout(Duration::from_millis(300))
            .send()
            .await;
        assert!(sent.unwrap_err().is_timeout(), "{route} answered");
        assert!(
            wait_for(&dropped).await,
            "{route}: the model call was not dropped"
        );
        // Dropped: the generation's code never runs again, so its count is final.
        let at_drop = chunks.load(Ordering::SeqCst);
        assert!(
            at_drop - before < 100,
            "{route}: stopped late: {at_drop} chunks"
        );
    }
    server.stop().await;
}

async fn content_pipeline_runs_agent_and_sub_workflow(backend: Backend) {
    let server = TestServer::start(backend).await;
    let (status, body) = server.get_json("/workflows/content-pipeline").await;
    let detail = ok_data(status, body);
    let steps: Vec<(&str, &str)> = detail["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_str().unwrap(), s["type"].as_str().unwrap()))
        .collect();
    assert_eq!(
        steps,
        [
            ("draft", "andAgent"),
            ("count-words", "andWorkflow"),
            ("package", "andThen")
        ]
    );
    let (status, body) = server
        .post_json(
            "/workflows/content-pipeline/execute",
            &json!({"input": {"topic": "tidal energy"}}),
        )
        .await;
    let data = ok_data(status, body);
    assert_eq!(data["status"], "completed");
    let r = &data["result"];
    assert_eq!(r["topic"], "tidal energy");
    let draft = r["draft"].as_str().unwrap();
    assert!(draft.contains("tidal energy"), "{draft}");
    assert_eq!(r["words"], json!(draft.split_whitespace().count()));
    server.stop().await;
}
