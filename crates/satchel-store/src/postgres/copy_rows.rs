//! `satchel db copy` on [`PgStore`]: every table read in one snapshot, or
//! written in one transaction, value for value; the `search` columns are
//! computed from the rows as they are written.

use satchel_core::ToolResults;
use serde_json::Value;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::StoreError;
use crate::copy::{Cell, Kind, Snapshot, TABLES};
use crate::postgres::failure::PgFailure;
use crate::postgres::repo::log_is_indexed;
use crate::postgres::{PgStore, search, transact};

fn cell(row: &Row, index: usize, kind: Kind) -> Result<Cell, PgFailure> {
    Ok(match kind {
        Kind::Text => row
            .try_get::<_, Option<String>>(index)?
            .map_or(Cell::Null, Cell::Text),
        Kind::Int => row
            .try_get::<_, Option<i64>>(index)?
            .map_or(Cell::Null, Cell::Int),
        Kind::Int4 => row
            .try_get::<_, Option<i32>>(index)?
            .map_or(Cell::Null, |value| Cell::Int(i64::from(value))),
        Kind::Bool => row
            .try_get::<_, Option<bool>>(index)?
            .map_or(Cell::Null, Cell::Bool),
        Kind::Real => row
            .try_get::<_, Option<f32>>(index)?
            .map_or(Cell::Null, |value| Cell::Real(f64::from(value))),
        Kind::Blob => row
            .try_get::<_, Option<Vec<u8>>>(index)?
            .map_or(Cell::Null, Cell::Blob),
    })
}

/// A value as the parameter its column takes.
fn param(cell: &Cell, kind: Kind) -> Box<dyn ToSql + Sync + Send> {
    match kind {
        Kind::Text => Box::new(match cell {
            Cell::Text(text) => Some(text.clone()),
            _ => None,
        }),
        Kind::Int => Box::new(match cell {
            Cell::Int(value) => Some(*value),
            Cell::Bool(flag) => Some(i64::from(*flag)),
            _ => None,
        }),
        Kind::Int4 => Box::new(match cell {
            Cell::Int(value) => i32::try_from(*value).ok(),
            _ => None,
        }),
        Kind::Bool => Box::new(match cell {
            Cell::Bool(flag) => Some(*flag),
            Cell::Int(value) => Some(*value != 0),
            _ => None,
        }),
        #[allow(clippy::cast_possible_truncation)] // Certainties are f32s stored as REAL.
        Kind::Real => Box::new(match cell {
            Cell::Real(value) => Some(*value as f32),
            Cell::Int(value) => Some(*value as f32),
            _ => None,
        }),
        Kind::Blob => Box::new(match cell {
            Cell::Blob(bytes) => Some(bytes.clone()),
            _ => None,
        }),
    }
}

fn text(row: &[Cell], index: usize) -> Option<&str> {
    match row.get(index) {
        Some(Cell::Text(text)) => Some(text),
        _ => None,
    }
}

/// What the `search` column of a copied row holds, if it is indexed.
fn search_text(table: &str, row: &[Cell]) -> Option<String> {
    match table {
        // kind, text
        "log_entries" => text(row, 3)
            .filter(|kind| log_is_indexed(kind))
            .and(text(row, 4))
            .map(search::document),
        // conversation_id, tool, input, results, response
        "tool_calls" => {
            text(row, 1)?;
            let input: Value = serde_json::from_str(text(row, 6)?).unwrap_or(Value::Null);
            let results: ToolResults = serde_json::from_str(text(row, 7)?)
                .unwrap_or_else(|_| ToolResults::Text(String::new()));
            Some(search::tool_call_text(
                text(row, 5)?,
                &input,
                &results,
                text(row, 8),
            ))
        }
        _ => None,
    }
}

