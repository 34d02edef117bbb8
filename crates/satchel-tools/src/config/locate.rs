//! Paths into a JSON document: the steps of one (`permissions.deny[2]`),
//! the value at one, and where one starts in the file's text, for messages
//! that name a line and a column.

use serde_json::Value;

/// One step of a path into a JSON document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonStep {
    /// An object's key.
    Key(String),
    /// An array's item.
    Index(usize),
}

impl JsonStep {
    /// A key step.
    pub fn key(key: &str) -> JsonStep {
        JsonStep::Key(key.to_owned())
    }
}

/// `permissions.deny[2]`: a path as users read it.
pub fn dotted(path: &[JsonStep]) -> String {
    let mut text = String::new();
    for step in path {
        match step {
            JsonStep::Key(key) => {
                if !text.is_empty() {
                    text.push('.');
                }
                text.push_str(key);
            }
            JsonStep::Index(index) => text.push_str(&format!("[{index}]")),
        }
    }
    text
}

/// The value at `path` in `value`, if there is one.
pub(super) fn value_at<'v>(value: &'v Value, path: &[JsonStep]) -> Option<&'v Value> {
    path.iter().try_fold(value, |value, step| match step {
        JsonStep::Key(key) => value.get(key),
        JsonStep::Index(index) => value.get(index),
    })
}

/// Byte offset where `path` starts in `text`, which is valid JSON (it
/// parsed). Where a key repeats, the last one counts, as in the parse.
pub(super) fn locate_offset(text: &[u8], path: &[JsonStep]) -> Option<usize> {
    let mut at = skip_space(text, 0);
    let mut found = at;
    for step in path {
        match (text.get(at)?, step) {
            (b'{', JsonStep::Key(key)) => {
                let mut i = skip_space(text, at + 1);
                let mut hit = None;
                while text.get(i) == Some(&b'"') {
                    let end = skip_string(text, i)?;
                    let name = text.get(i..end)?;
                    let matches = match name.contains(&b'\\') {
                        false => name.get(1..name.len() - 1) == Some(key.as_bytes()),
                        true => {
                            serde_json::from_slice::<String>(name).ok().as_deref()
                                == Some(key.as_str())
                        }
                    };
                    let colon = skip_space(text, end);
                    let value = skip_space(text, colon + 1);
                    if matches {
                        hit = Some((i, value));
                    }
                    let after = skip_space(text, skip_value(text, value)?);
                    i = match text.get(after)? {
                        b',' => skip_space(text, after + 1),
                        _ => break,
                    };
                }
                let (key_at, value_at) = hit?;
                found = key_at;
                at = value_at;
            }
            (b'[', JsonStep::Index(index)) => {
                let mut i = skip_space(text, at + 1);
                for _ in 0..*index {
                    let after = skip_space(text, skip_value(text, i)?);
                    if text.get(after)? != &b',' {
                        return None;
                    }
                    i = skip_space(text, after + 1);
                }
                if text.get(i)? == &b']' {
                    return None;
                }
                found = i;
                at = i;
            }
            _ => return None,
        }
    }
    Some(found)
}

fn skip_space(text: &[u8], mut i: usize) -> usize {
    while matches!(text.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The offset just past the string starting at `i` (on its quote).
fn skip_string(text: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        match text.get(i)? {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
}

/// The offset just past the value starting at `i`; iterative, so depth
/// costs no stack.
fn skip_value(text: &[u8], start: usize) -> Option<usize> {
    let mut i = start;
    match text.get(i)? {
        b'"' => skip_string(text, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            loop {
                match text.get(i)? {
                    b'"' => {
                        i = skip_string(text, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            while !matches!(
                text.get(i),
                None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            ) {
                i += 1;
            }
            Some(i)
        }
    }
}
