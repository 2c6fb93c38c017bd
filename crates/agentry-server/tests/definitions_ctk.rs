//! The Serverless Workflow DSL's conformance kit (CTK) run against the real `agentry` binary.
//!
//! The kit (`ctk/features/*.feature` of `serverlessworkflow/specification`, commit d758f0b) is
//! not held here: its translation is (`tests/ctk/kit.json`, every scenario as the small Gherkin
//! reader below understands it). Given the kit's folder (`AGENTRY_CTK_FEATURES`), the runner
//! reads the feature files themselves, `the_translation_is_in_sync_with_the_kit` compares them
//! with the translation (and, with `AGENTRY_CTK_WRITE=1`, writes it again first). Each scenario's
//! definition is written to
//! `DIR/workflows/<index>.yaml`, and `agentry serve --definitions DIR` started on SQLite in a
//! temporary directory (once per group of scenarios whose `document.name`s differ: the kit reuses
//! some names). Each scenario then runs through `POST /workflows/{document.name}/execute`, and
//! its `Then`/`And` steps are checked against the answer, the execution's state (the DSL error)
//! and its stored event log (the order its tasks ran in). The kit's internet endpoints are served
//! by a local stand-in ([`start_stand_in`]), and the definitions pointed at it
//! ([`point_at_stand_in`]): the only change made to a kit definition.
//!
//! Every scenario is its own check; the end-to-end test fails once, listing every scenario that
//! differs. A step phrase the runner does not know fails the test (a kit update cannot silently
//! skip checks).

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{basic_auth, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Scenarios known to differ, with the reason: they are run and reported but do not fail the
/// test, and the test fails once one of them passes (so that the list stays true). At most two.
const EXPECTED_TO_DIFFER: &[(&str, &str)] = &[(
    "Try Handle Caught Error",
    "the kit catches `https://serverlessworkflow.io/dsl/errors/types/communication`; \
     dsl-reference.md's standard type, which agentry raises, is \
     `https://serverlessworkflow.io/spec/1.0.0/errors/communication` (docs/DEFINITIONS.md)",
)];

/// The longest wait for any one request to the server or the stand-in.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest wait for the server's listening line (migrations and definitions loaded).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The number of scenarios in the kit.
const KIT_SCENARIOS: usize = 21;

/// The kit's feature files, when a folder of them is given (`AGENTRY_CTK_FEATURES`): this
/// repository does not hold the kit itself, only its translation (`tests/ctk/kit.json`).
fn features_dir() -> Option<PathBuf> {
    std::env::var_os("AGENTRY_CTK_FEATURES").map(PathBuf::from)
}

/// The translation of the kit this repository keeps: every scenario as the reader below
/// understands it (`the_translation_is_in_sync_with_the_kit` compares it with the kit's
/// feature files, and writes it from them with `AGENTRY_CTK_WRITE=1`).
fn translation_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ctk/kit.json")
}

/// The kit as the scenarios to run: from its feature files when given, else its translation.
fn kit() -> Result<Vec<Case>, String> {
    match features_dir() {
        Some(dir) => read_features(&dir),
        None => translation(),
    }
}

/// The kept translation.
fn translation() -> Result<Vec<Case>, String> {
    let path = translation_file();
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

// ---------------------------------------------------------------------------------------------
// The Gherkin reader: the subset the kit uses (Feature and its description, Scenario, steps, doc
// strings, comments); anything else is refused, not skipped.
// ---------------------------------------------------------------------------------------------

/// One scenario as written in a feature file.
#[derive(Debug)]
struct Scenario {
    file: String,
    line: usize,
    name: String,
    steps: Vec<Step>,
}

/// One step: its text after the keyword, and its doc string when it has one.
#[derive(Debug)]
struct Step {
    line: usize,
    text: String,
    doc: Option<String>,
}

/// The keywords a step starts with.
const STEP_KEYWORDS: [&str; 5] = ["Given ", "When ", "Then ", "And ", "But "];

/// Gherkin constructs this reader does not implement: a file using one is refused.
const UNSUPPORTED: [&str; 9] = [
    "Background:",
    "Scenario Outline:",
    "Scenario Template:",
    "Examples:",
    "Scenarios:",
    "Example:",
    "Rule:",
    "@",
    "|",
];

/// The scenarios of one feature file (`file` names it in errors).
fn parse_feature(file: &str, text: &str) -> Result<Vec<Scenario>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut scenarios: Vec<Scenario> = Vec::new();
    let mut in_feature = false;
    let mut i = 0;
    while i < lines.len() {
        let (at, line) = (i + 1, lines[i].trim());
        i += 1;
        let err = |what: &str| format!("{file}:{at}: {what}: {line:?}");
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(u) = UNSUPPORTED.iter().find(|u| line.starts_with(*u)) {
            return Err(err(&format!("`{u}` is not supported by this reader")));
        }
        if line.starts_with("Feature:") {
            if in_feature {
                return Err(err("a second Feature"));
            }
            in_feature = true;
        } else if let Some(name) = line.strip_prefix("Scenario:") {
            if !in_feature {
                return Err(err("a Scenario before the Feature"));
            }
            scenarios.push(Scenario {
                file: file.to_owned(),
                line: at,
                name: name.trim().to_owned(),
                steps: Vec::new(),
            });
        } else if is_doc_fence(line) {
            let Some(step) = scenarios.last_mut().and_then(|s| s.steps.last_mut()) else {
                return Err(err("a doc string without a step"));
            };
            if step.doc.is_some() {
                return Err(err("a second doc string for one step"));
            }
            let (doc, next) = doc_string(file, &lines, at - 1)?;
            step.doc = Some(doc);
            i = next;
        } else if let Some(text) = STEP_KEYWORDS.iter().find_map(|k| line.strip_prefix(k)) {
            let Some(scenario) = scenarios.last_mut() else {
                return Err(err("a step outside a Scenario"));
            };
            scenario.steps.push(Step {
                line: at,
                text: text.trim().to_owned(),
                doc: None,
            });
        } else if !in_feature || !scenarios.is_empty() {
            // Free text is the feature's description, before its first scenario; anywhere else
            // it could be a misspelt step.
            return Err(err("not understood"));
        }
    }
    Ok(scenarios)
}

/// Whether `line` (trimmed) opens or closes a doc string.
fn is_doc_fence(line: &str) -> bool {
    line.starts_with("\"\"\"") || line.starts_with("```")
}

