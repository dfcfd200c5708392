//! Secrets at rest: certificate keys and chains, the CSC, channel credentials.
//!
//! A secret is sealed (AES-256-GCM under `KUATIA_MASTER_KEY`, by the [`Sealer`] adapter) and kept
//! in the plain table `sealed_secrets`, never in an event: events are immutable and readable by
//! auditors (`GET /v1/events`), so they carry only the secret's id. A new id in a configuration
//! event is how the audit trail shows that a secret changed. The additional authenticated data
//! binds each ciphertext to its tenant, id and kind, so a sealed value copied onto another row
//! does not open.
//!
//! A secret row is written before the event that refers to it; if the append then fails, the row
//! is an orphan nobody refers to, never a reference to nothing.

use chrono::Utc;
use kuatia_domain::certificate::CertificateFacts;
use kuatia_domain::tenancy::TenantId;
use std::sync::Arc;
use uuid::Uuid;
use zeroize::Zeroizing;

use crate::event_store::{SharedStore, StoreError};
use crate::projection::SqlValue;

/// Why sealing or opening failed.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    /// The ciphertext does not open under this key with this context (wrong master key, or
    /// tampering).
    #[error("a sealed secret does not open: wrong master key or altered data")]
    Unsealable,
    /// The secret was sealed under a master key this instance does not hold (a rotation under
    /// way: set `KUATIA_MASTER_KEY_PREVIOUS`).
    #[error(
        "a secret is sealed under master key {0}, which this instance does not hold (KUATIA_MASTER_KEY_PREVIOUS)"
    )]
    KeyUnavailable(String),
    /// No such secret for this tenant.
    #[error("no such secret")]
    Missing,
    /// Secrets are sealed under master keys this instance does not hold: the master key is wrong
    /// (found at start by [`Vault::prove`], and by `/ready` while running).
    #[error("{0}")]
    KeysNotHeld(KeyCheck),
    /// The canary written at first start does not open under the key that claims to have sealed
    /// it (altered data).
    #[error(
        "the master key canary (sealed_secrets {CANARY_ID}) does not open under key {0}: the key or the row was altered"
    )]
    CanaryBroken(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl VaultError {
    /// Worth trying again (the store failed); every other failure stays until an operator acts.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Store(_))
    }
}

/// The canary's row in `sealed_secrets`: no tenant's, sealed at the first start under the master
/// key of that day and opened at every start ([`Vault::prove`]); `kuatia secrets rotate` re-seals
/// it with the rest.
pub const CANARY_ID: Uuid = Uuid::from_u128(0x6b75_6174_6961_0000_8000_6361_6e61_7279);
const CANARY_KIND: &str = "canary";
const CANARY_TEXT: &[u8] = b"kuatia master key canary v1";

/// Which master keys the sealed secrets need, against the keys this instance holds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct KeyCheck {
    /// The current key's id (new secrets are sealed under it).
    pub current: String,
    /// The earlier keys held (`KUATIA_MASTER_KEY_PREVIOUS`).
    pub previous: Vec<String>,
    /// Every key id the sealed secrets name, with how many rows name it.
    pub in_use: std::collections::BTreeMap<String, u64>,
}

impl KeyCheck {
    /// The key ids in use that no held key opens, with their row counts.
    pub fn missing(&self) -> Vec<(&str, u64)> {
        self.in_use
            .iter()
            .filter(|(id, _)| **id != self.current && !self.previous.contains(id))
            .map(|(id, n)| (id.as_str(), *n))
            .collect()
    }
}

impl std::fmt::Display for KeyCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let missing = self
            .missing()
            .iter()
            .map(|(id, n)| format!("{n} under key {id}"))
            .collect::<Vec<_>>()
            .join(", ");
        let previous = if self.previous.is_empty() {
            String::new()
        } else {
            format!(" nor KUATIA_MASTER_KEY_PREVIOUS ({})", self.previous.join(", "))
        };
        write!(
            f,
            "the master key does not open this database's sealed secrets ({missing}); \
             KUATIA_MASTER_KEY is key {}{previous}. Set KUATIA_MASTER_KEY to the key that sealed \
             them (or add it to KUATIA_MASTER_KEY_PREVIOUS and run `kuatia secrets rotate`)",
            self.current
        )
    }
}

