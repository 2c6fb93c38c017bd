//! jq runtime expressions (`${ ... }`) of the Serverless Workflow DSL 1.0, on `jaq`.
//!
//! A definition's expressions are compiled once when it is loaded ([`Expr::compile`],
//! [`Template::compile`], [`compile_loose`]) and evaluated per task at run time
//! ([`Expr::eval`], [`Template::eval`]) with the DSL's arguments (`$context`, `$input`,
//! `$secrets`, ...) as jq variables.
//!
//! The program comes from a definition author and the data from any client, so:
//! - the standard library has no access to the server: `env`, `$ENV`, `input`, `inputs`,
//!   `debug`, `stderr`, `halt`, `halt_error`, `input_filename`, `localtime`, `strflocaltime`
//!   and module directives (`import`, `include`) do not compile;
//! - `fromjson` parses with `serde_json` (nesting at most 128 levels) instead of jaq's
//!   unbounded recursive parser;
//! - a program is at most [`MAX_SOURCE_LEN`] bytes, only its first output is computed, and a
//!   result nested deeper than [`MAX_DEPTH`] levels is an error;
//! - jaq has no step counter or interrupt, so the time of one evaluation is not bounded here
//!   (`def f: f; f` never ends), nor is the stack: a value nested some ten thousand levels
//!   deep, which only a program can build (`reduce range(1e5) as $i (0; [.])`), overflows it
//!   when jaq drops or prints it. Client data alone cannot: its nesting is bounded by
//!   `serde_json`, here and in `fromjson`, and regexes by their nest limit.

use std::fmt;
use std::sync::{Arc, OnceLock};

use jaq_core::box_iter::box_once;
use jaq_core::load::{self, Arena, File, Loader, lex, parse};
use jaq_core::native::{Fun, v};
use jaq_core::{Ctx, Cv, Exn, ValXs, Vars, compile, data::JustLut};
use jaq_json::{Num, Val};
use serde_json::{Map, Number, Value};

/// The longest program accepted, in bytes (without `${ }`).
pub const MAX_SOURCE_LEN: usize = 16 * 1024;

/// The deepest nesting of arrays and objects in a result (as `serde_json` parses by default).
pub const MAX_DEPTH: usize = 128;

/// The longest error message kept, in bytes (jq messages may quote a whole value).
const MAX_MESSAGE_LEN: usize = 1024;

/// Functions of jaq's standard library left out: they read the server's environment, write
/// to its stderr, stop the process, or are replaced here (`fromjson`).
const FORBIDDEN: &[&str] = &[
    "env",
    "input",
    "inputs",
    "input_filename",
    "debug",
    "debug_empty",
    "stderr",
    "stderr_empty",
    "halt",
    "halt_error",
    "localtime",
    "strflocaltime",
    "fromjson",
];

type Data = JustLut<Val>;
type Filter = jaq_core::Filter<Data>;

/// An error evaluating an expression: the jq error message (e.g. of `error("x")`, or
/// `cannot index 1 with "b"`). The DSL raises it as an `expression` error (status 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ExprError {
    /// What went wrong, at most about 1 KiB.
    pub message: String,
}

impl ExprError {
    fn new(message: impl Into<String>) -> Self {
        Self {
            message: truncate(message.into()),
        }
    }
}

/// A compiled jq program. Cheap to clone, `Send + Sync`; `Debug` shows its source.
#[derive(Clone)]
pub struct Expr(Arc<Compiled>);

struct Compiled {
    source: String,
    filter: Filter,
    /// The variables the program may use (names without `$`), in the compiler's order.
    vars: Vec<String>,
}

impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Expr").field(&self.0.source).finish()
    }
}

impl Expr {
    /// Compiles `src` (a jq program, without `${ }`), which may use the variables `vars` (names
    /// without `$`, e.g. `["context", "input", "secrets"]`). A syntax error, an unknown or
    /// forbidden function, an undeclared variable or a program over [`MAX_SOURCE_LEN`] is
    /// `Err(reason)`.
    pub fn compile(src: &str, vars: &[&str]) -> Result<Expr, String> {
        if src.len() > MAX_SOURCE_LEN {
            return Err(format!(
                "expression of {} bytes, longer than the limit of {MAX_SOURCE_LEN}",
                src.len()
            ));
        }
        check_no_module_directive(src)?;
        // Only the variables the program mentions are bound, so that evaluation converts
        // only those (`$workflow` holds the whole definition).
        let used: Vec<String> = vars
            .iter()
            .filter(|name| mentions_var(src, name))
            .map(|name| name.to_string())
            .collect();
        let filter = compile_filter(src, &used)?;
        Ok(Expr(Arc::new(Compiled {
            source: src.to_owned(),
            filter,
            vars: used,
        })))
    }

    /// Runs the program on `input` with the variables' values (by name; a compiled variable not
    /// given is null). The result is the program's first output (null when it yields none);
    /// later outputs are not computed. A jq error is `Err` with jq's message.
    pub fn eval(&self, input: &Value, vars: &[(&str, &Value)]) -> Result<Value, ExprError> {
        let out = self.run(to_val(input), |name| lookup(vars, name))?;
        from_val(out)
    }

    /// Runs the program expecting a boolean (`if`, `switch.when`, `while`, `until`): strict,
    /// anything but `true` or `false` (including null) is an error naming what it got.
    pub fn eval_bool(&self, input: &Value, vars: &[(&str, &Value)]) -> Result<bool, ExprError> {
        let out = self.run(to_val(input), |name| lookup(vars, name))?;
        match out {
            Val::Bool(b) => Ok(b),
            other => {
                let error = ExprError::new(format!(
                    "expression `{}` must produce a boolean, not {}",
                    self.0.source,
                    describe(&other)
                ));
                drop_flat(other);
                Err(error)
            }
        }
    }

    /// The program, as given to [`Expr::compile`].
    pub fn source(&self) -> &str {
        &self.0.source
    }

