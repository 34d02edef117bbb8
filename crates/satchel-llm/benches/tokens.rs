//! Token accounting and request building, each next to a baseline measured
//! in the same run (these machines are shared and noisy, so compare ratios).
//! Besides wall-clock time, each figure is given in on-CPU time of the
//! measuring thread (`CLOCK_THREAD_CPUTIME_ID`): "MB/s per core" stays
//! meaningful when other builds compete for the two cores.
//!
//! 1. Counting throughput on a generated 1 MB corpus of mixed prose, code
//!    and JSON, one thread: `count_tokens` with o200k and cl100k, against
//!    a plain byte scan (what any counter must at least do), the `len / 4`
//!    heuristic, and `bpe-openai`'s own `count` (same counts, its regex
//!    pre-tokenizer). Target: at least 20 MB/s per core.
//! 2. Building and serialising the request for a conversation of 2,000
//!    messages (1,000 user, 1,000 assistant) carrying 2,000 tool calls
//!    (each answered by a tool-result message), with 8 tool definitions,
//!    in both wire formats; then counting that body (the estimate, with its
//!    section breakdown). Target: building under 20 ms (p50).
//!
//! Run with `cargo bench -p satchel-llm --bench tokens` (set
//! `SATCHEL_BENCH_ITERS` to change the number of request builds, default 50).

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests and benches fail loudly by design.

use std::collections::HashMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use satchel_core::{AssistantPart, Message, ToolCall, ToolOutput, ToolResults, ToolSpec};
use satchel_llm::{
    ChatRequest, Encoding, LlmConfig, Mode, ProviderKind, Section, connect, count_tokens,
};
use serde_json::json;

const MB: f64 = 1_000_000.0;

fn main() {
    let iterations = std::env::var("SATCHEL_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    counting();
    request_building(iterations);
}

/// A small deterministic generator, so every run counts the same corpus.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }

    /// A made-up word of 1 to 4 syllables: tens of thousands of distinct
    /// words, so the corpus is not a few dozen words repeated.
    fn word(&mut self) -> String {
        const SYLLABLES: &[&str] = &[
            "ka", "lo", "mi", "ten", "sar", "vol", "qui", "ber", "ston", "ph", "ex", "ul", "dra",
            "zin", "or", "ta", "gle", "mon", "rith", "cy", "pre", "sub", "tion", "ing", "ous",
            "ize", "ment", "ly", "ca", "ne", "po", "ru", "wex", "yam", "jo", "fi",
        ];
        let mut word = String::new();
        for _ in 0..(1 + self.next() % 4) {
            word.push_str(self.pick(SYLLABLES));
        }
        word
    }

    fn hex(&mut self, len: usize) -> String {
        (0..len)
            .map(|_| char::from(b"0123456789abcdef"[(self.next() % 16) as usize]))
            .collect()
    }
}

const WORDS: &[&str] = &[
    "the",
    "model",
    "returns",
    "a",
    "tool",
    "call",
    "with",
    "arguments",
    "that",
    "Satchel",
    "validates",
    "before",
    "running",
    "it",
    "in",
    "its",
    "own",
    "process",
    "group",
    "context",
    "window",
    "tokens",
    "are",
    "counted",
    "on",
    "exact",
    "bytes",
    "request",
    "streaming",
    "answer",
    "café",
    "naïve",
    "Zürich",
    "estimate",
    "provider",
    "usage",
    "retry",
    "backoff",
    "cancellation",
    "history",
    "conversation",
    "user",
    "assistant",
    "thinking",
    "signature",
];

const CODE: &[&str] = &[
    "fn main() -> Result<(), Box<dyn std::error::Error>> {\n    let config = Config::load(&path)?;\n",
    "    for (index, item) in items.iter().enumerate() {\n        total += item.len() * index;\n    }\n",
    "def handler(event, context):\n    return {\"statusCode\": 200, \"body\": json.dumps(event)}\n",
    "    match response.status() {\n        StatusCode::OK => Ok(body),\n        other => Err(Error::Http(other)),\n    }\n",
    "const result = await fetch(`${baseUrl}/v1/chat/completions`, { method: 'POST', body });\n",
    "SELECT id, name, created_at FROM conversations WHERE archived = 0 ORDER BY created_at DESC;\n",
];

