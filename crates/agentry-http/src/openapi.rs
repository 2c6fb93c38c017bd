//! The OpenAPI description of the built-in routes (`GET /doc`) and the API explorer (`GET /ui`).
//!
//! The document is collected from the code, not written by hand: every built-in handler carries
//! a `#[utoipa::path]` attribute, and [`crate::builtin_routes`] registers them through
//! utoipa-actix-web, whose `.service(handler)` adds each handler's path to the document as it
//! registers the route. [`document`] runs that same registration function once against a
//! throwaway `App` and keeps what it collected, so a route that is served is a route that is
//! documented. Then [`apply_access`] reads `access::BUILTIN_ROUTES`, the table that decides
//! authentication, and marks exactly its protected rows with the `bearerAuth` requirement (and
//! their 401 answer): the document's security cannot drift from what the server enforces.
//!
//! The types below are schema-only: the agent routes take and give `serde_json::Value` (their
//! parsing lives in `agent_wire`), and several workflow answers are built with `json!` in `wire`,
//! so these structs describe those shapes for the document and are never constructed.
//!
//! `/ui` serves Swagger UI 5 from the binary (utoipa-swagger-ui with its `vendored` feature, no
//! CDN), pointed at `/doc`.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use actix_web::http::header::ContentType;
use actix_web::{HttpResponse, ResponseError, get, web};
use agentry_auth::Access;
use chrono::{DateTime, Utc};
use serde_json::Value;
use utoipa::openapi::path::Operation;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::schema::{AnyOfBuilder, ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr};
use utoipa::{OpenApi as _, ToSchema};
use utoipa_actix_web::AppExt;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::access::BUILTIN_ROUTES;
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
        (name = "workflows", description = "Registered workflows: run them, stream their events, suspend, resume and inspect executions."),
        (name = "observability", description = "Logs over HTTP and WebSocket, live execution events."),
        (name = "documentation", description = "The landing page, this document and the API explorer."),
    ),
    components(schemas(Failure)),
)]
struct ApiDoc;

/// The OpenAPI document of the built-in routes, built once per process.
pub fn document() -> &'static OpenApi {
    static DOC: OnceLock<OpenApi> = OnceLock::new();
    DOC.get_or_init(build)
}

/// [`document`] as JSON, serialized once.
pub fn document_json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        document()
            .to_json()
            .expect("the OpenAPI document serializes")
    })
}

fn build() -> OpenApi {
    // The very registration function `configure` serves, run against an `App` that is never
    // started: utoipa-actix-web collects the path of every `.service(handler)`.
    let (_, mut api) = actix_web::App::new()
        .into_utoipa_app()
        .openapi(ApiDoc::openapi())
        .configure(crate::builtin_routes)
        .split_for_parts();
    api.info.version = env!("CARGO_PKG_VERSION").to_owned();
    apply_access(&mut api);
    add_body_failures(&mut api);
    describe_error_codes(&mut api);
    list_failure_codes(&mut api);
    api
}

/// Every failure response of every operation names the codes of the error table its status may
/// carry, so a client knows what to match on.
fn list_failure_codes(api: &mut OpenApi) {
    for item in api.paths.paths.values_mut() {
        for (_, op) in operations_mut(item) {
            for (status, response) in op.responses.responses.iter_mut() {
                let (Ok(status), RefOr::T(response)) = (status.parse::<u16>(), response) else {
                    continue;
                };
                let codes: Vec<String> = crate::error::Code::ALL
                    .iter()
                    .filter(|c| c.status().as_u16() == status)
                    .map(|c| format!("`{}`", c.as_str()))
                    .collect();
                if status >= 400 && !codes.is_empty() {
                    response.description =
                        format!("{} Codes: {}.", response.description, codes.join(", "));
                }
            }
        }
    }
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

fn failure_response(description: &str) -> RefOr<utoipa::openapi::Response> {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("Failure")))
                .build(),
        )
        .build()
        .into()
}

