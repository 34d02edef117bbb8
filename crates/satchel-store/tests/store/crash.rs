//! The store against a hostile world, in child processes: a writer killed
//! with SIGKILL in the middle of a stream of writes, and a database the
//! process has no right to write.
//!
//! The children are this test binary run again with `--exact
//! child_process` and an environment variable choosing what the child
//! does; in a normal run, `child_process` does nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::{TempDb, sample_call};
use pretty_assertions::assert_eq;
use rusqlite::Connection;
use satchel_core::ToolResults;
use satchel_store::{Access, AuditQuery, AuditStore, SqliteStore, StoreOptions, ToolCallStore};
use serde_json::{Value, json};

/// Selects the child's job: `writer` or `read-only`.
const CHILD_MODE: &str = "SATCHEL_STORE_TEST_CHILD";
/// The database the child works on.
const CHILD_DB: &str = "SATCHEL_STORE_TEST_DB";
/// The first call number the writer uses.
const CHILD_START: &str = "SATCHEL_STORE_TEST_START";

/// Rows a writer must report committed before it is killed.
const COMMITS_BEFORE_KILL: usize = 300;
/// Every third write is a batch of this many calls in one transaction.
const BATCH: u64 = 5;

/// The results of call `n`: big enough to span overflow pages, and
/// checkable byte for byte.
fn payload(n: u64) -> String {
    let unit = format!("<{n}>");
    unit.repeat(6000 / unit.len())
}

fn writer_call(n: u64, batch: u64, batch_size: u64) -> satchel_store::NewToolCall {
    let mut call = sample_call(n);
    call.call.input = json!({"n": n, "batch": batch, "batch_size": batch_size});
    call.output.results = ToolResults::Text(payload(n));
    call.output.user_message = format!("message {n}");
    call
}

