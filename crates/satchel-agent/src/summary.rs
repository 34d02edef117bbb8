//! How a past turn's tool call reads in the history:
//! `[Tool: name(key="value", n=1, list=[3 items])] → result`, the result
//! cut to `toolResultMaxLength` characters.

use satchel_core::{ToolCall, ToolOutput};
use satchel_tools::format::call_summary;

/// Appended to a result cut for a past turn's summary.
pub const TRUNCATED_MARK: &str = "... [truncated]";

/// One tool call of a past turn, in one line (the result may span lines).
pub fn tool_call_line(call: &ToolCall, output: &ToolOutput, max_chars: usize) -> String {
    let mut result = output.results.to_text();
    if let Some(note) = &output.response {
        result.push('\n');
        result.push_str(note);
    }
    format!(
        "[Tool: {}] → {}",
        call_summary(&call.name, &call.input),
        cut_chars(&result, max_chars)
    )
}

/// `text` cut to `max_chars` characters with [`TRUNCATED_MARK`] appended
/// when it was longer.
pub fn cut_chars(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}{TRUNCATED_MARK}", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use satchel_core::ToolResults;
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
