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
//! A write no caller waits for (a served call's end, whose answer has gone)
//! is held for up to [`HOLD`] ([`StoreOptions::hold`]) in [`HeldWrites`],
//! beside the queue, and committed with the others held meanwhile: a
//! server answering calls back to back writes the pages of its ends once
//! per group rather than once per call, wakes the writer for a call's start
//! only, and a call's start never waits behind the end of the call before
//! it. Held writes commit when the oldest is [`HOLD`] old, when
//! [`GROUP_MAX`] are held, and before the writer stops.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, Transaction, TransactionBehavior, ffi};
use tokio::sync::{mpsc, oneshot};
use uuid::ContextV7;

use crate::sqlite::failure::{Failure, classify, classify_on, resembling};
use crate::sqlite::held::{GROUP_MAX, HeldWrites};
pub(crate) use crate::sqlite::job::{Pending, WriteCtx, WriteJob};
use crate::sqlite::journal::{self, StartJournal};
use crate::sqlite::schema;
use crate::sqlite::{StoreOptions, failure};
use crate::{Clock, StoreError};

/// Jobs waiting for the writer; senders wait (asynchronously) when full.
pub(crate) const QUEUE_CAPACITY: usize = 1024;

/// Longest a write held (see `held`) waits for company before it commits, unless
/// [`StoreOptions::hold`] says otherwise: a process killed within it loses
/// that write (for a call's end: the call stays on record as begun and
/// never ended).
pub(crate) const HOLD: Duration = Duration::from_millis(10);

/// Work for the writer.
pub(crate) enum Job {
    /// A write, run in the writer's transaction.
    Write(Box<dyn WriteJob>),
    /// Look at the [`HeldWrites`]: the first was held (a deadline to keep)
    /// or they make a group.
    Look,
    /// Finish the jobs queued before it, close the connection, end the
    /// thread, then signal the sender.
    Stop(oneshot::Sender<()>),
}

