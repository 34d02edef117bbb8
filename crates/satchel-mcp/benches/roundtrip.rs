//! `tools/call` round-trip latency over stdio, from one rmcp client, to
//! `satchel mcp serve` and to the reference TypeScript server
//! (`@modelcontextprotocol/server-everything`), in the same run.
//!
//! ```sh
//! scripts/install-test-peers.sh                  # once: the reference server
//! cargo bench -p satchel-mcp --bench roundtrip
//! ```
//!
//! Both sides answer an `echo` tool: the reference server's own, and
//! Satchel's diagnostic `echo` (`satchel mcp serve --echo-tool`), which goes
//! through exactly what any Satchel tool goes through over MCP (framing,
//! lookup, schema validation, the observer path, result conversion) with a
//! body that costs nothing, like the reference's. A third row calls
//! Satchel's `bash` with `true` to show what a real process costs; it is
//! not part of the ratio.
//!
//! A last row measures the floor: this bench itself as a bare responder
//! that parses each request and writes a canned answer, no MCP library on
//! its side, so what it shows is the client's and the pipes' share.
//!
//! Then the same over streamable HTTP ([`http`]): Satchel stateless
//! (2026-07-28) and stateful (2025-11-25), the reference server stateful,
//! and a bare HTTP responder; and what progress notifications cost on a
//! call that prints 1 GiB ([`progress`]).
//!
//! The bash rows (issue #47): `bash` `true` in the sandbox and with
//! `--mode trust` (unsandboxed), each in a running `satchel mcp serve`,
//! interleaved; and the sandboxed spawn alone (the same `bash` tool called
//! in this process, no MCP, no record). The floor of a bash call over MCP
//! is the bare responder's round trip plus that spawn.
//!
//! `SATCHEL_ROUNDTRIP_ONLY=stdio` stops after the stdio rows
//! (`bench/cost-per-call.sh` sets it).
//!
//! The Satchel binary is `$SATCHEL_BIN`, else `satchel` in the release
//! directory of the target directory this bench runs from, which is built
//! (`cargo build --release -p satchel-cli`) when missing.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // A bench fails loudly and prints its table.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

#[path = "../tests/support/everything_http.rs"]
mod everything_http;
#[path = "roundtrip/http.rs"]
mod http;
#[path = "roundtrip/progress.rs"]
mod progress;

/// Calls per round; the servers take turns, round by round.
const ROUND: usize = 250;
/// Rounds per server.
const ROUNDS: usize = 8;
/// Calls before measuring, per server.
const WARMUP: usize = 300;
/// Calls of the process-spawning `bash` row.
const BASH_CALLS: usize = 200;
/// Set in the environment of this bench's own child to make it the bare responder.
const RESPONDER_VAR: &str = "SATCHEL_ROUNDTRIP_RESPONDER";

/// The floor: answers each JSON-RPC request with a canned result, as fast
/// as blocking stdio allows. Given a project directory as its argument, it
/// also has a `bash` tool that runs the sandboxed spawn alone ([`SpawnAlone`])
/// before answering: the client and the spawn together, as in a real call,
/// with no MCP library and no record.
fn bare_responder() {
    use std::io::{BufRead, Write};
    let spawner = std::env::args_os().nth(1).map(|project| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        (runtime, SpawnAlone::new(Path::new(&project)))
    });
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return };
        let Ok(request) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = request.get("id") else {
            continue;
        };
        let result = match request["method"].as_str() {
            Some("initialize") => json!({
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "bare", "version": "0"},
            }),
            Some("tools/list") => json!({"tools": [
                {"name": "echo", "inputSchema": {"type": "object"}},
                {"name": "bash", "inputSchema": {"type": "object"}},
            ]}),
            Some("tools/call") if request["params"]["name"] == "bash" => {
                let (runtime, spawn) = spawner.as_ref().expect("started with a project");
                runtime.block_on(spawn.call_once());
                json!({"content": [{"type": "text", "text": "{\"stdout\":\"\",\"stderr\":\"\",\"exit_code\":0}"}]})
            }
            Some("tools/call") => {
                json!({"content": [{"type": "text", "text": format!("Echo: {}", request["params"]["arguments"]["message"])}]})
            }
            _ => json!({}),
        };
        let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
        if writeln!(stdout, "{answer}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            return;
        }
    }
}

struct Peer {
    label: &'static str,
    client: RunningService<RoleClient, ()>,
    child: Child,
    tool: &'static str,
    arguments: Value,
    samples: Vec<Duration>,
}

