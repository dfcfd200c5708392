//! The autoimpresor channel: the two job handlers that take a queued autoimpresor document to
//! `accepted` and tell the channel's endpoint about every printed (or voided) number
//! (docs/autoimpresor.md). They work through ports only ([`AutoimpresorPorts`]): the
//! configuration and number series read models, the printer, the artifact store, the vault, the
//! reporting endpoint ([`NumberReporter`]), the destination policy and the clock.
//!
//! - [`IssueAutoimpresor`] (`autoimpresor.issue`): checks the channel's authorization (validity dates against
//!   the document's issue date and today, in Paraguay), draws the next number of the authorised
//!   range and records `DocumentRenderingStarted` with it (`rendering`); then renders the
//!   printable through the [`Printer`] port with the company's print settings, stores it in the
//!   artifact store and records the `printable_pdf` artifact and `DocumentRendered` (`accepted`)
//!   in one append. A document outside the validity dates or past the range's end is refused:
//!   `DocumentIssuanceRefused` with `configuration_error` (`failed_terminal`, no number drawn).
//!   The number that uses up 90 % of the range records `NumberingRangeNearlyExhausted` in the
//!   same append as the number, so the warning exists exactly once per range.
//! - [`ReportNumber`] (`autoimpresor.report`): POSTs the report of an issued or voided number to the
//!   channel's endpoint with its API key and records `NumberReported` once the endpoint answers
//!   2xx; anything else is retried with backoff (the receiver dedupes by `Idempotency-Key`).
//!
//! Numbering is SIFEN's mechanism ([`super::sifen`]), not another one: the range is a
//! number series of the `number_series` projection, which refuses, inside the append, any number
//! that is not the series' next, so a number is drawn once and none is skipped across workers
//! and instances (the loser draws again); in one process, draws of one series take turns. The
//! series opens at the channel's configured `next_number`; from then on the series' own count is
//! what numbers (reconfiguring `next_number` of the same range does not move it; a new range,
//! or a new timbrado, is a new series).

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use kuatia_domain::channel::AutoimpresorSettings;
use kuatia_domain::document::aggregate::{
    self, ArtifactKind, DocumentCommand, DocumentError, DocumentNumber, DocumentState, DocumentStatus,
    NumberReport,
};
use kuatia_domain::local_time;
use kuatia_domain::print_settings::PrintSettings;
use kuatia_domain::tenancy::TenantId;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;
use zeroize::Zeroizing;

use super::ports::{Clock, ConfigurationReads, Destinations, NOT_NEXT, NumberSeries};
use super::{document_id, load_document, metadata, retry};
use crate::aggregate::ExecuteError;
use crate::artifacts::ArtifactStore;
use crate::documents::{self, AUTOIMPRESOR_ISSUE, AUTOIMPRESOR_REPORT};
use crate::event_store::{SharedStore, StoreError};
use crate::jobs::{Backoff, Job};
use crate::printables::{AutoimpresorPrintable, PrintIssuer, Printable, Printer};
use crate::vault::Vault;
use crate::worker::{JobFailure, JobHandler};

/// The actor recorded on the channel's events.
const ACTOR: &str = "system:autoimpresor";

/// The error code of a refusal: the configuration does not allow the document now.
pub const CONFIGURATION_ERROR: &str = "configuration_error";

/// The share of the range whose use records the warning, in per cent.
pub const WARNING_PERCENT: u64 = 90;

/// The number series of an autoimpresor range: company, timbrado, establishment, point and the
/// authorised range (never equal to a SIFEN series, which ends in the document type).
pub fn series_key(
    company_id: Uuid,
    settings: &AutoimpresorSettings,
    establishment: &str,
    point: &str,
) -> String {
    format!(
        "{company_id}:{}:{establishment}:{point}:autoimpresor:{}-{}",
        settings.timbrado, settings.range_start, settings.range_end
    )
}

/// The number whose drawing records the 90 % warning: the first at which at least 90 % of the
/// range is used.
pub fn warning_number(settings: &AutoimpresorSettings) -> u64 {
    let size = settings.range_end - settings.range_start + 1;
    let used = (size * WARNING_PERCENT).div_ceil(100).max(1);
    settings.range_start + used - 1
}

