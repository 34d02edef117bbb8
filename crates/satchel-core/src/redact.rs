//! Keeping secrets out of everything Satchel writes: [`Redactor`] replaces
//! known secret values with `[redacted]` in strings and JSON (the store's
//! record, logs), and [`StreamRedactor`] does it to a byte stream as it
//! arrives (a child's output, before it is cut to head and tail or
//! spilled), so a secret split across chunks or cut by truncation never
//! survives in part.
//!
//! The secrets are given as explicit `(name, value)` pairs; the binary
//! passes the process environment through [`Redactor::from_env`], tests
//! pass their own. Nothing here reads the environment.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

/// The text that replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// Values shorter than this are not redacted: redacting `1` or `true`
/// everywhere would destroy the record and protect nothing. Four
/// characters covers short PINs and keys; the config may raise it.
pub const DEFAULT_MIN_LENGTH: usize = 4;

/// Endings of environment-variable names that hold secrets by convention.
const SECRET_NAME_ENDINGS: [&str; 10] = [
    "API_KEY",
    "APIKEY",
    "TOKEN",
    "SECRET",
    "SECRET_KEY",
    "ACCESS_KEY",
    "PRIVATE_KEY",
    "PASSWORD",
    "PASSWD",
    "CREDENTIALS",
];

/// The `redaction` section of agent.json.
///
/// ```json
/// {"redaction": {"env": ["DATABASE_URL"], "commonNames": true, "minLength": 4}}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct RedactionConfig {
    /// Environment variables whose values are secrets.
    pub env: Vec<String>,
    /// Also treat conventional names as secrets: `*_API_KEY`, `*_TOKEN`,
    /// `*_SECRET`, `*_PASSWORD`...
    pub common_names: bool,
    /// Values shorter than this many bytes are not redacted.
    pub min_length: usize,
}

impl Default for RedactionConfig {
    fn default() -> RedactionConfig {
        RedactionConfig {
            env: Vec::new(),
            common_names: true,
            min_length: DEFAULT_MIN_LENGTH,
        }
    }
}

/// One secret: its name (for diagnostics) and the texts to look for.
#[derive(PartialEq, Eq)]
struct Secret {
    name: String,
    /// The value, and its JSON-escaped form when that differs (a secret
    /// inside serialised JSON text).
    needles: Vec<String>,
}

/// Replaces secret values with [`REDACTED`]; cheap to clone. Two are
/// equal when they replace the same values.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    /// Longest needle first, so a secret containing another is replaced whole.
    secrets: Arc<[Secret]>,
}

impl fmt::Debug for Redactor {
    // Names only: a Debug print must never leak the values.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.names().collect::<Vec<_>>())
            .finish()
    }
}

impl Redactor {
    /// A redactor that changes nothing.
    pub fn none() -> Redactor {
        Redactor::default()
    }

    /// A redactor for these `(name, value)` pairs; values (trimmed of
    /// surrounding whitespace) shorter than `min_length` bytes are skipped.
    pub fn new(secrets: impl IntoIterator<Item = (String, String)>, min_length: usize) -> Redactor {
        let mut list: Vec<Secret> = Vec::new();
        for (name, value) in secrets {
            let value = value.trim();
            if value.len() < min_length.max(1) {
                continue;
            }
            let mut needles = vec![value.to_owned()];
            let escaped = Value::String(value.to_owned()).to_string();
            let escaped = &escaped[1..escaped.len() - 1];
            if escaped != value {
                needles.push(escaped.to_owned());
            }
            list.push(Secret { name, needles });
        }
        list.sort_by_key(|secret| {
            std::cmp::Reverse(secret.needles.iter().map(String::len).max().unwrap_or(0))
        });
        Redactor {
            secrets: list.into(),
        }
    }

    /// A redactor for the environment variables `config` names, plus those
    /// with conventional secret names when `config.common_names` is set.
    pub fn from_env(
        config: &RedactionConfig,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Redactor {
        let chosen = env.into_iter().filter(|(name, _)| {
            config.env.iter().any(|listed| listed == name)
                || (config.common_names && is_secret_name(name))
        });
        Redactor::new(chosen, config.min_length)
    }

    /// A redactor for a child's output stream (see [`StreamRedactor`]).
    pub fn stream(&self) -> StreamRedactor {
        StreamRedactor::new(self)
    }

    /// Names of the secrets this redactor replaces.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.secrets.iter().map(|secret| secret.name.as_str())
    }

