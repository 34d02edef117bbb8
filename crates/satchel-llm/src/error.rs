//! [`LlmError`]: everything that can go wrong between Satchel and a model,
//! in words that tell the user what to do.

use std::time::Duration;

use crate::response::Response;

/// A failed model call. Each variant says who produces it and whether
/// [`LlmError::is_retryable`] holds; the request driver retries those by
/// itself (within `maxRetries`), so a caller sees them only once retries are
/// spent.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The `llm` configuration cannot work (unknown provider, bad URL, a key
    /// written into agent.json); produced before any request; not retryable.
    #[error("LLM configuration: {message}")]
    Config {
        /// What is wrong and how to fix it.
        message: String,
    },
    /// The provider needs an API key and the named environment variable is
    /// empty or unset; produced before any request; not retryable.
    #[error(
        "{provider} needs an API key and ${env_var} is not set; export it, or name another \
         variable in `llm.apiKeyEnv` in .agents/agent.json"
    )]
    MissingApiKey {
        /// The provider's name, e.g. `Anthropic`.
        provider: String,
        /// The variable the key is read from.
        env_var: String,
    },
    /// The server answered 401 or 403: the key is wrong, expired or lacks
    /// access; not retryable.
    #[error("{}", unauthorized_message(*.status, key_env.as_deref(), url, message))]
    Unauthorized {
        /// 401 or 403.
        status: u16,
        /// The variable the key came from, when one was sent.
        key_env: Option<String>,
        /// The base URL that refused it.
        url: String,
        /// The server's own words.
        message: String,
    },
    /// The server answered 404: usually an unknown model (or a base URL
    /// that is not an API root); not retryable.
    #[error(
        "{url} does not know the model `{model}` (404: {message}); check `llm.model` or \
         SATCHEL_MODEL{hint}"
    )]
    ModelNotFound {
        /// The model asked for.
        model: String,
        /// The base URL.
        url: String,
        /// The server's own words.
        message: String,
        /// A provider-specific hint, e.g. `ollama pull`.
        hint: String,
    },
    /// The server answered 429 on every attempt; retryable later.
    #[error(
        "{url} is rate limiting this key (429 after {attempts} attempt(s){}): {message}",
        retry_after.map(|d| format!(", asks to wait {} s", d.as_secs())).unwrap_or_default()
    )]
    RateLimited {
        /// The base URL.
        url: String,
        /// Attempts made.
        attempts: u32,
        /// What the server asked for in `Retry-After`, if anything.
        retry_after: Option<Duration>,
        /// The server's own words.
        message: String,
    },
    /// The server failed (5xx, Anthropic's 529 "overloaded") on every
    /// attempt; retryable later.
    #[error("{url} failed with {status} after {attempts} attempt(s): {message}")]
    Server {
        /// The base URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// Attempts made.
        attempts: u32,
        /// The server's own words.
        message: String,
    },
    /// The server refused the request as malformed or too large (400, 413,
    /// 422...), e.g. a prompt longer than the context window; not retryable.
    #[error("{url} rejected the request ({status}): {message}")]
    Rejected {
        /// The base URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The server's own words.
        message: String,
    },
    /// Nothing answered at the base URL (connection refused, unknown host,
    /// TLS failure) on every attempt; retryable.
    #[error("{}", connect_message(url, *.default_endpoint, detail))]
    Connect {
        /// The base URL.
        url: String,
        /// True when the URL is Satchel's default (a local Ollama) because
        /// nothing was configured.
        default_endpoint: bool,
        /// The transport's reason.
        detail: String,
    },
    /// The server did not answer, or went silent mid-stream, for longer
    /// than `requestTimeoutSecs`; retryable unless content had arrived.
    #[error(
        "{url} sent nothing for {} s ({what}); raise `llm.requestTimeoutSecs` for slow local models",
        after.as_secs()
    )]
    Timeout {
        /// The base URL.
        url: String,
        /// The limit that ran out.
        after: Duration,
        /// What was awaited: the response, or the next part of a stream.
        what: &'static str,
    },
    /// The stream stopped before the model finished (connection cut, read
    /// error, silence). `partial` holds what had arrived, marked
    /// [`StopReason::Interrupted`](crate::StopReason::Interrupted), without
    /// tool calls whose arguments were incomplete; not retried (content had
    /// been delivered).
    #[error("the answer from {url} was cut off: {reason}")]
    Interrupted {
        /// The base URL.
        url: String,
        /// Why the stream stopped.
        reason: String,
        /// The answer so far.
        partial: Box<Response>,
    },
    /// The response ended without the provider saying the answer was
    /// finished (no `finish_reason`, no `stop_reason`/`message_stop`, a
    /// closed connection) before anything of it was delivered; retryable,
    /// since nothing reached the caller.
    #[error("the answer from {url} was incomplete: {reason}")]
    Incomplete {
        /// The base URL.
        url: String,
        /// How it ended.
        reason: String,
    },
    /// The provider reported an error inside a successful response (an SSE
    /// `error` event, an `error` object); retryable when its type says
    /// overloaded and no content had arrived yet.
    #[error("{url} reported an error ({kind}): {message}")]
    Provider {
        /// The base URL.
        url: String,
        /// The provider's error type, e.g. `overloaded_error`.
        kind: String,
        /// The provider's message.
        message: String,
    },
    /// The response is not the documented wire format (bad JSON, missing
    /// fields): a server that only claims compatibility; not retryable.
    #[error("{url} answered in a format Satchel does not understand: {detail}")]
    InvalidResponse {
        /// The base URL.
        url: String,
        /// What was wrong.
        detail: String,
    },
    /// A replayed run asked the model something its cassette does not
    /// hold: a request that differs from the recorded one (the message
    /// names it and the first difference), or one more request than were
    /// recorded; not retryable.
    #[error("replay failed: {message}")]
    Cassette {
        /// Which request, and where it differs.
        message: String,
    },
    /// The caller cancelled the request; not retryable.
    #[error("the model request was cancelled")]
    Cancelled,
}

