//! The repository traits a backend implements, one per kind of record, and
//! [`Store`], which groups them.
//!
//! They speak only in the plain records of [`crate::records`], so that a
//! PostgreSQL backend can implement them later and several Satchel
//! instances can share one database. Full-text search
//! ([`ConversationStore::search_conversation`]) takes plain words, so each
//! backend writes its own query syntax. Every write is one transaction: when a
//! write returns `Ok`, it is committed; when it fails, nothing of it was
//! stored. Every string written passes through the backend's redactor first.

use async_trait::async_trait;

use crate::{
    AuditQuery, AuditRecord, CallStartRecord, Conversation, ConversationDump, ConversationSearch,
    ConversationSummary, LlmCallStore, LlmMessage, LogEntry, MemoryChanges, MemoryFilter,
    MemoryRecord, MemorySession, MemoryStats, MemoryUpdate, NewAudit, NewCallStart,
    NewConversation, NewLlmMessage, NewLogEntry, NewMemory, NewMemorySession, NewRecords,
    NewStatement, NewToolCall, Recorded, SearchHit, Statement, StoreError, Timestamp,
    ToolCallRecord,
};

/// Conversations: creation, lookup, listing, title and goal, export.
#[async_trait]
pub trait ConversationStore: Send + Sync {
    /// Creates a conversation.
    async fn create_conversation(&self, new: NewConversation) -> Result<Conversation, StoreError>;

    /// The conversation with this exact id.
    async fn conversation(&self, id: &str) -> Result<Option<Conversation>, StoreError>;

    /// Conversations whose id starts with `prefix` (case-insensitive), at
    /// most `limit`, newest first.
    async fn find_conversations(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<Conversation>, StoreError>;

    /// The conversation updated most recently.
    async fn latest_conversation(&self) -> Result<Option<Conversation>, StoreError>;

    /// The `limit` conversations updated most recently, newest first, with counts.
    async fn list_conversations(
        &self,
        limit: usize,
    ) -> Result<Vec<ConversationSummary>, StoreError>;

    /// Sets (or replaces) the title.
    async fn set_title(&self, id: &str, title: String) -> Result<(), StoreError>;

    /// Sets the goal; fails with [`StoreError::GoalAlreadySet`] if it has one.
    async fn set_goal(&self, id: &str, goal: String) -> Result<(), StoreError>;

    /// Sets the goal whether or not it had one: the user's own `/goal`
    /// overrides a generated one.
    async fn replace_goal(&self, id: &str, goal: String) -> Result<(), StoreError>;

    /// Everything recorded about a conversation, read in one snapshot.
    async fn dump_conversation(&self, id: &str) -> Result<Option<ConversationDump>, StoreError>;

    /// Full-text search over one conversation's log entries and tool
    /// calls (their input, results and note), best match first. A search
    /// with no words finds nothing.
    async fn search_conversation(
        &self,
        search: ConversationSearch,
    ) -> Result<Vec<SearchHit>, StoreError>;
}

/// Statements and their objectives.
#[async_trait]
pub trait StatementStore: Send + Sync {
    /// Records a statement; its `seq` follows the conversation's last one.
    async fn add_statement(&self, new: NewStatement) -> Result<Statement, StoreError>;

    /// A conversation's statements, in order.
    async fn statements(&self, conversation_id: &str) -> Result<Vec<Statement>, StoreError>;

    /// The objective of the conversation's latest statement that has one:
    /// the current focus.
    async fn current_objective(&self, conversation_id: &str) -> Result<Option<String>, StoreError>;

    /// Sets a statement's objective (written once its side request answers).
    async fn set_objective(&self, statement_id: &str, objective: String) -> Result<(), StoreError>;
}

/// The conversation log: what the user saw.
#[async_trait]
pub trait LogStore: Send + Sync {
    /// Appends an entry; its `seq` follows the conversation's last one.
    async fn append_log_entry(&self, new: NewLogEntry) -> Result<LogEntry, StoreError>;

    /// A conversation's log, in order.
    async fn log_entries(&self, conversation_id: &str) -> Result<Vec<LogEntry>, StoreError>;
}

/// The LLM history: exactly what was sent.
#[async_trait]
pub trait MessageStore: Send + Sync {
    /// Appends messages in one transaction (all or none), in order.
    async fn append_messages(&self, new: Vec<NewLlmMessage>)
    -> Result<Vec<LlmMessage>, StoreError>;