    /// True when there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every secret replaced; borrowed when nothing matched.
    pub fn redact_str<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for needle in self.secrets.iter().flat_map(|secret| &secret.needles) {
            if out.contains(needle.as_str()) {
                out = Cow::Owned(out.replace(needle.as_str(), REDACTED));
            }
        }
        out
    }

    /// `text` with every secret replaced.
    pub fn redact_string(&self, text: String) -> String {
        match self.redact_str(&text) {
            Cow::Borrowed(_) => text,
            Cow::Owned(redacted) => redacted,
        }
    }

    /// Replaces secrets in every string of `value`, object keys included.
    pub fn redact_json(&self, value: &mut Value) {
        if self.is_empty() {
            return;
        }
        match value {
            Value::String(text) => {
                if let Cow::Owned(redacted) = self.redact_str(text) {
                    *text = redacted;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.redact_json(item)),
            Value::Object(map) => {
                let needs_new_keys = map
                    .keys()
                    .any(|key| matches!(self.redact_str(key), Cow::Owned(_)));
                if needs_new_keys {
                    let old = std::mem::take(map);
                    for (key, mut child) in old {
                        self.redact_json(&mut child);
                        map.insert(self.redact_string(key), child);
                    }
                } else {
                    map.values_mut().for_each(|child| self.redact_json(child));
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

/// Redacts a byte stream chunk by chunk: what it returns never holds a
/// secret, even one split across chunks, because the last bytes that could
/// begin one are held back until the next chunk (or [`StreamRedactor::finish`])
/// shows whether they do.
pub struct StreamRedactor {
    finders: Vec<memchr::memmem::Finder<'static>>,
    /// Bytes held back: the end of what came, which may begin a secret.
    pending: Vec<u8>,
    longest: usize,
}

impl StreamRedactor {
    fn new(redactor: &Redactor) -> StreamRedactor {
        // Longest first: a secret that contains another is replaced whole.
        let mut needles: Vec<&str> = redactor
            .secrets
            .iter()
            .flat_map(|secret| secret.needles.iter().map(String::as_str))
            .collect();
        needles.sort_by_key(|needle| std::cmp::Reverse(needle.len()));
        needles.dedup();
        StreamRedactor {
            longest: needles.first().map_or(0, |needle| needle.len()),
            finders: needles
                .iter()
                .map(|needle| memchr::memmem::Finder::new(needle.as_bytes()).into_owned())
                .collect(),
            pending: Vec::new(),
        }
    }

    /// The next part of the stream, redacted; borrowed when there are no
    /// secrets to look for.
    pub fn feed<'a>(&mut self, chunk: &'a [u8]) -> Cow<'a, [u8]> {
        if self.finders.is_empty() {
            return Cow::Borrowed(chunk);
        }
        self.pending.extend_from_slice(chunk);
        // A secret that starts before `limit` is whole in `pending` if it is
        // there at all; one that starts later may still be arriving.
        let limit = self.pending.len().saturating_sub(self.longest - 1);
        Cow::Owned(self.release(limit))
    }

    /// The rest of the stream, redacted, once it has ended.
    pub fn finish(&mut self) -> Vec<u8> {
        let end = self.pending.len();
        self.release(end)
    }

    /// Replaces every secret that starts before `limit`, and returns the
    /// bytes up to `limit` (or past it, to the end of a secret replaced).
    fn release(&mut self, limit: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(limit + REDACTED.len());
        let mut at = 0;
        while let Some((start, end)) = self.earliest(at, limit) {
            out.extend_from_slice(&self.pending[at..start]);
            out.extend_from_slice(REDACTED.as_bytes());
            at = end;
        }
        let upto = limit.max(at);
        out.extend_from_slice(&self.pending[at..upto]);
        self.pending.drain(..upto);
        out
    }

    /// The earliest secret starting in `from..limit`, longest at a tie.
    fn earliest(&self, from: usize, limit: usize) -> Option<(usize, usize)> {
        let haystack = &self.pending[from..];
        let mut best: Option<(usize, usize)> = None;
        for finder in &self.finders {
            if let Some(offset) = finder.find(haystack) {
                let start = from + offset;
                let end = start + finder.needle().len();
                if start < limit && best.is_none_or(|(s, _)| start < s) {
                    best = Some((start, end));
                }
            }
        }
        best
    }
}

/// True for names that hold secrets by convention (`OPENAI_API_KEY`,
/// `GITHUB_TOKEN`, `DB_PASSWORD`...), case-insensitively.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAME_ENDINGS
        .iter()
        .any(|ending| upper.ends_with(ending))
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect()
    }

    #[test]
    fn replaces_every_occurrence_longest_first() {
        let redactor = Redactor::new(
            pairs(&[("SHORT", "abcdefgh"), ("LONG", "abcdefgh-ijkl")]),
            8,
        );
        assert_eq!(
            redactor.redact_str("x abcdefgh-ijkl y abcdefgh z abcdefgh"),
            "x [redacted] y [redacted] z [redacted]"
        );
        assert!(matches!(
            redactor.redact_str("nothing here"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn a_stream_never_lets_a_secret_through_however_it_is_cut() {
        let redactor = Redactor::new(
            pairs(&[
                ("KEY", "sk-live-123456"),
                ("PIN", "4321"),
                ("OTHER", "sk-live"),
            ]),
            4,
        );
        let text = b"a sk-live-123456 b 4321 c sk-live d sk-live-12345 e 43214321";
        let expected =
            "a [redacted] b [redacted] c [redacted] d [redacted]-12345 e [redacted][redacted]";
        for piece in 1..=text.len() {
            let mut stream = redactor.stream();
            let mut out = Vec::new();
            for chunk in text.chunks(piece) {
                out.extend_from_slice(&stream.feed(chunk));
            }
            out.extend_from_slice(&stream.finish());
            assert_eq!(
                String::from_utf8(out).unwrap(),
                expected,
                "pieces of {piece}"
            );
        }
        // Nothing to look for: the chunk goes through untouched.
        let mut none = Redactor::none().stream();
        assert!(matches!(none.feed(b"sk-live-123456"), Cow::Borrowed(_)));
        assert!(none.finish().is_empty());
    }

    #[test]
    fn short_values_are_never_redacted() {
        let redactor = Redactor::new(pairs(&[("DEBUG", "1"), ("MODE", " true \n")]), 8);
        assert!(redactor.is_empty());
        assert_eq!(redactor.redact_str("1 true"), "1 true");
    }

    #[test]
    fn json_strings_and_keys_are_redacted_numbers_are_not() {
        let redactor = Redactor::new(pairs(&[("K", "sk-live-123456")]), 8);
        let mut value = json!({
            "command": "curl -H 'Bearer sk-live-123456' x",
            "list": ["sk-live-123456", 12345678],
            "sk-live-123456": {"nested": "a sk-live-123456 b"},
        });
        redactor.redact_json(&mut value);
        assert_eq!(
            value,
            json!({
                "command": "curl -H 'Bearer [redacted]' x",
                "list": ["[redacted]", 12345678],
                "[redacted]": {"nested": "a [redacted] b"},
            })
        );
    }

    #[test]
    fn escaped_forms_inside_serialised_json_are_redacted() {
        let redactor = Redactor::new(pairs(&[("P", "pa\"ss\\word")]), 8);
        let serialised = json!({"password": "pa\"ss\\word"}).to_string();
        assert_eq!(
            redactor.redact_str(&serialised),
            r#"{"password":"[redacted]"}"#
        );
    }

    #[test]
    fn from_env_picks_listed_and_conventional_names() {
        let env = pairs(&[
            ("OPENAI_API_KEY", "sk-openai-0001"),
            ("GITHUB_TOKEN", "ghp_000000001"),
            ("db_password", "hunter2hunter2"),
            ("DATABASE_URL", "postgres://u:p@h/db"),
            ("HOME", "/home/someone"),
            ("PATH", "/usr/bin:/bin"),
        ]);
        let config = RedactionConfig {
            env: vec!["DATABASE_URL".into()],
            ..RedactionConfig::default()
        };
        let redactor = Redactor::from_env(&config, env.clone());
        let mut names: Vec<&str> = redactor.names().collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "DATABASE_URL",
                "GITHUB_TOKEN",
                "OPENAI_API_KEY",
                "db_password"
            ]
        );
        let only_listed = RedactionConfig {
            common_names: false,
            ..config
        };
        let redactor = Redactor::from_env(&only_listed, env);
        assert_eq!(redactor.names().collect::<Vec<_>>(), ["DATABASE_URL"]);
    }

    #[test]
    fn debug_never_prints_values() {
        let redactor = Redactor::new(pairs(&[("API_KEY", "very-secret-value")]), 8);
        let debug = format!("{redactor:?}");
        assert!(debug.contains("API_KEY"), "{debug}");
        assert!(!debug.contains("very-secret-value"), "{debug}");
    }

    #[test]
    fn config_section_parses_with_defaults() {
        let config: RedactionConfig = serde_json::from_value(json!({"env": ["X"]})).unwrap();
        assert_eq!(
            config,
            RedactionConfig {
                env: vec!["X".into()],
                common_names: true,
                min_length: 4
            }
        );
        assert!(serde_json::from_value::<RedactionConfig>(json!({"envs": []})).is_err());
    }
}
