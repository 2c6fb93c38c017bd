//! The contract of `DefinitionStore`, run against every store: the in-memory one of
//! `agentry-engine`, SQLite (a fresh file) and PostgreSQL (a fresh database per test). The
//! application's deploy, read, delete and every replica's sync rely on exactly these behaviours.

use agentry_engine::definition_store::{
    DefinitionHead, DefinitionStore, InMemoryDefinitionStore, StoredDefinition,
};
use agentry_store::Database;
use chrono::{DateTime, Duration, Utc};

fn definition(name: &str, version: &str, at: DateTime<Utc>) -> StoredDefinition {
    StoredDefinition {
        name: name.into(),
        version: version.into(),
        digest: format!("digest-{name}-{version}"),
        source: format!("document: {{name: {name}, version: '{version}'}}\nnote: \"é ✓\"\n"),
        content_type: "application/yaml".into(),
        // Milliseconds: what the databases keep.
        created_at: DateTime::from_timestamp_millis(at.timestamp_millis()).unwrap(),
        created_by: (version != "1.0.0").then(|| "root".to_owned()),
    }
}

async fn contract(store: &dyn DefinitionStore) {
    let t = Utc::now();
    let v1 = definition("greet", "1.0.0", t);
    let v2 = definition("greet", "2.0.0", t + Duration::seconds(1));
    let other = definition("audit", "0.1", t);
    assert!(store.insert(&v1).await.unwrap());
    // A version is stored once, whatever the document.
    let mut rewritten = v1.clone();
    rewritten.digest = "another".into();
    assert!(!store.insert(&rewritten).await.unwrap());
    assert!(store.insert(&v2).await.unwrap());
    assert!(store.insert(&other).await.unwrap());

    assert_eq!(
        store.get("greet", Some("1.0.0")).await.unwrap(),
        Some(v1.clone())
    );
    // The newest: the one stored last.
    assert_eq!(store.get("greet", None).await.unwrap(), Some(v2.clone()));
    assert_eq!(store.get("greet", Some("9")).await.unwrap(), None);
    assert_eq!(store.get("nope", None).await.unwrap(), None);
    assert_eq!(
        store.versions("greet").await.unwrap(),
        [v1.clone(), v2.clone()]
    );
    assert_eq!(
        store.heads().await.unwrap(),
        [other.head(), v1.head(), v2.head()]
    );

    assert!(store.delete("greet", "1.0.0").await.unwrap());
    assert!(!store.delete("greet", "1.0.0").await.unwrap());
    assert_eq!(
        store.heads().await.unwrap(),
        vec![
            other.head(),
            DefinitionHead {
                name: "greet".into(),
                version: "2.0.0".into(),
                digest: "digest-greet-2.0.0".into(),
            }
        ]
    );
}

#[tokio::test]
async fn memory() {
    contract(&InMemoryDefinitionStore::default()).await;
}

#[tokio::test]
async fn sqlite() {
    let path = std::env::temp_dir().join(format!(
        "agentry-definitions-{}.db",
        uuid::Uuid::new_v4().simple()
    ));
    let db = Database::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    db.migrate().await.unwrap();
    contract(db.definition_store().as_ref()).await;
    db.close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

#[tokio::test]
async fn postgres() {
    let pg = agentry_testdb::PgDatabase::create("agentry_definitions")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let db = Database::connect(&pg.url).await.unwrap();
    db.migrate().await.unwrap();
    contract(db.definition_store().as_ref()).await;
    db.close().await;
    pg.drop_now().await;
}
