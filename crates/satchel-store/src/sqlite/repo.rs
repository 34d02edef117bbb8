//! The repository traits on [`SqliteStore`]: the SQL, the row mapping, and
//! what passes through redaction on the way in.

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Row, Transaction, params};
use satchel_core::{Content, ToolCall, ToolOutput, ToolResults};
use serde_json::Value;

use crate::redact::Redactor;
use crate::sqlite::call_repo::select_tool_calls;
use crate::sqlite::failure::{Failure, column_error};
use crate::sqlite::rows::{UnknownName, all, json, timestamp, touch_conversation};
use crate::sqlite::writer::WriteCtx;
use crate::sqlite::{Redact, SqliteStore};
use crate::{
    Conversation, ConversationDump, ConversationSearch, ConversationStore, ConversationSummary,
    LlmMessage, LogEntry, LogKind, LogStore, MessageStore, NewAudit, NewCallStart, NewConversation,
    NewLlmMessage, NewLogEntry, NewStatement, NewToolCall, SearchHit, Statement, StatementStore,
    StoreError,
};

const CONVERSATION_COLUMNS: &str = "id, title, goal, created_at, updated_at";
const STATEMENT_COLUMNS: &str = "id, conversation_id, seq, objective, created_at";
const LOG_COLUMNS: &str = "id, conversation_id, seq, kind, text, parent_id, side_conversation, statement_id, call_id, created_at";
const MESSAGE_COLUMNS: &str =
    "id, conversation_id, statement_id, turn, seq, role, content, created_at";

// ---------------------------------------------------------------- redaction

impl Redact for String {
    fn redact(self, redactor: &Redactor) -> String {
        redactor.redact_string(self)
    }
}

impl<T: Redact> Redact for Option<T> {
    fn redact(self, redactor: &Redactor) -> Option<T> {
        self.map(|value| value.redact(redactor))
    }
}

impl<T: Redact> Redact for Vec<T> {
    fn redact(self, redactor: &Redactor) -> Vec<T> {
        self.into_iter().map(|item| item.redact(redactor)).collect()
    }
}

impl Redact for Value {
    fn redact(mut self, redactor: &Redactor) -> Value {
        redactor.redact_json(&mut self);
        self
    }
}

impl Redact for NewConversation {
    fn redact(self, redactor: &Redactor) -> NewConversation {
        NewConversation {
            title: self.title.redact(redactor),
            goal: self.goal.redact(redactor),
        }
    }
}

impl Redact for NewStatement {
    fn redact(self, redactor: &Redactor) -> NewStatement {
        NewStatement {
            objective: self.objective.redact(redactor),
            ..self
        }
    }
}

impl Redact for NewLogEntry {
    fn redact(self, redactor: &Redactor) -> NewLogEntry {
        NewLogEntry {
            text: self.text.redact(redactor),
            side_conversation: self.side_conversation.redact(redactor),
            ..self
        }
    }
}

impl Redact for NewLlmMessage {
    fn redact(self, redactor: &Redactor) -> NewLlmMessage {
        NewLlmMessage {
            content: self.content.redact(redactor),
            ..self
        }
    }
}

impl Redact for ToolResults {
    fn redact(self, redactor: &Redactor) -> ToolResults {
        match self {
            ToolResults::Text(text) => ToolResults::Text(text.redact(redactor)),
            ToolResults::Parts(parts) => ToolResults::Parts(
                parts
                    .into_iter()
                    .map(|part| match part {
                        Content::Text { text } => Content::Text {
                            text: text.redact(redactor),
                        },
                        Content::Json { json } => Content::Json {
                            json: json.redact(redactor),
                        },
                        // Base64 image bytes cannot hold a readable secret.
                        image @ Content::Image { .. } => image,
                    })
                    .collect(),
            ),
        }
    }
}

impl Redact for NewToolCall {
    fn redact(mut self, redactor: &Redactor) -> NewToolCall {
        if redactor.is_empty() {
            return self;
        }
        self.call.input = self.call.input.redact(redactor);
        self.output = ToolOutput {
            results: self.output.results.redact(redactor),
            response: self.output.response.redact(redactor),
            user_message: self.output.user_message.redact(redactor),
            ..self.output
        };
        self.decision = self.decision.redact(redactor);
        self
    }
}

