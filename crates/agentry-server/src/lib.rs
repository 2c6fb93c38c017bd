//! agentry-server: the composition root and the `agentry` binary. It opens the store, builds
//! the engine and the agents, the application on them (`agentry_app::AppBuilder`), and serves
//! the front ends side by side on one port ([`front_ends`]: HTTP, MCP, A2A, the console); it
//! holds the example registry.

pub mod agent_files;
pub mod auth;
pub mod calc;
pub mod definitions;
pub mod eval;
pub mod examples;
pub mod front_ends;
mod test_agents;

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use std::sync::Arc;

use agentry_agents::{AgentHub, Model, OfflineModel};
use agentry_app::AppBuilder;
use agentry_engine::clock::SystemClock;
use agentry_engine::engine::{CrashHook, CrashPoint};
use agentry_engine::{Engine, EngineConfig};
use agentry_http::{Host, HttpConfig};
use agentry_mcp::SessionLimits;

use agentry_store::{Database, DbOptions};
use anyhow::Context;
pub use auth::AuthSettings;
pub use front_ends::compose;

/// What `agentry serve` needs.
#[derive(Debug, Clone)]
pub struct Settings {
    pub bind: String,
    pub database_url: String,
    /// How the database is opened (SQLite's `synchronous` level).
    pub database: DbOptions,
    pub examples: bool,
    pub http: HttpConfig,
    /// How many MCP sessions may live, and for how long when idle
    /// (`AGENTRY_MCP_MAX_SESSIONS_PER_USER`, `AGENTRY_MCP_MAX_SESSIONS`,
    /// `AGENTRY_MCP_SESSION_IDLE`).
    pub mcp_sessions: SessionLimits,
    /// Authentication (off unless a JWT secret or key is set).
    pub auth: AuthSettings,
    /// This process's name in leases and logs (`AGENTRY_NODE_ID`); `None`: derived from the
    /// host name, the database and the bound address, so stable across restarts of one server.
    pub node_id: Option<String>,
    /// How long an execution's owner may be silent before another process takes it over.
    pub lease_ttl: Duration,
    /// How long SIGTERM waits for running steps before handing executions over.
    pub shutdown_grace: Duration,
    /// Durability tests only: where to abort the process (`AGENTRY_CRASH_AT`).
    pub crash_at: Option<CrashAt>,
    /// Finished executions older than this are deleted in the background (`AGENTRY_RETENTION`;
    /// `None`: kept forever).
    pub retention: Option<Duration>,
    /// The most schedules one verified user creates (`AGENTRY_MAX_SCHEDULES_PER_USER`).
    pub max_schedules_per_user: u64,
    /// Serve `GET /metrics` on this address instead of the main one (`AGENTRY_METRICS_BIND`).
    pub metrics_bind: Option<String>,
    /// What an execution's mailbox and the events kept by key may hold
    /// (`AGENTRY_MAILBOX_MAX_BYTES`, `AGENTRY_EVENTS_MAX*`).
    pub event_limits: agentry_engine::engine::EventLimits,
    /// Definitions as data: the folder whose `workflows/**/*.{yaml,yml,json}` are Serverless
    /// Workflow documents and `agents/*.{yaml,yml}` agent files to register
    /// (`AGENTRY_DEFINITIONS`; docs/DEFINITIONS.md).
    pub definitions: Option<std::path::PathBuf>,
    /// Which addresses definitions' calls may reach (`AGENTRY_OUTBOUND_ALLOW`).
    pub outbound: agentry_definitions::outbound::Policy,
    /// A file of secrets for definitions' `$secrets`, besides `AGENTRY_SECRET_<NAME>`
    /// (`AGENTRY_SECRETS_FILE`).
    pub secrets_file: Option<std::path::PathBuf>,
    /// Whether the definitions are trusted to run processes (an MCP server over stdio;
    /// `AGENTRY_DEFINITIONS_TRUSTED`).
    pub definitions_trusted: bool,
    /// Whether the definitions folder is read again when one of its files changes (besides
    /// `SIGHUP`; `AGENTRY_DEFINITIONS_WATCH`).
    pub definitions_watch: bool,
    /// The URL every event a definition emits is also POSTed to, as a CloudEvent in structured
    /// mode, under the outbound policy (`AGENTRY_EVENTS_SINK`).
    pub events_sink: Option<String>,
    /// The example agents' quality settings (`AGENTRY_FALLBACK_MODELS`,
    /// `AGENTRY_TOKEN_BUDGET_PER_USER_DAY`).
    pub example_quality: examples::Quality,
}

