//! 100 simulated users sending 5 messages each (one after the other, each
//! once the previous is answered) to `satchel telegram` over a Bot API
//! server that speaks Telegram's wire format and the scripted model, which
//! takes `MODEL_MS` per answer. Checked: every message answered exactly
//! once, in order per chat. Measured: the time from a message's arrival at
//! the Bot API to its answer appearing there (p50, p95), against a bare
//! bot in the same run (getUpdates, one model call, sendMessage: the least
//! any bot can do with this model and API); Satchel's added latency is the
//! difference. Peak RSS of the process is sampled while the bot runs.
//!
//! `cargo bench -p satchel-telegram --bench burst` (`BURST_USERS`,
//! `BURST_MESSAGES`, `BURST_MODEL_MS` change the load; `BURST_IDLE_SECS`,
//! default 3, is how long a chat stays quiet before its conversation is
//! put away, and memory is read again once every chat was idle).

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../tests/telegram/bot_api.rs"]
mod bot_api;
#[path = "../../satchel-agent/tests/support/fake_model.rs"]
mod fake_model;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bot_api::{BotApi, TOKEN};
use fake_model::FakeModel;
use satchel_host::{Host, HostOptions, HostPaths};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Resident memory now, in MiB.
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// The text of user `user`'s message `n`.
fn text(user: u64, n: u64) -> String {
    format!("u{user}-m{n}-end")
}

/// Every message's latency, sorted, and the same split into each chat's
/// first message (which opens its conversation) and the later ones.
struct Latencies {
    all: Vec<Duration>,
    first: Vec<Duration>,
    later: Vec<Duration>,
}

/// Sends each user's messages one after another, each once the previous
/// is answered; returns every message's latency (arrival at the Bot API
/// to the first time its answer shows there).
async fn users(api: &BotApi, users: u64, messages: u64) -> Latencies {
    let mut tasks = Vec::new();
    for user in 1..=users {
        let api = api.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            for n in 0..messages {
                let expected = format!("echo: {}", text(user, n));
                let changed = api.changed();
                let sent = Instant::now();
                api.user_says(user, &text(user, n));
                let answered_at = loop {
                    let notified = changed.notified();
                    let found = api.bot_messages(user as i64).iter().find_map(|m| {
                        m.history
                            .iter()
                            .find(|(_, text)| text.contains(&expected))
                            .map(|(at, _)| *at)
                    });
                    if let Some(at) = found {
                        break at;
                    }
                    let _ = tokio::time::timeout(Duration::from_secs(1), notified).await;
                    assert!(
                        sent.elapsed() < Duration::from_secs(120),
                        "{expected} unanswered"
                    );
                };
                latencies.push(answered_at.saturating_duration_since(sent));
            }
            latencies
        }));
    }
    let (mut all, mut first, mut later) = (Vec::new(), Vec::new(), Vec::new());
    for task in tasks {
        let chat = task.await.unwrap();
        all.extend(&chat);
        first.extend(chat.first());
        later.extend(chat.iter().skip(1));
    }
    for sorted in [&mut all, &mut first, &mut later] {
        sorted.sort();
    }
    Latencies { all, first, later }
}

