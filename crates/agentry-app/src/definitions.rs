//! Workflow definitions as data, once loaded: those read from the server's definitions folder
//! (at the start, and again on a reload) and those deployed through the API (stored in the
//! database, so that every replica runs them). This module decides what may be registered and
//! who may deploy; reading a document is a [`DefinitionCompiler`]'s (the composition root gives
//! one: this crate knows no document language).
//!
//! The rules, the same for both origins:
//! - a name belongs to one origin: a compiled workflow, a file, or the API; another origin's
//!   definition of it is refused;
//! - a version, once registered, is never rewritten: the same name and version with another
//!   document is refused (raise `document.version`); the same document again is a no-op;
//! - a new version is registered beside the older ones: executions stay on the version they
//!   started on, new ones start on the newest;
//! - a deployed version is deleted only when no execution runs or waits on it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use agentry_engine::definition_store::{
    DefinitionStore, InMemoryDefinitionStore, StoredDefinition,
};
use agentry_engine::{Engine, Workflow, WorkflowId};
use chrono::Utc;
use serde_json::Value;

use crate::App;
use crate::caller::Caller;
use crate::error::{AppError, Code};
use crate::wire::definitions::{
    DefinitionDeleted, DefinitionDeployed, DefinitionVersion, DefinitionView,
};

/// How a document's text is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceFormat {
    Json,
    Yaml,
}

impl SourceFormat {
    /// The format a request's `Content-Type` names (parameters such as `charset` aside), or
    /// `None` for any other media type.
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        let essence = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        match essence.as_str() {
            "application/json" => Some(Self::Json),
            "application/yaml" | "application/x-yaml" | "text/yaml" | "text/x-yaml" => {
                Some(Self::Yaml)
            }
            _ => None,
        }
    }

    /// The media type it is stored and answered as.
    pub fn media_type(self) -> &'static str {
        match self {
            Self::Json => "application/json",
            Self::Yaml => "application/yaml",
        }
    }
}

/// A document read and ready to run.
pub struct CompiledDefinition {
    pub workflow: Workflow,
    /// A digest of the document's content, the same whichever format it was written in.
    pub digest: String,
    /// The document, as JSON.
    pub document: Value,
    /// When it starts by itself: a cron expression (a folder's definitions only).
    pub schedule: Option<String>,
}

/// Reads documents: the composition root's (for Serverless Workflow documents,
/// `agentry-definitions`).
pub trait DefinitionCompiler: Send + Sync + 'static {
    /// The workflow a document defines, or every problem with it (one line each).
    fn compile(
        &self,
        source: &str,
        format: SourceFormat,
    ) -> Result<CompiledDefinition, Vec<String>>;
}

/// The compiler of an application that reads no documents.
struct NoDocuments;

impl DefinitionCompiler for NoDocuments {
    fn compile(&self, _: &str, _: SourceFormat) -> Result<CompiledDefinition, Vec<String>> {
        Err(vec!["this server reads no workflow definitions".to_owned()])
    }
}

/// Where a registered definition came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The server's definitions folder.
    File,
    /// `PUT /definitions/workflows/{name}`, stored in the database.
    Api,
}

impl Origin {
    fn as_str(self) -> &'static str {
        match self {
            Origin::File => "file",
            Origin::Api => "api",
        }
    }
}

/// One version this process registered from a document.
#[derive(Debug, Clone)]
struct Loaded {
    digest: String,
    origin: Origin,
}

/// The definitions this process registered, by name and version, with what reads and stores
/// them.
pub struct Definitions {
    compiler: Arc<dyn DefinitionCompiler>,
    store: Arc<dyn DefinitionStore>,
    loaded: Mutex<BTreeMap<(String, String), Loaded>>,
}

impl Default for Definitions {
    fn default() -> Self {
        Self::new(
            Arc::new(NoDocuments),
            Arc::new(InMemoryDefinitionStore::default()),
        )
    }
}

/// What a reload of the definitions folder did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// The versions registered (`name@version`).
    pub added: Vec<String>,
    /// How many documents were unchanged.
    pub unchanged: usize,
}

impl Definitions {
    pub fn new(compiler: Arc<dyn DefinitionCompiler>, store: Arc<dyn DefinitionStore>) -> Self {
        Self {
            compiler,
            store,
            loaded: Mutex::new(BTreeMap::new()),
        }
    }

