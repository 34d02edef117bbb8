//! Cutting text to a number of characters: the one implementation every
//! crate uses, so a cut never splits a character and always says so the
//! same way.

/// The first `max_chars` characters of `text` (all of it when shorter),
/// and whether anything was cut.
pub fn char_prefix(text: &str, max_chars: usize) -> (&str, bool) {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => (&text[..cut], true),
        None => (text, false),
    }
}

/// `text` cut to `max_chars` characters, with `mark` appended when it was
/// longer.
pub fn cut_with(text: &str, max_chars: usize, mark: &str) -> String {
    match char_prefix(text, max_chars) {
        (head, true) => format!("{head}{mark}"),
        (whole, false) => whole.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_count_characters_never_bytes() {
        assert_eq!(char_prefix("héllo", 2), ("hé", true));
        assert_eq!(char_prefix("hé", 2), ("hé", false));
        assert_eq!(char_prefix("", 0), ("", false));
        assert_eq!(cut_with("日本語テキスト", 3, "…"), "日本語…");
        assert_eq!(cut_with("short", 10, "…"), "short");
    }
}
