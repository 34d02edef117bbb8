//! What progress notifications cost: `bash` printing 1 GiB of lines, called
//! over stdio with a progress token and without, alternately, from one rmcp
//! client that counts the notifications it gets.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, NumberOrString, ProgressNotificationParam, ProgressToken,
    RequestMetaObject,
};
use rmcp::service::{NotificationContext, RoleClient};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::json;
use tokio::process::Command;

/// Calls of each kind.
const RUNS: usize = 3;

/// The command: 1 GiB of 17-byte lines.
const COMMAND: &str = "yes 'a line of output' | head -c 1073741824";

/// Counts progress notifications.
#[derive(Clone, Default)]
struct Counter(Arc<AtomicUsize>);

impl ClientHandler for Counter {
    async fn on_progress(
        &self,
        _params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Measures and prints the progress table.
pub(crate) async fn measure(satchel: &Path, project: &Path) {
    // Trust mode: the row measures progress, not the sandbox.
    std::fs::create_dir_all(project.join(".agents")).unwrap();
    std::fs::write(
        project.join(".agents/agent.json"),
        r#"{"permissions": {"mode": "trust"}}"#,
    )
    .unwrap();
    let mut child = super::isolate(&mut Command::new(satchel))
        .args(["-C", &project.display().to_string(), "mcp", "serve"])
        .env("SATCHEL_TRUST_PROJECT", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let transport = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let counter = Counter::default();
    let client = counter.clone().serve(transport).await.unwrap();

    let mut plain = Vec::new();
    let mut with_progress = Vec::new();
    for run in 0..RUNS * 2 {
        let arguments = json!({"command": COMMAND, "timeout": 600});
        let mut params = CallToolRequestParams::new("bash")
            .with_arguments(arguments.as_object().unwrap().clone());
        let tracked = run % 2 == 1;
        if tracked {
            let token = ProgressToken(NumberOrString::Number(i64::try_from(run).unwrap()));
            params.meta = Some(RequestMetaObject::with_progress_token(token));
        }
        let started = Instant::now();
        let result = tokio::time::timeout(Duration::from_secs(600), client.call_tool(params))
            .await
            .expect("the 1 GiB call timed out")
            .unwrap();
        let elapsed = started.elapsed();
        assert_ne!(result.is_error, Some(true), "{result:?}");
        if tracked {
            with_progress.push(elapsed);
        } else {
            plain.push(elapsed);
        }
    }
    let _ = client.cancel().await;
    let median = |samples: &mut Vec<Duration>| {
        samples.sort();
        samples[samples.len() / 2]
    };
    let (plain, tracked) = (median(&mut plain), median(&mut with_progress));
    let notifications = counter.0.load(Ordering::Relaxed);
    println!();
    println!("bash printing 1 GiB of lines over stdio, {RUNS} calls each, alternating");
    println!("{:<28} {:>12}", "call", "median s");
    println!(
        "{:<28} {:>12.2}",
        "without a progress token",
        plain.as_secs_f64()
    );
    println!(
        "{:<28} {:>12.2}",
        "with a progress token",
        tracked.as_secs_f64()
    );
    println!(
        "ratio with / without: {:.3}; {notifications} progress notifications over {RUNS} calls",
        tracked.as_secs_f64() / plain.as_secs_f64()
    );
}
