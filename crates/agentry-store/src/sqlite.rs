//! SQLite (the embedded default): WAL journal, a busy timeout, and its [`Dialect`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, LazyLock, Mutex, Weak};

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteQueryResult,
    SqliteSynchronous,
};
use sqlx::{Sqlite, SqlitePool};

use crate::sql::{Dialect, SqlStore};

/// Executions in SQLite.
pub type SqliteStore = SqlStore<Sqlite>;

/// SQLite's `synchronous` setting: when a commit waits for the disk. Under WAL (the journal
/// agentry uses for files):
///
/// - `off`: never. A crash of the process loses nothing, but a power loss or an OS crash can
///   lose recent commits and may corrupt the database file.
/// - `normal`: the WAL is synced at checkpoints, not at each commit. A crash of the process
///   (kill -9) loses nothing; a power loss or an OS crash can lose the commits since the last
///   checkpoint (an acknowledged step may then run again), never the database's consistency.
/// - `full` (the default): each commit syncs the WAL before it is acknowledged. Nothing
///   acknowledged is lost, even to a power loss. With group commit, one sync serves every write
///   of a batch.
/// - `extra`: `full`, and the directory is synced too when the journal is deleted (matters for
///   the rollback journal, not for WAL).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Synchronous {
    Off,
    Normal,
    #[default]
    Full,
    Extra,
}

impl std::str::FromStr for Synchronous {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "off" => Ok(Self::Off),
            "normal" => Ok(Self::Normal),
            "full" => Ok(Self::Full),
            "extra" => Ok(Self::Extra),
            _ => Err(format!(
                "{s:?} is not a synchronous level: use off, normal, full or extra"
            )),
        }
    }
}

impl From<Synchronous> for SqliteSynchronous {
    fn from(s: Synchronous) -> Self {
        match s {
            Synchronous::Off => SqliteSynchronous::Off,
            Synchronous::Normal => SqliteSynchronous::Normal,
            Synchronous::Full => SqliteSynchronous::Full,
            Synchronous::Extra => SqliteSynchronous::Extra,
        }
    }
}

/// Opens (creating if missing) the SQLite database at `url` (`sqlite://PATH` or
/// `sqlite::memory:`).
pub async fn connect(url: &str, db: crate::DbOptions) -> Result<SqlitePool, sqlx::Error> {
    let in_memory = url.contains(":memory:") || url.contains("mode=memory");
    let options = SqliteConnectOptions::from_str(url)?
        .create_if_missing(true)
        .journal_mode(if in_memory {
            SqliteJournalMode::Memory
        } else {
            SqliteJournalMode::Wal
        })
        .synchronous(db.sqlite_synchronous.into())
        .busy_timeout(db.timeout)
        .foreign_keys(true);
    // A local file: nothing to test before handing a connection out.
    let mut pool = SqlitePoolOptions::new().test_before_acquire(false);
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
    pool = pool.acquire_timeout(db.timeout);
    pool.connect_with(options).await
}

impl Dialect for Sqlite {
    const NAME: &'static str = "sqlite";
    const NOW_MS: &'static str = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";
    const AS_JSON: &'static str = "";
    const AS_TEXT: &'static str = "";
    const IS: &'static str = "IS";
    // One writer at a time: no two claimers ever see the same row.
    const SKIP_LOCKED: &'static str = "";
    const FOR_UPDATE: &'static str = "";
    const FOR_SHARE: &'static str = "";
    const NOTIFY: &'static str = "";

    const BEGIN_SNAPSHOT: &'static str = "BEGIN";
    const COMMITTERS: usize = 1;

    fn migrator() -> &'static sqlx::migrate::Migrator {
        static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite");
        &MIGRATOR
    }

    fn rows_affected(result: &SqliteQueryResult) -> u64 {
        result.rows_affected()
    }

    fn write_turn(
        pool: &SqlitePool,
    ) -> impl std::future::Future<Output = Option<tokio::sync::OwnedMutexGuard<()>>> + Send {
        let turn = writers(pool);
        async move { Some(turn.lock_owned().await) }
    }
}

/// The turn of the writers of `pool`'s database file in this process ([`Dialect::write_turn`]):
/// one per file, shared by every pool and store on it.
fn writers(pool: &SqlitePool) -> Arc<tokio::sync::Mutex<()>> {
    static TURNS: LazyLock<Mutex<HashMap<PathBuf, Weak<tokio::sync::Mutex<()>>>>> =
        LazyLock::new(Mutex::default);
    let file = pool.connect_options().get_filename().to_path_buf();
    let mut turns = TURNS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(turn) = turns.get(&file).and_then(Weak::upgrade) {
        return turn;
    }
    turns.retain(|_, t| t.strong_count() > 0);
    let turn = Arc::new(tokio::sync::Mutex::new(()));
    turns.insert(file, Arc::downgrade(&turn));
    turn
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_writers_of_one_file_take_turns_those_of_two_files_do_not() {
        let dir = std::env::temp_dir().join(format!("agentry-turns-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = |name: &str| format!("sqlite://{}", dir.join(name).display());
        let db = crate::DbOptions::default();
        let (a, b) = (
            connect(&url("a.db"), db).await.unwrap(),
            connect(&url("a.db"), db).await.unwrap(),
        );
        let other = connect(&url("b.db"), db).await.unwrap();
        let held = Sqlite::write_turn(&a).await.expect("a turn on SQLite");
        // Another pool on the same file waits for it; a pool on another file does not.
        assert!(writers(&b).try_lock().is_err());
        assert!(Sqlite::write_turn(&other).await.is_some());
        drop(held);
        assert!(Sqlite::write_turn(&b).await.is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
