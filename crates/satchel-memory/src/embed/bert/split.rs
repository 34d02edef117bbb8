//! One sequence on two threads, for single queries, whose latency
//! matters: every linear layer's output columns, and the attention heads,
//! are divided between the threads, which meet whenever one needs the
//! other's half (four times a layer). Each thread keeps its own copy of
//! the hidden states and applies the residual connections and layer norms
//! itself, which costs less than another meeting.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use super::{Bert, GroupLayout, InputBlock, Scratch, add_halves, head_groups, pool, reserve};
use crate::embed::kernels;

/// What a thread publishes for the other, one layer at a time.
#[derive(Default)]
struct Published {
    /// Its heads' attention output.
    context: RwLock<Vec<f32>>,
    /// Its half of the attention output projection.
    projected: RwLock<Vec<f32>>,
    /// Its half of the feed-forward activations.
    inner: RwLock<Vec<f32>>,
    /// Its half of the feed-forward output.
    output: RwLock<Vec<f32>>,
}

/// A barrier for two threads that a panicking thread breaks, so the other
/// returns instead of waiting forever.
///
/// A thread that arrives first spins for up to `SPIN` before it sleeps:
/// the two halves of a layer take about the same time, so the other
/// usually arrives within microseconds, and sleeping and waking through
/// the kernel costs tens of them (24 meetings a pass).
#[derive(Default)]
struct Meeting {
    /// Threads at the current meeting (0 or 1 between meetings).
    arrived: AtomicUsize,
    /// Meetings held so far.
    held: AtomicU64,
    broken: AtomicBool,
    /// For a thread that stops spinning and sleeps.
    sleep: Mutex<()>,
    turn: Condvar,
}

/// How long a thread spins at a meeting before it sleeps.
const SPIN: Duration = Duration::from_micros(200);

impl Meeting {
    /// Waits for the other thread; false when the meeting is broken.
    fn wait(&self) -> bool {
        if self.broken.load(Ordering::Acquire) {
            return false;
        }
        let held = self.held.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) == 1 {
            // Second to arrive: reset for the next meeting, then release
            // the other (which may be asleep).
            self.arrived.store(0, Ordering::Relaxed);
            self.held.fetch_add(1, Ordering::Release);
            drop(self.sleep.lock().unwrap_or_else(PoisonError::into_inner));
            self.turn.notify_all();
            return !self.broken.load(Ordering::Acquire);
        }
        let over = |meeting: &Meeting| {
            meeting.held.load(Ordering::Acquire) != held || meeting.broken.load(Ordering::Acquire)
        };
        let started = Instant::now();
        while started.elapsed() < SPIN {
            for _ in 0..64 {
                if over(self) {
                    return !self.broken.load(Ordering::Acquire);
                }
                std::hint::spin_loop();
            }
        }
        let mut guard = self.sleep.lock().unwrap_or_else(PoisonError::into_inner);
        while !over(self) {
            guard = self
                .turn
                .wait(guard)
                .unwrap_or_else(PoisonError::into_inner);
        }
        !self.broken.load(Ordering::Acquire)
    }

    fn break_off(&self) {
        self.broken.store(true, Ordering::Release);
        drop(self.sleep.lock().unwrap_or_else(PoisonError::into_inner));
        self.turn.notify_all();
    }
}

/// Breaks the meeting if its thread panics.
struct BreakOnPanic<'a>(&'a Meeting);

impl Drop for BreakOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.break_off();
        }
    }
}

fn read(lock: &RwLock<Vec<f32>>) -> RwLockReadGuard<'_, Vec<f32>> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write(lock: &RwLock<Vec<f32>>, len: usize) -> RwLockWriteGuard<'_, Vec<f32>> {
    let mut guard = lock.write().unwrap_or_else(PoisonError::into_inner);
    reserve(&mut guard, len);
    guard
}

/// One of the two threads of a split pass.
struct Worker<'a> {
    bert: &'a Bert,
    ids: &'a [u32],
    published: &'a [Published; 2],
    meeting: &'a Meeting,
}

impl Bert {
    /// Embeds one sequence (non-empty, at most `max_len`) on this thread
    /// and a helper; as `embed` would, to rounding.
    pub(crate) fn embed_split(&self, ids: &[u32]) -> Vec<f32> {
        if self.config.num_attention_heads < 2 || ids.is_empty() {
            return self.embed(&[ids]).pop().unwrap_or_default();
        }
        let published = [Published::default(), Published::default()];
        let meeting = Meeting::default();
        let (mut mine, mut theirs) = (self.take_scratch(), self.take_scratch());
        let worker = Worker {
            bert: self,
            ids,
            published: &published,
            meeting: &meeting,
        };
        std::thread::scope(|scope| {
            let helper = scope.spawn(|| worker.run(1, &mut theirs));
            worker.run(0, &mut mine);
            if let Err(panic) = helper.join() {
                std::panic::resume_unwind(panic);
            }
        });
        let h = self.config.hidden_size;
        let vector = pool(&mine.x[..ids.len() * h], &[ids.len()], h).pop();
        self.give_back(mine);
        self.give_back(theirs);
        vector.unwrap_or_default()
    }
}

