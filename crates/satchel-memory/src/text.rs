//! Text handling for recall: turning free text into a safe FTS5 query,
//! and the stopwords that carry no meaning for keyword ranking.
//!
//! User text never reaches FTS5 as syntax: it is cut into words of
//! letters and digits, each word is quoted, and the words are joined with
//! `OR`, so `NEAR(`, `*`, `"`, `-` or `AND` in a query are only ever words.

use std::collections::HashSet;

/// Most terms an FTS query gets (the rarest are not preferred: the first ones are kept).
const MAX_TERMS: usize = 32;

/// English words too common to rank by.
const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "kind",
    "me",
    "might",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "s",
    "t",
    "d",
    "ll",
    "m",
    "re",
    "ve",
    "don",
    "didn",
    "doesn",
];

/// The words of `text`: runs of letters and digits, lowercased.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// True for a word too common to rank by.
pub fn is_stopword(word: &str) -> bool {
    STOPWORDS.contains(&word)
}

/// The terms a query ranks by: its distinct non-stopwords (every distinct
/// word when nothing else is left), at most 32.
pub fn query_terms(text: &str) -> Vec<String> {
    let all = words(text);
    let mut seen = HashSet::new();
    let mut terms: Vec<String> = all
        .iter()
        .filter(|word| !is_stopword(word) && seen.insert(word.as_str()))
        .cloned()
        .collect();
    if terms.is_empty() {
        terms = all
            .iter()
            .filter(|word| seen.insert(word.as_str()))
            .cloned()
            .collect();
    }
    terms.truncate(MAX_TERMS);
    terms
}

/// The FTS5 query matching any of `terms`, each quoted.
pub fn fts_or(terms: &[String]) -> Option<String> {
    if terms.is_empty() {
        return None;
    }
    Some(
        terms
            .iter()
            .map(|term| format!("\"{}\"", term.replace('"', "\"\"")))
            .collect::<Vec<_>>()
            .join(" OR "),
    )
}

/// An FTS5 query for free text: its [`query_terms`], quoted, joined with
/// `OR`. `None` when the text has no words at all.
pub fn fts_query(text: &str) -> Option<String> {
    fts_or(&query_terms(text))
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn builds_a_quoted_or_query_without_stopwords() {
        assert_eq!(
            fts_query("When did Caroline go to the LGBTQ support group?").as_deref(),
            Some("\"caroline\" OR \"go\" OR \"lgbtq\" OR \"support\" OR \"group\"")
        );
    }

    #[test]
    fn fts_syntax_in_user_text_is_only_words() {
        assert_eq!(
            fts_query("NEAR(a b) OR \"x* -y AND z:col^").as_deref(),
            Some("\"near\" OR \"b\" OR \"x\" OR \"y\" OR \"z\" OR \"col\"")
        );
        assert_eq!(fts_query("?!* \"\" ()"), None);
        assert_eq!(fts_query("").as_deref(), None);
    }

    #[test]
    fn stopwords_only_queries_keep_their_words() {
        assert_eq!(
            fts_query("what is it").as_deref(),
            Some("\"what\" OR \"is\" OR \"it\"")
        );
    }

    #[test]
    fn words_are_unicode_aware() {
        assert_eq!(words("Crème brûlée, 2023!"), ["crème", "brûlée", "2023"]);
    }
}
