//! OTLP/HTTP trace export with the JSON encoding: finished spans are queued (bounded) and a
//! background task posts them in batches to the traces URL (`{endpoint}/v1/traces`), with the
//! operator's headers (collector authentication), as the configured service, and only the traces
//! the sampler keeps. [`ExportSettings`] holds all of it; the configuration builds it from the
//! OpenTelemetry environment variables (`OTEL_EXPORTER_OTLP_*`, `OTEL_SERVICE_NAME`,
//! `OTEL_TRACES_SAMPLER`; docs/operations.md, "Tracing").
//!
//! Never in the way of the work it observes: a span is handed over with a non-blocking
//! `try_send`; when the queue is full (the collector is slow or down) the span is dropped and
//! counted (`kuatia_otlp_spans_dropped_total{reason="queue_full"}`); a batch the collector does
//! not take is dropped and counted too (`reason="export_failed"`), never retried, so a collector
//! outage costs spans, not memory.
//!
//! Why not the `opentelemetry` crates: their OTLP exporter brings tonic and prost (or their HTTP
//! flavour, still prost and the SDK's own runtime glue), several minutes of compile time on the
//! 2-core CI for what is ~300 lines here over the reqwest and serde_json the workspace already
//! builds. The JSON mapping is part of the OTLP specification and every collector accepts it.
//!
//! Routing: the tracing subscriber is global, but each service decides whether it exports
//! ([`OtlpExporter::start`] registers the exporter for the tokio runtime it is started on). A
//! root span takes the exporter of the runtime it starts on, its children inherit it. One
//! process runs one service on one runtime in production; the integration tests run many
//! services in one process, each on its own test runtime, so each exports to its own collector
//! (or nowhere) through the one subscriber they share.

use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::layer::{AttrValue, FinishedSpan};

/// Spans waiting for export, at most; beyond it new spans are dropped.
pub const QUEUE_CAPACITY: usize = 4096;
/// Spans per POST, at most.
pub const MAX_BATCH: usize = 512;
/// How long the first span of a batch waits for others.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// Time allowed for one POST.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where finished spans of one exporter go.
#[derive(Debug)]
pub(crate) struct Sink {
    tx: mpsc::Sender<FinishedSpan>,
    dropped: AtomicU64,
    /// Decides whether a trace entering the service is recorded ([`super::layer`] asks it).
    pub(crate) sampler: Sampler,
}

impl Sink {
    /// Queues a span without waiting; a full queue drops it.
    pub(crate) fn offer(&self, span: FinishedSpan) {
        match self.tx.try_send(span) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("kuatia_otlp_spans_dropped_total", "reason" => "queue_full").increment(1);
            }
            // The exporter has stopped: nothing to count, the service is going away.
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }
}

/// The exporters of the process, by the runtime whose root spans they take.
static SINKS: RwLock<Vec<(tokio::runtime::Id, Arc<Sink>)>> = RwLock::new(Vec::new());

/// The exporter registered for the current tokio runtime (the latest, if several are).
pub(crate) fn sink_for_current_runtime() -> Option<Arc<Sink>> {
    let runtime = tokio::runtime::Handle::try_current().ok()?.id();
    let sinks = SINKS.read().unwrap_or_else(|e| e.into_inner());
    sinks
        .iter()
        .rev()
        .find(|(id, _)| *id == runtime)
        .map(|(_, sink)| sink.clone())
}

fn register(runtime: tokio::runtime::Id, sink: Arc<Sink>) {
    SINKS
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .push((runtime, sink));
}

/// A sink that is not exported anywhere: the test reads the receiver.
#[cfg(test)]
pub(crate) fn test_sink(capacity: usize) -> (Arc<Sink>, mpsc::Receiver<FinishedSpan>) {
    let (tx, rx) = mpsc::channel(capacity);
    (
        Arc::new(Sink {
            tx,
            dropped: AtomicU64::new(0),
            sampler: Sampler::default(),
        }),
        rx,
    )
}

/// Registers `sink` for the current runtime (tests).
#[cfg(test)]
pub(crate) fn register_for_current_runtime(sink: Arc<Sink>) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        register(runtime.id(), sink);
    }
}

