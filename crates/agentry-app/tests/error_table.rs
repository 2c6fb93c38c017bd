//! Every failure a use case can answer, walked: each kind of engine, agent and authentication
//! error becomes an `AppError` whose code is a row of `docs/ERRORS.md` with that row's status.
//! The samples are listed through exhaustive matches, so a new kind of error does not compile
//! until it is sampled here (and, in `AppError`'s conversions, given its row).

use std::collections::HashMap;

use agentry_agents::{AgentError, ModelError, ModelErrorKind};
use agentry_app::{AppError, Code};
use agentry_auth::AuthError;
use agentry_engine::EngineError;
use agentry_engine::Status;
use agentry_engine::store::StoreError;
use agentry_schedules::ScheduleError;

/// `docs/ERRORS.md`'s table: code → status.
fn published() -> HashMap<String, u16> {
    include_str!("../../../docs/ERRORS.md")
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let code = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            let status = cells.get(2)?.parse().ok()?;
            Some((code.to_owned(), status))
        })
        .collect()
}

/// One of each engine error (the match below names every variant).
fn engine_errors() -> Vec<EngineError> {
    let s = || "x".to_owned();
    let all = vec![
        EngineError::WorkflowNotFound(s()),
        EngineError::DuplicateWorkflow(s()),
        EngineError::InvalidInput(s()),
        EngineError::InvalidExecutionId(s()),
        EngineError::InvalidOptions(s()),
        EngineError::ExecutionExists(s()),
        EngineError::LeaseLost(s()),
        EngineError::HandedOver(s()),
        EngineError::ExecutionNotFound {
            workflow_id: s(),
            execution_id: s(),
        },
        EngineError::UnknownExecution(s()),
        EngineError::NotSuspendable {
            id: s(),
            reason: s(),
        },
        EngineError::NotSuspended {
            id: s(),
            status: Status::Completed,
        },
        EngineError::NotCancellable {
            id: s(),
            status: Status::Completed,
        },
        EngineError::NotDue(s()),
        EngineError::Cancelled(s()),
        EngineError::InvalidResumeData(s()),
        EngineError::UnknownStep {
            workflow_id: s(),
            step_id: s(),
        },
        EngineError::ShuttingDown,
        EngineError::Contention(s()),
        EngineError::UnknownEvent {
            workflow_id: Some(s()),
            name: s(),
        },
        EngineError::InvalidEventData(s()),
        EngineError::EventAfterEnd {
            id: s(),
            status: Status::Completed,
        },
        EngineError::MailboxFull(s()),
        EngineError::MailboxTooLarge { id: s(), limit: 1 },
        EngineError::TooManyEvents(s()),
        EngineError::NotRetryable {
            id: s(),
            status: Status::Completed,
        },
        EngineError::NotForkable {
            id: s(),
            reason: s(),
        },
        EngineError::Unchanged,
        EngineError::VersionUnavailable {
            workflow_id: s(),
            version: s(),
        },
        EngineError::Internal(s()),
    ];
    let mut all: Vec<EngineError> = all;
    for store in store_errors() {
        all.push(EngineError::Store(store));
    }
    for e in &all {
        // A new variant stops this match from compiling: sample it above.
        match e {
            EngineError::WorkflowNotFound(_)
            | EngineError::DuplicateWorkflow(_)
            | EngineError::InvalidInput(_)
            | EngineError::InvalidExecutionId(_)
            | EngineError::InvalidOptions(_)
            | EngineError::ExecutionExists(_)
            | EngineError::LeaseLost(_)
            | EngineError::HandedOver(_)
            | EngineError::ExecutionNotFound { .. }
            | EngineError::UnknownExecution(_)
            | EngineError::NotSuspendable { .. }
            | EngineError::NotSuspended { .. }
            | EngineError::NotCancellable { .. }
            | EngineError::NotDue(_)
            | EngineError::Cancelled(_)
            | EngineError::InvalidResumeData(_)
            | EngineError::UnknownStep { .. }
            | EngineError::ShuttingDown
            | EngineError::Contention(_)
            | EngineError::UnknownEvent { .. }
            | EngineError::InvalidEventData(_)
            | EngineError::EventAfterEnd { .. }
            | EngineError::MailboxFull(_)
            | EngineError::MailboxTooLarge { .. }
            | EngineError::TooManyEvents(_)
            | EngineError::NotRetryable { .. }
            | EngineError::NotForkable { .. }
            | EngineError::Unchanged
            | EngineError::VersionUnavailable { .. }
            | EngineError::Store(_)
            | EngineError::Internal(_) => {}
        }
    }
    all
}

fn store_errors() -> Vec<StoreError> {
    let s = || "x".to_owned();
    let all = vec![
        StoreError::Duplicate(s()),
        StoreError::Corrupt {
            id: s(),
            reason: s(),
        },
        StoreError::Database(s()),
        StoreError::Unavailable(s()),
        StoreError::Invalid(s()),
        StoreError::Migrations(s()),
    ];
    for e in &all {
        match e {
            StoreError::Duplicate(_)
            | StoreError::Corrupt { .. }
            | StoreError::Database(_)
            | StoreError::Unavailable(_)
            | StoreError::Invalid(_)
            | StoreError::Migrations(_) => {}
        }
    }
    all
}

