//! The schedule use cases: create, list, read, delete, pause, unpause, trigger and backfill.
//! Strict mode's ownership applies as for executions, except that a schedule the caller may
//! not touch is not found (404), never revealed: its creator (or an admin) sees it; its fires
//! are its owner's executions, whoever triggers them.

use agentry_engine::WorkflowId;
use agentry_schedules::{DEFAULT_CATCHUP_WINDOW, Overlap, Schedule, ScheduleError, ScheduleSpec};
use chrono::{DateTime, Utc};

use crate::App;
use crate::caller::Caller;
use crate::error::AppError;
use crate::wire::schedules::{
    BackfillRequest, BackfillResult, FireView, ScheduleDeleted, ScheduleList, ScheduleRequest,
    ScheduleView,
};

/// How many next fire times a schedule's state shows.
const NEXT_FIRES: usize = 5;
/// The longest duration text read (`catchupWindow`), and the longest timestamp (a backfill's).
const MAX_SHORT_TEXT: usize = 64;

impl ScheduleRequest {
    /// The schedule it asks for, or the `invalid_schedule` naming the field at fault.
    fn spec(self) -> Result<ScheduleSpec, AppError> {
        let invalid = |field: &'static str, message: String| {
            AppError::schedule(ScheduleError::Invalid { field, message })
        };
        let overlap = match self.overlap.as_deref() {
            None => Overlap::default(),
            Some(o) => Overlap::parse(o).ok_or_else(|| {
                invalid(
                    "overlap",
                    format!("{:?} is not skip, buffer-one or allow", short(o)),
                )
            })?,
        };
        let catchup_window = match self.catchup_window.as_deref() {
            None => DEFAULT_CATCHUP_WINDOW,
            Some(w) if w.len() > MAX_SHORT_TEXT => {
                return Err(invalid(
                    "catchupWindow",
                    format!("at most {MAX_SHORT_TEXT} characters"),
                ));
            }
            Some(w) => agentry_auth::parse_duration(w).map_err(|e| {
                invalid("catchupWindow", format!("{e} (write e.g. 30s, 1m, 1h, 1d)"))
            })?,
        };
        Ok(ScheduleSpec {
            id: self.id,
            workflow_id: WorkflowId::from(self.workflow_id),
            cron: self.cron,
            timezone: self.timezone.unwrap_or_else(|| "UTC".to_owned()),
            input: self
                .input
                .unwrap_or_else(|| serde_json::Value::Object(Default::default())),
            overlap,
            catchup_window,
            paused: self.paused.unwrap_or(false),
        })
    }
}

/// At most a few dozen characters of a client's text, for a message.
fn short(text: &str) -> &str {
    let end = text
        .char_indices()
        .nth(MAX_SHORT_TEXT)
        .map_or(text.len(), |(i, _)| i);
    &text[..end]
}

/// A backfill's bound, or the `invalid_backfill` naming it.
fn instant(field: &'static str, text: &str) -> Result<DateTime<Utc>, AppError> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            AppError::schedule(ScheduleError::InvalidBackfill {
                field,
                message: format!("{:?} is not an RFC 3339 time ({e})", short(text)),
            })
        })
}

impl App {
    /// A schedule's state: its next fire times and its fires (with their executions' statuses
    /// read now when `live`).
    async fn view(&self, schedule: &Schedule, live: bool) -> Result<ScheduleView, AppError> {
        let next_fires = if schedule.paused {
            Vec::new()
        } else {
            let now = self.engine.clock().now();
            schedule
                .timetable()
                .map(|t| t.upcoming(schedule.cursor.max(now), NEXT_FIRES))
                .unwrap_or_default()
        };
        let statuses = if live {
            Some(
                self.scheduler
                    .fire_statuses(schedule)
                    .await
                    .map_err(AppError::schedule)?,
            )
        } else {
            None
        };
        Ok(ScheduleView::new(schedule, next_fires, statuses))
    }