pub(crate) fn unregister(sink: &Arc<Sink>) {
    SINKS
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|(_, s)| !Arc::ptr_eq(s, sink));
}

/// A configuration the exporter cannot use.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// The endpoint is not an http(s) URL.
    #[error("the OTLP endpoint must start with http:// or https://, not {0:?}")]
    Endpoint(String),
    /// Not called inside a tokio runtime.
    #[error("the OTLP exporter must be started inside a tokio runtime")]
    NoRuntime,
    /// The HTTP client could not be built.
    #[error("the OTLP HTTP client: {0}")]
    Client(String),
    /// A header list that is not `key=value` pairs separated by commas.
    #[error("{0}")]
    Headers(String),
    /// A sampler name or argument that is not one of OpenTelemetry's.
    #[error("{0}")]
    Sampler(String),
}

/// The `{endpoint}/v1/traces` URL of an OTLP/HTTP base endpoint (`http://collector:4318`), or
/// the endpoint itself when it already names the traces path (what `KUATIA_OTLP_ENDPOINT`
/// means).
pub fn traces_url(endpoint: &str) -> Result<String, OtlpError> {
    let endpoint = http_url(endpoint)?.trim_end_matches('/');
    Ok(if endpoint.ends_with("/v1/traces") {
        endpoint.to_owned()
    } else {
        format!("{endpoint}/v1/traces")
    })
}

/// The traces URL of `OTEL_EXPORTER_OTLP_ENDPOINT`, a base URL to which the traces path
/// `v1/traces` is always appended, as the OpenTelemetry specification says.
pub fn base_traces_url(base: &str) -> Result<String, OtlpError> {
    Ok(format!("{}/v1/traces", http_url(base)?.trim_end_matches('/')))
}

/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: the traces URL itself, used as it is.
pub fn exact_traces_url(url: &str) -> Result<String, OtlpError> {
    http_url(url).map(str::to_owned)
}

/// The trimmed URL when it is an http(s) one.
fn http_url(url: &str) -> Result<&str, OtlpError> {
    let url = url.trim();
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(url)
    } else {
        Err(OtlpError::Endpoint(url.to_owned()))
    }
}

/// Reads an `OTEL_EXPORTER_OTLP_HEADERS` value: `key=value` pairs separated by commas, values
/// percent-decoded (`Authorization=Basic%20dXNlcjpwYXNz`), white space around keys and values
/// ignored, empty entries skipped. Each must make a valid HTTP header. The error names the key,
/// never the value (a value is usually a credential).
pub fn parse_headers(text: &str) -> Result<Vec<(String, String)>, OtlpError> {
    let mut headers = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((key, value)) = entry.split_once('=') else {
            return Err(OtlpError::Headers(
                "a header list is key=value pairs separated by commas; an entry has no '='".into(),
            ));
        };
        let key = key.trim().to_owned();
        let value = percent_decode(value.trim()).ok_or_else(|| {
            OtlpError::Headers(format!(
                "the value of header {key:?} is not valid percent-encoded UTF-8"
            ))
        })?;
        if reqwest::header::HeaderName::from_bytes(key.as_bytes()).is_err() {
            return Err(OtlpError::Headers(format!("{key:?} is not an HTTP header name")));
        }
        if reqwest::header::HeaderValue::from_str(&value).is_err() {
            return Err(OtlpError::Headers(format!(
                "the value of header {key:?} cannot be sent in HTTP"
            )));
        }
        headers.push((key, value));
    }
    Ok(headers)
}

/// `%XX` sequences to their bytes (a `+` stays a `+`); `None` when a sequence is malformed or
/// the result is not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// What a trace's first span in this service is decided by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RootSampler {
    /// Every trace is recorded.
    AlwaysOn,
    /// No trace is recorded.
    AlwaysOff,
    /// A fixed share of traces, chosen by trace id (0 to 1).
    TraceIdRatio(f64),
}

