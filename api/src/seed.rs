//! `kuatia bench seed`: a realistic history written fast through the real store, for the scale
//! benchmarks (docs/benchmarks.md, "At scale").
//!
//! Tenants, companies, branches, points, certificates and channels are made by the same use cases
//! the API runs (`access::create_tenant`, `configuration::*`), so readiness, routing and the
//! configuration read models hold on the seeded database and intake runs on it as on any other.
//! Documents are written as their event chains, one stream per document
//! (`ExpectedVersion::NoStream`), many streams per [`Store::append_all`] so that the backends'
//! group commit and the inline projections' batch paths (`documents`, `number_series`,
//! `stream_index`, …) do the work they do for intake. Each chain is one the pipeline writes:
//!
//! | share | what | events |
//! |---|---|---|
//! | 78 % | SIFEN, accepted | received → validated → queued → transform started → transformed → normalized payload stored → signed XML stored → signed → submitted → SIFEN's answer stored → accepted (11) |
//! | 4 % | SIFEN, rejected (code 1001) | the same, rejected (11) |
//! | 3 % | SIFEN, accepted then cancelled | accepted + cancellation requested + cancelled (13) |
//! | 1 % | SIFEN, rejected then its number inutilised | rejected + inutilization requested + invalidated (13) |
//! | 2 % | SIFEN, failed for good after no answer | … submitted → retry scheduled → failed terminally (11) |
//! | 3 % | refused by validation | received → validation failed (2) |
//! | 9 % | autoimpresor, printed | received → validated → queued → rendering started → printable stored → rendered (6) |
//!
//! SIFEN documents are invoices (most), credit and debit notes, remisiones and autofacturas, from
//! `examples/`; autoimpresor ones are invoices and receipts. Numbers are drawn in order per series
//! (company, timbrado, establishment, point, type), CDCs are built with their check digit, issue
//! times spread over `days` days before now. Every artifact an event names is stored in the
//! artifact store as a small blob (its bytes name the document, so no two are the same); the
//! KuDE, which the service renders in the background or on first download, is not.
//!
//! Everything a document is left in is final: the seed writes no job, so a service started on
//! the seeded database sends nothing to SIFEN and its workers stay idle. Everything is drawn from
//! one seeded random generator: the same options give the same documents (ids and the store's
//! timestamps aside).
//!
//! [`Store::append_all`]: kuatia_application::event_store::Store::append_all

use anyhow::{Context, bail};
use chrono::{DateTime, Duration, Utc};
use kuatia_application::access;
use kuatia_application::artifacts::ArtifactStore;
use kuatia_application::configuration::{self, CertificateUpload, ChannelSecrets};
use kuatia_application::event_store::{
    AppendRequest, EventMetadata, ExpectedVersion, NewEvent, SharedStore, StreamRef,
};
use kuatia_application::vault::{PfxSlots, Vault};
use kuatia_domain::channel::{
    AutoimpresorSettings, ChannelKind, EmissionChannel, SifenEnvironment, SifenSettings,
};
use kuatia_domain::company::{
    Branch, CompanyCommand, CompanyProfile, EconomicActivity, IssuancePoint, TaxpayerType,
};
use kuatia_domain::document::aggregate::{ArtifactKind, DocumentEvent, DocumentNumber};
use kuatia_domain::document::canonical::CanonicalDocument;
use kuatia_domain::document::issues::Issue;
use kuatia_domain::document::routing::Routing;
use kuatia_domain::ruc::Ruc;
use kuatia_domain::sifen::cdc::{Cdc, CdcParts};
use kuatia_domain::tenancy::{Environment, TenantId, TenantSlug};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::Instant;
use uuid::Uuid;
use zeroize::Zeroizing;

/// What to write.
#[derive(Debug, Clone)]
pub struct SeedOptions {
    /// Documents in all.
    pub documents: u64,
    /// Tenants (one company each, with a SIFEN and an autoimpresor channel).
    pub tenants: u32,
    /// The random generator's seed; also in the tenants' slugs (`bench-<seed>-<n>`).
    pub seed: u64,
    /// The share of the documents that goes to the first tenant (the large one); the rest is
    /// shared evenly among the others.
    pub large_share: f64,
    /// Documents per `append_all` call.
    pub batch: usize,
    /// The history spans this many days before now.
    pub days: u32,
}

