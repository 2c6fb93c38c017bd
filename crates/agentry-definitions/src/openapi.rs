//! `call: openapi`: an operation of an OpenAPI 3.x or Swagger 2.0 document, found by its
//! `operationId` and sent through [`Outbound::send`], as `call: http` sends its request.
//!
//! **The document** (`with.document.endpoint`) is read with a `GET` through the same outbound
//! client, so under the same policy, redirect rules and response size limit
//! ([`crate::outbound::MAX_RESPONSE_BYTES`]); it may be JSON or YAML. Only `http(s)` URIs:
//! `file://` is refused, as it is for `call: http` (a definition must not read the server's
//! files). Parsed documents are kept by URI in [`Documents`]: at most [`MAX_DOCUMENTS`], the
//! oldest read dropped first, each for [`DOCUMENT_TTL`] so that a changed document is read
//! again. A failed read is not kept. The request that reads it carries its own
//! `Idempotency-Key` (the call's, with `/document` appended).
//!
//! **The server**: OpenAPI 3's first server of the operation, else of its path, else of the
//! document (`servers[0].url`, its `{variables}` replaced by their `default`), resolved against
//! the document's URI when it is relative; no `servers`: the document's own origin (the
//! specification's default server `/`). Swagger 2: `schemes` (the document's own scheme when
//! listed or when there is no list, else the first), `host` (absent: the document's host and
//! port) and `basePath`.
//!
//! **The operation** is the first whose `operationId` is the call's, across `paths` and their
//! methods; none: a `configuration` error (400) naming it. The parameters of the path item and of
//! the operation are merged (the operation's win, by name and location). `$ref`s inside the
//! document (`#/components/parameters/...`, `#/parameters/...`, `#/components/requestBodies/...`,
//! any local JSON pointer) are followed, at most [`MAX_REF_DEPTH`] in a chain; a reference to
//! another document is a `configuration` error.
//!
//! **The parameters** (`with.parameters`, rendered like `call: http`'s templates, with the task
//! input and the arguments) are matched to the operation's by exact name:
//! - `in: path`: substituted into the path, percent-encoded (arrays and objects in the `simple`
//!   style, or `label` / `matrix` when the parameter says so);
//! - `in: query`: added to the query; arrays repeated (`form` exploded, the default of OpenAPI 3,
//!   and Swagger 2's `collectionFormat: multi`) or joined (`,` `|` space tab as the style or
//!   collection format says); objects exploded as `key=value`, or `deepObject` as
//!   `name[key]=value`;
//! - `in: header` (except `Accept`, `Content-Type`, `Authorization`, which OpenAPI ignores) and
//!   `in: cookie` (one `Cookie` header);
//! - Swagger 2's `in: formData`: an `application/x-www-form-urlencoded` body;
//! - **the body**: Swagger 2's `in: body` parameter takes the value of the parameter of its name.
//!   OpenAPI 3's `requestBody` has no name: it takes the parameter named by its `x-bodyName`
//!   extension, else the parameter `body`. When that parameter is not given, the body is every
//!   given parameter the operation does not declare (so `parameters: {name: x, tag: y}` is the
//!   body `{"name": "x", "tag": "y"}` of an operation without parameters); none: no body. The
//!   DSL 1.0 does not say how a body is passed; this follows the reference runtime (Synapse),
//!   except that its fallback is the whole parameter map, here only the undeclared ones. The body
//!   is sent as JSON when the operation accepts JSON (or declares no media type), form-encoded
//!   for `application/x-www-form-urlencoded`, else as text with the operation's first media type.
//!
//! A parameter the operation requires (every path parameter, `required: true`, a required request
//! body) that is absent or null is a `validation` error (400) naming it, raised before any
//! request is sent. Parameters the operation does not declare are ignored (except as the body,
//! above). The document's `security` requirements are not applied: `with.authentication` (basic
//! or bearer, rendered like `call: http`'s) is. `output` and `redirect` are `call: http`'s.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::DslError;
use crate::error::ErrorType;
use crate::expr::Template;
use crate::model::{Authentication, OpenApiCall};
use crate::outbound::{Credentials, Outbound, Request, scalar};
use crate::run::{Args, Stop};

/// The most documents [`Documents`] keeps.
pub const MAX_DOCUMENTS: usize = 64;
/// How long a document read is used before it is read again.
pub const DOCUMENT_TTL: Duration = Duration::from_secs(5 * 60);
/// The longest chain of `$ref`s followed.
pub const MAX_REF_DEPTH: usize = 16;

/// The HTTP methods of a path item, as OpenAPI spells them.
const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// The documents read so far, by URI: at most [`MAX_DOCUMENTS`], each for [`DOCUMENT_TTL`].
#[derive(Debug, Default)]
pub(crate) struct Documents {
    cache: Mutex<HashMap<String, Cached>>,
}

#[derive(Debug)]
struct Cached {
    doc: Arc<Value>,
    read_at: Instant,
}

impl Documents {
    /// The document read from `uri` less than [`DOCUMENT_TTL`] before `now`, if kept.
    fn get(&self, uri: &str, now: Instant) -> Option<Arc<Value>> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        match cache.get(uri) {
            Some(c) if now.saturating_duration_since(c.read_at) < DOCUMENT_TTL => {
                Some(c.doc.clone())
            }
            Some(_) => {
                cache.remove(uri);
                None
            }
            None => None,
        }
    }

    /// Keeps `doc` as read from `uri` at `now`, dropping the oldest when full.
    fn put(&self, uri: &str, doc: Arc<Value>, now: Instant) {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.retain(|_, c| now.saturating_duration_since(c.read_at) < DOCUMENT_TTL);
        while cache.len() >= MAX_DOCUMENTS && !cache.contains_key(uri) {
            let oldest = cache
                .iter()
                .min_by_key(|(_, c)| c.read_at)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => cache.remove(&k),
                None => break,
            };
        }
        cache.insert(uri.to_owned(), Cached { doc, read_at: now });
    }
}

