//! Whole-process figures for the runner and the bash tool, each against a
//! baseline measured in the same run (these machines are shared and noisy,
//! so only ratios are comparable across runs).
//!
//! 1. Spawn overhead: the bash tool running `true` end to end (registry,
//!    validation, runner, output) against a bare spawn-and-wait of
//!    `/bin/sh -c true` and of `bash -c true`. Target: p50 ratio ≤ 1.5.
//! 2. Throughput: the runner capturing `head -c 1G /dev/zero`, against a
//!    bare blocking read of the same pipe. Target: ≥ 1 GB/s and peak RSS
//!    growth under 32 MiB.
//!
//! Run with `cargo bench -p satchel-tools --bench process` (set
//! `SATCHEL_BENCH_ITERS` to change the number of spawns, default 300).

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests and benches fail loudly by design.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use satchel_builtins::builtin_registry;
use satchel_core::ToolCall;
use satchel_exec::{ExecRequest, RunnerConfig};
use satchel_tools::{ToolContext, ToolsConfig};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const GIB: u64 = 1 << 30;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let iterations = std::env::var("SATCHEL_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    spawn_overhead(&runtime, iterations);
    throughput(&runtime);
}

fn spawn_overhead(runtime: &tokio::runtime::Runtime, iterations: usize) {
    let registry = builtin_registry().expect("built-in tools register");
    let ctx = ToolContext::standalone(
        "bench",
        std::env::temp_dir(),
        Arc::new(ToolsConfig::default()),
    );
    let call = ToolCall {
        id: "bench".into(),
        name: "bash".into(),
        input: json!({"command": "true"}),
    };
    let bare = |program: &str| {
        let start = Instant::now();
        let status = Command::new(program)
            .args(["-c", "true"])
            .stdin(Stdio::null())
            .status()
            .expect("spawn");
        assert!(status.success());
        start.elapsed()
    };
    let tool = || {
        let start = Instant::now();
        let output = runtime.block_on(registry.call(&call, &ctx));
        assert!(!output.is_error, "{output:?}");
        start.elapsed()
    };
    // Warm up caches and the runtime's threads.
    for _ in 0..20 {
        bare("/bin/sh");
        bare("bash");
        tool();
    }
    // Interleaved so that drifting machine load hits all three alike.
    let (mut sh, mut bash, mut satchel) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..iterations {
        sh.push(bare("/bin/sh"));
        bash.push(bare("bash"));
        satchel.push(tool());
    }
    let (sh, bash, satchel) = (
        Percentiles::of(sh),
        Percentiles::of(bash),
        Percentiles::of(satchel),
    );
    println!("\nSpawn overhead, {iterations} runs each (interleaved)\n");
    println!("| what                                  |     p50 |     p90 | p50 ratio |");
    println!("|---------------------------------------|--------:|--------:|----------:|");
    for (name, p) in [
        ("bare spawn+wait `/bin/sh -c true`", &sh),
        ("bare spawn+wait `bash -c true`", &bash),
        ("bash tool `true` (registry → output)", &satchel),
    ] {
        println!(
            "| {name:<37} | {:>7} | {:>7} | {:>9.2} |",
            ms(p.p50),
            ms(p.p90),
            ratio(p.p50, sh.p50)
        );
    }
    println!(
        "\nbash tool vs bare `bash -c true`: p50 ratio {:.2} (the runner's own overhead, same shell)",
        ratio(satchel.p50, bash.p50)
    );
}

fn throughput(runtime: &tokio::runtime::Runtime) {
    let request = ExecRequest {
        program: "head".into(),
        args: vec!["-c".into(), "1G".into(), "/dev/zero".into()],
        stdin: None,
        working_dir: std::env::temp_dir(),
        env: Vec::new(),
        timeout: Duration::from_secs(120),
        clear_env: false,
        sandbox: None,
    };
    let config = RunnerConfig::default();
    let cancel = CancellationToken::new();

    let mut rows = Vec::new();
    for round in 0..3 {
        // Baseline: the fastest reader possible, a blocking loop that discards.
        let start = Instant::now();
        let mut child = Command::new("head")
            .args(["-c", "1G", "/dev/zero"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut pipe = child.stdout.take().expect("piped");
        let mut buf = vec![0u8; 256 * 1024];
        let mut total = 0u64;
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => total += n as u64,
                Err(e) => panic!("read: {e}"),
            }
        }
        child.wait().expect("wait");
        assert_eq!(total, GIB);
        let bare = start.elapsed();

        reset_peak_rss();
        let rss_before = rss_kib("VmRSS:");
        let start = Instant::now();
        let outcome = runtime
            .block_on(satchel_exec::run(&request, &config, &cancel))
            .expect("run");
        let runner = start.elapsed();
        let growth_kib = rss_kib("VmHWM:").saturating_sub(rss_before);
        assert_eq!(outcome.stdout.total_bytes, GIB);
        if let Some(spill) = &outcome.stdout.spill {
            let _ = std::fs::remove_file(&spill.path);
        }
        rows.push((round, bare, runner, growth_kib));
    }
    println!("\nCapture throughput, `head -c 1G /dev/zero` (spill file on, as by default)\n");
    println!("| round | bare read GB/s | runner GB/s | runner/bare | peak RSS growth |");
    println!("|------:|---------------:|------------:|------------:|----------------:|");
    for (round, bare, runner, growth_kib) in rows {
        println!(
            "| {round:>5} | {:>14.2} | {:>11.2} | {:>11.2} | {:>11.1} MiB |",
            gbps(bare),
            gbps(runner),
            gbps(runner) / gbps(bare),
            growth_kib as f64 / 1024.0
        );
    }
}

struct Percentiles {
    p50: Duration,
    p90: Duration,
}

impl Percentiles {
    fn of(mut samples: Vec<Duration>) -> Percentiles {
        samples.sort();
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        Percentiles {
            p50: at(0.5),
            p90: at(0.9),
        }
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2}ms", d.as_secs_f64() * 1000.0)
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

fn gbps(d: Duration) -> f64 {
    GIB as f64 / d.as_secs_f64() / 1e9
}

/// Resets the kernel's peak-RSS mark (VmHWM) to the current RSS.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn rss_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}
