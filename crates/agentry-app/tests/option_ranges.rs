//! Each generation option's range and default, as /doc shows them (the schema of
//! `GenerationOptions`, which /doc publishes as it is), are what the parser enforces: both bounds
//! are taken, the nearest values beyond them are refused with the message naming the field, and
//! an absent or `null` option takes the default. The schema and the parser come from one type,
//! so this guards that generation.

use std::collections::BTreeSet;

use agentry_agents::GenerateOptions;
use agentry_app::input::{BodyKind, GenerationOptions, parse_options, read_body};
use serde_json::{Map, Value, json};
use utoipa::PartialSchema;

/// An option's range and default as the schema gives them.
#[derive(Debug)]
struct Documented {
    name: String,
    integer: bool,
    minimum: Value,
    maximum: Value,
    default: Option<Value>,
}

/// The options with a range in the schema of `GenerationOptions`.
fn documented() -> Vec<Documented> {
    let schema = serde_json::to_value(GenerationOptions::schema()).unwrap();
    let properties = schema["properties"].as_object().expect("properties");
    properties
        .iter()
        .filter_map(|(name, property)| {
            // `{"oneOf": [the value's schema, {"type": "null"}], "default": ...}` for an option
            // that may be null, else the value's schema itself.
            let value = property["oneOf"]
                .as_array()
                .and_then(|items| items.iter().find(|i| i["type"] != "null"))
                .unwrap_or(property);
            let (minimum, maximum) = (value.get("minimum")?, value.get("maximum")?);
            Some(Documented {
                name: name.clone(),
                integer: match value["type"].as_str() {
                    Some("integer") => true,
                    Some("number") => false,
                    other => panic!("{name} has a range and the type {other:?}"),
                },
                minimum: minimum.clone(),
                maximum: maximum.clone(),
                default: property
                    .get("default")
                    .or_else(|| value.get("default"))
                    .cloned(),
            })
        })
        .collect()
}

/// The value the parser gave option `name`, as JSON (`None`: the option is unset).
fn parsed(o: &GenerateOptions, name: &str) -> Option<Value> {
    let s = &o.settings;
    match name {
        "contextLimit" => Some(json!(o.context_limit)),
        "maxSteps" => o.max_steps.map(Value::from),
        "temperature" => Some(json!(s.temperature)),
        "maxOutputTokens" => Some(json!(s.max_output_tokens)),
        "topP" => Some(json!(s.top_p)),
        "frequencyPenalty" => Some(json!(s.frequency_penalty)),
        "presencePenalty" => Some(json!(s.presence_penalty)),
        "seed" => s.seed.map(Value::from),
        other => panic!("the test does not know the option {other}: add it to `parsed`"),
    }
}

/// The same number: exactly for an integer option, as a double for the others.
fn same(integer: bool, a: &Value, b: &Value) -> bool {
    if integer {
        a.as_i64().is_some() && a.as_i64() == b.as_i64()
    } else {
        a.as_f64().is_some() && a.as_f64() == b.as_f64()
    }
}

/// `n` as the JSON number closest to it (integers beyond 64 bits become doubles).
fn number(n: i128) -> Value {
    i64::try_from(n)
        .map(Value::from)
        .or_else(|_| u64::try_from(n).map(Value::from))
        .unwrap_or_else(|_| json!(n as f64))
}

fn options(name: &str, value: Value) -> Value {
    Value::Object(Map::from_iter([(name.to_owned(), value)]))
}

#[test]
fn the_documented_options_are_the_ranged_ones() {
    let docs = documented();
    let ranged: BTreeSet<&str> = docs.iter().map(|d| d.name.as_str()).collect();
    let expected = [
        "contextLimit",
        "maxSteps",
        "temperature",
        "maxOutputTokens",
        "topP",
        "frequencyPenalty",
        "presencePenalty",
        "seed",
    ];
    assert_eq!(ranged, BTreeSet::from(expected));
    let defaulted: BTreeSet<&str> = docs
        .iter()
        .filter(|d| d.default.is_some())
        .map(|d| d.name.as_str())
        .collect();
    let expected = [
        "contextLimit",
        "temperature",
        "maxOutputTokens",
        "topP",
        "frequencyPenalty",
        "presencePenalty",
    ];
    assert_eq!(defaulted, BTreeSet::from(expected));
}

#[test]
fn the_bounds_are_taken() {
    for d in documented() {
        for bound in [&d.minimum, &d.maximum] {
            let o = parse_options(Some(&options(&d.name, bound.clone())))
                .unwrap_or_else(|e| panic!("{} = {bound}: {}", d.name, e.message));
            let got = parsed(&o, &d.name).unwrap();
            assert!(
                same(d.integer, &got, bound),
                "{}: {got} for {bound}",
                d.name
            );
        }
    }
}

#[test]
fn the_nearest_values_beyond_the_bounds_are_refused_by_name() {
    for d in documented() {
        let (beyond, kind) = if d.integer {
            let (min, max) = (d.minimum.as_i64().unwrap(), d.maximum.as_i64().unwrap());
            let mut beyond = vec![number(min as i128 - 1), number(max as i128 + 1)];
            if min < max {
                // Not a whole number.
                beyond.push(json!(min as f64 + 0.5));
            }
            (beyond, "an integer")
        } else {
            let (min, max) = (d.minimum.as_f64().unwrap(), d.maximum.as_f64().unwrap());
            (
                vec![json!(min.next_down()), json!(max.next_up())],
                "a number",
            )
        };
        let message = format!(
            "options.{} must be {kind} between {} and {}",
            d.name, d.minimum, d.maximum
        );
        for value in beyond {
            let e = parse_options(Some(&options(&d.name, value.clone()))).unwrap_err();
            assert_eq!(
                (e.status(), e.message.as_str()),
                (400, message.as_str()),
                "{value}"
            );
            // The same in a body.
            let body = json!({"input": "hi", "options": options(&d.name, value.clone())});
            let e = read_body(&body, BodyKind::Text).unwrap_err();
            assert_eq!(e.message, message, "{value} in a body");
        }
    }
}

#[test]
fn an_absent_option_takes_the_documented_default() {
    let absent = parse_options(None).unwrap();
    let empty = parse_options(Some(&json!({}))).unwrap();
    for d in documented() {
        let null = parse_options(Some(&options(&d.name, Value::Null))).unwrap();
        for (how, o) in [("absent", &absent), ("{}", &empty), ("null", &null)] {
            match (&d.default, parsed(o, &d.name)) {
                (Some(default), Some(got)) => {
                    assert!(
                        same(d.integer, &got, default),
                        "{} {how}: {got}, documented {default}",
                        d.name
                    );
                }
                (None, None) => {}
                (default, got) => {
                    panic!("{} {how}: {got:?}, documented {default:?}", d.name)
                }
            }
        }
        if let Some(default) = &d.default {
            let within = if d.integer {
                let (min, max) = (d.minimum.as_i64().unwrap(), d.maximum.as_i64().unwrap());
                (min..=max).contains(&default.as_i64().unwrap())
            } else {
                let (min, max) = (d.minimum.as_f64().unwrap(), d.maximum.as_f64().unwrap());
                (min..=max).contains(&default.as_f64().unwrap())
            };
            assert!(within, "{}: the default {default} is out of range", d.name);
        }
    }
}
