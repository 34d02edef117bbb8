//! How a past turn's tool call reads in the history:
//! `[Tool: name(key="value", n=1, list=[3 items])] → result`, the result
//! cut to `toolResultMaxLength` characters.
//!
//! The cutting itself is [`satchel_tools::format::past_result`], shared
//! with the `conversation` tool, so the model reads a past result the same
//! way wherever it comes from.

use satchel_core::{ToolCall, ToolOutput};
use satchel_tools::format::{call_summary, past_result};

/// One tool call of a past turn, in one line (the result may span lines).
pub fn tool_call_line(call: &ToolCall, output: &ToolOutput, max_chars: usize) -> String {
    format!(
        "[Tool: {}] → {}",
        call_summary(&call.name, &call.input),
        past_result(output, max_chars)
    )
}

#[cfg(test)]
mod tests {
    use satchel_core::ToolResults;
    use satchel_tools::format::TRUNCATED_MARK;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_call_reads_as_one_summary_line_cut_at_the_limit() {
        let call = ToolCall {
            id: "c1".into(),
            name: "bash".into(),
            input: json!({"command": "ls", "timeout": 1, "list": [1, 2, 3]}),
        };
        let output = ToolOutput::success(ToolResults::Text("é".repeat(12)), "ran ls");
        assert_eq!(
            tool_call_line(&call, &output, 10),
            format!(
                "[Tool: bash(command=\"ls\", timeout=1, list=[3 items])] → {}{TRUNCATED_MARK}",
                "é".repeat(10)
            )
        );
        assert_eq!(
            tool_call_line(&call, &output, 12),
            "[Tool: bash(command=\"ls\", timeout=1, list=[3 items])] → éééééééééééé"
        );
    }
}
