//! rmcp's and the HTTP stack's errors in words a person can act on.
//!
//! rmcp's own `Display` names the transport by its Rust type
//! (`Transport [rmcp::transport::worker::WorkerTransport<…>] error: …`);
//! here the error's chain is walked instead: a refused or reset
//! connection says so with its URL, the rest keeps each level's own
//! message, and [`scrub`] takes out any `::`-qualified type name that
//! would still get through.

use std::error::Error;
use std::io;

use rmcp::ServiceError;
use rmcp::service::ClientInitializeError;
use rmcp::transport::DynamicTransportError;
use rmcp::transport::streamable_http_client::StreamableHttpError;

/// A failed request in words.
pub(crate) fn service(error: &ServiceError) -> String {
    match error {
        ServiceError::TransportSend(error) => transport(error),
        ServiceError::TransportClosed => "the connection closed".to_owned(),
        ServiceError::McpError(data) => {
            format!(
                "the server answered with error {}: {}",
                data.code.0, data.message
            )
        }
        ServiceError::Timeout { timeout } => {
            format!("no answer within {} s", timeout.as_secs_f64())
        }
        ServiceError::UnexpectedResponse => "the server answered with something else".to_owned(),
        ServiceError::Cancelled { reason } => match reason {
            Some(reason) => format!("cancelled: {}", scrub(reason)),
            None => "cancelled".to_owned(),
        },
        other => scrub(&other.to_string()),
    }
}

/// A transport's error in words: its cause, without the transport's type.
pub(crate) fn transport(error: &DynamicTransportError) -> String {
    cause(error.error.as_ref())
}

/// A failed handshake in words.
pub(crate) fn initialize(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::TransportError { error, .. } => transport(error),
        ClientInitializeError::ConnectionClosed(context) => {
            format!(
                "the connection closed during the handshake ({})",
                scrub(context)
            )
        }
        ClientInitializeError::JsonRpcError(data) => format!(
            "the server refused the handshake with error {}: {}",
            data.code.0, data.message
        ),
        other => scrub(&other.to_string()),
    }
}

/// Whether a request failed before it reached the server (its
/// connection could not be made), so it surely had no effect.
pub(crate) fn unreached(error: &DynamicTransportError) -> bool {
    walk(error.error.as_ref()).connect
}

/// An error and its causes, each level's own message once, joined by `: `;
/// a connection that could not be made or broke says so with its URL.
pub(crate) fn cause(error: &(dyn Error + 'static)) -> String {
    let walked = walk(error);
    if let Some(words) = walked.network {
        return match walked.url {
            Some(url) => format!("{words} at {url}"),
            None => words.to_owned(),
        };
    }
    let messages = walked.messages;
    // Each level's message often repeats its source's: keep only what it adds.
    let mut parts = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let own = match messages.get(i + 1) {
            Some(next) if !next.is_empty() => message
                .strip_suffix(next.as_str())
                .unwrap_or(message)
                .trim_end_matches([':', ' ', '(', '['])
                .to_owned(),
            _ => message.clone(),
        };
        let own = scrub(&own);
        if !own.is_empty() {
            parts.push(own);
        }
    }
    if parts.is_empty() {
        "unknown error".to_owned()
    } else {
        parts.join(": ")
    }
}

/// What an error's chain says.
struct Walked {
    url: Option<String>,
    network: Option<&'static str>,
    /// The connection could not be made.
    connect: bool,
    messages: Vec<String>,
}

