//! Events into running executions: a step waits for a named event
//! ([`StepContext::wait_for_event`]), and the outside world delivers it, to one execution
//! ([`Engine::deliver_event`]) or by key to every execution that waits for it
//! ([`Engine::publish_event`]).
//!
//! **The mailbox.** An event delivered to an execution that does not wait for it yet is kept in
//! its mailbox: a record of the execution (`$event/<eventId>`, beside its step records), taken
//! by the first wait for that event. Each delivery is one fenced write of the execution (a
//! compare-and-set on its version) with its `workflow-event-received` event: the event is
//! queued, or the waiting step is resumed, in that same write. Every write of an execution is
//! ordered, so a delivery either comes before the wait (the wait takes it from the mailbox, or,
//! if the wait's look came first, the run looks again once it has suspended) or after it (the
//! delivery resumes it): an event is never lost, and taken once.
//!
//! **By key.** An event sent by key is delivered to every execution then waiting for it with
//! that key, and kept for [`EVENT_RETENTION`] for the executions that wait for it later (a
//! webhook that arrives before its execution reaches the wait).
//!
//! **Once.** An event id names one event: the same id delivered again is not delivered again;
//! the answer is the first delivery's outcome.
//!
//! **The first of several.** A step may wait for the first of several events
//! ([`StepContext::wait_for_any_event`]): one suspension names them all (the first in
//! `name`/`key`, the others in `also`), any of them resumes it, and the journal entry that took
//! the event says which it was (its name and key). Found by key through the store's
//! `waiting_for` (a list of pairs, matched by a pattern: [`crate::store::waiting_for_among`]).
//!
//! **Starts.** An event sent (by key or as a CloudEvent) also starts an execution of each
//! workflow it starts ([`crate::workflow::WorkflowBuilder::started_by`]), under an id derived
//! from the workflow and the event's id: once per event, across replicas.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use chrono::{DateTime, Utc};

use super::*;
use crate::state::{AwaitedEvent, EventWait};
use crate::store::{PublishedEvent, StepRecords};

/// How long an event sent by key is kept for the executions that wait for it later.
pub const EVENT_RETENTION: Duration = Duration::from_secs(3600);
/// The most JSON an event's data may hold (64 KiB).
pub const MAX_EVENT_BYTES: usize = 64 * 1024;
/// The most events an execution's mailbox holds untaken: a delivery beyond is refused.
pub const MAX_PENDING_EVENTS: usize = 100;
/// The longest key an event sent by key (or a wait) may name: the one bound of a client's keys.
pub const MAX_EVENT_KEY_CHARS: usize = crate::id::MAX_KEY_CHARS;
/// The most executions one event sent by key wakes.
pub const MAX_WOKEN: usize = 10_000;

/// The id prefix of mailbox records among an execution's step records.
const MAILBOX: &str = "$event/";

/// An event for one execution.
#[derive(Debug, Clone)]
pub struct EventDelivery {
    /// The event's name, as the workflow declares it.
    pub name: String,
    pub data: Value,
    /// Its id: the same id twice is delivered once. A fresh one when none is given.
    pub event_id: Option<String>,
}

/// What a delivery did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The execution waited for it: its step resumed with it.
    Resumed,
    /// Kept in the execution's mailbox until a step waits for it.
    Queued,
}

impl Delivery {
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::Resumed => "resumed",
            Delivery::Queued => "queued",
        }
    }

    fn parse(s: &str) -> Delivery {
        if s == "resumed" {
            Delivery::Resumed
        } else {
            Delivery::Queued
        }
    }
}

/// The outcome of a delivery to one execution.
#[derive(Debug, Clone)]
pub struct Delivered {
    pub event_id: String,
    pub delivery: Delivery,
    /// The id was delivered before: this is that delivery's outcome, and nothing was written.
    pub duplicate: bool,
    /// The execution after the delivery.
    pub record: ExecutionRecord,
}

/// The outcome of an event sent by key.
#[derive(Debug, Clone)]
pub struct Published {
    pub event_id: String,
    /// The executions it woke (the first sending's, for a duplicate).
    pub woken: Vec<ExecutionRecord>,
    /// The id was sent before: nothing was sent again.
    pub duplicate: bool,
    /// Until when an execution that waits for it later takes it.
    pub kept_until: DateTime<Utc>,
}

