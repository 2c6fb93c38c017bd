//! Support for the black-box integration tests: the real agentry server started in-process on a
//! free port, over SQLite or PostgreSQL, and a small HTTP client around it.
//!
//! Only HTTP is used to talk to the server; the engine and the database are never touched
//! directly (except to create the PostgreSQL test database before the server starts).

use std::path::PathBuf;
use std::time::Duration;

use actix_web::dev::ServerHandle;
use agentry_agents::AgentHub;
use agentry_app::AppBuilder;
use agentry_engine::Engine;
use agentry_http::Host;
use agentry_server::{AuthSettings, Settings};
use agentry_store::Database;
use futures::StreamExt;
use reqwest::StatusCode;
use reqwest::header::CONTENT_TYPE;
use serde_json::Value;

pub use agentry_testdb::{DEFAULT_POSTGRES_URL, POSTGRES_URL_VAR, PgDatabase, postgres_url};

/// How long one request (or one whole SSE stream) may take before the test fails.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Instantiates each named `async fn(Backend)` of the calling test file as two tests,
/// `sqlite::<name>` and `postgres::<name>`, each on a multi-threaded runtime.
#[macro_export]
macro_rules! backend_tests {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::Backend::Sqlite).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::Backend::Postgres).await;
                }
            )*
        }
    };
}

/// The database a test server runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A fresh SQLite file per server, removed when the server goes.
    Sqlite,
    /// A fresh PostgreSQL database per server, dropped when the server goes.
    Postgres,
}

/// Installs the process's tracing subscriber once: the log capture layer behind `/api/logs` and
/// `/ws/logs`, as the `agentry` binary installs it (without its stderr output). Idempotent; a
/// subscriber installed before by someone else is left in place.
pub fn init_logging() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        use tracing_subscriber::prelude::*;
        let _ = tracing_subscriber::registry()
            .with(agentry_logs::capture_layer(
                agentry_mcp::sessions::QUIET_LOG_DIRECTIVES,
            ))
            .try_init();
    });
}

/// The real server, started in-process on a free port.
pub struct TestServer {
    pub base_url: String,
    pub client: reqwest::Client,
    pub backend: Backend,
    /// The server's engine and agents, for tests that register their own workflows or agents
    /// (everything is still exercised over HTTP).
    pub engine: Engine,
    pub agents: AgentHub,
    handle: ServerHandle,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    database: Database,
    sqlite_path: Option<PathBuf>,
    postgres: Option<PgDatabase>,
}

/// A response: status, Content-Type and the body parsed as JSON.
#[derive(Debug)]
pub struct JsonResponse {
    pub status: StatusCode,
    pub content_type: String,
    pub body: Value,
}

impl TestServer {
    /// Starts the server with the examples on a fresh database of `backend`. Panics (failing
    /// the test) when the database cannot be reached: PostgreSQL tests never skip.
    pub async fn start(backend: Backend) -> TestServer {
        Self::start_with(backend, AuthSettings::default(), |h| h).await
    }

    /// [`TestServer::start`] with authentication settings and a host's additions to the HTTP
    /// front end (routes, middleware, provider, route patterns).
    pub async fn start_with(
        backend: Backend,
        auth: AuthSettings,
        customize: impl FnOnce(Host) -> Host,
    ) -> TestServer {
        Self::start_configured(backend, move |s| s.auth = auth, customize).await
    }

    /// [`TestServer::start`] with authentication settings and a host's additions to the
    /// application (agents, workflows, the execution policy).
    pub async fn start_with_app(
        backend: Backend,
        auth: AuthSettings,
        customize: impl FnOnce(AppBuilder) -> AppBuilder,
    ) -> TestServer {
        Self::start_composed(backend, move |s| s.auth = auth, customize, |h| h).await
    }

    /// [`TestServer::start`] with the settings edited by `configure` (the bind address and the
    /// database are the test's) and a host's additions to the HTTP front end.
    pub async fn start_configured(
        backend: Backend,
        configure: impl FnOnce(&mut Settings),
        customize: impl FnOnce(Host) -> Host,
    ) -> TestServer {
        Self::start_composed(backend, configure, |app| app, customize).await
    }

    /// [`TestServer::start`] with the settings edited by `configure` (the bind address and the
    /// database are the test's) and a host's additions to the application and to the HTTP front
    /// end.
    pub async fn start_composed(
        backend: Backend,
        configure: impl FnOnce(&mut Settings),
        customize_app: impl FnOnce(AppBuilder) -> AppBuilder,
        customize_host: impl FnOnce(Host) -> Host,
    ) -> TestServer {
        init_logging();
        let (database_url, sqlite_path, postgres) = match backend {
            Backend::Sqlite => {
                let path = std::env::temp_dir()
                    .join(format!("agentry-test-{}.db", uuid::Uuid::new_v4().simple()));
                (format!("sqlite://{}", path.display()), Some(path), None)
            }
            Backend::Postgres => {
                let db = PgDatabase::create("agentry_t")
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                (db.url.clone(), None, Some(db))
            }
        };
        let mut settings = Settings {
            examples: true,
            ..Default::default()
        };
        configure(&mut settings);
        settings.bind = "127.0.0.1:0".into();
        settings.database_url = database_url.clone();
        let running =
            match agentry_server::start_with(&settings, customize_app, customize_host).await {
                Ok(r) => r,
                Err(e) => {
                    if let Some(db) = &postgres {
                        db.drop_now().await;
                    }
                    panic!(
                        "starting the server on {}: {e:#}",
                        agentry_server::redact(&database_url)
                    )
                }
            };
        let handle = running.server.handle();
        let task = tokio::spawn(running.server);
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .expect("building the HTTP client");
        TestServer {
            base_url: format!("http://{}", running.addr),
            client,
            backend,
            engine: running.engine,
            agents: running.agents,
            handle,
            task: Some(task),
            database: running.database,
            sqlite_path,
            postgres,
        }
    }

