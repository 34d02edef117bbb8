//! End-to-end: what the `satchel` binary records, and the commands that
//! read the record back (`log`, `conversations`, `audit`, `export`), run in
//! a sandbox with its own `XDG_DATA_HOME`. Includes the store's failures:
//! nothing runs that is not on record, so a call whose start cannot be
//! written (a corrupt, read-only or locked database) is refused with the
//! cause and never runs; one whose end cannot be written (a full disk) ran,
//! and stays on record as begun and never ended.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use pretty_assertions::assert_eq;
use satchel_core::{ToolCall, ToolOutput, ToolResults};
use satchel_store::{
    AuditSource, ConversationStore, LogKind, LogStore, MessageStore, NewConversation,
    NewLlmMessage, NewLogEntry, NewStatement, NewToolCall, SqliteStore, StatementStore,
    StoreOptions, Timestamp, ToolCallStore,
};
use serde_json::{Value, json};

/// One isolated place to run `satchel` in.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project/.agents")).unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        Sandbox { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn default_db(&self) -> PathBuf {
        self.path("data/satchel/satchel.db")
    }

    fn command_with(&self, program: &Path, args: &[&str]) -> Command {
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(self.path("project"))
            .env("XDG_CONFIG_HOME", self.path("config"))
            // Its own project: trusted (tests/trust.rs checks the untrusted path).
            .env("SATCHEL_TRUST_PROJECT", "1")
            .env("XDG_DATA_HOME", self.path("data"))
            .env("SATCHEL_MODEL_FETCH", "never")
            .env("TMPDIR", self.dir.path())
            .env("NO_COLOR", "1")
            .env_remove("SATCHEL_DB")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null());
        command
    }

    fn command(&self, args: &[&str]) -> Command {
        self.command_with(Path::new(env!("CARGO_BIN_EXE_satchel")), args)
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn json_of(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            stdout(output),
            stderr(output)
        )
    })
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

/// Every byte of the database and its sidecar files.
fn database_bytes(db: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    for suffix in ["", "-wal", "-shm"] {
        if let Ok(more) = std::fs::read(format!("{}{suffix}", db.display())) {
            bytes.extend(more);
        }
    }
    bytes
}

const ECHO: &str = r#"{"command": "echo hello"}"#;

