//! The shape of a document as the DSL defines it (`dsl-reference.md`, 1.0.x), checked before
//! `model.rs` reads what agentry runs. This is agentry's own encoding of the reference's rules,
//! not a copy of the specification's JSON Schema.
//!
//! Each construct of the DSL is a [`Construct`] in the tables below: its properties, each with
//! the [`Shape`] its value must have, the required ones, and the few [`Rule`]s between them
//! (exactly one of, at least one of, ...). One walker ([`Walk::value`]) follows the tables
//! through a document. Objects are closed: an unknown property is a problem at its pointer,
//! naming it and the nearest allowed name ("did you mean"), else the allowed names. A task is
//! the one construct chosen by its content: its kind key (`call`, `do`, ...) and, for `call`,
//! the function called (`http`, `grpc`, ..., or a custom function whose `with` is free).
//!
//! Where the reference and the specification's JSON Schema (1.0.3) differ, this follows the
//! reference (`tests/shape_against_sdk.rs` holds the cases it tests):
//! - closed where the schema is open: the workflow itself, `emit.event` (only `with`),
//!   `catch.errors` and its error filter, a correlation, OAuth2's `request`, an MCP call's
//!   `with`, `transport` and `client`;
//! - stricter: `document.name` and `namespace` are lowercase RFC 1123 labels; OAuth2 and OIDC
//!   need `authority` and `grant` (or `use`); `emit.event.with`, `schedule` and an error filter
//!   are not empty; an A2A call needs `agentCard` or `server`; `tags` values are strings;
//! - looser: any string for an event's `source`, `time` and `dataschema` (a filter may match
//!   them with regular expressions); any value in `query` and in `run.workflow.input`; the
//!   `certificate` scheme, which the reference names without defining it, takes any object;
//!   `extend: extension`; an error filter's `detail` is also spelled `details` (the schema's);
//! - optional where the reference says required but gives a default: `schema.format`,
//!   `mcp.protocolVersion`, `evaluate.language` and `evaluate.mode`.
//!
//! Bounded: at most [`MAX_PROBLEMS`] problems a document, the deepest first, no duplicates;
//! nothing is checked past [`MAX_DEPTH`] levels (that itself is a problem); free values
//! (`body`, `metadata`, a schema's `document`, ...) are not walked at all.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::Problem;

pub mod agent;

/// The most problems [`check`] reports for one document.
pub const MAX_PROBLEMS: usize = 20;
/// The deepest level (JSON pointer segments) [`check`] descends to.
pub const MAX_DEPTH: usize = 64;
/// The most problems collected before ranking (bounds the work on a document full of them).
const MAX_FOUND: usize = 400;
/// The most allowed names listed in one reason.
const MAX_LISTED: usize = 24;
/// The most characters of a value or name quoted in a reason.
const MAX_QUOTED: usize = 48;
/// Names longer than this get no "did you mean".
const MAX_SUGGESTED_LEN: usize = 64;
/// The largest edit distance at which an allowed name is suggested.
const MAX_DISTANCE: usize = 2;

/// The problems of `doc`'s shape (an already parsed document; `file` names it in each
/// problem); empty when it has none. At most [`MAX_PROBLEMS`], the most specific (deepest
/// pointer) first, no duplicates.
pub fn check(file: &str, doc: &Value) -> Vec<Problem> {
    let mut walk = Walk::default();
    walk.value(&Shape::Obj(&WORKFLOW), doc, "", 0);
    walk.ranked()
        .into_iter()
        .map(|(pointer, reason)| Problem::new(file, pointer, reason))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The vocabulary of the tables.

/// What a string must be.
#[derive(Clone, Copy)]
enum Text {
    /// Any string.
    Any,
    /// Not empty.
    NonEmpty,
    /// A runtime expression: `${ ... }`.
    Expr,
    /// A semantic version (semver.org 2.0).
    Semver,
    /// A lowercase RFC 1123 label: `a-z`, `0-9` and inner `-`, at most 63 characters.
    Label,
    /// A URI (template) with a scheme (`scheme://...`), or a runtime expression.
    Uri,
    /// A JSON pointer (RFC 6901), or a runtime expression.
    Pointer,
    /// An ISO 8601 duration (`PT1M30S`), or a runtime expression.
    Duration,
    /// One of these values.
    OneOf(&'static [&'static str]),
}

/// What a value must be.
#[derive(Clone, Copy)]
enum Shape {
    /// Anything.
    Any,
    /// A string.
    Str(Text),
    /// An integer in `min..=max`.
    Int { min: i64, max: i64 },
    /// A boolean.
    Bool,
    /// Any object (a free map).
    Object,
    /// An object that is the given construct.
    Obj(&'static Construct),
    /// The first shape if the value is of its type, else the second.
    Either(&'static Shape, &'static Shape),
    /// A list whose items have the shape.
    List(&'static Shape),
    /// An object whose values have the shape (a name/value map).
    Map(&'static Shape),
    /// A list of one-entry objects, each one name to a value of the shape (task lists,
    /// switch cases, extensions); `noun` names an entry, `min` is the fewest items.
    Named {
        of: &'static Shape,
        noun: &'static str,
        min: usize,
    },
    /// A task: the construct chosen by its kind key (see [`task_construct`]).
    Task,
}

/// A rule between the properties of one object.
#[derive(Clone, Copy)]
enum Rule {
    /// Exactly one of these properties.
    ExactlyOne(&'static [&'static str]),
    /// At least one of these properties.
    AtLeastOne(&'static [&'static str]),
    /// The first property only alongside the second.
    OnlyWith(&'static str, &'static str),
    /// At least one property.
    NotEmpty,
    /// Either `use` (the name of a secret) alone, or these properties (all required).
    UseOr(&'static [&'static str]),
    /// `then` is required when `key` is `value`, and not allowed otherwise.
    WhenEquals {
        key: &'static str,
        value: &'static str,
        then: &'static str,
    },
}

/// One object of the DSL.
struct Construct {
    /// What it is called in reasons: "an HTTP call's `with`".
    what: &'static str,
    /// Its properties, each with the shape of its value.
    props: &'static [(&'static str, Shape)],
    /// The properties it must have.
    required: &'static [&'static str],
    /// The rules between its properties.
    rules: &'static [Rule],
    /// Whether properties beyond `props` are allowed.
    open: bool,
}

/// A closed construct without rules.
const fn closed(
    what: &'static str,
    props: &'static [(&'static str, Shape)],
    required: &'static [&'static str],
) -> Construct {
    Construct {
        what,
        props,
        required,
        rules: &[],
        open: false,
    }
}

// ---------------------------------------------------------------------------------------------
// Shapes used often.

const ANY: Shape = Shape::Any;
const STR: Shape = Shape::Str(Text::Any);
const EXPR: Shape = Shape::Str(Text::Expr);
const URI: Shape = Shape::Str(Text::Uri);
const INT: Shape = Shape::Int {
    min: i64::MIN,
    max: i64::MAX,
};
const BOOL: Shape = Shape::Bool;
const OBJECT: Shape = Shape::Object;
const STRINGS: Shape = Shape::List(&STR);
const STRING_MAP: Shape = Shape::Map(&STR);
/// A task list: `- name: task` items.
const TASKS: Shape = Shape::Named {
    of: &Shape::Task,
    noun: "task",
    min: 0,
};
/// A duration: an ISO 8601 string, a runtime expression, or an object of units.
const DURATION: Shape = Shape::Either(&Shape::Str(Text::Duration), &Shape::Obj(&DURATION_UNITS));
/// An endpoint: a URI (or runtime expression), or an object with one.
const ENDPOINT: Shape = Shape::Either(&URI, &Shape::Obj(&ENDPOINT_OBJECT));
/// A timeout: the name of one in `use.timeouts`, or one.
const TIMEOUT: Shape = Shape::Either(&STR, &Shape::Obj(&TIMEOUT_OBJECT));
/// An authentication policy where one may be named (`use:`) instead.
const AUTH_REF: Shape = Shape::Obj(&AUTHENTICATION_REF);
/// An external resource.
const RESOURCE: Shape = Shape::Obj(&EXTERNAL_RESOURCE);
/// A runtime expression or an object (`input.from`, `output.as`, `export.as`).
const EXPR_OR_OBJECT: Shape = Shape::Either(&STR, &OBJECT);
/// A runtime expression or a non-empty object (`set`, a2a `parameters`).
const EXPR_OR_DATA: Shape = Shape::Either(&STR, &Shape::Obj(&DATA));

// ---------------------------------------------------------------------------------------------
// The workflow and its reusable components.

static WORKFLOW: Construct = closed(
    "the workflow",
    &[
        ("document", Shape::Obj(&DOCUMENT)),
        ("input", Shape::Obj(&INPUT)),
        ("use", Shape::Obj(&USE)),
        ("do", TASKS),
        ("timeout", TIMEOUT),
        ("output", Shape::Obj(&OUTPUT)),
        ("schedule", Shape::Obj(&SCHEDULE)),
        ("evaluate", Shape::Obj(&EVALUATE)),
    ],
    &["document", "do"],
);

static DOCUMENT: Construct = closed(
    "`document`",
    &[
        ("dsl", Shape::Str(Text::Semver)),
        ("namespace", Shape::Str(Text::Label)),
        ("name", Shape::Str(Text::Label)),
        ("version", Shape::Str(Text::Semver)),
        ("title", STR),
        ("summary", STR),
        ("tags", STRING_MAP),
        ("metadata", OBJECT),
    ],
    &["dsl", "namespace", "name", "version"],
);

static EVALUATE: Construct = closed(
    "`evaluate`",
    &[
        ("language", STR),
        ("mode", Shape::Str(Text::OneOf(&["strict", "loose"]))),
    ],
    &[],
);

static USE: Construct = closed(
    "`use`",
    &[
        ("authentications", Shape::Map(&Shape::Obj(&AUTHENTICATION))),
        ("catalogs", Shape::Map(&Shape::Obj(&CATALOG))),
        ("errors", Shape::Map(&Shape::Obj(&ERROR))),
        (
            "extensions",
            Shape::Named {
                of: &Shape::Obj(&EXTENSION),
                noun: "extension",
                min: 0,
            },
        ),
        ("functions", Shape::Map(&Shape::Task)),
        ("retries", Shape::Map(&Shape::Obj(&RETRY))),
        ("secrets", STRINGS),
        ("timeouts", Shape::Map(&Shape::Obj(&TIMEOUT_OBJECT))),
    ],
    &[],
);