    /// `base_url` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base_url, path)
    }

    /// Stops the server, closes its database and removes a SQLite file. Every request of the
    /// test has been answered by now, so the stop is not graceful: a graceful one would wait for
    /// the client's idle keep-alive connections to go.
    pub async fn stop(mut self) {
        self.agents.shutdown();
        self.handle.stop(false).await;
        if let Some(task) = self.task.take() {
            task.await
                .expect("server task panicked")
                .expect("server failed");
        }
        self.database.close().await;
        self.remove_files();
        if let Some(db) = self.postgres.take() {
            db.drop_now().await;
        }
    }

    fn remove_files(&mut self) {
        if let Some(path) = self.sqlite_path.take() {
            for suffix in ["", "-wal", "-shm"] {
                let mut p = path.clone().into_os_string();
                p.push(suffix);
                let _ = std::fs::remove_file(p);
            }
        }
    }

    /// Sends `req` and parses the body as JSON; panics when the body is not JSON or the
    /// Content-Type is not application/json (every answer of these routes is JSON).
    pub async fn send(&self, req: reqwest::RequestBuilder) -> JsonResponse {
        let resp = req.send().await.expect("request failed");
        let status = resp.status();
        let content_type = content_type(&resp);
        let text = resp.text().await.expect("reading the response body");
        let body: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{status} answered with non-JSON ({e}): {text:?}"));
        assert!(
            content_type.starts_with("application/json"),
            "{status} answered with Content-Type {content_type:?}: {text}"
        );
        JsonResponse {
            status,
            content_type,
            body,
        }
    }

    /// POST `body` as JSON.
    pub async fn post_json(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        let r = self.send(self.client.post(self.url(path)).json(body)).await;
        (r.status, r.body)
    }

    /// POST raw bytes with the given Content-Type.
    pub async fn post_raw(
        &self,
        path: &str,
        content_type: &str,
        body: impl Into<reqwest::Body>,
    ) -> (StatusCode, Value) {
        let r = self
            .send(
                self.client
                    .post(self.url(path))
                    .header(CONTENT_TYPE, content_type)
                    .body(body),
            )
            .await;
        (r.status, r.body)
    }

    /// GET, parsed as JSON.
    pub async fn get_json(&self, path: &str) -> (StatusCode, Value) {
        let r = self.send(self.client.get(self.url(path))).await;
        (r.status, r.body)
    }

    /// GET a success envelope and return its `data`.
    pub async fn get_data(&self, path: &str) -> Value {
        let (status, body) = self.get_json(path).await;
        ok_data(status, body)
    }

    /// POST a body expecting a success envelope; returns its `data`.
    pub async fn post_data(&self, path: &str, body: &Value) -> Value {
        let (status, resp) = self.post_json(path, body).await;
        ok_data(status, resp)
    }

    /// POSTs `body` as JSON to a stream endpoint and reads the whole Server-Sent Events stream:
    /// comment lines (keep-alives) are skipped, each event's `data:` lines are parsed as JSON.
    /// Checks status 200 and Content-Type text/event-stream.
    pub async fn sse_events(&self, path: &str, body: &Value) -> Vec<Value> {
        let read = async {
            let resp = self
                .client
                .post(self.url(path))
                .json(body)
                .send()
                .await
                .expect("stream request failed");
            let status = resp.status();
            let ct = content_type(&resp);
            if status != StatusCode::OK || !ct.starts_with("text/event-stream") {
                let text = resp.text().await.unwrap_or_default();
                panic!("stream answered {status} with Content-Type {ct:?}: {text}");
            }
            let mut stream = resp.bytes_stream();
            let mut buf = String::new();
            let mut events = Vec::new();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.expect("reading the event stream");
                buf.push_str(std::str::from_utf8(&chunk).expect("event stream is not UTF-8"));
                if buf.contains('\r') {
                    buf = buf.replace("\r\n", "\n").replace('\r', "\n");
                }
                while let Some(end) = buf.find("\n\n") {
                    let block: String = buf.drain(..end + 2).collect();
                    if let Some(ev) = parse_sse_block(&block) {
                        events.push(ev);
                    }
                }
            }
            if let Some(ev) = parse_sse_block(&buf) {
                events.push(ev);
            }
            events
        };
        tokio::time::timeout(REQUEST_TIMEOUT, read)
            .await
            .unwrap_or_else(|_| panic!("the event stream of {path} did not end"))
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if self.task.is_some() {
            // Not stopped (the test failed): send the stop command, remove the files.
            drop(self.handle.stop(false));
        }
        self.remove_files();
        // A PostgreSQL database still here drops itself.
        drop(self.postgres.take());
    }
}