impl Default for SeedOptions {
    fn default() -> Self {
        Self {
            documents: 100_000,
            tenants: 10,
            seed: 1,
            large_share: 0.1,
            batch: 500,
            days: 365,
        }
    }
}

/// What the seed works through.
#[derive(Clone)]
pub struct SeedPorts {
    /// The event store.
    pub store: SharedStore,
    /// Sealed secrets (the certificates' keys, the CSCs).
    pub vault: Vault,
    /// Opens the certificates' files.
    pub pfx_slots: Arc<PfxSlots>,
    /// Where the artifacts' bytes go.
    pub artifacts: Arc<dyn ArtifactStore>,
}

impl SeedPorts {
    /// The ports over `store`, with the configuration's master key and artifact store (as the
    /// service opens them).
    pub fn new(store: SharedStore, config: &kuatia_infrastructure::config::Config) -> anyhow::Result<Self> {
        let sealer = crate::compose::sealer(config)?;
        let location = config.artifact_location()?;
        Ok(Self {
            vault: Vault::new(store.clone(), Arc::new(sealer)),
            store,
            pfx_slots: Arc::new(PfxSlots::new(
                Arc::new(kuatia_infrastructure::vault::P12Reader),
                1,
                4,
            )),
            artifacts: Arc::new(
                kuatia_infrastructure::artifacts::ObjectArtifacts::open(&location)
                    .with_context(|| format!("opening the artifact store {location:?}"))?,
            ),
        })
    }
}

/// One seeded tenant.
#[derive(Debug, Clone)]
pub struct SeededTenant {
    /// Id.
    pub id: TenantId,
    /// Slug.
    pub slug: String,
    /// An owner API key of the tenant.
    pub api_key: Zeroizing<String>,
    /// Its company.
    pub company_id: Uuid,
    /// Its company's RUC.
    pub ruc: String,
    /// Documents written for it.
    pub documents: u64,
}

/// What the seed wrote.
#[derive(Debug, Clone)]
pub struct SeedReport {
    /// The tenants, the large one first.
    pub tenants: Vec<SeededTenant>,
    /// Documents written.
    pub documents: u64,
    /// Document events written.
    pub events: u64,
    /// Artifacts stored.
    pub artifacts: u64,
    /// Their bytes.
    pub artifact_bytes: u64,
    /// Seconds spent writing documents (the configuration excluded).
    pub document_secs: f64,
    /// Of those: building the documents' events.
    pub build_secs: f64,
    /// Storing the artifacts.
    pub artifact_secs: f64,
    /// Waiting for appends (what the appends took beyond the building and storing they
    /// overlapped).
    pub append_wait_secs: f64,
}

fn metadata() -> EventMetadata {
    EventMetadata {
        actor: Some("system:bench-seed".to_owned()),
        ..EventMetadata::default()
    }
}

/// How many documents tenant `index` gets.
fn share(options: &SeedOptions, index: u32) -> u64 {
    let tenants = u64::from(options.tenants.max(1));
    if tenants == 1 {
        return options.documents;
    }
    let large = ((options.documents as f64) * options.large_share.clamp(0.0, 1.0)).round() as u64;
    let rest = options.documents - large.min(options.documents);
    let others = tenants - 1;
    if index == 0 {
        large.min(options.documents)
    } else {
        rest / others + u64::from(u64::from(index) <= rest % others)
    }
}

