//! The search behind `grep`: ripgrep's crates doing what `rg` does with
//! the same defaults. `ignore` walks the tree in parallel (`.gitignore`,
//! `.ignore`, hidden files skipped, `--type` and `--glob` filters),
//! `grep-regex` compiles the pattern (Rust regex syntax, as `rg`),
//! `grep-searcher` searches each file (binary files skipped at the first
//! NUL, as `rg` skips them when walking). Each file's findings are kept
//! apart and sorted by path afterwards, so output is stable.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};

/// What to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutputMode {
    /// Paths of files with a match.
    FilesWithMatches,
    /// Matching lines (and context).
    Content,
    /// Matching lines per file.
    Count,
}

/// One search, as asked.
#[derive(Debug, Clone)]
pub(crate) struct Query {
    pub(crate) pattern: String,
    pub(crate) root: PathBuf,
    pub(crate) glob: Option<String>,
    pub(crate) file_type: Option<String>,
    pub(crate) mode: OutputMode,
    pub(crate) case_insensitive: bool,
    pub(crate) line_numbers: bool,
    pub(crate) before: usize,
    pub(crate) after: usize,
    pub(crate) multiline: bool,
    /// Output lines collected at most (the rest only counted).
    pub(crate) max_lines: usize,
    /// Paths are shown relative to this directory when beneath it.
    pub(crate) relative_to: PathBuf,
}

/// What one file gave.
#[derive(Debug)]
pub(crate) struct FileHits {
    /// The file, relative to [`Query::relative_to`] when beneath it.
    pub(crate) path: PathBuf,
    /// Matching lines.
    pub(crate) count: u64,
    /// Output lines for `content`, each ending in `\n`, in one string:
    /// a search may find hundreds of thousands, and one allocation each
    /// (then a copy of each into the answer) was most of its cost.
    pub(crate) text: String,
    /// How many lines `text` holds.
    pub(crate) lines: usize,
}

/// What a search found.
#[derive(Debug, Default)]
pub(crate) struct Found {
    pub(crate) files: Vec<FileHits>,
    /// Output lines left out because `max_lines` were collected.
    pub(crate) dropped_lines: usize,
    pub(crate) cancelled: bool,
}

/// Why a search could not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SearchError {
    /// The pattern is not a regex.
    #[error("`{pattern}` is not a valid regex: {error}")]
    Pattern { pattern: String, error: String },
    /// The glob filter is not a glob.
    #[error("`glob` {glob} is not a valid glob: {error}")]
    Glob { glob: String, error: String },
    /// An unknown file type.
    #[error("{0}")]
    Type(String),
}

/// Characters of one output line shown; long lines (minified code) are cut.
const MAX_LINE_CHARS: usize = 500;

fn matcher(query: &Query) -> Result<RegexMatcher, SearchError> {
    let mut builder = RegexMatcherBuilder::new();
    builder.case_insensitive(query.case_insensitive);
    if query.multiline {
        builder.multi_line(true).dot_matches_new_line(true);
    } else {
        builder.line_terminator(Some(b'\n'));
    }
    builder
        .build(&query.pattern)
        .map_err(|error| SearchError::Pattern {
            pattern: query.pattern.clone(),
            error: error.to_string(),
        })
}

fn walker(query: &Query) -> Result<ignore::WalkParallel, SearchError> {
    let mut builder = ignore::WalkBuilder::new(&query.root);
    if let Some(glob) = &query.glob {
        let mut overrides = ignore::overrides::OverrideBuilder::new(&query.root);
        for part in split_globs(glob) {
            overrides.add(&part).map_err(|error| SearchError::Glob {
                glob: glob.clone(),
                error: error.to_string(),
            })?;
        }
        let built = overrides.build().map_err(|error| SearchError::Glob {
            glob: glob.clone(),
            error: error.to_string(),
        })?;
        builder.overrides(built);
    }
    if let Some(name) = &query.file_type {
        let mut types = ignore::types::TypesBuilder::new();
        types.add_defaults();
        if !types.definitions().iter().any(|d| d.name() == name) {
            return Err(SearchError::Type(format!(
                "`{name}` is not a file type ripgrep knows (e.g. rust, py, js, ts, go, java, c, cpp, md, json, yaml)"
            )));
        }
        types.select(name);
        let built = types
            .build()
            .map_err(|error| SearchError::Type(error.to_string()))?;
        builder.types(built);
    }
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(12));
    builder.threads(threads);
    Ok(builder.build_parallel())
}

