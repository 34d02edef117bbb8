//! OpenTelemetry export, installed once per process by the host: traces
//! and metrics over OTLP/HTTP (protobuf or JSON) to a collector, configured
//! by the standard `OTEL_*` variables or agent.json's `otel` section. Off
//! unless one of them turns it on.
//!
//! The spans and metrics themselves are made where the work happens
//! (`satchel_agent::telemetry`, `satchel-mcp`'s `telemetry`) through the
//! `opentelemetry` API; this module only installs the providers they
//! report to. Finished spans go to a bounded queue that a background
//! thread sends in batches, so no call waits for the collector: when the
//! queue is full spans are dropped, and when the collector cannot be
//! reached the batch is dropped and counted ([`Telemetry::dropped`]), with
//! one warning.
//!
//! ```json
//! {"otel": {"enabled": true, "endpoint": "http://127.0.0.1:4318", "protocol": "http/json",
//!           "headers": {"x-team": "agents"}, "serviceName": "satchel", "logContent": false}}
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry::global;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use satchel_tools::Settings;
use serde::Deserialize;

/// Where OTLP goes when nothing says (the OTLP/HTTP default).
const DEFAULT_ENDPOINT: &str = "http://localhost:4318";

/// How long one export may take before it is given up.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// Finished spans waiting for export, at most; more are dropped.
const QUEUE: usize = 2048;

/// agent.json's `otel` section.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
struct OtelSection {
    enabled: Option<bool>,
    traces: Option<bool>,
    metrics: Option<bool>,
    endpoint: Option<String>,
    protocol: Option<String>,
    headers: BTreeMap<String, String>,
    service_name: Option<String>,
    log_content: Option<bool>,
}

/// What to export and where, resolved from the environment and agent.json.
#[derive(Debug, Clone, PartialEq)]
pub struct OtelConfig {
    /// Export spans.
    pub traces: bool,
    /// Export metrics.
    pub metrics: bool,
    /// The traces endpoint, whole (`…/v1/traces`).
    pub traces_endpoint: String,
    /// The metrics endpoint, whole (`…/v1/metrics`).
    pub metrics_endpoint: String,
    /// `true`: OTLP/HTTP with JSON; `false`: with protobuf.
    pub json: bool,
    /// Sent with every export (`OTEL_EXPORTER_OTLP_HEADERS`, `otel.headers`).
    pub headers: HashMap<String, String>,
    /// `service.name` of the resource.
    pub service_name: String,
    /// Record prompt and tool content on spans (`otel.logContent`).
    pub log_content: bool,
}

