//! Configuration: the `llm` section of agent.json ([`LlmConfig`]) and the
//! settings a provider runs with once the environment is applied
//! ([`ModelConfig`]).
//!
//! The environment is passed in as a map, never read here. Precedence, for
//! each setting:
//! - provider: `llm.provider`; else `claude-*` models go to Anthropic (when
//!   no OpenAI base URL is set); else OpenAI-compatible when `llm.baseUrl`,
//!   `OPENAI_BASE_URL` or `OPENAI_API_KEY` is set; else Anthropic when
//!   `ANTHROPIC_API_KEY` is set; else a local Ollama.
//! - model: `SATCHEL_MODEL`, then `llm.model`, then the provider's default.
//! - base URL: `llm.baseUrl`, then `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL`,
//!   then `https://api.openai.com/v1` when `OPENAI_API_KEY` is set, then
//!   Ollama's `http://127.0.0.1:11434/v1` (or `https://api.anthropic.com`).
//! - API key: the variable named by `llm.apiKeyEnv`, by default
//!   `OPENAI_API_KEY` or `ANTHROPIC_API_KEY`. A key is never read from
//!   agent.json.
//! - tool calling: `llm.toolCalling`, by default `auto`; see
//!   [`ModelConfig::tool_mode`] for what `auto` decides.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::Duration;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use crate::LlmError;
use crate::encoding::Encoding;
use crate::limits::{LimitSource, derived_output_limit};
use crate::models::model_info;

/// Where a local Ollama answers, Satchel's default when nothing is configured.
pub const DEFAULT_OLLAMA_URL: &str = "http://127.0.0.1:11434/v1";
/// OpenAI's API root.
pub const OPENAI_URL: &str = "https://api.openai.com/v1";
/// Anthropic's API root.
pub const ANTHROPIC_URL: &str = "https://api.anthropic.com";
/// The model asked of a local Ollama when none is configured.
pub const DEFAULT_OLLAMA_MODEL: &str = "llama3.2";
/// The model asked of OpenAI when none is configured.
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4.1-mini";
/// The model asked of Anthropic when none is configured.
pub const DEFAULT_ANTHROPIC_MODEL: &str = "claude-sonnet-4-5";

/// Largest answer asked of Anthropic (which requires a figure) when the
/// model's own maximum is larger and none is configured: long enough for
/// real work, short enough that a non-streaming call stays reasonable.
pub(crate) const ANTHROPIC_DEFAULT_MAX_OUTPUT: u32 = 16_384;

/// Which wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI Chat Completions: OpenAI, Ollama, vLLM, llama.cpp server,
    /// OpenRouter, LiteLLM...
    #[serde(alias = "openai-compatible", alias = "ollama")]
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

impl ProviderKind {
    /// The provider's name for people, e.g. `Anthropic`.
    pub fn display_name(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "the OpenAI-compatible server",
            ProviderKind::Anthropic => "Anthropic",
        }
    }
}

/// How a model is given tools: the `toolCalling` setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ToolCalling {
    /// The provider's own tool calling: tool definitions in the request,
    /// calls as structured parts of the answer.
    Native,
    /// Tools described in the system prompt, calls read from the model's
    /// text (see [`crate::prompted`]); works with every model.
    Prompted,
    /// Native when the provider and model are known to support it, else
    /// prompted (see [`ModelConfig::tool_mode`]).
    #[default]
    Auto,
}

/// Whether prompted-mode replies are constrained to the reply schema
/// (`constrainedReplies`): a small local model's reply then always parses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ConstrainedReplies {
    /// On for OpenAI-compatible servers in prompted mode; dropped for the
    /// rest of the session, with a notice, if the server refuses it.
    #[default]
    Auto,
    /// Always sent in prompted mode; a server that refuses it fails the turn.
    On,
    /// Never sent.
    Off,
}

/// How the reply schema is written into an OpenAI-compatible request
/// (`replyFormat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ReplyFormat {
    /// `response_format: {"type": "json_schema", "json_schema": {...}}`:
    /// OpenAI, vLLM, Ollama, llama.cpp's `llama-server`.
    JsonSchema,
    /// `response_format: {"type": "json_object", "schema": {...}}`:
    /// llama.cpp's servers (`llama-cpp-python` knows only this form).
    JsonObject,
}

