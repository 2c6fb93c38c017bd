//! Working memory through the real server (issue 38, item 1), on SQLite and PostgreSQL: the
//! model keeps it with `update_working_memory` (the offline model's `remember that I prefer ...`)
//! and reads it (`what do you know about me`); `GET` and `PUT /agents/{id}/memory/working` read
//! and set it, per user and per conversation, bounded and checked against the schema; and one
//! user never reaches another's, with authentication on and in strict mode.

use std::time::Duration;

use agentry_agents::{Agent, WorkingMemory, WorkingMemoryScope};
use agentry_auth::{TokenOptions, create_token};
use agentry_server::AuthSettings;
use agentry_tests::{Backend, TestServer, assert_failure, assert_iso, ok_data};
use reqwest::StatusCode;
use serde_json::{Value, json};

agentry_tests::backend_tests!(
    the_model_keeps_a_users_working_memory,
    a_working_memory_set_through_the_route_reaches_the_model,
    values_are_bounded_and_checked_against_the_schema,
    a_conversation_scope_keeps_one_memory_per_conversation,
    users_never_reach_each_other_s_working_memory,
);

const SECRET: &str = "working-memory-tests-secret";

fn preferences(scope: WorkingMemoryScope) -> WorkingMemory {
    WorkingMemory::schema(
        scope,
        json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "units": {"type": "string", "enum": ["metric", "imperial"]}
            },
            "additionalProperties": false
        }),
    )
    .expect("a valid schema")
}

fn memory_path(agent: &str, query: &str) -> String {
    format!("/agents/{agent}/memory/working{query}")
}

/// Asks `agent` for `input` with `options` (and `token`, when given); answers the data.
async fn ask(
    server: &TestServer,
    agent: &str,
    input: &str,
    options: Value,
    token: Option<&str>,
) -> Value {
    let mut req = server
        .client
        .post(server.url(&format!("/agents/{agent}/text")))
        .json(&json!({"input": input, "options": options}));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = server.send(req).await;
    ok_data(r.status, r.body)
}

