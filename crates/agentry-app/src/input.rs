//! The bodies of the agent routes. Each type here is both the parser of its part of a body
//! (`Deserialize`) and its schema in /doc (`ToSchema`): the three input shapes, the generation
//! options, whose ranges and defaults are declared once in their types (`Int<0, 100>`, a
//! `default` that is the domain's), and an object's output schema.
//!
//! A body that cannot be read is a 400 naming the field at fault, e.g.
//! `options.contextLimit must be an integer between 0 and 100` or
//! `input[0].role must be one of "system", "user", "assistant"`: `serde_path_to_error` finds the
//! field, the type says what is wrong with it (see [`AT`]). A body with several faults is refused
//! for the first of `input`, `options` and `schema` at fault; within `input`, for its first
//! message at fault, and a message's role first; within `options`, for the first fault in the
//! document's order.

use std::fmt::{Display, Write as _};
use std::marker::PhantomData;

pub use crate::limits::MAX_KEY_CHARS;
use crate::limits::{MAX_CONTEXT_LIMIT, MAX_OUTPUT_TOKENS, MAX_STEPS};
use agentry_agents::{ApprovalAnswer, GenerateOptions, GenerationSettings, Message, Role};
use serde::de::value::{MapAccessDeserializer, MapDeserializer};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use serde_path_to_error::Segment;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, Schema, SchemaFormat, Type};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};

use crate::error::AppError;

// ---------------------------------------------------------------------------------------------
// Refusals: the field at fault, and what is wrong with it.

/// In a refusal's text, where the name of the field at fault goes (`{at}.role must be ...` for
/// the item `input[0]` says `input[0].role must be ...`). A text without it is the rest of a
/// sentence whose subject is the field (`must be an array` for `input[0].parts`). A body's own
/// refusals (`input is required`) are whole sentences.
const AT: &str = "{at}";

/// What a value of an unknown shape is told (`input` and its items).
const SHAPES: &str = "must be a string, an array of UIMessages or an array of ModelMessages";
/// What a role other than these is told.
const ROLES: &str = "must be one of \"system\", \"user\", \"assistant\"";

fn refuse<E: de::Error>(text: impl Display) -> E {
    E::custom(text)
}

/// The one check of a key a client chooses, for every front end: at most [`MAX_KEY_CHARS`]
/// characters and no NUL character, else a 400 naming `field` as the client wrote it
/// (`options.conversationId must be at most 256 characters`, `message.contextId must not
/// contain the NUL character`).
pub fn check_key(field: &str, value: &str) -> Result<(), AppError> {
    agentry_engine::id::check_key(field, value).map_err(AppError::bad_request)
}

/// The refusal of the field `at` of a body, as a whole sentence: the path under `at` that
/// `serde_path_to_error` found, and what the type there said.
fn refusal<E: Display>(at: &str, e: serde_path_to_error::Error<E>) -> String {
    let mut field = at.to_owned();
    for segment in e.path() {
        match segment {
            Segment::Seq { index } => {
                let _ = write!(field, "[{index}]");
            }
            Segment::Map { key } | Segment::Enum { variant: key } => {
                field.push('.');
                field.push_str(key);
            }
            Segment::Unknown => field.push_str(".?"),
        }
    }
    // Read from a `Value`, an error's text is the type's alone (no line and column).
    let text = e.into_inner().to_string();
    if text.contains(AT) {
        text.replace(AT, &field)
    } else {
        format!("{field} {text}")
    }
}

/// Reads `T` from `value`, the field `at` of a body: a refusal is a 400 that names the field at
/// fault under `at`.
fn read<'de, T: Deserialize<'de>>(value: &'de Value, at: &str) -> Result<T, AppError> {
    serde_path_to_error::deserialize(value).map_err(|e| AppError::bad_request(refusal(at, e)))
}

/// Reads the field `name` of a body: its value, or its refusal as a whole sentence, so that the
/// body names its fields' faults in its own order. (The body goes on reading after a refusal,
/// as a `Value` can.)
struct Field<T> {
    name: &'static str,
    value: PhantomData<T>,
}

impl<T> Field<T> {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            value: PhantomData,
        }
    }
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for Field<T> {
    type Value = Result<T, String>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        Ok(serde_path_to_error::deserialize(d).map_err(|e| refusal(self.name, e)))
    }
}

