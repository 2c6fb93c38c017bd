//! JSON Schema compilation and validation with readable failure details, and the bounds on what
//! a client-supplied object schema may ask a model to generate ([`check_generation_limits`]).

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

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

/// Bounds on what an object schema may ask a model to generate.
///
/// The most items an array may be required to hold (`minItems`, and `minContains`).
pub const MAX_GENERATED_ITEMS: u64 = 1_000;
/// The longest string a schema may require (`minLength`), in characters.
pub const MAX_GENERATED_STRING_CHARS: u64 = 10_000;
/// The most properties an object may require (`minProperties`), and the most `properties` a
/// schema may declare.
pub const MAX_GENERATED_PROPERTIES: u64 = 1_000;
/// The deepest nesting of subschemas (`properties`, `items`, `anyOf`, `oneOf`, `allOf`, `not`, …)
/// below the root schema, which is level 0.
pub const MAX_SCHEMA_DEPTH: usize = 32;
/// The largest estimated size of the schema's smallest instance, serialised, in bytes.
pub const MAX_GENERATED_BYTES: u64 = 1024 * 1024;

/// Keywords whose value is one subschema (`items` in its array form is in the next list).
const SUBSCHEMA_KEYWORDS: &[&str] = &[
    "additionalItems",
    "additionalProperties",
    "contains",
    "contentSchema",
    "else",
    "if",
    "items",
    "not",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
];
/// Keywords whose value is an array of subschemas.
const SUBSCHEMA_ARRAY_KEYWORDS: &[&str] = &["allOf", "anyOf", "items", "oneOf", "prefixItems"];
/// Keywords whose value maps names to subschemas.
const SUBSCHEMA_MAP_KEYWORDS: &[&str] = &[
    "$defs",
    "definitions",
    "dependencies",
    "dependentSchemas",
    "patternProperties",
    "properties",
];

/// The size allowed for the name a generator derives root-level strings from (e.g. `value`).
const ROOT_HINT_BYTES: u64 = 16;
/// The longest text a generator puts in a string before padding: a `format` example (a UUID)
/// or `example <hint>`.
const LONGEST_FORMAT_EXAMPLE: u64 = 36;
const EXAMPLE_PREFIX_BYTES: u64 = "example ".len() as u64;
/// The most bytes a generated number, boolean or null takes.
const SCALAR_BYTES: u64 = 24;

/// Checks that `schema` asks for no more than the `MAX_GENERATED_*` and [`MAX_SCHEMA_DEPTH`]
/// limits allow, naming the first keyword over its limit.
///
/// The smallest instance is estimated as a generator that honours `minItems` (at least one item,
/// at most `maxItems`), `minLength`, every declared and required property, the first of
/// `anyOf`/`oneOf`/`enum` and `const` would build it, with saturating arithmetic: it is an upper
/// bound for such a generator, not for every instance. `$ref` is not followed. The walk is
/// recursive with a depth counter checked on entry, so it never goes deeper than
/// `MAX_SCHEMA_DEPTH + 1` frames, and visits every subschema once.
pub fn check_generation_limits(schema: &Value) -> Result<(), String> {
    let bytes = visit(schema, 0, ROOT_HINT_BYTES)?;
    if bytes > MAX_GENERATED_BYTES {
        return Err(format!(
            "its smallest instance is over the limit of {MAX_GENERATED_BYTES} bytes"
        ));
    }
    Ok(())
}

/// A count keyword (`minItems`, `maxLength`, …) of `schema` as a whole number: an integer, or a
/// non-negative float rounded up (saturating); `None` when absent or not a non-negative number.
pub fn count_keyword(schema: &Value, keyword: &str) -> Option<u64> {
    let value = schema.get(keyword)?;
    value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|f| *f >= 0.0)
            .map(|f| f.ceil() as u64)
    })
}

/// What the children of one schema contribute to its smallest instance.
#[derive(Default)]
struct ChildSizes {
    /// The first `anyOf`/`oneOf` alternative (the larger of the two).
    alternative: u64,
    /// Every declared property: name, colon, comma and value.
    properties: u64,
    /// The `items` schema (in its single-schema form).
    item: Option<u64>,
}

/// Checks `schema` at nesting level `depth` and returns its smallest instance's estimated size;
/// `hint_bytes` is the size of the name a generated string would be derived from.
fn visit(schema: &Value, depth: usize, hint_bytes: u64) -> Result<u64, String> {
    if depth > MAX_SCHEMA_DEPTH {
        return Err(format!(
            "the schema nests deeper than {MAX_SCHEMA_DEPTH} levels"
        ));
    }
    let empty = Map::new();
    let keywords = schema.as_object().unwrap_or(&empty);
    check_counts(keywords)?;
    let mut children = ChildSizes::default();
    for (keyword, value) in keywords {
        visit_keyword(keyword, value, depth + 1, hint_bytes, &mut children)?;
    }
    Ok(smallest_instance_bytes(schema, hint_bytes, &children))
}

