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
                    id = v.trim().parse().ok();
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
