//! Full-text search over one conversation's record: what is indexed (log
//! text, tool-call input, results and note; not tool entries, part tags or
//! image data), that no other conversation answers, that the index follows
//! deletions, and that rows written before the index existed are found.

use crate::support::{TempDb, bounded, sample_call};
use pretty_assertions::assert_eq;
use rusqlite::Connection;
use satchel_core::{Content, ToolCall, ToolOutput, ToolResults};
use satchel_store::{
    ConversationSearch, ConversationStore, LogKind, LogStore, NewConversation, NewLogEntry,
    NewToolCall, RedactionConfig, Redactor, SearchHit, StoreOptions, ToolCallStore,
};
use serde_json::json;

/// A conversation and the ids of what was written to it.
struct Written {
    conversation: String,
    user: String,
    thinking: String,
    bash: String,
    text_call: String,
    image_call: String,
}

async fn write_conversation<S: ConversationStore + LogStore + ToolCallStore>(
    store: &S,
    marker: &str,
) -> Written {
    let conversation = store
        .create_conversation(NewConversation::default())
        .await
        .unwrap()
        .id;
    let entry = |kind, text: &str| NewLogEntry::new(&conversation, kind, text);
    let user = store
        .append_log_entry(entry(
            LogKind::User,
            &format!("find the {marker} in the Café logs"),
        ))
        .await
        .unwrap()
        .id;
    let mut thinking = entry(LogKind::Auxiliary, "pondering deeply about zebras");
    thinking.side_conversation = Some("thinking".into());
    let thinking = store.append_log_entry(thinking).await.unwrap().id;
    let call = |id: &str, name: &str, input, output| NewToolCall {
        conversation_id: Some(conversation.clone()),
        call: ToolCall {
            id: id.into(),
            name: name.into(),
            input,
        },
        output,
        ..sample_call(1)
    };
    let ids = store
        .record_tool_calls(vec![
            call(
                "c1",
                "bash",
                json!({"command": "grep -r haystack ."}),
                ToolOutput::success(
                    ToolResults::json(json!({
                        "stdout": format!("first line\nneedle-{marker}\n"),
                        "exit_code": 0
                    })),
                    "ran grep",
                )
                .with_response("output kept whole in spill-file-seven"),
            ),
            call(
                "c2",
                "reader",
                json!({"path": "notes.txt"}),
                ToolOutput::success(ToolResults::Text("plain text result".into()), "read"),
            ),
            call(
                "c3",
                "camera",
                json!({}),
                ToolOutput::success(
                    ToolResults::Parts(vec![
                        Content::Image {
                            mime_type: "image/png".into(),
                            data: "imagedatatoken".into(),
                        },
                        Content::Text {
                            text: "a photo of a lighthouse".into(),
                        },
                    ]),
                    "took a photo",
                ),
            ),
        ])
        .await
        .unwrap();
    // The tool entries repeat the calls for people; they are not indexed.
    for kind in [LogKind::ToolUse, LogKind::ToolResult] {
        let mut tool_entry = entry(kind, &format!("needle-{marker} as shown"));
        tool_entry.call_id = Some("c1".into());
        store.append_log_entry(tool_entry).await.unwrap();
    }
    Written {
        conversation,
        user,
        thinking,
        bash: ids[0].clone(),
        text_call: ids[1].clone(),
        image_call: ids[2].clone(),
    }
}

async fn search<S: ConversationStore>(store: &S, conversation: &str, text: &str) -> Vec<SearchHit> {
    store
        .search_conversation(ConversationSearch {
            conversation_id: conversation.into(),
            text: text.into(),
            limit: 20,
            skip_side_conversations: Vec::new(),
        })
        .await
        .unwrap()
}

backend_test!(
    messages_and_tool_results_of_one_conversation_are_found,
    |db| async {
        let store = db.open().await;
        let a = write_conversation(&store, "alpha").await;
        let b = write_conversation(&store, "alpha").await;
        let id = a.conversation.as_str();

        // A word inside a tool's JSON output (after an escaped newline).
        assert_eq!(
            search(&store, id, "needle").await,
            [SearchHit::ToolCall(a.bash.clone())]
        );
        // Input strings, the note, the tool's name, text results.
        for words in ["haystack", "spill file seven", "bash", "plain result"] {
            let hits = search(&store, id, words).await;
            assert!(!hits.is_empty(), "{words}: nothing found");
        }
        assert_eq!(
            search(&store, id, "plain result").await,
            [SearchHit::ToolCall(a.text_call.clone())]
        );
        // Text parts yes; part tags and image data no.
        assert_eq!(
            search(&store, id, "lighthouse").await,
            [SearchHit::ToolCall(a.image_call.clone())]
        );
        for words in ["imagedatatoken", "png", "json"] {
            assert_eq!(search(&store, id, words).await, [], "{words} was indexed");
        }
        // Log text, case and diacritics aside; every word required; prefixes.
        assert_eq!(
            search(&store, id, "CAFE logs").await,
            [SearchHit::LogEntry(a.user.clone())]
        );
        assert_eq!(search(&store, id, "cafe absent").await, []);
        assert_eq!(
            search(&store, id, "alph*").await.len(),
            2,
            "the user's message and the bash result"
        );
        // Thinking is found unless left out.
        assert_eq!(
            search(&store, id, "zebras").await,
            [SearchHit::LogEntry(a.thinking.clone())]
        );
        let skipped = store
            .search_conversation(ConversationSearch {
                conversation_id: id.into(),
                text: "zebras".into(),
                limit: 20,
                skip_side_conversations: vec!["thinking".into()],
            })
            .await
            .unwrap();
        assert_eq!(skipped, []);
        // The other conversation has the same words; it answers only for itself.
        assert_eq!(
            search(&store, &b.conversation, "needle").await,
            [SearchHit::ToolCall(b.bash.clone())]
        );
        // Query syntax in the words is just words; no words, no hits.
        assert_eq!(search(&store, id, "needle OR NEAR(\"").await, []);
        assert_eq!(search(&store, id, "  * ").await, []);
        // The limit holds.
        let limited = store
            .search_conversation(ConversationSearch {
                conversation_id: id.into(),
                text: "alph*".into(),
                limit: 1,
                skip_side_conversations: Vec::new(),
            })
            .await
            .unwrap();
        assert_eq!(limited.len(), 1);
    }
);