    fn loaded(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), Loaded>> {
        self.loaded.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The origin of the definitions named `name`: `None` for a name no document defined
    /// here.
    fn origin_of(&self, name: &str) -> Option<Origin> {
        self.loaded()
            .iter()
            .find(|((n, _), _)| n == name)
            .map(|(_, l)| l.origin)
    }

    /// Why `compiled` may not be registered from `origin` (every rule of the module's
    /// documentation but deletion), or `Ok(true)` when it is registered already (the same
    /// document), `Ok(false)` when it may be.
    fn admissible(
        &self,
        engine: &Engine,
        compiled: &CompiledDefinition,
        origin: Origin,
    ) -> Result<bool, String> {
        let name = compiled.workflow.id();
        let version = compiled.workflow.version();
        match self.origin_of(name) {
            Some(o) if o != origin => {
                return Err(format!(
                    "the workflow {name} is defined by a document of another origin ({})",
                    o.as_str()
                ));
            }
            None if engine.workflow(&WorkflowId::from(name)).is_some() => {
                return Err(format!(
                    "the workflow {name} is compiled into the server (an example or a host's): \
                     choose another document.name"
                ));
            }
            _ => {}
        }
        match self.loaded().get(&(name.to_owned(), version.to_owned())) {
            Some(l) if l.digest == compiled.digest => Ok(true),
            Some(_) => Err(format!(
                "version {version} of {name} is registered with another document: raise \
                 document.version (a version is never rewritten)"
            )),
            None => Ok(false),
        }
    }

    /// Registers a compiled document with the engine (from `origin`), unless it is there.
    fn register(
        &self,
        engine: &Engine,
        compiled: CompiledDefinition,
        origin: Origin,
    ) -> Result<bool, String> {
        if self.admissible(engine, &compiled, origin)? {
            return Ok(false);
        }
        let key = (
            compiled.workflow.id().to_owned(),
            compiled.workflow.version().to_owned(),
        );
        engine
            .register(compiled.workflow)
            .map_err(|e| e.to_string())?;
        self.loaded().insert(
            key,
            Loaded {
                digest: compiled.digest,
                origin,
            },
        );
        Ok(true)
    }

    /// Registers the documents of the definitions folder, all or none: one that may not be
    /// registered refuses them all (with every reason), and what was registered stays.
    pub fn load_files(
        &self,
        engine: &Engine,
        documents: Vec<CompiledDefinition>,
    ) -> Result<Reloaded, Vec<String>> {
        let problems: Vec<String> = documents
            .iter()
            .filter_map(|d| self.admissible(engine, d, Origin::File).err())
            .collect();
        if !problems.is_empty() {
            return Err(problems);
        }
        let mut report = Reloaded::default();
        for d in documents {
            let label = format!("{}@{}", d.workflow.id(), d.workflow.version());
            match self.register(engine, d, Origin::File) {
                Ok(true) => report.added.push(label),
                Ok(false) => report.unchanged += 1,
                Err(e) => return Err(vec![e]),
            }
        }
        Ok(report)
    }

    /// Registers every deployed version this process does not run yet, and forgets those
    /// deleted on another replica. Run at the start and then every few seconds: every replica
    /// runs what was deployed on any. A document that no longer reads (stored by a build that
    /// read it otherwise) is logged and skipped.
    pub async fn sync(&self, engine: &Engine) -> Result<(), AppError> {
        let heads = self.store.heads().await.map_err(store_error)?;
        for head in &heads {
            let known = self
                .loaded()
                .get(&(head.name.clone(), head.version.clone()))
                .is_some_and(|l| l.digest == head.digest);
            if known {
                continue;
            }
            let Some(stored) = self
                .store
                .get(&head.name, Some(&head.version))
                .await
                .map_err(store_error)?
            else {
                continue;
            };
            let compiled = match self.compile_stored(&stored) {
                Ok(c) => c,
                Err(problems) => {
                    tracing::error!(
                        workflow = %stored.name, version = %stored.version,
                        problems = %problems.join("; "),
                        "a deployed definition does not read: skipped"
                    );
                    continue;
                }
            };
            match self.register(engine, compiled, Origin::Api) {
                Ok(true) => tracing::info!(
                    workflow = %stored.name, version = %stored.version,
                    "registered a deployed definition"
                ),
                Ok(false) => {}
                Err(reason) => tracing::warn!(
                    workflow = %stored.name, version = %stored.version, %reason,
                    "a deployed definition is not registered here"
                ),
            }
        }
        let gone: Vec<(String, String)> = self
            .loaded()
            .iter()
            .filter(|(key, l)| {
                l.origin == Origin::Api
                    && !heads.iter().any(|h| h.name == key.0 && h.version == key.1)
            })
            .map(|(key, _)| key.clone())
            .collect();
        for (name, version) in gone {
            engine.unregister(&WorkflowId::from(name.as_str()), &version);
            self.loaded().remove(&(name.clone(), version.clone()));
            tracing::info!(workflow = %name, %version, "forgot a deleted definition");
        }
        Ok(())
    }

    fn compile_stored(&self, stored: &StoredDefinition) -> Result<CompiledDefinition, Vec<String>> {
        let format =
            SourceFormat::from_content_type(&stored.content_type).unwrap_or(SourceFormat::Yaml);
        self.compiler.compile(&stored.source, format)
    }
}

fn store_error(e: agentry_engine::store::StoreError) -> AppError {
    AppError::engine(e.into(), "Failed to read the deployed definitions")
}

/// The largest document deployed through the API (the largest file read from a folder, too).
pub const MAX_DEFINITION_BYTES: usize = 1024 * 1024;

impl App {
    /// The definitions registered from documents.
    pub fn definitions(&self) -> &Definitions {
        &self.definitions
    }

