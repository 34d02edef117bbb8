//! The record repositories on [`PgStore`]: the SQL and the row mapping.
//! Redaction is the same as SQLite's (the `Redact` impls in
//! `sqlite::repo`), applied before anything reaches a connection.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use crate::postgres::call_repo::select_tool_calls;
use crate::postgres::failure::PgFailure;
use crate::postgres::rows::{
    Unreadable, all, first, json, limit, read, small, timestamp, touch_conversation, unsigned,
};
use crate::postgres::{Ctx, PgStore, search, transact};
use crate::{
    Conversation, ConversationDump, ConversationSearch, ConversationStore, ConversationSummary,
    LlmMessage, LogEntry, LogKind, LogStore, MessageStore, NewConversation, NewLlmMessage,
    NewLogEntry, NewStatement, SearchHit, Statement, StatementStore, StoreError,
};

const CONVERSATION_COLUMNS: &str = "id, title, goal, created_at, updated_at";
const STATEMENT_COLUMNS: &str = "id, conversation_id, seq, objective, created_at";
const LOG_COLUMNS: &str = "id, conversation_id, seq, kind, text, parent_id, side_conversation, statement_id, call_id, created_at";
const MESSAGE_COLUMNS: &str =
    "id, conversation_id, statement_id, turn, seq, role, content, created_at";

fn conversation_row(row: &Row) -> Result<Conversation, PgFailure> {
    Ok(Conversation {
        id: row.try_get(0)?,
        title: row.try_get(1)?,
        goal: row.try_get(2)?,
        created_at: timestamp(row, 3)?,
        updated_at: timestamp(row, 4)?,
    })
}

fn statement_row(row: &Row) -> Result<Statement, PgFailure> {
    Ok(Statement {
        id: row.try_get(0)?,
        conversation_id: row.try_get(1)?,
        seq: small(row, 2)?,
        objective: row.try_get(3)?,
        created_at: timestamp(row, 4)?,
    })
}

fn log_row(row: &Row) -> Result<LogEntry, PgFailure> {
    let kind: String = row.try_get(3)?;
    Ok(LogEntry {
        id: row.try_get(0)?,
        conversation_id: row.try_get(1)?,
        seq: small(row, 2)?,
        kind: LogKind::parse(&kind).ok_or(Unreadable {
            what: "log entry kind",
            value: kind.clone(),
        })?,
        text: row.try_get(4)?,
        parent_id: row.try_get(5)?,
        side_conversation: row.try_get(6)?,
        statement_id: row.try_get(7)?,
        call_id: row.try_get(8)?,
        created_at: timestamp(row, 9)?,
    })
}

fn message_row(row: &Row) -> Result<LlmMessage, PgFailure> {
    Ok(LlmMessage {
        id: row.try_get(0)?,
        conversation_id: row.try_get(1)?,
        statement_id: row.try_get(2)?,
        turn: small(row, 3)?,
        seq: small(row, 4)?,
        role: row.try_get(5)?,
        content: json(row, 6)?,
        created_at: timestamp(row, 7)?,
    })
}

/// The next 1-based position in one of a conversation's ordered tables
/// (the caller holds the conversation's row lock).
async fn next_seq<C: GenericClient + Sync>(
    tx: &C,
    table: &str,
    conversation_id: &str,
) -> Result<i64, PgFailure> {
    let sql = format!("SELECT coalesce(max(seq), 0) + 1 FROM {table} WHERE conversation_id = $1");
    let statement = tx.prepare_cached(&sql).await?;
    Ok(tx.query_one(&statement, &[&conversation_id]).await?.get(0))
}

/// Adds a statement at the end of its conversation.
pub(super) async fn insert_statement<C: GenericClient + Sync>(
    tx: &C,
    ctx: &Ctx<'_>,
    new: NewStatement,
) -> Result<Statement, PgFailure> {
    touch_conversation(tx, &new.conversation_id, ctx.now()).await?;
    let seq = next_seq(tx, "statements", &new.conversation_id).await?;
    let statement = Statement {
        id: ctx.new_id(),
        seq: u32::try_from(seq).unwrap_or(u32::MAX),
        conversation_id: new.conversation_id,
        objective: new.objective,
        created_at: ctx.now(),
    };
    tx.execute(
        "INSERT INTO statements (id, conversation_id, seq, objective, created_at) VALUES ($1, $2, $3, $4, $5)",
        &[
            &statement.id,
            &statement.conversation_id,
            &seq,
            &statement.objective,
            &statement.created_at.as_millis(),
        ],
    )
    .await?;
    Ok(statement)
}

