//! The built-in offline model (`offline`): deterministic, tool-using, schema-valid objects, no
//! network. It lets the whole service run, demo and be tested anywhere.
//!
//! - Text: `You said: <last user message>`, streamed a word at a time.
//! - Tools: `weather in <City>` calls `get_weather`, `calculate <expr>` calls `calculate`,
//!   `ask <agent> to <task>` calls `delegate_task`, when the agent has that tool; once the results
//!   are in, it answers with a sentence that contains them.
//! - Refunds: `refund order <orderId> <amount> <reason>`, when the agent has both
//!   `lookup_order` and `issue_refund`, calls `lookup_order` with `{orderId}`, then, with its
//!   result in, `issue_refund` with `{orderId, amount, reason}`; then it answers `Refunded
//!   <amount> for order <orderId>.`, or, when the refund was denied approval, `The refund of
//!   <amount> for order <orderId> was not approved: <reason>.`
//! - Recall: `what did I say about <word>` answers `Earlier you said: "<message>"`, quoting the newest
//!   earlier user message with the word among those semantic recall added and the
//!   conversation's, or `I don't recall.`
//! - Contacts: `contact details for order <orderId>`, when the agent has `lookup_order`, calls
//!   it with `{orderId}`, then answers `The contact details for order <orderId> are <email> and
//!   <phone>.` (or that the order has none on file).
//! - Objects: an instance of the requested schema (required properties filled with type-correct
//!   values, `enum`, `minimum`/`maximum` honoured), streamed as growing JSON in at most 64 pieces.
//!   A schema over the generation limits of [`agentry_engine::schema::check_generation_limits`] is an
//!   error, not an attempt: `minItems`/`minContains` ≤ 1,000, `minLength` ≤ 10,000,
//!   `minProperties` and `properties` ≤ 1,000, nesting ≤ 32 levels, smallest instance ≤ 1 MiB.
//!   Objects are built on a blocking thread, not on an async worker.
//! - Working memory ([`crate::working_memory`]): `remember that I prefer <units> units in
//!   <City>` calls `update_working_memory` with `{city, units}` when the agent has that tool, then
//!   answers `Noted: <City>, <units>.`; `what do you know about me` answers with the working
//!   memory of the system message (`You prefer <units> units in <City>.`), or `Nothing yet.`.
//! - Judges ([`crate::judge`]): deterministic scores by the rules of that module.
//! - `maxOutputTokens` truncates the answer to that many words, with `finishReason: length`.

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Map, Value, json};

use super::message::{FinishReason, Message, Role, ToolCall, ToolResult, Usage};
use super::model::{ChunkStream, Model, ModelChunk, ModelError, ModelRequest, ModelResponse};
use agentry_engine::schema::{MAX_SCHEMA_DEPTH, check_generation_limits, count_keyword};

/// The offline model.
#[derive(Debug, Default, Clone, Copy)]
pub struct OfflineModel;

fn words(s: &str) -> u64 {
    s.split_whitespace().count() as u64
}

/// Text after `marker` (case-insensitive), up to sentence punctuation.
fn after<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    let lower = text.to_lowercase();
    let at = lower.find(marker)?;
    // Lowercasing can change byte lengths for non-ASCII text; only trust ASCII positions.
    if !text.is_char_boundary(at + marker.len()) || lower.len() != text.len() {
        return None;
    }
    Some(text[at + marker.len()..].trim())
}

fn city_of(text: &str) -> Option<String> {
    let rest = after(text, "weather in ")?;
    let city: String = rest
        .chars()
        .take_while(|c| !matches!(c, '?' | '!' | ',' | ';' | '.' | '\n'))
        .collect();
    let city = city.trim();
    (!city.is_empty()).then(|| city.to_owned())
}

fn expression_of(text: &str) -> Option<String> {
    let rest = after(text, "calculate ")?;
    let expr = rest
        .trim_end_matches(['?', '!', '\n', ' '])
        .trim_end_matches('.')
        .trim();
    (!expr.is_empty()).then(|| expr.to_owned())
}

fn delegation_of(text: &str) -> Option<(String, String)> {
    let t = text.trim();
    if !t.to_lowercase().starts_with("ask ") {
        return None;
    }
    let rest = &t[4..];
    let (agent, task) = rest.split_once(" to ")?;
    let agent = agent.trim();
    let task = task.trim();
    (!agent.is_empty() && !task.is_empty() && !agent.contains(' '))
        .then(|| (agent.to_owned(), task.to_owned()))
}

/// The order of `contact details for order <orderId>`.
fn contact_order_of(text: &str) -> Option<String> {
    let rest = after(text, "contact details for order ")?;
    let id = rest.split_whitespace().next()?;
    let id = id.trim_end_matches(['?', '!', '.', ',']);
    (!id.is_empty()).then(|| id.to_owned())
}

/// The answer to `contact details for order ...` from `lookup_order`'s result.
fn describe_contact(r: &ToolResult) -> String {
    let order = r.result["orderId"].as_str().unwrap_or("that order");
    match (r.result["email"].as_str(), r.result["phone"].as_str()) {
        (Some(email), Some(phone)) => {
            format!("The contact details for order {order} are {email} and {phone}.")
        }
        (Some(email), None) => format!("The contact details for order {order} are {email}."),
        (None, Some(phone)) => format!("The contact details for order {order} are {phone}."),
        (None, None) => format!("Order {order} has no contact details on file."),
    }
}

