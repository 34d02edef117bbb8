//! A statement's step written as one: [`RecordsStore::append_records`]
//! keeps a statement with its model calls, log entries and messages, or
//! nothing of them.

use satchel_store::{
    ConversationStore, LlmCallStore, LogKind, LogStore, MessageStore, NewConversation, NewLlmCall,
    NewLlmMessage, NewLogEntry, NewRecords, NewStatement, RecordsStore, Redactor, StatementStore,
    StoreError, StoreOptions, ToolCallStore,
};
use serde_json::json;

fn message(conversation_id: &str, role: &str, text: &str) -> NewLlmMessage {
    NewLlmMessage {
        conversation_id: conversation_id.into(),
        statement_id: None,
        turn: 1,
        role: role.into(),
        content: json!({ "role": role, "content": text }),
    }
}

fn statement_in(conversation_id: &str) -> NewStatement {
    NewStatement {
        conversation_id: conversation_id.into(),
        objective: None,
    }
}

fn model_call(conversation_id: &str) -> NewLlmCall {
    NewLlmCall {
        conversation_id: Some(conversation_id.into()),
        turn: Some(1),
        purpose: "turn".into(),
        model: "m".into(),
        estimate_tokens: 10,
        ..NewLlmCall::default()
    }
}

backend_test!(
    a_statement_and_its_rows_go_in_together_and_belong_to_it,
    |db| async {
        let store = db.open().await;
        let id = store
            .create_conversation(NewConversation::default())
            .await
            .unwrap()
            .id;
        // Rows already there keep the statement's rows after them.
        store
            .append_log_entry(NewLogEntry::new(&id, LogKind::Auxiliary, "before"))
            .await
            .unwrap();
        let begun = store
            .append_records(NewRecords {
                statement: Some(statement_in(&id)),
                log_entries: vec![NewLogEntry::new(&id, LogKind::User, "hello")],
                messages: vec![message(&id, "user", "hello")],
                ..NewRecords::default()
            })
            .await
            .unwrap();
        let statement = begun.statement.clone().unwrap();
        assert_eq!(statement.seq, 1);
        assert_eq!(begun.log_entries[0].seq, 2);
        assert_eq!(begun.messages[0].seq, 1);
        let own = Some(statement.id.clone());
        assert_eq!(begun.log_entries[0].statement_id, own);
        assert_eq!(begun.messages[0].statement_id, own);

        // The answer: a model call, two log entries, a message, in order,
        // with the statement ids the caller gave.
        let answered = store
            .append_records(NewRecords {
                statement: None,
                llm_calls: vec![NewLlmCall {
                    statement_id: own.clone(),
                    ..model_call(&id)
                }],
                log_entries: vec![
                    NewLogEntry {
                        statement_id: own.clone(),
                        ..NewLogEntry::new(&id, LogKind::Auxiliary, "thinking")
                    },
                    NewLogEntry {
                        statement_id: own.clone(),
                        ..NewLogEntry::new(&id, LogKind::Assistant, "hi")
                    },
                ],
                messages: vec![NewLlmMessage {
                    statement_id: own.clone(),
                    ..message(&id, "assistant", "hi")
                }],
            })
            .await
            .unwrap();
        assert_eq!(answered.statement, None);
        assert_eq!(answered.llm_call_ids.len(), 1);

        let log = store.log_entries(&id).await.unwrap();
        assert_eq!(
            log.iter()
                .map(|e| (e.seq, e.kind, e.text.as_str()))
                .collect::<Vec<_>>(),
            [
                (1, LogKind::Auxiliary, "before"),
                (2, LogKind::User, "hello"),
                (3, LogKind::Auxiliary, "thinking"),
                (4, LogKind::Assistant, "hi"),
            ]
        );
        assert_eq!(log[1..], [begun.log_entries, answered.log_entries].concat());
        let history = store.messages(&id).await.unwrap();
        assert_eq!(history, [begun.messages, answered.messages].concat());
        let calls = store.llm_calls(&id).await.unwrap();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].id, answered.llm_call_ids[0]);
        assert_eq!(calls[0].call.statement_id, own);
        assert_eq!(store.statements(&id).await.unwrap(), [statement]);
    }
);

backend_test!(
    a_step_that_fails_part_way_keeps_nothing_of_itself,
    |db| async {
        let store = db.open().await;
        let id = store
            .create_conversation(NewConversation::default())
            .await
            .unwrap()
            .id;
        // The last row names a conversation that does not exist: the
        // statement, the model call and the log entry before it go too.
        let error = store
            .append_records(NewRecords {
                statement: Some(statement_in(&id)),
                llm_calls: vec![model_call(&id)],
                log_entries: vec![NewLogEntry::new(&id, LogKind::User, "hello")],
                messages: vec![message("no-such-conversation", "user", "hello")],
            })
            .await
            .unwrap_err();
        assert!(matches!(error, StoreError::NotFound { .. }), "{error:?}");
        assert_eq!(store.statements(&id).await.unwrap(), []);
        assert_eq!(store.log_entries(&id).await.unwrap(), []);
        assert_eq!(store.messages(&id).await.unwrap(), []);
        assert_eq!(store.llm_calls(&id).await.unwrap(), []);
        // The store goes on: the same step without the bad row is kept.
        store
            .append_records(NewRecords {
                statement: Some(statement_in(&id)),
                log_entries: vec![NewLogEntry::new(&id, LogKind::User, "hello")],
                ..NewRecords::default()
            })
            .await
            .unwrap();
        assert_eq!(store.statements(&id).await.unwrap()[0].seq, 1);
        // Nothing else was touched on the way.
        assert_eq!(store.tool_calls(&id).await.unwrap(), []);
    }
);

backend_test!(a_step_is_redacted_like_each_of_its_rows, |db| async {
    const SECRET: &str = "sk-step-0123456789abcdef";
    let redactor = Redactor::new([("OPENAI_API_KEY".to_owned(), SECRET.to_owned())], 8);
    let store = db
        .open_with(StoreOptions {
            redactor,
            ..StoreOptions::default()
        })
        .await;
    let id = store
        .create_conversation(NewConversation::default())
        .await
        .unwrap()
        .id;
    let said = format!("my key is {SECRET}");
    store
        .append_records(NewRecords {
            statement: Some(NewStatement {
                conversation_id: id.clone(),
                objective: Some(said.clone()),
            }),
            llm_calls: vec![NewLlmCall {
                error: Some(said.clone()),
                ..model_call(&id)
            }],
            log_entries: vec![NewLogEntry::new(&id, LogKind::User, &said)],
            messages: vec![message(&id, "user", &said)],
        })
        .await
        .unwrap();
    let everything = format!(
        "{:?}{:?}{:?}{:?}",
        store.statements(&id).await.unwrap(),
        store.llm_calls(&id).await.unwrap(),
        store.log_entries(&id).await.unwrap(),
        store.messages(&id).await.unwrap(),
    );
    assert!(!everything.contains(SECRET), "{everything}");
    assert!(everything.contains("my key is"), "{everything}");
});
