//! OpenTelemetry spans and metrics of the loop, named as OpenTelemetry's
//! GenAI semantic conventions name them: `invoke_agent satchel` for a
//! statement, `chat {model}` for each model request (side requests too,
//! with `satchel.request.purpose`), `execute_tool {tool}` for each tool
//! call; the metrics `gen_ai.client.token.usage`,
//! `gen_ai.client.operation.duration`, and `satchel.tool.calls` and
//! `satchel.tool.duration`.
//!
//! Everything goes through the `opentelemetry` API's global providers:
//! until the host installs an exporting one, they are no-ops, and an
//! installed one queues finished spans for a background thread, so no
//! call waits on a collector. Content (tool arguments and results, the
//! model's text) is recorded only when `otel.logContent` is set, and then
//! redacted like the record.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use opentelemetry::metrics::{Counter, Histogram};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue, global};
use satchel_core::redact::Redactor;
use satchel_core::{ToolCall, ToolOutput};
use satchel_llm::{LlmError, ModelConfig, ProviderKind, Response, StopReason};

/// The instrumentation scope of every span and metric.
const SCOPE: &str = "satchel";

/// What `otel.logContent` allows, and how content is redacted first.
#[derive(Debug, Clone, Default)]
pub struct ContentPolicy {
    /// Record prompt and tool content on spans.
    pub log_content: bool,
    /// Applied to every content attribute.
    pub redactor: Redactor,
}

impl ContentPolicy {
    /// `value` redacted, when content may be recorded.
    fn content(&self, value: &str) -> Option<String> {
        self.log_content
            .then(|| self.redactor.redact_str(value).into_owned())
    }
}

/// The `otel.logContent` flag of agent.json's `otel` section.
pub fn log_content(settings: &satchel_tools::Settings) -> bool {
    settings
        .value
        .get("otel")
        .and_then(|otel| otel.get("logContent"))
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false)
}

struct Instruments {
    token_usage: Histogram<u64>,
    operation_duration: Histogram<f64>,
    tool_calls: Counter<u64>,
    tool_duration: Histogram<f64>,
}

/// The instruments, made on first use (the host installs the meter
/// provider before any statement runs).
fn instruments() -> &'static Instruments {
    static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();
    INSTRUMENTS.get_or_init(|| {
        let meter = global::meter(SCOPE);
        Instruments {
            token_usage: meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Number of input and output tokens used.")
                .build(),
            operation_duration: meter
                .f64_histogram("gen_ai.client.operation.duration")
                .with_unit("s")
                .with_description("GenAI operation duration.")
                .build(),
            tool_calls: meter
                .u64_counter("satchel.tool.calls")
                .with_unit("{call}")
                .with_description("Tool calls, by tool and outcome.")
                .build(),
            tool_duration: meter
                .f64_histogram("satchel.tool.duration")
                .with_unit("s")
                .with_description("Duration of tool calls.")
                .build(),
        }
    })
}

/// The conventions' provider name.
fn provider_name(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi => "openai",
        ProviderKind::Anthropic => "anthropic",
    }
}

/// `server.address` and `server.port` of a base URL.
fn server(base_url: &str) -> Vec<KeyValue> {
    let Ok(url) = url::Url::parse(base_url) else {
        return Vec::new();
    };
    let mut attributes = Vec::new();
    if let Some(host) = url.host_str() {
        attributes.push(KeyValue::new("server.address", host.to_owned()));
    }
    if let Some(port) = url.port_or_known_default() {
        attributes.push(KeyValue::new("server.port", i64::from(port)));
    }
    attributes
}

/// Starts the `invoke_agent` span of a statement; its context is the
/// parent of the statement's other spans. End it with [`end_statement`].
pub(crate) fn start_statement(conversation_id: &str) -> Context {
    let tracer = global::tracer(SCOPE);
    let span = tracer
        .span_builder("invoke_agent satchel")
        .with_kind(SpanKind::Internal)
        .with_attributes([
            KeyValue::new("gen_ai.operation.name", "invoke_agent"),
            KeyValue::new("gen_ai.agent.name", "satchel"),
            KeyValue::new("gen_ai.conversation.id", conversation_id.to_owned()),
        ])
        .start_with_context(&tracer, &Context::new());
    Context::new().with_span(span)
}

/// Ends a statement's span with how it ended.
pub(crate) fn end_statement(context: &Context, turns: u32, failed: Option<&str>) {
    let span = context.span();
    span.set_attribute(KeyValue::new("satchel.turns", i64::from(turns)));
    if let Some(message) = failed {
        span.set_attribute(KeyValue::new("error.type", "statement_failed"));
        span.set_status(Status::error(message.to_owned()));
    }
    span.end();
}