/// `remember that I prefer <units> units in <City>`: the `update_working_memory` arguments.
fn preference_of(text: &str) -> Option<Value> {
    let rest = after(text, "remember that i prefer ")?;
    let (units, city) = rest.split_once(" units in ")?;
    let city = city.trim().trim_end_matches(['?', '!', '.']).trim();
    let units = units.trim();
    (!units.is_empty() && !units.contains(' ') && !city.is_empty())
        .then(|| json!({"city": city, "units": units}))
}

/// The answer to `what do you know about me`: the working memory the system message carries.
fn what_i_know(messages: &[Message]) -> String {
    let Some(memory) = crate::working_memory::read_prompt(messages) else {
        return "Nothing yet.".to_owned();
    };
    match (
        memory.get("city").and_then(Value::as_str),
        memory.get("units").and_then(Value::as_str),
    ) {
        (Some(city), Some(units)) => format!("You prefer {units} units in {city}."),
        (Some(city), None) => format!("You are interested in {city}."),
        (None, Some(units)) => format!("You prefer {units} units."),
        (None, None) => match memory.as_str() {
            Some(text) => format!("I know this: {text}"),
            None => format!("I know this: {memory}"),
        },
    }
}

/// The word of `what did I say about <word>`.
fn topic_of(text: &str) -> Option<String> {
    let rest = after(text, "what did i say about ")?;
    let word = rest.trim().trim_end_matches(['?', '!', '.']).trim();
    (!word.is_empty()).then(|| word.to_owned())
}

/// The answer to `what did I say about <word>`: the newest earlier user message that contains
/// the word, among those semantic recall added ([`crate::recall::recall_prompt`]) and the
/// conversation's before the question (`asked`: the question's index), quoted; else that it
/// does not recall.
fn what_you_said(messages: &[Message], asked: usize, word: &str) -> String {
    let word = word.to_lowercase();
    let recalled = crate::recall::recalled_from_prompt(messages);
    let earlier = messages[..asked.min(messages.len())]
        .iter()
        .filter(|m| m.role == Role::User);
    let said = recalled
        .iter()
        .filter(|m| m.role == Role::User)
        .chain(earlier)
        .filter(|m| topic_of(&m.content).is_none())
        .rfind(|m| m.content.to_lowercase().contains(&word));
    match said {
        Some(m) => format!("Earlier you said: \"{}\"", m.content.trim()),
        None => "I don't recall.".to_owned(),
    }
}

/// The answer once `update_working_memory` succeeded.
fn noted(args: &Value) -> String {
    match (
        args.get("city").and_then(Value::as_str),
        args.get("units").and_then(Value::as_str),
    ) {
        (Some(city), Some(units)) => format!("Noted: {city}, {units}."),
        _ => "Noted.".to_owned(),
    }
}

/// A refund asked for by `refund order <orderId> <amount> <reason>`.
#[derive(Debug, Clone, PartialEq)]
struct Refund {
    order_id: String,
    amount: f64,
    reason: String,
}

impl Refund {
    fn lookup_args(&self) -> Value {
        json!({"orderId": self.order_id})
    }

    fn refund_args(&self) -> Value {
        json!({"orderId": self.order_id, "amount": amount_json(self.amount), "reason": self.reason})
    }
}

/// `refund order <orderId> <amount> <reason words>`: one word, a number over 0 (digits with at
/// most one decimal point), and the rest, not empty.
fn refund_of(text: &str) -> Option<Refund> {
    let rest = after(text, "refund order ")?;
    let mut words = rest.split_whitespace();
    let order_id = words.next()?;
    let amount = words.next()?;
    let is_decimal = amount.chars().all(|c| c.is_ascii_digit() || c == '.')
        && amount.chars().any(|c| c.is_ascii_digit())
        && amount.matches('.').count() <= 1;
    let amount: f64 = amount.parse().ok().filter(|_| is_decimal)?;
    let reason = words.collect::<Vec<_>>().join(" ");
    let reason = reason.trim_end_matches(['?', '!', '.']).trim();
    (amount.is_finite() && amount > 0.0 && !reason.is_empty()).then(|| Refund {
        order_id: order_id.to_owned(),
        amount,
        reason: reason.to_owned(),
    })
}

