//! The workflow operations: events into running executions (to one, or by key to every
//! execution waiting for them), and the repair of executions (retry from the failed step, fork
//! from any step). Each checks the caller against the [`crate::Policy`] first.

use agentry_engine::engine::{EventDelivery, ForkRequest};
use agentry_engine::{ExecutionId, RunHandle, WorkflowId};

use crate::App;
use crate::caller::Caller;
use crate::error::AppError;
use crate::wire::operations::{
    self, CloudEventPublished, EventPublished, EventRequest, PublishRequest,
};
use serde_json::Value;

/// The longest `id` and `source` of a CloudEvent.
const MAX_CLOUD_EVENT_ATTRIBUTE: usize = 256;

/// The `id` and `type` of a CloudEvent in structured mode, or why it is not one.
fn cloud_event_identity(event: &Value) -> Result<(String, String), AppError> {
    let refuse = |why: &str| {
        AppError::new(
            crate::error::Code::InvalidEvent,
            format!("Event validation failed: {why}"),
        )
    };
    let attribute = |name: &str| -> Result<String, AppError> {
        match event.get(name).and_then(Value::as_str) {
            Some(v) if !v.is_empty() && v.chars().count() <= MAX_CLOUD_EVENT_ATTRIBUTE => {
                Ok(v.to_owned())
            }
            _ => Err(refuse(&format!(
                "a CloudEvent's `{name}` is a string of 1 to {MAX_CLOUD_EVENT_ATTRIBUTE} characters"
            ))),
        }
    };
    if !event.is_object() {
        return Err(refuse("a CloudEvent in structured mode is a JSON object"));
    }
    if event.get("specversion").and_then(Value::as_str) != Some("1.0") {
        return Err(refuse("`specversion` must be \"1.0\""));
    }
    let id = attribute("id")?;
    attribute("source")?;
    let type_ = attribute("type")?;
    if !agentry_engine::id::is_valid_id(&type_) {
        return Err(refuse(
            "`type` names the event: letters, digits, `-`, `_` or `.`",
        ));
    }
    Ok((id, type_))
}

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

    /// Sends a CloudEvent (structured mode: `specversion` 1.0, `id`, `source`, `type`, and
    /// `data`) to the executions listening for its type: each workflow that declares the event
    /// reads from it the keys its executions wait with (a definition's `listen` correlations),
    /// and it is sent by each (like [`App::publish_event`]; its `id` deduplicates).
    pub async fn publish_cloud_event(
        &self,
        caller: &Caller,
        event: Value,
    ) -> Result<CloudEventPublished, AppError> {
        let (id, type_) = cloud_event_identity(&event)?;
        let owner = self.policy.list_owner(caller)?;
        let scope = caller.user_id();
        let sent = self
            .engine
            .publish_unkeyed(&type_, event, &id, owner.as_ref(), scope.as_ref())
            .await
            .map_err(|e| AppError::engine(e, "Failed to send the event"))?;
        Ok(CloudEventPublished {
            sent: sent
                .iter()
                .map(|(key, p)| EventPublished::of(p, &type_, key))
                .collect(),
            id,
            type_,
        })
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
