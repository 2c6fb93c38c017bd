//! Model-judged checks, written once for guardrails and scorers: a judge model reads a text
//! (with the question it answers and the context it had, when there are) against criteria in
//! plain words, and answers a score from 0 to 1 with its reason.
//!
//! The request's shape is private to this module: [`judge`] writes it and, for the built-in
//! offline model, [`offline_judgment`] reads it. The offline judge is deterministic:
//! - criteria that quote terms in double quotes (`Refuse text about "lawsuit" or "refund"`) score
//!   0 when the text contains any of them (case-insensitively), else 1;
//! - criteria that speak of relevance score the share of the question's words of four letters
//!   or more that the text contains;
//! - criteria that speak of faithfulness score the share of the text's numbers that the context
//!   contains (1 for a text without numbers);
//! - anything else scores 1.

use serde_json::{Value, json};

use crate::message::{Message, Role};
use crate::model::{GenerationSettings, Model, ModelError, ModelRequest, ModelResponse};

/// The first line of a judge's system message: how the offline model knows a judge request.
const PREAMBLE: &str = "You are a judge.";
const QUESTION: &str = "## Question\n";
const CONTEXT: &str = "## Context\n";
const TEXT: &str = "## Text\n";

/// The most characters of each part a judge is sent.
pub const MAX_JUDGED_CHARS: usize = 16 * 1024;

/// What a judge reads: the text judged, and what it answers and knew, when there are.
#[derive(Debug, Clone, Copy, Default)]
pub struct Subject<'a> {
    pub question: Option<&'a str>,
    pub context: Option<&'a str>,
    pub text: &'a str,
}

/// A judge's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgment {
    /// From 0 (fails the criteria entirely) to 1 (meets them).
    pub score: f64,
    pub reason: String,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "score": {"type": "number", "minimum": 0, "maximum": 1},
            "reason": {"type": "string", "maxLength": 1000}
        },
        "required": ["score", "reason"]
    })
}

fn clipped(s: &str) -> String {
    s.chars().take(MAX_JUDGED_CHARS).collect()
}

/// The request that asks `criteria` of `subject`.
fn request(criteria: &str, subject: &Subject<'_>) -> ModelRequest {
    let system = format!(
        "{PREAMBLE}\nJudge the text below against these criteria:\n{criteria}\n\nAnswer with a \
         JSON object: `score`, a number from 0 (fails the criteria) to 1 (meets them), and \
         `reason`, one sentence."
    );
    let mut user = String::new();
    if let Some(q) = subject.question {
        user.push_str(QUESTION);
        user.push_str(&clipped(q));
        user.push_str("\n\n");
    }
    if let Some(c) = subject.context {
        user.push_str(CONTEXT);
        user.push_str(&clipped(c));
        user.push_str("\n\n");
    }
    user.push_str(TEXT);
    user.push_str(&clipped(subject.text));
    ModelRequest {
        messages: vec![Message::system(system), Message::user(user)],
        tools: Vec::new(),
        settings: GenerationSettings {
            temperature: 0.0,
            max_output_tokens: 300,
            ..GenerationSettings::default()
        },
        output_schema: Some(schema()),
    }
}

/// Asks `model` to judge `subject` against `criteria`.
pub async fn judge(
    model: &dyn Model,
    criteria: &str,
    subject: &Subject<'_>,
) -> Result<Judgment, ModelError> {
    let resp = model.generate(&request(criteria, subject)).await?;
    read_judgment(&resp.text)
}

fn read_judgment(text: &str) -> Result<Judgment, ModelError> {
    let v: Value = serde_json::from_str(text.trim())
        .map_err(|e| ModelError::new(format!("the judge did not answer with JSON ({e})")))?;
    let score = v
        .get("score")
        .and_then(Value::as_f64)
        .filter(|s| (0.0..=1.0).contains(s))
        .ok_or_else(|| ModelError::new("the judge's score is not a number from 0 to 1"))?;
    let reason = v
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Ok(Judgment { score, reason })
}

/// Whether `req` is a judge's request (written by [`judge`]).
pub(crate) fn is_judge_request(req: &ModelRequest) -> bool {
    req.messages
        .first()
        .is_some_and(|m| m.role == Role::System && m.content.starts_with(PREAMBLE))
}

/// The part of `user` under `header`, up to the next header.
fn part<'a>(user: &'a str, header: &str) -> Option<&'a str> {
    let start = user.find(header)? + header.len();
    let rest = &user[start..];
    let end = [QUESTION, CONTEXT, TEXT]
        .iter()
        .filter_map(|h| rest.find(&format!("\n\n{h}")))
        .min()
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// The terms `criteria` quote in double quotes.
fn quoted(criteria: &str) -> Vec<String> {
    criteria
        .split('"')
        .skip(1)
        .step_by(2)
        .map(|t| t.trim().to_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

fn content_words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 4)
        .map(str::to_lowercase)
        .collect()
}

