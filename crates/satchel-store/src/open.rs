//! The one door to a store: [`StoreLocation`] (a file path or a
//! PostgreSQL URL) and [`open`], which gives an [`OpenedStore`] that
//! implements every repository trait whichever backend is behind it, so
//! callers never name a backend.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;

use crate::postgres::{PgLocation, PgStore, is_postgres_url};
use crate::{
    AuditQuery, AuditRecord, AuditStore, CallStartRecord, CodeExecution, CodeJob, CodeQuery,
    CodeStore, Conversation, ConversationDump, ConversationSearch, ConversationStore,
    ConversationSummary, FrontEndStore, JobStatus, LlmCallRecord, LlmCallStore, LlmMessage,
    LogEntry, LogStore, MemoryChanges, MemoryFilter, MemoryRecord, MemorySession, MemoryStats,
    MemoryStore, MemoryUpdate, MessageStore, NewAudit, NewCallStart, NewCodeExecution, NewCodeJob,
    NewConversation, NewLlmCall, NewLlmMessage, NewLogEntry, NewMemory, NewMemorySession,
    NewRecords, NewStatement, NewToolCall, Recorded, RecordsStore, SearchHit, SqliteStore,
    Statement, StatementStore, Store, StoreError, StoreOptions, Timestamp, ToolCallRecord,
    ToolCallStore, UsageSample,
};

/// Where the record lives: an SQLite file, or a PostgreSQL database.
#[derive(Debug, Clone)]
pub enum StoreLocation {
    /// An SQLite file (created on first write).
    File(PathBuf),
    /// A PostgreSQL database on a server.
    Postgres(Box<PgLocation>),
}

impl StoreLocation {
    /// Reads a `--db`/`SATCHEL_DB` value: a `postgres://` or
    /// `postgresql://` URL names a server (completed by the `PG*`
    /// variables in `env`), anything else a file.
    pub fn parse(
        text: &OsStr,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<StoreLocation, StoreError> {
        match text.to_str() {
            Some(url) if is_postgres_url(url) => Ok(StoreLocation::Postgres(Box::new(
                PgLocation::parse(url, env)?,
            ))),
            _ => Ok(StoreLocation::File(PathBuf::from(text))),
        }
    }

    /// Whether `text` is a PostgreSQL URL rather than a path.
    pub fn is_url(text: &OsStr) -> bool {
        text.to_str().is_some_and(is_postgres_url)
    }

    /// The location for people: the path, or the URL without password.
    pub fn display(&self) -> String {
        match self {
            StoreLocation::File(path) => path.display().to_string(),
            StoreLocation::Postgres(location) => location.display().to_owned(),
        }
    }
}

/// Opens the store at `location` with `options`: SQLite for a file,
/// PostgreSQL for a URL. Both migrate on open and refuse what is not
/// theirs or is newer.
pub async fn open(
    location: &StoreLocation,
    options: StoreOptions,
) -> Result<OpenedStore, StoreError> {
    let backend = match location {
        StoreLocation::File(path) => Backend::Sqlite(SqliteStore::open(path, options).await?),
        StoreLocation::Postgres(pg) => Backend::Postgres(PgStore::open(pg, options).await?),
    };
    Ok(OpenedStore { backend })
}

/// An open store, whichever the backend; cheap to clone (clones share
/// connections). Implements [`Store`], [`CodeStore`] and every other
/// repository trait.
#[derive(Debug, Clone)]
pub struct OpenedStore {
    backend: Backend,
}

#[derive(Debug, Clone)]
pub(crate) enum Backend {
    Sqlite(SqliteStore),
    Postgres(PgStore),
}

impl OpenedStore {
    /// The store as one trait object.
    pub fn shared(&self) -> Arc<dyn Store> {
        Arc::new(self.clone())
    }

    /// The memory repository.
    pub fn memory_store(&self) -> Arc<dyn MemoryStore> {
        Arc::new(self.clone())
    }