/// Appends a log entry at the end of its conversation's log.
pub(super) async fn insert_log_entry<C: GenericClient + Sync>(
    tx: &C,
    ctx: &Ctx<'_>,
    new: NewLogEntry,
) -> Result<LogEntry, PgFailure> {
    touch_conversation(tx, &new.conversation_id, ctx.now()).await?;
    let seq = next_seq(tx, "log_entries", &new.conversation_id).await?;
    let entry = LogEntry {
        id: ctx.new_id(),
        seq: u32::try_from(seq).unwrap_or(u32::MAX),
        conversation_id: new.conversation_id,
        kind: new.kind,
        text: new.text,
        parent_id: new.parent_id,
        side_conversation: new.side_conversation,
        statement_id: new.statement_id,
        call_id: new.call_id,
        created_at: ctx.now(),
    };
    let search = log_is_indexed(entry.kind.as_str()).then(|| search::document(&entry.text));
    tx.execute(
        "INSERT INTO log_entries (id, conversation_id, seq, kind, text, parent_id, side_conversation, statement_id, call_id, created_at, search)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, to_tsvector('simple', $11))",
        &[
            &entry.id,
            &entry.conversation_id,
            &seq,
            &entry.kind.as_str(),
            &entry.text,
            &entry.parent_id,
            &entry.side_conversation,
            &entry.statement_id,
            &entry.call_id,
            &entry.created_at.as_millis(),
            &search,
        ],
    )
    .await?;
    Ok(entry)
}

/// Appends a message at the end of its conversation's history.
pub(super) async fn insert_message<C: GenericClient + Sync>(
    tx: &C,
    ctx: &Ctx<'_>,
    message: NewLlmMessage,
) -> Result<LlmMessage, PgFailure> {
    touch_conversation(tx, &message.conversation_id, ctx.now()).await?;
    let seq = next_seq(tx, "llm_messages", &message.conversation_id).await?;
    let record = LlmMessage {
        id: ctx.new_id(),
        seq: u32::try_from(seq).unwrap_or(u32::MAX),
        conversation_id: message.conversation_id,
        statement_id: message.statement_id,
        turn: message.turn,
        role: message.role,
        content: message.content,
        created_at: ctx.now(),
    };
    tx.execute(
        "INSERT INTO llm_messages (id, conversation_id, statement_id, turn, seq, role, content, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        &[
            &record.id,
            &record.conversation_id,
            &record.statement_id,
            &i64::from(record.turn),
            &seq,
            &record.role,
            &serde_json::to_string(&record.content)?,
            &record.created_at.as_millis(),
        ],
    )
    .await?;
    Ok(record)
}

// ---------------------------------------------------------------- traits

#[async_trait]
impl ConversationStore for PgStore {
    async fn create_conversation(&self, new: NewConversation) -> Result<Conversation, StoreError> {
        let new = self.redacted(new);
        transact!(self, |tx, ctx| {
            let conversation = Conversation {
                id: ctx.new_id(),
                title: new.title,
                goal: new.goal,
                created_at: ctx.now(),
                updated_at: ctx.now(),
            };
            let statement = tx
                .prepare_cached("INSERT INTO conversations (id, title, goal, created_at, updated_at) VALUES ($1, $2, $3, $4, $5)")
                .await?;
            tx.execute(
                &statement,
                &[
                    &conversation.id,
                    &conversation.title,
                    &conversation.goal,
                    &conversation.created_at.as_millis(),
                    &conversation.updated_at.as_millis(),
                ],
            )
            .await?;
            Ok(conversation)
        })
    }

    async fn conversation(&self, id: &str) -> Result<Option<Conversation>, StoreError> {
        read!(self, |client| {
            let sql = format!("SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = $1");
            first(client, &sql, &[&id], conversation_row).await
        })
    }

