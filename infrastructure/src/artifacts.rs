//! The artifact store on `object_store`: a local directory by default, an S3-compatible bucket
//! by configuration (`KUATIA_ARTIFACTS_URL=s3://bucket/prefix`, docs/configuration.md).
//!
//! Objects are named by their SHA-256, `<prefix>/<first two hex digits>/<sha256>`, which in a
//! local directory is the layout kuatia has always written (`<data_dir>/artifacts/ab/ab12…`), so
//! existing data is read as it is, with no migration. Content addressing makes every write
//! idempotent, and an object is never overwritten: a put first asks whether the name exists (a
//! no-op when it does), then writes with `PutMode::Create`, so two writers racing on the same
//! bytes leave one object and neither fails. Locally the write is staged in a temporary file,
//! fsynced and linked into place (object_store's `with_fsync`), so a reader never sees half a
//! file and a put returns only once the bytes are durable. Reads check the bytes against their
//! name: a corrupt object is an error, never served.
//!
//! Rejected: keeping an index of artifacts in the store. The document's events already record
//! which hash each artifact has (`ArtifactRecorded`), so the store needs no listing.

use async_trait::async_trait;
use kuatia_application::artifacts::{ArtifactError, ArtifactStore, sha256_hex};
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use std::path::PathBuf;
use std::sync::Arc;

/// Where artifacts live, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArtifactLocation {
    /// A local directory.
    Local(PathBuf),
    /// An S3-compatible bucket.
    S3(S3Settings),
}

/// An S3-compatible bucket (AWS S3, MinIO, Ceph, R2, …).
#[derive(Clone, PartialEq, Eq)]
pub struct S3Settings {
    /// Bucket name.
    pub bucket: String,
    /// Key prefix inside the bucket (no leading or trailing slash), possibly empty.
    pub prefix: String,
    /// Endpoint URL for S3-compatible servers (`http://127.0.0.1:9000`); `None` for AWS.
    pub endpoint: Option<String>,
    /// Region (`us-east-1` unless told).
    pub region: String,
    /// Access key id; `None`: taken from the environment (`AWS_ACCESS_KEY_ID`, instance role).
    pub access_key_id: Option<String>,
    /// Secret access key.
    pub secret_access_key: Option<String>,
    /// Whether plain `http://` endpoints are allowed.
    pub allow_http: bool,
}

impl std::fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Settings")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "[redacted]"),
            )
            .field("allow_http", &self.allow_http)
            .finish()
    }
}

impl ArtifactLocation {
    /// Reads `KUATIA_ARTIFACTS_URL`: unset or empty → `default_dir`; `file:///abs/path` or a plain
    /// path → that directory; `s3://bucket[/prefix]` → S3 with `s3` for the rest.
    pub fn parse(url: Option<&str>, default_dir: PathBuf, s3: S3Settings) -> Result<Self, String> {
        let url = url.map(str::trim).unwrap_or_default();
        if url.is_empty() {
            return Ok(Self::Local(default_dir));
        }
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err("KUATIA_ARTIFACTS_URL: s3://bucket[/prefix] names no bucket".into());
            }
            return Ok(Self::S3(S3Settings {
                bucket: bucket.to_owned(),
                prefix: prefix.trim_matches('/').to_owned(),
                ..s3
            }));
        }
        if let Some(path) = url.strip_prefix("file://") {
            return Ok(Self::Local(PathBuf::from(path)));
        }
        if url.contains("://") {
            return Err(format!(
                "KUATIA_ARTIFACTS_URL: {url:?} is neither a directory, file://… nor s3://…"
            ));
        }
        Ok(Self::Local(PathBuf::from(url)))
    }
}

/// Content-addressed artifacts in any `object_store` backend.
#[derive(Debug, Clone)]
pub struct ObjectArtifacts {
    /// The backend, or why it could not be opened (reported by every call).
    store: Result<Arc<dyn ObjectStore>, String>,
    /// Key prefix (S3), empty for a local directory (its root is the directory).
    prefix: String,
}

/// The local-directory store under its historical name.
pub type LocalArtifacts = ObjectArtifacts;

fn valid_hash(sha256: &str) -> bool {
    sha256.len() == 64
        && sha256
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn io(e: impl std::fmt::Display) -> ArtifactError {
    ArtifactError::Io(e.to_string())
}

impl ObjectArtifacts {
    /// Artifacts in the local directory `root` (created when missing). Never fails: a directory
    /// that cannot be opened makes every call fail with the reason.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        let store = crate::create_private_dir_all(&root)
            .map_err(|e| format!("creating {}: {e}", root.display()))
            .and_then(|()| {
                LocalFileSystem::new_with_prefix(&root)
                    .map_err(|e| format!("opening {}: {e}", root.display()))
            })
            .map(|fs| Arc::new(fs.with_fsync(true)) as Arc<dyn ObjectStore>);
        Self {
            store,
            prefix: String::new(),
        }
    }

    /// Artifacts in an S3-compatible bucket.
    pub fn s3(settings: &S3Settings) -> Result<Self, ArtifactError> {
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(&settings.bucket)
            .with_region(&settings.region)
            .with_allow_http(settings.allow_http);
        if let Some(endpoint) = &settings.endpoint {
            // S3-compatible servers are addressed by path (`endpoint/bucket/key`).
            builder = builder
                .with_endpoint(endpoint)
                .with_virtual_hosted_style_request(false);
        }
        if let Some(id) = &settings.access_key_id {
            builder = builder.with_access_key_id(id);
        }
        if let Some(secret) = &settings.secret_access_key {
            builder = builder.with_secret_access_key(secret);
        }
        let store = builder.build().map_err(io)?;
        Ok(Self {
            store: Ok(Arc::new(store)),
            prefix: settings.prefix.clone(),
        })
    }

    /// The store a configured location names.
    pub fn open(location: &ArtifactLocation) -> Result<Self, ArtifactError> {
        match location {
            ArtifactLocation::Local(dir) => {
                let store = Self::new(dir);
                if let Err(e) = &store.store {
                    return Err(ArtifactError::Io(e.clone()));
                }
                Ok(store)
            }
            ArtifactLocation::S3(settings) => Self::s3(settings),
        }
    }

    fn backend(&self) -> Result<&Arc<dyn ObjectStore>, ArtifactError> {
        self.store.as_ref().map_err(|e| ArtifactError::Io(e.clone()))
    }

    fn key(&self, sha256: &str) -> ObjectPath {
        let name = format!("{}/{sha256}", &sha256[..2]);
        if self.prefix.is_empty() {
            ObjectPath::from(name)
        } else {
            ObjectPath::from(format!("{}/{name}", self.prefix))
        }
    }
}