/// An amount as JSON, integral values without a fraction (`250`, not `250.0`).
fn amount_json(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

/// An amount as its JSON number is written (`250`, `40.5`); a string as it is.
fn amount_text(v: &Value) -> String {
    match (v.as_f64(), v.as_str()) {
        (Some(x), _) => amount_json(x).to_string(),
        (None, Some(s)) => s.to_owned(),
        (None, None) => v.to_string(),
    }
}

/// The sentence for an `issue_refund` result: a refund, or its denial; none for another error.
fn describe_refund(r: &ToolResult) -> Option<String> {
    let amount = amount_text(&r.args["amount"]);
    let order = r.args["orderId"].as_str().unwrap_or("that order");
    if !r.is_error {
        return Some(format!("Refunded {amount} for order {order}."));
    }
    let denied = r.result.get("denied").and_then(Value::as_bool) == Some(true);
    let reason = r.result.get("reason").and_then(Value::as_str)?;
    denied.then(|| {
        format!(
            "The refund of {amount} for order {order} was not approved: {}.",
            reason.trim_end_matches('.')
        )
    })
}

fn describe_result(r: &ToolResult) -> String {
    if r.tool_name == "issue_refund"
        && let Some(sentence) = describe_refund(r)
    {
        return sentence;
    }
    let (name, result, is_error) = (r.tool_name.as_str(), &r.result, r.is_error);
    if is_error {
        let msg = result
            .get("error")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| result.to_string());
        return format!("The {name} tool failed: {msg}.");
    }
    match name {
        "get_weather" => format!(
            "The weather in {} is {} at {}°C.",
            result["city"].as_str().unwrap_or("that city"),
            result["condition"].as_str().unwrap_or("unknown"),
            result["temperatureC"]
        ),
        "calculate" => format!(
            "The result of {} is {}.",
            result["expression"].as_str().unwrap_or("the expression"),
            result["result"]
        ),
        crate::working_memory::TOOL_NAME => noted(&r.args),
        _ if name == "delegate_task" || name.starts_with("ask_") => format!(
            "{} answered: {}",
            result["agent"].as_str().unwrap_or("The agent"),
            result["text"].as_str().unwrap_or("")
        ),
        _ => format!("The {name} tool returned {result}."),
    }
}

/// A value valid against `schema` (the subset agents use: type, properties, items, required,
/// enum, const, anyOf/oneOf (the first), minimum/maximum, minItems/maxItems,
/// minLength/maxLength, format); `hint` names the value (`example <hint>` strings).
///
/// The schema is first checked against [`check_generation_limits`], whose message is the error;
/// a schema within them gives (for a short `hint`) an instance of at most about
/// `MAX_GENERATED_BYTES`, built in time linear in its size, with recursion no deeper than
/// `MAX_SCHEMA_DEPTH`.
pub fn instance_of(schema: &Value, hint: &str) -> Result<Value, String> {
    check_generation_limits(schema)?;
    build(schema, hint, 0)
}

/// The instance of `schema`, a subschema at nesting level `depth`.
fn build(schema: &Value, hint: &str, depth: usize) -> Result<Value, String> {
    if depth > MAX_SCHEMA_DEPTH {
        return Err(format!(
            "the schema nests deeper than {MAX_SCHEMA_DEPTH} levels"
        ));
    }
    if let Some(c) = schema.get("const") {
        return Ok(c.clone());
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return Ok(first.clone());
    }
    if let Some(first) = schema
        .get("anyOf")
        .or_else(|| schema.get("oneOf"))
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return build(first, hint, depth + 1);
    }
    match type_of(schema) {
        "object" => object_of(schema, depth),
        "array" => array_of(schema, hint, depth),
        ty @ ("integer" | "number") => Ok(number_of(schema, ty == "integer")),
        "boolean" => Ok(json!(true)),
        "null" => Ok(Value::Null),
        _ => Ok(string_of(schema, hint)),
    }
}

/// The type to generate: the declared one (the first that is not `null` in a list), else
/// guessed from `properties` or `items`, else `string`.
fn type_of(schema: &Value) -> &str {
    match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if schema.get("properties").is_some() => "object",
        _ if schema.get("items").is_some() => "array",
        _ => "string",
    }
}

/// Every declared property, and every other required one filled with its own name.
fn object_of(schema: &Value, depth: usize) -> Result<Value, String> {
    let mut out = Map::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            out.insert(k.clone(), build(v, k, depth + 1)?);
        }
    }
    if let Some(req) = schema.get("required").and_then(Value::as_array) {
        for k in req.iter().filter_map(Value::as_str) {
            out.entry(k.to_owned()).or_insert_with(|| json!(k));
        }
    }
    Ok(Value::Object(out))
}

/// `minItems` items (one by default), never more than `maxItems`.
fn array_of(schema: &Value, hint: &str, depth: usize) -> Result<Value, String> {
    let n = count_keyword(schema, "minItems")
        .unwrap_or(1)
        .min(count_keyword(schema, "maxItems").unwrap_or(u64::MAX));
    let default_item = json!({});
    let item = schema.get("items").unwrap_or(&default_item);
    let items = (0..n)
        .map(|_| build(item, hint, depth + 1))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Value::Array(items))
}

/// 1, moved into `minimum`..`maximum` (exclusive bounds stepped by one).
fn number_of(schema: &Value, integer: bool) -> Value {
    let min = schema.get("minimum").and_then(Value::as_f64).or_else(|| {
        schema
            .get("exclusiveMinimum")
            .and_then(Value::as_f64)
            .map(|m| m.floor() + 1.0)
    });
    let max = schema.get("maximum").and_then(Value::as_f64).or_else(|| {
        schema
            .get("exclusiveMaximum")
            .and_then(Value::as_f64)
            .map(|m| m.ceil() - 1.0)
    });
    let mut x = min.unwrap_or(1.0).max(1.0_f64.min(max.unwrap_or(1.0)));
    if let Some(m) = min {
        x = x.max(m);
    }
    if let Some(m) = max {
        x = x.min(m);
    }
    if integer || x.fract() == 0.0 {
        json!(x.ceil() as i64)
    } else {
        json!(x)
    }
}

