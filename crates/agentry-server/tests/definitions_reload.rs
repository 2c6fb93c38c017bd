//! Definitions that change while the server runs, black-box, with the real binary:
//!
//! - the definitions folder read again on `SIGHUP` and, with `AGENTRY_DEFINITIONS_WATCH`, when a
//!   file changes: a new version registered beside the executions running on the old one; a
//!   changed document under a version already loaded, or a folder with a broken file, refused
//!   whole while the loaded definitions stay;
//! - the admin API (`PUT`, `GET`, `DELETE /definitions/workflows/{name}`) on two replicas of one
//!   PostgreSQL database in strict mode: what one replica deploys, the other runs; a version is
//!   never rewritten; a non-admin and a caller without a token are refused; a version with an
//!   execution in flight is not deleted, and a deleted one is forgotten by both replicas.

mod common;

use std::time::{Duration, Instant};

use common::definitions::*;
use common::replica::{Replica, SECRET, token};
use serde_json::{Value, json};

/// A definition `greet` in `version` that waits for the event `go` (when `waits`) and then
/// answers `{"version": <said>}`.
fn greet(version: &str, said: &str, waits: bool) -> String {
    let wait = if waits {
        "  - await:\n      listen:\n        to:\n          one:\n            with:\n              type: go\n"
    } else {
        ""
    };
    format!(
        "document:\n  dsl: '1.0.0'\n  namespace: test\n  name: greet\n  version: '{version}'\n\
         do:\n{wait}  - answer:\n      set:\n        said: {said}\n"
    )
}

fn write(s: &Server, file: &str, yaml: &str) {
    std::fs::write(s.dir.join("definitions/workflows").join(file), yaml).expect("a definition");
}

fn signal(s: &Server, sig: &str) {
    let pid = s.pid().to_string();
    let ok = std::process::Command::new("kill")
        .args([sig, &pid])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill {sig}");
}

/// The versions of `workflow` the server registered.
async fn versions(s: &Server, workflow: &str) -> Vec<String> {
    let (status, body) = answer(client().get(s.url(&format!("/workflows/{workflow}")))).await;
    if status != 200 {
        return Vec::new();
    }
    body["data"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["registered"] == true)
        .filter_map(|v| v["version"].as_str().map(str::to_owned))
        .collect()
}

