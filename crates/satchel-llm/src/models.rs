//! What Satchel knows about common models without asking them: context
//! window, largest answer, which tokenizer counts their tokens, and
//! whether they call tools natively.
//!
//! The table is matched on a normalised name: lower case, without a router
//! prefix (`openai/gpt-4o` → `gpt-4o`) and without an Ollama tag
//! (`llama3.1:8b` → `llama3.1`); the first entry whose name is a prefix
//! wins, so specific names come before their families. A model that is not
//! in the table gets [`UNKNOWN_MODEL`]: set `contextWindow` and
//! `maxOutputTokens` in agent.json for it.
//!
//! `native_tools` is what `toolCalling: "auto"` goes by: true for the
//! families whose chat template (in Ollama, vLLM, llama.cpp) or API
//! supports tool calls, false for those without (Gemma, Codestral, Phi,
//! Llama 3.0, o1-mini, chatgpt-4o) and for DeepSeek, whose variants
//! differ. It is a table, not a question to the server: a server started
//! without tool support (vLLM without `--enable-auto-tool-choice`) needs
//! `toolCalling: "prompted"`.

use crate::encoding::Encoding;

/// Known limits of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelInfo {
    /// Tokens the model reads and writes in one call (prompt plus answer).
    pub context_window: u32,
    /// Largest answer the model may be asked for.
    pub max_output_tokens: u32,
    /// The tokenizer that counts the request's tokens.
    pub encoding: Encoding,
    /// True when the model calls tools natively (see the module header).
    pub native_tools: bool,
    /// False when the values are [`UNKNOWN_MODEL`]'s defaults.
    pub known: bool,
    /// True when `encoding` is the model's own tokenizer (OpenAI's
    /// models); false when it is the `cl100k` stand-in, whose estimates
    /// are calibrated against reported usage.
    pub exact_tokenizer: bool,
}

/// What an unknown model is assumed to have: a 32,768-token window (what
/// most current open models offer), 4,096-token answers, and `cl100k` as the
/// tokenizer (Claude, Llama, Qwen and Mistral use their own tokenizers,
/// which no crate embeds offline for all of them; `cl100k` is within about
/// 10-20% of them on English and code, and the provider's reported usage is
/// stored next to every estimate so the error stays visible), and no
/// native tool calling (prompted tools work with every model; native tools
/// sent to a model without a tool template fail or are ignored).
pub const UNKNOWN_MODEL: ModelInfo = ModelInfo {
    context_window: 32_768,
    max_output_tokens: 4_096,
    encoding: Encoding::Cl100k,
    native_tools: false,
    known: false,
    exact_tokenizer: false,
};

const fn entry(
    prefix: &'static str,
    context_window: u32,
    max_output_tokens: u32,
    encoding: Encoding,
    native_tools: bool,
) -> (&'static str, ModelInfo) {
    (
        prefix,
        ModelInfo {
            context_window,
            max_output_tokens,
            encoding,
            native_tools,
            known: true,
            exact_tokenizer: false,
        },
    )
}