/// Security from `access::BUILTIN_ROUTES`: its protected rows, and only they, require
/// `bearerAuth` and may answer 401.
pub fn apply_access(api: &mut OpenApi) {
    for (path, item) in api.paths.paths.iter_mut() {
        for (method, op) in operations_mut(item) {
            let row = BUILTIN_ROUTES
                .iter()
                .find(|r| r.method == method && doc_path(r.path) == *path);
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
                op.responses
                    .responses
                    .entry("401".to_owned())
                    .or_insert_with(|| {
                        failure_response(
                            "No token (`Authentication required`), a token that fails \
                             verification (`Invalid token: <reason>`) or an expired one \
                             (`Token expired`). Only when an authentication provider is configured.",
                        )
                    });
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

/// What any operation with a body may answer beside its own: 408 (the body came too slowly),
/// 413 (over the limit), 415 (not JSON); and any operation that changes something, 403 (a
/// browser request sent by another site).
fn add_body_failures(api: &mut OpenApi) {
    let failures = [
        (
            "408",
            "The body was not received in time (30 s by default): `Request timeout: ...`.",
        ),
        (
            "413",
            "The body is over the limit (1 MiB by default): \
             `Request body is ... over the limit of ... bytes`.",
        ),
        (
            "415",
            "A body or Content-Type that is not JSON: \
             `Unsupported media type: Content-Type must be application/json`.",
        ),
    ];
    for item in api.paths.paths.values_mut() {
        for (method, op) in operations_mut(item) {
            let responses = &mut op.responses.responses;
            if op.request_body.is_some() {
                for (status, text) in failures {
                    responses
                        .entry(status.to_owned())
                        .or_insert_with(|| failure_response(text));
                }
            }
            if method != "GET" {
                responses.entry("403".to_owned()).or_insert_with(|| {
                    failure_response(
                        "A browser request sent by a page of another site: \
                         `Forbidden: origin <origin> is not allowed`.",
                    )
                });
            }
        }
    }
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
pub async fn openapi_document() -> HttpResponse {
    HttpResponse::Ok()
        .content_type(ContentType::json())
        .body(document_json())
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
            HttpResponse::Ok()
                .content_type(file.content_type)
                .body(page)
        }
        Ok(Some(file)) => HttpResponse::Ok()
            .content_type(file.content_type)
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
        (status = 404, description = "No such file.", body = Failure),
    ),
)]
#[get("/ui/{tail:.*}")]
pub async fn api_explorer_file(tail: web::Path<String>) -> HttpResponse {
    explorer_file(&tail)
}

/// Registers `/doc` and `/ui`.
pub fn routes(cfg: &mut ServiceConfig<'_>) {
    cfg.service(openapi_document)
        .service(api_explorer)
        .service(api_explorer_file);
}

// ---------------------------------------------------------------------------------------------
// Envelopes.

fn success_true() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Boolean)
        .enum_values(Some([true]))
        .description(Some("Always `true`."))
}

fn success_false() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Boolean)
        .enum_values(Some([false]))
        .description(Some("Always `false`."))
}

/// The failure envelope: every error, of every route.
#[derive(ToSchema)]
pub struct Failure {
    #[schema(schema_with = success_false)]
    pub success: bool,
    /// What went wrong, for a person.
    pub error: String,
    /// What went wrong, for a program: a row of the error table (stable).
    pub code: crate::error::Code,
}

