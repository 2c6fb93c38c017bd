//! The built-in routes, one row each: which needs a token (the one place where that is decided),
//! and which rows of the error table it may answer (the one place where that is declared).
//!
//! Every route the server registers in [`crate::configure`] has exactly one row here, public or
//! protected, those of the front ends mounted beside the HTTP API (MCP, A2A, the console) too;
//! the protected rows are spec section 5's default protected set. The *sensitive* rows are public
//! by default (as the spec requires) but read or change executions, memory or logs: strict mode
//! (`AGENTRY_AUTH_STRICT=1`) protects them too. A test of `agentry-server` (which mounts every
//! front end) registers the real routes, lists them from the router and fails on any route
//! without a row (or a row without a route), so a new route cannot slip past authentication
//! unnoticed.
//!
//! A row's failures are the codes its handler (and the use cases it calls) may answer; the ones
//! that follow from what the route is are not written in the row but derived from it
//! ([`BuiltinRoute::failures`]): any route may answer `invalid_request` (intake refuses the NUL
//! character in a path or query) and, but the probes, `host_not_allowed` (the host guard), a
//! protected one, or a sensitive one in strict mode, the 401s, one that changes something the
//! cross-site 403, one with a JSON body its 408, 413 and 415.
//! `/doc`'s failure responses are generated from [`BuiltinRoute::failures`] and the table
//! (`openapi.rs`).

use std::sync::OnceLock;

use agentry_app::routes::{self, Route};
use agentry_auth::{Access, RoutePattern, RouteRules};

use crate::error::Code;

/// One built-in route: method, actix path pattern, access by default, whether strict mode
/// protects it, and the failures it may answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinRoute {
    pub method: &'static str,
    pub path: &'static str,
    /// The access of the spec's defaults.
    pub access: Access,
    /// It reads or changes executions, conversation memory or logs: protected in strict mode.
    pub sensitive: bool,
    /// It reads a JSON body (required or optional) under the body limit and time-out, refusing
    /// one that is not JSON.
    pub json_body: bool,
    /// The rows of the error table its handler may answer beyond those that follow from the
    /// route's kind (see [`BuiltinRoute::failures`]).
    pub answers: &'static [Code],
}

/// The 401s of the authentication middleware (and of strict mode's policy).
pub const UNAUTHORIZED: [Code; 3] = [
    Code::AuthenticationRequired,
    Code::InvalidToken,
    Code::TokenExpired,
];

/// What reading a JSON body may answer besides `invalid_request`.
const BODY: [Code; 3] = [
    Code::RequestTimeout,
    Code::PayloadTooLarge,
    Code::UnsupportedMediaType,
];

impl BuiltinRoute {
    /// The route's access in strict mode (`strict`) or by the spec's defaults.
    pub fn access_in(&self, strict: bool) -> Access {
        if strict && self.sensitive {
            Access::Protected
        } else {
            self.access
        }
    }

    /// The path with every `{param}` replaced by `x`: a path the route serves.
    pub fn example_path(&self) -> String {
        example_path(self.path)
    }

    /// The route reads a JSON body.
    const fn with_json_body(mut self) -> Self {
        self.json_body = true;
        self
    }

    /// Whether `code` follows from what the route is, whatever its handler does.
    fn by_rule(&self, code: Code) -> bool {
        match code {
            // Intake refuses the NUL character in any path or query parameter; a path
            // parameter that does not decode is refused too.
            Code::InvalidRequest => true,
            c if UNAUTHORIZED.contains(&c) => self.access == Access::Protected || self.sensitive,
            // The host guard (`hosts.rs`) on every route but the probes.
            Code::HostNotAllowed => !crate::health::PROBES.contains(&self.path),
            // The cross-site guard (`origin.rs`) on every method that changes something.
            Code::Forbidden => self.method != "GET",
            c if BODY.contains(&c) => self.json_body,
            _ => false,
        }
    }

