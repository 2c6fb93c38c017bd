//! `agentry eval DATASET.jsonl --agent ID`: runs an eval dataset against an agent (on a running
//! server over HTTP, or on the application started in this process on an in-memory SQLite with
//! the examples and, when given, a definitions folder's agent files), scores each answer, prints
//! a table of each scorer's mean and the failures, writes JSON and JUnit XML, and says whether
//! every threshold is met (and every case was answered: a case without an answer fails the eval,
//! whatever the thresholds).
//!
//! A dataset has one JSON object a line: `input` (the question), and optionally `expected` (the
//! answer expected: `exact` and `contains` score against it), `expectedToolCalls`
//! (`[{toolName, args?}]`, each call that must be made, with at least these arguments; `[]`: no
//! tool call), `schema` (a JSON Schema the answer must be valid against: `json`) and `name`.
//! Both modes ask the same route, `POST /agents/{id}/text`, so they read one answer format.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentry_agents::scorers::{
    self, Contains, ExactMatch, ExpectedToolCall, Faithfulness, JsonValid, LatencyBelow, Relevance,
    Score, ScoreInput, Scorer, TokensBelow, ToolCalled,
};
use agentry_agents::{Model, ToolCall, ToolResult, Usage};
use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The largest dataset file read.
pub const MAX_DATASET_BYTES: u64 = 64 * 1024 * 1024;
/// The longest line of a dataset.
pub const MAX_LINE_BYTES: usize = 256 * 1024;
/// The most cases of a dataset.
pub const MAX_CASES: usize = 10_000;

/// One line of a dataset.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Case {
    pub input: String,
    #[serde(default)]
    pub expected: Option<String>,
    #[serde(default)]
    pub expected_tool_calls: Option<Vec<ExpectedToolCall>>,
    #[serde(default)]
    pub schema: Option<Value>,
    #[serde(default)]
    pub name: Option<String>,
}

/// A case and the line it is on (from 1).
#[derive(Debug, Clone)]
pub struct Line {
    pub number: usize,
    pub case: Case,
    /// `schema`, compiled.
    json: Option<JsonValid>,
}

/// Reads a dataset's text: one case a line (blank lines skipped). A bad line is an error that
/// names it.
pub fn read_dataset(text: &str) -> anyhow::Result<Vec<Line>> {
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let number = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        if raw.len() > MAX_LINE_BYTES {
            bail!("line {number}: longer than {MAX_LINE_BYTES} bytes");
        }
        if lines.len() == MAX_CASES {
            bail!("line {number}: more than {MAX_CASES} cases");
        }
        let case: Case =
            serde_json::from_str(raw).with_context(|| format!("line {number}: not a case"))?;
        if case.input.trim().is_empty() {
            bail!("line {number}: `input` is empty");
        }
        let json = match &case.schema {
            Some(s) => Some(
                JsonValid::schema(s.clone())
                    .map_err(|e| anyhow::anyhow!("line {number}: `schema`: {e}"))?,
            ),
            None => None,
        };
        lines.push(Line { number, case, json });
    }
    if lines.is_empty() {
        bail!("the dataset has no case");
    }
    Ok(lines)
}

/// Reads the dataset file at `path` (at most [`MAX_DATASET_BYTES`]).
pub fn read_dataset_file(path: &Path) -> anyhow::Result<Vec<Line>> {
    let size = std::fs::metadata(path)
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    if size > MAX_DATASET_BYTES {
        bail!(
            "{} is larger than {MAX_DATASET_BYTES} bytes",
            path.display()
        );
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    read_dataset(&text).with_context(|| path.display().to_string())
}

/// A built-in scorer an eval may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Exact,
    Contains,
    Json,
    ToolCalls,
    Latency,
    Tokens,
    Relevance,
    Faithfulness,
}