backend_test!(
    secrets_are_not_searchable_because_they_were_never_stored,
    |db| async {
        let redactor = Redactor::from_env(
            &RedactionConfig::default(),
            [("DEPLOY_TOKEN".to_owned(), "hunter2hunter2".to_owned())],
        );
        let store = db
            .open_with(StoreOptions {
                redactor,
                ..StoreOptions::default()
            })
            .await;
        let conversation = store
            .create_conversation(NewConversation::default())
            .await
            .unwrap()
            .id;
        store
            .append_log_entry(NewLogEntry::new(
                &conversation,
                LogKind::Assistant,
                "the token is hunter2hunter2",
            ))
            .await
            .unwrap();
        assert_eq!(search(&store, &conversation, "hunter2hunter2").await, []);
        assert_eq!(
            search(&store, &conversation, "redacted token").await.len(),
            1
        );
    }
);

#[tokio::test]
async fn deleted_rows_leave_the_index() {
    bounded(async {
        let db = TempDb::new();
        let store = db.open().await;
        let a = write_conversation(&store, "gamma").await;
        let b = write_conversation(&store, "gamma").await;
        store.close().await.unwrap();

        let raw = Connection::open(&db.path).unwrap();
        raw.pragma_update(None, "foreign_keys", true).unwrap();
        raw.execute("DELETE FROM conversations WHERE id = ?1", [&a.conversation])
            .unwrap();
        let rows: i64 = raw
            .query_row(
                "SELECT count(*) FROM search_rows WHERE conversation_id = ?1",
                [&a.conversation],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(rows, 0);
        // Two indexed rows per conversation were `needle`s; one is left.
        let matches: i64 = raw
            .query_row(
                "SELECT count(*) FROM search_text WHERE search_text MATCH 'needle'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(matches, 1);
        drop(raw);

        let store = db.open().await;
        assert_eq!(
            search(&store, &b.conversation, "needle").await,
            [SearchHit::ToolCall(b.bash)]
        );
    })
    .await;
}

#[tokio::test]
async fn rows_written_before_the_index_existed_are_indexed_on_upgrade() {
    bounded(async {
        let db = TempDb::new();
        let store = db.open().await;
        let a = write_conversation(&store, "delta").await;
        store.close().await.unwrap();

        // Take the file back to schema version 4 (before the index, with the
        // memories' FTS5 table that version 6 drops), rows kept.
        let raw = Connection::open(&db.path).unwrap();
        raw.execute_batch(
            "DROP TRIGGER search_log_insert;
             DROP TRIGGER search_log_update;
             DROP TRIGGER search_tool_call_insert;
             DROP TRIGGER search_tool_call_update;
             DROP TRIGGER search_rows_delete;
             DROP VIEW search_tool_call_text;
             DROP TABLE search_text;
             DROP TABLE search_rows;
             DROP TABLE call_starts;
             DROP TABLE call_journals;
             DROP TABLE inbox;
             DROP TABLE front_state;
             CREATE VIRTUAL TABLE memories_fts USING fts5 (content, content = 'memories', content_rowid = 'seq');
             CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN SELECT 1; END;
             CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN SELECT 1; END;
             CREATE TRIGGER memories_fts_update AFTER UPDATE OF content ON memories BEGIN SELECT 1; END;
             DELETE FROM schema_version WHERE version > 4;
             PRAGMA user_version = 4;",
        )
        .unwrap();
        drop(raw);

        let store = db.open().await;
        assert_eq!(
            search(&store, &a.conversation, "needle").await,
            [SearchHit::ToolCall(a.bash.clone())]
        );
        assert_eq!(
            search(&store, &a.conversation, "cafe").await,
            [SearchHit::LogEntry(a.user.clone())]
        );
        // And the triggers are back for new rows.
        store
            .append_log_entry(NewLogEntry::new(
                &a.conversation,
                LogKind::Assistant,
                "found it at last",
            ))
            .await
            .unwrap();
        assert_eq!(search(&store, &a.conversation, "last").await.len(), 1);
    })
    .await;
}
