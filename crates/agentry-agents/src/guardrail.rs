//! Guardrails: checks of what goes into a model (input), what comes out of it (output, whole or
//! as a stream's deltas come) and what a tool is asked (tool, before it runs, beside approval).
//! A guardrail passes a text, rewrites it (redacts), or trips: a tripped guardrail ends the
//! generation with [`crate::AgentError::GuardrailTripped`].
//!
//! Built-ins: [`MaxLength`], [`DenyList`] (patterns), [`PiiRedaction`] (e-mail addresses, phone
//! numbers, card numbers) and [`JudgeGuardrail`] (a judge model reads the text against criteria,
//! [`crate::judge`]). A host writes its own by implementing [`Guardrail`].
//!
//! On a stream ([`StreamGuard`]) each guardrail reads the text as its [`StreamMode`] allows: a
//! check that any prefix may fail (a length, a pattern) runs as each sentence completes and stops
//! the stream at once; a rewrite runs on each sentence as it completes (the text is released a
//! sentence at a time); a check that needs the whole text (a judge) holds the stream's text back
//! until its end.

use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use regex::{Regex, RegexBuilder};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::judge::{self, Subject};
use crate::message::{Message, Role};
use crate::model::Model;

/// What a guardrail decides about a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// The text goes on as this one.
    Rewrite(String),
    /// The generation ends, for this reason.
    Trip(String),
}

/// Where a guardrail stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GuardPoint {
    /// The request's messages, before the model.
    Input,
    /// The model's text.
    Output,
    /// A tool call's arguments, before the tool runs.
    Tool,
}

impl GuardPoint {
    pub fn as_str(self) -> &'static str {
        match self {
            GuardPoint::Input => "input",
            GuardPoint::Output => "output",
            GuardPoint::Tool => "tool",
        }
    }
}

/// How a guardrail reads a streamed text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamMode {
    /// It trips on a prefix of the text when it trips on the whole (a length, a pattern): it
    /// checks the text so far as each sentence completes, and stops the stream at once.
    Prefix,
    /// It rewrites sentence by sentence (a redaction that never spans sentences): each sentence
    /// is released rewritten once it completes.
    Sentence,
    /// It needs the whole text (a judge): the stream's text is held back until the end.
    Whole,
}

/// A check of a text. Implementations decide quickly; one that cannot decide (its judge is
/// down) trips: guardrails fail closed.
#[async_trait]
pub trait Guardrail: Send + Sync + 'static {
    /// Its name: in the failure, the run, the trace and the metrics.
    fn name(&self) -> &str;
    fn stream_mode(&self) -> StreamMode {
        StreamMode::Whole
    }
    async fn check(&self, text: &str) -> Verdict;
}

/// An agent's guardrails, by where they stand, each list applied in order.
#[derive(Clone, Default)]
pub struct Guardrails {
    pub input: Vec<Arc<dyn Guardrail>>,
    pub output: Vec<Arc<dyn Guardrail>>,
    pub tool: Vec<Arc<dyn Guardrail>>,
}

impl Guardrails {
    pub fn is_empty(&self) -> bool {
        self.input.is_empty() && self.output.is_empty() && self.tool.is_empty()
    }

    pub fn at(&self, point: GuardPoint) -> &[Arc<dyn Guardrail>] {
        match point {
            GuardPoint::Input => &self.input,
            GuardPoint::Output => &self.output,
            GuardPoint::Tool => &self.tool,
        }
    }
}

/// A guardrail that tripped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tripped {
    pub guardrail: String,
    pub point: GuardPoint,
    pub reason: String,
}

/// A guardrail that rewrote a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewritten {
    pub guardrail: String,
    pub point: GuardPoint,
}

/// What applying guardrails did: the text that goes on, and the rewrites on the way.
#[derive(Debug, Clone, Default)]
pub struct Applied {
    pub rewrites: Vec<Rewritten>,
}

/// `text` through `guards` in order: the text that goes on, or the first trip.
pub async fn apply(
    guards: &[Arc<dyn Guardrail>],
    point: GuardPoint,
    text: String,
    applied: &mut Applied,
) -> Result<String, Tripped> {
    let mut text = text;
    for g in guards {
        match g.check(&text).await {
            Verdict::Pass => {}
            Verdict::Rewrite(t) => {
                if t != text {
                    applied.rewrites.push(Rewritten {
                        guardrail: g.name().to_owned(),
                        point,
                    });
                }
                text = t;
            }
            Verdict::Trip(reason) => {
                return Err(Tripped {
                    guardrail: g.name().to_owned(),
                    point,
                    reason,
                });
            }
        }
    }
    Ok(text)
}