/// An example of the `format` (or `example <hint>`), padded with `x` up to `minLength` and cut
/// to `maxLength` characters, in time linear in the result.
fn string_of(schema: &Value, hint: &str) -> Value {
    let mut s = match schema.get("format").and_then(Value::as_str) {
        Some("date-time") => "2026-01-01T00:00:00Z".to_owned(),
        Some("date") => "2026-01-01".to_owned(),
        Some("time") => "00:00:00Z".to_owned(),
        Some("email") => "user@example.com".to_owned(),
        Some("uri") | Some("url") => "https://example.com/".to_owned(),
        Some("uuid") => "00000000-0000-4000-8000-000000000000".to_owned(),
        Some("ipv4") => "127.0.0.1".to_owned(),
        _ => format!("example {hint}"),
    };
    let chars = s.chars().count() as u64;
    let min = count_keyword(schema, "minLength").unwrap_or(0);
    if let Ok(missing) = usize::try_from(min.saturating_sub(chars)) {
        s.push_str(&"x".repeat(missing));
    }
    if let Some(max) = count_keyword(schema, "maxLength")
        && let Some((cut, _)) = s
            .char_indices()
            .nth(usize::try_from(max).unwrap_or(usize::MAX))
    {
        s.truncate(cut);
    }
    json!(s)
}

impl OfflineModel {
    /// The whole answer, deterministically, from the request; an error when the output schema
    /// is over the generation limits ([`check_generation_limits`]).
    pub fn answer(&self, req: &ModelRequest) -> Result<ModelResponse, ModelError> {
        if crate::judge::is_judge_request(req) {
            return Ok(crate::judge::offline_answer(req));
        }
        let prompt_tokens = req
            .messages
            .iter()
            .map(|m| words(&m.content))
            .sum::<u64>()
            .max(1);
        let has_tool = |n: &str| req.tools.iter().any(|t| t.name == n);
        let last_user = req.messages.iter().rposition(|m| m.role == Role::User);
        let user_text = last_user
            .map(|i| req.messages[i].content.clone())
            .unwrap_or_default();
        let since_user: &[Message] = match last_user {
            Some(i) => &req.messages[i + 1..],
            None => &[],
        };
        let results: Vec<&ToolResult> = since_user
            .iter()
            .filter_map(|m| m.tool_result.as_ref())
            .collect();
        let n = req.messages.iter().filter(|m| m.role == Role::Tool).count();
        let call = |name: &str, args: Value| ToolCall {
            tool_call_id: format!("call_{}", n + 1),
            tool_name: name.to_owned(),
            args,
        };
        let refund = if has_tool("lookup_order") && has_tool("issue_refund") {
            refund_of(&user_text)
        } else {
            None
        };
        let looked_up = !results.is_empty()
            && results
                .iter()
                .all(|r| r.tool_name == "lookup_order" && !r.is_error);

        let (mut text, tool_calls) = if let Some(schema) = &req.output_schema {
            let object = instance_of(schema, "value").map_err(|e| {
                ModelError::new(format!("cannot generate an object for this schema: {e}"))
            })?;
            (object.to_string(), Vec::new())
        } else if let Some(refund) = &refund
            && looked_up
        {
            (
                String::new(),
                vec![call("issue_refund", refund.refund_args())],
            )
        } else if !results.is_empty() {
            // A refund's answer is about the refund only, not the order looked up before it.
            let refunded =
                refund.is_some() && results.iter().any(|r| r.tool_name == "issue_refund");
            let contact = contact_order_of(&user_text).is_some();
            let parts: Vec<String> = results
                .iter()
                .filter(|r| !refunded || r.tool_name == "issue_refund")
                .copied()
                .map(|r| {
                    if contact && r.tool_name == "lookup_order" && !r.is_error {
                        describe_contact(r)
                    } else {
                        describe_result(r)
                    }
                })
                .collect();
            (parts.join(" "), Vec::new())
        } else {
            let remote =
                delegation_of(&user_text).filter(|(agent, _)| has_tool(&format!("ask_{agent}")));
            let pick = if let Some((agent, task)) = remote {
                // A remote A2A agent lent as a tool (`ask_<agent>`).
                Some(call(&format!("ask_{agent}"), json!({"task": task})))
            } else if has_tool("delegate_task")
                && let Some((agent, task)) = delegation_of(&user_text)
            {
                Some(call("delegate_task", json!({"agent": agent, "task": task})))
            } else if let Some(refund) = &refund {
                Some(call("lookup_order", refund.lookup_args()))
            } else if has_tool("lookup_order")
                && let Some(order) = contact_order_of(&user_text)
            {
                Some(call("lookup_order", json!({"orderId": order})))
            } else if has_tool("get_weather")
                && let Some(city) = city_of(&user_text)
            {
                Some(call("get_weather", json!({"city": city})))
            } else if has_tool("calculate")
                && let Some(expr) = expression_of(&user_text)
            {
                Some(call("calculate", json!({"expression": expr})))
            } else if has_tool(crate::working_memory::TOOL_NAME)
                && let Some(preference) = preference_of(&user_text)
            {
                Some(call(crate::working_memory::TOOL_NAME, preference))
            } else {
                None
            };
            match pick {
                Some(c) => (String::new(), vec![c]),
                None if user_text
                    .to_lowercase()
                    .contains("what do you know about me") =>
                {
                    (what_i_know(&req.messages), Vec::new())
                }
                None => match topic_of(&user_text) {
                    Some(word) => (
                        what_you_said(&req.messages, last_user.unwrap_or(0), &word),
                        Vec::new(),
                    ),
                    None => (format!("You said: {user_text}"), Vec::new()),
                },
            }
        };

        let mut finish_reason = if tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        };
        let limit = req.settings.max_output_tokens as usize;
        if req.output_schema.is_none() && text.split_whitespace().count() > limit {
            text = text
                .split_whitespace()
                .take(limit)
                .collect::<Vec<_>>()
                .join(" ");
            finish_reason = FinishReason::Length;
        }
        let completion_tokens = (words(&text) + tool_calls.len() as u64).max(1);
        Ok(ModelResponse {
            text,
            tool_calls,
            finish_reason,
            usage: Usage {
                prompt_tokens,
                completion_tokens,
                total_tokens: prompt_tokens + completion_tokens,
                cached_input_tokens: 0,
                reasoning_tokens: 0,
            },
            model: None,
        })
    }

    /// [`Self::answer`], on a blocking thread when an object is asked for: building a large
    /// instance must not stall an async worker thread.
    async fn answer_off_the_runtime(
        &self,
        req: &ModelRequest,
    ) -> Result<ModelResponse, ModelError> {
        if req.output_schema.is_none() {
            return self.answer(req);
        }
        let model = *self;
        let req = req.clone();
        tokio::task::spawn_blocking(move || model.answer(&req))
            .await
            .map_err(|e| ModelError::new(format!("the offline model failed: {e}")))?
    }
}

