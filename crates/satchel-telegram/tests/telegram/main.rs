//! `satchel telegram` against a Bot API server that speaks Telegram's wire
//! format ([`bot_api`]) and the scripted model on the wire: the bot runs
//! in-process over a real host (SQLite store, the built-in tools, the
//! policy), as the binary runs it.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

#[path = "../../../satchel-agent/tests/support/fake_model.rs"]
#[allow(missing_docs)]
mod fake_model;

#[path = "../../../satchel-agent/tests/support/peers.rs"]
mod peers;
#[path = "../../../satchel-agent/tests/support/processes.rs"]
mod processes;

mod bot_api;
mod peer;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bot_api::{BotApi, TOKEN};
use fake_model::{FakeModel, Reply};
use processes::running;
use satchel_host::{Host, HostOptions, HostPaths};
use satchel_store::{AuditQuery, AuditSource, AuditStore as _, CodeStore as _, NewCodeExecution};
use satchel_telegram::{BotOptions, TelegramSettings, Webhook};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The user the bot serves in these tests.
const USER: u64 = 777;

/// Logs to the test's output (`RUST_LOG` chooses; warnings by default).
fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .try_init();
}

/// A bot running over a host in a temporary directory.
struct Rig {
    api: BotApi,
    model: FakeModel,
    dir: tempfile::TempDir,
    host: Arc<Host>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

fn write_config(dir: &Path, model: &FakeModel, extra: Value) {
    let config = dir.join("config");
    std::fs::create_dir_all(&config).unwrap();
    let mut settings = json!({
        "llm": {"provider": "openai", "baseUrl": model.base_url(), "model": "gpt-4o",
                "apiKeyEnv": "FAKE_KEY", "maxRetries": 0},
        "sideRequests": false,
        "permissions": {"allow": ["bash(*)"], "ask": ["bash(touch *)"]},
    });
    if let (Some(settings), Value::Object(extra)) = (settings.as_object_mut(), extra) {
        settings.extend(extra);
    }
    std::fs::write(config.join("agent.json"), settings.to_string()).unwrap();
}

fn open_host(dir: &Path) -> Arc<Host> {
    let project = dir.join("project");
    std::fs::create_dir_all(&project).unwrap();
    satchel_host::trust::init(None);
    Arc::new(
        Host::open(HostOptions {
            root: project,
            db: Some(dir.join("satchel.db")),
            paths: HostPaths {
                config: Some(dir.join("config")),
                cache: Some(dir.join("cache")),
                data: Some(dir.join("data")),
                system_tools: None,
            },
            env: [("FAKE_KEY".to_owned(), "sk-test".to_owned())].into(),
            fetcher: None,
        })
        .unwrap(),
    )
}

fn options(api: &BotApi, consent_seconds: u64) -> BotOptions {
    let mut options = BotOptions::new(
        TOKEN.to_owned(),
        TelegramSettings {
            api_url: Some(api.url()),
            allowed_users: vec![USER],
            consent_timeout_seconds: Some(consent_seconds),
            messages_per_minute: Some(1000),
            ..TelegramSettings::default()
        },
        None,
        Vec::new(),
        None,
    );
    options.poll_seconds = 1;
    options
}

impl Rig {
    async fn start(script: Vec<Reply>) -> Rig {
        Rig::start_with(script, json!({}), |options| options).await
    }

    async fn start_with(
        script: Vec<Reply>,
        extra: Value,
        adjust: impl FnOnce(BotOptions) -> BotOptions,
    ) -> Rig {
        init_logs();
        let api = BotApi::start();
        let model = FakeModel::start(script);
        let dir = tempfile::tempdir().unwrap();
        write_config(dir.path(), &model, extra);
        let mut rig = Rig {
            host: open_host(dir.path()),
            api,
            model,
            dir,
            shutdown: CancellationToken::new(),
            task: tokio::spawn(async { Ok(()) }),
        };
        rig.run(adjust(options(&rig.api, 30)));
        rig.api
            .wait_for(10, "the commands registered", |api| {
                !api.commands().is_empty()
            })
            .await;
        rig
    }

