//! What is stored of an execution: its record (state, progress, lease) and one record per
//! step. The store ([`crate::store`]) writes and reads them; events and the engine carry them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use crate::queue::QueuePlace;
use crate::state::ExecutionState;

/// One execution of a workflow, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionRecord {
    pub id: String,
    pub workflow_id: String,
    /// The version of the workflow it started on (`None`: recorded before versions, continued
    /// on the newest). Set once at the insert.
    pub workflow_version: Option<String>,
    pub state: ExecutionState,
    /// The input the execution was started with.
    pub input: Value,
    /// The context map: caller-supplied entries, `userId` and `user` when known.
    pub context: Map<String, Value>,
    pub user_id: Option<String>,
    /// The verified user who started it (`None` when authentication was off): in strict mode
    /// only this user, or an admin, may read or act on it.
    pub owner: Option<String>,
    /// The process running it (while `running`), and the fencing epoch of that hold.
    pub lease: Option<Lease>,
    pub start_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub progress: Progress,
    /// Incremented by every write; the compare-and-set token.
    pub version: i64,
    /// The number of the last event in its log (0: none yet).
    pub last_event: i64,
    /// Its place in its workflow's queue (none when the workflow has no queue): the queue, key
    /// and priority are set at the insert; a dequeue sets `started_at`.
    pub queue: Option<QueuePlace>,
}

/// A process's hold on a running execution. Its expiry lives in the database only (renewed by
/// every write and heartbeat, compared with the database's clock), so no two hosts' clocks are
/// ever compared. Every claim bumps `epoch`: a process that lost its lease finds a newer epoch at
/// its next write and stops, so it can never commit for that execution again (fencing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The node id of the process holding it.
    pub node: String,
    /// Bumped by every claim.
    pub epoch: i64,
    /// How long the holder may stay silent before the lease expires.
    pub ttl: Duration,
}

impl Lease {
    /// Whether `other` is this very hold (same node, same epoch).
    pub fn is(&self, other: &Lease) -> bool {
        self.node == other.node && self.epoch == other.epoch
    }

    /// The ttl in whole milliseconds, as stored.
    pub fn ttl_ms(&self) -> i64 {
        i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX)
    }
}

/// How far an execution got.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Progress {
    /// Index of the next step to run.
    pub next_step: usize,
    /// Every step that started so far, by step id (children of `andAll`/`andRace`/`andWhen`
    /// included). Stored as rows of their own: a write stores only the records that changed.
    /// Shared (`Arc`), the map and each record: a copy for the next checkpoint, or for a step
    /// to read, copies a pointer (the map is copied once, by the write that changes it), and an
    /// unchanged record is recognised by its pointer.
    pub steps: Arc<StepRecords>,
}

/// Step records by step id.
pub type StepRecords = BTreeMap<String, Arc<StepRecord>>;

impl Progress {
    /// The step records, to change (copied first if shared).
    pub fn steps_mut(&mut self) -> &mut StepRecords {
        Arc::make_mut(&mut self.steps)
    }

    /// The ids of the step records that differ from `before`'s (added, changed or removed):
    /// what a write must store.
    pub fn changed_since<'a>(&'a self, before: &'a Progress) -> Vec<&'a str> {
        let changed = self
            .steps
            .iter()
            .filter(|(id, r)| {
                before
                    .steps
                    .get(*id)
                    .is_none_or(|b| !Arc::ptr_eq(b, r) && b != *r)
            })
            .map(|(id, _)| id.as_str());
        let removed = before
            .steps
            .keys()
            .filter(|id| !self.steps.contains_key(*id))
            .map(String::as_str);
        changed.chain(removed).collect()
    }
}

/// Where a step is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepStatus {
    /// Started (its start is recorded) and not finished yet, or interrupted.
    Running,
    /// It suspended the execution; a resume runs it again, in the same attempt.
    Suspended,
    Completed,
    /// An `andWhen` whose condition did not hold.
    Skipped,
    /// It failed the execution.
    Failed,
}

impl StepStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Running => "running",
            StepStatus::Suspended => "suspended",
            StepStatus::Completed => "completed",
            StepStatus::Skipped => "skipped",
            StepStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<StepStatus> {
        [
            StepStatus::Running,
            StepStatus::Suspended,
            StepStatus::Completed,
            StepStatus::Skipped,
            StepStatus::Failed,
        ]
        .into_iter()
        .find(|v| v.as_str() == s)
    }
}

