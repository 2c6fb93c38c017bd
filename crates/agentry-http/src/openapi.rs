//! The OpenAPI description of the built-in routes (`GET /doc`) and the API explorer (`GET /ui`).
//!
//! The document is collected from the code, not written by hand: every built-in handler carries
//! a `#[utoipa::path]` attribute, and [`crate::builtin_routes`] registers them through
//! utoipa-actix-web, whose `.service(handler)` adds each handler's path to the document as it
//! registers the route. [`document`] runs that same registration function, with the front ends
//! mounted beside the built-in routes (MCP, A2A, the console: [`crate::mount`]), against a
//! throwaway `App`, so a route that is served is a route that is documented. Then [`apply_access`] reads `access::BUILTIN_ROUTES`, the table that decides
//! authentication, and marks exactly its protected rows with the `bearerAuth` requirement: the
//! document's security cannot drift from what the server enforces.
//!
//! No path block lists a failure. The same table declares, per route, the rows of the error
//! table it may answer (`BuiltinRoute::failures`); [`add_failures`] makes of them every failure
//! response: one per status, the failure envelope, described by its codes' `when` texts, with
//! the headers those codes imply (`Retry-After`, `X-Execution-Id`, `Allow`,
//! `WWW-Authenticate`) and the codes in `x-error-codes`. The two answers outside the envelope
//! (`/readyz`'s 503, `POST /mcp`'s JSON-RPC 400) stay in their path blocks; the codes of their
//! status are added to them.
//!
//! The schemas come from the wire types the handlers send (`crate::wire`); this module only
//! describes how a Server-Sent Event carries one of them (`sse_schema!`).
//!
//! `/ui` serves Swagger UI 5 from the binary (utoipa-swagger-ui with its `vendored` feature, no
//! CDN), pointed at `/doc`.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::sync::{Arc, OnceLock};

use actix_web::http::header::ContentType;
use actix_web::{HttpResponse, ResponseError, get, web};
use agentry_auth::Access;
use utoipa::openapi::header::{Header, HeaderBuilder};
use utoipa::openapi::path::Operation;
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::schema::{AnyOfBuilder, ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr};
use utoipa::{OpenApi as _, ToSchema};
use utoipa_actix_web::AppExt;

use crate::FrontEnds;
use crate::access::{BUILTIN_ROUTES, BuiltinRoute, UNAUTHORIZED};
use crate::error::{ApiError, Code};
use crate::wire;

/// The name of the security scheme of the protected routes.
pub const BEARER_AUTH: &str = "bearerAuth";

/// Where the document is served.
pub const DOC_PATH: &str = "/doc";

#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "agentry",
        description = "AI agents and durable workflows behind one HTTP API.\n\n\
            Every JSON answer is an envelope: `{\"success\": true, \"data\": ...}` or \
            `{\"success\": false, \"error\": \"...\"}`. Stream endpoints answer with Server-Sent \
            Events instead: one `data: <JSON>` line per event, then a blank line.\n\n\
            When an authentication provider is configured, the routes marked with `bearerAuth` \
            need `Authorization: Bearer <token>`; the others are public.",
        license(name = "MIT OR Apache-2.0"),
    ),
    tags(
        (name = "agents", description = "Registered agents: list them, generate text and objects, synchronously or streamed."),
        (name = "runs", description = "Durable agent runs: each model call and tool call recorded, re-attachable streams, tool calls that wait for a person's approval, the AI SDK's chat resume URL."),
        (name = "workflows", description = "Registered workflows: run them, stream their events, suspend, resume and inspect executions."),
        (name = "executions", description = "Executions across workflows: every workflow's list, one execution by its id, counts by status."),
        (name = "a2a", description = "The Agent2Agent protocol (A2A 1.0, JSON-RPC): every agent's card and its JSON-RPC endpoint; a task is a durable run."),
        (name = "queues", description = "Queues: a workflow's executions started within its queue's limits (concurrency across replicas, a per-key limit, a sliding-window rate limit), by priority, keys taking turns; each queue's load per key."),
        (name = "schedules", description = "Schedules: a workflow started with an input on a cron expression in a time zone, each tick one execution (`<scheduleId>@<fire time>`) across replicas; pause, trigger, backfill."),
        (name = "definitions", description = "Workflow definitions deployed as data (Serverless Workflow 1.0 documents, JSON or YAML), admin-only: stored in the database so that every replica runs them, each version kept beside the older ones until deleted."),
        (name = "server", description = "What the server is (version, database, authentication) and whom a token stands for."),
        (name = "observability", description = "Logs over HTTP and WebSocket, live execution events."),
        (name = "mcp", description = "The Model Context Protocol (Streamable HTTP): agentry's tools, agents and workflows for MCP clients."),
        (name = "console", description = "The operator console: pages and files for the browser, whose data comes through this API."),
        (name = "documentation", description = "The landing page, this document and the API explorer."),
    ),
    components(schemas(crate::error::Failure)),
)]
struct ApiDoc;

