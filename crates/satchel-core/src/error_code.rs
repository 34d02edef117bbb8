//! The stable error codes a failed tool call carries.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a tool call failed, in words a model (and a script) can branch on.
///
/// The serialised names (`INVALID_PARAMS`...) are a public contract: they are
/// stored, sent to models and returned by external tools. Never rename one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// The input did not match the tool's `inputSchema`, or made no sense to the tool.
    InvalidParams,
    /// No tool of that name is registered.
    ToolNotFound,
    /// The tool ran past its time limit and was stopped.
    ToolTimeout,
    /// The tool failed unexpectedly: a panic, a non-zero exit of an external tool.
    ToolCrashed,
    /// The tool answered with something that is not the output it promised.
    InvalidOutput,
    /// Policy refused the call.
    PermissionDenied,
    /// Too many calls; retry later.
    RateLimited,
    /// The call was cancelled before it finished.
    Cancelled,
    /// The call could not be put on record before it ran (the database is
    /// locked, full or read-only), so it was not run.
    NotRecorded,
    /// The tool exists but cannot be used as things are: it is not
    /// configured (`search` without a backend, `memory` without a
    /// database), or its spec is broken (an external tool whose `--schema`
    /// failed). The message says what to fix; retrying will not help.
    ToolUnavailable,
}

impl ErrorCode {
    /// Every code, in declaration order.
    pub const ALL: [ErrorCode; 10] = [
        ErrorCode::InvalidParams,
        ErrorCode::ToolNotFound,
        ErrorCode::ToolTimeout,
        ErrorCode::ToolCrashed,
        ErrorCode::InvalidOutput,
        ErrorCode::PermissionDenied,
        ErrorCode::RateLimited,
        ErrorCode::Cancelled,
        ErrorCode::NotRecorded,
        ErrorCode::ToolUnavailable,
    ];

    /// The wire name, e.g. `"TOOL_TIMEOUT"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidParams => "INVALID_PARAMS",
            ErrorCode::ToolNotFound => "TOOL_NOT_FOUND",
            ErrorCode::ToolTimeout => "TOOL_TIMEOUT",
            ErrorCode::ToolCrashed => "TOOL_CRASHED",
            ErrorCode::InvalidOutput => "INVALID_OUTPUT",
            ErrorCode::PermissionDenied => "PERMISSION_DENIED",
            ErrorCode::RateLimited => "RATE_LIMITED",
            ErrorCode::Cancelled => "CANCELLED",
            ErrorCode::NotRecorded => "NOT_RECORDED",
            ErrorCode::ToolUnavailable => "TOOL_UNAVAILABLE",
        }
    }

    /// Parses a wire name; `None` for anything that is not one of ours.
    pub fn parse(name: &str) -> Option<ErrorCode> {
        ErrorCode::ALL
            .into_iter()
            .find(|code| code.as_str() == name)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_round_trip_through_serde_and_parse() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            assert_eq!(serde_json::from_str::<ErrorCode>(&json).unwrap(), code);
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
        }
        assert_eq!(ErrorCode::parse("invalid_params"), None);
        // The wire names are a contract: a rename breaks stored records.
        let names: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(
            names,
            [
                "INVALID_PARAMS",
                "TOOL_NOT_FOUND",
                "TOOL_TIMEOUT",
                "TOOL_CRASHED",
                "INVALID_OUTPUT",
                "PERMISSION_DENIED",
                "RATE_LIMITED",
                "CANCELLED",
                "NOT_RECORDED",
                "TOOL_UNAVAILABLE",
            ]
        );
    }
}