fn walk(error: &(dyn Error + 'static)) -> Walked {
    let mut walked = Walked {
        url: None,
        network: None,
        connect: false,
        messages: Vec::new(),
    };
    let mut level = Some(error);
    while let Some(current) = level {
        if let Some(http) = current.downcast_ref::<reqwest::Error>() {
            walked.url = walked
                .url
                .take()
                .or_else(|| http.url().map(|u| u.to_string()));
            walked.connect |= http.is_connect();
            if walked.network.is_none() {
                walked.network = if http.is_connect() {
                    Some("cannot connect")
                } else if http.is_timeout() {
                    Some("timed out")
                } else if http.is_body() || http.is_decode() {
                    Some("the connection broke while the answer was being read")
                } else {
                    None
                };
            }
        }
        if let Some(hyper) = current.downcast_ref::<hyper::Error>()
            && hyper.is_incomplete_message()
        {
            walked.network = Some("the connection closed before the answer came");
        }
        if let Some(io) = current.downcast_ref::<io::Error>() {
            let words = match io.kind() {
                io::ErrorKind::ConnectionRefused => {
                    walked.connect = true;
                    Some("connection refused")
                }
                io::ErrorKind::ConnectionReset => Some("connection reset by the server"),
                io::ErrorKind::ConnectionAborted => Some("connection aborted"),
                io::ErrorKind::BrokenPipe => Some("the connection broke"),
                io::ErrorKind::TimedOut => Some("timed out"),
                io::ErrorKind::UnexpectedEof => Some("the connection closed mid-answer"),
                _ => None,
            };
            if let Some(words) = words {
                walked.network = Some(words);
            }
        }
        walked.messages.push(current.to_string());
        // rmcp's HTTP error holds the client's error without naming it its source.
        level = match current.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            Some(StreamableHttpError::Client(inner)) => Some(inner),
            _ => current.source(),
        };
    }
    walked
}

/// `text` without `::`-qualified Rust type names: a bracketed name
/// (`[rmcp::…]`) goes entirely, any other path leaves its last segment.
pub fn scrub(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '['
            && let Some(len) = chars[i..].iter().position(|&c| c == ']')
        {
            let inner: String = chars[i + 1..i + len].iter().collect();
            if inner.contains("::") {
                i += len + 1;
                while out.ends_with(' ') && chars.get(i) == Some(&' ') {
                    i += 1;
                }
                continue;
            }
        }
        if is_ident(chars[i]) && (i == 0 || !is_ident(chars[i - 1])) {
            let (end, last) = path_at(&chars, i);
            if let Some(last) = last {
                out.push_str(&last);
                i = end;
                continue;
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    let out = out.replace("Transport  error", "transport error");
    out.trim().to_owned()
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// A `a::b::C<…>` path starting at `start`: where it ends and its last
/// segment, or `None` when there is no `::` there.
fn path_at(chars: &[char], start: usize) -> (usize, Option<String>) {
    let mut i = start;
    let mut segments = 0;
    let mut last;
    loop {
        let begin = i;
        while i < chars.len() && is_ident(chars[i]) {
            i += 1;
        }
        last = chars[begin..i].iter().collect();
        segments += 1;
        if chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':') {
            i += 2;
            continue;
        }
        break;
    }
    if segments < 2 {
        return (start, None);
    }
    // Generic arguments go with the path.
    if chars.get(i) == Some(&'<') {
        let mut depth = 0;
        while i < chars.len() {
            match chars[i] {
                '<' => depth += 1,
                '>' => {
                    depth -= 1;
                    if depth == 0 {
                        i += 1;
                        break;
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
    (i, Some(last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_are_scrubbed() {
        let text = "Send message error Transport [rmcp::transport::worker::WorkerTransport<rmcp::transport::streamable_http_client::StreamableHttpClientWorker<rmcp::transport::auth::AuthClient<reqwest::async_impl::client::Client>>>] error: Client error: error sending request, when send initialize request";
        let clean = scrub(text);
        assert!(!clean.contains("::"), "{clean}");
        assert!(clean.contains("error sending request"), "{clean}");
        let clean = scrub("AuthRequired(AuthRequiredError { x: std::string::String })");
        assert!(!clean.contains("::"), "{clean}");
        assert_eq!(scrub("plain words: a, b"), "plain words: a, b");
        assert_eq!(scrub("see http://x:80/mcp"), "see http://x:80/mcp");
    }

    #[test]
    fn a_chain_keeps_each_levels_own_words() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer failed: {0}")]
        struct Outer(#[source] Inner);
        #[derive(Debug, thiserror::Error)]
        #[error("inner broke")]
        struct Inner;
        assert_eq!(cause(&Outer(Inner)), "outer failed: inner broke");
        let refused = io::Error::new(io::ErrorKind::ConnectionRefused, "nope");
        assert_eq!(cause(&refused), "connection refused");
    }
}
