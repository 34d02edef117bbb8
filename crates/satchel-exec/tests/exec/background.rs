//! Background processes against the real kernel: incremental reads, `until`,
//! a kill that leaves nothing (groups, sessions, the sandbox's namespace),
//! a pseudo-terminal driven through its input, bounded output.

use std::path::Path;
use std::time::Duration;

use regex::Regex;
use satchel_exec::background::{ProcessState, ProcessTable, StartError};
use satchel_exec::{ExecRequest, RunnerConfig, SandboxSpec, SpillConfig};

fn config(spill: &Path) -> RunnerConfig {
    RunnerConfig {
        kill_grace: Duration::from_millis(500),
        spill: SpillConfig {
            dir: Some(spill.to_path_buf()),
            max_file_bytes: 1024 * 1024,
            ..SpillConfig::default()
        },
        ..RunnerConfig::default()
    }
}

fn bash(script: &str, dir: &Path) -> ExecRequest {
    ExecRequest::new("bash", ["-c", script], dir, Duration::from_secs(1))
}

/// The processes on the machine whose command line starts with `sleep MARKER`.
fn running_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let line = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if line.starts_with(&format!("sleep {marker}")) {
            found.push(format!("{}: {line}", entry.file_name().to_string_lossy()));
        }
    }
    found
}

#[tokio::test]
async fn three_reads_return_line_one_then_line_two_then_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let table = ProcessTable::new(None);
    let process = table
        .start(
            "c1",
            "lines",
            &bash("echo line 1; sleep 0.5; echo line 2; sleep 30", dir.path()),
            false,
            &config(dir.path()),
        )
        .unwrap();
    let first = process
        .read(Duration::from_secs(5), Regex::new("line 1").ok())
        .await;
    assert_eq!(first.output.text, "line 1\n");
    assert_eq!(first.matched, Some(true));
    let second = process.read(Duration::from_secs(5), None).await;
    assert_eq!(second.output.text, "line 2\n");
    let third = process.read(Duration::ZERO, None).await;
    assert_eq!(third.output.text, "");
    assert_eq!(third.state, ProcessState::Running);
    assert_eq!(process.kill().await, ProcessState::Killed(libc::SIGTERM));
}

#[tokio::test]
async fn an_exit_is_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let table = ProcessTable::new(None);
    let process = table
        .start(
            "c1",
            "exit 3",
            &bash("echo bye; exit 3", dir.path()),
            false,
            &config(dir.path()),
        )
        .unwrap();
    // Not read: the table tells of the end once.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let ended = table.take_ended("c1");
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].state, ProcessState::Exited(3));
    assert!(table.take_ended("c1").is_empty());
    assert!(table.take_ended("c2").is_empty());
    let reading = process.read(Duration::ZERO, None).await;
    assert_eq!(reading.output.text, "bye\n");
    assert_eq!(reading.state, ProcessState::Exited(3));
}

#[tokio::test]
async fn a_kill_ends_the_group_and_the_sessions_it_made() {
    let dir = tempfile::tempdir().unwrap();
    let table = ProcessTable::new(None);
    let marker = format!("998.{}", std::process::id());
    let other = format!("999.{}", std::process::id());
    let script = format!("sleep {other} & setsid sleep {marker} & wait");
    let process = table
        .start(
            "c1",
            &script,
            &bash(&script, dir.path()),
            false,
            &config(dir.path()),
        )
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        running_with(&marker).len(),
        1,
        "{:?}",
        running_with(&marker)
    );
    let state = process.kill().await;
    assert!(!state.is_running());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(running_with(&marker), Vec::<String>::new());
    assert_eq!(running_with(&other), Vec::<String>::new());
    // Idempotent.
    assert_eq!(process.kill().await, state);
}