    /// A conversation's history, in order.
    async fn messages(&self, conversation_id: &str) -> Result<Vec<LlmMessage>, StoreError>;
}

/// Finished tool calls; each recording also writes the call's audit row.
#[async_trait]
pub trait ToolCallStore: Send + Sync {
    /// Records one call and its audit row; returns the call's record id.
    async fn record_tool_call(&self, new: NewToolCall) -> Result<String, StoreError>;

    /// Records many calls (and their audit rows) in one transaction, all or
    /// none; returns their record ids in order.
    async fn record_tool_calls(&self, new: Vec<NewToolCall>) -> Result<Vec<String>, StoreError>;

    /// The call with this record id.
    async fn tool_call(&self, id: &str) -> Result<Option<ToolCallRecord>, StoreError>;

    /// A conversation's calls, in the order they started.
    async fn tool_calls(&self, conversation_id: &str) -> Result<Vec<ToolCallRecord>, StoreError>;
}

/// The audit trail of every tool call, from every source.
#[async_trait]
pub trait AuditStore: Send + Sync {
    /// Adds an audit row that has no tool-call record; returns its id.
    async fn record_audit(&self, new: NewAudit) -> Result<String, StoreError>;

    /// The rows `query` selects: the most recent ones, oldest first.
    async fn audit(&self, query: AuditQuery) -> Result<Vec<AuditRecord>, StoreError>;

    /// Puts a call on record before it runs; returns the id
    /// [`AuditStore::end_calls`] takes. A caller that gets an error must
    /// not run the call: nothing runs that is not on record.
    async fn begin_call(&self, start: NewCallStart) -> Result<String, StoreError>;

    /// Marks calls whose own records are written as ended.
    async fn end_calls(&self, ids: Vec<String>) -> Result<(), StoreError>;

    /// Writes finished calls' records and audit rows (as
    /// [`ToolCallStore::record_tool_calls`] does) and ends the starts
    /// `ended` in one transaction; returns the records' ids in order. On an
    /// error nothing of it is kept: the starts stay on record as unfinished.
    async fn finish_calls(
        &self,
        ended: Vec<String>,
        records: Vec<NewToolCall>,
    ) -> Result<Vec<String>, StoreError>;

    /// Calls that began and never ended, oldest first.
    async fn unfinished_calls(&self) -> Result<Vec<CallStartRecord>, StoreError>;
}

/// Memories, their keyword index and embeddings, and memory sessions.
///
/// The store keeps what is remembered and answers keyword queries; which
/// memories are duplicates, when they expire and how recall ranks them is
/// decided by `satchel-memory`. Every change to memories takes a new
/// revision, so an index kept outside the store (the vectors in memory)
/// can catch up with writes made by other processes ([`MemoryStore::memory_changes`]).
#[async_trait]
pub trait MemoryStore: Send + Sync {
    /// Stores memories in one transaction (all or none), in order.
    async fn insert_memories(&self, new: Vec<NewMemory>) -> Result<Vec<MemoryRecord>, StoreError>;

    /// Replaces a memory's text, category, certainty, expiry and embedding.
    async fn update_memory(&self, update: MemoryUpdate) -> Result<MemoryRecord, StoreError>;

