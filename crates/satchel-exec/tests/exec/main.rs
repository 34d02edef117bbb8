//! The process runner and the sandbox against the real kernel: limits,
//! output caps, process-group kill, Landlock, seccomp and namespaces.
//! (`sandbox_unavailable.rs` is a binary of its own: the sandbox probe runs
//! once per process.)

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

mod background;
mod runner;
mod sandbox;
