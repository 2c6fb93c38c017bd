//! Scorers: measures of an agent's generations, from 0 (fails) to 1 (meets the measure).
//!
//! A [`Scorer`] reads a [`ScoreInput`] (the question, the answer, what was expected when it is
//! known, the tool calls made, the latency and the tokens) and answers a [`Score`], or nothing
//! when the input lacks what it measures (an exact match without an expected answer). Built in:
//! [`ExactMatch`], [`Contains`], [`JsonValid`], [`ToolCalled`], [`LatencyBelow`],
//! [`TokensBelow`], and the model-judged [`Relevance`] and [`Faithfulness`] (through
//! [`crate::judge`]); [`FnScorer`] makes a scorer of a Rust function.
//!
//! Live scoring: an agent's [`LiveScoring`] samples its generations at a rate; a sampled
//! generation is handed, after its answer, to a [`ScoringQueue`] whose one worker scores it off
//! the request path, stores the scores ([`ScoreStore`]), reports each to the telemetry (the
//! Prometheus histogram) and as an event of a short `score` span linked to the generation's span.
//! The queue is bounded: a generation that finds it full is not scored, and counted.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::judge::{Subject, judge};
use crate::message::{ToolCall, ToolResult, Usage};
use crate::model::Model;
use crate::telemetry::{AgentTelemetry, ScoreReport};
use agentry_engine::schema::Schema;
use agentry_engine::store::StoreError;

/// The most characters of a score's reason that are kept.
pub const MAX_REASON_CHARS: usize = 1000;
/// Generations waiting to be scored, at most; more are dropped (and counted).
pub const SCORING_QUEUE: usize = 256;
/// The longest one scorer may take on one generation (a judge model's call).
pub const SCORER_TIMEOUT: Duration = Duration::from_secs(60);

/// A tool call a generation is expected to make: its tool, and the arguments it must have (each
/// given property equal; others may be there too).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpectedToolCall {
    pub tool_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
}

/// What a scorer reads of one generation.
#[derive(Debug, Clone, Default)]
pub struct ScoreInput {
    /// The question: the last user message.
    pub question: String,
    /// The answer's text.
    pub answer: String,
    /// The answer expected, when known (offline evals).
    pub expected: Option<String>,
    /// The tool calls expected, when known (offline evals).
    pub expected_tool_calls: Option<Vec<ExpectedToolCall>>,
    pub tool_calls: Vec<ToolCall>,
    pub tool_results: Vec<ToolResult>,
    /// From the request to the answer.
    pub latency: Duration,
    pub usage: Usage,
}

impl ScoreInput {
    /// The tools' results as one text: what the answer may rely on (faithfulness's context).
    pub fn context(&self) -> String {
        self.tool_results
            .iter()
            .map(|r| format!("{}: {}", r.tool_name, r.result))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// One scorer's measure of one generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Score {
    pub scorer: String,
    /// From 0 to 1.
    pub value: f64,
    /// Whether the generation meets the scorer's bar.
    pub passed: bool,
    pub reason: String,
}

impl Score {
    /// A score of `value` (clamped to 0..1) passing at `pass_mark`.
    pub fn new(scorer: &str, value: f64, pass_mark: f64, reason: impl Into<String>) -> Self {
        let value = if value.is_nan() {
            0.0
        } else {
            value.clamp(0.0, 1.0)
        };
        let reason: String = reason.into();
        Self {
            scorer: scorer.to_owned(),
            value,
            passed: value >= pass_mark,
            reason: reason.chars().take(MAX_REASON_CHARS).collect(),
        }
    }

    /// 1 when `ok`, else 0.
    fn check(scorer: &str, ok: bool, reason: impl Into<String>) -> Self {
        Self::new(scorer, if ok { 1.0 } else { 0.0 }, 1.0, reason)
    }
}

/// A measure of generations.
#[async_trait]
pub trait Scorer: Send + Sync + 'static {
    /// Its name: the score's `scorer`, a label of the metrics (letters, digits, `-`, `_`).
    fn name(&self) -> &str;

    /// Whether it needs what only an eval knows (an expected answer or tool calls): such a
    /// scorer is not offered live scoring's inputs.
    fn needs_expectation(&self) -> bool {
        false
    }

    /// The score of `input`, or `None` when `input` lacks what this scorer measures.
    async fn score(&self, input: &ScoreInput) -> Option<Score>;
}

/// The expected answer, exactly (surrounding white space aside).
#[derive(Debug, Clone, Copy, Default)]
pub struct ExactMatch;

