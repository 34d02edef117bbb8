//! What reading one config file gives: the file as read ([`Layer`]: its
//! path, object and text, and where a key stands in it) and the errors
//! that make a file unusable ([`ConfigError`]). Below both `config`, which
//! reads and merges layers, and `policy`, which checks each layer's
//! `permissions`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::locate::{JsonStep, locate_offset};

/// Configuration that cannot be used. Callers stop at start-up; a reload
/// keeps the file's last good version. Not retryable until the file is
/// fixed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// From [`read_config_file`](super::read_config_file): the path exists
    /// but is not a regular file of at most
    /// [`MAX_CONFIG_BYTES`](super::MAX_CONFIG_BYTES) (a FIFO, a device, a
    /// directory, a dangling symlink, too large), or cannot be read.
    Unusable {
        /// The file.
        path: PathBuf,
        /// Why, in words.
        reason: String,
    },
    /// From [`Layer::parse`]: the file is not JSON, or not a JSON object.
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// From [`Layer::parse`] and [`crate::policy::Policy::from_settings`]:
    /// the file's `permissions` section has unknown keys, values of the
    /// wrong type or rules that do not parse.
    Permissions {
        /// The file.
        path: PathBuf,
        /// Every problem found: where (line, column; `None` when the
        /// file's text is not known) and what.
        problems: Vec<(Option<(usize, usize)>, String)>,
    },
}

impl ConfigError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            ConfigError::Unusable { path, .. }
            | ConfigError::Syntax { path, .. }
            | ConfigError::Permissions { path, .. } => path,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Unusable { path, reason } => {
                write!(f, "{}: refused: {reason}", path.display())
            }
            ConfigError::Syntax {
                path,
                line,
                column,
                message,
            } => write!(f, "{}:{line}:{column}: {message}", path.display()),
            ConfigError::Permissions { path, problems } => {
                for (index, (at, message)) in problems.iter().enumerate() {
                    if index > 0 {
                        f.write_str("\n")?;
                    }
                    write!(f, "{}: {message}", located(path, *at))?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for ConfigError {}

/// `file:line:column`, or `file` when the position is unknown.
fn located(path: &Path, at: Option<(usize, usize)>) -> String {
    match at {
        Some((line, column)) => format!("{}:{line}:{column}", path.display()),
        None => path.display().to_string(),
    }
}

/// One config file as read: its path, its object and its text (for line
/// numbers; `None` when built from an object).
#[derive(Debug, Clone, PartialEq)]
pub struct Layer {
    /// The file.
    pub path: PathBuf,
    /// Its top-level object.
    pub object: Map<String, Value>,
    /// Its text, when it was read from a file.
    pub text: Option<Arc<str>>,
}

impl Layer {
    /// Line and column where `path` starts in the file: a key's name, or an
    /// array item. `None` when the text is unknown or the path absent.
    pub fn locate(&self, path: &[JsonStep]) -> Option<(usize, usize)> {
        let text = self.text.as_deref()?;
        let offset = locate_offset(text.as_bytes(), path)?;
        let before = text.as_bytes().get(..offset)?;
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |at| at + 1);
        Some((line, offset - line_start + 1))
    }

    /// `file:line:column` of `path`, or `file` when it cannot be placed.
    pub fn describe(&self, path: &[JsonStep]) -> String {
        located(&self.path, self.locate(path))
    }
}
