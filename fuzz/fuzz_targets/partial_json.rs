//! The parser of streamed JSON on any text: never a panic; on a complete document that serde_json
//! reads (and that nests no deeper than the parser's limit) the same value as serde_json, with
//! its members in the same order.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

// The nesting the partial parser reads; deeper documents give `None`.
use agentry_agents::partial::{MAX_DEPTH, parse_partial};

/// Levels of arrays and objects, iteratively (serde_json already refuses > 127 levels).
fn depth(v: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, d)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(o) => Box::new(o.values()),
            _ => continue,
        };
        deepest = deepest.max(d + 1);
        stack.extend(children.map(|c| (c, d + 1)));
    }
    deepest
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let partial = parse_partial(s);
    if let Ok(full) = serde_json::from_str::<Value>(s)
        && depth(&full) <= MAX_DEPTH
    {
        assert_eq!(partial.as_ref(), Some(&full), "input {s:?}");
        // Members in the same order too (maps keep insertion order: it shows in the stream).
        assert_eq!(
            serde_json::to_string(&partial).unwrap(),
            serde_json::to_string(&full).unwrap(),
            "input {s:?}"
        );
    }
    // A prefix is what a stream delivers before the rest arrives.
    let mut cut = s.len() / 2;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    let _ = parse_partial(&s[..cut]);
});
