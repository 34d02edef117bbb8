//! How fast the MCP client gets over a server that dies (issue #42), with
//! the default restart policy, p50 and max over [`ROUNDS`] runs each:
//!
//! - **HTTP death → the call's error**: a streamable-HTTP server killed
//!   while a long call is in flight (the reference `server-everything` on
//!   2025-11-25, the official Python SDK on 2026-07-28); from the kill to
//!   the call's error reaching the caller. Before the fix the call waited
//!   for its timeout (a minute).
//! - **stdio crash → tools callable**: a Python SDK server whose tool
//!   calls `os._exit(1)`; from the crashed call's error to the first
//!   successful call of another of its tools. Its floor, measured in the
//!   same run, is the server's own cold start (spawn to the answer of an
//!   `initialize` written to its stdin).
//!
//! ```sh
//! scripts/install-test-peers.sh        # once: the peers
//! cargo bench -p satchel-mcp --bench faults    # or bench/mcp-faults.sh
//! ```

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // A bench fails loudly and prints its table.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use satchel_core::{ToolCall, ToolOutput};
use satchel_mcp::client::remote::Lifecycle;
use satchel_mcp::client::{ManagerOptions, McpConfig, ServerConfig, TransportConfig};
use satchel_mcp::{McpManager, ServerState};
use satchel_tools::external::{SpecCache, ToolDirs};
use satchel_tools::{ExternalConfig, LiveRegistry, ToolContext, ToolsConfig};
use serde_json::{Value, json};

#[path = "../tests/support/everything_http.rs"]
mod everything_http;

/// Runs measured per row.
const ROUNDS: usize = 10;

fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.peers")
}

fn python() -> PathBuf {
    peers().join("venv/bin/python")
}

fn crashy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/crashy_server.py")
}

