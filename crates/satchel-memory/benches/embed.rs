//! Embedding speed of all-MiniLM-L6-v2: single-query latency and batch
//! throughput, next to a baseline measured in the same run (the bare
//! `gemm` time of the model's linear layers for the same token counts), so
//! figures taken on a loaded machine can still be compared as ratios.
//!
//! `cargo bench -p satchel-memory --bench embed`. Needs the model files
//! (`scripts/fetch-memory-model.sh`, or `SATCHEL_TEST_MODEL_DIR`) and a
//! LoCoMo file (`SATCHEL_LOCOMO`, default
//! `/work/shared/data/locomo-dev.json`). `BENCH_ROUNDS` (default 20) sets
//! the passes over the queries, `BENCH_REPS` (default 5) over the batch.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // A bench fails loudly.
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use satchel_memory::Embedder;
use satchel_memory::testing::model_dir;
use tokenizers::Tokenizer;

/// Distinct queries timed (LoCoMo questions).
const QUERIES: usize = 24;
/// Texts in the batch (LoCoMo dialogue turns as stored memories).
const BATCH: usize = 500;
/// The model's shapes (all-MiniLM-L6-v2).
const HIDDEN: usize = 384;
const INTERMEDIATE: usize = 1536;
const LAYERS: usize = 6;

