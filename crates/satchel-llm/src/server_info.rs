//! Asking an OpenAI-compatible server what it serves ([`ask_server`]): the
//! context window it really runs with, and where offered its output limit,
//! the model's name and whether its chat template takes tools. Asked once
//! per endpoint and model, then cached for the process (an endpoint that
//! did not answer is asked again after [`RETRY_AFTER`]).
//!
//! What each server reports, tried in this order (a server that does not
//! know an endpoint answers 404 and the next is tried):
//! - llama.cpp's `llama-server`: `GET /props` (`default_generation_settings.n_ctx`,
//!   the context of one slot; `params.n_predict` when positive;
//!   `chat_template_caps.supports_tools`), and `GET /slots` (each slot's `n_ctx`);
//! - Ollama: `GET /api/ps` (`context_length` of the model as loaded), else
//!   `POST /api/show` (a `num_ctx` in the model's parameters, else Ollama's
//!   default of [`OLLAMA_DEFAULT_NUM_CTX`], never more than the model's
//!   `model_info.<arch>.context_length`); Satchel then sends that figure as
//!   `options.num_ctx` with every request;
//! - LM Studio: `GET /api/v0/models` (`loaded_context_length`, else
//!   `max_context_length`);
//! - vLLM and gateways: `GET {baseUrl}/models`, the entry of the model
//!   (`max_model_len` for vLLM; `context_length` and
//!   `top_provider.max_completion_tokens` for OpenRouter and others;
//!   `meta.n_ctx` for llama.cpp).
//!
//! `llama-cpp-python`'s server reports none of these: its window stays the
//! configured or guessed one. Configuration always wins
//! ([`ModelConfig::with_server`]).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::config::{ModelConfig, OPENAI_URL, ProviderKind};
use crate::limits::{LimitSource, derived_output_limit};
use crate::models::model_info;
use crate::server_report::{ServerInfo, ServerKind};

/// How long one question to the server may take.
const ASK_TIMEOUT: Duration = Duration::from_secs(3);

/// After this long, an endpoint that told nothing is asked again.
pub(crate) const RETRY_AFTER: Duration = Duration::from_secs(30);

/// The context Ollama gives a model when a request does not say
/// (`OLLAMA_CONTEXT_LENGTH` unset): what Satchel assumes when Ollama tells
/// neither the loaded context nor a `num_ctx` parameter.
pub const OLLAMA_DEFAULT_NUM_CTX: u32 = 4_096;

impl ModelConfig {
    /// This configuration with what `info` says: the server's window
    /// unless `llm.contextWindow` is set; for Ollama, that window sent as
    /// `num_ctx`; the output limit derived again from the window and the
    /// server's own limit unless `llm.maxOutputTokens` is set.
    pub fn with_server(mut self, info: &ServerInfo) -> ModelConfig {
        if self.window_source != LimitSource::Configured
            && let Some(window) = info.context_window.filter(|w| *w > 0)
        {
            self.context_window = window;
            self.window_source = LimitSource::Server(info.endpoint.clone());
        }
        if info.kind == ServerKind::Ollama {
            self.num_ctx = Some(self.context_window);
        }
        if self.output_source != LimitSource::Configured {
            let model_max = model_info(&self.model).max_output_tokens;
            let derived = derived_output_limit(self.context_window, model_max);
            match info
                .max_output_tokens
                .filter(|max| *max > 0 && *max < derived)
            {
                Some(server_max) => {
                    self.max_output_tokens = Some(server_max);
                    self.output_source = LimitSource::Server(info.endpoint.clone());
                }
                None => {
                    self.max_output_tokens = Some(derived);
                    self.output_source = LimitSource::Derived;
                }
            }
        }
        self
    }
}

/// What an endpoint answered, and when; `None` until first asked.
type Answer = Option<(Instant, Option<ServerInfo>)>;

/// Each endpoint's answer, by base URL and model, behind an async lock
/// that the one asking holds: a hundred conversations starting at once
/// against one server ask it once, the others wait for that answer.
type Cache = HashMap<(String, String), Arc<tokio::sync::Mutex<Answer>>>;

static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// `config` with what its server reports ([`ModelConfig::with_server`]),
/// asked once per endpoint and model. Anthropic and api.openai.com are not
/// asked (their limits are the table's); a server that answers none of the
/// questions leaves `config` as it is.
pub async fn ask_server(config: ModelConfig) -> ModelConfig {
    match server_info(&config).await {
        Some(info) => config.with_server(&info),
        None => config,
    }
}

