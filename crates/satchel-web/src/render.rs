//! Markdown (a tool's formatter, a model's answer) as HTML that is inert:
//! raw HTML in the markdown becomes text, links keep only safe schemes,
//! images become links. The page inserts only what this module made.

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd};

fn safe_url(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    ["http://", "https://", "mailto:"]
        .iter()
        .any(|scheme| lower.starts_with(scheme))
        || lower.starts_with('#')
}

/// `markdown` as HTML with nothing active in it.
pub fn markdown_html(markdown: &str) -> String {
    let options =
        Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS;
    let mut dropped_links = 0usize;
    let events = Parser::new_ext(markdown, options).map(|event| match event {
        // HTML written by a model or a tool is shown as text.
        Event::Html(html) | Event::InlineHtml(html) => Event::Text(html),
        Event::Start(Tag::Link {
            link_type,
            dest_url,
            title,
            id,
        }) => {
            if safe_url(&dest_url) {
                Event::Start(Tag::Link {
                    link_type,
                    dest_url,
                    title,
                    id,
                })
            } else {
                dropped_links += 1;
                Event::Text(CowStr::Borrowed(""))
            }
        }
        Event::End(TagEnd::Link) if dropped_links > 0 => {
            dropped_links -= 1;
            Event::Text(CowStr::Borrowed(""))
        }
        // No request leaves the page for an image in the record.
        Event::Start(Tag::Image { .. }) => Event::Text(CowStr::Borrowed("[image: ")),
        Event::End(TagEnd::Image) => Event::Text(CowStr::Borrowed("]")),
        other => other,
    });
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, events);
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_active_survives() {
        let html = markdown_html(
            "<script>alert(1)</script>\n\nhi <img src=x onerror=alert(2)> [a](javascript:alert(3)) ![i](http://e/x.png) **b**",
        );
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("javascript:"), "{html}");
        assert!(
            html.contains("&lt;script&gt;") && html.contains("<strong>b</strong>"),
            "{html}"
        );
        assert!(markdown_html("[ok](https://e.org)").contains("<a href=\"https://e.org\">ok</a>"));
    }
}
