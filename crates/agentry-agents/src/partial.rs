//! Parsing a JSON document that is still arriving: the largest prefix that can be closed into a
//! valid document, closed.
//!
//! One linear pass over the text with an explicit stack of open containers (no recursion, no
//! retrying of shorter prefixes), so a call costs O(n) time and O(n) memory whatever the text.
//! Strings, numbers and literals are validated while scanning and decoded by `serde_json` once
//! complete, so a complete document reads exactly as `serde_json` reads it (except that up to
//! [`MAX_DEPTH`] levels are accepted, where `serde_json` stops at 127).

use serde_json::{Map, Value};

/// The deepest nesting of containers read; a deeper document gives `None`.
pub const MAX_DEPTH: usize = 128;

/// The document as far as it can be read: `{"a": 1, "b": "he` gives `{"a": 1, "b": "he"}`.
///
/// An unfinished string value is kept (without an unfinished escape at its end); an unfinished
/// key, a key still without its value, an unfinished literal (`tr`) and a number that is not yet
/// valid (`-`, `1.`, `1e`) are dropped; a valid number at the very end is kept. Invalid JSON gives
/// what was read before the fault (or `None`); nesting deeper than [`MAX_DEPTH`] gives `None`.
pub fn parse_partial(s: &str) -> Option<Value> {
    let mut reader = Reader::default();
    let mut end = s.len();
    for (at, c) in s.char_indices() {
        match reader.feed(s, at, c) {
            Ok(()) => {}
            Err(Halt::Invalid) => {
                end = at;
                break;
            }
            Err(Halt::TooDeep) => return None,
        }
    }
    reader.finish(s, end)
}

/// Why reading stopped before the end of the text.
enum Halt {
    /// The text is not JSON from here on.
    Invalid,
    /// Containers nest deeper than [`MAX_DEPTH`].
    TooDeep,
}

/// A container still open, with what has been read of it.
enum Container {
    Array(Vec<Value>),
    Object {
        members: Map<String, Value>,
        /// A key read whose value has not been read yet.
        key: Option<String>,
    },
}

impl Container {
    /// The container as read so far; a key without a value is dropped.
    fn into_value(self) -> Value {
        match self {
            Container::Array(items) => Value::Array(items),
            Container::Object { members, .. } => Value::Object(members),
        }
    }
}

/// What may come next, outside tokens and whitespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Expect {
    /// A value (at the root, after `:` or after `,` in an array).
    #[default]
    Value,
    /// A value or `]`, right after `[`.
    ValueOrClose,
    /// A key or `}`, right after `{`.
    KeyOrClose,
    /// A key, after `,` in an object.
    Key,
    /// `:` after a key.
    Colon,
    /// `,` or the closer, after a value in a container.
    CommaOrClose,
    /// Nothing but whitespace: the root value is complete.
    End,
}

/// A token being read.
#[derive(Default)]
enum Token {
    #[default]
    None,
    Text(TextToken),
    /// A number starting at this byte offset.
    Number(usize),
    /// `true`, `false` or `null`, of which `matched` bytes have been read.
    Literal {
        word: &'static str,
        matched: usize,
    },
}

/// Where a string token is inside an escape sequence.
#[derive(Debug, Clone, Copy)]
enum Escape {
    None,
    /// Right after `\`.
    Backslash,
    /// Inside `\uXXXX`, `digits` hex digits read so far, worth `code`.
    Hex {
        digits: u8,
        code: u32,
    },
}

/// A string (value or key) being read.
struct TextToken {
    /// The byte offset of the opening quote.
    start: usize,
    is_key: bool,
    escape: Escape,
    /// A `\uD800`–`\uDBFF` escape was read and awaits its low surrogate.
    high_surrogate: bool,
    /// The byte offset just after the last complete character or escape (pair).
    complete_to: usize,
}

impl TextToken {
    fn new(start: usize, is_key: bool) -> Self {
        Self {
            start,
            is_key,
            escape: Escape::None,
            high_surrogate: false,
            complete_to: start + 1,
        }
    }

