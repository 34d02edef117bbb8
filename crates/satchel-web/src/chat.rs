//! The chat page's server side: a statement run through the host in a
//! conversation (new, or a recorded one), its events streamed to the page
//! as server-sent events, consent questions answered from the page, Stop.
//!
//! A run keeps every event it produced, so a page that connects late (or
//! a second tab) sees the whole answer; one conversation runs one
//! statement at a time.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use satchel_agent::{AgentEvent, Outcome};
use satchel_core::ToolCall;
use satchel_host::ConversationOptions;
use satchel_store::AuditSource;
use satchel_tools::policy::Decision;
use satchel_tools::{Consent, ConsentAnswer, RememberingConsent, Style};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use crate::runs::Run;
use crate::state::{ApiError, AppState};

/// Runs kept before finished ones are let go.
const KEPT_RUNS: usize = 64;

/// How long a consent question waits for the page.
const CONSENT_WAIT: Duration = Duration::from_secs(300);

/// Asks the page.
struct PageConsent {
    run: Arc<Run>,
}

#[async_trait]
impl Consent for PageConsent {
    async fn ask(&self, call: &ToolCall, decision: &Decision) -> ConsentAnswer {
        let id = format!(
            "q{}",
            self.run
                .events
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .len()
        );
        let (tx, rx) = oneshot::channel();
        self.run
            .questions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), tx);
        self.run.push(json!({
            "type": "consent", "id": id, "tool": call.name,
            "input": call.input, "why": decision.explanation(),
        }));
        let answer = tokio::select! {
            answer = rx => answer.unwrap_or(ConsentAnswer::Nobody),
            () = self.run.cancel.cancelled() => ConsentAnswer::Cancel,
            () = tokio::time::sleep(CONSENT_WAIT) => ConsentAnswer::Deny {
                reason: Some("nobody answered in the page".into()),
            },
        };
        self.run
            .questions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        self.run.push(json!({"type": "consent_answered", "id": id}));
        answer
    }
}

fn event_json(event: AgentEvent) -> Option<Value> {
    Some(match event {
        AgentEvent::TextDelta(text) => json!({"type": "text", "text": text}),
        AgentEvent::ToolStarted {
            call_id,
            tool,
            display,
        } => {
            json!({"type": "tool_started", "call_id": call_id, "tool": tool, "display": display})
        }
        AgentEvent::ToolFinished {
            call_id,
            tool,
            is_error,
            duration,
            ..
        } => json!({
            "type": "tool_finished", "call_id": call_id, "tool": tool, "is_error": is_error,
            "duration_ms": duration.as_millis() as u64,
        }),
        AgentEvent::Notice(text) => json!({"type": "notice", "text": text}),
        _ => return None,
    })
}

/// `{conversation?, text}`
#[derive(Deserialize)]
pub(crate) struct Start {
    conversation: Option<String>,
    text: String,
}

