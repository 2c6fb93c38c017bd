//! Token usage: what an agent's generations spent for a user, day by day, beside the agent's
//! budgets (`GET /agents/{id}/usage`). Whose usage is decided as for memory
//! ([`crate::Policy::memory_owner`]): the same namespace the budgets count under.

use agentry_agents::usage::{MAX_USAGE_DAYS, usage_user};
use agentry_engine::AgentId;

use crate::App;
use crate::caller::Caller;
use crate::error::AppError;
use crate::input::check_key;
use crate::wire::agents::{DayUsage, UsageView};

/// Days shown when the query does not say.
const DEFAULT_DAYS: u32 = 7;

/// Whose usage, and how many days back (the query's `userId` and `days`).
#[derive(Debug, Clone, Default)]
pub struct UsageQuery {
    pub user_id: Option<String>,
    pub days: Option<String>,
}

impl App {
    /// The caller's (or, in a trusted setup, `userId`'s) token usage of agent `id` for the last
    /// `days` UTC days, today included, and what is left of today's budget.
    pub async fn usage(
        &self,
        caller: &Caller,
        id: &AgentId,
        query: UsageQuery,
    ) -> Result<UsageView, AppError> {
        let agent = self.agents().require(id).map_err(AppError::agent)?;
        let days = match &query.days {
            None => DEFAULT_DAYS,
            Some(d) => d
                .parse::<u32>()
                .ok()
                .filter(|d| (1..=MAX_USAGE_DAYS).contains(d))
                .ok_or_else(|| {
                    AppError::bad_request(format!(
                        "Invalid days: {d:?} (a whole number from 1 to {MAX_USAGE_DAYS})"
                    ))
                })?,
        };
        if let Some(u) = &query.user_id {
            check_key("userId", u)?;
        }
        let owner = self
            .policy()
            .memory_owner(caller, query.user_id.as_deref())?;
        let user = usage_user(&owner, query.user_id.as_deref());
        let (today, resets_at, _) = self.agents().usage_day();
        let from = today - chrono::Days::new(u64::from(days - 1));
        let spent = self
            .agents()
            .usage_store()
            .days(&agent.id, &user, from, today)
            .await
            .map_err(|e| AppError::engine(e.into(), "Failed to read the usage"))?;
        let today_tokens = spent
            .iter()
            .find(|(d, _)| *d == today)
            .map_or(0, |(_, n)| *n);
        let user_id = caller
            .user_id()
            .map(agentry_engine::UserId::into_string)
            .or(query.user_id);
        Ok(UsageView {
            agent_id: agent.id.clone(),
            user_id,
            tokens_per_run: agent.budget.tokens_per_run,
            tokens_per_user_day: agent.budget.tokens_per_user_day,
            today: today.to_string(),
            today_tokens,
            remaining_today: agent
                .budget
                .tokens_per_user_day
                .map(|b| b.saturating_sub(today_tokens)),
            resets_at: resets_at.into(),
            days: spent
                .into_iter()
                .map(|(day, tokens)| DayUsage {
                    day: day.to_string(),
                    tokens,
                })
                .collect(),
        })
    }
}
