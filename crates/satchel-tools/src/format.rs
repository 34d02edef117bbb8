//! Formatting tool calls and results for people (a terminal or markdown;
//! the model never sees these), and the one-line form of a past call the
//! model does see: [`call_summary`] and [`past_result`], cut with
//! [`cut_chars`] the same way in the history and the `conversation` tool.

use satchel_core::ToolOutput;
use serde_json::Value;

/// Where formatted text will be shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A terminal; `color` allows ANSI colours.
    Terminal {
        /// Use ANSI colours.
        color: bool,
    },
    /// Markdown, for logs and the web view.
    Markdown,
}

/// Characters of a string argument shown in a call summary.
const SUMMARY_STRING_CHARS: usize = 60;
/// Characters of results shown by the generic result formatter.
const RESULT_PREVIEW_CHARS: usize = 2000;

/// `name(key="value", n=1, list=[3 items])`: a call in one short line.
pub fn call_summary(name: &str, input: &Value) -> String {
    let args = match input {
        Value::Object(map) => map
            .iter()
            .map(|(key, value)| format!("{key}={}", summarise_value(value)))
            .collect::<Vec<_>>()
            .join(", "),
        Value::Null => String::new(),
        other => summarise_value(other),
    };
    format!("{name}({args})")
}

fn summarise_value(value: &Value) -> String {
    match value {
        Value::String(text) => format!("{:?}", truncate_chars(text, SUMMARY_STRING_CHARS)),
        Value::Array(items) => match items.len() {
            1 => "[1 item]".to_owned(),
            n => format!("[{n} items]"),
        },
        Value::Object(map) => match map.len() {
            1 => "{1 key}".to_owned(),
            n => format!("{{{n} keys}}"),
        },
        Value::Null | Value::Bool(_) | Value::Number(_) => value.to_string(),
    }
}

/// Appended to a result cut to `toolResultMaxLength` for the model.
pub const TRUNCATED_MARK: &str = "... [truncated]";

/// `text` cut to `max_chars` characters with [`TRUNCATED_MARK`] appended
/// when it was longer.
pub fn cut_chars(text: &str, max_chars: usize) -> String {
    satchel_core::text::cut_with(text, max_chars, TRUNCATED_MARK)
}

/// A past call's result as the model reads it: the results' text, then
/// the tool's note on its own line, cut to `max_chars` characters.
pub fn past_result(output: &ToolOutput, max_chars: usize) -> String {
    let mut result = output.results.to_text();
    if let Some(note) = &output.response {
        result.push('\n');
        result.push_str(note);
    }
    cut_chars(&result, max_chars)
}

/// At most `max` characters of `text`, with `…` when cut.
/// `1 memory`, `3 memories`: a count with the right form of its noun.
pub fn plural(count: usize, one: &str, many: &str) -> String {
    if count == 1 {
        format!("1 {one}")
    } else {
        format!("{count} {many}")
    }
}

/// Cuts `text` to at most `max` characters, marking a cut with `…`.
pub fn truncate_chars(text: &str, max: usize) -> String {
    satchel_core::text::cut_with(text, max, "…")
}

/// Wraps `text` in ANSI SGR `code` when the style allows colour.
pub fn paint(style: Style, code: &str, text: &str) -> String {
    match style {
        Style::Terminal { color: true } => format!("\x1b[{code}m{text}\x1b[0m"),
        Style::Terminal { color: false } | Style::Markdown => text.to_owned(),
    }
}

/// A fenced markdown code block whose fence is longer than any run of
/// backticks inside `text`, so output can never break out of it.
pub fn markdown_fence(text: &str, lang: &str) -> String {
    let longest_run = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat((longest_run + 1).max(3));
    let newline = if text.ends_with('\n') || text.is_empty() {
        ""
    } else {
        "\n"
    };
    format!("{fence}{lang}\n{text}{newline}{fence}")
}

/// The default one-line description of a call.
pub fn generic_use(name: &str, input: &Value, style: Style) -> String {
    let summary = call_summary(name, input);
    match style {
        Style::Terminal { .. } => paint(style, "1", &summary),
        Style::Markdown => format!("`{summary}`"),
    }
}

/// The default rendering of an output: status mark and user message, then
/// a preview of the results.
pub fn generic_result(output: &ToolOutput, style: Style) -> String {
    // An error's message says it all; its JSON would only repeat it.
    if output.is_error {
        return match style {
            Style::Terminal { .. } => {
                format!("{} {}", paint(style, "31", "✗"), output.user_message)
            }
            Style::Markdown => format!("✗ {}", output.user_message),
        };
    }
    let preview = truncate_chars(&output.results.to_text(), RESULT_PREVIEW_CHARS);
    let (mark, colour) = if output.is_error {
        ("✗", "31")
    } else {
        ("✓", "32")
    };
    match style {
        Style::Terminal { .. } => {
            format!(
                "{} {}\n{}",
                paint(style, colour, mark),
                output.user_message,
                paint(style, "2", &preview)
            )
        }
        Style::Markdown => format!(
            "{mark} {}\n\n{}",
            output.user_message,
            markdown_fence(&preview, "")
        ),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn call_summary_is_short_and_typed() {
        let input =
            json!({"command": "ls -la", "n": 1, "list": [1, 2, 3], "opts": {"a": 1}, "flag": true});
        assert_eq!(
            call_summary("bash", &input),
            r#"bash(command="ls -la", n=1, list=[3 items], opts={1 key}, flag=true)"#
        );
        let long = "x".repeat(100);
        assert_eq!(
            call_summary("t", &json!({"s": long})),
            format!("t(s=\"{}…\")", "x".repeat(60))
        );
    }

    #[test]
    fn past_results_are_cut_by_characters_with_the_note() {
        let output = ToolOutput::success(satchel_core::ToolResults::Text("é".repeat(12)), "ran")
            .with_response("kept in full elsewhere");
        assert_eq!(
            past_result(&output, 10),
            format!("{}{TRUNCATED_MARK}", "é".repeat(10))
        );
        assert_eq!(
            past_result(&output, 100),
            format!("{}\nkept in full elsewhere", "é".repeat(12))
        );
        assert_eq!(cut_chars("short", 5), "short");
    }

    #[test]
    fn markdown_fence_outgrows_backticks_inside() {
        assert_eq!(markdown_fence("plain", "text"), "```text\nplain\n```");
        assert_eq!(markdown_fence("a ```` b\n", ""), "`````\na ```` b\n`````");
    }

    #[test]
    fn paint_only_colours_colour_terminals() {
        assert_eq!(
            paint(Style::Terminal { color: true }, "31", "x"),
            "\x1b[31mx\x1b[0m"
        );
        assert_eq!(paint(Style::Terminal { color: false }, "31", "x"), "x");
        assert_eq!(paint(Style::Markdown, "31", "x"), "x");
    }
}
