//! A call's end in one transaction (`finish_calls`: its record, its audit
//! row, its start ended), batches written as one statement on PostgreSQL,
//! and group commits on SQLite's writer: a write that fails in a group
//! takes nothing from the others.

use crate::support::{sample_call, unfinished_ids};
use satchel_store::{
    AuditQuery, AuditSource, AuditStore, ConversationStore, NewCallStart, NewConversation,
    StoreError, ToolCallStore,
};

fn start_of(n: u64) -> NewCallStart {
    NewCallStart {
        source: AuditSource::Mcp,
        caller: Some("client 1".into()),
        call: sample_call(n).call,
        conversation_id: None,
        started_at: crate::support::START,
    }
}

backend_test!(a_call_ends_with_its_record_and_audit_row, |db| async {
    let store = db.open().await;
    let start = store.begin_call(start_of(1)).await.unwrap();
    let other = store.begin_call(start_of(2)).await.unwrap();
    assert_eq!(store.unfinished_calls().await.unwrap().len(), 2);

    let ids = store
        .finish_calls(vec![start.clone()], vec![sample_call(1)])
        .await
        .unwrap();
    assert_eq!(ids.len(), 1);
    let record = store.tool_call(&ids[0]).await.unwrap().unwrap();
    assert_eq!(record.call_id, sample_call(1).call.id);
    let audit = store.audit(AuditQuery::default()).await.unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].tool_call_id.as_deref(), Some(ids[0].as_str()));
    // Only the start that was named is ended.
    let unfinished = store.unfinished_calls().await.unwrap();
    assert_eq!(
        unfinished.iter().map(|c| c.id.clone()).collect::<Vec<_>>(),
        vec![other]
    );
    // Ending nothing and recording nothing is nothing.
    assert_eq!(
        store.finish_calls(Vec::new(), Vec::new()).await.unwrap(),
        Vec::<String>::new()
    );
});

backend_test!(a_call_whose_record_fails_keeps_its_start, |db| async {
    let store = db.open().await;
    let start = store.begin_call(start_of(1)).await.unwrap();
    let mut call = sample_call(1);
    call.conversation_id = Some("no-such-conversation".into());
    let refused = store.finish_calls(vec![start.clone()], vec![call]).await;
    assert!(
        matches!(
            refused,
            Err(StoreError::NotFound { .. } | StoreError::MissingReference { .. })
        ),
        "{refused:?}"
    );
    // Nothing of it was kept: no record, no audit row, the start unfinished.
    assert!(store.audit(AuditQuery::default()).await.unwrap().is_empty());
    let unfinished = store.unfinished_calls().await.unwrap();
    assert_eq!(unfinished.len(), 1);
    assert_eq!(unfinished[0].id, start);
});

backend_test!(
    a_batch_larger_than_a_statement_is_written_whole,
    |db| async {
        let store = db.open().await;
        let conversation = store
            .create_conversation(NewConversation::default())
            .await
            .unwrap();
        let calls: Vec<_> = (0..2500u64)
            .map(|n| {
                let mut call = sample_call(n);
                if n % 3 == 0 {
                    call.conversation_id = Some(conversation.id.clone());
                }
                call
            })
            .collect();
        let ids = store.record_tool_calls(calls).await.unwrap();
        assert_eq!(ids.len(), 2500);
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 2500, "ids are unique");
        assert_eq!(store.tool_calls(&conversation.id).await.unwrap().len(), 834);
        let audit = store.audit(AuditQuery::default()).await.unwrap();
        assert_eq!(audit.len(), 2500);
        // Each audit row names its own record, in order.
        let mut linked: Vec<String> = audit
            .iter()
            .filter_map(|a| a.tool_call_id.clone())
            .collect();
        linked.sort();
        assert_eq!(linked, sorted);
        // A batch with one bad row leaves nothing.
        let mut bad = vec![sample_call(9000), sample_call(9001)];
        bad[1].conversation_id = Some("no-such-conversation".into());
        assert!(store.record_tool_calls(bad).await.is_err());
        assert_eq!(
            store.audit(AuditQuery::default()).await.unwrap().len(),
            2500
        );
    }
);

backend_test!(writes_at_once_fail_alone, |db| async {
    let store = db.open().await;
    let mut tasks = Vec::new();
    for n in 0..200u64 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut call = sample_call(n);
            if n % 7 == 0 {
                call.conversation_id = Some(format!("missing-{n}"));
            }
            store.record_tool_call(call).await
        }));
    }
    let mut written = 0;
    for (n, task) in tasks.into_iter().enumerate() {
        let result = task.await.unwrap();
        assert_eq!(result.is_err(), n % 7 == 0, "call {n}: {result:?}");
        written += usize::from(result.is_ok());
    }
    assert_eq!(
        store.audit(AuditQuery::default()).await.unwrap().len(),
        written
    );
});

