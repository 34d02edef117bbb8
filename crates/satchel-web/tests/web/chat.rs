//! The chat page's server side: a statement run from the page streams as
//! server-sent events, asks consent through the page, stops on Stop, and
//! is recorded under the `web` source.

use std::time::Duration;

use futures_util::StreamExt as _;
use satchel_store::{AuditQuery, AuditSource, AuditStore as _};
use serde_json::{Value, json};

use crate::fake_model::Reply;
use crate::{Record, Server, client, serve};

/// `POST path` as the page sends it.
async fn post(server: &Server, path: &str, body: Value) -> (u16, Value) {
    let response = client()
        .post(format!("http://{}{path}", server.addr))
        .header("Origin", format!("http://{}", server.addr))
        .header("X-Satchel-Request", "1")
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The run's events, read as they come until `stop_at` says enough (or
/// the stream ends).
struct Events {
    stream: std::pin::Pin<
        Box<dyn futures_util::Stream<Item = reqwest::Result<axum::body::Bytes>> + Send>,
    >,
    buffer: String,
    pub(crate) seen: Vec<Value>,
}

impl Events {
    async fn open(server: &Server, run: &str) -> Events {
        Events::resume(server, run, None).await
    }

    /// As a browser reconnecting after event `last`.
    async fn resume(server: &Server, run: &str, last: Option<usize>) -> Events {
        let mut request = client().get(format!("http://{}/api/chat/{run}/events", server.addr));
        if let Some(last) = last {
            request = request.header("Last-Event-ID", last.to_string());
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        Events {
            stream: Box::pin(response.bytes_stream()),
            buffer: String::new(),
            seen: Vec::new(),
        }
    }

    /// Reads until an event of `kind` arrives; returns it.
    async fn until(&mut self, kind: &str) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                for line in block.lines() {
                    if let Some(data) = line.strip_prefix("data:") {
                        let event: Value = serde_json::from_str(data.trim()).unwrap();
                        self.seen.push(event.clone());
                        if event["type"] == kind {
                            return event;
                        }
                    }
                }
            }
            let chunk = tokio::time::timeout_at(deadline, self.stream.next())
                .await
                .unwrap_or_else(|_| panic!("no {kind} event: {:#?}", self.seen))
                .unwrap_or_else(|| panic!("the stream ended before {kind}: {:#?}", self.seen))
                .unwrap();
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_from_the_page_streams_and_is_recorded() {
    let record = Record::new().await;
    record
        .model
        .push(vec![Reply::text("Hello from the page, streamed.")]);
    let server = serve(record.host.clone(), None, "127.0.0.1:0").await;
    let (status, started) = post(&server, "/api/chat", json!({"text": "hi"})).await;
    assert_eq!(status, 200, "{started}");
    let run = started["run"].as_str().unwrap();
    let mut events = Events::open(&server, run).await;
    let done = events.until("done").await;
    assert_eq!(done["outcome"], "answered", "{:#?}", events.seen);
    let text: String = events
        .seen
        .iter()
        .filter(|e| e["type"] == "text")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(text, "Hello from the page, streamed.");
    let conversation = done["conversation"].as_str().unwrap();
    assert_ne!(conversation, record.conversation, "a new conversation");
    // A page that connects after the end sees the whole run.
    let mut late = Events::open(&server, run).await;
    assert_eq!(late.until("done").await["outcome"], "answered");
    assert_eq!(late.seen.len(), events.seen.len());
    // One that reconnects gets only what it missed: no text twice.
    let mut resumed = Events::resume(&server, run, Some(events.seen.len() - 2)).await;
    resumed.until("done").await;
    assert_eq!(resumed.seen.len(), 1, "{:#?}", resumed.seen);

    // Going on in the recorded conversation, and a cross-site attempt.
    record.model.push(vec![Reply::text("Second answer.")]);
    let response = client()
        .post(format!("http://{}/api/chat", server.addr))
        .header("Origin", "http://evil.example")
        .header("X-Satchel-Request", "1")
        .json(&json!({"text": "from elsewhere", "conversation": conversation}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    let (_, again) = post(
        &server,
        "/api/chat",
        json!({"text": "more", "conversation": conversation}),
    )
    .await;
    let mut events = Events::open(&server, again["run"].as_str().unwrap()).await;
    assert_eq!(events.until("done").await["conversation"], conversation);
    let (status, _) = post(
        &server,
        "/api/chat",
        json!({"text": "x", "conversation": "no-such"}),
    )
    .await;
    assert_eq!(status, 404);
    drop(record);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consent_is_asked_in_the_page_and_the_call_is_on_the_web_audit_trail() {
    let record = Record::new().await;
    let marker = record._dir.path().join("made-by-the-page");
    record.model.push(vec![
        Reply::call(
            "bash",
            json!({"command": format!("touch {}", marker.display())}),
        ),
        Reply::text("Made it."),
    ]);
    let server = serve(record.host.clone(), None, "127.0.0.1:0").await;
    let (_, started) = post(&server, "/api/chat", json!({"text": "make a file"})).await;
    let run = started["run"].as_str().unwrap().to_owned();
    let mut events = Events::open(&server, &run).await;
    let question = events.until("consent").await;
    assert_eq!(question["tool"], "bash");
    assert!(
        question["input"]["command"]
            .as_str()
            .unwrap()
            .contains("touch")
    );
    assert!(!marker.exists());
    let (status, _) = post(
        &server,
        &format!("/api/chat/{run}/consent"),
        json!({"id": question["id"], "answer": "once"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(events.until("done").await["outcome"], "answered");
    assert!(marker.exists());
    let store = record.host.store.get().await.unwrap().clone();
    let rows = store
        .audit(AuditQuery {
            source: Some(AuditSource::Web),
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].caller.as_deref(), Some("web"));
    drop(record);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_ends_the_statement_and_its_process() {
    let record = Record::new().await;
    let mark = format!("58.{}", std::process::id());
    record.model.push(vec![
        Reply::call(
            "bash",
            json!({"command": format!("sleep {mark}"), "timeout": 120}),
        ),
        Reply::text("never"),
    ]);
    let server = serve(record.host.clone(), None, "127.0.0.1:0").await;
    let (_, started) = post(&server, "/api/chat", json!({"text": "sleep"})).await;
    let run = started["run"].as_str().unwrap().to_owned();
    let mut events = Events::open(&server, &run).await;
    events.until("tool_started").await;
    let (status, _) = post(&server, &format!("/api/chat/{run}/stop"), json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(events.until("done").await["outcome"], "stopped");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while crate::running(&format!("sleep {mark}")) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the sleep outlived Stop"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(record);
}
