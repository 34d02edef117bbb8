//! Workspace trust: a project's `.agents/` (its agent.json, its tools and
//! its MCP servers) is someone else's code until the user says otherwise.
//! Until then nothing from it is read or run: not its settings (which could
//! loosen the policy), not its tools' `--schema`, not its servers.
//!
//! Trust is remembered by path and by a SHA-256 digest of what `.agents/`
//! holds, in `$XDG_DATA_HOME/satchel/trusted-projects.json`; any change
//! asks again. `satchel trust [PATH]`, the REPL's question at start-up,
//! `--trust-project` (or `SATCHEL_TRUST_PROJECT=1`) for one run, and
//! Satchel's own edits (a rule the user allowed for the project) grant it.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use sha2::{Digest, Sha256};

/// `.agents` inside a project.
const AGENTS_DIR: &str = ".agents";
/// Files hashed whole up to this size; larger ones by size and mtime.
const HASHED_WHOLE: u64 = 1024 * 1024;

/// Set by `--trust-project`: trusted for this run, not remembered.
static TRUSTED_FOR_RUN: AtomicBool = AtomicBool::new(false);

/// Where trust is remembered, set once by [`init`]; without it nothing is
/// remembered and only projects without `.agents/` are trusted.
static STORE: OnceLock<PathBuf> = OnceLock::new();

/// Sets where trust is remembered (the binary passes
/// `$XDG_DATA_HOME/satchel/trusted-projects.json`, see
/// [`HostPaths::trust_store`](crate::HostPaths::trust_store)) and installs
/// the trust gate every settings merge and tool scan asks
/// (`satchel_tools::config::set_gate`). Called once, before anything is
/// read; a second call keeps the first location.
pub fn init(store: Option<PathBuf>) {
    if let Some(path) = store {
        let _ = STORE.set(path);
    }
    satchel_tools::config::set_gate(admits);
}

/// Trusts the project for this process (`--trust-project`).
pub fn trust_for_this_run() {
    TRUSTED_FOR_RUN.store(true, Ordering::Relaxed);
}

/// What a project's `.agents/` would add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Additions {
    /// `.agents/agent.json` exists.
    pub settings: bool,
    /// `.agents/mcp.json` exists.
    pub mcp_servers: bool,
    /// Files in `.agents/tools`.
    pub tools: Vec<String>,
    /// The digest trust is remembered by.
    digest: String,
}

impl Additions {
    /// One line for a person.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.settings {
            parts.push("settings and permission rules (agent.json)".to_owned());
        }
        if self.mcp_servers {
            parts.push("MCP servers (mcp.json)".to_owned());
        }
        if !self.tools.is_empty() {
            parts.push(format!("tools: {}", self.tools.join(", ")));
        }
        if parts.is_empty() {
            "nothing yet".to_owned()
        } else {
            parts.join("; ")
        }
    }
}

/// What `root/.agents` holds, or `None` when there is no `.agents`.
pub fn additions(root: &Path) -> Option<Additions> {
    let dir = root.join(AGENTS_DIR);
    if !dir.is_dir() {
        return None;
    }
    let mut hasher = Sha256::new();
    let mut files = Vec::new();
    collect(&dir, &dir, 0, &mut files);
    files.sort();
    for relative in &files {
        hasher.update(relative.as_bytes());
        hasher.update([0]);
        hash_file(&dir.join(relative), &mut hasher);
    }
    let tools = files
        .iter()
        .filter_map(|f| f.strip_prefix("tools/"))
        .map(str::to_owned)
        .collect();
    let digest = hex(&hasher.finalize());
    Some(Additions {
        settings: dir.join("agent.json").is_file(),
        mcp_servers: dir.join("mcp.json").is_file(),
        tools,
        digest,
    })
}

/// Every file under `dir`, linked directories followed (eight levels at
/// most, so a link loop ends), as paths relative to `base`.
fn collect(base: &Path, dir: &Path, depth: usize, files: &mut Vec<String>) {
    const MAX_DEPTH: usize = 8;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        // `metadata` follows links: a linked directory's files count too.
        let Ok(metadata) = std::fs::metadata(&path) else {
            continue;
        };
        if metadata.is_dir() {
            if depth < MAX_DEPTH {
                collect(base, &path, depth + 1, files);
            }
        } else if let Ok(relative) = path.strip_prefix(base) {
            files.push(relative.to_string_lossy().into_owned());
        }
    }
}

