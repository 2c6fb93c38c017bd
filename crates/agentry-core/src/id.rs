//! The one rule for the ids of agents and workflows: they appear in URL paths and route patterns,
//! so they are plain words (no `/`, `?`, `#`, `%` or spaces) that need no escaping anywhere.

/// The longest id accepted.
pub const MAX_ID_LEN: usize = 128;

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
    is_plain_word(id, &[])
}

/// Whether `id` is a valid execution id: the rule of [`is_valid_id`], plus `:` (`order:42`)
/// and `@` (a schedule's fire: `nightly-report@2026-11-27T02:00:00Z`). Both are allowed
/// unescaped in a URL path segment (RFC 3986's `pchar`), so an id still needs no escaping.
pub fn is_execution_id(id: &str) -> bool {
    is_plain_word(id, &[':', '@'])
}

/// 1 to [`MAX_ID_LEN`] ASCII letters, digits, `-`, `_`, `.` or one of `also`.
pub(crate) fn is_plain_word(id: &str, also: &[char]) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') || also.contains(&c))
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
        let long = "a".repeat(129);
        for bad in ["", "x?", "a/b", "a b", "x#", "x%3F", "é", long.as_str()] {
            assert!(!is_valid_id(bad), "{bad}");
            assert!(!super::is_execution_id(bad), "{bad}");
        }
        assert!(!is_valid_id("s@2026-11-27T02:00:00Z"));
        assert!(super::is_execution_id("s@2026-11-27T02:00:00.250Z"));
        assert!(super::is_execution_id("order:42"));
        assert!(!super::is_execution_id("s@2026-11-27T02:00:00+01:00"));
    }
}
