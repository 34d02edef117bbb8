//! `satchel web`: Satchel's record in a browser, served from the binary
//! (its page, script and styles are compiled in: no Node.js, no CDN, no
//! build step). Pages: conversations (search over titles, goals and
//! text), a conversation (the log as the user saw it, each tool call
//! through its tool's own markdown formatter, side conversations apart and
//! collapsible, thinking collapsed, per model call the estimate beside the
//! reported usage), code executions, memory (search with relevance,
//! forget), and the audit trail. Every page reads a JSON endpoint under
//! `/api/` that scripts can read too.
//!
//! Loopback by default; any other address needs a token, and every request
//! passes [`guard`]: the Host header, the token, and for writes this
//! origin plus a header a cross-site page cannot send.

#![deny(clippy::print_stdout, clippy::print_stderr)]

mod api;
mod chat;
pub mod guard;
pub mod render;
mod runs;
mod state;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{delete, get, post};
use satchel_host::Host;
use tokio_util::sync::CancellationToken;

pub use guard::Guard;

/// How `satchel web` serves.
#[derive(Debug, Clone)]
pub struct WebOptions {
    /// Where to listen.
    pub addr: SocketAddr,
    /// Required when `addr` is not loopback.
    pub token: Option<String>,
    /// Extra names the `Host` header may hold (a reverse proxy's).
    pub allowed_hosts: Vec<String>,
}

const INDEX: &str = include_str!("../assets/index.html");
const SCRIPT: &str = include_str!("../assets/app.js");
const STYLE: &str = include_str!("../assets/app.css");

fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, content_type)], body)
}

/// The app: pages, assets and the JSON endpoints, behind the guard.
pub fn router(host: Arc<Host>, guard: Guard) -> Router {
    let state = Arc::new(state::AppState {
        host,
        runs: runs::Runs::default(),
    });
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX) }),
        )
        .route(
            "/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/app.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE) }),
        )
        .route("/api/conversations", get(api::conversations))
        .route("/api/conversations/{id}", get(api::conversation))
        .route(
            "/api/conversations/{id}/updated",
            get(api::conversation_updated),
        )
        .route("/api/code/stats", get(api::code_stats_json))
        .route("/api/code/failures", get(api::code_failures))
        .route("/api/memory", get(api::memory))
        .route("/api/memory/{id}", delete(api::forget))
        .route("/api/audit", get(api::audit))
        .route("/api/processes", get(api::processes))
        .route("/api/processes/{id}", delete(api::kill_process))
        .route("/api/chat", post(chat::start))
        .route("/api/chat/{id}/events", get(chat::events))
        .route("/api/chat/{id}/consent", post(chat::consent))
        .route("/api/chat/{id}/stop", post(chat::stop))
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(guard),
            guard::check,
        ))
}

/// Serves until `shutdown` fires. Refuses an address off loopback without
/// a token.
pub async fn serve(
    host: Arc<Host>,
    options: WebOptions,
    shutdown: CancellationToken,
    on_ready: impl FnOnce(SocketAddr),
) -> anyhow::Result<()> {
    if !options.addr.ip().is_loopback() && options.token.as_deref().is_none_or(str::is_empty) {
        anyhow::bail!(
            "{} is reachable from other machines: give a token with --token or SATCHEL_WEB_TOKEN",
            options.addr
        );
    }
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|error| anyhow::anyhow!("cannot listen on {}: {error}", options.addr))?;
    let addr = listener.local_addr()?;
    let guard = Guard {
        addr,
        token: options.token,
        allowed_hosts: options.allowed_hosts,
    };
    on_ready(addr);
    axum::serve(listener, router(host, guard))
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await?;
    Ok(())
}