/// A success envelope `{success: true, data}` named `$name` around `$data`.
macro_rules! envelope {
    ($(#[$meta:meta])* $name:ident, $data:ty) => {
        $(#[$meta])*
        #[derive(ToSchema)]
        pub struct $name {
            #[schema(schema_with = success_true)]
            pub success: bool,
            pub data: $data,
        }
    };
}

envelope!(
    /// The registered agents.
    AgentListResponse,
    Vec<AgentSummary>
);
envelope!(
    /// One agent.
    AgentResponse,
    AgentSummary
);
envelope!(
    /// The generated text.
    TextResultResponse,
    TextResult
);
envelope!(
    /// The generated object (valid against the request's `schema`).
    ObjectResultResponse,
    Value
);
envelope!(
    /// The registered workflows.
    WorkflowListResponse,
    Vec<wire::WorkflowSummary>
);
envelope!(
    /// One workflow, its steps and schemas.
    WorkflowResponse,
    wire::WorkflowDetail
);
envelope!(
    /// The execution's result: the completed or the suspended form.
    ExecutionResultResponse,
    ExecutionResult
);
envelope!(
    /// What the suspend request did.
    SuspendResultResponse,
    SuspendResult
);
envelope!(
    /// The execution's complete record.
    ExecutionStateResponse,
    ExecutionState
);
envelope!(
    /// The cancelled execution.
    CancelResultResponse,
    CancelResult
);
envelope!(
    /// One page of a workflow's executions.
    ExecutionListResponse,
    ExecutionList
);
envelope!(
    /// Captured log records, oldest first.
    LogListResponse,
    Vec<LogRecord>
);

// ---------------------------------------------------------------------------------------------
// Agents.

/// A sub-agent as the agent that delegates to it shows it.
#[derive(ToSchema)]
pub struct SubAgentRef {
    pub id: String,
    #[schema(nullable = false)]
    pub name: Option<String>,
    #[schema(nullable = false)]
    pub description: Option<String>,
}

/// An agent's memory settings.
#[derive(ToSchema)]
pub struct AgentMemory {
    /// Where and how the conversation history is kept, e.g.
    /// `{"storage": "sqlite", "scope": "agentId, userId, conversationId", "contextLimit": 10}`.
    #[schema(value_type = Object)]
    pub config: Value,
}

/// The only status an agent shows.
#[derive(ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AgentStatus {
    Idle,
}

/// An agent (items of GET /agents, and GET /agents/{id}).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentSummary {
    pub id: String,
    pub name: String,
    pub description: String,
    pub status: AgentStatus,
    /// The model's name (`offline` for the built-in model).
    pub model: String,
    /// The names of its tools.
    pub tools: Vec<String>,
    pub sub_agents: Vec<SubAgentRef>,
    /// `null` when the agent keeps no memory.
    #[schema(required = true)]
    pub memory: Option<AgentMemory>,
    pub is_telemetry_enabled: bool,
}

/// Who says a message.
#[derive(ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MessageRole {
    System,
    User,
    Assistant,
}

/// The kind of a text part.
#[derive(ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TextPartType {
    Text,
}

/// A text part of a message. (A UIMessage's other part kinds, such as files or tool parts,
/// are accepted and carry no prompt text.)
#[derive(ToSchema)]
pub struct TextPart {
    #[serde(rename = "type")]
    pub kind: TextPartType,
    pub text: String,
}

/// A UIMessage, as the AI SDK's `useChat` sends it.
#[derive(ToSchema)]
pub struct UiMessage {
    pub role: MessageRole,
    pub parts: Vec<TextPart>,
}

/// The content of a ModelMessage: a string, or text parts.
#[derive(ToSchema)]
#[serde(untagged)]
pub enum ModelContent {
    Text(String),
    Parts(Vec<TextPart>),
}

/// A ModelMessage.
#[derive(ToSchema)]
pub struct ModelMessage {
    pub role: MessageRole,
    pub content: ModelContent,
}

/// The agent's input: a string (one user message), an array of UIMessages or an array of
/// ModelMessages (not empty).
#[derive(ToSchema)]
#[serde(untagged)]
pub enum AgentInput {
    Text(String),
    UiMessages(Vec<UiMessage>),
    ModelMessages(Vec<ModelMessage>),
}

