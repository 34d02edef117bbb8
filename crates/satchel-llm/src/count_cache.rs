//! Counting only what changed: the recent request bodies counted, with
//! checkpoints, so the next body resumes after the prefix they share.
//!
//! Within a tool loop each request repeats the previous one and appends to
//! it; between statements only the tail changes. A checkpoint is a piece
//! boundary with the section counts before it. A new body that shares the
//! first P bytes (and the same section marks) with a cached one resumes at
//! the last checkpoint safely inside that prefix: a piece's end is decided
//! by at most the two characters after it (the `\s+(?!\S)` look-ahead), so
//! every piece that ends well before P is a piece of the new body too, and
//! the result is exactly the count of the whole body.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::encoding::Encoding;
use crate::sections::{SectionTokens, Spans};

/// Bytes between checkpoints (a piece boundary at or after each multiple).
pub(crate) const CHECKPOINT_EVERY: usize = 2048;
/// Bodies remembered per encoding (main turns and side requests interleave).
const REMEMBERED: usize = 4;
/// Bytes a checkpoint must stay before the end of the shared prefix: two
/// characters of look-ahead, at most four bytes each, with room to spare.
const MARGIN: usize = 16;

/// Where counting can resume.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Checkpoint {
    /// A piece starts here.
    pub(crate) offset: usize,
    /// Tokens per section before `offset`.
    pub(crate) sections: SectionTokens,
    /// Images before `offset`.
    pub(crate) images: u32,
}

/// One counted body.
struct Counted {
    body: Bytes,
    spans: Arc<Spans>,
    checkpoints: Vec<Checkpoint>,
}

static RECENT: [Mutex<VecDeque<Counted>>; 2] =
    [Mutex::new(VecDeque::new()), Mutex::new(VecDeque::new())];

fn recent(encoding: Encoding) -> &'static Mutex<VecDeque<Counted>> {
    match encoding {
        Encoding::O200k => &RECENT[0],
        Encoding::Cl100k => &RECENT[1],
    }
}

/// The best place to resume counting `body`, from the bodies counted
/// recently with the same encoding.
pub(crate) fn resume_point(encoding: Encoding, body: &[u8], spans: &Spans) -> Option<Checkpoint> {
    let recent = recent(encoding).lock().unwrap_or_else(|p| p.into_inner());
    let mut best: Option<Checkpoint> = None;
    for counted in recent.iter() {
        let shared = common_prefix(&counted.body, body);
        let shared_marks = spans.shared_prefix_end(&counted.spans);
        let limit = shared.min(shared_marks).saturating_sub(MARGIN);
        let found = counted
            .checkpoints
            .iter()
            .take_while(|c| c.offset <= limit)
            .last()
            .copied();
        if let Some(found) = found
            && best.is_none_or(|b| found.offset > b.offset)
        {
            best = Some(found);
        }
    }
    best
}

/// Remembers `body` and its checkpoints, dropping the oldest body.
pub(crate) fn remember(
    encoding: Encoding,
    body: Bytes,
    spans: Arc<Spans>,
    checkpoints: Vec<Checkpoint>,
) {
    let mut recent = recent(encoding).lock().unwrap_or_else(|p| p.into_inner());
    if recent.len() == REMEMBERED {
        recent.pop_front();
    }
    recent.push_back(Counted {
        body,
        spans,
        checkpoints,
    });
}

/// Forgets every body (tests compare cached and fresh counts).
#[cfg(test)]
pub(crate) fn forget() {
    for slot in &RECENT {
        slot.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

/// Length of the common prefix, compared a block at a time.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 256;
    let len = a.len().min(b.len());
    let mut at = 0;
    while at + BLOCK <= len && a[at..at + BLOCK] == b[at..at + BLOCK] {
        at += BLOCK;
    }
    while at < len && a[at] == b[at] {
        at += 1;
    }
    at
}
