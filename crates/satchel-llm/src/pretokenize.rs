//! Pre-tokenization: splitting text into the pieces that BPE then encodes
//! one by one, exactly as OpenAI's `cl100k_base` and `o200k_base` regular
//! expressions do.
//!
//! Two paths give the same pieces. A hand-written matcher handles pieces
//! made only of ASCII (most of a request: JSON, code, English), several
//! times faster than the regular expression; at any position where a
//! decision depends on a non-ASCII character it steps aside, and the
//! regular expression (the one `bpe-openai` uses, with its rewrite of the
//! `\s+(?!\S)` look-ahead) matches that piece. Tests compare both paths
//! against `bpe-openai`'s splitter on generated text full of edge cases.

use std::sync::LazyLock;

use regex_automata::meta::Regex;
use regex_automata::{Anchored, Input};

use crate::encoding::Encoding;

/// The rules of one vocabulary's pre-tokenizer.
pub(crate) struct Splitter {
    regex: Regex,
    /// Per pattern: whether its last character is a look-ahead to drop.
    lookahead: [bool; 3],
    /// `o200k` rules (case-aware words, `/` after punctuation) or `cl100k`.
    o200k: bool,
}

const CL100K_PATTERN: &str = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+$";

const O200K_PATTERN: &str = concat!(
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|\\p{N}{1,3}",
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*",
    "|\\s*[\\r\\n]+",
    "|\\s+$",
);

impl Splitter {
    fn new(pattern: &str, o200k: bool) -> Splitter {
        // `\s+\s` with its last character dropped is `\s+(?!\S)`.
        let regex = Regex::new_many(&[pattern, "\\s+\\s", "\\s+"]);
        Splitter {
            // The patterns are constants known to compile; a failure here
            // would be a bug caught by every test.
            regex: regex.unwrap_or_else(|error| panic!("pre-tokenizer pattern: {error}")),
            lookahead: [false, true, false],
            o200k,
        }
    }

    /// The splitter for `encoding`, built on first use.
    pub(crate) fn of(encoding: Encoding) -> &'static Splitter {
        static CL100K: LazyLock<Splitter> = LazyLock::new(|| Splitter::new(CL100K_PATTERN, false));
        static O200K: LazyLock<Splitter> = LazyLock::new(|| Splitter::new(O200K_PATTERN, true));
        match encoding {
            Encoding::Cl100k => &CL100K,
            Encoding::O200k => &O200K,
        }
    }

    /// Calls `piece(start, text)` for every piece of `text`, in order.
    pub(crate) fn split<'t>(&self, text: &'t str, piece: impl FnMut(usize, &'t str)) {
        self.split_from(text, 0, piece);
    }

    /// Like [`Splitter::split`] for the pieces from `start` on, where
    /// `start` is where a piece of `text` begins: no rule looks behind the
    /// position it matches at, so the pieces are those of the whole text.
    pub(crate) fn split_from<'t>(
        &self,
        text: &'t str,
        start: usize,
        mut piece: impl FnMut(usize, &'t str),
    ) {
        let bytes = text.as_bytes();
        let mut pos = start;
        while pos < bytes.len() {
            let end = match self.ascii(bytes, pos) {
                Some(end) => end,
                None => match self.regex_end(text, pos) {
                    Some(end) => end,
                    // Every character matches some alternative; if the
                    // regex ever failed, the rest is one piece.
                    None => bytes.len(),
                },
            };
            if let Some(slice) = text.get(pos..end) {
                piece(pos, slice);
            }
            pos = end;
        }
    }

    fn regex_end(&self, text: &str, pos: usize) -> Option<usize> {
        let rest = text.get(pos..)?;
        let found = self.regex.find(Input::new(rest).anchored(Anchored::Yes))?;
        let mut end = found.end();
        if self.lookahead[found.pattern().as_usize()] {
            let last = rest.get(..end)?.chars().next_back()?;
            end -= last.len_utf8();
        }
        (end > 0).then_some(pos + end)
    }

    /// The end of the piece starting at `pos` when it can be decided from
    /// ASCII alone; `None` when a non-ASCII character is involved.
    fn ascii(&self, b: &[u8], pos: usize) -> Option<usize> {
        let step = if self.o200k {
            ascii_o200k(b, pos)
        } else {
            ascii_cl100k(b, pos)
        };
        match step {
            Step::End(end) => Some(end),
            Step::No | Step::Bail => None,
        }
    }
}

/// What one alternative of the pattern says at a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// It does not match; try the next alternative.
    No,
    /// A non-ASCII character decides: leave this piece to the regex.
    Bail,
    /// It matches up to here.
    End(usize),
}

/// Tries alternatives in order, like the regex's leftmost-first rule.
macro_rules! first {
    ($($alternative:expr),+ $(,)?) => {{
        $(
            match $alternative {
                Step::No => {}
                decided => return decided,
            }
        )+
        Step::Bail
    }};
}