/// The request's user messages through the input guardrails.
pub async fn apply_to_input(
    guards: &[Arc<dyn Guardrail>],
    input: Vec<Message>,
    applied: &mut Applied,
) -> Result<Vec<Message>, Tripped> {
    if guards.is_empty() {
        return Ok(input);
    }
    let mut out = Vec::with_capacity(input.len());
    for mut m in input {
        if m.role == Role::User {
            m.content = apply(guards, GuardPoint::Input, m.content, applied).await?;
        }
        out.push(m);
    }
    Ok(out)
}

/// A tool call's arguments through the tool guardrails: each string in them, in document order.
pub async fn apply_to_args(
    guards: &[Arc<dyn Guardrail>],
    args: &Value,
    applied: &mut Applied,
) -> Result<Value, Tripped> {
    if guards.is_empty() {
        return Ok(args.clone());
    }
    // Iterative, so that deep arguments cannot exhaust the stack: the strings' paths first.
    let mut strings: Vec<(Vec<PathStep>, String)> = Vec::new();
    let mut stack: Vec<(Vec<PathStep>, &Value)> = vec![(Vec::new(), args)];
    while let Some((path, v)) = stack.pop() {
        match v {
            Value::String(s) => strings.push((path, s.clone())),
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate().rev() {
                    let mut p = path.clone();
                    p.push(PathStep::Index(i));
                    stack.push((p, item));
                }
            }
            Value::Object(map) => {
                for (k, item) in map.iter().rev() {
                    let mut p = path.clone();
                    p.push(PathStep::Key(k.clone()));
                    stack.push((p, item));
                }
            }
            _ => {}
        }
    }
    let mut out = args.clone();
    for (path, s) in strings {
        let checked = apply(guards, GuardPoint::Tool, s.clone(), applied).await?;
        if checked != s
            && let Some(slot) = at_path(&mut out, &path)
        {
            *slot = Value::String(checked);
        }
    }
    Ok(out)
}

#[derive(Debug, Clone)]
enum PathStep {
    Key(String),
    Index(usize),
}

fn at_path<'v>(root: &'v mut Value, path: &[PathStep]) -> Option<&'v mut Value> {
    let mut v = root;
    for step in path {
        v = match step {
            PathStep::Key(k) => v.get_mut(k)?,
            PathStep::Index(i) => v.get_mut(*i)?,
        };
    }
    Some(v)
}

/// Where a sentence ends: after `.`, `!`, `?` followed by whitespace, or after a newline. The
/// byte offset just past the last such end in `text`, if any.
fn last_sentence_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut end = None;
    for (i, &b) in bytes.iter().enumerate() {
        let ends = match b {
            b'\n' => true,
            b' ' | b'\t' => i > 0 && matches!(bytes[i - 1], b'.' | b'!' | b'?'),
            _ => false,
        };
        if ends {
            end = Some(i + 1);
        }
    }
    end
}

/// Output guardrails over a stream of text deltas: what may be released of the text so far,
/// and the final text (which is what the released pieces add up to).
pub struct StreamGuard<'a> {
    guards: &'a [Arc<dyn Guardrail>],
    /// Everything the model sent.
    raw: String,
    /// How much of `raw` is released (through the guardrails).
    taken: usize,
    /// What was released.
    released: String,
    /// A guardrail needs the whole text: nothing is released before the end.
    hold: bool,
    pub applied: Applied,
}

impl<'a> StreamGuard<'a> {
    pub fn new(guards: &'a [Arc<dyn Guardrail>]) -> Self {
        Self {
            guards,
            raw: String::new(),
            taken: 0,
            released: String::new(),
            hold: guards.iter().any(|g| g.stream_mode() == StreamMode::Whole),
            applied: Applied::default(),
        }
    }

    /// Takes a delta; answers what may be released now (maybe nothing), or the trip.
    pub async fn push(&mut self, delta: &str) -> Result<String, Tripped> {
        self.raw.push_str(delta);
        if self.hold {
            return Ok(String::new());
        }
        let Some(end) = last_sentence_end(&self.raw[self.taken..]).map(|e| self.taken + e) else {
            return Ok(String::new());
        };
        self.release(end).await
    }

