//! End-to-end: the built `satchel` binary, run as a user would run it.
//!
//! Every run gets its own project, config and data directories, so a
//! developer's own `~/.config/satchel` and database never leak into a test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// One isolated place to run `satchel` in.
pub(crate) struct Sandbox {
    pub(crate) dir: tempfile::TempDir,
}

impl Sandbox {
    pub(crate) fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project/.agents")).unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        Sandbox { dir }
    }

    pub(crate) fn project(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    pub(crate) fn command(&self, args: &[&str]) -> Command {
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
            .env_remove("RUST_LOG");
        // The model comes from the project's agent.json, never the developer's shell.
        for var in [
            "SATCHEL_MODEL",
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
        ] {
            command.env_remove(var);
        }
        command
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.command(args).stdin(Stdio::null()).output().unwrap()
    }

    pub(crate) fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    pub(crate) fn write_config(&self, text: &str) {
        std::fs::write(self.project().join(".agents/agent.json"), text).unwrap();
    }
}

pub(crate) fn stdout_json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn tools_list_shows_bash() {
    let output = Sandbox::new().run(&["tools", "list"]);
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.starts_with("NAME"), "{text}");
    assert!(
        text.lines()
            .any(|line| line.starts_with("bash ") && line.contains("builtin")),
        "{text}"
    );

    let output = Sandbox::new().run(&["tools", "list", "--json"]);
    assert_eq!(stdout_json(&output)[0]["name"], "bash");
}

