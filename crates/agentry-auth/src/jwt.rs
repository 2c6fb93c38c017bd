//! The built-in JWT provider.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use async_trait::async_trait;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Value, json};

use crate::error::{AuthConfigError, AuthError};
use crate::pattern::RoutePattern;
use crate::provider::AuthProvider;
use crate::request::AuthRequest;
use crate::user::User;

/// How a verified payload becomes the user object.
pub type MapUser = Arc<dyn Fn(&Value) -> User + Send + Sync>;

/// The documented mapping: `id` from `sub`, `email`, `name`, `roles` (default empty) and `tier`
/// (default `free`).
pub fn default_map_user(payload: &Value) -> User {
    let sub = match payload.get("sub") {
        Some(Value::Number(n)) => Value::String(n.to_string()),
        Some(v @ Value::String(_)) => v.clone(),
        _ => Value::Null,
    };
    let roles = match payload.get("roles") {
        Some(Value::Array(a)) => Value::Array(a.clone()),
        Some(Value::String(s)) => json!([s]),
        _ => json!([]),
    };
    User::new(json!({
        "id": sub,
        "email": payload.get("email").cloned().unwrap_or(Value::Null),
        "name": payload.get("name").cloned().unwrap_or(Value::Null),
        "roles": roles,
        "tier": payload.get("tier").cloned().filter(|t| !t.is_null()).unwrap_or_else(|| json!("free")),
    }))
}

/// The shortest HMAC secret the server accepts without a warning (RFC 7518 section 3.2: a key of
/// at least the hash's size, 256 bits for HS256).
pub const MIN_SECRET_BYTES: usize = 32;

/// The verification key: a shared secret (HMAC: HS256/384/512) or an RSA public key in PEM
/// (RS256/384/512, PS256/384/512).
#[derive(Clone)]
pub enum JwtKey {
    Secret(Vec<u8>),
    RsaPublicPem(Vec<u8>),
}

impl JwtKey {
    pub fn secret(s: impl AsRef<[u8]>) -> Self {
        JwtKey::Secret(s.as_ref().to_vec())
    }

    fn describe(&self) -> &'static str {
        match self {
            JwtKey::Secret(_) => "a secret (HMAC)",
            JwtKey::RsaPublicPem(_) => "an RSA public key",
        }
    }

    fn fits(&self, alg: Algorithm) -> bool {
        use Algorithm as A;
        match self {
            JwtKey::Secret(_) => matches!(alg, A::HS256 | A::HS384 | A::HS512),
            JwtKey::RsaPublicPem(_) => matches!(
                alg,
                A::RS256 | A::RS384 | A::RS512 | A::PS256 | A::PS384 | A::PS512
            ),
        }
    }

    fn default_algorithm(&self) -> Algorithm {
        match self {
            JwtKey::Secret(_) => Algorithm::HS256,
            JwtKey::RsaPublicPem(_) => Algorithm::RS256,
        }
    }
}

impl fmt::Debug for JwtKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// The JWT provider: settings of spec section 5 (secret or public key, `mapUser`,
/// `publicRoutes`, `verifyOptions.algorithms/audience/issuer`).
#[derive(Clone)]
pub struct JwtProvider {
    key: JwtKey,
    algorithms: Vec<Algorithm>,
    audience: Option<String>,
    issuer: Option<String>,
    leeway_secs: u64,
    public_routes: Vec<RoutePattern>,
    map_user: MapUser,
    // Built by `build`.
    decoding: Option<DecodingKey>,
}

impl fmt::Debug for JwtProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JwtProvider")
            .field("key", &self.key)
            .field("algorithms", &self.algorithms)
            .field("audience", &self.audience)
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

impl JwtProvider {
    /// A provider verifying with `key`; by default the key's family's usual algorithm only
    /// (HS256 for a secret, RS256 for a public key). Finish with [`JwtProvider::build`].
    pub fn new(key: JwtKey) -> Self {
        Self {
            algorithms: vec![key.default_algorithm()],
            key,
            audience: None,
            issuer: None,
            leeway_secs: 0,
            public_routes: Vec::new(),
            map_user: Arc::new(default_map_user),
            decoding: None,
        }
    }

    /// An HS256 provider with default settings.
    pub fn hs256(secret: impl AsRef<[u8]>) -> Self {
        Self::new(JwtKey::secret(secret))
            .build()
            .expect("a secret always makes an HS256 provider")
    }

