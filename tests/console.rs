//! The operator console (`/console`): how the server serves it, and the console itself in a
//! real browser. `tests/console/` holds Playwright-for-Python tests that drive Debian's
//! `chromium` against three real servers started here (one without authentication, one with
//! the JWT provider on, one in strict mode); Playwright, pytest and Chromium are installed by
//! `scripts/install-test-deps.sh` (the README's set-up).

use std::time::Duration;

use agentry_auth::{TokenOptions, create_token};
use agentry_server::AuthSettings;
use agentry_tests::{Backend, TestServer, pytest};
use serde_json::json;

const SECRET: &str = "console-tests-secret-of-32-bytes!";

fn token(sub: &str, roles: &[&str], expires_in: Option<u64>, expired: bool) -> String {
    let mut payload = json!({"sub": sub, "name": sub, "roles": roles});
    if expired {
        payload["exp"] = json!(chrono::Utc::now().timestamp() - 3600);
    }
    create_token(
        &payload,
        SECRET.as_bytes(),
        &TokenOptions {
            expires_in: expires_in.map(Duration::from_secs),
            ..Default::default()
        },
    )
    .expect("a token")
}

/// Every view is the same page; the files are gzip-encoded for a browser that accepts it, under
/// a content security policy that lets the page load nothing but its own files and API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_is_served_from_the_binary() {
    let s = TestServer::start(Backend::Sqlite).await;
    let plain = reqwest::Client::builder()
        .no_gzip()
        .build()
        .expect("a client");
    let mut page = None;
    for path in [
        "/console",
        "/console/",
        "/console/executions",
        "/console/executions/some-id",
        "/console/approvals",
        "/console/agents/assistant",
        "/console/agents/operator/runs/some-run-id",
        "/console/logs",
        "/console/schedules",
        "/console/schedules/nightly-report",
        "/console/queues",
        "/console/queues/enrich-customer",
    ] {
        let resp = plain.get(s.url(path)).send().await.expect(path);
        assert_eq!(resp.status(), 200, "{path}");
        let headers = resp.headers().clone();
        assert_eq!(
            headers["content-type"], "text/html; charset=utf-8",
            "{path}"
        );
        let csp = headers["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("script-src 'self'"), "{path}: {csp}");
        assert!(headers.get("content-encoding").is_none(), "{path}");
        let body = resp.text().await.expect("the page");
        assert!(body.contains("/console/assets/"), "{path}: {body}");
        assert_eq!(page.get_or_insert_with(|| body.clone()), &body, "one page");
    }
    let resp = plain
        .get(s.url("/console"))
        .header("accept-encoding", "gzip, br")
        .send()
        .await
        .expect("gzip");
    assert_eq!(resp.headers()["content-encoding"], "gzip");
    assert_eq!(resp.headers()["vary"], "Accept-Encoding");
    let resp = plain
        .get(s.url("/console/assets/no-such-file.js"))
        .send()
        .await
        .expect("missing file");
    assert_eq!(resp.status(), 404);
    let body: serde_json::Value = resp.json().await.expect("an envelope");
    assert_eq!(body["code"], "route_not_found");
    assert!(
        agentry_console::gzipped_size() <= 300 * 1024,
        "the console weighs {} bytes gzipped",
        agentry_console::gzipped_size()
    );
    s.stop().await;
}

/// The console in Chromium, driven by Playwright (tests/console/*.py): approvals and their
/// generated resume form, a bad resume, live timelines, cancel, a deadline that passes, the
/// workflow operations on an execution's page (retry, fork, an event sent and its mailbox), the
/// queues (the Queues page, executions queued behind a slow one of the same key, a queued one
/// cancelled from its page), the chat with a tool call, an agent's working memory (shown, edited,
/// refused, the signed-in user's only), durable agent runs (tool approvals answered from the approvals page,
/// a run's page and the chat, across a reload; an agent's runs paged), sign-in with a valid and
/// an expired token, the log tail polled in strict mode, and no console error or failed request
/// on any page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_works_in_a_real_browser() {
    assert!(
        std::path::Path::new("/usr/bin/chromium").exists(),
        "/usr/bin/chromium is missing: run scripts/install-test-deps.sh first"
    );
    let open = TestServer::start(Backend::Sqlite).await;
    let auth = AuthSettings {
        jwt_secret: Some(SECRET.into()),
        ..Default::default()
    };
    let guarded = TestServer::start_with(Backend::Sqlite, auth.clone(), |h| h).await;
    let strict = AuthSettings {
        strict: true,
        ..auth
    };
    let strict = TestServer::start_with(Backend::Sqlite, strict, |h| h).await;
    let env = vec![
        ("AGENTRY_CONSOLE_BASE", open.base_url.clone()),
        ("AGENTRY_CONSOLE_JWT_BASE", guarded.base_url.clone()),
        (
            "AGENTRY_CONSOLE_VALID_TOKEN",
            token("console-user", &[], Some(3600), false),
        ),
        (
            "AGENTRY_CONSOLE_EXPIRED_TOKEN",
            token("console-user", &[], None, true),
        ),
        ("AGENTRY_CONSOLE_STRICT_BASE", strict.base_url.clone()),
        (
            "AGENTRY_CONSOLE_ADMIN_TOKEN",
            token("console-admin", &["admin"], Some(3600), false),
        ),
        ("CHROMIUM", "/usr/bin/chromium".to_owned()),
    ];
    pytest("tests/console", "playwright, pytest", env).await;
    open.stop().await;
    guarded.stop().await;
    strict.stop().await;
}
