//! Finding external tools: scan the three directories, probe each
//! executable's `--schema` concurrently, keep the highest-precedence
//! working tool of each name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use satchel_exec::{ExecRequest, OutputConfig, RunnerConfig, SpillConfig};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::cache::{FileKey, ProbeResult, SpecCache};
use super::naming::tool_name_for_file;
use super::schema;
use super::tool::ExternalTool;
use crate::{ExternalConfig, ToolLevel};

/// The directories searched, each optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolDirs {
    /// The project's `.agents/tools/`.
    pub project: Option<PathBuf>,
    /// The user's `$XDG_CONFIG_HOME/satchel/tools/`.
    pub user: Option<PathBuf>,
    /// The system's `$SATCHEL_LIBEXEC_DIR`.
    pub system: Option<PathBuf>,
}

impl ToolDirs {
    /// The directories with their levels, highest precedence first.
    pub fn levels(&self) -> impl Iterator<Item = (ToolLevel, &Path)> {
        [
            (ToolLevel::Project, &self.project),
            (ToolLevel::User, &self.user),
            (ToolLevel::System, &self.system),
        ]
        .into_iter()
        .filter_map(|(level, dir)| dir.as_deref().map(|dir| (level, dir)))
        // Asked at every scan: a project that became untrusted since
        // start-up (its `.agents/` appeared or changed) adds nothing.
        .filter(|(_, dir)| crate::config::admitted(dir))
    }
}

/// What discovery found.
#[derive(Default)]
pub struct Discovery {
    /// Working tools, one per name, sorted by name.
    pub tools: Vec<ExternalTool>,
    /// Entries that did not become tools, and why.
    pub skipped: Vec<Skipped>,
}

/// A directory entry that is not a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The entry.
    pub path: PathBuf,
    /// The directory level it is in.
    pub level: ToolLevel,
    /// Why it was skipped.
    pub reason: String,
    /// True when it looks like a tool that is broken (worth a warning), false
    /// when it is simply not a tool (a directory, a README).
    pub broken: bool,
}

struct Candidate {
    name: String,
    level: ToolLevel,
    path: PathBuf,
    key: FileKey,
}

/// Scans `dirs` and probes every executable's `--schema`, at most
/// `config.probe_concurrency` at a time, each within `schema_timeout`.
/// Results are looked up in and written to `cache`.
pub async fn discover(dirs: &ToolDirs, cache: &SpecCache, config: &ExternalConfig) -> Discovery {
    let mut discovery = Discovery::default();
    let mut candidates = Vec::new();
    for (level, dir) in dirs.levels() {
        scan(level, dir, &mut candidates, &mut discovery.skipped);
    }
    cache.retain(
        &candidates
            .iter()
            .map(|c| c.path.clone())
            .collect::<Vec<_>>(),
    );

    let semaphore = Arc::new(Semaphore::new(config.probe_concurrency));
    let mut probes = tokio::task::JoinSet::new();
    for (index, candidate) in candidates.iter().enumerate() {
        if let Some(result) = cache.get(&candidate.path, candidate.key) {
            probes.spawn(async move { (index, result) });
            continue;
        }
        let (path, semaphore, config) = (candidate.path.clone(), semaphore.clone(), config.clone());
        probes.spawn(async move {
            let _permit = semaphore.acquire_owned().await;
            (index, probe(&path, &config).await)
        });
    }
    let mut results: Vec<Option<ProbeResult>> = vec![None; candidates.len()];
    while let Some(joined) = probes.join_next().await {
        if let Ok((index, result)) = joined {
            results[index] = Some(result);
        }
    }

    // Highest precedence first: candidates are in level order already.
    let mut chosen: BTreeMap<String, ExternalTool> = BTreeMap::new();
    for (candidate, result) in candidates.into_iter().zip(results) {
        let result = result.unwrap_or_else(|| ProbeResult::Failed("the probe task failed".into()));
        cache.put(&candidate.path, candidate.key, result.clone());
        let parsed = match result {
            ProbeResult::Document(text) => schema::parse(&candidate.name, &text),
            ProbeResult::Failed(reason) => Err(reason),
        };
        let skip = |reason: String, broken: bool| Skipped {
            path: candidate.path.clone(),
            level: candidate.level,
            reason,
            broken,
        };
        match parsed {
            Err(reason) => discovery.skipped.push(skip(reason, true)),
            Ok(_) if chosen.contains_key(&candidate.name) => {
                let winner = &chosen[&candidate.name];
                let reason = format!(
                    "shadowed by the {} tool `{}`",
                    winner.level(),
                    winner.path().display()
                );
                discovery.skipped.push(skip(reason, false));
            }
            Ok(parsed) => {
                match ExternalTool::new(
                    parsed.spec,
                    candidate.path.clone(),
                    candidate.level,
                    parsed.timeout,
                ) {
                    Ok(tool) => {
                        chosen.insert(candidate.name, tool);
                    }
                    Err(reason) => discovery.skipped.push(skip(reason, true)),
                }
            }
        }
    }
    discovery.tools = chosen.into_values().collect();
    for skipped in discovery.skipped.iter().filter(|s| s.broken) {
        tracing::debug!(path = %skipped.path.display(), "skipping external tool: {}", skipped.reason);
    }
    discovery
}

