//! How the bot runs: agent.json's `telegram` section, completed by the
//! command line.

use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;

/// The Bot API of Telegram itself.
pub const TELEGRAM_API: &str = "https://api.telegram.org";

/// agent.json's `telegram` section.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TelegramSettings {
    /// The Bot API's base URL (a local Bot API server, or tests).
    #[serde(default)]
    pub api_url: Option<String>,
    /// Telegram user ids that may talk to the bot.
    #[serde(default)]
    pub allowed_users: Vec<u64>,
    /// Seconds a consent question waits for a button (default 120).
    #[serde(default)]
    pub consent_timeout_seconds: Option<u64>,
    /// Messages a user may send per minute (default 20).
    #[serde(default)]
    pub messages_per_minute: Option<u32>,
    /// Messages the bot sends per second, all chats together (default 25,
    /// under Telegram's documented 30; 0 sends unpaced, for a local Bot
    /// API server).
    #[serde(default)]
    pub sends_per_second: Option<u32>,
    /// Seconds after a chat's last message when its conversation is put
    /// away (default 300); its next message takes it up again from the
    /// record.
    #[serde(default)]
    pub idle_chat_seconds: Option<u64>,
}

/// Serving updates through a webhook instead of long polling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// The public HTTPS URL Telegram posts to.
    pub url: String,
    /// Where this process listens (a reverse proxy forwards the URL here).
    pub listen: SocketAddr,
}

/// Everything the bot needs to run.
#[derive(Clone)]
pub struct BotOptions {
    /// The bot's token (`TELEGRAM_BOT_TOKEN`); never stored, never logged.
    pub token: String,
    /// The Bot API's base URL.
    pub api_url: String,
    /// Telegram user ids that may talk to the bot; must not be empty.
    pub allowed_users: Vec<u64>,
    /// `None`: long polling.
    pub webhook: Option<Webhook>,
    /// How long a consent question waits.
    pub consent_timeout: Duration,
    /// Messages a user may send per minute.
    pub messages_per_minute: u32,
    /// Seconds a long poll waits for updates.
    pub poll_seconds: u32,
    /// Messages sent per second, all chats together (0: unpaced).
    pub sends_per_second: u32,
    /// How long a chat may go without a message before its conversation
    /// is put away (its memory freed; taken up again from the record).
    pub idle_chat: Duration,
}

impl std::fmt::Debug for BotOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BotOptions")
            .field("token", &"(hidden)")
            .field("api_url", &self.api_url)
            .field("allowed_users", &self.allowed_users)
            .field("webhook", &self.webhook)
            .field("consent_timeout", &self.consent_timeout)
            .field("messages_per_minute", &self.messages_per_minute)
            .finish_non_exhaustive()
    }
}

impl BotOptions {
    /// Options from the settings section, with the command line's
    /// `api_url` and extra allowed users over it.
    pub fn new(
        token: String,
        settings: TelegramSettings,
        api_url: Option<String>,
        allow: Vec<u64>,
        webhook: Option<Webhook>,
    ) -> BotOptions {
        let mut allowed_users = settings.allowed_users;
        allowed_users.extend(allow);
        allowed_users.sort_unstable();
        allowed_users.dedup();
        BotOptions {
            token,
            api_url: api_url
                .or(settings.api_url)
                .unwrap_or_else(|| TELEGRAM_API.to_owned()),
            allowed_users,
            webhook,
            consent_timeout: Duration::from_secs(
                settings.consent_timeout_seconds.unwrap_or(120).max(1),
            ),
            messages_per_minute: settings.messages_per_minute.unwrap_or(20).max(1),
            poll_seconds: 25,
            sends_per_second: settings.sends_per_second.unwrap_or(25),
            idle_chat: Duration::from_secs(settings.idle_chat_seconds.unwrap_or(300).max(1)),
        }
    }
}
