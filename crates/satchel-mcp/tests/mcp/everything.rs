//! Satchel's client against the reference server, `server-everything`, over
//! streamable HTTP: a server that starts late has its tools added when it
//! answers; its image tool's output arrives as an image; a server killed
//! mid-session keeps its tools listed while calls fail fast, and works
//! again once it is back; a hung call is cut by its timeout. Over stdio:
//! its resources and prompts, through `mcp_resources` and `mcp_prompts`.

use std::collections::BTreeMap;
use std::process::Child;
use std::time::{Duration, Instant};

use satchel_core::{Content, ErrorCode, ToolResults};
use satchel_mcp::ServerState;
use satchel_mcp::client::{ServerConfig, TransportConfig};
use serde_json::json;

use crate::client::{Fixture, bounded, fast, server, status, wait_until};
use crate::everything_http::{self, free_port, kill};
use crate::peers_dir::peer;

/// `server-everything streamableHttp` on `port`, in its own process group.
fn everything(port: u16) -> Child {
    everything_http::start(&peer("node_modules/.bin/mcp-server-everything"), port)
}

/// `server-everything` over stdio, as mcp.json would declare it.
fn stdio_everything(fx: &Fixture) -> ServerConfig {
    server(
        "everything",
        TransportConfig::Stdio {
            command: peer("node_modules/.bin/mcp-server-everything")
                .display()
                .to_string(),
            args: vec!["stdio".into()],
            env: BTreeMap::new(),
            cwd: fx.dir.path().to_path_buf(),
        },
    )
}