/// Why a document cannot be issued on these settings now, if it cannot.
pub fn validity_refusal(
    settings: &AutoimpresorSettings,
    issue_date: NaiveDate,
    today: NaiveDate,
) -> Option<String> {
    let inside = |d: NaiveDate| settings.valid_from <= d && d <= settings.valid_to;
    if !inside(issue_date) {
        return Some(format!(
            "timbrado {} is valid from {} to {}; the document's issue date {issue_date} is outside it",
            settings.timbrado, settings.valid_from, settings.valid_to
        ));
    }
    if !inside(today) {
        return Some(format!(
            "timbrado {} is valid from {} to {}, which excludes today ({today})",
            settings.timbrado, settings.valid_from, settings.valid_to
        ));
    }
    None
}

/// One number report on its way to the channel's endpoint: a JSON `POST`.
pub struct NumberReportRequest {
    /// The channel's endpoint, as configured.
    pub endpoint: String,
    /// The address to connect to when the destination policy pinned one: the endpoint's host is
    /// not resolved again (a rebinding DNS answer cannot move the request).
    pub pinned: Option<SocketAddr>,
    /// The `Idempotency-Key` header, `{document_id}:{issued|voided}`: the receiver dedupes by it.
    pub idempotency_key: String,
    /// The body (docs/autoimpresor.md, "Reporting").
    pub body: Value,
    /// The channel's API key, sent as `Authorization: Bearer`.
    pub api_key: Option<Zeroizing<String>>,
}

impl std::fmt::Debug for NumberReportRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NumberReportRequest")
            .field("endpoint", &self.endpoint)
            .field("pinned", &self.pinned)
            .field("idempotency_key", &self.idempotency_key)
            .field("api_key", &self.api_key.as_ref().map(|_| "…"))
            .finish_non_exhaustive()
    }
}

/// The endpoint's answer to a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportAnswer {
    /// The HTTP status.
    pub status: u16,
    /// The status as HTTP words it, code and reason (`500 Internal Server Error`): the failure
    /// text names it.
    pub status_line: String,
}

/// Why a report got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportFailure {
    /// The request could not be made at all: the client's words.
    Request(String),
    /// The endpoint was not reached, did not answer in time, or its answer could not be read:
    /// why, without naming the endpoint.
    Transport(String),
}

/// The channel's reporting endpoints.
#[async_trait]
pub trait NumberReporter: Send + Sync {
    /// POSTs `report` once and returns whatever the endpoint answered. No redirect is followed
    /// (a POST turned into a GET to wherever it points, with the channel's API key): a 3xx is an
    /// answer like a 500, and the workflow counts only a 2xx as reported.
    async fn post(&self, report: &NumberReportRequest) -> Result<ReportAnswer, ReportFailure>;
}

/// The ports the autoimpresor channel works through.
#[derive(Clone)]
pub struct AutoimpresorPorts {
    /// The event store (documents are loaded and changed through it).
    pub store: SharedStore,
    /// Sealed secrets: the channels' API keys.
    pub vault: Vault,
    /// Printables and normalized payloads.
    pub artifacts: Arc<dyn ArtifactStore>,
    /// Renders the printables.
    pub printer: Arc<dyn Printer>,
    /// The configuration read models.
    pub config: Arc<dyn ConfigurationReads>,
    /// The number series read model.
    pub series: Arc<dyn NumberSeries>,
    /// The channels' reporting endpoints.
    pub reporter: Arc<dyn NumberReporter>,
    /// The destination policy reporting endpoints are checked against before each report.
    pub destinations: Arc<dyn Destinations>,
    /// The time.
    pub clock: Arc<dyn Clock>,
}

/// What both handlers share.
#[derive(Clone)]
pub struct Autoimpresor {
    ports: AutoimpresorPorts,
    /// Draws of one series in this process take turns (other instances are kept honest by the
    /// number series projection), as SIFEN's transforms do.
    series_locks: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

impl std::fmt::Debug for Autoimpresor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Autoimpresor").finish_non_exhaustive()
    }
}

/// How a command list ended.
enum Ran {
    Done,
    /// Someone else drew the number first.
    NumberTaken,
    /// The document changed meanwhile (or refused the command).
    Changed(String),
}

impl Autoimpresor {
    /// The channel over its ports.
    pub fn new(ports: AutoimpresorPorts) -> Self {
        Self {
            ports,
            series_locks: Arc::default(),
        }
    }

