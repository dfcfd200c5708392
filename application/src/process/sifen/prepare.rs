//! `sifen.prepare`: a series' turns number, build, sign and record the queued documents'
//! first attempts in one append, then send them (as a lot when there are several).

use super::*;

/// `sifen.prepare`.
#[derive(Debug)]
pub struct Prepare(pub(super) Pipeline);

/// Builds and signs (CPU work: run off the runtime).
fn build_and_sign(
    state: &DocumentState,
    setup: &Setup,
    series: String,
    number: u64,
    now: DateTime<Utc>,
) -> Result<Signed, JobFailure> {
    let signing = SigningSetup {
        issuer: &setup.issuer,
        key: &*setup.key,
        csc_id: &setup.csc_id,
        csc: &setup.csc,
        environment: setup.environment,
    };
    build::build_and_sign(&state.document, &signing, series, number, now)
        .map_err(|what| JobFailure::Permanent(format!("document {}: {what}", state.document_id)))
}

#[async_trait]
impl JobHandler for Prepare {
    fn kind(&self) -> &'static str {
        SIFEN_PREPARE
    }

    fn backoff(&self) -> Backoff {
        backoff_from_ms(200)
    }

    async fn run(&self, job: &Job) -> Result<(), JobFailure> {
        match self.prepare(job).await {
            // Built, signed and sent, or to be tried again.
            Ok(()) => Ok(()),
            Err(JobFailure::Permanent(reason)) => self.0.refuse(job, reason).await,
            Err(other) => Err(other),
        }
    }
}

impl Pipeline {
    /// A queued document whose preparation failed for good (its DE cannot be built or signed, its
    /// channel's setup is unusable) ends `failed_terminal` with the reason, instead of staying
    /// queued with a dead job: `DocumentIssuanceRefused` (`document_build_failed`), which raises
    /// `document.failed`. A document already past queuing keeps its state (the failure is then
    /// the job's alone).
    async fn refuse(&self, job: &Job, reason: String) -> Result<(), JobFailure> {
        let id = document_id(job)?;
        tracing::warn!(document = %id, %reason, "sifen: the document cannot be prepared");
        // The document's own error need not name it.
        let message = reason
            .strip_prefix(&format!("document {id}: "))
            .unwrap_or(&reason)
            .to_owned();
        let command = DocumentCommand::RefuseIssuance {
            code: "document_build_failed".to_owned(),
            message,
            field: Some("sifen".to_owned()),
            at: self.ports.clock.now(),
        };
        match self.run(job.tenant_id, id, vec![command]).await {
            Ok(()) => Ok(()),
            Err(DocumentsError::Conflict) => Err(retry("the document changed meanwhile")),
            Err(DocumentsError::Refused(_) | DocumentsError::NotFound) => Err(JobFailure::Permanent(reason)),
            Err(e) => Err(retry(e)),
        }
    }
}

impl Prepare {
    async fn prepare(&self, job: &Job) -> Result<(), JobFailure> {
        let p = &self.0;
        let mut ticket = p.gate.start();
        // Numbered only by the turn's append, which expects the version loaded: a cached state
        // that would be numbered needs no read.
        let (tenant, id, state) = p
            .document_to_act(job, |s| {
                matches!(s.status, DocumentStatus::Queued | DocumentStatus::Transforming)
            })
            .await?;
        match state.status {
            DocumentStatus::Queued | DocumentStatus::Transforming => {}
            // Its first attempt is on record, but this job did not see it through (a crash, a
            // failure while sending or recording): it may have left, so reconcile first.
            DocumentStatus::Submitting => {
                ticket.arrive();
                return p.resend(tenant, id, state).await;
            }
            // Decided, retrying on its schedule, or cancelled meanwhile.
            _ => return Ok(()),
        }
        let setup = Arc::new(p.setup(tenant, &state).await?);
        setup.check_certificate(id, p.ports.clock.now())?;
        let doc_type = state
            .document
            .doc_type
            .sifen_code()
            .ok_or_else(|| JobFailure::Permanent(format!("document {id} is not a SIFEN type")))?;
        let series = series_key(
            state.routing.company_id,
            &setup.issuer.timbrado,
            &setup.issuer.establishment,
            &setup.issuer.point,
            doc_type,
        );
        let turns = p.series_turns(&format!("{tenant}/{series}"));
        let preparing = Preparing {
            tenant,
            id,
            state,
            setup,
            span: tracing::Span::current(),
        };
        ticket.arrive();
        turns
            .submit(preparing, |batch| {
                let (p, series) = (p.clone(), series.clone());
                tokio::spawn(async move { p.prepare_turn(&series, batch).await })
            })
            .await
            .unwrap_or_else(|| Err(retry("the numbering turn ended without an answer")))
    }
}