    /// The end of the stream: the rest to release, or the trip.
    pub async fn finish(&mut self) -> Result<String, Tripped> {
        if self.hold {
            let text = std::mem::take(&mut self.raw);
            let out = apply(self.guards, GuardPoint::Output, text, &mut self.applied).await?;
            self.released.push_str(&out);
            return Ok(out);
        }
        self.release(self.raw.len()).await
    }

    /// The text released in all.
    pub fn text(&self) -> &str {
        &self.released
    }

    /// Releases `raw[taken..end]`: the prefix checks on everything up to `end`, the sentence
    /// rewrites on the new part.
    async fn release(&mut self, end: usize) -> Result<String, Tripped> {
        for g in self.guards {
            if g.stream_mode() == StreamMode::Prefix
                && let Verdict::Trip(reason) = g.check(&self.raw[..end]).await
            {
                return Err(Tripped {
                    guardrail: g.name().to_owned(),
                    point: GuardPoint::Output,
                    reason,
                });
            }
        }
        let mut part = self.raw[self.taken..end].to_owned();
        self.taken = end;
        for g in self.guards {
            if g.stream_mode() != StreamMode::Sentence {
                continue;
            }
            match g.check(&part).await {
                Verdict::Rewrite(t) => {
                    if t != part {
                        self.applied.rewrites.push(Rewritten {
                            guardrail: g.name().to_owned(),
                            point: GuardPoint::Output,
                        });
                    }
                    part = t;
                }
                Verdict::Pass => {}
                Verdict::Trip(reason) => {
                    return Err(Tripped {
                        guardrail: g.name().to_owned(),
                        point: GuardPoint::Output,
                        reason,
                    });
                }
            }
        }
        self.released.push_str(&part);
        Ok(part)
    }
}

/// Trips on a text longer than `max` characters.
pub struct MaxLength {
    name: String,
    max: usize,
}

impl MaxLength {
    pub fn new(max: usize) -> Self {
        Self {
            name: "max-length".into(),
            max,
        }
    }

    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
}

#[async_trait]
impl Guardrail for MaxLength {
    fn name(&self) -> &str {
        &self.name
    }

    fn stream_mode(&self) -> StreamMode {
        StreamMode::Prefix
    }

    async fn check(&self, text: &str) -> Verdict {
        // Counting stops past the limit: a huge text costs no more than the limit.
        match text.chars().nth(self.max) {
            Some(_) => Verdict::Trip(format!("the text is longer than {} characters", self.max)),
            None => Verdict::Pass,
        }
    }
}

/// The most patterns of a deny list, and the most bytes of one pattern.
pub const MAX_PATTERNS: usize = 100;
pub const MAX_PATTERN_BYTES: usize = 1000;

/// Trips on a text that matches any of its patterns (regular expressions, case-insensitive; in
/// linear time, whatever the pattern).
pub struct DenyList {
    name: String,
    patterns: Vec<(String, Regex)>,
}

impl DenyList {
    /// Refuses an invalid pattern, more than [`MAX_PATTERNS`], or one over [`MAX_PATTERN_BYTES`].
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self, String> {
        if patterns.len() > MAX_PATTERNS {
            return Err(format!("at most {MAX_PATTERNS} patterns"));
        }
        let patterns = patterns
            .iter()
            .map(|p| {
                let p = p.as_ref();
                if p.len() > MAX_PATTERN_BYTES {
                    return Err(format!("a pattern is over {MAX_PATTERN_BYTES} bytes"));
                }
                RegexBuilder::new(p)
                    .case_insensitive(true)
                    .size_limit(1 << 20)
                    .build()
                    .map(|r| (p.to_owned(), r))
                    .map_err(|e| format!("pattern {p:?}: {e}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            name: "deny-list".into(),
            patterns,
        })
    }

    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
}

#[async_trait]
impl Guardrail for DenyList {
    fn name(&self) -> &str {
        &self.name
    }

    fn stream_mode(&self) -> StreamMode {
        StreamMode::Prefix
    }

    async fn check(&self, text: &str) -> Verdict {
        match self.patterns.iter().find(|(_, r)| r.is_match(text)) {
            Some((p, _)) => Verdict::Trip(format!("the text matches the denied pattern {p:?}")),
            None => Verdict::Pass,
        }
    }
}

static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){1,8}")
        .expect("a valid pattern")
});
/// 13 to 19 digits, optionally in groups split by a space or a dash (kept when Luhn's check
/// passes, so that order numbers and amounts stay).
static CARD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(?:\d[ -]?){12,18}\d\b").expect("a valid pattern"));
/// An international number (`+1 555 0100`, `+44 20 7946 0958`) or a North American one
/// (`(555) 123-4567`, `555-123-4567`).
static PHONE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\+\d{1,3}(?:[ .-]?\d{2,4}){2,4}\b|\(?\b\d{3}\)?[ .-]\d{3}[ .-]\d{4}\b")
        .expect("a valid pattern")
});

