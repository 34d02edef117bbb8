//! `satchel telegram`: the assistant on Telegram, the front end the
//! coresvc design describes, over one [`satchel_host::Host`].
//!
//! - Each private chat is a conversation of the host (goal, objectives,
//!   feedback block, history and compaction as in the REPL); chats run in
//!   parallel, a chat's messages in order, and a message that arrives while
//!   one runs waits its turn. `/stop` cancels the running statement and its
//!   processes.
//! - Only users on the allow-list reach the model; anyone else gets one
//!   polite refusal, and is logged.
//! - The answer streams by editing one message (about once a second),
//!   as Telegram HTML built from the model's markdown ([`html`]), cut at
//!   paragraphs when long and sent as a file when very long.
//! - "Ask" decisions become inline buttons; unanswered in time, a refusal.
//! - What Telegram delivers is kept in the database's inbox before it is
//!   acknowledged and removed only once handled ([`satchel_store::FrontEndStore`]),
//!   so a crash or restart neither drops nor repeats a message.
//! - Every tool call is on the audit trail under `telegram` with the user.
//!
//! The token comes from the caller (the binary reads `TELEGRAM_BOT_TOKEN`)
//! and is never stored or logged: it only ever appears in request URLs,
//! and errors are stripped of their URL.

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod api;
mod bot;
pub mod chart;
mod command_line;
mod commands;
mod consent;
pub mod html;
mod intake;
mod reply;
mod serve;
mod settings;

pub use serve::run;
pub use settings::{BotOptions, TELEGRAM_API, TelegramSettings, Webhook};
