//! agentry-store: the store traits of `agentry-core` implemented with sqlx on SQLite (the
//! embedded default) and PostgreSQL.
//!
//! One migration series per database lives in the top-level `migrations/` folder
//! (`migrations/sqlite`, `migrations/postgres`) and is embedded in this crate.

mod definitions;
mod memory;
mod postgres;
mod queues;
mod recall;
mod row;
mod schedules;
mod scores;
mod sql;
mod sqlite;
mod usage;
mod working_memory;

use std::sync::Arc;
use std::time::Duration;

use agentry_agents::recall::RecallStore;
use agentry_agents::{ConversationStore, WorkingMemoryStore};
use agentry_engine::definition_store::DefinitionStore;
use agentry_engine::store::ExecutionStore;
use agentry_schedules::ScheduleStore;

pub use definitions::SqlDefinitionStore;
pub use memory::SqlConversationStore;
pub use postgres::PgStore;
pub use recall::{DEFAULT_MEMORY_BUDGET, RecallDialect, SqlRecallStore};
pub use schedules::SqlScheduleStore;
pub use scores::SqlScoreStore;
pub use sql::{Dialect, SqlStore};
pub use sqlite::{SqliteStore, Synchronous};
pub use usage::SqlUsageStore;
pub use working_memory::SqlWorkingMemoryStore;

/// How a database is opened, beside its URL.
#[derive(Debug, Clone, Copy)]
pub struct DbOptions {
    /// SQLite's `synchronous` level (ignored for PostgreSQL, whose `synchronous_commit` is the
    /// server's setting).
    pub sqlite_synchronous: Synchronous,
    /// How long a caller waits for a connection, and the longest a statement may run
    /// (PostgreSQL's `statement_timeout`; SQLite's busy time-out), before the call fails as
    /// unavailable (`AGENTRY_DB_TIMEOUT`).
    pub timeout: Duration,
}

impl Default for DbOptions {
    fn default() -> Self {
        Self {
            sqlite_synchronous: Synchronous::default(),
            timeout: Duration::from_secs(5),
        }
    }
}

