//! Hostile input against the built `satchel mcp serve`, over stdio and over
//! `--http`: one server per transport takes every input of the corpus
//! (scripts nested 400 and 5,000 deep in every construct the policy's shell
//! parser knows, a 100,000-stage pipeline, a 1 MB word, invalid UTF-8 as
//! JSON escapes and as raw bytes, 100,000 nested JSON arrays, a deeply
//! nested `working_dir`), and after each one a plain `echo ok` on the same
//! server must still succeed.
//!
//! Reproduces issue #30: one `tools/call` of `bash` with 400 nested
//! `if true; then ... fi` overflowed the stack in the policy's parser and
//! aborted the whole server, every other client's session with it.
//!
//! Like `cli.rs`, every run gets its own project, config and data
//! directories. The project allows only `bash(echo ok)`, so a hostile
//! script that parses is refused by policy (nobody can consent over MCP)
//! rather than run.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use crate::support::mcp_http::{address_of, message_in, post, spawn_http};
use serde_json::{Value, json};

/// How long one answer may take (a debug build parses a 1 MB word in
/// under a second; this is for a loaded CI machine).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// One isolated place to run `satchel` in.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project/.agents")).unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        std::fs::write(
            dir.path().join("project/.agents/agent.json"),
            r#"{"permissions": {"allow": ["bash(echo ok)"]}}"#,
        )
        .unwrap();
        Sandbox { dir }
    }

    fn project(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_satchel"));
        command
            .args(args)
            .current_dir(self.project())
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            // Its own project: trusted (tests/trust.rs checks the untrusted path).
            .env("SATCHEL_TRUST_PROJECT", "1")
            .env("XDG_CACHE_HOME", self.dir.path().join("cache"))
            .env("SATCHEL_LIBEXEC_DIR", self.dir.path().join("libexec"))
            .env("XDG_DATA_HOME", self.dir.path().join("data"))
            .env("SATCHEL_MODEL_FETCH", "never")
            .env("TMPDIR", self.dir.path())
            .env_remove("SATCHEL_DB")
            .env_remove("SATCHEL_MCP_TOKEN")
            .env_remove("RUST_LOG");
        command
    }
}

/// What a hostile message must get back.
enum Expect {
    /// A `tools/call` result with `isError` and this error code, whose
    /// message contains the text.
    ToolError(&'static str, &'static str),
    /// Any `tools/call` result: run in the sandbox (what the policy's
    /// parser cannot see through is contained) or refused.
    Answered,
    /// Nothing in particular: the message is not valid JSON-RPC, so the
    /// server may answer with a protocol error or not at all.
    Nothing,
}

/// One hostile message: a name for failures, the bytes of the JSON-RPC
/// message with `"id": ID` where the id goes, and what it must get.
struct Hostile {
    name: String,
    message: Vec<u8>,
    expect: Expect,
}

/// `tools/call` of `bash` with `command`, as bytes with an id placeholder.
fn bash_call(command: &str) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": "ID", "method": "tools/call",
           "params": {"name": "bash", "arguments": {"command": command}}})
    .to_string()
    .into_bytes()
}

/// Each construct nested `depth` times around `echo x`.
fn nested(open: &str, close: &str, depth: usize) -> String {
    format!("{}echo x{}", open.repeat(depth), close.repeat(depth))
}