/// Refuses a count keyword or a `properties` list over its limit.
fn check_counts(keywords: &Map<String, Value>) -> Result<(), String> {
    let limits = [
        ("minItems", MAX_GENERATED_ITEMS),
        ("minContains", MAX_GENERATED_ITEMS),
        ("minLength", MAX_GENERATED_STRING_CHARS),
        ("minProperties", MAX_GENERATED_PROPERTIES),
    ];
    for (keyword, limit) in limits {
        if let Some(value) = keywords.get(keyword)
            && value.as_f64().is_some_and(|n| n > limit as f64)
        {
            return Err(format!("{keyword} {value} is over the limit of {limit}"));
        }
    }
    if let Some(properties) = keywords.get("properties").and_then(Value::as_object)
        && properties.len() as u64 > MAX_GENERATED_PROPERTIES
    {
        return Err(format!(
            "properties: {} properties are over the limit of {MAX_GENERATED_PROPERTIES}",
            properties.len()
        ));
    }
    Ok(())
}

/// Visits the subschemas under one keyword at level `depth`, recording the sizes that matter.
fn visit_keyword(
    keyword: &str,
    value: &Value,
    depth: usize,
    hint_bytes: u64,
    children: &mut ChildSizes,
) -> Result<(), String> {
    match (keyword, value) {
        ("properties", Value::Object(properties)) => {
            for (name, property) in properties {
                let name_bytes = serialized_len(name.as_str());
                let bytes = visit(property, depth, name_bytes)?;
                children.properties = children
                    .properties
                    .saturating_add(name_bytes.saturating_add(2).saturating_add(bytes));
            }
        }
        ("anyOf" | "oneOf", Value::Array(alternatives)) => {
            for (i, alternative) in alternatives.iter().enumerate() {
                let bytes = visit(alternative, depth, hint_bytes)?;
                if i == 0 {
                    children.alternative = children.alternative.max(bytes);
                }
            }
        }
        ("items", Value::Object(_) | Value::Bool(_)) => {
            children.item = Some(visit(value, depth, hint_bytes)?);
        }
        (_, Value::Object(_)) if SUBSCHEMA_KEYWORDS.contains(&keyword) => {
            visit(value, depth, hint_bytes)?;
        }
        (_, Value::Array(subschemas)) if SUBSCHEMA_ARRAY_KEYWORDS.contains(&keyword) => {
            for subschema in subschemas.iter().filter(|s| s.is_object()) {
                visit(subschema, depth, hint_bytes)?;
            }
        }
        (_, Value::Object(subschemas)) if SUBSCHEMA_MAP_KEYWORDS.contains(&keyword) => {
            for subschema in subschemas.values().filter(|s| s.is_object()) {
                visit(subschema, depth, hint_bytes)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The estimated size of `schema`'s smallest instance: the largest of what each of its possible
/// shapes (const, enum, alternative, string, scalar, object, array) would take.
fn smallest_instance_bytes(schema: &Value, hint_bytes: u64, children: &ChildSizes) -> u64 {
    let mut bytes = string_bytes(schema, hint_bytes)
        .max(SCALAR_BYTES)
        .max(children.alternative);
    if let Some(value) = schema.get("const") {
        bytes = bytes.max(serialized_len(value));
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        bytes = bytes.max(serialized_len(first));
    }
    if mentions_type(schema, "object") || schema.get("properties").is_some() {
        bytes = bytes.max(object_bytes(schema, children));
    }
    if mentions_type(schema, "array") || schema.get("items").is_some() {
        bytes = bytes.max(array_bytes(schema, hint_bytes, children));
    }
    bytes
}

/// A string: quotes, a format example or `example <hint>`, padded by `minLength` characters.
fn string_bytes(schema: &Value, hint_bytes: u64) -> u64 {
    let example = if schema.get("format").is_some() {
        LONGEST_FORMAT_EXAMPLE
    } else {
        0
    };
    let example = example.max(EXAMPLE_PREFIX_BYTES.saturating_add(hint_bytes));
    let padding = count_keyword(schema, "minLength").unwrap_or(0);
    2u64.saturating_add(example).saturating_add(padding)
}

/// An object: braces, its declared properties and every required name filled with itself.
fn object_bytes(schema: &Value, children: &ChildSizes) -> u64 {
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|name| serialized_len(name).saturating_mul(2).saturating_add(2))
        .fold(0u64, u64::saturating_add);
    2u64.saturating_add(children.properties)
        .saturating_add(required)
}

/// An array: brackets and `minItems` (default 1, at most `maxItems`) items and commas.
fn array_bytes(schema: &Value, hint_bytes: u64, children: &ChildSizes) -> u64 {
    let items = count_keyword(schema, "minItems")
        .unwrap_or(1)
        .min(count_keyword(schema, "maxItems").unwrap_or(u64::MAX));
    let item = children
        .item
        .unwrap_or_else(|| string_bytes(&Value::Null, hint_bytes));
    2u64.saturating_add(items.saturating_mul(item.saturating_add(1)))
}

/// Whether `type` is `ty` or a list containing it.
fn mentions_type(schema: &Value, ty: &str) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == ty,
        Some(Value::Array(types)) => types.iter().any(|t| t.as_str() == Some(ty)),
        _ => false,
    }
}

/// Counts the bytes written through it.
struct ByteCounter(u64);

impl std::io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len() as u64);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The length of `value` serialised as JSON, without building the text.
fn serialized_len<T: Serialize + ?Sized>(value: &T) -> u64 {
    let mut counter = ByteCounter(0);
    // Writing to a counter cannot fail, and a value that cannot be serialised counts as written.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refusal(schema: Value) -> String {
        check_generation_limits(&schema).unwrap_err()
    }

    /// `{keyword: inner}`, built without copying `inner` (as `json!` would).
    fn wrap(keyword: &str, inner: Value) -> Value {
        Value::Object(Map::from_iter([(keyword.to_owned(), inner)]))
    }

    /// `leaf` wrapped in `levels` objects, each the single property of the next.
    fn nested_properties(levels: usize, leaf: Value) -> Value {
        (0..levels).fold(
            leaf,
            |inner, _| json!({"type": "object", "properties": {"a": inner}}),
        )
    }

    #[test]
    fn ordinary_schemas_are_within_the_limits() {
        for schema in [
            json!({}),
            json!(true),
            json!({"type": "string", "minLength": 10_000}),
            json!({"type": "array", "items": {"type": "string"}, "minItems": 1000}),
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 3},
                    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
                    "kind": {"anyOf": [{"const": "a"}, {"type": "integer"}]},
                    "address": {"type": "object", "properties": {"city": {"type": "string"}}}
                },
                "required": ["name", "tags"],
                "$defs": {"x": {"type": "array", "minItems": 10}}
            }),
            nested_properties(MAX_SCHEMA_DEPTH, json!({"type": "string"})),
            // maxItems caps what minItems asks for.
            json!({"type": "array", "minItems": 1000, "maxItems": 2,
                   "items": {"type": "array", "minItems": 1000, "items": {"minLength": 100}}}),
        ] {
            assert_eq!(check_generation_limits(&schema), Ok(()), "{schema}");
        }
    }

    #[test]
    fn each_count_keyword_over_its_limit_is_named() {
        assert_eq!(
            refusal(json!({"type": "array", "minItems": 1_000_000})),
            "minItems 1000000 is over the limit of 1000"
        );
        assert_eq!(
            refusal(json!({"type": "array", "contains": {}, "minContains": 1001})),
            "minContains 1001 is over the limit of 1000"
        );
        assert_eq!(
            refusal(json!({"properties": {"s": {"type": "string", "minLength": 600_000}}})),
            "minLength 600000 is over the limit of 10000"
        );
        assert_eq!(
            refusal(json!({"type": "object", "minProperties": 5000})),
            "minProperties 5000 is over the limit of 1000"
        );
        // A float is a count too.
        assert_eq!(
            refusal(json!({"items": {"minItems": 1e6}})),
            "minItems 1000000.0 is over the limit of 1000"
        );
    }

    #[test]
    fn too_many_properties_are_refused() {
        let properties: Map<String, Value> = (0..1500)
            .map(|i| (format!("p{i}"), json!({"type": "null"})))
            .collect();
        assert_eq!(
            refusal(json!({"type": "object", "properties": properties})),
            "properties: 1500 properties are over the limit of 1000"
        );
    }

    #[test]
    fn deep_nesting_is_refused_whatever_the_keyword() {
        let deep = nested_properties(MAX_SCHEMA_DEPTH + 1, json!({"type": "string"}));
        assert_eq!(refusal(deep), "the schema nests deeper than 32 levels");
        for keyword in ["items", "not", "additionalProperties"] {
            let deep = (0..1000).fold(json!({}), |inner, _| wrap(keyword, inner));
            assert_eq!(refusal(deep), "the schema nests deeper than 32 levels");
        }
        let deep = (0..100).fold(json!({}), |inner, _| json!({"allOf": [{}, inner]}));
        assert_eq!(refusal(deep), "the schema nests deeper than 32 levels");
    }

    #[test]
    fn a_huge_smallest_instance_is_refused() {
        let message = "its smallest instance is over the limit of 1048576 bytes";
        let square = json!({"type": "array", "minItems": 1000,
                            "items": {"type": "array", "minItems": 1000}});
        assert_eq!(refusal(square), message);
        let strings = json!({"type": "array", "minItems": 1000,
                             "items": {"type": "string", "minLength": 10_000}});
        assert_eq!(refusal(strings), message);
        // Saturating: 1000^7 items would overflow a u64 without it.
        let cube = (0..7).fold(
            json!({"type": "integer"}),
            |inner, _| json!({"type": "array", "minItems": 1000, "items": inner}),
        );
        assert_eq!(refusal(cube), message);
        let wide = (0..2).fold(json!({"type": "integer"}), |inner, _| {
            let properties: Map<String, Value> =
                (0..200).map(|i| (format!("p{i}"), inner.clone())).collect();
            json!({"type": "object", "properties": properties})
        });
        assert_eq!(refusal(wide), message);
    }

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