    async fn find_conversations(
        &self,
        prefix: &str,
        limit_to: usize,
    ) -> Result<Vec<Conversation>, StoreError> {
        let prefix = prefix.to_ascii_lowercase();
        // Ids are lowercase hex and hyphens; anything else matches nothing
        // (and cannot smuggle LIKE syntax in).
        if prefix.is_empty() || !prefix.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            return Ok(Vec::new());
        }
        read!(self, |client| {
            let sql = format!(
                "SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id LIKE $1 ORDER BY updated_at DESC, id DESC LIMIT $2"
            );
            all(
                client,
                &sql,
                &[&format!("{prefix}%"), &limit(limit_to)],
                conversation_row,
            )
            .await
        })
    }

    async fn latest_conversation(&self) -> Result<Option<Conversation>, StoreError> {
        read!(self, |client| {
            let sql = format!(
                "SELECT {CONVERSATION_COLUMNS} FROM conversations ORDER BY updated_at DESC, id DESC LIMIT 1"
            );
            first(client, &sql, &[], conversation_row).await
        })
    }

    async fn list_conversations(
        &self,
        limit_to: usize,
    ) -> Result<Vec<ConversationSummary>, StoreError> {
        read!(self, |client| {
            let sql = "SELECT c.id, c.title, c.goal, c.created_at, c.updated_at,
                    (SELECT count(*) FROM log_entries e WHERE e.conversation_id = c.id),
                    (SELECT count(*) FROM tool_calls t WHERE t.conversation_id = c.id)
                FROM conversations c ORDER BY c.updated_at DESC, c.id DESC LIMIT $1";
            all(client, sql, &[&limit(limit_to)], |row| {
                Ok(ConversationSummary {
                    conversation: conversation_row(row)?,
                    log_entries: unsigned(row, 5)?,
                    tool_calls: unsigned(row, 6)?,
                })
            })
            .await
        })
    }

    async fn set_title(&self, id: &str, title: String) -> Result<(), StoreError> {
        let title = self.redacted(title);
        transact!(self, |tx, ctx| {
            let changed = tx
                .execute(
                    "UPDATE conversations SET title = $2, updated_at = greatest(updated_at, $3) WHERE id = $1",
                    &[&id, &title, &ctx.now().as_millis()],
                )
                .await?;
            if changed == 0 {
                return Err(StoreError::NotFound {
                    kind: "conversation",
                    id: id.to_owned(),
                }
                .into());
            }
            Ok(())
        })
    }

    async fn set_goal(&self, id: &str, goal: String) -> Result<(), StoreError> {
        let goal = self.redacted(goal);
        transact!(self, |tx, ctx| {
            let changed = tx
                .execute(
                    "UPDATE conversations SET goal = $2, updated_at = greatest(updated_at, $3) WHERE id = $1 AND goal IS NULL",
                    &[&id, &goal, &ctx.now().as_millis()],
                )
                .await?;
            if changed == 1 {
                return Ok(());
            }
            let exists = tx
                .query_opt("SELECT 1 FROM conversations WHERE id = $1", &[&id])
                .await?
                .is_some();
            let id = id.to_owned();
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
    }

    async fn replace_goal(&self, id: &str, goal: String) -> Result<(), StoreError> {
        let goal = self.redacted(goal);
        transact!(self, |tx, ctx| {
            let changed = tx
                .execute(
                    "UPDATE conversations SET goal = $2, updated_at = greatest(updated_at, $3) WHERE id = $1",
                    &[&id, &goal, &ctx.now().as_millis()],
                )
                .await?;
            if changed == 1 {
                Ok(())
            } else {
                Err(StoreError::NotFound {
                    kind: "conversation",
                    id: id.to_owned(),
                }
                .into())
            }
        })
    }

    async fn dump_conversation(&self, id: &str) -> Result<Option<ConversationDump>, StoreError> {
        let mut object = self.reader().await?;
        let tx = self.snapshot(&mut object).await?;
        let result: Result<_, PgFailure> = async {
            let sql = format!("SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = $1");
            let Some(conversation) = first(&tx, &sql, &[&id], conversation_row).await? else {
                return Ok(None);
            };
            Ok(Some(ConversationDump {
                conversation,
                statements: select_statements(&tx, id).await?,
                log_entries: select_log(&tx, id).await?,
                messages: select_messages(&tx, id).await?,
                tool_calls: select_tool_calls(&tx, id).await?,
            }))
        }
        .await;
        let dump = result.map_err(|failure| self.error(failure))?;
        tx.commit()
            .await
            .map_err(|error| self.error(error.into()))?;
        Ok(dump)
    }

    async fn search_conversation(
        &self,
        search: ConversationSearch,
    ) -> Result<Vec<SearchHit>, StoreError> {
        let Some(query) = search::tsquery(&search.text) else {
            return Ok(Vec::new());
        };
        read!(self, |client| {
            all(
                client,
                "WITH q AS (SELECT to_tsquery('simple', $1) AS q)
                 SELECT kind, id FROM (
                     SELECT 'log' AS kind, e.id, ts_rank(e.search, q.q) AS rank
                     FROM log_entries e, q
                     WHERE e.conversation_id = $2 AND e.search @@ q.q
                       AND (e.side_conversation IS NULL OR e.side_conversation <> ALL($3))
                     UNION ALL
                     SELECT 'tool', t.id, ts_rank(t.search, q.q)
                     FROM tool_calls t, q
                     WHERE t.conversation_id = $2 AND t.search @@ q.q
                 ) hits
                 ORDER BY rank DESC, id
                 LIMIT $4",
                &[
                    &query,
                    &search.conversation_id,
                    &search.skip_side_conversations,
                    &limit(search.limit),
                ],
                |row| {
                    let kind: &str = row.try_get(0)?;
                    let id: String = row.try_get(1)?;
                    Ok(if kind == "log" {
                        SearchHit::LogEntry(id)
                    } else {
                        SearchHit::ToolCall(id)
                    })
                },
            )
            .await
        })
    }
}

async fn select_statements<C: GenericClient + Sync>(
    client: &C,
    conversation_id: &str,
) -> Result<Vec<Statement>, PgFailure> {
    let sql = format!(
        "SELECT {STATEMENT_COLUMNS} FROM statements WHERE conversation_id = $1 ORDER BY seq"
    );
    all(client, &sql, &[&conversation_id], statement_row).await
}

async fn select_log<C: GenericClient + Sync>(
    client: &C,
    conversation_id: &str,
) -> Result<Vec<LogEntry>, PgFailure> {
    let sql =
        format!("SELECT {LOG_COLUMNS} FROM log_entries WHERE conversation_id = $1 ORDER BY seq");
    all(client, &sql, &[&conversation_id], log_row).await
}

async fn select_messages<C: GenericClient + Sync>(
    client: &C,
    conversation_id: &str,
) -> Result<Vec<LlmMessage>, PgFailure> {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM llm_messages WHERE conversation_id = $1 ORDER BY seq"
    );
    all(client, &sql, &[&conversation_id], message_row).await
}

