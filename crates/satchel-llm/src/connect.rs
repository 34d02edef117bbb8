//! [`connect`], the one place that picks a provider by configuration, and
//! [`native_tools_json`], a provider's tool definitions on their own. Kept
//! apart from `provider.rs` so that the trait does not depend on its
//! implementations: `provider` ← `openai`, `anthropic` ← `connect`.

use std::sync::Arc;

use satchel_core::ToolSpec;

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

/// The tool definitions exactly as `provider`'s requests carry them: the
/// JSON array written after `"tools":` in the body, byte for byte (what
/// `satchel tools prompt --format native` shows and counts).
pub fn native_tools_json(provider: ProviderKind, tools: &[ToolSpec]) -> Result<String, LlmError> {
    let mut w = BodyWriter::new(256 + tools.len() * 1024);
    match provider {
        ProviderKind::OpenAi => openai::write_tools(&mut w, tools)?,
        ProviderKind::Anthropic => anthropic::write_tools(&mut w, tools)?,
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
            let prepared = connect(config)
                .unwrap()
                .prepare(&ChatRequest::new(&history, &tools), Mode::Whole)
                .unwrap();
            let body: serde_json::Value = serde_json::from_slice(&prepared.body).unwrap();
            let json = native_tools_json(provider, &tools).unwrap();
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
}
