//! A PostgreSQL server of one test's own: `initdb` in a temporary folder, its own port on
//! 127.0.0.1 and its own socket folder, started, stopped (fast or immediate) and started again
//! by the test, so that the shared server of the other tests (127.0.0.1:5432) is never touched.
//!
//! PostgreSQL refuses to run as root: when the tests run as root, every server command runs as
//! the `postgres` OS user (`runuser -u postgres --`), in a folder that user owns. Trust
//! authentication, user `postgres`, database `postgres`. `initdb` takes about 0.7 s here, so
//! each test makes its own server.
//!
//! The binaries are found in `$AGENTRY_TEST_PG_BIN`, else in the newest
//! `/usr/lib/postgresql/*/bin`.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The `application_name` of every session the test opens itself, so that the test's queries
/// can tell them from agentry's connections.
pub const TEST_APP: &str = "agentry-test";

/// How a server is stopped (`pg_ctl stop -m ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// Disconnects every client, checkpoints, exits.
    Fast,
    /// Every process exits at once, no checkpoint: a crash; the next start replays the WAL.
    Immediate,
}

pub struct PrivatePg {
    dir: PathBuf,
    bin: PathBuf,
    /// Its port on 127.0.0.1, the same across restarts.
    pub port: u16,
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

fn pg_bin() -> PathBuf {
    if let Ok(dir) = std::env::var("AGENTRY_TEST_PG_BIN") {
        return PathBuf::from(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).unwrap_or_else(|| {
        panic!(
            "no PostgreSQL server binaries (initdb, pg_ctl) in /usr/lib/postgresql/*/bin: \
             install the postgresql package or set AGENTRY_TEST_PG_BIN"
        )
    })
}

fn run(mut cmd: Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

impl PrivatePg {
    /// A new server (initdb), started and accepting connections.
    pub fn start() -> PrivatePg {
        let bin = pg_bin();
        let dir = std::env::temp_dir().join(format!("agentry-pg-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("the server's folder");
        if is_root() {
            let mut chown = Command::new("chown");
            chown.arg("postgres:postgres").arg(&dir);
            run(chown, "chown of the server's folder to postgres");
        }
        let pg = PrivatePg {
            dir,
            bin,
            port: super::free_port(),
        };
        let mut initdb = pg.as_postgres("initdb");
        initdb.arg("-D").arg(pg.data()).args([
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-sync",
        ]);
        run(initdb, "initdb");
        let accepted = pg.start_again();
        assert!(accepted.elapsed() < Duration::from_secs(60));
        pg
    }

    /// The URL agentry connects to.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The server's own log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    /// `program` of the server binaries, as the `postgres` user when the test runs as root.
    fn as_postgres(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if is_root() {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(path);
            cmd
        } else {
            Command::new(path)
        }
    }

    /// Starts the stopped server on the same port and data folder, and waits until it accepts
    /// connections: the instant it was first seen accepting.
    pub fn start_again(&self) -> Instant {
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} \
             -c max_connections=100",
            self.port,
            self.dir.display()
        );
        let mut start = self.as_postgres("pg_ctl");
        start
            .arg("start")
            .arg("-W") // the test waits for connections itself, more finely than pg_ctl
            .arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(self.dir.join("log"))
            .args(["-o", &options])
            .stdout(Stdio::null());
        run(start, "pg_ctl start");
        let started = Instant::now();
        while !self.accepting() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the private PostgreSQL never accepted connections:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Instant::now()
    }

    /// Stops the server (and waits until it has stopped).
    pub fn stop(&self, mode: Shutdown) {
        let mut stop = self.as_postgres("pg_ctl");
        stop.arg("stop")
            .arg("-D")
            .arg(self.data())
            .args(["-w", "-t", "60", "-m"])
            .arg(match mode {
                Shutdown::Fast => "fast",
                Shutdown::Immediate => "immediate",
            })
            .stdout(Stdio::null());
        run(stop, "pg_ctl stop");
    }

    /// Whether the server accepts connections now (`pg_isready`).
    pub fn accepting(&self) -> bool {
        Command::new(self.bin.join("pg_isready"))
            .args(["-q", "-h", "127.0.0.1", "-t", "1", "-p"])
            .arg(self.port.to_string())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    }

    fn psql_command(&self, app: &str) -> Command {
        let mut cmd = Command::new(self.bin.join("psql"));
        cmd.args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-p"])
            .arg(self.port.to_string())
            .env("PGAPPNAME", app)
            .env("PGCONNECT_TIMEOUT", "5");
        cmd
    }

    /// Runs `sql` in a session of the test's own; its output (unaligned, tuples only).
    pub fn psql(&self, sql: &str) -> String {
        let mut cmd = self.psql_command(TEST_APP);
        cmd.args(["-c", sql]);
        let out = run(cmd, &format!("psql {sql:?}"));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Runs `sql` in a session of its own in the background (named `app`, which should start
    /// with [`TEST_APP`]); the session lasts as long as its statements.
    pub fn psql_in_background(&self, app: &str, sql: &str) -> Child {
        let mut cmd = self.psql_command(app);
        cmd.args(["-c", sql])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd.spawn().expect("psql")
    }

    /// The condition that selects agentry's connections in `pg_stat_activity` (every client
    /// session but the test's own).
    pub const AGENTRY_SESSIONS: &'static str = "backend_type = 'client backend' \
        AND pid <> pg_backend_pid() AND application_name NOT LIKE 'agentry-test%'";

    /// Terminates every connection agentry holds (`pg_terminate_backend`): how many there were.
    pub fn terminate_agentry_connections(&self) -> usize {
        let sql = format!(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE {}",
            Self::AGENTRY_SESSIONS
        );
        self.psql(&sql).parse().expect("a count")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for PrivatePg {
    fn drop(&mut self) {
        let mut stop = self.as_postgres("pg_ctl");
        stop.arg("stop")
            .arg("-D")
            .arg(self.data())
            .args(["-w", "-m", "immediate"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let _ = stop.status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
