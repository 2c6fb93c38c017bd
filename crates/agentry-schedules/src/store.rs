//! Where schedules are kept: the [`ScheduleStore`] trait (agentry-store implements it on SQLite
//! and PostgreSQL) and [`InMemoryScheduleStore`].

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::Schedule;
use agentry_engine::store::StoreError;

/// The schedules of every replica. Every change is a compare-and-set on `version`.
#[async_trait]
pub trait ScheduleStore: Send + Sync + 'static {
    /// Adds a schedule (its `version` as given); [`StoreError::Duplicate`] if the id is taken.
    async fn insert(&self, schedule: &Schedule) -> Result<(), StoreError>;

    async fn get(&self, id: &str) -> Result<Option<Schedule>, StoreError>;

    /// Every schedule (only `owner`'s when given), by id.
    async fn list(&self, owner: Option<&str>) -> Result<Vec<Schedule>, StoreError>;

    /// How many schedules there are (only `owner`'s when given).
    async fn count(&self, owner: Option<&str>) -> Result<u64, StoreError>;

    /// Writes `schedule` (with its new `version`) if the stored one still has `expected`;
    /// `false` when another write came first (or it was deleted).
    async fn compare_and_set(&self, schedule: &Schedule, expected: i64)
    -> Result<bool, StoreError>;

    /// Deletes a schedule; `false` if there was none.
    async fn delete(&self, id: &str) -> Result<bool, StoreError>;

    /// The ids of up to `limit` schedules whose `due_at` is at or before `now`, the most
    /// overdue first.
    async fn due(&self, now: DateTime<Utc>, limit: u32) -> Result<Vec<String>, StoreError>;
}

/// Schedules in memory (tests, and servers without a database).
#[derive(Debug, Default)]
pub struct InMemoryScheduleStore {
    rows: Mutex<BTreeMap<String, Schedule>>,
}

impl InMemoryScheduleStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn rows(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Schedule>> {
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl ScheduleStore for InMemoryScheduleStore {
    async fn insert(&self, schedule: &Schedule) -> Result<(), StoreError> {
        let mut rows = self.rows();
        if rows.contains_key(&schedule.id) {
            return Err(StoreError::Duplicate(schedule.id.clone()));
        }
        rows.insert(schedule.id.clone(), schedule.clone());
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<Schedule>, StoreError> {
        Ok(self.rows().get(id).cloned())
    }

    async fn list(&self, owner: Option<&str>) -> Result<Vec<Schedule>, StoreError> {
        Ok(self
            .rows()
            .values()
            .filter(|s| owner.is_none() || s.owner.as_deref() == owner)
            .cloned()
            .collect())
    }

    async fn count(&self, owner: Option<&str>) -> Result<u64, StoreError> {
        Ok(self
            .rows()
            .values()
            .filter(|s| owner.is_none() || s.owner.as_deref() == owner)
            .count() as u64)
    }

    async fn compare_and_set(
        &self,
        schedule: &Schedule,
        expected: i64,
    ) -> Result<bool, StoreError> {
        let mut rows = self.rows();
        match rows.get_mut(&schedule.id) {
            Some(stored) if stored.version == expected => {
                *stored = schedule.clone();
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        Ok(self.rows().remove(id).is_some())
    }

    async fn due(&self, now: DateTime<Utc>, limit: u32) -> Result<Vec<String>, StoreError> {
        let mut due: Vec<(DateTime<Utc>, String)> = self
            .rows()
            .values()
            .filter_map(|s| s.due_at.filter(|d| *d <= now).map(|d| (d, s.id.clone())))
            .collect();
        due.sort();
        Ok(due
            .into_iter()
            .take(limit as usize)
            .map(|(_, id)| id)
            .collect())
    }
}
