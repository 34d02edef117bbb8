//! End-to-end: `satchel run` (and `satchel context`) against a scripted
//! model on 127.0.0.1 that speaks the OpenAI wire format; the assertions
//! are on what the model received: feedback blocks, past-turn summaries
//! cut at the configured length, no thinking in past turns, the turn
//! limit, summaries past the threshold, tool errors the model can act on;
//! and what the user sees, what is stored and the exit status when the
//! model's answer goes wrong on the wire.

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use crate::fake_model::{FakeModel, Fault, Reply, side_task, system_text, tool_contents};
use crate::support::project::{Project, log_entries, merge};
use serde_json::{Value, json};

/// A project pointing at the fake model.
struct Sandbox {
    project: Project,
    model: FakeModel,
}

impl Sandbox {
    fn new(script: Vec<Reply>, config: Value) -> Sandbox {
        let model = FakeModel::start(script);
        let sandbox = Sandbox {
            project: Project::new(&json!({})),
            model,
        };
        sandbox.write_config(config);
        sandbox
    }

    /// Writes .agents/agent.json: `extra` over an `llm` section for the fake.
    fn write_config(&self, extra: Value) {
        let mut config = json!({
            "llm": {"provider": "openai", "baseUrl": self.model.base_url(), "model": "gpt-4o",
                     "maxRetries": 0, "requestTimeoutSecs": 20},
            "permissions": {"allow": ["bash"]}
        });
        merge(&mut config, extra);
        self.project.write_config(&config);
    }

    fn path(&self, name: &str) -> PathBuf {
        self.project.path(name)
    }

    fn satchel(&self, args: &[&str]) -> Output {
        self.project.satchel(args)
    }

    fn run(&self, prompt: &str, resume: Option<&str>) -> (Value, Output) {
        self.project.run(prompt, resume)
    }
}

fn messages(body: &Value) -> &Vec<Value> {
    body["messages"].as_array().unwrap()
}

fn content_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

#[test]
fn a_statement_runs_parallel_tools_with_feedback_and_later_turns_see_summaries() {
    let long = "x".repeat(3000);
    let sandbox = Sandbox::new(
        vec![
            Reply::ThinkThenCall(
                "SECRET-THOUGHT".into(),
                vec![
                    ("bash".into(), json!({"command": "echo hello"}).to_string()),
                    (
                        "bash".into(),
                        json!({"command": format!("printf {long}")}).to_string(),
                    ),
                ],
            ),
            Reply::text("All done."),
            Reply::text("Second answer."),
        ],
        // Side requests beside the first turn, so its results' feedback
        // has the goal and objective (on a local server they wait for the
        // final answer).
        json!({"toolResultMaxLength": 40, "sideRequestTiming": "parallel"}),
    );
    let (first, output) = sandbox.run("list things", None);
    assert!(output.status.success(), "{first}");
    assert_eq!(first["outcome"]["status"], "answered");
    assert_eq!(first["answer"], "All done.");
    assert_eq!(first["turns"], 2);

    let requests = sandbox.model.main_requests();
    assert_eq!(requests.len(), 2);
    // The current turn goes native, results whole, the feedback block first.
    let results = tool_contents(&requests[1]);
    assert_eq!(results.len(), 2);
    assert!(
        results[0].starts_with(
            "Tool results feedback:\nTurn 1/25\nConversation Goal: GOAL: help the user with their files\nCurrent Objective: OBJECTIVE: answer the latest message\nTools Used: bash(2: 2✓ 0✗)\n"
        ),
        "{}",
        results[0]
    );
    assert!(results[0].contains("hello"));
    assert!(
        results[1].contains(&long),
        "the current turn got a cut result"
    );
    assert!(!results[1].starts_with("Tool results feedback"));

    // The next statement sees the first one as a summary, cut at 40.
    let id = first["conversation_id"].as_str().unwrap().to_owned();
    sandbox.write_config(json!({"toolResultMaxLength": 12}));
    let (second, output) = sandbox.run("and now?", Some(&id));
    assert!(output.status.success(), "{second}");
    assert_eq!(second["answer"], "Second answer.");
    let requests = sandbox.model.main_requests();
    let third = &requests[2];
    let history = messages(third);
    let roles: Vec<&str> = history
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    let past = content_text(&history[2]);
    assert_eq!(
        past,
        format!(
            "[Tool: bash(command=\"echo hello\")] → {{\"stdout\":\"h... [truncated]\n[Tool: bash(command=\"printf {}…\")] → {{\"stdout\":\"x... [truncated]\nAll done.",
            "x".repeat(53)
        )
    );
    assert!(!third.to_string().contains("SECRET-THOUGHT"));

    // Estimate and reported usage are stored side by side.
    let usage = second["usage"].as_array().unwrap();
    assert!(usage.iter().any(|u| u["purpose"] == "turn"
        && u["estimate_tokens"].as_u64().unwrap() > 0
        && u["input_tokens"] == 1000));
}

