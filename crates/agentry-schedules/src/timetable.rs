//! A schedule's timetable: a cron expression read in a time zone. Parsed by croner (5 fields, or
//! 6 with seconds first; no year field), the zone is an IANA name of chrono-tz; ticks are
//! computed in the zone (daylight saving time included) and handled in UTC.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use super::ScheduleError;

/// The longest cron expression accepted.
pub const MAX_CRON_LEN: usize = 128;
/// The longest time zone name accepted (IANA names are far shorter).
pub const MAX_TIMEZONE_LEN: usize = 64;

/// When a schedule fires: its cron expression in its time zone.
#[derive(Debug, Clone)]
pub struct Timetable {
    cron: Cron,
    zone: Tz,
}

impl Timetable {
    /// Reads `cron` in `timezone`; the error names the field at fault. A valid expression that
    /// never fires (`0 0 30 2 *`) is refused too.
    pub fn parse(cron: &str, timezone: &str) -> Result<Self, ScheduleError> {
        if cron.len() > MAX_CRON_LEN {
            return Err(ScheduleError::invalid(
                "cron",
                format!("at most {MAX_CRON_LEN} characters"),
            ));
        }
        let parsed = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build()
            .parse(cron)
            .map_err(|e| {
                ScheduleError::invalid(
                    "cron",
                    format!(
                        "{cron:?} is not a cron expression of 5 fields, or 6 with seconds first ({e})"
                    ),
                )
            })?;
        let zone = parse_zone(timezone)?;
        let timetable = Self { cron: parsed, zone };
        if timetable.next_after(Utc::now()).is_none() {
            return Err(ScheduleError::invalid(
                "cron",
                format!("{cron:?} never fires"),
            ));
        }
        Ok(timetable)
    }

    /// The first tick strictly after `t` (`None`: there is none).
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = t.with_timezone(&self.zone);
        let next = self.cron.find_next_occurrence(&local, false).ok()?;
        let next = next.with_timezone(&Utc);
        // Ticks fall on whole seconds; never answer one that is not after `t`.
        (next > t).then_some(next)
    }

    /// The next `n` ticks after `t`.
    pub fn upcoming(&self, t: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        std::iter::successors(self.next_after(t), |tick| self.next_after(*tick))
            .take(n)
            .collect()
    }
}

/// An IANA time zone name (`UTC`, `Europe/Paris`).
fn parse_zone(timezone: &str) -> Result<Tz, ScheduleError> {
    if timezone.len() > MAX_TIMEZONE_LEN {
        return Err(ScheduleError::invalid(
            "timezone",
            format!("at most {MAX_TIMEZONE_LEN} characters"),
        ));
    }
    Tz::from_str(timezone).map_err(|_| {
        ScheduleError::invalid(
            "timezone",
            format!("{timezone:?} is not an IANA time zone (such as UTC or Europe/Paris)"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn five_fields_tick_on_minutes_six_on_seconds() {
        let daily = Timetable::parse("0 2 * * *", "UTC").unwrap();
        assert_eq!(
            daily.next_after(at("2026-11-27T01:59:59.500Z")),
            Some(at("2026-11-27T02:00:00Z"))
        );
        assert_eq!(
            daily.next_after(at("2026-11-27T02:00:00Z")),
            Some(at("2026-11-28T02:00:00Z"))
        );
        let every_ten = Timetable::parse("*/10 * * * * *", "UTC").unwrap();
        assert_eq!(
            every_ten.upcoming(at("2026-11-27T02:00:00.250Z"), 2),
            vec![at("2026-11-27T02:00:10Z"), at("2026-11-27T02:00:20Z")]
        );
        let each_second = Timetable::parse("* * * * * *", "UTC").unwrap();
        assert_eq!(
            each_second.next_after(at("2026-11-27T02:00:00.250Z")),
            Some(at("2026-11-27T02:00:01Z"))
        );
    }

    #[test]
    fn ticks_are_read_in_the_time_zone() {
        let paris = Timetable::parse("0 2 * * *", "Europe/Paris").unwrap();
        // Winter: Paris is UTC+1.
        assert_eq!(
            paris.next_after(at("2026-11-27T00:00:00Z")),
            Some(at("2026-11-27T01:00:00Z"))
        );
        // Summer: UTC+2.
        assert_eq!(
            paris.next_after(at("2026-07-01T00:00:00Z")),
            Some(at("2026-07-02T00:00:00Z"))
        );
    }

    #[test]
    fn bad_expressions_and_zones_name_their_field() {
        for (cron, tz, field) in [
            ("not a cron", "UTC", "cron"),
            ("* * * *", "UTC", "cron"),
            ("0 0 1 1 * 2030", "UTC", "cron"),
            ("61 * * * *", "UTC", "cron"),
            ("0 0 30 2 *", "UTC", "cron"),
            ("* * * * *", "Mars/Olympus", "timezone"),
            ("* * * * *", "", "timezone"),
        ] {
            match Timetable::parse(cron, tz) {
                Err(ScheduleError::Invalid { field: f, .. }) => assert_eq!(f, field, "{cron}"),
                other => panic!("{cron} {tz}: {other:?}"),
            }
        }
        let long = "*".repeat(MAX_CRON_LEN + 1);
        assert!(Timetable::parse(&long, "UTC").is_err());
    }
}
