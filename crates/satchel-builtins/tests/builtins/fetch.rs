//! The `fetch` tool against a local web server: a page with navigation
//! and scripts comes back as its article in markdown when private
//! addresses are allowed, and is refused when they are not; a redirect
//! from an allowed host to `127.0.0.1` is refused; the size cap and the
//! cache hold.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::response::{Html, Redirect};
use axum::routing::get;
use satchel_builtins::{builtin_registry, configure};
use satchel_core::{ErrorCode, ToolCall, ToolOutput};
use satchel_tools::{Settings, ToolContext, ToolsConfig};
use serde_json::{Value, json};

const PAGE: &str = r#"<!doctype html><html><head><title>Field notes</title>
<style>body { font-family: serif }</style>
<script>window.TRACKER = "script-must-not-appear";</script></head>
<body><nav><ul><li><a href="/">Home</a></li><li><a href="/blog">nav-must-not-appear</a></li></ul></nav>
<article><h1>Sourdough starter</h1><p>Feed it <em>daily</em> with equal weights of flour and water.</p>
<h2>Signs it is ready</h2><ol><li>It doubles in 6 hours</li><li>It smells sour</li></ol></article>
<footer>footer-must-not-appear</footer></body></html>"#;

async fn serve(hits: Arc<AtomicUsize>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let router =
        Router::new()
            .route(
                "/article",
                get(move || {
                    let hits = hits.clone();
                    async move {
                        hits.fetch_add(1, Ordering::SeqCst);
                        Html(PAGE)
                    }
                }),
            )
            .route(
                "/to-loopback",
                get(move || async move {
                    Redirect::temporary(&format!("http://127.0.0.1:{port}/article"))
                }),
            )
            .route("/big", get(|| async { "z".repeat(100_000) }))
            .route(
                "/json",
                get(|| async { axum::Json(json!({"b": [1, 2], "a": "x"})) }),
            );
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    port
}

fn config(fetch: Value) -> Arc<ToolsConfig> {
    let Value::Object(object) = json!({ "fetch": fetch }) else {
        unreachable!()
    };
    let settings = Settings::from_layers(vec![("agent.json".into(), object)]);
    let mut config = ToolsConfig::default();
    let warnings = configure(&settings, &mut config);
    assert!(warnings.is_empty(), "{warnings:?}");
    Arc::new(config)
}

async fn fetch(config: Arc<ToolsConfig>, input: Value) -> ToolOutput {
    fetch_with(&builtin_registry().unwrap(), config, input).await
}

async fn fetch_with(
    registry: &satchel_tools::Registry,
    config: Arc<ToolsConfig>,
    input: Value,
) -> ToolOutput {
    let ctx = ToolContext::standalone("call", std::env::temp_dir(), config);
    let call = ToolCall {
        id: "call".into(),
        name: "fetch".into(),
        input,
    };
    registry.call(&call, &ctx).await
}

#[tokio::test]
async fn a_local_page_is_its_article_in_markdown_when_private_addresses_are_allowed() {
    let hits = Arc::new(AtomicUsize::new(0));
    let port = serve(hits.clone()).await;
    let url = format!("http://127.0.0.1:{port}/article");
    let registry = builtin_registry().unwrap();
    let allowed = config(json!({"allowPrivate": true}));
    let out = fetch_with(&registry, allowed.clone(), json!({"url": url})).await;
    assert!(!out.is_error, "{out:?}");
    let text = out.results.to_text();
    assert!(
        text.starts_with(&format!("URL: {url}\nTitle: Field notes\n")),
        "{text}"
    );
    for expected in [
        "# Sourdough starter",
        "Feed it *daily*",
        "## Signs it is ready",
        "1. It doubles in 6 hours",
    ] {
        assert!(text.contains(expected), "{expected} missing from {text}");
    }
    for gone in [
        "script-must-not-appear",
        "nav-must-not-appear",
        "footer-must-not-appear",
        "font-family",
    ] {
        assert!(!text.contains(gone), "{gone} in {text}");
    }
    // The second fetch is the cache's.
    let again = fetch_with(&registry, allowed, json!({"url": url})).await;
    assert_eq!(again.results.to_text(), text);
    assert!(
        again.user_message.contains("from the cache"),
        "{}",
        again.user_message
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    let refused = fetch(config(json!({})), json!({"url": url})).await;
    assert_eq!(
        refused.error_code,
        Some(ErrorCode::PermissionDenied),
        "{refused:?}"
    );
    let message = refused.results.structured().unwrap()["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("loopback") && message.contains("allowHosts"),
        "{message}"
    );
    // A name that resolves to loopback is refused on the address it resolves to.
    let by_name = fetch(
        config(json!({})),
        json!({"url": format!("http://localhost:{port}/article")}),
    )
    .await;
    assert_eq!(
        by_name.error_code,
        Some(ErrorCode::PermissionDenied),
        "{by_name:?}"
    );
    let metadata = fetch(
        config(json!({})),
        json!({"url": "http://169.254.169.254/latest/meta-data/"}),
    )
    .await;
    assert_eq!(
        metadata.error_code,
        Some(ErrorCode::PermissionDenied),
        "{metadata:?}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_redirect_to_loopback_from_an_allowed_host_is_refused() {
    let hits = Arc::new(AtomicUsize::new(0));
    let port = serve(hits.clone()).await;
    // `localhost` is allowed; the address it redirects to is not.
    let only_localhost = config(json!({"allowHosts": ["localhost"]}));
    let out = fetch(
        only_localhost,
        json!({"url": format!("http://localhost:{port}/to-loopback")}),
    )
    .await;
    assert_eq!(out.error_code, Some(ErrorCode::PermissionDenied), "{out:?}");
    let message = out.results.structured().unwrap()["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("redirect") && message.contains("127.0.0.1"),
        "{message}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn the_size_cap_and_max_length_cut_with_a_note_and_json_is_pretty() {
    let port = serve(Arc::new(AtomicUsize::new(0))).await;
    let capped = config(json!({"allowPrivate": true, "maxBytes": 1000}));
    let out = fetch(
        capped.clone(),
        json!({"url": format!("http://127.0.0.1:{port}/big")}),
    )
    .await;
    let text = out.results.to_text();
    assert!(
        text.contains(&"z".repeat(1000)) && !text.contains(&"z".repeat(1001)),
        "{}",
        text.len()
    );
    assert!(text.contains("cut at 1000 bytes"), "{text}");
    let short = fetch(
        capped.clone(),
        json!({"url": format!("http://127.0.0.1:{port}/big?x=1"), "max_length": 10}),
    )
    .await;
    assert!(
        short
            .results
            .to_text()
            .contains("Only the first 10 of 1000 characters")
    );
    let data = fetch(
        capped,
        json!({"url": format!("http://127.0.0.1:{port}/json")}),
    )
    .await;
    assert!(
        data.results.to_text().contains("{\n  \"b\": [\n    1,"),
        "{}",
        data.results.to_text()
    );
    let not_web = fetch(config(json!({})), json!({"url": "file:///etc/passwd"})).await;
    assert_eq!(not_web.error_code, Some(ErrorCode::PermissionDenied));
}
