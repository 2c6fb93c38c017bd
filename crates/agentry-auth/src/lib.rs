//! agentry-auth: authentication for agentry, independent of any web framework.
//!
//! - [`AuthProvider`]: the custom provider contract of spec section 5 (a type name, token
//!   verification, optional token extraction, optional public route patterns).
//! - [`JwtProvider`]: the built-in JWT provider (HS256/RS256 and the rest of the HMAC and RSA
//!   families), with audience, issuer, `exp`/`nbf` and a user mapping.
//! - [`create_token`]: the token creation helper (also `agentry token`).
//! - [`RoutePattern`] and [`RouteRules`]: `METHOD /path` patterns and the decision whether a
//!   request needs a token.
//! - [`User`] and [`AuthError`]: the user object and the three 401 failures with their exact
//!   messages.
//!
//! Architecture invariant: this crate knows no HTTP server. The adapter hands it an
//! [`AuthRequest`] (method, path, query, headers) and gets a [`User`] or an [`AuthError`].

mod error;
mod jwt;
mod pattern;
mod provider;
mod request;
mod token;
mod user;

pub use error::{AuthConfigError, AuthError};
pub use jwt::{JwtKey, JwtProvider, MIN_SECRET_BYTES, MapUser, default_map_user};
pub use pattern::{Access, PatternError, RoutePattern, RouteRules};
pub use provider::{AuthProvider, bearer_token};
pub use request::AuthRequest;
pub use token::{TokenOptions, create_token, parse_duration};
pub use user::User;