/// A value read by its JSON type: a type takes strings, arrays or objects by overriding their
/// readers, and a value of any other JSON type is [`Shaped::other`] (usually a refusal).
/// Reading an array or an object streams its items, so that each is read at its own path.
trait Shaped<'de>: Sized {
    /// A value of a JSON type this one does not take.
    fn other<E: de::Error>() -> Result<Self, E>;

    fn from_str<E: de::Error>(_: &str) -> Result<Self, E> {
        Self::other()
    }

    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let other = Self::other()?;
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(other)
    }

    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let other = Self::other()?;
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(other)
    }
}

/// The `Deserialize` of a [`Shaped`] type: it is read by its JSON type.
macro_rules! deserialize_by_shape {
    ($t:ty) => {
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                shaped(d)
            }
        }
    };
}

/// Reads a [`Shaped`] value.
fn shaped<'de, T: Shaped<'de>, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
    struct ByType<T>(PhantomData<T>);

    impl<'de, T: Shaped<'de>> Visitor<'de> for ByType<T> {
        type Value = T;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON value")
        }
        fn visit_unit<E: de::Error>(self) -> Result<T, E> {
            T::other()
        }
        fn visit_none<E: de::Error>(self) -> Result<T, E> {
            T::other()
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<T, E> {
            T::other()
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<T, E> {
            T::other()
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<T, E> {
            T::other()
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<T, E> {
            T::other()
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
            T::from_str(v)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
            T::from_seq(seq)
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            T::from_map(map)
        }
    }

    d.deserialize_any(ByType(PhantomData))
}

// ---------------------------------------------------------------------------------------------
// Values with a range, text, lists and objects: the fields of the options.

/// An integer in `MIN..=MAX`. A whole number written as a float (`3.0`) is an integer; anything
/// else is refused with the range. Its schema shows the same range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Int<const MIN: i64, const MAX: i64>(i64);

impl<const MIN: i64, const MAX: i64> Int<MIN, MAX> {
    pub fn get(self) -> i64 {
        self.0
    }
}

impl<'de, const MIN: i64, const MAX: i64> Deserialize<'de> for Int<MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        v.as_i64()
            .or_else(|| {
                // Beyond 2^53 a double no longer holds every whole number.
                v.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                    .map(|f| f as i64)
            })
            .filter(|n| (MIN..=MAX).contains(n))
            .map(Self)
            .ok_or_else(|| refuse(format_args!("must be an integer between {MIN} and {MAX}")))
    }
}

impl<const MIN: i64, const MAX: i64> PartialSchema for Int<MIN, MAX> {
    fn schema() -> RefOr<Schema> {
        let format = if MIN >= i32::MIN as i64 && MAX <= i32::MAX as i64 {
            KnownFormat::Int32
        } else {
            KnownFormat::Int64
        };
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .format(Some(SchemaFormat::KnownFormat(format)))
            .minimum(Some(MIN))
            .maximum(Some(MAX))
            .into()
    }
}

impl<const MIN: i64, const MAX: i64> ToSchema for Int<MIN, MAX> {}

/// A number in `MIN..=MAX` (whole bounds, as every option's are); anything else is refused with
/// the range. Its schema shows the same range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Float<const MIN: i64, const MAX: i64>(f64);

impl<const MIN: i64, const MAX: i64> Float<MIN, MAX> {
    pub fn get(self) -> f64 {
        self.0
    }
}

impl<'de, const MIN: i64, const MAX: i64> Deserialize<'de> for Float<MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d)?
            .as_f64()
            .filter(|x| (MIN as f64..=MAX as f64).contains(x))
            .map(Self)
            .ok_or_else(|| refuse(format_args!("must be a number between {MIN} and {MAX}")))
    }
}

impl<const MIN: i64, const MAX: i64> PartialSchema for Float<MIN, MAX> {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::Number)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Double)))
            .minimum(Some(MIN))
            .maximum(Some(MAX))
            .into()
    }
}

impl<const MIN: i64, const MAX: i64> ToSchema for Float<MIN, MAX> {}

/// A key a client chooses (a user, conversation or run id): a string of at most
/// [`MAX_KEY_CHARS`] characters without the NUL character ([`check_key`]). Its schema shows
/// the bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key(String);

impl Key {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Shaped<'de> for Key {
    fn other<E: de::Error>() -> Result<Self, E> {
        Err(refuse("must be a string"))
    }
    fn from_str<E: de::Error>(s: &str) -> Result<Self, E> {
        agentry_engine::id::check_key(AT, s).map_err(refuse)?;
        Ok(Self(s.to_owned()))
    }
}

