//! `mcp.json`: the MCP servers Satchel starts, in the `mcpServers` shape
//! other MCP clients use.
//!
//! ```json
//! {"mcpServers": {
//!   "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]},
//!   "docs":  {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}
//! }}
//! ```
//!
//! A server has `command` (with `args`, `env`, `cwd`) for stdio or `url`
//! (with `headers`) for streamable HTTP; `type` may say which. A remote
//! server may add `protocolVersion` (`2025-11-25`, `2026-07-28` or `auto`,
//! the default) and `oauth`: `clientId` and `clientSecret` for a client
//! registered with its authorization server by hand, `clientMetadataUrl`
//! for a client ID metadata document Satchel is known by, `scopes` to ask
//! for, `allowPrivateNetwork` for an authorization server on a private
//! address. Without them Satchel registers itself (dynamic registration);
//! tokens come from `satchel mcp login NAME`. Satchel's own
//! keys: `startupTimeoutSecs` (default 30), `callTimeoutSecs` (default 60,
//! reset by progress), `toolTimeoutSecs` (the same for the tools it names,
//! by the server's names: `{"build": 600}`), `disabled`. Any other key, in a server or at the
//! top level, and a value of the wrong type are warnings naming the file,
//! line, key path and the nearest known key; the key is ignored and the
//! rest of the server applies.
//! `${VAR}` and `${VAR:-default}` in `command`, `args`, `env`, `cwd`, `url`,
//! `headers`, `oauth.clientId` and `oauth.clientSecret` are replaced from the environment given to [`McpConfig::load`].
//!
//! The user's `$XDG_CONFIG_HOME/satchel/mcp.json` is read first, then the
//! project's `.agents/mcp.json`; a server declared in both is the
//! project's. A file that is not valid JSON, or a server entry of the wrong
//! shape, is a warning naming the file (and line), never a failure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use satchel_tools::config::{JsonStep, Layer};

use super::oauth::OAuthOptions;
use super::remote::Lifecycle;
use serde::Deserialize;
use serde_json::{Map, Value};

/// The project's MCP configuration file, relative to the project root.
pub const PROJECT_MCP_CONFIG: &str = ".agents/mcp.json";
/// Time a server gets to start and answer `initialize` and `tools/list`.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Time a call may go without an answer or a progress notification.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The servers to start and what went wrong reading them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpConfig {
    /// Servers by name.
    pub servers: BTreeMap<String, ServerConfig>,
    /// Problems found, each naming its file.
    pub warnings: Vec<String>,
}

impl McpConfig {
    /// Keeps remote servers' OAuth tokens in `dir` (e.g.
    /// `$XDG_DATA_HOME/satchel/mcp-oauth`); without one they cannot log in.
    pub fn with_token_dir(mut self, dir: Option<PathBuf>) -> McpConfig {
        for server in self.servers.values_mut() {
            if let TransportConfig::Http { oauth, .. } = &mut server.transport {
                oauth.token_dir = dir.clone();
            }
        }
        self
    }
}

/// One server to start.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// The name from the configuration; tools are imported as `name__tool`.
    pub name: String,
    /// How to reach it.
    pub transport: TransportConfig,
    /// Time to start and list tools.
    pub startup_timeout: Duration,
    /// Time a call may go without an answer or progress.
    pub call_timeout: Duration,
    /// The same, for the tools named here (by the server's own names).
    pub tool_timeouts: BTreeMap<String, Duration>,
    /// The file that declared it.
    pub declared_in: PathBuf,
    /// A problem that keeps it from starting (e.g. an unset variable); it
    /// is listed as failed with this reason.
    pub problem: Option<String>,
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq)]
pub enum TransportConfig {
    /// A child process speaking JSON-RPC on stdin and stdout.
    Stdio {
        /// The program, looked up in `PATH` when it has no slash.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables added to the inherited environment.
        env: BTreeMap<String, String>,
        /// Working directory; the project directory when absent, relative
        /// paths resolved against it.
        cwd: PathBuf,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint URL.
        url: String,
        /// Headers sent with every request (an `Authorization` header
        /// replaces OAuth).
        headers: BTreeMap<String, String>,
        /// How the lifecycle starts (`protocolVersion`).
        lifecycle: Lifecycle,
        /// Who Satchel is to its authorization server, and where tokens live.
        oauth: OAuthConfig,
    },
}

