//! A minimal MCP-over-HTTP client for the end-to-end tests of
//! `satchel mcp serve --http`: start the server and learn its URL, post one
//! JSON-RPC message per connection, read the answer (de-chunked), and find
//! the message with an id in a JSON or server-sent-events body. Raw
//! sockets, so tests can also send what no real client would.

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// Starts `command` (a `satchel mcp serve --http 127.0.0.1:0 ...`) and
/// returns it with the URL it says it serves at. Its stderr is drained for
/// as long as it runs, so it never blocks on it.
pub fn spawn_http(mut command: Command) -> (Child, String) {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("satchel exited before serving")
            .unwrap();
        if let Some(at) = line.find("http://") {
            break line[at..].trim().to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (child, url)
}

/// `host:port` of an `http://host:port/...` URL.
pub fn address_of(url: &str) -> String {
    url.strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .unwrap()
        .to_owned()
}

/// One HTTP answer: status, headers (lower-case names), body de-chunked.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    /// The value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The JSON-RPC message with this id, from a JSON or an SSE body.
    pub fn message(&self, id: u64) -> Option<Value> {
        message_in(&self.body, id)
    }
}

/// The JSON-RPC message with this id in a JSON or server-sent-events body.
pub fn message_in(body: &[u8], id: u64) -> Option<Value> {
    let text = String::from_utf8_lossy(body);
    if let Ok(message) = serde_json::from_str::<Value>(&text) {
        return (message["id"] == id).then_some(message);
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|message| message["id"] == id)
}

/// Posts `body` to `/mcp` at `address` on a connection of its own (in
/// `session` when given) and reads the answer to the end.
pub fn post(address: &str, session: Option<&str>, body: &[u8], timeout: Duration) -> Answer {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(timeout)).unwrap();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(session) = session {
        head.push_str(&format!(
            "Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-06-18\r\n"
        ));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    read_answer(&mut stream)
}

/// Reads an answer to the end of the connection (a server that drops the
/// connection mid-answer shows as a short read).
pub fn read_answer(stream: &mut TcpStream) -> Answer {
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {:?}", String::from_utf8_lossy(&response)));
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let mut body = response[split + 4..].to_vec();
    if headers
        .iter()
        .any(|(name, value)| name == "transfer-encoding" && value.contains("chunked"))
    {
        body = dechunk(&body);
    }
    Answer {
        status,
        headers,
        body,
    }
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    while let Some(end) = raw.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&raw[..end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        let start = end + 2;
        body.extend_from_slice(&raw[start..(start + size).min(raw.len())]);
        raw = &raw[(start + size + 2).min(raw.len())..];
    }
    body
}
