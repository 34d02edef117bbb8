//! [`ServerInfo`]: what a model server said about itself and its model
//! (which server, the window, the output limit, the model's name, whether
//! its template takes tools). Plain data: asked by `server_info`, recorded
//! and replayed by `cassette`, applied by `ModelConfig::with_server`.

/// Which kind of server answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ServerKind {
    /// llama.cpp's own `llama-server`.
    LlamaCpp,
    /// Ollama.
    Ollama,
    /// LM Studio.
    LmStudio,
    /// vLLM, a gateway, or another server that lists its models' limits.
    Listing,
}

/// What a server said about itself and the model.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ServerInfo {
    /// Which server.
    pub kind: ServerKind,
    /// The endpoint the window was read from, e.g. `llama.cpp GET /props`.
    pub endpoint: String,
    /// Tokens of prompt and answer one request may take.
    pub context_window: Option<u32>,
    /// The server's own limit on an answer.
    pub max_output_tokens: Option<u32>,
    /// The model's name as the server knows it.
    pub model: Option<String>,
    /// Whether the model's chat template takes tools.
    pub template_tools: Option<bool>,
}
