//! The HTTP rows: `tools/call` of a no-op `echo` over streamable HTTP, one
//! keep-alive reqwest client sending the same JSON-RPC bodies to each
//! server, sequentially, servers taking turns round by round:
//!
//! - Satchel, stateless (2026-07-28): each call is one self-contained POST
//!   carrying its protocol version, client info and capabilities in `_meta`;
//! - Satchel, stateful (2025-11-25): `initialize` once, then POSTs with the
//!   session id;
//! - the reference server (`server-everything streamableHttp`), stateful: it
//!   speaks no 2026-07-28, so it has no stateless row;
//! - a bare responder: this bench's own binary as an axum server that
//!   answers every POST with a canned result, no MCP library on its side.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::{ROUND, ROUNDS, WARMUP, micros, percentile};

/// Set to `http` in the environment of this bench's own child to make it
/// the bare HTTP responder.
pub(crate) const HTTP_RESPONDER: &str = "http";

/// The bare HTTP responder: prints its port, answers every POST to `/mcp`.
pub(crate) fn bare_http_responder() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("{}", listener.local_addr().unwrap().port());
        let app = axum::Router::new().route(
            "/mcp",
            axum::routing::post(|body: axum::Json<Value>| async move {
                axum::Json(json!({
                    "jsonrpc": "2.0",
                    "id": body["id"],
                    "result": {"content": [{"type": "text", "text": format!("Echo: {}", body["params"]["arguments"]["message"])}]},
                }))
            }),
        );
        axum::serve(listener, app).await.unwrap();
    });
}

/// How a peer's requests are framed.
enum Wire {
    /// 2026-07-28: everything in the request.
    Stateless,
    /// 2025-11-25: a session made by `initialize`.
    Session(String),
    /// The bare responder: the stateless body, nothing checked.
    Bare,
}

struct HttpPeer {
    label: &'static str,
    url: String,
    wire: Wire,
    child: Child,
    samples: Vec<Duration>,
}

const MESSAGE: &str = "the quick brown fox jumps over the lazy dog";

fn call_body(id: u64, stateless: bool) -> Value {
    let mut params = json!({"name": "echo", "arguments": {"message": MESSAGE}});
    if stateless {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "roundtrip-bench", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {},
        });
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

impl HttpPeer {
    /// Starts `command` and waits for the line that names its address.
    async fn start(label: &'static str, mut command: Command, wire: Wire) -> HttpPeer {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {label}: {e}"));
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let mut lines = tokio_stream_lines(stdout, stderr);
        let url = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.recv().await {
                // satchel: "serving MCP at http://ADDR/mcp"; the reference:
                // "listening on port N"; the bare responder: "N".
                if let Some(at) = line.find("http://") {
                    return line[at..].trim().to_owned();
                }
                let port = line.rsplit(' ').next().unwrap_or_default().trim();
                if (line.contains("listening on port") || label.starts_with("bare"))
                    && port.parse::<u16>().is_ok()
                {
                    return format!("http://127.0.0.1:{port}/mcp");
                }
            }
            panic!("{label} said nothing about where it listens")
        })
        .await
        .unwrap_or_else(|_| panic!("{label} did not start"));
        HttpPeer {
            label,
            url,
            wire,
            child,
            samples: Vec::new(),
        }
    }

    fn request(&self, client: &reqwest::Client, body: &Value) -> reqwest::RequestBuilder {
        let mut request = client
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json");
        match &self.wire {
            Wire::Stateless | Wire::Bare => {
                request = request
                    .header("mcp-protocol-version", "2026-07-28")
                    .header("mcp-method", "tools/call")
                    .header("mcp-name", "echo");
            }
            Wire::Session(id) => {
                request = request
                    .header("mcp-protocol-version", "2025-11-25")
                    .header("mcp-session-id", id);
            }
        }
        request.body(body.to_string())
    }

    /// Makes the session of a stateful peer.
    async fn open(&mut self, client: &reqwest::Client) {
        let Wire::Session(_) = self.wire else { return };
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "roundtrip-bench", "version": "0"}}});
        let response = client
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(initialize.to_string())
            .send()
            .await
            .unwrap();
        let id = response
            .headers()
            .get("mcp-session-id")
            .unwrap_or_else(|| panic!("{}: no session id", self.label))
            .to_str()
            .unwrap()
            .to_owned();
        let _ = response.text().await;
        self.wire = Wire::Session(id);
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let _ = self.request(client, &initialized).send().await.unwrap();
    }

    async fn call_once(&self, client: &reqwest::Client, id: u64) -> Duration {
        let body = call_body(id, !matches!(self.wire, Wire::Session(_)));
        let started = Instant::now();
        let response = self.request(client, &body).send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        let elapsed = started.elapsed();
        assert!(
            status.is_success()
                && text.contains("\"result\"")
                && !text.contains("\"isError\":true"),
            "{}: {status} {text}",
            self.label
        );
        elapsed
    }
}