impl Peer {
    async fn start(
        label: &'static str,
        program: &Path,
        args: &[&str],
        tool: &'static str,
        arguments: Value,
    ) -> Peer {
        let mut child = isolate(&mut Command::new(program))
            .args(args)
            .env(
                RESPONDER_VAR,
                if [BARE, BARE_SPAWN].contains(&label) {
                    "1"
                } else {
                    ""
                },
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        let transport = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let client = ().serve(transport).await.unwrap();
        let tools = client.list_all_tools().await.unwrap();
        assert!(
            tools.iter().any(|t| t.name == tool),
            "{label} has no tool `{tool}`"
        );
        Peer {
            label,
            client,
            child,
            tool,
            arguments,
            samples: Vec::new(),
        }
    }

    async fn call_once(&self) -> Duration {
        let Value::Object(arguments) = self.arguments.clone() else {
            unreachable!()
        };
        let params = CallToolRequestParams::new(self.tool).with_arguments(arguments);
        let started = Instant::now();
        let result = tokio::time::timeout(Duration::from_secs(30), self.client.call_tool(params))
            .await
            .expect("call timed out")
            .unwrap();
        let elapsed = started.elapsed();
        assert_ne!(result.is_error, Some(true), "{}: {result:?}", self.label);
        elapsed
    }

    async fn run(&mut self, calls: usize) {
        for _ in 0..calls {
            let elapsed = self.call_once().await;
            self.samples.push(elapsed);
        }
    }

    async fn stop(mut self) {
        let _ = self.client.close().await;
        let _ = self.child.kill().await;
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The release `satchel`, built when missing.
fn satchel_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("SATCHEL_BIN") {
        return PathBuf::from(path);
    }
    // This bench runs from <target>/release/deps/.
    let exe = std::env::current_exe().unwrap();
    let release = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    let binary = release.join("satchel");
    if !binary.exists() {
        println!("building the release satchel binary (cargo build --release -p satchel-cli)...");
        let status = std::process::Command::new(env!("CARGO"))
            .args([
                "build",
                "--release",
                "-p",
                "satchel-cli",
                "--bin",
                "satchel",
            ])
            .env("CARGO_TARGET_DIR", release.parent().unwrap())
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .status()
            .unwrap();
        assert!(status.success(), "building satchel failed");
    }
    binary
}

/// The `bash` tool called in this process in the full sandbox, the way a
/// server runs it, without MCP or a record: the spawn's own cost.
struct SpawnAlone {
    registry: satchel_tools::Registry,
    ctx: satchel_tools::ToolContext,
    call: satchel_core::ToolCall,
}

impl SpawnAlone {
    fn new(project: &Path) -> SpawnAlone {
        let ctx = satchel_tools::ToolContext {
            confinement: satchel_tools::sandbox::Confinement::Workspace,
            ..satchel_tools::ToolContext::standalone(
                "bench",
                project.to_path_buf(),
                std::sync::Arc::new(satchel_tools::ToolsConfig::default()),
            )
        };
        SpawnAlone {
            registry: satchel_builtins::builtin_registry().unwrap(),
            ctx,
            call: satchel_core::ToolCall {
                id: "bench".into(),
                name: "bash".into(),
                input: json!({"command": "true"}),
            },
        }
    }

    async fn call_once(&self) -> Duration {
        let started = Instant::now();
        let output = self.registry.call(&self.call, &self.ctx).await;
        let elapsed = started.elapsed();
        assert!(!output.is_error, "{output:?}");
        elapsed
    }
}

/// The label of the floor row.
const BARE: &str = "bare responder (floor)";
/// The label of the bare responder whose `bash` runs the spawn alone.
const BARE_SPAWN: &str = "bare responder + spawn";

/// Gives a child its own configuration, data and cache directories and
/// database (under one temporary directory for the whole run), so the
/// bench never writes into the user's record.
fn isolate(command: &mut Command) -> &mut Command {
    static STATE: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let state = STATE.get_or_init(|| tempfile::tempdir().unwrap()).path();
    command
        .env("XDG_CONFIG_HOME", state.join("config"))
        .env("XDG_DATA_HOME", state.join("data"))
        .env("XDG_CACHE_HOME", state.join("cache"))
        .env("SATCHEL_DB", state.join("data/satchel.db"))
        .env("SATCHEL_MODEL_FETCH", "never")
}

fn main() {
    match std::env::var(RESPONDER_VAR).as_deref() {
        Ok("1") => return bare_responder(),
        Ok(http::HTTP_RESPONDER) => return http::bare_http_responder(),
        _ => {}
    }
    tokio::runtime::Runtime::new().unwrap().block_on(measure());
}

async fn measure() {
    let satchel = satchel_binary();
    let project = tempfile::tempdir().unwrap();
    let project_arg = project.path().display().to_string();
    let message = json!({"message": "the quick brown fox jumps over the lazy dog"});

    let mut satchel_echo = Peer::start(
        "satchel echo",
        &satchel,
        &["-C", &project_arg, "mcp", "serve", "--echo-tool"],
        "echo",
        message.clone(),
    )
    .await;
    let mut reference = Peer::start(
        "server-everything echo",
        &everything_http::reference_server(),
        &["stdio"],
        "echo",
        message,
    )
    .await;
    let mut bare = Peer::start(
        BARE,
        &std::env::current_exe().unwrap(),
        &[],
        "echo",
        json!({"message": "the quick brown fox jumps over the lazy dog"}),
    )
    .await;
    for peer in [&satchel_echo, &reference, &bare] {
        for _ in 0..WARMUP {
            peer.call_once().await;
        }
    }
    for _ in 0..ROUNDS {
        satchel_echo.run(ROUND).await;
        reference.run(ROUND).await;
        bare.run(ROUND).await;
    }
    let mut satchel_bash = Peer::start(
        "satchel bash `true`",
        &satchel,
        &["-C", &project_arg, "mcp", "serve"],
        "bash",
        json!({"command": "true"}),
    )
    .await;
    let mut satchel_trust = Peer::start(
        "  the same, --mode trust",
        &satchel,
        &["-C", &project_arg, "mcp", "serve", "--mode", "trust"],
        "bash",
        json!({"command": "true"}),
    )
    .await;
    let mut bare_spawn = Peer::start(
        BARE_SPAWN,
        &std::env::current_exe().unwrap(),
        &[&project_arg],
        "bash",
        json!({"command": "true"}),
    )
    .await;
    let spawn_alone = SpawnAlone::new(project.path());
    for _ in 0..BASH_CALLS / 4 {
        satchel_bash.call_once().await;
        satchel_trust.call_once().await;
        bare_spawn.call_once().await;
        spawn_alone.call_once().await;
    }
    let mut spawn_samples = Vec::new();
    for _ in 0..BASH_CALLS / 10 {
        satchel_bash.run(10).await;
        satchel_trust.run(10).await;
        bare_spawn.run(10).await;
        for _ in 0..10 {
            spawn_samples.push(spawn_alone.call_once().await);
        }
    }

    println!();
    println!("tools/call round trip over stdio, one rmcp client, sequential calls");
    println!(
        "{:<26} {:>7} {:>10} {:>10} {:>10}",
        "server / tool", "calls", "p50 µs", "p90 µs", "p99 µs"
    );
    let mut p50 = Vec::new();
    for peer in [
        &satchel_echo,
        &reference,
        &satchel_bash,
        &bare,
        &satchel_trust,
        &bare_spawn,
    ] {
        let mut sorted = peer.samples.clone();
        sorted.sort();
        p50.push(percentile(&sorted, 0.5));
        println!(
            "{:<26} {:>7} {:>10.1} {:>10.1} {:>10.1}",
            peer.label,
            sorted.len(),
            micros(percentile(&sorted, 0.5)),
            micros(percentile(&sorted, 0.9)),
            micros(percentile(&sorted, 0.99)),
        );
    }
    spawn_samples.sort();
    let spawn = percentile(&spawn_samples, 0.5);
    println!(
        "{:<26} {:>7} {:>10.1} {:>10.1} {:>10.1}",
        "sandboxed spawn alone",
        spawn_samples.len(),
        micros(spawn),
        micros(percentile(&spawn_samples, 0.9)),
        micros(percentile(&spawn_samples, 0.99)),
    );
    let ratio = p50[0].as_secs_f64() / p50[1].as_secs_f64();
    println!();
    println!(
        "p50 ratio satchel echo / server-everything echo: {ratio:.3} (target <= 1.0: {})",
        if ratio <= 1.0 { "met" } else { "NOT met" }
    );
    println!(
        "p50 ratio satchel echo / bare responder: {:.3}",
        p50[0].as_secs_f64() / p50[3].as_secs_f64()
    );
    let floor = p50[3] + spawn;
    let over_floor = p50[2].as_secs_f64() / floor.as_secs_f64();
    println!(
        "p50 ratio satchel bash `true` / (bare responder + sandboxed spawn alone = {:.1} µs): {over_floor:.3} (target <= 1.1: {})",
        micros(floor),
        if over_floor <= 1.1 { "met" } else { "NOT met" }
    );
    println!(
        "p50 ratio satchel bash `true` / bare responder + spawn, one round trip: {:.3} (the client's share cold after bash ran, as in satchel's row)",
        p50[2].as_secs_f64() / p50[5].as_secs_f64()
    );
    let boxed = p50[2].as_secs_f64() / p50[4].as_secs_f64();
    println!(
        "p50 ratio sandboxed / unsandboxed bash `true` in mcp serve: {boxed:.3} (+{:.1} µs; target +500 µs / 1.3)",
        micros(p50[2].saturating_sub(p50[4]))
    );
    let above = |p: Duration| micros(p.saturating_sub(p50[3]));
    println!(
        "above the floor (server-side share of p50): satchel echo {:.1} µs, server-everything echo {:.1} µs",
        above(p50[0]),
        above(p50[1])
    );
    satchel_echo.stop().await;
    reference.stop().await;
    satchel_bash.stop().await;
    satchel_trust.stop().await;
    bare.stop().await;
    bare_spawn.stop().await;
    if std::env::var("SATCHEL_ROUNDTRIP_ONLY").is_ok_and(|only| only == "stdio") {
        return;
    }

    http::measure(&satchel, &project_arg, &everything_http::reference_server()).await;
    let progress_project = tempfile::tempdir().unwrap();
    progress::measure(&satchel, progress_project.path()).await;
}