/// The doc string opened on `lines[open]`, without the opening fence's indentation, and the
/// index of the line after its closing fence.
fn doc_string(file: &str, lines: &[&str], open: usize) -> Result<(String, usize), String> {
    let opener = lines[open];
    let indent = leading_blanks(opener, usize::MAX);
    let fence = &opener.trim()[..3];
    let media = opener.trim()[3..].trim();
    if !matches!(media, "" | "yaml" | "json") {
        return Err(format!(
            "{file}:{}: a doc string of type {media:?}",
            open + 1
        ));
    }
    let mut body = Vec::new();
    for (k, line) in lines.iter().enumerate().skip(open + 1) {
        if line.trim() == fence {
            return Ok((body.join("\n"), k + 1));
        }
        body.push(&line[leading_blanks(line, indent)..]);
    }
    Err(format!("{file}:{}: a doc string never closed", open + 1))
}

/// How many of the first `most` bytes of `line` are spaces or tabs.
fn leading_blanks(line: &str, most: usize) -> usize {
    line.bytes()
        .take(most)
        .take_while(|b| *b == b' ' || *b == b'\t')
        .count()
}

// ---------------------------------------------------------------------------------------------
// The kit's step phrases, understood.
// ---------------------------------------------------------------------------------------------

/// What a scenario expects: one per assertion step.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
enum Expect {
    /// `Then the workflow should complete`
    Complete,
    /// `Then the workflow should complete with output:` (deep equality)
    CompleteWith(Value),
    /// `Then the workflow should fault`
    Fault,
    /// `Then the workflow should fault with error:` (each given field equal)
    FaultWith(Value),
    /// `And the workflow output should have properties 'a', 'b.c'` (dotted paths exist)
    Properties(Vec<String>),
    /// `And the workflow output should have a 'x' property with value:`
    PropertyValue(String, Value),
    /// `And the workflow output should have a 'x' property containing N items`
    PropertyCount(String, usize),
    /// `And <task> should run first`: its task-start is the first.
    RunsFirst(String),
    /// `And <task> should run last`: its task-complete is the last.
    RunsLast(String),
    /// `And <later> should run after <earlier>` (or `<earlier> should run before <later>`):
    /// the earlier's task-complete comes before the later's task-start.
    RunsAfter { later: String, earlier: String },
}

impl Expect {
    /// Whether this is about how the execution ended (checked first; later checks of a
    /// scenario whose status differs would only repeat it).
    fn is_status(&self) -> bool {
        matches!(
            self,
            Expect::Complete | Expect::CompleteWith(_) | Expect::Fault | Expect::FaultWith(_)
        )
    }

    /// Whether checking it needs the execution's event log.
    fn needs_events(&self) -> bool {
        matches!(
            self,
            Expect::RunsFirst(_) | Expect::RunsLast(_) | Expect::RunsAfter { .. }
        )
    }
}

/// One step, understood.
enum Understood {
    Definition(String),
    Input(Value),
    Execute,
    Expect(Expect),
}

/// A scenario ready to run.
#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Case {
    /// Its position in the kit (files in name order, scenarios in file order).
    index: usize,
    file: String,
    line: usize,
    name: String,
    /// The definition as the kit writes it (YAML).
    definition: String,
    /// Its `document.name`: the workflow's id.
    workflow: String,
    input: Value,
    expects: Vec<Expect>,
}

impl Case {
    /// `file:line "name"`, for reports.
    fn title(&self) -> String {
        format!("{}:{} {:?}", self.file, self.line, self.name)
    }
}

/// The scenario `s` as a case to run: every step understood, in a sensible order.
fn case_of(index: usize, s: &Scenario) -> Result<Case, String> {
    let mut definition = None;
    let mut input = None;
    let mut executed = false;
    let mut expects = Vec::new();
    for step in &s.steps {
        let err = |what: &str| format!("{}:{}: {what}: {:?}", s.file, step.line, step.text);
        match understand(step).map_err(|e| err(&e))? {
            Understood::Definition(_) | Understood::Input(_) if executed => {
                return Err(err("an arrangement after `When the workflow is executed`"));
            }
            Understood::Definition(_) if definition.is_some() => {
                return Err(err("a second definition"));
            }
            Understood::Input(_) if input.is_some() => return Err(err("a second input")),
            Understood::Definition(d) => definition = Some(d),
            Understood::Input(v) => input = Some(v),
            Understood::Execute if executed => return Err(err("a second execution")),
            Understood::Execute => executed = true,
            Understood::Expect(_) if !executed => {
                return Err(err("an assertion before `When the workflow is executed`"));
            }
            Understood::Expect(e) => expects.push(e),
        }
    }
    let here = format!("{}:{} {:?}", s.file, s.line, s.name);
    let definition = definition.ok_or_else(|| format!("{here}: no definition"))?;
    if !executed || expects.is_empty() {
        return Err(format!("{here}: never executed, or nothing checked"));
    }
    let workflow = document_name(&definition).map_err(|e| format!("{here}: {e}"))?;
    Ok(Case {
        index,
        file: s.file.clone(),
        line: s.line,
        name: s.name.clone(),
        definition,
        workflow,
        input: input.unwrap_or_else(|| json!({})),
        expects,
    })
}

/// One step's meaning, or why it has none.
fn understand(step: &Step) -> Result<Understood, String> {
    let doc = step.doc.as_deref();
    let plain = |u: Understood| match doc {
        Some(_) => Err("this step takes no doc string".to_owned()),
        None => Ok(u),
    };
    let with_doc = || doc.ok_or_else(|| "this step needs a doc string".to_owned());
    let expect = |e: Expect| Understood::Expect(e);
    match step.text.as_str() {
        "a workflow with definition:" => Ok(Understood::Definition(with_doc()?.to_owned())),
        "given the workflow input is:" => Ok(Understood::Input(yaml(with_doc()?)?)),
        "the workflow is executed" => plain(Understood::Execute),
        "the workflow should complete" => plain(expect(Expect::Complete)),
        "the workflow should complete with output:" => {
            Ok(expect(Expect::CompleteWith(yaml(with_doc()?)?)))
        }
        "the workflow should fault" => plain(expect(Expect::Fault)),
        "the workflow should fault with error:" => {
            Ok(expect(Expect::FaultWith(yaml(with_doc()?)?)))
        }
        text => {
            if let Some(e) = output_phrase(text, doc)? {
                return Ok(expect(e));
            }
            match order_phrase(text) {
                Some(e) => plain(expect(e)),
                None => Err("a step phrase this runner does not know".to_owned()),
            }
        }
    }
}