static CATALOG: Construct = closed("a catalog", &[("endpoint", ENDPOINT)], &["endpoint"]);

static EXTENSION: Construct = closed(
    "an extension",
    &[
        (
            "extend",
            Shape::Str(Text::OneOf(&[
                "call",
                "composite",
                "emit",
                "extension",
                "for",
                "listen",
                "raise",
                "run",
                "set",
                "switch",
                "try",
                "wait",
                "all",
            ])),
        ),
        ("when", STR),
        ("before", TASKS),
        ("after", TASKS),
    ],
    &["extend"],
);

static SCHEDULE: Construct = Construct {
    rules: &[Rule::NotEmpty],
    ..closed(
        "`schedule`",
        &[
            ("every", DURATION),
            ("cron", STR),
            ("after", DURATION),
            ("on", Shape::Obj(&EVENT_STRATEGY)),
        ],
        &[],
    )
};

// ---------------------------------------------------------------------------------------------
// Data: input, output, export, schemas, durations, timeouts.

static INPUT: Construct = closed(
    "`input`",
    &[("schema", Shape::Obj(&SCHEMA)), ("from", EXPR_OR_OBJECT)],
    &[],
);

static OUTPUT: Construct = closed(
    "`output`",
    &[("schema", Shape::Obj(&SCHEMA)), ("as", EXPR_OR_OBJECT)],
    &[],
);

static EXPORT: Construct = closed(
    "`export`",
    &[("schema", Shape::Obj(&SCHEMA)), ("as", EXPR_OR_OBJECT)],
    &[],
);

static SCHEMA: Construct = Construct {
    rules: &[Rule::ExactlyOne(&["document", "resource"])],
    ..closed(
        "a schema",
        &[("format", STR), ("document", ANY), ("resource", RESOURCE)],
        &[],
    )
};

static TIMEOUT_OBJECT: Construct = closed("a timeout", &[("after", DURATION)], &["after"]);

static DURATION_UNITS: Construct = Construct {
    rules: &[Rule::NotEmpty],
    ..closed(
        "a duration",
        &[
            ("days", INT),
            ("hours", INT),
            ("minutes", INT),
            ("seconds", INT),
            ("milliseconds", INT),
        ],
        &[],
    )
};

/// A free object with at least one property.
static DATA: Construct = Construct {
    what: "this object",
    props: &[],
    required: &[],
    rules: &[Rule::NotEmpty],
    open: true,
};

// ---------------------------------------------------------------------------------------------
// Endpoints, resources and authentication.

static ENDPOINT_OBJECT: Construct = closed(
    "an endpoint",
    &[("uri", URI), ("authentication", AUTH_REF)],
    &["uri"],
);

static EXTERNAL_RESOURCE: Construct = closed(
    "an external resource",
    &[("name", STR), ("endpoint", ENDPOINT)],
    &["endpoint"],
);

/// The authentication schemes, each of which an authentication policy may name.
const SCHEMES: &[(&str, Shape)] = &[
    ("basic", Shape::Obj(&BASIC)),
    ("bearer", Shape::Obj(&BEARER)),
    // The reference names the scheme but defines none of its properties.
    ("certificate", OBJECT),
    ("digest", Shape::Obj(&DIGEST)),
    ("oauth2", Shape::Obj(&OAUTH2)),
    ("oidc", Shape::Obj(&OIDC)),
];

/// An authentication policy defined in `use.authentications`.
static AUTHENTICATION: Construct = Construct {
    rules: &[Rule::ExactlyOne(&[
        "basic",
        "bearer",
        "certificate",
        "digest",
        "oauth2",
        "oidc",
    ])],
    ..closed("an authentication policy", SCHEMES, &[])
};

/// An authentication policy where it is used: one, or the name of one (`use`).
static AUTHENTICATION_REF: Construct = Construct {
    rules: &[Rule::ExactlyOne(&[
        "use",
        "basic",
        "bearer",
        "certificate",
        "digest",
        "oauth2",
        "oidc",
    ])],
    ..closed(
        "an authentication policy",
        &[
            ("use", Shape::Str(Text::NonEmpty)),
            ("basic", Shape::Obj(&BASIC)),
            ("bearer", Shape::Obj(&BEARER)),
            ("certificate", OBJECT),
            ("digest", Shape::Obj(&DIGEST)),
            ("oauth2", Shape::Obj(&OAUTH2)),
            ("oidc", Shape::Obj(&OIDC)),
        ],
        &[],
    )
};

/// The name of a secret, in place of a scheme's properties.
const SECRET: (&str, Shape) = ("use", Shape::Str(Text::NonEmpty));

static BASIC: Construct = Construct {
    rules: &[Rule::UseOr(&["username", "password"])],
    ..closed(
        "a `basic` authentication",
        &[("username", STR), ("password", STR), SECRET],
        &[],
    )
};

static BEARER: Construct = Construct {
    rules: &[Rule::UseOr(&["token"])],
    ..closed("a `bearer` authentication", &[("token", STR), SECRET], &[])
};

static DIGEST: Construct = Construct {
    rules: &[Rule::UseOr(&["username", "password"])],
    ..closed(
        "a `digest` authentication",
        &[("username", STR), ("password", STR), SECRET],
        &[],
    )
};

const GRANTS: Shape = Shape::Str(Text::OneOf(&[
    "authorization_code",
    "client_credentials",
    "password",
    "refresh_token",
    "urn:ietf:params:oauth:grant-type:token-exchange",
]));

static OAUTH2: Construct = Construct {
    rules: &[Rule::UseOr(&["authority", "grant"])],
    ..closed(
        "an `oauth2` authentication",
        &[
            ("authority", URI),
            ("endpoints", Shape::Obj(&OAUTH2_ENDPOINTS)),
            ("grant", GRANTS),
            ("client", Shape::Obj(&OAUTH2_CLIENT)),
            ("request", Shape::Obj(&OAUTH2_REQUEST)),
            ("issuers", STRINGS),
            ("scopes", STRINGS),
            ("audiences", STRINGS),
            ("username", STR),
            ("password", STR),
            ("subject", Shape::Obj(&OAUTH2_TOKEN)),
            ("actor", Shape::Obj(&OAUTH2_TOKEN)),
            SECRET,
        ],
        &[],
    )
};

static OIDC: Construct = Construct {
    rules: &[Rule::UseOr(&["authority", "grant"])],
    ..closed(
        "an `oidc` authentication",
        &[
            ("authority", URI),
            ("grant", GRANTS),
            ("client", Shape::Obj(&OAUTH2_CLIENT)),
            ("request", Shape::Obj(&OAUTH2_REQUEST)),
            ("issuers", STRINGS),
            ("scopes", STRINGS),
            ("audiences", STRINGS),
            ("username", STR),
            ("password", STR),
            ("subject", Shape::Obj(&OAUTH2_TOKEN)),
            ("actor", Shape::Obj(&OAUTH2_TOKEN)),
            SECRET,
        ],
        &[],
    )
};

static OAUTH2_ENDPOINTS: Construct = closed(
    "an OAuth2 `endpoints`",
    &[("token", STR), ("revocation", STR), ("introspection", STR)],
    &[],
);

static OAUTH2_CLIENT: Construct = closed(
    "an OAuth2 `client`",
    &[
        ("id", STR),
        ("secret", STR),
        ("assertion", STR),
        (
            "authentication",
            Shape::Str(Text::OneOf(&[
                "client_secret_basic",
                "client_secret_post",
                "client_secret_jwt",
                "private_key_jwt",
                "none",
            ])),
        ),
    ],
    &[],
);

static OAUTH2_REQUEST: Construct = closed(
    "an OAuth2 `request`",
    &[(
        "encoding",
        Shape::Str(Text::OneOf(&[
            "application/x-www-form-urlencoded",
            "application/json",
        ])),
    )],
    &[],
);

static OAUTH2_TOKEN: Construct = closed(
    "an OAuth2 token",
    &[("token", STR), ("type", STR)],
    &["token", "type"],
);

// ---------------------------------------------------------------------------------------------
// Errors, retries, events.

static ERROR: Construct = closed(
    "an error",
    &[
        ("type", URI),
        ("status", INT),
        ("instance", Shape::Str(Text::Pointer)),
        ("title", STR),
        ("detail", STR),
    ],
    &["type", "status"],
);

static ERROR_FILTER: Construct = Construct {
    rules: &[Rule::NotEmpty],
    ..closed(
        "an error filter",
        &[
            ("type", STR),
            ("status", INT),
            ("instance", STR),
            ("title", STR),
            ("detail", STR),
            // The specification's schema spells it so.
            ("details", STR),
        ],
        &[],
    )
};

static RETRY: Construct = closed(
    "a retry policy",
    &[
        ("when", STR),
        ("exceptWhen", STR),
        ("delay", DURATION),
        ("backoff", Shape::Obj(&BACKOFF)),
        ("limit", Shape::Obj(&RETRY_LIMIT)),
        ("jitter", Shape::Obj(&JITTER)),
    ],
    &[],
);

static BACKOFF: Construct = Construct {
    rules: &[Rule::ExactlyOne(&["constant", "exponential", "linear"])],
    ..closed(
        "a backoff",
        &[
            ("constant", OBJECT),
            ("exponential", OBJECT),
            ("linear", OBJECT),
        ],
        &[],
    )
};

static RETRY_LIMIT: Construct = closed(
    "a retry `limit`",
    &[
        ("attempt", Shape::Obj(&RETRY_ATTEMPT)),
        ("duration", DURATION),
    ],
    &[],
);

static RETRY_ATTEMPT: Construct = closed(
    "a retry `limit.attempt`",
    &[("count", INT), ("duration", DURATION)],
    &[],
);

static JITTER: Construct = closed(
    "a `jitter`",
    &[("from", DURATION), ("to", DURATION)],
    &["from", "to"],
);