impl Outbound {
    /// Runs a `call: openapi`: its raw output as `output` asks.
    pub(crate) async fn openapi(
        &self,
        call: &OpenApiCall,
        input: &Value,
        args: &Args<'_>,
        idempotency_key: &str,
    ) -> Result<Value, Stop> {
        let refs = crate::run::refs(args);
        let render = |t: &Template| {
            t.eval(input, &refs)
                .map_err(|e| DslError::expression(e.to_string()))
        };
        let doc = self.document(&call.document, idempotency_key).await?;
        let doc_url = parse_url(&call.document)?;
        let op = find_operation(&doc, &call.operation_id, &call.document)?;
        let given = match &call.parameters {
            Some(t) => parameter_map(render(t)?, &call.operation_id)?,
            None => Map::new(),
        };
        let mut request = build_request(&doc, &doc_url, &op, &given)?;
        request.auth = match &call.auth {
            Some(auth) => Some(credentials(auth, render)?),
            None => None,
        };
        request.output = call.output;
        request.redirect = call.redirect;
        Ok(self.send(request, idempotency_key).await?)
    }

    /// The document at `uri`: kept, or read (JSON or YAML) and kept.
    async fn document(&self, uri: &str, idempotency_key: &str) -> Result<Arc<Value>, DslError> {
        if let Some(doc) = self.documents.get(uri, Instant::now()) {
            return Ok(doc);
        }
        let mut request = Request::new("GET", uri)?;
        request.headers.push((
            "accept".to_owned(),
            "application/json, application/yaml;q=0.9, */*;q=0.5".to_owned(),
        ));
        let content = self
            .send(request, &format!("{idempotency_key}/document"))
            .await
            .map_err(|mut e| {
                e.detail = Some(format!(
                    "reading the OpenAPI document: {}",
                    e.detail.unwrap_or_default()
                ));
                e
            })?;
        let doc = Arc::new(parse_document(content, uri)?);
        self.documents.put(uri, doc.clone(), Instant::now());
        Ok(doc)
    }
}

/// The rendered `parameters`: an object (null: none).
fn parameter_map(rendered: Value, operation_id: &str) -> Result<Map<String, Value>, DslError> {
    match rendered {
        Value::Object(m) => Ok(m),
        Value::Null => Ok(Map::new()),
        other => Err(DslError::validation(format!(
            "the parameters of operation {operation_id} are not an object: {other}"
        ))),
    }
}

/// The credentials of `authentication`, rendered as `call: http` renders them.
fn credentials(
    auth: &Authentication,
    render: impl Fn(&Template) -> Result<Value, DslError>,
) -> Result<Credentials, DslError> {
    Ok(match auth {
        Authentication::Basic { username, password } => Credentials::Basic {
            username: scalar(&render(username)?),
            password: scalar(&render(password)?),
        },
        Authentication::Bearer { token } => Credentials::Bearer {
            token: scalar(&render(token)?),
        },
    })
}

/// A `configuration` error (400).
fn configuration(detail: impl Into<String>) -> DslError {
    DslError::standard(ErrorType::Configuration, "Configuration Error", detail)
}

fn parse_url(uri: &str) -> Result<url::Url, DslError> {
    url::Url::parse(uri).map_err(|e| configuration(format!("{uri}: {e}")))
}

/// The document of a response's content: JSON already parsed, or text as JSON or YAML; it must
/// name its version (`openapi` or `swagger`).
fn parse_document(content: Value, uri: &str) -> Result<Value, DslError> {
    let doc = match content {
        Value::String(text) => match serde_json::from_str::<Value>(&text) {
            Ok(v) => v,
            Err(_) => serde_norway::from_str::<Value>(&text).map_err(|e| {
                configuration(format!(
                    "the OpenAPI document at {uri} is neither JSON nor YAML: {e}"
                ))
            })?,
        },
        other => other,
    };
    let versioned = doc.get("openapi").is_some_and(Value::is_string)
        || doc.get("swagger").is_some_and(Value::is_string);
    if !versioned {
        return Err(configuration(format!(
            "{uri} is not an OpenAPI document (it has no `openapi` or `swagger` version)"
        )));
    }
    Ok(doc)
}

/// What `$ref` chains lead to: the value itself when it is no reference.
fn resolve<'a>(doc: &'a Value, mut v: &'a Value) -> Result<&'a Value, DslError> {
    for _ in 0..=MAX_REF_DEPTH {
        let Some(r) = v.get("$ref").and_then(Value::as_str) else {
            return Ok(v);
        };
        let Some(pointer) = r.strip_prefix('#') else {
            return Err(configuration(format!(
                "$ref {r}: references to other documents are not supported"
            )));
        };
        v = doc
            .pointer(pointer)
            .ok_or_else(|| configuration(format!("$ref {r} points at nothing")))?;
    }
    Err(configuration(format!(
        "a chain of $ref longer than {MAX_REF_DEPTH}"
    )))
}

/// One operation of a document, with its path item.
#[derive(Debug)]
struct Operation<'a> {
    path: &'a str,
    method: &'static str,
    item: &'a Value,
    op: &'a Value,
}

