//! Markdown (what models write) as Telegram's HTML, and long texts cut
//! into messages.
//!
//! Telegram's HTML knows a handful of tags (`b`, `i`, `s`, `u`, `code`,
//! `pre`, `a`, `blockquote`) and refuses a message whose tags are
//! unbalanced or whose `<` and `&` are not escaped. Everything here is
//! built from pulldown-cmark's events, so every tag opened is closed and
//! every piece of text is escaped: a model's `<script>`, a stray `&` or an
//! unbalanced `*` arrives as text. Raw HTML in the markdown is text too.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// Telegram's limit on a message's text, in characters.
pub const MESSAGE_LIMIT: usize = 4096;

/// Escapes text for Telegram's HTML (`<`, `>`, `&`, and `"` for
/// attributes).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

fn options() -> Options {
    Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS
}

/// Links Telegram opens; anything else (`javascript:`...) is shown as text.
fn safe_link(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    ["http://", "https://", "tg://", "mailto:"]
        .iter()
        .any(|scheme| lower.starts_with(scheme))
}

/// One markdown text as Telegram HTML.
pub fn to_html(markdown: &str) -> String {
    let mut out = String::new();
    // Per open list: the next number, or None for bullets.
    let mut lists: Vec<Option<u64>> = Vec::new();
    // Open links: whether each became an `<a>`.
    let mut links: Vec<bool> = Vec::new();
    let mut table_cell = 0usize;
    for event in Parser::new_ext(markdown, options()) {
        match event {
            Event::Start(tag) => match tag {
                Tag::Paragraph => {}
                Tag::Heading { .. } => out.push_str("<b>"),
                Tag::BlockQuote(_) => out.push_str("<blockquote>"),
                Tag::CodeBlock(kind) => match kind {
                    CodeBlockKind::Fenced(lang) if !lang.trim().is_empty() => {
                        let lang: String = lang
                            .chars()
                            .take_while(|c| {
                                c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '_')
                            })
                            .collect();
                        out.push_str(&format!("<pre><code class=\"language-{lang}\">"));
                    }
                    _ => out.push_str("<pre><code>"),
                },
                Tag::List(start) => {
                    if !lists.is_empty() && !out.ends_with('\n') {
                        out.push('\n');
                    }
                    lists.push(start);
                }
                Tag::Item => {
                    let depth = lists.len().saturating_sub(1);
                    out.push_str(&"  ".repeat(depth));
                    match lists.last_mut() {
                        Some(Some(number)) => {
                            out.push_str(&format!("{number}. "));
                            *number += 1;
                        }
                        _ => out.push_str("• "),
                    }
                }
                Tag::Emphasis => out.push_str("<i>"),
                Tag::Strong => out.push_str("<b>"),
                Tag::Strikethrough => out.push_str("<s>"),
                Tag::Link { dest_url, .. } => {
                    let safe = safe_link(&dest_url);
                    if safe {
                        out.push_str(&format!("<a href=\"{}\">", escape(&dest_url)));
                    }
                    links.push(safe);
                }
                Tag::Image { dest_url, .. } => {
                    out.push_str("[image: ");
                    links.push(false);
                    let _ = dest_url;
                }
                Tag::Table(_) | Tag::TableHead | Tag::TableRow => table_cell = 0,
                Tag::TableCell => {
                    if table_cell > 0 {
                        out.push_str(" | ");
                    }
                    table_cell += 1;
                }
                _ => {}
            },
            Event::End(end) => match end {
                TagEnd::Paragraph => block_end(&mut out, !lists.is_empty()),
                TagEnd::Heading(level) => {
                    out.push_str("</b>");
                    if level == HeadingLevel::H1 {
                        out.push('\n');
                    }
                    block_end(&mut out, false);
                }
                TagEnd::BlockQuote(_) => {
                    trim_newlines(&mut out);
                    out.push_str("</blockquote>");
                    block_end(&mut out, false);
                }
                TagEnd::CodeBlock => {
                    trim_newlines(&mut out);
                    out.push_str("</code></pre>");
                    block_end(&mut out, !lists.is_empty());
                }
                TagEnd::List(_) => {
                    lists.pop();
                    block_end(&mut out, !lists.is_empty());
                }
                TagEnd::Item => {
                    trim_newlines(&mut out);
                    out.push('\n');
                }
                TagEnd::Emphasis => out.push_str("</i>"),
                TagEnd::Strong => out.push_str("</b>"),
                TagEnd::Strikethrough => out.push_str("</s>"),
                TagEnd::Link if links.pop() == Some(true) => out.push_str("</a>"),
                TagEnd::Image => {
                    links.pop();
                    out.push(']');
                }
                TagEnd::TableHead | TagEnd::TableRow => out.push('\n'),
                TagEnd::Table => block_end(&mut out, false),
                _ => {}
            },
            Event::Text(text) => out.push_str(&escape(&text)),
            Event::Code(code) => {
                out.push_str("<code>");
                out.push_str(&escape(&code));
                out.push_str("</code>");
            }
            // A model's HTML is shown, never interpreted.
            Event::Html(html) | Event::InlineHtml(html) => out.push_str(&escape(&html)),
            Event::SoftBreak | Event::HardBreak => out.push('\n'),
            Event::Rule => {
                out.push_str("——————");
                block_end(&mut out, false);
            }
            Event::TaskListMarker(done) => out.push_str(if done { "☑ " } else { "☐ " }),
            Event::FootnoteReference(name) => out.push_str(&format!("[{}]", escape(&name))),
            Event::InlineMath(math) | Event::DisplayMath(math) => out.push_str(&escape(&math)),
        }
    }
    trim_newlines(&mut out);
    out
}

