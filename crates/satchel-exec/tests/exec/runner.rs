//! The runner against real child processes: every way a command can hang,
//! flood or misbehave. Each test is bounded by an outer timeout, so a
//! regression fails instead of hanging the suite.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use satchel_core::redact::Redactor;
use satchel_exec::{ExecOutcome, ExecRequest, Exit, OutputConfig, RunnerConfig, SpillConfig, run};
use tokio_util::sync::CancellationToken;

/// Generous bound for any single test: far above what a correct runner needs.
const TEST_BOUND: Duration = Duration::from_secs(60);

fn sh(script: &str, timeout: Duration) -> ExecRequest {
    ExecRequest {
        program: "/bin/bash".into(),
        args: vec!["-c".into(), script.into()],
        stdin: None,
        working_dir: std::env::temp_dir(),
        env: Vec::new(),
        timeout,
        clear_env: false,
        sandbox: None,
    }
}

fn config() -> RunnerConfig {
    RunnerConfig {
        kill_grace: Duration::from_millis(300),
        spill: SpillConfig {
            dir: None,
            ..SpillConfig::default()
        },
        ..RunnerConfig::default()
    }
}

async fn bounded<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(TEST_BOUND, future)
        .await
        .expect("test exceeded its time bound: the runner hung")
}

async fn run_sh(script: &str, timeout: Duration) -> ExecOutcome {
    bounded(run(
        &sh(script, timeout),
        &config(),
        &CancellationToken::new(),
    ))
    .await
    .unwrap()
}

