//! Issue #30, "configuration that fails closed": agent.json that cannot be
//! read in full (a mistyped or mistyped-in-kind `permissions` key, a syntax
//! error, a FIFO, a device, a huge file) stops `satchel` before anything
//! runs, saying where; an unknown key elsewhere is only a warning.
//!
//! Before the fix, each of these was a warning and Satchel ran on without
//! the deny rules the file meant (or hung on the FIFO, or exhausted memory
//! on /dev/zero).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::project::Project;
use serde_json::json;

/// What a bounded run left behind.
struct Ran {
    success: bool,
    stdout: String,
    stderr: String,
}

/// `satchel ARGS` in the project (with its own XDG directories, as
/// [`Project::satchel`]), killed and failed if it takes over 10 s.
fn satchel(project: &Project, args: &[&str]) -> Ran {
    let out = project.path("stdout.txt");
    let err = project.path("stderr.txt");
    let mut child = project
        .command(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!(
                "`satchel {}` still running after 10 s; stderr: {}",
                args.join(" "),
                std::fs::read_to_string(&err).unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ran {
        success: status.success(),
        stdout: std::fs::read_to_string(&out).unwrap(),
        stderr: std::fs::read_to_string(&err).unwrap(),
    }
}

/// `satchel tools call bash` with a command that leaves a mark if it runs.
fn call_bash(project: &Project) -> Ran {
    satchel(
        project,
        &[
            "tools",
            "call",
            "bash",
            r#"{"command": "touch ran && echo hi"}"#,
        ],
    )
}

/// The call was refused before anything ran, with `expected` in the error.
fn assert_refused(project: &Project, ran: &Ran, expected: &[&str]) {
    assert!(
        !ran.success,
        "stdout: {}\nstderr: {}",
        ran.stdout, ran.stderr
    );
    assert!(
        !project.path("project/ran").exists(),
        "the command ran: {}",
        ran.stderr
    );
    assert!(!ran.stdout.contains("hi"), "{}", ran.stdout);
    for part in expected {
        assert!(ran.stderr.contains(part), "no {part:?} in: {}", ran.stderr);
    }
}

fn write_project_config(project: &Project, text: &str) {
    std::fs::write(project.path("project/.agents/agent.json"), text).unwrap();
}

#[test]
fn a_mistyped_permissions_key_stops_start_up_naming_file_line_column_and_deny() {
    let project = Project::new(&json!({}));
    write_project_config(
        &project,
        "{\n  \"permissions\": {\n    \"denny\": [\"bash(touch *)\"]\n  }\n}\n",
    );
    let ran = call_bash(&project);
    assert_refused(
        &project,
        &ran,
        &[
            ".agents/agent.json:3:5: `denny` is not a key of `permissions`; did you mean `deny`?",
            "configuration refused",
        ],
    );
}

#[test]
fn a_wrong_type_in_permissions_stops_start_up() {
    let project = Project::new(&json!({"permissions": {"deny": "bash"}}));
    let ran = call_bash(&project);
    assert_refused(
        &project,
        &ran,
        &[
            ".agents/agent.json:3:5: `permissions.deny` must be a list of rules",
            "not a string",
        ],
    );
}

#[test]
fn a_syntax_error_in_any_layer_runs_nothing() {
    let project = Project::new(&json!({}));
    write_project_config(
        &project,
        "{\n  \"permissions\": {\"deny\": [\"bash(touch *)\"]},,\n}\n",
    );
    let ran = call_bash(&project);
    assert_refused(&project, &ran, &[".agents/agent.json:2:", "invalid JSON"]);

    // The user's file counts as much as the project's.
    write_project_config(&project, "{}");
    let user = project.path("config/satchel/agent.json");
    std::fs::create_dir_all(user.parent().unwrap()).unwrap();
    std::fs::write(&user, "{\"permissions\": {\"deny\": [\"bash\"]}").unwrap();
    let ran = call_bash(&project);
    assert_refused(
        &project,
        &ran,
        &["config/satchel/agent.json:1:", "invalid JSON"],
    );
}

#[test]
fn mcp_serve_refuses_to_start_with_broken_permissions() {
    let project = Project::new(&json!({"permissions": {"denny": ["bash"]}}));
    let ran = satchel(&project, &["mcp", "serve"]);
    assert!(!ran.success, "{}", ran.stderr);
    assert!(
        ran.stdout.is_empty(),
        "no protocol was spoken: {}",
        ran.stdout
    );
    assert!(
        ran.stderr.contains("did you mean `deny`?"),
        "{}",
        ran.stderr
    );
}

#[test]
fn a_fifo_as_agent_json_is_refused_promptly() {
    let project = Project::new(&json!({}));
    let path = project.path("project/.agents/agent.json");
    std::fs::remove_file(&path).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let ran = call_bash(&project);
    assert_refused(&project, &ran, &["agent.json: refused: it is a FIFO"]);
}

#[test]
fn a_symlink_to_dev_zero_is_refused() {
    let project = Project::new(&json!({}));
    let path = project.path("project/.agents/agent.json");
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink(Path::new("/dev/zero"), &path).unwrap();
    let ran = call_bash(&project);
    assert_refused(
        &project,
        &ran,
        &["agent.json: refused: it is a character device"],
    );
}

#[test]
fn a_config_over_one_mib_is_refused() {
    let project = Project::new(&json!({}));
    let prompt = "x".repeat(2 << 20);
    write_project_config(&project, &json!({ "systemPrompt": prompt }).to_string());
    let ran = call_bash(&project);
    assert_refused(
        &project,
        &ran,
        &["agent.json: refused: it is 2097171 bytes, over the 1048576-byte limit"],
    );
}

#[test]
fn an_unknown_key_elsewhere_is_a_warning_and_the_command_runs() {
    let project = Project::new(&json!({}));
    write_project_config(
        &project,
        "{\n  \"toolCalling\": \"native\",\n  \"exec\": {\"stdoutLimitBytes\": 1000, \"colour\": true}\n}\n",
    );
    let ran = call_bash(&project);
    assert!(ran.success, "{}", ran.stderr);
    assert!(ran.stdout.contains("hi"), "{}", ran.stdout);
    assert!(
        ran.stderr
            .contains(".agents/agent.json:2:3: `toolCalling` is not a key Satchel reads"),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr
            .contains(".agents/agent.json:3:38: `exec.colour`: unknown field `colour`"),
        "{}",
        ran.stderr
    );
}
