//! One host, many conversations: two statements run at once on one
//! `Host`, against a scripted model on the wire, each with its own consent
//! channel and event stream, over the same tools and database.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

#[path = "../../../satchel-agent/tests/support/fake_model.rs"]
#[allow(missing_docs)]
mod fake_model;
mod mcp_peers;
#[path = "../../../satchel-agent/tests/support/peers.rs"]
mod peers_dir;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use fake_model::{FakeModel, Reply};
use satchel_agent::{AgentEvent, EventSink, Outcome};
use satchel_core::ToolCall;
use satchel_host::{ConversationOptions, Host, HostOptions, HostPaths};
use satchel_store::AuditSource;
use satchel_tools::policy::Decision;
use satchel_tools::{Consent, ConsentAnswer, Style};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Answers every question the same way and counts them. It answers only
/// once both conversations have asked (`together`), so each has had its
/// first reply, a tool call, before either asks the model again.
struct Fixed {
    answer: fn() -> ConsentAnswer,
    asked: Mutex<Vec<String>>,
    together: Arc<tokio::sync::Barrier>,
}

#[async_trait]
impl Consent for Fixed {
    async fn ask(&self, call: &ToolCall, _: &Decision) -> ConsentAnswer {
        self.asked.lock().unwrap().push(call.input.to_string());
        self.together.wait().await;
        (self.answer)()
    }
}

/// Keeps every event of one statement.
#[derive(Default)]
struct Events(Mutex<Vec<AgentEvent>>);

impl EventSink for Events {
    fn emit(&self, event: AgentEvent) {
        self.0.lock().unwrap().push(event);
    }
}

impl Events {
    fn tool_results(&self) -> Vec<(String, bool)> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter_map(|event| match event {
                AgentEvent::ToolFinished { tool, is_error, .. } => Some((tool.clone(), *is_error)),
                _ => None,
            })
            .collect()
    }
}

fn open_host(model: &FakeModel, dir: &std::path::Path) -> Host {
    let project = dir.join("project");
    std::fs::create_dir_all(project.join(".agents")).unwrap();
    std::fs::write(
        project.join(".agents/agent.json"),
        json!({
            "llm": {"provider": "openai", "baseUrl": model.base_url(), "model": "gpt-4o",
                    "apiKeyEnv": "FAKE_KEY", "maxRetries": 0},
            "sideRequests": false,
            "permissions": {"ask": ["bash(echo *)"]},
        })
        .to_string(),
    )
    .unwrap();
    satchel_host::trust::init(None);
    satchel_host::trust::trust_for_this_run();
    Host::open(HostOptions {
        root: project,
        db: Some(dir.join("satchel.db")),
        paths: HostPaths {
            config: Some(dir.join("config")),
            cache: Some(dir.join("cache")),
            data: Some(dir.join("data")),
            system_tools: None,
        },
        env: [("FAKE_KEY".to_owned(), "sk-test".to_owned())].into(),
        fetcher: None,
    })
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_conversations_run_at_once_each_with_its_own_consent_and_events() {
    let echo = || Reply::call("bash", json!({"command": "echo hello"}));
    // The script is one queue: both first requests get a call (consent
    // holds each until both asked), both second requests an answer.
    let model = FakeModel::start(vec![
        echo(),
        echo(),
        Reply::text("done"),
        Reply::text("done"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let host = open_host(&model, dir.path());

    let together = Arc::new(tokio::sync::Barrier::new(2));
    let allow = Arc::new(Fixed {
        answer: || ConsentAnswer::AllowOnce,
        asked: Mutex::default(),
        together: together.clone(),
    });
    let deny = Arc::new(Fixed {
        answer: || ConsentAnswer::Deny { reason: None },
        asked: Mutex::default(),
        together,
    });
    let open = |consent: Arc<Fixed>| {
        host.conversation(ConversationOptions {
            source: AuditSource::Run,
            caller: None,
            memory_namespace: None,
            consent,
            display: Style::Markdown,
            resume: None,
        })
    };
    let (mut first, mut second) = (
        open(allow.clone()).await.unwrap(),
        open(deny.clone()).await.unwrap(),
    );
    assert!(
        Arc::ptr_eq(first.tools(), second.tools()),
        "conversations share the host's tools"
    );

    let (first_events, second_events) = (Events::default(), Events::default());
    let cancel = CancellationToken::new();
    let (a, b) = tokio::join!(
        first.statement("say hello", &cancel, &first_events),
        second.statement("say hello", &cancel, &second_events),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.outcome, Outcome::Answered);
    assert_eq!(b.outcome, Outcome::Answered);
    assert_ne!(first.conversation_id(), second.conversation_id());

    // Each conversation's questions went to its own consent, and its
    // events to its own sink.
    let (allowed, denied) = (first_events.tool_results(), second_events.tool_results());
    assert_eq!(allowed, [("bash".to_owned(), false)]);
    assert_eq!(denied, [("bash".to_owned(), true)]);
    assert_eq!(allow.asked.lock().unwrap().len(), 1);
    assert_eq!(deny.asked.lock().unwrap().len(), 1);

    // Both are in the one database.
    let store = host.store.records().await.unwrap();
    for agent in [&first, &second] {
        let id = agent.conversation_id().unwrap();
        assert!(store.conversation(id).await.unwrap().is_some());
    }
    host.close().await;
}
