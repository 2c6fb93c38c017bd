//! The workflow operations: events into running executions (to one, or by key to every
//! execution waiting for them), and the repair of executions (retry from the failed step, fork
//! from any step). Each checks the caller against the [`crate::Policy`] first.

use agentry_engine::engine::{EventDelivery, ForkRequest};
use agentry_engine::{ExecutionId, RunHandle, WorkflowId};

use crate::App;
use crate::caller::Caller;
use crate::error::AppError;
use crate::wire::operations::{self, EventPublished, EventRequest, PublishRequest};

impl App {
    /// Delivers the event `name` to one execution (strict mode: one the caller may act on): it
    /// resumes the step waiting for it, or waits in the execution's mailbox.
    pub async fn deliver_event(
        &self,
        caller: &Caller,
        workflow_id: &WorkflowId,
        execution_id: &ExecutionId,
        name: &str,
        body: EventRequest,
    ) -> Result<operations::EventDelivery, AppError> {
        self.check_owner(caller, workflow_id, execution_id).await?;
        let delivery = EventDelivery {
            name: name.to_owned(),
            data: body.data,
            event_id: body.event_id,
        };
        let delivered = self
            .engine
            .deliver_event(workflow_id, execution_id, delivery)
            .await
            .map_err(|e| AppError::engine(e, "Failed to deliver the event"))?;
        Ok((&delivered).into())
    }

    /// Sends the event `name` with its key to every execution waiting for it with that key
    /// (strict mode: the caller's own, all of them for an admin), and keeps it for those that
    /// wait for it later, within the retention window.
    pub async fn publish_event(
        &self,
        caller: &Caller,
        name: &str,
        body: PublishRequest,
    ) -> Result<EventPublished, AppError> {
        let owner = self.policy.list_owner(caller)?;
        // An event's id is its sender's: the verified user's scope, or the shared one of the
        // callers without a token (and of a server without a provider).
        let scope = caller.user_id();
        let published = self
            .engine
            .publish_event(
                name,
                &body.key,
                body.data,
                body.event_id,
                owner.as_ref(),
                scope.as_ref(),
            )
            .await
            .map_err(|e| AppError::engine(e, "Failed to send the event"))?;
        Ok(EventPublished::of(&published, name, &body.key))
    }

    /// Runs a failed execution again from its failed step (same id, its log going on).
    pub async fn retry(
        &self,
        caller: &Caller,
        workflow_id: &WorkflowId,
        execution_id: &ExecutionId,
    ) -> Result<RunHandle, AppError> {
        self.check_owner(caller, workflow_id, execution_id).await?;
        self.engine
            .retry(workflow_id, execution_id)
            .await
            .map_err(|e| AppError::engine(e, "Failed to retry the execution"))
    }

    /// Starts a new execution from a step of another (the steps before it copied). The caller
    /// must be allowed to act on the source; the fork belongs to the source's owner.
    pub async fn fork(
        &self,
        caller: &Caller,
        workflow_id: &WorkflowId,
        execution_id: &ExecutionId,
        body: operations::ForkRequest,
    ) -> Result<RunHandle, AppError> {
        self.check_owner(caller, workflow_id, execution_id).await?;
        let request = ForkRequest {
            from_step: body.from_step,
            input: body.input,
            execution_id: body.execution_id.map(ExecutionId::from),
        };
        self.engine
            .fork(workflow_id, execution_id, request)
            .await
            .map_err(|e| AppError::engine(e, "Failed to fork the execution"))
    }
}