/// Ends a block: a blank line after it (one newline inside a list).
fn block_end(out: &mut String, tight: bool) {
    trim_newlines(out);
    out.push_str(if tight { "\n" } else { "\n\n" });
}

fn trim_newlines(out: &mut String) {
    while out.ends_with('\n') {
        out.pop();
    }
}

/// The markdown's plain text: what a message falls back to when Telegram
/// cannot parse its HTML.
pub fn to_plain(markdown: &str) -> String {
    let mut out = String::new();
    for event in Parser::new_ext(markdown, options()) {
        match event {
            Event::Text(text) | Event::Code(text) | Event::Html(text) | Event::InlineHtml(text) => {
                out.push_str(&text);
            }
            Event::SoftBreak | Event::HardBreak => out.push('\n'),
            Event::End(
                TagEnd::Paragraph | TagEnd::Heading(_) | TagEnd::CodeBlock | TagEnd::Item,
            ) => {
                trim_newlines(&mut out);
                out.push_str("\n\n");
            }
            _ => {}
        }
    }
    trim_newlines(&mut out);
    out
}

/// One message's worth: its HTML, and its plain text for the fallback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Telegram HTML.
    pub html: String,
    /// The same text without markup.
    pub plain: String,
}

/// The markdown cut into messages of at most `limit` characters of HTML,
/// at block boundaries (paragraphs, lists, code blocks); a block longer
/// than a message is cut at line and then word boundaries, as plain text
/// (a code block's pieces stay code).
pub fn split(markdown: &str, limit: usize) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    let mut current = String::new();
    for block in top_level_blocks(markdown) {
        let candidate = if current.is_empty() {
            block.to_owned()
        } else {
            format!("{current}\n\n{block}")
        };
        if to_html(&candidate).chars().count() <= limit {
            current = candidate;
            continue;
        }
        if !current.is_empty() {
            chunks.push(chunk(&current));
            current.clear();
        }
        if to_html(block).chars().count() <= limit {
            current = block.to_owned();
        } else {
            chunks.extend(cut_block(block, limit));
        }
    }
    if !current.trim().is_empty() {
        chunks.push(chunk(&current));
    }
    chunks
}

fn chunk(markdown: &str) -> Chunk {
    Chunk {
        html: to_html(markdown),
        plain: to_plain(markdown),
    }
}

/// The source of each top-level block, in order.
fn top_level_blocks(markdown: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut depth = 0usize;
    let mut start = None;
    for (event, range) in Parser::new_ext(markdown, options()).into_offset_iter() {
        match event {
            Event::Start(_) => {
                if depth == 0 {
                    start = Some(range.start);
                }
                depth += 1;
            }
            Event::End(_) => {
                depth = depth.saturating_sub(1);
                if depth == 0
                    && let Some(begin) = start.take()
                {
                    blocks.push(markdown[begin..range.end].trim_end());
                }
            }
            // A rule or HTML block outside any container.
            _ if depth == 0 => blocks.push(markdown[range].trim_end()),
            _ => {}
        }
    }
    blocks
}