/// Which traces are recorded and exported: OpenTelemetry's `OTEL_TRACES_SAMPLER` (with
/// `OTEL_TRACES_SAMPLER_ARG`). The decision is taken where a trace enters the service — a root
/// span, or a span continuing a remote parent (an incoming `traceparent`, a job's payload) — and
/// the spans under it follow it. An unrecorded trace still propagates, marked unsampled
/// (`traceparent` flags `00`), so that the services after it do not record it either.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampler {
    /// Decides the traces that start here (and, when not parent-based, all of them).
    pub root: RootSampler,
    /// Whether a remote parent's decision (its `sampled` flag) is followed.
    pub parent_based: bool,
}

impl Default for Sampler {
    /// OpenTelemetry's default, `parentbased_always_on`: what kuatia always did.
    fn default() -> Self {
        Self {
            root: RootSampler::AlwaysOn,
            parent_based: true,
        }
    }
}

impl Sampler {
    /// Reads `OTEL_TRACES_SAMPLER` (`always_on`, `always_off`, `traceidratio`,
    /// `parentbased_always_on`, `parentbased_always_off`, `parentbased_traceidratio`; unset or
    /// empty: `parentbased_always_on`) and its argument, the ratio of the two `traceidratio`
    /// samplers (0 to 1; unset or empty: 1), ignored by the others. Anything else is refused
    /// rather than silently replaced by the default.
    pub fn parse(name: Option<&str>, arg: Option<&str>) -> Result<Self, OtlpError> {
        let name = name
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .unwrap_or("parentbased_always_on");
        let (parent_based, root) = match name.strip_prefix("parentbased_") {
            Some(root) => (true, root),
            None => (false, name),
        };
        let root = match root {
            "always_on" => RootSampler::AlwaysOn,
            "always_off" => RootSampler::AlwaysOff,
            "traceidratio" => {
                let ratio = match arg.map(str::trim).filter(|a| !a.is_empty()) {
                    None => 1.0,
                    Some(arg) => arg
                        .parse::<f64>()
                        .ok()
                        .filter(|r| (0.0..=1.0).contains(r))
                        .ok_or_else(|| {
                            OtlpError::Sampler(format!(
                                "OTEL_TRACES_SAMPLER_ARG must be a ratio between 0 and 1, not {arg:?}"
                            ))
                        })?,
                };
                RootSampler::TraceIdRatio(ratio)
            }
            _ => {
                return Err(OtlpError::Sampler(format!(
                    "OTEL_TRACES_SAMPLER {name:?} is not one of always_on, always_off, traceidratio, \
                     parentbased_always_on, parentbased_always_off, parentbased_traceidratio"
                )));
            }
        };
        Ok(Self { root, parent_based })
    }

    /// Whether the trace `trace_id` is recorded here, given the remote parent's `sampled` flag
    /// (`None` when the trace starts here).
    pub fn should_sample(&self, remote_sampled: Option<bool>, trace_id: &[u8; 16]) -> bool {
        if self.parent_based
            && let Some(sampled) = remote_sampled
        {
            return sampled;
        }
        match self.root {
            RootSampler::AlwaysOn => true,
            RootSampler::AlwaysOff => false,
            RootSampler::TraceIdRatio(ratio) => {
                // As OpenTelemetry's SDKs do: the last 8 bytes of the trace id, as a number
                // below 2^63, against ratio × 2^63; every service with the same ratio keeps the
                // same traces.
                let mut low = [0; 8];
                low.copy_from_slice(&trace_id[8..]);
                let x = u64::from_be_bytes(low) >> 1;
                // The cast saturates; a ratio of 1 gives 2^63, above every x.
                let bound = (ratio * 9_223_372_036_854_775_808.0) as u64;
                x < bound
            }
        }
    }
}

/// Where and how spans are exported: the traces URL, the headers sent with every export, the
/// `service.name` of the resource, and the sampler.
#[derive(Clone, PartialEq)]
pub struct ExportSettings {
    /// The full traces URL (`http://collector:4318/v1/traces`).
    pub url: String,
    /// Headers sent with every export (collector authentication), names and decoded values.
    pub headers: Vec<(String, String)>,
    /// The resource's `service.name`.
    pub service_name: String,
    /// Which traces are recorded.
    pub sampler: Sampler,
}

impl ExportSettings {
    /// Export to `url` (the traces URL) as `service_name`, no headers, the default sampler.
    pub fn new(url: impl Into<String>, service_name: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: Vec::new(),
            service_name: service_name.into(),
            sampler: Sampler::default(),
        }
    }
}

