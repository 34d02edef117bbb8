//! Real MCP peers from the package registries against the built `satchel`:
//! the official Python SDK as a client of `satchel mcp serve`, the
//! reference server `@modelcontextprotocol/server-everything` as a server
//! Satchel's client uses, the official conformance suite against
//! `satchel mcp serve --http`, plain and in conformance fixture mode, and
//! its client scenarios against `satchel mcp connect`.
//!
//! The peers live in `.peers/` at the repository root, installed at pinned
//! versions by `scripts/install-test-peers.sh` (which `.ci/run` calls).
//! A missing peer fails the test with that instruction: these tests never
//! skip silently.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::mcp_http::spawn_http;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::peers_dir::peer;

/// A temporary project with its own config and cache directories.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project/.agents/tools")).unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        // The peers call bash and the project's tools; nobody can consent
        // over MCP, so the project allows them.
        std::fs::write(
            dir.path().join("project/.agents/agent.json"),
            r#"{"permissions": {"mode": "trust"}}"#,
        )
        .unwrap();
        Sandbox { dir }
    }

    fn project(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    /// The variables every `satchel` run here gets: its own config, data
    /// and cache directories and database, whatever the caller's shell says
    /// (these tests once wrote their calls into the user's own record).
    fn env(&self) -> Vec<(&'static str, String)> {
        let path = |p: &str| self.dir.path().join(p).display().to_string();
        vec![
            ("XDG_CONFIG_HOME", path("config")),
            ("SATCHEL_TRUST_PROJECT", "1".into()),
            ("XDG_DATA_HOME", path("data")),
            ("SATCHEL_MODEL_FETCH", "never".to_owned()),
            ("SATCHEL_DB", path("data/satchel.db")),
            ("XDG_CACHE_HOME", path("cache")),
            ("SATCHEL_LIBEXEC_DIR", path("libexec")),
            ("TMPDIR", self.dir.path().display().to_string()),
        ]
    }

    fn satchel(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_satchel"));
        command
            .args(args)
            .current_dir(self.project())
            .envs(self.env())
            .env_remove("RUST_LOG")
            .env_remove("SATCHEL_MCP_TOKEN");
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.satchel(args).stdin(Stdio::null()).output().unwrap()
    }

    fn install_tool(&self, source: &str) {
        let from = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/peers")
            .join(source);
        let to = self.project().join(".agents/tools").join(source);
        std::fs::copy(from, &to).unwrap();
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

fn stdout_json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// Runs one of the Python SDK client scripts in `tests/peers/` against
/// `satchel mcp serve` in `sandbox`'s project (arguments: the binary, the
/// project, the environment as JSON, then `extra`), and returns the JSON
/// report it prints.
fn python_client(script: &str, sandbox: &Sandbox, extra: &[&str]) -> Value {
    let python = peer("venv/bin/python");
    let env: serde_json::Map<String, Value> = sandbox
        .env()
        .into_iter()
        .map(|(k, v)| (k.to_owned(), json!(v)))
        .collect();
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/peers")
        .join(script);
    let output = Command::new(python)
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_satchel"))
        .arg(sandbox.project())
        .arg(Value::Object(env).to_string())
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the Python client failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout_json(&output)
}

/// Processes whose environment holds `KEY=value`.
fn processes_with_env(key: &str, value: &str) -> Vec<String> {
    let needle = format!("{key}={value}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ
            .split(|b| *b == 0)
            .any(|var| var == needle.as_bytes())
        {
            found.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    found
}

#[test]
fn python_sdk_client_lists_and_calls_satchel_tools() {
    let sandbox = Sandbox::new();
    let output = sandbox.run(&["tools", "new", "shout", "--lang", "bash"]);
    assert!(output.status.success(), "{output:?}");
    let report = python_client("python_client.py", &sandbox, &[]);

    assert_eq!(report["initialize"]["serverInfo"]["name"], "satchel");
    let tools = report["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "bash",
            "code",
            "conversation",
            "edit",
            "fetch",
            "glob",
            "grep",
            "memory",
            "process",
            "read",
            "search",
            "shout",
            "skill",
            "write"
        ]
    );
    assert_eq!(tools[0]["inputSchema"]["required"], json!(["command"]));
    assert_eq!(tools[0]["annotations"]["destructiveHint"], true);

    // The SDK validated structuredContent against bash's outputSchema on the way.
    let ok = &report["ok"];
    assert_eq!(ok["isError"], false);
    assert_eq!(ok["structuredContent"]["stdout"], "from python\n");
    assert_eq!(ok["structuredContent"]["exit_code"], 0);
    let text: Value = serde_json::from_str(ok["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, ok["structuredContent"]);

    // A command that fails is still a successful call of bash.
    assert_eq!(report["exit3"]["structuredContent"]["exit_code"], 3);

    for (key, code) in [("invalid", "INVALID_PARAMS"), ("missing", "TOOL_NOT_FOUND")] {
        let result = &report[key];
        assert_eq!(result["isError"], true, "{key}: {result}");
        assert_eq!(result["structuredContent"]["error_code"], code, "{key}");
        assert!(
            result["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains(code),
            "{key}: {result}"
        );
    }
    assert_eq!(
        report["external"]["structuredContent"],
        json!({"text": "hey", "length": 3})
    );
}

/// A project in the `workspace` mode and two directories outside it, the
/// client's root and the one it moves to (`python_roots.py`).
fn roots_sandbox() -> (Sandbox, PathBuf, PathBuf) {
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.project().join(".agents/agent.json"),
        r#"{"permissions": {"mode": "workspace"}}"#,
    )
    .unwrap();
    let root = sandbox.dir.path().join("client-root");
    let next_root = sandbox.dir.path().join("next-root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&next_root).unwrap();
    (sandbox, root, next_root)
}

/// The call right after the client announced its roots moved writes
/// beneath the new root, and no longer beneath the old one.
fn assert_roots_moved(report: &Value, root: &Path, next_root: &Path) {
    assert_eq!(report["in_next_root"]["isError"], false, "{report}");
    assert_eq!(
        std::fs::read_to_string(next_root.join("moved.txt")).unwrap(),
        "moved\n"
    );
    assert_eq!(
        report["in_old_root"]["structuredContent"]["error_code"], "PERMISSION_DENIED",
        "{report}"
    );
    assert!(!root.join("stale.txt").exists());
}

/// An MCP client's roots are where its calls may write, in the
/// `workspace` mode: `write` and `bash` write beneath the root, not in
/// the server's project.
#[test]
fn python_sdk_client_roots_limit_where_write_may_go() {
    let (sandbox, root, next_root) = roots_sandbox();
    let report = python_client(
        "python_roots.py",
        &sandbox,
        &[root.to_str().unwrap(), next_root.to_str().unwrap()],
    );
    // The SDK announces changes (`listChanged`): asked once for four calls,
    // and once more after it said its roots changed.
    assert_eq!(report["asked_before_the_change"], 1, "{report}");
    assert_eq!(report["asked"], 2, "{report}");
    assert_eq!(report["in_root"]["isError"], false, "{report}");
    assert_eq!(
        std::fs::read_to_string(root.join("made.txt")).unwrap(),
        "in the root\n"
    );
    let refused = &report["in_project"];
    assert_eq!(refused["isError"], true, "{report}");
    assert_eq!(
        refused["structuredContent"]["error_code"],
        "PERMISSION_DENIED"
    );
    assert!(!sandbox.project().join("project.txt").exists());
    assert_ne!(
        report["bash_in_project"]["structuredContent"]["exit_code"], 0,
        "{report}"
    );
    assert!(!sandbox.project().join("bash.txt").exists());
    assert_eq!(
        report["bash_in_root"]["structuredContent"]["exit_code"], 0,
        "{report}"
    );
    assert!(root.join("bash.txt").exists());
    assert_roots_moved(&report, &root, &next_root);
}

/// The same client over streamable HTTP (a stateful session, 2025-11-25):
/// asked once, and again right after it announced that its roots moved.
#[test]
fn python_sdk_http_client_roots_are_asked_again_only_after_a_change() {
    let (sandbox, root, next_root) = roots_sandbox();
    let (mut server, url) = serve_http(&sandbox, &[]);
    let report = python_client(
        "python_roots.py",
        &sandbox,
        &[root.to_str().unwrap(), next_root.to_str().unwrap(), &url],
    );
    server.kill().unwrap();
    server.wait().unwrap();
    assert_eq!(report["protocol"], "2025-11-25", "{report}");
    assert_eq!(report["asked_before_the_change"], 1, "{report}");
    assert_eq!(report["asked"], 2, "{report}");
    assert_eq!(report["in_root"]["isError"], false, "{report}");
    assert_roots_moved(&report, &root, &next_root);
}

#[test]
fn satchel_uses_the_reference_server_everything() {
    let server = peer("node_modules/.bin/mcp-server-everything");
    let sandbox = Sandbox::new();
    let mark = format!("satchel-peer-test-{}", std::process::id());
    std::fs::write(
        sandbox.project().join(".agents/mcp.json"),
        json!({"mcpServers": {
            "everything": {"command": server, "args": ["stdio"], "env": {"SATCHEL_TEST_MARK": mark}},
            "broken": {"command": "/nonexistent/mcp-server"},
        }})
        .to_string(),
    )
    .unwrap();

    let output = sandbox.run(&[
        "tools",
        "call",
        "everything__echo",
        r#"{"message": "hello everything"}"#,
        "--json",
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let whole = stdout_json(&output);
    assert_eq!(whole["is_error"], false);
    assert_eq!(whole["results"], "Echo: hello everything");
    // A broken server is a warning, not a failure.
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("/nonexistent/mcp-server"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // Satchel validates against the reference server's schema first.
    let output = sandbox.run(&["tools", "call", "everything__echo", r#"{"msg": 1}"#]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout_json(&output)["error_code"], "INVALID_PARAMS");

    let output = sandbox.run(&["mcp", "servers", "--json"]);
    assert!(output.status.success());
    let servers = stdout_json(&output);
    let everything = servers
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "everything")
        .unwrap();
    assert_eq!(everything["state"], "running", "{everything}");
    let tools: Vec<&str> = everything["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"everything__echo"), "{tools:?}");
    let broken = servers
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "broken")
        .unwrap();
    assert_eq!(broken["state"], "failed");

    let output = sandbox.run(&["mcp", "servers"]);
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.starts_with("NAME"), "{text}");
    assert!(text.contains("everything__echo"), "{text}");

    // Every run shut its server down: no process with the mark is left.
    let start = Instant::now();
    loop {
        let left = processes_with_env("SATCHEL_TEST_MARK", &mark);
        if left.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "server processes left behind: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `satchel mcp serve --http 127.0.0.1:0` (plus `extra`) and the URL it
/// serves at.
fn serve_http(sandbox: &Sandbox, extra: &[&str]) -> (Child, String) {
    let mut args = vec!["mcp", "serve", "--http", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    spawn_http(sandbox.satchel(&args))
}

/// A baseline of known failures for the conformance suite, committed in
/// `crates/satchel-mcp/tests/` with the reason for each entry.
fn conformance_baseline(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../satchel-mcp/tests")
        .join(name)
}

/// Runs the conformance suite's `server` command against `url` with
/// `args`, and returns a failure report when it exits non-zero (a scenario
/// that should pass failed, or a baseline entry now passes).
fn run_conformance(sandbox: &Sandbox, url: &str, args: &[&str]) -> Option<String> {
    let bun = peer("node_modules/.bin/bun");
    let suite = peer("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let output = Command::new(&bun)
        .arg(&suite)
        .args(["server", "--url", url, "--timeout", "15000"])
        .args(args)
        // Its results/ directory lands in the sandbox.
        .current_dir(sandbox.dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    if output.status.success() {
        return None;
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    // The summary and the baseline verdict are at the end; the per-check
    // lines of a long run are not worth the noise.
    let summary = stdout
        .find("=== SUMMARY ===")
        .map_or(stdout.as_ref(), |at| &stdout[at..]);
    Some(format!(
        "conformance {}: exit {:?}\n{summary}\n{}",
        args.join(" "),
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    ))
}

/// Every scenario both requirement sets name, through Satchel's real
/// server in conformance fixture mode (`--conformance-fixtures`: the
/// suite's fixture tools, resources and prompts beside Satchel's own),
/// against a committed baseline of known failures that the suite also
/// holds to account (a baseline entry that passes fails the run).
#[test]
fn conformance_suite_passes_both_revisions_in_fixture_mode() {
    let sandbox = Sandbox::new();
    let (mut server, url) = serve_http(&sandbox, &["--conformance-fixtures"]);
    let baseline = conformance_baseline("conformance-expected-failures.yaml");
    let baseline = baseline.to_str().unwrap();
    let failures: Vec<String> = ["2025-11-25", "2026-07-28"]
        .into_iter()
        .filter_map(|revision| {
            run_conformance(
                &sandbox,
                &url,
                &["--requirements", revision, "--expected-failures", baseline],
            )
        })
        .collect();
    server.kill().unwrap();
    server.wait().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The scenarios that need no fixture, against the server as users run it
/// (no fixtures: the two tools the suite calls by name are ordinary
/// external tools here), each at the revisions it belongs to.
#[test]
fn conformance_suite_passes_the_scenarios_for_any_server() {
    let sandbox = Sandbox::new();
    sandbox.install_tool("test_error_handling");
    sandbox.install_tool("json_schema_2020_12_tool");
    let (mut server, url) = serve_http(&sandbox, &[]);
    let baseline = conformance_baseline("conformance-expected-failures-plain.yaml");
    let baseline = baseline.to_str().unwrap();
    let mut failures = Vec::new();
    for (scenario, revision) in [
        ("server-initialize", "2025-11-25"),
        ("ping", "2025-11-25"),
        ("logging-set-level", "2025-11-25"),
        ("server-session-lifecycle", "2025-11-25"),
        ("tools-list", "2025-11-25"),
        ("tools-list", "2026-07-28"),
        ("tools-call-error", "2025-11-25"),
        ("tools-call-error", "2026-07-28"),
        ("json-schema-2020-12", "2025-11-25"),
        ("json-schema-2020-12", "2026-07-28"),
        ("dns-rebinding-protection", "2025-11-25"),
        ("dns-rebinding-protection", "2026-07-28"),
        ("server-stateless", "2026-07-28"),
        ("caching", "2026-07-28"),
        ("http-header-validation", "2026-07-28"),
        ("sep-2164-resource-not-found", "2026-07-28"),
        ("server-sse-multiple-streams", "2026-07-28"),
    ] {
        let args = [
            "--scenario",
            scenario,
            "--spec-version",
            revision,
            "--expected-failures",
            baseline,
        ];
        failures.extend(run_conformance(&sandbox, &url, &args));
    }
    server.kill().unwrap();
    server.wait().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Issue #28: the official conformance suite's client scenarios (both
/// requirement sets: the stateful and stateless wires, `tools_call`,
/// `request-metadata`, and every `auth/*` scenario with the suite's own
/// authorization servers) against Satchel's client, as `satchel mcp
/// connect --conformance` drives it, held to a committed baseline.
#[test]
fn conformance_suite_client_scenarios_pass_through_satchel_mcp_connect() {
    let sandbox = Sandbox::new();
    let bun = peer("node_modules/.bin/bun");
    let suite = peer("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let baseline = conformance_baseline("conformance-expected-failures-client.yaml");
    // The suite splits the command on spaces and appends the server's URL.
    let command = format!(
        "{} mcp connect --conformance",
        env!("CARGO_BIN_EXE_satchel")
    );
    let started = Instant::now();
    let mut failures = Vec::new();
    for revision in ["2025-11-25", "2026-07-28"] {
        let output = Command::new(&bun)
            .arg(&suite)
            .args(["client", "--command", &command, "--requirements", revision])
            .arg("--expected-failures")
            .arg(&baseline)
            // Its results/ directory lands in the sandbox, and so does every
            // file satchel might write.
            .current_dir(sandbox.dir.path())
            .envs(sandbox.env())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        if !output.status.success() {
            let stdout = String::from_utf8_lossy(&output.stdout);
            let summary = stdout
                .find("=== SUITE SUMMARY ===")
                .map_or(stdout.as_ref(), |at| &stdout[at..]);
            failures.push(format!(
                "conformance client --requirements {revision}: exit {:?}\n{summary}\n{}",
                output.status.code(),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // In-memory tokens only: the conformance driver leaves nothing behind.
    assert!(!sandbox.dir.path().join("data/satchel/mcp-oauth").exists());
    assert!(
        started.elapsed() < Duration::from_secs(180),
        "took {:?}",
        started.elapsed()
    );
}

/// The official Python SDK's client sees a running bash call's progress
/// (elapsed time and output so far), and a call it abandons is stopped:
/// its process is gone, and the session goes on.
#[test]
fn python_sdk_client_gets_progress_and_its_cancellation_stops_the_process() {
    let sandbox = Sandbox::new();
    // A sleep no other test runs, to look for in /proc.
    let mark = format!("301.{}", std::process::id());
    let report = python_client("python_progress.py", &sandbox, &[&mark]);

    assert_eq!(
        report["result"]["structuredContent"]["stdout"],
        "line1\nline2\nline3\n"
    );
    let progress = report["progress"].as_array().unwrap();
    assert!(progress.len() >= 2, "{report}");
    let values: Vec<f64> = progress
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "progress grows: {values:?}"
    );
    assert_eq!(progress[0]["total"], 30.0, "the default timeout: {report}");
    let message = progress.last().unwrap()["message"].as_str().unwrap();
    assert!(
        message.starts_with("running for ") && message.contains("of output so far"),
        "{message}"
    );

    assert!(
        report["abandoned_after"].as_f64().unwrap() < 10.0,
        "{report}"
    );
    assert_eq!(
        report["after"]["structuredContent"]["stdout"],
        "still here\n"
    );
    let sleeping = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| std::fs::read(entry.ok()?.path().join("cmdline")).ok())
        .any(|cmdline| String::from_utf8_lossy(&cmdline).contains(&format!("sleep\0{mark}")));
    assert!(!sleeping, "the abandoned command still runs");
}

/// The policy's "ask" reaches the user of a client that can ask
/// (elicitation, 2025-11-25): accepted runs, declined is refused with the
/// user's answer, and both are on the audit trail with who decided.
#[test]
fn python_sdk_client_answers_ask_through_elicitation() {
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.project().join(".agents/agent.json"),
        r#"{"permissions": {"ask": ["bash(echo *)"]}}"#,
    )
    .unwrap();
    let report = python_client("python_consent.py", &sandbox, &[]);

    let questions = report["questions"].as_array().unwrap();
    assert_eq!(questions.len(), 2, "{report}");
    let first = questions[0].as_str().unwrap();
    assert!(
        first.contains("echo accepted") && first.contains("bash(echo *)"),
        "the question names the call and the rule: {first}"
    );
    assert_eq!(
        report["accepted"]["structuredContent"]["stdout"],
        "accepted\n"
    );
    let declined = &report["declined"];
    assert_eq!(declined["isError"], true, "{declined}");
    assert_eq!(
        declined["structuredContent"]["error_code"],
        "PERMISSION_DENIED"
    );
    assert!(
        declined["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("declined it in the MCP client"),
        "{declined}"
    );
    assert_eq!(report["unasked"]["isError"], false);

    let audit = sandbox.satchel(&["audit", "--json"]).output().unwrap();
    let rows = stdout_json(&audit);
    let decisions: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| {
            row["input"]["command"]
                .as_str()
                .unwrap_or("")
                .starts_with("echo")
        })
        .map(|row| row["decision"].as_str().unwrap_or(""))
        .collect();
    let mut decisions = decisions;
    decisions.sort_unstable();
    assert_eq!(
        decisions,
        [
            "ask by ask rule `bash(echo *)`; user allowed once",
            "ask by ask rule `bash(echo *)`; user refused: the user declined it in the MCP client",
        ]
    );
}

/// Many tools, few tokens, against the reference server: with
/// `toolIndex.share` 0 the model is sent a one-line index of the imported
/// tools in `tool_search` instead of their definitions, loads one by name,
/// is then sent it whole and calls it; the image it returns is not dropped
/// in silence (OpenAI's tool messages carry text, so the model is told an
/// image was left out).
#[test]
fn imported_tools_are_indexed_and_loaded_on_demand() {
    use crate::fake_model::{FakeModel, Reply};
    let server = peer("node_modules/.bin/mcp-server-everything");
    let sandbox = Sandbox::new();
    let model = FakeModel::start(vec![
        Reply::call(
            "tool_search",
            json!({"names": ["everything__get-tiny-image"]}),
        ),
        Reply::call("everything__get-tiny-image", json!({})),
        Reply::text("a tiny image"),
    ]);
    std::fs::write(
        sandbox.project().join(".agents/mcp.json"),
        json!({"mcpServers": {"everything": {"command": server, "args": ["stdio"]}}}).to_string(),
    )
    .unwrap();
    std::fs::write(
        sandbox.project().join(".agents/agent.json"),
        json!({"permissions": {"mode": "trust"}, "sideRequests": false,
               "toolIndex": {"share": 0},
               "llm": {"provider": "openai", "baseUrl": model.base_url(), "model": "gpt-4o",
                       "maxRetries": 0}})
        .to_string(),
    )
    .unwrap();
    let run = sandbox
        .satchel(&["run", "--json", "show me the tiny image"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");

    let requests = model.main_requests();
    assert_eq!(requests.len(), 3, "{requests:?}");
    let tool_names = |request: &Value| -> Vec<String> {
        request["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let first = tool_names(&requests[0]);
    assert!(first.contains(&"tool_search".to_owned()), "{first:?}");
    assert!(first.contains(&"bash".to_owned()), "{first:?}");
    assert!(
        !first.iter().any(|name| name.starts_with("everything__")),
        "imported tools are indexed, not sent: {first:?}"
    );
    let search = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "tool_search")
        .unwrap();
    let index = search["function"]["description"].as_str().unwrap();
    assert!(index.contains("everything__echo: "), "{index}");
    let second = tool_names(&requests[1]);
    assert!(
        second.contains(&"everything__get-tiny-image".to_owned())
            && !second.contains(&"everything__echo".to_owned()),
        "the loaded tool is sent whole, the others stay indexed: {second:?}"
    );
    let third = requests[2].to_string();
    assert!(
        third.contains("image/png image, about"),
        "the image is not dropped in silence: {third}"
    );
}

/// A 2026-07-28 client (the official Python SDK, stateless, with the tasks
/// extension): the policy's "ask" reaches its user through `input_required`
/// results (accepted runs, declined is refused); a long call runs as a task
/// it polls to the end, another as a task it cancels (the process is gone);
/// a subscription stream tells it of a changed resource. Every call is on
/// the audit trail, the tasks' under their task ids.
#[test]
fn python_sdk_stateless_client_gets_consent_questions_tasks_and_subscriptions() {
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.project().join(".agents/agent.json"),
        r#"{"permissions": {"mode": "trust", "ask": ["bash(echo *)"]}}"#,
    )
    .unwrap();
    let (mut server, url) = serve_http(&sandbox, &[]);
    let mark = format!("301.{}", std::process::id());
    let report = python_client("python_stateless.py", &sandbox, &[&url, &mark]);
    server.kill().unwrap();
    server.wait().unwrap();

    assert_eq!(report["protocol"], "2026-07-28", "{report}");
    assert!(
        report["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"].is_object(),
        "{report}"
    );
    // Consent: two questions, one accepted and one declined.
    let questions = report["questions"].as_array().unwrap();
    assert_eq!(questions.len(), 3, "{report}");
    assert!(
        questions[0].as_str().unwrap().contains("echo accepted")
            && questions[0].as_str().unwrap().contains("bash(echo *)"),
        "{questions:?}"
    );
    assert_eq!(
        report["accepted"]["structuredContent"]["stdout"],
        "accepted\n"
    );
    assert_eq!(report["declined"]["isError"], true, "{report}");
    assert_eq!(
        report["declined"]["structuredContent"]["error_code"],
        "PERMISSION_DENIED"
    );
    // Tasks: the first ran to its end, telling how far it got.
    let tasks = report["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 3, "{report}");
    assert_eq!(tasks[0]["created"], "working");
    assert_eq!(tasks[0]["final"]["status"], "completed", "{report}");
    assert!(
        tasks[0]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m.as_str().unwrap().starts_with("running for ")),
        "status messages say how far the command got: {report}"
    );
    assert_eq!(
        report["finished"]["structuredContent"]["stdout"],
        "line 1\nline 2\nline 3\n"
    );
    // The second asked its question in the task, and ran once accepted.
    assert!(
        tasks[1]["statuses"]
            .as_array()
            .unwrap()
            .contains(&json!("input_required")),
        "{report}"
    );
    assert_eq!(
        report["asked"]["structuredContent"]["stdout"],
        "accepted in a task\n"
    );
    // The third was cancelled: acknowledged, settled, and its process gone.
    assert_eq!(tasks[2]["final"]["status"], "cancelled", "{report}");
    assert!(tasks[2]["cancel_ack"].is_object(), "{report}");
    let sleeping = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| std::fs::read(entry.ok()?.path().join("cmdline")).ok())
        .any(|cmdline| String::from_utf8_lossy(&cmdline).contains(&format!("sleep\0{mark}")));
    assert!(!sleeping, "the cancelled task's command still runs");
    // The subscription heard of the new memory.
    assert_eq!(
        report["honored"]["resourceSubscriptions"],
        json!(["satchel://memories/short"])
    );
    let event = report["event"].as_str().unwrap_or_default();
    assert!(event.contains("satchel://memories/short"), "{report}");

    let audit = stdout_json(&sandbox.satchel(&["audit", "--json"]).output().unwrap());
    let rows = audit.as_array().unwrap();
    let decisions: Vec<&str> = rows
        .iter()
        .filter_map(|row| row["decision"].as_str())
        .filter(|decision| decision.starts_with("ask"))
        .collect();
    assert_eq!(decisions.len(), 3, "{audit}");
    assert!(
        rows.iter()
            .filter(|row| row["source"] == "mcp")
            .all(|row| row["caller"]
                .as_str()
                .is_some_and(|c| c.starts_with("mcp "))),
        "each call names the client that made it: {audit}"
    );
    let cancelled = rows
        .iter()
        .find(|row| {
            row["input"]["command"]
                .as_str()
                .is_some_and(|c| c.contains(&mark))
        })
        .unwrap_or_else(|| panic!("the cancelled task is on record: {audit}"));
    assert_eq!(cancelled["error_code"], "CANCELLED", "{cancelled}");
}

/// Satchel's record as resources, read by the official Python SDK client:
/// listed with templates, every kind read (a conversation as markdown and
/// JSON, a tool call, code stats and executions, each memory layer), an
/// unknown URI answered with the resource-not-found error naming it, and a
/// subscription told when another process stores a memory.
#[test]
fn python_sdk_client_reads_the_record_as_resources() {
    let sandbox = Sandbox::new();
    let stored = sandbox
        .satchel(&[
            "memory",
            "store",
            "long",
            "the build server is called anvil",
        ])
        .output()
        .unwrap();
    assert!(stored.status.success(), "{stored:?}");
    // A conversation (with a scripted model) and a tool call in it.
    let model = crate::fake_model::FakeModel::start(vec![
        crate::fake_model::Reply::Calls(vec![(
            "bash".into(),
            r#"{"command": "echo on record"}"#.into(),
        )]),
        crate::fake_model::Reply::Text("the answer is anvil".into()),
    ]);
    std::fs::write(
        sandbox.project().join(".agents/agent.json"),
        json!({"permissions": {"mode": "trust"},
               "llm": {"provider": "openai", "baseUrl": model.base_url(), "model": "gpt-4o",
                       "maxRetries": 0}})
        .to_string(),
    )
    .unwrap();
    let run = sandbox
        .satchel(&["run", "--json", "what is the build server called?"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
    let conversation = stdout_json(&run)["conversation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let report = python_client("python_resources.py", &sandbox, &[&conversation]);
    let tool_call = report["tool_call"].as_str().unwrap();

    assert!(report["capabilities"]["resources"].is_object(), "{report}");
    let uris: Vec<&str> = report["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        uris,
        [
            format!("satchel://conversations/{conversation}").as_str(),
            "satchel://code/stats",
            "satchel://code/executions",
            "satchel://memories/long",
            "satchel://memories/mid",
            "satchel://memories/short",
            "satchel://memories/session"
        ]
    );
    let templates: Vec<&str> = report["templates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["uriTemplate"].as_str().unwrap())
        .collect();
    assert_eq!(
        templates,
        [
            "satchel://conversations/{id}",
            "satchel://conversations/{id}/json",
            "satchel://tool-calls/{id}",
            "satchel://code/{view}",
            "satchel://memories/{layer}"
        ]
    );
    let contents = &report["read"]["satchel://memories/long"]["contents"][0];
    assert_eq!(contents["mimeType"], "application/json");
    let memories: Value = serde_json::from_str(contents["text"].as_str().unwrap()).unwrap();
    assert_eq!(memories[0]["content"], "the build server is called anvil");
    assert_eq!(
        report["unknown"],
        json!({"code": -32002, "data": {"uri": "satchel://conversations/no-such-id"}})
    );
    let read = &report["read"];
    let text_of = |uri: &str| {
        let contents = &read[uri]["contents"][0];
        (
            contents["mimeType"].as_str().unwrap_or_default().to_owned(),
            contents["text"].as_str().unwrap_or_default().to_owned(),
        )
    };
    let (mime, log) = text_of(&format!("satchel://conversations/{conversation}"));
    assert_eq!(mime, "text/markdown");
    assert!(
        log.contains("what is the build server called?") && log.contains("the answer is anvil"),
        "{log}"
    );
    let (mime, events) = text_of(&format!("satchel://conversations/{conversation}/json"));
    assert_eq!(mime, "application/json");
    assert!(events.contains("the answer is anvil"), "{events}");
    let (_, call) = text_of(&format!("satchel://tool-calls/{tool_call}"));
    assert!(call.contains("echo on record"), "{call}");
    let (_, stats) = text_of("satchel://code/stats");
    assert!(!stats.is_empty());
    let (mime, _) = text_of("satchel://code/executions");
    assert_eq!(mime, "application/json");
    for layer in ["mid", "short", "session"] {
        let (mime, text) = text_of(&format!("satchel://memories/{layer}"));
        assert_eq!(mime, "application/json", "{layer}");
        assert!(text.starts_with('['), "{layer}: {text}");
    }
    assert_eq!(
        report["updates"],
        json!(["satchel://memories/mid"]),
        "{report}"
    );
}
