//! The reference server (`server-everything`, over stdio from the
//! project's mcp.json) asking the host's MCP client: its
//! `sampling/createMessage` answered through the configured model (the
//! person agrees, a scripted model on the wire answers, the answer reaches
//! the server's tool result; without agreement nothing reaches the model),
//! and its roots (the project, then the writable paths agent.json adds,
//! told when agent.json changes).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use satchel_core::ToolCall;
use satchel_host::sampling::SamplingConsent;
use satchel_mcp::client::SampleRequest;
use satchel_tools::{ToolContext, ToolsConfig};
use serde_json::json;

use crate::fake_model::{FakeModel, Reply, last_user_text};
use crate::peers_dir::peer;

/// Agrees or not, and keeps what it was shown.
struct Person {
    agrees: bool,
    shown: Mutex<Vec<SampleRequest>>,
}

#[async_trait]
impl SamplingConsent for Person {
    async fn agree(&self, request: &SampleRequest) -> bool {
        self.shown.lock().unwrap().push(request.clone());
        self.agrees
    }
}

/// The project with the reference server in its mcp.json.
fn with_everything(host: &satchel_host::Host) {
    std::fs::write(
        host.root.join(".agents/mcp.json"),
        json!({"mcpServers": {"everything": {
            "command": peer("node_modules/.bin/mcp-server-everything"), "args": ["stdio"]}}})
        .to_string(),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_are_the_project_and_the_writable_paths_and_follow_agent_json() {
    let model = FakeModel::start(vec![]);
    let dir = tempfile::tempdir().unwrap();
    let host = crate::open_host(&model, dir.path());
    with_everything(&host);
    let live = host.shared_tools().await.unwrap();
    host.wait_for_mcp_servers().await;
    let ctx = ToolContext::standalone("t", host.root.clone(), Arc::new(ToolsConfig::default()));
    let call = ToolCall {
        id: "t".into(),
        name: "everything__get-roots-list".into(),
        input: json!({}),
    };
    let uri = |path: &std::path::Path| {
        url::Url::from_directory_path(path)
            .unwrap()
            .as_str()
            .trim_end_matches('/')
            .to_owned()
    };
    let listed = live.current().call(&call, &ctx).await;
    assert!(!listed.is_error, "{listed:?}");
    assert!(
        listed.results.to_text().contains(&uri(&host.root)),
        "{listed:?}"
    );

    let extra = dir.path().join("scratch");
    std::fs::create_dir_all(&extra).unwrap();
    let agent = host.root.join(".agents/agent.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&agent).unwrap()).unwrap();
    config["exec"] = json!({"writable": [extra]});
    std::fs::write(&agent, config.to_string()).unwrap();
    let start = std::time::Instant::now();
    loop {
        let text = live.current().call(&call, &ctx).await.results.to_text();
        if text.contains(&uri(&extra)) {
            assert!(text.contains(&uri(&host.root)), "{text}");
            break;
        }
        assert!(start.elapsed().as_secs() < 15, "never told: {text}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    host.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_requests_are_answered_by_the_model_once_the_person_agrees() {
    let model = FakeModel::start(vec![Reply::text("Cerulean.")]);
    let dir = tempfile::tempdir().unwrap();
    let host = crate::open_host(&model, dir.path());
    with_everything(&host);
    let live = host.shared_tools().await.unwrap();
    host.wait_for_mcp_servers().await;
    let ctx = ToolContext::standalone("t", host.root.clone(), Arc::new(ToolsConfig::default()));
    let call = ToolCall {
        id: "t".into(),
        name: "everything__trigger-sampling-request".into(),
        input: json!({"prompt": "name a colour", "maxTokens": 20}),
    };

    let declines = Arc::new(Person {
        agrees: false,
        shown: Mutex::default(),
    });
    host.set_mcp_sampling_consent(Some(declines.clone()));
    let refused = live.current().call(&call, &ctx).await;
    assert!(refused.is_error, "{refused:?}");
    assert!(
        refused.results.to_text().contains("declined"),
        "{refused:?}"
    );
    assert_eq!(declines.shown.lock().unwrap().len(), 1);
    assert!(model.main_requests().is_empty(), "the model was asked");

    let agrees = Arc::new(Person {
        agrees: true,
        shown: Mutex::default(),
    });
    host.set_mcp_sampling_consent(Some(agrees.clone()));
    let answered = live.current().call(&call, &ctx).await;
    assert!(!answered.is_error, "{answered:?}");
    assert!(
        answered.results.to_text().contains("Cerulean."),
        "{answered:?}"
    );
    let asked = model.main_requests();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        last_user_text(&asked[0]).contains("name a colour"),
        "{asked:?}"
    );
    let shown = agrees.shown.lock().unwrap().clone();
    assert_eq!(shown[0].server, "everything");
    host.close().await;
}
