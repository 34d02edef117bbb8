//! The memory service over a real SQLite file: validation, lifetimes with
//! an injected clock, sessions, the sentinel, forgetting, duplicates,
//! recall with and without the model, concurrent stores.
//!
//! Tests that use the model need its files (`scripts/fetch-memory-model.sh`
//! or `SATCHEL_TEST_MODEL_DIR`) and fail saying so when they are missing.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use pretty_assertions::assert_eq;
use satchel_memory::{
    ListQuery, Memory, MemoryConfig, MemoryError, MemoryLayer, MemoryOptions, MemoryRecord,
    MemorySession, ModelSource, RecallQuery, StoreRequest, Stored, Summarizer,
};
use satchel_store::{ManualClock, MemoryStore, SqliteStore, StoreOptions, Timestamp};

const DAY: Duration = Duration::from_secs(86_400);

struct Setup {
    _dir: tempfile::TempDir,
    store: SqliteStore,
    clock: ManualClock,
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Timestamp::parse_rfc3339("2025-06-10T10:00:00Z").unwrap());
    let store = SqliteStore::open(
        &dir.path().join("satchel.db"),
        StoreOptions {
            clock: Arc::new(clock.clone()),
            ..StoreOptions::default()
        },
    )
    .await
    .unwrap();
    Setup {
        _dir: dir,
        store,
        clock,
    }
}

fn config() -> MemoryConfig {
    let settings: satchel_memory::MemorySettings = serde_json::from_value(serde_json::json!({
        "sessions": {"autoDivide": "daily", "divideAt": "04:00", "timeZone": "Europe/Paris"}
    }))
    .unwrap();
    let (config, warnings) = MemoryConfig::from_settings(settings);
    assert!(warnings.is_empty(), "{warnings:?}");
    config
}

impl Setup {
    fn memory(&self, model: ModelSource) -> Memory {
        self.memory_with(model, None)
    }

    fn memory_with(&self, model: ModelSource, summarizer: Option<Arc<dyn Summarizer>>) -> Memory {
        Memory::new(
            Arc::new(self.store.clone()),
            config(),
            MemoryOptions {
                clock: Arc::new(self.clock.clone()),
                model,
                summarizer,
            },
        )
    }
}

fn with_model() -> ModelSource {
    ModelSource::Loaded(crate::support::embedder())
}

/// A model directory with no model in it: keyword recall only.
fn without_model(dir: &tempfile::TempDir) -> ModelSource {
    ModelSource::Dir(dir.path().join("no-model-here"))
}

fn store(layer: MemoryLayer, content: &str) -> StoreRequest {
    StoreRequest::new(layer, content)
}

fn created(stored: Stored) -> MemoryRecord {
    match stored {
        Stored::Created(memory) => memory,
        other => panic!("expected a new memory, got {other:?}"),
    }
}

async fn recall_texts(memory: &Memory, query: &str) -> Vec<String> {
    memory
        .recall(RecallQuery::new(query))
        .await
        .unwrap()
        .memories
        .into_iter()
        .map(|r| r.memory.content)
        .collect()
}

