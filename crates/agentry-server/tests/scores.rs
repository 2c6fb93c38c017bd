//! Live scores through the real binary: the example assistant scores its generations after the
//! answer; the scores are read back from `GET /agents/{id}/scores` (newest first, by a cursor,
//! of one scorer) and, for a durable run, from the run's detail; in strict mode a user sees only
//! the scores of their own generations, an admin all. The database is a SQLite file, so the
//! scores are the SQL store's.

mod common;

use std::io::BufReader;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Killed, printed, request};
use serde_json::Value;

const SECRET: &str = "scores-test-secret-of-32-bytes-or-more";

fn token(sub: &str, roles: &[&str]) -> String {
    let mut c = Command::new(env!("CARGO_BIN_EXE_agentry"));
    c.args(["token", "--sub", sub])
        .env("AGENTRY_JWT_SECRET", SECRET);
    for r in roles {
        c.args(["--role", r]);
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn data(status: u16, body: &str) -> Value {
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    v["data"].clone()
}

/// `path` as `token`, once `ready` holds of its data.
fn once(addr: &str, path: &str, token: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let auth = format!("Bearer {token}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = request(addr, "GET", path, &[("Authorization", &auth)], "");
        let d = data(status, &body);
        if ready(&d) {
            return d;
        }
        assert!(Instant::now() < deadline, "{path}: {d}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn ask(addr: &str, token: &str, body: &str) -> Value {
    let auth = format!("Bearer {token}");
    let (status, body) = request(
        addr,
        "POST",
        "/agents/assistant/text",
        &[("Authorization", &auth)],
        body,
    );
    data(status, &body)
}

#[test]
fn live_scores_are_stored_listed_and_kept_to_their_owner() {
    let dir = std::env::temp_dir().join(format!("agentry-scores-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = format!("sqlite://{}", dir.join("agentry.db").display());
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentry"))
        .args(["serve", "--bind", "127.0.0.1:0", "--database-url", &db])
        .env("AGENTRY_JWT_SECRET", SECRET)
        .env("AGENTRY_AUTH_STRICT", "1")
        .env_remove("AGENTRY_EXAMPLE_SCORE_RATE")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let addr = printed(&mut stdout, "agentry listening on http://");
    let _server = Killed(child);
    let (ada, bob, admin) = (
        token("ada", &[]),
        token("bob", &[]),
        token("root", &["admin"]),
    );

    // The agent's detail says how it scores.
    let (status, body) = request(
        &addr,
        "GET",
        "/agents/assistant",
        &[("Authorization", &format!("Bearer {ada}"))],
        "",
    );
    let detail = data(status, &body);
    assert_eq!(
        detail["liveScoring"],
        serde_json::json!({"scorers": ["relevance", "faithfulness", "latency", "tokens"], "sampleRate": 1.0})
    );

    // Ada: one generation in memory, one durable run.
    ask(&addr, &ada, r#"{"input":"What is the weather in Paris?"}"#);
    let run = ask(
        &addr,
        &ada,
        r#"{"input":"calculate 6 * 7","options":{"durable":true}}"#,
    );
    let run_id = run["runId"].as_str().expect("a durable run").to_owned();
    // Bob: one generation.
    ask(&addr, &bob, r#"{"input":"Hello there"}"#);

    // The durable run's detail carries its scores, by scorer.
    let detail = once(
        &addr,
        &format!("/agents/assistant/runs/{run_id}"),
        &ada,
        |d| d["scores"].as_array().is_some_and(|s| s.len() == 4),
    );
    let scorers: Vec<&str> = detail["scores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["scorer"].as_str().unwrap())
        .collect();
    assert_eq!(scorers, ["faithfulness", "latency", "relevance", "tokens"]);
    for s in detail["scores"].as_array().unwrap() {
        assert_eq!(s["runId"], run_id.as_str());
        let v = s["value"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&v), "{s}");
        assert!(s["reason"].as_str().is_some_and(|r| !r.is_empty()), "{s}");
        assert!(s["createdAt"].as_str().unwrap().ends_with('Z'), "{s}");
    }
    // `faithfulness`: 42 is the calculator's result.
    assert_eq!(detail["scores"][0]["value"], 1.0, "{detail}");

    // The admin sees all three generations' scores (4 scorers each), newest first.
    let all = once(&addr, "/agents/assistant/scores?limit=100", &admin, |d| {
        d["total"] == 12
    });
    let scores = all["scores"].as_array().unwrap();
    assert_eq!(scores.len(), 12);
    assert_eq!(all["nextCursor"], Value::Null);
    let times: Vec<&str> = scores
        .iter()
        .map(|s| s["createdAt"].as_str().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
    let in_memory = scores
        .iter()
        .filter(|s| s["runId"].as_str().unwrap().starts_with("gen_"))
        .count();
    assert_eq!(in_memory, 8, "two in-memory generations");

    // Pages by the cursor, without a repeat or a gap.
    let mut seen = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = once(
            &addr,
            &format!("/agents/assistant/scores?limit=5&cursor={cursor}"),
            &admin,
            |_| true,
        );
        seen.extend(page["scores"].as_array().unwrap().iter().cloned());
        match page["nextCursor"].as_str() {
            Some(c) => cursor = c.to_owned(),
            None => break,
        }
    }
    assert_eq!(seen, *scores);

    // One scorer's.
    let latency = once(
        &addr,
        "/agents/assistant/scores?scorer=latency",
        &admin,
        |_| true,
    );
    assert_eq!(latency["total"], 3);
    assert!(
        latency["scores"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["scorer"] == "latency" && s["value"] == 1.0)
    );

    // Strict mode: each user their own.
    let mine = once(&addr, "/agents/assistant/scores", &ada, |_| true);
    assert_eq!(mine["total"], 8, "{mine}");
    let bobs = once(&addr, "/agents/assistant/scores", &bob, |_| true);
    assert_eq!(bobs["total"], 4, "{bobs}");
    assert!(
        bobs["scores"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["runId"] != run_id.as_str())
    );
    let (status, _) = request(&addr, "GET", "/agents/assistant/scores", &[], "");
    assert_eq!(status, 401, "a sensitive route in strict mode");
    let (status, body) = request(
        &addr,
        "GET",
        "/agents/nobody/scores",
        &[("Authorization", &format!("Bearer {admin}"))],
        "",
    );
    assert_eq!(status, 404, "{body}");
    let (status, body) = request(
        &addr,
        "GET",
        "/agents/assistant/scores?limit=0",
        &[("Authorization", &format!("Bearer {admin}"))],
        "",
    );
    assert_eq!(status, 400, "{body}");
    let _ = std::fs::remove_dir_all(&dir);
}