    /// The job handlers: issue, report.
    pub fn handlers(&self) -> Vec<Arc<dyn JobHandler>> {
        vec![
            Arc::new(IssueAutoimpresor(self.clone())),
            Arc::new(ReportNumber(self.clone())),
        ]
    }

    async fn load(&self, tenant: TenantId, id: Uuid) -> Result<Option<DocumentState>, JobFailure> {
        load_document(&self.ports.store, tenant, id).await
    }

    async fn document(&self, job: &Job) -> Result<(TenantId, Uuid, DocumentState), JobFailure> {
        let id = document_id(job)?;
        match self.load(job.tenant_id, id).await? {
            Some(state) => Ok((job.tenant_id, id, state)),
            None => Err(JobFailure::Permanent(format!("no document {id}"))),
        }
    }

    async fn run(
        &self,
        tenant: TenantId,
        id: Uuid,
        commands: Vec<DocumentCommand>,
    ) -> Result<Ran, JobFailure> {
        match documents::executor(&self.ports.store)
            .execute_all(
                tenant,
                &aggregate::stream_id(tenant, id),
                commands,
                metadata(ACTOR),
            )
            .await
        {
            Ok(_) => Ok(Ran::Done),
            Err(ExecuteError::Store(StoreError::Projection { message, .. }))
                if message.contains(NOT_NEXT) =>
            {
                Ok(Ran::NumberTaken)
            }
            Err(ExecuteError::Conflict(_)) => Ok(Ran::Changed("the document changed meanwhile".into())),
            Err(ExecuteError::Rejected(e @ DocumentError::InvalidTransition { .. })) => {
                Ok(Ran::Changed(e.to_string()))
            }
            Err(e) => Err(retry(e)),
        }
    }

    fn series_lock(&self, series: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self
            .series_locks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if locks.len() > 10_000 {
            locks.retain(|_, l| Arc::strong_count(l) > 1);
        }
        locks.entry(series.to_owned()).or_default().clone()
    }

    async fn settings(
        &self,
        tenant: TenantId,
        state: &DocumentState,
    ) -> Result<(AutoimpresorSettings, String, Option<Uuid>), JobFailure> {
        let channel = self
            .ports
            .config
            .channel(tenant, state.routing.channel_id)
            .await
            .map_err(retry)?
            .ok_or_else(|| {
                JobFailure::Permanent(format!("document {}: its channel is gone", state.document_id))
            })?;
        let settings = channel.autoimpresor.clone().ok_or_else(|| {
            JobFailure::Permanent(format!(
                "document {}: channel {} has no autoimpresor settings",
                state.document_id, channel.channel_id
            ))
        })?;
        Ok((settings, channel.endpoint, channel.credentials_secret_id))
    }

    /// Establishment and point codes of the document's routing.
    async fn codes(&self, tenant: TenantId, state: &DocumentState) -> Result<(String, String), JobFailure> {
        let permanent =
            |what: &str| JobFailure::Permanent(format!("document {}: no {what}", state.document_id));
        let branch = self
            .ports
            .config
            .branch(tenant, state.routing.branch_id)
            .await
            .map_err(retry)?
            .ok_or_else(|| permanent("branch"))?;
        let point = self
            .ports
            .config
            .issuance_point(tenant, state.routing.issuance_point_id)
            .await
            .map_err(retry)?
            .ok_or_else(|| permanent("issuance point"))?;
        Ok((branch.code, point.code))
    }