impl PgStore {
    /// Rows per table, in [`TABLES`] order.
    pub(crate) async fn count_rows(&self) -> Result<Vec<u64>, StoreError> {
        let client = self.reader().await?;
        let mut counts = Vec::with_capacity(TABLES.len());
        for table in TABLES {
            let sql = format!("SELECT count(*) FROM {}", table.name);
            let row = client
                .query_one(&sql, &[])
                .await
                .map_err(|error| self.error(error.into()))?;
            counts.push(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0));
        }
        Ok(counts)
    }

    /// Every table's rows and the memory revision, in one snapshot.
    pub(crate) async fn export_rows(&self) -> Result<Snapshot, StoreError> {
        let mut object = self.reader().await?;
        let tx = self.snapshot(&mut object).await?;
        let result: Result<Snapshot, PgFailure> = async {
            let mut tables = Vec::with_capacity(TABLES.len());
            for table in TABLES {
                let columns: Vec<&str> = table.columns.iter().map(|(name, _)| *name).collect();
                let sql = format!(
                    "SELECT {} FROM {} ORDER BY {}",
                    columns.join(", "),
                    table.name,
                    table.order
                );
                let mut rows = Vec::new();
                for row in tx.query(&sql, &[]).await? {
                    rows.push(
                        table
                            .columns
                            .iter()
                            .enumerate()
                            .map(|(index, (_, kind))| cell(&row, index, *kind))
                            .collect::<Result<Vec<Cell>, PgFailure>>()?,
                    );
                }
                tables.push(rows);
            }
            let memory_rev: i64 = tx
                .query_one("SELECT rev FROM memory_state WHERE id = 1", &[])
                .await?
                .try_get(0)?;
            Ok(Snapshot { tables, memory_rev })
        }
        .await;
        let snapshot = result.map_err(|failure| self.error(failure))?;
        tx.commit()
            .await
            .map_err(|error| self.error(error.into()))?;
        Ok(snapshot)
    }

    /// Writes a snapshot in one transaction, foreign keys checked at commit.
    pub(crate) async fn import_rows(&self, snapshot: Snapshot) -> Result<(), StoreError> {
        let rev = snapshot.memory_rev;
        transact!(self, |tx, _ctx| {
            tx.batch_execute("SET CONSTRAINTS ALL DEFERRED").await?;
            for (table, rows) in TABLES.iter().zip(snapshot.tables) {
                let mut columns: Vec<&str> = table.columns.iter().map(|(name, _)| *name).collect();
                let mut marks: Vec<String> = (1..=columns.len()).map(|n| format!("${n}")).collect();
                let indexed = matches!(table.name, "log_entries" | "tool_calls");
                if indexed {
                    columns.push("search");
                    marks.push(format!("to_tsvector('simple', ${})", marks.len() + 1));
                }
                let sql = format!(
                    "INSERT INTO {} ({}) VALUES ({})",
                    table.name,
                    columns.join(", "),
                    marks.join(", ")
                );
                let statement = tx.prepare(&sql).await?;
                for row in rows {
                    let mut values: Vec<Box<dyn ToSql + Sync + Send>> = row
                        .iter()
                        .zip(table.columns)
                        .map(|(cell, (_, kind))| param(cell, *kind))
                        .collect();
                    if indexed {
                        values.push(Box::new(search_text(table.name, &row)));
                    }
                    let refs: Vec<&(dyn ToSql + Sync)> = values
                        .iter()
                        .map(|value| &**value as &(dyn ToSql + Sync))
                        .collect();
                    tx.execute(&statement, &refs).await?;
                }
            }
            tx.execute("UPDATE memory_state SET rev = $1 WHERE id = 1", &[&rev])
                .await?;
            // New memories take keys after the copied ones.
            tx.batch_execute(
                "SELECT setval(pg_get_serial_sequence('memories', 'seq'), coalesce((SELECT max(seq) FROM memories), 0) + 1, false)",
            )
            .await?;
            Ok(())
        })?;
        self.saw_revision(rev);
        Ok(())
    }
}