fn numbers(s: &str) -> Vec<&str> {
    s.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map(|n| n.trim_matches('.'))
        .filter(|n| n.chars().any(|c| c.is_ascii_digit()))
        .collect()
}

/// The offline model's deterministic judgment of a judge request (see the module's rules).
pub(crate) fn offline_judgment(req: &ModelRequest) -> Judgment {
    let criteria = req
        .messages
        .first()
        .map(|m| m.content.as_str())
        .unwrap_or_default();
    let criteria = criteria
        .split_once('\n')
        .map_or("", |(_, rest)| rest)
        .split("\n\nAnswer with")
        .next()
        .unwrap_or_default();
    let user = req.messages.get(1).map_or("", |m| m.content.as_str());
    let text = part(user, TEXT).unwrap_or_default();
    let lower_text = text.to_lowercase();
    let lower_criteria = criteria.to_lowercase();
    let terms = quoted(criteria);
    if !terms.is_empty() {
        return match terms.iter().find(|t| lower_text.contains(t.as_str())) {
            Some(t) => Judgment {
                score: 0.0,
                reason: format!("The text mentions \"{t}\"."),
            },
            None => Judgment {
                score: 1.0,
                reason: "The text mentions none of the terms.".into(),
            },
        };
    }
    if lower_criteria.contains("relevan") {
        let asked = content_words(part(user, QUESTION).unwrap_or_default());
        let found = asked.iter().filter(|w| lower_text.contains(*w)).count();
        let score = if asked.is_empty() {
            1.0
        } else {
            found as f64 / asked.len() as f64
        };
        return Judgment {
            score,
            reason: format!(
                "The text has {found} of the question's {} words.",
                asked.len()
            ),
        };
    }
    if lower_criteria.contains("faithful") {
        let context = part(user, CONTEXT).unwrap_or_default();
        let claimed = numbers(text);
        let backed = claimed.iter().filter(|n| context.contains(*n)).count();
        let score = if claimed.is_empty() {
            1.0
        } else {
            backed as f64 / claimed.len() as f64
        };
        return Judgment {
            score,
            reason: format!(
                "{backed} of the text's {} numbers are in the context.",
                claimed.len()
            ),
        };
    }
    Judgment {
        score: 1.0,
        reason: "Nothing in the criteria fails the text.".into(),
    }
}

/// The offline model's answer to a judge request.
pub(crate) fn offline_answer(req: &ModelRequest) -> ModelResponse {
    let j = offline_judgment(req);
    let text = json!({"score": j.score, "reason": j.reason}).to_string();
    let words = text.split_whitespace().count() as u64;
    ModelResponse {
        text,
        tool_calls: Vec::new(),
        finish_reason: crate::message::FinishReason::Stop,
        usage: crate::message::Usage {
            prompt_tokens: 1,
            completion_tokens: words,
            total_tokens: words + 1,
            cached_input_tokens: 0,
            reasoning_tokens: 0,
        },
        model: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offline::OfflineModel;

    async fn score(criteria: &str, subject: Subject<'_>) -> f64 {
        judge(&OfflineModel, criteria, &subject)
            .await
            .unwrap()
            .score
    }

    #[tokio::test]
    async fn quoted_terms_fail_the_text_that_has_them() {
        let c = r#"Refuse any text about "lawsuit" or "competitor"."#;
        let bad = Subject {
            text: "Our Competitor is worse.",
            ..Default::default()
        };
        assert_eq!(score(c, bad).await, 0.0);
        let good = Subject {
            text: "Here is your order.",
            ..Default::default()
        };
        assert_eq!(score(c, good).await, 1.0);
    }

    #[tokio::test]
    async fn relevance_counts_the_question_words_answered() {
        let c = "Is the answer relevant to the question?";
        let s = Subject {
            question: Some("weather in Paris"),
            text: "The weather in Paris is sunny.",
            context: None,
        };
        assert_eq!(score(c, s).await, 1.0);
        let s = Subject {
            question: Some("weather in Paris"),
            text: "I like trains.",
            context: None,
        };
        assert_eq!(score(c, s).await, 0.0);
    }

    #[tokio::test]
    async fn faithfulness_checks_numbers_against_the_context() {
        let c = "Is the answer faithful to the context?";
        let s = Subject {
            question: None,
            context: Some(r#"{"temperatureC": 21}"#),
            text: "It is 21 degrees, and 30 tomorrow.",
        };
        assert_eq!(score(c, s).await, 0.5);
    }
}
