//! OTLP/HTTP trace export with the JSON encoding: finished spans are queued (bounded) and a
//! background task posts them in batches to `{endpoint}/v1/traces`.
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
}

/// The `{endpoint}/v1/traces` URL of an OTLP/HTTP base endpoint (`http://collector:4318`), or
/// the endpoint itself when it already names the traces path.
pub fn traces_url(endpoint: &str) -> Result<String, OtlpError> {
    let endpoint = endpoint.trim().trim_end_matches('/');
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(OtlpError::Endpoint(endpoint.to_owned()));
    }
    Ok(if endpoint.ends_with("/v1/traces") {
        endpoint.to_owned()
    } else {
        format!("{endpoint}/v1/traces")
    })
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
    /// `endpoint` (`http://127.0.0.1:4318`), as service `service_name`.
    pub fn start(endpoint: &str, service_name: &str) -> Result<Self, OtlpError> {
        let url = traces_url(endpoint)?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| OtlpError::NoRuntime)?;
        let client = reqwest::Client::builder()
            .timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| OtlpError::Client(e.to_string()))?;
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let (stop, stopped) = watch::channel(false);
        let sink = Arc::new(Sink {
            tx,
            dropped: AtomicU64::new(0),
        });
        let resource = resource(service_name);
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