fn ascii_o200k(b: &[u8], pos: usize) -> Step {
    let Some(&c) = b.get(pos) else {
        return Step::No;
    };
    if !c.is_ascii() {
        return Step::Bail;
    }
    first!(
        // `[^\r\n\p{L}\p{N}]?` then `U* L+` or `U+ L*`, then a contraction.
        word(b, pos, cased_word, true),
        digits(b, pos),
        punctuation(b, pos, true),
        whitespace(b, pos),
    )
}

fn ascii_cl100k(b: &[u8], pos: usize) -> Step {
    let Some(&c) = b.get(pos) else {
        return Step::No;
    };
    if !c.is_ascii() {
        return Step::Bail;
    }
    first!(
        // `(?i:'s|'t|'re|'ve|'m|'ll|'d)`
        if c == b'\'' {
            contraction(b, pos + 1)
        } else {
            Step::No
        },
        // `[^\r\n\p{L}\p{N}]?\p{L}+`
        word(b, pos, letters, false),
        digits(b, pos),
        punctuation(b, pos, false),
        whitespace(b, pos),
    )
}

/// ASCII `\s`: space, `\t`, `\n`, `\x0B`, `\x0C`, `\r`.
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

/// ASCII `[^\r\n\p{L}\p{N}]`.
fn is_prefix(c: u8) -> bool {
    c.is_ascii() && c != b'\r' && c != b'\n' && !c.is_ascii_alphanumeric()
}

/// ASCII `[^\s\p{L}\p{N}]`.
fn is_punct(c: u8) -> bool {
    c.is_ascii() && !is_space(c) && !c.is_ascii_alphanumeric()
}

/// A word: an optional prefix character, then `body` (which must start
/// with a letter), then (o200k) an optional contraction.
fn word(b: &[u8], pos: usize, body: impl Fn(&[u8], usize) -> Step, contracted: bool) -> Step {
    let c = b[pos];
    let start = if is_prefix(c) {
        match b.get(pos + 1) {
            Some(n) if !n.is_ascii() => return Step::Bail,
            Some(n) if n.is_ascii_alphabetic() => pos + 1,
            _ => return Step::No,
        }
    } else if c.is_ascii_alphabetic() {
        pos
    } else {
        return Step::No;
    };
    match body(b, start) {
        Step::End(end) if contracted && b.get(end) == Some(&b'\'') => {
            match contraction(b, end + 1) {
                Step::End(after) => Step::End(after),
                Step::No => Step::End(end),
                Step::Bail => Step::Bail,
            }
        }
        other => other,
    }
}

/// After a `'`: the end of `s`, `t`, `re`, `ve`, `m`, `ll` or `d` in any case.
fn contraction(b: &[u8], pos: usize) -> Step {
    let at = |i: usize| b.get(i).copied();
    match at(pos) {
        Some(c) if !c.is_ascii() => return Step::Bail,
        None => return Step::No,
        _ => {}
    }
    let lower = |i: usize| at(i).map(|c| c.to_ascii_lowercase());
    match lower(pos) {
        Some(b's' | b't' | b'm' | b'd') => Step::End(pos + 1),
        Some(b'r' | b'v') if lower(pos + 1) == Some(b'e') => Step::End(pos + 2),
        Some(b'l') if lower(pos + 1) == Some(b'l') => Step::End(pos + 2),
        // `'r`, `'v`, `'l` followed by a non-ASCII character: let the
        // regex decide (case folding is Unicode-aware).
        Some(b'r' | b'v' | b'l') if at(pos + 1).is_some_and(|c| !c.is_ascii()) => Step::Bail,
        _ => Step::No,
    }
}

/// `\p{L}+` from `pos`, a letter.
fn letters(b: &[u8], pos: usize) -> Step {
    let mut end = pos;
    while end < b.len() && b[end].is_ascii_alphabetic() {
        end += 1;
    }
    finish(b, end)
}

/// o200k's `U* L+` or `U+ L*` from `pos`, a letter: both end after the
/// uppercase run and the lowercase run that follows it.
fn cased_word(b: &[u8], pos: usize) -> Step {
    let mut end = pos;
    while end < b.len() && b[end].is_ascii_uppercase() {
        end += 1;
    }
    while end < b.len() && b[end].is_ascii_lowercase() {
        end += 1;
    }
    finish(b, end)
}

/// A run of letters ends at `end` unless a non-ASCII character (maybe a
/// letter or a mark) follows.
fn finish(b: &[u8], end: usize) -> Step {
    match b.get(end) {
        Some(c) if !c.is_ascii() => Step::Bail,
        _ => Step::End(end),
    }
}

/// `\p{N}{1,3}`.
fn digits(b: &[u8], pos: usize) -> Step {
    let mut end = pos;
    while end < b.len() && end - pos < 3 && b[end].is_ascii_digit() {
        end += 1;
    }
    match end - pos {
        0 => Step::No,
        3 => Step::End(end),
        // Fewer than three: a non-ASCII digit may follow.
        _ => finish(b, end),
    }
}

