//! `satchel run --record FILE` and `--replay FILE`: a session recorded
//! against the scripted model replays with no model reachable and gives
//! the same transcript; a changed prompt fails the replay naming the first
//! request that differs and where; no API key reaches a cassette.

use std::net::TcpListener;

use serde_json::{Value, json};

use crate::fake_model::{FakeModel, Reply};
use crate::support::project::{Project, log_entries};

/// A key the recorder must leave out of the cassette.
const KEY: &str = "sk-test-cassette-0123456789abcdef";

fn config(base_url: &str) -> Value {
    json!({
        "llm": {"provider": "openai", "baseUrl": base_url, "model": "gpt-4o",
                "maxRetries": 0, "requestTimeoutSecs": 20},
        "permissions": {"allow": ["bash"]}
    })
}

/// A base URL where nothing listens.
fn nowhere() -> String {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("http://127.0.0.1:{port}/v1")
}

/// `satchel run --json ARGS PROMPT` with the key in the environment.
fn run(project: &Project, args: &[&str], prompt: &str) -> (Value, std::process::Output) {
    let mut all = vec!["run", "--json"];
    all.extend(args);
    all.push(prompt);
    let output = project
        .command(&all)
        .env("OPENAI_API_KEY", KEY)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let transcript = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (transcript, output)
}

/// What must be the same on replay: the outcome, the answer, the turns, each
/// tool call's name, input and output, and the log's kinds and texts
/// (durations in them differ from run to run).
fn essence(transcript: &Value) -> Value {
    let calls: Vec<Value> = transcript["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| {
            json!({
                "tool": call["tool"],
                "input": call["input"],
                "stdout": call["results"][0]["json"]["stdout"],
                "is_error": call["is_error"],
            })
        })
        .collect();
    let log: Vec<(String, String)> = log_entries(transcript)
        .into_iter()
        .map(|(kind, text)| {
            let text: String = text.chars().filter(|c| !c.is_ascii_digit()).collect();
            (kind, text)
        })
        .collect();
    json!({
        "outcome": transcript["outcome"],
        "answer": transcript["answer"],
        "turns": transcript["turns"],
        "tool_calls": calls,
        "log": log,
    })
}