fn corpus() -> Vec<Hostile> {
    let constructs = [
        ("if", "if true; then ", "; fi"),
        ("while", "while true; do ", "; done"),
        ("until", "until false; do ", "; done"),
        ("for", "for i in 1; do ", "; done"),
        ("case", "case x in x) ", ";; esac"),
        ("subshell", "( true; ", " )"),
        ("brace group", "{ ", "; }"),
        ("function", "f() { ", "; }"),
        ("$(", "echo $(", ")"),
        ("\"$(", "echo \"$(", ")\""),
        ("<(", "cat <(", ")"),
        ("${", "echo ${x:-", "}"),
        ("$((", "echo $(( (", ") ))"),
        ("[[ (", "[[ ( ", " ) ]]"),
        ("[[ !", "[[ ! ", " -n x ]]"),
    ];
    let mut corpus = Vec::new();
    for depth in [400, 5_000] {
        for (name, open, close) in constructs {
            corpus.push(Hostile {
                name: format!("{name} nested {depth} deep"),
                message: bash_call(&nested(open, close, depth)),
                expect: Expect::ToolError("INVALID_PARAMS", "deeper than"),
            });
        }
        let backticks = (0..depth.min(14)).fold("x".to_owned(), |inner, _| {
            format!("`echo {}`", inner.replace('\\', "\\\\").replace('`', "\\`"))
        });
        corpus.push(Hostile {
            name: format!("backticks nested {} deep", depth.min(14)),
            message: bash_call(&format!("echo {backticks}")),
            expect: Expect::Answered,
        });
        let heredocs = (0..depth).fold("x".to_owned(), |inner, i| {
            format!("$(cat <<E{i}\n{inner}\nE{i}\n)")
        });
        corpus.push(Hostile {
            name: format!("here-documents nested {depth} deep"),
            message: bash_call(&format!("echo {heredocs}")),
            expect: Expect::ToolError("INVALID_PARAMS", "deeper than 100 levels"),
        });
    }
    // brush-parser backtracks exponentially over an unfinished nested `case`.
    let unfinished = nested("case x in x) ", ";; esac", 40);
    corpus.push(Hostile {
        name: "unfinished case nested 40 deep".into(),
        message: bash_call(&unfinished[..unfinished.len() * 2 / 3]),
        expect: Expect::ToolError("INVALID_PARAMS", "deeper than 8 levels"),
    });
    corpus.push(Hostile {
        name: "[[ ]] with 100,000 &&".into(),
        message: bash_call(&format!("[[ a{} ]]", " && a".repeat(100_000))),
        expect: Expect::ToolError("INVALID_PARAMS", "deeper than 100 levels"),
    });
    corpus.push(Hostile {
        name: "100,000-stage pipeline".into(),
        message: bash_call(&format!("true{}", " | true".repeat(99_999))),
        expect: Expect::ToolError("INVALID_PARAMS", "too long for one command line"),
    });
    corpus.push(Hostile {
        name: "1 MB word".into(),
        message: bash_call(&format!("echo {}", "a".repeat(1 << 20))),
        expect: Expect::ToolError("INVALID_PARAMS", "bytes"),
    });
    corpus.push(Hostile {
        name: "a word just under the size limit".into(),
        message: bash_call(&format!("true {}", "a".repeat((1 << 20) - 5))),
        // The parser takes it; the kernel would not.
        expect: Expect::ToolError("INVALID_PARAMS", "too long for one command line"),
    });
    corpus.push(Hostile {
        name: "lone surrogate as a JSON escape".into(),
        message: br#"{"jsonrpc": "2.0", "id": "ID", "method": "tools/call", "params": {"name": "bash", "arguments": {"command": "echo \udc80 \ud800"}}}"#.to_vec(),
        expect: Expect::Nothing,
    });
    let mut raw = br#"{"jsonrpc": "2.0", "id": "ID", "method": "tools/call", "params": {"name": "bash", "arguments": {"command": "echo "#.to_vec();
    raw.extend_from_slice(b"\xff\xfe\xc3\x28\xed\xa0\x80\x80");
    raw.extend_from_slice(br#""}}}"#);
    corpus.push(Hostile {
        name: "invalid UTF-8 bytes on the wire".into(),
        message: raw,
        expect: Expect::Nothing,
    });
    let deep_array = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    corpus.push(Hostile {
        name: "100,000 nested JSON arrays in the arguments".into(),
        message: format!(
            r#"{{"jsonrpc": "2.0", "id": "ID", "method": "tools/call", "params": {{"name": "bash", "arguments": {{"command": "echo ok", "x": {deep_array}}}}}}}"#
        )
        .into_bytes(),
        expect: Expect::Nothing,
    });
    // Deep, but within serde_json's limit of 128, so it reaches validation.
    let mut working_dir = json!("/tmp");
    for _ in 0..120 {
        working_dir = json!({ "a": working_dir });
    }
    corpus.push(Hostile {
        name: "working_dir nested 120 objects deep".into(),
        message: json!({"jsonrpc": "2.0", "id": "ID", "method": "tools/call",
                        "params": {"name": "bash", "arguments": {"command": "echo ok", "working_dir": working_dir}}})
        .to_string()
        .into_bytes(),
        expect: Expect::ToolError("INVALID_PARAMS", "working_dir"),
    });
    let deep_object = format!("{}1{}", r#"{"a":"#.repeat(100_000), "}".repeat(100_000));
    corpus.push(Hostile {
        name: "working_dir nested 100,000 objects deep".into(),
        message: format!(
            r#"{{"jsonrpc": "2.0", "id": "ID", "method": "tools/call", "params": {{"name": "bash", "arguments": {{"command": "echo ok", "working_dir": {deep_object}}}}}}}"#
        )
        .into_bytes(),
        expect: Expect::Nothing,
    });
    corpus
}

/// `message` with its id placeholder replaced by `id`.
fn with_id(message: &[u8], id: u64) -> Vec<u8> {
    let needle = br#""ID""#;
    let at = message
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap();
    let mut out = message[..at].to_vec();
    out.extend_from_slice(id.to_string().as_bytes());
    out.extend_from_slice(&message[at + needle.len()..]);
    out
}

/// Checks the answer to a hostile message.
fn check(hostile: &Hostile, answer: Option<&Value>) {
    let (code, text) = match &hostile.expect {
        Expect::Nothing => return,
        Expect::ToolError(code, text) => (*code, *text),
        Expect::Answered => {
            let answer = answer.unwrap_or_else(|| panic!("{}: no answer", hostile.name));
            assert!(answer["result"].is_object(), "{}: {answer}", hostile.name);
            return;
        }
    };
    let answer = answer.unwrap_or_else(|| panic!("{}: no answer", hostile.name));
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "{}: {answer}", hostile.name);
    let error = &result["structuredContent"];
    if !code.is_empty() {
        assert_eq!(error["error_code"], code, "{}: {answer}", hostile.name);
        let message = error["error"].as_str().unwrap_or_default();
        assert!(message.contains(text), "{}: {message}", hostile.name);
    }
}

/// Checks that `echo ok` ran.
fn check_ok(name: &str, answer: &Value) {
    assert_eq!(
        answer["result"]["structuredContent"]["stdout"], "ok\n",
        "`echo ok` after {name}: {answer}"
    );
}

fn echo_ok(id: u64) -> Vec<u8> {
    with_id(&bash_call("echo ok"), id)
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
           "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                      "clientInfo": {"name": "hostile", "version": "1"}}})
}

/// `satchel mcp serve` over stdio, answers read on a thread.
struct Stdio_ {
    child: Child,
    stdin: ChildStdin,
    answers: Receiver<Value>,
}

impl Stdio_ {
    fn start(sandbox: &Sandbox) -> Stdio_ {
        Stdio_::start_with(sandbox, &[])
    }

    /// The server with these variables in its environment.
    fn start_with(sandbox: &Sandbox, env: &[(&str, &str)]) -> Stdio_ {
        let mut child = sandbox
            .command(&["mcp", "serve"])
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, answers) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let message: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
                if sender.send(message).is_err() {
                    return;
                }
            }
        });
        let mut server = Stdio_ {
            child,
            stdin,
            answers,
        };
        server.send(initialize().to_string().as_bytes());
        server.answer(0).expect("no answer to initialize");
        server.send(
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
                .to_string()
                .as_bytes(),
        );
        server
    }

    fn send(&mut self, message: &[u8]) {
        self.stdin.write_all(message).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The answer with this id, skipping anything else; `None` when the
    /// server closed stdout or said nothing in time.
    fn answer(&mut self, id: u64) -> Option<Value> {
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self.answers.recv_timeout(left).ok()?;
            if message["id"] == id {
                return Some(message);
            }
        }
    }

    fn assert_alive(&mut self, after: &str) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("satchel mcp serve exited after {after}: {status}");
        }
    }
}

