//! The hosts the server answers for: a guard against DNS rebinding. A web page on
//! `evil.example` whose name is made to resolve to `127.0.0.1` reaches a server on the user's
//! machine with its own origin, so the origin check passes; what gives it away is the host it
//! names. Every request but the probes' is refused (421 `host_not_allowed`) unless its host
//! (as [`crate::forwarded::seen`] makes it out) is one of:
//!
//! - `AGENTRY_ALLOWED_HOSTS` when set: `host` (any port) or `host:port`, or `*` for any host;
//! - else, bound to a loopback address: `localhost`, `127.0.0.1`, `[::1]` and the bound
//!   address, each with the bound port, and the host of `AGENTRY_PUBLIC_URL`;
//! - else (bound to `0.0.0.0`, say, in a container): any host, with a warning at start.
//!
//! The probes (`/healthz`, `/readyz`) answer whatever the host: an orchestrator asks them by
//! the pod's address, and they tell a page nothing worth a rebinding.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use actix_web::body::BoxBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;

use crate::error::{ApiError, Code};
use crate::forwarded::{PublicUrl, TrustedProxies, seen};

/// A host as a request names it: a DNS name, an IPv4 address or a bracketed IPv6 address
/// (lower-cased), and a port when one is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    pub name: String,
    pub port: Option<u16>,
}

impl HostPort {
    /// `host` or `host:port`; `None` for anything else (a user, a path, a bad character, a name
    /// longer than DNS allows).
    pub fn parse(text: &str) -> Option<Self> {
        let (name, port) = match text.rsplit_once(':') {
            // `[::1]` alone has colons but no port.
            Some((name, port)) if !port.contains(']') => (name, Some(port.parse().ok()?)),
            _ => (text, None),
        };
        let well_formed = match name.strip_prefix('[') {
            Some(v6) => v6
                .strip_suffix(']')
                .is_some_and(|a| a.parse::<Ipv6Addr>().is_ok()),
            None => {
                (1..=253).contains(&name.len())
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
            }
        };
        well_formed.then(|| Self {
            name: name.to_ascii_lowercase(),
            port,
        })
    }

    fn of_address(ip: IpAddr, port: u16) -> Self {
        let name = match ip {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => format!("[{v6}]"),
        };
        Self {
            name,
            port: Some(port),
        }
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// The hosts the server answers for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedHosts {
    /// Any host (`*`, or no setting and a server bound beyond loopback).
    Any,
    /// These, each on its port or, without one, on any.
    Only(Vec<HostPort>),
}

impl AllowedHosts {
    /// Parses a comma list (`AGENTRY_ALLOWED_HOSTS`): `agents.example.com`, `localhost:3141`,
    /// `[::1]:3141`, or `*` alone for any host.
    pub fn parse_list(list: &str) -> Result<Self, String> {
        let items: Vec<&str> = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        match items.as_slice() {
            [] => Err("expected host names, or * for any host".into()),
            ["*"] => Ok(Self::Any),
            _ => items
                .iter()
                .map(|item| {
                    HostPort::parse(item).ok_or_else(|| {
                        format!("{item:?} is not a host: expected host or host:port, or * alone")
                    })
                })
                .collect::<Result<_, _>>()
                .map(Self::Only),
        }
    }

    /// The hosts of a server bound to `addr` without the setting: the loopback names on the
    /// bound port when the address is a loopback one (and the public URL's host), else any.
    pub fn by_address(addr: SocketAddr, public_url: Option<&PublicUrl>) -> Self {
        if !addr.ip().is_loopback() {
            return Self::Any;
        }
        let port = addr.port();
        let mut hosts: Vec<HostPort> = ["localhost", "127.0.0.1", "[::1]"]
            .into_iter()
            .map(|name| HostPort {
                name: name.to_owned(),
                port: Some(port),
            })
            .collect();
        let bound = HostPort::of_address(addr.ip(), port);
        if !hosts.contains(&bound) {
            hosts.push(bound);
        }
        hosts.extend(public_url.map(|u| u.host().clone()));
        Self::Only(hosts)
    }

