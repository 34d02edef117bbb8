//! One agent over a fake model, a temporary project and store, and a sink
//! that keeps every event; helpers that read the store back as plain
//! values a test can compare whole.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use satchel_agent::{Agent, AgentDeps, AgentEvent, EventSink, HotConfig, StatementReport};
use satchel_builtins::{BuiltinDeps, builtin_tools};
use satchel_store::{
    AuditSource, ConversationStore, LlmCallRecord, LlmCallStore, LogKind, LogStore, MessageStore,
    SqliteStore, StoreOptions, ToolCallRecord, ToolCallStore,
};
use satchel_tools::external::{SpecCache, ToolDirs};
use satchel_tools::{ExternalConfig, LiveRegistry, NonInteractive, Style};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;

use crate::fake_model::{FakeModel, Reply};

/// Longest any statement in these tests may take before it counts as hung.
pub(crate) const HANG: Duration = Duration::from_secs(30);

/// Every event a statement emitted, in order.
#[derive(Clone, Default)]
pub(crate) struct Events(Arc<Mutex<Vec<AgentEvent>>>);

impl EventSink for Events {
    fn emit(&self, event: AgentEvent) {
        self.0.lock().unwrap().push(event);
    }
}

impl Events {
    pub(crate) fn all(&self) -> Vec<AgentEvent> {
        self.0.lock().unwrap().clone()
    }

    /// The answer text as it was streamed to the user.
    pub(crate) fn text(&self) -> String {
        self.all()
            .into_iter()
            .filter_map(|e| match e {
                AgentEvent::TextDelta(text) => Some(text),
                _ => None,
            })
            .collect()
    }

    pub(crate) fn notices(&self) -> Vec<String> {
        self.all()
            .into_iter()
            .filter_map(|e| match e {
                AgentEvent::Notice(text) => Some(text),
                _ => None,
            })
            .collect()
    }

    /// `(tool, is_error)` of each finished tool call.
    pub(crate) fn tools_finished(&self) -> Vec<(String, bool)> {
        self.all()
            .into_iter()
            .filter_map(|e| match e {
                AgentEvent::ToolFinished { tool, is_error, .. } => Some((tool, is_error)),
                _ => None,
            })
            .collect()
    }

    pub(crate) fn tools_started(&self) -> usize {
        self.all()
            .iter()
            .filter(|e| matches!(e, AgentEvent::ToolStarted { .. }))
            .count()
    }
}

/// An agent in a temporary project, talking to a scripted model.
pub(crate) struct Harness {
    pub(crate) model: FakeModel,
    pub(crate) store: Arc<SqliteStore>,
    pub(crate) agent: Agent,
    pub(crate) events: Events,
    /// The project directory tools run in.
    pub(crate) project: PathBuf,
    _dir: TempDir,
}

impl Harness {
    /// `config` is merged over an agent.json that points at the model,
    /// allows `bash`, never retries and has side requests off.
    pub(crate) async fn new(script: Vec<Reply>, config: Value) -> Harness {
        let model = FakeModel::start(script);
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        std::fs::create_dir(&project).unwrap();
        let mut agent_json = json!({
            "llm": {"provider": "openai", "baseUrl": model.base_url(), "model": "gpt-4o",
                    "maxRetries": 0, "requestTimeoutSecs": 20},
            "permissions": {"allow": ["bash"]},
            "sideRequests": false
        });
        merge(&mut agent_json, config);
        let config_path = dir.path().join("agent.json");
        std::fs::write(&config_path, agent_json.to_string()).unwrap();
        let store = Arc::new(
            SqliteStore::open(&dir.path().join("satchel.db"), StoreOptions::default())
                .await
                .unwrap(),
        );
        let tools = LiveRegistry::load_with(
            builtin_tools(&BuiltinDeps::default()),
            ToolDirs::default(),
            SpecCache::in_memory(),
            ExternalConfig::default(),
        )
        .await
        .unwrap();
        // No variables: nothing here may depend on the user's environment.
        let (config, warnings) = HotConfig::load(
            vec![config_path],
            BTreeMap::new(),
            Arc::new(satchel_builtins::configure),
        )
        .unwrap();
        assert_eq!(warnings, Vec::<String>::new());
        let agent = Agent::new(AgentDeps {
            store: store.clone(),
            tools: Arc::new(tools),
            config,
            consent: Arc::new(NonInteractive),
            source: AuditSource::Run,
            caller: None,
            memory_namespace: None,
            working_dir: project.clone(),
            display: Style::Markdown,
            model_tape: None,
            hooks: Default::default(),
            context: Default::default(),
        });
        Harness {
            model,
            store,
            agent,
            events: Events::default(),
            project,
            _dir: dir,
        }
    }

