use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The authenticated user object (spec section 2): whatever the provider produced, usually an
/// object with `id`, `email`, `name`, `roles` and `tier`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct User(pub Value);

impl User {
    pub fn new(value: Value) -> Self {
        User(value)
    }

    /// `id`, as a string (numbers are rendered); the request's `userId`.
    pub fn id(&self) -> Option<String> {
        match self.0.get("id")? {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }

    /// The `roles` array's strings.
    pub fn roles(&self) -> Vec<&str> {
        self.0
            .get("roles")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    pub fn has_role(&self, role: &str) -> bool {
        self.roles().contains(&role)
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    pub fn as_json(&self) -> &Value {
        &self.0
    }

    pub fn into_json(self) -> Value {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn id_and_roles() {
        let u = User::new(json!({"id": "u1", "roles": ["admin", 3, "ops"]}));
        assert_eq!(u.id().as_deref(), Some("u1"));
        assert_eq!(u.roles(), ["admin", "ops"]);
        assert!(u.has_role("admin") && !u.has_role("root"));
        assert_eq!(User::new(json!({"id": 42})).id().as_deref(), Some("42"));
        assert_eq!(User::new(json!({"id": ""})).id(), None);
        assert!(User::new(json!("x")).roles().is_empty());
    }
}
