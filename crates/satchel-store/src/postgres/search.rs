//! Conversation search on PostgreSQL: the text Satchel indexes (folded
//! in Rust, so the server needs no extension) and plain words turned into
//! a `tsquery` that no word can turn into syntax.
//!
//! Folding mirrors SQLite's `unicode61 remove_diacritics 2` tokenizer:
//! lower case, diacritics removed, anything that is not a letter or digit
//! separates words. Documents and queries are folded alike, so the
//! server's parser only ever sees letters, digits and spaces.

use satchel_core::{Content, ToolResults};
use serde_json::Value;
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// `text` folded: lower case, no diacritics, words separated by one space.
pub(crate) fn fold(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = true;
    for c in text.nfkd().filter(|c| !is_combining_mark(*c)) {
        if c.is_alphanumeric() {
            out.extend(c.to_lowercase());
            space = false;
        } else if !space {
            out.push(' ');
            space = true;
        }
    }
    if out.ends_with(' ') {
        out.pop();
    }
    out
}

/// The most of a document's folded text that is indexed. PostgreSQL
/// refuses a `tsvector` over 1 MB (`string is too long for tsvector`), and
/// a tool's output of unique tokens (base64, hashes) would reach it: the
/// record would fail for the sake of its search index.
const MAX_INDEXED_BYTES: usize = 256 * 1024;

/// A document's text as it is indexed: folded, then cut at a word
/// boundary to [`MAX_INDEXED_BYTES`].
pub(crate) fn document(text: &str) -> String {
    let mut folded = fold(text);
    if folded.len() > MAX_INDEXED_BYTES {
        // Folded text is words and single spaces; cut at the last space
        // before the limit (a char boundary, since a space is one byte).
        let cut = folded[..MAX_INDEXED_BYTES].rfind(' ').unwrap_or(0);
        folded.truncate(cut);
    }
    folded
}

/// Every string inside a JSON value (not the keys).
fn json_strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(text) => out.push(text.clone()),
        Value::Array(items) => items.iter().for_each(|item| json_strings(item, out)),
        Value::Object(map) => map.values().for_each(|item| json_strings(item, out)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// What is indexed of a tool call: its name, the strings of its input, the
/// strings of its results (text parts and JSON parts, not part tags or
/// image data) and its note, folded.
pub(crate) fn tool_call_text(
    tool: &str,
    input: &Value,
    results: &ToolResults,
    response: Option<&str>,
) -> String {
    let mut parts = vec![tool.to_owned()];
    json_strings(input, &mut parts);
    match results {
        ToolResults::Text(text) => parts.push(text.clone()),
        ToolResults::Parts(items) => {
            for item in items {
                match item {
                    Content::Text { text } => parts.push(text.clone()),
                    Content::Json { json } => json_strings(json, &mut parts),
                    Content::Image { .. } => {}
                }
            }
        }
    }
    parts.extend(response.map(str::to_owned));
    document(&parts.join("\n"))
}

/// Plain words as a `tsquery` for the `simple` configuration: every word
/// required; a word of several tokens (`a-b`) a phrase; a trailing `*` a
/// prefix search on its last token. `None` when there are no words.
pub(crate) fn tsquery(text: &str) -> Option<String> {
    let terms: Vec<String> = text
        .split_whitespace()
        .filter_map(|word| {
            let (word, prefix) = match word.strip_suffix('*') {
                Some(stem) => (stem, true),
                None => (word, false),
            };
            let folded = fold(word);
            let tokens: Vec<&str> = folded.split(' ').filter(|t| !t.is_empty()).collect();
            let last = tokens.len().checked_sub(1)?;
            let phrase: Vec<String> = tokens
                .iter()
                .enumerate()
                .map(|(index, token)| {
                    let star = if prefix && index == last { ":*" } else { "" };
                    format!("'{token}'{star}")
                })
                .collect();
            Some(format!("({})", phrase.join(" <-> ")))
        })
        .collect();
    (!terms.is_empty()).then(|| terms.join(" & "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_drops_case_diacritics_and_punctuation() {
        assert_eq!(fold("Café  logs: NEEDLE-x\n"), "cafe logs needle x");
        assert_eq!(fold("  "), "");
    }

    #[test]
    fn words_become_required_terms_and_never_syntax() {
        assert_eq!(
            tsquery("cargo  test").as_deref(),
            Some("('cargo') & ('test')")
        );
        assert_eq!(
            tsquery("pre* a-b").as_deref(),
            Some("('pre':*) & ('a' <-> 'b')")
        );
        assert_eq!(
            tsquery("needle OR NEAR(\"").as_deref(),
            Some("('needle') & ('or') & ('near')")
        );
        assert_eq!(tsquery(" * -- '"), None);
    }

    #[test]
    fn a_huge_document_is_cut_at_a_word_before_the_index_limit() {
        let words: String = (0..100_000).map(|i| format!("tok{i:x} ")).collect();
        let indexed = document(&words);
        assert!(indexed.len() <= MAX_INDEXED_BYTES, "{}", indexed.len());
        assert!(indexed.len() > MAX_INDEXED_BYTES - 16);
        assert!(!indexed.ends_with(' '));
        assert!(words.starts_with(&indexed));
    }
}