/// Documents of one series numbered in one turn, at most (and a lot's most).
const MAX_PREPARE_TURN: usize = 50;

/// `sifen.prepare` jobs of one series waiting for their turn.
pub(super) type SeriesTurns = Combiner<Preparing, Result<(), JobFailure>>;

/// A queued document waiting for its number.
pub(super) struct Preparing {
    tenant: TenantId,
    id: Uuid,
    state: DocumentState,
    setup: Arc<Setup>,
    /// The job's span: the document's commands run in it, so its jobs join the trace.
    span: tracing::Span,
}

/// The `sifen.prepare` jobs of this process that have started, and those that have arrived at
/// their series' turn (or ended before). A turn's leader waits, at most the lot window, until
/// every job started before it began gathering has arrived: documents claimed together are
/// numbered together, and so sent together (one lot). At low load no one is on the way and the
/// turn starts at once; under load the jobs are already queued.
#[derive(Default)]
pub(super) struct TurnGate {
    started: AtomicU64,
    arrived: AtomicU64,
    arrivals: tokio::sync::Notify,
}

/// A started job; it arrives when told or when dropped.
struct Ticket<'a>(Option<&'a TurnGate>);

impl Ticket<'_> {
    fn arrive(&mut self) {
        if let Some(gate) = self.0.take() {
            gate.arrived.fetch_add(1, Ordering::AcqRel);
            gate.arrivals.notify_waiters();
        }
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.arrive();
    }
}

impl TurnGate {
    fn start(&self) -> Ticket<'_> {
        self.started.fetch_add(1, Ordering::AcqRel);
        Ticket(Some(self))
    }

    /// Waits until the jobs started so far have arrived, at most `window`. It first lets the
    /// runtime run what is ready: jobs woken together with the leader's (a leader that met no
    /// await on its way here) start before it counts them.
    async fn gather(&self, window: std::time::Duration) {
        if window.is_zero() {
            return;
        }
        tokio::task::yield_now().await;
        let started = self.started.load(Ordering::Acquire);
        let deadline = tokio::time::Instant::now() + window;
        loop {
            let arrival = self.arrivals.notified();
            tokio::pin!(arrival);
            arrival.as_mut().enable();
            if self.arrived.load(Ordering::Acquire) >= started {
                return;
            }
            if tokio::time::timeout_at(deadline, arrival).await.is_err() {
                return;
            }
        }
    }
}

/// A document of a turn with its first attempt on record: the turn sends it.
struct Sending {
    /// Its place in the turn.
    index: usize,
    /// Its signed XML.
    xml: Arc<str>,
    /// Its state after the turn's append.
    state: DocumentState,
    /// Its job's answer.
    reply: oneshot::Sender<Result<(), JobFailure>>,
}

impl Pipeline {
    /// One turn of a series: draws the next number once, gives the queued documents consecutive
    /// numbers in queue order, builds and signs them on every core, stores the signed bytes, and
    /// records each document's transformed → artifact → signed → first attempt in appends queued
    /// together and in number order (one transaction, usually). A document that fails leaves
    /// its number unused: the ones after it in the turn find their number not next and draw
    /// again (a retry). The recorded ones are then sent (`send_turn`) while the series' next
    /// turn may begin.
    async fn prepare_turn(&self, series: &str, batch: Vec<Waiting<Preparing, Result<(), JobFailure>>>) {
        let (preparing, replies): (Vec<Preparing>, Vec<_>) =
            batch.into_iter().map(|w| (w.request, w.reply)).unzip();
        let Some(tenant) = preparing.first().map(|p| p.tenant) else {
            return;
        };
        metrics::histogram!("kuatia_sifen_numbering_turn_documents").record(preparing.len() as f64);
        let preparing = Arc::new(preparing);
        let results = match self.ports.series.next_number(tenant, series).await {
            Ok(first) => {
                self.number_and_record(tenant, series, first.unwrap_or(1), &preparing)
                    .await
            }
            Err(e) => preparing.iter().map(|_| Err(retry(&e))).collect(),
        };
        let mut sending = Vec::new();
        for (index, (reply, result)) in replies.into_iter().zip(results).enumerate() {
            match result {
                Ok((xml, state)) => sending.push(Sending {
                    index,
                    xml,
                    state,
                    reply,
                }),
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            }
        }
        if !sending.is_empty() {
            let p = self.clone();
            tokio::spawn(async move { p.send_turn(tenant, &preparing, sending).await });
        }
    }

