//! PostgreSQL (the scale-out path: many replicas on one database) and its [`Dialect`].

use std::str::FromStr;
use std::time::Duration;

use sqlx::Postgres;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions, PgQueryResult};

use crate::sql::{Dialect, SqlStore};

/// Executions in PostgreSQL.
pub type PgStore = SqlStore<Postgres>;

/// Connects to the PostgreSQL database at `url`: a caller waits at most `timeout` for a
/// connection, and a statement runs at most `timeout` (`statement_timeout`), so that a database
/// that is down, locked or saturated fails a call in a bounded time instead of hanging it.
pub async fn connect(url: &str, timeout: Duration) -> Result<PgPool, sqlx::Error> {
    let millis = timeout.as_millis().max(1).to_string();
    let options =
        PgConnectOptions::from_str(url)?.options([("statement_timeout", millis.as_str())]);
    PgPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(timeout)
        .connect_with(options)
        .await
}

impl Dialect for Postgres {
    const NAME: &'static str = "postgres";
    const NOW_MS: &'static str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint";
    // JSON (not JSONB) keeps documents byte for byte as written.
    const AS_JSON: &'static str = "::json";
    const AS_TEXT: &'static str = "::text";
    const IS: &'static str = "IS NOT DISTINCT FROM";
    // Replicas claiming at once each take different rows, and none waits.
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const FOR_SHARE: &'static str = " FOR SHARE";
    // Sent on commit to every process listening (the followers of the execution's log).
    const NOTIFY: &'static str = ", pg_notify('agentry_events', id)";

    const BEGIN_SNAPSHOT: &'static str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
    const COMMITTERS: usize = 4;

    fn migrator() -> &'static sqlx::migrate::Migrator {
        static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres");
        &MIGRATOR
    }

    fn rows_affected(result: &PgQueryResult) -> u64 {
        result.rows_affected()
    }

    async fn write_turn(_: &PgPool) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        None
    }
}

/// The channel of `Dialect::NOTIFY`.
const EVENTS_CHANNEL: &str = "agentry_events";

/// Listens for the events other processes write, for as long as the pool is open (see
/// `Database::listen_for_events`).
pub(crate) async fn listen(pool: PgPool, wake: impl Fn(&str) + Send + Sync + 'static) {
    while !pool.is_closed() {
        let mut listener = match PgListener::connect_with(&pool).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for other processes' events; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if let Err(e) = listener.listen(EVENTS_CHANNEL).await {
            tracing::warn!(error = %e, "LISTEN failed; retrying");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        // Whatever was notified while not listening is unknown: wake everyone.
        wake("*");
        loop {
            match listener.try_recv().await {
                Ok(Some(n)) => wake(n.payload()),
                // The connection was lost; `try_recv` reconnects (and re-listens) next time.
                Ok(None) => wake("*"),
                Err(e) => {
                    if !pool.is_closed() {
                        tracing::warn!(error = %e, "listening for other processes' events failed");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    break;
                }
            }
        }
    }
}
