//! A document as one of the engine's workflows: its id, version, name, description and input
//! schema from the document, its events from its `listen` tasks, the events that start it
//! (`schedule.on`), and one step (`workflow`) that runs the document durably ([`crate::run`]).

use std::sync::Arc;

use agentry_engine::workflow::{DefinitionError, Workflow, step};
use serde_json::{Value, json};

use crate::model::{Document, EventFilter};
use crate::run::{Services, envelope_of, run_document};

/// The id of the one engine step of a definition's workflow; its tasks are entries under it
/// (`workflow/do/0/getPet`).
pub const STEP_ID: &str = "workflow";

/// The engine's workflow of `doc`.
pub fn workflow(doc: Arc<Document>, services: Services) -> Result<Workflow, DefinitionError> {
    let name = doc.title.clone().unwrap_or_else(|| doc.name.clone());
    let mut builder = Workflow::new(doc.name.clone(), name)
        .purpose(doc.summary.clone().unwrap_or_default())
        .version(doc.version.clone())
        .source(doc.source.clone());
    if let Some(schema) = &doc.input_schema {
        builder = builder.input_schema(schema.clone());
    }
    for event in &doc.listened {
        let keyed = doc.clone();
        let event_type = event.clone();
        builder = builder.event(event.clone(), json!({})).event_keys(
            event.clone(),
            Arc::new(move |data| keyed.event_keys(&event_type, data)),
        );
    }
    for index in 0..doc.started_by.len() {
        let starting = doc.clone();
        let event_type = doc.started_by[index].event_type.clone();
        builder = builder.started_by(
            event_type.clone(),
            Arc::new(move |data| start_input(&starting.started_by[index], &event_type, data)),
        );
    }
    builder
        .and_then(step(STEP_ID, move |ctx| {
            run_document(doc.clone(), services.clone(), ctx)
        }))
        .build()
}

/// The input of the run an event starts (`schedule.on`): the event as a CloudEvent, when it
/// matches the filter (a predicate that fails to evaluate does not match).
fn start_input(filter: &EventFilter, event_type: &str, data: &Value) -> Option<Value> {
    let envelope = envelope_of(event_type, data.clone());
    // No argument has a value here: each is null.
    match filter.matches(&envelope, &[]) {
        Ok(true) => Some(envelope),
        Ok(false) => None,
        Err(e) => {
            tracing::warn!(event = %event_type, error = %e, "an event filter of schedule.on failed");
            None
        }
    }
}
