//! Text handling for keyword recall: the terms a memory is indexed by and
//! the terms a query ranks by.
//!
//! A term is a run of letters and digits, lowercased and reduced to its
//! English stem (Snowball), so "hiking", "hikes" and "hiked" meet. Every
//! word of a memory is indexed; a query leaves out stopwords unless they
//! are all it has. User text is only ever words: there is no query syntax.

use std::collections::HashSet;
use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};

/// Most terms a query ranks by (the first ones are kept).
const MAX_TERMS: usize = 32;

/// Longest word indexed, in bytes: longer runs are not words.
const MAX_WORD: usize = 64;
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

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// The words of `text`: runs of letters and digits, lowercased.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty() && word.len() <= MAX_WORD)
        .map(str::to_lowercase)
        .collect()
}

/// True for a word too common to rank by.
pub fn is_stopword(word: &str) -> bool {
    STOPWORDS.contains(&word)
}

/// A lowercased word's stem.
pub fn stem(word: &str) -> String {
    STEMMER.stem(word).into_owned()
}

/// The terms a memory is indexed by: the stem of every word, in order.
pub fn terms(text: &str) -> Vec<String> {
    words(text).iter().map(|word| stem(word)).collect()
}

/// The terms a query ranks by: the distinct stems of its non-stopwords
/// (of every word when nothing else is left), at most 32.
pub fn query_terms(text: &str) -> Vec<String> {
    let all = words(text);
    let mut kept: Vec<&String> = all.iter().filter(|word| !is_stopword(word)).collect();
    if kept.is_empty() {
        kept = all.iter().collect();
    }
    let mut seen = HashSet::new();
    let mut terms: Vec<String> = kept
        .into_iter()
        .map(|word| stem(word))
        .filter(|term| seen.insert(term.clone()))
        .collect();
    terms.truncate(MAX_TERMS);
    terms
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn queries_keep_stems_of_their_meaningful_words() {
        assert_eq!(
            query_terms("When did Caroline go to the LGBTQ support groups?"),
            ["carolin", "go", "lgbtq", "support", "group"]
        );
        assert_eq!(query_terms("hiking, hikes, hiked"), ["hike"]);
    }

    #[test]
    fn syntax_in_user_text_is_only_words() {
        assert_eq!(
            query_terms("NEAR(a b) OR \"x* -y AND z:col^"),
            ["near", "b", "x", "y", "z", "col"]
        );
        assert!(query_terms("?!* \"\" ()").is_empty());
        assert!(query_terms("").is_empty());
    }

    #[test]
    fn stopwords_only_queries_keep_their_words() {
        assert_eq!(query_terms("what is it"), ["what", "is", "it"]);
    }

    #[test]
    fn words_are_unicode_aware() {
        assert_eq!(words("Crème brûlée, 2023!"), ["crème", "brûlée", "2023"]);
        assert_eq!(terms("Running dogs ran"), ["run", "dog", "ran"]);
    }
}