/// Starts the span of a compaction that folds `statements` statements
/// into a summary (its side request is a `chat` span inside it).
pub(crate) fn start_compaction(parent: &Context, statements: usize) -> Context {
    let tracer = global::tracer(SCOPE);
    let span = tracer
        .span_builder("satchel.compaction")
        .with_kind(SpanKind::Internal)
        .with_attributes([KeyValue::new(
            "satchel.compaction.statements",
            i64::try_from(statements).unwrap_or(i64::MAX),
        )])
        .start_with_context(&tracer, parent);
    parent.with_span(span)
}

/// Ends a compaction's span, with the reason it failed if it did.
pub(crate) fn end_compaction(context: &Context, failed: Option<&String>) {
    let span = context.span();
    if let Some(reason) = failed {
        span.set_attribute(KeyValue::new("error.type", "compaction_failed"));
        span.set_status(Status::error(reason.clone()));
    }
    span.end();
}

/// One model request in flight: a `chat {model}` span and its clock.
pub(crate) struct ChatSpan {
    context: Context,
    started: Instant,
    first_chunk: Option<Duration>,
    attributes: Vec<KeyValue>,
}

impl ChatSpan {
    /// Starts the span of a request to `config`'s model under `parent`;
    /// `purpose` is `turn` for the loop's own requests, else the side
    /// request's kind.
    pub(crate) fn start(parent: &Context, config: &ModelConfig, purpose: &str) -> ChatSpan {
        let tracer = global::tracer(SCOPE);
        let mut attributes = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.provider.name", provider_name(config.provider)),
            KeyValue::new("gen_ai.request.model", config.model.clone()),
        ];
        attributes.extend(server(&config.base_url));
        let mut start = attributes.clone();
        start.push(KeyValue::new("gen_ai.request.stream", config.stream));
        start.push(KeyValue::new("satchel.request.purpose", purpose.to_owned()));
        if let Some(max) = config.max_output_tokens {
            start.push(KeyValue::new("gen_ai.request.max_tokens", i64::from(max)));
        }
        if let Some(temperature) = config.temperature {
            start.push(KeyValue::new(
                "gen_ai.request.temperature",
                f64::from(temperature),
            ));
        }
        let span = tracer
            .span_builder(format!("chat {}", config.model))
            .with_kind(SpanKind::Client)
            .with_attributes(start)
            .start_with_context(&tracer, parent);
        ChatSpan {
            context: parent.with_span(span),
            started: Instant::now(),
            first_chunk: None,
            attributes,
        }
    }

    /// Notes that the first part of the answer arrived.
    pub(crate) fn chunk(&mut self) {
        if self.first_chunk.is_none() {
            self.first_chunk = Some(self.started.elapsed());
        }
    }

    /// Ends the span with the answer or the error, and records the metrics.
    pub(crate) fn end(self, result: &Result<Response, LlmError>, content: &ContentPolicy) {
        let span = self.context.span();
        let mut metric_attributes = self.attributes;
        if let Some(first) = self.first_chunk {
            span.set_attribute(KeyValue::new(
                "gen_ai.response.time_to_first_chunk",
                first.as_secs_f64(),
            ));
        }
        match result {
            Ok(response) => {
                if let Some(model) = &response.model {
                    span.set_attribute(KeyValue::new("gen_ai.response.model", model.clone()));
                    metric_attributes.push(KeyValue::new("gen_ai.response.model", model.clone()));
                }
                if let Some(id) = &response.id {
                    span.set_attribute(KeyValue::new("gen_ai.response.id", id.clone()));
                }
                span.set_attribute(KeyValue::new(
                    "gen_ai.response.finish_reasons",
                    opentelemetry::Value::Array(opentelemetry::Array::String(vec![
                        finish_reason(&response.stop_reason).into(),
                    ])),
                ));
                if let Some(usage) = &response.usage {
                    let tokens = |name: &'static str, n: u64| {
                        KeyValue::new(name, i64::try_from(n).unwrap_or(i64::MAX))
                    };
                    span.set_attribute(tokens("gen_ai.usage.input_tokens", usage.input_tokens));
                    span.set_attribute(tokens("gen_ai.usage.output_tokens", usage.output_tokens));
                    span.set_attribute(tokens(
                        "gen_ai.usage.cache_read.input_tokens",
                        usage.cache_read_tokens,
                    ));
                    span.set_attribute(tokens(
                        "gen_ai.usage.cache_creation.input_tokens",
                        usage.cache_write_tokens,
                    ));
                    if let Some(reasoning) = usage.reasoning_tokens {
                        span.set_attribute(tokens(
                            "gen_ai.usage.reasoning.output_tokens",
                            reasoning,
                        ));
                    }
                    let usage_metric = &instruments().token_usage;
                    for (kind, n) in [
                        ("input", usage.input_tokens),
                        ("output", usage.output_tokens),
                    ] {
                        let mut attributes = metric_attributes.clone();
                        attributes.push(KeyValue::new("gen_ai.token.type", kind));
                        usage_metric.record(n, &attributes);
                    }
                }
                if let Some(text) = content.content(&response.text()) {
                    span.set_attribute(KeyValue::new("gen_ai.output.messages", text));
                }
            }
            Err(error) => {
                let kind = error_type(error);
                span.set_attribute(KeyValue::new("error.type", kind));
                span.set_status(Status::error(error.to_string()));
                metric_attributes.push(KeyValue::new("error.type", kind));
            }
        }
        instruments()
            .operation_duration
            .record(self.started.elapsed().as_secs_f64(), &metric_attributes);
        span.end();
    }
}

