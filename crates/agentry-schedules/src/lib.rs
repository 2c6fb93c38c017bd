//! Schedules: a workflow started with an input on a cron expression in a time zone.
//!
//! A [`Schedule`] is declared by the host in code ([`ScheduleSpec`], written to the store when
//! the [`Scheduler`] starts) or created by a client at run time. Its state says which ticks it
//! has handled (`cursor`), the tick waiting under `buffer-one` (`buffered`), how many ticks it
//! skipped, and its recent [`Fire`]s. Each fire is an execution whose id is the schedule's and
//! the fire time's ([`fire_execution_id`]): replicas racing for one tick, and a start tried
//! again, all reach the same execution (the engine's idempotent start), so a tick never runs
//! twice.
//!
//! What one pass fires is a pure function of the schedule, the time and whether an earlier fire
//! is still active ([`plan::plan`]); the [`Scheduler`] reads, decides, writes the decision with
//! a compare-and-set on the schedule's `version` (one replica's decision wins; the others
//! re-read it), then starts the fires it decided. A fire is recorded `pending` before its start
//! and `started` after it, so that a process dying in between leaves it to another, which starts
//! it again (idempotently) once [`PENDING_GRACE`] has passed: every decided fire is started at
//! least once, and runs once.

mod plan;
mod scheduler;
mod store;
#[cfg(test)]
mod tests;
mod timetable;

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use agentry_engine::engine::EngineError;
use agentry_engine::id::WorkflowId;
use agentry_engine::state::Status;
use agentry_engine::store::StoreError;

pub use plan::{MAX_FIRES_PER_PASS, MAX_TICKS_PER_PASS, Plan, plan};
pub use scheduler::{Backfill, PENDING_GRACE, Scheduler};
pub use store::{InMemoryScheduleStore, ScheduleStore};
pub use timetable::{MAX_CRON_LEN, MAX_TIMEZONE_LEN, Timetable};

/// The longest schedule id: it begins its fires' execution ids (`<id>@<fire time>`), which are
/// held to the one bound of ids ([`agentry_engine::id::MAX_KEY_CHARS`]), so it stays well under it.
pub const MAX_SCHEDULE_ID_LEN: usize = 100;
/// The largest input a schedule keeps (it is copied into each fire), as JSON.
pub const MAX_INPUT_BYTES: usize = 64 * 1024;
/// The most schedules a store keeps (each one is read by every replica as it falls due).
pub const MAX_SCHEDULES: u64 = 1000;
/// The most schedules one user keeps unless the host says otherwise
/// ([`Scheduler::with_max_per_user`]): a user cannot take every place of [`MAX_SCHEDULES`].
pub const DEFAULT_MAX_SCHEDULES_PER_USER: u64 = 100;
/// The most ticks one backfill fires.
pub const MAX_BACKFILL_TICKS: usize = 1000;
/// How many fires a schedule remembers (besides those still pending), the latest by fire time.
pub const RECENT_FIRES: usize = 20;
/// The shortest catch-up window: a tick is seen up to a second late in the normal course.
pub const MIN_CATCHUP_WINDOW: Duration = Duration::from_secs(1);
/// The longest catch-up window.
pub const MAX_CATCHUP_WINDOW: Duration = Duration::from_secs(30 * 86_400);
/// The catch-up window unless one is given.
pub const DEFAULT_CATCHUP_WINDOW: Duration = Duration::from_secs(60);

/// What a tick does while an earlier fire of the schedule is still running or suspended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Overlap {
    /// The tick is skipped (and counted).
    #[default]
    Skip,
    /// The first such tick waits and fires once the active fire ends; later ones are skipped.
    BufferOne,
    /// The tick fires anyway.
    Allow,
}

impl Overlap {
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::BufferOne => "buffer-one",
            Overlap::Allow => "allow",
        }
    }

    pub fn parse(s: &str) -> Option<Overlap> {
        [Overlap::Skip, Overlap::BufferOne, Overlap::Allow]
            .into_iter()
            .find(|o| o.as_str() == s)
    }
}