/// Writes the history; `progress` is told the documents written so far after every batch.
pub async fn seed(
    ports: &SeedPorts,
    options: &SeedOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<SeedReport> {
    if options.tenants == 0 {
        bail!("--tenants must be at least 1");
    }
    if options.tenants > 9_000 {
        bail!("--tenants must be at most 9000 (one RUC each from a fixed range)");
    }
    let templates = Templates::load()?;
    let mut rng = StdRng::seed_from_u64(options.seed);
    let mut report = SeedReport {
        tenants: Vec::new(),
        documents: 0,
        events: 0,
        artifacts: 0,
        artifact_bytes: 0,
        document_secs: 0.0,
        build_secs: 0.0,
        artifact_secs: 0.0,
        append_wait_secs: 0.0,
    };
    let mut setups = Vec::new();
    for index in 0..options.tenants {
        let setup = set_up_tenant(ports, options, index)
            .await
            .with_context(|| format!("setting up tenant {index}"))?;
        report.tenants.push(SeededTenant {
            id: setup.tenant,
            slug: setup.slug.clone(),
            api_key: setup.api_key.clone(),
            company_id: setup.routing_sifen.company_id,
            ruc: setup.ruc.to_string(),
            documents: share(options, index),
        });
        setups.push(setup);
    }
    let started = Instant::now();
    let now = Utc::now();
    let span = Duration::days(i64::from(options.days.max(1)));
    let batch = options.batch.max(1);
    // A batch's append runs while the next batch is built and its artifacts stored (each
    // batch's bytes are durable before the append that names them, as in the pipeline).
    let mut appending: Option<tokio::task::JoinHandle<anyhow::Result<u64>>> = None;
    // Tenants' documents interleave through the history, as a service's do: the next document is
    // the one of the tenant furthest behind its share of the span, so that ids (UUIDv7, made as
    // they are built) and issue times rise together across tenants.
    let shares: Vec<u64> = report.tenants.iter().map(|t| t.documents).collect();
    let mut written = vec![0u64; shares.len()];
    let total: u64 = shares.iter().sum();
    let mut done = 0u64;
    while done < total {
        let n = (total - done).min(batch as u64);
        let mut requests = Vec::with_capacity(n as usize);
        let mut labels = Vec::with_capacity(n as usize);
        let mut blobs = Vec::new();
        let building = Instant::now();
        for _ in 0..n {
            let Some(t) = next_tenant(&written, &shares) else {
                break;
            };
            let (i, of) = (written[t], shares[t]);
            written[t] += 1;
            // Issue times rise through the tenant's history, a little jitter on each.
            let offset = span.num_seconds() * i as i64 / of.max(1) as i64;
            let at =
                now - span + Duration::seconds(offset) + Duration::milliseconds(rng.random_range(0..1000));
            let (request, artifacts) = setups[t].document(&templates, &mut rng, at)?;
            report.events += request.events.len() as u64;
            requests.push(request);
            labels.push((report.tenants[t].slug.clone(), i));
            blobs.extend(artifacts);
        }
        report.build_secs += building.elapsed().as_secs_f64();
        report.artifacts += blobs.len() as u64;
        report.artifact_bytes += blobs.iter().map(|b| b.len() as u64).sum::<u64>();
        let storing = Instant::now();
        store_blobs(&ports.artifacts, blobs).await?;
        report.artifact_secs += storing.elapsed().as_secs_f64();
        if let Some(previous) = appending.take() {
            let waiting = Instant::now();
            report.documents += previous.await.context("an append task")??;
            report.append_wait_secs += waiting.elapsed().as_secs_f64();
            progress(report.documents);
        }
        let store = ports.store.clone();
        appending = Some(tokio::spawn(async move {
            for (outcome, (slug, i)) in store.append_all(requests).await.into_iter().zip(labels) {
                outcome.with_context(|| format!("appending document {i} of tenant {slug}"))?;
            }
            Ok(n)
        }));
        done += n;
    }
    if let Some(last) = appending.take() {
        let waiting = Instant::now();
        report.documents += last.await.context("an append task")??;
        report.append_wait_secs += waiting.elapsed().as_secs_f64();
        progress(report.documents);
    }
    report.document_secs = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The tenant whose next document comes next: the one furthest behind in its own history
/// (written ÷ share, compared as `(written + ½) × other share`), the first on a tie; `None` when
/// every share is written.
fn next_tenant(written: &[u64], shares: &[u64]) -> Option<usize> {
    let mut next: Option<usize> = None;
    for (t, &share) in shares.iter().enumerate() {
        if written[t] >= share {
            continue;
        }
        let behind = |t: usize| u128::from(2 * written[t] + 1);
        next = match next {
            Some(b) if behind(b) * u128::from(share) <= behind(t) * u128::from(shares[b]) => Some(b),
            _ => Some(t),
        };
    }
    next
}

/// Stores the blobs, 64 at a time (each is written and synced on its own).
async fn store_blobs(artifacts: &Arc<dyn ArtifactStore>, blobs: Vec<Vec<u8>>) -> anyhow::Result<()> {
    let mut tasks = tokio::task::JoinSet::new();
    for blob in blobs {
        if tasks.len() >= 64
            && let Some(done) = tasks.join_next().await
        {
            done.context("storing an artifact")??;
        }
        let artifacts = artifacts.clone();
        tasks.spawn(async move { artifacts.put(&blob).await.map(|_| ()) });
    }
    while let Some(done) = tasks.join_next().await {
        done.context("storing an artifact")??;
    }
    Ok(())
}

/// The example documents, parsed once.
struct Templates {
    sifen: Vec<(u32, CanonicalDocument)>,
    autoimpresor: Vec<CanonicalDocument>,
}

impl Templates {
    fn load() -> anyhow::Result<Self> {
        let parse = |name: &str, text: &str| {
            kuatia_domain::document::canonical::parse(text.as_bytes())
                .map_err(|issues| anyhow::anyhow!("examples/{name}.json does not parse: {issues:?}"))
        };
        Ok(Self {
            // Weights out of 100.
            sifen: vec![
                (80, parse("invoice", include_str!("../../examples/invoice.json"))?),
                (
                    8,
                    parse("credit-note", include_str!("../../examples/credit-note.json"))?,
                ),
                (
                    2,
                    parse("debit-note", include_str!("../../examples/debit-note.json"))?,
                ),
                (
                    7,
                    parse("remision", include_str!("../../examples/remision.json"))?,
                ),
                (
                    3,
                    parse("autofactura", include_str!("../../examples/autofactura.json"))?,
                ),
            ],
            autoimpresor: vec![
                parse(
                    "autoimpresor-invoice",
                    include_str!("../../examples/autoimpresor-invoice.json"),
                )?,
                parse(
                    "autoimpresor-receipt",
                    include_str!("../../examples/autoimpresor-receipt.json"),
                )?,
            ],
        })
    }

    fn sifen(&self, roll: u32) -> &CanonicalDocument {
        let mut left = roll % 100;
        for (weight, document) in &self.sifen {
            if left < *weight {
                return document;
            }
            left -= weight;
        }
        &self.sifen[0].1
    }
}

/// One tenant's configuration and its number series' next numbers.
struct TenantSetup {
    tenant: TenantId,
    slug: String,
    api_key: Zeroizing<String>,
    ruc: Ruc,
    legal_name: String,
    routing_sifen: Routing,
    routing_autoimpresor: Routing,
    timbrado: String,
    autoimpresor: AutoimpresorSettings,
    /// Next number per series.
    next: std::collections::HashMap<String, u64>,
}

/// The RUC of tenant `index`'s company: 80 100 000 + index, with its check digit.
fn ruc_of(index: u32) -> anyhow::Result<Ruc> {
    Ruc::from_number(&(80_100_000 + index).to_string()).map_err(|e| anyhow::anyhow!("RUC: {e:?}"))
}

async fn set_up_tenant(ports: &SeedPorts, options: &SeedOptions, index: u32) -> anyhow::Result<TenantSetup> {
    let store = &ports.store;
    let slug_text = format!("bench-{}-{index}", options.seed);
    let slug = TenantSlug::parse(&slug_text).map_err(|_| anyhow::anyhow!("slug {slug_text:?}"))?;
    let (tenant, key) = match access::create_tenant(
        store,
        slug.clone(),
        format!("Bench {index}"),
        Environment::Demo,
        metadata(),
    )
    .await
    {
        Ok(made) => made,
        Err(access::AccessError::SlugTaken) => {
            bail!(
                "tenant {slug_text} exists already: this database was seeded with --seed {}; seed another database or give another --seed",
                options.seed
            )
        }
        Err(e) => return Err(e.into()),
    };
    let ruc = ruc_of(index)?;
    let legal_name = format!("BENCH {index} S.A.");
    let profile = CompanyProfile {
        legal_name: legal_name.clone(),
        trade_name: None,
        taxpayer_type: TaxpayerType::LegalEntity,
        tax_regime_code: Some(8),
        address: "Avda. Mcal. López".to_owned(),
        house_number: "1234".to_owned(),
        department_code: 1,
        department_name: "CAPITAL".to_owned(),
        district_code: Some(1),
        district_name: Some("ASUNCION (DISTRITO)".to_owned()),
        city_code: 1,
        city_name: "ASUNCION (DISTRITO)".to_owned(),
        phone: "021 000 000".to_owned(),
        email: format!("facturas@bench{index}.com.py"),
        economic_activities: vec![EconomicActivity {
            code: "62010".to_owned(),
            description: "Actividades de programación informática".to_owned(),
        }],
    };
    let company_id = configuration::register_company(store, tenant, ruc.clone(), profile, metadata()).await?;
    let company_stream = kuatia_domain::company::stream_id(tenant, &ruc);
    let branch_id = Uuid::now_v7();
    let point_id = Uuid::now_v7();
    for command in [
        CompanyCommand::AddBranch(Branch {
            branch_id,
            code: "001".to_owned(),
            name: "Casa central".to_owned(),
            address: None,
            house_number: None,
            city_code: None,
            city_name: None,
            department_code: None,
            department_name: None,
            is_default: true,
        }),
        CompanyCommand::AddIssuancePoint(IssuancePoint {
            point_id,
            branch_id,
            code: "001".to_owned(),
            name: Some("Caja 1".to_owned()),
            is_default: true,
        }),
    ] {
        configuration::change_company(store, tenant, &company_stream, command, metadata()).await?;
    }
    let password = Zeroizing::new(access::random_base62(20));
    let pfx = tokio::task::spawn_blocking({
        let (password, name, ruc) = (password.clone(), legal_name.clone(), ruc.to_string());
        move || kuatia_infrastructure::selfsigned::SelfSigned::for_ruc(&name, &ruc, 825).pfx(&password)
    })
    .await
    .context("generating the certificate")??;
    let certificate = configuration::add_certificate(
        store,
        &ports.vault,
        &ports.pfx_slots,
        tenant,
        &company_stream,
        CertificateUpload {
            pfx,
            password,
            label: Some("bench (self-signed)".to_owned()),
        },
        metadata(),
    )
    .await?;
    let today = kuatia_domain::local_time::paraguay_today(Utc::now());
    let timbrado = format!("{:08}", 12_000_000 + index);
    let first_day = today - Duration::days(i64::from(options.days) + 1);
    let sifen = configuration::configure_channel(
        store,
        &ports.vault,
        tenant,
        &company_stream,
        EmissionChannel {
            channel_id: Uuid::now_v7(),
            kind: ChannelKind::Sifen,
            is_default: true,
            // Nothing listens there: the seeded documents are final and nothing is sent.
            endpoint: "http://127.0.0.1:9".to_owned(),
            client_id: None,
            credentials_secret_id: None,
            sifen: Some(SifenSettings {
                environment: SifenEnvironment::Test,
                timbrado: timbrado.clone(),
                timbrado_valid_from: first_day,
                csc_id: "0001".to_owned(),
                certificate_id: certificate.certificate_id,
                csc_secret_id: Uuid::nil(),
                remision_notice: None,
            }),
            autoimpresor: None,
        },
        ChannelSecrets {
            credential: None,
            csc: Some(Zeroizing::new(crate::demo::CSC.to_owned())),
        },
        metadata(),
    )
    .await?;
    let autoimpresor_settings = AutoimpresorSettings {
        authorization: format!("BENCH-AUT-{index:04}"),
        declared_software: Some("kuatia".to_owned()),
        timbrado: format!("{:08}", 87_000_000 + index),
        valid_from: first_day,
        valid_to: today + Duration::days(365),
        branch_id,
        issuance_point_id: point_id,
        range_start: 1,
        range_end: 9_999_999,
        next_number: 1,
    };
    let autoimpresor = configuration::configure_channel(
        store,
        &ports.vault,
        tenant,
        &company_stream,
        EmissionChannel {
            channel_id: Uuid::now_v7(),
            kind: ChannelKind::Autoimpresor,
            is_default: false,
            endpoint: "http://127.0.0.1:9/autoimpresor".to_owned(),
            client_id: None,
            credentials_secret_id: None,
            sifen: None,
            autoimpresor: Some(autoimpresor_settings.clone()),
        },
        ChannelSecrets::default(),
        metadata(),
    )
    .await?;
    let routing = |channel: &EmissionChannel| Routing {
        company_id,
        branch_id,
        issuance_point_id: point_id,
        channel: channel.kind,
        channel_id: channel.channel_id,
    };
    Ok(TenantSetup {
        tenant,
        slug: slug_text,
        api_key: Zeroizing::new(key.key),
        ruc,
        legal_name,
        routing_sifen: routing(&sifen),
        routing_autoimpresor: routing(&autoimpresor),
        timbrado,
        autoimpresor: autoimpresor_settings,
        next: std::collections::HashMap::new(),
    })
}

/// The digits of a random number of `n` digits, not all zero.
fn digits(rng: &mut StdRng, n: usize) -> String {
    let mut text: String = (0..n)
        .map(|_| char::from(b'0' + rng.random_range(0..10u8)))
        .collect();
    if text.bytes().all(|b| b == b'0') {
        text.replace_range(n - 1.., "1");
    }
    text
}

fn sha256(bytes: &[u8]) -> String {
    kuatia_application::artifacts::sha256_hex(bytes)
}

/// How a seeded SIFEN document ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ending {
    Accepted,
    Rejected,
    Cancelled,
    Invalidated,
    FailedTerminally,
}

impl TenantSetup {
    fn draw(&mut self, series: &str) -> u64 {
        let next = self.next.entry(series.to_owned()).or_insert(1);
        let number = *next;
        *next += 1;
        number
    }

    /// One document's append and the artifacts' bytes it names.
    fn document(
        &mut self,
        templates: &Templates,
        rng: &mut StdRng,
        at: DateTime<Utc>,
    ) -> anyhow::Result<(AppendRequest, Vec<Vec<u8>>)> {
        let document_id = Uuid::now_v7();
        let roll: u32 = rng.random_range(0..100);
        let autoimpresor = roll >= 91;
        let mut document = if autoimpresor {
            templates.autoimpresor[rng.random_range(0..templates.autoimpresor.len())].clone()
        } else {
            templates.sifen(rng.random_range(0..100)).clone()
        };
        document.company_id = Some(self.routing_sifen.company_id);
        document.external_id = format!("SEED-{}-{document_id}", self.slug);
        document.issue_datetime = at.with_timezone(&kuatia_domain::local_time::offset());
        if document.seller.ruc.is_some() {
            document.seller.ruc = Some(self.ruc.to_string());
            document.seller.legal_name = Some(self.legal_name.clone());
        }
        let routing = if autoimpresor {
            self.routing_autoimpresor
        } else {
            self.routing_sifen
        };
        let doc_type = document.doc_type;
        // The canonical document as stored at the transform (`normalized_payload`).
        let normalized = if autoimpresor {
            Vec::new()
        } else {
            serde_json::to_vec(&document).context("the normalized payload")?
        };
        let tick = |ms: i64| at + Duration::milliseconds(ms);
        let mut events = vec![DocumentEvent::DocumentReceived {
            document_id,
            routing,
            document: Box::new(document),
            at,
        }];
        let mut blobs = Vec::new();
        let mut artifact =
            |events: &mut Vec<DocumentEvent>, kind: ArtifactKind, content_type: &str, bytes: Vec<u8>, at| {
                let artifact_id = Uuid::now_v7();
                let sha = sha256(&bytes);
                events.push(DocumentEvent::ArtifactRecorded {
                    artifact_id,
                    kind,
                    content_type: content_type.to_owned(),
                    sha256: sha.clone(),
                    size: bytes.len() as u64,
                    version: 1,
                    at,
                });
                blobs.push(bytes);
                (artifact_id, sha)
            };
        if (88..91).contains(&roll) {
            events.push(DocumentEvent::DocumentValidationFailed {
                errors: vec![Issue::new(
                    "totals.grand_total",
                    "totals_mismatch",
                    "grand_total is not the sum of the items",
                )],
                warnings: vec![],
                at: tick(1),
            });
            return Ok((self.request(document_id, events)?, blobs));
        }
        events.push(DocumentEvent::DocumentValidated {
            warnings: vec![],
            at: tick(1),
        });
        events.push(DocumentEvent::DocumentQueued { at: tick(2) });
        if autoimpresor {
            let series = kuatia_application::process::autoimpresor::series_key(
                routing.company_id,
                &self.autoimpresor,
                "001",
                "001",
            );
            let number = self.draw(&series);
            events.push(DocumentEvent::DocumentRenderingStarted {
                series,
                number: DocumentNumber {
                    timbrado: self.autoimpresor.timbrado.clone(),
                    establishment: "001".to_owned(),
                    point: "001".to_owned(),
                    number: format!("{number:07}"),
                },
                at: tick(20),
            });
            let pdf = format!("%PDF-1.7 seeded printable of {document_id} number {number:07}\n%%EOF\n");
            let (printable_artifact_id, printable_sha256) = artifact(
                &mut events,
                ArtifactKind::PrintablePdf,
                "application/pdf",
                pdf.into_bytes(),
                tick(180),
            );
            events.push(DocumentEvent::DocumentRendered {
                printable_artifact_id,
                printable_sha256,
                at: tick(181),
            });
            return Ok((self.request(document_id, events)?, blobs));
        }
        let type_code = doc_type.sifen_code().unwrap_or(1);
        let series = kuatia_application::process::sifen::series_key(
            routing.company_id,
            &self.timbrado,
            "001",
            "001",
            type_code,
        );
        let number = self.draw(&series);
        let security_code = digits(rng, 9);
        let cdc = Cdc::build(&CdcParts {
            document_type: type_code,
            ruc: &self.ruc,
            establishment: "001",
            point: "001",
            number,
            taxpayer_type: 2,
            issue_date: at
                .with_timezone(&kuatia_domain::local_time::offset())
                .date_naive(),
            emission_type: 1,
            security_code: &security_code,
        })
        .map_err(|e| anyhow::anyhow!("CDC: {e:?}"))?;
        let xml = format!(
            "<rDE xmlns=\"http://ekuatia.set.gov.py/sifen/xsd\"><DE Id=\"{}\"><dDVId>{}</dDVId><gTimb><dNumTim>{}</dNumTim><dNumDoc>{number:07}</dNumDoc></gTimb></DE><!-- seeded --></rDE>",
            cdc.as_str(),
            &cdc.as_str()[43..],
            self.timbrado
        );
        events.push(DocumentEvent::DocumentTransformStarted { at: tick(3) });
        events.push(DocumentEvent::DocumentTransformed {
            series,
            number: DocumentNumber {
                timbrado: self.timbrado.clone(),
                establishment: "001".to_owned(),
                point: "001".to_owned(),
                number: format!("{number:07}"),
            },
            cdc: cdc.as_str().to_owned(),
            security_code,
            xml_sha256: sha256(xml.as_bytes()),
            at: tick(15),
        });
        artifact(
            &mut events,
            ArtifactKind::NormalizedPayload,
            "application/json",
            normalized,
            tick(16),
        );
        let (signed_xml_artifact_id, signed_xml_sha256) = artifact(
            &mut events,
            ArtifactKind::SignedXml,
            "application/xml",
            xml.into_bytes(),
            tick(30),
        );
        events.push(DocumentEvent::DocumentSigned {
            signed_at: tick(29),
            signed_xml_artifact_id,
            signed_xml_sha256,
            at: tick(31),
        });
        events.push(DocumentEvent::DocumentSubmitted {
            attempt: 1,
            lot_id: Some(digits(rng, 16)),
            at: tick(40),
        });
        let ending = match roll {
            0..78 => Ending::Accepted,
            78..82 => Ending::Rejected,
            82..85 => Ending::Cancelled,
            85..86 => Ending::Invalidated,
            _ => Ending::FailedTerminally,
        };
        if ending == Ending::FailedTerminally {
            events.push(DocumentEvent::DocumentRetryScheduled {
                reason: "SIFEN did not answer".to_owned(),
                next_attempt_at: tick(30_040),
                at: tick(10_040),
            });
            events.push(DocumentEvent::DocumentFailedTerminally {
                reason: "no answer from SIFEN in 60 h".to_owned(),
                at: at + Duration::hours(60),
            });
            return Ok((self.request(document_id, events)?, blobs));
        }
        let accepted = matches!(ending, Ending::Accepted | Ending::Cancelled);
        let (code, message) = if accepted {
            ("0260", "Autorización del DE satisfactoria")
        } else {
            ("1001", "CDC duplicado")
        };
        let answer = format!(
            "<ns2:rRetEnviDe xmlns:ns2=\"http://ekuatia.set.gov.py/sifen/xsd\"><ns2:rProtDe><ns2:Id>{}</ns2:Id><ns2:dEstRes>{}</ns2:dEstRes><ns2:gResProc><ns2:dCodRes>{code}</ns2:dCodRes><ns2:dMsgRes>{message}</ns2:dMsgRes></ns2:gResProc></ns2:rProtDe></ns2:rRetEnviDe>",
            cdc.as_str(),
            if accepted { "Aprobado" } else { "Rechazado" }
        );
        artifact(
            &mut events,
            ArtifactKind::ChannelResponse,
            "application/xml",
            answer.into_bytes(),
            tick(2_100),
        );
        let protocol = || Some(format!("{}", 10_000_000_000u64 + u64::from(rng_free(number))));
        if accepted {
            events.push(DocumentEvent::DocumentAccepted {
                code: code.to_owned(),
                message: message.to_owned(),
                protocol: protocol(),
                approved_at: tick(2_050),
                at: tick(2_101),
            });
        } else {
            events.push(DocumentEvent::DocumentRejected {
                code: code.to_owned(),
                message: message.to_owned(),
                at: tick(2_101),
            });
        }
        let later = at + Duration::hours(2);
        match ending {
            Ending::Cancelled => {
                events.push(DocumentEvent::DocumentCancellationRequested {
                    reason: "Error en el monto facturado".to_owned(),
                    at: later,
                });
                events.push(DocumentEvent::DocumentCancelled {
                    reason: "Error en el monto facturado".to_owned(),
                    fiscal: true,
                    code: Some("0600".to_owned()),
                    message: Some("Evento registrado correctamente".to_owned()),
                    protocol: protocol(),
                    at: later + Duration::seconds(2),
                });
            }
            Ending::Invalidated => {
                events.push(DocumentEvent::DocumentInutilizationRequested {
                    reason: "Número no utilizado por rechazo".to_owned(),
                    at: later,
                });
                events.push(DocumentEvent::DocumentInvalidated {
                    reason: "Número no utilizado por rechazo".to_owned(),
                    fiscal: true,
                    code: Some("0600".to_owned()),
                    message: Some("Evento registrado correctamente".to_owned()),
                    protocol: protocol(),
                    at: later + Duration::seconds(2),
                });
            }
            _ => {}
        }
        Ok((self.request(document_id, events)?, blobs))
    }

    fn request(&self, document_id: Uuid, events: Vec<DocumentEvent>) -> anyhow::Result<AppendRequest> {
        let events = events
            .iter()
            .map(NewEvent::from_domain)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("encoding a seeded event: {e}"))?;
        Ok(AppendRequest {
            stream: StreamRef {
                tenant_id: self.tenant,
                stream_type: "document".to_owned(),
                stream_id: kuatia_domain::document::aggregate::stream_id(self.tenant, document_id),
            },
            expected: ExpectedVersion::NoStream,
            events,
            metadata: EventMetadata {
                correlation_id: Some(document_id.to_string()),
                ..metadata()
            },
            jobs: vec![],
        })
    }
}