/// The OpenAPI document of the built-in routes and of the front ends mounted beside them
/// (`front_ends`), each in its place. [`crate::AppState::doc_json`] keeps it, made once.
pub fn document(front_ends: &FrontEnds) -> OpenApi {
    // The very registration function `configure` serves, run against an `App` that is never
    // started: utoipa-actix-web collects the path of every `.service(handler)`.
    let (_, mut api) = actix_web::App::new()
        .into_utoipa_app()
        .openapi(ApiDoc::openapi())
        .configure(|cfg| crate::builtin_routes(&mut crate::Routes::Documented(cfg), front_ends))
        .split_for_parts();
    api.info.version = env!("CARGO_PKG_VERSION").to_owned();
    apply_access(&mut api);
    add_failures(&mut api);
    describe_error_codes(&mut api);
    api
}

/// The `ErrorCode` schema's description is the whole error table: each code, its status and
/// when it is answered.
fn describe_error_codes(api: &mut OpenApi) {
    use utoipa::openapi::schema::Schema;
    if let Some(components) = api.components.as_mut()
        && let Some(RefOr::T(Schema::Object(schema))) = components.schemas.get_mut("ErrorCode")
    {
        schema.description = Some(format!(
            "A row of the error table: its code, the status it is answered with, and when.\n\n{}",
            crate::error::markdown_table()
        ));
    }
}

/// The OpenAPI path of an actix route pattern: `{tail:.*}` becomes `{tail}`.
pub fn doc_path(actix_pattern: &str) -> String {
    let mut out = String::with_capacity(actix_pattern.len());
    let (mut in_param, mut in_regex) = (false, false);
    for c in actix_pattern.chars() {
        match c {
            '{' => {
                in_param = true;
                out.push(c);
            }
            '}' => {
                in_param = false;
                in_regex = false;
                out.push(c);
            }
            ':' if in_param => in_regex = true,
            _ if in_regex => {}
            _ => out.push(c),
        }
    }
    out
}

/// The operations of a path item, by method.
pub fn operations_mut(
    item: &mut utoipa::openapi::PathItem,
) -> impl Iterator<Item = (&'static str, &mut Operation)> {
    [
        ("GET", &mut item.get),
        ("POST", &mut item.post),
        ("PUT", &mut item.put),
        ("PATCH", &mut item.patch),
        ("DELETE", &mut item.delete),
        ("HEAD", &mut item.head),
        ("OPTIONS", &mut item.options),
        ("TRACE", &mut item.trace),
    ]
    .into_iter()
    .filter_map(|(m, op)| op.as_mut().map(|op| (m, op)))
}

/// The row of `access::BUILTIN_ROUTES` of the operation `method` `path` (an OpenAPI path).
pub fn builtin_route(method: &str, path: &str) -> Option<&'static BuiltinRoute> {
    BUILTIN_ROUTES
        .iter()
        .find(|r| r.method == method && doc_path(r.path) == path)
}

/// Security from `access::BUILTIN_ROUTES`: its protected rows, and only they, require
/// `bearerAuth`.
pub fn apply_access(api: &mut OpenApi) {
    for (path, item) in api.paths.paths.iter_mut() {
        for (method, op) in operations_mut(item) {
            let row = builtin_route(method, path);
            if row.is_some_and(|r| r.sensitive) {
                let note = "Strict mode (`AGENTRY_AUTH_STRICT=1`) protects this route: it then \
                    needs a bearer token (401 without one), and answers 403 to a user who may not \
                    act on the execution or read the logs.";
                op.description = Some(match op.description.take() {
                    Some(d) => format!("{d}\n\n{note}"),
                    None => note.to_owned(),
                });
            }
            if row.map(|r| r.access) == Some(Access::Protected) {
                op.security = Some(vec![SecurityRequirement::new(
                    BEARER_AUTH,
                    Vec::<String>::new(),
                )]);
            } else {
                op.security = None;
            }
        }
    }
    let components = api.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        BEARER_AUTH,
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .bearer_format("JWT")
                .description(Some(
                    "`Authorization: Bearer <token>`: a JWT (HS256 with AGENTRY_JWT_SECRET, or \
                     RS256 with AGENTRY_JWT_PUBLIC_KEY_FILE); `agentry token` makes one.",
                ))
                .build(),
        ),
    );
}

