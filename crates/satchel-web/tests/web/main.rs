//! `satchel web`'s server: every JSON endpoint over a record made by a
//! real conversation (the host, the scripted model on the wire, the bash
//! tool), and the security rules (Host, token, cross-site writes).

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

#[path = "../../../satchel-agent/tests/support/fake_model.rs"]
#[allow(missing_docs)]
mod fake_model;

#[path = "../../../satchel-agent/tests/support/peers.rs"]
mod peers;
#[path = "../../../satchel-agent/tests/support/processes.rs"]
mod processes;

mod browser;
mod chat;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use fake_model::{FakeModel, Reply};
pub(crate) use processes::running;
use satchel_host::{ConversationOptions, Host, HostOptions, HostPaths};
use satchel_store::{AuditSource, CodeStore as _, NewCodeExecution};
use satchel_tools::{NonInteractive, Style};
use satchel_web::WebOptions;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// A tool result with markup that must stay inert.
pub(crate) const HOSTILE: &str =
    "<script>window.hacked=1</script><img src=x onerror=\"window.hacked=2\">";

/// A host over a temporary record holding one conversation (a bash call
/// whose output is hostile HTML), a failed code run and a memory.
pub(crate) struct Record {
    pub(crate) _dir: tempfile::TempDir,
    pub(crate) host: Arc<Host>,
    pub(crate) conversation: String,
    pub(crate) model: FakeModel,
}

pub(crate) fn open_host(dir: &Path, model: &FakeModel) -> Arc<Host> {
    let config = dir.join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::create_dir_all(dir.join("project")).unwrap();
    std::fs::write(
        config.join("agent.json"),
        json!({
            "llm": {"provider": "openai", "baseUrl": model.base_url(), "model": "gpt-4o",
                    "apiKeyEnv": "FAKE_KEY", "maxRetries": 0},
            "sideRequests": false,
            "permissions": {"allow": ["bash(*)"], "ask": ["bash(touch *)"]},
        })
        .to_string(),
    )
    .unwrap();
    satchel_host::trust::init(None);
    Arc::new(
        Host::open(HostOptions {
            root: dir.join("project"),
            db: Some(dir.join("satchel.db")),
            paths: HostPaths {
                config: Some(config),
                cache: Some(dir.join("cache")),
                data: Some(dir.join("data")),
                system_tools: None,
            },
            env: [("FAKE_KEY".to_owned(), "sk-test".to_owned())].into(),
            fetcher: None,
        })
        .unwrap(),
    )
}

impl Record {
    pub(crate) async fn new() -> Record {
        let model = FakeModel::start(vec![
            Reply::call(
                "bash",
                json!({"command": format!("printf '%s' '{HOSTILE}'")}),
            ),
            Reply::text("The page printed **markup**; nothing ran."),
        ]);
        let dir = tempfile::tempdir().unwrap();
        let host = open_host(dir.path(), &model);
        let mut agent = host
            .conversation(ConversationOptions {
                source: AuditSource::Run,
                caller: None,
                memory_namespace: None,
                consent: Arc::new(NonInteractive),
                display: Style::Markdown,
                resume: None,
            })
            .await
            .unwrap();
        agent.set_title("Printing markup".into()).await.unwrap();
        agent
            .statement(
                "print some html",
                &CancellationToken::new(),
                &satchel_agent::Silent,
            )
            .await
            .unwrap();
        let conversation = agent.conversation_id().unwrap().to_owned();
        let store = host.store.get().await.unwrap().clone();
        store
            .record_execution(NewCodeExecution {
                language: "python".into(),
                runtime: "python3".into(),
                code: "print(".into(),
                stderr: "SyntaxError: '(' was never closed".into(),
                success: false,
                error_category: Some("syntax".into()),
                error_message: Some("SyntaxError: '(' was never closed".into()),
                exit_code: Some(1),
                sandbox: "none".into(),
                ..NewCodeExecution::default()
            })
            .await
            .unwrap();
        let memory = host.memory.get().await.unwrap();
        memory
            .store(satchel_memory::StoreRequest::new(
                satchel_store::MemoryLayer::Long,
                "The user prefers green tea",
            ))
            .await
            .unwrap();
        Record {
            _dir: dir,
            host,
            conversation,
            model,
        }
    }
}

/// The web view over `host`, on 127.0.0.1:0 (or `addr`), until dropped.
pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    stop: CancellationToken,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