/// The `the workflow output should have ...` phrases; `None` for any other text.
fn output_phrase(text: &str, doc: Option<&str>) -> Result<Option<Expect>, String> {
    if let Some(list) = text.strip_prefix("the workflow output should have properties ") {
        if doc.is_some() {
            return Err("this step takes no doc string".to_owned());
        }
        return Ok(Some(Expect::Properties(quoted_list(list)?)));
    }
    let Some(rest) = text.strip_prefix("the workflow output should have a '") else {
        return Ok(None);
    };
    let Some((property, tail)) = rest.split_once('\'') else {
        return Err("an unclosed property name".to_owned());
    };
    let property = property.to_owned();
    match (tail.trim(), doc) {
        ("property with value:", Some(d)) => Ok(Some(Expect::PropertyValue(property, yaml(d)?))),
        (t, None) => {
            let count = t
                .strip_prefix("property containing ")
                .and_then(|t| t.strip_suffix(" items"))
                .and_then(|n| n.trim().parse().ok())
                .ok_or_else(|| "a property phrase this runner does not know".to_owned())?;
            Ok(Some(Expect::PropertyCount(property, count)))
        }
        _ => Err("a property phrase with or without a doc string it should not have".to_owned()),
    }
}

/// The task-order phrases: `<task> should run first|last`, `<a> should run after|before <b>`.
fn order_phrase(text: &str) -> Option<Expect> {
    let words: Vec<&str> = text.split_whitespace().collect();
    match words.as_slice() {
        [task, "should", "run", "first"] => Some(Expect::RunsFirst((*task).to_owned())),
        [task, "should", "run", "last"] => Some(Expect::RunsLast((*task).to_owned())),
        [a, "should", "run", "after", b] => Some(Expect::RunsAfter {
            later: (*a).to_owned(),
            earlier: (*b).to_owned(),
        }),
        [a, "should", "run", "before", b] => Some(Expect::RunsAfter {
            later: (*b).to_owned(),
            earlier: (*a).to_owned(),
        }),
        _ => None,
    }
}

/// `'a', 'b.c'` as `["a", "b.c"]`.
fn quoted_list(list: &str) -> Result<Vec<String>, String> {
    list.split(',')
        .map(|item| {
            item.trim()
                .strip_prefix('\'')
                .and_then(|i| i.strip_suffix('\''))
                .filter(|i| !i.is_empty() && !i.contains('\''))
                .map(str::to_owned)
                .ok_or_else(|| format!("not a list of single-quoted names: {list:?}"))
        })
        .collect()
}

/// A YAML text as JSON.
fn yaml(text: &str) -> Result<Value, String> {
    serde_norway::from_str(text).map_err(|e| format!("not YAML: {e}"))
}

/// A definition's `document.name`, which must be usable as it is in a URL path.
fn document_name(definition: &str) -> Result<String, String> {
    let doc = yaml(definition)?;
    let name = doc["document"]["name"]
        .as_str()
        .ok_or("the definition has no `document.name`")?;
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() || !name.chars().all(plain) {
        return Err(format!("`document.name` {name:?} is not a plain name"));
    }
    Ok(name.to_owned())
}

/// Every scenario of every feature file in `dir`, understood; or every reason why not.
fn read_features(dir: &Path) -> Result<Vec<Case>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("reading {}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "feature"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    let mut errors = Vec::new();
    for path in files {
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let scenarios = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading {}: {e}", path.display()))
            .and_then(|text| parse_feature(&name, &text));
        match scenarios {
            Ok(scenarios) => {
                for s in &scenarios {
                    match case_of(cases.len() + errors.len(), s) {
                        Ok(c) => cases.push(c),
                        Err(e) => errors.push(e),
                    }
                }
            }
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(cases)
    } else {
        Err(format!("the kit is not understood:\n{}", errors.join("\n")))
    }
}

/// The scenarios in groups whose workflow ids differ (first come, first placed), each group run
/// by one server.
fn rounds(cases: &[Case]) -> Vec<Vec<usize>> {
    let mut rounds: Vec<Vec<usize>> = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let free = rounds
            .iter()
            .position(|r| r.iter().all(|&j| cases[j].workflow != case.workflow));
        match free {
            Some(r) => rounds[r].push(i),
            None => rounds.push(vec![i]),
        }
    }
    rounds
}

// ---------------------------------------------------------------------------------------------
// The stand-in for the kit's internet endpoints.
// ---------------------------------------------------------------------------------------------

/// The scheme and host of every internet endpoint the kit calls, all served by the stand-in.
const KIT_HOSTS: [&str; 2] = ["https://petstore.swagger.io", "https://httpbin.org"];

/// `definition` with every URL on a [`KIT_HOSTS`] host pointed at the stand-in at `base`
/// (`http://127.0.0.1:<port>`): the scheme and host replaced, the path and query kept. This is
/// the only change made to a kit definition (the issue allows internet endpoints pointed at a
/// local stand-in); other URLs (event sources, error types) are left as written.
fn point_at_stand_in(definition: &str, base: &str) -> String {
    KIT_HOSTS.iter().fold(definition.to_owned(), |text, host| {
        text.replace(&format!("{host}/"), &format!("{base}/"))
    })
}

/// The endpoints of a definition (strings under `uri` or `endpoint`) that are on the internet:
/// anything `http(s)://` not on the stand-in at `base`. A kit update that calls a new host
/// shows up here.
fn internet_endpoints(definition: &Value, base: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![definition];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    match v.as_str() {
                        Some(s) if matches!(k.as_str(), "uri" | "endpoint") => {
                            if s.starts_with("http") && !s.starts_with(&format!("{base}/")) {
                                found.push(s.to_owned());
                            }
                        }
                        _ => stack.push(v),
                    }
                }
            }
            Value::Array(a) => stack.extend(a),
            _ => {}
        }
    }
    found
}

/// The user name the kit logs in with at httpbin's basic-auth endpoint.
const BASIC_USER: &str = "serverless-workflow";
/// The password the kit logs in with at httpbin's basic-auth endpoint.
const BASIC_PASSWORD: &str = "conformance-test";