/// ` ?[^\s\p{L}\p{N}]+[\r\n]*` (o200k: `[\r\n/]*`).
fn punctuation(b: &[u8], pos: usize, o200k: bool) -> Step {
    let mut start = pos;
    if b[pos] == b' ' {
        match b.get(pos + 1) {
            Some(c) if !c.is_ascii() => return Step::Bail,
            Some(&c) if is_punct(c) => start = pos + 1,
            _ => return Step::No,
        }
    } else if !is_punct(b[pos]) {
        return Step::No;
    }
    let mut end = start;
    while end < b.len() && is_punct(b[end]) {
        end += 1;
    }
    if b.get(end).is_some_and(|c| !c.is_ascii()) {
        return Step::Bail;
    }
    while end < b.len() && (b[end] == b'\r' || b[end] == b'\n' || (o200k && b[end] == b'/')) {
        end += 1;
    }
    Step::End(end)
}

/// The whitespace alternatives, in order: `\s*[\r\n]+`, `\s+$`,
/// `\s+(?!\S)`, `\s+`.
fn whitespace(b: &[u8], pos: usize) -> Step {
    let mut end = pos;
    let mut last_newline = None;
    while end < b.len() && is_space(b[end]) {
        if b[end] == b'\r' || b[end] == b'\n' {
            last_newline = Some(end);
        }
        end += 1;
    }
    if end == pos {
        return Step::No;
    }
    if b.get(end).is_some_and(|c| !c.is_ascii()) {
        // Non-ASCII whitespace may continue the run.
        return Step::Bail;
    }
    Step::End(match last_newline {
        Some(newline) => newline + 1,
        None if end == b.len() || end - pos == 1 => end,
        None => end - 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Text built from characters that sit on every rule's edges.
    fn tricky(seed: u64, len: usize) -> String {
        const ATOMS: &[&str] = &[
            "a",
            "Z",
            "hello",
            "World",
            "HTTP",
            "HTTPServer",
            "'s",
            "'S",
            "'re",
            "'ll",
            "'Ve",
            "'d",
            "'x",
            "'",
            "'ſ",
            "0",
            "12",
            "1234",
            "²",
            "٣",
            " ",
            "  ",
            "\t",
            "\n",
            "\r\n",
            "\r",
            "\x0B",
            "\x0C",
            " \n ",
            "!",
            "?!",
            "//",
            "/",
            "\"",
            "{",
            "}",
            ",",
            ":",
            "-",
            "_",
            "\x01",
            "\x7F",
            "é",
            "É",
            "ß",
            "Ω",
            "ǅ",
            "ʰ",
            "\u{301}",
            "中文",
            "—",
            "€",
            "😀",
            "\u{a0}",
            "\u{2003}",
            "\u{85}",
            "naïve",
            "café",
            "s",
            "t",
            "re",
            "ll",
            "ve",
            "m",
            "d",
        ];
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut text = String::new();
        for _ in 0..len {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            text.push_str(ATOMS[(state % ATOMS.len() as u64) as usize]);
        }
        text
    }

    fn ours(encoding: Encoding, text: &str) -> Vec<&str> {
        let mut pieces = Vec::new();
        Splitter::of(encoding).split(text, |start, piece| {
            assert_eq!(&text[start..start + piece.len()], piece);
            pieces.push(piece);
        });
        pieces
    }

    fn reference(encoding: Encoding, text: &str) -> Vec<&str> {
        let tokenizer = match encoding {
            Encoding::O200k => bpe_openai::o200k_base(),
            Encoding::Cl100k => bpe_openai::cl100k_base(),
        };
        tokenizer.split(text).collect()
    }

    #[test]
    fn pieces_match_bpe_openai_on_edge_cases() {
        for encoding in [Encoding::O200k, Encoding::Cl100k] {
            for seed in 0..4000 {
                let text = tricky(seed, (seed % 40) as usize);
                assert_eq!(
                    ours(encoding, &text),
                    reference(encoding, &text),
                    "{encoding:?} on {text:?}"
                );
            }
        }
    }

    #[test]
    fn pieces_match_bpe_openai_on_json_and_code() {
        let text = concat!(
            "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"What's in ./src? I'LL check\\n\"}],",
            "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"bash\",\"parameters\":{\"type\":\"object\"}}}]}\n",
            "fn main() {\n    let x: Vec<u32> = (0..10).map(|i| i * 2).collect();\n    println!(\"{x:?}\");\n}\n\n\n",
            "def f(a, b):\r\n\treturn a // b  # comment\r\n   \n  end   ",
        );
        for encoding in [Encoding::O200k, Encoding::Cl100k] {
            assert_eq!(
                ours(encoding, text),
                reference(encoding, text),
                "{encoding:?}"
            );
        }
    }
}
