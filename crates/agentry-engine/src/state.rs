//! The execution state machine.
//!
//! Every change of an execution's status goes through [`transition`]: it takes the current
//! [`ExecutionState`] and a [`Transition`] and returns the next state or a [`TransitionError`].
//! The states carry exactly their data, so a suspended execution without a suspension record, or a
//! completed one without an end time, cannot be written.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The status values of spec section 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Idle,
    /// Waiting for a slot of its workflow's queue (not in the seed's list: added with queues).
    Queued,
    Running,
    Suspended,
    Completed,
    Error,
    /// Stopped through the API (not in the seed's list: added with cancel).
    Cancelled,
}

impl Status {
    pub const ALL: [Status; 7] = [
        Status::Idle,
        Status::Queued,
        Status::Running,
        Status::Suspended,
        Status::Completed,
        Status::Error,
        Status::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Idle => "idle",
            Status::Queued => "queued",
            Status::Running => "running",
            Status::Suspended => "suspended",
            Status::Completed => "completed",
            Status::Error => "error",
            Status::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Completed, error and cancelled are final: nothing moves out of them.
    pub fn is_final(self) -> bool {
        matches!(self, Status::Completed | Status::Error | Status::Cancelled)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why and where an execution is paused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Suspension {
    pub suspended_at: DateTime<Utc>,
    pub reason: String,
    /// Index of the step that runs on resume.
    pub step_index: usize,
    /// Id of the step that runs on resume.
    pub step_id: String,
    /// Data the suspending step attached (validated against the suspend schema).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// When the execution resumes by itself if nobody resumed it (a durable timer); the step
    /// then runs with `StepContext::timed_out` set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<DateTime<Utc>>,
    /// The event the step waits for, when it waits for one (`StepContext::wait_for_event`): a
    /// delivery of that event resumes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<EventWait>,
}

/// What a step waiting for an event waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventWait {
    /// The event's name, as the workflow declares it.
    pub name: String,
    /// The key an event sent by key (`POST /events/{name}`) must carry; none: only a delivery
    /// to this execution wakes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The step's journal entry the event is recorded under (`event-<n>`: its n-th wait).
    pub entry: String,
    /// The other events that resume it as well, when the step waits for the first of several
    /// ([`crate::workflow::StepContext::wait_for_any_event`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<AwaitedEvent>,
}

/// One event a step waits for: its name and the key it must carry (none: only a delivery to
/// the execution).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwaitedEvent {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl AwaitedEvent {
    pub fn new(name: impl Into<String>, key: Option<&str>) -> Self {
        Self {
            name: name.into(),
            key: key.map(str::to_owned),
        }
    }
}

impl EventWait {
    /// Every event it waits for, the first one first.
    pub fn awaited(&self) -> Vec<AwaitedEvent> {
        let first = AwaitedEvent::new(self.name.clone(), self.key.as_deref());
        std::iter::once(first)
            .chain(self.also.iter().cloned())
            .collect()
    }

    /// Whether it waits for `name` sent by key with `key`.
    pub fn awaits_by_key(&self, name: &str, key: &str) -> bool {
        self.awaited()
            .iter()
            .any(|a| a.name == name && a.key.as_deref() == Some(key))
    }
}

/// When and why an execution was cancelled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cancellation {
    pub cancelled_at: DateTime<Utc>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// A suspend asked for from outside while the execution runs; it takes effect at the next step
/// boundary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SuspendRequest {
    pub requested_at: DateTime<Utc>,
    pub reason: String,
}

/// An execution's status with exactly the data that status has.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecutionState {
    Idle,
    /// Waiting in its workflow's queue (its place is the record's `queue`).
    Queued,
    Running {
        suspend_request: Option<SuspendRequest>,
    },
    Suspended(Suspension),
    Completed {
        result: Value,
        end_at: DateTime<Utc>,
    },
    Error {
        message: String,
        /// The step that failed (none when the engine itself gave up).
        step_id: Option<String>,
        end_at: DateTime<Utc>,
    },
    Cancelled(Cancellation),
}

impl ExecutionState {
    pub fn status(&self) -> Status {
        match self {
            ExecutionState::Idle => Status::Idle,
            ExecutionState::Queued => Status::Queued,
            ExecutionState::Running { .. } => Status::Running,
            ExecutionState::Suspended(_) => Status::Suspended,
            ExecutionState::Completed { .. } => Status::Completed,
            ExecutionState::Error { .. } => Status::Error,
            ExecutionState::Cancelled(_) => Status::Cancelled,
        }
    }

    pub fn suspension(&self) -> Option<&Suspension> {
        match self {
            ExecutionState::Suspended(s) => Some(s),
            _ => None,
        }
    }

