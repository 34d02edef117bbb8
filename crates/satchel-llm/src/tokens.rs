//! Token counting on the exact bytes of a request: [`Encoding`],
//! [`count_tokens`], and the per-section [`TokenEstimate`].
//!
//! Counting uses the BPE of the `bpe` crate (OpenAI's `o200k_base` and
//! `cl100k_base` vocabularies, built as `bpe-openai` builds them; linear
//! time even on adversarial input) after Satchel's own pre-tokenizer (see
//! `pretokenize`), which gives the same pieces as tiktoken's regular
//! expressions several times faster. Each vocabulary is loaded once, on
//! first use (built from its embedded tiktoken file, or read from the
//! token cache: see `vocabulary`), and is shared for the life of the
//! process; within one count, the counts of repeated short pieces are
//! remembered.
//!
//! A request body is counted in one pass: the tokenizer's pre-tokenizer
//! splits the body into pieces, each piece is counted, and its tokens go to
//! the section whose bytes it starts in. The sections therefore add up to
//! exactly the count of the whole body. Base64 image data is the exception:
//! it is not text to the model, so it is skipped and each image counts
//! [`IMAGE_TOKENS`].

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, LazyLock};

use bytes::Bytes;

use bpe::byte_pair_encoding::BytePairEncoding;

use serde::{Deserialize, Serialize};

use crate::count_cache::{self, Checkpoint};
use crate::encoding::Encoding;
use crate::pretokenize::Splitter;
use crate::sections::{Section, SectionTokens, Span, Spans};
use crate::vocabulary;

/// Tokens counted for one image, whatever its size: Anthropic's cost of an
/// image at its largest un-resized size (about 1.15 megapixels) and close to
/// OpenAI's high-detail cost for a 1024×1024 image.
pub const IMAGE_TOKENS: u64 = 1_600;

/// `encoding`'s vocabulary, loaded on first use.
fn loaded(encoding: Encoding) -> &'static Vocabulary {
    static O200K: LazyLock<Vocabulary> =
        LazyLock::new(|| Vocabulary::new(vocabulary::O200K.load()));
    static CL100K: LazyLock<Vocabulary> =
        LazyLock::new(|| Vocabulary::new(vocabulary::CL100K.load()));
    match encoding {
        Encoding::O200k => &O200K,
        Encoding::Cl100k => &CL100K,
    }
}

/// A vocabulary with two ways to count a piece: `bpe-openai`'s linear-time
/// encoder for long pieces, and tiktoken's rank-merge loop for short ones
/// (fewer than [`SHORT_PIECE`] bytes), which is several times faster there.
struct Vocabulary {
    bpe: &'static BytePairEncoding,
    /// Token bytes to rank (the token id: tiktoken files list tokens by rank).
    ranks: HashMap<&'static [u8], u32, BuildHasherDefault<FxHasher>>,
    /// The rank of every two-byte token, indexed by the two bytes: the
    /// first merges of every piece look here instead of in `ranks`.
    pairs: Vec<u32>,
}

/// Pieces shorter than this are merged by rank; longer ones go to the
/// linear-time encoder (the merge loop is quadratic).
const SHORT_PIECE: usize = 32;

impl Vocabulary {
    fn new(bpe: BytePairEncoding) -> Vocabulary {
        // Shared for the life of the process (`ranks` borrows its tokens).
        let bpe: &'static BytePairEncoding = Box::leak(Box::new(bpe));
        let count = bpe.num_tokens();
        let mut ranks = HashMap::with_capacity_and_hasher(count, BuildHasherDefault::default());
        let mut pairs = vec![u32::MAX; 1 << 16];
        for id in 0..count as u32 {
            let bytes = bpe.token_bytes(id);
            if let [a, b] = bytes {
                pairs[usize::from(*a) << 8 | usize::from(*b)] = id;
            }
            ranks.insert(bytes, id);
        }
        Vocabulary { bpe, ranks, pairs }
    }

