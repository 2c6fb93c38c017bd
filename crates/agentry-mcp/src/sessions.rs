//! MCP sessions that belong to someone and cost little. [`McpSessions`] is the session manager
//! rmcp's Streamable HTTP service runs on: rmcp's in-process sessions (`LocalSessionManager`,
//! which ends a session idle for [`SessionLimits::idle`]) plus the one record of who owns each
//! session and when it was last used. Through it:
//! - a session belongs to the caller whose `initialize` opened it ([`Owner`]); a request naming
//!   it for anyone else is answered as for an unknown session ([`McpSessions::claim`]);
//! - one owner holds at most [`SessionLimits::per_user`] sessions: opening one more ends their
//!   least recently used; all owners together hold at most [`SessionLimits::total`]: beyond it
//!   an `initialize` is refused ([`McpSessions::admit`]);
//! - session ids never reach a log: a short digest ([`digest`]) stands for them, and no error of
//!   this manager names one.

use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, GetExtensions, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};

use crate::McpCaller;

/// How many MCP sessions may live, and for how long when idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// Sessions one owner may hold (`AGENTRY_MCP_MAX_SESSIONS_PER_USER`); one more ends their
    /// least recently used.
    pub per_user: usize,
    /// Sessions in all (`AGENTRY_MCP_MAX_SESSIONS`); beyond it an `initialize` is refused.
    pub total: usize,
    /// A session without a request this long ends (`AGENTRY_MCP_SESSION_IDLE`).
    pub idle: Duration,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            per_user: 16,
            total: 1000,
            idle: Duration::from_secs(300),
        }
    }
}

/// Whose a session is: the verified user who opened it, or `anonymous` when no provider
/// verified anyone.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Owner {
    User(String),
    Anonymous,
}

impl Owner {
    /// The owner of what `caller` opens: its verified user id, else anonymous.
    pub fn of(caller: &McpCaller) -> Owner {
        match caller.0.user_id() {
            Some(id) => Owner::User(id.into_string()),
            None => Owner::Anonymous,
        }
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Owner::User(id) => f.write_str(id),
            Owner::Anonymous => f.write_str("anonymous"),
        }
    }
}

/// What logs say instead of a session id: 8 hex digits of a hash of it (enough to follow one
/// session through the logs, useless to take it over).
pub fn digest(id: &str) -> String {
    let mut h = std::hash::DefaultHasher::new();
    id.hash(&mut h);
    format!("{:08x}", h.finish() as u32)
}

/// How [`SessionError::NotFound`] reads: rmcp answers it as a 500 with this text at its end,
/// which [`crate::McpService`] turns back into an unknown session.
pub const SESSION_GONE: &str = "MCP session not found";

/// A failure of the session manager, as rmcp logs and answers it: never with the session id.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// A session that ended between the owner's check and rmcp's use of it.
    #[error("{SESSION_GONE}")]
    NotFound,
    #[error("MCP session failed: {0}")]
    Failed(String),
}

impl From<LocalSessionManagerError> for SessionError {
    fn from(e: LocalSessionManagerError) -> Self {
        match e {
            LocalSessionManagerError::SessionNotFound(_) => SessionError::NotFound,
            // The other variants (a closed channel, a bad event id) name no session.
            other => SessionError::Failed(other.to_string()),
        }
    }
}

#[derive(Debug)]
struct Entry {
    /// `None` between rmcp creating the session and its `initialize` naming the caller: nobody's
    /// (no id has been answered yet).
    owner: Option<Owner>,
    last_used: Instant,
}

#[derive(Debug, Default)]
struct Book {
    sessions: HashMap<SessionId, Entry>,
    /// Each owner's sessions (at most `per_user` once an `initialize` is through).
    by_owner: HashMap<Owner, Vec<SessionId>>,
    /// `initialize` requests admitted and not answered yet: each may add a session.
    reserved: usize,
    /// Whether the refusal at the limit was logged (once each time the limit is reached).
    full_logged: bool,
}

impl Book {
    fn remove(&mut self, id: &str) -> Option<Entry> {
        let entry = self.sessions.remove(id)?;
        if let Some(owner) = &entry.owner
            && let Some(ids) = self.by_owner.get_mut(owner)
        {
            ids.retain(|s| &**s != id);
            if ids.is_empty() {
                self.by_owner.remove(owner);
            }
        }
        Some(entry)
    }

    /// The least recently used session of `owner`, taken out of the book.
    fn take_lru(&mut self, owner: &Owner) -> Option<SessionId> {
        let lru = self
            .by_owner
            .get(owner)?
            .iter()
            .min_by_key(|id| self.sessions.get(*id).map(|e| e.last_used))?
            .clone();
        self.remove(&lru);
        Some(lru)
    }

