//! [`LiveRegistry`]: the built-in tools, the external tools on disk and
//! tools added at run time (e.g. imported from MCP servers), kept current
//! while a long-running process (REPL, MCP server) runs.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, RwLock};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::external::{Discovery, ExternalTool, Skipped, SpecCache, ToolDirs, discover};
use crate::{ExternalConfig, Registry, RegistryError, Tool};

/// A registry snapshot, what it was built from, and what did not make it.
struct Snapshot {
    registry: Arc<Registry>,
    /// External tools as discovered, kept so extras can change without a rescan.
    externals: Vec<Arc<ExternalTool>>,
    /// What discovery skipped.
    discovery_skipped: Vec<Skipped>,
    /// Everything skipped building `registry` (discovery's and shadowed externals).
    skipped: Arc<Vec<Skipped>>,
    /// Tools added at run time, by group.
    extras: BTreeMap<String, Vec<Arc<dyn Tool>>>,
    /// Extra tools that were not registered, and why.
    rejected: Arc<Vec<RejectedTool>>,
    fingerprint: u64,
}

/// The tools available now; swapped whole when the tool directories or the
/// extra tools change.
///
/// Calls take a snapshot (`current()`) and keep it for their duration, so
/// a refresh never changes a tool under a running call.
pub struct LiveRegistry {
    /// Built once and shared by every snapshot, so their state (caches,
    /// cool-downs, running jobs) survives a refresh.
    builtins: Vec<Arc<dyn Tool>>,
    dirs: ToolDirs,
    cache: SpecCache,
    config: ExternalConfig,
    snapshot: RwLock<Snapshot>,
    generation: watch::Sender<u64>,
}

/// An extra tool (see [`LiveRegistry::set_extra_tools`]) that was not registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedTool {
    /// The group it was offered in.
    pub group: String,
    /// Its name.
    pub name: String,
    /// Why it is not in the registry (a name taken, an invalid schema...).
    pub reason: String,
}

/// What a refresh changed, by tool name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RefreshReport {
    /// Tools that appeared.
    pub added: Vec<String>,
    /// Tools that disappeared.
    pub removed: Vec<String>,
    /// Tools whose spec changed.
    pub changed: Vec<String>,
}

impl RefreshReport {
    /// True when the set of tools or a spec changed.
    pub fn is_change(&self) -> bool {
        !(self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty())
    }
}

impl LiveRegistry {
    /// Discovers the external tools in `dirs` and builds the first snapshot
    /// of them alone (no built-in tools).
    pub async fn load(
        dirs: ToolDirs,
        cache: SpecCache,
        config: ExternalConfig,
    ) -> Result<LiveRegistry, RegistryError> {
        LiveRegistry::load_with(Vec::new(), dirs, cache, config).await
    }

    /// Like [`LiveRegistry::load`], with the given built-in tools (see
    /// [`Registry::register_builtin`]).
    pub async fn load_with(
        builtins: Vec<Arc<dyn Tool>>,
        dirs: ToolDirs,
        cache: SpecCache,
        config: ExternalConfig,
    ) -> Result<LiveRegistry, RegistryError> {
        let fingerprint = fingerprint(&dirs);
        let Discovery { tools, skipped } = discover(&dirs, &cache, &config).await;
        save_cache(&cache);
        let externals = tools.into_iter().map(Arc::new).collect();
        let snapshot =
            Snapshot::build(&builtins, externals, skipped, BTreeMap::new(), fingerprint)?;
        Ok(LiveRegistry {
            builtins,
            dirs,
            cache,
            config,
            snapshot: RwLock::new(snapshot),
            generation: watch::Sender::new(0),
        })
    }

    /// The tools as of now.
    pub fn current(&self) -> Arc<Registry> {
        self.snapshot
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .registry
            .clone()
    }

    /// Directory entries that did not become tools, and why.
    pub fn skipped(&self) -> Arc<Vec<Skipped>> {
        self.snapshot
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .skipped
            .clone()
    }

    /// Extra tools that were offered but not registered, and why.
    pub fn rejected(&self) -> Arc<Vec<RejectedTool>> {
        self.snapshot
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .rejected
            .clone()
    }

    /// Replaces the extra tools of `group` (an empty list removes the
    /// group) and rebuilds the registry without rescanning the directories.
    ///
    /// Built-in and external tools keep their names: an extra tool whose
    /// name is taken, or that cannot be registered, lands in
    /// [`rejected`](Self::rejected). Groups are added in name order, so
    /// between groups the first in that order wins. Subscribers are told
    /// when the set of tools changes.
    pub fn set_extra_tools(
        &self,
        group: &str,
        tools: Vec<Arc<dyn Tool>>,
    ) -> Result<RefreshReport, RegistryError> {
        let report = {
            let mut snapshot = self
                .snapshot
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let mut extras = snapshot.extras.clone();
            if tools.is_empty() {
                extras.remove(group);
            } else {
                extras.insert(group.to_owned(), tools);
            }
            let next = Snapshot::build(
                &self.builtins,
                snapshot.externals.clone(),
                snapshot.discovery_skipped.clone(),
                extras,
                snapshot.fingerprint,
            )?;
            let report = compare(&snapshot.registry, &next.registry);
            *snapshot = next;
            report
        };
        if report.is_change() {
            self.generation.send_modify(|generation| *generation += 1);
        }
        Ok(report)
    }

