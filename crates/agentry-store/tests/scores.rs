//! The contract of `ScoreStore`, run against every store: the in-memory one of
//! `agentry-agents`, SQLite (a fresh file) and PostgreSQL (a fresh database per test). Live
//! scoring, a run's detail and `GET /agents/{id}/scores` rely on exactly these behaviours.

use agentry_agents::scorers::{InMemoryScoreStore, ScoreQuery, ScoreStore, StoredScore};
use agentry_store::Database;
use chrono::{DateTime, Duration, Utc};

fn score(agent: &str, run: &str, owner: Option<&str>, scorer: &str, value: f64) -> StoredScore {
    StoredScore {
        agent_id: agent.into(),
        run_id: run.into(),
        owner: owner.map(str::to_owned),
        scorer: scorer.into(),
        value,
        passed: value >= 0.5,
        reason: format!("{scorer} of {run}: \"é ✓\""),
        // Milliseconds: what the databases keep.
        created_at: DateTime::from_timestamp_millis(Utc::now().timestamp_millis()).unwrap(),
    }
}

fn query(agent: &str) -> ScoreQuery {
    ScoreQuery {
        agent_id: agent.into(),
        limit: 100,
        ..ScoreQuery::default()
    }
}

async fn contract(store: &dyn ScoreStore) {
    let t = Utc::now();
    let at = |s: StoredScore, secs: i64| StoredScore {
        created_at: DateTime::from_timestamp_millis(
            (t + Duration::seconds(secs)).timestamp_millis(),
        )
        .unwrap(),
        ..s
    };
    let r1a = at(score("a", "r1", Some("ada"), "relevance", 0.25), 0);
    let r1b = at(score("a", "r1", Some("ada"), "tokens", 1.0), 0);
    let r2 = at(score("a", "r2", Some("bob"), "relevance", 1.0), 1);
    let other = at(score("b", "r3", None, "relevance", 0.0), 2);
    store.record(&[r1a.clone(), r1b.clone()]).await.unwrap();
    store.record(&[r2.clone(), other.clone()]).await.unwrap();
    store.record(&[]).await.unwrap();

    // A run's scores, by scorer; nothing of another agent's.
    assert_eq!(
        store.of_run("a", "r1").await.unwrap(),
        [r1a.clone(), r1b.clone()]
    );
    assert_eq!(store.of_run("b", "r1").await.unwrap(), []);

    // Newest first, paged, with the total.
    let (all, total) = store.list(&query("a")).await.unwrap();
    assert_eq!(total, 3);
    assert_eq!(all, [r2.clone(), r1b.clone(), r1a.clone()]);
    let page = ScoreQuery {
        limit: 1,
        after: Some(r2.key()),
        ..query("a")
    };
    assert_eq!(store.list(&page).await.unwrap(), (vec![r1b.clone()], 3));
    let last = ScoreQuery {
        after: Some(r1b.key()),
        ..query("a")
    };
    assert_eq!(store.list(&last).await.unwrap(), (vec![r1a.clone()], 3));
    let none = ScoreQuery {
        after: Some(r1a.key()),
        ..query("a")
    };
    assert_eq!(store.list(&none).await.unwrap(), (vec![], 3));
    let relevance = ScoreQuery {
        scorer: Some("relevance".into()),
        ..query("a")
    };
    assert_eq!(
        store.list(&relevance).await.unwrap(),
        (vec![r2.clone(), r1a.clone()], 2)
    );
    let ada = ScoreQuery {
        owner: Some("ada".into()),
        ..query("a")
    };
    assert_eq!(
        store.list(&ada).await.unwrap(),
        (vec![r1b.clone(), r1a.clone()], 2)
    );

    // A run scored again: its score by that scorer is replaced.
    let again = at(score("a", "r1", Some("ada"), "relevance", 0.75), 3);
    store.record(std::slice::from_ref(&again)).await.unwrap();
    let (all, total) = store.list(&query("a")).await.unwrap();
    assert_eq!(total, 3);
    assert_eq!(all[0], again);
}

#[tokio::test]
async fn memory() {
    contract(&InMemoryScoreStore::default()).await;
}

#[tokio::test]
async fn sqlite() {
    let path = std::env::temp_dir().join(format!(
        "agentry-scores-{}.db",
        uuid::Uuid::new_v4().simple()
    ));
    let db = Database::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    db.migrate().await.unwrap();
    contract(db.score_store().as_ref()).await;
    db.close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

#[tokio::test]
async fn postgres() {
    let pg = agentry_testdb::PgDatabase::create("agentry_scores")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let db = Database::connect(&pg.url).await.unwrap();
    db.migrate().await.unwrap();
    contract(db.score_store().as_ref()).await;
    db.close().await;
    pg.drop_now().await;
}
