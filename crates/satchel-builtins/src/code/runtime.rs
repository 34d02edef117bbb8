//! Which program runs which language, and how it reads code from stdin.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The languages the `code` tool runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// JavaScript, via bun, deno or node.
    Javascript,
    /// TypeScript, via bun or deno.
    Typescript,
    /// Python 3.
    Python,
    /// Bash.
    Bash,
}

impl Language {
    /// The name used in inputs and traces.
    pub fn as_str(self) -> &'static str {
        match self {
            Language::Javascript => "javascript",
            Language::Typescript => "typescript",
            Language::Python => "python",
            Language::Bash => "bash",
        }
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A runtime able to run some language from stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuntimeKind {
    /// Bun: JavaScript and TypeScript.
    Bun,
    /// Deno: JavaScript and TypeScript.
    Deno,
    /// Node.js: JavaScript.
    Node,
    /// CPython 3.
    Python,
    /// GNU Bash.
    Bash,
}

impl RuntimeKind {
    /// The runtime's usual program name, found in `PATH`.
    pub fn program_name(self) -> &'static str {
        match self {
            RuntimeKind::Bun => "bun",
            RuntimeKind::Deno => "deno",
            RuntimeKind::Node => "node",
            RuntimeKind::Python => "python3",
            RuntimeKind::Bash => "bash",
        }
    }

    /// Arguments that make it read the whole program from stdin and run it,
    /// leaving the program's own stdin at end of file.
    pub fn stdin_args(self, language: Language) -> Vec<String> {
        let args: &[&str] = match (self, language) {
            // Bun would otherwise fetch missing packages from npm on the fly.
            (RuntimeKind::Bun, _) => &["run", "--no-install", "-"],
            (RuntimeKind::Deno, Language::Typescript) => {
                &["run", "--allow-all", "--no-prompt", "--ext=ts", "-"]
            }
            (RuntimeKind::Deno, _) => &["run", "--allow-all", "--no-prompt", "--ext=js", "-"],
            (RuntimeKind::Node, _) => &["-"],
            (RuntimeKind::Python, _) => &["-"],
            // Bash would read a script from stdin line by line, so the
            // script's own reads would consume the script. `source` reads it
            // whole from another descriptor while stdin becomes /dev/null.
            (RuntimeKind::Bash, _) => &["-c", "exec 3<&0 0</dev/null; . /dev/fd/3"],
        };
        args.iter().map(|a| (*a).to_owned()).collect()
    }

    fn runs(self, language: Language) -> bool {
        match language {
            Language::Javascript => matches!(
                self,
                RuntimeKind::Bun | RuntimeKind::Deno | RuntimeKind::Node
            ),
            Language::Typescript => matches!(self, RuntimeKind::Bun | RuntimeKind::Deno),
            Language::Python => self == RuntimeKind::Python,
            Language::Bash => self == RuntimeKind::Bash,
        }
    }

    /// Parses `bun`, `deno`, `node`, `python`, `bash`.
    pub fn parse(name: &str) -> Option<RuntimeKind> {
        match name {
            "bun" => Some(RuntimeKind::Bun),
            "deno" => Some(RuntimeKind::Deno),
            "node" => Some(RuntimeKind::Node),
            "python" | "python3" => Some(RuntimeKind::Python),
            "bash" => Some(RuntimeKind::Bash),
            _ => None,
        }
    }
}

/// A runtime found for a language: what it is and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runtime {
    /// Which runtime.
    pub kind: RuntimeKind,
    /// The executable.
    pub program: PathBuf,
}

/// Picks the runtime for `language`: the preferred JavaScript runtime when
/// configured, else the first of bun, deno, node that exists. Explicit
/// program paths (`paths`) win over `PATH` (`search_path`).
pub fn resolve(
    language: Language,
    preferred_js: Option<RuntimeKind>,
    paths: &BTreeMap<String, PathBuf>,
    search_path: &str,
) -> Result<Runtime, String> {
    let candidates: Vec<RuntimeKind> = match language {
        Language::Javascript | Language::Typescript => {
            let mut order = vec![RuntimeKind::Bun, RuntimeKind::Deno, RuntimeKind::Node];
            if let Some(preferred) = preferred_js {
                order.retain(|kind| *kind != preferred);
                order.insert(0, preferred);
            }
            order
                .into_iter()
                .filter(|kind| kind.runs(language))
                .collect()
        }
        Language::Python => vec![RuntimeKind::Python],
        Language::Bash => vec![RuntimeKind::Bash],
    };
    for kind in &candidates {
        let configured = paths.get(kind.program_name()).or_else(|| match kind {
            RuntimeKind::Python => paths.get("python"),
            _ => None,
        });
        let program = match configured {
            Some(path) => is_executable(path).then(|| path.clone()),
            None => find_in_path(kind.program_name(), search_path),
        };
        if let Some(program) = program {
            return Ok(Runtime {
                kind: *kind,
                program,
            });
        }
    }
    let names: Vec<&str> = candidates.iter().map(|k| k.program_name()).collect();
    let hint = match language {
        Language::Typescript => " (TypeScript needs bun or deno: `npm install -g bun`)",
        Language::Javascript => " (`npm install -g bun`, or install Node.js)",
        Language::Python | Language::Bash => "",
    };
    Err(format!(
        "no runtime for {language} found: looked for {} in PATH and code.runtimes{hint}",
        names.join(", ")
    ))
}

fn is_executable(path: &Path) -> bool {
    path.is_file() && rustix::fs::access(path, rustix::fs::Access::EXEC_OK).is_ok()
}

/// The first executable named `name` in the `:`-separated `search_path`.
fn find_in_path(name: &str, search_path: &str) -> Option<PathBuf> {
    search_path
        .split(':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(dir).join(name))
        .find(|p| is_executable(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typescript_never_picks_node() {
        let dir = tempfile::tempdir().unwrap();
        let node = dir.path().join("node");
        std::fs::write(&node, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.path().display().to_string();
        let js = resolve(Language::Javascript, None, &BTreeMap::new(), &path).unwrap();
        assert_eq!(js.kind, RuntimeKind::Node);
        let ts = resolve(
            Language::Typescript,
            Some(RuntimeKind::Node),
            &BTreeMap::new(),
            &path,
        )
        .unwrap_err();
        assert!(ts.contains("TypeScript needs bun or deno"), "{ts}");
    }

    #[test]
    fn configured_paths_win_over_path() {
        let paths = BTreeMap::from([("bash".to_owned(), PathBuf::from("/bin/bash"))]);
        let bash = resolve(Language::Bash, None, &paths, "").unwrap();
        assert_eq!(bash.program, PathBuf::from("/bin/bash"));
        assert!(resolve(Language::Python, None, &BTreeMap::new(), "").is_err());
    }
}