/// One event in an execution's mailbox, as its state shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct MailboxEvent {
    pub event_id: String,
    pub name: String,
    /// The key it was sent with (an event sent by key).
    pub key: Option<String>,
    pub data: Value,
    pub received_at: DateTime<Utc>,
    /// What its delivery did.
    pub delivery: Delivery,
    /// The step journal entry that took it (`<step>/event-<n>`) and when; none while it waits
    /// in the mailbox.
    pub taken: Option<(String, DateTime<Utc>)>,
}

impl MailboxEvent {
    /// The record id of event `event_id` in an execution's mailbox.
    pub fn record_id(event_id: &str) -> String {
        format!("{MAILBOX}{event_id}")
    }

    /// Whether the record `id` of an execution is a mailbox record (not a step's).
    pub fn is_record(id: &str) -> bool {
        id.starts_with(MAILBOX)
    }

    /// The mailbox event `id` holds, if it is one.
    pub fn from_record(id: &str, r: &StepRecord) -> Option<Self> {
        let event_id = id.strip_prefix(MAILBOX)?;
        let text = |field: &str| r.input.get(field).and_then(Value::as_str);
        let taken_by = r
            .output
            .as_ref()
            .and_then(|o| o.get("takenBy"))
            .and_then(Value::as_str);
        Some(Self {
            event_id: event_id.to_owned(),
            name: text("name")?.to_owned(),
            key: text("key").map(str::to_owned),
            data: r.input.get("data").cloned().unwrap_or(Value::Null),
            received_at: r.started_at,
            delivery: Delivery::parse(text("delivery").unwrap_or_default()),
            taken: taken_by.zip(r.ended_at).map(|(by, at)| (by.to_owned(), at)),
        })
    }

    /// What it counts against the mailbox's bytes: its data (compact JSON), id, name and key.
    fn bytes(&self) -> u64 {
        let key = self.key.as_deref().map_or(0, str::len);
        (self.data.to_string().len() + self.event_id.len() + self.name.len() + key) as u64
    }

    /// The mailbox record of this event.
    fn record(&self) -> StepRecord {
        let mut input = json!({
            "name": self.name,
            "data": self.data,
            "delivery": self.delivery.as_str(),
        });
        if let Some(key) = &self.key {
            input["key"] = json!(key);
        }
        let record = StepRecord::started(input, 1, self.received_at);
        match &self.taken {
            Some((by, at)) => record.finished(json!({ "takenBy": by }), true, *at),
            None => record,
        }
    }

    /// Whether a wait for `name` (with `key`, if any) takes it.
    fn fits(&self, name: &str, key: Option<&str>) -> bool {
        self.taken.is_none()
            && self.name == name
            && match (key, &self.key) {
                (Some(wanted), Some(sent)) => wanted == sent,
                _ => true,
            }
    }

    /// Whether it resumes a step that waits as `wait` says (for any of its events).
    fn fits_wait(&self, wait: &EventWait) -> bool {
        wait.awaited()
            .iter()
            .any(|a| self.fits(&a.name, a.key.as_deref()))
    }

    /// Which of `awaited` it is: the first it fits (taken or not), or the first.
    fn which(&self, awaited: &[AwaitedEvent]) -> usize {
        awaited
            .iter()
            .position(|a| {
                a.name == self.name
                    && match (&a.key, &self.key) {
                        (Some(wanted), Some(sent)) => wanted == sent,
                        _ => true,
                    }
            })
            .unwrap_or(0)
    }

    /// Taken now by the wait of step `step_id` recorded as the journal entry `entry`, into
    /// `steps`: its mailbox record marked taken, and the entry holding its data (what the wait
    /// answers on every later run of the step).
    fn take_into(
        mut self,
        step_id: &str,
        entry: String,
        at: DateTime<Utc>,
        steps: &mut StepRecords,
    ) {
        let taken = StepRecord {
            parent: Some(step_id.to_owned()),
            ..StepRecord::started(self.taken_input(), 1, at)
        }
        .finished(self.data.clone(), true, at);
        self.taken = Some((entry.clone(), at));
        steps.insert(Self::record_id(&self.event_id), Arc::new(self.record()));
        steps.insert(entry, Arc::new(taken));
    }

