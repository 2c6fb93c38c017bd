//! Authentication through the real server (spec section 5 and the 401 rows of section 7): the
//! protected set, every kind of bad token, public routes and patterns, context injection, the
//! host example's routes and its custom provider.

use std::sync::Arc;
use std::time::Duration;

use agentry_agents::{
    Agent, ChunkStream, FinishReason, Model, ModelError, ModelRequest, ModelResponse, Role, Usage,
};
use agentry_auth::{TokenOptions, create_token};
use agentry_engine::{StepContext, Workflow, step};
use agentry_http::access::BUILTIN_ROUTES;
use agentry_http::authn::Access;
use agentry_server::AuthSettings;
use agentry_tests::{Backend, TestServer, backend_tests, ok_data};
use reqwest::StatusCode;
use serde_json::{Value, json};

#[path = "../crates/agentry-server/examples/host.rs"]
#[allow(dead_code)]
mod host_example;

const SECRET: &str = "auth-tests-secret";
const AUDIENCE: &str = "agentry-tests";
const ISSUER: &str = "https://issuer.test";

backend_tests!(the_user_reaches_instructions_steps_and_state);

fn jwt_settings() -> AuthSettings {
    AuthSettings {
        jwt_secret: Some(SECRET.into()),
        jwt_audience: Some(AUDIENCE.into()),
        jwt_issuer: Some(ISSUER.into()),
        ..Default::default()
    }
}

fn options(expires_in: Option<u64>) -> TokenOptions {
    TokenOptions {
        expires_in: expires_in.map(Duration::from_secs),
        audience: Some(AUDIENCE.into()),
        issuer: Some(ISSUER.into()),
        not_before: None,
    }
}

fn token_for(payload: Value) -> String {
    create_token(&payload, SECRET.as_bytes(), &options(Some(600))).unwrap()
}

fn good_token() -> String {
    token_for(
        json!({"sub": "u42", "name": "Grace", "email": "grace@example.com",
                     "roles": ["admin"], "tier": "pro"}),
    )
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Every bad token of the issue, with the exact 401 message it must get.
fn bad_tokens() -> Vec<(&'static str, Option<String>, &'static str)> {
    let expired = {
        let mut p = json!({"sub": "u42"});
        p["exp"] = json!(chrono::Utc::now().timestamp() - 3600);
        create_token(&p, SECRET.as_bytes(), &options(None)).unwrap()
    };
    let wrong_signature = create_token(
        &json!({"sub": "u42"}),
        b"not-the-secret",
        &options(Some(600)),
    )
    .unwrap();
    let wrong_audience = create_token(
        &json!({"sub": "u42"}),
        SECRET.as_bytes(),
        &TokenOptions {
            audience: Some("someone-else".into()),
            ..options(Some(600))
        },
    )
    .unwrap();
    let wrong_issuer = create_token(
        &json!({"sub": "u42"}),
        SECRET.as_bytes(),
        &TokenOptions {
            issuer: Some("https://evil.test".into()),
            ..options(Some(600))
        },
    )
    .unwrap();
    let alg_none = format!(
        "{}.{}.",
        b64(br#"{"alg":"none","typ":"JWT"}"#),
        b64(format!(r#"{{"sub":"u42","aud":"{AUDIENCE}","iss":"{ISSUER}"}}"#).as_bytes())
    );
    vec![
        ("no token", None, "Authentication required"),
        (
            "malformed",
            Some("not-a-jwt".into()),
            "Invalid token: malformed token",
        ),
        (
            "wrong signature",
            Some(wrong_signature),
            "Invalid token: invalid signature",
        ),
        ("expired", Some(expired), "Token expired"),
        (
            "wrong audience",
            Some(wrong_audience),
            "Invalid token: invalid audience",
        ),
        (
            "wrong issuer",
            Some(wrong_issuer),
            "Invalid token: invalid issuer",
        ),
        (
            "alg none",
            Some(alg_none),
            "Invalid token: algorithm none is not allowed",
        ),
    ]
}

/// The six protected routes with bodies they accept.
fn protected_calls() -> Vec<(&'static str, Value)> {
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}},
                        "required": ["city"]});
    vec![
        ("/agents/assistant/text", json!({"input": "hi"})),
        ("/agents/assistant/stream", json!({"input": "hi"})),
        (
            "/agents/assistant/object",
            json!({"input": "hi", "schema": schema}),
        ),
        (
            "/agents/assistant/stream-object",
            json!({"input": "hi", "schema": schema}),
        ),
        (
            "/workflows/word-count/execute",
            json!({"input": {"text": "a b"}}),
        ),
        (
            "/workflows/word-count/stream",
            json!({"input": {"text": "a b"}}),
        ),
    ]
}

