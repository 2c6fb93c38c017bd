//! Crash points: where a durability test can stop the process, deterministically.

use std::sync::Arc;

/// A point in a step's life where a test can stop the process, to prove what a crash there
/// leaves on disk and that recovery finishes the run with no step committed twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// The step's start is recorded (its attempt counted); it has not run.
    BeforeStep,
    /// The step ran (its effect happened); its checkpoint is not written.
    AfterEffect,
    /// The step's checkpoint is written.
    AfterCheckpoint,
}

impl CrashPoint {
    /// `before-step`, `after-effect`, `after-checkpoint`.
    pub fn as_str(self) -> &'static str {
        match self {
            CrashPoint::BeforeStep => "before-step",
            CrashPoint::AfterEffect => "after-effect",
            CrashPoint::AfterCheckpoint => "after-checkpoint",
        }
    }

    pub fn parse(s: &str) -> Option<CrashPoint> {
        [
            CrashPoint::BeforeStep,
            CrashPoint::AfterEffect,
            CrashPoint::AfterCheckpoint,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
    }
}

/// What a [`CrashHook`] calls: the point, the workflow id, the step id and the attempt.
pub type CrashFn = dyn Fn(CrashPoint, &str, &str, u32) + Send + Sync;

/// Called at every [`CrashPoint`] of every top-level step with the workflow and step ids; a
/// test harness makes it stop the process at the one it names.
#[derive(Clone)]
pub struct CrashHook(pub Arc<CrashFn>);

impl std::fmt::Debug for CrashHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CrashHook")
    }
}