/// The properties of a CloudEvent the DSL names; others (extension attributes) are allowed.
const EVENT_PROPERTIES: &[(&str, Shape)] = &[
    ("id", STR),
    ("source", STR),
    ("type", STR),
    ("time", STR),
    ("subject", STR),
    ("datacontenttype", STR),
    ("dataschema", STR),
    ("data", ANY),
];

/// The event an `emit` task emits.
static EMITTED_EVENT: Construct = Construct {
    what: "an emitted event",
    props: EVENT_PROPERTIES,
    required: &["source", "type"],
    rules: &[],
    open: true,
};

/// The attributes an event filter matches.
static FILTERED_EVENT: Construct = Construct {
    what: "an event filter's `with`",
    props: EVENT_PROPERTIES,
    required: &[],
    rules: &[Rule::NotEmpty],
    open: true,
};

static EVENT_FILTER: Construct = closed(
    "an event filter",
    &[
        ("with", Shape::Obj(&FILTERED_EVENT)),
        ("correlate", Shape::Map(&Shape::Obj(&CORRELATION))),
    ],
    &["with"],
);

static CORRELATION: Construct = closed(
    "a correlation",
    &[("from", STR), ("expect", STR)],
    &["from"],
);

const EVENT_FILTERS: Shape = Shape::List(&Shape::Obj(&EVENT_FILTER));

/// The events to consume: `listen.to`, `schedule.on`.
static EVENT_STRATEGY: Construct = Construct {
    rules: &[
        Rule::ExactlyOne(&["all", "any", "one"]),
        Rule::OnlyWith("until", "any"),
    ],
    ..closed(
        "an event consumption strategy",
        &[
            ("all", EVENT_FILTERS),
            ("any", EVENT_FILTERS),
            ("one", Shape::Obj(&EVENT_FILTER)),
            ("until", Shape::Either(&STR, &Shape::Obj(&UNTIL_STRATEGY))),
        ],
        &[],
    )
};

/// The events that end an `any` strategy: a strategy with no `until` of its own.
static UNTIL_STRATEGY: Construct = Construct {
    rules: &[Rule::ExactlyOne(&["all", "any", "one"])],
    ..closed(
        "an `until` strategy (which has no `until` of its own)",
        &[
            ("all", EVENT_FILTERS),
            ("any", EVENT_FILTERS),
            ("one", Shape::Obj(&EVENT_FILTER)),
        ],
        &[],
    )
};

/// What runs for each event or message a subscription consumes.
static ITERATOR: Construct = closed(
    "a `foreach`",
    &[
        ("item", STR),
        ("at", STR),
        ("do", TASKS),
        ("output", Shape::Obj(&OUTPUT)),
        ("export", Shape::Obj(&EXPORT)),
    ],
    &[],
);

// ---------------------------------------------------------------------------------------------
// Tasks.

/// The properties every task may have, whatever its kind.
const COMMON: &[(&str, Shape)] = &[
    ("if", STR),
    ("input", Shape::Obj(&INPUT)),
    ("output", Shape::Obj(&OUTPUT)),
    ("export", Shape::Obj(&EXPORT)),
    ("timeout", TIMEOUT),
    ("then", STR),
    ("metadata", OBJECT),
];

/// The kinds of task, by the key that makes a task of that kind, each with its own
/// properties (`call` is [`CALL_FUNCTION`] until the function called is known: see
/// [`task_construct`]).
const KINDS: &[(&str, &Construct)] = &[
    ("call", &CALL_FUNCTION),
    ("do", &DO_TASK),
    ("emit", &EMIT_TASK),
    ("for", &FOR_TASK),
    ("fork", &FORK_TASK),
    ("listen", &LISTEN_TASK),
    ("raise", &RAISE_TASK),
    ("run", &RUN_TASK),
    ("set", &SET_TASK),
    ("switch", &SWITCH_TASK),
    ("try", &TRY_TASK),
    ("wait", &WAIT_TASK),
];

/// The functions every runtime has, by the name called.
const CALLS: &[(&str, &Construct)] = &[
    ("http", &CALL_HTTP),
    ("openapi", &CALL_OPENAPI),
    ("grpc", &CALL_GRPC),
    ("asyncapi", &CALL_ASYNCAPI),
    ("a2a", &CALL_A2A),
    ("mcp", &CALL_MCP),
];

/// A call of a custom function (`use.functions` or a catalog's): its `with` is free.
static CALL_FUNCTION: Construct = closed(
    "a `call` task",
    &[("call", STR), ("with", OBJECT)],
    &["call"],
);

static CALL_HTTP: Construct = closed(
    "a `call: http` task",
    &[("call", STR), ("with", Shape::Obj(&HTTP_WITH))],
    &["call", "with"],
);

const OUTPUT_FORMAT: Shape = Shape::Str(Text::OneOf(&["raw", "content", "response"]));

static HTTP_WITH: Construct = closed(
    "an HTTP call's `with`",
    &[
        ("method", STR),
        ("endpoint", ENDPOINT),
        ("headers", Shape::Either(&EXPR, &STRING_MAP)),
        ("body", ANY),
        ("query", Shape::Either(&EXPR, &OBJECT)),
        ("output", OUTPUT_FORMAT),
        ("redirect", BOOL),
    ],
    &["method", "endpoint"],
);

static CALL_OPENAPI: Construct = closed(
    "a `call: openapi` task",
    &[("call", STR), ("with", Shape::Obj(&OPENAPI_WITH))],
    &["call", "with"],
);

static OPENAPI_WITH: Construct = closed(
    "an OpenAPI call's `with`",
    &[
        ("document", RESOURCE),
        ("operationId", STR),
        ("parameters", OBJECT),
        ("authentication", AUTH_REF),
        ("output", OUTPUT_FORMAT),
        ("redirect", BOOL),
    ],
    &["document", "operationId"],
);

static CALL_GRPC: Construct = closed(
    "a `call: grpc` task",
    &[("call", STR), ("with", Shape::Obj(&GRPC_WITH))],
    &["call", "with"],
);

static GRPC_WITH: Construct = closed(
    "a gRPC call's `with`",
    &[
        ("proto", RESOURCE),
        ("service", Shape::Obj(&GRPC_SERVICE)),
        ("method", STR),
        ("arguments", OBJECT),
    ],
    &["proto", "service", "method"],
);

static GRPC_SERVICE: Construct = closed(
    "a gRPC call's `service`",
    &[
        ("name", STR),
        ("host", STR),
        ("port", Shape::Int { min: 0, max: 65535 }),
        ("authentication", AUTH_REF),
    ],
    &["name", "host"],
);

static CALL_ASYNCAPI: Construct = closed(
    "a `call: asyncapi` task",
    &[("call", STR), ("with", Shape::Obj(&ASYNCAPI_WITH))],
    &["call", "with"],
);

static ASYNCAPI_WITH: Construct = Construct {
    rules: &[
        Rule::ExactlyOne(&["operation", "channel"]),
        Rule::ExactlyOne(&["message", "subscription"]),
    ],
    ..closed(
        "an AsyncAPI call's `with`",
        &[
            ("document", RESOURCE),
            ("channel", STR),
            ("operation", STR),
            ("server", Shape::Obj(&ASYNCAPI_SERVER)),
            (
                "protocol",
                Shape::Str(Text::OneOf(&[
                    "amqp",
                    "amqp1",
                    "anypointmq",
                    "googlepubsub",
                    "http",
                    "ibmmq",
                    "jms",
                    "kafka",
                    "mercure",
                    "mqtt",
                    "mqtt5",
                    "nats",
                    "pulsar",
                    "redis",
                    "sns",
                    "solace",
                    "sqs",
                    "stomp",
                    "ws",
                ])),
            ),
            ("message", Shape::Obj(&ASYNCAPI_MESSAGE)),
            ("subscription", Shape::Obj(&ASYNCAPI_SUBSCRIPTION)),
            ("authentication", AUTH_REF),
        ],
        &["document"],
    )
};

static ASYNCAPI_SERVER: Construct = closed(
    "an AsyncAPI `server`",
    &[("name", STR), ("variables", OBJECT)],
    &["name"],
);

static ASYNCAPI_MESSAGE: Construct = closed(
    "an AsyncAPI `message`",
    &[("payload", OBJECT), ("headers", OBJECT)],
    &[],
);

static ASYNCAPI_SUBSCRIPTION: Construct = closed(
    "an AsyncAPI `subscription`",
    &[
        ("filter", EXPR),
        ("consume", Shape::Obj(&ASYNCAPI_CONSUME)),
        ("foreach", Shape::Obj(&ITERATOR)),
    ],
    &["consume"],
);

static ASYNCAPI_CONSUME: Construct = Construct {
    rules: &[Rule::ExactlyOne(&["amount", "while", "until"])],
    ..closed(
        "an AsyncAPI subscription's `consume`",
        &[
            ("amount", INT),
            ("for", DURATION),
            ("while", EXPR),
            ("until", EXPR),
        ],
        &[],
    )
};

static CALL_A2A: Construct = closed(
    "a `call: a2a` task",
    &[("call", STR), ("with", Shape::Obj(&A2A_WITH))],
    &["call", "with"],
);

static A2A_WITH: Construct = Construct {
    rules: &[Rule::AtLeastOne(&["agentCard", "server"])],
    ..closed(
        "an A2A call's `with`",
        &[
            (
                "method",
                Shape::Str(Text::OneOf(&[
                    "message/send",
                    "message/stream",
                    "tasks/get",
                    "tasks/list",
                    "tasks/cancel",
                    "tasks/resubscribe",
                    "tasks/pushNotificationConfig/set",
                    "tasks/pushNotificationConfig/get",
                    "tasks/pushNotificationConfig/list",
                    "tasks/pushNotificationConfig/delete",
                    "agent/getAuthenticatedExtendedCard",
                ])),
            ),
            ("agentCard", RESOURCE),
            ("server", ENDPOINT),
            ("parameters", EXPR_OR_DATA),
        ],
        &["method"],
    )
};

static CALL_MCP: Construct = closed(
    "a `call: mcp` task",
    &[("call", STR), ("with", Shape::Obj(&MCP_WITH))],
    &["call", "with"],
);