impl std::fmt::Debug for ExportSettings {
    /// Header values are left out: they are usually credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("ExportSettings")
            .field("url", &self.url)
            .field("headers", &headers)
            .field("service_name", &self.service_name)
            .field("sampler", &self.sampler)
            .finish()
    }
}

/// A running exporter, registered for the runtime it was started on. Dropping it unregisters
/// it and stops the task without a last flush; [`OtlpExporter::shutdown`] flushes first.
#[derive(Debug)]
pub struct OtlpExporter {
    sink: Arc<Sink>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl OtlpExporter {
    /// Starts exporting the root spans of the current runtime (and their children) to
    /// `endpoint` (`http://127.0.0.1:4318`, [`traces_url`]), as service `service_name`, with no
    /// headers and the default sampler.
    pub fn start(endpoint: &str, service_name: &str) -> Result<Self, OtlpError> {
        Self::start_with(&ExportSettings::new(traces_url(endpoint)?, service_name))
    }

    /// Starts exporting the root spans of the current runtime (and their children) as
    /// `settings` say.
    pub fn start_with(settings: &ExportSettings) -> Result<Self, OtlpError> {
        let url = exact_traces_url(&settings.url)?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| OtlpError::NoRuntime)?;
        let mut headers = reqwest::header::HeaderMap::new();
        for (key, value) in &settings.headers {
            let name = reqwest::header::HeaderName::from_bytes(key.as_bytes())
                .map_err(|_| OtlpError::Headers(format!("{key:?} is not an HTTP header name")))?;
            let mut value = reqwest::header::HeaderValue::from_str(value).map_err(|_| {
                OtlpError::Headers(format!("the value of header {key:?} cannot be sent in HTTP"))
            })?;
            value.set_sensitive(true);
            headers.append(name, value);
        }
        let client = reqwest::Client::builder()
            .timeout(EXPORT_TIMEOUT)
            .default_headers(headers)
            .build()
            .map_err(|e| OtlpError::Client(e.to_string()))?;
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let (stop, stopped) = watch::channel(false);
        let sink = Arc::new(Sink {
            tx,
            dropped: AtomicU64::new(0),
            sampler: settings.sampler,
        });
        let resource = resource(&settings.service_name);
        let task = runtime.spawn(run(rx, stopped, client, url, resource));
        register(runtime.id(), sink.clone());
        Ok(Self {
            sink,
            stop,
            task: Some(task),
        })
    }

    /// Spans dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.sink.dropped.load(Ordering::Relaxed)
    }

    /// Stops taking spans, exports what is queued (within `within`), and stops.
    pub async fn shutdown(mut self, within: Duration) {
        unregister(&self.sink);
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            if tokio::time::timeout(within, task).await.is_err() {
                abort.abort();
            }
        }
    }
}

