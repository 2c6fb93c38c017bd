//! Calls out of a definition (`call: http`), under the outbound policy: which hosts a
//! definition may reach (`AGENTRY_OUTBOUND_ALLOW`: hosts or CIDR blocks; by default every
//! address except link-local ones and the cloud metadata services). The policy is checked on
//! every address a name resolves to (so a name cannot be re-pointed at a refused address) and on
//! every redirect.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use serde_json::{Map, Value, json};

use crate::error::{DslError, ErrorType};
use crate::expr;
use crate::model::{Authentication, Endpoint, HttpCall, HttpOutput};
use crate::run::Stop;

/// How long one outbound request may take when the task sets no timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The most bytes of a response body a call reads.
pub const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;
/// The most redirects a call follows.
const MAX_REDIRECTS: usize = 10;

/// Which addresses outbound calls may reach.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// `None`: everything but link-local and metadata addresses. `Some`: only these.
    allow: Option<Vec<Allowed>>,
}

#[derive(Debug, Clone)]
enum Allowed {
    Host(String),
    Net(IpNet),
}

impl Policy {
    /// The policy of `AGENTRY_OUTBOUND_ALLOW`'s value: comma-separated hosts (`api.example.com`)
    /// and CIDR blocks (`10.0.0.0/8`, `127.0.0.1/32`); empty: the default.
    pub fn parse(spec: &str) -> Result<Policy, String> {
        let items: Vec<&str> = spec
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if items.is_empty() {
            return Ok(Policy::default());
        }
        let allow = items
            .into_iter()
            .map(|item| {
                if let Ok(net) = item.parse::<IpNet>() {
                    Ok(Allowed::Net(net))
                } else if let Ok(ip) = item.parse::<IpAddr>() {
                    Ok(Allowed::Net(IpNet::from(ip)))
                } else if item
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
                {
                    Ok(Allowed::Host(item.to_ascii_lowercase()))
                } else {
                    Err(format!("{item} is neither a host name nor a CIDR block"))
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Policy { allow: Some(allow) })
    }

    /// Whether a request to `host` (as the URL names it) may connect to `ip`: by default any
    /// address but link-local and metadata ones; with an allow list, a listed host (at any
    /// address but those) or an address in a listed block (a metadata address only when listed
    /// as itself).
    pub fn allows(&self, host: &str, ip: IpAddr) -> bool {
        let refused = is_metadata_or_link_local(ip);
        match &self.allow {
            None => !refused,
            Some(list) => list.iter().any(|a| match a {
                Allowed::Host(h) => h.eq_ignore_ascii_case(host) && !refused,
                Allowed::Net(n) => {
                    n.contains(&ip) && (!refused || n.prefix_len() == n.max_prefix_len())
                }
            }),
        }
    }
}

/// Link-local addresses (169.254.0.0/16, fe80::/10) and the metadata services
/// (169.254.169.254, fd00:ec2::254, 100.100.100.200).
fn is_metadata_or_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local() || v4.octets() == [100, 100, 100, 200],
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_metadata_or_link_local(IpAddr::V4(v4));
            }
            (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6
                    == "fd00:ec2::254"
                        .parse::<std::net::Ipv6Addr>()
                        .expect("an address")
        }
    }
}

/// Whether a URL's host passes the policy when it is an address (a name is checked by the
/// resolver, on each address it resolves to).
fn literal_allowed(policy: &Policy, host: &str) -> bool {
    match host.trim_matches(['[', ']']).parse::<IpAddr>() {
        Ok(ip) => policy.allows(host, ip),
        Err(_) => true,
    }
}

/// A resolver that drops the addresses the policy refuses.
struct Guarded(Policy);

impl reqwest::dns::Resolve for Guarded {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.0.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|a| policy.allows(&host, a.ip()))
                .collect();
            if addrs.is_empty() {
                return Err(format!("{host}: no address the outbound policy allows").into());
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The most characters of the events sink's URL (`AGENTRY_EVENTS_SINK`).
pub const MAX_SINK_URL: usize = 2048;

/// The events sink setting (`AGENTRY_EVENTS_SINK`): an absolute http(s) URL with a host.
pub fn parse_sink(s: &str) -> Result<String, String> {
    if s.len() > MAX_SINK_URL {
        return Err(format!("at most {MAX_SINK_URL} characters"));
    }
    let url = reqwest::Url::parse(s).map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err("an http(s) URL with a host, e.g. https://events.example.com/in".into());
    }
    Ok(s.to_owned())
}

