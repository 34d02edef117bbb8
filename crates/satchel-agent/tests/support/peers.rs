//! Where the test peers live: `.peers/` at the repository root, installed
//! at pinned versions by `scripts/install-test-peers.sh` (which `.ci/run`
//! calls). A missing peer fails the test with that instruction: tests that
//! need a real peer never skip silently.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};

/// A peer installed by the install script, or a failure that says how to
/// get it.
pub fn peer(relative: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.peers")
        .join(relative);
    assert!(
        path.exists(),
        "test peer {} is missing: run scripts/install-test-peers.sh (CI's .ci/run does)",
        path.display()
    );
    path
}
