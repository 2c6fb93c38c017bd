//! Queues with flow control: a workflow may declare one ([`Queue`]); its executions then enter
//! as `queued` and are started (dequeued) by whichever replica has a free slot, within the
//! queue's limits: a global `concurrency`, a per-key limit on a value of the input
//! (`concurrency_key`), a sliding-window `rate_limit` (global or per key). Higher priority
//! first, first in first out within a priority and key, and keys served round-robin.
//!
//! The rules of a dequeue pass are here, once ([`choose`]); a store reads what they need
//! (the slots in use, the starts in the window, the candidates) inside the pass's lock and
//! writes what they chose.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

/// The priorities a request or an input may give (higher first).
pub const PRIORITY_RANGE: std::ops::RangeInclusive<i64> = -1000..=1000;

/// How long `/execute` waits for a queued execution by default before it answers 202.
pub const DEFAULT_EXECUTE_WAIT: Duration = Duration::from_secs(30);

/// How many executions one dequeue pass starts at most.
pub const MAX_BATCH: u32 = 256;

/// A limit on starts: at most `limit` in any window of `period` (a sliding window), counted
/// over the whole queue or per key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub limit: u32,
    pub period: Duration,
    pub per_key: bool,
}

/// The key of a queue: a value of the input, whose executions take turns with the other keys'
/// and, with a `limit`, have at most that many in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConcurrencyKey {
    /// A JSON pointer into the input (`/customerId`).
    pub pointer: String,
    pub limit: Option<u32>,
}

/// A workflow's queue, as the host declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queue {
    name: String,
    concurrency: Option<u32>,
    key: Option<ConcurrencyKey>,
    rate_limit: Option<RateLimit>,
    priority: Option<String>,
    execute_wait: Duration,
}

impl Queue {
    /// A queue named `name` (its name in `GET /queues/{name}` and the metrics), without limits
    /// until some are set.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            concurrency: None,
            key: None,
            rate_limit: None,
            priority: None,
            execute_wait: DEFAULT_EXECUTE_WAIT,
        }
    }

    /// At most `n` executions in flight (running or suspended) across all replicas.
    pub fn concurrency(mut self, n: u32) -> Self {
        self.concurrency = Some(n);
        self
    }

    /// At most `limit` in flight per value of the input at the JSON pointer `pointer` (the
    /// keys take turns).
    pub fn concurrency_key(mut self, pointer: impl Into<String>, limit: u32) -> Self {
        self.key = Some(ConcurrencyKey {
            pointer: pointer.into(),
            limit: Some(limit),
        });
        self
    }

    /// Keys on the value of the input at the JSON pointer `pointer` without a per-key limit:
    /// the keys only take turns (round-robin), so that a busy one cannot starve the others.
    pub fn key(mut self, pointer: impl Into<String>) -> Self {
        self.key = Some(ConcurrencyKey {
            pointer: pointer.into(),
            limit: None,
        });
        self
    }

    /// At most `limit` starts in any window of `period`, over the whole queue. A queue has one
    /// rate limit: this replaces a per-key one set before.
    pub fn rate_limit(mut self, limit: u32, period: Duration) -> Self {
        self.rate_limit = Some(RateLimit {
            limit,
            period,
            per_key: false,
        });
        self
    }

    /// At most `limit` starts in any window of `period`, per key (needs a key: `key` or
    /// `concurrency_key`). A queue has one rate limit: this replaces a global one set before.
    pub fn rate_limit_per_key(mut self, limit: u32, period: Duration) -> Self {
        self.rate_limit = Some(RateLimit {
            limit,
            period,
            per_key: true,
        });
        self
    }

    /// The JSON pointer of an integer in the input that gives the priority (a request's
    /// `options.priority` wins).
    pub fn priority(mut self, pointer: impl Into<String>) -> Self {
        self.priority = Some(pointer.into());
        self
    }

    /// How long `/execute` waits for the result before it answers 202 (30 s by default).
    pub fn execute_wait(mut self, wait: Duration) -> Self {
        self.execute_wait = wait;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn concurrency_limit(&self) -> Option<u32> {
        self.concurrency
    }

    pub fn key_rule(&self) -> Option<&ConcurrencyKey> {
        self.key.as_ref()
    }

    pub fn rate(&self) -> Option<RateLimit> {
        self.rate_limit
    }

    pub fn priority_pointer(&self) -> Option<&str> {
        self.priority.as_deref()
    }

    pub fn wait(&self) -> Duration {
        self.execute_wait
    }

    /// Why this declaration cannot work, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if !crate::id::is_valid_id(&self.name) {
            return Err(format!(
                "queue name {:?} is not usable in a path (use letters, digits, '-', '_', '.')",
                self.name
            ));
        }
        let pointer_ok = |p: &str| p.is_empty() || p.starts_with('/');
        if self.concurrency == Some(0) || self.key.as_ref().is_some_and(|k| k.limit == Some(0)) {
            return Err("a concurrency limit of 0 would never start anything".into());
        }
        if let Some(k) = &self.key
            && !pointer_ok(&k.pointer)
        {
            return Err(format!(
                "concurrency key {:?} is not a JSON pointer",
                k.pointer
            ));
        }
        if let Some(p) = &self.priority
            && !pointer_ok(p)
        {
            return Err(format!("priority {p:?} is not a JSON pointer"));
        }
        if let Some(r) = self.rate_limit {
            if r.limit == 0 || r.period.is_zero() {
                return Err("a rate limit needs a limit and a period above 0".into());
            }
            if r.per_key && self.key.is_none() {
                return Err("a rate limit per key needs a concurrency key".into());
            }
        }
        Ok(())
    }

    /// Where an execution with `input` (and the request's `priority`, if any) stands in this
    /// queue, entering it at `now`; refused when the key is too long or the priority out of
    /// range.
    pub fn place(
        &self,
        input: &Value,
        priority: Option<i64>,
        now: DateTime<Utc>,
    ) -> Result<QueuePlace, String> {
        let key = match &self.key {
            None => None,
            Some(k) => Some(key_of(input.pointer(&k.pointer))?),
        };
        let priority = match priority {
            Some(p) => p,
            None => match self.priority.as_deref().and_then(|p| input.pointer(p)) {
                None | Some(Value::Null) => 0,
                Some(v) => v.as_i64().ok_or_else(|| {
                    format!("the priority in the input must be an integer, found {v}")
                })?,
            },
        };
        if !PRIORITY_RANGE.contains(&priority) {
            return Err(format!(
                "priority {priority} is out of range ({}..={})",
                PRIORITY_RANGE.start(),
                PRIORITY_RANGE.end()
            ));
        }
        Ok(QueuePlace {
            name: self.name.clone(),
            key,
            priority,
            queued_at: now,
            started_at: None,
        })
    }
}

