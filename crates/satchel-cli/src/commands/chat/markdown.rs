//! Streamed answers rendered as markdown in a terminal, a line at a time.
//!
//! A streamed answer arrives in pieces, and a markdown parser such as
//! pulldown-cmark wants whole blocks; so each complete line is styled as
//! soon as its newline arrives: headings, fenced code, quotes, list
//! bullets, rules, and inline code, bold and emphasis. Without colour the
//! text passes through unchanged (markdown reads well as it is).

/// The renderer's state between pieces.
#[derive(Debug, Default)]
pub(crate) struct MarkdownStream {
    line: String,
    in_fence: bool,
    color: bool,
}

impl MarkdownStream {
    /// A renderer; `color` enables ANSI styling.
    pub(crate) fn new(color: bool) -> MarkdownStream {
        MarkdownStream {
            color,
            ..MarkdownStream::default()
        }
    }

    /// Adds a piece; returns the styled text of the lines it completed.
    pub(crate) fn push(&mut self, piece: &str) -> String {
        let mut out = String::new();
        for ch in piece.chars() {
            if ch == '\n' {
                let line = std::mem::take(&mut self.line);
                out.push_str(&self.render_line(&line));
                out.push('\n');
            } else {
                self.line.push(ch);
            }
        }
        out
    }

    /// The unfinished last line, styled; resets the state.
    pub(crate) fn finish(&mut self) -> String {
        let line = std::mem::take(&mut self.line);
        let out = if line.is_empty() {
            String::new()
        } else {
            self.render_line(&line)
        };
        self.in_fence = false;
        out
    }

    fn render_line(&mut self, line: &str) -> String {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            self.in_fence = !self.in_fence;
            return self.paint("2", line);
        }
        if !self.color {
            return line.to_owned();
        }
        if self.in_fence {
            return self.paint("36", line);
        }
        let hashes = trimmed.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
            return self.paint("1;4", trimmed[hashes..].trim());
        }
        if let Some(quote) = trimmed.strip_prefix("> ") {
            return format!(
                "{} {}",
                self.paint("2", "│"),
                self.paint("3", &inline(quote))
            );
        }
        if matches!(trimmed, "---" | "***" | "___") {
            return self.paint("2", &"─".repeat(40));
        }
        let indent = &line[..line.len() - trimmed.len()];
        for bullet in ["- ", "* ", "+ "] {
            if let Some(item) = trimmed.strip_prefix(bullet) {
                return format!("{indent}• {}", inline(item));
            }
        }
        inline(line)
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }
}

/// Inline code, bold and emphasis as ANSI styles.
fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while !rest.is_empty() {
        let (marker, style) = if rest.starts_with('`') {
            ("`", "36")
        } else if rest.starts_with("**") {
            ("**", "1")
        } else if rest.starts_with('*') && !rest.starts_with("* ") {
            ("*", "3")
        } else {
            let next = rest
                .char_indices()
                .skip(1)
                .find(|(_, c)| *c == '`' || *c == '*')
                .map_or(rest.len(), |(i, _)| i);
            out.push_str(&rest[..next]);
            rest = &rest[next..];
            continue;
        };
        let body = &rest[marker.len()..];
        match body.find(marker) {
            Some(end) if end > 0 => {
                out.push_str(&format!("\x1b[{style}m{}\x1b[0m", &body[..end]));
                rest = &body[end + marker.len()..];
            }
            _ => {
                out.push_str(marker);
                rest = body;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_styled_when_complete() {
        let mut md = MarkdownStream::new(true);
        assert_eq!(md.push("# Ti"), "");
        assert_eq!(md.push("tle\n- a `b`"), "\x1b[1;4mTitle\x1b[0m\n");
        assert_eq!(md.finish(), "• a \x1b[36mb\x1b[0m");
    }

    #[test]
    fn fences_switch_off_inline_styles_and_plain_text_passes_through() {
        let mut md = MarkdownStream::new(true);
        let out = md.push("```\n**x**\n```\n");
        assert!(out.contains("\x1b[36m**x**\x1b[0m"), "{out:?}");
        let mut plain = MarkdownStream::new(false);
        assert_eq!(plain.push("# T\n**b**\n"), "# T\n**b**\n");
    }
}
