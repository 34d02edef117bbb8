//! Sentence embeddings: the [`Embedder`] (a WordPiece tokenizer from
//! `tokenizer.json` and a BERT encoder from `model.safetensors`), loaded
//! once per model directory and shared ([`Embedder::shared`]).
//!
//! Everything runs in-process on the CPU and offline: the three model
//! files must already be on disk (`scripts/fetch-memory-model.sh`). What
//! does not live here: deciding when to embed (recall and storing do) or
//! where the model directory is (configuration does).

mod bert;
mod kernels;
mod matmul;
mod quantized;
#[cfg(test)]
mod reference;
mod tensors;

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use tokenizers::{Tokenizer, TruncationParams};

use crate::MemoryError;
use bert::{Bert, BertConfig};

/// The files a model directory must hold.
pub const MODEL_FILES: [&str; 3] = ["model.safetensors", "tokenizer.json", "config.json"];

/// Tokens an embedded text is cut to (the model was trained on 256).
pub const MAX_TOKENS: usize = 256;

/// Tokens embedded in one pass of a batch: enough rows for `gemm` to run
/// at full speed, few enough that the activations stay in cache.
const TOKENS_PER_PASS: usize = 512;

/// Query embeddings kept for repeated queries.
const QUERY_CACHE_ENTRIES: usize = 256;

/// What one thread of a batch embedded: (index of the text, vector).
type Share = Result<Vec<(usize, Vec<f32>)>, MemoryError>;

/// A loaded sentence-embedding model; cheap to share between threads.
pub struct Embedder {
    dir: PathBuf,
    tokenizer: Tokenizer,
    bert: Bert,
    threads: usize,
    chooser: Chooser,
    query_cache: Mutex<QueryCache>,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("dir", &self.dir)
            .field("dim", &self.bert.dim())
            .field("threads", &self.threads)
            .finish()
    }
}

/// Chooses one or two threads for a single text from how fast each was
/// lately (time per token, a moving average): two win when both cores are
/// free, one when other work keeps the second core busy (the two threads
/// then wait for each other). Every `EXPLORE`-th text tries the slower
/// choice, so a change of load is noticed.
#[derive(Debug, Default)]
struct Chooser {
    texts: AtomicU64,
    /// Nanoseconds per token on one thread and on two; 0 until measured.
    per_token: [AtomicU64; 2],
}

impl Chooser {
    const EXPLORE: u64 = 16;

    /// True to split the next text over two threads.
    fn split(&self) -> bool {
        let count = self.texts.fetch_add(1, Ordering::Relaxed);
        let [one, two] = self.per_token.each_ref().map(|a| a.load(Ordering::Relaxed));
        if one == 0 || two == 0 {
            return one != 0; // measure each once
        }
        (two < one) != (count % Self::EXPLORE == Self::EXPLORE - 1)
    }

    /// Records how long a text of `tokens` tokens took.
    fn record(&self, split: bool, elapsed: Duration, tokens: usize) {
        let sample = u64::try_from(elapsed.as_nanos() / tokens.max(1) as u128).unwrap_or(u64::MAX);
        let average = &self.per_token[usize::from(split)];
        let old = average.load(Ordering::Relaxed);
        let new = if old == 0 {
            sample
        } else {
            old - old / 4 + sample / 4
        };
        average.store(new.max(1), Ordering::Relaxed);
    }
}

#[derive(Default)]
struct QueryCache {
    entries: HashMap<String, Arc<Vec<f32>>>,
    order: VecDeque<String>,
}

impl Embedder {
    /// True when `dir` holds every model file.
    pub fn files_present(dir: &Path) -> bool {
        MODEL_FILES.iter().all(|name| dir.join(name).is_file())
    }

