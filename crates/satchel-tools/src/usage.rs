//! What a conversation's tool calls did: [`ToolTally`] (per-tool successes
//! and failures) and [`Resources`] (files read or modified, URLs fetched).
//! The agent's feedback block (`Tools Used:`, `Resources:`) and the
//! `conversation` tool's `stats` both count with these, so they agree.
//!
//! Tools do not report resources, so it is read from the call's input.
//! The built-in file tools and `fetch` are counted exactly: `read`'s file
//! is read, `write`'s and `edit`'s modified, `fetch`'s URL fetched, each
//! path normalised (`./a`, `b/../a` and `a` are one file; relative to the
//! project when [`Resources::for_project`] knows it); `glob` and `grep`
//! search and read no one file. For other tools, path- and URL-valued
//! arguments (judged by the tool's declared capabilities), and for `bash`
//! the simple commands of the script (readers such as `cat`, writers such
//! as `rm` or a `>` redirection, fetchers such as `curl`): an honest
//! approximation, shown as counts.

use std::collections::BTreeSet;

use crate::policy::shell::{basename, simple_commands};
use satchel_core::{Resource, ToolCall, ToolSpec};
use serde_json::Value;

/// Per-tool successes and failures in a conversation, in first-use order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolTally {
    tools: Vec<(String, u32, u32)>,
}

impl ToolTally {
    /// Counts one call of `tool`.
    pub fn add(&mut self, tool: &str, failed: bool) {
        let index = match self.tools.iter().position(|(name, ..)| name == tool) {
            Some(index) => index,
            None => {
                self.tools.push((tool.to_owned(), 0, 0));
                self.tools.len() - 1
            }
        };
        let entry = &mut self.tools[index];
        if failed {
            entry.2 += 1;
        } else {
            entry.1 += 1;
        }
    }

    /// `(tool, successes, failures)`, in first-use order.
    pub fn entries(&self) -> impl Iterator<Item = (&str, u32, u32)> {
        self.tools
            .iter()
            .map(|(name, ok, failed)| (name.as_str(), *ok, *failed))
    }

    /// `bash(4: 3✓ 1✗), memory(1: 1✓ 0✗)`, or `none`.
    pub fn describe(&self) -> String {
        if self.tools.is_empty() {
            return "none".to_owned();
        }
        self.entries()
            .map(|(name, ok, failed)| format!("{name}({}: {ok}✓ {failed}✗)", ok + failed))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Distinct resources touched in a conversation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    /// Files read.
    pub read: BTreeSet<String>,
    /// Files created, changed or removed.
    pub modified: BTreeSet<String>,
    /// URLs fetched.
    pub fetched: BTreeSet<String>,
    /// The project the file tools' relative paths are relative to.
    project: Option<std::path::PathBuf>,
}

/// Built-in tools whose resources are known exactly from their input.
const EXACT: &[&str] = &[
    "read",
    "write",
    "edit",
    "glob",
    "grep",
    "fetch",
    satchel_core::edit_forms::TEXT_EDITOR,
    satchel_core::edit_forms::APPLY_PATCH,
];

/// Argument names whose value is a file path.
const PATH_KEYS: &[&str] = &["path", "file", "file_path", "filename", "paths", "files"];
/// Argument names whose value is a URL.
const URL_KEYS: &[&str] = &["url", "urls", "uri"];
/// Commands whose operands are files they read.
const READERS: &[&str] = &[
    "cat",
    "head",
    "tail",
    "less",
    "more",
    "grep",
    "rg",
    "wc",
    "diff",
    "stat",
    "file",
    "sort",
    "uniq",
    "jq",
    "awk",
    "nl",
    "od",
    "xxd",
    "md5sum",
    "sha256sum",
];
/// Commands whose operands are files they create, change or remove.
const WRITERS: &[&str] = &[
    "rm", "touch", "mkdir", "rmdir", "tee", "chmod", "chown", "truncate", "mv", "cp", "ln",
];
/// Commands whose URL operands they fetch.
const FETCHERS: &[&str] = &["curl", "wget", "http", "xh"];

impl Resources {
    /// Nothing touched yet, in `project`: a file tool's absolute path
    /// beneath it counts as the same file as its relative path.
    pub fn for_project(project: &std::path::Path) -> Resources {
        Resources {
            project: Some(project.to_path_buf()),
            ..Resources::default()
        }
    }