impl ReplyFormat {
    /// The setting's value, e.g. `jsonObject`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReplyFormat::JsonSchema => "jsonSchema",
            ReplyFormat::JsonObject => "jsonObject",
        }
    }
}

/// How tools are given to the model for one request: [`ToolCalling`] with
/// `auto` decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ToolMode {
    /// Tool definitions in the request (`ChatRequest::tools`).
    Native,
    /// Tools in the system prompt (`prompted::render_tools`), an empty
    /// `ChatRequest::tools`, calls parsed from the text.
    Prompted,
}

impl ToolMode {
    /// `native` or `prompted`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolMode::Native => "native",
            ToolMode::Prompted => "prompted",
        }
    }
}

/// The `llm` section of agent.json (camelCase keys; every key optional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct LlmConfig {
    /// `openai` (any Chat Completions server) or `anthropic`.
    pub provider: Option<ProviderKind>,
    /// API root, e.g. `http://127.0.0.1:11434/v1` or `https://api.anthropic.com`.
    pub base_url: Option<String>,
    /// Model name as the server knows it.
    pub model: Option<String>,
    /// Name of the environment variable that holds the API key.
    pub api_key_env: Option<String>,
    /// Never used: present only to refuse a key written into the file
    /// (its value is dropped unread).
    #[serde(skip_serializing)]
    pub api_key: Option<IgnoredAny>,
    /// Seconds to wait for a response to start, and for each part of a
    /// stream (default 300: local models can take long to load).
    pub request_timeout_secs: Option<u64>,
    /// Seconds to wait for a connection (default 10).
    pub connect_timeout_secs: Option<u64>,
    /// Largest answer to ask for.
    pub max_output_tokens: Option<u32>,
    /// The model's context window, when the built-in table is wrong or
    /// does not know the model.
    pub context_window: Option<u32>,
    /// Retries after a 429, a 5xx, a timeout or a refused connection
    /// (default 3).
    pub max_retries: Option<u32>,
    /// First retry delay in milliseconds, doubled each time (default 500).
    pub retry_base_delay_ms: Option<u64>,
    /// Longest wait between attempts in milliseconds, also the most of a
    /// server's `Retry-After` that is honoured (default 60000).
    pub retry_max_delay_ms: Option<u64>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Anthropic extended thinking: tokens the model may think with.
    pub thinking_budget_tokens: Option<u32>,
    /// OpenAI reasoning models: `minimal`, `low`, `medium` or `high`.
    pub reasoning_effort: Option<String>,
    /// Extra HTTP headers sent with every request (e.g. OpenRouter's
    /// `HTTP-Referer`). Not for secrets: this file is not secret.
    pub headers: BTreeMap<String, String>,
    /// `native`, `prompted` or `auto` (the default).
    pub tool_calling: Option<ToolCalling>,
    /// `auto` (the default), `on` or `off`: see [`ConstrainedReplies`].
    pub constrained_replies: Option<ConstrainedReplies>,
    /// `jsonSchema` or `jsonObject`; by default `jsonObject` on a private
    /// endpoint other than Ollama's port, `jsonSchema` elsewhere.
    pub reply_format: Option<ReplyFormat>,
    /// Whether main turns stream (default true); `false` asks for whole
    /// answers, for servers whose streaming is broken.
    pub stream: Option<bool>,
    /// `auto` (the default), `satchel` or `native`: see
    /// [`EditToolSetting`](crate::EditToolSetting).
    pub edit_tool: Option<crate::EditToolSetting>,
}

/// An API key read from the environment; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// The variable it came from.
    pub env_var: String,
    value: String,
}

impl ApiKey {
    /// A key read from `env_var`.
    pub fn new(env_var: impl Into<String>, value: impl Into<String>) -> ApiKey {
        ApiKey {
            env_var: env_var.into(),
            value: value.into(),
        }
    }

    /// The secret itself, for the request header.
    pub fn expose(&self) -> &str {
        &self.value
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApiKey(${} = <redacted>)", self.env_var)
    }
}

/// When and how often a failed request is tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// Delay before the first retry (before jitter); doubles each time.
    pub base_delay: Duration,
    /// Longest delay; a `Retry-After` beyond it ends the retries.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_retries: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(60),
        }
    }
}

