//! The invariants, checked after a run has quiesced, by reading the store (not the engines'
//! memory), the effect table and what the clients were told.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use agentry_engine::event::EventKind;
use agentry_engine::state::Status;
use agentry_engine::store::{ExecutionRecord, ExecutionStore, Family, ListQuery, StepStatus};
use serde_json::Value;

use crate::driver::Outcomes;
use crate::workflows::{Effect, Effects, Shape, Spec, expected, v_of};
use crate::world::{World, lock};

/// Whether an `error` an execution ended in is one the plan allows: the planned failure (its
/// input asked for it), or a step whose attempts crashes used up (documented: a crash never
/// grants an extra attempt). Anything else is an infrastructure fault turned into a workflow
/// failure.
fn allowed_error(rec: &ExecutionRecord) -> bool {
    let msg = rec.state.error().unwrap_or_default();
    let asked = rec.input.get("fail") == Some(&Value::Bool(true));
    (asked && msg.contains("planned failure")) || msg.contains("no attempt left")
}

pub async fn check(
    world: &World,
    specs: &HashMap<String, Spec>,
    fx: &Effects,
    out: &Outcomes,
    quiet: bool,
    strict_infra: bool,
) -> (Vec<String>, String) {
    let trace = &world.trace;
    let store = &world.inner;
    let mut v = Vec::new();
    let headers = store
        .list(&ListQuery {
            family: Family::All,
            workflow_id: None,
            status: None,
            owner: None,
            before: None,
            limit: 100_000,
        })
        .await
        .unwrap_or_default();
    let mut records: BTreeMap<String, ExecutionRecord> = BTreeMap::new();
    for h in headers {
        if let Ok(Some(rec)) = store.get(&h.id).await {
            records.insert(h.id.clone(), rec);
        }
    }
    let name = |id: &str| trace.name(id);

    // Every execution comes to rest: final, or suspended waiting for someone.
    let running: Vec<String> = records
        .values()
        .filter(|r| r.state.status() == Status::Running)
        .map(|r| {
            let lease = r
                .lease
                .as_ref()
                .map(|l| format!("{}@{}", l.node, l.epoch))
                .unwrap_or_default();
            format!(
                "{} (step {}, lease {lease})",
                name(&r.id),
                r.progress.next_step
            )
        })
        .collect();
    if !quiet || !running.is_empty() {
        v.push(format!(
            "at rest: still running after quiescing: {}",
            running.join(", ")
        ));
    }

    // Every acknowledged execution exists and is final or suspended.
    for (id, s) in &out.starts {
        if !s.acked {
            continue;
        }
        match records.get(id) {
            None => v.push(format!(
                "acknowledged: {id} was acknowledged and is not stored"
            )),
            Some(r) if r.state.status() == Status::Running => {} // reported above
            Some(_) => {}
        }
    }

    let claims = lock(&world.fence).claims.clone();
    let effects = lock(&fx.list).clone();
    let mut by_step: HashMap<(String, String), Vec<&Effect>> = HashMap::new();
    let mut seen: HashMap<&Effect, u32> = HashMap::new();
    for e in &effects {
        by_step
            .entry((e.exec.clone(), e.step.clone()))
            .or_default()
            .push(e);
        *seen.entry(e).or_default() += 1;
    }
    // Each run of a step (its attempt, and how it began) happens once.
    let mut dups: Vec<String> = seen
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(e, n)| {
            format!(
                "effects: {} {} attempt {} ({}) ran {n} times",
                name(&e.exec),
                e.step,
                e.attempt,
                e.entry
            )
        })
        .collect();
    dups.sort();
    v.extend(dups);

    let mut statuses: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut lost_resumes = 0;
    for (id, rec) in &records {
        let n = name(id);
        let status = rec.state.status();
        *statuses.entry(status.as_str()).or_default() += 1;
        let Some(spec) = specs.get(&rec.workflow_id) else {
            v.push(format!("{n}: unknown workflow {}", rec.workflow_id));
            continue;
        };

        // No infrastructure fault ends a workflow in error.
        if status == Status::Error && !allowed_error(rec) {
            let msg = format!(
                "no-error-from-faults: {n} ({}) ended in error: {}",
                rec.workflow_id,
                rec.state.error().unwrap_or_default()
            );
            if strict_infra {
                v.push(msg);
            } else {
                trace.line(format!("(allowed by SIM_ALLOW_INFRA_ERRORS) {msg}"));
            }
        }
        if status == Status::Error
            && rec
                .state
                .error()
                .unwrap_or_default()
                .contains("planned failure")
            && rec.input.get("fail") != Some(&Value::Bool(true))
        {
            v.push(format!("{n}: failed as planned but its input did not ask"));
        }

        // A completed execution computed what its workflow computes.
        if let Some(result) = rec.state.result() {
            let want = expected(spec, specs, v_of(&rec.input));
            if v_of(result) != want {
                v.push(format!(
                    "result: {n} ({}) returned v={} where the workflow computes {want}",
                    rec.workflow_id,
                    v_of(result)
                ));
            }
        }

        lost_resumes += check_log(world, rec, spec, &n, &mut v).await;
        check_effects(rec, spec, &by_step, &claims, &n, &mut v);
    }

    // Of the resumes (and timers) of one suspension, one wins: a winner learns the number of
    // the `workflow-start` its resume wrote, which names the suspension it ended.
    let mut winners: BTreeMap<(String, i64), Vec<String>> = BTreeMap::new();
    for g in &out.groups {
        for (who, answer) in &g.results {
            let Some(answer) = answer.as_ref().filter(|a| a.won) else {
                continue;
            };
            match answer.seq {
                Some(seq) => winners
                    .entry((g.exec.clone(), seq))
                    .or_default()
                    .push(format!("{who} ({})", g.what)),
                None => v.push(format!(
                    "one winner: {who} resumed {} ({}) and its run announced no start",
                    g.exec, g.what
                )),
            }
        }
    }
    for ((exec, seq), who) in winners {
        if who.len() > 1 {
            v.push(format!(
                "one winner: {} resumes of {exec} won the suspension ended at event {seq}: {}",
                who.len(),
                who.join(", ")
            ));
        }
    }

    // A cancel is answered `Ok` once, and sticks.
    for (id, answers) in &out.cancels {
        let ok = answers.iter().filter(|a| a.is_ok()).count();
        if ok > 1 {
            v.push(format!("cancel: {ok} cancels of {id} succeeded"));
        }
        let status = records.get(id).map(|r| r.state.status());
        if ok > 0 && status != Some(Status::Cancelled) {
            v.push(format!(
                "cancel: {id} was cancelled (acknowledged) and is {status:?}"
            ));
        }
    }

    let stats = format!(
        "{} executions {:?}, {} effects, {} faults, {lost_resumes} resumes lost to a crash",
        records.len(),
        statuses,
        effects.len(),
        trace.faults().len()
    );
    (v, stats)
}