fn corpus(size: usize) -> String {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut text = String::with_capacity(size + 4096);
    while text.len() < size {
        match rng.next() % 3 {
            0 => {
                for i in 0..(40 + rng.next() % 80) {
                    if i > 0 {
                        text.push(' ');
                    }
                    if rng.next().is_multiple_of(2) {
                        text.push_str(rng.pick(WORDS));
                    } else {
                        let word = rng.word();
                        if rng.next().is_multiple_of(7) {
                            let mut chars = word.chars();
                            if let Some(first) = chars.next() {
                                text.extend(first.to_uppercase());
                                text.push_str(chars.as_str());
                            }
                        } else {
                            text.push_str(&word);
                        }
                    }
                    if rng.next().is_multiple_of(11) {
                        text.push_str(", ");
                        text.push_str(&(rng.next() % 10_000).to_string());
                    }
                }
                text.push_str(".\n\n");
            }
            1 => {
                for _ in 0..(2 + rng.next() % 6) {
                    text.push_str(rng.pick(CODE));
                    let (a, b) = (rng.word(), rng.word());
                    text.push_str(&format!(
                        "    let {a}_{b} = {}::{}(&{a}, {})?;\n",
                        rng.word().to_uppercase(),
                        b,
                        rng.next() % 1000
                    ));
                }
            }
            _ => {
                let value = json!({
                    "id": format!("call_{}", rng.hex(24)),
                    "stdout": format!("total {}\ndrwxr-xr-x  2 user user 4096 {} {}\n-rw-r--r--  1 user user {} {}.toml\n",
                        rng.next() % 100, rng.pick(WORDS), rng.word(), rng.next() % 100_000, rng.word()),
                    "stderr": "",
                    "exit_code": rng.next() % 3,
                    "truncated": false,
                    "duration_ms": rng.next() % 5000,
                    "sha": rng.hex(40),
                    "path": format!("/home/user/project/{}/{}.rs", rng.word(), rng.word()),
                });
                text.push_str(&serde_json::to_string_pretty(&value).unwrap());
                text.push('\n');
            }
        }
    }
    text
}

/// Wall-clock and on-CPU time of one piece of work.
#[derive(Debug, Clone, Copy)]
struct Timing {
    wall: Duration,
    /// Time this thread spent on a CPU: what "per core" means on a shared,
    /// busy machine.
    cpu: Duration,
}