deserialize_by_shape!(Key);

impl PartialSchema for Key {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .max_length(Some(MAX_KEY_CHARS))
            .into()
    }
}

impl ToSchema for Key {}

/// An array of strings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextList(pub Vec<String>);

const NOT_STRINGS: &str = "must be an array of strings";

impl<'de> Shaped<'de> for TextList {
    fn other<E: de::Error>() -> Result<Self, E> {
        Err(refuse(NOT_STRINGS))
    }
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut list = Vec::new();
        while let Some(item) = seq.next_element::<Value>()? {
            match item {
                Value::String(s) => list.push(s),
                _ => return Err(refuse(NOT_STRINGS)),
            }
        }
        Ok(Self(list))
    }
}

deserialize_by_shape!(TextList);

impl PartialSchema for TextList {
    fn schema() -> RefOr<Schema> {
        Vec::<String>::schema()
    }
}

impl ToSchema for TextList {}

/// A JSON object, taken as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JsonObject(pub Map<String, Value>);

impl<'de> Shaped<'de> for JsonObject {
    fn other<E: de::Error>() -> Result<Self, E> {
        Err(refuse("must be an object"))
    }
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        Map::deserialize(MapAccessDeserializer::new(map)).map(Self)
    }
}

deserialize_by_shape!(JsonObject);

impl PartialSchema for JsonObject {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new().schema_type(Type::Object).into()
    }
}

impl ToSchema for JsonObject {}

// ---------------------------------------------------------------------------------------------
// The generation options.

/// The defaults of the options a body leaves out: the domain's (`GenerateOptions::default()`).
/// The options take them for an absent field, and /doc shows them as the field's `default`.
mod defaults {
    use super::{GenerateOptions, GenerationSettings};

    pub fn context_limit() -> usize {
        GenerateOptions::default().context_limit
    }
    pub fn temperature() -> f64 {
        GenerationSettings::default().temperature
    }
    pub fn max_output_tokens() -> u32 {
        GenerationSettings::default().max_output_tokens
    }
    pub fn top_p() -> f64 {
        GenerationSettings::default().top_p
    }
    pub fn frequency_penalty() -> f64 {
        GenerationSettings::default().frequency_penalty
    }
    pub fn presence_penalty() -> f64 {
        GenerationSettings::default().presence_penalty
    }
}

/// Generation options (spec sections 2 and 8). A value out of range is a 400 naming the field;
/// `null` is the same as absent.
// `remote = "Self"`: the derived reader is the inherent `GenerationOptions::deserialize`, which
// the `Deserialize` impl below calls once it knows the options are an object.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, ToSchema)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct GenerationOptions {
    /// User id for tracking (and, with `conversationId`, for memory).
    #[schema(inline)]
    pub user_id: Option<Key>,
    /// Conversation id: agents with memory keep the conversation under it.
    #[schema(inline)]
    pub conversation_id: Option<Key>,
    /// How many messages of history to load.
    #[schema(inline, default = defaults::context_limit)]
    pub context_limit: Option<Int<0, { MAX_CONTEXT_LIMIT as i64 }>>,
    /// The most model calls (tool use) in one generation.
    #[schema(inline)]
    pub max_steps: Option<Int<1, { MAX_STEPS as i64 }>>,
    #[schema(inline, default = defaults::temperature)]
    pub temperature: Option<Float<0, 1>>,
    #[schema(inline, default = defaults::max_output_tokens)]
    pub max_output_tokens: Option<Int<1, { MAX_OUTPUT_TOKENS as i64 }>>,
    #[schema(inline, default = defaults::top_p)]
    pub top_p: Option<Float<0, 1>>,
    #[schema(inline, default = defaults::frequency_penalty)]
    pub frequency_penalty: Option<Float<0, 2>>,
    #[schema(inline, default = defaults::presence_penalty)]
    pub presence_penalty: Option<Float<0, 2>>,
    /// For reproducible results.
    #[schema(inline)]
    pub seed: Option<Int<{ i64::MIN }, { i64::MAX }>>,
    /// Sequences that stop generation.
    #[schema(inline)]
    pub stop_sequences: Option<TextList>,
    /// Provider-specific options, passed through, e.g. `{"openai": {"reasoningEffort": "low"}}`.
    #[schema(inline)]
    pub provider_options: Option<JsonObject>,
    /// Free-form context handed to the agent (its dynamic instructions read it), e.g.
    /// `{"language": "French"}`.
    #[schema(inline)]
    pub context: Option<JsonObject>,
    /// Run as a durable run: each model call and tool call is recorded, so the run survives a
    /// crash or a deploy, can be re-attached to, and can wait for a tool's approval. Implied by
    /// `runId`, by an agent its host declares durable, and by an agent with a tool that needs
    /// approval.
    pub durable: Option<bool>,
    /// The durable run's id, chosen by the caller (implies `durable`): the same id with the
    /// same input rejoins that run.
    #[schema(inline)]
    pub run_id: Option<Key>,
}

