//! The driver: one seed's run. It starts nodes, then picks actions with the seeded RNG (start,
//! resume, duplicate and racing resumes, cancel, suspend, clock moves, timers, heartbeats,
//! crashes, restarts, lease expiries and thefts) while the stores inject faults at writes; then
//! turns faults off, drives every execution to rest, and checks the invariants.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentry_engine::state::Status;
use agentry_engine::store::{ExecutionRecord, ExecutionStore, Family, ListQuery};
use agentry_engine::{Engine, EngineConfig, ExecuteOptions, ExecutionId, RunHandle, WorkflowId};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::check;
use crate::rng::Rng;
use crate::workflows::{EchoAgent, Effects, Spec, build, catalog};
use crate::world::{Fault, FaultPlan, FaultyStore, Node, NodeClock, SimTime, Trace, World, lock};

/// The lease ttl: no lease expires by itself during a run (the in-memory store measures it by
/// the wall clock); expiries are simulated by releasing a node's leases.
const LEASE_TTL: Duration = Duration::from_secs(3600);

/// The most node incarnations one run creates.
const MAX_VIEWS: u32 = 12;

/// How one seed runs: drawn from the seed, printed with a failure.
#[derive(Debug, Clone)]
pub struct Config {
    pub nodes: usize,
    pub actions: usize,
    pub fault_p: f64,
    pub kinds: Vec<Fault>,
    pub crashes: u32,
    pub steals: u32,
}

impl Config {
    fn random(rng: &mut Rng) -> Self {
        let nodes = 1 + rng.weighted(&[1, 2, 2]);
        let actions = rng.range(30, 70) as usize;
        let fault_p = *rng.pick(&[0.0, 0.03, 0.06, 0.12]);
        use Fault::*;
        let kinds = match rng.weighted(&[3, 3, 2, 1, 1]) {
            0 => Fault::ALL.to_vec(),
            1 => vec![CrashBefore, CrashAfter, StealBefore, StealAfter],
            2 => vec![FailBefore, FailAfter],
            3 => vec![CrashBefore, CrashAfter],
            _ => vec![StealBefore, StealAfter],
        };
        Self {
            nodes,
            actions,
            fault_p,
            kinds,
            crashes: rng.range(0, 4) as u32,
            steals: rng.range(0, 4) as u32,
        }
    }
}

/// What one started execution is, and what its client was told.
#[derive(Debug, Clone)]
pub struct Started {
    pub workflow: String,
    pub input: Value,
    /// A start of it returned `Ok` (the execution is acknowledged).
    pub acked: bool,
    /// Its last start returned an error (the client may retry with the same id).
    pub failed: bool,
}

/// Resumes (and timers) racing for one suspension: of them, at most one may win.
#[derive(Debug, Clone)]
pub struct Group {
    pub exec: String,
    pub what: String,
    /// Per racer: who, and its answer once it came.
    pub results: Vec<(String, Option<Answer>)>,
}

/// What a resume (or a timer) was told (why it lost is in the trace).
#[derive(Debug, Clone)]
pub struct Answer {
    pub won: bool,
    /// For a winner, the number of the `workflow-start` its resume wrote: it names the
    /// suspension the resume ended.
    pub seq: Option<i64>,
}

#[derive(Debug, Default, Clone)]
pub struct Outcomes {
    pub starts: BTreeMap<String, Started>,
    pub groups: Vec<Group>,
    /// Per execution, the answers of its cancels (`Ok` or the error).
    pub cancels: BTreeMap<String, Vec<Result<(), String>>>,
}

/// One seed's result.
pub struct Report {
    pub seed: u64,
    pub violations: Vec<String>,
    pub plan: Vec<String>,
    pub faults: Vec<String>,
    pub tail: Vec<String>,
    pub trace: Vec<String>,
    pub digest: u64,
    pub stats: String,
}

/// Runs one seed on a single-threaded runtime with paused time.
pub fn run_seed(seed: u64, strict_infra: bool, keep_trace: bool) -> Report {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let report = rt.block_on(async move {
        let sim = Sim::new(seed);
        sim.run(strict_infra, keep_trace).await
    });
    drop(rt);
    report
}