/// Authenticated encryption under the master key (the adapter is in `infrastructure`).
pub trait Sealer: Send + Sync {
    /// A short, public identifier of the key (so that a rotation can tell old rows).
    fn key_id(&self) -> &str;
    /// Encrypts `plaintext`, binding `aad`.
    fn seal(&self, aad: &[u8], plaintext: &[u8]) -> Vec<u8>;
    /// Decrypts what [`Sealer::seal`] returned with the same `aad`, under the key named
    /// `key_id` (the current one or an earlier one it still holds).
    fn open(&self, key_id: &str, aad: &[u8], sealed: &[u8]) -> Result<Zeroizing<Vec<u8>>, VaultError>;
    /// The ids of the earlier keys it still opens with (during a rotation).
    fn previous_key_ids(&self) -> Vec<String> {
        Vec::new()
    }
}

/// A PKCS#12 file, opened.
pub struct OpenedPfx {
    /// What the certificate says.
    pub facts: CertificateFacts,
    /// The private key (PKCS#8) and the chain, leaf first, as PEM: what mutual TLS and the
    /// signer take.
    pub pem: Zeroizing<String>,
}

impl std::fmt::Debug for OpenedPfx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedPfx")
            .field("facts", &self.facts)
            .field("pem", &"<redacted>")
            .finish()
    }
}

/// Why a PFX could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PfxError {
    /// Not a PKCS#12 file.
    #[error("the file is not a PKCS#12 (PFX/P12) file")]
    NotPkcs12,
    /// The password does not open it.
    #[error("the password does not open the PFX file")]
    WrongPassword,
    /// No private key with a certificate inside.
    #[error("the PFX file holds no private key with its certificate")]
    NoKey,
    /// Opening it would take more key-derivation work than a PFX may ask for (the message names
    /// the limit).
    #[error("the PFX file asks for too much key-derivation work: {0}")]
    TooMuchWork(String),
    /// Every slot for opening PFX files is taken, and so is the queue: try again shortly.
    #[error("too many certificates are being opened at once; try again in a few seconds")]
    Busy,
    /// Something this reader cannot handle (the reason names it).
    #[error("the PFX file cannot be read: {0}")]
    Unsupported(String),
}

/// Opens uploaded PFX files (the adapter is in `infrastructure`; legacy RC2/3DES files too).
pub trait PfxReader: Send + Sync {
    /// Opens `pfx` with `password`, reading the certificate's facts at the same time.
    fn open(&self, pfx: &[u8], password: &str) -> Result<OpenedPfx, PfxError>;
}

/// The small pool PFX files are opened in: `workers` at once (each on a blocking thread), up
/// to `queue` more waiting, and the rest refused at once ([`PfxError::Busy`], 429). A request
/// dropped while it waits leaves the queue and opens nothing; one dropped while its file is being
/// opened keeps its worker until the (bounded) work ends, so the pool really bounds the CPU.
pub struct PfxSlots {
    reader: Arc<dyn PfxReader>,
    running: Arc<tokio::sync::Semaphore>,
    admitted: Arc<tokio::sync::Semaphore>,
}

impl std::fmt::Debug for PfxSlots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PfxSlots")
            .field("running", &self.running.available_permits())
            .finish_non_exhaustive()
    }
}

impl PfxSlots {
    /// Files opened by `reader`, `workers` at once (at least one), `queue` more waiting.
    pub fn new(reader: Arc<dyn PfxReader>, workers: usize, queue: usize) -> Self {
        let workers = workers.max(1);
        Self {
            reader,
            running: Arc::new(tokio::sync::Semaphore::new(workers)),
            admitted: Arc::new(tokio::sync::Semaphore::new(workers + queue)),
        }
    }

