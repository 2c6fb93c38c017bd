use async_trait::async_trait;

use crate::error::AuthError;
use crate::pattern::RoutePattern;
use crate::request::AuthRequest;
use crate::user::User;

/// The custom provider contract of spec section 5.
///
/// ```
/// use agentry_auth::{AuthError, AuthProvider, AuthRequest, User};
///
/// /// Accepts the token `let-me-in` from a `session` cookie.
/// struct CookieAuth;
///
/// #[async_trait::async_trait]
/// impl AuthProvider for CookieAuth {
///     fn kind(&self) -> &str {
///         "cookie"
///     }
///     fn extract_token(&self, req: &AuthRequest) -> Option<String> {
///         req.cookie("session")
///     }
///     async fn verify_token(&self, token: &str, _req: &AuthRequest) -> Result<User, AuthError> {
///         match token {
///             "let-me-in" => Ok(User::new(serde_json::json!({"id": "guest"}))),
///             _ => Err(AuthError::invalid("unknown session")),
///         }
///     }
/// }
/// ```
#[async_trait]
pub trait AuthProvider: Send + Sync + 'static {
    /// The provider's type name (`jwt`, `cookie`, ...).
    fn kind(&self) -> &str;

    /// Verifies a token and returns the user object, or why the token is refused.
    async fn verify_token(&self, token: &str, request: &AuthRequest) -> Result<User, AuthError>;

    /// Finds the token in a request. Default: `Authorization: Bearer <token>`.
    fn extract_token(&self, request: &AuthRequest) -> Option<String> {
        bearer_token(request)
    }

    /// Extra routes that skip authentication.
    fn public_routes(&self) -> Vec<RoutePattern> {
        Vec::new()
    }
}

/// The token of an `Authorization: Bearer <token>` header (scheme case-insensitive).
pub fn bearer_token(request: &AuthRequest) -> Option<String> {
    let value = request.header("authorization")?.trim();
    let (scheme, token) = value.split_once(char::is_whitespace)?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer() {
        let r = |v: &str| AuthRequest::new("GET", "/").with_header("Authorization", v);
        assert_eq!(bearer_token(&r("Bearer abc")).as_deref(), Some("abc"));
        assert_eq!(bearer_token(&r("bearer   abc ")).as_deref(), Some("abc"));
        assert_eq!(bearer_token(&r("Basic abc")), None);
        assert_eq!(bearer_token(&r("Bearer")), None);
        assert_eq!(bearer_token(&r("Bearer ")), None);
        assert_eq!(bearer_token(&AuthRequest::new("GET", "/")), None);
    }
}