/// A local stand-in answering, as the real services would, exactly the requests the kit makes:
/// the Swagger petstore (`/v2/pet/findByStatus?status=available`, `/v2/pet/1`, `/v2/pet/2`, the
/// 404 of `/v2/pet/getPetByName/Milou`, its Swagger 2.0 document `/v2/swagger.json` naming the
/// stand-in as its host) and httpbin (`/basic-auth/{user}/{password}`: 200 with the kit's
/// credentials, else 401). Anything else is a 404.
async fn start_stand_in() -> MockServer {
    let server = MockServer::builder().start().await;
    let host = server.address().to_string();
    let get = |p: String| Mock::given(method("GET")).and(path(p));
    get("/v2/pet/findByStatus".into())
        .and(query_param("status", "available"))
        .respond_with(json_answer(200, json!([pet(1, "doggie"), pet(2, "Milou")])))
        .mount(&server)
        .await;
    for (id, name) in [(1, "doggie"), (2, "Milou")] {
        get(format!("/v2/pet/{id}"))
            .respond_with(json_answer(200, pet(id, name)))
            .mount(&server)
            .await;
    }
    get("/v2/pet/getPetByName/Milou".into())
        .respond_with(json_answer(
            404,
            json!({"code": 404, "type": "unknown", "message": "HTTP 404 Not Found"}),
        ))
        .mount(&server)
        .await;
    get("/v2/swagger.json".into())
        .respond_with(json_answer(200, petstore_openapi(&host)))
        .mount(&server)
        .await;
    let basic = format!("/basic-auth/{BASIC_USER}/{BASIC_PASSWORD}");
    get(basic.clone())
        .and(basic_auth(BASIC_USER, BASIC_PASSWORD))
        .respond_with(json_answer(
            200,
            json!({"authenticated": true, "user": BASIC_USER}),
        ))
        .with_priority(1)
        .mount(&server)
        .await;
    get(basic)
        .respond_with(
            ResponseTemplate::new(401)
                .insert_header("WWW-Authenticate", "Basic realm=\"Fake Realm\""),
        )
        .with_priority(2)
        .mount(&server)
        .await;
    server
}

/// An answer with a JSON body (`Content-Type: application/json`).
fn json_answer(status: u16, body: Value) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(body)
}

/// A pet as the petstore describes one.
fn pet(id: u64, name: &str) -> Value {
    json!({
        "id": id,
        "category": {"id": 1, "name": "Dogs"},
        "name": name,
        "photoUrls": ["https://example.com/photos/1.jpg"],
        "tags": [{"id": 1, "name": "friendly"}],
        "status": "available",
    })
}

/// The petstore's Swagger 2.0 document, cut to the two operations the kit calls, with the
/// stand-in (`host` as `127.0.0.1:<port>`, plain HTTP) as its host.
fn petstore_openapi(host: &str) -> Value {
    let pet_ref = json!({"$ref": "#/definitions/Pet"});
    json!({
        "swagger": "2.0",
        "info": {"title": "Swagger Petstore (stand-in)", "version": "1.0.7"},
        "host": host,
        "basePath": "/v2",
        "schemes": ["http"],
        "paths": {
            "/pet/findByStatus": {"get": {
                "tags": ["pet"],
                "summary": "Finds Pets by status",
                "operationId": "findPetsByStatus",
                "produces": ["application/json"],
                "parameters": [{
                    "name": "status", "in": "query", "required": true, "type": "array",
                    "items": {"type": "string", "enum": ["available", "pending", "sold"], "default": "available"},
                    "collectionFormat": "multi",
                }],
                "responses": {
                    "200": {"description": "successful operation", "schema": {"type": "array", "items": pet_ref}},
                    "400": {"description": "Invalid status value"},
                },
            }},
            "/pet/{petId}": {"get": {
                "tags": ["pet"],
                "summary": "Find pet by ID",
                "operationId": "getPetById",
                "produces": ["application/json"],
                "parameters": [{
                    "name": "petId", "in": "path", "required": true, "type": "integer", "format": "int64",
                }],
                "responses": {
                    "200": {"description": "successful operation", "schema": pet_ref},
                    "400": {"description": "Invalid ID supplied"},
                    "404": {"description": "Pet not found"},
                },
            }},
        },
        "definitions": {"Pet": {
            "type": "object",
            "required": ["name", "photoUrls"],
            "properties": {
                "id": {"type": "integer", "format": "int64"},
                "name": {"type": "string"},
                "photoUrls": {"type": "array", "items": {"type": "string"}},
                "status": {"type": "string", "enum": ["available", "pending", "sold"]},
            },
        }},
    })
}