    /// The number of BPE tokens of one pre-tokenized piece.
    fn count(&self, piece: &[u8]) -> u64 {
        if piece.len() >= SHORT_PIECE {
            return self.bpe.count(piece) as u64;
        }
        if piece.len() <= 1 || self.ranks.contains_key(piece) {
            // Every single byte is a token of a byte-level BPE.
            return piece.len().min(1) as u64;
        }
        self.merge_count(piece)
    }

    /// tiktoken's `byte_pair_merge`: repeatedly merge the adjacent pair of
    /// lowest rank (leftmost on ties) until no pair is a token.
    fn merge_count(&self, piece: &[u8]) -> u64 {
        const NONE: u32 = u32::MAX;
        let n = piece.len();
        let rank = |start: usize, end: usize| match piece.get(start..end) {
            Some(&[a, b]) => self.pairs[usize::from(a) << 8 | usize::from(b)],
            Some(bytes) => self.ranks.get(bytes).copied().unwrap_or(NONE),
            None => NONE,
        };
        // Boundaries of the parts, each with the rank of merging the part
        // that starts there with the next one; the last is the end.
        let mut parts = [(0usize, NONE); SHORT_PIECE + 1];
        for (i, part) in parts.iter_mut().enumerate().take(n + 1) {
            *part = (i, if i + 2 <= n { rank(i, i + 2) } else { NONE });
        }
        let mut len = n + 1;
        // The rank of merging parts j, j+1 once j+1 and j+2 are one part.
        let merged = |parts: &[(usize, u32)], len: usize, j: usize| {
            if j + 3 < len {
                rank(parts[j].0, parts[j + 3].0)
            } else {
                NONE
            }
        };
        loop {
            let mut best = (NONE, 0);
            for (i, &(_, pair)) in parts[..len - 1].iter().enumerate() {
                if pair < best.0 {
                    best = (pair, i);
                }
            }
            if best.0 == NONE {
                break;
            }
            let i = best.1;
            if i > 0 {
                parts[i - 1].1 = merged(&parts, len, i - 1);
            }
            parts[i].1 = merged(&parts, len, i);
            parts.copy_within(i + 2..len, i + 1);
            len -= 1;
        }
        (len - 1) as u64
    }
}

/// The number of tokens `encoding` splits `text` into (what tiktoken's
/// `encode_ordinary(text).len()` returns).
pub fn count_tokens(encoding: Encoding, text: &str) -> u64 {
    let mut counter = Counter::new(encoding);
    let mut total = 0;
    Splitter::of(encoding).split(text, |_, piece| total += counter.count(piece));
    total
}

/// Counts pieces, remembering the count of short ones: in prose, code and
/// JSON most pieces are words and punctuation that come back again and
/// again, and a lookup is much cheaper than a BPE encoding.
struct Counter<'t> {
    vocabulary: &'static Vocabulary,
    known: HashMap<&'t str, u32, BuildHasherDefault<FxHasher>>,
}

impl<'t> Counter<'t> {
    fn new(encoding: Encoding) -> Counter<'t> {
        Counter {
            vocabulary: loaded(encoding),
            known: HashMap::default(),
        }
    }

    fn count(&mut self, piece: &'t str) -> u64 {
        let vocabulary = self.vocabulary;
        if piece.len() <= 1 || piece.len() >= SHORT_PIECE {
            return vocabulary.count(piece.as_bytes());
        }
        let known = self.known.entry(piece);
        u64::from(*known.or_insert_with(|| vocabulary.count(piece.as_bytes()) as u32))
    }
}

