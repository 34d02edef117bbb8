//! A server's `sampling/createMessage` answered through the configured
//! model: the reference server (`server-everything`, over stdio from the
//! project's mcp.json) asks, the person agrees, a scripted model on the
//! wire answers, and the answer reaches the server's tool result. Without
//! agreement nothing reaches the model.

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_requests_are_answered_by_the_model_once_the_person_agrees() {
    let model = FakeModel::start(vec![Reply::text("Cerulean.")]);
    let dir = tempfile::tempdir().unwrap();
    let host = crate::open_host(&model, dir.path());
    std::fs::write(
        host.root.join(".agents/mcp.json"),
        json!({"mcpServers": {"everything": {
            "command": peer("node_modules/.bin/mcp-server-everything"), "args": ["stdio"],
            "env": {"PATH": std::env::var("PATH").unwrap_or_default()}}}})
        .to_string(),
    )
    .unwrap();
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