impl<'de> Shaped<'de> for GenerationOptions {
    fn other<E: de::Error>() -> Result<Self, E> {
        Err(refuse("must be an object"))
    }
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        // The derived reader (see `remote` above), not this trait's.
        let options = GenerationOptions::deserialize(MapAccessDeserializer::new(map))?;
        // Without `userId`, the context's names the user.
        if options.user_id.is_none()
            && let Some(u) = options.context_user()
        {
            agentry_engine::id::check_key(&format!("{AT}.context.userId"), u).map_err(refuse)?;
        }
        Ok(options)
    }
}

deserialize_by_shape!(GenerationOptions);

impl GenerationOptions {
    /// The `userId` of the context, if it is a string.
    fn context_user(&self) -> Option<&str> {
        self.context.as_ref()?.0.get("userId")?.as_str()
    }
}

/// The options a generation runs with: these, the defaults for the rest, and the user the
/// context names when `userId` does not.
impl From<GenerationOptions> for GenerateOptions {
    fn from(mut o: GenerationOptions) -> Self {
        let user_id = match o.user_id.take() {
            Some(u) => Some(u.0),
            None => o.context_user().map(str::to_owned),
        };
        // Each range fits the domain's type.
        GenerateOptions {
            user_id: user_id.map(Into::into),
            conversation_id: o.conversation_id.map(|c| c.0),
            context_limit: o
                .context_limit
                .map_or_else(defaults::context_limit, |n| n.get() as usize),
            max_steps: o.max_steps.map(|n| n.get() as u32),
            settings: GenerationSettings {
                temperature: o.temperature.map_or_else(defaults::temperature, Float::get),
                max_output_tokens: o
                    .max_output_tokens
                    .map_or_else(defaults::max_output_tokens, |n| n.get() as u32),
                top_p: o.top_p.map_or_else(defaults::top_p, Float::get),
                frequency_penalty: o
                    .frequency_penalty
                    .map_or_else(defaults::frequency_penalty, Float::get),
                presence_penalty: o
                    .presence_penalty
                    .map_or_else(defaults::presence_penalty, Float::get),
                seed: o.seed.map(Int::get),
                stop_sequences: o.stop_sequences.map(|s| s.0).unwrap_or_default(),
                provider_options: o.provider_options.map(|p| Value::Object(p.0)),
            },
            // Who is asking is decided by authentication, not by the body (see `Caller`).
            memory_owner: Default::default(),
            context: o.context.map(|c| c.0).unwrap_or_default(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The input: a string, or messages.

/// Who says a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MessageRole {
    System,
    User,
    Assistant,
}

impl<'de> Shaped<'de> for MessageRole {
    fn other<E: de::Error>() -> Result<Self, E> {
        Err(refuse(ROLES))
    }
    fn from_str<E: de::Error>(s: &str) -> Result<Self, E> {
        match s {
            "system" => Ok(Self::System),
            "user" => Ok(Self::User),
            "assistant" => Ok(Self::Assistant),
            _ => Self::other(),
        }
    }
}

deserialize_by_shape!(MessageRole);

impl From<MessageRole> for Role {
    fn from(r: MessageRole) -> Self {
        match r {
            MessageRole::System => Role::System,
            MessageRole::User => Role::User,
            MessageRole::Assistant => Role::Assistant,
        }
    }
}

/// The kind of a text part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TextPartType {
    Text,
}

/// A text part of a message. (A UIMessage's other part kinds, such as files or tool parts,
/// are accepted and carry no prompt text.)
#[derive(Debug, Clone, PartialEq, Eq, ToSchema)]
pub struct TextPart {
    #[serde(rename = "type")]
    pub kind: TextPartType,
    pub text: String,
}

/// The keys of a part that matter.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum PartField {
    Type,
    Text,
    #[serde(other)]
    Other,
}

/// A part's `type` and `text`, as they are.
fn part_fields<'de, A: MapAccess<'de>>(
    mut map: A,
) -> Result<(Option<Value>, Option<Value>), A::Error> {
    let (mut kind, mut text) = (None, None);
    while let Some(field) = map.next_key()? {
        match field {
            PartField::Type => kind = Some(map.next_value::<Value>()?),
            PartField::Text => text = Some(map.next_value::<Value>()?),
            PartField::Other => {
                map.next_value::<IgnoredAny>()?;
            }
        }
    }
    Ok((kind, text))
}

/// A part of a UIMessage: a text part (`type` is required, and a text part's `text` must be a
/// string), or `None` for a part of another kind.
struct UiPart(Option<TextPart>);

impl<'de> Shaped<'de> for UiPart {
    fn other<E: de::Error>() -> Result<Self, E> {
        Err(refuse(format_args!("{AT}.type is required")))
    }
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        let (kind, text) = part_fields(map)?;
        match kind.as_ref().and_then(Value::as_str) {
            None => Self::other(),
            Some("text") => match text {
                Some(Value::String(text)) => Ok(Self(Some(TextPart {
                    kind: TextPartType::Text,
                    text,
                }))),
                _ => Err(refuse(format_args!("{AT}.text must be a string"))),
            },
            Some(_) => Ok(Self(None)),
        }
    }
}

