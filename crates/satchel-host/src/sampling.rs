//! A server's sampling request (`sampling/createMessage`) answered by the
//! configured model once the person agrees: [`ModelSampler`], which the
//! REPL puts in the MCP manager's slot with its prompt as the
//! [`SamplingConsent`]. Nowhere else is there a person to agree, so
//! elsewhere requests are refused with the reason.

use std::sync::Arc;

use async_trait::async_trait;
use satchel_core::Message;
use satchel_llm::{ChatRequest, Provider};
use satchel_mcp::client::{SampleRequest, Sampled, Sampler};
use satchel_tools::Settings;
use tokio_util::sync::CancellationToken;

/// Asks the person whether a server may have the model answer it.
#[async_trait]
pub trait SamplingConsent: Send + Sync {
    /// Whether the person agrees to `request` being sent to the model.
    async fn agree(&self, request: &SampleRequest) -> bool;
}

/// Answers sampling requests with the configured model, connected on
/// first use, after [`SamplingConsent::agree`].
pub struct ModelSampler {
    settings: Settings,
    consent: Arc<dyn SamplingConsent>,
    provider: tokio::sync::OnceCell<Result<Arc<dyn Provider>, String>>,
}

impl ModelSampler {
    /// A sampler with the model `settings` configure, asking `consent`.
    pub fn new(settings: Settings, consent: Arc<dyn SamplingConsent>) -> ModelSampler {
        ModelSampler {
            settings,
            consent,
            provider: tokio::sync::OnceCell::new(),
        }
    }
}

#[async_trait]
impl Sampler for ModelSampler {
    async fn sample(&self, request: SampleRequest) -> Result<Sampled, String> {
        if !self.consent.agree(&request).await {
            return Err("the user declined to let the model answer this request".into());
        }
        let provider = self
            .provider
            .get_or_init(|| async { crate::model::provider(&self.settings) })
            .await
            .clone()
            .map_err(|why| format!("no model to answer with: {why}"))?;
        let mut messages = Vec::new();
        if let Some(system) = &request.system_prompt {
            messages.push(Message::system(system.clone()));
        }
        for message in &request.messages {
            messages.push(if message.role == "assistant" {
                Message::assistant(message.text.clone())
            } else {
                Message::user(message.text.clone())
            });
        }
        let chat = ChatRequest::new(&messages, &[]);
        let response = provider
            .complete(&chat, CancellationToken::new())
            .await
            .map_err(|e| format!("the model failed: {e}"))?;
        let text = response.text();
        if text.trim().is_empty() {
            return Err("the model answered with no text".into());
        }
        Ok(Sampled {
            model: response
                .model
                .unwrap_or_else(|| provider.config().model.clone()),
            text,
        })
    }
}
