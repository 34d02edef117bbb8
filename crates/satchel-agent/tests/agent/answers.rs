//! Statements that go as designed: a plain answer, a tool turn whose
//! result reaches the model, and the turn budget.

use expect_test::expect;
use pretty_assertions::assert_eq;
use satchel_agent::Outcome;
use serde_json::json;

use crate::fake_model::{Reply, tool_contents};
use crate::harness::{Harness, assistant_text, stable};

/// The answer streams to the user, is the report's answer, and is stored
/// twice: in the log (what the user saw) and as the turn's history row
/// (what the model will get back). Side requests (goal, objective, title)
/// go after the answer on a local server and are logged apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_answer_is_streamed_logged_and_stored() {
    let mut h = Harness::new(
        vec![Reply::text("Hello! Nothing to do here.")],
        json!({"sideRequests": true}),
    )
    .await;
    let report = h.say("hi").await;
    assert_eq!(report.outcome, Outcome::Answered);
    assert_eq!(report.answer, "Hello! Nothing to do here.");
    assert_eq!((report.turns, report.tool_calls), (1, 0));
    assert_eq!(h.events.text(), "Hello! Nothing to do here.");
    // Side requests wait for the main answer on a server on this machine.
    assert_eq!(h.model.order(), ["main", "side", "side", "side"]);
    expect![[r#"
        [
            "user: hi",
            "assistant: Hello! Nothing to do here.",
            "auxiliary: Objective: OBJECTIVE: answer the latest message",
            "auxiliary: Goal: GOAL: help the user with their files",
            "auxiliary: Title: Test conversation",
        ]
    "#]]
    .assert_debug_eq(&h.log().await);
    let history = h.history().await;
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(
        history[0].1,
        json!({"role": "user", "content": [{"type": "text", "text": "hi"}]})
    );
    assert_eq!(assistant_text(&history[1].1), "Hello! Nothing to do here.");
    assert_eq!(h.title().await.as_deref(), Some("Test conversation"));
    assert_eq!(h.agent.title(), Some("Test conversation"));
    let purposes: Vec<String> = h
        .llm_calls()
        .await
        .into_iter()
        .map(|c| c.call.purpose)
        .collect();
    assert_eq!(purposes, ["turn", "objective", "goal", "title"]);
}

/// The model asks for a tool; it runs in the project; its result, after
/// the feedback block, is in the model's next request; the final answer
/// ends the statement. The store has the call with its whole output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_runs_and_its_result_reaches_the_next_request() {
    let mut h = Harness::new(
        vec![
            Reply::call(
                "bash",
                json!({"command": "echo from-the-tool > out.txt; cat out.txt"}),
            ),
            Reply::text("The tool said from-the-tool."),
        ],
        json!({}),
    )
    .await;
    let report = h.say("run it").await;
    assert_eq!(report.outcome, Outcome::Answered);
    assert_eq!(report.answer, "The tool said from-the-tool.");
    assert_eq!((report.turns, report.tool_calls), (2, 1));
    assert_eq!(h.events.tools_finished(), [("bash".to_owned(), false)]);
    assert_eq!(
        std::fs::read_to_string(h.path("out.txt")).unwrap(),
        "from-the-tool\n",
        "the tool ran in the project directory"
    );

    let requests = h.model.main_requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(tool_contents(&requests[0]), Vec::<String>::new());
    let results = tool_contents(&requests[1]);
    assert_eq!(results.len(), 1);
    expect![[r#"
        Tool results feedback:
        Turn 1/25
        Conversation Goal: (not set)
        Current Objective: (not set)
        Tools Used: bash(1: 1✓ 0✗)
        Resources: 1 file read, 1 modified


        {"stdout":"from-the-tool\n","stderr":"","exit_code":0,"truncated":false,"timed_out":false,"duration_ms":_,"sandbox":_}"#]].assert_eq(&stable(&results[0]));

    let calls = h.tool_calls().await;
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].tool, "bash");
    assert_eq!(calls[0].turn, Some(1));
    assert!(!calls[0].output.is_error, "{:?}", calls[0].output);
    let output: serde_json::Value =
        serde_json::from_str(&calls[0].output.results.to_text()).unwrap();
    assert_eq!(
        (&output["stdout"], &output["exit_code"]),
        (&json!("from-the-tool\n"), &json!(0)),
        "the whole output is stored: {output}"
    );
    let kinds: Vec<String> = h
        .log()
        .await
        .iter()
        .map(|line| line.split(':').next().unwrap().to_owned())
        .collect();
    assert_eq!(kinds, ["user", "tool_use", "tool_result", "assistant"]);
    // History: the user, turn 1's call and its result as sent, turn 2's answer.
    let roles: Vec<(u32, String)> = h
        .history()
        .await
        .into_iter()
        .map(|(turn, c)| (turn, c["role"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(
        roles,
        [
            (1, "user".to_owned()),
            (1, "assistant".to_owned()),
            (1, "tool".to_owned()),
            (2, "assistant".to_owned()),
        ]
    );
}

/// `maxTurns: 3`: the third request goes with `tool_choice: none`; a call
/// the model asks for anyway is not run, and the statement ends out of
/// turns, with a notice saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_turn_budget_ends_in_a_last_turn_without_tools() {
    let call = || Reply::call("bash", json!({"command": "echo ran >> runs.txt"}));
    let mut h = Harness::new(
        vec![call(), call(), call(), Reply::text("never asked")],
        json!({"maxTurns": 3}),
    )
    .await;
    let report = h.say("loop").await;
    assert_eq!(report.outcome, Outcome::TurnLimit);
    assert_eq!((report.turns, report.tool_calls), (3, 2));
    let requests = h.model.main_requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        requests[0].get("tool_choice"),
        requests[1].get("tool_choice")
    );
    assert_ne!(requests[1]["tool_choice"], "none");
    assert_eq!(requests[2]["tool_choice"], "none");
    // The second turn's results tell the model its next turn is the last.
    expect![[r#"
        Tool results feedback:
        Turn 2/3
        Conversation Goal: (not set)
        Current Objective: (not set)
        Tools Used: bash(2: 2✓ 0✗)
        Resources: 1 file modified
        Turn budget: the next turn is the last one; tools will be disabled, so answer with what you have.


        {"stdout":"","stderr":"","exit_code":0,"truncated":false,"timed_out":false,"duration_ms":_,"sandbox":_}"#]].assert_eq(&stable(&tool_contents(&requests[2])[1]));
    assert_eq!(
        std::fs::read_to_string(h.path("runs.txt")).unwrap(),
        "ran\nran\n",
        "the call asked in the last turn did not run"
    );
    assert_eq!(h.tool_calls().await.len(), 2);
    expect![[r#"
        [
            "the model asked for tools in its last turn; they were not run",
            "The turn budget (3) ran out: the model asked for more tools in its last turn instead of answering; nothing more was run.",
        ]
    "#]]
    .assert_debug_eq(&h.events.notices());
}
