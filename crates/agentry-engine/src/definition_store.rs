//! Workflow definitions deployed as data (a document's text, by name and version), stored so
//! that every replica on the database runs them. The engine does not read the documents: a
//! layer above turns one into a [`crate::Workflow`] and registers it. Implemented in memory here
//! and on SQLite and PostgreSQL by `agentry-store`.

use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::store::StoreError;

/// One version of a deployed definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredDefinition {
    /// The workflow id it defines.
    pub name: String,
    pub version: String,
    /// A digest of the document's content (the same document as JSON or YAML has one digest):
    /// the same name and version with another digest is another document.
    pub digest: String,
    /// The document as it was deployed.
    pub source: String,
    /// The media type it was deployed as (`application/json`, `application/yaml`).
    pub content_type: String,
    pub created_at: DateTime<Utc>,
    /// The user who deployed it, when one was verified.
    pub created_by: Option<String>,
}

/// What a replica needs to know of a stored definition to tell whether it runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefinitionHead {
    pub name: String,
    pub version: String,
    pub digest: String,
}

impl StoredDefinition {
    pub fn head(&self) -> DefinitionHead {
        DefinitionHead {
            name: self.name.clone(),
            version: self.version.clone(),
            digest: self.digest.clone(),
        }
    }
}

/// Where deployed definitions live. A version, once stored, is never rewritten: another
/// document under the same name and version is refused by whoever stores it.
#[async_trait]
pub trait DefinitionStore: Send + Sync + 'static {
    /// Stores a version; `false` when that name and version are stored already (whatever
    /// their document).
    async fn insert(&self, definition: &StoredDefinition) -> Result<bool, StoreError>;
    /// Every stored version, by name, the oldest version of each name first.
    async fn heads(&self) -> Result<Vec<DefinitionHead>, StoreError>;
    /// One version, or the newest of `name` (the one stored last) without `version`.
    async fn get(
        &self,
        name: &str,
        version: Option<&str>,
    ) -> Result<Option<StoredDefinition>, StoreError>;
    /// Every stored version of `name`, the oldest first.
    async fn versions(&self, name: &str) -> Result<Vec<StoredDefinition>, StoreError>;
    /// Deletes a version; `false` when it was not stored.
    async fn delete(&self, name: &str, version: &str) -> Result<bool, StoreError>;
}

/// Definitions held in memory (tests, and an application without a database).
#[derive(Debug, Default)]
pub struct InMemoryDefinitionStore {
    rows: Mutex<Vec<StoredDefinition>>,
}

impl InMemoryDefinitionStore {
    fn rows(&self) -> std::sync::MutexGuard<'_, Vec<StoredDefinition>> {
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl DefinitionStore for InMemoryDefinitionStore {
    async fn insert(&self, definition: &StoredDefinition) -> Result<bool, StoreError> {
        let mut rows = self.rows();
        if rows
            .iter()
            .any(|d| d.name == definition.name && d.version == definition.version)
        {
            return Ok(false);
        }
        rows.push(definition.clone());
        Ok(true)
    }

    async fn heads(&self) -> Result<Vec<DefinitionHead>, StoreError> {
        let mut rows = self.rows().clone();
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(rows.iter().map(StoredDefinition::head).collect())
    }

    async fn get(
        &self,
        name: &str,
        version: Option<&str>,
    ) -> Result<Option<StoredDefinition>, StoreError> {
        let versions = self.versions(name).await?;
        Ok(match version {
            Some(v) => versions.into_iter().find(|d| d.version == v),
            None => versions.into_iter().last(),
        })
    }

    async fn versions(&self, name: &str) -> Result<Vec<StoredDefinition>, StoreError> {
        Ok(self
            .rows()
            .iter()
            .filter(|d| d.name == name)
            .cloned()
            .collect())
    }

    async fn delete(&self, name: &str, version: &str) -> Result<bool, StoreError> {
        let mut rows = self.rows();
        let before = rows.len();
        rows.retain(|d| !(d.name == name && d.version == version));
        Ok(rows.len() < before)
    }
}
