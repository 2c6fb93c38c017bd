//! The server's edge (issue 35, items 4 to 6), against the real server over HTTP: DNS rebinding
//! (a request for a host the server does not answer for is `421 host_not_allowed` on every
//! route family, the probes aside), forwarding headers believed only from trusted proxies, the
//! A2A card's URL and `Cache-Control`, and A2A's 415 for a body that is not JSON. The host guard
//! reads no database: these run on SQLite; the A2A runs they count are the same on both.

use std::time::Duration;

use agentry_http::{AllowedHosts, PublicUrl, TrustedProxies};
use agentry_tests::{Backend, TestServer, assert_failure};
use reqwest::StatusCode;
use reqwest::header::CONTENT_TYPE;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const EVIL: &str = "evil.example.com";

/// The server's `host:port`.
fn host_port(s: &TestServer) -> &str {
    s.base_url.trim_start_matches("http://")
}

fn port(s: &TestServer) -> u16 {
    host_port(s).rsplit(':').next().unwrap().parse().unwrap()
}

/// A request to `path` of `s` that names `host` (and any `headers`); JSON bodies are sent as
/// JSON.
fn to_host(
    s: &TestServer,
    method: &str,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> reqwest::RequestBuilder {
    let mut req = s
        .client
        .request(method.parse().unwrap(), s.url(path))
        .header("host", host);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    match body {
        Some(b) => req.json(b),
        None => req,
    }
}

/// The MCP conformance suite's request (`dns-rebinding-protection`): an `initialize` naming
/// `host` in `Host` and `Origin`.
fn mcp_initialize(s: &TestServer, host: &str) -> reqwest::RequestBuilder {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "conformance-dns-rebinding-test", "version": "1.0.0"}}});
    to_host(
        s,
        "POST",
        "/mcp",
        host,
        &[
            ("origin", &format!("http://{host}")),
            ("accept", "application/json, text/event-stream"),
        ],
        Some(&body),
    )
}

fn send_message(text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": agentry_tests::new_id(), "role": "ROLE_USER", "parts": [{"text": text}]}}})
}

/// Asserts a 421 `host_not_allowed` envelope.
async fn assert_misdirected(resp: reqwest::Response, what: &str) {
    let status = resp.status();
    let mcp_session = resp.headers().get("mcp-session-id").cloned();
    let text = resp.text().await.unwrap();
    let body: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{what}: {status} with non-JSON ({e}): {text}"));
    let message = assert_failure(status, &body, 421);
    assert_eq!(body["code"], "host_not_allowed", "{what}: {body}");
    assert!(message.starts_with("Misdirected request"), "{what}: {body}");
    assert_eq!(mcp_session, None, "{what}: an MCP session was opened");
}

/// One request written raw (for what reqwest will not send), answered on a closed connection:
/// its status and body.
async fn raw(s: &TestServer, head: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(host_port(s)).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(15), stream.read_to_end(&mut out))
        .await
        .expect("an answer in time")
        .unwrap();
    let out = String::from_utf8_lossy(&out).into_owned();
    let status = out[9..12].parse().expect("a status");
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, body.to_owned())
}

/// The card of `agent` as asked with `headers`: its interface URL and `Cache-Control`.
async fn card(s: &TestServer, agent: &str, headers: &[(&str, &str)]) -> (String, String) {
    let mut req = s
        .client
        .get(s.url(&format!("/a2a/{agent}/.well-known/agent-card.json")));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap();
    let cache = resp
        .headers()
        .get("cache-control")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let status = resp.status();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    let url = body["supportedInterfaces"][0]["url"]
        .as_str()
        .unwrap_or_else(|| panic!("no interface URL: {body}"))
        .to_owned();
    (url, cache)
}

// ---------------------------------------------------------------------------------------------
// DNS rebinding
// ---------------------------------------------------------------------------------------------

