//! The configured model as tools use it outside a conversation: a code
//! generator for the `code` tool's `generate` jobs, and the summary of a
//! memory session that ends. (The agent loop's own side requests live in
//! `satchel-agent`.)

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use satchel_agent::SIDE_PREFIX;
use satchel_builtins::code::{CodeGenerator, GenerateRequest};
use satchel_core::Message;
use satchel_llm::{ChatRequest, LlmConfig, Provider, connect};
use satchel_memory::Summarizer;
use satchel_store::{MemoryRecord, MemorySession};
use satchel_tools::Settings;
use tokio_util::sync::CancellationToken;

/// What the model is told when it writes code for a job.
const CODING_PROMPT: &str = "You are a careful programmer. Write complete, runnable code for the task. \
     Reply with one fenced code block, then one line on how to run it. No other prose.";

/// The configured model, or why there is none (a warning, not a failure).
pub fn provider(settings: &Settings) -> Result<Arc<dyn Provider>, String> {
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
pub struct ModelGenerator {
    /// The configured model.
    pub provider: Arc<dyn Provider>,
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

/// What the model is told when it summarises a memory session.
const SESSION_PROMPT: &str = "Task: summarise what these memories of one session say, for the assistant's \
     future reference: facts, decisions, open threads. A few sentences; keep exact names and numbers.";

/// Summarises ended memory sessions with the configured model, connected
/// on first use (commands that never end a session never connect).
pub struct ModelSummarizer {
    settings: Settings,
    provider: tokio::sync::OnceCell<Result<Arc<dyn Provider>, String>>,
}

impl ModelSummarizer {
    /// A summarizer with the model `settings` configure.
    pub fn new(settings: Settings) -> ModelSummarizer {
        ModelSummarizer {
            settings,
            provider: tokio::sync::OnceCell::new(),
        }
    }
}

#[async_trait]
impl Summarizer for ModelSummarizer {
    async fn summarize(
        &self,
        session: &MemorySession,
        memories: &[MemoryRecord],
    ) -> Result<String, String> {
        let provider = self
            .provider
            .get_or_init(|| async { provider(&self.settings) })
            .await
            .clone()?;
        let mut material = format!(
            "Session {}{}:\n",
            session.id,
            session
                .name
                .as_deref()
                .map(|name| format!(" ({name})"))
                .unwrap_or_default()
        );
        for memory in memories {
            material.push_str("- ");
            material.push_str(&memory.content);
            material.push('\n');
        }
        let messages = [
            Message::system(format!("{SIDE_PREFIX}\n{SESSION_PROMPT}")),
            Message::user(material),
        ];
        let mut chat = ChatRequest::new(&messages, &[]);
        chat.max_output_tokens = Some(600);
        let response = provider
            .complete(&chat, CancellationToken::new())
            .await
            .map_err(|e| e.to_string())?;
        let text = response.text();
        if text.trim().is_empty() {
            return Err("the model answered with no text".into());
        }
        Ok(text.trim().to_owned())
    }
}