    /// What the journal entry that took it says of it: its id, name and key.
    fn taken_input(&self) -> Value {
        let mut input = json!({"eventId": self.event_id, "name": self.name});
        if let Some(key) = &self.key {
            input["key"] = json!(key);
        }
        input
    }

    /// The event this delivery reports in the log.
    fn received(&self) -> EventKind {
        EventKind::WorkflowEventReceived {
            name: self.name.clone(),
            key: self.key.clone(),
            event_id: self.event_id.clone(),
            data: self.data.clone(),
            delivery: self.delivery.as_str().to_owned(),
        }
    }
}

/// The events of an execution's mailbox, oldest first.
pub fn mailbox(rec: &ExecutionRecord) -> Vec<MailboxEvent> {
    let mut events: Vec<MailboxEvent> = rec
        .progress
        .steps
        .range(MAILBOX.to_owned()..)
        .take_while(|(id, _)| MailboxEvent::is_record(id))
        .filter_map(|(id, r)| MailboxEvent::from_record(id, r))
        .collect();
    events.sort_by(|a, b| (a.received_at, &a.event_id).cmp(&(b.received_at, &b.event_id)));
    events
}

/// The mailbox event `event_id` of `rec`, if it has one.
fn mailbox_event(rec: &ExecutionRecord, event_id: &str) -> Option<MailboxEvent> {
    let id = MailboxEvent::record_id(event_id);
    MailboxEvent::from_record(&id, rec.progress.steps.get(&id)?)
}

/// An event on its way into an execution: a new one, or one its mailbox already holds.
struct Incoming {
    event: MailboxEvent,
}

/// What a step's waits share within one run of the step.
#[derive(Debug, Default)]
pub(super) struct Waits {
    /// How many waits the step made so far (the next one's entry is `event-<n>`).
    count: AtomicU32,
    /// Whether the wait that timed out was answered (`None`) already.
    timed_out_answered: AtomicBool,
}

impl Engine {
    /// Delivers an event to one execution of `workflow_id`: validated against the event's
    /// declared schema, then, in one fenced write with its `workflow-event-received` event,
    /// it resumes the step that waits for it, or waits in the execution's mailbox. The same
    /// event id again answers the first delivery's outcome and writes nothing.
    pub async fn deliver_event(
        &self,
        workflow_id: &WorkflowId,
        execution_id: &ExecutionId,
        delivery: EventDelivery,
    ) -> Result<Delivered, EngineError> {
        self.require_workflow(workflow_id)?;
        let event_id = Self::event_id(delivery.event_id)?;
        // The event is the one the execution's own version declares.
        let (current, wf) = self.load_to_continue(workflow_id, execution_id).await?;
        Self::check_event(&wf, &delivery.name, &delivery.data)?;
        let incoming = Incoming {
            event: MailboxEvent {
                event_id,
                name: delivery.name,
                key: None,
                data: delivery.data,
                received_at: self.inner.clock.now(),
                delivery: Delivery::Queued,
                taken: None,
            },
        };
        self.hand_over_event(&wf, current, incoming).await
    }

    /// Sends the event `name` with `key` to every execution waiting for it with that key (of
    /// `owner`, when given: strict mode), and keeps it for [`EVENT_RETENTION`] for those that
    /// wait for it later; then starts the executions it starts
    /// ([`crate::workflow::WorkflowBuilder::started_by`]). The data must be valid for every
    /// workflow that declares `name`.
    pub async fn publish_event(
        &self,
        name: &str,
        key: &str,
        data: Value,
        event_id: Option<String>,
        owner: Option<&UserId>,
        scope: Option<&UserId>,
    ) -> Result<Published, EngineError> {
        let event_id = Self::event_id(event_id)?;
        let published = self
            .publish_keyed(name, key, data.clone(), event_id.clone(), owner, scope)
            .await?;
        self.start_on_event(name, &data, &event_id, owner).await;
        Ok(published)
    }

