/// What a provider may look at in a request: an owned snapshot, so that providers need no web
/// framework and may be awaited anywhere.
#[derive(Debug, Clone, Default)]
pub struct AuthRequest {
    /// Upper-case method, e.g. `POST`.
    pub method: String,
    /// The path as routed (no query string).
    pub path: String,
    /// The raw query string, without `?`.
    pub query: String,
    /// Header names in lower case, with their values.
    pub headers: Vec<(String, String)>,
}

impl AuthRequest {
    pub fn new(method: impl Into<String>, path: impl Into<String>) -> Self {
        Self {
            method: method.into().to_ascii_uppercase(),
            path: path.into(),
            ..Self::default()
        }
    }

    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_ascii_lowercase(), value.into()));
        self
    }

    pub fn with_query(mut self, query: impl Into<String>) -> Self {
        self.query = query.into();
        self
    }

    /// The first value of a header (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// A query parameter, percent-decoded (`+` is a space).
    pub fn query_param(&self, name: &str) -> Option<String> {
        self.query.split('&').find_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k) == name).then(|| percent_decode(v))
        })
    }

    /// A cookie's value from the `Cookie` headers.
    pub fn cookie(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("cookie"))
            .flat_map(|(_, v)| v.split(';'))
            .find_map(|c| {
                let (k, v) = c.trim().split_once('=')?;
                (k.trim() == name).then(|| v.trim().trim_matches('"').to_owned())
            })
    }
}

fn percent_decode(s: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let escaped = (b == b'%')
            .then(|| Some(hex(*bytes.get(i + 1)?)? * 16 + hex(*bytes.get(i + 2)?)?))
            .flatten();
        match (b, escaped) {
            (_, Some(decoded)) => {
                out.push(decoded);
                i += 2;
            }
            (b'+', _) => out.push(b' '),
            (b, _) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_queries_and_cookies() {
        let r = AuthRequest::new("get", "/x")
            .with_header("Authorization", "Bearer abc")
            .with_header("Cookie", "a=1; session=tok%2B; b=\"q\"")
            .with_query("token=a%20b+c&x=1&flag");
        assert_eq!(r.method, "GET");
        assert_eq!(r.header("authorization"), Some("Bearer abc"));
        assert_eq!(r.query_param("token").as_deref(), Some("a b c"));
        assert_eq!(r.query_param("flag").as_deref(), Some(""));
        assert_eq!(r.query_param("nope"), None);
        assert_eq!(r.cookie("session").as_deref(), Some("tok%2B"));
        assert_eq!(r.cookie("b").as_deref(), Some("q"));
        assert_eq!(r.cookie("c"), None);
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%41"), "%zzA");
    }
}
