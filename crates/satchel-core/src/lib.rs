//! Plain types shared by every Satchel crate.
//!
//! What lives here: the tool model as it crosses boundaries ([`ToolSpec`],
//! [`ToolCall`], [`ToolOutput`], [`Content`]), the stable [`ErrorCode`]s a
//! model can act on, and the provider-neutral LLM history ([`Message`]).
//! What does not: I/O of any kind, validation, running tools, provider wire
//! formats. Those belong to `satchel-tools`, `satchel-exec`, `satchel-llm`.
//!
//! Field names follow the Model Context Protocol (`inputSchema`,
//! `outputSchema`, `annotations`, `readOnlyHint`...) so that a spec can be
//! served over MCP unchanged.

pub mod edit_forms;
mod error_code;
mod message;
mod output;
pub mod portable;
pub mod redact;
mod spec;
pub mod text;

pub use error_code::ErrorCode;
pub use message::{AssistantPart, Message, ToolResult};
pub use output::{Content, ToolCall, ToolOutput, ToolResults};
pub use spec::{Capabilities, Resource, ToolAnnotations, ToolSpec, is_valid_tool_name};