/// The multiply-rotate hash of rustc (`FxHash`): fast on short keys; the
/// keys are pieces of one request, so flooding is not a concern.
#[derive(Default)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
        }
        for &byte in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(byte)).wrapping_mul(K);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The input tokens of one request, counted on the bytes that are sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenEstimate {
    /// The vocabulary that counted.
    pub encoding: Encoding,
    /// Input tokens of the whole request: the sum of the sections.
    pub total: u64,
    /// Tokens per section.
    pub sections: SectionTokens,
    /// Images in the request (each counted as [`IMAGE_TOKENS`]).
    pub images: u32,
    /// Size of the request body.
    pub body_bytes: u64,
    /// The model's context window, for the share.
    pub context_window: u64,
    /// Tokens asked for (or reserved) for the answer, when known.
    pub max_output_tokens: Option<u64>,
}

impl TokenEstimate {
    /// Tokens attributed to `section`.
    pub fn section(&self, section: Section) -> u64 {
        self.sections.get(section)
    }

    /// The share of the context window the request fills, 0.0 to 1.0 (or
    /// more, for a request that does not fit).
    pub fn window_share(&self) -> f64 {
        if self.context_window == 0 {
            return 0.0;
        }
        self.total as f64 / self.context_window as f64
    }

    /// Tokens left in the window for the answer.
    pub fn remaining(&self) -> u64 {
        self.context_window.saturating_sub(self.total)
    }
}

/// Counts `body` (with its section marks) into an estimate, resuming after
/// the prefix it shares with a recently counted body (see
/// `count_cache`); the result is the same as counting it whole.
pub(crate) fn estimate_cached(
    encoding: Encoding,
    body: &Bytes,
    spans: &Arc<Spans>,
    context_window: u64,
    max_output_tokens: Option<u64>,
) -> TokenEstimate {
    let resume = count_cache::resume_point(encoding, body, spans);
    let mut checkpoints = Vec::with_capacity(body.len() / count_cache::CHECKPOINT_EVERY + 1);
    let estimate = count(
        encoding,
        body,
        spans,
        context_window,
        max_output_tokens,
        resume,
        Some(&mut checkpoints),
    );
    count_cache::remember(encoding, body.clone(), spans.clone(), checkpoints);
    estimate
}

/// Counts `body` (with its section marks) into an estimate, from scratch.
pub(crate) fn estimate(
    encoding: Encoding,
    body: &[u8],
    spans: &Spans,
    context_window: u64,
    max_output_tokens: Option<u64>,
) -> TokenEstimate {
    count(
        encoding,
        body,
        spans,
        context_window,
        max_output_tokens,
        None,
        None,
    )
}

