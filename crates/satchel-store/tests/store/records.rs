//! The repositories on a real SQLite file: what goes in comes back exactly,
//! in order, linked, filtered and redacted.

use std::sync::Arc;
use std::time::Duration;

use crate::support::{START, TempDb, bounded, failed_call, manual_options, sample_call};
use pretty_assertions::assert_eq;
use satchel_core::{Content, ErrorCode, ToolOutput, ToolResults};
use satchel_store::{
    AuditQuery, AuditSource, AuditStore, ConversationStore, ExportRecord, LogKind, LogStore,
    MessageStore, NewAudit, NewCallStart, NewConversation, NewLlmMessage, NewLogEntry,
    NewStatement, NewToolCall, Redactor, StatementStore, Store, StoreError, StoreOptions,
    Timestamp, ToolCallStore,
};
use serde_json::json;

backend_test!(
    conversations_are_created_listed_found_and_titled,
    |db| async {
        let (options, clock) = manual_options();
        let store = db.open_with(options).await;

        let first = store
            .create_conversation(NewConversation {
                title: Some("first".into()),
                goal: None,
            })
            .await
            .unwrap();
        assert_eq!(first.created_at, START);
        assert_eq!(first.updated_at, START);
        clock.advance(Duration::from_secs(60));
        let second = store
            .create_conversation(NewConversation::default())
            .await
            .unwrap();
        assert!(second.id > first.id, "ids sort by creation time");
        assert_eq!(
            store.conversation(&first.id).await.unwrap(),
            Some(first.clone())
        );
        assert_eq!(store.conversation("nope").await.unwrap(), None);
        assert_eq!(
            store.latest_conversation().await.unwrap().unwrap().id,
            second.id
        );

        // Adding to the first makes it the latest.
        clock.advance(Duration::from_secs(60));
        store
            .append_log_entry(NewLogEntry::new(&first.id, LogKind::User, "hello"))
            .await
            .unwrap();
        let latest = store.latest_conversation().await.unwrap().unwrap();
        assert_eq!(latest.id, first.id);
        assert_eq!(latest.updated_at.as_millis(), START.as_millis() + 120_000);

        let listed = store.list_conversations(10).await.unwrap();
        assert_eq!(
            listed
                .iter()
                .map(|s| (s.conversation.id.as_str(), s.log_entries, s.tool_calls))
                .collect::<Vec<_>>(),
            [(first.id.as_str(), 1, 0), (second.id.as_str(), 0, 0)]
        );
        assert_eq!(store.list_conversations(1).await.unwrap().len(), 1);

        // Prefixes: unique, ambiguous, case-insensitive, and nonsense.
        let found = store.find_conversations(&first.id[..30], 5).await.unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].id, first.id);
        let whole = store.find_conversations(&first.id, 5).await.unwrap();
        assert_eq!(whole.len(), 1);
        let upper = first.id[..30].to_ascii_uppercase();
        assert_eq!(store.find_conversations(&upper, 5).await.unwrap().len(), 1);
        assert_eq!(store.find_conversations("", 5).await.unwrap(), []);
        assert_eq!(store.find_conversations("*", 5).await.unwrap(), []);
        assert_eq!(
            store
                .find_conversations(&first.id[..4], 5)
                .await
                .unwrap()
                .len(),
            2,
            "both ids start with the same time bits"
        );

        store.set_title(&second.id, "renamed".into()).await.unwrap();
        assert_eq!(
            store
                .conversation(&second.id)
                .await
                .unwrap()
                .unwrap()
                .title
                .as_deref(),
            Some("renamed")
        );
        assert!(matches!(
            store.set_title("missing", "x".into()).await,
            Err(StoreError::NotFound {
                kind: "conversation",
                ..
            })
        ));
    }
);

backend_test!(a_goal_is_set_once, |db| async {
    let store = db.open().await;
    let conversation = store
        .create_conversation(NewConversation::default())
        .await
        .unwrap();
    store
        .set_goal(&conversation.id, "ship the store".into())
        .await
        .unwrap();
    let again = store
        .set_goal(&conversation.id, "something else".into())
        .await;
    assert!(
        matches!(&again, Err(StoreError::GoalAlreadySet { id }) if *id == conversation.id),
        "{again:?}"
    );
    assert_eq!(
        store
            .conversation(&conversation.id)
            .await
            .unwrap()
            .unwrap()
            .goal
            .as_deref(),
        Some("ship the store")
    );
    assert!(matches!(
        store.set_goal("missing", "x".into()).await,
        Err(StoreError::NotFound { .. })
    ));
});

