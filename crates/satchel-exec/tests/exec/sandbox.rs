//! The sandbox against real escapes: every way out we know of is tried by
//! a real child (bash, Python, coreutils) and must fail, while the work a
//! command is for (reading anywhere, writing in its workspace) succeeds.
//!
//! These tests need what Satchel needs to sandbox on Linux: Landlock and
//! user namespaces. On a kernel without them they fail and say so, rather
//! than pass without testing anything.

use std::path::Path;
use std::time::{Duration, Instant};

use satchel_exec::sandbox::probe;
use satchel_exec::{
    ExecOutcome, ExecRequest, Exit, Limits, RunnerConfig, SandboxReport, SandboxSpec, SpillConfig,
    run,
};
use tokio_util::sync::CancellationToken;

const TEST_BOUND: Duration = Duration::from_secs(60);

struct Workspace {
    project: tempfile::TempDir,
    tmp: tempfile::TempDir,
    outside: tempfile::TempDir,
}

impl Workspace {
    fn new() -> Workspace {
        let support = probe();
        assert!(
            support.landlock_abi >= 1 && support.namespaces.is_ok() && support.process_limit,
            "this machine cannot sandbox, so these tests cannot check it: {support:?}"
        );
        Workspace {
            project: tempfile::tempdir().unwrap(),
            tmp: tempfile::tempdir().unwrap(),
            outside: tempfile::tempdir().unwrap(),
        }
    }

    fn project(&self) -> &Path {
        self.project.path()
    }

    fn outside(&self) -> &Path {
        self.outside.path()
    }

    fn spec(&self) -> SandboxSpec {
        SandboxSpec {
            private_tmp: Some(self.tmp.path().to_path_buf()),
            read_only: vec![self.project().join(".agents")],
            ..SandboxSpec::new(vec![self.project().to_path_buf()])
        }
    }

    async fn run(&self, script: &str) -> ExecOutcome {
        self.run_with(script, self.spec()).await
    }

    async fn run_with(&self, script: &str, spec: SandboxSpec) -> ExecOutcome {
        self.run_for(script, spec, Duration::from_secs(20)).await
    }