/// How many executions one prune statement deletes at most (a batch: short transactions).
const PRUNE_BATCH: u32 = 1000;

/// Deletes the finished executions of `statuses` that ended more than `older_than` ago, with
/// their steps and events, in batches; returns how many.
pub async fn prune(
    store: &dyn agentry_engine::ExecutionStore,
    older_than: Duration,
    statuses: &[agentry_engine::Status],
) -> anyhow::Result<u64> {
    let cutoff = chrono::Utc::now()
        - chrono::Duration::from_std(older_than).context("--older-than is too long")?;
    let mut total = 0;
    loop {
        let n = store.prune(cutoff, statuses, PRUNE_BATCH).await?;
        total += n;
        if n < u64::from(PRUNE_BATCH) {
            return Ok(total);
        }
    }
}

/// A crash point of one step of one workflow, where the process aborts as a `kill -9` would
/// stop it: `<point>:<workflowId>:<stepId>[:<attempt>]` (`after-effect:countdown:tick-3`,
/// `before-step:flaky-step:attempt:2`); without an attempt, at the first one that gets there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrashAt {
    pub point: CrashPoint,
    pub workflow_id: String,
    pub step_id: String,
    pub attempt: Option<u32>,
}

impl CrashAt {
    pub fn parse(s: &str) -> Result<CrashAt, String> {
        let mut parts = s.splitn(4, ':');
        let (Some(point), Some(workflow_id), Some(step_id)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err("expected <point>:<workflowId>:<stepId>[:<attempt>]".into());
        };
        let attempt = match parts.next() {
            Some(a) => Some(a.parse().map_err(|_| format!("bad attempt {a:?}"))?),
            None => None,
        };
        let point = CrashPoint::parse(point).ok_or_else(|| {
            format!("unknown crash point {point:?}: before-step, after-effect or after-checkpoint")
        })?;
        Ok(CrashAt {
            point,
            workflow_id: workflow_id.to_owned(),
            step_id: step_id.to_owned(),
            attempt,
        })
    }

    /// The engine hook that aborts the process when the run reaches this point.
    fn hook(self) -> CrashHook {
        CrashHook(Arc::new(move |point, workflow_id, step_id, attempt| {
            if point == self.point
                && workflow_id == self.workflow_id
                && step_id == self.step_id
                && self.attempt.is_none_or(|a| a == attempt)
            {
                eprintln!(
                    "agentry: crash point {} of {workflow_id}/{step_id} (AGENTRY_CRASH_AT): aborting",
                    point.as_str()
                );
                std::process::abort();
            }
        }))
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            bind: "127.0.0.1:3141".into(),
            database_url: "sqlite://agentry.db".into(),
            database: DbOptions::default(),
            examples: true,
            http: HttpConfig::default(),
            mcp_sessions: SessionLimits::default(),
            auth: AuthSettings::default(),
            node_id: None,
            lease_ttl: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(10),
            crash_at: None,
            retention: None,
            max_schedules_per_user: agentry_schedules::DEFAULT_MAX_SCHEDULES_PER_USER,
            metrics_bind: None,
            event_limits: agentry_engine::engine::EventLimits::default(),
            definitions: None,
            outbound: agentry_definitions::outbound::Policy::default(),
            secrets_file: None,
            definitions_trusted: false,
            definitions_watch: false,
            events_sink: None,
            example_quality: examples::Quality::default(),
        }
    }
}