/// A connected database, chosen by the URL's scheme.
#[derive(Debug, Clone)]
pub enum Database {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("unsupported database URL {0:?}: use sqlite://PATH, sqlite::memory: or postgres://...")]
    UnsupportedUrl(String),
    #[error("cannot connect to the database: {0}")]
    Connect(#[source] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

impl Database {
    /// Connects to `url`: `sqlite://PATH` (created if missing), `sqlite::memory:`, or
    /// `postgres://...` / `postgresql://...`.
    pub async fn connect(url: &str) -> Result<Self, DbError> {
        Self::connect_with(url, DbOptions::default()).await
    }

    /// [`Database::connect`] with `options`.
    pub async fn connect_with(url: &str, options: DbOptions) -> Result<Self, DbError> {
        if url.starts_with("sqlite:") {
            sqlite::connect(url, options)
                .await
                .map(Database::Sqlite)
                .map_err(DbError::Connect)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            postgres::connect(url, options.timeout)
                .await
                .map(Database::Postgres)
                .map_err(DbError::Connect)
        } else {
            Err(DbError::UnsupportedUrl(url.to_owned()))
        }
    }

    /// Applies pending migrations; a no-op when there are none. A migration may take longer
    /// than the statement time-out (an index on a large table): it runs without one.
    pub async fn migrate(&self) -> Result<(), DbError> {
        match self {
            Database::Sqlite(pool) => sqlx::Sqlite::migrator().run(pool).await?,
            Database::Postgres(pool) => {
                let mut conn = pool.acquire().await.map_err(DbError::Connect)?;
                sqlx::query("SET statement_timeout = 0")
                    .execute(&mut *conn)
                    .await
                    .map_err(DbError::Connect)?;
                let applied = sqlx::Postgres::migrator().run(&mut *conn).await;
                // Back to the connection's own time-out before it returns to the pool.
                let reset = sqlx::query("RESET statement_timeout")
                    .execute(&mut *conn)
                    .await;
                applied?;
                if reset.is_err() {
                    conn.detach();
                }
            }
        }
        Ok(())
    }

    /// `sqlite` or `postgres`.
    pub fn kind(&self) -> &'static str {
        match self {
            Database::Sqlite(_) => <sqlx::Sqlite as Dialect>::NAME,
            Database::Postgres(_) => <sqlx::Postgres as Dialect>::NAME,
        }
    }

    /// The execution store on this database.
    pub fn execution_store(&self) -> Arc<dyn ExecutionStore> {
        match self {
            Database::Sqlite(pool) => Arc::new(SqliteStore::new(pool.clone())),
            Database::Postgres(pool) => Arc::new(PgStore::new(pool.clone())),
        }
    }

    /// Agent conversation memory on this database.
    pub fn conversation_store(&self) -> Arc<dyn ConversationStore> {
        match self {
            Database::Sqlite(pool) => Arc::new(SqlConversationStore::new(pool.clone())),
            Database::Postgres(pool) => Arc::new(SqlConversationStore::new(pool.clone())),
        }
    }

    /// Token usage per agent, user and day on this database.
    pub fn usage_store(&self) -> Arc<dyn agentry_agents::usage::UsageStore> {
        match self {
            Database::Sqlite(pool) => Arc::new(SqlUsageStore::new(pool.clone())),
            Database::Postgres(pool) => Arc::new(SqlUsageStore::new(pool.clone())),
        }
    }

    /// Agents' working memories on this database.
    pub fn working_memory_store(&self) -> Arc<dyn WorkingMemoryStore> {
        match self {
            Database::Sqlite(pool) => Arc::new(SqlWorkingMemoryStore::new(pool.clone())),
            Database::Postgres(pool) => Arc::new(SqlWorkingMemoryStore::new(pool.clone())),
        }
    }

    /// Semantic recall's embeddings on this database, searched through indexes the store keeps
    /// in memory: make one per process and share it.
    pub fn recall_store(&self) -> Arc<dyn RecallStore> {
        match self {
            Database::Sqlite(pool) => Arc::new(SqlRecallStore::new(pool.clone())),
            Database::Postgres(pool) => Arc::new(SqlRecallStore::new(pool.clone())),
        }
    }

    /// Agents' live scores on this database.
    pub fn score_store(&self) -> Arc<dyn agentry_agents::ScoreStore> {
        match self {
            Database::Sqlite(pool) => Arc::new(SqlScoreStore::new(pool.clone())),
            Database::Postgres(pool) => Arc::new(SqlScoreStore::new(pool.clone())),
        }
    }

    /// The schedules on this database.
    pub fn schedule_store(&self) -> Arc<dyn ScheduleStore> {
        match self {
            Database::Sqlite(pool) => Arc::new(SqlScheduleStore::new(pool.clone())),
            Database::Postgres(pool) => Arc::new(SqlScheduleStore::new(pool.clone())),
        }
    }

    /// The workflow definitions deployed through the API, on this database.
    pub fn definition_store(&self) -> Arc<dyn DefinitionStore> {
        match self {
            Database::Sqlite(pool) => Arc::new(SqlDefinitionStore::new(pool.clone())),
            Database::Postgres(pool) => Arc::new(SqlDefinitionStore::new(pool.clone())),
        }
    }

    /// Calls `wake` with the id of every execution whose log another process writes to (the
    /// `pg_notify` of its write), and with `"*"` whenever notifications may have been missed (the
    /// listening connection was lost and is back). On SQLite one process writes everything and
    /// its engine wakes its own followers: nothing to listen to.
    pub fn listen_for_events(&self, wake: impl Fn(&str) + Send + Sync + 'static) {
        if let Database::Postgres(pool) = self {
            tokio::spawn(postgres::listen(pool.clone(), wake));
        }
    }

    /// Closes every connection.
    pub async fn close(&self) {
        match self {
            Database::Sqlite(p) => p.close().await,
            Database::Postgres(p) => p.close().await,
        }
    }
}
