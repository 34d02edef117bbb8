//! Memory over a real store and the real embedding model: storing, recall,
//! sessions, embedding.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

mod support;

mod embed;
mod memory;
