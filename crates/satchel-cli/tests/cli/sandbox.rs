//! End-to-end: with no permissions configured, `satchel run` lets a
//! scripted model do ordinary work in the project without asking, and every
//! escape is contained by the sandbox and reported as such; a system that
//! cannot sandbox fails closed; `--mode`, `--allow` and `--deny` on `run`
//! and `mcp serve`; Ctrl-C at the REPL's consent prompt, through a
//! pseudo-terminal; a Satchel started with SIGCHLD ignored still reads its
//! commands' exit status.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use crate::fake_model::{FakeModel, Reply, tool_contents};
use crate::support::project::Project;
use serde_json::{Value, json};

/// A project whose model is a script, with no `permissions` at all.
struct Sandbox {
    project: Project,
    model: FakeModel,
}

impl Sandbox {
    fn new(script: Vec<Reply>) -> Sandbox {
        let model = FakeModel::start(script);
        let project = Project::new(&json!({
            "llm": {"provider": "openai", "baseUrl": model.base_url(), "model": "gpt-4o",
                     "maxRetries": 0, "requestTimeoutSecs": 20}
        }));
        std::fs::create_dir_all(project.path("tmp")).unwrap();
        std::fs::create_dir_all(project.path("outside")).unwrap();
        Sandbox { project, model }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.project.path(name)
    }