/// The export configuration, `None` when telemetry is off, or why the
/// configuration cannot be used (a warning; telemetry stays off).
///
/// On when `OTEL_TRACES_EXPORTER` or `OTEL_METRICS_EXPORTER` is `otlp`, when
/// `OTEL_EXPORTER_OTLP_ENDPOINT` (or a per-signal endpoint) is set, or when
/// `otel.enabled` is true; `OTEL_SDK_DISABLED=true` and an exporter of
/// `none` turn it off. Variables win over agent.json.
pub fn config(
    settings: &Settings,
    env: &BTreeMap<String, String>,
) -> Result<Option<OtelConfig>, String> {
    let section: OtelSection = match settings.value.get("otel") {
        None => OtelSection::default(),
        Some(value) => serde_json::from_value(value.clone())
            .map_err(|error| format!("`otel` in agent.json: {error}; telemetry is off"))?,
    };
    let var = |name: &str| env.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let endpoint_var = var("OTEL_EXPORTER_OTLP_ENDPOINT");
    let traces_endpoint_var = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    let metrics_endpoint_var = var("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
    let default_on = section.enabled.unwrap_or(false) || endpoint_var.is_some();
    let signal = |exporter: &str, own_endpoint: bool, configured: Option<bool>| match var(exporter)
    {
        Some(value) => Ok(value
            .split(',')
            .any(|one| one.trim().eq_ignore_ascii_case("otlp"))),
        None => Ok::<bool, String>(configured.unwrap_or(default_on || own_endpoint)),
    };
    let traces = signal(
        "OTEL_TRACES_EXPORTER",
        traces_endpoint_var.is_some(),
        section.traces,
    )?;
    let metrics = signal(
        "OTEL_METRICS_EXPORTER",
        metrics_endpoint_var.is_some(),
        section.metrics,
    )?;
    if !traces && !metrics {
        return Ok(None);
    }
    let protocol = var("OTEL_EXPORTER_OTLP_PROTOCOL")
        .map(str::to_owned)
        .or(section.protocol)
        .unwrap_or_else(|| "http/protobuf".to_owned());
    let json = match protocol.as_str() {
        "http/protobuf" => false,
        "http/json" => true,
        other => {
            return Err(format!(
                "OTLP protocol `{other}` is not supported (Satchel exports over http/protobuf or \
                 http/json); telemetry is off"
            ));
        }
    };
    let base = endpoint_var
        .map(str::to_owned)
        .or(section.endpoint)
        .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
    let base = base.trim_end_matches('/');
    let mut headers: HashMap<String, String> = section.headers.into_iter().collect();
    if let Some(list) = var("OTEL_EXPORTER_OTLP_HEADERS") {
        headers.extend(parse_headers(list));
    }
    let service_name = var("OTEL_SERVICE_NAME")
        .map(str::to_owned)
        .or(section.service_name)
        .unwrap_or_else(|| "satchel".to_owned());
    Ok(Some(OtelConfig {
        traces,
        metrics,
        traces_endpoint: traces_endpoint_var
            .map_or_else(|| format!("{base}/v1/traces"), str::to_owned),
        metrics_endpoint: metrics_endpoint_var
            .map_or_else(|| format!("{base}/v1/metrics"), str::to_owned),
        json,
        headers,
        service_name,
        log_content: section.log_content.unwrap_or(false),
    }))
}

/// `OTEL_EXPORTER_OTLP_HEADERS`: `key=value` pairs separated by commas,
/// values percent-decoded (the W3C Baggage format the specification uses).
fn parse_headers(list: &str) -> Vec<(String, String)> {
    list.split(',')
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            let value = url::form_urlencoded::parse(format!("v={}", value.trim()).as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())?;
            Some((key.trim().to_owned(), value))
        })
        .filter(|(key, _)| !key.is_empty())
        .collect()
}

/// The installed providers; [`Telemetry::shutdown`] sends what is queued.
pub struct Telemetry {
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
    dropped: Arc<AtomicU64>,
    log_content: bool,
}

impl Telemetry {
    /// Installs exporting providers for `config` as the process's global
    /// ones, with the W3C trace-context propagator.
    pub fn install(config: &OtelConfig) -> Result<Telemetry, String> {
        // The exporters' blocking reqwest client is built by the OTLP crate,
        // not by satchel-http: like the MCP client's transport, it needs
        // `ring` installed process-wide first.
        satchel_mcp::ensure_crypto_provider();
        let resource = Resource::builder()
            .with_service_name(config.service_name.clone())
            .build();
        let protocol = if config.json {
            Protocol::HttpJson
        } else {
            Protocol::HttpBinary
        };
        let dropped = Arc::new(AtomicU64::new(0));
        let tracer = if config.traces {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(protocol)
                .with_endpoint(config.traces_endpoint.clone())
                .with_timeout(EXPORT_TIMEOUT)
                .with_headers(config.headers.clone())
                .build()
                .map_err(|error| format!("OpenTelemetry traces exporter: {error}"))?;
            let counting = Counting {
                inner: exporter,
                dropped: dropped.clone(),
                warned: AtomicBool::new(false),
                endpoint: config.traces_endpoint.clone(),
            };
            let processor = BatchSpanProcessor::builder(counting)
                .with_batch_config(
                    BatchConfigBuilder::default()
                        .with_max_queue_size(QUEUE)
                        .with_scheduled_delay(Duration::from_millis(500))
                        .build(),
                )
                .build();
            let provider = SdkTracerProvider::builder()
                .with_span_processor(processor)
                .with_resource(resource.clone())
                .build();
            global::set_tracer_provider(provider.clone());
            global::set_text_map_propagator(TraceContextPropagator::new());
            Some(provider)
        } else {
            None
        };
        let meter = if config.metrics {
            let exporter = opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_protocol(protocol)
                .with_endpoint(config.metrics_endpoint.clone())
                .with_timeout(EXPORT_TIMEOUT)
                .with_headers(config.headers.clone())
                .build()
                .map_err(|error| format!("OpenTelemetry metrics exporter: {error}"))?;
            let reader = PeriodicReader::builder(exporter)
                .with_interval(Duration::from_secs(10))
                .build();
            let provider = SdkMeterProvider::builder()
                .with_reader(reader)
                .with_resource(resource)
                .build();
            global::set_meter_provider(provider.clone());
            Some(provider)
        } else {
            None
        };
        Ok(Telemetry {
            tracer,
            meter,
            dropped,
            log_content: config.log_content,
        })
    }

