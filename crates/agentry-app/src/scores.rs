//! Live scores of agents' generations: an agent's list, and a run's (its detail carries them).

use agentry_agents::scorers::{ScoreQuery, StoredScore};
use agentry_engine::id::AgentId;
use agentry_engine::store::StoreError;

use crate::App;
use crate::caller::Caller;
use crate::error::{AppError, Code};
use crate::wire::scores::{Score, ScoreList, parse_score_cursor, score_cursor};
use crate::workflows::page_size;

/// The longest scorer name a filter may give.
pub const MAX_SCORER_CHARS: usize = 128;

/// What GET /agents/{id}/scores asks: a scorer's only, a page size, the page after a cursor.
#[derive(Debug, Clone, Default)]
pub struct ScoreListRequest {
    pub scorer: Option<String>,
    pub limit: Option<String>,
    pub cursor: Option<String>,
}

/// A score store's failure.
fn store_error(e: StoreError) -> AppError {
    match e {
        StoreError::Unavailable(cause) => {
            tracing::warn!(error = %cause, "reading scores: the database is unavailable");
            AppError::new(
                Code::DatabaseUnavailable,
                crate::error::DATABASE_UNAVAILABLE,
            )
        }
        other => {
            tracing::error!(error = %other, "reading scores");
            AppError::internal("Failed to read the scores")
        }
    }
}

impl App {
    /// One page of agent `id`'s live scores, newest first (a scorer's only when asked); in
    /// strict mode only those of the caller's own generations (an admin's: all).
    pub async fn scores(
        &self,
        caller: &Caller,
        id: &AgentId,
        request: ScoreListRequest,
    ) -> Result<ScoreList, AppError> {
        self.agents.require(id).map_err(AppError::agent)?;
        let owner = self.policy.list_owner(caller)?;
        let limit = page_size(request.limit.as_deref())?;
        let after = match request.cursor.as_deref().filter(|c| !c.is_empty()) {
            None => None,
            Some(c) => {
                Some(parse_score_cursor(c).ok_or_else(|| AppError::bad_request("Invalid cursor"))?)
            }
        };
        let scorer = request.scorer.filter(|s| !s.is_empty());
        if scorer
            .as_ref()
            .is_some_and(|s| s.chars().count() > MAX_SCORER_CHARS)
        {
            return Err(AppError::bad_request(format!(
                "Invalid scorer: longer than {MAX_SCORER_CHARS} characters"
            )));
        }
        let query = ScoreQuery {
            agent_id: id.as_str().to_owned(),
            scorer,
            owner: owner.map(|o| o.as_str().to_owned()),
            limit: limit as usize,
            after,
        };
        let (page, total) = self
            .agents
            .score_store()
            .list(&query)
            .await
            .map_err(store_error)?;
        let next_cursor = if page.len() == query.limit {
            page.last().and_then(score_cursor)
        } else {
            None
        };
        Ok(ScoreList {
            scores: page.iter().map(Score::from).collect(),
            total,
            next_cursor,
        })
    }

    /// The live scores of agent `id`'s run `run_id`, by scorer (the caller may see the run).
    pub(crate) async fn run_scores(
        &self,
        id: &AgentId,
        run_id: &str,
    ) -> Result<Vec<Score>, AppError> {
        let scores: Vec<StoredScore> = self
            .agents
            .score_store()
            .of_run(id.as_str(), run_id)
            .await
            .map_err(store_error)?;
        Ok(scores.iter().map(Score::from).collect())
    }
}
