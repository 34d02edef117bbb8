//! Background processes end to end: `bash` with `background: true` and the
//! `process` tool, through `satchel mcp serve` with the official Python
//! SDK client (trust mode: no namespaces, so groups, sessions and the
//! orphan sweep do the work) and through `satchel run` with a scripted
//! model (the default sandbox: no network but the conversation's own
//! loopback, which its background server and foreground `curl` share).
//! What is left on the machine is checked in `/proc`, not in a namespace.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::fake_model::{FakeModel, Reply, tool_contents};
use crate::peers_dir::peer;
use crate::support::project::Project;

/// A free port on loopback (bound and released).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Processes on the machine whose command line contains `needle`
/// (arguments joined by spaces), this test's own tools excepted.
pub(crate) fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let line = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if line.contains(needle) && !line.contains("python_background.py") {
            found.push(format!("{}: {line}", entry.file_name().to_string_lossy()));
        }
    }
    found
}

/// Waits up to five seconds for no process to match `needle`.
pub(crate) fn none_left(needle: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = processes_with(needle);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub(crate) fn trusted_project() -> Project {
    Project::new(&json!({
        "permissions": {"mode": "trust"},
        "exec": {"maxBackground": 3, "killGraceMs": 500}
    }))
}

/// The variables `Project::command` sets, for a client that starts the
/// server itself.
pub(crate) fn project_env(project: &Project) -> Value {
    let path = |p: &str| project.path(p).display().to_string();
    json!({
        "XDG_CONFIG_HOME": path("config"),
        "SATCHEL_TRUST_PROJECT": "1",
        "XDG_DATA_HOME": path("data"),
        "SATCHEL_MODEL_FETCH": "never",
        "XDG_CACHE_HOME": path("cache"),
        "SATCHEL_LIBEXEC_DIR": path("libexec"),
        "TMPDIR": path(""),
        "NO_COLOR": "1",
    })
}

fn python_background(project: &Project, port: u16, mark: &str, ending: &str) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/python_background.py");
    let output = Command::new(peer("venv/bin/python"))
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_satchel"))
        .arg(project.path("project"))
        .arg(project_env(project).to_string())
        .args([&port.to_string(), mark, ending])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the Python client failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

pub(crate) fn mark() -> String {
    format!("{}{}", std::process::id(), rand_suffix())
}

fn rand_suffix() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
        % 100_000
}

#[test]
fn python_sdk_client_serves_fetches_and_kills_a_background_server() {
    let project = trusted_project();
    let port = free_port();
    let mark = mark();
    let report = python_background(&project, port, &mark, "close");

    let start = &report["start"]["structured"];
    assert_eq!(start["process_id"], "p1", "{report}");
    assert_eq!(start["state"], "running", "{report}");
    assert!(start["pid"].as_i64().unwrap() > 1);
    let serving = &report["serving"]["structured"];
    assert_eq!(serving["matched"], true, "{report}");
    assert!(serving["output"].as_str().unwrap().contains("Serving HTTP"));
    assert_eq!(report["curl"]["structured"]["stdout"], "200", "{report}");
    assert_eq!(
        report["kill"]["structured"]["state"], "killed by SIGTERM",
        "{report}"
    );
    assert!(
        report["kill"]["structured"]["output"]
            .as_str()
            .unwrap()
            .contains("GET / HTTP")
    );
    assert_eq!(
        report["kill_again"]["structured"]["state"],
        "killed by SIGTERM"
    );
    TcpListener::bind(("127.0.0.1", port)).expect("the port is free again");
    assert!(processes_with(&format!("http.server {port}")).is_empty());

    assert!(
        !report["family_kill"]["is_error"].as_bool().unwrap(),
        "{report}"
    );
    assert_eq!(
        none_left(&format!("sleep 999.{mark}")),
        Vec::<String>::new()
    );
    assert_eq!(
        none_left(&format!("sleep 998.{mark}")),
        Vec::<String>::new()
    );

    assert_eq!(
        report["lines"],
        json!(["line 1\n", "line 2\n", ""]),
        "{report}"
    );

    let told = &report["told"];
    if report["told_in"] == "start" {
        assert_eq!(told["structured"]["state"], "exited 4", "{report}");
        assert_eq!(told["structured"]["exit_code"], 4, "{report}");
    } else {
        assert!(
            told["text"]
                .as_str()
                .unwrap()
                .contains("Background process ended: p4 (`echo done; exit 4`) exited 4"),
            "{report}"
        );
    }
    assert!(
        !report["told_again"]["text"]
            .as_str()
            .unwrap()
            .contains("ended")
    );

    assert_eq!(report["limit"]["is_error"], true, "{report}");
    let refusal = report["limit"]["text"].as_str().unwrap();
    assert!(
        refusal.contains("3 background processes are already running"),
        "{refusal}"
    );
    assert!(refusal.contains(&format!("sleep 996.{mark}")), "{refusal}");
    let listed = report["list"]["structured"]["processes"]
        .as_array()
        .unwrap();
    assert_eq!(
        listed.iter().filter(|p| p["state"] == "running").count(),
        3,
        "{report}"
    );
    assert_eq!(report["missing_id"]["is_error"], true);
    assert!(
        report["missing_id"]["text"]
            .as_str()
            .unwrap()
            .contains("action `output` requires `process_id`"),
        "{report}"
    );

    // The client left: the server ended its session's processes, the one
    // trapping TERM and the one in its own session included.
    for n in 993..=996 {
        assert_eq!(
            none_left(&format!("sleep {n}.{mark}")),
            Vec::<String>::new()
        );
    }

    // Every start, read, input and kill is on the record.
    let audit = project.satchel(&["audit", "--json"]);
    let audit = String::from_utf8_lossy(&audit.stdout);
    assert!(audit.contains("\"process\""), "{audit}");
}

