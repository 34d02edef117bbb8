//! `satchel mcp serve --http` under abuse, against the built binary on
//! 127.0.0.1: a flood of `initialize` requests, idle sessions, a client
//! that sends its headers slowly, an oversized body, more connections than
//! allowed. Each test starts its own server with small limits, so the whole
//! file runs in seconds.
//!
//! Reproduces issue #30 ("HTTP that holds under abuse"): 15,000
//! `initialize` requests took the server to 847 MB, sessions never
//! expired, and a client sending its headers slowly held a connection
//! forever.
//!
//! The project allows `bash(echo ok)` only, and has its own XDG
//! directories (tests never touch the user's state).

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::Child;
use std::time::{Duration, Instant};

use crate::support::mcp_http::{Answer, address_of, post, read_answer, spawn_http};
use crate::support::project::Project;
use serde_json::{Value, json};

/// How long an answer may take on a loaded machine.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// `satchel mcp serve --http 127.0.0.1:0 ARGS` in its own project, killed
/// when dropped.
struct Server {
    child: Child,
    address: String,
    _project: Project,
}

impl Server {
    fn start(args: &[&str]) -> Server {
        let project = Project::new(&json!({"permissions": {"allow": ["bash(echo ok)"]}}));
        let mut command = project.command(&["mcp", "serve", "--http", "127.0.0.1:0"]);
        command.args(args);
        let (child, url) = spawn_http(command);
        let address = address_of(&url);
        Server {
            child,
            address,
            _project: project,
        }
    }

    /// Opens a new session (initialize, then initialized); its id.
    fn session(&self) -> String {
        let answer = self.post(None, &initialize());
        assert_eq!(answer.status, 200, "{}", answer.text());
        let session = answer.header("mcp-session-id").expect("no session id");
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(self.post(Some(&session), &initialized).status, 202);
        session
    }

    /// `ping` in `session`: 200 while it lives, 404 once it is gone.
    fn ping(&self, session: &str) -> u16 {
        let ping = json!({"jsonrpc": "2.0", "id": 7, "method": "ping"});
        self.post(Some(session), &ping).status
    }

    /// `bash` `echo ok` in `session` must print ok.
    fn assert_echo_ok(&self, session: &str) {
        let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                          "params": {"name": "bash", "arguments": {"command": "echo ok"}}});
        let answer = self.post(Some(session), &call);
        assert_eq!(answer.status, 200, "{}", answer.text());
        let result = answer.message(9).expect("no answer to tools/call");
        assert_eq!(
            result["result"]["structuredContent"]["stdout"], "ok\n",
            "{result}"
        );
    }

    fn post(&self, session: Option<&str>, message: &Value) -> Answer {
        post(
            &self.address,
            session,
            message.to_string().as_bytes(),
            ANSWER_TIMEOUT,
        )
    }

    fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(&self.address).unwrap();
        stream.set_read_timeout(Some(ANSWER_TIMEOUT)).unwrap();
        stream
    }

    /// VmRSS of the server in KiB.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse().ok())
            .unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
           "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                      "clientInfo": {"name": "abuse", "version": "1"}}})
}

/// Whether the server closed `stream` (EOF or reset) within `within`.
fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut buffer = [0u8; 1024];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return true,
            // A 408 or similar before closing is fine: read on.
            Ok(_) => continue,
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false;
            }
            Err(_reset) => return true,
        }
    }
}

#[test]
fn a_session_flood_keeps_the_cap_and_a_fresh_session_still_works() {
    const CAP: usize = 50;
    const FLOOD: usize = 2_000;
    let server = Server::start(&["--max-sessions", &CAP.to_string()]);
    let first = server.session();
    let started = Instant::now();
    let ids: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    (0..FLOOD / 4)
                        .map(|_| {
                            let answer = server.post(None, &initialize());
                            assert_eq!(answer.status, 200, "{}", answer.text());
                            answer.header("mcp-session-id").unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().unwrap())
            .collect()
    });
    eprintln!(
        "{FLOOD} initialize requests: {:?}, RSS {} KiB",
        started.elapsed(),
        server.rss_kib()
    );
    // The oldest sessions made room for the newest.
    assert_eq!(
        server.ping(&first),
        404,
        "the first session outlived the flood"
    );
    let alive = ids.iter().filter(|id| server.ping(id) == 200).count();
    assert!(alive <= CAP, "{alive} sessions alive, the cap is {CAP}");
    assert!(
        alive >= CAP - 5,
        "only {alive} sessions alive, the cap is {CAP}"
    );
    let fresh = server.session();
    server.assert_echo_ok(&fresh);
    assert!(
        server.rss_kib() < 100 * 1024,
        "RSS {} KiB after the flood",
        server.rss_kib()
    );
}

