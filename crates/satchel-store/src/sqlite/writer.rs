//! The writer thread: the one connection that writes, fed jobs through a
//! channel, each job one `BEGIN IMMEDIATE` ... `COMMIT` transaction.
//!
//! One writer means concurrent tasks queue in the channel instead of
//! fighting over SQLite's write lock, so they never see `SQLITE_BUSY` (the
//! busy timeout is still there for other processes sharing the file).

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::{Connection, Transaction, TransactionBehavior};
use tokio::sync::{mpsc, oneshot};
use uuid::{ContextV7, Uuid};

use crate::sqlite::failure::{Failure, classify, classify_on};
use crate::sqlite::schema;
use crate::sqlite::{StoreOptions, failure};
use crate::{Clock, StoreError, Timestamp};

/// Jobs waiting for the writer; senders wait (asynchronously) when full.
pub(crate) const QUEUE_CAPACITY: usize = 1024;

/// What the writer loop does after a job.
pub(crate) enum Flow {
    /// Take the next job.
    Continue,
    /// Close the connection, end the thread, then signal the sender.
    Stop(oneshot::Sender<()>),
}

/// Work for the writer; it replies through a channel of its own.
pub(crate) type Job = Box<dyn FnOnce(&mut Writer) -> Flow + Send>;

/// State owned by the writer thread.
pub(crate) struct Writer {
    conn: Connection,
    path: PathBuf,
    clock: Arc<dyn Clock>,
    ids: ContextV7,
}

/// What a transaction body gets besides the transaction: the time of the
/// write and an id generator.
pub(crate) struct WriteCtx<'a> {
    now: Timestamp,
    ids: &'a ContextV7,
}

impl WriteCtx<'_> {
    /// The time this write happens, from the store's clock.
    pub(crate) fn now(&self) -> Timestamp {
        self.now
    }

    /// A new UUIDv7 id; ids made by one writer increase strictly.
    pub(crate) fn new_id(&self) -> String {
        let millis = u64::try_from(self.now.as_millis()).unwrap_or(0);
        let nanos = u32::try_from(millis % 1000).unwrap_or(0) * 1_000_000;
        let timestamp = uuid::Timestamp::from_unix(self.ids, millis / 1000, nanos);
        Uuid::new_v7(timestamp).to_string()
    }
}

impl Writer {
    /// Runs `body` in one immediate transaction and commits it; on any
    /// failure the transaction is rolled back and nothing of it remains.
    pub(crate) fn transact<R>(
        &mut self,
        body: impl FnOnce(&Transaction<'_>, &WriteCtx<'_>) -> Result<R, Failure>,
    ) -> Result<R, StoreError> {
        let Writer {
            conn,
            path,
            clock,
            ids,
        } = self;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|error| classify(error, path))?;
        let ctx = WriteCtx {
            now: clock.now(),
            ids,
        };
        let value = match body(&tx, &ctx) {
            Ok(value) => value,
            Err(Failure::Sql(error)) => return Err(classify_on(&tx, error, path)),
            Err(failure) => return Err(failure.into_store_error(path)),
        };
        if let Err(error) = tx.commit() {
            return Err(classify_on(conn, error, path));
        }
        Ok(value)
    }
}

/// Starts the writer thread: it opens (and migrates) the database, reports
/// the outcome, then serves jobs until every sender is gone or a job says
/// stop. Returns once the database is open.
pub(crate) async fn start(
    path: &Path,
    options: &StoreOptions,
) -> Result<mpsc::Sender<Job>, StoreError> {
    let (jobs, mut queue) = mpsc::channel::<Job>(QUEUE_CAPACITY);
    let (ready_tx, ready_rx) = oneshot::channel();
    let thread_path = path.to_path_buf();
    let thread_options = options.clone();
    std::thread::Builder::new()
        .name("satchel-store-writer".into())
        .spawn(move || {
            let clock = Arc::clone(&thread_options.clock);
            let opened =
                schema::open_writer(&thread_path, &thread_options, clock.now().as_millis());
            let conn = match opened {
                Ok(conn) => conn,
                Err(error) => {
                    let _ = ready_tx.send(Err(error));
                    return;
                }
            };
            let mut writer = Writer {
                conn,
                path: thread_path,
                clock,
                ids: ContextV7::new(),
            };
            if ready_tx.send(Ok(())).is_err() {
                return;
            }
            let mut closed_signal = None;
            while let Some(job) = queue.blocking_recv() {
                // A panicking job drops its reply sender, so its caller sees
                // `Closed`; the writer itself carries on.
                match std::panic::catch_unwind(AssertUnwindSafe(|| job(&mut writer))) {
                    Ok(Flow::Continue) => {}
                    Ok(Flow::Stop(signal)) => {
                        closed_signal = Some(signal);
                        break;
                    }
                    Err(_) => tracing::error!("a store write panicked; it was rolled back"),
                }
            }
            queue.close();
            if let Err((_, error)) = writer.conn.close() {
                let error = failure::classify(error, &writer.path);
                tracing::warn!("closing the database: {error}");
            }
            if let Some(signal) = closed_signal {
                let _ = signal.send(());
            }
        })
        .map_err(|source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    ready_rx.await.map_err(|_| StoreError::Closed)??;
    Ok(jobs)
}
