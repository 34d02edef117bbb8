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
    pub(crate) fn from_error(error: &jsonschema::ValidationError<'_>) -> SchemaViolation {
        let schema_path = error.schema_path().to_string();
        let rule = schema_path
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        SchemaViolation {
            path: error.instance_path().to_string(),
            rule,
            message: error.to_string(),
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