    /// The allowed algorithms by name (`HS256`, `RS256`, ...). `none` is never allowed.
    pub fn algorithms<S: AsRef<str>>(
        mut self,
        names: impl IntoIterator<Item = S>,
    ) -> Result<Self, AuthConfigError> {
        let mut algs = Vec::new();
        for n in names {
            let n = n.as_ref().trim();
            if n.is_empty() {
                continue;
            }
            let alg = Algorithm::from_str(&n.to_ascii_uppercase())
                .map_err(|_| AuthConfigError::UnknownAlgorithm(n.to_owned()))?;
            if !self.key.fits(alg) {
                return Err(AuthConfigError::AlgorithmKeyMismatch {
                    alg: n.to_owned(),
                    key: self.key.describe(),
                });
            }
            if !algs.contains(&alg) {
                algs.push(alg);
            }
        }
        if algs.is_empty() {
            return Err(AuthConfigError::NoAlgorithm);
        }
        self.algorithms = algs;
        Ok(self)
    }

    /// The expected `aud`: tokens without it, or with another, are refused.
    pub fn audience(mut self, aud: impl Into<String>) -> Self {
        self.audience = Some(aud.into());
        self
    }

    /// The expected `iss`: tokens without it, or with another, are refused.
    pub fn issuer(mut self, iss: impl Into<String>) -> Self {
        self.issuer = Some(iss.into());
        self
    }

    /// Clock skew tolerated on `exp` and `nbf`, in seconds (default 0).
    pub fn leeway(mut self, secs: u64) -> Self {
        self.leeway_secs = secs;
        self
    }

    pub fn public_routes(mut self, patterns: impl IntoIterator<Item = RoutePattern>) -> Self {
        self.public_routes.extend(patterns);
        self
    }

    pub fn map_user(mut self, f: impl Fn(&Value) -> User + Send + Sync + 'static) -> Self {
        self.map_user = Arc::new(f);
        self
    }

    /// Parses the key.
    pub fn build(mut self) -> Result<Self, AuthConfigError> {
        let decoding = match &self.key {
            JwtKey::Secret(s) => {
                if s.is_empty() {
                    return Err(AuthConfigError::Key("the secret is empty".into()));
                }
                DecodingKey::from_secret(s)
            }
            JwtKey::RsaPublicPem(pem) => {
                DecodingKey::from_rsa_pem(pem).map_err(|e| AuthConfigError::Key(e.to_string()))?
            }
        };
        self.decoding = Some(decoding);
        Ok(self)
    }

    fn validation(&self) -> Validation {
        let mut v = Validation::new(self.algorithms[0]);
        v.algorithms = self.algorithms.clone();
        v.leeway = self.leeway_secs;
        v.validate_exp = true;
        v.validate_nbf = true;
        v.required_spec_claims.clear();
        v.validate_aud = self.audience.is_some();
        if let Some(a) = &self.audience {
            v.set_audience(&[a]);
            v.required_spec_claims.insert("aud".into());
        }
        if let Some(i) = &self.issuer {
            v.set_issuer(&[i]);
            v.required_spec_claims.insert("iss".into());
        }
        v
    }

    /// Verifies a token: header algorithm in the allowed list, signature, `exp`, `nbf`, `aud`,
    /// `iss`; then maps the payload to the user.
    pub fn verify(&self, token: &str) -> Result<User, AuthError> {
        let Some(decoding) = &self.decoding else {
            return Err(AuthError::invalid("the JWT provider was not built"));
        };
        let alg = header_algorithm(token)?;
        if !self.algorithms.iter().any(|a| format!("{a:?}") == alg) {
            return Err(AuthError::invalid(format!(
                "algorithm {alg} is not allowed"
            )));
        }
        let data = jsonwebtoken::decode::<Value>(token, decoding, &self.validation())
            .map_err(|e| jwt_error(e.kind()))?;
        if !data.claims.is_object() {
            return Err(AuthError::invalid("the payload is not a JSON object"));
        }
        // The user object needs an id: it keys memory and owns executions.
        let has_sub = match data.claims.get("sub") {
            Some(Value::String(s)) => !s.is_empty(),
            Some(Value::Number(_)) => true,
            _ => false,
        };
        if !has_sub {
            return Err(AuthError::invalid("missing sub"));
        }
        Ok((self.map_user)(&data.claims))
    }
}

