//! Intake: the use case behind `POST /v1/documents` and `POST /v1/documents/validate` (and the
//! sandbox's company previews). The caller hands over a document already read as a
//! CanonicalDocumentV1 (stage 1, structure, is the edge's: it knows the published JSON Schema);
//! intake runs the other stages, each refusing with every issue it finds:
//! 2. routing — company (or the caller's), channel, branch and point, defaults resolved
//!    (`domain::document::routing`);
//! 3. readiness of the routed channel (`domain::channel`), certificate included, what the
//!    document's type needs of it (a remisión on `sifen`: the channel's `remision_notice`), and
//!    an autoimpresor range not used up;
//! 4. business validation (`domain::document::validation`), the associated document against
//!    the tenant's own (credit notes add up to at most their invoice: rule 2417), the buyer's RUC
//!    against the taxpayer registry (a warning), and, on `sifen`, the DE built unsigned (what
//!    validation accepts, the pipeline builds).
//!
//! [`prepare`] answers all of them; [`receive`] then stores the document once: it claims the
//! Idempotency-Key (a replay answers what the first request answered, a second body is refused,
//! a claim whose owner died is taken over), claims the external_id (one live document per
//! external_id of a company and type), and records the document (`validated` → `queued`, or
//! `validation_failed`). What it reads goes through [`IntakeReads`], [`ConfigurationReads`],
//! [`NumberSeries`] and [`TaxpayerRegistry`].

use async_trait::async_trait;
use kuatia_domain::certificate::Check;
use kuatia_domain::channel::{ChannelKind, EmissionChannel, ReadinessContext};
use kuatia_domain::document::aggregate::DocumentStatus;
use kuatia_domain::document::canonical::{CanonicalDocument, DocumentType};
use kuatia_domain::document::issues::{Issue, codes};
use kuatia_domain::document::routing::{self, Requested, Routing};
use kuatia_domain::document::validation::{self, RegistryAnswer, Validation, ValidationContext};
use kuatia_domain::ruc::Ruc;
use kuatia_domain::tenancy::TenantId;
use serde_json::Value;
use std::sync::Arc;
use uuid::Uuid;

use crate::documents::{self, DocumentsError, Intake, Stored};
use crate::event_store::{EventMetadata, SharedStore, StoreError};
use crate::external_ids::{self, ExternalClaim, ExternalId};
use crate::idempotency::{self, Claim};
use crate::process::ports::{Clock, CompanyConfig, CompanySnapshot, ConfigurationReads, NumberSeries};

/// Who sends the document: the tenant, the company the caller is scoped to (an API key of one
/// company), and what its events record of it.
#[derive(Debug, Clone)]
pub struct Requester {
    /// The tenant.
    pub tenant: TenantId,
    /// The company the caller is limited to, if any.
    pub company_scope: Option<Uuid>,
    /// The actor and request the events record.
    pub metadata: EventMetadata,
}

/// A document of the tenant, as intake needs it to check a reference to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentFacts {
    /// Its status (`accepted`, …).
    pub status: String,
    /// Its CDC, once it has one.
    pub cdc: Option<String>,
    /// Its number (`001-001-0000001`), once it has one.
    pub number: Option<String>,
    /// The integrator's id.
    pub external_id: String,
    /// Its grand total, as written.
    pub grand_total: String,
}

