//! The token creation helper: HS256 tokens for development, tests and `agentry token`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Map, Value};

use crate::error::AuthConfigError;

/// `expiresIn`, `audience`, `issuer` of the spec's helper.
#[derive(Debug, Clone, Default)]
pub struct TokenOptions {
    /// Sets `exp` this long after now; `None` gives a token that never expires.
    pub expires_in: Option<Duration>,
    pub audience: Option<String>,
    pub issuer: Option<String>,
    /// Sets `nbf` this long after now.
    pub not_before: Option<Duration>,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Signs `payload` (a JSON object of claims) with HS256 and `secret`, adding `iat` and, from
/// `options`, `exp`, `nbf`, `aud` and `iss`.
pub fn create_token(
    payload: &Value,
    secret: &[u8],
    options: &TokenOptions,
) -> Result<String, AuthConfigError> {
    let mut claims: Map<String, Value> = match payload {
        Value::Object(m) => m.clone(),
        _ => {
            return Err(AuthConfigError::Token(
                "the payload must be a JSON object".into(),
            ));
        }
    };
    let now = now();
    claims.insert("iat".into(), now.into());
    if let Some(d) = options.expires_in {
        claims.insert("exp".into(), (now + d.as_secs()).into());
    }
    if let Some(d) = options.not_before {
        claims.insert("nbf".into(), (now + d.as_secs()).into());
    }
    if let Some(a) = &options.audience {
        claims.insert("aud".into(), a.clone().into());
    }
    if let Some(i) = &options.issuer {
        claims.insert("iss".into(), i.clone().into());
    }
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &Value::Object(claims),
        &EncodingKey::from_secret(secret),
    )
    .map_err(|e| AuthConfigError::Token(e.to_string()))
}

/// `90`, `90s`, `15m`, `12h`, `7d`, `2w` (a bare number is seconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("invalid duration {text:?}: expected e.g. 90s, 15m, 12h, 7d"))?;
    let secs = match unit.trim() {
        "" | "s" | "sec" | "secs" => 1,
        "m" | "min" | "mins" => 60,
        "h" | "hr" | "hrs" => 3600,
        "d" | "day" | "days" => 86_400,
        "w" => 604_800,
        other => return Err(format!("invalid duration unit {other:?} in {text:?}")),
    };
    n.checked_mul(secs)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("duration {text:?} is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90").unwrap().as_secs(), 90);
        assert_eq!(parse_duration("15m").unwrap().as_secs(), 900);
        assert_eq!(parse_duration("12h").unwrap().as_secs(), 43_200);
        assert_eq!(parse_duration("7d").unwrap().as_secs(), 604_800);
        assert!(parse_duration("h").is_err());
        assert!(parse_duration("5y").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("99999999999999999999w").is_err());
    }

    #[test]
    fn payload_must_be_an_object() {
        assert!(create_token(&Value::Null, b"s", &TokenOptions::default()).is_err());
    }
}
