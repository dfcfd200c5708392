//! Aggregates on our event store: the cqrs-es [`EventStore`] implementation and the command
//! executor.
//!
//! Aggregates are written against cqrs-es 0.5 (`Aggregate`, `EventSink`, `TestFramework`).
//! [`AggregateStore`] implements cqrs-es's `EventStore` over our [`Store`], and
//! [`CommandExecutor`] runs load → handle → commit itself instead of `CqrsFramework::execute`,
//! because that returns `()` and we need the committed global positions (for read-your-writes and
//! API responses), the jobs written with the events, and typed version conflicts.

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, AggregateContext, AggregateError, DomainEvent, EventEnvelope, EventStore};
use kuatia_domain::tenancy::TenantId;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;
use tracing::Instrument;

use crate::event_store::{
    AppendOutcome, AppendRequest, EventMetadata, ExpectedVersion, NewEvent, RecordedEvent, SharedStore,
    StoreError, StreamRef,
};
use crate::jobs::NewJob;

/// An aggregate loaded from its stream, with the version it was loaded at.
#[derive(Debug)]
pub struct LoadedAggregate<A> {
    aggregate: A,
    stream_id: String,
    version: u64,
}

impl<A> LoadedAggregate<A> {
    /// The stream version the aggregate was folded from (0: new stream).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The folded aggregate.
    pub fn aggregate(&self) -> &A {
        &self.aggregate
    }
}

impl<A: Aggregate> AggregateContext<A> for LoadedAggregate<A> {
    fn aggregate(&mut self) -> &mut A {
        &mut self.aggregate
    }
}

/// cqrs-es's `EventStore` for aggregates of type `A` owned by one tenant.
pub struct AggregateStore<A> {
    store: SharedStore,
    tenant: TenantId,
    _aggregate: PhantomData<fn() -> A>,
}

impl<A> AggregateStore<A> {
    /// The store of one tenant's `A` streams.
    pub fn new(store: SharedStore, tenant: TenantId) -> Self {
        Self {
            store,
            tenant,
            _aggregate: PhantomData,
        }
    }
}

fn store_error<E: std::error::Error>(err: StoreError) -> AggregateError<E> {
    match err {
        StoreError::VersionConflict { .. } => AggregateError::AggregateConflict,
        StoreError::Corrupt(m) => AggregateError::DeserializationError(m.into()),
        other => AggregateError::DatabaseConnectionError(Box::new(other)),
    }
}