    /// Whether a request for `host` is answered; a host without a port is on `default_port`
    /// (the scheme's).
    pub fn allows(&self, host: &HostPort, default_port: u16) -> bool {
        match self {
            Self::Any => true,
            Self::Only(hosts) => hosts.iter().any(|h| {
                h.name == host.name
                    && h.port
                        .is_none_or(|port| port == host.port.unwrap_or(default_port))
            }),
        }
    }
}

/// What the guard needs: the hosts, and whose forwarded host to believe.
#[derive(Debug, Clone)]
pub struct HostGuard {
    pub hosts: AllowedHosts,
    pub trusted: TrustedProxies,
}

/// The middleware: refuses (421) a request for a host the server does not answer for.
pub async fn refuse_foreign_host(
    guard: Arc<HostGuard>,
    req: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    if guard.hosts == AllowedHosts::Any || crate::health::PROBES.contains(&req.path()) {
        return next.call(req).await;
    }
    let seen = seen(req.request(), &guard.trusted);
    let refusal = match &seen.host {
        Some(host) if guard.hosts.allows(host, seen.default_port()) => None,
        Some(host) => Some(format!(
            "Misdirected request: this server does not answer for host {host}"
        )),
        None => Some("Misdirected request: the request names no valid host".to_owned()),
    };
    let Some(message) = refusal else {
        return next.call(req).await;
    };
    tracing::info!(method = %req.method(), path = %req.path(), reason = %message, "request for another host refused");
    let resp =
        actix_web::ResponseError::error_response(&ApiError::new(Code::HostNotAllowed, message));
    Ok(req.into_response(resp))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(s: &str) -> HostPort {
        HostPort::parse(s).unwrap_or_else(|| panic!("{s}"))
    }

    #[test]
    fn hosts_parse_strictly() {
        assert_eq!(host("LocalHost:3141").to_string(), "localhost:3141");
        assert_eq!(host("[::1]").to_string(), "[::1]");
        assert_eq!(host("[::1]:80").port, Some(80));
        assert_eq!(host("api.example.com").port, None);
        for bad in [
            "",
            "a b",
            "user@evil.example",
            "evil.example/x",
            "evil.example:",
            "evil.example:99999",
            "[::1",
            "[evil]:80",
            "::1",
            &"a".repeat(254),
        ] {
            assert_eq!(HostPort::parse(bad), None, "{bad}");
        }
        assert_eq!(AllowedHosts::parse_list(" * ").unwrap(), AllowedHosts::Any);
        for bad in [
            "",
            " , ",
            "*, a.example",
            "https://a.example",
            "a.example/x",
        ] {
            assert!(AllowedHosts::parse_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_bare_host_matches_any_port_and_a_port_only_itself() {
        let allowed = AllowedHosts::parse_list("api.example.com, localhost:3141").unwrap();
        assert!(allowed.allows(&host("API.example.com"), 80));
        assert!(allowed.allows(&host("api.example.com:8443"), 80));
        assert!(allowed.allows(&host("localhost:3141"), 80));
        assert!(!allowed.allows(&host("localhost:3142"), 80));
        assert!(!allowed.allows(&host("localhost"), 80));
        assert!(!allowed.allows(&host("evil.example.com"), 80));
        assert!(!allowed.allows(&host("api.example.com.evil.example"), 80));
        let on_80 = AllowedHosts::parse_list("localhost:80").unwrap();
        assert!(on_80.allows(&host("localhost"), 80), "no port is port 80");
        assert!(!on_80.allows(&host("localhost"), 443));
    }

    #[test]
    fn loopback_servers_answer_the_loopback_names_on_their_port() {
        let addr: SocketAddr = "127.0.0.1:3141".parse().unwrap();
        let hosts = AllowedHosts::by_address(addr, None);
        for ok in ["localhost:3141", "127.0.0.1:3141", "[::1]:3141"] {
            assert!(hosts.allows(&host(ok), 80), "{ok}");
        }
        for refused in [
            "localhost:8080",
            "evil.example.com:3141",
            "localhost",
            "0.0.0.0:3141",
        ] {
            assert!(!hosts.allows(&host(refused), 80), "{refused}");
        }
        let other_loopback = AllowedHosts::by_address("127.0.0.2:9".parse().unwrap(), None);
        assert!(other_loopback.allows(&host("127.0.0.2:9"), 80));
        let public = PublicUrl::parse("https://agents.example.com").unwrap();
        let behind_proxy = AllowedHosts::by_address(addr, Some(&public));
        assert!(behind_proxy.allows(&host("agents.example.com"), 443));
        for anywhere in ["0.0.0.0:3141", "[::]:3141", "10.0.0.5:3141"] {
            assert_eq!(
                AllowedHosts::by_address(anywhere.parse().unwrap(), None),
                AllowedHosts::Any
            );
        }
    }
}
