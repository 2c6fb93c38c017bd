//! The shape of an agent file (`DIR/agents/*.{yaml,yml}`, docs/DEFINITIONS.md "Agent files"),
//! in the vocabulary of the DSL's tables (a child of `schema.rs`, walked by the same walker):
//! every object closed, an unknown property a problem at its pointer with "did you mean".
//! What the shape cannot say (an agent id's characters, expressions, durations, tool names)
//! is `agents.rs`'s.

use serde_json::Value;

use super::{
    BOOL, Construct, DURATION, OBJECT, Rule, STR, STRING_MAP, STRINGS, Shape, Text, URI, Walk,
    closed,
};
use crate::Problem;

/// The problems of an agent file's shape (`file` names it in each), empty when it has none.
pub fn check(file: &str, doc: &Value) -> Vec<Problem> {
    let mut walk = Walk::default();
    walk.value(&Shape::Obj(&AGENT), doc, "", 0);
    walk.ranked()
        .into_iter()
        .map(|(pointer, reason)| Problem::new(file, pointer, reason))
        .collect()
}

const NON_EMPTY: Shape = Shape::Str(Text::NonEmpty);
/// An approval rule: `always`, or an object.
const APPROVAL_RULE: Shape = Shape::Either(
    &Shape::Str(Text::OneOf(&["always"])),
    &Shape::Obj(&APPROVAL),
);

static AGENT: Construct = closed(
    "the agent",
    &[
        ("id", NON_EMPTY),
        ("name", STR),
        ("description", STR),
        ("instructions", STR),
        ("model", Shape::Obj(&MODEL)),
        ("subAgents", STRINGS),
        ("memory", Shape::Obj(&MEMORY)),
        ("workingMemory", Shape::Obj(&WORKING_MEMORY)),
        ("durable", BOOL),
        ("secrets", STRINGS),
        ("tools", Shape::List(&Shape::Obj(&TOOL))),
        ("approvals", Shape::Map(&APPROVAL_RULE)),
        ("guardrails", Shape::Obj(&GUARDRAILS)),
        ("fallbackModels", STRINGS),
        ("budget", Shape::Obj(&BUDGET)),
    ],
    &["id"],
);

const GUARDRAIL_LIST: Shape = Shape::List(&Shape::Obj(&GUARDRAIL));

static GUARDRAILS: Construct = closed(
    "`guardrails`",
    &[
        ("input", GUARDRAIL_LIST),
        ("output", GUARDRAIL_LIST),
        ("tool", GUARDRAIL_LIST),
    ],
    &[],
);

static GUARDRAIL: Construct = Construct {
    rules: &[Rule::ExactlyOne(&[
        "maxLength",
        "denyList",
        "piiRedaction",
        "judge",
    ])],
    ..closed(
        "a guardrail",
        &[
            ("name", NON_EMPTY),
            (
                "maxLength",
                Shape::Int {
                    min: 1,
                    max: 1_000_000,
                },
            ),
            ("denyList", STRINGS),
            ("piiRedaction", BOOL),
            ("judge", Shape::Obj(&JUDGE)),
        ],
        &[],
    )
};

static JUDGE: Construct = closed(
    "a judge guardrail",
    &[("criteria", NON_EMPTY), ("threshold", Shape::Any)],
    &["criteria"],
);

const TOKENS: Shape = Shape::Int {
    min: 1,
    max: i64::MAX,
};

static BUDGET: Construct = closed(
    "`budget`",
    &[("tokensPerRun", TOKENS), ("tokensPerUserDay", TOKENS)],
    &[],
);

static MODEL: Construct = closed(
    "`model`",
    &[("name", NON_EMPTY), ("baseUrl", URI), ("key", STR)],
    &["name"],
);

static MEMORY: Construct = closed(
    "`memory`",
    &[("contextLimit", Shape::Int { min: 1, max: 100 })],
    &[],
);

static WORKING_MEMORY: Construct = Construct {
    rules: &[Rule::ExactlyOne(&["schema", "template"])],
    ..closed(
        "`workingMemory`",
        &[
            ("scope", Shape::Str(Text::OneOf(&["conversation", "user"]))),
            ("schema", OBJECT),
            ("template", NON_EMPTY),
        ],
        &["scope"],
    )
};

static APPROVAL: Construct = closed(
    "an approval rule",
    &[
        ("when", NON_EMPTY),
        ("within", DURATION),
        ("denial", NON_EMPTY),
    ],
    &[],
);

static TOOL: Construct = Construct {
    rules: &[Rule::ExactlyOne(&["mcp", "a2a", "http", "workflow"])],
    ..closed(
        "a tool",
        &[
            ("mcp", Shape::Obj(&MCP)),
            ("a2a", Shape::Obj(&A2A)),
            ("http", Shape::Obj(&HTTP)),
            ("workflow", Shape::Obj(&WORKFLOW_TOOL)),
        ],
        &[],
    )
};

static MCP: Construct = Construct {
    rules: &[Rule::ExactlyOne(&["http", "stdio"])],
    ..closed(
        "an MCP server",
        &[
            ("http", Shape::Obj(&MCP_HTTP)),
            ("stdio", Shape::Obj(&MCP_STDIO)),
            ("tools", STRINGS),
        ],
        &[],
    )
};

static MCP_HTTP: Construct = closed(
    "an MCP server over HTTP",
    &[("endpoint", URI), ("bearer", STR)],
    &["endpoint"],
);

static MCP_STDIO: Construct = closed(
    "an MCP server over stdio",
    &[
        ("command", NON_EMPTY),
        ("arguments", STRINGS),
        ("environment", STRING_MAP),
    ],
    &["command"],
);

static A2A: Construct = closed(
    "a remote A2A agent",
    &[("card", URI), ("bearer", STR)],
    &["card"],
);

static HTTP: Construct = closed(
    "an HTTP tool",
    &[
        ("name", NON_EMPTY),
        ("description", STR),
        ("input", OBJECT),
        ("request", Shape::Obj(&HTTP_REQUEST)),
    ],
    &["name", "request"],
);

static HTTP_REQUEST: Construct = closed(
    "an HTTP tool's `request`",
    &[
        ("method", NON_EMPTY),
        ("endpoint", URI),
        ("headers", STRING_MAP),
        ("query", STRING_MAP),
        ("body", Shape::Any),
    ],
    &["method", "endpoint"],
);

static WORKFLOW_TOOL: Construct = closed(
    "a workflow tool",
    &[("id", NON_EMPTY), ("name", NON_EMPTY), ("description", STR)],
    &["id"],
);