#[test]
fn initialize_gets_503_when_every_session_has_a_request_in_flight() {
    let server = Server::start(&["--max-sessions", "1"]);
    let session = server.session();
    // A GET stream stays open: the session is busy while it lasts.
    let mut listening = server.connect();
    write!(
        listening,
        "GET /mcp HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\
         Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-06-18\r\n\r\n",
        server.address
    )
    .unwrap();
    let mut head = [0u8; 12];
    listening.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200", "the GET stream did not open");

    let refused = server.post(None, &initialize());
    assert_eq!(refused.status, 503, "{}", refused.text());
    let error: Value = serde_json::from_slice(&refused.body).unwrap();
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("limit of 1 live MCP sessions"),
        "{message}"
    );
    assert!(message.contains("--max-sessions"), "{message}");
    assert_eq!(server.ping(&session), 200);

    // The stream closed, the session is idle again and can make room.
    drop(listening);
    let deadline = Instant::now() + Duration::from_secs(5);
    let fresh = loop {
        let answer = server.post(None, &initialize());
        if answer.status == 200 {
            break answer.header("mcp-session-id").unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "still refused: {}",
            answer.text()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(server.ping(&session), 404);
    assert_eq!(server.ping(&fresh), 200);
}

#[test]
fn idle_sessions_expire_and_their_ids_get_404() {
    let server = Server::start(&["--session-idle", "1s"]);
    let idle = server.session();
    let active = server.session();
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1_800) {
        assert_eq!(server.ping(&active), 200, "an active session expired");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        server.ping(&idle),
        404,
        "an idle session outlived its timeout"
    );
    // The client initializes again and carries on.
    let again = server.session();
    server.assert_echo_ok(&again);
    server.assert_echo_ok(&active);
}

#[test]
fn a_slow_header_client_is_disconnected_while_others_are_served() {
    let server = Server::start(&["--read-timeout", "1s"]);
    let mut slow = server.connect();
    let started = Instant::now();
    slow.write_all(b"POST /mcp HTT").unwrap();
    // Others are served meanwhile.
    let session = server.session();
    server.assert_echo_ok(&session);
    assert!(
        closed_within(&mut slow, Duration::from_secs(5)),
        "the slow client still holds its connection"
    );
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(3),
        "disconnected after {elapsed:?}"
    );
    // A connection that sends nothing at all is closed too.
    let mut silent = server.connect();
    assert!(closed_within(&mut silent, Duration::from_secs(3)));
}

#[test]
fn an_oversized_body_gets_413() {
    let server = Server::start(&["--max-body-bytes", "1000"]);
    // Declared too large: refused before the body is read.
    let mut declared = server.connect();
    write!(
        declared,
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: 5000000\r\n\r\n",
        server.address
    )
    .unwrap();
    let answer = read_answer(&mut declared);
    assert_eq!(answer.status, 413, "{}", answer.text());
    assert!(
        answer.text().contains("limit of 1000 bytes"),
        "{}",
        answer.text()
    );

    // Chunked, with no length given: refused once it passes the limit.
    let mut chunked = server.connect();
    let chunk = "x".repeat(2_000);
    write!(
        chunked,
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n\
         {:x}\r\n{chunk}\r\n0\r\n\r\n",
        server.address,
        chunk.len()
    )
    .unwrap();
    let answer = read_answer(&mut chunked);
    assert_eq!(answer.status, 413, "{}", answer.text());

    // A body within the limit is served.
    let session = server.session();
    server.assert_echo_ok(&session);
}

#[test]
fn connections_over_the_cap_wait_until_one_ends() {
    let server = Server::start(&["--max-connections", "2", "--read-timeout", "3s"]);
    let held: Vec<TcpStream> = (0..2).map(|_| server.connect()).collect();
    // Let the server accept both before the third arrives.
    std::thread::sleep(Duration::from_millis(200));
    let mut waiting = server.connect();
    let body = initialize().to_string();
    write!(
        waiting,
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        server.address,
        body.len()
    )
    .unwrap();
    waiting
        .set_read_timeout(Some(Duration::from_millis(700)))
        .unwrap();
    let mut first = [0u8; 1];
    let early = waiting.read(&mut first);
    assert!(
        matches!(&early, Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)),
        "a third connection was served over a cap of two: {early:?}"
    );
    let freed = Instant::now();
    drop(held);
    waiting.set_read_timeout(Some(ANSWER_TIMEOUT)).unwrap();
    let answer = read_answer(&mut waiting);
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert!(
        freed.elapsed() < Duration::from_secs(2),
        "served {:?} after a connection ended",
        freed.elapsed()
    );
}
