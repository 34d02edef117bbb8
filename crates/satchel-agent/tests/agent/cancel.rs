//! Interrupting a statement while a tool runs: the tool's process is
//! stopped at once, the statement ends `Cancelled`, and the call is on
//! record as cancelled (its start record ended too), with no further turn.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use satchel_agent::Outcome;
use satchel_core::ErrorCode;
use satchel_store::AuditStore;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::fake_model::Reply;
use crate::harness::{Harness, process_running};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_mid_tool_stops_the_process_and_records_the_call_as_cancelled() {
    // A duration no other process on the machine has on its command line.
    let marker = format!("29.{}", std::process::id());
    let mut h = Harness::new(
        vec![
            Reply::call("bash", json!({"command": format!("sleep {marker}")})),
            Reply::text("never asked"),
        ],
        json!({}),
    )
    .await;
    let cancel = CancellationToken::new();
    let watcher = {
        let (cancel, marker) = (cancel.clone(), marker.clone());
        async move {
            let deadline = Instant::now() + Duration::from_secs(15);
            while !process_running(&marker) {
                assert!(Instant::now() < deadline, "the tool never started");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            cancel.cancel();
            Instant::now()
        }
    };
    let (report, cancelled_at) = tokio::join!(h.say_until("wait", &cancel), watcher);
    let took = cancelled_at.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "ended {took:?} after the cancel"
    );
    assert_eq!(report.outcome, Outcome::Cancelled);
    assert_eq!((report.turns, report.tool_calls), (1, 1));
    assert!(
        !process_running(&marker),
        "the sleep was stopped with the statement"
    );
    assert_eq!(h.model.main_requests().len(), 1, "no turn after the cancel");

    let calls = h.tool_calls().await;
    assert_eq!(calls.len(), 1);
    assert!(calls[0].output.is_error);
    assert_eq!(
        calls[0].output.error_code,
        Some(ErrorCode::Cancelled),
        "{:?}",
        calls[0].output
    );
    assert_eq!(
        h.store.unfinished_calls().await.unwrap().len(),
        0,
        "its start record was ended"
    );
    assert_eq!(h.events.tools_finished(), [("bash".to_owned(), true)]);
    let log = h.log().await;
    assert_eq!(
        log.last().map(String::as_str),
        Some("error: interrupted by the user"),
        "{log:?}"
    );
}
