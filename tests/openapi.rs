//! GET /doc (the OpenAPI description) and GET /ui (the API explorer), against the real server.
//!
//! - The document is well-formed OpenAPI 3.1: valid against the OpenAPI Initiative's schema of
//!   3.1 documents (`fixtures/openapi-3.1-schema.json`, the 2022-10-07 edition, Apache-2.0),
//!   every Schema Object a valid JSON Schema, every `$ref` resolved, every operation with
//!   responses and a unique id, every path parameter declared.
//! - It documents exactly the built-in routes of `agentry_http::access::BUILTIN_ROUTES`, and
//!   exactly the protected ones require the bearer token.
//! - Its failure responses are exactly the failures each row of `BUILTIN_ROUTES` declares, each
//!   under its own status.
//! - Real answers, on both databases, are valid against the schemas it documents (envelopes,
//!   failures, and each Server-Sent Event of the four streams).
//! - `/ui` serves Swagger UI from the binary, and headless Chromium renders it listing every
//!   route (Debian's `chromium`, installed by `scripts/install-test-deps.sh`: without it the test
//!   fails, naming the script).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use agentry_http::access::BUILTIN_ROUTES;
use agentry_http::authn::Access;
use agentry_http::error::Code;
use agentry_http::openapi::ERROR_CODES_EXTENSION;
use agentry_tests::{Backend, TestServer, new_id};
use reqwest::StatusCode;
use reqwest::header::CONTENT_TYPE;
use serde_json::{Value, json};

agentry_tests::backend_tests!(responses_match_the_documented_schemas);

const CHROMIUM: &str = "/usr/bin/chromium";

// ------------------------------------------------------------------------------------------------
// Helpers.

/// GET /doc, checked to be JSON.
async fn fetch_doc(server: &TestServer) -> Value {
    let resp = server
        .client
        .get(server.url("/doc"))
        .send()
        .await
        .expect("GET /doc");
    assert_eq!(resp.status(), StatusCode::OK);
    let ct = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(ct.starts_with("application/json"), "Content-Type {ct:?}");
    resp.json().await.expect("/doc is JSON")
}

/// The OpenAPI path of an actix pattern: `{tail:.*}` is `{tail}`.
fn openapi_path(actix: &str) -> String {
    actix
        .split('/')
        .map(|seg| match (seg.strip_prefix('{'), seg.find(':')) {
            (Some(inner), Some(colon)) if seg.ends_with('}') => {
                format!("{{{}}}", &inner[..colon - 1])
            }
            _ => seg.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Every (METHOD, path, operation) of the document.
fn operations(doc: &Value) -> Vec<(String, String, &Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths is an object") {
        for m in METHODS {
            if let Some(op) = item.get(m) {
                out.push((m.to_uppercase(), path.clone(), op));
            }
        }
    }
    out
}

/// Every `$ref` in `v`.
fn refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("$ref", Value::String(r)) => out.push(r.clone()),
                    _ => refs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

/// Follows a local JSON pointer reference (`#/components/...`) in `doc`.
fn resolve<'a>(doc: &'a Value, reference: &str) -> Option<&'a Value> {
    doc.pointer(reference.strip_prefix('#')?)
}

/// Validates JSON against the schemas of the document (JSON Schema 2020-12, formats checked).
struct Schemas<'a> {
    doc: &'a Value,
}

