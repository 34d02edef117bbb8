//! The web view in a real browser: Debian's chromium driven by
//! playwright-core (installed into `.peers/` by
//! `scripts/install-test-peers.sh`; chromium by `.ci/run`).

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::peers::peer;
use crate::{Record, serve};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_sees_the_record_and_hostile_output_stays_inert() {
    assert!(
        Path::new("/usr/bin/chromium").exists(),
        "chromium is missing: apt-get install chromium (CI's .ci/run does)"
    );
    let playwright = peer("node_modules/playwright-core");
    use crate::fake_model::Reply;
    let record = Record::new().await;
    let marker = record._dir.path().join("allowed-in-the-browser");
    let mark = format!("57.{}", std::process::id());
    record.model.push(vec![
        Reply::text("The browser got an answer."),
        Reply::call(
            "bash",
            serde_json::json!({"command": format!("touch {}", marker.display())}),
        ),
        Reply::text("The page allowed it."),
        Reply::call(
            "bash",
            serde_json::json!({"command": format!("sleep {mark}"), "timeout": 120}),
        ),
        // Stopped before the model is asked again: no reply for it.
        Reply::text("From the other tab."),
    ]);
    let server = serve(record.host.clone(), None, "127.0.0.1:0").await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/browser.js");
    let base = format!("http://{}", server.addr);
    let shots = std::env::var("SATCHEL_WEB_SCREENSHOTS").ok();
    let output = tokio::task::spawn_blocking(move || {
        let mut command = Command::new("node");
        command.arg(&script).arg(&playwright).arg(&base);
        if let Some(dir) = shots {
            command.arg(dir);
        }
        command.output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|error| {
        panic!(
            "no report ({error}): {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    assert!(report["failure"].is_null(), "{report:#}");
    assert_eq!(report["titles"][0], "Printing markup", "{report:#}");
    let tool = report["tool_text"].as_str().unwrap();
    assert!(
        tool.contains("<script>window.hacked=1</script>"),
        "shown as text: {tool}"
    );
    assert!(report["hacked"].is_null(), "a script ran: {report:#}");
    assert_eq!(report["injected"], 0, "{report:#}");
    assert!(
        report["answer_html"]
            .as_str()
            .unwrap()
            .contains("<strong>markup</strong>")
    );
    let chat = report["chat"].to_string();
    assert!(chat.contains("The browser got an answer"), "{report:#}");
    let question = report["question"].as_str().unwrap();
    assert!(question.contains("touch"), "{report:#}");
    assert!(marker.exists(), "allowed in the page, the call ran");
    assert_eq!(report["stopped"], "Stopped.", "{report:#}");
    assert!(
        !crate::running(&format!("sleep {mark}")),
        "Stop ended the process"
    );
    assert_eq!(report["followed"], true, "{report:#}");
    assert!(
        report["search_none"]
            .as_str()
            .unwrap()
            .contains("Nothing recorded"),
        "{report:#}"
    );
    assert_eq!(report["search_found"], 1);
    assert_eq!(report["mid_memories"], 0, "{report:#}");
    assert_eq!(report["memories_before"], 1);
    assert_eq!(
        report["dialogs"].as_array().unwrap().len(),
        1,
        "one confirmation: {report:#}"
    );
    assert!(report["audit_rows"].as_u64().unwrap() >= 1);
    assert!(
        report["code_text"]
            .as_str()
            .unwrap()
            .contains("SyntaxError")
    );
    assert!(
        report["errors"].as_array().unwrap().is_empty(),
        "{report:#}"
    );
    assert!(
        report["console"].as_array().unwrap().is_empty(),
        "CSP or script errors: {report:#}"
    );
    drop(record);
}