impl<A: Aggregate + Clone + 'static> AggregateStore<A> {
    async fn load_owned(&self, stream_id: &str) -> Result<Vec<RecordedEvent>, StoreError> {
        let events = self.store.load_stream(stream_id).await?;
        if let Some(first) = events.first()
            && (first.tenant_id != self.tenant || first.stream_type != A::TYPE)
        {
            // Someone else's stream looks like no stream at all: never reveal or touch it.
            return Err(StoreError::Invalid(format!(
                "stream {stream_id} is not a {} of this tenant",
                A::TYPE
            )));
        }
        Ok(events)
    }

    fn decode(event: &RecordedEvent) -> Result<A::Event, StoreError> {
        serde_json::from_value(event.payload.clone()).map_err(|e| {
            StoreError::Corrupt(format!(
                "event {} ({} v{}) does not decode: {e}",
                event.event_id, event.event_type, event.schema_version
            ))
        })
    }

    fn encode(event: &A::Event) -> Result<NewEvent, StoreError> {
        let schema_version = kuatia_domain::event::schema_version(event).ok_or_else(|| {
            StoreError::Invalid(format!(
                "event {} has no integer schema version",
                event.event_type()
            ))
        })?;
        let payload = serde_json::to_value(event).map_err(|e| StoreError::Invalid(e.to_string()))?;
        Ok(NewEvent::new(event.event_type(), schema_version, payload))
    }

    /// The append of events and jobs on a loaded aggregate (expecting the version it was loaded
    /// at). The events carry the current span's trace context unless the metadata names one.
    fn request(
        &self,
        events: &[A::Event],
        context: &LoadedAggregate<A>,
        mut metadata: EventMetadata,
        jobs: Vec<NewJob>,
    ) -> Result<AppendRequest, StoreError> {
        if metadata.trace_parent.is_none() {
            metadata.trace_parent = crate::trace_context::current();
        }
        let new_events = events.iter().map(Self::encode).collect::<Result<Vec<_>, _>>()?;
        Ok(AppendRequest {
            stream: StreamRef {
                tenant_id: self.tenant,
                stream_type: A::TYPE.to_owned(),
                stream_id: context.stream_id.clone(),
            },
            expected: ExpectedVersion::from_current(context.version),
            events: new_events,
            metadata,
            jobs,
        })
    }

    /// Commits events and jobs, returning the store's outcome (positions, version).
    pub async fn commit_events(
        &self,
        events: &[A::Event],
        context: &LoadedAggregate<A>,
        metadata: EventMetadata,
        jobs: Vec<NewJob>,
    ) -> Result<AppendOutcome, StoreError> {
        let request = self.request(events, context, metadata, jobs)?;
        // Not folded here: the next load reads the stream again.
        if let Some(cache) = self.store.aggregate_cache() {
            cache.forget(&context.stream_id);
        }
        self.store.append(request).await
    }

    /// Loads and folds an aggregate: from the store's cache (`crate::aggregate_cache`) and the
    /// events after its version when it holds the stream, otherwise the whole stream.
    pub async fn load(&self, stream_id: &str) -> Result<LoadedAggregate<A>, StoreError> {
        let cache = self.store.aggregate_cache();
        let (cached, mut aggregate, mut version) =
            match cache.and_then(|c| c.get::<A>(self.tenant, stream_id)) {
                Some((version, aggregate)) => (true, aggregate, version),
                None => (false, A::default(), 0),
            };
        let events = if cached {
            self.store.load_stream_after(stream_id, version).await?
        } else {
            self.load_owned(stream_id).await?
        };
        for event in &events {
            aggregate.apply(Self::decode(event)?);
            version = event.stream_version;
        }
        if let Some(cache) = cache
            && version > 0
            && !(cached && events.is_empty())
        {
            cache.put(self.tenant, stream_id, version, &aggregate);
        }
        Ok(LoadedAggregate {
            aggregate,
            stream_id: stream_id.to_owned(),
            version,
        })
    }

    /// Folds the stream's events up to `version` (inclusive), as it stood then; never from or
    /// into the cache. Reading only: the auditor's "state as of this event".
    pub async fn load_as_of(&self, stream_id: &str, version: u64) -> Result<LoadedAggregate<A>, StoreError> {
        let mut aggregate = A::default();
        let mut reached = 0;
        for event in self.load_owned(stream_id).await? {
            if event.stream_version > version {
                break;
            }
            aggregate.apply(Self::decode(&event)?);
            reached = event.stream_version;
        }
        Ok(LoadedAggregate {
            aggregate,
            stream_id: stream_id.to_owned(),
            version: reached,
        })
    }

    /// The aggregate right after each event of the stream, oldest first, from one read of the
    /// stream (the auditor's timeline shows what each event changed). Reading only.
    pub async fn history(&self, stream_id: &str) -> Result<Vec<(u64, A)>, StoreError>
    where
        A: Clone,
    {
        let mut aggregate = A::default();
        let mut out = Vec::new();
        for event in self.load_owned(stream_id).await? {
            aggregate.apply(Self::decode(&event)?);
            out.push((event.stream_version, aggregate.clone()));
        }
        Ok(out)
    }

    /// Loads an aggregate for a caller that acts on it only through appends that expect the
    /// version it was loaded at (a job that records what it did): the cached aggregate as it is,
    /// without reading the stream, when the cache holds the stream and `acts` says the caller
    /// would act on it — a stale one only costs that append a version conflict. When the
    /// caller would do nothing (or the cache does not hold the stream), the aggregate is read
    /// as [`Self::load`] does: a cache that another instance's write made stale must not make a
    /// job skip work it was queued for.
    pub async fn load_to_act(
        &self,
        stream_id: &str,
        acts: impl FnOnce(&A) -> bool,
    ) -> Result<LoadedAggregate<A>, StoreError> {
        match self.cached(stream_id) {
            Some(cached) if acts(&cached.aggregate) => Ok(cached),
            _ => self.load(stream_id).await,
        }
    }

    /// The cached aggregate as it is, without reading the stream: what a command is decided on
    /// first ([`CommandExecutor`]: the append, which expects the cached version, checks it).
    fn cached(&self, stream_id: &str) -> Option<LoadedAggregate<A>> {
        let (version, aggregate) = self.store.aggregate_cache()?.get::<A>(self.tenant, stream_id)?;
        Some(LoadedAggregate {
            aggregate,
            stream_id: stream_id.to_owned(),
            version,
        })
    }

    /// What a command's append did to the cache: committed, the aggregate as its events left it;
    /// a conflict, forgotten (someone else wrote the stream; the next load reads it).
    fn settle(&self, loaded: &LoadedAggregate<A>, outcome: &Result<AppendOutcome, StoreError>) {
        let Some(cache) = self.store.aggregate_cache() else {
            return;
        };
        match outcome {
            Ok(outcome) => cache.put(
                self.tenant,
                &loaded.stream_id,
                outcome.stream_version,
                &loaded.aggregate,
            ),
            Err(_) => cache.forget(&loaded.stream_id),
        }
    }
}