    /// Runs one statement to its end (failing the test if it hangs).
    pub(crate) async fn say(&mut self, text: &str) -> StatementReport {
        self.say_until(text, &CancellationToken::new()).await
    }

    pub(crate) async fn say_until(
        &mut self,
        text: &str,
        cancel: &CancellationToken,
    ) -> StatementReport {
        tokio::time::timeout(HANG, self.agent.statement(text, cancel, &self.events))
            .await
            .expect("the statement hung")
            .expect("the statement could not run")
    }

    fn conversation_id(&self) -> String {
        self.agent.conversation_id().unwrap().to_owned()
    }

    /// The log as `kind: text` lines, what the user saw.
    pub(crate) async fn log(&self) -> Vec<String> {
        let entries = self
            .store
            .log_entries(&self.conversation_id())
            .await
            .unwrap();
        entries
            .into_iter()
            .map(|e| format!("{}: {}", kind_name(e.kind), e.text))
            .collect()
    }

    /// The history rows, `(turn, content)`, what the model got.
    pub(crate) async fn history(&self) -> Vec<(u32, Value)> {
        let rows = self.store.messages(&self.conversation_id()).await.unwrap();
        rows.into_iter().map(|r| (r.turn, r.content)).collect()
    }

    pub(crate) async fn tool_calls(&self) -> Vec<ToolCallRecord> {
        self.store
            .tool_calls(&self.conversation_id())
            .await
            .unwrap()
    }

    pub(crate) async fn llm_calls(&self) -> Vec<LlmCallRecord> {
        self.store.llm_calls(&self.conversation_id()).await.unwrap()
    }

    pub(crate) async fn title(&self) -> Option<String> {
        self.store
            .conversation(&self.conversation_id())
            .await
            .unwrap()
            .unwrap()
            .title
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.project.join(name)
    }
}

fn kind_name(kind: LogKind) -> &'static str {
    match kind {
        LogKind::User => "user",
        LogKind::Assistant => "assistant",
        LogKind::ToolUse => "tool_use",
        LogKind::ToolResult => "tool_result",
        LogKind::Auxiliary => "auxiliary",
        LogKind::Error => "error",
    }
}

/// Merges `extra` into `base`, objects key by key.
pub(crate) fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(base), Value::Object(extra)) => {
            for (key, value) in extra {
                merge(base.entry(key).or_insert(Value::Null), value);
            }
        }
        (base, extra) => *base = extra,
    }
}

/// The text of an assistant history row (its text parts, joined).
pub(crate) fn assistant_text(content: &Value) -> String {
    assert_eq!(content["role"], "assistant", "{content}");
    parts_of(content)
        .iter()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["text"].as_str())
        .collect()
}

/// The parts of a history row's content.
pub(crate) fn parts_of(content: &Value) -> Vec<Value> {
    content["content"].as_array().cloned().unwrap_or_default()
}

/// Whether a process whose command line contains `marker` is running.
pub(crate) fn process_running(marker: &str) -> bool {
    crate::processes::running(marker)
}

/// `text` with the values that differ from run to run or machine to
/// machine (a call's `duration_ms`, the `sandbox` the kernel allowed) as
/// `_`, for snapshots.
pub(crate) fn stable(text: &str) -> String {
    let mut out = text.to_owned();
    for key in ["\"duration_ms\":", "\"sandbox\":"] {
        let mut from = 0;
        while let Some(found) = out[from..].find(key) {
            let start = from + found + key.len();
            let end = out[start..]
                .find([',', '}'])
                .map_or(out.len(), |offset| start + offset);
            out.replace_range(start..end, "_");
            from = start + 1;
        }
    }
    out
}
