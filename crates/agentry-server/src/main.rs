//! The `agentry` binary: `serve` (the default), `migrate`.

use agentry_server::{Settings, open_database, redact, start};
use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "agentry",
    version,
    about = "AI agents and durable workflows behind one HTTP API",
    args_conflicts_with_subcommands = true
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
    Serve(ServeArgs),
    /// Apply pending migrations and exit.
    Migrate(DbArgs),
}

#[derive(Args, Debug, Clone)]
struct DbArgs {
    /// Database URL: sqlite://PATH, sqlite::memory: or postgres://...
    #[arg(long, env = "DATABASE_URL", default_value = "sqlite://agentry.db")]
    database_url: String,
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
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_tracing();
    match cli.command {
        Some(Command::Migrate(db)) => {
            let database = open_database(&db.database_url).await?;
            database.close().await;
            tracing::info!(database = %redact(&db.database_url), "migrations applied");
            Ok(())
        }
        Some(Command::Serve(args)) => serve(args).await,
        None => serve(cli.serve).await,
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let settings = Settings {
        bind: args.bind,
        database_url: args.db.database_url,
        examples: !args.no_examples,
        ..Settings::default()
    };
    let running = start(&settings).await?;
    tracing::info!(
        database = %redact(&settings.database_url),
        examples = settings.examples,
        "agentry started"
    );
    println!("agentry listening on http://{}", running.addr);
    running.serve_until_signal().await
}