    /// Runs the filter with already converted values and returns its first output.
    fn run(&self, input: Val, var: impl Fn(&str) -> Val) -> Result<Val, ExprError> {
        let compiled = &*self.0;
        let values = compiled.vars.iter().map(|name| var(name));
        let ctx = Ctx::<Data>::new(&compiled.filter.lut, Vars::new(values));
        let mut outputs = compiled.filter.id.run((ctx, input));
        match outputs.next() {
            None => Ok(Val::Null),
            Some(Ok(v)) => Ok(v),
            Some(Err(exn)) => Err(exn_error(exn)),
        }
    }
}

/// `Some(inner)` when `s` (trimmed) is a runtime expression `${ ... }`, with `inner` trimmed;
/// else `None`. A string with `${ }` inside other text is not an expression.
pub fn runtime_expression(s: &str) -> Option<&str> {
    let inner = s.trim().strip_prefix("${")?.strip_suffix('}')?;
    Some(inner.trim())
}

/// For fields whose type is a runtime expression (`output.as` as a string, `if`,
/// `switch.when`, `for.in`): a string is an expression with or without `${ }`, so `.[0]` and
/// `${ .[0] }` are the same.
pub fn compile_loose(s: &str, vars: &[&str]) -> Result<Expr, String> {
    Expr::compile(runtime_expression(s).unwrap_or(s.trim()), vars)
}

/// A JSON value whose strings may be runtime expressions (`set`, `with`, `input.from`
/// objects, ...): compiled once, evaluated into a value where each `${ .. }` string is replaced
/// by its result, recursively in arrays and objects (keys are never expressions; other strings
/// are kept). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Template(Arc<Node>);

#[derive(Debug)]
enum Node {
    /// A part without expressions.
    Const(Value),
    Expr(Expr),
    Array(Vec<Node>),
    Object(Vec<(String, Node)>),
}

impl Node {
    fn is_const(&self) -> bool {
        matches!(self, Node::Const(_))
    }

    fn into_const(self) -> Option<Value> {
        match self {
            Node::Const(value) => Some(value),
            _ => None,
        }
    }
}

impl Template {
    /// Compiles every runtime expression in `value` with the variables `vars`. An error is
    /// `(pointer, reason)`: the JSON pointer of the bad string relative to `value`, and why.
    pub fn compile(value: &Value, vars: &[&str]) -> Result<Template, (String, String)> {
        let mut pointer = String::new();
        compile_node(value, vars, &mut pointer).map(|node| Template(Arc::new(node)))
    }

    /// Evaluates the template on `input` with the variables' values: the input and each
    /// variable are converted once for all its expressions.
    pub fn eval(&self, input: &Value, vars: &[(&str, &Value)]) -> Result<Value, ExprError> {
        if let Node::Const(value) = &*self.0 {
            return Ok(value.clone());
        }
        let mut names = Vec::new();
        collect_vars(&self.0, &mut names);
        let converted: Vec<(&str, Val)> = names
            .into_iter()
            .map(|name| (name, lookup(vars, name)))
            .collect();
        let input = to_val(input);
        eval_node(&self.0, &input, &converted)
    }

    /// The template of one expression (a field that is an expression, such as `output.as`).
    pub fn expression(expr: Expr) -> Template {
        Template(Arc::new(Node::Expr(expr)))
    }

    /// True when it holds no expression: its value is a constant.
    pub fn is_constant(&self) -> bool {
        self.0.is_const()
    }
}

fn compile_node(
    value: &Value,
    vars: &[&str],
    pointer: &mut String,
) -> Result<Node, (String, String)> {
    Ok(match value {
        Value::String(s) => match runtime_expression(s) {
            Some(src) => Node::Expr(Expr::compile(src, vars).map_err(|e| (pointer.clone(), e))?),
            None => Node::Const(value.clone()),
        },
        Value::Array(items) => {
            let mut nodes = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                nodes.push(with_segment(pointer, &i.to_string(), |p| {
                    compile_node(item, vars, p)
                })?);
            }
            if nodes.iter().all(Node::is_const) {
                Node::Const(Value::Array(
                    nodes.into_iter().filter_map(Node::into_const).collect(),
                ))
            } else {
                Node::Array(nodes)
            }
        }
        Value::Object(map) => {
            let mut nodes = Vec::with_capacity(map.len());
            for (key, item) in map {
                let node = with_segment(pointer, key, |p| compile_node(item, vars, p))?;
                nodes.push((key.clone(), node));
            }
            if nodes.iter().all(|(_, n)| n.is_const()) {
                let consts = nodes
                    .into_iter()
                    .filter_map(|(k, n)| Some((k, n.into_const()?)));
                Node::Const(Value::Object(consts.collect()))
            } else {
                Node::Object(nodes)
            }
        }
        _ => Node::Const(value.clone()),
    })
}

/// Runs `f` with `segment` appended to the JSON pointer (RFC 6901 escaping), then restores it.
fn with_segment<T>(pointer: &mut String, segment: &str, f: impl FnOnce(&mut String) -> T) -> T {
    let len = pointer.len();
    pointer.push('/');
    pointer.push_str(&segment.replace('~', "~0").replace('/', "~1"));
    let out = f(pointer);
    pointer.truncate(len);
    out
}

/// The variable names used by the template's expressions, without duplicates.
fn collect_vars<'a>(node: &'a Node, names: &mut Vec<&'a str>) {
    match node {
        Node::Const(_) => {}
        Node::Expr(expr) => {
            for name in &expr.0.vars {
                if !names.contains(&name.as_str()) {
                    names.push(name);
                }
            }
        }
        Node::Array(nodes) => nodes.iter().for_each(|n| collect_vars(n, names)),
        Node::Object(nodes) => nodes.iter().for_each(|(_, n)| collect_vars(n, names)),
    }
}

fn eval_node(node: &Node, input: &Val, vars: &[(&str, Val)]) -> Result<Value, ExprError> {
    Ok(match node {
        Node::Const(value) => value.clone(),
        Node::Expr(expr) => {
            let var = |name: &str| {
                let found = vars.iter().find(|(n, _)| *n == name);
                found.map_or(Val::Null, |(_, v)| v.clone())
            };
            from_val(expr.run(input.clone(), var)?)?
        }
        Node::Array(nodes) => Value::Array(
            nodes
                .iter()
                .map(|n| eval_node(n, input, vars))
                .collect::<Result<_, _>>()?,
        ),
        Node::Object(nodes) => {
            let mut map = Map::with_capacity(nodes.len());
            for (key, n) in nodes {
                map.insert(key.clone(), eval_node(n, input, vars)?);
            }
            Value::Object(map)
        }
    })
}