    /// [`Engine::publish_event`] but the starts.
    async fn publish_keyed(
        &self,
        name: &str,
        key: &str,
        data: Value,
        event_id: String,
        owner: Option<&UserId>,
        scope: Option<&UserId>,
    ) -> Result<Published, EngineError> {
        let declaring: Vec<Arc<Workflow>> = self
            .workflows()
            .into_iter()
            .filter(|wf| wf.declares_event(name))
            .collect();
        if declaring.is_empty() {
            return Err(EngineError::UnknownEvent {
                workflow_id: None,
                name: name.to_owned(),
            });
        }
        for wf in &declaring {
            Self::check_event(wf, name, &data)?;
        }
        Self::check_key(key)?;
        self.refuse_when_draining()?;
        let now = self.inner.clock.now();
        let store = &self.inner.store;
        if let Err(e) = store.prune_published(now - EVENT_RETENTION).await {
            tracing::warn!(error = %e, "forgetting the events sent by key before the retention window failed");
        }
        let scope = scope.map_or("", |s| s.as_str()).to_owned();
        let sent = PublishedEvent {
            name: name.to_owned(),
            scope: scope.clone(),
            event_id: event_id.clone(),
            key: key.to_owned(),
            data,
            published_at: now,
            owner: owner.map(|o| o.as_str().to_owned()),
            woken: None,
        };
        // Sent again (by this sender): the stored event (its data, its time) is delivered to
        // any execution that waits for it and did not get it (a first sending cut short by a
        // failure), and the answer is both sendings' executions.
        let (event, inserted) = match store.published_event(name, &scope, &event_id).await? {
            Some(kept) => (kept, false),
            None => {
                self.check_kept(&sent, now - EVENT_RETENTION).await?;
                if store.publish_event(&sent).await? {
                    (sent, true)
                } else {
                    // Another replica kept the same event in between.
                    let kept = store.published_event(name, &scope, &event_id).await?;
                    let kept = kept.ok_or_else(|| {
                        EngineError::Internal(format!("event {event_id} vanished"))
                    })?;
                    (kept, false)
                }
            }
        };
        let mut woken = Vec::new();
        for id in event.woken.iter().flatten() {
            if let Some(rec) = store.get(id).await? {
                woken.push(rec);
            }
        }
        for rec in self.wake_waiting(&event).await? {
            if !woken.iter().any(|w| w.id == rec.id) {
                woken.push(rec);
            }
        }
        let ids: Vec<String> = woken.iter().map(|r| r.id.clone()).collect();
        if event.woken.as_ref() != Some(&ids) {
            store.record_woken(name, &scope, &event_id, &ids).await?;
        }
        Ok(Published {
            event_id,
            woken,
            duplicate: !inserted,
            kept_until: event.published_at + EVENT_RETENTION,
        })
    }

    /// Sends the event `name` that carries no key (a CloudEvent) to the executions waiting for
    /// it: each workflow that declares it reads from the event the keys its executions wait
    /// with ([`crate::workflow::WorkflowBuilder::event_keys`]), and the event is sent by each
    /// of those keys ([`Engine::publish_event`]), under an id of its own per key (derived
    /// from `event_id`: the same event sent again is sent once); then it starts the executions
    /// it starts ([`crate::workflow::WorkflowBuilder::started_by`]). Answers one result per
    /// key.
    pub async fn publish_unkeyed(
        &self,
        name: &str,
        data: Value,
        event_id: &str,
        owner: Option<&UserId>,
        scope: Option<&UserId>,
    ) -> Result<Vec<(String, Published)>, EngineError> {
        let mut keys: Vec<String> = self
            .workflows()
            .iter()
            .flat_map(|wf| wf.event_keys(name, &data))
            .collect();
        keys.sort();
        keys.dedup();
        let mut sent = Vec::new();
        for key in keys {
            let id = format!(
                "ce-{}",
                &crate::id::digest(&format!("{event_id}\0{key}"))[..24]
            );
            let published = self
                .publish_keyed(name, &key, data.clone(), id, owner, scope)
                .await?;
            sent.push((key, published));
        }
        self.start_on_event(name, &data, event_id, owner).await;
        Ok(sent)
    }