    /// The `code` tool's repository.
    pub fn code_store(&self) -> Arc<dyn CodeStore> {
        Arc::new(self.clone())
    }

    /// The model-request repository.
    pub fn llm_call_store(&self) -> Arc<dyn LlmCallStore> {
        Arc::new(self.clone())
    }

    /// The front ends' inbox and named values.
    pub fn front_end_store(&self) -> Arc<dyn FrontEndStore> {
        Arc::new(self.clone())
    }

    /// The file, or for PostgreSQL the URL without password as a path:
    /// what messages name.
    pub fn path(&self) -> &Path {
        match &self.backend {
            Backend::Sqlite(store) => store.path(),
            Backend::Postgres(store) => store.path(),
        }
    }

    /// True when a write is handed to one writer in order before its
    /// future is polled ([`OpenedStore::queue_finish_calls`]): SQLite.
    pub fn queues_writes(&self) -> bool {
        matches!(self.backend, Backend::Sqlite(_))
    }

    /// [`AuditStore::finish_calls`] as a future that owns what it needs.
    /// On SQLite ([`OpenedStore::queues_writes`]) the write is handed to
    /// the store's one writer before this returns, so it commits before
    /// any write asked for later and before the store closes, whether or
    /// not the future is awaited; on PostgreSQL it starts when polled.
    pub fn queue_finish_calls(
        &self,
        ended: Vec<String>,
        records: Vec<NewToolCall>,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Vec<String>, StoreError>> + Send + 'static>>
    {
        match &self.backend {
            Backend::Sqlite(store) => Box::pin(store.queue_finish_calls(ended, records)),
            Backend::Postgres(store) => {
                let store = store.clone();
                Box::pin(async move { store.finish_calls(ended, records).await })
            }
        }
    }

    /// [`OpenedStore::queue_finish_calls`] for a caller that will not
    /// wait for it (a served call whose answer has gone). On SQLite it is
    /// handed to the writer before this returns and held up to 10 ms to
    /// commit with other such writes ([`SqliteStore::finish_calls_later`]);
    /// on PostgreSQL it starts when polled.
    pub fn finish_calls_later(
        &self,
        ended: Vec<String>,
        records: Vec<NewToolCall>,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Vec<String>, StoreError>> + Send + 'static>>
    {
        match &self.backend {
            Backend::Sqlite(store) => Box::pin(store.finish_calls_later(ended, records)),
            Backend::Postgres(_) => self.queue_finish_calls(ended, records),
        }
    }

    /// True when the record is on a PostgreSQL server.
    pub fn is_postgres(&self) -> bool {
        matches!(self.backend, Backend::Postgres(_))
    }

    pub(crate) fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Problems a consistency check finds, empty when sound: SQLite's
    /// `quick_check` of the file; on PostgreSQL, that the schema is read
    /// (the server keeps its own pages sound).
    pub async fn integrity_problems(&self) -> Result<Vec<String>, StoreError> {
        match &self.backend {
            Backend::Sqlite(store) => store.integrity_problems().await,
            Backend::Postgres(store) => {
                store.memory_changes(i64::MAX).await?;
                Ok(Vec::new())
            }
        }
    }

    /// Waits for queued writes, then closes the store; later operations
    /// fail with [`StoreError::Closed`].
    pub async fn close(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(store) => store.close().await,
            Backend::Postgres(store) => store.close().await,
        }
    }
}

macro_rules! delegate {
    ($self:ident, $s:ident => $e:expr) => {
        match &$self.backend {
            Backend::Sqlite($s) => $e,
            Backend::Postgres($s) => $e,
        }
    };
}

#[async_trait]
impl FrontEndStore for OpenedStore {
    async fn inbox_accept(
        &self,
        channel: &str,
        items: Vec<(i64, serde_json::Value)>,
    ) -> Result<Vec<i64>, StoreError> {
        delegate!(self, s => s.inbox_accept(channel, items).await)
    }
    async fn inbox_pending(
        &self,
        channel: &str,
    ) -> Result<Vec<(i64, serde_json::Value)>, StoreError> {
        delegate!(self, s => s.inbox_pending(channel).await)
    }
    async fn inbox_done(&self, channel: &str, id: i64) -> Result<(), StoreError> {
        delegate!(self, s => s.inbox_done(channel, id).await)
    }
    async fn front_state(&self, key: &str) -> Result<Option<String>, StoreError> {
        delegate!(self, s => s.front_state(key).await)
    }
    async fn set_front_state(&self, key: &str, value: String) -> Result<(), StoreError> {
        delegate!(self, s => s.set_front_state(key, value).await)
    }
}

#[async_trait]
impl ConversationStore for OpenedStore {
    async fn create_conversation(&self, new: NewConversation) -> Result<Conversation, StoreError> {
        delegate!(self, s => s.create_conversation(new).await)
    }
    async fn conversation(&self, id: &str) -> Result<Option<Conversation>, StoreError> {
        delegate!(self, s => s.conversation(id).await)
    }
    async fn find_conversations(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<Conversation>, StoreError> {
        delegate!(self, s => s.find_conversations(prefix, limit).await)
    }
    async fn latest_conversation(&self) -> Result<Option<Conversation>, StoreError> {
        delegate!(self, s => s.latest_conversation().await)
    }
    async fn list_conversations(
        &self,
        limit: usize,
    ) -> Result<Vec<ConversationSummary>, StoreError> {
        delegate!(self, s => s.list_conversations(limit).await)
    }
    async fn set_title(&self, id: &str, title: String) -> Result<(), StoreError> {
        delegate!(self, s => s.set_title(id, title).await)
    }
    async fn set_goal(&self, id: &str, goal: String) -> Result<(), StoreError> {
        delegate!(self, s => s.set_goal(id, goal).await)
    }
    async fn replace_goal(&self, id: &str, goal: String) -> Result<(), StoreError> {
        delegate!(self, s => s.replace_goal(id, goal).await)
    }
    async fn dump_conversation(&self, id: &str) -> Result<Option<ConversationDump>, StoreError> {
        delegate!(self, s => s.dump_conversation(id).await)
    }
    async fn search_conversation(
        &self,
        search: ConversationSearch,
    ) -> Result<Vec<SearchHit>, StoreError> {
        delegate!(self, s => s.search_conversation(search).await)
    }
}

#[async_trait]
impl StatementStore for OpenedStore {
    async fn add_statement(&self, new: NewStatement) -> Result<Statement, StoreError> {
        delegate!(self, s => s.add_statement(new).await)
    }
    async fn statements(&self, conversation_id: &str) -> Result<Vec<Statement>, StoreError> {
        delegate!(self, s => s.statements(conversation_id).await)
    }
    async fn current_objective(&self, conversation_id: &str) -> Result<Option<String>, StoreError> {
        delegate!(self, s => s.current_objective(conversation_id).await)
    }
    async fn set_objective(&self, statement_id: &str, objective: String) -> Result<(), StoreError> {
        delegate!(self, s => s.set_objective(statement_id, objective).await)
    }
}

#[async_trait]
impl RecordsStore for OpenedStore {
    async fn append_records(&self, new: NewRecords) -> Result<Recorded, StoreError> {
        delegate!(self, s => s.append_records(new).await)
    }
}

#[async_trait]
impl LogStore for OpenedStore {
    async fn append_log_entry(&self, new: NewLogEntry) -> Result<LogEntry, StoreError> {
        delegate!(self, s => s.append_log_entry(new).await)
    }
    async fn log_entries(&self, conversation_id: &str) -> Result<Vec<LogEntry>, StoreError> {
        delegate!(self, s => s.log_entries(conversation_id).await)
    }
}

#[async_trait]
impl MessageStore for OpenedStore {
    async fn append_messages(
        &self,
        new: Vec<NewLlmMessage>,
    ) -> Result<Vec<LlmMessage>, StoreError> {
        delegate!(self, s => s.append_messages(new).await)
    }
    async fn messages(&self, conversation_id: &str) -> Result<Vec<LlmMessage>, StoreError> {
        delegate!(self, s => s.messages(conversation_id).await)
    }
}

#[async_trait]
impl ToolCallStore for OpenedStore {
    async fn record_tool_call(&self, new: NewToolCall) -> Result<String, StoreError> {
        delegate!(self, s => s.record_tool_call(new).await)
    }
    async fn record_tool_calls(&self, new: Vec<NewToolCall>) -> Result<Vec<String>, StoreError> {
        delegate!(self, s => s.record_tool_calls(new).await)
    }
    async fn tool_call(&self, id: &str) -> Result<Option<ToolCallRecord>, StoreError> {
        delegate!(self, s => s.tool_call(id).await)
    }
    async fn tool_calls(&self, conversation_id: &str) -> Result<Vec<ToolCallRecord>, StoreError> {
        delegate!(self, s => s.tool_calls(conversation_id).await)
    }
}

#[async_trait]
impl AuditStore for OpenedStore {
    async fn record_audit(&self, new: NewAudit) -> Result<String, StoreError> {
        delegate!(self, s => s.record_audit(new).await)
    }
    async fn audit(&self, query: AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        delegate!(self, s => s.audit(query).await)
    }
    async fn begin_call(&self, start: NewCallStart) -> Result<String, StoreError> {
        delegate!(self, s => s.begin_call(start).await)
    }
    async fn end_calls(&self, ids: Vec<String>) -> Result<(), StoreError> {
        delegate!(self, s => s.end_calls(ids).await)
    }
    async fn finish_calls(
        &self,
        ended: Vec<String>,
        records: Vec<NewToolCall>,
    ) -> Result<Vec<String>, StoreError> {
        delegate!(self, s => s.finish_calls(ended, records).await)
    }
    async fn unfinished_calls(&self) -> Result<Vec<CallStartRecord>, StoreError> {
        delegate!(self, s => s.unfinished_calls().await)
    }
}

#[async_trait]
impl MemoryStore for OpenedStore {
    async fn insert_memories(&self, new: Vec<NewMemory>) -> Result<Vec<MemoryRecord>, StoreError> {
        delegate!(self, s => s.insert_memories(new).await)
    }
    async fn update_memory(&self, update: MemoryUpdate) -> Result<MemoryRecord, StoreError> {
        delegate!(self, s => s.update_memory(update).await)
    }
    async fn memories_without_embedding(
        &self,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError> {
        delegate!(self, s => s.memories_without_embedding(limit).await)
    }
    async fn set_memory_embedding(
        &self,
        id: &str,
        content: &str,
        embedding: Vec<f32>,
    ) -> Result<bool, StoreError> {
        delegate!(self, s => s.set_memory_embedding(id, content, embedding).await)
    }
    async fn delete_memories(
        &self,
        namespace: &str,
        ids: Vec<String>,
    ) -> Result<Vec<String>, StoreError> {
        delegate!(self, s => s.delete_memories(namespace, ids).await)
    }
    async fn purge_expired_memories(&self, now: Timestamp) -> Result<u64, StoreError> {
        delegate!(self, s => s.purge_expired_memories(now).await)
    }
    async fn memory(&self, id: &str) -> Result<Option<MemoryRecord>, StoreError> {
        delegate!(self, s => s.memory(id).await)
    }
    async fn memories_by_seq(&self, seqs: Vec<i64>) -> Result<Vec<MemoryRecord>, StoreError> {
        delegate!(self, s => s.memories_by_seq(seqs).await)
    }
    async fn list_memories(
        &self,
        filter: MemoryFilter,
        limit: usize,
    ) -> Result<Vec<MemoryRecord>, StoreError> {
        delegate!(self, s => s.list_memories(filter, limit).await)
    }
    async fn memories_with_text(
        &self,
        filter: MemoryFilter,
        content: &str,
    ) -> Result<Vec<MemoryRecord>, StoreError> {
        delegate!(self, s => s.memories_with_text(filter, content).await)
    }
    async fn memory_changes(&self, since: i64) -> Result<MemoryChanges, StoreError> {
        delegate!(self, s => s.memory_changes(since).await)
    }
    async fn memory_revision(&self) -> Result<i64, StoreError> {
        delegate!(self, s => s.memory_revision().await)
    }
    async fn memory_stats(
        &self,
        namespace: &str,
        now: Timestamp,
    ) -> Result<MemoryStats, StoreError> {
        delegate!(self, s => s.memory_stats(namespace, now).await)
    }
    async fn start_session(&self, new: NewMemorySession) -> Result<MemorySession, StoreError> {
        delegate!(self, s => s.start_session(new).await)
    }
    async fn open_session(
        &self,
        namespace: &str,
        conversation_id: Option<&str>,
    ) -> Result<Option<MemorySession>, StoreError> {
        delegate!(self, s => s.open_session(namespace, conversation_id).await)
    }
    async fn end_session(
        &self,
        id: &str,
        at: Timestamp,
        reason: &str,
        archive_expires_at: Option<Timestamp>,
    ) -> Result<(MemorySession, Vec<MemoryRecord>), StoreError> {
        delegate!(self, s => s.end_session(id, at, reason, archive_expires_at).await)
    }
    async fn set_session_summary(&self, id: &str, memory_id: &str) -> Result<(), StoreError> {
        delegate!(self, s => s.set_session_summary(id, memory_id).await)
    }
    async fn sessions(
        &self,
        namespace: &str,
        limit: usize,
    ) -> Result<Vec<MemorySession>, StoreError> {
        delegate!(self, s => s.sessions(namespace, limit).await)
    }
}

#[async_trait]
impl CodeStore for OpenedStore {
    async fn record_execution(&self, new: NewCodeExecution) -> Result<String, StoreError> {
        delegate!(self, s => s.record_execution(new).await)
    }
    async fn code_executions(&self, query: CodeQuery) -> Result<Vec<CodeExecution>, StoreError> {
        delegate!(self, s => s.code_executions(query).await)
    }
    async fn create_job(&self, new: NewCodeJob) -> Result<CodeJob, StoreError> {
        delegate!(self, s => s.create_job(new).await)
    }
    async fn update_job(
        &self,
        id: &str,
        status: JobStatus,
        result: Option<String>,
        error: Option<String>,
    ) -> Result<Option<CodeJob>, StoreError> {
        delegate!(self, s => s.update_job(id, status, result, error).await)
    }
    async fn job(&self, id: &str) -> Result<Option<CodeJob>, StoreError> {
        delegate!(self, s => s.job(id).await)
    }
    async fn unfinished_jobs(&self) -> Result<Vec<CodeJob>, StoreError> {
        delegate!(self, s => s.unfinished_jobs().await)
    }
}

#[async_trait]
impl LlmCallStore for OpenedStore {
    async fn record_llm_call(&self, new: NewLlmCall) -> Result<String, StoreError> {
        delegate!(self, s => s.record_llm_call(new).await)
    }
    async fn llm_calls(&self, conversation_id: &str) -> Result<Vec<LlmCallRecord>, StoreError> {
        delegate!(self, s => s.llm_calls(conversation_id).await)
    }
    async fn usage_samples(
        &self,
        model: &str,
        limit: usize,
    ) -> Result<Vec<UsageSample>, StoreError> {
        delegate!(self, s => s.usage_samples(model, limit).await)
    }
}
