//! [`HeldWrites`]: the writes no caller waits for (a served call's end,
//! whose answer has gone), held beside the writer's queue rather than in
//! it, so that holding one wakes the writer only when it must act: for the
//! first write held (from then on it has a deadline) and for the one that
//! fills a group. A server answering calls back to back wakes its writer
//! once per call (the call's start), not twice.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::sqlite::job::WriteJob;

/// Most jobs committed in one transaction, and the writes held that make
/// a group.
pub(crate) const GROUP_MAX: usize = 64;

/// The held writes, shared by the store's handles (which hold) and its
/// writer thread (which commits them).
pub(crate) struct HeldWrites {
    state: Mutex<State>,
    hold: Duration,
}

struct State {
    jobs: Vec<Box<dyn WriteJob>>,
    /// Calls' starts journaled since the last take, waiting to be folded
    /// with the held writes (see `journal`).
    starts: usize,
    /// When the oldest write still held was held.
    since: Option<Instant>,
    /// Set once the writer has stopped: nothing more is held.
    closed: bool,
}

/// What holding a write asks of the writer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Held {
    /// Nothing: it already knows when to commit.
    Quietly,
    /// To look: this is the first write held (a deadline to keep), or the
    /// writes held make a group.
    Look,
}

impl HeldWrites {
    /// An empty set whose writes commit once the oldest is `hold` old.
    pub(crate) fn new(hold: Duration) -> HeldWrites {
        HeldWrites {
            state: Mutex::new(State {
                jobs: Vec::new(),
                starts: 0,
                since: None,
                closed: false,
            }),
            hold,
        }
    }

    /// Holds `job`; gives it back once the writer has stopped.
    pub(crate) fn hold(&self, job: Box<dyn WriteJob>) -> Result<Held, Box<dyn WriteJob>> {
        let mut state = self.state();
        if state.closed {
            return Err(job);
        }
        state.jobs.push(job);
        Ok(state.after_one_more())
    }

    /// Counts a call's start, journaled, as held: it is folded with them.
    /// Fails once the writer has stopped.
    pub(crate) fn note_start(&self) -> Result<Held, ()> {
        let mut state = self.state();
        if state.closed {
            return Err(());
        }
        state.starts += 1;
        Ok(state.after_one_more())
    }

    /// When the writer must next commit what is held; `None` when nothing is.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.state()
            .since
            .map(|since| since.checked_add(self.hold).unwrap_or(since))
    }

    /// The writes held, if they are due at `now` (the oldest is old
    /// enough, or they make a group), possibly none but starts to fold;
    /// `None` when nothing is due.
    pub(crate) fn take_due(&self, now: Instant) -> Option<Vec<Box<dyn WriteJob>>> {
        let mut state = self.state();
        let old = state
            .since
            .is_some_and(|since| now.saturating_duration_since(since) >= self.hold);
        (old || state.len() >= GROUP_MAX).then(|| state.take())
    }

    /// Every write held, due or not.
    pub(crate) fn take_all(&self) -> Vec<Box<dyn WriteJob>> {
        self.state().take()
    }

    /// Every write held, and nothing more held from now on (the writer is
    /// stopping; later writes are refused as the store's are).
    pub(crate) fn close(&self) -> Vec<Box<dyn WriteJob>> {
        self.state().closed = true;
        self.take_all()
    }

    /// The state; a panic while it was locked left it whole (every change
    /// under the lock is one push or one take).
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    fn len(&self) -> usize {
        self.jobs.len() + self.starts
    }

    /// What one more write held asks of the writer.
    fn after_one_more(&mut self) -> Held {
        let first = self.since.is_none();
        self.since.get_or_insert_with(Instant::now);
        if first || self.len() == GROUP_MAX {
            Held::Look
        } else {
            Held::Quietly
        }
    }

    fn take(&mut self) -> Vec<Box<dyn WriteJob>> {
        self.since = None;
        self.starts = 0;
        std::mem::take(&mut self.jobs)
    }
}

impl std::fmt::Debug for HeldWrites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state();
        f.debug_struct("HeldWrites")
            .field("jobs", &state.jobs.len())
            .field("starts", &state.starts)
            .field("since", &state.since)
            .field("closed", &state.closed)
            .field("hold", &self.hold)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreError;
    use crate::sqlite::failure::Failure;
    use crate::sqlite::job::WriteCtx;

    struct Nothing;

    impl WriteJob for Nothing {
        fn run(&mut self, _: &rusqlite::Transaction<'_>, _: &WriteCtx<'_>) -> Result<(), Failure> {
            Ok(())
        }

        fn settle(self: Box<Self>, _: Result<(), StoreError>) {}
    }

    #[test]
    fn only_the_first_write_held_and_the_one_that_fills_a_group_wake_the_writer() {
        let held = HeldWrites::new(Duration::from_secs(60));
        let looks: Vec<Held> = (0..GROUP_MAX)
            .map(|_| held.hold(Box::new(Nothing)).ok().unwrap())
            .collect();
        assert_eq!(looks[0], Held::Look);
        assert!(
            looks[1..GROUP_MAX - 1]
                .iter()
                .all(|look| *look == Held::Quietly)
        );
        assert_eq!(looks[GROUP_MAX - 1], Held::Look);
        // A group is due however young; once taken, the next write held is
        // a first again.
        assert_eq!(held.take_due(Instant::now()).unwrap().len(), GROUP_MAX);
        assert!(held.deadline().is_none());
        assert_eq!(held.hold(Box::new(Nothing)).ok(), Some(Held::Look));
    }

    #[test]
    fn a_write_is_due_once_the_oldest_held_is_old_enough_and_none_is_held_after_close() {
        let held = HeldWrites::new(Duration::from_millis(10));
        held.hold(Box::new(Nothing)).ok().unwrap();
        let deadline = held.deadline().unwrap();
        assert!(held.take_due(Instant::now()).is_none());
        assert_eq!(held.take_due(deadline).unwrap().len(), 1);
        // A start journaled is held like a write: it makes the deadline.
        assert_eq!(held.note_start(), Ok(Held::Look));
        assert!(held.take_due(Instant::now()).is_none());
        assert_eq!(
            held.take_due(held.deadline().unwrap())
                .map(|jobs| jobs.len()),
            Some(0)
        );
        held.hold(Box::new(Nothing)).ok().unwrap();
        assert_eq!(held.close().len(), 1);
        assert!(held.hold(Box::new(Nothing)).is_err());
        assert!(held.note_start().is_err());
        assert!(held.deadline().is_none());
    }
}
