//! The `fetch` tool: one HTTP(S) GET, the answer made readable: HTML as
//! markdown of its main content (`html`), JSON pretty-printed, other
//! text as it is, anything else described. Redirects are followed (at
//! most [`MAX_REDIRECTS`]), each re-checked; the body is read up to
//! `fetch.maxBytes` within `fetch.timeoutMs`; answers are reused for
//! `fetch.cacheTtlSecs` (15 minutes). Non-public addresses are refused
//! (`guard`) unless agent.json allows them.
//!
//! The client has no proxy (a proxy would connect on the model's behalf
//! where the guard cannot see) and is rebuilt when the `fetch` section
//! changes.

pub mod config;
pub(crate) mod guard;
pub(crate) mod html;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use satchel_core::{
    Capabilities, ErrorCode, Resource, ToolAnnotations, ToolOutput, ToolResults, ToolSpec,
};
use serde::Deserialize;
use serde_json::{Value, json};

use satchel_tools::format::{Style, markdown_fence, paint};
use satchel_tools::{Tool, ToolContext, ToolError, ToolsConfig};

use crate::search::{MemoryCache, SearchCache};
pub use config::FetchConfig;
use guard::{Guard, GuardedResolver, Lookup, Refused};

/// Redirects followed at most.
pub const MAX_REDIRECTS: usize = 5;
/// The words of the refusal of a redirect too many.
const TOO_MANY_MARK: &str = "more redirects than fetch follows";
/// Characters returned when `max_length` is not given.
pub const DEFAULT_MAX_LENGTH: usize = 20_000;
/// Largest `max_length` a call may ask for.
const MAX_MAX_LENGTH: usize = 200_000;

/// Fetches web pages; see the module docs.
pub struct FetchTool {
    spec: ToolSpec,
    cache: MemoryCache,
    lookup: Lookup,
    client: Mutex<Option<(Guard, std::time::Duration, reqwest::Client)>>,
}

impl Default for FetchTool {
    fn default() -> FetchTool {
        FetchTool::new()
    }
}

impl FetchTool {
    /// The tool, resolving names with the system's resolver.
    pub fn new() -> FetchTool {
        FetchTool {
            spec: spec(),
            cache: MemoryCache::default(),
            lookup: guard::system_lookup(),
            client: Mutex::new(None),
        }
    }

    /// The client for `config`, built when the guard or timeout changed.
    fn client(&self, config: &FetchConfig) -> Result<reqwest::Client, ToolError> {
        let mut slot = self
            .client
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((guard, timeout, client)) = slot.as_ref()
            && *guard == config.guard
            && *timeout == config.timeout
        {
            return Ok(client.clone());
        }
        let guard = Arc::new(config.guard.clone());
        let redirect_guard = guard.clone();
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() > MAX_REDIRECTS {
                let error = format!("{TOO_MANY_MARK} ({MAX_REDIRECTS}); not followed further");
                return attempt.error(Refused(error));
            }
            match redirect_guard.check_url(attempt.url()) {
                Ok(()) => attempt.follow(),
                Err(why) => attempt.error(Refused(format!(
                    "a redirect led to {}",
                    lowercase_first(&why)
                ))),
            }
        });
        let client = satchel_http::client_builder()
            .map_err(|e| ToolError::new(ErrorCode::ToolUnavailable, e.to_string()))?
            .no_proxy()
            .redirect(policy)
            .timeout(config.timeout)
            .dns_resolver(GuardedResolver {
                guard,
                lookup: self.lookup.clone(),
            })
            .build()
            .map_err(|e| {
                ToolError::new(
                    ErrorCode::ToolUnavailable,
                    format!("cannot set up HTTP: {e}"),
                )
            })?;
        *slot = Some((config.guard.clone(), config.timeout, client.clone()));
        Ok(client)
    }
}

fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FetchInput {
    url: String,
    max_length: Option<usize>,
}