#[tokio::test]
async fn invalid_input_is_refused_with_a_reason() {
    let setup = setup().await;
    let dir = tempfile::tempdir().unwrap();
    let memory = setup.memory(without_model(&dir));
    let cases = [
        (store(MemoryLayer::Long, "   "), "content must not be empty"),
        (
            StoreRequest {
                category: Some("goal".into()),
                ..store(MemoryLayer::Long, "Finish the thesis")
            },
            "belongs to the `mid` layer",
        ),
        (
            StoreRequest {
                certainty: Some(1.5),
                ..store(MemoryLayer::Long, "x")
            },
            "certainty must be between 0 and 1",
        ),
        (
            store(MemoryLayer::Long, &"x".repeat(5000)),
            "at most 4000 are kept",
        ),
        (
            StoreRequest {
                category: Some("fact".into()),
                ..store(MemoryLayer::Long, "__NEW_SESSION__")
            },
            "with category `system`",
        ),
    ];
    for (request, expected) in cases {
        match memory.store(request).await {
            Err(MemoryError::Invalid(message)) => {
                assert!(message.contains(expected), "{message}")
            }
            other => panic!("expected Invalid containing {expected:?}, got {other:?}"),
        }
    }
    let stored = created(
        memory
            .store(StoreRequest {
                category: Some(" Preference ".into()),
                certainty: Some(0.7),
                ..store(MemoryLayer::Long, "  The user prefers tea  ")
            })
            .await
            .unwrap(),
    );
    assert_eq!(stored.content, "The user prefers tea");
    assert_eq!(stored.category.as_deref(), Some("preference"));
    assert_eq!(stored.certainty, 0.7);
    assert_eq!(stored.expires_at, None);
}

#[tokio::test]
async fn memories_expire_by_layer_and_are_purged() {
    let setup = setup().await;
    let dir = tempfile::tempdir().unwrap();
    let memory = setup.memory(without_model(&dir));
    let start = setup.clock.now_ts();
    let mid = created(
        memory
            .store(store(MemoryLayer::Mid, "Plan the garden renovation"))
            .await
            .unwrap(),
    );
    let short = created(
        memory
            .store(store(MemoryLayer::Short, "Discussed the garden budget"))
            .await
            .unwrap(),
    );
    memory
        .store(store(MemoryLayer::Long, "The garden faces south"))
        .await
        .unwrap();
    assert_eq!(
        mid.expires_at.unwrap().as_millis() - start.as_millis(),
        90 * 86_400_000
    );
    assert_eq!(
        short.expires_at.unwrap().as_millis() - start.as_millis(),
        14 * 86_400_000
    );

    setup.clock.advance(13 * DAY);
    assert_eq!(recall_texts(&memory, "garden").await.len(), 3);
    setup.clock.advance(DAY);
    // Exactly at its expiry the short memory is gone from recall and lists.
    let texts = recall_texts(&memory, "garden").await;
    assert!(!texts.contains(&short.content), "{texts:?}");
    assert_eq!(texts.len(), 2);
    let listed = memory
        .list(
            ListQuery {
                limit: 10,
                ..ListQuery::default()
            },
            None,
        )
        .await
        .unwrap();
    assert_eq!(listed.len(), 2);

    setup.clock.advance(80 * DAY);
    assert_eq!(
        recall_texts(&memory, "garden").await,
        ["The garden faces south"]
    );
    // Still stored until the purge runs.
    assert_eq!(memory.stats().await.unwrap().total, 3);
    assert_eq!(memory.stats().await.unwrap().expired, 2);
    let done = memory.maintain().await.unwrap();
    assert_eq!(done.purged, 2);
    assert_eq!(memory.stats().await.unwrap().total, 1);
}

trait NowTs {
    fn now_ts(&self) -> Timestamp;
}

impl NowTs for ManualClock {
    fn now_ts(&self) -> Timestamp {
        satchel_store::Clock::now(self)
    }
}

#[derive(Default)]
struct FakeSummarizer {
    seen: Mutex<Vec<(String, usize)>>,
}

#[async_trait]
impl Summarizer for FakeSummarizer {
    async fn summarize(
        &self,
        session: &MemorySession,
        memories: &[MemoryRecord],
    ) -> Result<String, String> {
        self.seen
            .lock()
            .unwrap()
            .push((session.id.clone(), memories.len()));
        let texts: Vec<&str> = memories.iter().map(|m| m.content.as_str()).collect();
        Ok(format!("Session summary: {}", texts.join("; ")))
    }
}