impl<'a> Schemas<'a> {
    /// The schema of `method path` answering `status` with `media`.
    fn response(&self, method: &str, path: &str, status: u16, media: &str) -> &'a Value {
        let s = &self.doc["paths"][path][method.to_lowercase()]["responses"][status.to_string()]["content"]
            [media]["schema"];
        assert!(
            !s.is_null(),
            "{method} {path} documents no {status} {media} answer"
        );
        s
    }

    /// Asserts `instance` is valid against `schema` (which may `$ref` the document's components).
    fn assert_valid(&self, schema: &Value, instance: &Value, what: &str) {
        let root = json!({"allOf": [schema], "components": self.doc["components"]});
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&root)
            .unwrap_or_else(|e| panic!("the schema of {what} does not compile: {e}"));
        let errors: Vec<String> = validator
            .iter_errors(instance)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{what}: the answer does not match the document:\n  {}\nanswer: {instance}\nschema: {schema}",
            errors.join("\n  ")
        );
    }

    /// Asserts a JSON answer matches what the document says of `method path` at its status.
    fn check(&self, method: &str, path: &str, status: StatusCode, body: &Value) {
        let schema = self.response(method, path, status.as_u16(), "application/json");
        let what = format!("{method} {path} {status}");
        self.assert_valid(schema, body, &what);
        // The check has teeth: an envelope is never an empty object.
        let root = json!({"allOf": [schema], "components": self.doc["components"]});
        let validator = jsonschema::validator_for(&root).expect("compiles");
        assert!(
            !validator.is_valid(&json!({})),
            "{what}: the schema accepts anything: {schema}"
        );
    }

    /// Asserts each event of an SSE answer matches the event schema the document gives
    /// `method path` (the event object, then its `data` against the `contentSchema`).
    fn check_events(&self, method: &str, path: &str, events: &[String]) {
        let schema = self.response(method, path, 200, "text/event-stream");
        let event_schema = match schema.get("$ref").and_then(Value::as_str) {
            Some(r) => resolve(self.doc, r).expect("event schema ref resolves"),
            None => schema,
        };
        let data = &event_schema["properties"]["data"];
        let mut content = Vec::new();
        if let Some(c) = data.get("contentSchema") {
            content.push(c);
        }
        for alt in data["anyOf"].as_array().into_iter().flatten() {
            if let Some(c) = alt.get("contentSchema") {
                content.push(c);
            }
        }
        assert_eq!(
            content.len(),
            1,
            "{path}: one contentSchema for data: {data}"
        );
        assert!(!events.is_empty(), "{path}: no events");
        for (i, raw) in events.iter().enumerate() {
            let what = format!("{method} {path} event #{i}");
            self.assert_valid(schema, &json!({"data": raw}), &what);
            if let Ok(parsed) = serde_json::from_str::<Value>(raw) {
                self.assert_valid(content[0], &parsed, &what);
            }
        }
    }
}

/// POSTs `body` and reads the whole SSE answer: the `data` of each event, unparsed.
async fn sse_data(server: &TestServer, path: &str, body: &Value) -> Vec<String> {
    let resp = server
        .client
        .post(server.url(path))
        .json(body)
        .send()
        .await
        .expect("stream request");
    assert_eq!(resp.status(), StatusCode::OK, "{path}");
    let ct = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(ct.starts_with("text/event-stream"), "{path}: {ct}");
    let text = resp.text().await.expect("reading the stream");
    text.split("\n\n")
        .filter_map(|block| {
            let data: Vec<&str> = block
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            (!data.is_empty()).then(|| data.join("\n"))
        })
        .collect()
}

