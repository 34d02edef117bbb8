//! The `code` tool with real runtimes: bun (installed by
//! scripts/install-js-runtime.sh), node, python3 and bash, sandboxed, with
//! every run traced into a real SQLite file.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use satchel_builtins::code::{
    CodeConfig, CodeTool, GeneratorConfig, OpenCodeStore, RuntimeKind, code_stats,
};
use satchel_builtins::memory::{MemoryHandle, OpenMemory};
use satchel_core::{ErrorCode, ToolCall, ToolOutput};
use satchel_memory::{Memory, MemoryConfig, MemoryOptions, ModelSource};
use satchel_store::{CodeQuery, CodeStore, SqliteStore, StoreOptions, SystemClock};
use satchel_tools::{Registry, Settings, ToolContext, ToolsConfig};
use serde_json::{Value, json};

const TEST_BOUND: Duration = Duration::from_secs(120);

/// The bun that scripts/install-js-runtime.sh installs; its absence is a
/// failure with instructions, never a skip.
fn bun() -> PathBuf {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.runtimes/js/node_modules/.bin/bun");
    assert!(
        path.exists(),
        "bun is missing: run scripts/install-js-runtime.sh (.ci/run does) before the tests"
    );
    path
}

struct Harness {
    _dir: tempfile::TempDir,
    store: SqliteStore,
    memory: Arc<Memory>,
    registry: Registry,
}

impl Harness {
    async fn new() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("satchel.db"), StoreOptions::default())
            .await
            .unwrap();
        let handle: Arc<dyn satchel_builtins::code::CodeStoreHandle> =
            Arc::new(OpenCodeStore(Arc::new(store.clone())));
        let memory = Arc::new(Memory::new(
            Arc::new(store.clone()),
            MemoryConfig::default(),
            MemoryOptions {
                clock: Arc::new(SystemClock),
                model: ModelSource::None,
                summarizer: None,
            },
        ));
        let memory_handle: Arc<dyn MemoryHandle> = Arc::new(OpenMemory(memory.clone()));
        let mut registry = Registry::new();
        registry
            .register(CodeTool::new(Some(handle), None).with_memory(Some(memory_handle)))
            .unwrap();
        Harness {
            _dir: dir,
            store,
            memory,
            registry,
        }
    }

    async fn call(&self, input: Value, config: &Arc<ToolsConfig>) -> ToolOutput {
        let ctx = ToolContext::standalone("code-1", std::env::temp_dir(), config.clone());
        let call = ToolCall {
            id: "code-1".into(),
            name: "code".into(),
            input,
        };
        tokio::time::timeout(TEST_BOUND, self.registry.call(&call, &ctx))
            .await
            .expect("code call hung")
    }
}

fn config(js: RuntimeKind, network: bool) -> Arc<ToolsConfig> {
    let env: BTreeMap<String, String> =
        [("PATH".to_owned(), std::env::var("PATH").unwrap_or_default())]
            .into_iter()
            .collect();
    let (mut code, warnings) = CodeConfig::from_settings(&Settings::default().with_env(env));
    assert!(warnings.is_empty(), "{warnings:?}");
    code.js_runtime = Some(js);
    code.runtimes.insert("bun".into(), bun());
    code.network = network;
    Arc::new(ToolsConfig::default().with_section(code))
}

fn body(output: &ToolOutput) -> &Value {
    output.results.structured().expect("code results are JSON")
}

fn execute(language: &str, code: &str) -> Value {
    json!({"action": "execute", "language": language, "code": code, "timeout_ms": 10_000})
}