/// A protocol number's digits from the document's number (SIFEN's are opaque digits).
fn rng_free(number: u64) -> u32 {
    (number.wrapping_mul(2_654_435_761) % 1_000_000_000) as u32
}

#[cfg(test)]
mod tests {
    use super::next_tenant;

    /// The order in which tenants' documents are written for these shares.
    fn order(shares: &[u64]) -> Vec<usize> {
        let mut written = vec![0; shares.len()];
        let mut order = Vec::new();
        while let Some(t) = next_tenant(&written, shares) {
            written[t] += 1;
            order.push(t);
        }
        order
    }

    #[test]
    fn tenants_documents_interleave_in_proportion_to_their_shares() {
        assert_eq!(order(&[3, 1]), [0, 0, 1, 0]);
        assert_eq!(order(&[2, 2, 0]), [0, 1, 0, 1]);
        assert_eq!(order(&[0]), Vec::<usize>::new());
        // A large tenant and nine small ones: every share written, and each tenant's documents
        // spread over the whole sequence, not written one tenant after another.
        let shares = [910, 10, 10, 10, 10, 10, 10, 10, 10, 10];
        let order = order(&shares);
        assert_eq!(order.len(), 1000);
        for (t, &share) in shares.iter().enumerate() {
            let places: Vec<usize> = (0..order.len()).filter(|&i| order[i] == t).collect();
            assert_eq!(places.len() as u64, share, "tenant {t}");
            assert!(
                places[0] < 100 && places[places.len() - 1] >= 900,
                "tenant {t}: {places:?}"
            );
        }
    }
}