fn luhn(digits: &str) -> bool {
    let ds: Vec<u32> = digits.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&ds.len()) {
        return false;
    }
    let sum: u32 = ds
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            if i % 2 == 1 {
                let x = d * 2;
                if x > 9 { x - 9 } else { x }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// Rewrites e-mail addresses, card numbers and phone numbers as `[email]`, `[card]`, `[phone]`.
pub struct PiiRedaction {
    name: String,
}

impl Default for PiiRedaction {
    fn default() -> Self {
        Self {
            name: "pii-redaction".into(),
        }
    }
}

impl PiiRedaction {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// `text` with its personal data replaced.
    pub fn redact(text: &str) -> String {
        let text = EMAIL.replace_all(text, "[email]");
        let text = CARD.replace_all(&text, |c: &regex::Captures<'_>| {
            if luhn(&c[0]) {
                "[card]".to_owned()
            } else {
                c[0].to_owned()
            }
        });
        PHONE.replace_all(&text, "[phone]").into_owned()
    }
}

#[async_trait]
impl Guardrail for PiiRedaction {
    fn name(&self) -> &str {
        &self.name
    }

    fn stream_mode(&self) -> StreamMode {
        StreamMode::Sentence
    }

    async fn check(&self, text: &str) -> Verdict {
        let redacted = Self::redact(text);
        if redacted == text {
            Verdict::Pass
        } else {
            Verdict::Rewrite(redacted)
        }
    }
}

/// A judge model reads the text against `criteria` ([`crate::judge`]); a score under the
/// threshold (0.5 unless set) trips. A judge that fails trips too (fails closed).
pub struct JudgeGuardrail {
    name: String,
    criteria: String,
    judge: Arc<dyn Model>,
    threshold: f64,
}

impl JudgeGuardrail {
    pub fn new(criteria: impl Into<String>, judge: Arc<dyn Model>) -> Self {
        Self {
            name: "judge".into(),
            criteria: criteria.into(),
            judge,
            threshold: 0.5,
        }
    }

    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    pub fn threshold(mut self, threshold: f64) -> Self {
        self.threshold = threshold.clamp(0.0, 1.0);
        self
    }
}

#[async_trait]
impl Guardrail for JudgeGuardrail {
    fn name(&self) -> &str {
        &self.name
    }