/// Per language: hello world, syntax error, missing import, thrown exception.
fn basic_programs(language: &str) -> [(&'static str, String, Option<&'static str>); 4] {
    match language {
        "python" => [
            ("hello", "print('hello world')".into(), None),
            ("syntax", "print('unclosed'".into(), Some("syntax")),
            (
                "import",
                "import satchel_no_such_module".into(),
                Some("import"),
            ),
            ("throw", "raise ValueError('boom')".into(), Some("runtime")),
        ],
        "bash" => [
            ("hello", "echo hello world".into(), None),
            ("syntax", "if then fi".into(), Some("syntax")),
            (
                "import",
                "satchel-no-such-command --flag".into(),
                Some("reference"),
            ),
            ("throw", "echo boom >&2; exit 3".into(), Some("runtime")),
        ],
        "typescript" => [
            (
                "hello",
                "const greeting: string = 'hello world';\nconsole.log(greeting);".into(),
                None,
            ),
            ("syntax", "function (".into(), Some("syntax")),
            (
                "import",
                "import x from 'satchel-no-such-pkg';\nconsole.log(x);".into(),
                Some("import"),
            ),
            ("throw", "throw new Error('boom');".into(), Some("runtime")),
        ],
        _ => [
            ("hello", "console.log('hello world')".into(), None),
            ("syntax", "function (".into(), Some("syntax")),
            (
                "import",
                "const x = require('satchel-no-such-pkg');\nconsole.log(x);".into(),
                Some("import"),
            ),
            ("throw", "null.foo".into(), Some("type")),
        ],
    }
}

async fn check_basics(harness: &Harness, language: &str, config: &Arc<ToolsConfig>) {
    for (name, program, category) in basic_programs(language) {
        let out = harness.call(execute(language, &program), config).await;
        let value = body(&out);
        assert_eq!(
            value["success"],
            category.is_none(),
            "{language}/{name}: {value}"
        );
        assert_eq!(
            value["error_category"].as_str(),
            category,
            "{language}/{name}: {value}"
        );
        if category.is_none() {
            assert_eq!(
                value["result"]["stdout"], "hello world\n",
                "{language}/{name}"
            );
            assert!(value["error"].is_null());
        } else {
            assert!(
                value["error"].as_str().is_some_and(|e| !e.is_empty()),
                "{language}/{name}: {value}"
            );
        }
        assert!(
            value["result"]["execution_id"].is_string(),
            "{language}/{name}: not traced: {value}"
        );
        assert!(
            value["result"]["sandbox"]
                .as_str()
                .unwrap()
                .starts_with("landlock+seccomp"),
            "{value}"
        );
    }
}

/// Whether a live (not zombie) process on this machine has `argument`
/// on its command line.
fn running_with_argument(argument: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let dir = entry.path();
        let has_argument = std::fs::read(dir.join("cmdline"))
            .is_ok_and(|line| line.split(|b| *b == 0).any(|a| a == argument.as_bytes()));
        let zombie = std::fs::read_to_string(dir.join("stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        });
        has_argument && !zombie
    })
}

