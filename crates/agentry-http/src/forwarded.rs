//! Where a request was sent: the scheme and host a client used to reach the server, and the
//! server's public URL.
//!
//! [`seen`] is the one reader of the forwarding headers (`Forwarded`, `X-Forwarded-Host`,
//! `X-Forwarded-Proto`): it believes them only when the connection comes from a trusted proxy
//! (`AGENTRY_TRUSTED_PROXIES`, none by default), and then only the nearest proxy's word (the
//! last element of `Forwarded`, the last value of an `X-Forwarded-*` list), a scheme of `http`
//! or `https` and a well-formed host; anything else is ignored. Otherwise the scheme is the
//! connection's and the host the request's own (`Host`, or the authority of an absolute
//! request target). The host guard ([`crate::hosts`]) checks that host, and the A2A card's URL
//! is built from it unless `AGENTRY_PUBLIC_URL` names the server's public address.

use std::net::IpAddr;

use actix_web::HttpRequest;
use actix_web::http::header::{self, HeaderMap};
use ipnet::IpNet;

use crate::hosts::HostPort;

/// The peers whose forwarding headers are believed: addresses and CIDR blocks
/// (`AGENTRY_TRUSTED_PROXIES`); none by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// Parses a comma list of IP addresses (`10.0.0.7`, `::1`) and CIDR blocks (`10.0.0.0/8`).
    pub fn parse_list(list: &str) -> Result<Self, String> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|item| {
                item.parse::<IpNet>()
                    .or_else(|_| item.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| format!("{item:?} is not an IP address or a CIDR block"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    /// Whether `peer` is one of them (an IPv4 address seen as IPv6, `::ffff:a.b.c.d`, is the
    /// IPv4 address).
    pub fn trusts(&self, peer: IpAddr) -> bool {
        let peer = peer.to_canonical();
        self.0.iter().any(|net| net.contains(&peer))
    }
}

/// The scheme and host a client used, as [`seen`] makes them out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// `http` or `https`.
    pub scheme: &'static str,
    /// `None` when the request names no host, or a malformed one.
    pub host: Option<HostPort>,
}

impl Seen {
    /// The port a host without one means: the scheme's.
    pub fn default_port(&self) -> u16 {
        if self.scheme == "https" { 443 } else { 80 }
    }
}

/// The scheme and host `req` was sent to: a trusted proxy's forwarded ones, else the
/// connection's scheme and the request's own host.
pub fn seen(req: &HttpRequest, trusted: &TrustedProxies) -> Seen {
    let own = Seen {
        scheme: if req.app_config().secure() {
            "https"
        } else {
            "http"
        },
        // An absolute request target's authority is the host (RFC 9112, 3.2.2), else `Host`.
        host: match req.uri().authority() {
            Some(authority) => HostPort::parse(authority.as_str()),
            None => header_text(req.headers(), header::HOST).and_then(HostPort::parse),
        },
    };
    if !req.peer_addr().is_some_and(|p| trusted.trusts(p.ip())) {
        return own;
    }
    let headers = req.headers();
    let forwarded = |param: &str, legacy: &str| {
        forwarded_param(headers, param).or_else(|| last_value(headers, legacy))
    };
    Seen {
        scheme: forwarded("proto", "x-forwarded-proto")
            .and_then(scheme)
            .unwrap_or(own.scheme),
        host: forwarded("host", "x-forwarded-host")
            .and_then(HostPort::parse)
            .or(own.host),
    }
}

fn header_text(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// `http` or `https`, whatever its case; nothing else is a scheme a URL of ours may have.
fn scheme(text: &str) -> Option<&'static str> {
    ["http", "https"]
        .into_iter()
        .find(|s| s.eq_ignore_ascii_case(text))
}

/// The last value of the comma list in header `name` (the nearest proxy's).
fn last_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let line = headers.get_all(name).last()?.to_str().ok()?;
    Some(line.rsplit(',').next()?.trim()).filter(|v| !v.is_empty())
}

/// `param` of the last element of `Forwarded` (RFC 7239: `for=...;host=...;proto=...`, elements
/// separated by commas, each added by one proxy), unquoted.
fn forwarded_param<'a>(headers: &'a HeaderMap, param: &str) -> Option<&'a str> {
    let element = last_value(headers, "forwarded")?;
    element.split(';').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case(param)
            .then(|| value.trim().trim_matches('"'))
    })
}

/// The server's public base URL (`AGENTRY_PUBLIC_URL`): `http` or `https`, a host, an optional
/// port and path, no user, query or fragment; kept without a trailing `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl {
    base: String,
    host: HostPort,
}