impl Redact for NewCallStart {
    fn redact(self, redactor: &Redactor) -> NewCallStart {
        NewCallStart {
            call: ToolCall {
                input: self.call.input.redact(redactor),
                ..self.call
            },
            ..self
        }
    }
}

impl Redact for NewAudit {
    fn redact(self, redactor: &Redactor) -> NewAudit {
        NewAudit {
            input: self.input.redact(redactor),
            ..self
        }
    }
}

// ---------------------------------------------------------------- rows

fn conversation_row(row: &Row<'_>) -> rusqlite::Result<Conversation> {
    Ok(Conversation {
        id: row.get(0)?,
        title: row.get(1)?,
        goal: row.get(2)?,
        created_at: timestamp(row, 3)?,
        updated_at: timestamp(row, 4)?,
    })
}

fn statement_row(row: &Row<'_>) -> rusqlite::Result<Statement> {
    Ok(Statement {
        id: row.get(0)?,
        conversation_id: row.get(1)?,
        seq: row.get(2)?,
        objective: row.get(3)?,
        created_at: timestamp(row, 4)?,
    })
}

fn log_row(row: &Row<'_>) -> rusqlite::Result<LogEntry> {
    let kind: String = row.get(3)?;
    Ok(LogEntry {
        id: row.get(0)?,
        conversation_id: row.get(1)?,
        seq: row.get(2)?,
        kind: LogKind::parse(&kind).ok_or_else(|| {
            column_error(
                3,
                UnknownName {
                    what: "log entry kind",
                    value: kind.clone(),
                },
            )
        })?,
        text: row.get(4)?,
        parent_id: row.get(5)?,
        side_conversation: row.get(6)?,
        statement_id: row.get(7)?,
        call_id: row.get(8)?,
        created_at: timestamp(row, 9)?,
    })
}

fn message_row(row: &Row<'_>) -> rusqlite::Result<LlmMessage> {
    Ok(LlmMessage {
        id: row.get(0)?,
        conversation_id: row.get(1)?,
        statement_id: row.get(2)?,
        turn: row.get(3)?,
        seq: row.get(4)?,
        role: row.get(5)?,
        content: json(row, 6)?,
        created_at: timestamp(row, 7)?,
    })
}

// ---------------------------------------------------------------- writes

/// The next 1-based position in one of a conversation's ordered tables.
fn next_seq(tx: &Transaction<'_>, table: &str, conversation_id: &str) -> Result<u32, Failure> {
    let sql = format!("SELECT coalesce(max(seq), 0) + 1 FROM {table} WHERE conversation_id = ?1");
    Ok(tx
        .prepare_cached(&sql)?
        .query_row([conversation_id], |row| row.get(0))?)
}

/// Adds a statement at the end of its conversation.
pub(super) fn insert_statement(
    tx: &Transaction<'_>,
    ctx: &WriteCtx<'_>,
    new: NewStatement,
) -> Result<Statement, Failure> {
    touch_conversation(tx, &new.conversation_id, ctx.now())?;
    let statement = Statement {
        id: ctx.new_id(),
        seq: next_seq(tx, "statements", &new.conversation_id)?,
        conversation_id: new.conversation_id,
        objective: new.objective,
        created_at: ctx.now(),
    };
    tx.prepare_cached(
        "INSERT INTO statements (id, conversation_id, seq, objective, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        statement.id,
        statement.conversation_id,
        statement.seq,
        statement.objective,
        statement.created_at.as_millis(),
    ])?;
    Ok(statement)
}