    /// Whether spans may carry prompt and tool content (`otel.logContent`).
    pub fn log_content(&self) -> bool {
        self.log_content
    }

    /// Spans dropped so far because the collector could not be reached.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Sends what is queued and stops the exporters (each within its
    /// timeout), on a blocking thread: the export clients are blocking.
    pub async fn shutdown(&self) {
        let tracer = self.tracer.clone();
        let meter = self.meter.clone();
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(provider) = tracer {
                let _ = provider.force_flush();
                let _ = provider.shutdown();
            }
            if let Some(provider) = meter {
                let _ = provider.force_flush();
                let _ = provider.shutdown();
            }
        })
        .await;
        let dropped = self.dropped();
        if dropped > 0 {
            tracing::warn!(
                "OpenTelemetry: {dropped} span(s) could not be exported and were dropped"
            );
        }
    }
}

/// The exporter, counting the spans of every batch the collector did not
/// take (one warning, then only the count).
#[derive(Debug)]
struct Counting<E> {
    inner: E,
    dropped: Arc<AtomicU64>,
    warned: AtomicBool,
    endpoint: String,
}

impl<E: SpanExporter> SpanExporter for Counting<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len() as u64;
        let result = self.inner.export(batch).await;
        if let Err(error) = &result {
            self.dropped.fetch_add(spans, Ordering::Relaxed);
            if !self.warned.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "OpenTelemetry: cannot export to {}: {error}; spans are dropped (counted) \
                     until it answers",
                    self.endpoint
                );
            }
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn settings(value: serde_json::Value) -> Settings {
        Settings {
            value: value.as_object().cloned().unwrap_or_default(),
            ..Settings::default()
        }
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn off_unless_a_variable_or_the_file_turns_it_on() {
        assert_eq!(config(&settings(json!({})), &env(&[])), Ok(None));
        let on = config(
            &settings(json!({})),
            &env(&[
                ("OTEL_TRACES_EXPORTER", "otlp"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
                (
                    "OTEL_EXPORTER_OTLP_HEADERS",
                    "x-team=agents,authorization=Bearer%20abc",
                ),
                ("OTEL_METRICS_EXPORTER", "none"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert!(on.traces && !on.metrics && on.json);
        assert_eq!(on.traces_endpoint, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(on.headers["authorization"], "Bearer abc");
        let file = config(
            &settings(json!({"otel": {"enabled": true, "serviceName": "bot"}})),
            &env(&[]),
        )
        .unwrap()
        .unwrap();
        assert!(file.traces && file.metrics);
        assert_eq!(file.service_name, "bot");
        assert_eq!(file.metrics_endpoint, "http://localhost:4318/v1/metrics");
        assert_eq!(
            config(
                &settings(json!({"otel": {"enabled": true}})),
                &env(&[("OTEL_SDK_DISABLED", "true")])
            ),
            Ok(None)
        );
        assert!(
            config(
                &settings(json!({"otel": {"enabled": true, "protocol": "grpc"}})),
                &env(&[])
            )
            .is_err()
        );
    }
}
