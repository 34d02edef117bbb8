//! Opening the database for the commands: for recording (failures are
//! warnings, never lost results) and for reading (failures are errors).

use std::path::Path;

use anyhow::{Context, bail};
use satchel_store::{
    Access, Conversation, ConversationStore, SqliteStore, StoreError, StoreOptions, Timestamp,
};

/// Opens the database to read it; `None` when the file does not exist yet
/// (nothing has been recorded). A file this process may not write is read
/// read-only.
pub(crate) async fn open_for_reading(db: Option<&Path>) -> anyhow::Result<Option<SqliteStore>> {
    let Some(path) = db else {
        bail!("no database location: set --db, SATCHEL_DB, XDG_DATA_HOME or HOME");
    };
    if !path.exists() {
        return Ok(None);
    }
    let store = match SqliteStore::open(path, StoreOptions::default()).await {
        Err(StoreError::ReadOnly { .. }) => {
            let read_only = StoreOptions {
                access: Access::ReadOnly,
                ..StoreOptions::default()
            };
            SqliteStore::open(path, read_only).await?
        }
        other => other?,
    };
    Ok(Some(store))
}

/// The conversation `wanted` names (an id or a unique prefix), or the
/// latest one when `wanted` is `None`.
pub(crate) async fn resolve_conversation(
    store: &SqliteStore,
    wanted: Option<&str>,
) -> anyhow::Result<Option<Conversation>> {
    let Some(wanted) = wanted else {
        return Ok(store.latest_conversation().await?);
    };
    if let Some(exact) = store.conversation(wanted).await? {
        return Ok(Some(exact));
    }
    let mut found = store
        .find_conversations(wanted, 6)
        .await
        .context("looking up the conversation")?;
    match found.len() {
        0 => bail!(
            "no conversation matches `{wanted}` in {}; `satchel conversations` lists them",
            store.path().display()
        ),
        1 => Ok(found.pop()),
        _ => {
            let ids: Vec<&str> = found.iter().map(|c| c.id.as_str()).collect();
            bail!(
                "`{wanted}` matches several conversations ({}...); give more of the id",
                ids.join(", ")
            )
        }
    }
}

/// A time for a table: `2025-01-02 03:04:05` (UTC).
pub(crate) fn table_time(time: Timestamp) -> String {
    let text = time.to_rfc3339();
    text.get(..19).unwrap_or(&text).replacen('T', " ", 1)
}