/// Appends a log entry at the end of its conversation's log.
pub(super) fn insert_log_entry(
    tx: &Transaction<'_>,
    ctx: &WriteCtx<'_>,
    new: NewLogEntry,
) -> Result<LogEntry, Failure> {
    touch_conversation(tx, &new.conversation_id, ctx.now())?;
    let entry = LogEntry {
        id: ctx.new_id(),
        seq: next_seq(tx, "log_entries", &new.conversation_id)?,
        conversation_id: new.conversation_id,
        kind: new.kind,
        text: new.text,
        parent_id: new.parent_id,
        side_conversation: new.side_conversation,
        statement_id: new.statement_id,
        call_id: new.call_id,
        created_at: ctx.now(),
    };
    tx.prepare_cached(
        "INSERT INTO log_entries (id, conversation_id, seq, kind, text, parent_id, side_conversation, statement_id, call_id, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?
    .execute(params![
        entry.id,
        entry.conversation_id,
        entry.seq,
        entry.kind.as_str(),
        entry.text,
        entry.parent_id,
        entry.side_conversation,
        entry.statement_id,
        entry.call_id,
        entry.created_at.as_millis(),
    ])?;
    Ok(entry)
}

/// Appends a message at the end of its conversation's history.
pub(super) fn insert_message(
    tx: &Transaction<'_>,
    ctx: &WriteCtx<'_>,
    message: NewLlmMessage,
) -> Result<LlmMessage, Failure> {
    touch_conversation(tx, &message.conversation_id, ctx.now())?;
    let record = LlmMessage {
        id: ctx.new_id(),
        seq: next_seq(tx, "llm_messages", &message.conversation_id)?,
        conversation_id: message.conversation_id,
        statement_id: message.statement_id,
        turn: message.turn,
        role: message.role,
        content: message.content,
        created_at: ctx.now(),
    };
    tx.prepare_cached(
        "INSERT INTO llm_messages (id, conversation_id, statement_id, turn, seq, role, content, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        record.id,
        record.conversation_id,
        record.statement_id,
        record.turn,
        record.seq,
        record.role,
        serde_json::to_string(&record.content)?,
        record.created_at.as_millis(),
    ])?;
    Ok(record)
}

// ---------------------------------------------------------------- traits

