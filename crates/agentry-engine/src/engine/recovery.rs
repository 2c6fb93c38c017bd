//! Leases and timers: heartbeats, taking over orphans, firing due deadlines.

use super::*;

impl Engine {
    /// Resumes a suspended execution whose deadline has passed (a durable timer fired): its
    /// step runs again with `StepContext::timed_out` set. `Ok(None)` when there is nothing to do
    /// (resumed or cancelled meanwhile, or not due).
    pub async fn fire_timer(
        &self,
        execution_id: &ExecutionId,
    ) -> Result<Option<RunHandle>, EngineError> {
        let Some(rec) = self.inner.store.get(execution_id).await? else {
            return Ok(None);
        };
        match self
            .wake_up(&rec.workflow_id, execution_id, Wake::Deadline)
            .await
        {
            Ok(handle) => Ok(Some(handle)),
            Err(EngineError::NotSuspended { .. } | EngineError::NotDue(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Tells the other servers this one is alive with its workflow versions (at every
    /// heartbeat of the server's maintenance): an execution whose version no live server has
    /// shows it in its state (`waitingForVersion`).
    pub async fn announce(&self) {
        let keys = self.runnable_keys();
        if let Err(e) = self
            .inner
            .store
            .announce_node(&self.inner.config.node_id, &keys)
            .await
        {
            tracing::warn!(error = %e, "announcing this server's workflow versions failed");
        }
    }

    /// The version `rec` waits for while no live server has it (a queued execution, a running
    /// one whose server died, a suspended one, its timer due or not): `None` when one has (or
    /// when no server announced itself: nothing is known), or when it is not in flight.
    pub async fn waiting_for_version(&self, rec: &ExecutionRecord) -> Option<String> {
        let version = rec.workflow_version.as_ref()?;
        if !matches!(
            rec.state.status(),
            Status::Queued | Status::Running | Status::Suspended
        ) {
            return None;
        }
        // A server that missed three heartbeats (a lease ttl: its leases expire with them, so
        // the executions it ran are anyone's) is not alive.
        let within = self.inner.config.lease_ttl;
        let live = self.inner.store.live_versions(within).await.ok()?;
        (!live.is_empty() && !live.contains(&rec.workflow_key())).then(|| version.clone())
    }

    /// Renews the leases of the runs alive in this process, in one statement that writes no
    /// execution data. Call it more often than the lease ttl (the server does every third of
    /// it).
    pub async fn heartbeat(&self) {
        let mut alive: Vec<String> = lock(&self.inner.live).keys().cloned().collect();
        // In id order, not the map's random one: the runs it stops are stopped in the same
        // order every time (the deterministic simulation, tests/simulation.rs, replays a seed).
        alive.sort();
        if alive.is_empty() {
            return;
        }
        match self
            .inner
            .store
            .renew_leases(&self.inner.config.node_id, &alive)
            .await
        {
            // A run whose lease was not renewed is no longer this process's to run: it was
            // cancelled, or taken over. Its steps are told to stop.
            Ok(renewed) => {
                for id in alive.iter().filter(|id| !renewed.contains(id)) {
                    tracing::info!(execution_id = %id, "no longer held here (cancelled or taken over): stopping its step");
                    self.stop_run(id);
                }
            }
            Err(e) => tracing::warn!(error = %e, "renewing leases failed"),
        }
    }

    /// Continues the executions this node held before it restarted (a crash, a kill), at once:
    /// the claim bumps their epoch, fencing the previous incarnation should it still be alive.
    pub async fn recover_own(&self) -> Result<usize, EngineError> {
        self.claim_and_continue(true).await
    }

    /// Picks up executions whose lease expired: their process died, froze or lost the database.
    /// Each is claimed with one conditional statement, so of several processes recovering at once
    /// only one runs it; it continues from its last checkpoint (the step it was in runs again),
    /// or suspends there when a suspend was pending. Returns how many were taken over.
    pub async fn recover(&self) -> Result<usize, EngineError> {
        self.claim_and_continue(false).await
    }

    /// Resumes the suspended executions whose deadline passed (by the database's clock), on
    /// whichever process gets there first; also those whose deadline passed while every server
    /// was down. Returns how many this process resumed.
    pub async fn fire_due_timers(&self) -> Result<usize, EngineError> {
        if self.is_draining() {
            return Ok(0);
        }
        let workflows = self.runnable_keys();
        let due = self.inner.store.due_timers(&workflows, CLAIM_BATCH).await?;
        let mut fired = 0;
        for id in due.into_iter().map(ExecutionId::from) {
            match self.fire_timer(&id).await {
                Ok(Some(_)) => fired += 1,
                Ok(None) => {}
                Err(e) => tracing::warn!(execution_id = %id, error = %e, "firing a timer failed"),
            }
        }
        Ok(fired)
    }

    /// Fires `execution_id`'s timer in this process at `deadline` (the periodic pass of every
    /// process fires it otherwise, for instance after a restart).
    pub(super) fn schedule_timer(
        &self,
        execution_id: &str,
        deadline: chrono::DateTime<chrono::Utc>,
    ) {
        let engine = self.clone();
        let id = ExecutionId::from(execution_id);
        let due = self.inner.clock.sleep_until(deadline);
        let shutdown = self.inner.draining.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = due => {}
                _ = shutdown.cancelled() => return,
            }
            if let Err(e) = engine.fire_timer(&id).await {
                tracing::warn!(execution_id = %id, error = %e, "firing a timer failed");
            }
        });
    }

    pub(super) async fn claim_and_continue(&self, own: bool) -> Result<usize, EngineError> {
        // A draining process takes nothing over: what it would claim is for the others.
        if self.is_draining() {
            return Ok(0);
        }
        let config = &self.inner.config;
        let workflows = self.runnable_keys();
        let claim = Claim {
            node: &config.node_id,
            ttl: config.lease_ttl,
            own,
            workflows: &workflows,
            limit: CLAIM_BATCH,
        };
        let claimed = self.inner.store.claim_orphans(&claim).await?;
        let taken = claimed.len();
        if taken > 0 {
            self.telemetry().took_over(taken);
        }
        for rec in claimed {
            if lock(&self.inner.live).contains_key(&rec.id) {
                // A run of ours whose lease expired (this process froze past its ttl): the
                // claim fenced it, so it stops at its next write; continue once it has.
                let engine = self.clone();
                tokio::spawn(async move {
                    while lock(&engine.inner.live).contains_key(&rec.id) {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    if let Err(e) = engine.continue_claimed(rec).await {
                        tracing::warn!(error = %e, "continuing a claimed execution failed");
                    }
                });
                continue;
            }
            if let Err(e) = self.continue_claimed(rec).await {
                tracing::warn!(error = %e, "continuing a claimed execution failed");
            }
        }
        Ok(taken)
    }

    pub(super) async fn continue_claimed(
        &self,
        claimed: ExecutionRecord,
    ) -> Result<(), EngineError> {
        let Some(wf) = self.registered_for(&claimed) else {
            tracing::warn!(execution_id = %claimed.id, workflow_id = %claimed.workflow_id,
                "cannot recover an execution of an unregistered workflow");
            return Ok(());
        };
        let start = claimed.progress.next_step.min(wf.steps().len());
        tracing::info!(execution_id = %claimed.id, step = start, "recovering an interrupted execution");
        if let Some(req) = claimed.state.suspend_request().cloned()
            && let Some(step) = wf.steps().get(start)
        {
            let suspension = Suspension {
                suspended_at: self.inner.clock.now(),
                reason: req.reason,
                step_index: start,
                step_id: step.id.clone(),
                data: None,
                deadline: None,
                event: None,
            };
            let lease = claimed.lease.clone();
            self.suspend_now(lease.as_ref(), claimed, suspension, false)
                .await?;
            return Ok(());
        }
        // A step interrupted after a resume woke it continues with that resume.
        let woken = wf
            .steps()
            .get(start)
            .and_then(|step| Woken::of(&claimed, &step.id));
        let entry = Entry {
            step: start,
            timed_out: woken.as_ref().is_some_and(|w| w.timed_out),
            resume: woken.map(|w| (w.resume_data, w.suspend_data)),
            begun: false,
            announce: Vec::new(),
        };
        drop(self.spawn_run(wf, claimed, entry));
        Ok(())
    }
}
