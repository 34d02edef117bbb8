//! SQLite against PostgreSQL in one run: tool-call recording (one
//! transaction per call, and batches of 1,000) and memory recall over the
//! LoCoMo dev set (ingest, recall latency, R@10, which must be identical:
//! recall ranks in the process's index, fed the same rows by either
//! backend).
//!
//! The PostgreSQL server is `satchel_store::testing`'s: a cluster of its
//! own on 127.0.0.1 (or `SATCHEL_TEST_PG_URL`), with `fsync=off`, so the
//! figures measure the client, the protocol and the server's work, not
//! the disk; SQLite runs with its defaults (WAL, `synchronous=NORMAL`).
//!
//! Run with `cargo bench -p satchel-store --bench backends`. Variables:
//! `SATCHEL_BENCH_ROWS` (single calls, default 1000),
//! `SATCHEL_BENCH_LOCOMO` (default `../shared/data/locomo-dev.json` from
//! the workspace), `SATCHEL_BENCH_MODEL=1` to rank with the embedding
//! model too (slower ingest; keywords only by default).

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // A bench fails loudly and prints its table.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use satchel_core::{ToolCall, ToolOutput, ToolResults};
use satchel_memory::locomo;
use satchel_memory::{
    Memory, MemoryConfig, MemoryLayer, MemoryOptions, ModelSource, RecallQuery, StoreRequest,
};
use satchel_store::{
    AuditSource, ManualClock, NewToolCall, OpenedStore, StoreLocation, StoreOptions, Timestamp,
    ToolCallStore,
};
use serde_json::json;

const BATCH: usize = 1000;
const BATCHES: usize = 10;

fn call(n: usize) -> NewToolCall {
    NewToolCall {
        source: AuditSource::Cli,
        caller: None,
        conversation_id: None,
        statement_id: None,
        turn: None,
        call: ToolCall {
            id: format!("call-{n}"),
            name: "bash".into(),
            input: json!({"command": format!("ls -la /tmp/{n}"), "timeout": 30}),
        },
        output: ToolOutput::success(
            ToolResults::json(json!({"stdout": "total 0\n".repeat(20), "exit_code": 0})),
            format!("ran `ls` {n}"),
        ),
        decision: Some("allow: bash(ls *)".into()),
        started_at: Timestamp::from_millis(1_700_000_000_000),
        finished_at: Timestamp::from_millis(1_700_000_000_004),
        duration_us: 4000,
    }
}

struct Backends {
    sqlite: StoreLocation,
    postgres: StoreLocation,
    _dir: tempfile::TempDir,
}

fn locations() -> Backends {
    let dir = tempfile::tempdir().unwrap();
    let server = satchel_store::testing::server()
        .expect("a PostgreSQL server (scripts/install-postgres.sh)");
    Backends {
        sqlite: StoreLocation::File(
            dir.path()
                .join(format!("bench-{}.db", server.new_database().len())),
        ),
        postgres: StoreLocation::parse(server.new_database().as_ref(), []).unwrap(),
        _dir: dir,
    }
}

fn pct(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index.min(samples.len() - 1)]
}

fn us(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let rows: usize = std::env::var("SATCHEL_BENCH_ROWS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1000);
        let places = locations();
        let sqlite = satchel_store::open(&places.sqlite, StoreOptions::default())
            .await
            .unwrap();
        let postgres = satchel_store::open(&places.postgres, StoreOptions::default())
            .await
            .unwrap();

        // 1. One transaction per call, interleaved call by call.
        let (mut single_sqlite, mut single_pg) = (Vec::new(), Vec::new());
        for n in 0..rows {
            for (store, samples) in [(&sqlite, &mut single_sqlite), (&postgres, &mut single_pg)] {
                let started = Instant::now();
                store.record_tool_call(call(n)).await.unwrap();
                samples.push(started.elapsed());
            }
        }
        // 2. Batches of 1,000, interleaved batch by batch.
        let (mut batch_sqlite, mut batch_pg) = (Duration::ZERO, Duration::ZERO);
        for b in 0..BATCHES {
            for (store, total) in [(&sqlite, &mut batch_sqlite), (&postgres, &mut batch_pg)] {
                let calls: Vec<NewToolCall> = (0..BATCH).map(|i| call(b * BATCH + i)).collect();
                let started = Instant::now();
                store.record_tool_calls(calls).await.unwrap();
                *total += started.elapsed();
            }
        }
        let batched_rows = (BATCH * BATCHES) as f64;
        println!("\nTool-call recording (rows: the call and its audit row, one transaction)\n");
        println!("| what                         |   SQLite |  PostgreSQL | PostgreSQL / SQLite |");
        println!("|------------------------------|---------:|------------:|--------------------:|");
        let (s50, p50) = (pct(&mut single_sqlite, 0.5), pct(&mut single_pg, 0.5));
        let (s95, p95) = (pct(&mut single_sqlite, 0.95), pct(&mut single_pg, 0.95));
        println!(
            "| single call p50 (µs)         | {:>8.0} | {:>11.0} | {:>18.2}x |",
            us(s50),
            us(p50),
            us(p50) / us(s50)
        );
        println!(
            "| single call p95 (µs)         | {:>8.0} | {:>11.0} | {:>18.2}x |",
            us(s95),
            us(p95),
            us(p95) / us(s95)
        );
        let (sr, pr) = (
            batched_rows / batch_sqlite.as_secs_f64(),
            batched_rows / batch_pg.as_secs_f64(),
        );
        println!(
            "| batched, calls/s             | {sr:>8.0} | {pr:>11.0} | {:>18.2}x |",
            pr / sr
        );
        sqlite.close().await.unwrap();
        postgres.close().await.unwrap();

        locomo_both().await;
    });
}

