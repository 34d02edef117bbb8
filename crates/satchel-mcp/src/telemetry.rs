//! OpenTelemetry spans of MCP calls, as OpenTelemetry's MCP semantic
//! conventions name them: `tools/call {tool}` with `mcp.method.name`,
//! `gen_ai.tool.name`, `gen_ai.operation.name` `execute_tool`,
//! `jsonrpc.request.id` and, when known, `mcp.session.id`; a client span
//! (kind CLIENT) for each call Satchel makes to a server, its context sent
//! in the request's `params._meta` (`traceparent`, `tracestate`), and a
//! server span (kind SERVER) for each call `mcp serve` answers, continuing
//! the trace whose context came in `_meta`.
//!
//! Spans go through the `opentelemetry` API's global providers and
//! propagator (installed by the host when telemetry is on; no-ops before).

use std::collections::HashMap;

use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue, global};
use rmcp::model::RequestMetaObject;

/// The instrumentation scope of MCP spans.
const SCOPE: &str = "satchel-mcp";

/// The method every span here is for.
const TOOLS_CALL: &str = "tools/call";

fn start(parent: &Context, kind: SpanKind, tool: &str, mut attributes: Vec<KeyValue>) -> Context {
    let tracer = global::tracer(SCOPE);
    attributes.extend([
        KeyValue::new("mcp.method.name", TOOLS_CALL),
        KeyValue::new("gen_ai.operation.name", "execute_tool"),
        KeyValue::new("gen_ai.tool.name", tool.to_owned()),
    ]);
    let span = tracer
        .span_builder(format!("{TOOLS_CALL} {tool}"))
        .with_kind(kind)
        .with_attributes(attributes)
        .start_with_context(&tracer, parent);
    parent.with_span(span)
}

/// Starts the client span of a call to `tool` on `server`, under the
/// current context (the caller's `execute_tool` span), and returns it with
/// the `_meta` that carries it to the server (`None` when there is no
/// trace to carry).
pub(crate) fn start_client(server: &str, tool: &str) -> (Context, Option<RequestMetaObject>) {
    let context = start(
        &Context::current(),
        SpanKind::Client,
        tool,
        vec![KeyValue::new("server.address", server.to_owned())],
    );
    let mut fields: HashMap<String, String> = HashMap::new();
    global::get_text_map_propagator(|propagator| propagator.inject_context(&context, &mut fields));
    if fields.is_empty() {
        return (context, None);
    }
    let mut meta = RequestMetaObject::new();
    for (key, value) in fields {
        meta.0.0.insert(key, serde_json::Value::String(value));
    }
    (context, Some(meta))
}

/// Starts the server span of a `tools/call` of `tool`, continuing the
/// trace whose context the client sent in `meta`.
pub(crate) fn start_server(
    meta: &RequestMetaObject,
    tool: &str,
    request_id: String,
    session: Option<String>,
) -> Context {
    let carried: HashMap<String, String> = ["traceparent", "tracestate"]
        .into_iter()
        .filter_map(|key| {
            meta.0
                .0
                .get(key)
                .and_then(serde_json::Value::as_str)
                .map(|value| (key.to_owned(), value.to_owned()))
        })
        .collect();
    let parent = global::get_text_map_propagator(|propagator| propagator.extract(&carried));
    let mut attributes = vec![KeyValue::new("jsonrpc.request.id", request_id)];
    if let Some(session) = session {
        attributes.push(KeyValue::new("mcp.session.id", session));
    }
    start(&parent, SpanKind::Server, tool, attributes)
}

/// Ends an MCP span, with `error` as its `error.type` when the call failed.
pub(crate) fn end(context: &Context, error: Option<&str>) {
    let span = context.span();
    if let Some(error) = error {
        span.set_attribute(KeyValue::new("error.type", error.to_owned()));
        span.set_status(Status::error(error.to_owned()));
    }
    span.end();
}