impl<A: Aggregate + Clone + 'static> EventStore<A> for AggregateStore<A>
where
    A::Event: Send,
{
    type AC = LoadedAggregate<A>;

    async fn load_events(
        &self,
        aggregate_id: &str,
    ) -> Result<Vec<EventEnvelope<A>>, AggregateError<A::Error>> {
        let events = self.load_owned(aggregate_id).await.map_err(store_error)?;
        events
            .iter()
            .map(|event| {
                Ok(EventEnvelope {
                    aggregate_id: event.stream_id.clone(),
                    sequence: event.stream_version as usize,
                    payload: Self::decode(event).map_err(store_error)?,
                    metadata: event.metadata.to_map(),
                })
            })
            .collect()
    }

    async fn load_aggregate(&self, aggregate_id: &str) -> Result<Self::AC, AggregateError<A::Error>> {
        self.load(aggregate_id).await.map_err(store_error)
    }

    async fn commit(
        &self,
        events: Vec<A::Event>,
        context: Self::AC,
        metadata: HashMap<String, String>,
    ) -> Result<Vec<EventEnvelope<A>>, AggregateError<A::Error>> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let meta = EventMetadata::from_map(&metadata);
        let outcome = self
            .commit_events(&events, &context, meta, Vec::new())
            .await
            .map_err(store_error)?;
        let first = outcome.stream_version - events.len() as u64 + 1;
        Ok(events
            .into_iter()
            .enumerate()
            .map(|(i, payload)| EventEnvelope {
                aggregate_id: context.stream_id.clone(),
                sequence: (first + i as u64) as usize,
                payload,
                metadata: metadata.clone(),
            })
            .collect())
    }
}

/// What a command committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// Global positions of the new events (empty when the command changed nothing).
    pub positions: Vec<i64>,
    /// Stream version after the command.
    pub stream_version: u64,
    /// When the store recorded the events (`None` when nothing was committed).
    pub recorded_at: Option<DateTime<Utc>>,
}

/// Why a command did not commit.
#[derive(Debug, thiserror::Error)]
pub enum ExecuteError<E: std::error::Error> {
    /// The aggregate refused the command (a domain rule).
    #[error("{0}")]
    Rejected(E),
    /// The stream does not belong to this tenant and aggregate type.
    #[error("not found")]
    NotFound,
    /// Another command committed first; reload and retry if that makes sense.
    #[error("concurrent modification of stream {0}")]
    Conflict(String),
    /// The store failed.
    #[error(transparent)]
    Store(StoreError),
}

