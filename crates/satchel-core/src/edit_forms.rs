//! The forms Satchel's file editing can be offered in: its own `edit` and
//! `write`, or the form a model was trained on — Anthropic's text editor
//! (`str_replace_based_edit_tool`) for Claude models, Codex's `apply_patch`
//! for OpenAI's. Every form runs the same engine, in the same boundaries;
//! this module says which tools each form offers and what a native call
//! amounts to in Satchel's own terms (for permission rules and the
//! feedback block's resource counts).

use serde_json::Value;

/// The name Anthropic's text editor tool is declared and called by.
pub const TEXT_EDITOR: &str = "str_replace_based_edit_tool";

/// The wire `type` of the text editor version Claude 4 models take.
pub const TEXT_EDITOR_TYPE: &str = "text_editor_20250728";

/// Input tokens Anthropic adds to a request that declares the text editor
/// (its published figure for the tool's own definition).
pub const TEXT_EDITOR_TOKENS: u64 = 700;

/// The name of the patch tool in Codex's grammar.
pub const APPLY_PATCH: &str = "apply_patch";

/// Which editing tools a request offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EditForm {
    /// Satchel's `edit` and `write`.
    Satchel,
    /// Anthropic's text editor in place of `edit` and `write`.
    TextEditor,
    /// Codex's `apply_patch` in place of `edit` and `write`.
    ApplyPatch,
}

impl EditForm {
    /// Whether a tool named `name` is offered under this form: the other
    /// forms' tools are left out, so a model sees one way to edit.
    pub fn offers(self, name: &str) -> bool {
        match name {
            "edit" | "write" => self == EditForm::Satchel,
            TEXT_EDITOR => self == EditForm::TextEditor,
            APPLY_PATCH => self == EditForm::ApplyPatch,
            _ => true,
        }
    }

    /// The form's name as configuration and `tools prompt` show it.
    pub fn as_str(self) -> &'static str {
        match self {
            EditForm::Satchel => "satchel",
            EditForm::TextEditor => TEXT_EDITOR,
            EditForm::ApplyPatch => APPLY_PATCH,
        }
    }
}

/// True for the tools that exist only as a model's native form: MCP
/// clients and other hosts get `edit` and `write` instead.
pub fn is_native_form(name: &str) -> bool {
    name == TEXT_EDITOR || name == APPLY_PATCH
}

/// What a call of a native form does, in Satchel's own tools' terms:
/// `(tool, path)` pairs — `read`, `write` or `edit` of each path it
/// touches. `None` for any other tool.
pub fn native_equivalents(tool: &str, input: &Value) -> Option<Vec<(&'static str, String)>> {
    let text = |key: &str| input.get(key).and_then(Value::as_str);
    match tool {
        TEXT_EDITOR => {
            let path = text("path")?.to_owned();
            let as_tool = match text("command") {
                Some("view") => "read",
                Some("create") => "write",
                _ => "edit",
            };
            Some(vec![(as_tool, path)])
        }
        APPLY_PATCH => Some(patch_paths(text("input").unwrap_or_default())),
        _ => None,
    }
}

/// The files a patch in Codex's grammar touches, read from its headers:
/// `write` for an added file, `edit` for an updated, moved or deleted one
/// (and the destination of a move).
pub fn patch_paths(patch: &str) -> Vec<(&'static str, String)> {
    const HEADERS: [(&str, &str); 4] = [
        ("*** Add File: ", "write"),
        ("*** Update File: ", "edit"),
        ("*** Delete File: ", "edit"),
        ("*** Move to: ", "write"),
    ];
    patch
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            HEADERS.iter().find_map(|(header, tool)| {
                line.strip_prefix(header)
                    .map(|path| (*tool, path.trim().to_owned()))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_form_offers_one_way_to_edit() {
        let names = ["read", "edit", "write", TEXT_EDITOR, APPLY_PATCH, "bash"];
        let offered = |form: EditForm| {
            names
                .iter()
                .filter(|name| form.offers(name))
                .copied()
                .collect::<Vec<_>>()
        };
        assert_eq!(
            offered(EditForm::Satchel),
            ["read", "edit", "write", "bash"]
        );
        assert_eq!(offered(EditForm::TextEditor), ["read", TEXT_EDITOR, "bash"]);
        assert_eq!(offered(EditForm::ApplyPatch), ["read", APPLY_PATCH, "bash"]);
    }

    #[test]
    fn native_calls_read_as_satchel_tools() {
        let view = json!({"command": "view", "path": "src/a.rs"});
        assert_eq!(
            native_equivalents(TEXT_EDITOR, &view),
            Some(vec![("read", "src/a.rs".to_owned())])
        );
        let insert = json!({"command": "insert", "path": "b", "insert_line": 0});
        assert_eq!(
            native_equivalents(TEXT_EDITOR, &insert),
            Some(vec![("edit", "b".to_owned())])
        );
        let patch = "*** Begin Patch\n*** Add File: new.txt\n+hi\n*** Update File: old.rs\n\
                     *** Move to: moved.rs\n@@\n-a\n+b\n*** Delete File: gone.txt\n*** End Patch";
        assert_eq!(
            native_equivalents(APPLY_PATCH, &json!({ "input": patch })),
            Some(vec![
                ("write", "new.txt".to_owned()),
                ("edit", "old.rs".to_owned()),
                ("write", "moved.rs".to_owned()),
                ("edit", "gone.txt".to_owned()),
            ])
        );
        assert_eq!(native_equivalents("edit", &json!({})), None);
    }
}