struct Sim {
    seed: u64,
    rng: Rng,
    cfg: Config,
    world: Arc<World>,
    specs: Vec<Spec>,
    fx: Arc<Effects>,
    out: Arc<Mutex<Outcomes>>,
    next_exec: u32,
    next_token: u32,
    next_name: u32,
    next_view: u32,
}

/// The ids of `rec`, as the engine takes them.
fn ids(rec: &ExecutionRecord) -> (WorkflowId, ExecutionId) {
    (
        WorkflowId::from(&rec.workflow_id),
        ExecutionId::from(&rec.id),
    )
}

/// The manual clock's start. Before the wall clock on purpose: the in-memory store finds due
/// timers by the wall clock, so every deadline looks due to it, and the engine (which checks a
/// deadline against its own clock before it fires it) decides by the simulated time.
fn epoch() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2020-01-01T00:00:00Z")
        .expect("a date")
        .with_timezone(&Utc)
}

impl Sim {
    fn new(seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let cfg = Config::random(&mut rng);
        let specs = catalog(&mut rng, 4);
        let trace = Arc::new(Trace::default());
        let faults = FaultPlan::new(
            rng.fork(),
            cfg.fault_p,
            cfg.kinds.clone(),
            cfg.crashes,
            cfg.steals,
        );
        let clock = Arc::new(SimTime::new(epoch()));
        let world = Arc::new(World::new(clock, trace.clone(), faults));
        Self {
            seed,
            rng,
            cfg,
            world,
            specs,
            fx: Arc::new(Effects::new(trace)),
            out: Arc::new(Mutex::new(Outcomes::default())),
            next_exec: 0,
            next_token: 0,
            next_name: 0,
            next_view: 0,
        }
    }

    fn trace(&self, line: String) {
        self.world.trace.line(line);
    }

    fn plan(&self) -> Vec<String> {
        let mut plan = vec![format!(
            "seed {}: {} nodes, {} actions, fault chance {} per write, kinds [{}], crash budget {}, steal budget {}",
            self.seed,
            self.cfg.nodes,
            self.cfg.actions,
            self.cfg.fault_p,
            self.cfg
                .kinds
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(", "),
            self.cfg.crashes,
            self.cfg.steals
        )];
        plan.extend(self.specs.iter().map(Spec::describe));
        plan
    }

    async fn run(mut self, strict_infra: bool, keep_trace: bool) -> Report {
        for _ in 0..self.cfg.nodes {
            let name = self.new_name();
            self.spawn_node(name, false);
        }
        for _ in 0..self.cfg.actions {
            self.ensure_live_node();
            self.act().await;
            let pause = self.rng.below(30);
            settle(Duration::from_millis(pause)).await;
        }
        lock(&self.world.faults).enabled = false;
        self.trace("-- faults off: quiescing".into());
        let quiet = self.quiesce().await;
        let out = lock(&self.out).clone();
        let by_id: HashMap<String, Spec> = self
            .specs
            .iter()
            .map(|s| (s.id.clone(), s.clone()))
            .collect();
        let mut violations = lock(&self.world.violations).clone();
        let (found, stats) =
            check::check(&self.world, &by_id, &self.fx, &out, quiet, strict_infra).await;
        violations.extend(found);
        let violations: Vec<String> = violations
            .into_iter()
            .map(|v| self.world.trace.normalize(v))
            .collect();
        let trace = &self.world.trace;
        let report = Report {
            seed: self.seed,
            violations,
            plan: self.plan(),
            faults: trace.faults(),
            tail: trace.tail(60),
            trace: if keep_trace { trace.all() } else { Vec::new() },
            digest: trace.digest(),
            stats: format!("{stats}, {} trace lines", trace.len()),
        };
        // The engines hold the world (through their stores): let them go.
        lock(&self.world.nodes).clear();
        report
    }

    fn new_name(&mut self) -> String {
        let name = format!("n{}", self.next_name);
        self.next_name += 1;
        name
    }

