//! The Bot API client: frankenstein's typed methods over Satchel's own
//! HTTP client (rustls with ring, as everywhere else in Satchel), with
//! Telegram's limits kept: a 429's `retry_after` is waited out and the
//! call tried again, sends are paced under the global 30 per second, and
//! a network error never carries the URL (it holds the token).

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use frankenstein::AsyncTelegramApi;
use serde::de::DeserializeOwned;
use tokio::sync::Mutex;
use tokio::time::Instant;

/// Why a Bot API call failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Telegram answered, and said no.
    #[error("Telegram refused {method}: {description} (error {code})")]
    Refused {
        /// The method called.
        method: String,
        /// Telegram's error code (400, 401, 403, 409, 429...).
        code: u64,
        /// Telegram's description.
        description: String,
        /// Seconds to wait, on a 429.
        retry_after: Option<u64>,
    },
    /// The Bot API could not be reached, or the connection broke.
    #[error("cannot reach the Bot API: {0}")]
    Http(reqwest::Error),
    /// The answer was not the Bot API's JSON.
    #[error("the Bot API answered {method} with something unreadable: {detail}")]
    Unreadable {
        /// The method called.
        method: String,
        /// What was wrong.
        detail: String,
    },
    /// A file to upload could not be read.
    #[error("reading a file to send: {0}")]
    File(#[from] std::io::Error),
}

impl ApiError {
    /// True when Telegram could not parse the message's entities (the
    /// HTML): the message is sent again as plain text.
    pub fn is_parse_error(&self) -> bool {
        matches!(self, ApiError::Refused { code: 400, description, .. }
            if description.contains("can't parse entities") || description.contains("parse"))
    }

    /// True when an edit changed nothing (Telegram refuses those).
    pub fn is_not_modified(&self) -> bool {
        matches!(self, ApiError::Refused { code: 400, description, .. }
            if description.contains("message is not modified"))
    }
}

/// The Bot API's reply envelope.
#[derive(serde::Deserialize)]
struct Envelope {
    ok: bool,
    #[serde(default)]
    result: Option<serde_json::Value>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    error_code: Option<u64>,
    #[serde(default)]
    parameters: Option<Parameters>,
}

#[derive(serde::Deserialize)]
struct Parameters {
    #[serde(default)]
    retry_after: Option<u64>,
}

/// How many times a call that got a 429 or a 5xx is tried again.
const RETRIES: u32 = 4;

/// Methods that deliver something to a chat, paced together.
const SENDING: &[&str] = &[
    "sendMessage",
    "editMessageText",
    "sendDocument",
    "sendPhoto",
];

/// A bot's connection to the Bot API.
pub struct BotApi {
    http: reqwest::Client,
    /// `{api_url}/bot{token}`: never logged, never in an error.
    base: String,
    /// The token, to take out of anything a server echoes back.
    token: String,
    /// When the next send may go.
    next_send: Mutex<Instant>,
    /// The least time between two sends; zero: unpaced.
    send_interval: Duration,
}

impl std::fmt::Debug for BotApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The base URL holds the token.
        f.debug_struct("BotApi").finish_non_exhaustive()
    }
}

impl BotApi {
    /// A client for the bot with `token` at `api_url`
    /// (`https://api.telegram.org` or a local Bot API server) that sends at
    /// most `sends_per_second` messages a second, all chats together
    /// (0: unpaced, for a local Bot API server).
    pub fn new(api_url: &str, token: &str, sends_per_second: u32) -> anyhow::Result<BotApi> {
        let http = satchel_http::client_builder()?
            .connect_timeout(Duration::from_secs(10))
            // Long polls wait up to `POLL_SECONDS`; nothing else is slow.
            .timeout(Duration::from_secs(90))
            .build()?;
        Ok(BotApi {
            http,
            base: format!("{}/bot{token}", api_url.trim_end_matches('/')),
            token: token.to_owned(),
            next_send: Mutex::new(Instant::now()),
            send_interval: match sends_per_second {
                0 => Duration::ZERO,
                n => Duration::from_secs(1) / n,
            },
        })
    }

    /// True when sends are queued for longer than `wait` under the global
    /// pace: an update that only shows progress can be left out then (the
    /// final answer never is).
    pub fn is_congested(&self, wait: Duration) -> bool {
        if self.send_interval.is_zero() {
            return false;
        }
        self.next_send
            .try_lock()
            .is_ok_and(|next| *next > Instant::now() + wait)
    }

    /// Waits for this send's turn under the global pace.
    async fn pace(&self, method: &str) {
        if self.send_interval.is_zero() || !SENDING.contains(&method) {
            return;
        }
        let wait_until = {
            let mut next = self.next_send.lock().await;
            let now = Instant::now();
            let slot = (*next).max(now);
            *next = slot + self.send_interval;
            slot
        };
        tokio::time::sleep_until(wait_until).await;
    }