/// RFC 6570 simple string expansion, the only URI template form of the DSL (endpoints such as
/// `https://x/pet/{petId}?status={status}`): each `{name}` is replaced by the percent-encoded
/// value of the top-level property `input[name]` (`{pet.id}` is the property `"pet.id"`).
/// Strings are used as they are, numbers and booleans as their JSON text; as the DSL says, a
/// missing or null property expands to the empty string, and an array or object is an error,
/// as are an unclosed `{` and the operators of RFC 6570 levels 2-4 (`{+x}`, `{?x}`, ...).
pub fn expand_uri_template(template: &str, input: &Value) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or_else(|| format!("unclosed `{{` in URI template `{template}`"))?;
        let name = &after[..close];
        check_uri_variable(name, template)?;
        percent_encode(&uri_value(name, input)?, &mut out);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn check_uri_variable(name: &str, template: &str) -> Result<(), String> {
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '%';
    if name.is_empty() || !name.chars().all(valid) {
        return Err(format!(
            "`{{{name}}}` in URI template `{template}` is not a simple variable \
             (only `{{name}}` is supported)"
        ));
    }
    Ok(())
}

fn uri_value(name: &str, input: &Value) -> Result<String, String> {
    match input.get(name) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v @ (Value::Number(_) | Value::Bool(_))) => Ok(v.to_string()),
        Some(other) => Err(format!(
            "URI template variable `{name}` is {}, not a string, number, boolean or null",
            describe_json(other)
        )),
    }
}

/// Appends `s` with every byte but the unreserved characters (RFC 3986) percent-encoded.
fn percent_encode(s: &str, out: &mut String) {
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

// ---- compiling ----

/// Compiles `src` with the global variables `vars` (names without `$`).
fn compile_filter(src: &str, vars: &[String]) -> Result<Filter, String> {
    let arena = Arena::default();
    let loader = Loader::new(prelude().for_program(src));
    let modules = loader
        .load(
            &arena,
            File {
                code: src,
                path: (),
            },
        )
        .map_err(|errs| load_errors(src, errs))?;
    let globals: Vec<String> = vars.iter().map(|name| format!("${name}")).collect();
    compile::Compiler::default()
        .with_funs(natives())
        .with_global_vars(globals.iter().map(String::as_str))
        .compile(modules)
        .map_err(compile_errors)
}

/// Common jq 1.7 builtins that jaq lacks, as jq defines them (`@csv` and `@tsv` without
/// jq's error for an object or array cell: it is written as JSON text).
const EXTRA_DEFS: &str = r#"
def IN(s): any(s == .; .);
def IN(src; s): any(src == s; .);
def INDEX(stream; idx_expr): reduce stream as $row ({}; .[$row | idx_expr | tostring] |= $row);
def INDEX(idx_expr): INDEX(.[]; idx_expr);
def leaf_paths: paths(scalars);
def toarray: if isarray then . else [.] end;
def @csv: if isarray | not then error("cannot csv-format \(type), only an array")
  else map(if isstring then "\"" + (split("\"") | join("\"\"")) + "\""
    elif . == null then "" else tojson end) | join(",") end;
def @tsv: if isarray | not then error("cannot tsv-format \(type), only an array")
  else map(if isstring then split("\\") | join("\\\\") | split("\t") | join("\\t")
      | split("\n") | join("\\n") | split("\r") | join("\\r")
    elif . == null then "" else tojson end) | join("\t") end;
"#;

/// jq definitions of jaq's core, standard and JSON libraries, without the forbidden ones, and
/// [`EXTRA_DEFS`]; parsed once. The compiler compiles every definition it is given, so each
/// program gets only those it may call (compiling all of them costs most of a compile).
struct Prelude {
    defs: Vec<parse::Def>,
    /// `calls[i]`: the indices of the definitions that `defs[i]` may call.
    calls: Vec<Vec<usize>>,
}

fn prelude() -> &'static Prelude {
    static PRELUDE: OnceLock<Prelude> = OnceLock::new();
    PRELUDE.get_or_init(|| {
        let extra = load::parse(EXTRA_DEFS, |p| p.defs()).unwrap_or_default();
        let defs: Vec<parse::Def> = jaq_core::defs()
            .chain(jaq_std::defs())
            .chain(jaq_json::defs())
            .filter(|def| !FORBIDDEN.contains(&def.name))
            .chain(extra)
            .collect();
        // Every name a body calls is a word of its debug form (`Call("map", [..])`), so those
        // words over-approximate its calls.
        let calls = defs
            .iter()
            .map(|def| {
                let body = format!("{:?}", def.body);
                let words = program_words(&body);
                defs_named(&defs, |name| words.binary_search(&name).is_ok())
            })
            .collect();
        Prelude { defs, calls }
    })
}

impl Prelude {
    /// The definitions that a program with source `src` may call, directly or not, in their
    /// order (every word of `src` is taken as a possible call).
    fn for_program(&self, src: &str) -> impl Iterator<Item = parse::Def> + '_ {
        let words = program_words(src);
        let mut needed = vec![false; self.defs.len()];
        let mut todo = defs_named(&self.defs, |name| words.binary_search(&name).is_ok());
        while let Some(i) = todo.pop() {
            if !needed[i] {
                needed[i] = true;
                todo.extend(&self.calls[i]);
            }
        }
        self.defs
            .iter()
            .zip(needed)
            .filter(|(_, needed)| *needed)
            .map(|(def, _)| def.clone())
    }
}

/// The indices of the definitions whose name satisfies `wanted`.
fn defs_named(defs: &[parse::Def], wanted: impl Fn(&str) -> bool) -> Vec<usize> {
    let named = defs.iter().enumerate().filter(|(_, def)| wanted(def.name));
    named.map(|(i, _)| i).collect()
}