// ------------------------------------------------------------------------------------------------
// The document.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doc_is_valid_openapi() {
    let server = TestServer::start(Backend::Sqlite).await;
    let doc = fetch_doc(&server).await;

    // Valid against the OpenAPI Initiative's JSON Schema of OpenAPI 3.1 documents (the
    // structure; the Schema Objects in it are checked next). utoipa's own types cannot be used to
    // read the document back: they fail on the `{}` (any value) schemas utoipa itself writes.
    let oas31: Value = serde_json::from_str(include_str!("fixtures/openapi-3.1-schema.json"))
        .expect("the OpenAPI 3.1 schema is JSON");
    let oas31 = jsonschema::options()
        .build(&oas31)
        .expect("the OpenAPI 3.1 schema compiles");
    let errors: Vec<String> = oas31
        .iter_errors(&doc)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "/doc is not valid OpenAPI 3.1:\n  {}",
        errors.join("\n  ")
    );

    // Every Schema Object is a valid JSON Schema (2020-12, OpenAPI 3.1's dialect) and compiles
    // with its references resolved.
    let schemas = doc["components"]["schemas"]
        .as_object()
        .expect("components.schemas");
    assert!(!schemas.is_empty());
    for (name, schema) in schemas {
        if let Err(e) = jsonschema::draft202012::meta::validate(schema) {
            panic!("schema {name} is not a valid JSON Schema: {e}\n{schema}");
        }
        let root = json!({"$ref": format!("#/components/schemas/{name}"), "components": doc["components"]});
        if let Err(e) = jsonschema::options().build(&root) {
            panic!("schema {name} does not compile: {e}");
        }
    }

    // It says who it describes.
    let version = doc["openapi"].as_str().expect("openapi is a string");
    assert!(version.starts_with("3.1"), "openapi {version}");
    assert_eq!(doc["info"]["title"], "agentry");
    assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(
        doc["info"]["description"]
            .as_str()
            .is_some_and(|d| !d.is_empty())
    );
    let tags: BTreeSet<&str> = doc["tags"]
        .as_array()
        .expect("tags")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for t in ["agents", "workflows", "observability"] {
        assert!(tags.contains(t), "tag {t} missing: {tags:?}");
    }

    // Every reference resolves to something in the document.
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(!all.is_empty());
    for r in &all {
        assert!(r.starts_with("#/components/"), "non-local $ref {r}");
        assert!(resolve(&doc, r).is_some(), "$ref {r} resolves to nothing");
    }

    let mut ids = BTreeSet::new();
    for (method, path, op) in operations(&doc) {
        let at = format!("{method} {path}");
        // A unique id, a tag the document declares, a summary.
        let id = op["operationId"]
            .as_str()
            .unwrap_or_else(|| panic!("{at}: no operationId"));
        assert!(
            ids.insert(id.to_owned()),
            "{at}: duplicate operationId {id}"
        );
        let op_tags = op["tags"]
            .as_array()
            .unwrap_or_else(|| panic!("{at}: no tags"));
        assert!(
            op_tags
                .iter()
                .all(|t| tags.contains(t.as_str().unwrap_or_default())),
            "{at}: undeclared tag in {op_tags:?}"
        );
        assert!(
            op["summary"].as_str().is_some_and(|s| !s.is_empty()),
            "{at}: no summary"
        );

        // Responses, each with a description; JSON ones with a schema.
        let responses = op["responses"]
            .as_object()
            .unwrap_or_else(|| panic!("{at}: no responses"));
        assert!(!responses.is_empty(), "{at}: no responses");
        assert!(
            responses
                .keys()
                .any(|s| s.starts_with('2') || s.starts_with('1') || s.starts_with('3')),
            "{at}: no success response"
        );
        for (status, resp) in responses {
            assert!(
                status.len() == 3 && status.parse::<u16>().is_ok(),
                "{at}: status {status}"
            );
            assert!(
                resp["description"].is_string(),
                "{at} {status}: no description"
            );
            for (media, content) in resp["content"].as_object().into_iter().flatten() {
                if media == "application/json" || media == "text/event-stream" {
                    assert!(
                        content["schema"].is_object(),
                        "{at} {status} {media}: no schema"
                    );
                }
            }
            // Every failure is the failure envelope; only POST /mcp's 400 may also be the
            // JSON-RPC error of a body that is not one JSON-RPC message, and the readiness
            // probe's 503 is the small body orchestrators read (`{"status": "not_ready", ...}`).
            let probe = path == "/readyz";
            if (status.starts_with('4') || status.starts_with('5')) && !probe {
                let schema = &resp["content"]["application/json"]["schema"]["$ref"];
                if at == "POST /mcp" && status == "400" {
                    assert_eq!(
                        schema, "#/components/schemas/McpBadRequest",
                        "{at} {status}"
                    );
                    let one_of: Vec<&Value> =
                        doc["components"]["schemas"]["McpBadRequest"]["oneOf"]
                            .as_array()
                            .expect("McpBadRequest is oneOf")
                            .iter()
                            .map(|s| &s["$ref"])
                            .collect();
                    assert_eq!(
                        one_of,
                        [
                            "#/components/schemas/Failure",
                            "#/components/schemas/JsonRpcFailure"
                        ],
                        "{at} {status}"
                    );
                } else {
                    assert_eq!(
                        schema, "#/components/schemas/Failure",
                        "{at} {status}: not the failure envelope"
                    );
                }
            }
        }

        // Path parameters: exactly the template's, required.
        let template: BTreeSet<String> = path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(str::to_owned)
            .collect();
        let declared: BTreeSet<String> = op["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["in"] == "path")
            .map(|p| {
                assert_eq!(p["required"], true, "{at}: path parameter {p} not required");
                assert!(
                    p["schema"].is_object(),
                    "{at}: path parameter {p} has no schema"
                );
                p["name"].as_str().unwrap_or_default().to_owned()
            })
            .collect();
        assert_eq!(declared, template, "{at}: path parameters");
    }

    // The streams are documented as streams.
    for (method, path) in [
        ("post", "/workflows/{id}/stream"),
        ("post", "/agents/{id}/stream"),
        ("post", "/agents/{id}/chat"),
        ("post", "/agents/{id}/stream-object"),
    ] {
        let content = &doc["paths"][path][method]["responses"]["200"]["content"];
        assert!(
            content.get("text/event-stream").is_some(),
            "{path}: 200 is not text/event-stream: {content}"
        );
    }
    server.stop().await;
}

