//! Registry dispatch: name lookup plus input validation, the work done
//! before every tool run. Target: p50 under 20 µs for a small input.
//!
//! Run with `cargo bench -p satchel-tools --bench dispatch`.

#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start the binary, peers and fixtures themselves"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)]
// Tests and benches fail loudly by design.

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

fn dispatch(c: &mut Criterion) {
    let registry = satchel_builtins::builtin_registry().expect("built-in tools register");
    let valid = json!({"command": "ls -la src", "timeout": 10, "working_dir": "."});
    let invalid = json!({"command": "ls", "timeout": -1, "extra": true});

    let mut group = c.benchmark_group("dispatch");
    group.bench_function("lookup only (baseline)", |b| {
        b.iter(|| black_box(registry.get(black_box("bash"))))
    });
    group.bench_function("lookup + validate, valid input", |b| {
        b.iter(|| black_box(registry.check(black_box("bash"), black_box(&valid)).is_ok()))
    });
    group.bench_function("lookup + validate, invalid input (error built)", |b| {
        b.iter(|| {
            black_box(
                registry
                    .check(black_box("bash"), black_box(&invalid))
                    .is_err(),
            )
        })
    });
    group.finish();
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
