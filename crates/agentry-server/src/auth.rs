//! Authentication settings from the environment (running.md): the JWT provider and extra route
//! patterns.

use std::sync::Arc;

use agentry_auth::{AuthProvider, JwtKey, JwtProvider, MIN_SECRET_BYTES, RoutePattern};
use anyhow::Context;

/// `AGENTRY_JWT_*`, `AGENTRY_PUBLIC_ROUTES`, `AGENTRY_PROTECTED_ROUTES`.
#[derive(Debug, Clone, Default)]
pub struct AuthSettings {
    /// HS256 (or the HMAC algorithms listed) with this secret.
    pub jwt_secret: Option<String>,
    /// RS256 (or the RSA algorithms listed) with this PEM public key.
    pub jwt_public_key_file: Option<String>,
    /// Comma list of allowed algorithms.
    pub jwt_algorithms: Option<String>,
    pub jwt_audience: Option<String>,
    pub jwt_issuer: Option<String>,
    /// Comma list of extra public patterns.
    pub public_routes: Option<String>,
    /// Comma list of extra protected patterns (e.g. `POST /workflows/*` guards suspend/resume).
    pub protected_routes: Option<String>,
    /// Strict mode (`AGENTRY_AUTH_STRICT=1`, `--auth-strict`): every route that reads or changes
    /// executions, memory or logs needs a token, and executions belong to their owner.
    pub strict: bool,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl AuthSettings {
    pub fn from_env() -> Self {
        Self {
            jwt_secret: env("AGENTRY_JWT_SECRET"),
            jwt_public_key_file: env("AGENTRY_JWT_PUBLIC_KEY_FILE"),
            jwt_algorithms: env("AGENTRY_JWT_ALGORITHMS"),
            jwt_audience: env("AGENTRY_JWT_AUDIENCE"),
            jwt_issuer: env("AGENTRY_JWT_ISSUER"),
            public_routes: env("AGENTRY_PUBLIC_ROUTES"),
            protected_routes: env("AGENTRY_PROTECTED_ROUTES"),
            strict: env("AGENTRY_AUTH_STRICT").is_some_and(|v| is_truthy(&v)),
        }
    }

    /// The JWT provider, when a secret or a public key is configured (the key wins when both
    /// are set).
    pub fn provider(&self) -> anyhow::Result<Option<Arc<dyn AuthProvider>>> {
        let key = match (&self.jwt_public_key_file, &self.jwt_secret) {
            (Some(path), _) => JwtKey::RsaPublicPem(
                std::fs::read(path)
                    .with_context(|| format!("reading AGENTRY_JWT_PUBLIC_KEY_FILE {path}"))?,
            ),
            (None, Some(secret)) => {
                if secret.len() < MIN_SECRET_BYTES {
                    tracing::warn!(
                        "AGENTRY_JWT_SECRET is shorter than {MIN_SECRET_BYTES} bytes ({} bytes): \
                         an HS256 secret that short can be guessed offline from one token; use \
                         a random secret of at least {MIN_SECRET_BYTES} bytes",
                        secret.len()
                    );
                }
                JwtKey::secret(secret)
            }
            (None, None) => return Ok(None),
        };
        let mut p = JwtProvider::new(key);
        if let Some(list) = &self.jwt_algorithms {
            p = p
                .algorithms(list.split(','))
                .context("AGENTRY_JWT_ALGORITHMS")?;
        }
        if let Some(a) = &self.jwt_audience {
            p = p.audience(a);
        }
        if let Some(i) = &self.jwt_issuer {
            p = p.issuer(i);
        }
        Ok(Some(Arc::new(p.build().context("the JWT provider")?)))
    }

    pub fn public_patterns(&self) -> anyhow::Result<Vec<RoutePattern>> {
        patterns(self.public_routes.as_deref(), "AGENTRY_PUBLIC_ROUTES")
    }

    pub fn protected_patterns(&self) -> anyhow::Result<Vec<RoutePattern>> {
        patterns(self.protected_routes.as_deref(), "AGENTRY_PROTECTED_ROUTES")
    }
}

/// `1`, `true`, `yes` or `on` (any case).
pub fn is_truthy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

fn patterns(list: Option<&str>, var: &str) -> anyhow::Result<Vec<RoutePattern>> {
    match list {
        None => Ok(Vec::new()),
        Some(l) => RoutePattern::parse_list(l).with_context(|| var.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_secret_no_provider() {
        assert!(AuthSettings::default().provider().unwrap().is_none());
    }

    #[test]
    fn bad_settings_are_errors() {
        let s = AuthSettings {
            jwt_secret: Some("s".into()),
            jwt_algorithms: Some("RS256".into()),
            ..Default::default()
        };
        let e = s.provider().err().unwrap();
        assert!(format!("{e:#}").contains("AGENTRY_JWT_ALGORITHMS"), "{e:#}");
        let s = AuthSettings {
            public_routes: Some("GET nope".into()),
            ..Default::default()
        };
        assert!(s.public_patterns().is_err());
        let s = AuthSettings {
            jwt_public_key_file: Some("/no/such/key.pem".into()),
            ..Default::default()
        };
        assert!(s.provider().is_err());
    }
}
