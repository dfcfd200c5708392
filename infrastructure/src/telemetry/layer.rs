//! The tracing layer that gives every span a W3C trace context and hands finished spans to the
//! OTLP exporter of the service they belong to.
//!
//! A span's context comes from, in order: a `trace_parent` field holding a valid `traceparent`
//! (an incoming request's header, a job payload's key: the span continues that remote trace), its
//! parent span (same trace, parent's span id as parent), or a new trace. A few fields steer the
//! exported span, as tracing-opentelemetry spells them: `otel.name` (the span's name instead of
//! the static one), `otel.kind` (`server`, `client`, `consumer`, `producer`, `internal`),
//! `otel.status_code` (`error`) with `otel.status_message`; an ERROR event inside a span also
//! marks it failed. Every other field is an attribute. `trace_id` is left out: the code that
//! creates a span records it there for the log lines, it is the span's own trace id anyway.
//!
//! Which exporter: a child uses its parent's; a root span (a request, a job attempt) takes the
//! exporter registered for the tokio runtime it starts on ([`super::otlp`]), none when there is
//! none — spans then still carry contexts (for propagation and the logs), they are just not
//! exported. `otel.export = false` on a root keeps it and its children out (the exporter's own
//! HTTP calls). Where a trace enters the service, the exporter's sampler
//! ([`super::otlp::Sampler`]) decides whether it is recorded; without an exporter a new trace is
//! marked sampled and a remote one keeps its flag.

use std::sync::Arc;
use std::time::SystemTime;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use super::context::TraceContext;
use super::otlp::{self, Sink};

/// OTLP's span kinds (the numbers are the protocol's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpanKind {
    Internal = 1,
    Server = 2,
    Client = 3,
    Producer = 4,
    Consumer = 5,
}

impl SpanKind {
    fn parse(s: &str) -> Option<Self> {
        Some(match s.to_ascii_lowercase().as_str() {
            "internal" => Self::Internal,
            "server" => Self::Server,
            "client" => Self::Client,
            "producer" => Self::Producer,
            "consumer" => Self::Consumer,
            _ => return None,
        })
    }
}

/// An attribute value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AttrValue {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

/// A closed span, ready to encode.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FinishedSpan {
    pub context: TraceContext,
    pub parent_span_id: Option<[u8; 8]>,
    pub name: String,
    pub kind: SpanKind,
    pub start: SystemTime,
    pub end: SystemTime,
    pub attributes: Vec<(&'static str, AttrValue)>,
    /// `Some(message)` when the span failed.
    pub error: Option<String>,
}

/// What the fields of a span said so far.
#[derive(Debug, Default)]
struct Fields {
    remote: Option<String>,
    export: Option<bool>,
    name: Option<String>,
    kind: Option<SpanKind>,
    failed: bool,
    message: Option<String>,
    attributes: Vec<(&'static str, AttrValue)>,
}

impl Fields {
    fn set(&mut self, key: &'static str, value: AttrValue) {
        match self.attributes.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.attributes.push((key, value)),
        }
    }

    fn text(&mut self, field: &Field, value: String) {
        match field.name() {
            "trace_parent" => self.remote = Some(value),
            "trace_id" => {}
            "otel.name" => self.name = Some(value),
            "otel.kind" => self.kind = SpanKind::parse(&value),
            "otel.status_code" => self.failed = value.eq_ignore_ascii_case("error"),
            "otel.status_message" => self.message = Some(value),
            name => self.set(name, AttrValue::Str(value)),
        }
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.text(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.text(field, format!("{value:?}"));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field.name(), AttrValue::Int(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match i64::try_from(value) {
            Ok(v) => self.set(field.name(), AttrValue::Int(v)),
            Err(_) => self.set(field.name(), AttrValue::Str(value.to_string())),
        }
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.set(field.name(), AttrValue::Float(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if field.name() == "otel.export" {
            self.export = Some(value);
        } else {
            self.set(field.name(), AttrValue::Bool(value));
        }
    }
}

/// The message of an ERROR event.
#[derive(Default)]
struct Message(Option<String>);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

/// A live span's trace state (in the registry's span extensions).
pub(crate) struct SpanState {
    pub(crate) context: TraceContext,
    parent_span_id: Option<[u8; 8]>,
    start: SystemTime,
    sink: Option<Arc<Sink>>,
    fields: Fields,
}

/// The layer. Install it once per process ([`super::install`]); it has no state of its own.
#[derive(Debug, Default, Clone, Copy)]
pub struct TraceLayer;

impl<S> Layer<S> for TraceLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let parent = span.parent().and_then(|p| {
            p.extensions()
                .get::<SpanState>()
                .map(|s| (s.context, s.sink.clone()))
        });
        let remote = fields.remote.as_deref().and_then(TraceContext::parse);
        let (context, parent_span_id) = match (remote, &parent) {
            (Some(remote), _) => (remote.child(), Some(remote.span_id)),
            (None, Some((p, _))) => (p.child(), Some(p.span_id)),
            (None, None) => (TraceContext::new_root(), None),
        };
        let enters = remote.is_some() || parent.is_none();
        let sink = match parent {
            Some((_, sink)) => sink,
            None if fields.export == Some(false) => None,
            None => otlp::sink_for_current_runtime(),
        };
        // Where a trace enters the service (a root, or a span continuing a remote parent), the
        // exporter's sampler decides whether it is recorded; the spans under it follow.
        let mut context = context;
        if enters && let Some(sink) = &sink {
            context.sampled = sink
                .sampler
                .should_sample(remote.map(|r| r.sampled), &context.trace_id);
        }
        span.extensions_mut().insert(SpanState {
            context,
            parent_span_id,
            start: SystemTime::now(),
            sink,
            fields,
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(state) = span.extensions_mut().get_mut::<SpanState>()
        {
            values.record(&mut state.fields);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if *event.metadata().level() != Level::ERROR {
            return;
        }
        if let Some(span) = ctx.event_span(event)
            && let Some(state) = span.extensions_mut().get_mut::<SpanState>()
        {
            state.fields.failed = true;
            if state.fields.message.is_none() {
                let mut message = Message::default();
                event.record(&mut message);
                state.fields.message = message.0;
            }
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let Some(state) = span.extensions_mut().remove::<SpanState>() else {
            return;
        };
        let Some(sink) = state.sink else {
            return;
        };
        if !state.context.sampled {
            return;
        }
        let fields = state.fields;
        sink.offer(FinishedSpan {
            context: state.context,
            parent_span_id: state.parent_span_id,
            name: fields.name.unwrap_or_else(|| span.name().to_owned()),
            kind: fields.kind.unwrap_or(SpanKind::Internal),
            start: state.start,
            end: SystemTime::now(),
            attributes: fields.attributes,
            error: fields
                .failed
                .then(|| fields.message.unwrap_or_else(|| "error".to_owned())),
        });
    }
}
