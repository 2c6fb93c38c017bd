//! The pure decision of one pass: which ticks of a schedule fire now, which wait, which are
//! skipped. No I/O, no clock: the scheduler hands it the time and whether an earlier fire is
//! still active, and writes what it answers.

use chrono::{DateTime, Utc};

use super::{Overlap, Schedule, Timetable};

/// The most ticks one pass looks at (the rest are looked at by the next pass, at once): a
/// schedule of every second after a day without a server is caught up in steps that each stay
/// short.
pub const MAX_TICKS_PER_PASS: usize = 1000;
/// The most fires one pass decides.
pub const MAX_FIRES_PER_PASS: usize = 100;

/// What a pass does to a schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The ticks to fire now, oldest first (a buffered tick first of all).
    pub fires: Vec<DateTime<Utc>>,
    /// How many ticks it skips.
    pub skipped: u64,
    /// The last tick it handled.
    pub cursor: DateTime<Utc>,
    /// The tick left waiting (`buffer-one`).
    pub buffered: Option<DateTime<Utc>>,
}

/// Decides the pass of `schedule` at `now`, `active` telling whether an earlier fire is still
/// running, suspended or pending:
///
/// - a buffered tick fires first once nothing is active;
/// - each tick after the cursor, up to `now`, oldest first: one older than the catch-up window
///   is skipped; otherwise, while a fire is active, `skip` skips it, `buffer-one` keeps it
///   waiting if none waits already (else skips it), `allow` fires it; with nothing active it
///   fires (and is then the active one).
pub fn plan(
    schedule: &Schedule,
    timetable: &Timetable,
    now: DateTime<Utc>,
    mut active: bool,
) -> Plan {
    let mut plan = Plan {
        fires: Vec::new(),
        skipped: 0,
        cursor: schedule.cursor,
        buffered: schedule.buffered,
    };
    if let Some(waiting) = plan.buffered
        && !active
    {
        plan.fires.push(waiting);
        plan.buffered = None;
        active = true;
    }
    let window =
        chrono::Duration::from_std(schedule.catchup_window).unwrap_or(chrono::Duration::MAX);
    let oldest_in_window = now
        .checked_sub_signed(window)
        .unwrap_or(DateTime::<Utc>::MIN_UTC);
    for _ in 0..MAX_TICKS_PER_PASS {
        if plan.fires.len() >= MAX_FIRES_PER_PASS {
            break;
        }
        let Some(tick) = timetable.next_after(plan.cursor).filter(|t| *t <= now) else {
            break;
        };
        plan.cursor = tick;
        if tick < oldest_in_window {
            plan.skipped += 1;
            continue;
        }
        match schedule.overlap {
            _ if !active => {
                plan.fires.push(tick);
                active = true;
            }
            Overlap::Allow => plan.fires.push(tick),
            Overlap::BufferOne if plan.buffered.is_none() => plan.buffered = Some(tick),
            Overlap::BufferOne | Overlap::Skip => plan.skipped += 1,
        }
    }
    plan
}
