//! The policy's shell parser (`policy::shell::simple_commands`: size check,
//! nesting scan, parse on its own thread, walk) on an ordinary 7 KB script
//! and on the deepest script it accepts (100 nested `if`s), against a bare
//! `brush-parser` parse of the same text on the caller's thread.
//!
//! Run with `cargo bench -p satchel-tools --bench shell`.

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
use satchel_tools::policy::shell::{MAX_NESTING, simple_commands};

/// About 7 KB of what agents send: pipes, conditionals, loops, quoting,
/// substitutions and a here-document.
fn ordinary_script() -> String {
    let block = r#"cd "$HOME/project" && git status --short | head -n 20
if [ -f Cargo.toml ]; then
  cargo metadata --format-version 1 --no-deps | jq -r '.packages[].name'
else
  echo "no manifest in $(pwd)" >&2
fi
for f in src/*.rs; do
  wc -l "$f"; grep -n 'TODO\|FIXME' "$f" || true
done
cat > /tmp/notes.txt <<'EOF'
first line
second line with $(not a substitution)
EOF
find . -name '*.log' -mtime +7 -print0 | xargs -0 -r rm -f
"#;
    let mut script = String::new();
    while script.len() < 7 * 1024 {
        script.push_str(block);
    }
    script
}

fn deepest_script() -> String {
    format!(
        "{}echo x{}",
        "if true; then ".repeat(MAX_NESTING),
        "; fi".repeat(MAX_NESTING)
    )
}

fn shell(c: &mut Criterion) {
    let ordinary = ordinary_script();
    let deepest = deepest_script();
    assert!(simple_commands(&ordinary).is_ok());
    assert!(simple_commands(&deepest).is_ok());

    let mut group = c.benchmark_group("shell");
    for (name, script) in [("7 KB script", &ordinary), ("100 nested ifs", &deepest)] {
        group.bench_function(format!("brush-parser only, {name} (baseline)"), |b| {
            b.iter(|| {
                let options = brush_parser::ParserOptions::default();
                black_box(
                    brush_parser::Parser::new(black_box(script.as_bytes()), &options)
                        .parse_program()
                        .is_ok(),
                )
            })
        });
        group.bench_function(format!("simple_commands, {name}"), |b| {
            b.iter(|| black_box(simple_commands(black_box(script)).is_ok()))
        });
    }
    group.finish();
}

criterion_group!(benches, shell);
criterion_main!(benches);