    /// A new incarnation of node `name`; with `recover_own` it continues the executions its
    /// previous incarnation held (a restart under the same node id).
    fn spawn_node(&mut self, name: String, recover_own: bool) -> Node {
        let view = self.next_view;
        self.next_view += 1;
        let dead = Arc::new(AtomicBool::new(false));
        let store = Arc::new(FaultyStore {
            world: self.world.clone(),
            node: name.clone(),
            view,
            dead: dead.clone(),
        });
        let clock = Arc::new(NodeClock {
            time: self.world.clock.clone(),
            dead: dead.clone(),
        });
        let engine = Engine::with(
            store,
            clock,
            EngineConfig {
                node_id: name.clone(),
                lease_ttl: LEASE_TTL,
                suspend_wait: Duration::from_secs(1),
                ..EngineConfig::default()
            },
        );
        for spec in &self.specs {
            engine
                .register(build(spec, &self.fx))
                .expect("registered once");
        }
        engine.set_agent_runner(Arc::new(EchoAgent(self.fx.clone())));
        let node = Node {
            name,
            view,
            engine,
            dead,
            replaced: false,
        };
        lock(&self.world.nodes).push(node.clone());
        self.trace(format!(
            "node {} up{}",
            node.label(),
            if recover_own { " (restart)" } else { "" }
        ));
        if recover_own {
            let n = node.clone();
            let trace = self.world.trace.clone();
            tokio::spawn(async move {
                let r = n.engine.recover_own().await;
                trace.line(format!(
                    "{} recover_own: {:?}",
                    n.label(),
                    r.map_err(|e| e.to_string())
                ));
            });
        }
        node
    }

    fn live(&self) -> Vec<Node> {
        self.world.live_nodes()
    }

    fn pick_live(&mut self) -> Node {
        let live = self.live();
        self.rng.pick(&live).clone()
    }

    /// Dead incarnations nobody replaced yet.
    fn waiting_dead(&self) -> Vec<Node> {
        lock(&self.world.nodes)
            .iter()
            .filter(|n| n.is_dead() && !n.replaced)
            .cloned()
            .collect()
    }

