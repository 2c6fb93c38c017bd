//! PostgreSQL (the scale-out path: many replicas on one database) and its [`Dialect`].

use std::time::Duration;

use sqlx::Postgres;
use sqlx::postgres::{PgPool, PgPoolOptions, PgQueryResult};

use crate::sql::{Dialect, SqlStore};

/// Executions in PostgreSQL.
pub type PgStore = SqlStore<Postgres>;

/// Connects to the PostgreSQL database at `url`.
pub async fn connect(url: &str) -> Result<PgPool, sqlx::Error> {
    PgPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(10))
        .connect(url)
        .await
}

impl Dialect for Postgres {
    const NOW_MS: &'static str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint";
    // JSON (not JSONB) keeps documents byte for byte as written.
    const AS_JSON: &'static str = "::json";
    const AS_TEXT: &'static str = "::text";
    const IS: &'static str = "IS NOT DISTINCT FROM";
    // Replicas claiming at once each take different rows, and none waits.
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    const FOR_SHARE: &'static str = " FOR SHARE";

    fn rows_affected(result: &PgQueryResult) -> u64 {
        result.rows_affected()
    }
}