impl Choice {
    pub const ALL: [Choice; 8] = [
        Choice::Exact,
        Choice::Contains,
        Choice::Json,
        Choice::ToolCalls,
        Choice::Latency,
        Choice::Tokens,
        Choice::Relevance,
        Choice::Faithfulness,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Choice::Exact => scorers::EXACT,
            Choice::Contains => scorers::CONTAINS,
            Choice::Json => scorers::JSON,
            Choice::ToolCalls => scorers::TOOL_CALLS,
            Choice::Latency => scorers::LATENCY,
            Choice::Tokens => scorers::TOKENS,
            Choice::Relevance => scorers::RELEVANCE,
            Choice::Faithfulness => scorers::FAITHFULNESS,
        }
    }

    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|c| c.name() == s.trim())
            .ok_or_else(|| {
                format!(
                    "{s:?} is not a scorer: choose from {}",
                    Self::ALL.map(Choice::name).join(", ")
                )
            })
    }

    /// Whether it scores `case` (it has what the scorer compares with).
    fn applies(self, case: &Case) -> bool {
        match self {
            Choice::Exact | Choice::Contains => case.expected.is_some(),
            Choice::ToolCalls => case.expected_tool_calls.is_some(),
            Choice::Json => case.schema.is_some(),
            Choice::Latency | Choice::Tokens | Choice::Relevance | Choice::Faithfulness => true,
        }
    }

    /// Judged by a model (not deterministic).
    fn judged(self) -> bool {
        matches!(self, Choice::Relevance | Choice::Faithfulness)
    }
}

/// `scorer=value`, a scorer's least mean.
pub fn parse_threshold(s: &str) -> Result<(Choice, f64), String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not SCORER=VALUE"))?;
    let value: f64 = value
        .trim()
        .parse()
        .ok()
        .filter(|v| (0.0..=1.0).contains(v))
        .ok_or_else(|| format!("{s:?}: the value is not a number from 0 to 1"))?;
    Ok((Choice::parse(name)?, value))
}

/// Where the dataset runs.
#[derive(Debug, Clone)]
pub enum Target {
    /// A running server (its base URL), with a bearer token when it asks for one.
    Server { url: String, token: Option<String> },
    /// The application started here, on an in-memory SQLite with the examples, and the agent
    /// files and workflows of a definitions folder when one is given.
    InProcess { definitions: Option<PathBuf> },
}

/// What an eval is asked.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    pub agent: String,
    pub target: Target,
    /// `None`: the deterministic built-ins the dataset's fields allow.
    pub scorers: Option<Vec<Choice>>,
    pub thresholds: Vec<(Choice, f64)>,
    /// The `latency` scorer's limit.
    pub max_latency: Duration,
    /// The `tokens` scorer's limit.
    pub max_tokens: u64,
    /// The longest one case may take.
    pub timeout: Duration,
}

/// An answer of the agent, as the route gives it.
#[derive(Debug, Clone, Default)]
struct Answer {
    text: String,
    usage: Usage,
    tool_calls: Vec<ToolCall>,
    tool_results: Vec<ToolResult>,
}