/// LoCoMo dev: every conversation's turns stored as memories, every
/// question with evidence recalled, on both backends; R@10 must match.
async fn locomo_both() {
    let path = std::env::var_os("SATCHEL_BENCH_LOCOMO").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/locomo-dev.json"),
        PathBuf::from,
    );
    let Ok(text) = std::fs::read_to_string(&path) else {
        println!(
            "\n(no LoCoMo file at {}: recall not measured)",
            path.display()
        );
        return;
    };
    let samples = locomo::parse(&text).unwrap();
    let model = if std::env::var("SATCHEL_BENCH_MODEL").is_ok_and(|v| v == "1") {
        ModelSource::Dir(satchel_memory::testing::model_dir())
    } else {
        ModelSource::None
    };
    let mut results = Vec::new();
    for backend in ["SQLite", "PostgreSQL"] {
        let (mut at10, mut questions, mut ingest, mut turns) =
            (0.0, 0usize, Duration::ZERO, 0usize);
        let mut latencies = Vec::new();
        for sample in &samples {
            let places = locations();
            let location = if backend == "SQLite" {
                &places.sqlite
            } else {
                &places.postgres
            };
            let store: OpenedStore = satchel_store::open(location, StoreOptions::default())
                .await
                .unwrap();
            let last = sample.turns.iter().map(|t| t.date).max().unwrap();
            let config = MemoryConfig {
                namespace: format!("locomo/{}", sample.id),
                long_ttl: None,
                ..MemoryConfig::default()
            };
            let memory = Memory::new(
                store.memory_store(),
                config,
                MemoryOptions {
                    clock: Arc::new(ManualClock::new(Timestamp::from_millis(
                        last.as_millis() + 86_400_000,
                    ))),
                    model: model.clone(),
                    summarizer: None,
                },
            );
            let requests: Vec<StoreRequest> = sample
                .turns
                .iter()
                .enumerate()
                .map(|(index, turn)| StoreRequest {
                    created_at: Some(Timestamp::from_millis(
                        turn.date.as_millis() + index as i64 * 1000,
                    )),
                    ..StoreRequest::new(MemoryLayer::Long, turn.memory_text())
                })
                .collect();
            let started = Instant::now();
            let stored = memory.import(requests).await.unwrap();
            ingest += started.elapsed();
            turns += stored.len();
            let dia_of: HashMap<String, String> = stored
                .iter()
                .zip(&sample.turns)
                .map(|(m, t)| (m.id.clone(), t.dia_id.clone()))
                .collect();
            for question in sample.questions.iter().filter(|q| !q.evidence.is_empty()) {
                let started = Instant::now();
                let recall = memory
                    .recall(RecallQuery {
                        limit: 25,
                        ..RecallQuery::new(question.text.clone())
                    })
                    .await
                    .unwrap();
                latencies.push(started.elapsed());
                let retrieved: Vec<String> = recall
                    .memories
                    .iter()
                    .filter_map(|r| dia_of.get(&r.memory.id).cloned())
                    .collect();
                at10 += locomo::recall_at(&question.evidence, &retrieved, 10);
                questions += 1;
            }
            store.close().await.unwrap();
        }
        let p50 = pct(&mut latencies, 0.5);
        let p95 = pct(&mut latencies, 0.95);
        results.push((
            backend,
            at10 / questions as f64,
            turns as f64 / ingest.as_secs_f64(),
            p50,
            p95,
            questions,
        ));
    }
    println!(
        "\nMemory over LoCoMo dev ({} conversations, {} questions; {})\n",
        samples.len(),
        results[0].5,
        if matches!(model, ModelSource::None) {
            "keywords only"
        } else {
            "keywords and the embedding model"
        }
    );
    println!("| backend    |   R@10 | ingest turns/s | recall p50 (µs) | recall p95 (µs) |");
    println!("|------------|-------:|---------------:|----------------:|----------------:|");
    for (backend, r10, rate, p50, p95, _) in &results {
        println!(
            "| {backend:<10} | {r10:.4} | {rate:>14.0} | {:>15.0} | {:>15.0} |",
            us(*p50),
            us(*p95)
        );
    }
    println!(
        "\nPostgreSQL / SQLite: ingest {:.2}x slower, recall p50 {:.2}x; R@10 {}",
        results[0].2 / results[1].2,
        us(results[1].3) / us(results[0].3),
        if (results[0].1 - results[1].1).abs() < 1e-12 {
            "identical"
        } else {
            "DIFFERS"
        }
    );
    assert!(
        (results[0].1 - results[1].1).abs() < 1e-12,
        "R@10 differs between backends"
    );
}