    /// Changes each time the set of tools changes (for MCP's
    /// `tools/list_changed`, a REPL's notice...).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Re-reads the directories. With `reprobe`, cached `--schema` answers
    /// are dropped first so every tool is asked again.
    pub async fn refresh(&self, reprobe: bool) -> Result<RefreshReport, RegistryError> {
        if reprobe {
            self.cache.clear();
        }
        let fingerprint = fingerprint(&self.dirs);
        let Discovery { tools, skipped } = discover(&self.dirs, &self.cache, &self.config).await;
        save_cache(&self.cache);
        let externals: Vec<Arc<ExternalTool>> = tools.into_iter().map(Arc::new).collect();
        let report = {
            let mut snapshot = self
                .snapshot
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let next = Snapshot::build(
                &self.builtins,
                externals,
                skipped,
                snapshot.extras.clone(),
                fingerprint,
            )?;
            let report = compare(&snapshot.registry, &next.registry);
            *snapshot = next;
            report
        };
        if report.is_change() {
            self.generation.send_modify(|generation| *generation += 1);
        }
        Ok(report)
    }

    /// Polls the directories every `watch_interval` and refreshes when an
    /// entry appears, disappears or changes. The task ends when the last
    /// other `Arc` to the registry is dropped.
    pub fn spawn_watcher(self: &Arc<Self>) -> JoinHandle<()> {
        let weak = Arc::downgrade(self);
        let interval = self.config.watch_interval;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                let Some(live) = weak.upgrade() else { return };
                let known = live
                    .snapshot
                    .read()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .fingerprint;
                if fingerprint(&live.dirs) == known {
                    continue;
                }
                match live.refresh(false).await {
                    Ok(report) if report.is_change() => {
                        tracing::info!(?report, "external tools changed")
                    }
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "refreshing external tools failed"),
                }
            }
        })
    }
}

impl Snapshot {
    /// Built-ins first; an external tool never replaces a built-in one, and
    /// an extra tool never replaces either.
    fn build(
        builtins: &[Arc<dyn Tool>],
        externals: Vec<Arc<ExternalTool>>,
        discovery_skipped: Vec<Skipped>,
        extras: BTreeMap<String, Vec<Arc<dyn Tool>>>,
        fingerprint: u64,
    ) -> Result<Snapshot, RegistryError> {
        let mut registry = Registry::new();
        for tool in builtins {
            registry.register_builtin(tool.clone())?;
        }
        let mut skipped = discovery_skipped.clone();
        for tool in &externals {
            if registry.get(&tool.spec().name).is_some() {
                skipped.push(Skipped {
                    path: tool.path().to_path_buf(),
                    level: tool.level(),
                    reason: format!("shadowed by the built-in tool `{}`", tool.spec().name),
                    broken: false,
                });
                continue;
            }
            registry.register_arc(tool.clone())?;
        }
        for entry in discovery_skipped.iter().filter(|entry| entry.broken) {
            let name = entry
                .path
                .file_name()
                .and_then(|name| name.to_str())
                .and_then(|name| crate::external::tool_name_for_file(name).ok());
            if let Some(name) = name {
                registry.mark_unavailable(name, entry.reason.clone());
            }
        }
        let mut rejected = Vec::new();
        for (group, tools) in &extras {
            for tool in tools {
                let name = tool.spec().name.clone();
                let reason = match registry.get(&name) {
                    Some(holder) => Some(format!("the name is taken by {}", holder.source())),
                    None => registry
                        .register_arc(tool.clone())
                        .err()
                        .map(|error| error.to_string()),
                };
                if let Some(reason) = reason {
                    tracing::debug!(%group, %name, %reason, "extra tool not registered");
                    registry.mark_unavailable(name.clone(), reason.clone());
                    rejected.push(RejectedTool {
                        group: group.clone(),
                        name,
                        reason,
                    });
                }
            }
        }
        Ok(Snapshot {
            registry: Arc::new(registry),
            externals,
            discovery_skipped,
            skipped: Arc::new(skipped),
            extras,
            rejected: Arc::new(rejected),
            fingerprint,
        })
    }
}

fn save_cache(cache: &SpecCache) {
    if let Err(error) = cache.save() {
        tracing::debug!(%error, "cannot save the tool spec cache");
    }
}

fn compare(old: &Registry, new: &Registry) -> RefreshReport {
    let specs = |registry: &Registry| -> BTreeMap<String, String> {
        registry
            .specs()
            .map(|spec| {
                (
                    spec.name.clone(),
                    serde_json::to_string(spec).unwrap_or_default(),
                )
            })
            .collect()
    };
    let (old, new) = (specs(old), specs(new));
    RefreshReport {
        added: new
            .keys()
            .filter(|name| !old.contains_key(*name))
            .cloned()
            .collect(),
        removed: old
            .keys()
            .filter(|name| !new.contains_key(*name))
            .cloned()
            .collect(),
        changed: new
            .iter()
            .filter(|(name, spec)| old.get(*name).is_some_and(|o| o != *spec))
            .map(|(n, _)| n.clone())
            .collect(),
    }
}

/// A hash of every entry's name, size, mtime and mode in the directories:
/// cheap to compute, changes whenever a tool could have.
fn fingerprint(dirs: &ToolDirs) -> u64 {
    let mut hasher = DefaultHasher::new();
    for (level, dir) in dirs.levels() {
        level.hash(&mut hasher);
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut rows: Vec<(String, u64, i64, i64, u32)> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let meta = std::fs::metadata(entry.path()).ok()?;
                Some((
                    entry.file_name().to_string_lossy().into_owned(),
                    meta.size(),
                    meta.mtime(),
                    meta.mtime_nsec(),
                    meta.mode(),
                ))
            })
            .collect();
        rows.sort();
        rows.hash(&mut hasher);
    }
    hasher.finish()
}
