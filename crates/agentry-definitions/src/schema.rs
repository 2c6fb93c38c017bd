//! The DSL JSON Schema (a helper writes this module).
