//! What a replayed request is compared on: its JSON body with what changes
//! from run to run left out (ids of tool calls and conversations, UUIDs,
//! timestamps, durations), and the first place two bodies differ, as a
//! JSON path with both values, for the error a mismatch fails with.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// Object keys whose string values are ids.
const ID_KEYS: [&str; 4] = ["id", "tool_call_id", "tool_use_id", "call_id"];

/// What stands for a value left out.
const ID: &str = "<id>";

/// Patterns in text that change from run to run, and what replaces them.
static VOLATILE: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        // UUIDs (conversation, statement and spill-file names).
        (
            r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
            "<uuid>",
        ),
        // RFC 3339 and similar timestamps, then bare dates.
        (
            r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?",
            "<time>",
        ),
        // Durations: `"duration_ms": 12` (also inside JSON in a string),
        // `12 ms`, `1.5 s`.
        (r#"(duration_ms\\?"\s*:\s*)\d+"#, "${1}<n>"),
        (r"\b\d+(\.\d+)? ?(ms|µs|s)\b", "<duration>"),
        // Tool-call ids made by providers and by Satchel.
        (r"\b(call|toolu|chatcmpl|fc)_[A-Za-z0-9_-]+", "<id>"),
    ]
    .into_iter()
    .filter_map(|(pattern, to)| Regex::new(pattern).ok().map(|re| (re, to)))
    .collect()
});

/// `body` with ids, UUIDs, times and durations replaced by placeholders.
pub fn normalize_body(body: &Value) -> Value {
    match body {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| {
                    let value = match value {
                        Value::String(_) if ID_KEYS.contains(&key.as_str()) => ID.into(),
                        other => normalize_body(other),
                    };
                    (key.clone(), value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(normalize_body).collect()),
        Value::String(text) => Value::String(normalize_text(text)),
        other => other.clone(),
    }
}

fn normalize_text(text: &str) -> String {
    let mut text = text.to_owned();
    for (pattern, to) in VOLATILE.iter() {
        if let std::borrow::Cow::Owned(replaced) = pattern.replace_all(&text, *to) {
            text = replaced;
        }
    }
    text
}

/// Where `recorded` and `sent` first differ: a JSON path and both values
/// (cut to 200 characters), e.g.
/// `messages[1].content: recorded "list files", sent "list all files"`.
pub fn first_difference(recorded: &Value, sent: &Value) -> String {
    let mut path = String::from("$");
    match walk(recorded, sent, &mut path) {
        Some(found) => found,
        None => "nothing (the bodies are the same)".to_owned(),
    }
}

fn show(value: Option<&Value>) -> String {
    match value {
        None => "nothing".to_owned(),
        Some(value) => satchel_core::text::cut_with(&value.to_string(), 200, "..."),
    }
}

fn walk(recorded: &Value, sent: &Value, path: &mut String) -> Option<String> {
    match (recorded, sent) {
        (Value::Object(a), Value::Object(b)) => {
            for key in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
                let (x, y) = (a.get(key), b.get(key));
                let len = path.len();
                path.push('.');
                path.push_str(key);
                let found = match (x, y) {
                    (Some(x), Some(y)) => walk(x, y, path),
                    _ => Some(format!("{path}: recorded {}, sent {}", show(x), show(y))),
                };
                if found.is_some() {
                    return found;
                }
                path.truncate(len);
            }
            None
        }
        (Value::Array(a), Value::Array(b)) => {
            for index in 0..a.len().max(b.len()) {
                let len = path.len();
                path.push_str(&format!("[{index}]"));
                let found = match (a.get(index), b.get(index)) {
                    (Some(x), Some(y)) => walk(x, y, path),
                    (x, y) => Some(format!("{path}: recorded {}, sent {}", show(x), show(y))),
                };
                if found.is_some() {
                    return found;
                }
                path.truncate(len);
            }
            None
        }
        (a, b) if a == b => None,
        (a, b) => Some(format!(
            "{path}: recorded {}, sent {}",
            show(Some(a)),
            show(Some(b))
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn ids_times_and_durations_are_left_out() {
        let a = json!({"messages": [
            {"role": "tool", "tool_call_id": "call_abc", "content": "{\"duration_ms\":12,\"at\":\"2026-11-28T10:00:01Z\"}"},
            {"role": "user", "content": "ran in 4 ms, file /tmp/0193a1b2-1111-7222-8333-444455556666.txt"}
        ]});
        let b = json!({"messages": [
            {"role": "tool", "tool_call_id": "call_xyz", "content": "{\"duration_ms\":9,\"at\":\"2026-11-29T11:12:13Z\"}"},
            {"role": "user", "content": "ran in 17 ms, file /tmp/0193ffff-1111-7222-8333-444455556666.txt"}
        ]});
        assert_eq!(normalize_body(&a), normalize_body(&b));
    }

    #[test]
    fn the_first_difference_is_named_with_its_path() {
        let a = json!({"model": "m", "messages": [{"role": "user", "content": "list files"}]});
        let b = json!({"model": "m", "messages": [{"role": "user", "content": "list all files"}]});
        assert_eq!(
            first_difference(&a, &b),
            r#"$.messages[0].content: recorded "list files", sent "list all files""#
        );
        let c = json!({"model": "m", "messages": []});
        assert_eq!(
            first_difference(&a, &c),
            r#"$.messages[0]: recorded {"role":"user","content":"list files"}, sent nothing"#
        );
    }
}
