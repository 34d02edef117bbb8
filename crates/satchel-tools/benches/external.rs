//! External-tool figures, each against a baseline in the same run:
//!
//! 1. Call overhead: a tool that echoes its input (`cat`), called through
//!    the registry (validation, runner, JSON parsing), against a bare spawn
//!    of the same script with the same stdin.
//! 2. Discovery of 50 tools: concurrent `--schema` probes against probing
//!    them one by one, and against a warm spec cache.
//!
//! Run with `cargo bench -p satchel-tools --bench external`.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Benches fail loudly by design.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use satchel_core::ToolCall;
use satchel_tools::external::{SpecCache, ToolDirs, discover};
use satchel_tools::{ExternalConfig, LiveRegistry, ToolContext, ToolsConfig};
use serde_json::json;

const ECHO_TOOL: &str = "#!/bin/bash\nif [ \"$1\" = --schema ]; then echo '{\"description\": \"echo\", \"inputSchema\": {\"type\": \"object\"}}'; exit 0; fi\ncat\n";

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let iterations = std::env::var("SATCHEL_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    call_overhead(&runtime, iterations);
    discovery(&runtime);
}

fn install(dir: &Path, file: &str) {
    let path = dir.join(file);
    std::fs::write(&path, ECHO_TOOL).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn call_overhead(runtime: &tokio::runtime::Runtime, iterations: usize) {
    let dir = tempfile::tempdir().unwrap();
    install(dir.path(), "echo-tool");
    let dirs = ToolDirs {
        project: Some(dir.path().to_path_buf()),
        user: None,
        system: None,
    };
    let live = runtime
        .block_on(LiveRegistry::load(
            dirs,
            SpecCache::in_memory(),
            ExternalConfig::default(),
        ))
        .unwrap();
    let registry = live.current();
    let ctx = ToolContext::standalone(
        "bench",
        std::env::temp_dir(),
        Arc::new(ToolsConfig::default()),
    );
    let input = json!({"text": "hello", "n": 3});
    let call = ToolCall {
        id: "bench".into(),
        name: "echo".into(),
        input: input.clone(),
    };
    let stdin = input.to_string();
    let script = dir.path().join("echo-tool");

    let bare = || {
        let start = Instant::now();
        let mut child = Command::new(&script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success());
        start.elapsed()
    };
    let tool = || {
        let start = Instant::now();
        let output = runtime.block_on(registry.call(&call, &ctx));
        assert!(!output.is_error, "{output:?}");
        start.elapsed()
    };
    for _ in 0..20 {
        bare();
        tool();
    }
    let (mut bare_samples, mut tool_samples) = (Vec::new(), Vec::new());
    for _ in 0..iterations {
        bare_samples.push(bare());
        tool_samples.push(tool());
    }
    let (bare_p50, tool_p50) = (p50(bare_samples), p50(tool_samples));
    println!("\nExternal tool call, echo script, {iterations} runs each (interleaved)\n");
    println!("| what                                   |     p50 | ratio |");
    println!("|----------------------------------------|--------:|------:|");
    println!(
        "| bare spawn of the script, stdin piped  | {:>7} |  1.00 |",
        ms(bare_p50)
    );
    println!(
        "| registry call (validate, run, parse)   | {:>7} | {:>5.2} |",
        ms(tool_p50),
        tool_p50.as_secs_f64() / bare_p50.as_secs_f64()
    );
}

fn discovery(runtime: &tokio::runtime::Runtime) {
    let dir = tempfile::tempdir().unwrap();
    for n in 0..50 {
        install(dir.path(), &format!("tool-{n:02}"));
    }
    let dirs = ToolDirs {
        project: Some(dir.path().to_path_buf()),
        user: None,
        system: None,
    };
    let time = |config: &ExternalConfig, cache: &SpecCache| {
        let start = Instant::now();
        let found = runtime.block_on(discover(&dirs, cache, config));
        assert_eq!(found.tools.len(), 50);
        start.elapsed()
    };
    let concurrent = ExternalConfig::default();
    let sequential = ExternalConfig {
        probe_concurrency: 1,
        ..ExternalConfig::default()
    };
    let warm = SpecCache::in_memory();
    time(&concurrent, &warm);
    let (mut seq, mut conc, mut cached) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        seq.push(time(&sequential, &SpecCache::in_memory()));
        conc.push(time(&concurrent, &SpecCache::in_memory()));
        cached.push(time(&concurrent, &warm));
    }
    let (seq, conc, cached) = (p50(seq), p50(conc), p50(cached));
    println!("\nDiscovery of 50 tools, 5 runs each, median\n");
    println!("| what                                        |   median | vs one-by-one |");
    println!("|---------------------------------------------|---------:|--------------:|");
    for (name, d) in [
        ("probes one by one (probeConcurrency 1)", seq),
        ("concurrent probes (probeConcurrency 16)", conc),
        ("warm spec cache (no probes)", cached),
    ] {
        println!(
            "| {name:<43} | {:>8} | {:>13.3} |",
            ms(d),
            d.as_secs_f64() / seq.as_secs_f64()
        );
    }
}

fn p50(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2}ms", d.as_secs_f64() * 1000.0)
}
