//! The printables' job handlers: a document's PDF rendered through the printer port
//! ([`crate::printables`]) and recorded as a new version of its artifact. They work through
//! ports only ([`PrintingPorts`]): the configuration read models (the company's print settings
//! among them), the artifact store, the printer and the clock.
//!
//! - [`RenderKude`] (`printing.kude`, queued when a SIFEN document is accepted): renders the
//!   KuDE from the signed XML exactly as stored (artifact store) with the company's print
//!   settings (defaults until it saves its own) and records it as `kude` version 1. Run again, it
//!   finds the KuDE recorded and does nothing. Nobody waits on it, so it renders at background
//!   priority (`Printer::render_background`): under load the KuDE comes when the load eases,
//!   and the cores go to intake and the SIFEN pipeline meanwhile.
//! - [`RegeneratePrintable`] (`printing.regenerate`, queued by `POST /v1/documents/{id}/regenerate-pdf`
//!   through `PdfRegenerationRequested`): renders the document's printable again (`kude`, or the
//!   autoimpresor `printable_pdf`) and records it as the next version; earlier versions stay.
//!   Run again after the version is recorded, the request is no longer pending and it does
//!   nothing.
//!
//! Each render stores the bytes before the `ArtifactRecorded` append; a crash in between leaves
//! at most an unreferenced, content-addressed file, and the job runs again.

use async_trait::async_trait;
use chrono::Utc;
use kuatia_domain::channel::ChannelKind;
use kuatia_domain::company::{Branch, CompanyProfile};
use kuatia_domain::document::aggregate::{ArtifactKind, DocumentCommand, DocumentState};
use kuatia_domain::print_settings::PrintSettings;
use kuatia_domain::tenancy::TenantId;
use std::sync::Arc;
use uuid::Uuid;

use super::ports::{Clock, ConfigurationReads};
use super::{document_id, load_document, metadata, retry};
use crate::artifacts::ArtifactStore;
use crate::documents::{self, DocumentsError, KUDE_RENDER, PRINTABLE_REGENERATE};
use crate::event_store::SharedStore;
use crate::jobs::{Backoff, Job};
use crate::printables::{AutoimpresorPrintable, PrintError, PrintIssuer, Printable, Printer};
use crate::worker::{JobFailure, JobHandler};

/// The actor recorded on the printables' events.
const ACTOR: &str = "system:printing";

/// The ports the printables' handlers work through.
#[derive(Clone)]
pub struct PrintingPorts {
    /// The event store (documents are loaded and changed through it).
    pub store: SharedStore,
    /// The signed XML read, the printables stored.
    pub artifacts: Arc<dyn ArtifactStore>,
    /// Renders the printables.
    pub printer: Arc<dyn Printer>,
    /// The configuration read models: print settings, and what an autoimpresor printable shows.
    pub config: Arc<dyn ConfigurationReads>,
    /// The time.
    pub clock: Arc<dyn Clock>,
}

/// What both handlers share.
#[derive(Clone)]
pub struct Printing {
    store: SharedStore,
    artifacts: Arc<dyn ArtifactStore>,
    printer: Arc<dyn Printer>,
    config: Arc<dyn ConfigurationReads>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Printing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Printing").finish_non_exhaustive()
    }
}

fn print_failure(e: PrintError) -> JobFailure {
    match e {
        // The same input fails the same way: retrying cannot help.
        PrintError::Input(m) => JobFailure::Permanent(m),
        PrintError::Render(m) => JobFailure::Retry(m),
    }
}

impl Printing {
    /// The handlers over their ports.
    pub fn new(ports: PrintingPorts) -> Self {
        Self {
            store: ports.store,
            artifacts: ports.artifacts,
            printer: ports.printer,
            config: ports.config,
            clock: ports.clock,
        }
    }

    /// The job handlers: the KuDE of an accepted document, and regeneration on request.
    pub fn handlers(&self) -> Vec<Arc<dyn JobHandler>> {
        vec![
            Arc::new(RenderKude(self.clone())),
            Arc::new(RegeneratePrintable(self.clone())),
        ]
    }