#[test]
fn every_tools_call_is_recorded_with_an_audit_row() {
    let sandbox = Sandbox::new();
    let ok = sandbox.run(&["tools", "call", "bash", ECHO]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    assert_eq!(stderr(&ok), "", "recording is silent when it works");
    let failed = sandbox.run(&[
        "tools",
        "call",
        "bash",
        r#"{"command": "true", "timeout": 9999}"#,
    ]);
    assert_eq!(failed.status.code(), Some(1));

    let db = sandbox.default_db();
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(db.parent().unwrap()), 0o700);
    assert_eq!(mode(&db), 0o600);

    let rows = json_of(&sandbox.run(&["audit", "--json"]));
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["source"], "cli");
    assert_eq!(rows[0]["tool"], "bash");
    assert_eq!(rows[0]["input"], json!({"command": "echo hello"}));
    assert_eq!(rows[0]["is_error"], false);
    assert!(rows[0]["tool_call_id"].is_string());
    assert!(rows[0]["duration_us"].as_u64().unwrap() > 0);
    assert_eq!(rows[1]["is_error"], true);
    assert_eq!(rows[1]["error_code"], "INVALID_PARAMS");

    let failed_only = json_of(&sandbox.run(&["audit", "--failed", "--json"]));
    assert_eq!(failed_only.as_array().unwrap().len(), 1);
    let other_tool = json_of(&sandbox.run(&["audit", "--tool", "web", "--json"]));
    assert_eq!(other_tool, json!([]));
    let recent = json_of(&sandbox.run(&["audit", "--since", "1h", "--json"]));
    assert_eq!(recent.as_array().unwrap().len(), 2);
    let future = json_of(&sandbox.run(&["audit", "--since", "2999-01-01T00:00:00Z", "--json"]));
    assert_eq!(future, json!([]));
    let cli = json_of(&sandbox.run(&["audit", "--source", "cli", "--limit", "1", "--json"]));
    assert_eq!(cli.as_array().unwrap().len(), 1);
    assert_eq!(cli[0]["is_error"], true, "the most recent one");

    let table = sandbox.run(&["audit"]);
    let text = stdout(&table);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("STARTED (UTC)"), "{text}");
    assert!(
        lines[1].contains(" cli ") && lines[1].contains(" ok "),
        "{text}"
    );
    assert!(
        lines[1].ends_with(r#"bash(command="echo hello")"#),
        "{text}"
    );
    assert!(lines[2].contains("✗ INVALID_PARAMS"), "{text}");

    let bad = sandbox.run(&["audit", "--since", "yesterday"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("not an age like 30s"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn db_flag_and_satchel_db_choose_the_file() {
    let sandbox = Sandbox::new();
    let flag = sandbox.path("flag/flag.db");
    let env = sandbox.path("env.db");
    let by_flag = sandbox.run(&[
        "--db",
        flag.to_str().unwrap(),
        "tools",
        "call",
        "bash",
        ECHO,
    ]);
    assert!(by_flag.status.success(), "{}", stderr(&by_flag));
    let by_env = sandbox
        .command(&["tools", "call", "bash", ECHO])
        .env("SATCHEL_DB", &env)
        .output()
        .unwrap();
    assert!(by_env.status.success(), "{}", stderr(&by_env));
    // The flag wins over the variable.
    let both = sandbox
        .command(&[
            "--db",
            flag.to_str().unwrap(),
            "tools",
            "call",
            "bash",
            ECHO,
        ])
        .env("SATCHEL_DB", &env)
        .output()
        .unwrap();
    assert!(both.status.success());
    assert!(!sandbox.default_db().exists());
    let count = |db: &Path| {
        json_of(&sandbox.run(&["--db", db.to_str().unwrap(), "audit", "--json"]))
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(count(&flag), 2);
    assert_eq!(count(&env), 1);
}

#[test]
fn secrets_are_redacted_in_the_result_the_spill_file_the_logs_and_the_record() {
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.path("project/.agents/agent.json"),
        // Secret-named variables reach a sandboxed command only when passed.
        r#"{"redaction": {"env": ["DEPLOY_URL"]}, "exec": {"stdoutLimitBytes": 200, "passEnv": ["SANDBOX_API_KEY", "VAULT_PASSWORD"]}}"#,
    )
    .unwrap();
    let api_key = "sk-e2e-0123456789abcdef";
    let deploy = "https://user:pa55word@deploy.example";
    let pin = "4711";
    let output = sandbox
        .command(&[
            "-vv",
            "tools",
            "call",
            "bash",
            // The last word is the key itself: the -vv log prints the
            // parsed command.
            &json!({"command": format!(
                "echo $SANDBOX_API_KEY $DEPLOY_URL $VAULT_PASSWORD; seq 1 300; echo {api_key}"
            )})
            .to_string(),
        ])
        .env("SANDBOX_API_KEY", api_key)
        .env("DEPLOY_URL", deploy)
        .env("VAULT_PASSWORD", pin)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let secrets = [api_key, deploy, pin];
    // The result (what the model reads): redacted before it was cut.
    let result = json_of(&output);
    let text = result["stdout"].as_str().unwrap();
    assert!(
        text.starts_with("[redacted] [redacted] [redacted]\n1\n"),
        "{text}"
    );
    assert!(text.ends_with("300\n[redacted]\n"), "{text}");
    // The spill file with the whole output.
    let response = result.to_string();
    let uid = rustix::process::getuid().as_raw();
    let spill_dir = sandbox.path(&format!("satchel-{uid}/spill"));
    let spill: String = spill_dir
        .read_dir()
        .unwrap_or_else(|error| panic!("no spill directory ({error}): {response}"))
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert!(spill.contains("[redacted]"), "{spill}");
    // The -vv log, and the record.
    let log = stderr(&output);
    assert!(log.contains("DEBUG"), "{log}");
    assert!(
        log.contains("[redacted]"),
        "the log never saw the key: {log}"
    );
    let bytes = database_bytes(&sandbox.default_db());
    assert!(!bytes.is_empty());
    for secret in secrets {
        assert!(!text.contains(secret), "{secret} in the result");
        assert!(!spill.contains(secret), "{secret} in the spill file");
        assert!(!log.contains(secret), "{secret} in the log");
        assert!(!contains(&bytes, secret), "{secret} in the record");
    }
    assert!(contains(&bytes, "[redacted] [redacted] [redacted]"));
}

/// The call was refused before it ran because it could not be put on
/// record; the message says why.
fn assert_not_recorded(output: &Output, cause: &str) -> String {
    assert_eq!(output.status.code(), Some(1), "{}", stderr(output));
    let result = json_of(output);
    assert_eq!(result["error_code"], "NOT_RECORDED", "{result}");
    assert!(result.get("stdout").is_none(), "the call ran: {result}");
    let message = result["error"].as_str().unwrap().to_owned();
    assert!(message.contains("was not run"), "{message}");
    assert!(message.contains(cause), "{message}");
    message
}

#[test]
fn a_corrupt_database_refuses_the_call_before_it_runs() {
    let sandbox = Sandbox::new();
    let db = sandbox.path("corrupt.db");
    let garbage = b"this is not an SQLite database, and it must stay exactly like this".repeat(100);
    std::fs::write(&db, &garbage).unwrap();
    let db_arg = db.to_str().unwrap();

    let output = sandbox.run(&["--db", db_arg, "tools", "call", "bash", ECHO]);
    let message = assert_not_recorded(&output, "left untouched");
    assert!(message.contains(db_arg), "{message}");

    let read = sandbox.run(&["--db", db_arg, "audit"]);
    assert_eq!(read.status.code(), Some(2));
    assert!(stderr(&read).contains(db_arg), "{}", stderr(&read));
    assert!(std::fs::read(&db).unwrap() == garbage, "the file changed");
}

#[test]
fn a_read_only_database_refuses_the_call_before_it_runs() {
    let sandbox = Sandbox::new();
    assert!(
        sandbox
            .run(&["tools", "call", "bash", ECHO])
            .status
            .success()
    );
    let db = sandbox.default_db();
    let before = std::fs::read(&db).unwrap();

    // Root ignores permissions: run a copy of satchel as `nobody` then.
    let as_root = rustix::process::getuid().is_root();
    let program = if as_root {
        let copy = sandbox.path("satchel");
        std::fs::copy(env!("CARGO_BIN_EXE_satchel"), &copy).unwrap();
        // `nobody` must reach the file to find it read-only.
        for path in [sandbox.dir.path(), &copy, &sandbox.path("data")] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        copy
    } else {
        PathBuf::from(env!("CARGO_BIN_EXE_satchel"))
    };
    let run = |args: &[&str]| {
        let mut command = sandbox.command_with(&program, args);
        if as_root {
            command.uid(65534).gid(65534);
        }
        output_retrying_busy(&mut command)
    };
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    let dir = db.parent().unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).unwrap();

    let output = run(&["tools", "call", "bash", r#"{"command": "echo still here"}"#]);
    let read = run(&["audit", "--json"]);
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();

    let message = assert_not_recorded(&output, "read-only");
    assert!(message.contains(&db.display().to_string()), "{message}");
    // Reading still works on a database we may not write.
    assert!(read.status.success(), "{}", stderr(&read));
    assert_eq!(json_of(&read).as_array().unwrap().len(), 1);
    assert!(std::fs::read(&db).unwrap() == before, "the file changed");
}

#[test]
fn a_full_disk_after_the_start_keeps_the_call_on_record_as_unfinished() {
    let sandbox = Sandbox::new();
    assert!(
        sandbox
            .run(&["tools", "call", "bash", ECHO])
            .status
            .success()
    );
    // A file-size limit makes every file behave like a nearly full disk:
    // writes past 36 KiB fail (SIGXFSZ ignored, so they fail with EFBIG).
    let satchel = env!("CARGO_BIN_EXE_satchel");
    let script = format!(
        "trap '' XFSZ; ulimit -f 36; exec '{satchel}' tools call bash '{{\"command\": \"seq 1 2000; seq 1 900 >&2\"}}'"
    );
    let output = sandbox
        .command_with(Path::new("bash"), &["-c", &script])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let results = json_of(&output);
    assert_eq!(results["exit_code"], 0);
    assert!(
        results["stdout"]
            .as_str()
            .unwrap()
            .ends_with("1999\n2000\n")
    );
    let warning = stderr(&output);
    assert!(
        warning.contains("this call ran but its end was not recorded"),
        "{warning}"
    );
    assert!(warning.contains("disk is full"), "{warning}");

    // The failed write left nothing half-written; the earlier record is
    // intact, and the call that ran is on record as begun, never ended.
    let rows = json_of(&sandbox.run(&["audit", "--json"]));
    assert_eq!(rows.as_array().unwrap().len(), 1);
    assert_eq!(rows[0]["input"]["command"], "echo hello");
    let text = stdout(&sandbox.run(&["audit"]));
    assert!(
        text.starts_with("Began and never ended (outcome unknown):\n"),
        "{text}"
    );
    assert!(text.contains("seq 1 2000"), "{text}");
    let unfinished = json_of(&sandbox.run(&["audit", "--unfinished", "--json"]));
    assert_eq!(unfinished.as_array().unwrap().len(), 1, "{unfinished}");
    assert_eq!(unfinished[0]["tool"], "bash");
    assert_eq!(unfinished[0]["source"], "cli");
}

/// Another process holds the database's write lock past the store's wait:
/// the call is refused with that cause and never runs. Reproduces a report:
/// a command ran while its call was never recorded.
#[test]
fn a_locked_database_refuses_the_call_before_it_runs() {
    let sandbox = Sandbox::new();
    assert!(
        sandbox
            .run(&["tools", "call", "bash", ECHO])
            .status
            .success()
    );
    let db = sandbox.default_db();
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let marker = sandbox.path("project/ran.txt");
    let output = sandbox.run(&["tools", "call", "bash", r#"{"command": "touch ran.txt"}"#]);
    holder.execute_batch("ROLLBACK").unwrap();
    assert_not_recorded(&output, "locked");
    assert!(!marker.exists(), "the call ran unrecorded");
    // Once the lock is gone, calls run and are recorded again.
    let output = sandbox.run(&["tools", "call", "bash", r#"{"command": "touch ran.txt"}"#]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(marker.exists());
    assert_eq!(
        json_of(&sandbox.run(&["audit", "--json"]))
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

/// Runs `command`, retrying while its freshly copied program is "busy": a
/// child forked by another test thread may still hold the copy's write
/// descriptor for a moment (ETXTBSY).
fn output_retrying_busy(command: &mut Command) -> Output {
    for _ in 0..100 {
        match command.output() {
            Err(error) if error.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other.unwrap(),
        }
    }
    panic!("the copied program stayed busy");
}

/// Records a small conversation through the store API, as an agent would.
fn seed_conversation(db: &Path) -> String {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(db, StoreOptions::default())
            .await
            .unwrap();
        let conversation = store
            .create_conversation(NewConversation {
                title: Some("Listing the project".into()),
                goal: Some("know what is in the project".into()),
            })
            .await
            .unwrap();
        let id = conversation.id.clone();
        let statement = store
            .add_statement(NewStatement {
                conversation_id: id.clone(),
                objective: Some("list the files".into()),
            })
            .await
            .unwrap();
        let entry = |kind, text: &str, call_id: Option<&str>| NewLogEntry {
            statement_id: Some(statement.id.clone()),
            call_id: call_id.map(str::to_owned),
            ..NewLogEntry::new(&id, kind, text)
        };
        store
            .append_log_entry(entry(LogKind::User, "list the files", None))
            .await
            .unwrap();
        store
            .append_log_entry(entry(LogKind::ToolUse, "$ ls (as shown)", Some("call_1")))
            .await
            .unwrap();
        store
            .append_messages(vec![NewLlmMessage {
                conversation_id: id.clone(),
                statement_id: Some(statement.id.clone()),
                turn: 1,
                role: "user".into(),
                content: json!("list the files"),
            }])
            .await
            .unwrap();
        store
            .record_tool_call(NewToolCall {
                source: AuditSource::Repl,
                caller: None,
                conversation_id: Some(id.clone()),
                statement_id: Some(statement.id.clone()),
                turn: Some(1),
                call: ToolCall {
                    id: "call_1".into(),
                    name: "bash".into(),
                    input: json!({"command": "ls"}),
                },
                output: ToolOutput::success(
                    ToolResults::json(json!({
                        "stdout": "Cargo.toml\nsrc\n", "stderr": "", "exit_code": 0,
                        "truncated": false, "timed_out": false, "duration_ms": 3
                    })),
                    "ran `ls` in 3 ms, exit 0",
                ),
                decision: None,
                started_at: Timestamp::from_millis(1_735_787_045_678),
                finished_at: Timestamp::from_millis(1_735_787_045_681),
                duration_us: 3_000,
            })
            .await
            .unwrap();
        store
            .append_log_entry(entry(LogKind::ToolResult, "(as shown)", Some("call_1")))
            .await
            .unwrap();
        store
            .append_log_entry(entry(
                LogKind::Assistant,
                "A manifest and a source folder.",
                None,
            ))
            .await
            .unwrap();
        store.close().await.unwrap();
        id
    })
}

#[test]
fn log_conversations_and_export_read_a_recorded_conversation() {
    let sandbox = Sandbox::new();
    let id = seed_conversation(&sandbox.default_db());
    let prefix = &id[..id.len() - 4];

    let listed = sandbox.run(&["conversations"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let text = stdout(&listed);
    assert!(text.starts_with("ID "), "{text}");
    assert!(text.lines().nth(1).unwrap().starts_with(&id), "{text}");
    assert!(text.contains("Listing the project"), "{text}");
    let listed = json_of(&sandbox.run(&["conversations", "--json"]));
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["log_entries"], 4);
    assert_eq!(listed[0]["tool_calls"], 1);

    // The latest conversation, with the bash tool's own formatting.
    let log = sandbox.run(&["log"]);
    assert!(log.status.success(), "{}", stderr(&log));
    let text = stdout(&log);
    let body: Vec<&str> = text.lines().skip(3).collect();
    assert_eq!(
        body,
        [
            "",
            "you› list the files",
            "",
            "$ ls",
            "",
            "Cargo.toml",
            "src",
            "exit 0 · 3 ms",
            "",
            "A manifest and a source folder.",
        ],
        "{text}"
    );
    assert!(text.starts_with("Listing the project\n"), "{text}");
    assert!(text.contains("goal: know what is in the project"), "{text}");

    let markdown = stdout(&sandbox.run(&["log", prefix, "--format", "md"]));
    assert!(
        markdown.starts_with("# Listing the project\n"),
        "{markdown}"
    );
    assert!(markdown.contains("```bash\nls\n```"), "{markdown}");
    assert!(markdown.contains("**You:** list the files"), "{markdown}");

    let json = json_of(&sandbox.run(&["log", &id, "--json"]));
    assert_eq!(json["conversation"]["id"], id.as_str());
    let kinds: Vec<&str> = json["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["user", "tool_use", "tool_result", "assistant"]);
    assert_eq!(json["tool_calls"][0]["call_id"], "call_1");

    let missing = sandbox.run(&["log", "ffffffff"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("no conversation matches `ffffffff`"));

    // Export: JSONL to stdout, and the same to a private file.
    let exported = sandbox.run(&["export", prefix]);
    assert!(exported.status.success(), "{}", stderr(&exported));
    let lines: Vec<Value> = stdout(&exported)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "conversation",
            "statement",
            "log_entry",
            "log_entry",
            "log_entry",
            "log_entry",
            "message",
            "tool_call"
        ]
    );
    assert_eq!(lines[1]["objective"], "list the files");
    assert_eq!(
        lines[7]["results"][0]["json"]["stdout"],
        "Cargo.toml\nsrc\n"
    );
    let file = sandbox.path("out.jsonl");
    let to_file = sandbox.run(&["export", &id, "-o", file.to_str().unwrap()]);
    assert!(to_file.status.success(), "{}", stderr(&to_file));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), stdout(&exported));
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn read_commands_on_a_fresh_machine_create_nothing() {
    let sandbox = Sandbox::new();
    assert_eq!(
        json_of(&sandbox.run(&["conversations", "--json"])),
        json!([])
    );
    assert_eq!(json_of(&sandbox.run(&["audit", "--json"])), json!([]));
    let log = sandbox.run(&["log"]);
    assert!(log.status.success());
    assert!(
        stderr(&log).contains("no conversations recorded yet"),
        "{}",
        stderr(&log)
    );
    let export = sandbox.run(&["export", "0196"]);
    assert_eq!(export.status.code(), Some(2));
    assert!(
        !sandbox.path("data").exists(),
        "a read created the database"
    );
}

/// `SATCHEL_DB=postgres://...` records on a real PostgreSQL server (the
/// one `satchel_store::testing` starts for this process) and `satchel db
/// copy` moves the record to a file and back, checked by counts.
#[test]
fn postgres_records_calls_and_db_copy_moves_them_both_ways() {
    let Some(server) = satchel_store::testing::server() else {
        return;
    };
    let sandbox = Sandbox::new();
    let url = server.new_database();
    let on_pg = |args: &[&str]| {
        sandbox
            .command(args)
            .env("SATCHEL_DB", &url)
            .output()
            .unwrap()
    };
    for _ in 0..3 {
        let output = on_pg(&["tools", "call", "bash", ECHO]);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let audit = json_of(&on_pg(&["audit", "--json"]));
    assert_eq!(audit.as_array().unwrap().len(), 3, "{audit}");

    // To a file, read back from it.
    let file = sandbox.path("copy.db");
    let file = file.to_str().unwrap();
    let output = sandbox.run(&["db", "copy", "--from", &url, "--to", file, "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report = json_of(&output);
    let audit_counts = report["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t[0] == "audit")
        .unwrap()
        .clone();
    assert_eq!(audit_counts, json!(["audit", 3, 3]));
    let from_file = json_of(&sandbox.run(&["--db", file, "audit", "--json"]));
    assert_eq!(from_file, audit);

    // And back, into an empty database; a non-empty one is refused.
    let back = server.new_database();
    let output = sandbox.run(&["db", "copy", "--from", file, "--to", &back]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("every table's count matches"));
    let again = sandbox.run(&["db", "copy", "--from", file, "--to", &back]);
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("already holds records"),
        "{}",
        stderr(&again)
    );
    let from_back = json_of(
        &sandbox
            .command(&["audit", "--json"])
            .env("SATCHEL_DB", &back)
            .output()
            .unwrap(),
    );
    assert_eq!(from_back, audit);
}

/// A database URL's password is never shown: not by `doctor`, not by
/// `config show`, not in the error when the server cannot be reached.
#[test]
fn a_database_password_is_never_printed() {
    let sandbox = Sandbox::new();
    let url = "postgres://satchel:hunter2-secret@127.0.0.1:9/records";
    for args in [&["doctor"][..], &["config", "show"], &["audit"]] {
        let output = sandbox
            .command(args)
            .env("SATCHEL_DB", url)
            .output()
            .unwrap();
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            stderr(&output)
        );
        assert!(
            !printed.contains("hunter2"),
            "{args:?} printed the password:\n{printed}"
        );
        assert!(
            printed.contains("127.0.0.1"),
            "{args:?} names the server:\n{printed}"
        );
    }
}