deserialize_by_shape!(UiPart);

/// The `parts` of a UIMessage: its text parts (the other kinds carry no prompt text).
struct UiParts(Vec<TextPart>);

impl<'de> Shaped<'de> for UiParts {
    fn other<E: de::Error>() -> Result<Self, E> {
        Err(refuse("must be an array"))
    }
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut parts = Vec::new();
        while let Some(UiPart(part)) = seq.next_element()? {
            parts.extend(part);
        }
        Ok(Self(parts))
    }
}

deserialize_by_shape!(UiParts);

/// A UIMessage, as the AI SDK's `useChat` sends it.
#[derive(Debug, Clone, PartialEq, Eq, ToSchema)]
pub struct UiMessage {
    pub role: MessageRole,
    /// Its text parts make its text (parts of other kinds are accepted and left out).
    pub parts: Vec<TextPart>,
}

/// The content of a ModelMessage: a string, or text parts.
#[derive(Debug, Clone, PartialEq, Eq, ToSchema)]
#[serde(untagged)]
pub enum ModelContent {
    Text(String),
    /// Text parts (other items are accepted and left out).
    Parts(Vec<TextPart>),
}

/// A content part, taken when it is a text part with a string `text`, and left out otherwise.
struct ContentPart(Option<TextPart>);

impl<'de> Shaped<'de> for ContentPart {
    fn other<E: de::Error>() -> Result<Self, E> {
        Ok(Self(None))
    }
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        Ok(Self(match part_fields(map)? {
            (Some(Value::String(kind)), Some(Value::String(text))) if kind == "text" => {
                Some(TextPart {
                    kind: TextPartType::Text,
                    text,
                })
            }
            _ => None,
        }))
    }
}

deserialize_by_shape!(ContentPart);

/// A message's `content`, or `None` when it is neither a string nor an array: the message
/// decides (a UIMessage, which has `parts`, leaves its `content` alone).
struct MaybeContent(Option<ModelContent>);

impl<'de> Shaped<'de> for MaybeContent {
    fn other<E: de::Error>() -> Result<Self, E> {
        Ok(Self(None))
    }
    fn from_str<E: de::Error>(s: &str) -> Result<Self, E> {
        Ok(Self(Some(ModelContent::Text(s.to_owned()))))
    }
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut parts = Vec::new();
        while let Some(ContentPart(part)) = seq.next_element()? {
            parts.extend(part);
        }
        Ok(Self(Some(ModelContent::Parts(parts))))
    }
}

deserialize_by_shape!(MaybeContent);

/// A ModelMessage.
#[derive(Debug, Clone, PartialEq, Eq, ToSchema)]
pub struct ModelMessage {
    pub role: MessageRole,
    pub content: ModelContent,
}

/// One message of an input array: a UIMessage (it has `parts`), or else a ModelMessage (it has
/// `content`).
// Its reader is the parser of both.
#[derive(Debug, Clone, PartialEq, Eq, ToSchema)]
#[serde(untagged)]
pub enum InputMessage {
    Ui(UiMessage),
    Model(ModelMessage),
}