/// Everything a provider needs, resolved from [`LlmConfig`] and the
/// environment.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// The wire format.
    pub provider: ProviderKind,
    /// API root without a trailing slash.
    pub base_url: String,
    /// True when `base_url` is the local-Ollama default because nothing
    /// was configured (changes the connection error's advice).
    pub default_endpoint: bool,
    /// Model name.
    pub model: String,
    /// The variable the key is (or would be) read from.
    pub api_key_env: String,
    /// The key, when that variable is set.
    pub api_key: Option<ApiKey>,
    /// See [`LlmConfig::request_timeout_secs`].
    pub request_timeout: Duration,
    /// See [`LlmConfig::connect_timeout_secs`].
    pub connect_timeout: Duration,
    /// Largest answer to ask for: configured, else derived from the
    /// window and the model's own limit ([`derived_output_limit`]).
    pub max_output_tokens: Option<u32>,
    /// Where `max_output_tokens` came from.
    pub output_source: LimitSource,
    /// The context window the estimate's share is computed against.
    pub context_window: u32,
    /// Where `context_window` came from.
    pub window_source: LimitSource,
    /// Ollama only: the context size every request asks for
    /// (`options.num_ctx`), the window above; Ollama otherwise runs with its
    /// own small default and cuts a longer prompt silently.
    pub num_ctx: Option<u32>,
    /// The tokenizer for estimates.
    pub encoding: Encoding,
    /// Retries.
    pub retry: RetryPolicy,
    /// See [`LlmConfig::temperature`].
    pub temperature: Option<f32>,
    /// See [`LlmConfig::thinking_budget_tokens`].
    pub thinking_budget_tokens: Option<u32>,
    /// See [`LlmConfig::reasoning_effort`].
    pub reasoning_effort: Option<String>,
    /// See [`LlmConfig::headers`].
    pub headers: BTreeMap<String, String>,
    /// As configured; [`ModelConfig::tool_mode`] decides `auto`.
    pub tool_calling: ToolCalling,
    /// As configured; [`ModelConfig::reply_format`] decides `auto`.
    pub constrained_replies: ConstrainedReplies,
    /// As configured, when it was.
    pub reply_format: Option<ReplyFormat>,
    /// See [`LlmConfig::stream`].
    pub stream: bool,
    /// As configured; [`ModelConfig::edit_form`] decides `auto`.
    pub edit_tool: crate::EditToolSetting,
    /// Where requests are recorded to or replayed from (`--record`,
    /// `--replay`); `None`: the network, unrecorded.
    pub tape: Option<crate::cassette::Tape>,
}

impl ModelConfig {
    /// True when the provider is known to support native tool calls for
    /// this model: the model's family in the built-in table (see
    /// [`ModelInfo::native_tools`](crate::ModelInfo::native_tools)); for a
    /// model the table does not know, true on Anthropic and on
    /// api.openai.com (whose models all call tools), false on any other
    /// OpenAI-compatible server (a local model may have no tool template).
    pub fn advertises_native_tools(&self) -> bool {
        let info = model_info(&self.model);
        if info.known {
            return info.native_tools;
        }
        match self.provider {
            ProviderKind::Anthropic => true,
            ProviderKind::OpenAi => self.base_url.starts_with(OPENAI_URL),
        }
    }

    /// How prompted-mode replies are constrained, or `None` when they are
    /// not: off by configuration, or Anthropic (whose models call tools
    /// natively, and whose API has no schema for free text).
    pub fn reply_format(&self) -> Option<ReplyFormat> {
        if self.constrained_replies == ConstrainedReplies::Off
            || self.provider == ProviderKind::Anthropic
        {
            return None;
        }
        Some(self.reply_format.unwrap_or({
            // llama.cpp's servers take a schema inside `json_object` (and
            // llama-cpp-python only that); Ollama (port 11434) and hosted
            // APIs take `json_schema`.
            if self.is_private_endpoint() && !self.base_url.contains(":11434") {
                ReplyFormat::JsonObject
            } else {
                ReplyFormat::JsonSchema
            }
        }))
    }

