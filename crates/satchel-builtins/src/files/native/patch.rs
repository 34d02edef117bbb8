//! Codex's patch grammar, without I/O: parsed into file operations, and
//! an update's hunks applied to a file's text.
//!
//! ```text
//! *** Begin Patch
//! *** Add File: path          then every line `+text`
//! *** Delete File: path
//! *** Update File: path
//! *** Move to: new/path       optional
//! @@ optional line to find first
//!  context
//! -removed
//! +added
//! *** End of File             optional: the hunk ends the file
//! *** End Patch
//! ```
//!
//! As Codex does, a hunk's old lines are looked for from where the last
//! hunk ended, exactly first, then ignoring trailing whitespace, then
//! ignoring whitespace at both ends, then with typographic punctuation
//! read as ASCII; a hunk with no old lines appends to the file. A patch
//! wrapped in a shell heredoc (`apply_patch <<'EOF' ... EOF`) is unwrapped.

/// One file's change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileOp {
    /// A new file with these contents.
    Add { path: String, contents: String },
    /// Remove the file.
    Delete { path: String },
    /// Change the file by hunks, and perhaps move it.
    Update {
        path: String,
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

impl FileOp {
    /// The path the operation names first.
    pub(crate) fn path(&self) -> &str {
        match self {
            FileOp::Add { path, .. } | FileOp::Delete { path } | FileOp::Update { path, .. } => {
                path
            }
        }
    }
}

/// One `@@` section of an update.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Hunk {
    /// The `@@ line` to find before the old lines, when given.
    pub(crate) anchor: Option<String>,
    /// Context and removed lines, in order: what must be found.
    pub(crate) old: Vec<String>,
    /// Context and added lines, in order: what replaces it.
    pub(crate) new: Vec<String>,
    /// The hunk must match at the end of the file.
    pub(crate) end_of_file: bool,
}

/// A patch that cannot be read or applied, as the model reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PatchError(pub(crate) String);

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE: &str = "*** Move to: ";
const END_OF_FILE: &str = "*** End of File";

/// Reads a whole patch.
pub(crate) fn parse(text: &str) -> Result<Vec<FileOp>, PatchError> {
    let lines = body_lines(text)?;
    let mut ops = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let (number, line) = lines[i];
        let header = line.trim_start();
        if let Some(path) = header.strip_prefix(ADD) {
            i += 1;
            let mut contents = String::new();
            while i < lines.len() && !is_header(lines[i].1) {
                let (number, line) = lines[i];
                let Some(text) = line.strip_prefix('+') else {
                    return Err(PatchError(format!(
                        "line {number}: every line of an added file starts with `+`; found `{line}`"
                    )));
                };
                contents.push_str(text);
                contents.push('\n');
                i += 1;
            }
            ops.push(FileOp::Add {
                path: checked_path(path, number)?,
                contents,
            });
        } else if let Some(path) = header.strip_prefix(DELETE) {
            ops.push(FileOp::Delete {
                path: checked_path(path, number)?,
            });
            i += 1;
        } else if let Some(path) = header.strip_prefix(UPDATE) {
            i += 1;
            let mut move_to = None;
            if let Some(to) = lines
                .get(i)
                .and_then(|(_, l)| l.trim_start().strip_prefix(MOVE))
            {
                move_to = Some(checked_path(to, lines[i].0)?);
                i += 1;
            }
            let (hunks, next) = parse_hunks(&lines, i)?;
            if hunks.is_empty() {
                return Err(PatchError(format!(
                    "line {number}: `{}` has no hunk; give `@@` and the lines to change",
                    header.trim_end()
                )));
            }
            i = next;
            ops.push(FileOp::Update {
                path: checked_path(path, number)?,
                move_to,
                hunks,
            });
        } else if header.trim().is_empty() {
            i += 1;
        } else {
            return Err(PatchError(format!(
                "line {number}: expected `{ADD}PATH`, `{UPDATE}PATH` or `{DELETE}PATH`; found `{line}`"
            )));
        }
    }
    if ops.is_empty() {
        return Err(PatchError("the patch changes no file".into()));
    }
    Ok(ops)
}