fn hash_file(path: &Path, hasher: &mut Sha256) {
    if let Ok(target) = std::fs::read_link(path) {
        hasher.update(target.to_string_lossy().as_bytes());
    }
    let Ok(metadata) = std::fs::metadata(path) else {
        return;
    };
    if metadata.len() > HASHED_WHOLE {
        hasher.update(metadata.len().to_le_bytes());
        if let Ok(modified) = metadata.modified() {
            hasher.update(format!("{modified:?}").as_bytes());
        }
        return;
    }
    if let Ok(mut file) = std::fs::File::open(path) {
        let mut bytes = Vec::new();
        if file.read_to_end(&mut bytes).is_ok() {
            hasher.update(&bytes);
        }
    }
}

/// Whether what `root/.agents` holds may be loaded: there is none, the run
/// trusts it, or the user trusted exactly this content.
pub fn is_trusted(root: &Path) -> bool {
    if TRUSTED_FOR_RUN.load(Ordering::Relaxed) {
        return true;
    }
    let Some(additions) = additions(root) else {
        return true;
    };
    read_store().get(&key(root)) == Some(&additions.digest)
}

/// Remembers `root/.agents` as it is now as trusted; what it holds.
pub fn trust(root: &Path) -> anyhow::Result<Option<Additions>> {
    let Some(additions) = additions(root) else {
        return Ok(None);
    };
    let mut store = read_store();
    store.insert(key(root), additions.digest.clone());
    write_store(&store)?;
    Ok(Some(additions))
}

/// Forgets `root`; whether it was trusted.
pub fn forget(root: &Path) -> anyhow::Result<bool> {
    let mut store = read_store();
    let known = store.remove(&key(root)).is_some();
    write_store(&store)?;
    Ok(known)
}

/// The gate every reader of project files asks (`satchel_tools::config`):
/// a path inside some project's `.agents` is admitted only while that
/// project is trusted.
pub fn admits(path: &Path) -> bool {
    let Some(root) = path
        .ancestors()
        .find(|dir| dir.file_name().is_some_and(|name| name == AGENTS_DIR))
        .and_then(Path::parent)
    else {
        return true;
    };
    is_trusted(root)
}

/// Whether the user trusted `root/.agents` as it is now (not merely that
/// it is absent, nor `--trust-project`).
pub fn trusted_by_record(root: &Path) -> bool {
    additions(root).is_some_and(|a| read_store().get(&key(root)) == Some(&a.digest))
}

/// Config files of `root/.agents` are left out of `paths` unless trusted.
pub fn filter_project(root: &Path, paths: Vec<PathBuf>) -> Vec<PathBuf> {
    if is_trusted(root) {
        return paths;
    }
    let agents = root.join(AGENTS_DIR);
    paths
        .into_iter()
        .filter(|path| !path.starts_with(&agents))
        .collect()
}

/// The warning an untrusted project gets, once per process.
pub fn warn_if_untrusted(root: &Path) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if is_trusted(root) || WARNED.swap(true, Ordering::Relaxed) {
        return;
    }
    if let Some(additions) = additions(root) {
        tracing::warn!(
            "{} is not trusted, so nothing from it is loaded or run ({}). Review it, then run \
             `satchel trust` in {} (or pass --trust-project for one run).",
            root.join(AGENTS_DIR).display(),
            additions.describe(),
            root.display()
        );
    }
}

fn key(root: &Path) -> String {
    std::fs::canonicalize(root)
        .unwrap_or_else(|_| root.to_path_buf())
        .to_string_lossy()
        .into_owned()
}

fn store_path() -> Option<PathBuf> {
    STORE.get().cloned()
}

/// Lower-case hexadecimal.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn read_store() -> BTreeMap<String, String> {
    store_path()
        .and_then(|path| std::fs::read_to_string(path).ok())
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

fn write_store(store: &BTreeMap<String, String>) -> anyhow::Result<()> {
    let path = store_path().ok_or_else(|| anyhow::anyhow!("no data directory (set HOME)"))?;
    satchel_tools::config::write_atomically(
        &path,
        serde_json::to_string_pretty(store)?.as_bytes(),
    )?;
    Ok(())
}
