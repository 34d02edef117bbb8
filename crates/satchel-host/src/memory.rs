//! [`LazyMemory`]: the memory over the host's database, opened on first
//! use and shared by every conversation, the `memory` tool and the
//! commands, so one process loads the model and builds the vector index at
//! most once.

use std::sync::Arc;

use async_trait::async_trait;
use satchel_builtins::memory::MemoryHandle;
use satchel_memory::{
    Memory, MemoryConfig, MemoryOptions, ModelFetcher, ModelSource, Summarizer, spawn_maintenance,
};
use satchel_store::SystemClock;

use crate::store::LazyStore;

/// The memory over the project's database, opened on first use and shared
/// by the `memory` commands and the `memory` tool, so one process loads
/// the model and builds the vector index at most once. A command that
/// never touches memory opens nothing.
pub struct LazyMemory {
    store: Arc<LazyStore>,
    /// Replaced by `reconfigure` when agent.json changes.
    config: std::sync::RwLock<MemoryConfig>,
    summarizer: Option<Arc<dyn Summarizer>>,
    fetcher: Option<Arc<dyn ModelFetcher>>,
    cell: tokio::sync::OnceCell<Result<Arc<Memory>, String>>,
    /// Other namespaces' memories (conversations that have their own),
    /// made from the open memory on first use and kept.
    namespaces: std::sync::Mutex<std::collections::HashMap<String, Arc<Memory>>>,
    /// Embedding memories stored without one, started when memory opens.
    backfill: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Embeds, in the background, memories stored before the model was there.
fn spawn_backfill(memory: &Arc<Memory>) -> tokio::task::JoinHandle<()> {
    let memory = Arc::clone(memory);
    tokio::spawn(async move {
        match memory.backfill_embeddings(64).await {
            Ok(0) => {}
            Ok(count) => tracing::info!("embedded {count} memories stored without an embedding"),
            Err(error) => tracing::warn!("embedding stored memories failed: {error}"),
        }
    })
}

impl LazyMemory {
    /// Memory with `config` over `store` (the model loads on first use).
    pub fn new(
        store: Arc<LazyStore>,
        config: MemoryConfig,
        summarizer: Option<Arc<dyn Summarizer>>,
        fetcher: Option<Arc<dyn ModelFetcher>>,
    ) -> LazyMemory {
        LazyMemory {
            store,
            config: std::sync::RwLock::new(config),
            summarizer,
            fetcher,
            cell: tokio::sync::OnceCell::new(),
            namespaces: std::sync::Mutex::default(),
            backfill: std::sync::Mutex::new(None),
        }
    }

    /// The `memory` section, with the model directory resolved.
    pub fn config(&self) -> MemoryConfig {
        self.config
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Takes a new `memory` section (agent.json changed): the open memory,
    /// if any, uses it from its next operation. Returns what cannot change
    /// without a restart: the model, loaded once per process.
    pub fn reconfigure(&self, config: MemoryConfig) -> Vec<String> {
        let mut warnings = Vec::new();
        if let Some(Ok(memory)) = self.cell.get() {
            if config.model_dir != self.config().model_dir {
                warnings.push(
                    "memory.modelDir: the model is loaded once; the new directory is used when satchel restarts"
                        .to_owned(),
                );
            }
            memory.reconfigure(config.clone());
        }
        for (namespace, memory) in self
            .namespaces
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
        {
            memory.reconfigure(MemoryConfig {
                namespace: namespace.clone(),
                ..config.clone()
            });
        }
        *self
            .config
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = config;
        warnings
    }

    /// The open memory, or why the database cannot be opened.
    ///
    /// On first use, sessions whose time has passed are ended and expired
    /// memories purged, then again every `purgeIntervalMinutes` for as long
    /// as the process runs (which matters for `mcp serve`).
    pub async fn get(&self) -> Result<Arc<Memory>, String> {
        self.cell
            .get_or_init(|| async {
                let store = self.store.get().await?.clone();
                let config = self.config();
                // Opening memory fetches nothing: the first store or recall
                // that embeds does (a `code` call opens memory only for its
                // session).
                let model = match (&config.model_dir, &self.fetcher) {
                    (Some(dir), Some(fetcher)) if config.fetch_model => ModelSource::Fetch {
                        dir: dir.clone(),
                        fetcher: Arc::clone(fetcher),
                    },
                    (Some(dir), _) => ModelSource::Dir(dir.clone()),
                    (None, _) => ModelSource::None,
                };
                let memory = Arc::new(Memory::new(
                    Arc::new(store),
                    config,
                    MemoryOptions {
                        clock: Arc::new(SystemClock),
                        model,
                        summarizer: self.summarizer.clone(),
                    },
                ));
                if let Err(error) = memory.maintain().await {
                    tracing::warn!("memory maintenance: {error}");
                }
                drop(spawn_maintenance(&memory));
                *self
                    .backfill
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Some(spawn_backfill(&memory));
                Ok(memory)
            })
            .await
            .clone()
    }
}

impl LazyMemory {
    /// The memories of `namespace` (`None`: the configured one), opening
    /// memory first if needed. Each other namespace is made once and
    /// keeps its own maintenance (sessions divided, expired memories
    /// purged) for as long as the process runs.
    pub async fn get_in(&self, namespace: Option<&str>) -> Result<Arc<Memory>, String> {
        let memory = self.get().await?;
        let Some(namespace) = namespace.filter(|ns| *ns != memory.config().namespace) else {
            return Ok(memory);
        };
        let (namespaced, new) = {
            let mut namespaces = self
                .namespaces
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match namespaces.get(namespace) {
                Some(namespaced) => (namespaced.clone(), false),
                None => {
                    let namespaced = Arc::new(memory.in_namespace(namespace));
                    namespaces.insert(namespace.to_owned(), namespaced.clone());
                    (namespaced, true)
                }
            }
        };
        if new {
            if let Err(error) = namespaced.maintain().await {
                tracing::warn!("memory maintenance ({namespace}): {error}");
            }
            drop(spawn_maintenance(&namespaced));
        }
        Ok(namespaced)
    }

