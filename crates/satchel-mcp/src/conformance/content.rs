//! Fixture tools whose result is fixed or depends only on the request:
//! the content types a tool result can hold, a tool error, a capability
//! check, and the 2026-07-28 stream and logging probes.

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock,
    ProgressNotificationParam, ResourceContents,
};
#[allow(deprecated)] // Logging is what `test_logging_tool` probes.
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

use super::wire::text;

/// A 1x1 red PNG.
pub(super) const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// A WAV file with one silent sample.
const WAV_BASE64: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

/// How long `test_reconnection` takes.
const RECONNECTION_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

/// Serves one call of a [`super::tools::Serves::Content`] fixture.
pub(super) async fn call(
    request: CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let result = match request.name.as_ref() {
        "test_simple_text" => text("This is a simple text response for testing."),
        "test_image_content" => {
            CallToolResult::success(vec![ContentBlock::image(PNG_BASE64, "image/png")])
        }
        "test_audio_content" => {
            CallToolResult::success(vec![ContentBlock::audio(WAV_BASE64, "audio/wav")])
        }
        "test_embedded_resource" => CallToolResult::success(vec![ContentBlock::resource(
            ResourceContents::text(
                "This is an embedded resource content.",
                "test://embedded-resource",
            )
            .with_mime_type("text/plain"),
        )]),
        "test_multiple_content_types" => CallToolResult::success(vec![
            ContentBlock::text("Multiple content types test:"),
            ContentBlock::image(PNG_BASE64, "image/png"),
            ContentBlock::resource(
                ResourceContents::text(
                    json!({"test": "data", "value": 123}).to_string(),
                    "test://mixed-content-resource",
                )
                .with_mime_type("application/json"),
            ),
        ]),
        "test_error_handling" => CallToolResult::error(vec![ContentBlock::text(
            "This tool intentionally returns an error for testing",
        )]),
        "json_schema_2020_12_tool" => text(format!(
            "JSON Schema 2020-12 tool called with: {}",
            Value::Object(request.arguments.unwrap_or_default())
        )),
        "test_missing_capability" => missing_capability(context)?,
        "test_streaming_elicitation" => streaming(context).await,
        "test_logging_tool" => logging_if_asked(context).await,
        "test_custom_header" => {
            let arguments = request.arguments.unwrap_or_default();
            let region = arguments
                .get("region")
                .and_then(Value::as_str)
                .unwrap_or_default();
            text(format!("Region: {region}"))
        }
        "test_reconnection" => {
            tokio::time::sleep(RECONNECTION_PAUSE).await;
            text("Reconnection test completed")
        }
        "greet" => {
            let arguments = request.arguments.unwrap_or_default();
            let name = arguments
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("World");
            text(format!("Hello, {name}!"))
        }
        other => {
            return Err(ErrorData::internal_error(
                format!("`{other}` is not a content fixture"),
                None,
            ));
        }
    };
    Ok(result.into())
}

/// `-32021` unless the client declared sampling (SEP-2575: a request that
/// cannot be served without a capability names it in
/// `data.requiredCapabilities`).
fn missing_capability(context: &RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
    let declared = context
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.sampling.is_some());
    if !declared {
        #[allow(deprecated)] // Sampling is what this fixture is about.
        let required = ClientCapabilities::builder().enable_sampling().build();
        return Err(ErrorData::missing_required_client_capability(required));
    }
    Ok(text("Success"))
}

/// Answers on the request's own stream: a progress notification first when
/// the client gave a token, then the result, and never a request of its
/// own (2026-07-28 streams carry no server-to-client requests).
async fn streaming(context: &RequestContext<RoleServer>) -> CallToolResult {
    if let Some(token) = context.meta.get_progress_token() {
        let mut progress = ProgressNotificationParam::new(token, 50.0);
        progress.total = Some(100.0);
        // A client that left cannot be told; the result says the rest.
        let _ = context.peer.notify_progress(progress).await;
    }
    text("Streaming complete")
}

/// Logs only when the request asked for a level in `_meta` (SEP-2575:
/// no `notifications/message` otherwise).
#[allow(deprecated)] // Logging is what this fixture is about.
async fn logging_if_asked(context: &RequestContext<RoleServer>) -> CallToolResult {
    // The level asked for is the least severe wanted: `info` passes
    // `debug` and `info`.
    if let Some(LoggingLevel::Debug | LoggingLevel::Info) = context.meta.log_level() {
        let message = LoggingMessageNotificationParam::new(
            LoggingLevel::Info,
            json!("Diagnostic trace logging activated"),
        );
        let _ = context.peer.notify_logging_message(message).await;
    }
    text("Logging evaluated")
}