/// Not a test: the body of the child processes.
#[test]
fn child_process() {
    let Ok(mode) = std::env::var(CHILD_MODE) else {
        return;
    };
    let path = PathBuf::from(std::env::var(CHILD_DB).unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    match mode.as_str() {
        "writer" => {
            let start: u64 = std::env::var(CHILD_START).unwrap().parse().unwrap();
            runtime.block_on(write_forever(&path, start));
        }
        "read-only" => runtime.block_on(try_read_only(&path)),
        "begin" => runtime.block_on(begin_and_hang(&path)),
        other => panic!("unknown child mode {other}"),
    }
}

/// Writes calls until killed, printing each committed call number.
async fn write_forever(path: &Path, start: u64) {
    let store = SqliteStore::open(path, StoreOptions::default())
        .await
        .unwrap();
    let mut n = start;
    let mut batch = start;
    loop {
        let size = if batch.is_multiple_of(3) { BATCH } else { 1 };
        let calls: Vec<_> = (n..n + size).map(|k| writer_call(k, batch, size)).collect();
        if size == 1 {
            store
                .record_tool_call(calls.into_iter().next().unwrap())
                .await
                .unwrap();
        } else {
            store.record_tool_calls(calls).await.unwrap();
        }
        for k in n..n + size {
            println!("committed {k}");
        }
        n += size;
        batch += 1;
    }
}

/// Begins three calls and ends two, then waits to be killed: A ends with
/// its record committed, B's end is held (a minute), C is running.
async fn begin_and_hang(path: &Path) {
    let options = StoreOptions {
        hold: Duration::from_secs(60),
        ..StoreOptions::default()
    };
    let store = SqliteStore::open(path, options).await.unwrap();
    let start = |n: u64| satchel_store::NewCallStart {
        source: satchel_store::AuditSource::Mcp,
        caller: None,
        call: sample_call(n).call,
        conversation_id: None,
        started_at: crate::support::START,
    };
    let a = store.begin_call(start(1)).await.unwrap();
    store
        .finish_calls(vec![a], vec![sample_call(1)])
        .await
        .unwrap();
    let b = store.begin_call(start(2)).await.unwrap();
    let _held = store.finish_calls_later(vec![b.clone()], vec![sample_call(2)]);
    let c = store.begin_call(start(3)).await.unwrap();
    // On a line of its own: the test harness has begun one.
    println!("\nbegun {b} {c}");
    std::future::pending::<()>().await;
}

/// Reports what opening a database it may not write does.
async fn try_read_only(path: &Path) {
    match SqliteStore::open(path, StoreOptions::default()).await {
        Ok(_) => println!("open read-write: ok"),
        Err(error) => println!("open read-write: {error:?} | {error}"),
    }
    let options = StoreOptions {
        access: Access::ReadOnly,
        ..StoreOptions::default()
    };
    let store = match SqliteStore::open(path, options).await {
        Ok(store) => store,
        Err(error) => {
            println!("open read-only: {error:?}");
            return;
        }
    };
    match store.audit(AuditQuery::default()).await {
        Ok(rows) => println!("read: {} rows", rows.len()),
        Err(error) => println!("read: {error:?}"),
    }
    match store.record_tool_call(sample_call(99)).await {
        Ok(_) => println!("write: ok"),
        Err(error) => println!("write: {error:?}"),
    }
}

/// This test binary (or `program`, a copy of it) running `child_process`.
fn child(program: Option<&Path>, mode: &str, path: &Path, start: u64) -> Command {
    let exe = std::env::current_exe().unwrap();
    let mut command = Command::new(program.unwrap_or(&exe));
    command
        .args([
            "--exact",
            "crash::child_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_MODE, mode)
        .env(CHILD_DB, path)
        .env(CHILD_START, start.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    command
}

/// Lines of the child's stdout, read on a thread so the parent can time out.
fn lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// One stored call, read straight from the file.
struct Row {
    id: String,
    call_id: String,
    input: Value,
    results: String,
    user_message: String,
}

fn stored_rows(path: &Path) -> (Vec<Row>, BTreeMap<String, usize>) {
    let conn = Connection::open(path).unwrap();
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    let rows = conn
        .prepare("SELECT id, call_id, input, results, user_message FROM tool_calls")
        .unwrap()
        .query_map([], |row| {
            let input: String = row.get(2)?;
            Ok(Row {
                id: row.get(0)?,
                call_id: row.get(1)?,
                input: serde_json::from_str(&input).unwrap(),
                results: row.get(3)?,
                user_message: row.get(4)?,
            })
        })
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let mut audit = BTreeMap::new();
    let linked: Vec<Option<String>> = conn
        .prepare("SELECT tool_call_id FROM audit")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for id in linked {
        *audit
            .entry(id.expect("every audit row links its call"))
            .or_insert(0) += 1;
    }
    (rows, audit)
}

#[test]
fn sigkill_mid_stream_keeps_every_committed_row_and_no_partial_one() {
    let db = TempDb::new();
    let mut reported = BTreeSet::new();
    for round in 0..5u64 {
        let mut writer = child(None, "writer", &db.path, round * 1_000_000)
            .spawn()
            .unwrap();
        let lines = lines(&mut writer);
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut this_round = 0;
        while this_round < COMMITS_BEFORE_KILL {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = lines.recv_timeout(left).unwrap_or_else(|_| {
                panic!("round {round}: the writer stalled after {this_round} commits")
            });
            if let Some(n) = line.strip_prefix("committed ") {
                reported.insert(n.parse::<u64>().unwrap());
                this_round += 1;
            }
        }
        writer.kill().unwrap(); // SIGKILL, while it keeps writing.
        writer.wait().unwrap();
        // Commits it printed between our last read and its death count too.
        while let Ok(line) = lines.recv_timeout(Duration::from_secs(5)) {
            if let Some(n) = line.strip_prefix("committed ") {
                reported.insert(n.parse::<u64>().unwrap());
            }
        }

        let (rows, audit) = stored_rows(&db.path);
        let mut stored = BTreeSet::new();
        let mut batches: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        for row in &rows {
            let n = row.input["n"].as_u64().unwrap();
            // Complete rows only: every column is what the writer wrote.
            assert_eq!(row.call_id, format!("call-{n}"));
            assert_eq!(
                serde_json::from_str::<ToolResults>(&row.results).unwrap(),
                ToolResults::Text(payload(n)),
                "call {n} has partial results"
            );
            assert_eq!(row.user_message, format!("message {n}"));
            assert_eq!(audit.get(&row.id), Some(&1), "call {n} lacks its audit row");
            let entry = batches
                .entry(row.input["batch"].as_u64().unwrap())
                .or_insert((row.input["batch_size"].as_u64().unwrap(), 0));
            entry.1 += 1;
            stored.insert(n);
        }
        assert_eq!(audit.values().sum::<usize>(), rows.len());
        for (batch, (size, found)) in &batches {
            assert_eq!(size, found, "batch {batch} is partly stored");
        }
        let missing: Vec<_> = reported.difference(&stored).collect();
        assert!(
            missing.is_empty(),
            "round {round}: committed but lost: {missing:?}"
        );
        // Rows committed but killed before the child printed them (or
        // printed but not yet read) may be there too; nothing else may:
        // each round's calls are stored as one unbroken run from its start,
        // since the child commits them in order. (A bound on how many such
        // rows there are depended on scheduling and failed under load.)
        assert!(stored.len() >= reported.len());
        for r in 0..=round {
            let start = r * 1_000_000;
            let run: Vec<u64> = stored.range(start..start + 1_000_000).copied().collect();
            let expected: Vec<u64> = (start..start + run.len() as u64).collect();
            assert_eq!(run, expected, "round {r}: stored calls have a gap");
        }
    }
}

#[test]
fn a_call_begun_by_a_killed_process_is_on_record_as_unfinished() {
    let db = TempDb::new();
    let mut child = KillOnDrop(child(None, "begin", &db.path, 0).spawn().unwrap());
    let lines = lines(&mut child.0);
    let begun = loop {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the child began its calls");
        if let Some(ids) = line.strip_prefix("begun ") {
            break ids.split(' ').map(str::to_owned).collect::<Vec<_>>();
        }
    };
    // Its starts are in its journal only: nothing was committed since A.
    let journal = db.path.with_file_name("satchel.db-calls");
    assert!(std::fs::read_dir(&journal).unwrap().count() >= 2);
    child.0.kill().unwrap(); // SIGKILL: the held end and the journal stay.
    child.0.wait().unwrap();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(&db.path, StoreOptions::default())
            .await
            .unwrap();
        let unfinished = crate::support::unfinished_ids(&store).await;
        // B's end was held when it died; C never ended. A ended on record.
        assert_eq!(unfinished, begun);
        assert_eq!(store.audit(AuditQuery::default()).await.unwrap().len(), 1);
        // The dead journal was folded and removed; a reader makes none.
        assert_eq!(std::fs::read_dir(&journal).unwrap().count(), 0);
        store.close().await.unwrap();

        // Opening again adds nothing twice.
        let store = SqliteStore::open(&db.path, StoreOptions::default())
            .await
            .unwrap();
        assert_eq!(store.unfinished_calls().await.unwrap().len(), 2);
    });
}

/// A child killed however the test ends.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A migrated database beside the journal of a process gone, owner
/// `dead` (its lock file, unlocked, and no generation yet); returns the
/// journal's directory.
fn dead_journal(db: &TempDb, runtime: &tokio::runtime::Runtime) -> PathBuf {
    runtime.block_on(async { db.open().await.close().await.unwrap() });
    let journal = db.path.with_file_name("satchel.db-calls");
    std::fs::create_dir_all(&journal).unwrap();
    std::fs::write(journal.join("dead.lock"), "").unwrap();
    journal
}

#[test]
fn a_journal_left_after_its_fold_is_not_folded_again() {
    // A process killed between committing a fold and removing the file:
    // the file is there, and the database says its generation is folded.
    let db = TempDb::new();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let journal = dead_journal(&db, &runtime);
    let entry = |id: &str| {
        json!({"id": id, "source": "mcp", "tool": "bash", "call_id": "c",
               "input": "{}", "started_at": 1})
        .to_string()
    };
    std::fs::write(journal.join("dead.1"), entry("folded-and-ended") + "\n").unwrap();
    // The second generation was not folded; its last line was cut short.
    std::fs::write(
        journal.join("dead.2"),
        entry("running") + "\n" + &entry("cut")[..20],
    )
    .unwrap();
    let raw = Connection::open(&db.path).unwrap();
    raw.execute(
        "INSERT INTO call_journals (owner, folded) VALUES ('dead', 1)",
        [],
    )
    .unwrap();
    drop(raw);
    runtime.block_on(async {
        let store = db.open().await;
        let unfinished = crate::support::unfinished_ids(&store).await;
        assert_eq!(unfinished, vec!["running".to_owned()]);
        store.close().await.unwrap();
    });
    assert_eq!(std::fs::read_dir(&journal).unwrap().count(), 0);
    let raw = Connection::open(&db.path).unwrap();
    let left: i64 = raw
        .query_row("SELECT count(*) FROM call_journals", [], |row| row.get(0))
        .unwrap();
    assert_eq!(left, 1, "kept until a later open finds its files gone");
}

/// Makes `path` unwritable for the child: permissions, and when the tests
/// run as root (whom permissions do not stop), a child running as nobody.
#[test]
fn a_database_the_process_cannot_write_gives_a_clear_error() {
    let db = TempDb::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = db.open().await;
        store
            .record_tool_calls((0..3).map(sample_call).collect())
            .await
            .unwrap();
        store.close().await.unwrap();
    });
    let data = db.dir().join("data");
    std::fs::create_dir(&data).unwrap();
    let path = data.join("satchel.db");
    std::fs::rename(&db.path, &path).unwrap();
    let before = std::fs::read(&path).unwrap();

    let command = if rustix::process::getuid().is_root() {
        // Root ignores permissions: run a copy of this binary (the original
        // may sit where nobody cannot reach) as the unprivileged `nobody`.
        let exe = db.dir().join("child-test-binary");
        std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(db.dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut command = child(Some(&exe), "read-only", &path, 0);
        command.uid(65534).gid(65534);
        command
    } else {
        child(None, "read-only", &path, 0)
    };
    let mut command = command;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o555)).unwrap();
    // A child forked by another test thread may hold the fresh copy's write
    // descriptor for a moment (ETXTBSY): retry.
    let mut attempts = 0;
    let output = loop {
        match command.output() {
            Err(error)
                if error.kind() == std::io::ErrorKind::ExecutableFileBusy && attempts < 100 =>
            {
                attempts += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            other => break other.unwrap(),
        }
    };
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    // libtest prints `test crash::child_process ... ` before the child's first line.
    let report: Vec<&str> = stdout
        .lines()
        .filter_map(|line| {
            ["open ", "read: ", "write: "]
                .iter()
                .filter_map(|marker| line.find(marker))
                .min()
                .map(|at| &line[at..])
        })
        .collect();
    assert_eq!(report.len(), 3, "{stdout}");
    // Opening for writing says which file and why, ...
    assert!(
        report[0].starts_with("open read-write: ReadOnly {"),
        "{stdout}"
    );
    assert!(
        report[0].contains(&format!("cannot write to `{}`", path.display())),
        "{stdout}"
    );
    // ... opening read-only still reads, and a write fails cleanly.
    assert_eq!(report[1], "read: 3 rows", "{stdout}");
    assert!(report[2].starts_with("write: ReadOnly {"), "{stdout}");
    assert!(std::fs::read(&path).unwrap() == before, "the file changed");
}

#[test]
fn a_dead_journal_that_cannot_be_folded_does_not_keep_the_record_from_opening() {
    // A fold can fail (a full database; here a generation that cannot be
    // read): the store still opens, and the journal waits.
    let db = TempDb::new();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let journal = dead_journal(&db, &runtime);
    std::fs::create_dir(journal.join("dead.1")).unwrap();
    runtime.block_on(async {
        let store = db.open().await;
        assert!(store.unfinished_calls().await.unwrap().is_empty());
        store.close().await.unwrap();
    });
    assert!(journal.join("dead.1").exists());
}