#[tokio::test]
async fn sessions_divide_at_the_configured_local_time() {
    let setup = setup().await;
    let dir = tempfile::tempdir().unwrap();
    let summarizer = Arc::new(FakeSummarizer::default());
    let memory = setup.memory_with(without_model(&dir), Some(summarizer.clone()));
    // 03:58 in Paris (CEST, UTC+2) on 11 June.
    setup
        .clock
        .set(Timestamp::parse_rfc3339("2025-06-11T01:58:00Z").unwrap());
    let note = created(
        memory
            .store(store(
                MemoryLayer::Session,
                "We are debugging the login page",
            ))
            .await
            .unwrap(),
    );
    let session = note.session_id.clone().unwrap();
    setup.clock.advance(Duration::from_secs(60)); // 03:59: same session
    assert_eq!(recall_texts(&memory, "login page").await.len(), 1);
    assert_eq!(memory.current_session(None).await.unwrap().id, session);

    setup.clock.advance(Duration::from_secs(60)); // 04:00: the division
    // The session memory is archived; its summary is what is recalled now.
    assert_eq!(
        recall_texts(&memory, "login page").await,
        ["Session summary: We are debugging the login page"]
    );
    let sessions = memory
        .backing_store()
        .sessions("default", 10)
        .await
        .unwrap();
    let ended = sessions.iter().find(|s| s.id == session).unwrap();
    assert_eq!(ended.end_reason.as_deref(), Some("daily"));
    assert_eq!(
        ended.ended_at,
        Some(Timestamp::parse_rfc3339("2025-06-11T02:00:00Z").unwrap())
    );
    // Archived, not deleted; its summary went to the short layer.
    let all = memory
        .list(
            ListQuery {
                limit: 10,
                include_inactive: true,
                ..ListQuery::default()
            },
            None,
        )
        .await
        .unwrap();
    let archived = all.iter().find(|m| m.id == note.id).unwrap();
    assert!(archived.archived_at.is_some());
    assert_eq!(
        summarizer.seen.lock().unwrap().as_slice(),
        [(session.clone(), 1)]
    );
    let summary = all
        .iter()
        .find(|m| m.layer == MemoryLayer::Short)
        .expect("a summary");
    assert_eq!(summary.category.as_deref(), Some("summary"));
    assert_eq!(
        summary.content,
        "Session summary: We are debugging the login page"
    );
    assert_eq!(
        ended.summary_memory_id.as_deref(),
        Some(summary.id.as_str())
    );
    // The next session memory opens a new session.
    let next = created(
        memory
            .store(store(MemoryLayer::Session, "Now the signup page"))
            .await
            .unwrap(),
    );
    assert_ne!(next.session_id.as_deref(), Some(session.as_str()));
}

#[tokio::test]
async fn the_sentinel_starts_a_new_session_and_summaries_are_skipped_without_a_model() {
    let setup = setup().await;
    let dir = tempfile::tempdir().unwrap();
    let memory = setup.memory(without_model(&dir));
    let first = created(
        memory
            .store(StoreRequest {
                conversation_id: Some("conv-1".into()),
                ..store(MemoryLayer::Session, "Reviewing chapter three")
            })
            .await
            .unwrap(),
    );
    // Another conversation's session is not touched.
    let other = created(
        memory
            .store(StoreRequest {
                conversation_id: Some("conv-2".into()),
                ..store(MemoryLayer::Session, "Reviewing chapter nine")
            })
            .await
            .unwrap(),
    );
    let stored = memory
        .store(StoreRequest {
            category: Some("system".into()),
            conversation_id: Some("conv-1".into()),
            ..store(MemoryLayer::Session, "__NEW_SESSION__")
        })
        .await
        .unwrap();
    let Stored::NewSession(change) = stored else {
        panic!("expected a new session, got {stored:?}");
    };
    assert_eq!(
        change.ended.as_ref().unwrap().id,
        first.session_id.clone().unwrap()
    );
    assert_eq!(
        change.ended.as_ref().unwrap().end_reason.as_deref(),
        Some("model")
    );
    assert_eq!(change.archived, 1);
    assert_eq!(change.summary, None);
    assert_eq!(
        change.summary_skipped.as_deref(),
        Some("no model is configured to write it")
    );
    let started = change.started.unwrap();
    assert_ne!(Some(started.id.clone()), first.session_id);
    let conv1 = RecallQuery {
        conversation_id: Some("conv-1".into()),
        ..RecallQuery::new("reviewing chapter")
    };
    assert!(memory.recall(conv1).await.unwrap().memories.is_empty());
    let conv2 = RecallQuery {
        conversation_id: Some("conv-2".into()),
        ..RecallQuery::new("reviewing chapter")
    };
    let found = memory.recall(conv2).await.unwrap().memories;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].memory.id, other.id);
}