/// The error table is published: the `ErrorCode` schema enumerates every code (and describes
/// each with its status), the failure envelope requires `code`, and every failure response of
/// every operation names the codes its status may carry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doc_publishes_the_error_table() {
    let server = TestServer::start(Backend::Sqlite).await;
    let doc = fetch_doc(&server).await;
    let codes = &doc["components"]["schemas"]["ErrorCode"];
    let listed: Vec<&str> = codes["enum"]
        .as_array()
        .expect("ErrorCode is an enum")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let table: Vec<&str> = agentry_http::error::Code::ALL
        .iter()
        .map(|c| c.as_str())
        .collect();
    assert_eq!(listed, table);
    let description = codes["description"].as_str().unwrap_or_default();
    for code in agentry_http::error::Code::ALL {
        let row = format!("| `{}` | {} |", code.as_str(), code.status());
        assert!(description.contains(&row), "{row} is not described");
    }
    let required = &doc["components"]["schemas"]["Failure"]["required"];
    assert!(
        required
            .as_array()
            .is_some_and(|r| r.contains(&json!("code"))),
        "{required}"
    );
    for (method, path, op) in operations(&doc) {
        for (status, response) in op["responses"].as_object().expect("responses") {
            // The readiness probe's 503 is its own small body, not a failure of the table.
            if path == "/readyz" && status == "503" {
                continue;
            }
            if status.parse::<u16>().is_ok_and(|s| s >= 400) {
                let text = response["description"].as_str().unwrap_or_default();
                assert!(
                    text.contains("Codes: `"),
                    "{method} {path} {status}: {text}"
                );
            }
        }
    }
    server.stop().await;
}

