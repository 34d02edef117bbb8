//! The file tools: `read`, `write`, `edit`, `glob` and `grep`, one module
//! each (and `edit`'s model-native forms in [`native`]), over one resolver of paths against the sandbox's writable roots
//! (`paths`), one atomic writer (`atomic`) and the stale-file rule
//! shared by `read`, `write` and `edit` (`stamps`).
//!
//! They obey the mode as commands do: `readonly` refuses `write` and
//! `edit`; `workspace` writes only beneath the writable paths and never in
//! `.agents`, `.git/hooks` or `.git/config`; reads go anywhere.

pub(crate) mod atomic;
pub mod edit;
pub mod glob;
pub mod grep;
pub mod native;
pub(crate) mod paths;
pub(crate) mod pdf;
pub mod read;
pub(crate) mod stamps;
pub mod write;

use satchel_core::ErrorCode;
use satchel_tools::ToolError;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use stamps::FileStamps;

/// The input of `tool`, or `INVALID_PARAMS` saying what was wrong.
pub(crate) fn parse_input<T: DeserializeOwned>(tool: &str, input: Value) -> Result<T, ToolError> {
    serde_json::from_value(input).map_err(|error| {
        ToolError::new(
            ErrorCode::InvalidParams,
            format!("invalid `{tool}` input: {error}"),
        )
    })
}

/// A file operation that failed, as the model reads it.
pub(crate) fn io_failure(shown: &str, doing: &str, error: &std::io::Error) -> ToolError {
    let code = match error.kind() {
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem => {
            ErrorCode::PermissionDenied
        }
        _ => ErrorCode::InvalidParams,
    };
    ToolError::new(code, format!("cannot {doing} `{shown}`: {error}"))
}
