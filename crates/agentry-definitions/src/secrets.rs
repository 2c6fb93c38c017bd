//! `$secrets`: the values a definition may read but never show. They come from the
//! environment (`AGENTRY_SECRET_<NAME>`: the name upper-cased, each character that is not a
//! letter or a digit an `_`) and from a secrets file (`AGENTRY_SECRETS_FILE`: a JSON or YAML map
//! of names to strings); a document reads only those it declares (`use.secrets`). A declared
//! secret that is missing is the DSL's `authorization` error (403). Wherever a value a run
//! records could hold one (a task's input and output, its events, an error, the result), each
//! secret's value is replaced by `***` first.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{DslError, ErrorType};

/// What replaces a secret's value wherever a run records it.
pub const REDACTED: &str = "***";
/// The prefix of a secret's environment variable.
pub const ENV_PREFIX: &str = "AGENTRY_SECRET_";
/// The longest secret name.
const MAX_NAME: usize = 64;

/// Whether `name` can name a secret.
pub fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// The environment variable of the secret `name`.
pub fn env_name(name: &str) -> String {
    let tail: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("{ENV_PREFIX}{tail}")
}

/// The secrets the server holds, by name.
#[derive(Default, Clone)]
pub struct Secrets {
    file: BTreeMap<String, String>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("from_file", &self.file.len())
            .finish()
    }
}

impl Secrets {
    /// The secrets of a file (a JSON or YAML map of names to strings), besides the
    /// environment's.
    pub fn from_file(path: &Path) -> Result<Secrets, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let map: BTreeMap<String, Value> = serde_norway::from_str(&text)
            .map_err(|e| format!("{}: not a map of secrets: {e}", path.display()))?;
        let mut file = BTreeMap::new();
        for (name, value) in map {
            let Value::String(value) = value else {
                return Err(format!(
                    "{}: the secret {name} is not a string",
                    path.display()
                ));
            };
            if !is_name(&name) {
                return Err(format!("{}: {name} is not a secret name", path.display()));
            }
            file.insert(name, value);
        }
        Ok(Secrets { file })
    }

    /// The secret `name`: the environment's, else the file's.
    fn get(&self, name: &str) -> Option<String> {
        std::env::var(env_name(name))
            .ok()
            .or_else(|| self.file.get(name).cloned())
    }

    /// `$secrets` of a document that declares `names`, or the error of the first missing one.
    pub fn for_document(&self, names: &[String]) -> Result<Redacted, DslError> {
        let mut values = Map::new();
        for name in names {
            let Some(value) = self.get(name) else {
                let mut e = DslError::standard(
                    ErrorType::Authorization,
                    "Missing Secret",
                    format!(
                        "the secret {name} is not set ({} or the secrets file)",
                        env_name(name)
                    ),
                );
                e.instance = Some("/use/secrets".into());
                return Err(e);
            };
            values.insert(name.clone(), Value::String(value));
        }
        Ok(Redacted::new(Value::Object(values)))
    }

    /// `$secrets` of an agent file that declares `names`: those that are set (a missing one is
    /// null where it is read: an agent's key falls back to the offline model, a header or a
    /// token without its value is refused where it is used).
    pub fn available(&self, names: &[String]) -> Redacted {
        let values: Map<String, Value> = names
            .iter()
            .filter_map(|name| Some((name.clone(), Value::String(self.get(name)?))))
            .collect();
        Redacted::new(Value::Object(values))
    }
}

/// A run's `$secrets`, and what hides them.
#[derive(Debug, Default)]
pub struct Redacted {
    /// `$secrets`.
    pub values: Value,
    /// The values to hide, longest first (so that one inside another is hidden whole).
    hidden: Vec<String>,
}

impl Redacted {
    fn new(values: Value) -> Self {
        let mut hidden: Vec<String> = values
            .as_object()
            .map(|m| {
                m.values()
                    .filter_map(Value::as_str)
                    .filter(|v| !v.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        hidden.sort_by_key(|v| std::cmp::Reverse(v.len()));
        hidden.dedup();
        Redacted { values, hidden }
    }

    /// Whether there is anything to hide.
    pub fn is_empty(&self) -> bool {
        self.hidden.is_empty()
    }

    /// `text` with every secret replaced by [`REDACTED`].
    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.hidden {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), REDACTED);
            }
        }
        out
    }

    /// `value` with every secret in its strings (and keys) replaced.
    pub fn value(&self, value: &mut Value) {
        if self.is_empty() {
            return;
        }
        match value {
            Value::String(s) if self.hidden.iter().any(|h| s.contains(h.as_str())) => {
                *s = self.text(s);
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.value(v)),
            Value::Object(map) => {
                let taken = std::mem::take(map);
                for (k, mut v) in taken {
                    self.value(&mut v);
                    map.insert(self.text(&k), v);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_map_to_environment_variables() {
        assert_eq!(env_name("slackToken"), "AGENTRY_SECRET_SLACKTOKEN");
        assert_eq!(
            env_name("petstore.api-key"),
            "AGENTRY_SECRET_PETSTORE_API_KEY"
        );
        assert!(is_name("a.b-c_d") && !is_name("") && !is_name("a b"));
    }

    #[test]
    fn secrets_are_hidden_everywhere() {
        let r = Redacted::new(json!({"k": "s3cret", "long": "s3cret-and-more"}));
        let mut v =
            json!({"a": "Bearer s3cret-and-more", "b": ["x s3cret y"], "s3cret": 1, "n": 5});
        r.value(&mut v);
        assert_eq!(
            v,
            json!({"a": "Bearer ***", "b": ["x *** y"], "***": 1, "n": 5})
        );
    }

    #[test]
    fn a_missing_secret_is_an_authorization_error() {
        let e = Secrets::default()
            .for_document(&["surely-not-set-anywhere".into()])
            .unwrap_err();
        assert_eq!(e.status, 403);
        assert!(e.type_.ends_with("/errors/authorization"));
    }
}
