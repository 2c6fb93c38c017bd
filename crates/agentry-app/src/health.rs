//! Whether the application can take work: the database answers, every migration is applied,
//! and it is not draining.

use std::time::Duration;

use agentry_engine::store::StoreError;

use crate::App;

/// The longest a readiness check waits for the database: a probe's own time-out is usually a
/// second or a few.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// Why the application cannot take work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unready {
    /// It is shutting down.
    Draining,
    /// The database does not answer (or not in time).
    Database(String),
    /// A migration this build knows is not applied.
    Migrations(String),
}

impl Unready {
    /// The reason's name on the wire.
    pub fn reason(&self) -> &'static str {
        match self {
            Unready::Draining => "draining",
            Unready::Database(_) => "database",
            Unready::Migrations(_) => "migrations",
        }
    }

    /// What a person reads.
    pub fn detail(&self) -> String {
        match self {
            Unready::Draining => "the server is shutting down".into(),
            Unready::Database(d) | Unready::Migrations(d) => d.clone(),
        }
    }
}

impl App {
    /// Ready, or why not.
    pub async fn readiness(&self) -> Result<(), Unready> {
        if self.engine.is_draining() {
            return Err(Unready::Draining);
        }
        match tokio::time::timeout(CHECK_TIMEOUT, self.engine.store().check()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(StoreError::Migrations(detail))) => Err(Unready::Migrations(detail)),
            Ok(Err(e)) => Err(Unready::Database(e.to_string())),
            Err(_) => Err(Unready::Database(format!(
                "the database did not answer within {} s",
                CHECK_TIMEOUT.as_secs()
            ))),
        }
    }

    /// The application's metrics in the Prometheus text format.
    pub fn render_metrics(&self, dropped_spans: u64) -> String {
        self.metrics
            .render(self.engine.running_here(), dropped_spans)
    }
}
