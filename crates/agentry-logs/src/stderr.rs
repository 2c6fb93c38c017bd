//! The field formatter of the stderr output, with the limits of the log buffer.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::Writer;

use crate::truncate::debug_bounded;
use crate::{MAX_FIELD_BYTES, MAX_MESSAGE_BYTES};

/// The field formatter of the stderr output, with the limits of the log buffer: formats an
/// event's (or a span's) fields like `tracing_subscriber`'s default formatter (the message
/// first, without a name, then `name=value` with the value's `Debug` form, so strings quoted,
/// separated by spaces; `log.*` fields left out), with the message [`truncate`]d to
/// [`MAX_MESSAGE_BYTES`] and every other value to [`MAX_FIELD_BYTES`]. Field names are not
/// styled, even on a terminal. See [`stderr_fields`].
#[derive(Debug, Clone, Copy, Default)]
pub struct BoundedFields;

/// The stderr output's field formatter:
/// `tracing_subscriber::fmt::layer().fmt_fields(stderr_fields())`, so that a client cannot flood
/// stderr with one huge path or error message either.
pub fn stderr_fields() -> BoundedFields {
    BoundedFields
}

impl<'w> FormatFields<'w> for BoundedFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut visitor = FieldWriter {
            writer,
            messages: true,
            empty: true,
            result: Ok(()),
        };
        // The message first, wherever it was recorded; then the other fields.
        fields.record(&mut visitor);
        visitor.messages = false;
        fields.record(&mut visitor);
        visitor.result
    }
}

/// Writes the fields of one pass of [`BoundedFields`].
struct FieldWriter<'w> {
    writer: Writer<'w>,
    /// Whether this pass writes the message (or the other fields).
    messages: bool,
    /// Whether nothing was written yet (no separator needed).
    empty: bool,
    result: fmt::Result,
}

impl FieldWriter<'_> {
    fn write(&mut self, name: &str, text: &str) -> fmt::Result {
        if !std::mem::take(&mut self.empty) {
            self.writer.write_char(' ')?;
        }
        if name != "message" {
            self.writer
                .write_str(name.strip_prefix("r#").unwrap_or(name))?;
            self.writer.write_char('=')?;
        }
        self.writer.write_str(text)
    }
}

impl Visit for FieldWriter<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"));
        } else {
            self.record_debug(field, &value);
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.record_debug(field, &format_args!("{value}"));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let name = field.name();
        let is_message = name == "message";
        if self.result.is_err() || is_message != self.messages || name.starts_with("log.") {
            return;
        }
        let limit = if is_message {
            MAX_MESSAGE_BYTES
        } else {
            MAX_FIELD_BYTES
        };
        let text = debug_bounded(value, limit);
        self.result = self.write(name, &text);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::testing::assert_truncated;
    use tracing_subscriber::layer::SubscriberExt;

    /// A `MakeWriter` into a shared buffer.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
        type Writer = Captured;

        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    #[test]
    fn stderr_fields_truncate_like_the_buffer() {
        let out = Captured::default();
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .fmt_fields(stderr_fields())
                .with_writer(out.clone())
                .with_ansi(false),
        );
        let big = "é".repeat(50_000);
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(path = %big, n = 3, "{big}");
            let span = tracing::info_span!("request", r#type = "short", id = %big);
            let _g = span.enter();
            tracing::warn!(reason = "no", "short message");
        });
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");

        // The message first, without a name, then the fields.
        let (_, fields) = lines[0].split_once(": ").unwrap();
        let (message, rest) = fields.split_once(" path=").unwrap();
        assert_truncated(&big, message, MAX_MESSAGE_BYTES);
        let (path, n) = rest.rsplit_once(' ').unwrap();
        assert_truncated(&big, path, MAX_FIELD_BYTES);
        assert_eq!(n, "n=3");
        assert!(lines[0].len() < MAX_MESSAGE_BYTES + MAX_FIELD_BYTES + 200);

        // Span fields are cut too; a string field is quoted, a raw identifier loses its `r#`.
        assert!(
            lines[1].contains("request{type=\"short\" id=éé"),
            "{}",
            lines[1]
        );
        assert!(lines[1].contains("…[truncated "), "{}", lines[1]);
        assert!(
            lines[1].ends_with(": short message reason=\"no\""),
            "{}",
            lines[1]
        );
        assert!(lines[1].len() < MAX_FIELD_BYTES + 300);
    }
}