/// Reads the `data` of a `POST /agents/{id}/text` answer.
fn read_answer(data: &Value) -> Result<Answer, String> {
    if data.get("status").and_then(Value::as_str) == Some("suspended") {
        return Err("the run waits for a person's approval".into());
    }
    let text = data
        .get("text")
        .and_then(Value::as_str)
        .ok_or("the answer has no text")?
        .to_owned();
    let tokens = |k: &str| data["usage"].get(k).and_then(Value::as_u64).unwrap_or(0);
    let usage = Usage {
        prompt_tokens: tokens("promptTokens"),
        completion_tokens: tokens("completionTokens"),
        total_tokens: tokens("totalTokens"),
        ..Usage::default()
    };
    let list = |k: &str| {
        data.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let str_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let tool_calls = list("toolCalls")
        .iter()
        .map(|c| ToolCall {
            tool_call_id: str_of(c, "toolCallId"),
            tool_name: str_of(c, "toolName"),
            args: c.get("args").cloned().unwrap_or(Value::Null),
        })
        .collect();
    let tool_results = list("toolResults")
        .iter()
        .map(|r| ToolResult {
            tool_call_id: str_of(r, "toolCallId"),
            tool_name: str_of(r, "toolName"),
            args: r.get("args").cloned().unwrap_or(Value::Null),
            result: r.get("result").cloned().unwrap_or(Value::Null),
            is_error: r.get("isError").and_then(Value::as_bool).unwrap_or(false),
        })
        .collect();
    Ok(Answer {
        text,
        usage,
        tool_calls,
        tool_results,
    })
}

/// Asks agents over HTTP.
struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Client {
    fn new(base: &str, token: Option<String>, timeout: Duration) -> anyhow::Result<Self> {
        Ok(Self {
            http: reqwest::Client::builder().timeout(timeout).build()?,
            base: base.trim_end_matches('/').to_owned(),
            token,
        })
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, String> {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let v: Value = resp
            .json()
            .await
            .map_err(|e| format!("HTTP {status}: not JSON ({e})"))?;
        if !status.is_success() {
            // The envelope: `{success: false, error: <message>, code}`.
            let message = v["error"]
                .as_str()
                .map_or_else(|| v.to_string(), str::to_owned);
            let code = v["code"].as_str().unwrap_or("error");
            return Err(format!("HTTP {}: {code}: {message}", status.as_u16()));
        }
        Ok(v["data"].clone())
    }

    async fn ask(&self, agent: &str, input: &str) -> Result<Answer, String> {
        let data = self
            .call(
                reqwest::Method::POST,
                &format!("/agents/{agent}/text"),
                Some(json!({"input": input})),
            )
            .await?;
        read_answer(&data)
    }
}

/// One case's outcome.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseResult {
    pub line: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub input: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// Why the agent gave no answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub latency_ms: u128,
    pub scores: Vec<Score>,
}

/// A scorer's results over the dataset.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub scorer: String,
    /// Cases it scored.
    pub scored: usize,
    pub passed: usize,
    /// The mean of its scores (`None` when it scored no case).
    pub mean: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// Its mean is at or above its threshold (true without one).
    pub met: bool,
}

/// The eval's report: what `--json` writes.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub agent: String,
    pub dataset: String,
    pub cases: Vec<CaseResult>,
    pub summary: Vec<Summary>,
    /// Cases the agent gave no answer to.
    pub errors: usize,
    /// Every threshold is met and every case was answered.
    pub passed: bool,
}

/// The scorers an eval runs: those asked, else the deterministic built-ins the dataset's
/// fields allow (`latency` and `tokens` always).
fn chosen(opts: &EvalOptions, lines: &[Line]) -> Vec<Choice> {
    let mut out = match &opts.scorers {
        Some(list) if !list.is_empty() => list.clone(),
        _ => Choice::ALL
            .into_iter()
            .filter(|c| !c.judged() && lines.iter().any(|l| c.applies(&l.case)))
            .collect(),
    };
    for (c, _) in &opts.thresholds {
        if !out.contains(c) {
            out.push(*c);
        }
    }
    let mut seen = Vec::new();
    out.retain(|c| {
        let new = !seen.contains(c);
        seen.push(*c);
        new
    });
    out
}

/// A scorer of `choice` (the judge model for the judged ones).
fn scorer_of(
    choice: Choice,
    opts: &EvalOptions,
    judge: &Arc<dyn Model>,
) -> Option<Arc<dyn Scorer>> {
    Some(match choice {
        Choice::Exact => Arc::new(ExactMatch),
        Choice::Contains => Arc::new(Contains),
        Choice::ToolCalls => Arc::new(ToolCalled),
        Choice::Latency => Arc::new(LatencyBelow(opts.max_latency)),
        Choice::Tokens => Arc::new(TokensBelow(opts.max_tokens)),
        Choice::Relevance => Arc::new(Relevance::new(judge.clone())),
        Choice::Faithfulness => Arc::new(Faithfulness::new(judge.clone())),
        // Per case: each has its own schema.
        Choice::Json => return None,
    })
}

