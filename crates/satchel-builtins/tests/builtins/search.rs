//! The search tool against local servers that speak each service's
//! documented format: SearXNG JSON, Brave Search API, Tavily, DuckDuckGo HTML.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::{Form, Query};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse};
use axum::routing::{get, post};
use axum::{Json, Router};
use pretty_assertions::assert_eq;
use satchel_builtins::builtin_registry;
use satchel_core::{ErrorCode, ToolCall, ToolOutput};
use satchel_tools::{Registry, Settings, ToolContext, ToolsConfig};
use serde_json::{Value, json};

/// Serves `router` on a free loopback port; returns its base URL.
async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{address}")
}

fn config(search: Value, env: &[(&str, &str)]) -> Arc<ToolsConfig> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.json");
    std::fs::write(&path, json!({"search": search}).to_string()).unwrap();
    let env: BTreeMap<String, String> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let (config, warnings) =
        satchel_builtins::tools_config(&Settings::load(&[path]).unwrap().with_env(env));
    assert!(warnings.is_empty(), "{warnings:?}");
    Arc::new(config)
}

async fn search(registry: &Registry, config: &Arc<ToolsConfig>, input: Value) -> ToolOutput {
    let ctx = ToolContext::standalone("s1", std::env::temp_dir(), config.clone());
    let call = ToolCall {
        id: "s1".into(),
        name: "search".into(),
        input,
    };
    tokio::time::timeout(Duration::from_secs(30), registry.call(&call, &ctx))
        .await
        .expect("search hung")
}

fn body(output: &ToolOutput) -> &Value {
    output
        .results
        .structured()
        .expect("search results are JSON")
}

fn searxng_router(hits: Arc<AtomicUsize>) -> Router {
    Router::new().route(
        "/search",
        get(move |Query(params): Query<BTreeMap<String, String>>| {
            let hits = hits.clone();
            async move {
                hits.fetch_add(1, Ordering::SeqCst);
                assert_eq!(params["format"], "json");
                if params["categories"] == "news" {
                    return Json(json!({
                        "query": params["q"], "number_of_results": 1,
                        "results": [{"url": "https://news.example/a", "title": "Rust 2.0 <b>released</b>", "content": "Big &amp; bold",
                                     "engine": "bing news", "publishedDate": "2024-05-01T08:30:00", "category": "news"}],
                        "answers": [], "suggestions": [], "unresponsive_engines": []
                    }));
                }
                Json(json!({
                    "query": params["q"], "number_of_results": 3,
                    "results": [
                        {"url": "https://www.rust-lang.org/?utm_source=searx", "title": "Rust Programming Language",
                         "content": "A language <em>empowering</em> everyone", "engine": "duckduckgo", "score": 3.0, "category": "general"},
                        {"url": "https://rust-lang.org/", "title": "Rust", "content": "duplicate", "engine": "bing", "score": 1.0},
                        {"url": "https://doc.rust-lang.org/book/", "title": "The Book", "content": null, "engine": "google", "score": 2.0}
                    ],
                    "answers": [], "suggestions": [], "unresponsive_engines": [["qwant", "timeout"]]
                }))
            }
        }),
    )
}

#[tokio::test]
async fn searxng_web_and_news() {
    let hits = Arc::new(AtomicUsize::new(0));
    let base = serve(searxng_router(hits.clone())).await;
    let config = config(
        json!({"backends": ["searxng"], "searxng": {"baseUrl": base}}),
        &[],
    );
    let registry = builtin_registry().unwrap();

    let out = search(&registry, &config, json!({"query": "rust"})).await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(
        body(&out),
        &json!({
            "results": [
                {"title": "Rust Programming Language", "url": "https://www.rust-lang.org/", "snippet": "A language empowering everyone"},
                {"title": "The Book", "url": "https://doc.rust-lang.org/book/", "snippet": ""}
            ],
            "backend": "searxng",
            "cached": false
        })
    );
    let out = search(&registry, &config, json!({"query": "rust", "type": "news"})).await;
    assert_eq!(
        body(&out)["results"],
        json!([{"title": "Rust 2.0 released", "url": "https://news.example/a", "snippet": "Big & bold", "date": "2024-05-01T08:30:00Z"}])
    );
    assert!(
        out.user_message
            .starts_with("searched the news for \"rust\": 1 results (via searxng)"),
        "{}",
        out.user_message
    );
}