    /// Starts an execution of each workflow the event `name` starts
    /// ([`crate::workflow::WorkflowBuilder::started_by`]), of `owner` when given. Its id is
    /// derived from the workflow and the event's id: the same event (sent again, on any
    /// replica) starts it once. A start that fails is logged: the event was sent.
    async fn start_on_event(
        &self,
        name: &str,
        data: &Value,
        event_id: &str,
        owner: Option<&UserId>,
    ) {
        for wf in self.workflows() {
            let Some(input) = wf.start_input(name, data) else {
                continue;
            };
            let digest = crate::id::digest(&format!("{}\0{name}\0{event_id}", wf.id()));
            let options = ExecuteOptions {
                execution_id: Some(format!("on-{digest}").into()),
                user_id: owner.cloned(),
                owner: owner.cloned(),
                ..ExecuteOptions::default()
            };
            let workflow_id = WorkflowId::from(wf.id());
            match self.start(&workflow_id, input, options).await {
                Ok(handle) => {
                    tracing::info!(workflow_id = %workflow_id, event = %name, event_id, "an event started an execution");
                    drop(handle);
                }
                Err(e) => {
                    tracing::warn!(workflow_id = %workflow_id, event = %name, event_id, error = %e, "an event's execution did not start")
                }
            }
        }
    }

    /// Refuses `sent` when the events kept since `since` are at a cap of
    /// [`EventLimits`]: with its name and key, or in all. (Replicas sending at once may pass a
    /// cap by the events they send together: a cap bounds, it does not count exactly.)
    async fn check_kept(
        &self,
        sent: &PublishedEvent,
        since: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), EngineError> {
        let limits = self.inner.config.event_limits;
        let load = self
            .inner
            .store
            .published_load(&sent.name, &sent.key, since)
            .await?;
        let bytes = sent.bytes();
        let full = if load.key_count >= limits.kept_per_key {
            Some(format!(
                "{} events {} with this key are kept (AGENTRY_EVENTS_MAX_PER_KEY)",
                load.key_count, sent.name
            ))
        } else if load.key_bytes + bytes > limits.kept_bytes_per_key {
            Some(format!(
                "the events {} with this key hold {} bytes, at most {} (AGENTRY_EVENTS_MAX_BYTES_PER_KEY)",
                sent.name, load.key_bytes, limits.kept_bytes_per_key
            ))
        } else if load.count >= limits.kept {
            Some(format!(
                "{} events are kept (AGENTRY_EVENTS_MAX)",
                load.count
            ))
        } else if load.bytes + bytes > limits.kept_bytes {
            Some(format!(
                "the events kept hold {} bytes, at most {} (AGENTRY_EVENTS_MAX_BYTES)",
                load.bytes, limits.kept_bytes
            ))
        } else {
            None
        };
        match full {
            Some(why) => Err(EngineError::TooManyEvents(format!(
                "{why}; older ones leave after {} minutes",
                EVENT_RETENTION.as_secs() / 60
            ))),
            None => Ok(()),
        }
    }

    /// A key must be 1 to [`MAX_EVENT_KEY_CHARS`] characters, without NUL.
    fn check_key(key: &str) -> Result<(), EngineError> {
        if key.is_empty() || key.chars().count() > MAX_EVENT_KEY_CHARS {
            return Err(EngineError::InvalidEventData(format!(
                "key: use 1 to {MAX_EVENT_KEY_CHARS} characters"
            )));
        }
        crate::id::refuse_nul("key", key).map_err(EngineError::InvalidEventData)
    }

    /// Delivers a sent event to the executions that wait for it now; returns those it woke.
    async fn wake_waiting(
        &self,
        event: &PublishedEvent,
    ) -> Result<Vec<ExecutionRecord>, EngineError> {
        let store = &self.inner.store;
        let mut tried = std::collections::HashSet::new();
        let mut woken = Vec::new();
        while woken.len() < MAX_WOKEN {
            let limit = u32::try_from(tried.len() + 100).unwrap_or(u32::MAX);
            let ids = store
                .waiting_for_event(&event.name, &event.key, limit)
                .await?;
            let fresh: Vec<String> = ids
                .into_iter()
                .filter(|id| tried.insert(id.clone()))
                .collect();
            if fresh.is_empty() {
                break;
            }
            for id in fresh {
                let Some(rec) = store.get_to_update(&id).await? else {
                    continue;
                };
                if event.owner.is_some() && rec.owner != event.owner {
                    continue;
                }
                // Found by a pattern but waiting for something else (a close key).
                let waits = rec.state.suspension().and_then(|s| s.event.as_ref());
                if waits.is_some_and(|w| !w.awaits_by_key(&event.name, &event.key)) {
                    continue;
                }
                let Some(wf) = self.registered_for(&rec) else {
                    continue;
                };
                let incoming = Incoming {
                    event: Self::published_to_mailbox(event),
                };
                match self.hand_over_event(&wf, rec, incoming).await {
                    Ok(d) if d.delivery == Delivery::Resumed && !d.duplicate => {
                        woken.push(d.record)
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(execution_id = %id, error = %e, "delivering an event sent by key failed")
                    }
                }
            }
        }
        Ok(woken)
    }