impl Worker<'_> {
    /// Runs thread `me`'s half of the pass; the final hidden states end in
    /// `s.x`. Returns early if the other thread panicked.
    fn run(&self, me: usize, s: &mut Scratch) {
        let _guard = BreakOnPanic(self.meeting);
        let config = &self.bert.config;
        let (h, len) = (config.hidden_size, self.ids.len());
        reserve(&mut s.x, len * h);
        reserve(&mut s.scores, len * len);
        self.bert.embed_tokens(&[self.ids], &mut s.x[..len * h]);
        for index in 0..self.bert.layers.len() {
            if self.layer(index, me, s).is_none() {
                return;
            }
        }
    }

    /// Layer `index` for thread `me`; `None` when the meeting broke.
    fn layer(&self, index: usize, me: usize, s: &mut Scratch) -> Option<()> {
        let (bert, layer) = (self.bert, &self.bert.layers[index]);
        let config = &bert.config;
        let (h, inter, len) = (config.hidden_size, config.intermediate_size, self.ids.len());
        let d = h / config.num_attention_heads;
        let groups = head_groups(config);
        let context_widths = groups.clone().map(|heads| heads.len() * d);
        let hidden = [0..h / 2, h / 2..h];
        let inner = [0..inter / 2, inter / 2..inter];
        let [mine, left, right] = [&self.published[me], &self.published[0], &self.published[1]];

        // Queries, keys and values of this thread's heads, then attention.
        let block = layer.qkv.columns(me).len();
        reserve(&mut s.qkv, len * block);
        let x = &s.x[..len * h];
        let qkv = &layer.qkv;
        qkv.apply_half(
            &[InputBlock::packed(x, h)],
            len,
            me,
            &mut s.qkv,
            &mut s.quantized,
        );
        let group = GroupLayout {
            heads: groups[me].len(),
            qkv_stride: block,
            qkv_base: 0,
            context_stride: context_widths[me],
            context_base: 0,
        };
        let mut context = write(&mine.context, len * context_widths[me]);
        bert.attend(&s.qkv, &[len], group, &mut context, &mut s.scores);
        drop(context);
        self.meet()?;

        let inputs = (read(&left.context), read(&right.context));
        let mut projected = write(&mine.projected, len * hidden[me].len());
        let blocks = [
            InputBlock::packed(&inputs.0, context_widths[0]),
            InputBlock::packed(&inputs.1, context_widths[1]),
        ];
        let out = &layer.attention_out;
        out.apply_half(&blocks, len, me, &mut projected, &mut s.quantized);
        drop((inputs, projected));
        self.meet()?;

        let x = &mut s.x[..len * h];
        add_halves(x, h, h / 2, &read(&left.projected), &read(&right.projected));
        let norm = &layer.attention_norm;
        kernels::layer_norm(x, &norm.gamma, &norm.beta, config.layer_norm_eps);
        let width = inner[me].len();
        let mut activations = write(&mine.inner, len * width);
        let up = &layer.intermediate;
        up.apply_half(
            &[InputBlock::packed(x, h)],
            len,
            me,
            &mut activations,
            &mut s.quantized,
        );
        kernels::gelu(&mut activations[..len * width]);
        drop(activations);
        self.meet()?;

        let inputs = (read(&left.inner), read(&right.inner));
        let mut output = write(&mine.output, len * hidden[me].len());
        let blocks = [
            InputBlock::packed(&inputs.0, inner[0].len()),
            InputBlock::packed(&inputs.1, inner[1].len()),
        ];
        let down = &layer.output;
        down.apply_half(&blocks, len, me, &mut output, &mut s.quantized);
        drop((inputs, output));
        self.meet()?;

        let x = &mut s.x[..len * h];
        add_halves(x, h, h / 2, &read(&left.output), &read(&right.output));
        let norm = &layer.output_norm;
        kernels::layer_norm(x, &norm.gamma, &norm.beta, config.layer_norm_eps);
        Some(())
    }

    fn meet(&self) -> Option<()> {
        self.meeting.wait().then_some(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    #[test]
    fn threads_leave_a_meeting_together_whether_they_spin_or_sleep() {
        let meeting = Meeting::default();
        let passed = [AtomicUsize::new(0), AtomicUsize::new(0)];
        std::thread::scope(|scope| {
            for me in 0..2 {
                let (meeting, passed) = (&meeting, &passed);
                scope.spawn(move || {
                    for round in 0..200 {
                        // Every tenth round one thread arrives late enough
                        // that the other stops spinning and sleeps.
                        if round % 10 == me * 5 {
                            std::thread::sleep(SPIN * 3);
                        }
                        passed[me].store(round + 1, Ordering::SeqCst);
                        assert!(meeting.wait());
                        // Neither leaves before the other has arrived.
                        assert!(passed[1 - me].load(Ordering::SeqCst) > round);
                        assert!(meeting.wait());
                    }
                });
            }
        });
    }

    #[test]
    fn breaking_a_meeting_releases_the_waiting_thread() {
        let meeting = Meeting::default();
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| meeting.wait());
            std::thread::sleep(SPIN * 5);
            meeting.break_off();
            assert!(!waiter.join().unwrap());
        });
        assert!(!meeting.wait(), "a broken meeting stays broken");
    }
}
