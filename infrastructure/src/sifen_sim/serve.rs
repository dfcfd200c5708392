//! Serving a simulator: on a listener until shutdown (over HTTP or HTTPS), or on a background
//! task for tests and demo mode ([`RunningSimulator`]).

use std::net::SocketAddr;

use super::{SimConfig, SimError, SimTls, Simulator, TlsListener, TlsPeer};

/// Serves a simulator on `listener` until `shutdown` completes; withheld answers end at
/// shutdown instead of holding it up.
pub async fn serve_with_shutdown(
    listener: tokio::net::TcpListener,
    simulator: Simulator,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let closer = simulator.clone();
    let shutdown = async move {
        shutdown.await;
        closer.close();
    };
    axum::serve(listener, simulator.router())
        .with_graceful_shutdown(shutdown)
        .await
}

/// [`serve_with_shutdown`] over HTTPS: each connection on `listener` is TLS-terminated with
/// `tls` first, and its client certificate reaches the checks.
pub async fn serve_tls_with_shutdown(
    listener: tokio::net::TcpListener,
    simulator: Simulator,
    tls: SimTls,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let closer = simulator.clone();
    let shutdown = async move {
        shutdown.await;
        closer.close();
    };
    let listener = TlsListener::new(listener, &tls, &simulator)?;
    axum::serve(
        listener,
        simulator
            .router()
            .into_make_service_with_connect_info::<TlsPeer>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}

/// Serves a simulator with `config` on `listener`, forever.
pub async fn serve(listener: tokio::net::TcpListener, config: SimConfig) -> Result<(), SimError> {
    let simulator = Simulator::new(config)?;
    serve_with_shutdown(listener, simulator, std::future::pending()).await?;
    Ok(())
}

/// A simulator running on a background task (tests, demo mode). Dropping it stops it.
#[derive(Debug)]
pub struct RunningSimulator {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its handle, for stats and fault injection in-process.
    pub simulator: Simulator,
    task: tokio::task::JoinHandle<()>,
    scheme: &'static str,
}

impl RunningSimulator {
    /// `http://ADDR` (`https://ADDR` from [`start_tls`]), the base URL to give `SifenClient`.
    pub fn base_url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }
}

impl Drop for RunningSimulator {
    fn drop(&mut self) {
        self.simulator.close();
        self.task.abort();
    }
}

/// Binds `addr` (`127.0.0.1:0` for a free port) and serves a simulator there on a background
/// task.
pub async fn start(addr: &str, config: SimConfig) -> Result<RunningSimulator, SimError> {
    let simulator = Simulator::new(config)?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let router = simulator.router();
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!(error = %e, "the SIFEN simulator stopped");
        }
    });
    Ok(RunningSimulator {
        addr,
        simulator,
        task,
        scheme: "http",
    })
}

/// [`start`] over HTTPS with `tls` (e.g. [`ServerCertificate::self_signed`]`(&["127.0.0.1"])`
/// and its [`ServerCertificate::tls`]); [`RunningSimulator::base_url`] is then `https://ADDR`.
///
/// [`ServerCertificate::self_signed`]: super::ServerCertificate::self_signed
/// [`ServerCertificate::tls`]: super::ServerCertificate::tls
pub async fn start_tls(addr: &str, config: SimConfig, tls: SimTls) -> Result<RunningSimulator, SimError> {
    let simulator = Simulator::new(config)?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let listener = TlsListener::new(listener, &tls, &simulator)?;
    let service = simulator
        .router()
        .into_make_service_with_connect_info::<TlsPeer>();
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, service).await {
            tracing::error!(error = %e, "the SIFEN simulator stopped");
        }
    });
    Ok(RunningSimulator {
        addr,
        simulator,
        task,
        scheme: "https",
    })
}
