//! `satchel mcp connect`, `login` and `logout`: remote MCP servers and
//! their OAuth tokens, from a terminal.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use satchel_mcp::client::conformance::ConformanceRun;
use satchel_mcp::client::connect::{self, ConnectHandler};
use satchel_mcp::client::oauth::{Authorizer, Interaction, OAuthOptions, TokenStore};
use satchel_mcp::client::remote::{Lifecycle, Remote, RemoteConfig};
use satchel_mcp::client::{McpConfig, TransportConfig};
use serde_json::{Value, json};

use crate::cli::{ConnectArgs, LoginArgs, LogoutArgs};

/// How long a login waits for the browser.
const LOGIN_WAIT: Duration = Duration::from_secs(300);

/// Where tokens live: `$XDG_DATA_HOME/satchel/mcp-oauth`.
pub(crate) fn token_dir(data: Option<&Path>) -> anyhow::Result<PathBuf> {
    data.map(|dir| dir.join(satchel_mcp::client::oauth::store::DIR_NAME))
        .context("no data directory for tokens: set XDG_DATA_HOME or HOME")
}

/// Shows the login URL on stderr and, unless told not to, opens the browser.
fn show_login_url(open: bool) -> Interaction {
    Interaction::Browser {
        show: Arc::new(move |url: &str| {
            eprintln!("satchel: to authorize, open this URL in a browser:\n\n  {url}\n");
            if open && !open_browser(url) {
                eprintln!("satchel: (no browser could be started; open it by hand)");
            }
        }),
        wait: LOGIN_WAIT,
    }
}

/// Opens `url` with `$BROWSER`, else the desktop's opener; the URL is an
/// argument, never shell text.
#[expect(
    clippy::disallowed_methods,
    reason = "the user's own browser, detached: it outlives satchel, unlike a tool's child"
)]
fn open_browser(url: &str) -> bool {
    let opener = crate::paths::var("BROWSER")
        .filter(|b| !b.trim().is_empty())
        .unwrap_or_else(|| {
            if cfg!(target_os = "macos") {
                "open".into()
            } else {
                "xdg-open".into()
            }
        });
    let spawned = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
            true
        }
        Err(_) => false,
    }
}

/// `Name: value` into a header pair.
fn parse_header(text: &str) -> anyhow::Result<(String, String)> {
    // The text is not echoed: the value may be a secret.
    let (name, value) = text
        .split_once(':')
        .context("`--header` wants 'Name: value'")?;
    let name = name.trim();
    if name.is_empty() {
        bail!("`--header` wants 'Name: value'");
    }
    Ok((name.to_owned(), value.trim().to_owned()))
}

