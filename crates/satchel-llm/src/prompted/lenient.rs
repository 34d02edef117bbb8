//! A forgiving JSON reader for the call objects models write by hand.
//!
//! Strict JSON is read exactly as `serde_json` reads it. On top of that,
//! what a model gets wrong but means unambiguously is accepted:
//! - a trailing comma before `}` or `]`;
//! - strings in single quotes (`'ls -la'`, with `\'` for a quote);
//! - a quote inside a string that the model forgot to escape, when it is
//!   not followed by `,` `:` `}` `]` or the end (so `"echo "hi""` is
//!   `echo "hi"`, and `'it's'` is `it's`), tried only when the strict
//!   reading fails;
//! - raw newlines and tabs inside strings, and unknown escapes such as
//!   `\.` (kept as written: a backslash and the character);
//! - Python's `True`, `False` and `None`.
//!
//! Not accepted: unquoted keys, comments, `NaN`, missing commas. What lives
//! elsewhere: finding objects in a reply (`parse`).

use serde_json::{Map, Number, Value};

/// Objects nested deeper than this are refused (the reader recurses).
const MAX_DEPTH: usize = 64;

/// Why a document could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseError {
    /// Byte offset in the whole text where reading stopped.
    pub(crate) offset: usize,
    /// What was expected, for the model.
    pub(crate) message: String,
    /// True when the shared work budget ran out (not the document's fault).
    pub(crate) exhausted: bool,
}

/// Bytes a search may read over all its attempts, so that a reply full of
/// unclosed braces cannot make finding objects quadratic.
#[derive(Debug)]
pub(crate) struct Budget {
    left: usize,
}

impl Budget {
    /// A budget proportional to the text searched.
    pub(crate) fn for_text(text: &str) -> Budget {
        Budget {
            left: text.len().saturating_mul(16).saturating_add(1 << 16),
        }
    }
}

/// Reads one object that starts at byte `start` of `text` (a `{`); returns
/// it and the offset just past its closing `}`.
///
/// Quotes are first read strictly (every unescaped quote closes its
/// string); only when that fails is a quote that is not followed by `,`
/// `:` `}` `]` taken as part of the string. A failure reports where the
/// strict reading stopped, which is where a person would look.
pub(crate) fn object_at(
    text: &str,
    start: usize,
    budget: &mut Budget,
) -> Result<(Value, usize), ParseError> {
    let strict = read_at(text, start, false, budget, Reader::object)?;
    match strict {
        Ok(found) => Ok(found),
        Err(error) => match read_at(text, start, true, budget, Reader::object)? {
            Ok(found) => Ok(found),
            Err(_) => Err(error),
        },
    }
}

/// Reads `text` as one JSON value (leading and trailing whitespace allowed),
/// quotes as [`object_at`] reads them.
pub(crate) fn value(text: &str) -> Result<Value, ParseError> {
    let whole = |reader: &mut Reader<'_>| {
        reader.skip_space();
        let value = reader.value()?;
        reader.skip_space();
        if reader.pos < reader.bytes.len() {
            return Err(reader.error("the end of the value"));
        }
        Ok(value)
    };
    let mut budget = Budget::for_text(text);
    let strict = read_at(text, 0, false, &mut budget, whole)?;
    match strict {
        Ok((value, _)) => Ok(value),
        Err(error) => match read_at(text, 0, true, &mut budget, whole)? {
            Ok((value, _)) => Ok(value),
            Err(_) => Err(error),
        },
    }
}