    async fn check(&self, text: &str) -> Verdict {
        let subject = Subject {
            text,
            ..Subject::default()
        };
        match judge::judge(self.judge.as_ref(), &self.criteria, &subject).await {
            Ok(j) if j.score >= self.threshold => Verdict::Pass,
            Ok(j) => Verdict::Trip(format!("the judge scored {} ({})", j.score, j.reason)),
            Err(e) => Verdict::Trip(format!("the judge could not decide: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offline::OfflineModel;

    fn arc(g: impl Guardrail) -> Arc<dyn Guardrail> {
        Arc::new(g)
    }

    #[test]
    fn redacts_emails_cards_and_phones_but_not_amounts_or_ids() {
        let text = "Mail pii-o1@example.com or call +1 555 0100; card 4111 1111 1111 1111, \
                    or (555) 123-4567. Order o-1 cost 250 EUR on 2026-11-29, ref 1234567890123.";
        assert_eq!(
            PiiRedaction::redact(text),
            "Mail [email] or call [phone]; card [card], or [phone]. Order o-1 cost 250 EUR on \
             2026-11-29, ref 1234567890123."
        );
    }

    #[tokio::test]
    async fn each_built_in_passes_rewrites_or_trips() {
        let mut applied = Applied::default();
        let guards = [
            arc(MaxLength::new(20)),
            arc(DenyList::new(&["secret\\s+plan"]).unwrap()),
            arc(PiiRedaction::new()),
        ];
        let ok = apply(
            &guards,
            GuardPoint::Output,
            "hi a@b.io".into(),
            &mut applied,
        )
        .await;
        assert_eq!(ok.unwrap(), "hi [email]");
        assert_eq!(applied.rewrites[0].guardrail, "pii-redaction");
        let long = apply(&guards, GuardPoint::Input, "x".repeat(21), &mut applied).await;
        assert_eq!(long.unwrap_err().guardrail, "max-length");
        let denied = apply(
            &guards,
            GuardPoint::Input,
            "my SECRET  plan".into(),
            &mut applied,
        )
        .await
        .unwrap_err();
        assert_eq!(denied.guardrail, "deny-list");
        assert_eq!(denied.point, GuardPoint::Input);
    }

    #[tokio::test]
    async fn a_judge_trips_on_its_criteria_and_fails_closed() {
        let judge = JudgeGuardrail::new(
            r#"Refuse text that mentions "competitor"."#,
            Arc::new(OfflineModel),
        );
        assert_eq!(judge.check("Our prices are fair.").await, Verdict::Pass);
        assert!(matches!(
            judge.check("Try our competitor.").await,
            Verdict::Trip(_)
        ));
    }

    #[tokio::test]
    async fn tool_arguments_are_checked_string_by_string() {
        let guards = [
            arc(PiiRedaction::new()),
            arc(DenyList::new(&["drop table"]).unwrap()),
        ];
        let mut applied = Applied::default();
        let args = serde_json::json!({"to": "a@b.io", "n": 3, "cc": ["x", "c@d.io"]});
        let out = apply_to_args(&guards, &args, &mut applied).await.unwrap();
        assert_eq!(
            out,
            serde_json::json!({"to": "[email]", "n": 3, "cc": ["x", "[email]"]})
        );
        let bad = serde_json::json!({"sql": "DROP TABLE users"});
        assert!(apply_to_args(&guards, &bad, &mut applied).await.is_err());
    }

    #[tokio::test]
    async fn a_stream_is_released_a_sentence_at_a_time_and_adds_up_to_the_whole() {
        let guards = [arc(PiiRedaction::new())];
        let text = "Write to bob@example.com today. Or call +1 555 0100.\nThanks!";
        let mut whole = Applied::default();
        let expected = apply(&guards, GuardPoint::Output, text.into(), &mut whole)
            .await
            .unwrap();
        for size in [1, 2, 3, 7, 64] {
            let mut g = StreamGuard::new(&guards);
            let mut out = String::new();
            let chars: Vec<char> = text.chars().collect();
            for piece in chars.chunks(size) {
                let s: String = piece.iter().collect();
                let released = g.push(&s).await.unwrap();
                assert!(!released.contains('@'), "{released}");
                out.push_str(&released);
            }
            out.push_str(&g.finish().await.unwrap());
            assert_eq!(out, expected, "pieces of {size}");
            assert_eq!(g.text(), expected);
        }
    }

    #[tokio::test]
    async fn a_stream_stops_at_the_sentence_that_trips() {
        let guards = [arc(DenyList::new(&["forbidden"]).unwrap())];
        let mut g = StreamGuard::new(&guards);
        assert_eq!(g.push("All good. ").await.unwrap(), "All good. ");
        assert_eq!(g.push("This is forb").await.unwrap(), "");
        assert!(g.push("idden. More").await.is_err());
    }

    #[tokio::test]
    async fn a_judge_holds_the_stream_back_until_its_end() {
        let guards = [arc(JudgeGuardrail::new(
            r#"Refuse "lawsuit"."#,
            Arc::new(OfflineModel),
        ))];
        let mut g = StreamGuard::new(&guards);
        assert_eq!(g.push("Fine. Really. ").await.unwrap(), "");
        assert_eq!(g.finish().await.unwrap(), "Fine. Really. ");
        let mut g = StreamGuard::new(&guards);
        assert_eq!(g.push("A lawsuit. ").await.unwrap(), "");
        assert!(g.finish().await.is_err());
    }
}
