//! A server of definitions for the binary's tests: `agentry serve --definitions DIR` on a fresh
//! SQLite file, its requests and its executions' states.

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Killed;

/// The longest any test of this file may take.
pub const TEST_LIMIT: Duration = Duration::from_secs(20);
/// The longest the binary may take to print its address.
pub const START_LIMIT: Duration = Duration::from_secs(15);
/// The longest one wait for an execution's state may take.
pub const PATIENCE: Duration = Duration::from_secs(10);
/// Settings a developer's environment may carry that would change the server under test.
pub const ENV_CLEARED: [&str; 31] = [
    "DATABASE_URL",
    "AGENTRY_DEFINITIONS_WATCH",
    "AGENTRY_EVENTS_SINK",
    "AGENTRY_BIND",
    "AGENTRY_NO_EXAMPLES",
    "AGENTRY_DEFINITIONS",
    "AGENTRY_DEFINITIONS_TRUSTED",
    "AGENTRY_SECRETS_FILE",
    "AGENTRY_CRASH_AT",
    "AGENTRY_OUTBOUND_ALLOW",
    "AGENTRY_JWT_SECRET",
    "AGENTRY_JWT_PUBLIC_KEY_FILE",
    "AGENTRY_PUBLIC_ROUTES",
    "AGENTRY_PROTECTED_ROUTES",
    "AGENTRY_AUTH_STRICT",
    "AGENTRY_ALLOWED_HOSTS",
    "AGENTRY_TRUSTED_PROXIES",
    "AGENTRY_PUBLIC_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "AGENTRY_MODEL",
    "AGENTRY_FALLBACK_MODELS",
    "AGENTRY_TOKEN_BUDGET_PER_USER_DAY",
    "AGENTRY_EXAMPLE_SCORE_RATE",
    "AGENTRY_EVAL_TOKEN",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

// ---------------------------------------------------------------------------------------------
// The server.
// ---------------------------------------------------------------------------------------------

/// An `agentry serve` process on a fresh SQLite file, serving the definitions it was given;
/// killed, and its folder removed, when the test ends.
pub struct Server {
    process: Killed,
    pub addr: String,
    pub dir: PathBuf,
}

impl Server {
    /// Starts a server with `workflows` (file name, document) as its definitions, without
    /// authentication, with `env` on top of a clean environment.
    pub fn start(workflows: &[(&str, String)], env: &[(&str, &str)]) -> Server {
        Server::serve(Some(workflows), env, &[])
    }

    /// Starts a server with `workflows` as its definitions (and no examples, unless `env` says
    /// `AGENTRY_NO_EXAMPLES=0`), or without definitions and with the examples (`None`); `env`
    /// on top of a clean environment, `args` added to `serve`'s.
    pub fn serve(
        workflows: Option<&[(&str, String)]>,
        env: &[(&str, &str)],
        args: &[&str],
    ) -> Server {
        Server::serve_on(None, workflows, env, args)
    }

    /// One replica of several on `database_url` (a PostgreSQL database they share), as node
    /// `node`, with `workflows` as its definitions and `env` on top.
    pub fn replica(
        database_url: &str,
        node: &str,
        workflows: &[(&str, String)],
        env: &[(&str, &str)],
    ) -> Server {
        let mut env = env.to_vec();
        env.push(("AGENTRY_NODE_ID", node));
        Server::serve_on(Some(database_url), Some(workflows), &env, &[])
    }

    /// [`Server::serve`] on `database_url`, or on a fresh SQLite file of its own (`None`).
    fn serve_on(
        database_url: Option<&str>,
        workflows: Option<&[(&str, String)]>,
        env: &[(&str, &str)],
        args: &[&str],
    ) -> Server {
        let dir = std::env::temp_dir().join(format!("agentry-defs-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("the server's folder");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentry"));
        for var in ENV_CLEARED {
            cmd.env_remove(var);
        }
        // `AGENTRY_BIND` in `env` chooses the address (a test that must know its port first).
        let bind = env
            .iter()
            .find(|(k, _)| *k == "AGENTRY_BIND")
            .map_or("127.0.0.1:0", |(_, v)| *v);
        let database_url = database_url.map_or_else(
            || format!("sqlite://{}", dir.join("agentry.db").display()),
            str::to_owned,
        );
        cmd.args(["serve", "--bind", bind, "--database-url", &database_url])
            .args(args);
        if let Some(workflows) = workflows {
            let defs = dir.join("definitions");
            std::fs::create_dir_all(defs.join("workflows")).expect("the definitions folder");
            for (name, yaml) in workflows {
                std::fs::write(defs.join("workflows").join(format!("{name}.yaml")), yaml)
                    .expect("a definition");
            }
            cmd.arg("--definitions")
                .arg(&defs)
                .env("AGENTRY_NO_EXAMPLES", "1");
        }
        cmd.env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("stderr.log")).expect("the log file"));
        let mut child = cmd.spawn().expect("starting agentry");
        let stdout = child.stdout.take().expect("stdout");
        let process = Killed(child);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut stdout = BufReader::new(stdout);
            let mut line = String::new();
            let _ = stdout.read_line(&mut line);
            let addr = line
                .trim()
                .strip_prefix("agentry listening on http://")
                .map(str::to_owned);
            let _ = tx.send(addr);
            // Keeps reading, so the server never blocks on a full pipe.
            line.clear();
            while stdout.read_line(&mut line).is_ok_and(|n| n > 0) {
                line.clear();
            }
        });
        let log = || std::fs::read_to_string(dir.join("stderr.log")).unwrap_or_default();
        let addr = match rx.recv_timeout(START_LIMIT) {
            Ok(Some(addr)) => addr,
            _ => panic!("agentry did not start within {START_LIMIT:?}:\n{}", log()),
        };
        Server { process, addr, dir }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The server's process id (to send it a signal).
    pub fn pid(&self) -> u32 {
        self.process.0.id()
    }

    /// What the server logged so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // The process first, then its folder (its database and log).
        let _ = self.process.0.kill();
        let _ = self.process.0.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs a test's body within [`TEST_LIMIT`].
pub async fn within(body: impl Future<Output = ()>) {
    tokio::time::timeout(TEST_LIMIT, body)
        .await
        .unwrap_or_else(|_| panic!("the test took longer than {TEST_LIMIT:?}"));
}

// ---------------------------------------------------------------------------------------------
// HTTP.
// ---------------------------------------------------------------------------------------------

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .no_proxy()
        .build()
        .expect("a client")
}