#[tokio::test]
async fn brave_web_and_news_with_the_subscription_token() {
    let router = Router::new()
        .route(
            "/res/v1/web/search",
            get(|headers: HeaderMap, Query(params): Query<BTreeMap<String, String>>| async move {
                if headers.get("x-subscription-token").and_then(|v| v.to_str().ok()) != Some("brave-key") {
                    return (StatusCode::UNAUTHORIZED, Json(json!({"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID"}})));
                }
                assert_eq!(params["count"], "3");
                (StatusCode::OK, Json(json!({
                    "type": "search",
                    "query": {"original": params["q"]},
                    "web": {"type": "search", "results": [
                        {"title": "Tokio - An asynchronous Rust runtime", "url": "https://tokio.rs/", "description": "Tokio is an <strong>asynchronous</strong> runtime", "page_age": "2024-04-01T00:00:00", "age": "April 1, 2024"},
                        {"title": "tokio - crates.io", "url": "https://crates.io/crates/tokio?fbclid=zzz", "description": "An event-driven runtime"}
                    ]}
                })))
            }),
        )
        .route(
            "/res/v1/news/search",
            get(|| async {
                (StatusCode::OK, Json(json!({
                    "type": "news",
                    "results": [{"title": "Tokio 2 ships", "url": "https://news.example/tokio", "description": "It is out", "age": "3 days ago"}]
                })))
            }),
        );
    let base = serve(router).await;
    let registry = builtin_registry().unwrap();
    let config = config(
        json!({"backends": ["brave"], "brave": {"baseUrl": base}}),
        &[("BRAVE_API_KEY", "brave-key")],
    );
    let out = search(
        &registry,
        &config,
        json!({"query": "tokio", "max_results": 3}),
    )
    .await;
    assert_eq!(body(&out)["backend"], "brave");
    assert_eq!(
        body(&out)["results"],
        json!([
            {"title": "Tokio - An asynchronous Rust runtime", "url": "https://tokio.rs/", "snippet": "Tokio is an asynchronous runtime", "date": "2024-04-01T00:00:00Z"},
            {"title": "tokio - crates.io", "url": "https://crates.io/crates/tokio", "snippet": "An event-driven runtime"}
        ])
    );
    let out = search(
        &registry,
        &config,
        json!({"query": "tokio", "type": "news"}),
    )
    .await;
    let date = body(&out)["results"][0]["date"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(date.len(), 10, "a relative age becomes a day: {date}");

    let wrong_key = self::config(
        json!({"backends": ["brave"], "brave": {"baseUrl": base}}),
        &[("BRAVE_API_KEY", "nope")],
    );
    let out = search(&registry, &wrong_key, json!({"query": "tokio"})).await;
    assert!(out.is_error);
    let message = body(&out)["error"].as_str().unwrap();
    assert!(message.contains("brave: HTTP 401"), "{message}");
    assert!(
        !message.contains("nope"),
        "the key must never appear in messages"
    );
}

#[tokio::test]
async fn tavily_posts_json_with_a_bearer_key() {
    let router = Router::new().route(
        "/search",
        post(|headers: HeaderMap, Json(request): Json<Value>| async move {
            assert_eq!(headers.get("authorization").unwrap(), "Bearer tvly-key");
            assert_eq!(request["max_results"], 5);
            let date = if request["topic"] == "news" { json!("Wed, 01 May 2024 08:30:00 GMT") } else { Value::Null };
            Json(json!({
                "query": request["query"], "answer": null, "images": [],
                "results": [{"title": "Axum", "url": "https://docs.rs/axum", "content": "Ergonomic and modular web framework", "score": 0.98, "raw_content": null, "published_date": date}],
                "response_time": 0.5
            }))
        }),
    );
    let base = serve(router).await;
    let registry = builtin_registry().unwrap();
    let config = config(
        json!({"backends": ["tavily"], "tavily": {"baseUrl": base}}),
        &[("TAVILY_API_KEY", "tvly-key")],
    );
    let out = search(&registry, &config, json!({"query": "axum"})).await;
    assert_eq!(
        body(&out)["results"],
        json!([{"title": "Axum", "url": "https://docs.rs/axum", "snippet": "Ergonomic and modular web framework"}])
    );
    let out = search(&registry, &config, json!({"query": "axum", "type": "news"})).await;
    assert_eq!(body(&out)["results"][0]["date"], "2024-05-01T08:30:00Z");
}

