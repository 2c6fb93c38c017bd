//! Parsing a JSON document that is still arriving: the largest prefix that can be closed into a
//! valid document, closed.

use serde_json::Value;

/// The closers that would complete `s`, or `None` when `s` ends inside an escape.
fn closers(s: &str) -> Option<String> {
    let mut stack = Vec::new();
    let mut in_string = false;
    let mut escape = false;
    for c in s.chars() {
        if in_string {
            if escape {
                escape = false;
            } else if c == '\\' {
                escape = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => stack.push('}'),
            '[' => stack.push(']'),
            '}' | ']' => {
                stack.pop();
            }
            _ => {}
        }
    }
    if escape {
        return None;
    }
    let mut out = String::new();
    if in_string {
        out.push('"');
    }
    out.extend(stack.iter().rev());
    Some(out)
}

/// The document as far as it can be read: `{"a": 1, "b": "he` gives `{"a": 1, "b": "he"}`.
pub fn parse_partial(s: &str) -> Option<Value> {
    if let Ok(v) = serde_json::from_str(s) {
        return Some(v);
    }
    let mut end = s.len();
    loop {
        let prefix = s[..end].trim_end();
        let trimmed = prefix.trim_end_matches([',', ':']);
        if let Some(c) = closers(trimmed)
            && let Ok(v) = serde_json::from_str::<Value>(&format!("{trimmed}{c}"))
        {
            return Some(v);
        }
        if end == 0 {
            return None;
        }
        end -= 1;
        while end > 0 && !s.is_char_boundary(end) {
            end -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn closes_what_it_can() {
        assert_eq!(
            parse_partial(r#"{"a": 1, "b": "he"#),
            Some(json!({"a": 1, "b": "he"}))
        );
        assert_eq!(parse_partial(r#"{"a": [1, 2"#), Some(json!({"a": [1, 2]})));
        assert_eq!(parse_partial(r#"{"a": 1, "b"#), Some(json!({"a": 1})));
        assert_eq!(parse_partial(r#"{"a": 1,"#), Some(json!({"a": 1})));
        assert_eq!(parse_partial(r#"{"a": tr"#), Some(json!({})));
        assert_eq!(parse_partial(r#"{"a": "x\"#), Some(json!({"a": "x"})));
        assert_eq!(parse_partial(""), None);
        assert_eq!(
            parse_partial(r#"{"a":{"b":[{"c":"d"#),
            Some(json!({"a":{"b":[{"c":"d"}]}}))
        );
    }
}