pub const EXACT: &str = "exact";
pub const CONTAINS: &str = "contains";
pub const JSON: &str = "json";
pub const TOOL_CALLS: &str = "tool-calls";
pub const LATENCY: &str = "latency";
pub const TOKENS: &str = "tokens";
pub const RELEVANCE: &str = "relevance";
pub const FAITHFULNESS: &str = "faithfulness";

#[async_trait]
impl Scorer for ExactMatch {
    fn name(&self) -> &str {
        EXACT
    }

    fn needs_expectation(&self) -> bool {
        true
    }

    async fn score(&self, input: &ScoreInput) -> Option<Score> {
        let expected = input.expected.as_deref()?;
        let ok = input.answer.trim() == expected.trim();
        Some(Score::check(
            EXACT,
            ok,
            if ok {
                "The answer is the expected one.".to_owned()
            } else {
                format!("Expected {expected:?}, got {:?}.", input.answer)
            },
        ))
    }
}

/// The expected answer within the answer, case aside.
#[derive(Debug, Clone, Copy, Default)]
pub struct Contains;

#[async_trait]
impl Scorer for Contains {
    fn name(&self) -> &str {
        CONTAINS
    }

    fn needs_expectation(&self) -> bool {
        true
    }

    async fn score(&self, input: &ScoreInput) -> Option<Score> {
        let expected = input.expected.as_deref()?;
        let ok = input
            .answer
            .to_lowercase()
            .contains(&expected.trim().to_lowercase());
        Some(Score::check(
            CONTAINS,
            ok,
            if ok {
                format!("The answer contains {expected:?}.")
            } else {
                format!("The answer {:?} lacks {expected:?}.", input.answer)
            },
        ))
    }
}

/// The answer is JSON (valid against a schema, when given).
#[derive(Debug, Clone)]
pub struct JsonValid {
    schema: Option<Arc<Schema>>,
}

impl JsonValid {
    /// JSON of any shape.
    pub fn any() -> Self {
        Self { schema: None }
    }

    /// JSON valid against `schema`.
    pub fn schema(schema: Value) -> Result<Self, String> {
        let schema = Schema::compile(schema).map_err(|e| e.to_string())?;
        Ok(Self {
            schema: Some(Arc::new(schema)),
        })
    }
}

#[async_trait]
impl Scorer for JsonValid {
    fn name(&self) -> &str {
        JSON
    }

    async fn score(&self, input: &ScoreInput) -> Option<Score> {
        let parsed: Result<Value, _> = serde_json::from_str(input.answer.trim());
        Some(match parsed {
            Err(e) => Score::check(JSON, false, format!("The answer is not JSON ({e}).")),
            Ok(v) => match self.schema.as_ref().map(|s| s.validate(&v)) {
                Some(Err(e)) => Score::check(JSON, false, format!("The answer is not valid: {e}.")),
                _ => Score::check(JSON, true, "The answer is valid JSON."),
            },
        })
    }
}

/// Whether `actual` has every property `expected` gives, equal (objects compared so, all else
/// equal).
fn has_args(actual: &Value, expected: &Value) -> bool {
    match (actual, expected) {
        (Value::Object(a), Value::Object(e)) => e
            .iter()
            .all(|(k, ev)| a.get(k).is_some_and(|av| has_args(av, ev))),
        _ => actual == expected,
    }
}

/// The expected tools called with the expected arguments: the share of the expected calls
/// made (an expectation of no calls is met by none).
#[derive(Debug, Clone, Copy, Default)]
pub struct ToolCalled;

#[async_trait]
impl Scorer for ToolCalled {
    fn name(&self) -> &str {
        TOOL_CALLS
    }

    fn needs_expectation(&self) -> bool {
        true
    }

    async fn score(&self, input: &ScoreInput) -> Option<Score> {
        let expected = input.expected_tool_calls.as_ref()?;
        if expected.is_empty() {
            let ok = input.tool_calls.is_empty();
            let names: Vec<&str> = input
                .tool_calls
                .iter()
                .map(|c| c.tool_name.as_str())
                .collect();
            return Some(Score::check(
                TOOL_CALLS,
                ok,
                if ok {
                    "No tool was called, as expected.".to_owned()
                } else {
                    format!("No tool was expected; called: {}.", names.join(", "))
                },
            ));
        }
        let missing: Vec<&ExpectedToolCall> = expected
            .iter()
            .filter(|e| {
                !input.tool_calls.iter().any(|c| {
                    c.tool_name == e.tool_name
                        && e.args.as_ref().is_none_or(|a| has_args(&c.args, a))
                })
            })
            .collect();
        let made = expected.len() - missing.len();
        let value = made as f64 / expected.len() as f64;
        let reason = match missing.first() {
            None => format!("All {} expected tool calls were made.", expected.len()),
            Some(m) => format!(
                "{made} of {} expected tool calls were made; missing {}{}.",
                expected.len(),
                m.tool_name,
                m.args.as_ref().map(|a| format!(" {a}")).unwrap_or_default()
            ),
        };
        Some(Score::new(TOOL_CALLS, value, 1.0, reason))
    }
}