#[async_trait]
impl StatementStore for PgStore {
    async fn add_statement(&self, new: NewStatement) -> Result<Statement, StoreError> {
        let new = self.redacted(new);
        transact!(self, |tx, ctx| insert_statement(&tx, &ctx, new).await)
    }

    async fn statements(&self, conversation_id: &str) -> Result<Vec<Statement>, StoreError> {
        read!(self, |client| select_statements(client, conversation_id)
            .await)
    }

    async fn current_objective(&self, conversation_id: &str) -> Result<Option<String>, StoreError> {
        read!(self, |client| {
            first(
                client,
                "SELECT objective FROM statements WHERE conversation_id = $1 AND objective IS NOT NULL ORDER BY seq DESC LIMIT 1",
                &[&conversation_id],
                |row| Ok(row.try_get(0)?),
            )
            .await
        })
    }

    async fn set_objective(&self, statement_id: &str, objective: String) -> Result<(), StoreError> {
        let objective = self.redacted(objective);
        transact!(self, |tx, _ctx| {
            let changed = tx
                .execute(
                    "UPDATE statements SET objective = $2 WHERE id = $1",
                    &[&statement_id, &objective],
                )
                .await?;
            if changed == 1 {
                Ok(())
            } else {
                Err(StoreError::NotFound {
                    kind: "statement",
                    id: statement_id.to_owned(),
                }
                .into())
            }
        })
    }
}

/// Whether a log entry of this kind is indexed for search (tool entries
/// are found through their tool calls).
pub(crate) fn log_is_indexed(kind: &str) -> bool {
    kind != LogKind::ToolUse.as_str() && kind != LogKind::ToolResult.as_str()
}

#[async_trait]
impl LogStore for PgStore {
    async fn append_log_entry(&self, new: NewLogEntry) -> Result<LogEntry, StoreError> {
        let new = self.redacted(new);
        transact!(self, |tx, ctx| insert_log_entry(&tx, &ctx, new).await)
    }

    async fn log_entries(&self, conversation_id: &str) -> Result<Vec<LogEntry>, StoreError> {
        read!(self, |client| select_log(client, conversation_id).await)
    }
}

#[async_trait]
impl MessageStore for PgStore {
    async fn append_messages(
        &self,
        new: Vec<NewLlmMessage>,
    ) -> Result<Vec<LlmMessage>, StoreError> {
        let new = self.redacted(new);
        transact!(self, |tx, ctx| {
            let mut stored = Vec::with_capacity(new.len());
            for message in new {
                stored.push(insert_message(&tx, &ctx, message).await?);
            }
            Ok(stored)
        })
    }

    async fn messages(&self, conversation_id: &str) -> Result<Vec<LlmMessage>, StoreError> {
        read!(self, |client| select_messages(client, conversation_id)
            .await)
    }
}
