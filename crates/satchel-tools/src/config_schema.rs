//! The JSON Schema of agent.json (`satchel config schema`, editors through
//! `$schema`), and what it tells the readers of configuration: every key
//! Satchel knows, so a misplaced or misspelt key gets the nearest known
//! one as a suggestion (`toolCalling` → `llm.toolCalling`).
//!
//! The schema describes; it does not decide. Each section is still read
//! by its owner (`permissions` fail closed, the others with warnings).

use std::sync::LazyLock;

use serde_json::Value;

/// The schema's text, as printed by `satchel config schema`.
pub const AGENT_SCHEMA: &str = include_str!("agent.schema.json");

/// The schema, parsed once.
pub fn agent_schema() -> &'static Value {
    static SCHEMA: LazyLock<Value> =
        LazyLock::new(|| serde_json::from_str(AGENT_SCHEMA).unwrap_or(Value::Null));
    &SCHEMA
}

/// Every key path the schema names (objects' properties, depth first),
/// dotted: `llm.toolCalling`, `memory.recall.fusion`...
pub fn known_paths() -> &'static [String] {
    static PATHS: LazyLock<Vec<String>> = LazyLock::new(|| {
        let mut paths = Vec::new();
        collect(agent_schema(), "", &mut paths);
        paths
    });
    &PATHS
}

fn resolve(schema: &Value) -> &Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => reference
            .strip_prefix("#/")
            .map(|pointer| format!("/{pointer}"))
            .and_then(|pointer| agent_schema().pointer(&pointer))
            .unwrap_or(schema),
        None => schema,
    }
}

fn collect(schema: &Value, prefix: &str, paths: &mut Vec<String>) {
    let Some(properties) = resolve(schema).get("properties").and_then(Value::as_object) else {
        return;
    };
    for (key, child) in properties {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        paths.push(path.clone());
        collect(child, &path, paths);
    }
}

/// The keys the schema knows directly under `parent` (dotted; empty for
/// the top level); empty when it knows none (free-form maps).
pub fn keys_under(parent: &str) -> Vec<&'static str> {
    let mut schema = agent_schema();
    for key in parent.split('.').filter(|key| !key.is_empty()) {
        match resolve(schema).get("properties").and_then(|p| p.get(key)) {
            Some(child) => schema = child,
            None => return Vec::new(),
        }
    }
    resolve(schema)
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| properties.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

/// The known key path nearest to `unknown` found under `parent` (dotted,
/// empty for the top level): a sibling with a close spelling first, else
/// a key of the same or a close name anywhere else (a key put in the
/// wrong section). `None` when nothing is close.
pub fn suggest(parent: &str, unknown: &str) -> Option<String> {
    let join = |key: &str| {
        if parent.is_empty() {
            key.to_owned()
        } else {
            format!("{parent}.{key}")
        }
    };
    let siblings = keys_under(parent);
    if let Some(near) = crate::hints::nearest(unknown, &siblings) {
        return Some(join(near));
    }
    // A shortened name (`stdoutLimt` for `stdoutLimitBytes`) is far by
    // edits but shares its start: Jaro-Winkler favours common prefixes.
    let lower = unknown.to_ascii_lowercase();
    let prefixed = siblings
        .iter()
        .map(|key| {
            (
                strsim::jaro_winkler(&lower, &key.to_ascii_lowercase()),
                *key,
            )
        })
        .filter(|(score, _)| *score >= 0.88)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((_, key)) = prefixed {
        return Some(join(key));
    }
    let last = |path: &'static String| path.rsplit('.').next().unwrap_or(path);
    if let Some(same) = known_paths()
        .iter()
        .find(|path| last(path).to_ascii_lowercase() == lower)
    {
        return Some(same.clone());
    }
    let names: Vec<&str> = known_paths().iter().map(last).collect();
    let near = crate::hints::nearest(unknown, &names)?;
    known_paths()
        .iter()
        .find(|path| last(path) == near)
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_parses_and_lists_every_section() {
        assert!(agent_schema().is_object());
        for key in crate::config::TOP_LEVEL_KEYS {
            assert!(
                keys_under("").contains(key),
                "{key} missing from the schema"
            );
        }
        for key in keys_under("") {
            assert!(
                crate::config::TOP_LEVEL_KEYS.contains(&key),
                "{key} is in the schema but not read"
            );
        }
        assert!(known_paths().iter().any(|p| p == "memory.recall.fusion"));
        assert!(known_paths().iter().any(|p| p == "search.brave.apiKeyEnv"));
    }

    #[test]
    fn suggestions_look_in_the_section_then_everywhere() {
        assert_eq!(
            suggest("", "toolCalling").as_deref(),
            Some("llm.toolCalling")
        );
        assert_eq!(suggest("", "maxTurn").as_deref(), Some("maxTurns"));
        assert_eq!(
            suggest("exec", "stdoutLimt").as_deref(),
            Some("exec.stdoutLimitBytes")
        );
        assert_eq!(suggest("llm", "modle").as_deref(), Some("llm.model"));
        assert_eq!(
            suggest("", "timeZone").as_deref(),
            Some("memory.sessions.timeZone")
        );
        assert_eq!(suggest("", "zzzzzzzzzz"), None);
    }
}
