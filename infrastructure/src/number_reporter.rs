//! The autoimpresor channel's reporting endpoints over HTTP: [`HttpNumberReporter`] is the
//! workflow's [`NumberReporter`] port (`kuatia_application::process::autoimpresor`).
//!
//! One JSON `POST` per report, with the report's `Idempotency-Key` and the channel's API key as
//! `Authorization: Bearer`, a 10 s timeout (connecting included), and no redirect followed: a
//! POST turned into a GET to wherever a 3xx points, with the API key, would leak the key; a 3xx
//! is an answer the workflow does not count as reported. When the destination policy pinned an
//! address, the request connects to that address only (the host is not resolved again).

use async_trait::async_trait;
use kuatia_application::process::autoimpresor::{
    NumberReportRequest, NumberReporter, ReportAnswer, ReportFailure,
};
use std::time::Duration;

/// How long the reporting endpoint may take to answer (and to accept the connection).
pub const REPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The reporting client's settings: the timeouts, and no redirect followed.
fn report_client() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .timeout(REPORT_TIMEOUT)
        .connect_timeout(REPORT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
}

/// Reports over HTTP. One client serves every unpinned report; a pinned one gets a client that
/// resolves the endpoint's host to the pinned address.
#[derive(Debug, Clone)]
pub struct HttpNumberReporter {
    http: reqwest::Client,
}

impl HttpNumberReporter {
    /// The reporter with its shared client.
    pub fn new() -> Self {
        Self {
            http: report_client().build().unwrap_or_default(),
        }
    }
}

impl Default for HttpNumberReporter {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl NumberReporter for HttpNumberReporter {
    async fn post(&self, report: &NumberReportRequest) -> Result<ReportAnswer, ReportFailure> {
        let url = reqwest::Url::parse(report.endpoint.trim())
            .map_err(|e| ReportFailure::Request(format!("the reporting endpoint: {e}")))?;
        let http = match report.pinned {
            Some(addr) => report_client()
                .resolve(url.host_str().unwrap_or_default(), addr)
                .build()
                .map_err(|e| ReportFailure::Request(e.to_string()))?,
            None => self.http.clone(),
        };
        let mut request = http
            .post(url)
            .header("Idempotency-Key", report.idempotency_key.as_str())
            .json(&report.body);
        if let Some(key) = &report.api_key {
            request = request.bearer_auth(key.as_str());
        }
        let response = request
            .send()
            .await
            .map_err(|e| ReportFailure::Transport(crate::webhook_sender::transport_failure(&e)))?;
        let status = response.status();
        Ok(ReportAnswer {
            status: status.as_u16(),
            status_line: status.to_string(),
        })
    }
}
