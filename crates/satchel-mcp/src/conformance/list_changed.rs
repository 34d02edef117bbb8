//! `test_trigger_tool_change`: the suite's hook for "the tool list changed".
//! It adds or removes a real Satchel tool in the [`LiveRegistry`], under
//! its own group, so what the suite observes is Satchel's own machinery:
//! `notifications/tools/list_changed` through the peer of an
//! `initialize` session and through `subscriptions/listen` streams.
//! (Its prompt twin lives in [`super::prompts`].)

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use rmcp::ErrorData;
use rmcp::model::CallToolResponse;
use satchel_core::{ToolAnnotations, ToolOutput, ToolResults, ToolSpec};
use satchel_tools::{LiveRegistry, Tool, ToolContext, ToolError, ToolSource};
use serde_json::{Value, json};

use super::wire::text;

/// The registry group the fixtures' tool is registered under.
pub const GROUP: &str = "conformance";

/// The tool that comes and goes.
const DYNAMIC_TOOL: &str = "test_dynamic_tool";

/// Whether the dynamic tool is in the registry now.
#[derive(Default)]
pub(super) struct ToolToggle {
    present: AtomicBool,
}

impl ToolToggle {
    /// Adds the dynamic tool when absent, removes it when present.
    pub(super) fn flip(&self, live: &LiveRegistry) -> Result<CallToolResponse, ErrorData> {
        let now_present = !self.present.fetch_xor(true, Ordering::SeqCst);
        let tools: Vec<Arc<dyn Tool>> = if now_present {
            vec![Arc::new(DynamicTool::new())]
        } else {
            Vec::new()
        };
        live.set_extra_tools(GROUP, tools)
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
        let what = if now_present { "added" } else { "removed" };
        Ok(text(format!("Mutation triggered: {DYNAMIC_TOOL} {what}")).into())
    }
}

/// A tool that exists only to be added and removed.
struct DynamicTool {
    spec: ToolSpec,
}

impl DynamicTool {
    fn new() -> DynamicTool {
        DynamicTool {
            spec: ToolSpec {
                name: DYNAMIC_TOOL.into(),
                title: Some("Dynamic tool".into()),
                description: "A conformance fixture added by test_trigger_tool_change; returns \
                              a fixed text."
                    .into(),
                input_schema: json!({"type": "object", "properties": {}}),
                output_schema: None,
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

#[async_trait]
impl Tool for DynamicTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn source(&self) -> ToolSource {
        ToolSource::Extra {
            group: GROUP.into(),
            origin: "test_trigger_tool_change".into(),
        }
    }

    async fn run(&self, _input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::success(
            ToolResults::Text("This tool was added by test_trigger_tool_change.".into()),
            "answered",
        ))
    }
}