#[async_trait]
impl ArtifactStore for ObjectArtifacts {
    async fn put(&self, bytes: &[u8]) -> Result<String, ArtifactError> {
        let store = self.backend()?;
        let sha = sha256_hex(bytes);
        let key = self.key(&sha);
        match store.head(&key).await {
            // Content-addressed: the same name holds the same bytes already.
            Ok(_) => return Ok(sha),
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(io(e)),
        }
        let payload = PutPayload::from(bytes.to_vec());
        let create = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        match store.put_opts(&key, payload.clone(), create).await {
            Ok(_)
            | Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
                Ok(sha)
            }
            // A server without conditional writes: the name was absent a moment ago, and a
            // racing writer can only have written these very bytes.
            Err(object_store::Error::NotImplemented { .. } | object_store::Error::NotSupported { .. }) => {
                store.put(&key, payload).await.map_err(io)?;
                Ok(sha)
            }
            Err(e) => Err(io(e)),
        }
    }

    async fn get(&self, sha256: &str) -> Result<Option<Vec<u8>>, ArtifactError> {
        if !valid_hash(sha256) {
            return Ok(None);
        }
        let store = self.backend()?;
        let bytes = match store.get(&self.key(sha256)).await {
            Ok(found) => found.bytes().await.map_err(io)?,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(io(e)),
        };
        if sha256_hex(&bytes) != sha256 {
            return Err(ArtifactError::Corrupt(sha256.to_owned()));
        }
        Ok(Some(bytes.to_vec()))
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
        // The historical layout: <root>/<aa>/<sha>.
        assert_eq!(
            std::fs::read(root.join(&sha[..2]).join(&sha)).expect("on disk"),
            b"<rDE/>"
        );
        assert_eq!(store.put(b"<rDE/>").await.expect("again"), sha);
        assert_eq!(
            store.get(&sha).await.expect("get").as_deref(),
            Some(&b"<rDE/>"[..])
        );
        assert_eq!(store.get(&"0".repeat(64)).await.expect("absent"), None);
        assert_eq!(store.get("../etc/passwd").await.expect("not a hash"), None);
        std::fs::write(root.join(&sha[..2]).join(&sha), b"tampered").expect("tamper");
        assert!(matches!(store.get(&sha).await, Err(ArtifactError::Corrupt(_))));
        // Never overwritten: a put of the same hash leaves the (here tampered) object alone.
        assert_eq!(store.put(b"<rDE/>").await.expect("no-op"), sha);
        assert_eq!(
            std::fs::read(root.join(&sha[..2]).join(&sha)).expect("on disk"),
            b"tampered"
        );
        let _ = std::fs::remove_dir_all(root);
    }

    #[tokio::test]
    async fn concurrent_puts_of_the_same_bytes_leave_one_object() {
        let root = std::env::temp_dir().join(format!("kuatia-artifacts-{}", uuid::Uuid::now_v7()));
        let store = LocalArtifacts::new(&root);
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..16 {
            let store = store.clone();
            set.spawn(async move { store.put(b"same bytes").await });
        }
        while let Some(r) = set.join_next().await {
            r.expect("join").expect("put");
        }
        let sha = sha256_hex(b"same bytes");
        let dir: Vec<_> = std::fs::read_dir(root.join(&sha[..2]))
            .expect("dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(dir, vec![std::ffi::OsString::from(&sha)], "no staging files left");
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn the_location_is_a_directory_by_default_or_a_bucket() {
        let s3 = S3Settings {
            bucket: String::new(),
            prefix: String::new(),
            endpoint: Some("http://127.0.0.1:9000".into()),
            region: "us-east-1".into(),
            access_key_id: None,
            secret_access_key: None,
            allow_http: true,
        };
        let dir = PathBuf::from("./data/artifacts");
        assert_eq!(
            ArtifactLocation::parse(None, dir.clone(), s3.clone()),
            Ok(ArtifactLocation::Local(dir.clone()))
        );
        assert_eq!(
            ArtifactLocation::parse(Some("file:///srv/a"), dir.clone(), s3.clone()),
            Ok(ArtifactLocation::Local("/srv/a".into()))
        );
        let Ok(ArtifactLocation::S3(b)) =
            ArtifactLocation::parse(Some("s3://docs/kuatia/"), dir.clone(), s3.clone())
        else {
            panic!("s3")
        };
        assert_eq!((b.bucket.as_str(), b.prefix.as_str()), ("docs", "kuatia"));
        assert!(ArtifactLocation::parse(Some("s3://"), dir.clone(), s3.clone()).is_err());
        assert!(ArtifactLocation::parse(Some("gs://x"), dir, s3).is_err());
    }
}