/// The failure responses are generated from `access.rs`'s declaration and the error table, and
/// nothing else: each lists (`x-error-codes`) only codes whose status is its own, with each
/// code's `when`, and the headers they imply; the codes of an operation's responses are exactly
/// the failures its row declares (its own, and those that follow from its kind).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_responses_are_exactly_the_declared_codes() {
    let server = TestServer::start(Backend::Sqlite).await;
    let doc = fetch_doc(&server).await;
    let table: BTreeMap<&str, Code> = Code::ALL.iter().map(|c| (c.as_str(), *c)).collect();
    for r in BUILTIN_ROUTES {
        let path = openapi_path(r.path);
        let at = format!("{} {path}", r.method);
        let responses = doc["paths"][&path][r.method.to_lowercase()]["responses"]
            .as_object()
            .unwrap_or_else(|| panic!("{at}: no responses"));
        let mut listed = BTreeSet::new();
        for (status, response) in responses {
            let status: u16 = status.parse().expect("a status");
            let codes = response.get(ERROR_CODES_EXTENSION);
            // Successes, and the readiness probe's own 503, carry no code.
            if status < 400 || (path == "/readyz" && status == 503) {
                assert!(codes.is_none(), "{at} {status}: codes {codes:?}");
                continue;
            }
            let codes: Vec<Code> = codes
                .and_then(Value::as_array)
                .unwrap_or_else(|| panic!("{at} {status}: no {ERROR_CODES_EXTENSION}"))
                .iter()
                .map(|c| table[c.as_str().expect("a code is a string")])
                .collect();
            assert!(!codes.is_empty(), "{at} {status}: no codes");
            let description = response["description"].as_str().unwrap_or_default();
            for code in &codes {
                assert_eq!(
                    code.status(),
                    status,
                    "{at} {status} lists {} (a {})",
                    code.as_str(),
                    code.status()
                );
                assert!(
                    description.contains(code.when()),
                    "{at} {status} does not say when {} is answered: {description}",
                    code.as_str()
                );
                assert!(
                    listed.insert(code.as_str()),
                    "{at}: {} twice",
                    code.as_str()
                );
            }
            let header = |name: &str| response["headers"].get(name).is_some();
            assert_eq!(
                header("Retry-After"),
                codes.iter().any(|c| c.retry_after().is_some()),
                "{at} {status}: Retry-After"
            );
            assert_eq!(
                header("WWW-Authenticate"),
                status == 401,
                "{at} {status}: WWW-Authenticate"
            );
            assert_eq!(
                header("Allow"),
                codes.contains(&Code::MethodNotAllowed),
                "{at} {status}: Allow"
            );
            // Only what waits for a run names the execution it failed in.
            let names_execution = r.failures().contains(&Code::ExecutionFailed)
                && codes.iter().any(|c| {
                    matches!(
                        c,
                        Code::ExecutionFailed
                            | Code::ExecutionContinuesElsewhere
                            | Code::DatabaseUnavailable
                            | Code::Internal
                    )
                });
            assert_eq!(
                header("X-Execution-Id"),
                names_execution,
                "{at} {status}: X-Execution-Id"
            );
        }
        let declared: BTreeSet<&str> = r.failures().iter().map(|c| c.as_str()).collect();
        assert_eq!(
            listed, declared,
            "{at}: the documented codes are the declared ones"
        );
    }
    // Execute and resume name the execution they failed in.
    for (method, path) in [
        ("post", "/workflows/{id}/execute"),
        ("post", "/workflows/{id}/executions/{execution_id}/resume"),
    ] {
        let responses = &doc["paths"][path][method]["responses"];
        for status in ["500", "503"] {
            assert!(
                responses[status]["headers"]["X-Execution-Id"].is_object(),
                "{path} {status}: no X-Execution-Id"
            );
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doc_documents_exactly_the_builtin_routes_and_their_access() {
    let server = TestServer::start(Backend::Sqlite).await;
    let doc = fetch_doc(&server).await;

    let rows: BTreeMap<(String, String), (Access, bool)> = BUILTIN_ROUTES
        .iter()
        .map(|r| {
            (
                (r.method.to_owned(), openapi_path(r.path)),
                (r.access, r.sensitive),
            )
        })
        .collect();
    let documented: BTreeMap<(String, String), &Value> = operations(&doc)
        .into_iter()
        .map(|(m, p, op)| ((m, p), op))
        .collect();

    let undocumented: Vec<_> = rows
        .keys()
        .filter(|k| !documented.contains_key(*k))
        .collect();
    assert!(
        undocumented.is_empty(),
        "routes missing from /doc: {undocumented:?}"
    );
    let unknown: Vec<_> = documented
        .keys()
        .filter(|k| !rows.contains_key(*k))
        .collect();
    assert!(
        unknown.is_empty(),
        "/doc documents routes not in BUILTIN_ROUTES: {unknown:?}"
    );

    // The bearer scheme, and exactly the protected rows require it (and may answer 401; a
    // sensitive row may too, in strict mode, without requiring it by default).
    let scheme = &doc["components"]["securitySchemes"]["bearerAuth"];
    assert_eq!(scheme["type"], "http", "{scheme}");
    assert_eq!(scheme["scheme"], "bearer", "{scheme}");
    assert_eq!(scheme["bearerFormat"], "JWT", "{scheme}");
    assert!(doc.get("security").is_none(), "no document-wide security");
    for ((method, path), (access, sensitive)) in &rows {
        let op = documented[&(method.clone(), path.clone())];
        let at = format!("{method} {path}");
        match access {
            Access::Protected => {
                assert_eq!(op["security"], json!([{"bearerAuth": []}]), "{at}");
                assert!(op["responses"].get("401").is_some(), "{at}: no 401");
            }
            Access::Public => {
                assert!(
                    op.get("security").is_none(),
                    "{at} is public: {}",
                    op["security"]
                );
                assert_eq!(
                    op["responses"].get("401").is_some(),
                    *sensitive,
                    "{at} is public: a 401 only when it is sensitive (strict mode protects it)"
                );
            }
        }
    }
    server.stop().await;
}

// ------------------------------------------------------------------------------------------------
// Real answers against the document.

async fn responses_match_the_documented_schemas(backend: Backend) {
    let server = TestServer::start(backend).await;
    let doc = fetch_doc(&server).await;
    let s = Schemas { doc: &doc };

    // Agents.
    let (status, body) = server.get_json("/agents").await;
    s.check("GET", "/agents", status, &body);
    let (status, body) = server.get_json("/agents/assistant").await;
    s.check("GET", "/agents/{id}", status, &body);
    let (status, body) = server.get_json("/agents/writer").await;
    s.check("GET", "/agents/{id}", status, &body);
    let (status, body) = server.get_json("/agents/nobody").await;
    assert_eq!(status, 404);
    s.check("GET", "/agents/{id}", status, &body);

    let ask = json!({
        "input": "What is the weather in Paris?",
        "options": {"userId": "u-1", "conversationId": new_id(), "temperature": 0.2},
    });
    let (status, body) = server.post_json("/agents/assistant/text", &ask).await;
    assert_eq!(status, 200, "{body}");
    s.check("POST", "/agents/{id}/text", status, &body);
    let ui_input = json!({"input": [{"role": "user", "parts": [{"type": "text", "text": "calculate (2 + 3) * 4"}]}]});
    let (status, body) = server.post_json("/agents/assistant/text", &ui_input).await;
    assert_eq!(status, 200, "{body}");
    s.check("POST", "/agents/{id}/text", status, &body);
    let (status, body) = server
        .post_json(
            "/agents/assistant/text",
            &json!({"input": "hi", "options": {"topP": 3}}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    s.check("POST", "/agents/{id}/text", status, &body);

    let film = json!({
        "input": "a film",
        "schema": {"type": "object", "properties": {"title": {"type": "string"}, "rating": {"type": "integer", "minimum": 1, "maximum": 5}}, "required": ["title", "rating"]},
    });
    let (status, body) = server.post_json("/agents/writer/object", &film).await;
    assert_eq!(status, 200, "{body}");
    s.check("POST", "/agents/{id}/object", status, &body);
    let (status, body) = server
        .post_json(
            "/agents/writer/object",
            &json!({"input": "a film", "schema": {"type": "string"}}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    s.check("POST", "/agents/{id}/object", status, &body);

    let events = sse_data(
        &server,
        "/agents/assistant/stream",
        &json!({"input": "weather in Oslo?"}),
    )
    .await;
    s.check_events("POST", "/agents/{id}/stream", &events);
    let events = sse_data(&server, "/agents/assistant/chat", &ui_input).await;
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    s.check_events("POST", "/agents/{id}/chat", &events);
    let events = sse_data(&server, "/agents/writer/stream-object", &film).await;
    s.check_events("POST", "/agents/{id}/stream-object", &events);

    // Workflows.
    let (status, body) = server.get_json("/workflows").await;
    s.check("GET", "/workflows", status, &body);
    for id in [
        "expense-approval",
        "order-fulfillment",
        "content-pipeline",
        "countdown",
    ] {
        let (status, body) = server.get_json(&format!("/workflows/{id}")).await;
        s.check("GET", "/workflows/{id}", status, &body);
    }
    let (status, body) = server.get_json("/workflows/nope").await;
    assert_eq!(status, 404);
    s.check("GET", "/workflows/{id}", status, &body);

    // Suspended, then resumed to completion; the state at each point.
    let exp = new_id();
    let (status, body) = server
        .post_json(
            "/workflows/expense-approval/execute",
            &json!({"input": {"employeeId": "e-42", "amount": 1500, "category": "travel"}, "options": {"executionId": exp, "userId": "u-1", "context": {"team": "a"}}}),
        )
        .await;
    assert_eq!(body["data"]["status"], "suspended", "{body}");
    s.check("POST", "/workflows/{id}/execute", status, &body);
    let state_path = "/workflows/{id}/executions/{execution_id}/state";
    let (status, body) = server
        .get_json(&format!(
            "/workflows/expense-approval/executions/{exp}/state"
        ))
        .await;
    s.check("GET", state_path, status, &body);
    let (status, body) = server
        .post_json(
            &format!("/workflows/expense-approval/executions/{exp}/resume"),
            &json!({"resumeData": {"approved": false}}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    s.check(
        "POST",
        "/workflows/{id}/executions/{execution_id}/resume",
        status,
        &body,
    );
    let (status, body) = server
        .post_json(
            &format!("/workflows/expense-approval/executions/{exp}/resume"),
            &json!({"resumeData": {"approved": true, "managerId": "m-7"}}),
        )
        .await;
    assert_eq!(body["data"]["status"], "completed", "{body}");
    s.check(
        "POST",
        "/workflows/{id}/executions/{execution_id}/resume",
        status,
        &body,
    );
    let (status, body) = server
        .get_json(&format!(
            "/workflows/expense-approval/executions/{exp}/state"
        ))
        .await;
    s.check("GET", state_path, status, &body);
    let (status, body) = server
        .post_json(
            &format!("/workflows/expense-approval/executions/{exp}/suspend"),
            &json!({}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    s.check(
        "POST",
        "/workflows/{id}/executions/{execution_id}/suspend",
        status,
        &body,
    );
    let (status, body) = server
        .post_json(
            "/workflows/expense-approval/execute",
            &json!({"input": {"employeeId": "e-42", "amount": 5, "category": "travel"}, "options": {"executionId": exp}}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    s.check("POST", "/workflows/{id}/execute", status, &body);
    let (status, body) = server
        .post_json(
            "/workflows/expense-approval/execute",
            &json!({"input": {"amount": -1}}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    s.check("POST", "/workflows/{id}/execute", status, &body);

    // The workflow stream, every step type.
    let order = json!({"input": {"orderId": "o-1", "express": true, "items": [{"sku": "A", "quantity": 2, "unitPrice": 10}]}});
    let events = sse_data(&server, "/workflows/order-fulfillment/stream", &order).await;
    s.check_events("POST", "/workflows/{id}/stream", &events);
    let events = sse_data(
        &server,
        "/workflows/expense-approval/stream",
        &json!({"input": {"employeeId": "e-1", "amount": 2000, "category": "x"}}),
    )
    .await;
    s.check_events("POST", "/workflows/{id}/stream", &events);

    // Suspending a running execution: the suspend result, the suspended state, the result.
    let cd = new_id();
    let run = {
        let client = server.client.clone();
        let url = server.url("/workflows/countdown/execute");
        let body = json!({"input": {"stepDelayMs": 300}, "options": {"executionId": cd}});
        tokio::spawn(async move {
            let resp = client.post(url).json(&body).send().await.expect("execute");
            let status = resp.status();
            (status, resp.json::<Value>().await.expect("JSON"))
        })
    };
    let started = Instant::now();
    loop {
        let (status, body) = server
            .get_json(&format!("/workflows/countdown/executions/{cd}/state"))
            .await;
        if status == 200 {
            s.check("GET", state_path, status, &body);
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "countdown never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, body) = server
        .post_json(
            &format!("/workflows/countdown/executions/{cd}/suspend"),
            &json!({"reason": "pause"}),
        )
        .await;
    assert!(status == 200 || status == 202, "{status} {body}");
    s.check(
        "POST",
        "/workflows/{id}/executions/{execution_id}/suspend",
        status,
        &body,
    );
    let (status, body) = run.await.expect("execute task");
    s.check("POST", "/workflows/{id}/execute", status, &body);
    let (status, body) = server
        .get_json(&format!("/workflows/countdown/executions/{cd}/state"))
        .await;
    s.check("GET", state_path, status, &body);

    // Logs, and a WebSocket route asked without the handshake.
    let (status, body) = server.get_json("/api/logs?limit=50").await;
    s.check("GET", "/api/logs", status, &body);
    let (status, body) = server.get_json("/api/logs?level=loud").await;
    assert_eq!(status, 400, "{body}");
    s.check("GET", "/api/logs", status, &body);
    let (status, body) = server.get_json("/ws/logs").await;
    assert_eq!(status, 400, "{body}");
    s.check("GET", "/ws/logs", status, &body);

    // The explorer's files.
    let (status, body) = server.get_json("/ui/no-such-file.js").await;
    assert_eq!(status, 404, "{body}");
    s.check("GET", "/ui/{tail}", status, &body);

    server.stop().await;
}

// ------------------------------------------------------------------------------------------------
// The API explorer.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ui_serves_swagger_ui_from_the_binary() {
    let server = TestServer::start(Backend::Sqlite).await;
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    // `/ui` is the page itself (no redirect: a client that does not follow them sees it too),
    // and so is `/ui/`; it loads its files from /ui/ and the document from /doc.
    let mut pages = Vec::new();
    for path in ["/ui", "/ui/"] {
        let resp = no_redirects
            .get(server.url(path))
            .send()
            .await
            .expect("GET /ui");
        assert_eq!(resp.status(), 200, "{path}");
        assert!(
            resp.headers()[CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
        pages.push(resp.text().await.unwrap());
    }
    assert_eq!(pages[0], pages[1]);
    let page = &pages[0];
    assert!(page.contains("swagger-ui"), "{page}");
    assert!(page.contains("<base href=\"/ui/\">"), "{page}");
    for file in [
        "swagger-ui.css",
        "swagger-ui-bundle.js",
        "swagger-ui-standalone-preset.js",
    ] {
        assert!(page.contains(file), "the page does not load {file}");
        let resp = server
            .client
            .get(server.url(&format!("/ui/{file}")))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "/ui/{file}");
        assert!(
            resp.bytes().await.unwrap().len() > 1000,
            "/ui/{file} is too small"
        );
    }
    let init = server
        .client
        .get(server.url("/ui/swagger-initializer.js"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(init.contains("\"url\": \"/doc\""), "{init}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ui_renders_every_route_in_headless_chromium() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: run scripts/install-test-deps.sh (the README's set-up) first"
    );
    let server = TestServer::start(Backend::Sqlite).await;
    let url = server.url("/ui/");
    let profile = std::env::temp_dir().join(format!("agentry-chromium-{}", new_id()));
    let out = tokio::task::spawn_blocking({
        let profile = profile.clone();
        move || {
            Command::new("timeout")
                .arg("120")
                .arg(CHROMIUM)
                .args([
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--no-first-run",
                    "--disable-dev-shm-usage",
                    "--virtual-time-budget=10000",
                ])
                .arg(format!("--user-data-dir={}", profile.display()))
                .arg("--dump-dom")
                .arg(&url)
                .output()
                .expect("running chromium")
        }
    })
    .await
    .expect("chromium task");
    let _ = std::fs::remove_dir_all(&profile);
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "chromium failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        dom.contains("swagger-ui"),
        "no Swagger UI in the DOM: {dom}"
    );
    assert!(dom.contains("agentry"), "the document's title is not shown");
    // Swagger UI rendered the document it fetched from /doc: one block per operation.
    for r in BUILTIN_ROUTES {
        let path = openapi_path(r.path);
        assert!(
            dom.contains(&format!("data-path=\"{path}\"")),
            "the explorer does not list {} {path}",
            r.method
        );
    }
    assert!(dom.contains("/workflows/{id}/execute"));
    server.stop().await;
}
