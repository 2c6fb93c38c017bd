//! Which records to return: the query string of `/api/logs` and `/ws/logs` ([`LogQueryParams`]),
//! validated into a [`LogQuery`].

use std::fmt;

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::{DEFAULT_LIMIT, LogLevel, LogRecord, MAX_LIMIT};

/// The query string of `/api/logs` and `/ws/logs`, as sent (every value a string, validated by
/// [`LogQuery::from_params`]); its documentation is both routes' parameters.
#[derive(Debug, Default, Clone, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct LogQueryParams {
    /// Minimum severity (`warning` is `warn`; any case).
    #[param(value_type = Option<LogLevel>)]
    pub level: Option<String>,
    /// Only records of this agent.
    pub agent_id: Option<String>,
    /// Only records of this workflow.
    pub workflow_id: Option<String>,
    /// Only records of this execution.
    pub execution_id: Option<String>,
    /// Only records strictly after this ISO 8601 instant, e.g. `2026-01-31T12:00:00.000Z`.
    #[param(format = DateTime)]
    pub since: Option<String>,
    /// At most this many records, the newest (default 100; more than 1000 is lowered to 1000).
    #[param(value_type = Option<u32>, minimum = 1)]
    pub limit: Option<String>,
}

/// Which records to return.
#[derive(Debug, Clone, PartialEq)]
pub struct LogQuery {
    /// Minimum severity: a record passes when its level is at least this severe.
    pub level: Option<LogLevel>,
    pub agent_id: Option<String>,
    pub workflow_id: Option<String>,
    pub execution_id: Option<String>,
    /// Only records strictly after this instant.
    pub since: Option<DateTime<Utc>>,
    /// At most this many records (the newest ones).
    pub limit: usize,
}

impl Default for LogQuery {
    fn default() -> Self {
        Self {
            level: None,
            agent_id: None,
            workflow_id: None,
            execution_id: None,
            since: None,
            limit: DEFAULT_LIMIT,
        }
    }
}

/// An empty parameter counts as absent.
fn present(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.trim().is_empty())
}

impl LogQuery {
    /// Validates the query string; a bad value is an [`InvalidQuery`] naming the parameter.
    pub fn from_params(p: LogQueryParams) -> Result<Self, InvalidQuery> {
        let level = match present(p.level) {
            None => None,
            Some(s) => Some(LogLevel::parse(s.trim()).ok_or_else(|| {
                InvalidQuery(format!(
                    "Invalid level {s:?}: expected trace, debug, info, warn or error"
                ))
            })?),
        };
        let since = match present(p.since) {
            None => None,
            Some(s) => Some(
                DateTime::parse_from_rfc3339(s.trim())
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|e| {
                        InvalidQuery(format!(
                            "Invalid since {s:?}: expected an ISO 8601 timestamp such as \
                             2026-01-31T12:00:00.000Z ({e})"
                        ))
                    })?,
            ),
        };
        let limit = match present(p.limit) {
            None => DEFAULT_LIMIT,
            Some(s) => match s.trim().parse::<u64>() {
                Ok(n) if n >= 1 => usize::try_from(n).unwrap_or(MAX_LIMIT).min(MAX_LIMIT),
                _ => {
                    return Err(InvalidQuery(format!(
                        "Invalid limit {s:?}: expected a whole number from 1 to {MAX_LIMIT}"
                    )));
                }
            },
        };
        Ok(Self {
            level,
            agent_id: present(p.agent_id),
            workflow_id: present(p.workflow_id),
            execution_id: present(p.execution_id),
            since,
            limit,
        })
    }

    /// Whether `r` passes every filter (all but `limit`).
    pub fn matches(&self, r: &LogRecord) -> bool {
        fn same(want: &Option<String>, have: &Option<String>) -> bool {
            want.as_ref().is_none_or(|w| have.as_ref() == Some(w))
        }
        self.level.is_none_or(|l| r.level >= l)
            && same(&self.agent_id, &r.agent_id)
            && same(&self.workflow_id, &r.workflow_id)
            && same(&self.execution_id, &r.execution_id)
            && self.since.is_none_or(|s| r.timestamp > s)
    }
}

