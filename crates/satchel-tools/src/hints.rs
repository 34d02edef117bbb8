//! Words for configuration messages: the name of a JSON value's type, and
//! the known name nearest to a misspelt one. Kept apart so that every
//! reader of configuration (`config`, `config_schema`, `policy`, `hooks`)
//! can use them without importing another.

use serde_json::Value;

/// The name of a JSON value's type, for messages.
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The known name nearest to `unknown`, when one is close enough to be a
/// likely typo.
pub fn nearest<'k>(unknown: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|key| {
            let distance =
                strsim::levenshtein(&unknown.to_ascii_lowercase(), &key.to_ascii_lowercase());
            (distance, *key)
        })
        .filter(|(distance, key)| *distance <= (key.len() / 3).max(2))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, key)| key)
}