#[tokio::test]
async fn forget_removes_a_memory_from_the_table_keywords_and_vectors() {
    let setup = setup().await;
    let memory = setup.memory(with_model());
    let kept = created(
        memory
            .store(store(MemoryLayer::Long, "The user's cat is named Miso"))
            .await
            .unwrap(),
    );
    let doomed = created(
        memory
            .store(store(
                MemoryLayer::Long,
                "The user's passport number is in the blue folder",
            ))
            .await
            .unwrap(),
    );
    assert_eq!(memory.indexed().await, 2);
    // Keyword recall alone (a process without the model) finds it first.
    let keywords = setup.memory(ModelSource::None);
    assert_eq!(
        recall_texts(&keywords, "passport folder").await,
        std::slice::from_ref(&doomed.content)
    );

    memory.forget(&doomed.id).await.unwrap();
    assert!(recall_texts(&keywords, "passport folder").await.is_empty());
    assert_eq!(memory.indexed().await, 1);
    assert!(setup.store.memory(&doomed.id).await.unwrap().is_none());
    // Semantically close queries no longer reach it either.
    let found = recall_texts(&memory, "where are my travel documents").await;
    assert_eq!(found, std::slice::from_ref(&kept.content));
    // A fresh process (a new index loaded from the file) agrees.
    let fresh = setup.memory(with_model());
    fresh.sync_index().await.unwrap();
    assert_eq!(fresh.indexed().await, 1);
    assert!(matches!(
        memory.forget(&doomed.id).await,
        Err(MemoryError::NotFound(_))
    ));
}

#[tokio::test]
async fn near_duplicates_update_the_existing_memory() {
    let setup = setup().await;
    let memory = setup.memory(with_model());
    let first = created(
        memory
            .store(StoreRequest {
                category: Some("relationship".into()),
                certainty: Some(0.6),
                ..store(MemoryLayer::Long, "The user's sister is called Alice.")
            })
            .await
            .unwrap(),
    );
    let again = memory
        .store(StoreRequest {
            certainty: Some(0.9),
            ..store(MemoryLayer::Long, "The user's sister is called Alice")
        })
        .await
        .unwrap();
    let Stored::Updated {
        memory: updated,
        previous_content,
        similarity,
    } = again
    else {
        panic!("expected an update, got {again:?}");
    };
    assert_eq!(updated.id, first.id);
    assert_eq!(previous_content, "The user's sister is called Alice.");
    assert!(similarity >= 0.92, "{similarity}");
    assert_eq!(updated.certainty, 0.9);
    assert_eq!(updated.category.as_deref(), Some("relationship"));
    // Another layer, or another fact, is a new memory.
    created(
        memory
            .store(store(
                MemoryLayer::Short,
                "The user's sister is called Alice",
            ))
            .await
            .unwrap(),
    );
    created(
        memory
            .store(store(MemoryLayer::Long, "The user's brother is called Bob"))
            .await
            .unwrap(),
    );
    assert_eq!(memory.stats().await.unwrap().total, 3);
}