    /// Loads the model in `dir`. Blocking: reads about 90 MB.
    pub fn load(dir: &Path) -> Result<Embedder, MemoryError> {
        let missing: Vec<&str> = MODEL_FILES
            .iter()
            .copied()
            .filter(|name| !dir.join(name).is_file())
            .collect();
        if !missing.is_empty() {
            return Err(MemoryError::ModelMissing {
                dir: dir.to_path_buf(),
                missing: missing.join(", "),
            });
        }
        let config_path = dir.join("config.json");
        let config_text =
            std::fs::read_to_string(&config_path).map_err(|error| MemoryError::Model {
                path: config_path.clone(),
                reason: error.to_string(),
            })?;
        let config: BertConfig =
            serde_json::from_str(&config_text).map_err(|error| MemoryError::Model {
                path: config_path.clone(),
                reason: error.to_string(),
            })?;
        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer =
            Tokenizer::from_file(&tokenizer_path).map_err(|error| MemoryError::Model {
                path: tokenizer_path.clone(),
                reason: error.to_string(),
            })?;
        let max_len = MAX_TOKENS.min(config.max_position_embeddings);
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_len,
                ..TruncationParams::default()
            }))
            .map_err(|error| MemoryError::Model {
                path: tokenizer_path.clone(),
                reason: error.to_string(),
            })?;
        let bert = Bert::load(&dir.join("model.safetensors"), config)?;
        let threads = std::thread::available_parallelism()
            .map(usize::from)
            .unwrap_or(1)
            .clamp(1, 8);
        Ok(Embedder {
            dir: dir.to_path_buf(),
            tokenizer,
            bert,
            threads,
            chooser: Chooser::default(),
            query_cache: Mutex::new(QueryCache::default()),
        })
    }

    /// The model in `dir`, loaded once per process and shared.
    pub fn shared(dir: &Path) -> Result<Arc<Embedder>, MemoryError> {
        static LOADED: OnceLock<Mutex<HashMap<PathBuf, Arc<Embedder>>>> = OnceLock::new();
        let key = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        let loaded = LOADED.get_or_init(Mutex::default);
        // Held while loading, so two callers never load the same model twice.
        let mut loaded = loaded.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(embedder) = loaded.get(&key) {
            return Ok(Arc::clone(embedder));
        }
        let embedder = Arc::new(Embedder::load(&key)?);
        loaded.insert(key, Arc::clone(&embedder));
        Ok(embedder)
    }

    /// The directory the model was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Width of the embeddings (384 for all-MiniLM-L6-v2).
    pub fn dim(&self) -> usize {
        self.bert.dim()
    }

    /// Sets how many threads a batch is split over (1 to 8).
    pub fn set_threads(&mut self, threads: usize) {
        self.threads = threads.clamp(1, 8);
    }

    fn tokenize(&self, text: &str) -> Result<Vec<u32>, MemoryError> {
        let encoding = self
            .tokenizer
            .encode(text, true)
            .map_err(|error| MemoryError::Model {
                path: self.dir.join("tokenizer.json"),
                reason: format!("cannot tokenize: {error}"),
            })?;
        let mut ids = encoding.get_ids().to_vec();
        ids.truncate(self.bert.max_len());
        Ok(ids)
    }

    /// How many tokens the model reads for `text`: its word pieces and the
    /// two markers, cut at the model's length. A query embedding's time
    /// grows with it, so benchmarks report it beside their timings.
    pub fn token_count(&self, text: &str) -> Result<usize, MemoryError> {
        Ok(self.tokenize(text)?.len())
    }

    /// Embeds texts (unit vectors, one per text). Blocking and CPU-bound:
    /// call from a blocking thread. Long batches are split over threads.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, MemoryError> {
        if let [text] = texts {
            return Ok(vec![self.embed_one(text)?]);
        }
        let next = AtomicUsize::new(0);
        let threads = self.threads.min(texts.len()).max(1);
        let shares: Vec<Share> = if threads == 1 {
            vec![self.embed_pulled(texts, &next)]
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = (0..threads)
                    .map(|_| scope.spawn(|| self.embed_pulled(texts, &next)))
                    .collect();
                handles
                    .into_iter()
                    .map(|handle| handle.join().unwrap_or_else(|_| Err(self.failed())))
                    .collect()
            })
        };
        let mut out = vec![Vec::new(); texts.len()];
        for share in shares {
            for (index, vector) in share? {
                out[index] = vector;
            }
        }
        if out.iter().any(Vec::is_empty) {
            return Err(self.failed());
        }
        Ok(out)
    }

    /// Embeds the texts whose indices this thread takes from `next`, one
    /// at a time so threads that get less CPU time take fewer, in passes
    /// of about `TOKENS_PER_PASS` tokens.
    fn embed_pulled(&self, texts: &[&str], next: &AtomicUsize) -> Share {
        let mut done = Vec::new();
        let mut pending: Vec<(usize, Vec<u32>)> = Vec::new();
        let mut tokens = 0;
        loop {
            let index = next.fetch_add(1, Ordering::Relaxed);
            let Some(text) = texts.get(index) else {
                break;
            };
            let ids = self.tokenize(text)?;
            tokens += ids.len();
            pending.push((index, ids));
            if tokens >= TOKENS_PER_PASS {
                self.embed_pending(&mut pending, &mut done);
                tokens = 0;
            }
        }
        self.embed_pending(&mut pending, &mut done);
        Ok(done)
    }

    /// Embeds `pending` in one pass, moving the vectors to `done`.
    fn embed_pending(
        &self,
        pending: &mut Vec<(usize, Vec<u32>)>,
        done: &mut Vec<(usize, Vec<f32>)>,
    ) {
        let ids: Vec<&[u32]> = pending.iter().map(|(_, ids)| ids.as_slice()).collect();
        let vectors = self.bert.embed(&ids);
        done.extend(pending.drain(..).map(|(index, _)| index).zip(vectors));
    }

    /// One text, on one thread or two (see `bert::split` and `Chooser`).
    fn embed_one(&self, text: &str) -> Result<Vec<f32>, MemoryError> {
        let ids = self.tokenize(text)?;
        let split = self.threads >= 2 && self.chooser.split();
        let start = Instant::now();
        let vector = if split {
            self.bert.embed_split(&ids)
        } else {
            self.bert.embed(&[&ids]).pop().unwrap_or_default()
        };
        if self.threads >= 2 {
            self.chooser.record(split, start.elapsed(), ids.len());
        }
        Ok(vector)
    }

    fn failed(&self) -> MemoryError {
        MemoryError::Model {
            path: self.dir.clone(),
            reason: "an embedding thread failed".into(),
        }
    }

    /// Embeds one query, reusing the answer for a query seen recently.
    pub fn embed_query(&self, text: &str) -> Result<Arc<Vec<f32>>, MemoryError> {
        let key = text.trim().to_owned();
        {
            let cache = self
                .query_cache
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(vector) = cache.entries.get(&key) {
                return Ok(Arc::clone(vector));
            }
        }
        let vector = Arc::new(self.embed_one(&key)?);
        let mut cache = self
            .query_cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if cache.entries.len() >= QUERY_CACHE_ENTRIES
            && let Some(oldest) = cache.order.pop_front()
        {
            cache.entries.remove(&oldest);
        }
        if cache
            .entries
            .insert(key.clone(), Arc::clone(&vector))
            .is_none()
        {
            cache.order.push_back(key);
        }
        Ok(vector)
    }
}

