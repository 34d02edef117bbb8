//! What only a shared server has, against a real PostgreSQL: several
//! processes writing at once, a writer killed with SIGKILL mid-load, a
//! memory stored by one process recalled by another, processes racing to
//! migrate an empty database, a foreign database refused, and `copy`
//! both ways.
//!
//! The processes are this test binary run again with `--exact
//! postgres::child` and variables choosing the child's job; in a normal
//! run `child` does nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use satchel_core::ToolResults;
use satchel_memory::{
    Memory, MemoryConfig, MemoryLayer, MemoryOptions, ModelSource, RecallQuery, StoreRequest,
};
use satchel_store::{
    AuditQuery, AuditStore, CodeQuery, CodeStore, ConversationStore, LlmCallStore, LogKind,
    LogStore, MemoryStore, NewCallStart, NewCodeExecution, NewConversation, NewLlmCall,
    NewLogEntry, NewMemory, NewMemorySession, NewStatement, OpenedStore, StatementStore,
    StoreError, StoreLocation, StoreOptions, SystemClock, ToolCallStore,
};
use serde_json::json;

use crate::support::{TestDb, bounded, sample_call};

const CHILD_MODE: &str = "SATCHEL_PG_TEST_CHILD";
const CHILD_URL: &str = "SATCHEL_PG_TEST_URL";
const CHILD_N: &str = "SATCHEL_PG_TEST_N";

const PROCESSES: usize = 8;
const CALLS_PER_PROCESS: usize = 1000;
const TASKS_PER_PROCESS: usize = 4;

/// Not a test: the body of the child processes.
#[test]
fn child() {
    let Ok(mode) = std::env::var(CHILD_MODE) else {
        return;
    };
    let url = std::env::var(CHILD_URL).unwrap();
    let n: usize = std::env::var(CHILD_N).unwrap().parse().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let location = StoreLocation::parse(url.as_ref(), []).unwrap();
        let store = satchel_store::open(&location, StoreOptions::default())
            .await
            .unwrap();
        match mode.as_str() {
            "open" => println!("OPENED"),
            "calls" => many_calls(&store, n).await,
            "writer" => write_forever(&store).await,
            "memory" => {
                let memory = memory_over(&store);
                memory
                    .store(StoreRequest::new(
                        MemoryLayer::Long,
                        "the lighthouse keeper feeds a ginger cat",
                    ))
                    .await
                    .unwrap();
                println!("STORED");
            }
            other => panic!("unknown child mode {other}"),
        }
        store.close().await.unwrap();
    });
}