/// The extension of a failure response that lists its codes (as `x-error-codes: ["...", ...]`).
pub const ERROR_CODES_EXTENSION: &str = "x-error-codes";

/// The failures that, on an operation that waits for a run (one that may answer
/// `execution_failed`: execute and resume), may come once the run has begun: `App::outcome`
/// names the execution in them (`X-Execution-Id`).
const AFTER_THE_START: [Code; 4] = [
    Code::ExecutionFailed,
    Code::ExecutionContinuesElsewhere,
    Code::DatabaseUnavailable,
    Code::Internal,
];

/// Every failure response of every operation, generated from its row of `access.rs`
/// ([`BuiltinRoute::failures`]) and the error table: one per status, nothing written by hand.
/// A status a path block already answers (outside the envelope: `POST /mcp`'s JSON-RPC 400)
/// keeps its body and gains the codes.
fn add_failures(api: &mut OpenApi) {
    for (path, item) in api.paths.paths.iter_mut() {
        for (method, op) in operations_mut(item) {
            let Some(row) = builtin_route(method, path) else {
                continue;
            };
            let failures = row.failures();
            let waits_for_run = failures.contains(&Code::ExecutionFailed);
            let mut by_status: BTreeMap<u16, Vec<Code>> = BTreeMap::new();
            for code in failures {
                by_status.entry(code.status()).or_default().push(code);
            }
            for (status, codes) in by_status {
                let generated = failure_response(&codes, waits_for_run);
                match op.responses.responses.entry(status.to_string()) {
                    Entry::Vacant(slot) => {
                        slot.insert(generated.into());
                    }
                    Entry::Occupied(mut slot) => {
                        if let RefOr::T(special) = slot.get_mut() {
                            special.description =
                                format!("{}\n\n{}", special.description, generated.description);
                            special.headers.extend(generated.headers);
                            special
                                .extensions
                                .get_or_insert_with(Default::default)
                                .merge(generated.extensions.unwrap_or_default());
                        }
                    }
                }
            }
        }
    }
}

/// The failure response of `codes` (all of one status, in the table's order): the failure
/// envelope, each code with when it is answered, and the headers they imply.
fn failure_response(codes: &[Code], waits_for_run: bool) -> Response {
    let names = |pick: &dyn Fn(Code) -> bool| -> Vec<String> {
        codes
            .iter()
            .filter(|c| pick(**c))
            .map(|c| format!("`{}`", c.as_str()))
            .collect()
    };
    let mut description = String::new();
    for code in codes {
        description.push_str(&format!("- `{}`: {}\n", code.as_str(), code.when()));
    }
    description.push_str(&format!("\nCodes: {}.", names(&|_| true).join(", ")));
    let mut response = ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("Failure")))
                .build(),
        )
        .extensions(Some(
            [(
                ERROR_CODES_EXTENSION,
                serde_json::Value::from(codes.iter().map(|c| c.as_str()).collect::<Vec<_>>()),
            )]
            .into_iter()
            .collect(),
        ));
    let retry = names(&|c| c.retry_after().is_some());
    if !retry.is_empty() {
        response = response.header(
            "Retry-After",
            header(
                Type::Integer,
                format!(
                    "Seconds to wait before trying again (with {}).",
                    retry.join(", ")
                ),
            ),
        );
    }
    let run = names(&|c| waits_for_run && AFTER_THE_START.contains(&c));
    if !run.is_empty() {
        response = response.header(
            "X-Execution-Id",
            header(
                Type::String,
                format!(
                    "The execution's id, when the failure came after its run began (with {}): \
                     it ended in error, or it goes on (its state tells; the same execute again \
                     rejoins it).",
                    run.join(", ")
                ),
            ),
        );
    }
    if codes.contains(&Code::MethodNotAllowed) {
        response = response.header(
            "Allow",
            header(Type::String, "The methods that are served.".to_owned()),
        );
    }
    if codes.iter().any(|c| UNAUTHORIZED.contains(c)) {
        response = response.header(
            "WWW-Authenticate",
            header(
                Type::String,
                "`Bearer`, when the authentication middleware refuses the request.".to_owned(),
            ),
        );
    }
    response.build()
}

