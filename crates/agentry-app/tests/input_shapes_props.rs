//! Properties of the agent request body readers (`input::parse_input` and `parse_options`):
//! the three input shapes of spec section 2 give the same texts and roles in order; any JSON is
//! read or refused with a 400, never a panic; options in their ranges (spec section 8) are taken,
//! options out of them are refused with a message naming `options.<field>`.

use agentry_agents::{MAX_CONTEXT_LIMIT, Message, Role};
use agentry_app::input::{parse_input, parse_options};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

// ---- strategies ----

fn text() -> impl Strategy<Value = String> {
    prop_oneof![3 => "[a-zA-Z0-9 ,.?]{0,24}", 1 => ".{0,24}"]
}

fn role() -> impl Strategy<Value = Role> {
    prop_oneof![Just(Role::System), Just(Role::User), Just(Role::Assistant)]
}

/// Any JSON, floats included, at most 4 levels deep.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from), // NaN and infinities become null
        text().prop_map(Value::String),
        // Names the readers look for, so that objects often look almost right.
        prop::sample::select(vec!["text", "user", "system", "assistant", "tool", "file"])
            .prop_map(Value::from),
    ];
    let key = prop_oneof![
        3 => prop::sample::select(vec![
            "role", "parts", "type", "text", "content", "input", "options", "temperature",
            "maxSteps", "contextLimit", "seed", "stopSequences", "context", "userId",
            "providerOptions",
        ])
        .prop_map(str::to_owned),
        1 => text(),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// One message as (role, the parts of its text).
fn message() -> impl Strategy<Value = (Role, Vec<String>)> {
    (role(), prop::collection::vec(text(), 0..4))
}

/// A UIMessage: `parts` of type `text`, with parts of other kinds (which carry no prompt text)
/// mixed in.
fn ui_message(role: Role, texts: &[String], others: &[bool]) -> Value {
    let mut parts = Vec::new();
    for (i, t) in texts.iter().enumerate() {
        if others.get(i).copied().unwrap_or(false) {
            parts.push(json!({"type": "reasoning", "text": "not part of the prompt"}));
        }
        parts.push(json!({"type": "text", "text": t}));
    }
    if others.last().copied().unwrap_or(false) {
        parts.push(json!({"type": "step-start"}));
    }
    json!({"role": role.as_str(), "parts": parts})
}

/// A ModelMessage: `content` a string, or (when asked) an array of text parts.
fn model_message(role: Role, texts: &[String], as_parts: bool) -> Value {
    if as_parts {
        let parts: Vec<Value> = texts
            .iter()
            .map(|t| json!({"type": "text", "text": t}))
            .collect();
        json!({"role": role.as_str(), "content": parts})
    } else {
        json!({"role": role.as_str(), "content": texts.concat()})
    }
}

fn roles_and_texts(messages: &[Message]) -> Vec<(Role, String)> {
    messages
        .iter()
        .map(|m| (m.role, m.content.clone()))
        .collect()
}

/// Each option with its range, as spec section 8 and the README give them.
#[derive(Debug, Clone, Copy)]
enum Range {
    Number(f64, f64),
    Integer(i64, i64),
}

const OPTIONS: &[(&str, Range)] = &[
    ("temperature", Range::Number(0.0, 1.0)),
    ("topP", Range::Number(0.0, 1.0)),
    ("frequencyPenalty", Range::Number(0.0, 2.0)),
    ("presencePenalty", Range::Number(0.0, 2.0)),
    ("maxOutputTokens", Range::Integer(1, 1_000_000)),
    ("maxSteps", Range::Integer(1, 100)),
    ("contextLimit", Range::Integer(0, MAX_CONTEXT_LIMIT as i64)),
];

/// An option and a value in its range.
fn option_in_range() -> impl Strategy<Value = (&'static str, Value)> {
    prop::sample::select(OPTIONS.to_vec()).prop_flat_map(|(name, range)| match range {
        Range::Number(lo, hi) => prop_oneof![
            (lo..=hi).prop_map(Value::from).boxed(),
            Just(Value::from(lo)).boxed(),
            Just(Value::from(hi)).boxed(),
        ]
        .prop_map(move |v| (name, v))
        .boxed(),
        Range::Integer(lo, hi) => prop_oneof![
            (lo..=hi).prop_map(Value::from).boxed(),
            // A whole number written as a float (`3.0`) is still an integer.
            (lo..=hi).prop_map(|x| Value::from(x as f64)).boxed(),
        ]
        .prop_map(move |v| (name, v))
        .boxed(),
    })
}

/// An option and a value out of its range, or not a number at all.
fn option_out_of_range() -> impl Strategy<Value = (&'static str, Value)> {
    prop::sample::select(OPTIONS.to_vec()).prop_flat_map(|(name, range)| {
        let wrong_type = prop_oneof![
            text().prop_map(Value::String),
            Just(json!(true)),
            Just(json!([1])),
            Just(json!({"value": 1})),
        ];
        let out = match range {
            Range::Number(lo, hi) => prop_oneof![
                (-1.0e300..lo)
                    .prop_filter("below", move |x| *x < lo)
                    .boxed(),
                (hi..1.0e300).prop_filter("above", move |x| *x > hi).boxed(),
            ]
            .prop_map(Value::from)
            .boxed(),
            Range::Integer(lo, hi) => prop_oneof![
                (i64::MIN..lo).prop_map(Value::from).boxed(),
                (hi + 1..=i64::MAX).prop_map(Value::from).boxed(),
                // Not a whole number.
                (lo..hi).prop_map(|x| Value::from(x as f64 + 0.5)).boxed(),
            ]
            .boxed(),
        };
        prop_oneof![3 => out, 1 => wrong_type].prop_map(move |v| (name, v))
    })
}

fn field_value(o: &agentry_agents::GenerateOptions, name: &str) -> f64 {
    let s = &o.settings;
    match name {
        "temperature" => s.temperature,
        "topP" => s.top_p,
        "frequencyPenalty" => s.frequency_penalty,
        "presencePenalty" => s.presence_penalty,
        "maxOutputTokens" => f64::from(s.max_output_tokens),
        "maxSteps" => f64::from(o.max_steps.unwrap()),
        "contextLimit" => o.context_limit as f64,
        other => unreachable!("{other}"),
    }
}

// ---- properties ----

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A string is one user message with that text.
    #[test]
    fn a_string_is_one_user_message(s in text()) {
        let got = parse_input(Some(&Value::String(s.clone()))).unwrap();
        prop_assert_eq!(roles_and_texts(&got), vec![(Role::User, s)]);
    }

    /// UIMessages and ModelMessages of the same conversation give the same messages, in order:
    /// each with its role and the concatenation of its text parts.
    #[test]
    fn the_three_shapes_agree(
        messages in prop::collection::vec(message(), 1..6),
        others in prop::collection::vec(any::<bool>(), 0..6),
        as_parts in any::<bool>(),
    ) {
        let want: Vec<(Role, String)> =
            messages.iter().map(|(r, t)| (*r, t.concat())).collect();
        let ui = Value::Array(
            messages.iter().map(|(r, t)| ui_message(*r, t, &others)).collect(),
        );
        let model = Value::Array(
            messages.iter().map(|(r, t)| model_message(*r, t, as_parts)).collect(),
        );
        prop_assert_eq!(roles_and_texts(&parse_input(Some(&ui)).unwrap()), want.clone());
        prop_assert_eq!(roles_and_texts(&parse_input(Some(&model)).unwrap()), want.clone());
        // A single message as a string is the string form.
        if let [(Role::User, t)] = messages.as_slice() {
            let s = Value::String(t.concat());
            prop_assert_eq!(roles_and_texts(&parse_input(Some(&s)).unwrap()), want);
        }
    }

    /// Any JSON as `input` and as `options`: read or refused with a 400 and a message, never a
    /// panic. Read input is never empty, and has one message per array item.
    #[test]
    fn any_json_is_read_or_refused(v in json()) {
        match parse_input(Some(&v)) {
            Ok(messages) => {
                let expected_len = match &v {
                    Value::String(_) => 1,
                    Value::Array(a) => a.len(),
                    other => return Err(TestCaseError::fail(format!("{other} was read as input"))),
                };
                prop_assert_eq!(messages.len(), expected_len);
            }
            Err(e) => {
                prop_assert_eq!(e.status(), 400);
                prop_assert!(e.message.contains("input"), "{}", e.message);
            }
        }
        match parse_options(Some(&v)) {
            Ok(_) => prop_assert!(v.is_object() || v.is_null(), "{} was read as options", v),
            Err(e) => {
                prop_assert_eq!(e.status(), 400);
                prop_assert!(e.message.starts_with("options"), "{}", e.message);
            }
        }
        // The same value wrapped as a body's fields.
        let body = json!({"input": v, "options": v});
        let _ = parse_input(body.get("input"));
        let _ = parse_options(body.get("options"));
    }

    /// Values in range are taken as they are.
    #[test]
    fn options_in_range_are_accepted(
        picked in prop::collection::vec(option_in_range(), 1..6),
        seed in any::<i64>(),
    ) {
        let mut o: Map<String, Value> =
            picked.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
        o.insert("seed".into(), Value::from(seed));
        let opts = parse_options(Some(&Value::Object(o.clone()))).unwrap();
        prop_assert_eq!(opts.settings.seed, Some(seed));
        for (name, value) in &o {
            if name != "seed" {
                prop_assert_eq!(field_value(&opts, name), value.as_f64().unwrap(), "{}", name);
            }
        }
    }

    /// A value out of range, or of the wrong type, is a 400 naming the field.
    #[test]
    fn options_out_of_range_are_refused_by_name(
        (name, value) in option_out_of_range(),
        (ok_name, ok_value) in option_in_range(),
    ) {
        let mut o = Map::new();
        if ok_name != name {
            o.insert(ok_name.to_owned(), ok_value);
        }
        o.insert(name.to_owned(), value.clone());
        let e = parse_options(Some(&Value::Object(o))).unwrap_err();
        prop_assert_eq!(e.status(), 400);
        let field = format!("options.{name}");
        prop_assert!(e.message.contains(&field), "{} for {} = {}", e.message, name, value);
    }
}