fn thread_cpu() -> Duration {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// Medians of `runs` timings of `f`.
fn median(runs: usize, mut f: impl FnMut()) -> Timing {
    let (mut walls, mut cpus): (Vec<Duration>, Vec<Duration>) = (0..runs)
        .map(|_| {
            let (wall, cpu) = (Instant::now(), thread_cpu());
            f();
            (wall.elapsed(), thread_cpu().saturating_sub(cpu))
        })
        .unzip();
    walls.sort();
    cpus.sort();
    Timing {
        wall: walls[runs / 2],
        cpu: cpus[runs / 2],
    }
}

fn counting() {
    let text = corpus(1 << 20);
    let mb = text.len() as f64 / MB;

    let start = Instant::now();
    black_box(count_tokens(Encoding::O200k, "warm up"));
    let load_o200k = start.elapsed();
    let start = Instant::now();
    black_box(count_tokens(Encoding::Cl100k, "warm up"));
    let load_cl100k = start.elapsed();

    let runs = 9;
    let scan = median(runs, || {
        // A byte scan: count word starts, the least any counter must do.
        let mut words = 0u64;
        let mut previous_space = true;
        for &b in black_box(text.as_bytes()) {
            let space = b.is_ascii_whitespace() || b.is_ascii_punctuation();
            words += u64::from(previous_space && !space);
            previous_space = space;
        }
        black_box(words);
    });
    let heuristic = median(runs, || {
        black_box(black_box(text.as_bytes()).len() / 4);
    });
    let mut tokens = (0, 0);
    let o200k = median(runs, || {
        tokens.0 = count_tokens(Encoding::O200k, black_box(&text))
    });
    let cl100k = median(runs, || {
        tokens.1 = count_tokens(Encoding::Cl100k, black_box(&text))
    });
    let mut reference = (0, 0);
    let ref_o200k = median(runs, || {
        reference.0 = bpe_openai::o200k_base().count(black_box(text.as_str())) as u64
    });
    let ref_cl100k = median(runs, || {
        reference.1 = bpe_openai::cl100k_base().count(black_box(text.as_str())) as u64
    });
    assert_eq!(
        tokens, reference,
        "Satchel's counts differ from bpe-openai's"
    );

    println!(
        "\nToken counting, {:.2} MB mixed prose/code/JSON, one thread, median of {runs} \
         (MB/s per core = on-CPU time of the counting thread)\n",
        mb
    );
    println!(
        "| what                               |     wall | MB/s wall | MB/s per core |  tokens | CPU vs byte scan |"
    );
    println!(
        "|------------------------------------|---------:|----------:|--------------:|--------:|-----------------:|"
    );
    let rate = |time: Duration| {
        if time < Duration::from_micros(1) {
            "-".to_owned()
        } else {
            format!("{:.1}", mb / time.as_secs_f64())
        }
    };
    let row = |name: &str, timing: Timing, tokens: Option<u64>| {
        println!(
            "| {name:<34} | {:>8} | {:>9} | {:>13} | {:>7} | {:>15.1}x |",
            ms(timing.wall),
            rate(timing.wall),
            rate(timing.cpu),
            tokens.map_or("-".into(), |t| t.to_string()),
            timing.cpu.as_secs_f64() / scan.cpu.as_secs_f64().max(1e-9)
        );
    };
    row("baseline: byte scan (word starts)", scan, None);
    row(
        "baseline: len / 4 heuristic",
        heuristic,
        Some(text.len() as u64 / 4),
    );
    row("count_tokens o200k_base", o200k, Some(tokens.0));
    row("count_tokens cl100k_base", cl100k, Some(tokens.1));
    row(
        "reference: bpe-openai o200k count",
        ref_o200k,
        Some(reference.0),
    );
    row(
        "reference: bpe-openai cl100k count",
        ref_cl100k,
        Some(reference.1),
    );
    let per_core = |timing: Timing| mb / timing.cpu.as_secs_f64();
    println!(
        "\nfirst use (vocabulary load): o200k {}, cl100k {}; target ≥ 20 MB/s per core: o200k {} ({:.1}), cl100k {} ({:.1}); speed-up over bpe-openai's count: o200k {:.1}x, cl100k {:.1}x",
        ms(load_o200k),
        ms(load_cl100k),
        verdict(per_core(o200k) >= 20.0),
        per_core(o200k),
        verdict(per_core(cl100k) >= 20.0),
        per_core(cl100k),
        ref_o200k.cpu.as_secs_f64() / o200k.cpu.as_secs_f64(),
        ref_cl100k.cpu.as_secs_f64() / cl100k.cpu.as_secs_f64(),
    );
    println!(
        "len/4 heuristic error on this corpus: {:+.1}% vs o200k",
        (text.len() as f64 / 4.0 / tokens.0 as f64 - 1.0) * 100.0
    );
}

fn tools() -> Vec<ToolSpec> {
    (0..8)
        .map(|i| {
            serde_json::from_value(json!({
                "name": format!("tool_{i}"),
                "description": "Run a shell command in the project directory and return its stdout, stderr and exit code. Output is kept to 10 KB.",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "command": {"type": "string", "description": "The command line to run"},
                        "timeout": {"type": "integer", "minimum": 1, "maximum": 600, "description": "Seconds"},
                        "working_dir": {"type": "string", "description": "Directory, relative to the project"}
                    },
                    "required": ["command"]
                }
            }))
            .unwrap()
        })
        .collect()
}

/// 1,000 user and 1,000 assistant messages; each assistant message makes
/// two tool calls, each answered by a tool-result message.
fn conversation() -> Vec<Message> {
    let mut rng = Rng(42);
    let mut messages = vec![Message::system(
        "You are Satchel's agent. Use tools to inspect the project before answering.",
    )];
    let mut call = 0usize;
    for turn in 0..1000 {
        let question: Vec<&str> = (0..30).map(|_| rng.pick(WORDS)).collect();
        messages.push(Message::user(format!(
            "Question {turn}: {}?",
            question.join(" ")
        )));
        let mut content = vec![AssistantPart::Text {
            text: format!("Let me check {} and {}.", rng.pick(WORDS), rng.pick(WORDS)),
        }];
        let mut results = Vec::new();
        for _ in 0..2 {
            let id = format!("call_{call:06}");
            call += 1;
            content.push(AssistantPart::ToolCall(ToolCall {
                id: id.clone(),
                name: format!("tool_{}", rng.next() % 8),
                input: json!({"command": format!("grep -rn {} src/", rng.pick(WORDS)), "timeout": 30}),
            }));
            let output = ToolOutput::success(
                ToolResults::json(json!({
                    "stdout": format!("src/lib.rs:{}: {}\nsrc/main.rs:{}: {}\n", rng.next() % 500, rng.pick(CODE), rng.next() % 500, rng.pick(CODE)),
                    "stderr": "", "exit_code": 0, "truncated": false, "timed_out": false,
                    "duration_ms": rng.next() % 100,
                })),
                "ran grep",
            );
            results.push(Message::tool_result(id, &output));
        }
        messages.push(Message::Assistant { content });
        messages.extend(results);
    }
    messages
}