/// The keys of a message that matter.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum MessageField {
    Role,
    Parts,
    Content,
    #[serde(other)]
    Other,
}

impl<'de> Shaped<'de> for InputMessage {
    fn other<E: de::Error>() -> Result<Self, E> {
        Err(refuse(format_args!(
            "input {SHAPES}: {AT} is not an object"
        )))
    }
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let (mut role, mut parts, mut content) = (None, None, None);
        // The role is checked first: `parts` before it in the document are read after it.
        let mut parts_before_role = None;
        while let Some(field) = map.next_key()? {
            match field {
                MessageField::Role => role = Some(map.next_value::<MessageRole>()?),
                MessageField::Parts if role.is_none() => {
                    parts_before_role = Some(map.next_value::<Value>()?)
                }
                MessageField::Parts => parts = Some(map.next_value::<UiParts>()?.0),
                MessageField::Content => content = Some(map.next_value::<MaybeContent>()?.0),
                MessageField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let role = role.ok_or_else(|| refuse(format_args!("{AT}.role {ROLES}")))?;
        if let Some(v) = &parts_before_role {
            let at = format!("{AT}.parts");
            let read = serde_path_to_error::deserialize::<_, UiParts>(v);
            parts = Some(read.map_err(|e| refuse(refusal(&at, e)))?.0);
        }
        match (parts, content) {
            (Some(parts), _) => Ok(Self::Ui(UiMessage { role, parts })),
            (None, Some(Some(content))) => Ok(Self::Model(ModelMessage { role, content })),
            (None, Some(None)) => Err(refuse(format_args!("{AT}.content must be a string"))),
            (None, None) => Err(refuse(format_args!(
                "input {SHAPES}: {AT} has neither parts nor content"
            ))),
        }
    }
}

deserialize_by_shape!(InputMessage);

impl InputMessage {
    /// The message the agent reads: the role, and the texts of the parts one after the other.
    pub fn into_message(self) -> Message {
        let (role, text) = match self {
            Self::Ui(m) => (m.role, concat(m.parts)),
            Self::Model(m) => match m.content {
                ModelContent::Text(text) => (m.role, text),
                ModelContent::Parts(parts) => (m.role, concat(parts)),
            },
        };
        Message::new(role.into(), text)
    }
}

fn concat(parts: Vec<TextPart>) -> String {
    parts.into_iter().map(|p| p.text).collect()
}

/// The agent's input: a string (one user message), or an array (not empty) of messages, each a
/// UIMessage or a ModelMessage.
#[derive(Debug, Clone, PartialEq, Eq, ToSchema)]
#[serde(untagged)]
pub enum AgentInput {
    Text(String),
    Messages(Vec<InputMessage>),
}

impl<'de> Shaped<'de> for AgentInput {
    fn other<E: de::Error>() -> Result<Self, E> {
        Err(refuse(SHAPES))
    }
    fn from_str<E: de::Error>(s: &str) -> Result<Self, E> {
        Ok(Self::Text(s.to_owned()))
    }
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut messages = Vec::new();
        while let Some(m) = seq.next_element()? {
            messages.push(m);
        }
        if messages.is_empty() {
            return Err(refuse("must not be empty"));
        }
        Ok(Self::Messages(messages))
    }
}

deserialize_by_shape!(AgentInput);

impl AgentInput {
    /// The messages the agent reads.
    pub fn into_messages(self) -> Vec<Message> {
        match self {
            Self::Text(s) => vec![Message::user(s)],
            Self::Messages(m) => m.into_iter().map(InputMessage::into_message).collect(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// An object's output schema, and the bodies.

/// The top-level type of an output schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OutputSchemaType {
    Object,
    Array,
}

/// A JSON Schema whose top level is an object or an array, kept whole (the hub compiles it and
/// checks it against the generation limits).
#[derive(Debug, Clone, PartialEq)]
pub struct OutputSchema(pub Value);

impl<'de> Deserialize<'de> for OutputSchema {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let schema = Value::deserialize(d)?;
        match schema.get("type").map(OutputSchemaType::deserialize) {
            Some(Ok(_)) => Ok(Self(schema)),
            _ => Err(refuse(
                "must be a JSON Schema whose top-level type is \"object\" or \"array\"",
            )),
        }
    }
}

impl PartialSchema for OutputSchema {
    fn schema() -> RefOr<Schema> {
        let object = || ObjectBuilder::new().schema_type(Type::Object);
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some(
                "A JSON Schema whose top level is an object or an array (type, properties, items, \
                 required, format, enum, minimum, maximum, ...).",
            ))
            .property("type", Ref::from_schema_name(OutputSchemaType::name()))
            .required("type")
            .property("properties", object())
            .property("items", object())
            .property("required", Vec::<String>::schema())
            .into()
    }
}

impl ToSchema for OutputSchema {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((OutputSchemaType::name().into(), OutputSchemaType::schema()));
        OutputSchemaType::schemas(schemas);
    }
}