/// What `config`'s server reports, from the cache or asked now.
pub async fn server_info(config: &ModelConfig) -> Option<ServerInfo> {
    if config.provider != ProviderKind::OpenAi || config.base_url.starts_with(OPENAI_URL) {
        return None;
    }
    match &config.tape {
        // A replay asks no server: it gets what the recording was told.
        Some(tape) if tape.is_replay() => tape.server_info(&config.base_url, &config.model, None),
        Some(tape) => {
            let asked = cached_or_asked(config).await;
            tape.server_info(&config.base_url, &config.model, asked)
        }
        None => cached_or_asked(config).await,
    }
}

/// What `config`'s server reports, from the cache or asked now (by this
/// caller, or by the one already asking).
async fn cached_or_asked(config: &ModelConfig) -> Option<ServerInfo> {
    let key = (config.base_url.clone(), config.model.clone());
    let entry = CACHE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(key)
        .or_default()
        .clone();
    let mut answer = entry.lock().await;
    if let Some((at, info)) = answer.as_ref()
        && (info.is_some() || at.elapsed() < RETRY_AFTER)
    {
        return info.clone();
    }
    let info = ask(config).await;
    *answer = Some((Instant::now(), info.clone()));
    info
}

/// Asks the server each question in turn until one tells the window; a
/// server that cannot be reached at all is not asked the rest.
async fn ask(config: &ModelConfig) -> Option<ServerInfo> {
    let client = satchel_http::client_builder()
        .ok()?
        .timeout(ASK_TIMEOUT)
        .connect_timeout(config.connect_timeout.min(ASK_TIMEOUT))
        .build()
        .ok()?;
    let root = server_root(&config.base_url);
    let get = |url: String| {
        let mut request = client.get(url);
        if let Some(key) = &config.api_key {
            request = request.bearer_auth(key.expose());
        }
        request
    };
    let props = match get(format!("{root}/props")).send().await {
        Err(_) => return None,
        Ok(response) => body(response).await,
    };
    if let Some(props) = props
        && props.get("default_generation_settings").is_some()
    {
        let slots = json(get(format!("{root}/slots"))).await;
        return Some(llama_cpp(&props, slots.as_ref()));
    }
    let show = client
        .post(format!("{root}/api/show"))
        .json(&serde_json::json!({"model": config.model}));
    if let Some(show) = json(show).await
        && show.get("model_info").is_some()
    {
        let ps = json(get(format!("{root}/api/ps"))).await;
        return Some(ollama(&config.model, &show, ps.as_ref()));
    }
    if let Some(models) = json(get(format!("{root}/api/v0/models"))).await
        && let Some(info) = lm_studio(&config.model, &models)
    {
        return Some(info);
    }
    let models = json(get(format!("{}/models", config.base_url))).await?;
    listing(&config.model, &models)
}

/// The JSON body of a successful answer to `request`.
async fn json(request: reqwest::RequestBuilder) -> Option<Value> {
    body(request.send().await.ok()?).await
}

/// Largest answer read from a probe: a model listing or llama.cpp's
/// `/props` (with its chat template) is tens of KB; a larger one is not
/// read to its end.
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

/// The JSON body of `response`, when it succeeded and fits
/// [`MAX_ANSWER_BYTES`].
async fn body(mut response: reqwest::Response) -> Option<Value> {
    if !response.status().is_success() {
        return None;
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.ok()? {
        if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
            return None;
        }
        bytes.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&bytes).ok()
}

/// The server's root: the base URL without its `/v1`.
fn server_root(base_url: &str) -> &str {
    base_url
        .trim_end_matches('/')
        .strip_suffix("/v1")
        .unwrap_or(base_url)
}

/// A JSON number as a positive `u32`.
fn positive(value: Option<&Value>) -> Option<u32> {
    value
        .and_then(Value::as_u64)
        .filter(|n| *n > 0)
        .and_then(|n| u32::try_from(n).ok())
}

/// llama.cpp: `/props`, and `/slots` when it is enabled (the smallest
/// slot's context: a request may land in any of them).
fn llama_cpp(props: &Value, slots: Option<&Value>) -> ServerInfo {
    let settings = &props["default_generation_settings"];
    let from_slots = slots
        .and_then(Value::as_array)
        .and_then(|slots| slots.iter().filter_map(|s| positive(s.get("n_ctx"))).min());
    let from_props = positive(settings.get("n_ctx"));
    let (context_window, endpoint) = match (from_props, from_slots) {
        (Some(window), _) => (Some(window), "llama.cpp GET /props"),
        (None, Some(window)) => (Some(window), "llama.cpp GET /slots"),
        (None, None) => (None, "llama.cpp GET /props"),
    };
    ServerInfo {
        kind: ServerKind::LlamaCpp,
        endpoint: endpoint.into(),
        context_window,
        max_output_tokens: positive(settings["params"].get("n_predict")),
        model: props["model_alias"].as_str().map(str::to_owned),
        template_tools: props["chat_template_caps"]["supports_tools"].as_bool(),
    }
}