/// A second embedder limited to one thread.
fn embedder_one_thread(dir: &std::path::Path) -> Embedder {
    let mut embedder = Embedder::load(dir).unwrap();
    embedder.set_threads(1);
    embedder
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The first `QUERIES` distinct questions and `BATCH` turns of the file.
fn locomo() -> (Vec<String>, Vec<String>) {
    let path = std::env::var("SATCHEL_LOCOMO")
        .unwrap_or_else(|_| "/work/shared/data/locomo-dev.json".into());
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let samples = satchel_memory::locomo::parse(&text).unwrap();
    let mut queries: Vec<String> = Vec::new();
    for question in samples.iter().flat_map(|s| &s.questions) {
        if !queries.contains(&question.text) {
            queries.push(question.text.clone());
        }
    }
    queries.truncate(QUERIES);
    let texts: Vec<String> = samples
        .iter()
        .flat_map(|s| &s.turns)
        .map(|t| t.memory_text())
        .take(BATCH)
        .collect();
    assert!(queries.len() == QUERIES && texts.len() == BATCH);
    (queries, texts)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The `p`-th percentile (0 to 100) of `samples`, nearest rank.
fn percentile(samples: &[Duration], p: usize) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

fn median(samples: &[f64]) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// The linear layers' weights, `[out, in]` row-major like the model's.
struct Weights {
    layers: Vec<[(Vec<f32>, usize, usize); 4]>,
}

impl Weights {
    fn new() -> Weights {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut random = |len: usize| -> Vec<f32> {
            (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                })
                .collect()
        };
        let (h, i) = (HIDDEN, INTERMEDIATE);
        let layers = (0..LAYERS)
            .map(|_| {
                [
                    (random(3 * h * h), 3 * h, h),
                    (random(h * h), h, h),
                    (random(i * h), i, h),
                    (random(h * i), h, i),
                ]
            })
            .collect();
        Weights { layers }
    }

    /// The model's matrix products for `rows` tokens, one thread, as the
    /// original forward pass calls them (`rhs` = `W`ᵀ read in place).
    fn run(&self, rows: usize, x: &[f32], out: &mut [f32]) {
        for layer in &self.layers {
            for (w, n, k) in layer {
                let (n, k) = (*n, *k);
                assert!(x.len() >= rows * k && out.len() >= rows * n && w.len() == n * k);
                // SAFETY: dst is rows×n, lhs rows×k, rhs k×n (W n×k read
                // transposed); all three lie within their slices (checked).
                unsafe {
                    gemm::gemm(
                        rows,
                        n,
                        k,
                        out.as_mut_ptr(),
                        1,
                        n as isize,
                        false,
                        x.as_ptr(),
                        1,
                        k as isize,
                        w.as_ptr(),
                        k as isize,
                        1,
                        0.0f32,
                        1.0f32,
                        false,
                        false,
                        false,
                        gemm::Parallelism::None,
                    );
                }
            }
        }
    }

    /// Time of the matrix products for `rows` tokens on one thread.
    fn time(&self, rows: usize) -> Duration {
        let x = vec![0.01f32; rows * INTERMEDIATE];
        let mut out = vec![0.0f32; rows * INTERMEDIATE];
        let start = Instant::now();
        self.run(rows, &x, &mut out);
        start.elapsed()
    }
}

/// Multiply-adds ×2 of the linear layers per token.
fn flops_per_token() -> f64 {
    let (h, i) = (HIDDEN as f64, INTERMEDIATE as f64);
    2.0 * LAYERS as f64 * (3.0 * h * h + h * h + 2.0 * h * i)
}

struct Row {
    name: String,
    p50: String,
    p95: String,
    ratio: String,
}

fn row(name: &str, p50: String, p95: String, ratio: String) -> Row {
    Row {
        name: name.into(),
        p50,
        p95,
        ratio,
    }
}

fn main() {
    let dir = model_dir();
    assert!(
        Embedder::files_present(&dir),
        "no model in {}",
        dir.display()
    );
    let embedder = Embedder::load(&dir).unwrap();
    let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
    // The file pads to 128 tokens; the embedder does not.
    tokenizer.with_padding(None);
    let (queries, texts) = locomo();
    let rounds = env_usize("BENCH_ROUNDS", 20);
    let reps = env_usize("BENCH_REPS", 5);
    let weights = Weights::new();
    let threads = std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(1);
    let tokens = |text: &str| tokenizer.encode(text, true).unwrap().get_ids().len();
    let query_tokens: Vec<usize> = queries.iter().map(|q| tokens(q)).collect();
    let batch_tokens: Vec<usize> = texts.iter().map(|t| tokens(t)).collect();

    // Warm up caches, the allocator and the CPU clock.
    for query in &queries {
        embedder.embed(&[query.as_str()]).unwrap();
        weights.time(query_tokens[0]);
    }

    // Queries: the batch path with one text never touches the query cache.
    // Embedding (default threads, then one) and bare gemm alternate so all
    // see the same load.
    let time_one = |embedder: &Embedder, query: &str| {
        let start = Instant::now();
        let vectors = embedder.embed(&[query]).unwrap();
        assert_eq!(vectors[0].len(), HIDDEN);
        start.elapsed()
    };
    let single = embedder_one_thread(&dir);
    let mut embed_times = Vec::new();
    let mut single_times = Vec::new();
    let mut gemm_times = Vec::new();
    let mut tokenize_times = Vec::new();
    for _ in 0..rounds {
        for (query, &n) in queries.iter().zip(&query_tokens) {
            embed_times.push(time_one(&embedder, query));
            single_times.push(time_one(&single, query));
            gemm_times.push(weights.time(n));
            let start = Instant::now();
            std::hint::black_box(tokenizer.encode(query.as_str(), true).unwrap());
            tokenize_times.push(start.elapsed());
        }
    }
    drop(single);

    // Batch: the whole set at once, as ingest does; the baseline splits the
    // same tokens over the cores in 64-text chunks.
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let total_tokens: usize = batch_tokens.iter().sum();
    let mut rates = Vec::new();
    let mut gemm_rates = Vec::new();
    for _ in 0..reps {
        let start = Instant::now();
        let vectors = embedder.embed(&refs).unwrap();
        let elapsed = start.elapsed();
        assert_eq!(vectors.len(), BATCH);
        rates.push(BATCH as f64 / elapsed.as_secs_f64());
        let start = Instant::now();
        std::thread::scope(|scope| {
            for share in 0..threads {
                let (weights, batch_tokens) = (&weights, &batch_tokens);
                scope.spawn(move || {
                    let mine: Vec<usize> = batch_tokens
                        .iter()
                        .skip(share)
                        .step_by(threads)
                        .copied()
                        .collect();
                    for chunk in mine.chunks(64) {
                        weights.time(chunk.iter().sum());
                    }
                });
            }
        });
        gemm_rates.push(BATCH as f64 / start.elapsed().as_secs_f64());
    }

    let q50 = percentile(&embed_times, 50);
    let g50 = percentile(&gemm_times, 50);
    let rate = median(&rates);
    let gemm_rate = median(&gemm_rates);
    let flops = flops_per_token();
    let mean_query_tokens = query_tokens.iter().sum::<usize>() as f64 / QUERIES as f64;
    let rows = [
        row(
            &format!(
                "query embedding ({QUERIES} queries × {rounds}, ~{mean_query_tokens:.0} tokens)"
            ),
            format!("{:.2} ms", ms(q50)),
            format!("{:.2} ms", ms(percentile(&embed_times, 95))),
            format!("{:.2}× gemm", ms(q50) / ms(g50)),
        ),
        row(
            "  the same on 1 thread",
            format!("{:.2} ms", ms(percentile(&single_times, 50))),
            format!("{:.2} ms", ms(percentile(&single_times, 95))),
            format!("{:.2}× gemm", ms(percentile(&single_times, 50)) / ms(g50)),
        ),
        row(
            "  baseline: bare gemm, same shapes, 1 thread",
            format!("{:.2} ms", ms(g50)),
            format!("{:.2} ms", ms(percentile(&gemm_times, 95))),
            format!(
                "{:.1} GFLOP/s",
                mean_query_tokens * flops / g50.as_secs_f64() / 1e9
            ),
        ),
        row(
            "  of which: tokenizer alone",
            format!("{:.3} ms", ms(percentile(&tokenize_times, 50))),
            format!("{:.3} ms", ms(percentile(&tokenize_times, 95))),
            format!(
                "{:.1}% of query",
                100.0 * ms(percentile(&tokenize_times, 50)) / ms(q50)
            ),
        ),
        row(
            &format!("batch ({BATCH} texts, {total_tokens} tokens, {reps} reps, median)"),
            format!("{rate:.1} texts/s"),
            format!(
                "{:.1} GFLOP/s",
                rate * total_tokens as f64 / BATCH as f64 * flops / 1e9
            ),
            format!("{:.2}× gemm time", gemm_rate / rate),
        ),
        row(
            &format!("  baseline: bare gemm, same tokens, {threads} threads"),
            format!("{gemm_rate:.1} texts/s"),
            format!(
                "{:.1} GFLOP/s",
                gemm_rate * total_tokens as f64 / BATCH as f64 * flops / 1e9
            ),
            String::new(),
        ),
    ];
    println!(
        "\n{:<62} {:>14} {:>14} {:>16}",
        "embedding", "p50 / rate", "p95 / compute", "ratio"
    );
    for r in rows {
        println!("{:<62} {:>14} {:>14} {:>16}", r.name, r.p50, r.p95, r.ratio);
    }
}
