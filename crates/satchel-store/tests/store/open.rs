//! Opening files: migration from empty and re-open, private permissions,
//! and every file Satchel must refuse (corrupt, foreign, newer) left
//! exactly as it was. Also the read-only mode and a database that is full.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::support::{TempDb, bounded, sample_call};
use pretty_assertions::assert_eq;
use rusqlite::Connection;
use satchel_core::ToolResults;
use satchel_store::{
    APPLICATION_ID, Access, AuditQuery, AuditSource, AuditStore, ConversationStore, NewCallStart,
    NewConversation, SCHEMA_VERSION, SqliteStore, StoreError, StoreOptions, ToolCallStore,
};

async fn open_err(path: &Path, options: StoreOptions) -> StoreError {
    match SqliteStore::open(path, options).await {
        Ok(_) => panic!("{} opened but should not have", path.display()),
        Err(error) => error,
    }
}

fn sidecars(path: &Path) -> Vec<String> {
    ["-wal", "-shm", "-journal"]
        .iter()
        .map(|suffix| format!("{}{suffix}", path.display()))
        .filter(|name| Path::new(name).exists())
        .collect()
}

#[tokio::test]
async fn migrates_from_empty_and_reopens_without_reapplying() {
    bounded(async {
        let db = TempDb::new();
        let store = db.open().await;
        let conversation = store
            .create_conversation(NewConversation {
                title: Some("kept".into()),
                goal: None,
            })
            .await
            .unwrap();
        store.close().await.unwrap();

        let raw = Connection::open(&db.path).unwrap();
        let versions: Vec<(u32, String, i64)> = raw
            .prepare("SELECT version, name, applied_at FROM schema_version")
            .unwrap()
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let applied: Vec<(u32, &str)> = versions
            .iter()
            .map(|(v, name, _)| (*v, name.as_str()))
            .collect();
        assert_eq!(
            applied,
            [
                (1, "initial"),
                (2, "code"),
                (3, "llm_calls"),
                (4, "memory"),
                (5, "conversation_search"),
                (6, "memory_index"),
                (7, "call_starts"),
                (8, "front_ends"),
                (9, "call_starts_unindexed"),
                (10, "call_journals")
            ]
        );
        let pragma = |name: &str| -> String {
            raw.pragma_query_value(None, name, |row| row.get::<_, rusqlite::types::Value>(0))
                .map(|value| match value {
                    rusqlite::types::Value::Integer(n) => n.to_string(),
                    rusqlite::types::Value::Text(text) => text,
                    other => format!("{other:?}"),
                })
                .unwrap()
        };
        assert_eq!(pragma("application_id"), APPLICATION_ID.to_string());
        assert_eq!(pragma("user_version"), SCHEMA_VERSION.to_string());
        assert_eq!(pragma("journal_mode"), "wal");
        drop(raw);

        // Re-open: nothing re-applied, the data is there.
        let store = db.open().await;
        assert_eq!(
            store
                .conversation(&conversation.id)
                .await
                .unwrap()
                .unwrap()
                .title
                .as_deref(),
            Some("kept")
        );
        store.close().await.unwrap();
        let raw = Connection::open(&db.path).unwrap();
        let again: Vec<(u32, i64)> = raw
            .prepare("SELECT version, applied_at FROM schema_version")
            .unwrap()
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let first: Vec<(u32, i64)> = versions.iter().map(|(v, _, at)| (*v, *at)).collect();
        assert_eq!(again, first, "reopening must not reapply migrations");
    })
    .await;
}

#[tokio::test]
async fn an_existing_empty_file_is_migrated() {
    bounded(async {
        let db = TempDb::new();
        std::fs::write(&db.path, b"").unwrap();
        let store = db.open().await;
        store.record_tool_call(sample_call(1)).await.unwrap();
        assert_eq!(store.audit(AuditQuery::default()).await.unwrap().len(), 1);
    })
    .await;
}

#[tokio::test]
async fn directory_and_file_are_private() {
    bounded(async {
        let db = TempDb::new();
        let path = db.dir().join("data/satchel/satchel.db");
        let store = SqliteStore::open(&path, StoreOptions::default())
            .await
            .unwrap();
        store.record_tool_call(sample_call(1)).await.unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&db.dir().join("data")), 0o700);
        assert_eq!(mode(&db.dir().join("data/satchel")), 0o700);
        assert_eq!(mode(&path), 0o600);
        let wal = format!("{}-wal", path.display());
        assert_eq!(
            mode(Path::new(&wal)),
            0o600,
            "SQLite copies the file's mode"
        );
    })
    .await;
}