/// A started server: its real address, the server future to await, and what it runs on.
pub struct Running {
    pub addr: SocketAddr,
    pub server: actix_web::dev::Server,
    /// The address `GET /metrics` is served on when it has its own (`--metrics-bind`).
    pub metrics_addr: Option<SocketAddr>,
    /// Its server, stopped with the main one.
    pub metrics_server: Option<actix_web::dev::Server>,
    pub engine: Engine,
    pub agents: AgentHub,
    pub database: Database,
    /// How long a SIGTERM waits for running steps.
    pub shutdown_grace: Duration,
}

/// Connects and migrates the database.
pub async fn open_database(url: &str, options: DbOptions) -> anyhow::Result<Database> {
    let db = Database::connect_with(url, options)
        .await
        .with_context(|| format!("opening {}", redact(url)))?;
    db.migrate().await.context("applying migrations")?;
    Ok(db)
}

/// The default model: the built-in offline model unless an OpenAI-compatible endpoint is
/// configured.
pub fn default_model() -> Arc<dyn Model> {
    match agentry_openai::OpenAiModel::from_env() {
        Some(m) => {
            tracing::info!(
                model = m.name(),
                base_url = m.base_url(),
                "agents use an OpenAI-compatible endpoint"
            );
            Arc::new(m)
        }
        None => Arc::new(OfflineModel),
    }
}

/// The OpenAI-compatible endpoint the default model uses, when one is configured.
pub(crate) fn default_model_settings() -> Option<agentry_openai::OpenAiSettings> {
    agentry_openai::OpenAiSettings::from_env()
}

/// The remote A2A agent the example `assistant` may ask (`AGENTRY_EXAMPLE_A2A_AGENT`: its card
/// URL), as its tools.
fn example_remote_agents() -> anyhow::Result<Vec<Arc<dyn agentry_agents::Tool>>> {
    let Some(url) = std::env::var(examples::EXAMPLE_A2A_AGENT)
        .ok()
        .filter(|v| !v.trim().is_empty())
    else {
        return Ok(Vec::new());
    };
    let set = agentry_a2a::A2aToolset::new()
        .agent(url.trim(), None)
        .context(examples::EXAMPLE_A2A_AGENT)?;
    Ok(set.tools())
}

/// Builds the engine and the agents on `db`, with the examples when asked. `AppBuilder::new`
/// wires the agents into the engine (for `andAgent` steps).
fn build(
    db: &Database,
    settings: &Settings,
    config: EngineConfig,
) -> anyhow::Result<(Engine, AgentHub)> {
    let engine = Engine::with(db.execution_store(), Arc::new(SystemClock), config);
    let agents = AgentHub::new(default_model(), Some(db.conversation_store()));
    agents.set_score_store(db.score_store());
    agents.set_usage_store(db.usage_store());
    agents.set_working_memory_store(db.working_memory_store());
    agents.set_recall_store(db.recall_store());
    if settings.examples {
        let quality = settings.example_quality.models(&default_model_settings());
        examples::register_agents(&agents, example_remote_agents()?, quality)
            .context("registering the example agents")?;
        examples::register_workflows(&engine).context("registering the example workflows")?;
    }
    test_agents::register_from_env(&agents, &engine).context("registering the test agents")?;
    Ok((engine, agents))
}

/// Opens the database, applies migrations, registers the examples and binds the socket. The
/// returned server is not yet awaited.
pub async fn start(settings: &Settings) -> anyhow::Result<Running> {
    start_with(settings, |app| app, |host| host).await
}

