//! `llm.editTool`: which form of the file-editing tools a model is given
//! ([`satchel_core::edit_forms::EditForm`]): Satchel's `edit` and `write`,
//! or the form the model was trained on, when it has one.

use satchel_core::edit_forms::EditForm;
use serde::{Deserialize, Serialize};

use crate::config::{ModelConfig, ProviderKind, ToolMode};

/// The `editTool` setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum EditToolSetting {
    /// The native form for models known to be trained on it (Claude 4 and
    /// later on Anthropic's API; GPT-4.1, GPT-5, o3, o4 and Codex models on
    /// an OpenAI-compatible API), Satchel's form for every other.
    #[default]
    Auto,
    /// Always Satchel's `edit` and `write`.
    Satchel,
    /// The provider's native form whatever the model: the text editor on
    /// Anthropic, `apply_patch` on OpenAI-compatible APIs.
    Native,
}

impl ModelConfig {
    /// The editing tools this model is offered. Prompted tool calling
    /// gets Satchel's form: the text editor exists only as a native
    /// declaration, and a model without native tools knows neither.
    pub fn edit_form(&self) -> EditForm {
        if self.edit_tool == EditToolSetting::Satchel || self.tool_mode() == ToolMode::Prompted {
            return EditForm::Satchel;
        }
        let native = match self.provider {
            ProviderKind::Anthropic => EditForm::TextEditor,
            ProviderKind::OpenAi => EditForm::ApplyPatch,
        };
        if self.edit_tool == EditToolSetting::Native || trained_on_native_form(self) {
            native
        } else {
            EditForm::Satchel
        }
    }
}

/// Whether the model is one its provider trained on the native form.
fn trained_on_native_form(config: &ModelConfig) -> bool {
    // Gateways prefix the vendor: `openai/gpt-5`, `anthropic/claude-…`.
    let model = config.model.rsplit('/').next().unwrap_or_default();
    let model = model.to_ascii_lowercase();
    match config.provider {
        ProviderKind::Anthropic => model.starts_with("claude") && !model.starts_with("claude-3"),
        ProviderKind::OpenAi => ["gpt-5", "gpt-4.1", "o3", "o4", "codex"]
            .iter()
            .any(|family| model.starts_with(family)),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::config::{LlmConfig, ToolCalling};

    fn form(provider: ProviderKind, model: &str, setting: Option<EditToolSetting>) -> EditForm {
        let config = LlmConfig {
            provider: Some(provider),
            base_url: Some("http://127.0.0.1:9/v1".into()),
            model: Some(model.into()),
            edit_tool: setting,
            tool_calling: Some(ToolCalling::Native),
            ..LlmConfig::default()
        };
        config.resolve(&HashMap::new()).unwrap().edit_form()
    }

    #[test]
    fn auto_gives_trained_models_their_form_and_the_rest_satchels() {
        use EditForm::*;
        use ProviderKind::*;
        assert_eq!(form(Anthropic, "claude-sonnet-4-5", None), TextEditor);
        assert_eq!(
            form(Anthropic, "claude-opus-4-1-20250805", None),
            TextEditor
        );
        assert_eq!(form(Anthropic, "claude-3-5-haiku-latest", None), Satchel);
        assert_eq!(form(OpenAi, "gpt-5-mini", None), ApplyPatch);
        assert_eq!(form(OpenAi, "openai/gpt-4.1", None), ApplyPatch);
        assert_eq!(form(OpenAi, "qwen3:8b", None), Satchel);
        assert_eq!(
            form(OpenAi, "qwen3:8b", Some(EditToolSetting::Native)),
            ApplyPatch
        );
        assert_eq!(
            form(
                Anthropic,
                "claude-sonnet-4-5",
                Some(EditToolSetting::Satchel)
            ),
            Satchel
        );
    }
}