/// The keys of a body that matter.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum BodyField {
    Input,
    Options,
    Schema,
    #[serde(other)]
    Other,
}

/// The fields of a generation body.
struct BodyFields {
    input: AgentInput,
    options: Option<GenerationOptions>,
    schema: Option<OutputSchema>,
}

impl BodyFields {
    /// Reads a body's fields (`schema` only `with_schema`, else it is ignored like any other
    /// key). A body with faults in several fields is refused for the first of `input`, `options`
    /// and `schema`, whatever their order in the document (a missing `schema` is the body's to
    /// refuse, after these).
    fn read<'de, A: MapAccess<'de>>(mut map: A, with_schema: bool) -> Result<Self, A::Error> {
        let (mut input, mut options, mut schema) = (None, None, None);
        while let Some(field) = map.next_key()? {
            match field {
                BodyField::Input => input = Some(map.next_value_seed(Field::new("input"))?),
                BodyField::Options => options = Some(map.next_value_seed(Field::new("options"))?),
                BodyField::Schema if with_schema => {
                    schema = Some(map.next_value_seed(Field::new("schema"))?)
                }
                BodyField::Schema | BodyField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let input = input.unwrap_or_else(|| Err("input is required".to_owned()));
        Ok(Self {
            input: input.map_err(refuse)?,
            options: options.transpose().map_err(refuse)?.flatten(),
            schema: schema.transpose().map_err(refuse)?,
        })
    }
}

const NOT_AN_OBJECT: &str = "Invalid request body: expected a JSON object";

/// Body of /text, /stream and /chat. (/chat also takes a chat transport's `messages`, an array
/// of UIMessages, in place of `input`.)
#[derive(Debug, Clone, PartialEq, ToSchema)]
#[schema(example = json!({"input": "What is the weather in Paris?", "options": {"userId": "u-1", "conversationId": "c-1"}}))]
pub struct AgentRequest {
    pub input: AgentInput,
    pub options: Option<GenerationOptions>,
}

impl<'de> Shaped<'de> for AgentRequest {
    fn other<E: de::Error>() -> Result<Self, E> {
        Err(refuse(NOT_AN_OBJECT))
    }
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        let f = BodyFields::read(map, false)?;
        Ok(Self {
            input: f.input,
            options: f.options,
        })
    }
}

deserialize_by_shape!(AgentRequest);

/// Body of /object and /stream-object.
#[derive(Debug, Clone, PartialEq, ToSchema)]
#[schema(example = json!({"input": "a film", "schema": {"type": "object", "properties": {"title": {"type": "string"}, "rating": {"type": "integer", "minimum": 1, "maximum": 5}}, "required": ["title", "rating"]}}))]
pub struct ObjectRequest {
    pub input: AgentInput,
    pub schema: OutputSchema,
    pub options: Option<GenerationOptions>,
}

impl<'de> Shaped<'de> for ObjectRequest {
    fn other<E: de::Error>() -> Result<Self, E> {
        Err(refuse(NOT_AN_OBJECT))
    }
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        let f = BodyFields::read(map, true)?;
        Ok(Self {
            input: f.input,
            schema: f.schema.ok_or_else(|| refuse("schema is required"))?,
            options: f.options,
        })
    }
}

deserialize_by_shape!(ObjectRequest);

// ---------------------------------------------------------------------------------------------
// What the use cases call.

/// Normalises `input`: a string, an array of UIMessages (`role`, `parts`), or an array of
/// ModelMessages (`role`, `content`).
pub fn parse_input(input: Option<&Value>) -> Result<Vec<Message>, AppError> {
    let input = input.ok_or_else(|| AppError::bad_request("input is required"))?;
    Ok(read::<AgentInput>(input, "input")?.into_messages())
}

