//! Properties of the execution state machine over random sequences of transitions, with random
//! data in every transition: each move is the one the table of spec section 3 allows (or refused
//! with the error it names), a refused move changes nothing, a finished execution never moves
//! again, and every state reached is representable: its accessors agree with its status and it
//! survives the columns a store keeps, as the SQL stores write and read them.

use agentry_engine::state::{
    Cancellation, ExecutionState, StateParts, Status, SuspendRequest, Suspension, Transition,
    TransitionError, transition,
};
use chrono::{DateTime, Utc};
use proptest::prelude::*;
use serde_json::{Map, Value};

// ---- strategies ----

/// A time between 1970 and 2100 with millisecond precision (what the engine's clock gives).
fn at() -> impl Strategy<Value = DateTime<Utc>> {
    (0i64..4_102_444_800_000).prop_map(|ms| DateTime::from_timestamp_millis(ms).unwrap())
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![3 => "[a-z -]{0,12}", 1 => ".{0,16}"]
}

/// JSON without floats: a float written and read back by serde_json (without its
/// `float_roundtrip` feature) may come back one unit in the last place off, which is serde_json's
/// matter, not the state machine's.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((text(), inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn suspend_request() -> impl Strategy<Value = SuspendRequest> {
    (at(), text()).prop_map(|(requested_at, reason)| SuspendRequest {
        requested_at,
        reason,
    })
}

fn suspension() -> impl Strategy<Value = Suspension> {
    // `data: Some(null)` is left out: it is written as `"data": null` and read back as `None`
    // (serde's `Option` reads `null` as `None`), so it does not survive a SQL store; the engine
    // turns a step's `null` suspend data into `None` before storing it.
    let data = prop::option::of(json().prop_filter("data: null", |v| !v.is_null()));
    (
        at(),
        text(),
        0usize..64,
        "[a-z][a-z0-9-]{0,8}",
        data,
        prop::option::of(at()),
    )
        .prop_map(
            |(suspended_at, reason, step_index, step_id, data, deadline)| Suspension {
                suspended_at,
                reason,
                step_index,
                step_id,
                data,
                deadline,
                event: None,
            },
        )
}

fn cancellation() -> impl Strategy<Value = Cancellation> {
    (at(), prop::option::of(text())).prop_map(|(cancelled_at, reason)| Cancellation {
        cancelled_at,
        reason,
    })
}

fn step_id() -> impl Strategy<Value = Option<String>> {
    prop::option::of("[a-z][a-z0-9-]{0,8}")
}

fn any_transition() -> impl Strategy<Value = Transition> {
    prop_oneof![
        1 => Just(Transition::Start),
        1 => Just(Transition::Enqueue),
        3 => suspend_request().prop_map(Transition::RequestSuspend),
        3 => suspension().prop_map(Transition::Suspend),
        3 => Just(Transition::Resume),
        1 => (json(), at()).prop_map(|(result, at)| Transition::Complete { result, at }),
        1 => (text(), step_id(), at())
            .prop_map(|(message, step_id, at)| Transition::Fail { message, step_id, at }),
        1 => cancellation().prop_map(Transition::Cancel),
        1 => Just(Transition::Retry),
    ]
}

/// A fresh execution (idle, or idle then started) and the moves asked of it.
fn runs() -> impl Strategy<Value = (bool, Vec<Transition>)> {
    (
        any::<bool>(),
        prop::collection::vec(any_transition(), 0..40),
    )
}

fn any_state() -> impl Strategy<Value = ExecutionState> {
    prop_oneof![
        Just(ExecutionState::Idle),
        Just(ExecutionState::Queued),
        prop::option::of(suspend_request())
            .prop_map(|suspend_request| ExecutionState::Running { suspend_request }),
        suspension().prop_map(ExecutionState::Suspended),
        (json(), at()).prop_map(|(result, end_at)| ExecutionState::Completed { result, end_at }),
        (text(), step_id(), at()).prop_map(|(message, step_id, end_at)| ExecutionState::Error {
            message,
            step_id,
            end_at
        }),
        cancellation().prop_map(ExecutionState::Cancelled),
    ]
}

fn any_parts() -> impl Strategy<Value = StateParts> {
    (
        prop::sample::select(Status::ALL.to_vec()),
        prop::option::of(at()),
        prop::option::of(json()),
        prop::option::of(text()),
        prop::option::of(suspension()),
        prop::option::of(suspend_request()),
        step_id(),
        prop::option::of(cancellation()),
    )
        .prop_map(
            |(
                status,
                end_at,
                result,
                error,
                suspension,
                suspend_request,
                error_step,
                cancellation,
            )| {
                StateParts {
                    status,
                    end_at,
                    result,
                    error,
                    error_step,
                    suspension,
                    suspend_request,
                    cancellation,
                }
            },
        )
}