/// The requests the stand-in received from index `from` on, as `METHOD /path?query` lines.
async fn stand_in_requests(stand_in: &MockServer, from: usize) -> Vec<String> {
    let seen = stand_in.received_requests().await.unwrap_or_default();
    seen.iter()
        .skip(from)
        .map(|r| match r.url.query() {
            Some(q) => format!("{} {}?{q}", r.method, r.url.path()),
            None => format!("{} {}", r.method, r.url.path()),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The server, started as an operator would.
// ---------------------------------------------------------------------------------------------

/// The `agentry` binary with a clean environment.
fn agentry() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_agentry"));
    for var in common::definitions::ENV_CLEARED {
        c.env_remove(var);
    }
    c.env("RUST_LOG", "warn").env("NO_COLOR", "1");
    c
}

/// What `agentry serve --help` prints (its stdout), within [`START_TIMEOUT`].
fn serve_help() -> Result<String, String> {
    let mut child = common::Killed(
        agentry()
            .args(["serve", "--help"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting agentry: {e}"))?,
    );
    let mut stdout = child.0.stdout.take().ok_or("no stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        let _ = tx.send(text);
    });
    rx.recv_timeout(START_TIMEOUT)
        .map_err(|_| format!("`agentry serve --help` did not end within {START_TIMEOUT:?}"))
}

/// A directory of its own under the system's temporary directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        let dir = std::env::temp_dir().join(format!("agentry-ctk-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(dir.join("workflows")).expect("a temporary directory");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `agentry serve --definitions DIR`, killed when dropped.
struct Server {
    _child: common::Killed,
    base: String,
    log: PathBuf,
}

/// Starts `agentry serve --definitions dir` on a SQLite file in `dir`, on a free port, its
/// stderr in `dir/agentry.log`; fails after [`START_TIMEOUT`] without its listening line.
fn start_server(dir: &Path) -> Result<Server, String> {
    let log = dir.join("agentry.log");
    let stderr = std::fs::File::create(&log).map_err(|e| format!("creating the log: {e}"))?;
    let database = format!("sqlite://{}", dir.join("agentry.db").display());
    let mut cmd = agentry();
    cmd.args([
        "serve",
        "--bind",
        "127.0.0.1:0",
        "--database-url",
        &database,
    ])
    .arg("--definitions")
    .arg(dir)
    .stdout(Stdio::piped())
    .stderr(stderr);
    let mut child = common::Killed(cmd.spawn().map_err(|e| format!("starting agentry: {e}"))?);
    let stdout = child.0.stdout.take().ok_or("no stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        let _ = tx.send(line);
        // Whatever else it prints is read and dropped, so that it never blocks on a full pipe.
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    let line = match rx.recv_timeout(START_TIMEOUT) {
        Ok(line) if line.is_empty() => Err("it ended before it listened".to_owned()),
        Ok(line) => Ok(line),
        Err(_) => Err(format!("it did not listen within {START_TIMEOUT:?}")),
    };
    let addr = line.and_then(|line| {
        line.trim()
            .strip_prefix("agentry listening on http://")
            .map(str::to_owned)
            .ok_or_else(|| format!("it printed {line:?}, not its listening line"))
    });
    let addr = addr.map_err(|e| format!("{e}; its log:\n{}", log_tail(&log)))?;
    Ok(Server {
        base: format!("http://{addr}"),
        _child: child,
        log,
    })
}

/// The last lines of a log file (bounded), for a report.
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(40)..].join("\n");
    clip(&tail, 6000)
}

// ---------------------------------------------------------------------------------------------
// Running a scenario and checking what it expects.
// ---------------------------------------------------------------------------------------------

/// How one execution ended, as the server tells it.
#[derive(Debug, Default)]
struct Outcome {
    /// `data.status` of the execute answer (`error` for the `execution_failed` refusal).
    status: String,
    /// `data.result` of the execute answer.
    result: Value,
    /// `data.error` of the execution's state (the DSL error's fields).
    error: Value,
    /// The execution's stored events, when a check needs them.
    events: Vec<Value>,
}

/// An HTTP client that waits at most [`REQUEST_TIMEOUT`] for a whole answer, and never goes
/// through a proxy.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .no_proxy()
        .build()
        .expect("an HTTP client")
}

/// Sends `req`: the answer's status and JSON body (its text as a string when not JSON).
async fn send(req: reqwest::RequestBuilder) -> Result<(u16, Value), String> {
    let resp = req
        .send()
        .await
        .map_err(|e| format!("request failed: {e}"))?;
    let status = resp.status().as_u16();
    let text = resp
        .text()
        .await
        .map_err(|e| format!("reading the answer failed: {e}"))?;
    Ok((
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    ))
}

/// Runs `case` on the server at `base` as execution `ctk-<index>`: the execute answer, the
/// state's error, and the event log when a check needs it.
async fn run_case(client: &reqwest::Client, base: &str, case: &Case) -> Result<Outcome, String> {
    let execution = format!("ctk-{:02}", case.index);
    let workflow = format!("{base}/workflows/{}", case.workflow);
    let body = json!({"input": case.input, "options": {"executionId": execution}});
    let (code, answer) = send(client.post(format!("{workflow}/execute")).json(&body)).await?;
    let status = match (code, answer["data"]["status"].as_str()) {
        (200..=299, Some(s)) => s.to_owned(),
        // The execute route's answer to an execution that ended in error (its state says why).
        (500, _) if answer["code"] == "execution_failed" => "error".to_owned(),
        _ => return Err(format!("execute answered {code}: {}", clip_value(&answer))),
    };
    let execution = format!("{workflow}/executions/{execution}");
    let (code, state) = send(client.get(format!("{execution}/state"))).await?;
    if code != 200 {
        return Err(format!("state answered {code}: {}", clip_value(&state)));
    }
    let events = if case.expects.iter().any(Expect::needs_events) {
        events(client, &execution).await?
    } else {
        Vec::new()
    };
    Ok(Outcome {
        status,
        result: answer["data"]["result"].clone(),
        error: state["data"]["error"].clone(),
        events,
    })
}

/// The stored events of the finished execution at `execution` (its URL), replayed by its
/// stream up to `workflow-result`, where the stream ends.
async fn events(client: &reqwest::Client, execution: &str) -> Result<Vec<Value>, String> {
    let read = async {
        let resp = client
            .get(format!("{execution}/stream"))
            .send()
            .await
            .map_err(|e| format!("stream request failed: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("the stream answered {}", resp.status()));
        }
        let done = |evs: &[common::replica::Sse]| {
            evs.last()
                .is_some_and(|(_, e)| e["type"] == "workflow-result")
        };
        Ok(common::replica::read_sse(resp, done).await)
    };
    let events = tokio::time::timeout(REQUEST_TIMEOUT, read)
        .await
        .map_err(|_| format!("the stream did not end within {REQUEST_TIMEOUT:?}"))??;
    Ok(events.into_iter().map(|(_, e)| e).collect())
}

/// What differs between `case`'s expectations and `out` (empty: the scenario passes). Once the
/// status differs, the later checks are not reported.
fn check(case: &Case, out: &Outcome) -> Vec<String> {
    let mut problems = Vec::new();
    for e in &case.expects {
        if let Err(p) = verdict(e, out) {
            problems.push(p);
            if e.is_status() {
                break;
            }
        }
    }
    problems
}

/// Whether `out` meets `e`, or how it does not.
fn verdict(e: &Expect, out: &Outcome) -> Result<(), String> {
    match e {
        Expect::Complete => status_is(out, "completed"),
        Expect::CompleteWith(want) => {
            status_is(out, "completed")?;
            expect_same("the output", &out.result, want)
        }
        Expect::Fault => status_is(out, "error"),
        Expect::FaultWith(want) => {
            status_is(out, "error")?;
            error_fields(&out.error, want)
        }
        Expect::Properties(paths) => {
            let missing: Vec<&str> = paths
                .iter()
                .filter(|p| lookup(&out.result, p).is_none())
                .map(String::as_str)
                .collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "the output lacks {missing:?}: {}",
                    clip_value(&out.result)
                ))
            }
        }
        Expect::PropertyValue(p, want) => match lookup(&out.result, p) {
            Some(got) => expect_same(&format!("output.{p}"), got, want),
            None => Err(format!(
                "the output lacks {p:?}: {}",
                clip_value(&out.result)
            )),
        },
        Expect::PropertyCount(p, n) => match lookup(&out.result, p).and_then(Value::as_array) {
            Some(items) if items.len() == *n => Ok(()),
            _ => Err(format!(
                "output.{p} is not an array of {n} items: {}",
                clip_value(&out.result)
            )),
        },
        Expect::RunsFirst(_) | Expect::RunsLast(_) | Expect::RunsAfter { .. } => {
            order(e, &out.events)
        }
    }
}

/// Whether the execution ended in `want`.
fn status_is(out: &Outcome, want: &str) -> Result<(), String> {
    if out.status == want {
        return Ok(());
    }
    Err(format!(
        "it ended `{}`, not `{want}` (result: {}; error: {})",
        out.status,
        clip_value(&out.result),
        clip_value(&out.error)
    ))
}

/// Whether `got` equals `want` (what: names it in the report).
fn expect_same(what: &str, got: &Value, want: &Value) -> Result<(), String> {
    if same(got, want) {
        Ok(())
    } else {
        Err(format!(
            "{what} is {}, expected {}",
            clip_value(got),
            clip_value(want)
        ))
    }
}