/// The concurrency key of a value: a string as it is, a number or a boolean as its JSON text;
/// missing or null: the empty key (those executions share one key).
fn key_of(value: Option<&Value>) -> Result<String, String> {
    let key = match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v @ (Value::Number(_) | Value::Bool(_))) => v.to_string(),
        Some(_) => {
            return Err("the concurrency key in the input must be a string or a number".into());
        }
    };
    crate::id::check_key("the concurrency key", &key)?;
    Ok(key)
}

/// An execution's place in its workflow's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuePlace {
    pub name: String,
    /// The concurrency key's value (none when the queue has no key).
    pub key: Option<String>,
    pub priority: i64,
    /// When it entered the queue (again, for a retry).
    pub queued_at: DateTime<Utc>,
    /// When a dequeue started it (by the database's clock).
    pub started_at: Option<DateTime<Utc>>,
}

/// A queued execution a pass may start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub id: String,
    /// The key (`""` for none).
    pub key: String,
    pub priority: i64,
    pub queued_at: DateTime<Utc>,
    /// The pass that served its key last (0: never).
    pub served: i64,
}

/// What a pass knows of its queue: the slots in use and the starts in the rate window, per key
/// (`""` for none).
#[derive(Debug, Clone, Default)]
pub struct Load {
    pub in_flight: HashMap<String, u64>,
    pub in_window: HashMap<String, u64>,
}

impl Load {
    fn total(counts: &HashMap<String, u64>) -> u64 {
        counts.values().sum()
    }

    /// How many a pass may start at most, before the per-key rules: the free global slots, the
    /// free starts of the global window, and `max`.
    pub fn room(&self, queue: &Queue, max: u32) -> u32 {
        let mut room = u64::from(max);
        if let Some(c) = queue.concurrency {
            room = room.min(u64::from(c).saturating_sub(Self::total(&self.in_flight)));
        }
        if let Some(r) = queue.rate_limit
            && !r.per_key
        {
            room = room.min(u64::from(r.limit).saturating_sub(Self::total(&self.in_window)));
        }
        room as u32
    }

