//! Workflows as data: Serverless Workflow DSL 1.0.x documents (CNCF,
//! `serverlessworkflow/specification`), loaded from files or the API, checked, and run durably
//! on the engine.
//!
//! - `problem.rs`: what is wrong with a definition (file, JSON pointer, reason).
//! - `expr.rs`: jq runtime expressions (`${ ... }`) on `jaq`, with the DSL's arguments.
//! - `schema.rs`: the DSL's own JSON Schema (vendored from the specification), checked first.

pub mod expr;
pub mod problem;
pub mod schema;

pub use problem::Problem;
