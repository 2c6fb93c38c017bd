//! What the agents report as they work, for whoever measures them (the Prometheus metrics of
//! `agentry-metrics`). Every method has an empty default, and [`NoTelemetry`] is what a hub
//! reports to until one is set.
//!
//! Calls are made on the path of the work they describe: an implementation must be quick
//! (count, observe, return) and must never block.

use std::time::Duration;

/// A model call as the agents report it.
#[derive(Debug, Clone, Copy)]
pub struct ModelCallReport<'a> {
    pub agent: &'a str,
    /// The model's name (`offline`, `gpt-4o-mini`, ...).
    pub model: &'a str,
    pub duration: Duration,
    /// Token counts of a call that answered; `None` for one that failed.
    pub tokens: Option<(u64, u64)>,
}

/// The label of a name the server did not register (a tool a model made up).
pub const UNKNOWN: &str = "unknown";

/// A tool call as the agents report it.
#[derive(Debug, Clone, Copy)]
pub struct ToolCallReport<'a> {
    pub agent: &'a str,
    /// A tool the agent has, or [`UNKNOWN`] for a name the model made up: labels take only
    /// registered names, so the series stay bounded whatever a model answers.
    pub tool: &'a str,
    pub duration: Duration,
    /// The tool answered with an error (or does not exist).
    pub failed: bool,
}

/// A guardrail that acted (rewrote or tripped) as the agents report it.
#[derive(Debug, Clone, Copy)]
pub struct GuardrailReport<'a> {
    pub agent: &'a str,
    /// The guardrail's name (registered with the agent: the series stay bounded).
    pub guardrail: &'a str,
    pub point: crate::guardrail::GuardPoint,
    /// It tripped (else it rewrote).
    pub tripped: bool,
}

/// One scorer's score of a generation, as live scoring reports it.
#[derive(Debug, Clone, Copy)]
pub struct ScoreReport<'a> {
    pub agent: &'a str,
    /// The scorer's name (a scorer the agent declared: the series stay bounded).
    pub scorer: &'a str,
    /// From 0 to 1.
    pub value: f64,
}

pub trait AgentTelemetry: Send + Sync + 'static {
    fn guardrail(&self, report: &GuardrailReport<'_>) {
        let _ = report;
    }

    fn model_call(&self, call: &ModelCallReport<'_>) {
        let _ = call;
    }

    fn tool_call(&self, call: &ToolCallReport<'_>) {
        let _ = call;
    }

    /// A live score (off the request path, after the answer).
    fn score(&self, score: &ScoreReport<'_>) {
        let _ = score;
    }

    /// A generation of `agent` sampled for scoring was not scored: the scoring queue was full.
    fn score_dropped(&self, agent: &str) {
        let _ = agent;
    }
}

/// Reports to nobody.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoTelemetry;

impl AgentTelemetry for NoTelemetry {}