/// Ollama: the loaded model's context from `/api/ps`, else the `num_ctx`
/// of its parameters, else Ollama's default; never past the model's own.
fn ollama(model: &str, show: &Value, ps: Option<&Value>) -> ServerInfo {
    let trained = show["model_info"].as_object().and_then(|info| {
        info.iter()
            .find(|(key, _)| key.ends_with(".context_length"))
            .and_then(|(_, value)| positive(Some(value)))
    });
    let loaded = ps
        .and_then(|ps| ps["models"].as_array())
        .and_then(|models| {
            models
                .iter()
                .find(|m| m["name"] == model || m["model"] == model)
        })
        .and_then(|m| positive(m.get("context_length")));
    let parameter = show["parameters"].as_str().and_then(|text| {
        text.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("num_ctx"))
                .then(|| words.next()?.parse::<u32>().ok())
                .flatten()
        })
    });
    let (window, endpoint) = match (loaded, parameter) {
        (Some(window), _) => (window, "Ollama GET /api/ps"),
        (None, Some(window)) => (window, "Ollama POST /api/show, num_ctx parameter"),
        (None, None) => (
            OLLAMA_DEFAULT_NUM_CTX,
            "Ollama's default context; POST /api/show",
        ),
    };
    let window = trained.map_or(window, |trained| window.min(trained));
    let template_tools = show["capabilities"]
        .as_array()
        .map(|caps| caps.iter().any(|c| c == "tools"));
    ServerInfo {
        kind: ServerKind::Ollama,
        endpoint: endpoint.into(),
        context_window: Some(window),
        max_output_tokens: None,
        model: Some(model.to_owned()),
        template_tools,
    }
}

/// LM Studio's `/api/v0/models`: the model's loaded context, else its
/// largest.
fn lm_studio(model: &str, models: &Value) -> Option<ServerInfo> {
    let entry = find_model(model, models)?;
    let window = positive(entry.get("loaded_context_length"))
        .or_else(|| positive(entry.get("max_context_length")))?;
    Some(ServerInfo {
        kind: ServerKind::LmStudio,
        endpoint: "LM Studio GET /api/v0/models".into(),
        context_window: Some(window),
        max_output_tokens: None,
        model: entry["id"].as_str().map(str::to_owned),
        template_tools: None,
    })
}

/// `{baseUrl}/models`: vLLM's `max_model_len`, a gateway's
/// `context_length`, llama.cpp's `meta.n_ctx`.
fn listing(model: &str, models: &Value) -> Option<ServerInfo> {
    let entry = find_model(model, models)?;
    let window = positive(entry.get("max_model_len"))
        .or_else(|| positive(entry.get("context_length")))
        .or_else(|| positive(entry.get("context_window")))
        .or_else(|| positive(entry["meta"].get("n_ctx")))?;
    Some(ServerInfo {
        kind: ServerKind::Listing,
        endpoint: "GET /v1/models".into(),
        context_window: Some(window),
        max_output_tokens: positive(entry["top_provider"].get("max_completion_tokens")),
        model: entry["id"].as_str().map(str::to_owned),
        template_tools: None,
    })
}