    fn published_to_mailbox(event: &PublishedEvent) -> MailboxEvent {
        MailboxEvent {
            event_id: event.event_id.clone(),
            name: event.name.clone(),
            key: Some(event.key.clone()),
            data: event.data.clone(),
            received_at: event.published_at,
            delivery: Delivery::Queued,
            taken: None,
        }
    }

    /// The data of a delivery of `name` must be declared by `wf`, valid against its schema,
    /// and bounded.
    fn check_event(wf: &Workflow, name: &str, data: &Value) -> Result<(), EngineError> {
        if !wf.declares_event(name) {
            return Err(EngineError::UnknownEvent {
                workflow_id: Some(wf.id().to_owned()),
                name: name.to_owned(),
            });
        }
        let size = serde_json::to_vec(data).map_or(usize::MAX, |b| b.len());
        if size > MAX_EVENT_BYTES {
            return Err(EngineError::InvalidEventData(format!(
                "data: {size} bytes is over the limit of {MAX_EVENT_BYTES}"
            )));
        }
        wf.validate_event(name, data)
            .map_err(EngineError::InvalidEventData)
    }

    /// The given event id (checked like an execution id), or a fresh one.
    fn event_id(given: Option<String>) -> Result<String, EngineError> {
        match given {
            Some(id) if crate::id::is_event_id(&id) => Ok(id),
            Some(_) => Err(EngineError::InvalidEventData(format!(
                "eventId: use 1 to {} letters, digits, '-', '_', '.' or ':'",
                crate::id::MAX_KEY_CHARS
            ))),
            None => Ok(uuid::Uuid::now_v7().to_string()),
        }
    }

    /// Puts `incoming` into the execution `current`, in one write: it resumes the step that
    /// waits for it, or waits in the mailbox. An event id the mailbox holds already is not
    /// delivered again (unless it waits there and the execution now waits for it: then it is
    /// taken).
    async fn hand_over_event(
        &self,
        wf: &Arc<Workflow>,
        current: ExecutionRecord,
        incoming: Incoming,
    ) -> Result<Delivered, EngineError> {
        let id = current.id.clone();
        let known = Mutex::new(None);
        let resumed_at = Mutex::new(None);
        let written = self
            .commit(Some(current), &id, Patience::Request, |r, events| {
                let before = mailbox_event(r, &incoming.event.event_id);
                let event = before.clone().unwrap_or_else(|| incoming.event.clone());
                let waiting = r
                    .state
                    .suspension()
                    .filter(|s| s.event.as_ref().is_some_and(|w| event.fits_wait(w)))
                    .cloned();
                *lock(&resumed_at) = None;
                match (waiting, &before) {
                    (Some(suspension), _) => self.resume_with_event(
                        wf,
                        r,
                        event,
                        suspension,
                        before.is_none(),
                        events,
                        &resumed_at,
                    ),
                    (None, Some(first)) => {
                        *lock(&known) = Some(first.clone());
                        Err(EngineError::Unchanged)
                    }
                    (None, None) => self.queue_event(r, &event, events),
                }
            })
            .await;
        let (rec, events) = match written {
            Ok(w) => w,
            Err(EngineError::Unchanged) => {
                let first = lock(&known).take().ok_or_else(|| {
                    EngineError::Internal("a duplicate event with no first delivery".into())
                })?;
                let rec = self
                    .inner
                    .store
                    .get(&id)
                    .await?
                    .ok_or_else(|| EngineError::UnknownExecution(id.clone()))?;
                return Ok(Delivered {
                    event_id: first.event_id,
                    delivery: first.delivery,
                    duplicate: true,
                    record: rec,
                });
            }
            Err(e) => return Err(e),
        };
        let event_id = incoming.event.event_id.clone();
        match lock(&resumed_at).take() {
            Some((index, suspension)) => {
                tracing::info!(execution_id = %id, event = %incoming.event.name, "an event resumed the execution");
                let entry = Entry {
                    step: index,
                    resume: Some((None, suspension.data)),
                    begun: true,
                    announce: events,
                    timed_out: false,
                };
                drop(self.spawn_run(wf.clone(), rec.clone(), entry));
                Ok(Delivered {
                    event_id,
                    delivery: Delivery::Resumed,
                    duplicate: false,
                    record: rec,
                })
            }
            None => {
                self.publish(events);
                Ok(Delivered {
                    event_id,
                    delivery: Delivery::Queued,
                    duplicate: false,
                    record: rec,
                })
            }
        }
    }