/// Whether each field of the expected error equals the actual DSL error's.
fn error_fields(error: &Value, want: &Value) -> Result<(), String> {
    let Some(want) = want.as_object() else {
        return Err(format!("the expected error is not a map: {want}"));
    };
    let differ: Vec<String> = want
        .iter()
        .filter(|(k, v)| !error.get(k.as_str()).is_some_and(|g| same(g, v)))
        .map(|(k, v)| format!("{k}: {} (expected {v})", clip_value(&error[k.as_str()])))
        .collect();
    if differ.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the error differs in {}; the whole error: {}",
            differ.join(", "),
            clip_value(error)
        ))
    }
}

/// Deep equality of two JSON values; numbers equal by value (`1` and `1.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// The value at a dotted path (`a.b.0.c`: keys, or indexes of arrays).
fn lookup<'a>(v: &'a Value, dotted: &str) -> Option<&'a Value> {
    dotted.split('.').try_fold(v, |v, key| match v {
        Value::Object(m) => m.get(key),
        Value::Array(a) => key.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

/// Whether the event log meets a task-order expectation.
fn order(e: &Expect, events: &[Value]) -> Result<(), String> {
    let of = |kind: &str| -> Vec<(usize, &str)> {
        events
            .iter()
            .enumerate()
            .filter(|(_, ev)| ev["type"] == kind)
            .filter_map(|(i, ev)| ev["task"].as_str().map(|t| (i, t)))
            .collect()
    };
    let (starts, completes) = (of("task-start"), of("task-complete"));
    let seen = || {
        let names: Vec<&str> = starts.iter().map(|(_, t)| *t).collect();
        let mut kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
        kinds.dedup();
        format!("tasks started, in order: {names:?}; the events' types: {kinds:?}")
    };
    let first =
        |list: &[(usize, &str)], task: &str| list.iter().find(|(_, t)| *t == task).map(|(i, _)| *i);
    let ok = match e {
        Expect::RunsFirst(task) => starts.first().is_some_and(|(_, t)| t == task),
        Expect::RunsLast(task) => completes.last().is_some_and(|(_, t)| t == task),
        Expect::RunsAfter { later, earlier } => {
            match (first(&completes, earlier), first(&starts, later)) {
                (Some(done), Some(start)) => done < start,
                _ => false,
            }
        }
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{} does not hold; {}", describe(e), seen()))
    }
}

/// An order expectation in the kit's words.
fn describe(e: &Expect) -> String {
    match e {
        Expect::RunsFirst(t) => format!("`{t} should run first`"),
        Expect::RunsLast(t) => format!("`{t} should run last`"),
        Expect::RunsAfter { later, earlier } => format!("`{later} should run after {earlier}`"),
        other => format!("{other:?}"),
    }
}

/// `text`, cut to about `most` bytes.
fn clip(text: &str, most: usize) -> String {
    if text.len() <= most {
        return text.to_owned();
    }
    let mut end = most;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// A JSON value on one line, cut for a report.
fn clip_value(v: &Value) -> String {
    clip(&v.to_string(), 400)
}

/// Runs one group of scenarios on one server: each scenario's problems (empty: it passed), and
/// the end of the server's log when any differs (or why it did not start).
async fn run_round(
    cases: &[Case],
    round: &[usize],
    stand_in: &MockServer,
    client: &reqwest::Client,
) -> (Vec<(usize, Vec<String>)>, Option<String>) {
    let dir = TempDir::new();
    for &i in round {
        let file = dir.0.join("workflows").join(format!("{i:02}.yaml"));
        let text = point_at_stand_in(&cases[i].definition, &stand_in.uri());
        std::fs::write(&file, text).expect("writing a definition");
    }
    let root = dir.0.clone();
    let started = tokio::task::spawn_blocking(move || start_server(&root))
        .await
        .expect("the server's start");
    let server = match started {
        Ok(s) => s,
        Err(e) => {
            let problem = "the server of its round did not start (see below)".to_owned();
            return (
                round.iter().map(|&i| (i, vec![problem.clone()])).collect(),
                Some(format!("the server did not start: {e}")),
            );
        }
    };
    let mut results = Vec::new();
    for &i in round {
        let case = &cases[i];
        let before = stand_in.received_requests().await.map_or(0, |r| r.len());
        let mut problems = match run_case(client, &server.base, case).await {
            Ok(out) => check(case, &out),
            Err(e) => vec![e],
        };
        if !problems.is_empty() && KIT_HOSTS.iter().any(|h| case.definition.contains(h)) {
            let seen = stand_in_requests(stand_in, before).await;
            problems.push(format!("the stand-in received: {seen:?}"));
        }
        results.push((i, problems));
    }
    let failed = results.iter().any(|(_, p)| !p.is_empty());
    let log = failed.then(|| log_tail(&server.log));
    drop(server);
    (results, log)
}

/// The report of a run: what fails the test (empty: it passes), and what is only told.
fn judge(cases: &[Case], results: &[(usize, Vec<String>)]) -> (Vec<String>, Vec<String>) {
    let (mut failures, mut told) = (Vec::new(), Vec::new());
    for (i, problems) in results {
        let case = &cases[*i];
        let known = EXPECTED_TO_DIFFER.iter().find(|(n, _)| *n == case.name);
        match (known, problems.is_empty()) {
            (None, true) => {}
            (None, false) => failures.push(format!(
                "{}:\n    {}",
                case.title(),
                problems.join("\n    ")
            )),
            (Some((_, why)), false) => told.push(format!(
                "{} (expected to differ: {why}):\n    {}",
                case.title(),
                problems.join("\n    ")
            )),
            (Some(_), true) => failures.push(format!(
                "{}: passes now; remove it from EXPECTED_TO_DIFFER",
                case.title()
            )),
        }
    }
    for (name, _) in EXPECTED_TO_DIFFER {
        if !cases.iter().any(|c| c.name == *name) {
            failures.push(format!(
                "EXPECTED_TO_DIFFER names {name:?}, which the kit has not"
            ));
        }
    }
    (failures, told)
}

/// Writes a line to the test's stderr past the test harness's capture, so that a run shows it
/// even when the test passes (a skip, the summary).
fn tell(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_kit_passes_end_to_end() {
    let help = serve_help().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        help.contains("--definitions"),
        "`agentry serve --help` names --definitions"
    );
    let cases = kit().unwrap_or_else(|e| panic!("{e}"));
    let stand_in = start_stand_in().await;
    let client = client();
    let (mut results, mut logs) = (Vec::new(), Vec::new());
    for round in rounds(&cases) {
        let (r, log) = run_round(&cases, &round, &stand_in, &client).await;
        results.extend(r);
        logs.extend(log.filter(|l| !l.trim().is_empty()));
    }
    results.sort_by_key(|(i, _)| *i);
    let (failures, told) = judge(&cases, &results);
    for t in &told {
        tell(t);
    }
    tell(&format!(
        "definitions CTK: {} scenarios, {} differ ({} of them expected to)",
        cases.len(),
        failures.len() + told.len(),
        told.len()
    ));
    assert!(
        failures.is_empty(),
        "{} CTK scenario(s) differ:\n{}\n\nthe end of each failing round's server log, or why it did not start:\n{}",
        failures.len(),
        failures.join("\n"),
        logs.join("\n---\n")
    );
}

// ---------------------------------------------------------------------------------------------
// The reader and the stand-in, tested without the definitions loader.
// ---------------------------------------------------------------------------------------------

#[test]
fn every_scenario_of_the_kit_is_understood() {
    let cases = kit().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cases.len(), KIT_SCENARIOS, "scenarios in the kit");
    let mut names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), cases.len(), "scenario names are unique");
    assert!(
        EXPECTED_TO_DIFFER.len() <= 2,
        "at most two known exceptions"
    );
    for (name, _) in EXPECTED_TO_DIFFER {
        assert!(names.contains(name), "EXPECTED_TO_DIFFER names {name:?}");
    }
    let base = "http://127.0.0.1:9";
    for case in &cases {
        let pointed = yaml(&point_at_stand_in(&case.definition, base)).expect("YAML");
        let left = internet_endpoints(&pointed, base);
        assert!(
            left.is_empty(),
            "{}: no stand-in for {left:?}",
            case.title()
        );
    }
    for round in rounds(&cases) {
        let mut ids: Vec<&str> = round.iter().map(|&i| cases[i].workflow.as_str()).collect();
        ids.sort_unstable();
        let n = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), n, "a round's workflow ids differ");
    }
    let placed: usize = rounds(&cases).iter().map(Vec::len).sum();
    assert_eq!(placed, cases.len(), "every scenario runs once");
}