pub(crate) async fn serve(host: Arc<Host>, token: Option<&str>, addr: &str) -> Server {
    let stop = CancellationToken::new();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let options = WebOptions {
        addr: addr.parse().unwrap(),
        token: token.map(str::to_owned),
        allowed_hosts: Vec::new(),
    };
    let shutdown = stop.clone();
    tokio::spawn(async move {
        satchel_web::serve(host, options, shutdown, move |addr| {
            let _ = tx.send(addr);
        })
        .await
        .unwrap();
    });
    Server {
        addr: rx.await.unwrap(),
        stop,
    }
}

pub(crate) fn client() -> reqwest::Client {
    satchel_http::client_builder().unwrap().build().unwrap()
}

async fn get(server: &Server, path: &str) -> (u16, Value) {
    let response = client()
        .get(format!("http://{}{path}", server.addr))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_answers_from_the_record() {
    let record = Record::new().await;
    let server = serve(record.host.clone(), None, "127.0.0.1:0").await;

    let (status, list) = get(&server, "/api/conversations").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["conversations"][0]["title"], "Printing markup");
    let (_, found) = get(&server, "/api/conversations?q=markup").await;
    assert_eq!(
        found["conversations"].as_array().unwrap().len(),
        1,
        "{found}"
    );
    let (_, found) = get(&server, "/api/conversations?q=window.hacked").await;
    assert_eq!(
        found["conversations"].as_array().unwrap().len(),
        1,
        "found in the tool call: {found}"
    );
    let (_, none) = get(&server, "/api/conversations?q=zebras").await;
    assert!(
        none["conversations"].as_array().unwrap().is_empty(),
        "{none}"
    );

    let (status, conversation) = get(
        &server,
        &format!("/api/conversations/{}", record.conversation),
    )
    .await;
    assert_eq!(status, 200, "{conversation}");
    let events = conversation["events"].as_array().unwrap();
    let call = events.iter().find(|e| e["kind"] == "tool_call").unwrap();
    assert_eq!(call["tool"], "bash");
    let result = call["result_html"].as_str().unwrap();
    assert!(result.contains("&lt;script&gt;"), "{result}");
    assert!(
        !result.contains("<script") && !result.contains("<img"),
        "{result}"
    );
    assert!(events.iter().any(|e| {
        e["kind"] == "assistant"
            && e["html"]
                .as_str()
                .unwrap()
                .contains("<strong>markup</strong>")
    }));
    assert!(
        !conversation["usage"].as_array().unwrap().is_empty(),
        "{conversation}"
    );
    let (status, _) = get(&server, "/api/conversations/no-such-id").await;
    assert_eq!(status, 404);

    let (_, stats) = get(&server, "/api/code/stats?days=7").await;
    assert_eq!(stats["stats"]["failures"], 1, "{stats}");
    let (_, failures) = get(&server, "/api/code/failures").await;
    assert!(
        failures["failures"][0]["stderr"]
            .as_str()
            .unwrap()
            .contains("SyntaxError")
    );

    let (_, memory) = get(&server, "/api/memory").await;
    assert_eq!(memory["stats"]["total"], 1, "{memory}");
    let (_, recalled) = get(&server, "/api/memory?q=green%20tea").await;
    assert!(
        recalled["memories"][0]["relevance"].as_f64().is_some(),
        "{recalled}"
    );

    let (_, audit) = get(&server, "/api/audit?source=run").await;
    assert_eq!(audit["rows"][0]["tool"], "bash", "{audit}");
    let (_, empty) = get(&server, "/api/audit?source=telegram").await;
    assert!(empty["rows"].as_array().unwrap().is_empty());
    let (status, _) = get(&server, "/api/audit?source=martians").await;
    assert_eq!(status, 400);
    let (status, _) = get(&server, "/api/audit?since=yesterday").await;
    assert_eq!(status, 400);

    // The page and its assets, with the headers every answer carries.
    let page = client()
        .get(format!("http://{}/", server.addr))
        .send()
        .await
        .unwrap();
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
    assert!(page.text().await.unwrap().contains("/app.js"));
    drop(record);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgetting_is_a_write_that_only_this_page_can_make() {
    let record = Record::new().await;
    let server = serve(record.host.clone(), None, "127.0.0.1:0").await;
    let (_, memory) = get(&server, "/api/memory").await;
    let id = memory["memories"][0]["memory"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let url = format!("http://{}/api/memory/{id}", server.addr);
    let origin = format!("http://{}", server.addr);

    // A cross-site page: a foreign origin, with or without the header.
    for (origin, marked) in [
        ("http://evil.example", true),
        ("http://evil.example", false),
    ] {
        let mut request = client().delete(&url).header("Origin", origin);
        if marked {
            request = request.header("X-Satchel-Request", "1");
        }
        assert_eq!(request.send().await.unwrap().status(), 403);
    }
    // A foreign origin that merely starts like this one.
    let response = client()
        .delete(&url)
        .header("Origin", format!("{origin}.evil.example"))
        .header("X-Satchel-Request", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    // This origin without the header (a plain form post), and no origin.
    let response = client()
        .delete(&url)
        .header("Origin", &origin)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    let response = client()
        .delete(&url)
        .header("X-Satchel-Request", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    let (_, still) = get(&server, "/api/memory").await;
    assert_eq!(still["stats"]["total"], 1);

    let response = client()
        .delete(&url)
        .header("Origin", &origin)
        .header("X-Satchel-Request", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let (_, after) = get(&server, "/api/memory").await;
    assert!(after["memories"].as_array().unwrap().is_empty(), "{after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_host_name_is_refused() {
    let record = Record::new().await;
    let server = serve(record.host.clone(), None, "127.0.0.1:0").await;
    for host in ["evil.example", "evil.example:80", "127.0.0.2"] {
        let response = client()
            .get(format!("http://{}/api/conversations", server.addr))
            .header("Host", host)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 421, "{host}");
    }
    let localhost = format!("localhost:{}", server.addr.port());
    let response = client()
        .get(format!("http://{}/api/conversations", server.addr))
        .header("Host", localhost)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_loopback_a_token_is_required_and_checked() {
    let record = Record::new().await;
    // Refused outright without one.
    let refused = satchel_web::serve(
        record.host.clone(),
        WebOptions {
            addr: "0.0.0.0:0".parse().unwrap(),
            token: None,
            allowed_hosts: Vec::new(),
        },
        CancellationToken::new(),
        |_| {},
    )
    .await;
    assert!(refused.unwrap_err().to_string().contains("--token"));

    let server = serve(record.host.clone(), Some("s3cret-token"), "0.0.0.0:0").await;
    let base = format!("http://127.0.0.1:{}", server.addr.port());
    let host = server.addr.to_string();
    let ask = |auth: Option<&str>| {
        let mut request = client()
            .get(format!("{base}/api/conversations"))
            .header("Host", &host);
        if let Some(auth) = auth {
            request = request.header("Authorization", format!("Bearer {auth}"));
        }
        request.send()
    };
    assert_eq!(ask(None).await.unwrap().status(), 401);
    assert_eq!(ask(Some("wrong")).await.unwrap().status(), 401);
    assert_eq!(ask(Some("s3cret-token")).await.unwrap().status(), 200);
    // The URL the command prints sets a cookie for the browser.
    let first = client()
        .get(format!("{base}/?token=s3cret-token"))
        .header("Host", &host)
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    let cookie = first.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let with_cookie = client()
        .get(format!("{base}/api/conversations"))
        .header("Host", &host)
        .header("Cookie", cookie.split(';').next().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(with_cookie.status(), 200);
}

/// The live background processes are listed, and ended only by this page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_processes_are_listed_and_killed() {
    let record = Record::new().await;
    let server = serve(record.host.clone(), None, "127.0.0.1:0").await;
    let project = record.host.root.clone();
    let request = satchel_exec::ExecRequest::new(
        "bash",
        ["-c", "sleep 300"],
        &project,
        std::time::Duration::from_secs(1),
    );
    let process = record
        .host
        .processes
        .start(
            "conv-1",
            "sleep 300",
            &request,
            false,
            &record.host.tools_config.runner,
        )
        .unwrap();
    let (status, listed) = get(&server, "/api/processes").await;
    assert_eq!(status, 200);
    assert_eq!(
        listed["processes"][0]["process_id"],
        process.id(),
        "{listed}"
    );
    assert_eq!(listed["processes"][0]["conversation"], "conv-1");
    assert_eq!(listed["processes"][0]["state"], "running");

    let url = format!("http://{}/api/processes/{}", server.addr, process.id());
    let origin = format!("http://{}", server.addr);
    let refused = client()
        .delete(&url)
        .header("Origin", "http://evil.example")
        .header("X-Satchel-Request", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    assert!(process.state().is_running());
    let killed = client()
        .delete(&url)
        .header("Origin", &origin)
        .header("X-Satchel-Request", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(killed.status(), 200);
    let body: Value = killed.json().await.unwrap();
    assert_eq!(body["state"], "killed by SIGTERM", "{body}");
}
