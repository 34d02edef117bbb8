//! `satchel telegram`: the bot, until Ctrl-C or SIGTERM.

use std::process::ExitCode;
use std::sync::Arc;

use satchel_host::Host;
use satchel_telegram::{BotOptions, TelegramSettings, Webhook};
use tokio_util::sync::CancellationToken;

use crate::cli::TelegramArgs;

pub(crate) async fn run(args: TelegramArgs, project: &Arc<Host>) -> anyhow::Result<ExitCode> {
    let Some(token) = crate::paths::var("TELEGRAM_BOT_TOKEN").filter(|t| !t.trim().is_empty())
    else {
        anyhow::bail!(
            "set TELEGRAM_BOT_TOKEN to the bot's token (from @BotFather); it is read from the \
             environment only, never stored"
        );
    };
    let settings = satchel_host::read_settings(&project.root, &project.paths, &project.env)?;
    let (section, warning) = settings.section::<TelegramSettings>("telegram");
    if let Some(warning) = warning {
        tracing::warn!("{warning}");
    }
    let webhook = args.webhook.map(|url| Webhook {
        url,
        listen: args.listen,
    });
    let options = BotOptions::new(token, section, args.api_url, args.allow_user, webhook);
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        super::signals::wait_for_interrupt().await;
        tracing::info!("stopping: unanswered messages are answered after the next start");
        stop.cancel();
    });
    let result = satchel_telegram::run(project.clone(), options, shutdown).await;
    project.close().await;
    result?;
    Ok(ExitCode::SUCCESS)
}