/// Bound to a loopback address without `AGENTRY_ALLOWED_HOSTS`: the loopback names on the
/// bound port are answered, every other host is refused on every route family before anything
/// happens (no MCP session, no A2A task, no execution), and the probes answer anyway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_server_refuses_other_hosts_on_every_route() {
    let s = TestServer::start(Backend::Sqlite).await;
    let port = port(&s);
    let execute = json!({"input": {"text": "a b"}, "options": {"executionId": "rebound-1"}});
    let a2a = send_message("hello");
    let routes: [(&str, &str, Option<&Value>); 13] = [
        ("GET", "/", None),
        ("GET", "/agents", None),
        ("GET", "/workflows/word-count", None),
        ("POST", "/workflows/word-count/execute", Some(&execute)),
        ("GET", "/executions", None),
        ("GET", "/api/logs", None),
        ("GET", "/doc", None),
        ("GET", "/ui", None),
        ("GET", "/console", None),
        ("GET", "/metrics", None),
        ("GET", "/a2a/assistant/.well-known/agent-card.json", None),
        ("POST", "/a2a/assistant", Some(&a2a)),
        ("GET", "/mcp", None),
    ];
    for host in [
        EVIL.to_owned(),
        format!("{EVIL}:{port}"),
        // Another port of a loopback name is another server.
        format!("localhost:{}", port.wrapping_add(1)),
        // A name the server does not have, even resolving to it.
        format!("127.0.0.1.nip.io:{port}"),
    ] {
        for (method, path, body) in routes {
            let origin = format!("http://{host}");
            let resp = to_host(&s, method, path, &host, &[("origin", &origin)], body)
                .send()
                .await
                .unwrap();
            assert_misdirected(resp, &format!("{method} {path} for {host}")).await;
        }
        // The MCP conformance suite's request, and a WebSocket handshake.
        assert_misdirected(mcp_initialize(&s, &host).send().await.unwrap(), "MCP").await;
        let handshake = to_host(
            &s,
            "GET",
            "/ws/logs",
            &host,
            &[
                ("connection", "Upgrade"),
                ("upgrade", "websocket"),
                ("sec-websocket-version", "13"),
                ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ],
            None,
        );
        assert_misdirected(handshake.send().await.unwrap(), "/ws/logs").await;
        // The probes answer whoever asks (an orchestrator names the pod's address).
        for probe in ["/healthz", "/readyz"] {
            let resp = to_host(&s, "GET", probe, &host, &[], None)
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), StatusCode::OK, "{probe} for {host}");
        }
    }
    // Nothing was done for them.
    let (st, b) = s
        .get_json("/workflows/word-count/executions/rebound-1/state")
        .await;
    assert_failure(st, &b, 404);
    let runs = s.get_data("/agents/assistant/runs").await;
    assert_eq!(runs["runs"], json!([]), "no A2A task was started: {runs}");

    // The loopback names on the bound port are answered, whatever their case; so is the MCP
    // conformance suite's valid request.
    for host in [
        format!("localhost:{port}"),
        format!("LocalHost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ] {
        let resp = to_host(&s, "GET", "/agents", &host, &[], None)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{host}");
        let resp = mcp_initialize(&s, &host).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "MCP for {host}");
        assert!(resp.headers().contains_key("mcp-session-id"), "{host}");
    }

    // A request that names no host, or another one in its target, is refused too.
    let (status, body) = raw(&s, "GET /agents HTTP/1.0\r\n\r\n").await;
    assert_eq!(status, 421, "{body}");
    assert!(body.contains("\"host_not_allowed\""), "{body}");
    let (status, body) = raw(
        &s,
        &format!(
            "GET http://{EVIL}/agents HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            host_port(&s)
        ),
    )
    .await;
    assert_eq!(status, 421, "{body}");
    s.stop().await;
}

/// `AGENTRY_ALLOWED_HOSTS` replaces the loopback names: a bare host on any port, a host with a
/// port on that port only; `*` answers any host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_hosts_are_the_hosts_answered() {
    let hosts = AllowedHosts::parse_list("agents.example.com, 127.0.0.1").unwrap();
    let s = TestServer::start_configured(
        Backend::Sqlite,
        move |settings| settings.http.allowed_hosts = Some(hosts),
        |h| h,
    )
    .await;
    let port = port(&s);
    for host in [
        "agents.example.com".to_owned(),
        "Agents.Example.com:8443".to_owned(),
        format!("127.0.0.1:{port}"),
    ] {
        let resp = to_host(&s, "GET", "/agents", &host, &[], None)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{host}");
        let resp = mcp_initialize(&s, &host).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "MCP for {host}");
    }
    for host in [
        format!("localhost:{port}"),
        EVIL.to_owned(),
        "agents.example.com.evil.example".to_owned(),
    ] {
        let resp = to_host(&s, "GET", "/agents", &host, &[], None)
            .send()
            .await
            .unwrap();
        assert_misdirected(resp, &host).await;
        assert_misdirected(mcp_initialize(&s, &host).send().await.unwrap(), &host).await;
    }
    s.stop().await;

    let s = TestServer::start_configured(
        Backend::Sqlite,
        |settings| settings.http.allowed_hosts = Some(AllowedHosts::Any),
        |h| h,
    )
    .await;
    let resp = to_host(&s, "GET", "/agents", EVIL, &[], None)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    s.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Forwarding headers and the card's URL
