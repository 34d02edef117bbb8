//! The output of one background process: what has not been read yet (head
//! and tail within a byte limit), the line an `until` pattern waits for,
//! and the whole output on disk within a size cap (the middle dropped).

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use regex::Regex;
use satchel_core::redact::{Redactor, StreamRedactor};

use crate::spill::SpillWriter;
use crate::text::{clean_terminal_text, complete_prefix_len, continuation_prefix_len};
use crate::{SpillConfig, strip_ansi};

/// Longest partial line kept for `until`; a longer one is matched as it is
/// and then forgotten.
const MAX_LINE: usize = 64 * 1024;

/// What one read takes: the text printed since the last read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unread {
    /// Head and tail of the new output, cleaned of terminal sequences,
    /// with a marker where the middle was left out.
    pub text: String,
    /// New bytes in all.
    pub bytes: u64,
    /// New bytes left out of `text`.
    pub omitted: u64,
}

/// The whole output on disk, as far as its cap allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpillState {
    /// The file with the output's start (and, once the process ended, its
    /// end after a marker).
    pub path: Option<PathBuf>,
    /// Bytes dropped from the middle because the file reached its cap.
    pub dropped: u64,
}

/// Everything kept of a background process's output.
pub(crate) struct OutputLog {
    head: Vec<u8>,
    head_cap: usize,
    tail: VecDeque<u8>,
    tail_cap: usize,
    unread: u64,
    total: u64,
    line: Vec<u8>,
    until: Option<Regex>,
    matched: bool,
    redact: StreamRedactor,
    spill: CappedSpill,
}

impl OutputLog {
    /// A log keeping `limit` unread bytes and a spill of at most
    /// `spill.max_file_bytes` on disk.
    pub(crate) fn new(limit: usize, spill: SpillConfig, redactor: &Redactor) -> OutputLog {
        let tail_cap = limit / 2;
        OutputLog {
            head: Vec::new(),
            head_cap: limit - tail_cap,
            tail: VecDeque::new(),
            tail_cap,
            unread: 0,
            total: 0,
            line: Vec::new(),
            until: None,
            matched: false,
            redact: redactor.stream(),
            spill: CappedSpill::new(spill),
        }
    }

    /// Takes the next chunk the process wrote.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        let redacted = self.redact.feed(chunk).into_owned();
        self.keep(&redacted);
    }

    /// The end of the output: what the redactor held back.
    pub(crate) fn finish(&mut self) {
        let rest = self.redact.finish();
        self.keep(&rest);
        self.spill.finish();
    }

    fn keep(&mut self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        self.total += chunk.len() as u64;
        self.unread += chunk.len() as u64;
        self.spill.write(chunk);
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
        if self.until.is_some() && !self.matched {
            self.scan(chunk);
        }
    }

    /// Matches each complete line of `chunk`, and the partial line at its
    /// end (a prompt), against the `until` pattern.
    fn scan(&mut self, chunk: &[u8]) {
        let Some(until) = &self.until else { return };
        for piece in chunk.split_inclusive(|b| *b == b'\n') {
            self.line.extend_from_slice(piece);
            let complete = piece.ends_with(b"\n") || self.line.len() >= MAX_LINE;
            if complete {
                let text = strip_ansi(&String::from_utf8_lossy(&self.line));
                self.line.clear();
                if until.is_match(text.trim_end_matches(['\n', '\r'])) {
                    self.matched = true;
                    return;
                }
            }
        }
        if !self.line.is_empty()
            && until.is_match(&strip_ansi(&String::from_utf8_lossy(&self.line)))
        {
            self.matched = true;
        }
    }

    /// Waits for `pattern` from now on, checking the unread output first.
    pub(crate) fn watch(&mut self, pattern: Option<Regex>) {
        self.line.clear();
        self.matched = false;
        self.until = pattern;
        let Some(until) = &self.until else { return };
        let mut bytes = self.head.clone();
        bytes.extend(self.tail.iter());
        let text = strip_ansi(&String::from_utf8_lossy(&bytes));
        self.matched = text.lines().any(|line| until.is_match(line));
    }

    /// Whether the `until` pattern matched since [`OutputLog::watch`].
    pub(crate) fn matched(&self) -> bool {
        self.matched
    }

    /// Bytes not yet read.
    pub(crate) fn unread_bytes(&self) -> u64 {
        self.unread
    }

    /// Bytes printed in all.
    pub(crate) fn total_bytes(&self) -> u64 {
        self.total
    }

    /// The spill file and what it dropped.
    pub(crate) fn spill_state(&self) -> SpillState {
        self.spill.state()
    }

    /// Takes what was printed since the last read.
    pub(crate) fn take(&mut self) -> Unread {
        let mut head = std::mem::take(&mut self.head);
        let mut tail: Vec<u8> = std::mem::take(&mut self.tail).into();
        let bytes = std::mem::take(&mut self.unread);
        let cut = bytes > (head.len() + tail.len()) as u64;
        if cut {
            head.truncate(complete_prefix_len(&head));
            tail.drain(..continuation_prefix_len(&tail));
        }
        let omitted = bytes - (head.len() + tail.len()) as u64;
        let clean = |bytes: &[u8]| clean_terminal_text(&String::from_utf8_lossy(bytes), true, true);
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
        Unread {
            text,
            bytes,
            omitted,
        }
    }
}