/// Runs the dataset at `dataset` as `opts` say.
pub async fn run(dataset: &Path, opts: &EvalOptions) -> anyhow::Result<Report> {
    let lines = read_dataset_file(dataset)?;
    let choices = chosen(opts, &lines);
    let judge = crate::default_model();
    let scorers: Vec<(Choice, Option<Arc<dyn Scorer>>)> = choices
        .iter()
        .map(|c| (*c, scorer_of(*c, opts, &judge)))
        .collect();
    // In process: the server itself, on a port of its own, for the time of the eval.
    let (client, local) = match &opts.target {
        Target::Server { url, token } => (Client::new(url, token.clone(), opts.timeout)?, None),
        Target::InProcess { definitions } => {
            let settings = crate::Settings {
                bind: "127.0.0.1:0".into(),
                database_url: "sqlite::memory:".into(),
                examples: true,
                definitions: definitions.clone(),
                ..crate::Settings::default()
            };
            let running = crate::start(&settings).await?;
            let handle = running.server.handle();
            let addr = running.addr;
            tokio::spawn(running.server);
            (
                Client::new(&format!("http://{addr}"), None, opts.timeout)?,
                Some((handle, running.engine)),
            )
        }
    };
    let outcome = run_cases(&client, opts, &lines, &scorers).await;
    if let Some((handle, engine)) = local {
        engine.shutdown(Duration::from_secs(1)).await;
        handle.stop(true).await;
    }
    let cases = outcome?;
    let summary = summarize(&choices, &cases, &opts.thresholds);
    let errors = cases.iter().filter(|c| c.error.is_some()).count();
    Ok(Report {
        agent: opts.agent.clone(),
        dataset: dataset.display().to_string(),
        passed: errors == 0 && summary.iter().all(|s| s.met),
        errors,
        cases,
        summary,
    })
}

async fn run_cases(
    client: &Client,
    opts: &EvalOptions,
    lines: &[Line],
    scorers: &[(Choice, Option<Arc<dyn Scorer>>)],
) -> anyhow::Result<Vec<CaseResult>> {
    // An unknown agent (or a server that refuses the token) is the eval's error, not each case's.
    client
        .call(
            reqwest::Method::GET,
            &format!("/agents/{}", opts.agent),
            None,
        )
        .await
        .map_err(|e| anyhow::anyhow!("agent {}: {e}", opts.agent))?;
    let mut out = Vec::with_capacity(lines.len());
    for line in lines {
        let began = Instant::now();
        let answer = client.ask(&opts.agent, &line.case.input).await;
        let latency = began.elapsed();
        out.push(score_case(line, answer, latency, scorers).await);
    }
    Ok(out)
}

async fn score_case(
    line: &Line,
    answer: Result<Answer, String>,
    latency: Duration,
    scorers: &[(Choice, Option<Arc<dyn Scorer>>)],
) -> CaseResult {
    let case = &line.case;
    let applicable = scorers.iter().filter(|(c, _)| c.applies(case));
    let mut result = CaseResult {
        line: line.number,
        name: case.name.clone(),
        input: case.input.clone(),
        answer: None,
        error: None,
        latency_ms: latency.as_millis(),
        scores: Vec::new(),
    };
    let answer = match answer {
        Ok(a) => a,
        Err(e) => {
            // No answer fails every scorer the case has.
            result.scores = applicable
                .map(|(c, _)| Score::new(c.name(), 0.0, 1.0, format!("No answer: {e}")))
                .collect();
            result.error = Some(e);
            return result;
        }
    };
    let input = ScoreInput {
        question: case.input.clone(),
        answer: answer.text.clone(),
        expected: case.expected.clone(),
        expected_tool_calls: case.expected_tool_calls.clone(),
        tool_calls: answer.tool_calls,
        tool_results: answer.tool_results,
        latency,
        usage: answer.usage,
    };
    for (choice, scorer) in applicable {
        let score = match (choice, scorer) {
            (Choice::Json, _) => match &line.json {
                Some(j) => j.score(&input).await,
                None => None,
            },
            (_, Some(s)) => scorers::score_all(std::slice::from_ref(s), &input)
                .await
                .pop(),
            (_, None) => None,
        };
        result.scores.extend(score);
    }
    result.answer = Some(answer.text);
    result
}