/// The child's stdout and stderr lines, merged.
fn tokio_stream_lines(
    stdout: BufReader<tokio::process::ChildStdout>,
    stderr: BufReader<tokio::process::ChildStderr>,
) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let out = tx.clone();
    tokio::spawn(async move {
        let mut lines = stdout.lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = out.send(line);
        }
    });
    tokio::spawn(async move {
        let mut lines = stderr.lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = tx.send(line);
        }
    });
    rx
}

/// Measures the HTTP rows and prints their table.
pub(crate) async fn measure(satchel: &Path, project: &str, reference: &Path) {
    satchel_mcp::ensure_crypto_provider();
    let client = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(4)
        .build()
        .unwrap();
    let serve = |label| {
        let mut command = Command::new(satchel);
        super::isolate(&mut command).args([
            "-C",
            project,
            "mcp",
            "serve",
            "--http",
            "127.0.0.1:0",
            "--echo-tool",
        ]);
        HttpPeer::start(label, command, Wire::Stateless)
    };
    let stateless = serve("satchel stateless").await;
    let mut stateful = serve("satchel stateful").await;
    stateful.wire = Wire::Session(String::new());
    let mut reference_command = Command::new(reference);
    reference_command
        .arg("streamableHttp")
        .env("PORT", free_port());
    let reference = HttpPeer::start(
        "server-everything stateful",
        reference_command,
        Wire::Session(String::new()),
    )
    .await;
    let mut bare_command = Command::new(std::env::current_exe().unwrap());
    bare_command.env(super::RESPONDER_VAR, HTTP_RESPONDER);
    let bare = HttpPeer::start("bare responder (floor)", bare_command, Wire::Bare).await;

    let mut peers = [stateless, stateful, reference, bare];
    for peer in &mut peers {
        peer.open(&client).await;
    }
    let mut id = 1;
    for peer in &peers {
        for _ in 0..WARMUP {
            id += 1;
            peer.call_once(&client, id).await;
        }
    }
    for _ in 0..ROUNDS {
        for peer in &mut peers {
            for _ in 0..ROUND {
                id += 1;
                let elapsed = peer.call_once(&client, id).await;
                peer.samples.push(elapsed);
            }
        }
    }

    println!();
    println!("tools/call round trip over streamable HTTP, one keep-alive client, sequential calls");
    println!(
        "{:<28} {:>7} {:>10} {:>10} {:>10}",
        "server / wire", "calls", "p50 µs", "p90 µs", "p99 µs"
    );
    let mut p50 = Vec::new();
    for peer in &peers {
        let mut sorted = peer.samples.clone();
        sorted.sort();
        p50.push(percentile(&sorted, 0.5));
        println!(
            "{:<28} {:>7} {:>10.1} {:>10.1} {:>10.1}",
            peer.label,
            sorted.len(),
            micros(percentile(&sorted, 0.5)),
            micros(percentile(&sorted, 0.9)),
            micros(percentile(&sorted, 0.99)),
        );
    }
    let ratio = |a: usize, b: usize| p50[a].as_secs_f64() / p50[b].as_secs_f64();
    println!();
    println!(
        "p50 ratios: satchel stateless / stateful {:.3}; satchel stateful / server-everything stateful {:.3}; satchel stateless / bare {:.3}",
        ratio(0, 1),
        ratio(1, 2),
        ratio(0, 3)
    );
    for peer in peers {
        let mut child = peer.child;
        let _ = child.kill().await;
    }
}

/// A port free now, for a server that cannot pick its own.
fn free_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port().to_string()
}
