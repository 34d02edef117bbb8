//! The bot against a third-party Bot API emulator: `telegram-test-api`
//! from npm (installed into `.peers/` by `scripts/install-test-peers.sh`).
//! It implements getMe, getUpdates, sendMessage, editMessageText and
//! answerCallbackQuery its own way (no long polling: getUpdates answers at
//! once; no setMyCommands or sendChatAction: the bot must carry on past
//! those refusals). Its callback queries lack `chat_instance`, so buttons
//! are tested against `bot_api` only.

use std::io::BufRead as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::fake_model::{FakeModel, Reply};
use crate::peers::peer;
use crate::{USER, open_host, write_config};

/// Stops the emulator however the test ends.
struct Emulator(std::process::Child);

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bot_answers_through_a_third_party_bot_api_emulator() {
    let module = peer("node_modules/telegram-test-api");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/telegram_test_api.js");
    let mut emulator = Emulator(
        Command::new("node")
            .arg(&script)
            .arg(&module)
            .arg(port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut ready = String::new();
    std::io::BufReader::new(emulator.0.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert!(ready.contains("\"ready\":true"), "{ready}");
    let url = format!("http://127.0.0.1:{port}");
    let token = "123456:peer-token";

    crate::init_logs();
    let model = FakeModel::start(vec![Reply::text("Hello from **Satchel** & friends <3")]);
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &model, json!({}));
    let host = open_host(dir.path());
    let mut options = satchel_telegram::BotOptions::new(
        token.to_owned(),
        satchel_telegram::TelegramSettings {
            api_url: Some(url.clone()),
            allowed_users: vec![USER],
            ..satchel_telegram::TelegramSettings::default()
        },
        None,
        Vec::new(),
        None,
    );
    options.poll_seconds = 1;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let bot = tokio::spawn(satchel_telegram::run(
        host.clone(),
        options,
        shutdown.clone(),
    ));

    // A user writes, through the emulator's client API.
    let client = satchel_http::client_builder().unwrap().build().unwrap();
    let message = json!({
        "botToken": token,
        "date": 1_764_000_000,
        "text": "hi there",
        "from": {"id": USER, "is_bot": false, "first_name": "Ann", "username": "ann"},
        "chat": {"id": USER, "type": "private", "first_name": "Ann", "username": "ann"},
    });
    let sent: Value = client
        .post(format!("{url}/sendMessage"))
        .json(&message)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(sent["ok"], true, "{sent}");

    // The bot's messages as the emulator holds them (edits applied).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut texts: Vec<String> = Vec::new();
    while !texts.iter().any(|t| t.contains("friends")) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no answer: {texts:?}"
        );
        if bot.is_finished() {
            panic!("the bot stopped: {:?}", bot.await.unwrap());
        }
        let history: Value = client
            .post(format!("{url}/getUpdatesHistory"))
            .json(&json!({"token": token}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        texts = history["result"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|item| item["message"]["chat_id"].as_i64() == Some(USER as i64))
            .map(|item| {
                item["message"]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let answer = texts.iter().find(|t| t.contains("friends")).unwrap();
    assert!(
        answer.contains("<b>Satchel</b> &amp; friends &lt;3"),
        "{texts:?}"
    );
    assert_eq!(model.main_requests().len(), 1);
    shutdown.cancel();
    bot.await.unwrap().unwrap();
    host.close().await;
    drop(emulator);
}