/// The answer came within a time.
#[derive(Debug, Clone, Copy)]
pub struct LatencyBelow(pub Duration);

#[async_trait]
impl Scorer for LatencyBelow {
    fn name(&self) -> &str {
        LATENCY
    }

    async fn score(&self, input: &ScoreInput) -> Option<Score> {
        let ok = input.latency <= self.0;
        Some(Score::check(
            LATENCY,
            ok,
            format!(
                "{} ms, {} the {} ms allowed.",
                input.latency.as_millis(),
                if ok { "within" } else { "over" },
                self.0.as_millis()
            ),
        ))
    }
}

/// The generation used at most so many tokens (input and output).
#[derive(Debug, Clone, Copy)]
pub struct TokensBelow(pub u64);

#[async_trait]
impl Scorer for TokensBelow {
    fn name(&self) -> &str {
        TOKENS
    }

    async fn score(&self, input: &ScoreInput) -> Option<Score> {
        let used = input.usage.total_tokens;
        let ok = used <= self.0;
        Some(Score::check(
            TOKENS,
            ok,
            format!(
                "{used} tokens, {} the {} allowed.",
                if ok { "within" } else { "over" },
                self.0
            ),
        ))
    }
}

/// The share of the judge's score that passes a model-judged scorer.
pub const JUDGED_PASS_MARK: f64 = 0.5;

/// Whether the answer addresses the question, as a judge model sees it.
#[derive(Clone)]
pub struct Relevance {
    judge: Arc<dyn Model>,
}

impl Relevance {
    pub fn new(judge: Arc<dyn Model>) -> Self {
        Self { judge }
    }
}

/// Whether the answer claims only what its tools' results support, as a judge model sees it.
#[derive(Clone)]
pub struct Faithfulness {
    judge: Arc<dyn Model>,
}

impl Faithfulness {
    pub fn new(judge: Arc<dyn Model>) -> Self {
        Self { judge }
    }
}

const RELEVANCE_CRITERIA: &str = "Is the text relevant to the question: does it answer what was \
                                  asked, without wandering off?";
const FAITHFULNESS_CRITERIA: &str = "Is the text faithful to the context: is every fact and number \
                                     it states supported by the context?";

/// A judge's score, or a failing score that says why there is none.
async fn judged(name: &str, model: &dyn Model, criteria: &str, subject: Subject<'_>) -> Score {
    match judge(model, criteria, &subject).await {
        Ok(j) => Score::new(name, j.score, JUDGED_PASS_MARK, j.reason),
        Err(e) => Score::new(
            name,
            0.0,
            JUDGED_PASS_MARK,
            format!("The judge failed: {e}"),
        ),
    }
}

#[async_trait]
impl Scorer for Relevance {
    fn name(&self) -> &str {
        RELEVANCE
    }

    async fn score(&self, input: &ScoreInput) -> Option<Score> {
        let subject = Subject {
            question: Some(&input.question),
            context: None,
            text: &input.answer,
        };
        Some(judged(RELEVANCE, self.judge.as_ref(), RELEVANCE_CRITERIA, subject).await)
    }
}

#[async_trait]
impl Scorer for Faithfulness {
    fn name(&self) -> &str {
        FAITHFULNESS
    }

    async fn score(&self, input: &ScoreInput) -> Option<Score> {
        let context = input.context();
        let subject = Subject {
            question: Some(&input.question),
            context: Some(&context),
            text: &input.answer,
        };
        Some(
            judged(
                FAITHFULNESS,
                self.judge.as_ref(),
                FAITHFULNESS_CRITERIA,
                subject,
            )
            .await,
        )
    }
}

type ScoreFn =
    Arc<dyn Fn(&ScoreInput) -> futures::future::BoxFuture<'static, Option<Score>> + Send + Sync>;

