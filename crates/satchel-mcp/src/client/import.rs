//! `satchel mcp import`: the MCP servers other clients were given, as
//! `mcp.json` entries.
//!
//! Read: Claude Desktop (`claude_desktop_config.json`), Claude Code (the
//! project's `.mcp.json`; `~/.claude.json`, its user servers and this
//! project's), Cursor (`.cursor/mcp.json`, `~/.cursor/mcp.json`), VS Code
//! (`.vscode/mcp.json`, whose list is `servers`) and Codex
//! (`$CODEX_HOME/config.toml`, `[mcp_servers.NAME]`). References stay
//! references: `${env:VAR}` becomes `${VAR}`, a VS Code `${input:id}` a
//! variable to set, Codex's `bearer_token_env_var` and `env_http_headers`
//! `${VAR}` in a header; a secret written literally (an env variable or
//! header whose name says token, key, secret, password or auth) is
//! replaced by a reference to a variable, and the note says which to set.
//! Nothing is ever expanded into the file.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

/// A client whose MCP servers can be imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// Claude Desktop.
    ClaudeDesktop,
    /// Claude Code.
    ClaudeCode,
    /// Cursor.
    Cursor,
    /// VS Code.
    Vscode,
    /// Codex CLI.
    Codex,
}

impl Source {
    /// Every source, in the order they are read (the first to name a
    /// server wins).
    pub const ALL: [Source; 5] = [
        Source::ClaudeCode,
        Source::Cursor,
        Source::Vscode,
        Source::ClaudeDesktop,
        Source::Codex,
    ];

    /// The name `--from` takes.
    pub fn name(self) -> &'static str {
        match self {
            Source::ClaudeDesktop => "claude-desktop",
            Source::ClaudeCode => "claude-code",
            Source::Cursor => "cursor",
            Source::Vscode => "vscode",
            Source::Codex => "codex",
        }
    }

    /// The source `--from NAME` means.
    pub fn parse(name: &str) -> Option<Source> {
        Source::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// How one file lists its servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `{"mcpServers": {...}}`.
    McpServers,
    /// `~/.claude.json`: `mcpServers`, and `projects[PROJECT].mcpServers`.
    ClaudeJson,
    /// `{"servers": {...}}`.
    VsCode,
    /// `config.toml`'s `[mcp_servers.NAME]`.
    CodexToml,
}

/// A file another client may keep servers in.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Whose file it is.
    pub source: Source,
    /// Where it is.
    pub path: PathBuf,
    shape: Shape,
}

