//! The `memory` tool through the built-in registry: validation by its
//! schema, every action, and a clear error when no memory is available.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use satchel_builtins::memory::{MemoryHandle, OpenMemory};
use satchel_builtins::{BuiltinDeps, builtin_registry, builtin_tools};
use satchel_core::{ErrorCode, ToolCall, ToolOutput};
use satchel_memory::{Memory, MemoryConfig, MemoryOptions, ModelSource};
use satchel_store::{SqliteStore, StoreOptions, SystemClock};
use satchel_tools::{Registry, ToolContext, ToolsConfig};
use serde_json::{Value, json};

async fn call(registry: &Registry, ctx: &ToolContext, input: Value) -> ToolOutput {
    registry
        .call(
            &ToolCall {
                id: "call-1".into(),
                name: "memory".into(),
                input,
            },
            ctx,
        )
        .await
}

fn results(output: &ToolOutput) -> Value {
    output.results.structured().cloned().unwrap()
}

#[tokio::test]
async fn without_a_database_the_tool_says_memory_is_unavailable() {
    let registry = builtin_registry().unwrap();
    let ctx = ToolContext::standalone("c", std::env::temp_dir(), Arc::new(ToolsConfig::default()));
    let output = call(&registry, &ctx, json!({"action": "list"})).await;
    assert!(output.is_error);
    assert_eq!(output.error_code, Some(ErrorCode::ToolUnavailable));
    assert!(
        results(&output)["error"]
            .as_str()
            .unwrap()
            .contains("memory is unavailable in this session (no database is configured)"),
        "{output:?}"
    );
}

#[tokio::test]
async fn every_action_works_through_the_registry() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("satchel.db"), StoreOptions::default())
        .await
        .unwrap();
    let memory = Memory::new(
        Arc::new(store.clone()),
        MemoryConfig::default(),
        MemoryOptions {
            clock: Arc::new(SystemClock),
            model: ModelSource::Dir(dir.path().join("no-model")),
            summarizer: None,
        },
    );
    let handle: Arc<dyn MemoryHandle> = Arc::new(OpenMemory(Arc::new(memory)));
    let deps = BuiltinDeps {
        memory: Some(handle),
        ..BuiltinDeps::default()
    };
    let mut registry = Registry::new();
    for tool in builtin_tools(&deps) {
        registry.register_arc(tool).unwrap();
    }
    let ctx = ToolContext::standalone(
        "c",
        dir.path().to_path_buf(),
        Arc::new(ToolsConfig::default()),
    );

    // The schema rejects a store without a layer, and an unknown layer.
    for bad in [
        json!({"action": "store", "content": "x"}),
        json!({"action": "store", "layer": "forever", "content": "x"}),
        json!({"action": "recall", "query": "x", "limit": 0}),
        json!({"action": "forget"}),
    ] {
        let output = call(&registry, &ctx, bad.clone()).await;
        assert_eq!(output.error_code, Some(ErrorCode::InvalidParams), "{bad}");
    }
    // The tool rejects a category of another layer, saying which.
    let output = call(
        &registry,
        &ctx,
        json!({"action": "store", "layer": "long", "content": "Run a marathon", "category": "goal"}),
    )
    .await;
    assert_eq!(output.error_code, Some(ErrorCode::InvalidParams));
    assert!(
        results(&output)["error"]
            .as_str()
            .unwrap()
            .contains("`mid` layer")
    );

    let output = call(
        &registry,
        &ctx,
        json!({"action": "store", "layer": "mid", "content": "Run a marathon in October", "category": "goal", "certainty": 0.8}),
    )
    .await;
    assert!(!output.is_error, "{output:?}");
    let stored = results(&output);
    assert_eq!(stored["success"], true);
    let memory = &stored["memories"][0];
    let id = memory["id"].as_str().unwrap().to_owned();
    let keys: Vec<&str> = memory
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "id",
            "layer",
            "content",
            "category",
            "certainty",
            "created_at",
            "relevance"
        ]
    );
    assert_eq!(memory["layer"], "mid");
    assert_eq!(memory["certainty"], 0.8);

    let output = call(
        &registry,
        &ctx,
        json!({"action": "recall", "query": "marathon plans", "layer": "mid"}),
    )
    .await;
    let recalled = results(&output);
    assert_eq!(recalled["memories"][0]["id"], id.as_str());
    assert!(recalled["memories"][0]["relevance"].as_f64().unwrap() > 0.0);
    let output = call(
        &registry,
        &ctx,
        json!({"action": "recall", "query": "marathon", "layer": "long"}),
    )
    .await;
    assert_eq!(results(&output)["memories"], json!([]));
    let output = call(
        &registry,
        &ctx,
        json!({"action": "recall", "query": "marathon", "since": "tomorrow"}),
    )
    .await;
    assert_eq!(output.error_code, Some(ErrorCode::InvalidParams));

    let output = call(
        &registry,
        &ctx,
        json!({"action": "list", "category": "goal"}),
    )
    .await;
    assert_eq!(results(&output)["memories"][0]["id"], id.as_str());

    let output = call(
        &registry,
        &ctx,
        json!({"action": "forget", "memory_id": id}),
    )
    .await;
    assert_eq!(results(&output)["action"], "forgotten");
    let output = call(
        &registry,
        &ctx,
        json!({"action": "forget", "memory_id": id}),
    )
    .await;
    assert_eq!(output.error_code, Some(ErrorCode::InvalidParams));
    assert!(
        results(&output)["error"]
            .as_str()
            .unwrap()
            .contains("no memory with id")
    );

    let output = call(
        &registry,
        &ctx,
        json!({"action": "store", "layer": "session", "content": "__NEW_SESSION__", "category": "system"}),
    )
    .await;
    assert_eq!(results(&output)["action"], "new_session", "{output:?}");
    store.close().await.unwrap();
}
