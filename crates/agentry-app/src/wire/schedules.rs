//! Schedules: the bodies of `POST /schedules` and of a backfill, a schedule's state (its next
//! fire times, its recent fires with their executions' statuses, its skips), the list, and the
//! answers of trigger, backfill and delete.

use std::time::Duration;

use agentry_engine::Status;
use agentry_schedules::{Fire, FireOrigin, FireState, Overlap, Schedule};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::Timestamp;

/// The body of `POST /schedules`. Each field's value is checked by the use case, which names
/// the field it refuses (`invalid_schedule`).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleRequest {
    /// The schedule's id (default: a new UUID): its fires are the executions
    /// `<id>@<fire time>`.
    #[schema(pattern = "^[A-Za-z0-9._-]{1,100}$", example = "nightly-report-eu")]
    pub id: Option<String>,
    /// The workflow each fire starts.
    #[schema(example = "nightly-report")]
    pub workflow_id: String,
    /// A cron expression of 5 fields (`minute hour day month weekday`), or 6 with seconds
    /// first (`*/10 * * * * *`).
    #[schema(max_length = 128, example = "0 2 * * *")]
    pub cron: String,
    /// The IANA time zone the expression is read in (default `UTC`).
    #[schema(max_length = 64, example = "Europe/Paris")]
    pub timezone: Option<String>,
    /// The input of every fire, valid against the workflow's input schema (default `{}`; at
    /// most 64 KiB of JSON).
    #[schema(value_type = Option<Object>)]
    pub input: Option<Value>,
    /// What a tick does while an earlier fire is still running or suspended (default `skip`).
    #[schema(value_type = Option<OverlapPolicy>)]
    pub overlap: Option<String>,
    /// Ticks missed while no server ran are fired late when at most this old, skipped (and
    /// counted) beyond: `30s`, `1m`, `1h`, `1d` (default `1m`; from 1 s to 30 days).
    #[schema(max_length = 32, example = "1h")]
    pub catchup_window: Option<String>,
    /// Created paused: it fires nothing until unpaused (a trigger still fires).
    pub paused: Option<bool>,
}

/// The body of a backfill: the ticks from `from` to `to` (both included, at most 1000, `to` not
/// in the future).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackfillRequest {
    /// RFC 3339.
    #[schema(max_length = 64, example = "2026-11-20T00:00:00Z")]
    pub from: String,
    /// RFC 3339.
    #[schema(max_length = 64, example = "2026-11-27T00:00:00Z")]
    pub to: String,
}

/// What a tick does while an earlier fire of the schedule is still running or suspended:
/// `skip` (skipped and counted), `buffer-one` (the first waits and fires when the earlier one
/// ends; later ones are skipped), `allow` (fires anyway).
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OverlapPolicy {
    Skip,
    BufferOne,
    Allow,
}

impl From<Overlap> for OverlapPolicy {
    fn from(o: Overlap) -> Self {
        match o {
            Overlap::Skip => Self::Skip,
            Overlap::BufferOne => Self::BufferOne,
            Overlap::Allow => Self::Allow,
        }
    }
}

/// Where a fire came from: a tick of the timetable (on time or caught up), a trigger, a
/// backfill.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FireKind {
    Schedule,
    Trigger,
    Backfill,
}

impl From<FireOrigin> for FireKind {
    fn from(o: FireOrigin) -> Self {
        match o {
            FireOrigin::Schedule => Self::Schedule,
            FireOrigin::Trigger => Self::Trigger,
            FireOrigin::Backfill => Self::Backfill,
        }
    }
}

/// Where a fire stands: `pending` (decided, not started yet), its execution's status
/// (`running`, `suspended`, `completed`, `error`, `cancelled`), `started` (in a list: started,
/// its status is in the schedule's own state), `gone` (its execution was deleted) or `failed`
/// (its start was refused: `error` says why).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum FireStatus {
    Pending,
    Started,
    Running,
    Suspended,
    Completed,
    Error,
    Cancelled,
    Gone,
    Failed,
}

impl From<Status> for FireStatus {
    fn from(s: Status) -> Self {
        match s {
            Status::Idle | Status::Queued | Status::Running => Self::Running,
            Status::Suspended => Self::Suspended,
            Status::Completed => Self::Completed,
            Status::Error => Self::Error,
            Status::Cancelled => Self::Cancelled,
        }
    }
}

/// One fire of a schedule and its execution.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FireView {
    /// The tick (or the trigger's moment).
    pub fire_time: Timestamp,
    /// `<scheduleId>@<fire time>`.
    #[schema(example = "nightly-report@2026-11-27T02:00:00Z")]
    pub execution_id: String,
    pub origin: FireKind,
    pub status: FireStatus,
    /// Why its start was refused (`failed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub error: Option<String>,
}

