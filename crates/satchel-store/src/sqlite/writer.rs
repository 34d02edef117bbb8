//! The writer thread: the one connection that writes, fed jobs through a
//! channel. Jobs that are waiting together are committed together (a
//! group commit): one `BEGIN IMMEDIATE` ... `COMMIT` for the group, each
//! job in a savepoint of its own, so a job that fails leaves nothing of
//! itself and takes nothing from the others. A job's caller hears back
//! only once the group's `COMMIT` returned.
//!
//! One writer means concurrent tasks queue in the channel instead of
//! fighting over SQLite's write lock, so they never see `SQLITE_BUSY` (the
//! busy timeout is still there for other processes sharing the file).
//!
//! A write no caller waits for ([`Job::Later`]: a served call's end, whose
//! answer has gone) is held for up to [`HOLD`] ([`StoreOptions::hold`])
//! and committed with the others held meanwhile: a server answering calls
//! back to back writes the pages of its ends once per group rather than
//! once per call, and a call's start never waits behind the end of the
//! call before it. Held
//! writes commit when the oldest is [`HOLD`] old, when [`GROUP_MAX`] are
//! held, and before the writer stops.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, Transaction, TransactionBehavior, ffi};
use tokio::sync::{mpsc, oneshot};
use uuid::{ContextV7, Uuid};

use crate::sqlite::failure::{Failure, classify, classify_on};
use crate::sqlite::schema;
use crate::sqlite::{StoreOptions, failure};
use crate::{Clock, StoreError, Timestamp};

/// Jobs waiting for the writer; senders wait (asynchronously) when full.
pub(crate) const QUEUE_CAPACITY: usize = 1024;

/// Most jobs committed in one transaction.
const GROUP_MAX: usize = 64;

/// Longest a [`Job::Later`] waits for company before it commits, unless
/// [`StoreOptions::hold`] says otherwise: a process killed within it loses
/// that write (for a call's end: the call stays on record as begun and
/// never ended).
pub(crate) const HOLD: Duration = Duration::from_millis(10);

/// Work for the writer.
pub(crate) enum Job {
    /// A write, run in the writer's transaction.
    Write(Box<dyn WriteJob>),
    /// A write whose caller does not wait for it: held up to [`HOLD`] to
    /// commit with others, after writes queued later if need be (it must
    /// not be one a later write depends on).
    Later(Box<dyn WriteJob>),
    /// Finish the jobs queued before it, close the connection, end the
    /// thread, then signal the sender.
    Stop(oneshot::Sender<()>),
}

/// One write: its body, then its caller told how it ended.
pub(crate) trait WriteJob: Send {
    /// Runs the body inside the writer's transaction, keeping its value
    /// for [`WriteJob::settle`].
    fn run(&mut self, tx: &Transaction<'_>, ctx: &WriteCtx<'_>) -> Result<(), Failure>;

    /// Tells the caller: `Ok` once committed (with the body's value), else
    /// why nothing of it was kept.
    fn settle(self: Box<Self>, outcome: Result<(), StoreError>);
}

/// A [`WriteJob`] made of a closure and the channel of its reply.
pub(crate) struct Pending<F, R> {
    body: Option<F>,
    value: Option<R>,
    reply: oneshot::Sender<Result<R, StoreError>>,
}

impl<F, R> Pending<F, R> {
    /// A job running `body`, answering on `reply`.
    pub(crate) fn new(body: F, reply: oneshot::Sender<Result<R, StoreError>>) -> Pending<F, R> {
        Pending {
            body: Some(body),
            value: None,
            reply,
        }
    }
}

impl<F, R> WriteJob for Pending<F, R>
where
    F: FnOnce(&Transaction<'_>, &WriteCtx<'_>) -> Result<R, Failure> + Send,
    R: Send,
{
    fn run(&mut self, tx: &Transaction<'_>, ctx: &WriteCtx<'_>) -> Result<(), Failure> {
        if let Some(body) = self.body.take() {
            self.value = Some(body(tx, ctx)?);
        }
        Ok(())
    }

    fn settle(self: Box<Self>, outcome: Result<(), StoreError>) {
        let Pending { value, reply, .. } = *self;
        let result = outcome.and_then(|()| value.ok_or(StoreError::Closed));
        let _ = reply.send(result);
    }
}

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

/// The same SQLite error again, for each job of a group that one failure
/// (a `BEGIN` or a `COMMIT`) ended.
fn again(error: &rusqlite::Error) -> rusqlite::Error {
    match error {
        rusqlite::Error::SqliteFailure(code, message) => {
            rusqlite::Error::SqliteFailure(*code, message.clone())
        }
        other => rusqlite::Error::SqliteFailure(
            ffi::Error::new(ffi::SQLITE_ERROR),
            Some(other.to_string()),
        ),
    }
}

/// How one job of a group ended inside the transaction.
enum Ran {
    /// Its body succeeded; it waits for the commit.
    Done,
    /// Its body failed (and was rolled back alone) with this error.
    Failed(StoreError),
    /// Its body panicked; it was rolled back alone.
    Panicked,
    /// Rolling it back failed: the whole transaction must go.
    Broken(StoreError),
}