    /// Registers what the definitions folder holds ([`Definitions::load_files`]).
    pub fn load_definition_files(
        &self,
        documents: Vec<CompiledDefinition>,
    ) -> Result<Reloaded, Vec<String>> {
        self.definitions.load_files(&self.engine, documents)
    }

    /// [`Definitions::sync`] on this application's engine.
    pub async fn sync_definitions(&self) -> Result<(), AppError> {
        self.definitions.sync(&self.engine).await
    }

    /// `PUT /definitions/workflows/{name}`: stores the document (a new version, or the same
    /// document again) and registers it; every replica registers it within seconds.
    pub async fn deploy_definition(
        &self,
        caller: &Caller,
        name: &str,
        body: &[u8],
        content_type: &str,
    ) -> Result<DefinitionDeployed, AppError> {
        self.policy.authorize_definitions(caller)?;
        let format = SourceFormat::from_content_type(content_type).ok_or_else(|| {
            AppError::new(
                Code::UnsupportedMediaType,
                "A definition is sent as application/json or application/yaml",
            )
        })?;
        if body.len() > MAX_DEFINITION_BYTES {
            return Err(AppError::new(
                Code::PayloadTooLarge,
                format!("A definition is at most {MAX_DEFINITION_BYTES} bytes"),
            ));
        }
        let source = std::str::from_utf8(body)
            .map_err(|_| AppError::bad_request("Invalid definition: the body is not UTF-8"))?;
        let compiled = self
            .definitions
            .compiler
            .compile(source, format)
            .map_err(|problems| invalid(&problems))?;
        if compiled.schedule.is_some() {
            return Err(invalid(&[
                "/schedule: a definition deployed through the API does not start by itself: \
                 create a schedule for it (POST /schedules)"
                    .to_owned(),
            ]));
        }
        if compiled.workflow.id() != name {
            return Err(invalid(&[format!(
                "/document/name: the document names {:?}, the path {name:?}",
                compiled.workflow.id()
            )]));
        }
        let version = compiled.workflow.version().to_owned();
        self.definitions
            .admissible(&self.engine, &compiled, Origin::Api)
            .map_err(|reason| AppError::new(Code::DefinitionConflict, reason))?;
        let stored = StoredDefinition {
            name: name.to_owned(),
            version: version.clone(),
            digest: compiled.digest.clone(),
            source: source.to_owned(),
            content_type: format.media_type().to_owned(),
            created_at: Utc::now(),
            created_by: caller.user().and_then(|u| u.id()),
        };
        let created = self
            .definitions
            .store
            .insert(&stored)
            .await
            .map_err(store_error)?;
        if !created {
            let existing = self
                .definitions
                .store
                .get(name, Some(&version))
                .await
                .map_err(store_error)?;
            if existing.is_some_and(|e| e.digest != compiled.digest) {
                return Err(AppError::new(
                    Code::DefinitionConflict,
                    format!(
                        "version {version} of {name} is deployed with another document: raise \
                         document.version (a version is never rewritten)"
                    ),
                ));
            }
        }
        let digest = compiled.digest.clone();
        self.definitions
            .register(&self.engine, compiled, Origin::Api)
            .map_err(|reason| AppError::new(Code::DefinitionConflict, reason))?;
        Ok(DefinitionDeployed {
            name: name.to_owned(),
            version,
            digest,
            created,
        })
    }