impl Drop for OtlpExporter {
    fn drop(&mut self) {
        unregister(&self.sink);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

fn resource(service_name: &str) -> Value {
    json!({
        "attributes": [
            attribute("service.name", &AttrValue::Str(service_name.to_owned())),
            attribute("service.version", &AttrValue::Str(env!("CARGO_PKG_VERSION").to_owned())),
            attribute("service.instance.id", &AttrValue::Str(uuid::Uuid::now_v7().to_string())),
        ]
    })
}

/// The exporter task: batches of up to [`MAX_BATCH`] spans, each sent at most
/// [`FLUSH_INTERVAL`] after its first span arrived; on stop, what is queued goes in a last
/// round.
async fn run(
    mut rx: mpsc::Receiver<FinishedSpan>,
    mut stop: watch::Receiver<bool>,
    client: reqwest::Client,
    url: String,
    resource: Value,
) {
    let mut warned: Option<tokio::time::Instant> = None;
    loop {
        let mut batch = Vec::new();
        let stopping = tokio::select! {
            biased;
            _ = stop.changed() => true,
            span = rx.recv() => match span {
                Some(span) => { batch.push(span); false }
                None => true,
            },
        };
        if !stopping {
            let deadline = tokio::time::Instant::now() + FLUSH_INTERVAL;
            while batch.len() < MAX_BATCH {
                tokio::select! {
                    () = tokio::time::sleep_until(deadline) => break,
                    _ = stop.changed() => break,
                    span = rx.recv() => match span {
                        Some(span) => batch.push(span),
                        None => break,
                    },
                }
            }
            export(&client, &url, &resource, std::mem::take(&mut batch), &mut warned).await;
            if !*stop.borrow() {
                continue;
            }
        }
        // Stopping: what is already queued goes out, then the task ends.
        loop {
            while batch.len() < MAX_BATCH
                && let Ok(span) = rx.try_recv()
            {
                batch.push(span);
            }
            if batch.is_empty() {
                return;
            }
            export(&client, &url, &resource, std::mem::take(&mut batch), &mut warned).await;
        }
    }
}

async fn export(
    client: &reqwest::Client,
    url: &str,
    resource: &Value,
    batch: Vec<FinishedSpan>,
    warned: &mut Option<tokio::time::Instant>,
) {
    if batch.is_empty() {
        return;
    }
    let n = batch.len() as u64;
    let body = encode(resource, &batch);
    // A span that is never exported, so that nothing the POST itself might trace comes back
    // as a span to export.
    let quiet = tracing::info_span!("otlp_export", otel.export = false);
    let outcome = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_string())
        .send()
        .instrument(quiet)
        .await
        .map_err(|e| e.to_string())
        .and_then(|response| {
            if response.status().is_success() {
                Ok(())
            } else {
                Err(format!("HTTP {}", response.status()))
            }
        });
    match outcome {
        Ok(()) => metrics::counter!("kuatia_otlp_spans_exported_total").increment(n),
        Err(reason) => {
            metrics::counter!("kuatia_otlp_spans_dropped_total", "reason" => "export_failed").increment(n);
            // One warning a minute at most: a collector that is down must not flood the logs.
            let now = tokio::time::Instant::now();
            if warned.is_none_or(|at| now.duration_since(at) >= Duration::from_secs(60)) {
                *warned = Some(now);
                tracing::warn!(url, spans = n, error = %reason, "exporting spans failed; they are dropped");
            }
        }
    }
}

fn unix_nanos(t: SystemTime) -> String {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
        .to_string()
}

fn attribute(key: &str, value: &AttrValue) -> Value {
    let value = match value {
        AttrValue::Str(s) => json!({"stringValue": s}),
        // int64 is a string in the protobuf JSON mapping.
        AttrValue::Int(i) => json!({"intValue": i.to_string()}),
        AttrValue::Float(f) if f.is_finite() => json!({"doubleValue": f}),
        AttrValue::Float(f) => json!({"stringValue": f.to_string()}),
        AttrValue::Bool(b) => json!({"boolValue": b}),
    };
    json!({"key": key, "value": value})
}

/// An `ExportTraceServiceRequest` in OTLP's JSON mapping: ids as lowercase hex, times as
/// decimal strings of Unix nanoseconds, enums as numbers.
pub(crate) fn encode(resource: &Value, spans: &[FinishedSpan]) -> Value {
    let spans: Vec<Value> = spans
        .iter()
        .map(|s| {
            let mut span = json!({
                "traceId": s.context.trace_id_hex(),
                "spanId": s.context.span_id_hex(),
                "name": s.name,
                "kind": s.kind as u8,
                "startTimeUnixNano": unix_nanos(s.start),
                "endTimeUnixNano": unix_nanos(s.end),
                "attributes": s.attributes.iter().map(|(k, v)| attribute(k, v)).collect::<Vec<_>>(),
                "status": match &s.error {
                    Some(message) => json!({"code": 2, "message": message}),
                    None => json!({"code": 0}),
                },
            });
            if let Some(parent) = s.parent_span_id {
                span["parentSpanId"] = Value::String(hex::encode(parent));
            }
            span
        })
        .collect();
    json!({
        "resourceSpans": [{
            "resource": resource,
            "scopeSpans": [{
                "scope": {"name": "kuatia", "version": env!("CARGO_PKG_VERSION")},
                "spans": spans,
            }],
        }],
    })
}
