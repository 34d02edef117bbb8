//! What translating tool schemas for each consumer costs (issue #45).
//!
//! First a table of prompt tokens (o200k) of the tool definitions as each
//! provider's request carries them, before translation (the schemas as
//! written, in the same wire shape) and after: for Satchel's built-in
//! tools, and for 200 imported tools made from the corpus of real MCP
//! servers (`satchel-core/tests/data`). The goal: after ≤ 1.10 × before.
//! Then criterion times translating the 200 imported tools, against
//! serialising them untranslated in the same run.
//!
//! `cargo bench -p satchel-host --bench schemas`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]
// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use satchel_core::ToolSpec;
use satchel_core::portable::{SchemaConsumer, schema_for};
use satchel_llm::{Encoding, count_tokens, native_tools_json};
use serde_json::{Value, json};

/// 200 imported tools: the corpus's tools, repeated under new names.
fn imported() -> Vec<ToolSpec> {
    let corpus: Value = serde_json::from_str(include_str!(
        "../../satchel-core/tests/data/mcp-tool-schemas.json"
    ))
    .unwrap();
    let mut real = Vec::new();
    for (server, tools) in corpus["servers"].as_object().unwrap() {
        for tool in tools.as_array().unwrap() {
            real.push((
                format!("{server}__{}", tool["name"].as_str().unwrap()),
                tool["inputSchema"].clone(),
            ));
        }
    }
    (0..200)
        .map(|i| {
            let (name, schema) = &real[i % real.len()];
            ToolSpec {
                name: format!("{}_{i}", name.replace('-', "_")),
                title: None,
                description: "An imported tool.".into(),
                input_schema: schema.clone(),
                output_schema: None,
                annotations: Default::default(),
                capabilities: Default::default(),
            }
        })
        .collect()
}

fn builtins() -> Vec<ToolSpec> {
    satchel_builtins::builtin_registry()
        .unwrap()
        .specs()
        .cloned()
        .collect()
}

/// The tools array with every schema as written, in `consumer`'s shape.
fn untranslated(consumer: SchemaConsumer, tools: &[ToolSpec]) -> String {
    let wire: Vec<Value> = tools
        .iter()
        .map(|tool| match consumer {
            SchemaConsumer::Anthropic => {
                json!({"name": tool.name, "description": tool.description, "input_schema": tool.input_schema})
            }
            _ => json!({"type": "function", "function": {"name": tool.name, "description": tool.description, "parameters": tool.input_schema}}),
        })
        .collect();
    serde_json::to_string(&wire).unwrap()
}

fn token_table() {
    println!("\nPrompt tokens (o200k) of the tool definitions, before and after translation");
    println!(
        "{:<22} {:<10} {:>8} {:>8} {:>7}",
        "tools", "consumer", "before", "after", "ratio"
    );
    for (label, tools) in [("built-ins", builtins()), ("200 imported", imported())] {
        for consumer in [
            SchemaConsumer::Anthropic,
            SchemaConsumer::OpenAi,
            SchemaConsumer::Gemini,
        ] {
            let before = count_tokens(Encoding::O200k, &untranslated(consumer, &tools));
            let after = count_tokens(
                Encoding::O200k,
                &native_tools_json(consumer, &tools).unwrap(),
            );
            println!(
                "{label:<22} {consumer:<10} {before:>8} {after:>8} {:>7.3}",
                after as f64 / before as f64
            );
        }
    }
    let tools = builtins();
    println!("\nper built-in tool, Anthropic:");
    for tool in &tools {
        let one = std::slice::from_ref(tool);
        let before = count_tokens(
            Encoding::O200k,
            &untranslated(SchemaConsumer::Anthropic, one),
        );
        let after = count_tokens(
            Encoding::O200k,
            &native_tools_json(SchemaConsumer::Anthropic, one).unwrap(),
        );
        println!(
            "  {:<20} {before:>6} {after:>6} {:>7.3}",
            tool.name,
            after as f64 / before as f64
        );
    }
    println!();
}

fn bench(c: &mut Criterion) {
    token_table();
    let tools = imported();
    let mut group = c.benchmark_group("200 imported tools");
    group.bench_function("serialise as written (baseline)", |b| {
        b.iter(|| untranslated(SchemaConsumer::Anthropic, black_box(&tools)))
    });
    for consumer in [
        SchemaConsumer::Anthropic,
        SchemaConsumer::OpenAi,
        SchemaConsumer::Gemini,
    ] {
        group.bench_function(format!("translate for {consumer}"), |b| {
            b.iter(|| {
                for tool in black_box(&tools) {
                    black_box(schema_for(&tool.input_schema, consumer).unwrap());
                }
            })
        });
        group.bench_function(format!("tools array for {consumer}"), |b| {
            b.iter(|| native_tools_json(consumer, black_box(&tools)).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
