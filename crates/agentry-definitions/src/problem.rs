//! What is wrong with a definition: where (the file and the JSON pointer inside it) and why.

use std::fmt;

/// One problem of a definition. A load or a check reports every problem it finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file (or, for a document deployed through the API, its name).
    pub file: String,
    /// Where in the document, as a JSON pointer (RFC 6901): `/do/0/getPet/call`; `""` for the
    /// whole document.
    pub pointer: String,
    pub reason: String,
}

impl Problem {
    pub fn new(
        file: impl Into<String>,
        pointer: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            file: file.into(),
            pointer: pointer.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pointer = if self.pointer.is_empty() {
            "/"
        } else {
            &self.pointer
        };
        write!(f, "{}: {}: {}", self.file, pointer, self.reason)
    }
}
