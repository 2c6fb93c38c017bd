//! The `agentry` binary as an operator runs it: the listening line, migrate, help, SIGTERM.

mod common;

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::printed;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_agentry"));
    c.env_remove("DATABASE_URL")
        .env_remove("AGENTRY_BIND")
        .env_remove("AGENTRY_NO_EXAMPLES")
        .env_remove("AGENTRY_JWT_SECRET")
        .env_remove("AGENTRY_JWT_PUBLIC_KEY_FILE")
        .env_remove("AGENTRY_PUBLIC_ROUTES")
        .env_remove("AGENTRY_PROTECTED_ROUTES")
        .env_remove("AGENTRY_ALLOWED_HOSTS")
        .env_remove("AGENTRY_TRUSTED_PROXIES")
        .env_remove("AGENTRY_PUBLIC_URL")
        .env("RUST_LOG", "warn");
    c
}

fn temp_db() -> (String, std::path::PathBuf) {
    let path = std::env::temp_dir().join(format!("agentry-cli-{}.db", uuid::Uuid::new_v4()));
    (format!("sqlite://{}", path.display()), path)
}

fn http_get(addr: &str, path: &str) -> String {
    http_get_for(addr, addr, path)
}

/// A GET sent to `addr` that names `host`.
fn http_get_for(addr: &str, host: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// Spawns `cmd` with stdout piped and reads the address of its listening line.
fn spawn_listening(cmd: &mut Command) -> (std::process::Child, String) {
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let addr = printed(&mut stdout, "agentry listening on http://");
    (child, addr)
}

#[test]
fn serve_prints_its_address_serves_and_stops_on_sigterm() {
    let (url, path) = temp_db();
    let (mut child, addr) =
        spawn_listening(bin().args(["serve", "--bind", "127.0.0.1:0", "--database-url", &url]));
    assert!(!addr.ends_with(":0"), "the real port is printed: {addr}");
    let resp = http_get(&addr, "/workflows");
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.contains("\"expense-approval\""), "{resp}");

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert!(exit.success(), "graceful stop exits 0, got {exit:?}");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn no_examples_starts_empty() {
    let (url, path) = temp_db();
    let (mut child, addr) = spawn_listening(
        bin()
            .args(["--bind", "127.0.0.1:0", "--database-url", &url])
            .env("AGENTRY_NO_EXAMPLES", "1"),
    );
    let resp = http_get(&addr, "/workflows");
    assert!(resp.contains(r#"{"success":true,"data":[]}"#), "{resp}");
    child.kill().unwrap();
    let _ = child.wait();
    let _ = std::fs::remove_file(&path);
}

#[test]
fn migrate_twice_is_a_no_op() {
    let (url, path) = temp_db();
    for _ in 0..2 {
        let out = bin()
            .args(["migrate", "--database-url", &url])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(path.exists(), "the SQLite file is created");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn help_lists_flags_with_their_environment_variables() {
    let out = bin().args(["serve", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "--bind",
        "AGENTRY_BIND",
        "127.0.0.1:3141",
        "--database-url",
        "DATABASE_URL",
        "sqlite://agentry.db",
        "--no-examples",
        "AGENTRY_NO_EXAMPLES",
        "--mcp-max-sessions-per-user",
        "AGENTRY_MCP_MAX_SESSIONS_PER_USER",
        "--mcp-max-sessions",
        "AGENTRY_MCP_MAX_SESSIONS",
        "--mcp-session-idle",
        "AGENTRY_MCP_SESSION_IDLE",
        "--allowed-hosts",
        "AGENTRY_ALLOWED_HOSTS",
        "--trusted-proxies",
        "AGENTRY_TRUSTED_PROXIES",
        "--public-url",
        "AGENTRY_PUBLIC_URL",
        "--max-schedules-per-user",
        "AGENTRY_MAX_SCHEDULES_PER_USER",
        "--mailbox-max-bytes",
        "AGENTRY_MAILBOX_MAX_BYTES",
        "--events-max-per-key",
        "AGENTRY_EVENTS_MAX_PER_KEY",
        "--events-max-bytes-per-key",
        "AGENTRY_EVENTS_MAX_BYTES_PER_KEY",
        "--events-max",
        "AGENTRY_EVENTS_MAX",
        "--events-max-bytes",
        "AGENTRY_EVENTS_MAX_BYTES",
        "--events-sink",
        "AGENTRY_EVENTS_SINK",
    ] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
}

#[test]
fn a_bad_database_url_fails_clearly() {
    let out = bin()
        .args(["migrate", "--database-url", "mysql://nope"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unsupported database URL"), "{err}");
}

fn http_post(addr: &str, path: &str, token: Option<&str>, body: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn token_output_is_accepted_by_the_server() {
    const SECRET: &str = "cli-test-secret";
    let out = bin()
        .args(["token", "--sub", "u9", "--name", "Nia", "--role", "admin"])
        .args([
            "--role",
            "ops",
            "--expires-in",
            "10m",
            "--audience",
            "agentry",
        ])
        .env("AGENTRY_JWT_SECRET", SECRET)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.ends_with('\n') && stdout.lines().count() == 1,
        "{stdout:?}"
    );
    let token = stdout.trim().to_owned();
    assert_eq!(token.split('.').count(), 3, "{token}");

    let missing = bin()
        .args(["token", "--sub", "u9"])
        .env_remove("AGENTRY_JWT_SECRET")
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("--secret"));

    let (url, path) = temp_db();
    let (mut child, addr) = spawn_listening(
        bin()
            .args(["--bind", "127.0.0.1:0", "--database-url", &url])
            .env("AGENTRY_JWT_SECRET", SECRET)
            .env("AGENTRY_JWT_AUDIENCE", "agentry"),
    );
    let body = r#"{"input":{"text":"one two three"}}"#;
    let denied = http_post(&addr, "/workflows/word-count/execute", None, body);
    assert!(denied.starts_with("HTTP/1.1 401"), "{denied}");
    assert!(denied.contains("Authentication required"), "{denied}");
    let ok = http_post(&addr, "/workflows/word-count/execute", Some(&token), body);
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    assert!(ok.contains("\"words\":3"), "{ok}");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(&path);
}

/// Runs the server with `args` and `env` until it listens, sends `check` the address to reach
/// it at, then stops it: what it wrote on stderr.
fn served(args: &[&str], env: &[(&str, &str)], check: impl FnOnce(&str)) -> String {
    let (url, path) = temp_db();
    let mut cmd = bin();
    cmd.args(args)
        .args(["--database-url", &url])
        .envs(env.iter().copied())
        .stderr(Stdio::piped());
    let (mut child, addr) = spawn_listening(&mut cmd);
    // A server bound to every address is reached on the loopback one.
    let addr = addr.replace("0.0.0.0", "127.0.0.1");
    check(&addr);
    child.kill().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let _ = child.wait();
    let _ = std::fs::remove_file(&path);
    stderr
}

/// Bound beyond loopback without `AGENTRY_ALLOWED_HOSTS` (a container), the server answers any
/// host and says so once at start, naming the setting; bound to loopback, or with the setting,
/// it refuses other hosts (421) and says nothing.
#[test]
fn the_hosts_answered_follow_the_bound_address_or_the_setting() {
    let warning = "AGENTRY_ALLOWED_HOSTS";
    let stderr = served(&["--bind", "0.0.0.0:0"], &[], |addr| {
        let resp = http_get_for(addr, "evil.example.com", "/agents");
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    });
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains(warning)).collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].contains("WARN"), "{stderr}");

    let stderr = served(&["--bind", "127.0.0.1:0"], &[], |addr| {
        let resp = http_get_for(addr, "evil.example.com", "/agents");
        assert!(resp.starts_with("HTTP/1.1 421"), "{resp}");
        assert!(resp.contains("\"code\":\"host_not_allowed\""), "{resp}");
        let port = addr.rsplit(':').next().unwrap();
        let resp = http_get_for(addr, &format!("localhost:{port}"), "/agents");
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    });
    assert!(!stderr.contains(warning), "{stderr}");

    let stderr = served(
        &["--bind", "0.0.0.0:0"],
        &[("AGENTRY_ALLOWED_HOSTS", "agents.example.com")],
        |addr| {
            let resp = http_get_for(addr, "evil.example.com", "/agents");
            assert!(resp.starts_with("HTTP/1.1 421"), "{resp}");
            let resp = http_get_for(addr, "agents.example.com", "/agents");
            assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
        },
    );
    assert!(!stderr.contains(warning), "{stderr}");
}

/// The edge settings are checked at start: a bad one stops the server with its reason.
#[test]
fn bad_edge_settings_fail_at_start() {
    for (var, flag, value, reason) in [
        (
            "AGENTRY_PUBLIC_URL",
            "--public-url",
            "javascript://evil.example/%0aalert(1)",
            "http or https",
        ),
        (
            "AGENTRY_PUBLIC_URL",
            "--public-url",
            "https://agents.example.com/?q=1",
            "no query",
        ),
        (
            "AGENTRY_TRUSTED_PROXIES",
            "--trusted-proxies",
            "proxy.example",
            "not an IP address",
        ),
        (
            "AGENTRY_ALLOWED_HOSTS",
            "--allowed-hosts",
            "https://agents.example.com",
            "is not a host",
        ),
        (
            "AGENTRY_ALLOWED_HOSTS",
            "--allowed-hosts",
            "*, agents.example.com",
            "is not a host",
        ),
        (
            "AGENTRY_EVENTS_SINK",
            "--events-sink",
            "ftp://events.example.com/in",
            "an http(s) URL",
        ),
        (
            "AGENTRY_EVENTS_SINK",
            "--events-sink",
            "events.example.com",
            "not a URL",
        ),
    ] {
        let out = bin()
            .args(["--bind", "127.0.0.1:0", "--database-url", "sqlite::memory:"])
            .env(var, value)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{var}={value} started");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(flag) && err.contains(reason),
            "{var}={value}: {err}"
        );
    }
}

/// `--metrics-bind`'s address answers by its own address: on loopback, the loopback names on
/// its port, whatever `AGENTRY_ALLOWED_HOSTS` lists for the API.
#[test]
fn the_metrics_address_answers_its_own_hosts() {
    let (url, path) = temp_db();
    let mut child = bin()
        .args(["--bind", "0.0.0.0:0", "--database-url", &url])
        .args(["--metrics-bind", "127.0.0.1:0"])
        .env("AGENTRY_ALLOWED_HOSTS", "agents.example.com")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    printed(&mut stdout, "agentry listening on http://");
    let metrics = printed(&mut stdout, "agentry metrics on http://");
    let addr = metrics.trim_end_matches("/metrics");
    let port = addr.rsplit(':').next().unwrap();
    let ok = http_get_for(addr, &format!("localhost:{port}"), "/metrics");
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    for host in [
        "agents.example.com".to_owned(),
        format!("evil.example.com:{port}"),
    ] {
        let refused = http_get_for(addr, &host, "/metrics");
        assert!(refused.starts_with("HTTP/1.1 421"), "{host}: {refused}");
        assert!(
            refused.contains("\"code\":\"host_not_allowed\""),
            "{refused}"
        );
    }
    child.kill().unwrap();
    let _ = child.wait();
    let _ = std::fs::remove_file(&path);
}
