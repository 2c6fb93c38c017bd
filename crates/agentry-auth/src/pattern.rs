//! Route patterns (`METHOD /path`) and the rules deciding whether a request needs a token.

use std::fmt;
use std::str::FromStr;

use crate::error::AuthConfigError;

pub type PatternError = AuthConfigError;

/// Whether a route needs a token once a provider is configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    Public,
    Protected,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    /// `:name`, `{name}` or `*` in the middle: exactly one segment.
    Any,
}

/// `METHOD /path`: the method (`*`, `ANY` or `ALL` for every method; `GET` also covers
/// `HEAD`; a bare `/path` means every method), then the path, whose segments are literals,
/// parameters (`:id` or `{id}`, one segment each) and, last, an optional `/*` that matches
/// every path below (at least one more segment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutePattern {
    method: Option<String>,
    segments: Vec<Segment>,
    rest: bool,
    text: String,
}

impl RoutePattern {
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        let err = |reason: &str| AuthConfigError::Pattern {
            pattern: text.to_owned(),
            reason: reason.to_owned(),
        };
        let trimmed = text.trim();
        let (method, path) = match trimmed.split_once(char::is_whitespace) {
            Some((m, p)) => (Some(m), p.trim()),
            None => (None, trimmed),
        };
        let method = match method {
            None | Some("*") => None,
            Some(m) if m.eq_ignore_ascii_case("any") || m.eq_ignore_ascii_case("all") => None,
            Some(m) if m.chars().all(|c| c.is_ascii_alphabetic()) => Some(m.to_ascii_uppercase()),
            Some(_) => return Err(err("the method must be a word such as GET, or *")),
        };
        if !path.starts_with('/') {
            return Err(err("the path must start with /"));
        }
        let mut parts: Vec<&str> = split_path(path).collect();
        let rest = parts.last() == Some(&"*");
        if rest {
            parts.pop();
        }
        let segments = parts
            .into_iter()
            .map(|p| {
                if p == "*" || p.starts_with(':') || (p.starts_with('{') && p.ends_with('}')) {
                    Segment::Any
                } else {
                    Segment::Literal(p.to_owned())
                }
            })
            .collect();
        Ok(RoutePattern {
            method,
            segments,
            rest,
            text: trimmed.to_owned(),
        })
    }

    /// Parses a comma-separated list (as `AGENTRY_PUBLIC_ROUTES`), skipping empty items.
    pub fn parse_list(list: &str) -> Result<Vec<Self>, PatternError> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(Self::parse)
            .collect()
    }

    pub fn matches(&self, method: &str, path: &str) -> bool {
        if let Some(m) = &self.method {
            let same = m.eq_ignore_ascii_case(method)
                || (m == "GET" && method.eq_ignore_ascii_case("HEAD"));
            if !same {
                return false;
            }
        }
        // `path` is the routed path (decoded, without a query string): it is compared as it is,
        // never re-split at a `?` or `#` that a decoded `%3F`/`%23` put inside a segment.
        let mut parts = split_path(path);
        for seg in &self.segments {
            match (seg, parts.next()) {
                (_, None) => return false,
                (Segment::Literal(l), Some(p)) if l != p => return false,
                _ => {}
            }
        }
        match parts.next() {
            None => !self.rest,
            Some(_) => self.rest,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// The non-empty segments: `/a//b/` is `a`, `b` (a trailing slash does not dodge a pattern).
fn split_path(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|s| !s.is_empty())
}

impl FromStr for RoutePattern {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for RoutePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Which requests need a token. Decided in this order:
/// 1. a public pattern matches (the provider's `publicRoutes`, the host's, configuration):
///    public, whatever else says so;
/// 2. a protected pattern matches (the built-in protected set, the host's): protected;
/// 3. otherwise the default: public, or protected when the host asked for default-private.
#[derive(Debug, Clone, Default)]
pub struct RouteRules {
    public: Vec<RoutePattern>,
    protected: Vec<RoutePattern>,
    default_private: bool,
    /// Routes public by definition even when default-private (the built-in public set).
    always_public: Vec<RoutePattern>,
}

impl RouteRules {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn public(mut self, p: RoutePattern) -> Self {
        self.public.push(p);
        self
    }

    pub fn protected(mut self, p: RoutePattern) -> Self {
        self.protected.push(p);
        self
    }

    /// Routes that are public unless a protected pattern names them, even when default-private.
    pub fn public_by_default(mut self, p: RoutePattern) -> Self {
        self.always_public.push(p);
        self
    }

    pub fn default_private(mut self, yes: bool) -> Self {
        self.default_private = yes;
        self
    }

    pub fn extend_public(&mut self, patterns: impl IntoIterator<Item = RoutePattern>) {
        self.public.extend(patterns);
    }

    pub fn access(&self, method: &str, path: &str) -> Access {
        let any = |ps: &[RoutePattern]| ps.iter().any(|p| p.matches(method, path));
        if any(&self.public) {
            Access::Public
        } else if any(&self.protected) {
            Access::Protected
        } else if !self.default_private || any(&self.always_public) {
            Access::Public
        } else {
            Access::Protected
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> RoutePattern {
        RoutePattern::parse(s).unwrap()
    }

    #[test]
    fn literal_params_and_methods() {
        let text = p("POST /agents/:id/text");
        assert!(text.matches("POST", "/agents/a1/text"));
        assert!(text.matches("post", "/agents/a1/text/"));
        assert!(!text.matches("GET", "/agents/a1/text"));
        assert!(!text.matches("POST", "/agents/a1"));
        assert!(!text.matches("POST", "/agents/a1/text/more"));
        // A decoded `%3F` or `%23` is part of its segment, not the start of a query.
        assert!(p("POST /agents/{id}/text").matches("POST", "/agents/x?/text"));
        assert!(p("POST /agents/{id}/text").matches("POST", "/agents/x#y/text"));
        assert!(!p("POST /agents/{id}").matches("POST", "/agents/x?/text"));
        assert!(p("GET /agents").matches("HEAD", "/agents"));
        assert!(p("* /agents").matches("DELETE", "/agents"));
        assert!(p("/agents").matches("PUT", "/agents"));
        assert!(p("ANY /agents").matches("PATCH", "/agents"));
        assert!(p("GET /").matches("GET", "/"));
        assert!(!p("GET /").matches("GET", "/x"));
    }

    #[test]
    fn trailing_wildcard() {
        let hooks = p("POST /webhooks/*");
        assert!(hooks.matches("POST", "/webhooks/stripe"));
        assert!(hooks.matches("POST", "/webhooks/a/b/c"));
        assert!(!hooks.matches("POST", "/webhooks"));
        assert!(!hooks.matches("POST", "/webhooksx/a"));
        assert!(!hooks.matches("GET", "/webhooks/a"));
        assert!(p("GET /ws/*").matches("GET", "/ws/executions/e1"));
        assert!(p("POST /workflows/*/execute").matches("POST", "/workflows/w/execute"));
    }

    #[test]
    fn bad_patterns() {
        assert!(RoutePattern::parse("GET agents").is_err());
        assert!(RoutePattern::parse("G=T /agents").is_err());
        assert!(RoutePattern::parse("").is_err());
        let list = RoutePattern::parse_list(" GET /a , ,POST /b/* ").unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[1].as_str(), "POST /b/*");
        let e = RoutePattern::parse_list("GET /a,nope").unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
    }

    #[test]
    fn rules_order() {
        let rules = RouteRules::new()
            .protected(p("POST /agents/{id}/text"))
            .protected(p("POST /api/*"))
            .public(p("POST /agents/open/text"));
        assert_eq!(rules.access("POST", "/agents/a/text"), Access::Protected);
        assert_eq!(rules.access("POST", "/agents/open/text"), Access::Public);
        assert_eq!(rules.access("POST", "/api/x"), Access::Protected);
        assert_eq!(rules.access("GET", "/api/x"), Access::Public);
        let private = rules
            .clone()
            .public_by_default(p("GET /agents"))
            .default_private(true);
        assert_eq!(private.access("GET", "/api/x"), Access::Protected);
        assert_eq!(private.access("GET", "/agents"), Access::Public);
        assert_eq!(private.access("POST", "/agents/open/text"), Access::Public);
    }
}
