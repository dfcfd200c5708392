//! Serving a router on a listener with the limits `axum::serve` does not set (docs/security.md):
//! a request's headers must arrive within [`Limits::header_read_timeout`] (hyper's timer, also
//! on an idle keep-alive connection), its body within [`Limits::body_read_timeout`] (a hard
//! deadline, see [`body_deadline`]), and at most [`Limits::max_connections`] connections are
//! served at once: past that, new connections wait in the listen backlog until one closes. So a
//! few hundred slow clients cannot hold the service.
//!
//! Graceful shutdown as `axum::serve` does it: when `shutdown` is cancelled the listener is
//! dropped and the open connections finish their requests (the caller bounds the wait).

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// The limits of one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long a request's headers may take to arrive (`KUATIA_HEADER_READ_TIMEOUT_SECS`).
    pub header_read_timeout: Duration,
    /// How long a request's body may take to arrive, from its first byte of headers on
    /// (`KUATIA_BODY_READ_TIMEOUT_SECS`).
    pub body_read_timeout: Duration,
    /// Connections served at once (`KUATIA_MAX_CONNECTIONS`).
    pub max_connections: usize,
}

impl Limits {
    /// The limits of a configuration.
    pub fn of(config: &kuatia_infrastructure::config::Config) -> Self {
        Self {
            header_read_timeout: Duration::from_secs(config.header_read_timeout_secs.max(1)),
            body_read_timeout: Duration::from_secs(config.body_read_timeout_secs.max(1)),
            max_connections: config.max_connections.max(1),
        }
    }
}

/// The request-body deadline, as a router layer: a body not received whole within `limit` ends
/// with an error, which the body extractors answer 408.
pub fn body_deadline(limit: Duration) -> tower_http::timeout::RequestBodyDeadlineLayer {
    tower_http::timeout::RequestBodyDeadlineLayer::new(limit)
}

/// Serves `router` on `listener` until `shutdown` is cancelled, then lets open connections
/// finish. Each request carries the peer's `ConnectInfo<SocketAddr>`.
pub async fn serve(listener: TcpListener, router: Router, limits: Limits, shutdown: CancellationToken) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            () = shutdown.cancelled() => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: wait a moment instead of spinning.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        let router = router.clone();
        let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            router.clone().oneshot(request.map(Body::new))
        });
        let mut http = hyper::server::conn::http1::Builder::new();
        // Above the middleware's limits (`middleware::MAX_*`), so that requests between the two
        // are refused in the error shape; beyond these hyper answers with an empty body.
        http.timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .max_headers(crate::middleware::MAX_HEADERS * 2)
            .keep_alive(true);
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, %peer, "connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
