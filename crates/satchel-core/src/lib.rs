//! Plain types shared by every Satchel crate.
//!
//! What lives here: the tool model as it crosses boundaries ([`ToolSpec`],
//! [`ToolCall`], [`ToolOutput`], [`Content`]) and the stable [`ErrorCode`]s a
//! model can act on. What does not: I/O of any kind, validation, running
//! tools. Those belong to `satchel-tools` and `satchel-exec`.
//!
//! Field names follow the Model Context Protocol (`inputSchema`,
//! `outputSchema`, `annotations`, `readOnlyHint`...) so that a spec can be
//! served over MCP unchanged.

mod error_code;
mod output;
mod spec;

pub use error_code::ErrorCode;
pub use output::{Content, ToolCall, ToolOutput, ToolResults};
pub use spec::{Capabilities, Resource, ToolAnnotations, ToolSpec, is_valid_tool_name};
