//! What merging a schema's combinators loses, kept as words: sentences
//! for each property and for the whole input, written into their
//! descriptions at the end ([`Notes::apply`]). `combine` and `conditions`
//! both add to them.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// Words to add to descriptions: per property, and for the whole input.
#[derive(Debug, Default)]
pub(super) struct Notes {
    /// Property name to the sentences about it, in order of discovery.
    pub(super) properties: BTreeMap<String, Vec<String>>,
    /// Sentences about the whole input.
    pub(super) root: Vec<String>,
}

impl Notes {
    /// Adds `sentence` about property `name` (once).
    pub(super) fn property(&mut self, name: &str, sentence: String) {
        let sentences = self.properties.entry(name.to_owned()).or_default();
        if !sentences.contains(&sentence) {
            sentences.push(sentence);
        }
    }

    /// Adds `sentence` about the whole input (once).
    pub(super) fn root(&mut self, sentence: String) {
        if !self.root.contains(&sentence) {
            self.root.push(sentence);
        }
    }

    /// Writes the notes into the descriptions of `root` and its properties.
    /// A note about a property the schema does not list goes to the root.
    pub(super) fn apply(mut self, root: &mut Map<String, Value>) {
        let properties = root.get_mut("properties").and_then(Value::as_object_mut);
        let mut orphans = Vec::new();
        match properties {
            Some(properties) => {
                for (name, sentences) in std::mem::take(&mut self.properties) {
                    match properties.get_mut(&name) {
                        Some(property) => append_description(property, &sentences.join(" ")),
                        None => orphans.push(format!("`{name}`: {}", sentences.join(" "))),
                    }
                }
            }
            None => {
                for (name, sentences) in std::mem::take(&mut self.properties) {
                    orphans.push(format!("`{name}`: {}", sentences.join(" ")));
                }
            }
        }
        self.root.extend(orphans);
        if !self.root.is_empty() {
            let mut object = Value::Object(std::mem::take(root));
            append_description(&mut object, &self.root.join(" "));
            if let Value::Object(map) = object {
                *root = map;
            }
        }
    }
}

/// Appends `text` to a schema's description (a `true` schema becomes `{}`).
fn append_description(schema: &mut Value, text: &str) {
    if schema == &Value::Bool(true) {
        *schema = json!({});
    }
    let Value::Object(map) = schema else {
        return;
    };
    let description = match map.get("description").and_then(Value::as_str) {
        Some(old) if !old.is_empty() => {
            let stop = if old.ends_with(['.', '!', '?', ')']) {
                ""
            } else {
                "."
            };
            format!("{old}{stop} {text}")
        }
        _ => text.to_owned(),
    };
    map.insert("description".into(), Value::String(description));
}