/// What intake reads besides the configuration: companies as one snapshot, and the tenant's
/// documents an associated document may name.
#[async_trait]
pub trait IntakeReads: Send + Sync {
    /// What intake needs of a company's configuration, read together (kept while its
    /// configuration version stays the same). `None`: no such company in the tenant.
    async fn company_snapshot(
        &self,
        tenant: TenantId,
        company: Uuid,
    ) -> Result<Option<Arc<CompanySnapshot>>, StoreError>;
    /// The tenant's companies (only `only` when given), by RUC.
    async fn companies(&self, tenant: TenantId, only: Option<Uuid>)
    -> Result<Vec<CompanyConfig>, StoreError>;
    /// A document of the tenant.
    async fn document(&self, tenant: TenantId, id: Uuid) -> Result<Option<DocumentFacts>, StoreError>;
    /// The tenant's document with this CDC.
    async fn document_with_cdc(
        &self,
        tenant: TenantId,
        cdc: &str,
    ) -> Result<Option<DocumentFacts>, StoreError>;
    /// The grand totals of the tenant's live credit notes referring to the document with `cdc`.
    async fn credit_note_totals(&self, tenant: TenantId, cdc: &str) -> Result<Vec<String>, StoreError>;
}

/// The national taxpayer registry, when one is loaded.
#[async_trait]
pub trait TaxpayerRegistry: Send + Sync {
    /// What the registry says of a RUC (never an error: a registry that cannot answer is "not
    /// loaded").
    async fn answer(&self, ruc: &Ruc) -> RegistryAnswer;

    /// The registered name of a RUC, when a registry is loaded and knows it (the console's
    /// buyer lookup fills the name with it).
    async fn name_of(&self, _ruc: &Ruc) -> Option<String> {
        None
    }
}

/// What intake reads through.
#[derive(Clone)]
pub struct IntakePorts {
    /// Companies and documents.
    pub reads: Arc<dyn IntakeReads>,
    /// Branches and points.
    pub config: Arc<dyn ConfigurationReads>,
    /// The number series (an autoimpresor range used up).
    pub series: Arc<dyn NumberSeries>,
    /// The taxpayer registry.
    pub registry: Arc<dyn TaxpayerRegistry>,
    /// The time.
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for IntakePorts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IntakePorts").finish_non_exhaustive()
    }
}

/// Why intake stopped before a document could be stored (nothing is).
#[derive(Debug)]
pub enum Refusal {
    /// No company, channel, branch or point could be chosen.
    Routing(Vec<Issue>),
    /// The routed channel is not ready; `certificate` when the certificate is the reason.
    NotReady {
        /// Routing that was found.
        routing: Routing,
        /// The failing checks as issues.
        issues: Vec<Issue>,
        /// Whether the certificate check failed.
        certificate: bool,
    },
    /// The document names a company the caller is not scoped to.
    NoSuchCompany,
    /// Stored configuration that cannot be read (a bug or a corrupt row, never the caller's).
    Internal(String),
    /// The store failed.
    Store(StoreError),
}

