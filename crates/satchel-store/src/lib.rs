//! Persistence: conversations, the conversation log, the LLM history,
//! statements and objectives, tool calls, model requests with their token
//! figures, the audit trail, and memories with their keyword index,
//! embeddings and sessions.
//!
//! The repository traits ([`ConversationStore`], [`LogStore`],
//! [`MessageStore`], [`StatementStore`], [`ToolCallStore`], [`AuditStore`],
//! grouped as [`Store`], and [`MemoryStore`]) speak in plain records, so that a PostgreSQL
//! backend can implement them later; [`SqliteStore`] is the embedded
//! backend: one file, WAL, migrations embedded in the binary and applied on
//! open, one writer thread, reads off the async threads.
//!
//! Every string passes through a [`Redactor`] before it is stored, so known
//! secrets never reach the file. Times are [`Timestamp`]s from an
//! injectable [`Clock`].
//!
//! What does not live here: deciding what to record (the agent loop and the
//! CLI do), formatting records for people (tools' formatters and the CLI
//! do), reading the environment (the binary passes secrets in).
//!
//! ```no_run
//! use satchel_store::{ConversationStore, LogKind, LogStore, NewConversation, NewLogEntry, SqliteStore, StoreOptions};
//!
//! # async fn example() -> Result<(), satchel_store::StoreError> {
//! let store = SqliteStore::open("satchel.db".as_ref(), StoreOptions::default()).await?;
//! let conversation = store.create_conversation(NewConversation::default()).await?;
//! store
//!     .append_log_entry(NewLogEntry::new(&conversation.id, LogKind::User, "list the files"))
//!     .await?;
//! store.close().await?;
//! # Ok(())
//! # }
//! ```

#![deny(clippy::print_stdout, clippy::print_stderr)]

mod code;
mod copy;
mod error;
mod open;
mod postgres;
pub mod records;
pub use satchel_core::redact;
mod sqlite;
mod store;
#[doc(hidden)]
pub mod testing;
mod time;
mod usage;

pub use code::{
    CodeExecution, CodeJob, CodeQuery, CodeStore, JobStatus, NewCodeExecution, NewCodeJob,
};
pub use copy::{CopyReport, copy};
pub use error::StoreError;
pub use open::{OpenedStore, StoreLocation, open};
pub use postgres::{PG_SCHEMA_VERSION, PgLocation, PgStore};
pub use records::{
    AuditQuery, AuditRecord, AuditSource, CallStartRecord, Conversation, ConversationDump,
    ConversationSearch, ConversationSummary, ExportRecord, LlmMessage, LogEntry, LogKind,
    MemoryChanges, MemoryFilter, MemoryIndexRow, MemoryLayer, MemoryRecord, MemorySession,
    MemoryStats, MemoryUpdate, NewAudit, NewCallStart, NewConversation, NewLlmMessage, NewLogEntry,
    NewMemory, NewMemorySession, NewRecords, NewStatement, NewToolCall, Recorded, SearchHit,
    Statement, THINKING_SIDE, ToolCallRecord,
};
pub use redact::{RedactionConfig, Redactor};
pub use sqlite::{APPLICATION_ID, Access, Durability, SCHEMA_VERSION, SqliteStore, StoreOptions};
pub use store::{
    AuditStore, ConversationStore, FrontEndStore, LogStore, MemoryStore, MessageStore,
    RecordsStore, StatementStore, Store, ToolCallStore,
};

pub use time::{Clock, ManualClock, SystemClock, Timestamp, parse_age};
pub use usage::{LlmCallRecord, LlmCallStore, NewLlmCall, UsageSample};