/// Validates and defaults `options` (spec sections 2 and 8).
pub fn parse_options(options: Option<&Value>) -> Result<GenerateOptions, AppError> {
    let options = match options {
        Some(v) => read::<Option<GenerationOptions>>(v, "options")?,
        None => None,
    };
    Ok(options.unwrap_or_default().into())
}

/// What a generation route reads from its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// `{input, options?}`.
    Text,
    /// As `Text`, and a chat client's `messages` in place of `input`.
    Chat,
    /// `{input, schema, options?}`.
    Object,
}

/// A validated generation request: the messages, the options, and for an object the schema
/// (compiled, and checked against the generation limits, by the hub).
#[derive(Debug, Clone)]
pub struct Generation {
    pub input: Vec<Message>,
    pub options: GenerateOptions,
    pub schema: Option<Value>,
    /// What the request asks of durability.
    pub durability: Durability,
}

/// Whether a generation asked to be a durable run, and under which id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Durability {
    pub durable: bool,
    pub run_id: Option<String>,
}

impl Durability {
    fn of(options: &GenerationOptions) -> Self {
        let run_id = options.run_id.as_ref().map(|r| r.0.clone());
        Self {
            durable: options.durable == Some(true) || run_id.is_some(),
            run_id,
        }
    }
}

/// Reads a generation route's body.
pub fn read_body(body: &Value, kind: BodyKind) -> Result<Generation, AppError> {
    // A body's refusal is a whole sentence already (its fields name their faults).
    let refused = |e: serde_json::Error| AppError::bad_request(e.to_string());
    let (input, options, schema) = match kind {
        BodyKind::Object => {
            let b = ObjectRequest::deserialize(body).map_err(refused)?;
            (b.input, b.options, Some(b.schema.0))
        }
        BodyKind::Text | BodyKind::Chat => {
            let b = match body.as_object() {
                // A chat client's default transport sends `messages`; the spec's shape is
                // `input`, and a refusal names it so.
                Some(o)
                    if kind == BodyKind::Chat
                        && !o.contains_key("input")
                        && o.contains_key("messages") =>
                {
                    let renamed = o.iter().map(|(k, v)| match k.as_str() {
                        "messages" => ("input", v),
                        k => (k, v),
                    });
                    AgentRequest::deserialize(MapDeserializer::new(renamed))
                }
                _ => AgentRequest::deserialize(body),
            }
            .map_err(refused)?;
            (b.input, b.options, None)
        }
    };
    let mut options = options.unwrap_or_default();
    // A chat transport names its chat `id` (the AI SDK's `useChat`): without a
    // `conversationId`, it is the conversation (so memory and the chat resume URL find it).
    if kind == BodyKind::Chat
        && options.conversation_id.is_none()
        && let Some(id) = body.get("id").and_then(Value::as_str)
        && !id.is_empty()
    {
        check_key("id", id)?;
        options.conversation_id = Some(Key(id.to_owned()));
    }
    Ok(Generation {
        input: input.into_messages(),
        durability: Durability::of(&options),
        options: options.into(),
        schema,
    })
}

/// The answers to tool approvals a chat client sends back (the AI SDK's
/// `addToolApprovalResponse`, then `sendMessage`): the tool parts of its last message, an
/// assistant message, in state `approval-responded`, and that message's id (a durable run's
/// messages are named by their run's id). `None` when the body carries no such answer.
pub fn chat_approvals(body: &Value) -> Option<(String, Vec<ApprovalAnswer>)> {
    let messages = body
        .get("messages")
        .or_else(|| body.get("input"))?
        .as_array()?;
    let last = messages.last()?;
    if last.get("role").and_then(Value::as_str) != Some("assistant") {
        return None;
    }
    let id = last.get("id").and_then(Value::as_str)?.to_owned();
    let answers: Vec<ApprovalAnswer> = last
        .get("parts")?
        .as_array()?
        .iter()
        .filter(|p| p.get("state").and_then(Value::as_str) == Some("approval-responded"))
        .filter_map(|p| {
            let approval = p.get("approval")?;
            Some(ApprovalAnswer {
                approval_id: approval.get("id")?.as_str()?.to_owned(),
                approved: approval.get("approved")?.as_bool()?,
                reason: approval
                    .get("reason")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                expired: false,
                by: None,
            })
        })
        .collect();
    (!answers.is_empty()).then_some((id, answers))
}