    /// Every row of the error table the route may answer, in the table's order: its own
    /// ([`BuiltinRoute::answers`]) and those that follow from its kind.
    pub fn failures(&self) -> Vec<Code> {
        Code::ALL
            .iter()
            .copied()
            .filter(|c| self.by_rule(*c) || self.answers.contains(c))
            .collect()
    }
}

/// An actix path pattern with every `{param}` replaced by `x` (`/` for the root).
pub fn example_path(pattern: &str) -> String {
    let path: Vec<&str> = pattern
        .split('/')
        .map(|s| if s.starts_with('{') { "x" } else { s })
        .collect();
    match path.join("/") {
        p if p.is_empty() => "/".to_owned(),
        p => p,
    }
}

const fn row(
    route: Route,
    access: Access,
    sensitive: bool,
    answers: &'static [Code],
) -> BuiltinRoute {
    BuiltinRoute {
        method: route.method,
        path: route.path,
        access,
        sensitive,
        json_body: false,
        answers,
    }
}

const fn public(route: Route, answers: &'static [Code]) -> BuiltinRoute {
    row(route, Access::Public, false, answers)
}

const fn protected(route: Route, answers: &'static [Code]) -> BuiltinRoute {
    row(route, Access::Protected, false, answers)
}

/// Public by the spec's defaults, protected in strict mode.
const fn sensitive(route: Route, answers: &'static [Code]) -> BuiltinRoute {
    row(route, Access::Public, true, answers)
}

