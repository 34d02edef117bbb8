//! Fixture tools that talk to the client while they run: log messages,
//! progress, and server-to-client requests (sampling, elicitation). These
//! are the 2025-11-25 mechanisms; 2026-07-28 forbids server-to-client
//! requests (see [`super::input_required`] for what replaced them), so
//! there the requests fail and the result says so.

use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CustomRequest, NumberOrString,
    ProgressNotificationParam, ProgressToken, ServerRequest,
};
#[allow(deprecated)] // Logging is what `test_tool_with_logging` is about.
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

use super::wire::text;

/// Time between the notifications of one call, so the client sees them
/// arrive while the call runs.
const STEP: Duration = Duration::from_millis(50);

/// Serves one call of a [`super::tools::Serves::Session`] fixture.
pub(super) async fn call(
    request: CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let arguments = request.arguments.unwrap_or_default();
    let argument = |name: &str| {
        arguments
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let result = match request.name.as_ref() {
        "test_tool_with_logging" => with_logging(context).await,
        "test_tool_with_progress" => with_progress(context).await,
        "test_sampling" => {
            let params = json!({
                "messages": [{"role": "user", "content": {"type": "text", "text": argument("prompt")}}],
                "maxTokens": 100,
            });
            match ask(context, "sampling/createMessage", params).await {
                Ok(answer) => text(format!("LLM response: {}", sampled_text(&answer))),
                Err(reason) => text(format!("Sampling not supported or error: {reason}")),
            }
        }
        "test_elicitation" => {
            let params = json!({
                "message": argument("message"),
                "requestedSchema": {
                    "type": "object",
                    "properties": {"response": {"type": "string", "description": "User's response"}},
                    "required": ["response"],
                },
            });
            elicit(context, params, "User response").await
        }
        "test_elicitation_sep1034_defaults" => {
            elicit(context, defaults_form(), "Elicitation completed").await
        }
        "test_elicitation_sep1330_enums" => {
            elicit(context, enums_form(), "Elicitation completed").await
        }
        other => {
            return Err(ErrorData::internal_error(
                format!("`{other}` is not a session fixture"),
                None,
            ));
        }
    };
    Ok(result.into())
}

/// Three `notifications/message` at `info`, a step apart.
#[allow(deprecated)] // Logging is what this fixture is about.
async fn with_logging(context: &RequestContext<RoleServer>) -> CallToolResult {
    for (index, message) in [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ]
    .into_iter()
    .enumerate()
    {
        if index > 0 {
            tokio::time::sleep(STEP).await;
        }
        let param = LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(message));
        // A client that left cannot be told; the call still ends.
        let _ = context.peer.notify_logging_message(param).await;
    }
    text("Tool with logging executed successfully")
}

/// Progress 0, 50 and 100 of 100 to the request's token (0 when it sent
/// none), then the token as the result.
async fn with_progress(context: &RequestContext<RoleServer>) -> CallToolResult {
    let token = context
        .meta
        .get_progress_token()
        .unwrap_or(ProgressToken(NumberOrString::Number(0)));
    for (index, step) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if index > 0 {
            tokio::time::sleep(STEP).await;
        }
        let mut param = ProgressNotificationParam::new(token.clone(), step);
        param.total = Some(100.0);
        param.message = Some(format!("Completed step {step} of 100"));
        let _ = context.peer.notify_progress(param).await;
    }
    let shown = match &token.0 {
        NumberOrString::Number(number) => number.to_string(),
        NumberOrString::String(string) => string.to_string(),
    };
    text(shown)
}

/// Sends `method` to the client with `params` as written (no reshaping by
/// typed parameters) and returns its answer as JSON.
async fn ask(
    context: &RequestContext<RoleServer>,
    method: &str,
    params: Value,
) -> Result<Value, String> {
    let request = ServerRequest::CustomRequest(CustomRequest::new(method, Some(params)));
    let answer = context
        .peer
        .send_request(request)
        .await
        .map_err(|error| error.to_string())?;
    serde_json::to_value(answer).map_err(|error| error.to_string())
}

/// Elicits `params` and reports the action and content the user sent.
async fn elicit(
    context: &RequestContext<RoleServer>,
    params: Value,
    label: &str,
) -> CallToolResult {
    match ask(context, "elicitation/create", params).await {
        Ok(answer) => {
            let action = answer
                .get("action")
                .and_then(Value::as_str)
                .unwrap_or("none");
            let content = answer.get("content").cloned().unwrap_or_else(|| json!({}));
            text(format!("{label}: action={action}, content={content}"))
        }
        Err(reason) => text(format!("Elicitation not supported or error: {reason}")),
    }
}

/// The text of a sampling answer (`content` a block or a list of blocks).
pub(super) fn sampled_text(answer: &Value) -> String {
    let content = answer.get("content");
    let block = match content {
        Some(Value::Array(blocks)) => blocks.first(),
        other => other,
    };
    block
        .and_then(|block| block.get("text"))
        .and_then(Value::as_str)
        .unwrap_or("No response")
        .to_owned()
}

/// SEP-1034: a default for every primitive field type.
fn defaults_form() -> Value {
    json!({
        "message": "Please review and update the form fields with defaults",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "description": "Verification status", "default": true},
            },
            "required": [],
        },
    })
}

/// SEP-1330: single and multiple choice, with and without titles, and the
/// legacy `enumNames`.
fn enums_form() -> Value {
    let titled = |titles: [&str; 3]| {
        titles
            .iter()
            .enumerate()
            .map(|(index, title)| json!({"const": format!("value{}", index + 1), "title": title}))
            .collect::<Vec<_>>()
    };
    json!({
        "message": "Please select options from the enum fields",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "untitledSingle": {
                    "type": "string",
                    "description": "Select one option",
                    "enum": ["option1", "option2", "option3"],
                },
                "titledSingle": {
                    "type": "string",
                    "description": "Select one option with titles",
                    "oneOf": titled(["First Option", "Second Option", "Third Option"]),
                },
                "legacyEnum": {
                    "type": "string",
                    "description": "Select one option (legacy)",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "description": "Select multiple options",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                },
                "titledMulti": {
                    "type": "array",
                    "description": "Select multiple options with titles",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": {"anyOf": titled(["First Choice", "Second Choice", "Third Choice"])},
                },
            },
            "required": [],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampled_text_takes_a_block_or_the_first_of_a_list() {
        let one = json!({"role": "assistant", "content": {"type": "text", "text": "Paris"}});
        let many =
            json!({"content": [{"type": "text", "text": "Lyon"}, {"type": "text", "text": "x"}]});
        assert_eq!(sampled_text(&one), "Paris");
        assert_eq!(sampled_text(&many), "Lyon");
        assert_eq!(sampled_text(&json!(12)), "No response");
    }
}
