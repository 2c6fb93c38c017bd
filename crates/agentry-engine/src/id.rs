//! The rules for ids. Agents and workflows (which a host registers) appear in URL paths and
//! route patterns, so their ids are plain words (no `/`, `?`, `#`, `%` or spaces) that need no
//! escaping anywhere. Every id a client chooses (an execution's, a run's, a user's, a
//! conversation's, an event's, a schedule's) is at most [`MAX_KEY_CHARS`] characters without the
//! NUL character ([`check_key`]); execution and event ids are plain words besides.

/// The longest agent or workflow id accepted.
pub const MAX_ID_LEN: usize = 128;

/// The longest id a client chooses, in characters: the one bound of every key (ids, user ids,
/// conversation ids, event keys). Several such keys share one index row in the database
/// (PostgreSQL's btree takes about 2,700 bytes a row): 256 characters are at most 1 KiB of
/// UTF-8.
pub const MAX_KEY_CHARS: usize = 256;

/// A stable digest of `text` (FNV-1a, twice with different offsets: the same across builds,
/// processes and machines), 32 hexadecimal digits.
pub fn digest(text: &str) -> String {
    let fnv = |offset: u64| {
        text.bytes().fold(offset, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    };
    format!(
        "{:016x}{:016x}",
        fnv(0xcbf2_9ce4_8422_2325),
        fnv(0x8422_2325_cbf2_9ce4)
    )
}

/// Whether `id` is a valid agent or workflow id: 1 to [`MAX_ID_LEN`] ASCII letters, digits,
/// `-`, `_` or `.`.
pub fn is_valid_id(id: &str) -> bool {
    is_plain_word(id, MAX_ID_LEN, &[])
}

/// What separates an internal workflow's namespace from its name (`agent:writer`). A host's
/// workflow id cannot hold it: the id alone tells whether a stored execution is of an internal
/// workflow ([`crate::workflow::WorkflowBuilder::internal`]).
pub const INTERNAL_SEPARATOR: char = ':';

/// The id of the internal workflow `name` of `namespace` (`agent`, `writer`: `agent:writer`).
pub fn internal_workflow_id(namespace: &str, name: &str) -> WorkflowId {
    WorkflowId::from(format!("{namespace}{INTERNAL_SEPARATOR}{name}"))
}

/// An internal workflow's namespace and name; `None` for a host's workflow id.
pub fn internal_parts(workflow_id: &str) -> Option<(&str, &str)> {
    workflow_id
        .split_once(INTERNAL_SEPARATOR)
        .filter(|(namespace, name)| is_valid_id(namespace) && is_valid_id(name))
}

/// Whether `workflow_id` is an internal workflow's ([`internal_parts`]).
pub fn is_internal_workflow(workflow_id: &str) -> bool {
    internal_parts(workflow_id).is_some()
}

/// Whether `id` is a valid execution id: 1 to [`MAX_KEY_CHARS`] of the characters of
/// [`is_valid_id`], `:` (`order:42`) and `@` (a schedule's fire:
/// `nightly-report@2026-11-27T02:00:00Z`). Both are allowed unescaped in a URL path segment
/// (RFC 3986's `pchar`), so an id still needs no escaping.
pub fn is_execution_id(id: &str) -> bool {
    is_plain_word(id, MAX_KEY_CHARS, &[':', '@'])
}

/// Whether `id` is a valid event id (`eventId`): 1 to [`MAX_KEY_CHARS`] of the characters of
/// [`is_valid_id`] and `:`.
pub fn is_event_id(id: &str) -> bool {
    is_plain_word(id, MAX_KEY_CHARS, &[':'])
}

/// 1 to `max` ASCII letters, digits, `-`, `_`, `.` or one of `also`.
fn is_plain_word(id: &str, max: usize, also: &[char]) -> bool {
    !id.is_empty()
        && id.len() <= max
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') || also.contains(&c))
}

/// The rule of every key a client chooses (an id, a user id, a conversation id, an event key):
/// at most [`MAX_KEY_CHARS`] characters, and no NUL character (see [`refuse_nul`]). Its refusal
/// names `field`: `options.conversationId must be at most 256 characters`.
pub fn check_key(field: &str, value: &str) -> Result<(), String> {
    if value.chars().nth(MAX_KEY_CHARS).is_some() {
        return Err(format!(
            "{field} must be at most {MAX_KEY_CHARS} characters"
        ));
    }
    refuse_nul(field, value)
}

/// Text that names or keys something (an id, a user id, a cursor) is kept in text columns,
/// which cannot hold the NUL character on PostgreSQL: it is refused on every database alike,
/// naming `field`. (JSON values may hold it: they are stored and returned exactly.)
pub fn refuse_nul(field: &str, value: &str) -> Result<(), String> {
    if value.contains('\0') {
        Err(nul_refused(field))
    } else {
        Ok(())
    }
}

/// What refusing the NUL character in `field` says.
pub fn nul_refused(field: &str) -> String {
    format!("{field} must not contain the NUL character")
}

/// Declares an id newtype: the text of an id, named for what it identifies, so that a signature
/// says which id it takes (`Engine::state(&WorkflowId, &ExecutionId)`). It is the text as
/// given: validation stays where the id enters (a registration, a start's `executionId`), and
/// an unknown id is the lookup's answer. On the wire it is a plain string.
macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize, serde::Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn new(id: impl Into<String>) -> Self {
                Self(id.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<String> for $name {
            fn from(id: String) -> Self {
                Self(id)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> Self {
                Self(id.to_owned())
            }
        }

        impl From<&String> for $name {
            fn from(id: &String) -> Self {
                Self(id.clone())
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
    };
}

id_type!(
    /// A workflow's id (a plain word, see [`is_valid_id`]).
    WorkflowId
);
id_type!(
    /// An execution's id (a plain word that may also hold `:`; a sub-workflow's is its
    /// parent's step and attempt).
    ExecutionId
);
id_type!(
    /// An agent's id (a plain word, see [`is_valid_id`]).
    AgentId
);
id_type!(
    /// A user's id, as the authentication provider (or, without one, the client) names it.
    UserId
);

#[cfg(test)]
mod tests {
    use super::is_valid_id;

    #[test]
    fn ids_are_plain_words() {
        for good in ["assistant", "order-fulfillment", "ok-id_1.2", "A"] {
            assert!(is_valid_id(good), "{good}");
        }
        for bad in ["", "x?", "a/b", "a b", "x#", "x%3F", "é"] {
            assert!(!is_valid_id(bad), "{bad}");
            assert!(!super::is_execution_id(bad), "{bad}");
        }
        assert!(!is_valid_id(&"a".repeat(129)));
        assert!(!is_valid_id("s@2026-11-27T02:00:00Z"));
        assert!(super::is_execution_id("s@2026-11-27T02:00:00.250Z"));
        assert!(super::is_execution_id("order:42"));
        assert!(!super::is_execution_id("s@2026-11-27T02:00:00+01:00"));
    }

    #[test]
    fn client_ids_have_one_bound() {
        let longest = "é".repeat(super::MAX_KEY_CHARS);
        assert_eq!(super::check_key("k", &longest), Ok(()));
        assert_eq!(
            super::check_key("options.conversationId", &format!("{longest}a")),
            Err("options.conversationId must be at most 256 characters".into())
        );
        assert_eq!(
            super::check_key("k", "a\0"),
            Err("k must not contain the NUL character".into())
        );
        let id = "e".repeat(super::MAX_KEY_CHARS);
        assert!(super::is_execution_id(&id) && super::is_event_id(&id));
        assert!(!super::is_execution_id(&format!("{id}e")));
        assert!(!super::is_event_id(&format!("{id}e")));
        assert!(!super::is_event_id("a@b"));
    }
}