    /// Queued → numbered (`rendering`), or refused. `Ok(false)`: nothing more to do now.
    async fn number(&self, tenant: TenantId, id: Uuid, state: &DocumentState) -> Result<bool, JobFailure> {
        let (settings, _, _) = self.settings(tenant, state).await?;
        let now = self.ports.clock.now();
        let issue_date = local_time::paraguay(state.document.issue_datetime.with_timezone(&Utc)).date();
        let today = local_time::paraguay_today(now);
        if let Some(message) = validity_refusal(&settings, issue_date, today) {
            return self.refuse(tenant, id, message, now).await.map(|()| false);
        }
        let (establishment, point) = self.codes(tenant, state).await?;
        let series = series_key(state.routing.company_id, &settings, &establishment, &point);
        let lock = self.series_lock(&series);
        let _turn = lock.lock().await;
        let opened = self
            .ports
            .series
            .next_number(tenant, &series)
            .await
            .map_err(retry)?;
        let next = opened.unwrap_or(settings.next_number);
        if next > settings.range_end {
            let message = format!(
                "the authorised range {}–{} of timbrado {} is exhausted; configure a new range on the channel",
                settings.range_start, settings.range_end, settings.timbrado
            );
            return self.refuse(tenant, id, message, now).await.map(|()| false);
        }
        let number = DocumentNumber {
            timbrado: settings.timbrado.clone(),
            establishment,
            point,
            number: format!("{next:07}"),
        };
        let mut commands = vec![DocumentCommand::StartRendering {
            series: series.clone(),
            number,
            at: now,
        }];
        // Exactly one number crosses the mark (or opens the series past it): once per range.
        let mark = warning_number(&settings);
        if next == mark || (opened.is_none() && next > mark) {
            commands.push(DocumentCommand::WarnNumberingRange {
                series,
                used: next - settings.range_start + 1,
                size: settings.range_end - settings.range_start + 1,
                at: now,
            });
        }
        match self.run(tenant, id, commands).await? {
            Ran::Done => Ok(true),
            Ran::NumberTaken => Err(retry(format!("number {next} was taken; drawing again"))),
            Ran::Changed(why) => {
                tracing::info!(document = %id, %why, "autoimpresor: not numbered");
                Ok(false)
            }
        }
    }

    async fn refuse(
        &self,
        tenant: TenantId,
        id: Uuid,
        message: String,
        at: DateTime<Utc>,
    ) -> Result<(), JobFailure> {
        tracing::warn!(document = %id, %message, "autoimpresor: document refused");
        let command = DocumentCommand::RefuseIssuance {
            code: CONFIGURATION_ERROR.to_owned(),
            message,
            field: None,
            at,
        };
        match self.run(tenant, id, vec![command]).await? {
            Ran::Done | Ran::Changed(_) => Ok(()),
            Ran::NumberTaken => Err(retry("unexpected number conflict")),
        }
    }

    /// Rendering → accepted: the printable, stored, recorded.
    async fn render(&self, tenant: TenantId, id: Uuid, state: &DocumentState) -> Result<(), JobFailure> {
        let permanent = |what: String| JobFailure::Permanent(format!("document {id}: {what}"));
        let (settings, _, _) = self.settings(tenant, state).await?;
        let number = state
            .number
            .clone()
            .ok_or_else(|| permanent("rendering without a number".into()))?;
        let company = self
            .ports
            .config
            .company(tenant, state.routing.company_id)
            .await
            .map_err(retry)?
            .ok_or_else(|| permanent("no company".into()))?;
        let branch = self
            .ports
            .config
            .branch(tenant, state.routing.branch_id)
            .await
            .map_err(retry)?;
        let profile = &company.profile;
        let address = branch
            .as_ref()
            .and_then(|b| {
                b.address
                    .as_ref()
                    .map(|a| format!("{a} {}", b.house_number.clone().unwrap_or_default()))
            })
            .unwrap_or_else(|| format!("{} {}", profile.address, profile.house_number));
        let issuer = PrintIssuer {
            legal_name: profile.legal_name.clone(),
            trade_name: profile.trade_name.clone(),
            ruc: company.ruc.clone(),
            address: address.trim().to_owned(),
            phone: Some(profile.phone.clone()).filter(|p| !p.is_empty()),
            email: Some(profile.email.clone()).filter(|e| !e.is_empty()),
        };
        let print_settings = self
            .ports
            .config
            .print_settings(tenant, state.routing.company_id)
            .await
            .map_err(retry)?
            .unwrap_or_else(|| PrintSettings::defaults(&profile.legal_name));
        let printable = AutoimpresorPrintable {
            document: state.document.clone(),
            issuer,
            authorization: settings.authorization.clone(),
            valid_from: settings.valid_from,
            valid_to: settings.valid_to,
            number,
            issued_at: local_time::paraguay(state.document.issue_datetime.with_timezone(&Utc)),
            watermark: None,
        };
        let pdf = self
            .ports
            .printer
            .render(Printable::Autoimpresor(Box::new(printable)), &print_settings)
            .await
            .map_err(|e| retry(format!("rendering the printable: {e}")))?;
        let sha = self.ports.artifacts.put(&pdf).await.map_err(retry)?;
        let artifact_id = Uuid::now_v7();
        let now = self.ports.clock.now();
        let mut commands = Vec::new();
        if state.latest_artifact(ArtifactKind::NormalizedPayload).is_none() {
            let payload = super::sifen::normalized_payload(state)?;
            let payload_sha = self.ports.artifacts.put(&payload).await.map_err(retry)?;
            commands.push(super::sifen::normalized_payload_artifact(
                state,
                payload_sha,
                payload.len() as u64,
                now,
            ));
        }
        commands.extend([
            DocumentCommand::RecordArtifact {
                artifact_id,
                kind: ArtifactKind::PrintablePdf,
                content_type: "application/pdf".into(),
                sha256: sha,
                size: pdf.len() as u64,
                version: state.next_artifact_version(ArtifactKind::PrintablePdf),
                at: now,
            },
            DocumentCommand::RecordRendered { artifact_id, at: now },
        ]);
        match self.run(tenant, id, commands).await? {
            Ran::Done => Ok(()),
            Ran::NumberTaken => Err(retry("unexpected number conflict")),
            // Cancelled while rendering, or a concurrent run recorded it: look again next time.
            Ran::Changed(why) => Err(retry(why)),
        }
    }

