//! Who is asking, decided once by the front end's authentication and then only read: whose
//! memory a generation reads, who owns what a call starts, and what the context of an agent or
//! a workflow says about the user.

use agentry_agents::MemoryOwner;
use agentry_auth::User;
use agentry_engine::UserId;
use serde_json::{Map, Value};

/// The caller of a use case, as a front end's authentication verified it.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Caller {
    /// No authentication is configured (a trusted, single-tenant set-up): what the request says
    /// about its user is taken at its word.
    #[default]
    Trusted,
    /// Authentication is on and the request carries no valid token (a public route).
    Anonymous,
    /// Authentication is on and the token was verified: this user (it has an id).
    Verified(User),
}

impl Caller {
    /// The caller of a request: `user` when a provider verified one; anonymous when a provider
    /// is on and there is none; trusted without a provider.
    pub fn of(provider_on: bool, user: Option<User>) -> Self {
        match (provider_on, user) {
            (false, _) => Caller::Trusted,
            (true, Some(user)) if user.id().is_some() => Caller::Verified(user),
            (true, _) => Caller::Anonymous,
        }
    }

    /// The verified user, if any.
    pub fn user(&self) -> Option<&User> {
        match self {
            Caller::Verified(user) => Some(user),
            _ => None,
        }
    }

    /// The verified user's id: the owner of what this caller starts.
    pub fn user_id(&self) -> Option<UserId> {
        self.user().and_then(User::id).map(UserId::from)
    }

    /// Whose conversation memory a generation reads and writes.
    pub(crate) fn memory(&self) -> MemoryOwner {
        match self {
            Caller::Trusted => MemoryOwner::Trusted,
            Caller::Anonymous => MemoryOwner::Anonymous,
            Caller::Verified(user) => match user.id() {
                Some(id) => MemoryOwner::Verified(id),
                None => MemoryOwner::Anonymous,
            },
        }
    }

    /// Context injection: the verified user as the context's `user` and its id as `userId`
    /// (and the call's user id), overriding what the client sent. A caller without a verified
    /// user changes nothing.
    pub(crate) fn inject(&self, context: &mut Map<String, Value>, user_id: &mut Option<UserId>) {
        let Some(user) = self.user() else {
            return;
        };
        context.insert("user".into(), user.as_json().clone());
        if let Some(id) = user.id() {
            context.insert("userId".into(), Value::String(id.clone()));
            *user_id = Some(id.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_verified_user_overrides_the_clients_identity() {
        let mut ctx = Map::new();
        ctx.insert("user".into(), json!({"id": "forged"}));
        ctx.insert("locale".into(), json!("fr"));
        let mut uid = Some(UserId::from("forged"));
        let caller = Caller::of(true, Some(User::new(json!({"id": "u1", "roles": []}))));
        caller.inject(&mut ctx, &mut uid);
        assert_eq!(uid.as_deref(), Some("u1"));
        assert_eq!(ctx["user"]["id"], "u1");
        assert_eq!(ctx["userId"], "u1");
        assert_eq!(ctx["locale"], "fr");
    }

    #[test]
    fn only_a_verified_user_is_injected() {
        let mut ctx = Map::new();
        let mut uid = Some(UserId::from("client"));
        Caller::Trusted.inject(&mut ctx, &mut uid);
        Caller::Anonymous.inject(&mut ctx, &mut uid);
        assert!(ctx.is_empty());
        assert_eq!(uid.as_deref(), Some("client"));
        assert_eq!(Caller::of(true, None), Caller::Anonymous);
        assert_eq!(Caller::of(false, None), Caller::Trusted);
    }
}