/// One reading from `start`; the outer error is the budget running out.
fn read_at<'t>(
    text: &'t str,
    start: usize,
    loose_quotes: bool,
    budget: &mut Budget,
    read: impl FnOnce(&mut Reader<'t>) -> Result<Value, ParseError>,
) -> Result<Result<(Value, usize), ParseError>, ParseError> {
    let mut reader = Reader {
        text,
        bytes: text.as_bytes(),
        pos: start,
        depth: 0,
        loose_quotes,
    };
    let result = read(&mut reader);
    let spent = reader.pos.saturating_sub(start).max(1);
    if spent > budget.left {
        budget.left = 0;
        return Err(ParseError {
            offset: reader.pos,
            message: "too much to read".into(),
            exhausted: true,
        });
    }
    budget.left -= spent;
    Ok(result.map(|value| (value, reader.pos)))
}

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
    /// Whether a quote not followed by `,` `:` `}` `]` stays in the string.
    loose_quotes: bool,
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// The next non-space byte after `pos`, without moving.
    fn next_structural(&self, mut pos: usize) -> Option<u8> {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(pos) {
            pos += 1;
        }
        self.bytes.get(pos).copied()
    }

    fn error(&self, expected: &str) -> ParseError {
        let found = match self
            .text
            .get(self.pos..)
            .and_then(|rest| rest.chars().next())
        {
            None => "the end of the reply".to_owned(),
            Some(c) => format!("`{c}`"),
        };
        ParseError {
            offset: self.pos,
            message: format!("expected {expected}, found {found}"),
            exhausted: false,
        }
    }

    fn value(&mut self) -> Result<Value, ParseError> {
        match self.peek() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(quote @ (b'"' | b'\'')) => self.string(quote).map(Value::String),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b'a'..=b'z' | b'A'..=b'Z') => self.literal(),
            _ => Err(self.error("a value")),
        }
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ParseError {
                offset: self.pos,
                message: format!("values nested more than {MAX_DEPTH} deep"),
                exhausted: false,
            });
        }
        self.pos += 1;
        self.skip_space();
        Ok(())
    }

    fn object(&mut self) -> Result<Value, ParseError> {
        if self.peek() != Some(b'{') {
            return Err(self.error("`{`"));
        }
        self.enter()?;
        let mut map = Map::new();
        loop {
            match self.peek() {
                Some(b'}') => break,
                Some(quote @ (b'"' | b'\'')) => {
                    let key = self.string(quote)?;
                    self.skip_space();
                    if self.peek() != Some(b':') {
                        return Err(self.error("`:` after a key"));
                    }
                    self.pos += 1;
                    self.skip_space();
                    let value = self.value()?;
                    map.insert(key, value);
                    self.skip_space();
                    match self.peek() {
                        Some(b',') => {
                            self.pos += 1;
                            self.skip_space();
                        }
                        Some(b'}') => break,
                        _ => return Err(self.error("`,` or `}` after a value")),
                    }
                }
                _ => return Err(self.error("a quoted key or `}`")),
            }
        }
        self.pos += 1;
        self.depth -= 1;
        Ok(Value::Object(map))
    }

    fn array(&mut self) -> Result<Value, ParseError> {
        self.enter()?;
        let mut items = Vec::new();
        loop {
            if self.peek() == Some(b']') {
                break;
            }
            items.push(self.value()?);
            self.skip_space();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_space();
                }
                Some(b']') => break,
                _ => return Err(self.error("`,` or `]` after an item")),
            }
        }
        self.pos += 1;
        self.depth -= 1;
        Ok(Value::Array(items))
    }

    /// A string in `quote`s; `pos` is on the opening quote.
    fn string(&mut self, quote: u8) -> Result<String, ParseError> {
        let open = self.pos;
        self.pos += 1;
        let mut out = String::new();
        let mut run = self.pos;
        loop {
            let Some(byte) = self.peek() else {
                // `pos` stays at the end, so the budget pays for the whole read.
                return Err(ParseError {
                    offset: open,
                    message: "an unclosed string, opened".into(),
                    exhausted: false,
                });
            };
            if byte == quote {
                let closes = !self.loose_quotes
                    || matches!(
                        self.next_structural(self.pos + 1),
                        None | Some(b',' | b':' | b'}' | b']')
                    );
                if closes {
                    out.push_str(&self.text[run..self.pos]);
                    self.pos += 1;
                    return Ok(out);
                }
                // An unescaped quote inside the string: kept as written.
                self.pos += 1;
            } else if byte == b'\\' {
                out.push_str(&self.text[run..self.pos]);
                self.escape(&mut out)?;
                run = self.pos;
            } else {
                self.pos += 1;
            }
        }
    }

    /// One escape; `pos` is on the backslash.
    fn escape(&mut self, out: &mut String) -> Result<(), ParseError> {
        let Some(&next) = self.bytes.get(self.pos + 1) else {
            self.pos += 1;
            return Err(self.error("a character after `\\`"));
        };
        let simple = match next {
            b'"' => Some('"'),
            b'\'' => Some('\''),
            b'\\' => Some('\\'),
            b'/' => Some('/'),
            b'b' => Some('\u{8}'),
            b'f' => Some('\u{c}'),
            b'n' => Some('\n'),
            b'r' => Some('\r'),
            b't' => Some('\t'),
            _ => None,
        };
        if let Some(c) = simple {
            out.push(c);
            self.pos += 2;
            return Ok(());
        }
        if next == b'u' {
            if let Some(c) = self.unicode_escape() {
                out.push(c);
                return Ok(());
            }
            self.pos += 2;
            return Err(self.error("four hex digits after `\\u`"));
        }
        // An unknown escape such as `\.` or `\$`: kept as written.
        out.push('\\');
        self.pos += 1;
        Ok(())
    }

    /// `\uXXXX`, or a surrogate pair of two; moves past it on success.
    fn unicode_escape(&mut self) -> Option<char> {
        let hex = |at: usize| {
            self.text
                .get(at..at + 4)
                .and_then(|digits| u32::from_str_radix(digits, 16).ok())
        };
        let first = hex(self.pos + 2)?;
        if (0xD800..0xDC00).contains(&first)
            && self.text.get(self.pos + 6..self.pos + 8) == Some("\\u")
        {
            let second = hex(self.pos + 8)?;
            if (0xDC00..0xE000).contains(&second) {
                self.pos += 12;
                return char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00));
            }
        }
        self.pos += 6;
        Some(char::from_u32(first).unwrap_or(char::REPLACEMENT_CHARACTER))
    }

    fn number(&mut self) -> Result<Value, ParseError> {
        let start = self.pos;
        while let Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        let lexeme = &self.text[start..self.pos];
        match serde_json::from_str::<Number>(lexeme) {
            Ok(number) => Ok(Value::Number(number)),
            Err(_) => {
                self.pos = start;
                Err(self.error("a number"))
            }
        }
    }

    fn literal(&mut self) -> Result<Value, ParseError> {
        let start = self.pos;
        while let Some(b'a'..=b'z' | b'A'..=b'Z') = self.peek() {
            self.pos += 1;
        }
        match &self.text[start..self.pos] {
            "true" | "True" => Ok(Value::Bool(true)),
            "false" | "False" => Ok(Value::Bool(false)),
            "null" | "None" => Ok(Value::Null),
            _ => {
                self.pos = start;
                Err(self.error("a value (strings need quotes)"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn read(text: &str) -> Result<Value, String> {
        value(text).map_err(|e| format!("{} at {}", e.message, e.offset))
    }

    #[test]
    fn strict_json_reads_as_serde_json_does() {
        let text =
            r#"{"a": [1, -2.5e3, true, false, null], "b": {"c": "x\"y\\z\u00e9\ud83d\ude00\n"}}"#;
        let strict: Value = serde_json::from_str(text).unwrap();
        assert_eq!(read(text).unwrap(), strict);
    }

    #[test]
    fn trailing_commas_are_accepted() {
        assert_eq!(
            read(r#"{"a": [1, 2,], "b": 3,}"#).unwrap(),
            json!({"a": [1, 2], "b": 3})
        );
        assert!(read(r#"[1,,2]"#).is_err());
        assert!(read(r#"{,}"#).is_err());
    }

    #[test]
    fn single_quotes_and_apostrophes() {
        assert_eq!(
            read(r#"{'tool': 'bash', 'params': {'command': "echo 'hi'"}}"#).unwrap(),
            json!({"tool": "bash", "params": {"command": "echo 'hi'"}})
        );
        // An apostrophe inside a single-quoted string is not its end.
        assert_eq!(
            read("{'q': 'it's here'}").unwrap(),
            json!({"q": "it's here"})
        );
        assert_eq!(read(r"{'q': 'it\'s'}").unwrap(), json!({"q": "it's"}));
    }

    #[test]
    fn unescaped_quotes_raw_newlines_and_unknown_escapes_are_kept() {
        assert_eq!(
            read(r#"{"command": "echo "hi" > out"}"#).unwrap(),
            json!({"command": "echo \"hi\" > out"})
        );
        assert_eq!(
            read("{\"code\": \"a = 1\n\tprint(a)\"}").unwrap(),
            json!({"code": "a = 1\n\tprint(a)"})
        );
        assert_eq!(
            read(r#"{"command": "grep -E '\.rs$' \$HOME"}"#).unwrap(),
            json!({"command": r"grep -E '\.rs$' \$HOME"})
        );
    }

    #[test]
    fn python_literals() {
        assert_eq!(
            read("{'a': True, 'b': False, 'c': None}").unwrap(),
            json!({"a": true, "b": false, "c": null})
        );
    }

    #[test]
    fn errors_say_what_was_expected_and_where() {
        assert_eq!(
            read(r#"{"a": 1 "b": 2}"#).unwrap_err(),
            "expected `,` or `}` after a value, found `\"` at 8"
        );
        assert_eq!(
            read(r#"{"a": [1, 2}"#).unwrap_err(),
            "expected `,` or `]` after an item, found `}` at 11"
        );
        assert_eq!(
            read(r#"{"a": "never"#).unwrap_err(),
            "an unclosed string, opened at 6"
        );
        assert_eq!(
            read(r#"{a: 1}"#).unwrap_err(),
            "expected a quoted key or `}`, found `a` at 1"
        );
        assert_eq!(
            read(r#"{"a": NaN}"#).unwrap_err(),
            "expected a value (strings need quotes), found `N` at 6"
        );
        assert_eq!(
            read(r#"{"a": 01}"#).unwrap_err(),
            "expected a number, found `0` at 6"
        );
        assert_eq!(
            read(r#"{"a": 1} x"#).unwrap_err(),
            "expected the end of the value, found `x` at 9"
        );
        let deep = "[".repeat(100);
        assert!(
            read(&deep)
                .unwrap_err()
                .starts_with("values nested more than 64 deep")
        );
    }

    #[test]
    fn object_at_reads_from_an_offset_and_spends_the_budget() {
        let text = r#"see {"a": {"b": 1}} and more"#;
        let mut budget = Budget::for_text(text);
        let (value, end) = object_at(text, 4, &mut budget).unwrap();
        assert_eq!(value, json!({"a": {"b": 1}}));
        assert_eq!(&text[end..], " and more");

        let mut empty = Budget { left: 3 };
        let error = object_at(text, 4, &mut empty).unwrap_err();
        assert!(error.exhausted);
    }
}