/// `mcp connect URL`: connect, print what the server offers, call a tool.
pub(crate) async fn connect(args: ConnectArgs, data: Option<&Path>) -> anyhow::Result<ExitCode> {
    if args.conformance {
        return conformance(&args.url).await;
    }
    let url = url::Url::parse(&args.url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .with_context(|| format!("`{}` is not an http(s) URL", args.url))?;
    let lifecycle = match args.protocol_version.as_deref() {
        None => Lifecycle::Auto,
        Some(version) => Lifecycle::for_version(version).with_context(|| {
            format!("`--protocol-version {version}`: expected 2025-11-25, 2026-07-28 or auto")
        })?,
    };
    let headers: BTreeMap<String, String> = args
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<anyhow::Result<_>>()?;
    let call = match &args.call {
        Some(pair) => {
            let [tool, arguments] = pair.as_slice() else {
                bail!("`--call` wants TOOL and JSON");
            };
            let arguments = match serde_json::from_str(arguments) {
                Ok(Value::Object(map)) => map,
                _ => bail!("`--call {tool} JSON`: the arguments must be a JSON object"),
            };
            Some((tool.clone(), arguments))
        }
        None => None,
    };
    let config = RemoteConfig {
        url: url.to_string(),
        headers,
        lifecycle,
    };
    let store = TokenStore::file(&token_dir(data)?, config.url.as_str());
    let authorizer = Authorizer::new(
        &config.url,
        &config.url,
        OAuthOptions {
            client_name: "Satchel".into(),
            ..OAuthOptions::default()
        },
        store,
        show_login_url(!args.no_browser),
    )?;
    let remote = Remote::connect(ConnectHandler::default(), &config, Some(authorizer)).await?;
    let offer = connect::offer(&remote).await;
    let offer = match offer {
        Ok(offer) => offer,
        Err(error) => {
            remote.close().await;
            return Err(error.into());
        }
    };
    let result = match &call {
        Some((tool, arguments)) => {
            Some(connect::call(&remote, tool, Some(arguments.clone())).await)
        }
        None => None,
    };
    remote.close().await;
    let result = result.transpose()?;
    let failed = result.as_ref().is_some_and(|r| r.is_error == Some(true));

    let mut stdout = std::io::stdout().lock();
    if args.json {
        let report = json!({"offer": offer, "call": result});
        writeln!(stdout, "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        let server = offer
            .server
            .as_ref()
            .map(|s| format!("{} {}", s.name, s.version))
            .unwrap_or_else(|| "(unnamed server)".into());
        writeln!(
            stdout,
            "{server} at {}, protocol {}",
            config.url,
            offer.protocol_version.as_deref().unwrap_or("?")
        )?;
        if let Some(instructions) = &offer.instructions {
            writeln!(stdout, "instructions: {}", instructions.trim())?;
        }
        writeln!(stdout, "{} tools:", offer.tools.len())?;
        for tool in &offer.tools {
            let description = tool
                .description
                .as_deref()
                .and_then(|d| d.lines().next())
                .unwrap_or_default();
            writeln!(stdout, "  {}  {description}", tool.name)?;
        }
        if let Some(result) = &result {
            writeln!(stdout, "{}", serde_json::to_string_pretty(result)?)?;
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `mcp connect --conformance URL`: one scenario of the official suite.
async fn conformance(url: &str) -> anyhow::Result<ExitCode> {
    let run = ConformanceRun::from_env(&crate::paths::var);
    eprintln!(
        "satchel: conformance client for `{}` (diagnostic)",
        run.scenario
    );
    let lines = run.run(url).await?;
    for line in lines {
        eprintln!("satchel: {line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// A name from mcp.json, or a URL, as the server's URL and OAuth options.
fn resolve(server: &str, config: &McpConfig) -> anyhow::Result<(String, OAuthOptions)> {
    if let Some(found) = config.servers.get(server) {
        let TransportConfig::Http { url, oauth, .. } = &found.transport else {
            bail!("`{server}` is a stdio server: it needs no login");
        };
        return Ok((url.clone(), oauth.options()));
    }
    if server.starts_with("http://") || server.starts_with("https://") {
        let configured = config.servers.values().find_map(|s| match &s.transport {
            TransportConfig::Http { url, oauth, .. } if url == server => Some(oauth.options()),
            _ => None,
        });
        return Ok((
            server.to_owned(),
            configured.unwrap_or_else(|| OAuthOptions {
                client_name: "Satchel".into(),
                ..OAuthOptions::default()
            }),
        ));
    }
    let known: Vec<&str> = config.servers.keys().map(String::as_str).collect();
    bail!(
        "no MCP server `{server}` in mcp.json (known: {}); give its name or URL",
        if known.is_empty() {
            "none".to_owned()
        } else {
            known.join(", ")
        }
    )
}

/// `mcp login SERVER`.
pub(crate) async fn login(
    args: LoginArgs,
    config: &McpConfig,
    data: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    let (url, mut options) = resolve(&args.server, config)?;
    if let Some(scope) = &args.scope {
        options.scopes = scope.split_whitespace().map(str::to_owned).collect();
    }
    let store = TokenStore::file(&token_dir(data)?, &url);
    let authorizer = Authorizer::new(
        &url,
        &args.server,
        options,
        store.clone(),
        show_login_url(!args.no_browser),
    )?;
    // No challenge in hand: rmcp asks the server for one (its scopes),
    // then discovers as usual.
    authorizer.authorize(None, None).await?;
    let record = store.record()?;
    eprintln!(
        "satchel: logged in to {}{}",
        args.server,
        match record.granted_scopes().as_slice() {
            [] => String::new(),
            scopes => format!(" (scopes: {})", scopes.join(" ")),
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// `mcp logout SERVER`.
pub(crate) fn logout(
    args: LogoutArgs,
    config: &McpConfig,
    data: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    let (url, _) = resolve(&args.server, config)?;
    let store = TokenStore::file(&token_dir(data)?, &url);
    if store.delete()? {
        eprintln!("satchel: logged out of {}", args.server);
    } else {
        eprintln!("satchel: no stored login for {}", args.server);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_name_colon_value() {
        assert_eq!(
            parse_header("X-Key:  abc: d ").unwrap(),
            ("X-Key".to_owned(), "abc: d".to_owned())
        );
        assert!(parse_header("no colon").is_err());
        assert!(parse_header(": v").is_err());
    }
}