    /// Numbers, signs, stores and records a turn's documents; each recorded one comes back with
    /// its signed XML and its state after the append.
    async fn number_and_record(
        &self,
        tenant: TenantId,
        series: &str,
        first: u64,
        preparing: &Arc<Vec<Preparing>>,
    ) -> Vec<Result<(Arc<str>, DocumentState), JobFailure>> {
        let now = self.ports.clock.now();
        let signed = sign_turn(preparing, series, first, now).await;
        // The signed bytes are stored (concurrently) before anything refers to them.
        // So is the normalized payload (the canonical document as kept, defaults applied).
        let puts: Vec<_> = signed
            .into_iter()
            .zip(preparing.iter())
            .map(|(s, doc)| {
                s.and_then(|signed| {
                    let (artifacts, xml) = (
                        self.ports.artifacts.clone(),
                        Arc::<str>::from(signed.xml.as_str()),
                    );
                    let stored = xml.clone();
                    let payload = normalized_payload(&doc.state)?;
                    let put = tokio::spawn(async move {
                        let xml_sha = artifacts.put(stored.as_bytes()).await?;
                        let payload_sha = artifacts.put(&payload).await?;
                        Ok::<_, crate::artifacts::ArtifactError>((
                            xml_sha,
                            (payload_sha, payload.len() as u64),
                        ))
                    });
                    Ok((signed, xml, put))
                })
            })
            .collect();
        let mut results: Vec<Option<Result<Arc<str>, JobFailure>>> = Vec::with_capacity(preparing.len());
        let (mut work, mut numbers) = (Vec::new(), Vec::new());
        for (i, (doc, put)) in preparing.iter().zip(puts).enumerate() {
            let stored = match put {
                Ok((signed, xml, put)) => match put.await.map_err(retry).and_then(|r| r.map_err(retry)) {
                    Ok(sha) => Ok((signed, xml, sha)),
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            };
            let (signed, xml, (sha, payload)) = match stored {
                Ok(stored) => stored,
                Err(e) => {
                    results.push(Some(Err(e)));
                    continue;
                }
            };
            results.push(Some(Ok(xml)));
            numbers.push(first + i as u64);
            work.push((
                doc.id,
                prepared_commands(&doc.state, signed, sha, payload, now),
                doc.span.clone(),
            ));
        }
        let mut recorded = documents::commands_each(&self.ports.store, tenant, work, metadata(ACTOR))
            .await
            .into_iter()
            .zip(numbers);
        results
            .into_iter()
            .map(|r| match r {
                Some(Ok(xml)) => match recorded.next() {
                    Some((Ok(Some(state)), _)) => Ok((xml, state)),
                    Some((Ok(None), _)) => Err(retry("the document is gone")),
                    // Another instance drew this number first, an earlier document of the turn
                    // failed, or the document changed: start over.
                    Some((Err(DocumentsError::Store(StoreError::Projection { message, .. })), number))
                        if message.contains(NOT_NEXT) =>
                    {
                        Err(retry(format!("number {number} was taken; drawing again")))
                    }
                    Some((Err(DocumentsError::Conflict), _)) => Err(retry("the document changed meanwhile")),
                    Some((Err(e), _)) => Err(retry(e)),
                    None => Err(retry("no answer from the append")),
                },
                Some(Err(e)) => Err(e),
                None => Err(retry("not prepared")),
            })
            .collect()
    }

    /// Sends a turn's recorded first attempts — as lots when there are several and lots are on,
    /// otherwise each alone — records SIFEN's answers together, and answers each document's job.
    /// A turn is one series (one issuer, one type); a configuration change between its jobs may
    /// still give its documents different endpoints or certificates: one group each.
    async fn send_turn(&self, tenant: TenantId, preparing: &[Preparing], sending: Vec<Sending>) {
        let mut groups: Vec<(lots::LotKey, Vec<Sending>)> = Vec::new();
        for s in sending {
            let key = lots::LotKey::of(tenant, &preparing[s.index].setup, &s.state);
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, group)) => group.push(s),
                None => groups.push((key, vec![s])),
            }
        }
        for (key, group) in groups {
            let setup = &preparing[group[0].index].setup;
            let results = match self.client(setup) {
                Ok(client) => self.send_group(tenant, preparing, &key, &client, &group).await,
                Err(e) => group.iter().map(|_| Err(e.clone())).collect(),
            };
            for (s, result) in group.into_iter().zip(results) {
                let _ = s.reply.send(result);
            }
        }
    }

    /// Sends one group of a turn and records what SIFEN answered for each document.
    async fn send_group(
        &self,
        tenant: TenantId,
        preparing: &[Preparing],
        key: &lots::LotKey,
        client: &Arc<dyn SifenGateway>,
        group: &[Sending],
    ) -> Vec<Result<(), JobFailure>> {
        let now = self.ports.clock.now();
        let heard: Vec<Heard> = if self.lots_on() && group.len() > 1 {
            let mut heard = Vec::with_capacity(group.len());
            for lot in lots::split(group, |s| s.xml.len()) {
                let documents: Vec<(Uuid, &str)> =
                    lot.iter().map(|s| (preparing[s.index].id, &*s.xml)).collect();
                // The lot's request continues its first document's trace.
                let sent = self
                    .send_lot(key, &**client, &documents)
                    .instrument(preparing[lot[0].index].span.clone())
                    .await;
                heard.extend(lot.iter().map(|_| sent.clone()));
            }
            heard
        } else {
            let d_id = u64::try_from(now.timestamp_millis()).unwrap_or(1);
            let sends: Vec<_> = group
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let (client, clock, xml) = (client.clone(), self.ports.clock.clone(), s.xml.clone());
                    let cdc = s.state.cdc.clone().unwrap_or_default();
                    let span = preparing[s.index].span.clone();
                    tokio::spawn(
                        async move { send_alone(&*client, &*clock, d_id + i as u64, &cdc, &xml).await }
                            .instrument(span),
                    )
                })
                .collect();
            let mut heard = Vec::with_capacity(sends.len());
            for send in sends {
                heard.push(match send.await {
                    Ok((outcome, raw)) => Heard::Answer(outcome, raw.map(Arc::from)),
                    Err(e) => Heard::Answer(Outcome::Failed(format!("outcome unknown: {e}")), None),
                });
            }
            heard
        };
        // SIFEN's raw answers, each stored once (a lot's is every document's).
        let mut stored: Vec<(Arc<str>, Result<Response, JobFailure>)> = Vec::new();
        for h in &heard {
            if let Some(raw) = h.raw()
                && !stored.iter().any(|(r, _)| Arc::ptr_eq(r, raw))
            {
                stored.push((raw.clone(), self.store_response(raw).await));
            }
        }
        let mut results: Vec<Option<Result<(), JobFailure>>> = Vec::with_capacity(group.len());
        let mut work = Vec::new();
        for (s, h) in group.iter().zip(heard) {
            let response = match h.raw() {
                Some(raw) => match stored.iter().find(|(r, _)| Arc::ptr_eq(r, raw)) {
                    Some((_, Ok(response))) => Some(response),
                    Some((_, Err(e))) => {
                        results.push(Some(Err(e.clone())));
                        continue;
                    }
                    None => None,
                },
                None => None,
            };
            let doc = &preparing[s.index];
            let commands = match h {
                Heard::InLot { number, .. } => {
                    let mut commands: Vec<DocumentCommand> = response
                        .map(|r| response_artifact(&s.state, r, now))
                        .into_iter()
                        .collect();
                    commands.push(DocumentCommand::RecordSubmitted {
                        attempt: s.state.attempts,
                        lot_id: Some(number),
                        at: now,
                    });
                    commands
                }
                Heard::Answer(outcome, _) => outcome_commands(self, &s.state, outcome, response),
            };
            results.push(None);
            work.push((doc.id, commands, doc.span.clone()));
        }
        let mut recorded = documents::commands_each(&self.ports.store, tenant, work, metadata(ACTOR))
            .await
            .into_iter();
        results
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| match recorded.next() {
                    Some(Ok(_)) => Ok(()),
                    // The job runs again and reconciles before anything is sent again.
                    Some(Err(e)) => Err(retry(format!("recording SIFEN's answer: {e}"))),
                    None => Err(retry("no answer from the append")),
                })
            })
            .collect()
    }

    fn lots_on(&self) -> bool {
        !self.lots.window.is_zero() && self.jobs.is_some()
    }
}