    /// Waits for the background backfill started at open, if any (a
    /// one-shot command finishes it before it exits).
    pub async fn finish_backfill(&self) {
        let handle = self
            .backfill
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            let _ = handle.await;
        }
    }
}

#[async_trait]
impl MemoryHandle for LazyMemory {
    async fn memory(&self) -> Result<Arc<Memory>, String> {
        self.get().await
    }

    async fn memory_in(&self, namespace: Option<&str>) -> Result<Arc<Memory>, String> {
        self.get_in(namespace).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts what it is asked to fetch, and fetches nothing.
    #[derive(Debug, Default)]
    struct CountingFetcher {
        asked: std::sync::atomic::AtomicUsize,
    }

    #[async_trait]
    impl ModelFetcher for CountingFetcher {
        async fn fetch(&self, _dir: &std::path::Path) -> Result<(), String> {
            self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err("offline in this test".into())
        }
    }

    /// Opening memory, its sessions (what a `code` call asks for), another
    /// namespace and the backfill fetch nothing; the first store does,
    /// once per process.
    #[tokio::test]
    async fn only_a_store_or_recall_fetches_the_missing_model() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(LazyStore::new(
            Some(dir.path().join("satchel.db")),
            satchel_store::Redactor::default(),
        ));
        let config = MemoryConfig {
            model_dir: Some(dir.path().join("no-model")),
            ..MemoryConfig::default()
        };
        let fetcher = Arc::new(CountingFetcher::default());
        let asked = || fetcher.asked.load(std::sync::atomic::Ordering::SeqCst);
        let lazy = LazyMemory::new(store, config, None, Some(fetcher.clone()));

        let memory = lazy.get_in(None).await.unwrap();
        memory
            .current_session(Some("conversation-1"))
            .await
            .unwrap();
        lazy.get_in(Some("someone-else")).await.unwrap();
        lazy.finish_backfill().await;
        assert_eq!(asked(), 0, "opening memory fetched the model");

        let request = satchel_memory::StoreRequest::new(
            satchel_memory::MemoryLayer::Long,
            "The user drinks black tea",
        );
        memory.store(request.clone()).await.unwrap();
        assert_eq!(asked(), 1, "the first store did not fetch the model");
        memory
            .recall(satchel_memory::RecallQuery::new("tea"))
            .await
            .unwrap();
        assert_eq!(asked(), 1, "a failed fetch is tried once per process");
    }

    #[tokio::test]
    async fn a_new_memory_section_reaches_the_open_memory() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(LazyStore::new(
            Some(dir.path().join("satchel.db")),
            satchel_store::Redactor::default(),
        ));
        let config = MemoryConfig {
            model_dir: Some(dir.path().join("no-model")),
            ..MemoryConfig::default()
        };
        let lazy = LazyMemory::new(store, config.clone(), None, None);

        // Before the memory is opened only the section is replaced.
        let smaller = MemoryConfig {
            max_content_chars: 300,
            ..config.clone()
        };
        assert!(lazy.reconfigure(smaller).is_empty());
        let memory = lazy.get().await.unwrap();
        assert_eq!(memory.config().max_content_chars, 300);

        let moved = MemoryConfig {
            max_content_chars: 200,
            model_dir: Some(dir.path().join("elsewhere")),
            ..config
        };
        let warnings = lazy.reconfigure(moved);
        assert_eq!(memory.config().max_content_chars, 200);
        assert!(
            warnings.len() == 1 && warnings[0].contains("when satchel restarts"),
            "{warnings:?}"
        );
    }
}
