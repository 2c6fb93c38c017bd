//! Definitions as data: the Serverless Workflow documents of `--definitions DIR`, read and
//! checked whole (a directory with a problem is refused, and the server does not start), then
//! registered beside the compiled workflows; read again on `SIGHUP` or a change
//! (`AGENTRY_DEFINITIONS_WATCH`); and those deployed through the API, which every replica
//! registers from the database. What may be registered is `agentry_app::definitions`'s rule;
//! reading a document is [`DslCompiler`]'s.

use std::path::Path;
use std::sync::Arc;

use std::time::Duration;

use agentry_app::App;
use agentry_app::definitions::{CompiledDefinition, DefinitionCompiler, SourceFormat};
use agentry_definitions::model::Document;
use agentry_definitions::outbound::Outbound;
use agentry_definitions::secrets::Secrets;

use crate::Settings;
use agentry_definitions::run::Starter;
use agentry_definitions::{EventSink, Problem, Services};
use agentry_engine::{Engine, UserId};
use agentry_schedules::ScheduleSpec;
use anyhow::Context;
use serde_json::{Value, json};
use tokio::signal::unix::SignalKind;

/// Every problem of a refused directory, one per line.
pub fn report(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where definitions' `emit` tasks publish: the engine, as `POST /events` sends a CloudEvent
/// (and where `schedule.after` starts the next run).
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

/// Where definitions' `schedule.after` starts their next runs: the engine.
#[async_trait::async_trait]
impl Starter for EngineEvents {
    async fn start(
        &self,
        workflow: &str,
        execution_id: &str,
        input: Value,
        context: serde_json::Map<String, Value>,
        owner: Option<&str>,
    ) -> Result<(), String> {
        let owner = owner.map(UserId::from);
        let options = agentry_engine::ExecuteOptions {
            execution_id: Some(execution_id.into()),
            user_id: owner.clone(),
            owner,
            context,
            ..Default::default()
        };
        self.0
            .start(&workflow.into(), input, options)
            .await
            .map(drop)
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
        events: engine
            .clone()
            .map(|e| Arc::new(EngineEvents(e)) as Arc<dyn EventSink>),
        events_sink: settings.events_sink.clone(),
        starter: engine.map(|e| Arc::new(EngineEvents(e)) as Arc<dyn Starter>),
        secrets: Arc::new(secrets),
        runtime: Arc::new(json!({
            "name": "agentry",
            "version": env!("CARGO_PKG_VERSION"),
            "metadata": {},
        })),
    })
}

/// Reads documents for the application: a document's text (deployed through the API) or a
/// folder's files, as workflows with the services their runs use.
pub struct DslCompiler {
    services: Services,
}

impl DslCompiler {
    pub fn new(services: Services) -> Self {
        Self { services }
    }

    /// A document read (checked, resolved) as the application registers it.
    fn compiled(&self, doc: Arc<Document>) -> Result<CompiledDefinition, Vec<String>> {
        let digest = agentry_definitions::load::digest(&doc.source);
        let document = doc.source.clone();
        let schedule = doc.schedule.clone();
        let workflow = agentry_definitions::workflow::workflow(doc, self.services.clone())
            .map_err(|e| vec![e.to_string()])?;
        Ok(CompiledDefinition {
            workflow,
            digest,
            document,
            schedule,
        })
    }

    /// Every document of `dir`, read and compiled, or every problem (the folder is refused
    /// whole).
    pub fn read_dir(&self, dir: &Path) -> Result<Vec<CompiledDefinition>, Vec<String>> {
        let docs = agentry_definitions::load::read_dir(dir)
            .map_err(|problems| problems.iter().map(ToString::to_string).collect::<Vec<_>>())?;
        let mut compiled = Vec::with_capacity(docs.len());
        let mut problems = Vec::new();
        for doc in docs {
            match self.compiled(doc) {
                Ok(c) => compiled.push(c),
                Err(p) => problems.extend(p),
            }
        }
        if problems.is_empty() {
            Ok(compiled)
        } else {
            Err(problems)
        }
    }
}

impl DefinitionCompiler for DslCompiler {
    fn compile(
        &self,
        source: &str,
        format: SourceFormat,
    ) -> Result<CompiledDefinition, Vec<String>> {
        const NAME: &str = "document";
        let one = |p: Problem| vec![p.to_string()];
        let value = agentry_definitions::load::parse(NAME, source, format == SourceFormat::Json)
            .map_err(one)?;
        let doc = agentry_definitions::load::read(NAME, value)
            .map_err(|problems| problems.iter().map(ToString::to_string).collect::<Vec<_>>())?;
        self.compiled(Arc::new(doc))
    }
}

