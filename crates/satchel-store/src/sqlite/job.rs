//! One write for the writer thread ([`WriteJob`]), the usual one made of
//! a closure and its reply ([`Pending`]), and what its body gets besides
//! the transaction ([`WriteCtx`]): what the writer, the held writes and
//! the repositories share.

use rusqlite::Transaction;
use tokio::sync::oneshot;
use uuid::{ContextV7, Uuid};

use crate::sqlite::failure::Failure;
use crate::{StoreError, Timestamp};

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

/// What a transaction body gets besides the transaction: the time of the
/// write and an id generator.
pub(crate) struct WriteCtx<'a> {
    now: Timestamp,
    ids: &'a ContextV7,
}

impl<'a> WriteCtx<'a> {
    /// A write at `now`, its ids made by `ids`.
    pub(crate) fn new(now: Timestamp, ids: &'a ContextV7) -> WriteCtx<'a> {
        WriteCtx { now, ids }
    }
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
