//! Turning JSON Schema validation errors into messages a model can act on.

use serde::Serialize;

/// One way an input broke its schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchemaViolation {
    /// JSON Pointer to the offending value (`""` is the whole input).
    pub path: String,
    /// The schema keyword broken, e.g. `required`, `minimum`.
    pub rule: String,
    /// What is wrong, in words.
    pub message: String,
}

impl SchemaViolation {
    /// The violation `error` reports against `schema`; a rule under a
    /// condition says which (`"content" is a required property when
    /// `action` is `store``), so an action-based tool's error names both.
    pub(crate) fn from_error(
        error: &jsonschema::ValidationError<'_>,
        schema: &serde_json::Value,
    ) -> SchemaViolation {
        let schema_path = error.schema_path().to_string();
        let mut message = error.to_string();
        if let Some(condition) = satchel_core::portable::condition_at(schema, &schema_path) {
            message = format!("{message} {condition}");
        }
        let rule = schema_path
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        SchemaViolation {
            path: error.instance_path().to_string(),
            rule,
            message,
        }
    }

    /// `at /timeout: -1 is less than the minimum of 1 (minimum)`.
    pub fn describe(&self) -> String {
        let path = if self.path.is_empty() {
            "input root"
        } else {
            &self.path
        };
        format!("at {path}: {} ({})", self.message, self.rule)
    }
}

/// Most violations reported for one call; more only bury the first ones.
pub(crate) const MAX_VIOLATIONS: usize = 10;