/// `*.{ts,tsx}` stays one glob; `*.rs,*.toml` or `*.rs *.toml` are two.
fn split_globs(glob: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in glob.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' | ' ' if depth == 0 => {
                if !current.is_empty() {
                    parts.push(std::mem::take(&mut current));
                }
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

/// Runs `query`; stops early when `cancel` is set.
pub(crate) fn search(query: &Query, cancel: &AtomicBool) -> Result<Found, SearchError> {
    let matcher = matcher(query)?;
    let walker = walker(query)?;
    let results: Mutex<Vec<FileHits>> = Mutex::new(Vec::new());
    let collected = AtomicUsize::new(0);
    let dropped = AtomicUsize::new(0);
    walker.run(|| {
        let matcher = matcher.clone();
        let mut searcher = searcher(query);
        let results = &results;
        let collected = &collected;
        let dropped = &dropped;
        Box::new(move |entry| {
            if cancel.load(Ordering::Relaxed) {
                return ignore::WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return ignore::WalkState::Continue;
            };
            if !entry.file_type().is_some_and(|kind| kind.is_file()) {
                return ignore::WalkState::Continue;
            }
            let label = entry
                .path()
                .strip_prefix(&query.relative_to)
                .unwrap_or(entry.path());
            let mut sink = Collect {
                mode: query.mode,
                numbers: query.line_numbers,
                label: label.to_string_lossy(),
                count: 0,
                text: String::new(),
                lines: 0,
                last_line: None,
                collected,
                dropped,
                max_lines: query.max_lines,
            };
            if searcher
                .search_path(&matcher, entry.path(), &mut sink)
                .is_ok()
                && sink.count > 0
            {
                let hits = FileHits {
                    path: label.to_path_buf(),
                    count: sink.count,
                    text: sink.text,
                    lines: sink.lines,
                };
                results
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .push(hits);
            }
            ignore::WalkState::Continue
        })
    });
    let mut files = results
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Found {
        files,
        dropped_lines: dropped.into_inner(),
        cancelled: cancel.load(Ordering::Relaxed),
    })
}

fn searcher(query: &Query) -> Searcher {
    let mut builder = SearcherBuilder::new();
    builder
        .line_number(true)
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .multi_line(query.multiline);
    if query.mode == OutputMode::Content {
        builder
            .before_context(query.before)
            .after_context(query.after);
    }
    builder.build()
}

/// Collects one file's findings.
struct Collect<'a> {
    mode: OutputMode,
    numbers: bool,
    label: std::borrow::Cow<'a, str>,
    count: u64,
    text: String,
    lines: usize,
    last_line: Option<u64>,
    collected: &'a AtomicUsize,
    dropped: &'a AtomicUsize,
    max_lines: usize,
}

impl Collect<'_> {
    fn push(&mut self, number: Option<u64>, separator: char, bytes: &[u8]) {
        if self.collected.fetch_add(1, Ordering::Relaxed) >= self.max_lines {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let line = String::from_utf8_lossy(bytes);
        let line = line.trim_end_matches(['\n', '\r']);
        self.text.push_str(&self.label);
        self.text.push(separator);
        if let (true, Some(n)) = (self.numbers, number) {
            // Writing to a String cannot fail.
            let _ = write!(self.text, "{n}{separator}");
        }
        match line.char_indices().nth(MAX_LINE_CHARS) {
            Some((at, _)) => {
                self.text.push_str(&line[..at]);
                self.text.push_str("… [line cut]");
            }
            None => self.text.push_str(line),
        }
        self.text.push('\n');
        self.lines += 1;
    }
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(
        &mut self,
        _searcher: &Searcher,
        found: &SinkMatch<'_>,
    ) -> Result<bool, Self::Error> {
        match self.mode {
            OutputMode::FilesWithMatches => {
                self.count += 1;
                // One match is enough to list the file.
                return Ok(false);
            }
            OutputMode::Count => {
                self.count += found.lines().count() as u64;
                return Ok(true);
            }
            OutputMode::Content => {}
        }
        let mut number = found.line_number();
        for line in found.lines() {
            self.count += 1;
            self.push(number, ':', line);
            self.last_line = number;
            number = number.map(|n| n + 1);
        }
        Ok(true)
    }

    fn context(
        &mut self,
        _searcher: &Searcher,
        context: &SinkContext<'_>,
    ) -> Result<bool, Self::Error> {
        self.push(context.line_number(), '-', context.bytes());
        self.last_line = context.line_number();
        Ok(true)
    }

    fn context_break(&mut self, _searcher: &Searcher) -> Result<bool, Self::Error> {
        if self.collected.fetch_add(1, Ordering::Relaxed) < self.max_lines {
            self.text.push_str("--\n");
            self.lines += 1;
        } else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_split_on_commas_outside_braces() {
        assert_eq!(split_globs("*.{ts,tsx}"), ["*.{ts,tsx}"]);
        assert_eq!(split_globs("*.rs,*.toml"), ["*.rs", "*.toml"]);
        assert_eq!(split_globs("*.rs *.toml"), ["*.rs", "*.toml"]);
    }
}