impl From<StoreError> for Refusal {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

/// A document that passed routing and readiness, with its business validation.
#[derive(Debug)]
pub struct Prepared {
    /// The document as sent (the associated document's CDC filled in from its `document_id`).
    pub document: CanonicalDocument,
    /// The body's hash as canonical JSON (`idempotency::request_hash`).
    pub request_hash: String,
    /// Where it goes.
    pub routing: Routing,
    /// The company's configuration it was checked against.
    pub snapshot: Arc<CompanySnapshot>,
    /// The routed channel.
    pub channel: EmissionChannel,
    /// Business errors and warnings.
    pub validation: Validation,
}

/// Readiness checks that routing has not already covered, as issues.
fn readiness_issues(checks: Vec<Check>) -> (Vec<Issue>, bool) {
    let mut certificate = false;
    let issues = checks
        .into_iter()
        .filter(|c| !c.ok && c.name != "branch" && c.name != "issuance_point")
        .map(|c| {
            certificate |= c.name == "certificate";
            let code = if c.name == "certificate" {
                "certificate_not_ready"
            } else {
                "configuration_not_ready"
            };
            Issue::new(format!("configuration.{}", c.name), code, c.message)
        })
        .collect();
    (issues, certificate)
}

/// The next number an autoimpresor range prints: the series' own count once a number was drawn,
/// else the channel's configured `next_number`. `None` when the channel's branch or issuance
/// point is gone (readiness says so).
pub async fn series_next(
    ports: &IntakePorts,
    tenant: TenantId,
    company_id: Uuid,
    settings: &kuatia_domain::channel::AutoimpresorSettings,
) -> Result<Option<u64>, StoreError> {
    let branch = ports.config.branch(tenant, settings.branch_id).await?;
    let point = ports
        .config
        .issuance_point(tenant, settings.issuance_point_id)
        .await?;
    let (Some(branch), Some(point)) = (branch, point) else {
        return Ok(None);
    };
    let series = crate::process::autoimpresor::series_key(company_id, settings, &branch.code, &point.code);
    let counted = ports.series.next_number(tenant, &series).await?;
    Ok(Some(counted.unwrap_or(settings.next_number)))
}

/// An autoimpresor range that earlier documents used up: refused at intake, nothing stored.
/// The channel's configured `next_number` opens the series; from then on the series' own count
/// says what is left (a document racing another for the last number is refused by the channel's
/// job instead, as `failed_terminal` with a `configuration_error`).
async fn used_up_range(
    ports: &IntakePorts,
    tenant: TenantId,
    routing: &Routing,
    settings: &kuatia_domain::channel::AutoimpresorSettings,
) -> Result<Option<Issue>, Refusal> {
    let Some(next) = series_next(ports, tenant, routing.company_id, settings).await? else {
        return Ok(None);
    };
    Ok((next > settings.range_end).then(|| {
        Issue::new(
            "configuration.autoimpresor",
            "configuration_not_ready",
            format!(
                "the authorised range {}–{} of timbrado {} is exhausted; configure a new range on the channel",
                settings.range_start, settings.range_end, settings.timbrado
            ),
        )
    }))
}

/// `associated_document` against the tenant's own documents: a `document_id` names one SIFEN
/// approved, whose CDC is filled in; a credit or debit note's CDC of the company's own RUC that
/// kuatia never issued is a warning (issued elsewhere, or mistyped: SIFEN refuses a note whose
/// invoice it does not hold). Business errors and warnings, added to validation's.
async fn resolve_associated(
    reads: &dyn IntakeReads,
    tenant: TenantId,
    document: &mut CanonicalDocument,
    ruc: &Ruc,
) -> Result<(Vec<Issue>, Vec<Issue>), Refusal> {
    let (mut errors, mut warnings) = (Vec::new(), Vec::new());
    let note = matches!(
        document.doc_type,
        DocumentType::CreditNote | DocumentType::DebitNote
    );
    let credit_note = document.doc_type == DocumentType::CreditNote;
    let total = document.totals.grand_total.get();
    let Some(associated) = document.associated_document.as_mut() else {
        return Ok((errors, warnings));
    };
    // The tenant's document referred to, when it is one.
    let mut referred: Option<DocumentFacts> = None;
    if let Some(id) = associated.document_id {
        let found = reads.document(tenant, id).await?;
        let approved = found
            .as_ref()
            .filter(|d| d.status == DocumentStatus::Accepted.as_str())
            .and_then(|d| d.cdc.clone());
        match (approved, found) {
            (Some(cdc), _) if associated.cdc.as_deref().is_some_and(|c| c.trim() != cdc) => errors.push(Issue::new(
                "associated_document.cdc",
                codes::NOT_ALLOWED,
                format!("document {id} has CDC {cdc}: give document_id or cdc, not two that disagree"),
            )),
            (Some(cdc), found) => {
                associated.cdc = Some(cdc);
                referred = found;
            }
            (None, found) => errors.push(Issue::new(
                "associated_document.document_id",
                codes::ASSOCIATED_DOCUMENT_NOT_FOUND,
                match found {
                    None => format!("no document {id} in this tenant"),
                    Some(d) => format!(
                        "document {id} is {}: only a document SIFEN approved (accepted) has a CDC to refer to",
                        d.status
                    ),
                },
            )),
        }
    } else if note
        && let Some(cdc) = associated.cdc.as_deref().map(str::trim)
        && cdc.len() == 44
        && cdc.get(2..10).map(|r| r.trim_start_matches('0')) == Some(ruc.number().trim_start_matches('0'))
    {
        referred = reads.document_with_cdc(tenant, cdc).await?;
        if referred.is_none() {
            warnings.push(Issue::new(
                "associated_document.cdc",
                codes::ASSOCIATED_DOCUMENT_UNKNOWN,
                format!(
                    "kuatia issued no document with CDC {cdc}: if it was issued elsewhere this is fine, otherwise check it (SIFEN refuses a note whose invoice it does not hold)"
                ),
            ));
        }
    }
    // Rule 2417: the credit notes of an invoice, this one and the live ones before it, add up to
    // at most the invoice's total.
    if credit_note
        && let Some(invoice) = &referred
        && let Some(cdc) = invoice.cdc.as_deref()
        && let Ok(invoice_total) = invoice.grand_total.parse::<rust_decimal::Decimal>()
    {
        let earlier: rust_decimal::Decimal = reads
            .credit_note_totals(tenant, cdc)
            .await?
            .iter()
            .filter_map(|t| t.parse::<rust_decimal::Decimal>().ok())
            .sum();
        if total + earlier > invoice_total {
            let name = invoice.number.as_deref().unwrap_or(invoice.external_id.as_str());
            errors.push(Issue::new(
                "totals.grand_total",
                codes::CREDIT_NOTE_EXCEEDS_INVOICE,
                if earlier.is_zero() {
                    format!(
                        "a credit note adjusts at most its invoice's total: {total} is more than {invoice_total}, the total of {name} (rule 2417)"
                    )
                } else {
                    format!(
                        "the credit notes of {name} would add up to {}: its earlier credit notes already credit {earlier} of its total {invoice_total}, so at most {} is left (rule 2417)",
                        total + earlier,
                        (invoice_total - earlier).max(rust_decimal::Decimal::ZERO)
                    )
                },
            ));
        }
    }
    Ok((errors, warnings))
}

/// Routes, checks readiness and validates a document (stages 2–4); stores nothing.
pub async fn prepare(
    ports: &IntakePorts,
    requester: &Requester,
    mut document: CanonicalDocument,
    request_hash: String,
) -> Result<Prepared, Refusal> {
    let tenant = requester.tenant;
    let company_id = match (requester.company_scope, document.company_id) {
        (Some(scope), Some(asked)) if scope != asked => return Err(Refusal::NoSuchCompany),
        (Some(scope), _) => scope,
        (None, Some(asked)) => asked,
        (None, None) => {
            return Err(Refusal::Routing(vec![Issue::new(
                "company_id",
                routing::MISSING_CONFIGURATION,
                "company_id is required unless the API key is scoped to a company",
            )]));
        }
    };
    let snapshot = ports
        .reads
        .company_snapshot(tenant, company_id)
        .await?
        .ok_or_else(|| {
            Refusal::Routing(vec![Issue::new(
                "company_id",
                routing::UNKNOWN_REFERENCE,
                "no such company in this tenant",
            )])
        })?;
    let locations = &snapshot.locations;
    let requested = Requested {
        branch_id: document.branch_id,
        issuance_point_id: document.issuance_point_id,
        channel: document.channel,
    };
    let routing =
        routing::route(company_id, requested, &snapshot.channels, locations).map_err(Refusal::Routing)?;
    let channel = snapshot
        .channels
        .iter()
        .find(|c| c.channel_id == routing.channel_id)
        .cloned()
        .ok_or_else(|| Refusal::Internal("the routed channel vanished".into()))?;

    let company = &snapshot.company;
    let ruc = Ruc::parse(&company.ruc).map_err(|_| Refusal::Internal("a stored RUC is unreadable".into()))?;
    let certificates = &snapshot.certificates;
    let now = ports.clock.now();
    let ctx = ReadinessContext {
        ruc: &ruc,
        branches: locations,
        certificates,
        print_settings_saved: snapshot.print_settings_saved,
        now,
        today: kuatia_domain::local_time::paraguay_today(now),
    };
    let mut checks = channel.readiness(&ctx);
    checks.extend(channel.document_checks(document.doc_type));
    let (issues, certificate) = readiness_issues(checks);
    if !issues.is_empty() {
        return Err(Refusal::NotReady {
            routing,
            issues,
            certificate,
        });
    }

    if let Some(settings) = channel.autoimpresor.as_ref()
        && let Some(issue) = used_up_range(ports, tenant, &routing, settings).await?
    {
        return Err(Refusal::NotReady {
            routing,
            issues: vec![issue],
            certificate: false,
        });
    }

    let certificate_expires_in_days = channel.sifen.as_ref().and_then(|s| {
        certificates
            .iter()
            .find(|c| c.certificate_id == s.certificate_id)
            .map(|c| c.facts.validate(&ruc, now).expires_in_days)
    });
    // The buyer's RUC against the taxpayer registry (a warning, never a refusal).
    let buyer_registry = match document
        .buyer
        .as_ref()
        .and_then(|b| b.ruc.as_deref())
        .and_then(|r| Ruc::parse(r).ok())
    {
        Some(buyer) => ports.registry.answer(&buyer).await,
        None => RegistryAnswer::NotLoaded,
    };
    let (reference_errors, reference_warnings) =
        resolve_associated(&*ports.reads, tenant, &mut document, &ruc).await?;
    let mut validation = validation::validate(
        &document,
        &ValidationContext {
            channel: routing.channel,
            company_ruc: &ruc,
            environment: channel.sifen.as_ref().map(|s| s.environment),
            now,
            certificate_expires_in_days,
            buyer_registry,
        },
    );
    validation.errors.extend(reference_errors);
    validation.warnings.extend(reference_warnings);
    // What validation accepts, the builder builds: a sifen document's DE is built here, unsigned,
    // so that one the pipeline could not build is refused now, not stuck later.
    if routing.channel == ChannelKind::Sifen
        && validation.errors.is_empty()
        && let Some(sifen) = channel.sifen.as_ref()
        && let Err(issue) =
            crate::process::build::check_buildable(&document, &ruc, &company.profile, sifen, now)
    {
        validation.errors.push(issue);
    }
    Ok(Prepared {
        document,
        request_hash,
        routing,
        snapshot,
        channel,
        validation,
    })
}

/// How long a request waits for another one holding its Idempotency-Key.
const IN_FLIGHT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// A claim older than this whose owner never finished is taken over.
const ABANDONED_AFTER: chrono::Duration = chrono::Duration::seconds(30);

/// What [`receive`] did.
#[derive(Debug)]
pub enum Received<V> {
    /// Stored now: the view built before storing (from what was decided), and what the append
    /// said (its status, version and time).
    Created {
        /// The caller's view of the document.
        view: V,
        /// The append.
        stored: Stored,
    },
    /// Stored by an earlier request with this key that died before answering: this request
    /// finished its work (an existing document is found, never duplicated).
    TakenOver {
        /// The document.
        document_id: Uuid,
    },
    /// Stored before under this key: a replay of that document.
    StoredBefore {
        /// The document.
        document_id: Uuid,
    },
    /// A replay of the response recorded for this key.
    Replay(Value),
}

/// Why [`receive`] stored nothing.
#[derive(Debug, thiserror::Error)]
pub enum ReceiveError {
    /// The Idempotency-Key was used with another body.
    #[error("Idempotency-Key was already used with another request body")]
    KeyReused,
    /// Another request with this key is still being processed.
    #[error("a request with this Idempotency-Key is still in progress; retry shortly")]
    InFlight,
    /// The external_id names a live document of the company and type already.
    #[error(
        "external_id {external_id:?} already names {doc_type} {existing} of this company, which is not finished without effect: \
         a second one would be a second fiscal document. Ask for it (GET /v1/documents/{existing}), or send \
         another external_id; once it ends validation_failed, rejected, failed_terminal or invalidated the \
         external_id is free again"
    )]
    ExternalIdHeld {
        /// The live document.
        existing: Uuid,
        /// The external_id.
        external_id: String,
        /// The document type.
        doc_type: String,
    },
    /// The document's stream refused it.
    #[error("{0}")]
    Conflict(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Stores a prepared document once under `key` (the caller's Idempotency-Key, scoped as the
/// caller needs): the key claimed, then the external_id, then the document recorded. Whatever
/// fails after a claim releases it. `view` builds the caller's answer from what was decided,
/// before the document is handed to the store.
pub async fn receive<V>(
    store: &SharedStore,
    clock: &dyn Clock,
    requester: &Requester,
    key: &str,
    prepared: Prepared,
    view: impl FnOnce(Uuid, &Routing, &CanonicalDocument, &Validation) -> V,
) -> Result<Received<V>, ReceiveError> {
    let tenant = requester.tenant;
    let started = std::time::Instant::now();
    let document_id = loop {
        match idempotency::claim(store, tenant, key, &prepared.request_hash, clock.now()).await? {
            Claim::Claimed { document_id } => break document_id,
            Claim::Stored { document_id } => return Ok(Received::StoredBefore { document_id }),
            Claim::Replay { response } => return Ok(Received::Replay(response)),
            Claim::Mismatch => return Err(ReceiveError::KeyReused),
            Claim::InFlight {
                document_id,
                claimed_at,
            } => {
                if clock.now() - claimed_at > ABANDONED_AFTER {
                    // Its owner died: finish its work under the same document id (an existing
                    // document is found, never duplicated).
                    break document_id;
                }
                if started.elapsed() > IN_FLIGHT_WAIT {
                    return Err(ReceiveError::InFlight);
                }
                tokio::time::sleep(std::time::Duration::from_millis(25)).await;
            }
        }
    };
    // One live document per external_id of a company and type: a second one would be a second
    // fiscal document for the same sale.
    let external = ExternalId {
        company_id: prepared.routing.company_id,
        doc_type: prepared.document.doc_type.as_str(),
        external_id: &prepared.document.external_id,
    };
    if let ExternalClaim::Held {
        document_id: existing,
    } = external_ids::claim(store, tenant, &external, document_id, clock.now()).await?
    {
        let _ = idempotency::release(store, tenant, key, document_id).await;
        return Err(ReceiveError::ExternalIdHeld {
            existing,
            external_id: external.external_id.to_owned(),
            doc_type: external.doc_type.to_owned(),
        });
    }
    let external_owned = (
        external.company_id,
        external.doc_type.to_owned(),
        external.external_id.to_owned(),
    );
    let answer = view(
        document_id,
        &prepared.routing,
        &prepared.document,
        &prepared.validation,
    );
    let intake = Intake {
        document_id,
        routing: prepared.routing,
        document: prepared.document,
        errors: prepared.validation.errors,
        warnings: prepared.validation.warnings,
    };
    match documents::receive(store, tenant, intake, requester.metadata.clone(), clock.now()).await {
        Ok(Some(stored)) => Ok(Received::Created { view: answer, stored }),
        Ok(None) => Ok(Received::TakenOver { document_id }),
        Err(e) => {
            let _ = idempotency::release(store, tenant, key, document_id).await;
            let external = ExternalId {
                company_id: external_owned.0,
                doc_type: &external_owned.1,
                external_id: &external_owned.2,
            };
            let _ = external_ids::release(store, tenant, &external, document_id).await;
            Err(match e {
                DocumentsError::Store(e) => ReceiveError::Store(e),
                other => ReceiveError::Conflict(other.to_string()),
            })
        }
    }
}