/// Every built-in route.
pub const BUILTIN_ROUTES: &[BuiltinRoute] = {
    use Code::*;
    // An object generation: an unknown agent, then what generating may answer once the body
    // is accepted (the streams answer these as their last event instead).
    const OBJECT: [Code; 10] = [
        AgentNotFound,
        ClientClosedRequest,
        UnsatisfiableSchema,
        GenerationFailed,
        ModelRefused,
        ModelUnauthorized,
        ModelUnavailable,
        ModelRateLimited,
        ModelTimedOut,
        DatabaseUnavailable,
    ];
    // A generation that may be a durable run: its start (a `runId` refused or taken, a server
    // that drains) and its read.
    const DURABLE_GENERATION: [Code; 14] = [
        InvalidExecutionId,
        AgentNotFound,
        ExecutionExists,
        ClientClosedRequest,
        GenerationFailed,
        ModelRefused,
        ModelUnauthorized,
        ModelUnavailable,
        ModelRateLimited,
        ModelTimedOut,
        Internal,
        ExecutionContinuesElsewhere,
        ServerShuttingDown,
        DatabaseUnavailable,
    ];
    const DURABLE_STREAM: [Code; 6] = [
        InvalidExecutionId,
        AgentNotFound,
        ExecutionExists,
        Internal,
        ServerShuttingDown,
        DatabaseUnavailable,
    ];
    // Reading a run: strict mode's ownership rule, then the store.
    const READ_RUN: [Code; 5] = [
        Forbidden,
        AgentNotFound,
        RunNotFound,
        Internal,
        DatabaseUnavailable,
    ];
    // Reading an execution (of a workflow): strict mode's ownership rule, then the store.
    const READ: [Code; 5] = [
        Forbidden,
        WorkflowNotFound,
        ExecutionNotFound,
        Internal,
        DatabaseUnavailable,
    ];
    &[
        // Agents.
        public(routes::LIST_AGENTS, &[]),
        public(routes::GET_AGENT, &[AgentNotFound]),
        protected(routes::GENERATE_TEXT, &DURABLE_GENERATION).with_json_body(),
        protected(routes::STREAM_TEXT, &DURABLE_STREAM).with_json_body(),
        protected(routes::GENERATE_OBJECT, &OBJECT).with_json_body(),
        protected(routes::STREAM_OBJECT, &[AgentNotFound]).with_json_body(),
        // Not in the default protected set (spec section 5, rule 3).
        // A chat message that answers tool approvals continues their run (like the approval
        // route).
        sensitive(
            routes::CHAT,
            &[
                InvalidExecutionId,
                AgentNotFound,
                RunNotFound,
                ApprovalNotFound,
                ExecutionExists,
                ApprovalNotPending,
                Internal,
                ServerShuttingDown,
                DatabaseUnavailable,
            ],
        )
        .with_json_body(),
        // Working memory (extensions.md): like conversation memory, protected in strict mode;
        // whose memory the policy decides in every mode.
        sensitive(
            routes::GET_WORKING_MEMORY,
            &[
                AgentNotFound,
                NoWorkingMemory,
                Forbidden,
                Internal,
                DatabaseUnavailable,
            ],
        ),
        sensitive(
            routes::SET_WORKING_MEMORY,
            &[
                AgentNotFound,
                NoWorkingMemory,
                Internal,
                DatabaseUnavailable,
            ],
        )
        .with_json_body(),
        // Token usage: a user's, like their memory.
        sensitive(
            routes::AGENT_USAGE,
            &[AgentNotFound, Forbidden, Internal, DatabaseUnavailable],
        ),
        // Durable agent runs (extensions.md): read like executions, cancelled like them, an
        // approval answered like a resume.
        sensitive(
            routes::LIST_AGENT_RUNS,
            &[AgentNotFound, Internal, DatabaseUnavailable],
        ),
        sensitive(routes::LIST_ALL_RUNS, &[Internal, DatabaseUnavailable]),
        sensitive(routes::GET_RUN, &READ_RUN),
        // Live scores of an agent's generations (issue 38): read like its runs.
        sensitive(
            routes::LIST_AGENT_SCORES,
            &[AgentNotFound, Internal, DatabaseUnavailable],
        ),
        sensitive(routes::ATTACH_RUN, &READ_RUN),
        sensitive(
            routes::RESUME_CHAT,
            &[AgentNotFound, Internal, DatabaseUnavailable],
        ),
        protected(
            routes::CANCEL_RUN,
            &[
                NotCancellable,
                AgentNotFound,
                RunNotFound,
                Conflict,
                Internal,
                DatabaseUnavailable,
            ],
        )
        .with_json_body(),
        sensitive(
            routes::ANSWER_APPROVAL,
            &[
                AgentNotFound,
                RunNotFound,
                ApprovalNotFound,
                ApprovalNotPending,
                Conflict,
                Internal,
                ServerShuttingDown,
                DatabaseUnavailable,
            ],
        )
        .with_json_body(),
        // Workflows.
        public(routes::LIST_WORKFLOWS, &[]),
        public(
            routes::GET_WORKFLOW,
            &[WorkflowNotFound, Internal, DatabaseUnavailable],
        ),
        // Execute and resume wait for the run: a failure after its start names the execution
        // (`X-Execution-Id`, documented for the rows that may answer `execution_failed`).
        protected(
            routes::EXECUTE,
            &[
                InvalidInput,
                InvalidExecutionId,
                WorkflowNotFound,
                ExecutionExists,
                ExecutionFailed,
                Internal,
                ExecutionContinuesElsewhere,
                ServerShuttingDown,
                DatabaseUnavailable,
            ],
        )
        .with_json_body(),
        protected(
            routes::STREAM,
            &[
                InvalidInput,
                InvalidExecutionId,
                WorkflowNotFound,
                ExecutionExists,
                Internal,
                ServerShuttingDown,
                DatabaseUnavailable,
            ],
        )
        .with_json_body(),
        // Not in the default protected set (spec section 5, rules 1 and 3): a host guards them
        // with `protected_route("POST /workflows/*")` or AGENTRY_PROTECTED_ROUTES.
        sensitive(
            routes::SUSPEND,
            &[
                NotSuspendable,
                WorkflowNotFound,
                ExecutionNotFound,
                Conflict,
                Internal,
                DatabaseUnavailable,
            ],
        )
        .with_json_body(),
        sensitive(
            routes::RESUME,
            &[
                InvalidResumeData,
                UnknownStep,
                WorkflowNotFound,
                ExecutionNotFound,
                ExecutionNotSuspended,
                Conflict,
                VersionUnavailable,
                ExecutionFailed,
                Internal,
                ExecutionContinuesElsewhere,
                ServerShuttingDown,
                DatabaseUnavailable,
            ],
        )
        .with_json_body(),
        sensitive(routes::STATE, &READ),
        // Beyond the spec (extensions.md): public like state, protected in strict mode; cancel
        // is protected like execute.
        sensitive(routes::ATTACH, &READ),
        sensitive(
            routes::LIST_EXECUTIONS,
            &[WorkflowNotFound, Internal, DatabaseUnavailable],
        ),
        protected(
            routes::CANCEL,
            &[
                NotCancellable,
                WorkflowNotFound,
                ExecutionNotFound,
                Conflict,
                Internal,
                DatabaseUnavailable,
            ],
        )
        .with_json_body(),
        // The workflow operations (beyond the spec, extensions.md): an event to one execution
        // is guarded like resume; an event by key, retry and fork are protected like execute.
        sensitive(
            routes::DELIVER_EVENT,
            &[
                InvalidEvent,
                WorkflowNotFound,
                ExecutionNotFound,
                EventNotFound,
                ExecutionEnded,
                MailboxFull,
                MailboxTooLarge,
                Conflict,
                VersionUnavailable,
                Internal,
                ServerShuttingDown,
                DatabaseUnavailable,
            ],
        )
        .with_json_body(),
        protected(
            routes::SEND_EVENT,
            &[
                InvalidEvent,
                EventNotFound,
                TooManyEvents,
                Internal,
                DatabaseUnavailable,
            ],
        )
        .with_json_body(),
        protected(
            routes::SEND_CLOUD_EVENT,
            &[InvalidEvent, TooManyEvents, Internal, DatabaseUnavailable],
        )
        .with_json_body(),
        protected(
            routes::RETRY,
            &[
                NotRetryable,
                WorkflowNotFound,
                ExecutionNotFound,
                Conflict,
                VersionUnavailable,
                ExecutionFailed,
                Internal,
                ExecutionContinuesElsewhere,
                ServerShuttingDown,
                DatabaseUnavailable,
            ],
        ),
        protected(
            routes::FORK,
            &[
                InvalidInput,
                InvalidExecutionId,
                UnknownStep,
                NotForkable,
                WorkflowNotFound,
                ExecutionNotFound,
                ExecutionExists,
                ExecutionFailed,
                Internal,
                ExecutionContinuesElsewhere,
                ServerShuttingDown,
                DatabaseUnavailable,
            ],
        )
        .with_json_body(),
        // Executions across workflows (beyond the spec, for the console): like the
        // per-workflow list and state.
        sensitive(
            routes::LIST_ALL_EXECUTIONS,
            &[WorkflowNotFound, Internal, DatabaseUnavailable],
        ),
        sensitive(
            routes::FIND_EXECUTION,
            &[Forbidden, ExecutionNotFound, Internal, DatabaseUnavailable],
        ),
        sensitive(routes::COUNT_EXECUTIONS, &[Internal, DatabaseUnavailable]),
        // Queues (extensions.md): read like the executions list (protected in strict mode,
        // where a user's counts are of their own executions).
        sensitive(routes::LIST_QUEUES, &[Internal, DatabaseUnavailable]),
        sensitive(
            routes::GET_QUEUE,
            &[QueueNotFound, Internal, DatabaseUnavailable],
        ),
        // Schedules (extensions.md): changed like execute (protected), read like the
        // executions list (protected in strict mode, where another user's is not found).
        sensitive(routes::LIST_SCHEDULES, &[Internal, DatabaseUnavailable]),
        protected(
            routes::CREATE_SCHEDULE,
            &[
                InvalidSchedule,
                ScheduleExists,
                ScheduleLimit,
                Internal,
                DatabaseUnavailable,
            ],
        )
        .with_json_body(),
        sensitive(
            routes::GET_SCHEDULE,
            &[ScheduleNotFound, Internal, DatabaseUnavailable],
        ),
        protected(
            routes::DEPLOY_DEFINITION,
            &[
                InvalidDefinition,
                DefinitionConflict,
                PayloadTooLarge,
                RequestTimeout,
                UnsupportedMediaType,
                Internal,
                DatabaseUnavailable,
            ],
        ),
        protected(
            routes::GET_DEFINITION,
            &[DefinitionNotFound, Forbidden, Internal, DatabaseUnavailable],
        ),
        protected(
            routes::DELETE_DEFINITION,
            &[
                DefinitionNotFound,
                DefinitionInUse,
                Internal,
                DatabaseUnavailable,
            ],
        ),
        protected(
            routes::DELETE_SCHEDULE,
            &[ScheduleNotFound, Internal, DatabaseUnavailable],
        ),
        protected(
            routes::PAUSE_SCHEDULE,
            &[ScheduleNotFound, Conflict, Internal, DatabaseUnavailable],
        ),
        protected(
            routes::UNPAUSE_SCHEDULE,
            &[ScheduleNotFound, Conflict, Internal, DatabaseUnavailable],
        ),
        // A fire's start: what a start may answer (the workflow or its input may have changed
        // since the schedule was made).
        protected(
            routes::TRIGGER_SCHEDULE,
            &[
                InvalidInput,
                InvalidExecutionId,
                WorkflowNotFound,
                ScheduleNotFound,
                ExecutionExists,
                Conflict,
                Internal,
                ServerShuttingDown,
                DatabaseUnavailable,
            ],
        ),
        protected(
            routes::BACKFILL_SCHEDULE,
            &[
                InvalidInput,
                InvalidExecutionId,
                InvalidBackfill,
                WorkflowNotFound,
                ScheduleNotFound,
                ExecutionExists,
                Conflict,
                Internal,
                ServerShuttingDown,
                DatabaseUnavailable,
            ],
        )
        .with_json_body(),
        // What the server is (public, like /doc), and whom a token stands for (protected: a
        // client checks its token with it).
        public(Route::new("GET", "/api/info"), &[]),
        public(Route::new("GET", "/healthz"), &[]),
        // Not ready is its own 503 (`Readiness`, outside the envelope), written in its handler's
        // path block.
        public(Route::new("GET", "/readyz"), &[]),
        protected(Route::new("GET", "/api/me"), &[]),
        // Other built-in routes (spec section 4): public; WebSockets are unauthenticated
        // (rule 2).
        public(Route::new("GET", "/"), &[]),
        sensitive(Route::new("GET", "/api/logs"), &[Forbidden]),
        // MCP (Streamable HTTP): protected like the routes that run agents and workflows. Its
        // body is rmcp's to read (a slow one is a 400, not a 408); a body that is not one
        // JSON-RPC message is a 400 with its JSON-RPC error (`McpBadRequest`), written in its
        // path block.
        protected(
            Route::new("POST", "/mcp"),
            &[
                McpSessionNotFound,
                NotAcceptable,
                PayloadTooLarge,
                UnsupportedMediaType,
                Internal,
                McpSessionLimit,
            ],
        ),
        protected(
            Route::new("GET", "/mcp"),
            &[
                McpSessionNotFound,
                MethodNotAllowed,
                NotAcceptable,
                Internal,
            ],
        ),
        protected(
            Route::new("DELETE", "/mcp"),
            &[McpSessionNotFound, MethodNotAllowed, Internal],
        ),
        // A2A (extensions.md): the card is public (a client reads it before it has a token);
        // the JSON-RPC endpoint runs agents, protected like execute. Its JSON-RPC errors are
        // answered with 200 (the SDKs read only those), their `data` naming the table's code.
        public(
            Route::new("GET", "/a2a/{id}/.well-known/agent-card.json"),
            &[AgentNotFound],
        ),
        protected(Route::new("POST", "/a2a/{id}"), &[AgentNotFound, Internal]).with_json_body(),
        // Prometheus metrics: public by default (counts, no execution data), like the spec's
        // logs; a 404 when they are served on their own address.
        public(Route::new("GET", "/metrics"), &[RouteNotFound]),
        // The WebSockets check the origin before the upgrade, as the cross-site guard does.
        sensitive(Route::new("GET", "/ws/logs"), &[Forbidden]),
        sensitive(
            Route::new("GET", "/ws/executions/{execution_id}"),
            &[Forbidden, Internal, DatabaseUnavailable],
        ),
        // The OpenAPI document and the API explorer: Swagger UI's page (`/ui`, and `/ui/`)
        // and its files.
        public(Route::new("GET", "/doc"), &[]),
        public(Route::new("GET", "/ui"), &[]),
        public(Route::new("GET", "/ui/{tail:.*}"), &[RouteNotFound]),
        // The operator console's pages and files: public; its data comes through the API.
        public(Route::new("GET", "/console"), &[]),
        public(Route::new("GET", "/console/{tail:.*}"), &[RouteNotFound]),
    ]
};