/// The lines between `*** Begin Patch` and `*** End Patch`, numbered as
/// in the text the model sent.
fn body_lines(text: &str) -> Result<Vec<(usize, &str)>, PatchError> {
    let mut lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.strip_suffix('\r').unwrap_or(line)))
        .collect();
    // A heredoc around the patch, as models trained on Codex's shell form write it.
    if lines
        .first()
        .is_some_and(|(_, l)| l.trim_start().starts_with("apply_patch") && l.contains("<<"))
    {
        lines.remove(0);
        if lines.last().is_some_and(|(_, l)| {
            let word = l.trim();
            word == "EOF" || word == "PATCH"
        }) {
            lines.pop();
        }
    }
    while lines.first().is_some_and(|(_, l)| l.trim().is_empty()) {
        lines.remove(0);
    }
    while lines.last().is_some_and(|(_, l)| l.trim().is_empty()) {
        lines.pop();
    }
    match (lines.first(), lines.last()) {
        (Some((_, first)), _) if first.trim() != BEGIN => Err(PatchError(format!(
            "a patch starts with the line `{BEGIN}`; found `{first}`"
        ))),
        (_, Some((_, last))) if last.trim() != END || lines.len() < 2 => Err(PatchError(format!(
            "a patch ends with the line `{END}`; found `{last}`"
        ))),
        (None, _) | (_, None) => Err(PatchError(format!(
            "the patch is empty; write `{BEGIN}`, the changes, then `{END}`"
        ))),
        _ => Ok(lines[1..lines.len() - 1].to_vec()),
    }
}

fn is_header(line: &str) -> bool {
    let line = line.trim_start();
    [ADD, DELETE, UPDATE].iter().any(|h| line.starts_with(h))
}

fn checked_path(path: &str, number: usize) -> Result<String, PatchError> {
    let path = path.trim();
    if path.is_empty() {
        return Err(PatchError(format!(
            "line {number}: the header names no file"
        )));
    }
    Ok(path.to_owned())
}

/// The hunks of an update from line `i`, and the index after them.
fn parse_hunks(lines: &[(usize, &str)], mut i: usize) -> Result<(Vec<Hunk>, usize), PatchError> {
    let mut hunks: Vec<Hunk> = Vec::new();
    let mut current: Option<Hunk> = None;
    while i < lines.len() && !is_header(lines[i].1) {
        let (number, line) = lines[i];
        i += 1;
        if let Some(anchor) = line.strip_prefix("@@") {
            hunks.extend(current.take());
            let anchor = anchor.trim();
            current = Some(Hunk {
                anchor: (!anchor.is_empty()).then(|| anchor.to_owned()),
                ..Hunk::default()
            });
            continue;
        }
        if line.trim() == END_OF_FILE {
            let Some(hunk) = current.as_mut() else {
                return Err(PatchError(format!(
                    "line {number}: `{END_OF_FILE}` outside a hunk"
                )));
            };
            hunk.end_of_file = true;
            continue;
        }
        // The first hunk of a file may leave out its `@@` line.
        let hunk = current.get_or_insert_with(Hunk::default);
        match line.chars().next() {
            Some(' ') => {
                hunk.old.push(line[1..].to_owned());
                hunk.new.push(line[1..].to_owned());
            }
            Some('-') => hunk.old.push(line[1..].to_owned()),
            Some('+') => hunk.new.push(line[1..].to_owned()),
            // An empty line in a hunk is an empty context line.
            None => {
                hunk.old.push(String::new());
                hunk.new.push(String::new());
            }
            Some(_) => {
                return Err(PatchError(format!(
                    "line {number}: a hunk's lines start with ` ` (context), `-` (removed) or `+` (added); \
                     found `{line}`"
                )));
            }
        }
    }
    hunks.extend(current);
    Ok((hunks, i))
}

