//! `LiveRegistry::set_extra_tools`: tools added at run time (the MCP
//! client's imports) join the registry without displacing anyone.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use pretty_assertions::assert_eq;
use satchel_core::{ToolCall, ToolOutput, ToolResults, ToolSpec};
use satchel_tools::external::{SpecCache, ToolDirs};
use satchel_tools::{
    ExternalConfig, LiveRegistry, RejectedTool, Tool, ToolContext, ToolError, ToolSource,
    ToolsConfig,
};
use serde_json::{Value, json};

/// A tool that answers with its own name and group.
struct Named {
    spec: ToolSpec,
    group: &'static str,
}

fn named(name: &str, group: &'static str) -> Arc<dyn Tool> {
    named_with_schema(name, group, json!({"type": "object"}))
}

fn named_with_schema(name: &str, group: &'static str, schema: Value) -> Arc<dyn Tool> {
    Arc::new(Named {
        spec: named_spec(name, group, schema),
        group,
    })
}

fn named_spec(name: &str, group: &str, schema: Value) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        title: None,
        description: format!("{name} from {group}"),
        input_schema: schema,
        output_schema: None,
        annotations: Default::default(),
        capabilities: Default::default(),
    }
}

#[async_trait]
impl Tool for Named {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn source(&self) -> ToolSource {
        ToolSource::Extra {
            group: self.group.into(),
            origin: "test".into(),
        }
    }

    async fn run(&self, _input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::success(
            ToolResults::json(json!({"group": self.group})),
            "ok",
        ))
    }
}

/// A tool compiled in, as Satchel's built-ins are (their own crate's
/// tests cover the real ones).
struct Builtin(ToolSpec);

#[async_trait]
impl Tool for Builtin {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn run(&self, _input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::success(
            ToolResults::json(json!({"builtin": true})),
            "ok",
        ))
    }
}

/// A live registry with built-ins named as Satchel's, and no tools directory.
async fn empty_live() -> (tempfile::TempDir, LiveRegistry) {
    let dir = tempfile::tempdir().unwrap();
    let dirs = ToolDirs {
        project: Some(dir.path().join("tools")),
        user: None,
        system: None,
    };
    let builtins = ["bash", "code", "conversation", "memory", "search"]
        .into_iter()
        .map(|name| {
            Arc::new(Builtin(named_spec(
                name,
                "builtin",
                json!({"type": "object"}),
            ))) as Arc<dyn Tool>
        })
        .collect();
    let live = LiveRegistry::load_with(
        builtins,
        dirs,
        SpecCache::in_memory(),
        ExternalConfig::default(),
    )
    .await
    .unwrap();
    (dir, live)
}

async fn call(live: &LiveRegistry, name: &str) -> ToolOutput {
    let ctx = ToolContext::standalone("t", PathBuf::from("/"), Arc::new(ToolsConfig::default()));
    let call = ToolCall {
        id: "t".into(),
        name: name.into(),
        input: json!({}),
    };
    live.current().call(&call, &ctx).await
}

#[tokio::test]
async fn extra_tools_are_added_replaced_and_removed_with_notifications() {
    let (_dir, live) = empty_live().await;
    let mut changes = live.subscribe();
    let before = *changes.borrow_and_update();

    let report = live
        .set_extra_tools("mcp", vec![named("a__echo", "mcp"), named("a__add", "mcp")])
        .unwrap();
    assert_eq!(report.added, ["a__add", "a__echo"]);
    assert!(changes.has_changed().unwrap());
    assert_eq!(*changes.borrow_and_update(), before + 1);
    assert_eq!(
        live.current().names().collect::<Vec<_>>(),
        [
            "a__add",
            "a__echo",
            "bash",
            "code",
            "conversation",
            "memory",
            "search"
        ]
    );
    assert_eq!(
        call(&live, "a__echo").await.results.structured(),
        Some(&json!({"group": "mcp"}))
    );

    // The same tools again: nothing changed, nobody is told.
    let report = live
        .set_extra_tools("mcp", vec![named("a__echo", "mcp"), named("a__add", "mcp")])
        .unwrap();
    assert!(!report.is_change());
    assert!(!changes.has_changed().unwrap());

    let report = live.set_extra_tools("mcp", vec![]).unwrap();
    assert_eq!(report.removed, ["a__add", "a__echo"]);
    assert!(changes.has_changed().unwrap());
    assert_eq!(
        live.current().names().collect::<Vec<_>>(),
        ["bash", "code", "conversation", "memory", "search"]
    );
}

#[tokio::test]
async fn builtins_keep_their_names_and_collisions_are_reported() {
    let (_dir, live) = empty_live().await;
    live.set_extra_tools(
        "b-group",
        vec![named("bash", "b-group"), named("shared", "b-group")],
    )
    .unwrap();
    live.set_extra_tools(
        "a-group",
        vec![
            named("shared", "a-group"),
            named_with_schema("broken", "a-group", json!({"type": "string"})),
            named("has space", "a-group"),
        ],
    )
    .unwrap();
    let registry = live.current();
    assert_eq!(registry.get("bash").unwrap().source(), ToolSource::Builtin);
    // Groups go in name order: `a-group` was first to `shared`.
    assert_eq!(
        call(&live, "shared").await.results.structured(),
        Some(&json!({"group": "a-group"}))
    );
    let rejected: Vec<RejectedTool> = live.rejected().to_vec();
    let summary: Vec<(&str, &str)> = rejected
        .iter()
        .map(|r| (r.group.as_str(), r.name.as_str()))
        .collect();
    assert_eq!(
        summary,
        [
            ("a-group", "broken"),
            ("a-group", "has space"),
            ("b-group", "bash"),
            ("b-group", "shared"),
        ]
    );
    assert!(
        rejected[0].reason.contains("invalid input schema"),
        "{rejected:?}"
    );
    assert!(
        rejected[1].reason.contains("not a valid tool name"),
        "{rejected:?}"
    );
    assert_eq!(rejected[2].reason, "the name is taken by builtin");
    assert_eq!(
        rejected[3].reason, "the name is taken by a-group (test)",
        "{rejected:?}"
    );
}

#[tokio::test]
async fn a_refresh_of_the_directories_keeps_the_extra_tools() {
    let (_dir, live) = empty_live().await;
    live.set_extra_tools("mcp", vec![named("kept", "mcp")])
        .unwrap();
    let report = live.refresh(true).await.unwrap();
    assert!(!report.is_change(), "{report:?}");
    assert!(live.current().get("kept").is_some());
}