    /// Reads the envelope of a reply to `method`.
    async fn decode<Output: DeserializeOwned>(
        &self,
        method: &str,
        response: reqwest::Response,
    ) -> Result<Output, ApiError> {
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| ApiError::Http(e.without_url()))?;
        let unreadable = |detail: String| ApiError::Unreadable {
            method: method.to_owned(),
            detail,
        };
        let envelope: Envelope = serde_json::from_slice(&bytes).map_err(|error| {
            // A proxy's error page may echo the request's path: the token.
            let body = String::from_utf8_lossy(&bytes).replace(&self.token, "[token]");
            unreadable(format!(
                "HTTP {status}, {error}: {}",
                satchel_core::text::char_prefix(&body, 200).0
            ))
        })?;
        if !envelope.ok {
            return Err(ApiError::Refused {
                method: method.to_owned(),
                code: envelope.error_code.unwrap_or(u64::from(status.as_u16())),
                description: envelope.description.unwrap_or_default(),
                retry_after: envelope.parameters.and_then(|p| p.retry_after),
            });
        }
        // frankenstein's methods read the whole envelope.
        let whole = serde_json::json!({ "ok": true, "result": envelope.result });
        serde_json::from_value(whole).map_err(|error| unreadable(error.to_string()))
    }

    /// Sends one request (built anew for each try), trying again after a
    /// 429's `retry_after` or a server error.
    async fn send<Output: DeserializeOwned>(
        &self,
        method: &str,
        build: impl Fn() -> Result<reqwest::RequestBuilder, ApiError>,
    ) -> Result<Output, ApiError> {
        let mut attempt = 0;
        loop {
            self.pace(method).await;
            let error = match build()?.send().await {
                Ok(response) => match self.decode(method, response).await {
                    Ok(output) => return Ok(output),
                    Err(error) => error,
                },
                Err(error) => ApiError::Http(error.without_url()),
            };
            let wait = match &error {
                ApiError::Refused {
                    code: 429,
                    retry_after,
                    ..
                } => Duration::from_secs(retry_after.unwrap_or(1).clamp(1, 60)),
                ApiError::Refused { code, .. } if *code >= 500 => {
                    Duration::from_millis(500 << attempt)
                }
                // Not sent at all: safe to try again.
                ApiError::Http(http) if http.is_connect() => Duration::from_millis(500 << attempt),
                _ => return Err(error),
            };
            if attempt >= RETRIES {
                return Err(error);
            }
            attempt += 1;
            tracing::debug!("{method}: waiting {wait:?} before trying again");
            tokio::time::sleep(wait).await;
        }
    }
}

#[async_trait]
impl AsyncTelegramApi for BotApi {
    type Error = ApiError;

    async fn request<Params, Output>(
        &self,
        method: &str,
        params: Option<Params>,
    ) -> Result<Output, ApiError>
    where
        Params: serde::ser::Serialize + std::fmt::Debug + std::marker::Send,
        Output: DeserializeOwned,
    {
        let body = match &params {
            Some(params) => serde_json::to_vec(params).map_err(|error| ApiError::Unreadable {
                method: method.to_owned(),
                detail: format!("cannot encode the request: {error}"),
            })?,
            None => b"{}".to_vec(),
        };
        let url = format!("{}/{method}", self.base);
        self.send(method, || {
            Ok(self
                .http
                .post(&url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone()))
        })
        .await
    }

    async fn request_with_form_data<Params, Output>(
        &self,
        method: &str,
        params: Params,
        files: Vec<(&str, PathBuf)>,
    ) -> Result<Output, ApiError>
    where
        Params: serde::ser::Serialize + std::fmt::Debug + std::marker::Send,
        Output: DeserializeOwned,
    {
        let fields = match serde_json::to_value(&params) {
            Ok(serde_json::Value::Object(fields)) => fields,
            _ => {
                return Err(ApiError::Unreadable {
                    method: method.to_owned(),
                    detail: "the request is not an object".to_owned(),
                });
            }
        };
        let mut uploads = Vec::new();
        for (name, path) in files {
            let bytes = tokio::fs::read(&path).await?;
            let file_name = path
                .file_name()
                .map_or_else(|| "file".to_owned(), |n| n.to_string_lossy().into_owned());
            uploads.push((name.to_owned(), file_name, bytes));
        }
        let url = format!("{}/{method}", self.base);
        self.send(method, || {
            let mut form = reqwest::multipart::Form::new();
            for (key, value) in &fields {
                if uploads.iter().any(|(name, _, _)| name == key) {
                    continue;
                }
                form = match value {
                    serde_json::Value::String(text) => form.text(key.clone(), text.clone()),
                    other => form.text(key.clone(), other.to_string()),
                };
            }
            for (name, file_name, bytes) in &uploads {
                let part =
                    reqwest::multipart::Part::bytes(bytes.clone()).file_name(file_name.clone());
                form = form.part(name.clone(), part);
            }
            Ok(self.http.post(&url).multipart(form))
        })
        .await
    }
}
