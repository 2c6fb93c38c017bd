//! Test support shared by every crate's tests: a PostgreSQL database of its own for one test,
//! created on the tests' PostgreSQL server and dropped when the test is done with it (also when
//! it panics).

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};

/// Environment variable naming the tests' PostgreSQL server (a URL whose database is any one
/// the tests may connect to).
pub const POSTGRES_URL_VAR: &str = "AGENTRY_TEST_POSTGRES_URL";
/// The PostgreSQL server used when [`POSTGRES_URL_VAR`] is not set.
pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The PostgreSQL server of the tests.
pub fn postgres_url() -> String {
    std::env::var(POSTGRES_URL_VAR)
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_POSTGRES_URL.to_owned())
}

/// A database of one test: `<prefix>_<random>` on the tests' server. Dropped by
/// [`PgDatabase::drop_now`], or when the value is dropped (a test that panicked).
pub struct PgDatabase {
    admin: PgConnectOptions,
    name: String,
    /// The URL of this database.
    pub url: String,
    dropped: AtomicBool,
}

impl PgDatabase {
    /// Creates the database; the error names the server (never its credentials) and
    /// [`POSTGRES_URL_VAR`].
    pub async fn create(prefix: &str) -> Result<PgDatabase, String> {
        let base = postgres_url();
        let options = PgConnectOptions::from_str(&base)
            .map_err(|e| format!("bad URL in {POSTGRES_URL_VAR}: {e}"))?;
        let server = format!("{}:{}", options.get_host(), options.get_port());
        let admin = options.database("postgres");
        let name = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
        let mut conn = PgConnection::connect_with(&admin).await.map_err(|e| {
            format!("PostgreSQL is unreachable at {server} (set {POSTGRES_URL_VAR}): {e}")
        })?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .map_err(|e| format!("creating database {name}: {e}"))?;
        let _ = conn.close().await;
        let (prefix, _) = base
            .split_once('?')
            .map_or(base.as_str(), |(p, _)| p)
            .rsplit_once('/')
            .ok_or_else(|| format!("{POSTGRES_URL_VAR} names no database"))?;
        let url = format!("{prefix}/{name}");
        Ok(PgDatabase {
            admin,
            name,
            url,
            dropped: AtomicBool::new(false),
        })
    }

    /// Drops the database (and any connection still on it).
    pub async fn drop_now(&self) {
        if self.dropped.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Ok(mut conn) = PgConnection::connect_with(&self.admin).await {
            let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
            let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&mut conn)
                .await;
            let _ = conn.close().await;
        }
    }
}

impl Drop for PgDatabase {
    /// [`PgDatabase::drop_now`] from synchronous code, unless done already.
    fn drop(&mut self) {
        if self.dropped.load(Ordering::SeqCst) {
            return;
        }
        std::thread::scope(|s| {
            s.spawn(|| {
                if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    rt.block_on(self.drop_now());
                }
            });
        });
    }
}
