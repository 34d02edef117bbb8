//! Remembered search answers, so a repeated query costs nothing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Where search answers are kept between calls.
pub trait SearchCache: Send + Sync {
    /// The answer stored under `key`, if it has not expired.
    fn get(&self, key: &str) -> Option<Value>;
    /// Stores an answer for `ttl`; a zero `ttl` stores nothing.
    fn put(&self, key: &str, answer: Value, ttl: Duration);
}

/// A cache in this process's memory, bounded in entries.
#[derive(Debug, Default)]
pub struct MemoryCache {
    entries: Mutex<HashMap<String, (Instant, Value)>>,
}

/// Entries kept at most; the oldest go first.
const MAX_ENTRIES: usize = 1000;

impl SearchCache for MemoryCache {
    fn get(&self, key: &str) -> Option<Value> {
        let entries = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        entries
            .get(key)
            .filter(|(expires, _)| *expires > Instant::now())
            .map(|(_, answer)| answer.clone())
    }

    fn put(&self, key: &str, answer: Value, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        entries.retain(|_, (expires, _)| *expires > now);
        if entries.len() >= MAX_ENTRIES
            && let Some(oldest) = entries
                .iter()
                .min_by_key(|(_, (expires, _))| *expires)
                .map(|(k, _)| k.clone())
        {
            entries.remove(&oldest);
        }
        entries.insert(key.to_owned(), (now + ttl, answer));
    }
}
