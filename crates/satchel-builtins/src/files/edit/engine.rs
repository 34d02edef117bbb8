//! The edit engine, without I/O: a file's bytes decoded into text with
//! its conventions noted (UTF-8 BOM, LF or CRLF line endings; the final
//! newline or its absence is simply part of the text), exact replacements
//! applied all or none, and the text encoded back the way it came.
//!
//! In a file whose every line ends in CRLF, the text is worked on with LF
//! endings and so are `old_string` and `new_string`: a model that writes
//! `\n` matches, and the file keeps CRLF. A file of mixed endings is
//! worked on as it is.

use std::fmt::Write as _;

/// A file's text and how to write it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Document {
    /// The text, without a BOM, with LF endings when `crlf`.
    pub(crate) text: String,
    /// It began with a UTF-8 byte order mark.
    pub(crate) bom: bool,
    /// Every line ended in CRLF.
    pub(crate) crlf: bool,
}

const BOM: &str = "\u{feff}";

impl Document {
    /// Decodes a file; `None` when it is not UTF-8.
    pub(crate) fn decode(bytes: &[u8]) -> Option<Document> {
        let text = std::str::from_utf8(bytes).ok()?;
        let (bom, text) = match text.strip_prefix(BOM) {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let newlines = memchr_count(b'\n', text.as_bytes());
        let crlf = newlines > 0 && text.matches("\r\n").count() == newlines;
        let text = if crlf {
            text.replace("\r\n", "\n")
        } else {
            text.to_owned()
        };
        Some(Document { text, bom, crlf })
    }

    /// The bytes to write for `text` under this document's conventions.
    pub(crate) fn encode(&self, text: &str) -> Vec<u8> {
        let mut out = String::with_capacity(text.len() + 3);
        if self.bom {
            out.push_str(BOM);
        }
        if self.crlf {
            out.push_str(&text.replace('\n', "\r\n"));
        } else {
            out.push_str(text);
        }
        out.into_bytes()
    }

    /// A string from the model, in this document's working form.
    pub(crate) fn normalise(&self, text: &str) -> String {
        if self.crlf {
            text.replace("\r\n", "\n")
        } else {
            text.to_owned()
        }
    }
}

fn memchr_count(needle: u8, haystack: &[u8]) -> usize {
    memchr::memchr_iter(needle, haystack).count()
}

/// One replacement, in the document's working form.
#[derive(Debug, Clone)]
pub(crate) struct Replacement {
    pub(crate) old: String,
    pub(crate) new: String,
    pub(crate) all: bool,
}

/// Why a replacement cannot be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EditError {
    /// `old_string` is empty.
    EmptyOld,
    /// `old_string` equals `new_string`.
    NoChange,
    /// `old_string` does not occur; the lines most like it.
    NotFound {
        closest: Vec<(usize, String)>,
        hint: Option<String>,
    },
    /// `old_string` occurs more than once (without `replace_all`): the
    /// line each occurrence starts on.
    Ambiguous { lines: Vec<usize> },
}

