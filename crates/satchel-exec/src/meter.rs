//! [`OutputMeter`]: how much a running child has written so far, read
//! while it runs (for progress reports), counted as its pipes are read.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes and lines a child wrote to stdout and stderr so far. Cheap to
/// clone; every clone reads the same counters.
#[derive(Debug, Clone, Default)]
pub struct OutputMeter(Arc<Counters>);

#[derive(Debug, Default)]
struct Counters {
    bytes: AtomicU64,
    lines: AtomicU64,
}

impl OutputMeter {
    /// Counts `chunk` as written.
    pub(crate) fn add(&self, chunk: &[u8]) {
        self.0
            .bytes
            .fetch_add(chunk.len() as u64, Ordering::Relaxed);
        let lines = memchr::memchr_iter(b'\n', chunk).count() as u64;
        self.0.lines.fetch_add(lines, Ordering::Relaxed);
    }

    /// Bytes written so far, both streams.
    pub fn bytes(&self) -> u64 {
        self.0.bytes.load(Ordering::Relaxed)
    }

    /// Complete lines written so far, both streams.
    pub fn lines(&self) -> u64 {
        self.0.lines.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_bytes_and_newlines_across_chunks() {
        let meter = OutputMeter::default();
        let reader = meter.clone();
        meter.add(b"one\ntw");
        meter.add(b"o\nthree");
        assert_eq!((reader.bytes(), reader.lines()), (13, 2));
    }
}