/// Cosine similarity of two unit vectors (their dot product).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

    use super::*;

    /// Varied texts: short and long, questions, dialogue turns, numbers,
    /// code, accents and emoji, an empty one, and (in `texts`) one past
    /// `MAX_TOKENS`.
    const TEXTS: [&str; 36] = [
        "When did Caroline go to the LGBTQ support group?",
        "What did Melanie paint recently?",
        "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
        "Melanie: That's amazing! I finally finished the painting of the lake at sunrise.",
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "The stock market fell sharply today.",
        "",
        "ok",
        "Hi!",
        "fn main() { println!(\"hello, world\"); }",
        "SELECT id, body FROM memories WHERE kind = 'fact' ORDER BY created_at DESC LIMIT 10;",
        "The meeting is on 2023-05-08 at 13:56, room 4B, budget $12,500.",
        "Café, naïve, façade, Zürich, São Paulo, Kraków.",
        "I love this so much 😍🎉 can't wait for next week!!!",
        "Der schnelle braune Fuchs springt über den faulen Hund.",
        "日本語のテキストも埋め込めるはずです。",
        "Remember that the user prefers dark mode and uses vim keybindings.",
        "User asked how to configure the proxy; answered with the HTTPS_PROXY variable.",
        "Gina: I lost my job as a store manager last month, so I'm starting my own clothing store.",
        "Jon: Dancing has always been my passion; I'm opening a dance studio downtown.",
        "What are Jon's plans for the summer?",
        "Did John and Maria ever go hiking together, and if so where?",
        "How many children does Audrey have?",
        "Tim: Harry Potter is my favourite book series, I reread it every winter by the fire.",
        "The mitochondria is the powerhouse of the cell.",
        "Quantum entanglement does not allow faster-than-light communication.",
        "Buy milk, eggs, flour; call the plumber; renew passport before June.",
        "a a a a a a a a a a a a a a a a a a a a",
        "ERROR: connection refused (os error 111) while connecting to 127.0.0.1:5432",
        "She said: \"I'll be there at eight,\" but arrived at nine-thirty.",
        "Photosynthesis converts light energy into chemical energy stored in glucose.",
        "Nate: I won my first video game tournament last week! Got a trophy and some cash.",
        "Joanna: I've been writing a screenplay about a woman who travels back in time.",
        "What is the capital of Australia? Canberra, not Sydney.",
        LONG,
    ];

    fn texts() -> Vec<String> {
        let mut texts: Vec<String> = TEXTS.iter().map(|t| (*t).to_owned()).collect();
        texts.push(format!("{LONG} {LONG}"));
        texts
    }

    const LONG: &str = "Caroline: Last weekend I went hiking with my friends in the \
        mountains north of the city. We started early, before sunrise, and climbed for \
        about four hours until we reached the ridge, where the view over the valley was \
        breathtaking. On the way down we stopped at a small lake and had lunch: \
        sandwiches, apples, and a thermos of hot tea that my friend Melanie had brought. \
        We talked about our plans for the summer, about the adoption agencies I have been \
        researching, about her new painting class, and about how much our lives have \
        changed in the last few years. It was one of those days that reminds you why \
        friendship matters, and why you should spend more time outdoors, away from \
        screens and emails and deadlines. When we got back to the car it was already \
        dark, and we were exhausted but happy. I think we will go again next month, maybe \
        to the waterfall trail that everyone keeps recommending, if the weather is good \
        and if Melanie's kids can stay with their grandparents for the day. Later that \
        evening I wrote about the trip in my journal, listing every bird we saw, every \
        flower, every joke, because I never want to forget a single moment of it.";

    /// The embeddings of the original forward pass, batched as it was.
    fn reference_vectors(embedder: &Embedder, dir: &Path) -> Vec<Vec<f32>> {
        let config = std::fs::read_to_string(dir.join("config.json")).unwrap();
        let config: bert::BertConfig = serde_json::from_str(&config).unwrap();
        let old = reference::Bert::load(&dir.join("model.safetensors"), config).unwrap();
        let ids: Vec<Vec<u32>> = texts()
            .iter()
            .map(|t| embedder.tokenize(t).unwrap())
            .collect();
        assert!(ids.iter().any(|ids| ids.len() == MAX_TOKENS));
        old.embed(&ids)
    }

    fn assert_close(what: &str, new: &[Vec<f32>], old: &[Vec<f32>]) {
        let mut worst = 1.0f32;
        assert_eq!(new.len(), old.len());
        for (text, (a, b)) in texts().iter().zip(new.iter().zip(old)) {
            let similarity = cosine(a, b);
            assert!(
                similarity >= 0.9999,
                "{what}: cosine {similarity} for {text:?}"
            );
            worst = worst.min(similarity);
        }
        eprintln!("{what}: lowest cosine to the original {worst}");
    }

    /// The same batch embeds to the same bits on any number of threads
    /// and whatever their timing: threads pull texts as they go, so the
    /// passes differ from run to run, and a text's vector must not depend
    /// on the other texts of its pass (sequences are concatenated, not
    /// padded, and activations are quantised row by row).
    #[test]
    fn a_batch_embeds_to_the_same_bits_on_any_number_of_threads() {
        let mut embedder = Embedder::load(&crate::testing::model_dir()).unwrap();
        // Several passes' worth: the texts, many times, in a shifting order.
        let texts = texts();
        let batch: Vec<&str> = (0..12)
            .flat_map(|round| texts.iter().cycle().skip(round).take(texts.len()))
            .map(String::as_str)
            .collect();
        embedder.set_threads(1);
        let alone = embedder.embed(&batch).unwrap();
        for threads in [2, 3, 8] {
            embedder.set_threads(threads);
            for _ in 0..3 {
                assert!(
                    embedder.embed(&batch).unwrap() == alone,
                    "{threads} threads embedded differently from one"
                );
            }
        }
    }

    #[test]
    fn the_chooser_tries_both_then_prefers_the_faster_and_explores() {
        let chooser = Chooser::default();
        assert!(!chooser.split());
        chooser.record(false, Duration::from_millis(10), 10);
        assert!(chooser.split());
        chooser.record(true, Duration::from_millis(5), 10);
        let picks: Vec<bool> = (0..32).map(|_| chooser.split()).collect();
        assert_eq!(
            picks.iter().filter(|split| !**split).count(),
            2,
            "{picks:?}"
        );
        // Two threads getting slow (a busy machine) turns the choice.
        for _ in 0..8 {
            chooser.record(true, Duration::from_millis(30), 10);
        }
        let picks: Vec<bool> = (0..32).map(|_| chooser.split()).collect();
        assert_eq!(picks.iter().filter(|split| **split).count(), 2, "{picks:?}");
    }

    #[test]
    fn embeddings_match_the_original_forward_pass() {
        let dir = crate::testing::model_dir();
        assert!(
            Embedder::files_present(&dir),
            "the embedding model is not in {}: `satchel doctor --fix` fetches it",
            dir.display()
        );
        let mut embedder = Embedder::load(&dir).unwrap();
        let old = reference_vectors(&embedder, &dir);
        let texts = texts();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        embedder.set_threads(2);
        assert_close("batch, 2 threads", &embedder.embed(&refs).unwrap(), &old);
        let split: Vec<Vec<f32>> = refs
            .iter()
            .map(|text| embedder.bert.embed_split(&embedder.tokenize(text).unwrap()))
            .collect();
        assert_close("one text on 2 threads", &split, &old);
        embedder.set_threads(1);
        assert_close("batch, 1 thread", &embedder.embed(&refs).unwrap(), &old);
        let one_by_one: Vec<Vec<f32>> = refs
            .iter()
            .map(|text| embedder.embed(&[text]).unwrap().remove(0))
            .collect();
        assert_close("one text per call", &one_by_one, &old);
        // A query runs split or whole as the chooser likes: the two must
        // give the same bits, or near-ties rank differently run to run.
        assert!(
            split == one_by_one,
            "one text on 2 threads and on 1 differ in their bits"
        );
        let queries: Vec<Vec<f32>> = refs
            .iter()
            .map(|text| embedder.embed_query(text).unwrap().to_vec())
            .collect();
        assert_close("embed_query", &queries, &old);
    }
}
