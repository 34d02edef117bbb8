//! HTML as readable markdown: the page's main content (its `<main>`,
//! `<article>` or `[role=main]`, else its body), without scripts, styles,
//! navigation, headers, footers, forms or asides, converted by `htmd`
//! (a turndown-style converter over html5ever).

use scraper::{Html, Selector};

/// Tags whose content is never part of what a reader reads.
const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "nav", "header", "footer", "aside", "form",
    "iframe", "svg", "canvas", "button", "select", "dialog",
];

/// The page's title and its main content as markdown.
pub(crate) fn to_markdown(html: &str) -> (Option<String>, String) {
    let document = Html::parse_document(html);
    let title = Selector::parse("title").ok().and_then(|selector| {
        document
            .select(&selector)
            .next()
            .map(|title| title.text().collect::<String>().trim().to_owned())
            .filter(|title| !title.is_empty())
    });
    let main = ["main", "article", "[role=main]", "body"]
        .iter()
        .filter_map(|css| Selector::parse(css).ok())
        .find_map(|selector| document.select(&selector).next().map(|el| el.html()));
    let source = main.unwrap_or_else(|| html.to_owned());
    let options = htmd::options::Options {
        bullet_list_marker: htmd::options::BulletListMarker::Dash,
        ul_bullet_spacing: 1,
        ol_number_spacing: 1,
        ..htmd::options::Options::default()
    };
    let converter = htmd::HtmlToMarkdown::builder()
        .options(options)
        .skip_tags(SKIPPED.to_vec())
        .build();
    let markdown = converter.convert(&source).unwrap_or_default();
    (title, tidy(&markdown))
}

/// At most one blank line in a row, no trailing spaces.
fn tidy(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut blank = 0;
    for line in markdown.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_article_survives_and_the_chrome_does_not() {
        let html = r#"<html><head><title>Lentils</title><style>p{color:red}</style>
            <script>var tracking = "SECRET-SCRIPT";</script></head>
            <body><nav><a href="/">Home</a> <a href="/about">NAV-LINK</a></nav>
            <main><article><h1>How to cook lentils</h1><p>Rinse them <strong>well</strong>.</p>
            <ul><li>one cup</li><li>two cups of water</li></ul>
            <p>See <a href="https://example.com/more">more</a>.</p></article></main>
            <footer>FOOTER-TEXT</footer></body></html>"#;
        let (title, markdown) = to_markdown(html);
        assert_eq!(title.as_deref(), Some("Lentils"));
        assert!(markdown.contains("# How to cook lentils"), "{markdown}");
        assert!(markdown.contains("**well**"), "{markdown}");
        assert!(
            markdown.contains("[more](https://example.com/more)"),
            "{markdown}"
        );
        for gone in ["SECRET-SCRIPT", "NAV-LINK", "FOOTER-TEXT", "color:red"] {
            assert!(!markdown.contains(gone), "{gone} in {markdown}");
        }
    }
}