    /// Opens `pfx` with `reader` in the pool.
    pub async fn open(&self, pfx: Vec<u8>, password: Zeroizing<String>) -> Result<OpenedPfx, PfxError> {
        let reader = self.reader.clone();
        /// Marks the work abandoned when the request's future is dropped before it ends.
        struct Abandon(Option<Arc<std::sync::atomic::AtomicBool>>);
        impl Drop for Abandon {
            fn drop(&mut self) {
                if let Some(flag) = &self.0 {
                    flag.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            }
        }
        let _admitted = self
            .admitted
            .clone()
            .try_acquire_owned()
            .map_err(|_| PfxError::Busy)?;
        let running = self
            .running
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| PfxError::Busy)?;
        let abandoned = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut guard = Abandon(Some(abandoned.clone()));
        let opened = tokio::task::spawn_blocking(move || {
            let _running = running;
            if abandoned.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(PfxError::Unsupported("the upload was abandoned".into()));
            }
            reader.open(&pfx, &password)
        })
        .await
        .map_err(|_| PfxError::Unsupported("the reader stopped".into()))?;
        guard.0 = None;
        opened
    }
}

/// Sealed secrets of every tenant.
#[derive(Clone)]
pub struct Vault {
    store: SharedStore,
    sealer: Arc<dyn Sealer>,
}

fn aad(tenant: TenantId, id: Uuid, kind: &str) -> Vec<u8> {
    format!("kuatia-secret:v1:{tenant}:{id}:{kind}").into_bytes()
}

impl Vault {
    /// A vault over `store`'s `sealed_secrets` table.
    pub fn new(store: SharedStore, sealer: Arc<dyn Sealer>) -> Self {
        Self { store, sealer }
    }