static MCP_WITH: Construct = closed(
    "an MCP call's `with`",
    &[
        ("protocolVersion", STR),
        (
            "method",
            Shape::Str(Text::OneOf(&[
                "tools/list",
                "tools/call",
                "prompts/list",
                "prompts/get",
                "resources/list",
                "resources/read",
                "resources/templates/list",
            ])),
        ),
        ("parameters", EXPR_OR_OBJECT),
        ("timeout", DURATION),
        ("transport", Shape::Obj(&MCP_TRANSPORT)),
        ("client", Shape::Obj(&MCP_CLIENT)),
    ],
    &["method", "transport"],
);

static MCP_TRANSPORT: Construct = Construct {
    rules: &[Rule::ExactlyOne(&["http", "stdio"])],
    ..closed(
        "an MCP `transport`",
        &[
            ("http", Shape::Obj(&MCP_HTTP)),
            ("stdio", Shape::Obj(&MCP_STDIO)),
            ("options", STRING_MAP),
        ],
        &[],
    )
};

static MCP_HTTP: Construct = closed(
    "an MCP HTTP transport",
    &[("endpoint", ENDPOINT), ("headers", STRING_MAP)],
    &["endpoint"],
);

static MCP_STDIO: Construct = closed(
    "an MCP STDIO transport",
    &[
        ("command", STR),
        ("arguments", STRINGS),
        ("environment", STRING_MAP),
    ],
    &["command"],
);

static MCP_CLIENT: Construct = closed(
    "an MCP `client`",
    &[("name", STR), ("version", STR)],
    &["name", "version"],
);

static DO_TASK: Construct = closed("a `do` task", &[("do", TASKS)], &["do"]);

static EMIT_TASK: Construct = closed("an `emit` task", &[("emit", Shape::Obj(&EMIT))], &["emit"]);

static EMIT: Construct = closed("`emit`", &[("event", Shape::Obj(&EMIT_EVENT))], &["event"]);

static EMIT_EVENT: Construct = closed(
    "`emit.event`",
    &[("with", Shape::Obj(&EMITTED_EVENT))],
    &["with"],
);

static FOR_TASK: Construct = closed(
    "a `for` task",
    &[("for", Shape::Obj(&FOR)), ("while", STR), ("do", TASKS)],
    &["for", "do"],
);

static FOR: Construct = closed("`for`", &[("each", STR), ("in", STR), ("at", STR)], &["in"]);

static FORK_TASK: Construct = closed("a `fork` task", &[("fork", Shape::Obj(&FORK))], &["fork"]);

static FORK: Construct = closed(
    "`fork`",
    &[("branches", TASKS), ("compete", BOOL)],
    &["branches"],
);

static LISTEN_TASK: Construct = closed(
    "a `listen` task",
    &[
        ("listen", Shape::Obj(&LISTEN)),
        ("foreach", Shape::Obj(&ITERATOR)),
    ],
    &["listen"],
);

static LISTEN: Construct = closed(
    "`listen`",
    &[
        ("to", Shape::Obj(&EVENT_STRATEGY)),
        (
            "read",
            Shape::Str(Text::OneOf(&["data", "envelope", "raw"])),
        ),
    ],
    &["to"],
);

static RAISE_TASK: Construct = closed(
    "a `raise` task",
    &[("raise", Shape::Obj(&RAISE))],
    &["raise"],
);

static RAISE: Construct = closed(
    "`raise`",
    &[("error", Shape::Either(&STR, &Shape::Obj(&ERROR)))],
    &["error"],
);

static RUN_TASK: Construct = closed("a `run` task", &[("run", Shape::Obj(&RUN))], &["run"]);

static RUN: Construct = Construct {
    rules: &[Rule::ExactlyOne(&[
        "container",
        "script",
        "shell",
        "workflow",
    ])],
    ..closed(
        "`run`",
        &[
            ("container", Shape::Obj(&CONTAINER)),
            ("script", Shape::Obj(&SCRIPT)),
            ("shell", Shape::Obj(&SHELL)),
            ("workflow", Shape::Obj(&SUBFLOW)),
            ("await", BOOL),
            (
                "return",
                Shape::Str(Text::OneOf(&["stdout", "stderr", "code", "all", "none"])),
            ),
        ],
        &[],
    )
};

static CONTAINER: Construct = closed(
    "a container",
    &[
        ("image", STR),
        ("name", STR),
        ("command", STR),
        ("ports", OBJECT),
        ("volumes", OBJECT),
        ("environment", OBJECT),
        ("stdin", STR),
        ("arguments", STRINGS),
        ("lifetime", Shape::Obj(&LIFETIME)),
        (
            "pullPolicy",
            Shape::Str(Text::OneOf(&["ifNotPresent", "always", "never"])),
        ),
    ],
    &["image"],
);

static LIFETIME: Construct = Construct {
    rules: &[Rule::WhenEquals {
        key: "cleanup",
        value: "eventually",
        then: "after",
    }],
    ..closed(
        "a container's `lifetime`",
        &[
            (
                "cleanup",
                Shape::Str(Text::OneOf(&["always", "never", "eventually"])),
            ),
            ("after", DURATION),
        ],
        &["cleanup"],
    )
};

static SCRIPT: Construct = Construct {
    rules: &[Rule::ExactlyOne(&["code", "source"])],
    ..closed(
        "a script",
        &[
            ("language", STR),
            ("code", STR),
            ("source", RESOURCE),
            ("stdin", STR),
            ("arguments", STRINGS),
            ("environment", OBJECT),
        ],
        &["language"],
    )
};

static SHELL: Construct = closed(
    "a shell command",
    &[
        ("command", STR),
        ("stdin", STR),
        ("arguments", STRINGS),
        ("environment", OBJECT),
    ],
    &["command"],
);

static SUBFLOW: Construct = closed(
    "a workflow to run",
    &[
        ("namespace", STR),
        ("name", STR),
        ("version", STR),
        ("input", ANY),
    ],
    &["namespace", "name", "version"],
);

static SET_TASK: Construct = closed("a `set` task", &[("set", EXPR_OR_DATA)], &["set"]);

static SWITCH_TASK: Construct = closed(
    "a `switch` task",
    &[(
        "switch",
        Shape::Named {
            of: &Shape::Obj(&SWITCH_CASE),
            noun: "switch case",
            min: 1,
        },
    )],
    &["switch"],
);

static SWITCH_CASE: Construct = closed("a switch case", &[("when", STR), ("then", STR)], &["then"]);

static TRY_TASK: Construct = closed(
    "a `try` task",
    &[("try", TASKS), ("catch", Shape::Obj(&CATCH))],
    &["try", "catch"],
);

static CATCH: Construct = closed(
    "`catch`",
    &[
        ("errors", Shape::Obj(&CATCH_ERRORS)),
        ("as", STR),
        ("when", STR),
        ("exceptWhen", STR),
        ("retry", Shape::Either(&STR, &Shape::Obj(&RETRY))),
        ("do", TASKS),
    ],
    &[],
);

static CATCH_ERRORS: Construct = closed(
    "`catch.errors`",
    &[("with", Shape::Obj(&ERROR_FILTER))],
    &[],
);

static WAIT_TASK: Construct = closed("a `wait` task", &[("wait", DURATION)], &["wait"]);

/// The construct of a task of kind `kind` (one of [`KINDS`]): for `call`, by the function
/// called (a custom function when it is none of [`CALLS`] or not a string).
fn task_construct(kind: &str, task: &Map<String, Value>) -> &'static Construct {
    if kind == "call" {
        let called = task.get("call").and_then(Value::as_str).unwrap_or("");
        return CALLS
            .iter()
            .find(|(name, _)| *name == called)
            .map_or(&CALL_FUNCTION, |(_, c)| c);
    }
    KINDS
        .iter()
        .find(|(name, _)| *name == kind)
        .map_or(&CALL_FUNCTION, |(_, c)| c)
}

// ---------------------------------------------------------------------------------------------
// The walker.

/// A walk through one document: the problems found so far.
#[derive(Default)]
struct Walk {
    found: Vec<(String, String)>,
    seen: HashSet<(String, String)>,
}

impl Walk {
    /// Records a problem (once).
    fn report(&mut self, pointer: &str, reason: String) {
        if self.found.len() >= MAX_FOUND {
            return;
        }
        let key = (pointer.to_owned(), reason);
        if self.seen.insert(key.clone()) {
            self.found.push(key);
        }
    }

    /// The problems, deepest pointer first (in document order among equals), at most
    /// [`MAX_PROBLEMS`].
    fn ranked(mut self) -> Vec<(String, String)> {
        self.found
            .sort_by_key(|(pointer, _)| std::cmp::Reverse(pointer.matches('/').count()));
        self.found.truncate(MAX_PROBLEMS);
        self.found
    }

    /// Checks `value`, at `at` (`depth` segments deep), against `shape`.
    fn value(&mut self, shape: &Shape, value: &Value, at: &str, depth: usize) {
        if self.found.len() >= MAX_FOUND {
            return;
        }
        if depth > MAX_DEPTH {
            self.report(
                at,
                format!("nested more than {MAX_DEPTH} levels deep: not checked further"),
            );
            return;
        }
        if !admits(shape, value) {
            let reason = format!("must be {}, not {}", expected(shape), describe(value));
            self.report(at, reason);
            return;
        }
        match shape {
            Shape::Any | Shape::Bool | Shape::Object => {}
            Shape::Str(text) => {
                if let Some(why) = value.as_str().and_then(|s| text_problem(*text, s)) {
                    self.report(at, why);
                }
            }
            Shape::Int { min, max } => match value.as_i64() {
                Some(n) if (*min..=*max).contains(&n) => {}
                Some(n) => self.report(at, format!("{n} is out of range ({min} to {max})")),
                None => self.report(at, format!("must be an integer, not {}", describe(value))),
            },
            Shape::Either(first, second) => {
                let chosen = if admits(first, value) { first } else { second };
                self.value(chosen, value, at, depth);
            }
            Shape::Obj(construct) => {
                if let Some(map) = value.as_object() {
                    self.object(construct, &[], map, at, depth);
                }
            }
            Shape::List(item) => {
                for (i, v) in value.as_array().into_iter().flatten().enumerate() {
                    self.value(item, v, &format!("{at}/{i}"), depth + 1);
                }
            }
            Shape::Map(item) => {
                for (k, v) in value.as_object().into_iter().flatten() {
                    self.value(item, v, &child(at, k), depth + 1);
                }
            }
            Shape::Named { of, noun, min } => {
                if let Some(items) = value.as_array() {
                    self.named(of, noun, *min, items, at, depth);
                }
            }
            Shape::Task => {
                if let Some(map) = value.as_object() {
                    self.task(map, at, depth);
                }
            }
        }
    }