/// The outbound HTTP client of definitions.
pub struct Outbound {
    /// Built at the first call (a server whose definitions never call out never loads the TLS
    /// roots).
    client: std::sync::OnceLock<Result<reqwest::Client, String>>,
    policy: Policy,
    /// The OpenAPI documents read so far, by URI (`call: openapi`).
    pub(crate) documents: crate::openapi::Documents,
    /// What `call: a2a` and `call: mcp` keep: agent cards, whether commands may run.
    pub(crate) protocols: crate::protocols::State,
}

impl std::fmt::Debug for Outbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbound")
            .field("policy", &self.policy)
            .finish()
    }
}

impl Outbound {
    pub fn new(policy: Policy) -> Result<Outbound, String> {
        Ok(Outbound {
            client: std::sync::OnceLock::new(),
            policy,
            documents: Default::default(),
            protocols: Default::default(),
        })
    }

    /// The client, built at the first call.
    fn client(&self) -> Result<&reqwest::Client, DslError> {
        self.client
            .get_or_init(|| self.build_client())
            .as_ref()
            .map_err(|e| {
                DslError::standard(
                    ErrorType::Configuration,
                    "Configuration Error",
                    format!("the outbound HTTP client could not be made: {e}"),
                )
            })
    }

    fn build_client(&self) -> Result<reqwest::Client, String> {
        let policy = self.policy.clone();
        let redirect_policy = policy.clone();
        reqwest::Client::builder()
            .dns_resolver(Arc::new(Guarded(policy.clone())))
            .redirect(reqwest::redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() >= MAX_REDIRECTS {
                    return attempt.error("too many redirects");
                }
                let ok = attempt
                    .url()
                    .host_str()
                    .is_some_and(|h| literal_allowed(&redirect_policy, h));
                if ok {
                    attempt.follow()
                } else {
                    attempt.error("the outbound policy refuses the redirect's host")
                }
            }))
            .timeout(DEFAULT_TIMEOUT)
            .user_agent(concat!("agentry/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| e.to_string())
    }

    /// Checks a URL against the policy before a request.
    fn check_url(&self, url: &reqwest::Url) -> Result<(), DslError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(DslError::standard(
                ErrorType::Configuration,
                "Configuration Error",
                format!("{} is not an http(s) URL", url),
            ));
        }
        let host = url.host_str().unwrap_or_default();
        if !literal_allowed(&self.policy, host) {
            return Err(DslError::standard(
                ErrorType::Authorization,
                "Outbound Call Refused",
                format!("the outbound policy (AGENTRY_OUTBOUND_ALLOW) refuses {host}"),
            ));
        }
        Ok(())
    }

    /// Runs a `call: http`: its raw output as `output` asks.
    pub(crate) async fn http(
        &self,
        call: &HttpCall,
        input: &Value,
        args: &crate::run::Args<'_>,
        idempotency_key: &str,
    ) -> Result<Value, Stop> {
        let refs = crate::run::refs(args);
        let render = |t: &expr::Template| {
            t.eval(input, &refs)
                .map_err(|e| DslError::expression(e.to_string()))
        };
        let uri = match &call.endpoint {
            Endpoint::UriTemplate(t) => {
                expr::expand_uri_template(t, input).map_err(DslError::expression)?
            }
            Endpoint::Expression(e) => match e.eval(input, &refs) {
                Ok(Value::String(s)) => s,
                Ok(other) => {
                    return Err(DslError::expression(format!(
                        "the endpoint is not a string: {other}"
                    ))
                    .into());
                }
                Err(e) => return Err(DslError::expression(e.to_string()).into()),
            },
        };
        let mut request = Request::new(&call.method, &uri)?;
        if let Some(q) = &call.query
            && let Value::Object(m) = render(q)?
        {
            for (k, v) in m {
                request.query.push((k, scalar(&v)));
            }
        }
        if let Some(h) = &call.headers
            && let Value::Object(m) = render(h)?
        {
            for (k, v) in m {
                request.headers.push((k, scalar(&v)));
            }
        }
        request.auth = match &call.auth {
            Some(Authentication::Basic { username, password }) => Some(Credentials::Basic {
                username: scalar(&render(username)?),
                password: scalar(&render(password)?),
            }),
            Some(Authentication::Bearer { token }) => Some(Credentials::Bearer {
                token: scalar(&render(token)?),
            }),
            None => None,
        };
        if let Some(b) = &call.body {
            request.body = Some(render(b)?);
        }
        request.output = call.output;
        request.redirect = call.redirect;
        Ok(self.send(request, idempotency_key).await?)
    }

    /// Sends one request under the policy: its raw output as `request.output` asks, or the
    /// DSL's error (`communication` with the status of an error answer, `timeout`,
    /// `authorization` for a refused address, `configuration` for a bad URL).
    pub(crate) async fn send(
        &self,
        request: Request,
        idempotency_key: &str,
    ) -> Result<Value, DslError> {
        let (method, output, redirect) = (request.method.clone(), request.output, request.redirect);
        let (response, url, sent_headers) = self.open(request, idempotency_key).await?;
        let status = response.status();
        let headers: Map<String, Value> = response
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), json!(v.to_str().unwrap_or_default())))
            .collect();
        let is_json = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.contains("json"));
        let bytes = read_limited(response).await?;
        let content = if is_json {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| json!(String::from_utf8_lossy(&bytes)))
        } else {
            json!(String::from_utf8_lossy(&bytes))
        };
        let refused = status.is_client_error()
            || status.is_server_error()
            || (status.is_redirection() && !redirect);
        if refused {
            let mut e = DslError::communication(
                Some(status.as_u16()),
                format!(
                    "{method} {url} answered {status}: {}",
                    clip(&String::from_utf8_lossy(&bytes), MAX_DETAIL_BODY)
                ),
            );
            e.title = Some(
                status
                    .canonical_reason()
                    .unwrap_or("Communication Error")
                    .to_owned(),
            );
            return Err(e);
        }
        Ok(match output {
            HttpOutput::Content => content,
            HttpOutput::Raw => json!(base64_encode(&bytes)),
            HttpOutput::Response => json!({
                "request": {"method": method.as_str(), "uri": url.as_str(), "headers": sent_headers},
                "statusCode": status.as_u16(),
                "headers": headers,
                "content": content,
            }),
        })
    }

    /// Sends one request under the policy and gives its response as it comes, whatever its
    /// status (the body unread), with the URL sent to and the headers added: the DSL's error
    /// when it cannot be sent (`timeout`, `communication`, `authorization` for a refused
    /// address, `configuration` for a bad URL).
    pub(crate) async fn open(
        &self,
        request: Request,
        idempotency_key: &str,
    ) -> Result<(reqwest::Response, reqwest::Url, Map<String, Value>), DslError> {
        let Request {
            method,
            mut url,
            query,
            headers: extra_headers,
            body,
            auth,
            timeout,
            ..
        } = request;
        if !query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (k, v) in &query {
                pairs.append_pair(k, v);
            }
        }
        self.check_url(&url)?;
        let mut builder = self
            .client()?
            .request(method.clone(), url.clone())
            .header("idempotency-key", idempotency_key);
        if let Some(t) = timeout {
            builder = builder.timeout(t);
        }
        let mut sent_headers = Map::new();
        for (k, v) in extra_headers {
            builder = builder.header(k.as_str(), v.as_str());
            sent_headers.insert(k, json!(v));
        }
        builder = match auth {
            Some(Credentials::Basic { username, password }) => {
                builder.basic_auth(username, Some(password))
            }
            Some(Credentials::Bearer { token }) => builder.bearer_auth(token),
            None => builder,
        };
        builder = match body {
            Some(Value::String(s)) => builder.body(s),
            Some(other) => builder.json(&other),
            None => builder,
        };
        let response = builder.send().await.map_err(|e| {
            if e.is_timeout() {
                DslError::timeout(format!("{method} {url}: {e}"))
            } else {
                DslError::communication(None, format!("{method} {url}: {e}"))
            }
        })?;
        Ok((response, url, sent_headers))
    }
}