async fn get(server: &TestServer, path: &str, token: Option<&str>) -> (StatusCode, Value) {
    let mut req = server.client.get(server.url(path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = server.send(req).await;
    (r.status, r.body)
}

async fn put(
    server: &TestServer,
    path: &str,
    body: &Value,
    token: Option<&str>,
) -> (StatusCode, Value) {
    let mut req = server.client.put(server.url(path)).json(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = server.send(req).await;
    (r.status, r.body)
}

async fn the_model_keeps_a_users_working_memory(backend: Backend) {
    let server = TestServer::start(backend).await;
    let (status, body) = get(&server, &memory_path("assistant", "?userId=u1"), None).await;
    let empty = ok_data(status, body);
    assert_eq!(empty["agentId"], "assistant");
    assert_eq!(empty["scope"], "user");
    assert_eq!(empty["userId"], "u1");
    assert_eq!(empty["value"], Value::Null);
    assert_eq!(empty["updatedAt"], Value::Null);
    assert_eq!(
        empty["schema"]["properties"]["units"]["enum"],
        json!(["metric", "imperial"])
    );
    let data = ask(
        &server,
        "assistant",
        "Remember that I prefer metric units in Paris",
        json!({"userId": "u1", "conversationId": "c1"}),
        None,
    )
    .await;
    assert_eq!(data["toolCalls"][0]["toolName"], "update_working_memory");
    assert_eq!(
        data["toolCalls"][0]["args"],
        json!({"city": "Paris", "units": "metric"})
    );
    assert_eq!(data["text"], "Noted: Paris, metric.");

    let (status, body) = get(&server, &memory_path("assistant", "?userId=u1"), None).await;
    let kept = ok_data(status, body);
    assert_eq!(kept["value"], json!({"city": "Paris", "units": "metric"}));
    assert_iso(&kept["updatedAt"]);

    // The scope `user`: another conversation of the same user sees it, another user does not.
    let data = ask(
        &server,
        "assistant",
        "What do you know about me?",
        json!({"userId": "u1", "conversationId": "c2"}),
        None,
    )
    .await;
    assert_eq!(data["text"], "You prefer metric units in Paris.");
    let data = ask(
        &server,
        "assistant",
        "What do you know about me?",
        json!({"userId": "u2", "conversationId": "c1"}),
        None,
    )
    .await;
    assert_eq!(data["text"], "Nothing yet.");
    let (status, body) = get(&server, &memory_path("assistant", "?userId=u2"), None).await;
    assert_eq!(ok_data(status, body)["value"], Value::Null);
    server.stop().await;
}

async fn a_working_memory_set_through_the_route_reaches_the_model(backend: Backend) {
    let server = TestServer::start(backend).await;
    let value = json!({"city": "Oslo", "units": "imperial"});
    let (status, body) = put(
        &server,
        &memory_path("assistant", "?userId=u3"),
        &json!({"value": value}),
        None,
    )
    .await;
    let written = ok_data(status, body);
    assert_eq!(written["value"], value);
    assert_iso(&written["updatedAt"]);
    let data = ask(
        &server,
        "assistant",
        "what do you know about me",
        json!({"userId": "u3"}),
        None,
    )
    .await;
    assert_eq!(data["text"], "You prefer imperial units in Oslo.");
    // A new value replaces the old one whole.
    let (status, body) = put(
        &server,
        &memory_path("assistant", "?userId=u3"),
        &json!({"value": {"units": "metric"}}),
        None,
    )
    .await;
    ok_data(status, body);
    let (status, body) = get(&server, &memory_path("assistant", "?userId=u3"), None).await;
    assert_eq!(ok_data(status, body)["value"], json!({"units": "metric"}));
    server.stop().await;
}

async fn values_are_bounded_and_checked_against_the_schema(backend: Backend) {
    let server = TestServer::start(backend).await;
    let path = memory_path("assistant", "?userId=u4");
    let (status, body) = put(&server, &path, &json!({"value": {"units": "kelvin"}}), None).await;
    let msg = assert_failure(status, &body, 400);
    assert_eq!(body["code"], "invalid_request");
    assert!(msg.contains("does not match its schema"), "{msg}");
    let (status, body) = put(&server, &path, &json!({"value": {"colour": "red"}}), None).await;
    assert_failure(status, &body, 400);
    let (status, body) = put(&server, &path, &json!({"city": "Paris"}), None).await;
    let msg = assert_failure(status, &body, 400);
    assert!(msg.contains("value"), "{msg}");
    let big = json!({"value": {"city": "x".repeat(17 * 1024)}});
    let (status, body) = put(&server, &path, &big, None).await;
    let msg = assert_failure(status, &body, 413);
    assert_eq!(body["code"], "payload_too_large");
    assert!(msg.contains("16384"), "{msg}");
    // Nothing was written by any of them.
    let (status, body) = get(&server, &path, None).await;
    assert_eq!(ok_data(status, body)["value"], Value::Null);

    // The model's update goes through the same checks: the tool fails, the model reads why.
    let data = ask(
        &server,
        "assistant",
        "remember that I prefer kelvin units in Oslo",
        json!({"userId": "u4"}),
        None,
    )
    .await;
    assert_eq!(data["toolResults"][0]["isError"], true, "{data}");
    let text = data["text"].as_str().unwrap();
    assert!(text.contains("does not match its schema"), "{text}");
    let (status, body) = get(&server, &path, None).await;
    assert_eq!(ok_data(status, body)["value"], Value::Null);

    // An agent without working memory, and an unknown agent.
    let (status, body) = get(&server, &memory_path("writer", "?userId=u4"), None).await;
    let msg = assert_failure(status, &body, 404);
    assert_eq!(body["code"], "no_working_memory");
    assert_eq!(msg, "Agent writer has no working memory");
    let (status, body) = put(
        &server,
        &memory_path("nope", ""),
        &json!({"value": {}}),
        None,
    )
    .await;
    assert_failure(status, &body, 404);
    assert_eq!(body["code"], "agent_not_found");
    server.stop().await;
}

async fn a_conversation_scope_keeps_one_memory_per_conversation(backend: Backend) {
    let server = TestServer::start_with_app(backend, AuthSettings::default(), |app| {
        app.agent(
            Agent::new("trip", "Trip")
                .description("Keeps a trip's preferences, one per conversation.")
                .working_memory(preferences(WorkingMemoryScope::Conversation)),
        )
        .agent(
            Agent::new("notes", "Notes").working_memory(
                WorkingMemory::template(WorkingMemoryScope::Conversation, "# Notes\n- ")
                    .expect("a template"),
            ),
        )
    })
    .await;
    let data = ask(
        &server,
        "trip",
        "remember that I prefer imperial units in Lisbon",
        json!({"userId": "u5", "conversationId": "t1"}),
        None,
    )
    .await;
    assert_eq!(data["text"], "Noted: Lisbon, imperial.");
    let (status, body) = get(
        &server,
        &memory_path("trip", "?userId=u5&conversationId=t1"),
        None,
    )
    .await;
    let kept = ok_data(status, body);
    assert_eq!(kept["scope"], "conversation");
    assert_eq!(kept["conversationId"], "t1");
    assert_eq!(
        kept["value"],
        json!({"city": "Lisbon", "units": "imperial"})
    );
    let (status, body) = get(
        &server,
        &memory_path("trip", "?userId=u5&conversationId=t2"),
        None,
    )
    .await;
    assert_eq!(ok_data(status, body)["value"], Value::Null);
    let data = ask(
        &server,
        "trip",
        "what do you know about me",
        json!({"userId": "u5", "conversationId": "t2"}),
        None,
    )
    .await;
    assert_eq!(data["text"], "Nothing yet.");
    let data = ask(
        &server,
        "trip",
        "what do you know about me",
        json!({"userId": "u5", "conversationId": "t1"}),
        None,
    )
    .await;
    assert_eq!(data["text"], "You prefer imperial units in Lisbon.");
    // Without a conversation there is no memory of this scope to read.
    let (status, body) = get(&server, &memory_path("trip", "?userId=u5"), None).await;
    let msg = assert_failure(status, &body, 400);
    assert!(msg.contains("conversationId"), "{msg}");

    // A template's working memory is Markdown text.
    let path = memory_path("notes", "?userId=u5&conversationId=t1");
    let (status, body) = get(&server, &path, None).await;
    let empty = ok_data(status, body);
    assert_eq!(empty["template"], "# Notes\n- ");
    assert!(empty.get("schema").is_none(), "{empty}");
    let (status, body) = put(&server, &path, &json!({"value": {"tea": true}}), None).await;
    assert_failure(status, &body, 400);
    let (status, body) = put(&server, &path, &json!({"value": "# Notes\n- tea"}), None).await;
    assert_eq!(ok_data(status, body)["value"], "# Notes\n- tea");
    let detail = server.get_data("/agents/notes").await;
    let tool = detail["toolDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "update_working_memory")
        .cloned()
        .expect("the tool is offered");
    assert_eq!(tool["parameters"]["required"], json!(["markdown"]));
    server.stop().await;
}

fn token(sub: &str) -> String {
    let options = TokenOptions {
        expires_in: Some(Duration::from_secs(600)),
        audience: None,
        issuer: None,
        not_before: None,
    };
    create_token(&json!({"sub": sub}), SECRET.as_bytes(), &options).unwrap()
}

fn auth(strict: bool) -> AuthSettings {
    AuthSettings {
        jwt_secret: Some(SECRET.into()),
        strict,
        ..Default::default()
    }
}

async fn users_never_reach_each_other_s_working_memory(backend: Backend) {
    for strict in [false, true] {
        let server = TestServer::start_with(backend, auth(strict), |h| h).await;
        let (ada, bob) = (token("ada"), token("bob"));
        let path = memory_path("assistant", "");
        // Without a token: no working memory (strict mode: the route is protected).
        let (status, body) = get(&server, &path, None).await;
        assert_failure(status, &body, 401);
        assert_eq!(body["code"], "authentication_required");
        let (status, body) = put(&server, &path, &json!({"value": {}}), None).await;
        assert_failure(status, &body, 401);

        // A verified caller's memory is theirs; naming another user is refused.
        let value = json!({"city": "Paris", "units": "metric"});
        let (status, body) = put(&server, &path, &json!({"value": value}), Some(&ada)).await;
        let written = ok_data(status, body);
        assert_eq!(written["userId"], "ada");
        let (status, body) = put(
            &server,
            &memory_path("assistant", "?userId=ada"),
            &json!({"value": value}),
            Some(&ada),
        )
        .await;
        ok_data(status, body);
        for (method_put, query) in [(false, "?userId=ada"), (true, "?userId=ada")] {
            let (status, body) = if method_put {
                put(
                    &server,
                    &memory_path("assistant", query),
                    &json!({"value": {"city": "Rome"}}),
                    Some(&bob),
                )
                .await
            } else {
                get(&server, &memory_path("assistant", query), Some(&bob)).await
            };
            assert_failure(status, &body, 403);
            assert_eq!(body["code"], "forbidden");
        }
        let (status, body) = get(&server, &path, Some(&bob)).await;
        assert_eq!(
            ok_data(status, body)["value"],
            Value::Null,
            "strict {strict}"
        );
        let (status, body) = get(&server, &path, Some(&ada)).await;
        assert_eq!(ok_data(status, body)["value"], value);

        // A generation reads the verified user's memory, whatever userId it claims.
        let data = ask(
            &server,
            "assistant",
            "what do you know about me",
            json!({"userId": "ada"}),
            Some(&bob),
        )
        .await;
        assert_eq!(data["text"], "Nothing yet.");
        let data = ask(
            &server,
            "assistant",
            "what do you know about me",
            json!({}),
            Some(&ada),
        )
        .await;
        assert_eq!(data["text"], "You prefer metric units in Paris.");
        // Bob's update through the model is Bob's.
        let data = ask(
            &server,
            "assistant",
            "remember that I prefer imperial units in Boston",
            json!({"userId": "ada"}),
            Some(&bob),
        )
        .await;
        assert_eq!(data["text"], "Noted: Boston, imperial.");
        let (status, body) = get(&server, &path, Some(&ada)).await;
        assert_eq!(ok_data(status, body)["value"], value);
        let (status, body) = get(&server, &path, Some(&bob)).await;
        assert_eq!(
            ok_data(status, body)["value"],
            json!({"city": "Boston", "units": "imperial"})
        );
        server.stop().await;
    }
}