#[test]
fn tools_show_prints_the_spec() {
    let output = Sandbox::new().run(&["tools", "show", "bash"]);
    assert!(output.status.success());
    let spec = stdout_json(&output);
    assert_eq!(spec["name"], "bash");
    assert_eq!(spec["inputSchema"]["required"], json!(["command"]));
    assert_eq!(spec["annotations"]["destructiveHint"], true);

    let output = Sandbox::new().run(&["tools", "show", "nope"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("no tool named `nope`; available tools: bash"));
}

#[test]
fn tools_call_prints_results_and_exits_zero() {
    let output = Sandbox::new().run(&["tools", "call", "bash", r#"{"command": "echo hello"}"#]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = stdout_json(&output);
    assert_eq!(results["stdout"], "hello\n");
    assert_eq!(results["exit_code"], 0);
}

#[test]
fn tools_call_reads_input_from_stdin() {
    let sandbox = Sandbox::new();
    let output = sandbox.run_with_stdin(&["tools", "call", "bash"], r#"{"command": "pwd"}"#);
    assert!(output.status.success(), "{}", stderr(&output));
    let expected = format!("{}\n", sandbox.project().canonicalize().unwrap().display());
    assert_eq!(stdout_json(&output)["stdout"], expected);
}

#[test]
fn tools_call_json_prints_the_whole_output() {
    let output = Sandbox::new().run(&[
        "tools",
        "call",
        "bash",
        r#"{"command": "exit 4"}"#,
        "--json",
    ]);
    assert!(output.status.success());
    let whole = stdout_json(&output);
    assert_eq!(whole["is_error"], false);
    assert_eq!(whole["results"][0]["type"], "json");
    assert_eq!(whole["results"][0]["json"]["exit_code"], 4);
    assert!(
        whole["user_message"]
            .as_str()
            .unwrap()
            .starts_with("ran `exit 4` in ")
    );
}

#[test]
fn failed_call_exits_one_with_a_structured_error() {
    let sandbox = Sandbox::new();
    let output = sandbox.run(&[
        "tools",
        "call",
        "bash",
        r#"{"command": "true", "timeout": 9999}"#,
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout_json(&output)["error_code"], "INVALID_PARAMS");

    let output = sandbox.run(&["tools", "call", "bsh", "{}"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout_json(&output)["error_code"], "TOOL_NOT_FOUND");
}

#[test]
fn input_that_is_not_json_is_a_usage_error() {
    let output = Sandbox::new().run(&["tools", "call", "bash", "{command: ls}"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("the input is not valid JSON"),
        "{}",
        stderr(&output)
    );
    let output = Sandbox::new().run(&["tools", "call", "bash", "[1]"]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn project_config_sets_output_limits() {
    let sandbox = Sandbox::new();
    sandbox.write_config(r#"{"exec": {"stdoutLimitBytes": 20, "spill": false}}"#);
    let output = sandbox.run(&["tools", "call", "bash", r#"{"command": "seq 1 1000"}"#]);
    let results = stdout_json(&output);
    assert_eq!(results["truncated"], true);
    assert_eq!(
        results["stdout"],
        "1\n2\n3\n4\n5\n\n[... 3873 bytes omitted ...]\n\n999\n1000\n"
    );
}

/// Issue #30: this used to be a warning, and the call ran with defaults
/// (any deny rules in the file gone). Now nothing runs.
#[test]
fn invalid_config_stops_the_command_naming_the_line() {
    let sandbox = Sandbox::new();
    sandbox.write_config("{\n  \"exec\": oops\n}");
    let output = sandbox.run(&[
        "tools",
        "call",
        "bash",
        r#"{"command": "echo must not run"}"#,
    ]);
    assert!(!output.status.success());
    assert!(
        output.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let error = stderr(&output);
    assert!(error.contains(".agents/agent.json:2:"), "{error}");
}

#[test]
fn every_command_has_help_with_examples() {
    for args in [
        &["--help"][..],
        &["tools", "--help"],
        &["tools", "list", "--help"],
        &["tools", "show", "--help"],
        &["tools", "call", "--help"],
        &["log", "--help"],
        &["conversations", "--help"],
        &["audit", "--help"],
        &["export", "--help"],
        &["tools", "refresh", "--help"],
        &["tools", "new", "--help"],
        &["tools", "prompt", "--help"],
        &["mcp", "--help"],
        &["mcp", "serve", "--help"],
        &["mcp", "servers", "--help"],
        &["memory", "--help"],
        &["memory", "store", "--help"],
        &["memory", "recall", "--help"],
        &["memory", "list", "--help"],
        &["memory", "forget", "--help"],
        &["memory", "stats", "--help"],
        &["memory", "new-session", "--help"],
        &["bench", "--help"],
        &["bench", "memory", "--help"],
    ] {
        let output = Sandbox::new().run(args);
        assert!(output.status.success(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&output.stdout).contains("Examples:"),
            "{args:?} has no examples"
        );
    }
}

#[test]
fn human_output_formats_for_a_person() {
    let output = Sandbox::new().run(&[
        "tools",
        "call",
        "bash",
        r#"{"command": "echo hi"}"#,
        "--human",
    ]);
    let text = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[..2], ["$ echo hi", "hi"]);
    assert!(lines[2].starts_with("exit 0 · "), "{text}");
}

/// Whether no live (non-zombie) process has `argument` on its command
/// line: commands run in a PID namespace of their own, so their ids say
/// nothing out here.
fn none_running_with(argument: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    !entries.flatten().any(|entry| {
        let dir = entry.path();
        let has_argument = std::fs::read(dir.join("cmdline"))
            .is_ok_and(|line| line.split(|b| *b == 0).any(|a| a == argument.as_bytes()));
        let zombie = std::fs::read_to_string(dir.join("stat")).is_ok_and(|stat| {
            stat.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        });
        has_argument && !zombie
    })
}

fn wait_for(path: &Path) -> String {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{} never appeared", path.display());
}

#[test]
fn child_dies_when_satchel_is_killed() {
    let sandbox = Sandbox::new();
    let pid_file = sandbox.dir.path().join("pid");
    let nap = format!("1000.{}", std::process::id());
    let command = json!({"command": format!("echo $$ > {}; exec sleep {nap}", pid_file.display())})
        .to_string();
    let mut satchel = sandbox
        .command(&["tools", "call", "bash", &command])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&pid_file);
    satchel.kill().unwrap();
    satchel.wait().unwrap();
    let start = Instant::now();
    while !none_running_with(&nap) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the command outlived satchel"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn interrupt_cancels_the_running_tool() {
    let sandbox = Sandbox::new();
    let pid_file = sandbox.dir.path().join("pid");
    let command =
        json!({"command": format!("echo $$ > {}; sleep 1000", pid_file.display())}).to_string();
    let satchel = sandbox
        .command(&["tools", "call", "bash", &command])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&pid_file);
    assert!(send_signal(satchel.id(), "INT"));
    let output = satchel.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout_json(&output)["error_code"], "CANCELLED");
    assert!(
        stderr(&output).contains("interrupted: stopping the tool"),
        "{}",
        stderr(&output)
    );
}

/// Sends a signal with the system's `kill` command.
fn send_signal(pid: u32, signal: &str) -> bool {
    Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .unwrap()
        .success()
}

pub(crate) fn install_tool(dir: &Path, file: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(file);
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

pub(crate) fn reporting_tool(answer: &str) -> String {
    format!(
        "#!/bin/bash\nif [ \"$1\" = --schema ]; then echo '{{\"description\": \"Says where it lives.\", \"inputSchema\": {{\"type\": \"object\"}}}}'; exit 0; fi\necho '{{\"from\": \"{answer}\"}}'\n"
    )
}

#[test]
fn tools_list_shows_where_each_tool_comes_from() {
    let sandbox = Sandbox::new();
    install_tool(
        &sandbox.project().join(".agents/tools"),
        "where-tool",
        &reporting_tool("project"),
    );
    install_tool(
        &sandbox.dir.path().join("config/satchel/tools"),
        "where-tool",
        &reporting_tool("user"),
    );
    install_tool(
        &sandbox.dir.path().join("libexec"),
        "sys-only",
        &reporting_tool("system"),
    );
    std::fs::write(
        sandbox.project().join(".agents/tools/notes.txt"),
        "not a tool",
    )
    .unwrap();

    let output = sandbox.run(&["tools", "list"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8(output.stdout)
        .unwrap()
        .replace(&sandbox.dir.path().display().to_string(), "<dir>");
    // The whole listing: precedence, sources, what was skipped and why.
    expect_test::expect![[r#"
        NAME          DESCRIPTION                                                    SOURCE
        bash          Run a bash command non-interactively: no stdin, no terminal,…  builtin
        code          Run a short program and get its output ("execute": code, lan…  builtin
        conversation  Read this conversation's own record, summarised turns includ…  builtin
        edit          Replace exact text in a file                                   builtin
        fetch         Fetch a URL (HTTP GET) and return it readable: HTML as markd…  builtin
        glob          Find files by path pattern (`**/*.rs`, `src/**/test_*.py`), …  builtin
        grep          Search file contents with a regex (ripgrep's engine and defa…  builtin
        memory        Remember across conversations                                  builtin
        process       Manage processes started with `bash` and `background: true` …  builtin
        read          Read a file: its lines numbered from `offset` (1-based), at …  builtin
        search        Search the web or the news: up to max_results results with t…  builtin
        skill         Load a skill listed in the system prompt: its instructions, …  builtin
        sys_only      Says where it lives                                            system <dir>/libexec/sys-only
        where         Says where it lives                                            project .agents/tools/where-tool
        write         Create a file, or replace one whole, with `content` exactly …  builtin

        Also apply_patch and str_replace_based_edit_tool: `edit` and `write` in the forms Claude and OpenAI models are trained on (`llm.editTool`; `satchel tools prompt` shows which a model gets).

        Not tools (2):
          - project .agents/tools/notes.txt: not executable (`chmod +x` it to make it a tool)
          - user <dir>/config/satchel/tools/where-tool: shadowed by the project tool `<dir>/project/.agents/tools/where-tool`
    "#]]
    .assert_eq(&text);

    let output = sandbox.run(&["tools", "call", "where", "{}"]);
    assert_eq!(stdout_json(&output), json!({"from": "project"}));

    let listed = stdout_json(&sandbox.run(&["tools", "list", "--json"]));
    let tool = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "where")
        .unwrap();
    assert_eq!(tool["source"], "project");
}

#[test]
fn tools_new_writes_a_working_skeleton() {
    let sandbox = Sandbox::new();
    for (file, lang) in [("shout-tool", "bash"), ("count-chars", "python")] {
        let output = sandbox.run(&["tools", "new", file, "--lang", lang]);
        assert!(output.status.success(), "{lang}: {}", stderr(&output));
        assert!(sandbox.project().join(".agents/tools").join(file).exists());
    }
    let output = sandbox.run(&["tools", "call", "shout", r#"{"text": "hey"}"#]);
    assert_eq!(stdout_json(&output), json!({"text": "hey", "length": 3}));
    let output = sandbox.run(&["tools", "call", "count_chars", r#"{"text": "hey"}"#]);
    assert_eq!(stdout_json(&output), json!({"text": "hey", "length": 3}));

    let again = sandbox.run(&["tools", "new", "shout-tool"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr(&again).contains("already exists; pass --force"),
        "{}",
        stderr(&again)
    );
}

#[test]
fn tools_refresh_asks_every_tool_again() {
    let sandbox = Sandbox::new();
    let tools = sandbox.project().join(".agents/tools");
    install_tool(&tools, "where", &reporting_tool("v1"));
    assert!(sandbox.run(&["tools", "list"]).status.success());
    // Same size and mtime would hide an edit from the cache; refresh does not care.
    let counter = sandbox.dir.path().join("probes");
    let body = format!(
        "#!/bin/bash\nif [ \"$1\" = --schema ]; then echo x >> {}; echo '{{\"inputSchema\": {{\"type\": \"object\"}}}}'; exit 0; fi\necho '{{}}'\n",
        counter.display()
    );
    install_tool(&tools, "counted", &body);
    // Discovery is sandboxed (no writes); this test counts probes in a file.
    let unsandboxed = |args: &[&str]| {
        sandbox
            .command(args)
            .env("SATCHEL_SANDBOX_DISABLE", "landlock")
            .output()
            .unwrap()
    };
    assert!(unsandboxed(&["tools", "list"]).status.success());
    assert!(unsandboxed(&["tools", "list"]).status.success());
    assert_eq!(
        std::fs::read_to_string(&counter).unwrap().lines().count(),
        1,
        "the cache should answer"
    );
    let output = unsandboxed(&["tools", "refresh"]);
    assert!(output.status.success());
    assert_eq!(
        std::fs::read_to_string(&counter).unwrap().lines().count(),
        2
    );
}

#[test]
fn policy_check_explains_without_running() {
    let sandbox = Sandbox::new();
    sandbox.write_config(r#"{"permissions": {"allow": ["bash(ls*)"], "deny": ["bash(rm *)"]}}"#);
    let marker = sandbox.dir.path().join("ran");
    let command = format!("ls; touch {}; rm -rf /", marker.display());
    let input = json!({"command": command}).to_string();
    let output = sandbox.run(&["policy", "check", "bash", &input, "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let decision = stdout_json(&output);
    assert_eq!(decision["verdict"], "deny");
    assert_eq!(decision["decided_by"], "deny rule `bash(rm *)`");
    let verdicts: Vec<&str> = decision["judgements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["verdict"].as_str().unwrap())
        .collect();
    // `touch` runs in the sandbox without asking; `rm` decides.
    assert_eq!(verdicts, ["allow", "allow", "deny"]);
    assert!(
        decision["judgements"][2]["rule_file"]
            .as_str()
            .unwrap()
            .ends_with(".agents/agent.json")
    );
    assert!(!marker.exists(), "policy check must not run the command");

    let output = sandbox.run(&["policy", "check", "bash", r#"{"command": "ls"}"#]);
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(
        text.starts_with("bash: allow\n  `ls` matches the allow rule `bash(ls*)`"),
        "{text}"
    );
}

#[test]
fn tools_call_honours_deny_rules() {
    let sandbox = Sandbox::new();
    sandbox.write_config(r#"{"permissions": {"deny": ["bash(rm *)"]}}"#);
    let victim = sandbox.project().join("keep.txt");
    std::fs::write(&victim, "precious").unwrap();
    let output = sandbox.run(&[
        "tools",
        "call",
        "bash",
        r#"{"command": "echo x && rm keep.txt"}"#,
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout_json(&output)["error_code"], "PERMISSION_DENIED");
    assert!(victim.exists());
    // What only asks for consent runs: the user typed the call themselves.
    let output = sandbox.run(&["tools", "call", "bash", r#"{"command": "echo fine"}"#]);
    assert_eq!(stdout_json(&output)["stdout"], "fine\n");
}

/// A SearXNG stand-in on a loopback port, served from its own thread.
fn fake_searxng() -> String {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let router = axum::Router::new().route(
                "/search",
                axum::routing::get(|| async {
                    axum::Json(json!({"results": [
                        {"url": "https://www.rust-lang.org/", "title": "Rust", "content": "A <b>fast</b> language"}
                    ]}))
                }),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            sender.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, router).await.unwrap();
        });
    });
    format!("http://{}", receiver.recv().unwrap())
}

#[test]
fn search_command_uses_the_configured_backend() {
    let sandbox = Sandbox::new();
    let output = sandbox
        .command(&["search", "rust", "--json"])
        .env("SEARXNG_URL", fake_searxng())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let results = stdout_json(&output);
    assert_eq!(results["backend"], "searxng");
    assert_eq!(
        results["results"][0],
        json!({"title": "Rust", "url": "https://www.rust-lang.org/", "snippet": "A fast language"})
    );

    let output = sandbox
        .command(&["search", "rust"])
        .env_remove("SEARXNG_URL")
        .env_remove("BRAVE_API_KEY")
        .env_remove("TAVILY_API_KEY")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("search is not configured: set SEARXNG_URL"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn mcp_servers_without_configuration_says_where_to_add_them() {
    let output = Sandbox::new().run(&["mcp", "servers"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.starts_with("no MCP servers configured"), "{text}");
    let output = Sandbox::new().run(&["mcp", "servers", "--json"]);
    assert_eq!(stdout_json(&output), json!([]));
}

#[test]
fn mcp_serve_refuses_a_public_address_without_a_token() {
    let output = Sandbox::new().run(&["mcp", "serve", "--http", "0.0.0.0:0"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("is not a loopback address: give a bearer token"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn audit_rows_carry_the_policy_decision() {
    let sandbox = Sandbox::new();
    sandbox.write_config(r#"{"permissions": {"allow": ["bash(echo *)"], "deny": ["bash(rm *)"]}}"#);
    sandbox.run(&["tools", "call", "bash", r#"{"command": "echo ok"}"#]);
    sandbox.run(&["tools", "call", "bash", r#"{"command": "rm -rf nothing"}"#]);
    sandbox.run(&[
        "tools",
        "call",
        "bash",
        r#"{"command": "true", "sandbox": "none", "justification": "a test"}"#,
    ]);
    sandbox.run(&["tools", "call", "bash", r#"{"command": "true"}"#]);
    let rows = stdout_json(&sandbox.run(&["audit", "--json"]));
    let decisions: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["decision"].as_str().unwrap())
        .collect();
    assert_eq!(
        decisions,
        [
            "allow by allow rule `bash(echo *)`",
            "deny by deny rule `bash(rm *)`",
            "ask by mode default; user allowed once",
            "allow by mode default"
        ]
    );
}

#[test]
fn code_runs_are_traced_and_summarised() {
    let sandbox = Sandbox::new();
    let run = |code: &str| {
        let input = json!({"action": "execute", "language": "bash", "code": code}).to_string();
        sandbox.run(&["tools", "call", "code", &input])
    };
    assert_eq!(stdout_json(&run("echo one"))["result"]["stdout"], "one\n");
    run("echo two");
    let failed = stdout_json(&run("if then fi"));
    assert_eq!(failed["error_category"], "syntax");

    let stats = stdout_json(&sandbox.run(&["code", "stats", "--json"]));
    assert_eq!(
        (stats["total"].as_u64(), stats["failures"].as_u64()),
        (Some(3), Some(1))
    );
    assert_eq!(stats["categories"][0]["category"], "syntax");
    let failures = stdout_json(&sandbox.run(&["code", "failures", "--json"]));
    assert_eq!(failures.as_array().unwrap().len(), 1);
    assert_eq!(failures[0]["code"], "if then fi");
    assert_eq!(failures[0]["id"], failed["result"]["execution_id"]);
    let text = String::from_utf8(sandbox.run(&["code", "stats"]).stdout).unwrap();
    assert!(
        text.starts_with("Code runs, last 7 days: 3 (2 ok, 1 failed)"),
        "{text}"
    );
}

/// A Chat Completions stand-in that answers every request with `reply`
/// and remembers the request bodies.
fn fake_openai(reply: &'static str) -> (String, std::sync::Arc<std::sync::Mutex<Vec<Value>>>) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let recorded = seen.clone();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let router = axum::Router::new().route(
                "/v1/chat/completions",
                axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
                    let recorded = recorded.clone();
                    async move {
                        recorded.lock().unwrap().push(body);
                        axum::Json(json!({
                            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "fake-coder",
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": reply}}],
                            "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}
                        }))
                    }
                }),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            sender.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, router).await.unwrap();
        });
    });
    (format!("http://{}/v1", receiver.recv().unwrap()), seen)
}

#[test]
fn code_generate_with_the_configured_model() {
    let sandbox = Sandbox::new();
    let (base_url, seen) = fake_openai("```python\nprint('fizz')\n```\nRun it with python3.");
    sandbox.write_config(
        &json!({
            "llm": {"provider": "openai", "baseUrl": base_url, "model": "fake-coder", "apiKeyEnv": "FAKE_KEY"},
            "code": {"generator": "model"}
        })
        .to_string(),
    );
    // The one-shot call prints the job id at once and stays until the job is done.
    let input =
        json!({"action": "generate", "task": "print fizz", "language": "python"}).to_string();
    let output = sandbox
        .command(&["tools", "call", "code", &input])
        .env("FAKE_KEY", "k-123")
        .output()
        .unwrap();
    let started = stdout_json(&output);
    let job_id = started["job_id"].as_str().unwrap().to_owned();
    assert_eq!(started["result"]["generator"], "model fake-coder");
    let status = json!({"action": "status", "job_id": job_id}).to_string();
    let report = stdout_json(
        &sandbox
            .command(&["tools", "call", "code", &status])
            .env("FAKE_KEY", "k-123")
            .output()
            .unwrap(),
    );
    assert_eq!(report["result"]["status"], "done", "{report}");
    assert!(
        report["result"]["code"]
            .as_str()
            .unwrap()
            .contains("print('fizz')")
    );
    let bodies = seen.lock().unwrap();
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0]["model"], "fake-coder");
    assert_eq!(bodies[0]["messages"][0]["role"], "system");
    assert!(
        bodies[0]["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("print fizz")
    );
}
