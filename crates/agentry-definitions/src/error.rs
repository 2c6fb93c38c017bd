//! The DSL's errors: RFC 7807 problem details (`type`, `status`, `title`, `detail`,
//! `instance`), raised by `raise`, by failed calls and expressions, caught by `try`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Where the DSL's standard error types live (`dsl-reference.md`, "Standard error types").
pub const STANDARD_TYPE_PREFIX: &str = "https://serverlessworkflow.io/spec/1.0.0/errors/";

/// The DSL's standard error types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    Configuration,
    Validation,
    Expression,
    Authentication,
    Authorization,
    Timeout,
    Communication,
    Runtime,
}

impl ErrorType {
    /// The last segment of its URI and its default status.
    fn parts(self) -> (&'static str, u16) {
        match self {
            ErrorType::Configuration => ("configuration", 400),
            ErrorType::Validation => ("validation", 400),
            ErrorType::Expression => ("expression", 400),
            ErrorType::Authentication => ("authentication", 401),
            ErrorType::Authorization => ("authorization", 403),
            ErrorType::Timeout => ("timeout", 408),
            ErrorType::Communication => ("communication", 500),
            ErrorType::Runtime => ("runtime", 500),
        }
    }

    /// Its URI.
    pub fn uri(self) -> String {
        format!("{STANDARD_TYPE_PREFIX}{}", self.parts().0)
    }

    /// The status it has unless the occurrence gives one.
    pub fn default_status(self) -> u16 {
        self.parts().1
    }
}

/// One error, as the DSL describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DslError {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The JSON pointer of the task that raised it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
}

impl DslError {
    /// An error of a standard type with its default status.
    pub fn standard(kind: ErrorType, title: &str, detail: impl Into<String>) -> Self {
        Self {
            type_: kind.uri(),
            status: kind.default_status(),
            title: Some(title.to_owned()),
            detail: Some(detail.into()),
            instance: None,
        }
    }

    /// A failed expression (`expression`, 400).
    pub fn expression(detail: impl Into<String>) -> Self {
        Self::standard(ErrorType::Expression, "Expression Error", detail)
    }

    /// A value that does not match its schema (`validation`, 400).
    pub fn validation(detail: impl Into<String>) -> Self {
        Self::standard(ErrorType::Validation, "Validation Error", detail)
    }

    /// A failure of the runtime itself (`runtime`, 500).
    pub fn runtime(detail: impl Into<String>) -> Self {
        Self::standard(ErrorType::Runtime, "Runtime Error", detail)
    }

    /// A task that took too long (`timeout`, 408).
    pub fn timeout(detail: impl Into<String>) -> Self {
        Self::standard(ErrorType::Timeout, "Timeout", detail)
    }

    /// A call that failed (`communication`, with the response's status when there is one).
    pub fn communication(status: Option<u16>, detail: impl Into<String>) -> Self {
        let mut e = Self::standard(ErrorType::Communication, "Communication Error", detail);
        if let Some(s) = status {
            e.status = s;
        }
        e
    }

    /// The error a `raise` evaluated (its fields from the definition): a missing or mistyped
    /// `type` or `status` makes it a runtime error instead.
    pub fn from_value(v: &Value) -> Self {
        match serde_json::from_value::<DslError>(v.clone()) {
            Ok(e) => e,
            Err(e) => Self::runtime(format!("the raised error is malformed: {e}")),
        }
    }

    /// Sets `instance` unless it is set (the innermost task that raised it wins).
    pub fn at(mut self, reference: &str) -> Self {
        if self.instance.is_none() {
            self.instance = Some(reference.to_owned());
        }
        self
    }

    /// The error as a JSON object (`$error` in a `catch`, the execution's error).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Whether it matches a `catch.errors.with` filter: every field the filter gives is equal.
    pub fn matches(&self, filter: &Map<String, Value>) -> bool {
        let me = self.to_value();
        filter.iter().all(|(k, want)| me.get(k) == Some(want))
    }

    /// One line for logs and the execution's error message: `title: detail` or what there is.
    pub fn message(&self) -> String {
        match (&self.title, &self.detail) {
            (Some(t), Some(d)) => format!("{t}: {d}"),
            (Some(t), None) => t.clone(),
            (None, Some(d)) => d.clone(),
            (None, None) => format!("{} ({})", self.type_, self.status),
        }
    }
}

impl std::fmt::Display for DslError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}