/// Generation options (spec sections 2 and 8). A value out of range is a 400 naming the field;
/// `null` is the same as absent.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GenerationOptions {
    /// User id for tracking (and, with `conversationId`, for memory).
    pub user_id: Option<String>,
    /// Conversation id: agents with memory keep the conversation under it.
    pub conversation_id: Option<String>,
    /// How many messages of history to load.
    #[schema(minimum = 0, maximum = 100, default = 10)]
    pub context_limit: Option<u32>,
    /// The most model calls (tool use) in one generation.
    #[schema(minimum = 1, maximum = 100)]
    pub max_steps: Option<u32>,
    #[schema(minimum = 0, maximum = 1, default = 0.7)]
    pub temperature: Option<f64>,
    #[schema(minimum = 1, maximum = 1000000, default = 4000)]
    pub max_output_tokens: Option<u32>,
    #[schema(minimum = 0, maximum = 1, default = 1.0)]
    pub top_p: Option<f64>,
    #[schema(minimum = 0, maximum = 2, default = 0.0)]
    pub frequency_penalty: Option<f64>,
    #[schema(minimum = 0, maximum = 2, default = 0.0)]
    pub presence_penalty: Option<f64>,
    /// For reproducible results.
    pub seed: Option<i64>,
    /// Sequences that stop generation.
    pub stop_sequences: Option<Vec<String>>,
    /// Provider-specific options, passed through, e.g. `{"openai": {"reasoningEffort": "low"}}`.
    #[schema(value_type = Option<Object>)]
    pub provider_options: Option<Value>,
    /// Free-form context handed to the agent (its dynamic instructions read it), e.g.
    /// `{"language": "French"}`.
    #[schema(value_type = Option<Object>)]
    pub context: Option<Value>,
}

/// Body of /text, /stream and /chat. (/chat also takes a chat transport's `messages`, an array
/// of UIMessages, in place of `input`.)
#[derive(ToSchema)]
#[schema(example = json!({"input": "What is the weather in Paris?", "options": {"userId": "u-1", "conversationId": "c-1"}}))]
pub struct AgentRequest {
    pub input: AgentInput,
    pub options: Option<GenerationOptions>,
}

/// The top-level type of an output schema.
#[derive(ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OutputSchemaType {
    Object,
    Array,
}

/// A JSON Schema whose top level is an object or an array (type, properties, items, required,
/// format, enum, minimum, maximum, ...).
#[derive(ToSchema)]
pub struct OutputSchema {
    #[serde(rename = "type")]
    pub kind: OutputSchemaType,
    #[schema(nullable = false, value_type = Option<Object>)]
    pub properties: Option<Value>,
    #[schema(nullable = false, value_type = Option<Object>)]
    pub items: Option<Value>,
    #[schema(nullable = false)]
    pub required: Option<Vec<String>>,
}

/// Body of /object and /stream-object.
#[derive(ToSchema)]
#[schema(example = json!({"input": "a film", "schema": {"type": "object", "properties": {"title": {"type": "string"}, "rating": {"type": "integer", "minimum": 1, "maximum": 5}}, "required": ["title", "rating"]}}))]
pub struct ObjectRequest {
    pub input: AgentInput,
    pub schema: OutputSchema,
    pub options: Option<GenerationOptions>,
}

/// Token counts of a generation.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub cached_input_tokens: u64,
    pub reasoning_tokens: u64,
}

/// Why generation stopped.
#[derive(ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FinishReason {
    Stop,
    Length,
    ContentFilter,
    ToolCalls,
    Error,
    Other,
}

/// A tool call the model asked for.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    pub tool_call_id: String,
    pub tool_name: String,
    pub args: Value,
}

/// A tool's result.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    pub tool_call_id: String,
    pub tool_name: String,
    pub args: Value,
    pub result: Value,
    /// Present (`true`) when the tool failed; `result` then describes the failure.
    #[schema(nullable = false)]
    pub is_error: Option<bool>,
}

/// `data` of POST /agents/{id}/text.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TextResult {
    pub text: String,
    pub usage: Usage,
    pub finish_reason: FinishReason,
    pub tool_calls: Vec<ToolCall>,
    pub tool_results: Vec<ToolResult>,
}

// ---------------------------------------------------------------------------------------------
// Workflows.

/// A workflow or execution status.
#[derive(ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum WorkflowStatus {
    Idle,
    Running,
    Suspended,
    Completed,
    Error,
    Cancelled,
}

/// A step type.
#[derive(ToSchema)]
pub enum StepType {
    #[serde(rename = "andThen")]
    AndThen,
    #[serde(rename = "andWhen")]
    AndWhen,
    #[serde(rename = "andAll")]
    AndAll,
    #[serde(rename = "andRace")]
    AndRace,
    #[serde(rename = "andTap")]
    AndTap,
    #[serde(rename = "andAgent")]
    AndAgent,
    #[serde(rename = "andWorkflow")]
    AndWorkflow,
}