/// A scorer written as a Rust function of the input (which it clones what it needs from).
#[derive(Clone)]
pub struct FnScorer {
    name: String,
    f: ScoreFn,
}

impl FnScorer {
    pub fn new<F, Fut>(name: impl Into<String>, f: F) -> Self
    where
        F: Fn(&ScoreInput) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Option<Score>> + Send + 'static,
    {
        Self {
            name: name.into(),
            f: Arc::new(move |input| Box::pin(f(input))),
        }
    }
}

#[async_trait]
impl Scorer for FnScorer {
    fn name(&self) -> &str {
        &self.name
    }

    async fn score(&self, input: &ScoreInput) -> Option<Score> {
        (self.f)(input).await
    }
}

/// Every score of `input` by `scorers` (each within [`SCORER_TIMEOUT`]; one that takes longer
/// fails with that reason), in the scorers' order.
pub async fn score_all(scorers: &[Arc<dyn Scorer>], input: &ScoreInput) -> Vec<Score> {
    let mut out = Vec::new();
    for s in scorers {
        match tokio::time::timeout(SCORER_TIMEOUT, s.score(input)).await {
            Ok(Some(score)) => out.push(score),
            Ok(None) => {}
            Err(_) => out.push(Score::new(
                s.name(),
                0.0,
                1.0,
                format!(
                    "The scorer took longer than {} s.",
                    SCORER_TIMEOUT.as_secs()
                ),
            )),
        }
    }
    out
}

/// An agent's live scoring: which scorers, on what share of its generations.
#[derive(Clone)]
pub struct LiveScoring {
    pub scorers: Vec<Arc<dyn Scorer>>,
    /// From 0 (none) to 1 (every generation).
    pub rate: f64,
    /// Generations seen so far (the sampling's count).
    seen: Arc<AtomicU64>,
}

impl std::fmt::Debug for LiveScoring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveScoring")
            .field(
                "scorers",
                &self.scorers.iter().map(|s| s.name()).collect::<Vec<_>>(),
            )
            .field("rate", &self.rate)
            .finish()
    }
}

impl LiveScoring {
    /// `scorers` on a share `rate` (clamped to 0..1) of the generations.
    pub fn new(scorers: Vec<Arc<dyn Scorer>>, rate: f64) -> Self {
        Self {
            scorers,
            rate: if rate.is_nan() {
                0.0
            } else {
                rate.clamp(0.0, 1.0)
            },
            seen: Arc::default(),
        }
    }

    /// Whether the next generation is scored. Deterministic: of every n generations,
    /// `floor(n * rate)` are (1 scores all, 0 none, 0.5 every second one).
    pub fn sample(&self) -> bool {
        let n = self.seen.fetch_add(1, Ordering::Relaxed) as f64;
        ((n + 1.0) * self.rate).floor() > (n * self.rate).floor()
    }
}

/// A stored score: one scorer's score of one run of an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredScore {
    pub agent_id: String,
    /// A durable run's execution id, or an in-memory generation's own id (`gen_<uuid>`).
    pub run_id: String,
    /// The verified user whose generation it scores (none without authentication).
    pub owner: Option<String>,
    pub scorer: String,
    pub value: f64,
    pub passed: bool,
    pub reason: String,
    pub created_at: DateTime<Utc>,
}

/// Which scores to list: an agent's, newest first.
#[derive(Debug, Clone, Default)]
pub struct ScoreQuery {
    pub agent_id: String,
    /// Only this scorer's.
    pub scorer: Option<String>,
    /// Only this user's generations' (a caller's own in strict mode); `None`: everyone's.
    pub owner: Option<String>,
    pub limit: usize,
    /// Only those listed after this one (newest first): the last of the previous page.
    pub after: Option<ScoreKey>,
}

/// Where a score is in an agent's list: newest first, then by run id and scorer, descending.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ScoreKey {
    pub created_at: DateTime<Utc>,
    pub run_id: String,
    pub scorer: String,
}

impl StoredScore {
    /// Its place in its agent's list.
    pub fn key(&self) -> ScoreKey {
        ScoreKey {
            created_at: self.created_at,
            run_id: self.run_id.clone(),
            scorer: self.scorer.clone(),
        }
    }
}

