//! Answers that go wrong on the wire. A stream cut off after content
//! reached the user is never retried (the user has seen it) and never
//! counted as an answer: the statement fails, the log says why and has no
//! assistant entry, and the history keeps what arrived, marked as cut off,
//! without any half tool call, which never runs. A failure before any
//! content is retried with the same request, and the log says so.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use satchel_agent::Outcome;
use serde_json::json;

use crate::fake_model::{Fault, Reply};
use crate::harness::{Harness, assistant_text, parts_of};

/// Where a cut-off answer stops in the history.
const CUT_OFF_MARK: &str = "\n[answer cut off before the model finished]";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_cut_off_mid_stream_fails_and_is_kept_marked() {
    let cases = [
        // llama.cpp's server when another request interrupts the answer.
        (
            Fault::DoneWithoutFinish("The answer is".into()),
            "The answer is",
            "without saying it was finished",
        ),
        (
            Fault::CutMidText("The answer".into()),
            "The answer",
            "connection failed",
        ),
        (
            Fault::CutBeforeFinish("The whole answer.".into()),
            "The whole answer.",
            "connection failed",
        ),
    ];
    for (fault, shown, reason) in cases {
        // Retries are allowed: none may happen once content was shown.
        let mut h = Harness::new(
            vec![Reply::Fault(fault.clone()), Reply::text("a second answer")],
            json!({"llm": {"maxRetries": 2, "retryBaseDelayMs": 10}}),
        )
        .await;
        let report = h.say("hello").await;
        let Outcome::Failed(error) = &report.outcome else {
            panic!("{fault:?}: {:?}", report.outcome)
        };
        assert!(
            error.contains("was cut off") && error.contains(reason),
            "{fault:?}: {error}"
        );
        assert_eq!(h.model.main_requests().len(), 1, "{fault:?}: not retried");
        assert_eq!(h.events.text(), shown, "{fault:?}");
        assert_eq!(
            report.answer, shown,
            "{fault:?}: what arrived, reported as such"
        );
        assert_eq!(
            h.log().await,
            ["user: hello".to_owned(), format!("error: {error}")],
            "{fault:?}: never logged as an answer"
        );
        let history = h.history().await;
        assert_eq!(history.len(), 2, "{fault:?}: {history:?}");
        assert_eq!(
            assistant_text(&history[1].1),
            format!("{shown}{CUT_OFF_MARK}"),
            "{fault:?}: kept, marked as cut off"
        );
        let usage = h.llm_calls().await;
        assert_eq!(usage.len(), 1);
        assert_eq!(usage[0].call.error.as_deref(), Some(error.as_str()));
        assert_eq!(usage[0].call.stop_reason.as_deref(), Some("interrupted"));
    }
}

/// A tool call whose arguments are cut half-way is never run, never
/// recorded as a call, and left out of the history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_cut_mid_arguments_never_runs() {
    let mut h = Harness::new(
        vec![
            Reply::Fault(Fault::CutMidArguments(
                "bash".into(),
                json!({"command": "echo ran >> runs.txt"}).to_string(),
            )),
            Reply::call("bash", json!({"command": "echo ran >> runs.txt"})),
        ],
        json!({"llm": {"maxRetries": 2, "retryBaseDelayMs": 10}}),
    )
    .await;
    let report = h.say("count").await;
    let Outcome::Failed(error) = &report.outcome else {
        panic!("{:?}", report.outcome)
    };
    assert!(error.contains("was cut off"), "{error}");
    assert_eq!(h.model.main_requests().len(), 1, "not retried");
    assert!(!h.path("runs.txt").exists(), "nothing ran");
    assert_eq!(h.events.tools_started(), 0);
    assert_eq!(h.tool_calls().await.len(), 0);
    assert_eq!(report.tool_calls, 0);
    assert_eq!(report.answer, "");
    let history = h.history().await;
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(
        parts_of(&history[1].1),
        [json!({"type": "text", "text": CUT_OFF_MARK})],
        "no half call in the history"
    );
    assert_eq!(
        h.log().await,
        ["user: count".to_owned(), format!("error: {error}")]
    );
}

/// A request that fails before any content (503, 429 with Retry-After, a
/// stream that ends empty without finishing) is sent again, the same
/// bytes, and the statement ends in the retried answer; the user is told
/// and the log keeps why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_before_any_content_is_retried_and_answered() {
    let cases = [
        (
            Fault::Status(503, Vec::new(), r#"{"error": {"message": "busy"}}"#.into()),
            Duration::ZERO,
        ),
        (
            Fault::Status(
                429,
                vec![("Retry-After", "1".into())],
                r#"{"error": {"message": "slow down"}}"#.into(),
            ),
            Duration::from_secs(1),
        ),
        (Fault::DoneWithoutFinish(String::new()), Duration::ZERO),
    ];
    for (fault, wait) in cases {
        let mut h = Harness::new(
            vec![
                Reply::Fault(fault.clone()),
                Reply::text("Answered after a retry."),
            ],
            json!({"llm": {"maxRetries": 2, "retryBaseDelayMs": 10}}),
        )
        .await;
        let started = Instant::now();
        let report = h.say("hello").await;
        assert_eq!(report.outcome, Outcome::Answered, "{fault:?}");
        assert!(started.elapsed() >= wait, "{fault:?}: Retry-After was kept");
        assert_eq!(report.answer, "Answered after a retry.");
        assert_eq!(h.events.text(), "Answered after a retry.", "{fault:?}");
        let requests = h.model.main_requests();
        assert_eq!(requests.len(), 2, "{fault:?}");
        assert_eq!(
            requests[0], requests[1],
            "a retry re-sends the same request"
        );
        let notices = h.events.notices();
        assert_eq!(notices.len(), 1, "{fault:?}: {notices:?}");
        assert!(
            notices[0].starts_with("the model request is sent again (attempt 2, after "),
            "{notices:?}"
        );
        assert_eq!(
            h.log().await,
            [
                "user: hello".to_owned(),
                format!("auxiliary: {}", notices[0]),
                "assistant: Answered after a retry.".to_owned(),
            ],
            "{fault:?}"
        );
        // One model call on record: the retried one, answered.
        let usage = h.llm_calls().await;
        assert_eq!(usage.len(), 1, "{fault:?}");
        assert_eq!(usage[0].call.error, None);
    }
}

/// When every attempt fails, the statement fails with the last error after
/// `maxRetries` retries, and nothing is logged as an answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_that_run_out_end_in_a_loud_failure() {
    let busy = || {
        Reply::Fault(Fault::Status(
            503,
            Vec::new(),
            r#"{"error": {"message": "busy"}}"#.into(),
        ))
    };
    let mut h = Harness::new(
        vec![busy(), busy(), busy(), Reply::text("too late")],
        json!({"llm": {"maxRetries": 2, "retryBaseDelayMs": 10}}),
    )
    .await;
    let report = h.say("hello").await;
    let Outcome::Failed(error) = &report.outcome else {
        panic!("{:?}", report.outcome)
    };
    assert!(error.contains("503"), "{error}");
    assert_eq!(h.model.main_requests().len(), 3);
    assert_eq!(report.answer, "");
    let log = h.log().await;
    assert_eq!(log.first().map(String::as_str), Some("user: hello"));
    assert_eq!(log.last(), Some(&format!("error: {error}")));
    assert!(!log.iter().any(|l| l.starts_with("assistant:")), "{log:?}");
    // Nothing arrived, so the turn left no assistant row.
    assert_eq!(h.history().await.len(), 1);
}