/// The suspension of a suspended execution, as execute and resume show it.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResultSuspension {
    pub suspended_at: DateTime<Utc>,
    pub reason: String,
    /// Index of the step that runs on resume.
    pub suspended_step_index: u64,
    /// Id of the step that runs on resume.
    pub step_id: String,
    /// When it resumes by itself if nobody resumes it (a durable timer).
    #[schema(nullable = false)]
    pub deadline: Option<DateTime<Utc>>,
}

/// The status of a finished call: the run completed, suspended, or was cancelled meanwhile.
#[derive(ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ResultStatus {
    Completed,
    Suspended,
    Cancelled,
}

/// When and why an execution was cancelled.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CancellationRecord {
    pub cancelled_at: DateTime<Utc>,
    #[schema(required = true)]
    pub reason: Option<String>,
}

/// One execution of a list.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionSummary {
    pub execution_id: String,
    pub workflow_id: String,
    pub status: WorkflowStatus,
    pub start_at: DateTime<Utc>,
    #[schema(required = true)]
    pub end_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    #[schema(required = true)]
    pub user_id: Option<String>,
    /// Present when suspended.
    #[schema(nullable = false)]
    pub suspension: Option<ResultSuspension>,
}

/// `data` of the executions list.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionList {
    pub executions: Vec<ExecutionSummary>,
    /// The `cursor` of the next page; `null` on the last one.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

/// `data` of cancel.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CancelResult {
    pub execution_id: String,
    pub status: WorkflowStatus,
    pub cancellation: CancellationRecord,
}

/// Why an execution failed.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StateError {
    pub message: String,
    /// The step that failed; `null` when the engine itself gave up.
    #[schema(required = true)]
    pub step_id: Option<String>,
}

/// `data` of execute and resume.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"executionId": "exp-1", "startAt": "2026-11-23T10:00:00.000Z", "endAt": null, "status": "suspended", "result": null,
    "suspension": {"suspendedAt": "2026-11-23T10:00:00.002Z", "reason": "Manager approval required for amounts over 1000", "suspendedStepIndex": 0, "stepId": "check-approval"}}))]
pub struct ExecutionResult {
    pub execution_id: String,
    pub start_at: DateTime<Utc>,
    /// `null` while suspended.
    #[schema(required = true)]
    pub end_at: Option<DateTime<Utc>>,
    pub status: ResultStatus,
    /// The workflow's result; `null` while suspended.
    #[schema(required = true)]
    pub result: Option<Value>,
    /// Present when suspended.
    #[schema(nullable = false)]
    pub suspension: Option<ResultSuspension>,
    /// Present when cancelled.
    #[schema(nullable = false)]
    pub cancellation: Option<CancellationRecord>,
}

/// The suspension recorded by a suspend that took effect.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuspensionRecord {
    pub suspended_at: DateTime<Utc>,
    pub reason: String,
    /// Index of the step that runs on resume.
    pub step_index: u64,
    /// Id of the step that runs on resume.
    pub step_id: String,
}

/// A suspend request still waiting for the next step boundary.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingSuspension {
    pub requested_at: DateTime<Utc>,
    pub reason: String,
    pub pending: bool,
}

/// What a suspend request left.
#[derive(ToSchema)]
#[serde(untagged)]
pub enum SuspendOutcome {
    Suspended(SuspensionRecord),
    Pending(PendingSuspension),
}

/// `data` of suspend: `suspended` with its suspension (200), or, when the step boundary was not
/// reached in time, the current status with the pending request (202).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuspendResult {
    pub execution_id: String,
    pub status: WorkflowStatus,
    /// `null` when the execution ended before the request took effect.
    #[schema(required = true)]
    pub suspension: Option<SuspendOutcome>,
}