#[tokio::test]
async fn in_the_sandbox_a_trapped_term_and_a_daemon_still_end() {
    let dir = tempfile::tempdir().unwrap();
    let table = ProcessTable::new(None);
    let script = "trap '' TERM; (setsid sleep 997.123 &); sleep 996.123";
    let mut request = bash(script, dir.path());
    request.sandbox = Some(SandboxSpec::new(vec![dir.path().to_path_buf()]));
    let process = table
        .start("c1", script, &request, false, &config(dir.path()))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(running_with("997.123").len(), 1);
    let state = process.kill().await;
    assert_eq!(state, ProcessState::Killed(libc::SIGKILL));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(running_with("997.123"), Vec::<String>::new());
    assert_eq!(running_with("996.123"), Vec::<String>::new());
}

/// Runs `start` with SIGINT and SIGQUIT ignored in this process, as a
/// non-interactive shell leaves them for a job started with `&`.
fn with_interrupts_ignored<T>(start: impl FnOnce() -> T) -> T {
    let set = |disposition: libc::sighandler_t| {
        for signal in [libc::SIGINT, libc::SIGQUIT] {
            // SAFETY: SIG_IGN and SIG_DFL are valid dispositions; the
            // test harness installs no handler of its own for either.
            unsafe { libc::signal(signal, disposition) };
        }
    };
    set(libc::SIG_IGN);
    let started = start();
    set(libc::SIG_DFL);
    started
}

/// What decides where a ^C goes, for a failure's message: the process's
/// state, session, terminal and foreground group (`/proc/PID/stat`), and
/// its blocked, ignored and caught signals (`/proc/PID/status`).
fn signal_state(pid: i32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let field = |i: usize| fields.get(i).copied().unwrap_or("?");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let signals: Vec<&str> = status
        .lines()
        .filter(|l| l.starts_with("Sig") || l.starts_with("ShdPnd"))
        .collect();
    format!(
        "pid {pid} state {} pgrp {} session {} tty {} tpgid {}; {}",
        field(0),
        field(2),
        field(3),
        field(4),
        field(5),
        signals.join("; ")
    )
}

#[tokio::test]
async fn python_on_a_terminal_answers_interrupts_and_exits() {
    let dir = tempfile::tempdir().unwrap();
    let table = ProcessTable::new(None);
    // Started as a shell starts a background job (`satchel mcp serve &`):
    // SIGINT and SIGQUIT ignored, which exec keeps. The child must not
    // inherit that, or the ^C below raises nothing.
    let process = with_interrupts_ignored(|| {
        table.start(
            "c1",
            "python3 -i",
            &bash("exec python3 -i -q", dir.path()),
            true,
            &config(dir.path()),
        )
    })
    .unwrap();
    let prompt = Regex::new(">>> $").unwrap();
    let start = process
        .read(Duration::from_secs(10), Some(prompt.clone()))
        .await;
    assert_eq!(start.matched, Some(true), "{start:?}");
    process.write("1+1\n").await.unwrap();
    let two = process
        .read(Duration::from_secs(10), Some(prompt.clone()))
        .await;
    assert!(two.output.text.contains("\n2\n"), "{two:?}");
    process.write("while True: pass\n\n").await.unwrap();
    // On a loaded machine a ^C can reach the interpreter while it is still
    // reading the loop's lines (its line editor takes it as input, and the
    // loop starts after): press it again, as a person would, until the
    // interrupt shows. Each read returns as soon as the prompt comes back.
    let mut seen = String::new();
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        process.write("\u{3}").await.unwrap();
        let read = process
            .read(Duration::from_secs(5), Some(prompt.clone()))
            .await;
        seen.push_str(&read.output.text);
        if seen.contains("KeyboardInterrupt") {
            break;
        }
    }
    assert!(
        seen.contains("KeyboardInterrupt"),
        "{seen:?}\n{}",
        signal_state(process.pid())
    );
    process.write("exit(3)\n").await.unwrap();
    let end = process.read(Duration::from_secs(10), None).await;
    let end = if end.state.is_running() {
        process
            .read(Duration::from_secs(10), Regex::new("$^").ok())
            .await
    } else {
        end
    };
    assert_eq!(end.state, ProcessState::Exited(3));
}