fn count(
    encoding: Encoding,
    body: &[u8],
    spans: &Spans,
    context_window: u64,
    max_output_tokens: Option<u64>,
    resume: Option<Checkpoint>,
    mut checkpoints: Option<&mut Vec<Checkpoint>>,
) -> TokenEstimate {
    let mut sections = resume.map_or_else(SectionTokens::default, |r| r.sections);
    let mut images = resume.map_or(0, |r| r.images);
    let resume_at = resume.map_or(0, |r| r.offset);
    let text = String::from_utf8_lossy(body);

    // (start, end, span) for every stretch of the body.
    let mut segments: Vec<(usize, usize, Span)> = Vec::with_capacity(spans.starts.len() + 1);
    if spans.starts.first().map(|(offset, _)| *offset) != Some(0) {
        let end = spans
            .starts
            .first()
            .map_or(text.len(), |(offset, _)| *offset);
        segments.push((0, end, Span::Text(Section::Framing)));
    }
    for (i, (start, span)) in spans.starts.iter().enumerate() {
        let end = spans
            .starts
            .get(i + 1)
            .map_or(text.len(), |(next, _)| *next);
        segments.push((*start, end.min(text.len()), *span));
    }

    let splitter = Splitter::of(encoding);
    let mut counter = Counter::new(encoding);
    let mut next_checkpoint = resume_at + count_cache::CHECKPOINT_EVERY;
    let mut i = 0;
    while i < segments.len() {
        match segments[i].2 {
            Span::Image(section) => {
                if segments[i].0 >= resume_at {
                    images += 1;
                    *sections.slot(section) += IMAGE_TOKENS;
                }
                i += 1;
                continue;
            }
            Span::Declared(section, tokens) => {
                if segments[i].0 >= resume_at {
                    *sections.slot(section) += tokens;
                }
                i += 1;
                continue;
            }
            Span::Text(_) => {}
        }
        // A run of text segments is split as one region, so that pieces
        // are exactly those of the whole body.
        let mut j = i;
        while j < segments.len() && matches!(segments[j].2, Span::Text(_)) {
            j += 1;
        }
        let (start, end) = (segments[i].0, segments[j - 1].1);
        if end <= resume_at {
            i = j;
            continue;
        }
        if let Some(region) = text.get(start..end) {
            let mut k = i;
            let from = resume_at.saturating_sub(start);
            splitter.split_from(region, from, |offset, piece| {
                let at = start + offset;
                if at >= next_checkpoint
                    && let Some(list) = checkpoints.as_deref_mut()
                {
                    list.push(Checkpoint {
                        offset: at,
                        sections,
                        images,
                    });
                    next_checkpoint = at + count_cache::CHECKPOINT_EVERY;
                }
                while k + 1 < j && segments[k + 1].0 <= at {
                    k += 1;
                }
                if let Span::Text(section) = segments[k].2 {
                    *sections.slot(section) += counter.count(piece);
                }
            });
        }
        i = j;
    }

    TokenEstimate {
        encoding,
        total: sections.sum(),
        sections,
        images,
        body_bytes: body.len() as u64,
        context_window,
        max_output_tokens,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_match_known_tiktoken_values() {
        // Reference values from tiktoken.
        assert_eq!(count_tokens(Encoding::Cl100k, "hello world"), 2);
        assert_eq!(count_tokens(Encoding::O200k, "hello world"), 2);
        assert_eq!(
            count_tokens(
                Encoding::Cl100k,
                "The quick brown fox jumps over the lazy dog."
            ),
            10
        );
        assert_eq!(count_tokens(Encoding::O200k, ""), 0);
    }

    /// A fixed text in many scripts, with code, numbers and odd spacing.
    const MULTILINGUAL: &str = "The quick brown fox jumps over the lazy dog. \
        Le cœur a ses raisons que la raison ne connaît point. \
        Über den Wolken muss die Freiheit wohl grenzenlos sein. \
        ¿Dónde está la biblioteca? Ça coûte 12,50 €.\n\
        Съешь же ещё этих мягких французских булок, да выпей чаю.\n\
        ξεσκεπάζω την ψυχοφθόρα βδελυγμία. \
        שלום עולם. مرحبا بالعالم، كيف حالك؟ नमस्ते दुनिया, आप कैसे हैं?\n\
        我能吞下玻璃而不伤身体。 私はガラスを食べられます。それは私を傷つけません。 \
        나는 유리를 먹을 수 있어요. 그래도 아프지 않아요. \
        Tôi có thể ăn thủy tinh mà không hại gì. ฉันกินกระจกได้ แต่มันไม่ทำให้ฉันเจ็บ\n\
        😀👍🏽🇫🇷 👨‍👩‍👧‍👦 ∑ x² ≤ ∞ → ½ ² ٣ ſ's I'll DON'T we've\r\n\
        fn main() {\n    let v: Vec<u64> = (1..=100_000).collect();\n\
        \tprintln!(\"{:?}\", &v[..3]); // 3.14159 0xDEADBEEF 1e-9\n}\n\
        {\"path\": \"/tmp/x y\", \"n\": 1234567890, \"ok\": true}   \u{a0}\u{2003}end  \n\n";

    #[test]
    fn counts_of_a_fixed_multilingual_text_are_exact() {
        // The counts the vocabularies gave when they were embedded as
        // serialised tables (before issue #44's size work): the form they
        // are embedded and built in must not change a single count.
        assert_eq!(count_tokens(Encoding::O200k, MULTILINGUAL), 303);
        assert_eq!(count_tokens(Encoding::Cl100k, MULTILINGUAL), 451);
    }

    #[test]
    fn counts_equal_bpe_openai_on_mixed_text() {
        let text = "Naïve café — Zürich 2024: {\"path\": \"/tmp/x\", \"n\": 12345}\n\
                    fn main() {\n    println!(\"{}\", 42);\n}\n\n\tI'll say it's DONE'S. \
                    中文文本 😀 \u{a0}non-breaking\u{2003}space ² ٣ ſ's\r\n  end   "
            .repeat(30);
        for (encoding, tokenizer) in [
            (Encoding::O200k, bpe_openai::o200k_base()),
            (Encoding::Cl100k, bpe_openai::cl100k_base()),
        ] {
            assert_eq!(
                count_tokens(encoding, &text),
                tokenizer.count(text.as_str()) as u64,
                "{encoding:?}"
            );
        }
    }

    #[test]
    fn rank_merging_counts_like_bpe_openai_on_rare_pieces() {
        // Random letters, digits, hex and non-ASCII runs: pieces that are
        // rarely single tokens, of every length around SHORT_PIECE.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let alphabets: [&[char]; 4] = [
            &['a', 'e', 'q', 'x', 'z', 'k', 'T', 'Q', 'r', 's', 'n'],
            &['0', '7', 'a', 'f', 'c', '3', 'e', '9'],
            &['é', 'ß', 'ж', 'ф', 'ا', 'ل', '中', '文', 'e', 'a'],
            &['-', '_', '.', '=', '>', '<', '/', '*', '#', '\''],
        ];
        let mut text = String::new();
        for _ in 0..3000 {
            let alphabet = alphabets[(next() % 4) as usize];
            let len = 1 + next() % 40;
            for _ in 0..len {
                text.push(alphabet[(next() % alphabet.len() as u64) as usize]);
            }
            text.push([' ', '\n', ' ', '\t'][(next() % 4) as usize]);
        }
        for (encoding, tokenizer) in [
            (Encoding::O200k, bpe_openai::o200k_base()),
            (Encoding::Cl100k, bpe_openai::cl100k_base()),
        ] {
            assert_eq!(
                count_tokens(encoding, &text),
                tokenizer.count(text.as_str()) as u64,
                "{encoding:?}"
            );
        }
    }

    #[test]
    fn sections_add_up_to_the_count_of_the_whole_body() {
        let body = br#"{"model":"m","system":"You are terse.","messages":[{"role":"user","content":"hi there"},{"role":"tool","content":"exit 0"}],"tools":[{"name":"bash"}]}"#;
        let find = |needle: &str| {
            body.windows(needle.len())
                .position(|w| w == needle.as_bytes())
                .unwrap()
        };
        let mut spans = Spans::default();
        spans.mark(0, Span::Text(Section::Framing));
        spans.mark(find("\"You"), Span::Text(Section::System));
        spans.mark(find(",\"messages"), Span::Text(Section::Framing));
        spans.mark(find("{\"role\":\"user"), Span::Text(Section::Messages));
        spans.mark(find(",{\"role\":\"tool"), Span::Text(Section::Framing));
        spans.mark(find("{\"role\":\"tool"), Span::Text(Section::ToolResults));
        spans.mark(find("],\"tools"), Span::Text(Section::Framing));
        spans.mark(find("{\"name"), Span::Text(Section::Tools));
        spans.mark(find("]}"), Span::Text(Section::Framing));
        let estimate = estimate(Encoding::O200k, body, &spans, 1000, None);
        let whole = count_tokens(Encoding::O200k, std::str::from_utf8(body).unwrap());
        assert_eq!(estimate.total, whole);
        for section in Section::ALL {
            assert!(estimate.section(section) > 0, "{section:?} got nothing");
        }
        assert_eq!(estimate.images, 0);
    }

    /// A body like a request's: messages, then tools, with marks.
    fn request_body(messages: &[String]) -> (Bytes, Arc<Spans>) {
        let mut body = String::from("{\"model\":\"m\",\"messages\":[");
        let mut spans = Spans::default();
        spans.mark(0, Span::Text(Section::Framing));
        for (i, message) in messages.iter().enumerate() {
            if i > 0 {
                body.push(',');
            }
            spans.mark(body.len(), Span::Text(Section::Messages));
            body.push_str(&serde_json::to_string(message).unwrap());
            spans.mark(body.len(), Span::Text(Section::Framing));
        }
        body.push_str("],\"tools\":[");
        spans.mark(body.len(), Span::Text(Section::Tools));
        body.push_str("{\"name\":\"bash\",\"description\":\"Run a command.   \\n  Fine.\"}");
        spans.mark(body.len(), Span::Text(Section::Framing));
        body.push_str("]}");
        (Bytes::from(body), Arc::new(spans))
    }

    #[test]
    fn resuming_after_a_shared_prefix_counts_exactly_what_a_fresh_count_does() {
        let words = [
            "alpha ",
            "  beta\n",
            "γάμμα ",
            "12345 ",
            "don't ",
            "\t\t",
            "日本語 ",
            "x",
        ];
        let message = |seed: usize, len: usize| -> String {
            (0..len)
                .map(|i| words[(seed * 7 + i * 3) % words.len()])
                .collect()
        };
        let base: Vec<String> = (0..40).map(|i| message(i, 120)).collect();
        let variants: Vec<Vec<String>> = vec![
            base.clone(),
            [base.clone(), vec![message(99, 200)]].concat(),
            [base[..39].to_vec(), vec![format!("{}   ", base[39])]].concat(),
            [
                base[..20].to_vec(),
                vec![message(5, 30)],
                base[21..].to_vec(),
            ]
            .concat(),
            [
                base.clone(),
                vec!["   \n\n  trailing".into(), message(1, 500)],
            ]
            .concat(),
        ];
        for encoding in [Encoding::O200k, Encoding::Cl100k] {
            crate::count_cache::forget();
            let (body, spans) = request_body(&base);
            estimate_cached(encoding, &body, &spans, 1_000_000, None);
            for variant in &variants {
                let (body, spans) = request_body(variant);
                let cached = estimate_cached(encoding, &body, &spans, 1_000_000, None);
                let fresh = estimate(encoding, &body, &spans, 1_000_000, None);
                assert_eq!(cached, fresh, "{encoding:?}");
                assert_eq!(
                    fresh.total,
                    count_tokens(encoding, std::str::from_utf8(&body).unwrap())
                );
            }
        }
    }

    #[test]
    fn image_data_is_skipped_and_counted_per_image() {
        let data = "iVBORw0KGgo".repeat(1000);
        let body = format!(r#"{{"a":"x","img":"{data}","b":"y"}}"#);
        let start = body.find("iVBOR").unwrap();
        let mut spans = Spans::default();
        spans.mark(0, Span::Text(Section::Messages));
        spans.mark(start, Span::Image(Section::Messages));
        spans.mark(start + data.len(), Span::Text(Section::Messages));
        let estimate = estimate(Encoding::Cl100k, body.as_bytes(), &spans, 10_000, None);
        assert_eq!(estimate.images, 1);
        let without = r#"{"a":"x","img":"","b":"y"}"#;
        let text_tokens = count_tokens(Encoding::Cl100k, without);
        assert!(
            estimate.total.abs_diff(text_tokens + IMAGE_TOKENS) <= 2,
            "{} vs {}",
            estimate.total,
            text_tokens + IMAGE_TOKENS
        );
        assert_eq!(estimate.section(Section::Messages), estimate.total);
    }
}
