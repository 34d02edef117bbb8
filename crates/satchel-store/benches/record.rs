//! Tool-call recording: `SqliteStore` against a bare rusqlite insert loop of
//! the same rows, in the same run (these machines are shared and noisy, so
//! only ratios are comparable across runs).
//!
//! Both sides write the same two rows per call (the tool-call row and its
//! audit row) with the same SQL into databases with the same schema and
//! pragmas (WAL, `synchronous=NORMAL`, foreign keys on). The bare loop gets
//! its ids and JSON text made in advance; the store pays for everything it
//! does per call: redaction (three secrets configured), JSON encoding, id
//! generation, the hop to the writer thread and back.
//!
//! 1. One transaction per call, interleaved call by call. Target: store p50
//!    under 100 µs.
//! 2. Batches of 1,000 calls in one transaction, interleaved batch by
//!    batch. Target: store at least 50,000 rows/s.
//!
//! Run with `cargo bench -p satchel-store --bench record` (set
//! `SATCHEL_BENCH_ROWS` to change the number of single-row calls, default
//! 3000).

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests and benches fail loudly by design.

use std::time::{Duration, Instant};

use rusqlite::{Connection, TransactionBehavior, params};
use satchel_core::{ToolCall, ToolOutput, ToolResults};
use satchel_store::{
    AuditSource, NewToolCall, Redactor, SqliteStore, StoreOptions, Timestamp, ToolCallStore,
};
use serde_json::json;

const BATCH: usize = 1000;
const BATCHES: usize = 20;

const INSERT_TOOL_CALL: &str = "INSERT INTO tool_calls (id, conversation_id, statement_id, turn, call_id, tool, input, results, response, user_message, is_error, error_code, started_at, finished_at, duration_us) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";
const INSERT_AUDIT: &str = "INSERT INTO audit (id, source, tool, input, is_error, error_code, decision, conversation_id, tool_call_id, started_at, finished_at, duration_us) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let rows = std::env::var("SATCHEL_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let dir = tempfile::tempdir().expect("temp dir");
    let redactor = Redactor::new(
        [
            ("OPENAI_API_KEY", "sk-proj-0123456789abcdefghijklmnop"),
            ("GITHUB_TOKEN", "ghp_0123456789abcdefghijklmnopqrstuv"),
            ("DB_PASSWORD", "correct-horse-battery-staple"),
        ]
        .map(|(name, value)| (name.to_owned(), value.to_owned())),
        8,
    );
    let store = runtime
        .block_on(SqliteStore::open(
            &dir.path().join("store.db"),
            StoreOptions {
                redactor,
                ..StoreOptions::default()
            },
        ))
        .expect("open store");
    let bare_path = dir.path().join("bare.db");
    runtime.block_on(async {
        let schema_only = SqliteStore::open(&bare_path, StoreOptions::default())
            .await
            .expect("create bare db");
        schema_only.close().await.expect("close");
    });
    let mut bare = Bare::open(&bare_path);

    single_rows(&runtime, &store, &mut bare, rows);
    batched(&runtime, &store, &mut bare);
    runtime.block_on(store.close()).expect("close");
}

/// The same call each time but for its number: a bash run with a few
/// hundred bytes of output.
fn call(n: usize) -> NewToolCall {
    let stdout = format!(
        "total 48\n{}",
        "drwxr-xr-x  5 user user 4096 Jan  2 03:04 src\n".repeat(6)
    );
    NewToolCall {
        source: AuditSource::Cli,
        caller: None,
        conversation_id: None,
        statement_id: None,
        turn: None,
        call: ToolCall {
            id: format!("call-{n}"),
            name: "bash".into(),
            input: json!({"command": "ls -la src/", "timeout": 30}),
        },
        output: ToolOutput::success(
            ToolResults::json(json!({
                "stdout": stdout, "stderr": "", "exit_code": 0,
                "truncated": false, "timed_out": false, "duration_ms": 4
            })),
            "ran `ls -la src/` in 4 ms, exit 0",
        ),
        decision: None,
        started_at: Timestamp::from_millis(1_735_787_045_678),
        finished_at: Timestamp::from_millis(1_735_787_045_682),
        duration_us: 4_000,
    }
}

/// A bare connection with the rows' text prepared in advance.
struct Bare {
    conn: Connection,
    next: u64,
}

/// One call's values, ready to bind.
struct Prepared {
    id: String,
    audit_id: String,
    call: NewToolCall,
    input: String,
    results: String,
}

impl Bare {
    fn open(path: &std::path::Path) -> Bare {
        let conn = Connection::open(path).expect("open bare");
        conn.pragma_update(None, "journal_mode", "wal").unwrap();
        conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
        conn.pragma_update(None, "foreign_keys", true).unwrap();
        Bare { conn, next: 0 }
    }

    fn prepare(&mut self, call: NewToolCall) -> Prepared {
        self.next += 2;
        Prepared {
            id: format!("{:020}", self.next),
            audit_id: format!("{:020}", self.next + 1),
            input: serde_json::to_string(&call.call.input).unwrap(),
            results: serde_json::to_string(&call.output.results).unwrap(),
            call,
        }
    }

