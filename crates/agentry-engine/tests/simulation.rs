//! A deterministic simulation of the engine (issue 23, item 8), after TigerBeetle's VOPR and
//! FoundationDB's simulation: seeded runs of many workflows (every step type, suspensions,
//! resumes, cancels, retries, time-outs, deadlines, durable sleeps, sub-workflows, an agent) on
//! several engines sharing one in-memory store and one manual clock, with faults injected at
//! the stores' writes (a database error before or after the write, a crash, a lost lease) and
//! by the driver (a crash between writes, a node that froze, duplicate and racing resumes and
//! cancels, timers fired late). After each run the faults stop, every execution is driven to
//! rest, and the invariants are checked on the store: see `simulation/check.rs`.
//!
//! `cargo test -p agentry-engine --test simulation` runs the fixed seeds 0..200; `SEEDS=N` runs
//! N seeds (from `SEED_FROM`, default 0); `SEED=n` runs one and prints its trace with
//! `SIM_TRACE=1`; `SIM_REPLAY=1` runs each seed twice and fails if a run differs. A failure names the seed (`SEED=<n>`), its plan, its faults and the end of
//! its trace. `SIM_ALLOW_INFRA_ERRORS=1` turns one invariant (an injected database error must
//! never end a workflow in `error`) into a note.
//!
//! Runs are single-threaded on paused tokio time, and every choice comes from the seed, so a
//! seed replays the same run (`a_seed_replays_the_same_way`).

#[path = "simulation/check.rs"]
mod check;
#[path = "simulation/driver.rs"]
mod driver;
#[path = "simulation/rng.rs"]
mod rng;
#[path = "simulation/workflows.rs"]
mod workflows;
#[path = "simulation/world.rs"]
mod world;

use std::time::Instant;

use driver::{Report, run_seed};

/// The seeds CI runs.
const DEFAULT_SEEDS: u64 = 200;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0")
}

fn describe(r: &Report) -> String {
    let mut s = format!(
        "SEED={} broke {} invariant(s):\n",
        r.seed,
        r.violations.len()
    );
    for v in &r.violations {
        s += &format!("  - {v}\n");
    }
    s += "plan:\n";
    for p in &r.plan {
        s += &format!("  {p}\n");
    }
    s += &format!("faults injected ({}):\n", r.faults.len());
    for f in &r.faults {
        s += &format!("  {f}\n");
    }
    s += &format!("stats: {}\nlast lines of the trace:\n", r.stats);
    for l in &r.tail {
        s += &format!("  {l}\n");
    }
    s += &format!(
        "reproduce: SEED={} SIM_TRACE=1 cargo test -p agentry-engine --test simulation -- --nocapture simulation\n",
        r.seed
    );
    s
}

#[test]
fn simulation() {
    let strict = !env_flag("SIM_ALLOW_INFRA_ERRORS");
    let seeds: Vec<u64> = match (env_u64("SEED"), env_u64("SEEDS")) {
        (Some(seed), _) => vec![seed],
        (None, n) => {
            let from = env_u64("SEED_FROM").unwrap_or(0);
            (from..from + n.unwrap_or(DEFAULT_SEEDS)).collect()
        }
    };
    let keep_trace = env_flag("SIM_TRACE");
    let replay = env_flag("SIM_REPLAY");
    let mut diverged: Vec<u64> = Vec::new();
    let began = Instant::now();
    let mut failed: Vec<Report> = Vec::new();
    for &seed in &seeds {
        let report = run_seed(seed, strict, keep_trace);
        if replay && run_seed(seed, strict, false).digest != report.digest {
            eprintln!("SEED={seed}: replayed differently");
            diverged.push(seed);
        }
        if keep_trace {
            for line in &report.trace {
                println!("{line}");
            }
            println!("stats: {}", report.stats);
        }
        if !report.violations.is_empty() {
            for v in &report.violations {
                eprintln!("SEED={seed}: {v}");
            }
            failed.push(report);
        }
    }
    let took = began.elapsed();
    eprintln!(
        "simulation: {} seeds in {:.1} s, {} failed{}",
        seeds.len(),
        took.as_secs_f64(),
        failed.len(),
        if strict {
            ""
        } else {
            " (SIM_ALLOW_INFRA_ERRORS: errors from injected faults allowed)"
        }
    );
    assert!(
        diverged.is_empty(),
        "seeds that replayed differently (SIM_REPLAY): {diverged:?}"
    );
    if let Some(first) = failed.first() {
        let failing: Vec<String> = failed.iter().map(|r| r.seed.to_string()).collect();
        panic!(
            "{} of {} seeds broke an invariant: {}\n\n{}",
            failed.len(),
            seeds.len(),
            failing.join(" "),
            describe(first)
        );
    }
}

#[test]
fn a_seed_replays_the_same_way() {
    for seed in [3, 17, 101] {
        let a = run_seed(seed, true, false);
        let b = run_seed(seed, true, false);
        assert_eq!(
            a.digest, b.digest,
            "SEED={seed} ran differently twice ({} / {})",
            a.stats, b.stats
        );
    }
}