/// The operation named `operation_id`; none: a `configuration` error naming it.
fn find_operation<'a>(
    doc: &'a Value,
    operation_id: &str,
    uri: &str,
) -> Result<Operation<'a>, DslError> {
    if let Some(paths) = doc.get("paths").and_then(Value::as_object) {
        for (path, item) in paths {
            let item = resolve(doc, item)?;
            for method in METHODS {
                let Some(op) = item.get(method) else { continue };
                if op.get("operationId").and_then(Value::as_str) == Some(operation_id) {
                    return Ok(Operation {
                        path,
                        method,
                        item,
                        op,
                    });
                }
            }
        }
    }
    Err(configuration(format!(
        "the OpenAPI document at {uri} has no operation {operation_id}"
    )))
}

/// Where a parameter goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum In {
    Path,
    Query,
    Header,
    Cookie,
    Body,
    FormData,
}

/// A parameter of the operation, resolved.
#[derive(Debug)]
struct Param<'a> {
    name: &'a str,
    at: In,
    required: bool,
    spec: &'a Value,
}

/// The parameters of the path item and of the operation (the operation's win).
fn parameters<'a>(doc: &'a Value, op: &Operation<'a>) -> Result<Vec<Param<'a>>, DslError> {
    let mut out: Vec<Param<'a>> = Vec::new();
    for list in [op.item.get("parameters"), op.op.get("parameters")] {
        let Some(list) = list.and_then(Value::as_array) else {
            continue;
        };
        for p in list {
            let spec = resolve(doc, p)?;
            let name = spec.get("name").and_then(Value::as_str).unwrap_or_default();
            let at = match spec.get("in").and_then(Value::as_str) {
                Some("path") => In::Path,
                Some("query") => In::Query,
                Some("header") => In::Header,
                Some("cookie") => In::Cookie,
                Some("body") => In::Body,
                Some("formData") => In::FormData,
                other => {
                    return Err(configuration(format!(
                        "parameter {name} of operation {}: unknown location {other:?}",
                        op.path
                    )));
                }
            };
            let required =
                at == In::Path || spec.get("required").and_then(Value::as_bool) == Some(true);
            out.retain(|q| !(q.name == name && q.at == at));
            out.push(Param {
                name,
                at,
                required,
                spec,
            });
        }
    }
    Ok(out)
}

/// The request of an operation with the given parameters (without authentication).
fn build_request(
    doc: &Value,
    doc_url: &url::Url,
    op: &Operation<'_>,
    given: &Map<String, Value>,
) -> Result<Request, DslError> {
    let operation_id = op
        .op
        .get("operationId")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let params = parameters(doc, op)?;
    let value = |name: &str| given.get(name).filter(|v| !v.is_null());
    for p in params.iter().filter(|p| p.required && p.at != In::Body) {
        if value(p.name).is_none() {
            return Err(DslError::validation(format!(
                "operation {operation_id}: the required parameter {} is missing",
                p.name
            )));
        }
    }
    let swagger = doc.get("swagger").is_some();
    let mut path = op.path.to_owned();
    let mut query = Vec::new();
    let mut headers = Vec::new();
    let mut cookies = Vec::new();
    let mut form = Vec::new();
    for p in &params {
        let Some(v) = value(p.name) else { continue };
        match p.at {
            In::Path => {
                let text = path_value(p, v, swagger);
                path = path.replace(&format!("{{{}}}", p.name), &text);
            }
            In::Query => query.extend(query_pairs(p, v, swagger)),
            In::Header if ignored_header(p.name) => {}
            In::Header => headers.push((p.name.to_owned(), simple(v, ",", explode(p, false)))),
            In::Cookie => cookies.push(format!("{}={}", p.name, simple(v, ",", false))),
            In::FormData => form.extend(query_pairs(p, v, true)),
            In::Body => {}
        }
    }
    let base = server_base(doc, doc_url, op)?;
    let sep = if path.starts_with('/') { "" } else { "/" };
    let mut request = Request::new(op.method, &format!("{base}{sep}{path}"))?;
    request.query = query;
    request.headers = headers;
    if !cookies.is_empty() {
        request
            .headers
            .push(("cookie".to_owned(), cookies.join("; ")));
    }
    if !form.is_empty() {
        request
            .headers
            .push(("content-type".to_owned(), FORM.to_owned()));
        request.body = Some(Value::String(form_encode(&form)));
    } else if let Some((body, media)) = body(doc, op, &params, given, operation_id)? {
        encode_body(&mut request, body, media)?;
    }
    Ok(request)
}

const FORM: &str = "application/x-www-form-urlencoded";

/// Headers OpenAPI ignores as parameters (the request's own).
fn ignored_header(name: &str) -> bool {
    ["accept", "content-type", "authorization"]
        .iter()
        .any(|h| h.eq_ignore_ascii_case(name))
}

/// The base URL of the operation's server, without a trailing `/`.
fn server_base(doc: &Value, doc_url: &url::Url, op: &Operation<'_>) -> Result<String, DslError> {
    if doc.get("swagger").is_some() {
        return Ok(swagger_base(doc, doc_url));
    }
    let server = [op.op, op.item, doc]
        .into_iter()
        .filter_map(|v| v.get("servers").and_then(Value::as_array))
        .find_map(|list| list.first());
    let url = match server {
        Some(s) => server_url(s)?,
        None => "/".to_owned(),
    };
    let mut joined = doc_url
        .join(&url)
        .map_err(|e| configuration(format!("server {url}: {e}")))?;
    joined.set_query(None);
    joined.set_fragment(None);
    Ok(joined.as_str().trim_end_matches('/').to_owned())
}