    fn run(&mut self, options: BotOptions) {
        self.shutdown = CancellationToken::new();
        self.task = tokio::spawn(satchel_telegram::run(
            self.host.clone(),
            options,
            self.shutdown.clone(),
        ));
    }

    /// Stops the bot and closes its host.
    async fn stop(&mut self) {
        self.shutdown.cancel();
        let task = std::mem::replace(&mut self.task, tokio::spawn(async { Ok(()) }));
        task.await.unwrap().unwrap();
        self.host.close().await;
    }

    /// The bot's messages to `USER` whose text contains `needle`.
    fn answers_with(&self, needle: &str) -> Vec<bot_api::ChatMessage> {
        self.api
            .bot_messages(USER as i64)
            .into_iter()
            .filter(|m| m.text.contains(needle))
            .collect()
    }

    async fn wait_for_answer(&self, needle: &str) -> bot_api::ChatMessage {
        let chat = USER as i64;
        self.api
            .wait_for(20, &format!("an answer with {needle:?}"), |api| {
                api.bot_messages(chat)
                    .iter()
                    .any(|m| m.text.contains(needle))
            })
            .await;
        self.answers_with(needle).pop().unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_is_answered_with_a_tool_call_and_the_call_is_audited_under_telegram() {
    let mut rig = Rig::start(vec![
        Reply::call("bash", json!({"command": "echo from-the-tool"})),
        Reply::text("Done: **it printed** `from-the-tool`."),
    ])
    .await;
    assert_eq!(
        rig.api.commands(),
        [
            "start",
            "help",
            "new",
            "newsession",
            "goal",
            "context",
            "codestats",
            "codefailures",
            "tools",
            "memory",
            "stop"
        ]
    );
    rig.api.user_says(USER, "run the echo please");
    let answer = rig.wait_for_answer("Done:").await;
    assert!(answer.text.contains("✅ bash"), "{}", answer.text);
    assert!(
        answer
            .text
            .contains("<b>it printed</b> <code>from-the-tool</code>"),
        "{}",
        answer.text
    );
    assert_eq!(answer.parse_mode.as_deref(), Some("HTML"));
    // The tool's output went back to the model.
    let second = &rig.model.main_requests()[1];
    assert!(fake_model::tool_contents(second)[0].contains("from-the-tool"));
    let store = rig.host.store.get().await.unwrap().clone();
    let audit = store.audit(AuditQuery::default()).await.unwrap();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].source, AuditSource::Telegram);
    assert_eq!(audit[0].caller.as_deref(), Some("telegram:777"));
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_answers() {
    let mut rig = Rig::start(vec![Reply::text("first answer")]).await;
    let chat = USER as i64;
    let say = |said: &'static str, expected: &'static str| {
        let api = rig.api.clone();
        async move {
            let before = api.bot_messages(chat).len();
            api.user_says(USER, said);
            api.wait_for(20, &format!("{said} to answer {expected:?}"), |api| {
                api.bot_messages(chat)[before..]
                    .iter()
                    .any(|m| m.text.contains(expected))
            })
            .await;
        }
    };
    say("/start", "I am Satchel").await;
    say("/help", "/codefailures").await;
    say("hello", "first answer").await;
    // Code runs: two of this chat's conversation, one of another (the
    // owner's at a terminal), which /codestats must not show.
    let store = rig.host.store.get().await.unwrap().clone();
    let mine = satchel_store::ConversationStore::list_conversations(&store, 1)
        .await
        .unwrap()[0]
        .conversation
        .id
        .clone();
    for (success, category, conversation) in [
        (true, None, Some(mine.clone())),
        (false, Some("syntax"), Some(mine)),
        (false, Some("import"), None),
    ] {
        store
            .record_execution(NewCodeExecution {
                language: "python".into(),
                runtime: "python3".into(),
                code: "print(".into(),
                success,
                error_category: category.map(str::to_owned),
                error_message: category.map(|_| "SyntaxError: '(' was never closed".to_owned()),
                exit_code: Some(i32::from(!success)),
                sandbox: "none".into(),
                conversation_id: conversation,
                ..NewCodeExecution::default()
            })
            .await
            .unwrap();
    }
    let expectations: &[(&str, &str)] = &[
        (
            "/goal write a poem about rust",
            "Goal set: write a poem about rust",
        ),
        ("/goal", "Goal: write a poem about rust"),
        ("/context", "tokens of a"),
        ("/tools", "<b>bash</b>"),
        ("/codestats", "Code runs, last 7 days: 2 (1 ok, 1 failed)"),
        ("/codefailures 3", "SyntaxError"),
        ("/memory", "memories"),
        ("/memory poems", "Nothing recalled"),
        ("/newsession evening", "New memory session started"),
        ("/new", "New conversation."),
        ("/frobnicate", "Unknown command /frobnicate"),
        ("/stop", "Nothing is running."),
    ];
    for (said, expected) in expectations {
        let before = rig.api.bot_messages(chat).len();
        rig.api.user_says(USER, said);
        rig.api
            .wait_for(20, &format!("{said} to answer {expected:?}"), |api| {
                api.bot_messages(chat)[before..]
                    .iter()
                    .any(|m| m.text.contains(expected))
            })
            .await;
    }
    // Only this chat's code runs: the owner's import error is not shown.
    assert!(rig.answers_with("import").is_empty());
    // /codestats also sent its chart.
    let photos: Vec<_> = rig
        .api
        .bot_messages(chat)
        .into_iter()
        .filter_map(|m| m.file)
        .collect();
    assert!(
        photos
            .iter()
            .any(|(name, size)| name == "codestats.png" && *size > 1000),
        "{photos:?}"
    );
    assert!(rig.api.calls().contains(&"sendPhoto".to_owned()));
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_and_groups_are_refused_once_and_never_reach_the_model() {
    let mut rig = Rig::start(vec![]).await;
    let stranger = 555u64;
    for text in ["hello?", "anyone?", "/start"] {
        rig.api.user_says(stranger, text);
    }
    rig.api.user_says_in_group(USER, -100, "hi group");
    rig.api
        .wait_for(10, "the refusals", |api| {
            !api.bot_messages(stranger as i64).is_empty() && !api.bot_messages(-100).is_empty()
        })
        .await;
    // The inbox is drained: every update handled.
    let store = rig.host.store.get().await.unwrap().front_end_store();
    let channel = format!("telegram:{}", bot_api::BOT_ID);
    rig.api.wait_for(10, "the inbox to drain", |_| true).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(store.inbox_pending(&channel).await.unwrap().is_empty());
    let refusals = rig.api.bot_messages(stranger as i64);
    assert_eq!(refusals.len(), 1, "one polite refusal: {refusals:?}");
    assert!(refusals[0].text.contains("Sorry"));
    assert!(rig.api.bot_messages(-100)[0].text.contains("private chats"));
    assert!(
        rig.model.main_requests().is_empty(),
        "the model saw nothing"
    );
    rig.stop().await;
}

/// The consent question in `USER`'s chat, once it is there.
async fn question(rig: &Rig) -> bot_api::ChatMessage {
    let chat = USER as i64;
    rig.api
        .wait_for(20, "a consent question", |api| {
            api.bot_messages(chat).iter().any(|m| !m.buttons.is_empty())
        })
        .await;
    rig.api
        .bot_messages(chat)
        .into_iter()
        .find(|m| !m.buttons.is_empty())
        .unwrap()
}

fn touch(path: &Path) -> Reply {
    Reply::call(
        "bash",
        json!({"command": format!("touch {}", path.display())}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consent_is_asked_with_buttons_and_allowed_once() {
    let marker = tempfile::tempdir().unwrap();
    let file = marker.path().join("allowed");
    let mut rig = Rig::start(vec![touch(&file), Reply::text("created it")]).await;
    rig.api.user_says(USER, "make the file");
    let question = question(&rig).await;
    assert!(question.text.contains("touch"), "{}", question.text);
    assert_eq!(question.buttons.len(), 3, "{:?}", question.buttons);
    assert!(!file.exists(), "nothing runs before the answer");
    let once = question
        .buttons
        .iter()
        .find(|b| b.ends_with(":once"))
        .unwrap();
    rig.api
        .user_presses(USER, USER as i64, question.message_id, once);
    rig.wait_for_answer("created it").await;
    assert!(file.exists());
    let asked = rig
        .api
        .bot_messages(USER as i64)
        .into_iter()
        .find(|m| m.message_id == question.message_id)
        .unwrap();
    assert!(
        asked.text.contains("allowed once") && asked.buttons.is_empty(),
        "{asked:?}"
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_question_is_a_refusal_the_model_is_told() {
    let marker = tempfile::tempdir().unwrap();
    let file = marker.path().join("never");
    let mut rig = Rig::start_with(
        vec![touch(&file), Reply::text("could not")],
        json!({}),
        |mut options| {
            options.consent_timeout = Duration::from_secs(1);
            options
        },
    )
    .await;
    rig.api.user_says(USER, "make the file");
    rig.wait_for_answer("could not").await;
    assert!(!file.exists());
    let told = fake_model::tool_contents(&rig.model.main_requests()[1]).join("\n");
    assert!(told.contains("nobody answered"), "{told}");
    assert!(!rig.answers_with("no answer: refused").is_empty());
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_button_pressed_by_someone_else_does_not_count() {
    let marker = tempfile::tempdir().unwrap();
    let file = marker.path().join("denied");
    let mut rig = Rig::start(vec![touch(&file), Reply::text("refused, fine")]).await;
    rig.api.user_says(USER, "make the file");
    let question = question(&rig).await;
    let once = question
        .buttons
        .iter()
        .find(|b| b.ends_with(":once"))
        .unwrap();
    let intruder = rig
        .api
        .user_presses(999, USER as i64, question.message_id, once);
    rig.api
        .wait_for(10, "the intruder's press answered", |api| {
            api.callback_answers()
                .iter()
                .any(|(id, _, _)| *id == intruder)
        })
        .await;
    let (_, text, alert) = rig
        .api
        .callback_answers()
        .into_iter()
        .find(|(id, _, _)| *id == intruder)
        .unwrap();
    assert!(alert && text.unwrap().contains("Only the person"));
    assert!(!file.exists());
    let deny = question
        .buttons
        .iter()
        .find(|b| b.ends_with(":deny"))
        .unwrap();
    rig.api
        .user_presses(USER, USER as i64, question.message_id, deny);
    rig.wait_for_answer("refused, fine").await;
    assert!(!file.exists());
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_answers_are_split_at_paragraphs_and_very_long_ones_come_as_a_file() {
    let paragraph = |i: usize| format!("Paragraph {i} begins. {}ends.", "word ".repeat(120));
    let long: Vec<String> = (0..12).map(paragraph).collect();
    let huge: Vec<String> = (0..40).map(paragraph).collect();
    let mut rig = Rig::start(vec![
        Reply::Text(long.join("\n\n")),
        Reply::Text(huge.join("\n\n")),
    ])
    .await;
    let chat = USER as i64;
    rig.api.user_says(USER, "say a lot");
    rig.wait_for_answer("Paragraph 11 begins").await;
    let messages = rig.api.bot_messages(chat);
    assert!(messages.len() >= 2, "{}", messages.len());
    let all: String = messages
        .iter()
        .map(|m| m.text.clone())
        .collect::<Vec<_>>()
        .join("\n");
    for i in 0..12 {
        assert_eq!(
            all.matches(&format!("Paragraph {i} begins")).count(),
            1,
            "paragraph {i}"
        );
    }
    for message in &messages {
        let visible = bot_api::check_html(&message.text).unwrap();
        assert!(visible <= 4096);
        assert!(
            message.text.trim_end().ends_with("ends."),
            "cut at a paragraph: {message:?}"
        );
    }
    rig.api.user_says(USER, "say even more");
    rig.api
        .wait_for(20, "the answer as a file", |api| {
            api.bot_messages(chat)
                .iter()
                .any(|m| m.file.as_ref().is_some_and(|(name, _)| name == "answer.md"))
        })
        .await;
    let file = rig
        .api
        .bot_messages(chat)
        .into_iter()
        .find_map(|m| m.file)
        .unwrap();
    assert!(file.1 >= huge.join("\n\n").len(), "{file:?}");
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_answers_are_delivered_and_a_parse_error_falls_back_to_plain_text() {
    let hostile = "<script>alert(1)</script>\n\nAnd & **unbalanced *stars <img src=x onerror=alert(2)> `<b>` [x](javascript:alert(3))";
    let mut rig = Rig::start(vec![
        Reply::text(hostile),
        Reply::text("plain **after** refusal"),
    ])
    .await;
    rig.api.user_says(USER, "be hostile");
    let answer = rig.wait_for_answer("alert(1)").await;
    assert!(answer.text.contains("&lt;script&gt;"), "{}", answer.text);
    assert!(!answer.text.contains("<script") && !answer.text.contains("<img"));
    assert!(
        answer.text.contains("<code>&lt;b&gt;</code>"),
        "{}",
        answer.text
    );
    assert!(
        !answer.text.contains("href=\"javascript"),
        "{}",
        answer.text
    );
    // Telegram refuses the HTML once: the answer arrives as plain text.
    rig.api.refuse_next_html();
    rig.api.user_says(USER, "again");
    // The message the refused HTML was for was sent as plain text (later
    // edits may be HTML again): nothing was lost.
    let answer = rig.wait_for_answer("after").await;
    assert_eq!(answer.parse_mode, None, "{answer:?}");
    assert!(answer.text.contains("refusal"), "{}", answer.text);
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_during_a_long_sleep_ends_the_statement_and_its_processes() {
    // A duration no other test uses, to find the process by.
    let marker = format!("59.{}", std::process::id());
    let command = format!("sleep {marker} & wait");
    let mut rig = Rig::start(vec![
        Reply::call("bash", json!({"command": command, "timeout": 120})),
        Reply::text("never shown"),
    ])
    .await;
    rig.api.user_says(USER, "sleep a minute");
    rig.api
        .wait_for(20, "the sleep to start", |_| {
            running(&format!("sleep {marker}"))
        })
        .await;
    rig.api.user_says(USER, "/stop");
    rig.wait_for_answer("Stopping").await;
    rig.wait_for_answer("Stopped.").await;
    rig.api
        .wait_for(10, "the sleep to be gone", |_| {
            !running(&format!("sleep {marker}"))
        })
        .await;
    assert!(rig.answers_with("never shown").is_empty());
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_in_the_middle_of_a_burst_loses_nothing_and_answers_nothing_twice() {
    let mut rig = Rig::start(vec![]).await;
    rig.model.echo_when_exhausted(Duration::from_millis(300));
    let count = 8;
    for i in 0..count {
        rig.api.user_says(USER, &format!("msg-{i}-end"));
    }
    rig.wait_for_answer("echo: msg-1-end").await;
    // Stop in the middle: some answered, one perhaps interrupted, the
    // rest waiting in the inbox.
    rig.stop().await;
    let answered_before = (0..count)
        .filter(|i| !rig.answers_with(&format!("echo: msg-{i}-end")).is_empty())
        .count();
    assert!(answered_before < count, "the stop came in the middle");
    rig.host = open_host(rig.dir.path());
    let options = options(&rig.api, 30);
    rig.run(options);
    let chat = USER as i64;
    rig.api
        .wait_for(40, "every message answered", |api| {
            (0..count).all(|i| {
                api.bot_messages(chat).iter().any(|m| {
                    m.text.contains(&format!("echo: msg-{i}-end"))
                        && !m.text.contains("Interrupted")
                })
            })
        })
        .await;
    for i in 0..count {
        let complete: Vec<_> = rig
            .answers_with(&format!("echo: msg-{i}-end"))
            .into_iter()
            .filter(|m| !m.text.contains("Interrupted"))
            .collect();
        assert_eq!(complete.len(), 1, "msg-{i} answered once: {complete:?}");
    }
    // In order: each answer after the previous one.
    let order: Vec<usize> = rig
        .api
        .bot_messages(chat)
        .iter()
        .filter(|m| !m.text.contains("Interrupted"))
        .filter_map(|m| (0..count).find(|i| m.text.contains(&format!("echo: msg-{i}-end"))))
        .collect();
    assert_eq!(order, (0..count).collect::<Vec<_>>());
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_chats_are_answered_at_once_each_in_its_own_conversation() {
    let mut rig = Rig::start_with(vec![], json!({}), |mut options| {
        options.allowed_users = (1..=20).collect();
        options
    })
    .await;
    rig.model.echo_when_exhausted(Duration::from_millis(200));
    for user in 1..=20u64 {
        rig.api.user_says(user, &format!("hello from {user} end"));
    }
    rig.api
        .wait_for(60, "twenty answers", |api| {
            (1..=20i64).all(|user| {
                api.bot_messages(user)
                    .iter()
                    .any(|m| m.text.contains(&format!("echo: hello from {user} end")))
            })
        })
        .await;
    for user in 1..=20i64 {
        let wrong: Vec<_> = rig
            .api
            .bot_messages(user)
            .into_iter()
            .filter(|m| m.text.contains("echo:") && !m.text.contains(&format!("from {user} end")))
            .collect();
        assert!(
            wrong.is_empty(),
            "chat {user} got another chat's answer: {wrong:?}"
        );
    }
    let store = rig.host.store.get().await.unwrap().clone();
    let conversations = satchel_store::ConversationStore::list_conversations(&store, 100)
        .await
        .unwrap();
    assert_eq!(conversations.len(), 20);
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_sends_wait_out_retry_after() {
    let mut rig = Rig::start(vec![Reply::text("through the throttle")]).await;
    rig.api.throttle(2);
    rig.api.user_says(USER, "hi");
    rig.wait_for_answer("through the throttle").await;
    let calls = rig.api.calls();
    let sends = calls.iter().filter(|c| *c == "sendMessage").count();
    assert!(sends >= 3, "two refused, then sent: {calls:?}");
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_takes_only_requests_with_the_secret() {
    let listen = {
        let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        socket.local_addr().unwrap()
    };
    let url = format!("http://{listen}/telegram/hook");
    let mut rig = Rig::start_with(vec![Reply::text("by webhook")], json!({}), |mut options| {
        options.webhook = Some(Webhook {
            url: url.clone(),
            listen,
        });
        options
    })
    .await;
    rig.api
        .wait_for(10, "setWebhook", |api| {
            api.calls().contains(&"setWebhook".to_owned())
        })
        .await;
    let secret = rig.api.webhook_secret().unwrap();
    let client = satchel_http::client_builder().unwrap().build().unwrap();
    let update = json!({"update_id": 5, "message": {
        "message_id": 1, "date": 1, "text": "over the hook",
        "from": {"id": USER, "is_bot": false, "first_name": "U"},
        "chat": {"id": USER, "type": "private"}}});
    let refused = client.post(&url).json(&update).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let wrong = client
        .post(&url)
        .header("X-Telegram-Bot-Api-Secret-Token", "guess")
        .json(&update)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(rig.model.main_requests().is_empty());
    let accepted = client
        .post(&url)
        .header("X-Telegram-Bot-Api-Secret-Token", &secret)
        .json(&update)
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.status(), 200);
    rig.wait_for_answer("by webhook").await;
    // Delivered again (Telegram retries): not answered twice.
    let again = client
        .post(&url)
        .header("X-Telegram-Bot-Api-Secret-Token", &secret)
        .json(&update)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 200);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rig.answers_with("by webhook").len(), 1);
    assert!(!rig.api.calls().contains(&"getUpdates".to_owned()));
    // Deliveries out of order (a retry after a later update): both answered.
    rig.model.echo_when_exhausted(Duration::ZERO);
    for (id, text) in [(9, "nine-end"), (8, "eight-end")] {
        let update = json!({"update_id": id, "message": {
            "message_id": id, "date": 1, "text": text,
            "from": {"id": USER, "is_bot": false, "first_name": "U"},
            "chat": {"id": USER, "type": "private"}}});
        let response = client
            .post(&url)
            .header("X-Telegram-Bot-Api-Secret-Token", &secret)
            .json(&update)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    rig.wait_for_answer("echo: nine-end").await;
    rig.wait_for_answer("echo: eight-end").await;
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_chat_remembers_in_its_own_namespace() {
    let other = 888u64;
    let mut rig = Rig::start_with(
        vec![
            Reply::call(
                "memory",
                json!({"action": "store", "layer": "long", "content": "Ann drinks green tea every morning"}),
            ),
            Reply::text("noted"),
        ],
        json!({}),
        |mut options| {
            options.allowed_users = vec![USER, other];
            options
        },
    )
    .await;
    rig.api.user_says(USER, "remember my tea");
    rig.wait_for_answer("noted").await;
    assert!(rig.answers_with("✅ memory").len() == 1);
    rig.api.user_says(USER, "/memory green tea");
    rig.wait_for_answer("Ann drinks green tea").await;
    rig.api.user_says(other, "/memory green tea");
    rig.api
        .wait_for(20, "the other chat's recall", |api| {
            api.bot_messages(other as i64)
                .iter()
                .any(|m| m.text.contains("Nothing recalled"))
        })
        .await;
    let memory = rig.host.memory.get_in(Some("telegram-777")).await.unwrap();
    assert_eq!(memory.stats().await.unwrap().total, 1);
    let shared = rig.host.memory.get().await.unwrap();
    assert_eq!(
        shared.stats().await.unwrap().total,
        0,
        "not in the configured namespace"
    );
    rig.stop().await;
}

/// A chat quiet past `idle_chat` has its conversation put away; its next
/// message takes the same conversation up again from the record, so the
/// model sees the earlier exchange.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_chat_is_put_away_and_taken_up_again_from_the_record() {
    let mut rig = Rig::start_with(
        vec![
            Reply::text("First answer: noted the number 4711."),
            Reply::text("Second answer."),
        ],
        json!({}),
        |mut options| {
            options.idle_chat = std::time::Duration::from_millis(300);
            options
        },
    )
    .await;
    rig.api.user_says(USER, "remember the number 4711");
    rig.wait_for_answer("First answer").await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    rig.api.user_says(USER, "which number was it?");
    rig.wait_for_answer("Second answer").await;
    let requests = rig.model.main_requests();
    let second = serde_json::to_string(&requests[1]).unwrap();
    assert!(
        second.contains("remember the number 4711") && second.contains("noted the number 4711"),
        "the earlier exchange is not in the second request: {second}"
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_answer_goes_out_whole_before_the_side_requests_come_back() {
    // Too long for one message: the live message shows only its first
    // part, the rest goes out once the answer is delivered. A local
    // server: side requests follow the answer, and these take longer than
    // the wait below allows.
    let paragraph = |i: usize| format!("Paragraph {i} begins. {}ends.", "word ".repeat(120));
    let long: Vec<String> = (0..12).map(paragraph).collect();
    let mut rig = Rig::start_with(
        vec![Reply::Text(long.join("\n\n"))],
        json!({"sideRequests": true, "sideRequestTiming": "sequential"}),
        |options| options,
    )
    .await;
    rig.model
        .delay_side_requests(std::time::Duration::from_secs(40));
    rig.api.user_says(USER, "say a lot");
    rig.wait_for_answer("Paragraph 11 begins").await;
    assert!(
        !rig.model.side_requests().is_empty(),
        "the side requests were never asked"
    );
    rig.stop().await;
}