/// Where scores are kept.
#[async_trait]
pub trait ScoreStore: Send + Sync + 'static {
    /// Stores `scores`; a run's second score by the same scorer replaces the first (a run
    /// replayed after a crash scores again).
    async fn record(&self, scores: &[StoredScore]) -> Result<(), StoreError>;

    /// The scores of one run, by scorer.
    async fn of_run(&self, agent_id: &str, run_id: &str) -> Result<Vec<StoredScore>, StoreError>;

    /// The scores `query` selects, newest first, and how many there are in all (whatever
    /// `after` and `limit`).
    async fn list(&self, query: &ScoreQuery) -> Result<(Vec<StoredScore>, u64), StoreError>;
}

/// The most scores [`InMemoryScoreStore`] keeps (the oldest go first).
pub const MAX_SCORES_IN_MEMORY: usize = 10_000;

/// Scores in memory, the newest [`MAX_SCORES_IN_MEMORY`].
#[derive(Debug, Default)]
pub struct InMemoryScoreStore {
    scores: Mutex<VecDeque<StoredScore>>,
}

#[async_trait]
impl ScoreStore for InMemoryScoreStore {
    async fn record(&self, scores: &[StoredScore]) -> Result<(), StoreError> {
        let mut all = self.scores.lock().unwrap_or_else(|p| p.into_inner());
        for s in scores {
            all.retain(|o| {
                !(o.agent_id == s.agent_id && o.run_id == s.run_id && o.scorer == s.scorer)
            });
            all.push_back(s.clone());
            while all.len() > MAX_SCORES_IN_MEMORY {
                all.pop_front();
            }
        }
        Ok(())
    }

    async fn of_run(&self, agent_id: &str, run_id: &str) -> Result<Vec<StoredScore>, StoreError> {
        let all = self.scores.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<StoredScore> = all
            .iter()
            .filter(|s| s.agent_id == agent_id && s.run_id == run_id)
            .cloned()
            .collect();
        out.sort_by(|a, b| a.scorer.cmp(&b.scorer));
        Ok(out)
    }

    async fn list(&self, q: &ScoreQuery) -> Result<(Vec<StoredScore>, u64), StoreError> {
        let all = self.scores.lock().unwrap_or_else(|p| p.into_inner());
        let mut selected: Vec<StoredScore> = all
            .iter()
            .filter(|s| {
                s.agent_id == q.agent_id
                    && q.scorer.as_ref().is_none_or(|n| *n == s.scorer)
                    && q.owner.as_ref().is_none_or(|o| s.owner.as_ref() == Some(o))
            })
            .cloned()
            .collect();
        let total = selected.len() as u64;
        // Newest first; the same instant by run id then scorer, descending (as the SQL store).
        selected.sort_by_key(|s| std::cmp::Reverse(s.key()));
        Ok((
            selected
                .into_iter()
                .filter(|s| q.after.as_ref().is_none_or(|a| s.key() < *a))
                .take(q.limit)
                .collect(),
            total,
        ))
    }
}

/// A generation waiting to be scored.
pub(crate) struct Job {
    pub(crate) agent_id: String,
    pub(crate) owner: Option<String>,
    pub(crate) run_id: String,
    pub(crate) scorers: Vec<Arc<dyn Scorer>>,
    pub(crate) input: ScoreInput,
    /// The `score` span its scores are events of.
    pub(crate) span: tracing::Span,
    pub(crate) telemetry: Arc<dyn AgentTelemetry>,
}

/// The bounded queue of generations to score, and the worker that scores them (started with
/// the first).
pub struct ScoringQueue {
    store: RwLock<Arc<dyn ScoreStore>>,
    tx: OnceLock<mpsc::Sender<Job>>,
    dropped: AtomicU64,
}

impl Default for ScoringQueue {
    fn default() -> Self {
        Self {
            store: RwLock::new(Arc::new(InMemoryScoreStore::default())),
            tx: OnceLock::new(),
            dropped: AtomicU64::new(0),
        }
    }
}

impl ScoringQueue {
    pub(crate) fn set_store(&self, store: Arc<dyn ScoreStore>) {
        *self.store.write().unwrap_or_else(|p| p.into_inner()) = store;
    }

