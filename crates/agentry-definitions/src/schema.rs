//! The DSL's own JSON Schema: `schema/workflow.yaml`, vendored unchanged from the Serverless
//! Workflow specification (see its header for the commit), checked against every document first.
//!
//! A raw validator's answer to a mistake under one of the schema's many `oneOf`s is "not valid under
//! any of the schemas" at the task. [`check`] instead follows the branch the document evidently
//! meant (the task kind by the key it has: `call`, `do`, `fork`, ...; a call by its value: `http`,
//! `grpc`, ...) and reports that branch's own errors, so that each problem points at the offending
//! place and names the property.
//!
//! The schema is parsed and compiled once, on first use; it is draft 2020-12 (`$defs`,
//! `unevaluatedProperties`), all of its `$ref`s point inside the document itself, and the validator
//! is built `offline`, so nothing is ever fetched.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashSet};
use std::sync::OnceLock;

use jsonschema::error::ValidationErrorKind;
use jsonschema::{Draft, ValidationError, Validator};
use serde_json::{Map, Value};

use crate::Problem;

/// The vendored schema, as YAML.
const SCHEMA_YAML: &str = include_str!("../schema/workflow.yaml");

/// The most problems [`check`] reports for one document.
pub const MAX_PROBLEMS: usize = 20;
/// The most errors read from the validator for one document (each may hold many branches).
const MAX_RAW_ERRORS: usize = 200;
/// The deepest nesting of `oneOf`/`anyOf` followed into a branch; deeper ones are summarised.
const MAX_NESTING: usize = 32;
/// The most `$ref`/`allOf`/`oneOf` hops taken when reading the schema around one branch.
const MAX_SCHEMA_HOPS: usize = 12;
/// The most characters of a value quoted in a reason.
const MAX_QUOTED_CHARS: usize = 60;
/// The most names listed in one reason.
const MAX_LISTED: usize = 14;

/// The problems of `doc` (an already parsed document) against the DSL's JSON Schema; empty when
/// valid. `file` is used for each Problem's file.
///
/// At most [`MAX_PROBLEMS`], the most specific (deepest in the document) first, no duplicates.
pub fn check(file: &str, doc: &Value) -> Vec<Problem> {
    let compiled = match compiled() {
        Ok(compiled) => compiled,
        Err(e) => return vec![Problem::new(file, "", e.to_string())],
    };
    if compiled.validator.is_valid(doc) {
        return Vec::new();
    }
    let errors: Vec<ValidationError<'_>> = compiled
        .validator
        .iter_errors(doc)
        .take(MAX_RAW_ERRORS)
        .collect();
    let mut found = Vec::new();
    Explainer {
        schema: &compiled.schema,
        doc,
    }
    .explain_all(&errors, 0, &mut found);
    rank(found)
        .into_iter()
        .map(|f| Problem::new(file, f.pointer, f.reason))
        .collect()
}

/// The schema document and its validator, built once.
struct Compiled {
    schema: Value,
    validator: Validator,
}

/// The compiled schema, or why it could not be compiled (a defect of the vendored file).
fn compiled() -> Result<&'static Compiled, &'static str> {
    static COMPILED: OnceLock<Result<Compiled, String>> = OnceLock::new();
    COMPILED
        .get_or_init(compile)
        .as_ref()
        .map_err(String::as_str)
}

/// Parses the vendored schema and compiles its validator: draft 2020-12, offline (every `$ref`
/// is inside the document), `format` asserted as the specification's own CI does.
fn compile() -> Result<Compiled, String> {
    let schema: Value = serde_norway::from_str(SCHEMA_YAML)
        .map_err(|e| format!("the DSL's JSON Schema does not parse: {e}"))?;
    let validator = jsonschema::options()
        .with_draft(Draft::Draft202012)
        .offline()
        .should_validate_formats(true)
        .build(&schema)
        .map_err(|e| format!("the DSL's JSON Schema does not compile: {e}"))?;
    Ok(Compiled { schema, validator })
}

/// One problem before ranking: where, why, and what makes it a duplicate of another.
#[derive(Debug)]
struct Found {
    pointer: String,
    reason: String,
    /// Problems with the same key are one problem (the first one found is kept).
    key: String,
}

impl Found {
    fn new(pointer: impl Into<String>, reason: impl Into<String>) -> Self {
        let pointer = pointer.into();
        let reason = reason.into();
        Self {
            key: format!("{pointer}\n{reason}"),
            pointer,
            reason,
        }
    }
}

/// The most specific first (deepest pointer; otherwise in the validator's order), without
/// duplicates, at most [`MAX_PROBLEMS`].
fn rank(mut found: Vec<Found>) -> Vec<Found> {
    found.sort_by_key(|f| Reverse(f.pointer.matches('/').count()));
    let mut seen = HashSet::new();
    found.retain(|f| seen.insert(f.key.clone()));
    found.truncate(MAX_PROBLEMS);
    found
}