/// Jobs an aggregate's new events cause (the outbox policy), computed before the commit so they
/// land in the same transaction; it sees the aggregate as those events leave it.
pub type JobPolicy<A> = dyn Fn(&StreamRef, &A, &[<A as Aggregate>::Event]) -> Vec<NewJob> + Send + Sync;

/// Runs commands against aggregates of type `A`.
pub struct CommandExecutor<A: Aggregate> {
    store: SharedStore,
    services: A::Services,
    jobs: Option<Arc<JobPolicy<A>>>,
}

impl<A: Aggregate + Clone + 'static> CommandExecutor<A>
where
    A::Event: Send,
    A::Command: Clone,
{
    /// An executor with the aggregate's services.
    pub fn new(store: SharedStore, services: A::Services) -> Self {
        Self {
            store,
            services,
            jobs: None,
        }
    }

    /// Sets the outbox policy.
    pub fn with_jobs(mut self, policy: Arc<JobPolicy<A>>) -> Self {
        self.jobs = Some(policy);
        self
    }

    /// Loads the stream, handles the command, and commits its events with their jobs.
    /// A command that yields no event commits nothing (repeating a command is harmless).
    pub async fn execute(
        &self,
        tenant: TenantId,
        stream_id: &str,
        command: A::Command,
        metadata: EventMetadata,
    ) -> Result<Committed, ExecuteError<A::Error>> {
        self.execute_all(tenant, stream_id, vec![command], metadata).await
    }

    /// Handles several commands in order, each seeing the events of the ones before, and commits
    /// all their events in one append — or nothing, when any command is refused. (Intake stores
    /// and queues a document this way: one transaction instead of two.)
    ///
    /// A stream the store's aggregate cache holds is decided on the cached aggregate without
    /// reading the stream: an append expects the cached version, so it commits only if nobody
    /// wrote the stream since, i.e. only if the decision was made on the stream as it stands.
    /// Any other outcome on a cached aggregate — a version conflict, a refusal, nothing to do —
    /// may come from a stale cache (another instance wrote the stream), so the commands are
    /// decided once more on the stream as read from the store; that outcome is the answer.
    pub async fn execute_all(
        &self,
        tenant: TenantId,
        stream_id: &str,
        commands: Vec<A::Command>,
        metadata: EventMetadata,
    ) -> Result<Committed, ExecuteError<A::Error>> {
        let store = AggregateStore::<A>::new(self.store.clone(), tenant);
        if let Some(cached) = store.cached(stream_id) {
            match self.run(&store, cached, commands.clone(), metadata.clone()).await {
                Ok((committed, _)) if committed.recorded_at.is_some() => return Ok(committed),
                Err(ExecuteError::Store(e)) => return Err(ExecuteError::Store(e)),
                _ => {}
            }
        }
        let loaded = store.load(stream_id).await.map_err(load_error)?;
        self.run(&store, loaded, commands, metadata)
            .await
            .map(|(committed, _)| committed)
    }

    /// Like [`Self::execute_all`] for a stream that must not exist yet: nothing is read, the
    /// commands run on a fresh aggregate, and an existing stream answers
    /// [`ExecuteError::Conflict`] (the append expects no stream).
    pub async fn execute_new(
        &self,
        tenant: TenantId,
        stream_id: &str,
        commands: Vec<A::Command>,
        metadata: EventMetadata,
    ) -> Result<Committed, ExecuteError<A::Error>> {
        let store = AggregateStore::<A>::new(self.store.clone(), tenant);
        let fresh = LoadedAggregate {
            aggregate: A::default(),
            stream_id: stream_id.to_owned(),
            version: 0,
        };
        self.run(&store, fresh, commands, metadata)
            .await
            .map(|(committed, _)| committed)
    }

    /// Runs commands on several streams and commits each one's events in the order given, queued
    /// together ([`crate::event_store::Store::append_all`]: usually one transaction, no other
    /// append between them). Each stream is decided and answered on its own, as
    /// [`Self::execute_all`] does (on its cached aggregate when the cache holds it; the streams it
    /// does not hold are loaded concurrently). Each stream's commands are handled inside the span
    /// given with them, so the jobs they queue carry that span's trace context (`NewJob::new`).
    /// Each stream comes back with its aggregate as the commands left it (what a caller acting on
    /// the result would otherwise load again).
    pub async fn execute_each(
        &self,
        tenant: TenantId,
        work: Vec<(String, Vec<A::Command>, tracing::Span)>,
        metadata: EventMetadata,
    ) -> Vec<Result<(Committed, A), ExecuteError<A::Error>>> {
        let store = AggregateStore::<A>::new(self.store.clone(), tenant);
        let loads: Vec<_> = work
            .iter()
            .map(|(stream_id, _, _)| match store.cached(stream_id) {
                Some(cached) => Load::Cached(cached),
                None => {
                    let (store, stream_id) = (
                        AggregateStore::<A>::new(self.store.clone(), tenant),
                        stream_id.clone(),
                    );
                    Load::Reading(tokio::spawn(async move { store.load(&stream_id).await }))
                }
            })
            .collect();
        let mut decided = Vec::with_capacity(work.len());
        for ((stream_id, commands, span), load) in work.into_iter().zip(loads) {
            let (mut loaded, cached) = match load {
                Load::Cached(cached) => (cached, true),
                Load::Reading(reading) => match reading.await {
                    Ok(Ok(loaded)) => (loaded, false),
                    Ok(Err(e)) => {
                        decided.push(Err(load_error(e)));
                        continue;
                    }
                    Err(e) => {
                        decided.push(Err(ExecuteError::Store(StoreError::Database(
                            format!("loading a stream: {e}").into(),
                        ))));
                        continue;
                    }
                },
            };
            let retry = cached.then(|| (commands.clone(), span.clone()));
            let mut decision = self
                .decide(&store, &mut loaded, commands, metadata.clone())
                .instrument(span.clone())
                .await;
            // Nothing to do or refused on the cached aggregate: perhaps only because it is stale.
            if let Some((commands, span)) = retry.as_ref()
                && !matches!(decision, Ok(Decision::Append { .. }))
            {
                match store.load(&stream_id).await {
                    Ok(fresh) => {
                        loaded = fresh;
                        decision = self
                            .decide(&store, &mut loaded, commands.clone(), metadata.clone())
                            .instrument(span.clone())
                            .await;
                    }
                    Err(e) => decision = Err(load_error(e)),
                }
                decided.push(decision.map(|d| (d, loaded, None)));
                continue;
            }
            decided.push(decision.map(|d| (d, loaded, retry)));
        }
        let requests: Vec<AppendRequest> = decided
            .iter_mut()
            .filter_map(|d| match d {
                Ok((Decision::Append { request, .. }, _, _)) => request.take(),
                _ => None,
            })
            .collect();
        let mut outcomes = self.store.append_all(requests).await.into_iter();
        let mut results = Vec::with_capacity(decided.len());
        for decided in decided {
            let (decision, loaded, retry) = match decided {
                Ok(decided) => decided,
                Err(e) => {
                    results.push(Err(e));
                    continue;
                }
            };
            let result = match decision {
                Decision::Nothing(committed) => Ok((committed, loaded.aggregate)),
                Decision::Append { .. } => {
                    let outcome = outcomes
                        .next()
                        .unwrap_or_else(|| Err(StoreError::Database("no append result".into())));
                    store.settle(&loaded, &outcome);
                    match (committed(outcome), retry) {
                        // Decided on a cached aggregate that someone else's write made stale:
                        // decided again on the stream as it stands, in an append of its own.
                        (Err(ExecuteError::Conflict(_)), Some((commands, span))) => {
                            async {
                                let fresh = store.load(&loaded.stream_id).await.map_err(load_error)?;
                                self.run(&store, fresh, commands, metadata.clone()).await
                            }
                            .instrument(span)
                            .await
                        }
                        (result, _) => result.map(|committed| (committed, loaded.aggregate)),
                    }
                }
            };
            results.push(result);
        }
        results
    }

    /// Handles the commands on a loaded aggregate: nothing to commit, or the append to make.
    async fn decide(
        &self,
        store: &AggregateStore<A>,
        loaded: &mut LoadedAggregate<A>,
        commands: Vec<A::Command>,
        metadata: EventMetadata,
    ) -> Result<Decision, ExecuteError<A::Error>> {
        let tenant = store.tenant;
        let sink = EventSink::default();
        for command in commands {
            loaded
                .aggregate
                .handle(command, &self.services, &sink)
                .await
                .map_err(ExecuteError::Rejected)?;
        }
        let events = sink.collect().await;
        if events.is_empty() {
            return Ok(Decision::Nothing(Committed {
                positions: Vec::new(),
                stream_version: loaded.version,
                recorded_at: None,
            }));
        }
        let stream = StreamRef {
            tenant_id: tenant,
            stream_type: A::TYPE.to_owned(),
            stream_id: loaded.stream_id.clone(),
        };
        let jobs = self
            .jobs
            .as_ref()
            .map(|policy| policy(&stream, &loaded.aggregate, &events))
            .unwrap_or_default();
        let request = store
            .request(&events, loaded, metadata, jobs)
            .map_err(ExecuteError::Store)?;
        Ok(Decision::Append {
            request: Some(request),
        })
    }

    /// Handles the commands on a loaded aggregate and commits their events (one append),
    /// returning the aggregate as they left it.
    async fn run(
        &self,
        store: &AggregateStore<A>,
        mut loaded: LoadedAggregate<A>,
        commands: Vec<A::Command>,
        metadata: EventMetadata,
    ) -> Result<(Committed, A), ExecuteError<A::Error>> {
        match self.decide(store, &mut loaded, commands, metadata).await? {
            Decision::Nothing(committed) => Ok((committed, loaded.aggregate)),
            Decision::Append { request } => {
                let request =
                    request.ok_or_else(|| ExecuteError::Store(StoreError::Invalid("no append".into())))?;
                let outcome = self.store.append(request).await;
                store.settle(&loaded, &outcome);
                committed(outcome).map(|committed| (committed, loaded.aggregate))
            }
        }
    }
}