    /// The keys that may start nothing more now (at their limit, or their window full).
    pub fn full_keys(&self, queue: &Queue) -> Vec<String> {
        let mut full: Vec<String> = Vec::new();
        if let Some(limit) = queue.key.as_ref().and_then(|k| k.limit) {
            full.extend(
                self.in_flight
                    .iter()
                    .filter(|(_, n)| **n >= u64::from(limit))
                    .map(|(key, _)| key.clone()),
            );
        }
        if let Some(r) = queue.rate_limit
            && r.per_key
        {
            full.extend(
                self.in_window
                    .iter()
                    .filter(|(_, n)| **n >= u64::from(r.limit))
                    .map(|(key, _)| key.clone()),
            );
        }
        full.sort();
        full.dedup();
        full
    }
}

/// The one rule of a dequeue pass: which of `candidates` start now, in order. Higher priority
/// first; within a priority, keys take turns (each key's first, then each key's second, ...),
/// the key served least recently first; within a key, first in first out. A start never takes
/// the queue over its concurrency, a key over its limit, or a window over its rate.
pub fn choose(queue: &Queue, load: &Load, candidates: &[Candidate], max: u32) -> Vec<String> {
    let mut room = load.room(queue, max);
    if room == 0 {
        return Vec::new();
    }
    let mut ordered: Vec<&Candidate> = candidates.iter().collect();
    ordered.sort_by(|a, b| (b.priority, a.queued_at, &a.id).cmp(&(a.priority, b.queued_at, &b.id)));
    // Each one's turn within its key and priority.
    let mut turns: HashMap<(&str, i64), u32> = HashMap::new();
    let mut ranked: Vec<(u32, &Candidate)> = ordered
        .into_iter()
        .map(|c| {
            let turn = turns.entry((c.key.as_str(), c.priority)).or_insert(0);
            *turn += 1;
            (*turn, c)
        })
        .collect();
    ranked.sort_by(|(ta, a), (tb, b)| {
        (b.priority, *ta, a.served, a.queued_at, &a.id).cmp(&(
            a.priority,
            *tb,
            b.served,
            b.queued_at,
            &b.id,
        ))
    });
    let mut in_flight = load.in_flight.clone();
    let mut in_window = load.in_window.clone();
    let mut chosen = Vec::new();
    for (_, c) in ranked {
        if room == 0 {
            break;
        }
        let flying = in_flight.entry(c.key.clone()).or_insert(0);
        let key_limit = queue.key.as_ref().and_then(|k| k.limit);
        if key_limit.is_some_and(|limit| *flying >= u64::from(limit)) {
            continue;
        }
        let windowed = in_window.entry(c.key.clone()).or_insert(0);
        if queue
            .rate_limit
            .is_some_and(|r| r.per_key && *windowed >= u64::from(r.limit))
        {
            continue;
        }
        *flying += 1;
        *windowed += 1;
        room -= 1;
        chosen.push(c.id.clone());
    }
    chosen
}