/// Turns the validator's errors into problems, reading the schema and the document around them.
struct Explainer<'a> {
    schema: &'a Value,
    doc: &'a Value,
}

impl<'a> Explainer<'a> {
    /// Explains each of `errors`, which are siblings (one branch's, or the document's).
    fn explain_all(&self, errors: &[ValidationError<'_>], nesting: usize, out: &mut Vec<Found>) {
        for error in errors {
            match error.kind() {
                ValidationErrorKind::OneOfNotValid { context }
                | ValidationErrorKind::AnyOf { context } => {
                    self.explain_alternatives(error, context, nesting, out);
                }
                ValidationErrorKind::UnevaluatedProperties { unexpected }
                | ValidationErrorKind::AdditionalProperties { unexpected } => {
                    self.explain_unexpected(error, unexpected, errors, out);
                }
                _ => out.push(self.describe(error)),
            }
        }
    }

    /// A failed `oneOf`/`anyOf`: the errors of the branch the document evidently meant, or, when
    /// no branch stands out, one problem listing what was expected.
    fn explain_alternatives(
        &self,
        error: &ValidationError<'_>,
        context: &[Vec<ValidationError<'static>>],
        nesting: usize,
        out: &mut Vec<Found>,
    ) {
        let at = error.instance_path().as_str();
        let branches = self.schema_at(error.schema_path().as_str());
        let value = self.doc.pointer(at);
        if let (Some(branches), Some(value)) = (branches.and_then(Value::as_array), value) {
            if nesting < MAX_NESTING
                && let Some(chosen) = self.choose(branches, value, context)
            {
                self.explain_all(&context[chosen], nesting + 1, out);
                return;
            }
            out.push(self.summarise(error, branches, value));
        } else {
            out.push(Found::new(at, "matches none of the allowed forms"));
        }
    }

    /// The branch the value evidently means: the only one not ruled out, or the one with the
    /// most evidence (present required properties, matching `const`s). `None` when none stands
    /// out.
    fn choose(
        &self,
        branches: &[Value],
        value: &Value,
        context: &[Vec<ValidationError<'static>>],
    ) -> Option<usize> {
        let scored: Vec<(usize, u32)> = branches
            .iter()
            .enumerate()
            .filter(|(i, _)| context.get(*i).is_some_and(|errors| !errors.is_empty()))
            .filter_map(|(i, branch)| Some((i, self.evidence(branch, value, 0)?)))
            .collect();
        let best = scored.iter().map(|&(_, score)| score).max()?;
        let top: Vec<usize> = scored
            .iter()
            .filter(|&&(_, score)| score == best)
            .map(|&(i, _)| i)
            .collect();
        match top.as_slice() {
            [only] => Some(*only),
            _ if best > 0 => top.into_iter().min_by_key(|&i| context[i].len()),
            _ => None,
        }
    }

    /// How strongly `value` looks like an instance of `schema`: `None` when it cannot be (wrong
    /// type, a `const` property with another value, a value a `not: {enum}` excludes), otherwise
    /// 1 for each required property present and 2 for each `const` property matched.
    fn evidence(&self, schema: &Value, value: &Value, hops: usize) -> Option<u32> {
        let Some(schema) = schema.as_object() else {
            return schema.as_bool().unwrap_or(true).then_some(0);
        };
        if hops > MAX_SCHEMA_HOPS {
            return Some(0);
        }
        if schema
            .get("type")
            .is_some_and(|types| !type_matches(types, value))
        {
            return None;
        }
        let mut score = direct_evidence(schema, value)?;
        if let Some(target) = self.ref_target(schema) {
            score += self.evidence(target, value, hops + 1)?;
        }
        for member in array(schema, "allOf") {
            score += self.evidence(member, value, hops + 1)?;
        }
        for keyword in ["oneOf", "anyOf"] {
            let branches = array(schema, keyword);
            if !branches.is_empty() {
                score += branches
                    .iter()
                    .filter_map(|branch| self.evidence(branch, value, hops + 1))
                    .max()?;
            }
        }
        Some(score)
    }

    /// One problem for a `oneOf`/`anyOf` whose intended branch is unclear: the types wanted when
    /// the value has none of them, else the properties that tell the branches apart when each
    /// branch requires one, else the branches by name.
    fn summarise(
        &self,
        error: &ValidationError<'_>,
        branches: &'a [Value],
        value: &Value,
    ) -> Found {
        let at = error.instance_path().as_str();
        let schema_path = error.schema_path().as_str();
        let prefix = match self.owner_name(schema_path) {
            Some(name) => format!("is not a valid {name}"),
            None => "matches none of the allowed forms".to_string(),
        };
        let types = self.types_of_all(branches, 0);
        if let Some(types) = types.filter(|types| !types.iter().any(|t| type_is(t, value))) {
            let expected = list_or(types.iter().map(|t| type_name(t).to_string()));
            let found = describe_value(value);
            return Found::new(at, format!("{prefix}: expected {expected}, found {found}"));
        }
        if let Some(keys) = value
            .as_object()
            .and_then(|_| self.distinguishing_keys(branches))
        {
            let how = match error.kind() {
                ValidationErrorKind::OneOfNotValid { .. } => "exactly one",
                _ => "at least one",
            };
            let keys = list(keys.iter().map(|k| code(k)));
            return Found::new(
                at,
                format!("{prefix}: it needs {how} of the properties {keys}"),
            );
        }
        let forms = branches
            .iter()
            .enumerate()
            .map(|(i, branch)| self.label(branch, i));
        let (forms, found) = (list_or(forms), describe_value(value));
        Found::new(at, format!("{prefix}: expected {forms}; found {found}"))
    }

    /// For each branch, the first property it requires that no other branch requires (or, when
    /// there is none, the first it requires); `None` when a branch requires nothing.
    fn distinguishing_keys(&self, branches: &[Value]) -> Option<Vec<String>> {
        let required: Vec<Vec<String>> = branches.iter().map(|b| self.required(b, 0)).collect();
        let mut keys: Vec<String> = Vec::new();
        for (i, own) in required.iter().enumerate() {
            let unique = own.iter().find(|key| {
                required
                    .iter()
                    .enumerate()
                    .all(|(j, other)| i == j || !other.contains(key))
            });
            let key = unique.or_else(|| own.first())?;
            if !keys.contains(key) {
                keys.push(key.clone());
            }
        }
        Some(keys)
    }

    /// A branch's name in a reason: its title (or its `$ref` target's), and the types it wants.
    fn label(&self, branch: &'a Value, index: usize) -> String {
        let target = branch.as_object().and_then(|b| self.ref_target(b));
        let title = branch
            .get("title")
            .or_else(|| target.and_then(|t| t.get("title")))
            .and_then(Value::as_str);
        let types = self
            .types_of(branch, 0)
            .map(|types| list_or(types.iter().map(|t| type_name(t).to_string())));
        match (title, types) {
            (Some(title), Some(types)) => format!("{title} ({types})"),
            (Some(title), None) => title.to_string(),
            (None, Some(types)) => types,
            (None, None) => format!("form {}", index + 1),
        }
    }

    /// The JSON types `schema` accepts (through `$ref`, `allOf`, `oneOf`, `anyOf`); `None` when
    /// it accepts any.
    fn types_of(&self, schema: &'a Value, hops: usize) -> Option<BTreeSet<&'a str>> {
        let schema = schema.as_object()?;
        if hops > MAX_SCHEMA_HOPS {
            return None;
        }
        let own = schema.get("type").map(|types| match types {
            Value::Array(types) => strings(types).collect(),
            other => other.as_str().into_iter().collect(),
        });
        let target = self.ref_target(schema);
        let mut members = vec![own, target.and_then(|t| self.types_of(t, hops + 1))];
        members.extend(
            array(schema, "allOf")
                .iter()
                .map(|m| self.types_of(m, hops + 1)),
        );
        for keyword in ["oneOf", "anyOf"] {
            let branches = array(schema, keyword);
            if !branches.is_empty() {
                members.push(self.types_of_all(branches, hops + 1));
            }
        }
        members
            .into_iter()
            .flatten()
            .reduce(|a, b| a.intersection(&b).copied().collect())
    }

    /// The JSON types any of `branches` accepts; `None` when one accepts any.
    fn types_of_all(&self, branches: &'a [Value], hops: usize) -> Option<BTreeSet<&'a str>> {
        branches
            .iter()
            .try_fold(BTreeSet::new(), |mut all, branch| {
                all.extend(self.types_of(branch, hops)?);
                Some(all)
            })
    }

    /// The properties `schema` requires, in their order, through `$ref`, `allOf`, and the ones
    /// all of its `oneOf`/`anyOf` branches require.
    fn required(&self, schema: &Value, hops: usize) -> Vec<String> {
        let mut required: Vec<String> = Vec::new();
        let Some(schema) = schema.as_object() else {
            return required;
        };
        if hops > MAX_SCHEMA_HOPS {
            return required;
        }
        let mut add = |names: Vec<String>| {
            for name in names {
                if !required.contains(&name) {
                    required.push(name);
                }
            }
        };
        add(strings(array(schema, "required"))
            .map(str::to_string)
            .collect());
        if let Some(target) = self.ref_target(schema) {
            add(self.required(target, hops + 1));
        }
        for member in array(schema, "allOf") {
            add(self.required(member, hops + 1));
        }
        for keyword in ["oneOf", "anyOf"] {
            let common = array(schema, keyword)
                .iter()
                .map(|branch| self.required(branch, hops + 1))
                .reduce(|a, b| a.into_iter().filter(|name| b.contains(name)).collect());
            add(common.unwrap_or_default());
        }
        required
    }

    /// Unevaluated or additional properties, one problem each. A failed subschema drops the
    /// properties it evaluated, so the validator also lists properties that are declared here:
    /// those are left out (their subschema's own errors say what is wrong).
    fn explain_unexpected(
        &self,
        error: &ValidationError<'_>,
        unexpected: &[String],
        siblings: &[ValidationError<'_>],
        out: &mut Vec<Found>,
    ) {
        let at = error.instance_path().as_str();
        let owner_path = parent(error.schema_path().as_str());
        let alternatives_failed = siblings.iter().any(|sibling| {
            sibling.instance_path().as_str() == at
                && matches!(
                    sibling.kind(),
                    ValidationErrorKind::OneOfNotValid { .. }
                        | ValidationErrorKind::OneOfMultipleValid { .. }
                        | ValidationErrorKind::AnyOf { .. }
                )
        });
        let mut known = BTreeSet::new();
        if let Some(owner) = self.schema_at(owner_path) {
            self.known_properties(owner, alternatives_failed, 0, &mut known);
        }
        for name in unexpected.iter().filter(|name| !known.contains(*name)) {
            let mut reason = format!("unexpected property {}", code(name));
            if let Some(near) = closest(name, &known) {
                reason.push_str(&format!("; did you mean {}?", code(near)));
            } else if !known.is_empty() && known.len() <= MAX_LISTED {
                reason.push_str(&format!(
                    "; allowed here: {}",
                    list(known.iter().map(|k| code(k)))
                ));
            }
            let pointer = format!("{at}/{}", escape(name));
            out.push(Found {
                key: format!("{pointer}\nunexpected"),
                pointer,
                reason,
            });
        }
    }

    /// The properties `schema` declares, through `$ref`, `allOf`, `if`/`then`/`else` and, when
    /// `with_alternatives`, every `oneOf`/`anyOf` branch.
    fn known_properties(
        &self,
        schema: &Value,
        with_alternatives: bool,
        hops: usize,
        known: &mut BTreeSet<String>,
    ) {
        let Some(schema) = schema.as_object() else {
            return;
        };
        if hops > MAX_SCHEMA_HOPS {
            return;
        }
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            known.extend(properties.keys().cloned());
        }
        let mut members: Vec<&Value> = array(schema, "allOf").iter().collect();
        members.extend(self.ref_target(schema));
        members.extend(["if", "then", "else"].iter().filter_map(|k| schema.get(*k)));
        if with_alternatives {
            members.extend(array(schema, "oneOf"));
            members.extend(array(schema, "anyOf"));
        }
        for member in members {
            self.known_properties(member, true, hops + 1, known);
        }
    }

    /// One problem for a plain error (not a `oneOf`/`anyOf`, not unexpected properties).
    fn describe(&self, error: &ValidationError<'_>) -> Found {
        let at = error.instance_path().as_str();
        let schema_path = error.schema_path().as_str();
        let value = self.doc.pointer(at).unwrap_or(&Value::Null);
        if let Some(found) = task_item_problem(error, value) {
            return found;
        }
        let reason = match error.kind() {
            ValidationErrorKind::Required { property } => {
                let name = property.as_str().map_or_else(|| property.to_string(), code);
                format!("missing required property {name}")
            }
            ValidationErrorKind::Type { .. } => {
                let expected = self.schema_at(schema_path).map(type_names);
                let expected = expected.unwrap_or_else(|| "another type".to_string());
                format!("expected {expected}, found {}", describe_value(value))
            }
            ValidationErrorKind::Constant { expected_value } => {
                format!("expected {}, found {}", quote(expected_value), quote(value))
            }
            ValidationErrorKind::Enum { options } => {
                let options = options.as_array().map(Vec::as_slice).unwrap_or_default();
                format!(
                    "expected one of {}, found {}",
                    list(options.iter().map(quote)),
                    quote(value)
                )
            }
            ValidationErrorKind::Pattern { pattern } => {
                format!("{} does not match the pattern `{pattern}`", quote(value))
            }
            ValidationErrorKind::Format { format } => {
                format!("{} is not a valid {format}", quote(value))
            }
            ValidationErrorKind::FalseSchema => match property_of(schema_path) {
                Some(name) => format!("property {} is not allowed here", code(name)),
                None => "no value is allowed here".to_string(),
            },
            ValidationErrorKind::Not { schema } => {
                match schema.get("enum").and_then(Value::as_array) {
                    Some(excluded) => format!(
                        "{} is not allowed here (it is none of {})",
                        quote(value),
                        list(excluded.iter().map(quote))
                    ),
                    None => format!("{} has a form that is not allowed here", quote(value)),
                }
            }
            ValidationErrorKind::OneOfMultipleValid { context } => {
                let branches = self.schema_at(schema_path).and_then(Value::as_array);
                let forms = context
                    .iter()
                    .enumerate()
                    .filter(|(_, errors)| errors.is_empty())
                    .map(|(i, _)| match branches.and_then(|b| b.get(i)) {
                        Some(branch) => self.label(branch, i),
                        None => format!("form {}", i + 1),
                    });
                format!(
                    "is ambiguous: it matches {}, and exactly one is allowed",
                    list_and(forms)
                )
            }
            ValidationErrorKind::MinProperties { limit } => {
                format!(
                    "needs at least {limit} {}",
                    plural(*limit, "property", "properties")
                )
            }
            ValidationErrorKind::MaxProperties { limit } => format!(
                "has {}, at most {limit} allowed",
                count_of(
                    value.as_object().map_or(0, Map::len),
                    "property",
                    "properties"
                )
            ),
            ValidationErrorKind::MinItems { limit } => {
                format!("needs at least {limit} {}", plural(*limit, "item", "items"))
            }
            ValidationErrorKind::MaxItems { limit } => {
                format!("has more than {limit} {}", plural(*limit, "item", "items"))
            }
            _ => error.masked().to_string(),
        };
        let reason = match self.owner_title(schema_path) {
            Some(title) => format!("{reason} ({title})"),
            None => reason,
        };
        Found::new(at, reason)
    }

    /// The title of the schema object holding the keyword at `keyword_path`, if it has one.
    fn owner_title(&self, keyword_path: &str) -> Option<&'a str> {
        self.schema_at(parent(keyword_path))?.get("title")?.as_str()
    }

    /// What the schema object holding the keyword at `keyword_path` is called: its title, or its
    /// name under `$defs`.
    fn owner_name(&self, keyword_path: &str) -> Option<String> {
        let owner = parent(keyword_path);
        let name = owner
            .strip_prefix("/$defs/")
            .filter(|name| !name.contains('/'));
        self.owner_title(keyword_path).or(name).map(str::to_string)
    }

    /// The schema value at a JSON pointer into the schema document.
    fn schema_at(&self, pointer: &str) -> Option<&'a Value> {
        self.schema.pointer(pointer)
    }

    /// The target of a schema object's local `$ref` (`#/...`), if it has one.
    fn ref_target(&self, schema: &Map<String, Value>) -> Option<&'a Value> {
        let reference = schema.get("$ref")?.as_str()?;
        self.schema.pointer(reference.strip_prefix('#')?)
    }
}

/// The DSL-specific problem of a task list item holding several tasks (or none), which is
/// usually a missing `- `: points at the second task and names both.
fn task_item_problem(error: &ValidationError<'_>, value: &Value) -> Option<Found> {
    let at = error.instance_path().as_str();
    let names: Vec<&String> = value.as_object()?.keys().collect();
    match (error.schema_path().as_str(), names.as_slice()) {
        ("/$defs/taskList/items/maxProperties", [first, second, ..]) => Some(Found::new(
            format!("{at}/{}", escape(second)),
            format!(
                "task {} is in the same list item as task {} ({} tasks in one item): a task list \
                 item holds exactly one task; start each task with its own `- `",
                code(second),
                code(first),
                names.len()
            ),
        )),
        ("/$defs/taskList/items/minProperties", _) => Some(Found::new(
            at,
            "a task list item holds exactly one task, this one holds none",
        )),
        _ => None,
    }
}

/// The evidence that a schema object's own `required` and `properties` give (see
/// [`Explainer::evidence`]).
fn direct_evidence(schema: &Map<String, Value>, value: &Value) -> Option<u32> {
    let Some(object) = value.as_object() else {
        return Some(0);
    };
    let mut score = 0;
    for name in strings(array(schema, "required")) {
        if object.contains_key(name) {
            score += 1;
        }
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    for (name, property) in properties.into_iter().flatten() {
        let Some(present) = object.get(name) else {
            continue;
        };
        if let Some(expected) = property.get("const") {
            if expected != present {
                return None;
            }
            score += 2;
        }
        let excluded = property.get("not").and_then(|not| not.get("enum"));
        if excluded
            .and_then(Value::as_array)
            .is_some_and(|excluded| excluded.contains(present))
        {
            return None;
        }
    }
    Some(score)
}

/// Whether `value` has one of the JSON Schema types in `types` (a name or an array of names).
fn type_matches(types: &Value, value: &Value) -> bool {
    match types {
        Value::String(name) => type_is(name, value),
        Value::Array(names) => names
            .iter()
            .any(|name| name.as_str().is_some_and(|name| type_is(name, value))),
        _ => true,
    }
}

fn type_is(name: &str, value: &Value) -> bool {
    match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => true,
    }
}

/// `type`'s value in words: "a string", "a string or an object".
fn type_names(types: &Value) -> String {
    match types {
        Value::Array(types) => list_or(strings(types).map(|t| type_name(t).to_string())),
        other => type_name(other.as_str().unwrap_or_default()).to_string(),
    }
}

/// A JSON Schema type name in words: "an object".
fn type_name(name: &str) -> &'static str {
    match name {
        "object" => "an object",
        "array" => "an array",
        "integer" => "an integer",
        "number" => "a number",
        "string" => "a string",
        "boolean" => "a boolean",
        "null" => "null",
        _ => "a value",
    }
}

/// A value's type in words, with the value itself when it is short: `a number (1.0)`.
fn describe_value(value: &Value) -> String {
    let kind = match value {
        Value::Null => return "null".to_string(),
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => return "an array".to_string(),
        Value::Object(_) => return "an object".to_string(),
    };
    format!("{kind} {}", quote(value))
}

/// A value as it appears in a reason: JSON, cut at [`MAX_QUOTED_CHARS`].
fn quote(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= MAX_QUOTED_CHARS {
        return text;
    }
    let cut: String = text.chars().take(MAX_QUOTED_CHARS).collect();
    format!("{cut}…")
}

/// A name as it appears in a reason: `name`.
fn code(name: &str) -> String {
    let name: String = name.chars().take(MAX_QUOTED_CHARS).collect();
    format!("`{name}`")
}

/// "a, b, c" (at most [`MAX_LISTED`], then "and N more").
fn list(items: impl Iterator<Item = String>) -> String {
    join(items, ", ")
}

/// "a, b or c" (at most [`MAX_LISTED`], then "and N more").
fn list_or(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    match items.as_slice() {
        [init @ .., last] if !init.is_empty() && items.len() <= MAX_LISTED => {
            format!("{} or {last}", init.join(", "))
        }
        _ => join(items.into_iter(), ", "),
    }
}

/// "a, b and c" (at most [`MAX_LISTED`], then "and N more").
fn list_and(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    match items.as_slice() {
        [init @ .., last] if !init.is_empty() && items.len() <= MAX_LISTED => {
            format!("{} and {last}", init.join(", "))
        }
        _ => join(items.into_iter(), ", "),
    }
}

fn join(items: impl Iterator<Item = String>, separator: &str) -> String {
    let items: Vec<String> = items.collect();
    let shown = items.len().min(MAX_LISTED);
    let mut text = items[..shown].join(separator);
    if items.len() > shown {
        text.push_str(&format!(" and {} more", items.len() - shown));
    }
    text
}

fn plural(n: u64, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}

fn count_of(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The known name closest to `name` (at most 2 edits, and fewer than half its length), if any.
fn closest<'k>(name: &str, known: &'k BTreeSet<String>) -> Option<&'k str> {
    let limit = (name.chars().count() / 2).clamp(1, 2);
    known
        .iter()
        .map(|k| (edit_distance(name, k), k))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, k)| k.as_str())
}

