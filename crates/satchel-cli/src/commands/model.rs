//! The configured model, as the commands use it before the agent loop
//! exists: a code generator for the `code` tool's `generate` jobs.
//!
//! The agent-loop issue moves model-side requests into `satchel-agent`.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use satchel_core::Message;
use satchel_llm::{ChatRequest, LlmConfig, Provider, connect};
use satchel_tools::Settings;
use satchel_tools::code::{CodeGenerator, GenerateRequest};
use tokio_util::sync::CancellationToken;

/// What the model is told when it writes code for a job.
const CODING_PROMPT: &str = "You are a careful programmer. Write complete, runnable code for the task. \
     Reply with one fenced code block, then one line on how to run it. No other prose.";

/// The configured model, or why there is none (a warning, not a failure).
pub(crate) fn provider(settings: &Settings) -> Result<Arc<dyn Provider>, String> {
    let (config, warning) = settings.section::<LlmConfig>("llm");
    if let Some(warning) = warning {
        return Err(warning);
    }
    let env: HashMap<String, String> = settings
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let resolved = config.resolve(&env).map_err(|e| e.to_string())?;
    connect(resolved).map_err(|e| e.to_string())
}

/// Writes code with the configured model, in a side conversation of its own.
pub(crate) struct ModelGenerator {
    pub(crate) provider: Arc<dyn Provider>,
}

#[async_trait]
impl CodeGenerator for ModelGenerator {
    fn name(&self) -> String {
        format!("model {}", self.provider.config().model)
    }

    async fn generate(
        &self,
        request: &GenerateRequest,
        cancel: &CancellationToken,
    ) -> Result<String, String> {
        let messages = [
            Message::system(CODING_PROMPT),
            Message::user(request.prompt()),
        ];
        let chat = ChatRequest::new(&messages, &[]);
        let response = self
            .provider
            .complete(&chat, cancel.clone())
            .await
            .map_err(|e| e.to_string())?;
        let text = response.text();
        if text.trim().is_empty() {
            return Err("the model answered with no text".into());
        }
        Ok(text)
    }
}