    /// Up to `limit` memories (of every namespace) stored without an
    /// embedding, oldest first, as `(id, content)`: the backlog to embed
    /// once a model is available.
    async fn memories_without_embedding(
        &self,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError>;

    /// Sets the embedding of memory `id`, only if it still has none and
    /// its text is still `content` (so a concurrent update wins); true
    /// when set. Takes a new revision like any change, without touching
    /// the memory's dates.
    async fn set_memory_embedding(
        &self,
        id: &str,
        content: &str,
        embedding: Vec<f32>,
    ) -> Result<bool, StoreError>;

    /// Deletes memories of `namespace` for good, from the table and the
    /// keyword index; returns the ids that existed.
    async fn delete_memories(
        &self,
        namespace: &str,
        ids: Vec<String>,
    ) -> Result<Vec<String>, StoreError>;

    /// Deletes every memory (of every namespace) that expired at or before
    /// `now`; returns how many.
    async fn purge_expired_memories(&self, now: Timestamp) -> Result<u64, StoreError>;

    /// The memory with this id.
    async fn memory(&self, id: &str) -> Result<Option<MemoryRecord>, StoreError>;

    /// The memories with these integer keys, in the order given (missing
    /// ones left out).
    async fn memories_by_seq(&self, seqs: Vec<i64>) -> Result<Vec<MemoryRecord>, StoreError>;

    /// Memories `filter` selects, newest first, at most `limit`.
    async fn list_memories(
        &self,
        filter: MemoryFilter,
        limit: usize,
    ) -> Result<Vec<MemoryRecord>, StoreError>;

    /// Memories of one namespace and layer whose text equals `content`
    /// ignoring case and surrounding space, live at `live_at`.
    async fn memories_with_text(
        &self,
        filter: MemoryFilter,
        content: &str,
    ) -> Result<Vec<MemoryRecord>, StoreError>;

    /// Changes since revision `since` (0: everything), for an index to
    /// catch up.
    async fn memory_changes(&self, since: i64) -> Result<MemoryChanges, StoreError>;

    /// The latest revision of the memories.
    async fn memory_revision(&self) -> Result<i64, StoreError>;

    /// Counts for one namespace, as of `now`.
    async fn memory_stats(
        &self,
        namespace: &str,
        now: Timestamp,
    ) -> Result<MemoryStats, StoreError>;

    /// Starts a session.
    async fn start_session(&self, new: NewMemorySession) -> Result<MemorySession, StoreError>;

    /// The open session of a namespace and conversation (the most recent
    /// one, if several are open).
    async fn open_session(
        &self,
        namespace: &str,
        conversation_id: Option<&str>,
    ) -> Result<Option<MemorySession>, StoreError>;

    /// Ends a session at `at` and archives its session-layer memories in
    /// the same transaction, setting their expiry to `archive_expires_at`;
    /// returns the session and the memories archived. Ending an ended
    /// session changes nothing.
    async fn end_session(
        &self,
        id: &str,
        at: Timestamp,
        reason: &str,
        archive_expires_at: Option<Timestamp>,
    ) -> Result<(MemorySession, Vec<MemoryRecord>), StoreError>;

    /// Records the short-layer memory that summarises a session.
    async fn set_session_summary(&self, id: &str, memory_id: &str) -> Result<(), StoreError>;

    /// A namespace's sessions, most recent first, at most `limit`.
    async fn sessions(
        &self,
        namespace: &str,
        limit: usize,
    ) -> Result<Vec<MemorySession>, StoreError>;
}

/// Several kinds of rows in one transaction (see [`NewRecords`]).
#[async_trait]
pub trait RecordsStore: Send + Sync {
    /// Writes `new`: its statement first (when given), then its model
    /// calls, log entries and messages, each in order; all or nothing.
    async fn append_records(&self, new: NewRecords) -> Result<Recorded, StoreError>;
}

/// Everything Satchel stores; implemented by every type that implements
/// all the repository traits.
pub trait Store:
    ConversationStore
    + RecordsStore
    + StatementStore
    + LogStore
    + MessageStore
    + ToolCallStore
    + AuditStore
    + LlmCallStore
    + MemoryStore
{
}

impl<T> Store for T where
    T: ConversationStore
        + RecordsStore
        + StatementStore
        + LogStore
        + MessageStore
        + ToolCallStore
        + AuditStore
        + LlmCallStore
        + MemoryStore
{
}

/// What a front end that serves people over a network (`satchel
/// telegram`, `satchel web`) keeps across restarts: an inbox of what it
/// received and has not handled yet, and small named values. An item is
/// known by its channel and id (Telegram's update id); one delivered
/// again, in whatever order, is not kept twice, and a handled one is
/// remembered for a week, so a restart neither drops nor repeats an item.
#[async_trait]
pub trait FrontEndStore: Send + Sync {
    /// Keeps the items not seen before, in one transaction; returns the
    /// ids of the given items still to handle (new, or kept earlier and
    /// not handled yet), in order. Items handled more than a week ago are
    /// forgotten.
    async fn inbox_accept(
        &self,
        channel: &str,
        items: Vec<(i64, serde_json::Value)>,
    ) -> Result<Vec<i64>, StoreError>;

    /// The channel's items not yet handled, oldest first.
    async fn inbox_pending(
        &self,
        channel: &str,
    ) -> Result<Vec<(i64, serde_json::Value)>, StoreError>;

    /// Marks an item handled: it is no longer pending, and is not kept
    /// again if delivered again.
    async fn inbox_done(&self, channel: &str, id: i64) -> Result<(), StoreError>;

    /// A named value, if one was set.
    async fn front_state(&self, key: &str) -> Result<Option<String>, StoreError>;

    /// Sets (or replaces) a named value.
    async fn set_front_state(&self, key: &str, value: String) -> Result<(), StoreError>;
}