/// Levenshtein distance, for names of at most [`MAX_QUOTED_CHARS`] characters (longer ones are
/// "far").
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len() > MAX_QUOTED_CHARS || b.len() > MAX_QUOTED_CHARS {
        return usize::MAX;
    }
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

/// A schema object's array keyword (`allOf`, `oneOf`, `required`, ...), empty when absent.
fn array<'s>(schema: &'s Map<String, Value>, keyword: &str) -> &'s [Value] {
    schema
        .get(keyword)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn strings(values: &[Value]) -> impl Iterator<Item = &str> {
    values.iter().filter_map(Value::as_str)
}

/// The JSON pointer one level up.
fn parent(pointer: &str) -> &str {
    pointer.rfind('/').map_or("", |i| &pointer[..i])
}

/// The property a keyword path ending in `/properties/<name>` is about.
fn property_of(keyword_path: &str) -> Option<&str> {
    let (rest, name) = keyword_path.rsplit_once('/')?;
    rest.ends_with("/properties").then_some(name)
}

/// A property name as a JSON pointer token (RFC 6901).
fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};
    use std::time::{Duration, Instant};

    fn data(dir: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(dir)
    }

    fn load(path: &Path) -> Value {
        let text = std::fs::read_to_string(path).expect("test data is readable");
        serde_norway::from_str(&text).expect("test data is YAML")
    }

    fn problems_of(yaml: &str) -> Vec<Problem> {
        let doc: Value = serde_norway::from_str(yaml).expect("YAML");
        check("test.yaml", &doc)
    }

    fn invalid(name: &str) -> Vec<Problem> {
        let problems = check(name, &load(&data("spec-invalid").join(name)));
        assert!(!problems.is_empty(), "{name} passes");
        problems
    }

    /// Whether some problem is at `pointer` with a reason containing every one of `words`.
    fn has(problems: &[Problem], pointer: &str, words: &[&str]) -> bool {
        problems
            .iter()
            .any(|p| p.pointer == pointer && words.iter().all(|w| p.reason.contains(w)))
    }

    fn show(problems: &[Problem]) -> String {
        problems.iter().map(|p| format!("\n  {p}")).collect()
    }

    const VALID: &str = r#"
