//! Reading definitions: one file, or a directory's `workflows/**/*.{yaml,yml,json}`, checked
//! against the DSL's schema and agentry's own rules. A directory with any problem is refused
//! whole, with every problem of every file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::model::Document;
use crate::problem::Problem;

/// The largest definition file read.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// The most definition files one directory holds.
pub const MAX_FILES: usize = 1_000;
/// How deep the directory tree under `workflows/` may go.
const MAX_DIR_DEPTH: usize = 8;

/// Parses a document's text: JSON when `json` (the file's extension or content type says so),
/// else YAML (of which JSON is a subset).
pub fn parse(name: &str, text: &str, json: bool) -> Result<Value, Problem> {
    let parsed = if json {
        serde_json::from_str(text).map_err(|e| e.to_string())
    } else {
        serde_norway::from_str(text).map_err(|e| e.to_string())
    };
    parsed.map_err(|reason| {
        Problem::new(
            name,
            "",
            format!(
                "not a {} document: {reason}",
                if json { "JSON" } else { "YAML" }
            ),
        )
    })
}

/// A digest of a document's content: SHA-1 of its JSON with every object's keys sorted, so that
/// the same document written as JSON or YAML, its keys in any order, has one digest.
pub fn digest(source: &Value) -> String {
    use sha1::{Digest, Sha1};
    fn canonical(v: &Value, out: &mut String) {
        match v {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    canonical(&map[k], out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    canonical(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut text = String::new();
    canonical(source, &mut text);
    Sha1::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Reads one document: the DSL's schema first, then agentry's rules (what it can run).
pub fn read(name: &str, source: Value) -> Result<Document, Vec<Problem>> {
    let problems = crate::schema::check(name, &source);
    if !problems.is_empty() {
        return Err(problems);
    }
    Document::read(name, source)
}

/// Reads the file at `path`, reported as `name`.
pub fn read_file(path: &Path, name: &str) -> Result<Document, Vec<Problem>> {
    let text = read_text(path, name)?;
    let json = path.extension().is_some_and(|e| e == "json");
    let source = parse(name, &text, json).map_err(|p| vec![p])?;
    read(name, source)
}

/// The text of the definition file at `path` (reported as `name`), at most
/// [`MAX_FILE_BYTES`].
pub(crate) fn read_text(path: &Path, name: &str) -> Result<String, Vec<Problem>> {
    let size = std::fs::metadata(path)
        .map_err(|e| vec![Problem::new(name, "", e.to_string())])?
        .len();
    if size > MAX_FILE_BYTES {
        return Err(vec![Problem::new(
            name,
            "",
            format!("the file is larger than {MAX_FILE_BYTES} bytes"),
        )]);
    }
    std::fs::read_to_string(path).map_err(|e| vec![Problem::new(name, "", e.to_string())])
}

/// The definition files under `dir/workflows`, sorted.
fn files(dir: &Path) -> Result<Vec<PathBuf>, Vec<Problem>> {
    let root = dir.join("workflows");
    let mut found = Vec::new();
    let mut stack = vec![(root.clone(), 0)];
    while let Some((d, depth)) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if d == root && e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Vec::new());
            }
            Err(e) => {
                return Err(vec![Problem::new(
                    d.display().to_string(),
                    "",
                    e.to_string(),
                )]);
            }
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() && depth < MAX_DIR_DEPTH {
                stack.push((path, depth + 1));
            } else if (kind.is_file() || kind.is_symlink())
                && path
                    .extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| ["yaml", "yml", "json"].contains(&e))
            {
                found.push(path);
            }
        }
        if found.len() > MAX_FILES {
            return Err(vec![Problem::new(
                root.display().to_string(),
                "",
                format!("more than {MAX_FILES} definition files"),
            )]);
        }
    }
    found.sort();
    Ok(found)
}

/// Reads every workflow definition of `dir` (`dir/workflows/**/*.{yaml,yml,json}`; none when
/// there is no such folder). Any problem refuses them all; a name defined twice is a problem
/// naming both files.
pub fn read_dir(dir: &Path) -> Result<Vec<Arc<Document>>, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut docs = Vec::new();
    let mut seen: HashMap<String, String> = HashMap::new();
    for path in files(dir)? {
        let name = path
            .strip_prefix(dir)
            .unwrap_or(&path)
            .display()
            .to_string();
        match read_file(&path, &name) {
            Ok(doc) => {
                if let Some(first) = seen.insert(doc.name.clone(), name.clone()) {
                    problems.push(Problem::new(
                        &name,
                        "/document/name",
                        format!("the workflow {} is also defined in {first}", doc.name),
                    ));
                }
                docs.push(Arc::new(doc));
            }
            Err(p) => problems.extend(p),
        }
    }
    if problems.is_empty() {
        Ok(docs)
    } else {
        Err(problems)
    }
}