fn process_alive(pid: i32) -> bool {
    // A zombie has exited: only its parent has not reaped it yet.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

async fn wait_for_pid_file(path: &Path) -> i32 {
    bounded(async {
        loop {
            if let Ok(text) = std::fs::read_to_string(path)
                && let Ok(pid) = text.trim().parse()
            {
                return pid;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

#[tokio::test]
async fn plain_command_reports_output_and_exit_code() {
    let out = run_sh("echo hello; echo oops >&2; exit 3", Duration::from_secs(10)).await;
    assert_eq!(out.stdout.text, "hello\n");
    assert_eq!(out.stderr.text, "oops\n");
    assert_eq!(out.exit, Exit::Code(3));
    assert!(!out.timed_out && !out.cancelled);
}

#[tokio::test]
async fn infinite_output_under_a_timeout_returns_bounded() {
    let out = run_sh("yes", Duration::from_millis(500)).await;
    assert!(out.timed_out);
    assert!(
        out.stdout.total_bytes > 1_000_000,
        "yes wrote only {} bytes",
        out.stdout.total_bytes
    );
    assert!(out.stdout.text.len() < 11 * 1024);
    assert!(out.stdout.text.starts_with("y\ny\n"));
    assert!(out.stdout.text.contains("bytes omitted"));
    assert_eq!(out.exit, Exit::Signal(15));
}

#[tokio::test]
async fn one_gibibyte_of_output_is_counted_and_cut() {
    let out = run_sh("head -c 1G /dev/zero", Duration::from_secs(50)).await;
    assert!(!out.timed_out);
    assert_eq!(out.exit, Exit::Code(0));
    assert_eq!(out.stdout.total_bytes, 1 << 30);
    assert_eq!(out.stdout.omitted_bytes, (1 << 30) - 10 * 1024);
    assert!(out.stdout.text.len() < 10 * 1024 + 100);
}

#[tokio::test]
async fn background_grandchild_holding_the_pipe_does_not_block() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = format!(
        "sleep 1000 & echo $! > {}; echo started",
        pid_file.display()
    );
    let out = run_sh(&script, Duration::from_secs(30)).await;
    assert_eq!(out.exit, Exit::Code(0));
    assert_eq!(out.stdout.text, "started\n");
    assert!(!out.timed_out);
    let pid = wait_for_pid_file(&pid_file).await;
    // kill_background is on by default: the sleep went with its command.
    bounded(async {
        while process_alive(pid) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn stdin_is_empty_unless_input_is_given() {
    let out = run_sh("cat; echo end", Duration::from_secs(10)).await;
    assert_eq!(out.stdout.text, "end\n");

    let mut request = sh("tr a-z A-Z", Duration::from_secs(10));
    request.stdin = Some(b"shout".to_vec());
    let out = bounded(run(&request, &config(), &CancellationToken::new()))
        .await
        .unwrap();
    assert_eq!(out.stdout.text, "SHOUT");
}

#[tokio::test]
async fn input_a_child_never_reads_does_not_block() {
    let mut request = sh("sleep 0.1; echo ignored-input", Duration::from_secs(10));
    request.stdin = Some(vec![b'x'; 8 * 1024 * 1024]);
    let out = bounded(run(&request, &config(), &CancellationToken::new()))
        .await
        .unwrap();
    assert_eq!(out.stdout.text, "ignored-input\n");
    assert!(!out.timed_out);
}

#[tokio::test]
async fn password_prompt_on_the_terminal_fails_fast() {
    let out = run_sh(
        "read -s -p 'Password: ' pw < /dev/tty && echo got-it",
        Duration::from_secs(20),
    )
    .await;
    assert!(!out.timed_out);
    assert_ne!(out.exit, Exit::Code(0));
    assert!(!out.stdout.text.contains("got-it"));
    assert!(
        out.stderr.text.contains("/dev/tty"),
        "stderr: {}",
        out.stderr.text
    );
}

#[tokio::test]
async fn invalid_utf8_is_replaced() {
    let out = run_sh(r"printf 'a\xff\xfeb\n'", Duration::from_secs(10)).await;
    assert_eq!(out.stdout.text, "a\u{fffd}\u{fffd}b\n");
}

#[tokio::test]
async fn carriage_return_progress_bar_collapses() {
    let out = run_sh(
        r"for i in 10 50 100; do printf '\rprogress %s%%' $i; done; printf '\ndone\n'",
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(out.stdout.text, "progress 100%\ndone\n");
}

#[tokio::test]
async fn ansi_colours_are_stripped_unless_configured() {
    let script = r"printf '\033[1;32mgreen\033[0m\tok\n'";
    let out = run_sh(script, Duration::from_secs(10)).await;
    assert_eq!(out.stdout.text, "green\tok\n");

    let raw = RunnerConfig {
        strip_ansi: false,
        ..config()
    };
    let out = bounded(run(
        &sh(script, Duration::from_secs(10)),
        &raw,
        &CancellationToken::new(),
    ))
    .await
    .unwrap();
    assert_eq!(out.stdout.text, "\x1b[1;32mgreen\x1b[0m\tok\n");
}

#[tokio::test]
async fn non_interactive_environment_is_set() {
    let out = run_sh(
        "echo $TERM $NO_COLOR $PAGER $GIT_PAGER $GIT_TERMINAL_PROMPT $EXTRA",
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(out.stdout.text, "dumb 1 cat cat 0\n");

    let mut request = sh("echo $EXTRA", Duration::from_secs(10));
    request.env.push(("EXTRA".into(), "given".into()));
    let out = bounded(run(&request, &config(), &CancellationToken::new()))
        .await
        .unwrap();
    assert_eq!(out.stdout.text, "given\n");
}

#[tokio::test]
async fn child_runs_in_its_own_session() {
    // Field 6 of /proc/PID/stat is the session id.
    let out = run_sh(
        "cut -d' ' -f6 /proc/$$/stat; echo $$",
        Duration::from_secs(10),
    )
    .await;
    let mut lines = out.stdout.text.split_whitespace();
    let (sid, pid) = (lines.next().unwrap(), lines.next().unwrap());
    assert_eq!(sid, pid, "the shell should lead its own session");
}

#[tokio::test]
async fn command_not_found_is_exit_127() {
    let out = run_sh("definitely-not-a-command-satchel", Duration::from_secs(10)).await;
    assert_eq!(out.exit, Exit::Code(127));
    assert!(out.stderr.text.contains("not found"));
}

#[tokio::test]
async fn child_killed_by_a_signal_reports_it() {
    let out = run_sh("kill -9 $$", Duration::from_secs(10)).await;
    assert_eq!(out.exit, Exit::Signal(9));
    assert_eq!(out.exit.shell_code(), Some(137));
    assert_eq!(out.exit.signal_name().as_deref(), Some("SIGKILL"));
}

#[tokio::test]
async fn child_that_closes_stdout_early_and_keeps_running() {
    let out = run_sh(
        "echo before; exec 1>&-; sleep 0.3; echo after >&2",
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(out.stdout.text, "before\n");
    assert_eq!(out.stderr.text, "after\n");
    assert_eq!(out.exit, Exit::Code(0));

    let out = run_sh("exec 1>&- 2>&-; sleep 1000", Duration::from_millis(300)).await;
    assert!(out.timed_out);
}

#[tokio::test]
async fn zero_output() {
    let out = run_sh("true", Duration::from_secs(10)).await;
    assert_eq!(
        (out.stdout.text.as_str(), out.stderr.text.as_str()),
        ("", "")
    );
    assert_eq!((out.stdout.total_bytes, out.stderr.total_bytes), (0, 0));
    assert!(!out.stdout.truncated());
}

#[tokio::test]
async fn very_long_single_line_keeps_head_and_tail() {
    let out = run_sh(
        "head -c 3000000 /dev/zero | tr '\\0' a; echo END",
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(out.stdout.total_bytes, 3_000_004);
    assert!(out.stdout.text.starts_with("aaaa"));
    assert!(out.stdout.text.ends_with("aEND\n"));
    assert!(out.stdout.text.contains("[... 2989764 bytes omitted ...]"));
}

#[tokio::test]
async fn child_ignoring_sigterm_is_killed_after_the_grace() {
    let out = run_sh(
        "trap '' TERM; echo armed; while true; do sleep 0.05; done",
        Duration::from_millis(300),
    )
    .await;
    assert!(out.timed_out);
    assert_eq!(out.exit, Exit::Signal(9));
    assert_eq!(out.stdout.text, "armed\n");
}

#[tokio::test]
async fn cancellation_stops_the_run() {
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        trigger.cancel();
    });
    let out = bounded(run(
        &sh("sleep 1000", Duration::from_secs(600)),
        &config(),
        &cancel,
    ))
    .await
    .unwrap();
    assert!(out.cancelled && !out.timed_out);
    assert_eq!(out.exit, Exit::Signal(15));
}

#[tokio::test]
async fn dropping_the_run_kills_the_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = format!("sleep 1000 & echo $! > {}; wait", pid_file.display());
    let request = sh(&script, Duration::from_secs(600));
    let cfg = config();
    let cancel = CancellationToken::new();
    let abandoned =
        tokio::time::timeout(Duration::from_millis(300), run(&request, &cfg, &cancel)).await;
    assert!(abandoned.is_err(), "the run should still have been going");
    let pid = wait_for_pid_file(&pid_file).await;
    bounded(async {
        while process_alive(pid) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn cut_output_is_spilled_in_full() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = RunnerConfig {
        stdout: OutputConfig { limit_bytes: 100 },
        spill: SpillConfig {
            dir: Some(dir.path().to_path_buf()),
            ..SpillConfig::default()
        },
        ..config()
    };
    let out = bounded(run(
        &sh("seq 1 10000", Duration::from_secs(10)),
        &cfg,
        &CancellationToken::new(),
    ))
    .await
    .unwrap();
    let spill = out.stdout.spill.expect("cut output should be spilled");
    assert!(spill.complete);
    let expected: String = (1..=10000).map(|n| format!("{n}\n")).collect();
    assert_eq!(std::fs::read_to_string(&spill.path).unwrap(), expected);
    assert!(out.stderr.spill.is_none());
}

/// Reproduces a report: output was cut before it was redacted, so a
/// secret at the cut survived in part, and spill files were not redacted
/// at all. Whatever the cut, no four characters of the secret are kept.
#[tokio::test]
async fn secrets_are_redacted_before_the_output_is_cut_or_spilled() {
    const SECRET: &str = "sk-live-0123456789abcdef";
    let redactor = Redactor::new([("OPENAI_API_KEY".to_owned(), SECRET.to_owned())], 4);
    let dir = tempfile::tempdir().unwrap();
    // The head keeps 50 bytes: the secret starts at every offset around the
    // cut, and once in the tail, in small writes that split it.
    for before in 30..60 {
        let cfg = RunnerConfig {
            stdout: OutputConfig { limit_bytes: 100 },
            spill: SpillConfig {
                dir: Some(dir.path().to_path_buf()),
                ..SpillConfig::default()
            },
            redactor: redactor.clone(),
            ..config()
        };
        let script = format!(
            "printf '%0{before}d' 0; for part in sk-live- 0123 456789 abcdef; do printf %s $part; done; \
             printf '%0300d' 0; printf ' {SECRET} end'"
        );
        let out = bounded(run(
            &sh(&script, Duration::from_secs(10)),
            &cfg,
            &CancellationToken::new(),
        ))
        .await
        .unwrap();
        let spill = std::fs::read_to_string(&out.stdout.spill.unwrap().path).unwrap();
        assert_eq!(spill.matches("[redacted]").count(), 2, "{spill}");
        for kept in [&out.stdout.text, &spill] {
            for window in SECRET.as_bytes().windows(4) {
                let piece = std::str::from_utf8(window).unwrap();
                assert!(
                    !kept.contains(piece),
                    "`{piece}` survived at offset {before}: {kept}"
                );
            }
        }
    }
}

#[tokio::test]
async fn missing_working_dir_is_a_clear_error() {
    let mut request = sh("true", Duration::from_secs(10));
    request.working_dir = "/definitely/not/here".into();
    let error = run(&request, &config(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "working directory `/definitely/not/here` does not exist or is not a directory"
    );
}

#[tokio::test]
async fn unstartable_program_is_a_spawn_error() {
    let mut request = sh("true", Duration::from_secs(10));
    request.program = "/definitely/not/a/program".into();
    let error = run(&request, &config(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("cannot start `/definitely/not/a/program`"),
        "{error}"
    );
}

#[tokio::test]
async fn cleared_environment_keeps_only_what_is_given() {
    let mut request = sh("echo \"[$HOME] [$EXTRA] [$TERM]\"", Duration::from_secs(10));
    request.program = "/bin/bash".into();
    request.clear_env = true;
    request.env.push(("EXTRA".into(), "kept".into()));
    let out = bounded(run(&request, &config(), &CancellationToken::new()))
        .await
        .unwrap();
    assert_eq!(out.stdout.text, "[] [kept] [dumb]\n");
}