    /// The same resources, counted from now on in `project`, the paths
    /// counted so far made relative to it where they are beneath it.
    pub fn in_project(self, project: &std::path::Path) -> Resources {
        let rebase = |set: BTreeSet<String>| -> BTreeSet<String> {
            set.into_iter()
                .map(
                    |path| match std::path::Path::new(&path).strip_prefix(project) {
                        Ok(relative) => relative.display().to_string(),
                        Err(_) => path,
                    },
                )
                .collect()
        };
        Resources {
            read: rebase(self.read),
            modified: rebase(self.modified),
            fetched: self.fetched,
            project: Some(project.to_path_buf()),
        }
    }

    /// Adds what `call` (to the tool described by `spec`) touched.
    pub fn add_call(&mut self, spec: Option<&ToolSpec>, call: &ToolCall) {
        if EXACT.contains(&call.name.as_str()) {
            self.add_exact(call);
            return;
        }
        if call.name == "bash"
            && let Some(command) = call.input.get("command").and_then(Value::as_str)
        {
            self.add_shell(command);
            return;
        }
        let Some(spec) = spec else { return };
        let Value::Object(input) = &call.input else {
            return;
        };
        let writes_files = spec.capabilities.writes.contains(&Resource::FILES);
        for (key, value) in input {
            let key = key.to_ascii_lowercase();
            for text in strings(value) {
                if URL_KEYS.contains(&key.as_str()) || looks_like_url(text) {
                    self.fetched.insert(text.to_owned());
                } else if PATH_KEYS.contains(&key.as_str()) {
                    if writes_files {
                        self.modified.insert(text.to_owned());
                    } else {
                        self.read.insert(text.to_owned());
                    }
                }
            }
        }
    }

    fn add_exact(&mut self, call: &ToolCall) {
        let text = |key: &str| call.input.get(key).and_then(Value::as_str);
        match call.name.as_str() {
            "read" | "write" | "edit" => {
                let Some(path) = text("file_path") else {
                    return;
                };
                let path = normalise(self.project.as_deref(), path);
                if call.name == "read" {
                    self.read.insert(path);
                } else {
                    self.modified.insert(path);
                }
            }
            name if satchel_core::edit_forms::is_native_form(name) => {
                let pairs = satchel_core::edit_forms::native_equivalents(name, &call.input)
                    .unwrap_or_default();
                for (as_tool, path) in pairs {
                    let path = normalise(self.project.as_deref(), &path);
                    if as_tool == "read" {
                        self.read.insert(path);
                    } else {
                        self.modified.insert(path);
                    }
                }
            }
            "fetch" => {
                if let Some(url) = text("url") {
                    self.fetched.insert(url.trim().to_owned());
                }
            }
            _ => {}
        }
    }

    fn add_shell(&mut self, script: &str) {
        let Ok(commands) = simple_commands(script) else {
            return;
        };
        for command in commands {
            let Some((program, args)) = command.words.split_first() else {
                continue;
            };
            let program = basename(program);
            let operands = args.iter().filter(|arg| !arg.starts_with('-'));
            if FETCHERS.contains(&program) {
                self.fetched
                    .extend(operands.filter(|a| looks_like_url(a)).cloned());
            } else if program == "sed" && args.iter().any(|a| a.starts_with("-i")) {
                self.modified.extend(operands.skip(1).cloned());
            } else if READERS.contains(&program) || program == "sed" {
                let skip = usize::from(matches!(program, "grep" | "rg" | "awk" | "sed" | "jq"));
                self.read.extend(operands.skip(skip).cloned());
            } else if WRITERS.contains(&program) {
                self.modified.extend(operands.cloned());
            }
        }
        self.modified.extend(redirect_targets(script));
    }