/// A remote server's `oauth` settings.
#[derive(Clone, Default, PartialEq)]
pub struct OAuthConfig {
    /// `clientId`: registered with the authorization server by hand.
    pub client_id: Option<String>,
    /// `clientSecret`: its secret.
    pub client_secret: Option<String>,
    /// `clientMetadataUrl`: a client ID metadata document Satchel is known by.
    pub client_metadata_url: Option<String>,
    /// `scopes` to ask for instead of what the server suggests.
    pub scopes: Vec<String>,
    /// `allowPrivateNetwork`: the authorization server may be on a private address.
    pub allow_private_network: bool,
    /// Where tokens are stored (not from mcp.json: see [`McpConfig::with_token_dir`]).
    pub token_dir: Option<PathBuf>,
}

impl std::fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthConfig")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[REDACTED]"),
            )
            .field("client_metadata_url", &self.client_metadata_url)
            .field("scopes", &self.scopes)
            .field("allow_private_network", &self.allow_private_network)
            .field("token_dir", &self.token_dir)
            .finish()
    }
}

impl OAuthConfig {
    /// The options the authorizer takes.
    pub fn options(&self) -> OAuthOptions {
        OAuthOptions {
            client_name: "Satchel".into(),
            client_id: self.client_id.clone(),
            client_secret: self.client_secret.clone(),
            client_metadata_url: self.client_metadata_url.clone(),
            scopes: self.scopes.clone(),
            allow_private_network: self.allow_private_network,
        }
    }
}

impl TransportConfig {
    /// One line for listings: the command line or the URL.
    pub fn describe(&self) -> String {
        match self {
            TransportConfig::Stdio { command, args, .. } => {
                let mut line = format!("stdio: {command}");
                for arg in args {
                    line.push(' ');
                    line.push_str(arg);
                }
                line
            }
            TransportConfig::Http { url, .. } => format!("http: {url}"),
        }
    }
}

/// A server entry as written.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawServer {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    protocol_version: Option<String>,
    #[serde(default)]
    oauth: RawOAuth,
    #[serde(default)]
    disabled: bool,
    startup_timeout_secs: Option<f64>,
    call_timeout_secs: Option<f64>,
    #[serde(default)]
    tool_timeout_secs: BTreeMap<String, f64>,
}

/// An `oauth` section as written.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawOAuth {
    client_id: Option<String>,
    client_secret: Option<String>,
    client_metadata_url: Option<String>,
    #[serde(default)]
    scopes: Vec<String>,
    #[serde(default)]
    allow_private_network: bool,
}