/// Given the kit (`AGENTRY_CTK_FEATURES`), the translation kept here is the kit as the reader
/// reads it; with `AGENTRY_CTK_WRITE=1` too, the translation is written from the kit first.
#[test]
fn the_translation_is_in_sync_with_the_kit() {
    let Some(dir) = features_dir() else {
        tell("SKIPPED the CTK translation's sync check: AGENTRY_CTK_FEATURES names no kit");
        return;
    };
    let read = read_features(&dir).unwrap_or_else(|e| panic!("{e}"));
    if std::env::var_os("AGENTRY_CTK_WRITE").is_some_and(|v| v == "1") {
        let text = serde_json::to_string_pretty(&read).expect("JSON");
        std::fs::write(translation_file(), text + "\n").expect("writing the translation");
    }
    let kept = translation().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        read == kept,
        "tests/ctk/kit.json differs from the kit in {}: run \
         `AGENTRY_CTK_FEATURES={} AGENTRY_CTK_WRITE=1 cargo test -p agentry-server --test \
         definitions_ctk the_translation_is_in_sync`",
        dir.display(),
        dir.display()
    );
}

#[test]
fn the_kit_reads_as_written() {
    let cases = kit().unwrap_or_else(|e| panic!("{e}"));
    let by_name = |n: &str| cases.iter().find(|c| c.name == n).expect("the scenario");
    let raise = by_name("Raise task with inline error");
    assert_eq!(raise.workflow, "raise-custom-error");
    assert_eq!(
        raise.expects,
        vec![Expect::FaultWith(json!({
            "status": 400,
            "type": "https://serverlessworkflow.io/errors/types/compliance",
            "title": "Compliance Error",
            "instance": "/do/0/raiseError",
        }))]
    );
    let flow = by_name("Implicit Sequence Flow");
    assert_eq!(flow.input, json!({}), "no input step: an empty object");
    assert_eq!(
        flow.expects[1..],
        [
            Expect::RunsFirst("setRed".into()),
            Expect::RunsAfter {
                later: "setGreen".into(),
                earlier: "setRed".into()
            },
            Expect::RunsAfter {
                later: "setBlue".into(),
                earlier: "setGreen".into()
            },
        ]
    );
    // A doc string indented deeper than its step keeps only its own indentation.
    let non_object = by_name("Use Non-object Output");
    assert_eq!(non_object.input, json!({"petId": 1}));
    assert_eq!(
        non_object.expects,
        vec![Expect::CompleteWith(json!({"ids": [1, 2]}))]
    );
    let call = by_name("Call HTTP With Response Output");
    assert_eq!(
        call.expects[2],
        Expect::Properties(vec![
            "content.id".into(),
            "content.name".into(),
            "content.status".into()
        ])
    );
    let fork = by_name("Fork Task With Competing Concurrent Sub Tasks");
    assert_eq!(fork.expects[1], Expect::PropertyCount("colors".into(), 1));
}

#[test]
fn the_reader_refuses_what_it_does_not_understand() {
    let scenario = |steps: &str| format!("Feature: f\n  Scenario: s\n{steps}");
    let refused = |text: &str| {
        parse_feature("x.feature", text)
            .and_then(|ss| {
                ss.iter()
                    .map(|s| case_of(0, s).map(|_| ()))
                    .collect::<Result<Vec<()>, String>>()
            })
            .expect_err(text)
    };
    let def = "    Given a workflow with definition:\n    \"\"\"yaml\n    document:\n      name: n\n    \"\"\"\n";
    let ok = scenario(&format!(
        "{def}    When the workflow is executed\n    Then the workflow should complete\n"
    ));
    let cases = parse_feature("x.feature", &ok).expect("read");
    let case = case_of(0, &cases[0]).expect("understood");
    assert_eq!(case.definition, "document:\n  name: n");
    let unknown = scenario(&format!(
        "{def}    When the workflow is executed\n    Then the workflow should cancel\n"
    ));
    let unknown = refused(&unknown);
    assert!(
        unknown.contains("x.feature:9: a step phrase this runner does not know"),
        "{unknown}"
    );
    let outline = "Feature: f\n  Scenario Outline: s\n";
    assert!(refused(outline).contains("not supported"));
    let background = "Feature: f\n  Background:\n    Given a workflow with definition:\n";
    assert!(refused(background).contains("not supported"));
    let stray = scenario(&format!(
        "{def}    When the workflow is executed\n    the workflow should complete\n"
    ));
    assert!(refused(&stray).contains("not understood"));
    let misspelt = scenario("    Gven a workflow with definition:\n");
    assert!(refused(&misspelt).contains("not understood"));
    let unclosed =
        scenario("    Given a workflow with definition:\n    \"\"\"yaml\n    document: {}\n");
    assert!(refused(&unclosed).contains("never closed"));
    let early = scenario(&format!(
        "{def}    Then the workflow should complete\n    When the workflow is executed\n"
    ));
    assert!(refused(&early).contains("before `When the workflow is executed`"));
    let undocumented = scenario(&format!(
        "{def}    When the workflow is executed\n    Then the workflow should complete with output:\n"
    ));
    assert!(refused(&undocumented).contains("needs a doc string"));
}

