//! What the store's integration tests share: a temporary database, sample
//! records, and a time bound so that a hang fails instead of stalling.

#![allow(dead_code)] // Each test file uses a different part of this.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use satchel_core::{ErrorCode, ToolCall, ToolOutput, ToolResults};
use satchel_store::{AuditSource, ManualClock, NewToolCall, SqliteStore, StoreOptions, Timestamp};
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
