//! The store's integration tests, one binary: the shared suite (records,
//! code, concurrency, search) runs on SQLite and on a real PostgreSQL
//! server (`support::TestDb`, `backend_test!`); file-level failures
//! (`open`, `crash`) are SQLite's; `postgres` holds what only a server
//! has: several processes at once, migrations raced, `LISTEN`, copies.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.
#![allow(dead_code)] // Not every module uses every helper.

#[macro_use]
mod support;

mod calls;
mod code;
mod concurrency;
mod crash;
mod front;
mod open;
mod postgres;
mod records;
mod search;
mod steps;