impl PublicUrl {
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = |why: &str| Err(format!("{text:?} is not a public URL: {why}"));
        let url = match url::Url::parse(text.trim()) {
            Ok(u) => u,
            Err(e) => return bad(&e.to_string()),
        };
        if !matches!(url.scheme(), "http" | "https") {
            return bad("the scheme must be http or https");
        }
        if !url.username().is_empty() || url.password().is_some() {
            return bad("it must not name a user");
        }
        if url.query().is_some() || url.fragment().is_some() {
            return bad("it must have no query and no fragment");
        }
        let Some(host) = url.host_str().and_then(HostPort::parse) else {
            return bad("it must name a host");
        };
        Ok(Self {
            base: url.as_str().trim_end_matches('/').to_owned(),
            // Its name, on whatever port a proxy in front of the server names.
            host: HostPort { port: None, ..host },
        })
    }

    /// `path` (starting with `/`) under the public URL.
    pub fn join(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Its host name, any port: a host the server answers for.
    pub fn host(&self) -> &HostPort {
        &self.host
    }
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    fn request(peer: &str, headers: &[(&str, &str)]) -> HttpRequest {
        let mut r = TestRequest::get()
            .uri("/a2a/assistant/.well-known/agent-card.json")
            .peer_addr(peer.parse().unwrap())
            .insert_header(("host", "127.0.0.1:3141"));
        for (k, v) in headers {
            r = r.append_header((*k, *v));
        }
        r.to_http_request()
    }

    fn shown(s: &Seen) -> String {
        format!(
            "{}://{}",
            s.scheme,
            s.host.as_ref().map(ToString::to_string).unwrap_or_default()
        )
    }

    #[test]
    fn forwarding_headers_count_only_from_a_trusted_proxy() {
        let trusted = TrustedProxies::parse_list("10.0.0.0/8, ::1").unwrap();
        let spoofed = [
            ("x-forwarded-host", "evil.example"),
            ("x-forwarded-proto", "https"),
            ("forwarded", "host=evil.example;proto=https"),
        ];
        let from_client = seen(&request("192.0.2.1:5000", &spoofed), &trusted);
        assert_eq!(shown(&from_client), "http://127.0.0.1:3141");
        let none = TrustedProxies::default();
        assert_eq!(
            shown(&seen(&request("10.1.2.3:5000", &spoofed), &none)),
            "http://127.0.0.1:3141"
        );

        // A trusted proxy: Forwarded first, then X-Forwarded-*, the nearest proxy's value.
        let proxy = "10.1.2.3:5000";
        let s = seen(&request(proxy, &spoofed), &trusted);
        assert_eq!(shown(&s), "https://evil.example");
        let chain = [
            ("x-forwarded-host", "first.example, api.example"),
            ("x-forwarded-proto", "http,HTTPS"),
        ];
        assert_eq!(
            shown(&seen(&request(proxy, &chain), &trusted)),
            "https://api.example"
        );
        let forwarded = [(
            "forwarded",
            "for=192.0.2.1;host=a.example, for=10.0.0.9;host=\"API.example:8443\";proto=https",
        )];
        assert_eq!(
            shown(&seen(&request(proxy, &forwarded), &trusted)),
            "https://api.example:8443"
        );
        // An IPv6 peer, and IPv4 seen as IPv6.
        assert_eq!(
            seen(&request("[::1]:5000", &spoofed), &trusted).scheme,
            "https"
        );
        assert!(trusted.trusts("::ffff:10.0.0.1".parse().unwrap()));

        // What no URL of ours may hold is ignored: the request's own scheme and host stay.
        let hostile = [
            ("forwarded", "host=evil.example/path;proto=javascript"),
            ("x-forwarded-proto", "javascript"),
        ];
        assert_eq!(
            shown(&seen(&request(proxy, &hostile), &trusted)),
            "http://127.0.0.1:3141"
        );
        let userinfo = [("x-forwarded-host", "user@evil.example")];
        assert_eq!(
            shown(&seen(&request(proxy, &userinfo), &trusted)),
            "http://127.0.0.1:3141"
        );
    }

    #[test]
    fn trusted_proxies_parse_strictly() {
        assert!(TrustedProxies::parse_list("").unwrap().0.is_empty());
        let t = TrustedProxies::parse_list("127.0.0.1, 10.0.0.0/8,fd00::/8").unwrap();
        assert!(t.trusts("127.0.0.1".parse().unwrap()));
        assert!(!t.trusts("127.0.0.2".parse().unwrap()));
        assert!(t.trusts("fd12::1".parse().unwrap()));
        for bad in ["*", "10.0.0.0/33", "proxy.example", "10.0.0"] {
            assert!(TrustedProxies::parse_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_public_url_is_http_or_https_and_nothing_more() {
        let u = PublicUrl::parse("https://Agents.Example.com/base/").unwrap();
        assert_eq!(
            u.join("/a2a/x"),
            "https://agents.example.com/base/a2a/x",
            "lower-cased, without its trailing slash"
        );
        assert_eq!(u.host().to_string(), "agents.example.com");
        let with_port = PublicUrl::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(with_port.join("/a2a/x"), "http://127.0.0.1:8080/a2a/x");
        for bad in [
            "javascript://evil.example/%0aalert(1)",
            "ftp://a.example",
            "https://a.example/?q=1",
            "https://a.example/#f",
            "https://user:pw@a.example",
            "agents.example.com",
            "file:///etc/passwd",
            "",
        ] {
            assert!(PublicUrl::parse(bad).is_err(), "{bad}");
        }
    }
}