/// `row` with its tokenizer marked as the model's own (OpenAI's models).
const fn exact(row: (&'static str, ModelInfo)) -> (&'static str, ModelInfo) {
    let (prefix, mut info) = row;
    info.exact_tokenizer = true;
    (prefix, info)
}

use Encoding::{Cl100k, O200k};

/// Known models, specific names before their families.
const MODELS: &[(&str, ModelInfo)] = &[
    // OpenAI: o200k for gpt-4o and everything after it.
    exact(entry("gpt-5", 400_000, 128_000, O200k, true)),
    exact(entry("gpt-4.1", 1_047_576, 32_768, O200k, true)),
    exact(entry("gpt-4.5", 128_000, 16_384, O200k, true)),
    exact(entry("gpt-4o", 128_000, 16_384, O200k, true)),
    exact(entry("chatgpt-4o", 128_000, 16_384, O200k, false)),
    exact(entry("gpt-oss", 131_072, 131_072, O200k, true)),
    exact(entry("o1-mini", 128_000, 65_536, O200k, false)),
    exact(entry("o1", 200_000, 100_000, O200k, true)),
    exact(entry("o3", 200_000, 100_000, O200k, true)),
    exact(entry("o4-mini", 200_000, 100_000, O200k, true)),
    exact(entry("gpt-4-turbo", 128_000, 4_096, Cl100k, true)),
    exact(entry("gpt-4-32k", 32_768, 4_096, Cl100k, true)),
    exact(entry("gpt-4", 8_192, 8_192, Cl100k, true)),
    exact(entry("gpt-3.5-turbo", 16_385, 4_096, Cl100k, true)),
    // Anthropic (tokenizer not published: cl100k fallback).
    entry("claude-opus-4-5", 200_000, 64_000, Cl100k, true),
    entry("claude-opus-4", 200_000, 32_000, Cl100k, true),
    entry("claude-sonnet-4", 200_000, 64_000, Cl100k, true),
    entry("claude-haiku-4", 200_000, 64_000, Cl100k, true),
    entry("claude-3-7-sonnet", 200_000, 64_000, Cl100k, true),
    entry("claude-3-5", 200_000, 8_192, Cl100k, true),
    entry("claude-3", 200_000, 4_096, Cl100k, true),
    entry("claude", 200_000, 8_192, Cl100k, true),
    // Open models, as served by Ollama, vLLM, llama.cpp (cl100k fallback).
    entry("llama3.1", 131_072, 8_192, Cl100k, true),
    entry("llama3.2", 131_072, 8_192, Cl100k, true),
    entry("llama3.3", 131_072, 8_192, Cl100k, true),
    entry("llama4", 1_048_576, 8_192, Cl100k, true),
    entry("llama3", 8_192, 4_096, Cl100k, false),
    entry("qwen3", 40_960, 8_192, Cl100k, true),
    entry("qwen2.5", 32_768, 8_192, Cl100k, true),
    entry("qwq", 131_072, 8_192, Cl100k, true),
    entry("mistral-nemo", 131_072, 8_192, Cl100k, true),
    entry("mistral-large", 131_072, 8_192, Cl100k, true),
    entry("mistral-small", 131_072, 8_192, Cl100k, true),
    entry("mistral", 32_768, 8_192, Cl100k, true),
    entry("mixtral", 32_768, 8_192, Cl100k, true),
    entry("codestral", 262_144, 8_192, Cl100k, false),
    entry("devstral", 131_072, 8_192, Cl100k, true),
    entry("gemma3", 131_072, 8_192, Cl100k, false),
    entry("gemma2", 8_192, 4_096, Cl100k, false),
    entry("deepseek", 131_072, 8_192, Cl100k, false),
    entry("phi4", 16_384, 4_096, Cl100k, false),
];

/// What Satchel knows about `model`, or [`UNKNOWN_MODEL`].
pub fn model_info(model: &str) -> ModelInfo {
    let name = normalise(model);
    MODELS
        .iter()
        .find(|(prefix, _)| matches_family(&name, prefix))
        .map_or(UNKNOWN_MODEL, |(_, info)| *info)
}

/// `name` is `prefix`, or `prefix` followed by a separator: `gpt-4o-mini`
/// is a gpt-4o, `o1xyz` is not an o1. Families that share a prefix
/// (`gpt-4.1` and `gpt-4`) are told apart by the table's order.
fn matches_family(name: &str, prefix: &str) -> bool {
    match name.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || rest.starts_with(['-', '.', ':', '_', '@']),
        None => false,
    }
}

fn normalise(model: &str) -> String {
    let name = model.rsplit('/').next().unwrap_or(model);
    let name = name.split(':').next().unwrap_or(name);
    name.trim().to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_map_to_their_tokenizer_and_window() {
        let cases = [
            ("gpt-4o", 128_000, O200k),
            ("gpt-4o-mini-2024-07-18", 128_000, O200k),
            ("openai/gpt-4.1-nano", 1_047_576, O200k),
            ("o3-mini", 200_000, O200k),
            ("o1-mini", 128_000, O200k),
            ("gpt-5-mini", 400_000, O200k),
            ("gpt-4", 8_192, Cl100k),
            ("gpt-4-0613", 8_192, Cl100k),
            ("gpt-4-turbo-preview", 128_000, Cl100k),
            ("gpt-3.5-turbo-0125", 16_385, Cl100k),
            ("claude-sonnet-4-5-20250929", 200_000, Cl100k),
            ("anthropic/claude-3-5-haiku-latest", 200_000, Cl100k),
            ("llama3.1:8b", 131_072, Cl100k),
            ("Qwen2.5-Coder:7b", 32_768, Cl100k),
            ("qwen3:30b-a3b", 40_960, Cl100k),
        ];
        for (model, window, encoding) in cases {
            let info = model_info(model);
            assert!(info.known, "{model}");
            assert_eq!(
                (info.context_window, info.encoding),
                (window, encoding),
                "{model}"
            );
        }
    }

    #[test]
    fn native_tool_support_follows_the_family() {
        for model in [
            "gpt-4o-mini",
            "claude-haiku-4-5",
            "llama3.1:8b",
            "qwen2.5-coder:7b",
            "qwen3:30b",
        ] {
            assert!(model_info(model).native_tools, "{model}");
        }
        for model in [
            "gemma3:27b",
            "llama3:8b",
            "phi4",
            "codestral",
            "o1-mini",
            "my-finetune",
        ] {
            assert!(!model_info(model).native_tools, "{model}");
        }
    }

    #[test]
    fn unknown_models_get_the_documented_default() {
        assert_eq!(model_info("my-finetune"), UNKNOWN_MODEL);
        // A prefix that is not at a name boundary does not match.
        assert_eq!(model_info("o1xyz"), UNKNOWN_MODEL);
        assert_eq!(model_info("gpt-4x"), UNKNOWN_MODEL);
        assert_eq!(model_info("llama30"), UNKNOWN_MODEL);
    }

    #[test]
    fn only_openai_models_have_their_own_tokenizer_embedded() {
        for model in ["gpt-4o-mini", "gpt-5", "o3-mini", "gpt-3.5-turbo"] {
            assert!(model_info(model).exact_tokenizer, "{model}");
        }
        for model in ["claude-sonnet-4-5", "qwen3:8b", "smollm2-135m"] {
            assert!(!model_info(model).exact_tokenizer, "{model}");
        }
    }
}