    fn insert(conn: &Connection, row: &Prepared) {
        let call = &row.call;
        conn.prepare_cached(INSERT_TOOL_CALL)
            .unwrap()
            .execute(params![
                row.id,
                call.conversation_id,
                call.statement_id,
                call.turn,
                call.call.id,
                call.call.name,
                row.input,
                row.results,
                call.output.response,
                call.output.user_message,
                call.output.is_error,
                None::<String>,
                call.started_at.as_millis(),
                call.finished_at.as_millis(),
                call.duration_us,
            ])
            .unwrap();
        conn.prepare_cached(INSERT_AUDIT)
            .unwrap()
            .execute(params![
                row.audit_id,
                call.source.as_str(),
                call.call.name,
                row.input,
                call.output.is_error,
                None::<String>,
                None::<String>,
                call.conversation_id,
                row.id,
                call.started_at.as_millis(),
                call.finished_at.as_millis(),
                call.duration_us,
            ])
            .unwrap();
    }

    fn write(&mut self, rows: &[Prepared]) {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .unwrap();
        for row in rows {
            Bare::insert(&tx, row);
        }
        tx.commit().unwrap();
    }
}

fn single_rows(
    runtime: &tokio::runtime::Runtime,
    store: &SqliteStore,
    bare: &mut Bare,
    rows: usize,
) {
    let mut time_bare = Vec::with_capacity(rows);
    let mut time_store = Vec::with_capacity(rows);
    for n in 0..rows + 200 {
        let prepared = [bare.prepare(call(n))];
        let start = Instant::now();
        bare.write(&prepared);
        let bare_elapsed = start.elapsed();

        let new = call(n);
        let start = Instant::now();
        runtime.block_on(store.record_tool_call(new)).unwrap();
        let store_elapsed = start.elapsed();
        // The first 200 warm caches, the statement cache and the threads.
        if n >= 200 {
            time_bare.push(bare_elapsed);
            time_store.push(store_elapsed);
        }
    }
    let bare_p = Percentiles::of(time_bare);
    let store_p = Percentiles::of(time_store);
    println!("\nOne transaction per call, {rows} calls each (interleaved)\n");
    println!(
        "| what                           |     p50 |     p90 |     p99 |   rows/s | p50 ratio |"
    );
    println!(
        "|--------------------------------|--------:|--------:|--------:|---------:|----------:|"
    );
    for (name, p) in [
        ("bare rusqlite insert + commit", &bare_p),
        ("SqliteStore::record_tool_call", &store_p),
    ] {
        println!(
            "| {name:<30} | {:>7} | {:>7} | {:>7} | {:>8.0} | {:>9.2} |",
            us(p.p50),
            us(p.p90),
            us(p.p99),
            1.0 / p.mean.as_secs_f64(),
            ratio(p.p50, bare_p.p50)
        );
    }
    println!(
        "\nTarget: store p50 under 100 µs: {}",
        verdict(store_p.p50 < Duration::from_micros(100))
    );
}

fn batched(runtime: &tokio::runtime::Runtime, store: &SqliteStore, bare: &mut Bare) {
    let (mut time_bare, mut time_store) = (Duration::ZERO, Duration::ZERO);
    for round in 0..BATCHES + 2 {
        let prepared: Vec<Prepared> = (0..BATCH).map(|n| bare.prepare(call(n))).collect();
        let start = Instant::now();
        bare.write(&prepared);
        let bare_elapsed = start.elapsed();

        let calls: Vec<NewToolCall> = (0..BATCH).map(call).collect();
        let start = Instant::now();
        let ids = runtime.block_on(store.record_tool_calls(calls)).unwrap();
        let store_elapsed = start.elapsed();
        assert_eq!(ids.len(), BATCH);
        // Two warm-up rounds.
        if round >= 2 {
            time_bare += bare_elapsed;
            time_store += store_elapsed;
        }
    }
    let rows = (BATCH * BATCHES) as f64;
    let (bare_rate, store_rate) = (
        rows / time_bare.as_secs_f64(),
        rows / time_store.as_secs_f64(),
    );
    println!(
        "\nBatches of {BATCH} calls in one transaction, {BATCHES} batches each (interleaved)\n"
    );
    println!("| what                            |   rows/s | µs per row | ratio |");
    println!("|---------------------------------|---------:|-----------:|------:|");
    for (name, rate) in [
        ("bare rusqlite, one transaction", bare_rate),
        ("SqliteStore::record_tool_calls", store_rate),
    ] {
        println!(
            "| {name:<31} | {rate:>8.0} | {:>10.1} | {:>5.2} |",
            1e6 / rate,
            bare_rate / rate
        );
    }
    println!(
        "\nTarget: store batched at least 50,000 rows/s: {}",
        verdict(store_rate >= 50_000.0)
    );
}

struct Percentiles {
    p50: Duration,
    p90: Duration,
    p99: Duration,
    mean: Duration,
}

impl Percentiles {
    fn of(mut samples: Vec<Duration>) -> Percentiles {
        samples.sort_unstable();
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        let total: Duration = samples.iter().sum();
        Percentiles {
            p50: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
            mean: total / samples.len() as u32,
        }
    }
}

fn us(duration: Duration) -> String {
    format!("{:.1} µs", duration.as_secs_f64() * 1e6)
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}
