//! The `agentry` binary: `serve` (the default), `migrate`, `prune`, `token`, `check`, `eval`.

use agentry_server::{AuthSettings, Settings, open_database, redact, start};
use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "agentry",
    version,
    about = "AI agents and durable workflows behind one HTTP API",
    args_conflicts_with_subcommands = true,
    after_help = AUTH_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Apply migrations, register the examples and serve HTTP (the default).
    Serve(Box<ServeArgs>),
    /// Apply pending migrations and exit.
    Migrate(DbArgs),
    /// Print one signed JWT (HS256 with AGENTRY_JWT_SECRET) and a newline.
    Token(TokenArgs),
    /// Delete finished executions (with their steps and events) that ended long enough ago.
    Prune(PruneArgs),
    /// Check a folder of definitions (`DIR/workflows/**/*.{yaml,yml,json}` against the
    /// Serverless Workflow schema and what agentry runs, `DIR/agents/*.{yaml,yml}` as agent
    /// files): every problem with its file, JSON pointer and reason; exits 1 when there is any.
    Check(CheckArgs),
    /// Run an eval dataset (JSONL: `input`, optional `expected`, `expectedToolCalls`,
    /// `schema`, `name`) against an agent, on a running server (`--server`) or in this process
    /// (an in-memory SQLite with the examples): prints each scorer's mean and the failures,
    /// writes JSON and JUnit XML when asked, exits 1 when a mean is below its threshold or a
    /// case got no answer.
    Eval(EvalArgs),
}

#[derive(Args, Debug, Clone)]
struct EvalArgs {
    /// The dataset: one JSON case a line.
    dataset: std::path::PathBuf,
    /// The agent to evaluate.
    #[arg(long)]
    agent: String,
    /// A running server's base URL (http://127.0.0.1:3141); without it, the server is started
    /// in this process on an in-memory SQLite with the examples.
    #[arg(long)]
    server: Option<String>,
    /// In process: also the agent files (`DIR/agents/*.{yaml,yml}`) and workflows of this
    /// definitions folder.
    #[arg(long, env = "AGENTRY_DEFINITIONS", conflicts_with = "server")]
    definitions: Option<std::path::PathBuf>,
    /// The bearer token sent to `--server`.
    #[arg(long, env = "AGENTRY_EVAL_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A scorer to run (repeatable): exact, contains, json, tool-calls, latency, tokens,
    /// relevance, faithfulness (the last two judged by the configured model) [default: the
    /// deterministic ones the dataset's fields allow, with latency and tokens].
    #[arg(long = "scorer", value_parser = agentry_server::eval::Choice::parse)]
    scorers: Vec<agentry_server::eval::Choice>,
    /// SCORER=MIN (repeatable): exit 1 when the scorer's mean is below MIN (0 to 1).
    #[arg(long = "threshold", value_parser = agentry_server::eval::parse_threshold)]
    thresholds: Vec<(agentry_server::eval::Choice, f64)>,
    /// The `latency` scorer's limit per answer: 500ms, 30s, 2m.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    max_latency: std::time::Duration,
    /// The `tokens` scorer's limit per answer (input and output tokens).
    #[arg(long, default_value_t = 10_000)]
    max_tokens: u64,
    /// The longest one case may take.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    timeout: std::time::Duration,
    /// Writes the report as JSON here.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Writes the report as JUnit XML here.
    #[arg(long)]
    junit: Option<std::path::PathBuf>,
}

/// `agentry eval`: exits 1 when a threshold is not met or a case got no answer.
async fn eval(args: EvalArgs) -> anyhow::Result<()> {
    use agentry_server::eval;
    let opts = eval::EvalOptions {
        agent: args.agent,
        target: match args.server {
            Some(url) => eval::Target::Server {
                url,
                token: args.token,
            },
            None => eval::Target::InProcess {
                definitions: args.definitions,
            },
        },
        scorers: (!args.scorers.is_empty()).then_some(args.scorers),
        thresholds: args.thresholds,
        max_latency: args.max_latency,
        max_tokens: args.max_tokens,
        timeout: args.timeout,
    };
    let report = eval::run(&args.dataset, &opts).await?;
    print!("{}", eval::table(&report));
    eval::write_files(&report, args.json.as_ref(), args.junit.as_ref())?;
    if !report.passed {
        std::process::exit(1);
    }
    Ok(())
}

