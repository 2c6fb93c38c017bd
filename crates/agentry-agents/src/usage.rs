//! Token usage per agent, user and UTC day: what the daily budgets read ([`crate::Budget`]) and
//! what `GET /agents/{id}/usage` shows. Counted at each model call as its answer comes (a
//! replayed call of a durable run was counted when it was made), off the request path.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::NaiveDate;

use agentry_engine::store::StoreError;

/// The most days a usage query reads.
pub const MAX_USAGE_DAYS: u32 = 90;

/// Whose tokens a caller spends (and whose daily budget it draws on): the namespace of its
/// memory ([`crate::memory::namespace`]), `anonymous` for a caller with no user.
pub fn usage_user(owner: &crate::MemoryOwner, user_id: Option<&str>) -> String {
    crate::memory::namespace(owner, user_id).unwrap_or_else(|| "anonymous".to_owned())
}

/// Whose tokens: an agent, a user's memory namespace (as conversation memory names it) and a day.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UsageKey {
    pub agent_id: String,
    pub user_id: String,
    pub day: NaiveDate,
}

#[async_trait]
pub trait UsageStore: Send + Sync + 'static {
    /// Adds `tokens` to the key's count (one statement: replicas adding at once all count).
    async fn add(&self, key: &UsageKey, tokens: u64) -> Result<(), StoreError>;
    /// The key's count (0 when none).
    async fn used(&self, key: &UsageKey) -> Result<u64, StoreError>;
    /// The counts of `agent_id` and `user_id` from `from` to `to` (inclusive), oldest first,
    /// days without usage left out.
    async fn days(
        &self,
        agent_id: &str,
        user_id: &str,
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<Vec<(NaiveDate, u64)>, StoreError>;
}

/// Usage kept in process.
#[derive(Debug, Default)]
pub struct InMemoryUsageStore {
    counts: Mutex<HashMap<UsageKey, u64>>,
}

#[async_trait]
impl UsageStore for InMemoryUsageStore {
    async fn add(&self, key: &UsageKey, tokens: u64) -> Result<(), StoreError> {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let n = counts.entry(key.clone()).or_default();
        *n = n.saturating_add(tokens);
        Ok(())
    }

    async fn used(&self, key: &UsageKey) -> Result<u64, StoreError> {
        let counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        Ok(counts.get(key).copied().unwrap_or(0))
    }

    async fn days(
        &self,
        agent_id: &str,
        user_id: &str,
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<Vec<(NaiveDate, u64)>, StoreError> {
        let counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<(NaiveDate, u64)> = counts
            .iter()
            .filter(|(k, _)| {
                k.agent_id == agent_id && k.user_id == user_id && k.day >= from && k.day <= to
            })
            .map(|(k, n)| (k.day, *n))
            .collect();
        out.sort();
        Ok(out)
    }
}