#[async_trait]
impl ConversationStore for SqliteStore {
    async fn create_conversation(&self, new: NewConversation) -> Result<Conversation, StoreError> {
        self.write(new, |tx, ctx, new| {
            let conversation = Conversation {
                id: ctx.new_id(),
                title: new.title,
                goal: new.goal,
                created_at: ctx.now(),
                updated_at: ctx.now(),
            };
            tx.prepare_cached(
                "INSERT INTO conversations (id, title, goal, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![
                conversation.id,
                conversation.title,
                conversation.goal,
                conversation.created_at.as_millis(),
                conversation.updated_at.as_millis(),
            ])?;
            Ok(conversation)
        })
        .await
    }

    async fn conversation(&self, id: &str) -> Result<Option<Conversation>, StoreError> {
        let id = id.to_owned();
        self.read(move |conn| {
            let sql = format!("SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?1");
            Ok(conn
                .prepare_cached(&sql)?
                .query_row([id], conversation_row)
                .optional()?)
        })
        .await
    }

    async fn find_conversations(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<Conversation>, StoreError> {
        let prefix = prefix.to_ascii_lowercase();
        // Ids are lowercase hex and hyphens; anything else matches nothing.
        if prefix.is_empty() || !prefix.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            return Ok(Vec::new());
        }
        // The ids that start with `prefix` are those from it up to, not
        // including, it with its last character one higher: a range of the
        // primary key (plans ignore bound values, so `GLOB ?1` would scan).
        let mut end = prefix.clone().into_bytes();
        if let Some(last) = end.last_mut() {
            *last += 1;
        }
        let end = String::from_utf8(end).unwrap_or_default();
        self.read(move |conn| {
            let sql = format!(
                "SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id >= ?1 AND id < ?2 ORDER BY updated_at DESC, id DESC LIMIT ?3"
            );
            all(conn, &sql, params![prefix, end, limit], conversation_row)
        })
        .await
    }

    async fn latest_conversation(&self) -> Result<Option<Conversation>, StoreError> {
        self.read(|conn| {
            let sql = format!(
                "SELECT {CONVERSATION_COLUMNS} FROM conversations ORDER BY updated_at DESC, id DESC LIMIT 1"
            );
            Ok(conn
                .prepare_cached(&sql)?
                .query_row([], conversation_row)
                .optional()?)
        })
        .await
    }

    async fn list_conversations(
        &self,
        limit: usize,
    ) -> Result<Vec<ConversationSummary>, StoreError> {
        self.read(move |conn| {
            let sql = "SELECT c.id, c.title, c.goal, c.created_at, c.updated_at,
                    (SELECT count(*) FROM log_entries e WHERE e.conversation_id = c.id),
                    (SELECT count(*) FROM tool_calls t WHERE t.conversation_id = c.id)
                FROM conversations c ORDER BY c.updated_at DESC, c.id DESC LIMIT ?1";
            all(conn, sql, [limit], |row| {
                Ok(ConversationSummary {
                    conversation: conversation_row(row)?,
                    log_entries: row.get(5)?,
                    tool_calls: row.get(6)?,
                })
            })
        })
        .await
    }

    async fn set_title(&self, id: &str, title: String) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.write(title, move |tx, ctx, title| {
            let changed = tx
                .prepare_cached(
                    "UPDATE conversations SET title = ?2, updated_at = max(updated_at, ?3) WHERE id = ?1",
                )?
                .execute(params![id, title, ctx.now().as_millis()])?;
            if changed == 0 {
                return Err(StoreError::NotFound {
                    kind: "conversation",
                    id,
                }
                .into());
            }
            Ok(())
        })
        .await
    }

    async fn replace_goal(&self, id: &str, goal: String) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.write(goal, move |tx, ctx, goal| {
            let changed = tx
                .prepare_cached(
                    "UPDATE conversations SET goal = ?2, updated_at = max(updated_at, ?3) WHERE id = ?1",
                )?
                .execute(params![id, goal, ctx.now().as_millis()])?;
            if changed == 1 {
                Ok(())
            } else {
                Err(StoreError::NotFound {
                    kind: "conversation",
                    id,
                }
                .into())
            }
        })
        .await
    }

    async fn set_goal(&self, id: &str, goal: String) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.write(goal, move |tx, ctx, goal| {
            let changed = tx
                .prepare_cached(
                    "UPDATE conversations SET goal = ?2, updated_at = max(updated_at, ?3) WHERE id = ?1 AND goal IS NULL",
                )?
                .execute(params![id, goal, ctx.now().as_millis()])?;
            if changed == 1 {
                return Ok(());
            }
            let exists = tx
                .prepare_cached("SELECT 1 FROM conversations WHERE id = ?1")?
                .exists([&id])?;
            Err(if exists {
                StoreError::GoalAlreadySet { id }
            } else {
                StoreError::NotFound {
                    kind: "conversation",
                    id,
                }
            }
            .into())
        })
        .await
    }

    async fn dump_conversation(&self, id: &str) -> Result<Option<ConversationDump>, StoreError> {
        let id = id.to_owned();
        self.read(move |conn| {
            // One read transaction: every list comes from the same snapshot.
            let tx = conn.unchecked_transaction()?;
            let sql = format!("SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?1");
            let Some(conversation) = tx
                .prepare_cached(&sql)?
                .query_row([&id], conversation_row)
                .optional()?
            else {
                return Ok(None);
            };
            let dump = ConversationDump {
                conversation,
                statements: select_statements(&tx, &id)?,
                log_entries: select_log(&tx, &id)?,
                messages: select_messages(&tx, &id)?,
                tool_calls: select_tool_calls(&tx, &id)?,
            };
            tx.commit()?;
            Ok(Some(dump))
        })
        .await
    }

    async fn search_conversation(
        &self,
        search: ConversationSearch,
    ) -> Result<Vec<SearchHit>, StoreError> {
        let Some(query) = fts_query(&search.text) else {
            return Ok(Vec::new());
        };
        self.read(move |conn| {
            let skip = serde_json::to_string(&search.skip_side_conversations)?;
            let limit = i64::try_from(search.limit).unwrap_or(i64::MAX);
            all(
                conn,
                "SELECT r.log_entry_id, r.tool_call_id
                 FROM search_text
                 JOIN search_rows r ON r.id = search_text.rowid
                 LEFT JOIN log_entries e ON e.id = r.log_entry_id
                 WHERE search_text MATCH ?1
                   AND r.conversation_id = ?2
                   AND (e.side_conversation IS NULL
                        OR e.side_conversation NOT IN (SELECT value FROM json_each(?3)))
                 ORDER BY search_text.rank, r.id
                 LIMIT ?4",
                params![query, search.conversation_id, skip, limit],
                |row| {
                    let log_entry: Option<String> = row.get(0)?;
                    Ok(match log_entry {
                        Some(id) => SearchHit::LogEntry(id),
                        None => SearchHit::ToolCall(row.get(1)?),
                    })
                },
            )
        })
        .await
    }
}

/// Plain words as an FTS5 query: each word a quoted string (so no word can
/// be read as syntax), all required; a trailing `*` kept as a prefix
/// search. `None` when there are no words.
fn fts_query(text: &str) -> Option<String> {
    let terms: Vec<String> = text
        .split_whitespace()
        .filter_map(|word| {
            let (word, prefix) = match word.strip_suffix('*') {
                Some(stem) => (stem, "*"),
                None => (word, ""),
            };
            // A word with no letters or digits is no token to FTS5.
            if !word.chars().any(char::is_alphanumeric) {
                return None;
            }
            Some(format!("\"{}\"{prefix}", word.replace('"', "\"\"")))
        })
        .collect();
    (!terms.is_empty()).then(|| terms.join(" "))
}

