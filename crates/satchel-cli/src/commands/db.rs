//! Opening the database for the commands: for recording (failures are
//! warnings, never lost results) and for reading (failures are errors).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;

use anyhow::{Context, bail};
use satchel_store::CodeStore;
use satchel_store::{
    Access, Conversation, ConversationStore, RedactionConfig, Redactor, SqliteStore, Store,
    StoreError, StoreOptions, Timestamp,
};
use satchel_tools::Settings;
use satchel_tools::code::CodeStoreHandle;
use satchel_tools::conversation::RecordsHandle;

/// The redactor for this run: the environment variables agent.json's
/// `redaction` section names, plus conventional secret names.
pub(crate) fn redactor(settings: &Settings) -> Redactor {
    let (config, warning) = settings.section::<RedactionConfig>("redaction");
    if let Some(warning) = warning {
        tracing::warn!("{warning}");
    }
    // Values that are not UTF-8 cannot appear in stored text as they are.
    let env = std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)));
    Redactor::from_env(&config, env)
}

/// The database for recording, opened on first use and shared by the
/// command and its tools (the `code` tool traces into it, the
/// `conversation` tool reads it). A command that
/// records nothing never creates the file.
pub(crate) struct LazyStore {
    db: Option<PathBuf>,
    redactor: Redactor,
    cell: tokio::sync::OnceCell<Result<SqliteStore, String>>,
}

impl LazyStore {
    /// A store at `db` (none when no location is known) that redacts with `redactor`.
    pub(crate) fn new(db: Option<PathBuf>, redactor: Redactor) -> LazyStore {
        LazyStore {
            db,
            redactor,
            cell: tokio::sync::OnceCell::new(),
        }
    }

    /// The open store, or why it cannot be opened (a warning for callers,
    /// never a lost result).
    pub(crate) async fn get(&self) -> Result<&SqliteStore, String> {
        let opened = self
            .cell
            .get_or_init(|| async {
                let Some(path) = &self.db else {
                    return Err(
                        "no database location: set --db, SATCHEL_DB, XDG_DATA_HOME or HOME"
                            .to_owned(),
                    );
                };
                let options = StoreOptions {
                    redactor: self.redactor.clone(),
                    ..StoreOptions::default()
                };
                SqliteStore::open(path, options)
                    .await
                    .map_err(|error| error.to_string())
            })
            .await;
        opened.as_ref().map_err(Clone::clone)
    }

    /// Waits for queued writes and closes the file, if it was opened.
    pub(crate) async fn close(&self) {
        if let Some(Ok(store)) = self.cell.get()
            && let Err(error) = store.close().await
        {
            tracing::warn!("closing the database: {error}");
        }
    }
}

#[async_trait]
impl CodeStoreHandle for LazyStore {
    async fn code_store(&self) -> Result<Arc<dyn CodeStore>, String> {
        let store = self.get().await?;
        Ok(Arc::new(store.clone()))
    }
}

#[async_trait]
impl RecordsHandle for LazyStore {
    async fn records(&self) -> Result<Arc<dyn Store>, String> {
        let store = self.get().await?;
        Ok(Arc::new(store.clone()))
    }
}

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