impl McpConfig {
    /// The config files for a project, lowest precedence first: the user's
    /// (under `user_config_dir`, e.g. `$XDG_CONFIG_HOME/satchel`), then the
    /// project's.
    pub fn default_paths(project_dir: &Path, user_config_dir: Option<&Path>) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = user_config_dir
            .map(|dir| dir.join("mcp.json"))
            .into_iter()
            .collect();
        paths.push(project_dir.join(PROJECT_MCP_CONFIG));
        paths
    }

    /// Reads `paths` (later ones win, server by server); `env` answers
    /// `${VAR}` references; relative `cwd`s start at `project_dir`.
    pub fn load(
        paths: &[PathBuf],
        project_dir: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> McpConfig {
        let mut config = McpConfig::default();
        for path in paths {
            // Like agent.json: only a regular file of at most 1 MiB is read,
            // so a FIFO or a link to /dev/zero is refused, never hung on.
            let text = match satchel_tools::config::read_config_file(path) {
                Ok(Some(text)) => text,
                Ok(None) => continue,
                Err(error) => {
                    config.warnings.push(error.to_string());
                    continue;
                }
            };
            config.read_file(path, &text, project_dir, env);
        }
        config
    }

    /// Parses one file's text into `self`.
    fn read_file(
        &mut self,
        path: &Path,
        text: &str,
        project_dir: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) {
        let file = path.display();
        let value: Value = match serde_json::from_str(text) {
            Ok(value) => value,
            Err(error) => {
                self.warnings.push(format!(
                    "{file}:{}:{}: invalid JSON ({error}); ignoring this file",
                    error.line(),
                    error.column()
                ));
                return;
            }
        };
        let layer = satchel_tools::config::Layer {
            path: path.to_path_buf(),
            object: value.as_object().cloned().unwrap_or_default(),
            text: Some(std::sync::Arc::from(text)),
        };
        if let Some(object) = value.as_object() {
            for key in object
                .keys()
                .filter(|key| !TOP_KEYS.contains(&key.as_str()))
            {
                let hint = satchel_tools::config::nearest(key, TOP_KEYS)
                    .map(|near| format!(" (did you mean `{near}`?)"))
                    .unwrap_or_default();
                self.warnings.push(format!(
                    "{}: `{key}` is not a key of mcp.json{hint}; ignored",
                    layer.describe(&[JsonStep::key(key)])
                ));
            }
        }
        let servers = match value.get("mcpServers") {
            Some(Value::Object(servers)) => servers.clone(),
            Some(_) => {
                self.warnings
                    .push(format!("{file}: `mcpServers` must be an object; ignored"));
                return;
            }
            None if value.is_object() => Map::new(),
            None => {
                self.warnings
                    .push(format!("{file}: must hold a JSON object; ignored"));
                return;
            }
        };
        for (name, mut entry) in servers {
            self.check_server_keys(&layer, &name, &mut entry);
            let raw = match RawServer::deserialize(&entry) {
                Ok(raw) => raw,
                Err(error) => {
                    self.warnings
                        .push(format!("{file}: server `{name}`: {error}; skipped"));
                    continue;
                }
            };
            if raw.disabled {
                self.servers.remove(&name);
                continue;
            }
            match server_config(&name, raw, path, project_dir, env) {
                Ok(server) => {
                    self.servers.insert(name, server);
                }
                Err(reason) => self
                    .warnings
                    .push(format!("{file}: server `{name}`: {reason}; skipped")),
            }
        }
    }
}

impl McpConfig {
    /// Warns about, and removes, a server's unknown keys and values of the
    /// wrong type, so the rest of the entry still applies.
    fn check_server_keys(&mut self, layer: &Layer, name: &str, entry: &mut Value) {
        let Some(object) = entry.as_object_mut() else {
            return;
        };
        let mut drop = Vec::new();
        for (key, value) in object.iter() {
            let at = || {
                layer.describe(&[
                    JsonStep::key("mcpServers"),
                    JsonStep::key(name),
                    JsonStep::key(key),
                ])
            };
            let Some((_, expected, fits)) = SERVER_KEYS.iter().find(|(known, ..)| known == key)
            else {
                let known: Vec<&str> = SERVER_KEYS.iter().map(|(known, ..)| *known).collect();
                let hint = satchel_tools::config::nearest(key, &known)
                    .map(|near| format!(" (did you mean `mcpServers.{name}.{near}`?)"))
                    .unwrap_or_default();
                self.warnings.push(format!(
                    "{}: `mcpServers.{name}.{key}` is not a key Satchel reads{hint}; ignored",
                    at()
                ));
                continue;
            };
            if !fits(value) {
                self.warnings.push(format!(
                    "{}: `mcpServers.{name}.{key}` must be {expected}, not {}; ignored",
                    at(),
                    satchel_tools::config::json_type(value)
                ));
                drop.push(key.clone());
            }
        }
        if let Some(Value::Object(oauth)) = object.get_mut("oauth") {
            self.check_oauth_keys(layer, name, oauth);
        }
        for key in drop {
            object.remove(&key);
        }
    }
}

