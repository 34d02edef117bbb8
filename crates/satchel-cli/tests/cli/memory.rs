//! End-to-end: `satchel memory` and the memory tool through `tools call`,
//! and `satchel bench memory`.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::cli::{Sandbox, stderr, stdout_json};

#[test]
fn memory_commands_store_recall_list_and_forget() {
    // No model in this sandbox's data directory: keyword recall, said once.
    let sandbox = Sandbox::new();
    let output = sandbox.run(&[
        "memory",
        "store",
        "long",
        "The user prefers green tea in the morning",
        "--category",
        "preference",
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let stored = stdout_json(&output);
    assert_eq!(stored["success"], true);
    assert_eq!(stored["action"], "created");
    let id = stored["memories"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(stored["memories"][0]["category"], "preference");

    // The same text again updates it, and says so.
    let output = sandbox.run(&[
        "memory",
        "store",
        "long",
        "the user prefers green tea in the morning",
        "--json",
    ]);
    let again = stdout_json(&output);
    assert_eq!(again["action"], "updated");
    assert_eq!(again["memories"][0]["id"], id.as_str());
    assert!(
        again["message"]
            .as_str()
            .unwrap()
            .contains("updated instead of adding a copy")
    );

    let output = sandbox.run(&["memory", "recall", "what tea does the user drink", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let recalled = stdout_json(&output);
    assert_eq!(recalled["memories"][0]["id"], id.as_str());
    assert!(recalled["memories"][0]["relevance"].as_f64().unwrap() > 0.0);
    assert!(
        recalled["notice"]
            .as_str()
            .unwrap()
            .contains("keywords only"),
        "{recalled}"
    );

    let output = sandbox.run(&["memory", "recall", "green tea"]);
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(text.starts_with("ID"), "{text}");
    // Said once, not once by the memory and again by the command.
    assert_eq!(
        stderr(&output).matches("keywords only").count(),
        1,
        "{}",
        stderr(&output)
    );
    assert!(text.contains("prefers green tea"), "{text}");

    let output = sandbox.run(&["memory", "store", "long", "Ship it", "--category", "goal"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("belongs to the `mid` layer"),
        "{}",
        stderr(&output)
    );

    let output = sandbox.run(&["memory", "stats", "--json"]);
    let stats = stdout_json(&output);
    assert_eq!(stats["total"], 1);
    assert_eq!(stats["semantic_recall"], false);

    let output = sandbox.run(&["memory", "forget", &id, "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout_json(&output)["action"], "forgotten");
    let output = sandbox.run(&["memory", "list", "--json"]);
    assert_eq!(stdout_json(&output)["memories"], json!([]));
    let output = sandbox.run(&["memory", "forget", &id]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("no memory with id"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn the_memory_tool_goes_through_tools_call() {
    let sandbox = Sandbox::new();
    let output = sandbox.run(&[
        "tools",
        "call",
        "memory",
        r#"{"action": "store", "layer": "mid", "content": "Finish the report by Friday", "category": "goal"}"#,
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout_json(&output)["action"], "created");
    let output = sandbox.run(&["tools", "call", "memory", r#"{"action": "recall"}"#]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout_json(&output)["error_code"], "INVALID_PARAMS");
}

#[test]
fn bench_memory_runs_on_a_small_locomo_file() {
    let sandbox = Sandbox::new();
    let dataset = sandbox.dir.path().join("tiny.json");
    std::fs::write(
        &dataset,
        r#"[{"sample_id": "t1", "conversation": {"speaker_a": "Ann", "speaker_b": "Bo",
            "session_1_date_time": "1:00 pm on 1 June, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I bought a red bicycle yesterday."},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Nice! I am learning to bake sourdough bread."},
                {"speaker": "Ann", "dia_id": "D1:3", "text": "My sister lives in Lisbon now."}]},
            "qa": [{"question": "What did Ann buy?", "evidence": ["D1:1"], "category": 4},
                   {"question": "Where does Ann's sister live?", "evidence": ["D:1:3"], "category": 4},
                   {"question": "no evidence", "category": 5}]}]"#,
    )
    .unwrap();
    let details = sandbox.dir.path().join("details.jsonl");
    let output = sandbox.run(&[
        "bench",
        "memory",
        "--dataset",
        dataset.to_str().unwrap(),
        "--details",
        details.to_str().unwrap(),
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines: Vec<Value> = std::fs::read_to_string(&details)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "one line per question with evidence");
    assert_eq!(lines[0]["question"], "What did Ann buy?");
    let found: Vec<&Value> = lines[0]["recalled"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["evidence"] == true)
        .collect();
    assert_eq!(found.len(), 1, "{lines:#?}");
    assert_eq!(found[0]["dia_id"], "D1:1");
    assert_eq!(
        found[0]["content"],
        r#"Ann said, "I bought a red bicycle yesterday.""#
    );
    let figures = stdout_json(&output);
    assert_eq!(figures["memories"], 3);
    assert_eq!(figures["overall"]["questions"], 2);
    assert_eq!(figures["overall"]["recall_at_5"], 1.0);
    assert_eq!(figures["mode"], "keywords only (BM25)");
    assert!(figures["recall_latency_ms"]["p50"].as_f64().unwrap() > 0.0);
}

#[test]
fn bench_memory_times_recall_over_a_synthetic_corpus() {
    let sandbox = Sandbox::new();
    // Few enough rows for an exact scan by default: ask for the two-stage
    // search, so its agreement with the exact one is measured too.
    let config = sandbox.dir.path().join("config/satchel");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("agent.json"),
        r#"{"memory": {"recall": {"exactScanLimit": 100}}}"#,
    )
    .unwrap();
    let model = satchel_memory::testing::model_dir();
    let output = sandbox.run(&[
        "bench",
        "memory",
        "--synthetic",
        "500",
        "--queries",
        "5",
        "--model-dir",
        model.to_str().unwrap(),
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let figures = stdout_json(&output);
    assert_eq!(figures["memories"], 500);
    assert_eq!(figures["queries"], 5);
    // Six pseudo-words and a number, each several word pieces.
    let tokens = figures["query_tokens_mean"].as_f64().unwrap();
    assert!((10.0..40.0).contains(&tokens), "{tokens}");
    let timings = figures["timings"].as_array().unwrap();
    assert_eq!(timings[0]["what"], "recall (hybrid, as the tool runs it)");
    for timing in timings {
        assert!(timing["p50_ms"].as_f64().unwrap() > 0.0, "{timing}");
    }
    assert_eq!(figures["recall_uses_two_stage"], true);
    let kept = figures["recall_top_10_vs_exact_search"].as_f64().unwrap();
    assert!((0.5..=1.0).contains(&kept), "{kept}");

    let output = sandbox.run(&[
        "bench",
        "memory",
        "--synthetic",
        "500",
        "--model-dir",
        sandbox.dir.path().join("nowhere").to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2), "a setup error");
    assert!(
        stderr(&output).contains("satchel doctor --fix"),
        "{}",
        stderr(&output)
    );
}