/// A schedule as a host declares it or a client asks for it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleSpec {
    /// `None`: a new UUID.
    pub id: Option<String>,
    pub workflow_id: WorkflowId,
    /// 5 fields, or 6 with seconds first.
    pub cron: String,
    /// An IANA time zone (`UTC` unless given).
    pub timezone: String,
    /// The input of every fire.
    pub input: Value,
    pub overlap: Overlap,
    /// Ticks missed (no server ran) up to this long ago are fired late; older ones are skipped.
    pub catchup_window: Duration,
    /// Created paused: it fires nothing until unpaused (a trigger still fires).
    pub paused: bool,
}

impl ScheduleSpec {
    /// A schedule `id` of `workflow_id` on `cron`, in UTC, with the input `{}`, overlap `skip`,
    /// a catch-up window of a minute, not paused.
    pub fn new(id: impl Into<String>, workflow_id: impl Into<WorkflowId>, cron: &str) -> Self {
        Self {
            id: Some(id.into()),
            workflow_id: workflow_id.into(),
            cron: cron.to_owned(),
            timezone: "UTC".to_owned(),
            input: Value::Object(Default::default()),
            overlap: Overlap::default(),
            catchup_window: DEFAULT_CATCHUP_WINDOW,
            paused: false,
        }
    }

    pub fn timezone(mut self, timezone: &str) -> Self {
        self.timezone = timezone.to_owned();
        self
    }

    pub fn input(mut self, input: Value) -> Self {
        self.input = input;
        self
    }

    pub fn overlap(mut self, overlap: Overlap) -> Self {
        self.overlap = overlap;
        self
    }

    pub fn catchup_window(mut self, window: Duration) -> Self {
        self.catchup_window = window;
        self
    }

    pub fn paused(mut self, paused: bool) -> Self {
        self.paused = paused;
        self
    }
}

/// Where a fire came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FireOrigin {
    /// A tick of the timetable (on time, or caught up within the window).
    Schedule,
    /// `POST /schedules/{id}/trigger`.
    Trigger,
    /// `POST /schedules/{id}/backfill`.
    Backfill,
}

/// Where a fire's execution stands, as far as the schedule knows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FireState {
    /// Decided, not yet started (any replica starts it once [`PENDING_GRACE`] has passed).
    Pending,
    /// Its execution was started (and was not seen to end yet).
    Started,
    /// Its execution was seen in a final status.
    Ended { status: Status },
    /// Its execution is gone (deleted by the retention).
    Gone,
    /// The start was refused (the workflow is no longer registered, the input no longer fits
    /// its schema, the id is another execution's): the fire is over.
    Failed { error: String },
}

/// One fire of a schedule: a tick, a trigger or a backfilled tick, and its execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fire {
    pub fire_time: DateTime<Utc>,
    pub execution_id: String,
    pub origin: FireOrigin,
    pub state: FireState,
    /// When it was decided (a pending fire is left to its decider until [`PENDING_GRACE`]
    /// after this).
    pub decided_at: DateTime<Utc>,
}

impl Fire {
    pub(crate) fn new(
        schedule_id: &str,
        fire_time: DateTime<Utc>,
        origin: FireOrigin,
        state: FireState,
        decided_at: DateTime<Utc>,
    ) -> Self {
        Self {
            fire_time,
            execution_id: fire_execution_id(schedule_id, fire_time),
            origin,
            state,
            decided_at,
        }
    }

    /// Pending, or started and not seen to end: it counts for the overlap policy.
    pub fn is_active(&self) -> bool {
        matches!(self.state, FireState::Pending | FireState::Started)
    }
}

/// A fire time as an execution id takes it: RFC 3339 in UTC, to the millisecond, without a
/// fraction when it has none (a tick: `2026-11-27T02:00:00Z`; a trigger:
/// `2026-11-27T02:00:00.250Z`).
pub fn fire_time_text(fire_time: DateTime<Utc>) -> String {
    truncate_to_millis(fire_time).to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// The execution of a schedule's fire: `<scheduleId>@<fire time>` (see [`fire_time_text`]).
/// One tick, one id, whoever starts it and however often.
pub fn fire_execution_id(schedule_id: &str, fire_time: DateTime<Utc>) -> String {
    format!("{schedule_id}@{}", fire_time_text(fire_time))
}

/// `t` without its sub-millisecond part.
pub(crate) fn truncate_to_millis(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(t.timestamp_millis()).unwrap_or(t)
}

/// A schedule and its state. Every change is a compare-and-set on `version`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Schedule {
    pub id: String,
    pub workflow_id: String,
    pub cron: String,
    pub timezone: String,
    pub input: Value,
    pub overlap: Overlap,
    #[serde(with = "millis")]
    pub catchup_window: Duration,
    /// The verified user who created it (its fires are theirs); `None`: the host's, or made
    /// without authentication.
    pub owner: Option<String>,
    /// Declared by the host in code (written again, definition only, at each start).
    pub declared: bool,
    pub paused: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Every tick at or before this one is handled (fired, buffered or skipped).
    pub cursor: DateTime<Utc>,
    /// The tick waiting for the active fire to end (`buffer-one`).
    pub buffered: Option<DateTime<Utc>>,
    /// Ticks skipped: beyond the catch-up window, or by the overlap policy.
    pub skipped: u64,
    /// Its pending fires and the [`RECENT_FIRES`] latest others, by fire time.
    pub fires: Vec<Fire>,
    /// When a scheduler should look at it next (`None`: not until something changes).
    pub due_at: Option<DateTime<Utc>>,
    #[serde(skip)]
    pub version: i64,
}