/// Builds and signs a turn's documents, numbered `first`, `first + 1`, … in order, spread over
/// the cores (signing is CPU work: off the runtime).
async fn sign_turn(
    preparing: &Arc<Vec<Preparing>>,
    series: &str,
    first: u64,
    now: DateTime<Utc>,
) -> Vec<Result<Signed, JobFailure>> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let lanes = cores.min(preparing.len()).max(1);
    let tasks: Vec<_> = (0..lanes)
        .map(|lane| {
            let (preparing, series) = (preparing.clone(), series.to_owned());
            tokio::task::spawn_blocking(move || {
                (lane..preparing.len())
                    .step_by(lanes)
                    .map(|i| {
                        let doc = &preparing[i];
                        let _span = doc.span.enter();
                        (
                            i,
                            build_and_sign(&doc.state, &doc.setup, series.clone(), first + i as u64, now),
                        )
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut signed: Vec<Option<Result<Signed, JobFailure>>> = (0..preparing.len()).map(|_| None).collect();
    for task in tasks {
        match task.await {
            Ok(lane) => {
                for (i, result) in lane {
                    signed[i] = Some(result);
                }
            }
            Err(e) => tracing::error!(error = %e, "a signing lane failed"),
        }
    }
    signed
        .into_iter()
        .map(|s| s.unwrap_or_else(|| Err(retry("the signing task failed"))))
        .collect()
}

/// The normalized payload artifact's bytes: the canonical document as kept (defaults applied),
/// JSON.
pub fn normalized_payload(state: &DocumentState) -> Result<Vec<u8>, JobFailure> {
    serde_json::to_vec(&state.document)
        .map_err(|e| JobFailure::Permanent(format!("the canonical document: {e}")))
}

/// Records the normalized payload artifact, stored before under `sha256`; once per document.
pub fn normalized_payload_artifact(
    state: &DocumentState,
    sha256: String,
    size: u64,
    now: DateTime<Utc>,
) -> DocumentCommand {
    DocumentCommand::RecordArtifact {
        artifact_id: Uuid::now_v7(),
        kind: ArtifactKind::NormalizedPayload,
        content_type: "application/json".into(),
        sha256,
        size,
        version: state.next_artifact_version(ArtifactKind::NormalizedPayload),
        at: now,
    }
}

/// What a signed document records: (transformed →) the normalized payload → signed XML
/// artifact → signed, one append.
fn prepared_commands(
    state: &DocumentState,
    signed: Signed,
    sha256: String,
    (payload_sha256, payload_size): (String, u64),
    now: DateTime<Utc>,
) -> Vec<DocumentCommand> {
    let artifact_id = Uuid::now_v7();
    let mut commands = Vec::new();
    if state.status == DocumentStatus::Queued {
        commands.push(DocumentCommand::StartTransform { at: now });
    }
    commands.push(DocumentCommand::RecordTransformed {
        series: signed.series,
        number: signed.number,
        cdc: signed.cdc,
        security_code: signed.security_code,
        xml_sha256: signed.unsigned_sha256,
        at: now,
    });
    if state.latest_artifact(ArtifactKind::NormalizedPayload).is_none() {
        commands.push(normalized_payload_artifact(
            state,
            payload_sha256,
            payload_size,
            now,
        ));
    }
    commands.extend([
        DocumentCommand::RecordArtifact {
            artifact_id,
            kind: ArtifactKind::SignedXml,
            content_type: "application/xml".into(),
            sha256,
            size: signed.xml.len() as u64,
            version: state.next_artifact_version(ArtifactKind::SignedXml),
            at: now,
        },
        DocumentCommand::RecordSigned {
            signed_xml_artifact_id: artifact_id,
            signed_at: signed.signed_at,
            at: now,
        },
        // The first attempt is on record before anything can leave: the turn sends it after
        // this append commits.
        DocumentCommand::RecordSubmitted {
            attempt: 1,
            lot_id: None,
            at: now,
        },
    ]);
    commands
}

impl Pipeline {
    fn series_turns(&self, series: &str) -> Arc<SeriesTurns> {
        let mut turns = self
            .series_turns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if turns.len() > 10_000 {
            turns.retain(|_, t| Arc::strong_count(t) > 1);
        }
        turns
            .entry(series.to_owned())
            .or_insert_with(|| {
                let (gate, window) = (self.gate.clone(), self.lots.window);
                Arc::new(
                    Combiner::new(MAX_PREPARE_TURN, |_| 1).with_gather(Box::new(move || {
                        let gate = gate.clone();
                        Box::pin(async move { gate.gather(window).await })
                    })),
                )
            })
            .clone()
    }
}