    /// Reads `c` at byte offset `at`; `Ok(true)` when it is the closing quote.
    fn feed(&mut self, at: usize, c: char) -> Result<bool, Halt> {
        let end = at + c.len_utf8();
        match self.escape {
            Escape::Backslash => match c {
                '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't' => {
                    self.escape = Escape::None;
                    self.complete_char(end)?;
                }
                'u' => self.escape = Escape::Hex { digits: 0, code: 0 },
                _ => return Err(Halt::Invalid),
            },
            Escape::Hex { digits, code } => {
                let code = code * 16 + c.to_digit(16).ok_or(Halt::Invalid)?;
                if digits == 3 {
                    self.escape = Escape::None;
                    self.complete_unicode_escape(code, end)?;
                } else {
                    self.escape = Escape::Hex {
                        digits: digits + 1,
                        code,
                    };
                }
            }
            Escape::None => match c {
                '\\' => self.escape = Escape::Backslash,
                '"' if self.high_surrogate => return Err(Halt::Invalid),
                '"' => return Ok(true),
                c if u32::from(c) < 0x20 => return Err(Halt::Invalid),
                _ => self.complete_char(end)?,
            },
        }
        Ok(false)
    }

    /// A plain character or a simple escape ended at `end`.
    fn complete_char(&mut self, end: usize) -> Result<(), Halt> {
        if self.high_surrogate {
            return Err(Halt::Invalid);
        }
        self.complete_to = end;
        Ok(())
    }

    /// A `\uXXXX` escape worth `code` ended at `end`: surrogates must come in pairs.
    fn complete_unicode_escape(&mut self, code: u32, end: usize) -> Result<(), Halt> {
        let high = (0xD800..=0xDBFF).contains(&code);
        let low = (0xDC00..=0xDFFF).contains(&code);
        match (self.high_surrogate, high, low) {
            (true, _, true) => {
                self.high_surrogate = false;
                self.complete_to = end;
            }
            (false, true, _) => self.high_surrogate = true,
            (false, false, false) => self.complete_to = end,
            _ => return Err(Halt::Invalid),
        }
        Ok(())
    }
}

/// The state of one pass.
#[derive(Default)]
struct Reader {
    stack: Vec<Container>,
    expect: Expect,
    token: Token,
    root: Option<Value>,
}

impl Reader {
    /// Reads the character `c` at byte offset `at` of `s`.
    fn feed(&mut self, s: &str, at: usize, c: char) -> Result<(), Halt> {
        match &mut self.token {
            Token::Text(text) => {
                if text.feed(at, c)? {
                    self.finish_text(s, at + 1)?;
                }
                Ok(())
            }
            Token::Number(_) if is_number_char(c) => Ok(()),
            Token::Number(start) => {
                let number = parse_number(&s[*start..at]).ok_or(Halt::Invalid)?;
                self.token = Token::None;
                self.attach(number);
                self.feed_structure(at, c)
            }
            Token::Literal { word, matched } => {
                if word.as_bytes().get(*matched).copied() != Some(c as u8) || !c.is_ascii() {
                    return Err(Halt::Invalid);
                }
                *matched += 1;
                if *matched == word.len() {
                    let value = literal_value(word);
                    self.token = Token::None;
                    self.attach(value);
                }
                Ok(())
            }
            Token::None => self.feed_structure(at, c),
        }
    }

    /// Reads `c` outside any token: whitespace, punctuation or the start of a value.
    fn feed_structure(&mut self, at: usize, c: char) -> Result<(), Halt> {
        if matches!(c, ' ' | '\t' | '\n' | '\r') {
            return Ok(());
        }
        match (self.expect, c) {
            (Expect::ValueOrClose | Expect::CommaOrClose, ']') => self.close(false),
            (Expect::KeyOrClose | Expect::CommaOrClose, '}') => self.close(true),
            (Expect::Value | Expect::ValueOrClose, _) => self.start_value(at, c),
            (Expect::KeyOrClose | Expect::Key, '"') => {
                self.token = Token::Text(TextToken::new(at, true));
                Ok(())
            }
            (Expect::Colon, ':') => {
                self.expect = Expect::Value;
                Ok(())
            }
            (Expect::CommaOrClose, ',') => {
                self.expect = match self.stack.last() {
                    Some(Container::Array(_)) => Expect::Value,
                    _ => Expect::Key,
                };
                Ok(())
            }
            _ => Err(Halt::Invalid),
        }
    }