    /// True when `base_url` names this machine or a private network
    /// (loopback and private addresses, `localhost`, `*.local`,
    /// `*.internal`, `*.lan`, a name without a dot): where self-hosted
    /// servers such as llama.cpp and Ollama run, which often serve one
    /// request at a time.
    pub fn is_private_endpoint(&self) -> bool {
        let rest = self
            .base_url
            .split_once("://")
            .map_or(self.base_url.as_str(), |(_, rest)| rest);
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let authority = authority
            .rsplit_once('@')
            .map_or(authority, |(_, host)| host);
        let host = match authority.strip_prefix('[') {
            Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
            None => authority.split(':').next().unwrap_or_default(),
        };
        let host = host.to_ascii_lowercase();
        match host.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V4(ip)) => {
                ip.is_loopback() || ip.is_private() || ip.is_link_local() || ip.is_unspecified()
            }
            Ok(std::net::IpAddr::V6(ip)) => {
                ip.is_loopback()
                    || ip.is_unspecified()
                    || ip.is_unique_local()
                    || ip.is_unicast_link_local()
            }
            Err(_) => {
                host == "localhost"
                    || !host.contains('.')
                    || [".localhost", ".local", ".internal", ".lan", ".home.arpa"]
                        .iter()
                        .any(|suffix| host.ends_with(suffix))
            }
        }
    }

    /// How tools are given to this model: `toolCalling` as configured, with
    /// `auto` native when [`ModelConfig::advertises_native_tools`], else
    /// prompted.
    pub fn tool_mode(&self) -> ToolMode {
        match self.tool_calling {
            ToolCalling::Native => ToolMode::Native,
            ToolCalling::Prompted => ToolMode::Prompted,
            ToolCalling::Auto if self.advertises_native_tools() => ToolMode::Native,
            ToolCalling::Auto => ToolMode::Prompted,
        }
    }
}

impl LlmConfig {
    /// Applies the environment (`SATCHEL_MODEL`, `OPENAI_BASE_URL`,
    /// `OPENAI_API_KEY`, `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`, and the
    /// variable named by `apiKeyEnv`) and the defaults.
    ///
    /// Fails when the result cannot work: a key written into the file, a
    /// base URL that is not http(s), or a provider that needs a key
    /// (api.openai.com, api.anthropic.com) without one.
    pub fn resolve(&self, env: &HashMap<String, String>) -> Result<ModelConfig, LlmError> {
        if self.api_key.is_some() {
            return Err(LlmError::Config {
                message: "`llm.apiKey` is not read: Satchel never takes API keys from agent.json. \
                          Put the key in an environment variable and name it in `llm.apiKeyEnv`"
                    .into(),
            });
        }
        let var = |name: &str| {
            env.get(name)
                .map(|value| value.trim())
                .filter(|value| !value.is_empty())
                .map(str::to_owned)
        };
        let model = var("SATCHEL_MODEL").or_else(|| self.model.clone());
        let openai_url = self.base_url.clone().or_else(|| var("OPENAI_BASE_URL"));
        let provider = self.provider.unwrap_or_else(|| {
            let claude = model
                .as_deref()
                .is_some_and(|m| m.to_ascii_lowercase().starts_with("claude"));
            if claude && openai_url.is_none() {
                ProviderKind::Anthropic
            } else if openai_url.is_some() || var("OPENAI_API_KEY").is_some() {
                ProviderKind::OpenAi
            } else if var("ANTHROPIC_API_KEY").is_some() {
                ProviderKind::Anthropic
            } else {
                ProviderKind::OpenAi
            }
        });

        let default_key_env = match provider {
            ProviderKind::OpenAi => "OPENAI_API_KEY",
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
        };
        let api_key_env = self
            .api_key_env
            .clone()
            .unwrap_or_else(|| default_key_env.to_owned());
        let api_key = var(&api_key_env).map(|value| ApiKey::new(api_key_env.clone(), value));

        let (base_url, default_endpoint) = match provider {
            ProviderKind::OpenAi => match openai_url {
                Some(url) => (url, false),
                None if api_key.is_some() => (OPENAI_URL.to_owned(), false),
                None => (DEFAULT_OLLAMA_URL.to_owned(), true),
            },
            ProviderKind::Anthropic => (
                self.base_url
                    .clone()
                    .or_else(|| var("ANTHROPIC_BASE_URL"))
                    .unwrap_or_else(|| ANTHROPIC_URL.to_owned()),
                false,
            ),
        };
        let base_url = base_url.trim().trim_end_matches('/').to_owned();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(LlmError::Config {
                message: format!(
                    "the base URL `{base_url}` must start with http:// or https:// (set \
                     `llm.baseUrl`, e.g. http://127.0.0.1:11434/v1)"
                ),
            });
        }
        let official = base_url.starts_with(OPENAI_URL) || base_url.starts_with(ANTHROPIC_URL);
        if official && api_key.is_none() {
            return Err(LlmError::MissingApiKey {
                provider: match provider {
                    ProviderKind::OpenAi => "OpenAI".into(),
                    ProviderKind::Anthropic => "Anthropic".into(),
                },
                env_var: api_key_env,
            });
        }