fn summarize(
    choices: &[Choice],
    cases: &[CaseResult],
    thresholds: &[(Choice, f64)],
) -> Vec<Summary> {
    choices
        .iter()
        .map(|c| {
            let scores: Vec<&Score> = cases
                .iter()
                .flat_map(|r| r.scores.iter())
                .filter(|s| s.scorer == c.name())
                .collect();
            let mean = (!scores.is_empty())
                .then(|| scores.iter().map(|s| s.value).sum::<f64>() / scores.len() as f64);
            let threshold = thresholds.iter().find(|(t, _)| t == c).map(|(_, v)| *v);
            // A small tolerance: a mean of ten 0.9s is not below 0.9.
            let met = match (threshold, mean) {
                (None, _) => true,
                (Some(t), Some(m)) => m + 1e-9 >= t,
                (Some(_), None) => false,
            };
            Summary {
                scorer: c.name().to_owned(),
                scored: scores.len(),
                passed: scores.iter().filter(|s| s.passed).count(),
                mean,
                threshold,
                met,
            }
        })
        .collect()
}

fn one_line(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() > max {
        let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

/// The table printed: each scorer's mean, passes and threshold, then the failures.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} cases of {} on {}\n",
        report.cases.len(),
        report.dataset,
        report.agent
    );
    let _ = writeln!(
        out,
        "{:<14} {:>6} {:>9}  threshold",
        "scorer", "mean", "passed"
    );
    for s in &report.summary {
        let mean = s.mean.map_or_else(|| "-".to_owned(), |m| format!("{m:.3}"));
        let threshold = match s.threshold {
            None => "-".to_owned(),
            Some(t) if s.met => format!("{t:.3} met"),
            Some(t) => format!("{t:.3} NOT MET"),
        };
        let _ = writeln!(
            out,
            "{:<14} {:>6} {:>9}  {threshold}",
            s.scorer,
            mean,
            format!("{}/{}", s.passed, s.scored)
        );
    }
    let failures: Vec<String> = report
        .cases
        .iter()
        .flat_map(|c| {
            let error = c
                .error
                .as_ref()
                .map(|e| format!("  line {}: no answer: {}", c.line, one_line(e, 200)));
            let failed = c
                .scores
                .iter()
                .filter(|s| !s.passed && c.error.is_none())
                .map(|s| {
                    format!(
                        "  line {} {} ({:.3}): {}",
                        c.line,
                        s.scorer,
                        s.value,
                        one_line(&s.reason, 200)
                    )
                });
            error.into_iter().chain(failed).collect::<Vec<_>>()
        })
        .collect();
    if failures.is_empty() {
        out.push_str("\nno failures\n");
    } else {
        let _ = writeln!(out, "\nfailures ({}):", failures.len());
        for f in failures {
            let _ = writeln!(out, "{f}");
        }
    }
    let below: Vec<String> = report
        .summary
        .iter()
        .filter(|s| !s.met)
        .map(|s| {
            format!(
                "{} {} < {:.3}",
                s.scorer,
                s.mean
                    .map_or_else(|| "(no score)".to_owned(), |m| format!("{m:.3}")),
                s.threshold.unwrap_or_default()
            )
        })
        .collect();
    if below.is_empty() {
        out.push_str("\nevery threshold is met\n");
    } else {
        let _ = writeln!(out, "\nbelow thresholds: {}", below.join(", "));
    }
    if report.errors > 0 {
        let _ = writeln!(out, "{} cases had no answer", report.errors);
    }
    out
}