/// Hostile behaviours: an infinite loop, a background process left behind,
/// megabytes of output, reading stdin, writing outside, the network.
async fn check_hostile(harness: &Harness, language: &str, config: &Arc<ToolsConfig>) {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("escaped.txt");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let pid_file = outside.path().join("pid");
    // A sleep no other process has: its survival is looked for by name,
    // since the sandbox's process ids are its own.
    let nap = format!("1000.{}{}", std::process::id(), language.len());
    let (looping, background, flood, stdin, write, network) = match language {
        "python" => (
            "while True: pass".to_owned(),
            format!("import subprocess\np = subprocess.Popen(['sleep', '{nap}'])\nprint(p.pid)"),
            "import sys\nsys.stdout.write('x' * 5_000_000)".to_owned(),
            "import sys\nprint(repr(sys.stdin.read()))".to_owned(),
            format!(
                "open({:?}, 'w').write('escaped')",
                target.display().to_string()
            ),
            format!(
                "import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5)\nprint('connected')"
            ),
        ),
        "bash" => (
            "while true; do :; done".to_owned(),
            format!("sleep {nap} &\necho $!"),
            "head -c 5000000 /dev/zero | tr '\\0' x".to_owned(),
            "cat; echo \"[$?]\"".to_owned(),
            format!("echo escaped > {}", target.display()),
            format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"),
        ),
        _ => (
            "while (true) {}".to_owned(),
            format!(
                "const {{ spawn }} = require('child_process');\nconst p = spawn('sleep', ['{nap}'], {{ stdio: 'ignore' }});\nconsole.log(p.pid);"
            ),
            "process.stdout.write('x'.repeat(5_000_000))".to_owned(),
            "const fs = require('fs');\nconsole.log(JSON.stringify(fs.readFileSync(0, 'utf8')))"
                .to_owned(),
            format!(
                "require('fs').writeFileSync({:?}, 'escaped')",
                target.display().to_string()
            ),
            format!(
                "const net = require('net');\nconst s = net.connect({port}, '127.0.0.1');\ns.on('connect', () => {{ console.log('connected'); s.end(); }});\ns.on('error', (e) => {{ console.error(String(e)); process.exit(1); }});"
            ),
        ),
    };
    let _ = pid_file;

    let out = harness
        .call(
            json!({"action": "execute", "language": language, "code": looping, "timeout_ms": 700}),
            config,
        )
        .await;
    assert_eq!(
        out.error_code,
        Some(ErrorCode::ToolTimeout),
        "{language}: {out:?}"
    );
    assert_eq!(body(&out)["error_category"], "timeout");

    let out = harness.call(execute(language, &background), config).await;
    let pid: i32 = body(&out)["result"]["stdout"]
        .as_str()
        .unwrap()
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{language}: {out:?}"));
    let gone = tokio::time::timeout(Duration::from_secs(20), async {
        while running_with_argument(&nap) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        gone.is_ok(),
        "{language}: background process {pid} outlived the code"
    );

    let out = harness.call(execute(language, &flood), config).await;
    let value = body(&out);
    assert_eq!(value["success"], true, "{language}: {value}");
    assert_eq!(value["result"]["truncated"], true);
    assert!(value["result"]["stdout"].as_str().unwrap().len() < 12_000);

    let out = harness.call(execute(language, &stdin), config).await;
    let printed = body(&out)["result"]["stdout"]
        .as_str()
        .unwrap()
        .trim()
        .to_owned();
    assert!(
        ["''", "\"\"", "[0]"].contains(&printed.as_str()),
        "{language}: stdin was not empty: {printed}"
    );

    let out = harness.call(execute(language, &write), config).await;
    assert_eq!(body(&out)["success"], false, "{language}: {out:?}");
    assert!(!target.exists(), "{language}: wrote outside its directory");

    let out = harness.call(execute(language, &network), config).await;
    let value = body(&out);
    assert_eq!(
        value["success"], false,
        "{language}: connected despite the sandbox: {value}"
    );
    assert_eq!(value["error_category"], "network", "{language}: {value}");
    assert!(
        !value["result"]["stdout"]
            .as_str()
            .unwrap()
            .contains("connected")
    );
    drop(listener);
}

#[tokio::test]
async fn python_programs() {
    let harness = Harness::new().await;
    let config = config(RuntimeKind::Bun, false);
    check_basics(&harness, "python", &config).await;
    check_hostile(&harness, "python", &config).await;
}

#[tokio::test]
async fn bash_programs() {
    let harness = Harness::new().await;
    let config = config(RuntimeKind::Bun, false);
    check_basics(&harness, "bash", &config).await;
    check_hostile(&harness, "bash", &config).await;
}

#[tokio::test]
async fn javascript_programs_with_bun() {
    let harness = Harness::new().await;
    let config = config(RuntimeKind::Bun, false);
    check_basics(&harness, "javascript", &config).await;
    check_hostile(&harness, "javascript", &config).await;
}

#[tokio::test]
async fn javascript_programs_with_node() {
    let harness = Harness::new().await;
    let config = config(RuntimeKind::Node, false);
    let out = harness
        .call(execute("javascript", "console.log('hello world')"), &config)
        .await;
    assert_eq!(body(&out)["result"]["runtime"], "node");
    check_basics(&harness, "javascript", &config).await;
    check_hostile(&harness, "javascript", &config).await;
}

#[tokio::test]
async fn typescript_programs_with_bun() {
    let harness = Harness::new().await;
    let config = config(RuntimeKind::Bun, false);
    check_basics(&harness, "typescript", &config).await;
}

#[tokio::test]
async fn network_can_be_allowed() {
    let harness = Harness::new().await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let program = format!(
        "import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5)\nprint('connected')"
    );
    let out = harness
        .call(execute("python", &program), &config(RuntimeKind::Bun, true))
        .await;
    assert_eq!(body(&out)["result"]["stdout"], "connected\n", "{out:?}");
    assert!(
        body(&out)["result"]["sandbox"]
            .as_str()
            .unwrap()
            .contains("network allowed")
    );
}

#[tokio::test]
async fn traces_feed_stats_and_failures() {
    let harness = Harness::new().await;
    let config = config(RuntimeKind::Bun, false);
    for program in [
        "print(1)",
        "print(2)",
        "import nope_nope",
        "x + 1",
        "print(3",
    ] {
        harness.call(execute("python", program), &config).await;
    }
    harness.call(execute("bash", "echo ok"), &config).await;
    let rows = harness
        .store
        .code_executions(CodeQuery::default())
        .await
        .unwrap();
    assert_eq!(rows.len(), 6);
    let stats = code_stats(&rows);
    assert_eq!((stats.total, stats.successes, stats.failures), (6, 3, 3));
    let categories: Vec<(&str, usize)> = stats
        .categories
        .iter()
        .map(|c| (c.category.as_str(), c.count))
        .collect();
    assert_eq!(categories, [("import", 1), ("reference", 1), ("syntax", 1)]);
    assert_eq!(stats.categories[1].example.code, "x + 1");
    assert!(stats.categories[1].example.error.contains("NameError"));
    assert_eq!(stats.languages[0].language, "python");
    assert_eq!(
        (stats.languages[0].total, stats.languages[0].failures),
        (5, 3)
    );
    let trace = &rows[2];
    assert_eq!(
        (trace.language.as_str(), trace.runtime.as_str()),
        ("python", "python3")
    );
    assert_eq!(trace.tool_call_id.as_deref(), Some("code-1"));
    assert!(trace.stderr.contains("ModuleNotFoundError"));
    // Every run is traced under the memory session open at the time.
    let session = harness.memory.current_session(None).await.unwrap();
    assert!(
        rows.iter()
            .all(|row| row.session_id.as_deref() == Some(session.id.as_str())),
        "{:?}",
        rows.iter().map(|r| &r.session_id).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn generate_jobs_run_in_the_background() {
    let harness = Harness::new().await;
    let dir = tempfile::tempdir().unwrap();
    let generator = dir.path().join("fake-generator");
    std::fs::write(&generator, "#!/bin/bash\nprompt=$(cat)\necho \"# generated for: ${prompt%%$'\\n'*}\"\necho \"print('fizz')\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&generator, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tools = config(RuntimeKind::Bun, false);
    let mut code = tools.sections.get::<CodeConfig>().unwrap().clone();
    code.generator = Some(GeneratorConfig::Command {
        argv: vec![generator.display().to_string()],
        timeout: Duration::from_secs(30),
    });
    let tools = Arc::new((*tools).clone().with_section(code));

    let out = harness
        .call(
            json!({"action": "generate", "task": "fizzbuzz in python", "language": "python"}),
            &tools,
        )
        .await;
    let job_id = body(&out)["job_id"].as_str().unwrap().to_owned();
    assert_eq!(body(&out)["result"]["status"], "queued");
    let done = tokio::time::timeout(TEST_BOUND, async {
        loop {
            let out = harness
                .call(json!({"action": "status", "job_id": job_id}), &tools)
                .await;
            if body(&out)["result"]["status"] == "done" {
                return out;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap();
    let code = body(&done)["result"]["code"].as_str().unwrap();
    assert!(
        code.starts_with("# generated for: Write code in python for this task:"),
        "{code}"
    );
    assert!(code.contains("print('fizz')"));

    let out = harness
        .call(json!({"action": "status", "job_id": "no-such-job"}), &tools)
        .await;
    assert_eq!(out.error_code, Some(ErrorCode::InvalidParams));
    let unconfigured = harness
        .call(
            json!({"action": "generate", "task": "x"}),
            &config(RuntimeKind::Bun, false),
        )
        .await;
    assert!(
        body(&unconfigured)["error"]
            .as_str()
            .unwrap()
            .contains("no code generator is configured")
    );
}

/// Progress reports, kept for the test to read.
#[derive(Debug, Default)]
struct Reports(std::sync::Mutex<Vec<String>>);

impl satchel_tools::progress::ProgressSink for Reports {
    fn report(&self, update: satchel_tools::progress::ProgressUpdate) {
        self.0.lock().unwrap().push(update.message);
    }
}

/// A caller that runs the call in the background (an MCP task) gets the
/// code itself, hears the job's state while it runs, and stops the job by
/// cancelling the call.
#[tokio::test]
async fn a_background_generate_waits_for_its_job_and_reports_its_state() {
    let harness = Harness::new().await;
    let dir = tempfile::tempdir().unwrap();
    let generator = dir.path().join("slow-generator");
    std::fs::write(
        &generator,
        "#!/bin/bash\ncat > /dev/null\nsleep \"${SLEEP:-1.5}\"\necho \"print('slow fizz')\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&generator, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tools = config(RuntimeKind::Bun, false);
    let mut code = tools.sections.get::<CodeConfig>().unwrap().clone();
    code.generator = Some(GeneratorConfig::Command {
        argv: vec![generator.display().to_string()],
        timeout: Duration::from_secs(30),
    });
    let tools = Arc::new((*tools).clone().with_section(code));
    let input = json!({"action": "generate", "task": "fizzbuzz", "language": "python"});
    let spec_tool = harness.registry.get("code").unwrap();
    assert!(spec_tool.runs_long(&input), "generate runs long");
    assert!(!spec_tool.runs_long(&json!({"action": "status", "job_id": "x"})));

    let reports = Arc::new(Reports::default());
    let mut ctx = ToolContext::standalone("code-bg", std::env::temp_dir(), tools.clone());
    ctx.background = true;
    ctx.progress = Some(reports.clone());
    let call = ToolCall {
        id: "code-bg".into(),
        name: "code".into(),
        input: input.clone(),
    };
    let out = tokio::time::timeout(TEST_BOUND, harness.registry.call(&call, &ctx))
        .await
        .unwrap();
    assert!(!out.is_error, "{out:?}");
    assert_eq!(body(&out)["result"]["status"], "done", "{out:?}");
    assert!(
        body(&out)["result"]["code"]
            .as_str()
            .unwrap()
            .contains("slow fizz")
    );
    let seen = reports.0.lock().unwrap().clone();
    assert!(
        seen.iter().any(|m| m.contains(": running")),
        "the job's state is reported: {seen:?}"
    );

    // Cancelled while the generator runs: the call says so, and the job
    // ends failed rather than running on unseen.
    let ctx = ToolContext {
        progress: None,
        ..ctx.clone()
    };
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        cancel.cancel();
    });
    let out = tokio::time::timeout(TEST_BOUND, harness.registry.call(&call, &ctx))
        .await
        .unwrap();
    assert_eq!(out.error_code, Some(ErrorCode::Cancelled), "{out:?}");
}

#[tokio::test]
async fn a_job_whose_runner_died_reads_as_failed() {
    let harness = Harness::new().await;
    let job = harness
        .store
        .create_job(satchel_store::NewCodeJob {
            task: "t".into(),
            generator: "g".into(),
            runner: "999999@1".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let out = harness
        .call(
            json!({"action": "status", "job_id": job.id}),
            &config(RuntimeKind::Bun, false),
        )
        .await;
    assert_eq!(body(&out)["result"]["status"], "failed");
    assert!(
        body(&out)["error"]
            .as_str()
            .unwrap()
            .contains("pid 999999) exited before it finished")
    );
}

#[tokio::test]
async fn inputs_are_checked_per_action() {
    let harness = Harness::new().await;
    let config = config(RuntimeKind::Bun, false);
    for input in [
        json!({"action": "execute", "code": "print(1)"}),
        json!({"action": "execute", "language": "cobol", "code": "x"}),
        json!({"action": "generate"}),
        json!({"action": "status"}),
        json!({"action": "dance"}),
    ] {
        let out = harness.call(input.clone(), &config).await;
        assert_eq!(out.error_code, Some(ErrorCode::InvalidParams), "{input}");
    }
}

/// The escapes of issue #30, tried by real Python and JavaScript programs
/// through the `code` tool: each is contained.
#[tokio::test]
async fn python_and_javascript_cannot_escape_the_sandbox() {
    let harness = Harness::new().await;
    let config = config(RuntimeKind::Node, false);
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("target");
    std::fs::write(&target, "original").unwrap();
    let unix_dir = tempfile::tempdir().unwrap();
    let unix_path = unix_dir.path().join("sock");
    let _unix = std::os::unix::net::UnixListener::bind(&unix_path).unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let me = std::process::id();
    let t = target.display();
    let u = unix_path.display();
    let python = [
        ("environ", format!("print(open('/proc/{me}/environ').read())")),
        ("signal", format!("import os\nos.kill({me}, 0)\nprint('escaped')")),
        ("udp", format!("import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.sendto(b'x', ('127.0.0.1', {udp_port}))\nprint('escaped')")),
        ("unix", format!("import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('{u}')\nprint('escaped')")),
        ("abstract", "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('\\0satchel')\nprint('escaped')".to_owned()),
        ("chmod", format!("import os\nos.chmod('{t}', 0o777)\nprint('escaped')")),
        ("utime", format!("import os\nos.utime('{t}', (0, 0))\nprint('escaped')")),
        ("memory", "b = bytearray(12 * 1024**3)\nprint('escaped')".to_owned()),
    ];
    let javascript = [
        (
            "environ",
            format!("console.log(require('fs').readFileSync('/proc/{me}/environ', 'utf8'))"),
        ),
        (
            "signal",
            format!("process.kill({me}, 0); console.log('escaped')"),
        ),
        (
            "udp",
            format!(
                "const s = require('dgram').createSocket('udp4'); s.send('x', {udp_port}, '127.0.0.1', (e) => {{ if (e) {{ console.error(String(e)); process.exit(1) }} console.log('escaped'); s.close() }})"
            ),
        ),
        (
            "unix",
            format!(
                "const c = require('net').connect('{u}'); c.on('connect', () => {{ console.log('escaped'); process.exit(0) }}); c.on('error', (e) => {{ console.error(String(e)); process.exit(1) }})"
            ),
        ),
        (
            "chmod",
            format!("require('fs').chmodSync('{t}', 0o777); console.log('escaped')"),
        ),
        (
            "utime",
            format!("require('fs').utimesSync('{t}', 0, 0); console.log('escaped')"),
        ),
    ];
    let before = std::fs::metadata(&target).unwrap();
    let runs = python
        .iter()
        .map(|(name, code)| ("python", *name, code))
        .chain(
            javascript
                .iter()
                .map(|(name, code)| ("javascript", *name, code)),
        );
    for (language, name, code) in runs {
        let out = harness.call(execute(language, code), &config).await;
        let value = body(&out);
        assert_eq!(
            value["success"], false,
            "{language}/{name} escaped: {value}"
        );
        let stdout = value["result"]["stdout"].as_str().unwrap_or_default();
        assert!(!stdout.contains("escaped"), "{language}/{name}: {value}");
        assert!(!stdout.contains("PATH="), "{language}/{name}: {value}");
    }
    use std::os::unix::fs::MetadataExt;
    let after = std::fs::metadata(&target).unwrap();
    assert_eq!(
        (before.mode(), before.mtime()),
        (after.mode(), after.mtime())
    );
    let mut datagram = [0u8; 4];
    assert!(udp.recv(&mut datagram).is_err(), "a datagram arrived");

    // A fork bomb whose children hold their places stops at the process
    // limit (1,024 by default), and its children end with it.
    let bomb = "import os, time\nn = 0\nwhile True:\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n    if pid == 0:\n        time.sleep(60)\n        os._exit(0)\n    n += 1\nprint('stopped after', n)";
    let out = harness
        .call(
            json!({"action": "execute", "language": "python", "code": bomb, "timeout_ms": 20_000}),
            &config,
        )
        .await;
    assert!(
        !body(&out)["result"]["timed_out"].as_bool().unwrap_or(true),
        "{out:?}"
    );
    let stdout = body(&out)["result"]["stdout"].as_str().unwrap_or_default();
    let forked: usize = stdout
        .trim()
        .strip_prefix("stopped after ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out:?}"));
    assert!(forked < 1100, "{forked} processes");
}