/// A response header of type `ty`.
fn header(ty: Type, description: String) -> Header {
    let schema = match ty {
        Type::Integer => ObjectBuilder::new().schema_type(ty).minimum(Some(0)),
        _ => ObjectBuilder::new().schema_type(ty),
    };
    HeaderBuilder::new()
        .schema(Some(schema))
        .description(Some(description))
        .build()
}

// ---------------------------------------------------------------------------------------------
// The routes of this module: GET /doc, GET /ui, GET /ui/{tail}.

/// The Swagger UI configuration: one document, ours.
fn swagger_config() -> Arc<utoipa_swagger_ui::Config<'static>> {
    static CONFIG: OnceLock<Arc<utoipa_swagger_ui::Config<'static>>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            Arc::new(
                utoipa_swagger_ui::Config::new([DOC_PATH])
                    .try_it_out_enabled(true)
                    .display_request_duration(true),
            )
        })
        .clone()
}

#[utoipa::path(
    tag = "documentation",
    operation_id = "openApiDocument",
    summary = "This OpenAPI document",
    description = "The OpenAPI 3.1 description of every built-in route, generated from the code.",
    responses(
        (status = 200, description = "The OpenAPI document.", content_type = "application/json", body = Object),
    ),
)]
#[get("/doc")]
pub async fn openapi_document(app: web::Data<crate::AppState>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(ContentType::json())
        .body(app.doc_json())
}

#[utoipa::path(
    tag = "documentation",
    operation_id = "apiExplorer",
    summary = "The API explorer (Swagger UI)",
    description = "Swagger UI's page: it shows this document and can send requests. Its files \
        load from `/ui/` (the page names them under `<base href=\"/ui/\">`), so `/ui` and \
        `/ui/` answer the same page, with no redirect.",
    responses(
        (status = 200, description = "The page.", content_type = "text/html"),
    ),
)]
#[get("/ui")]
pub async fn api_explorer() -> HttpResponse {
    explorer_file("")
}

/// A file of Swagger UI; its page (`""` or `index.html`) with a `<base href="/ui/">` so that
/// its relative links resolve under `/ui/` whether it was asked for as `/ui` or `/ui/`.
fn explorer_file(tail: &str) -> HttpResponse {
    match utoipa_swagger_ui::serve(tail, swagger_config()) {
        Ok(Some(file)) if file.content_type.starts_with("text/html") => {
            let page = String::from_utf8_lossy(&file.bytes).replacen(
                "<head>",
                "<head>\n    <base href=\"/ui/\">",
                1,
            );
            crate::page::secure(&mut HttpResponse::Ok())
                .content_type(file.content_type)
                .body(page)
        }
        Ok(Some(file)) => HttpResponse::Ok()
            .content_type(file.content_type)
            .insert_header((actix_web::http::header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
            .body(file.bytes.into_owned()),
        Ok(None) => {
            ApiError::new(Code::RouteNotFound, format!("No file {tail} in /ui/")).error_response()
        }
        Err(e) => ApiError::internal(format!("Swagger UI: {e}")).error_response(),
    }
}

#[utoipa::path(
    tag = "documentation",
    operation_id = "apiExplorerFile",
    summary = "A file of the API explorer",
    description = "Swagger UI's files, served from the binary: an empty `tail` is its page \
        (`index.html`); the page loads `swagger-ui.css`, `index.css`, `swagger-ui-bundle.js`, \
        `swagger-ui-standalone-preset.js` and `swagger-initializer.js` (which points it at `/doc`).",
    params(("tail" = String, Path, description = "A file name; empty for the page.", example = "index.html")),
    responses(
        (status = 200, description = "The file (HTML, CSS, JavaScript or PNG)."),
    ),
)]
#[get("/ui/{tail:.*}")]
pub async fn api_explorer_file(tail: web::Path<String>) -> HttpResponse {
    explorer_file(&tail)
}

/// Registers `/doc` and `/ui`.
pub fn routes(cfg: &mut crate::registration::Routes<'_, '_>) {
    cfg.service(openapi_document)
        .service(api_explorer)
        .service(api_explorer_file);
}

