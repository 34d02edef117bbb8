//! Getting the authorization code back: first without a person (an
//! authorization server that redirects at once, as test servers and some
//! single-sign-on setups do), else through the user's browser and a
//! one-shot listener on loopback (RFC 8252 §7.3).
//!
//! rmcp builds the authorization URL and exchanges the code; this module is
//! the part in between, which rmcp leaves to the application.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use url::Url;

/// Longest request head the listener reads.
const MAX_REQUEST_HEAD: usize = 8 * 1024;
/// Time one browser connection has to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Time the headless probe waits for the authorization server.
const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

/// Why the code did not come back.
#[derive(Debug, thiserror::Error)]
pub enum RedirectError {
    /// The authorization server answered the redirect with an error.
    #[error("the authorization server refused: {0}")]
    Refused(String),
    /// Nobody completed the login in time.
    #[error("no answer from the browser within {0:?}")]
    TimedOut(Duration),
    /// The listener or the probe failed.
    #[error("{0}")]
    Io(String),
}

/// What one look at the authorization URL found.
#[derive(Debug, PartialEq, Eq)]
pub enum Probe {
    /// The server redirected straight back: the callback URL.
    Callback(String),
    /// The server wants a person (a login page, a consent screen).
    NeedsPerson,
}

/// Fetches `auth_url` once, without following redirects; a redirect to
/// `redirect_uri` is the callback. Anything else (a page, a redirect
/// elsewhere, an error status) means a person is needed.
///
/// # Caveats
/// On a real authorization server this starts a login transaction that
/// nobody finishes; it expires on its own.
pub async fn probe(
    http: &reqwest::Client,
    auth_url: &str,
    redirect_uri: &str,
) -> Result<Probe, RedirectError> {
    let response = match tokio::time::timeout(PROBE_TIMEOUT, http.get(auth_url).send()).await {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => {
            tracing::debug!(%error, "headless authorization probe failed");
            return Ok(Probe::NeedsPerson);
        }
        Err(_) => return Ok(Probe::NeedsPerson),
    };
    if !response.status().is_redirection() {
        return Ok(Probe::NeedsPerson);
    }
    let Some(location) = response
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
    else {
        return Ok(Probe::NeedsPerson);
    };
    let Ok(base) = Url::parse(auth_url) else {
        return Ok(Probe::NeedsPerson);
    };
    let Ok(target) = base.join(location) else {
        return Ok(Probe::NeedsPerson);
    };
    if !same_endpoint(&target, redirect_uri) {
        return Ok(Probe::NeedsPerson);
    }
    if let Some(error) = callback_error(&target) {
        return Err(RedirectError::Refused(error));
    }
    Ok(Probe::Callback(target.into()))
}

/// Whether `target` is `redirect_uri` (scheme, host, port and path), query aside.
fn same_endpoint(target: &Url, redirect_uri: &str) -> bool {
    let Ok(expected) = Url::parse(redirect_uri) else {
        return false;
    };
    target.scheme() == expected.scheme()
        && target.host_str() == expected.host_str()
        && target.port_or_known_default() == expected.port_or_known_default()
        && target.path() == expected.path()
}

/// The `error` (and description) of an error redirect, made safe to print.
fn callback_error(url: &Url) -> Option<String> {
    let mut error = None;
    let mut description = None;
    for (key, value) in url.query_pairs() {
        match key.as_ref() {
            "error" => error = Some(printable(&value)),
            "error_description" => description = Some(printable(&value)),
            _ => {}
        }
    }
    let error = error?;
    Some(match description {
        Some(description) => format!("{error} ({description})"),
        None => error,
    })
}

/// At most 200 characters, control characters dropped: a hostile server's
/// text goes to a terminal.
fn printable(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(200).collect()
}

/// The `state` parameter of an authorization URL.
pub fn state_of(auth_url: &str) -> Option<String> {
    Url::parse(auth_url).ok().and_then(|url| {
        url.query_pairs()
            .find(|(key, _)| key == "state")
            .map(|(_, value)| value.into_owned())
    })
}

/// A one-shot HTTP listener on 127.0.0.1 for the browser's redirect.
#[derive(Debug)]
pub struct Loopback {
    listener: TcpListener,
    redirect_uri: String,
}