#[test]
fn a_recorded_session_replays_without_a_model_and_a_changed_prompt_fails_naming_the_request() {
    let model = FakeModel::start(vec![
        Reply::call("bash", json!({"command": "echo replayed-$((20+22))"})),
        Reply::text("The command printed replayed-42."),
    ]);
    let project = Project::new(&config(&model.base_url()));
    let cassette = project.path("session.jsonl");
    let cassette_arg = cassette.to_str().unwrap();

    let (recorded, output) = run(&project, &["--record", cassette_arg], "run the echo");
    assert!(
        output.status.success(),
        "{recorded}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(recorded["answer"], "The command printed replayed-42.");
    assert_eq!(
        recorded["tool_calls"][0]["results"][0]["json"]["stdout"],
        "replayed-42\n"
    );

    // Readable JSON lines: a header, then one line per request with its
    // streamed answer; and no credential anywhere.
    let text = std::fs::read_to_string(&cassette).unwrap();
    assert!(!text.contains(KEY), "the API key is in the cassette");
    assert!(
        !text.to_ascii_lowercase().contains("authorization"),
        "{text}"
    );
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0], json!({"satchel_cassette": 1}));
    let interactions: Vec<&Value> = lines.iter().filter(|l| l.get("seq").is_some()).collect();
    assert!(interactions.len() >= 2, "{text}");
    assert_eq!(
        interactions[0]["request"]["body"]["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["content"],
        "run the echo"
    );
    assert!(
        interactions[0]["response"]["events"]
            .as_array()
            .unwrap()
            .len()
            > 2
    );

    // The model is gone: nothing listens where the project now points.
    project.write_config(&config(&nowhere()));
    let asked_before = model.main_requests().len() + model.side_requests().len();
    let (replayed, output) = run(&project, &["--replay", cassette_arg], "run the echo");
    assert!(
        output.status.success(),
        "{replayed}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    pretty_assertions::assert_eq!(essence(&replayed), essence(&recorded));
    assert_eq!(
        model.main_requests().len() + model.side_requests().len(),
        asked_before,
        "the replay reached the model"
    );

    // Another prompt: the first request differs, and the error says where.
    let (failed, output) = run(&project, &["--replay", cassette_arg], "run the other echo");
    assert!(!output.status.success(), "{failed}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let message = format!("{stderr}{}", failed["outcome"]["error"]);
    assert!(
        message.contains("model request 1 differs from recorded request 1"),
        "{message}"
    );
    assert!(
        message.contains(r#"sent "run the other echo""#),
        "{message}"
    );
}

/// `--replay-tools`: each call's recorded output answers it, so nothing
/// runs (a command that appends to a file leaves it as it was); without the
/// flag the command runs again, its output differs, and the replay fails at
/// the request that carries it.
#[test]
fn replay_tools_answers_calls_from_the_cassette_and_runs_nothing() {
    let command = "echo ran >> runs.txt; wc -l < runs.txt";
    let model = FakeModel::start(vec![
        Reply::call("bash", json!({ "command": command })),
        Reply::text("It has run once."),
    ]);
    let project = Project::new(&config(&model.base_url()));
    let cassette = project.path("session.jsonl");
    let cassette_arg = cassette.to_str().unwrap();
    let runs = project.path("project").join("runs.txt");

    let (recorded, output) = run(&project, &["--record", cassette_arg], "run it");
    assert!(output.status.success(), "{recorded}");
    assert_eq!(
        recorded["tool_calls"][0]["results"][0]["json"]["stdout"],
        "1\n"
    );
    let text = std::fs::read_to_string(&cassette).unwrap();
    let tools: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["kind"] == "tool")
        .collect();
    assert_eq!(tools.len(), 1, "{text}");
    assert_eq!(tools[0]["call"]["input"]["command"], command);

    project.write_config(&config(&nowhere()));
    let (replayed, output) = run(
        &project,
        &["--replay", cassette_arg, "--replay-tools"],
        "run it",
    );
    assert!(
        output.status.success(),
        "{replayed}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    pretty_assertions::assert_eq!(essence(&replayed), essence(&recorded));
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "ran\n");

    // Tools run for real: the command appends again, prints 2, and the
    // next model request is not the recorded one.
    let (failed, output) = run(&project, &["--replay", cassette_arg], "run it");
    assert!(!output.status.success(), "{failed}");
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "ran\nran\n");
    let message = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stderr),
        failed["outcome"]["error"]
    );
    assert!(
        message.contains("model request 2 differs from recorded request 2"),
        "{message}"
    );
}

/// `satchel bench history` on the committed 97-turn session of a real
/// model: Satchel's history costs at most 40 % of full history's prompt
/// tokens, less than observation masking's, and keeps at least as many of
/// the facts the model used later as masking does.
#[test]
fn bench_history_puts_satchel_below_masking_on_the_committed_session() {
    let project = Project::new(&json!({}));
    let session = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../bench/history/gemini-3-pro-pytest-7490.jsonl");
    let output = project
        .command(&["bench", "history", "--json", "--cassette"])
        .arg(&session)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(report["turns"].as_u64().unwrap() >= 50, "{report}");
    let strategy = |name: &str| {
        report["strategies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["strategy"] == name)
            .unwrap()
            .clone()
    };
    let (masking, satchel) = (strategy("observation masking"), strategy("satchel"));
    assert!(
        satchel["ratio_to_full"].as_f64().unwrap() <= 0.40,
        "{satchel}"
    );
    assert!(satchel["total_tokens"].as_u64() < masking["total_tokens"].as_u64());
    assert!(
        satchel["needed_facts_kept"].as_u64() >= masking["needed_facts_kept"].as_u64(),
        "{satchel}\n{masking}"
    );
}