/// The event log: numbered 1..n with no gap or duplicate, `last_event` = n, it begins with the
/// start, tells the state it ends in (one final event, last), each suspension is followed by
/// one resume or a cancel, and each step's completion is logged once, with its stored output.
///
/// Returns how many resumes a crash lost (not an invariant: noted in the stats): a step that
/// waits for a resume suspended again without completing after one. The resume data is not
/// stored; a crash after the resume, before the step's checkpoint, runs the step again without
/// it, and it waits again.
async fn check_log(
    world: &World,
    rec: &ExecutionRecord,
    spec: &Spec,
    n: &str,
    v: &mut Vec<String>,
) -> usize {
    let events = world
        .inner
        .events_after(&rec.id, 0, 1_000_000)
        .await
        .unwrap_or_default();
    for (i, e) in events.iter().enumerate() {
        if e.seq != Some(i as i64 + 1) {
            v.push(format!(
                "event log: {n} has event {:?} at position {} (a gap or a duplicate)",
                e.seq,
                i + 1
            ));
            return 0;
        }
    }
    if rec.last_event != events.len() as i64 {
        v.push(format!(
            "event log: {n} has {} events, its header says {}",
            events.len(),
            rec.last_event
        ));
    }
    if !matches!(
        events.first().map(|e| &e.kind),
        Some(EventKind::WorkflowStart { resumed: false, .. })
    ) {
        v.push(format!("event log: {n} does not begin with its start"));
    }
    let finals: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            matches!(
                e.kind,
                EventKind::WorkflowComplete { .. }
                    | EventKind::WorkflowError { .. }
                    | EventKind::WorkflowCancelled { .. }
            )
        })
        .map(|(i, _)| i)
        .collect();
    let status = rec.state.status();
    let last = events.last().map(|e| &e.kind);
    let tells = match status {
        Status::Completed => {
            matches!(last, Some(EventKind::WorkflowComplete { result }) if Some(result) == rec.state.result())
        }
        Status::Error => matches!(last, Some(EventKind::WorkflowError { .. })),
        Status::Cancelled => matches!(last, Some(EventKind::WorkflowCancelled { .. })),
        Status::Suspended => matches!(last, Some(EventKind::WorkflowSuspended { .. })),
        _ => true,
    };
    let final_count = usize::from(status.is_final());
    if !tells || finals.len() != final_count {
        v.push(format!(
            "event log: {n} is {status} but its log ends with {:?} ({} final events)",
            last.map(EventKind::type_name),
            finals.len()
        ));
    }
    for (i, e) in events.iter().enumerate() {
        if matches!(e.kind, EventKind::WorkflowSuspended { .. })
            && let Some(next) = events.get(i + 1)
            && !matches!(
                next.kind,
                EventKind::WorkflowStart { resumed: true, .. }
                    | EventKind::WorkflowCancelled { .. }
            )
        {
            v.push(format!(
                "event log: {n}'s suspension at {} is followed by {}",
                i + 1,
                next.kind.type_name()
            ));
        }
    }
    let mut completions: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for e in &events {
        if let EventKind::StepComplete {
            step_id, output, ..
        } = &e.kind
        {
            completions.entry(step_id).or_default().push(output);
        }
    }
    for (step, outputs) in completions {
        if outputs.len() > 1 {
            v.push(format!(
                "committed once: {n} step {step} was committed {} times",
                outputs.len()
            ));
        }
        let stored = rec.progress.steps.get(step).and_then(|r| r.output.as_ref());
        if stored != outputs.last().copied() {
            v.push(format!(
                "committed once: {n} step {step}'s logged output differs from its stored one"
            ));
        }
    }
    let mut lost = 0;
    let mut waiting_at: Option<usize> = None;
    for e in &events {
        match &e.kind {
            EventKind::WorkflowSuspended { suspension } => {
                let i = suspension.step_index;
                let waits = matches!(spec.shapes.get(i), Some(Shape::Wait { .. }));
                if waits && waiting_at == Some(i) {
                    lost += 1;
                    v.push(format!(
                        "resume kept: {n} waits again at step {i}: a resume was lost to a crash"
                    ));
                }
                waiting_at = Some(i);
            }
            EventKind::StepComplete { step_index, .. } if waiting_at == Some(*step_index) => {
                waiting_at = None;
            }
            _ => {}
        }
    }
    lost
}