#[test]
fn only_the_kits_hosts_are_pointed_at_the_stand_in() {
    let text = "uri: https://petstore.swagger.io/v2/pet/{petId}\n\
                other: https://httpbin.org/basic-auth/a/b\n\
                source: https://fake-source.com\n\
                type: https://serverlessworkflow.io/errors/types/compliance\n";
    assert_eq!(
        point_at_stand_in(text, "http://127.0.0.1:5"),
        "uri: http://127.0.0.1:5/v2/pet/{petId}\n\
         other: http://127.0.0.1:5/basic-auth/a/b\n\
         source: https://fake-source.com\n\
         type: https://serverlessworkflow.io/errors/types/compliance\n"
    );
    let def = json!({"do": [{"a": {"with": {"endpoint": {"uri": "https://example.org/x"}}}},
                            {"b": {"with": {"endpoint": "http://127.0.0.1:5/y"}}}]});
    assert_eq!(
        internet_endpoints(&def, "http://127.0.0.1:5"),
        vec!["https://example.org/x"]
    );
}

#[test]
fn checks_report_what_differs() {
    let out = Outcome {
        status: "completed".into(),
        result: json!({"colors": ["red"], "error": {"instance": "/do/0/x", "status": 404.0}}),
        events: ["a", "b"]
            .iter()
            .flat_map(|t| {
                [
                    json!({"type": "task-start", "task": t}),
                    json!({"type": "task-complete", "task": t}),
                ]
            })
            .collect(),
        ..Outcome::default()
    };
    let holds = |e: Expect| verdict(&e, &out);
    assert!(holds(Expect::Complete).is_ok());
    assert!(
        holds(Expect::Fault)
            .unwrap_err()
            .contains("ended `completed`, not `error`")
    );
    assert!(
        holds(Expect::Properties(vec![
            "error.instance".into(),
            "colors.0".into()
        ]))
        .is_ok()
    );
    assert!(holds(Expect::Properties(vec!["error.title".into()])).is_err());
    assert!(holds(Expect::PropertyValue("error.status".into(), json!(404))).is_ok());
    assert!(holds(Expect::PropertyCount("colors".into(), 1)).is_ok());
    assert!(holds(Expect::PropertyCount("colors".into(), 2)).is_err());
    assert!(holds(Expect::RunsFirst("a".into())).is_ok());
    assert!(holds(Expect::RunsLast("b".into())).is_ok());
    assert!(holds(Expect::RunsLast("a".into())).is_err());
    let after = |later: &str, earlier: &str| {
        holds(Expect::RunsAfter {
            later: later.into(),
            earlier: earlier.into(),
        })
    };
    assert!(after("b", "a").is_ok());
    assert!(after("a", "b").is_err());
    assert!(after("c", "a").is_err(), "a task that never ran");
    let failed = Outcome {
        status: "error".into(),
        error: json!({"status": 400, "title": "T", "type": "u", "message": "m"}),
        ..Outcome::default()
    };
    assert!(
        verdict(
            &Expect::FaultWith(json!({"status": 400, "title": "T"})),
            &failed
        )
        .is_ok()
    );
    let wrong = verdict(&Expect::FaultWith(json!({"instance": "/do/0/x"})), &failed);
    assert!(
        wrong
            .unwrap_err()
            .contains("instance: null (expected \"/do/0/x\")")
    );
}

#[tokio::test]
async fn the_stand_in_answers_the_kits_requests_as_the_real_services_would() {
    let stand_in = start_stand_in().await;
    let (client, base) = (client(), stand_in.uri());
    let get = |p: &str| send(client.get(format!("{base}{p}")));

    let (code, pets) = get("/v2/pet/findByStatus?status=available")
        .await
        .expect("answer");
    assert_eq!(code, 200);
    let pets = pets.as_array().expect("an array of pets");
    assert!(!pets.is_empty());
    for p in pets {
        assert!(p["id"].is_u64() && p["name"].is_string(), "{p}");
        assert_eq!(p["status"], "available");
    }
    for id in [1, 2] {
        let (code, pet) = get(&format!("/v2/pet/{id}")).await.expect("answer");
        assert_eq!((code, &pet["id"]), (200, &json!(id)));
        assert!(
            pet["name"].is_string() && pet["status"].is_string(),
            "{pet}"
        );
    }
    let (code, _) = get("/v2/pet/getPetByName/Milou").await.expect("answer");
    assert_eq!(code, 404);

    let (code, doc) = get("/v2/swagger.json").await.expect("answer");
    assert_eq!(code, 200);
    assert_eq!(doc["swagger"], "2.0");
    assert_eq!(doc["host"], stand_in.address().to_string());
    assert_eq!(doc["basePath"], "/v2");
    assert_eq!(
        doc["paths"]["/pet/findByStatus"]["get"]["operationId"],
        "findPetsByStatus"
    );
    assert_eq!(
        doc["paths"]["/pet/{petId}"]["get"]["operationId"],
        "getPetById"
    );

    let basic = format!("{base}/basic-auth/{BASIC_USER}/{BASIC_PASSWORD}");
    let (code, answer) = send(
        client
            .get(&basic)
            .basic_auth(BASIC_USER, Some(BASIC_PASSWORD)),
    )
    .await
    .expect("answer");
    assert_eq!(code, 200);
    assert_eq!(answer, json!({"authenticated": true, "user": BASIC_USER}));
    let (code, _) = send(client.get(&basic).basic_auth(BASIC_USER, Some("wrong")))
        .await
        .expect("answer");
    assert_eq!(code, 401);
    let resp = client.get(&basic).send().await.expect("answer");
    assert_eq!(resp.status().as_u16(), 401);
    assert!(resp.headers().contains_key("www-authenticate"));

    let seen = stand_in_requests(&stand_in, 0).await;
    assert_eq!(seen.len(), 8, "every request is recorded: {seen:?}");
    assert_eq!(seen[0], "GET /v2/pet/findByStatus?status=available");
    assert_eq!(seen[1..].len(), stand_in_requests(&stand_in, 1).await.len());
}
