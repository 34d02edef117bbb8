//! What imported servers offer besides tools: their resources and prompts,
//! for the model (the `mcp_resources` and `mcp_prompts` tools, published
//! with the imported tools while a running server declares the capability)
//! and for people ([`Offers`], behind the REPL's `/resources` and
//! `/prompts`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rmcp::model::{
    ContentBlock, GetPromptRequestParams, ReadResourceRequestParams, ResourceContents,
};
use rmcp::service::RoleClient;
use satchel_core::{Content, ErrorCode, ToolAnnotations, ToolOutput, ToolResults, ToolSpec};
use satchel_tools::{Tool, ToolContext, ToolError, ToolSource};
use serde_json::{Map, Value, json};

use super::link::Link;
use super::tool::GROUP;

/// The model's tool for servers' resources.
pub const RESOURCES_TOOL: &str = "mcp_resources";
/// The model's tool for servers' prompts.
pub const PROMPTS_TOOL: &str = "mcp_prompts";

/// The resources and prompts of the running servers that declare them.
#[derive(Clone)]
pub struct Offers {
    links: Arc<Vec<Arc<Link>>>,
}

/// One server's answer to a listing, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// The server's name.
    pub server: String,
    /// The entries, as the server sent them (JSON), or the failure.
    pub entries: Result<Vec<Value>, String>,
}

impl Offers {
    pub(crate) fn new(links: Arc<Vec<Arc<Link>>>) -> Offers {
        Offers { links }
    }

    /// The running servers that declare `resources` (or `prompts`), and
    /// their connection.
    fn declaring(&self, prompts: bool) -> Vec<(String, rmcp::Peer<RoleClient>, Duration)> {
        self.links
            .iter()
            .filter_map(|link| {
                let peer = link.peer()?;
                let capabilities = &peer.peer_info()?.capabilities;
                let declared = if prompts {
                    capabilities.prompts.is_some()
                } else {
                    capabilities.resources.is_some()
                };
                declared.then(|| (link.config.name.clone(), peer, link.config.call_timeout))
            })
            .collect()
    }

    /// Whether any running server declares resources (or prompts).
    pub fn any(&self, prompts: bool) -> bool {
        !self.declaring(prompts).is_empty()
    }

    /// Every declaring server's resources and resource templates.
    pub async fn resources(&self) -> Vec<Listed> {
        let mut listed = Vec::new();
        for (server, peer, timeout) in self.declaring(false) {
            let entries = within(timeout, async {
                let mut entries: Vec<Value> = peer
                    .list_all_resources()
                    .await
                    .map_err(|e| e.to_string())?
                    .iter()
                    .map(to_json)
                    .collect();
                // Templates are optional: a server may list none.
                if let Ok(templates) = peer.list_all_resource_templates().await {
                    entries.extend(templates.iter().map(to_json));
                }
                Ok(entries)
            })
            .await;
            listed.push(Listed { server, entries });
        }
        listed
    }

    /// Every declaring server's prompts.
    pub async fn prompts(&self) -> Vec<Listed> {
        let mut listed = Vec::new();
        for (server, peer, timeout) in self.declaring(true) {
            let entries = within(timeout, async {
                peer.list_all_prompts()
                    .await
                    .map(|prompts| prompts.iter().map(to_json).collect())
                    .map_err(|e| e.to_string())
            })
            .await;
            listed.push(Listed { server, entries });
        }
        listed
    }

    fn peer(
        &self,
        server: &str,
        prompts: bool,
    ) -> Result<(rmcp::Peer<RoleClient>, Duration), String> {
        self.declaring(prompts)
            .into_iter()
            .find(|(name, _, _)| name == server)
            .map(|(_, peer, timeout)| (peer, timeout))
            .ok_or_else(|| {
                format!(
                    "no running MCP server `{server}` offers {}; list them first",
                    if prompts { "prompts" } else { "resources" }
                )
            })
    }

    /// One resource's contents, as parts a model reads.
    pub async fn read(&self, server: &str, uri: &str) -> Result<Vec<Content>, String> {
        let (peer, timeout) = self.peer(server, false)?;
        let result = within(timeout, async {
            peer.read_resource(ReadResourceRequestParams::new(uri))
                .await
                .map_err(|e| format!("`{server}` could not read `{uri}`: {e}"))
        })
        .await?;
        Ok(result.contents.iter().map(resource_part).collect())
    }

    /// A prompt's messages, as `role: text` parts.
    pub async fn get(
        &self,
        server: &str,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<Vec<Content>, String> {
        let (peer, timeout) = self.peer(server, true)?;
        let mut params = GetPromptRequestParams::new(name);
        if !arguments.is_empty() {
            params = params.with_arguments(arguments);
        }
        let result = within(timeout, async {
            peer.get_prompt(params)
                .await
                .map_err(|e| format!("`{server}` could not give prompt `{name}`: {e}"))
        })
        .await?;
        let mut parts = Vec::new();
        if let Some(description) = result.description {
            parts.push(Content::Text { text: description });
        }
        for message in result.messages {
            let role = serde_json::to_value(&message.role)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            parts.push(match &message.content {
                ContentBlock::Text(text) => Content::Text {
                    text: format!("{role}: {}", text.text),
                },
                other => crate::convert::content_part(other),
            });
        }
        Ok(parts)
    }
}

/// `work`, or the reason it took longer than the server's call timeout
/// (a server that never answers, or pages without end, is cut there).
async fn within<T>(
    timeout: Duration,
    work: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    tokio::time::timeout(timeout, work)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "the server did not answer within {} s",
                timeout.as_secs_f64()
            ))
        })
}

