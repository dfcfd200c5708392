//! The request middleware: request id, tracing span, error bodies, HTTP metrics.
//!
//! One layer around every route and the fallback, so nothing escapes it:
//! - the request id is the incoming `X-Request-Id` when it is sane (1–128 visible ASCII
//!   characters), else a new UUIDv7; it is echoed in the `X-Request-Id` response header;
//! - the handler runs inside a `request` span carrying the id and the trace id, so every log
//!   line names both; the span continues the trace of an incoming W3C `traceparent` header (or
//!   starts one), and the response's `traceparent` header names it, so a client can find its
//!   request in the traces; jobs the request queues carry the context on (see
//!   `kuatia_infrastructure::telemetry`);
//! - an [`ApiError`] left in the response extensions is rendered as our JSON body with the id,
//!   and any other error status without a JSON body (axum's 404/405, a layer's 413) is turned
//!   into one, keeping headers such as `Allow` or `Retry-After`;
//! - `http_requests_total` and `http_request_duration_seconds` are recorded by matched route
//!   template (never the raw path, which would explode label cardinality) and by method, the
//!   standard ones by name and any other as `other` ([`method_label`]): no label comes from the
//!   request as it is, so clients cannot add series at will.

use axum::body::Body;
use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::time::Instant;
use tracing::Instrument;

use crate::error::{ApiError, ErrorCode, from_status};

/// The id of the request being served (in request extensions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(pub String);

/// Header carrying the request id both ways.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The W3C trace context header, read from the request and written on the response.
pub const TRACEPARENT_HEADER: &str = "traceparent";

fn incoming_request_id(req: &Request) -> Option<String> {
    let value = req.headers().get(REQUEST_ID_HEADER)?.to_str().ok()?;
    let sane = !value.is_empty() && value.len() <= 128 && value.bytes().all(|b| b.is_ascii_graphic());
    sane.then(|| value.to_owned())
}

/// The method as a label of metrics and spans: the standard methods by name, any other (a
/// client may send any token of any length) as `other`.
pub fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

/// The middleware function (install with `axum::middleware::from_fn`).
pub async fn request_context(mut req: Request, next: Next) -> Response {
    let request_id = incoming_request_id(&req).unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    req.extensions_mut().insert(RequestId(request_id.clone()));
    let rate_limit = crate::rate_limit::RateLimitSlot::default();
    req.extensions_mut().insert(rate_limit.clone());
    let method = method_label(req.method()).to_owned();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let incoming = req
        .headers()
        .get(TRACEPARENT_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let span = tracing::info_span!(
        "request",
        otel.name = %format!("{method} {route}"),
        otel.kind = "server",
        trace_parent = incoming.as_deref(),
        request_id = %request_id,
        trace_id = tracing::field::Empty,
        method = %method,
        route = %route,
        http.response.status_code = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    let trace = kuatia_infrastructure::telemetry::context_of(&span);
    if let Some(trace) = &trace {
        span.record("trace_id", trace.trace_id_hex());
    }
    let started = Instant::now();

    let mut response = match oversized_head(&req) {
        Some(error) => error.into_response(),
        None => next.run(req).instrument(span.clone()).await,
    };

    if let Some(error) = response.extensions_mut().remove::<ApiError>() {
        response = render(error, &request_id, response);
    } else if (response.status().is_client_error() || response.status().is_server_error())
        && !is_json(&response)
        && !is_html(&response)
    {
        let error = from_status(response.status());
        response = render(error, &request_id, response);
    }
    rate_limit.write_headers(response.headers_mut());
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    if let Some(trace) = &trace
        && let Ok(value) = HeaderValue::from_str(&trace.traceparent())
    {
        response.headers_mut().insert(TRACEPARENT_HEADER, value);
    }

    let status = response.status().as_u16();
    span.record("http.response.status_code", status);
    if status >= 500 {
        span.record("otel.status_code", "error");
    }
    let elapsed = started.elapsed();
    metrics::counter!("http_requests_total", "method" => method.clone(), "route" => route.clone(), "status" => status.to_string())
        .increment(1);
    metrics::histogram!("http_request_duration_seconds", "method" => method, "route" => route)
        .record(elapsed.as_secs_f64());
    span.in_scope(|| {
        tracing::info!(
            status,
            latency_ms = elapsed.as_secs_f64() * 1000.0,
            "request served"
        );
    });
    response
}

/// The longest request target (path and query) answered; longer is 414 in the error shape.
pub const MAX_URI_BYTES: usize = 8 * 1024;
/// The most header fields, and their total size, answered; more is 431 in the error shape.
pub const MAX_HEADERS: usize = 100;
/// See [`MAX_HEADERS`].
pub const MAX_HEADER_BYTES: usize = 32 * 1024;

/// A request line or header block beyond the service's limits, refused in the error shape (the
/// HTTP layer's own, higher limits answer with an empty body; `serve.rs` sets them above these).
fn oversized_head(req: &Request) -> Option<ApiError> {
    let uri = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if uri > MAX_URI_BYTES {
        return Some(
            ApiError::validation(format!("the request URI has more than {MAX_URI_BYTES} bytes"))
                .with_status(StatusCode::URI_TOO_LONG),
        );
    }
    let headers = req.headers();
    let bytes: usize = headers.iter().map(|(n, v)| n.as_str().len() + v.len() + 4).sum();
    if headers.len() > MAX_HEADERS || bytes > MAX_HEADER_BYTES {
        return Some(
            ApiError::validation(format!(
                "the request headers exceed {MAX_HEADERS} fields or {MAX_HEADER_BYTES} bytes"
            ))
            .with_status(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE),
        );
    }
    None
}

fn is_html(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html"))
}

fn is_json(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

fn render(error: ApiError, request_id: &str, original: Response) -> Response {
    let body = serde_json::to_vec(&error.body(request_id)).unwrap_or_default();
    let (mut parts, _) = original.into_parts();
    parts.status = error.status;
    parts.headers.remove(header::CONTENT_LENGTH);
    parts
        .headers
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Response::from_parts(parts, Body::from(body))
}

/// The response of a caught panic: a 500 `internal_error` (the middleware adds the request id).
pub fn panic_response(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic".to_owned());
    tracing::error!(panic = %message, "handler panicked");
    ApiError::new(
        ErrorCode::InternalError,
        "internal error; quote the request_id when reporting it",
    )
    .into_response()
}
