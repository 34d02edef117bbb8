//! What the store's integration tests share: a temporary database, sample
//! records, and a time bound so that a hang fails instead of stalling.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use satchel_core::{ErrorCode, ToolCall, ToolOutput, ToolResults};
use satchel_store::{
    AuditSource, AuditStore, ManualClock, NewToolCall, SqliteStore, StoreOptions, Timestamp,
};
use serde_json::json;

/// Generous bound for any single test.
pub(crate) const TEST_BOUND: Duration = Duration::from_secs(120);

/// 2025-01-02T03:04:05.678Z, where manual clocks start.
pub(crate) const START: Timestamp = Timestamp::from_millis(1_735_787_045_678);

/// A temporary directory holding one database path.
pub(crate) struct TempDb {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) path: PathBuf,
}

impl TempDb {
    pub(crate) fn new() -> TempDb {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("satchel.db");
        TempDb { dir, path }
    }

    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) async fn open(&self) -> SqliteStore {
        SqliteStore::open(&self.path, StoreOptions::default())
            .await
            .unwrap()
    }

    pub(crate) async fn open_with(&self, options: StoreOptions) -> SqliteStore {
        SqliteStore::open(&self.path, options).await.unwrap()
    }
}

/// Options with a manual clock starting at [`START`].
pub(crate) fn manual_options() -> (StoreOptions, ManualClock) {
    let clock = ManualClock::new(START);
    let options = StoreOptions {
        clock: Arc::new(clock.clone()),
        ..StoreOptions::default()
    };
    (options, clock)
}

pub(crate) async fn bounded<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(TEST_BOUND, future)
        .await
        .expect("test exceeded its time bound")
}

/// A successful bash-like call numbered `n`, outside any conversation.
pub(crate) fn sample_call(n: u64) -> NewToolCall {
    NewToolCall {
        source: AuditSource::Cli,
        caller: None,
        conversation_id: None,
        statement_id: None,
        turn: None,
        call: ToolCall {
            id: format!("call-{n}"),
            name: "bash".into(),
            input: json!({"command": format!("echo {n}")}),
        },
        output: ToolOutput::success(
            ToolResults::json(json!({"stdout": format!("{n}\n"), "exit_code": 0})),
            format!("ran `echo {n}` in 1 ms, exit 0"),
        ),
        decision: None,
        started_at: START,
        finished_at: Timestamp::from_millis(START.as_millis() + 1),
        duration_us: 1_000,
    }
}

/// A failed call numbered `n`.
pub(crate) fn failed_call(n: u64, tool: &str) -> NewToolCall {
    NewToolCall {
        output: ToolOutput::error(ErrorCode::ToolTimeout, format!("call {n} timed out")),
        call: ToolCall {
            id: format!("call-{n}"),
            name: tool.into(),
            input: json!({"n": n}),
        },
        ..sample_call(n)
    }
}

/// Which backend a shared test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    /// A file in a temporary directory.
    Sqlite,
    /// A database of its own on the test server.
    Postgres,
}

/// A store location of its own for one test, on either backend.
pub(crate) struct TestDb {
    pub(crate) backend: Backend,
    pub(crate) location: satchel_store::StoreLocation,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    /// A new SQLite file.
    pub(crate) fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("satchel.db");
        TestDb {
            backend: Backend::Sqlite,
            location: satchel_store::StoreLocation::File(path),
            _dir: Some(dir),
        }
    }

    /// A new database on the test server; `None` (after a loud message)
    /// when there is no server and none is required.
    pub(crate) fn postgres() -> Option<TestDb> {
        let server = satchel_store::testing::server()?;
        let url = server.new_database();
        Some(TestDb {
            backend: Backend::Postgres,
            location: satchel_store::StoreLocation::parse(url.as_ref(), []).unwrap(),
            _dir: None,
        })
    }

    /// The location as `--db` would take it (the test server trusts
    /// local connections, so its URLs carry no password).
    pub(crate) fn url_with_password_free(&self) -> String {
        self.location.display()
    }

    pub(crate) async fn open(&self) -> satchel_store::OpenedStore {
        self.open_with(StoreOptions::default()).await
    }

    pub(crate) async fn open_with(&self, options: StoreOptions) -> satchel_store::OpenedStore {
        satchel_store::open(&self.location, options).await.unwrap()
    }
}

/// A test that runs on both backends: `backend_test!(name, |db| async { ... })`
/// makes `name::sqlite` and `name::postgres`, each with its own `db`
/// ([`TestDb`]).
macro_rules! backend_test {
    ($name:ident, |$db:ident| $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[allow(unused_imports)]
            use pretty_assertions::assert_eq;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let $db = crate::support::TestDb::sqlite();
                crate::support::bounded($body).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let Some($db) = crate::support::TestDb::postgres() else {
                    return;
                };
                crate::support::bounded($body).await;
            }
        }
    };
}

/// The ids of the calls begun and not ended, oldest first.
pub(crate) async fn unfinished_ids(store: &SqliteStore) -> Vec<String> {
    store
        .unfinished_calls()
        .await
        .unwrap()
        .into_iter()
        .map(|start| start.id)
        .collect()
}
