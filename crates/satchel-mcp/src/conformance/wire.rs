//! Fixture results are written as the JSON the suite expects and read into
//! rmcp's types here: the shapes stay easy to compare with the suite's
//! scenario descriptions, and a shape rmcp cannot take is an error, not a
//! panic.

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// `value` as an rmcp type.
pub(super) fn wire<T: DeserializeOwned>(value: Value) -> Result<T, ErrorData> {
    serde_json::from_value(value).map_err(|error| {
        ErrorData::internal_error(format!("fixture result does not fit rmcp: {error}"), None)
    })
}

/// A successful result with one text block.
pub(super) fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// `value` as a JSON object (an empty one when it is not an object).
pub(super) fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}