backend_test!(
    log_entries_keep_order_links_and_side_conversations,
    |db| async {
        let store = db.open().await;
        let conversation = store
            .create_conversation(NewConversation::default())
            .await
            .unwrap();
        let id = conversation.id.as_str();
        let statement = store
            .add_statement(NewStatement {
                conversation_id: id.into(),
                objective: Some("list files".into()),
            })
            .await
            .unwrap();
        let user = store
            .append_log_entry(NewLogEntry {
                statement_id: Some(statement.id.clone()),
                ..NewLogEntry::new(id, LogKind::User, "what is here?")
            })
            .await
            .unwrap();
        let tool_use = store
            .append_log_entry(NewLogEntry {
                parent_id: Some(user.id.clone()),
                call_id: Some("call_1".into()),
                ..NewLogEntry::new(id, LogKind::ToolUse, "$ ls")
            })
            .await
            .unwrap();
        let side = store
            .append_log_entry(NewLogEntry {
                side_conversation: Some("title".into()),
                ..NewLogEntry::new(id, LogKind::Auxiliary, "Title: listing files")
            })
            .await
            .unwrap();
        for kind in [LogKind::ToolResult, LogKind::Assistant, LogKind::Error] {
            store
                .append_log_entry(NewLogEntry::new(id, kind, kind.as_str()))
                .await
                .unwrap();
        }
        let log = store.log_entries(id).await.unwrap();
        assert_eq!(
            log.iter().map(|e| (e.seq, e.kind)).collect::<Vec<_>>(),
            [
                (1, LogKind::User),
                (2, LogKind::ToolUse),
                (3, LogKind::Auxiliary),
                (4, LogKind::ToolResult),
                (5, LogKind::Assistant),
                (6, LogKind::Error),
            ]
        );
        assert_eq!(log[0], user);
        assert_eq!(log[1], tool_use);
        assert_eq!(log[1].parent_id.as_deref(), Some(user.id.as_str()));
        assert_eq!(log[2], side);
        assert_eq!(log[2].side_conversation.as_deref(), Some("title"));
        assert_eq!(log[0].statement_id.as_deref(), Some(statement.id.as_str()));

        // Links to rows that do not exist are refused, and nothing is stored.
        let dangling = store
            .append_log_entry(NewLogEntry {
                parent_id: Some("no-such-entry".into()),
                ..NewLogEntry::new(id, LogKind::User, "orphan")
            })
            .await;
        assert!(
            matches!(dangling, Err(StoreError::MissingReference { .. })),
            "{dangling:?}"
        );
        let missing = store
            .append_log_entry(NewLogEntry::new("no-such-conversation", LogKind::User, "x"))
            .await;
        assert!(
            matches!(missing, Err(StoreError::NotFound { .. })),
            "{missing:?}"
        );
        assert_eq!(store.log_entries(id).await.unwrap().len(), 6);
    }
);

backend_test!(
    statements_carry_objectives_and_the_last_is_current,
    |db| async {
        let store = db.open().await;
        let conversation = store
            .create_conversation(NewConversation::default())
            .await
            .unwrap();
        let id = conversation.id.as_str();
        assert_eq!(store.current_objective(id).await.unwrap(), None);
        for objective in [Some("first"), Some("second"), None] {
            store
                .add_statement(NewStatement {
                    conversation_id: id.into(),
                    objective: objective.map(str::to_owned),
                })
                .await
                .unwrap();
        }
        let statements = store.statements(id).await.unwrap();
        assert_eq!(
            statements
                .iter()
                .map(|s| (s.seq, s.objective.as_deref()))
                .collect::<Vec<_>>(),
            [(1, Some("first")), (2, Some("second")), (3, None)]
        );
        assert_eq!(
            store.current_objective(id).await.unwrap().as_deref(),
            Some("second")
        );
    }
);