/// Where each source keeps its servers, for a project at `project` and a
/// user whose home is `home`; `env` gives `CODEX_HOME` and
/// `XDG_CONFIG_HOME`. Files that do not exist are included: the caller
/// reads what is there.
pub fn candidates(
    project: &Path,
    home: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<Candidate> {
    let config_home = env("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".config"));
    let codex_home = env("CODEX_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".codex"));
    let at = |source, path: PathBuf, shape| Candidate {
        source,
        path,
        shape,
    };
    vec![
        at(
            Source::ClaudeCode,
            project.join(".mcp.json"),
            Shape::McpServers,
        ),
        at(
            Source::ClaudeCode,
            home.join(".claude.json"),
            Shape::ClaudeJson,
        ),
        at(
            Source::Cursor,
            project.join(".cursor/mcp.json"),
            Shape::McpServers,
        ),
        at(
            Source::Cursor,
            home.join(".cursor/mcp.json"),
            Shape::McpServers,
        ),
        at(
            Source::Vscode,
            project.join(".vscode/mcp.json"),
            Shape::VsCode,
        ),
        at(
            Source::ClaudeDesktop,
            config_home.join("Claude/claude_desktop_config.json"),
            Shape::McpServers,
        ),
        at(
            Source::ClaudeDesktop,
            home.join("Library/Application Support/Claude/claude_desktop_config.json"),
            Shape::McpServers,
        ),
        at(
            Source::Codex,
            codex_home.join("config.toml"),
            Shape::CodexToml,
        ),
    ]
}

/// One server found in another client's configuration.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Found {
    /// Its name there (and in mcp.json).
    pub name: String,
    /// Whose configuration it came from.
    pub source: Source,
    /// The file.
    pub path: PathBuf,
    /// The `mcp.json` entry; `None` when it cannot be imported (see `notes`).
    pub entry: Option<Value>,
    /// What was changed on the way, or why it was left out.
    pub notes: Vec<String>,
}

/// The servers `text` (the content of `candidate`'s file) lists, for the
/// project at `project`; an error says why the file could not be read.
pub fn read(candidate: &Candidate, text: &str, project: &Path) -> Result<Vec<Found>, String> {
    let servers: Vec<(String, Map<String, Value>)> = match candidate.shape {
        Shape::CodexToml => {
            let table: toml::Table = toml::from_str(text).map_err(|e| e.message().to_owned())?;
            let Some(servers) = table.get("mcp_servers").and_then(toml::Value::as_table) else {
                return Ok(Vec::new());
            };
            let mut list = Vec::new();
            for (name, server) in servers {
                let value = serde_json::to_value(server).map_err(|e| e.to_string())?;
                if let Value::Object(map) = value {
                    list.push((name.clone(), map));
                }
            }
            list
        }
        shape => {
            let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
            let mut list = Vec::new();
            let key = if shape == Shape::VsCode {
                "servers"
            } else {
                "mcpServers"
            };
            collect(&value[key], &mut list);
            if shape == Shape::ClaudeJson {
                // Claude Code's local scope: servers of this project only.
                if let Some(projects) = value["projects"].as_object() {
                    for (path, entry) in projects {
                        if Path::new(path) == project {
                            collect(&entry["mcpServers"], &mut list);
                        }
                    }
                }
            }
            list
        }
    };
    Ok(servers
        .into_iter()
        .map(|(name, server)| {
            let mut notes = Vec::new();
            let entry = match candidate.shape {
                Shape::CodexToml => codex_entry(&name, &server, &mut notes),
                _ => json_entry(&name, &server, &mut notes),
            };
            Found {
                name,
                source: candidate.source,
                path: candidate.path.clone(),
                entry,
                notes,
            }
        })
        .collect())
}

fn collect(servers: &Value, list: &mut Vec<(String, Map<String, Value>)>) {
    if let Some(servers) = servers.as_object() {
        for (name, server) in servers {
            if let Value::Object(map) = server {
                list.push((name.clone(), map.clone()));
            }
        }
    }
}

/// An entry of the `mcpServers` / `servers` shapes.
fn json_entry(name: &str, server: &Map<String, Value>, notes: &mut Vec<String>) -> Option<Value> {
    if server.get("disabled") == Some(&Value::Bool(true)) {
        notes.push("disabled there: left out".into());
        return None;
    }
    let kind = server.get("type").and_then(Value::as_str);
    let mut entry = Map::new();
    if let Some(command) = server.get("command").and_then(Value::as_str) {
        entry.insert("command".into(), json!(reference(name, command, notes)));
        if let Some(args) = server.get("args").and_then(Value::as_array) {
            let args: Vec<Value> = args
                .iter()
                .filter_map(Value::as_str)
                .map(|arg| json!(reference(name, arg, notes)))
                .collect();
            entry.insert("args".into(), Value::Array(args));
        }
        if let Some(env) = server.get("env").and_then(Value::as_object) {
            entry.insert("env".into(), secrets_as_references(name, env, notes, false));
        }
        if let Some(cwd) = server.get("cwd").and_then(Value::as_str) {
            entry.insert("cwd".into(), json!(reference(name, cwd, notes)));
        }
        if server.contains_key("envFile") {
            notes.push("its `envFile` is not read by Satchel: set those variables yourself".into());
        }
    } else if let Some(url) = server
        .get("url")
        .or_else(|| server.get("serverUrl"))
        .and_then(Value::as_str)
    {
        if kind == Some("sse") {
            notes.push(
                "uses the old HTTP+SSE transport, which Satchel does not speak: left out".into(),
            );
            return None;
        }
        entry.insert("url".into(), json!(reference(name, url, notes)));
        if let Some(headers) = server.get("headers").and_then(Value::as_object) {
            entry.insert(
                "headers".into(),
                secrets_as_references(name, headers, notes, true),
            );
        }
    } else {
        notes.push("has neither `command` nor `url`: left out".into());
        return None;
    }
    Some(Value::Object(entry))
}

/// A Codex `[mcp_servers.NAME]` table.
fn codex_entry(name: &str, server: &Map<String, Value>, notes: &mut Vec<String>) -> Option<Value> {
    if server.get("enabled") == Some(&Value::Bool(false)) {
        notes.push("disabled there: left out".into());
        return None;
    }
    let mut entry = match json_entry(name, server, notes) {
        Some(Value::Object(entry)) => entry,
        _ => return None,
    };
    if entry.contains_key("command") {
        // Variables Codex passes through from its own environment.
        if let Some(vars) = server.get("env_vars").and_then(Value::as_array) {
            let env = entry
                .entry("env")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(env) = env {
                for var in vars.iter().filter_map(Value::as_str) {
                    env.insert(var.to_owned(), json!(format!("${{{var}}}")));
                }
            }
        }
    } else {
        let mut headers = match entry.remove("headers") {
            Some(Value::Object(headers)) => headers,
            _ => Map::new(),
        };
        if let Some(Value::Object(literal)) = server.get("http_headers")
            && let Value::Object(literal) = secrets_as_references(name, literal, notes, true)
        {
            headers.extend(literal);
        }
        if let Some(Value::Object(from_env)) = server.get("env_http_headers") {
            for (header, var) in from_env {
                if let Some(var) = var.as_str() {
                    headers.insert(header.clone(), json!(format!("${{{var}}}")));
                }
            }
        }
        if let Some(var) = server.get("bearer_token_env_var").and_then(Value::as_str) {
            headers.insert("Authorization".into(), json!(format!("Bearer ${{{var}}}")));
        }
        if !headers.is_empty() {
            entry.insert("headers".into(), Value::Object(headers));
        }
    }
    for (theirs, ours) in [
        ("startup_timeout_sec", "startupTimeoutSecs"),
        ("tool_timeout_sec", "callTimeoutSecs"),
    ] {
        if let Some(secs) = server.get(theirs).and_then(Value::as_f64) {
            entry.insert(ours.into(), json!(secs));
        }
    }
    Some(Value::Object(entry))
}

/// Whether a variable or header of this name holds a secret.
fn secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [
        "token",
        "key",
        "secret",
        "password",
        "passwd",
        "auth",
        "credential",
        "cookie",
    ]
    .iter()
    .any(|word| lower.contains(word))
}

/// `NAME` in the form of an environment variable: `github-api` → `GITHUB_API`.
fn variable(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// A map of environment variables or headers with their references kept
/// and any secret written literally replaced by a reference.
fn secrets_as_references(
    server: &str,
    map: &Map<String, Value>,
    notes: &mut Vec<String>,
    headers: bool,
) -> Value {
    let mut out = Map::new();
    for (key, value) in map {
        let Some(text) = value.as_str() else {
            continue;
        };
        let kept = reference(server, text, notes);
        let literal = !kept.contains("${");
        let value = if literal && secret_name(key) && !text.is_empty() {
            let var = if headers {
                format!("{}_{}", variable(server), variable(key))
            } else {
                key.clone()
            };
            let value = match (headers, text.split_once(' ')) {
                // `Bearer abc`: the scheme stays, the credential goes.
                (true, Some((scheme, _))) if !scheme.is_empty() => format!("{scheme} ${{{var}}}"),
                _ => format!("${{{var}}}"),
            };
            notes.push(format!(
                "{} `{key}` held a secret written out; mcp.json refers to ${{{var}}} instead: set {var} in the environment Satchel runs in",
                if headers { "header" } else { "variable" }
            ));
            value
        } else {
            kept
        };
        out.insert(key.clone(), json!(value));
    }
    Value::Object(out)
}

/// `text` with other clients' references in Satchel's form: `${env:VAR}`
/// → `${VAR}`, `${input:id}` → `${SERVER_ID}` (noted), `${userHome}` →
/// `${HOME}`, `${workspaceFolder}` → `.` (servers start in the project).
fn reference(server: &str, text: &str, notes: &mut Vec<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let inner = &after[..end];
        if let Some(var) = inner.strip_prefix("env:") {
            out.push_str(&format!("${{{var}}}"));
        } else if let Some(input) = inner.strip_prefix("input:") {
            let var = format!("{}_{}", variable(server), variable(input));
            notes.push(format!(
                "asked for the input `{input}` when started; mcp.json refers to ${{{var}}}: set {var}"
            ));
            out.push_str(&format!("${{{var}}}"));
        } else if inner == "userHome" {
            out.push_str("${HOME}");
        } else if inner == "workspaceFolder" {
            out.push('.');
        } else {
            out.push_str(&format!("${{{inner}}}"));
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// What merging found servers into an `mcp.json` did.
#[derive(Debug, Default)]
pub struct Merged {
    /// The new file's text.
    pub text: String,
    /// The servers added, by name.
    pub added: Vec<String>,
    /// Servers left out, with why.
    pub skipped: Vec<(String, String)>,
}

/// `existing` (an `mcp.json`'s text; empty for none) with `found` added:
/// a name mcp.json already has, or an earlier source gave, is left out.
pub fn merge(existing: &str, found: &[Found]) -> Result<Merged, String> {
    let mut root: Value = if existing.trim().is_empty() {
        json!({"mcpServers": {}})
    } else {
        serde_json::from_str(existing).map_err(|e| format!("mcp.json is not valid JSON: {e}"))?
    };
    if !root.is_object() {
        return Err("mcp.json is not a JSON object".into());
    }
    if !root["mcpServers"].is_object() {
        root["mcpServers"] = json!({});
    }
    let mut merged = Merged::default();
    for server in found {
        let Some(entry) = &server.entry else {
            continue;
        };
        let servers = root["mcpServers"].as_object_mut();
        let Some(servers) = servers else { break };
        if servers.contains_key(&server.name) {
            let why = if merged.added.contains(&server.name) {
                "an earlier source has a server of that name".to_owned()
            } else {
                "mcp.json already has a server of that name".to_owned()
            };
            merged.skipped.push((server.name.clone(), why));
            continue;
        }
        servers.insert(server.name.clone(), entry.clone());
        merged.added.push(server.name.clone());
    }
    merged.text = serde_json::to_string_pretty(&root).map_err(|e| e.to_string())? + "\n";
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(source: Source, shape: Shape) -> Candidate {
        Candidate {
            source,
            path: PathBuf::from("/cfg"),
            shape,
        }
    }

    #[test]
    fn claude_desktop_secrets_become_references() {
        let text = r#"{"mcpServers": {"github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_secret", "LOG": "1"}}}}"#;
        let found = read(
            &candidate(Source::ClaudeDesktop, Shape::McpServers),
            text,
            Path::new("/p"),
        )
        .unwrap();
        let entry = found[0].entry.clone().unwrap();
        assert_eq!(
            entry["env"]["GITHUB_PERSONAL_ACCESS_TOKEN"],
            "${GITHUB_PERSONAL_ACCESS_TOKEN}"
        );
        assert_eq!(entry["env"]["LOG"], "1");
        assert!(!entry.to_string().contains("ghp_secret"));
        assert!(
            found[0].notes[0].contains("set GITHUB_PERSONAL_ACCESS_TOKEN"),
            "{:?}",
            found[0].notes
        );
    }

    #[test]
    fn vscode_inputs_and_env_references_are_kept_as_references() {
        let text = r#"{"inputs": [{"id": "api-key", "type": "promptString"}], "servers": {
            "docs": {"type": "http", "url": "https://x.example/mcp", "headers": {"Authorization": "Bearer ${input:api-key}"}},
            "local": {"type": "stdio", "command": "node", "args": ["${workspaceFolder}/srv.js"], "env": {"HOME_DIR": "${env:HOME}"}},
            "old": {"type": "sse", "url": "https://y.example/sse"}}}"#;
        let found = read(
            &candidate(Source::Vscode, Shape::VsCode),
            text,
            Path::new("/p"),
        )
        .unwrap();
        let by = |n: &str| found.iter().find(|f| f.name == n).unwrap();
        assert_eq!(
            by("docs").entry.as_ref().unwrap()["headers"]["Authorization"],
            "Bearer ${DOCS_API_KEY}"
        );
        assert_eq!(by("local").entry.as_ref().unwrap()["args"][0], "./srv.js");
        assert_eq!(
            by("local").entry.as_ref().unwrap()["env"]["HOME_DIR"],
            "${HOME}"
        );
        assert!(by("old").entry.is_none());
    }

    #[test]
    fn claude_code_reads_user_and_this_projects_servers() {
        let text = r#"{"mcpServers": {"u": {"command": "a"}}, "projects": {"/p": {"mcpServers": {"here": {"type": "http", "url": "http://h/mcp", "headers": {"X-Api-Key": "literal"}}}}, "/q": {"mcpServers": {"there": {"command": "b"}}}}}"#;
        let found = read(
            &candidate(Source::ClaudeCode, Shape::ClaudeJson),
            text,
            Path::new("/p"),
        )
        .unwrap();
        let names: Vec<&str> = found.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["u", "here"]);
        assert_eq!(
            found[1].entry.as_ref().unwrap()["headers"]["X-Api-Key"],
            "${HERE_X_API_KEY}"
        );
    }

    #[test]
    fn codex_toml_servers_keep_their_variables() {
        let text = r#"
[mcp_servers.docs]
url = "https://x.example/mcp"
bearer_token_env_var = "DOCS_TOKEN"
env_http_headers = { "X-Team" = "TEAM_ID" }
tool_timeout_sec = 120

[mcp_servers.files]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
env = { "API_KEY" = "abc" }
env_vars = ["PATH_EXTRA"]

[mcp_servers.off]
command = "x"
enabled = false
"#;
        let found = read(
            &candidate(Source::Codex, Shape::CodexToml),
            text,
            Path::new("/p"),
        )
        .unwrap();
        let by = |n: &str| found.iter().find(|f| f.name == n).unwrap();
        let docs = by("docs").entry.clone().unwrap();
        assert_eq!(docs["headers"]["Authorization"], "Bearer ${DOCS_TOKEN}");
        assert_eq!(docs["headers"]["X-Team"], "${TEAM_ID}");
        assert_eq!(docs["callTimeoutSecs"], 120.0);
        let files = by("files").entry.clone().unwrap();
        assert_eq!(files["env"]["API_KEY"], "${API_KEY}");
        assert_eq!(files["env"]["PATH_EXTRA"], "${PATH_EXTRA}");
        assert!(by("off").entry.is_none());
    }

    #[test]
    fn merging_keeps_what_mcp_json_has() {
        let found = vec![
            Found {
                name: "a".into(),
                source: Source::Cursor,
                path: PathBuf::from("/x"),
                entry: Some(json!({"command": "new"})),
                notes: vec![],
            },
            Found {
                name: "b".into(),
                source: Source::Cursor,
                path: PathBuf::from("/x"),
                entry: Some(json!({"command": "b"})),
                notes: vec![],
            },
        ];
        let merged = merge(r#"{"mcpServers": {"a": {"command": "old"}}}"#, &found).unwrap();
        assert_eq!(merged.added, ["b"]);
        assert_eq!(merged.skipped.len(), 1);
        let value: Value = serde_json::from_str(&merged.text).unwrap();
        assert_eq!(value["mcpServers"]["a"]["command"], "old");
        assert_eq!(value["mcpServers"]["b"]["command"], "b");
    }
}
