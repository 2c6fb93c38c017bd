//! Workflows as data: Serverless Workflow DSL 1.0.x documents (CNCF,
//! `serverlessworkflow/specification`), loaded from files, checked, and run durably on the
//! engine.
//!
//! - `load.rs`: files and directories of definitions, read and checked (every problem with
//!   its file and JSON pointer).
//! - `schema.rs`: the DSL's shape (closed objects, task kinds, types), agentry's own encoding of
//!   `dsl-reference.md`, checked first.
//! - `model.rs`: a document as agentry runs it; what it cannot run is refused there.
//! - `expr.rs`: jq runtime expressions (`${ ... }`) on `jaq`, with the DSL's arguments.
//! - `workflow.rs`: a document as one of the engine's workflows, of one step.
//! - `run.rs`: that step: the tasks, each recorded in the step's journal.
//! - `outbound.rs`: `call: http` under the outbound policy.
//! - `protocols/`: `call: a2a` and `call: mcp`, the agent protocols.
//! - `openapi.rs`: `call: openapi`: an operation of an OpenAPI document, sent as `call: http`.
//! - `secrets.rs`: `$secrets` (the environment, a secrets file) and their redaction.
//! - `error.rs`: the DSL's errors (RFC 7807 problem details).
//! - `agents.rs`: agent files (`agents/*.{yaml,yml}`): read and checked (their shape in
//!   `schema/agent.rs`), their HTTP tools' requests and approval rules.

pub mod agents;
pub mod error;
pub mod expr;
pub mod load;
pub mod model;
mod openapi;
pub mod outbound;
pub mod problem;
mod protocols;
pub mod run;
pub mod schema;
pub mod secrets;
pub mod workflow;

pub use error::DslError;
pub use model::Document;
pub use problem::Problem;
pub use run::{EventSink, Services};
