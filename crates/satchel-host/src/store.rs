//! [`LazyStore`]: the database a host records into, opened on first use,
//! and the [`redactor`] every record, log line and child's output passes
//! through.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use satchel_builtins::code::CodeStoreHandle;
use satchel_builtins::conversation::RecordsHandle;
use satchel_store::{
    CodeStore, OpenedStore, RedactionConfig, Redactor, Store, StoreLocation, StoreOptions,
};
use satchel_tools::Settings;

/// The redactor for this host: the environment variables agent.json's
/// `redaction` section names, plus conventional secret names. A broken
/// section is a warning.
pub fn redactor(settings: &Settings, env: &BTreeMap<String, String>) -> Redactor {
    let (config, warning) = settings.section::<RedactionConfig>("redaction");
    if let Some(warning) = warning {
        tracing::warn!("{warning}");
    }
    Redactor::from_env(&config, env.iter().map(|(k, v)| (k.clone(), v.clone())))
}

/// [`redactor`] without the warning (a reload's tools configuration: the
/// section's warning was given when the host opened).
pub(crate) fn redactor_quietly(settings: &Settings, env: &BTreeMap<String, String>) -> Redactor {
    let (config, _) = settings.section::<RedactionConfig>("redaction");
    Redactor::from_env(&config, env.iter().map(|(k, v)| (k.clone(), v.clone())))
}

/// The database for recording, opened on first use and shared by every
/// conversation and tool of the host (the `code` tool traces into it, the
/// `conversation` tool reads it). A command that records nothing never
/// creates the file.
pub struct LazyStore {
    db: Option<PathBuf>,
    redactor: Redactor,
    /// The `PG*` (and `USER`) variables a `postgres://` location may need.
    pg_env: Vec<(String, String)>,
    /// The open store; a failed open is not kept, so the next use tries
    /// again (a PostgreSQL server that was restarting, say).
    cell: tokio::sync::OnceCell<OpenedStore>,
    /// The open [`open_in_background`](Self::open_in_background) started,
    /// until the first `get` or `close` waits for it.
    background: std::sync::Mutex<Option<tokio::task::JoinHandle<Result<(), String>>>>,
}

impl LazyStore {
    /// A store at `db` (none when no location is known) that redacts with `redactor`.
    pub fn new(db: Option<PathBuf>, redactor: Redactor) -> LazyStore {
        LazyStore {
            db,
            redactor,
            pg_env: Vec::new(),
            cell: tokio::sync::OnceCell::new(),
            background: std::sync::Mutex::new(None),
        }
    }

    /// Takes from `env` what completes a `postgres://` location (`PGHOST`,
    /// `PGUSER`, `PGPASSWORD`...).
    pub fn with_env(mut self, env: &BTreeMap<String, String>) -> LazyStore {
        self.pg_env = env
            .iter()
            .filter(|(name, _)| name.starts_with("PG") || name.as_str() == "USER")
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        self
    }

    /// The open store, or why it cannot be opened (a warning for callers,
    /// never a lost result). A failure is not remembered: the next call
    /// tries again (but the first call after a failed background open
    /// reports that failure rather than waiting as long again).
    pub async fn get(&self) -> Result<&OpenedStore, String> {
        if let Some(Err(reason)) = self.wait_for_background().await {
            return Err(reason);
        }
        self.open().await
    }

    /// Waits for the background open, if one was started and nobody has
    /// waited for it yet: its result, or `None`.
    async fn wait_for_background(&self) -> Option<Result<(), String>> {
        let pending = self
            .background
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()?;
        Some(
            pending
                .await
                .unwrap_or_else(|error| Err(format!("opening the database failed: {error}"))),
        )
    }

    async fn open(&self) -> Result<&OpenedStore, String> {
        self.cell
            .get_or_try_init(|| async {
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
                // A file, or a postgres:// URL that the PG* variables complete.
                let location = StoreLocation::parse(path.as_os_str(), self.pg_env.clone())
                    .map_err(|error| error.to_string())?;
                satchel_store::open(&location, options)
                    .await
                    .map_err(|error| error.to_string())
            })
            .await
    }

    /// Starts opening the store on the runtime, for a command that will
    /// record: the open (a thread of its own) overlaps with the caller's
    /// work until its first [`get`](Self::get), which then waits for it.
    /// A failure is reported by that `get`.
    pub fn open_in_background(self: &Arc<Self>) {
        let store = Arc::clone(self);
        let pending = tokio::spawn(async move { store.open().await.map(|_| ()) });
        let previous = self
            .background
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .replace(pending);
        // A second call while the first is still pending: the first open
        // is the same cell's, and whoever waits for the new one waits for it.
        drop(previous);
    }

    /// The open store as the record traits, or why it cannot be opened.
    pub async fn records(&self) -> Result<Arc<dyn Store>, String> {
        Ok(Arc::new(self.get().await?.clone()))
    }

    /// Waits for queued writes and closes the file, if it was opened (by a
    /// background open still under way, too).
    pub async fn close(&self) {
        self.wait_for_background().await;
        if let Some(store) = self.cell.get()
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
        LazyStore::records(self).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database that could not be opened (a server restarting, a
    /// directory not there yet) is tried again at the next use, not
    /// refused for the rest of the process.
    #[tokio::test]
    async fn a_failed_open_is_tried_again() {
        let dir = tempfile::tempdir().unwrap();
        let parent = dir.path().join("data");
        std::fs::write(&parent, "a file where the directory should be").unwrap();
        let store = LazyStore::new(Some(parent.join("satchel.db")), Redactor::default());
        assert!(store.get().await.is_err());
        std::fs::remove_file(&parent).unwrap();
        std::fs::create_dir(&parent).unwrap();
        assert!(store.get().await.is_ok(), "{:?}", store.get().await.err());
        store.close().await;
    }

    /// A background open is waited for: its failure is what the next
    /// `get` reports (once; the one after tries again), and `close` right
    /// after it closes the store it opened (checkpointed: no WAL left).
    #[tokio::test]
    async fn a_background_open_is_reported_and_closed() {
        let dir = tempfile::tempdir().unwrap();
        let parent = dir.path().join("data");
        std::fs::write(&parent, "a file where the directory should be").unwrap();
        let store = Arc::new(LazyStore::new(
            Some(parent.join("satchel.db")),
            Redactor::default(),
        ));
        store.open_in_background();
        let failed = store.get().await;
        assert!(failed.is_err(), "{failed:?}");
        std::fs::remove_file(&parent).unwrap();
        std::fs::create_dir(&parent).unwrap();
        let opened = store.get().await;
        assert!(opened.is_ok(), "{opened:?}");
        store.close().await;

        let db = dir.path().join("fresh.db");
        let store = Arc::new(LazyStore::new(Some(db.clone()), Redactor::default()));
        store.open_in_background();
        store.close().await;
        assert!(db.exists(), "the background open never finished");
        assert!(
            !dir.path().join("fresh.db-wal").exists(),
            "closed without waiting for the background open"
        );
    }
}