fn request_building(iterations: usize) {
    let messages = conversation();
    let tools = tools();
    let request = ChatRequest::new(&messages, &tools);
    let calls: usize = messages
        .iter()
        .map(|m| match m {
            Message::Assistant { content } => content
                .iter()
                .filter(|p| matches!(p, AssistantPart::ToolCall(_)))
                .count(),
            _ => 0,
        })
        .sum();
    let env: HashMap<String, String> =
        [("ANTHROPIC_API_KEY".to_owned(), "bench".to_owned())].into();

    println!(
        "\nRequest for {} history entries ({} user + assistant messages, {calls} tool calls and their results, 8 tools); {iterations} builds each\n",
        messages.len(),
        messages
            .iter()
            .filter(|m| matches!(m, Message::User { .. } | Message::Assistant { .. }))
            .count(),
    );
    println!(
        "| format    | body MB | build p50 | build p90 | build CPU | estimate CPU (count + sections) | tokens | window share |"
    );
    println!(
        "|-----------|--------:|----------:|----------:|----------:|--------------------------------:|-------:|-------------:|"
    );
    let mut breakdowns = Vec::new();
    for (kind, base) in [
        (ProviderKind::OpenAi, "http://127.0.0.1:9/v1"),
        (ProviderKind::Anthropic, "http://127.0.0.1:9"),
    ] {
        let config = LlmConfig {
            provider: Some(kind),
            base_url: Some(base.into()),
            model: Some(match kind {
                ProviderKind::OpenAi => "gpt-4.1".into(),
                ProviderKind::Anthropic => "claude-sonnet-4-5".into(),
            }),
            ..LlmConfig::default()
        }
        .resolve(&env)
        .unwrap();
        let provider = connect(config).unwrap();
        for _ in 0..3 {
            black_box(provider.prepare(&request, Mode::Stream).unwrap());
        }
        let mut builds: Vec<Duration> = (0..iterations)
            .map(|_| {
                let start = Instant::now();
                black_box(provider.prepare(&request, Mode::Stream).unwrap());
                start.elapsed()
            })
            .collect();
        builds.sort();
        let build = median(iterations.max(1), || {
            black_box(provider.prepare(&request, Mode::Stream).unwrap());
        });
        let prepared = provider.prepare(&request, Mode::Stream).unwrap();
        // From scratch: what the first request of a session costs.
        let counted = median(5, || {
            black_box(prepared.count_fresh());
        });
        let estimate = prepared.estimate();
        let p50 = builds[builds.len() / 2];
        let p90 = builds[builds.len() * 9 / 10];
        let body_mb = prepared.body.len() as f64 / MB;
        println!(
            "| {:<9} | {:>7.2} | {:>9} | {:>9} | {:>9} | {:>31} | {:>6} | {:>11.1}% |",
            format!("{kind:?}"),
            body_mb,
            ms(p50),
            ms(p90),
            ms(build.cpu),
            format!(
                "{} ({:.1} MB/s per core)",
                ms(counted.cpu),
                body_mb / counted.cpu.as_secs_f64()
            ),
            estimate.total,
            estimate.window_share() * 100.0
        );
        breakdowns.push(format!(
            "{kind:?} breakdown: {}; build+serialise < 20 ms: {}",
            Section::ALL
                .iter()
                .map(|s| format!("{} {}", s.label(), estimate.section(*s)))
                .collect::<Vec<_>>()
                .join(", "),
            verdict(p50 < Duration::from_millis(20)),
        ));
    }
    println!();
    for line in breakdowns {
        println!("{line}");
    }
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}