#[tokio::test]
async fn endless_output_stays_bounded_in_memory_and_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let spill = tempfile::tempdir().unwrap();
    let table = ProcessTable::new(None);
    let process = table
        .start(
            "c1",
            "yes",
            &bash("yes", dir.path()),
            false,
            &config(spill.path()),
        )
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let reading = process.read(Duration::ZERO, None).await;
    assert!(
        reading.output.bytes > 4 * 1024 * 1024,
        "{}",
        reading.output.bytes
    );
    assert!(reading.output.text.len() < 11 * 1024);
    assert!(reading.output.omitted > 0);
    assert!(reading.spill.dropped > 0);
    let on_disk: u64 = std::fs::read_dir(spill.path())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(on_disk <= 1024 * 1024, "{on_disk}");
    process.kill().await;
}

#[tokio::test]
async fn the_limit_refuses_a_start_and_lists_the_live_ones() {
    let dir = tempfile::tempdir().unwrap();
    let table = ProcessTable::new(None);
    let config = RunnerConfig {
        max_background: 2,
        ..config(dir.path())
    };
    let a = table
        .start("c1", "a", &bash("sleep 30", dir.path()), false, &config)
        .unwrap();
    let b = table
        .start("c1", "b", &bash("sleep 30", dir.path()), false, &config)
        .unwrap();
    let refused = table.start("c1", "c", &bash("sleep 30", dir.path()), false, &config);
    match refused {
        Err(StartError::TooMany { limit: 2, live }) => {
            assert_eq!(
                live.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
                [a.id(), b.id()]
            );
        }
        other => panic!("{:?}", other.map(|p| p.id().to_owned())),
    }
    // Another owner has its own limit; an ended process frees a place.
    let other = table
        .start("c2", "d", &bash("true", dir.path()), false, &config)
        .unwrap();
    a.kill().await;
    let c = table
        .start("c1", "c", &bash("sleep 30", dir.path()), false, &config)
        .unwrap();
    table.end_owner("c1").await;
    assert!(!b.state().is_running() && !c.state().is_running());
    table.end_all().await;
    assert!(!other.state().is_running());
}