impl McpConfig {
    /// Warns about, and removes, unknown keys and wrong types in a
    /// server's `oauth` section.
    fn check_oauth_keys(&mut self, layer: &Layer, name: &str, oauth: &mut Map<String, Value>) {
        let mut drop = Vec::new();
        for (key, value) in oauth.iter() {
            let at = layer.describe(&[
                JsonStep::key("mcpServers"),
                JsonStep::key(name),
                JsonStep::key("oauth"),
                JsonStep::key(key),
            ]);
            let Some((_, expected, fits)) = OAUTH_KEYS.iter().find(|(known, ..)| known == key)
            else {
                let known: Vec<&str> = OAUTH_KEYS.iter().map(|(known, ..)| *known).collect();
                let hint = satchel_tools::config::nearest(key, &known)
                    .map(|near| format!(" (did you mean `mcpServers.{name}.oauth.{near}`?)"))
                    .unwrap_or_default();
                self.warnings.push(format!(
                    "{at}: `mcpServers.{name}.oauth.{key}` is not a key Satchel reads{hint}; ignored"
                ));
                drop.push(key.clone());
                continue;
            };
            if !fits(value) {
                self.warnings.push(format!(
                    "{at}: `mcpServers.{name}.oauth.{key}` must be {expected}, not {}; ignored",
                    satchel_tools::config::json_type(value)
                ));
                drop.push(key.clone());
            }
        }
        for key in drop {
            oauth.remove(&key);
        }
    }
}

/// The keys of a server's `oauth` section.
#[allow(clippy::type_complexity)]
const OAUTH_KEYS: &[(&str, &str, fn(&Value) -> bool)] = &[
    ("clientId", "a string", Value::is_string),
    ("clientSecret", "a string", Value::is_string),
    ("clientMetadataUrl", "a string", Value::is_string),
    ("scopes", "a list of strings", string_list),
    ("allowPrivateNetwork", "a boolean", Value::is_boolean),
];

/// The top-level keys of mcp.json.
const TOP_KEYS: &[&str] = &["$schema", "mcpServers"];

/// A server's keys: name, the type it must have (in words), and the check.
#[allow(clippy::type_complexity)]
const SERVER_KEYS: &[(&str, &str, fn(&Value) -> bool)] = &[
    ("type", "a string", Value::is_string),
    ("command", "a string", Value::is_string),
    ("args", "a list of strings", string_list),
    ("env", "an object of strings", string_map),
    ("cwd", "a string", Value::is_string),
    ("url", "a string", Value::is_string),
    ("headers", "an object of strings", string_map),
    ("protocolVersion", "a string", Value::is_string),
    ("oauth", "an object", Value::is_object),
    ("disabled", "a boolean", Value::is_boolean),
    ("startupTimeoutSecs", "a number", Value::is_number),
    ("callTimeoutSecs", "a number", Value::is_number),
    ("toolTimeoutSecs", "an object of numbers", number_map),
];

fn number_map(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|map| map.values().all(Value::is_number))
}

fn string_list(value: &Value) -> bool {
    value
        .as_array()
        .is_some_and(|items| items.iter().all(Value::is_string))
}

fn string_map(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|map| map.values().all(Value::is_string))
}