fn crashy_http(port: u16) -> Child {
    use std::os::unix::process::CommandExt;
    Command::new(python())
        .arg(crashy())
        .args(["http", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap()
}

fn everything(port: u16) -> Child {
    everything_http::start(&everything_http::reference_server(), port)
}

fn config(name: &str, transport: TransportConfig) -> McpConfig {
    let server = ServerConfig {
        name: name.into(),
        transport,
        startup_timeout: Duration::from_secs(20),
        call_timeout: Duration::from_secs(60),
        tool_timeouts: BTreeMap::new(),
        declared_in: PathBuf::from("mcp.json"),
        problem: None,
    };
    McpConfig {
        servers: [(name.to_owned(), server)].into(),
        warnings: vec![],
    }
}

async fn registry() -> Arc<LiveRegistry> {
    let dirs = ToolDirs {
        project: None,
        user: None,
        system: None,
    };
    Arc::new(
        LiveRegistry::load(dirs, SpecCache::in_memory(), ExternalConfig::default())
            .await
            .unwrap(),
    )
}

async fn call(live: &LiveRegistry, dir: &Path, name: &str, input: Value) -> ToolOutput {
    let ctx = ToolContext::standalone("bench", dir.to_path_buf(), Arc::new(ToolsConfig::default()));
    let call = ToolCall {
        id: "bench".into(),
        name: name.into(),
        input,
    };
    live.current().call(&call, &ctx).await
}

async fn running(manager: &McpManager) {
    let start = Instant::now();
    while manager.statuses()[0].state != ServerState::Running {
        assert!(start.elapsed() < Duration::from_secs(60), "never running");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// From an HTTP server's death to the in-flight call's error, [`ROUNDS`]
/// times: the server comes back on the same port between rounds.
async fn http_death(
    name: &str,
    lifecycle: Lifecycle,
    start: fn(u16) -> Child,
    long: (&str, Value),
) -> Vec<Duration> {
    let dir = tempfile::tempdir().unwrap();
    let port = everything_http::free_port();
    let live = registry().await;
    let transport = TransportConfig::Http {
        url: format!("http://127.0.0.1:{port}/mcp"),
        headers: BTreeMap::new(),
        lifecycle,
        oauth: Default::default(),
    };
    let mut child = start(port);
    let manager = McpManager::start(
        live.clone(),
        config(name, transport),
        ManagerOptions::default(),
    );
    let mut samples = Vec::new();
    for _ in 0..ROUNDS {
        running(&manager).await;
        let (output, killed_at) =
            tokio::join!(call(&live, dir.path(), long.0, long.1.clone()), async {
                tokio::time::sleep(Duration::from_secs(1)).await;
                everything_http::kill(child);
                Instant::now()
            });
        samples.push(killed_at.elapsed());
        assert!(output.is_error, "{output:?}");
        child = start(port);
        // Up a while, so its failures in a row start afresh.
        running(&manager).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    manager.shutdown().await;
    everything_http::kill(child);
    samples
}

/// From a stdio server's crash to its tools callable again, [`ROUNDS`]
/// times, each with a fresh manager (a server that crashed once).
async fn stdio_crash() -> Vec<Duration> {
    let dir = tempfile::tempdir().unwrap();
    let mut samples = Vec::new();
    for _ in 0..ROUNDS {
        let live = registry().await;
        let transport = TransportConfig::Stdio {
            command: python().display().to_string(),
            args: vec![crashy().display().to_string(), "stdio".into()],
            env: BTreeMap::new(),
            cwd: dir.path().to_path_buf(),
        };
        let manager = McpManager::start(
            live.clone(),
            config("crashy", transport),
            ManagerOptions::default(),
        );
        running(&manager).await;
        let crashed = call(&live, dir.path(), "crashy__crash", json!({"after": 0.2})).await;
        assert!(crashed.is_error, "{crashed:?}");
        let crash_seen = Instant::now();
        loop {
            let hello = call(&live, dir.path(), "crashy__hello", json!({})).await;
            if !hello.is_error {
                break;
            }
            assert!(crash_seen.elapsed() < Duration::from_secs(60), "never back");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        samples.push(crash_seen.elapsed());
        manager.shutdown().await;
    }
    samples
}

/// The floor: the crashy server's cold start over stdio, spawn to the
/// answer of an `initialize`.
fn cold_start() -> Duration {
    let started = Instant::now();
    let mut child = Command::new(python())
        .arg(crashy())
        .arg("stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "faults-bench", "version": "0"}}});
    writeln!(stdin, "{init}").unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let took = started.elapsed();
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.contains("\"result\""), "{line}");
    took
}

fn main() {
    tokio::runtime::Runtime::new().unwrap().block_on(measure());
}

fn row(what: &str, samples: &mut [Duration]) {
    samples.sort();
    let p50 = samples[samples.len() / 2];
    let max = samples[samples.len() - 1];
    println!(
        "| {what:<56} | {:>7.0} | {:>7.0} |",
        p50.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3
    );
}

async fn measure() {
    satchel_mcp::ensure_crypto_provider();
    assert!(python().exists(), "run scripts/install-test-peers.sh");
    let mut everything_death = http_death(
        "everything",
        Lifecycle::Initialize,
        everything,
        (
            "everything__trigger-long-running-operation",
            json!({"duration": 30, "steps": 30}),
        ),
    )
    .await;
    let mut modern_death = http_death(
        "modern",
        Lifecycle::Discover,
        crashy_http,
        ("modern__slow", json!({"seconds": 30})),
    )
    .await;
    let mut floor: Vec<Duration> = (0..ROUNDS).map(|_| cold_start()).collect();
    let mut back = stdio_crash().await;
    let floor_p50 = {
        floor.sort();
        floor[floor.len() / 2]
    };
    let back_p50 = {
        let mut sorted = back.clone();
        sorted.sort();
        sorted[sorted.len() / 2]
    };

    println!();
    println!("MCP servers dying, {ROUNDS} runs each (default restart policy)");
    println!("| {:<56} | {:>7} | {:>7} |", "measured", "p50 ms", "max ms");
    println!("|{:-<58}|{:->9}|{:->9}|", "", ":", ":");
    row(
        "HTTP death → call's error: server-everything, 2025-11-25",
        &mut everything_death,
    );
    row(
        "HTTP death → call's error: Python SDK, 2026-07-28",
        &mut modern_death,
    );
    row("stdio crash → tools callable again: Python SDK", &mut back);
    row(
        "floor: the same server's cold start (spawn → initialize)",
        &mut floor,
    );
    println!(
        "stdio: callable again {:.2}x its cold start ({:.0} ms more)",
        back_p50.as_secs_f64() / floor_p50.as_secs_f64(),
        back_p50.saturating_sub(floor_p50).as_secs_f64() * 1e3
    );
}