fn to_json(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// A resource's contents as one part: text as text, an image as an image,
/// other bytes described (a model reads no raw bytes).
fn resource_part(contents: &ResourceContents) -> Content {
    match contents {
        ResourceContents::TextResourceContents { uri, text, .. } => Content::Text {
            text: format!("{uri}:\n{text}"),
        },
        ResourceContents::BlobResourceContents {
            mime_type: Some(mime),
            blob,
            ..
        } if mime.starts_with("image/") => Content::Image {
            mime_type: mime.clone(),
            data: blob.clone(),
        },
        ResourceContents::BlobResourceContents {
            uri,
            mime_type,
            blob,
            ..
        } => Content::Text {
            text: format!(
                "{uri}: {} bytes of {}, left out (binary)",
                blob.len() / 4 * 3,
                mime_type.as_deref().unwrap_or("unknown type")
            ),
        },
        other => Content::Json {
            json: to_json(other),
        },
    }
}

/// `mcp_resources` or `mcp_prompts`: the model's way to the offers.
pub(crate) struct OffersTool {
    offers: Offers,
    prompts: bool,
    spec: ToolSpec,
}

impl OffersTool {
    pub(crate) fn resources(offers: Offers) -> OffersTool {
        OffersTool {
            offers,
            prompts: false,
            spec: spec(
                RESOURCES_TOOL,
                "Resources",
                "Read what the MCP servers Satchel uses offer as resources (files, records, \
                 documents). `list` shows every server's resources and URI templates; `read` \
                 with `server` and `uri` returns one.",
                json!({
                    "type": "object",
                    "properties": {
                        "action": {"type": "string", "enum": ["list", "read"]},
                        "server": {"type": "string", "description": "The server's name (read)"},
                        "uri": {"type": "string", "description": "The resource's URI (read)"},
                    },
                    "required": ["action"],
                    "additionalProperties": false,
                }),
            ),
        }
    }

    pub(crate) fn prompts(offers: Offers) -> OffersTool {
        OffersTool {
            offers,
            prompts: true,
            spec: spec(
                PROMPTS_TOOL,
                "Prompts",
                "Use the prompt templates the MCP servers Satchel uses offer. `list` shows every \
                 server's prompts and their arguments; `get` with `server`, `name` and \
                 `arguments` returns a prompt's messages.",
                json!({
                    "type": "object",
                    "properties": {
                        "action": {"type": "string", "enum": ["list", "get"]},
                        "server": {"type": "string", "description": "The server's name (get)"},
                        "name": {"type": "string", "description": "The prompt's name (get)"},
                        "arguments": {"type": "object", "additionalProperties": {"type": "string"}},
                    },
                    "required": ["action"],
                    "additionalProperties": false,
                }),
            ),
        }
    }
}

fn spec(name: &str, title: &str, description: &str, input_schema: Value) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        title: Some(title.into()),
        description: description.into(),
        input_schema,
        output_schema: None,
        annotations: ToolAnnotations {
            read_only_hint: Some(true),
            open_world_hint: Some(true),
            ..ToolAnnotations::default()
        },
        capabilities: Default::default(),
    }
}

fn field<'a>(input: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    input.get(key).and_then(Value::as_str).ok_or_else(|| {
        ToolError::new(
            ErrorCode::InvalidParams,
            format!("this action needs `{key}`"),
        )
    })
}

#[async_trait]
impl Tool for OffersTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn source(&self) -> ToolSource {
        ToolSource::Extra {
            group: GROUP.into(),
            origin: "every server".into(),
        }
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        tokio::select! {
            done = self.act(&input) => done,
            () = ctx.cancel.cancelled() => Err(ToolError::new(
                ErrorCode::Cancelled,
                format!("`{}` was cancelled", self.spec.name),
            )),
        }
    }
}

impl OffersTool {
    async fn act(&self, input: &Value) -> Result<ToolOutput, ToolError> {
        let action = field(input, "action")?;
        let failed = |reason: String| ToolError::new(ErrorCode::ToolCrashed, reason);
        match (self.prompts, action) {
            (false, "list") | (true, "list") => {
                let listed = if self.prompts {
                    self.offers.prompts().await
                } else {
                    self.offers.resources().await
                };
                let servers: Vec<Value> = listed
                    .into_iter()
                    .map(|listed| match listed.entries {
                        Ok(entries) => json!({"server": listed.server, "entries": entries}),
                        Err(error) => json!({"server": listed.server, "error": error}),
                    })
                    .collect();
                let count = servers.len();
                Ok(ToolOutput::success(
                    ToolResults::json(json!({"servers": servers})),
                    format!("listed what {count} MCP server(s) offer"),
                ))
            }
            (false, "read") => {
                let (server, uri) = (field(input, "server")?, field(input, "uri")?);
                let parts = self.offers.read(server, uri).await.map_err(failed)?;
                Ok(ToolOutput::success(
                    ToolResults::Parts(parts),
                    format!("read `{uri}` from `{server}`"),
                ))
            }
            (true, "get") => {
                let (server, name) = (field(input, "server")?, field(input, "name")?);
                let arguments = input
                    .get("arguments")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                let parts = self
                    .offers
                    .get(server, name, arguments)
                    .await
                    .map_err(failed)?;
                Ok(ToolOutput::success(
                    ToolResults::Parts(parts),
                    format!("got prompt `{name}` from `{server}`"),
                ))
            }
            (_, other) => Err(ToolError::new(
                ErrorCode::InvalidParams,
                format!("unknown action `{other}`"),
            )),
        }
    }
}