#[tokio::test]
async fn a_newer_schema_is_refused_and_the_file_left_alone() {
    bounded(async {
        let db = TempDb::new();
        db.open().await.close().await.unwrap();
        {
            let raw = Connection::open(&db.path).unwrap();
            raw.execute(
                "INSERT INTO schema_version (version, name, applied_at) VALUES (?1, 'from the future', 0)",
                [satchel_store::SCHEMA_VERSION + 1],
            )
            .unwrap();
        }
        let before = std::fs::read(&db.path).unwrap();
        for access in [Access::ReadWrite, Access::ReadOnly] {
            let error = open_err(
                &db.path,
                StoreOptions {
                    access,
                    ..StoreOptions::default()
                },
            )
            .await;
            assert!(
                matches!(error, StoreError::NewerSchema { found, known: SCHEMA_VERSION, .. } if found == SCHEMA_VERSION + 1),
                "{error:?}"
            );
            let message = error.to_string();
            assert!(
                message.contains(&format!(
                    "made by a newer Satchel: schema version {}, this build knows up to {SCHEMA_VERSION}",
                    SCHEMA_VERSION + 1
                )),
                "{message}"
            );
            assert!(message.contains(&db.path.display().to_string()), "{message}");
        }
        assert!(std::fs::read(&db.path).unwrap() == before, "the file changed");
    })
    .await;
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_reported_not_overwritten() {
    bounded(async {
        let db = TempDb::new();
        let garbage: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&db.path, &garbage).unwrap();
        for access in [Access::ReadWrite, Access::ReadOnly] {
            let error = open_err(
                &db.path,
                StoreOptions {
                    access,
                    ..StoreOptions::default()
                },
            )
            .await;
            assert!(matches!(error, StoreError::Corrupt { .. }), "{error:?}");
            let message = error.to_string();
            assert!(
                message.contains(&db.path.display().to_string()),
                "{message}"
            );
            assert!(message.contains("left untouched"), "{message}");
        }
        assert!(
            std::fs::read(&db.path).unwrap() == garbage,
            "the file changed"
        );
        assert_eq!(sidecars(&db.path), Vec::<String>::new());
    })
    .await;
}

#[tokio::test]
async fn damaged_pages_are_reported_not_overwritten() {
    bounded(async {
        let db = TempDb::new();
        let store = db.open().await;
        store
            .record_tool_calls((0..200).map(sample_call).collect())
            .await
            .unwrap();
        store.close().await.unwrap();
        // Keep the header page, scribble over every other page.
        let mut bytes = std::fs::read(&db.path).unwrap();
        assert!(bytes.len() > 3 * 4096);
        for (i, byte) in bytes[4096..].iter_mut().enumerate() {
            *byte = (i % 253) as u8;
        }
        std::fs::write(&db.path, &bytes).unwrap();

        let error = match SqliteStore::open(&db.path, StoreOptions::default()).await {
            Err(error) => error,
            Ok(store) => store
                .audit(AuditQuery::default())
                .await
                .expect_err("reading damaged pages must fail"),
        };
        assert!(matches!(error, StoreError::Corrupt { .. }), "{error:?}");
        assert!(
            std::fs::read(&db.path).unwrap() == bytes,
            "the file changed"
        );
    })
    .await;
}

#[tokio::test]
async fn another_programs_database_is_refused() {
    bounded(async {
        let db = TempDb::new();
        {
            let raw = Connection::open(&db.path).unwrap();
            raw.execute_batch("CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('ann');")
                .unwrap();
        }
        let before = std::fs::read(&db.path).unwrap();
        let error = open_err(&db.path, StoreOptions::default()).await;
        assert!(matches!(error, StoreError::NotSatchel { .. }), "{error:?}");
        assert!(std::fs::read(&db.path).unwrap() == before);

        // An empty database stamped by another application is refused too.
        let other = db.dir().join("other.db");
        {
            let raw = Connection::open(&other).unwrap();
            raw.pragma_update(None, "application_id", 42).unwrap();
        }
        let error = open_err(&other, StoreOptions::default()).await;
        assert!(matches!(error, StoreError::NotSatchel { .. }), "{error:?}");
    })
    .await;
}