    /// Checks a list of one-entry objects (`- name: value`).
    fn named(
        &mut self,
        of: &Shape,
        noun: &str,
        min: usize,
        items: &[Value],
        at: &str,
        depth: usize,
    ) {
        if items.len() < min {
            self.report(at, format!("needs at least {min} {noun}"));
        }
        for (i, item) in items.iter().enumerate() {
            let item_at = format!("{at}/{i}");
            let Some(entries) = item.as_object() else {
                let reason = format!(
                    "must be an object of one name to its {noun}, not {}",
                    describe(item)
                );
                self.report(&item_at, reason);
                continue;
            };
            let mut names = entries.keys();
            match (names.next(), names.next()) {
                (None, _) => self.report(
                    &item_at,
                    format!("holds no {noun}: each item is one name and its {noun}"),
                ),
                (Some(first), Some(second)) => self.report(
                    &child(&item_at, second),
                    format!(
                        "{noun} {} is in the same item as {noun} {}: each item holds exactly \
                         one {noun} (start each with its own `- `)",
                        code(second),
                        code(first)
                    ),
                ),
                _ => {}
            }
            for (name, v) in entries {
                self.value(of, v, &child(&item_at, name), depth + 2);
            }
        }
    }

    /// Checks a task: exactly one kind key, then the kind's construct with the common
    /// properties.
    fn task(&mut self, task: &Map<String, Value>, at: &str, depth: usize) {
        let present: Vec<&(&str, &Construct)> = KINDS
            .iter()
            .filter(|(kind, _)| task.contains_key(*kind))
            .collect();
        // A kind key that is a property of another present kind is that kind's (`for` has `do`).
        let kinds: Vec<&str> = present
            .iter()
            .filter(|(kind, _)| {
                !present
                    .iter()
                    .any(|(other, c)| other != kind && c.props.iter().any(|(n, _)| n == kind))
            })
            .map(|(kind, _)| *kind)
            .collect();
        match kinds.as_slice() {
            [kind] => self.object(task_construct(kind, task), COMMON, task, at, depth),
            [] => {
                let reason = format!(
                    "a task needs one of {}: it has none",
                    list(KINDS.iter().map(|(k, _)| code(k)), "or")
                );
                self.report(at, reason);
                let mut known: Vec<&str> = Vec::new();
                let every = COMMON.iter().chain(KINDS.iter().flat_map(|(_, c)| c.props));
                for (name, _) in every {
                    if !known.contains(name) {
                        known.push(name);
                    }
                }
                for key in task.keys().filter(|k| !known.contains(&k.as_str())) {
                    self.unknown(at, key, "a task", &known);
                }
            }
            [first, second, ..] => self.report(
                at,
                format!(
                    "a task is of exactly one kind: this one has both {} and {}",
                    code(first),
                    code(second)
                ),
            ),
        }
    }