        let model = model.unwrap_or_else(|| {
            match (provider, default_endpoint) {
                (ProviderKind::OpenAi, true) => DEFAULT_OLLAMA_MODEL,
                (ProviderKind::OpenAi, false) => DEFAULT_OPENAI_MODEL,
                (ProviderKind::Anthropic, _) => DEFAULT_ANTHROPIC_MODEL,
            }
            .to_owned()
        });
        let info = model_info(&model);
        let (context_window, window_source) = match self.context_window {
            Some(window) => (window, LimitSource::Configured),
            None if info.known => (info.context_window, LimitSource::Table),
            None => (info.context_window, LimitSource::Guessed),
        };
        let (max_output_tokens, output_source) = match (self.max_output_tokens, provider) {
            (Some(max), _) => (max, LimitSource::Configured),
            (None, ProviderKind::OpenAi) => (
                derived_output_limit(context_window, info.max_output_tokens),
                LimitSource::Derived,
            ),
            (None, ProviderKind::Anthropic) => {
                let budget = self.thinking_budget_tokens.unwrap_or(0);
                (
                    info.max_output_tokens
                        .min(ANTHROPIC_DEFAULT_MAX_OUTPUT.max(budget.saturating_add(4_096))),
                    LimitSource::Table,
                )
            }
        };
        let max_output_tokens = Some(max_output_tokens);
        let retry = RetryPolicy {
            max_retries: self
                .max_retries
                .unwrap_or(RetryPolicy::default().max_retries),
            base_delay: self
                .retry_base_delay_ms
                .map_or(RetryPolicy::default().base_delay, Duration::from_millis),
            max_delay: self
                .retry_max_delay_ms
                .map_or(RetryPolicy::default().max_delay, Duration::from_millis),
        };