    /// `r` with `event` in its mailbox, waiting for a step to take it.
    fn queue_event(
        &self,
        r: &ExecutionRecord,
        event: &MailboxEvent,
        events: &mut Vec<EventKind>,
    ) -> Result<ExecutionRecord, EngineError> {
        let status = r.state.status();
        if status.is_final() {
            return Err(EngineError::EventAfterEnd {
                id: r.id.clone(),
                status,
            });
        }
        let held = mailbox(r);
        let pending = held.iter().filter(|e| e.taken.is_none()).count();
        if pending >= MAX_PENDING_EVENTS {
            return Err(EngineError::MailboxFull(r.id.clone()));
        }
        let limit = self.inner.config.event_limits.mailbox_bytes;
        let bytes: u64 = held.iter().chain([event]).map(MailboxEvent::bytes).sum();
        if bytes > limit {
            return Err(EngineError::MailboxTooLarge {
                id: r.id.clone(),
                limit,
            });
        }
        let mut next = r.clone();
        next.progress.steps_mut().insert(
            MailboxEvent::record_id(&event.event_id),
            Arc::new(event.record()),
        );
        events.push(event.received());
        Ok(next)
    }

    /// `r` resumed at its suspended step, which takes `event` (recorded in the step's journal
    /// under the entry it waits on), in one write; `resumed_at` gets the step's index and the
    /// suspension.
    #[allow(clippy::too_many_arguments)]
    fn resume_with_event(
        &self,
        wf: &Workflow,
        r: &ExecutionRecord,
        mut event: MailboxEvent,
        suspension: Suspension,
        new: bool,
        events: &mut Vec<EventKind>,
        resumed_at: &Mutex<Option<(usize, Suspension)>>,
    ) -> Result<ExecutionRecord, EngineError> {
        let wait = suspension.event.clone().ok_or_else(|| {
            EngineError::Internal("resumed by an event it does not wait for".into())
        })?;
        event.delivery = Delivery::Resumed;
        if new {
            events.push(event.received());
        }
        let woken = Woken {
            resume_data: None,
            suspend_data: suspension.data.clone(),
            timed_out: false,
        };
        let mut next = self.resumed(wf, r, suspension.step_index, &woken, events)?;
        event.take_into(
            &suspension.step_id,
            entry_id(&suspension.step_id, &wait.entry),
            self.inner.clock.now(),
            next.progress.steps_mut(),
        );
        *lock(resumed_at) = Some((suspension.step_index, suspension));
        Ok(next)
    }

    /// After a run suspended to wait for an event: delivers the one its mailbox (or, by key,
    /// the retention) holds for it, if any. (A delivery that came between the step's look and
    /// its suspension is in the mailbox: every write of an execution is ordered.)
    pub(super) async fn look_again_for_event(&self, rec: ExecutionRecord) {
        let Some(wait) = rec.state.suspension().and_then(|s| s.event.clone()) else {
            return;
        };
        let Some(wf) = self.registered_for(&rec) else {
            return;
        };
        let mut waiting = mailbox(&rec).into_iter().find(|e| e.fits_wait(&wait));
        for awaited in wait.awaited() {
            let (None, Some(key)) = (&waiting, &awaited.key) else {
                continue;
            };
            waiting = self
                .kept_events(&rec, &awaited.name, key)
                .await
                .into_iter()
                .next();
        }
        let Some(event) = waiting else {
            return;
        };
        let id = rec.id.clone();
        if let Err(e) = self.hand_over_event(&wf, rec, Incoming { event }).await {
            tracing::warn!(execution_id = %id, error = %e, "handing a waiting event to the execution failed");
        }
    }

