//! Tools for models without native tool calling (`toolCalling: "prompted"`):
//! the tools are described in the system prompt, the model asks for calls
//! in a JSON object in its text, and the results go back as text.
//!
//! One turn in prompted mode, as the agent loop drives it:
//! 1. the system prompt carries [`render_tools`] (each tool in a compact
//!    shape generated from its `ToolSpec`, then [`CALL_INSTRUCTION`]); the
//!    request's `tools` is empty;
//! 2. the model's text goes through [`parse_reply`]: the prose is the
//!    assistant's message; [`ReplyOutcome::Final`] ends the statement;
//!    [`ReplyOutcome::Calls`] gives calls for dispatch
//!    ([`PromptedCall::to_tool_call`]) or, for an entry that is not a call,
//!    the error output the model sees; [`ReplyOutcome::Invalid`] runs
//!    nothing and sends [`ReplyError::to_output`] back;
//! 3. the assistant message is kept in the history as the model wrote it
//!    (text), and the outputs go back in the next user message as
//!    [`format_results`].
//!
//! Where the server can enforce a schema (`llm.constrainedReplies`), the
//! request also carries [`reply_schema`] and the prompt
//! [`ANSWER_INSTRUCTION`]: every reply is then a call object or
//! `{"answer": "..."}`.
//!
//! Files: `render` (specs → text), `parse` (finding and reading the call
//! object), `lenient` (the forgiving JSON reader it uses), `results`
//! (outputs → text), `constrain` (the reply schema). What does not live here: deciding the mode
//! ([`ToolCalling`](crate::ToolCalling), in `config`), validation against
//! schemas and running calls (dispatch, in satchel-tools), the loop.

mod constrain;
mod lenient;
mod parse;
mod render;
mod results;

pub use constrain::{ANSWER_INSTRUCTION, ANSWER_ONLY_INSTRUCTION, reply_schema};
pub use parse::{PromptedCall, PromptedReply, ReplyError, ReplyOutcome, parse_reply};
pub use render::{CALL_INSTRUCTION, INLINE_DEPTH, render_tool, render_tools};
pub use results::{PromptedResult, format_results};