impl Schedule {
    /// Its timetable (stored schedules were checked when written).
    pub fn timetable(&self) -> Result<Timetable, ScheduleError> {
        Timetable::parse(&self.cron, &self.timezone)
    }

    /// Whether it has the definition of `other` (what a host declares: not its state).
    pub(crate) fn same_definition(&self, other: &Schedule) -> bool {
        (
            &self.workflow_id,
            &self.cron,
            &self.timezone,
            &self.input,
            self.overlap,
            self.catchup_window,
        ) == (
            &other.workflow_id,
            &other.cron,
            &other.timezone,
            &other.input,
            other.overlap,
            other.catchup_window,
        )
    }

    /// When a scheduler should look at it next: at once for a pending fire left by another
    /// process (after [`PENDING_GRACE`]), every second while a tick is buffered, else at its
    /// next tick; never while paused with nothing pending.
    pub fn next_due(&self, timetable: &Timetable, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let grace = chrono::Duration::from_std(PENDING_GRACE).unwrap_or_default();
        if let Some(first) = self
            .fires
            .iter()
            .filter(|f| f.state == FireState::Pending)
            .map(|f| f.decided_at + grace)
            .min()
        {
            return Some(first);
        }
        if self.paused {
            return None;
        }
        if self.buffered.is_some() {
            return Some(now + chrono::Duration::seconds(1));
        }
        timetable.next_after(self.cursor)
    }

    /// Adds `fire` (unless its execution is already there) and forgets the oldest ones beyond
    /// [`RECENT_FIRES`], never a pending one.
    pub(crate) fn record(&mut self, fire: Fire) {
        if self
            .fires
            .iter()
            .any(|f| f.execution_id == fire.execution_id)
        {
            return;
        }
        self.fires.push(fire);
        self.fires.sort_by_key(|f| f.fire_time);
        let mut settled = self
            .fires
            .iter()
            .filter(|f| f.state != FireState::Pending)
            .count();
        self.fires.retain(|f| {
            if settled > RECENT_FIRES && f.state != FireState::Pending {
                settled -= 1;
                false
            } else {
                true
            }
        });
    }
}

/// Why a schedule operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    #[error("Schedule {0} not found")]
    NotFound(String),
    #[error("Schedule {0} already exists")]
    Exists(String),
    /// A field of the schedule is wrong (named).
    #[error("Invalid schedule: {field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    /// A backfill's range is wrong (named).
    #[error("Invalid backfill: {field}: {message}")]
    InvalidBackfill {
        field: &'static str,
        message: String,
    },
    #[error(
        "There are {MAX_SCHEDULES} schedules already, the most this server keeps: delete one first"
    )]
    Limit,
    /// The creator keeps as many schedules as one user may (the number).
    #[error("You keep {0} schedules already, the most one user may: delete one first")]
    UserLimit(u64),
    #[error("Schedule {0} is being changed by too many writers at once")]
    Contention(String),
    /// A fire's start failed (a trigger's or a backfill's, answered to the client).
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ScheduleError {
    pub(crate) fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        Self::Invalid {
            field,
            message: message.into(),
        }
    }

    pub(crate) fn invalid_backfill(field: &'static str, message: impl Into<String>) -> Self {
        Self::InvalidBackfill {
            field,
            message: message.into(),
        }
    }
}

/// A duration stored as whole milliseconds.
mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}
