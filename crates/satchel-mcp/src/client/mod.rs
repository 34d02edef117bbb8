//! The MCP client: other servers' tools in Satchel's registry.
//!
//! `config` reads `mcp.json` (the common `mcpServers` shape), `manager`
//! starts and supervises the servers, `connection` and `process` hold one
//! live connection and a stdio server's process group, `naming` gives
//! imported tools their `server__tool` names, `tool` is [`McpTool`],
//! the `Tool` that forwards a call, `offers` is what servers offer besides
//! tools (resources and prompts), `elicit` their questions to the user and
//! `sample` their requests for a model's answer; `describe` puts rmcp's
//! errors in words.
//! Remote servers: `remote` connects over streamable HTTP with `oauth`
//! (discovery, registration, the browser or headless redirect, step-up,
//! the token store); `connect` is what `satchel mcp connect` does with one,
//! and `conformance` drives it for the official conformance suite's client
//! scenarios. `import` reads the servers other clients (Claude Desktop,
//! Claude Code, Cursor, VS Code, Codex) were given, for `satchel mcp import`.

pub mod config;
pub mod conformance;
pub mod connect;
mod connection;
mod describe;
mod elicit;
pub mod import;
mod link;
mod manager;
pub mod naming;
pub mod oauth;
mod offers;
mod process;
pub mod remote;
mod sample;
mod tool;

pub use config::{McpConfig, ServerConfig, TransportConfig};
pub use describe::scrub;
pub use elicit::{AskerSlot, ElicitationAsker, Elicited, Question};
pub use link::{ImportedTool, ServerState, ServerStatus};
pub use manager::{ManagerOptions, McpManager, RestartPolicy};
pub use offers::{Listed, Offers, PROMPTS_TOOL, RESOURCES_TOOL};
pub use sample::{SampleMessage, SampleRequest, Sampled, Sampler, SamplerSlot};
pub use tool::{GROUP, McpTool};