    /// Starts the value that begins with `c` at byte offset `at`.
    fn start_value(&mut self, at: usize, c: char) -> Result<(), Halt> {
        match c {
            '[' => self.open(Container::Array(Vec::new()), Expect::ValueOrClose)?,
            '{' => self.open(
                Container::Object {
                    members: Map::new(),
                    key: None,
                },
                Expect::KeyOrClose,
            )?,
            '"' => self.token = Token::Text(TextToken::new(at, false)),
            '-' | '0'..='9' => self.token = Token::Number(at),
            't' | 'f' | 'n' => {
                let word = match c {
                    't' => "true",
                    'f' => "false",
                    _ => "null",
                };
                self.token = Token::Literal { word, matched: 1 };
            }
            _ => return Err(Halt::Invalid),
        }
        Ok(())
    }

    fn open(&mut self, container: Container, then: Expect) -> Result<(), Halt> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(Halt::TooDeep);
        }
        self.stack.push(container);
        self.expect = then;
        Ok(())
    }

    /// Closes the innermost container with `}` (`object`) or `]`.
    fn close(&mut self, object: bool) -> Result<(), Halt> {
        let matches = match self.stack.last() {
            Some(Container::Object { key, .. }) => object && key.is_none(),
            Some(Container::Array(_)) => !object,
            None => false,
        };
        if !matches {
            return Err(Halt::Invalid);
        }
        if let Some(container) = self.stack.pop() {
            self.attach(container.into_value());
        }
        Ok(())
    }

    /// A string token ended just before byte offset `end`: a key or a value.
    fn finish_text(&mut self, s: &str, end: usize) -> Result<(), Halt> {
        let Token::Text(text) = std::mem::take(&mut self.token) else {
            return Ok(());
        };
        let decoded: String =
            serde_json::from_str(&s[text.start..end]).map_err(|_| Halt::Invalid)?;
        if !text.is_key {
            self.attach(Value::String(decoded));
            return Ok(());
        }
        if let Some(Container::Object { key, .. }) = self.stack.last_mut() {
            *key = Some(decoded);
        }
        self.expect = Expect::Colon;
        Ok(())
    }

    /// Puts a complete value where it belongs: the root, the array or the pending key.
    fn attach(&mut self, value: Value) {
        match self.stack.last_mut() {
            None => {
                self.root = Some(value);
                self.expect = Expect::End;
            }
            Some(Container::Array(items)) => {
                items.push(value);
                self.expect = Expect::CommaOrClose;
            }
            Some(Container::Object { members, key }) => {
                if let Some(key) = key.take() {
                    members.insert(key, value);
                }
                self.expect = Expect::CommaOrClose;
            }
        }
    }

    /// Keeps what can be kept of the token read up to byte offset `end`, closes every open
    /// container, and gives the document.
    fn finish(mut self, s: &str, end: usize) -> Option<Value> {
        match std::mem::take(&mut self.token) {
            Token::Text(text) if !text.is_key => {
                let closed = format!("{}\"", &s[text.start..text.complete_to]);
                if let Ok(decoded) = serde_json::from_str::<String>(&closed) {
                    self.attach(Value::String(decoded));
                }
            }
            Token::Number(start) => {
                if let Some(number) = parse_number(&s[start..end]) {
                    self.attach(number);
                }
            }
            _ => {}
        }
        while let Some(container) = self.stack.pop() {
            self.attach(container.into_value());
        }
        self.root
    }
}

fn is_number_char(c: char) -> bool {
    matches!(c, '0'..='9' | '-' | '+' | '.' | 'e' | 'E')
}

/// A complete number token as `serde_json` reads it, or `None` when it is not (yet) valid.
fn parse_number(token: &str) -> Option<Value> {
    serde_json::from_str::<Value>(token)
        .ok()
        .filter(Value::is_number)
}

