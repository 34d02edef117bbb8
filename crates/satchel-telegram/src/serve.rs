//! [`run`]: the bot's life. [`Bot::start`], then `intake` (long polling
//! or the webhook) feeds it until shutdown, then [`Bot::shut_down`]. Apart
//! from `bot` so that `intake`, which hands updates to the bot, is imported
//! by this module only, and `bot` imports neither of them.

use std::sync::Arc;

use satchel_host::Host;
use tokio_util::sync::CancellationToken;

use crate::BotOptions;
use crate::bot::Bot;
use crate::intake;

/// Runs the bot until `shutdown` fires (then lets running statements stop,
/// leaves what was not handled in the inbox, and closes nothing of the
/// host's: the caller does).
pub async fn run(
    host: Arc<Host>,
    options: BotOptions,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let bot = Bot::start(host, options, shutdown).await?;
    let result = match bot.options.webhook.clone() {
        Some(webhook) => intake::serve_webhook(&bot, &webhook).await,
        None => intake::poll(&bot).await,
    };
    bot.shut_down().await;
    result
}