/// The stored record of one step.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRecord {
    pub status: StepStatus,
    /// How many times the step was started: 1, or more when a crash, a lost lease or a
    /// shutdown interrupted an earlier attempt (which may or may not have run to its end).
    /// Children of a composite step share its attempt.
    pub attempt: u32,
    /// The composite step (`andAll`, `andRace`, `andWhen`) this one is a child of.
    pub parent: Option<String>,
    pub input: Value,
    /// `None` while running.
    pub output: Option<Value>,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    /// Its failed attempts that were tried again (a step with retries).
    pub failures: Vec<AttemptFailure>,
}

/// One failed attempt of a step.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptFailure {
    pub attempt: u32,
    pub error: String,
    pub at: DateTime<Utc>,
    /// The attempt failed the execution, which an operator then retried
    /// ([`crate::Engine::retry`]): the attempts after it have a fresh budget.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub execution_retried: bool,
}

impl StepRecord {
    /// A step starting now, for the `attempt`th time.
    pub fn started(input: Value, attempt: u32, at: DateTime<Utc>) -> Self {
        Self {
            status: StepStatus::Running,
            attempt,
            parent: None,
            input,
            output: None,
            started_at: at,
            ended_at: None,
            failures: Vec::new(),
        }
    }

    /// This record finished with `output` (`ran` false for a skipped `andWhen`).
    pub fn finished(mut self, output: Value, ran: bool, at: DateTime<Utc>) -> Self {
        self.status = if ran {
            StepStatus::Completed
        } else {
            StepStatus::Skipped
        };
        self.output = Some(output);
        self.ended_at = Some(at);
        self
    }

    /// The first attempt of its current budget of retries: 1, or the one after the attempt
    /// that failed the execution last, when the execution was retried since.
    pub fn budget_start(&self) -> u32 {
        self.failures
            .iter()
            .filter(|f| f.execution_retried)
            .map(|f| f.attempt + 1)
            .max()
            .unwrap_or(1)
    }

    /// Whether it finished with an output (completed or skipped): a re-run reuses it.
    pub fn is_finished(&self) -> bool {
        matches!(self.status, StepStatus::Completed | StepStatus::Skipped)
    }
}

/// The value of the derived `waiting_for` of a suspended execution whose step waits for the
/// event `name` with `key`: what a lookup by key compares (unambiguous: a JSON pair).
pub fn waiting_for(name: &str, key: &str) -> String {
    Value::Array(vec![Value::from(name), Value::from(key)]).to_string()
}

/// The `waiting_for` of a step that waits for the first of several events by key: the JSON
/// list of their pairs (`[["a","k"],["b","*"]]`, told from one pair by its `[[`). A lookup
/// finds it by [`waiting_for_among`].
pub fn waiting_for_several(pairs: &[(&str, &str)]) -> String {
    let pair = |(name, key): &(&str, &str)| json!([name, key]);
    Value::Array(pairs.iter().map(pair).collect()).to_string()
}

/// The SQL `LIKE` pattern (escaped with `\`) that finds the pair of `name` and `key` in a
/// [`waiting_for_several`]. (A pair holds its strings as JSON, whose quotes are escaped:
/// the pair's text appears in the list only as one of its pairs.)
pub fn waiting_for_among(name: &str, key: &str) -> String {
    let mut pattern = String::from("%");
    for c in waiting_for(name, key).chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

impl ExecutionRecord {
    /// The events and keys it waits for, as [`waiting_for`] (one) or [`waiting_for_several`]
    /// write them (suspended at a step that waits for events by key).
    pub fn waiting_for(&self) -> Option<String> {
        let wait = self.state.suspension()?.event.as_ref()?;
        let awaited = wait.awaited();
        let pairs: Vec<(&str, &str)> = awaited
            .iter()
            .filter_map(|a| Some((a.name.as_str(), a.key.as_deref()?)))
            .collect();
        match pairs.as_slice() {
            [] => None,
            [(name, key)] => Some(waiting_for(name, key)),
            several => Some(waiting_for_several(several)),
        }
    }

    /// Whether it is suspended waiting for `name` sent by key with `key`.
    pub fn awaits_by_key(&self, name: &str, key: &str) -> bool {
        self.state
            .suspension()
            .and_then(|s| s.event.as_ref())
            .is_some_and(|w| w.awaits_by_key(name, key))
    }
}

/// The key of a workflow version that claims and timers compare (`<id>@<version>`, and
/// `<id>@` for the executions recorded before versions).
pub fn workflow_key(workflow_id: &str, version: Option<&str>) -> String {
    format!("{workflow_id}@{}", version.unwrap_or_default())
}

impl ExecutionRecord {
    /// Its workflow version's key ([`workflow_key`]).
    pub fn workflow_key(&self) -> String {
        workflow_key(&self.workflow_id, self.workflow_version.as_deref())
    }
}