    /// `satchel ARGS`, its temporary directory a sibling of the project
    /// (so `outside` is neither).
    fn command(&self, args: &[&str]) -> Command {
        let mut command = self.project.command(args);
        command.env("TMPDIR", self.path("tmp"));
        command
    }

    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> (Value, Output) {
        let mut command = self.command(args);
        command.envs(env.iter().copied()).stdin(Stdio::null());
        let output = command.output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let transcript = serde_json::from_str(&stdout).unwrap_or_else(|error| {
            panic!(
                "not JSON ({error}): {stdout}\nstderr: {}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
        (transcript, output)
    }
}

fn bash(command: &str) -> (String, String) {
    ("bash".into(), json!({"command": command}).to_string())
}

fn result_fields(text: &str) -> Value {
    // A tool message is the feedback block (first result only), then the
    // result's JSON, then any note.
    let start = text.find("{\"").unwrap_or(0);
    let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
    stream.next().and_then(Result::ok).unwrap_or(Value::Null)
}

#[test]
fn ordinary_work_runs_without_asking_and_escapes_are_contained() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let udp_port = udp.local_addr().unwrap().port();

    let ordinary = vec![
        bash("ls"),
        bash("cat notes.txt"),
        bash("grep -c hello notes.txt"),
        bash("git status --short"),
        bash("echo made > made.txt && cat made.txt"),
    ];
    let sandbox = Sandbox::new(Vec::new());
    let outside = sandbox.path("outside").display().to_string();
    let escapes = vec![
        bash(&format!("echo x > {outside}/abs")),
        bash("echo x > ../outside/dotdot"),
        bash("echo x > planted-link/through-symlink"),
        // A hard link to an outside file cannot be made from inside (Landlock
        // refuses to link across the sandbox's edge). One planted before the
        // command runs shares the outside file's inode, and no path-based
        // sandbox can tell it apart: see ARCHITECTURE.md.
        bash(&format!(
            "ln {outside}/target made-hard && echo x >> made-hard"
        )),
        bash(&format!("cd / && echo x > {outside}/from-root")),
        bash(&format!(
            "python3 -c 'open(\"{outside}/py\", \"w\").write(\"x\")'"
        )),
        bash(&format!("echo x | tee {outside}/tee")),
        bash(&format!("curl -sS --max-time 3 http://127.0.0.1:{port}/")),
        bash(&format!(
            "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 3)'"
        )),
        bash(&format!("exec 3<>/dev/tcp/127.0.0.1/{port}")),
        bash(&format!("echo x > /dev/udp/127.0.0.1/{udp_port}")),
        bash("python3 -c 'import socket; print(socket.getaddrinfo(\"example.com\", 80))'"),
        bash("echo \"[${SANDBOX_TEST_API_KEY:-}]\""),
    ];
    sandbox.model.push(vec![
        Reply::Calls(ordinary.clone()),
        Reply::Calls(escapes.clone()),
        Reply::text("done"),
    ]);
    std::fs::write(sandbox.path("project/notes.txt"), "hello\n").unwrap();
    std::fs::write(sandbox.path("outside/target"), "original\n").unwrap();
    std::os::unix::fs::symlink(
        sandbox.path("outside"),
        sandbox.path("project/planted-link"),
    )
    .unwrap();
    assert!(
        Command::new("git")
            .args(["init", "-q"])
            .current_dir(sandbox.path("project"))
            .status()
            .unwrap()
            .success()
    );

    let (transcript, output) = sandbox.run(
        &["run", "--json", "do things"],
        &[("SANDBOX_TEST_API_KEY", "sk-must-not-leak-123")],
    );
    assert!(output.status.success(), "{transcript}");
    assert_eq!(transcript["answer"], "done", "{transcript}");

    let requests = sandbox.model.main_requests();
    let ordinary_results = tool_contents(&requests[1]);
    let last = |texts: Vec<String>, n: usize| texts[texts.len() - n..].to_vec();
    assert_eq!(ordinary_results.len(), ordinary.len());
    for (call, text) in ordinary.iter().zip(&ordinary_results) {
        let fields = result_fields(text);
        assert_eq!(fields["exit_code"], 0, "{}: {text}", call.1);
        assert_eq!(fields["sandbox"], "workspace", "{}: {text}", call.1);
    }
    assert!(ordinary_results[0].contains("notes.txt"));
    assert_eq!(
        std::fs::read_to_string(sandbox.path("project/made.txt")).unwrap(),
        "made\n"
    );

    let escape_results = last(tool_contents(&requests[2]), escapes.len());
    assert_eq!(escape_results.len(), escapes.len());
    let (secret, contained) = escape_results.split_last().unwrap();
    for (call, text) in escapes.iter().zip(contained) {
        // Sending a datagram succeeds: on the conversation's own loopback
        // (issue #48), where nobody listens; the machine's socket gets
        // nothing (checked below).
        if call.1.contains("/dev/udp") {
            continue;
        }
        let fields = result_fields(text);
        assert_ne!(fields["exit_code"], 0, "{} escaped: {text}", call.1);
        // The model is told it may be the sandbox, and how to ask for more.
        assert!(
            text.contains("sandbox: \\\"none\\\"") || text.contains("sandbox: \"none\""),
            "{}: no sandbox note: {text}",
            call.1
        );
    }
    assert!(result_fields(secret)["stdout"] == "[]\n", "{secret}");
    let entries: Vec<_> = std::fs::read_dir(sandbox.path("outside"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, vec!["target"]);
    assert_eq!(
        std::fs::read_to_string(sandbox.path("outside/target")).unwrap(),
        "original\n"
    );
    let mut datagram = [0u8; 4];
    assert!(udp.recv(&mut datagram).is_err(), "a datagram arrived");
}

#[test]
fn a_system_that_cannot_sandbox_fails_closed() {
    let sandbox = Sandbox::new(vec![
        Reply::Calls(vec![bash("touch ran")]),
        Reply::text("could not"),
    ]);
    let (transcript, output) = sandbox.run(
        &["run", "--json", "touch a file"],
        &[("SATCHEL_SANDBOX_DISABLE", "landlock")],
    );
    assert!(output.status.success(), "{transcript}");
    let results = tool_contents(&sandbox.model.main_requests()[1]);
    let fields = result_fields(&results[0]);
    assert_eq!(fields["error_code"], "PERMISSION_DENIED", "{}", results[0]);
    let message = fields["error"].as_str().unwrap();
    assert!(message.contains("would run unsandboxed"), "{message}");
    assert!(message.contains("Landlock"), "{message}");
    assert!(!sandbox.path("project/ran").exists());
}

#[test]
fn run_takes_mode_allow_and_deny_flags() {
    let sandbox = Sandbox::new(Vec::new());
    let outside = sandbox.path("outside").display().to_string();
    // readonly: not even the project is writable.
    sandbox.model.push(vec![
        Reply::Calls(vec![bash("echo x > in-project")]),
        Reply::text("ok"),
    ]);
    let (_, output) = sandbox.run(&["run", "--json", "--mode", "readonly", "write"], &[]);
    assert!(output.status.success());
    assert!(!sandbox.path("project/in-project").exists());

    // --allow lets a matching call leave the sandbox without asking.
    let leave = json!({"command": format!("echo x > {outside}/granted"), "sandbox": "none",
                       "justification": "the test writes outside"})
    .to_string();
    sandbox.model.push(vec![
        Reply::Calls(vec![("bash".into(), leave.clone())]),
        Reply::text("ok"),
    ]);
    let (_, output) = sandbox.run(&["run", "--json", "write outside"], &[]);
    assert!(output.status.success());
    assert!(
        !sandbox.path("outside/granted").exists(),
        "left the sandbox without a grant"
    );
    sandbox.model.push(vec![
        Reply::Calls(vec![("bash".into(), leave)]),
        Reply::text("ok"),
    ]);
    // Rules match commands without their redirections.
    let rule = "bash(echo x)".to_owned();
    let (_, output) = sandbox.run(&["run", "--json", "--allow", &rule, "write outside"], &[]);
    assert!(output.status.success());
    assert!(sandbox.path("outside/granted").exists());

    // --deny wins over everything.
    sandbox
        .model
        .push(vec![Reply::Calls(vec![bash("echo hi")]), Reply::text("ok")]);
    let (_, output) = sandbox.run(&["run", "--json", "--deny", "bash(echo *)", "say hi"], &[]);
    assert!(output.status.success());
    let requests = sandbox.model.main_requests();
    let last = tool_contents(&requests[requests.len() - 1]);
    assert!(last[0].contains("deny rule `bash(echo *)`"), "{}", last[0]);

    // A rule that does not parse stops the run before anything starts.
    let output = sandbox
        .command(&["run", "--json", "--allow", "bash(oops", "x"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("(command line)"));
}

#[test]
fn mcp_serve_takes_mode_and_deny_flags() {
    let sandbox = Sandbox::new(Vec::new());
    let call = |args: &[&str], command: &str| -> Value {
        let mut child = sandbox
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        for message in [
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "bash", "arguments": {"command": command}}}),
        ] {
            writeln!(stdin, "{message}").unwrap();
        }
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let answer = loop {
            let line = lines.next().unwrap().unwrap();
            let value: Value = serde_json::from_str(&line).unwrap();
            if value["id"] == 1 {
                break value;
            }
        };
        drop(stdin);
        child.kill().ok();
        child.wait().unwrap();
        answer["result"]["structuredContent"].clone()
    };
    // The default: contained commands run.
    let fields = call(&["mcp", "serve"], "echo hi");
    assert_eq!(fields["stdout"], "hi\n", "{fields}");
    assert_eq!(fields["sandbox"], "workspace");
    // --deny refuses; --mode readonly confines.
    let fields = call(&["mcp", "serve", "--deny", "bash(echo *)"], "echo hi");
    assert_eq!(fields["error_code"], "PERMISSION_DENIED", "{fields}");
    let fields = call(
        &["mcp", "serve", "--mode", "readonly"],
        "echo x > f; echo $?",
    );
    assert_eq!(fields["sandbox"], "readonly", "{fields}");
    assert!(!sandbox.path("project/f").exists());
    // --mode trust runs unsandboxed.
    let fields = call(&["mcp", "serve", "--mode", "trust"], "echo hi");
    assert_eq!(fields["sandbox"], "none", "{fields}");
}

/// Drives `satchel chat` in a pseudo-terminal (Python's `pty`, which is on
/// every machine the tests run on): the model asks to leave the sandbox,
/// the user presses Ctrl-C at the consent prompt, and the turn is
/// interrupted, the command never run.
#[test]
fn ctrl_c_at_the_consent_prompt_cancels_the_turn() {
    let sandbox = Sandbox::new(Vec::new());
    let marker = sandbox.path("outside/ran");
    let leave = json!({"command": format!("touch {}", marker.display()), "sandbox": "none",
                       "justification": "needs to"})
    .to_string();
    sandbox.model.push(vec![
        Reply::Calls(vec![("bash".into(), leave)]),
        Reply::text("should not be reached"),
    ]);
    let driver = r#"
import os, pty, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], "chat"])
seen = b""
def wait_for(needle, limit=30):
    global seen
    end = time.time() + limit
    while needle not in seen:
        if time.time() > end:
            sys.stdout.write(seen.decode(errors="replace")); sys.exit(3)
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
wait_for(b"Ctrl-D to leave")
os.write(fd, b"go\r")
wait_for(b"Allow?")
os.write(fd, b"\x03")
wait_for(b"interrupted.")
os.write(fd, b"\x04")
time.sleep(0.5)
sys.stdout.write(seen.decode(errors="replace"))
"#;
    let mut python = Command::new("python3");
    python
        .args(["-c", driver, env!("CARGO_BIN_EXE_satchel")])
        .current_dir(sandbox.path("project"));
    for (key, value) in sandbox.command(&[]).get_envs() {
        match value {
            Some(value) => python.env(key, value),
            None => python.env_remove(key),
        };
    }
    let output = python.env("HOME", sandbox.path("home")).output().unwrap();
    let screen = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{screen}");
    assert!(screen.contains("interrupted."), "{screen}");
    assert!(!marker.exists(), "the command ran");
    // The model was not asked again after the interruption.
    assert_eq!(sandbox.model.main_requests().len(), 1, "{screen}");
}