/// The whole output on disk within a cap: the first half of the cap in
/// the main file, then the latest bytes in two rotating segments of a
/// quarter each (the older one dropped, and counted, when the newer fills);
/// at the end the segments are appended to the main file after a marker.
struct CappedSpill {
    config: SpillConfig,
    head: Option<SpillWriter>,
    head_room: u64,
    path: Option<PathBuf>,
    segment: Option<File>,
    segment_len: u64,
    segment_cap: u64,
    dropped: u64,
    unavailable: bool,
}

impl CappedSpill {
    fn new(config: SpillConfig) -> CappedSpill {
        let cap = config.max_file_bytes;
        CappedSpill {
            head_room: cap / 2,
            segment_cap: (cap / 4).max(1),
            config,
            head: None,
            path: None,
            segment: None,
            segment_len: 0,
            dropped: 0,
            unavailable: false,
        }
    }

    fn segment_path(&self, n: u8) -> Option<PathBuf> {
        let path = self.path.as_ref()?;
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".tail{n}"));
        Some(PathBuf::from(name))
    }

    fn write(&mut self, mut bytes: &[u8]) {
        if self.unavailable {
            return;
        }
        if self.head.is_none() && self.path.is_none() {
            let config = SpillConfig {
                max_file_bytes: self.head_room,
                ..self.config.clone()
            };
            match SpillWriter::create(&config, "background") {
                Some(writer) => {
                    self.path = Some(writer.path().to_path_buf());
                    self.head = Some(writer);
                }
                None => {
                    self.unavailable = true;
                    return;
                }
            }
        }
        if let Some(head) = self.head.as_mut() {
            let room = usize::try_from(self.head_room.saturating_sub(head.written()))
                .unwrap_or(usize::MAX);
            let part = bytes.len().min(room);
            head.write(&bytes[..part]);
            bytes = &bytes[part..];
            if bytes.is_empty() {
                return;
            }
        }
        while !bytes.is_empty() {
            if self.segment.is_none() || self.segment_len >= self.segment_cap {
                self.rotate();
                if self.segment.is_none() {
                    self.dropped += bytes.len() as u64;
                    return;
                }
            }
            let room = usize::try_from(self.segment_cap - self.segment_len).unwrap_or(usize::MAX);
            let part = bytes.len().min(room);
            if let Some(file) = self.segment.as_mut()
                && file.write_all(&bytes[..part]).is_err()
            {
                self.segment = None;
            }
            self.segment_len += part as u64;
            bytes = &bytes[part..];
        }
    }

    /// Starts a new newest segment; the previous newest becomes the older
    /// one, and the one before that is dropped.
    fn rotate(&mut self) {
        let (Some(newer), Some(older)) = (self.segment_path(1), self.segment_path(0)) else {
            return;
        };
        if self.segment.is_some() {
            if let Ok(meta) = fs::metadata(&older) {
                self.dropped += meta.len();
            }
            let _ = fs::rename(&newer, &older);
        }
        self.segment = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&newer)
            .ok();
        self.segment_len = 0;
    }

    /// Appends the kept end to the main file after a marker.
    fn finish(&mut self) {
        self.segment = None;
        let (Some(path), Some(older), Some(newer)) = (
            self.path.clone(),
            self.segment_path(0),
            self.segment_path(1),
        ) else {
            return;
        };
        self.head = None;
        if !newer.exists() {
            return;
        }
        let Ok(mut file) = OpenOptions::new().append(true).open(&path) else {
            return;
        };
        if self.dropped > 0 {
            let _ = write!(file, "\n[... {} bytes dropped ...]\n", self.dropped);
        }
        for segment in [&older, &newer] {
            if let Ok(bytes) = fs::read(segment) {
                let _ = file.write_all(&bytes);
            }
            let _ = fs::remove_file(segment);
        }
    }

    fn state(&self) -> SpillState {
        SpillState {
            path: self.path.clone(),
            dropped: self.dropped,
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn log(limit: usize, dir: Option<PathBuf>, cap: u64) -> OutputLog {
        OutputLog::new(
            limit,
            SpillConfig {
                dir,
                max_file_bytes: cap,
                ..SpillConfig::default()
            },
            &Redactor::none(),
        )
    }

    #[test]
    fn each_read_takes_only_what_is_new() {
        let mut log = log(100, None, 0);
        log.push(b"line 1\n");
        assert_eq!(log.take().text, "line 1\n");
        log.push(b"line 2\n");
        assert_eq!(log.take().text, "line 2\n");
        assert_eq!(log.take(), Unread::default());
        assert_eq!(log.total_bytes(), 14);
    }

    #[test]
    fn unread_output_keeps_head_and_tail() {
        let mut log = log(8, None, 0);
        log.push(b"0123456789abcdef");
        let unread = log.take();
        assert_eq!(unread.text, "0123\n[... 8 bytes omitted ...]\ncdef");
        assert_eq!((unread.bytes, unread.omitted), (16, 8));
    }

    #[test]
    fn until_matches_a_line_across_chunks_and_a_prompt() {
        let mut log = log(100, None, 0);
        log.watch(Regex::new("^Serving HTTP").ok());
        log.push(b"noise\nServ");
        assert!(!log.matched());
        log.push(b"ing HTTP on 0.0.0.0\n");
        assert!(log.matched());
        log.watch(Regex::new(">>> $").ok());
        assert!(!log.matched());
        log.push(b"2\n>>> ");
        assert!(log.matched());
    }

    #[test]
    fn until_sees_what_was_printed_before_it_was_set() {
        let mut log = log(100, None, 0);
        log.push(b"ready\n");
        log.watch(Regex::new("ready").ok());
        assert!(log.matched());
    }

    #[test]
    fn the_spill_stays_within_its_cap_and_counts_what_it_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = log(16, Some(dir.path().to_path_buf()), 400);
        for i in 0..100u32 {
            log.push(format!("{i:09}\n").as_bytes());
        }
        let on_disk: u64 = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert!(on_disk <= 400, "{on_disk}");
        log.finish();
        let state = log.spill_state();
        let text = fs::read_to_string(state.path.unwrap()).unwrap();
        assert!(text.starts_with("000000000\n"), "{text}");
        assert!(text.ends_with("000000099\n"), "{text}");
        assert!(text.contains(&format!("[... {} bytes dropped ...]", state.dropped)));
        let marker = format!("\n[... {} bytes dropped ...]\n", state.dropped);
        assert_eq!(
            text.len() as u64 - marker.len() as u64 + state.dropped,
            1000
        );
    }
}