impl Writer {
    /// Runs `jobs` in one immediate transaction and commits it. Each job
    /// of a group of several runs in its own savepoint: one that fails is
    /// rolled back alone and told why; the others are told once the
    /// commit returned (a failed commit fails them all, nothing kept).
    pub(crate) fn run_group(&mut self, jobs: Vec<Box<dyn WriteJob>>) {
        if jobs.is_empty() {
            return;
        }
        let Writer {
            conn,
            path,
            clock,
            ids,
        } = self;
        let tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
            Ok(tx) => tx,
            Err(error) => {
                for job in jobs {
                    job.settle(Err(classify(again(&error), path)));
                }
                return;
            }
        };
        let alone = jobs.len() == 1;
        let mut done: Vec<Box<dyn WriteJob>> = Vec::with_capacity(jobs.len());
        for mut job in jobs {
            let ctx = WriteCtx {
                now: clock.now(),
                ids,
            };
            match run_one(&tx, &ctx, job.as_mut(), alone, path) {
                Ran::Done => done.push(job),
                Ran::Failed(error) if !alone => job.settle(Err(error)),
                Ran::Panicked if !alone => {
                    tracing::error!("a store write panicked; it was rolled back");
                    drop(job);
                }
                outcome => {
                    // Nothing of the transaction can be kept: it is rolled
                    // back (dropped), and every job that ran in it is told.
                    drop(tx);
                    match outcome {
                        Ran::Failed(error) | Ran::Broken(error) => {
                            for other in done {
                                other.settle(Err(StoreError::Database {
                                    path: path.clone(),
                                    source: Box::new(std::io::Error::other(error.to_string())),
                                }));
                            }
                            job.settle(Err(error));
                        }
                        _ => tracing::error!("a store write panicked; it was rolled back"),
                    }
                    return;
                }
            }
        }
        match tx.commit() {
            Ok(()) => {
                for job in done {
                    job.settle(Ok(()));
                }
            }
            Err(error) => {
                for job in done {
                    job.settle(Err(classify_on(conn, again(&error), path)));
                }
            }
        }
    }
}

/// Runs one job's body in `tx`: inside a savepoint of its own unless it is
/// `alone` in the transaction (then the transaction is its savepoint).
fn run_one(
    tx: &Transaction<'_>,
    ctx: &WriteCtx<'_>,
    job: &mut dyn WriteJob,
    alone: bool,
    path: &Path,
) -> Ran {
    if !alone && let Err(error) = tx.execute_batch("SAVEPOINT job") {
        return Ran::Broken(classify_on(tx, error, path));
    }
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| job.run(tx, ctx)));
    let ran = match outcome {
        Ok(Ok(())) => {
            if alone {
                return Ran::Done;
            }
            match tx.execute_batch("RELEASE job") {
                Ok(()) => return Ran::Done,
                Err(error) => return Ran::Broken(classify_on(tx, error, path)),
            }
        }
        Ok(Err(Failure::Sql(error))) => Ran::Failed(classify_on(tx, error, path)),
        Ok(Err(failure)) => Ran::Failed(failure.into_store_error(path)),
        Err(_) => Ran::Panicked,
    };
    if alone {
        return ran;
    }
    match tx.execute_batch("ROLLBACK TO job; RELEASE job") {
        Ok(()) => ran,
        Err(error) => Ran::Broken(classify_on(tx, error, path)),
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
            let closed_signal = serve(&mut writer, &mut queue, thread_options.hold);
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

/// Takes jobs until every sender is gone or one says stop (returned), each
/// time all those waiting (up to [`GROUP_MAX`]) as one group; the
/// [`Job::Later`] among them are held (see the module's documentation).
fn serve(
    writer: &mut Writer,
    queue: &mut mpsc::Receiver<Job>,
    hold: Duration,
) -> Option<oneshot::Sender<()>> {
    // Only a clock for the held writes' deadline: the jobs come from the
    // channel as before.
    let clock = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(runtime) => Some(runtime),
        Err(error) => {
            tracing::warn!("the store writer has no timer ({error}): writes are not held");
            None
        }
    };
    let mut held = Held::new(hold);
    loop {
        let received = match (&clock, held.deadline()) {
            (Some(runtime), Some(deadline)) => {
                // The timer is made inside the runtime, whose clock it uses.
                runtime.block_on(async {
                    tokio::time::timeout_at(deadline.into(), queue.recv()).await
                })
            }
            _ => Ok(queue.blocking_recv()),
        };
        let Ok(received) = received else {
            // The oldest held write is due.
            writer.run_group(held.take());
            continue;
        };
        let Some(first) = received else {
            writer.run_group(held.take());
            return None;
        };
        let mut group = Vec::new();
        let mut stop = None;
        let mut next = Some(first);
        while let Some(job) = next.take() {
            match job {
                Job::Write(write) => group.push(write),
                Job::Later(write) if clock.is_some() => held.push(write),
                Job::Later(write) => group.push(write),
                Job::Stop(signal) => {
                    stop = Some(signal);
                    break;
                }
            }
            if group.len() < GROUP_MAX && held.len() < GROUP_MAX {
                next = queue.try_recv().ok();
            }
        }
        if !group.is_empty() {
            writer.run_group(group);
        }
        if stop.is_some() || held.len() >= GROUP_MAX {
            writer.run_group(held.take());
        }
        if stop.is_some() {
            return stop;
        }
    }
}

/// The [`Job::Later`] writes waiting for company, and since when.
struct Held {
    jobs: Vec<Box<dyn WriteJob>>,
    since: Option<std::time::Instant>,
    hold: Duration,
}

impl Held {
    fn new(hold: Duration) -> Held {
        Held {
            jobs: Vec::new(),
            since: None,
            hold,
        }
    }

    fn push(&mut self, job: Box<dyn WriteJob>) {
        self.since.get_or_insert_with(std::time::Instant::now);
        self.jobs.push(job);
    }

    fn len(&self) -> usize {
        self.jobs.len()
    }

    /// When the oldest must commit; `None` when none is held.
    fn deadline(&self) -> Option<std::time::Instant> {
        self.since.and_then(|since| since.checked_add(self.hold))
    }

    fn take(&mut self) -> Vec<Box<dyn WriteJob>> {
        self.since = None;
        std::mem::take(&mut self.jobs)
    }
}