fn literal_value(word: &str) -> Value {
    match word {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Documents exercising nesting, escapes, surrogate pairs, exponents and non-ASCII text.
    const SAMPLES: &[&str] = &[
        r#"{"a": 1, "b": [true, false, null], "c": {"d": "e", "f": [[], {}]}}"#,
        r#"{"esc": "q\" b\\ s\/ \b\f\n\r\t \u00e9 \ud83d\ude00 end", "k\u00e9y": "v"}"#,
        r#"[-0, 12, -3.25, 1e10, 2.5E-3, -1.5e+2, 0.0, 123456789012345678901234567890]"#,
        "{\"naïve\": \"日本語 😀 café\", \"list\": [\"ü\", \"\\u65e5\"]}",
        r#"  [ { "x" : [ 1 , { "y" : "z" } ] } , "tail" ]  "#,
        r#""just a string""#,
        "42",
        "true",
    ];

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

    #[test]
    fn drops_what_is_not_yet_a_value() {
        assert_eq!(parse_partial(r#"{"a": 1, "b":"#), Some(json!({"a": 1})));
        assert_eq!(parse_partial(r#"{"a": 1, "b": "#), Some(json!({"a": 1})));
        assert_eq!(parse_partial(r#"[1, nul"#), Some(json!([1])));
        assert_eq!(parse_partial(r#"[1, -"#), Some(json!([1])));
        assert_eq!(parse_partial(r#"[1, 1."#), Some(json!([1])));
        assert_eq!(parse_partial(r#"[1, 1e"#), Some(json!([1])));
        assert_eq!(parse_partial(r#"[1, 1e5"#), Some(json!([1, 1e5])));
        assert_eq!(parse_partial(r#"{"a": "x\u00e"#), Some(json!({"a": "x"})));
        assert_eq!(parse_partial(r#"["\ud83d"#), Some(json!([""])));
        assert_eq!(parse_partial(r#"["a\ud83d\ude0"#), Some(json!(["a"])));
        assert_eq!(parse_partial(r#"["a\ud83d\ude00"#), Some(json!(["a😀"])));
        assert_eq!(parse_partial(r#"{"a": ["#), Some(json!({"a": []})));
        assert_eq!(parse_partial("12"), Some(json!(12)));
        assert_eq!(parse_partial("-"), None);
        assert_eq!(parse_partial("  "), None);
    }

    #[test]
    fn garbage_gives_the_valid_part_before_it_or_none() {
        assert_eq!(parse_partial(r#"{"a": 1} x"#), Some(json!({"a": 1})));
        assert_eq!(parse_partial(r#"[1, x]"#), Some(json!([1])));
        assert_eq!(parse_partial(r#"[1}"#), Some(json!([1])));
        assert_eq!(parse_partial(r#"{"a": 01}"#), Some(json!({})));
        assert_eq!(parse_partial(r#"["a\x"]"#), Some(json!(["a"])));
        assert_eq!(parse_partial(r#"["\udc00"]"#), Some(json!([""])));
        assert_eq!(parse_partial("[\"a\u{1}\"]"), Some(json!(["a"])));
        assert_eq!(parse_partial("nope"), None);
        assert_eq!(parse_partial("}"), None);
    }

    #[test]
    fn every_prefix_reads_and_the_whole_reads_like_serde_json() {
        for doc in SAMPLES {
            let whole: Value = serde_json::from_str(doc).unwrap();
            assert_eq!(parse_partial(doc), Some(whole), "{doc}");
            for (at, _) in doc.char_indices() {
                let prefix = &doc[..at];
                let partial = parse_partial(prefix);
                if let Ok(complete) = serde_json::from_str::<Value>(prefix) {
                    assert_eq!(partial, Some(complete), "{prefix}");
                }
            }
        }
    }

    #[test]
    fn nesting_deeper_than_the_limit_gives_none() {
        let deep = |levels: usize| format!("{}{}", "[".repeat(levels), "]".repeat(levels));
        assert!(parse_partial(&deep(MAX_DEPTH)).is_some());
        assert_eq!(parse_partial(&deep(MAX_DEPTH + 1)), None);
        assert_eq!(parse_partial(&"{\"a\":".repeat(MAX_DEPTH + 1)), None);
        assert_eq!(parse_partial(&"[".repeat(100_000)), None);
    }

    #[test]
    fn reads_a_megabyte_prefix() {
        let item = format!("\"{}\"", "x".repeat(1000));
        let doc = format!("{{\"items\": [{}]}}", vec![item; 1100].join(","));
        let prefix = &doc[..1024 * 1024];
        let value = parse_partial(prefix).unwrap();
        let items = value["items"].as_array().unwrap();
        assert!(items.len() > 1000, "{}", items.len());
        assert_eq!(items[0].as_str().unwrap().len(), 1000);
        assert_eq!(parse_partial(&doc), serde_json::from_str(&doc).ok());
    }
}
