//! The web view's server time for a big conversation: 500 statements and
//! 2,000 tool calls (each with a bash-like result of 20 lines), recorded
//! through the store as the agent records them. Measured over HTTP on
//! loopback: the conversation's JSON (the log joined with the calls, each
//! rendered by its tool's formatter and made inert), the page itself, and
//! as the baseline in the same run the store's own read of everything
//! (`dump_conversation`), which the endpoint cannot avoid.
//!
//! `cargo bench -p satchel-web --bench render` (target: the JSON under
//! 100 ms p50 on this machine).

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use satchel_core::{ToolCall, ToolOutput, ToolResults};
use satchel_host::{Host, HostOptions, HostPaths};
use satchel_store::{
    AuditSource, ConversationStore as _, LogKind, LogStore as _, NewConversation, NewLogEntry,
    NewStatement, NewToolCall, StatementStore as _, Timestamp, ToolCallStore as _,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const STATEMENTS: u32 = 500;
const CALLS_PER_STATEMENT: u32 = 4;
const ROUNDS: usize = 30;

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn seed(host: &Host) -> String {
    let store = host.store.get().await.unwrap().clone();
    let conversation = store
        .create_conversation(NewConversation {
            title: Some("A long working session".into()),
            goal: Some("refactor the handlers".into()),
        })
        .await
        .unwrap()
        .id;
    for seq in 1..=STATEMENTS {
        let statement = store
            .add_statement(NewStatement {
                conversation_id: conversation.clone(),
                objective: Some(format!("look at handler {seq}")),
            })
            .await
            .unwrap()
            .id;
        let entry = |kind, text: String, call: Option<String>| NewLogEntry {
            statement_id: Some(statement.clone()),
            call_id: call,
            ..NewLogEntry::new(&conversation, kind, text)
        };
        store
            .append_log_entry(entry(
                LogKind::User,
                format!("Where is handler {seq} used?"),
                None,
            ))
            .await
            .unwrap();
        let mut calls = Vec::new();
        for n in 0..CALLS_PER_STATEMENT {
            let call_id = format!("call_{seq}_{n}");
            let command = format!("grep -rn 'handler_{seq}' src/ | head -20  # {n}");
            let stdout: String = (0..20)
                .map(|line| {
                    format!(
                        "src/module_{seq}/file_{line}.rs:{}: handler_{seq}(ctx)?;\n",
                        line * 7
                    )
                })
                .collect();
            store
                .append_log_entry(entry(
                    LogKind::ToolUse,
                    format!("$ {command}"),
                    Some(call_id.clone()),
                ))
                .await
                .unwrap();
            store
                .append_log_entry(entry(
                    LogKind::ToolResult,
                    "20 lines".into(),
                    Some(call_id.clone()),
                ))
                .await
                .unwrap();
            calls.push(NewToolCall {
                source: AuditSource::Repl,
                caller: None,
                conversation_id: Some(conversation.clone()),
                statement_id: Some(statement.clone()),
                turn: Some(1),
                call: ToolCall {
                    id: call_id,
                    name: "bash".into(),
                    input: json!({"command": command}),
                },
                output: ToolOutput::success(
                    ToolResults::json(json!({
                        "stdout": stdout, "stderr": "", "exit_code": 0, "truncated": false,
                        "timed_out": false, "duration_ms": 12, "sandbox": "landlock"
                    })),
                    "exit 0",
                ),
                decision: Some("allow by rule bash".into()),
                started_at: Timestamp::from_millis(0),
                finished_at: Timestamp::from_millis(12),
                duration_us: 12_000,
            });
        }
        store.record_tool_calls(calls).await.unwrap();
        store
            .append_log_entry(entry(
                LogKind::Assistant,
                format!("Handler {seq} is used in **20** places; see `src/module_{seq}`."),
                None,
            ))
            .await
            .unwrap();
    }
    conversation
}

/// The page's load time in headless chromium, when chromium and
/// playwright-core (`scripts/install-test-peers.sh`) are there.
async fn page_load(url: &str) {
    let playwright = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.peers/node_modules/playwright-core");
    if !playwright.exists() || !std::path::Path::new("/usr/bin/chromium").exists() {
        println!(
            "page load in chromium: skipped (needs chromium and .peers/node_modules/playwright-core)"
        );
        return;
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/page_load.js");
    // Every statement shows its user message, its answer and its calls.
    let events = (STATEMENTS * (2 + CALLS_PER_STATEMENT)).to_string();
    let url = url.to_owned();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new("node")
            .arg(script)
            .arg(playwright)
            .arg(url)
            .arg(events)
            .arg("5")
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).unwrap_or(serde_json::Value::Null);
    let Some(times) = report["times"].as_array() else {
        println!("page load in chromium: failed: {report}");
        return;
    };
    let mut times: Vec<Duration> = times
        .iter()
        .filter_map(serde_json::Value::as_u64)
        .map(Duration::from_millis)
        .collect();
    let (p50, p95) = (percentile(&mut times, 0.5), percentile(&mut times, 0.95));
    println!(
        "{:42} {:>9.1} {:>9.1}   (navigation to every event on screen, 5 loads)",
        "the page in headless chromium",
        ms(p50),
        ms(p95)
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        satchel_host::trust::init(None);
        let host = Arc::new(
            Host::open(HostOptions {
                root: dir.path().join("project"),
                db: Some(dir.path().join("satchel.db")),
                paths: HostPaths {
                    config: Some(dir.path().join("config")),
                    cache: Some(dir.path().join("cache")),
                    data: Some(dir.path().join("data")),
                    system_tools: None,
                },
                ..HostOptions::default()
            })
            .unwrap(),
        );
        let seeding = Instant::now();
        let conversation = seed(&host).await;
        println!(
            "{STATEMENTS} statements, {} tool calls recorded in {:.1} s\n",
            STATEMENTS * CALLS_PER_STATEMENT,
            seeding.elapsed().as_secs_f64()
        );
        let stop = CancellationToken::new();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let server_host = host.clone();
        let shutdown = stop.clone();
        tokio::spawn(async move {
            satchel_web::serve(
                server_host,
                satchel_web::WebOptions {
                    addr: "127.0.0.1:0".parse().unwrap(),
                    token: None,
                    allowed_hosts: Vec::new(),
                },
                shutdown,
                move |addr| {
                    let _ = tx.send(addr);
                },
            )
            .await
            .unwrap();
        });
        let addr = rx.await.unwrap();
        let http = satchel_http::client_builder().unwrap().build().unwrap();
        let store = host.store.get().await.unwrap().clone();

        let (mut dump, mut json_times, mut page) = (Vec::new(), Vec::new(), Vec::new());
        let mut bytes = 0;
        for round in 0..ROUNDS + 3 {
            let started = Instant::now();
            std::hint::black_box(store.dump_conversation(&conversation).await.unwrap());
            let dumped = started.elapsed();

            let started = Instant::now();
            let body = http
                .get(format!("http://{addr}/api/conversations/{conversation}"))
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            let answered = started.elapsed();
            bytes = body.len();

            let started = Instant::now();
            let html = http
                .get(format!("http://{addr}/"))
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            std::hint::black_box(html);
            let paged = started.elapsed();
            if round >= 3 {
                dump.push(dumped);
                json_times.push(answered);
                page.push(paged);
            }
        }
        println!("{:42} {:>9} {:>9}", "", "p50 ms", "p95 ms");
        for (name, samples) in [
            ("store read of the conversation (baseline)", &mut dump),
            ("GET /api/conversations/ID (JSON)", &mut json_times),
            ("GET / (the page)", &mut page),
        ] {
            let (p50, p95) = (percentile(samples, 0.5), percentile(samples, 0.95));
            println!("{name:42} {:>9.1} {:>9.1}", ms(p50), ms(p95));
        }
        let base = percentile(&mut dump, 0.5);
        let json_p50 = percentile(&mut json_times, 0.5);
        println!(
            "\nthe JSON ({:.1} MB) takes {:.2}x the store's read; target under 100 ms p50: {}",
            bytes as f64 / 1e6,
            ms(json_p50) / ms(base).max(0.001),
            if ms(json_p50) < 100.0 {
                "met"
            } else {
                "NOT met"
            }
        );
        page_load(&format!("http://{addr}/#/c/{conversation}")).await;
        stop.cancel();
        host.close().await;
    });
}
