//! `satchel db copy`: a whole record from one store to another (SQLite to
//! PostgreSQL or back), row for row with ids, times, sequence numbers and
//! memory revisions kept, then checked by counting every table on both
//! sides.
//!
//! The source is read in one snapshot; the target is written in one
//! transaction (all or nothing) and must hold no records yet. Derived
//! data (SQLite's full-text index, PostgreSQL's `search` columns) is
//! rebuilt by the target as it takes the rows. The rows are held in
//! memory between the two, which suits records up to a few GB.

use serde::Serialize;

use crate::open::{Backend, OpenedStore};
use crate::{StoreError, Timestamp};

/// How a column is typed, as far as copying cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Text (also JSON).
    Text,
    /// A 64-bit integer (times, counts, sequence numbers).
    Int,
    /// A 32-bit integer on PostgreSQL (`exit_code`).
    Int4,
    /// A flag: 0/1 in SQLite, BOOLEAN in PostgreSQL.
    Bool,
    /// A float: REAL in both.
    Real,
    /// Bytes (embeddings).
    Blob,
}

/// One value being copied.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    Null,
    Int(i64),
    Bool(bool),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

/// A table copied, its columns in order, and the order rows are read in
/// (so that rows referring to earlier ones follow them).
pub(crate) struct Table {
    pub(crate) name: &'static str,
    pub(crate) columns: &'static [(&'static str, Kind)],
    pub(crate) order: &'static str,
}

use Kind::{Blob, Bool, Int, Int4, Real, Text};

/// Every table of the record, parents first. `memory_state` is copied
/// apart (its one row exists on both sides).
pub(crate) const TABLES: &[Table] = &[
    Table {
        name: "conversations",
        columns: &[
            ("id", Text),
            ("title", Text),
            ("goal", Text),
            ("created_at", Int),
            ("updated_at", Int),
        ],
        order: "created_at, id",
    },
    Table {
        name: "statements",
        columns: &[
            ("id", Text),
            ("conversation_id", Text),
            ("seq", Int),
            ("objective", Text),
            ("created_at", Int),
        ],
        order: "conversation_id, seq",
    },
    Table {
        name: "log_entries",
        columns: &[
            ("id", Text),
            ("conversation_id", Text),
            ("seq", Int),
            ("kind", Text),
            ("text", Text),
            ("parent_id", Text),
            ("side_conversation", Text),
            ("statement_id", Text),
            ("call_id", Text),
            ("created_at", Int),
        ],
        order: "conversation_id, seq",
    },
    Table {
        name: "llm_messages",
        columns: &[
            ("id", Text),
            ("conversation_id", Text),
            ("statement_id", Text),
            ("turn", Int),
            ("seq", Int),
            ("role", Text),
            ("content", Text),
            ("created_at", Int),
        ],
        order: "conversation_id, seq",
    },
    Table {
        name: "tool_calls",
        columns: &[
            ("id", Text),
            ("conversation_id", Text),
            ("statement_id", Text),
            ("turn", Int),
            ("call_id", Text),
            ("tool", Text),
            ("input", Text),
            ("results", Text),
            ("response", Text),
            ("user_message", Text),
            ("is_error", Bool),
            ("error_code", Text),
            ("started_at", Int),
            ("finished_at", Int),
            ("duration_us", Int),
        ],
        order: "started_at, id",
    },
    Table {
        name: "audit",
        columns: &[
            ("id", Text),
            ("source", Text),
            ("tool", Text),
            ("input", Text),
            ("is_error", Bool),
            ("error_code", Text),
            ("decision", Text),
            ("conversation_id", Text),
            ("tool_call_id", Text),
            ("started_at", Int),
            ("finished_at", Int),
            ("duration_us", Int),
            ("caller", Text),
        ],
        order: "started_at, id",
    },
    Table {
        name: "code_executions",
        columns: &[
            ("id", Text),
            ("language", Text),
            ("runtime", Text),
            ("code", Text),
            ("stdout", Text),
            ("stderr", Text),
            ("exit_code", Int4),
            ("duration_ms", Int),
            ("success", Bool),
            ("error_category", Text),
            ("error_message", Text),
            ("sandbox", Text),
            ("conversation_id", Text),
            ("session_id", Text),
            ("tool_call_id", Text),
            ("trigger_message", Text),
            ("reasoning", Text),
            ("created_at", Int),
        ],
        order: "created_at, id",
    },
    Table {
        name: "code_jobs",
        columns: &[
            ("id", Text),
            ("task", Text),
            ("context", Text),
            ("language", Text),
            ("generator", Text),
            ("status", Text),
            ("result", Text),
            ("error", Text),
            ("conversation_id", Text),
            ("runner", Text),
            ("created_at", Int),
            ("started_at", Int),
            ("finished_at", Int),
        ],
        order: "created_at, id",
    },
    Table {
        name: "llm_calls",
        columns: &[
            ("id", Text),
            ("conversation_id", Text),
            ("statement_id", Text),
            ("turn", Int),
            ("purpose", Text),
            ("provider", Text),
            ("model", Text),
            ("estimate_tokens", Int),
            ("estimate_sections", Text),
            ("context_window", Int),
            ("input_tokens", Int),
            ("output_tokens", Int),
            ("cache_read_tokens", Int),
            ("cache_write_tokens", Int),
            ("stop_reason", Text),
            ("error", Text),
            ("duration_ms", Int),
            ("created_at", Int),
        ],
        order: "created_at, id",
    },
    Table {
        name: "memory_sessions",
        columns: &[
            ("id", Text),
            ("namespace", Text),
            ("conversation_id", Text),
            ("name", Text),
            ("started_at", Int),
            ("ended_at", Int),
            ("end_reason", Text),
            ("summary_memory_id", Text),
        ],
        order: "started_at, id",
    },
    Table {
        name: "memories",
        columns: &[
            ("seq", Int),
            ("id", Text),
            ("namespace", Text),
            ("layer", Text),
            ("content", Text),
            ("category", Text),
            ("certainty", Real),
            ("session_id", Text),
            ("conversation_id", Text),
            ("created_at", Int),
            ("updated_at", Int),
            ("expires_at", Int),
            ("archived_at", Int),
            ("embedding", Blob),
            ("rev", Int),
        ],
        order: "seq",
    },
    Table {
        name: "memory_deletions",
        columns: &[("rev", Int), ("seq", Int)],
        order: "rev, seq",
    },
    Table {
        name: "call_starts",
        columns: &[
            ("id", Text),
            ("source", Text),
            ("tool", Text),
            ("call_id", Text),
            ("input", Text),
            ("conversation_id", Text),
            ("started_at", Int),
            ("caller", Text),
        ],
        order: "started_at, id",
    },
    Table {
        name: "inbox",
        columns: &[
            ("channel", Text),
            ("id", Int),
            ("payload", Text),
            ("received_at", Int),
            ("handled_at", Int),
        ],
        order: "channel, id",
    },
    Table {
        name: "front_state",
        columns: &[("key", Text), ("value", Text), ("updated_at", Int)],
        order: "key",
    },
];