fn select_statements(conn: &Connection, conversation_id: &str) -> Result<Vec<Statement>, Failure> {
    let sql = format!(
        "SELECT {STATEMENT_COLUMNS} FROM statements WHERE conversation_id = ?1 ORDER BY seq"
    );
    all(conn, &sql, [conversation_id], statement_row)
}

fn select_log(conn: &Connection, conversation_id: &str) -> Result<Vec<LogEntry>, Failure> {
    let sql =
        format!("SELECT {LOG_COLUMNS} FROM log_entries WHERE conversation_id = ?1 ORDER BY seq");
    all(conn, &sql, [conversation_id], log_row)
}

fn select_messages(conn: &Connection, conversation_id: &str) -> Result<Vec<LlmMessage>, Failure> {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM llm_messages WHERE conversation_id = ?1 ORDER BY seq"
    );
    all(conn, &sql, [conversation_id], message_row)
}

#[async_trait]
impl StatementStore for SqliteStore {
    async fn add_statement(&self, new: NewStatement) -> Result<Statement, StoreError> {
        self.write(new, insert_statement).await
    }

    async fn statements(&self, conversation_id: &str) -> Result<Vec<Statement>, StoreError> {
        let id = conversation_id.to_owned();
        self.read(move |conn| select_statements(conn, &id)).await
    }

    async fn current_objective(&self, conversation_id: &str) -> Result<Option<String>, StoreError> {
        let id = conversation_id.to_owned();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT objective FROM statements WHERE conversation_id = ?1 AND objective IS NOT NULL ORDER BY seq DESC LIMIT 1",
                )?
                .query_row([id], |row| row.get(0))
                .optional()?)
        })
        .await
    }

    async fn set_objective(&self, statement_id: &str, objective: String) -> Result<(), StoreError> {
        let id = statement_id.to_owned();
        self.write(objective, move |tx, _ctx, objective| {
            let changed = tx
                .prepare_cached("UPDATE statements SET objective = ?2 WHERE id = ?1")?
                .execute(params![id, objective])?;
            if changed == 1 {
                Ok(())
            } else {
                Err(StoreError::NotFound {
                    kind: "statement",
                    id,
                }
                .into())
            }
        })
        .await
    }
}

#[async_trait]
impl LogStore for SqliteStore {
    async fn append_log_entry(&self, new: NewLogEntry) -> Result<LogEntry, StoreError> {
        self.write(new, insert_log_entry).await
    }

    async fn log_entries(&self, conversation_id: &str) -> Result<Vec<LogEntry>, StoreError> {
        let id = conversation_id.to_owned();
        self.read(move |conn| select_log(conn, &id)).await
    }
}

#[async_trait]
impl MessageStore for SqliteStore {
    async fn append_messages(
        &self,
        new: Vec<NewLlmMessage>,
    ) -> Result<Vec<LlmMessage>, StoreError> {
        self.write(new, |tx, ctx, new| {
            new.into_iter()
                .map(|message| insert_message(tx, ctx, message))
                .collect()
        })
        .await
    }

    async fn messages(&self, conversation_id: &str) -> Result<Vec<LlmMessage>, StoreError> {
        let id = conversation_id.to_owned();
        self.read(move |conn| select_messages(conn, &id)).await
    }
}

#[cfg(test)]
mod tests {
    use super::fts_query;

    #[test]
    fn words_become_quoted_terms_that_must_all_match() {
        assert_eq!(
            fts_query("cargo  test").as_deref(),
            Some(r#""cargo" "test""#)
        );
        assert_eq!(
            fts_query(r#"say "hi" pre* a-b"#).as_deref(),
            Some(r#""say" """hi""" "pre"* "a-b""#)
        );
        // Syntax and punctuation are words like any other, or nothing.
        assert_eq!(
            fts_query("NEAR( x OR").as_deref(),
            Some(r#""NEAR(" "x" "OR""#)
        );
        assert_eq!(fts_query(" * -- "), None);
        assert_eq!(fts_query(""), None);
    }
}