/// The entry for `model` in a `{"data": [...]}` listing, or the only entry.
fn find_model<'a>(model: &str, models: &'a Value) -> Option<&'a Value> {
    let data = models["data"].as_array()?;
    data.iter()
        .find(|m| m["id"] == model)
        .or_else(|| (data.len() == 1).then(|| &data[0]))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;
    use crate::LlmConfig;

    fn local(config: LlmConfig) -> ModelConfig {
        LlmConfig {
            base_url: Some("http://127.0.0.1:8080/v1".into()),
            model: Some("smollm2".into()),
            ..config
        }
        .resolve(&HashMap::new())
        .unwrap()
    }

    #[test]
    fn llama_cpp_props_give_the_slot_window_and_the_template_caps() {
        let props = json!({
            "default_generation_settings": {"n_ctx": 8192, "params": {"n_predict": -1}},
            "model_alias": "smollm2", "chat_template_caps": {"supports_tools": false}
        });
        let info = llama_cpp(&props, Some(&json!([{"id": 0, "n_ctx": 8192}])));
        assert_eq!(info.context_window, Some(8192));
        assert_eq!(info.endpoint, "llama.cpp GET /props");
        assert_eq!(info.max_output_tokens, None);
        assert_eq!(info.template_tools, Some(false));
        let older = llama_cpp(
            &json!({"default_generation_settings": {"params": {"n_predict": 512}}}),
            Some(&json!([{"n_ctx": 4096}, {"n_ctx": 2048}])),
        );
        assert_eq!(older.context_window, Some(2048));
        assert_eq!(older.endpoint, "llama.cpp GET /slots");
        assert_eq!(older.max_output_tokens, Some(512));
    }

    #[test]
    fn ollama_prefers_the_loaded_context_then_the_parameter_then_its_default() {
        let show = json!({"model_info": {"llama.context_length": 131072},
                          "parameters": "stop \"<|eot_id|>\"\nnum_ctx 16384",
                          "capabilities": ["completion", "tools"]});
        let ps = json!({"models": [{"name": "llama3.2", "context_length": 8192}]});
        let loaded = ollama("llama3.2", &show, Some(&ps));
        assert_eq!(loaded.context_window, Some(8192));
        assert_eq!(loaded.template_tools, Some(true));
        assert_eq!(ollama("llama3.2", &show, None).context_window, Some(16384));
        let bare = json!({"model_info": {"gemma3.context_length": 2048}});
        assert_eq!(ollama("gemma3", &bare, None).context_window, Some(2048));
        let bare = json!({"model_info": {"qwen3.context_length": 40960}});
        assert_eq!(
            ollama("qwen3", &bare, None).context_window,
            Some(OLLAMA_DEFAULT_NUM_CTX)
        );
    }

    #[test]
    fn listings_give_vllm_and_gateway_windows() {
        let vllm = json!({"data": [{"id": "Qwen/Qwen3-8B", "max_model_len": 32768}]});
        assert_eq!(
            listing("Qwen/Qwen3-8B", &vllm).unwrap().context_window,
            Some(32768)
        );
        let router = json!({"data": [
            {"id": "a/b", "context_length": 1000},
            {"id": "meta/llama", "context_length": 131072,
             "top_provider": {"max_completion_tokens": 4096}}]});
        let info = listing("meta/llama", &router).unwrap();
        assert_eq!(
            (info.context_window, info.max_output_tokens),
            (Some(131072), Some(4096))
        );
        // llama-cpp-python lists the model and nothing about it.
        let bare = json!({"data": [{"id": "smollm2", "owned_by": "me"}]});
        assert_eq!(listing("smollm2", &bare), None);
        let lms = json!({"data": [{"id": "qwen", "max_context_length": 32768,
                                   "loaded_context_length": 4096}]});
        assert_eq!(lm_studio("qwen", &lms).unwrap().context_window, Some(4096));
    }

    #[test]
    fn the_configured_window_wins_and_the_output_limit_follows_the_window() {
        let info = ServerInfo {
            kind: ServerKind::LlamaCpp,
            endpoint: "llama.cpp GET /props".into(),
            context_window: Some(8192),
            max_output_tokens: None,
            model: None,
            template_tools: None,
        };
        let guessed = local(LlmConfig::default());
        assert_eq!(guessed.window_source, LimitSource::Guessed);
        let asked = guessed.with_server(&info);
        assert_eq!(asked.context_window, 8192);
        assert_eq!(
            asked.window_source,
            LimitSource::Server("llama.cpp GET /props".into())
        );
        assert_eq!(asked.max_output_tokens, Some(1024));
        assert_eq!(asked.num_ctx, None);
        let configured = local(LlmConfig {
            context_window: Some(4096),
            max_output_tokens: Some(48),
            ..LlmConfig::default()
        })
        .with_server(&info);
        assert_eq!(configured.context_window, 4096);
        assert_eq!(configured.window_source, LimitSource::Configured);
        assert_eq!(configured.max_output_tokens, Some(48));
        let ollama = local(LlmConfig::default()).with_server(&ServerInfo {
            kind: ServerKind::Ollama,
            max_output_tokens: Some(100),
            ..info
        });
        assert_eq!(ollama.num_ctx, Some(8192));
        assert_eq!(ollama.max_output_tokens, Some(100));
    }

    #[test]
    fn the_root_is_the_base_url_without_v1() {
        assert_eq!(
            server_root("http://127.0.0.1:8080/v1"),
            "http://127.0.0.1:8080"
        );
        assert_eq!(server_root("http://gw.lan/api/v1/"), "http://gw.lan/api");
        assert_eq!(server_root("http://h:1/openai"), "http://h:1/openai");
    }
}
