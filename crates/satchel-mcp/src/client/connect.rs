//! What `satchel mcp connect` does with a remote server: connect exactly
//! as Satchel's client would ([`Remote`], OAuth included), see what the
//! server offers, and call a tool. Printing is the CLI's.

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, ElicitationCapability, FormElicitationCapability,
    Implementation, Tool,
};
use rmcp::service::{RequestContext, RoleClient};
use rmcp::{ClientHandler, ErrorData};
use serde::Serialize;
use serde_json::{Map, Value};

use super::remote::{Remote, RemoteError};

/// The client side of `mcp connect`: no capabilities, unless it answers
/// elicitations with the schema's defaults (the conformance driver).
#[derive(Debug, Clone, Default)]
pub struct ConnectHandler {
    /// Accept every form elicitation, filled with the schema's defaults.
    pub accept_elicitation_defaults: bool,
}

impl ClientHandler for ConnectHandler {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.accept_elicitation_defaults {
            capabilities.elicitation = Some(
                ElicitationCapability::new()
                    .with_form(FormElicitationCapability::new().with_schema_validation(true)),
            );
        }
        ClientConfig::new(
            capabilities,
            Implementation::new("satchel", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if !self.accept_elicitation_defaults {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        }
        let defaults = match &request {
            ElicitRequestParams::FormElicitationParams {
                requested_schema, ..
            } => schema_defaults(&serde_json::to_value(requested_schema).unwrap_or_default()),
            _ => Map::new(),
        };
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(defaults)))
    }
}

/// Each property's `default`, by name.
fn schema_defaults(schema: &Value) -> Map<String, Value> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .iter()
                .filter_map(|(name, property)| {
                    Some((name.clone(), property.get("default")?.clone()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What a server offers.
#[derive(Debug, Clone, Serialize)]
pub struct Offer {
    /// The server's name and version.
    pub server: Option<Implementation>,
    /// The protocol version agreed on.
    pub protocol_version: Option<String>,
    /// The server's instructions for the model.
    pub instructions: Option<String>,
    /// Its tools.
    pub tools: Vec<Tool>,
}

/// Lists what the server behind `remote` offers.
pub async fn offer<H: ClientHandler>(remote: &Remote<H>) -> Result<Offer, RemoteError> {
    let info = remote.peer().peer_info();
    let tools = remote
        .with_auth(|peer| async move { peer.list_all_tools().await })
        .await?;
    Ok(Offer {
        server: info.as_ref().and_then(|i| i.server_info.clone()),
        protocol_version: info.as_ref().map(|i| i.protocol_version.to_string()),
        instructions: info.as_ref().and_then(|i| i.instructions.clone()),
        tools,
    })
}

/// Calls `tool` with `arguments` (an object, or nothing).
pub async fn call<H: ClientHandler>(
    remote: &Remote<H>,
    tool: &str,
    arguments: Option<Map<String, Value>>,
) -> Result<CallToolResult, RemoteError> {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    if let Some(arguments) = arguments {
        params = params.with_arguments(arguments);
    }
    remote.call_tool(params).await
}

/// Arguments for `tool` made up from its input schema: each required
/// property gets a value of its type (1, "test", true, [], {}).
pub fn sample_arguments(tool: &Tool) -> Option<Map<String, Value>> {
    let schema = &tool.input_schema;
    let properties = schema.get("properties").and_then(Value::as_object)?;
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut arguments = Map::new();
    for (name, property) in properties {
        if !required.contains(&name.as_str()) {
            continue;
        }
        let value = match property.get("type").and_then(Value::as_str) {
            Some("number" | "integer") => Value::from(1),
            Some("string") => Value::from("test"),
            Some("boolean") => Value::Bool(true),
            Some("array") => Value::Array(Vec::new()),
            Some("object") => Value::Object(Map::new()),
            _ => Value::Null,
        };
        arguments.insert(name.clone(), value);
    }
    Some(arguments)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn defaults_come_from_the_schema() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "note": {"type": "string"}
        }});
        assert_eq!(
            Value::Object(schema_defaults(&schema)),
            json!({"name": "John Doe", "age": 30})
        );
        assert!(schema_defaults(&json!("not a schema")).is_empty());
    }

    #[test]
    fn sample_arguments_fill_required_properties_by_type() {
        let tool: Tool = serde_json::from_value(json!({
            "name": "add_numbers",
            "inputSchema": {"type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}, "c": {"type": "string"}},
                "required": ["a", "b"]}
        }))
        .unwrap();
        assert_eq!(
            sample_arguments(&tool).map(Value::Object),
            Some(json!({"a": 1, "b": 1}))
        );
    }
}