#[tokio::test]
async fn a_late_dropped_and_restarted_remote_server_is_followed() {
    bounded(async {
        let fx = Fixture::new().await;
        let port = free_port();
        let mut config = server(
            "everything",
            TransportConfig::Http {
                url: format!("http://127.0.0.1:{port}/mcp"),
                headers: BTreeMap::new(),
                lifecycle: Default::default(),
                oauth: Default::default(),
            },
        );
        config.call_timeout = Duration::from_secs(2);
        let mut options = fast();
        options.restart.max_backoff = Duration::from_millis(500);
        let manager = fx.start(vec![config], options);

        // Nothing listens yet: the manager keeps trying.
        manager.ready().await;
        let st = status(&manager, "everything");
        assert!(
            matches!(st.state, ServerState::Restarting { .. }),
            "{st:?}"
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
        let started = Instant::now();
        let first = everything(port);
        wait_until("the late server's tools", || {
            status(&manager, "everything").state == ServerState::Running
        })
        .await;
        let joined = started.elapsed();
        let names: Vec<String> = status(&manager, "everything")
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect();
        assert!(
            names.contains(&"everything__get-tiny-image".to_owned()),
            "{names:?}"
        );

        let echoed = fx.call("everything__echo", json!({"message": "hi"})).await;
        assert!(!echoed.is_error, "{echoed:?}");
        assert!(echoed.results.to_text().contains("hi"), "{echoed:?}");

        // The image arrives as an image part, not dropped.
        let image = fx.call("everything__get-tiny-image", json!({})).await;
        let ToolResults::Parts(parts) = &image.results else {
            panic!("{image:?}")
        };
        assert!(
            parts.iter().any(
                |part| matches!(part, Content::Image { mime_type, data } if mime_type == "image/png" && !data.is_empty())
            ),
            "{image:?}"
        );

        // A call that outlasts its timeout without progress is cut.
        let cut_at = Instant::now();
        let hung = fx
            .call(
                "everything__trigger-long-running-operation",
                json!({"duration": 30, "steps": 1}),
            )
            .await;
        assert_eq!(hung.error_code, Some(ErrorCode::ToolTimeout), "{hung:?}");
        assert!(cut_at.elapsed() < Duration::from_secs(10));

        // Killed: its tools stay listed, calls fail fast and say why.
        kill(first);
        let failed_at = Instant::now();
        let failed = fx.call("everything__echo", json!({"message": "anyone?"})).await;
        assert!(failed.is_error, "{failed:?}");
        assert!(failed_at.elapsed() < Duration::from_secs(5), "{failed:?}");
        wait_until("the drop is noticed", || {
            matches!(
                status(&manager, "everything").state,
                ServerState::Restarting { .. }
            )
        })
        .await;
        let listed = status(&manager, "everything").tools.len();
        assert_eq!(listed, names.len(), "tools stay listed while it is away");
        let refused = fx.call("everything__echo", json!({"message": "anyone?"})).await;
        assert!(refused.is_error, "{refused:?}");

        // Back on the same address: calls work again.
        let second = everything(port);
        wait_until("the server is back", || {
            status(&manager, "everything").state == ServerState::Running
        })
        .await;
        let echoed = fx.call("everything__echo", json!({"message": "back"})).await;
        assert!(!echoed.is_error, "{echoed:?}");
        manager.shutdown().await;
        kill(second);
        eprintln!("the late server's tools joined {joined:?} after it started");
    })
    .await;
}

/// The reference server's resources and prompts reach the model through
/// `mcp_resources` and `mcp_prompts`: listed with the server's name, a
/// templated text resource read, a prompt given its arguments.
#[tokio::test]
async fn a_servers_resources_and_prompts_are_usable() {
    bounded(async {
        let fx = Fixture::new().await;
        let config = stdio_everything(&fx);
        let manager = fx.start(vec![config], fast());
        manager.ready().await;
        assert_eq!(status(&manager, "everything").state, ServerState::Running);

        let listed = fx.call("mcp_resources", json!({"action": "list"})).await;
        assert!(!listed.is_error, "{listed:?}");
        let text = listed.results.to_text();
        assert!(
            text.contains("\"server\":\"everything\"")
                && text.contains("demo://resource/dynamic/text/{resourceId}"),
            "{text}"
        );
        let read = fx
            .call(
                "mcp_resources",
                json!({"action": "read", "server": "everything", "uri": "demo://resource/dynamic/text/7"}),
            )
            .await;
        assert!(!read.is_error, "{read:?}");
        assert!(
            read.results.to_text().starts_with("demo://resource/dynamic/text/7:"),
            "{read:?}"
        );

        let prompts = fx.call("mcp_prompts", json!({"action": "list"})).await;
        assert!(prompts.results.to_text().contains("args-prompt"), "{prompts:?}");
        let prompt = fx
            .call(
                "mcp_prompts",
                json!({"action": "get", "server": "everything", "name": "args-prompt",
                       "arguments": {"city": "Lyon"}}),
            )
            .await;
        assert!(!prompt.is_error, "{prompt:?}");
        assert!(prompt.results.to_text().contains("Lyon"), "{prompt:?}");

        let unknown = fx
            .call(
                "mcp_resources",
                json!({"action": "read", "server": "nowhere", "uri": "x://y"}),
            )
            .await;
        assert!(unknown.is_error);
        assert!(unknown.results.to_text().contains("no running MCP server `nowhere`"));
        manager.shutdown().await;
    })
    .await;
}

/// Answers every question with a name, and keeps what it was asked.
struct Answers(std::sync::Mutex<Vec<satchel_mcp::client::Question>>);

#[async_trait::async_trait]
impl satchel_mcp::client::ElicitationAsker for Answers {
    async fn ask(&self, question: satchel_mcp::client::Question) -> satchel_mcp::client::Elicited {
        self.0.lock().unwrap().push(question);
        satchel_mcp::client::Elicited::Accept(json!({"name": "Ada Lovelace", "check": true}))
    }
}

/// A server's question reaches whoever the front end set to answer (the
/// REPL's prompt), and is refused with the reason when nobody can answer.
#[tokio::test]
async fn a_servers_questions_reach_the_person_or_are_refused_with_the_reason() {
    bounded(async {
        let fx = Fixture::new().await;
        let config = stdio_everything(&fx);
        let manager = fx.start(vec![config], fast());
        manager.ready().await;
        let answers = std::sync::Arc::new(Answers(Default::default()));
        manager.set_asker(Some(answers.clone()));
        let answered = fx
            .call("everything__trigger-elicitation-request", json!({}))
            .await;
        assert!(!answered.is_error, "{answered:?}");
        assert!(
            answered.results.to_text().contains("Ada Lovelace"),
            "{answered:?}"
        );
        let asked = answers.0.lock().unwrap().clone();
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0].server, "everything");
        assert!(asked[0].schema.as_ref().unwrap()["properties"]["name"].is_object());

        manager.set_asker(None);
        let refused = fx
            .call("everything__trigger-elicitation-request", json!({}))
            .await;
        assert!(
            refused.results.to_text().contains("no person to ask"),
            "the server hears why: {refused:?}"
        );
        manager.shutdown().await;
    })
    .await;
}