    /// Names that hold leases but have no live incarnation: their leases expire only when a
    /// recovery is told they did.
    fn orphan_names(&self) -> Vec<String> {
        let nodes = lock(&self.world.nodes);
        let mut names: Vec<String> = nodes
            .iter()
            .filter(|n| n.is_dead())
            .map(|n| n.name.clone())
            .filter(|name| !nodes.iter().any(|m| &m.name == name && !m.is_dead()))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    fn ensure_live_node(&mut self) {
        if !self.live().is_empty() {
            return;
        }
        let dead = self.waiting_dead();
        let name = match dead.last() {
            Some(d) => {
                self.mark_replaced(d.view);
                d.name.clone()
            }
            None => self.new_name(),
        };
        self.spawn_node(name, true);
    }

    fn mark_replaced(&self, view: u32) {
        for n in lock(&self.world.nodes).iter_mut() {
            if n.view == view {
                n.replaced = true;
            }
        }
    }

    /// The known top-level executions in `status`, as stored now.
    async fn execs_in(&self, status: Status) -> Vec<ExecutionRecord> {
        let ids: Vec<String> = lock(&self.out).starts.keys().cloned().collect();
        let mut found = Vec::new();
        for id in ids {
            if let Ok(Some(rec)) = self.world.inner.get(&id).await
                && rec.state.status() == status
            {
                found.push(rec);
            }
        }
        found
    }

    /// One action, chosen by the RNG among those that make sense now.
    async fn act(&mut self) {
        let suspended = self.execs_in(Status::Suspended).await;
        let running = self.execs_in(Status::Running).await;
        let failed_starts: Vec<String> = lock(&self.out)
            .starts
            .iter()
            .filter(|(_, s)| s.failed)
            .map(|(id, _)| id.clone())
            .collect();
        let live = self.live();
        let (crashes, steals) = {
            let f = lock(&self.world.faults);
            (f.crashes_left, f.steals_left)
        };
        let can_restart = !self.waiting_dead().is_empty() && self.next_view < MAX_VIEWS;
        let mut names: Vec<&str> = live.iter().map(|n| n.name.as_str()).collect();
        names.sort();
        names.dedup();
        let w = |ok: bool, w: u32| if ok { w } else { 0 };
        let weights = [
            5,                                                  // start
            w(!failed_starts.is_empty(), 2),                    // retry a failed start
            w(!suspended.is_empty(), 6),                        // resume (+ races)
            w(!suspended.is_empty() || !running.is_empty(), 1), // cancel
            w(!running.is_empty(), 1),                          // suspend request
            5,                                                  // move the clock
            2,                                                  // fire due timers
            2,                                                  // heartbeat
            w(crashes > 0 && self.next_view < MAX_VIEWS, 1),    // crash a node
            w(can_restart, 3),                                  // restart a dead node
            w(!self.orphan_names().is_empty(), 1),              // their leases expire
            w(steals > 0 && names.len() > 1, 1),                // a node freezes: steal
        ];
        match self.rng.weighted(&weights) {
            0 => self.start_new(),
            1 => {
                let id = self.rng.pick(&failed_starts).clone();
                self.start(id);
            }
            2 => {
                let rec = self.rng.pick(&suspended).clone();
                self.resume(rec);
            }
            3 => {
                let mut all = suspended.clone();
                all.extend(running.iter().cloned());
                let rec = self.rng.pick(&all).clone();
                let n = if self.rng.chance(0.3) { 2 } else { 1 };
                for _ in 0..n {
                    let node = self.pick_live();
                    self.cancel(node, &rec, None);
                }
            }
            4 => {
                let rec = self.rng.pick(&running).clone();
                let node = self.pick_live();
                let trace = self.world.trace.clone();
                let (wf, id) = ids(&rec);
                tokio::spawn(async move {
                    let r = node.engine.suspend(&wf, &id, "asked".into()).await;
                    trace.line(format!(
                        "{} suspend {id}: {}",
                        node.label(),
                        match r {
                            Ok(r) => r.state.status().to_string(),
                            Err(e) => e.to_string(),
                        }
                    ));
                });
            }
            5 => {
                let d = match self.rng.weighted(&[5, 3, 1]) {
                    0 => Duration::from_millis(self.rng.range(50, 3000)),
                    1 => Duration::from_secs(self.rng.range(10, 300)),
                    // Late: every timer due by now fires long after its deadline.
                    _ => Duration::from_secs(self.rng.range(3600, 3 * 3600)),
                };
                self.world.clock.advance(d);
                self.trace(format!("clock +{}ms", d.as_millis()));
            }
            6 => {
                let node = self.pick_live();
                let trace = self.world.trace.clone();
                tokio::spawn(async move {
                    let r = node.engine.fire_due_timers().await;
                    trace.line(format!(
                        "{} fired timers: {:?}",
                        node.label(),
                        r.map_err(|e| e.to_string())
                    ));
                });
            }
            7 => {
                let node = self.pick_live();
                self.trace(format!("{} heartbeat", node.label()));
                tokio::spawn(async move { node.engine.heartbeat().await });
            }
            8 => {
                let node = self.pick_live();
                lock(&self.world.faults).crashes_left -= 1;
                node.dead.store(true, Ordering::SeqCst);
                self.trace(format!("node {} crashed (between writes)", node.label()));
                self.world
                    .trace
                    .fault(format!("FAULT crash of {} between writes", node.label()));
            }
            9 => {
                let dead = self.waiting_dead();
                let d = self.rng.pick(&dead).clone();
                self.mark_replaced(d.view);
                if self.rng.chance(0.6) {
                    self.spawn_node(d.name.clone(), true);
                } else {
                    let name = self.new_name();
                    self.spawn_node(name, false);
                }
            }
            10 => {
                for name in self.orphan_names() {
                    let n = self.world.inner.release_leases(&name).await.unwrap_or(0);
                    self.trace(format!("leases of dead {name} expired ({n})"));
                }
                let node = self.pick_live();
                self.recover(node);
            }
            _ => {
                let victim = self.pick_live();
                let thieves: Vec<Node> = self
                    .live()
                    .into_iter()
                    .filter(|n| n.name != victim.name)
                    .collect();
                let thief = self.rng.pick(&thieves).clone();
                lock(&self.world.faults).steals_left -= 1;
                let n = self
                    .world
                    .inner
                    .release_leases(&victim.name)
                    .await
                    .unwrap_or(0);
                self.world.trace.fault(format!(
                    "FAULT {} froze: its leases expired ({n}); {} recovers",
                    victim.label(),
                    thief.label()
                ));
                self.recover(thief);
            }
        }
    }

    fn recover(&self, node: Node) {
        let trace = self.world.trace.clone();
        tokio::spawn(async move {
            let r = node.engine.recover().await;
            trace.line(format!(
                "{} recover: {:?}",
                node.label(),
                r.map_err(|e| e.to_string())
            ));
        });
    }

    fn start_new(&mut self) {
        let tops: Vec<&Spec> = self.specs.iter().filter(|s| s.top).collect();
        let spec = (*self.rng.pick(&tops)).clone();
        let id = format!("x{}", self.next_exec);
        self.next_exec += 1;
        let fail = spec.has_fail() && self.rng.chance(0.3);
        let input = json!({"v": self.rng.below(100), "fail": fail});
        lock(&self.out).starts.insert(
            id.clone(),
            Started {
                workflow: spec.id.clone(),
                input,
                acked: false,
                failed: false,
            },
        );
        self.start(id);
    }

    /// Starts `id` (again, for a retried start: the idempotent start rejoins it).
    fn start(&mut self, id: String) {
        let node = self.pick_live();
        let (workflow, input) = {
            let mut out = lock(&self.out);
            let s = out.starts.get_mut(&id).expect("a known start");
            s.failed = false;
            (s.workflow.clone(), s.input.clone())
        };
        self.trace(format!("{} start {id} {workflow} {input}", node.label()));
        let out = self.out.clone();
        let trace = self.world.trace.clone();
        tokio::spawn(async move {
            let options = ExecuteOptions {
                execution_id: Some(ExecutionId::from(&id)),
                ..ExecuteOptions::default()
            };
            let r = node
                .engine
                .start(&WorkflowId::from(workflow), input, options)
                .await;
            let mut out = lock(&out);
            let s = out.starts.get_mut(&id).expect("a known start");
            match r {
                Ok(_handle) => {
                    s.acked = true;
                    trace.line(format!("{} start {id}: ok", node.label()));
                }
                Err(e) => {
                    s.failed = true;
                    trace.line(format!("{} start {id}: {e}", node.label()));
                }
            }
        });
    }

    /// A resume of a suspended execution, alone or in a race: the same resume delivered twice
    /// (at once, or one later), against a cancel, or against its timer fired late.
    fn resume(&mut self, rec: ExecutionRecord) {
        let token = format!("r{}", self.next_token);
        self.next_token += 1;
        let deadline = rec.state.suspension().and_then(|s| s.deadline);
        let variant = self
            .rng
            .weighted(&[4, 2, 1, 1, if deadline.is_some() { 2 } else { 0 }]);
        let what = [
            "resume",
            "duplicate resume",
            "resume, again later",
            "resume vs cancel",
            "resume vs late timer",
        ][variant];
        let racers = match variant {
            0 | 3 => 1,
            _ => 2,
        };
        let group = {
            let mut out = lock(&self.out);
            out.groups.push(Group {
                exec: rec.id.clone(),
                what: what.into(),
                results: Vec::new(),
            });
            out.groups.len() - 1
        };
        self.trace(format!("{what} {} token {token}", rec.id));
        if variant == 4
            && let Some(deadline) = deadline
        {
            let now = self.world.clock.now();
            let late = Duration::from_secs(self.rng.range(1, 7200));
            let by = (deadline - now).to_std().unwrap_or(Duration::ZERO) + late;
            self.world.clock.advance(by);
            self.trace(format!("clock +{}ms (past the deadline)", by.as_millis()));
        }
        for slot in 0..racers {
            let node = self.pick_live();
            let delay =
                (variant == 2 && slot == 1).then(|| Duration::from_millis(self.rng.range(1, 50)));
            let timer = variant == 4 && slot == 1;
            self.spawn_racer(node, group, &rec, token.clone(), delay, timer);
        }
        if variant == 3 {
            let node = self.pick_live();
            let delay = Duration::from_millis(self.rng.below(3));
            self.cancel(node, &rec, Some(delay));
        }
    }

    fn spawn_racer(
        &self,
        node: Node,
        group: usize,
        rec: &ExecutionRecord,
        token: String,
        delay: Option<Duration>,
        timer: bool,
    ) {
        let who = format!(
            "{} {}",
            node.label(),
            if timer { "timer" } else { "resume" }
        );
        let slot = {
            let mut out = lock(&self.out);
            let g = &mut out.groups[group];
            g.results.push((who.clone(), None));
            g.results.len() - 1
        };
        let (out, trace) = (self.out.clone(), self.world.trace.clone());
        let (wf, id) = ids(rec);
        let delivery = format!("{token}.{slot}");
        tokio::spawn(async move {
            if let Some(d) = delay {
                tokio::time::sleep(d).await;
            }
            // A winner's run announces its `workflow-start` first: its number names the
            // suspension it ended.
            let won = |mut h: RunHandle| match h.events.try_recv() {
                Ok(ev) => ev.seq,
                Err(_) => None,
            };
            let (won, why, seq) = if timer {
                match node.engine.fire_timer(&id).await {
                    Ok(Some(h)) => (true, "fired".to_owned(), won(h)),
                    Ok(None) => (false, "nothing to fire".to_owned(), None),
                    Err(e) => (false, e.to_string(), None),
                }
            } else {
                // Each delivery has its own id (a duplicate carries the same token): a step
                // run is named by the delivery that began it.
                let data = json!({ "token": token, "delivery": delivery });
                match node.engine.start_resume(&wf, &id, data, None).await {
                    Ok(h) => (true, "resumed".to_owned(), won(h)),
                    Err(e) => (false, e.to_string(), None),
                }
            };
            trace.line(format!("{who} {id}: {why} {seq:?}"));
            let answer = Answer { won, seq };
            lock(&out).groups[group].results[slot].1 = Some(answer);
        });
    }

    fn cancel(&self, node: Node, rec: &ExecutionRecord, delay: Option<Duration>) {
        let (out, trace) = (self.out.clone(), self.world.trace.clone());
        let (wf, id) = ids(rec);
        self.trace(format!("{} cancel {id}", node.label()));
        tokio::spawn(async move {
            if let Some(d) = delay {
                tokio::time::sleep(d).await;
            }
            let r = node
                .engine
                .cancel(&wf, &id, Some("simulated".into()))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string());
            trace.line(format!("{} cancel {id}: {r:?}", node.label()));
            lock(&out)
                .cancels
                .entry(id.into_string())
                .or_default()
                .push(r);
        });
    }