/// An invalid value in the query string: its message names the parameter and the value (the
/// application answers it as a 400).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidQuery(pub String);

impl fmt::Display for InvalidQuery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidQuery {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::record;

    /// The query string as actix-web's `web::Query` reads it.
    fn params(pairs: &[(&str, &str)]) -> LogQueryParams {
        let qs = pairs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&");
        serde_urlencoded::from_str(&qs).expect("query string")
    }

    #[test]
    fn level_is_a_minimum_severity() {
        let q = LogQuery {
            level: Some(LogLevel::Warn),
            ..LogQuery::default()
        };
        assert!(!q.matches(&record(LogLevel::Trace, "")));
        assert!(!q.matches(&record(LogLevel::Info, "")));
        assert!(q.matches(&record(LogLevel::Warn, "")));
        assert!(q.matches(&record(LogLevel::Error, "")));
    }

    #[test]
    fn ids_and_since_filter() {
        let mut r = record(LogLevel::Info, "x");
        r.execution_id = Some("e-1".into());
        r.workflow_id = Some("wf".into());
        let by = |f: fn(&mut LogQuery)| {
            let mut q = LogQuery::default();
            f(&mut q);
            q
        };
        assert!(by(|q| q.execution_id = Some("e-1".into())).matches(&r));
        assert!(!by(|q| q.execution_id = Some("e-2".into())).matches(&r));
        assert!(by(|q| q.workflow_id = Some("wf".into())).matches(&r));
        assert!(!by(|q| q.agent_id = Some("assistant".into())).matches(&r));
        let mut q = LogQuery {
            since: Some(r.timestamp),
            ..LogQuery::default()
        };
        assert!(!q.matches(&r), "since is exclusive");
        q.since = Some(r.timestamp - chrono::Duration::milliseconds(1));
        assert!(q.matches(&r));
    }

    #[test]
    fn params_are_validated() {
        let q = LogQuery::from_params(params(&[
            ("level", "WARN"),
            ("executionId", "e-1"),
            ("workflowId", "wf"),
            ("agentId", ""),
            ("since", "2026-01-31T12:00:00.123Z"),
            ("limit", "5"),
        ]))
        .unwrap();
        assert_eq!(q.level, Some(LogLevel::Warn));
        assert_eq!(q.execution_id.as_deref(), Some("e-1"));
        assert_eq!(q.workflow_id.as_deref(), Some("wf"));
        assert_eq!(q.agent_id, None);
        assert_eq!(
            q.since
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
                .as_deref(),
            Some("2026-01-31T12:00:00.123Z")
        );
        assert_eq!(q.limit, 5);

        assert_eq!(
            LogQuery::from_params(params(&[])).unwrap(),
            LogQuery::default()
        );
        let big = LogQuery::from_params(params(&[("limit", "100000")])).unwrap();
        assert_eq!(big.limit, MAX_LIMIT);

        // The messages, word for word.
        let message = |name: &str, bad: &str| {
            LogQuery::from_params(params(&[(name, bad)]))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            message("level", "verbose"),
            "Invalid level \"verbose\": expected trace, debug, info, warn or error"
        );
        assert_eq!(
            message("limit", "0"),
            "Invalid limit \"0\": expected a whole number from 1 to 1000"
        );
        assert!(
            message("since", "yesterday").starts_with(
                "Invalid since \"yesterday\": expected an ISO 8601 timestamp such as \
                 2026-01-31T12:00:00.000Z ("
            ),
            "{}",
            message("since", "yesterday")
        );

        for (name, bad) in [
            ("level", "verbose"),
            ("limit", "0"),
            ("limit", "-1"),
            ("limit", "ten"),
            ("since", "yesterday"),
        ] {
            let err = LogQuery::from_params(params(&[(name, bad)])).unwrap_err();
            assert!(
                err.0.contains(name) && err.0.contains(bad),
                "{name}={bad}: {err}"
            );
        }
    }
}