/// Starts a statement; answers the run's id.
pub(crate) async fn start(
    State(state): State<Arc<AppState>>,
    Json(start): Json<Start>,
) -> Result<Json<Value>, ApiError> {
    let text = start.text.trim().to_owned();
    if text.is_empty() {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "nothing to say"));
    }
    let key = start.conversation.clone().unwrap_or_default();
    let run = Arc::new(Run {
        events: Mutex::default(),
        changed: Notify::new(),
        cancel: CancellationToken::new(),
        questions: Mutex::default(),
        conversation: Mutex::new(start.conversation.clone()),
    });
    let id = format!("r{:x}", rand_id());
    if !key.is_empty() {
        let mut busy = state.runs.busy.lock().unwrap_or_else(|p| p.into_inner());
        if busy.contains_key(&key) {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "this conversation is answering already",
            ));
        }
        busy.insert(key.clone(), id.clone());
    }
    let mut agent = match state
        .host
        .conversation(ConversationOptions {
            source: AuditSource::Web,
            caller: Some("web".into()),
            memory_namespace: None,
            consent: Arc::new(RememberingConsent::new(PageConsent { run: run.clone() })),
            display: Style::Markdown,
            resume: start.conversation.clone(),
        })
        .await
    {
        Ok(agent) => agent,
        Err(error) => {
            state
                .runs
                .busy
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&key);
            return Err(ApiError::new(StatusCode::NOT_FOUND, &format!("{error:#}")));
        }
    };
    {
        let mut runs = state.runs.runs.lock().unwrap_or_else(|p| p.into_inner());
        // Finished runs stay for pages that connect late, a few at a time.
        if runs.len() >= KEPT_RUNS {
            runs.retain(|_, run| !run.finished());
        }
        runs.insert(id.clone(), run.clone());
    }
    let runs_state = state.clone();
    tokio::spawn(async move {
        // However the task ends (a panic included), the run is finished
        // and the conversation free again.
        let _finish = Finish {
            run: run.clone(),
            state: runs_state.clone(),
            key: key.clone(),
        };
        let sink = {
            let run = run.clone();
            move |event: AgentEvent| {
                if let Some(json) = event_json(event) {
                    run.push(json);
                }
            }
        };
        let result = agent.statement(&text, &run.cancel, &sink).await;
        let conversation = agent.conversation_id().map(str::to_owned);
        *run.conversation.lock().unwrap_or_else(|p| p.into_inner()) = conversation.clone();
        let (outcome, message) = match result {
            Ok(report) => match report.outcome {
                Outcome::Answered => ("answered", None),
                Outcome::TurnLimit => ("turn_limit", None),
                Outcome::Cancelled => ("stopped", None),
                Outcome::Failed(message) => ("failed", Some(message)),
            },
            Err(error) => ("failed", Some(error.to_string())),
        };
        run.push(json!({"type": "done", "outcome": outcome, "error": message, "conversation": conversation}));
    });
    Ok(Json(json!({"run": id})))
}

/// Ends a run when its task ends: `done` if none was sent (the statement
/// panicked), and its conversation free for the next statement.
struct Finish {
    run: Arc<Run>,
    state: Arc<AppState>,
    key: String,
}

impl Drop for Finish {
    fn drop(&mut self) {
        if !self.run.finished() {
            self.run.push(json!({
                "type": "done", "outcome": "failed",
                "error": "the statement stopped unexpectedly; the record has what was done",
                "conversation": self.run.conversation.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            }));
        }
        self.state
            .runs
            .busy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.key);
    }
}

fn rand_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()));
    (NEXT.fetch_add(1, Ordering::Relaxed) << 32) | nanos
}

fn run_of(state: &AppState, id: &str) -> Result<Arc<Run>, ApiError> {
    state
        .runs
        .runs
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(id)
        .cloned()
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "no such run"))
}

/// The run's events as server-sent events: all of them from the start,
/// then each as it comes, until `done`.
pub(crate) async fn events(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    headers: axum::http::HeaderMap,
) -> Result<Sse<impl futures_util::Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let run = run_of(&state, &id)?;
    // A browser that reconnects says what it had: it gets only the rest.
    let from = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<usize>().ok())
        .map_or(0, |last| last + 1);
    let stream = futures_util::stream::unfold((run, from), |(run, sent)| async move {
        loop {
            let next = {
                let notified = run.changed.notified();
                tokio::pin!(notified);
                // Registered before looking, so no event slips between.
                notified.as_mut().enable();
                let next = run
                    .events
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(sent)
                    .cloned();
                match next {
                    Some(event) => Some(event),
                    None if run.finished() => return None,
                    None => {
                        notified.await;
                        None
                    }
                }
            };
            if let Some(event) = next {
                let data = Event::default()
                    .id(sent.to_string())
                    .data(event.to_string());
                return Some((Ok(data), (run, sent + 1)));
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// `{id, answer: once | conversation | deny}`
#[derive(Deserialize)]
pub(crate) struct Answer {
    id: String,
    answer: String,
}

/// The page's answer to a consent question.
pub(crate) async fn consent(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    Json(answer): Json<Answer>,
) -> Result<Json<Value>, ApiError> {
    let run = run_of(&state, &id)?;
    let sender = run
        .questions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&answer.id)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "no such question (answered or expired)",
            )
        })?;
    let reply = match answer.answer.as_str() {
        "once" => ConsentAnswer::AllowOnce,
        "conversation" => ConsentAnswer::AllowForConversation,
        _ => ConsentAnswer::Deny { reason: None },
    };
    let _ = sender.send(reply);
    Ok(Json(json!({"answered": answer.id})))
}

/// Stops the run and its processes.
pub(crate) async fn stop(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let run = run_of(&state, &id)?;
    run.cancel.cancel();
    Ok(Json(json!({"stopping": id})))
}