#[test]
fn hostile_input_over_stdio_never_takes_the_server_down() {
    let sandbox = Sandbox::new();
    let mut server = Stdio_::start(&sandbox);
    let started = Instant::now();
    let mut id = 1;
    for hostile in corpus() {
        server.send(&with_id(&hostile.message, id));
        // A message the server cannot read gets no answer with our id.
        let answer = match hostile.expect {
            Expect::Nothing => None,
            _ => server.answer(id),
        };
        check(&hostile, answer.as_ref());
        server.assert_alive(&hostile.name);
        server.send(&echo_ok(id + 1));
        let ok = server
            .answer(id + 1)
            .unwrap_or_else(|| panic!("no answer to `echo ok` after {}", hostile.name));
        check_ok(&hostile.name, &ok);
        id += 2;
    }
    eprintln!("stdio corpus: {:?}", started.elapsed());
    drop(server.stdin);
    let status = server.child.wait().unwrap();
    assert!(status.success(), "{status}");
}

/// A secret in a command's output or in the command itself never leaves in
/// an MCP response: the runner redacts the output before it is cut or
/// sent, whatever the client asked.
#[test]
fn secrets_never_leave_in_an_mcp_response() {
    const SECRET: &str = "sk-mcp-0123456789abcdef";
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.project().join(".agents/agent.json"),
        // Secret-named variables reach a sandboxed command only when passed.
        r#"{"permissions": {"allow": ["bash(echo *)"]}, "exec": {"passEnv": ["SERVICE_API_KEY"]}}"#,
    )
    .unwrap();
    let mut server = Stdio_::start_with(&sandbox, &[("SERVICE_API_KEY", SECRET)]);
    for (id, command) in [
        (1, "echo $SERVICE_API_KEY".to_owned()),
        (2, format!("echo {SECRET}")),
    ] {
        server.send(&with_id(&bash_call(&command), id));
        let answer = server.answer(id).expect("no answer");
        let text = answer.to_string();
        assert!(!text.contains(SECRET), "{text}");
        assert!(text.contains("[redacted]"), "{text}");
    }
}