    async fn load(&self, job: &Job) -> Result<(TenantId, Uuid, DocumentState), JobFailure> {
        let id = document_id(job)?;
        let state = load_document(&self.store, job.tenant_id, id)
            .await?
            .ok_or_else(|| JobFailure::Permanent(format!("no document {id}")))?;
        Ok((job.tenant_id, id, state))
    }

    /// The company's saved print settings, or the defaults.
    async fn settings(&self, tenant: TenantId, company_id: Uuid) -> Result<PrintSettings, JobFailure> {
        if let Some(settings) = self
            .config
            .print_settings(tenant, company_id)
            .await
            .map_err(retry)?
        {
            return Ok(settings);
        }
        let company = self.config.company(tenant, company_id).await.map_err(retry)?;
        Ok(PrintSettings::defaults(
            company.as_ref().map_or("", |c| c.profile.legal_name.as_str()),
        ))
    }

    /// The KuDE's input: the signed XML as stored.
    async fn kude_input(&self, state: &DocumentState) -> Result<Printable, JobFailure> {
        let signed_xml = super::signed_xml(self.artifacts.as_ref(), state).await?;
        Ok(Printable::Kude {
            signed_xml,
            watermark: None,
        })
    }

    /// Renders `printable`, stores it and records it as the next version of `kind`.
    async fn render_and_record(
        &self,
        tenant: TenantId,
        state: &DocumentState,
        kind: ArtifactKind,
        printable: Printable,
        priority: Priority,
    ) -> Result<(), JobFailure> {
        let settings = self.settings(tenant, state.routing.company_id).await?;
        let started = std::time::Instant::now();
        let pdf = match priority {
            Priority::Asked => self.printer.render(printable, &settings).await,
            Priority::Background => self.printer.render_background(printable, &settings).await,
        }
        .map_err(print_failure)?;
        tracing::debug!(
            document = %state.document_id,
            %kind,
            bytes = pdf.len(),
            ms = started.elapsed().as_millis() as u64,
            "printable rendered"
        );
        let sha256 = self.artifacts.put(&pdf).await.map_err(retry)?;
        let now = self.clock.now();
        let command = DocumentCommand::RecordArtifact {
            artifact_id: Uuid::now_v7(),
            kind,
            content_type: "application/pdf".into(),
            sha256,
            size: pdf.len() as u64,
            version: state.next_artifact_version(kind),
            at: now,
        };
        match documents::command(&self.store, tenant, state.document_id, command, metadata(ACTOR)).await {
            Ok(()) => Ok(()),
            // Someone recorded another version meanwhile: run again on the new state.
            Err(DocumentsError::Conflict) => Err(retry("the document changed meanwhile")),
            Err(DocumentsError::Refused(e)) => Err(retry(e)),
            Err(e) => Err(retry(e)),
        }
    }
}

/// `printing.kude`.
#[derive(Debug)]
pub struct RenderKude(Printing);

#[async_trait]
impl JobHandler for RenderKude {
    fn kind(&self) -> &'static str {
        KUDE_RENDER
    }

    fn backoff(&self) -> Backoff {
        Backoff {
            base: std::time::Duration::from_millis(500),
            ..Backoff::default()
        }
    }

    async fn run(&self, job: &Job) -> Result<(), JobFailure> {
        let p = &self.0;
        let (tenant, _, state) = p.load(job).await?;
        if state.channel() != ChannelKind::Sifen || state.latest_artifact(ArtifactKind::Kude).is_some() {
            return Ok(());
        }
        let input = p.kude_input(&state).await?;
        p.render_and_record(tenant, &state, ArtifactKind::Kude, input, Priority::Background)
            .await
    }
}

/// How soon a render is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Priority {
    /// Someone asked for it (`POST /regenerate-pdf`): render at normal priority.
    Asked,
    /// Nobody is waiting (the KuDE of a document just accepted): below requests and the SIFEN
    /// pipeline (`Printer::render_background`).
    Background,
}

