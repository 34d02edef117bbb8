//! Runs child processes for agents: each in its own session, in bounded
//! time, with bounded output.
//!
//! An agent's commands are written by a model that cannot see a terminal, so
//! everything that could make a child wait forever is taken away: stdin is
//! empty unless input is given, there is no controlling terminal (password
//! prompts fail at once), pagers and colour are switched off, and every run
//! has a deadline after which the whole process group is stopped. Output is
//! read concurrently from both pipes, kept as head + tail within a byte limit
//! whatever the child prints, and spilled in full to a file when cut.
//!
//! What lives here: [`run`] and its request, configuration and outcome
//! types, and [`background`]: processes that outlive a call. What does not: tools, JSON, models. This crate knows nothing about
//! them.

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod background;
mod capture;
mod config;
mod error;
mod memory;
mod meter;
mod outcome;
mod reapable;
mod result;
mod run;
pub mod sandbox;
mod spill;
mod started;
mod text;

pub use config::{OutputConfig, RunnerConfig, SpillConfig};
pub use error::ExecError;
pub use memory::{give_back_freed_memory, give_back_freed_memory_soon};
pub use meter::OutputMeter;
pub use outcome::{Captured, ExecOutcome, Exit, SpillFile};
pub use reapable::make_children_reapable;
pub use result::cap_result;
pub use run::{ExecRequest, run, run_metered};
pub use sandbox::{Limits, Loopback, LoopbackKind, SandboxReport, SandboxSpec};
pub use text::{clean_terminal_text, collapse_carriage_returns, strip_ansi};