/// `satchel mcp serve --http 127.0.0.1:0` and the address it serves at.
fn serve_http(sandbox: &Sandbox) -> (Child, String) {
    let (child, url) = spawn_http(sandbox.command(&["mcp", "serve", "--http", "127.0.0.1:0"]));
    (child, address_of(&url))
}

/// One exchange: status, headers and body.
fn exchange(
    address: &str,
    session: Option<&str>,
    body: &[u8],
) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let answer = post(address, session, body, ANSWER_TIMEOUT);
    (answer.status, answer.headers, answer.body)
}

#[test]
fn hostile_input_over_http_never_takes_the_server_down() {
    let sandbox = Sandbox::new();
    let (mut child, address) = serve_http(&sandbox);
    let (status, headers, body) = exchange(&address, None, initialize().to_string().as_bytes());
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let session = headers
        .iter()
        .find(|(name, _)| name == "mcp-session-id")
        .map(|(_, value)| value.clone())
        .expect("no session id");
    let (status, _, _) = exchange(
        &address,
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(status, 202);
    let started = Instant::now();
    let mut id = 1;
    for hostile in corpus() {
        let (status, _, body) = exchange(&address, Some(&session), &with_id(&hostile.message, id));
        let answer = message_in(&body, id);
        if !matches!(hostile.expect, Expect::Nothing) {
            assert_eq!(
                status,
                200,
                "{}: {}",
                hostile.name,
                String::from_utf8_lossy(&body)
            );
        }
        check(&hostile, answer.as_ref());
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "satchel mcp serve --http exited after {}: {status}",
                hostile.name
            );
        }
        let (status, _, body) = exchange(&address, Some(&session), &echo_ok(id + 1));
        assert_eq!(
            status,
            200,
            "after {}: {}",
            hostile.name,
            String::from_utf8_lossy(&body)
        );
        let ok = message_in(&body, id + 1).unwrap_or_else(|| {
            panic!(
                "no answer to `echo ok` after {}: {}",
                hostile.name,
                String::from_utf8_lossy(&body)
            )
        });
        check_ok(&hostile.name, &ok);
        id += 2;
    }
    eprintln!("http corpus: {:?}", started.elapsed());
    let _ = child.kill();
    let _ = child.wait();
}
