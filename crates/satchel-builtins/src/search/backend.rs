//! The search services, each speaking its own documented API: SearXNG
//! (JSON output), Brave Search API, Tavily, and DuckDuckGo's HTML page.

use std::time::Duration;

use reqwest::{Client, RequestBuilder, Response, StatusCode};
use scraper::{Html, Selector};
use serde::Deserialize;
use serde_json::json;

use super::Kind;

/// One result as a backend gave it, before normalisation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawHit {
    pub(crate) title: String,
    pub(crate) url: String,
    pub(crate) snippet: String,
    pub(crate) date: Option<String>,
}

/// Why a backend gave no answer; every variant sends the search to the
/// next backend.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum BackendError {
    /// The service says slow down; `retry_after` when it said how long.
    #[error("rate-limited{}", retry_after.map_or_else(String::new, |d| format!(" (retry after {} s)", d.as_secs())))]
    RateLimited { retry_after: Option<Duration> },
    /// No answer within the time limit.
    #[error("no answer within {} ms", .0.as_millis())]
    Timeout(Duration),
    /// An HTTP error status.
    #[error("HTTP {status}: {body}")]
    Http { status: u16, body: String },
    /// The answer was not in the format the API documents.
    #[error("malformed answer: {0}")]
    Malformed(String),
    /// The service could not be reached.
    #[error("unreachable: {0}")]
    Network(String),
}

/// The services Satchel can search with (`Debug` shows the name only:
/// keys never reach a log).
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Backend {
    /// A SearXNG instance with `json` in its output formats.
    Searxng { base_url: String },
    /// Brave Search API.
    Brave { base_url: String, api_key: String },
    /// Tavily search API.
    Tavily { base_url: String, api_key: String },
    /// DuckDuckGo's HTML endpoint (no key; web only).
    DuckDuckGo { base_url: String },
}

/// Characters of an error body quoted in a message.
const BODY_HEAD: usize = 200;

impl Backend {
    /// The backend's name in config and results.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Backend::Searxng { .. } => "searxng",
            Backend::Brave { .. } => "brave",
            Backend::Tavily { .. } => "tavily",
            Backend::DuckDuckGo { .. } => "duckduckgo",
        }
    }

    /// Whether the backend can answer this kind of search.
    pub(crate) fn supports(&self, kind: Kind) -> bool {
        !matches!((self, kind), (Backend::DuckDuckGo { .. }, Kind::News))
    }

    /// Runs one search; `max` is a hint (backends may return more).
    pub(crate) async fn search(
        &self,
        client: &Client,
        query: &str,
        kind: Kind,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<RawHit>, BackendError> {
        let request = match self {
            Backend::Searxng { base_url } => client
                .get(format!("{}/search", base_url.trim_end_matches('/')))
                .query(&[
                    ("q", query),
                    ("format", "json"),
                    (
                        "categories",
                        if kind == Kind::News {
                            "news"
                        } else {
                            "general"
                        },
                    ),
                    ("pageno", "1"),
                ]),
            Backend::Brave { base_url, api_key } => {
                let endpoint = if kind == Kind::News { "news" } else { "web" };
                client
                    .get(format!(
                        "{}/res/v1/{endpoint}/search",
                        base_url.trim_end_matches('/')
                    ))
                    .query(&[("q", query), ("count", &max.to_string())])
                    .header("Accept", "application/json")
                    .header("X-Subscription-Token", api_key)
            }
            Backend::Tavily { base_url, api_key } => client
                .post(format!("{}/search", base_url.trim_end_matches('/')))
                .bearer_auth(api_key)
                .json(&json!({
                    "query": query,
                    "topic": if kind == Kind::News { "news" } else { "general" },
                    "max_results": max,
                    "search_depth": "basic",
                })),
            Backend::DuckDuckGo { base_url } => client
                .post(format!("{}/html/", base_url.trim_end_matches('/')))
                .form(&[("q", query), ("b", "")])
                .header("Accept", "text/html"),
        };
        let response = send(request, timeout).await?;
        let body = tokio::time::timeout(timeout, response.text())
            .await
            .map_err(|_| BackendError::Timeout(timeout))?
            .map_err(|error| BackendError::Network(error.to_string()))?;
        match self {
            Backend::Searxng { .. } => parse_searxng(&body),
            Backend::Brave { .. } => parse_brave(&body, kind),
            Backend::Tavily { .. } => parse_tavily(&body),
            Backend::DuckDuckGo { .. } => parse_duckduckgo(&body),
        }
    }
}

/// Sends a request and turns failure statuses into [`BackendError`]s.
async fn send(request: RequestBuilder, timeout: Duration) -> Result<Response, BackendError> {
    let response = match tokio::time::timeout(timeout, request.send()).await {
        Err(_) => return Err(BackendError::Timeout(timeout)),
        Ok(Err(error)) if error.is_timeout() => return Err(BackendError::Timeout(timeout)),
        Ok(Err(error)) => return Err(BackendError::Network(error.without_url().to_string())),
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    if status == StatusCode::TOO_MANY_REQUESTS {
        let retry_after =
            satchel_http::retry_after(response.headers(), std::time::SystemTime::now());
        return Err(BackendError::RateLimited { retry_after });
    }
    // DuckDuckGo answers an anomaly (bot) check with 202 and a captcha page.
    if status == StatusCode::ACCEPTED {
        return Err(BackendError::RateLimited { retry_after: None });
    }
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        let (head, _) = satchel_core::text::char_prefix(body.trim(), BODY_HEAD);
        return Err(BackendError::Http {
            status: status.as_u16(),
            body: head.to_owned(),
        });
    }
    Ok(response)
}

