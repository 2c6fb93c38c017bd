//! Cutting client-controlled text to a limit, with a marker saying how much was cut: a whole text
//! ([`truncate`]) or a value as it is formatted ([`debug_bounded`], [`display_bounded`]), which is
//! never held whole.

use std::borrow::Cow;
use std::fmt::{self, Write as _};

/// `text` itself when it is at most `max` bytes long. Otherwise its longest prefix, cut at a
/// char boundary, followed by `…[truncated N bytes]` (N the bytes removed), the whole at most
/// `max` bytes; when `max` is too small even for the marker, the prefix alone.
pub fn truncate(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(shorten(text, text.len(), max))
    }
}

/// The length of `…[truncated N bytes]`.
fn marker_len(n: usize) -> usize {
    let digits = n.checked_ilog10().map_or(1, |d| d as usize + 1);
    "…[truncated  bytes]".len() + digits
}

/// A text of `total` bytes (`total > max`), of which `head` holds at least the first `max`
/// bytes (or all up to the char that straddles them), cut to `max` bytes with the marker.
fn shorten(head: &str, total: usize, max: usize) -> String {
    // N is at most `total`, so its marker is at most this long.
    let reserve = marker_len(total);
    if reserve > max {
        return head[..head.floor_char_boundary(max)].to_owned();
    }
    let cut = head.floor_char_boundary(max - reserve);
    let mut out = String::with_capacity(max);
    out.push_str(&head[..cut]);
    let _ = write!(out, "…[truncated {} bytes]", total - cut);
    out
}

/// A `fmt::Write` that keeps the first `max` bytes written and only counts the rest, so that
/// formatting a huge value never holds it whole.
struct Bounded {
    head: String,
    total: usize,
    max: usize,
}

impl Bounded {
    fn new(max: usize) -> Self {
        Self {
            head: String::new(),
            total: 0,
            max,
        }
    }

    /// What was written, [`truncate`]d to `max` bytes.
    fn finish(self) -> String {
        if self.total <= self.max {
            self.head
        } else {
            shorten(&self.head, self.total, self.max)
        }
    }
}

impl fmt::Write for Bounded {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // Once something was dropped, nothing more is kept: the head stays a prefix.
        if self.total == self.head.len() {
            let room = self.max - self.head.len();
            let take = if s.len() <= room {
                s.len()
            } else {
                s.floor_char_boundary(room)
            };
            self.head.push_str(&s[..take]);
        }
        self.total = self.total.saturating_add(s.len());
        Ok(())
    }
}

/// `value`'s `Debug` form, [`truncate`]d to `max` bytes.
pub(crate) fn debug_bounded(value: &dyn fmt::Debug, max: usize) -> String {
    let mut w = Bounded::new(max);
    let _ = write!(w, "{value:?}");
    w.finish()
}

/// `value`'s `Display` form, [`truncate`]d to `max` bytes.
pub(crate) fn display_bounded(value: &dyn fmt::Display, max: usize) -> String {
    let mut w = Bounded::new(max);
    let _ = write!(w, "{value}");
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::assert_truncated;
    use crate::{MAX_FIELD_BYTES, MAX_MESSAGE_BYTES};

    #[test]
    fn truncate_cuts_at_char_boundaries_within_the_limit() {
        assert!(matches!(truncate("short", 10), Cow::Borrowed("short")));
        let exact = "x".repeat(MAX_FIELD_BYTES);
        assert!(matches!(
            truncate(&exact, MAX_FIELD_BYTES),
            Cow::Borrowed(_)
        ));

        let ascii = "a".repeat(100_000);
        let cut = truncate(&ascii, MAX_MESSAGE_BYTES);
        assert_truncated(&ascii, &cut, MAX_MESSAGE_BYTES);
        assert!(cut.ends_with("a…[truncated 97979 bytes]"), "{cut}");

        // Two-, three- and four-byte chars, cut at every offset around the limit.
        let mixed = "aé日😀".repeat(1000);
        for max in 40..80 {
            let cut = truncate(&mixed, max);
            assert_truncated(&mixed, &cut, max);
        }
        for text in ["é".repeat(600), "日".repeat(600), "😀".repeat(600)] {
            assert_truncated(&text, &truncate(&text, MAX_FIELD_BYTES), MAX_FIELD_BYTES);
        }

        // Too small for the marker: the prefix alone, still at a char boundary.
        assert_eq!(truncate("日本語のテキスト", 7), "日本");
        assert_eq!(truncate("abc", 0), "");
    }

    #[test]
    fn bounded_formatting_equals_truncating_the_whole() {
        struct Pieces(&'static str, usize);
        impl fmt::Debug for Pieces {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                for _ in 0..self.1 {
                    f.write_str(self.0)?;
                }
                Ok(())
            }
        }
        for (piece, times) in [("aé日😀", 10_000), ("é", 3), ("x", 512), ("x", 513)] {
            let whole = piece.repeat(times);
            for max in [5, 30, 31, 32, 33, MAX_FIELD_BYTES, MAX_MESSAGE_BYTES] {
                assert_eq!(
                    debug_bounded(&Pieces(piece, times), max),
                    truncate(&whole, max),
                    "{piece:?} x {times}, max {max}"
                );
            }
        }
        let big = "日".repeat(10_000);
        assert_eq!(display_bounded(&big, 100), truncate(&big, 100));
        // `Debug` of a string quotes it; the quotes count.
        assert_eq!(debug_bounded(&"abc", 5), "\"abc\"");
    }
}
