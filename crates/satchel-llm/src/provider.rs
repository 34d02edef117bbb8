//! The [`Provider`] trait every wire format implements, [`connect`],
//! which picks the implementation a [`ModelConfig`] names, and
//! [`native_tools_json`], a provider's tool definitions on their own.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use satchel_core::ToolSpec;
use tokio_util::sync::CancellationToken;

use crate::LlmError;
use crate::anthropic::AnthropicProvider;
use crate::config::{ModelConfig, ProviderKind};
use crate::http::{EventStream, collect};
use crate::openai::OpenAiProvider;
use crate::request::{BodyWriter, ChatRequest, Mode, PreparedRequest};
use crate::response::Response;

/// A model behind one wire format.
///
/// A call is two steps so that what is counted is what is sent:
/// [`Provider::prepare`] serialises the request once and counts its tokens;
/// [`Provider::send`] posts exactly those bytes. [`Provider::stream`] and
/// [`Provider::complete`] do both.
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// The configuration the provider runs with.
    fn config(&self) -> &ModelConfig;

    /// Serialises `request` into the body that [`Provider::send`] posts,
    /// with the token estimate counted on it.
    fn prepare(&self, request: &ChatRequest<'_>, mode: Mode) -> Result<PreparedRequest, LlmError>;

    /// Posts `prepared.body` and yields the answer's events, ending with
    /// [`StreamEvent::Done`](crate::StreamEvent::Done). A [`Mode::Whole`]
    /// request yields the same events once the whole answer is in.
    ///
    /// # Caveats
    /// Nothing happens until the stream is polled. Cancelling `cancel`, or
    /// dropping the stream, aborts the request at once, during a retry's
    /// backoff too.
    fn send(&self, prepared: &PreparedRequest, cancel: CancellationToken) -> EventStream;

    /// Prepares `request` for streaming and sends it.
    ///
    /// # Caveats
    /// As for [`Provider::send`].
    fn stream(
        &self,
        request: &ChatRequest<'_>,
        cancel: CancellationToken,
    ) -> Result<EventStream, LlmError> {
        let prepared = self.prepare(request, Mode::Stream)?;
        Ok(self.send(&prepared, cancel))
    }

    /// Prepares `request` without streaming, sends it and returns the answer.
    ///
    /// # Caveats
    /// Cancelling `cancel`, or dropping the future, aborts the request at once.
    fn complete(
        &self,
        request: &ChatRequest<'_>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<Response, LlmError>> {
        match self.prepare(request, Mode::Whole) {
            Ok(prepared) => Box::pin(collect(self.send(&prepared, cancel))),
            Err(error) => Box::pin(async move { Err(error) }),
        }
    }
}

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
        ProviderKind::OpenAi => crate::openai::write_tools(&mut w, tools)?,
        ProviderKind::Anthropic => crate::anthropic::write_tools(&mut w, tools)?,
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
