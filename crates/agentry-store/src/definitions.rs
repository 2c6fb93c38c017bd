//! Deployed workflow definitions (`workflow_definitions`), written once for both databases: a
//! row per name and version, inserted once and never rewritten.

use agentry_engine::definition_store::{DefinitionHead, DefinitionStore, StoredDefinition};
use agentry_engine::store::StoreError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Database, Encode, Executor, IntoArguments, Pool, QueryBuilder, Type};

use crate::row::db_err;
use crate::sql::Dialect;

/// Deployed definitions in a SQL database (SQLite or PostgreSQL).
#[derive(Debug)]
pub struct SqlDefinitionStore<DB: Database> {
    pool: Pool<DB>,
}

impl<DB: Database> SqlDefinitionStore<DB> {
    pub fn new(pool: Pool<DB>) -> Self {
        Self { pool }
    }
}

/// A stored row.
#[derive(sqlx::FromRow)]
struct DefinitionRow {
    name: String,
    version: String,
    digest: String,
    source: String,
    content_type: String,
    created_ms: i64,
    created_by: Option<String>,
}

impl From<DefinitionRow> for StoredDefinition {
    fn from(row: DefinitionRow) -> Self {
        StoredDefinition {
            name: row.name,
            version: row.version,
            digest: row.digest,
            source: row.source,
            content_type: row.content_type,
            created_at: DateTime::<Utc>::from_timestamp_millis(row.created_ms).unwrap_or_default(),
            created_by: row.created_by,
        }
    }
}

const SELECT: &str = "SELECT name, version, digest, source, content_type, created_ms, created_by \
                      FROM workflow_definitions";
/// The oldest version of a name first; versions stored in the same millisecond by version.
const ORDER: &str = " ORDER BY name, created_ms, version";

#[async_trait]
impl<DB> DefinitionStore for SqlDefinitionStore<DB>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'t> String: Encode<'t, DB> + Type<DB> + sqlx::Decode<'t, DB>,
    for<'t> Option<String>: Encode<'t, DB> + Type<DB>,
    for<'t> i64: Encode<'t, DB> + Type<DB> + sqlx::Decode<'t, DB>,
    DefinitionRow: for<'r> sqlx::FromRow<'r, DB::Row>,
    (String, String, String): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    async fn insert(&self, d: &StoredDefinition) -> Result<bool, StoreError> {
        let _turn = DB::write_turn(&self.pool).await;
        let mut q = QueryBuilder::<DB>::new(
            "INSERT INTO workflow_definitions \
             (name, version, digest, source, content_type, created_ms, created_by) VALUES (",
        );
        let mut values = q.separated(", ");
        values
            .push_bind(d.name.clone())
            .push_bind(d.version.clone())
            .push_bind(d.digest.clone())
            .push_bind(d.source.clone())
            .push_bind(d.content_type.clone())
            .push_bind(d.created_at.timestamp_millis())
            .push_bind(d.created_by.clone());
        q.push(") ON CONFLICT (name, version) DO NOTHING");
        let done = q.build().execute(&self.pool).await.map_err(db_err)?;
        Ok(DB::rows_affected(&done) == 1)
    }

    async fn heads(&self) -> Result<Vec<DefinitionHead>, StoreError> {
        let mut q =
            QueryBuilder::<DB>::new("SELECT name, version, digest FROM workflow_definitions");
        q.push(ORDER);
        let rows: Vec<(String, String, String)> = q
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(rows
            .into_iter()
            .map(|(name, version, digest)| DefinitionHead {
                name,
                version,
                digest,
            })
            .collect())
    }

    async fn get(
        &self,
        name: &str,
        version: Option<&str>,
    ) -> Result<Option<StoredDefinition>, StoreError> {
        let mut q = QueryBuilder::<DB>::new(SELECT);
        q.push(" WHERE name = ").push_bind(name.to_owned());
        if let Some(version) = version {
            q.push(" AND version = ").push_bind(version.to_owned());
        }
        q.push(" ORDER BY created_ms DESC, version DESC LIMIT 1");
        Ok(q.build_query_as::<DefinitionRow>()
            .fetch_optional(&self.pool)
            .await
            .map_err(db_err)?
            .map(StoredDefinition::from))
    }

    async fn versions(&self, name: &str) -> Result<Vec<StoredDefinition>, StoreError> {
        let mut q = QueryBuilder::<DB>::new(SELECT);
        q.push(" WHERE name = ").push_bind(name.to_owned());
        q.push(ORDER);
        Ok(q.build_query_as::<DefinitionRow>()
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?
            .into_iter()
            .map(StoredDefinition::from)
            .collect())
    }

    async fn delete(&self, name: &str, version: &str) -> Result<bool, StoreError> {
        let _turn = DB::write_turn(&self.pool).await;
        let mut q = QueryBuilder::<DB>::new("DELETE FROM workflow_definitions WHERE name = ");
        q.push_bind(name.to_owned())
            .push(" AND version = ")
            .push_bind(version.to_owned());
        let done = q.build().execute(&self.pool).await.map_err(db_err)?;
        Ok(DB::rows_affected(&done) == 1)
    }
}