#[derive(Args, Debug, Clone)]
struct CheckArgs {
    /// The folder of definitions.
    dir: std::path::PathBuf,
}

#[derive(Args, Debug, Clone)]
struct PruneArgs {
    #[command(flatten)]
    db: DbArgs,
    /// Delete those that ended more than this long ago: 90s, 15m, 12h, 30d.
    #[arg(long, value_parser = parse_duration)]
    older_than: std::time::Duration,
    /// Only these statuses (comma list of completed, error, cancelled) [default: all three].
    #[arg(long, value_delimiter = ',', value_parser = parse_final_status)]
    status: Vec<agentry_engine::Status>,
}

fn parse_final_status(s: &str) -> Result<agentry_engine::Status, String> {
    agentry_engine::Status::parse(s.trim())
        .filter(|st| st.is_final())
        .ok_or_else(|| format!("{s:?} is not a finished status: completed, error or cancelled"))
}

async fn prune(args: PruneArgs) -> anyhow::Result<()> {
    let statuses = if args.status.is_empty() {
        vec![
            agentry_engine::Status::Completed,
            agentry_engine::Status::Error,
            agentry_engine::Status::Cancelled,
        ]
    } else {
        args.status
    };
    let database = open_database(&args.db.database_url, args.db.options()).await?;
    let store = database.execution_store();
    let pruned = agentry_server::prune(store.as_ref(), args.older_than, &statuses).await;
    database.close().await;
    let pruned = pruned?;
    println!("pruned {pruned} executions");
    Ok(())
}