document:
  dsl: '1.0.3'
  namespace: test
  name: greet
  version: '0.1.0'
do:
  - greet:
      set:
        message: hello
"#;

    #[test]
    fn every_spec_example_passes() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(data("spec-examples"))
            .expect("examples")
            .map(|entry| entry.expect("entry").path())
            .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
            .collect();
        files.sort();
        assert!(files.len() >= 60, "only {} examples", files.len());
        for path in files {
            let problems = check(&path.display().to_string(), &load(&path));
            assert!(
                problems.is_empty(),
                "{}:{}",
                path.display(),
                show(&problems)
            );
        }
    }

    /// The task `greet` of [`VALID`] replaced by `task` (indented by six spaces).
    fn with_task(task: &str) -> String {
        VALID.replace("      set:\n        message: hello\n", task)
    }

    #[test]
    fn reasons_point_at_the_mistake() {
        let cases: &[(&str, &str, &[&str])] = &[
            (
                "      fork: {branchs: []}\n",
                "/do/0/greet/fork/branchs",
                &["unexpected property `branchs`", "did you mean `branches`?"],
            ),
            (
                "      fork: {branchs: []}\n",
                "/do/0/greet/fork",
                &["missing required property `branches`"],
            ),
            (
                "      run:\n        container: {image: x}\n        shell: {command: ls}\n",
                "/do/0/greet/run",
                &["ambiguous", "RunContainer and RunShell"],
            ),
            (
                "      run:\n        contianer: {image: x}\n",
                "/do/0/greet/run/contianer",
                &["did you mean `container`?"],
            ),
            (
                "      wait: PT5X\n",
                "/do/0/greet/wait",
                &["DurationLiteral (a string)", "found a string \"PT5X\""],
            ),
            (
                "      call: http\n      with: {method: get, endpoint: {uri: 'https://x.io/{id}', \
                 authentication: {bearer: {tokn: x}}}}\n",
                "/do/0/greet/with/endpoint/authentication/bearer/tokn",
                &["did you mean `token`?"],
            ),
            (
                "      call: openapi\n      with: {document: {endpoint: 'https://x.io/a'}, \
                 operationId: x, authentication: {basic: {username: a}}}\n",
                "/do/0/greet/with/authentication/basic",
                &["missing required property `password`"],
            ),
            (
                "      raise: {error: {type: 'https://x.io/e', status: '400'}}\n",
                "/do/0/greet/raise/error/status",
                &["expected an integer, found a string \"400\""],
            ),
            (
                "      call: http\n      with: {method: get, endpoint: 'https://x.io/${ .id }'}\n",
                "/do/0/greet/with/endpoint",
                &["Endpoint", "RuntimeExpression (a string)"],
            ),
        ];
        for (task, pointer, words) in cases {
            let problems = problems_of(&with_task(task));
            assert!(has(&problems, pointer, words), "{task}:{}", show(&problems));
        }
        let problems = problems_of(&VALID.replace("  - greet:\n", "  - greet: hi\n  - x:\n"));
        assert!(
            has(
                &problems,
                "/do/0/greet",
                &["Task: expected an object, found a string \"hi\""]
            ),
            "{}",
            show(&problems)
        );
    }

    #[test]
    fn a_valid_document_passes() {
        assert_eq!(problems_of(VALID), vec![]);
    }

    #[test]
    fn two_tasks_in_one_item_points_at_the_second_task() {
        let problems = invalid("two-tasks-in-one-item.yaml");
        assert!(
            has(
                &problems,
                "/do/0/setMessage",
                &["`setMessage`", "`getPet`", "- "]
            ),
            "{}",
            show(&problems)
        );
    }

    #[test]
    fn extra_property_in_call_names_the_property() {
        let problems = invalid("extra-property-in-call.yaml");
        assert_eq!(problems.len(), 1, "{}", show(&problems));
        assert_eq!(problems[0].file, "extra-property-in-call.yaml");
        assert_eq!(problems[0].pointer, "/do/0/getPet/foo");
        assert!(
            problems[0].reason.starts_with("unexpected property `foo`"),
            "{}",
            show(&problems)
        );
        assert!(problems[0].reason.contains("`with`"), "{}", show(&problems));
    }

    #[test]
    fn until_inside_until_is_refused_at_the_inner_until() {
        let problems = invalid("listen-any-until-any-until.yaml");
        assert!(
            has(
                &problems,
                "/do/0/callDoctor/listen/to/until/until",
                &["property `until` is not allowed"]
            ),
            "{}",
            show(&problems)
        );
    }

    #[test]
    fn a_misspelled_task_key_suggests_the_right_one() {
        let problems = problems_of(&VALID.replace("set:", "sett:"));
        assert!(
            has(
                &problems,
                "/do/0/greet/sett",
                &["unexpected property `sett`", "did you mean `set`?"]
            ),
            "{}",
            show(&problems)
        );
        assert!(
            has(
                &problems,
                "/do/0/greet",
                &["Task", "`call`", "`set`", "`wait`"]
            ),
            "{}",
            show(&problems)
        );
    }

    #[test]
    fn a_missing_document_name_is_named() {
        let problems = problems_of(&VALID.replace("  name: greet\n", ""));
        assert_eq!(problems.len(), 1, "{}", show(&problems));
        assert!(
            has(
                &problems,
                "/document",
                &["missing required property `name`"]
            ),
            "{}",
            show(&problems)
        );
    }

    #[test]
    fn a_dsl_version_of_the_wrong_type_is_named() {
        let problems = problems_of(&VALID.replace("dsl: '1.0.3'", "dsl: 1.0"));
        assert_eq!(problems.len(), 1, "{}", show(&problems));
        assert!(
            has(
                &problems,
                "/document/dsl",
                &["expected a string, found a number 1.0"]
            ),
            "{}",
            show(&problems)
        );
    }

    #[test]
    fn a_call_is_read_by_its_value() {
        let yaml = VALID.replace(
            "      set:\n        message: hello\n",
            "      call: http\n      with:\n        method: 3\n        endpoint: https://example.com\n",
        );
        let problems = problems_of(&yaml);
        assert!(
            has(
                &problems,
                "/do/0/greet/with/method",
                &["expected a string, found an integer 3"]
            ),
            "{}",
            show(&problems)
        );
        let yaml = VALID.replace("      set:\n        message: hello\n", "      call: http\n");
        let problems = problems_of(&yaml);
        assert!(
            has(
                &problems,
                "/do/0/greet",
                &["missing required property `with`", "CallHTTP"]
            ),
            "{}",
            show(&problems)
        );
    }

    #[test]
    fn problems_are_bounded_and_distinct() {
        let tasks: String = (0..50)
            .map(|i| format!("  - t{i}:\n      wait: 3\n      foo{i}: 1\n"))
            .collect();
        let yaml = format!(
            "{}do:\n{tasks}",
            VALID.split("do:").next().unwrap_or_default()
        );
        let problems = problems_of(&yaml);
        assert_eq!(problems.len(), MAX_PROBLEMS, "{}", show(&problems));
        let distinct: HashSet<(&str, &str)> = problems
            .iter()
            .map(|p| (p.pointer.as_str(), p.reason.as_str()))
            .collect();
        assert_eq!(distinct.len(), problems.len());
    }

    #[test]
    fn a_document_that_is_not_an_object_is_refused() {
        let problems = check("x.yaml", &Value::String("hello".into()));
        assert!(
            has(&problems, "", &["expected an object, found a string"]),
            "{}",
            show(&problems)
        );
    }

    /// `cargo test -p agentry-definitions --lib schema::tests::timing -- --ignored --nocapture`
    #[test]
    #[ignore = "prints timings"]
    fn timing() {
        let start = Instant::now();
        let built = compile().map(|_| ());
        eprintln!("parse and compile the schema: {:?}", start.elapsed());
        assert_eq!(built, Ok(()));
        let examples = data("spec-examples");
        let typical = load(&examples.join("star-wars-homeworld.yaml"));
        let largest = load(&examples.join("accumulate-room-readings.yaml"));
        let broken = load(&data("spec-invalid").join("extra-property-in-call.yaml"));
        check("warm", &typical);
        let documents = [
            ("star-wars-homeworld.yaml (valid)", &typical),
            ("accumulate-room-readings.yaml (valid)", &largest),
            ("extra-property-in-call.yaml (invalid)", &broken),
        ];
        for (name, doc) in documents {
            let runs = 200u32;
            let start = Instant::now();
            for _ in 0..runs {
                std::hint::black_box(check("t", doc));
            }
            let each: Duration = start.elapsed() / runs;
            eprintln!("check {name}: {each:?}");
        }
    }
}
