//! The index a lookup instance searches, and how it follows the database.
//!
//! Every instance loads the active generation at start and then checks `lookup_registry.generation`
//! every few seconds (one indexed single-row read). When another import has switched slots, it
//! loads the new generation in the background, from one snapshot, and swaps the `Arc` in one
//! step: a request sees the old index or the new one, never a mix, and searches go on during the
//! load. Several instances converge within one refresh interval of each other; until then each
//! serves a whole publication. The database stays the only state.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use kuatia_application::event_store::StoreError;
use tokio::task::JoinHandle;

use super::index::Index;
use super::registry::{self, RegistryError};
use crate::store::Database;

/// The index in use, swapped whole when the registry changes.
pub struct LiveIndex {
    database: Database,
    current: RwLock<Arc<Index>>,
    loaded: AtomicBool,
    /// How long the last load took, in milliseconds.
    load_millis: AtomicU64,
    /// Answers each index caches (see `Index::with_cache_entries`).
    cache_entries: usize,
    /// Serialises loads (the refresher and an explicit [`LiveIndex::refresh`]).
    loading: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for LiveIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveIndex")
            .field("current", &*self.current())
            .field("loaded", &self.is_loaded())
            .finish()
    }
}

impl LiveIndex {
    /// An instance that has loaded nothing yet (searches see an empty registry and `/ready` says
    /// not ready until the first load).
    pub fn new(database: Database) -> Arc<Self> {
        Self::with_cache_entries(database, super::index::CACHE_ENTRIES)
    }

    /// [`LiveIndex::new`] with a cache of `entries` recent answers per index map (0: none).
    pub fn with_cache_entries(database: Database, entries: usize) -> Arc<Self> {
        Arc::new(Self {
            database,
            cache_entries: entries,
            current: RwLock::new(Arc::new(Index::empty(-1))),
            loaded: AtomicBool::new(false),
            load_millis: AtomicU64::new(0),
            loading: tokio::sync::Mutex::new(()),
        })
    }

    /// The index to search now.
    pub fn current(&self) -> Arc<Index> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Whether the first load has finished.
    pub fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    /// How long the last load took.
    pub fn last_load(&self) -> Duration {
        Duration::from_millis(self.load_millis.load(Ordering::Relaxed))
    }

    /// The database it follows.
    pub fn database(&self) -> &Database {
        &self.database
    }

    /// Loads the active generation if it is not the one in use; returns whether it swapped.
    pub async fn refresh(&self) -> Result<bool, StoreError> {
        let _guard = self.loading.lock().await;
        let store = self.database.store();
        let generation = registry::generation(store.as_ref()).await?;
        if self.is_loaded() && generation == self.current().generation() {
            return Ok(false);
        }
        let started = Instant::now();
        let mut attempt = 0;
        let index = loop {
            match registry::load_index(&self.database).await {
                Ok(index) => break index.with_cache_entries(self.cache_entries),
                // The slot was emptied by a later import while it was read: read again.
                Err(RegistryError::Changed(message)) if attempt < 3 => {
                    attempt += 1;
                    tracing::warn!(%message, "registry changed while loading; loading again");
                }
                Err(RegistryError::Changed(message)) => return Err(StoreError::Invalid(message)),
                Err(RegistryError::LeaseLost) => unreachable!("loading takes no lease"),
                Err(RegistryError::Store(err)) => return Err(err),
            }
        };
        let seconds = started.elapsed().as_secs_f64();
        tracing::info!(
            generation = index.generation(),
            taxpayers = index.len(),
            words = index.words(),
            megabytes = index.heap_bytes() / (1 << 20),
            seconds,
            "taxpayer registry loaded"
        );
        self.load_millis
            .store((seconds * 1000.0) as u64, Ordering::Relaxed);
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(index);
        self.loaded.store(true, Ordering::Release);
        Ok(true)
    }

    /// Loads now, then checks for a new generation every `every` until `shutdown` completes.
    pub fn spawn_refresher(
        self: Arc<Self>,
        every: Duration,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> JoinHandle<()> {
        tokio::spawn(async move {
            tokio::pin!(shutdown);
            loop {
                let outcome = tokio::select! {
                    () = &mut shutdown => return,
                    outcome = self.refresh() => outcome,
                };
                if let Err(err) = outcome {
                    tracing::warn!(error = %err, "refreshing the taxpayer registry failed");
                }
                tokio::select! {
                    () = &mut shutdown => return,
                    () = tokio::time::sleep(every) => {}
                }
            }
        })
    }
}
