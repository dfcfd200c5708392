//! Logging and tracing: JSON lines (or pretty text) filtered by `RUST_LOG`, a W3C trace context
//! on every span, and OTLP/HTTP export of finished spans when `KUATIA_OTLP_ENDPOINT` is set.
//!
//! Every HTTP request runs in a span carrying its `request_id` and `trace_id`; the JSON formatter
//! writes the current span's fields on each line, so every line logged while serving a request
//! names both. The trace context travels on: the request's jobs carry it in their payload
//! (`kuatia_application::trace_context`), the worker runs each attempt in a span continuing it,
//! and the SIFEN client sends it as a `traceparent` header. Start reading at [`install`], then
//! `layer` (how spans get their context) and [`otlp`] (how they leave the process).
//!
//! The subscriber is global and installed once per process; whether spans are exported is the
//! service's choice ([`otlp::OtlpExporter::start`], per runtime), so many services in one test
//! process share the subscriber and each exports to its own collector or to none.

pub mod context;
mod layer;
pub mod otlp;

use crate::config::LogFormat;
use std::sync::atomic::{AtomicBool, Ordering};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

pub use context::TraceContext;
pub use layer::TraceLayer;

static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The log filter when `RUST_LOG` is unset or invalid.
pub const DEFAULT_LOG_FILTER: &str = "info,sqlx=warn";

/// Installs the global subscriber writing to stderr, filtered by `RUST_LOG` (default
/// [`DEFAULT_LOG_FILTER`]). Calling it twice is harmless (the second call does nothing).
pub fn init(format: LogFormat) {
    let directives = std::env::var("RUST_LOG").unwrap_or_else(|_| DEFAULT_LOG_FILTER.to_owned());
    install(format, &directives, std::io::stderr);
}

/// Installs the global subscriber: log lines in `format`, filtered by `directives` (`RUST_LOG`
/// syntax; [`DEFAULT_LOG_FILTER`] when they do not parse), to `writer` (anything that makes an
/// `io::Write`, such as `std::io::stderr` or a `fn() -> W`); and the trace layer, which sees
/// every INFO (or more severe) span whatever the directives say, so that a quiet `RUST_LOG` never
/// breaks a trace. Returns whether this call installed it (false when a subscriber was already
/// set). Tests call it with their own writer.
pub fn install<W>(format: LogFormat, directives: &str, writer: W) -> bool
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_new(directives).unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG_FILTER));
    // A level filter, not a `filter_fn`: its interest is fixed per callsite (always or never),
    // while a function's "sometimes" left spans created on some worker threads without their
    // context under load (seen on PostgreSQL in CI: a request answered without `traceparent`).
    // The layer itself skips events other than ERROR.
    let trace = TraceLayer.with_filter(tracing_subscriber::filter::LevelFilter::INFO);
    let registry = tracing_subscriber::registry().with(trace);
    let fmt = tracing_subscriber::fmt::layer().with_writer(writer);
    let installed = match format {
        LogFormat::Json => registry
            .with(
                fmt.json()
                    .flatten_event(true)
                    .with_current_span(true)
                    .with_span_list(false)
                    .with_filter(filter),
            )
            .try_init(),
        LogFormat::Pretty => registry.with(fmt.with_filter(filter)).try_init(),
    }
    .is_ok();
    if installed {
        INSTALLED.store(true, Ordering::Release);
        kuatia_application::trace_context::install(current_traceparent);
    }
    installed
}

/// Whether this process installed the subscriber with the trace layer ([`install`]).
pub fn is_installed() -> bool {
    INSTALLED.load(Ordering::Acquire)
}

/// The trace context of `span` (or of its nearest ancestor that has one); `None` when the
/// trace layer is not installed or the span is disabled.
pub fn context_of(span: &tracing::Span) -> Option<TraceContext> {
    span.with_subscriber(|(id, dispatch)| {
        let registry = dispatch.downcast_ref::<tracing_subscriber::Registry>()?;
        let span = registry.span(id)?;
        span.scope().find_map(|s| {
            s.extensions()
                .get::<layer::SpanState>()
                .map(|state| state.context)
        })
    })
    .flatten()
}

/// The trace context of the current span.
pub fn current_context() -> Option<TraceContext> {
    context_of(&tracing::Span::current())
}