/// [`start`], letting a host add its own agents, workflows, schedules and execution policy to
/// the application (`customize_app`), and its routes, middleware, provider, auth rules and
/// error hooks to the HTTP front end (`customize_host`; see `examples/host.rs`), to what the
/// settings configure.
pub async fn start_with(
    settings: &Settings,
    customize_app: impl FnOnce(AppBuilder) -> AppBuilder,
    customize_host: impl FnOnce(Host) -> Host,
) -> anyhow::Result<Running> {
    let database = open_database(&settings.database_url, settings.database).await?;
    let listener =
        TcpListener::bind(&settings.bind).with_context(|| format!("binding {}", settings.bind))?;
    let addr = listener.local_addr()?;
    let node_id = settings
        .node_id
        .clone()
        .unwrap_or_else(|| default_node_id(&settings.database_url, addr));
    tracing::info!(node_id = %node_id, "this process's node id");
    let config = EngineConfig {
        node_id,
        lease_ttl: settings.lease_ttl,
        crash_hook: settings.crash_at.clone().map(CrashAt::hook),
        db_patience: settings.database.timeout,
        event_limits: settings.event_limits,
        // Executions join the traces they start in, when traces are exported.
        trace: agentry_otel::enabled().then(|| {
            Arc::new(agentry_otel::OtelTraceContext)
                as Arc<dyn agentry_engine::telemetry::TraceContext>
        }),
        ..EngineConfig::default()
    };
    let (engine, agents) = build(&database, settings, config)?;
    // Followers of an execution's events on this process are woken by the other processes'
    // writes too (PostgreSQL replicas).
    let woken = engine.clone();
    database.listen_for_events(move |id| woken.wake(&id.into()));
    let metrics_listener = match &settings.metrics_bind {
        Some(bind) => {
            Some(TcpListener::bind(bind).with_context(|| format!("binding {bind} for /metrics"))?)
        }
        None => None,
    };
    let http = HttpConfig {
        metrics_elsewhere: metrics_listener.is_some(),
        // The server stops once the engine has drained (see `serve_until_signal`): what is
        // still in flight then gets a second, and the connections left open are closed.
        shutdown_timeout_secs: 1,
        ..settings.http.clone()
    };
    let mut builder = AppBuilder::new(engine.clone(), agents.clone())
        .strict(settings.auth.strict)
        .schedule_store(database.schedule_store())
        .max_schedules_per_user(settings.max_schedules_per_user);
    if settings.examples {
        for schedule in examples::schedules() {
            builder = builder.schedule(schedule);
        }
    }
    let (compiler, documents) = definitions::read(&engine, settings)?;
    for schedule in definitions::schedules(&documents) {
        builder = builder.schedule(schedule);
    }
    if let Some(dir) = &settings.definitions {
        builder =
            agent_files::register(builder, &engine, &agents, dir, settings, &documents).await?;
    }
    builder = builder.definitions(compiler.clone(), database.definition_store());
    let app = customize_app(builder).build()?;
    // The folder's definitions, then those deployed through the API, before any execution is
    // continued (`spawn_maintenance`) or started.
    definitions::load(&app, documents)?;
    app.sync_definitions()
        .await
        .map_err(|e| anyhow::anyhow!(e.message))
        .context("reading the deployed definitions")?;
    definitions::spawn_reloads(app.clone(), compiler, settings);
    let mut host = Host::new().config(http).database(database.kind());
    if let Some(provider) = settings.auth.provider()? {
        tracing::info!(provider = provider.kind(), "authentication is on");
        host = host.auth_shared(provider);
    }
    for p in settings.auth.public_patterns()? {
        host = host.public_route(p.as_str());
    }
    for p in settings.auth.protected_patterns()? {
        host = host.protected_route(p.as_str());
    }
    let state = compose(app, customize_host(host), settings.mcp_sessions)?;
    let metrics_addr = match &metrics_listener {
        Some(l) => Some(l.local_addr()?),
        None => None,
    };
    let metrics_server = match metrics_listener {
        Some(l) => Some(agentry_http::serve_metrics(l, state.clone())?),
        None => None,
    };
    // The declared schedules are written before the first request; the loop that fires them
    // runs on every replica and stops when the engine drains.
    state
        .app
        .scheduler()
        .start()
        .await
        .context("starting the schedules")?;
    let server = agentry_http::serve(listener, state)?;
    spawn_maintenance(engine.clone(), settings.lease_ttl);
    // Every replica starts queued executions where their queues have room.
    engine.start_dispatcher();
    if let Some(retention) = settings.retention {
        spawn_retention(engine.clone(), retention);
    }
    Ok(Running {
        addr,
        server,
        metrics_addr,
        metrics_server,
        engine,
        agents,
        database,
        shutdown_grace: settings.shutdown_grace,
    })
}