impl LlmError {
    /// True when trying the same request again later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::RateLimited { .. }
            | LlmError::Server { .. }
            | LlmError::Connect { .. }
            | LlmError::Timeout { .. }
            | LlmError::Incomplete { .. } => true,
            LlmError::Provider { kind, .. } => is_overload_kind(kind),
            LlmError::Config { .. }
            | LlmError::MissingApiKey { .. }
            | LlmError::Unauthorized { .. }
            | LlmError::ModelNotFound { .. }
            | LlmError::Rejected { .. }
            | LlmError::Interrupted { .. }
            | LlmError::InvalidResponse { .. }
            | LlmError::Cassette { .. }
            | LlmError::Cancelled => false,
        }
    }

    /// The answer received before a stream was cut, if this is that error.
    pub fn partial_response(&self) -> Option<&Response> {
        match self {
            LlmError::Interrupted { partial, .. } => Some(partial),
            _ => None,
        }
    }
}

/// True for provider error types that mean "busy, try again".
pub(crate) fn is_overload_kind(kind: &str) -> bool {
    matches!(
        kind,
        "overloaded_error" | "rate_limit_error" | "api_error" | "server_error" | "overloaded"
    )
}

fn unauthorized_message(status: u16, key_env: Option<&str>, url: &str, message: &str) -> String {
    match key_env {
        Some(var) => format!(
            "the API key in ${var} was rejected by {url} ({status}: {message}); check it, or name \
             the right variable in `llm.apiKeyEnv`"
        ),
        None => format!(
            "{url} requires an API key ({status}: {message}); export it and name the variable in \
             `llm.apiKeyEnv` (OPENAI_API_KEY and ANTHROPIC_API_KEY are read by default)"
        ),
    }
}

fn connect_message(url: &str, default_endpoint: bool, detail: &str) -> String {
    if default_endpoint {
        format!(
            "nothing answers at {url} (the default, a local Ollama: {detail}). Point Satchel at a \
             model: set `llm` in .agents/agent.json, or SATCHEL_MODEL and \
             OPENAI_BASE_URL/OPENAI_API_KEY, or ANTHROPIC_API_KEY"
        )
    } else {
        format!(
            "cannot reach {url} ({detail}); check that the server runs and `llm.baseUrl` (or \
             OPENAI_BASE_URL) is right"
        )
    }
}
