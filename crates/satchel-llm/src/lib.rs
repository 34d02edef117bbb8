//! Model providers: OpenAI-compatible Chat Completions and Anthropic
//! Messages, streaming or not, with exact token accounting.
//!
//! A call flows [`ChatRequest`] (provider-neutral history and tools) →
//! [`Provider::prepare`] (the body serialised once, its tokens counted on
//! those bytes: a [`PreparedRequest`] with a [`TokenEstimate`]) →
//! [`Provider::send`] (exactly those bytes posted, retried on 429/5xx with
//! backoff, cancellable) → [`StreamEvent`]s → a [`Response`] that carries
//! the estimate next to the provider's [`Usage`].
//!
//! For models without native tool calling, [`prompted`] presents tools in
//! the system prompt and reads calls from the model's text;
//! [`ModelConfig::tool_mode`] says which way a model gets its tools.
//!
//! What does not live here: the agent loop, storage of usage rows, the
//! `satchel context` command, reading the process environment (callers
//! pass it to [`LlmConfig::resolve`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), satchel_llm::LlmError> {
//! use std::collections::HashMap;
//! use futures_util::StreamExt;
//! use satchel_core::Message;
//! use satchel_llm::{ChatRequest, LlmConfig, StreamEvent, connect};
//! use tokio_util::sync::CancellationToken;
//!
//! let env: HashMap<String, String> = HashMap::new(); // the binary passes std::env::vars()
//! let provider = connect(LlmConfig::default().resolve(&env)?)?;
//! let history = [Message::system("Be brief."), Message::user("Why is the sky blue?")];
//! let mut events = provider.stream(&ChatRequest::new(&history, &[]), CancellationToken::new())?;
//! while let Some(event) = events.next().await {
//!     match event? {
//!         StreamEvent::TextDelta(text) => print!("{text}"),
//!         StreamEvent::Done(response) => {
//!             println!("\n{} tokens estimated, {:?} reported", response.estimate.total, response.usage);
//!         }
//!         _ => {}
//!     }
//! }
//! # Ok(())
//! # }
//! ```

#![deny(clippy::print_stdout, clippy::print_stderr)]

mod anthropic;
mod calibrate;
pub mod cassette;
mod config;
mod connect;
mod consumer;
mod count_cache;
mod edit_tool;
mod encoding;
mod error;
mod http;
mod limits;
mod models;
mod openai;
mod pretokenize;
pub mod prompted;
mod provider;
mod request;
mod response;
mod sections;
mod server_info;
mod server_report;
mod sse;
mod tokens;
mod vocabulary;

pub use anthropic::{ANTHROPIC_VERSION, AnthropicProvider};
pub use calibrate::Calibration;
pub use cassette::{CassetteError, Tape};
pub use config::{
    ANTHROPIC_URL, ApiKey, ConstrainedReplies, DEFAULT_ANTHROPIC_MODEL, DEFAULT_OLLAMA_MODEL,
    DEFAULT_OLLAMA_URL, DEFAULT_OPENAI_MODEL, LlmConfig, ModelConfig, OPENAI_URL, ProviderKind,
    ReplyFormat, RetryPolicy, ToolCalling, ToolMode,
};
pub use connect::{connect, native_tools_json};
pub use consumer::schema_consumer;
pub use edit_tool::EditToolSetting;
pub use encoding::Encoding;
pub use error::LlmError;
pub use http::{EventStream, collect};
pub use limits::{LimitSource, derived_output_limit};
pub use models::{ModelInfo, UNKNOWN_MODEL, model_info};
pub use openai::OpenAiProvider;
pub use provider::Provider;
pub use request::{ChatRequest, Mode, PreparedRequest, ToolChoice};
pub use response::{AssembledToolCall, Response, StopReason, StreamEvent, Usage};
pub use sections::{Section, SectionTokens};
pub use server_info::{OLLAMA_DEFAULT_NUM_CTX, ask_server, server_info};
pub use server_report::{ServerInfo, ServerKind};
pub use tokens::{IMAGE_TOKENS, TokenEstimate, count_tokens};
pub use vocabulary::set_token_cache_dir;