// ---------------------------------------------------------------------------------------------

/// From a peer that is not a trusted proxy, forwarding headers are ignored: the card names the
/// host the request was sent to, and a forwarded host neither passes nor trips the host guard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarding_headers_from_an_untrusted_peer_are_ignored() {
    let proxies = TrustedProxies::parse_list("10.0.0.0/8").unwrap();
    let s = TestServer::start_configured(
        Backend::Sqlite,
        move |settings| settings.http.trusted_proxies = proxies,
        |h| h,
    )
    .await;
    let own = format!("http://{}/a2a/operator", host_port(&s));
    for headers in [
        vec![],
        vec![("x-forwarded-host", "evil.example")],
        vec![
            ("x-forwarded-host", "evil.example"),
            ("x-forwarded-proto", "https"),
        ],
        vec![("forwarded", "host=evil.example;proto=javascript")],
        vec![("forwarded", "for=10.0.0.1;host=evil.example;proto=https")],
    ] {
        let (url, cache) = card(&s, "operator", &headers).await;
        assert_eq!(url, own, "{headers:?}");
        assert_eq!(cache, "private, max-age=300");
    }
    // A forwarded allowed name does not let a foreign Host through.
    let resp = to_host(
        &s,
        "GET",
        "/agents",
        EVIL,
        &[("x-forwarded-host", host_port(&s))],
        None,
    )
    .send()
    .await
    .unwrap();
    assert_misdirected(resp, "a forwarded host from an untrusted peer").await;
    s.stop().await;
}

/// From a trusted proxy, the nearest proxy's forwarded host and scheme are the request's: the
/// host guard checks that host and the card names it; a scheme other than http or https, or a
/// malformed host, is ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_proxy_forwards_the_host_and_scheme() {
    let s = TestServer::start_configured(
        Backend::Sqlite,
        |settings| {
            settings.http.trusted_proxies = TrustedProxies::parse_list("127.0.0.1").unwrap();
            settings.http.allowed_hosts =
                Some(AllowedHosts::parse_list("agents.example.com").unwrap());
        },
        |h| h,
    )
    .await;
    // The proxy names the server by its address (not an allowed host) and forwards the public
    // name.
    let upstream = host_port(&s).to_owned();
    let cases: [(&[(&str, &str)], &str); 5] = [
        (
            &[
                ("host", &upstream),
                ("x-forwarded-host", "agents.example.com"),
                ("x-forwarded-proto", "https"),
            ],
            "https://agents.example.com/a2a/operator",
        ),
        (
            &[
                ("host", &upstream),
                ("x-forwarded-host", "evil.example, agents.example.com:8443"),
            ],
            "http://agents.example.com:8443/a2a/operator",
        ),
        (
            &[
                ("host", &upstream),
                (
                    "forwarded",
                    "for=192.0.2.7;host=agents.example.com;proto=https",
                ),
                ("x-forwarded-host", "evil.example"),
            ],
            "https://agents.example.com/a2a/operator",
        ),
        (
            &[
                ("host", &upstream),
                ("forwarded", "host=agents.example.com;proto=javascript"),
            ],
            "http://agents.example.com/a2a/operator",
        ),
        (
            &[
                ("host", "agents.example.com"),
                ("x-forwarded-host", "agents.example.com/evil"),
            ],
            "http://agents.example.com/a2a/operator",
        ),
    ];
    for (headers, expected) in cases {
        let (url, cache) = card(&s, "operator", headers).await;
        assert_eq!(url, expected, "{headers:?}");
        assert_eq!(cache, "private, max-age=300");
    }
    // The forwarded host is the one checked.
    for (host, forwarded) in [(upstream.as_str(), EVIL), ("agents.example.com", EVIL)] {
        let resp = to_host(
            &s,
            "GET",
            "/agents",
            host,
            &[("x-forwarded-host", forwarded)],
            None,
        )
        .send()
        .await
        .unwrap();
        assert_misdirected(resp, &format!("{host} forwarding {forwarded}")).await;
    }
    let resp = to_host(&s, "GET", "/agents", &upstream, &[], None)
        .send()
        .await
        .unwrap();
    assert_misdirected(resp, "the proxy's own name, nothing forwarded").await;
    s.stop().await;
}

