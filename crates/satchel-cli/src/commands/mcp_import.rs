//! `satchel mcp import`: the MCP servers other clients were given, shown
//! and added to mcp.json (see `satchel_mcp::client::import`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use satchel_host::Host;
use satchel_mcp::client::config::PROJECT_MCP_CONFIG;
use satchel_mcp::client::import::{self, Found};

use crate::cli::ImportArgs;

pub(crate) fn run(args: ImportArgs, project: &Host) -> anyhow::Result<ExitCode> {
    let home = project
        .env
        .get("HOME")
        .map(PathBuf::from)
        .context("HOME is not set: cannot find other clients' configurations")?;
    let target = if args.to_project {
        project.root.join(PROJECT_MCP_CONFIG)
    } else {
        project
            .paths
            .config
            .as_ref()
            .map(|dir| dir.join("mcp.json"))
            .context("no user config directory (set XDG_CONFIG_HOME or HOME)")?
    };
    let env = &project.env;
    let mut found: Vec<Found> = Vec::new();
    let mut problems = Vec::new();
    let mut read_files = Vec::new();
    for candidate in import::candidates(&project.root, &home, &|name| env.get(name).cloned()) {
        if !args.from.is_empty() && !args.from.contains(&candidate.source) {
            continue;
        }
        let text = match read_other(&candidate.path) {
            Ok(Some(text)) => text,
            Ok(None) => continue,
            Err(error) => {
                problems.push(format!("{}: {error}", candidate.path.display()));
                continue;
            }
        };
        match import::read(&candidate, &text, &project.root) {
            Ok(servers) => {
                read_files.push((candidate.source, candidate.path.clone(), servers.len()));
                found.extend(servers);
            }
            Err(error) => problems.push(format!("{}: {error}", candidate.path.display())),
        }
    }
    let existing = match std::fs::read_to_string(&target) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(error) => return Err(error).context(format!("cannot read {}", target.display())),
    };
    let merged = import::merge(&existing, &found)
        .map_err(|e| anyhow::anyhow!("{}: {e}", target.display()))?;
    let write = !args.dry_run && !merged.added.is_empty();
    if write {
        write_atomically(&target, &merged.text)?;
    }

    let mut stdout = std::io::stdout().lock();
    if args.json {
        let report = serde_json::json!({
            "target": target,
            "written": write,
            "found": found,
            "added": merged.added,
            "skipped": merged.skipped.iter().map(|(name, why)| serde_json::json!({"name": name, "reason": why})).collect::<Vec<_>>(),
            "problems": problems,
        });
        writeln!(stdout, "{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if read_files.is_empty() && problems.is_empty() {
        writeln!(
            stdout,
            "no MCP servers found: none of Claude Desktop, Claude Code, Cursor, VS Code or Codex has a configuration here"
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    for (source, path, count) in &read_files {
        writeln!(
            stdout,
            "{}: {} ({count} servers)",
            source.name(),
            path.display()
        )?;
    }
    for server in &found {
        let verb = if merged.added.contains(&server.name) && merged_from(&found, server) {
            if write { "added" } else { "would add" }
        } else {
            "skip"
        };
        let what = server
            .entry
            .as_ref()
            .map(describe_entry)
            .unwrap_or_default();
        writeln!(stdout, "  {verb:9} {:20} {what}", server.name)?;
        for note in &server.notes {
            writeln!(stdout, "  {:9} {:20} note: {note}", "", "")?;
        }
        if let Some((_, why)) = merged
            .skipped
            .iter()
            .find(|(name, _)| name == &server.name)
            .filter(|_| verb == "skip" && server.entry.is_some())
        {
            writeln!(stdout, "  {:9} {:20} {why}", "", "")?;
        }
    }
    for problem in &problems {
        writeln!(stdout, "warning: {problem}")?;
    }
    if merged.added.is_empty() {
        writeln!(stdout, "nothing to add to {}", target.display())?;
    } else if write {
        writeln!(
            stdout,
            "added {} servers to {}; `satchel mcp servers` starts and checks them",
            merged.added.len(),
            target.display()
        )?;
    } else {
        writeln!(
            stdout,
            "would add {} servers to {} (run without --dry-run to write)",
            merged.added.len(),
            target.display()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The most of another client's file that is read: `~/.claude.json`
/// keeps Claude Code's history too and outgrows agent.json's 1 MiB.
const MAX_OTHER_BYTES: u64 = 64 << 20;

/// Another client's file: `None` when it is not there; only a regular
/// file of at most [`MAX_OTHER_BYTES`] is read (a FIFO would block).
fn read_other(path: &Path) -> Result<Option<String>, String> {
    use std::io::Read;
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot read it: {error}")),
    };
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > MAX_OTHER_BYTES {
        return Err(format!(
            "larger than {} MiB: not read",
            MAX_OTHER_BYTES >> 20
        ));
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(MAX_OTHER_BYTES).read_to_string(&mut text))
        .map_err(|error| format!("cannot read it: {error}"))?;
    Ok(Some(text))
}

/// Whether `server` is the one of its name that was added (the first
/// source to name it).
fn merged_from(found: &[Found], server: &Found) -> bool {
    found
        .iter()
        .find(|other| other.name == server.name && other.entry.is_some())
        .is_some_and(|first| std::ptr::eq(first, server))
}

/// The command line or URL of an entry.
fn describe_entry(entry: &serde_json::Value) -> String {
    if let Some(url) = entry["url"].as_str() {
        return url.to_owned();
    }
    let mut words = vec![entry["command"].as_str().unwrap_or_default().to_owned()];
    if let Some(args) = entry["args"].as_array() {
        words.extend(args.iter().filter_map(|a| a.as_str()).map(str::to_owned));
    }
    words.join(" ")
}

/// Writes `text` to `path` through a temporary file and a rename.
fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    let dir = path.parent().context("mcp.json has no directory")?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let temporary = dir.join(".mcp.json.import");
    std::fs::write(&temporary, text)
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    std::fs::rename(&temporary, path)
        .with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(())
}
