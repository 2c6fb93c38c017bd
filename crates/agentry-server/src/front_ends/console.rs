//! The operator console at `/console`: static pages from `agentry-console`, served from the
//! binary, mounted beside the HTTP API on its server. Every view is a URL (`/console/executions/{id}`, `/console/approvals`, ...) answered
//! with the same page, whose script renders the view the URL names; `/console/assets/{path}`
//! are its files. The pages are public: every piece of data comes through the API, under its
//! usual authentication rules.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, ResponseError, get, web};
use agentry_console::Asset;
use agentry_http::error::{ApiError, Code};
use agentry_http::mount::Mount;

/// An embedded file, gzip-encoded when the client accepts it.
fn serve(req: &HttpRequest, asset: &'static Asset) -> HttpResponse {
    let gzip = req
        .headers()
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|e| e.split(';').next().is_some_and(|e| e.trim() == "gzip"))
        });
    let mut resp = HttpResponse::Ok();
    agentry_http::page::secure(&mut resp)
        .content_type(asset.content_type)
        .insert_header((header::VARY, "Accept-Encoding"))
        // Revalidate each time: a new binary serves new files at the same paths.
        .insert_header((header::CACHE_CONTROL, "no-cache"));
    if gzip {
        resp.insert_header((header::CONTENT_ENCODING, "gzip"))
            .body(asset.gzip)
    } else {
        resp.body(asset.body)
    }
}

/// GET /console
#[utoipa::path(
    tag = "console",
    operation_id = "console",
    summary = "The operator console",
    description = "The console's page (HTML): executions, approvals, agents and logs in the \
        browser. Its data comes from this API, under the usual authentication rules.",
    responses((status = 200, description = "The console's page (HTML).", content_type = "text/html")),
)]
#[get("/console")]
pub async fn home(req: HttpRequest) -> HttpResponse {
    serve(&req, agentry_console::index())
}

/// GET /console/{tail}
#[utoipa::path(
    tag = "console",
    operation_id = "consoleView",
    summary = "A view or a file of the operator console",
    description = "`assets/<path>` is one of the console's files (HTML, CSS, JavaScript); any \
        other path is a view of the console (`executions`, `executions/<executionId>`, \
        `approvals`, `agents/<id>`, `agents/<id>/runs/<runId>`, `logs`), answered with its \
        page.",
    params(("tail" = String, Path, description = "A view, or `assets/` and a file's path.", example = "approvals")),
    responses(
        (status = 200, description = "The page or the file."),
    ),
)]
#[get("/console/{tail:.*}")]
pub async fn view(req: HttpRequest, tail: web::Path<String>) -> HttpResponse {
    match tail.strip_prefix("assets/") {
        Some(path) => match agentry_console::asset(path) {
            Some(asset) => serve(&req, asset),
            None => ApiError::new(
                Code::RouteNotFound,
                format!("No file {path} in /console/assets/"),
            )
            .error_response(),
        },
        None => serve(&req, agentry_console::index()),
    }
}

/// The console's pages and files.
pub fn mount() -> Mount {
    Mount::new(|cfg| {
        cfg.service(home).service(view);
    })
}
