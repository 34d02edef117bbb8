//! Asking a local server what it serves ([`satchel_llm::ask_server`]):
//! once per endpoint, however many conversations start at once.

use std::collections::HashMap;

use pretty_assertions::assert_eq;
use satchel_llm::{LlmConfig, ask_server};

use crate::server::{Reply, Server};

/// llama.cpp's `/props` (every request gets it: `/slots` too, which then
/// tells nothing more).
const PROPS: &str = r#"{"default_generation_settings": {"n_ctx": 8192, "params": {"n_predict": -1}}, "model_alias": "smollm2"}"#;

#[tokio::test]
async fn conversations_starting_together_ask_the_server_once() {
    let server = Server::start(vec![Reply::json(200, PROPS)]).await;
    let config = LlmConfig {
        base_url: Some(server.url("/v1")),
        model: Some("smollm2".into()),
        ..LlmConfig::default()
    }
    .resolve(&HashMap::new())
    .unwrap();
    let asks = (0..20).map(|_| ask_server(config.clone()));
    let configs = futures_util::future::join_all(asks).await;
    for asked in &configs {
        assert_eq!(asked.context_window, 8192);
    }
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/props", "/slots"]);
    // A later conversation is answered from what was learned.
    assert_eq!(ask_server(config).await.context_window, 8192);
    assert_eq!(server.requests().len(), 2);
}
