//! `satchel bench memory` (`bench history` lives in `bench_history.rs`): recall quality on a LoCoMo-format file (evidence
//! recall@5/10/25 overall and per category, ingest rate, recall latency),
//! or recall latency over a synthetic corpus at scale, next to baselines
//! measured in the same run.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use satchel_memory::locomo::{self, Sample};
use satchel_memory::{
    Embedder, Memory, MemoryOptions, ModelSource, Recall, RecallIndex, RecallQuery, StoreRequest,
};
use satchel_store::{
    Clock, ManualClock, MemoryFilter, MemoryLayer, MemoryStore, NewMemory, SqliteStore,
    StoreOptions, Timestamp,
};
use serde_json::{Value, json};

use crate::cli::{BenchCommand, BenchMemoryArgs, SplitArg};
use satchel_host::Host;

pub(crate) async fn run(command: BenchCommand, project: &Host) -> anyhow::Result<ExitCode> {
    match command {
        BenchCommand::Memory(args) => {
            let model_dir = args
                .model_dir
                .clone()
                .or_else(|| project.memory.config().model_dir.clone());
            let db = BenchDb::new(args.bench_db.clone())?;
            let store = SqliteStore::open(db.path(), StoreOptions::default()).await?;
            let result = match (args.synthetic, &args.dataset) {
                (Some(count), _) => synthetic(&args, project, &store, model_dir, count).await,
                (None, Some(dataset)) => {
                    let dataset = dataset.clone();
                    locomo_bench(&args, project, &store, model_dir, &dataset).await
                }
                (None, None) => bail!("give --dataset FILE or --synthetic N"),
            };
            store.close().await?;
            result
        }
        BenchCommand::History(args) => super::bench_history::run(args, &project.root).await,
    }
}

/// The benchmark's database: a temporary file removed afterwards, unless
/// the user named one.
struct BenchDb {
    path: PathBuf,
    temporary: bool,
}

