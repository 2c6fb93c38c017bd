//! The one rule for the ids of agents and workflows: they appear in URL paths and route patterns,
//! so they are plain words (no `/`, `?`, `#`, `%` or spaces) that need no escaping anywhere.

/// The longest id accepted.
pub const MAX_ID_LEN: usize = 128;

/// Whether `id` is a valid agent or workflow id: 1 to [`MAX_ID_LEN`] ASCII letters, digits,
/// `-`, `_` or `.`.
pub fn is_valid_id(id: &str) -> bool {
    is_plain_word(id, &[])
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
        }
    }
}