#[tokio::test]
async fn without_the_model_duplicates_are_the_same_text() {
    let setup = setup().await;
    let dir = tempfile::tempdir().unwrap();
    let memory = setup.memory(without_model(&dir));
    let first = created(
        memory
            .store(store(MemoryLayer::Long, "Likes green tea"))
            .await
            .unwrap(),
    );
    match memory
        .store(store(MemoryLayer::Long, "  likes GREEN tea "))
        .await
        .unwrap()
    {
        Stored::Updated {
            memory, similarity, ..
        } => {
            assert_eq!(memory.id, first.id);
            assert_eq!(similarity, 1.0);
        }
        other => panic!("expected an update, got {other:?}"),
    }
    created(
        memory
            .store(store(MemoryLayer::Long, "Likes black tea"))
            .await
            .unwrap(),
    );
    assert_eq!(memory.stats().await.unwrap().without_embedding, 2);
}

/// Issue #22: memories stored before the model was fetched never got
/// embeddings; recall then ranked an unrelated memory first. Backfill
/// embeds them, batch by batch, and is resumable.
#[tokio::test]
async fn memories_stored_before_the_model_get_embeddings_once_it_is_there() {
    let setup = setup().await;
    let dir = tempfile::tempdir().unwrap();
    let before = setup.memory(without_model(&dir));
    for text in [
        "The user's sister is called Alice",
        "Likes black tea",
        "The deploy key rotates every March",
    ] {
        created(before.store(store(MemoryLayer::Long, text)).await.unwrap());
    }
    assert_eq!(before.backfill_embeddings(2).await.unwrap(), 0, "no model");
    assert_eq!(before.stats().await.unwrap().without_embedding, 3);

    let after = setup.memory(with_model());
    assert_eq!(after.backfill_embeddings(2).await.unwrap(), 3);
    assert_eq!(after.stats().await.unwrap().without_embedding, 0);
    assert_eq!(after.backfill_embeddings(2).await.unwrap(), 0, "done");
    let recalled = after
        .recall(RecallQuery::new("favourite hot beverage"))
        .await
        .unwrap();
    assert!(recalled.semantic);
    assert_eq!(recalled.memories[0].memory.content, "Likes black tea");
    assert!(recalled.memories[0].semantic.is_some(), "ranked by meaning");
}

#[tokio::test]
async fn recall_with_the_model_finds_meaning_without_shared_words() {
    let setup = setup().await;
    let memory = setup.memory(with_model());
    for text in [
        "I adopted a beagle puppy last spring",
        "The quarterly report is due on Friday",
        "My favourite food is spicy ramen",
        "We moved to Lyon in 2021",
    ] {
        memory.store(store(MemoryLayer::Long, text)).await.unwrap();
    }
    let recall = memory
        .recall(RecallQuery::new("What pet does the user have?"))
        .await
        .unwrap();
    assert!(recall.semantic);
    assert_eq!(recall.notice, None);
    assert_eq!(
        recall.memories[0].memory.content,
        "I adopted a beagle puppy last spring"
    );
    assert!(recall.memories[0].relevance > recall.memories[1].relevance);
    // Filters: layer, category and time still give results.
    let none = memory
        .recall(RecallQuery {
            layers: vec![MemoryLayer::Mid],
            ..RecallQuery::new("pet")
        })
        .await
        .unwrap();
    assert!(none.memories.is_empty());
    let later = memory
        .recall(RecallQuery {
            since: Some(Timestamp::parse_rfc3339("2030-01-01T00:00:00Z").unwrap()),
            ..RecallQuery::new("pet")
        })
        .await
        .unwrap();
    assert!(later.memories.is_empty());
}