/// `printing.regenerate`.
#[derive(Debug)]
pub struct RegeneratePrintable(Printing);

#[async_trait]
impl JobHandler for RegeneratePrintable {
    fn kind(&self) -> &'static str {
        PRINTABLE_REGENERATE
    }

    fn backoff(&self) -> Backoff {
        Backoff {
            base: std::time::Duration::from_millis(500),
            ..Backoff::default()
        }
    }

    async fn run(&self, job: &Job) -> Result<(), JobFailure> {
        let p = &self.0;
        let (tenant, _, state) = p.load(job).await?;
        if !state.pdf_regeneration_pending {
            return Ok(());
        }
        match state.printable_kind() {
            Some(ArtifactKind::Kude) => {
                let input = p.kude_input(&state).await?;
                p.render_and_record(tenant, &state, ArtifactKind::Kude, input, Priority::Asked)
                    .await
            }
            Some(ArtifactKind::PrintablePdf) => {
                let printable = autoimpresor_printable(p.config.as_ref(), tenant, &state, None).await?;
                p.render_and_record(
                    tenant,
                    &state,
                    ArtifactKind::PrintablePdf,
                    Printable::Autoimpresor(Box::new(printable)),
                    Priority::Asked,
                )
                .await
            }
            _ => Ok(()),
        }
    }
}

/// The autoimpresor printable of a numbered document, from its company's configuration: the
/// issuer (company and issuing branch) and the channel's authorization and timbrado validity.
/// Shared with the autoimpresor channel so that a regenerated printable is drawn from the same
/// inputs as the first one.
pub async fn autoimpresor_printable(
    config: &dyn ConfigurationReads,
    tenant: TenantId,
    state: &DocumentState,
    watermark: Option<String>,
) -> Result<AutoimpresorPrintable, JobFailure> {
    let id = state.document_id;
    let permanent = |what: &str| JobFailure::Permanent(format!("document {id}: {what}"));
    let number = state.number.clone().ok_or_else(|| permanent("no number"))?;
    let company = config
        .company(tenant, state.routing.company_id)
        .await
        .map_err(retry)?
        .ok_or_else(|| permanent("no company"))?;
    let channel = config
        .channel(tenant, state.routing.channel_id)
        .await
        .map_err(retry)?
        .ok_or_else(|| permanent("no channel"))?;
    let auto = channel
        .autoimpresor
        .ok_or_else(|| permanent("the channel has no autoimpresor settings"))?;
    let branch = config
        .branch(tenant, state.routing.branch_id)
        .await
        .map_err(retry)?;
    Ok(AutoimpresorPrintable {
        document: state.document.clone(),
        issuer: print_issuer(&company.ruc, &company.profile, branch.as_ref()),
        authorization: auto.authorization,
        valid_from: auto.valid_from,
        valid_to: auto.valid_to,
        number,
        issued_at: kuatia_domain::local_time::paraguay(state.document.issue_datetime.with_timezone(&Utc)),
        watermark,
    })
}

/// The issuer as an autoimpresor printable names it: the company (its RUC and profile), at the
/// issuing branch's address when the branch has one of its own. Shared by regeneration and the
/// sandbox preview, so both print what the autoimpresor channel prints.
pub fn print_issuer(ruc: &str, profile: &CompanyProfile, branch: Option<&Branch>) -> PrintIssuer {
    // As the autoimpresor channel writes it on the first render ([`super::autoimpresor`]), so a
    // regenerated printable shows the same address.
    let address = branch
        .and_then(|b| {
            b.address
                .as_ref()
                .map(|a| format!("{a} {}", b.house_number.clone().unwrap_or_default()))
        })
        .unwrap_or_else(|| format!("{} {}", profile.address, profile.house_number));
    let optional = |s: &str| (!s.trim().is_empty()).then(|| s.to_owned());
    PrintIssuer {
        legal_name: profile.legal_name.clone(),
        trade_name: profile.trade_name.clone(),
        ruc: ruc.to_owned(),
        address: address.trim().to_owned(),
        phone: optional(&profile.phone),
        email: optional(&profile.email),
    }
}