/// An OpenAPI 3 server's URL with its variables' defaults.
fn server_url(server: &Value) -> Result<String, DslError> {
    let mut url = server
        .get("url")
        .and_then(Value::as_str)
        .unwrap_or("/")
        .to_owned();
    if let Some(vars) = server.get("variables").and_then(Value::as_object) {
        for (name, var) in vars {
            let default = var.get("default").map(scalar).unwrap_or_default();
            url = url.replace(&format!("{{{name}}}"), &default);
        }
    }
    if url.contains('{') {
        return Err(configuration(format!(
            "server {url}: a variable without a default"
        )));
    }
    Ok(url)
}

/// A Swagger 2 document's `scheme://host/basePath`.
fn swagger_base(doc: &Value, doc_url: &url::Url) -> String {
    let schemes: Vec<&str> = doc
        .get("schemes")
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let scheme = if schemes.is_empty() || schemes.contains(&doc_url.scheme()) {
        doc_url.scheme()
    } else {
        schemes[0]
    };
    let host = match doc.get("host").and_then(Value::as_str) {
        Some(h) => h.to_owned(),
        None => doc_url[url::Position::BeforeHost..url::Position::AfterPort].to_owned(),
    };
    let base_path = doc.get("basePath").and_then(Value::as_str).unwrap_or("");
    let base_path = base_path.trim_end_matches('/');
    let slash = if base_path.is_empty() || base_path.starts_with('/') {
        ""
    } else {
        "/"
    };
    format!("{scheme}://{host}{slash}{base_path}")
}

/// A parameter's `explode` (OpenAPI 3), or `default`.
fn explode(p: &Param<'_>, default: bool) -> bool {
    p.spec
        .get("explode")
        .and_then(Value::as_bool)
        .unwrap_or(default)
}

/// A parameter's `style` (OpenAPI 3).
fn style<'a>(p: &Param<'a>) -> Option<&'a str> {
    p.spec.get("style").and_then(Value::as_str)
}

