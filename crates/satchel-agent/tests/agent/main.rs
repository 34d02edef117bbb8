//! The agent loop inside its crate: an [`Agent`](satchel_agent::Agent)
//! built directly from `AgentDeps` (a real SQLite store in a temporary
//! directory, the built-in tools, agent.json read through `HotConfig`)
//! against the scripted OpenAI-wire model of `../support/fake_model.rs`.
//! Each test asserts what the user saw (events, the report) and what the
//! store holds (log, history rows, tool-call and usage rows).
//!
//! One test binary for the crate; each module is one concern:
//! `answers` (plain answers, tool turns, the turn budget), `faults`
//! (streams cut off on the wire, retries), `cancel` (interrupting a
//! running tool).

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

#[path = "../support/fake_model.rs"]
mod fake_model;
#[path = "../support/processes.rs"]
mod processes;

mod answers;
mod cancel;
mod faults;
mod harness;