/// A stream's aggregate for [`CommandExecutor::execute_each`]: cached, or being read.
enum Load<A> {
    Cached(LoadedAggregate<A>),
    Reading(tokio::task::JoinHandle<Result<LoadedAggregate<A>, StoreError>>),
}

/// A failed load as the executor's error (a stream of another tenant or type is not found).
fn load_error<E: std::error::Error>(err: StoreError) -> ExecuteError<E> {
    match err {
        StoreError::Invalid(_) => ExecuteError::NotFound,
        other => ExecuteError::Store(other),
    }
}

/// What handling commands decided.
enum Decision {
    /// No event: nothing to commit.
    Nothing(Committed),
    /// This append (taken out when it is queued).
    Append { request: Option<AppendRequest> },
}

/// A store's answer to an append as the executor's result.
fn committed<E: std::error::Error>(
    outcome: Result<AppendOutcome, StoreError>,
) -> Result<Committed, ExecuteError<E>> {
    let outcome = outcome.map_err(|e| match e {
        StoreError::VersionConflict { stream_id, .. } => ExecuteError::Conflict(stream_id),
        other => ExecuteError::Store(other),
    })?;
    Ok(Committed {
        positions: outcome.positions,
        stream_version: outcome.stream_version,
        recorded_at: Some(outcome.recorded_at),
    })
}
