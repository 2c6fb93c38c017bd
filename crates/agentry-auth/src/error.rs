use thiserror::Error;

/// Why a request was refused. The `Display` texts are the exact 401 messages of spec section 7.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AuthError {
    /// A protected route was called without a token.
    #[error("Authentication required")]
    Missing,
    /// The token failed verification; the reason says how.
    #[error("Invalid token: {0}")]
    Invalid(String),
    /// The token's `exp` has passed.
    #[error("Token expired")]
    Expired,
}

impl AuthError {
    pub fn invalid(reason: impl Into<String>) -> Self {
        AuthError::Invalid(reason.into())
    }
}

/// A provider or rule set that cannot be built as configured.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AuthConfigError {
    #[error("invalid route pattern {pattern:?}: {reason}")]
    Pattern { pattern: String, reason: String },
    #[error("unknown JWT algorithm {0:?}")]
    UnknownAlgorithm(String),
    #[error("algorithm {alg} cannot be verified with {key}")]
    AlgorithmKeyMismatch { alg: String, key: &'static str },
    #[error("no JWT algorithm allowed")]
    NoAlgorithm,
    #[error("invalid key: {0}")]
    Key(String),
    #[error("cannot create token: {0}")]
    Token(String),
}