fn spec() -> ToolSpec {
    ToolSpec {
        name: "fetch".into(),
        title: Some("Fetch web page".into()),
        description: "Fetch a URL (HTTP GET) and return it readable: HTML as markdown of its main content, JSON \
            and text as they are. Redirects are followed; private and local addresses are refused. At most \
            `max_length` characters (default 20000) come back; pages are cached for 15 minutes."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "minLength": 1, "description": "The http or https URL to fetch"},
                "max_length": {"type": "integer", "minimum": 1, "maximum": MAX_MAX_LENGTH, "description": "Characters to return at most (default 20000)"}
            },
            "required": ["url"],
            "additionalProperties": false
        }),
        output_schema: None,
        annotations: ToolAnnotations {
            read_only_hint: Some(true),
            destructive_hint: Some(false),
            idempotent_hint: Some(true),
            open_world_hint: Some(true),
            long_running_hint: None,
        },
        capabilities: Capabilities {
            reads: vec![Resource::INTERNET],
            writes: Vec::new(),
        },
    }
}

/// The `fetch` section a call runs with.
fn fetch_config(config: &ToolsConfig) -> FetchConfig {
    config
        .sections
        .get::<FetchConfig>()
        .cloned()
        .unwrap_or_default()
}

/// A fetched page, as cached.
struct Page {
    url: String,
    status: u16,
    content_type: String,
    title: Option<String>,
    text: String,
    note: Option<String>,
}

impl Page {
    fn to_value(&self) -> Value {
        json!({"url": self.url, "status": self.status, "content_type": self.content_type,
               "title": self.title, "text": self.text, "note": self.note})
    }

    fn from_value(value: &Value) -> Option<Page> {
        let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
        Some(Page {
            url: text("url")?,
            status: u16::try_from(value.get("status")?.as_u64()?).ok()?,
            content_type: text("content_type")?,
            title: text("title"),
            text: text("text")?,
            note: text("note"),
        })
    }
}

#[async_trait]
impl Tool for FetchTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: FetchInput = crate::files::parse_input("fetch", input)?;
        let url: url::Url = input.url.trim().parse().map_err(|error| {
            ToolError::new(
                ErrorCode::InvalidParams,
                format!("`{}` is not a URL: {error}", input.url),
            )
        })?;
        let config = fetch_config(&ctx.config);
        config
            .guard
            .check_url(&url)
            .map_err(|why| ToolError::new(ErrorCode::PermissionDenied, why))?;
        let max_length = input
            .max_length
            .unwrap_or(DEFAULT_MAX_LENGTH)
            .clamp(1, MAX_MAX_LENGTH);
        let key = url.to_string();
        let (page, cached) = match self.cache.get(&key).as_ref().and_then(Page::from_value) {
            Some(page) => (page, true),
            None => {
                let client = self.client(&config)?;
                let page = tokio::select! {
                    page = get(&client, url.clone(), config.max_bytes) => page?,
                    () = ctx.cancel.cancelled() => {
                        return Err(ToolError::new(ErrorCode::Cancelled, "the fetch was cancelled"));
                    }
                };
                if (200..300).contains(&page.status) {
                    self.cache.put(&key, page.to_value(), config.cache_ttl);
                }
                (page, false)
            }
        };
        Ok(output(&key, &page, max_length, cached))
    }

    fn format_use(&self, input: &Value, style: Style) -> String {
        let url = input.get("url").and_then(Value::as_str).unwrap_or_default();
        match style {
            Style::Terminal { .. } => {
                format!("{} {}", paint(style, "2", "fetch"), paint(style, "1", url))
            }
            Style::Markdown => format!("fetch <{url}>"),
        }
    }

    fn format_result(&self, output: &ToolOutput, style: Style) -> String {
        let ToolResults::Text(text) = &output.results else {
            return satchel_tools::format::generic_result(output, style);
        };
        if output.is_error {
            return satchel_tools::format::generic_result(output, style);
        }
        let preview = satchel_tools::format::truncate_chars(text, 2000);
        match style {
            Style::Terminal { .. } => paint(style, "2", &output.user_message),
            Style::Markdown => format!(
                "{}\n\n{}",
                output.user_message,
                markdown_fence(&preview, "markdown")
            ),
        }
    }
}