/// Reads the `alg` of a token's header before anything else, so that `none` and algorithms
/// outside the allowed list are named in the refusal.
fn header_algorithm(token: &str) -> Result<String, AuthError> {
    let malformed = || AuthError::invalid("malformed token");
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed());
    };
    let bytes = base64url_decode(header).ok_or_else(malformed)?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| malformed())?;
    value
        .get("alg")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(malformed)
}

fn base64url_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

fn jwt_error(kind: &ErrorKind) -> AuthError {
    let reason = match kind {
        ErrorKind::ExpiredSignature => return AuthError::Expired,
        ErrorKind::InvalidSignature => "invalid signature".to_owned(),
        ErrorKind::InvalidAudience => "invalid audience".to_owned(),
        ErrorKind::InvalidIssuer => "invalid issuer".to_owned(),
        ErrorKind::InvalidSubject => "invalid subject".to_owned(),
        ErrorKind::ImmatureSignature => "token not yet valid (nbf)".to_owned(),
        ErrorKind::MissingRequiredClaim(c) if c == "aud" => "invalid audience".to_owned(),
        ErrorKind::MissingRequiredClaim(c) if c == "iss" => "invalid issuer".to_owned(),
        ErrorKind::MissingRequiredClaim(c) => format!("missing claim {c}"),
        ErrorKind::InvalidClaimFormat(c) => format!("invalid claim {c}"),
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => {
            "algorithm not allowed".to_owned()
        }
        ErrorKind::InvalidToken
        | ErrorKind::Base64(_)
        | ErrorKind::Json(_)
        | ErrorKind::Utf8(_) => "malformed token".to_owned(),
        other => format!("{other:?}"),
    };
    AuthError::Invalid(reason)
}

#[async_trait]
impl AuthProvider for JwtProvider {
    fn kind(&self) -> &str {
        "jwt"
    }

    async fn verify_token(&self, token: &str, _request: &AuthRequest) -> Result<User, AuthError> {
        self.verify(token)
    }