/// `AGENTRY_PUBLIC_URL` is the card's URL whatever the request (or a trusted proxy) says,
/// cacheable by shared caches; on a loopback server its host is answered too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_public_url_names_the_card() {
    let s = TestServer::start_configured(
        Backend::Sqlite,
        |settings| {
            settings.http.public_url =
                Some(PublicUrl::parse("https://agents.example.com/agentry/").unwrap());
            settings.http.trusted_proxies = TrustedProxies::parse_list("127.0.0.1").unwrap();
        },
        |h| h,
    )
    .await;
    for headers in [
        vec![],
        vec![
            ("x-forwarded-host", "agents.example.com:8443"),
            ("x-forwarded-proto", "http"),
        ],
        vec![("forwarded", "host=agents.example.com;proto=javascript")],
        vec![("host", "agents.example.com")],
    ] {
        let (url, cache) = card(&s, "operator", &headers).await;
        assert_eq!(
            url, "https://agents.example.com/agentry/a2a/operator",
            "{headers:?}"
        );
        assert_eq!(cache, "public, max-age=300");
    }
    // Another agent's card, the same rule; an unknown agent is still a 404.
    let (url, _) = card(&s, "assistant", &[]).await;
    assert_eq!(url, "https://agents.example.com/agentry/a2a/assistant");
    let (st, b) = s.get_json("/a2a/nobody/.well-known/agent-card.json").await;
    assert_failure(st, &b, 404);
    s.stop().await;
}

// ---------------------------------------------------------------------------------------------
// A2A bodies
// ---------------------------------------------------------------------------------------------

/// `POST /a2a/{id}` takes JSON like every route with a JSON body: `text/plain` (what a
/// cross-site `fetch` sends without a preflight), a form or no Content-Type is a 415 before
/// anything runs; JSON with a charset is JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a2a_refuses_a_body_that_is_not_json() {
    let s = TestServer::start(Backend::Sqlite).await;
    let body = send_message("hello").to_string();
    for content_type in [
        Some("text/plain"),
        Some("text/plain;charset=UTF-8"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        None,
    ] {
        let mut req = s.client.post(s.url("/a2a/assistant")).body(body.clone());
        if let Some(ct) = content_type {
            req = req.header(CONTENT_TYPE, ct);
        }
        let r = s.send(req).await;
        let message = assert_failure(r.status, &r.body, 415);
        assert_eq!(r.body["code"], "unsupported_media_type", "{content_type:?}");
        assert_eq!(
            message,
            "Unsupported media type: Content-Type must be application/json"
        );
    }
    let runs = s.get_data("/agents/assistant/runs").await;
    assert_eq!(runs["runs"], json!([]), "no task was started: {runs}");

    for content_type in ["application/json", "application/json; charset=utf-8"] {
        let (st, b) = s
            .post_raw("/a2a/assistant", content_type, body.clone())
            .await;
        assert_eq!(st, StatusCode::OK, "{content_type}: {b}");
        assert_eq!(
            b["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{content_type}: {b}"
        );
    }
    // The body limit and the unknown agent stay what they were.
    let big = "x".repeat(1024 * 1024 + 1);
    let (st, b) = s.post_raw("/a2a/assistant", "application/json", big).await;
    assert_failure(st, &b, 413);
    let (st, b) = s.post_json("/a2a/nobody", &send_message("hi")).await;
    assert_failure(st, &b, 404);
    let runs = s.get_data("/agents/assistant/runs").await;
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(2), "{runs}");
    s.stop().await;
}