async fn post(
    server: &TestServer,
    path: &str,
    body: &Value,
    token: Option<&str>,
) -> reqwest::Response {
    let mut req = server.client.post(server.url(path)).json(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.send().await.unwrap()
}

async fn assert_401(resp: reqwest::Response, message: &str, what: &str) {
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{what}");
    assert_eq!(
        resp.headers()["www-authenticate"],
        "Bearer",
        "{what}: WWW-Authenticate"
    );
    let body: Value = resp.json().await.unwrap();
    let code = match message {
        "Authentication required" => "authentication_required",
        "Token expired" => "token_expired",
        _ => "invalid_token",
    };
    assert_eq!(
        body,
        json!({"success": false, "error": message, "code": code}),
        "{what}: body"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protected_routes_refuse_every_bad_token_and_accept_a_good_one() {
    let server = TestServer::start_with(Backend::Sqlite, jwt_settings(), |h| h).await;
    let bad = bad_tokens();
    for (path, body) in protected_calls() {
        for (what, token, message) in &bad {
            let resp = post(&server, path, &body, token.as_deref()).await;
            assert_401(resp, message, &format!("{path} with {what}")).await;
        }
        // Another scheme is no bearer token at all.
        let resp = server
            .client
            .post(server.url(path))
            .header("authorization", "Basic dXNlcjpwYXNz")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_401(resp, "Authentication required", &format!("{path} basic")).await;
        let resp = post(&server, path, &body, Some(&good_token())).await;
        assert_eq!(resp.status(), StatusCode::OK, "{path} with a good token");
    }
    // Other spellings of a protected path do not dodge its pattern.
    for path in [
        "/agents/assistant/%74ext",
        "/agents/assistant/text/",
        "//agents/assistant/text",
        "/workflows/word-count/./execute",
    ] {
        let resp = post(&server, path, &json!({"input": "hi"}), None).await;
        assert_401(resp, "Authentication required", path).await;
    }
    server.stop().await;
}

/// `GET /api/me` is protected: it refuses every bad token with its 401 and answers the user a
/// good one stands for (a client such as the console checks its token with it); `GET /api/info`
/// is public and says that tokens are asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_me_checks_a_token_and_api_info_says_authentication_is_on() {
    let server = TestServer::start_with(Backend::Sqlite, jwt_settings(), |h| h).await;
    for (what, token, message) in bad_tokens() {
        let mut req = server.client.get(server.url("/api/me"));
        if let Some(t) = &token {
            req = req.bearer_auth(t);
        }
        assert_401(
            req.send().await.unwrap(),
            message,
            &format!("/api/me with {what}"),
        )
        .await;
    }
    let resp = server
        .client
        .get(server.url("/api/me"))
        .bearer_auth(good_token())
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let user = ok_data(status, resp.json().await.unwrap());
    assert_eq!(user["user"]["id"], "u42");
    assert_eq!(user["user"]["email"], "grace@example.com");
    let resp = server
        .client
        .get(server.url("/api/info"))
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let info = ok_data(status, resp.json().await.unwrap());
    assert_eq!(
        info["authentication"],
        json!({"enabled": true, "strict": false})
    );
    server.stop().await;
}

/// `GET /metrics` is public by default (like `/api/logs`), and a route rule protects it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_public_by_default_and_a_route_rule_protects_them() {
    let open = TestServer::start_with(Backend::Sqlite, jwt_settings(), |h| h).await;
    let resp = open.client.get(open.url("/metrics")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let text = resp.text().await.unwrap();
    assert!(text.contains("# TYPE agentry_leases_held gauge"), "{text}");
    open.stop().await;
    let guarded = TestServer::start_with(Backend::Sqlite, jwt_settings(), |h| {
        h.protected_route("GET /metrics")
    })
    .await;
    let resp = guarded
        .client
        .get(guarded.url("/metrics"))
        .send()
        .await
        .unwrap();
    assert_401(resp, "Authentication required", "/metrics without a token").await;
    let resp = guarded
        .client
        .get(guarded.url("/metrics"))
        .bearer_auth(good_token())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    guarded.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rs256_configuration_refuses_hs256_tokens() {
    let fixtures = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../crates/agentry-auth/fixtures"
    );
    let settings = AuthSettings {
        jwt_public_key_file: Some(format!("{fixtures}/test_rsa_public.pem")),
        ..Default::default()
    };
    let server = TestServer::start_with(Backend::Sqlite, settings, |h| h).await;
    let body = json!({"input": {"text": "a b"}});
    let path = "/workflows/word-count/execute";
    let public_pem = std::fs::read(format!("{fixtures}/test_rsa_public.pem")).unwrap();
    let private_pem = std::fs::read(format!("{fixtures}/test_rsa_private.pem")).unwrap();
    for (what, secret) in [
        ("a secret", b"secret".as_slice()),
        ("the public key", &public_pem),
    ] {
        let t = create_token(&json!({"sub": "u"}), secret, &TokenOptions::default()).unwrap();
        let resp = post(&server, path, &body, Some(&t)).await;
        assert_401(
            resp,
            "Invalid token: algorithm HS256 is not allowed",
            &format!("HS256 signed with {what}"),
        )
        .await;
    }
    let rs = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
        &json!({"sub": "rsa-user"}),
        &jsonwebtoken::EncodingKey::from_rsa_pem(&private_pem).unwrap(),
    )
    .unwrap();
    let resp = post(&server, path, &body, Some(&rs)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let data = ok_data(resp.status(), resp.json().await.unwrap());
    assert_eq!(data["status"], "completed");
    server.stop().await;
}

/// A concrete path for a route pattern, on the example registry.
fn concrete(path: &str) -> String {
    path.replace("{id}", "word-count")
        .replace("{execution_id}", "no-such-execution")
        .replace("{executionId}", "no-such-execution")
        .replace("{tail:.*}", "index.html")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_public_route_answers_without_a_token() {
    let server = TestServer::start_with(Backend::Sqlite, jwt_settings(), |h| h).await;
    let mut checked = 0;
    for r in BUILTIN_ROUTES.iter().filter(|r| r.access == Access::Public) {
        let url = server.url(&concrete(r.path));
        let req = match r.method {
            "GET" => server.client.get(url),
            "POST" => server.client.post(url).json(&json!({"input": "hi"})),
            "PUT" => server.client.put(url).json(&json!({"value": {}})),
            m => panic!("unexpected method {m}"),
        };
        let status = req.send().await.unwrap().status();
        assert_ne!(status, StatusCode::UNAUTHORIZED, "{} {}", r.method, r.path);
        assert!(
            !status.is_server_error(),
            "{} {}: {status}",
            r.method,
            r.path
        );
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} public routes");
    // The chat endpoint streams without a token.
    let resp = post(
        &server,
        "/agents/assistant/chat",
        &json!({"input": "hi"}),
        None,
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(resp.text().await.unwrap().contains("[DONE]"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn public_and_protected_patterns_apply_to_builtin_and_custom_routes() {
    let settings = AuthSettings {
        public_routes: Some("POST /workflows/word-count/*".into()),
        protected_routes: Some("POST /workflows/*, GET /agents/writer".into()),
        ..jwt_settings()
    };
    let server = TestServer::start_with(Backend::Sqlite, settings, |h| {
        h.post("/hooks/{name}", || async {
            actix_web::HttpResponse::Ok().finish()
        })
        .post("/open/{name}", || async {
            actix_web::HttpResponse::Ok().finish()
        })
        .protected_route("POST /hooks/*")
        .protected_route("POST /open/*")
        .public_route("POST /open/*")
    })
    .await;
    let word = json!({"input": {"text": "a"}});
    // A public pattern exempts a built-in protected route...
    let resp = post(&server, "/workflows/word-count/execute", &word, None).await;
    assert_eq!(resp.status(), StatusCode::OK);
    // ... and only the routes it matches.
    let resp = post(
        &server,
        "/workflows/countdown/execute",
        &json!({"input": {}}),
        None,
    )
    .await;
    assert_401(resp, "Authentication required", "countdown").await;
    // A protected pattern guards suspend and resume, and a public built-in GET.
    let resp = post(
        &server,
        "/workflows/expense-approval/executions/e1/resume",
        &json!({"resumeData": {}}),
        None,
    )
    .await;
    assert_401(resp, "Authentication required", "resume").await;
    let resp = server
        .client
        .get(server.url("/agents/writer"))
        .send()
        .await
        .unwrap();
    assert_401(resp, "Authentication required", "GET /agents/writer").await;
    let resp = server
        .client
        .get(server.url("/agents/assistant"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    // Custom routes: protected by pattern, and public wins over protected.
    let resp = post(&server, "/hooks/a", &json!({}), None).await;
    assert_401(resp, "Authentication required", "custom protected").await;
    let resp = post(&server, "/hooks/a", &json!({}), Some(&good_token())).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let resp = post(&server, "/open/a", &json!({}), None).await;
    assert_eq!(resp.status(), StatusCode::OK);
    server.stop().await;
}

/// Answers with the system prompt it was given, so a test can read the instructions.
struct EchoInstructions;

#[async_trait::async_trait]
impl Model for EchoInstructions {
    fn name(&self) -> &str {
        "echo-instructions"
    }
    async fn generate(&self, r: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let system = r
            .messages
            .iter()
            .find(|m| m.role == Role::System)
            .map(|m| m.content.clone())
            .unwrap_or_default();
        Ok(ModelResponse {
            text: system,
            tool_calls: Vec::new(),
            finish_reason: FinishReason::Stop,
            usage: Usage::default(),
            model: None,
        })
    }
    async fn stream(&self, _r: &ModelRequest) -> Result<ChunkStream, ModelError> {
        Err(ModelError::new("not used"))
    }
}

async fn the_user_reaches_instructions_steps_and_state(backend: Backend) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
    let (on_start, on_end) = (seen.clone(), seen.clone());
    let server = TestServer::start_with_app(backend, jwt_settings(), |h| {
        h.agent(
            Agent::new("whoami-agent", "Who am I")
                .model(Arc::new(EchoInstructions))
                .on_start(move |op| {
                    on_start
                        .lock()
                        .unwrap()
                        .push(json!({"hook": "start", "op": op.operation,
                        "userId": op.user_id, "user": op.user().cloned()}));
                })
                .on_end(move |op, outcome| {
                    on_end
                        .lock()
                        .unwrap()
                        .push(json!({"hook": "end", "userId": op.user_id,
                        "text": outcome.ok()}));
                })
                .dynamic_instructions(|ctx| {
                    let name = ctx
                        .user
                        .and_then(|u| u.get("name"))
                        .and_then(Value::as_str)
                        .unwrap_or("nobody");
                    format!("Serve {name} (id {}).", ctx.user_id.unwrap_or("none"))
                }),
        )
        .workflow(
            Workflow::new("whoami", "Who am I")
                .input_schema(json!({"type": "object"}))
                .and_then(step("who", |ctx: StepContext| async move {
                    Ok(json!({
                        "userId": ctx.user_id(),
                        "name": ctx.user().and_then(|u| u.get("name")).cloned(),
                    }))
                }))
                .build(),
        )
    })
    .await;
    let token = good_token();
    // Dynamic instructions read `user` and `userId`.
    let resp = post(
        &server,
        "/agents/whoami-agent/text",
        &json!({"input": "hi", "options": {"userId": "forged"}}),
        Some(&token),
    )
    .await;
    let data = ok_data(resp.status(), resp.json().await.unwrap());
    assert_eq!(data["text"], "Serve Grace (id u42).");
    // So do the agent's hooks.
    let hooks = seen.lock().unwrap().clone();
    assert_eq!(hooks.len(), 2, "{hooks:?}");
    assert_eq!(hooks[0]["op"], "generateText");
    assert_eq!(hooks[0]["userId"], "u42");
    assert_eq!(hooks[0]["user"]["name"], "Grace");
    assert_eq!(
        hooks[1],
        json!({"hook": "end", "userId": "u42", "text": "Serve Grace (id u42)."})
    );
    // A workflow step reads them from its context; a client's userId cannot override them.
    let execution_id = agentry_tests::new_id();
    let resp = post(
        &server,
        "/workflows/whoami/execute",
        &json!({"input": {}, "options": {"executionId": execution_id, "userId": "forged",
                                         "context": {"user": {"id": "forged"}, "locale": "fr"}}}),
        Some(&token),
    )
    .await;
    let data = ok_data(resp.status(), resp.json().await.unwrap());
    assert_eq!(data["result"], json!({"userId": "u42", "name": "Grace"}));
    // The state endpoint shows them.
    let (status, body) = server
        .get_json(&format!(
            "/workflows/whoami/executions/{execution_id}/state"
        ))
        .await;
    let state = ok_data(status, body);
    assert_eq!(state["userId"], "u42");
    assert_eq!(state["context"]["userId"], "u42");
    assert_eq!(state["context"]["locale"], "fr");
    assert_eq!(
        state["context"]["user"],
        json!({"id": "u42", "name": "Grace", "email": "grace@example.com",
               "roles": ["admin"], "tier": "pro"})
    );
    // On a public route a valid token still makes the user known; none leaves it unknown.
    let (status, body) = server
        .get_json("/workflows/whoami/executions/nope/state")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    server.stop().await;
}

fn admin_and_user_tokens() -> (String, String) {
    (
        good_token(),
        token_for(json!({"sub": "u7", "name": "Uma", "roles": []})),
    )
}

async fn get(server: &TestServer, path: &str, token: Option<&str>) -> reqwest::Response {
    let mut req = server.client.get(server.url(path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_example_routes_with_jwt() {
    let server = TestServer::start_with(Backend::Sqlite, jwt_settings(), |h| {
        host_example::customize(h, None)
    })
    .await;
    let (admin, user) = admin_and_user_tokens();
    // /health: public.
    let resp = get(&server, "/health", None).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["x-served-by"], "agentry-host-example");
    // /api/profile: 401 without a token, the user with one.
    assert_401(
        get(&server, "/api/profile", None).await,
        "Authentication required",
        "profile",
    )
    .await;
    let resp = get(&server, "/api/profile", Some(&user)).await;
    let data = ok_data(resp.status(), resp.json().await.unwrap());
    assert_eq!(data["id"], "u7");
    assert_eq!(data["tier"], "free");
    // The admin route: 403 with its own body for a non-admin, 200 for an admin.
    let resp = get(&server, "/api/admin/stats", Some(&user)).await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["requiredRole"], "admin");
    assert_eq!(body["success"], false);
    let resp = get(&server, "/api/admin/stats", Some(&admin)).await;
    let data = ok_data(resp.status(), resp.json().await.unwrap());
    assert!(data["workflows"].as_u64().unwrap() >= 5);
    // Public webhooks, with validation.
    let resp = post(
        &server,
        "/webhooks/stripe",
        &json!({"event": "paid", "payload": {"amount": 3}}),
        None,
    )
    .await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["data"]["source"], "stripe");
    assert_eq!(body["data"]["authenticated"], false);
    let resp = post(&server, "/webhooks/stripe", &json!({"event": " "}), None).await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"], "Validation failed: event must not be empty");
    let resp = post(&server, "/webhooks/stripe", &json!({"nope": 1}), None).await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    // The built-in protected set still applies next to the host's routes.
    assert_401(
        post(
            &server,
            "/workflows/word-count/execute",
            &json!({"input": {"text": "a"}}),
            None,
        )
        .await,
        "Authentication required",
        "built-in",
    )
    .await;
    // The host's not-found handler.
    let resp = get(&server, "/nowhere", None).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"], "Nothing at GET /nowhere");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_custom_provider_reads_query_and_cookie() {
    let provider: Arc<dyn agentry_auth::AuthProvider> =
        Arc::new(host_example::ApiKeyProvider::demo());
    let server = TestServer::start_with(Backend::Sqlite, AuthSettings::default(), |h| {
        host_example::customize(h, Some(provider))
    })
    .await;
    let resp = get(&server, "/api/profile?api_key=demo-user-key", None).await;
    let data = ok_data(resp.status(), resp.json().await.unwrap());
    assert_eq!(data["id"], "user-1");
    let resp = server
        .client
        .get(server.url("/api/admin/stats"))
        .header("cookie", "theme=dark; agentry_session=demo-admin-key")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let resp = get(&server, "/api/admin/stats?api_key=demo-user-key", None).await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert_401(
        get(&server, "/api/profile?api_key=wrong", None).await,
        "Invalid token: unknown API key",
        "wrong key",
    )
    .await;
    assert_401(
        get(&server, "/api/profile", None).await,
        "Authentication required",
        "no key",
    )
    .await;
    // The built-in protected routes use the same provider.
    let resp = post(
        &server,
        "/workflows/word-count/execute?api_key=demo-user-key",
        &json!({"input": {"text": "a b c"}}),
        None,
    )
    .await;
    let data = ok_data(resp.status(), resp.json().await.unwrap());
    assert_eq!(data["result"]["words"], 3);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_groups_wildcards_and_error_handler() {
    use actix_web::{HttpRequest, HttpResponse, web};
    let server = TestServer::start_with(Backend::Sqlite, jwt_settings(), |h| {
        h.group("/api/v2", |cfg| {
            cfg.route(
                "/items/{id}",
                web::get().to(|id: web::Path<String>| async move {
                    HttpResponse::Ok().json(json!({"success": true, "data": {"id": *id}}))
                }),
            );
        })
        .route("PATCH", "/files/{tail:.*}", |req: HttpRequest| async move {
            HttpResponse::Ok().body(req.match_info().query("tail").to_owned())
        })
        .protected_route("PATCH /files/*")
        .on_error(|req, err| {
            (req.path().starts_with("/workflows/") && req.method() == "GET").then(|| {
                HttpResponse::build(err.as_response_error().status_code())
                    .json(json!({"ok": false, "problem": err.to_string()}))
            })
        })
    })
    .await;
    // A group under a base path, public by default.
    let resp = get(&server, "/api/v2/items/42", None).await;
    let data = ok_data(resp.status(), resp.json().await.unwrap());
    assert_eq!(data["id"], "42");
    // A wildcard route, protected by its pattern.
    let patch = |token: Option<String>| {
        let mut req = server.client.patch(server.url("/files/a/b/c.txt"));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send()
    };
    assert_401(
        patch(None).await.unwrap(),
        "Authentication required",
        "files",
    )
    .await;
    let resp = patch(Some(good_token())).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.text().await.unwrap(), "a/b/c.txt");
    // The global error handler replaces the failures it wants, and keeps the others.
    let resp = get(&server, "/workflows/nope", None).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body,
        json!({"ok": false, "problem": "Workflow nope not found"})
    );
    let resp = get(&server, "/agents/nope", None).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body,
        json!({"success": false, "error": "Agent nope not found", "code": "agent_not_found"})
    );
    server.stop().await;
}
