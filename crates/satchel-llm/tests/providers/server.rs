//! A scripted HTTP/1.1 server on 127.0.0.1 that plays a model provider: it
//! records every request byte for byte and answers each connection with
//! the next scripted [`Reply`] (the last one repeats). Every response
//! closes its connection, so each attempt of the client is one connection.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One request as the server received it.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
    pub(crate) at: Instant,
}

impl Recorded {
    /// The value of header `name` (case-insensitive).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }
}

/// How to answer one connection.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// A complete response with a JSON (or any) body.
    Json {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// A 200 `text/event-stream` response, chunked: `body` is sent in
    /// pieces of `piece` bytes (0: one piece per event) with `delay`
    /// between pieces; then `end` decides how the stream stops.
    Sse {
        events: Vec<String>,
        piece: usize,
        delay: Duration,
        end: End,
    },
    /// Read the request and never answer.
    Hang,
}

/// How an SSE reply stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// Properly: the terminating chunk.
    Clean,
    /// The connection is dropped after this many events, mid-body.
    CutAfter(usize),
    /// The server goes silent after this many events.
    HangAfter(usize),
}

impl Reply {
    /// An SSE reply sent event by event, cleanly ended.
    pub(crate) fn sse(events: Vec<String>) -> Reply {
        Reply::Sse {
            events,
            piece: 0,
            delay: Duration::ZERO,
            end: End::Clean,
        }
    }

    /// A JSON reply.
    pub(crate) fn json(status: u16, body: impl Into<String>) -> Reply {
        Reply::Json {
            status,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// Adds a response header to a JSON reply.
    pub(crate) fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Reply {
        if let Reply::Json { headers, .. } = &mut self {
            headers.push((name, value.into()));
        }
        self
    }
}

/// One SSE event in the wire syntax: optional `event:` line, one `data:`
/// line, blank line.
pub(crate) fn event(name: Option<&str>, data: &serde_json::Value) -> String {
    match name {
        Some(name) => format!("event: {name}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

/// A running server.
pub(crate) struct Server {
    pub(crate) addr: std::net::SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    closed: Arc<Mutex<Vec<Instant>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    /// Starts a server that answers connection `i` with `replies[i]`.
    pub(crate) async fn start(replies: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let closed = Arc::new(Mutex::new(Vec::new()));
        let (r, c) = (Arc::clone(&requests), Arc::clone(&closed));
        let task = tokio::spawn(async move {
            let mut n = 0usize;
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                let reply = replies[n.min(replies.len() - 1)].clone();
                n += 1;
                let (r, c) = (Arc::clone(&r), Arc::clone(&c));
                tokio::spawn(async move { serve(socket, reply, r, c).await });
            }
        });
        Server {
            addr,
            requests,
            closed,
            task,
        }
    }

    /// The base URL for OpenAI-style configuration.
    pub(crate) fn url(&self, suffix: &str) -> String {
        format!("http://{}{suffix}", self.addr)
    }

    /// The requests received so far.
    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// When clients closed connections the server was holding open.
    pub(crate) fn closed(&self) -> Vec<Instant> {
        self.closed.lock().unwrap().clone()
    }
}

async fn serve(
    mut socket: TcpStream,
    reply: Reply,
    requests: Arc<Mutex<Vec<Recorded>>>,
    closed: Arc<Mutex<Vec<Instant>>>,
) {
    let Some(request) = read_request(&mut socket).await else {
        return;
    };
    requests.lock().unwrap().push(request);
    match reply {
        Reply::Json {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} {}\r\nContent-Length: {}\r\nConnection: close\r\n",
                reason(status),
                body.len()
            );
            if !headers
                .iter()
                .any(|(name, _)| name.eq_ignore_ascii_case("content-type"))
            {
                head.push_str("Content-Type: application/json\r\n");
            }
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(body.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
        Reply::Sse {
            events,
            piece,
            delay,
            end,
        } => {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
            if socket.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let stop_after = match end {
                End::Clean => events.len(),
                End::CutAfter(n) | End::HangAfter(n) => n,
            };
            for event in events.iter().take(stop_after) {
                let pieces: Vec<&[u8]> = if piece == 0 {
                    vec![event.as_bytes()]
                } else {
                    event.as_bytes().chunks(piece).collect()
                };
                for bytes in pieces {
                    let chunk =
                        [format!("{:x}\r\n", bytes.len()).as_bytes(), bytes, b"\r\n"].concat();
                    if socket.write_all(&chunk).await.is_err() {
                        return;
                    }
                    let _ = socket.flush().await;
                    if !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                }
            }
            match end {
                End::Clean => {
                    let _ = socket.write_all(b"0\r\n\r\n").await;
                    let _ = socket.shutdown().await;
                }
                End::CutAfter(_) => drop(socket),
                End::HangAfter(_) => wait_for_close(socket, closed).await,
            }
        }
        Reply::Hang => wait_for_close(socket, closed).await,
    }
}

/// Holds the connection until the client closes it, then records when.
async fn wait_for_close(mut socket: TcpStream, closed: Arc<Mutex<Vec<Instant>>>) {
    let mut buf = [0u8; 1024];
    loop {
        match socket.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    closed.lock().unwrap().push(Instant::now());
}

async fn read_request(socket: &mut TcpStream) -> Option<Recorded> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        if let Some(pos) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8(data[..head_end].to_vec()).ok()?;
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_owned();
    let path = request_line.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = data[head_end + 4..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&buf[..n]);
    }
    Some(Recorded {
        method,
        path,
        headers,
        body,
        at: Instant::now(),
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}
