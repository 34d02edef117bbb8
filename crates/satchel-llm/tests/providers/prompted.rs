//! Prompted tool calling over a real wire: a local model without native
//! tool support (served as Chat Completions) gets the tools in its system
//! prompt, asks for two calls in its text, gets the results back as text,
//! and answers. The agent loop's dispatch is played by fixed outputs.

use pretty_assertions::assert_eq;
use satchel_core::{Message, ToolOutput, ToolResults};
use satchel_llm::prompted::{
    PromptedCall, PromptedResult, ReplyOutcome, format_results, parse_reply, render_tools,
};
use satchel_llm::{ChatRequest, Mode, ProviderKind, ToolMode};
use serde_json::json;

use crate::server::{Reply, Server, event};
use crate::{bash_spec, call, provider, read_spec};

/// A Chat Completions stream of `text`, cut into pieces of `piece` characters.
fn text_stream(text: &str, piece: usize) -> Vec<String> {
    let chunk = |delta: serde_json::Value, finish: Option<&str>| {
        event(
            None,
            &json!({
                "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gemma3:4b",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }),
        )
    };
    let chars: Vec<char> = text.chars().collect();
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    for fragment in chars.chunks(piece) {
        events.push(chunk(
            json!({"content": fragment.iter().collect::<String>()}),
            None,
        ));
    }
    events.push(chunk(json!({}), Some("stop")));
    events.push("data: [DONE]\n\n".to_owned());
    events
}

#[tokio::test]
async fn a_statement_with_two_prompted_calls_then_a_final_answer() {
    let first = "I'll list the files and read the README.\n\n```json\n{\n  \"reasoning\": \"see what is here\",\n  \"tool_calls\": [\n    {\"tool\": \"bash\", \"params\": {\"command\": \"ls\"}},\n    {\"tool\": \"read_file\", \"params\": {\"path\": \"README.md\",}},\n  ]\n}\n```";
    let second = "The directory holds README.md and src/; the README says hello.";
    let server = Server::start(vec![
        Reply::sse(text_stream(first, 7)),
        Reply::sse(text_stream(second, 5)),
    ])
    .await;
    let provider = provider(ProviderKind::OpenAi, &server, |config| {
        config.model = Some("gemma3:4b".into());
    });
    assert_eq!(provider.config().tool_mode(), ToolMode::Prompted);

    // Turn 1: the tools are in the system prompt; the request has none.
    let tools = [bash_spec(), read_spec()];
    let mut history = vec![
        Message::system(format!(
            "You are a careful assistant.\n\n{}",
            render_tools(&tools)
        )),
        Message::user("What is in this directory?"),
    ];
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&history, &[]),
        Mode::Stream,
    )
    .await;
    let reply = outcome.response().text();
    assert_eq!(reply, first);
    let parsed = parse_reply(&reply);
    assert_eq!(parsed.message, "I'll list the files and read the README.");
    assert_eq!(parsed.reasoning.as_deref(), Some("see what is here"));
    let ReplyOutcome::Calls(calls) = &parsed.outcome else {
        panic!("expected calls: {parsed:?}");
    };
    let calls: Vec<_> = calls
        .iter()
        .enumerate()
        .map(|(i, call)| call.to_tool_call(format!("call_{i}")).unwrap())
        .collect();
    assert_eq!(
        calls
            .iter()
            .map(|c| (c.name.as_str(), c.input.clone()))
            .collect::<Vec<_>>(),
        [
            ("bash", json!({"command": "ls"})),
            ("read_file", json!({"path": "README.md"}))
        ]
    );

    // The loop dispatches the calls; here, fixed outputs stand in.
    let outputs = [
        ToolOutput::success(
            ToolResults::json(json!({"stdout": "README.md\nsrc\n", "exit_code": 0})),
            "ran ls",
        ),
        ToolOutput::success(ToolResults::Text("hello".into()), "read README.md"),
    ];
    let results: Vec<PromptedResult<'_>> = calls
        .iter()
        .zip(&outputs)
        .map(|(call, output)| PromptedResult::new(Some(&call.name), output))
        .collect();
    let results_text = format_results(&results);
    assert_eq!(
        results_text,
        "[\n{\"tool\":\"bash\",\"result\":{\"stdout\":\"README.md\\nsrc\\n\",\"exit_code\":0}},\n{\"tool\":\"read_file\",\"result\":\"hello\"}\n]"
    );

    // Turn 2: the reply as the model wrote it, the results as the user's turn.
    history.push(Message::assistant(reply.clone()));
    history.push(Message::user(results_text.clone()));
    let outcome2 = call(
        provider.as_ref(),
        &ChatRequest::new(&history, &[]),
        Mode::Stream,
    )
    .await;
    let answer = parse_reply(&outcome2.response().text());
    assert!(answer.is_final());
    assert_eq!(answer.message, second);

    // What was sent: exactly the prepared bytes, no native tools, the
    // tools in the system prompt, the results as the last user message.
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[0].body == outcome.prepared.body.as_ref());
    assert!(requests[1].body == outcome2.prepared.body.as_ref());
    let body = requests[1].json();
    assert!(
        body.get("tools").is_none(),
        "no native tools in prompted mode"
    );
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("### bash\nRun a shell command and return its output.\nParameters:\n"));
    assert_eq!(
        body["messages"][2],
        json!({"role": "assistant", "content": first})
    );
    assert_eq!(
        body["messages"][3],
        json!({"role": "user", "content": results_text})
    );
}

#[tokio::test]
async fn an_unreadable_reply_runs_nothing_and_tells_the_model_why() {
    let broken =
        "Checking.\n{\"tool_calls\": [{\"tool\": \"bash\", \"params\": {\"command\": \"ls\"}]}";
    let server = Server::start(vec![Reply::sse(text_stream(broken, 11))]).await;
    let provider = provider(ProviderKind::OpenAi, &server, |config| {
        config.model = Some("gemma3:4b".into());
    });
    let history = vec![
        Message::system(render_tools(&[bash_spec()])),
        Message::user("List the files."),
    ];
    let outcome = call(
        provider.as_ref(),
        &ChatRequest::new(&history, &[]),
        Mode::Stream,
    )
    .await;
    let parsed = parse_reply(&outcome.response().text());
    assert_eq!(parsed.message, "Checking.");
    let ReplyOutcome::Invalid(error) = &parsed.outcome else {
        panic!("expected an invalid reply: {parsed:?}");
    };
    let output = error.to_output();
    let text = format_results(&[PromptedResult::new(None, &output)]);
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["tool"], serde_json::Value::Null);
    assert_eq!(value["error"]["error_code"], "INVALID_PARAMS");
    assert!(
        value["error"]["error"]
            .as_str()
            .unwrap()
            .contains("expected `,` or `}` after a value, found `]` at line 2, column 61"),
        "{text}"
    );
    // A per-call error keeps the tool's name.
    let call = PromptedCall::Invalid {
        tool: Some("bash".into()),
        reason: "why".into(),
    };
    assert_eq!(call.tool(), Some("bash"));
}
