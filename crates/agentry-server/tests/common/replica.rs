//! One `agentry serve` process of a durability test (started on a database under a node id,
//! its stderr kept in a file, killed when the test ends), and the SSE reader of its streams.

use std::io::BufReader;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

pub struct Replica {
    pub child: Child,
    pub addr: String,
    log: PathBuf,
}

impl Replica {
    /// Starts `agentry serve` on `database_url` as node `node`, with the examples, without
    /// authentication, with `extra_env` on top.
    pub fn start(database_url: &str, node: &str, extra_env: &[(&str, &str)]) -> Replica {
        let log = std::env::temp_dir().join(format!("agentry-dur-{}.log", uuid::Uuid::new_v4()));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentry"));
        cmd.args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--database-url",
            database_url,
        ])
        .env_remove("AGENTRY_JWT_SECRET")
        .env_remove("AGENTRY_NO_EXAMPLES")
        .env_remove("AGENTRY_AUTH_STRICT")
        .env("AGENTRY_NODE_ID", node)
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("log file"));
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn agentry");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let addr = super::printed(&mut stdout, "agentry listening on http://");
        Replica { child, addr, log }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill {sig}");
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// One SSE event as a client sees it: its `id:` (a number in the execution's log) and data.
pub type Sse = (Option<i64>, serde_json::Value);

/// Reads SSE events from `resp` until `stop` says so (or the stream ends); dropping what is
/// returned closes the connection.
pub async fn read_sse(resp: reqwest::Response, stop: impl Fn(&[Sse]) -> bool) -> Vec<Sse> {
    read_sse_as(resp, |id| id.parse().ok(), stop).await
}

/// [`read_sse`] with each `id:` as `id_of` reads it (a durable run's live text pieces have ids
/// `<number>.<characters>`).
pub async fn read_sse_as<I>(
    resp: reqwest::Response,
    id_of: impl Fn(&str) -> Option<I>,
    stop: impl Fn(&[(Option<I>, serde_json::Value)]) -> bool,
) -> Vec<(Option<I>, serde_json::Value)> {
    use futures::StreamExt;
    let mut events = Vec::new();
    let mut buffer = String::new();
    let mut chunks = resp.bytes_stream();
    while let Some(Ok(chunk)) = chunks.next().await {
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let mut id = None;
            let mut data = None;
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id: ") {
                    id = id_of(v.trim());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(v).ok();
                }
            }
            if let Some(data) = data {
                events.push((id, data));
                if stop(&events) {
                    return events;
                }
            }
        }
    }
    events
}

/// How long any wait of a durability test may take before it fails (never a timing claim by
/// itself).
pub const PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// An HTTP client with a generous time-out.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .expect("client")
}

/// POSTs `body` to `r` (with `token` when given): the status and the JSON answer.
pub async fn post(
    r: &Replica,
    path: &str,
    body: serde_json::Value,
    token: Option<&str>,
) -> (u16, serde_json::Value) {
    let mut req = client().post(r.url(path)).json(&body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    answer(req.send().await.expect("post")).await
}

/// GETs `path` of `r` (with `token` when given): the status and the JSON answer.
pub async fn get(r: &Replica, path: &str, token: Option<&str>) -> (u16, serde_json::Value) {
    let mut req = client().get(r.url(path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    answer(req.send().await.expect("get")).await
}

/// A response's status and JSON body (`Null` when it has none).
async fn answer(resp: reqwest::Response) -> (u16, serde_json::Value) {
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(serde_json::Value::Null))
}

/// A fresh SQLite file's URL, and the file (to remove).
pub fn sqlite_url() -> (String, PathBuf) {
    let path = std::env::temp_dir().join(format!("agentry-dur-{}.db", uuid::Uuid::new_v4()));
    (format!("sqlite://{}", path.display()), path)
}

/// A fresh directory (for the test registry's log, `tools.log`).
pub fn scratch_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agentry-tools-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// The lines of the test registry's log in `dir`.
pub fn log_lines(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("tools.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

impl Replica {
    /// [`Replica::start`] with the hidden test registry (`AGENTRY_TEST_AGENTS`: the agent
    /// `tester`, the workflows `tester-foreach`, `tester-mailbox`, `tester-queued` and
    /// `tester-unqueued`), logging to `dir`.
    pub fn with_test_registry(
        database_url: &str,
        node: &str,
        dir: &std::path::Path,
        extra_env: &[(&str, &str)],
    ) -> Replica {
        let dir = dir.display().to_string();
        let mut env = vec![("AGENTRY_TEST_AGENTS", dir.as_str())];
        env.extend_from_slice(extra_env);
        Replica::start(database_url, node, &env)
    }
}

/// Runs the `async fn(&str)` `$body` (given a database URL) as two tests: `$sqlite` on a fresh
/// SQLite file and `$postgres` on a fresh PostgreSQL database.
#[macro_export]
macro_rules! on_both_databases {
    ($body:ident, $sqlite:ident, $postgres:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $sqlite() {
            let (url, path) = $crate::common::replica::sqlite_url();
            $body(&url).await;
            let _ = std::fs::remove_file(&path);
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $postgres() {
            let db = agentry_testdb::PgDatabase::create("agentry_dur")
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            $body(&db.url).await;
            db.drop_now().await;
        }
    };
}

/// The JWT secret of the strict-mode tests' servers (`AGENTRY_JWT_SECRET`).
pub const SECRET: &str = "durability-tests-secret-32-bytes!";

/// A token for `sub` with `roles`, signed with [`SECRET`].
pub fn token(sub: &str, roles: &[&str]) -> String {
    agentry_auth::create_token(
        &serde_json::json!({"sub": sub, "roles": roles}),
        SECRET.as_bytes(),
        &agentry_auth::TokenOptions::default(),
    )
    .expect("a token")
}

/// The state of the execution `id` of `workflow` on `r`, `None` while it does not exist (yet).
pub async fn state_of(r: &Replica, workflow: &str, id: &str) -> Option<serde_json::Value> {
    let resp = client()
        .get(r.url(&format!("/workflows/{workflow}/executions/{id}/state")))
        .send()
        .await
        .expect("state");
    if resp.status() == 404 {
        return None;
    }
    let body: serde_json::Value = resp.json().await.expect("json");
    assert_eq!(body["success"], true, "{body}");
    Some(body["data"].clone())
}

/// Polls `r`'s state of the execution `id` of `workflow` until `done` holds (`Null` while it
/// does not exist); fails after [`PATIENCE`] naming `what`.
pub async fn wait_for_state(
    r: &Replica,
    workflow: &str,
    id: &str,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let started = std::time::Instant::now();
    loop {
        let s = state_of(r, workflow, id)
            .await
            .unwrap_or(serde_json::Value::Null);
        if done(&s) {
            return s;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{what}: never happened; last {s}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
