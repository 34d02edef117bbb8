//! `satchel db copy` on [`SqliteStore`]: every table read in one snapshot,
//! or written in one transaction, value for value.

use rusqlite::types::Value as SqlValue;

use crate::StoreError;
use crate::copy::{Cell, Kind, Snapshot, TABLES};
use crate::redact::Redactor;
use crate::sqlite::failure::Failure;
use crate::sqlite::{Redact, SqliteStore};

/// Rows copied in are already redacted: they pass as they are.
impl Redact for Snapshot {
    fn redact(self, _: &Redactor) -> Snapshot {
        self
    }
}

fn cell(value: SqlValue, kind: Kind) -> Cell {
    match (value, kind) {
        (SqlValue::Null, _) => Cell::Null,
        (SqlValue::Integer(value), Kind::Bool) => Cell::Bool(value != 0),
        (SqlValue::Integer(value), _) => Cell::Int(value),
        (SqlValue::Real(value), _) => Cell::Real(value),
        (SqlValue::Text(text), _) => Cell::Text(text),
        (SqlValue::Blob(bytes), _) => Cell::Blob(bytes),
    }
}

fn value(cell: Cell) -> SqlValue {
    match cell {
        Cell::Null => SqlValue::Null,
        Cell::Int(value) => SqlValue::Integer(value),
        Cell::Bool(flag) => SqlValue::Integer(i64::from(flag)),
        Cell::Real(value) => SqlValue::Real(value),
        Cell::Text(text) => SqlValue::Text(text),
        Cell::Blob(bytes) => SqlValue::Blob(bytes),
    }
}

impl SqliteStore {
    /// Rows per table, in [`TABLES`] order.
    pub(crate) async fn count_rows(&self) -> Result<Vec<u64>, StoreError> {
        self.read(|conn| {
            let mut counts = Vec::with_capacity(TABLES.len());
            for table in TABLES {
                let sql = format!("SELECT count(*) FROM {}", table.name);
                counts.push(conn.query_row(&sql, [], |row| row.get(0))?);
            }
            Ok(counts)
        })
        .await
    }

    /// Every table's rows and the memory revision, in one snapshot.
    pub(crate) async fn export_rows(&self) -> Result<Snapshot, StoreError> {
        self.read(|conn| {
            let tx = conn.unchecked_transaction()?;
            let mut tables = Vec::with_capacity(TABLES.len());
            for table in TABLES {
                let columns: Vec<&str> = table.columns.iter().map(|(name, _)| *name).collect();
                let sql = format!(
                    "SELECT {} FROM {} ORDER BY {}",
                    columns.join(", "),
                    table.name,
                    table.order
                );
                let mut statement = tx.prepare(&sql)?;
                let rows = statement.query_map([], |row| {
                    table
                        .columns
                        .iter()
                        .enumerate()
                        .map(|(index, (_, kind))| Ok(cell(row.get(index)?, *kind)))
                        .collect::<rusqlite::Result<Vec<Cell>>>()
                })?;
                tables.push(rows.collect::<Result<Vec<_>, _>>()?);
            }
            let memory_rev: i64 =
                tx.query_row("SELECT rev FROM memory_state WHERE id = 1", [], |row| {
                    row.get(0)
                })?;
            tx.commit()?;
            Ok(Snapshot { tables, memory_rev })
        })
        .await
    }

    /// Writes a snapshot in one transaction (the full-text index follows
    /// through its triggers).
    pub(crate) async fn import_rows(&self, snapshot: Snapshot) -> Result<(), StoreError> {
        self.write(snapshot, |tx, _ctx, snapshot| {
            tx.execute_batch("PRAGMA defer_foreign_keys = ON")?;
            for (table, rows) in TABLES.iter().zip(snapshot.tables) {
                let columns: Vec<&str> = table.columns.iter().map(|(name, _)| *name).collect();
                let marks: Vec<String> = (1..=columns.len()).map(|n| format!("?{n}")).collect();
                let sql = format!(
                    "INSERT INTO {} ({}) VALUES ({})",
                    table.name,
                    columns.join(", "),
                    marks.join(", ")
                );
                let mut insert = tx.prepare(&sql)?;
                for row in rows {
                    insert.execute(rusqlite::params_from_iter(row.into_iter().map(value)))?;
                }
            }
            tx.execute(
                "UPDATE memory_state SET rev = ?1 WHERE id = 1",
                [snapshot.memory_rev],
            )?;
            Ok::<(), Failure>(())
        })
        .await
    }
}