#[tokio::test]
async fn a_diverging_migration_is_refused() {
    bounded(async {
        let db = TempDb::new();
        db.open().await.close().await.unwrap();
        {
            let raw = Connection::open(&db.path).unwrap();
            raw.execute("UPDATE schema_version SET name = 'something else'", [])
                .unwrap();
        }
        let error = open_err(&db.path, StoreOptions::default()).await;
        assert!(
            matches!(&error, StoreError::SchemaMismatch { version: 1, found, expected, .. }
                if found == "something else" && expected == "initial"),
            "{error:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn read_only_access_reads_and_refuses_writes() {
    bounded(async {
        let db = TempDb::new();
        let store = db.open().await;
        store.record_tool_call(sample_call(1)).await.unwrap();
        store.close().await.unwrap();

        let read_only = StoreOptions {
            access: Access::ReadOnly,
            ..StoreOptions::default()
        };
        let store = SqliteStore::open(&db.path, read_only.clone())
            .await
            .unwrap();
        assert_eq!(store.audit(AuditQuery::default()).await.unwrap().len(), 1);
        let error = store.record_tool_call(sample_call(2)).await.unwrap_err();
        assert!(matches!(error, StoreError::ReadOnly { .. }), "{error:?}");
        assert!(
            error.to_string().contains(&db.path.display().to_string()),
            "{error}"
        );
        // The failure left the store usable for reads.
        assert_eq!(store.audit(AuditQuery::default()).await.unwrap().len(), 1);

        // Read-only never creates or upgrades a file.
        let missing = db.dir().join("missing.db");
        let error = open_err(&missing, read_only.clone()).await;
        assert!(matches!(error, StoreError::CannotOpen { .. }), "{error:?}");
        assert!(!missing.exists());
        let empty = db.dir().join("empty.db");
        std::fs::write(&empty, b"").unwrap();
        let error = open_err(&empty, read_only).await;
        assert!(
            matches!(
                error,
                StoreError::NeedsUpgrade {
                    found: 0,
                    known: SCHEMA_VERSION,
                    ..
                }
            ),
            "{error:?}"
        );
    })
    .await;
}

/// Room for the schema (memory and search indexes included) and a few
/// dozen large calls.
fn limited_to_a_megabyte() -> StoreOptions {
    StoreOptions {
        max_size_bytes: Some(1024 * 1024),
        ..StoreOptions::default()
    }
}

#[tokio::test]
async fn a_full_database_fails_clearly_and_keeps_every_commit() {
    bounded(async {
        let db = TempDb::new();
        let store = db.open_with(limited_to_a_megabyte()).await;
        let big = |n: u64| {
            let mut call = sample_call(n);
            call.output.results = ToolResults::Text(format!("{n}:{}", "x".repeat(8 * 1024)));
            call
        };
        let mut committed = 0;
        let error = loop {
            match store.record_tool_call(big(committed)).await {
                Ok(_) => committed += 1,
                Err(error) => break error,
            }
            assert!(committed < 1000, "the size limit never hit");
        };
        assert!(matches!(error, StoreError::Full { .. }), "{error:?}");
        let message = error.to_string();
        assert!(message.contains("disk is full"), "{message}");
        assert!(
            message.contains(&db.path.display().to_string()),
            "{message}"
        );
        assert!(committed > 5, "{committed}");
        // Every committed call is there with its audit row; the failed one is not.
        let audit = store.audit(AuditQuery::default()).await.unwrap();
        assert_eq!(audit.len() as u64, committed);
        store.close().await.unwrap();

        // Without the limit the same file takes more.
        let store = db.open().await;
        store.record_tool_call(big(committed)).await.unwrap();
        assert_eq!(
            store.audit(AuditQuery::default()).await.unwrap().len() as u64,
            committed + 1
        );
    })
    .await;
}

/// A call's start is journaled, not committed, before the call runs. When
/// the journal's fold fails for want of room, later starts are refused with
/// the same error a write gets, as before the journal, until a fold goes
/// through; the start journaled before is kept and found after reopening.
#[tokio::test]
async fn a_full_database_refuses_calls_until_their_starts_can_be_recorded() {
    bounded(async {
        let db = TempDb::new();
        let store = db.open_with(limited_to_a_megabyte()).await;
        let start = |n: u64| {
            let mut call = sample_call(n).call;
            call.input = serde_json::json!({"command": "x".repeat(64 * 1024)});
            NewCallStart {
                source: AuditSource::Mcp,
                caller: None,
                call,
                conversation_id: None,
                started_at: crate::support::START,
            }
        };
        // Fill the database with starts until a fold fails, then expect the
        // next start to be refused.
        let mut journaled = Vec::new();
        let refused = loop {
            match store.begin_call(start(journaled.len() as u64)).await {
                Ok(id) => journaled.push(id),
                Err(error) => break error,
            }
            // Each start's fold commits with the next write.
            let _ = store.unfinished_calls().await;
            assert!(
                journaled.len() < 100,
                "the size limit never refused a start"
            );
        };
        assert!(matches!(refused, StoreError::Full { .. }), "{refused:?}");
        assert!(refused.to_string().contains("disk is full"), "{refused}");
        // Still refused: the fold is tried again, and fails again.
        let again = store.begin_call(start(1000)).await.unwrap_err();
        assert!(matches!(again, StoreError::Full { .. }), "{again:?}");
        store.close().await.unwrap();
        // The handle holds its journal's lock until it is dropped.
        drop(store);

        // Room again: every start journaled is on record, and calls begin.
        let store = db.open().await;
        let unfinished = crate::support::unfinished_ids(&store).await;
        assert_eq!(unfinished, journaled);
        store.begin_call(start(2000)).await.unwrap();
        store.close().await.unwrap();
    })
    .await;
}
