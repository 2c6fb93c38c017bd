//! SQLite (the embedded default): WAL journal, a busy timeout, and its [`Dialect`].

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteQueryResult,
    SqliteSynchronous,
};
use sqlx::{Sqlite, SqlitePool};

use crate::sql::{Dialect, SqlStore};

/// Executions in SQLite.
pub type SqliteStore = SqlStore<Sqlite>;

/// Opens (creating if missing) the SQLite database at `url` (`sqlite://PATH` or
/// `sqlite::memory:`).
pub async fn connect(url: &str) -> Result<SqlitePool, sqlx::Error> {
    let in_memory = url.contains(":memory:") || url.contains("mode=memory");
    let options = SqliteConnectOptions::from_str(url)?
        .create_if_missing(true)
        .journal_mode(if in_memory {
            SqliteJournalMode::Memory
        } else {
            SqliteJournalMode::Wal
        })
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10))
        .foreign_keys(true);
    let mut pool = SqlitePoolOptions::new();
    if in_memory {
        // Every connection to `:memory:` is its own database: keep exactly one, forever.
        pool = pool
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None);
    } else {
        pool = pool.max_connections(8);
    }
    pool.connect_with(options).await
}

impl Dialect for Sqlite {
    const NOW_MS: &'static str = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";
    const AS_JSON: &'static str = "";
    const AS_TEXT: &'static str = "";
    const IS: &'static str = "IS";
    // One writer at a time: no two claimers ever see the same row.
    const SKIP_LOCKED: &'static str = "";
    const FOR_SHARE: &'static str = "";
    const NOTIFY: &'static str = "";

    fn rows_affected(result: &SqliteQueryResult) -> u64 {
        result.rows_affected()
    }
}
