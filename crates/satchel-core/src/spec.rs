//! What a tool says about itself: [`ToolSpec`] and its parts.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool's self-description, serialised with MCP's field names.
///
/// `capabilities` is Satchel's own addition: what the tool reads and writes,
/// used to decide which calls of one turn may run concurrently.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    /// Unique name the model calls the tool by; see [`is_valid_tool_name`].
    pub name: String,
    /// Human-readable title for user interfaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does and when to use it, written for the model.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the input; every call is validated against it.
    pub input_schema: Value,
    /// JSON Schema of the structured results, when the tool promises one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// MCP behaviour hints (read-only, destructive, idempotent, open-world).
    #[serde(default)]
    pub annotations: ToolAnnotations,
    /// Resources the tool reads and writes.
    #[serde(default)]
    pub capabilities: Capabilities,
}

/// MCP tool annotations: hints about behaviour, never a security boundary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    /// The tool does not change its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool may destroy or overwrite data (meaningful when not read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Calling the tool twice with the same input has no further effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// The tool talks to an open world (the internet, other people).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
    /// Calls usually take long (minutes): a caller that can run a call in
    /// the background (an MCP client with the tasks extension) should. Not
    /// an MCP annotation; external tools declare it in their `--schema`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_running_hint: Option<bool>,
}

/// What a tool reads and writes, so callers can order conflicting calls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// Resources the tool may read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reads: Vec<Resource>,
    /// Resources the tool may change.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<Resource>,
}

impl Capabilities {
    /// True when running `self` and `other` concurrently could race: one
    /// writes a resource that the other reads or writes.
    pub fn conflicts_with(&self, other: &Capabilities) -> bool {
        let touches = |caps: &Capabilities, resource: &Resource| {
            caps.reads.contains(resource) || caps.writes.contains(resource)
        };
        self.writes.iter().any(|r| touches(other, r))
            || other.writes.iter().any(|r| touches(self, r))
    }
}

/// A kind of resource a tool touches: `files`, `internet`, `memory`,
/// `execution`, or any other name a tool declares.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Resource(Cow<'static, str>);

impl Resource {
    /// The file system.
    pub const FILES: Resource = Resource(Cow::Borrowed("files"));
    /// Hosts beyond this machine.
    pub const INTERNET: Resource = Resource(Cow::Borrowed("internet"));
    /// Satchel's memory store.
    pub const MEMORY: Resource = Resource(Cow::Borrowed("memory"));
    /// Running processes (spawning, signalling).
    pub const EXECUTION: Resource = Resource(Cow::Borrowed("execution"));

    /// A resource of any other name.
    pub fn named(name: impl Into<String>) -> Resource {
        Resource(Cow::Owned(name.into()))
    }

    /// The resource's name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// True for names every provider accepts: 1 to 64 ASCII letters, digits,
/// `_` or `-` (the intersection of OpenAI's, Anthropic's and MCP's rules).
pub fn is_valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn spec_serialises_with_mcp_field_names() {
        let spec = ToolSpec {
            name: "bash".into(),
            title: Some("Bash".into()),
            description: "Run a command".into(),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            annotations: ToolAnnotations {
                read_only_hint: Some(false),
                open_world_hint: Some(true),
                ..ToolAnnotations::default()
            },
            capabilities: Capabilities {
                reads: vec![Resource::FILES],
                writes: vec![Resource::FILES, Resource::named("gpu")],
            },
        };
        let value = serde_json::to_value(&spec).unwrap();
        assert_eq!(
            value,
            json!({
                "name": "bash",
                "title": "Bash",
                "description": "Run a command",
                "inputSchema": {"type": "object"},
                "annotations": {"readOnlyHint": false, "openWorldHint": true},
                "capabilities": {"reads": ["files"], "writes": ["files", "gpu"]},
            })
        );
        assert_eq!(serde_json::from_value::<ToolSpec>(value).unwrap(), spec);
    }

    #[test]
    fn capabilities_conflict_only_through_a_write() {
        let reader = Capabilities {
            reads: vec![Resource::FILES],
            writes: vec![],
        };
        let writer = Capabilities {
            reads: vec![],
            writes: vec![Resource::FILES],
        };
        let other = Capabilities {
            reads: vec![],
            writes: vec![Resource::MEMORY],
        };
        assert!(!reader.conflicts_with(&reader));
        assert!(reader.conflicts_with(&writer));
        assert!(writer.conflicts_with(&reader));
        assert!(writer.conflicts_with(&writer));
        assert!(!writer.conflicts_with(&other));
    }

    #[test]
    fn tool_names_follow_the_strictest_provider() {
        assert!(is_valid_tool_name("bash"));
        assert!(is_valid_tool_name("mcp_server__read-file"));
        assert!(!is_valid_tool_name(""));
        assert!(!is_valid_tool_name("has space"));
        assert!(!is_valid_tool_name("dotted.name"));
        assert!(!is_valid_tool_name(&"x".repeat(65)));
    }
}
