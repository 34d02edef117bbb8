//! How long a remote MCP server's tools take to be callable again after the
//! server restarts, against how long the server itself takes to come up,
//! in the same run.
//!
//! The reference server (`server-everything streamableHttp`) is started,
//! imported by an [`McpManager`] with the default restart policy, then
//! killed; a call finds it gone (which starts the reconnection), and it is
//! started again on the same port. Two figures per round:
//!
//! - **server up**: from the restart to the server answering an HTTP
//!   `initialize` of this bench's own (the floor: no client can be faster);
//! - **tools callable**: from the restart to Satchel's first successful
//!   call of its `echo` through the registry.
//!
//! ```sh
//! scripts/install-test-peers.sh        # once: the reference server
//! cargo bench -p satchel-mcp --bench reconnect
//! ```

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // A bench fails loudly and prints its table.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use satchel_core::ToolCall;
use satchel_mcp::McpManager;
use satchel_mcp::client::{ManagerOptions, McpConfig, ServerConfig, TransportConfig};
use satchel_tools::external::{SpecCache, ToolDirs};
use satchel_tools::{ExternalConfig, LiveRegistry, ToolContext, ToolsConfig};
use serde_json::json;

#[path = "../tests/support/everything_http.rs"]
mod everything_http;

/// Restarts measured.
const ROUNDS: usize = 5;

/// Whether the server answers an `initialize` now.
async fn answers(client: &reqwest::Client, url: &str) -> bool {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "reconnect-bench", "version": "0"}}});
    client
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .is_ok_and(|response| response.status().is_success())
}

async fn call_echo(live: &LiveRegistry, dir: &Path) -> bool {
    let ctx = ToolContext::standalone("bench", dir.to_path_buf(), Arc::new(ToolsConfig::default()));
    let call = ToolCall {
        id: "bench".into(),
        name: "everything__echo".into(),
        input: json!({"message": "back?"}),
    };
    !live.current().call(&call, &ctx).await.is_error
}

fn main() {
    tokio::runtime::Runtime::new().unwrap().block_on(measure());
}

async fn measure() {
    satchel_mcp::ensure_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    let port = everything_http::free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let dirs = ToolDirs {
        project: None,
        user: None,
        system: None,
    };
    let live = Arc::new(
        LiveRegistry::load(dirs, SpecCache::in_memory(), ExternalConfig::default())
            .await
            .unwrap(),
    );
    let server = ServerConfig {
        name: "everything".into(),
        transport: TransportConfig::Http {
            url: url.clone(),
            headers: BTreeMap::new(),
            lifecycle: Default::default(),
            oauth: Default::default(),
        },
        startup_timeout: Duration::from_secs(20),
        call_timeout: Duration::from_secs(20),
        tool_timeouts: BTreeMap::new(),
        declared_in: PathBuf::from("mcp.json"),
        problem: None,
    };
    let config = McpConfig {
        servers: [("everything".to_owned(), server)].into(),
        warnings: vec![],
    };
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut child = everything_http::start(&everything_http::reference_server(), port);
    let manager = McpManager::start(live.clone(), config, ManagerOptions::default());
    let poll = Duration::from_millis(10);
    while !call_echo(&live, dir.path()).await {
        tokio::time::sleep(poll).await;
    }
    let mut server_up = Vec::new();
    let mut callable = Vec::new();
    for _ in 0..ROUNDS {
        // A server that ran a while (a flapping one backs off instead).
        tokio::time::sleep(Duration::from_secs(3)).await;
        everything_http::kill(child);
        // A call finds it gone: the supervisor starts reconnecting.
        assert!(!call_echo(&live, dir.path()).await);
        let restarted = Instant::now();
        child = everything_http::start(&everything_http::reference_server(), port);
        let mut up = None;
        let mut ready = None;
        while up.is_none() || ready.is_none() {
            if up.is_none() && answers(&client, &url).await {
                up = Some(restarted.elapsed());
            }
            if ready.is_none() && call_echo(&live, dir.path()).await {
                ready = Some(restarted.elapsed());
            }
            assert!(
                restarted.elapsed() < Duration::from_secs(60),
                "never came back"
            );
            tokio::time::sleep(poll).await;
        }
        server_up.push(up.unwrap());
        callable.push(ready.unwrap());
    }
    manager.shutdown().await;
    everything_http::kill(child);

    let median = |samples: &mut Vec<Duration>| {
        samples.sort();
        samples[samples.len() / 2]
    };
    let (up, ready) = (median(&mut server_up), median(&mut callable));
    println!();
    println!("remote MCP server restarted {ROUNDS} times (default restart policy), medians");
    println!("| from the restart to            | ms     |");
    println!("|--------------------------------|-------:|");
    println!(
        "| the server answering (floor)   | {:>6.0} |",
        up.as_secs_f64() * 1e3
    );
    println!(
        "| Satchel's tools callable again | {:>6.0} |",
        ready.as_secs_f64() * 1e3
    );
    println!(
        "ratio: {:.2} ({:.0} ms after the server is up)",
        ready.as_secs_f64() / up.as_secs_f64(),
        (ready.saturating_sub(up)).as_secs_f64() * 1e3
    );
}