    /// Seals and stores a secret of `kind` (`certificate`, `csc`, `client_secret`, `api_key`);
    /// returns its id.
    pub async fn put(&self, tenant: TenantId, kind: &str, plaintext: &[u8]) -> Result<Uuid, VaultError> {
        use base64::Engine;
        let id = Uuid::now_v7();
        let sealed = self.sealer.seal(&aad(tenant, id, kind), plaintext);
        self.store
            .execute(
                "INSERT INTO sealed_secrets (id, tenant_id, kind, key_id, sealed, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    SqlValue::Uuid(id),
                    SqlValue::Uuid(tenant.as_uuid()),
                    SqlValue::Text(kind.to_owned()),
                    SqlValue::Text(self.sealer.key_id().to_owned()),
                    SqlValue::Text(base64::engine::general_purpose::STANDARD.encode(sealed)),
                    SqlValue::Timestamp(Utc::now()),
                ],
            )
            .await?;
        Ok(id)
    }

    /// Opens a tenant's secret.
    pub async fn get(&self, tenant: TenantId, id: Uuid) -> Result<Zeroizing<Vec<u8>>, VaultError> {
        use base64::Engine;
        let rows = self
            .store
            .query(
                "SELECT kind, sealed, key_id FROM sealed_secrets WHERE tenant_id = $1 AND id = $2",
                &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Uuid(id)],
            )
            .await?;
        let row = rows.first().ok_or(VaultError::Missing)?;
        let (Some(kind), Some(sealed), Some(key_id)) = (row[0].as_text(), row[1].as_text(), row[2].as_text())
        else {
            return Err(VaultError::Unsealable);
        };
        let sealed = base64::engine::general_purpose::STANDARD
            .decode(sealed)
            .map_err(|_| VaultError::Unsealable)?;
        self.sealer.open(&key_id, &aad(tenant, id, &kind), &sealed)
    }

    /// Which keys the sealed secrets need and which this instance holds; an error when one is
    /// missing (`/ready` asks at every call: one grouped read of a small table).
    pub async fn check_keys(&self) -> Result<KeyCheck, VaultError> {
        let rows = self
            .store
            .query(
                "SELECT key_id, COUNT(*) FROM sealed_secrets GROUP BY key_id ORDER BY key_id",
                &[],
            )
            .await?;
        let check = KeyCheck {
            current: self.sealer.key_id().to_owned(),
            previous: self.sealer.previous_key_ids(),
            in_use: rows
                .iter()
                .filter_map(|row| Some((row[0].as_text()?, u64::try_from(row[1].as_i64()?).unwrap_or(0))))
                .collect(),
        };
        if check.missing().is_empty() {
            Ok(check)
        } else {
            Err(VaultError::KeysNotHeld(check))
        }
    }

    /// Proves at start that the master key is the one this database's secrets were sealed
    /// with: every key id in use is held, and the canary opens; on the first
    /// start the canary is written. The service refuses to start on an error.
    pub async fn prove(&self) -> Result<KeyCheck, VaultError> {
        use base64::Engine;
        let check = self.check_keys().await?;
        let tenant = TenantId::from_uuid(Uuid::nil());
        let context = aad(tenant, CANARY_ID, CANARY_KIND);
        let rows = self
            .store
            .query(
                "SELECT sealed, key_id FROM sealed_secrets WHERE id = $1",
                &[SqlValue::Uuid(CANARY_ID)],
            )
            .await?;
        match rows.first().map(|row| (row[0].as_text(), row[1].as_text())) {
            Some((Some(sealed), Some(key_id))) => {
                let opened = base64::engine::general_purpose::STANDARD
                    .decode(sealed)
                    .map_err(|_| VaultError::Unsealable)
                    .and_then(|sealed| self.sealer.open(&key_id, &context, &sealed));
                match opened {
                    Ok(text) if text.as_slice() == CANARY_TEXT => Ok(check),
                    Err(VaultError::Store(e)) => Err(VaultError::Store(e)),
                    _ => Err(VaultError::CanaryBroken(key_id)),
                }
            }
            Some(_) => Err(VaultError::CanaryBroken(String::new())),
            None => {
                let sealed = self.sealer.seal(&context, CANARY_TEXT);
                // Two instances starting at once: the second insert does nothing.
                self.store
                    .execute(
                        "INSERT INTO sealed_secrets (id, tenant_id, kind, key_id, sealed, created_at) \
                         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING",
                        &[
                            SqlValue::Uuid(CANARY_ID),
                            SqlValue::Uuid(Uuid::nil()),
                            SqlValue::Text(CANARY_KIND.to_owned()),
                            SqlValue::Text(self.sealer.key_id().to_owned()),
                            SqlValue::Text(base64::engine::general_purpose::STANDARD.encode(sealed)),
                            SqlValue::Timestamp(Utc::now()),
                        ],
                    )
                    .await?;
                self.check_keys().await
            }
        }
    }

    /// Re-seals under the current master key every secret sealed under another one
    /// (`kuatia secrets rotate`), `batch` rows at a time. Each row is replaced only if it still
    /// holds what was read (same `key_id` and bytes), so it is safe beside running instances and
    /// safe to run again after an interruption. Rows that do not open (a key not held, altered
    /// bytes) are counted and left as they are.
    pub async fn rotate(&self, batch: usize) -> Result<Rotation, VaultError> {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD;
        let current = self.sealer.key_id().to_owned();
        let mut report = Rotation::default();
        // Rows that did not open are skipped by id on later pages.
        let mut after = Uuid::nil();
        loop {
            let rows = self
                .store
                .query(
                    "SELECT id, tenant_id, kind, key_id, sealed FROM sealed_secrets                      WHERE key_id <> $1 AND id > $2 ORDER BY id LIMIT $3",
                    &[
                        SqlValue::Text(current.clone()),
                        SqlValue::Uuid(after),
                        SqlValue::Int(i64::try_from(batch.max(1)).unwrap_or(i64::MAX)),
                    ],
                )
                .await?;
            if rows.is_empty() {
                break;
            }
            for row in &rows {
                let (Some(id), Some(tenant), Some(kind), Some(key_id), Some(text)) = (
                    row[0].as_uuid(),
                    row[1].as_uuid(),
                    row[2].as_text(),
                    row[3].as_text(),
                    row[4].as_text(),
                ) else {
                    return Err(VaultError::Store(StoreError::Corrupt(
                        "unreadable sealed_secrets row".into(),
                    )));
                };
                after = id;
                let context = aad(TenantId::from_uuid(tenant), id, &kind);
                let opened = b64
                    .decode(text.as_bytes())
                    .map_err(|_| VaultError::Unsealable)
                    .and_then(|sealed| self.sealer.open(&key_id, &context, &sealed));
                let plaintext = match opened {
                    Ok(p) => p,
                    Err(VaultError::Store(e)) => return Err(VaultError::Store(e)),
                    Err(e) => {
                        report.failed.push((id, key_id.clone(), e.to_string()));
                        continue;
                    }
                };
                let resealed = b64.encode(self.sealer.seal(&context, &plaintext));
                let changed = self
                    .store
                    .execute(
                        "UPDATE sealed_secrets SET sealed = $1, key_id = $2                          WHERE id = $3 AND key_id = $4 AND sealed = $5",
                        &[
                            SqlValue::Text(resealed),
                            SqlValue::Text(current.clone()),
                            SqlValue::Uuid(id),
                            SqlValue::Text(key_id.clone()),
                            SqlValue::Text(text.clone()),
                        ],
                    )
                    .await?;
                if changed == 1 {
                    *report.rotated.entry(key_id).or_default() += 1;
                }
            }
        }
        Ok(report)
    }
}

