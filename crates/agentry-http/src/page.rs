//! The headers of every HTML page the server sends (`/`, `/ui`, `/console`): a content security
//! policy that lets a page load only the server's own files and reach only its own origin, and
//! `nosniff`, so no answer is ever read as another type than the one it declares.

use actix_web::HttpResponseBuilder;
use actix_web::http::header::{self, HeaderValue};

/// What a page may load and reach: its own files and its own origin's API, nothing else (data
/// is rendered as text, and no script from elsewhere, nor inline, may run). Inline styles are
/// allowed: Swagger UI sets them, and a style cannot run code.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
    style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; \
    frame-ancestors 'none'; base-uri 'self'; form-action 'self'";

/// Adds the page headers to `resp`.
pub fn secure(resp: &mut HttpResponseBuilder) -> &mut HttpResponseBuilder {
    resp.insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .insert_header((
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ))
}
