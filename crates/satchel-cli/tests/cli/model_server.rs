//! End-to-end against a real OpenAI-compatible model server: llama.cpp's
//! server (`llama-cpp-python`) serving the small real model
//! SmolLM2-135M-Instruct, started on 127.0.0.1 by each test (see
//! `support/model_server.rs`). The model is too small to answer well, so
//! the assertions are what must hold whatever it says: every statement
//! ends in an answer or a loud error (never an empty success), the record
//! matches what was sent, estimates and reported usage are both stored,
//! and prompted replies parse when they are constrained.
//!
//! Reproduces a report: with default settings, 5 of 5 `satchel run`
//! statements against this server printed nothing and exited 0, because a
//! side request interrupted the main answer and the cut-off stream was
//! taken for a finished one.

use std::process::Output;

use crate::support::model_server::{MODEL, ModelServer};
use crate::support::project::{Project, log_entries, merge};
use serde_json::{Value, json};

/// A project for `server`: default settings but for the model, a fixed
/// temperature, bounded answers and `extra`.
fn project(server: &ModelServer, extra: Value) -> Project {
    let mut config = json!({
        "llm": {"provider": "openai", "baseUrl": server.base_url(), "model": MODEL,
                "temperature": 0, "maxOutputTokens": 160, "requestTimeoutSecs": 120},
        "permissions": {"allow": ["bash"]},
        "maxTurns": 2
    });
    merge(&mut config, extra);
    Project::new(&config)
}

/// The statement ended in an answer (exit 0, the answer on stdout and in
/// the transcript) or a loud error (a non-zero exit, the reason on stderr
/// and in the log); true when it answered.
fn assert_answer_or_loud_error(transcript: &Value, output: &Output) -> bool {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let status = transcript["outcome"]["status"].as_str().unwrap();
    match output.status.code() {
        Some(0) => {
            assert_eq!(status, "answered", "{transcript}");
            let answer = transcript["answer"].as_str().unwrap();
            assert!(!answer.trim().is_empty(), "an empty success: {transcript}");
            true
        }
        Some(1) => {
            assert_eq!(status, "failed", "{transcript}");
            let error = transcript["outcome"]["error"].as_str().unwrap();
            assert!(!error.is_empty());
            assert!(stderr.contains(error), "{stderr}");
            assert!(
                log_entries(transcript)
                    .iter()
                    .any(|(kind, text)| kind == "error" && text == error),
                "{transcript}"
            );
            false
        }
        Some(3) => {
            assert_eq!(status, "turn_limit", "{transcript}");
            assert!(stderr.contains("turn budget"), "{stderr}");
            false
        }
        other => panic!("exit {other:?}: {stderr}"),
    }
}

/// Usage rows of a transcript with this purpose.
fn usage<'a>(transcript: &'a Value, purpose: &str) -> Vec<&'a Value> {
    transcript["usage"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["purpose"] == purpose)
        .collect()
}

/// The report's case: default settings (for an unknown local model:
/// prompted tools with constrained replies, streaming, side requests on),
/// several statements. Every one ends in an answer or a loud error, never
/// an empty success; every request's estimate is stored, and the side
/// requests' reported usage beside it; `satchel context` calibrates the
/// estimate from that usage.
#[test]
fn statements_with_default_side_requests_end_in_answers_and_the_record_matches() {
    let server = ModelServer::start();
    let project = project(&server, json!({}));
    let prompts = [
        "list the five largest files here",
        "say hello in five words",
        "thank you, goodbye",
    ];
    let mut conversation: Option<String> = None;
    for prompt in prompts {
        let (transcript, output) = project.run(prompt, conversation.as_deref());
        assert_answer_or_loud_error(&transcript, &output);
        conversation = transcript["conversation_id"].as_str().map(str::to_owned);
        let turns = usage(&transcript, "turn");
        assert!(!turns.is_empty());
        for turn in &turns {
            assert!(turn["estimate_tokens"].as_u64().unwrap() > 0, "{turn}");
            assert_ne!(turn["stop_reason"], "interrupted", "{turn}");
        }
        // Nothing interrupted the answers: no turn failed on the wire.
        assert!(turns.iter().all(|t| t["error"].is_null()), "{transcript}");
        let objectives = usage(&transcript, "objective");
        assert!(!objectives.is_empty(), "{transcript}");
        for side in objectives {
            assert!(
                side["input_tokens"].as_u64().is_some_and(|t| t > 0),
                "{side}"
            );
            assert!(side["estimate_tokens"].as_u64().unwrap() > 0, "{side}");
        }
    }
    let output = project.satchel(&["context", "--json"]);
    assert!(output.status.success(), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["model"], MODEL);
    assert!(report["total_tokens"].as_u64().unwrap() > 0);
    assert!(
        report["calibration"]["samples"].as_u64().unwrap() >= 3,
        "{report}"
    );
    let ratio = report["calibration"]["ratio"].as_f64().unwrap();
    assert!((0.25..=4.0).contains(&ratio), "{report}");
}