    /// `GET /definitions/workflows/{name}`: a deployed definition's version (the newest
    /// without `version`), its document and every version deployed.
    pub async fn deployed_definition(
        &self,
        caller: &Caller,
        name: &str,
        version: Option<&str>,
    ) -> Result<DefinitionView, AppError> {
        self.policy.authorize_definitions(caller)?;
        let versions = self
            .definitions
            .store
            .versions(name)
            .await
            .map_err(store_error)?;
        let chosen = match version {
            Some(v) => versions.iter().find(|d| d.version == v),
            None => versions.last(),
        }
        .ok_or_else(|| not_found(name, version))?;
        let document = self
            .definitions
            .compile_stored(chosen)
            .map(|c| c.document)
            .unwrap_or(Value::Null);
        let in_flight = self
            .engine
            .versions_in_flight(&WorkflowId::from(name))
            .await
            .map_err(|e| AppError::engine(e, "Failed to read the definition"))?;
        let count = |v: &str| {
            in_flight
                .iter()
                .find(|f| f.version.as_deref() == Some(v))
                .map_or(0, |f| f.in_flight)
        };
        Ok(DefinitionView {
            name: name.to_owned(),
            version: chosen.version.clone(),
            digest: chosen.digest.clone(),
            content_type: chosen.content_type.clone(),
            created_at: chosen.created_at.into(),
            created_by: chosen.created_by.clone(),
            source: chosen.source.clone(),
            document,
            versions: versions
                .iter()
                .map(|d| DefinitionVersion {
                    version: d.version.clone(),
                    digest: d.digest.clone(),
                    created_at: d.created_at.into(),
                    created_by: d.created_by.clone(),
                    in_flight: count(&d.version),
                })
                .collect(),
        })
    }

    /// `DELETE /definitions/workflows/{name}?version=`: forgets a deployed version that no
    /// execution runs or waits on (the other replicas forget it within seconds).
    pub async fn delete_definition(
        &self,
        caller: &Caller,
        name: &str,
        version: &str,
    ) -> Result<DefinitionDeleted, AppError> {
        self.policy.authorize_definitions(caller)?;
        let stored = self
            .definitions
            .store
            .get(name, Some(version))
            .await
            .map_err(store_error)?
            .ok_or_else(|| not_found(name, Some(version)))?;
        let id = WorkflowId::from(name);
        // Forgotten here first, so that no execution starts on it while it is counted.
        let registered = self.engine.unregister(&id, version);
        let in_flight = self.engine.versions_in_flight(&id).await.map(|all| {
            all.iter()
                .find(|f| f.version.as_deref() == Some(version))
                .map_or(0, |f| f.in_flight)
        });
        let refuse = |e: AppError| {
            if let Some(w) = &registered {
                // Still runnable here: put back as it was.
                let _ = self.engine.register(w.clone());
            }
            e
        };
        let in_flight = in_flight
            .map_err(|e| refuse(AppError::engine(e, "Failed to delete the definition")))?;
        if in_flight > 0 {
            return Err(refuse(AppError::new(
                Code::DefinitionInUse,
                format!(
                    "version {version} of {name} has {in_flight} executions in flight: delete it \
                     once they have ended"
                ),
            )));
        }
        self.definitions
            .store
            .delete(name, version)
            .await
            .map_err(|e| refuse(store_error(e)))?;
        self.definitions
            .loaded()
            .remove(&(name.to_owned(), version.to_owned()));
        Ok(DefinitionDeleted {
            name: name.to_owned(),
            version: stored.version,
            deleted: true,
        })
    }
}

fn invalid(problems: &[String]) -> AppError {
    AppError::new(
        Code::InvalidDefinition,
        format!("Invalid definition: {}", problems.join("; ")),
    )
}

fn not_found(name: &str, version: Option<&str>) -> AppError {
    AppError::new(
        Code::DefinitionNotFound,
        match version {
            Some(v) => format!("Definition {name} version {v} not found"),
            None => format!("Definition {name} not found"),
        },
    )
}
