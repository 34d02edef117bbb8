//! External tools: any executable that describes itself with `--schema`
//! and takes its input as JSON on stdin becomes a tool.
//!
//! The protocol (compatible with the ikigai convention):
//! - `TOOL --schema` prints `{"name", "description", "inputSchema" (or
//!   `parameters`), "outputSchema"?, "annotations"?, "capabilities"?,
//!   "title"?, "timeout"? (seconds)}` within a time and size limit.
//! - A call runs `TOOL` with the input JSON on stdin (then closed), in its
//!   own process group, with `SATCHEL_CONVERSATION_ID` and
//!   `SATCHEL_TOOL_CALL_ID` set. Stdout must be one JSON value: the
//!   results. `{"error": "...", "error_code": "..."}` is a tool-level error.
//!   A non-zero exit, a timeout, or output that is not JSON becomes
//!   `TOOL_CRASHED`, `TOOL_TIMEOUT` or `INVALID_OUTPUT` with the head of
//!   stderr.
//!
//! Modules: `naming` (file name → tool name), `schema` (the `--schema`
//! document), `discover` (directories, concurrent probes, precedence),
//! `cache` (specs keyed by path, size and mtime), `tool` (the call),
//! `skeleton` (starting points for new tools).

mod cache;
mod discover;
mod naming;
mod schema;
mod skeleton;
mod tool;

pub use cache::SpecCache;
pub use discover::{Discovery, Skipped, ToolDirs, discover};
pub use naming::tool_name_for_file;
pub use schema::parse_schema_document;
pub use skeleton::{Language, skeleton};
pub use tool::ExternalTool;
