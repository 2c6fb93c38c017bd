//! Token usage per agent, user and UTC day: what the daily budgets read ([`crate::Budget`]) and
//! what `GET /agents/{id}/usage` shows. Counted at each model call as its answer comes (a
//! replayed call of a durable run was counted when it was made), off the request path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

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
        Ok(days_of(&counts, agent_id, user_id, from, to))
    }
}

/// The counts of `agent_id` and `user_id` from `from` to `to` (both included), by day.
fn days_of(
    counts: &HashMap<UsageKey, u64>,
    agent_id: &str,
    user_id: &str,
    from: NaiveDate,
    to: NaiveDate,
) -> Vec<(NaiveDate, u64)> {
    let mut out: Vec<(NaiveDate, u64)> = counts
        .iter()
        .filter(|(k, _)| {
            k.agent_id == agent_id && k.user_id == user_id && k.day >= from && k.day <= to
        })
        .map(|(k, n)| (k.day, *n))
        .collect();
    out.sort();
    out
}

/// Usage counted in memory and written to a [`UsageStore`] in the background: each model call
/// adds its tokens here at once (no write of its own), and one writer writes what gathered
/// while its previous write ran, one write per key (agent, user, day), so that a busy agent
/// costs a write per batch, not one per call. Reads add what is not written yet: a budget sees
/// every call this process counted.
pub struct UsageCounter {
    store: Arc<dyn UsageStore>,
    pending: Arc<Mutex<HashMap<UsageKey, u64>>>,
    /// Wakes the writer (started with the first count; it stops when the counter is dropped).
    wake: std::sync::OnceLock<tokio::sync::mpsc::Sender<()>>,
}

impl UsageCounter {
    pub fn new(store: Arc<dyn UsageStore>) -> Self {
        Self {
            store,
            pending: Arc::default(),
            wake: std::sync::OnceLock::new(),
        }
    }

    /// Counts `tokens` for `key`; written soon.
    pub fn count(&self, key: UsageKey, tokens: u64) {
        if tokens == 0 {
            return;
        }
        {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            let n = pending.entry(key).or_default();
            *n = n.saturating_add(tokens);
        }
        let wake = self.wake.get_or_init(|| {
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            tokio::spawn(write_counts(self.store.clone(), self.pending.clone(), rx));
            tx
        });
        // Full: the writer is already woken and will take this count with the others.
        let _ = wake.try_send(());
    }

    /// Writes what is counted and not written yet, now (at shutdown).
    pub async fn flush(&self) {
        write_pending(self.store.as_ref(), &self.pending).await;
    }

    fn pending_of(&self, key: &UsageKey) -> u64 {
        let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.get(key).copied().unwrap_or(0)
    }
}

/// The writer: what gathered, each time it is woken, until the counter is dropped (then what
/// is left).
async fn write_counts(
    store: Arc<dyn UsageStore>,
    pending: Arc<Mutex<HashMap<UsageKey, u64>>>,
    mut wake: tokio::sync::mpsc::Receiver<()>,
) {
    while wake.recv().await.is_some() {
        if !write_pending(store.as_ref(), &pending).await {
            // The store failed (the counts stay pending): not again at once.
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    }
    write_pending(store.as_ref(), &pending).await;
}

/// Writes the pending counts, taking each away once written; whether all were.
async fn write_pending(store: &dyn UsageStore, pending: &Mutex<HashMap<UsageKey, u64>>) -> bool {
    let counts: Vec<(UsageKey, u64)> = {
        let pending = pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.iter().map(|(k, n)| (k.clone(), *n)).collect()
    };
    let mut all = true;
    for (key, tokens) in counts {
        match store.add(&key, tokens).await {
            Ok(()) => {
                let mut pending = pending.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(n) = pending.get_mut(&key) {
                    *n = n.saturating_sub(tokens);
                    if *n == 0 {
                        pending.remove(&key);
                    }
                }
            }
            Err(e) => {
                all = false;
                tracing::warn!(agent_id = %key.agent_id, error = %e, "token usage not written yet");
            }
        }
    }
    all
}

/// The store's counts with what is not written yet.
#[async_trait]
impl UsageStore for UsageCounter {
    async fn add(&self, key: &UsageKey, tokens: u64) -> Result<(), StoreError> {
        self.count(key.clone(), tokens);
        Ok(())
    }

    async fn used(&self, key: &UsageKey) -> Result<u64, StoreError> {
        // Pending first: a count written meanwhile is then in the store, not missed (at worst
        // counted twice for an instant).
        let pending = self.pending_of(key);
        Ok(self.store.used(key).await?.saturating_add(pending))
    }

    async fn days(
        &self,
        agent_id: &str,
        user_id: &str,
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<Vec<(NaiveDate, u64)>, StoreError> {
        let unwritten = {
            let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            days_of(&pending, agent_id, user_id, from, to)
        };
        let mut days = self.store.days(agent_id, user_id, from, to).await?;
        for (day, n) in unwritten {
            match days.iter_mut().find(|(d, _)| *d == day) {
                Some((_, total)) => *total = total.saturating_add(n),
                None => days.push((day, n)),
            }
        }
        days.sort();
        Ok(days)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(user: &str) -> UsageKey {
        UsageKey {
            agent_id: "a".into(),
            user_id: user.into(),
            day: NaiveDate::from_ymd_opt(2026, 11, 29).unwrap(),
        }
    }

    #[tokio::test]
    async fn counts_are_read_at_once_and_written_in_the_background() {
        let store = Arc::new(InMemoryUsageStore::default());
        let counter = UsageCounter::new(store.clone());
        for _ in 0..100 {
            counter.count(key("u"), 7);
        }
        counter.count(key("v"), 1);
        // Read back at once, written or not.
        assert_eq!(counter.used(&key("u")).await.unwrap(), 700);
        let day = key("u").day;
        assert_eq!(
            counter.days("a", "u", day, day).await.unwrap(),
            vec![(day, 700)]
        );
        // The writer catches up; nothing is counted twice.
        for _ in 0..200 {
            if store.used(&key("u")).await.unwrap() == 700 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        counter.flush().await;
        assert_eq!(store.used(&key("u")).await.unwrap(), 700);
        assert_eq!(store.used(&key("v")).await.unwrap(), 1);
        assert_eq!(counter.used(&key("u")).await.unwrap(), 700);
        assert_eq!(counter.pending_of(&key("u")), 0);
    }
}