#[tokio::test]
async fn recall_without_the_model_uses_keywords_and_says_so_once() {
    let setup = setup().await;
    let dir = tempfile::tempdir().unwrap();
    let memory = setup.memory(without_model(&dir));
    memory
        .store(store(
            MemoryLayer::Long,
            "I adopted a beagle puppy last spring",
        ))
        .await
        .unwrap();
    memory
        .store(store(
            MemoryLayer::Long,
            "The quarterly report is due on Friday",
        ))
        .await
        .unwrap();
    let first = memory
        .recall(RecallQuery::new("when is the report due?"))
        .await
        .unwrap();
    assert!(!first.semantic);
    let notice = first.notice.expect("a notice the first time");
    assert!(notice.contains("keywords only"), "{notice}");
    assert!(notice.contains("satchel doctor --fix"), "{notice}");
    assert_eq!(first.memories.len(), 1);
    assert_eq!(
        first.memories[0].memory.content,
        "The quarterly report is due on Friday"
    );
    let second = memory.recall(RecallQuery::new("beagle")).await.unwrap();
    assert_eq!(second.notice, None);
    assert_eq!(second.memories.len(), 1);
    // Without shared words nothing is found.
    assert!(
        recall_texts(&memory, "What pet does the user have?")
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn concurrent_stores_all_land_once() {
    let setup = setup().await;
    // Only the same text counts as a duplicate here: these facts are
    // deliberately alike.
    let config = MemoryConfig {
        duplicate_similarity: 1.0,
        ..config()
    };
    let memory = Arc::new(Memory::new(
        Arc::new(setup.store.clone()),
        config,
        MemoryOptions {
            clock: Arc::new(setup.clock.clone()),
            model: with_model(),
            summarizer: None,
        },
    ));
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let memory = Arc::clone(&memory);
            tokio::spawn(async move {
                memory
                    .store(store(
                        MemoryLayer::Long,
                        &format!(
                            "Fact number {i}: the locker code for room {i} is {}",
                            i * 7919
                        ),
                    ))
                    .await
            })
        })
        .collect();
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(created(task.await.unwrap().unwrap()).id);
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 40);
    assert_eq!(memory.stats().await.unwrap().total, 40);
    memory.sync_index().await.unwrap();
    assert_eq!(memory.indexed().await, 40);
    let found = memory
        .recall(RecallQuery::new("locker code for room 17"))
        .await
        .unwrap();
    assert!(
        found.memories[0].memory.content.contains("room 17"),
        "{:?}",
        found.memories[0]
    );
}

#[tokio::test]
async fn a_new_configuration_applies_from_the_next_operation() {
    let setup = setup().await;
    let dir = tempfile::tempdir().unwrap();
    let memory = setup.memory(without_model(&dir));
    let long = "x".repeat(300);
    created(memory.store(store(MemoryLayer::Long, &long)).await.unwrap());
    let before = created(
        memory
            .store(store(MemoryLayer::Mid, "Ship v2"))
            .await
            .unwrap(),
    );
    let lifetime = |m: &MemoryRecord| m.expires_at.unwrap().as_millis() - m.created_at.as_millis();
    assert_eq!(lifetime(&before), 90 * DAY.as_millis() as i64);

    // agent.json now says: shorter memories, mid memories live 30 days.
    let settings: satchel_memory::MemorySettings = serde_json::from_value(serde_json::json!({
        "maxContentChars": 200,
        "ttlDays": {"mid": 30}
    }))
    .unwrap();
    let (changed, warnings) = MemoryConfig::from_settings(settings);
    assert!(warnings.is_empty(), "{warnings:?}");
    memory.reconfigure(changed);

    assert_eq!(memory.config().max_content_chars, 200);
    match memory.store(store(MemoryLayer::Long, &long)).await {
        Err(MemoryError::Invalid(message)) => assert!(message.contains("200"), "{message}"),
        other => panic!("expected the new limit, got {other:?}"),
    }
    let after = created(
        memory
            .store(store(MemoryLayer::Mid, "Ship v3"))
            .await
            .unwrap(),
    );
    assert_eq!(lifetime(&after), 30 * DAY.as_millis() as i64);
}