/// The conventions' finish reason for a stop reason.
fn finish_reason(reason: &StopReason) -> String {
    match reason {
        StopReason::EndTurn => "stop".into(),
        StopReason::ToolUse => "tool_calls".into(),
        StopReason::MaxTokens => "length".into(),
        StopReason::StopSequence => "stop".into(),
        StopReason::ContentFilter | StopReason::Refusal => "content_filter".into(),
        StopReason::PauseTurn => "pause_turn".into(),
        StopReason::Interrupted => "interrupted".into(),
        StopReason::Other(other) => other.clone(),
    }
}

/// A low-cardinality class of a model error, for `error.type`.
fn error_type(error: &LlmError) -> &'static str {
    match error {
        LlmError::Config { .. } => "config",
        LlmError::MissingApiKey { .. } => "missing_api_key",
        LlmError::Unauthorized { .. } => "unauthorized",
        LlmError::ModelNotFound { .. } => "model_not_found",
        LlmError::RateLimited { .. } => "rate_limited",
        LlmError::Server { .. } => "server_error",
        LlmError::Rejected { .. } => "rejected",
        LlmError::Connect { .. } => "connect",
        LlmError::Timeout { .. } => "timeout",
        LlmError::Incomplete { .. } => "incomplete",
        LlmError::Interrupted { .. } => "interrupted",
        LlmError::InvalidResponse { .. } => "invalid_response",
        LlmError::Provider { .. } => "provider_error",
        LlmError::Cassette { .. } => "cassette_mismatch",
        LlmError::Cancelled => "cancelled",
    }
}

/// Starts the `execute_tool {tool}` span of a call under `parent`.
pub(crate) fn start_tool(parent: &Context, call: &ToolCall, content: &ContentPolicy) -> Context {
    let tracer = global::tracer(SCOPE);
    let mut attributes = vec![
        KeyValue::new("gen_ai.operation.name", "execute_tool"),
        KeyValue::new("gen_ai.tool.name", call.name.clone()),
        KeyValue::new("gen_ai.tool.call.id", call.id.clone()),
        KeyValue::new("gen_ai.tool.type", "function"),
    ];
    if let Some(arguments) = content.content(&call.input.to_string()) {
        attributes.push(KeyValue::new("gen_ai.tool.call.arguments", arguments));
    }
    let span = tracer
        .span_builder(format!("execute_tool {}", call.name))
        .with_kind(SpanKind::Internal)
        .with_attributes(attributes)
        .start_with_context(&tracer, parent);
    parent.with_span(span)
}

/// Runs `run`, a tool call made outside any conversation (`satchel tools
/// call`), under an `execute_tool {tool}` span of its own, the root of its
/// trace, and records the tool metrics as a conversation's calls do.
pub async fn traced_tool_call(
    call: &ToolCall,
    content: &ContentPolicy,
    run: impl std::future::Future<Output = ToolOutput>,
) -> ToolOutput {
    use opentelemetry::context::FutureExt as _;
    let context = start_tool(&Context::new(), call, content);
    let started = Instant::now();
    let output = run.with_context(context.clone()).await;
    end_tool(&context, call, &output, started.elapsed(), content);
    output
}

/// Ends a tool call's span with its outcome and records the tool metrics.
pub(crate) fn end_tool(
    context: &Context,
    call: &ToolCall,
    output: &ToolOutput,
    duration: Duration,
    content: &ContentPolicy,
) {
    let span = context.span();
    let outcome = if output.is_error { "error" } else { "ok" };
    span.set_attribute(KeyValue::new("satchel.tool.outcome", outcome));
    let mut metric_attributes = vec![
        KeyValue::new("gen_ai.tool.name", call.name.clone()),
        KeyValue::new("satchel.tool.outcome", outcome),
    ];
    if output.is_error {
        let code = output
            .error_code
            .as_ref()
            .map_or_else(|| "tool_error".to_owned(), |code| code.to_string());
        span.set_attribute(KeyValue::new("error.type", code.clone()));
        span.set_status(Status::error(satchel_core::text::cut_with(
            &output.results.to_text(),
            200,
            "...",
        )));
        metric_attributes.push(KeyValue::new("error.type", code));
    }
    if let Some(result) = content.content(&output.results.to_text()) {
        span.set_attribute(KeyValue::new("gen_ai.tool.call.result", result));
    }
    span.end();
    let instruments = instruments();
    instruments.tool_calls.add(1, &metric_attributes);
    instruments
        .tool_duration
        .record(duration.as_secs_f64(), &metric_attributes);
}
