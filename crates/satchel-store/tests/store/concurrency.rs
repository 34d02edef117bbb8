//! Many writers at once: 100 tasks on one store never see `SQLITE_BUSY`,
//! and two stores on one file (as two Satchel processes would) share it.

use std::collections::BTreeSet;

use crate::support::sample_call;
use satchel_store::{
    AuditQuery, AuditStore, ConversationStore, LogKind, LogStore, NewConversation, NewLogEntry,
    ToolCallStore,
};

const TASKS: u64 = 100;
const WRITES_PER_TASK: u64 = 20;

backend_test!(a_hundred_tasks_write_concurrently, |db| async {
    let store = db.open().await;
    let shared = store
        .create_conversation(NewConversation::default())
        .await
        .unwrap();

    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let store = store.clone();
        let shared_id = shared.id.clone();
        tasks.push(tokio::spawn(async move {
            // Each task has a conversation of its own and also appends
            // to one they all share, interleaving calls and reads.
            let own = store
                .create_conversation(NewConversation {
                    title: Some(format!("task {task}")),
                    goal: None,
                })
                .await?;
            for write in 0..WRITES_PER_TASK {
                let n = task * WRITES_PER_TASK + write;
                store
                    .append_log_entry(NewLogEntry::new(
                        &shared_id,
                        LogKind::User,
                        format!("{task}/{write}"),
                    ))
                    .await?;
                let mut call = sample_call(n);
                call.conversation_id = Some(own.id.clone());
                store.record_tool_call(call).await?;
                if write % 5 == 0 {
                    store.log_entries(&shared_id).await?;
                }
            }
            Ok::<_, satchel_store::StoreError>(own.id)
        }));
    }
    let mut own_ids = BTreeSet::new();
    for task in tasks {
        // Every single write succeeded: no BUSY, no lost reply.
        own_ids.insert(task.await.unwrap().unwrap());
    }
    assert_eq!(own_ids.len() as u64, TASKS);

    // The shared log has every entry once, numbered 1..=N without gaps.
    let log = store.log_entries(&shared.id).await.unwrap();
    let total = TASKS * WRITES_PER_TASK;
    assert_eq!(log.len() as u64, total);
    assert_eq!(
        log.iter().map(|e| u64::from(e.seq)).collect::<Vec<_>>(),
        (1..=total).collect::<Vec<_>>()
    );
    let texts: BTreeSet<&str> = log.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(texts.len() as u64, total);
    // Each task's own entries kept their order within the shared log.
    for task in 0..TASKS {
        let mine: Vec<u64> = log
            .iter()
            .filter_map(|e| {
                let (t, w) = e.text.split_once('/')?;
                (t.parse::<u64>().ok()? == task).then(|| w.parse().ok())?
            })
            .collect();
        assert_eq!(mine, (0..WRITES_PER_TASK).collect::<Vec<_>>());
    }
    for id in &own_ids {
        assert_eq!(
            store.tool_calls(id).await.unwrap().len() as u64,
            WRITES_PER_TASK
        );
    }
    assert_eq!(
        store.audit(AuditQuery::default()).await.unwrap().len() as u64,
        total
    );
});

backend_test!(two_stores_on_one_file_share_it, |db| async {
    let first = db.open().await;
    let second = db.open().await;
    let mut tasks = Vec::new();
    for task in 0..40u64 {
        let store = if task % 2 == 0 {
            first.clone()
        } else {
            second.clone()
        };
        tasks.push(tokio::spawn(async move {
            for write in 0..10 {
                store
                    .record_tool_call(sample_call(task * 10 + write))
                    .await?;
            }
            Ok::<_, satchel_store::StoreError>(())
        }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    // Each store sees the other's commits.
    assert_eq!(first.audit(AuditQuery::default()).await.unwrap().len(), 400);
    assert_eq!(
        second.audit(AuditQuery::default()).await.unwrap().len(),
        400
    );
});
