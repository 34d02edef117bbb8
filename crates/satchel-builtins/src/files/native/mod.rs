//! The file tools in the forms models were trained on: Anthropic's text
//! editor ([`text_editor`]) and Codex's `apply_patch` ([`apply_patch`],
//! its grammar in `patch`). Both run Satchel's own resolver, stale-file
//! rule and atomic writer; which one a request offers is
//! `llm.editTool` ([`satchel_core::edit_forms`]).

pub mod apply_patch;
pub(crate) mod patch;
pub mod text_editor;