/// Lists the executables of one directory as candidates.
fn scan(level: ToolLevel, dir: &Path, candidates: &mut Vec<Candidate>, skipped: &mut Vec<Skipped>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return,
        Err(error) => {
            tracing::warn!(dir = %dir.display(), %error, "cannot read tools directory");
            return;
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .collect();
    paths.sort();
    for path in paths {
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if file_name.starts_with('.') {
            continue;
        }
        let mut skip = |reason: String, broken: bool| {
            skipped.push(Skipped {
                path: path.clone(),
                level,
                reason,
                broken,
            })
        };
        // Follows symlinks: a link to an executable is a tool.
        let meta = match std::fs::metadata(&path) {
            Ok(meta) => meta,
            Err(error) => {
                skip(format!("cannot read it: {error}"), true);
                continue;
            }
        };
        if meta.is_dir() {
            skip("a directory, not an executable".into(), false);
            continue;
        }
        if !is_executable(&path) {
            skip(
                "not executable (`chmod +x` it to make it a tool)".into(),
                false,
            );
            continue;
        }
        match tool_name_for_file(&file_name) {
            Ok(name) => candidates.push(Candidate {
                name,
                level,
                path,
                key: FileKey::of(&meta),
            }),
            Err(reason) => skip(reason, true),
        }
    }
}

fn is_executable(path: &Path) -> bool {
    rustix::fs::access(path, rustix::fs::Access::EXEC_OK).is_ok()
}

/// Runs `TOOL --schema` within the limits and returns what it printed.
async fn probe(path: &Path, config: &ExternalConfig) -> ProbeResult {
    let runner = RunnerConfig {
        stdout: OutputConfig {
            limit_bytes: config.max_schema_bytes,
        },
        kill_grace: std::time::Duration::from_millis(200),
        strip_ansi: false,
        collapse_carriage_returns: false,
        spill: SpillConfig {
            dir: None,
            ..SpillConfig::default()
        },
        ..RunnerConfig::default()
    };
    let request = ExecRequest {
        program: path.as_os_str().to_owned(),
        args: vec!["--schema".into()],
        stdin: None,
        working_dir: path
            .parent()
            .map_or_else(|| PathBuf::from("/"), Path::to_path_buf),
        env: Vec::new(),
        timeout: config.schema_timeout,
        clear_env: false,
        // Describing itself needs no writes (but to its TMPDIR) and no
        // network: a tool that tries either at discovery is stopped (where
        // the system can sandbox at all).
        sandbox: satchel_exec::sandbox::available()
            .is_ok()
            .then(|| satchel_exec::SandboxSpec {
                private_tmp: crate::sandbox::private_tmp(),
                ..satchel_exec::SandboxSpec::new(Vec::new())
            }),
    };
    let outcome = match satchel_exec::run(&request, &runner, &CancellationToken::new()).await {
        Ok(outcome) => outcome,
        Err(error) => return ProbeResult::Failed(format!("`--schema` could not run: {error}")),
    };
    let stderr_head = || super::tool::stderr_head(&outcome.stderr.text);
    if outcome.timed_out {
        return ProbeResult::Failed(format!(
            "`--schema` did not answer within {} ms{}",
            config.schema_timeout.as_millis(),
            stderr_head()
        ));
    }
    if outcome.exit.shell_code() != Some(0) {
        let code = outcome
            .exit
            .shell_code()
            .map_or_else(|| "unknown".into(), |c| c.to_string());
        return ProbeResult::Failed(format!(
            "`--schema` exited with status {code}{}",
            stderr_head()
        ));
    }
    if outcome.stdout.truncated() {
        return ProbeResult::Failed(format!(
            "`--schema` printed {} bytes, more than the limit of {}",
            outcome.stdout.total_bytes, config.max_schema_bytes
        ));
    }
    ProbeResult::Document(outcome.stdout.text)
}
