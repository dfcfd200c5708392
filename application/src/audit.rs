//! A document's record for its auditor: its stream exactly as stored (the bytes the hash chain
//! covers, for `kuatia events verify --file`), the chain checked, and the document as it stood at
//! any event of its stream. Reading only.

use kuatia_domain::document::aggregate::{self, Document, DocumentState};
use kuatia_domain::tenancy::TenantId;
use uuid::Uuid;

use crate::aggregate::AggregateStore;
use crate::event_store::{SharedStore, StoreError};
use crate::hash::{ChainBreak, ChainVerifier};
use crate::records::RecordedEvent;

/// A document's events as stored (not upcast: the hashes cover these payloads), oldest first;
/// empty when the tenant has no such document.
pub async fn document_stream(
    store: &SharedStore,
    tenant: TenantId,
    document_id: Uuid,
) -> Result<Vec<RecordedEvent>, StoreError> {
    store
        .load_stream_raw(tenant, &aggregate::stream_id(tenant, document_id))
        .await
}

/// Checks the hash chain of whole streams (each from its first version): the number of events
/// checked, or where it broke.
pub fn verify(events: &[RecordedEvent]) -> Result<u64, ChainBreak> {
    let mut verifier = ChainVerifier::default();
    for event in events {
        verifier.check(event)?;
    }
    Ok(verifier.checked())
}

/// The document as it stood right after the event of stream version `version` (a version past
/// the last one gives the document as it is); `None` when the tenant has no such document.
pub async fn state_as_of(
    store: &SharedStore,
    tenant: TenantId,
    document_id: Uuid,
    version: u64,
) -> Result<Option<(u64, DocumentState)>, StoreError> {
    let loaded = AggregateStore::<Document>::new(store.clone(), tenant)
        .load_as_of(&aggregate::stream_id(tenant, document_id), version)
        .await?;
    Ok(loaded
        .aggregate()
        .state()
        .cloned()
        .map(|state| (loaded.version(), state)))
}

/// The document right after each event of its stream, oldest first (one read of the stream);
/// empty when the tenant has no such document.
pub async fn history(
    store: &SharedStore,
    tenant: TenantId,
    document_id: Uuid,
) -> Result<Vec<(u64, DocumentState)>, StoreError> {
    let states = AggregateStore::<Document>::new(store.clone(), tenant)
        .history(&aggregate::stream_id(tenant, document_id))
        .await?;
    Ok(states
        .into_iter()
        .filter_map(|(version, document)| document.into_state().map(|s| (version, s)))
        .collect())
}
