//! Repairing executions: a failed one retried from its failed step ([`Engine::retry`]), or a
//! new one forked from any step of another ([`Engine::fork`]).

use super::*;

/// The context entry that names a fork's origin (`{executionId, stepId}`).
pub const FORKED_FROM: &str = "forkedFrom";

/// What a fork starts from.
#[derive(Debug, Clone)]
pub struct ForkRequest {
    /// The first step that runs again; the steps before it are copied.
    pub from_step: String,
    /// The new execution's input (the source's when none).
    pub input: Option<Value>,
    /// The new execution's id (a fresh one when none).
    pub execution_id: Option<ExecutionId>,
}

impl Engine {
    /// Runs a failed execution again from the step it failed in (from where the engine gave
    /// up, when no step failed), under the same id: its log goes on (`workflow-retried`), the
    /// failed step's attempts go on in number with a fresh budget of retries, and its finished
    /// children are kept (a failed `andAll` runs only the children that did not finish). Any
    /// other status is [`EngineError::NotRetryable`].
    pub async fn retry(
        &self,
        workflow_id: &WorkflowId,
        execution_id: &ExecutionId,
    ) -> Result<RunHandle, EngineError> {
        let (current, wf) = self.load_to_continue(workflow_id, execution_id).await?;
        let index = Mutex::new(0);
        let (rec, events) = self
            .commit(
                Some(current),
                execution_id,
                Patience::Request,
                |r, events| {
                    let ExecutionState::Error {
                        message,
                        step_id,
                        end_at,
                    } = &r.state
                    else {
                        return Err(EngineError::NotRetryable {
                            id: r.id.clone(),
                            status: r.state.status(),
                        });
                    };
                    let at = step_id
                        .as_deref()
                        .and_then(|s| wf.step_index(s))
                        .unwrap_or(r.progress.next_step)
                        .min(wf.steps().len().saturating_sub(1));
                    *lock(&index) = at;
                    let queued = r.queue.is_some();
                    let internal = |e: TransitionError| EngineError::Internal(e.to_string());
                    let mut next = r.clone();
                    next.progress.next_step = at;
                    let step = &wf.steps()[at];
                    let input = Self::input_for(&wf, r, at);
                    // The failed attempt, recorded; the step's next attempt starts now, or
                    // (queued) when the queue starts the execution again: the step stays
                    // interrupted until then, its finished children kept.
                    let attempt = match next.progress.steps_mut().get_mut(&step.id) {
                        Some(record) => {
                            let record = Arc::make_mut(record);
                            record.failures.push(AttemptFailure {
                                attempt: record.attempt,
                                error: message.clone(),
                                at: *end_at,
                                execution_retried: true,
                            });
                            record.status = StepStatus::Running;
                            record.ended_at = None;
                            record.output = None;
                            if !queued {
                                record.attempt += 1;
                                record.started_at = self.inner.clock.now();
                            }
                            record.attempt + u32::from(queued)
                        }
                        None if queued => 1,
                        None => {
                            self.begin(&mut next.progress, step, input.clone());
                            1
                        }
                    };
                    events.push(EventKind::WorkflowRetried {
                        step_id: step.id.clone(),
                        attempt,
                        error: message.clone(),
                    });
                    if let Some(place) = next.queue.as_mut() {
                        next.state = transition(&r.state, Transition::Enqueue).map_err(internal)?;
                        next.lease = None;
                        place.queued_at = self.inner.clock.now();
                        events.push(EventKind::WorkflowQueued {
                            queue: place.name.clone(),
                            key: place.key.clone(),
                            priority: place.priority,
                        });
                        return Ok(next);
                    }
                    next.state = transition(&r.state, Transition::Retry).map_err(internal)?;
                    next.lease = Some(self.new_lease(r.lease.as_ref().map_or(0, |l| l.epoch)));
                    events.push(EventKind::WorkflowStart {
                        input: r.input.clone(),
                        resumed: true,
                    });
                    events.push(Self::step_start(step, at, input));
                    Ok(next)
                },
            )
            .await?;
        let step = *lock(&index);
        tracing::info!(execution_id = %execution_id, step, "a failed execution is retried");
        if rec.state.status() == Status::Queued {
            return Ok(self.entered(wf, rec, events));
        }
        let entry = Entry {
            step,
            resume: None,
            begun: true,
            announce: events,
            timed_out: false,
        };
        Ok(self.spawn_run(wf, rec, entry))
    }