    /// The report's body (docs/autoimpresor.md, "Reporting").
    fn report_body(
        &self,
        report: NumberReport,
        state: &DocumentState,
        settings: &AutoimpresorSettings,
        ruc: &str,
    ) -> Value {
        let number = state.number.as_ref();
        let voiding = state.voiding.as_ref();
        json!({
            "event": report.as_str(),
            "document_id": state.document_id,
            "external_id": state.document.external_id,
            "document_type": state.document.doc_type.as_str(),
            "issuer_ruc": ruc,
            "authorization": settings.authorization,
            "timbrado": number.map(|n| n.timbrado.clone()),
            "establishment": number.map(|n| n.establishment.clone()),
            "issuance_point": number.map(|n| n.point.clone()),
            "number": number.map(|n| n.number.clone()),
            "formatted_number": number.map(ToString::to_string),
            "issue_datetime": state.document.issue_datetime,
            "currency": state.document.currency,
            "grand_total": state.document.totals.grand_total.to_string(),
            "printable_sha256": state
                .rendered_artifact_id
                .and_then(|a| state.artifact(a))
                .map(|a| a.sha256.clone()),
            "issued_at": state.approved_at,
            "voided_at": (report == NumberReport::Voided).then(|| voiding.map(|v| v.at)).flatten(),
            "void_reason": (report == NumberReport::Voided).then(|| voiding.map(|v| v.reason.clone())).flatten(),
        })
    }
}

/// `autoimpresor.issue`.
#[derive(Debug)]
pub struct IssueAutoimpresor(Autoimpresor);

#[async_trait]
impl JobHandler for IssueAutoimpresor {
    fn kind(&self) -> &'static str {
        AUTOIMPRESOR_ISSUE
    }

    // A lost race draws again at once; a failing renderer is retried with growing delays.
    fn backoff(&self) -> Backoff {
        Backoff {
            base: Duration::from_millis(100),
            factor: 2.0,
            max: Duration::from_secs(600),
            jitter: 0.5,
        }
    }

    async fn run(&self, job: &Job) -> Result<(), JobFailure> {
        let a = &self.0;
        let (tenant, id, mut state) = a.document(job).await?;
        if state.status == DocumentStatus::Queued {
            if !a.number(tenant, id, &state).await? {
                return Ok(());
            }
            state = match a.load(tenant, id).await? {
                Some(s) => s,
                None => return Ok(()),
            };
        }
        if state.status != DocumentStatus::Rendering {
            // Accepted already (a repeated job), refused, or cancelled meanwhile.
            return Ok(());
        }
        a.render(tenant, id, &state).await
    }
}

/// `autoimpresor.report`.
#[derive(Debug)]
pub struct ReportNumber(Autoimpresor);