/// Options whose held writes wait for a minute: only company or the
/// store's close commits them within a test.
fn holding_long() -> satchel_store::StoreOptions {
    satchel_store::StoreOptions {
        hold: std::time::Duration::from_secs(60),
        ..satchel_store::StoreOptions::default()
    }
}

#[tokio::test]
async fn a_call_end_nobody_waits_for_lets_later_writes_pass_and_commits_at_close() {
    crate::support::bounded(async {
        let db = crate::support::TempDb::new();
        let store = db.open_with(holding_long()).await;
        let first = store.begin_call(start_of(1)).await.unwrap();
        let end = store.finish_calls_later(vec![first.clone()], vec![sample_call(1)]);
        // The next call's start is on record without waiting for that end.
        let second = store.begin_call(start_of(2)).await.unwrap();
        assert!(store.audit(AuditQuery::default()).await.unwrap().is_empty());
        // Asking for the unfinished calls commits what is held first.
        assert_eq!(unfinished_ids(&store).await, vec![second.clone()]);
        assert_eq!(end.await.unwrap().len(), 1);
        let third = store.begin_call(start_of(3)).await.unwrap();
        let end = store.finish_calls_later(vec![third], vec![sample_call(3)]);
        // Closing commits what is held, and its caller hears so.
        store.close().await.unwrap();
        assert_eq!(end.await.unwrap().len(), 1);
        let reopened = db.open().await;
        assert_eq!(unfinished_ids(&reopened).await, vec![second]);
        assert_eq!(
            reopened.audit(AuditQuery::default()).await.unwrap().len(),
            2
        );
    })
    .await;
}

#[tokio::test]
async fn held_call_ends_commit_once_their_time_is_up_or_a_group_is_full() {
    crate::support::bounded(async {
        // A group's worth of ends commits without waiting out the hold.
        let db = crate::support::TempDb::new();
        let store = db.open_with(holding_long()).await;
        let ends: Vec<_> = (0..64u64)
            .map(|n| store.finish_calls_later(Vec::new(), vec![sample_call(n)]))
            .collect();
        for end in ends {
            assert_eq!(end.await.unwrap().len(), 1);
        }
        assert_eq!(store.audit(AuditQuery::default()).await.unwrap().len(), 64);
        store.close().await.unwrap();

        // With the default hold, one end commits on its own, soon.
        let db = crate::support::TempDb::new();
        let store = db.open().await;
        let started = std::time::Instant::now();
        store
            .finish_calls_later(Vec::new(), vec![sample_call(1)])
            .await
            .unwrap();
        assert!(
            started.elapsed() >= satchel_store::StoreOptions::default().hold,
            "it waited for company first"
        );
        assert_eq!(store.audit(AuditQuery::default()).await.unwrap().len(), 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_calls_never_see_an_end_pass_its_start() {
    crate::support::bounded(async {
        // Short holds, so folds and held ends interleave with starts
        // coming from many threads: an end committed before its start was
        // folded would leave that start behind as unfinished.
        let db = crate::support::TempDb::new();
        let store = db
            .open_with(satchel_store::StoreOptions {
                hold: std::time::Duration::from_micros(200),
                ..satchel_store::StoreOptions::default()
            })
            .await;
        let tasks: Vec<_> = (0..200u64)
            .map(|n| {
                let store = store.clone();
                tokio::spawn(async move {
                    let id = store.begin_call(start_of(n)).await.unwrap();
                    tokio::task::yield_now().await;
                    if n % 3 == 0 {
                        store
                            .finish_calls(vec![id], vec![sample_call(n)])
                            .await
                            .unwrap();
                    } else {
                        drop(store.finish_calls_later(vec![id], vec![sample_call(n)]));
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        store.close().await.unwrap();
        let reopened = db.open().await;
        assert!(unfinished_ids(&reopened).await.is_empty());
        assert_eq!(
            reopened
                .audit(AuditQuery {
                    limit: Some(1000),
                    ..AuditQuery::default()
                })
                .await
                .unwrap()
                .len(),
            200
        );
        let journal = db.path.with_file_name("satchel.db-calls");
        assert!(!journal.exists(), "the journal was removed at close");
    })
    .await;
}
