//! Browsers cannot be turned against the server: requests a browser sends on behalf of another
//! web site are refused, and CORS is off unless origins are configured.
//!
//! - A request that changes something (any method but GET, HEAD and OPTIONS) and that a browser
//!   marks as coming from another site is refused with 403 unless its origin is allowed (the
//!   algorithm of Go's `http.CrossOriginProtection`): `Sec-Fetch-Site: same-origin` or `none`
//!   passes; otherwise an `Origin` must be this server's own (its host and port equal the `Host`
//!   header) or in the allow-list. Clients that are not browsers send neither header and pass.
//! - WebSocket handshakes (GET) are checked the same way by their handlers, so a page on another
//!   site cannot open `/ws/*` with the user's cookies.
//! - CORS answers only for the configured origins, exactly (`AGENTRY_ALLOWED_ORIGINS`); with
//!   none configured no response carries `Access-Control-Allow-Origin`.

use actix_web::body::BoxBody;
use actix_web::dev::{RequestHead, ServiceRequest, ServiceResponse};
use actix_web::http::{Method, header};
use actix_web::middleware::Next;

use crate::error::{ApiError, Code};

/// The browser origins allowed besides the server's own: `scheme://host[:port]`, compared
/// exactly (case-insensitively).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedOrigins(Vec<String>);

impl AllowedOrigins {
    /// Parses a comma list (`AGENTRY_ALLOWED_ORIGINS`); each item must be an origin such as
    /// `https://app.example.com` or `http://localhost:5173` (no path, no `*`).
    pub fn parse_list(list: &str) -> Result<Self, String> {
        let origins = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(Self::parse_one)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self(origins))
    }

    fn parse_one(origin: &str) -> Result<String, String> {
        let bad = |why: &str| Err(format!("{origin:?} is not an origin: {why}"));
        let Some((scheme, authority)) = origin.split_once("://") else {
            return bad("expected scheme://host[:port]");
        };
        if !matches!(scheme, "http" | "https") {
            return bad("the scheme must be http or https");
        }
        if authority.is_empty()
            || !authority
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'))
        {
            return bad("expected a host and an optional port, with no path");
        }
        Ok(origin.to_ascii_lowercase())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }

    fn contains(&self, origin: &str) -> bool {
        self.0.iter().any(|o| o.eq_ignore_ascii_case(origin))
    }

    /// Whether a browser request may reach the server: refuses (403) one that a browser marks as
    /// sent by another site whose origin is neither the server's own nor allowed.
    pub fn check(&self, head: &RequestHead) -> Result<(), ApiError> {
        let text = |name| {
            head.headers
                .get(name)
                .and_then(|v: &header::HeaderValue| v.to_str().ok())
        };
        let origin = text(header::ORIGIN);
        match text(header::HeaderName::from_static("sec-fetch-site")) {
            Some("same-origin" | "none") => return Ok(()),
            Some(_) => {}
            // Not a browser that says where the request comes from: judge by `Origin` alone.
            None if origin.is_none() => return Ok(()),
            None => {}
        }
        match origin {
            Some(o) if self.contains(o) || is_same_origin(o, text(header::HOST)) => Ok(()),
            Some(o) => Err(forbidden(&format!("origin {o} is not allowed"))),
            None => Err(forbidden("cross-site request")),
        }
    }
}

fn forbidden(what: &str) -> ApiError {
    ApiError::new(Code::Forbidden, format!("Forbidden: {what}"))
}

/// Whether `origin` (`scheme://host:port`) names the host the request was sent to.
fn is_same_origin(origin: &str, host: Option<&str>) -> bool {
    let authority = origin.split_once("://").map_or("", |(_, a)| a);
    host.is_some_and(|h| !h.is_empty() && h.eq_ignore_ascii_case(authority))
}

/// Whether `method` may change something (the browser's "unsafe" methods).
fn changes_state(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The middleware: refuses a cross-site request that would change something.
pub async fn refuse_cross_site(
    origins: AllowedOrigins,
    req: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    if changes_state(req.method())
        && let Err(e) = origins.check(req.head())
    {
        tracing::info!(method = %req.method(), path = %req.path(), reason = %e, "cross-site request refused");
        let resp = actix_web::ResponseError::error_response(&e);
        return Ok(req.into_response(resp));
    }
    next.call(req).await
}

/// CORS for exactly the allowed origins; `None` when there are none (CORS off).
pub fn cors(origins: &AllowedOrigins) -> Option<actix_cors::Cors> {
    if origins.is_empty() {
        return None;
    }
    let cors = origins.iter().fold(
        actix_cors::Cors::default()
            // A disallowed origin simply gets no CORS headers (the browser then refuses to
            // share the answer); its unsafe requests are refused by `refuse_cross_site`.
            .block_on_origin_mismatch(false)
            .allowed_methods(["GET", "POST", "PUT", "PATCH", "DELETE"])
            .allowed_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                header::ACCEPT,
                header::HeaderName::from_static("last-event-id"),
            ])
            .expose_headers([header::HeaderName::from_static("x-execution-id")])
            .max_age(600),
        |c, o| c.allowed_origin(o),
    );
    Some(cors)
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    fn head(headers: &[(&str, &str)]) -> RequestHead {
        let mut r = TestRequest::post().uri("/x");
        for (k, v) in headers {
            r = r.insert_header((*k, *v));
        }
        r.to_http_request().head().clone()
    }

    #[test]
    fn origins_parse_strictly() {
        let o =
            AllowedOrigins::parse_list(" https://App.example , http://localhost:5173,").unwrap();
        assert_eq!(
            o.iter().collect::<Vec<_>>(),
            ["https://app.example", "http://localhost:5173"]
        );
        for bad in [
            "*",
            "app.example",
            "https://a.example/path",
            "ftp://a",
            "https://",
        ] {
            assert!(AllowedOrigins::parse_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn browsers_from_elsewhere_are_refused() {
        let none = AllowedOrigins::default();
        let allowed = AllowedOrigins::parse_list("https://app.example").unwrap();
        // No browser headers: a server-to-server client.
        assert!(none.check(&head(&[])).is_ok());
        // Same origin, by Origin and Host or by Sec-Fetch-Site.
        let same = [
            ("origin", "http://127.0.0.1:3141"),
            ("host", "127.0.0.1:3141"),
        ];
        assert!(none.check(&head(&same)).is_ok());
        assert!(
            none.check(&head(&[("sec-fetch-site", "same-origin")]))
                .is_ok()
        );
        // Another site.
        let evil = [
            ("origin", "https://evil.example"),
            ("host", "127.0.0.1:3141"),
        ];
        let e = none.check(&head(&evil)).unwrap_err();
        assert_eq!(e.status(), actix_web::http::StatusCode::FORBIDDEN);
        assert_eq!(
            e.message,
            "Forbidden: origin https://evil.example is not allowed"
        );
        assert!(
            none.check(&head(&[("origin", "null"), ("host", "h")]))
                .is_err()
        );
        assert!(
            none.check(&head(&[("sec-fetch-site", "cross-site")]))
                .is_err()
        );
        // An allowed one.
        let app = [
            ("origin", "https://app.example"),
            ("host", "api.example"),
            ("sec-fetch-site", "same-site"),
        ];
        assert!(allowed.check(&head(&app)).is_ok());
        assert!(none.check(&head(&app)).is_err());
    }
}
