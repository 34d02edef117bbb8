//! What the sandbox costs: the same tool call in the full sandbox
//! (Landlock, seccomp, user, mount and PID namespaces, limits) and
//! unsandboxed, interleaved in one run.
//!
//! 1. `bash` running `true`. Targets: at most 0.3 ms more at p50 (#21),
//!    0.5 ms (#30).
//! 2. `code` running Python's `print('hello')`, trace insert included.
//!    Target: at most 5 ms more at p50.
//!
//! Run with `cargo bench -p satchel-tools --bench sandbox`
//! (`SATCHEL_BENCH_ITERS` sets the runs per row, default 200 for bash and
//! 40 for code).

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Benches fail loudly by design.

use std::sync::Arc;
use std::time::{Duration, Instant};

use satchel_builtins::builtin_registry;
use satchel_builtins::code::{CodeConfig, CodeTool, OpenCodeStore};
use satchel_core::ToolCall;
use satchel_store::{SqliteStore, StoreOptions};
use satchel_tools::sandbox::Confinement;
use satchel_tools::{Registry, Settings, ToolContext, ToolsConfig};
use serde_json::json;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let iterations = |default: usize| {
        std::env::var("SATCHEL_BENCH_ITERS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let support = satchel_exec::sandbox::probe();
    println!("\nsandbox: {support:?}\n");
    println!(
        "| call                 | runs | unsandboxed p50 | sandboxed p50 | difference | ratio |"
    );
    println!(
        "|----------------------|-----:|----------------:|--------------:|-----------:|------:|"
    );

    let project = tempfile::tempdir().unwrap();
    let registry = builtin_registry().unwrap();
    let bash = ToolCall {
        id: "bench".into(),
        name: "bash".into(),
        input: json!({"command": "true"}),
    };
    let tools = Arc::new(ToolsConfig::default());
    row("bash `true`", iterations(200), |confinement| {
        let ctx = context(project.path(), tools.clone(), confinement);
        let start = Instant::now();
        let output = runtime.block_on(registry.call(&bash, &ctx));
        assert!(!output.is_error, "{output:?}");
        start.elapsed()
    });

    let dir = tempfile::tempdir().unwrap();
    let store = runtime
        .block_on(SqliteStore::open(
            &dir.path().join("bench.db"),
            StoreOptions::default(),
        ))
        .unwrap();
    let mut code_registry = Registry::new();
    code_registry
        .register(CodeTool::new(
            Some(Arc::new(OpenCodeStore(Arc::new(store)))),
            None,
        ))
        .unwrap();
    let (code, _) = CodeConfig::from_settings(&Settings::default());
    let code_tools = Arc::new(ToolsConfig::default().with_section(code));
    let python = ToolCall {
        id: "bench".into(),
        name: "code".into(),
        input: json!({"action": "execute", "language": "python", "code": "print('hello')"}),
    };
    row("code python hello", iterations(40), |confinement| {
        let ctx = context(project.path(), code_tools.clone(), confinement);
        let start = Instant::now();
        let output = runtime.block_on(code_registry.call(&python, &ctx));
        let value = output.results.structured().unwrap().clone();
        assert_eq!(value["success"], true, "{value}");
        start.elapsed()
    });
}

fn context(
    project: &std::path::Path,
    tools: Arc<ToolsConfig>,
    confinement: Confinement,
) -> ToolContext {
    ToolContext {
        confinement,
        ..ToolContext::standalone("bench", project.to_path_buf(), tools)
    }
}

/// Interleaves unsandboxed and sandboxed runs after a warm-up and prints
/// one table row.
fn row(label: &str, iterations: usize, mut run: impl FnMut(Confinement) -> Duration) {
    for _ in 0..5 {
        run(Confinement::Unconfined);
        run(Confinement::Workspace);
    }
    let (mut bare, mut boxed) = (Vec::new(), Vec::new());
    for _ in 0..iterations {
        bare.push(run(Confinement::Unconfined));
        boxed.push(run(Confinement::Workspace));
    }
    let (b, s) = (p50(bare), p50(boxed));
    let difference = s.as_secs_f64() - b.as_secs_f64();
    println!(
        "| {label:<20} | {iterations:>4} | {:>12.3} ms | {:>10.3} ms | {:>7.3} ms | {:>5.2} |",
        b.as_secs_f64() * 1e3,
        s.as_secs_f64() * 1e3,
        difference * 1e3,
        s.as_secs_f64() / b.as_secs_f64()
    );
}

fn p50(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}