/// A response's status and JSON body (`Null` when it has none).
pub async fn answer(resp: reqwest::RequestBuilder) -> (u16, Value) {
    let resp = resp.send().await.expect("a response");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// POSTs the JSON `body` to `path` (with `token` when given).
pub async fn post(s: &Server, path: &str, body: &Value, token: Option<&str>) -> (u16, Value) {
    let mut req = client().post(s.url(path)).json(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    answer(req).await
}

/// Starts `workflow` as execution `id` with `input` and waits for its first stop (execute
/// answers when the run completes, fails or suspends): the answer's `data`.
pub async fn execute(
    s: &Server,
    workflow: &str,
    id: &str,
    input: Value,
    token: Option<&str>,
) -> Value {
    let body = json!({"input": input, "options": {"executionId": id}});
    let (status, answer) = post(s, &format!("/workflows/{workflow}/execute"), &body, token).await;
    assert_eq!(status, 200, "{answer}\n{}", s.log());
    answer["data"].clone()
}

/// The state of an execution (`Null` while it does not exist).
pub async fn state(s: &Server, workflow: &str, id: &str, token: Option<&str>) -> Value {
    let mut req = client().get(s.url(&format!("/workflows/{workflow}/executions/{id}/state")));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let (status, body) = answer(req).await;
    match status {
        404 => Value::Null,
        200 => body["data"].clone(),
        other => panic!("state of {id}: {other} {body}"),
    }
}

/// Polls an execution's state until `done` holds; fails after [`PATIENCE`] naming `what`.
pub async fn wait_for(
    s: &Server,
    workflow: &str,
    id: &str,
    token: Option<&str>,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let started = Instant::now();
    loop {
        let st = state(s, workflow, id, token).await;
        if done(&st) {
            return st;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{what}: never happened; last state {st:#}\n{}",
            s.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits for the execution's end, which must be `completed`: its state.
pub async fn completed(s: &Server, workflow: &str, id: &str, token: Option<&str>) -> Value {
    let st = ended(s, workflow, id, token).await;
    assert_eq!(st["status"], "completed", "{st:#}\n{}", s.log());
    st
}

/// Waits for the execution's end, whatever it is: its state.
pub async fn ended(s: &Server, workflow: &str, id: &str, token: Option<&str>) -> Value {
    wait_for(s, workflow, id, token, "the execution's end", |st| {
        matches!(
            st["status"].as_str(),
            Some("completed" | "error" | "cancelled")
        )
    })
    .await
}