/// The suspension of a suspended execution, as its state shows it.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StateSuspension {
    pub suspended_at: DateTime<Utc>,
    pub reason: String,
    /// Index of the step that runs on resume.
    pub step_index: u64,
    /// Id of the step that runs on resume.
    pub step_id: String,
    /// What the suspending step attached (valid against the suspend schema), or `null`.
    #[schema(required = true)]
    pub suspend_data: Option<Value>,
    /// When it resumes by itself if nobody resumes it (a durable timer).
    #[schema(nullable = false)]
    pub deadline: Option<DateTime<Utc>>,
}

/// A suspend requested from outside, waiting for the next step boundary.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuspendRequestRecord {
    pub requested_at: DateTime<Utc>,
    pub reason: String,
}

/// The record of one step (or child of a composite step).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepRecord {
    pub status: StepStatus,
    /// How many times the step was started: more than 1 after a crash, a lost lease or a
    /// shutdown interrupted an earlier attempt.
    pub attempt: u32,
    /// The composite step (`andAll`, `andRace`, `andWhen`) of a child.
    #[schema(nullable = false)]
    pub parent_step_id: Option<String>,
    pub input: Value,
    /// `null` until the step finishes.
    pub output: Value,
    pub started_at: DateTime<Utc>,
    #[schema(required = true)]
    pub ended_at: Option<DateTime<Utc>>,
    /// The failed attempts that were tried again (a step with retries).
    pub failures: Vec<AttemptFailure>,
}

/// One failed attempt of a step.
#[derive(ToSchema)]
pub struct AttemptFailure {
    pub attempt: u32,
    pub error: String,
    pub at: DateTime<Utc>,
}

/// Where a step is: `skipped` for an `andWhen` whose condition did not hold.
#[derive(ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum StepStatus {
    Running,
    Suspended,
    Completed,
    Skipped,
    Failed,
}

/// The process that holds a running execution, and the fencing epoch of its hold.
#[derive(ToSchema)]
pub struct LeaseRecord {
    pub node: String,
    pub epoch: i64,
}

/// `data` of the state endpoint: the whole record of an execution.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionState {
    pub execution_id: String,
    pub workflow_id: String,
    pub status: WorkflowStatus,
    pub start_at: DateTime<Utc>,
    #[schema(required = true)]
    pub end_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    /// The input the execution was started with.
    pub input: Value,
    /// The context: the caller's entries, `userId` and the authenticated `user` when known.
    #[schema(value_type = Object)]
    pub context: Value,
    #[schema(required = true)]
    pub user_id: Option<String>,
    #[schema(required = true)]
    pub result: Option<Value>,
    /// Index of the next step to run.
    pub next_step_index: u64,
    /// Every step that started so far, by step id, in the order they started.
    pub steps: BTreeMap<String, StepRecord>,
    /// Which process runs it, while it runs.
    #[schema(nullable = false)]
    pub lease: Option<LeaseRecord>,
    /// Present when suspended.
    #[schema(nullable = false)]
    pub suspension: Option<StateSuspension>,
    /// Why it failed, when the execution failed.
    #[schema(nullable = false)]
    pub error: Option<StateError>,
    /// When and why, when the execution was cancelled.
    #[schema(nullable = false)]
    pub cancellation: Option<CancellationRecord>,
    /// Present while a suspend request waits for the next step boundary.
    #[schema(nullable = false)]
    pub suspend_request: Option<SuspendRequestRecord>,
}

// ---------------------------------------------------------------------------------------------
// Logs.

/// A log severity.
#[derive(ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// One captured log record.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogRecord {
    pub timestamp: DateTime<Utc>,
    pub level: LogLevel,
    /// The event's target (usually the module path).
    pub target: String,
    pub message: String,
    /// The event's other fields.
    #[schema(value_type = Object)]
    pub fields: Value,
    #[schema(required = true)]
    pub agent_id: Option<String>,
    #[schema(required = true)]
    pub workflow_id: Option<String>,
    #[schema(required = true)]
    pub execution_id: Option<String>,
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
    WorkflowEvent,
    None,
    "One event: `data` is a WorkflowEvent as JSON."
);
sse_schema!(
    /// An event of POST /agents/{id}/stream.
    AgentStreamEvent,
    AgentEvent,
    None,
    "One event: `data` is an AgentEvent as JSON."
);
sse_schema!(
    /// An event of POST /agents/{id}/stream-object.
    ObjectStreamEvent,
    ObjectEvent,
    None,
    "One event: `data` is an ObjectEvent as JSON."
);
sse_schema!(
    /// An event of POST /agents/{id}/chat.
    ChatStreamEvent,
    UiMessageChunk,
    Some("[DONE]"),
    "One event: `data` is a UiMessageChunk as JSON, or `[DONE]` (the last one)."
);