/// `s` escaped for XML text and attributes.
fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Characters XML 1.0 cannot hold.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// The report as JUnit XML: a suite of one test case per line and scorer (a failure with the
/// scorer's reason; an error when the agent did not answer), and one per threshold.
pub fn junit(report: &Report) -> String {
    let mut cases = String::new();
    let (mut tests, mut failures, mut errors) = (0, 0, 0);
    for c in &report.cases {
        let label = c.name.clone().unwrap_or_else(|| one_line(&c.input, 80));
        let time = c.latency_ms as f64 / 1000.0;
        for s in &c.scores {
            tests += 1;
            let _ = write!(
                cases,
                "    <testcase classname=\"{}.{}\" name=\"line {}: {}\" time=\"{time:.3}\"",
                xml(&report.agent),
                xml(&s.scorer),
                c.line,
                xml(&label)
            );
            if let Some(e) = &c.error {
                errors += 1;
                let _ = writeln!(
                    cases,
                    ">\n      <error message=\"{}\" type=\"no-answer\"/>\n    </testcase>",
                    xml(&one_line(e, 500))
                );
            } else if !s.passed {
                failures += 1;
                let _ = writeln!(
                    cases,
                    ">\n      <failure message=\"{}\" type=\"{}\">score {:.3}: {}</failure>\n    </testcase>",
                    xml(&one_line(&s.reason, 500)),
                    xml(&s.scorer),
                    s.value,
                    xml(&s.reason)
                );
            } else {
                cases.push_str("/>\n");
            }
        }
    }
    for s in report.summary.iter().filter(|s| s.threshold.is_some()) {
        tests += 1;
        let t = s.threshold.unwrap_or_default();
        let _ = write!(
            cases,
            "    <testcase classname=\"{}.thresholds\" name=\"mean {} &gt;= {t}\"",
            xml(&report.agent),
            xml(&s.scorer)
        );
        if s.met {
            cases.push_str("/>\n");
        } else {
            failures += 1;
            let mean = s
                .mean
                .map_or_else(|| "no score".to_owned(), |m| format!("{m:.3}"));
            let _ = writeln!(
                cases,
                ">\n      <failure message=\"mean {mean} is below {t}\" type=\"threshold\"/>\n    </testcase>"
            );
        }
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <testsuites name=\"agentry eval\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\">\n  \
         <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\">\n\
         {cases}  </testsuite>\n</testsuites>\n",
        xml(&format!("{} ({})", report.agent, report.dataset))
    )
}

/// Writes the report's JSON and JUnit files where asked.
pub fn write_files(
    report: &Report,
    json_path: Option<&PathBuf>,
    junit_path: Option<&PathBuf>,
) -> anyhow::Result<()> {
    if let Some(p) = json_path {
        std::fs::write(p, serde_json::to_vec_pretty(report)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = junit_path {
        std::fs::write(p, junit(report)).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_line_is_named() {
        let text = "{\"input\": \"hi\"}\n\n{\"input\": 3}\n";
        let e = format!("{:#}", read_dataset(text).unwrap_err());
        assert!(e.starts_with("line 3: not a case"), "{e}");
        let e = format!(
            "{:#}",
            read_dataset("{\"input\": \"hi\", \"expect\": \"x\"}").unwrap_err()
        );
        assert!(e.contains("line 1") && e.contains("expect"), "{e}");
        let long = format!("{{\"input\": \"{}\"}}", "a".repeat(MAX_LINE_BYTES));
        let e = format!("{:#}", read_dataset(&long).unwrap_err());
        assert!(e.contains("longer than"), "{e}");
        let e = format!(
            "{:#}",
            read_dataset("{\"input\": \"x\", \"schema\": {\"type\": 5}}").unwrap_err()
        );
        assert!(e.starts_with("line 1: `schema`"), "{e}");
        assert_eq!(read_dataset("{\"input\": \"hi\"}\n").unwrap().len(), 1);
    }

    #[test]
    fn thresholds_name_a_scorer_and_a_share() {
        assert_eq!(parse_threshold("exact=0.9"), Ok((Choice::Exact, 0.9)));
        assert!(parse_threshold("exact=1.5").is_err());
        assert!(
            parse_threshold("nope=0.5")
                .unwrap_err()
                .contains("choose from")
        );
        assert!(parse_threshold("exact").is_err());
    }

    #[test]
    fn xml_is_escaped() {
        assert_eq!(xml("a<b & \"c\"\u{1}"), "a&lt;b &amp; &quot;c&quot; ");
    }
}