    fn owned(&self, owner: &Owner) -> usize {
        self.by_owner.get(owner).map_or(0, Vec::len)
    }
}

/// The session manager of `/mcp`: rmcp's in-process sessions and who owns each (module docs).
#[derive(Debug)]
pub struct McpSessions {
    inner: LocalSessionManager,
    limits: SessionLimits,
    book: Mutex<Book>,
}

/// Why an `initialize` was refused: every session is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimitReached {
    /// When a session is likely to end (the least recently used one's idle expiry).
    pub retry_after: Duration,
}

/// An admitted `initialize`: its place among the sessions is held until it is answered.
#[derive(Debug)]
pub struct Admission<'a> {
    sessions: &'a McpSessions,
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        self.sessions.book().reserved -= 1;
    }
}

impl McpSessions {
    pub fn new(limits: SessionLimits) -> Self {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(limits.idle);
        Self {
            inner,
            limits,
            book: Mutex::new(Book::default()),
        }
    }

    pub fn limits(&self) -> SessionLimits {
        self.limits
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        // The book stays consistent at every unlock; a panic elsewhere does not spoil it.
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many sessions live.
    pub fn len(&self) -> usize {
        self.book().sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether session `id` is `owner`'s; if so it is used now. An unknown id and another
    /// owner's are the same `false`.
    pub fn claim(&self, id: &str, owner: &Owner) -> bool {
        let mut book = self.book();
        match book.sessions.get_mut(id) {
            Some(e) if e.owner.as_ref() == Some(owner) => {
                e.last_used = Instant::now();
                true
            }
            _ => false,
        }
    }

    /// Makes room for a session of `owner`: when every session is taken and `owner` holds as
    /// many as they may, their least recently used ends now (the new one would end it anyway);
    /// when every session is taken otherwise, the `initialize` is refused.
    pub async fn admit(&self, owner: &Owner) -> Result<Admission<'_>, SessionLimitReached> {
        let evicted = {
            let mut book = self.book();
            let mut evicted = None;
            if book.sessions.len() + book.reserved >= self.limits.total
                && book.owned(owner) >= self.limits.per_user
            {
                evicted = book.take_lru(owner);
            }
            if book.sessions.len() + book.reserved >= self.limits.total {
                if !book.full_logged {
                    book.full_logged = true;
                    tracing::warn!(
                        limit = self.limits.total,
                        "MCP sessions are at their limit (AGENTRY_MCP_MAX_SESSIONS): new ones are \
                         refused until some end"
                    );
                }
                let oldest = book.sessions.values().map(|e| e.last_used).min();
                let retry_after = oldest
                    .map(|t| (t + self.limits.idle).saturating_duration_since(Instant::now()))
                    .unwrap_or_default()
                    .max(Duration::from_secs(1));
                return Err(SessionLimitReached { retry_after });
            }
            book.full_logged = false;
            book.reserved += 1;
            evicted
        };
        let admission = Admission { sessions: self };
        if let Some(id) = evicted {
            self.end_evicted(&id, owner).await;
        }
        Ok(admission)
    }

    async fn end_evicted(&self, id: &SessionId, owner: &Owner) {
        tracing::info!(
            session = %digest(id),
            user = %owner,
            limit = self.limits.per_user,
            "MCP session ended: its user opened one more than they may hold \
             (AGENTRY_MCP_MAX_SESSIONS_PER_USER), this was their least recently used"
        );
        if let Err(e) = self.inner.close_session(id).await {
            tracing::warn!(session = %digest(id), error = %SessionError::from(e), "ending an MCP session");
        }
    }

    /// Records `owner` as the owner of the new session `id`, ending their least recently used
    /// sessions beyond the per-user limit.
    async fn bind(&self, id: &SessionId, owner: Owner) {
        let evicted = {
            let mut book = self.book();
            let Some(entry) = book.sessions.get_mut(id) else {
                // Ended already (its worker failed).
                return;
            };
            entry.owner = Some(owner.clone());
            entry.last_used = Instant::now();
            book.by_owner
                .entry(owner.clone())
                .or_default()
                .push(id.clone());
            let mut evicted = Vec::new();
            while book.owned(&owner) > self.limits.per_user {
                let Some(lru) = book.take_lru(&owner) else {
                    break;
                };
                evicted.push(lru);
            }
            evicted
        };
        tracing::debug!(session = %digest(id), user = %owner, "MCP session opened");
        for lru in evicted {
            self.end_evicted(&lru, &owner).await;
        }
    }
}

/// The caller of an `initialize`, as the HTTP layer put it in the request's extensions.
fn caller_of(message: &ClientJsonRpcMessage) -> Option<McpCaller> {
    let ClientJsonRpcMessage::Request(req) = message else {
        return None;
    };
    req.request
        .extensions()
        .get::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<McpCaller>())
        .cloned()
}

