//! The process-wide Prometheus recorder and the metric descriptions.
//!
//! HTTP counters and histograms are recorded by the request middleware; job attempts and run
//! times by the worker (`kuatia_application::worker`); SIFEN answers and latencies by the SOAP
//! client (`kuatia_infrastructure::sifen_soap::client`); span export by the OTLP exporter. Job,
//! document, webhook-delivery, certificate and subscription gauges are read from the database
//! when `/metrics` is scraped, so they are right even when another instance did the work.
//! Every name is described here; `docs/operations.md` lists them with what to alert on.

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Latency buckets in seconds (5 ms to 30 s).
const LATENCY_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Job run times in seconds (10 ms to 5 min: a render, a SIFEN call and its timeouts).
const JOB_BUCKETS: [f64; 13] = [
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// SIFEN call latency in seconds (50 ms to 2 min; the read timeout is 45 s by default).
const SIFEN_BUCKETS: [f64; 13] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0,
];

/// Documents numbered in one turn of a series (1 to the turn's limit of 50).
const TURN_BUCKETS: [f64; 7] = [1.0, 2.0, 5.0, 10.0, 20.0, 35.0, 50.0];

/// Installs the recorder once per process and returns its handle.
pub fn handle() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            // Without buckets a histogram would be rendered as a summary.
            let histograms: [(&str, &[f64]); 5] = [
                ("http_request_duration_seconds", &LATENCY_BUCKETS),
                ("kuatia_webhook_delivery_seconds", &LATENCY_BUCKETS),
                ("kuatia_job_duration_seconds", &JOB_BUCKETS),
                ("kuatia_sifen_request_duration_seconds", &SIFEN_BUCKETS),
                ("kuatia_sifen_numbering_turn_documents", &TURN_BUCKETS),
            ];
            let builder = histograms
                .into_iter()
                .try_fold(PrometheusBuilder::new(), |b, (name, buckets)| {
                    b.set_buckets_for_metric(Matcher::Full(name.into()), buckets)
                })
                .unwrap_or_else(|_| PrometheusBuilder::new());
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            // Fails only if another recorder is installed; then our metrics go nowhere, which is
            // logged rather than fatal.
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder was already installed; /metrics will be empty");
            }
            describe();
            handle
        })
        .clone()
}

fn describe() {
    metrics::describe_counter!(
        "http_requests_total",
        "HTTP requests served, by method, route template and status."
    );
    metrics::describe_histogram!(
        "http_request_duration_seconds",
        metrics::Unit::Seconds,
        "Time to serve an HTTP request, by method and route template."
    );
    metrics::describe_gauge!("kuatia_jobs", "Jobs in the queue, by kind and state.");
    metrics::describe_gauge!(
        "kuatia_jobs_failed",
        "Jobs waiting for another attempt after a failed one (`kuatia jobs list --status failed`), by kind."
    );
    metrics::describe_counter!(
        "kuatia_job_attempts_total",
        "Job attempts run by this instance, by kind and outcome (succeeded, retry, dead, lease_lost, interrupted)."
    );
    metrics::describe_histogram!(
        "kuatia_job_duration_seconds",
        metrics::Unit::Seconds,
        "Time a job attempt's handler ran, by kind."
    );
    metrics::describe_gauge!(
        "kuatia_documents",
        "Documents by pipeline status (queued, signing, submitting, accepted, …), read from the documents read model."
    );
    metrics::describe_counter!(
        "kuatia_sifen_responses_total",
        "SIFEN answers received by this instance, by operation and code (SIFEN's dCodRes, one per document of a lot result besides the lot's own, or not_sent, timeout, transport_error, fault, invalid_answer)."
    );
    metrics::describe_histogram!(
        "kuatia_sifen_request_duration_seconds",
        metrics::Unit::Seconds,
        "Time from sending a SIFEN request to its parsed answer or failure, by operation."
    );
    metrics::describe_histogram!(
        "kuatia_sifen_numbering_turn_documents",
        "SIFEN documents numbered, signed and recorded together in one turn of their series (sifen.prepare jobs waiting at the same time share a turn)."
    );
    metrics::describe_counter!(
        "kuatia_otlp_spans_exported_total",
        "Trace spans the OTLP exporter delivered to the collector."
    );
    metrics::describe_counter!(
        "kuatia_otlp_spans_dropped_total",
        "Trace spans dropped instead of exported, by reason (queue_full, export_failed)."
    );
    metrics::describe_gauge!(
        "kuatia_certificate_expiry_seconds",
        metrics::Unit::Seconds,
        "Time left until each signing certificate expires (negative once expired), by tenant, company and certificate."
    );
    metrics::describe_gauge!(
        "kuatia_webhook_deliveries",
        "Webhook deliveries, by status (pending, delivering, delivered, retrying, failed)."
    );
    metrics::describe_counter!(
        "kuatia_webhook_deliveries_total",
        "Webhook delivery outcomes recorded by this instance, by outcome (delivered, retrying, failed)."
    );
    metrics::describe_counter!(
        "kuatia_webhook_attempts_total",
        "Webhook POST attempts made by this instance."
    );
    metrics::describe_histogram!(
        "kuatia_webhook_delivery_seconds",
        metrics::Unit::Seconds,
        "Time from sending a webhook to the receiver's answer."
    );
    metrics::describe_counter!(
        "kuatia_document_deliveries_total",
        "Customer and issuer deliveries (email, WhatsApp, Telegram), by channel and outcome (sent, failed)."
    );
    metrics::describe_gauge!(
        "kuatia_events_head_position",
        "Highest committed global position of the event store."
    );
    metrics::describe_gauge!(
        "kuatia_subscription_position",
        "Last global position applied by each projection or subscription."
    );
    metrics::describe_gauge!(
        "kuatia_subscription_lag_events",
        "Events committed but not yet applied, by projection or subscription."
    );
    metrics::describe_gauge!(
        "kuatia_subscription_failing",
        "1 when the subscription's last batch failed, else 0."
    );
    // The taxpayer lookup service shares the process's recorder: its series appear on both
    // services' /metrics and need their help text too.
    metrics::describe_gauge!(
        "kuatia_lookup_registry_generation",
        "Generation of the taxpayer registry the lookup index serves (moves on each import)."
    );
    metrics::describe_gauge!(
        "kuatia_lookup_registry_taxpayers",
        "Taxpayers in the lookup index."
    );
    metrics::describe_gauge!(
        "kuatia_lookup_index_bytes",
        metrics::Unit::Bytes,
        "Heap memory held by the lookup index."
    );
    metrics::describe_gauge!(
        "kuatia_lookup_index_load_seconds",
        metrics::Unit::Seconds,
        "How long the last load of the lookup index took."
    );
    metrics::describe_gauge!(
        "kuatia_lookup_cache_hits",
        "Lookup answers served from the answer cache since the index was loaded."
    );
    metrics::describe_gauge!(
        "kuatia_lookup_cache_misses",
        "Lookup answers computed (not in the answer cache) since the index was loaded."
    );
    metrics::describe_counter!(
        "kuatia_lookup_quota_refusals_total",
        "Lookup requests refused for a spent allowance, by plan."
    );
}