    /// `2 files read, 1 modified, 1 URL`, or `none`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.read.is_empty() {
            parts.push(format!(
                "{} {} read",
                self.read.len(),
                plural(self.read.len(), "file", "files")
            ));
        }
        if !self.modified.is_empty() {
            let noun = if self.read.is_empty() {
                format!("{} ", plural(self.modified.len(), "file", "files"))
            } else {
                String::new()
            };
            parts.push(format!("{} {noun}modified", self.modified.len()));
        }
        if !self.fetched.is_empty() {
            parts.push(format!(
                "{} {}",
                self.fetched.len(),
                plural(self.fetched.len(), "URL", "URLs")
            ));
        }
        if parts.is_empty() {
            "none".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

/// `path` without `.` and with `..` applied (lexically), relative to
/// `project` when it is beneath it.
fn normalise(project: Option<&std::path::Path>, path: &str) -> String {
    use std::path::{Component, Path, PathBuf};
    let mut out = PathBuf::new();
    for component in Path::new(path).components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    if let Some(project) = project
        && let Ok(relative) = out.strip_prefix(project)
    {
        return relative.display().to_string();
    }
    out.display().to_string()
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

fn looks_like_url(text: &str) -> bool {
    text.starts_with("http://") || text.starts_with("https://")
}

fn strings(value: &Value) -> Vec<&str> {
    match value {
        Value::String(text) => vec![text.as_str()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Targets of `>` and `>>` redirections (not `>&` duplications or
/// `/dev/null`).
fn redirect_targets(script: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = script;
    while let Some(at) = rest.find('>') {
        let after = rest[at + 1..].trim_start_matches('>');
        if after.starts_with('&') {
            rest = after;
            continue;
        }
        let after = after.trim_start();
        let target: String = after
            .chars()
            .take_while(|c| !c.is_whitespace() && !matches!(c, ';' | '&' | '|' | ')'))
            .collect();
        let target = target.trim_matches(|c| c == '"' || c == '\'').to_owned();
        if !target.is_empty() && target != "/dev/null" {
            targets.push(target);
        }
        rest = after;
    }
    targets
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn bash(command: &str) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: "bash".into(),
            input: json!({ "command": command }),
        }
    }

    #[test]
    fn shell_commands_are_sorted_into_read_modified_fetched() {
        let mut resources = Resources::default();
        resources.add_call(
            None,
            &bash("cat a.txt b.txt | grep -n foo c.txt > out.txt 2>&1"),
        );
        resources.add_call(
            None,
            &bash("rm -f old.log && curl -s https://example.com/x"),
        );
        resources.add_call(None, &bash("cat a.txt"));
        assert_eq!(
            resources.read.iter().cloned().collect::<Vec<_>>(),
            ["a.txt", "b.txt", "c.txt"]
        );
        assert_eq!(
            resources.modified.iter().cloned().collect::<Vec<_>>(),
            ["old.log", "out.txt"]
        );
        assert_eq!(resources.describe(), "3 files read, 2 modified, 1 URL");
    }

    #[test]
    fn file_tools_and_fetch_are_counted_exactly() {
        let call = |name: &str, input: Value| ToolCall {
            id: "c".into(),
            name: name.into(),
            input,
        };
        let mut resources = Resources::for_project(std::path::Path::new("/p"));
        for (name, input) in [
            ("read", json!({"file_path": "src/a.rs"})),
            ("read", json!({"file_path": "./src/a.rs"})),
            (
                "read",
                json!({"file_path": "/p/src/../src/a.rs", "offset": 3}),
            ),
            (
                "edit",
                json!({"file_path": "/p/b.rs", "old_string": "x", "new_string": "y"}),
            ),
            ("write", json!({"file_path": "b.rs", "content": ""})),
            ("grep", json!({"pattern": "x", "path": "src"})),
            ("glob", json!({"pattern": "**/*.rs", "path": "src"})),
            ("fetch", json!({"url": "https://example.com/a"})),
        ] {
            resources.add_call(None, &call(name, input));
        }
        assert_eq!(resources.read.iter().collect::<Vec<_>>(), ["src/a.rs"]);
        assert_eq!(resources.modified.iter().collect::<Vec<_>>(), ["b.rs"]);
        assert_eq!(resources.describe(), "1 file read, 1 modified, 1 URL");
    }

    #[test]
    fn nothing_touched_reads_none() {
        assert_eq!(Resources::default().describe(), "none");
        let mut resources = Resources::default();
        resources.add_call(None, &bash("touch x"));
        assert_eq!(resources.describe(), "1 file modified");
    }
}
