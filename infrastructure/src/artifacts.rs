//! Artifacts in a local directory: `<root>/<first two hex digits>/<sha256>`, written to a
//! temporary file, synced and renamed into place, so a reader never sees half a file and a crash
//! leaves at most a stray temporary file. One directory serves one instance (or several on a
//! shared volume); an S3-compatible store comes with the printables work.

use async_trait::async_trait;
use kuatia_application::artifacts::{ArtifactError, ArtifactStore, sha256_hex};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A content-addressed directory.
#[derive(Debug, Clone)]
pub struct LocalArtifacts {
    root: PathBuf,
}

impl LocalArtifacts {
    /// Artifacts under `root` (created when missing).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    fn path(&self, sha256: &str) -> Option<PathBuf> {
        let valid = sha256.len() == 64
            && sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        valid.then(|| self.root.join(&sha256[..2]).join(sha256))
    }
}

fn io(e: std::io::Error) -> ArtifactError {
    ArtifactError::Io(e.to_string())
}

fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if path.exists() {
        return Ok(());
    }
    let dir = path.parent().unwrap_or(path);
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{}.tmp", uuid::Uuid::now_v7().simple()));
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path)?;
    // The rename is durable once the directory is.
    std::fs::File::open(dir)?.sync_all()
}

#[async_trait]
impl ArtifactStore for LocalArtifacts {
    async fn put(&self, bytes: &[u8]) -> Result<String, ArtifactError> {
        let sha = sha256_hex(bytes);
        let path = self
            .path(&sha)
            .ok_or_else(|| ArtifactError::Io("bad hash".into()))?;
        let bytes = bytes.to_vec();
        tokio::task::spawn_blocking(move || write_new(&path, &bytes))
            .await
            .map_err(|e| ArtifactError::Io(e.to_string()))?
            .map_err(io)?;
        Ok(sha)
    }

    async fn get(&self, sha256: &str) -> Result<Option<Vec<u8>>, ArtifactError> {
        let Some(path) = self.path(sha256) else {
            return Ok(None);
        };
        let bytes = match tokio::fs::read(&path).await {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(e)),
        };
        if sha256_hex(&bytes) != sha256 {
            return Err(ArtifactError::Corrupt(sha256.to_owned()));
        }
        Ok(Some(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bytes_are_stored_once_under_their_hash_and_a_corrupt_file_is_refused() {
        let root = std::env::temp_dir().join(format!("kuatia-artifacts-{}", uuid::Uuid::now_v7()));
        let store = LocalArtifacts::new(&root);
        let sha = store.put(b"<rDE/>").await.expect("put");
        assert_eq!(sha, sha256_hex(b"<rDE/>"));
        assert_eq!(store.put(b"<rDE/>").await.expect("again"), sha);
        assert_eq!(
            store.get(&sha).await.expect("get").as_deref(),
            Some(&b"<rDE/>"[..])
        );
        assert_eq!(store.get(&"0".repeat(64)).await.expect("absent"), None);
        assert_eq!(store.get("../etc/passwd").await.expect("not a hash"), None);
        std::fs::write(root.join(&sha[..2]).join(&sha), b"tampered").expect("tamper");
        assert!(matches!(store.get(&sha).await, Err(ArtifactError::Corrupt(_))));
        let _ = std::fs::remove_dir_all(root);
    }
}