/// A parent that ignores SIGCHLD passes that on through exec, and the
/// kernel then reaps Satchel's children itself: waiting for one failed
/// (`TOOL_CRASHED`, "No child processes") or, in the sandbox, the command's
/// exit status was lost (1 for 3). Satchel sets SIGCHLD back before its
/// first child, so the status arrives and the command does not inherit
/// the disposition.
#[test]
fn a_satchel_started_with_sigchld_ignored_still_reads_exit_statuses() {
    let sandbox = Sandbox::new(vec![]);
    // SIGCHLD is signal 17: bit 16 of the command's SigIgn mask.
    let script = "grep SigIgn /proc/self/status; exit 3";
    for input in [
        json!({"command": script}),
        json!({"command": script, "sandbox": "none", "justification": "the test"}),
    ] {
        let mut command = sandbox.command(&["tools", "call", "bash", &input.to_string()]);
        // SAFETY: signal() is async-signal-safe; the child is about to exec.
        unsafe {
            command.pre_exec(|| {
                libc::signal(libc::SIGCHLD, libc::SIG_IGN);
                Ok(())
            });
        }
        let output = command.stdin(Stdio::null()).output().unwrap();
        let result: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
            panic!(
                "not JSON ({error}): {}\nstderr: {}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        });
        assert_eq!(result["exit_code"], 3, "{input}: {result}");
        let ignored = result["stdout"].as_str().unwrap().trim();
        let mask = u64::from_str_radix(ignored.trim_start_matches("SigIgn:").trim(), 16).unwrap();
        assert_eq!(
            mask & (1 << 16),
            0,
            "{input}: the command ignores SIGCHLD: {ignored}"
        );
    }
}
