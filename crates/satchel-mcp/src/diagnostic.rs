//! A diagnostic tool: `echo` returns its input. It measures what the MCP
//! path itself costs (transport, lookup, validation, conversion) with a
//! tool body that costs nothing, and lets a client check it is wired up.
//!
//! It is offered only when asked for (`satchel mcp serve --echo-tool`),
//! through the same extension point as imported MCP tools.

use async_trait::async_trait;
use satchel_core::{ToolAnnotations, ToolOutput, ToolResults, ToolSpec};
use satchel_tools::{Tool, ToolContext, ToolError, ToolSource};
use serde_json::{Value, json};

/// The group the diagnostic tools are registered under.
pub const GROUP: &str = "diagnostic";

/// Returns `{"message": ...}` as it was sent.
pub struct EchoTool {
    spec: ToolSpec,
}

impl EchoTool {
    /// The tool, named `echo`.
    pub fn new() -> EchoTool {
        EchoTool {
            spec: ToolSpec {
                name: "echo".into(),
                title: Some("Echo".into()),
                description: "Return the message unchanged. A diagnostic tool: use it to check \
                              that the connection to Satchel works."
                    .into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {"message": {"type": "string", "description": "Text to send back."}},
                    "required": ["message"],
                    "additionalProperties": false,
                }),
                output_schema: Some(json!({
                    "type": "object",
                    "properties": {"message": {"type": "string"}},
                    "required": ["message"],
                })),
                annotations: ToolAnnotations {
                    read_only_hint: Some(true),
                    idempotent_hint: Some(true),
                    open_world_hint: Some(false),
                    ..ToolAnnotations::default()
                },
                capabilities: Default::default(),
            },
        }
    }
}

impl Default for EchoTool {
    fn default() -> EchoTool {
        EchoTool::new()
    }
}

#[async_trait]
impl Tool for EchoTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn source(&self) -> ToolSource {
        ToolSource::Extra {
            group: GROUP.into(),
            origin: "echo".into(),
        }
    }

    async fn run(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let message = input.get("message").cloned().unwrap_or(Value::Null);
        Ok(ToolOutput::success(
            ToolResults::json(json!({"message": message})),
            "echoed the message",
        ))
    }
}