const AUTH_HELP: &str = "Authentication (environment only):
  AGENTRY_JWT_SECRET           when set, the JWT provider is on (HS256 with this secret)
  AGENTRY_JWT_PUBLIC_KEY_FILE  PEM public key: RS256 tokens are verified with it
  AGENTRY_JWT_ALGORITHMS       comma list of allowed algorithms [default: HS256, or RS256 with a key]
  AGENTRY_JWT_AUDIENCE         expected aud, when set
  AGENTRY_JWT_ISSUER           expected iss, when set
  AGENTRY_PUBLIC_ROUTES        comma list of extra public patterns, METHOD /path with a trailing /*
  AGENTRY_PROTECTED_ROUTES     comma list of extra protected patterns (e.g. POST /workflows/*)
Models: OPENAI_API_KEY, OPENAI_BASE_URL, AGENTRY_MODEL [default: gpt-4o-mini]. Logs: RUST_LOG [default: info].";

#[derive(Args, Debug, Clone)]
struct TokenArgs {
    /// The subject (the user id).
    #[arg(long)]
    sub: String,
    #[arg(long)]
    email: Option<String>,
    #[arg(long)]
    name: Option<String>,
    /// A role; repeat for several.
    #[arg(long = "role")]
    roles: Vec<String>,
    #[arg(long)]
    tier: Option<String>,
    /// Lifetime: 90s, 15m, 12h, 7d (a bare number is seconds).
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    expires_in: std::time::Duration,
    /// The aud claim.
    #[arg(long)]
    audience: Option<String>,
    /// The iss claim.
    #[arg(long)]
    issuer: Option<String>,
    /// The signing secret.
    #[arg(long = "secret", env = "AGENTRY_JWT_SECRET", hide_env_values = true)]
    secret: String,
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    agentry_auth::parse_duration(s)
}

fn token(args: TokenArgs) -> anyhow::Result<()> {
    let mut payload = serde_json::json!({"sub": args.sub});
    let mut set = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            payload[k] = v.into();
        }
    };
    set("email", args.email);
    set("name", args.name);
    set("tier", args.tier);
    payload["roles"] = args.roles.into();
    let opts = agentry_auth::TokenOptions {
        expires_in: Some(args.expires_in),
        audience: args.audience,
        issuer: args.issuer,
        not_before: None,
    };
    let t = agentry_auth::create_token(&payload, args.secret.as_bytes(), &opts)?;
    println!("{t}");
    Ok(())
}

#[derive(Args, Debug, Clone)]
struct DbArgs {
    /// Database URL: sqlite://PATH, sqlite::memory: or postgres://...
    #[arg(long, env = "DATABASE_URL", default_value = "sqlite://agentry.db")]
    database_url: String,
    /// SQLite's synchronous level: full (a commit is on disk before it is acknowledged), normal
    /// (safe from a process crash, not from a power loss), off, extra (docs/PERFORMANCE.md)
    #[arg(long, env = "AGENTRY_SQLITE_SYNCHRONOUS", default_value = "full")]
    sqlite_synchronous: agentry_store::Synchronous,
    /// How long a request waits for a database connection, and the longest a statement may run
    /// (PostgreSQL's statement_timeout; SQLite's busy time-out), before it answers 503
    /// database_unavailable: 500ms, 5s, 1m
    #[arg(long, env = "AGENTRY_DB_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    db_timeout: std::time::Duration,
}

impl DbArgs {
    fn options(&self) -> agentry_store::DbOptions {
        agentry_store::DbOptions {
            sqlite_synchronous: self.sqlite_synchronous,
            timeout: self.db_timeout,
        }
    }
}

#[derive(Args, Debug, Clone)]
struct ServeArgs {
    /// Listen address; port 0 picks a free port.
    #[arg(long, env = "AGENTRY_BIND", default_value = "127.0.0.1:3141")]
    bind: String,
    #[command(flatten)]
    db: DbArgs,
    /// Start with an empty registry (no example agents or workflows).
    #[arg(long, env = "AGENTRY_NO_EXAMPLES", value_parser = clap::builder::BoolishValueParser::new())]
    no_examples: bool,
    /// Strict mode: every route that reads or changes executions, memory or logs needs a token,
    /// executions are only for their owner or an admin, logs only for admins.
    #[arg(long, env = "AGENTRY_AUTH_STRICT", value_parser = clap::builder::BoolishValueParser::new())]
    auth_strict: bool,
    /// Comma list of browser origins allowed besides the server's own (WebSockets,
    /// state-changing requests) and for CORS, e.g. https://app.example.com [default: none, CORS off]
    #[arg(long, env = "AGENTRY_ALLOWED_ORIGINS", value_parser = parse_origins)]
    allowed_origins: Option<agentry_http::AllowedOrigins>,
    /// Comma list of the hosts the server answers for (a guard against DNS rebinding): host
    /// (any port) or host:port, or * for any; a request for another is 421 host_not_allowed
    /// [default: bound to a loopback address, localhost, 127.0.0.1 and [::1] on the bound port;
    /// bound elsewhere, any host, with a warning]
    #[arg(long, env = "AGENTRY_ALLOWED_HOSTS", value_parser = parse_hosts)]
    allowed_hosts: Option<agentry_http::AllowedHosts>,
    /// Comma list of proxy addresses or CIDR blocks whose Forwarded and X-Forwarded-Host/-Proto
    /// headers are believed, e.g. 10.0.0.0/8 [default: none: those headers are ignored]
    #[arg(long, env = "AGENTRY_TRUSTED_PROXIES", value_parser = parse_proxies)]
    trusted_proxies: Option<agentry_http::TrustedProxies>,
    /// The server's public base URL (http or https, no query or fragment), which A2A cards
    /// name, e.g. https://agents.example.com [default: the host each request was sent to]
    #[arg(long, env = "AGENTRY_PUBLIC_URL", value_parser = parse_public_url)]
    public_url: Option<agentry_http::PublicUrl>,
    /// How long a client has to send a request's head (line and headers).
    #[arg(long, env = "AGENTRY_HEADER_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    header_timeout: std::time::Duration,
    /// How long a client has to send a request's body once it is read.
    #[arg(long, env = "AGENTRY_BODY_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    body_timeout: std::time::Duration,
    /// How long an idle keep-alive connection stays open.
    #[arg(long, env = "AGENTRY_KEEP_ALIVE", default_value = "5s", value_parser = parse_duration)]
    keep_alive: std::time::Duration,
    /// This process's name in leases and logs [default: the host name and a digest of the
    /// database and the bound address: stable for one server]
    #[arg(long, env = "AGENTRY_NODE_ID")]
    node_id: Option<String>,
    /// How long an execution's owner may be silent before another process takes it over.
    #[arg(long, env = "AGENTRY_LEASE_TTL", default_value = "10s", value_parser = parse_lease_ttl)]
    lease_ttl: std::time::Duration,
    /// How long SIGTERM waits for running steps before handing executions over.
    #[arg(long, env = "AGENTRY_SHUTDOWN_GRACE", default_value = "10s", value_parser = parse_duration)]
    shutdown_grace: std::time::Duration,
    /// The most connections each worker thread holds at once (more wait to be accepted).
    #[arg(long, env = "AGENTRY_MAX_CONNECTIONS", default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// The most MCP sessions one user may hold (`anonymous` without a provider); opening one
    /// more ends their least recently used.
    #[arg(long, env = "AGENTRY_MCP_MAX_SESSIONS_PER_USER", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    mcp_max_sessions_per_user: u32,
    /// The most MCP sessions in all; beyond it an MCP initialize is refused (503
    /// mcp_session_limit, with Retry-After).
    #[arg(long, env = "AGENTRY_MCP_MAX_SESSIONS", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    mcp_max_sessions: u32,
    /// An MCP session without a request this long ends.
    #[arg(long, env = "AGENTRY_MCP_SESSION_IDLE", default_value = "5m", value_parser = parse_session_idle)]
    mcp_session_idle: std::time::Duration,
    /// Delete finished executions (with their steps and events) that ended more than this long
    /// ago, in the background [default: keep them]
    #[arg(long, env = "AGENTRY_RETENTION", value_parser = parse_duration)]
    retention: Option<std::time::Duration>,
    /// The most bytes of events (taken or not) one execution's mailbox holds: 1048576, 512KiB,
    /// 1MiB
    #[arg(long, env = "AGENTRY_MAILBOX_MAX_BYTES", default_value = "1MiB", value_parser = parse_bytes)]
    mailbox_max_bytes: u64,
    /// The most events sent by key kept (for the hour's retention) per event name and key
    #[arg(long, env = "AGENTRY_EVENTS_MAX_PER_KEY", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    events_max_per_key: u64,
    /// The most bytes of events sent by key kept per event name and key
    #[arg(long, env = "AGENTRY_EVENTS_MAX_BYTES_PER_KEY", default_value = "1MiB", value_parser = parse_bytes)]
    events_max_bytes_per_key: u64,
    /// The most events sent by key kept in all
    #[arg(long, env = "AGENTRY_EVENTS_MAX", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    events_max: u64,
    /// The most bytes of events sent by key kept in all
    #[arg(long, env = "AGENTRY_EVENTS_MAX_BYTES", default_value = "64MiB", value_parser = parse_bytes)]
    events_max_bytes: u64,
    /// The most schedules one user (a verified caller) may create, under the server's 1000
    /// (beyond: 409 schedule_limit). Without a provider, schedules belong to nobody and only
    /// the server's limit holds.
    #[arg(long, env = "AGENTRY_MAX_SCHEDULES_PER_USER", default_value_t = agentry_schedules::DEFAULT_MAX_SCHEDULES_PER_USER, value_parser = clap::value_parser!(u64).range(1..))]
    max_schedules_per_user: u64,
    /// Serve `GET /metrics` (Prometheus) on this address instead of the main one, e.g.
    /// 127.0.0.1:9464 [default: on the main address]
    #[arg(long, env = "AGENTRY_METRICS_BIND")]
    metrics_bind: Option<String>,
    /// A folder of definitions: each `workflows/**/*.{yaml,yml,json}` in it is a Serverless
    /// Workflow 1.0 document, registered as a workflow, each `agents/*.{yaml,yml}` an agent
    /// (docs/DEFINITIONS.md); one with a problem stops the start [default: none]
    #[arg(long, env = "AGENTRY_DEFINITIONS")]
    definitions: Option<std::path::PathBuf>,
    /// Comma list of hosts and CIDR blocks that definitions' calls may reach, e.g.
    /// api.example.com,10.0.0.0/8 [default: every address but link-local and cloud metadata ones]
    #[arg(long, env = "AGENTRY_OUTBOUND_ALLOW", value_parser = agentry_definitions::outbound::Policy::parse)]
    outbound_allow: Option<agentry_definitions::outbound::Policy>,
    /// A JSON or YAML file of secrets (name: value) for definitions' `$secrets`, besides the
    /// environment's `AGENTRY_SECRET_<NAME>` [default: none]
    #[arg(long, env = "AGENTRY_SECRETS_FILE")]
    secrets_file: Option<std::path::PathBuf>,
    /// Trust the definitions to run processes (`call: mcp` over stdio): only for a folder whose
    /// writers may run code on this host [default: off]
    #[arg(long, env = "AGENTRY_DEFINITIONS_TRUSTED", value_parser = clap::builder::BoolishValueParser::new())]
    definitions_trusted: bool,
    /// Read the definitions folder again when one of its files changes (it is polled every
    /// 2 s), as on `SIGHUP`: a changed document needs a new `document.version`; a folder with a
    /// problem is refused whole and the definitions loaded stay [default: off]
    #[arg(long, env = "AGENTRY_DEFINITIONS_WATCH", value_parser = clap::builder::BoolishValueParser::new())]
    definitions_watch: bool,
    /// An http(s) URL every event a definition emits is also POSTed to, as a CloudEvent in
    /// structured mode (`application/cloudevents+json`), under the outbound policy
    /// [default: none]
    #[arg(long, env = "AGENTRY_EVENTS_SINK", value_parser = agentry_definitions::outbound::parse_sink)]
    events_sink: Option<String>,
    /// Comma list of models of the default endpoint that the example agents with fallbacks
    /// (`operator`) try in order when their model fails with a retryable error (429, 5xx, a
    /// time-out) [default: none]
    #[arg(long, env = "AGENTRY_FALLBACK_MODELS", value_delimiter = ',')]
    fallback_models: Vec<String>,
    /// The tokens one user may spend per UTC day with each example agent; beyond, 429
    /// budget_exceeded with Retry-After [default: no budget]
    #[arg(long, env = "AGENTRY_TOKEN_BUDGET_PER_USER_DAY", value_parser = clap::value_parser!(u64).range(1..))]
    token_budget_per_user_day: Option<u64>,
    /// The share of the example `assistant`'s generations scored live, 0 to 1 [default: 1 on
    /// the offline model, 0.1 on an endpoint]
    #[arg(long, env = "AGENTRY_EXAMPLE_SCORE_RATE", value_parser = parse_rate)]
    example_score_rate: Option<f64>,
    /// Durability tests only: abort the process at `<point>:<workflowId>:<stepId>`, the point
    /// being `before-step`, `after-effect` or `after-checkpoint` (docs/DURABILITY.md).
    #[arg(long, env = "AGENTRY_CRASH_AT", hide = true, value_parser = agentry_server::CrashAt::parse)]
    crash_at: Option<agentry_server::CrashAt>,
}

/// A share from 0 to 1.
fn parse_rate(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|r| (0.0..=1.0).contains(r))
        .ok_or_else(|| format!("{s:?} is not a number from 0 to 1"))
}

/// A size in bytes: a number, optionally followed by `KiB`, `MiB` or `GiB`; at least 1 KiB.
fn parse_bytes(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?}: a size is a number of bytes, KiB, MiB or GiB"))?;
    let factor = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => return Err(format!("{other:?}: use B, KiB, MiB or GiB")),
    };
    let bytes = n
        .checked_mul(factor)
        .ok_or_else(|| format!("{s:?} is too large"))?;
    if bytes < 1024 {
        return Err(format!("{s:?}: at least 1KiB"));
    }
    Ok(bytes)
}

/// A lease ttl: at least one second (a shorter one would expire between two heartbeats of a
/// busy process).
fn parse_lease_ttl(s: &str) -> Result<std::time::Duration, String> {
    let d = parse_duration(s)?;
    if d < std::time::Duration::from_secs(1) {
        return Err("the lease ttl must be at least 1s".into());
    }
    Ok(d)
}

/// An MCP session's idle expiry: at least one second.
fn parse_session_idle(s: &str) -> Result<std::time::Duration, String> {
    let d = parse_duration(s)?;
    if d < std::time::Duration::from_secs(1) {
        return Err("the MCP session idle expiry must be at least 1s".into());
    }
    Ok(d)
}

fn parse_origins(s: &str) -> Result<agentry_http::AllowedOrigins, String> {
    agentry_http::AllowedOrigins::parse_list(s)
}

fn parse_hosts(s: &str) -> Result<agentry_http::AllowedHosts, String> {
    agentry_http::AllowedHosts::parse_list(s)
}

fn parse_proxies(s: &str) -> Result<agentry_http::TrustedProxies, String> {
    agentry_http::TrustedProxies::parse_list(s)
}

fn parse_public_url(s: &str) -> Result<agentry_http::PublicUrl, String> {
    agentry_http::PublicUrl::parse(s)
}

/// Logs to stderr and to the capture behind `/api/logs`, and spans to an OpenTelemetry
/// collector when `OTEL_EXPORTER_OTLP_ENDPOINT` names one (the returned handle flushes them at
/// exit).
fn init_tracing() -> Option<agentry_otel::Tracing> {
    use tracing_subscriber::prelude::*;
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // MCP session ids stay out of the logs whatever RUST_LOG says (rmcp logs them): out of
    // stderr here, out of the capture below.
    for directive in agentry_mcp::sessions::QUIET_LOG_DIRECTIVES {
        filter = filter.add_directive(directive.parse().expect("a valid directive"));
    }
    let (otel, handle) = match agentry_otel::init() {
        Ok(Some((layer, handle))) => (Some(layer), Some(handle)),
        Ok(None) => (None, None),
        Err(e) => {
            eprintln!("traces are not exported: {e}");
            (None, None)
        }
    };
    // RUST_LOG filters the stderr output; the capture layer behind /api/logs and /ws/logs keeps
    // at least the info records of agentry's crates whatever RUST_LOG says; the trace export
    // takes agentry's spans (info and above), whatever RUST_LOG says.
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                // The same truncation as the log buffer: a client cannot flood stderr either.
                .fmt_fields(agentry_logs::stderr_fields())
                .with_filter(filter),
        )
        .with(agentry_logs::capture_layer(
            agentry_mcp::sessions::QUIET_LOG_DIRECTIVES,
        ))
        .with(otel.map(|l| {
            l.with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_target("agentry", tracing::Level::INFO),
            )
        }))
        .init();
    handle
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(Command::Token(args)) = cli.command {
        return token(args);
    }
    // An eval prints its table alone: the server it may start in process logs nothing.
    if let Some(Command::Eval(args)) = cli.command {
        return eval(args).await;
    }
    let traces = init_tracing();
    let outcome = run(cli).await;
    if let Some(t) = traces {
        // Off the runtime: the export's shutdown waits for its last batch.
        let _ = tokio::task::spawn_blocking(move || t.shutdown()).await;
    }
    outcome
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Some(Command::Migrate(db)) => {
            let database = open_database(&db.database_url, db.options()).await?;
            database.close().await;
            tracing::info!(database = %redact(&db.database_url), "migrations applied");
            Ok(())
        }
        Some(Command::Serve(args)) => serve(*args).await,
        Some(Command::Prune(args)) => prune(args).await,
        Some(Command::Token(_) | Command::Eval(_)) => unreachable!("handled above"),
        Some(Command::Check(args)) => check(&args.dir),
        None => serve(cli.serve).await,
    }
}

/// `agentry check DIR`.
fn check(dir: &std::path::Path) -> anyhow::Result<()> {
    match agentry_server::definitions::check(dir) {
        Ok(n) => {
            println!("{n} definitions in {} are fine", dir.display());
            Ok(())
        }
        Err(problems) => {
            eprintln!("{}", agentry_server::definitions::report(&problems));
            eprintln!("{} problems in {}", problems.len(), dir.display());
            std::process::exit(1);
        }
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let http = agentry_http::HttpConfig {
        header_timeout: args.header_timeout,
        body_timeout: args.body_timeout,
        keep_alive: args.keep_alive,
        max_connections: args.max_connections as usize,
        allowed_origins: args.allowed_origins.unwrap_or_default(),
        allowed_hosts: args.allowed_hosts,
        trusted_proxies: args.trusted_proxies.unwrap_or_default(),
        public_url: args.public_url,
        ..agentry_http::HttpConfig::default()
    };
    let settings = Settings {
        bind: args.bind,
        database: args.db.options(),
        database_url: args.db.database_url,
        examples: !args.no_examples,
        auth: AuthSettings {
            strict: args.auth_strict,
            ..AuthSettings::from_env()
        },
        http,
        mcp_sessions: agentry_mcp::SessionLimits {
            per_user: args.mcp_max_sessions_per_user as usize,
            total: args.mcp_max_sessions as usize,
            idle: args.mcp_session_idle,
        },
        node_id: args.node_id.filter(|n| !n.trim().is_empty()),
        lease_ttl: args.lease_ttl,
        shutdown_grace: args.shutdown_grace,
        crash_at: args.crash_at,
        retention: args.retention,
        max_schedules_per_user: args.max_schedules_per_user,
        metrics_bind: args.metrics_bind.filter(|b| !b.trim().is_empty()),
        event_limits: agentry_engine::engine::EventLimits {
            mailbox_bytes: args.mailbox_max_bytes,
            kept_per_key: args.events_max_per_key,
            kept_bytes_per_key: args.events_max_bytes_per_key,
            kept: args.events_max,
            kept_bytes: args.events_max_bytes,
        },
        definitions: args.definitions,
        outbound: args.outbound_allow.unwrap_or_default(),
        secrets_file: args.secrets_file,
        definitions_trusted: args.definitions_trusted,
        definitions_watch: args.definitions_watch,
        events_sink: args.events_sink,
        example_quality: agentry_server::examples::Quality {
            fallback_models: args
                .fallback_models
                .into_iter()
                .map(|m| m.trim().to_owned())
                .filter(|m| !m.is_empty())
                .collect(),
            token_budget_per_user_day: args.token_budget_per_user_day,
            score_rate: args.example_score_rate,
        },
    };
    let running = start(&settings).await?;
    tracing::info!(
        database = %redact(&settings.database_url),
        examples = settings.examples,
        "agentry started"
    );
    println!("agentry listening on http://{}", running.addr);
    if let Some(addr) = running.metrics_addr {
        println!("agentry metrics on http://{addr}/metrics");
    }
    running.serve_until_signal().await
}
