//! The simulated world: one in-memory database, one manual clock, and the nodes (engines) that
//! share them, each through a [`FaultyStore`] that injects faults at its writes and a
//! [`NodeClock`] that stops when its node crashes.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use agentry_engine::Engine;
use agentry_engine::clock::{Clock, ManualClock, Sleep};
use agentry_engine::event::WorkflowEvent;
use agentry_engine::state::Status;
use agentry_engine::store::{
    Claim, ExecutionRecord, ExecutionStore, InMemoryExecutionStore, Lease, ListQuery,
    PublishedEvent, StatusCount, StepRecord, StoreError,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio::sync::oneshot;

use crate::rng::Rng;

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a fault does to the write it hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The write fails with a database error and did not happen.
    FailBefore,
    /// The write happens, then fails with a database error: an ambiguous commit (the ack is
    /// lost).
    FailAfter,
    /// The node dies before the write (nothing of it happens; the node never answers again).
    CrashBefore,
    /// The node dies right after the write committed.
    CrashAfter,
    /// The node's leases expire and another node claims them, just before the write.
    StealBefore,
    /// The same, just after the write.
    StealAfter,
}

impl Fault {
    pub const ALL: [Fault; 6] = [
        Fault::FailBefore,
        Fault::FailAfter,
        Fault::CrashBefore,
        Fault::CrashAfter,
        Fault::StealBefore,
        Fault::StealAfter,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::FailBefore => "fail-before",
            Fault::FailAfter => "fail-after(ambiguous)",
            Fault::CrashBefore => "crash-before",
            Fault::CrashAfter => "crash-after",
            Fault::StealBefore => "lease-stolen-before",
            Fault::StealAfter => "lease-stolen-after",
        }
    }
}

/// The writes a fault can hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    Insert,
    Cas,
    RecordStep,
    Renew,
    Claim,
}

impl Write {
    fn name(self) -> &'static str {
        match self {
            Write::Insert => "insert",
            Write::Cas => "cas",
            Write::RecordStep => "record_step",
            Write::Renew => "renew",
            Write::Claim => "claim",
        }
    }

    fn allows(self, fault: Fault) -> bool {
        match fault {
            Fault::StealBefore | Fault::StealAfter => {
                matches!(self, Write::Cas | Write::RecordStep)
            }
            _ => true,
        }
    }
}

/// The run's record: every write, fault and driver action, in order, with execution ids made
/// stable (sub-workflow executions get random ids; they are named `c1`, `c2`, ... by first
/// appearance), so that two runs of a seed can be compared.
#[derive(Default)]
pub struct Trace {
    lines: Mutex<Vec<String>>,
    faults: Mutex<Vec<String>>,
    names: Mutex<HashMap<String, String>>,
}

impl Trace {
    /// The stable name of an execution id.
    pub fn name(&self, id: &str) -> String {
        // Top-level executions have stable ids already; `-` is "none".
        if id.starts_with('x') || id == "-" {
            return id.to_owned();
        }
        let mut names = lock(&self.names);
        let n = names.len() + 1;
        names
            .entry(id.to_owned())
            .or_insert_with(|| format!("c{n}"))
            .clone()
    }

    /// `text` with the raw ids it quotes (engine messages do) replaced by their names.
    pub fn normalize(&self, mut text: String) -> String {
        for (raw, name) in lock(&self.names).iter() {
            if text.contains(raw.as_str()) {
                text = text.replace(raw.as_str(), name);
            }
        }
        text
    }

    pub fn line(&self, line: String) {
        let line = self.normalize(line);
        lock(&self.lines).push(line);
    }

    pub fn fault(&self, line: String) {
        lock(&self.faults).push(line.clone());
        self.line(line);
    }

    pub fn faults(&self) -> Vec<String> {
        lock(&self.faults).clone()
    }