impl Loopback {
    /// Listens on `127.0.0.1:port` (0: any free port).
    pub async fn bind(port: u16) -> Result<Loopback, RedirectError> {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|e| RedirectError::Io(format!("cannot listen on 127.0.0.1:{port}: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| RedirectError::Io(e.to_string()))?
            .port();
        Ok(Loopback {
            listener,
            redirect_uri: format!("http://127.0.0.1:{port}/callback"),
        })
    }

    /// The redirect URI to register and send.
    pub fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// Waits up to `deadline` for the browser to bring back a callback
    /// with `state`; returns its full URL. Requests for other paths, and
    /// callbacks with another state (an old tab), are answered and ignored.
    pub async fn wait(&self, state: &str, deadline: Duration) -> Result<String, RedirectError> {
        tokio::time::timeout(deadline, self.accept_until_callback(state))
            .await
            .map_err(|_| RedirectError::TimedOut(deadline))?
    }

    async fn accept_until_callback(&self, state: &str) -> Result<String, RedirectError> {
        loop {
            let (mut stream, _) = self
                .listener
                .accept()
                .await
                .map_err(|e| RedirectError::Io(format!("loopback listener: {e}")))?;
            let head = match tokio::time::timeout(REQUEST_TIMEOUT, read_head(&mut stream)).await {
                Ok(Ok(head)) => head,
                _ => continue,
            };
            let outcome = parse_callback(&head, &self.redirect_uri, state);
            let (status, body) = match &outcome {
                Callback::Code(_) => ("200 OK", "Satchel is authorized. You can close this tab."),
                Callback::Error(_) => {
                    ("400 Bad Request", "Authorization failed; see the terminal.")
                }
                Callback::Ignore => ("404 Not Found", "Not found."),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
            match outcome {
                Callback::Code(url) => return Ok(url),
                Callback::Error(error) => return Err(RedirectError::Refused(error)),
                Callback::Ignore => continue,
            }
        }
    }
}

/// Reads up to the end of the request head (or [`MAX_REQUEST_HEAD`] bytes).
async fn read_head(stream: &mut tokio::net::TcpStream) -> std::io::Result<String> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while buf.len() < MAX_REQUEST_HEAD && !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// What a request to the loopback listener was.
#[derive(Debug, PartialEq, Eq)]
enum Callback {
    /// The callback with our state: its URL.
    Code(String),
    /// The callback with our state, carrying an error.
    Error(String),
    /// Anything else.
    Ignore,
}

/// Reads a request head: `GET <redirect path>?...state=<state>...`.
fn parse_callback(head: &str, redirect_uri: &str, state: &str) -> Callback {
    let mut words = head.lines().next().unwrap_or_default().split(' ');
    let (Some("GET"), Some(target)) = (words.next(), words.next()) else {
        return Callback::Ignore;
    };
    let Ok(base) = Url::parse(redirect_uri) else {
        return Callback::Ignore;
    };
    let Ok(url) = base.join(target) else {
        return Callback::Ignore;
    };
    if !same_endpoint(&url, redirect_uri) {
        return Callback::Ignore;
    }
    let sent_state = url
        .query_pairs()
        .find(|(key, _)| key == "state")
        .map(|(_, value)| value.into_owned());
    if sent_state.as_deref() != Some(state) {
        return Callback::Ignore;
    }
    match callback_error(&url) {
        Some(error) => Callback::Error(error),
        None => Callback::Code(url.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REDIRECT: &str = "http://127.0.0.1:4567/callback";

    #[test]
    fn the_callback_with_our_state_is_taken() {
        let head =
            "GET /callback?code=abc&state=s1&iss=https%3A%2F%2Fas HTTP/1.1\r\nHost: x\r\n\r\n";
        let Callback::Code(url) = parse_callback(head, REDIRECT, "s1") else {
            panic!("not taken");
        };
        let parsed = rmcp::transport::auth::AuthorizationCallback::from_redirect_url(&url).unwrap();
        assert_eq!(parsed.code, "abc");
        assert_eq!(parsed.csrf_token, "s1");
        assert_eq!(parsed.issuer.as_deref(), Some("https://as"));
    }

    #[test]
    fn other_paths_states_and_methods_are_ignored() {
        for head in [
            "GET /favicon.ico HTTP/1.1\r\n\r\n",
            "GET /callback?code=abc&state=other HTTP/1.1\r\n\r\n",
            "GET /callback?code=abc HTTP/1.1\r\n\r\n",
            "POST /callback?code=abc&state=s1 HTTP/1.1\r\n\r\n",
            "GET http://evil.example/callback?code=abc&state=s1 HTTP/1.1\r\n\r\n",
            "",
            "\u{0}\u{1}garbage",
        ] {
            assert_eq!(
                parse_callback(head, REDIRECT, "s1"),
                Callback::Ignore,
                "{head:?}"
            );
        }
    }

    #[test]
    fn an_error_callback_is_printable_text() {
        let head = "GET /callback?state=s1&error=access_denied&error_description=no%1b%5B31m%20way HTTP/1.1\r\n\r\n";
        assert_eq!(
            parse_callback(head, REDIRECT, "s1"),
            Callback::Error("access_denied (no[31m way)".into())
        );
    }

    #[test]
    fn the_state_is_read_from_the_authorization_url() {
        assert_eq!(
            state_of("https://as.example/authorize?client_id=c&state=xyz&scope=a").as_deref(),
            Some("xyz")
        );
        assert_eq!(state_of("not a url"), None);
    }

    #[tokio::test]
    async fn the_listener_returns_the_callback_a_browser_brings() {
        let loopback = Loopback::bind(0).await.unwrap();
        let uri = loopback.redirect_uri().to_owned();
        let port: u16 = uri
            .trim_start_matches("http://127.0.0.1:")
            .trim_end_matches("/callback")
            .parse()
            .unwrap();
        let browser = tokio::spawn(async move {
            for target in ["/favicon.ico", "/callback?code=c0de&state=st"] {
                let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .unwrap();
                stream
                    .write_all(format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
                    .await
                    .unwrap();
                let mut answer = String::new();
                stream.read_to_string(&mut answer).await.unwrap();
            }
        });
        let url = loopback.wait("st", Duration::from_secs(5)).await.unwrap();
        assert!(url.contains("code=c0de"), "{url}");
        browser.await.unwrap();
        let timed_out = loopback.wait("st", Duration::from_millis(50)).await;
        assert!(matches!(timed_out, Err(RedirectError::TimedOut(_))));
    }
}