        Ok(ModelConfig {
            provider,
            base_url,
            default_endpoint,
            model,
            api_key_env,
            api_key,
            request_timeout: Duration::from_secs(self.request_timeout_secs.unwrap_or(300).max(1)),
            connect_timeout: Duration::from_secs(self.connect_timeout_secs.unwrap_or(10).max(1)),
            max_output_tokens,
            output_source,
            context_window,
            window_source,
            num_ctx: None,
            encoding: info.encoding,
            retry,
            temperature: self.temperature,
            thinking_budget_tokens: self.thinking_budget_tokens,
            reasoning_effort: self.reasoning_effort.clone(),
            headers: self.headers.clone(),
            tool_calling: self.tool_calling.unwrap_or_default(),
            constrained_replies: self.constrained_replies.unwrap_or_default(),
            reply_format: self.reply_format,
            stream: self.stream.unwrap_or(true),
            edit_tool: self.edit_tool.unwrap_or_default(),
            tape: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn nothing_configured_means_a_local_ollama() {
        let config = LlmConfig::default().resolve(&env(&[])).unwrap();
        assert_eq!(config.provider, ProviderKind::OpenAi);
        assert_eq!(config.base_url, DEFAULT_OLLAMA_URL);
        assert!(config.default_endpoint);
        assert_eq!(config.model, DEFAULT_OLLAMA_MODEL);
        assert_eq!(config.api_key, None);
        assert_eq!(config.context_window, 131_072);
        assert_eq!(config.window_source, LimitSource::Table);
        // An eighth of the window, within the model's own limit.
        assert_eq!(config.max_output_tokens, Some(8_192));
        assert_eq!(config.output_source, LimitSource::Derived);
        assert_eq!(config.request_timeout, Duration::from_secs(300));
    }

    #[test]
    fn private_endpoints_are_told_from_hosted_apis() {
        let private = |url: &str| {
            ModelConfig {
                base_url: url.into(),
                ..LlmConfig::default().resolve(&env(&[])).unwrap()
            }
            .is_private_endpoint()
        };
        for url in [
            "http://127.0.0.1:8080/v1",
            "http://localhost:11434/v1",
            "http://[::1]:8000/v1",
            "http://10.1.2.3/v1",
            "http://192.168.0.9:8000",
            "http://user:pw@172.16.0.1/v1",
            "http://gpu-box:8000/v1",
            "http://llm.internal/v1",
            "http://[fd00::1]/v1",
        ] {
            assert!(private(url), "{url} is private");
        }
        for url in [
            OPENAI_URL,
            ANTHROPIC_URL,
            "https://openrouter.ai/api/v1",
            "https://8.8.8.8/v1",
            "https://[2001:db8::1]/v1",
        ] {
            assert!(!private(url), "{url} is hosted");
        }
    }

    #[test]
    fn openai_key_alone_means_openai() {
        let config = LlmConfig::default()
            .resolve(&env(&[("OPENAI_API_KEY", "sk-test")]))
            .unwrap();
        assert_eq!(config.base_url, OPENAI_URL);
        assert!(!config.default_endpoint);
        assert_eq!(config.model, DEFAULT_OPENAI_MODEL);
        assert_eq!(config.encoding, Encoding::O200k);
        assert_eq!(config.api_key.unwrap().expose(), "sk-test");
    }

    #[test]
    fn anthropic_key_or_a_claude_model_means_anthropic() {
        let config = LlmConfig::default()
            .resolve(&env(&[("ANTHROPIC_API_KEY", "k")]))
            .unwrap();
        assert_eq!(config.provider, ProviderKind::Anthropic);
        assert_eq!(config.base_url, ANTHROPIC_URL);
        assert_eq!(config.model, DEFAULT_ANTHROPIC_MODEL);
        assert_eq!(config.max_output_tokens, Some(16_384));
        assert_eq!(config.context_window, 200_000);

        let err = LlmConfig::default()
            .resolve(&env(&[("SATCHEL_MODEL", "claude-opus-4-1")]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Anthropic needs an API key and $ANTHROPIC_API_KEY is not set; export it, or name \
             another variable in `llm.apiKeyEnv` in .agents/agent.json"
        );
    }

    #[test]
    fn environment_and_file_combine_with_the_documented_precedence() {
        let file = LlmConfig {
            base_url: Some("http://gpu-box:8000/v1/".into()),
            model: Some("qwen2.5-coder:32b".into()),
            api_key_env: Some("VLLM_KEY".into()),
            context_window: Some(65_536),
            max_output_tokens: Some(2_000),
            ..LlmConfig::default()
        };
        let config = file
            .resolve(&env(&[
                ("SATCHEL_MODEL", "llama3.3:70b"),
                ("OPENAI_BASE_URL", "http://elsewhere/v1"),
                ("VLLM_KEY", "secret"),
            ]))
            .unwrap();
        // SATCHEL_MODEL beats the file; the file's base URL beats OPENAI_BASE_URL.
        assert_eq!(config.model, "llama3.3:70b");
        assert_eq!(config.base_url, "http://gpu-box:8000/v1");
        assert_eq!(config.api_key.as_ref().unwrap().env_var, "VLLM_KEY");
        assert_eq!(config.context_window, 65_536);
        assert_eq!(config.max_output_tokens, Some(2_000));
        assert!(!format!("{config:?}").contains("secret"), "key leaked");
    }

    #[test]
    fn agent_json_section_parses_with_camel_case_keys() {
        let config: LlmConfig = serde_json::from_value(serde_json::json!({
            "provider": "anthropic",
            "model": "claude-haiku-4-5",
            "apiKeyEnv": "WORK_ANTHROPIC_KEY",
            "requestTimeoutSecs": 60,
            "maxRetries": 5,
            "thinkingBudgetTokens": 4096,
            "headers": {"x-team": "infra"},
        }))
        .unwrap();
        let resolved = config
            .resolve(&env(&[("WORK_ANTHROPIC_KEY", "k")]))
            .unwrap();
        assert_eq!(resolved.provider, ProviderKind::Anthropic);
        assert_eq!(resolved.request_timeout, Duration::from_secs(60));
        assert_eq!(resolved.retry.max_retries, 5);
        assert_eq!(resolved.thinking_budget_tokens, Some(4096));
        assert!(
            serde_json::from_value::<LlmConfig>(serde_json::json!({"modle": "x"})).is_err(),
            "unknown keys are reported"
        );
    }

    #[test]
    fn the_readme_example_is_a_valid_section() {
        let readme = include_str!("../../../README.md");
        let section = readme
            .split("## Configuring a model")
            .nth(1)
            .and_then(|rest| rest.split("```json").nth(1))
            .and_then(|rest| rest.split("```").next())
            .expect("README has a JSON example of the llm section");
        let value: serde_json::Value = serde_json::from_str(section).unwrap();
        let config: LlmConfig = serde_json::from_value(value["llm"].clone()).unwrap();
        assert_eq!(config.model.as_deref(), Some("qwen3:30b"));
        let resolved = config.resolve(&env(&[])).unwrap();
        assert_eq!(resolved.context_window, 40_960);
    }

    #[test]
    fn tool_calling_parses_and_auto_follows_what_is_advertised() {
        let config: LlmConfig =
            serde_json::from_value(serde_json::json!({"toolCalling": "prompted"})).unwrap();
        assert_eq!(config.tool_calling, Some(ToolCalling::Prompted));
        assert!(
            serde_json::from_value::<LlmConfig>(serde_json::json!({"toolCalling": "xml"})).is_err()
        );
        let mode = |file: LlmConfig, pairs: &[(&str, &str)]| {
            file.resolve(&env(pairs)).unwrap().tool_mode()
        };
        let model = |name: &str, tool_calling: Option<ToolCalling>| LlmConfig {
            model: Some(name.into()),
            tool_calling,
            ..LlmConfig::default()
        };
        // auto: the table for known families, wherever they are served.
        assert_eq!(mode(model("qwen2.5-coder:7b", None), &[]), ToolMode::Native);
        assert_eq!(mode(model("gemma3:27b", None), &[]), ToolMode::Prompted);
        assert_eq!(
            mode(model("chatgpt-4o-latest", None), &[("OPENAI_API_KEY", "k")]),
            ToolMode::Prompted
        );
        // auto, unknown model: native on the official APIs, prompted elsewhere.
        assert_eq!(mode(model("my-finetune", None), &[]), ToolMode::Prompted);
        assert_eq!(
            mode(model("ft:my-finetune", None), &[("OPENAI_API_KEY", "k")]),
            ToolMode::Native
        );
        let anthropic = LlmConfig {
            provider: Some(ProviderKind::Anthropic),
            ..model("internal-model", None)
        };
        assert_eq!(
            mode(anthropic, &[("ANTHROPIC_API_KEY", "k")]),
            ToolMode::Native
        );
        // An explicit setting wins.
        assert_eq!(
            mode(model("gemma3", Some(ToolCalling::Native)), &[]),
            ToolMode::Native
        );
        assert_eq!(
            mode(
                model("gpt-4o", Some(ToolCalling::Prompted)),
                &[("OPENAI_API_KEY", "k")]
            ),
            ToolMode::Prompted
        );
        assert_eq!(
            LlmConfig::default()
                .resolve(&env(&[]))
                .unwrap()
                .tool_calling,
            ToolCalling::Auto
        );
    }

    #[test]
    fn a_key_in_the_file_is_refused() {
        let config: LlmConfig =
            serde_json::from_value(serde_json::json!({"apiKey": "sk-oops"})).unwrap();
        assert!(!format!("{config:?}").contains("sk-oops"));
        let err = config.resolve(&env(&[])).unwrap_err().to_string();
        assert!(
            err.contains("never takes API keys from agent.json"),
            "{err}"
        );
        assert!(!err.contains("sk-oops"));
    }

    #[test]
    fn a_base_url_must_be_http() {
        let config = LlmConfig {
            base_url: Some("127.0.0.1:11434".into()),
            ..LlmConfig::default()
        };
        let err = config.resolve(&env(&[])).unwrap_err().to_string();
        assert!(err.contains("must start with http://"), "{err}");
    }
}
