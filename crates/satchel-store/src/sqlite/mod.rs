//! [`SqliteStore`]: the embedded backend, one SQLite file in WAL mode.
//!
//! Writes go to one writer thread that owns the only write connection
//! (`writer`); reads run on read-only connections from a small pool inside
//! `tokio::task::spawn_blocking`, so no SQLite call ever runs on an async
//! worker thread. Opening applies the embedded migrations (`schema`).
//!
//! Durability: WAL with `synchronous=NORMAL` by default. A committed write
//! survives the process being killed at any point (the WAL is written
//! before `COMMIT` returns); a power cut or kernel crash can lose the last
//! few commits but never corrupts the file. [`Durability::Full`] syncs the
//! WAL on every commit for those who need power-cut durability too.

mod call_repo;
mod code_repo;
mod copy_rows;
mod failure;
mod front_repo;
mod held;
mod job;
mod journal;
mod memory;
mod records_repo;
mod repo;
mod rows;
mod schema;
mod usage_repo;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, Transaction};
use tokio::sync::{mpsc, oneshot};

use crate::redact::Redactor;
use crate::sqlite::failure::Failure;
use crate::sqlite::held::{Held, HeldWrites};
use crate::sqlite::journal::StartJournal;
use crate::sqlite::writer::{Job, Pending, WriteCtx, WriteJob};
use crate::{Clock, StoreError, SystemClock};

pub use schema::{APPLICATION_ID, SCHEMA_VERSION};

/// Whether the store may write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Access {
    /// Create the file if missing, migrate it, write to it.
    #[default]
    ReadWrite,
    /// Only read an existing, up-to-date file; every write fails with
    /// [`StoreError::ReadOnly`]. Works on read-only files and file systems.
    ReadOnly,
}

/// How hard a commit tries to reach the disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=NORMAL`: commits survive a killed process; a power cut
    /// may lose the last few.
    #[default]
    Normal,
    /// `synchronous=FULL`: every commit is synced to disk before it returns.
    Full,
}

impl Durability {
    fn pragma_value(self) -> &'static str {
        match self {
            Durability::Normal => "NORMAL",
            Durability::Full => "FULL",
        }
    }
}

/// How to open a [`SqliteStore`].
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Read-write (the default) or read-only.
    pub access: Access,
    /// Applied to every string before it is stored.
    pub redactor: Redactor,
    /// Source of the times the store assigns.
    pub clock: Arc<dyn Clock>,
    /// Commit durability.
    pub durability: Durability,
    /// Largest size the database may grow to; writes beyond it fail with
    /// [`StoreError::Full`]. `None`: no limit but the disk's.
    pub max_size_bytes: Option<u64>,
    /// How long to wait for another process's lock before failing with
    /// [`StoreError::Busy`].
    pub busy_timeout: Duration,
    /// Idle read connections kept open.
    pub read_connections: usize,
    /// Longest a write no caller waits for (a served call's end) is held
    /// to commit with others ([`SqliteStore::finish_calls_later`]); a
    /// process killed within it loses that write.
    pub hold: Duration,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            access: Access::ReadWrite,
            redactor: Redactor::none(),
            clock: Arc::new(SystemClock),
            durability: Durability::Normal,
            max_size_bytes: None,
            busy_timeout: Duration::from_secs(5),
            read_connections: 4,
            hold: writer::HOLD,
        }
    }
}

/// When a write is committed.
#[derive(Debug, Clone, Copy)]
enum When {
    /// As soon as the writer reaches it; its caller waits for that.
    Now,
    /// With others, within [`StoreOptions::hold`]; no caller waits for it.
    Later,
}

/// Values that pass through redaction on their way in.
pub(crate) trait Redact {
    /// The value with every secret replaced.
    fn redact(self, redactor: &Redactor) -> Self;
}