/// The `traceparent` of the current span (what the application's jobs carry).
fn current_traceparent() -> Option<String> {
    current_context().map(|c| c.traceparent())
}

#[cfg(test)]
mod tests {
    use super::layer::{AttrValue, FinishedSpan, SpanKind};
    use super::otlp::{self, OtlpExporter};
    use super::*;
    use std::time::Duration;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    /// The current runtime exports into a channel the test reads.
    struct Capture {
        sink: std::sync::Arc<otlp::Sink>,
        rx: tokio::sync::mpsc::Receiver<FinishedSpan>,
    }

    impl Capture {
        fn new() -> Self {
            let (sink, rx) = otlp::test_sink(64);
            otlp::register_for_current_runtime(sink.clone());
            Self { sink, rx }
        }

        fn spans(&mut self) -> Vec<FinishedSpan> {
            let mut spans = Vec::new();
            while let Ok(span) = self.rx.try_recv() {
                spans.push(span);
            }
            spans
        }
    }

    impl Drop for Capture {
        fn drop(&mut self) {
            otlp::unregister(&self.sink);
        }
    }

    fn subscriber() -> tracing::subscriber::DefaultGuard {
        tracing::subscriber::set_default(tracing_subscriber::registry().with(TraceLayer))
    }

    #[tokio::test]
    async fn a_span_continues_a_remote_parent_and_its_children_follow() {
        let _subscriber = subscriber();
        let mut capture = Capture::new();
        let (root_ctx, child_ctx) = {
            let root = tracing::info_span!(
                "request",
                trace_parent = Some(PARENT),
                otel.name = "POST /v1/documents",
                otel.kind = "server",
                route = "/v1/documents",
                status = tracing::field::Empty,
            );
            root.record("status", 201u64);
            let child = root.in_scope(|| tracing::info_span!("child", otel.kind = "client", ok = true));
            let contexts = (context_of(&root).unwrap(), context_of(&child).unwrap());
            assert_eq!(child.in_scope(current_context), Some(contexts.1));
            contexts
        };
        let spans = capture.spans();
        assert_eq!(spans.len(), 2, "{spans:?}");
        let (child, root) = (&spans[0], &spans[1]);
        assert_eq!(root.context, root_ctx);
        assert_eq!(root.context.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(
            root.parent_span_id.map(hex::encode).as_deref(),
            Some("00f067aa0ba902b7")
        );
        assert_eq!(root.name, "POST /v1/documents");
        assert_eq!(root.kind, SpanKind::Server);
        assert_eq!(
            root.attributes,
            vec![
                ("route", AttrValue::Str("/v1/documents".into())),
                ("status", AttrValue::Int(201))
            ]
        );
        assert_eq!(child.context, child_ctx);
        assert_eq!(child.context.trace_id, root.context.trace_id);
        assert_eq!(child.parent_span_id, Some(root.context.span_id));
        assert_eq!((child.name.as_str(), child.kind), ("child", SpanKind::Client));
        assert!(root.end >= root.start && root.error.is_none());
    }

    #[tokio::test]
    async fn a_root_without_a_parent_starts_a_trace_and_errors_mark_it_failed() {
        let _subscriber = subscriber();
        let mut capture = Capture::new();
        {
            let a = tracing::info_span!("a", trace_parent = Some("garbage"));
            a.in_scope(|| tracing::error!("it broke"));
            let b = tracing::info_span!(
                "b",
                otel.status_code = tracing::field::Empty,
                otel.status_message = tracing::field::Empty
            );
            b.record("otel.status_code", "error");
            b.record("otel.status_message", "SIFEN did not answer");
        }
        let mut spans = capture.spans();
        spans.sort_by(|x, y| x.name.cmp(&y.name));
        assert_eq!(spans.len(), 2);
        assert!(spans.iter().all(|s| s.parent_span_id.is_none()));
        assert_ne!(spans[0].context.trace_id, spans[1].context.trace_id);
        assert_eq!(spans[0].error.as_deref(), Some("it broke"));
        assert_eq!(spans[1].error.as_deref(), Some("SIFEN did not answer"));
    }

    #[tokio::test]
    async fn without_an_exporter_or_when_unsampled_spans_carry_a_context_but_are_not_exported() {
        let _subscriber = subscriber();
        let unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        {
            // No exporter registered for this runtime.
            let span = tracing::info_span!("request", trace_parent = Some(PARENT));
            assert_eq!(
                context_of(&span).unwrap().trace_id_hex(),
                "4bf92f3577b34da6a3ce929d0e0e4736"
            );
        }
        let mut capture = Capture::new();
        {
            let span = tracing::info_span!("request", trace_parent = Some(unsampled));
            let ctx = context_of(&span).unwrap();
            assert!(!ctx.sampled);
            assert!(ctx.traceparent().ends_with("-00"), "propagated as unsampled");
            let quiet = tracing::info_span!("otlp_export", otel.export = false);
            let _inner = quiet.in_scope(|| tracing::info_span!("inside"));
        }
        assert!(capture.spans().is_empty());
    }

    #[test]
    fn outside_the_trace_layer_there_is_no_context() {
        let span = tracing::info_span!("request");
        assert_eq!(context_of(&span), None);
        assert_eq!(current_traceparent(), None);
    }

    #[test]
    fn spans_encode_as_otlp_json() {
        let ctx = TraceContext::parse(PARENT).unwrap();
        let start = std::time::UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789);
        let span = FinishedSpan {
            context: ctx,
            parent_span_id: Some([1, 2, 3, 4, 5, 6, 7, 8]),
            name: "sifen.submit".into(),
            kind: SpanKind::Consumer,
            start,
            end: start + Duration::from_millis(5),
            attributes: vec![
                ("job.attempt", AttrValue::Int(2)),
                ("ok", AttrValue::Bool(true)),
                ("ratio", AttrValue::Float(0.5)),
            ],
            error: Some("boom".into()),
        };
        let body = otlp::encode(&serde_json::json!({"attributes": []}), &[span]);
        let s = &body["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        assert_eq!(s["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(s["spanId"], "00f067aa0ba902b7");
        assert_eq!(s["parentSpanId"], "0102030405060708");
        assert_eq!(s["kind"], 5);
        assert_eq!(s["startTimeUnixNano"], "1700000000123456789");
        assert_eq!(s["endTimeUnixNano"], "1700000000128456789");
        assert_eq!(
            s["attributes"][0],
            serde_json::json!({"key": "job.attempt", "value": {"intValue": "2"}})
        );
        assert_eq!(
            s["attributes"][1]["value"],
            serde_json::json!({"boolValue": true})
        );
        assert_eq!(
            s["attributes"][2]["value"],
            serde_json::json!({"doubleValue": 0.5})
        );
        assert_eq!(s["status"], serde_json::json!({"code": 2, "message": "boom"}));
        assert_eq!(
            body["resourceSpans"][0]["scopeSpans"][0]["scope"]["name"],
            "kuatia"
        );
    }

    #[test]
    fn the_endpoint_gets_the_traces_path() {
        assert_eq!(
            otlp::traces_url("http://127.0.0.1:4318/").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            otlp::traces_url("https://otel.example/v1/traces").unwrap(),
            "https://otel.example/v1/traces"
        );
        assert!(otlp::traces_url("127.0.0.1:4318").is_err());
    }

    fn finished() -> FinishedSpan {
        FinishedSpan {
            context: TraceContext::new_root(),
            parent_span_id: None,
            name: "x".into(),
            kind: SpanKind::Internal,
            start: std::time::SystemTime::now(),
            end: std::time::SystemTime::now(),
            attributes: Vec::new(),
            error: None,
        }
    }

    /// One request a collector received: its path, headers (names lower-cased) and JSON body.
    #[derive(Debug)]
    struct Received {
        path: String,
        headers: Vec<(String, String)>,
        body: serde_json::Value,
    }

    /// A real OTLP/HTTP collector on a loopback port: answers every request 200 and keeps it.
    async fn collector() -> (
        std::net::SocketAddr,
        std::sync::Arc<std::sync::Mutex<Vec<Received>>>,
    ) {
        use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let store = received.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let store = store.clone();
                tokio::spawn(async move {
                    let mut reader = BufReader::new(socket);
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        let path = line.split_whitespace().nth(1).unwrap_or_default().to_owned();
                        let mut headers = Vec::new();
                        loop {
                            let mut line = String::new();
                            reader.read_line(&mut line).await.unwrap();
                            let line = line.trim_end();
                            if line.is_empty() {
                                break;
                            }
                            let (k, v) = line.split_once(':').unwrap();
                            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
                        }
                        let length: usize = headers
                            .iter()
                            .find(|(k, _)| k == "content-length")
                            .map_or(0, |(_, v)| v.parse().unwrap());
                        let mut body = vec![0; length];
                        reader.read_exact(&mut body).await.unwrap();
                        store.lock().unwrap().push(Received {
                            path,
                            headers,
                            body: serde_json::from_slice(&body).expect("OTLP JSON"),
                        });
                        reader
                            .get_mut()
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: application/json\r\n\r\n{}")
                            .await
                            .unwrap();
                    }
                });
            }
        });
        (addr, received)
    }

    #[tokio::test]
    async fn an_export_carries_the_operators_headers_and_service_name_to_a_real_collector() {
        let _subscriber = subscriber();
        let (addr, received) = collector().await;
        let settings = otlp::ExportSettings {
            url: format!("http://{addr}/custom/traces"),
            headers: otlp::parse_headers("Authorization=Basic%20dXNlcjpwYXNz,x-scope-orgid=team-a").unwrap(),
            service_name: "kuatia-eu".into(),
            sampler: otlp::Sampler::default(),
        };
        let exporter = OtlpExporter::start_with(&settings).unwrap();
        {
            let root = tracing::info_span!("request", route = "/v1/documents");
            let _child = root.in_scope(|| tracing::info_span!("child"));
        }
        exporter.shutdown(Duration::from_secs(5)).await;
        let received = received.lock().unwrap();
        assert_eq!(received.len(), 1, "one batch: {received:?}");
        let export = &received[0];
        assert_eq!(export.path, "/custom/traces", "the traces URL is used as it is");
        let header = |name: &str| {
            export
                .headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(header("authorization"), Some("Basic dXNlcjpwYXNz"));
        assert_eq!(header("x-scope-orgid"), Some("team-a"));
        assert_eq!(header("content-type"), Some("application/json"));
        let resource = &export.body["resourceSpans"][0]["resource"]["attributes"];
        assert_eq!(
            resource[0],
            serde_json::json!({"key": "service.name", "value": {"stringValue": "kuatia-eu"}})
        );
        let spans = export.body["resourceSpans"][0]["scopeSpans"][0]["spans"]
            .as_array()
            .unwrap();
        let mut names: Vec<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
        names.sort_unstable();
        assert_eq!(names, ["child", "request"]);
    }

    #[tokio::test]
    async fn a_ratio_0_sampler_exports_nothing_and_propagates_unsampled() {
        let _subscriber = subscriber();
        let (addr, received) = collector().await;
        let mut settings = otlp::ExportSettings::new(format!("http://{addr}/v1/traces"), "kuatia");
        settings.sampler = otlp::Sampler::parse(Some("traceidratio"), Some("0")).unwrap();
        let exporter = OtlpExporter::start_with(&settings).unwrap();
        {
            for _ in 0..50 {
                let root = tracing::info_span!("request");
                let child = root.in_scope(|| tracing::info_span!("child"));
                assert!(!context_of(&child).unwrap().sampled);
            }
            // Not parent-based: a sampled remote parent does not change the decision.
            let remote = tracing::info_span!("request", trace_parent = Some(PARENT));
            let ctx = context_of(&remote).unwrap();
            assert!(ctx.traceparent().ends_with("-00"), "propagated as unsampled");
        }
        exporter.shutdown(Duration::from_secs(5)).await;
        assert!(received.lock().unwrap().is_empty(), "nothing exported");

        // Parent-based with ratio 0: a sampled remote parent is followed, new traces are not kept.
        let (addr, received) = collector().await;
        settings.url = format!("http://{addr}/v1/traces");
        settings.sampler = otlp::Sampler::parse(Some("parentbased_traceidratio"), Some("0")).unwrap();
        let exporter = OtlpExporter::start_with(&settings).unwrap();
        {
            let _new = tracing::info_span!("new");
            let _remote = tracing::info_span!("remote", trace_parent = Some(PARENT));
        }
        exporter.shutdown(Duration::from_secs(5)).await;
        let received = received.lock().unwrap();
        let spans = &received[0].body["resourceSpans"][0]["scopeSpans"][0]["spans"];
        assert_eq!(spans.as_array().unwrap().len(), 1, "{spans}");
        assert_eq!(spans[0]["name"], "remote");
    }

    #[test]
    fn samplers_decide_as_opentelemetry_says() {
        use otlp::Sampler;
        let id = |low: u64| {
            let mut id = [0xab; 16];
            id[8..].copy_from_slice(&low.to_be_bytes());
            id
        };
        let on = Sampler::parse(None, None).unwrap();
        assert_eq!(on, Sampler::default());
        assert!(on.should_sample(None, &id(u64::MAX)));
        assert!(!on.should_sample(Some(false), &id(0)), "parent-based by default");
        let always = Sampler::parse(Some("always_on"), Some("ignored")).unwrap();
        assert!(always.should_sample(Some(false), &id(0)));
        let off = Sampler::parse(Some("parentbased_always_off"), None).unwrap();
        assert!(!off.should_sample(None, &id(0)));
        assert!(off.should_sample(Some(true), &id(0)));
        assert!(
            !Sampler::parse(Some("always_off"), None)
                .unwrap()
                .should_sample(Some(true), &id(0))
        );
        // A quarter: the trace id's low 8 bytes, halved, below 2^63 / 4.
        let quarter = Sampler::parse(Some("traceidratio"), Some("0.25")).unwrap();
        assert!(quarter.should_sample(None, &id((1 << 62) - 2)));
        assert!(!quarter.should_sample(None, &id(1 << 62)));
        assert!(!quarter.should_sample(Some(true), &id(u64::MAX)));
        let all = Sampler::parse(Some("traceidratio"), None).unwrap();
        assert!(all.should_sample(None, &id(u64::MAX)));
        let none = Sampler::parse(Some("traceidratio"), Some("0")).unwrap();
        assert!(!none.should_sample(None, &id(0)));
        for (name, arg) in [("traceidratio", "-0.1"), ("traceidratio", "x"), ("xray", "")] {
            assert!(Sampler::parse(Some(name), Some(arg)).is_err(), "{name} {arg}");
        }
    }

    #[test]
    fn header_lists_are_percent_decoded_pairs() {
        assert_eq!(
            otlp::parse_headers(" a = 1 ,b=x%2Cy%3Dz+w,, c=").unwrap(),
            [("a", "1"), ("b", "x,y=z+w"), ("c", "")].map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
        assert!(otlp::parse_headers("").unwrap().is_empty());
        for bad in ["a", "a=%2", "a=%zz", "a=%ff", "b c=1", "a=x\ny"] {
            assert!(otlp::parse_headers(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_opentelemetry_endpoints_get_their_traces_urls() {
        assert_eq!(
            otlp::base_traces_url("http://c:4318").unwrap(),
            "http://c:4318/v1/traces"
        );
        assert_eq!(
            otlp::base_traces_url("http://c:4318/prefix/").unwrap(),
            "http://c:4318/prefix/v1/traces"
        );
        assert_eq!(otlp::exact_traces_url(" https://c/x ").unwrap(), "https://c/x");
        assert!(otlp::base_traces_url("c:4318").is_err());
    }

    #[tokio::test]
    async fn a_collector_that_never_answers_costs_dropped_spans_not_waiting() {
        // Accepts connections and never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let exporter = OtlpExporter::start(&format!("http://{addr}"), "kuatia-test").unwrap();
        let sink = otlp::sink_for_current_runtime().expect("registered for this runtime");
        let started = std::time::Instant::now();
        for _ in 0..(otlp::QUEUE_CAPACITY + 1000) {
            sink.offer(finished());
        }
        assert!(started.elapsed() < Duration::from_secs(1), "offering never waits");
        assert_eq!(exporter.dropped(), 1000);
        let started = std::time::Instant::now();
        exporter.shutdown(Duration::from_millis(300)).await;
        assert!(started.elapsed() < Duration::from_secs(2), "shutdown is bounded");
        assert!(otlp::sink_for_current_runtime().is_none(), "unregistered");
    }

    #[tokio::test]
    async fn a_refused_export_is_dropped_and_shutdown_returns() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let exporter = OtlpExporter::start(&format!("http://{addr}"), "kuatia-test").unwrap();
        otlp::sink_for_current_runtime().unwrap().offer(finished());
        exporter.shutdown(Duration::from_secs(5)).await;
        assert!(OtlpExporter::start("ftp://x", "kuatia").is_err());
    }
}