/// The separator of a Swagger 2 `collectionFormat` (`None`: `multi`).
fn collection_separator(p: &Param<'_>) -> Option<&'static str> {
    match p.spec.get("collectionFormat").and_then(Value::as_str) {
        Some("multi") => None,
        Some("ssv") => Some(" "),
        Some("tsv") => Some("\t"),
        Some("pipes") => Some("|"),
        _ => Some(","),
    }
}

/// A value in the `simple` style: arrays and objects joined by `sep` (objects exploded as
/// `key=value` when `explode`).
fn simple(v: &Value, sep: &str, explode: bool) -> String {
    simple_with(v, sep, explode, scalar)
}

fn simple_with(v: &Value, sep: &str, explode: bool, encode: impl Fn(&Value) -> String) -> String {
    match v {
        Value::Array(items) => items.iter().map(&encode).collect::<Vec<_>>().join(sep),
        Value::Object(m) if explode => m
            .iter()
            .map(|(k, v)| format!("{}={}", encode(&Value::String(k.clone())), encode(v)))
            .collect::<Vec<_>>()
            .join(sep),
        Value::Object(m) => m
            .iter()
            .flat_map(|(k, v)| [encode(&Value::String(k.clone())), encode(v)])
            .collect::<Vec<_>>()
            .join(sep),
        other => encode(other),
    }
}

/// A path parameter's text, percent-encoded, in its style.
fn path_value(p: &Param<'_>, v: &Value, swagger: bool) -> String {
    let enc = |v: &Value| percent_encode(&scalar(v));
    if swagger {
        return simple_with(v, collection_separator(p).unwrap_or(","), false, enc);
    }
    let explode = explode(p, false);
    match style(p) {
        Some("label") => {
            let sep = if explode { "." } else { "," };
            format!(".{}", simple_with(v, sep, explode, enc))
        }
        Some("matrix") => {
            let name = percent_encode(p.name);
            match v {
                Value::Array(items) if explode => items
                    .iter()
                    .map(|i| format!(";{name}={}", enc(i)))
                    .collect(),
                Value::Object(_) if explode => format!(";{}", simple_with(v, ";", true, enc)),
                _ => format!(";{name}={}", simple_with(v, ",", false, enc)),
            }
        }
        _ => simple_with(v, ",", explode, enc),
    }
}

/// A query (or form) parameter's pairs, in its style.
fn query_pairs(p: &Param<'_>, v: &Value, swagger: bool) -> Vec<(String, String)> {
    let name = p.name.to_owned();
    if swagger {
        return match (v, collection_separator(p)) {
            (Value::Array(items), None) => {
                items.iter().map(|i| (name.clone(), scalar(i))).collect()
            }
            (Value::Array(_), Some(sep)) => vec![(name, simple(v, sep, false))],
            _ => vec![(name, scalar(v))],
        };
    }
    if p.spec.get("content").is_some() {
        return vec![(name, scalar(v))];
    }
    let style = style(p).unwrap_or("form");
    let explode = explode(p, style == "form");
    match (v, style) {
        (Value::Object(m), "deepObject") => m
            .iter()
            .map(|(k, v)| (format!("{name}[{k}]"), scalar(v)))
            .collect(),
        (Value::Object(m), _) if explode => m.iter().map(|(k, v)| (k.clone(), scalar(v))).collect(),
        (Value::Array(items), _) if explode => {
            items.iter().map(|i| (name.clone(), scalar(i))).collect()
        }
        (_, "spaceDelimited") => vec![(name, simple(v, " ", false))],
        (_, "pipeDelimited") => vec![(name, simple(v, "|", false))],
        _ => vec![(name, simple(v, ",", false))],
    }
}

/// The body of the operation and its media type (`None`: JSON), if it has one.
fn body<'a>(
    doc: &'a Value,
    op: &Operation<'a>,
    params: &[Param<'a>],
    given: &Map<String, Value>,
    operation_id: &str,
) -> Result<Option<(Value, Option<&'a str>)>, DslError> {
    let (name, required, media) = if let Some(p) = params.iter().find(|p| p.at == In::Body) {
        (p.name, p.required, swagger_media(doc, op))
    } else if let Some(rb) = op.op.get("requestBody") {
        let rb = resolve(doc, rb)?;
        let name = rb
            .get("x-bodyName")
            .and_then(Value::as_str)
            .unwrap_or("body");
        let required = rb.get("required").and_then(Value::as_bool) == Some(true);
        (name, required, openapi_media(rb))
    } else {
        return Ok(None);
    };
    let value = match given.get(name).filter(|v| !v.is_null()) {
        Some(v) => Some(v.clone()),
        None => {
            let rest: Map<String, Value> = given
                .iter()
                .filter(|(k, _)| k.as_str() != name && !params.iter().any(|p| p.name == *k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            (!rest.is_empty()).then_some(Value::Object(rest))
        }
    };
    match value {
        Some(v) => Ok(Some((v, media))),
        None if required => Err(DslError::validation(format!(
            "operation {operation_id}: the required request body {name} is missing"
        ))),
        None => Ok(None),
    }
}

/// Whether a media type is JSON's.
fn is_json(media: &str) -> bool {
    media == "*/*" || media.starts_with("application/json") || media.contains("+json")
}

/// An OpenAPI 3 request body's media type: a JSON one, else form, else the first.
fn openapi_media(rb: &Value) -> Option<&str> {
    let content = rb.get("content").and_then(Value::as_object)?;
    let keys: Vec<&str> = content.keys().map(String::as_str).collect();
    keys.iter()
        .find(|m| is_json(m))
        .or_else(|| keys.iter().find(|m| m.starts_with(FORM)))
        .or_else(|| keys.first())
        .copied()
}

/// A Swagger 2 body's media type: the operation's (else the document's) `consumes`.
fn swagger_media<'a>(doc: &'a Value, op: &Operation<'a>) -> Option<&'a str> {
    let consumes = op
        .op
        .get("consumes")
        .or_else(|| doc.get("consumes"))
        .and_then(Value::as_array)?;
    let keys: Vec<&str> = consumes.iter().filter_map(Value::as_str).collect();
    keys.iter()
        .find(|m| is_json(m))
        .or_else(|| keys.first())
        .copied()
}

/// Sets the request's body as its media type asks.
fn encode_body(request: &mut Request, body: Value, media: Option<&str>) -> Result<(), DslError> {
    match media {
        None | Some("*/*") => {
            request
                .headers
                .push(("content-type".to_owned(), "application/json".to_owned()));
            request.body = Some(json_body(body)?);
        }
        Some(m) if is_json(m) => {
            request
                .headers
                .push(("content-type".to_owned(), m.to_owned()));
            request.body = Some(json_body(body)?);
        }
        Some(m) if m.starts_with(FORM) => {
            let pairs: Vec<(String, String)> = match &body {
                Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), scalar(v))).collect(),
                _ => {
                    return Err(DslError::validation(format!(
                        "a form body ({FORM}) must be an object, not {body}"
                    )));
                }
            };
            request
                .headers
                .push(("content-type".to_owned(), m.to_owned()));
            request.body = Some(Value::String(form_encode(&pairs)));
        }
        Some(m) => {
            request
                .headers
                .push(("content-type".to_owned(), m.to_owned()));
            request.body = Some(Value::String(scalar(&body)));
        }
    }
    Ok(())
}

/// A JSON body: a string is sent as its JSON text (not as it is, as `send` would).
fn json_body(body: Value) -> Result<Value, DslError> {
    match body {
        Value::String(_) => serde_json::to_string(&body)
            .map(Value::String)
            .map_err(|e| DslError::runtime(e.to_string())),
        other => Ok(other),
    }
}