    pub fn end_at(&self) -> Option<DateTime<Utc>> {
        match self {
            ExecutionState::Completed { end_at, .. } | ExecutionState::Error { end_at, .. } => {
                Some(*end_at)
            }
            ExecutionState::Cancelled(c) => Some(c.cancelled_at),
            _ => None,
        }
    }

    pub fn result(&self) -> Option<&Value> {
        match self {
            ExecutionState::Completed { result, .. } => Some(result),
            _ => None,
        }
    }

    pub fn error(&self) -> Option<&str> {
        match self {
            ExecutionState::Error { message, .. } => Some(message),
            _ => None,
        }
    }

    /// The step a failed execution failed in.
    pub fn error_step(&self) -> Option<&str> {
        match self {
            ExecutionState::Error { step_id, .. } => step_id.as_deref(),
            _ => None,
        }
    }

    pub fn cancellation(&self) -> Option<&Cancellation> {
        match self {
            ExecutionState::Cancelled(c) => Some(c),
            _ => None,
        }
    }

    pub fn suspend_request(&self) -> Option<&SuspendRequest> {
        match self {
            ExecutionState::Running { suspend_request } => suspend_request.as_ref(),
            _ => None,
        }
    }

    /// Flattens the state into the columns a store keeps.
    pub fn to_parts(&self) -> StateParts {
        StateParts {
            status: self.status(),
            end_at: self.end_at(),
            result: self.result().cloned(),
            error: self.error().map(str::to_owned),
            error_step: self.error_step().map(str::to_owned),
            suspension: self.suspension().cloned(),
            suspend_request: self.suspend_request().cloned(),
            cancellation: self.cancellation().cloned(),
        }
    }

    /// Rebuilds a state from stored columns, refusing combinations that cannot exist.
    pub fn from_parts(parts: StateParts) -> Result<Self, String> {
        let StateParts {
            status,
            end_at,
            result,
            error,
            error_step,
            suspension,
            suspend_request,
            cancellation,
        } = parts;
        Ok(match status {
            Status::Idle => ExecutionState::Idle,
            Status::Queued => ExecutionState::Queued,
            Status::Running => ExecutionState::Running { suspend_request },
            Status::Suspended => ExecutionState::Suspended(
                suspension.ok_or("a suspended execution has no suspension record")?,
            ),
            Status::Completed => ExecutionState::Completed {
                result: result.unwrap_or(Value::Null),
                end_at: end_at.ok_or("a completed execution has no end time")?,
            },
            Status::Error => ExecutionState::Error {
                message: error.unwrap_or_default(),
                step_id: error_step,
                end_at: end_at.ok_or("a failed execution has no end time")?,
            },
            Status::Cancelled => ExecutionState::Cancelled(
                cancellation.ok_or("a cancelled execution has no cancellation record")?,
            ),
        })
    }
}

/// The stored columns of an [`ExecutionState`].
#[derive(Debug, Clone, PartialEq)]
pub struct StateParts {
    pub status: Status,
    pub end_at: Option<DateTime<Utc>>,
    pub result: Option<Value>,
    pub error: Option<String>,
    pub error_step: Option<String>,
    pub suspension: Option<Suspension>,
    pub suspend_request: Option<SuspendRequest>,
    pub cancellation: Option<Cancellation>,
}

/// What can happen to an execution.
#[derive(Debug, Clone, PartialEq)]
pub enum Transition {
    /// A new execution begins running, or a queued one is started (dequeued).
    Start,
    /// A new execution waits in its workflow's queue, or a failed one goes back into it (a
    /// retry of a queued workflow's execution).
    Enqueue,
    /// Someone asks a running execution to pause at its next step boundary.
    RequestSuspend(SuspendRequest),
    /// The engine pauses the execution (a step suspended, or a requested suspend took effect).
    Suspend(Suspension),
    /// A suspended execution continues.
    Resume,
    /// The last step finished.
    Complete { result: Value, at: DateTime<Utc> },
    /// A step failed (or the engine gave up: no step).
    Fail {
        message: String,
        step_id: Option<String>,
        at: DateTime<Utc>,
    },
    /// Someone stopped a running or suspended execution.
    Cancel(Cancellation),
    /// An operator runs a failed execution again from its failed step (the one way out of a
    /// final state: a repair).
    Retry,
}

impl Transition {
    pub fn name(&self) -> &'static str {
        match self {
            Transition::Start => "start",
            Transition::Enqueue => "enqueue",
            Transition::RequestSuspend(_) => "suspend",
            Transition::Suspend(_) => "suspend",
            Transition::Resume => "resume",
            Transition::Complete { .. } => "complete",
            Transition::Fail { .. } => "fail",
            Transition::Cancel(_) => "cancel",
            Transition::Retry => "retry",
        }
    }
}

