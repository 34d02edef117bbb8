//! One tool schema for validation, and for each consumer the form it
//! accepts.
//!
//! Satchel validates every call against a tool's full JSON Schema
//! (2020-12, conditions included). What it *sends* is translated here, per
//! [`SchemaConsumer`], because the consumers refuse or mangle parts of the
//! standard:
//! - the Anthropic Messages API refuses a whole request when one tool's
//!   `input_schema` has `oneOf`, `allOf` or `anyOf` at its root, and needs
//!   `"type": "object"` there;
//! - Claude Code drops such an MCP tool, and Codex CLI keeps it but empties
//!   its conditions, so its model never learns which field each action
//!   needs;
//! - OpenAI refuses an array schema without `items`, and no root
//!   combinators either;
//! - Gemini takes only an OpenAPI 3.0 subset (no `$ref`, `const`,
//!   `oneOf`, `allOf`, `additionalProperties`, type lists...).
//!
//! Every rule keeps one promise: the translation may be looser than the
//! full schema, never stricter, so a call the full schema accepts is never
//! refused by what the model was shown. What a rule cannot express in
//! schema (a field required for one action) goes into the descriptions, in
//! words ("Required when `action` is `store`.").
//!
//! What lives here: [`schema_for`], the rules each consumer enforces
//! ([`rule_violations`]) and the words for a condition
//! ([`condition_at`], also used for validation errors). What does not: the
//! validation itself (`satchel-tools`) and the wire formats (`satchel-llm`,
//! `satchel-mcp`), which call [`schema_for`] on their way out.

mod combine;
mod conditions;
mod notes;
mod rules;
mod subset;

use std::borrow::Cow;
use std::fmt;

use serde_json::{Map, Value};

pub use conditions::condition_at;
pub use rules::rule_violations;

/// Who receives a tool's input schema, each with its own accepted subset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaConsumer {
    /// The Anthropic Messages API (`tools[].input_schema`).
    Anthropic,
    /// OpenAI Chat Completions and Responses in normal (non-strict) mode,
    /// and the OpenAI-compatible servers that follow it (llama.cpp, vLLM,
    /// Ollama, LM Studio).
    OpenAi,
    /// Gemini, through its OpenAI-compatible endpoint: the OpenAPI 3.0
    /// subset of its function declarations.
    Gemini,
    /// An MCP client of `satchel mcp serve` (Claude Code, Codex CLI...).
    Mcp,
}

impl SchemaConsumer {
    /// Every consumer, for listings and tests.
    pub const ALL: [SchemaConsumer; 4] = [
        SchemaConsumer::Anthropic,
        SchemaConsumer::OpenAi,
        SchemaConsumer::Gemini,
        SchemaConsumer::Mcp,
    ];

    /// The name used on the command line (`tools show --for NAME`).
    pub fn name(self) -> &'static str {
        match self {
            SchemaConsumer::Anthropic => "anthropic",
            SchemaConsumer::OpenAi => "openai",
            SchemaConsumer::Gemini => "gemini",
            SchemaConsumer::Mcp => "mcp",
        }
    }

    /// The consumer called `name`, as [`SchemaConsumer::name`] spells it.
    pub fn from_name(name: &str) -> Option<SchemaConsumer> {
        SchemaConsumer::ALL
            .into_iter()
            .find(|consumer| consumer.name() == name)
    }
}

impl fmt::Display for SchemaConsumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a schema has no form a consumer accepts: the tool is left out of
/// what that consumer is sent, with this reason in a warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unportable(pub String);

impl fmt::Display for Unportable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unportable {}

/// The form of `schema` that `consumer` accepts: the schema itself when it
/// already keeps every rule (the common case, no copy), otherwise a
/// translation that accepts every input the full schema accepts.
pub fn schema_for(schema: &Value, consumer: SchemaConsumer) -> Result<Cow<'_, Value>, Unportable> {
    if rule_violations(schema, consumer).is_empty() {
        return Ok(Cow::Borrowed(schema));
    }
    translate(schema, consumer).map(Cow::Owned)
}

fn translate(schema: &Value, consumer: SchemaConsumer) -> Result<Value, Unportable> {
    let mut root = match schema {
        Value::Object(map) => map.clone(),
        Value::Bool(true) => Map::new(),
        other => {
            return Err(Unportable(format!(
                "its input schema is {}, not an object schema",
                kind_of(other)
            )));
        }
    };
    let defs = schema.clone();
    let mut notes = notes::Notes::default();
    combine::inline_root_ref(&mut root, &defs);
    combine::merge_all_of(&mut root, &defs, &mut notes);
    combine::merge_alternatives(&mut root, &defs, &mut notes)?;
    conditions::fold_root(&mut root, &mut notes);
    combine::ensure_object_type(&mut root)?;
    notes.apply(&mut root);
    let mut out = Value::Object(root);
    match consumer {
        SchemaConsumer::OpenAi => subset::give_arrays_items(&mut out),
        SchemaConsumer::Gemini => out = subset::gemini(&out, &defs),
        SchemaConsumer::Anthropic | SchemaConsumer::Mcp => {}
    }
    Ok(out)
}

/// `a string`, `an array`...: a JSON value's kind, for messages.
fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `store` for a string, its JSON otherwise: a value as descriptions quote it.
fn quoted(value: &Value) -> String {
    match value {
        Value::String(text) => format!("`{text}`"),
        other => format!("`{other}`"),
    }
}

#[cfg(test)]
mod tests;