/// One outbound request, before it is sent ([`Outbound::send`]).
#[derive(Debug)]
pub(crate) struct Request {
    pub method: reqwest::Method,
    pub url: reqwest::Url,
    /// Query parameters added to the URL's own.
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
    /// A string is sent as it is, anything else as JSON.
    pub body: Option<Value>,
    pub auth: Option<Credentials>,
    pub output: HttpOutput,
    /// Whether a 3xx answer is an answer (not an error).
    pub redirect: bool,
    /// How long it may take, its body read included (none: [`DEFAULT_TIMEOUT`]).
    pub timeout: Option<Duration>,
}

impl Request {
    /// A request of `method` to `uri`, without headers, query or body.
    pub fn new(method: &str, uri: &str) -> Result<Request, DslError> {
        let url = reqwest::Url::parse(uri).map_err(|e| {
            DslError::standard(
                ErrorType::Configuration,
                "Configuration Error",
                format!("{uri}: {e}"),
            )
        })?;
        let method =
            reqwest::Method::from_bytes(method.to_ascii_uppercase().as_bytes()).map_err(|_| {
                DslError::standard(
                    ErrorType::Configuration,
                    "Configuration Error",
                    format!("{method} is not an HTTP method"),
                )
            })?;
        Ok(Request {
            method,
            url,
            query: Vec::new(),
            headers: Vec::new(),
            body: None,
            auth: None,
            output: HttpOutput::Content,
            redirect: false,
            timeout: None,
        })
    }
}

