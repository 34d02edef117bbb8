//! [`Encoding`]: which BPE vocabulary counts tokens, by name. Apart from
//! `tokens` (which loads and runs the vocabularies) so that the
//! pre-tokenizer and the count cache, which `tokens` uses, can name it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A BPE vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// `o200k_base`: gpt-4o, gpt-4.1, gpt-4.5, gpt-5, o1, o3, o4.
    O200k,
    /// `cl100k_base`: gpt-4, gpt-3.5, and the fallback for every model whose
    /// tokenizer is not embedded (Claude, Llama, Qwen, Mistral...).
    Cl100k,
}

impl Encoding {
    /// The vocabulary's usual name, e.g. `o200k_base`.
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::O200k => "o200k_base",
            Encoding::Cl100k => "cl100k_base",
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
