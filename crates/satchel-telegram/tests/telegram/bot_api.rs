//! A Bot API server on 127.0.0.1 that speaks Telegram's documented wire
//! format for the methods the bot uses: `getMe`, `getUpdates` (long
//! polling, offsets acknowledging), `sendMessage` and `editMessageText`
//! (HTML checked as Telegram checks it: known tags, balanced, entities
//! escaped, 4,096 characters), `sendDocument` and `sendPhoto`
//! (multipart), `answerCallbackQuery`, `setMyCommands`, `sendChatAction`,
//! `deleteWebhook`. Faults on demand: 429 with `retry_after`, and a
//! parse error for the next HTML message.
//!
//! Users are simulated through [`BotApi::user_says`] and
//! [`BotApi::user_presses`]; what the bot did is read back from the
//! chats' messages (their text after every edit).

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Multipart, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// The token the server accepts.
pub const TOKEN: &str = "4242:test-token-AAAA";
/// The bot's own id and name.
pub const BOT_ID: u64 = 4242;
pub const BOT_NAME: &str = "satchel_test_bot";

/// One message in a chat, as the user sees it now.
#[derive(Debug, Clone)]
pub struct ChatMessage {
    pub message_id: i64,
    /// `bot` or `user`.
    pub from_bot: bool,
    /// The text (after the latest edit), with tags as sent.
    pub text: String,
    /// How many times the bot edited it.
    pub edits: u32,
    /// The inline keyboard's buttons' data, if it has one.
    pub buttons: Vec<String>,
    /// A document's or photo's file name and size.
    pub file: Option<(String, usize)>,
    /// `HTML` or none.
    pub parse_mode: Option<String>,
    /// Every text it had, with when (sent, then each edit).
    pub history: Vec<(std::time::Instant, String)>,
}

#[derive(Default)]
struct Inner {
    /// Every update ever queued, by id.
    updates: BTreeMap<i64, Value>,
    next_update: i64,
    next_message: i64,
    chats: BTreeMap<i64, Vec<ChatMessage>>,
    /// Method names called, in order.
    calls: Vec<String>,
    /// Answers to callback queries: (query id, text, alert).
    callback_answers: Vec<(String, Option<String>, bool)>,
    commands: Vec<String>,
    /// The next this many sends are answered 429.
    throttle: u32,
    /// The next HTML message is refused as unparseable.
    refuse_html: bool,
    /// The highest offset a getUpdates acknowledged.
    acknowledged: i64,
    /// The secret token setWebhook registered.
    webhook_secret: Option<String>,
    /// Woken whenever the bot sends or edits a message.
    changed: Arc<tokio::sync::Notify>,
}

/// The running server.
#[derive(Clone)]
pub struct BotApi {
    inner: Arc<Mutex<Inner>>,
    wake: Arc<tokio::sync::Notify>,
    pub addr: SocketAddr,
}

fn ok(result: Value) -> Response {
    axum::Json(json!({"ok": true, "result": result})).into_response()
}

