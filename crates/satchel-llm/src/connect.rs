//! [`connect`], the one place that picks a provider by configuration, and
//! [`native_tools_json`], a provider's tool definitions on their own
//! (whose schema subset an endpoint takes is [`crate::consumer`]'s). Kept
//! apart from `provider.rs` so that the trait does not depend on its
//! implementations: `provider` ← `openai`, `anthropic` ← `connect`.

use std::sync::Arc;

use satchel_core::ToolSpec;
use satchel_core::portable::SchemaConsumer;

use crate::LlmError;
use crate::anthropic::{self, AnthropicProvider};
use crate::config::{ModelConfig, ProviderKind};
use crate::openai::{self, OpenAiProvider};
use crate::provider::Provider;
use crate::request::BodyWriter;

/// The provider for `config`'s wire format.
pub fn connect(config: ModelConfig) -> Result<Arc<dyn Provider>, LlmError> {
    Ok(match config.provider {
        ProviderKind::OpenAi => Arc::new(OpenAiProvider::new(config)?),
        ProviderKind::Anthropic => Arc::new(AnthropicProvider::new(config)?),
    })
}

/// The tool definitions exactly as a provider's requests carry them for
/// `consumer`: the JSON array written after `"tools":` in the body, byte
/// for byte (what `satchel tools prompt --format native` shows and counts).
pub fn native_tools_json(consumer: SchemaConsumer, tools: &[ToolSpec]) -> Result<String, LlmError> {
    let mut w = BodyWriter::new(256 + tools.len() * 1024);
    match consumer {
        SchemaConsumer::Anthropic => anthropic::write_tools(&mut w, tools)?,
        SchemaConsumer::OpenAi | SchemaConsumer::Gemini | SchemaConsumer::Mcp => {
            openai::write_tools(&mut w, tools, consumer)?;
        }
    }
    Ok(w.into_text())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use satchel_core::Message;
    use serde_json::json;

    use super::*;
    use crate::LlmConfig;
    use crate::consumer::schema_consumer;
    use crate::request::{ChatRequest, Mode};

    #[test]
    fn native_tools_json_is_the_tools_array_of_a_real_body() {
        let tools = [ToolSpec {
            name: "bash".into(),
            title: Some("Bash".into()),
            description: "Run a command.".into(),
            input_schema: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
            output_schema: Some(json!({"type": "object"})),
            annotations: Default::default(),
            capabilities: Default::default(),
        }];
        let history = [Message::user("hi")];
        for (provider, key) in [
            (ProviderKind::OpenAi, "OPENAI_API_KEY"),
            (ProviderKind::Anthropic, "ANTHROPIC_API_KEY"),
        ] {
            let env = HashMap::from([(key.to_owned(), "k".to_owned())]);
            let config = LlmConfig {
                provider: Some(provider),
                ..LlmConfig::default()
            }
            .resolve(&env)
            .unwrap();
            let consumer = schema_consumer(&config);
            let prepared = connect(config)
                .unwrap()
                .prepare(&ChatRequest::new(&history, &tools), Mode::Whole)
                .unwrap();
            let body: serde_json::Value = serde_json::from_slice(&prepared.body).unwrap();
            let json = native_tools_json(consumer, &tools).unwrap();
            assert!(
                prepared.body_text().contains(&format!("\"tools\":{json}")),
                "{provider:?}: {json}"
            );
            assert_eq!(
                serde_json::from_str::<serde_json::Value>(&json).unwrap(),
                body["tools"]
            );
        }
    }

    /// Anthropic refuses a whole request for one tool with a combinator at
    /// its input schema's root; no provider's request carries one.
    #[test]
    fn every_request_carries_each_schema_in_its_providers_form() {
        let conditional = ToolSpec {
            name: "memory".into(),
            title: None,
            description: "Remember.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"action": {"enum": ["store", "list"]}, "content": {"type": "string"}},
                "required": ["action"],
                "allOf": [{"if": {"properties": {"action": {"const": "store"}}}, "then": {"required": ["content"]}}]
            }),
            output_schema: None,
            annotations: Default::default(),
            capabilities: Default::default(),
        };
        let not_an_object = ToolSpec {
            name: "odd".into(),
            input_schema: json!({"type": "string"}),
            ..conditional.clone()
        };
        let tools = [conditional, not_an_object];
        for consumer in [
            SchemaConsumer::Anthropic,
            SchemaConsumer::OpenAi,
            SchemaConsumer::Gemini,
        ] {
            let json: serde_json::Value =
                serde_json::from_str(&native_tools_json(consumer, &tools).unwrap()).unwrap();
            let sent = json.as_array().unwrap();
            assert_eq!(
                sent.len(),
                1,
                "{consumer}: the unportable tool is left out: {json:#}"
            );
            let schema = sent[0]
                .get("input_schema")
                .unwrap_or(&sent[0]["function"]["parameters"]);
            assert_eq!(schema.get("allOf"), None, "{consumer}: {schema:#}");
            assert_eq!(
                schema["properties"]["content"]["description"],
                "Required when `action` is `store`.",
                "{consumer}"
            );
        }
    }
}