    /// Checks an object against `construct` (plus `extra` properties, for tasks).
    fn object(
        &mut self,
        construct: &Construct,
        extra: &[(&'static str, Shape)],
        map: &Map<String, Value>,
        at: &str,
        depth: usize,
    ) {
        let props = || construct.props.iter().chain(extra.iter());
        for (key, v) in map {
            match props().find(|(name, _)| name == key) {
                Some((_, shape)) => self.value(shape, v, &child(at, key), depth + 1),
                None if construct.open => {}
                None => {
                    let known: Vec<&str> = props().map(|(name, _)| *name).collect();
                    self.unknown(at, key, construct.what, &known);
                }
            }
        }
        for name in construct.required.iter().filter(|n| !map.contains_key(**n)) {
            let reason = format!(
                "missing required property {} of {}",
                code(name),
                construct.what
            );
            self.report(at, reason);
        }
        for rule in construct.rules {
            if let Some(reason) = rule_problem(rule, map, construct.what) {
                self.report(at, reason);
            }
        }
    }

    /// Reports the unknown property `key` of the object at `at`.
    fn unknown(&mut self, at: &str, key: &str, what: &str, known: &[&str]) {
        let mut reason = format!("unknown property {} of {what}", code(key));
        if let Some(near) = nearest(key, known) {
            reason.push_str(&format!("; did you mean {}?", code(near)));
        } else if known.is_empty() {
            reason.push_str("; it has no properties");
        } else {
            reason.push_str(&format!(
                "; allowed: {}",
                list(known.iter().map(|k| code(k)), "and")
            ));
        }
        self.report(&child(at, key), reason);
    }
}

/// Why `map` breaks `rule`, if it does.
fn rule_problem(rule: &Rule, map: &Map<String, Value>, what: &str) -> Option<String> {
    let present = |names: &[&'static str]| -> Vec<&'static str> {
        names
            .iter()
            .copied()
            .filter(|n| map.contains_key(*n))
            .collect()
    };
    match *rule {
        Rule::ExactlyOne(names) => match present(names).as_slice() {
            [] => Some(format!(
                "{what} needs one of {}",
                list(names.iter().map(|n| code(n)), "or")
            )),
            [_] => None,
            [first, second, ..] => Some(format!(
                "{what} has both {} and {}: only one of {} is allowed",
                code(first),
                code(second),
                list(names.iter().map(|n| code(n)), "and")
            )),
        },
        Rule::AtLeastOne(names) => present(names).is_empty().then(|| {
            format!(
                "{what} needs at least one of {}",
                list(names.iter().map(|n| code(n)), "or")
            )
        }),
        Rule::OnlyWith(name, other) => {
            (map.contains_key(name) && !map.contains_key(other)).then(|| {
                format!(
                    "{} is allowed only with {} in {what}",
                    code(name),
                    code(other)
                )
            })
        }
        Rule::NotEmpty => map
            .is_empty()
            .then(|| format!("{what} needs at least one property")),
        Rule::UseOr(inline) => {
            if map.contains_key("use") {
                let others: Vec<&String> = map.keys().filter(|k| *k != "use").collect();
                (!others.is_empty()).then(|| {
                    format!(
                        "{what} names a secret (`use`) or has its own properties, not both: \
                         remove {} or `use`",
                        list(others.iter().map(|k| code(k)), "and")
                    )
                })
            } else {
                let missing: Vec<&'static str> = inline
                    .iter()
                    .copied()
                    .filter(|n| !map.contains_key(*n))
                    .collect();
                (!missing.is_empty()).then(|| {
                    format!(
                        "{what} needs {} (or `use`: the name of a secret)",
                        list(missing.iter().map(|n| code(n)), "and")
                    )
                })
            }
        }
        Rule::WhenEquals { key, value, then } => {
            let equals = map.get(key).and_then(Value::as_str) == Some(value);
            match (equals, map.contains_key(then)) {
                (true, false) => Some(format!(
                    "{what} needs {} when {} is {}",
                    code(then),
                    code(key),
                    code(value)
                )),
                (false, true) => Some(format!(
                    "{} is allowed in {what} only when {} is {}",
                    code(then),
                    code(key),
                    code(value)
                )),
                _ => None,
            }
        }
    }
}

/// Whether `value` is of the JSON type `shape` checks (for [`Shape::Either`] and type
/// problems).
fn admits(shape: &Shape, value: &Value) -> bool {
    match shape {
        Shape::Any => true,
        Shape::Str(_) => value.is_string(),
        Shape::Int { .. } => value.is_number(),
        Shape::Bool => value.is_boolean(),
        Shape::Object | Shape::Obj(_) | Shape::Map(_) | Shape::Task => value.is_object(),
        Shape::List(_) | Shape::Named { .. } => value.is_array(),
        Shape::Either(first, second) => admits(first, value) || admits(second, value),
    }
}

/// What `shape` expects, for reasons: "a string or an object".
fn expected(shape: &Shape) -> String {
    match shape {
        Shape::Any => "anything".into(),
        Shape::Str(_) => "a string".into(),
        Shape::Int { .. } => "an integer".into(),
        Shape::Bool => "a boolean".into(),
        Shape::Object | Shape::Map(_) => "an object".into(),
        Shape::Obj(construct) => format!("an object ({})", construct.what),
        Shape::Task => "an object (a task)".into(),
        Shape::List(_) => "a list".into(),
        Shape::Named { noun, .. } => format!("a list of {noun}s"),
        Shape::Either(first, second) => format!("{} or {}", expected(first), expected(second)),
    }
}

/// Why `s` is not the text `text` wants, if it is not.
fn text_problem(text: Text, s: &str) -> Option<String> {
    let ok = match text {
        Text::Any => true,
        Text::NonEmpty => !s.is_empty(),
        Text::Expr => is_expression(s),
        Text::Semver => is_semver(s),
        Text::Label => is_label(s),
        Text::Uri => is_expression(s) || has_scheme(s),
        Text::Pointer => is_expression(s) || is_pointer(s),
        Text::Duration => is_expression(s) || is_iso_duration(s),
        Text::OneOf(values) => values.contains(&s),
    };
    if ok {
        return None;
    }
    let shown = quote(s);
    Some(match text {
        Text::Any => String::new(),
        Text::NonEmpty => "must not be empty".into(),
        Text::Expr => format!("{shown} is not a runtime expression (`${{ ... }}`)"),
        Text::Semver => format!("{shown} is not a semantic version (like `1.0.0`)"),
        Text::Label => format!(
            "{shown} is not a lowercase RFC 1123 label (`a-z`, `0-9` and `-`, starting and \
             ending with a letter or digit, at most 63 characters)"
        ),
        Text::Uri => format!(
            "{shown} is neither a URI with a scheme (`https://...`) nor a runtime expression"
        ),
        Text::Pointer => format!("{shown} is neither a JSON pointer nor a runtime expression"),
        Text::Duration => format!(
            "{shown} is neither an ISO 8601 duration (like `PT1M30S`) nor a runtime expression"
        ),
        Text::OneOf(values) => {
            let mut reason = format!(
                "{shown} is not one of {}",
                list(values.iter().map(|v| code(v)), "or")
            );
            if let Some(near) = nearest(s, values) {
                reason.push_str(&format!("; did you mean {}?", code(near)));
            }
            reason
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Texts.

/// A runtime expression: `${ ... }`, blanks around allowed.
fn is_expression(s: &str) -> bool {
    let t = s.trim();
    t.len() > 3 && t.starts_with("${") && t.ends_with('}')
}

/// A URI (template) that starts with a scheme: `scheme://`.
fn has_scheme(s: &str) -> bool {
    let Some((scheme, _)) = s.split_once("://") else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
}

/// A JSON pointer (RFC 6901): empty, or `/`-separated segments with `~` only as `~0`/`~1`.
fn is_pointer(s: &str) -> bool {
    if s.is_empty() {
        return true;
    }
    s.starts_with('/')
        && s.split('~')
            .skip(1)
            .all(|rest| rest.starts_with(['0', '1']))
}

/// A lowercase RFC 1123 label.
fn is_label(s: &str) -> bool {
    (1..=63).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A semantic version: `MAJOR.MINOR.PATCH`, then optionally `-pre.release` and `+build`.
fn is_semver(s: &str) -> bool {
    let (rest, build) = match s.split_once('+') {
        Some((rest, build)) => (rest, Some(build)),
        None => (s, None),
    };
    let (core, pre) = match rest.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (rest, None),
    };
    let numeric = |p: &str| {
        !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && (p == "0" || !p.starts_with('0'))
    };
    let ident =
        |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    let core_ok = {
        let parts: Vec<&str> = core.split('.').collect();
        parts.len() == 3 && parts.iter().all(|p| numeric(p))
    };
    let pre_ok = pre.is_none_or(|pre| {
        pre.split('.')
            .all(|p| ident(p) && (!p.bytes().all(|b| b.is_ascii_digit()) || numeric(p)))
    });
    let build_ok = build.is_none_or(|build| build.split('.').all(ident));
    core_ok && pre_ok && build_ok
}

/// An ISO 8601 duration: `P`, then date parts (`Y`, `M`, `W`, `D`) and optionally `T` with
/// time parts (`H`, `M`, `S`), each a number (decimals allowed) and at least one in all.
fn is_iso_duration(s: &str) -> bool {
    let Some(rest) = s.strip_prefix('P') else {
        return false;
    };
    let (date, time) = match rest.split_once('T') {
        Some((date, time)) => (date, Some(time)),
        None => (rest, None),
    };
    let Some(dates) = duration_parts(date, &['Y', 'M', 'W', 'D']) else {
        return false;
    };
    match time.map(|t| duration_parts(t, &['H', 'M', 'S'])) {
        None => dates > 0,
        Some(Some(times)) => times > 0,
        Some(None) => false,
    }
}

/// How many `number designator` parts `s` is made of, with the designators in this order,
/// each at most once; `None` when it is anything else.
fn duration_parts(mut s: &str, designators: &[char]) -> Option<usize> {
    let mut count = 0;
    let mut next = 0;
    while !s.is_empty() {
        let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let (whole, fraction) = match s[..end].split_once('.') {
            Some((whole, fraction)) => (whole, Some(fraction)),
            None => (&s[..end], None),
        };
        let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
        if !digits(whole) || !fraction.is_none_or(digits) {
            return None;
        }
        let unit = s[end..].chars().next()?;
        next += designators.get(next..)?.iter().position(|d| *d == unit)? + 1;
        count += 1;
        s = &s[end + unit.len_utf8()..];
    }
    Some(count)
}

// ---------------------------------------------------------------------------------------------
// Reasons.

/// The pointer of `at`'s property `key` (escaped per RFC 6901).
fn child(at: &str, key: &str) -> String {
    format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"))
}

/// `name` in backquotes, cut to [`MAX_QUOTED`] characters.
fn code(name: &str) -> String {
    format!("`{}`", cut(name))
}

/// A string value for a reason: quoted, cut to [`MAX_QUOTED`] characters.
fn quote(s: &str) -> String {
    format!("{:?}", cut(s))
}

fn cut(s: &str) -> String {
    if s.chars().count() <= MAX_QUOTED {
        return s.to_owned();
    }
    let head: String = s.chars().take(MAX_QUOTED).collect();
    format!("{head}…")
}

/// What `value` is, for reasons: "a number (1.0)", "a list".
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("a boolean ({b})"),
        Value::Number(n) => format!("a number ({n})"),
        Value::String(s) => format!("a string ({})", quote(s)),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// `a, b and c` (or `or`), at most [`MAX_LISTED`] items.
fn list(items: impl Iterator<Item = String>, last_word: &str) -> String {
    let mut items: Vec<String> = items.collect();
    let more = items.len().saturating_sub(MAX_LISTED);
    items.truncate(MAX_LISTED);
    if more > 0 {
        items.push(format!("{more} more"));
    }
    match items.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, init)) => format!("{} {last_word} {last}", init.join(", ")),
    }
}

/// The allowed name nearest to `name`, when within [`MAX_DISTANCE`] edits and fewer edits
/// than that name has characters (`foo` is not taken for `do`).
fn nearest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    if name.chars().count() > MAX_SUGGESTED_LEN {
        return None;
    }
    known
        .iter()
        .map(|k| (distance(name, k), *k))
        .filter(|(d, k)| *d <= MAX_DISTANCE && *d < k.chars().count())
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// The Levenshtein distance between `a` and `b` (characters).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diagonal + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The document header every test document starts with.
    const HEAD: &str =
        "document:\n  dsl: '1.0.3'\n  namespace: test\n  name: shape\n  version: '0.1.0'\n";

    /// The problems of a YAML document, as (pointer, reason).
    fn problems(yaml: &str) -> Vec<(String, String)> {
        let doc: Value = serde_norway::from_str(yaml).expect("test documents are YAML");
        check("test.yaml", &doc)
            .into_iter()
            .map(|p| (p.pointer, p.reason))
            .collect()
    }

    /// Asserts the document `HEAD + body` has no problem.
    fn valid(body: &str) {
        let found = problems(&format!("{HEAD}{body}"));
        assert!(found.is_empty(), "unexpected problems: {found:#?}\n{body}");
    }

    /// Asserts the document `HEAD + body` has a problem at `pointer` whose reason contains
    /// `words`; returns every problem.
    fn invalid(body: &str, pointer: &str, words: &str) -> Vec<(String, String)> {
        let found = problems(&format!("{HEAD}{body}"));
        assert!(
            found.iter().any(|(p, r)| p == pointer && r.contains(words)),
            "no problem at {pointer:?} with {words:?}: {found:#?}"
        );
        found
    }

    #[test]
    fn a_workflow_with_every_top_level_construct_passes() {
        valid(
            "
  title: T
  summary: S
  tags: { team: a }
  metadata: { any: [ thing ] }
input:
  schema: { format: json, document: { type: object } }
  from: ${ .order }
output:
  schema: { resource: { endpoint: 'https://schemas.example.com/o.json' } }
  as: { result: '${ . }' }
timeout: short
schedule: { every: { hours: 1 }, cron: '0 0 * * *', after: PT1M }
evaluate: { language: jq, mode: loose }
use:
  authentications:
    a: { basic: { username: u, password: p } }
    b: { bearer: { use: tokenSecret } }
    c: { digest: { username: u, password: p } }
    d: { oauth2: { authority: 'https://auth.example.com', grant: client_credentials, client: { id: x, secret: y }, endpoints: { token: /t } } }
    e: { oidc: { use: oidcSecret } }
    f: { certificate: {} }
  catalogs: { global: { endpoint: 'https://catalog.example.com' } }
  errors: { e: { type: 'https://example.com/e', status: 400 } }
  extensions:
    - log: { extend: call, when: 'true', before: [ { l: { set: { a: 1 } } } ] }
  functions: { f: { call: http, with: { method: get, endpoint: 'https://example.com' } } }
  retries: { r: { delay: PT1S, limit: { attempt: { count: 3 } } } }
  secrets: [ tokenSecret, oidcSecret ]
  timeouts: { short: { after: { seconds: 30 } } }
do:
  - x: { call: f }
",
        );
    }

    #[test]
    fn every_kind_of_task_passes() {
        valid(
            "
do:
  - http: { call: http, with: { method: get, endpoint: { uri: 'https://e.example.com', authentication: { use: a } }, headers: { A: b }, query: { q: 1 }, body: [ 1 ], output: raw, redirect: false } }
  - openapi: { call: openapi, with: { document: { endpoint: 'https://e.example.com/o.json' }, operationId: op, parameters: { a: 1 }, authentication: { bearer: { token: t } } } }
  - grpc: { call: grpc, with: { proto: { endpoint: 'file://g.proto' }, service: { name: S, host: h, port: 1 }, method: M, arguments: { a: 1 } } }
  - asyncapi: { call: asyncapi, with: { document: { endpoint: 'https://e.example.com/a.json' }, channel: c, subscription: { consume: { until: '${ true }' } } } }
  - a2a: { call: a2a, with: { method: tasks/get, server: 'https://agent.example.com', parameters: '${ .p }' } }
  - mcp: { call: mcp, with: { method: prompts/list, transport: { http: { endpoint: 'https://mcp.example.com' } }, parameters: '${ .p }' } }
  - custom: { call: myFunction, with: { free: [ form ] } }
  - do: { do: [ { inner: { wait: PT1S } } ] }
  - emit: { emit: { event: { with: { source: 'https://e.example.com', type: t, extra: attribute } } } }
  - for: { for: { in: .items }, do: [ { each: { set: { a: 1 } } } ] }
  - fork: { fork: { branches: [ { one: { set: { a: 1 } } } ] } }
  - listen: { listen: { to: { any: [ { with: { type: t }, correlate: { c: { from: .id } } } ], until: { all: [ { with: { type: u } } ] } } }, foreach: { do: [ { f: { set: { a: 1 } } } ] } }
  - raise: { raise: { error: known } }
  - run: { run: { shell: { command: ls }, await: true, return: stdout } }
  - set: { set: '${ . }' }
  - switch: { switch: [ { only: { then: end } } ] }
  - try: { try: [ { t: { set: { a: 1 } } } ], catch: { errors: { with: { status: 500, details: d } }, retry: r, do: [ { c: { set: { a: 1 } } } ] } }
  - wait: { wait: { milliseconds: 10 } }
",
        );
    }

    #[test]
    fn a_misspelled_kind_key_is_named_with_the_kind_it_resembles() {
        let found = invalid(
            "do:\n  - greet:\n      sett: { a: 1 }\n",
            "/do/0/greet/sett",
            "unknown property `sett` of a task; did you mean `set`?",
        );
        assert!(
            found
                .iter()
                .any(|(p, r)| p == "/do/0/greet" && r.contains("a task needs one of"))
        );
        assert_eq!(found[0].0, "/do/0/greet/sett", "the most specific first");
    }

    #[test]
    fn an_extra_property_of_a_calls_with_lists_the_allowed_ones() {
        invalid(
            "do:\n  - getPet:\n      call: http\n      with: { method: get, endpoint: 'https://e.example.com', foo: bar }\n",
            "/do/0/getPet/with/foo",
            "unknown property `foo` of an HTTP call's `with`; allowed: `method`, `endpoint`, `headers`, `body`, `query`, `output` and `redirect`",
        );
        invalid(
            "do:\n  - o:\n      call: openapi\n      with: { document: { endpoint: 'https://e.example.com' }, operationID: x }\n",
            "/do/0/o/with/operationID",
            "did you mean `operationId`?",
        );
    }

    #[test]
    fn two_tasks_in_one_item_and_two_kinds_in_one_task_are_problems() {
        invalid(
            "do:\n  - a: { set: { x: 1 } }\n    b: { wait: PT1S }\n",
            "/do/0/b",
            "task `b` is in the same item as task `a`",
        );
        invalid(
            "do:\n  - a: { set: { x: 1 }, wait: PT1S }\n",
            "/do/0/a",
            "this one has both `set` and `wait`",
        );
        invalid("do:\n  - {}\n", "/do/0", "holds no task");
        invalid(
            "do:\n  - just a string\n",
            "/do/0",
            "must be an object of one name to its task",
        );
    }

    #[test]
    fn the_document_metadata_is_required_and_typed() {
        let doc = "document: { dsl: '1.0.3', namespace: test, version: '0.1.0' }\ndo:\n  - a: { set: { x: 1 } }\n";
        assert_eq!(
            problems(doc),
            [(
                "/document".to_owned(),
                "missing required property `name` of `document`".to_owned()
            )]
        );
        let doc = "document: { dsl: 1.0, namespace: test, name: a, version: '0.1.0' }\ndo: []\n";
        assert_eq!(
            problems(doc),
            [(
                "/document/dsl".to_owned(),
                "must be a string, not a number (1.0)".to_owned()
            )]
        );
        let doc =
            "document: { dsl: '1.0', namespace: Test_1, name: -a, version: 1.0.0-01 }\ndo: []\n";
        let found: Vec<String> = problems(doc).into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            found,
            [
                "/document/dsl",
                "/document/namespace",
                "/document/name",
                "/document/version"
            ]
        );
        assert_eq!(
            problems("document: {}\n").len(),
            5,
            "four of `document`, `do` of the workflow"
        );
    }

    #[test]
    fn durations_are_iso_8601_expressions_or_units() {
        invalid(
            "do:\n  - w: { wait: { secnds: 1 } }\n",
            "/do/0/w/wait/secnds",
            "did you mean `seconds`?",
        );
        invalid(
            "do:\n  - w: { wait: { seconds: 1.5 } }\n",
            "/do/0/w/wait/seconds",
            "must be an integer",
        );
        invalid(
            "do:\n  - w: { wait: PT10X }\n",
            "/do/0/w/wait",
            "is neither an ISO 8601 duration",
        );
        invalid(
            "do:\n  - w: { wait: {} }\n",
            "/do/0/w/wait",
            "a duration needs at least one property",
        );
        invalid(
            "do:\n  - w: { wait: 10 }\n",
            "/do/0/w/wait",
            "must be a string or an object",
        );
        for good in [
            "P1Y2M3W4D",
            "PT1H",
            "PT0.5S",
            "P1DT2H3M4.25S",
            "PT1M30S",
            "${ .delay }",
        ] {
            assert!(is_iso_duration(good) || is_expression(good), "{good}");
        }
        for bad in [
            "P", "PT", "P1H", "PT1D", "P1M1Y", "PT1S1M", "P1.S", "P.5D", "1D", "P1DT", "PT1HH",
            "P٣D",
        ] {
            assert!(!is_iso_duration(bad), "{bad}");
        }
    }

    #[test]
    fn authentication_policies_have_one_known_scheme() {
        let found = invalid(
            "do:\n  - c:\n      call: http\n      with:\n        method: get\n        endpoint: { uri: 'https://e.example.com', authentication: { ntlm: { user: u } } }\n",
            "/do/0/c/with/endpoint/authentication/ntlm",
            "unknown property `ntlm` of an authentication policy; allowed: `use`, `basic`",
        );
        assert!(found.iter().any(
            |(p, r)| p == "/do/0/c/with/endpoint/authentication" && r.contains("needs one of")
        ));
        invalid(
            "use:\n  authentications:\n    a: { use: other }\ndo: []\n",
            "/use/authentications/a/use",
            "unknown property `use` of an authentication policy",
        );
        invalid(
            "use:\n  authentications:\n    a: { basic: { username: u }, bearer: { token: t } }\ndo: []\n",
            "/use/authentications/a",
            "has both `basic` and `bearer`",
        );
        invalid(
            "use:\n  authentications:\n    a: { basic: { username: u } }\ndo: []\n",
            "/use/authentications/a/basic",
            "needs `password` (or `use`: the name of a secret)",
        );
        invalid(
            "use:\n  authentications:\n    a: { oidc: { use: s, authority: 'https://a.example.com' } }\ndo: []\n",
            "/use/authentications/a/oidc",
            "not both: remove `authority` or `use`",
        );
        invalid(
            "use:\n  authentications:\n    a: { oidc: { authority: 'https://a.example.com', grant: implicit } }\ndo: []\n",
            "/use/authentications/a/oidc/grant",
            "is not one of",
        );
    }

    #[test]
    fn an_until_strategy_has_no_until_of_its_own() {
        invalid(
            "do:\n  - l:\n      listen:\n        to:\n          any: []\n          until: { any: [], until: '${ true }' }\n",
            "/do/0/l/listen/to/until/until",
            "unknown property `until` of an `until` strategy",
        );
        invalid(
            "do:\n  - l: { listen: { to: { one: { with: { type: t } }, until: '${ true }' } } }\n",
            "/do/0/l/listen/to",
            "`until` is allowed only with `any`",
        );
        invalid(
            "do:\n  - l: { listen: { to: { one: { with: {} } } } }\n",
            "/do/0/l/listen/to/one/with",
            "needs at least one property",
        );
    }

    #[test]
    fn scalar_types_enums_and_ranges_are_checked() {
        invalid(
            "do:\n  - c: { call: http, with: { method: get, endpoint: 'https://e.example.com', redirect: 'no' } }\n",
            "/do/0/c/with/redirect",
            "must be a boolean, not a string (\"no\")",
        );
        invalid(
            "do:\n  - c: { call: http, with: { method: get, endpoint: 'https://e.example.com', output: contents } }\n",
            "/do/0/c/with/output",
            "did you mean `content`?",
        );
        invalid(
            "do:\n  - c: { call: grpc, with: { proto: { endpoint: 'file://p' }, service: { name: s, host: h, port: -1 }, method: m } }\n",
            "/do/0/c/with/service/port",
            "-1 is out of range (0 to 65535)",
        );
        invalid(
            "do:\n  - r: { raise: { error: { type: 'https://e.example.com', status: '500' } } }\n",
            "/do/0/r/raise/error/status",
            "must be an integer",
        );
        invalid(
            "do:\n  - r: { raise: { error: { type: 'https://e.example.com', status: 500, instance: 'do/0' } } }\n",
            "/do/0/r/raise/error/instance",
            "neither a JSON pointer",
        );
        invalid(
            "do:\n  - c: { call: http, with: { method: get, endpoint: 'https://e.example.com', headers: { A: 1 } } }\n",
            "/do/0/c/with/headers/A",
            "must be a string",
        );
        invalid(
            "do:\n  - c: { call: http, with: { method: get, endpoint: 'https://e.example.com', headers: .h } }\n",
            "/do/0/c/with/headers",
            "is not a runtime expression",
        );
        invalid(
            "do:\n  - c: { call: 7 }\n",
            "/do/0/c/call",
            "must be a string",
        );
        invalid(
            "do:\n  - s: { set: 1 }\n",
            "/do/0/s/set",
            "must be a string or an object",
        );
        invalid(
            "use: { secrets: [ a, 1 ] }\ndo: []\n",
            "/use/secrets/1",
            "must be a string",
        );
    }

    #[test]
    fn required_properties_and_exclusive_choices_are_checked() {
        invalid(
            "do:\n  - c: { call: http }\n",
            "/do/0/c",
            "missing required property `with` of a `call: http` task",
        );
        invalid(
            "do:\n  - c: { call: http, with: { method: get } }\n",
            "/do/0/c/with",
            "missing required property `endpoint`",
        );
        invalid(
            "do:\n  - r: { raise: {} }\n",
            "/do/0/r/raise",
            "missing required property `error` of `raise`",
        );
        invalid(
            "do:\n  - r: { run: { await: true } }\n",
            "/do/0/r/run",
            "`run` needs one of `container`, `script`, `shell` or `workflow`",
        );
        invalid(
            "do:\n  - r: { run: { script: { language: js, code: x, source: { endpoint: 'https://s.example.com' } } } }\n",
            "/do/0/r/run/script",
            "has both `code` and `source`",
        );
        invalid(
            "do:\n  - r: { run: { container: { image: a, lifetime: { cleanup: always, after: PT1M } } } }\n",
            "/do/0/r/run/container/lifetime",
            "`after` is allowed in a container's `lifetime` only when `cleanup` is `eventually`",
        );
        invalid(
            "do:\n  - a: { call: a2a, with: { method: message/send } }\n",
            "/do/0/a/with",
            "needs at least one of `agentCard` or `server`",
        );
        invalid(
            "do:\n  - m: { call: mcp, with: { method: tools/list, transport: {} } }\n",
            "/do/0/m/with/transport",
            "needs one of `http` or `stdio`",
        );
        invalid(
            "do:\n  - t: { try: [] }\n",
            "/do/0/t",
            "missing required property `catch`",
        );
        invalid(
            "do:\n  - s: { switch: [] }\n",
            "/do/0/s/switch",
            "needs at least 1 switch case",
        );
        invalid(
            "do:\n  - f: { for: { each: x }, do: [] }\n",
            "/do/0/f/for",
            "missing required property `in`",
        );
        invalid(
            "do:\n  - e: { emit: { event: { with: { type: t } } } }\n",
            "/do/0/e/emit/event/with",
            "`source`",
        );
        invalid(
            "schedule: {}\ndo: []\n",
            "/schedule",
            "needs at least one property",
        );
        invalid(
            "do:\n  - w: { wait: PT1S, timeout: {} }\n",
            "/do/0/w/timeout",
            "missing required property `after`",
        );
        invalid(
            "input: { schema: { format: json } }\ndo: []\n",
            "/input/schema",
            "needs one of `document` or `resource`",
        );
    }

    #[test]
    fn the_workflow_itself_is_closed() {
        invalid(
            "timout: { after: PT1M }\ndo: []\n",
            "/timout",
            "unknown property `timout` of the workflow; did you mean `timeout`?",
        );
        invalid(
            "do: []\nbar: 1\n",
            "/bar",
            "allowed: `document`, `input`, `use`, `do`",
        );
        assert_eq!(
            problems("[]")[0],
            (
                "".to_owned(),
                "must be an object (the workflow), not a list".to_owned()
            )
        );
        invalid("do: {}\n", "/do", "must be a list of tasks, not an object");
    }

    #[test]
    fn pointers_escape_names() {
        invalid(
            "do:\n  - a/b~c: { set: { x: 1 }, fo: 1 }\n",
            "/do/0/a~1b~0c/fo",
            "unknown property `fo` of a `set` task",
        );
    }

    #[test]
    fn reasons_are_bounded_ranked_and_unique() {
        let mut body = String::from("do:\n");
        for i in 0..40 {
            body.push_str(&format!("  - t{i}: {{ set: {{ a: 1 }}, extra: 1 }}\n"));
            body.push_str(&format!("  - u{i}: {{ call: http, with: {{ method: get, endpoint: 'https://e.example.com', deep: 1 }} }}\n"));
        }
        body.push_str("foo: 1\n");
        let found = problems(&format!("{HEAD}{body}"));
        assert_eq!(found.len(), MAX_PROBLEMS);
        assert!(
            found.iter().all(|(p, _)| p.ends_with("/with/deep")),
            "the deepest first: {found:#?}"
        );
        let unique: HashSet<_> = found.iter().collect();
        assert_eq!(unique.len(), found.len());
        let mut doc: Value = serde_norway::from_str(&format!("{HEAD}do: []\n")).expect("YAML");
        doc["k".repeat(10_000)] = json!(1);
        let found = check("long.json", &doc);
        assert!(
            found[0].reason.len() < 1_000,
            "a long name is cut: {}",
            found[0].reason
        );
    }

    #[test]
    fn a_deep_document_is_refused_without_descending_further() {
        let mut task = json!({"set": {"a": 1}});
        for _ in 0..200 {
            task = json!({"do": [{"inner": task}]});
        }
        let doc = json!({
            "document": {"dsl": "1.0.3", "namespace": "a", "name": "b", "version": "1.0.0"},
            "do": [{"outer": task}],
        });
        let found = check("deep.json", &doc);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].reason.contains("nested more than 64 levels"));
        let depth = found[0].pointer.matches('/').count();
        assert!((MAX_DEPTH + 1..=MAX_DEPTH + 2).contains(&depth), "{depth}");
    }