impl Running {
    /// Serves until SIGINT or SIGTERM, then stops gracefully: drains (not ready, refusing new
    /// work with 503, still answering), lets running steps finish within the grace, checkpoints
    /// and hands every execution over (its lease released, so another process continues it at
    /// once), then stops accepting, gives in-flight requests a second, closes the database.
    pub async fn serve_until_signal(self) -> anyhow::Result<()> {
        let handle = self.server.handle();
        let engine = self.engine.clone();
        let server = tokio::spawn(self.server);
        let metrics = self.metrics_server.map(|m| {
            let handle = m.handle();
            tokio::spawn(m);
            handle
        });
        shutdown_signal().await;
        self.agents.shutdown();
        if let Some(m) = metrics {
            m.stop(true).await;
        }
        // Log sockets never end by themselves: close them (1001) so they do not hold the stop.
        agentry_http::ws::close_all();
        tracing::info!("shutting down: handing running executions over, finishing requests");
        // The drain: /readyz answers 503 and new starts and resumes 503 `server_shutting_down`
        // (still answered, so that probes and balancers see it) while running steps finish
        // within the grace and every execution is handed over; streams of runs end with
        // `workflow-handover`, followers and MCP streams at once.
        engine.shutdown(self.shutdown_grace).await;
        handle.stop(true).await;
        server.await??;
        // The token usage counted since the last write (written in the background, in batches).
        self.agents.flush_usage().await;
        // A run still waiting on a statement holds its connection: the close waits a moment,
        // not for it.
        if tokio::time::timeout(Duration::from_secs(1), self.database.close())
            .await
            .is_err()
        {
            tracing::warn!("closing the database took too long: leaving its connections");
        }
        tracing::info!("stopped");
        Ok(())
    }
}

/// The node id when none is configured: the host name and a digest of the database URL and the
/// bound address, so that one server restarted on the same port and database is the same node
/// (and continues its own interrupted executions at once), while replicas differ.
pub fn default_node_id(database_url: &str, addr: SocketAddr) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "agentry".to_owned());
    // FNV-1a: stable across builds, unlike std's hasher.
    let digest = format!("{database_url}|{addr}")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    format!("{host}-{:08x}", digest as u32)
}

/// Continues this node's own interrupted executions at once, then renews its leases every
/// third of the ttl and takes over executions whose lease expired (a crashed or frozen peer's).
/// How often the background retention prunes at most (a shorter retention prunes as often as
/// it is long, from once a second).
const RETENTION_PERIOD: Duration = Duration::from_secs(60);

/// Prunes finished executions older than `retention`, periodically.
fn spawn_retention(engine: Engine, retention: Duration) {
    tokio::spawn(async move {
        let period = retention.clamp(Duration::from_secs(1), RETENTION_PERIOD);
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let finals = [
            agentry_engine::Status::Completed,
            agentry_engine::Status::Error,
            agentry_engine::Status::Cancelled,
        ];
        loop {
            tick.tick().await;
            match prune(engine.store().as_ref(), retention, &finals).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(count = n, "pruned finished executions past the retention"),
                Err(e) => tracing::warn!(error = %e, "pruning failed"),
            }
        }
    });
}

fn spawn_maintenance(engine: Engine, lease_ttl: Duration) {
    tokio::spawn(async move {
        match engine.recover_own().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(count = n, "continuing this node's interrupted executions"),
            Err(e) => tracing::warn!(error = %e, "recovering this node's executions failed"),
        }
        let period = (lease_ttl / 3).max(Duration::from_millis(100));
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            engine.announce().await;
            engine.heartbeat().await;
            match engine.recover().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(count = n, "took over executions whose lease expired"),
                Err(e) => tracing::warn!(error = %e, "recovery pass failed"),
            }
            match engine.fire_due_timers().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(count = n, "resumed executions whose deadline passed"),
                Err(e) => tracing::warn!(error = %e, "timer pass failed"),
            }
        }
    });
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Hides a password in a database URL for logs and errors.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..s + 3], &creds[..c], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn redacts_passwords() {
        assert_eq!(
            super::redact("postgres://u:secret@h/db"),
            "postgres://u:***@h/db"
        );
        assert_eq!(super::redact("sqlite://agentry.db"), "sqlite://agentry.db");
    }
}