fn refuse(status: u16, description: &str, retry_after: Option<u64>) -> Response {
    let mut body = json!({"ok": false, "error_code": status, "description": description});
    if let Some(seconds) = retry_after {
        body["parameters"] = json!({"retry_after": seconds});
    }
    (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
}

/// Checks HTML as Telegram does; the visible length or why not.
pub fn check_html(text: &str) -> Result<usize, String> {
    const TAGS: &[&str] = &[
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "span",
        "tg-spoiler",
        "a",
        "code",
        "pre",
        "blockquote",
        "tg-emoji",
    ];
    let mut open: Vec<String> = Vec::new();
    let mut visible = 0usize;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let offset = text.len() - rest.len();
        match c {
            '<' => {
                let end = rest
                    .find('>')
                    .ok_or(format!("Unclosed start tag at byte offset {offset}"))?;
                let tag = &rest[1..end];
                if let Some(name) = tag.strip_prefix('/') {
                    let name = name.trim();
                    match open.pop() {
                        Some(top) if top == name => {}
                        _ => {
                            return Err(format!(
                                "Unmatched end tag at byte offset {offset}, expected \"</{}>\"",
                                open.last().cloned().unwrap_or_default()
                            ));
                        }
                    }
                } else {
                    let name: String = tag
                        .chars()
                        .take_while(|c| !c.is_whitespace() && *c != '/')
                        .collect();
                    if !TAGS.contains(&name.as_str()) {
                        return Err(format!(
                            "Unsupported start tag \"{name}\" at byte offset {offset}"
                        ));
                    }
                    open.push(name);
                }
                rest = &rest[end + 1..];
            }
            '&' => {
                let end = rest.find(';').filter(|end| *end <= 10).ok_or(format!(
                    "Can't find end of the entity starting at byte offset {offset}"
                ))?;
                let entity = &rest[1..end];
                let known = matches!(entity, "lt" | "gt" | "amp" | "quot")
                    || entity.strip_prefix('#').is_some_and(|n| {
                        n.parse::<u32>().is_ok()
                            || n.strip_prefix('x')
                                .is_some_and(|h| u32::from_str_radix(h, 16).is_ok())
                    });
                if !known {
                    return Err(format!(
                        "Unsupported HTML entity \"&{entity};\" at byte offset {offset}"
                    ));
                }
                visible += 1;
                rest = &rest[end + 1..];
            }
            '>' => return Err(format!("Unexpected > at byte offset {offset}")),
            c => {
                visible += 1;
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    if let Some(tag) = open.last() {
        return Err(format!(
            "Can't find end tag corresponding to start tag \"{tag}\""
        ));
    }
    Ok(visible)
}

impl BotApi {
    /// Starts the server on its own thread and runtime.
    pub fn start() -> BotApi {
        let inner = Arc::new(Mutex::new(Inner {
            next_update: 1000,
            next_message: 1,
            ..Inner::default()
        }));
        let wake = Arc::new(tokio::sync::Notify::new());
        let (tx, rx) = std::sync::mpsc::channel();
        let state = (inner.clone(), wake.clone());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                let app = Router::new()
                    .route("/{bot}/{method}", post(method))
                    .with_state(state);
                axum::serve(listener, app).await.unwrap();
            });
        });
        let addr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        BotApi { inner, wake, addr }
    }

    /// The base URL the bot is given (`--api-url`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn push(&self, mut update: Value) -> i64 {
        let id = {
            let mut inner = self.inner.lock().unwrap();
            let id = inner.next_update;
            inner.next_update += 1;
            update["update_id"] = json!(id);
            inner.updates.insert(id, update);
            id
        };
        self.wake.notify_waiters();
        id
    }

    /// User `user` writes `text` in their private chat; returns the
    /// message id.
    pub fn user_says(&self, user: u64, text: &str) -> i64 {
        let message_id = {
            let mut inner = self.inner.lock().unwrap();
            let id = inner.next_message;
            inner.next_message += 1;
            inner
                .chats
                .entry(user as i64)
                .or_default()
                .push(ChatMessage {
                    message_id: id,
                    from_bot: false,
                    text: text.to_owned(),
                    edits: 0,
                    buttons: Vec::new(),
                    file: None,
                    parse_mode: None,
                    history: Vec::new(),
                });
            id
        };
        let mut message = json!({
            "message_id": message_id,
            "from": {"id": user, "is_bot": false, "first_name": format!("User{user}")},
            "chat": {"id": user, "type": "private", "first_name": format!("User{user}")},
            "date": 1_764_000_000,
            "text": text,
        });
        if let Some(command) = text.strip_prefix('/') {
            let length = command.split_whitespace().next().unwrap_or("").len() + 1;
            message["entities"] = json!([{"type": "bot_command", "offset": 0, "length": length}]);
        }
        self.push(json!({"message": message}));
        message_id
    }

    /// A message in a group chat (the bot answers private chats only).
    pub fn user_says_in_group(&self, user: u64, group: i64, text: &str) {
        self.push(json!({"message": {
            "message_id": 1,
            "from": {"id": user, "is_bot": false, "first_name": "U"},
            "chat": {"id": group, "type": "group", "title": "A group"},
            "date": 1_764_000_000,
            "text": text,
        }}));
    }

    /// User `user` presses the button with `data` under the bot's message
    /// `message_id` in chat `chat`; returns the query id.
    pub fn user_presses(&self, user: u64, chat: i64, message_id: i64, data: &str) -> String {
        let query = format!("q{}", self.inner.lock().unwrap().next_update);
        self.push(json!({"callback_query": {
            "id": query,
            "from": {"id": user, "is_bot": false, "first_name": format!("User{user}")},
            "message": {
                "message_id": message_id,
                "chat": {"id": chat, "type": "private"},
                "date": 1_764_000_000,
                "text": "question",
            },
            "chat_instance": "1",
            "data": data,
        }}));
        query
    }

    /// The next `count` sends are answered 429 with `retry_after: 1`.
    pub fn throttle(&self, count: u32) {
        self.inner.lock().unwrap().throttle = count;
    }

    /// The next HTML message is refused as unparseable.
    pub fn refuse_next_html(&self) {
        self.inner.lock().unwrap().refuse_html = true;
    }

    /// The chat's messages, oldest first.
    pub fn chat(&self, chat: i64) -> Vec<ChatMessage> {
        self.inner
            .lock()
            .unwrap()
            .chats
            .get(&chat)
            .cloned()
            .unwrap_or_default()
    }

    /// The bot's messages in the chat.
    pub fn bot_messages(&self, chat: i64) -> Vec<ChatMessage> {
        self.chat(chat).into_iter().filter(|m| m.from_bot).collect()
    }

    /// Every method called, in order.
    pub fn calls(&self) -> Vec<String> {
        self.inner.lock().unwrap().calls.clone()
    }

    /// Callback answers: (query id, text, alert).
    pub fn callback_answers(&self) -> Vec<(String, Option<String>, bool)> {
        self.inner.lock().unwrap().callback_answers.clone()
    }

    /// The commands the bot registered.
    pub fn commands(&self) -> Vec<String> {
        self.inner.lock().unwrap().commands.clone()
    }

    /// Woken whenever the bot sends or edits a message (make the
    /// `notified()` future before checking, as with any `Notify`).
    pub fn changed(&self) -> Arc<tokio::sync::Notify> {
        self.inner.lock().unwrap().changed.clone()
    }

    /// The secret token the bot registered with setWebhook.
    pub fn webhook_secret(&self) -> Option<String> {
        self.inner.lock().unwrap().webhook_secret.clone()
    }

    /// Updates not yet acknowledged by a poll.
    pub fn unacknowledged(&self) -> usize {
        let inner = self.inner.lock().unwrap();
        inner.updates.range(inner.acknowledged..).count()
    }

    /// Waits until `check` holds (polling every 20 ms), or panics after
    /// `seconds` with `what`.
    pub async fn wait_for(&self, seconds: u64, what: &str, check: impl Fn(&BotApi) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
        while !check(self) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}; chats: {:#?}",
                self.inner.lock().unwrap().chats
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

type Shared = (Arc<Mutex<Inner>>, Arc<tokio::sync::Notify>);

/// The JSON parameters of a call: a JSON body, or a multipart form's
/// fields (files as `(name, size)`).
async fn parameters(
    headers: &HeaderMap,
    body: axum::body::Bytes,
) -> (Value, Option<(String, usize)>) {
    let is_multipart = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"));
    if !is_multipart {
        return (serde_json::from_slice(&body).unwrap_or(json!({})), None);
    }
    let request = axum::http::Request::builder()
        .header("content-type", headers.get("content-type").unwrap())
        .body(axum::body::Body::from(body))
        .unwrap();
    let mut form = <Multipart as axum::extract::FromRequest<()>>::from_request(request, &())
        .await
        .unwrap();
    let mut fields = serde_json::Map::new();
    let mut file = None;
    while let Some(field) = form.next_field().await.unwrap() {
        let name = field.name().unwrap_or_default().to_owned();
        match field.file_name().map(str::to_owned) {
            Some(file_name) => {
                let bytes = field.bytes().await.unwrap();
                file = Some((file_name, bytes.len()));
            }
            None => {
                let text = field.text().await.unwrap();
                let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
                fields.insert(name, value);
            }
        }
    }
    (Value::Object(fields), file)
}

fn message_json(chat: i64, message_id: i64, text: &str) -> Value {
    json!({
        "message_id": message_id,
        "from": {"id": BOT_ID, "is_bot": true, "first_name": "Satchel", "username": BOT_NAME},
        "chat": {"id": chat, "type": "private"},
        "date": 1_764_000_000,
        "text": text,
    })
}

fn buttons(params: &Value) -> Vec<String> {
    params["reply_markup"]["inline_keyboard"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|row| row.as_array().cloned().unwrap_or_default())
        .filter_map(|button| button["callback_data"].as_str().map(str::to_owned))
        .collect()
}

async fn method(
    State((inner, wake)): State<Shared>,
    Path((bot, method)): Path<(String, String)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if bot != format!("bot{TOKEN}") {
        return refuse(401, "Unauthorized", None);
    }
    let (params, file) = parameters(&headers, body).await;
    inner.lock().unwrap().calls.push(method.clone());
    let sending = matches!(
        method.as_str(),
        "sendMessage" | "editMessageText" | "sendDocument" | "sendPhoto"
    );
    if sending {
        let mut state = inner.lock().unwrap();
        if state.throttle > 0 {
            state.throttle -= 1;
            return refuse(429, "Too Many Requests: retry after 1", Some(1));
        }
    }
    match method.as_str() {
        "getMe" => ok(json!({
            "id": BOT_ID, "is_bot": true, "first_name": "Satchel", "username": BOT_NAME
        })),
        "getUpdates" => {
            let offset = params["offset"].as_i64().unwrap_or(0);
            let timeout = params["timeout"].as_u64().unwrap_or(0).min(2);
            let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
            loop {
                let notified = wake.notified();
                {
                    let mut state = inner.lock().unwrap();
                    state.acknowledged = state.acknowledged.max(offset);
                    let pending: Vec<Value> = state
                        .updates
                        .range(offset..)
                        .map(|(_, u)| u.clone())
                        .collect();
                    if !pending.is_empty() || tokio::time::Instant::now() >= deadline {
                        return ok(Value::Array(pending));
                    }
                }
                let _ = tokio::time::timeout_at(deadline, notified).await;
            }
        }
        "sendMessage" | "editMessageText" => {
            let chat = params["chat_id"].as_i64().unwrap_or(0);
            let text = params["text"].as_str().unwrap_or_default().to_owned();
            let html = params["parse_mode"].as_str() == Some("HTML");
            let visible = if html {
                let refuse_now = std::mem::take(&mut inner.lock().unwrap().refuse_html);
                if refuse_now {
                    return refuse(400, "Bad Request: can't parse entities: test refusal", None);
                }
                match check_html(&text) {
                    Ok(visible) => visible,
                    Err(why) => {
                        return refuse(
                            400,
                            &format!("Bad Request: can't parse entities: {why}"),
                            None,
                        );
                    }
                }
            } else {
                text.chars().count()
            };
            if visible == 0 {
                return refuse(400, "Bad Request: message text is empty", None);
            }
            if visible > 4096 {
                return refuse(400, "Bad Request: message is too long", None);
            }
            let mut state = inner.lock().unwrap();
            if method == "sendMessage" {
                let id = state.next_message;
                state.next_message += 1;
                state.chats.entry(chat).or_default().push(ChatMessage {
                    message_id: id,
                    from_bot: true,
                    text: text.clone(),
                    edits: 0,
                    buttons: buttons(&params),
                    file: None,
                    parse_mode: params["parse_mode"].as_str().map(str::to_owned),
                    history: vec![(std::time::Instant::now(), text.clone())],
                });
                state.changed.notify_waiters();
                ok(message_json(chat, id, &text))
            } else {
                let id = params["message_id"].as_i64().unwrap_or(0);
                let Some(message) = state.chats.get_mut(&chat).and_then(|messages| {
                    messages
                        .iter_mut()
                        .find(|m| m.message_id == id && m.from_bot)
                }) else {
                    return refuse(400, "Bad Request: message to edit not found", None);
                };
                if message.text == text && message.buttons == buttons(&params) {
                    return refuse(
                        400,
                        "Bad Request: message is not modified: specified new message content and reply markup are exactly the same",
                        None,
                    );
                }
                message.text = text.clone();
                message
                    .history
                    .push((std::time::Instant::now(), text.clone()));
                message.edits += 1;
                message.buttons = buttons(&params);
                state.changed.notify_waiters();
                ok(message_json(chat, id, &text))
            }
        }
        "sendDocument" | "sendPhoto" => {
            let chat = params["chat_id"].as_i64().unwrap_or(0);
            let Some(file) = file else {
                return refuse(400, "Bad Request: there is no file in the request", None);
            };
            let mut state = inner.lock().unwrap();
            let id = state.next_message;
            state.next_message += 1;
            state.chats.entry(chat).or_default().push(ChatMessage {
                message_id: id,
                from_bot: true,
                text: params["caption"].as_str().unwrap_or_default().to_owned(),
                edits: 0,
                buttons: Vec::new(),
                file: Some(file),
                parse_mode: None,
                history: Vec::new(),
            });
            ok(message_json(chat, id, ""))
        }
        "answerCallbackQuery" => {
            inner.lock().unwrap().callback_answers.push((
                params["callback_query_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                params["text"].as_str().map(str::to_owned),
                params["show_alert"].as_bool().unwrap_or(false),
            ));
            ok(json!(true))
        }
        "setMyCommands" => {
            inner.lock().unwrap().commands = params["commands"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["command"].as_str().map(str::to_owned))
                .collect();
            ok(json!(true))
        }
        "setWebhook" => {
            inner.lock().unwrap().webhook_secret =
                params["secret_token"].as_str().map(str::to_owned);
            ok(json!(true))
        }
        "sendChatAction" | "deleteWebhook" => ok(json!(true)),
        other => refuse(404, &format!("Not Found: method {other}"), None),
    }
}