    /// The events sent by key `name`/`key` within the retention window that `rec` did not get
    /// yet (and may get: its owner's, or anyone's), oldest first.
    async fn kept_events(&self, rec: &ExecutionRecord, name: &str, key: &str) -> Vec<MailboxEvent> {
        let since = self.inner.clock.now() - EVENT_RETENTION;
        match self
            .inner
            .store
            .published_events(name, key, since, 100)
            .await
        {
            Ok(found) => found
                .iter()
                .filter(|e| e.owner.is_none() || e.owner == rec.owner)
                .filter(|e| mailbox_event(rec, &e.event_id).is_none())
                .map(Self::published_to_mailbox)
                .collect(),
            Err(e) => {
                tracing::warn!(execution_id = %rec.id, error = %e, "reading the events sent by key failed");
                Vec::new()
            }
        }
    }
}

impl Journal {
    /// [`StepContext::wait_for_any_event`]: the event recorded for this wait (which of
    /// `awaited` it is, and its data), or one the mailbox or the retention holds (taken in one
    /// write), or the suspension that waits for them all.
    pub(crate) async fn wait_for(
        &self,
        ctx: &StepContext,
        awaited: &[AwaitedEvent],
        deadline: Option<DateTime<Utc>>,
    ) -> Result<Option<(usize, Value)>, StepError> {
        let Some((first, also)) = awaited.split_first() else {
            return Err(StepError::failed("a wait for events names at least one"));
        };
        for key in awaited.iter().filter_map(|a| a.key.as_deref()) {
            Engine::check_key(key).map_err(|e| StepError::failed(e.to_string()))?;
        }
        let n = self.waits.count.fetch_add(1, Ordering::SeqCst);
        let entry = format!("event-{n}");
        if let Some(taken) = self.entry(&entry).await {
            let which = taken_as(&taken, awaited);
            return Ok(Some((which, taken.output.unwrap_or(Value::Null))));
        }
        if ctx.timed_out && !self.waits.timed_out_answered.swap(true, Ordering::SeqCst) {
            return Ok(None);
        }
        let wait = EventWait {
            name: first.name.clone(),
            key: first.key.clone(),
            entry: entry.clone(),
            also: also.to_vec(),
        };
        let mut kept = Vec::new();
        if let Some(rec) = self.latest().await {
            for a in awaited {
                if let Some(key) = &a.key {
                    kept.extend(self.engine.kept_events(&rec, &a.name, key).await);
                }
            }
        }
        kept.sort_by(|a, b| (a.received_at, &a.event_id).cmp(&(b.received_at, &b.event_id)));
        let entry_record = self.entry_id(&entry);
        let step_id = self.step_id().to_owned();
        let taken = self
            .write_if(|r, events| {
                let now = self.engine.inner.clock.now();
                let from_mailbox = mailbox(r).into_iter().find(|e| e.fits_wait(&wait));
                let new = from_mailbox.is_none();
                let event = from_mailbox
                    .or_else(|| {
                        kept.iter()
                            .find(|e| mailbox_event(r, &e.event_id).is_none())
                            .cloned()
                    })
                    .ok_or(EngineError::Unchanged)?;
                if new {
                    events.push(event.received());
                }
                let mut next = r.clone();
                event.take_into(
                    &step_id,
                    entry_record.clone(),
                    now,
                    next.progress.steps_mut(),
                );
                Ok(next)
            })
            .await?;
        if taken {
            let taken = self.entry(&entry).await;
            return Ok(taken.map(|t| (taken_as(&t, awaited), t.output.unwrap_or(Value::Null))));
        }
        let names: Vec<&str> = awaited.iter().map(|a| a.name.as_str()).collect();
        Err(StepError::Suspend {
            reason: format!("Waiting for event {}", names.join(" or ")),
            data: None,
            deadline,
            event: Some(Box::new(wait)),
        })
    }
}

/// Which of `awaited` the event a wait took (its journal entry) is.
fn taken_as(taken: &StepRecord, awaited: &[AwaitedEvent]) -> usize {
    let text = |field: &str| taken.input.get(field).and_then(Value::as_str);
    let event = MailboxEvent {
        event_id: String::new(),
        name: text("name").unwrap_or_default().to_owned(),
        key: text("key").map(str::to_owned),
        data: Value::Null,
        received_at: taken.started_at,
        delivery: Delivery::Queued,
        taken: None,
    };
    event.which(awaited)
}