    pub fn tail(&self, n: usize) -> Vec<String> {
        let lines = lock(&self.lines);
        lines[lines.len().saturating_sub(n)..].to_vec()
    }

    pub fn all(&self) -> Vec<String> {
        lock(&self.lines).clone()
    }

    pub fn len(&self) -> usize {
        lock(&self.lines).len()
    }

    /// FNV-1a of every line: equal digests, equal runs.
    pub fn digest(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for line in lock(&self.lines).iter() {
            for b in line.bytes().chain(std::iter::once(b'\n')) {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        h
    }
}

/// How faults are injected in one run.
pub struct FaultPlan {
    rng: Rng,
    latency: Rng,
    /// The chance that a write is hit.
    pub p: f64,
    /// The kinds this run injects.
    pub kinds: Vec<Fault>,
    /// Off while the simulation quiesces.
    pub enabled: bool,
    /// Set while a fault's own action runs (a thief's claim): no fault inside a fault.
    depth: u32,
    pub crashes_left: u32,
    pub steals_left: u32,
}

impl FaultPlan {
    pub fn new(mut rng: Rng, p: f64, kinds: Vec<Fault>, crashes: u32, steals: u32) -> Self {
        let latency = rng.fork();
        Self {
            rng,
            latency,
            p,
            kinds,
            enabled: true,
            depth: 0,
            crashes_left: crashes,
            steals_left: steals,
        }
    }
}

/// What the store saw of fencing: who holds each execution, and how often it was claimed.
#[derive(Default)]
pub struct Fence {
    /// The node incarnation (view) that last started, resumed or claimed each execution.
    holder: HashMap<String, u32>,
    /// The highest lease epoch stored for each execution.
    epoch: HashMap<String, i64>,
    /// How many times each execution was claimed (taken over after an interruption).
    pub claims: HashMap<String, u32>,
}

/// One engine, as the simulation sees it.
#[derive(Clone)]
pub struct Node {
    pub name: String,
    /// This incarnation's number (a restarted node gets a new one, its name may stay).
    pub view: u32,
    pub engine: Engine,
    pub dead: Arc<AtomicBool>,
    /// A dead node whose place was taken (restarted, or replaced by a new node).
    pub replaced: bool,
}

impl Node {
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    pub fn label(&self) -> String {
        format!("{}.{}", self.name, self.view)
    }
}

pub struct World {
    pub inner: Arc<InMemoryExecutionStore>,
    pub clock: Arc<SimTime>,
    pub trace: Arc<Trace>,
    pub faults: Mutex<FaultPlan>,
    pub fence: Mutex<Fence>,
    /// Invariants broken while the simulation ran (fencing).
    pub violations: Mutex<Vec<String>>,
    /// Every node incarnation, dead or alive (cleared at the end: engines hold the world).
    pub nodes: Mutex<Vec<Node>>,
    writes: AtomicU64,
}

impl World {
    pub fn new(clock: Arc<SimTime>, trace: Arc<Trace>, faults: FaultPlan) -> Self {
        Self {
            inner: Arc::new(InMemoryExecutionStore::new()),
            clock,
            trace,
            faults: Mutex::new(faults),
            fence: Mutex::new(Fence::default()),
            violations: Mutex::new(Vec::new()),
            nodes: Mutex::new(Vec::new()),
            writes: AtomicU64::new(0),
        }
    }

    pub fn violation(&self, v: String) {
        self.trace.line(format!("VIOLATION {v}"));
        lock(&self.violations).push(v);
    }

    pub fn live_nodes(&self) -> Vec<Node> {
        lock(&self.nodes)
            .iter()
            .filter(|n| !n.is_dead())
            .cloned()
            .collect()
    }

    /// A live node of another name than `victim`, to steal its leases.
    fn thief(&self, victim: &str) -> Option<Node> {
        lock(&self.nodes)
            .iter()
            .find(|n| !n.is_dead() && n.name != victim)
            .cloned()
    }

    /// Whether (and how) the next write is hit.
    fn decide(&self, write: Write, node: &str) -> Option<Fault> {
        let has_thief = self.thief(node).is_some();
        let mut f = lock(&self.faults);
        if !f.enabled || f.depth > 0 || f.kinds.is_empty() {
            return None;
        }
        let p = f.p;
        if !f.rng.chance(p) {
            return None;
        }
        let kinds = f.kinds.len() as u64;
        let i = f.rng.below(kinds) as usize;
        let fault = f.kinds[i];
        if !write.allows(fault) {
            return None;
        }
        match fault {
            Fault::CrashBefore | Fault::CrashAfter if f.crashes_left == 0 => None,
            Fault::CrashBefore | Fault::CrashAfter => {
                f.crashes_left -= 1;
                Some(fault)
            }
            Fault::StealBefore | Fault::StealAfter if f.steals_left == 0 || !has_thief => None,
            Fault::StealBefore | Fault::StealAfter => {
                f.steals_left -= 1;
                Some(fault)
            }
            _ => Some(fault),
        }
    }

    /// Database latency before a call: none, a yield, or a few milliseconds (tokio time, paused):
    /// it lets other tasks interleave, e.g. two resumes both reading `suspended`.
    async fn latency(&self) {
        let wait = {
            let mut f = lock(&self.faults);
            match f.latency.below(8) {
                0 => Some(Duration::ZERO),
                1 => Some(Duration::from_millis(f.latency.range(1, 5))),
                _ => None,
            }
        };
        match wait {
            Some(Duration::ZERO) => tokio::task::yield_now().await,
            Some(d) => tokio::time::sleep(d).await,
            None => {}
        }
    }

    fn next_write(&self) -> u64 {
        self.writes.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Checks a committed compare-and-set against fencing: a running execution is written only
    /// by the incarnation that holds it, except for a cancel or a suspend request (which need
    /// no lease); and a stored lease epoch never goes back.
    fn fenced_cas(
        &self,
        view: u32,
        label: &str,
        before: &ExecutionRecord,
        after: &ExecutionRecord,
        changed: &[&str],
    ) {
        let id = self.trace.name(&after.id);
        let mut fence = lock(&self.fence);
        let (from, to) = (before.state.status(), after.state.status());
        let holder = fence.holder.get(&after.id).copied();
        match (from, to) {
            (Status::Suspended, Status::Running) => {
                fence.holder.insert(after.id.clone(), view);
            }
            (Status::Running, Status::Cancelled) => {}
            (Status::Running, Status::Running)
                if after.lease == before.lease
                    && changed.is_empty()
                    && after.progress.next_step == before.progress.next_step => {}
            (Status::Running, _) if holder != Some(view) => {
                drop(fence);
                self.violation(format!(
                    "fencing: {label} committed {from}->{to} on {id} (step {}) while incarnation {holder:?} holds it",
                    after.progress.next_step
                ));
                return;
            }
            _ => {}
        }
        self.epoch_moves_forward(&mut fence, after);
    }

    fn epoch_moves_forward(&self, fence: &mut Fence, after: &ExecutionRecord) {
        if let Some(lease) = &after.lease {
            let seen = fence.epoch.entry(after.id.clone()).or_insert(0);
            if lease.epoch < *seen {
                let v = format!(
                    "fencing: the lease epoch of {} went back from {} to {}",
                    self.trace.name(&after.id),
                    *seen,
                    lease.epoch
                );
                lock(&self.violations).push(v);
            }
            *seen = (*seen).max(lease.epoch);
        }
    }
}

/// Waits by when they fall due, then by when they were made.
type Waits = BTreeMap<(DateTime<Utc>, u64), oneshot::Sender<()>>;

/// The simulation's time: a [`ManualClock`] that the driver advances, and the waits on it.
/// The waits are kept here, in the order they fall due (then the order they were made), and
/// woken in that order when the clock passes them: tokio's `watch` (which `ManualClock`'s own
/// waits use) wakes its waiters in a random order, and a seed must replay the same run.
///
/// Each reading is one microsecond after the one before (since the last advance): two
/// executions started at the same simulated instant still get distinct start times, so the
/// store's claims, which take the oldest first, do not fall back on its hash map's random order;
/// and two writes get distinct times at the precision the stores keep (PostgreSQL's is the
/// microsecond), by which the engine tells its own write, in doubt, from another's.
pub struct SimTime {
    pub manual: Arc<ManualClock>,
    waits: Mutex<Waits>,
    made: AtomicU64,
    reads: AtomicU64,
}

impl SimTime {
    pub fn new(start: DateTime<Utc>) -> Self {
        Self {
            manual: Arc::new(ManualClock::new(start)),
            waits: Mutex::new(BTreeMap::new()),
            made: AtomicU64::new(0),
            reads: AtomicU64::new(0),
        }
    }

    pub fn now(&self) -> DateTime<Utc> {
        let tick = self.reads.fetch_add(1, Ordering::SeqCst);
        self.manual.now() + chrono::Duration::microseconds(tick as i64)
    }

    /// Moves the clock on and wakes, in order, every wait whose time came.
    pub fn advance(&self, d: Duration) {
        self.manual.advance(d);
        self.reads.store(0, Ordering::SeqCst);
        let now = self.manual.now();
        let due: Vec<oneshot::Sender<()>> = {
            let mut waits = lock(&self.waits);
            let later = waits.split_off(&(now, u64::MAX));
            std::mem::replace(&mut *waits, later)
                .into_values()
                .collect()
        };
        for wake in due {
            let _ = wake.send(());
        }
    }

    fn sleep_until(&self, at: DateTime<Utc>) -> Sleep {
        if self.manual.now() >= at {
            return Box::pin(std::future::ready(()));
        }
        let (tx, rx) = oneshot::channel();
        let n = self.made.fetch_add(1, Ordering::SeqCst);
        lock(&self.waits).insert((at, n), tx);
        Box::pin(async move {
            // Never resolves if the clock goes away first, like a sleep past the end.
            if rx.await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

/// The clock of one node: the simulation's time, except that the waits of a dead node never
/// end (a crashed process wakes for nothing: no retry, no timer, no step sleep).
pub struct NodeClock {
    pub time: Arc<SimTime>,
    pub dead: Arc<AtomicBool>,
}

impl Clock for NodeClock {
    fn now(&self) -> DateTime<Utc> {
        self.time.now()
    }

    fn sleep_until(&self, at: DateTime<Utc>) -> Sleep {
        let wait = self.time.sleep_until(at);
        let dead = self.dead.clone();
        Box::pin(async move {
            wait.await;
            if dead.load(Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
        })
    }
}

/// One node's view of the shared database: delegates to the in-memory store, with latency
/// before every call and, at writes, the faults the plan picks. A dead node's calls never
/// return (the process is gone).
pub struct FaultyStore {
    pub world: Arc<World>,
    pub node: String,
    pub view: u32,
    pub dead: Arc<AtomicBool>,
}

/// The fault a database that went away gives (a lost connection, a restart, a time-out): the
/// stores classify such failures as [`StoreError::Unavailable`].
fn injected(write: Write, n: u64) -> StoreError {
    StoreError::Unavailable(format!("injected fault at write {n} ({})", write.name()))
}

impl FaultyStore {
    fn label(&self) -> String {
        format!("{}.{}", self.node, self.view)
    }

    /// Waits out the latency; never returns for a dead node.
    async fn enter(&self) {
        if self.dead.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        self.world.latency().await;
        if self.dead.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
    }

    /// Picks the fault for this write and does what must happen before it.
    async fn before(&self, write: Write, exec: &str) -> (u64, Option<Fault>) {
        self.enter().await;
        let n = self.world.next_write();
        let fault = self.world.decide(write, &self.node);
        if let Some(f) = fault {
            let exec = self.world.trace.name(exec);
            self.world.trace.fault(format!(
                "FAULT w{n} {} {} {exec}: {}",
                self.label(),
                write.name(),
                f.name()
            ));
            match f {
                Fault::CrashBefore => self.crash().await,
                Fault::StealBefore => self.steal().await,
                _ => {}
            }
        }
        (n, fault)
    }

    /// What the fault does after the write: the answer the caller gets.
    async fn after<T>(
        &self,
        write: Write,
        n: u64,
        fault: Option<Fault>,
        result: Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match fault {
            Some(Fault::FailBefore) | Some(Fault::FailAfter) => Err(injected(write, n)),
            Some(Fault::CrashAfter) => self.crash().await,
            Some(Fault::StealAfter) => {
                self.steal().await;
                result
            }
            _ => result,
        }
    }

    /// Traces a write (one that a `fail-before` fault stopped says so).
    fn write_line(&self, fault: Option<Fault>, line: String) {
        let line = match fault {
            Some(Fault::FailBefore) => format!("{line} [not written]"),
            _ => line,
        };
        self.world.trace.line(line);
    }

    /// The node dies here: it never answers again, its clock stops.
    async fn crash<T>(&self) -> T {
        self.dead.store(true, Ordering::SeqCst);
        self.world
            .trace
            .line(format!("node {} crashed (at a write)", self.label()));
        std::future::pending().await
    }

    /// This node froze past its lease: its leases expire and another live node claims them (an
    /// epoch bump); this node only learns it at its next write or heartbeat.
    async fn steal(&self) {
        let Some(thief) = self.world.thief(&self.node) else {
            return;
        };
        let released = self
            .world
            .inner
            .release_leases(&self.node)
            .await
            .unwrap_or(0);
        self.world.trace.line(format!(
            "leases of {} expired ({released}); {} recovers",
            self.node,
            thief.label()
        ));
        lock(&self.world.faults).depth += 1;
        let taken = thief.engine.recover().await;
        lock(&self.world.faults).depth -= 1;
        self.world
            .trace
            .line(format!("{} took over {taken:?}", thief.label()));
    }
}

#[async_trait]
impl ExecutionStore for FaultyStore {
    async fn insert(
        &self,
        record: &ExecutionRecord,
        events: &[WorkflowEvent],
    ) -> Result<(), StoreError> {
        let (n, fault) = self.before(Write::Insert, &record.id).await;
        let result = if fault == Some(Fault::FailBefore) {
            Ok(())
        } else {
            let result = self.world.inner.insert(record, events).await;
            if result.is_ok() {
                let mut fence = lock(&self.world.fence);
                fence.holder.insert(record.id.clone(), self.view);
                self.world.epoch_moves_forward(&mut fence, record);
            }
            result
        };
        self.write_line(
            fault,
            format!(
                "w{n} {} insert {} {}",
                self.label(),
                self.world.trace.name(&record.id),
                match &result {
                    Ok(()) => "ok".to_owned(),
                    Err(e) => format!("{e}"),
                }
            ),
        );
        self.after(Write::Insert, n, fault, result).await
    }

    async fn get(&self, id: &str) -> Result<Option<ExecutionRecord>, StoreError> {
        self.enter().await;
        self.world.inner.get(id).await
    }

    async fn compare_and_set(
        &self,
        record: &ExecutionRecord,
        expected_version: i64,
        changed_steps: &[&str],
        events: &[WorkflowEvent],
    ) -> Result<bool, StoreError> {
        let (n, fault) = self.before(Write::Cas, &record.id).await;
        let result = if fault == Some(Fault::FailBefore) {
            Ok(false)
        } else {
            // Read and write with no await between them that yields: atomic on this
            // single-threaded runtime.
            let before = self.world.inner.get(&record.id).await?;
            let result = self
                .world
                .inner
                .compare_and_set(record, expected_version, changed_steps, events)
                .await;
            if let (Ok(true), Some(before)) = (&result, &before) {
                self.world
                    .fenced_cas(self.view, &self.label(), before, record, changed_steps);
            }
            result
        };
        self.write_line(
            fault,
            format!(
                "w{n} {} cas {} v{} {} next={} {:?}",
                self.label(),
                self.world.trace.name(&record.id),
                expected_version,
                record.state.status(),
                record.progress.next_step,
                result.as_ref().map_err(ToString::to_string)
            ),
        );
        self.after(Write::Cas, n, fault, result).await
    }

    async fn list(&self, query: &ListQuery) -> Result<Vec<ExecutionRecord>, StoreError> {
        self.enter().await;
        self.world.inner.list(query).await
    }

    async fn count_by_status(&self, owner: Option<&str>) -> Result<Vec<StatusCount>, StoreError> {
        self.enter().await;
        self.world.inner.count_by_status(owner).await
    }

    // The simulated workflows declare no queue: a dequeue passes through, without faults.
    async fn dequeue(
        &self,
        pass: &agentry_engine::store::Dequeue<'_>,
    ) -> Result<Vec<ExecutionRecord>, StoreError> {
        self.enter().await;
        self.world.inner.dequeue(pass).await
    }

    async fn queue_counts(
        &self,
        queue: &str,
        owner: Option<&str>,
    ) -> Result<Vec<agentry_engine::queue::QueueCount>, StoreError> {
        self.enter().await;
        self.world.inner.queue_counts(queue, owner).await
    }

    async fn prune(
        &self,
        ended_before: DateTime<Utc>,
        statuses: &[Status],
        limit: u32,
    ) -> Result<u64, StoreError> {
        self.enter().await;
        self.world.inner.prune(ended_before, statuses, limit).await
    }

    async fn due_timers(
        &self,
        workflows: &[String],
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        self.enter().await;
        self.world.inner.due_timers(workflows, limit).await
    }

    async fn events_after(
        &self,
        execution_id: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<WorkflowEvent>, StoreError> {
        self.enter().await;
        self.world
            .inner
            .events_after(execution_id, after, limit)
            .await
    }

    async fn record_step(
        &self,
        execution_id: &str,
        lease: &Lease,
        step_id: &str,
        step: &StepRecord,
    ) -> Result<bool, StoreError> {
        let (n, fault) = self.before(Write::RecordStep, execution_id).await;
        let result = if fault == Some(Fault::FailBefore) {
            Ok(false)
        } else {
            let result = self
                .world
                .inner
                .record_step(execution_id, lease, step_id, step)
                .await;
            if let Ok(true) = result {
                let holder = lock(&self.world.fence).holder.get(execution_id).copied();
                if holder != Some(self.view) {
                    self.world.violation(format!(
                        "fencing: {} recorded step {step_id} of {} while incarnation {holder:?} holds it",
                        self.label(),
                        self.world.trace.name(execution_id)
                    ));
                }
            }
            result
        };
        self.write_line(
            fault,
            format!(
                "w{n} {} record_step {} {step_id} a{} {:?}",
                self.label(),
                self.world.trace.name(execution_id),
                step.attempt,
                result.as_ref().map_err(ToString::to_string)
            ),
        );
        self.after(Write::RecordStep, n, fault, result).await
    }

    async fn renew_leases(&self, node: &str, ids: &[String]) -> Result<Vec<String>, StoreError> {
        let (n, fault) = self.before(Write::Renew, "-").await;
        let result = if fault == Some(Fault::FailBefore) {
            Ok(Vec::new())
        } else {
            self.world.inner.renew_leases(node, ids).await
        };
        let mut renewed: Vec<String> = result
            .as_ref()
            .map(|ids| ids.iter().map(|id| self.world.trace.name(id)).collect())
            .unwrap_or_default();
        renewed.sort();
        self.write_line(
            fault,
            format!(
                "w{n} {} renew {} of {}",
                self.label(),
                renewed.join(","),
                ids.len()
            ),
        );
        self.after(Write::Renew, n, fault, result).await
    }

    async fn claim_orphans(&self, claim: &Claim<'_>) -> Result<Vec<ExecutionRecord>, StoreError> {
        let (n, fault) = self.before(Write::Claim, "-").await;
        let result = if fault == Some(Fault::FailBefore) {
            Ok(Vec::new())
        } else {
            let result = self.world.inner.claim_orphans(claim).await;
            if let Ok(claimed) = &result {
                let mut fence = lock(&self.world.fence);
                for r in claimed {
                    fence.holder.insert(r.id.clone(), self.view);
                    *fence.claims.entry(r.id.clone()).or_default() += 1;
                    self.world.epoch_moves_forward(&mut fence, r);
                }
            }
            result
        };
        let mut claimed: Vec<String> = result
            .as_ref()
            .map(|rs| rs.iter().map(|r| self.world.trace.name(&r.id)).collect())
            .unwrap_or_default();
        claimed.sort();
        self.write_line(
            fault,
            format!(
                "w{n} {} claim own={} [{}]",
                self.label(),
                claim.own,
                claimed.join(",")
            ),
        );
        self.after(Write::Claim, n, fault, result).await
    }

    async fn release_leases(&self, node: &str) -> Result<u64, StoreError> {
        self.enter().await;
        self.world.inner.release_leases(node).await
    }

    async fn in_flight_by_version(
        &self,
        workflow_id: &str,
    ) -> Result<Vec<(Option<String>, u64)>, StoreError> {
        self.world.inner.in_flight_by_version(workflow_id).await
    }

    async fn announce_node(&self, node: &str, keys: &[String]) -> Result<(), StoreError> {
        self.world.inner.announce_node(node, keys).await
    }

    async fn forget_node(&self, node: &str) -> Result<(), StoreError> {
        self.world.inner.forget_node(node).await
    }

    async fn live_versions(&self, within: Duration) -> Result<Vec<String>, StoreError> {
        self.world.inner.live_versions(within).await
    }

    // The simulated workflows send no events: these only pass through.
    async fn publish_event(&self, event: &PublishedEvent) -> Result<bool, StoreError> {
        self.world.inner.publish_event(event).await
    }

    async fn published_event(
        &self,
        name: &str,
        scope: &str,
        event_id: &str,
    ) -> Result<Option<PublishedEvent>, StoreError> {
        self.world
            .inner
            .published_event(name, scope, event_id)
            .await
    }

    async fn published_load(
        &self,
        name: &str,
        key: &str,
        since: chrono::DateTime<chrono::Utc>,
    ) -> Result<agentry_engine::store::PublishedLoad, StoreError> {
        self.world.inner.published_load(name, key, since).await
    }

    async fn published_events(
        &self,
        name: &str,
        key: &str,
        since: chrono::DateTime<chrono::Utc>,
        limit: u32,
    ) -> Result<Vec<PublishedEvent>, StoreError> {
        self.world
            .inner
            .published_events(name, key, since, limit)
            .await
    }

    async fn record_woken(
        &self,
        name: &str,
        scope: &str,
        event_id: &str,
        woken: &[String],
    ) -> Result<(), StoreError> {
        self.world
            .inner
            .record_woken(name, scope, event_id, woken)
            .await
    }

    async fn prune_published(
        &self,
        before: chrono::DateTime<chrono::Utc>,
    ) -> Result<u64, StoreError> {
        self.world.inner.prune_published(before).await
    }

    async fn waiting_for_event(
        &self,
        name: &str,
        key: &str,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        self.world.inner.waiting_for_event(name, key, limit).await
    }
}