/// The kind of a workflow event.
#[derive(ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WorkflowEventType {
    WorkflowStart,
    StepStart,
    StepComplete,
    WorkflowSuspended,
    WorkflowComplete,
    WorkflowError,
    StepRetry,
    WorkflowCancelled,
    WorkflowResult,
    WorkflowHandover,
}

/// A workflow event (the `data` of the workflow stream, and a message of
/// `/ws/executions/{executionId}`). Fields beyond the first four depend on `type`.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowEvent {
    #[serde(rename = "type")]
    pub kind: WorkflowEventType,
    pub execution_id: String,
    pub workflow_id: String,
    pub timestamp: DateTime<Utc>,
    /// workflow-start: the execution's input; step-start: the step's input.
    pub input: Option<Value>,
    /// workflow-start: whether this run resumes a suspended execution.
    #[schema(nullable = false)]
    pub resumed: Option<bool>,
    /// Step events: the step's id.
    #[schema(nullable = false)]
    pub from: Option<String>,
    /// Step events: the step's index.
    #[schema(nullable = false)]
    pub step_index: Option<u64>,
    /// Step events: the step's type.
    #[schema(nullable = false)]
    pub step_type: Option<StepType>,
    /// step-complete: the step's output.
    pub output: Option<Value>,
    /// step-complete: `true` for an `andWhen` whose condition did not hold.
    #[schema(nullable = false)]
    pub skipped: Option<bool>,
    /// workflow-suspended and workflow-result of a suspended execution.
    #[schema(nullable = false)]
    pub suspension: Option<ResultSuspension>,
    /// workflow-suspended: what the suspending step attached.
    pub suspend_data: Option<Value>,
    /// workflow-complete and workflow-result: the result (`null` unless completed).
    pub result: Option<Value>,
    /// workflow-error and workflow-result of a failed execution: the message.
    #[schema(nullable = false)]
    pub error: Option<String>,
    /// workflow-error: the step that failed (`null` when the engine itself gave up).
    pub step_id: Option<String>,
    /// step-retry: the attempt that failed.
    #[schema(nullable = false)]
    pub attempt: Option<u32>,
    /// step-retry: the attempt that starts next.
    #[schema(nullable = false)]
    pub next_attempt: Option<u32>,
    /// step-retry: how long until it starts.
    #[schema(nullable = false)]
    pub delay_ms: Option<u64>,
    /// workflow-cancelled and workflow-result of a cancelled execution.
    #[schema(nullable = false)]
    pub cancellation: Option<CancellationRecord>,
    /// workflow-result: the execution's status.
    #[schema(nullable = false)]
    pub status: Option<WorkflowStatus>,
    /// workflow-result: when the execution started.
    #[schema(nullable = false)]
    pub start_at: Option<DateTime<Utc>>,
    /// workflow-result: when it ended (`null` while suspended).
    pub end_at: Option<DateTime<Utc>>,
    /// workflow-handover (the last event when this server shut down or lost the execution):
    /// that the execution continues elsewhere; re-post with the same `executionId` and input to
    /// follow it.
    #[schema(nullable = false)]
    pub message: Option<String>,
}

/// The kind of an agent stream event.
#[derive(ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AgentEventType {
    TextDelta,
    ToolCall,
    ToolResult,
    ObjectDelta,
    Finish,
    Error,
}