impl FireView {
    /// `fire` with its execution's status now (`live`: read; `None`: as the schedule knows it).
    pub fn new(fire: &Fire, live: Option<Option<Status>>) -> Self {
        let (status, error) = match (&fire.state, live) {
            (FireState::Pending, _) => (FireStatus::Pending, None),
            (FireState::Failed { error }, _) => (FireStatus::Failed, Some(error.clone())),
            (FireState::Gone, _) | (_, Some(None)) => (FireStatus::Gone, None),
            (_, Some(Some(status))) => (status.into(), None),
            (FireState::Ended { status }, None) => ((*status).into(), None),
            (FireState::Started, None) => (FireStatus::Started, None),
        };
        Self {
            fire_time: fire.fire_time.into(),
            execution_id: fire.execution_id.clone(),
            origin: fire.origin.into(),
            status,
            error,
        }
    }
}

/// A schedule: its definition and its state.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleView {
    #[schema(example = "nightly-report")]
    pub id: String,
    pub workflow_id: String,
    pub cron: String,
    pub timezone: String,
    #[schema(value_type = Object)]
    pub input: Value,
    pub overlap: OverlapPolicy,
    /// How late a missed tick may still fire (`30s`, `1m`, `1h`, `1d`).
    #[schema(example = "1m")]
    pub catchup_window: String,
    pub paused: bool,
    /// Declared by the host in code (a delete lasts until the server starts again).
    pub declared: bool,
    /// The user who created it (its fires are theirs); null: the host's, or made without
    /// authentication.
    #[schema(required = true)]
    pub owner: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Its next fire times (none while paused).
    pub next_fires: Vec<Timestamp>,
    /// A tick waiting for the active fire to end (`buffer-one`).
    #[schema(required = true)]
    pub buffered: Option<Timestamp>,
    /// Ticks skipped: older than the catch-up window, or by the overlap policy.
    pub skipped: u64,
    /// Its recent fires (the pending ones and the 20 latest others), latest first.
    pub fires: Vec<FireView>,
}

impl ScheduleView {
    /// `schedule` with its next fire times and its fires (with `live`, their executions'
    /// statuses read now, in the order of `schedule.fires`).
    pub fn new(
        schedule: &Schedule,
        next_fires: Vec<chrono::DateTime<chrono::Utc>>,
        live: Option<Vec<Option<Status>>>,
    ) -> Self {
        let mut live = live.map(Vec::into_iter);
        let mut fires: Vec<FireView> = schedule
            .fires
            .iter()
            .map(|f| FireView::new(f, live.as_mut().map(|l| l.next().flatten())))
            .collect();
        fires.reverse();
        Self {
            id: schedule.id.clone(),
            workflow_id: schedule.workflow_id.clone(),
            cron: schedule.cron.clone(),
            timezone: schedule.timezone.clone(),
            input: schedule.input.clone(),
            overlap: schedule.overlap.into(),
            catchup_window: duration_text(schedule.catchup_window),
            paused: schedule.paused,
            declared: schedule.declared,
            owner: schedule.owner.clone(),
            created_at: schedule.created_at.into(),
            updated_at: schedule.updated_at.into(),
            next_fires: next_fires.into_iter().map(Timestamp).collect(),
            buffered: schedule.buffered.map(Timestamp),
            skipped: schedule.skipped,
            fires,
        }
    }
}

/// `data` of `GET /schedules`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleList {
    /// By id. A fire's status is as the schedule last saw it (`started`: read the schedule for
    /// its execution's status now).
    pub schedules: Vec<ScheduleView>,
}

/// `data` of a backfill.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackfillResult {
    /// The ticks of the range.
    pub ticks: usize,
    /// The fires it started.
    pub started: Vec<FireView>,
    /// The ticks whose execution existed already (fired before, or by an earlier backfill).
    pub existing: usize,
}

/// `data` of a delete.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleDeleted {
    pub id: String,
    /// Always `true`.
    pub deleted: bool,
}

/// A duration as a schedule's body writes it: whole days, hours, minutes or seconds.
pub fn duration_text(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        s if s > 0 && s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s > 0 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s > 0 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_written_in_their_largest_whole_unit() {
        for (secs, text) in [
            (30, "30s"),
            (60, "1m"),
            (90, "90s"),
            (3600, "1h"),
            (86_400, "1d"),
        ] {
            let d = Duration::from_secs(secs);
            assert_eq!(duration_text(d), text);
            assert_eq!(agentry_auth::parse_duration(text).unwrap(), d);
        }
    }
}