    pub(crate) fn store(&self) -> Arc<dyn ScoreStore> {
        self.store.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Generations dropped so far because the queue was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Hands `job` to the worker, or drops it (counted, reported) when the queue is full. Never
    /// waits.
    pub(crate) fn push(self: &Arc<Self>, job: Job) {
        let tx = self.tx.get_or_init(|| {
            let (tx, rx) = mpsc::channel(SCORING_QUEUE);
            tokio::spawn(work(Arc::downgrade(self), rx));
            tx
        });
        if let Err(e) = tx.try_send(job) {
            let job = match e {
                mpsc::error::TrySendError::Full(j) | mpsc::error::TrySendError::Closed(j) => j,
            };
            self.dropped.fetch_add(1, Ordering::Relaxed);
            job.telemetry.score_dropped(&job.agent_id);
            tracing::warn!(agent_id = %job.agent_id, run_id = %job.run_id, "the scoring queue is full: a generation is not scored");
        }
    }
}

/// The most generations whose scores the worker stores in one write.
const SCORING_BATCH: usize = 64;

/// The worker: scores the generations waiting (each in turn), then stores all their scores in
/// one write (under load, one write serves many generations instead of one each).
async fn work(queue: std::sync::Weak<ScoringQueue>, mut rx: mpsc::Receiver<Job>) {
    let mut jobs = Vec::with_capacity(SCORING_BATCH);
    while rx.recv_many(&mut jobs, SCORING_BATCH).await > 0 {
        let Some(queue) = queue.upgrade() else { return };
        let mut stored = Vec::new();
        let mut runs = Vec::new();
        for job in jobs.drain(..) {
            runs.push((job.agent_id.clone(), job.run_id.clone()));
            stored.extend(score_job(job).await);
        }
        // A run scored twice in one batch (replayed): its last scores stand, as two writes
        // would have left them.
        let mut seen = std::collections::HashSet::new();
        stored.reverse();
        stored.retain(|s: &StoredScore| {
            seen.insert((s.agent_id.clone(), s.run_id.clone(), s.scorer.clone()))
        });
        stored.reverse();
        if let Err(e) = queue.store().record(&stored).await {
            tracing::warn!(runs = ?runs, error = %e, "scores not stored");
        }
    }
}

/// Scores one generation and reports its scores; the scores to store.
async fn score_job(job: Job) -> Vec<StoredScore> {
    let scores = {
        use tracing::Instrument;
        score_all(&job.scorers, &job.input)
            .instrument(job.span.clone())
            .await
    };
    let now = Utc::now();
    for s in &scores {
        tracing::info!(
            parent: &job.span,
            agentry.score.scorer = %s.scorer,
            agentry.score.value = s.value,
            agentry.score.passed = s.passed,
            agentry.score.reason = %s.reason,
            "score"
        );
        job.telemetry.score(&ScoreReport {
            agent: &job.agent_id,
            scorer: &s.scorer,
            value: s.value,
        });
    }
    scores
        .into_iter()
        .map(|s| StoredScore {
            agent_id: job.agent_id.clone(),
            owner: job.owner.clone(),
            run_id: job.run_id.clone(),
            scorer: s.scorer,
            value: s.value,
            passed: s.passed,
            reason: s.reason,
            created_at: now,
        })
        .collect()
}

/// The `score` span of a generation: its own trace, linked to the generation's span (which is
/// still open when this is called).
pub(crate) fn score_span(
    agent_id: &str,
    run_id: &str,
    generation: &tracing::Span,
) -> tracing::Span {
    let span = tracing::info_span!(
        parent: None,
        "score",
        otel.name = %format_args!("score {agent_id}"),
        agent_id = %agent_id,
        agentry.run_id = %run_id,
    );
    span.follows_from(generation);
    span
}

impl crate::runtime::AgentHub {
    /// Hands a generation of `agent` that answered `result` to live scoring, when the agent
    /// scores live and the generation is sampled. `run_id`: a durable run's execution id (`None`
    /// gives an in-memory generation an id of its own, `gen_<uuid>`). Never waits and never
    /// fails: the worker scores it later, or the queue is full and it is dropped (counted).
    pub(crate) fn score_later(
        &self,
        g: &crate::generation::Generation<'_>,
        run_id: Option<&str>,
        result: &crate::generation::TextResult,
        latency: Duration,
        generation: &tracing::Span,
    ) {
        let agent = g.agent;
        let Some(live) = &agent.live_scoring else {
            return;
        };
        if live.scorers.is_empty() || !live.sample() {
            return;
        }
        let run_id = run_id.map_or_else(
            || format!("gen_{}", uuid::Uuid::now_v7().simple()),
            str::to_owned,
        );
        let question = g
            .input
            .iter()
            .rev()
            .find(|m| m.role == crate::message::Role::User)
            .map(|m| m.content.clone())
            .unwrap_or_default();
        let owner = match &g.opts.memory_owner {
            crate::generation::MemoryOwner::Verified(id) => Some(id.clone()),
            _ => None,
        };
        let job = Job {
            agent_id: agent.id.clone(),
            owner,
            span: score_span(&agent.id, &run_id, generation),
            run_id,
            scorers: live
                .scorers
                .iter()
                .filter(|s| !s.needs_expectation())
                .cloned()
                .collect(),
            input: ScoreInput {
                question,
                answer: result.text.clone(),
                expected: None,
                expected_tool_calls: None,
                tool_calls: result.tool_calls.clone(),
                tool_results: result.tool_results.clone(),
                latency,
                usage: result.usage,
            },
            telemetry: self.telemetry(),
        };
        self.scoring().push(job);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offline::OfflineModel;
    use serde_json::json;

    fn input() -> ScoreInput {
        ScoreInput {
            question: "Weather in Paris?".into(),
            answer: "The weather in Paris is sunny at 21°C.".into(),
            expected: Some("sunny at 21".into()),
            expected_tool_calls: Some(vec![ExpectedToolCall {
                tool_name: "get_weather".into(),
                args: Some(json!({"city": "Paris"})),
            }]),
            tool_calls: vec![ToolCall {
                tool_call_id: "c1".into(),
                tool_name: "get_weather".into(),
                args: json!({"city": "Paris", "units": "c"}),
            }],
            tool_results: vec![ToolResult {
                tool_call_id: "c1".into(),
                tool_name: "get_weather".into(),
                args: json!({"city": "Paris"}),
                result: json!({"city": "Paris", "temperatureC": 21, "condition": "sunny"}),
                is_error: false,
            }],
            latency: Duration::from_millis(40),
            usage: Usage {
                total_tokens: 30,
                ..Usage::default()
            },
        }
    }

    async fn value(s: &dyn Scorer, i: &ScoreInput) -> Option<f64> {
        s.score(i).await.map(|s| s.value)
    }

    #[tokio::test]
    async fn deterministic_scorers_pass_and_fail() {
        let i = input();
        assert_eq!(value(&Contains, &i).await, Some(1.0));
        assert_eq!(value(&ExactMatch, &i).await, Some(0.0));
        assert_eq!(value(&ToolCalled, &i).await, Some(1.0));
        assert_eq!(
            value(&LatencyBelow(Duration::from_millis(50)), &i).await,
            Some(1.0)
        );
        assert_eq!(
            value(&LatencyBelow(Duration::from_millis(10)), &i).await,
            Some(0.0)
        );
        assert_eq!(value(&TokensBelow(30), &i).await, Some(1.0));
        assert_eq!(value(&TokensBelow(29), &i).await, Some(0.0));
        assert_eq!(value(&JsonValid::any(), &i).await, Some(0.0));
        let mut wrong = input();
        wrong.tool_calls[0].args = json!({"city": "Oslo"});
        let s = ToolCalled.score(&wrong).await.unwrap();
        assert_eq!(s.value, 0.0);
        assert!(s.reason.contains("missing get_weather"), "{}", s.reason);
        let none = ScoreInput {
            expected_tool_calls: Some(Vec::new()),
            ..input()
        };
        assert_eq!(value(&ToolCalled, &none).await, Some(0.0));
        let unknown = ScoreInput {
            expected: None,
            expected_tool_calls: None,
            ..input()
        };
        assert_eq!(value(&Contains, &unknown).await, None);
        assert_eq!(value(&ToolCalled, &unknown).await, None);
    }

    #[tokio::test]
    async fn json_is_checked_against_its_schema() {
        let s = JsonValid::schema(json!({"type": "object", "required": ["n"]})).unwrap();
        let mut i = input();
        i.answer = r#"{"n": 1}"#.into();
        assert_eq!(value(&s, &i).await, Some(1.0));
        i.answer = r#"{"m": 1}"#.into();
        assert_eq!(value(&s, &i).await, Some(0.0));
    }

    #[tokio::test]
    async fn judged_scorers_use_the_offline_judge() {
        let judge: Arc<dyn Model> = Arc::new(OfflineModel);
        let i = input();
        assert_eq!(value(&Relevance::new(judge.clone()), &i).await, Some(1.0));
        assert_eq!(
            value(&Faithfulness::new(judge.clone()), &i).await,
            Some(1.0)
        );
        let mut made_up = input();
        made_up.answer = "It is 21°C in Paris, 35°C tomorrow.".into();
        let s = Faithfulness::new(judge).score(&made_up).await.unwrap();
        assert_eq!(s.value, 0.5);
        assert!(!s.passed || s.value >= JUDGED_PASS_MARK);
    }

    #[tokio::test]
    async fn rust_scorers_are_functions() {
        let short = FnScorer::new("short", |i: &ScoreInput| {
            let n = i.answer.len();
            async move { Some(Score::check("short", n < 20, format!("{n} bytes"))) }
        });
        assert_eq!(value(&short, &input()).await, Some(0.0));
        assert_eq!(short.name(), "short");
    }

    #[test]
    fn sampling_is_deterministic() {
        let count = |rate: f64| {
            let l = LiveScoring::new(Vec::new(), rate);
            (0..100).filter(|_| l.sample()).count()
        };
        assert_eq!(count(1.0), 100);
        assert_eq!(count(0.0), 0);
        assert_eq!(count(0.25), 25);
        assert_eq!(count(2.0), 100);
    }

    #[tokio::test]
    async fn the_memory_store_replaces_a_runs_score_and_lists_newest_first() {
        let store = InMemoryScoreStore::default();
        let at = |s: i64| DateTime::<Utc>::from_timestamp(1_700_000_000 + s, 0).unwrap();
        let score = |run: &str, scorer: &str, value: f64, t: i64| StoredScore {
            agent_id: "a".into(),
            owner: None,
            run_id: run.into(),
            scorer: scorer.into(),
            value,
            passed: value >= 1.0,
            reason: String::new(),
            created_at: at(t),
        };
        store
            .record(&[score("r1", "x", 0.0, 1), score("r2", "x", 1.0, 2)])
            .await
            .unwrap();
        store.record(&[score("r1", "x", 1.0, 3)]).await.unwrap();
        let (list, total) = store
            .list(&ScoreQuery {
                agent_id: "a".into(),
                limit: 10,
                ..ScoreQuery::default()
            })
            .await
            .unwrap();
        assert_eq!(total, 2);
        assert_eq!(list[0].run_id, "r1");
        assert_eq!(list[0].value, 1.0);
        assert_eq!(store.of_run("a", "r2").await.unwrap().len(), 1);
    }

    fn hub_with(scoring: LiveScoring) -> crate::runtime::AgentHub {
        let hub = crate::runtime::AgentHub::new(Arc::new(OfflineModel), None);
        hub.register(crate::definition::Agent::new("a", "A").live_scoring(scoring))
            .unwrap();
        hub
    }

    async fn generate(hub: &crate::runtime::AgentHub, text: &str) {
        hub.generate_text(
            &"a".into(),
            vec![crate::message::Message::user(text)],
            crate::generation::GenerateOptions::default(),
            tokio_util::sync::CancellationToken::new(),
        )
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn live_scores_are_stored_after_the_answer_without_the_eval_only_scorers() {
        let judge: Arc<dyn Model> = Arc::new(OfflineModel);
        let hub = hub_with(LiveScoring::new(
            vec![
                Arc::new(Relevance::new(judge)),
                Arc::new(TokensBelow(1000)),
                Arc::new(Contains),
            ],
            1.0,
        ));
        generate(&hub, "hello there").await;
        let store = hub.score_store();
        let query = ScoreQuery {
            agent_id: "a".into(),
            limit: 10,
            ..ScoreQuery::default()
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let scores = loop {
            let (list, _) = store.list(&query).await.unwrap();
            if list.len() >= 2 {
                break list;
            }
            assert!(tokio::time::Instant::now() < deadline, "{list:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let mut names: Vec<&str> = scores.iter().map(|s| s.scorer.as_str()).collect();
        names.sort();
        assert_eq!(names, [RELEVANCE, TOKENS]);
        assert!(
            scores
                .iter()
                .all(|s| s.value == 1.0 && s.run_id.starts_with("gen_"))
        );
    }

    #[tokio::test]
    async fn a_full_queue_drops_and_counts_and_never_delays_the_answer() {
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let g = gate.clone();
        let stuck = FnScorer::new("stuck", move |_: &ScoreInput| {
            let g = g.clone();
            async move {
                let _ = g.acquire().await;
                None
            }
        });
        let hub = hub_with(LiveScoring::new(vec![Arc::new(stuck)], 1.0));
        // One with the worker, SCORING_QUEUE waiting, then 3 more.
        for i in 0..SCORING_QUEUE + 4 {
            generate(&hub, &format!("hi {i}")).await;
            tokio::task::yield_now().await;
        }
        assert!(
            (3..=4).contains(&hub.scores_dropped()),
            "{}",
            hub.scores_dropped()
        );
        gate.close();
    }
}