/// A block too long for one message, as several: cut at lines, then at
/// words, then anywhere; shown as plain text, or as code for a code block.
fn cut_block(block: &str, limit: usize) -> Vec<Chunk> {
    let is_code = block.trim_start().starts_with("```") || block.trim_start().starts_with("~~~");
    let text = if is_code {
        let mut lines: Vec<&str> = block.lines().collect();
        if lines.len() >= 2 {
            lines.remove(0);
            if lines.last().is_some_and(|l| {
                l.trim_start().starts_with("```") || l.trim_start().starts_with("~~~")
            }) {
                lines.pop();
            }
        }
        lines.join("\n")
    } else {
        to_plain(block)
    };
    // Room for the `<pre><code>` wrapper and escaping's growth.
    let room = if is_code { limit - 30 } else { limit };
    let mut pieces = Vec::new();
    let mut piece = String::new();
    let escaped_len = |s: &str| escape(s).chars().count();
    for line in text.split_inclusive('\n') {
        if escaped_len(&piece) + escaped_len(line) <= room {
            piece.push_str(line);
            continue;
        }
        if !piece.is_empty() {
            pieces.push(std::mem::take(&mut piece));
        }
        let mut rest = line;
        while escaped_len(rest) > room {
            // The longest prefix that fits, ended at a space when there is one.
            let mut end = 0;
            let mut used = 0;
            for (index, c) in rest.char_indices() {
                let width = escaped_len(&c.to_string());
                if used + width > room {
                    break;
                }
                used += width;
                end = index + c.len_utf8();
            }
            let cut = rest[..end]
                .rfind(' ')
                .filter(|space| *space > end / 2)
                .map_or(end, |space| space + 1);
            pieces.push(rest[..cut].to_owned());
            rest = &rest[cut..];
        }
        piece.push_str(rest);
    }
    if !piece.is_empty() {
        pieces.push(piece);
    }
    pieces
        .into_iter()
        .map(|piece| {
            let trimmed = piece.trim_end_matches('\n');
            Chunk {
                html: if is_code {
                    format!("<pre><code>{}</code></pre>", escape(trimmed))
                } else {
                    escape(trimmed)
                },
                plain: trimmed.to_owned(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_becomes_telegram_tags() {
        assert_eq!(
            to_html("# Title\n\nSome **bold**, *it*, `x < y` and [a](https://e.org/?a=1&b=2)."),
            "<b>Title</b>\n\nSome <b>bold</b>, <i>it</i>, <code>x &lt; y</code> and \
             <a href=\"https://e.org/?a=1&amp;b=2\">a</a>."
        );
        assert_eq!(
            to_html("```rust\nfn main() {}\n```"),
            "<pre><code class=\"language-rust\">fn main() {}</code></pre>"
        );
        assert_eq!(
            to_html("- one\n- two\n\n1. a\n2. b"),
            "• one\n• two\n\n1. a\n2. b"
        );
    }

    #[test]
    fn hostile_text_is_escaped_and_balanced() {
        let html = to_html("<script>alert(1)</script> & **unbalanced *stars <img onerror=x>");
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
        assert!(html.contains("&amp;"), "{html}");
        assert_eq!(to_html("[x](javascript:alert(1))"), "x");
    }

    #[test]
    fn long_texts_split_at_paragraphs_within_the_limit() {
        let paragraph = "word ".repeat(150);
        let text = [paragraph.trim(); 12].join("\n\n");
        let chunks = split(&text, MESSAGE_LIMIT);
        assert!(chunks.len() >= 2, "{}", chunks.len());
        for chunk in &chunks {
            assert!(chunk.html.chars().count() <= MESSAGE_LIMIT);
            assert!(chunk.html.starts_with("word") && chunk.html.ends_with("word"));
        }
        let words: usize = chunks
            .iter()
            .map(|c| c.plain.split_whitespace().count())
            .sum();
        assert_eq!(words, 150 * 12, "nothing lost");
    }

    #[test]
    fn one_huge_block_is_cut_and_code_stays_code() {
        let code = format!("```\n{}\n```", "let x = a < b;\n".repeat(600));
        let chunks = split(&code, MESSAGE_LIMIT);
        assert!(chunks.len() >= 3);
        for chunk in &chunks {
            assert!(
                chunk.html.chars().count() <= MESSAGE_LIMIT,
                "{}",
                chunk.html.len()
            );
            assert!(chunk.html.starts_with("<pre><code>") && chunk.html.ends_with("</code></pre>"));
        }
        let line = "é".repeat(10_000);
        let chunks = split(&line, MESSAGE_LIMIT);
        assert_eq!(
            chunks
                .iter()
                .map(|c| c.plain.chars().count())
                .sum::<usize>(),
            10_000
        );
    }
}