/// State owned by the writer thread.
pub(crate) struct Writer {
    conn: Connection,
    path: PathBuf,
    clock: Arc<dyn Clock>,
    ids: ContextV7,
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
        let mut jobs = jobs.into_iter();
        while let Some(mut job) = jobs.next() {
            let ctx = WriteCtx::new(clock.now(), ids);
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
                            // Those that ran and those not run yet alike:
                            // nothing of them is kept.
                            for other in done.into_iter().chain(jobs) {
                                other.settle(Err(resembling(&error, path)));
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
        // SQLite rolled the whole transaction back on the job's own error
        // (a full disk does): that error says why, not the savepoint's.
        Err(error) => match ran {
            Ran::Failed(cause) => Ran::Broken(cause),
            _ => Ran::Broken(classify_on(tx, error, path)),
        },
    }
}

/// Starts the writer thread: it opens (and migrates) the database, reports
/// the outcome, then serves jobs (and commits `held`'s writes) until every
/// sender is gone or a job says stop. Returns once the database is open.
pub(crate) async fn start(
    path: &Path,
    options: &StoreOptions,
    held: Arc<HeldWrites>,
) -> Result<(mpsc::Sender<Job>, Option<Arc<StartJournal>>), StoreError> {
    let (jobs, mut queue) = mpsc::channel::<Job>(QUEUE_CAPACITY);
    let (ready_tx, ready_rx) = oneshot::channel();
    let thread_path = path.to_path_buf();
    let thread_options = options.clone();
    std::thread::Builder::new()
        .name("satchel-store-writer".into())
        .spawn(move || {
            // However the thread ends, nothing stays held unanswered.
            let _closing = CloseOnExit(Arc::clone(&held));
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
            let journal = match thread_options.access {
                crate::sqlite::Access::ReadWrite => match writer.open_journal() {
                    Ok(journal) => Some(journal),
                    Err(error) => {
                        let _ = ready_tx.send(Err(error));
                        return;
                    }
                },
                crate::sqlite::Access::ReadOnly => None,
            };
            if ready_tx.send(Ok(journal.clone())).is_err() {
                return;
            }
            let mut folds = Folds::new(journal);
            let closed_signal = serve(&mut writer, &mut queue, &held, &mut folds);
            folds.remove_journal();
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
    let journal = ready_rx.await.map_err(|_| StoreError::Closed)??;
    Ok((jobs, journal))
}

/// Closes the held writes when the writer thread ends, by any path: those
/// still held are dropped, and their callers hear [`StoreError::Closed`].
struct CloseOnExit(Arc<HeldWrites>);

impl Drop for CloseOnExit {
    fn drop(&mut self) {
        drop(self.0.close());
    }
}

/// Takes jobs until every sender is gone or one says stop (returned), each
/// time all those waiting (up to [`GROUP_MAX`]) as one group, and commits
/// `held`'s writes once they are due (see the module's documentation).
fn serve(
    writer: &mut Writer,
    queue: &mut mpsc::Receiver<Job>,
    held: &HeldWrites,
    folds: &mut Folds,
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
        let mut group = Vec::new();
        let mut stop = None;
        match received {
            // The oldest held write is due.
            Err(_) => {}
            Ok(None) => {
                folds.commit(writer, held.close(), Vec::new());
                return None;
            }
            Ok(Some(first)) => {
                let mut next = Some(first);
                while let Some(job) = next.take() {
                    match job {
                        Job::Write(write) => group.push(write),
                        Job::Look => {}
                        Job::Stop(signal) => {
                            stop = Some(signal);
                            break;
                        }
                    }
                    if group.len() < GROUP_MAX {
                        next = queue.try_recv().ok();
                    }
                }
            }
        }
        if stop.is_some() {
            folds.commit(writer, held.close(), group);
            return stop;
        }
        // A write waited for carries every write held before it, so it
        // never passes the start it ends.
        let due = match clock {
            _ if !group.is_empty() => Some(held.take_all()),
            Some(_) => held.take_due(std::time::Instant::now()),
            // Without a timer nothing waits: whatever is held is due now.
            None => Some(held.take_all()),
        };
        if let Some(due) = due {
            folds.commit(writer, due, group);
        }
    }
}

/// The journal of calls' starts, and its closed generations not yet
/// folded (a fold that failed is tried again with the next commit).
pub(crate) struct Folds {
    journal: Option<Arc<StartJournal>>,
    closed: Vec<u64>,
}

impl Folds {
    fn new(journal: Option<Arc<StartJournal>>) -> Folds {
        Folds {
            journal,
            closed: Vec::new(),
        }
    }

    /// Commits `held` (taken before the journal's generation is closed, so
    /// every end among them follows a start folded here or before) and
    /// then `writes`, behind the fold of the starts journaled so far.
    fn commit(
        &mut self,
        writer: &mut Writer,
        held: Vec<Box<dyn WriteJob>>,
        writes: Vec<Box<dyn WriteJob>>,
    ) {
        let Some(journal) = &self.journal else {
            writer.run_group(held.into_iter().chain(writes).collect());
            return;
        };
        match journal.close_generation() {
            Ok(Some(generation)) => self.closed.push(generation),
            Ok(None) => {}
            Err(error) => {
                tracing::warn!("calls' starts stay in their journal for now: {error}");
            }
        }
        let mut jobs: Vec<Box<dyn WriteJob>> = Vec::with_capacity(1 + held.len() + writes.len());
        let mut folded = None;
        if !self.closed.is_empty() {
            let (reply, outcome) = oneshot::channel();
            jobs.push(Box::new(FoldJob {
                generations: self.closed.clone(),
                journal: Arc::clone(journal),
                reply,
            }));
            folded = Some(outcome);
        }
        jobs.extend(held);
        jobs.extend(writes);
        writer.run_group(jobs);
        match folded.map(|mut outcome| outcome.try_recv()) {
            Some(Ok(Ok(()))) => {
                for generation in self.closed.drain(..) {
                    journal.forget(generation);
                }
            }
            Some(Ok(Err(error))) => {
                tracing::warn!("calls' starts stay in their journal for now: {error}");
            }
            _ => {}
        }
    }

    /// Removes the journal once the writer has stopped with it all folded.
    fn remove_journal(&self) {
        if let Some(journal) = &self.journal
            && self.closed.is_empty()
        {
            journal.remove();
        }
    }
}

/// The fold of the journal's closed generations, first in its group.
struct FoldJob {
    generations: Vec<u64>,
    journal: Arc<StartJournal>,
    reply: oneshot::Sender<Result<(), StoreError>>,
}

impl WriteJob for FoldJob {
    fn run(&mut self, tx: &Transaction<'_>, _: &WriteCtx<'_>) -> Result<(), Failure> {
        self.generations
            .iter()
            .try_for_each(|generation| self.journal.fold(tx, *generation))
    }

    fn settle(self: Box<Self>, outcome: Result<(), StoreError>) {
        // Noted here, before the group's later jobs are answered, not once
        // the group is done: a start that retried the fold waits on one of
        // them and must find how the fold went.
        self.journal.note_fold(&outcome);
        let _ = self.reply.send(outcome);
    }
}

impl Writer {
    /// Folds the journals of processes gone, then makes this handle's. A
    /// fold that fails (a full database, an unreadable file) leaves them
    /// for a later open rather than refusing this one: the record must stay
    /// readable. A database another process holds locked is refused, as
    /// before the journal: a call must not run while its record cannot be
    /// written.
    fn open_journal(&mut self) -> Result<Arc<StartJournal>, StoreError> {
        match self.fold_dead_journals() {
            Ok(()) => {}
            Err(error @ StoreError::Busy { .. }) => return Err(error),
            Err(error) => {
                tracing::warn!(
                    "calls begun by processes now gone stay in their journals for now: {error}"
                );
            }
        }
        Ok(Arc::new(StartJournal::new(&self.path)))
    }

    fn fold_dead_journals(&mut self) -> Result<(), StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|error| classify(error, &self.path))?;
        let done = match journal::recover(&tx, &self.path) {
            Ok(done) => done,
            Err(Failure::Sql(error)) => return Err(classify_on(&tx, error, &self.path)),
            Err(failure) => return Err(failure.into_store_error(&self.path)),
        };
        tx.commit().map_err(|error| classify(error, &self.path))?;
        for path in done {
            let _ = std::fs::remove_file(path);
        }
        Ok(())
    }
}
