//! What the end-to-end tests share: a temporary project, a real model
//! server, and a small MCP-over-HTTP client.

pub mod fake_anthropic;
pub mod mcp_http;
pub mod model_server;
pub mod project;
