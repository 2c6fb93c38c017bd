//! Who may do what: strict mode, the ownership rule of executions (the host's
//! `execution_policy`), whose executions a list shows, and who reads the logs. Every front end
//! asks here; none decides access itself.

use std::sync::Arc;

use agentry_agents::MemoryOwner;
use agentry_auth::{AuthError, User};
use agentry_engine::{ExecutionRecord, UserId};

use crate::caller::Caller;
use crate::error::{AppError, Code};

/// Who may act on an execution in strict mode: given the verified user and the execution.
pub type ExecutionPolicy = Arc<dyn Fn(&User, &ExecutionRecord) -> bool + Send + Sync>;

/// The role that may act on every execution and read the logs in strict mode.
pub const ADMIN_ROLE: &str = "admin";

/// The default ownership rule of strict mode: the user who started the execution, or an admin.
pub fn owner_or_admin(user: &User, execution: &ExecutionRecord) -> bool {
    user.has_role(ADMIN_ROLE) || (execution.owner.is_some() && execution.owner == user.id())
}

/// The access rules of the application.
#[derive(Clone)]
pub struct Policy {
    /// Strict mode: an execution is only for its owner (or whom `execution` allows) and the
    /// logs only for admins. (Which routes need a token is the front end's routing: see
    /// `agentry-http`'s `access.rs`.)
    pub strict: bool,
    pub execution: ExecutionPolicy,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            strict: false,
            execution: Arc::new(owner_or_admin),
        }
    }
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("strict", &self.strict)
            .finish_non_exhaustive()
    }
}

/// Strict mode's refusal of a caller without a user (a route a host made public again).
fn unauthenticated() -> AppError {
    AppError::auth(&AuthError::Missing)
}

impl Policy {
    /// In strict mode, refuses a caller who may not act on `execution` (403), or one without a
    /// user (401). Outside strict mode, anyone may.
    pub fn authorize_execution(
        &self,
        caller: &Caller,
        execution: &ExecutionRecord,
    ) -> Result<(), AppError> {
        if !self.strict {
            return Ok(());
        }
        let user = caller.user().ok_or_else(unauthenticated)?;
        if (self.execution)(user, execution) {
            Ok(())
        } else {
            Err(AppError::new(
                Code::Forbidden,
                "Forbidden: execution belongs to another user",
            ))
        }
    }

    /// Whether the caller may follow or answer a `/chat` conversation's run, in every mode: a
    /// run started by a verified user is that user's (or an admin's); one started without a
    /// verified user is anyone's that may act on the run (strict mode's rule still applies).
    /// A front end answers a conversation the caller may not reach as if it had no run.
    pub fn may_join_conversation(&self, caller: &Caller, run: &ExecutionRecord) -> bool {
        let started_by_a_user = match run.owner.as_deref() {
            None => true,
            Some(owner) => caller.user().is_some_and(|user| {
                user.has_role(ADMIN_ROLE) || user.id().as_deref() == Some(owner)
            }),
        };
        started_by_a_user && self.may_see(caller, run)
    }

    /// Whether the caller may see `execution` (always outside strict mode).
    pub fn may_see(&self, caller: &Caller, execution: &ExecutionRecord) -> bool {
        self.authorize_execution(caller, execution).is_ok()
    }

    /// Whose executions a list may show: everyone's outside strict mode and for an admin; in
    /// strict mode only the caller's own (`Some(user id)`; 401 without a user). The execution
    /// policy then filters the page too.
    pub fn list_owner(&self, caller: &Caller) -> Result<Option<UserId>, AppError> {
        if !self.strict {
            return Ok(None);
        }
        let user = caller.user().ok_or_else(unauthenticated)?;
        if user.has_role(ADMIN_ROLE) {
            return Ok(None);
        }
        // A user without an id owns nothing: an id no execution has.
        Ok(Some(user.id().unwrap_or_default().into()))
    }

    /// Whether the caller may see and act on a schedule owned by `owner`: always outside strict
    /// mode; in strict mode its owner and admins (401 for a caller without a user). A schedule
    /// the caller may not touch is answered as not found, so its existence is not revealed.
    pub fn may_touch_schedule(
        &self,
        caller: &Caller,
        owner: Option<&str>,
    ) -> Result<bool, AppError> {
        if !self.strict {
            return Ok(true);
        }
        let user = caller.user().ok_or_else(unauthenticated)?;
        Ok(user.has_role(ADMIN_ROLE) || (owner.is_some() && owner.map(str::to_owned) == user.id()))
    }

    /// Deploying and reading workflow definitions is for admins: a verified user needs the
    /// `admin` role in every mode; without any user (no authentication configured, outside
    /// strict mode) the server is open, as its other routes are.
    pub fn authorize_definitions(&self, caller: &Caller) -> Result<(), AppError> {
        match caller.user() {
            Some(user) if user.has_role(ADMIN_ROLE) => Ok(()),
            Some(_) => Err(AppError::new(
                Code::Forbidden,
                "Forbidden: deploying and reading definitions needs the admin role",
            )),
            None if self.strict => Err(unauthenticated()),
            None => Ok(()),
        }
    }

    /// Whose memory the caller reaches when it names `user_id` (GET and PUT
    /// `/agents/{id}/memory/working`, and the token usage of `GET /agents/{id}/usage`), in
    /// every mode: a verified user reaches only their own
    /// (403 for a `userId` that names someone else, admins included: a memory is a user's, not
    /// an execution); an anonymous caller when authentication is on has none (401);
    /// a trusted setup (no authentication) takes `userId` at its word.
    pub fn memory_owner(
        &self,
        caller: &Caller,
        user_id: Option<&str>,
    ) -> Result<MemoryOwner, AppError> {
        match caller.memory() {
            MemoryOwner::Verified(id) if user_id.is_some_and(|claimed| claimed != id) => {
                Err(AppError::new(
                    Code::Forbidden,
                    "Forbidden: a memory is only its user's (userId names another user)",
                ))
            }
            MemoryOwner::Anonymous => Err(AppError::new(
                Code::AuthenticationRequired,
                "Authentication required: a memory belongs to a verified user",
            )),
            owner => Ok(owner),
        }
    }

    /// In strict mode the logs (every user's requests and executions) are for admins only.
    pub fn authorize_logs(&self, caller: &Caller) -> Result<(), AppError> {
        if !self.strict {
            return Ok(());
        }
        let user = caller.user().ok_or_else(unauthenticated)?;
        if user.has_role(ADMIN_ROLE) {
            Ok(())
        } else {
            Err(AppError::new(
                Code::Forbidden,
                "Forbidden: the logs need the admin role",
            ))
        }
    }
}