#[test]
fn malformed_and_unknown_calls_go_back_to_the_model_as_errors() {
    let sandbox = Sandbox::new(
        vec![
            Reply::Calls(vec![
                ("bash".into(), "{\"command\": \"ls\"".into()),
                ("no_such_tool".into(), "{}".into()),
                ("bash".into(), json!({"command": 7}).to_string()),
            ]),
            Reply::text("Recovered."),
        ],
        json!({"sideRequests": false}),
    );
    let (transcript, output) = sandbox.run("try things", None);
    assert!(output.status.success(), "{transcript}");
    let results = tool_contents(&sandbox.model.main_requests()[1]);
    assert!(results[0].contains("INVALID_PARAMS") && results[0].contains("not valid JSON"));
    assert!(results[1].contains("TOOL_NOT_FOUND") && results[1].contains("bash"));
    assert!(results[2].contains("INVALID_PARAMS"));
    assert!(results[0].contains("Conversation Goal: (not set)"));
    assert!(results[0].contains("Tools Used: bash(2: 0✓ 2✗), no_such_tool(1: 0✓ 1✗)"));
    assert_eq!(transcript["tool_calls"].as_array().unwrap().len(), 3);
    assert!(sandbox.model.side_requests().is_empty());
}

#[test]
fn the_turn_budget_ends_with_a_turn_without_tools() {
    let call = || Reply::call("bash", json!({"command": "true"}));
    let sandbox = Sandbox::new(
        vec![call(), call(), call(), Reply::text("out of turns")],
        json!({"maxTurns": 3, "sideRequests": false}),
    );
    let (transcript, output) = sandbox.run("loop forever", None);
    assert_eq!(output.status.code(), Some(3), "{transcript}");
    assert_eq!(transcript["outcome"]["status"], "turn_limit");
    let requests = sandbox.model.main_requests();
    assert_eq!(requests.len(), 3);
    assert_ne!(requests[1]["tool_choice"], "none");
    assert_eq!(requests[2]["tool_choice"], "none");
    let feedback = &tool_contents(&requests[2])[1];
    assert!(feedback.contains("Turn 2/3"), "{feedback}");
    assert!(
        feedback.contains("the next turn is the last one"),
        "{feedback}"
    );
    // The call asked in the last turn was not run.
    assert_eq!(transcript["tool_calls"].as_array().unwrap().len(), 2);
    assert!(String::from_utf8_lossy(&output.stderr).contains("turn budget (3) ran out"));
}