/// A move the state machine refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// Suspend asked of an execution that is not running (already suspended or finished).
    #[error("execution is {0}, only a running execution can be suspended")]
    NotSuspendable(Status),
    /// Suspend asked twice before the first took effect.
    #[error("a suspend of this execution is already pending")]
    SuspendPending,
    /// Resume asked of an execution that is not suspended.
    #[error("execution is {0}, not suspended")]
    NotSuspended(Status),
    /// Any other move out of a state that does not allow it.
    #[error("cannot {transition} an execution that is {from}")]
    Refused {
        from: Status,
        transition: &'static str,
    },
}

/// The one transition function every status change goes through.
pub fn transition(
    state: &ExecutionState,
    t: Transition,
) -> Result<ExecutionState, TransitionError> {
    use ExecutionState as S;
    let from = state.status();
    match (state, t) {
        (S::Idle | S::Queued, Transition::Start) => Ok(S::Running {
            suspend_request: None,
        }),
        (S::Idle | S::Error { .. }, Transition::Enqueue) => Ok(S::Queued),
        (
            S::Running {
                suspend_request: None,
            },
            Transition::RequestSuspend(req),
        ) => Ok(S::Running {
            suspend_request: Some(req),
        }),
        (
            S::Running {
                suspend_request: Some(_),
            },
            Transition::RequestSuspend(_),
        ) => Err(TransitionError::SuspendPending),
        (_, Transition::RequestSuspend(_)) => Err(TransitionError::NotSuspendable(from)),
        (S::Running { .. }, Transition::Suspend(s)) => Ok(S::Suspended(s)),
        (S::Suspended(_), Transition::Resume) => Ok(S::Running {
            suspend_request: None,
        }),
        (_, Transition::Resume) => Err(TransitionError::NotSuspended(from)),
        (S::Running { .. }, Transition::Complete { result, at }) => {
            Ok(S::Completed { result, end_at: at })
        }
        (
            S::Running { .. },
            Transition::Fail {
                message,
                step_id,
                at,
            },
        ) => Ok(S::Error {
            message,
            step_id,
            end_at: at,
        }),
        (S::Queued | S::Running { .. } | S::Suspended(_), Transition::Cancel(c)) => {
            Ok(S::Cancelled(c))
        }
        (S::Error { .. }, Transition::Retry) => Ok(S::Running {
            suspend_request: None,
        }),
        (_, t) => Err(TransitionError::Refused {
            from,
            transition: t.name(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-01-02T03:04:05Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn suspension() -> Suspension {
        Suspension {
            suspended_at: at(),
            reason: "wait".into(),
            step_index: 1,
            step_id: "b".into(),
            data: None,
            deadline: None,
            event: None,
        }
    }

    fn request() -> SuspendRequest {
        SuspendRequest {
            requested_at: at(),
            reason: "pause".into(),
        }
    }

    fn running() -> ExecutionState {
        ExecutionState::Running {
            suspend_request: None,
        }
    }

    fn pending() -> ExecutionState {
        ExecutionState::Running {
            suspend_request: Some(request()),
        }
    }

    fn states() -> Vec<ExecutionState> {
        vec![
            ExecutionState::Idle,
            ExecutionState::Queued,
            running(),
            pending(),
            ExecutionState::Suspended(suspension()),
            ExecutionState::Completed {
                result: json!(1),
                end_at: at(),
            },
            ExecutionState::Error {
                message: "boom".into(),
                step_id: Some("a".into()),
                end_at: at(),
            },
            ExecutionState::Cancelled(cancellation()),
        ]
    }

    fn transitions() -> Vec<Transition> {
        vec![
            Transition::Start,
            Transition::Enqueue,
            Transition::RequestSuspend(request()),
            Transition::Suspend(suspension()),
            Transition::Resume,
            Transition::Complete {
                result: json!(2),
                at: at(),
            },
            Transition::Fail {
                message: "x".into(),
                step_id: None,
                at: at(),
            },
            Transition::Cancel(cancellation()),
        ]
    }

    fn cancellation() -> Cancellation {
        Cancellation {
            cancelled_at: at(),
            reason: Some("no longer needed".into()),
        }
    }

    /// The full table: every state against every transition, allowed moves listed explicitly.
    #[test]
    fn every_move_is_either_allowed_or_refused_as_the_table_says() {
        for state in states() {
            for t in transitions() {
                let got = transition(&state, t.clone());
                let expected: Result<ExecutionState, TransitionError> = match (&state, &t) {
                    (ExecutionState::Idle | ExecutionState::Queued, Transition::Start) => {
                        Ok(running())
                    }
                    (ExecutionState::Idle | ExecutionState::Error { .. }, Transition::Enqueue) => {
                        Ok(ExecutionState::Queued)
                    }
                    (s, Transition::RequestSuspend(_)) if *s == running() => Ok(pending()),
                    (s, Transition::RequestSuspend(_)) if *s == pending() => {
                        Err(TransitionError::SuspendPending)
                    }
                    (s, Transition::RequestSuspend(_)) => {
                        Err(TransitionError::NotSuspendable(s.status()))
                    }
                    (ExecutionState::Running { .. }, Transition::Suspend(s)) => {
                        Ok(ExecutionState::Suspended(s.clone()))
                    }
                    (ExecutionState::Suspended(_), Transition::Resume) => Ok(running()),
                    (s, Transition::Resume) => Err(TransitionError::NotSuspended(s.status())),
                    (ExecutionState::Running { .. }, Transition::Complete { result, at }) => {
                        Ok(ExecutionState::Completed {
                            result: result.clone(),
                            end_at: *at,
                        })
                    }
                    (
                        ExecutionState::Running { .. },
                        Transition::Fail {
                            message,
                            step_id,
                            at,
                        },
                    ) => Ok(ExecutionState::Error {
                        message: message.clone(),
                        step_id: step_id.clone(),
                        end_at: *at,
                    }),
                    (
                        ExecutionState::Queued
                        | ExecutionState::Running { .. }
                        | ExecutionState::Suspended(_),
                        Transition::Cancel(c),
                    ) => Ok(ExecutionState::Cancelled(c.clone())),
                    (s, t) => Err(TransitionError::Refused {
                        from: s.status(),
                        transition: t.name(),
                    }),
                };
                assert_eq!(got, expected, "{state:?} + {t:?}");
            }
        }
    }

    #[test]
    fn spec_moves() {
        // running -> suspend -> (pending, then) suspended
        let s = transition(&running(), Transition::RequestSuspend(request())).unwrap();
        let s = transition(&s, Transition::Suspend(suspension())).unwrap();
        assert_eq!(s.status(), Status::Suspended);
        // completed or suspended -> suspend -> refused (400)
        assert_eq!(
            transition(&s, Transition::RequestSuspend(request())),
            Err(TransitionError::NotSuspendable(Status::Suspended))
        );
        let done = ExecutionState::Completed {
            result: json!({}),
            end_at: at(),
        };
        assert_eq!(
            transition(&done, Transition::RequestSuspend(request())),
            Err(TransitionError::NotSuspendable(Status::Completed))
        );
        // suspended -> resume -> running -> complete
        let s = transition(&s, Transition::Resume).unwrap();
        assert_eq!(s.status(), Status::Running);
        let s = transition(
            &s,
            Transition::Complete {
                result: json!(1),
                at: at(),
            },
        )
        .unwrap();
        assert_eq!(s.status(), Status::Completed);
        // not suspended -> resume -> refused (404)
        assert_eq!(
            transition(&s, Transition::Resume),
            Err(TransitionError::NotSuspended(Status::Completed))
        );
        assert_eq!(
            transition(&running(), Transition::Resume),
            Err(TransitionError::NotSuspended(Status::Running))
        );
    }

    #[test]
    fn final_states_never_move() {
        for s in states().into_iter().filter(|s| s.status().is_final()) {
            for t in transitions() {
                // The repairs: a failed execution retried (through its queue, for a queued
                // workflow).
                let repair = matches!(s, ExecutionState::Error { .. })
                    && matches!(t, Transition::Enqueue | Transition::Retry);
                assert_eq!(transition(&s, t).is_err(), !repair);
            }
        }
    }

    #[test]
    fn parts_round_trip_and_refuse_impossible_rows() {
        for s in states() {
            assert_eq!(ExecutionState::from_parts(s.to_parts()).unwrap(), s);
        }
        let mut parts = ExecutionState::Suspended(suspension()).to_parts();
        parts.suspension = None;
        assert!(ExecutionState::from_parts(parts).is_err());
        let mut parts = ExecutionState::Completed {
            result: json!(1),
            end_at: at(),
        }
        .to_parts();
        parts.end_at = None;
        assert!(ExecutionState::from_parts(parts).is_err());
    }

    #[test]
    fn status_names() {
        for s in Status::ALL {
            assert_eq!(Status::parse(s.as_str()), Some(s));
        }
        assert_eq!(Status::parse("paused"), None);
    }
}
