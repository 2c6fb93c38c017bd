//! agentry's shape check (`schema::check`) against the official Serverless Workflow SDK
//! (`@serverlessworkflow/sdk`: the specification's JSON Schema on ajv), on a corpus of
//! documents written for it: `tests/shapes/valid/*.yaml` and `tests/shapes/invalid/*.yaml`.
//!
//! - [`corpus_is_judged_by_its_folder`] needs nothing but the crate: every valid document has
//!   no problem; every invalid one has a problem at the pointer its `# expect:` line names.
//! - [`the_sdk_agrees`] runs `tests/node/dsl-validate.mjs` on the Node.js 22 of `tests/node`
//!   (installed by `scripts/install-test-deps.sh`) and asserts that the SDK judges every
//!   document the same, except the few of [`EXCEPTIONS`]; skipped, saying so, when that
//!   Node.js or the SDK is not installed.

use std::path::{Path, PathBuf};
use std::process::Command;

use agentry_definitions::{load, schema};
use serde_json::Value;

/// Documents on which agentry and the SDK (1.0.3-alpha1, schema 1.0.3) knowingly differ, each
/// with why: agentry follows the DSL reference where the SDK's schema is looser or lacks it.
const EXCEPTIONS: &[(&str, &str)] = &[
    (
        "valid/authentication-certificate.yaml",
        "the reference names a `certificate` authentication scheme; the schema has none",
    ),
    (
        "invalid/document-name-uppercase.yaml",
        "agentry wants a lowercase RFC 1123 label for names; the schema's pattern allows A-Z",
    ),
    (
        "invalid/top-level-unknown-property.yaml",
        "the reference lists the workflow's properties; the schema leaves the root open",
    ),
    (
        "invalid/oauth2-without-grant.yaml",
        "the reference requires `authority` and `grant`; the schema requires neither",
    ),
];

/// The crate's `tests/shapes`.
fn shapes() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/shapes")
}

/// The repository's `tests/node`.
fn node_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/node")
}

/// One document of the corpus.
struct Doc {
    /// `valid/NAME.yaml` or `invalid/NAME.yaml`.
    name: String,
    path: PathBuf,
    /// Whether it is in `valid/`.
    valid: bool,
    /// Whether agentry's check finds no problem.
    ours: bool,
    /// Where an invalid document's problem must be (its `# expect: POINTER` line).
    expect: Option<String>,
    /// agentry's problems, for messages.
    problems: Vec<String>,
    /// The pointers of agentry's problems.
    pointers: Vec<String>,
}

/// Every document of the corpus, checked by agentry, sorted by name.
fn corpus() -> Vec<Doc> {
    let mut docs = Vec::new();
    for (folder, valid) in [("valid", true), ("invalid", false)] {
        let dir = shapes().join(folder);
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for path in entries.flatten().map(|e| e.path()) {
            if path.extension().is_none_or(|e| e != "yaml") {
                continue;
            }
            let file = path.file_name().unwrap_or_default().to_string_lossy();
            let name = format!("{folder}/{file}");
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
            let expect = text
                .lines()
                .find_map(|l| l.strip_prefix("# expect:"))
                .map(|p| p.trim().to_owned());
            let problems = match load::parse(&name, &text, false) {
                Ok(doc) => schema::check(&name, &doc),
                Err(problem) => vec![problem],
            };
            docs.push(Doc {
                ours: problems.is_empty(),
                pointers: problems.iter().map(|p| p.pointer.clone()).collect(),
                problems: problems.iter().map(ToString::to_string).collect(),
                name,
                path,
                valid,
                expect,
            });
        }
    }
    docs.sort_by(|a, b| a.name.cmp(&b.name));
    docs
}

#[test]
fn corpus_is_judged_by_its_folder() {
    let docs = corpus();
    assert!(docs.len() >= 30, "the corpus has {} documents", docs.len());
    let mut wrong = Vec::new();
    for doc in &docs {
        if doc.valid && !doc.ours {
            wrong.push(format!(
                "{} should be valid:\n  {}",
                doc.name,
                doc.problems.join("\n  ")
            ));
        } else if !doc.valid {
            match &doc.expect {
                None => wrong.push(format!("{} has no `# expect: POINTER` line", doc.name)),
                Some(pointer) if !doc.pointers.contains(pointer) => wrong.push(format!(
                    "{} should have a problem at {pointer:?}; it has:\n  {}",
                    doc.name,
                    doc.problems.join("\n  ")
                )),
                Some(_) => {}
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The SDK's verdict on each file: (valid, errors), by path.
fn sdk_verdicts(node: &Path, files: &[&Path]) -> Vec<(String, bool, Vec<String>)> {
    let out = Command::new(node)
        .arg("dsl-validate.mjs")
        .args(files)
        .current_dir(node_dir())
        .output()
        .expect("running tests/node/dsl-validate.mjs");
    assert!(
        out.status.success(),
        "dsl-validate.mjs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            let errors = v["errors"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            (
                v["file"].as_str().unwrap_or_default().to_owned(),
                v["valid"].as_bool().unwrap_or(false),
                errors,
            )
        })
        .collect()
}

#[test]
fn the_sdk_agrees() {
    let node = node_dir().join("node_modules/.bin/node");
    let sdk = node_dir().join("node_modules/@serverlessworkflow/sdk/package.json");
    if !node.exists() || !sdk.exists() {
        println!(
            "skipped: {} or {} is missing (scripts/install-test-deps.sh installs them)",
            node.display(),
            sdk.display()
        );
        return;
    }
    let docs = corpus();
    let files: Vec<&Path> = docs.iter().map(|d| d.path.as_path()).collect();
    let verdicts = sdk_verdicts(&node, &files);
    assert_eq!(verdicts.len(), docs.len(), "one verdict a document");
    let mut disagreements = Vec::new();
    for (doc, (file, sdk_valid, errors)) in docs.iter().zip(&verdicts) {
        assert_eq!(
            Path::new(file),
            doc.path,
            "verdicts in the order of the files"
        );
        let excepted = EXCEPTIONS.iter().any(|(name, _)| *name == doc.name);
        match (doc.ours == *sdk_valid, excepted) {
            (true, false) | (false, true) => {}
            (false, false) => disagreements.push(format!(
                "{}: agentry says {}, the SDK says {}{}",
                doc.name,
                verdict(doc.ours),
                verdict(*sdk_valid),
                if errors.is_empty() {
                    String::new()
                } else {
                    format!(
                        ":\n  {}",
                        errors
                            .iter()
                            .take(6)
                            .cloned()
                            .collect::<Vec<_>>()
                            .join("\n  ")
                    )
                }
            )),
            (true, true) => disagreements.push(format!(
                "{}: listed in EXCEPTIONS, but agentry and the SDK now agree ({})",
                doc.name,
                verdict(doc.ours)
            )),
        }
    }
    println!(
        "{} documents, {} known exceptions",
        docs.len(),
        EXCEPTIONS.len()
    );
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
}

fn verdict(valid: bool) -> &'static str {
    if valid { "valid" } else { "invalid" }
}