/// The identifiers (`map`, `@base64`) of a program's text, strings and comments included;
/// sorted.
fn program_words(src: &str) -> Vec<&str> {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '@';
    let mut words: Vec<&str> = src
        .split(|c: char| !is_word(c))
        .filter(|w| !w.is_empty())
        .collect();
    words.sort_unstable();
    words.dedup();
    words
}

/// Native functions of the same libraries, without the forbidden ones, plus this module's
/// `fromjson`.
fn natives() -> impl Iterator<Item = Fun<Data>> {
    jaq_core::funs::<Data>()
        .chain(jaq_std::funs::<Data>())
        .chain(jaq_json::funs::<Data>())
        .filter(|(name, _, _)| !FORBIDDEN.contains(name))
        .chain([jaq_core::native::run::<Data>(("fromjson", v(0), fromjson))])
}

/// `fromjson` on `serde_json`, whose parser refuses nesting deeper than 128 levels (jaq's own
/// recursion is unbounded, and the string may come from a client).
fn fromjson(cv: Cv<'_, Data>) -> ValXs<'_, Val> {
    let parsed = match &cv.1 {
        Val::TStr(bytes) => serde_json::from_slice::<Value>(bytes)
            .map(|value| to_val(&value))
            .map_err(|e| format!("cannot parse as JSON: {e}")),
        other => Err(format!(
            "cannot parse {} as JSON: not a string",
            describe(other)
        )),
    };
    box_once(parsed.map_err(|e| Exn::from(jaq_core::Error::str(e))))
}

/// Refuses `module`, `import` and `include` (which come first in a jq program): modules are
/// not available, and an `import ... as $x` would bind a variable this module does not give.
fn check_no_module_directive(src: &str) -> Result<(), String> {
    let tokens = lex::Lexer::new(src).lex().map_err(|errs| {
        let reasons = errs.iter().map(|(expect, rest)| {
            format!("{} expected {}", lex_expect(expect), position(src, rest))
        });
        syntax_error(reasons)
    })?;
    match tokens.first() {
        Some(lex::Token(word @ ("module" | "import" | "include"), lex::Tok::Word)) => {
            Err(format!("`{word}` is not allowed in workflow expressions"))
        }
        _ => Ok(()),
    }
}

/// True when `src` mentions the variable `$name` (an over-approximation: `$inputs` mentions
/// `$input`, which only costs a conversion).
fn mentions_var(src: &str, name: &str) -> bool {
    src.match_indices('$')
        .any(|(i, _)| src[i + 1..].starts_with(name))
}

fn load_errors(src: &str, errs: load::Errors<&str, ()>) -> String {
    let mut reasons = Vec::new();
    for (_file, err) in errs {
        match err {
            load::Error::Io(errs) => {
                reasons.extend(
                    errs.into_iter()
                        .map(|(path, e)| format!("module {path:?}: {e}")),
                );
            }
            load::Error::Lex(errs) => reasons.extend(errs.iter().map(|(expect, rest)| {
                format!("{} expected {}", lex_expect(expect), position(src, rest))
            })),
            load::Error::Parse(errs) => reasons.extend(errs.iter().map(|(expect, found)| {
                let at = position(src, found);
                let found = if found.is_empty() {
                    "the end".to_owned()
                } else {
                    format!("`{}`", first_chars(found, 20))
                };
                format!("{} expected, found {found} {at}", expect.as_str())
            })),
        }
    }
    syntax_error(reasons.into_iter())
}

fn syntax_error(reasons: impl Iterator<Item = String>) -> String {
    let reasons: Vec<String> = reasons.collect();
    format!("jq syntax error: {}", reasons.join("; "))
}

fn lex_expect(expect: &lex::Expect<&str>) -> String {
    match expect {
        lex::Expect::Digit => "digit".to_owned(),
        lex::Expect::Ident => "identifier".to_owned(),
        lex::Expect::Delim(open) => format!("closing delimiter of `{open}`"),
        lex::Expect::Escape => "string escape sequence".to_owned(),
        lex::Expect::Unicode => "4-digit hexadecimal code point".to_owned(),
        lex::Expect::Token => "token".to_owned(),
        _ => "something else".to_owned(),
    }
}

/// "at line L, column C" of `part`, a slice of `src` (or of nothing when it is not one).
fn position(src: &str, part: &str) -> String {
    let (start, end) = (src.as_ptr() as usize, src.as_ptr() as usize + src.len());
    let at = part.as_ptr() as usize;
    if at < start || at > end {
        return String::new();
    }
    let before = &src[..floor_boundary(src, at - start)];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("at line {line}, column {column}")
}

fn compile_errors(errs: compile::Errors<&str, ()>) -> String {
    let reasons: Vec<String> = errs
        .into_iter()
        .flat_map(|(_file, errs)| errs)
        .map(|(name, undefined)| match undefined {
            compile::Undefined::Filter(arity) if FORBIDDEN.contains(&name) => format!(
                "function `{name}/{arity}` is not available in workflow expressions \
                 (no access to the environment or I/O)"
            ),
            compile::Undefined::Filter(arity) => format!("unknown function `{name}/{arity}`"),
            compile::Undefined::Var => format!("unknown variable `{name}`"),
            other => format!("unknown {} `{name}`", other.as_str()),
        })
        .collect();
    reasons.join("; ")
}

// ---- evaluating ----

fn lookup(vars: &[(&str, &Value)], name: &str) -> Val {
    vars.iter()
        .find(|(n, _)| *n == name)
        .map_or(Val::Null, |(_, value)| to_val(value))
}

/// The message of a jq exception: a string error value as it is, another value as JSON.
fn exn_error(exn: Exn<'_, Val>) -> ExprError {
    match exn.get_err() {
        Ok(err) => match err.into_val() {
            Val::TStr(bytes) | Val::BStr(bytes) => {
                ExprError::new(String::from_utf8_lossy(&bytes).into_owned())
            }
            other => {
                let json = convert(&other, 0);
                drop_flat(other);
                ExprError::new(json.map_or_else(|e| e.message, |json| json.to_string()))
            }
        },
        Err(_) => ExprError::new("expression stopped without a value (halt or break)"),
    }
}

/// Converts a JSON value to jaq's (depth is that of `value`, which `serde_json` bounds when it
/// parses).
fn to_val(value: &Value) -> Val {
    match value {
        Value::Null => Val::Null,
        Value::Bool(b) => Val::Bool(*b),
        Value::Number(n) => Val::Num(if let Some(i) = n.as_i64() {
            Num::from_integral(i)
        } else if let Some(u) = n.as_u64() {
            Num::from_integral(u)
        } else {
            Num::Float(n.as_f64().unwrap_or(f64::NAN))
        }),
        Value::String(s) => Val::from(s.clone()),
        Value::Array(items) => items.iter().map(to_val).collect(),
        Value::Object(map) => Val::obj(
            map.iter()
                .map(|(k, v)| (Val::from(k.clone()), to_val(v)))
                .collect(),
        ),
    }
}

/// Converts a result to JSON: non-finite numbers become null, integral floats (below 2^53)
/// integers, big integers `i64`/`u64` when they fit and floats otherwise, byte strings and
/// invalid UTF-8 lossy strings, non-string keys their JSON text. Nesting deeper than
/// [`MAX_DEPTH`] is an error.
fn from_val(val: Val) -> Result<Value, ExprError> {
    let out = convert(&val, 0);
    if out.is_err() {
        drop_flat(val);
    }
    out
}

fn convert(val: &Val, depth: usize) -> Result<Value, ExprError> {
    Ok(match val {
        Val::Null => Value::Null,
        Val::Bool(b) => Value::Bool(*b),
        Val::Num(n) => num_to_json(n),
        Val::TStr(b) | Val::BStr(b) => Value::String(String::from_utf8_lossy(b).into_owned()),
        Val::Arr(_) | Val::Obj(_) if depth >= MAX_DEPTH => {
            return Err(ExprError::new(format!(
                "expression result nested deeper than {MAX_DEPTH} levels"
            )));
        }
        Val::Arr(items) => Value::Array(
            items
                .iter()
                .map(|v| convert(v, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Val::Obj(map) => {
            let mut out = Map::with_capacity(map.len());
            for (k, v) in map.iter() {
                out.insert(key_string(k), convert(v, depth + 1)?);
            }
            Value::Object(out)
        }
    })
}

fn key_string(key: &Val) -> String {
    match key {
        Val::TStr(b) | Val::BStr(b) => String::from_utf8_lossy(b).into_owned(),
        other => other.to_string(),
    }
}

fn num_to_json(n: &Num) -> Value {
    match n {
        Num::Int(i) => Value::from(*i as i64),
        Num::Float(f) => float_to_json(*f),
        // A decimal literal of the program (`1.5`) or a big integer: by its text.
        other => {
            let text = other.to_string();
            if let Ok(i) = text.parse::<i64>() {
                Value::from(i)
            } else if let Ok(u) = text.parse::<u64>() {
                Value::from(u)
            } else {
                float_to_json(text.parse::<f64>().unwrap_or(f64::NAN))
            }
        }
    }
}

fn float_to_json(f: f64) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if f.fract() == 0.0 && f.abs() < EXACT {
        Value::from(f as i64)
    } else {
        Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

/// Drops a (possibly very deep) value without recursion, which would overflow the stack.
fn drop_flat(val: Val) {
    let mut stack = vec![val];
    while let Some(val) = stack.pop() {
        match val {
            Val::Arr(items) => {
                if let Ok(items) = jaq_json::Rc::try_unwrap(items) {
                    stack.extend(items);
                }
            }
            Val::Obj(map) => {
                if let Ok(map) = jaq_json::Rc::try_unwrap(map) {
                    stack.extend(map.into_iter().flat_map(|(k, v)| [k, v]));
                }
            }
            _ => {}
        }
    }
}

// ---- descriptions ----

fn describe(val: &Val) -> String {
    match val {
        Val::Null => "null".to_owned(),
        Val::Bool(_) | Val::Num(_) => val.to_string(),
        Val::TStr(_) | Val::BStr(_) => "a string".to_owned(),
        Val::Arr(_) => "an array".to_owned(),
        Val::Obj(_) => "an object".to_owned(),
    }
}

fn describe_json(value: &Value) -> &'static str {
    match value {
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
        Value::Null => "null",
    }
}

fn first_chars(s: &str, n: usize) -> &str {
    s.char_indices().nth(n).map_or(s, |(i, _)| &s[..i])
}

/// The largest char boundary of `s` at or below `i`.
fn floor_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn truncate(mut s: String) -> String {
    if s.len() > MAX_MESSAGE_LEN {
        let at = floor_boundary(&s, MAX_MESSAGE_LEN);
        s.truncate(at);
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::{Duration, Instant};

    const ARGS: &[&str] = &[
        "context", "input", "output", "secrets", "task", "workflow", "runtime", "item", "index",
        "err",
    ];

    /// Compiles `src` with the DSL's arguments and runs it on `input` without variables.
    fn run(src: &str, input: Value) -> Result<Value, ExprError> {
        Expr::compile(src, ARGS)
            .unwrap_or_else(|e| panic!("{src}: {e}"))
            .eval(&input, &[])
    }

    fn ok(src: &str, input: Value) -> Value {
        run(src, input).unwrap_or_else(|e| panic!("{src}: {e}"))
    }

    fn compile_err(src: &str) -> String {
        match Expr::compile(src, ARGS) {
            Ok(expr) => panic!("{expr:?} compiled"),
            Err(e) => e,
        }
    }

    #[test]
    fn expr_and_template_are_send_sync_and_cheap_to_clone() {
        fn send_sync<T: Send + Sync + Clone + 'static>() {}
        send_sync::<Expr>();
        send_sync::<Template>();
        let expr = Expr::compile(".a", &[]).unwrap();
        assert_eq!(format!("{:?}", expr.clone()), r#"Expr(".a")"#);
        assert_eq!(expr.source(), ".a");
    }

    #[test]
    fn runtime_expression_is_a_whole_trimmed_string() {
        assert_eq!(runtime_expression("${ .a }"), Some(".a"));
        assert_eq!(
            runtime_expression("  ${.pets | length}\n"),
            Some(".pets | length")
        );
        assert_eq!(runtime_expression("${}"), Some(""));
        assert_eq!(runtime_expression(".a"), None);
        assert_eq!(runtime_expression("Hello ${ .name }!"), None);
        assert_eq!(runtime_expression("${ .a"), None);
        assert_eq!(runtime_expression("$ { .a }"), None);
    }

    #[test]
    fn dsl_examples() {
        let pets = json!({"pets": [{"name": "rex", "status": "sold"}, {"name": "tom", "status": "available"}]});
        assert_eq!(ok(".pets | length", pets.clone()), json!(2));
        assert_eq!(
            ok(r#".pets | map("-\(.name)") | join("\n")"#, pets.clone()),
            json!("-rex\n-tom")
        );
        assert_eq!(
            ok(
                r#".pets | map(select(.status == "sold") | .name)"#,
                pets.clone()
            ),
            json!(["rex"])
        );
        assert_eq!(
            ok(
                ".order.client.email",
                json!({"order": {"client": {"email": "a@b"}}})
            ),
            json!("a@b")
        );
        assert_eq!(
            ok(".temperature > 38", json!({"temperature": 39.5})),
            json!(true)
        );
        assert_eq!(
            ok(".bpm < 60 or .bpm > 100", json!({"bpm": 80})),
            json!(false)
        );
        assert_eq!(
            ok(
                "{a: .x, b: [.y, 1], \"c d\": null}",
                json!({"x": 1, "y": "z"})
            ),
            json!({"a": 1, "b": ["z", 1], "c d": null})
        );
        assert_eq!(ok(".missing // \"default\"", json!({})), json!("default"));
        assert_eq!(ok(".a // 0", json!({"a": false})), json!(0));
        assert_eq!(
            ok(
                r#""Hello \(.name), \(.n + 1)!""#,
                json!({"name": "Ann", "n": 1})
            ),
            json!("Hello Ann, 2!")
        );
        assert_eq!(ok("@base64", json!("hello")), json!("aGVsbG8="));
        assert_eq!(ok("@base64d", json!("aGVsbG8=")), json!("hello"));
        assert_eq!(
            ok("tojson", json!({"a": [1, "x"]})),
            json!(r#"{"a":[1,"x"]}"#)
        );
        assert_eq!(
            ok("fromjson", json!(r#"{"a":[1,"x"]}"#)),
            json!({"a": [1, "x"]})
        );
        assert_eq!(
            ok("to_entries", json!({"a": 1})),
            json!([{"key": "a", "value": 1}])
        );
        assert_eq!(
            ok("with_entries(.value += 1)", json!({"a": 1})),
            json!({"a": 2})
        );
        assert_eq!(ok(r#"test("^a+b$")"#, json!("aab")), json!(true));
        assert_eq!(
            ok(r#"[match("(\\d+)").captures[0].string]"#, json!("ab12")),
            json!(["12"])
        );
        assert_eq!(ok(r#"sub("a"; "b")"#, json!("aa")), json!("ba"));
        assert_eq!(ok(r#"gsub("a"; "b")"#, json!("aa")), json!("bb"));
        assert_eq!(ok("@uri", json!("a b&c")), json!("a%20b%26c"));
        assert_eq!(
            ok("@csv", json!(["a\"b", 1, null, true])),
            json!(r#""a""b",1,,true"#)
        );
        assert_eq!(ok("@tsv", json!(["a\tb", 1])), json!("a\\tb\t1"));
        assert_eq!(ok("[.[] | IN(2, 3)]", json!([1, 2])), json!([false, true]));
        assert_eq!(
            ok("INDEX(.id)", json!([{"id": 1}])),
            json!({"1": {"id": 1}})
        );
        assert_eq!(
            ok("sort_by(.a) | map(.a) | add", json!([{"a": 2}, {"a": 1}])),
            json!(3)
        );
        assert_eq!(
            ok("\"2015-03-05T23:51:47Z\" | fromdate", json!(null)),
            json!(1425599507)
        );
        assert_eq!(
            ok("1425599507 | todate", json!(null)),
            json!("2015-03-05T23:51:47Z")
        );
        assert_eq!(ok("now | type", json!(null)), json!("number"));
        assert_eq!(ok("[limit(3; range(10))]", json!(null)), json!([0, 1, 2]));
        assert_eq!(ok("try error(\"x\") catch .", json!(null)), json!("x"));
        assert_eq!(ok("\"12\" | tonumber", json!(null)), json!(12));
        assert_eq!(ok("del(.a) | keys", json!({"a": 1, "b": 2})), json!(["b"]));
    }

    #[test]
    fn every_library_function_compiles_alone() {
        for def in &prelude().defs {
            let args = vec!["."; def.args.len()].join("; ");
            let src = if args.is_empty() {
                def.name.to_owned()
            } else {
                format!("{}({args})", def.name)
            };
            assert!(Expr::compile(&src, &[]).is_ok(), "{src}");
        }
        assert!(prelude().defs.len() > 100);
    }

    #[test]
    fn variables() {
        let expr = Expr::compile(
            "{s: $input.status, c: ($context.c // 0), t: $task.name}",
            ARGS,
        )
        .unwrap();
        let (input, context, task) = (
            json!({"status": "ok"}),
            json!({"c": 3}),
            json!({"name": "t1"}),
        );
        let out = expr
            .eval(
                &json!(null),
                &[("input", &input), ("context", &context), ("task", &task)],
            )
            .unwrap();
        assert_eq!(out, json!({"s": "ok", "c": 3, "t": "t1"}));
        // A compiled variable not given is null.
        assert_eq!(
            expr.eval(&json!(null), &[]).unwrap(),
            json!({"s": null, "c": 0, "t": null})
        );
        // Custom names (`for.each`, `for.at`) and `$message` of a listen.
        let expr =
            Expr::compile("[$item, $index, $message]", &["item", "index", "message"]).unwrap();
        let (item, index, message) = (json!("x"), json!(2), json!({"m": 1}));
        let out = expr
            .eval(
                &json!(null),
                &[("item", &item), ("index", &index), ("message", &message)],
            )
            .unwrap();
        assert_eq!(out, json!(["x", 2, {"m": 1}]));
        // Shadowing a declared variable.
        assert_eq!(ok("1 as $input | $input + 1", json!(null)), json!(2));
        // An undeclared variable does not compile.
        let e = Expr::compile("$secrets.key", &["input"]).unwrap_err();
        assert!(e.contains("unknown variable `$secrets`"), "{e}");
        assert!(compile_err("$nope").contains("`$nope`"));
    }

    #[test]
    fn first_output_only_and_empty_is_null() {
        let start = Instant::now();
        assert_eq!(ok("range(1e9)", json!(null)), json!(0));
        assert_eq!(ok("repeat(1)", json!(null)), json!(1));
        assert_eq!(ok(".[]", json!([5, 6])), json!(5));
        assert!(start.elapsed() < Duration::from_secs(1));
        assert_eq!(ok("empty", json!(1)), json!(null));
        assert_eq!(ok(".[]", json!([])), json!(null));
    }

    #[test]
    fn jq_errors_are_expr_errors_with_the_message() {
        assert_eq!(
            run("error(\"boom\")", json!(null)).unwrap_err().message,
            "boom"
        );
        assert_eq!(
            run("error({code: 1})", json!(null)).unwrap_err().message,
            r#"{"code":1}"#
        );
        let e = run(".a.b", json!({"a": 5})).unwrap_err();
        assert!(e.message.contains("cannot index 5"), "{e}");
        let e = run("1 + \"a\"", json!(null)).unwrap_err();
        assert!(e.message.contains("cannot"), "{e}");
        let e = run("fromjson", json!("{bad")).unwrap_err();
        assert!(e.message.contains("cannot parse as JSON"), "{e}");
        // The first output is an error even if later ones are not.
        assert!(run("error(\"x\"), 1", json!(null)).is_err());
        // A huge value in a message is cut.
        let e = run(".[0] | .x", json!([vec!["long string"; 1000]])).unwrap_err();
        assert!(e.message.len() < 1100, "{}", e.message.len());
    }

    #[test]
    fn environment_and_io_are_not_available() {
        for src in [
            "env",
            "env.PATH",
            "$ENV",
            "$ENV.PATH",
            "input",
            "inputs",
            "[inputs]",
            "debug",
            "debug(1)",
            "stderr",
            "halt",
            "halt_error",
            "halt_error(1)",
            "input_filename",
            "localtime",
            "strflocaltime(\"%Y\")",
            "$__loc__",
            "input_line_number",
            "get_search_list",
        ] {
            let e = compile_err(src);
            assert!(
                e.contains("not available") || e.contains("unknown"),
                "{src}: {e}"
            );
        }
        for src in [
            "import \"a\" as $x; $x",
            "include \"a\"; .",
            "import \"a\" as a; a::f",
            "module {}; .",
        ] {
            let e = compile_err(src);
            assert!(e.contains("not allowed"), "{src}: {e}");
        }
        // `env` as an object key or a field is fine.
        assert_eq!(ok("{env: .env}", json!({"env": 1})), json!({"env": 1}));
    }

    #[test]
    fn syntax_errors_say_where() {
        let e = compile_err(".a |");
        assert!(
            e.starts_with("jq syntax error") && e.contains("line 1"),
            "{e}"
        );
        let e = compile_err("{a: 1");
        assert!(e.contains("jq syntax error"), "{e}");
        let e = compile_err(".a\n| .b +* 2");
        assert!(e.contains("line 2"), "{e}");
        let e = compile_err("\"abc");
        assert!(e.contains("jq syntax error"), "{e}");
        let e = compile_err("");
        assert!(e.contains("jq syntax error"), "{e}");
        let e = compile_err("nosuchfn(1)");
        assert_eq!(e, "unknown function `nosuchfn/1`");
        let e = compile_err(&" ".repeat(MAX_SOURCE_LEN + 1));
        assert!(e.contains("longer than the limit"), "{e}");
        assert!(Expr::compile(&format!("{}.", " ".repeat(MAX_SOURCE_LEN - 1)), &[]).is_ok());
    }

    #[test]
    fn numbers_convert_sanely() {
        assert_eq!(
            ok("[nan, infinite, -infinite]", json!(null)),
            json!([null, null, null])
        );
        assert_eq!(ok("1.5 * 2", json!(null)), json!(3));
        assert_eq!(ok("1.0", json!(null)), json!(1));
        assert_eq!(ok("1 / 3", json!(null)), json!(1.0 / 3.0));
        assert_eq!(ok("1e1000", json!(null)), json!(null));
        assert_eq!(ok(".", json!(u64::MAX)), json!(u64::MAX));
        assert_eq!(ok(".", json!(i64::MIN)), json!(i64::MIN));
        assert_eq!(ok(". + 1", json!(i64::MAX)), json!(9223372036854775808u64));
        assert_eq!(
            ok("123456789012345678901234567890", json!(null)),
            json!(1.2345678901234568e29)
        );
        assert_eq!(
            ok(". * .", json!(9007199254740993i64)),
            json!(81129638414606699710187514626049.0)
        );
        assert_eq!(ok(".", json!(0.1)), json!(0.1));
        assert_eq!(ok("pow(2; 2000)", json!(null)), json!(null));
    }

    #[test]
    fn strings_and_keys_convert() {
        assert_eq!(ok("\"é\" | @base64 | @base64d", json!(null)), json!("é"));
        assert_eq!(ok("tobytes", json!("ab")), json!("ab"));
        assert_eq!(ok("\"ab\" | tobytes | .[0:1]", json!(null)), json!("a"));
    }

    #[test]
    fn deep_results_are_errors_not_crashes() {
        let e = run("reduce range(200) as $i (0; [.])", json!(null)).unwrap_err();
        assert!(e.message.contains("nested deeper than 128"), "{e}");
        assert!(run("reduce range(50000) as $i (0; [.])", json!(null)).is_err());
        assert!(run("reduce range(50000) as $i (0; {a: .})", json!(null)).is_err());
        assert!(run("reduce range(127) as $i (0; [.])", json!(null)).is_ok());
        // A client's deeply nested JSON text through `fromjson` is refused, not recursed into.
        let deep = "[".repeat(1_000_000);
        let e = run("fromjson", json!(deep)).unwrap_err();
        assert!(e.message.contains("recursion limit"), "{e}");
        assert!(run("tonumber", json!(deep)).is_err());
        // So is a client's deeply nested regex.
        let e = run(". as $re | \"a\" | test($re)", json!("(".repeat(100_000))).unwrap_err();
        assert!(e.message.contains("invalid regex"), "{e}");
        // A deep error value or non-boolean is not printed or dropped recursively.
        let e = run("reduce range(50000) as $i (0; [.]) | error(.)", json!(null)).unwrap_err();
        assert!(e.message.contains("nested deeper"), "{e}");
        let deep = Expr::compile("reduce range(50000) as $i (0; [.])", &[]).unwrap();
        assert!(deep.eval_bool(&json!(null), &[]).is_err());
    }

    #[test]
    fn eval_bool_is_strict() {
        let expr = Expr::compile(".n > 1", ARGS).unwrap();
        assert!(expr.eval_bool(&json!({"n": 2}), &[]).unwrap());
        assert!(!expr.eval_bool(&json!({"n": 0}), &[]).unwrap());
        let expr = Expr::compile(".flag", ARGS).unwrap();
        let e = expr.eval_bool(&json!({}), &[]).unwrap_err();
        assert!(
            e.message.contains("must produce a boolean, not null"),
            "{e}"
        );
        let e = expr.eval_bool(&json!({"flag": "yes"}), &[]).unwrap_err();
        assert!(e.message.contains("not a string"), "{e}");
        let context = json!({"messages": [1, 2, 3, 4, 5]});
        let until = compile_loose("${ ($context.messages | length) == 5 }", ARGS).unwrap();
        assert!(
            until
                .eval_bool(&json!(null), &[("context", &context)])
                .unwrap()
        );
    }

    #[test]
    fn compile_loose_accepts_both_forms() {
        for s in [".[0]", "${ .[0] }", "  ${.[0]}  ", " .[0] "] {
            assert_eq!(
                compile_loose(s, &[])
                    .unwrap()
                    .eval(&json!([7]), &[])
                    .unwrap(),
                json!(7),
                "{s}"
            );
        }
        assert!(compile_loose("${ .[ }", &[]).is_err());
    }

    #[test]
    fn templates() {
        let value = json!({
            "petId": "${ .pet.id }",
            "static": "Hello ${ .name }!",
            "list": [1, "${ $input.n + 1 }", {"deep": "${ $context.c }"}],
            "nested": {"k": "v"},
            "n": 3,
        });
        let template = Template::compile(&value, ARGS).unwrap();
        assert!(!template.is_constant());
        let (input, context) = (json!({"n": 1}), json!({"c": "cc"}));
        let out = template
            .clone()
            .eval(
                &json!({"pet": {"id": 9}}),
                &[("input", &input), ("context", &context)],
            )
            .unwrap();
        assert_eq!(
            out,
            json!({
                "petId": 9,
                "static": "Hello ${ .name }!",
                "list": [1, 2, {"deep": "cc"}],
                "nested": {"k": "v"},
                "n": 3,
            })
        );
        // An expression string alone, and a constant.
        let t = Template::compile(&json!("${ .a }"), &[]).unwrap();
        assert_eq!(t.eval(&json!({"a": [1]}), &[]).unwrap(), json!([1]));
        let constant = json!({"a": ["x", {"b": null}], "c": "not ${ an } expression"});
        let t = Template::compile(&constant, &[]).unwrap();
        assert!(t.is_constant());
        assert_eq!(t.eval(&json!(null), &[]).unwrap(), constant);
        // An evaluation error.
        let t = Template::compile(&json!({"a": "${ error(\"no\") }"}), &[]).unwrap();
        assert_eq!(t.eval(&json!(null), &[]).unwrap_err().message, "no");
    }

    #[test]
    fn template_errors_carry_the_pointer() {
        let value = json!({"a": {"b/c": [1, "${ .x | }"]}});
        let (pointer, reason) = Template::compile(&value, ARGS).unwrap_err();
        assert_eq!(pointer, "/a/b~1c/1");
        assert!(reason.contains("jq syntax error"), "{reason}");
        let (pointer, reason) = Template::compile(&json!({"m~n": "${ $nope }"}), ARGS).unwrap_err();
        assert_eq!(pointer, "/m~0n");
        assert!(reason.contains("$nope"), "{reason}");
        let (pointer, _) = Template::compile(&json!("${ env }"), ARGS).unwrap_err();
        assert_eq!(pointer, "");
    }

    #[test]
    fn uri_templates() {
        let input = json!({"petId": 42, "status": "sold out/ä", "flag": true, "none": null, "pet.id": "x",
            "obj": {"a": 1}, "list": [1]});
        let expand = |t: &str| expand_uri_template(t, &input);
        assert_eq!(
            expand("https://x/pet/{petId}?status={status}").unwrap(),
            "https://x/pet/42?status=sold%20out%2F%C3%A4"
        );
        assert_eq!(
            expand("https://x/{flag}/{pet.id}").unwrap(),
            "https://x/true/x"
        );
        assert_eq!(
            expand("https://x/a-b_c.d~e").unwrap(),
            "https://x/a-b_c.d~e"
        );
        // As the DSL says: a missing or null variable is the empty string.
        assert_eq!(expand("https://x/{missing}/{none}").unwrap(), "https://x//");
        assert!(expand("https://x/{obj}").unwrap_err().contains("an object"));
        assert!(expand("https://x/{list}").unwrap_err().contains("an array"));
        assert!(expand("https://x/{petId").unwrap_err().contains("unclosed"));
        assert!(
            expand("https://x/{+petId}")
                .unwrap_err()
                .contains("not a simple variable")
        );
        assert!(expand("https://x/{}").is_err());
        assert_eq!(expand("no variables").unwrap(), "no variables");
        assert_eq!(
            expand_uri_template("/{a}", &json!("not an object")).unwrap(),
            "/"
        );
    }
}