/// Credentials a request carries, rendered.
#[derive(Debug, Clone)]
pub(crate) enum Credentials {
    Basic { username: String, password: String },
    Bearer { token: String },
}

/// The body of a response, refused past [`MAX_RESPONSE_BYTES`].
async fn read_limited(mut response: reqwest::Response) -> Result<Vec<u8>, DslError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| DslError::communication(None, format!("reading the response: {e}")))?
    {
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(DslError::communication(
                None,
                format!("the response is larger than {MAX_RESPONSE_BYTES} bytes"),
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// How much of an error answer's body its error's `detail` quotes.
const MAX_DETAIL_BODY: usize = 300;

/// The first `most` characters of `text`, marked when cut.
pub(crate) fn clip(text: &str, most: usize) -> String {
    match text.char_indices().nth(most) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_owned(),
    }
}

/// A header or query value: a string as it is, anything else as its JSON.
pub(crate) fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn base64_encode(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_policy_refuses_metadata_and_link_local() {
        let p = Policy::default();
        for ip in [
            "169.254.169.254",
            "169.254.1.1",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:169.254.169.254",
        ] {
            assert!(!p.allows("h", ip.parse().unwrap()), "{ip}");
        }
        for ip in ["127.0.0.1", "10.1.2.3", "8.8.8.8", "::1"] {
            assert!(p.allows("h", ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn an_allow_list_allows_only_its_hosts_and_blocks() {
        let p = Policy::parse("api.example.com, 10.0.0.0/8").unwrap();
        assert!(p.allows("x", "10.2.3.4".parse().unwrap()));
        assert!(!p.allows("x", "11.2.3.4".parse().unwrap()));
        assert!(!p.allows("api.example.com", "169.254.169.254".parse().unwrap()));
        assert!(p.allows("API.example.com", "93.184.216.34".parse().unwrap()));
        assert!(
            Policy::parse("169.254.169.254")
                .unwrap()
                .allows("m", "169.254.169.254".parse().unwrap())
        );
        assert!(Policy::parse("not a host!").is_err());
    }

    #[test]
    fn base64_is_standard() {
        assert_eq!(base64_encode(b"hello"), "aGVsbG8=");
        assert_eq!(base64_encode(b"hi!"), "aGkh");
        assert_eq!(base64_encode(b""), "");
    }
}