/// Polls until `done` holds of the versions of `workflow`, or fails naming `what`.
async fn wait_for_versions(
    s: &Server,
    workflow: &str,
    what: &str,
    done: impl Fn(&[String]) -> bool,
) {
    let started = Instant::now();
    loop {
        let now = versions(s, workflow).await;
        if done(&now) {
            return;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{what}: versions {now:?}\n{}",
            s.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sends the event `go` to the execution `id` of `greet`.
async fn go(s: &Server, id: &str) {
    let (status, body) = post(
        s,
        &format!("/workflows/greet/executions/{id}/events/go"),
        &json!({"data": {}}),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}\n{}", s.log());
}

/// On `SIGHUP` a new version of a document is registered beside the old one: the execution
/// waiting on the old version finishes on it, a new one starts on the new version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_registers_a_new_version_beside_the_running_executions() {
    within(async {
        let s = Server::start(&[("greet", greet("1.0.0", "one", true))], &[]);
        let first = execute(&s, "greet", "greet-first", json!({}), None).await;
        assert_eq!(first["status"], "suspended", "{first:#}");

        write(&s, "greet.yaml", &greet("2.0.0", "two", true));
        signal(&s, "-HUP");
        wait_for_versions(&s, "greet", "the new version after SIGHUP", |v| {
            v.contains(&"1.0.0".to_owned()) && v.contains(&"2.0.0".to_owned())
        })
        .await;

        let second = execute(&s, "greet", "greet-second", json!({}), None).await;
        assert_eq!(second["status"], "suspended", "{second:#}");
        go(&s, "greet-second").await;
        let done = completed(&s, "greet", "greet-second", None).await;
        assert_eq!(done["result"], json!({"said": "two"}), "{done:#}");

        go(&s, "greet-first").await;
        let done = completed(&s, "greet", "greet-first", None).await;
        assert_eq!(done["result"], json!({"said": "one"}), "{done:#}");
    })
    .await;
}

/// With the watch on, a folder with a broken file is refused whole (a good new file in it is
/// not registered either) and what was loaded goes on; a changed document under a version
/// already loaded is refused too; once the folder is right, its new workflow is registered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_folder_is_refused_whole_and_the_loaded_definitions_stay() {
    within(async {
        let s = Server::start(
            &[("greet", greet("1.0.0", "one", false))],
            &[("AGENTRY_DEFINITIONS_WATCH", "1")],
        );
        let other = greet("1.0.0", "one", false).replace("name: greet", "name: other");
        // The broken file first: the folder is polled, and must never be seen with the good
        // new file alone.
        write(&s, "broken.yaml", "document: {dsl: '1.0.0'}\ndo: []\n");
        write(&s, "other.yaml", &other);
        let started = Instant::now();
        while !s.log().contains("refused whole") {
            assert!(
                started.elapsed() < PATIENCE,
                "no refusal logged\n{}",
                s.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (status, _) = answer(client().get(s.url("/workflows/other"))).await;
        assert_eq!(
            status,
            404,
            "a refused folder registers nothing\n{}",
            s.log()
        );
        let done = execute(&s, "greet", "greet-1", json!({}), None).await;
        assert_eq!(done["result"], json!({"said": "one"}), "{done:#}");

        // The same version with another document: refused, the loaded one goes on.
        // (The change before the removal: the folder is never seen right in between.)
        // A refusal of the broken file may still be logged after these writes: the one awaited
        // names the rewritten version.
        write(&s, "greet.yaml", &greet("1.0.0", "changed", false));
        std::fs::remove_file(s.dir.join("definitions/workflows/broken.yaml")).expect("rm");
        let started = Instant::now();
        while !s.log().contains("raise document.version") {
            assert!(
                started.elapsed() < PATIENCE,
                "no refusal logged\n{}",
                s.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(s.log().contains("raise document.version"), "{}", s.log());
        let done = execute(&s, "greet", "greet-2", json!({}), None).await;
        assert_eq!(done["result"], json!({"said": "one"}), "{done:#}");

        // Right again: the new workflow is registered.
        write(&s, "greet.yaml", &greet("1.0.0", "one", false));
        wait_for_versions(&s, "other", "the folder, right again", |v| {
            v == ["1.0.0".to_owned()]
        })
        .await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// The admin API on replicas.
// ---------------------------------------------------------------------------------------------

async fn call(
    r: &Replica,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<(&str, String)>,
) -> (u16, Value) {
    let mut req = client().request(method, r.url(path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some((content_type, text)) = body {
        req = req.header("content-type", content_type).body(text);
    }
    answer(req).await
}

/// Polls `r` until `GET path` answers `status`.
async fn wait_for_status(r: &Replica, path: &str, admin: &str, status: u16, what: &str) {
    let started = Instant::now();
    loop {
        let (now, body) = call(r, reqwest::Method::GET, path, Some(admin), None).await;
        if now == status {
            return;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{what}: {now} {body}\n{}",
            r.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_deploys_to_every_replica_and_refuses_non_admins() {
    let db = agentry_testdb::PgDatabase::create("agentry_defapi")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    tokio::time::timeout(Duration::from_secs(60), async {
        let env = [
            ("AGENTRY_JWT_SECRET", SECRET),
            ("AGENTRY_AUTH_STRICT", "1"),
            ("AGENTRY_NO_EXAMPLES", "1"),
        ];
        let a = Replica::start(&db.url, "defs-a", &env);
        let b = Replica::start(&db.url, "defs-b", &env);
        let admin = token("root", &["admin"]);
        let user = token("alice", &[]);
        let yaml = greet("1.0.0", "one", true);
        let put = reqwest::Method::PUT;
        let path = "/definitions/workflows/greet";

        // Refused: no token, a user without the admin role, a name that is not the path's.
        let (status, body) = call(
            &a,
            put.clone(),
            path,
            None,
            Some(("application/yaml", yaml.clone())),
        )
        .await;
        assert_eq!(status, 401, "{body}");
        let (status, body) = call(
            &a,
            put.clone(),
            path,
            Some(&user),
            Some(("application/yaml", yaml.clone())),
        )
        .await;
        assert_eq!(
            (status, body["code"].as_str()),
            (403, Some("forbidden")),
            "{body}"
        );
        let (status, body) = call(
            &a,
            put.clone(),
            "/definitions/workflows/other",
            Some(&admin),
            Some(("application/yaml", yaml.clone())),
        )
        .await;
        assert_eq!(
            (status, body["code"].as_str()),
            (400, Some("invalid_definition")),
            "{body}"
        );
        let (status, body) = call(
            &a,
            put.clone(),
            path,
            Some(&admin),
            Some(("text/plain", yaml.clone())),
        )
        .await;
        assert_eq!(status, 415, "{body}");
        let (status, body) = call(
            &a,
            put.clone(),
            path,
            Some(&admin),
            Some((
                "application/yaml",
                "document: {dsl: '1.0.0'}\ndo: []\n".to_owned(),
            )),
        )
        .await;
        assert_eq!(
            (status, body["code"].as_str()),
            (400, Some("invalid_definition")),
            "{body}"
        );

        // Deployed on a, as YAML; the same document again, as JSON, is the same version.
        let (status, body) = call(
            &a,
            put.clone(),
            path,
            Some(&admin),
            Some(("application/yaml", yaml.clone())),
        )
        .await;
        assert_eq!(status, 201, "{body}\n{}", a.log());
        assert_eq!(body["data"]["version"], "1.0.0", "{body}");
        let as_json: Value = serde_norway::from_str(&yaml).expect("yaml");
        let (status, again) = call(
            &a,
            put.clone(),
            path,
            Some(&admin),
            Some(("application/json", as_json.to_string())),
        )
        .await;
        assert_eq!(status, 200, "{again}");
        assert_eq!(again["data"]["created"], false, "{again}");
        assert_eq!(again["data"]["digest"], body["data"]["digest"], "{again}");
        // Another document under the same version: never rewritten.
        let (status, body) = call(
            &a,
            put.clone(),
            path,
            Some(&admin),
            Some(("application/yaml", greet("1.0.0", "changed", true))),
        )
        .await;
        assert_eq!(
            (status, body["code"].as_str()),
            (409, Some("definition_conflict")),
            "{body}"
        );

        // b runs it within seconds; the execution is alice's.
        wait_for_status(
            &b,
            "/workflows/greet",
            &admin,
            200,
            "b registers the deployed definition",
        )
        .await;
        let (status, started) = call(
            &b,
            reqwest::Method::POST,
            "/workflows/greet/execute",
            Some(&user),
            Some((
                "application/json",
                json!({"input": {}, "options": {"executionId": "greet-b"}}).to_string(),
            )),
        )
        .await;
        assert_eq!(status, 200, "{started}\n{}", b.log());
        assert_eq!(started["data"]["status"], "suspended", "{started}");

        // b reads it (admin); a non-admin may not.
        let (status, view) = call(&b, reqwest::Method::GET, path, Some(&admin), None).await;
        assert_eq!(status, 200, "{view}");
        assert_eq!(view["data"]["source"], yaml, "{view}");
        assert_eq!(
            view["data"]["document"]["document"]["name"], "greet",
            "{view}"
        );
        assert_eq!(view["data"]["versions"][0]["inFlight"], 1, "{view}");
        let (status, _) = call(&b, reqwest::Method::GET, path, Some(&user), None).await;
        assert_eq!(status, 403);

        // In flight: not deleted. Once it ends: deleted, and forgotten by both replicas.
        let delete = "/definitions/workflows/greet?version=1.0.0";
        let (status, body) = call(&a, reqwest::Method::DELETE, delete, Some(&admin), None).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (409, Some("definition_in_use")),
            "{body}"
        );
        let (status, body) = call(
            &a,
            reqwest::Method::POST,
            "/workflows/greet/executions/greet-b/events/go",
            Some(&user),
            Some(("application/json", json!({"data": {}}).to_string())),
        )
        .await;
        assert_eq!(status, 200, "{body}\n{}\n{}", a.log(), b.log());
        let started = Instant::now();
        loop {
            let (_, st) = call(
                &b,
                reqwest::Method::GET,
                "/workflows/greet/executions/greet-b/state",
                Some(&user),
                None,
            )
            .await;
            if st["data"]["status"] == "completed" {
                assert_eq!(st["data"]["result"], json!({"said": "one"}), "{st}");
                break;
            }
            assert!(started.elapsed() < PATIENCE, "{st}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (status, body) = call(&a, reqwest::Method::DELETE, delete, Some(&user), None).await;
        assert_eq!(status, 403, "{body}");
        let (status, body) = call(&a, reqwest::Method::DELETE, delete, Some(&admin), None).await;
        assert_eq!(status, 200, "{body}\n{}", a.log());
        let (status, body) = call(&a, reqwest::Method::GET, path, Some(&admin), None).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (404, Some("definition_not_found")),
            "{body}"
        );
        wait_for_status(
            &a,
            "/workflows/greet",
            &admin,
            404,
            "a forgets the deleted version",
        )
        .await;
        wait_for_status(
            &b,
            "/workflows/greet",
            &admin,
            404,
            "b forgets the deleted version",
        )
        .await;
    })
    .await
    .expect("the test took longer than 60 s");
    db.drop_now().await;
}