/// One GET, its body read up to `max_bytes` and made readable.
async fn get(client: &reqwest::Client, url: url::Url, max_bytes: usize) -> Result<Page, ToolError> {
    let asked = url.to_string();
    let mut response = client
        .get(url)
        .header(
            reqwest::header::ACCEPT,
            "text/html, text/markdown;q=0.9, text/plain;q=0.8, application/json;q=0.8, */*;q=0.5",
        )
        .send()
        .await
        .map_err(|error| request_error(&asked, &error))?;
    let status = response.status();
    let final_url = response.url().to_string();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let mut body = Vec::new();
    let mut cut = false;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| request_error(&asked, &error))?
    {
        let room = max_bytes.saturating_sub(body.len());
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            cut = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    let mut note = cut.then(|| {
        format!("The body was cut at {max_bytes} bytes (the size cap, `fetch.maxBytes`).")
    });
    let text_body = || String::from_utf8_lossy(&body).into_owned();
    let looks_html = content_type.contains("html")
        || (content_type.is_empty() && {
            let start = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
            start.contains("<!doctype html") || start.contains("<html")
        });
    let (title, text) = if looks_html {
        html::to_markdown(&text_body())
    } else if content_type.contains("json") {
        let text = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|value| serde_json::to_string_pretty(&value).ok())
            .unwrap_or_else(text_body);
        (None, text)
    } else if content_type.is_empty()
        || content_type.starts_with("text/")
        || content_type.contains("xml")
        || content_type.contains("javascript")
    {
        if memchr::memchr(0, &body).is_some() {
            note = Some(format!(
                "The answer is binary data ({} bytes); its content is not shown.",
                body.len()
            ));
            (None, String::new())
        } else {
            (None, text_body())
        }
    } else {
        note = Some(format!(
            "The answer is `{content_type}`, {} bytes, not text; its content is not shown.",
            body.len()
        ));
        (None, String::new())
    };
    if status.is_client_error() || status.is_server_error() {
        let code = if status.is_server_error() {
            ErrorCode::ToolUnavailable
        } else {
            ErrorCode::InvalidParams
        };
        let mut details = serde_json::Map::new();
        details.insert("status".into(), json!(status.as_u16()));
        details.insert("url".into(), json!(final_url));
        let start: String = text.chars().take(500).collect();
        return Err(ToolError {
            code,
            message: format!("`{final_url}` answered {status}; the page begins: {start}"),
            details,
        });
    }
    Ok(Page {
        url: final_url,
        status: status.as_u16(),
        content_type,
        title,
        text,
        note,
    })
}

/// A failed request as the model reads it: a refused address or redirect
/// is `PERMISSION_DENIED` with the guard's reason.
fn request_error(url: &str, error: &reqwest::Error) -> ToolError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<Refused>() {
            return ToolError::new(ErrorCode::PermissionDenied, refused.0.clone());
        }
        // A layer that boxes the cause again hides its type; its words
        // are still the guard's.
        let words = cause.to_string();
        if words.contains(guard::REFUSED_MARK) || words.contains(TOO_MANY_MARK) {
            return ToolError::new(ErrorCode::PermissionDenied, words);
        }
        source = cause.source();
    }
    if error.is_timeout() {
        return ToolError::new(
            ErrorCode::ToolTimeout,
            format!(
                "fetching `{url}` took longer than the time limit (`fetch.timeoutMs`); try again later or another page"
            ),
        );
    }
    let mut chain = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        chain.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    ToolError::new(
        ErrorCode::ToolUnavailable,
        format!("cannot fetch `{url}`: {chain}"),
    )
}

fn output(asked: &str, page: &Page, max_length: usize, cached: bool) -> ToolOutput {
    let total = page.text.chars().count();
    let mut text = String::new();
    text.push_str(&format!("URL: {}\n", page.url));
    if page.url != asked {
        text.push_str(&format!("(redirected from {asked})\n"));
    }
    if let Some(title) = &page.title {
        text.push_str(&format!("Title: {title}\n"));
    }
    text.push('\n');
    let body: String = page.text.chars().take(max_length).collect();
    text.push_str(&body);
    let mut notes: Vec<String> = page.note.iter().cloned().collect();
    if total > max_length {
        notes.push(format!(
            "Only the first {max_length} of {total} characters are shown; call again with a larger `max_length` (up to {MAX_MAX_LENGTH}) for more."
        ));
    }
    if !notes.is_empty() {
        text.push_str("\n\n");
        text.push_str(&notes.join(" "));
    }
    let user_message = format!(
        "fetched {} ({}, {total} characters{})",
        page.url,
        page.status,
        if cached { ", from the cache" } else { "" }
    );
    ToolOutput::success(ToolResults::Text(text), user_message)
}