fn content_type(resp: &reqwest::Response) -> String {
    resp.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned()
}

/// One SSE event block: `None` for a block of comments only. Panics on a `data` that is not
/// JSON.
fn parse_sse_block(block: &str) -> Option<Value> {
    let mut data: Vec<&str> = Vec::new();
    for line in block.lines() {
        if line.is_empty() || line.starts_with(':') {
            continue;
        }
        if let Some(rest) = line.strip_prefix("data:") {
            data.push(rest.strip_prefix(' ').unwrap_or(rest));
        }
        // `event:`, `id:` and `retry:` lines carry nothing the tests read.
    }
    if data.is_empty() {
        return None;
    }
    let joined = data.join("\n");
    Some(
        serde_json::from_str(&joined)
            .unwrap_or_else(|e| panic!("SSE data is not JSON ({e}): {joined:?}")),
    )
}

/// Asserts a success envelope with status 200 and returns `data`.
pub fn ok_data(status: StatusCode, body: Value) -> Value {
    assert_eq!(status, StatusCode::OK, "expected 200, got {status}: {body}");
    assert_eq!(body["success"], Value::Bool(true), "not a success: {body}");
    let obj = body.as_object().expect("envelope is an object");
    assert_eq!(
        obj.len(),
        2,
        "envelope has exactly success and data: {body}"
    );
    body.get("data")
        .cloned()
        .expect("success envelope has data")
}

/// Asserts a failure envelope `{success: false, error: <string>}` with `expected` status;
/// returns the message.
pub fn assert_failure(status: StatusCode, body: &Value, expected: u16) -> String {
    assert_eq!(
        status.as_u16(),
        expected,
        "expected {expected}, got {status}: {body}"
    );
    let obj = body.as_object().expect("failure body is an object");
    assert_eq!(obj.get("success"), Some(&Value::Bool(false)), "{body}");
    assert_eq!(
        obj.len(),
        3,
        "failure has exactly success, error and code: {body}"
    );
    let code = obj
        .get("code")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("code is not a string: {body}"));
    let row = agentry_http::error::Code::ALL
        .iter()
        .find(|c| c.as_str() == code)
        .unwrap_or_else(|| panic!("code {code} is not in the error table: {body}"));
    assert_eq!(row.status(), expected, "{code} has another status: {body}");
    let msg = obj
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("error is not a string: {body}"));
    assert!(!msg.is_empty(), "empty error message: {body}");
    msg.to_owned()
}

/// Asserts `v` is an ISO 8601 (RFC 3339) timestamp string and returns it parsed.
pub fn assert_iso(v: &Value) -> chrono::DateTime<chrono::FixedOffset> {
    let s = v
        .as_str()
        .unwrap_or_else(|| panic!("timestamp is not a string: {v}"));
    chrono::DateTime::parse_from_rfc3339(s)
        .unwrap_or_else(|e| panic!("{s:?} is not an ISO 8601 timestamp: {e}"))
}

/// A fresh execution id.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The repository's root (the Python tests and their helpers live below it).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The Python of `.venv-tools` (made by `scripts/install-test-deps.sh`, the README's set-up),
/// failing with the script's name when it cannot import `modules` (as `import` lists them).
pub fn tools_python(modules: &str) -> PathBuf {
    let python = repo().join(".venv-tools/bin/python");
    let ok = python.exists()
        && std::process::Command::new(&python)
            .args(["-c", &format!("import {modules}")])
            .status()
            .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{modules} cannot be imported by .venv-tools/bin/python: run \
         scripts/install-test-deps.sh (the README's set-up) first"
    );
    python
}

/// Runs pytest (with `.venv-tools`'s Python, which must import `modules`) on `target`, a file or
/// folder of the repository, with `env`; fails with its report.
pub async fn pytest(target: &str, modules: &'static str, env: Vec<(&'static str, String)>) {
    let python = tokio::task::spawn_blocking(move || tools_python(modules))
        .await
        .unwrap();
    let args = ["-m", "pytest", target, "-q", "-p", "no:cacheprovider"].map(str::to_owned);
    let mut command = std::process::Command::new(python);
    command.args(args).current_dir(repo()).envs(env);
    run_to_success(command, target).await;
}

/// Runs `command` (a test's client: pytest, a Node.js script) to its end, printing its output;
/// fails with that output, naming `what`, unless it succeeded.
pub async fn run_to_success(mut command: std::process::Command, what: &str) {
    let out = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .unwrap_or_else(|e| {
            panic!("running {what}: {e} (scripts/install-test-deps.sh installs it)")
        });
    let report = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{report}");
    assert!(out.status.success(), "{what} failed:\n{report}");
}