    fn public_routes(&self) -> Vec<RoutePattern> {
        self.public_routes.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::token::{TokenOptions, create_token};

    const SECRET: &str = "test-secret";

    fn token(payload: Value, opts: TokenOptions) -> String {
        create_token(&payload, SECRET.as_bytes(), &opts).unwrap()
    }

    fn b64(s: &str) -> String {
        // base64url without padding, enough for test headers.
        const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let b = s.as_bytes();
        let mut out = String::new();
        for chunk in b.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |acc, (i, &x)| acc | (u32::from(x) << (16 - 8 * i)));
            for i in 0..=chunk.len() {
                out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            }
        }
        out
    }

    #[test]
    fn maps_the_documented_claims() {
        let p = JwtProvider::hs256(SECRET);
        let t = token(
            json!({"sub": "u1", "email": "a@b.c", "name": "Ada", "roles": ["admin"]}),
            TokenOptions {
                expires_in: Some(Duration::from_secs(60)),
                ..Default::default()
            },
        );
        let u = p.verify(&t).unwrap();
        assert_eq!(
            u.as_json(),
            &json!({"id": "u1", "email": "a@b.c", "name": "Ada", "roles": ["admin"], "tier": "free"})
        );
        let u = p.verify(&token(
            json!({"sub": "u2", "tier": "pro"}),
            TokenOptions::default(),
        ));
        assert_eq!(u.unwrap().as_json()["tier"], "pro");
    }

    #[test]
    fn refusals_name_their_reason() {
        let p = JwtProvider::hs256(SECRET);
        let reason = |t: &str| p.verify(t).unwrap_err().to_string();
        assert_eq!(reason("abc"), "Invalid token: malformed token");
        assert_eq!(reason("a.b.c"), "Invalid token: malformed token");
        let good = token(json!({"sub": "u"}), TokenOptions::default());
        let admin = token(json!({"sub": "admin"}), TokenOptions::default());
        let sig = good.rsplit('.').next().unwrap();
        let forged = format!("{}.{sig}", admin.rsplit_once('.').unwrap().0);
        assert_eq!(reason(&forged), "Invalid token: invalid signature");
        let other = create_token(&json!({"sub": "u"}), b"other", &TokenOptions::default()).unwrap();
        assert_eq!(reason(&other), "Invalid token: invalid signature");
        for payload in [
            json!({"email": "a@b.c"}),
            json!({"sub": ""}),
            json!({"sub": null}),
        ] {
            let t = token(payload, TokenOptions::default());
            assert_eq!(reason(&t), "Invalid token: missing sub");
        }
        let none = format!(
            "{}.{}.",
            b64(r#"{"alg":"none","typ":"JWT"}"#),
            b64(r#"{"sub":"u"}"#)
        );
        assert_eq!(
            reason(&none),
            "Invalid token: algorithm none is not allowed"
        );
        let mut past = json!({"sub": "u"});
        past["exp"] = json!(1_000_000);
        assert_eq!(
            reason(&token(past, TokenOptions::default())),
            "Token expired"
        );
        let early = token(
            json!({"sub": "u"}),
            TokenOptions {
                not_before: Some(Duration::from_secs(3600)),
                ..Default::default()
            },
        );
        assert_eq!(reason(&early), "Invalid token: token not yet valid (nbf)");
    }

    #[test]
    fn audience_and_issuer() {
        let p = JwtProvider::new(JwtKey::secret(SECRET))
            .audience("agentry")
            .issuer("auth.example")
            .build()
            .unwrap();
        let with = |aud: Option<&str>, iss: Option<&str>| {
            token(
                json!({"sub": "u"}),
                TokenOptions {
                    audience: aud.map(Into::into),
                    issuer: iss.map(Into::into),
                    ..Default::default()
                },
            )
        };
        assert!(
            p.verify(&with(Some("agentry"), Some("auth.example")))
                .is_ok()
        );
        let reason = |t: String| p.verify(&t).unwrap_err().to_string();
        assert_eq!(
            reason(with(Some("x"), Some("auth.example"))),
            "Invalid token: invalid audience"
        );
        assert_eq!(
            reason(with(None, Some("auth.example"))),
            "Invalid token: invalid audience"
        );
        assert_eq!(
            reason(with(Some("agentry"), Some("x"))),
            "Invalid token: invalid issuer"
        );
        assert_eq!(
            reason(with(Some("agentry"), None)),
            "Invalid token: invalid issuer"
        );
        // Without an expected audience a token that names one is still accepted.
        assert!(
            JwtProvider::hs256(SECRET)
                .verify(&with(Some("x"), None))
                .is_ok()
        );
    }

    #[test]
    fn algorithm_configuration() {
        let secret = || JwtProvider::new(JwtKey::secret(SECRET));
        assert!(matches!(
            secret().algorithms(["RS256"]),
            Err(AuthConfigError::AlgorithmKeyMismatch { .. })
        ));
        assert!(matches!(
            secret().algorithms(["none"]),
            Err(AuthConfigError::UnknownAlgorithm(_))
        ));
        assert!(matches!(
            secret().algorithms([""]),
            Err(AuthConfigError::NoAlgorithm)
        ));
        let hs384_only = secret().algorithms(["hs384"]).unwrap().build().unwrap();
        let t = token(json!({"sub": "u"}), TokenOptions::default());
        assert_eq!(
            hs384_only.verify(&t).unwrap_err().to_string(),
            "Invalid token: algorithm HS256 is not allowed"
        );
        assert!(
            JwtProvider::new(JwtKey::RsaPublicPem(b"nope".to_vec()))
                .build()
                .is_err()
        );
        assert!(JwtProvider::new(JwtKey::secret("")).build().is_err());
    }

    #[test]
    fn rs256_refuses_hs256_tokens() {
        let public = include_bytes!("../fixtures/test_rsa_public.pem");
        let private = include_bytes!("../fixtures/test_rsa_private.pem");
        let p = JwtProvider::new(JwtKey::RsaPublicPem(public.to_vec()))
            .build()
            .unwrap();
        let rs = jsonwebtoken::encode(
            &jsonwebtoken::Header::new(Algorithm::RS256),
            &json!({"sub": "r"}),
            &jsonwebtoken::EncodingKey::from_rsa_pem(private).unwrap(),
        )
        .unwrap();
        assert_eq!(p.verify(&rs).unwrap().id().as_deref(), Some("r"));
        // The classic confusion attack: HMAC-signed with the public key as the secret.
        let confused =
            create_token(&json!({"sub": "x"}), public, &TokenOptions::default()).unwrap();
        assert_eq!(
            p.verify(&confused).unwrap_err().to_string(),
            "Invalid token: algorithm HS256 is not allowed"
        );
        assert!(matches!(
            JwtProvider::new(JwtKey::RsaPublicPem(public.to_vec())).algorithms(["HS256"]),
            Err(AuthConfigError::AlgorithmKeyMismatch { .. })
        ));
    }
}
