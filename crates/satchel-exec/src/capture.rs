//! Bounded capture of one output stream: head + tail within a byte limit,
//! everything counted, the full stream spilled once it outgrows the limit.

use std::collections::VecDeque;

use satchel_core::redact::{Redactor, StreamRedactor};

use crate::spill::SpillWriter;
use crate::text::{clean_terminal_text, complete_prefix_len, continuation_prefix_len};
use crate::{Captured, SpillConfig};

/// Accumulates one stream in memory bounded by its limit, whatever the
/// child writes.
pub(crate) struct Capture {
    limit: usize,
    head: Vec<u8>,
    head_cap: usize,
    tail: VecDeque<u8>,
    tail_cap: usize,
    total: u64,
    stream: &'static str,
    spill_config: SpillConfig,
    spill: Spill,
    /// Secrets are replaced before anything is kept or spilled.
    redact: StreamRedactor,
}

enum Spill {
    /// Output still fits the limit: nothing on disk yet.
    NotNeeded,
    Writing(SpillWriter),
    /// Spilling is off or the file could not be created.
    Unavailable,
}

impl Capture {
    /// A capture keeping `limit` bytes (half head, half tail) of `stream`.
    pub(crate) fn new(
        limit: usize,
        stream: &'static str,
        spill_config: SpillConfig,
        redactor: &Redactor,
    ) -> Capture {
        let tail_cap = limit / 2;
        let head_cap = limit - tail_cap;
        Capture {
            limit,
            head: Vec::with_capacity(head_cap.min(64 * 1024)),
            head_cap,
            tail: VecDeque::with_capacity(tail_cap.min(64 * 1024)),
            tail_cap,
            total: 0,
            stream,
            spill_config,
            spill: Spill::NotNeeded,
            redact: redactor.stream(),
        }
    }

    /// Takes the next chunk the child wrote.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        let redacted = self.redact.feed(chunk);
        self.keep(&redacted);
    }

    /// Keeps a chunk already redacted: counted, spilled, head and tail.
    fn keep(&mut self, chunk: &[u8]) {
        let total = self.total + chunk.len() as u64;
        if matches!(self.spill, Spill::NotNeeded) && total > self.limit as u64 {
            // Until now head + tail held every byte: they start the file.
            self.spill = match SpillWriter::create(&self.spill_config, self.stream) {
                Some(mut writer) => {
                    writer.write(&self.head);
                    let (front, back) = self.tail.as_slices();
                    writer.write(front);
                    writer.write(back);
                    Spill::Writing(writer)
                }
                None => Spill::Unavailable,
            };
        }
        if let Spill::Writing(writer) = &mut self.spill {
            writer.write(chunk);
        }
        self.total = total;

        let to_head = (self.head_cap - self.head.len()).min(chunk.len());
        self.head.extend_from_slice(&chunk[..to_head]);
        let rest = &chunk[to_head..];
        if rest.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&rest[rest.len() - self.tail_cap..]);
        } else {
            let overflow = (self.tail.len() + rest.len()).saturating_sub(self.tail_cap);
            self.tail.drain(..overflow);
            self.tail.extend(rest);
        }
    }

    /// Bytes taken so far.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// The kept text: head and tail cut on character boundaries, decoded
    /// (invalid UTF-8 replaced), cleaned, joined by a marker when bytes were
    /// left out.
    pub(crate) fn finish(mut self, strip_ansi: bool, collapse_cr: bool) -> Captured {
        let rest = self.redact.finish();
        self.keep(&rest);
        let mut head = self.head;
        let mut tail: Vec<u8> = self.tail.into();
        let cut = self.total > (head.len() + tail.len()) as u64;
        if cut {
            head.truncate(complete_prefix_len(&head));
            tail.drain(..continuation_prefix_len(&tail));
        }
        let omitted = self.total - (head.len() + tail.len()) as u64;
        let clean = |bytes: &[u8]| {
            clean_terminal_text(&String::from_utf8_lossy(bytes), strip_ansi, collapse_cr)
        };
        let text = if cut {
            format!(
                "{}\n[... {omitted} bytes omitted ...]\n{}",
                clean(&head),
                clean(&tail)
            )
        } else {
            head.extend_from_slice(&tail);
            clean(&head)
        };
        let spill = match self.spill {
            Spill::Writing(writer) => Some(writer.finish()),
            Spill::NotNeeded | Spill::Unavailable => None,
        };
        Captured {
            text,
            total_bytes: self.total,
            omitted_bytes: omitted,
            spill,
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn no_spill() -> SpillConfig {
        SpillConfig {
            dir: None,
            ..SpillConfig::default()
        }
    }

    fn capture(limit: usize, chunks: &[&[u8]]) -> Captured {
        let mut capture = Capture::new(limit, "stdout", no_spill(), &Redactor::none());
        for chunk in chunks {
            capture.push(chunk);
        }
        capture.finish(false, false)
    }

    #[test]
    fn output_exactly_at_the_limit_is_kept_whole() {
        let out = capture(8, &[b"0123", b"4567"]);
        assert_eq!(out.text, "01234567");
        assert_eq!((out.total_bytes, out.omitted_bytes), (8, 0));
        assert!(!out.truncated());
    }

    #[test]
    fn one_byte_over_the_limit_keeps_head_and_tail_with_a_marker() {
        let out = capture(8, &[b"012345678"]);
        assert_eq!(out.text, "0123\n[... 1 bytes omitted ...]\n5678");
        assert_eq!(out.omitted_bytes, 1);
    }

    #[test]
    fn tail_follows_many_small_chunks() {
        let chunks: Vec<&[u8]> = std::iter::repeat_n(&b"ab"[..], 1000).collect();
        let out = capture(6, &chunks);
        assert_eq!(out.text, "aba\n[... 1994 bytes omitted ...]\nbab");
        assert_eq!(out.total_bytes, 2000);
    }

    #[test]
    fn a_limit_of_zero_keeps_only_the_marker() {
        assert_eq!(capture(0, &[b"abc"]).text, "\n[... 3 bytes omitted ...]\n");
        let empty = capture(0, &[]);
        assert_eq!(empty.text, "");
        assert!(!empty.truncated());
    }

    #[test]
    fn cuts_never_split_a_multibyte_character() {
        // "€" is 3 bytes: a 4-byte head would end inside the second one.
        let text = "€€€€€€";
        let out = capture(8, &[text.as_bytes()]);
        assert_eq!(out.text, "€\n[... 12 bytes omitted ...]\n€");
        assert_eq!(out.omitted_bytes, 12);
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        let out = capture(100, &[b"ok \xff\xfe end"]);
        assert_eq!(out.text, "ok \u{fffd}\u{fffd} end");
    }

    #[test]
    fn spill_holds_every_byte_once_output_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let config = SpillConfig {
            dir: Some(dir.path().to_path_buf()),
            ..SpillConfig::default()
        };
        let mut capture = Capture::new(4, "stdout", config, &Redactor::none());
        capture.push(b"ab");
        capture.push(b"cd");
        capture.push(b"efgh");
        let out = capture.finish(false, false);
        let spill = out.spill.unwrap();
        assert!(spill.complete);
        assert_eq!(std::fs::read(spill.path).unwrap(), b"abcdefgh");
    }
}