// ---------------------------------------------------------------------------------------------
// Streams. OpenAPI 3.1 has the `schema` of a `text/event-stream` response describe each event
// (as 3.2's `itemSchema` does): an object with the event's `data` (and the optional `event`,
// `id`, `retry` fields), whose `data` is a string of JSON (`contentMediaType`) valid against the
// payload schema (`contentSchema`).

/// One Server-Sent Event whose `data` is JSON valid against `payload` (or, when `done` is
/// given, also that terminal string).
fn sse_event(payload: &str, done: Option<&str>, description: &str) -> Schema {
    let json = ObjectBuilder::new()
        .schema_type(Type::String)
        .content_media_type("application/json")
        .content_schema(Some(Ref::from_schema_name(payload)));
    let data: RefOr<Schema> = match done {
        None => json.into(),
        Some(done) => AnyOfBuilder::new()
            .item(json)
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some([done])),
            )
            .into(),
    };
    ObjectBuilder::new()
        .description(Some(description))
        .property("data", data)
        .required("data")
        .property("event", ObjectBuilder::new().schema_type(Type::String))
        .property("id", ObjectBuilder::new().schema_type(Type::String))
        .property(
            "retry",
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0)),
        )
        .into()
}

/// A stream's event schema, named `$name`, whose `data` is a `$payload`.
macro_rules! sse_schema {
    ($(#[$meta:meta])* $name:ident, $payload:ty, $done:expr, $description:expr) => {
        $(#[$meta])*
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                sse_event(&<$payload as ToSchema>::name(), $done, $description).into()
            }
        }

        impl ToSchema for $name {
            fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
                schemas.push((
                    <$payload as ToSchema>::name().into_owned(),
                    <$payload as utoipa::PartialSchema>::schema(),
                ));
                <$payload as ToSchema>::schemas(schemas);
            }
        }
    };
}

sse_schema!(
    /// An event of POST /workflows/{id}/stream.
    WorkflowStreamEvent,
    wire::events::WorkflowEvent,
    None,
    "One event: `data` is a WorkflowEvent as JSON."
);
sse_schema!(
    /// An event of POST /agents/{id}/stream.
    AgentStreamEvent,
    wire::agents::AgentEvent,
    None,
    "One event: `data` is an AgentEvent as JSON."
);
sse_schema!(
    /// An event of POST /agents/{id}/stream-object.
    ObjectStreamEvent,
    wire::agents::ObjectEvent,
    None,
    "One event: `data` is an ObjectEvent as JSON."
);
sse_schema!(
    /// An event of POST /agents/{id}/chat.
    ChatStreamEvent,
    wire::chat::UiMessageChunk,
    Some("[DONE]"),
    "One event: `data` is a UiMessageChunk as JSON, or `[DONE]` (the last one)."
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_paths_drop_actix_regexes() {
        assert_eq!(doc_path("/ui/{tail:.*}"), "/ui/{tail}");
        assert_eq!(
            doc_path("/workflows/{id}/executions/{execution_id}/state"),
            "/workflows/{id}/executions/{execution_id}/state"
        );
        assert_eq!(doc_path("/"), "/");
    }

    /// The agent routes' bodies are documented as their types, which are also their parsers,
    /// describe them: the ranges and defaults that `agentry-app`'s `tests/option_ranges.rs`
    /// checks against the parser are the ones /doc shows.
    #[test]
    fn the_agent_bodies_are_documented_as_their_types_read_them() {
        use agentry_app::input::{
            AgentInput, AgentRequest, GenerationOptions, InputMessage, ObjectRequest, OutputSchema,
        };
        use utoipa::PartialSchema;

        let doc = document(&FrontEnds::default());
        let schemas = &doc.components.as_ref().unwrap().schemas;
        for (name, schema) in [
            ("AgentRequest", AgentRequest::schema()),
            ("ObjectRequest", ObjectRequest::schema()),
            ("GenerationOptions", GenerationOptions::schema()),
            ("AgentInput", AgentInput::schema()),
            ("InputMessage", InputMessage::schema()),
            ("OutputSchema", OutputSchema::schema()),
        ] {
            let json = |s: &RefOr<Schema>| serde_json::to_value(s).unwrap();
            assert_eq!(schemas.get(name).map(json), Some(json(&schema)), "{name}");
        }
    }
}
