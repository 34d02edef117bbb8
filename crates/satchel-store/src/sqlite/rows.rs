//! What every SQLite repository shares: reading a column as Satchel's
//! types, running a prepared query for all rows, and bumping a
//! conversation before a write under it.

use rusqlite::{Connection, Row, Transaction, params};
use serde_json::Value;

use crate::sqlite::failure::{Failure, column_error};
use crate::{StoreError, Timestamp};

/// A stored name this build does not know.
#[derive(Debug, thiserror::Error)]
#[error("unknown {what} `{value}`")]
pub(super) struct UnknownName {
    pub(super) what: &'static str,
    pub(super) value: String,
}

/// A column of milliseconds since the epoch.
pub(super) fn timestamp(row: &Row<'_>, index: usize) -> rusqlite::Result<Timestamp> {
    Ok(Timestamp::from_millis(row.get(index)?))
}

/// A column of JSON text.
pub(super) fn json(row: &Row<'_>, index: usize) -> rusqlite::Result<Value> {
    let text: String = row.get(index)?;
    serde_json::from_str(&text).map_err(|error| column_error(index, error))
}

/// Runs a query and collects every row.
pub(super) fn all<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    map: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>, Failure> {
    let mut statement = conn.prepare_cached(sql)?;
    let rows = statement.query_map(params, map)?;
    Ok(rows.collect::<Result<Vec<T>, _>>()?)
}

/// Bumps a conversation's `updated_at`; fails when it does not exist.
pub(super) fn touch_conversation(
    tx: &Transaction<'_>,
    id: &str,
    now: Timestamp,
) -> Result<(), Failure> {
    let changed = tx
        .prepare_cached("UPDATE conversations SET updated_at = max(updated_at, ?2) WHERE id = ?1")?
        .execute(params![id, now.as_millis()])?;
    if changed == 0 {
        return Err(StoreError::NotFound {
            kind: "conversation",
            id: id.to_owned(),
        }
        .into());
    }
    Ok(())
}