fn spawn_child(mode: &str, url: &str, n: usize) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "postgres::child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_MODE, mode)
        .env(CHILD_URL, url)
        .env(CHILD_N, n.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

fn memory_over(store: &OpenedStore) -> Memory {
    Memory::new(
        store.memory_store(),
        MemoryConfig::default(),
        MemoryOptions {
            clock: Arc::new(SystemClock),
            model: ModelSource::None,
            summarizer: None,
        },
    )
}

/// Process `n` records its calls from several tasks at once.
async fn many_calls(store: &OpenedStore, n: usize) {
    let per_task = CALLS_PER_PROCESS / TASKS_PER_PROCESS;
    let mut tasks = Vec::new();
    for task in 0..TASKS_PER_PROCESS {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..per_task {
                let mut call = sample_call(0);
                call.call.id = format!("p{n}-t{task}-{i}");
                store.record_tool_call(call).await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    println!("DONE");
}

/// Writes until killed: single calls and batches of five, printing the
/// call ids of every committed write.
async fn write_forever(store: &OpenedStore) {
    for write in 0u64.. {
        let size = if write % 3 == 0 { 5 } else { 1 };
        let calls: Vec<_> = (0..size)
            .map(|k| {
                let mut call = sample_call(write);
                call.call.id = format!("w{write}-{k}");
                call.call.input = json!({"write": write, "size": size});
                call.output.results = ToolResults::Text("x".repeat(4000));
                call
            })
            .collect();
        let ids: Vec<String> = calls.iter().map(|c| c.call.id.clone()).collect();
        store.record_tool_calls(calls).await.unwrap();
        println!("COMMITTED {}", ids.join(" "));
    }
}

/// Lines a child printed that start with `prefix`, read until it exits
/// or `stop` says enough.
fn read_lines(child: &mut Child, mut stop: impl FnMut(&str) -> bool) -> Vec<String> {
    let stdout = child.stdout.take().unwrap();
    let mut lines = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let done = stop(&line);
        lines.push(line);
        if done {
            break;
        }
    }
    lines
}

fn server_db() -> Option<TestDb> {
    TestDb::postgres()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_processes_record_a_thousand_calls_each_none_lost_or_doubled() {
    let Some(db) = server_db() else { return };
    let url = db.url_with_password_free();
    // Migrated once before the load, so the processes only write.
    db.open().await.close().await.unwrap();
    let started = Instant::now();
    let mut children: Vec<Child> = (0..PROCESSES)
        .map(|n| spawn_child("calls", &url, n))
        .collect();
    for child in &mut children {
        let lines = read_lines(child, |_| false);
        assert!(
            lines.iter().any(|l| l.contains("DONE")),
            "a child failed: {lines:?}"
        );
        assert!(child.wait().unwrap().success());
    }
    let elapsed = started.elapsed();
    let store = db.open().await;
    let rows = store.audit(AuditQuery::default()).await.unwrap();
    assert_eq!(rows.len(), PROCESSES * CALLS_PER_PROCESS);
    let ids: BTreeSet<&str> = rows.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids.len(), rows.len(), "audit ids collided");
    let calls: BTreeSet<String> = rows
        .iter()
        .map(|r| {
            let record = r.tool_call_id.as_deref().unwrap();
            record.to_owned()
        })
        .collect();
    assert_eq!(calls.len(), rows.len(), "each audit row has its own call");
    eprintln!(
        "{} calls from {PROCESSES} processes in {elapsed:?}",
        rows.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_killed_mid_load_leaves_every_commit_and_no_partial_batch() {
    let Some(db) = server_db() else { return };
    let url = db.url_with_password_free();
    db.open().await.close().await.unwrap();
    let mut child = spawn_child("writer", &url, 0);
    let mut committed = 0;
    let lines = read_lines(&mut child, |line| {
        if line.starts_with("COMMITTED") {
            committed += 1;
        }
        committed >= 200
    });
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let reported: BTreeSet<String> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("COMMITTED "))
        .flat_map(|l| l.split(' ').map(str::to_owned))
        .collect();

    let store = db.open().await;
    let rows = store.audit(AuditQuery::default()).await.unwrap();
    let mut per_write: BTreeMap<u64, (u64, usize)> = BTreeMap::new();
    let mut stored = BTreeSet::new();
    for row in &rows {
        let write = row.input["write"].as_u64().unwrap();
        let size = row.input["size"].as_u64().unwrap();
        let entry = per_write.entry(write).or_insert((size, 0));
        entry.1 += 1;
        let call = store
            .tool_call(row.tool_call_id.as_deref().unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(call.output.results, ToolResults::Text("x".repeat(4000)));
        assert!(stored.insert(call.call_id), "a call was stored twice");
    }
    for (write, (size, count)) in &per_write {
        assert_eq!(*size as usize, *count, "write {write} is partial");
    }
    assert!(
        reported.is_subset(&stored),
        "a committed call is missing: {:?}",
        reported.difference(&stored).next()
    );
    // The database takes writes again at once.
    store.record_tool_call(sample_call(1)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_stored_in_one_process_is_recalled_in_another_within_a_second() {
    let Some(db) = server_db() else { return };
    let url = db.url_with_password_free();
    let store = db.open().await;
    let memory = memory_over(&store);
    // The index is built (empty) and listening before the other process writes.
    let before = memory.recall(RecallQuery::new("ginger cat")).await.unwrap();
    assert!(before.memories.is_empty());

    let mut child = spawn_child("memory", &url, 0);
    let lines = read_lines(&mut child, |_| false);
    assert!(child.wait().unwrap().success());
    assert!(lines.iter().any(|l| l.contains("STORED")), "{lines:?}");
    let stored_at = Instant::now();
    loop {
        let found = memory.recall(RecallQuery::new("ginger cat")).await.unwrap();
        if let Some(hit) = found.memories.first() {
            assert_eq!(
                hit.memory.content,
                "the lighthouse keeper feeds a ginger cat"
            );
            break;
        }
        assert!(
            stored_at.elapsed() < Duration::from_secs(1),
            "not recalled within a second"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "recalled {:?} after the other process committed",
        stored_at.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_starting_together_on_an_empty_database_migrate_it_once() {
    let Some(db) = server_db() else { return };
    let url = db.url_with_password_free();
    let mut children: Vec<Child> = (0..4).map(|n| spawn_child("open", &url, n)).collect();
    for child in &mut children {
        let lines = read_lines(child, |_| false);
        assert!(lines.iter().any(|l| l.contains("OPENED")), "{lines:?}");
        assert!(child.wait().unwrap().success());
    }
    let server = satchel_store::testing::server().unwrap();
    let once = format!(
        "DO $$ BEGIN IF (SELECT count(*) FROM satchel_schema_version) <> {} THEN RAISE EXCEPTION 'migrated twice'; END IF; END $$",
        satchel_store::PG_SCHEMA_VERSION
    );
    assert!(server.run_sql(&url, &once));
    let store = db.open().await;
    assert_eq!(store.memory_revision().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_of_another_program_or_a_newer_satchel_is_refused() {
    let Some(db) = server_db() else { return };
    let url = db.url_with_password_free();
    let server = satchel_store::testing::server().unwrap();
    assert!(server.run_sql(&url, "CREATE TABLE invoices (id int)"));
    let error = satchel_store::open(&db.location, StoreOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(error, StoreError::ForeignDatabase { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("invoices"), "{error}");
    assert!(!error.to_string().contains("password"));

    let Some(db) = server_db() else { return };
    let url = db.url_with_password_free();
    db.open().await.close().await.unwrap();
    assert!(server.run_sql(
        &url,
        "INSERT INTO satchel_schema_version VALUES (99, 'future', 0)"
    ));
    let error = satchel_store::open(&db.location, StoreOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(error, StoreError::NewerSchema { found: 99, .. }),
        "{error}"
    );
}

#[tokio::test]
async fn a_server_that_is_not_there_fails_clearly_without_the_password() {
    let location = StoreLocation::parse(
        "postgres://someone:s3cretpass@127.0.0.1:1/nowhere?connect_timeout=2".as_ref(),
        [],
    )
    .unwrap();
    assert_eq!(location.display(), "postgres://someone@127.0.0.1:1/nowhere");
    let error = bounded(satchel_store::open(&location, StoreOptions::default()))
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, StoreError::CannotOpen { .. }), "{text}");
    assert!(!text.contains("s3cretpass"), "{text}");
    // PG* variables fill what the URL leaves out.
    let location = StoreLocation::parse(
        "postgres://".as_ref(),
        [
            ("PGHOST".to_owned(), "db.example".to_owned()),
            ("PGPORT".to_owned(), "6543".to_owned()),
            ("PGUSER".to_owned(), "alice".to_owned()),
            ("PGPASSWORD".to_owned(), "hunter2".to_owned()),
            ("PGDATABASE".to_owned(), "records".to_owned()),
        ],
    )
    .unwrap();
    assert_eq!(
        location.display(),
        "postgres://alice@db.example:6543/records"
    );
    assert!(!format!("{location:?}").contains("hunter2"));
}

/// Writes one of everything into `store`.
async fn fill(store: &OpenedStore) {
    let conversation = store
        .create_conversation(NewConversation {
            title: Some("copied".into()),
            goal: Some("move the record".into()),
        })
        .await
        .unwrap();
    let statement = store
        .add_statement(NewStatement {
            conversation_id: conversation.id.clone(),
            objective: Some("copy it".into()),
        })
        .await
        .unwrap();
    let user = store
        .append_log_entry(NewLogEntry::new(
            &conversation.id,
            LogKind::User,
            "find the Café needle",
        ))
        .await
        .unwrap();
    let mut reply = NewLogEntry::new(&conversation.id, LogKind::Assistant, "found it");
    reply.parent_id = Some(user.id.clone());
    reply.statement_id = Some(statement.id.clone());
    store.append_log_entry(reply).await.unwrap();
    let mut call = sample_call(7);
    call.conversation_id = Some(conversation.id.clone());
    call.statement_id = Some(statement.id.clone());
    store
        .record_tool_calls(vec![call, sample_call(8)])
        .await
        .unwrap();
    store
        .record_execution(NewCodeExecution {
            language: "python".into(),
            runtime: "python3".into(),
            code: "print(1)".into(),
            exit_code: Some(1),
            success: false,
            ..NewCodeExecution::default()
        })
        .await
        .unwrap();
    store
        .record_llm_call(NewLlmCall {
            conversation_id: Some(conversation.id.clone()),
            purpose: "turn".into(),
            model: "m".into(),
            estimate_tokens: 10,
            input_tokens: Some(12),
            ..NewLlmCall::default()
        })
        .await
        .unwrap();
    let session = store
        .start_session(NewMemorySession {
            namespace: "default".into(),
            ..NewMemorySession::default()
        })
        .await
        .unwrap();
    let memories = store
        .insert_memories(vec![
            NewMemory {
                namespace: "default".into(),
                layer: MemoryLayer::Long,
                content: "the cat is ginger".into(),
                category: Some("fact".into()),
                certainty: 0.75,
                session_id: None,
                conversation_id: None,
                created_at: None,
                expires_at: None,
                embedding: Some(vec![0.25, -1.5, 3.0]),
            },
            NewMemory {
                namespace: "default".into(),
                layer: MemoryLayer::Session,
                content: "we are copying".into(),
                category: None,
                certainty: 1.0,
                session_id: Some(session.id.clone()),
                conversation_id: Some(conversation.id.clone()),
                created_at: None,
                expires_at: None,
                embedding: None,
            },
        ])
        .await
        .unwrap();
    store
        .delete_memories("default", vec![memories[1].id.clone()])
        .await
        .unwrap();
    store
        .begin_call(NewCallStart {
            source: satchel_store::AuditSource::Mcp,
            caller: None,
            call: sample_call(9).call,
            conversation_id: None,
            started_at: crate::support::START,
        })
        .await
        .unwrap();
}

/// What must come through a copy unchanged.
async fn everything(store: &OpenedStore) -> String {
    let mut out = Vec::new();
    for summary in store.list_conversations(100).await.unwrap() {
        let dump = store
            .dump_conversation(&summary.conversation.id)
            .await
            .unwrap()
            .unwrap();
        out.push(format!("{dump:?}"));
        out.push(format!(
            "{:?}",
            store.llm_calls(&summary.conversation.id).await.unwrap()
        ));
        let hits = store
            .search_conversation(satchel_store::ConversationSearch {
                conversation_id: summary.conversation.id.clone(),
                text: "cafe".into(),
                limit: 10,
                skip_side_conversations: Vec::new(),
            })
            .await
            .unwrap();
        out.push(format!("{hits:?}"));
    }
    out.push(format!(
        "{:?}",
        store.audit(AuditQuery::default()).await.unwrap()
    ));
    out.push(format!("{:?}", store.unfinished_calls().await.unwrap()));
    out.push(format!(
        "{:?}",
        store.code_executions(CodeQuery::default()).await.unwrap()
    ));
    out.push(format!("{:?}", store.memory_changes(0).await.unwrap()));
    out.push(format!("{:?}", store.memory_revision().await.unwrap()));
    out.push(format!(
        "{:?}",
        store.sessions("default", 10).await.unwrap()
    ));
    out.join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_is_copied_to_postgres_and_back_checked_by_counts() {
    let Some(pg) = server_db() else { return };
    let sqlite = TestDb::sqlite();
    let source = sqlite.open().await;
    fill(&source).await;
    let expected = everything(&source).await;

    let target = pg.open().await;
    let report = satchel_store::copy(&source, &target).await.unwrap();
    assert!(report.tables.iter().all(|(_, s, t)| s == t));
    assert!(report.rows() >= 12, "{report:?}");
    assert_eq!(everything(&target).await, expected);
    // New memories on the target take keys after the copied ones.
    let fresh = target
        .insert_memories(vec![NewMemory {
            namespace: "default".into(),
            layer: MemoryLayer::Long,
            content: "after the copy".into(),
            category: None,
            certainty: 1.0,
            session_id: None,
            conversation_id: None,
            created_at: None,
            expires_at: None,
            embedding: None,
        }])
        .await
        .unwrap();
    let seqs: Vec<i64> = target
        .memory_changes(0)
        .await
        .unwrap()
        .upserts
        .iter()
        .map(|r| r.seq)
        .collect();
    assert!(seqs.iter().all(|seq| *seq <= fresh[0].seq));
    // A second copy into a target that holds records is refused.
    let refused = satchel_store::copy(&source, &target).await.unwrap_err();
    assert!(
        matches!(refused, StoreError::TargetNotEmpty { .. }),
        "{refused}"
    );

    // And back, into a new file.
    target
        .delete_memories("default", vec![fresh[0].id.clone()])
        .await
        .unwrap();
    let back_db = TestDb::sqlite();
    let back = back_db.open().await;
    satchel_store::copy(&target, &back).await.unwrap();
    let expected = everything(&target).await;
    assert_eq!(everything(&back).await, expected);
}