/// The reference server asks for the roots Satchel declares: the
/// project (and the writable paths) as `file://` URIs, and the new list
/// after a change Satchel tells it of.
#[tokio::test]
async fn roots_reach_a_server_that_asks_and_changes_are_told() {
    bounded(async {
        let fx = Fixture::new().await;
        let project = fx.dir.path().join("project");
        let extra = fx.dir.path().join("scratch space");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(&extra).unwrap();
        let mut options = fast();
        options.roots = vec![project.clone()];
        let manager = fx.start(vec![stdio_everything(&fx)], options);
        manager.ready().await;
        let listed = fx.call("everything__get-roots-list", json!({})).await;
        assert!(!listed.is_error, "{listed:?}");
        let text = listed.results.to_text();
        let uri = url::Url::from_directory_path(&project).unwrap();
        assert!(text.contains(uri.as_str().trim_end_matches('/')), "{text}");
        assert!(text.contains("project"), "{text}");

        manager
            .set_roots(vec![project.clone(), extra.clone()])
            .await;
        let extra_uri = url::Url::from_directory_path(&extra).unwrap();
        let extra_uri = extra_uri.as_str().trim_end_matches('/').to_owned();
        let start = Instant::now();
        loop {
            let text = fx
                .call("everything__get-roots-list", json!({}))
                .await
                .results
                .to_text();
            if text.contains(&extra_uri) {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "never told: {text}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        manager.shutdown().await;
    })
    .await;
}

/// A model scripted for the test: answers every request with one line
/// naming what it was asked.
struct ScriptedModel {
    asked: std::sync::Mutex<Vec<satchel_mcp::client::SampleRequest>>,
}

#[async_trait::async_trait]
impl satchel_mcp::client::Sampler for ScriptedModel {
    async fn sample(
        &self,
        request: satchel_mcp::client::SampleRequest,
    ) -> Result<satchel_mcp::client::Sampled, String> {
        let last = request
            .messages
            .last()
            .map(|m| m.text.clone())
            .unwrap_or_default();
        self.asked.lock().unwrap().push(request);
        Ok(satchel_mcp::client::Sampled {
            model: "scripted".into(),
            text: format!("scripted answer to: {last}"),
        })
    }
}

/// The reference server's `sampling/createMessage`: refused with the
/// reason while nobody can agree, answered by the model once a front end
/// puts one in place.
#[tokio::test]
async fn a_servers_sampling_request_is_refused_or_answered_by_the_model() {
    bounded(async {
        let fx = Fixture::new().await;
        let manager = fx.start(vec![stdio_everything(&fx)], fast());
        manager.ready().await;
        let input = json!({"prompt": "name a colour", "maxTokens": 20});

        let refused = fx
            .call("everything__trigger-sampling-request", input.clone())
            .await;
        assert!(refused.is_error, "{refused:?}");
        assert!(
            refused
                .results
                .to_text()
                .contains("only where a person can agree"),
            "{refused:?}"
        );

        let model = std::sync::Arc::new(ScriptedModel {
            asked: Default::default(),
        });
        manager.set_sampler(Some(model.clone()));
        let answered = fx.call("everything__trigger-sampling-request", input).await;
        assert!(!answered.is_error, "{answered:?}");
        let text = answered.results.to_text();
        assert!(text.contains("scripted answer to:"), "{text}");
        assert!(text.contains("name a colour"), "{text}");
        let asked = model.asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0].server, "everything");
        assert_eq!(asked[0].max_tokens, 20);
        manager.shutdown().await;
    })
    .await;
}