/// Prompted mode on the same server, answered whole (`stream: false`),
/// with constrained replies: every reply the server finished parses (an
/// answer object or tool calls; only a reply cut at the token limit can
/// be unreadable, and the model is told so), and whole answers report
/// usage on every turn.
#[test]
fn constrained_prompted_replies_always_parse() {
    let server = ModelServer::start();
    let project = project(
        &server,
        json!({"llm": {"toolCalling": "prompted", "constrainedReplies": "on", "stream": false,
                        "maxOutputTokens": 200},
               "sideRequests": false, "maxTurns": 2}),
    );
    let (transcript, output) = project.run("list the files here", None);
    assert_answer_or_loud_error(&transcript, &output);
    let turns = usage(&transcript, "turn");
    for turn in &turns {
        assert!(turn["input_tokens"].as_u64().unwrap() > 0, "{turn}");
    }
    for call in transcript["tool_calls"].as_array().unwrap() {
        if call["tool"] != "(unreadable reply)" {
            continue;
        }
        let turn = turns.iter().find(|t| t["turn"] == call["turn"]).unwrap();
        assert_eq!(
            turn["stop_reason"], "max_tokens",
            "an unparsed reply: {call}"
        );
        assert!(
            call["results"]
                .to_string()
                .contains("cut off at the answer's token limit"),
            "{call}"
        );
    }
}

/// Prompted mode, unconstrained and streamed: whatever the model writes,
/// the statement ends in an answer or a loud error.
#[test]
fn unconstrained_prompted_replies_end_in_an_answer_or_a_loud_error() {
    let server = ModelServer::start();
    let project = project(
        &server,
        json!({"llm": {"toolCalling": "prompted", "constrainedReplies": "off"}}),
    );
    let (transcript, output) = project.run("list the files here", None);
    assert_answer_or_loud_error(&transcript, &output);
}

/// Side requests sent beside the main answer on a server that serves one
/// request at a time can cut the answer off (the server ends its stream
/// with `[DONE]` and no finish reason). Whatever happens, it is never an
/// empty success: an answer, or an error that says the server stopped.
#[test]
fn an_answer_cut_off_by_a_parallel_side_request_is_an_error_not_a_success() {
    let server = ModelServer::start();
    let project = project(
        &server,
        json!({"sideRequestTiming": "parallel",
               "llm": {"maxOutputTokens": 300, "toolCalling": "native"}}),
    );
    let (transcript, output) = project.run(
        "Write a long story about a cat who learns to sail, in many paragraphs.",
        None,
    );
    if !assert_answer_or_loud_error(&transcript, &output) {
        let error = transcript["outcome"]["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("without saying it was finished") || error.contains("cut off"),
            "{error}"
        );
    }
}

/// `satchel chat` through the real server: a statement, then `/context`
/// with the calibrated figure.
#[test]
fn the_repl_answers_through_the_real_server() {
    let server = ModelServer::start();
    let project = project(&server, json!({}));
    let mut command = project.command(&["chat"]);
    command.env("TERM", "xterm");
    let mut repl = rexpect::session::spawn_command(command, Some(180_000)).unwrap();
    repl.exp_string("/help for commands").unwrap();
    repl.send_line("say hello in five words").unwrap();
    // The side requests' lines come after the answer; then the prompt.
    repl.exp_regex("title: |title could not be written")
        .unwrap();
    repl.exp_string("> ").unwrap();
    repl.send_line("/context").unwrap();
    repl.exp_string(&format!("Next request to {MODEL}"))
        .unwrap();
    repl.exp_string("calibrated to the server's counts")
        .unwrap();
    repl.send_line("/exit").unwrap();
    repl.exp_eof().unwrap();
    let log = project.satchel(&["log", "--json"]);
    let log = String::from_utf8_lossy(&log.stdout);
    assert!(
        log.contains("\"assistant\""),
        "the statement answered: {log}"
    );
}

/// A session with the real server, recorded, replays with the server gone:
/// the same outcome, answer and tool calls, from the real server's own
/// bytes (its SSE chunking, usage and limits), with its tools replayed.
#[test]
fn a_real_servers_session_replays_the_same_with_the_server_gone() {
    let server = ModelServer::start();
    let project = project(
        &server,
        json!({"llm": {"toolCalling": "prompted", "constrainedReplies": "on",
                        "maxOutputTokens": 200},
               "sideRequests": false, "maxTurns": 2}),
    );
    let cassette = project.path("real.jsonl");
    let cassette = cassette.to_str().unwrap();
    let run = |args: &[&str]| {
        let mut all = vec!["run", "--json"];
        all.extend(args);
        all.push("list the files here");
        let output = project.satchel(&all);
        let transcript: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        (transcript, output)
    };
    let (recorded, output) = run(&["--record", cassette]);
    assert_answer_or_loud_error(&recorded, &output);
    drop(server);
    let (replayed, output) = run(&["--replay", cassette, "--replay-tools"]);
    assert!(
        output.status.code() == Some(0) || recorded["outcome"]["status"] != "answered",
        "{replayed}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let essence = |t: &Value| {
        let calls: Vec<Value> = t["tool_calls"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|c| json!([c["tool"], c["input"], c["results"], c["is_error"]]))
            .collect();
        json!([t["outcome"]["status"], t["answer"], t["turns"], calls])
    };
    pretty_assertions::assert_eq!(essence(&replayed), essence(&recorded));
}
