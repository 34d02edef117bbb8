//! Sentence embeddings: the [`Embedder`] (a WordPiece tokenizer from
//! `tokenizer.json` and a BERT encoder from `model.safetensors`), loaded
//! once per model directory and shared ([`Embedder::shared`]).
//!
//! Everything runs in-process on the CPU and offline: the three model
//! files must already be on disk (`scripts/fetch-memory-model.sh`). What
//! does not live here: deciding when to embed (recall and storing do) or
//! where the model directory is (configuration does).

mod bert;

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use tokenizers::{Tokenizer, TruncationParams};

use crate::MemoryError;
use bert::{Bert, BertConfig};

/// The files a model directory must hold.
pub const MODEL_FILES: [&str; 3] = ["model.safetensors", "tokenizer.json", "config.json"];

/// Tokens an embedded text is cut to (the model was trained on 256).
pub const MAX_TOKENS: usize = 256;

/// Query embeddings kept for repeated queries.
const QUERY_CACHE_ENTRIES: usize = 256;

/// A loaded sentence-embedding model; cheap to share between threads.
pub struct Embedder {
    dir: PathBuf,
    tokenizer: Tokenizer,
    bert: Bert,
    threads: usize,
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

    /// Embeds texts (unit vectors, one per text). Blocking and CPU-bound:
    /// call from a blocking thread. Long batches are split over threads.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, MemoryError> {
        let mut sequences: Vec<(usize, Vec<u32>)> = texts
            .iter()
            .enumerate()
            .map(|(index, text)| Ok((index, self.tokenize(text)?)))
            .collect::<Result<_, MemoryError>>()?;
        // Similar lengths together keep the attention loops short and the
        // thread shares balanced.
        sequences.sort_by_key(|(_, ids)| ids.len());
        let total: usize = sequences.iter().map(|(_, ids)| ids.len()).sum();
        let threads = self.threads.min(sequences.len()).max(1);
        let mut out = vec![Vec::new(); texts.len()];
        if threads == 1 || total < 64 {
            self.embed_chunk(&sequences, &mut out);
            return Ok(out);
        }
        // Deal sequences round-robin so every thread gets a similar load.
        let mut shares: Vec<Vec<(usize, Vec<u32>)>> = vec![Vec::new(); threads];
        for (position, item) in sequences.into_iter().enumerate() {
            shares[position % threads].push(item);
        }
        let results: Vec<Vec<(usize, Vec<f32>)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = shares
                .iter()
                .map(|share| {
                    scope.spawn(move || {
                        let mut local = Vec::with_capacity(share.len());
                        for chunk in share.chunks(64) {
                            let ids: Vec<Vec<u32>> =
                                chunk.iter().map(|(_, ids)| ids.clone()).collect();
                            let vectors = self.bert.embed(&ids);
                            local.extend(chunk.iter().map(|(index, _)| *index).zip(vectors));
                        }
                        local
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().unwrap_or_default())
                .collect()
        });
        for (index, vector) in results.into_iter().flatten() {
            out[index] = vector;
        }
        if out.iter().any(Vec::is_empty) {
            return Err(MemoryError::Model {
                path: self.dir.clone(),
                reason: "an embedding thread failed".into(),
            });
        }
        Ok(out)
    }

    fn embed_chunk(&self, sequences: &[(usize, Vec<u32>)], out: &mut [Vec<f32>]) {
        for chunk in sequences.chunks(64) {
            let ids: Vec<Vec<u32>> = chunk.iter().map(|(_, ids)| ids.clone()).collect();
            for ((index, _), vector) in chunk.iter().zip(self.bert.embed(&ids)) {
                out[*index] = vector;
            }
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
        let ids = self.tokenize(&key)?;
        let vector = Arc::new(self.bert.embed(&[ids]).pop().unwrap_or_default());
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
