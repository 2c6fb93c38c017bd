//! agentry-core: the domain crates of agentry under the paths they had before the split
//! (`agentry_core::engine`, `agentry_core::agent`, `agentry_core::schedule`, ...).
//! New code names the crates themselves: `agentry-engine`, `agentry-agents`, `agentry-schedules`.

pub use agentry_agents as agent;
pub use agentry_engine::*;
pub use agentry_schedules as schedule;
pub use agentry_schedules::{Overlap, Schedule, ScheduleSpec, ScheduleStore, Scheduler};