/// Everything read from the source: each table's rows (in [`TABLES`]
/// order) and the memory revision.
pub(crate) struct Snapshot {
    pub(crate) tables: Vec<Vec<Vec<Cell>>>,
    pub(crate) memory_rev: i64,
}

/// What a copy moved: rows per table on each side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CopyReport {
    /// `(table, rows in the source, rows in the target)`, parents first.
    pub tables: Vec<(String, u64, u64)>,
    /// When the copy finished.
    pub finished_at: Timestamp,
}

impl CopyReport {
    /// Rows copied in all.
    pub fn rows(&self) -> u64 {
        self.tables.iter().map(|(_, _, target)| target).sum()
    }
}

/// The counts after a copy disagree.
#[derive(Debug, thiserror::Error)]
#[error(
    "after the copy, {table} has {source_rows} rows in the source and {target_rows} in the target"
)]
struct CountMismatch {
    table: String,
    source_rows: u64,
    target_rows: u64,
}

async fn counts(store: &OpenedStore) -> Result<Vec<u64>, StoreError> {
    match store.backend() {
        Backend::Sqlite(s) => s.count_rows().await,
        Backend::Postgres(s) => s.count_rows().await,
    }
}

/// Copies the whole record of `from` into `to`, which must hold no
/// records yet; then counts every table on both sides and fails if they
/// differ. Both stores stay open.
pub async fn copy(from: &OpenedStore, to: &OpenedStore) -> Result<CopyReport, StoreError> {
    if counts(to).await?.iter().any(|rows| *rows > 0) {
        return Err(StoreError::TargetNotEmpty {
            path: to.path().to_path_buf(),
        });
    }
    let snapshot = match from.backend() {
        Backend::Sqlite(s) => s.export_rows().await?,
        Backend::Postgres(s) => s.export_rows().await?,
    };
    match to.backend() {
        Backend::Sqlite(s) => s.import_rows(snapshot).await?,
        Backend::Postgres(s) => s.import_rows(snapshot).await?,
    }
    let (source, target) = (counts(from).await?, counts(to).await?);
    let tables: Vec<(String, u64, u64)> = TABLES
        .iter()
        .zip(source.iter().zip(target.iter()))
        .map(|(table, (s, t))| (table.name.to_owned(), *s, *t))
        .collect();
    if let Some((table, source_rows, target_rows)) = tables.iter().find(|(_, s, t)| s != t) {
        return Err(StoreError::Database {
            path: to.path().to_path_buf(),
            source: Box::new(CountMismatch {
                table: table.clone(),
                source_rows: *source_rows,
                target_rows: *target_rows,
            }),
        });
    }
    Ok(CopyReport {
        tables,
        finished_at: crate::Clock::now(&crate::SystemClock),
    })
}