/// The definitions of the settings' folder, read and compiled, with the compiler that read
/// them (the application's, for the documents deployed through the API). A folder with any
/// problem stops the start.
pub fn read(
    engine: &Engine,
    settings: &Settings,
) -> anyhow::Result<(Arc<DslCompiler>, Vec<CompiledDefinition>)> {
    let compiler = Arc::new(DslCompiler::new(services(settings, Some(engine.clone()))?));
    let documents = match &settings.definitions {
        Some(dir) => compiler.read_dir(dir).map_err(|problems| {
            anyhow::anyhow!(
                "the definitions in {} are refused:\n{}",
                dir.display(),
                problems.join("\n")
            )
        })?,
        None => Vec::new(),
    };
    Ok((compiler, documents))
}

/// One schedule per definition that declares one, declared on every replica: the scheduler
/// fires each tick once across them.
pub fn schedules(documents: &[CompiledDefinition]) -> Vec<ScheduleSpec> {
    documents
        .iter()
        .filter_map(|d| {
            let name = d.workflow.id();
            d.schedule
                .as_ref()
                .map(|cron| ScheduleSpec::new(format!("definition-{name}"), name, cron))
        })
        .collect()
}

/// Registers the folder's documents at the start (a refused one stops it).
pub fn load(app: &App, documents: Vec<CompiledDefinition>) -> anyhow::Result<()> {
    let loaded = app.load_definition_files(documents).map_err(|problems| {
        anyhow::anyhow!("the definitions are refused:\n{}", problems.join("\n"))
    })?;
    for label in &loaded.added {
        tracing::info!(workflow = %label, "registered a definition");
    }
    Ok(())
}

/// How often a replica looks for definitions deployed or deleted on another, and how often a
/// watched folder is looked at.
const POLL: Duration = Duration::from_secs(2);

/// Keeps the definitions current until the application drains: those deployed through the
/// API (every [`POLL`]), and the folder's, read again on `SIGHUP` and, with
/// `definitions_watch`, when a file changes.
pub fn spawn_reloads(app: App, compiler: Arc<DslCompiler>, settings: &Settings) {
    let drained = app.drain_signal();
    let synced = app.clone();
    let stop = drained.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(POLL) => {}
            }
            if let Err(e) = synced.sync_definitions().await {
                tracing::warn!(error = %e.message, "looking for deployed definitions");
            }
        }
    });
    let Some(dir) = settings.definitions.clone() else {
        return;
    };
    let watch = settings.definitions_watch;
    tokio::spawn(async move {
        let mut hangups = match tokio::signal::unix::signal(SignalKind::hangup()) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = %e, "SIGHUP cannot be listened to: no reload on it");
                None
            }
        };
        let mut seen = fingerprint(&dir);
        loop {
            let hangup = async {
                match hangups.as_mut() {
                    Some(s) => s.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = drained.cancelled() => return,
                _ = hangup => tracing::info!("SIGHUP: reading the definitions again"),
                _ = tokio::time::sleep(POLL), if watch => {
                    let now = fingerprint(&dir);
                    if now == seen {
                        continue;
                    }
                    seen = now;
                    tracing::info!("a definition file changed: reading the definitions again");
                }
            }
            reload(&app, &compiler, &dir);
        }
    });
}

/// Reads the folder again and registers what is new; a folder with a problem is refused whole
/// and what was loaded stays.
pub fn reload(app: &App, compiler: &DslCompiler, dir: &Path) {
    let refused = |problems: Vec<String>| {
        tracing::error!(
            dir = %dir.display(),
            problems = %problems.join("\n"),
            "the definitions are refused whole: those loaded before stay"
        );
    };
    let documents = match compiler.read_dir(dir) {
        Ok(d) => d,
        Err(problems) => return refused(problems),
    };
    match app.load_definition_files(documents) {
        Ok(loaded) => tracing::info!(
            added = %loaded.added.join(", "),
            unchanged = loaded.unchanged,
            "the definitions were read again"
        ),
        Err(problems) => refused(problems),
    }
}

/// What the folder's files are now (paths, sizes, modification times), to tell a change.
fn fingerprint(dir: &Path) -> Vec<(std::path::PathBuf, u64, Option<std::time::SystemTime>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                if out.len() + stack.len() < 10_000 {
                    stack.push(path);
                }
            } else {
                out.push((path, meta.len(), meta.modified().ok()));
            }
        }
    }
    out.sort();
    out
}

/// `agentry check DIR`: every problem of the directory's definitions (workflows and agent
/// files), or how many are fine.
pub fn check(dir: &Path) -> Result<usize, Vec<Problem>> {
    match (
        agentry_definitions::load::read_dir(dir),
        agentry_definitions::agents::read_dir(dir),
    ) {
        (Ok(docs), Ok(agents)) => Ok(docs.len() + agents.len()),
        (docs, agents) => Err(docs
            .err()
            .into_iter()
            .chain(agents.err())
            .flatten()
            .collect()),
    }
}