impl EditError {
    /// The sentence a model reads.
    pub(crate) fn message(&self) -> String {
        match self {
            EditError::EmptyOld => "`old_string` is empty; quote the exact text to replace \
                (to create or replace a whole file, use `write`)"
                .to_owned(),
            EditError::NoChange => {
                "`old_string` and `new_string` are the same; nothing would change".to_owned()
            }
            EditError::NotFound { closest, hint } => {
                let mut message =
                    "`old_string` was not found in the file; nothing was changed.".to_owned();
                if let Some(hint) = hint {
                    let _ = write!(message, " {hint}");
                }
                if closest.is_empty() {
                    message.push_str(
                        " No line resembles its first line; read the file to see its text.",
                    );
                } else {
                    message.push_str(" The closest lines are ");
                    let shown: Vec<String> = closest
                        .iter()
                        .map(|(line, text)| format!("line {line}: `{}`", shorten(text, 120)))
                        .collect();
                    message.push_str(&shown.join("; "));
                    message.push_str(
                        ". Copy the text exactly as it is in the file (`read` shows it).",
                    );
                }
                message
            }
            EditError::Ambiguous { lines } => format!(
                "`old_string` occurs {} times, at lines {}; nothing was changed. Include more of the \
                 surrounding text to make it unique, or set `replace_all` to change every one.",
                lines.len(),
                lines
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Applies `edits` in order to `text`, each to the result of the ones
/// before; all or none. Returns the new text and how many occurrences each
/// edit replaced, or the index of the failed edit and why.
pub(crate) fn apply(
    text: &str,
    edits: &[Replacement],
) -> Result<(String, Vec<usize>), (usize, EditError)> {
    let mut current = text.to_owned();
    let mut counts = Vec::with_capacity(edits.len());
    for (index, edit) in edits.iter().enumerate() {
        let (next, count) = apply_one(&current, edit).map_err(|error| (index, error))?;
        current = next;
        counts.push(count);
    }
    Ok((current, counts))
}

fn apply_one(text: &str, edit: &Replacement) -> Result<(String, usize), EditError> {
    if edit.old.is_empty() {
        return Err(EditError::EmptyOld);
    }
    if edit.old == edit.new {
        return Err(EditError::NoChange);
    }
    let starts: Vec<usize> = text.match_indices(&edit.old).map(|(at, _)| at).collect();
    match starts.len() {
        0 => Err(not_found(text, &edit.old)),
        1 => Ok((text.replacen(&edit.old, &edit.new, 1), 1)),
        n if edit.all => Ok((text.replace(&edit.old, &edit.new), n)),
        _ => Err(EditError::Ambiguous {
            lines: starts.iter().map(|&at| line_of(text, at)).collect(),
        }),
    }
}

/// The 1-based line the byte `at` is on.
pub(crate) fn line_of(text: &str, at: usize) -> usize {
    memchr_count(b'\n', &text.as_bytes()[..at]) + 1
}

/// Lines compared for likeness at most; past it only exact matches of
/// the trimmed first line are looked for.
const FUZZY_LINES: usize = 20_000;
/// Closest lines named.
const CLOSEST: usize = 3;
/// Likeness below which a line is not named.
const MIN_LIKENESS: f64 = 0.5;

fn not_found(text: &str, old: &str) -> EditError {
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let hint = if !old.trim().is_empty() && squash(text).contains(&squash(old)) {
        Some(
            "It does occur if whitespace is ignored: check indentation (tabs or spaces), \
             line breaks and trailing spaces."
                .to_owned(),
        )
    } else {
        None
    };
    let first = old
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or_default();
    let fuzzy = memchr_count(b'\n', text.as_bytes()) < FUZZY_LINES;
    let mut scored: Vec<(f64, usize, &str)> = text
        .lines()
        .enumerate()
        .filter_map(|(index, line)| {
            let trimmed = line.trim();
            if trimmed.is_empty() {
                return None;
            }
            let score = if trimmed == first {
                1.0
            } else if fuzzy && trimmed.len() < 400 {
                strsim::normalized_levenshtein(trimmed, first)
            } else {
                0.0
            };
            (score >= MIN_LIKENESS).then_some((score, index + 1, line))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    EditError::NotFound {
        closest: scored
            .into_iter()
            .take(CLOSEST)
            .map(|(_, line, text)| (line, text.to_owned()))
            .collect(),
        hint,
    }
}

/// A unified diff of `old` → `new` with line numbers in its hunk headers,
/// three lines of context, cut after `max_lines` lines.
pub(crate) fn unified_diff(path: &str, old: &str, new: &str, max_lines: usize) -> String {
    let diff = similar::TextDiff::configure()
        .timeout(std::time::Duration::from_secs(2))
        .diff_lines(old, new);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string();
    let total = text.lines().count();
    if total <= max_lines {
        return text;
    }
    let mut cut: String = text
        .lines()
        .take(max_lines)
        .map(|line| format!("{line}\n"))
        .collect();
    let _ = writeln!(cut, "… {} more diff lines not shown", total - max_lines);
    cut
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn edit(old: &str, new: &str) -> Replacement {
        Replacement {
            old: old.into(),
            new: new.into(),
            all: false,
        }
    }

    #[test]
    fn crlf_bom_and_a_missing_final_newline_survive_an_edit() {
        let bytes = "\u{feff}one\r\ntwo\r\nthree".as_bytes();
        let doc = Document::decode(bytes).unwrap();
        assert!(doc.bom && doc.crlf);
        let (text, _) = apply(&doc.text, &[edit(&doc.normalise("one\ntwo"), "uno\ndos")]).unwrap();
        assert_eq!(doc.encode(&text), "\u{feff}uno\r\ndos\r\nthree".as_bytes());
        // A model that writes CRLF itself matches too.
        let (old, new) = (doc.normalise("two\r\n"), doc.normalise("2\r\n"));
        let (text, _) = apply(&doc.text, &[edit(&old, &new)]).unwrap();
        assert_eq!(doc.encode(&text), "\u{feff}one\r\n2\r\nthree".as_bytes());
    }

    #[test]
    fn mixed_endings_are_kept_as_they_are() {
        let doc = Document::decode(b"a\r\nb\nc\n").unwrap();
        assert!(!doc.crlf);
        let (text, _) = apply(&doc.text, &[edit("b\n", "B\n")]).unwrap();
        assert_eq!(doc.encode(&text), b"a\r\nB\nc\n");
    }

    #[test]
    fn two_matches_name_both_lines_and_replace_all_takes_both() {
        let text = "fn a() {}\n\tx = 1;\nfn b() {}\n\tx = 1;\n";
        let error = apply(text, &[edit("\tx = 1;", "\tx = 2;")]).unwrap_err();
        assert_eq!(error, (0, EditError::Ambiguous { lines: vec![2, 4] }));
        assert!(error.1.message().contains("at lines 2, 4"));
        let all = Replacement {
            all: true,
            ..edit("\tx = 1;", "\tx = 2;")
        };
        let (new, counts) = apply(text, &[all]).unwrap();
        assert_eq!(counts, [2]);
        assert_eq!(new, "fn a() {}\n\tx = 2;\nfn b() {}\n\tx = 2;\n");
    }

    #[test]
    fn no_match_names_the_closest_lines_and_whitespace() {
        let text = "alpha\n    let total = price * qty;\nomega\n";
        let EditError::NotFound { closest, hint } =
            apply(text, &[edit("let total = price * quantity;", "x")])
                .unwrap_err()
                .1
        else {
            panic!("not NotFound");
        };
        assert_eq!(closest[0].0, 2);
        assert_eq!(hint, None);
        let error = apply(text, &[edit("let  total = price *\tqty;", "x")])
            .unwrap_err()
            .1;
        assert!(
            error.message().contains("whitespace is ignored"),
            "{}",
            error.message()
        );
        assert!(error.message().contains("line 2"), "{}", error.message());
    }

    #[test]
    fn a_failing_third_edit_applies_none() {
        let text = "a\nb\nc\n";
        let error = apply(text, &[edit("a", "A"), edit("b", "B"), edit("zzz", "Z")]).unwrap_err();
        assert_eq!(error.0, 2);
        // Later edits see earlier ones.
        let (new, _) = apply(text, &[edit("a", "A"), edit("A\nb", "AB")]).unwrap();
        assert_eq!(new, "AB\nc\n");
    }

    #[test]
    fn non_ascii_and_tabs_match_exactly() {
        let doc = Document::decode("naïve\tcafé ☕\n".as_bytes()).unwrap();
        let (text, _) = apply(&doc.text, &[edit("café ☕", "thé 🍵")]).unwrap();
        assert_eq!(doc.encode(&text), "naïve\tthé 🍵\n".as_bytes());
        assert_eq!(Document::decode(&[0xff, 0xfe, 0x00]), None);
    }

    #[test]
    fn the_diff_names_lines() {
        let diff = unified_diff(
            "a.txt",
            "1\n2\n3\n4\n5\n6\n7\n8\n",
            "1\n2\n3\n4\nfive\n6\n7\n8\n",
            50,
        );
        assert!(diff.contains("@@ -2,7 +2,7 @@"), "{diff}");
        assert!(diff.contains("-5\n+five\n"), "{diff}");
    }
}
