//! How updates arrive: long polling (`getUpdates`), or a webhook that
//! checks Telegram's secret-token header. Either way an update is kept in
//! the inbox before Telegram is told it arrived (the next poll's offset,
//! or the webhook's 200), so none is lost between the two.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use frankenstein::AsyncTelegramApi;
use frankenstein::methods::{DeleteWebhookParams, GetUpdatesParams, SetWebhookParams};
use frankenstein::response::MethodResponse;
use frankenstein::types::AllowedUpdate;
use serde_json::Value;

use crate::Webhook;
use crate::api::ApiError;
use crate::bot::Bot;

/// The updates the bot reads.
fn allowed_updates() -> Vec<AllowedUpdate> {
    vec![AllowedUpdate::Message, AllowedUpdate::CallbackQuery]
}

/// The update id of a raw update.
fn update_id(update: &Value) -> Option<i64> {
    update.get("update_id").and_then(Value::as_i64)
}

/// An error that polling cannot get past: the token refused, or another
/// process receiving the updates.
fn fatal(error: &ApiError) -> Option<String> {
    match error {
        ApiError::Refused {
            code: 401 | 404, ..
        } => Some(format!("{error}: check TELEGRAM_BOT_TOKEN")),
        ApiError::Refused { code: 409, .. } => Some(format!(
            "{error}: another process receives this bot's updates (a second `satchel telegram`, \
             or a webhook)"
        )),
        _ => None,
    }
}

/// Polls until shutdown; fails only on errors it cannot get past.
pub(crate) async fn poll(bot: &Arc<Bot>) -> anyhow::Result<()> {
    // A webhook left set makes getUpdates fail; pending updates are kept.
    let params = DeleteWebhookParams::builder()
        .drop_pending_updates(false)
        .build();
    if let Err(error) = bot.api.delete_webhook(&params).await {
        tracing::debug!("deleteWebhook: {error}");
    }
    let mut offset: Option<i64> = None;
    let mut failures = 0u32;
    loop {
        let params = GetUpdatesParams::builder()
            .maybe_offset(offset)
            .timeout(bot.options.poll_seconds)
            .allowed_updates(allowed_updates())
            .build();
        let result = tokio::select! {
            () = bot.shutdown.cancelled() => return Ok(()),
            result = bot.api.request::<_, MethodResponse<Vec<Value>>>("getUpdates", Some(params)) => result,
        };
        let updates = match result {
            Ok(response) => response.result,
            Err(error) => {
                if let Some(message) = fatal(&error) {
                    anyhow::bail!(message);
                }
                failures += 1;
                let wait = Duration::from_secs(1 << failures.min(5));
                tracing::warn!("getUpdates failed ({error}); trying again in {wait:?}");
                tokio::select! {
                    () = bot.shutdown.cancelled() => return Ok(()),
                    () = tokio::time::sleep(wait) => {}
                }
                continue;
            }
        };
        failures = 0;
        let items: Vec<(i64, Value)> = updates
            .into_iter()
            .filter_map(|update| update_id(&update).map(|id| (id, update)))
            .collect();
        let Some(last) = items.iter().map(|(id, _)| *id).max() else {
            continue;
        };
        match bot.accept(items).await {
            // Acknowledged by the next poll.
            Ok(()) => offset = Some(last + 1),
            Err(error) => {
                // Not acknowledged: Telegram sends them again.
                tracing::warn!("cannot keep updates in the inbox ({error:#}); trying again");
                tokio::select! {
                    () = bot.shutdown.cancelled() => return Ok(()),
                    () = tokio::time::sleep(Duration::from_secs(2)) => {}
                }
            }
        }
    }
}

/// A random secret for the webhook's header, new at every start.
fn secret() -> anyhow::Result<String> {
    use std::io::Read as _;
    let mut bytes = [0u8; 24];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

struct WebhookState {
    bot: Arc<Bot>,
    secret: String,
}

/// Compares two secrets in time that does not depend on where they differ.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected)
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

async fn receive(
    State(state): State<Arc<WebhookState>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let given = headers
        .get("x-telegram-bot-api-secret-token")
        .map(|value| value.as_bytes())
        .unwrap_or_default();
    if !same_secret(given, state.secret.as_bytes()) {
        tracing::warn!("a webhook request without the right secret token was refused");
        return StatusCode::UNAUTHORIZED;
    }
    let Ok(update) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    let Some(id) = update_id(&update) else {
        return StatusCode::BAD_REQUEST;
    };
    match state.bot.accept(vec![(id, update)]).await {
        Ok(()) => StatusCode::OK,
        // Telegram delivers it again.
        Err(error) => {
            tracing::warn!("cannot keep update {id} in the inbox: {error:#}");
            StatusCode::SERVICE_UNAVAILABLE
        }
    }
}

/// Registers the webhook and serves it until shutdown.
pub(crate) async fn serve_webhook(bot: &Arc<Bot>, webhook: &Webhook) -> anyhow::Result<()> {
    let path = reqwest::Url::parse(&webhook.url)
        .map_err(|error| anyhow::anyhow!("--webhook {}: {error}", webhook.url))?
        .path()
        .to_owned();
    let secret = secret()?;
    let listener = tokio::net::TcpListener::bind(webhook.listen)
        .await
        .map_err(|error| anyhow::anyhow!("cannot listen on {}: {error}", webhook.listen))?;
    let params = SetWebhookParams::builder()
        .url(webhook.url.clone())
        .secret_token(secret.clone())
        .allowed_updates(allowed_updates())
        // One delivery at a time: a chat's messages arrive in order.
        .max_connections(1)
        .build();
    bot.api
        .set_webhook(&params)
        .await
        .map_err(|error| anyhow::anyhow!("Telegram did not accept the webhook: {error}"))?;
    tracing::info!(url = %webhook.url, listen = %webhook.listen, "receiving updates by webhook");
    let app = Router::new()
        .route(&path, post(receive))
        .with_state(Arc::new(WebhookState {
            bot: bot.clone(),
            secret,
        }));
    let shutdown = bot.shutdown.clone();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abd", b"abc"));
        assert!(!same_secret(b"ab", b"abc"));
        assert!(!same_secret(b"", b"abc"));
        assert_eq!(secret().unwrap().len(), 48);
    }
}
