//! Making results from different backends look alike: text without HTML,
//! dates in ISO 8601, canonical URLs without tracking parameters, no
//! duplicates.

use jiff::{Timestamp, Zoned};
use scraper::Html;
use url::Url;

use super::Hit;
use super::backend::RawHit;

/// Query parameters that only track clicks; dropped from result URLs.
const TRACKING_PARAMETERS: [&str; 14] = [
    "fbclid", "gclid", "dclid", "msclkid", "yclid", "mc_cid", "mc_eid", "igshid", "_hsenc",
    "_hsmi", "mkt_tok", "ref_src", "si", "spm",
];

/// Plain text of an HTML fragment: tags removed, entities decoded,
/// whitespace collapsed.
pub(crate) fn html_to_text(fragment: &str) -> String {
    if !fragment.contains(['<', '&']) {
        return collapse_whitespace(fragment);
    }
    let parsed = Html::parse_fragment(fragment);
    let text: String = parsed.root_element().text().collect();
    collapse_whitespace(&text)
}

fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A result URL in canonical form: fragment and tracking parameters
/// removed. `None` for anything that is not an http(s) URL.
pub(crate) fn clean_url(raw: &str) -> Option<Url> {
    let mut url = Url::parse(raw.trim()).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    url.set_fragment(None);
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(key, _)| !key.starts_with("utm_") && !TRACKING_PARAMETERS.contains(&key.as_ref()))
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if kept.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut().clear().extend_pairs(kept);
    }
    Some(url)
}

/// The key two URLs share when they are the same page: no scheme, no
/// `www.`, no trailing slash.
fn dedupe_key(url: &Url) -> String {
    let host = url
        .host_str()
        .unwrap_or_default()
        .trim_start_matches("www.");
    let path = url.path().trim_end_matches('/');
    match url.query() {
        Some(query) => format!("{host}{path}?{query}"),
        None => format!("{host}{path}"),
    }
}

/// A date as backends write it (ISO 8601 with or without zone, RFC 2822,
/// `2 days ago`) in ISO 8601: `2024-05-01T12:00:00Z`, or `2024-05-01` when
/// only the day is known. `None` when it cannot be read.
pub(crate) fn iso_date(raw: &str, now: &Zoned) -> Option<String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return None;
    }
    // A bare day stays a day (a datetime parser would invent midnight).
    if raw.len() == 10
        && let Ok(date) = raw.parse::<jiff::civil::Date>()
    {
        return Some(date.to_string());
    }
    if let Ok(timestamp) = raw.parse::<Timestamp>() {
        return Some(timestamp.to_string());
    }
    if let Ok(datetime) = raw.parse::<jiff::civil::DateTime>() {
        return datetime
            .to_zoned(jiff::tz::TimeZone::UTC)
            .ok()
            .map(|z| z.timestamp().to_string());
    }
    if let Ok(zoned) = jiff::fmt::rfc2822::parse(raw) {
        return Some(zoned.timestamp().to_string());
    }
    relative_date(raw, now)
}

/// `3 hours ago`, `1 day ago`, `2 weeks ago` → the day it points at.
fn relative_date(raw: &str, now: &Zoned) -> Option<String> {
    let mut words = raw.split_whitespace();
    let count: i64 = words.next()?.parse().ok()?;
    let unit = words.next()?.trim_end_matches('s');
    if words.next()? != "ago" {
        return None;
    }
    let per_unit = match unit {
        "second" => Some(1),
        "minute" => Some(60),
        "hour" => Some(3600),
        _ => None,
    };
    if let Some(seconds) = per_unit {
        return Some(
            (now.timestamp() - jiff::SignedDuration::from_secs(count * seconds)).to_string(),
        );
    }
    let span = match unit {
        "day" => jiff::Span::new().days(count),
        "week" => jiff::Span::new().weeks(count),
        "month" => jiff::Span::new().months(count),
        "year" => jiff::Span::new().years(count),
        _ => return None,
    };
    now.date()
        .checked_sub(span)
        .ok()
        .map(|date| date.to_string())
}

