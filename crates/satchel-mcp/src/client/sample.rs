//! A server's request for a model's answer (`sampling/createMessage`):
//! answered by whoever the front end puts in the [`SamplerSlot`] (the
//! REPL asks the person, then the configured model answers), refused with
//! the reason when nobody is there to agree (`satchel run`, `mcp serve`,
//! a bot), never answered in silence.

// Sampling left the newest revision (SEP-2577); older servers still ask.
#![allow(deprecated)]

use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use rmcp::ErrorData;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, Role, SamplingContent, SamplingMessage,
    SamplingMessageContentBlock,
};

/// One message of a sampling request, as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// Its text; a part that is not text is described in brackets.
    pub text: String,
}

/// A server's request for a model's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleRequest {
    /// The server's name in mcp.json.
    pub server: String,
    /// The system prompt the server asks for, if any.
    pub system_prompt: Option<String>,
    /// The conversation to answer.
    pub messages: Vec<SampleMessage>,
    /// The most tokens the answer may have.
    pub max_tokens: u32,
}

/// A model's answer to a [`SampleRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sampled {
    /// The model's name.
    pub model: String,
    /// Its text.
    pub text: String,
}

/// Whoever can answer sampling requests: asks the person, then the model.
#[async_trait]
pub trait Sampler: Send + Sync {
    /// The answer, or why there is none (the person declined, the model
    /// failed), in words the server can pass on.
    async fn sample(&self, request: SampleRequest) -> Result<Sampled, String>;
}

/// The sampler in force, set by a front end after the servers started.
pub type SamplerSlot = Arc<RwLock<Option<Arc<dyn Sampler>>>>;

/// Answers a server's `sampling/createMessage` through `slot`.
pub(crate) async fn answer(
    slot: &SamplerSlot,
    server: &str,
    params: CreateMessageRequestParams,
) -> Result<CreateMessageResult, ErrorData> {
    let sampler = slot.read().unwrap_or_else(|p| p.into_inner()).clone();
    let Some(sampler) = sampler else {
        return Err(ErrorData::invalid_request(
            "Satchel answers sampling requests only where a person can agree to each (its \
             REPL); here (`satchel run`, `mcp serve`, a bot) nobody can, so it was refused",
            None,
        ));
    };
    let request = SampleRequest {
        server: server.to_owned(),
        system_prompt: params.system_prompt.clone(),
        messages: params.messages.iter().map(message_text).collect(),
        max_tokens: params.max_tokens,
    };
    match sampler.sample(request).await {
        Ok(sampled) => Ok(CreateMessageResult::new(
            SamplingMessage::assistant_text(sampled.text),
            sampled.model,
        )
        .with_stop_reason(CreateMessageResult::STOP_REASON_END_TURN)),
        Err(reason) => Err(ErrorData::invalid_request(reason, None)),
    }
}

/// A message's text; other parts described.
fn message_text(message: &SamplingMessage) -> SampleMessage {
    let role = match message.role {
        Role::Assistant => "assistant",
        _ => "user",
    };
    let parts: Vec<String> = match &message.content {
        SamplingContent::Single(part) => vec![part_text(part)],
        SamplingContent::Multiple(parts) => parts.iter().map(part_text).collect(),
    };
    SampleMessage {
        role: role.to_owned(),
        text: parts.join("\n"),
    }
}

fn part_text(part: &SamplingMessageContentBlock) -> String {
    match part {
        SamplingMessageContentBlock::Text(text) => text.text.clone(),
        other => {
            let kind = serde_json::to_value(other)
                .ok()
                .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned))
                .unwrap_or_else(|| "non-text".to_owned());
            format!("[{kind} content: left out, Satchel samples text only]")
        }
    }
}