    /// The schedule `id`, once the caller may touch it (else it is not found).
    async fn owned_schedule(&self, caller: &Caller, id: &str) -> Result<Schedule, AppError> {
        let schedule = self.scheduler.get(id).await.map_err(AppError::schedule)?;
        if self
            .policy
            .may_touch_schedule(caller, schedule.owner.as_deref())?
        {
            Ok(schedule)
        } else {
            Err(AppError::schedule(ScheduleError::NotFound(id.to_owned())))
        }
    }

    /// Creates a schedule, owned by the caller's verified user (its fires are theirs).
    pub async fn create_schedule(
        &self,
        caller: &Caller,
        request: ScheduleRequest,
    ) -> Result<ScheduleView, AppError> {
        // Strict mode: a caller without a user owns nothing, and may create nothing.
        self.policy.list_owner(caller)?;
        let spec = request.spec()?;
        let schedule = self
            .scheduler
            .create(spec, caller.user_id())
            .await
            .map_err(AppError::schedule)?;
        self.view(&schedule, false).await
    }

    /// Every schedule the caller may see (in strict mode their own; an admin's: all), by id.
    pub async fn schedules(&self, caller: &Caller) -> Result<ScheduleList, AppError> {
        let owner = self.policy.list_owner(caller)?;
        let schedules = self
            .scheduler
            .list(owner.as_ref())
            .await
            .map_err(AppError::schedule)?;
        let mut views = Vec::with_capacity(schedules.len());
        for schedule in &schedules {
            views.push(self.view(schedule, false).await?);
        }
        Ok(ScheduleList { schedules: views })
    }

    /// A schedule's state, its fires' statuses read now.
    pub async fn schedule(&self, caller: &Caller, id: &str) -> Result<ScheduleView, AppError> {
        let schedule = self.owned_schedule(caller, id).await?;
        self.view(&schedule, true).await
    }

    /// Deletes a schedule (its executions stay).
    pub async fn delete_schedule(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<ScheduleDeleted, AppError> {
        self.owned_schedule(caller, id).await?;
        self.scheduler
            .delete(id)
            .await
            .map_err(AppError::schedule)?;
        Ok(ScheduleDeleted {
            id: id.to_owned(),
            deleted: true,
        })
    }

    /// Pauses or unpauses a schedule (unpaused, it fires from its next tick on).
    pub async fn pause_schedule(
        &self,
        caller: &Caller,
        id: &str,
        paused: bool,
    ) -> Result<ScheduleView, AppError> {
        self.owned_schedule(caller, id).await?;
        let schedule = self
            .scheduler
            .set_paused(id, paused)
            .await
            .map_err(AppError::schedule)?;
        self.view(&schedule, true).await
    }

    /// Fires a schedule now (also when paused); the execution is the schedule owner's.
    pub async fn trigger_schedule(&self, caller: &Caller, id: &str) -> Result<FireView, AppError> {
        self.owned_schedule(caller, id).await?;
        let fire = self
            .scheduler
            .trigger(id)
            .await
            .map_err(AppError::schedule)?;
        Ok(FireView::new(&fire, None))
    }

    /// Fires the ticks of a range that have no execution yet.
    pub async fn backfill_schedule(
        &self,
        caller: &Caller,
        id: &str,
        request: BackfillRequest,
    ) -> Result<BackfillResult, AppError> {
        self.owned_schedule(caller, id).await?;
        let from = instant("from", &request.from)?;
        let to = instant("to", &request.to)?;
        let done = self
            .scheduler
            .backfill(id, from, to)
            .await
            .map_err(AppError::schedule)?;
        Ok(BackfillResult {
            ticks: done.ticks,
            existing: done.ticks - done.started.len(),
            started: done
                .started
                .iter()
                .map(|f| FireView::new(f, None))
                .collect(),
        })
    }
}
