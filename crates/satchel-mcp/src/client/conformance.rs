//! The driver `satchel mcp connect --conformance` runs for the official
//! conformance suite's client scenarios (a diagnostic mode, hidden).
//!
//! Nothing here changes how Satchel connects: the scenario is only read to
//! pick the wire (`MCP_CONFORMANCE_PROTOCOL_VERSION`: `initialize` up to
//! 2025-11-25, `server/discover` after, never a probe that would trip a
//! scenario's checks), the harness's identities (`MCP_CONFORMANCE_CONTEXT`:
//! a pre-registered client, the tool calls to make) and a store that lives
//! only as long as the run. Authorization completes headless because the
//! suite's authorization servers redirect without asking anyone, exactly
//! as `satchel mcp connect` would complete it against any such server.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::connect::{self, ConnectHandler};
use super::oauth::{Authorizer, Interaction, OAuthOptions, TokenStore};
use super::remote::{Lifecycle, Remote, RemoteConfig, RemoteError};

/// The client ID metadata document URL the suite's authorization servers
/// expect of a client (any other is flagged).
pub const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolCall {
    name: String,
    #[serde(default)]
    arguments: Option<Map<String, Value>>,
}

#[derive(Default, Deserialize)]
struct Context {
    #[serde(default, rename = "toolCalls")]
    tool_calls: Vec<ToolCall>,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    client_secret: Option<String>,
}

/// One scenario's run, as the suite's environment describes it.
pub struct ConformanceRun {
    /// `MCP_CONFORMANCE_SCENARIO`.
    pub scenario: String,
    lifecycle: Lifecycle,
    context: Context,
}

impl ConformanceRun {
    /// Reads the suite's `MCP_CONFORMANCE_*` variables through `env`.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> ConformanceRun {
        let version =
            env("MCP_CONFORMANCE_PROTOCOL_VERSION").unwrap_or_else(|| "2025-11-25".to_owned());
        ConformanceRun {
            scenario: env("MCP_CONFORMANCE_SCENARIO").unwrap_or_default(),
            lifecycle: Lifecycle::for_version(&version).unwrap_or(Lifecycle::Initialize),
            context: env("MCP_CONFORMANCE_CONTEXT")
                .and_then(|text| serde_json::from_str(&text).ok())
                .unwrap_or_default(),
        }
    }

    /// Connects to `url`, lists the tools and calls the context's tool
    /// calls, else every tool (with arguments made up from its schema).
    /// Returns a line per step. A tool that fails is a line; failing to
    /// connect, list or authorize is the error.
    pub async fn run(&self, url: &str) -> Result<Vec<String>, RemoteError> {
        let options = OAuthOptions {
            client_name: "Satchel".into(),
            client_id: self.context.client_id.clone(),
            client_secret: self.context.client_secret.clone(),
            client_metadata_url: Some(CLIENT_METADATA_URL.into()),
            ..OAuthOptions::default()
        };
        let authorizer = Authorizer::new(
            url,
            url,
            options,
            TokenStore::memory(url),
            Interaction::Headless,
        )?;
        let config = RemoteConfig {
            url: url.to_owned(),
            headers: Default::default(),
            lifecycle: self.lifecycle,
        };
        let handler = ConnectHandler {
            accept_elicitation_defaults: true,
        };
        let remote = Remote::connect(handler, &config, Some(authorizer)).await?;
        let mut lines = vec![format!("connected ({})", self.scenario)];
        let offer = connect::offer(&remote).await?;
        lines.push(format!("{} tools", offer.tools.len()));
        let calls: Vec<(String, Option<Map<String, Value>>)> = if self.context.tool_calls.is_empty()
        {
            offer
                .tools
                .iter()
                .map(|tool| (tool.name.to_string(), connect::sample_arguments(tool)))
                .collect()
        } else {
            self.context
                .tool_calls
                .iter()
                .map(|call| (call.name.clone(), call.arguments.clone()))
                .collect()
        };
        for (name, arguments) in calls {
            match connect::call(&remote, &name, arguments).await {
                Ok(result) => lines.push(format!(
                    "called {name}: {}",
                    if result.is_error == Some(true) {
                        "tool error"
                    } else {
                        "ok"
                    }
                )),
                Err(RemoteError::OAuth(error)) => {
                    remote.close().await;
                    return Err(RemoteError::OAuth(error));
                }
                Err(error) => lines.push(format!("called {name}: {error}")),
            }
        }
        remote.close().await;
        Ok(lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suite_environment_picks_the_wire_and_the_identities() {
        let env = |name: &str| match name {
            "MCP_CONFORMANCE_SCENARIO" => Some("auth/pre-registration".to_owned()),
            "MCP_CONFORMANCE_PROTOCOL_VERSION" => Some("2026-07-28".to_owned()),
            "MCP_CONFORMANCE_CONTEXT" => Some(
                r#"{"name": "auth/pre-registration", "client_id": "id", "client_secret": "s",
                    "toolCalls": [{"name": "t", "arguments": {"x": 1}}]}"#
                    .to_owned(),
            ),
            _ => None,
        };
        let run = ConformanceRun::from_env(&env);
        assert_eq!(run.scenario, "auth/pre-registration");
        assert_eq!(run.lifecycle, Lifecycle::Discover);
        assert_eq!(run.context.client_id.as_deref(), Some("id"));
        assert_eq!(run.context.tool_calls[0].name, "t");

        let run = ConformanceRun::from_env(&|_| None);
        assert_eq!(run.lifecycle, Lifecycle::Initialize);
        assert!(run.context.tool_calls.is_empty());
    }
}