fn server_config(
    name: &str,
    raw: RawServer,
    path: &Path,
    project_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerConfig, String> {
    let mut problems = Vec::new();
    let mut expand = |text: &str| match expand_vars(text, env) {
        Ok(expanded) => expanded,
        Err(missing) => {
            problems.push(format!("environment variable `{missing}` is not set"));
            String::new()
        }
    };
    let kind = raw.kind.as_deref().map(str::to_ascii_lowercase);
    let transport = match (kind.as_deref(), raw.command, raw.url) {
        (Some("sse"), _, _) => {
            return Err("the HTTP+SSE transport (`type: sse`) is not supported; use the server's streamable HTTP endpoint".into());
        }
        (Some("stdio") | None, Some(command), None) | (Some("stdio"), Some(command), Some(_)) => {
            let cwd = match raw.cwd {
                Some(cwd) => project_dir.join(expand(&cwd)),
                None => project_dir.to_path_buf(),
            };
            TransportConfig::Stdio {
                command: expand(&command),
                args: raw.args.iter().map(|arg| expand(arg)).collect(),
                env: raw
                    .env
                    .iter()
                    .map(|(key, value)| (key.clone(), expand(value)))
                    .collect(),
                cwd,
            }
        }
        (Some("http" | "streamable-http" | "streamablehttp") | None, None, Some(url))
        | (Some("http" | "streamable-http" | "streamablehttp"), Some(_), Some(url)) => {
            let lifecycle = match raw.protocol_version.as_deref() {
                None => Lifecycle::Auto,
                Some(version) => Lifecycle::for_version(version).ok_or_else(|| {
                    format!("`protocolVersion` `{version}` is not 2025-11-25, 2026-07-28 or auto")
                })?,
            };
            let oauth = OAuthConfig {
                client_id: raw.oauth.client_id.as_deref().map(&mut expand),
                client_secret: raw.oauth.client_secret.as_deref().map(&mut expand),
                client_metadata_url: raw.oauth.client_metadata_url.clone(),
                scopes: raw.oauth.scopes.clone(),
                allow_private_network: raw.oauth.allow_private_network,
                token_dir: None,
            };
            TransportConfig::Http {
                url: expand(&url),
                headers: raw
                    .headers
                    .iter()
                    .map(|(key, value)| (key.clone(), expand(value)))
                    .collect(),
                lifecycle,
                oauth,
            }
        }
        (None, Some(_), Some(_)) => {
            return Err("has both `command` and `url`; set `type` to `stdio` or `http`".into());
        }
        (Some(other), _, _)
            if !matches!(
                other,
                "stdio" | "http" | "streamable-http" | "streamablehttp"
            ) =>
        {
            return Err(format!(
                "unknown `type` `{other}` (expected `stdio` or `http`)"
            ));
        }
        _ => return Err("needs `command` (stdio) or `url` (HTTP)".into()),
    };
    let seconds = |value: Option<f64>, default: Duration| {
        value
            .filter(|secs| secs.is_finite() && *secs > 0.0)
            .map_or(default, Duration::from_secs_f64)
    };
    problems.dedup();
    Ok(ServerConfig {
        name: name.to_owned(),
        transport,
        startup_timeout: seconds(raw.startup_timeout_secs, DEFAULT_STARTUP_TIMEOUT),
        call_timeout: seconds(raw.call_timeout_secs, DEFAULT_CALL_TIMEOUT),
        tool_timeouts: raw
            .tool_timeout_secs
            .iter()
            .filter(|(_, secs)| secs.is_finite() && **secs > 0.0)
            .map(|(tool, secs)| (tool.clone(), Duration::from_secs_f64(*secs)))
            .collect(),
        declared_in: path.to_path_buf(),
        problem: (!problems.is_empty()).then(|| problems.join("; ")),
    })
}

/// Replaces `${VAR}` and `${VAR:-default}`; `Err(VAR)` for the first unset
/// variable without a default. `$` not followed by `{` is kept.
fn expand_vars(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        match (env(name), default) {
            (Some(value), _) if !value.is_empty() || default.is_none() => out.push_str(&value),
            (_, Some(default)) => out.push_str(default),
            (None, None) => return Err(name.to_owned()),
            (Some(value), None) => out.push_str(&value),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cret".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn load(files: &[(&str, &str)]) -> McpConfig {
        let dir = tempfile::tempdir().unwrap();
        let paths: Vec<PathBuf> = files
            .iter()
            .map(|(name, text)| {
                let path = dir.path().join(name);
                std::fs::write(&path, text).unwrap();
                path
            })
            .collect();
        let mut config = McpConfig::load(&paths, Path::new("/project"), &env);
        for server in config.servers.values_mut() {
            server.declared_in = PathBuf::from(server.declared_in.file_name().unwrap());
        }
        config
    }

    /// A FIFO or a link to /dev/zero as mcp.json is refused at once with a
    /// warning, never read (it would hang or exhaust memory).
    #[test]
    fn an_mcp_json_that_is_not_a_small_regular_file_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.json");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
            0,
        )
        .unwrap();
        let zero = dir.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let started = std::time::Instant::now();
        let config = McpConfig::load(&[fifo, zero], Path::new("/project"), &env);
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(config.warnings.len(), 2, "{:?}", config.warnings);
        assert!(config.servers.is_empty());
    }

    #[test]
    fn stdio_and_http_servers_in_the_common_shape() {
        let config = load(&[(
            "mcp.json",
            r#"{"mcpServers": {
                "files": {"command": "npx", "args": ["-y", "srv", "${TOKEN}"], "env": {"K": "${MISSING:-fallback}"}},
                "docs": {"url": "https://x.example/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}, "callTimeoutSecs": 5, "toolTimeoutSecs": {"crawl": 300, "bad": -1}},
                "typed": {"type": "stdio", "command": "./srv", "cwd": "tools", "startupTimeoutSecs": 2.5}
            }}"#,
        )]);
        assert_eq!(config.warnings, Vec::<String>::new());
        assert_eq!(
            config.servers["files"],
            ServerConfig {
                name: "files".into(),
                transport: TransportConfig::Stdio {
                    command: "npx".into(),
                    args: vec!["-y".into(), "srv".into(), "s3cret".into()],
                    env: [("K".to_owned(), "fallback".to_owned())].into(),
                    cwd: PathBuf::from("/project"),
                },
                startup_timeout: DEFAULT_STARTUP_TIMEOUT,
                call_timeout: DEFAULT_CALL_TIMEOUT,
                tool_timeouts: BTreeMap::new(),
                declared_in: PathBuf::from("mcp.json"),
                problem: None,
            }
        );
        assert_eq!(
            config.servers["docs"].transport,
            TransportConfig::Http {
                url: "https://x.example/mcp".into(),
                headers: [("Authorization".to_owned(), "Bearer s3cret".to_owned())].into(),
                lifecycle: Lifecycle::Auto,
                oauth: OAuthConfig::default(),
            }
        );
        assert_eq!(config.servers["docs"].call_timeout, Duration::from_secs(5));
        assert_eq!(
            config.servers["docs"].tool_timeouts,
            BTreeMap::from([("crawl".to_owned(), Duration::from_secs(300))])
        );
        let typed = &config.servers["typed"];
        assert_eq!(typed.startup_timeout, Duration::from_millis(2500));
        assert!(
            matches!(&typed.transport, TransportConfig::Stdio { cwd, .. } if cwd == Path::new("/project/tools"))
        );
    }

    #[test]
    fn project_wins_server_by_server_and_disabled_removes() {
        let config = load(&[
            (
                "user.json",
                r#"{"mcpServers": {"a": {"command": "user-a"}, "b": {"command": "user-b"}, "c": {"command": "user-c"}}}"#,
            ),
            (
                "project.json",
                r#"{"mcpServers": {"a": {"command": "project-a"}, "c": {"command": "x", "disabled": true}}}"#,
            ),
        ]);
        let commands: Vec<String> = config
            .servers
            .values()
            .map(|s| s.transport.describe())
            .collect();
        assert_eq!(commands, ["stdio: project-a", "stdio: user-b"]);
    }

    #[test]
    fn bad_files_and_entries_are_warnings() {
        let config = load(&[
            ("broken.json", "{\n  \"mcpServers\": {,\n}"),
            (
                "entries.json",
                r#"{"mcpServers": {"none": {}, "both": {"command": "a", "url": "http://b"}, "old": {"type": "sse", "url": "http://c"}, "args": {"command": "a", "args": "x"}, "ok": {"command": "fine", "env": {"T": "${UNSET}"}}}}"#,
            ),
        ]);
        let warnings = config.warnings.join("\n");
        assert!(warnings.contains("broken.json:2:"), "{warnings}");
        assert!(
            warnings.contains("server `none`: needs `command`"),
            "{warnings}"
        );
        assert!(warnings.contains("server `both`: has both"), "{warnings}");
        assert!(
            warnings.contains("server `old`: the HTTP+SSE transport"),
            "{warnings}"
        );
        assert!(
            warnings.contains(
                "`mcpServers.args.args` must be a list of strings, not a string; ignored"
            ),
            "{warnings}"
        );
        // The wrong value is left out; the rest of the server applies.
        assert_eq!(config.servers.keys().collect::<Vec<_>>(), ["args", "ok"]);
        assert_eq!(
            config.servers["ok"].problem.as_deref(),
            Some("environment variable `UNSET` is not set")
        );
    }

    #[test]
    fn variables_expand_with_defaults() {
        assert_eq!(expand_vars("a${TOKEN}b", &env).unwrap(), "as3cretb");
        assert_eq!(expand_vars("${EMPTY:-d}", &env).unwrap(), "d");
        assert_eq!(expand_vars("${EMPTY}", &env).unwrap(), "");
        assert_eq!(expand_vars("$HOME ${open", &env).unwrap(), "$HOME ${open");
        assert_eq!(expand_vars("${NOPE}", &env), Err("NOPE".into()));
    }

    /// Issue #22: unknown keys and wrong types in mcp.json were silent or
    /// skipped the whole server; now each is a warning with its place and
    /// the nearest key, and the rest of the server applies.
    #[test]
    fn unknown_keys_and_wrong_types_are_warnings_with_the_nearest_key() {
        let config = load(&[(
            "mcp.json",
            "{\"mcpServer\": {},\n \"mcpServers\": {\"files\": {\"command\": \"srv\",\n  \"arg\": [\"x\"], \"callTimeoutSecs\": \"soon\"}}}",
        )]);
        let warnings: Vec<String> = config
            .warnings
            .iter()
            .map(|w| {
                w.rsplit_once("mcp.json:")
                    .map_or(w.clone(), |(_, rest)| rest.to_owned())
            })
            .collect();
        assert_eq!(
            warnings,
            [
                "1:2: `mcpServer` is not a key of mcp.json (did you mean `mcpServers`?); ignored",
                "3:3: `mcpServers.files.arg` is not a key Satchel reads (did you mean `mcpServers.files.args`?); ignored",
                "3:17: `mcpServers.files.callTimeoutSecs` must be a number, not a string; ignored",
            ]
        );
        assert_eq!(config.servers["files"].call_timeout, DEFAULT_CALL_TIMEOUT);
    }

    /// Issue #28: a remote server's `protocolVersion` and `oauth` section,
    /// with `${VAR}` in the client's identity, and the token directory the
    /// host gives.
    #[test]
    fn remote_servers_read_protocol_version_and_oauth() {
        let config = load(&[(
            "mcp.json",
            r#"{"mcpServers": {
                "docs": {"url": "https://x.example/mcp", "protocolVersion": "2026-07-28",
                         "oauth": {"clientId": "satchel", "clientSecret": "${TOKEN}",
                                   "scopes": ["read", "write"], "allowPrivateNetwork": true}},
                "old": {"url": "https://y.example/mcp", "protocolVersion": "2025-11-25"},
                "bad": {"url": "https://z.example/mcp", "protocolVersion": "latest"}
            }}"#,
        )]);
        let config = config.with_token_dir(Some(PathBuf::from("/data/mcp-oauth")));
        let TransportConfig::Http {
            lifecycle, oauth, ..
        } = &config.servers["docs"].transport
        else {
            panic!("not HTTP");
        };
        assert_eq!(*lifecycle, Lifecycle::Discover);
        assert_eq!(oauth.client_id.as_deref(), Some("satchel"));
        assert_eq!(oauth.client_secret.as_deref(), Some("s3cret"));
        assert_eq!(oauth.scopes, ["read", "write"]);
        assert!(oauth.allow_private_network);
        assert_eq!(
            oauth.token_dir.as_deref(),
            Some(Path::new("/data/mcp-oauth"))
        );
        // The secret never shows in Debug output.
        assert!(!format!("{:?}", config.servers["docs"]).contains("s3cret"));
        assert!(matches!(
            &config.servers["old"].transport,
            TransportConfig::Http {
                lifecycle: Lifecycle::Initialize,
                ..
            }
        ));
        assert!(
            config
                .warnings
                .join("\n")
                .contains("server `bad`: `protocolVersion` `latest`"),
            "{:?}",
            config.warnings
        );
    }

    #[test]
    fn unknown_and_mistyped_oauth_keys_are_warnings() {
        let config = load(&[(
            "mcp.json",
            r#"{"mcpServers": {"docs": {"url": "https://x.example/mcp",
                "oauth": {"clientID": "x", "scopes": "read"}}}}"#,
        )]);
        let warnings = config.warnings.join("\n");
        assert!(
            warnings.contains("`mcpServers.docs.oauth.clientID` is not a key Satchel reads (did you mean `mcpServers.docs.oauth.clientId`?)"),
            "{warnings}"
        );
        assert!(
            warnings
                .contains("`mcpServers.docs.oauth.scopes` must be a list of strings, not a string"),
            "{warnings}"
        );
        assert!(config.servers.contains_key("docs"));
    }
}