    #[test]
    fn no_input_makes_it_panic() {
        let odd = [
            json!(null),
            json!("text"),
            json!(1),
            json!({"do": [null, 1, [], {"a": null}, {"b": {"call": null}}, {"c": {"call": "http", "with": []}}]}),
            json!({"document": [], "do": [{"x": {"switch": [null, {"a": 1}, {"b": {"then": 1}}]}}]}),
            json!({"use": {"authentications": {"a": null, "b": {"basic": "x"}}, "extensions": [{}], "functions": {"f": 1}}}),
            json!({"do": [{"é/~": {"wait": "P٣D"}}, {"y": {"listen": {"to": {"any": [null], "until": 1}}}}]}),
            json!({"do": [{"r": {"run": {"container": {"lifetime": {"cleanup": 1, "after": "x"}}}}}]}),
        ];
        for doc in &odd {
            let found = check("odd.json", doc);
            assert!(!found.is_empty(), "{doc}");
            assert!(found.len() <= MAX_PROBLEMS);
        }
    }

    /// A value built from `seed` with the DSL's own names as keys, so that the walk goes deep
    /// into the tables.
    fn random_value(seed: &mut u64, depth: usize) -> Value {
        const NAMES: &[&str] = &[
            "document",
            "do",
            "call",
            "with",
            "http",
            "endpoint",
            "uri",
            "authentication",
            "use",
            "basic",
            "oauth2",
            "listen",
            "to",
            "any",
            "until",
            "one",
            "all",
            "run",
            "container",
            "lifetime",
            "cleanup",
            "eventually",
            "after",
            "wait",
            "seconds",
            "switch",
            "then",
            "try",
            "catch",
            "retry",
            "errors",
            "set",
            "for",
            "in",
            "fork",
            "branches",
            "emit",
            "event",
            "raise",
            "error",
            "status",
            "timeout",
            "input",
            "output",
            "schema",
            "x",
        ];
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let pick = (*seed >> 33) as usize;
        let name = NAMES[pick % NAMES.len()];
        match (pick / 7) % if depth > 12 { 4 } else { 7 } {
            0 => json!(name),
            1 => json!(pick % 70_000),
            2 => json!(pick.is_multiple_of(2)),
            3 => Value::Null,
            4 | 5 => {
                let mut map = Map::new();
                for _ in 0..(pick % 4) {
                    let key = NAMES[(pick / 13 + map.len() * 5) % NAMES.len()];
                    map.insert(key.to_owned(), random_value(seed, depth + 1));
                }
                Value::Object(map)
            }
            _ => Value::Array(
                (0..pick % 3)
                    .map(|_| random_value(seed, depth + 1))
                    .collect(),
            ),
        }
    }