    /// Starts a new execution of the same workflow whose steps before `from_step` are copied
    /// from `execution_id` (their outputs, not run again; each must have finished there) and
    /// which runs from `from_step`, with the source's input or a new one. Its context names its
    /// origin ([`FORKED_FROM`]); its owner and user are the source's.
    pub async fn fork(
        &self,
        workflow_id: &WorkflowId,
        execution_id: &ExecutionId,
        request: ForkRequest,
    ) -> Result<RunHandle, EngineError> {
        let wf = self.require_workflow(workflow_id)?;
        self.refuse_when_draining()?;
        let source = self.load(workflow_id, execution_id).await?;
        let from = wf
            .step_index(&request.from_step)
            .ok_or_else(|| EngineError::UnknownStep {
                workflow_id: workflow_id.to_string(),
                step_id: request.from_step.clone(),
            })?;
        let input = match request.input {
            Some(input) => {
                wf.validate_input(&input)
                    .map_err(EngineError::InvalidInput)?;
                input
            }
            None => source.input.clone(),
        };
        let id = match request.execution_id {
            Some(id) => {
                check_execution_id(&id)?;
                id.into_string()
            }
            None => uuid::Uuid::now_v7().to_string(),
        };
        let mut progress = Progress::default();
        for step in &wf.steps()[..from] {
            let finished = source
                .progress
                .steps
                .get(&step.id)
                .is_some_and(|r| r.is_finished());
            if !finished {
                return Err(EngineError::NotForkable {
                    id: source.id.clone(),
                    reason: format!("its step {} did not finish", step.id),
                });
            }
            Self::copy_step(&source, step, &mut progress);
        }
        progress.next_step = from;
        let mut context = source.context.clone();
        context.insert(
            FORKED_FROM.into(),
            json!({"executionId": source.id, "stepId": request.from_step}),
        );
        let now = self.inner.clock.now();
        // A fork of a queued workflow waits in the queue like any new execution, at the
        // source's priority.
        let place = wf
            .queue()
            .map(|q| {
                let priority = source.queue.as_ref().map(|p| p.priority);
                q.place(&input, priority, now)
            })
            .transpose()
            .map_err(EngineError::InvalidInput)?;
        let mut record = ExecutionRecord {
            id,
            workflow_id: wf.id().to_owned(),
            workflow_version: Some(wf.version().to_owned()),
            state: ExecutionState::Idle,
            input,
            context,
            user_id: source.user_id.clone(),
            owner: source.owner.clone(),
            lease: None,
            start_at: now,
            updated_at: now,
            progress,
            version: 1,
            last_event: 0,
            queue: place,
        };
        let kinds = self.admit(&wf, &mut record)?;
        let events = self.numbered(&mut record, 0, kinds);
        match self.inner.store.insert(&record, &events).await {
            Err(StoreError::Duplicate(id)) => return Err(EngineError::ExecutionExists(id)),
            other => other?,
        }
        tracing::info!(execution_id = %record.id, from = %execution_id, step = %request.from_step, "forked an execution");
        Ok(self.entered(wf, record, events))
    }

    /// Copies `step`'s record from `source`, with its children's and its journal's.
    fn copy_step(source: &ExecutionRecord, step: &Step, progress: &mut Progress) {
        let descendants = step.descendants();
        let journal = format!("{}/", step.id);
        let copied = source.progress.steps.iter().filter(|(id, _)| {
            **id == step.id || descendants.contains(&id.as_str()) || id.starts_with(&journal)
        });
        let steps = progress.steps_mut();
        for (id, record) in copied {
            steps.insert(id.clone(), record.clone());
        }
    }
}