backend_test!(messages_are_stored_exactly_as_sent_per_turn, |db| async {
    let store = db.open().await;
    let conversation = store
        .create_conversation(NewConversation::default())
        .await
        .unwrap();
    let id = conversation.id.clone();
    let message = |turn, role: &str, content| NewLlmMessage {
        conversation_id: id.clone(),
        statement_id: None,
        turn,
        role: role.into(),
        content,
    };
    let content = json!([{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}, {"z": 1, "a": 2}]);
    store
        .append_messages(vec![
            message(1, "system", json!("You are Satchel.")),
            message(1, "user", content.clone()),
        ])
        .await
        .unwrap();
    store
        .append_messages(vec![message(2, "assistant", json!({"tool_calls": []}))])
        .await
        .unwrap();
    let messages = store.messages(&id).await.unwrap();
    assert_eq!(
        messages
            .iter()
            .map(|m| (m.seq, m.turn, m.role.as_str()))
            .collect::<Vec<_>>(),
        [(1, 1, "system"), (2, 1, "user"), (3, 2, "assistant")]
    );
    // Key order and every field survive: exactly what was sent.
    assert_eq!(
        serde_json::to_string(&messages[1].content).unwrap(),
        serde_json::to_string(&content).unwrap()
    );

    // All or none: one bad message rolls the whole batch back.
    let failed = store
        .append_messages(vec![
            message(3, "user", json!("kept?")),
            NewLlmMessage {
                conversation_id: "missing".into(),
                ..message(3, "user", json!("no"))
            },
        ])
        .await;
    assert!(failed.is_err());
    assert_eq!(store.messages(&id).await.unwrap().len(), 3);
});

backend_test!(
    tool_calls_round_trip_exactly_with_their_audit_rows,
    |db| async {
        let store = db.open().await;
        let conversation = store
            .create_conversation(NewConversation::default())
            .await
            .unwrap();
        let mut call = sample_call(1);
        call.conversation_id = Some(conversation.id.clone());
        call.turn = Some(3);
        call.source = AuditSource::Repl;
        call.output = ToolOutput {
            results: ToolResults::Parts(vec![
                Content::Text { text: "a".into() },
                Content::Image {
                    mime_type: "image/png".into(),
                    data: "AAAA".into(),
                },
                Content::Json {
                    json: json!({"k": [1, 2]}),
                },
            ]),
            response: Some("output truncated".into()),
            user_message: "did things".into(),
            is_error: true,
            error_code: Some(ErrorCode::InvalidOutput),
        };
        let id = store.record_tool_call(call.clone()).await.unwrap();
        let stored = store.tool_call(&id).await.unwrap().unwrap();
        assert_eq!(stored.output, call.output);
        assert_eq!(stored.call(), call.call);
        assert_eq!(stored.conversation_id, call.conversation_id);
        assert_eq!(stored.turn, Some(3));
        assert_eq!(
            (stored.started_at, stored.finished_at, stored.duration_us),
            (call.started_at, call.finished_at, call.duration_us)
        );
        assert_eq!(store.tool_calls(&conversation.id).await.unwrap(), [stored]);

        let audit = store.audit(AuditQuery::default()).await.unwrap();
        assert_eq!(audit.len(), 1);
        let row = &audit[0];
        assert_eq!(row.tool_call_id.as_deref(), Some(id.as_str()));
        assert_eq!(row.source, AuditSource::Repl);
        assert_eq!(row.tool, "bash");
        assert_eq!(row.input, call.call.input);
        assert!(row.is_error);
        assert_eq!(row.error_code.as_deref(), Some("INVALID_OUTPUT"));
        assert_eq!(row.decision, None);
        assert_eq!(row.conversation_id, call.conversation_id);

        // A call naming a conversation that does not exist stores nothing.
        let mut orphan = sample_call(2);
        orphan.conversation_id = Some("missing".into());
        assert!(matches!(
            store.record_tool_call(orphan).await,
            Err(StoreError::NotFound { .. })
        ));
        assert_eq!(store.audit(AuditQuery::default()).await.unwrap().len(), 1);
    }
);

backend_test!(a_batch_is_recorded_all_or_none, |db| async {
    let store = db.open().await;
    let ids = store
        .record_tool_calls((0..50).map(sample_call).collect())
        .await
        .unwrap();
    assert_eq!(ids.len(), 50);
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(sorted, ids, "ids increase in recording order");

    let mut batch: Vec<NewToolCall> = (50..60).map(sample_call).collect();
    batch[9].conversation_id = Some("missing".into());
    assert!(store.record_tool_calls(batch).await.is_err());
    assert_eq!(store.audit(AuditQuery::default()).await.unwrap().len(), 50);
});