/// Turns raw hits into results: cleaned, deduplicated (first wins, a
/// missing snippet or date filled from a duplicate), at most `max`.
pub(crate) fn normalise(raw: Vec<RawHit>, max: usize, now: &Zoned) -> Vec<Hit> {
    let mut hits: Vec<Hit> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    for hit in raw {
        let Some(url) = clean_url(&hit.url) else {
            continue;
        };
        let key = dedupe_key(&url);
        let title = html_to_text(&hit.title);
        let snippet = html_to_text(&hit.snippet);
        let date = hit.date.as_deref().and_then(|d| iso_date(d, now));
        if let Some(index) = keys.iter().position(|k| *k == key) {
            let existing = &mut hits[index];
            if existing.snippet.is_empty() {
                existing.snippet = snippet;
            }
            if existing.date.is_none() {
                existing.date = date;
            }
            continue;
        }
        if hits.len() == max {
            continue;
        }
        keys.push(key);
        hits.push(Hit {
            title: if title.is_empty() {
                url.to_string()
            } else {
                title
            },
            url: url.to_string(),
            snippet,
            date,
        });
    }
    hits
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn now() -> Zoned {
        "2024-05-10T12:00:00Z[UTC]".parse().unwrap()
    }

    #[test]
    fn html_is_flattened_to_text() {
        assert_eq!(
            html_to_text("A <b>bold</b> &amp; <i>brave</i>&nbsp;claim &#8212; &quot;yes&quot;"),
            "A bold & brave claim — \"yes\""
        );
        assert_eq!(html_to_text("  plain\n text "), "plain text");
        assert_eq!(html_to_text("1 &lt; 2"), "1 < 2");
    }

    #[test]
    fn urls_lose_tracking_and_fragments() {
        let url = clean_url("https://example.com/a?utm_source=x&id=7&fbclid=abc#top").unwrap();
        assert_eq!(url.as_str(), "https://example.com/a?id=7");
        assert_eq!(
            clean_url("https://example.com/?utm_medium=m")
                .unwrap()
                .as_str(),
            "https://example.com/"
        );
        assert!(clean_url("javascript:alert(1)").is_none());
        assert!(clean_url("not a url").is_none());
    }

    #[test]
    fn dates_become_iso_8601() {
        let now = now();
        assert_eq!(
            iso_date("2024-05-01T08:30:00", &now).unwrap(),
            "2024-05-01T08:30:00Z"
        );
        assert_eq!(
            iso_date("2024-05-01T08:30:00+02:00", &now).unwrap(),
            "2024-05-01T06:30:00Z"
        );
        assert_eq!(
            iso_date("Wed, 01 May 2024 08:30:00 GMT", &now).unwrap(),
            "2024-05-01T08:30:00Z"
        );
        assert_eq!(iso_date("2024-05-01", &now).unwrap(), "2024-05-01");
        assert_eq!(iso_date("3 days ago", &now).unwrap(), "2024-05-07");
        assert_eq!(iso_date("1 week ago", &now).unwrap(), "2024-05-03");
        assert_eq!(
            iso_date("2 hours ago", &now).unwrap(),
            "2024-05-10T10:00:00Z"
        );
        assert_eq!(iso_date("yesterday-ish", &now), None);
        assert_eq!(iso_date("", &now), None);
    }

    #[test]
    fn duplicates_merge_and_the_cap_holds() {
        let raw = |url: &str, snippet: &str| RawHit {
            title: "T".into(),
            url: url.into(),
            snippet: snippet.into(),
            date: None,
        };
        let hits = normalise(
            vec![
                raw("https://www.example.com/page/", ""),
                raw(
                    "http://example.com/page?utm_source=feed",
                    "filled from the duplicate",
                ),
                raw("https://other.org/", "b"),
                raw("https://third.net/", "c"),
            ],
            2,
            &now(),
        );
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].url, "https://www.example.com/page/");
        assert_eq!(hits[0].snippet, "filled from the duplicate");
        assert_eq!(hits[1].url, "https://other.org/");
    }
}
