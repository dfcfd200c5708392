//! Logging: JSON lines (or pretty text) filtered by `RUST_LOG`.
//!
//! Every HTTP request runs in a span carrying its `request_id`; the JSON formatter writes the
//! current span's fields on each line, so every line logged while serving a request names it.

use crate::config::LogFormat;
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber. Calling it twice is harmless (the second call does nothing).
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
        LogFormat::Pretty => builder.try_init(),
    };
}