const DDG_PAGE: &str = r#"<!DOCTYPE html><html><body><div id="links" class="results">
<div class="result results_links results_links_deep result--ad"><div class="links_main links_deep result__body">
  <h2 class="result__title"><a rel="nofollow" class="result__a" href="https://ads.example/buy">Buy now</a></h2>
  <a class="result__snippet" href="https://ads.example/buy">An ad</a></div></div>
<div class="result results_links results_links_deep web-result "><div class="links_main links_deep result__body">
  <h2 class="result__title"><a rel="nofollow" class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fwww.sqlite.org%2Fwal.html&amp;rut=abc">Write-Ahead Logging</a></h2>
  <div class="result__extras"><div class="result__extras__url"><a class="result__url" href="//duckduckgo.com/l/?uddg=x">www.sqlite.org/wal.html</a></div></div>
  <a class="result__snippet" href="//duckduckgo.com/l/?uddg=x">The default method by which <b>SQLite</b> implements atomic commit &amp; rollback</a></div></div>
<div class="result results_links results_links_deep web-result "><div class="links_main links_deep result__body">
  <h2 class="result__title"><a rel="nofollow" class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fen.wikipedia.org%2Fwiki%2FSQLite&amp;rut=def">SQLite - Wikipedia</a></h2>
  <a class="result__snippet" href="x">SQLite is a database engine</a></div></div>
</div></body></html>"#;

#[tokio::test]
async fn duckduckgo_html_is_read_and_ads_skipped() {
    let router = Router::new().route(
        "/html/",
        post(|Form(form): Form<BTreeMap<String, String>>| async move {
            if form["q"] == "nothing" {
                return Html(
                    r#"<html><body><div class="no-results">No results.</div></body></html>"#
                        .to_owned(),
                );
            }
            Html(DDG_PAGE.to_owned())
        }),
    );
    let base = serve(router).await;
    let registry = builtin_registry().unwrap();
    let config = config(
        json!({"backends": ["duckduckgo"], "duckduckgo": {"baseUrl": base}}),
        &[],
    );
    let out = search(&registry, &config, json!({"query": "sqlite wal"})).await;
    assert_eq!(
        body(&out)["results"],
        json!([
            {"title": "Write-Ahead Logging", "url": "https://www.sqlite.org/wal.html", "snippet": "The default method by which SQLite implements atomic commit & rollback"},
            {"title": "SQLite - Wikipedia", "url": "https://en.wikipedia.org/wiki/SQLite", "snippet": "SQLite is a database engine"}
        ])
    );
    let out = search(&registry, &config, json!({"query": "nothing"})).await;
    assert!(!out.is_error);
    assert_eq!(body(&out)["results"], json!([]));
    // DuckDuckGo's HTML page has no news search: it is skipped, and says so.
    let out = search(
        &registry,
        &config,
        json!({"query": "sqlite", "type": "news"}),
    )
    .await;
    assert!(
        body(&out)["error"]
            .as_str()
            .unwrap()
            .contains("duckduckgo (no news search)")
    );
}