/// How many of a queue's executions are in each status, per key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueCount {
    /// `None` for a queue without a key.
    pub key: Option<String>,
    pub status: crate::state::Status,
    pub count: u64,
    /// The oldest `queued_at` among them.
    pub oldest: Option<DateTime<Utc>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    fn cand(id: &str, key: &str, priority: i64, queued: i64, served: i64) -> Candidate {
        Candidate {
            id: id.into(),
            key: key.into(),
            priority,
            queued_at: at(queued),
            served,
        }
    }

    fn load(in_flight: &[(&str, u64)], in_window: &[(&str, u64)]) -> Load {
        let map = |v: &[(&str, u64)]| v.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect();
        Load {
            in_flight: map(in_flight),
            in_window: map(in_window),
        }
    }

    #[test]
    fn the_global_limit_counts_what_is_in_flight() {
        let q = Queue::new("q").concurrency(3);
        let c: Vec<_> = (0..5)
            .map(|i| cand(&format!("e{i}"), "", 0, i, 0))
            .collect();
        assert_eq!(choose(&q, &load(&[("", 2)], &[]), &c, 100), vec!["e0"]);
        assert!(choose(&q, &load(&[("", 3)], &[]), &c, 100).is_empty());
        assert_eq!(choose(&q, &load(&[], &[]), &c, 2), vec!["e0", "e1"]);
    }

    #[test]
    fn keys_take_turns_and_the_least_recently_served_goes_first() {
        let q = Queue::new("q").concurrency(1).concurrency_key("/k", 1);
        // Twenty of a busy key queued before two of a quiet one: the quiet one, never
        // served, goes before the busy one's next.
        let mut c: Vec<_> = (0..20)
            .map(|i| cand(&format!("busy{i}"), "busy", 0, i, 7))
            .collect();
        c.push(cand("quiet0", "quiet", 0, 30, 0));
        c.push(cand("quiet1", "quiet", 0, 31, 0));
        assert_eq!(choose(&q, &load(&[], &[]), &c, 100), vec!["quiet0"]);
        // Without a global limit, each key's first, in turn.
        let q = Queue::new("q").concurrency_key("/k", 1);
        assert_eq!(
            choose(&q, &load(&[], &[]), &c, 100),
            vec!["quiet0", "busy0"]
        );
        // A key without a limit takes turns too.
        let q = Queue::new("q").concurrency(3).key("/k");
        assert_eq!(
            choose(&q, &load(&[], &[]), &c, 100),
            vec!["quiet0", "busy0", "quiet1"]
        );
    }

    #[test]
    fn higher_priority_first_then_first_in_first_out() {
        let q = Queue::new("q").concurrency(2);
        let c = vec![
            cand("low-old", "", 0, 1, 0),
            cand("high-new", "", 5, 9, 0),
            cand("high-old", "", 5, 3, 0),
        ];
        assert_eq!(
            choose(&q, &load(&[], &[]), &c, 100),
            vec!["high-old", "high-new"]
        );
    }

    #[test]
    fn a_key_at_its_limit_waits_and_the_others_go() {
        let q = Queue::new("q").concurrency(4).concurrency_key("/k", 1);
        let c = vec![
            cand("a1", "a", 0, 1, 0),
            cand("a2", "a", 0, 2, 0),
            cand("b1", "b", 0, 3, 0),
        ];
        assert_eq!(choose(&q, &load(&[("a", 1)], &[]), &c, 100), vec!["b1"]);
        assert_eq!(choose(&q, &load(&[], &[]), &c, 100), vec!["a1", "b1"]);
        assert_eq!(load(&[("a", 1), ("b", 0)], &[]).full_keys(&q), vec!["a"]);
    }

    #[test]
    fn the_rate_window_bounds_the_starts() {
        let q = Queue::new("q").rate_limit(5, Duration::from_secs(1));
        let c: Vec<_> = (0..9)
            .map(|i| cand(&format!("e{i}"), "", 0, i, 0))
            .collect();
        assert_eq!(choose(&q, &load(&[], &[("", 3)]), &c, 100).len(), 2);
        assert!(choose(&q, &load(&[], &[("", 5)]), &c, 100).is_empty());
        let q = Queue::new("q")
            .concurrency_key("/k", 100)
            .rate_limit_per_key(1, Duration::from_secs(1));
        let c = vec![
            cand("a1", "a", 0, 1, 0),
            cand("a2", "a", 0, 2, 0),
            cand("b1", "b", 0, 3, 0),
        ];
        assert_eq!(choose(&q, &load(&[], &[("b", 1)]), &c, 100), vec!["a1"]);
    }

    #[test]
    fn a_place_reads_the_key_and_the_priority() {
        let q = Queue::new("q")
            .concurrency_key("/customer", 1)
            .priority("/p");
        let p = q
            .place(&json!({"customer": "c1", "p": 7}), None, at(0))
            .unwrap();
        assert_eq!((p.key.as_deref(), p.priority), (Some("c1"), 7));
        let p = q.place(&json!({"customer": 42}), Some(-3), at(0)).unwrap();
        assert_eq!((p.key.as_deref(), p.priority), (Some("42"), -3));
        let p = q.place(&json!({}), None, at(0)).unwrap();
        assert_eq!((p.key.as_deref(), p.priority), (Some(""), 0));
        assert!(q.place(&json!({"customer": {}}), None, at(0)).is_err());
        assert!(q.place(&json!({"p": 1.5}), None, at(0)).is_err());
        assert!(q.place(&json!({}), Some(5000), at(0)).is_err());
        assert!(
            q.place(&json!({"customer": "x".repeat(300)}), None, at(0))
                .is_err()
        );
    }

    #[test]
    fn declarations_that_cannot_work_are_refused() {
        assert!(Queue::new("q").concurrency(0).check().is_err());
        assert!(Queue::new("bad name").check().is_err());
        assert!(
            Queue::new("q")
                .concurrency_key("customer", 1)
                .check()
                .is_err()
        );
        assert!(
            Queue::new("q")
                .rate_limit_per_key(1, Duration::from_secs(1))
                .check()
                .is_err()
        );
        assert!(
            Queue::new("q")
                .rate_limit(0, Duration::from_secs(1))
                .check()
                .is_err()
        );
        assert!(
            Queue::new("q")
                .concurrency(4)
                .concurrency_key("/c", 1)
                .rate_limit(50, Duration::from_secs(1))
                .check()
                .is_ok()
        );
    }
}