/// A raw full-stream event of POST /agents/{id}/stream. Fields beyond `type` depend on it.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentEvent {
    #[serde(rename = "type")]
    pub kind: AgentEventType,
    /// text-delta: the new text.
    #[schema(nullable = false)]
    pub delta: Option<String>,
    /// text-delta: the new text; finish: the whole text.
    #[schema(nullable = false)]
    pub text: Option<String>,
    #[schema(nullable = false)]
    pub tool_call_id: Option<String>,
    #[schema(nullable = false)]
    pub tool_name: Option<String>,
    /// tool-call and tool-result: the tool's arguments.
    pub args: Option<Value>,
    /// tool-result: the tool's result.
    pub result: Option<Value>,
    /// tool-result: present (`true`) when the tool failed.
    #[schema(nullable = false)]
    pub is_error: Option<bool>,
    /// object-delta: the object so far.
    pub object: Option<Value>,
    #[schema(nullable = false)]
    pub finish_reason: Option<FinishReason>,
    #[schema(nullable = false)]
    pub usage: Option<Usage>,
    /// error: what went wrong.
    #[schema(nullable = false)]
    pub error: Option<String>,
    /// error: the row of the error table (a provider's failure keeps its kind).
    #[schema(nullable = false)]
    pub code: Option<crate::error::Code>,
}

/// The kind of an object stream event.
#[derive(ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ObjectEventType {
    PartialObject,
    Object,
    Finish,
    Error,
}

/// An event of POST /agents/{id}/stream-object.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectEvent {
    #[serde(rename = "type")]
    pub kind: ObjectEventType,
    /// partial-object: the object so far; object: the validated object.
    pub object: Option<Value>,
    #[schema(nullable = false)]
    pub finish_reason: Option<FinishReason>,
    #[schema(nullable = false)]
    pub usage: Option<Usage>,
    #[schema(nullable = false)]
    pub error: Option<String>,
    /// error: the row of the error table.
    #[schema(nullable = false)]
    pub code: Option<crate::error::Code>,
}

/// The kind of a UI message stream chunk.
#[derive(ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum UiMessageChunkType {
    Start,
    StartStep,
    TextStart,
    TextDelta,
    TextEnd,
    ToolInputStart,
    ToolInputAvailable,
    ToolOutputAvailable,
    ToolOutputError,
    FinishStep,
    Finish,
    Error,
}

/// A chunk of the AI SDK UI message stream protocol v1 (POST /agents/{id}/chat).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UiMessageChunk {
    #[serde(rename = "type")]
    pub kind: UiMessageChunkType,
    /// start: the assistant message's id.
    #[schema(nullable = false)]
    pub message_id: Option<String>,
    /// text-start, text-delta, text-end: the text part's id.
    #[schema(nullable = false)]
    pub id: Option<String>,
    /// text-delta: the new text.
    #[schema(nullable = false)]
    pub delta: Option<String>,
    #[schema(nullable = false)]
    pub tool_call_id: Option<String>,
    #[schema(nullable = false)]
    pub tool_name: Option<String>,
    /// tool-input-available: the tool's arguments.
    pub input: Option<Value>,
    /// tool-output-available: the tool's result.
    pub output: Option<Value>,
    /// tool-output-error and error: what went wrong.
    #[schema(nullable = false)]
    pub error_text: Option<String>,
    /// finish: `finishReason` and `usage`.
    #[schema(nullable = false, value_type = Option<Object>)]
    pub message_metadata: Option<Value>,
}

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

    /// Every row of the access table is documented, protected exactly when the row is.
    #[test]
    fn every_builtin_route_is_documented_with_its_access() {
        let doc = document();
        for r in BUILTIN_ROUTES {
            let path = doc_path(r.path);
            let mut item = doc
                .paths
                .paths
                .get(&path)
                .unwrap_or_else(|| panic!("{} {path} is not documented", r.method))
                .clone();
            let op = operations_mut(&mut item)
                .find(|(m, _)| *m == r.method)
                .map(|(_, op)| op.clone())
                .unwrap_or_else(|| panic!("{} {path} is not documented", r.method));
            assert_eq!(
                op.security.is_some(),
                r.access == Access::Protected,
                "{} {path}",
                r.method
            );
        }
        let documented: usize = doc
            .paths
            .paths
            .values()
            .map(|item| operations_mut(&mut item.clone()).count())
            .sum();
        assert_eq!(documented, BUILTIN_ROUTES.len(), "documented operations");
    }
}