/// `text` with `hunks` applied, or why a hunk's lines were not found.
pub(crate) fn apply(text: &str, hunks: &[Hunk]) -> Result<String, PatchError> {
    let final_newline = text.ends_with('\n');
    let mut lines: Vec<&str> = text.split('\n').collect();
    if final_newline || text.is_empty() {
        lines.pop();
    }
    let mut cursor = 0;
    let mut changes: Vec<(usize, usize, &[String])> = Vec::new();
    for (n, hunk) in hunks.iter().enumerate() {
        let which = || {
            if hunks.len() > 1 {
                format!("hunk {} of {}", n + 1, hunks.len())
            } else {
                "the hunk".to_owned()
            }
        };
        if let Some(anchor) = &hunk.anchor {
            let found = seek(&lines, std::slice::from_ref(anchor), cursor, false)
                .ok_or_else(|| PatchError(format!("{}: no line `{anchor}` found", which())))?;
            cursor = found + 1;
        }
        if hunk.old.is_empty() {
            changes.push((lines.len(), 0, &hunk.new));
            continue;
        }
        let mut old: &[String] = &hunk.old;
        let mut new: &[String] = &hunk.new;
        let mut found = seek(&lines, old, cursor, hunk.end_of_file);
        // A trailing empty line in a hunk often stands for the file's end.
        if found.is_none() && old.last().is_some_and(String::is_empty) {
            old = &old[..old.len() - 1];
            if new.last().is_some_and(String::is_empty) {
                new = &new[..new.len() - 1];
            }
            found = seek(&lines, old, cursor, hunk.end_of_file);
        }
        let Some(at) = found else {
            return Err(PatchError(format!(
                "{}: these lines were not found{}:\n{}",
                which(),
                if cursor > 0 {
                    format!(" after line {cursor}")
                } else {
                    String::new()
                },
                hunk.old.join("\n")
            )));
        };
        changes.push((at, old.len(), new));
        cursor = at + old.len();
    }
    let mut out: Vec<&str> = Vec::with_capacity(lines.len());
    let mut next = 0;
    changes.sort_by_key(|(at, ..)| *at);
    for (at, len, new) in changes {
        if at < next {
            return Err(PatchError("two hunks change the same lines".into()));
        }
        out.extend_from_slice(&lines[next..at]);
        out.extend(new.iter().map(String::as_str));
        next = at + len;
    }
    out.extend_from_slice(&lines[next.min(lines.len())..]);
    let mut result = out.join("\n");
    if (final_newline || text.is_empty()) && !result.is_empty() {
        result.push('\n');
    }
    Ok(result)
}

/// Where `pattern` first occurs in `lines` at or after `start`, each pass
/// more lenient than the last; with `eof`, the end of the file is tried
/// first.
fn seek(lines: &[&str], pattern: &[String], start: usize, eof: bool) -> Option<usize> {
    if pattern.len() > lines.len() {
        return None;
    }
    let last = lines.len() - pattern.len();
    let passes: [fn(&str, &str) -> bool; 4] = [
        |a, b| a == b,
        |a, b| a.trim_end() == b.trim_end(),
        |a, b| a.trim() == b.trim(),
        |a, b| ascii_punctuation(a.trim()) == ascii_punctuation(b.trim()),
    ];
    for same in passes {
        let matches = |at: usize| {
            pattern
                .iter()
                .zip(&lines[at..])
                .all(|(p, l)| same(l, p.as_str()))
        };
        if eof && last >= start && matches(last) {
            return Some(last);
        }
        if let Some(at) = (start..=last).find(|&at| matches(at)) {
            return Some(at);
        }
    }
    None
}

/// Typographic dashes, quotes and spaces as their ASCII forms.
fn ascii_punctuation(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
            '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{3000}' => ' ',
            other => other,
        })
        .collect()
}

#[cfg(test)]
#[path = "patch_tests.rs"]
mod tests;