#[tokio::test]
async fn failover_cooldown_and_cache() {
    let broken_hits = Arc::new(AtomicUsize::new(0));
    let counter = broken_hits.clone();
    let broken = serve(Router::new().route(
        "/search",
        get(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            async { (StatusCode::INTERNAL_SERVER_ERROR, "engine exploded") }
        }),
    ))
    .await;
    let good_hits = Arc::new(AtomicUsize::new(0));
    let good = serve(searxng_router(good_hits.clone())).await;
    let registry = builtin_registry().unwrap();
    // Two SearXNG-speaking backends: the first broken, the second fine.
    let config = config(
        json!({"backends": ["searxng", "tavily"], "searxng": {"baseUrl": broken}, "tavily": {"baseUrl": format!("{good}/tavily")}, "cooldownSecs": 60}),
        &[("TAVILY_API_KEY", "k")],
    );
    let out = search(&registry, &config, json!({"query": "q1"})).await;
    // Tavily's endpoint is missing on the good server: both fail, each said.
    let message = body(&out)["error"].as_str().unwrap().to_owned();
    assert!(
        message.contains("searxng: HTTP 500: engine exploded"),
        "{message}"
    );
    assert!(message.contains("tavily: HTTP 404"), "{message}");
    assert_eq!(out.error_code, Some(ErrorCode::ToolCrashed));

    let config = self::config(
        json!({"backends": ["duckduckgo", "searxng"], "duckduckgo": {"baseUrl": broken}, "searxng": {"baseUrl": good}, "cooldownSecs": 60}),
        &[],
    );
    let registry = builtin_registry().unwrap();
    let first = search(&registry, &config, json!({"query": "failover"})).await;
    assert_eq!(body(&first)["backend"], "searxng", "{first:?}");
    let before = broken_hits.load(Ordering::SeqCst);
    // A new query: the broken backend is cooling down and not asked.
    let second = search(&registry, &config, json!({"query": "another"})).await;
    assert_eq!(body(&second)["backend"], "searxng");
    assert_eq!(
        broken_hits.load(Ordering::SeqCst),
        before,
        "a cooling backend was asked"
    );
    // The same query again: answered from the cache.
    let asked = good_hits.load(Ordering::SeqCst);
    let cached = search(&registry, &config, json!({"query": "  Failover "})).await;
    assert_eq!(body(&cached)["cached"], true);
    assert_eq!(
        good_hits.load(Ordering::SeqCst),
        asked,
        "a cached query reached the backend"
    );
}

#[tokio::test]
async fn rate_limits_timeouts_and_malformed_answers() {
    let router = Router::new()
        .route(
            "/limited/search",
            get(|| async {
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    [("retry-after", "120")],
                    "slow down",
                )
                    .into_response()
            }),
        )
        .route(
            "/slow/search",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Json(json!({"results": []}))
            }),
        )
        .route("/garbled/search", get(|| async { "<html>not json</html>" }));
    let base = serve(router).await;
    let registry = builtin_registry().unwrap();
    let one = |path: &str, timeout_ms: u64| {
        config(
            json!({"backends": ["searxng"], "searxng": {"baseUrl": format!("{base}/{path}")}, "timeoutMs": timeout_ms}),
            &[],
        )
    };

    let out = search(&registry, &one("limited", 5000), json!({"query": "q"})).await;
    assert_eq!(out.error_code, Some(ErrorCode::RateLimited));
    assert!(
        body(&out)["error"]
            .as_str()
            .unwrap()
            .contains("rate-limited (retry after 120 s)")
    );

    let registry = builtin_registry().unwrap();
    let started = std::time::Instant::now();
    let out = search(&registry, &one("slow", 300), json!({"query": "q"})).await;
    assert_eq!(out.error_code, Some(ErrorCode::ToolTimeout));
    assert!(started.elapsed() < Duration::from_secs(4));

    let registry = builtin_registry().unwrap();
    let out = search(&registry, &one("garbled", 5000), json!({"query": "q"})).await;
    assert!(
        body(&out)["error"]
            .as_str()
            .unwrap()
            .contains("searxng: malformed answer"),
        "{out:?}"
    );
}

#[tokio::test]
async fn unconfigured_search_says_what_to_set() {
    let registry = builtin_registry().unwrap();
    let out = search(
        &registry,
        &Arc::new(ToolsConfig::default()),
        json!({"query": "anything"}),
    )
    .await;
    let message = body(&out)["error"].as_str().unwrap();
    assert!(
        message.starts_with("search is not configured: set SEARXNG_URL"),
        "{message}"
    );
    assert!(message.contains("BRAVE_API_KEY") && message.contains("TAVILY_API_KEY"));
    // Issue #22: not configured is not a crash.
    assert_eq!(out.error_code, Some(ErrorCode::ToolUnavailable));
}

#[tokio::test]
async fn environment_alone_enables_backends() {
    let base = serve(searxng_router(Arc::new(AtomicUsize::new(0)))).await;
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings::load(&[dir.path().join("missing.json")])
        .unwrap()
        .with_env([("SEARXNG_URL".to_owned(), base)]);
    let (config, _) = satchel_builtins::tools_config(&settings);
    let search = config
        .sections
        .get::<satchel_builtins::search::SearchConfig>()
        .unwrap();
    assert_eq!(search.backend_names(), ["searxng"]);
    assert!(
        !format!("{search:?}").contains("http"),
        "Debug shows names only"
    );
}
