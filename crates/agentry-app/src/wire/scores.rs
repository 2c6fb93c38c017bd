//! Live scores of agents' generations on the wire: a run's (in its detail) and an agent's list.

use agentry_agents::scorers::StoredScore;
use serde::Serialize;
use utoipa::ToSchema;

use super::Timestamp;

/// One scorer's score of one generation.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Score {
    /// The durable run's id, or an in-memory generation's own (`gen_<uuid>`).
    pub run_id: String,
    pub scorer: String,
    /// From 0 (fails) to 1 (meets the measure).
    pub value: f64,
    /// Whether the generation meets the scorer's bar.
    pub passed: bool,
    pub reason: String,
    /// When it was scored.
    #[schema(value_type = Timestamp)]
    pub created_at: Timestamp,
}

impl From<&StoredScore> for Score {
    fn from(s: &StoredScore) -> Self {
        Self {
            run_id: s.run_id.clone(),
            scorer: s.scorer.clone(),
            value: s.value,
            passed: s.passed,
            reason: s.reason.clone(),
            created_at: Timestamp(s.created_at),
        }
    }
}

/// `data` of GET /agents/{id}/scores.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScoreList {
    /// Newest first.
    pub scores: Vec<Score>,
    /// How many scores the filters select in all.
    pub total: u64,
    /// The `cursor` of the next page; `null` on the last one.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

/// The cursor of the page after `last`, opaque to clients.
pub fn score_cursor(last: &StoredScore) -> Option<String> {
    super::cursor_at(last.created_at, &format!("{}/{}", last.run_id, last.scorer))
}

/// Reads a cursor of [`score_cursor`].
pub fn parse_score_cursor(cursor: &str) -> Option<agentry_agents::scorers::ScoreKey> {
    let (at, rest) = super::parse_list_cursor(cursor)?;
    let (run_id, scorer) = rest.split_once('/')?;
    Some(agentry_agents::scorers::ScoreKey {
        created_at: at,
        run_id: run_id.to_owned(),
        scorer: scorer.to_owned(),
    })
}
