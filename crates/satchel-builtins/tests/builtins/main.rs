//! The built-in tools, each against the real parts it drives: processes
//! in the sandbox, a SQLite store, the memory service, local search
//! backends.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
mod bash;
mod code;
mod conversation;
mod fetch;
mod files;
mod memory;
mod native_edits;
mod pdf;
mod policy;
mod process;
mod search;
