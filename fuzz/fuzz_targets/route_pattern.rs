//! Route patterns (`METHOD /path`, as in `AGENTRY_PUBLIC_ROUTES`) and matching against any
//! request line: never a panic. The input is `pattern\npath`.
#![no_main]

use libfuzzer_sys::fuzz_target;

use agentry_auth::RoutePattern;

const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "DELETE", "get", "PATCH", ""];

fn check(p: &RoutePattern, path: &str, extra_method: &str) {
    for m in METHODS.iter().copied().chain([extra_method]) {
        let _ = p.matches(m, path);
    }
    // `GET` covers `HEAD`: whatever a GET matches, a HEAD matches.
    if p.matches("GET", path) {
        assert!(p.matches("HEAD", path), "{p} GET but not HEAD {path:?}");
    }
    // The text it keeps parses back to the same pattern.
    assert_eq!(
        RoutePattern::parse(p.as_str()).as_ref(),
        Ok(p),
        "{:?} does not parse back",
        p.as_str()
    );
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let (pattern, path) = s.split_once('\n').unwrap_or((s, "/"));
    // A request line's method and path, when the second half has the shape `METHOD /path`.
    let (method, path) = path.split_once(' ').unwrap_or(("OPTIONS", path));
    if let Ok(p) = RoutePattern::parse(pattern) {
        check(&p, path, method);
    }
    if let Ok(list) = RoutePattern::parse_list(pattern) {
        for p in &list {
            check(p, path, method);
        }
    }
});