#[test]
fn past_the_threshold_old_statements_are_summarised_and_the_log_keeps_them() {
    let filler = "lorem ipsum dolor sit amet ".repeat(250);
    let sandbox = Sandbox::new(
        vec![Reply::text("one"), Reply::text("two"), Reply::text("three")],
        json!({"llm": {"contextWindow": 6000}, "contextThreshold": 0.5, "keepRecentStatements": 0}),
    );
    let (first, _) = sandbox.run(&format!("FIRST-MARKER {filler}"), None);
    let id = first["conversation_id"].as_str().unwrap().to_owned();
    let (second, output) = sandbox.run(&format!("SECOND-MARKER {filler}"), Some(&id));
    assert!(output.status.success(), "{second}");
    let requests = sandbox.model.main_requests();
    let last = requests.last().unwrap();
    assert!(!last.to_string().contains("FIRST-MARKER"), "not summarised");
    assert!(system_text(last).contains("SUMMARY-OF-OLD-TURNS"));
    assert!(String::from_utf8_lossy(&output.stderr).contains("summarised to fit"));
    let summaries = sandbox
        .model
        .side_requests()
        .into_iter()
        .filter(|r| side_task(r).unwrap().contains("Task: summarise"))
        .count();
    assert_eq!(summaries, 1);
    let log = second["log"].as_array().unwrap();
    assert!(
        log.iter()
            .any(|e| e["text"].as_str().unwrap().contains("FIRST-MARKER"))
    );

    // `satchel context` counts the next request on its bytes.
    let output = sandbox.satchel(&["context", &id, "--json"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["context_window"], 6000);
    assert_eq!(report["summarised_through"], 1);
    assert!(report["sections"]["tools"].as_u64().unwrap() > 100);
}

#[test]
fn no_model_is_a_clear_error_before_anything_is_recorded() {
    let sandbox = Sandbox::new(Vec::new(), json!({}));
    std::fs::write(
        sandbox.path("project/.agents/agent.json"),
        r#"{"llm": {"provider": "openai", "baseUrl": "http://127.0.0.1:9/v1", "model": "m", "maxRetries": 0}}"#,
    )
    .unwrap();
    let output = sandbox.satchel(&["run", "hello"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot reach http://127.0.0.1:9/v1"),
        "{stderr}"
    );
}

#[test]
fn prompted_mode_drives_a_statement_for_a_model_without_native_tools() {
    let calls = "Let me check.\n```json\n{\"reasoning\": \"two at once\", \"tool_calls\": [\
        {\"tool\": \"bash\", \"params\": {\"command\": \"echo one\"}},\
        {\"tool\": \"bash\", \"params\": {\"command\": \"echo two\"}}]}\n```";
    let sandbox = Sandbox::new(
        vec![
            Reply::text(calls),
            Reply::text("{'tool_calls': [{'tool': 'bash', 'params': {'command': 5},}]}"),
            Reply::text("They said one and two."),
        ],
        json!({"llm": {"toolCalling": "prompted"}, "sideRequests": false}),
    );
    let (transcript, output) = sandbox.run("say one and two", None);
    assert!(output.status.success(), "{transcript}");
    assert_eq!(transcript["answer"], "They said one and two.");
    assert_eq!(transcript["tool_calls"].as_array().unwrap().len(), 3);

    let requests = sandbox.model.main_requests();
    assert_eq!(requests.len(), 3);
    assert!(requests[0].get("tools").is_none(), "native tools sent");
    assert!(system_text(&requests[0]).contains("### bash\n"));
    // The reply goes back as written; the results as one user message.
    let second = messages(&requests[1]);
    assert_eq!(content_text(&second[second.len() - 2]), calls);
    let results = content_text(second.last().unwrap());
    assert!(
        results.starts_with("Tool results feedback:\nTurn 1/25\n"),
        "{results}"
    );
    assert!(
        results.contains("\"tool\":\"bash\"")
            && results.contains("one\\n")
            && results.contains("two\\n")
    );
    // A call that fails the schema is an error the model reads next turn.
    let third = content_text(messages(&requests[2]).last().unwrap());
    assert!(third.contains("INVALID_PARAMS"), "{third}");
    assert!(third.contains("Tools Used: bash(3: 2✓ 1✗)"), "{third}");
}

/// Prompted replies carry the reply schema (`constrainedReplies: auto`):
/// as `json_object` with a schema on a server on this machine; a final
/// answer written as `{"answer": ...}` is the answer; a server that
/// refuses the schema gets the same turn again without it, once, with a
/// notice, and later turns go without.
#[test]
fn prompted_replies_are_constrained_and_a_refused_schema_is_dropped_with_a_notice() {
    let sandbox = Sandbox::new(
        vec![
            Reply::text(r#"{"tool_calls": [{"tool": "bash", "params": {"command": "echo one"}}]}"#),
            Reply::text(r#"{"answer": "It said one."}"#),
        ],
        json!({"llm": {"toolCalling": "prompted", "model": "smol-test"}, "sideRequests": false}),
    );
    let (transcript, output) = sandbox.run("say one", None);
    assert!(output.status.success(), "{transcript}");
    assert_eq!(transcript["answer"], "It said one.");
    let requests = sandbox.model.main_requests();
    let format = &requests[0]["response_format"];
    assert_eq!(format["type"], "json_object", "{format}");
    let schema = &format["schema"];
    assert_eq!(schema["oneOf"][0]["required"], json!(["answer"]));
    assert!(schema.to_string().contains(r#""const":"bash""#), "{schema}");
    assert!(system_text(&requests[0]).contains(r#"{"answer": "..."}"#));

    // A server that refuses it: the turn goes again without, and the rest.
    let sandbox = Sandbox::new(
        vec![
            Reply::Fault(Fault::Status(
                500,
                Vec::new(),
                r#"{"error": {"message": "response_format: Input should be 'text' or 'json_object'"}}"#
                    .into(),
            )),
            Reply::text("Plain answer."),
            Reply::text("Second plain answer."),
        ],
        json!({"llm": {"toolCalling": "prompted", "model": "smol-test", "maxRetries": 0,
                        "replyFormat": "jsonSchema"},
               "sideRequests": false}),
    );
    let (transcript, output) = sandbox.run("hello", None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{transcript}");
    assert_eq!(transcript["answer"], "Plain answer.");
    assert!(
        stderr.contains("the server refused the reply schema"),
        "{stderr}"
    );
    let requests = sandbox.model.main_requests();
    assert_eq!(requests[0]["response_format"]["type"], "json_schema");
    assert!(requests[1].get("response_format").is_none());
    assert!(
        log_entries(&transcript)
            .iter()
            .any(|(kind, text)| kind == "auxiliary" && text.contains("refused the reply schema"))
    );

    // `off` sends none.
    let sandbox = Sandbox::new(
        vec![Reply::text("Fine.")],
        json!({"llm": {"toolCalling": "prompted", "constrainedReplies": "off"},
               "sideRequests": false}),
    );
    let (_, output) = sandbox.run("hello", None);
    assert!(output.status.success());
    assert!(
        sandbox.model.main_requests()[0]
            .get("response_format")
            .is_none()
    );
}

/// For a model whose tokenizer is not embedded, `satchel context` shows
/// the count on the bytes and, beside it, the figure calibrated to the
/// usage the server reported.
#[test]
fn context_calibrates_the_estimate_of_a_model_without_its_tokenizer() {
    let sandbox = Sandbox::new(
        vec![Reply::text("Hi.")],
        json!({"llm": {"model": "smol-test", "stream": false}}),
    );
    let (transcript, output) = sandbox.run("hello", None);
    assert!(output.status.success(), "{transcript}");
    let usage = transcript["usage"].as_array().unwrap();
    let reported = |u: &&Value| u["input_tokens"].as_u64().unwrap_or(0) as f64;
    let counted = |u: &&Value| u["estimate_tokens"].as_u64().unwrap_or(0) as f64;
    let samples: Vec<&Value> = usage
        .iter()
        .filter(|u| reported(u) > 0.0 && (0.25..=4.0).contains(&(reported(u) / counted(u))))
        .collect();
    let (counted, reported) = samples.iter().fold((0u64, 0u64), |(c, r), u| {
        (
            c + u["estimate_tokens"].as_u64().unwrap(),
            r + u["input_tokens"].as_u64().unwrap(),
        )
    });
    assert!(counted > 0);
    let output = sandbox.satchel(&["context", "--json"]);
    assert!(output.status.success());
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let calibration = &report["calibration"];
    assert_eq!(calibration["samples"], samples.len(), "{report}");
    assert!(samples.len() >= 2, "{report}");
    let ratio = calibration["ratio"].as_f64().unwrap();
    assert!((ratio - reported as f64 / counted as f64).abs() < 1e-9);
    let total = report["total_tokens"].as_u64().unwrap();
    assert_eq!(
        report["calibrated_total_tokens"].as_u64().unwrap(),
        (total as f64 * ratio).round() as u64
    );
    let text = sandbox.satchel(&["context"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("calibrated to the server's counts"), "{text}");

    // An OpenAI model's tokenizer is embedded: no calibration.
    let sandbox = Sandbox::new(vec![Reply::text("Hi.")], json!({}));
    let (_, output) = sandbox.run("hello", None);
    assert!(output.status.success());
    let report: Value =
        serde_json::from_slice(&sandbox.satchel(&["context", "--json"]).stdout).unwrap();
    assert_eq!(report["calibration"], Value::Null);
}

/// The JSON a tool result carries after the feedback block (when it has one).
fn result_json(text: &str) -> Value {
    let start = text
        .find('{')
        .unwrap_or_else(|| panic!("no JSON in {text}"));
    serde_json::from_str(&text[start..]).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The `conversation` tool end to end: after old statements were
/// summarised, the model recovers a call whole, reads stats that match the
/// rows, finds a word of a tool result, and reads the timeline cut at the
/// configured length; from another conversation, the call's id is refused.
#[test]
fn the_conversation_tool_reads_the_record_after_compaction() {
    let filler = "lorem ipsum dolor sit amet ".repeat(450);
    let sandbox = Sandbox::new(
        vec![
            Reply::call("bash", json!({"command": "cat numbers.txt"})),
            Reply::text("First done."),
        ],
        json!({"toolResultMaxLength": 30, "sideRequests": false, "keepRecentStatements": 0,
               "contextThreshold": 0.5, "llm": {"contextWindow": 7000}}),
    );
    let numbers: String = (1..=120).map(|n| format!("{n}\n")).collect();
    std::fs::write(
        sandbox.path("project/numbers.txt"),
        format!("{numbers}END-OF-OUTPUT\n"),
    )
    .unwrap();
    let (first, output) = sandbox.run(&format!("FIRST-MARKER {filler}"), None);
    assert!(output.status.success(), "{first}");
    let id = first["conversation_id"].as_str().unwrap().to_owned();
    let cat = &first["tool_calls"][0];
    let cat_id = cat["id"].as_str().unwrap().to_owned();
    let stored = cat["results"][0]["json"].clone();
    assert_eq!(stored["stdout"], format!("{numbers}END-OF-OUTPUT\n"));

    sandbox.model.push(vec![
        Reply::Calls(vec![
            (
                "conversation".into(),
                json!({"action": "tool_call", "id": cat_id}).to_string(),
            ),
            (
                "conversation".into(),
                json!({"action": "stats"}).to_string(),
            ),
            (
                "conversation".into(),
                json!({"action": "search", "query": "END-OF-OUTPUT"}).to_string(),
            ),
            (
                "conversation".into(),
                json!({"action": "timeline", "limit": 4}).to_string(),
            ),
        ]),
        Reply::text("Recovered."),
    ]);
    let (second, output) = sandbox.run("what did the file say?", Some(&id));
    assert!(output.status.success(), "{second}");
    let requests = sandbox.model.main_requests();
    let last = requests.last().unwrap();
    assert!(
        !last.to_string().contains("FIRST-MARKER"),
        "the first statement was not summarised"
    );
    assert!(system_text(last).contains("SUMMARY-OF-OLD-TURNS"));
    let results = tool_contents(last);
    assert_eq!(results.len(), 4, "{results:?}");

    // The call comes back whole, though the history only ever had 30 characters of it.
    let recovered = result_json(&results[0]);
    assert_eq!(recovered["id"], cat_id.as_str());
    assert_eq!(recovered["result"], stored);

    // Stats match the rows as they stood when the call ran: statement 1
    // (user, the cat call, the answer) and statement 2 (user, the summary);
    // three turn requests; one recorded call.
    let stats = result_json(&results[1]);
    let turn_rows: Vec<&Value> = second["usage"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["purpose"] == "turn")
        .collect();
    assert_eq!(turn_rows.len(), 4, "two turns per statement");
    assert_eq!(
        stats,
        json!({
            "conversation": id,
            "events": 5,
            "statements": 2,
            "turns": 3,
            "tool_calls": 1,
            "tools": [{"tool": "bash", "calls": 1, "ok": 1, "failed": 0}],
            "resources": {"summary": "1 file read", "read": ["numbers.txt"], "modified": [], "fetched": []},
            "tokens": {
                "estimate": turn_rows[2]["estimate_tokens"],
                "reported_input": turn_rows[2]["input_tokens"],
                "context_window": 7000
            }
        })
    );

    // Search finds the word in the tool's output, as its timeline event.
    let found = result_json(&results[2]);
    assert_eq!(found["matches"].as_array().unwrap().len(), 1, "{found}");
    assert_eq!(found["matches"][0]["id"], cat_id.as_str());
    assert_eq!(found["matches"][0]["n"], 2);

    // The timeline cuts the result exactly as the history does, at 30.
    let timeline = result_json(&results[3]);
    let events = timeline["events"].as_array().unwrap();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["tool_call", "assistant", "user", "auxiliary"]);
    let text = stored.to_string();
    let cut: String = text.chars().take(30).collect();
    assert_eq!(events[0]["result"], format!("{cut}... [truncated]"));
    assert_eq!(events[3]["side"], "summary");

    // Another conversation cannot read it.
    sandbox.model.push(vec![
        Reply::call("conversation", json!({"action": "tool_call", "id": cat_id})),
        Reply::text("Refused."),
    ]);
    let (third, output) = sandbox.run("read the other one", None);
    assert!(output.status.success(), "{third}");
    assert_ne!(third["conversation_id"], id.as_str());
    let refused = tool_contents(sandbox.model.main_requests().last().unwrap());
    assert!(refused[0].contains("PERMISSION_DENIED"), "{refused:?}");
    assert!(!refused[0].contains("END-OF-OUTPUT"), "{refused:?}");
}

#[test]
fn an_ended_memory_session_is_summarised_by_the_configured_model() {
    let sandbox = Sandbox::new(Vec::new(), json!({}));
    let output = sandbox.satchel(&["memory", "store", "session", "we chose the blue design"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = sandbox.satchel(&["memory", "new-session", "--json"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let change: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(change["archived"], 1, "{change}");
    assert_eq!(change["summary"]["layer"], "short", "{change}");
    assert!(
        change["summary"]["content"]
            .as_str()
            .unwrap()
            .contains("SUMMARY-OF-OLD-TURNS"),
        "{change}"
    );
    // The model was shown the session's memories.
    let asked = sandbox.model.side_requests();
    assert_eq!(asked.len(), 1);
    assert!(asked[0].to_string().contains("we chose the blue design"));
}

/// A statement whose answer goes wrong on the wire ends in a loud error:
/// exit 1, the reason on stderr and in the log, never an empty success.
/// Reproduces a report against llama.cpp's server: 5 of 5 `satchel run`
/// statements printed nothing and exited 0 when its stream ended with
/// `data: [DONE]` and no `finish_reason`.
#[test]
fn an_answer_that_goes_wrong_on_the_wire_is_a_loud_error() {
    let cases = [
        (
            Fault::DoneWithoutFinish("The answer is".into()),
            "without saying it was finished",
        ),
        (Fault::CutMidText("The answer".into()), "connection failed"),
        (
            Fault::CutBeforeFinish("The whole answer.".into()),
            "connection failed",
        ),
        (
            Fault::StallAfter("Thinking about".into(), Duration::from_secs(30)),
            "sent nothing for 2 s",
        ),
        (
            Fault::Status(
                200,
                vec![("Content-Type", "text/html".into())],
                "<html><body>Bad gateway</body></html>".into(),
            ),
            "format Satchel does not understand",
        ),
        (
            Fault::Status(200, Vec::new(), "data: not json at all".into()),
            "format Satchel does not understand",
        ),
        (
            Fault::Status(500, Vec::new(), r#"{"error": {"message": "boom"}}"#.into()),
            "failed with 500",
        ),
    ];
    for (fault, expected) in cases {
        let sandbox = Sandbox::new(
            vec![Reply::Fault(fault.clone())],
            json!({"llm": {"requestTimeoutSecs": 2}}),
        );
        let (transcript, output) = sandbox.run("hello", None);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{fault:?}: {stderr}");
        assert_eq!(transcript["outcome"]["status"], "failed", "{fault:?}");
        let error = transcript["outcome"]["error"].as_str().unwrap();
        assert!(error.contains(expected), "{fault:?}: {error}");
        assert!(stderr.contains(expected), "{fault:?}: {stderr}");
        let log = log_entries(&transcript);
        assert!(
            log.iter()
                .any(|(kind, text)| kind == "error" && text.contains(expected)),
            "{fault:?}: {log:?}"
        );
        assert!(
            !log.iter().any(|(kind, _)| kind == "assistant"),
            "an incomplete answer is never logged as an answer: {log:?}"
        );
        // The turn's usage row keeps the estimate and the error.
        let usage = transcript["usage"].as_array().unwrap();
        let turn = usage.iter().find(|u| u["purpose"] == "turn").unwrap();
        assert!(turn["estimate_tokens"].as_u64().unwrap() > 0);
        assert!(turn["error"].as_str().unwrap().contains(expected), "{turn}");
    }
}

/// A tool ran in the first turn; the second turn's request fails before
/// any content and is retried. The tool runs once, the log says a retry
/// happened and why, and the statement ends in the retried answer.
#[test]
fn a_retried_turn_runs_no_tool_twice_and_the_log_says_why() {
    for fault in [
        Fault::Status(503, Vec::new(), r#"{"error": {"message": "busy"}}"#.into()),
        Fault::Status(
            429,
            vec![("Retry-After", "1".into())],
            r#"{"error": {"message": "slow down"}}"#.into(),
        ),
        Fault::DoneWithoutFinish(String::new()),
        Fault::Status(
            502,
            vec![("Content-Type", "text/html".into())],
            "<html>bad gateway</html>".into(),
        ),
    ] {
        let sandbox = Sandbox::new(
            vec![
                Reply::call("bash", json!({"command": "echo ran >> runs.txt"})),
                Reply::Fault(fault.clone()),
                Reply::text("Done after a retry."),
            ],
            json!({"llm": {"maxRetries": 2, "retryBaseDelayMs": 10}}),
        );
        let (transcript, output) = sandbox.run("count", None);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{fault:?}: {stderr}");
        assert_eq!(transcript["answer"], "Done after a retry.");
        let runs = std::fs::read_to_string(sandbox.path("project/runs.txt")).unwrap();
        assert_eq!(runs, "ran\n", "{fault:?}: the tool ran once");
        assert_eq!(transcript["tool_calls"].as_array().unwrap().len(), 1);
        assert!(
            stderr.contains("the model request is sent again"),
            "{stderr}"
        );
        let log = log_entries(&transcript);
        assert!(
            log.iter()
                .any(|(kind, text)| kind == "auxiliary" && text.contains("sent again (attempt 2")),
            "{fault:?}: {log:?}"
        );
        let requests = sandbox.model.main_requests();
        assert_eq!(requests.len(), 3, "{fault:?}");
        assert_eq!(
            requests[1], requests[2],
            "a retry re-sends the same request"
        );
    }
}

/// A tool call whose arguments are cut mid-way never runs.
#[test]
fn a_tool_call_cut_mid_arguments_never_runs() {
    let sandbox = Sandbox::new(
        vec![Reply::Fault(Fault::CutMidArguments(
            "bash".into(),
            json!({"command": "echo ran >> runs.txt"}).to_string(),
        ))],
        json!({"llm": {"maxRetries": 0}}),
    );
    let (transcript, output) = sandbox.run("count", None);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(transcript["outcome"]["status"], "failed");
    assert!(!sandbox.path("project/runs.txt").exists(), "nothing ran");
    assert_eq!(transcript["tool_calls"].as_array().unwrap().len(), 0);
}

/// An answer with neither text nor a tool call is reported, not printed
/// as a success.
#[test]
fn an_empty_answer_is_reported_not_printed_as_success() {
    let sandbox = Sandbox::new(vec![Reply::text("")], json!({}));
    let (transcript, output) = sandbox.run("hello", None);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(transcript["outcome"]["status"], "failed");
    assert!(
        transcript["outcome"]["error"]
            .as_str()
            .unwrap()
            .contains("the model's answer was empty"),
        "{transcript}"
    );
}

/// On a server on this machine (which may serve one request at a time),
/// side requests never overlap a main request, nor come between turns
/// (the next turn would queue behind them): they go after the final answer.
#[test]
fn side_requests_wait_for_the_main_answer_on_a_local_server() {
    let sandbox = Sandbox::new(
        vec![
            Reply::call("bash", json!({"command": "sleep 0.3"})),
            Reply::text("Done."),
            Reply::text("Plain answer."),
        ],
        json!({}),
    );
    let (first, output) = sandbox.run("work", None);
    assert!(output.status.success(), "{first}");
    assert_eq!(
        sandbox.model.order(),
        ["main", "main", "side", "side", "side"],
        "goal, objective and title after the final answer"
    );
    // They continue the last request (same messages and tools, then the
    // task), so the server's prompt cache serves them.
    let main = &sandbox.model.main_requests()[1];
    for side in sandbox.model.side_requests() {
        let sent = messages(main);
        let side_messages = messages(&side);
        assert_eq!(&side_messages[..sent.len()], &sent[..]);
        assert_eq!(side_messages.len(), sent.len() + 1);
        assert_eq!(side["tools"], main["tools"]);
        assert!(side_task(&side).is_some());
    }
    let id = first["conversation_id"].as_str().unwrap().to_owned();
    let (second, output) = sandbox.run("again", Some(&id));
    assert!(output.status.success(), "{second}");
    assert_eq!(
        &sandbox.model.order()[5..],
        ["main", "side"],
        "the objective after the answer"
    );
    let log = log_entries(&second);
    assert!(
        log.iter().any(|(_, text)| text.starts_with("Objective:")),
        "{log:?}"
    );
}

/// A model that makes the same failing call again and again (a small local
/// model that does not read its results): the third time in a row, the
/// next turn asks for the answer alone, and the model answers.
#[test]
fn the_same_failing_call_three_times_in_a_row_asks_for_the_answer_alone() {
    let call = || Reply::call("fetch", json!({"url": "http://127.0.0.1:9/data"}));
    let sandbox = Sandbox::new(
        vec![
            call(),
            call(),
            call(),
            Reply::text("The data cannot be fetched."),
        ],
        json!({"sideRequests": false, "permissions": {"allow": ["fetch"]}}),
    );
    let (transcript, output) = sandbox.run("fetch the data", None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}\n{transcript}");
    assert_eq!(transcript["answer"], "The data cannot be fetched.");
    let requests = sandbox.model.main_requests();
    assert_eq!(requests.len(), 4, "{transcript}");
    assert_ne!(requests[2]["tool_choice"], "none");
    assert_eq!(requests[3]["tool_choice"], "none");
    assert!(
        stderr.contains("the same tool call failed the same way 3 times in a row"),
        "{stderr}"
    );
}

/// A reply that writes the same lines again and again is stopped about a
/// kilobyte in, not at the output limit, and the cut is reported.
#[test]
fn a_reply_that_repeats_itself_is_stopped_within_a_few_kilobytes() {
    let line = "I will now say hello to you in five words, as asked.\n";
    let looping = format!("Sure.\n{}", line.repeat(400));
    let sandbox = Sandbox::new(vec![Reply::text(&looping)], json!({"sideRequests": false}));
    let (transcript, output) = sandbox.run("say hello in five words", None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("it was repeating itself"), "{stderr}");
    let answer = transcript["answer"].as_str().unwrap_or_default();
    assert!(
        answer.starts_with("Sure.\nI will now say hello"),
        "{transcript}"
    );
    assert!(
        answer.len() < 4096,
        "{} bytes: not stopped early",
        answer.len()
    );
}
