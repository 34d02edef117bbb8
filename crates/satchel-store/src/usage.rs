//! Records and repository of model requests: Satchel's token estimate
//! beside the provider's reported usage, one row per request sent.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{StoreError, Timestamp};

/// What a caller gives to record one request to a model (and, inside an
/// [`LlmCallRecord`], what was recorded).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NewLlmCall {
    /// The conversation, when there is one.
    pub conversation_id: Option<String>,
    /// The statement, when there is one.
    pub statement_id: Option<String>,
    /// The turn within the statement, for main requests.
    pub turn: Option<u32>,
    /// Why it was sent: `turn`, `goal`, `objective`, `title`, `summary`...
    pub purpose: String,
    /// The wire format (`openai`, `anthropic`).
    pub provider: String,
    /// The model asked.
    pub model: String,
    /// Input tokens Satchel counted on the request's bytes.
    pub estimate_tokens: u64,
    /// The estimate per section (system, tools, messages...), as JSON.
    pub estimate_sections: Value,
    /// The model's context window, as configured.
    pub context_window: u64,
    /// Input tokens the provider reported, when it did.
    pub input_tokens: Option<u64>,
    /// Output tokens the provider reported, when it did.
    pub output_tokens: Option<u64>,
    /// Prompt-cache reads the provider reported.
    pub cache_read_tokens: Option<u64>,
    /// Prompt-cache writes the provider reported.
    pub cache_write_tokens: Option<u64>,
    /// Why the model stopped, when it answered.
    pub stop_reason: Option<String>,
    /// What went wrong, when the request failed.
    pub error: Option<String>,
    /// Wall time of the request, first byte sent to last byte read.
    pub duration_ms: u64,
}

/// One stored request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmCallRecord {
    /// Store-assigned id.
    pub id: String,
    /// The request as recorded.
    #[serde(flatten)]
    pub call: NewLlmCall,
    /// When it was recorded.
    pub created_at: Timestamp,
}

/// Requests sent to models, with estimate and reported usage side by side.
#[async_trait]
pub trait LlmCallStore: Send + Sync {
    /// Records one request; returns its id.
    async fn record_llm_call(&self, new: NewLlmCall) -> Result<String, StoreError>;

    /// A conversation's requests, oldest first.
    async fn llm_calls(&self, conversation_id: &str) -> Result<Vec<LlmCallRecord>, StoreError>;

    /// The latest `limit` requests to `model` whose server reported input
    /// tokens, newest first: `(estimate, reported)` pairs, from which an
    /// estimate is calibrated to the model's own tokenizer.
    async fn usage_samples(
        &self,
        model: &str,
        limit: usize,
    ) -> Result<Vec<UsageSample>, StoreError>;
}

/// Satchel's estimate of a request's input tokens beside the server's count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageSample {
    /// Counted by Satchel on the bytes sent.
    pub estimate_tokens: u64,
    /// Reported by the server.
    pub input_tokens: u64,
}