/// Splits text into chunks of about a word each, keeping the whitespace, so that concatenating
/// them gives the text back.
pub fn word_chunks(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.chars() {
        cur.push(c);
        if c == ' ' {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The fewest characters in a streamed piece of a JSON document.
const MIN_JSON_CHUNK_CHARS: usize = 8;
/// The most pieces a streamed JSON document is cut into.
const MAX_JSON_CHUNKS: usize = 64;

/// Splits a JSON document into pieces for streaming objects: 8 characters each, or
/// `chars / 64` (rounded up) for a large document, so never more than 64 pieces of over 8.
fn json_chunks(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars
        .len()
        .div_ceil(MAX_JSON_CHUNKS)
        .max(MIN_JSON_CHUNK_CHARS);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

#[async_trait]
impl Model for OfflineModel {
    fn name(&self) -> &str {
        "offline"
    }

    async fn generate(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        self.answer_off_the_runtime(request).await
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ChunkStream, ModelError> {
        let resp = self.answer_off_the_runtime(request).await?;
        let pieces = if request.output_schema.is_some() {
            json_chunks(&resp.text)
        } else {
            word_chunks(&resp.text)
        };
        let mut chunks: Vec<Result<ModelChunk, ModelError>> = pieces
            .into_iter()
            .map(|p| Ok(ModelChunk::TextDelta(p)))
            .collect();
        chunks.extend(
            resp.tool_calls
                .into_iter()
                .map(|c| Ok(ModelChunk::ToolCall(c))),
        );
        chunks.push(Ok(ModelChunk::Finish {
            finish_reason: resp.finish_reason,
            usage: resp.usage,
        }));
        // Yield between chunks so that a consumer really sees them one by one.
        Ok(futures::stream::iter(chunks)
            .then(|c| async move {
                tokio::task::yield_now().await;
                c
            })
            .boxed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{GenerationSettings, ToolSpec};
    use agentry_engine::schema::Schema;

    fn answer(r: &ModelRequest) -> ModelResponse {
        OfflineModel.answer(r).unwrap()
    }

    fn object_request(schema: Value) -> ModelRequest {
        let mut r = req("make an object", &[]);
        r.output_schema = Some(schema);
        r
    }

    fn req(text: &str, tools: &[&str]) -> ModelRequest {
        ModelRequest {
            messages: vec![Message::system("be nice"), Message::user(text)],
            tools: tools
                .iter()
                .map(|n| ToolSpec {
                    name: (*n).into(),
                    description: String::new(),
                    parameters: json!({}),
                })
                .collect(),
            settings: GenerationSettings::default(),
            output_schema: None,
        }
    }

    #[test]
    fn remembers_preferences_through_the_working_memory_tool() {
        let text = "Remember that I prefer metric units in Paris.";
        assert_eq!(answer(&req(text, &[])).text, format!("You said: {text}"));
        let mut r = req(text, &["update_working_memory"]);
        let a = answer(&r);
        assert_eq!(a.tool_calls[0].tool_name, "update_working_memory");
        let args = json!({"city": "Paris", "units": "metric"});
        assert_eq!(a.tool_calls[0].args, args);
        let call = a.tool_calls[0].clone();
        with_result(&mut r, call, json!({"workingMemory": args}), false);
        assert_eq!(answer(&r).text, "Noted: Paris, metric.");
    }

    #[test]
    fn tells_what_the_working_memory_holds() {
        let memory = crate::working_memory::WorkingMemory::schema(
            crate::working_memory::WorkingMemoryScope::User,
            json!({"type": "object"}),
        )
        .unwrap();
        let mut r = req("What do you know about me?", &[]);
        assert_eq!(answer(&r).text, "Nothing yet.");
        let value = json!({"city": "Paris", "units": "metric"});
        r.messages[0] =
            Message::system(crate::working_memory::prompt_section(&memory, Some(&value)));
        assert_eq!(answer(&r).text, "You prefer metric units in Paris.");
    }

    #[test]
    fn echoes_deterministically() {
        let a = answer(&req("hello there", &[]));
        assert_eq!(a.text, "You said: hello there");
        assert_eq!(a.finish_reason, FinishReason::Stop);
        assert_eq!(a, answer(&req("hello there", &[])));
        assert_eq!(
            a.usage.total_tokens,
            a.usage.prompt_tokens + a.usage.completion_tokens
        );
        assert!(a.usage.prompt_tokens > 0 && a.usage.completion_tokens > 0);
    }

    #[test]
    fn picks_tools_only_when_the_agent_has_them() {
        let a = answer(&req("What is the weather in New York?", &["get_weather"]));
        assert_eq!(a.tool_calls[0].tool_name, "get_weather");
        assert_eq!(a.tool_calls[0].args, json!({"city": "New York"}));
        let a = answer(&req("What is the weather in Paris?", &[]));
        assert!(a.tool_calls.is_empty());
        let a = answer(&req("please calculate (2 + 3) * 4.5?", &["calculate"]));
        assert_eq!(a.tool_calls[0].args, json!({"expression": "(2 + 3) * 4.5"}));
        let a = answer(&req("ask writer to draft a haiku", &["delegate_task"]));
        assert_eq!(
            a.tool_calls[0].args,
            json!({"agent": "writer", "task": "draft a haiku"})
        );
    }

    #[test]
    fn asks_a_remote_agent_lent_as_a_tool() {
        let tools = ["ask_weather", "delegate_task"];
        let mut r = req("ask weather to tell me about Oslo", &tools);
        let call = answer(&r).tool_calls.remove(0);
        assert_eq!(call.tool_name, "ask_weather");
        assert_eq!(call.args, json!({"task": "tell me about Oslo"}));
        with_result(
            &mut r,
            call,
            json!({"agent": "weather", "text": "Oslo is cloudy.", "state": "completed"}),
            false,
        );
        assert_eq!(answer(&r).text, "weather answered: Oslo is cloudy.");
        // Another name is a sub-agent's, when it has the delegation tool.
        let a = answer(&req("ask writer to draft", &tools));
        assert_eq!(a.tool_calls[0].tool_name, "delegate_task");
    }

    #[test]
    fn answers_with_the_tool_result() {
        let mut r = req("weather in Paris", &["get_weather"]);
        let call = answer(&r).tool_calls.remove(0);
        r.messages.push(Message::tool_calls("", vec![call.clone()]));
        r.messages
            .push(Message::tool_result(super::super::message::ToolResult {
                tool_call_id: call.tool_call_id,
                tool_name: call.tool_name,
                args: call.args,
                result: json!({"city": "Paris", "temperatureC": 21, "condition": "sunny"}),
                is_error: false,
            }));
        let a = answer(&r);
        assert!(a.tool_calls.is_empty());
        assert!(
            a.text.contains("21") && a.text.contains("sunny"),
            "{}",
            a.text
        );
    }

    const REFUND_TOOLS: [&str; 2] = ["lookup_order", "issue_refund"];

    /// `r` with the model's call and its result appended, as the runtime would.
    fn with_result(r: &mut ModelRequest, call: ToolCall, result: Value, is_error: bool) {
        r.messages.push(Message::tool_calls("", vec![call.clone()]));
        r.messages.push(Message::tool_result(ToolResult {
            tool_call_id: call.tool_call_id,
            tool_name: call.tool_name,
            args: call.args,
            result,
            is_error,
        }));
    }

    /// A refund request with the order looked up and `issue_refund` called: the request and
    /// that call.
    fn refund_called(text: &str) -> (ModelRequest, ToolCall) {
        let mut r = req(text, &REFUND_TOOLS);
        let lookup = answer(&r).tool_calls.remove(0);
        let order = lookup.args["orderId"].clone();
        with_result(
            &mut r,
            lookup,
            json!({"orderId": order, "total": 250, "status": "delivered"}),
            false,
        );
        let refund = answer(&r).tool_calls.remove(0);
        (r, refund)
    }

    #[test]
    fn refunds_look_up_the_order_then_refund_then_answer() {
        let mut r = req("Refund order o-1 40 arrived broken.", &REFUND_TOOLS);
        let a = answer(&r);
        assert_eq!(a.finish_reason, FinishReason::ToolCalls);
        assert_eq!(a.text, "");
        let lookup = &a.tool_calls[0];
        assert_eq!(lookup.tool_call_id, "call_1");
        assert_eq!(lookup.tool_name, "lookup_order");
        assert_eq!(lookup.args, json!({"orderId": "o-1"}));

        with_result(
            &mut r,
            lookup.clone(),
            json!({"orderId": "o-1", "total": 250, "status": "delivered"}),
            false,
        );
        let a = answer(&r);
        assert_eq!(a.finish_reason, FinishReason::ToolCalls);
        let refund = &a.tool_calls[0];
        assert_eq!(refund.tool_call_id, "call_2");
        assert_eq!(refund.tool_name, "issue_refund");
        assert_eq!(
            refund.args,
            json!({"orderId": "o-1", "amount": 40, "reason": "arrived broken"})
        );

        with_result(
            &mut r,
            refund.clone(),
            json!({"orderId": "o-1", "refunded": 40, "refundId": "rf-o-1"}),
            false,
        );
        let a = answer(&r);
        assert!(a.tool_calls.is_empty());
        assert_eq!(a.finish_reason, FinishReason::Stop);
        assert_eq!(a.text, "Refunded 40 for order o-1.");
    }

    #[test]
    fn a_denied_refund_is_answered_with_the_reason() {
        let (mut r, refund) = refund_called("refund order o-7 250 never arrived");
        assert_eq!(refund.args["amount"], json!(250));
        with_result(
            &mut r,
            refund,
            json!({"denied": true, "reason": "over the limit", "error": "Refund not approved: over the limit"}),
            true,
        );
        let a = answer(&r);
        assert!(a.tool_calls.is_empty());
        assert_eq!(
            a.text,
            "The refund of 250 for order o-7 was not approved: over the limit."
        );
    }

    #[test]
    fn other_refund_failures_are_described_generically() {
        let (mut r, refund) = refund_called("refund order o-7 250 never arrived");
        with_result(
            &mut r,
            refund,
            json!({"error": "the payment service is down"}),
            true,
        );
        assert_eq!(
            answer(&r).text,
            "The issue_refund tool failed: the payment service is down."
        );
        let mut r = req("refund order o-8 5 late", &REFUND_TOOLS);
        let lookup = answer(&r).tool_calls.remove(0);
        with_result(&mut r, lookup, json!({"error": "no such order"}), true);
        let a = answer(&r);
        assert!(a.tool_calls.is_empty());
        assert_eq!(a.text, "The lookup_order tool failed: no such order.");
    }

    #[test]
    fn refund_amounts_are_written_as_json_numbers() {
        let (_, refund) = refund_called("refund order o-1 250 damaged");
        assert_eq!(refund.args["amount"].to_string(), "250");
        let (_, refund) = refund_called("refund order o-1 40.5 damaged in transit");
        assert_eq!(refund.args["amount"].to_string(), "40.5");
        assert_eq!(refund.args["reason"], "damaged in transit");
        let (_, refund) = refund_called("refund order o-1 250.0 damaged");
        assert_eq!(refund.args["amount"].to_string(), "250");
        assert_eq!(amount_text(&json!(250.0)), "250");
        assert_eq!(amount_text(&json!(40.5)), "40.5");
        let (mut r, refund) = refund_called("refund order o-2 40.5 damaged");
        with_result(&mut r, refund, json!({"refunded": 40.5}), false);
        assert_eq!(answer(&r).text, "Refunded 40.5 for order o-2.");
    }

    #[test]
    fn refunds_need_both_tools_and_a_whole_request() {
        let text = "refund order o-1 250 damaged";
        assert_eq!(answer(&req(text, &[])).text, format!("You said: {text}"));
        assert_eq!(
            answer(&req(text, &["lookup_order"])).text,
            format!("You said: {text}")
        );
        for text in [
            "refund order o-1 250",
            "refund order o-1 0 damaged",
            "refund order o-1 -5 damaged",
            "refund order o-1 abc damaged",
            "refund order o-1 1e3 damaged",
            "refund order o-1 inf damaged",
            "refund order o-1",
        ] {
            let a = answer(&req(text, &REFUND_TOOLS));
            assert!(a.tool_calls.is_empty(), "{text}");
            assert_eq!(a.text, format!("You said: {text}"));
        }
    }

    #[test]
    fn truncates_to_max_output_tokens() {
        let mut r = req("one two three four five", &[]);
        r.settings.max_output_tokens = 3;
        let a = answer(&r);
        assert_eq!(a.text, "You said: one");
        assert_eq!(a.finish_reason, FinishReason::Length);
    }

    #[test]
    fn objects_validate_against_their_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 3},
                "age": {"type": "integer", "minimum": 18, "maximum": 99},
                "score": {"type": "number", "maximum": 0.5},
                "mood": {"type": "string", "enum": ["happy", "sad"]},
                "email": {"type": "string", "format": "email"},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
                "address": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
            },
            "required": ["name", "age", "mood", "tags"]
        });
        let mut r = req("make a person", &[]);
        r.output_schema = Some(schema.clone());
        let a = answer(&r);
        let v: Value = serde_json::from_str(&a.text).unwrap();
        Schema::compile(schema).unwrap().validate(&v).unwrap();
        assert_eq!(v["age"], 18);
        assert_eq!(v["mood"], "happy");
        let arr =
            instance_of(&json!({"type": "array", "items": {"type": "integer"}}), "x").unwrap();
        assert_eq!(arr, json!([1]));
    }

    #[test]
    fn chunks_concatenate_to_the_text() {
        let t = "You said: hello  big world";
        assert_eq!(word_chunks(t).concat(), t);
        assert!(word_chunks(t).len() >= 4);
    }

    #[test]
    fn schemas_over_the_limits_are_errors() {
        let properties: Map<String, Value> = (0..1500)
            .map(|i| (format!("p{i}"), json!({"type": "null"})))
            .collect();
        let deep = (0..40).fold(json!({"type": "string"}), |inner, _| {
            Value::Object(Map::from_iter([("items".to_owned(), inner)]))
        });
        let cases = [
            (
                json!({"type": "array", "minItems": 1_000_000}),
                "minItems 1000000 is over the limit of 1000",
            ),
            (
                json!({"type": "object", "properties": {"s": {"type": "string", "minLength": 600_000}}}),
                "minLength 600000 is over the limit of 10000",
            ),
            (
                json!({"type": "object", "minProperties": 5000}),
                "minProperties 5000 is over the limit of 1000",
            ),
            (
                json!({"type": "object", "properties": properties}),
                "properties: 1500 properties are over the limit of 1000",
            ),
            (deep, "the schema nests deeper than 32 levels"),
            (
                json!({"type": "array", "minItems": 1000, "items": {"type": "array", "minItems": 1000}}),
                "its smallest instance is over the limit of 1048576 bytes",
            ),
        ];
        for (schema, message) in cases {
            let err = OfflineModel.answer(&object_request(schema)).unwrap_err();
            assert_eq!(
                err.message,
                format!("cannot generate an object for this schema: {message}")
            );
        }
    }

    #[test]
    fn generates_a_large_object_within_the_limits() {
        let schema = json!({
            "type": "object",
            "properties": {
                "lines": {
                    "type": "array",
                    "minItems": 1000,
                    "items": {"type": "string", "minLength": 1000}
                }
            },
            "required": ["lines"]
        });
        let a = answer(&object_request(schema.clone()));
        assert!((a.text.len() as u64) < agentry_engine::schema::MAX_GENERATED_BYTES);
        let v: Value = serde_json::from_str(&a.text).unwrap();
        Schema::compile(schema).unwrap().validate(&v).unwrap();
        assert_eq!(v["lines"].as_array().unwrap().len(), 1000);
        assert_eq!(v["lines"][0].as_str().unwrap().chars().count(), 1000);
    }

    #[test]
    fn string_and_array_bounds_are_honoured() {
        let s = instance_of(
            &json!({"type": "string", "minLength": 50, "maxLength": 5}),
            "x",
        );
        assert_eq!(s.unwrap(), json!("examp"));
        let s = instance_of(&json!({"type": "string", "minLength": 12}), "é");
        assert_eq!(s.unwrap(), json!("example éxxx"));
        let a = instance_of(&json!({"type": "array", "minItems": 5, "maxItems": 2}), "x");
        assert_eq!(a.unwrap(), json!(["example x", "example x"]));
        let a = instance_of(&json!({"type": "array", "maxItems": 0}), "x");
        assert_eq!(a.unwrap(), json!([]));
    }

    #[test]
    fn json_chunks_are_few_for_large_documents() {
        let small = "x".repeat(100);
        let chunks = json_chunks(&small);
        assert!(chunks[..chunks.len() - 1].iter().all(|c| c.len() == 8));
        let large = "é".repeat(1_000_000);
        let chunks = json_chunks(&large);
        assert!(chunks.len() <= 64, "{}", chunks.len());
        assert_eq!(chunks.concat(), large);
    }

    #[tokio::test]
    async fn streams_a_large_object_in_few_chunks() {
        let schema = json!({"type": "array", "minItems": 1000,
                            "items": {"type": "string", "minLength": 1000}});
        let chunks: Vec<_> = OfflineModel
            .stream(&object_request(schema.clone()))
            .await
            .unwrap()
            .collect()
            .await;
        assert!(chunks.len() <= 65, "{}", chunks.len());
        let text: String = chunks
            .into_iter()
            .filter_map(|c| match c.unwrap() {
                ModelChunk::TextDelta(d) => Some(d),
                _ => None,
            })
            .collect();
        let v: Value = serde_json::from_str(&text).unwrap();
        Schema::compile(schema).unwrap().validate(&v).unwrap();
        let refused = OfflineModel
            .generate(&object_request(json!({"minItems": 5000})))
            .await
            .unwrap_err();
        assert!(
            refused.message.contains("minItems 5000"),
            "{}",
            refused.message
        );
    }
}