    /// With faults off: moves time on, fires timers and recovers orphans until nothing runs.
    /// Returns whether it got there.
    async fn quiesce(&mut self) -> bool {
        self.ensure_live_node();
        for round in 0..60 {
            settle(Duration::from_millis(200)).await;
            self.world.clock.advance(Duration::from_secs(1800));
            settle(Duration::from_millis(200)).await;
            let live = self.live();
            for node in &live {
                if let Err(e) = node.engine.fire_due_timers().await {
                    self.trace(format!("{} fire_due_timers: {e}", node.label()));
                }
            }
            settle(Duration::from_millis(200)).await;
            let running = self.all_in(Status::Running).await;
            let busy: usize = live.iter().map(|n| n.engine.running_here()).sum();
            if running.is_empty() && busy == 0 {
                self.trace(format!("-- quiet after {round} rounds"));
                return true;
            }
            if busy == 0 {
                // Nothing runs them: their holders died, or lost the answer of the write that
                // made them running. Their leases expire; a live node claims them.
                let mut names: Vec<String> = running
                    .iter()
                    .filter_map(|r| r.lease.as_ref().map(|l| l.node.clone()))
                    .collect();
                names.sort();
                names.dedup();
                for name in names {
                    let _ = self.world.inner.release_leases(&name).await;
                }
                let node = live[round % live.len()].clone();
                let r = node.engine.recover().await;
                self.trace(format!(
                    "{} recover (quiescing): {:?}",
                    node.label(),
                    r.map_err(|e| e.to_string())
                ));
            }
        }
        false
    }

    async fn all_in(&self, status: Status) -> Vec<ExecutionRecord> {
        self.world
            .inner
            .list(&ListQuery {
                family: Family::All,
                workflow_id: None,
                status: Some(status),
                owner: None,
                before: None,
                limit: 100_000,
            })
            .await
            .unwrap_or_default()
    }
}

/// Lets every task run until all wait (paused time moves on by itself when nothing can run).
async fn settle(d: Duration) {
    tokio::task::yield_now().await;
    tokio::time::sleep(d).await;
}