fn form_encode(pairs: &[(String, String)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use serde_json::json;
    use tokio::net::{TcpListener, TcpStream};

    use super::*;
    use crate::model::HttpOutput;
    use crate::outbound::Policy;

    /// A request the test server received.
    #[derive(Debug, Clone)]
    struct Seen {
        method: String,
        target: String,
        headers: Vec<(String, String)>,
        body: String,
    }

    impl Seen {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        }
    }

    type Answer = (u16, &'static str, String);

    /// A local HTTP server answering each request with `route`'s answer, and what it received.
    struct Server {
        base: String,
        seen: Arc<Mutex<Vec<Seen>>>,
    }

    impl Server {
        async fn start(route: impl Fn(&Seen) -> Answer + Send + Sync + 'static) -> Server {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let base = format!("http://{}", listener.local_addr().unwrap());
            let seen = Arc::new(Mutex::new(Vec::new()));
            let (route, log) = (Arc::new(route), seen.clone());
            tokio::spawn(async move {
                while let Ok((sock, _)) = listener.accept().await {
                    let (route, log) = (route.clone(), log.clone());
                    tokio::spawn(async move {
                        let Some(req) = read_request(&sock).await else {
                            return;
                        };
                        log.lock().unwrap().push(req.clone());
                        let (status, content_type, body) = route(&req);
                        let answer = format!(
                            "HTTP/1.1 {status} Answer\r\ncontent-type: {content_type}\r\n\
                             content-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        write_all(&sock, answer.as_bytes()).await;
                    });
                }
            });
            Server { base, seen }
        }

        fn seen(&self, path: &str) -> Vec<Seen> {
            self.seen
                .lock()
                .unwrap()
                .iter()
                .filter(|s| s.target.split('?').next() == Some(path))
                .cloned()
                .collect()
        }
    }

    /// Reads what is there (tokio's `io-util` is not a feature of this crate).
    async fn read_some(sock: &TcpStream, buf: &mut [u8]) -> Option<usize> {
        loop {
            sock.readable().await.ok()?;
            match sock.try_read(buf) {
                Ok(n) => return Some(n),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(_) => return None,
            }
        }
    }

    async fn write_all(sock: &TcpStream, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if sock.writable().await.is_err() {
                return;
            }
            match sock.try_write(bytes) {
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(_) => return,
            }
        }
    }

    async fn read_request(sock: &TcpStream) -> Option<Seen> {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            let n = read_some(sock, &mut chunk).await?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
        let mut lines = head.split("\r\n");
        let mut first = lines.next()?.split(' ');
        let (method, target) = (first.next()?.to_owned(), first.next()?.to_owned());
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let len: usize = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let mut body = buf[head_end + 4..].to_vec();
        while body.len() < len {
            let n = read_some(sock, &mut chunk).await?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
        Some(Seen {
            method,
            target,
            headers,
            body: String::from_utf8_lossy(&body).to_string(),
        })
    }

    fn swagger() -> Value {
        json!({
            "swagger": "2.0",
            "info": {"title": "petstore", "version": "1"},
            "basePath": "/v2",
            "schemes": ["https", "http"],
            "paths": {
                "/pet/findByStatus": {"get": {
                    "operationId": "findPetsByStatus",
                    "parameters": [{"name": "status", "in": "query", "required": true,
                        "type": "array", "items": {"type": "string"}, "collectionFormat": "multi"}]
                }},
                "/pet/{petId}": {
                    "parameters": [{"$ref": "#/parameters/petId"}],
                    "get": {
                        "operationId": "getPetById",
                        "parameters": [{"name": "api_key", "in": "header", "type": "string"}]
                    },
                    "post": {
                        "operationId": "updatePetWithForm",
                        "consumes": ["application/x-www-form-urlencoded"],
                        "parameters": [{"name": "name", "in": "formData", "type": "string"}]
                    }
                },
                "/pet": {"post": {
                    "operationId": "addPet",
                    "consumes": ["application/json", "application/xml"],
                    "parameters": [{"in": "body", "name": "body", "required": true, "schema": {}}]
                }},
                "/remote": {"get": {
                    "operationId": "remote",
                    "parameters": [{"$ref": "other.json#/parameters/x"}]
                }}
            },
            "parameters": {
                "petId": {"name": "petId", "in": "path", "required": true, "type": "integer"}
            }
        })
    }

    /// An OpenAPI 3.1 document like agentry's own `/doc`: YAML here, without `servers`.
    const OPENAPI_YAML: &str = r##"
openapi: 3.1.0
info: {title: agentry, version: "1"}
paths:
  /workflows/{name}/executions:
    parameters:
      - $ref: '#/components/parameters/name'
    post:
      operationId: startExecution
      parameters:
        - {name: wait, in: query, schema: {type: boolean}}
        - {name: tags, in: query, schema: {type: array}}
        - {name: filter, in: query, style: deepObject, schema: {type: object}}
      requestBody:
        $ref: '#/components/requestBodies/start'
      responses:
        200:
          description: started
  /executions/{id}:
    get:
      operationId: getExecution
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
        - {name: X-Trace, in: header, schema: {type: string}}
        - {name: session, in: cookie, schema: {type: string}}
components:
  parameters:
    name: {name: name, in: path, required: true, schema: {type: string}}
  requestBodies:
    start:
      required: true
      content:
        application/json:
          schema: {type: object}
"##;

    fn relative_servers() -> Value {
        json!({
            "openapi": "3.0.3",
            "info": {"title": "t", "version": "1"},
            "servers": [{"url": "{version}/api", "variables": {"version": {"default": "v1"}}}],
            "paths": {"/ping": {"get": {"operationId": "ping"}}}
        })
    }

    async fn petstore() -> Server {
        Server::start(|req| {
            let path = req.target.split('?').next().unwrap_or_default();
            match (req.method.as_str(), path) {
                (_, "/v2/swagger.json") => (200, "application/json", swagger().to_string()),
                (_, "/doc") => (200, "application/yaml", OPENAPI_YAML.to_owned()),
                (_, "/specs/api.json") => (200, "application/json", relative_servers().to_string()),
                (_, "/v2/pet/findByStatus") => (
                    200,
                    "application/json",
                    json!([{"id": 1, "status": "available"}, {"id": 2, "status": "available"}])
                        .to_string(),
                ),
                ("GET", "/v2/pet/1") => (
                    200,
                    "application/json",
                    json!({"id": 1, "name": "doggie", "status": "available"}).to_string(),
                ),
                ("GET", "/v2/pet/404") => (404, "application/json", "{}".to_owned()),
                _ => (200, "application/json", json!({"ok": true}).to_string()),
            }
        })
        .await
    }

    fn call(document: &str, operation_id: &str, parameters: Value) -> OpenApiCall {
        OpenApiCall {
            document: document.to_owned(),
            operation_id: operation_id.to_owned(),
            parameters: Some(Template::compile(&parameters, &["input"]).unwrap()),
            output: HttpOutput::Content,
            redirect: false,
            auth: None,
        }
    }

    async fn run(out: &Outbound, call: &OpenApiCall, input: Value) -> Result<Value, DslError> {
        let args: Args<'_> = vec![("input", Cow::Owned(input.clone()))];
        match out.openapi(call, &input, &args, "exec-1:task-1").await {
            Ok(v) => Ok(v),
            Err(Stop::Fault(e)) => Err(e),
            Err(_) => panic!("not a DSL error"),
        }
    }

    fn outbound() -> Outbound {
        Outbound::new(Policy::default()).unwrap()
    }

    #[tokio::test]
    async fn swagger_2_query_array_from_the_input_and_the_document_read_once() {
        let server = petstore().await;
        let out = outbound();
        let doc = format!("{}/v2/swagger.json", server.base);
        let c = call(&doc, "findPetsByStatus", json!({"status": "${ .status }"}));
        let pets = run(&out, &c, json!({"status": "available"})).await.unwrap();
        assert_eq!(pets.as_array().map(Vec::len), Some(2));
        let pets = run(&out, &c, json!({"status": ["available", "sold"]}))
            .await
            .unwrap();
        assert!(pets.is_array());
        let sent = server.seen("/v2/pet/findByStatus");
        assert_eq!(sent[0].target, "/v2/pet/findByStatus?status=available");
        assert_eq!(
            sent[1].target,
            "/v2/pet/findByStatus?status=available&status=sold"
        );
        assert_eq!(sent[0].header("idempotency-key"), Some("exec-1:task-1"));
        let reads = server.seen("/v2/swagger.json");
        assert_eq!(reads.len(), 1, "the document is read once");
        assert_eq!(
            reads[0].header("idempotency-key"),
            Some("exec-1:task-1/document")
        );
    }

    #[tokio::test]
    async fn swagger_2_path_parameter_with_the_response_output_and_bearer_auth() {
        let server = petstore().await;
        let out = outbound();
        let mut c = call(
            &format!("{}/v2/swagger.json", server.base),
            "getPetById",
            json!({"petId": "${ .petId }", "api_key": "k", "unknown": 1}),
        );
        c.output = HttpOutput::Response;
        c.auth = Some(Authentication::Bearer {
            token: Template::compile(&json!("${ .token }"), &["input"]).unwrap(),
        });
        let r = run(&out, &c, json!({"petId": 1, "token": "tok"}))
            .await
            .unwrap();
        assert_eq!(r["statusCode"], 200);
        assert_eq!(r["request"]["method"], "GET");
        assert_eq!(r["request"]["uri"], format!("{}/v2/pet/1", server.base));
        assert_eq!(r["request"]["headers"]["api_key"], "k");
        assert!(r["headers"].is_object());
        assert_eq!(
            r["content"],
            json!({"id": 1, "name": "doggie", "status": "available"})
        );
        let sent = &server.seen("/v2/pet/1")[0];
        assert_eq!(sent.header("authorization"), Some("Bearer tok"));
        assert_eq!(sent.header("api_key"), Some("k"));
        assert_eq!(sent.header("idempotency-key"), Some("exec-1:task-1"));
    }

    #[tokio::test]
    async fn swagger_2_bodies_json_and_form() {
        let server = petstore().await;
        let out = outbound();
        let doc = format!("{}/v2/swagger.json", server.base);
        let pet = json!({"id": 7, "name": "rex"});
        run(&out, &call(&doc, "addPet", json!({"body": pet})), json!({}))
            .await
            .unwrap();
        let sent = &server.seen("/v2/pet")[0];
        assert_eq!(sent.method, "POST");
        assert_eq!(sent.header("content-type"), Some("application/json"));
        assert_eq!(serde_json::from_str::<Value>(&sent.body).unwrap(), pet);

        let e = run(&out, &call(&doc, "addPet", json!({})), json!({}))
            .await
            .unwrap_err();
        assert!(e.type_.ends_with("/validation"), "{e:?}");
        assert!(e.detail.unwrap().contains("body"));

        run(
            &out,
            &call(
                &doc,
                "updatePetWithForm",
                json!({"petId": 3, "name": "a b"}),
            ),
            json!({}),
        )
        .await
        .unwrap();
        let sent = &server.seen("/v2/pet/3")[0];
        assert_eq!(sent.header("content-type"), Some(FORM));
        assert_eq!(sent.body, "name=a+b");
    }

    #[tokio::test]
    async fn openapi_3_without_servers_is_the_documents_origin() {
        let server = petstore().await;
        let out = outbound();
        let doc = format!("{}/doc", server.base);
        let params = json!({
            "name": "a b/c", "wait": true, "tags": ["x", "y"], "filter": {"status": "done"},
            "input": {"n": 1}
        });
        run(&out, &call(&doc, "startExecution", params), json!({}))
            .await
            .unwrap();
        let sent = &server.seen("/workflows/a%20b%2Fc/executions")[0];
        assert_eq!(sent.method, "POST");
        assert_eq!(
            sent.target,
            "/workflows/a%20b%2Fc/executions?wait=true&tags=x&tags=y&filter%5Bstatus%5D=done"
        );
        // The body: the given parameters the operation does not declare.
        assert_eq!(
            serde_json::from_str::<Value>(&sent.body).unwrap(),
            json!({"input": {"n": 1}})
        );

        // A parameter named `body` is the body.
        let params = json!({"name": "w", "body": {"input": 2}});
        run(&out, &call(&doc, "startExecution", params), json!({}))
            .await
            .unwrap();
        let sent = &server.seen("/workflows/w/executions")[0];
        assert_eq!(
            serde_json::from_str::<Value>(&sent.body).unwrap(),
            json!({"input": 2})
        );

        let params = json!({"id": "e1", "X-Trace": "t", "session": "s", "Accept": "x"});
        let got = run(&out, &call(&doc, "getExecution", params), json!({}))
            .await
            .unwrap();
        assert_eq!(got, json!({"ok": true}));
        let sent = &server.seen("/executions/e1")[0];
        assert_eq!(sent.header("x-trace"), Some("t"));
        assert_eq!(sent.header("cookie"), Some("session=s"));
        assert_eq!(server.seen("/doc").len(), 1);
    }

    #[tokio::test]
    async fn openapi_3_relative_server_with_variables() {
        let server = petstore().await;
        let out = outbound();
        let doc = format!("{}/specs/api.json", server.base);
        run(&out, &call(&doc, "ping", json!({})), json!({}))
            .await
            .unwrap();
        assert_eq!(server.seen("/specs/v1/api/ping").len(), 1);
    }

    #[tokio::test]
    async fn unknown_operations_and_missing_parameters_are_refused_before_sending() {
        let server = petstore().await;
        let out = outbound();
        let doc = format!("{}/v2/swagger.json", server.base);
        let e = run(&out, &call(&doc, "nope", json!({})), json!({}))
            .await
            .unwrap_err();
        assert!(e.type_.ends_with("/configuration"), "{e:?}");
        assert_eq!(e.status, 400);
        assert!(e.detail.unwrap().contains("nope"));

        let e = run(
            &out,
            &call(&doc, "getPetById", json!({"petId": null})),
            json!({}),
        )
        .await
        .unwrap_err();
        assert!(e.type_.ends_with("/validation"), "{e:?}");
        assert_eq!(e.status, 400);
        assert!(e.detail.unwrap().contains("petId"));
        let e = run(&out, &call(&doc, "findPetsByStatus", json!({})), json!({}))
            .await
            .unwrap_err();
        assert!(e.detail.unwrap().contains("status"));
        assert!(server.seen("/v2/pet/findByStatus").is_empty());

        let e = run(&out, &call(&doc, "remote", json!({})), json!({}))
            .await
            .unwrap_err();
        assert!(e.type_.ends_with("/configuration"), "{e:?}");
    }

    #[tokio::test]
    async fn errors_of_the_operation_and_of_the_document() {
        let server = petstore().await;
        let out = outbound();
        let doc = format!("{}/v2/swagger.json", server.base);
        let e = run(
            &out,
            &call(&doc, "getPetById", json!({"petId": 404})),
            json!({}),
        )
        .await
        .unwrap_err();
        assert!(e.type_.ends_with("/communication"), "{e:?}");
        assert_eq!(e.status, 404);

        // Not an OpenAPI document.
        let other = format!("{}/v2/pet/1", server.base);
        let e = run(&out, &call(&other, "x", json!({})), json!({}))
            .await
            .unwrap_err();
        assert!(e.type_.ends_with("/configuration"), "{e:?}");
        // Not http(s).
        let e = run(&out, &call("file:///etc/passwd", "x", json!({})), json!({}))
            .await
            .unwrap_err();
        assert!(e.type_.ends_with("/configuration"), "{e:?}");
    }

    #[test]
    fn documents_expire_and_the_oldest_is_dropped() {
        let docs = Documents::default();
        let t0 = Instant::now();
        docs.put("a", Arc::new(json!(1)), t0);
        assert!(docs.get("a", t0 + Duration::from_secs(60)).is_some());
        assert!(docs.get("a", t0 + DOCUMENT_TTL).is_none());
        for i in 0..MAX_DOCUMENTS + 5 {
            docs.put(
                &format!("d{i}"),
                Arc::new(json!(i)),
                t0 + Duration::from_millis(i as u64),
            );
        }
        let now = t0 + Duration::from_secs(1);
        assert_eq!(docs.cache.lock().unwrap().len(), MAX_DOCUMENTS);
        assert!(docs.get("d0", now).is_none());
        assert!(docs.get("d4", now).is_none());
        assert!(docs.get("d5", now).is_some());
        assert!(docs.get(&format!("d{}", MAX_DOCUMENTS + 4), now).is_some());
    }

    #[test]
    fn references_are_local_and_bounded() {
        let doc = json!({"a": {"$ref": "#/b"}, "b": {"$ref": "#/a"}, "c": {"x": 1}, "d": {"$ref": "#/c"}});
        assert_eq!(resolve(&doc, &doc["d"]).unwrap(), &json!({"x": 1}));
        assert!(resolve(&doc, &doc["a"]).is_err());
        assert!(resolve(&doc, &json!({"$ref": "#/none"})).is_err());
        assert!(resolve(&doc, &json!({"$ref": "https://x/y.json#/c"})).is_err());
    }

    #[test]
    fn swagger_base_defaults_to_the_documents_host() {
        let url = url::Url::parse("https://api.example.com:8443/docs/swagger.json").unwrap();
        let doc = json!({"swagger": "2.0", "basePath": "/v2"});
        assert_eq!(swagger_base(&doc, &url), "https://api.example.com:8443/v2");
        let doc = json!({"swagger": "2.0", "host": "h.example", "schemes": ["http"]});
        assert_eq!(swagger_base(&doc, &url), "http://h.example");
    }
}