impl BenchDb {
    fn new(path: Option<PathBuf>) -> anyhow::Result<BenchDb> {
        if let Some(path) = path {
            if path.exists() {
                bail!(
                    "{} exists; the benchmark wants a new database",
                    path.display()
                );
            }
            return Ok(BenchDb {
                path,
                temporary: false,
            });
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let path = std::env::temp_dir().join(format!(
            "satchel-bench-{}-{nanos}/bench.db",
            std::process::id()
        ));
        Ok(BenchDb {
            path,
            temporary: true,
        })
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for BenchDb {
    fn drop(&mut self) {
        if self.temporary
            && let Some(dir) = self.path.parent()
        {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn load_embedder(model_dir: Option<&Path>) -> Option<Arc<Embedder>> {
    let dir = model_dir?;
    if !Embedder::files_present(dir) {
        return None;
    }
    match Embedder::shared(dir) {
        Ok(embedder) => Some(embedder),
        Err(error) => {
            tracing::warn!("{error}");
            None
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// Sums of recall@5/10/25 over questions.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    questions: usize,
    at5: f64,
    at10: f64,
    at25: f64,
}

impl Tally {
    fn add(&mut self, evidence: &[String], retrieved: &[String]) {
        self.questions += 1;
        self.at5 += locomo::recall_at(evidence, retrieved, 5);
        self.at10 += locomo::recall_at(evidence, retrieved, 10);
        self.at25 += locomo::recall_at(evidence, retrieved, 25);
    }

    fn json(&self) -> Value {
        let n = self.questions.max(1) as f64;
        json!({
            "questions": self.questions,
            "recall_at_5": (self.at5 / n * 10_000.0).round() / 10_000.0,
            "recall_at_10": (self.at10 / n * 10_000.0).round() / 10_000.0,
            "recall_at_25": (self.at25 / n * 10_000.0).round() / 10_000.0,
        })
    }

    fn row(&self, label: &str) -> String {
        let n = self.questions.max(1) as f64;
        format!(
            "{label:14} {:>9} {:>7.3} {:>7.3} {:>7.3}",
            self.questions,
            self.at5 / n,
            self.at10 / n,
            self.at25 / n
        )
    }
}

/// One line of `--details`: the question, its evidence, and each recalled
/// memory with the dialogue turn it is, its text and its scores.
fn write_details(
    out: &mut impl Write,
    conversation: &str,
    question: &locomo::Question,
    recall: &Recall,
    dia_of: &HashMap<String, String>,
) -> anyhow::Result<()> {
    let recalled: Vec<Value> = recall
        .memories
        .iter()
        .map(|r| {
            json!({
                "dia_id": dia_of.get(&r.memory.id),
                "evidence": dia_of.get(&r.memory.id).is_some_and(|d| question.evidence.contains(d)),
                "relevance": r.relevance,
                "cosine": r.semantic,
                "bm25": r.keyword,
                "content": r.memory.content,
            })
        })
        .collect();
    let line = json!({
        "conversation": conversation,
        "question": question.text,
        "category": question.category,
        "evidence": question.evidence,
        "recalled": recalled,
    });
    writeln!(out, "{line}").context("writing --details")
}

async fn locomo_bench(
    args: &BenchMemoryArgs,
    project: &Host,
    store: &SqliteStore,
    model_dir: Option<PathBuf>,
    dataset: &Path,
) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(dataset)
        .with_context(|| format!("reading {}", dataset.display()))?;
    let samples = locomo::parse(&text).map_err(anyhow::Error::msg)?;
    let samples: Vec<Sample> = samples
        .into_iter()
        .enumerate()
        .filter(|(index, _)| match args.split {
            SplitArg::All => true,
            SplitArg::Odd => index % 2 == 0,
            SplitArg::Even => index % 2 == 1,
        })
        .map(|(_, sample)| sample)
        .take(args.limit_conversations.unwrap_or(usize::MAX))
        .collect();
    if samples.is_empty() {
        bail!("{} holds no conversations to run", dataset.display());
    }
    let embedder = if args.keywords_only {
        None
    } else {
        load_embedder(model_dir.as_deref())
    };
    if embedder.is_none() && !args.keywords_only {
        tracing::warn!(
            "no embedding model (`satchel doctor --fix` fetches it): measuring keyword recall only"
        );
    }
    // One database per conversation, as one user's memories would be:
    // keyword statistics (BM25's document frequencies) are then those of
    // that conversation alone, not of every conversation in the file.
    let dir = store
        .path()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir);
    let mut overall = Tally::default();
    let mut by_category: BTreeMap<u8, Tally> = BTreeMap::new();
    let mut by_sample: Vec<(String, Tally)> = Vec::new();
    let mut latencies = Vec::new();
    let (mut turns, mut ingest) = (0usize, Duration::ZERO);
    let mut skipped_evidence = 0;
    let mut details = args
        .details
        .as_ref()
        .map(|path| {
            std::fs::File::create(path)
                .map(std::io::BufWriter::new)
                .with_context(|| format!("creating {}", path.display()))
        })
        .transpose()?;
    for sample in &samples {
        let last = sample
            .turns
            .iter()
            .map(|t| t.date)
            .max()
            .unwrap_or(Timestamp::from_millis(0));
        // Questions are asked the day after the last session.
        let clock = ManualClock::new(Timestamp::from_millis(last.as_millis() + 86_400_000));
        let mut config = project.memory.config().clone();
        config.namespace = format!("locomo/{}", sample.id);
        config.long_ttl = None;
        let sample_db = dir.join(format!("conversation-{}.db", by_sample.len() + 1));
        if sample_db.exists() {
            bail!(
                "{} exists; the benchmark wants a new database",
                sample_db.display()
            );
        }
        let sample_store = SqliteStore::open(&sample_db, StoreOptions::default()).await?;
        let store: Arc<dyn MemoryStore> = Arc::new(sample_store.clone());
        let memory = Memory::new(
            Arc::clone(&store),
            config,
            MemoryOptions {
                clock: Arc::new(clock),
                model: embedder
                    .clone()
                    .map_or(ModelSource::None, ModelSource::Loaded),
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
        let stored = memory.import(requests).await?;
        ingest += started.elapsed();
        turns += stored.len();
        let dia_of: HashMap<String, String> = stored
            .iter()
            .zip(&sample.turns)
            .map(|(memory, turn)| (memory.id.clone(), turn.dia_id.clone()))
            .collect();
        skipped_evidence += sample.skipped_evidence;
        let mut tally = Tally::default();
        for question in sample.questions.iter().filter(|q| !q.evidence.is_empty()) {
            let started = Instant::now();
            let recall = memory
                .recall(RecallQuery {
                    limit: 25,
                    ..RecallQuery::new(question.text.clone())
                })
                .await?;
            latencies.push(started.elapsed());
            let retrieved: Vec<String> = recall
                .memories
                .iter()
                .filter_map(|r| dia_of.get(&r.memory.id).cloned())
                .collect();
            if let Some(out) = details.as_mut() {
                write_details(out, &sample.id, question, &recall, &dia_of)?;
            }
            tally.add(&question.evidence, &retrieved);
            overall.add(&question.evidence, &retrieved);
            by_category
                .entry(question.category)
                .or_default()
                .add(&question.evidence, &retrieved);
        }
        by_sample.push((sample.id.clone(), tally));
        drop(memory);
        sample_store.close().await?;
    }
    if let Some(mut out) = details {
        out.flush().context("writing --details")?;
    }
    latencies.sort();
    let ingest_rate = turns as f64 / ingest.as_secs_f64().max(1e-9);
    let (p50, p95) = (percentile(&latencies, 0.5), percentile(&latencies, 0.95));
    let mode = if embedder.is_some() {
        "hybrid (BM25 + MiniLM)"
    } else {
        "keywords only (BM25)"
    };
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let value = json!({
            "dataset": dataset,
            "mode": mode,
            "conversations": samples.len(),
            "memories": turns,
            "overall": overall.json(),
            "by_category": by_category.iter().map(|(c, t)| {
                let mut v = t.json();
                v["category"] = json!(c);
                v["name"] = json!(locomo::category_name(*c));
                v
            }).collect::<Vec<_>>(),
            "by_conversation": by_sample.iter().map(|(id, t)| {
                let mut v = t.json();
                v["conversation"] = json!(id);
                v
            }).collect::<Vec<_>>(),
            "skipped_evidence_ids": skipped_evidence,
            "ingest_memories_per_sec": (ingest_rate * 10.0).round() / 10.0,
            "recall_latency_ms": {"p50": ms(p50), "p95": ms(p95)},
            "weights": format!("{:?}", project.memory.config().recall),
        });
        writeln!(stdout, "{}", serde_json::to_string_pretty(&value)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        stdout,
        "memory recall on {} ({} conversations, {turns} memories, {mode})",
        dataset.display(),
        samples.len()
    )?;
    writeln!(
        stdout,
        "{:14} {:>9} {:>7} {:>7} {:>7}",
        "", "questions", "R@5", "R@10", "R@25"
    )?;
    writeln!(stdout, "{}", overall.row("overall"))?;
    for (category, tally) in &by_category {
        let label = format!("{category} {}", locomo::category_name(*category));
        writeln!(stdout, "{}", tally.row(&label))?;
    }
    for (id, tally) in &by_sample {
        writeln!(stdout, "{}", tally.row(id))?;
    }
    if skipped_evidence > 0 {
        writeln!(
            stdout,
            "{skipped_evidence} malformed evidence ids could not be read and were skipped"
        )?;
    }
    writeln!(
        stdout,
        "ingest: {ingest_rate:.0} memories/s ({turns} in {:.2} s, embeddings included)",
        ingest.as_secs_f64()
    )?;
    writeln!(
        stdout,
        "recall latency: p50 {:.2} ms, p95 {:.2} ms ({} queries, query embedding included)",
        ms(p50),
        ms(p95),
        latencies.len()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// A small deterministic generator (SplitMix64), so every run builds the
/// same corpus.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// Roughly normal: the sum of four uniforms, centred.
    fn gaussian(&mut self) -> f32 {
        (0..4)
            .map(|_| (self.next() >> 40) as f32 / (1u64 << 24) as f32)
            .sum::<f32>()
            - 2.0
    }
}

/// Words of the synthetic corpus: pseudo-words drawn with Zipf's law (the
/// k-th most common has frequency ∝ 1/k), as words in real text are, so
/// some query terms are very common and most are rare.
struct Zipf {
    cumulative: Vec<f64>,
}

impl Zipf {
    fn new(vocabulary: usize) -> Zipf {
        let mut total = 0.0;
        let cumulative = (1..=vocabulary)
            .map(|rank| {
                total += 1.0 / rank as f64;
                total
            })
            .collect();
        Zipf { cumulative }
    }

    fn word(&self, rng: &mut Rng) -> String {
        let total = self.cumulative.last().copied().unwrap_or(1.0);
        let target = (rng.next() >> 11) as f64 / (1u64 << 53) as f64 * total;
        let rank = self.cumulative.partition_point(|c| *c < target);
        format!("w{rank:x}")
    }

    fn text(&self, rng: &mut Rng, words: usize) -> String {
        (0..words)
            .map(|_| self.word(rng))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// One timed measurement: its label and sorted samples.
struct Timing {
    label: String,
    samples: Vec<Duration>,
}

impl Timing {
    fn json(&self) -> Value {
        json!({"what": self.label, "p50_ms": ms(percentile(&self.samples, 0.5)), "p95_ms": ms(percentile(&self.samples, 0.95))})
    }
}

async fn synthetic(
    args: &BenchMemoryArgs,
    project: &Host,
    store: &SqliteStore,
    model_dir: Option<PathBuf>,
    count: usize,
) -> anyhow::Result<ExitCode> {
    let Some(embedder) = load_embedder(model_dir.as_deref()) else {
        bail!(
            "the synthetic benchmark times recall with the embedding model: `satchel doctor --fix` fetches it (or pass --model-dir)"
        );
    };
    if count == 0 {
        bail!("--synthetic needs at least one memory");
    }
    let mut rng = Rng(0x5A7C_4E11);
    let zipf = Zipf::new(50_000);
    // Real embeddings of a pool of texts; the corpus mixes them with
    // noise, so vectors cluster as real ones do.
    let pool: Vec<String> = (0..count.min(1000))
        .map(|_| zipf.text(&mut rng, 16))
        .collect();
    let refs: Vec<&str> = pool.iter().map(String::as_str).collect();
    let pool_vectors = {
        let embedder = Arc::clone(&embedder);
        let owned: Vec<String> = refs.iter().map(|s| (*s).to_owned()).collect();
        tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = owned.iter().map(String::as_str).collect();
            embedder.embed(&refs)
        })
        .await??
    };
    let namespace = "synthetic".to_owned();
    let base =
        Timestamp::parse_rfc3339("2024-01-01T00:00:00Z").unwrap_or(Timestamp::from_millis(0));
    let started = Instant::now();
    let mut inserted = 0;
    while inserted < count {
        let batch = (count - inserted).min(5000);
        let mut new = Vec::with_capacity(batch);
        for i in 0..batch {
            let (a, b) = (rng.below(pool.len()), rng.below(pool.len()));
            let mut vector: Vec<f32> = pool_vectors[a]
                .iter()
                .zip(&pool_vectors[b])
                .map(|(x, y)| x + 0.5 * y + 0.03 * rng.gaussian())
                .collect();
            let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-9);
            vector.iter_mut().for_each(|v| *v /= norm);
            new.push(NewMemory {
                namespace: namespace.clone(),
                layer: MemoryLayer::ALL[(inserted + i) % 3],
                content: {
                    let words = 12 + rng.below(12);
                    zipf.text(&mut rng, words)
                },
                category: None,
                certainty: 1.0,
                session_id: None,
                conversation_id: None,
                created_at: Some(Timestamp::from_millis(
                    base.as_millis() + ((inserted + i) as i64) * 60_000,
                )),
                expires_at: None,
                embedding: Some(vector),
            });
        }
        store.insert_memories(new).await?;
        inserted += batch;
    }
    let insert_time = started.elapsed();

    let mut config = project.memory.config().clone();
    config.namespace = namespace.clone();
    let clock = ManualClock::new(Timestamp::from_millis(
        base.as_millis() + count as i64 * 60_000,
    ));
    let now = clock.now();
    let memory = Memory::new(
        Arc::new(store.clone()),
        config.clone(),
        MemoryOptions {
            clock: Arc::new(clock),
            model: ModelSource::Loaded(Arc::clone(&embedder)),
            summarizer: None,
        },
    );
    let started = Instant::now();
    memory.sync_index().await?;
    let load_time = started.elapsed();

    // A second index for the bare-scan baselines.
    let changes = store.memory_changes(0).await?;
    let mut index = RecallIndex::new();
    index.apply(changes.rev, changes.upserts, &changes.deleted);
    let index_filter = MemoryFilter {
        namespace: namespace.clone(),
        live_at: Some(now),
        ..MemoryFilter::default()
    };

    let queries: Vec<String> = (0..args.queries.max(1) + 5)
        .map(|i| format!("{} {i}", zipf.text(&mut rng, 6)))
        .collect();
    // The query embedding's time follows its length in tokens.
    let query_tokens = queries
        .iter()
        .map(|query| embedder.token_count(query))
        .sum::<Result<usize, _>>()? as f64
        / queries.len() as f64;
    let (mut full, mut embed_only, mut keyword_only, mut scan_exact, mut scan_two_stage) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut scan_wide = Vec::new();
    let (mut agreement, mut agreement_candidates) = (0.0, 0.0);
    let mut recalled: Vec<Vec<String>> = Vec::new();
    let wide = config.recall.candidates;
    for (i, query) in queries.iter().enumerate() {
        let warm = i >= 5;
        // Baselines first, on the same query (the embedding here bypasses
        // the query cache that recall uses).
        let started = Instant::now();
        let vector = embedder.embed(&[query.as_str()])?.pop().unwrap_or_default();
        let embed_time = started.elapsed();
        let started = Instant::now();
        index.search_keywords(
            query,
            &index_filter,
            config.recall.candidates,
            config.recall.bm25,
        );
        let keyword_time = started.elapsed();
        let started = Instant::now();
        let exact = index.search_vectors(&vector, &index_filter, 10, usize::MAX);
        let exact_time = started.elapsed();
        let started = Instant::now();
        let approx = index.search_vectors(&vector, &index_filter, 10, 0);
        let approx_time = started.elapsed();
        let started = Instant::now();
        let found = memory
            .recall(RecallQuery {
                limit: 10,
                ..RecallQuery::new(query.clone())
            })
            .await?;
        let recall_time = started.elapsed();
        if warm {
            recalled.push(found.memories.into_iter().map(|r| r.memory.id).collect());
            embed_only.push(embed_time);
            keyword_only.push(keyword_time);
            scan_exact.push(exact_time);
            scan_two_stage.push(approx_time);
            full.push(recall_time);
            agreement += overlap(&exact, &approx);
            // Recall takes the vector search's top `candidates`, not 10.
            let exact = index.search_vectors(&vector, &index_filter, wide, usize::MAX);
            let started = Instant::now();
            let approx = index.search_vectors(&vector, &index_filter, wide, 0);
            scan_wide.push(started.elapsed());
            agreement_candidates += overlap(&exact, &approx);
        }
    }
    let timed = full.len();
    let two_stage_used = count > config.recall.exact_scan_limit;
    // The same recalls over an exact vector search: what the two-stage
    // search costs recall's own top 10, after fusion.
    let fused_agreement = if two_stage_used {
        let mut exact = config.clone();
        exact.recall.exact_scan_limit = usize::MAX;
        memory.reconfigure(exact);
        let mut total = 0.0;
        for (query, ids) in queries.iter().skip(5).zip(&recalled) {
            let exact = memory
                .recall(RecallQuery {
                    limit: 10,
                    ..RecallQuery::new(query.clone())
                })
                .await?;
            let found = exact
                .memories
                .iter()
                .filter(|r| ids.contains(&r.memory.id))
                .count();
            total += found as f64 / exact.memories.len().max(1) as f64;
        }
        Some(total / recalled.len().max(1) as f64)
    } else {
        None
    };
    let mut timings = vec![
        Timing {
            label: "recall (hybrid, as the tool runs it)".into(),
            samples: full,
        },
        Timing {
            label: "baseline: query embedding only".into(),
            samples: embed_only,
        },
        Timing {
            label: "baseline: BM25 ranking only".into(),
            samples: keyword_only,
        },
        Timing {
            label: "baseline: exact int8 scan of every vector".into(),
            samples: scan_exact,
        },
        Timing {
            label: "baseline: sign-bit scan + int8 re-rank".into(),
            samples: scan_two_stage,
        },
        Timing {
            label: format!("the same for recall's {wide} candidates"),
            samples: scan_wide,
        },
    ];
    timings.iter_mut().for_each(|t| t.samples.sort());
    let agreement = agreement / timed.max(1) as f64;
    let agreement_candidates = agreement_candidates / timed.max(1) as f64;
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let value = json!({
            "memories": count,
            "queries": timed,
            "query_tokens_mean": query_tokens,
            "insert_seconds": insert_time.as_secs_f64(),
            "index_load_seconds": load_time.as_secs_f64(),
            "recall_uses_two_stage": two_stage_used,
            "two_stage_recall_at_10_vs_exact": agreement,
            "two_stage_recall_at_candidates_vs_exact": agreement_candidates,
            "recall_top_10_vs_exact_search": fused_agreement,
            "candidates": wide,
            "timings": timings.iter().map(Timing::json).collect::<Vec<_>>(),
        });
        writeln!(stdout, "{}", serde_json::to_string_pretty(&value)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        stdout,
        "synthetic corpus: {count} memories (inserted in {:.1} s, index loaded in {:.2} s), {timed} distinct queries of {query_tokens:.1} tokens on average, limit 10",
        insert_time.as_secs_f64(),
        load_time.as_secs_f64()
    )?;
    writeln!(stdout, "{:45} {:>9} {:>9}", "", "p50 ms", "p95 ms")?;
    for timing in &timings {
        writeln!(
            stdout,
            "{:45} {:>9.2} {:>9.2}",
            timing.label,
            ms(percentile(&timing.samples, 0.5)),
            ms(percentile(&timing.samples, 0.95))
        )?;
    }
    writeln!(
        stdout,
        "recall's vector search: {} (exactScanLimit {}); sign-bit search finds {:.1}% of the exact top 10, {:.1}% of the exact top {wide} (recall's candidates)",
        if two_stage_used {
            "sign bits + re-rank"
        } else {
            "exact int8 scan"
        },
        config.recall.exact_scan_limit,
        agreement * 100.0,
        agreement_candidates * 100.0
    )?;
    if let Some(fused) = fused_agreement {
        writeln!(
            stdout,
            "recall's top 10 holds {:.1}% of the top 10 it gives over an exact vector search",
            fused * 100.0
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The share of `exact`'s rows that `approx` also found.
fn overlap<T: PartialEq, S>(exact: &[(T, S)], approx: &[(T, S)]) -> f64 {
    let found = exact
        .iter()
        .filter(|e| approx.iter().any(|a| a.0 == e.0))
        .count();
    found as f64 / exact.len().max(1) as f64
}