    async fn run_for(&self, script: &str, spec: SandboxSpec, timeout: Duration) -> ExecOutcome {
        let mut request = ExecRequest::new("/bin/bash", ["-c", script], self.project(), timeout);
        request.sandbox = Some(spec);
        let outcome = tokio::time::timeout(
            TEST_BOUND,
            run(&request, &config(), &CancellationToken::new()),
        )
        .await
        .expect("the sandboxed run hung")
        .unwrap();
        assert!(
            matches!(
                outcome.sandbox,
                SandboxReport::Enforced { isolated: true, .. }
            ),
            "{:?}",
            outcome.sandbox
        );
        outcome
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

fn text(out: &ExecOutcome) -> String {
    format!("{}{}", out.stdout.text, out.stderr.text)
}

#[tokio::test]
async fn ordinary_work_runs_inside() {
    let ws = Workspace::new();
    std::fs::write(ws.project().join("notes.txt"), "hello\n").unwrap();
    let out = ws
        .run(
            "ls && cat notes.txt && grep -c hello notes.txt && echo made > new.txt && \
             mkdir -p sub/dir && chmod +x new.txt && touch -d 2001-01-01 new.txt && \
             echo t > $TMPDIR/scratch && cat $TMPDIR/scratch && cat /etc/hostname > /dev/null",
        )
        .await;
    assert_eq!(out.exit, Exit::Code(0), "{}", text(&out));
    assert!(
        out.stdout.text.contains("notes.txt\nhello\n1\n"),
        "{}",
        text(&out)
    );
    assert!(out.stdout.text.ends_with("t\n"), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(ws.project().join("new.txt")).unwrap(),
        "made\n"
    );
    // TMPDIR is the workspace's temporary directory.
    assert!(ws.tmp.path().join("scratch").exists());
}

#[tokio::test]
async fn writes_outside_are_refused_by_every_route() {
    let ws = Workspace::new();
    let outside = ws.outside().display().to_string();
    std::fs::write(ws.outside().join("target"), "original\n").unwrap();
    std::os::unix::fs::symlink(ws.outside(), ws.project().join("link")).unwrap();
    // A hard link planted in the project before the command runs.
    std::fs::hard_link(ws.outside().join("target"), ws.project().join("hard")).ok();
    let relative = pathdiff(ws.outside(), ws.project());
    let attempts = [
        format!("echo x > {outside}/abs"),
        format!("echo x > {relative}/dotdot"),
        "echo x > link/through-symlink".to_owned(),
        format!("cd / && echo x > {outside}/from-root"),
        format!("echo x | tee {outside}/tee"),
        format!("python3 -c 'open(\"{outside}/py\", \"w\").write(\"x\")'"),
        format!("chmod 777 {outside}/target"),
        format!("touch -d 2001-01-01 {outside}/target"),
        format!("rm {outside}/target"),
        format!("mv {outside}/target {outside}/moved"),
        "echo '{\"permissions\":{\"mode\":\"trust\"}}' > .agents/agent.json".to_owned(),
    ];
    std::fs::create_dir(ws.project().join(".agents")).unwrap();
    let before = std::fs::metadata(ws.outside().join("target")).unwrap();
    for attempt in &attempts {
        let out = ws.run(attempt).await;
        assert_ne!(
            out.exit,
            Exit::Code(0),
            "`{attempt}` escaped: {}",
            text(&out)
        );
    }
    let entries: Vec<_> = std::fs::read_dir(ws.outside())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, vec!["target"], "files appeared outside");
    let after = std::fs::metadata(ws.outside().join("target")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(before.mode(), after.mode(), "mode changed outside");
    assert_eq!(before.mtime(), after.mtime(), "times changed outside");
    assert!(!ws.project().join(".agents/agent.json").exists());
    // The hard link shares the outside file's inode; writing through it
    // is refused too (Landlock checks the path's own hierarchy, and the
    // outside file stays as it was).
    if ws.project().join("hard").exists() {
        let out = ws.run("echo changed > hard").await;
        let _ = out;
        assert_eq!(
            std::fs::read_to_string(ws.outside().join("target")).unwrap(),
            std::fs::read_to_string(ws.project().join("hard")).unwrap()
        );
    }
}

/// `to` relative to `from`, through `..`.
fn pathdiff(to: &Path, from: &Path) -> String {
    let depth = from.components().count() - 1;
    let up = "../".repeat(depth);
    format!("{up}{}", to.display().to_string().trim_start_matches('/'))
}

#[tokio::test]
async fn no_network_of_any_kind() {
    let ws = Workspace::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let unix_dir = tempfile::tempdir().unwrap();
    let unix_path = unix_dir.path().join("sock");
    let _unix = std::os::unix::net::UnixListener::bind(&unix_path).unwrap();
    let attempts = [
        format!("exec 3<>/dev/tcp/127.0.0.1/{port}"),
        format!("curl -sS --max-time 3 http://127.0.0.1:{port}/"),
        format!("python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 3)'"),
        format!("echo x > /dev/udp/127.0.0.1/{udp_port}"),
        format!(
            "python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b\"x\", (\"127.0.0.1\", {udp_port}))'"
        ),
        "python3 -c 'import socket; socket.getaddrinfo(\"localhost\", 80)' && getent hosts example.com"
            .to_owned(),
        format!(
            "python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(\"{}\")'",
            unix_path.display()
        ),
        "python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(\"\\0satchel-test\")'"
            .to_owned(),
        "python3 -c 'import socket; a,b=socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)'"
            .to_owned(),
        "python3 -c 'import socket; a,b=socket.socketpair(socket.AF_UNIX, socket.SOCK_RAW)'"
            .to_owned(),
    ];
    for attempt in &attempts {
        let out = ws.run(attempt).await;
        assert_ne!(
            out.exit,
            Exit::Code(0),
            "`{attempt}` reached out: {}",
            text(&out)
        );
    }
    let mut buf = [0u8; 8];
    assert!(udp.recv(&mut buf).is_err(), "a datagram arrived");
    // A stream pair to its own children still works.
    let out = ws
        .run("python3 -c 'import socket; a,b=socket.socketpair(); a.send(b\"ok\"); print(b.recv(2).decode())'")
        .await;
    assert_eq!(out.stdout.text, "ok\n", "{}", text(&out));
}

#[tokio::test]
async fn network_when_allowed() {
    let ws = Workspace::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let spec = SandboxSpec {
        network: true,
        ..ws.spec()
    };
    let out = ws
        .run_with(
            &format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"),
            spec,
        )
        .await;
    assert_eq!(out.stdout.text, "connected\n", "{}", text(&out));
}

#[tokio::test]
async fn other_processes_are_out_of_sight_and_reach() {
    let ws = Workspace::new();
    let me = std::process::id();
    // SAFETY: set once, before any command of this test reads it.
    unsafe { std::env::set_var("SATCHEL_TEST_VISIBLE", "in-satchel-only") };
    let out = ws
        .run(&format!(
            "cat /proc/{me}/environ && echo read-environ; ls /proc/{me}/fd && echo read-fds; \
             head -c 1 /proc/{me}/mem && echo read-mem; kill -0 {me} && echo signalled; \
             ls /proc | grep -c '^[0-9]'"
        ))
        .await;
    let all = text(&out);
    for leak in [
        "in-satchel-only",
        "read-environ",
        "read-fds",
        "read-mem",
        "signalled",
    ] {
        assert!(!out.stdout.text.contains(leak), "{leak}: {all}");
    }
    // Its /proc shows only the sandbox's own few processes.
    let count: usize = out
        .stdout
        .text
        .lines()
        .last()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(count < 10, "{all}");
}

#[tokio::test]
async fn secrets_stay_out_unless_passed() {
    let ws = Workspace::new();
    // SAFETY: this test binary sets these names only here; the runner reads
    // the environment when spawning.
    unsafe {
        std::env::set_var("SATCHEL_TEST_API_KEY", "sk-hidden");
        std::env::set_var("SATCHEL_TEST_PASSED_TOKEN", "tok-passed");
    }
    let spec = SandboxSpec {
        pass_env: vec!["SATCHEL_TEST_PASSED_TOKEN".to_owned()],
        ..ws.spec()
    };
    let out = ws
        .run_with(
            "echo \"[${SATCHEL_TEST_API_KEY:-}] [${SATCHEL_TEST_PASSED_TOKEN:-}]\"",
            spec,
        )
        .await;
    assert_eq!(out.stdout.text, "[] [tok-passed]\n");
}

#[tokio::test]
async fn every_process_ends_with_the_command() {
    let ws = Workspace::new();
    let marker = ws.project().join("survivor");
    let script = format!(
        "setsid bash -c 'sleep 2; echo alive > {m}' & \
         (bash -c 'sleep 2; echo alive > {m}' &) ; echo started",
        m = marker.display()
    );
    let out = ws.run(&script).await;
    assert_eq!(out.stdout.text, "started\n");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!marker.exists(), "a detached process outlived its command");
}

#[tokio::test]
async fn the_exit_status_is_the_commands() {
    let ws = Workspace::new();
    assert_eq!(ws.run("exit 7").await.exit, Exit::Code(7));
    assert_eq!(ws.run("kill -SEGV $$").await.exit, Exit::Signal(11));
    let started = Instant::now();
    let mut request = ExecRequest::new(
        "/bin/bash",
        ["-c", "sleep 30"],
        ws.project(),
        Duration::from_millis(300),
    );
    request.sandbox = Some(ws.spec());
    let out = run(&request, &config(), &CancellationToken::new())
        .await
        .unwrap();
    assert!(out.timed_out);
    // SIGTERM reached the command itself: no wait for the SIGKILL grace.
    assert_eq!(out.exit, Exit::Signal(15));
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// The command is exec'd by the sandbox's own processes, not by std: a
/// program is found in `PATH`, a script without `#!` runs under `sh` as
/// `execvp` would run it, and a program that cannot start is the spawn's
/// error, as it is unsandboxed, not a silent exit.
#[tokio::test]
async fn programs_start_inside_as_they_would_outside() {
    let ws = Workspace::new();
    // `program` with `args` in the workspace's sandbox.
    let start = |program: &std::path::Path, args: &[&str]| {
        let mut request = ExecRequest::new(
            program,
            args.iter().copied(),
            ws.project(),
            Duration::from_secs(20),
        );
        request.sandbox = Some(ws.spec());
        async move { run(&request, &config(), &CancellationToken::new()).await }
    };
    let script = ws.project().join("no-shebang");
    std::fs::write(&script, "echo \"ran as $0 with $1\"\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = start(&script, &["an-argument"]).await.unwrap();
    assert_eq!(out.exit, Exit::Code(0), "{out:?}");
    let expected = format!("ran as {} with an-argument\n", script.display());
    assert_eq!(out.stdout.text, expected);
    assert!(matches!(
        out.sandbox,
        SandboxReport::Enforced { isolated: true, .. }
    ));

    let out = start(std::path::Path::new("bash"), &["-c", "echo $0"])
        .await
        .unwrap();
    assert_eq!(out.stdout.text, "bash\n");

    for (program, kind) in [
        (ws.project().join("missing"), std::io::ErrorKind::NotFound),
        // A directory: found, and refused by execve inside the namespace.
        (
            ws.project().to_path_buf(),
            std::io::ErrorKind::PermissionDenied,
        ),
    ] {
        let started = Instant::now();
        match start(&program, &["x"]).await {
            Err(satchel_exec::ExecError::Spawn { source, .. }) => {
                assert_eq!(source.kind(), kind, "{program:?}: {source}");
            }
            other => panic!("{program:?} started: {other:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}

#[tokio::test]
async fn a_fork_bomb_and_a_memory_bomb_are_contained() {
    let ws = Workspace::new();
    // The limit is the namespace's own: the machine's stays as it was.
    let machine_pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap();
    let spec = SandboxSpec {
        limits: Limits {
            processes: Some(300),
            memory_bytes: Some(1 << 30),
            ..Limits::default()
        },
        ..ws.spec()
    };
    let started = Instant::now();
    let out = ws
        .run_for(
            "bomb() { bomb | bomb & }; bomb; sleep 1; echo survived",
            spec.clone(),
            Duration::from_secs(5),
        )
        .await;
    // Stopped by its deadline at the latest, and all of it ended with it.
    assert!(
        out.stdout.text.contains("survived") || out.timed_out,
        "{out:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(15));
    // The machine still forks, under the limit it had.
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap(),
        machine_pid_max
    );
    assert!(
        std::process::Command::new("true")
            .status()
            .unwrap()
            .success()
    );
    let out = ws
        .run_with(
            "python3 -c 'b = bytearray(10 * 1024**3); print(\"allocated\")'",
            spec,
        )
        .await;
    assert!(!out.stdout.text.contains("allocated"), "{}", text(&out));
    assert!(out.stderr.text.contains("MemoryError"), "{}", text(&out));
}

/// No capabilities, even as root (the user namespace maps the caller's
/// own id, so a root Satchel's command is root inside): none held, and
/// none granted by an exec (`grep` is exec'd by the shell).
#[tokio::test]
async fn no_capabilities_even_as_root() {
    let ws = Workspace::new();
    let out = ws
        .run("grep -E '^Cap(Inh|Prm|Eff|Amb)' /proc/self/status")
        .await;
    let sets: Vec<&str> = out.stdout.text.lines().collect();
    assert_eq!(sets.len(), 4, "{}", text(&out));
    for set in sets {
        assert!(set.ends_with("\t0000000000000000"), "{}", out.stdout.text);
    }
}

/// A sandboxed command is started without a copy of Satchel, joining a
/// conversation's loopback or not: the process Satchel waits for is the
/// namespace's PID 1, the command's parent, and it shares this process's
/// memory (`kcmp`) rather than copying it. A run abandoned mid-way ends
/// the command and reaps that PID 1.
#[tokio::test]
async fn the_sandbox_copies_nothing_of_satchel_and_an_abandoned_run_leaves_nothing() {
    let ws = Workspace::new();
    launched_without_a_copy(&ws, ws.spec(), "sleep 30").await;
    let net = satchel_exec::sandbox::LoopbackNet::new().unwrap();
    let joining = SandboxSpec {
        loopback: satchel_exec::Loopback::Shared(std::sync::Arc::new(net)),
        ..ws.spec()
    };
    launched_without_a_copy(&ws, joining, "sleep 31").await;
}

async fn launched_without_a_copy(ws: &Workspace, spec: SandboxSpec, sleep: &str) {
    let marker = ws.project().join(format!("started {sleep}"));
    let script = format!("touch '{}'; exec {sleep}", marker.display());
    let mut request = ExecRequest::new("/bin/bash", ["-c", &script], ws.project(), TEST_BOUND);
    request.sandbox = Some(spec);
    let config = config();
    let cancel = CancellationToken::new();
    let mut running = Box::pin(run(&request, &config, &cancel));
    let started = async {
        while !marker.exists() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::select! {
        out = &mut running => panic!("the command ended early: {out:?}"),
        () = started => {}
        () = tokio::time::sleep(TEST_BOUND) => panic!("the command never started"),
    }
    // The marker is made before the shell execs the command: wait for it
    // to be the command (on a busy machine the exec can come later).
    let command = async {
        loop {
            let found = processes_running(sleep)
                .into_iter()
                .find(|&pid| parent_of(parent_of(pid)) == std::process::id() as i32);
            match found {
                Some(pid) => break pid,
                None => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    };
    let command = tokio::time::timeout(TEST_BOUND, command)
        .await
        .expect("the command is the child of this process's child");
    let init = parent_of(command);
    // SAFETY: kcmp compares two processes' memory; no pointers.
    let same_memory = unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            std::process::id() as libc::pid_t,
            init,
            1, // KCMP_VM
            0,
            0,
        )
    };
    assert_eq!(
        same_memory, 0,
        "the namespace's PID 1 copied Satchel's memory"
    );

    drop(running);
    let deadline = Instant::now() + Duration::from_secs(10);
    while (Path::new(&format!("/proc/{command}")).exists()
        || Path::new(&format!("/proc/{init}")).exists())
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !Path::new(&format!("/proc/{command}")).exists(),
        "the command outlived its run"
    );
    assert!(
        !Path::new(&format!("/proc/{init}")).exists(),
        "PID 1 was not reaped"
    );
}

/// Pids whose command line, arguments joined by spaces, is `command_line`.
fn processes_running(command_line: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|line| {
                line.split(|&b| b == 0)
                    .filter(|arg| !arg.is_empty())
                    .map(|arg| String::from_utf8_lossy(arg).into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
                    == command_line
            })
        })
        .collect()
}

/// The parent's pid as this process sees it (0 once it is gone).
fn parent_of(pid: i32) -> i32 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}