/// Every row with its path parsed as a pattern, once.
fn patterns() -> &'static [(BuiltinRoute, RoutePattern)] {
    static PATTERNS: OnceLock<Vec<(BuiltinRoute, RoutePattern)>> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        BUILTIN_ROUTES
            .iter()
            .map(|r| {
                let p = RoutePattern::parse(&format!("{} {}", r.method, r.path))
                    .expect("built-in route patterns are valid");
                (*r, p)
            })
            .collect()
    })
}

/// The rules of the built-in routes: protected rows (and, in strict mode, sensitive ones) as
/// protected patterns, public rows as public-by-default patterns (they stay public when a host
/// makes everything else private).
pub fn builtin_rules(strict: bool) -> RouteRules {
    patterns().iter().fold(RouteRules::new(), |rules, (r, p)| {
        match r.access_in(strict) {
            Access::Protected => rules.protected(p.clone()),
            Access::Public => rules.public_by_default(p.clone()),
        }
    })
}

/// The sensitive built-in routes that `rules` leave open to anyone (`METHOD /path`), for the
/// warning logged when authentication is on without strict mode.
pub fn open_sensitive_routes(rules: &RouteRules) -> Vec<String> {
    BUILTIN_ROUTES
        .iter()
        .filter(|r| r.sensitive && rules.access(r.method, &r.example_path()) == Access::Public)
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

/// The methods the built-in routes serve on `path` (for a 405's `Allow`).
pub fn allowed_methods(path: &str) -> Vec<&'static str> {
    patterns()
        .iter()
        .filter(|(r, p)| p.matches(r.method, path))
        .map(|(r, _)| r.method)
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// A row declares only what its kind does not already give (nothing is written twice), each
    /// code once; a route that reads a JSON body changes something.
    #[test]
    fn rows_declare_only_their_own_failures() {
        for r in BUILTIN_ROUTES {
            let mut seen = BTreeSet::new();
            for code in r.answers {
                assert!(
                    !r.by_rule(*code),
                    "{} {} declares {}, which follows from its kind",
                    r.method,
                    r.path,
                    code.as_str()
                );
                assert!(seen.insert(code.as_str()), "{r:?} lists {code:?} twice");
            }
            assert!(!(r.json_body && r.method == "GET"), "{r:?}");
            let failures = r.failures();
            assert!(failures.contains(&Code::InvalidRequest), "{r:?}");
            assert_eq!(
                failures.contains(&Code::AuthenticationRequired),
                r.access == Access::Protected || r.sensitive,
                "{r:?}"
            );
        }
    }

    #[test]
    fn the_protected_set_is_the_spec_default() {
        let protected: BTreeSet<_> = BUILTIN_ROUTES
            .iter()
            .filter(|r| r.access == Access::Protected)
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        let spec: BTreeSet<_> = [
            "POST /agents/{id}/text",
            "POST /agents/{id}/stream",
            "POST /agents/{id}/object",
            "POST /agents/{id}/stream-object",
            "POST /workflows/{id}/execute",
            "POST /workflows/{id}/stream",
            // extensions.md: cancel, protected by default.
            "POST /workflows/{id}/executions/{execution_id}/cancel",
            "POST /agents/{id}/runs/{run_id}/cancel",
            // extensions.md (workflow operations): an event by key, retry and fork.
            "POST /events/{name}",
            // extensions.md (definitions): a CloudEvent.
            "POST /events",
            "POST /workflows/{id}/executions/{execution_id}/retry",
            "POST /workflows/{id}/executions/{execution_id}/fork",
            // extensions.md (definitions): deployed definitions, admin-only.
            "PUT /definitions/workflows/{name}",
            "GET /definitions/workflows/{name}",
            "DELETE /definitions/workflows/{name}",
            // Whom a token stands for: protected, so that a client can check its token.
            "GET /api/me",
            // extensions.md: schedules are changed like execute.
            "POST /schedules",
            "DELETE /schedules/{id}",
            "POST /schedules/{id}/pause",
            "POST /schedules/{id}/unpause",
            "POST /schedules/{id}/trigger",
            "POST /schedules/{id}/backfill",
            // A2A: it runs agents.
            "POST /a2a/{id}",
            // MCP: it runs agents and workflows.
            "POST /mcp",
            "GET /mcp",
            "DELETE /mcp",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        assert_eq!(protected, spec);
        let rules = builtin_rules(false);
        assert_eq!(rules.access("POST", "/agents/a/text"), Access::Protected);
        assert_eq!(rules.access("POST", "/agents/a/chat"), Access::Public);
        assert_eq!(
            rules.access("POST", "/workflows/w/executions/e/resume"),
            Access::Public
        );
    }

    #[test]
    fn strict_mode_protects_what_reads_or_changes_executions_memory_or_logs() {
        let sensitive: BTreeSet<_> = BUILTIN_ROUTES
            .iter()
            .filter(|r| r.sensitive)
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        let expected: BTreeSet<_> = [
            "POST /agents/{id}/chat",
            "POST /workflows/{id}/executions/{execution_id}/suspend",
            "POST /workflows/{id}/executions/{execution_id}/resume",
            // An event to one execution: like resume (extensions.md).
            "POST /workflows/{id}/executions/{execution_id}/events/{name}",
            "GET /workflows/{id}/executions/{execution_id}/state",
            "GET /workflows/{id}/executions/{execution_id}/stream",
            "GET /workflows/{id}/executions",
            "GET /executions",
            "GET /executions/{execution_id}",
            "GET /api/execution-counts",
            "GET /api/logs",
            "GET /ws/logs",
            "GET /ws/executions/{execution_id}",
            // Durable agent runs (extensions.md): like executions, the chat resume URL like /chat.
            "GET /agent-runs",
            "GET /agents/{id}/runs",
            "GET /agents/{id}/runs/{run_id}",
            "GET /agents/{id}/runs/{run_id}/stream",
            "GET /agents/{id}/chat/{conversation_id}/stream",
            "POST /agents/{id}/runs/{run_id}/approvals/{approval_id}",
            // Working memory (extensions.md): like memory.
            "GET /agents/{id}/memory/working",
            "PUT /agents/{id}/memory/working",
            // Token usage: a user's, like their memory.
            "GET /agents/{id}/usage",
            // Live scores: read like runs.
            "GET /agents/{id}/scores",
            // Schedules (extensions.md): read like the executions list.
            "GET /schedules",
            "GET /schedules/{id}",
            // Queues (extensions.md): like the executions list.
            "GET /queues",
            "GET /queues/{name}",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        assert_eq!(sensitive, expected);
        let strict = builtin_rules(true);
        for r in BUILTIN_ROUTES {
            let want = if r.sensitive {
                Access::Protected
            } else {
                r.access
            };
            assert_eq!(strict.access(r.method, &r.example_path()), want, "{r:?}");
        }
        assert!(open_sensitive_routes(&strict).is_empty());
        assert_eq!(
            open_sensitive_routes(&builtin_rules(false)).len(),
            expected.len()
        );
        let guarded =
            builtin_rules(false).protected(RoutePattern::parse("POST /workflows/*").unwrap());
        // Suspend, resume and the event to one execution.
        assert_eq!(open_sensitive_routes(&guarded).len(), expected.len() - 3);
    }
}
