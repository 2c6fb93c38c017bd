//! The landing page (`GET /`): the service, its version, the registered agents and workflows, and
//! links to the API explorer and the OpenAPI description. One self-contained HTML document.

use std::fmt::Write as _;

use actix_web::http::header::ContentType;
use actix_web::{HttpResponse, get, web};

use crate::AppState;

/// Escapes `s` for HTML text and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "
:root { color-scheme: light dark; --fg: #1f2328; --muted: #656d76; --line: #d0d7de; --accent: #0969da; --bg: #ffffff; --code: #f6f8fa; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --muted: #8d96a0; --line: #30363d; --accent: #4493f8; --bg: #0d1117; --code: #161b22; } }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, 'Segoe UI', sans-serif; color: var(--fg); background: var(--bg); }
main { max-width: 960px; margin: 0 auto; padding: 2.5rem 1.25rem 4rem; }
header h1 { margin: 0; font-size: 2rem; letter-spacing: -0.02em; }
header h1 .version { font-size: 0.95rem; font-weight: 500; color: var(--muted); margin-left: 0.5rem; }
header p { margin: 0.25rem 0 1.25rem; color: var(--muted); }
nav { display: flex; flex-wrap: wrap; gap: 0.75rem; margin-bottom: 2rem; }
nav a { display: inline-block; padding: 0.45rem 0.9rem; border: 1px solid var(--line); border-radius: 6px; color: var(--accent); text-decoration: none; font-weight: 500; }
nav a:hover { border-color: var(--accent); }
h2 { font-size: 1.2rem; margin: 2rem 0 0.5rem; padding-bottom: 0.3rem; border-bottom: 1px solid var(--line); }
h2 .count { color: var(--muted); font-weight: 400; }
table { width: 100%; border-collapse: collapse; }
th, td { text-align: left; vertical-align: top; padding: 0.5rem 0.6rem; border-bottom: 1px solid var(--line); }
th { font-size: 0.8rem; text-transform: uppercase; letter-spacing: 0.04em; color: var(--muted); font-weight: 600; }
code { font: 0.88em ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: var(--code); padding: 0.1em 0.35em; border-radius: 4px; }
td:first-child { white-space: nowrap; }
.empty { color: var(--muted); font-style: italic; }
footer { margin-top: 2.5rem; color: var(--muted); font-size: 0.85rem; }
";

/// Rows of a table, or one row saying there is nothing.
fn rows(out: &mut String, items: &[[String; 3]], empty: &str) {
    if items.is_empty() {
        let _ = writeln!(
            out,
            "<tr><td colspan=\"3\" class=\"empty\">{}</td></tr>",
            escape(empty)
        );
    }
    for [id, name, text] in items {
        let _ = writeln!(
            out,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            escape(id),
            escape(name),
            escape(text)
        );
    }
}

/// The page for these agents and workflows (`[id, name, description or purpose]` each).
pub fn render(agents: &[[String; 3]], workflows: &[[String; 3]]) -> String {
    let version = escape(env!("CARGO_PKG_VERSION"));
    let mut out = String::with_capacity(4096);
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>agentry {version}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n\
         <header>\n<h1>agentry<span class=\"version\">v{version}</span></h1>\n\
         <p>AI agents and durable workflows behind one HTTP API.</p>\n</header>\n\
         <nav>\n<a href=\"/console\">Console</a>\n<a href=\"/ui\">API explorer</a>\n<a href=\"/doc\">OpenAPI description</a>\n\
         <a href=\"/api/logs\">Logs</a>\n</nav>\n"
    );
    let _ = write!(
        out,
        "<section>\n<h2>Agents <span class=\"count\">({})</span></h2>\n<table>\n\
         <thead><tr><th>Id</th><th>Name</th><th>Description</th></tr></thead>\n<tbody>\n",
        agents.len()
    );
    rows(&mut out, agents, "No agents are registered.");
    out.push_str("</tbody>\n</table>\n</section>\n");
    let _ = write!(
        out,
        "<section>\n<h2>Workflows <span class=\"count\">({})</span></h2>\n<table>\n\
         <thead><tr><th>Id</th><th>Name</th><th>Purpose</th></tr></thead>\n<tbody>\n",
        workflows.len()
    );
    rows(&mut out, workflows, "No workflows are registered.");
    out.push_str("</tbody>\n</table>\n</section>\n");
    out.push_str(
        "<footer>Agents: <code>GET /agents</code>, <code>POST /agents/{id}/text</code>. \
         Workflows: <code>GET /workflows</code>, <code>POST /workflows/{id}/execute</code>. \
         Live: <code>/ws/logs</code>, <code>/ws/executions/{executionId}</code>.</footer>\n\
         </main>\n</body>\n</html>\n",
    );
    out
}

/// GET /
#[utoipa::path(
    tag = "documentation",
    operation_id = "landingPage",
    summary = "The landing page",
    description = "An HTML page: the service, its version, the registered agents and workflows, \
        and links to the API explorer (`/ui`) and this document (`/doc`).",
    responses((status = 200, description = "The page.", content_type = "text/html", body = String)),
)]
#[get("/")]
pub async fn index(app: web::Data<AppState>) -> HttpResponse {
    let agents: Vec<[String; 3]> = app
        .app
        .agent_summaries()
        .into_iter()
        .map(|a| [a.id, a.name, a.description])
        .collect();
    let workflows: Vec<[String; 3]> = app
        .app
        .workflows()
        .into_iter()
        .map(|w| [w.id, w.name, w.purpose])
        .collect();
    crate::page::secure(&mut HttpResponse::Ok())
        .content_type(ContentType::html())
        .body(render(&agents, &workflows))
}

/// Registers the landing page.
pub fn routes(cfg: &mut crate::registration::Routes<'_, '_>) {
    cfg.service(index);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            escape(r#"<a href="x">Tom & 'Jerry'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn renders_escaped_agents_and_workflows() {
        let page = render(
            &[["a<1>".into(), "Agent & co".into(), "says \"hi\"".into()]],
            &[],
        );
        assert!(page.contains("<code>a&lt;1&gt;</code>"), "{page}");
        assert!(page.contains("Agent &amp; co"));
        assert!(page.contains("says &quot;hi&quot;"));
        assert!(!page.contains("a<1>"));
        assert!(page.contains("No workflows are registered."));
        assert!(page.contains("href=\"/ui\"") && page.contains("href=\"/doc\""));
        assert!(page.contains("href=\"/console\""));
        assert!(page.contains(env!("CARGO_PKG_VERSION")));
    }
}
