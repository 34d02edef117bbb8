//! Overhead of the `code` tool's `execute` for a trivial program (print one
//! line), per runtime, against spawning the same runtime directly with the
//! program on stdin, in the same run. The tool's side includes the
//! temporary directory, the reduced environment, the Landlock sandbox and
//! the trace insert into a real SQLite file.
//!
//! Run with `cargo bench -p satchel-tools --bench code` after
//! `scripts/install-js-runtime.sh` (for bun); `SATCHEL_BENCH_ITERS` sets
//! the runs per row (default 40).

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Benches fail loudly by design.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use satchel_builtins::code::{CodeConfig, CodeTool, OpenCodeStore, RuntimeKind};
use satchel_core::ToolCall;
use satchel_store::{SqliteStore, StoreOptions};
use satchel_tools::{Registry, Settings, ToolContext, ToolsConfig};
use serde_json::json;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let iterations: usize = std::env::var("SATCHEL_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let dir = tempfile::tempdir().unwrap();
    let store = runtime
        .block_on(SqliteStore::open(
            &dir.path().join("bench.db"),
            StoreOptions::default(),
        ))
        .unwrap();
    let mut registry = Registry::new();
    registry
        .register(CodeTool::new(
            Some(Arc::new(OpenCodeStore(Arc::new(store)))),
            None,
        ))
        .unwrap();

    let bun =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.runtimes/js/node_modules/.bin/bun");
    let path = std::env::var("PATH").unwrap_or_default();
    let env: BTreeMap<String, String> = [("PATH".to_owned(), path)].into_iter().collect();
    let (mut code, _) = CodeConfig::from_settings(&Settings::default().with_env(env));
    code.runtimes.insert("bun".into(), bun.clone());

    let rows: Vec<(&str, &str, RuntimeKind, &str)> = vec![
        ("python", "python", RuntimeKind::Python, "print('hello')"),
        ("bash", "bash", RuntimeKind::Bash, "echo hello"),
        (
            "javascript (node)",
            "javascript",
            RuntimeKind::Node,
            "console.log('hello')",
        ),
        (
            "javascript (bun)",
            "javascript",
            RuntimeKind::Bun,
            "console.log('hello')",
        ),
        (
            "typescript (bun)",
            "typescript",
            RuntimeKind::Bun,
            "const s: string = 'hello'; console.log(s)",
        ),
    ];
    println!(
        "\n`code` execute overhead, trivial program, {iterations} runs each (interleaved), trace insert included\n"
    );
    println!("| runtime            | bare p50 | tool p50 | tool - bare | ratio |");
    println!("|--------------------|---------:|---------:|------------:|------:|");
    for (label, language, kind, program) in rows {
        let mut config = code.clone();
        config.js_runtime = Some(kind);
        let Ok(resolved) = satchel_builtins::code::resolve(
            serde_json::from_value(json!(language)).unwrap(),
            Some(kind),
            &config.runtimes,
            &config.search_path,
        ) else {
            println!("| {label:<18} | (runtime not installed) |");
            continue;
        };
        if resolved.kind != kind {
            println!("| {label:<18} | (runtime not installed) |");
            continue;
        }
        let tools = Arc::new(ToolsConfig::default().with_section(config));
        let ctx = ToolContext::standalone("bench", std::env::temp_dir(), tools);
        let call = ToolCall {
            id: "bench".into(),
            name: "code".into(),
            input: json!({"action": "execute", "language": language, "code": program}),
        };
        let args = kind.stdin_args(serde_json::from_value(json!(language)).unwrap());
        let bare = || bare_run(&resolved.program, &args, program);
        let tool = || {
            let start = Instant::now();
            let output = runtime.block_on(registry.call(&call, &ctx));
            let value = output.results.structured().unwrap().clone();
            assert_eq!(value["success"], true, "{value}");
            start.elapsed()
        };
        for _ in 0..3 {
            bare();
            tool();
        }
        let (mut bare_samples, mut tool_samples) = (Vec::new(), Vec::new());
        for _ in 0..iterations {
            bare_samples.push(bare());
            tool_samples.push(tool());
        }
        let (b, t) = (p50(bare_samples), p50(tool_samples));
        println!(
            "| {label:<18} | {:>8} | {:>8} | {:>11} | {:>5.2} |",
            ms(b),
            ms(t),
            ms(t.saturating_sub(b)),
            t.as_secs_f64() / b.as_secs_f64()
        );
    }
}

fn bare_run(program: &PathBuf, args: &[String], code: &str) -> Duration {
    let start = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .current_dir(std::env::temp_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(code.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    start.elapsed()
}

fn p50(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2}ms", d.as_secs_f64() * 1000.0)
}