#[async_trait]
impl JobHandler for ReportNumber {
    fn kind(&self) -> &'static str {
        AUTOIMPRESOR_REPORT
    }

    fn backoff(&self) -> Backoff {
        Backoff {
            base: Duration::from_secs(1),
            factor: 2.0,
            max: Duration::from_secs(3600),
            jitter: 0.2,
        }
    }

    async fn run(&self, job: &Job) -> Result<(), JobFailure> {
        let a = &self.0;
        let (tenant, id, state) = a.document(job).await?;
        let report = match job.payload["report"].as_str() {
            Some("issued") => NumberReport::Issued,
            Some("voided") => NumberReport::Voided,
            other => {
                return Err(JobFailure::Permanent(format!(
                    "job {}: unknown report {other:?}",
                    job.id
                )));
            }
        };
        if state.reported.contains(&report) || state.number.is_none() {
            return Ok(());
        }
        let (settings, endpoint, secret) = a.settings(tenant, &state).await?;
        let company = a
            .ports
            .config
            .company(tenant, state.routing.company_id)
            .await
            .map_err(retry)?
            .ok_or_else(|| JobFailure::Permanent(format!("document {id}: no company")))?;
        let body = a.report_body(report, &state, &settings, &company.ruc);
        // The destination policy at connection time too (docs/security.md): the endpoint must
        // still lead to public (or allow-listed) addresses, and the request goes to the very
        // address checked (a rebinding DNS answer cannot move it).
        let pinned = a
            .ports
            .destinations
            .check(tenant, &endpoint)
            .await
            .map_err(|e| retry(format!("the reporting endpoint: {e}")))?;
        let api_key = match secret {
            Some(secret) => {
                let key = a.ports.vault.get(tenant, secret).await.map_err(retry)?;
                let key = String::from_utf8(key.to_vec())
                    .map_err(|_| JobFailure::Permanent(format!("document {id}: an unreadable API key")))?;
                Some(Zeroizing::new(key))
            }
            None => None,
        };
        let request = NumberReportRequest {
            endpoint: endpoint.clone(),
            pinned,
            idempotency_key: format!("{id}:{}", report.as_str()),
            body,
            api_key,
        };
        let answer = a.ports.reporter.post(&request).await.map_err(|e| match e {
            ReportFailure::Request(e) => retry(e),
            ReportFailure::Transport(why) => retry(format!("reporting to {endpoint}: {why}")),
        })?;
        if !(200..300).contains(&answer.status) {
            return Err(retry(format!(
                "{endpoint} answered {} to the {} report",
                answer.status_line,
                report.as_str()
            )));
        }
        let command = DocumentCommand::RecordNumberReported {
            report,
            http_status: answer.status,
            at: a.ports.clock.now(),
        };
        match a.run(tenant, id, vec![command]).await? {
            Ran::Done | Ran::Changed(_) => Ok(()),
            Ran::NumberTaken => Err(retry("unexpected number conflict")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(start: u64, end: u64) -> AutoimpresorSettings {
        AutoimpresorSettings {
            authorization: "AUT-1".into(),
            declared_software: None,
            timbrado: "87654321".into(),
            valid_from: NaiveDate::from_ymd_opt(2026, 1, 1).expect("date"),
            valid_to: NaiveDate::from_ymd_opt(2026, 12, 31).expect("date"),
            branch_id: Uuid::from_u128(1),
            issuance_point_id: Uuid::from_u128(2),
            range_start: start,
            range_end: end,
            next_number: start,
        }
    }

    #[test]
    fn the_warning_falls_on_the_number_that_uses_90_per_cent() {
        assert_eq!(warning_number(&settings(1, 200)), 180);
        assert_eq!(warning_number(&settings(101, 300)), 280);
        assert_eq!(warning_number(&settings(1, 10)), 9);
        assert_eq!(warning_number(&settings(1, 11)), 10, "9.9 rounds up to 10 used");
        assert_eq!(warning_number(&settings(5, 5)), 5);
    }

    #[test]
    fn validity_covers_the_issue_date_and_today() {
        let s = settings(1, 10);
        let d = |m, day| NaiveDate::from_ymd_opt(2026, m, day).expect("date");
        assert_eq!(validity_refusal(&s, d(6, 1), d(6, 2)), None);
        assert!(validity_refusal(&s, d(1, 1), d(12, 31)).is_none(), "inclusive");
        assert!(
            validity_refusal(&s, NaiveDate::from_ymd_opt(2025, 12, 31).expect("date"), d(6, 2))
                .expect("refused")
                .contains("issue date 2025-12-31")
        );
        assert!(
            validity_refusal(&s, d(12, 31), NaiveDate::from_ymd_opt(2027, 1, 1).expect("date"))
                .expect("refused")
                .contains("excludes today")
        );
    }
}
