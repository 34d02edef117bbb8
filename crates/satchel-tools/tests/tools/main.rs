//! The tool runtime: external tools discovered and called through the runner,
//! tools added at run time, the registry, agent.json's schema, and property
//! tests of the shell policy.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

mod config_schema;
mod external;
mod extra_tools;
mod policy_props;
mod registry;