/// Effects against committed step records: a committed output was produced by the attempt its
/// record names (exactly one run of it), no step ran again after its output was committed, and
/// a step ran in more attempts than its retries explain only when its execution was taken over
/// (a crash or a lost lease) at least as often.
fn check_effects(
    rec: &ExecutionRecord,
    spec: &Spec,
    by_step: &HashMap<(String, String), Vec<&Effect>>,
    claims: &HashMap<String, u32>,
    n: &str,
    v: &mut Vec<String>,
) {
    let no_effects = Vec::new();
    for (step_id, sr) in rec.progress.steps.iter() {
        let ran = by_step
            .get(&(rec.id.clone(), step_id.clone()))
            .unwrap_or(&no_effects);
        let finished = matches!(sr.status, StepStatus::Completed | StepStatus::Skipped);
        if finished && let Some(late) = ran.iter().find(|e| e.attempt > sr.attempt) {
            v.push(format!(
                "committed once: {n} step {step_id} committed by attempt {} ran again in attempt {} ({})",
                sr.attempt, late.attempt, late.entry
            ));
        }
        if !spec.is_leaf_step(step_id) {
            continue;
        }
        if sr.status == StepStatus::Completed
            && let Some(output) = &sr.output
        {
            let a = output.get("a").and_then(Value::as_u64).map(|a| a as u32);
            let entry = output.get("e").and_then(Value::as_str).unwrap_or("?");
            if a != Some(sr.attempt) {
                v.push(format!(
                    "fencing: {n} step {step_id} stored the output of attempt {a:?} in the record of attempt {}",
                    sr.attempt
                ));
            }
            let producers = ran
                .iter()
                .filter(|e| Some(e.attempt) == a && e.entry == entry)
                .count();
            if producers != 1 {
                v.push(format!(
                    "committed once: {n} step {step_id}'s output (attempt {a:?}, {entry}) was produced by {producers} runs"
                ));
            }
        }
        if sr.parent.is_none() {
            let attempts: BTreeSet<u32> = ran.iter().map(|e| e.attempt).collect();
            let failed: BTreeSet<u32> = sr.failures.iter().map(|f| f.attempt).collect();
            let unexplained: Vec<u32> = attempts
                .iter()
                .copied()
                .filter(|a| *a != sr.attempt && !failed.contains(a))
                .collect();
            let taken = claims.get(&rec.id).copied().unwrap_or(0);
            if unexplained.len() > taken as usize {
                v.push(format!(
                    "at-least-once: {n} step {step_id} ran in attempts {unexplained:?} beyond its record (attempt {}, failures {failed:?}) with {taken} takeovers",
                    sr.attempt
                ));
            }
        }
    }
}