fn agent_errors() -> Vec<AgentError> {
    let s = || "x".to_owned();
    let mut all = vec![
        AgentError::NotFound(s()),
        AgentError::Duplicate(s()),
        AgentError::InvalidId(s()),
        AgentError::InvalidRequest(s()),
        AgentError::InvalidObject(s()),
        AgentError::Memory(s()),
        AgentError::MemoryUnavailable(s()),
        AgentError::Cancelled,
        AgentError::Run(s()),
        AgentError::GuardrailTripped(agentry_agents::guardrail::Tripped {
            guardrail: s(),
            point: agentry_agents::guardrail::GuardPoint::Output,
            reason: s(),
        }),
        AgentError::BudgetExceeded {
            message: s(),
            retry_after: None,
        },
    ];
    for kind in [
        ModelErrorKind::RateLimited,
        ModelErrorKind::Unauthorized,
        ModelErrorKind::TimedOut,
        ModelErrorKind::Refused,
        ModelErrorKind::Unavailable,
        ModelErrorKind::Failed,
    ] {
        all.push(AgentError::Model(ModelError::of(kind, "x")));
    }
    for e in &all {
        match e {
            AgentError::NotFound(_)
            | AgentError::Duplicate(_)
            | AgentError::InvalidId(_)
            | AgentError::InvalidRequest(_)
            | AgentError::Model(_)
            | AgentError::InvalidObject(_)
            | AgentError::Memory(_)
            | AgentError::MemoryUnavailable(_)
            | AgentError::Cancelled
            | AgentError::GuardrailTripped(_)
            | AgentError::BudgetExceeded { .. }
            | AgentError::Run(_) => {}
        }
    }
    all
}

fn schedule_errors() -> Vec<ScheduleError> {
    let s = || "x".to_owned();
    let mut all = vec![
        ScheduleError::NotFound(s()),
        ScheduleError::Exists(s()),
        ScheduleError::Invalid {
            field: "cron",
            message: s(),
        },
        ScheduleError::InvalidBackfill {
            field: "to",
            message: s(),
        },
        ScheduleError::Limit,
        ScheduleError::UserLimit(100),
        ScheduleError::Contention(s()),
    ];
    all.extend(engine_errors().into_iter().map(ScheduleError::Engine));
    all.extend(store_errors().into_iter().map(ScheduleError::Store));
    for e in &all {
        match e {
            ScheduleError::NotFound(_)
            | ScheduleError::Exists(_)
            | ScheduleError::Invalid { .. }
            | ScheduleError::InvalidBackfill { .. }
            | ScheduleError::Limit
            | ScheduleError::UserLimit(_)
            | ScheduleError::Contention(_)
            | ScheduleError::Engine(_)
            | ScheduleError::Store(_) => {}
        }
    }
    all
}

fn auth_errors() -> Vec<AuthError> {
    let all = vec![
        AuthError::Missing,
        AuthError::invalid("x"),
        AuthError::Expired,
    ];
    for e in &all {
        match e {
            AuthError::Missing | AuthError::Invalid(_) | AuthError::Expired => {}
        }
    }
    all
}

fn assert_published(e: &AppError, from: &str, table: &HashMap<String, u16>) {
    let code = e.code.as_str();
    let status = table
        .get(code)
        .unwrap_or_else(|| panic!("{from} became {code}, which docs/ERRORS.md does not list"));
    assert_eq!(
        *status,
        e.status(),
        "{from} became {code}: docs/ERRORS.md says {status}, the table {}",
        e.status()
    );
}

#[test]
fn every_error_becomes_a_published_row_with_its_status() {
    let table = published();
    assert_eq!(
        table.len(),
        Code::ALL.len(),
        "docs/ERRORS.md and the table have the same rows"
    );
    for code in Code::ALL {
        assert_published(&AppError::new(*code, "x"), code.as_str(), &table);
    }
    for e in engine_errors() {
        let from = format!("{e:?}");
        assert_published(&AppError::engine(e, "server message"), &from, &table);
    }
    for e in agent_errors() {
        let from = format!("{e:?}");
        assert_published(&AppError::agent(e), &from, &table);
    }
    for e in auth_errors() {
        assert_published(&AppError::auth(&e), &format!("{e:?}"), &table);
    }
    for e in schedule_errors() {
        let from = format!("{e:?}");
        assert_published(&AppError::schedule(e), &from, &table);
    }
}

#[test]
fn the_rows_are_the_expected_ones() {
    let code = |e: EngineError| AppError::engine(e, "m").code;
    assert_eq!(
        code(EngineError::UnknownExecution("e".into())),
        Code::ExecutionNotFound
    );
    assert_eq!(
        code(EngineError::Store(StoreError::Unavailable("down".into()))),
        Code::DatabaseUnavailable
    );
    assert_eq!(code(EngineError::ShuttingDown), Code::ServerShuttingDown);
    // Server-side failures never show their cause.
    let internal = AppError::engine(EngineError::Internal("secret".into()), "Failed to x");
    assert_eq!(
        (internal.code, internal.message.as_str()),
        (Code::Internal, "Failed to x")
    );
    assert_eq!(
        AppError::agent(AgentError::Model(ModelError::of(
            ModelErrorKind::RateLimited,
            "slow down"
        )))
        .code,
        Code::ModelRateLimited
    );
    assert_eq!(AppError::auth(&AuthError::Expired).code, Code::TokenExpired);
    let schedule = |e: ScheduleError| AppError::schedule(e).code;
    assert_eq!(
        schedule(ScheduleError::NotFound("s".into())),
        Code::ScheduleNotFound
    );
    assert_eq!(schedule(ScheduleError::UserLimit(100)), Code::ScheduleLimit);
    assert_eq!(
        schedule(ScheduleError::Store(StoreError::Unavailable("down".into()))),
        Code::DatabaseUnavailable
    );
    assert_eq!(
        schedule(ScheduleError::Engine(EngineError::WorkflowNotFound(
            "w".into()
        ))),
        Code::WorkflowNotFound
    );
}