#[test]
fn sigterm_to_mcp_serve_ends_its_background_processes() {
    let project = trusted_project();
    let mark = mark();
    let report = python_background(&project, free_port(), &mark, "sigterm");
    assert!(report["server_pid"].as_i64().is_some(), "{report}");
    for n in 993..=996 {
        assert_eq!(
            none_left(&format!("sleep {n}.{mark}")),
            Vec::<String>::new()
        );
    }
}

#[test]
fn after_a_sigkill_the_next_start_ends_the_orphans() {
    let project = trusted_project();
    let mark = mark();
    let report = python_background(&project, free_port(), &mark, "sigkill");
    assert!(report["server_pid"].as_i64().is_some(), "{report}");
    // Without namespaces (trust mode) the grandchildren outlive a
    // SIGKILLed Satchel; the direct children died with it.
    let left: Vec<String> = (993..=996)
        .flat_map(|n| processes_with(&format!("sleep {n}.{mark}")))
        .collect();
    assert!(
        !left.is_empty(),
        "nothing to sweep: the test checks nothing"
    );
    let output = project.satchel(&["tools", "list"]);
    assert!(output.status.success());
    for n in 993..=996 {
        assert_eq!(
            none_left(&format!("sleep {n}.{mark}")),
            Vec::<String>::new()
        );
    }
}

#[test]
fn run_with_a_scripted_model_drives_a_server_in_the_sandbox() {
    let port = free_port();
    let mark = mark();
    let server = format!("exec python3 -m http.server {port} --bind 127.0.0.1");
    let curl = format!("curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{port}/");
    let call = |name: &str, args: Value| Reply::call(name, args);
    let model = FakeModel::start(vec![
        call(
            "bash",
            json!({"command": server, "background": true, "wait": 0}),
        ),
        call(
            "process",
            json!({"action": "output", "process_id": "p1", "until": "Serving HTTP", "wait": 20}),
        ),
        call("bash", json!({"command": curl})),
        call("process", json!({"action": "kill", "process_id": "p1"})),
        call(
            "bash",
            json!({"command": format!("sleep 991.{mark}"), "background": true, "wait": 0}),
        ),
        Reply::text("Served and stopped."),
    ]);
    let project = Project::new(&json!({
        "llm": {"provider": "openai", "baseUrl": model.base_url(), "model": "gpt-4o",
                "maxRetries": 0, "requestTimeoutSecs": 20},
        "permissions": {"allow": ["bash"]},
        "sideRequests": false
    }));
    let (transcript, output) = project.run("serve the directory and check it", None);
    assert!(output.status.success(), "{transcript}");
    assert_eq!(transcript["answer"], "Served and stopped.", "{transcript}");
    let requests = model.main_requests();
    // The results as the model read them (unescaped, whatever the nesting).
    let result = |turn: usize| tool_contents(&requests[turn]).join("\n").replace('\\', "");
    assert!(result(1).contains(r#""state":"running""#), "{}", result(1));
    assert!(result(2).contains(r#""matched":true"#), "{}", result(2));
    assert!(result(2).contains("Serving HTTP"), "{}", result(2));
    assert!(result(3).contains("200"), "{}", result(3));
    assert!(result(4).contains("killed by SIGTERM"), "{}", result(4));
    // The server listened on the conversation's loopback, not the machine's.
    TcpListener::bind(("127.0.0.1", port)).expect("the machine's port is free");
    // `satchel run` ended the process it left running.
    assert_eq!(
        none_left(&format!("sleep 991.{mark}")),
        Vec::<String>::new()
    );
    assert!(processes_with(&format!("http.server {port}")).is_empty());
}

#[test]
fn the_repl_lists_kills_and_at_exit_ends_background_processes() {
    let mark = mark();
    let model = FakeModel::start(vec![
        Reply::call(
            "bash",
            json!({"command": format!("sleep 990.{mark}"), "background": true, "wait": 0}),
        ),
        Reply::text("Started one."),
        Reply::call(
            "bash",
            json!({"command": format!("sleep 989.{mark}"), "background": true, "wait": 0}),
        ),
        Reply::text("Started another."),
    ]);
    let project = Project::new(&json!({
        "llm": {"provider": "openai", "baseUrl": model.base_url(), "model": "gpt-4o", "maxRetries": 0},
        "permissions": {"allow": ["bash"]},
        "sideRequests": false
    }));
    let mut command = project.command(&["chat"]);
    command.env("TERM", "xterm");
    let mut repl = rexpect::session::spawn_command(command, Some(30_000)).unwrap();
    repl.exp_string("/help for commands").unwrap();
    repl.send_line("start a sleeper").unwrap();
    repl.exp_string("Started one.").unwrap();
    repl.send_line("/ps").unwrap();
    repl.exp_string(&format!("sleep 990.{mark}")).unwrap();
    repl.send_line("/kill p1").unwrap();
    repl.exp_string("killed by SIGTERM").unwrap();
    assert_eq!(
        none_left(&format!("sleep 990.{mark}")),
        Vec::<String>::new()
    );
    repl.send_line("/kill p9").unwrap();
    repl.exp_string("no background process `p9`").unwrap();
    repl.send_line("start another").unwrap();
    repl.exp_string("Started another.").unwrap();
    assert_eq!(processes_with(&format!("sleep 989.{mark}")).len(), 1);
    repl.send_line("/exit").unwrap();
    repl.exp_eof().unwrap();
    assert_eq!(
        none_left(&format!("sleep 989.{mark}")),
        Vec::<String>::new()
    );
}
