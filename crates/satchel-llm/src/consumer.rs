//! [`schema_consumer`]: whose subset of JSON Schema a configured endpoint
//! takes for tool inputs, read from its provider and URL. Apart from
//! `connect` so that the providers that need it (`openai`) do not import
//! the module that picks them.

use satchel_core::portable::SchemaConsumer;

use crate::config::{ModelConfig, ProviderKind};

/// Whose subset of JSON Schema `config`'s endpoint takes for tool inputs:
/// Anthropic's; Gemini's behind Google's OpenAI-compatible endpoints
/// (`generativelanguage.googleapis.com`, Vertex AI's
/// `aiplatform.googleapis.com`); OpenAI's everywhere else (OpenAI itself,
/// and the llama.cpp, vLLM, Ollama and LM Studio servers that follow it).
pub fn schema_consumer(config: &ModelConfig) -> SchemaConsumer {
    match config.provider {
        ProviderKind::Anthropic => SchemaConsumer::Anthropic,
        ProviderKind::OpenAi => {
            let url = config.base_url.to_ascii_lowercase();
            let host = url.split_once("://").map_or(url.as_str(), |(_, rest)| rest);
            let host = host.split(['/', ':']).next().unwrap_or_default();
            if host.ends_with("generativelanguage.googleapis.com")
                || host.ends_with("aiplatform.googleapis.com")
            {
                SchemaConsumer::Gemini
            } else {
                SchemaConsumer::OpenAi
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::LlmConfig;

    #[test]
    fn googles_endpoints_take_geminis_subset() {
        let env = HashMap::from([("OPENAI_API_KEY".to_owned(), "k".to_owned())]);
        for (url, expected) in [
            (
                "https://generativelanguage.googleapis.com/v1beta/openai/",
                SchemaConsumer::Gemini,
            ),
            (
                "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/l/endpoints/openapi",
                SchemaConsumer::Gemini,
            ),
            ("http://127.0.0.1:8080/v1", SchemaConsumer::OpenAi),
            (
                "https://evil.example/generativelanguage.googleapis.com/v1",
                SchemaConsumer::OpenAi,
            ),
        ] {
            let config = LlmConfig {
                provider: Some(ProviderKind::OpenAi),
                base_url: Some(url.into()),
                ..LlmConfig::default()
            }
            .resolve(&env)
            .unwrap();
            assert_eq!(schema_consumer(&config), expected, "{url}");
        }
    }
}