fn malformed(error: impl std::fmt::Display) -> BackendError {
    BackendError::Malformed(error.to_string())
}

#[derive(Deserialize)]
struct SearxngAnswer {
    results: Vec<SearxngResult>,
}

#[derive(Deserialize)]
struct SearxngResult {
    url: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    content: Option<String>,
    #[serde(default, rename = "publishedDate")]
    published_date: Option<String>,
}

fn parse_searxng(body: &str) -> Result<Vec<RawHit>, BackendError> {
    let answer: SearxngAnswer = serde_json::from_str(body).map_err(malformed)?;
    Ok(answer
        .results
        .into_iter()
        .map(|r| RawHit {
            title: r.title,
            url: r.url,
            snippet: r.content.unwrap_or_default(),
            date: r.published_date,
        })
        .collect())
}

#[derive(Deserialize)]
struct BraveWebAnswer {
    #[serde(default)]
    web: Option<BraveResults>,
}

#[derive(Deserialize)]
struct BraveResults {
    results: Vec<BraveResult>,
}

#[derive(Deserialize)]
struct BraveResult {
    url: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    page_age: Option<String>,
    #[serde(default)]
    age: Option<String>,
}

fn parse_brave(body: &str, kind: Kind) -> Result<Vec<RawHit>, BackendError> {
    let results = match kind {
        // The web endpoint nests results under `web`; it is absent when nothing matched.
        Kind::Web => serde_json::from_str::<BraveWebAnswer>(body)
            .map_err(malformed)?
            .web
            .map(|w| w.results)
            .unwrap_or_default(),
        Kind::News => {
            serde_json::from_str::<BraveResults>(body)
                .map_err(malformed)?
                .results
        }
    };
    Ok(results
        .into_iter()
        .map(|r| RawHit {
            title: r.title,
            url: r.url,
            snippet: r.description,
            date: r.page_age.or(r.age),
        })
        .collect())
}

#[derive(Deserialize)]
struct TavilyAnswer {
    results: Vec<TavilyResult>,
}

#[derive(Deserialize)]
struct TavilyResult {
    url: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    content: String,
    #[serde(default)]
    published_date: Option<String>,
}

fn parse_tavily(body: &str) -> Result<Vec<RawHit>, BackendError> {
    let answer: TavilyAnswer = serde_json::from_str(body).map_err(malformed)?;
    Ok(answer
        .results
        .into_iter()
        .map(|r| RawHit {
            title: r.title,
            url: r.url,
            snippet: r.content,
            date: r.published_date,
        })
        .collect())
}

/// Reads DuckDuckGo's HTML result page: `a.result__a` links (through its
/// `/l/?uddg=` redirect) and `.result__snippet` text; ads are skipped.
fn parse_duckduckgo(body: &str) -> Result<Vec<RawHit>, BackendError> {
    let page = Html::parse_document(body);
    let selector = |css: &str| {
        Selector::parse(css).map_err(|e| BackendError::Malformed(format!("selector {css}: {e}")))
    };
    let (result, link, snippet) = (
        selector("div.result")?,
        selector("a.result__a")?,
        selector(".result__snippet")?,
    );
    let mut hits = Vec::new();
    for element in page.select(&result) {
        if element.value().classes().any(|class| class == "result--ad") {
            continue;
        }
        let Some(anchor) = element.select(&link).next() else {
            continue;
        };
        let Some(href) = anchor.value().attr("href") else {
            continue;
        };
        let Some(url) = duckduckgo_target(href) else {
            continue;
        };
        let title: String = anchor.text().collect();
        let text: String = element
            .select(&snippet)
            .next()
            .map(|s| s.text().collect())
            .unwrap_or_default();
        hits.push(RawHit {
            title,
            url,
            snippet: text,
            date: None,
        });
    }
    if hits.is_empty() && !body.contains("result") && !body.contains("no-results") {
        return Err(BackendError::Malformed("no result list in the page".into()));
    }
    Ok(hits)
}

/// The real URL behind DuckDuckGo's `//duckduckgo.com/l/?uddg=...` redirect.
fn duckduckgo_target(href: &str) -> Option<String> {
    let absolute = if href.starts_with("//") {
        format!("https:{href}")
    } else {
        href.to_owned()
    };
    let parsed = url::Url::parse(&absolute).ok()?;
    if parsed.path() == "/l/" {
        return parsed
            .query_pairs()
            .find(|(key, _)| key == "uddg")
            .map(|(_, value)| value.into_owned());
    }
    Some(absolute)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duckduckgo_redirects_are_unwrapped() {
        assert_eq!(
            duckduckgo_target(
                "//duckduckgo.com/l/?uddg=https%3A%2F%2Fwww.rust-lang.org%2F&rut=abc"
            )
            .as_deref(),
            Some("https://www.rust-lang.org/")
        );
        assert_eq!(
            duckduckgo_target("https://example.com/x").as_deref(),
            Some("https://example.com/x")
        );
    }

    #[test]
    fn malformed_answers_are_reported() {
        assert!(matches!(
            parse_searxng("<html>"),
            Err(BackendError::Malformed(_))
        ));
        assert!(matches!(
            parse_brave("{\"web\": 3}", Kind::Web),
            Err(BackendError::Malformed(_))
        ));
        assert!(matches!(
            parse_tavily("{}"),
            Err(BackendError::Malformed(_))
        ));
        assert!(matches!(
            parse_duckduckgo("<html><body>blocked</body></html>"),
            Err(BackendError::Malformed(_))
        ));
    }
}