backend_test!(audit_filters_by_tool_source_time_and_failure, |db| async {
    let store = db.open().await;
    let at = |minutes: i64| Timestamp::from_millis(START.as_millis() + minutes * 60_000);
    let mut calls = Vec::new();
    for (n, minutes) in [(1, 0), (2, 10), (3, 20), (4, 30)] {
        let mut call = if n % 2 == 0 {
            failed_call(n, "web")
        } else {
            sample_call(n)
        };
        call.started_at = at(minutes);
        call.finished_at = at(minutes);
        calls.push(call);
    }
    store.record_tool_calls(calls).await.unwrap();
    store
        .record_audit(NewAudit {
            source: AuditSource::Mcp,
            caller: None,
            tool: "bash".into(),
            input: json!({"command": "rm -rf /"}),
            is_error: true,
            error_code: Some("PERMISSION_DENIED".into()),
            decision: Some("denied".into()),
            conversation_id: None,
            started_at: at(40),
            finished_at: at(40),
            duration_us: 0,
        })
        .await
        .unwrap();

    let tools = |rows: Vec<satchel_store::AuditRecord>| {
        rows.iter()
            .map(|r| format!("{}:{}", r.tool, r.started_at.as_millis() / 60_000 % 100))
            .collect::<Vec<_>>()
    };
    let all = store.audit(AuditQuery::default()).await.unwrap();
    assert_eq!(all.len(), 5);
    assert!(
        all.windows(2).all(|w| w[0].started_at <= w[1].started_at),
        "oldest first"
    );
    assert_eq!(all[4].decision.as_deref(), Some("denied"));
    assert_eq!(all[4].tool_call_id, None);

    let web = store
        .audit(AuditQuery {
            tool: Some("web".into()),
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(web.len(), 2);
    assert!(web.iter().all(|r| r.tool == "web" && r.is_error));

    let since = store
        .audit(AuditQuery {
            since: Some(at(20)),
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(since.len(), 3);

    let failed = store
        .audit(AuditQuery {
            failed_only: true,
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(failed.len(), 3);
    assert!(failed.iter().all(|r| r.is_error));

    let mcp = store
        .audit(AuditQuery {
            source: Some(AuditSource::Mcp),
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(mcp.len(), 1);

    let last_two = store
        .audit(AuditQuery {
            limit: Some(2),
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(tools(last_two.clone()), tools(all[3..].to_vec()));
});

#[tokio::test]
async fn secrets_never_reach_the_file() {
    bounded(async {
        const SECRET: &str = "sk-test-0123456789abcdef";
        let db = TempDb::new();
        let redactor = Redactor::new([("OPENAI_API_KEY".to_owned(), SECRET.to_owned())], 8);
        let store = db
            .open_with(StoreOptions {
                redactor,
                ..StoreOptions::default()
            })
            .await;
        let with = |label: &str| format!("{label} {SECRET} end");
        let conversation = store
            .create_conversation(NewConversation {
                title: Some(with("title")),
                goal: Some(with("goal")),
            })
            .await
            .unwrap();
        let id = conversation.id.clone();
        store.set_title(&id, with("new title")).await.unwrap();
        store
            .add_statement(NewStatement {
                conversation_id: id.clone(),
                objective: Some(with("objective")),
            })
            .await
            .unwrap();
        let entry = store
            .append_log_entry(NewLogEntry {
                side_conversation: Some(with("side")),
                ..NewLogEntry::new(&id, LogKind::User, with("text"))
            })
            .await
            .unwrap();
        assert_eq!(entry.text, "text [redacted] end");
        store
            .append_messages(vec![NewLlmMessage {
                conversation_id: id.clone(),
                statement_id: None,
                turn: 1,
                role: "user".into(),
                content: json!({"text": with("message"), SECRET: 1}),
            }])
            .await
            .unwrap();
        let mut call = sample_call(1);
        call.conversation_id = Some(id.clone());
        call.call.input = json!({"command": with("curl -H")});
        call.output = ToolOutput {
            results: ToolResults::Parts(vec![
                Content::Text {
                    text: with("text part"),
                },
                Content::Json {
                    json: json!({"echo": with("json part")}),
                },
            ]),
            response: Some(with("response")),
            user_message: with("user message"),
            is_error: false,
            error_code: None,
        };
        let call_id = store.record_tool_call(call).await.unwrap();
        let mut text_call = sample_call(2);
        text_call.output.results = ToolResults::Text(with("plain results"));
        store.record_tool_call(text_call).await.unwrap();
        store
            .record_audit(NewAudit {
                source: AuditSource::Mcp,
                caller: None,
                tool: "bash".into(),
                input: json!([with("audit input")]),
                is_error: false,
                error_code: None,
                decision: None,
                conversation_id: None,
                started_at: START,
                finished_at: START,
                duration_us: 0,
            })
            .await
            .unwrap();

        store
            .begin_call(NewCallStart {
                source: AuditSource::Mcp,
                caller: None,
                call: satchel_core::ToolCall {
                    input: json!({"command": with("journaled")}),
                    ..sample_call(3).call
                },
                conversation_id: None,
                started_at: START,
            })
            .await
            .unwrap();
        // The journal of starts, before it is folded.
        let journal = db.path.with_file_name("satchel.db-calls");
        let mut journaled = Vec::new();
        for entry in std::fs::read_dir(&journal).unwrap() {
            journaled.extend(std::fs::read(entry.unwrap().path()).unwrap());
        }
        let journaled = String::from_utf8(journaled).unwrap();
        assert!(
            journaled.contains("journaled [redacted] end"),
            "{journaled}"
        );
        assert!(!journaled.contains(SECRET));

        let stored = store.tool_call(&call_id).await.unwrap().unwrap();
        assert_eq!(stored.output.user_message, "user message [redacted] end");
        assert_eq!(stored.input, json!({"command": "curl -H [redacted] end"}));

        // Not in the reads, and not anywhere in the bytes on disk.
        let dump = store.dump_conversation(&id).await.unwrap().unwrap();
        let exported = serde_json::to_string(&dump.into_records()).unwrap();
        assert!(!exported.contains(SECRET));
        assert!(exported.contains("[redacted]"));
        store.close().await.unwrap();
        let mut bytes = Vec::new();
        for entry in std::fs::read_dir(db.dir()).unwrap() {
            bytes.extend(std::fs::read(entry.unwrap().path()).unwrap());
        }
        assert!(bytes.len() > 4096);
        assert!(
            !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
            "the secret is in the database file"
        );
    })
    .await;
}

backend_test!(a_dump_holds_everything_in_export_order, |db| async {
    let store = db.open().await;
    let conversation = store
        .create_conversation(NewConversation {
            title: Some("t".into()),
            goal: Some("g".into()),
        })
        .await
        .unwrap();
    let id = conversation.id.clone();
    store
        .add_statement(NewStatement {
            conversation_id: id.clone(),
            objective: Some("o".into()),
        })
        .await
        .unwrap();
    store
        .append_log_entry(NewLogEntry::new(&id, LogKind::User, "u"))
        .await
        .unwrap();
    store
        .append_messages(vec![NewLlmMessage {
            conversation_id: id.clone(),
            statement_id: None,
            turn: 1,
            role: "user".into(),
            content: json!("u"),
        }])
        .await
        .unwrap();
    let mut call = sample_call(1);
    call.conversation_id = Some(id.clone());
    store.record_tool_call(call).await.unwrap();
    // A call outside the conversation is not part of it.
    store.record_tool_call(sample_call(2)).await.unwrap();

    let records = store
        .dump_conversation(&id)
        .await
        .unwrap()
        .unwrap()
        .into_records();
    let kinds: Vec<&str> = records
        .iter()
        .map(|record| match record {
            ExportRecord::Conversation(_) => "conversation",
            ExportRecord::Statement(_) => "statement",
            ExportRecord::LogEntry(_) => "log_entry",
            ExportRecord::Message(_) => "message",
            ExportRecord::ToolCall(_) => "tool_call",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "conversation",
            "statement",
            "log_entry",
            "message",
            "tool_call"
        ]
    );
    for record in &records {
        let line = serde_json::to_string(record).unwrap();
        assert!(!line.contains('\n'));
        assert_eq!(
            &serde_json::from_str::<ExportRecord>(&line).unwrap(),
            record
        );
    }
    assert_eq!(store.dump_conversation("missing").await.unwrap(), None);
});

backend_test!(the_traits_work_as_one_object, |db| async {
    let store: Arc<dyn Store> = Arc::new(db.open().await);
    let conversation = store
        .create_conversation(NewConversation::default())
        .await
        .unwrap();
    store
        .append_log_entry(NewLogEntry::new(&conversation.id, LogKind::User, "via dyn"))
        .await
        .unwrap();
    assert_eq!(store.log_entries(&conversation.id).await.unwrap().len(), 1);
});

#[tokio::test]
async fn a_closed_store_refuses_work() {
    bounded(async {
        let db = TempDb::new();
        let store = db.open().await;
        let clone = store.clone();
        store.record_tool_call(sample_call(1)).await.unwrap();
        store.close().await.unwrap();
        assert!(matches!(
            clone.record_tool_call(sample_call(2)).await,
            Err(StoreError::Closed)
        ));
        assert!(matches!(
            clone.audit(AuditQuery::default()).await,
            Err(StoreError::Closed)
        ));
        // Closing checkpointed the WAL: the main file alone holds the data.
        assert!(!db.path.with_extension("db-wal").exists());
        let reopened = db.open().await;
        assert_eq!(
            reopened.audit(AuditQuery::default()).await.unwrap().len(),
            1
        );
    })
    .await;
}
