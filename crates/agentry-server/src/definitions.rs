//! Definitions as data: the Serverless Workflow documents of `--definitions DIR`, read and
//! checked whole (a directory with a problem is refused, and the server does not start), then
//! registered beside the compiled workflows.

use std::path::Path;
use std::sync::Arc;

use agentry_app::AppBuilder;
use agentry_definitions::outbound::Outbound;
use agentry_definitions::secrets::Secrets;

use crate::Settings;
use agentry_definitions::{EventSink, Problem, Services};
use agentry_engine::{Engine, UserId};
use agentry_schedules::ScheduleSpec;
use anyhow::Context;
use serde_json::{Value, json};

/// Every problem of a refused directory, one per line.
pub fn report(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where definitions' `emit` tasks publish: the engine, as `POST /events` sends a CloudEvent.
struct EngineEvents(Engine);

#[async_trait::async_trait]
impl EventSink for EngineEvents {
    async fn publish(&self, event: &Value, owner: Option<&str>) -> Result<(), String> {
        let attribute = |name: &str| {
            event
                .get(name)
                .and_then(Value::as_str)
                .ok_or_else(|| format!("the event has no `{name}`"))
        };
        let owner = owner.map(UserId::from);
        self.0
            .publish_unkeyed(
                attribute("type")?,
                event.clone(),
                attribute("id")?,
                owner.as_ref(),
                owner.as_ref(),
            )
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// What definitions' runs use: the outbound client under the settings' policy, the engine
/// for the events they emit, the secrets, the runtime descriptor.
pub fn services(settings: &Settings, engine: Option<Engine>) -> anyhow::Result<Services> {
    let secrets = match &settings.secrets_file {
        Some(path) => Secrets::from_file(path).map_err(|e| anyhow::anyhow!(e))?,
        None => Secrets::default(),
    };
    let outbound = Outbound::new(settings.outbound.clone())
        .map_err(|e| anyhow::anyhow!(e))
        .context("building the outbound HTTP client")?;
    Ok(Services {
        outbound: Arc::new(outbound.with_stdio(settings.definitions_trusted)),
        events: engine.map(|e| Arc::new(EngineEvents(e)) as Arc<dyn EventSink>),
        secrets: Arc::new(secrets),
        runtime: Arc::new(json!({
            "name": "agentry",
            "version": env!("CARGO_PKG_VERSION"),
            "metadata": {},
        })),
    })
}

/// Reads the definitions of `dir` and adds their workflows to `builder`.
pub fn register(
    builder: AppBuilder,
    engine: &Engine,
    dir: &Path,
    settings: &Settings,
) -> anyhow::Result<AppBuilder> {
    let docs = agentry_definitions::load::read_dir(dir).map_err(|problems| {
        anyhow::anyhow!(
            "the definitions in {} are refused:\n{}",
            dir.display(),
            report(&problems)
        )
    })?;
    let services = services(settings, Some(engine.clone()))?;
    let mut builder = builder;
    for doc in docs {
        let name = doc.name.clone();
        if engine.workflow(&name.as_str().into()).is_some() {
            anyhow::bail!(
                "the definition {name} names a workflow that is already registered (an example or \
                 a host's): rename it (document.name), or start with --no-examples"
            );
        }
        let schedule = doc.schedule.clone();
        let workflow = agentry_definitions::workflow::workflow(doc, services.clone())
            .with_context(|| format!("registering the definition {name}"))?;
        tracing::info!(workflow = %name, version = workflow.version(), "registered a definition");
        builder = builder.workflow(workflow);
        if let Some(cron) = &schedule {
            // One schedule per definition, declared on every replica: the scheduler fires each
            // tick once across them.
            builder = builder.schedule(ScheduleSpec::new(
                format!("definition-{name}"),
                name.as_str(),
                cron,
            ));
        }
    }
    Ok(builder)
}

/// `agentry check DIR`: every problem of the directory's definitions, or how many are fine.
pub fn check(dir: &Path) -> Result<usize, Vec<Problem>> {
    agentry_definitions::load::read_dir(dir).map(|docs| docs.len())
}
