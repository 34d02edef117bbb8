//! A kernel that cannot sandbox (simulated: the probe is told Landlock is
//! missing) fails closed: the command does not run, and the error says why.
//! Its own test binary, because the probe runs once per process.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

use std::time::Duration;

use satchel_exec::sandbox::{DISABLE_ENV, probe};
use satchel_exec::{ExecError, ExecRequest, RunnerConfig, SandboxSpec, run};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn without_landlock_nothing_runs() {
    // SAFETY: set before anything in this process reads the environment
    // concurrently (the probe has not run yet).
    unsafe { std::env::set_var(DISABLE_ENV, "landlock") };
    assert_eq!(probe().landlock_abi, 0);
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let mut request = ExecRequest::new(
        "/bin/bash",
        ["-c", &format!("touch {}", marker.display())],
        dir.path(),
        Duration::from_secs(10),
    );
    request.sandbox = Some(SandboxSpec::new(vec![dir.path().to_path_buf()]));
    let error = run(
        &request,
        &RunnerConfig::default(),
        &CancellationToken::new(),
    )
    .await
    .unwrap_err();
    match error {
        ExecError::SandboxUnavailable { reason } => {
            assert!(reason.contains("Landlock"), "{reason}")
        }
        other => panic!("expected SandboxUnavailable, got {other:?}"),
    }
    assert!(!marker.exists(), "the command ran without its sandbox");
}