/// The least a bot can do: long-poll, ask the model (one non-streamed
/// call), send the answer; each update handled on its own task.
async fn bare_bot(api_url: String, model_url: String, stop: CancellationToken) {
    let http = satchel_http::client_builder().unwrap().build().unwrap();
    let base = format!("{api_url}/bot{TOKEN}");
    let mut offset = 0i64;
    while !stop.is_cancelled() {
        let updates: Value = http
            .post(format!("{base}/getUpdates"))
            .json(&json!({"offset": offset, "timeout": 1}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        for update in updates["result"].as_array().cloned().unwrap_or_default() {
            offset = offset.max(update["update_id"].as_i64().unwrap() + 1);
            let (http, base, model_url) = (http.clone(), base.clone(), model_url.clone());
            tokio::spawn(async move {
                let chat = update["message"]["chat"]["id"].as_i64().unwrap();
                let said = update["message"]["text"].as_str().unwrap_or_default();
                let reply: Value = http
                    .post(format!("{model_url}/chat/completions"))
                    .json(&json!({"model": "m", "messages": [{"role": "user", "content": said}]}))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                let answer = reply["choices"][0]["message"]["content"]
                    .as_str()
                    .unwrap_or("?");
                http.post(format!("{base}/sendMessage"))
                    .json(&json!({"chat_id": chat, "text": answer}))
                    .send()
                    .await
                    .unwrap();
            });
        }
    }
}

fn host(dir: &std::path::Path, model: &FakeModel) -> Arc<Host> {
    let config = dir.join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::create_dir_all(dir.join("project")).unwrap();
    std::fs::write(
        config.join("agent.json"),
        json!({
            "llm": {"provider": "openai", "baseUrl": model.base_url(), "model": "gpt-4o",
                    "apiKeyEnv": "FAKE_KEY", "maxRetries": 0},
            "sideRequests": false,
        })
        .to_string(),
    )
    .unwrap();
    satchel_host::trust::init(None);
    Arc::new(
        Host::open(HostOptions {
            root: dir.join("project"),
            db: Some(dir.join("satchel.db")),
            paths: HostPaths {
                config: Some(config),
                cache: Some(dir.join("cache")),
                data: Some(dir.join("data")),
                system_tools: None,
            },
            env: [("FAKE_KEY".to_owned(), "sk-bench".to_owned())].into(),
            fetcher: None,
        })
        .unwrap(),
    )
}

/// One run of the bot under the load.
struct Pass {
    latencies: Latencies,
    wall: Duration,
    rss_before: f64,
    peak_rss: f64,
    /// Once every chat was idle past `idle_chat` (conversations put away).
    idle_rss: f64,
}

async fn satchel_pass(
    user_count: u64,
    messages: u64,
    delay: Duration,
    sends_per_second: u32,
) -> Pass {
    let api = BotApi::start();
    let model = FakeModel::start(Vec::new());
    model.echo_when_exhausted(delay);
    // 500 request bodies kept by the fake would count as Satchel's memory.
    model.forget_bodies();
    let dir = tempfile::tempdir().unwrap();
    let host = host(dir.path(), &model);
    let mut options = satchel_telegram::BotOptions::new(
        TOKEN.to_owned(),
        satchel_telegram::TelegramSettings {
            api_url: Some(api.url()),
            allowed_users: (1..=user_count).collect(),
            messages_per_minute: Some(10_000),
            sends_per_second: Some(sends_per_second),
            ..satchel_telegram::TelegramSettings::default()
        },
        None,
        Vec::new(),
        None,
    );
    options.poll_seconds = 1;
    let idle = Duration::from_secs(env_number("BURST_IDLE_SECS", 3));
    options.idle_chat = idle;
    let rss_before = rss_mib();
    let stop = CancellationToken::new();
    let bot = tokio::spawn(satchel_telegram::run(host.clone(), options, stop.clone()));
    let peak = Arc::new(std::sync::Mutex::new(rss_before));
    let sampler = {
        let peak = peak.clone();
        tokio::spawn(async move {
            loop {
                let now = rss_mib();
                {
                    let mut peak = peak.lock().unwrap();
                    *peak = peak.max(now);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let started = Instant::now();
    let latencies = users(&api, user_count, messages).await;
    let wall = started.elapsed();
    sampler.abort();
    // Every message answered exactly once, in order per chat.
    for user in 1..=user_count {
        let answers: Vec<u64> = api
            .bot_messages(user as i64)
            .iter()
            .filter_map(|m| {
                (0..messages).find(|n| m.text.contains(&format!("echo: {}", text(user, *n))))
            })
            .collect();
        assert_eq!(
            answers,
            (0..messages).collect::<Vec<_>>(),
            "user {user}: each message answered once, in order"
        );
    }
    tokio::time::sleep(idle + Duration::from_secs(2)).await;
    let idle_rss = rss_mib();
    stop.cancel();
    bot.await.unwrap().unwrap();
    host.close().await;
    let peak_rss = *peak.lock().unwrap();
    Pass {
        latencies,
        wall,
        rss_before,
        peak_rss,
        idle_rss,
    }
}

fn row(name: &str, latencies: &[Duration]) -> (Duration, Duration) {
    let (p50, p95) = (percentile(latencies, 0.5), percentile(latencies, 0.95));
    println!(
        "{name:28} {:>6} {:>10.1} {:>10.1}",
        latencies.len(),
        p50.as_secs_f64() * 1000.0,
        p95.as_secs_f64() * 1000.0
    );
    (p50, p95)
}

fn main() {
    let user_count = env_number("BURST_USERS", 100);
    let messages = env_number("BURST_MESSAGES", 5);
    let model_ms = env_number("BURST_MODEL_MS", 100);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // A bot that has run on this machine before finds the token
    // vocabularies cached (`$XDG_CACHE_HOME/satchel/tokens`, named by the
    // binary); this process names no cache, so they are built here, once,
    // before anything is timed: otherwise the first messages of the first
    // run wait for them.
    let started = Instant::now();
    satchel_llm::count_tokens(satchel_llm::Encoding::O200k, "warm");
    satchel_llm::count_tokens(satchel_llm::Encoding::Cl100k, "warm");
    println!(
        "token vocabularies built before the timed runs in {:.1} s (a machine's first count; cached after)",
        started.elapsed().as_secs_f64()
    );
    runtime.block_on(async {
        let delay = Duration::from_millis(model_ms);
        println!(
            "{user_count} users x {messages} messages, each sent once the previous is answered; \
             the scripted model takes {model_ms} ms per answer\n"
        );
        println!(
            "{:28} {:>6} {:>10} {:>10}",
            "bot", "msgs", "p50 ms", "p95 ms"
        );

        // The baseline: a bare bot against the same kind of servers.
        let api = BotApi::start();
        let model = FakeModel::start(Vec::new());
        model.echo_when_exhausted(delay);
        let stop = CancellationToken::new();
        let bare = tokio::spawn(bare_bot(api.url(), model.base_url(), stop.clone()));
        let started = Instant::now();
        let baseline = users(&api, user_count, messages).await;
        let bare_wall = started.elapsed();
        stop.cancel();
        let _ = bare.await;
        let (bare_p50, bare_p95) = row("bare (poll, model, send)", &baseline.all);

        // Satchel, unpaced (its own overhead), then paced as for Telegram.
        let own = satchel_pass(user_count, messages, delay, 0).await;
        let (p50, p95) = row("satchel telegram, unpaced", &own.latencies.all);
        if messages > 1 {
            row("  each chat's first message", &own.latencies.first);
            row("  the later ones", &own.latencies.later);
        }
        let paced = satchel_pass(user_count, messages, delay, 25).await;
        row("satchel telegram, 25 sends/s", &paced.latencies.all);

        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "\nSatchel's added latency per message: p50 {:.1} ms, p95 {:.1} ms \
             (the model's own time: {model_ms} ms)",
            ms(p50.saturating_sub(bare_p50)),
            ms(p95.saturating_sub(bare_p95))
        );
        println!(
            "ratio to the bare bot: p50 {:.2}x, p95 {:.2}x; wall time {:.1} s vs {:.1} s",
            ms(p50) / ms(bare_p50).max(0.001),
            ms(p95) / ms(bare_p95).max(0.001),
            own.wall.as_secs_f64(),
            bare_wall.as_secs_f64()
        );
        println!(
            "paced at 25 sends/s (under Telegram's 30 per second for all chats), \
             {} answers take at least {:.0} s: wall time {:.1} s",
            user_count * messages,
            (user_count * messages) as f64 / 25.0,
            paced.wall.as_secs_f64()
        );
        println!(
            "resident memory: {:.0} MiB before the bot, peak {:.0} MiB while it ran, \
             {:.0} MiB once every chat was idle (÷ before: {:.2}; the process also holds \
             the Bot API server and the model)",
            own.rss_before,
            own.peak_rss,
            own.idle_rss,
            own.idle_rss / own.rss_before.max(0.001)
        );
        println!("every message answered exactly once, in order per chat: yes");
    });
}
