//! The artifact port: content-addressed storage of a document's files (signed XML, SIFEN's raw
//! answers, printables). Bytes are stored once under their SHA-256 and never overwritten; the
//! document's events record which hash each artifact has, so the store itself needs no index.

use async_trait::async_trait;
use sha2::{Digest, Sha256};

/// Why the artifact store failed.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// Reading or writing failed.
    #[error("artifact store: {0}")]
    Io(String),
    /// Stored bytes do not hash to their name (corruption).
    #[error("artifact {0} is corrupt: its bytes do not match its hash")]
    Corrupt(String),
}

/// Lower-case hex SHA-256 of `bytes`: an artifact's name.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Where artifacts live.
#[async_trait]
pub trait ArtifactStore: Send + Sync {
    /// Stores `bytes` (a no-op when they are there already) and returns their SHA-256; returns
    /// only once they are durable.
    async fn put(&self, bytes: &[u8]) -> Result<String, ArtifactError>;
    /// The bytes named `sha256`, checked against it; `None` when absent.
    async fn get(&self, sha256: &str) -> Result<Option<Vec<u8>>, ArtifactError>;
}
