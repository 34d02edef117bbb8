//! What each form of the editing tools costs in prompt tokens, for
//! `satchel tools prompt`: Satchel's `edit` and `write`, Codex's
//! `apply_patch` (both counted on the definitions a request carries) and
//! Anthropic's text editor (declared by type: Anthropic's own figure for
//! what it adds, counted with its tokenizer).

use satchel_core::ToolSpec;
use satchel_core::edit_forms::{APPLY_PATCH, EditForm, TEXT_EDITOR_TOKENS};
use satchel_core::portable::SchemaConsumer;
use satchel_llm::{Encoding, count_tokens, native_tools_json};
use serde_json::{Value, json};

/// One form's cost.
pub(crate) struct EditCost {
    pub(crate) form: EditForm,
    /// Tokens of its definitions, or Anthropic's figure for the text editor.
    pub(crate) tokens: u64,
}

/// The forms' costs with `encoding`, the definitions written for
/// `consumer`; `all` holds every built-in tool (the forms are picked from it).
pub(crate) fn edit_costs(
    all: &[ToolSpec],
    consumer: SchemaConsumer,
    encoding: Encoding,
) -> Vec<EditCost> {
    let count = |names: &[&str]| {
        let specs: Vec<ToolSpec> = all
            .iter()
            .filter(|spec| names.contains(&spec.name.as_str()))
            .cloned()
            .collect();
        count_tokens(
            encoding,
            &native_tools_json(consumer, &specs).unwrap_or_default(),
        )
    };
    vec![
        EditCost {
            form: EditForm::Satchel,
            tokens: count(&["edit", "write"]),
        },
        EditCost {
            form: EditForm::ApplyPatch,
            tokens: count(&[APPLY_PATCH]),
        },
        EditCost {
            form: EditForm::TextEditor,
            tokens: TEXT_EDITOR_TOKENS,
        },
    ]
}

/// One line saying which form `form` is and what each costs.
pub(crate) fn describe(form: EditForm, setting: &str, costs: &[EditCost]) -> String {
    let parts: Vec<String> = costs
        .iter()
        .map(|cost| {
            let what = match cost.form {
                EditForm::Satchel => "Satchel's edit + write".to_owned(),
                EditForm::ApplyPatch => "apply_patch".to_owned(),
                EditForm::TextEditor => {
                    "str_replace_based_edit_tool (Anthropic's figure)".to_owned()
                }
            };
            let mark = if cost.form == form {
                " ← offered"
            } else {
                ""
            };
            format!("{what} {}{mark}", cost.tokens)
        })
        .collect();
    format!(
        "Editing tools (`llm.editTool: {setting}`): {}; tokens: {}",
        form.as_str(),
        parts.join(", ")
    )
}

/// The costs as JSON.
pub(crate) fn to_json(costs: &[EditCost]) -> Value {
    costs
        .iter()
        .map(|cost| (cost.form.as_str().to_owned(), json!(cost.tokens)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}
