//! What the binary's tests share: a child process killed when the test ends, a free port, a raw
//! HTTP/1.1 request, the addresses a started `agentry` prints, a PostgreSQL server of a test's
//! own (`private_pg`), a small mounted file system (`small_fs`) and a server process of a
//! durability test (`replica`), a server of definitions (`definitions`).
// Each test file uses some of these.
#![allow(dead_code)]

pub mod definitions;
pub mod private_pg;
pub mod replica;
pub mod small_fs;

use std::io::{BufRead, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Child;
use std::time::Duration;

/// A child process killed when the test ends, however it ends.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One request with a JSON body (and `headers`) on its own connection: the status and the body.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connecting {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{extra}\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().expect("a status");
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, body.to_owned())
}

/// The next line the binary printed, which must start with `prefix` (such as `agentry listening
/// on http://`): the rest of it.
pub fn printed(stdout: &mut impl BufRead, prefix: &str) -> String {
    let mut line = String::new();
    stdout.read_line(&mut line).expect("stdout");
    line.trim()
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("expected {prefix:?}, got {line:?}"))
        .to_owned()
}