// ---- the model ----

/// The moves of the table, written out independently of `transition`.
fn expected(s: &ExecutionState, t: &Transition) -> Result<ExecutionState, TransitionError> {
    use ExecutionState as S;
    let from = s.status();
    match (s, t) {
        (S::Idle | S::Queued, Transition::Start) => Ok(S::Running {
            suspend_request: None,
        }),
        (S::Idle | S::Error { .. }, Transition::Enqueue) => Ok(S::Queued),
        (S::Running { suspend_request }, Transition::RequestSuspend(r)) => match suspend_request {
            None => Ok(S::Running {
                suspend_request: Some(r.clone()),
            }),
            Some(_) => Err(TransitionError::SuspendPending),
        },
        (_, Transition::RequestSuspend(_)) => Err(TransitionError::NotSuspendable(from)),
        (S::Running { .. }, Transition::Suspend(x)) => Ok(S::Suspended(x.clone())),
        (S::Suspended(_), Transition::Resume) => Ok(S::Running {
            suspend_request: None,
        }),
        (_, Transition::Resume) => Err(TransitionError::NotSuspended(from)),
        (S::Running { .. }, Transition::Complete { result, at }) => Ok(S::Completed {
            result: result.clone(),
            end_at: *at,
        }),
        (
            S::Running { .. },
            Transition::Fail {
                message,
                step_id,
                at,
            },
        ) => Ok(S::Error {
            message: message.clone(),
            step_id: step_id.clone(),
            end_at: *at,
        }),
        (S::Queued | S::Running { .. } | S::Suspended(_), Transition::Cancel(c)) => {
            Ok(S::Cancelled(c.clone()))
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

/// The status changes a successful move may make.
fn allowed_edge(from: Status, to: Status) -> bool {
    use Status::*;
    matches!(
        (from, to),
        (Idle, Running)
            | (Idle, Queued)
            | (Queued, Running)
            | (Queued, Cancelled)
            | (Error, Queued)
            | (Running, Running)
            | (Running, Suspended)
            | (Running, Completed)
            | (Running, Error)
            | (Running, Cancelled)
            | (Suspended, Running)
            | (Suspended, Cancelled)
            | (Error, Running)
    )
}

/// Whether `t` is the repair of a failed execution (the one move out of a final state).
fn is_repair(state: &ExecutionState, t: &Transition) -> bool {
    matches!(
        (state, t),
        (
            ExecutionState::Error { .. },
            Transition::Retry | Transition::Enqueue
        )
    )
}

/// What `crates/agentry-store/src/row.rs` does: the status as its name, the JSON columns as text,
/// then back through `from_parts`.
fn through_a_row(s: &ExecutionState) -> Result<ExecutionState, String> {
    fn text_of<T: serde::Serialize>(v: &T) -> String {
        serde_json::to_string(v).unwrap()
    }
    fn read<T: serde::de::DeserializeOwned>(s: Option<String>) -> Result<Option<T>, String> {
        s.map(|s| serde_json::from_str(&s).map_err(|e| e.to_string()))
            .transpose()
    }
    let p = s.to_parts();
    let status_column = p.status.as_str().to_owned();
    let result_column = p.result.as_ref().map(text_of);
    let suspension_column = p.suspension.as_ref().map(text_of);
    let request_column = p.suspend_request.as_ref().map(text_of);
    let cancellation_column = p.cancellation.as_ref().map(text_of);
    ExecutionState::from_parts(StateParts {
        status: Status::parse(&status_column).ok_or("unknown status")?,
        end_at: p.end_at,
        result: read(result_column)?,
        error: p.error,
        error_step: p.error_step,
        suspension: read(suspension_column)?,
        suspend_request: read(request_column)?,
        cancellation: read(cancellation_column)?,
    })
}

/// Every state reached is one the types and the stores can hold.
fn assert_representable(s: &ExecutionState) -> Result<(), TestCaseError> {
    let status = s.status();
    let by_variant = match s {
        ExecutionState::Idle => Status::Idle,
        ExecutionState::Queued => Status::Queued,
        ExecutionState::Running { .. } => Status::Running,
        ExecutionState::Suspended(_) => Status::Suspended,
        ExecutionState::Completed { .. } => Status::Completed,
        ExecutionState::Error { .. } => Status::Error,
        ExecutionState::Cancelled(_) => Status::Cancelled,
    };
    prop_assert_eq!(status, by_variant);
    prop_assert_eq!(Status::parse(status.as_str()), Some(status));
    prop_assert_eq!(
        serde_json::to_value(status).unwrap(),
        Value::from(status.as_str())
    );
    prop_assert_eq!(s.suspension().is_some(), status == Status::Suspended);
    prop_assert_eq!(s.end_at().is_some(), status.is_final());
    prop_assert_eq!(s.result().is_some(), status == Status::Completed);
    prop_assert_eq!(s.error().is_some(), status == Status::Error);
    prop_assert_eq!(s.cancellation().is_some(), status == Status::Cancelled);
    if s.suspend_request().is_some() {
        prop_assert_eq!(status, Status::Running);
    }
    let parts = s.to_parts();
    prop_assert_eq!(parts.status, status);
    prop_assert_eq!(ExecutionState::from_parts(parts), Ok(s.clone()));
    prop_assert_eq!(through_a_row(s), Ok(s.clone()));
    Ok(())
}

// ---- properties ----

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every move of a random run is the table's, refused moves change nothing, finished runs stay
    /// finished (but for the retry of a failed one), and every state on the way is
    /// representable.
    #[test]
    fn random_runs_follow_the_table((started, moves) in runs()) {
        let mut state = ExecutionState::Idle;
        if started {
            state = transition(&state, Transition::Start).unwrap();
        }
        assert_representable(&state)?;
        let mut finished: Option<ExecutionState> = None;
        for t in moves {
            let before = state.clone();
            let got = transition(&state, t.clone());
            prop_assert_eq!(&got, &expected(&state, &t), "{:?} + {:?}", state, t);
            // The function is pure: the same move on the same state gives the same answer.
            prop_assert_eq!(&got, &transition(&state, t.clone()));
            match got {
                Ok(next) => {
                    prop_assert!(
                        !before.status().is_final() || is_repair(&before, &t),
                        "{:?} moved to {:?}", before, next
                    );
                    if is_repair(&before, &t) {
                        finished = None;
                    }
                    prop_assert!(
                        allowed_edge(before.status(), next.status()),
                        "{} -> {}", before.status(), next.status()
                    );
                    assert_representable(&next)?;
                    state = next;
                }
                Err(e) => {
                    // What the engine does with a refusal: keep the state it read.
                    prop_assert_eq!(&state, &before);
                    prop_assert!(!e.to_string().is_empty());
                    if let TransitionError::NotSuspendable(st)
                    | TransitionError::NotSuspended(st)
                    | TransitionError::Refused { from: st, .. } = e
                    {
                        prop_assert_eq!(st, before.status());
                    }
                }
            }
            if let Some(f) = &finished {
                prop_assert_eq!(&state, f, "a finished execution changed");
            }
            if state.status().is_final() && finished.is_none() {
                finished = Some(state.clone());
            }
        }
    }

    /// Any state, whatever led to it: a final one refuses every move but a failed one's retry, a suspended one carries its
    /// suspension through a resume cycle, and each round-trips through its stored columns.
    #[test]
    fn every_state_is_representable_and_final_ones_never_move(
        state in any_state(),
        t in any_transition(),
    ) {
        assert_representable(&state)?;
        let got = transition(&state, t.clone());
        if state.status().is_final() && !is_repair(&state, &t) {
            prop_assert!(got.is_err(), "{:?} + {:?} = {:?}", state, t, got);
        }
        if let (ExecutionState::Running { .. }, Transition::Suspend(s)) = (&state, &t) {
            let suspended = got.clone().unwrap();
            prop_assert_eq!(suspended.suspension(), Some(s));
        }
        prop_assert_eq!(got, expected(&state, &t));
    }

    /// Stored columns: `from_parts` refuses exactly the impossible rows (suspended without a
    /// suspension, completed or failed without an end time, cancelled without its record) and
    /// otherwise gives a state of the row's status that writes back to a row it reads again
    /// unchanged.
    #[test]
    fn from_parts_refuses_exactly_the_impossible_rows(parts in any_parts()) {
        let ended = matches!(parts.status, Status::Completed | Status::Error);
        let impossible = (parts.status == Status::Suspended && parts.suspension.is_none())
            || (ended && parts.end_at.is_none())
            || (parts.status == Status::Cancelled && parts.cancellation.is_none());
        match ExecutionState::from_parts(parts.clone()) {
            Ok(s) => {
                prop_assert!(!impossible, "{:?} was accepted", parts);
                prop_assert_eq!(s.status(), parts.status);
                let end_at = match parts.status {
                    Status::Completed | Status::Error => parts.end_at,
                    Status::Cancelled => parts.cancellation.as_ref().map(|c| c.cancelled_at),
                    _ => None,
                };
                prop_assert_eq!(s.end_at(), end_at);
                assert_representable(&s)?;
            }
            Err(reason) => {
                prop_assert!(impossible, "{:?} was refused: {}", parts, reason);
                prop_assert!(!reason.is_empty());
            }
        }
    }
}