    #[test]
    fn random_documents_never_panic() {
        let mut seed = 7;
        for _ in 0..3_000 {
            let mut doc = json!({
                "document": {"dsl": "1.0.3", "namespace": "a", "name": "b", "version": "1.0.0"},
            });
            doc["do"] = json!([{ "t": random_value(&mut seed, 0) }]);
            doc["use"] = random_value(&mut seed, 0);
            assert!(check("random.json", &doc).len() <= MAX_PROBLEMS);
        }
    }

    #[test]
    fn texts_are_recognised() {
        for good in [
            "1.0.0",
            "0.1.0",
            "1.0.3-alpha.1",
            "1.0.0+build.1",
            "10.20.30-rc.1+meta-data",
            "1.0.0-0a",
        ] {
            assert!(is_semver(good), "{good}");
        }
        for bad in [
            "1.0",
            "01.0.0",
            "1.0.0-",
            "1.0.0-01",
            "1.0.0+",
            "v1.0.0",
            "1.0.0-a..b",
            "1.0.0.0",
            "",
        ] {
            assert!(!is_semver(bad), "{bad}");
        }
        for good in ["a", "a-b", "0", "order-pet-2", &"a".repeat(63)] {
            assert!(is_label(good), "{good}");
        }
        for bad in ["", "A", "a_b", "-a", "a-", "a.b", &"a".repeat(64)] {
            assert!(!is_label(bad), "{bad}");
        }
        assert!(
            has_scheme("https://e.example.com")
                && has_scheme("file://x")
                && !has_scheme("//x")
                && !has_scheme("1a://x")
        );
        assert!(
            is_pointer("") && is_pointer("/a/~0b~1") && !is_pointer("a") && !is_pointer("/a~2")
        );
        assert!(is_expression(" ${ .a } ") && !is_expression("${}") && !is_expression(".a"));
        assert_eq!(distance("sett", "set"), 1);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(
            nearest("exceptwhen", &["when", "exceptWhen"]),
            Some("exceptWhen")
        );
    }

    /// Every document of the spec's examples (a folder named by `AGENTRY_SPEC_EXAMPLES`) has
    /// no problem; skipped when the variable is not set.
    #[test]
    fn the_specifications_examples_pass() {
        let Some(dir) = std::env::var_os("AGENTRY_SPEC_EXAMPLES") else {
            println!(
                "skipped: AGENTRY_SPEC_EXAMPLES does not name a folder of the spec's examples"
            );
            return;
        };
        let mut paths: Vec<_> = std::fs::read_dir(&dir)
            .expect("AGENTRY_SPEC_EXAMPLES is a readable folder")
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| ["yaml", "yml", "json"].contains(&e))
            })
            .collect();
        paths.sort();
        assert!(
            !paths.is_empty(),
            "no documents in {}",
            dir.to_string_lossy()
        );
        let mut failures = Vec::new();
        for path in &paths {
            let name = path.display().to_string();
            let text = std::fs::read_to_string(path).expect("a readable example");
            let json = path.extension().is_some_and(|e| e == "json");
            match crate::load::parse(&name, &text, json) {
                Ok(doc) => failures.extend(check(&name, &doc).iter().map(ToString::to_string)),
                Err(problem) => failures.push(problem.to_string()),
            }
        }
        println!("checked {} documents", paths.len());
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