/// The SQLite store; cheap to clone, every clone shares one writer.
///
/// Must be used inside a Tokio runtime (reads use `spawn_blocking`).
///
/// # Caveats
/// A write whose future is dropped after it was queued still runs and
/// commits; only its reply is lost. Dropping the last clone lets the writer
/// finish the queued writes and close the file; [`SqliteStore::close`]
/// waits for that.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    jobs: mpsc::Sender<Job>,
    /// The writes no caller waits for, until the writer commits them.
    held: Arc<HeldWrites>,
    /// Where calls' starts are put on record (none when read-only).
    journal: Option<Arc<StartJournal>>,
    path: PathBuf,
    options: StoreOptions,
    idle_readers: Mutex<Vec<Connection>>,
    closed: AtomicBool,
}

impl SqliteStore {
    /// Opens (creating and migrating when `options.access` allows) the
    /// database at `path`.
    ///
    /// A missing directory is created with mode 0700 and a missing file with
    /// mode 0600. A file that is not a database, belongs to another program
    /// or was made by a newer Satchel is refused with an error naming it,
    /// and left exactly as it was.
    pub async fn open(path: &Path, options: StoreOptions) -> Result<SqliteStore, StoreError> {
        let held = Arc::new(HeldWrites::new(options.hold));
        let (jobs, journal) = writer::start(path, &options, Arc::clone(&held)).await?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                jobs,
                held,
                journal,
                path: path.to_path_buf(),
                options,
                idle_readers: Mutex::new(Vec::new()),
                closed: AtomicBool::new(false),
            }),
        })
    }

    /// SQLite's `quick_check` of the file: empty when it is sound, else
    /// the problems it found (at most 10). Reads only.
    pub async fn integrity_problems(&self) -> Result<Vec<String>, StoreError> {
        self.read(|conn| {
            let mut statement = conn.prepare("PRAGMA quick_check(10)")?;
            let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
            let mut problems = Vec::new();
            for row in rows {
                let row = row?;
                if row != "ok" {
                    problems.push(row);
                }
            }
            Ok(problems)
        })
        .await
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The options the store was opened with.
    pub fn options(&self) -> &StoreOptions {
        &self.inner.options
    }

    /// Waits for queued writes, then closes the database (checkpointing the
    /// WAL into the main file). Every later operation on any clone fails
    /// with [`StoreError::Closed`].
    pub async fn close(&self) -> Result<(), StoreError> {
        if self.inner.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.inner
            .idle_readers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        let (done_tx, done_rx) = oneshot::channel::<()>();
        if self.inner.jobs.send(Job::Stop(done_tx)).await.is_err() {
            return Ok(());
        }
        let _ = done_rx.await;
        Ok(())
    }

    /// The journal calls' starts go to; none when read-only.
    fn journal(&self) -> Option<&StartJournal> {
        self.inner.journal.as_deref()
    }

    /// [`StoreError::Closed`] once the store is closed.
    fn check_open(&self) -> Result<(), StoreError> {
        if self.inner.closed.load(Ordering::SeqCst) {
            Err(StoreError::Closed)
        } else {
            Ok(())
        }
    }

    fn redactor(&self) -> &Redactor {
        &self.inner.options.redactor
    }

    /// Tells the writer a call's start was journaled: it folds it within
    /// the hold, with the writes held. Fails once the writer has stopped.
    fn note_start(&self) -> Result<(), StoreError> {
        match self.inner.held.note_start() {
            Ok(Held::Quietly) => Ok(()),
            Ok(Held::Look) => {
                // As for a write held (see `enqueue_as`).
                let _ = self.inner.jobs.try_send(Job::Look);
                Ok(())
            }
            Err(()) => Err(StoreError::Closed),
        }
    }

    /// Runs `body` on the writer thread, after redacting `input`, in a
    /// transaction of its own or (when other writes are waiting with it)
    /// in a savepoint of a group's; `Ok` means committed.
    async fn write<T, R>(
        &self,
        input: T,
        body: impl FnOnce(&Transaction<'_>, &WriteCtx<'_>, T) -> Result<R, Failure> + Send + 'static,
    ) -> Result<R, StoreError>
    where
        T: Redact + Send + 'static,
        R: Send + 'static,
    {
        self.enqueue(input, body).await
    }

    /// Hands `body` to the writer now, behind every write queued before it
    /// (unless the queue is full: then when the future is first polled),
    /// and returns the future of its reply. [`SqliteStore::close`] waits
    /// for it like for any queued write.
    fn enqueue<T, R>(
        &self,
        input: T,
        body: impl FnOnce(&Transaction<'_>, &WriteCtx<'_>, T) -> Result<R, Failure> + Send + 'static,
    ) -> impl Future<Output = Result<R, StoreError>> + Send + 'static
    where
        T: Redact + Send + 'static,
        R: Send + 'static,
    {
        self.enqueue_as(When::Now, input, body)
    }

    /// [`SqliteStore::enqueue`], or (`When::Later`) held for a while to
    /// commit with others, for a write no caller waits for: it may commit
    /// after writes queued later, so it must not be one they depend on.
    fn enqueue_as<T, R>(
        &self,
        when: When,
        input: T,
        body: impl FnOnce(&Transaction<'_>, &WriteCtx<'_>, T) -> Result<R, Failure> + Send + 'static,
    ) -> impl Future<Output = Result<R, StoreError>> + Send + 'static
    where
        T: Redact + Send + 'static,
        R: Send + 'static,
    {
        let (reply_tx, reply_rx) = oneshot::channel();
        let queued = if self.inner.closed.load(Ordering::SeqCst) {
            Err(StoreError::Closed)
        } else {
            let input = input.redact(&self.inner.options.redactor);
            let job: Box<dyn WriteJob> = Box::new(Pending::new(
                move |tx: &Transaction<'_>, ctx: &WriteCtx<'_>| body(tx, ctx, input),
                reply_tx,
            ));
            match when {
                When::Now => match self.inner.jobs.try_send(Job::Write(job)) {
                    Ok(()) => Ok(None),
                    Err(mpsc::error::TrySendError::Full(job)) => Ok(Some(job)),
                    Err(mpsc::error::TrySendError::Closed(_)) => Err(StoreError::Closed),
                },
                When::Later => match self.inner.held.hold(job) {
                    Ok(Held::Quietly) => Ok(None),
                    Ok(Held::Look) => {
                        // A full queue keeps the writer awake, and it reads
                        // the held writes' deadline on every turn; a closed
                        // one has closed them too.
                        let _ = self.inner.jobs.try_send(Job::Look);
                        Ok(None)
                    }
                    Err(_) => Err(StoreError::Closed),
                },
            }
        };
        let jobs = self.inner.jobs.clone();
        async move {
            if let Some(job) = queued? {
                jobs.send(job).await.map_err(|_| StoreError::Closed)?;
            }
            reply_rx.await.map_err(|_| StoreError::Closed)?
        }
    }

    /// Runs `body` on a read-only connection on a blocking thread.
    async fn read<R>(
        &self,
        body: impl FnOnce(&Connection) -> Result<R, Failure> + Send + 'static,
    ) -> Result<R, StoreError>
    where
        R: Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        let task = tokio::task::spawn_blocking(move || {
            if inner.closed.load(Ordering::SeqCst) {
                return Err(StoreError::Closed);
            }
            let idle = inner
                .idle_readers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop();
            let conn = match idle {
                Some(conn) => conn,
                None => schema::open_reader(&inner.path, &inner.options)?,
            };
            let result = body(&conn).map_err(|failure| failure.into_store_error(&inner.path));
            if !inner.closed.load(Ordering::SeqCst) {
                let mut idle = inner
                    .idle_readers
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                if idle.len() < inner.options.read_connections {
                    idle.push(conn);
                }
            }
            result
        });
        match task.await {
            Ok(result) => result,
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            Err(_) => Err(StoreError::Closed),
        }
    }
}