/// What [`Vault::rotate`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Rotation {
    /// Secrets re-sealed under the current key, by the id of the key they were under.
    pub rotated: std::collections::BTreeMap<String, u64>,
    /// Secrets left as they were: id, the key they are under, why.
    pub failed: Vec<(Uuid, String, String)>,
}

#[cfg(test)]
mod slot_tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A reader that counts its calls and finishes each only when told to.
    struct Gate {
        calls: AtomicUsize,
        release: Mutex<std::sync::mpsc::Receiver<()>>,
    }

    impl PfxReader for Gate {
        fn open(&self, _: &[u8], _: &str) -> Result<OpenedPfx, PfxError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let _ = self.release.lock().expect("lock").recv();
            Err(PfxError::NoKey)
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn uploads_beyond_the_workers_and_the_queue_are_refused_and_abandoned_ones_open_nothing() {
        let (tx, rx) = std::sync::mpsc::channel();
        let gate = Arc::new(Gate {
            calls: AtomicUsize::new(0),
            release: Mutex::new(rx),
        });
        let slots = Arc::new(PfxSlots::new(gate.clone(), 1, 1));
        let open = |slots: Arc<PfxSlots>| {
            tokio::spawn(async move { slots.open(vec![1], Zeroizing::new("p".into())).await })
        };
        let first = open(slots.clone());
        while gate.calls.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        // One runs, one waits, the third is refused at once.
        let queued = open(slots.clone());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let refused = slots.open(vec![1], Zeroizing::new("p".into())).await;
        assert!(matches!(refused, Err(PfxError::Busy)), "{refused:?}");
        // The waiting request is dropped: it leaves the queue, and its file is never opened.
        queued.abort();
        let _ = queued.await;
        let next = open(slots.clone());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        tx.send(()).expect("release the first");
        assert!(matches!(first.await.expect("join"), Err(PfxError::NoKey)));
        tx.send(()).expect("release the next");
        assert!(matches!(next.await.expect("join"), Err(PfxError::NoKey)));
        assert_eq!(
            gate.calls.load(Ordering::SeqCst),
            2,
            "the abandoned upload opened nothing"
        );
    }
}