/// A session's end runs in a task; Satchel exiting meanwhile must still kill
/// what ignores TERM (the race that left `trap '' TERM` processes alive).
#[tokio::test]
async fn an_exit_during_an_owners_end_still_kills_what_ignores_term() {
    let dir = tempfile::tempdir().unwrap();
    let table = std::sync::Arc::new(ProcessTable::new(None));
    let marker = format!("77.{}", std::process::id());
    let process = table
        .start(
            "c1",
            "stubborn",
            &bash(&format!("trap '' TERM; sleep {marker}"), dir.path()),
            false,
            &config(dir.path()),
        )
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let ending = tokio::spawn({
        let table = table.clone();
        async move { table.end_owner("c1").await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    table.end_all().await;
    assert!(!process.state().is_running());
    assert_eq!(running_with(&marker), Vec::<String>::new());
    ending.abort();
}

#[tokio::test]
async fn a_pipe_input_interrupts_and_ends() {
    let dir = tempfile::tempdir().unwrap();
    let table = ProcessTable::new(None);
    let process = table
        .start(
            "c1",
            "cat",
            &bash("trap 'echo got INT' INT; cat; echo done", dir.path()),
            false,
            &config(dir.path()),
        )
        .unwrap();
    process.write("hello\n").await.unwrap();
    let echo = process.read(Duration::from_secs(5), None).await;
    assert_eq!(echo.output.text, "hello\n");
    process.write("\u{4}").await.unwrap();
    let end = process
        .read(Duration::from_secs(5), Regex::new("done").ok())
        .await;
    assert!(end.output.text.contains("done"), "{end:?}");
}

#[tokio::test]
async fn a_server_on_the_shared_loopback_is_reached_by_a_later_command_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let table = ProcessTable::new(None);
    let net = table.loopback("c1").expect("a loopback namespace");
    let spec = SandboxSpec {
        loopback: satchel_exec::Loopback::Shared(net),
        ..SandboxSpec::new(vec![dir.path().to_path_buf()])
    };
    // A server on the machine's own loopback, which the sandbox must not reach.
    let outside = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let outside_port = outside.local_addr().unwrap().port();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = bash(
        &format!("exec python3 -m http.server {port} --bind 127.0.0.1"),
        dir.path(),
    );
    server.sandbox = Some(spec.clone());
    let process = table
        .start("c1", "server", &server, false, &config(dir.path()))
        .unwrap();
    let serving = process
        .read(Duration::from_secs(20), Regex::new("Serving HTTP").ok())
        .await;
    assert_eq!(serving.matched, Some(true), "{serving:?}");
    // Not on the machine's loopback: the port there is still free.
    std::net::TcpListener::bind(("127.0.0.1", port)).expect("the machine's port is free");

    let mut curl = bash(
        &format!(
            "curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{port}/; echo; \
             {}",
            escape_probes(outside_port)
        ),
        dir.path(),
    );
    curl.sandbox = Some(spec);
    curl.timeout = Duration::from_secs(20);
    let outcome = run_to_end(&curl, dir.path()).await;
    assert_eq!(
        outcome.stdout.text, "200\noutside refused\ninternet unreachable\n",
        "{outcome:?}"
    );
    assert!(
        outcome.sandbox.describe().contains("loopback only"),
        "{:?}",
        outcome.sandbox
    );
    process.kill().await;
    drop(outside);
}

/// A table that makes loopbacks on demand (a one-call host) gives a
/// foreground command a network namespace of its own: a server and its
/// client in one command reach each other, nothing outside is reached,
/// and no shared namespace is made until a background process needs one.
#[tokio::test]
async fn a_command_with_a_loopback_of_its_own_reaches_its_own_server_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let table = ProcessTable::new(None);
    table.loopback_on_demand();
    let loopback = table.loopback_for("c1", false);
    assert_eq!(loopback, satchel_exec::Loopback::Own);
    let outside = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let outside_port = outside.local_addr().unwrap().port();
    let mut both = bash(
        &format!(
            "python3 -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1 & \
             for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:8765/ && break; sleep 0.1; done; \
             curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:8765/; echo; \
             {}",
            escape_probes(outside_port)
        ),
        dir.path(),
    );
    both.sandbox = Some(SandboxSpec {
        loopback,
        ..SandboxSpec::new(vec![dir.path().to_path_buf()])
    });
    both.timeout = Duration::from_secs(30);
    let outcome = run_to_end(&both, dir.path()).await;
    assert_eq!(
        outcome.stdout.text, "200\noutside refused\ninternet unreachable\n",
        "{outcome:?}"
    );
    assert!(
        outcome
            .sandbox
            .describe()
            .contains("loopback only (the command's own)"),
        "{:?}",
        outcome.sandbox
    );
    // Nothing was shared: a second foreground command gets its own too,
    // until a background process makes the shared one.
    assert_eq!(table.loopback_for("c1", false), satchel_exec::Loopback::Own);
    let shared = table.loopback_for("c1", true);
    assert!(
        matches!(shared, satchel_exec::Loopback::Shared(_)),
        "{shared:?}"
    );
    assert_eq!(table.loopback_for("c1", false), shared);
    drop(outside);
}

/// Two commands that must fail inside a loopback-only sandbox: one to a
/// server on the machine's own loopback at `outside_port`, one to the
/// internet.
fn escape_probes(outside_port: u16) -> String {
    format!(
        "curl -s -m 2 http://127.0.0.1:{outside_port}/ || echo outside refused; \
         curl -s -m 2 http://1.1.1.1/ || echo internet unreachable"
    )
}

/// Runs `request` in the foreground to its end.
async fn run_to_end(request: &ExecRequest, dir: &Path) -> satchel_exec::ExecOutcome {
    satchel_exec::run(
        request,
        &config(dir),
        &tokio_util::sync::CancellationToken::new(),
    )
    .await
    .unwrap()
}
