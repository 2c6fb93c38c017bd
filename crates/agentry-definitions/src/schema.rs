//! The shape of a document as the DSL defines it: checked before agentry reads it. (Being
//! rewritten: agentry's own encoding of the DSL reference's rules.)

use serde_json::Value;

use crate::Problem;

/// The problems of `doc`'s shape; empty when it has none.
pub fn check(_file: &str, _doc: &Value) -> Vec<Problem> {
    Vec::new()
}
