//! JSON Schema compilation and validation with readable failure details.

use std::sync::Arc;

use serde_json::Value;

/// A JSON Schema compiled once and kept beside its source document.
#[derive(Clone)]
pub struct Schema {
    source: Value,
    validator: Arc<jsonschema::Validator>,
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Schema").field(&self.source).finish()
    }
}

/// The schema document itself is not a valid JSON Schema.
#[derive(Debug, Clone, thiserror::Error)]
#[error("invalid JSON Schema: {0}")]
pub struct SchemaError(pub String);

impl Schema {
    /// Compiles `source`; `format` keywords are checked.
    pub fn compile(source: Value) -> Result<Self, SchemaError> {
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&source)
            .map_err(|e| SchemaError(e.to_string()))?;
        Ok(Self {
            source,
            validator: Arc::new(validator),
        })
    }

    /// The schema as it was written.
    pub fn source(&self) -> &Value {
        &self.source
    }

    /// Validates `instance`; the error lists every violation as `<path>: <message>`, joined by `; `.
    pub fn validate(&self, instance: &Value) -> Result<(), String> {
        let problems: Vec<String> = self
            .validator
            .iter_errors(instance)
            .map(|e| {
                let path = e.instance_path().to_string();
                if path.is_empty() {
                    e.to_string()
                } else {
                    format!("{path}: {e}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reports_path_and_reason() {
        let s = Schema::compile(json!({
            "type": "object",
            "properties": {"amount": {"type": "number", "minimum": 0}},
            "required": ["amount"]
        }))
        .unwrap();
        assert!(s.validate(&json!({"amount": 3})).is_ok());
        let err = s.validate(&json!({"amount": -1})).unwrap_err();
        assert!(err.starts_with("/amount:"), "{err}");
        let err = s.validate(&json!({})).unwrap_err();
        assert!(err.contains("amount"), "{err}");
    }

    #[test]
    fn rejects_a_broken_schema() {
        assert!(Schema::compile(json!({"type": 12})).is_err());
    }
}