impl SessionManager for McpSessions {
    type Error = SessionError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.inner.create_session().await?;
        self.book().sessions.insert(
            id.clone(),
            Entry {
                owner: None,
                last_used: Instant::now(),
            },
        );
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let caller = caller_of(&message);
        let response = self.inner.initialize_session(id, message).await?;
        // Bound once initialized, so that no eviction ends a session its `initialize` is still
        // opening; nobody knows its id before it is answered. Without a caller (never from the
        // HTTP layer) the session stays nobody's: unusable.
        if let Some(caller) = caller {
            self.bind(id, Owner::of(&caller)).await;
        }
        Ok(response)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        if let Some(entry) = self.book().remove(id) {
            tracing::debug!(
                session = %digest(id),
                user = %entry.owner.map_or_else(|| "nobody".to_owned(), |o| o.to_string()),
                "MCP session ended"
            );
        }
        // rmcp logs a failure here with the id: it is logged here without.
        if let Err(e) = self.inner.close_session(id).await {
            tracing::warn!(session = %digest(id), error = %SessionError::from(e), "ending an MCP session");
        }
        Ok(())
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}

/// The tracing directives that keep session ids out of every log, whatever `RUST_LOG` says:
/// rmcp's session module logs each new session's id at INFO and names it in its INFO span, and
/// its worker's TRACE span carries it in its name. At `warn` their warnings and errors (which
/// name no session) still show; add them to every filter that lets rmcp through.
pub const QUIET_LOG_DIRECTIVES: &[&str] = &[
    "rmcp::transport::streamable_http_server::session::local=warn",
    "rmcp::transport::worker=warn",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn user(id: &str) -> Owner {
        Owner::User(id.into())
    }

    fn add(s: &McpSessions, id: &str, owner: Owner) {
        s.book().sessions.insert(
            id.into(),
            Entry {
                owner: None,
                last_used: Instant::now(),
            },
        );
        futures::executor::block_on(s.bind(&SessionId::from(id), owner));
    }

    #[test]
    fn a_session_is_only_its_owners() {
        let s = McpSessions::new(SessionLimits::default());
        add(&s, "a1", user("alice"));
        assert!(s.claim("a1", &user("alice")));
        assert!(!s.claim("a1", &user("bob")));
        assert!(!s.claim("a1", &Owner::Anonymous));
        assert!(!s.claim("nope", &user("alice")));
        // A verified user called "anonymous" is not the anonymous caller.
        add(&s, "n1", Owner::Anonymous);
        assert!(!s.claim("n1", &user("anonymous")));
    }

    #[test]
    fn one_more_than_the_per_user_limit_ends_the_least_recently_used() {
        let s = McpSessions::new(SessionLimits {
            per_user: 2,
            ..SessionLimits::default()
        });
        add(&s, "a1", user("alice"));
        add(&s, "a2", user("alice"));
        add(&s, "b1", user("bob"));
        assert!(s.claim("a1", &user("alice")));
        add(&s, "a3", user("alice"));
        assert!(
            !s.claim("a2", &user("alice")),
            "a2 was the least recently used"
        );
        assert!(s.claim("a1", &user("alice")));
        assert!(s.claim("a3", &user("alice")));
        assert!(s.claim("b1", &user("bob")));
        assert_eq!(s.len(), 3);
    }

    #[test]
    fn beyond_the_total_an_initialize_is_refused_unless_its_owner_gives_one_up() {
        let s = McpSessions::new(SessionLimits {
            per_user: 2,
            total: 3,
            idle: Duration::from_secs(60),
        });
        add(&s, "a1", user("alice"));
        add(&s, "a2", user("alice"));
        add(&s, "b1", user("bob"));
        let refused = futures::executor::block_on(s.admit(&user("carol"))).unwrap_err();
        assert!(
            refused.retry_after >= Duration::from_secs(59),
            "{refused:?}"
        );
        let refused = futures::executor::block_on(s.admit(&user("bob")));
        assert!(
            refused.is_err(),
            "bob holds fewer than he may: nothing to give up"
        );
        {
            let admitted = futures::executor::block_on(s.admit(&user("alice"))).unwrap();
            assert_eq!(s.len(), 2, "alice's least recently used made room");
            assert!(!s.claim("a1", &user("alice")));
            // Her place is held while the initialize runs.
            assert!(futures::executor::block_on(s.admit(&user("carol"))).is_err());
            drop(admitted);
        }
        assert!(futures::executor::block_on(s.admit(&user("carol"))).is_ok());
    }

    #[test]
    fn a_digest_is_short_and_stable() {
        let id = "6d1e1a7c-0000-4000-8000-000000000000";
        assert_eq!(digest(id).len(), 8);
        assert_eq!(digest(id), digest(id));
        assert_ne!(digest(id), digest("another"));
    }
}
