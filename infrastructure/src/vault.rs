//! The certificate vault's adapters: AES-256-GCM sealing under `KUATIA_MASTER_KEY`, and the
//! PKCS#12 reader for uploaded certificates.
//!
//! Sealed format: `v1` byte (0x01) ‖ 96-bit random nonce ‖ ciphertext ‖ 128-bit tag. Nonces are
//! random per secret; with at most millions of secrets under one key the collision probability
//! stays far below 2⁻³².
//!
//! PFX files are opened with p12-keystore (pure Rust; legacy RC2/3DES PBES1 files too, which
//! OpenSSL 3 refuses without its legacy provider). OpenSSL then checks that the key belongs to
//! the certificate and re-encodes both as PEM; x509-parser reads the facts.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use chrono::{DateTime, Utc};
use kuatia_application::vault::{OpenedPfx, PfxError, PfxReader, Sealer, VaultError};
use kuatia_domain::certificate::{CertificateFacts, ChainFacts};
use rand::Rng;
use sha2::{Digest, Sha256};
use std::path::Path;
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate, X509Name};
use zeroize::Zeroizing;

const VERSION: u8 = 1;
const NONCE_LEN: usize = 12;

/// A master key that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum MasterKeyError {
    /// Not base64 of 32 bytes.
    #[error("KUATIA_MASTER_KEY must be the base64 of 32 random bytes (for example: openssl rand -base64 32)")]
    Malformed,
    /// The key file could not be read or written.
    #[error("the master key file {path}: {source}")]
    File {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// AES-256-GCM under the master key; during a rotation, earlier keys too.
///
/// New secrets are sealed under the current key only. A secret opens under the key its row names
/// (`key_id`): the current one, or one of the earlier keys given with [`with_previous`]
/// (`KUATIA_MASTER_KEY_PREVIOUS`), so instances keep working while `kuatia secrets rotate`
/// re-seals the old rows.
///
/// [`with_previous`]: AesGcmSealer::with_previous
pub struct AesGcmSealer {
    cipher: Aes256Gcm,
    key_id: String,
    /// Earlier keys by id.
    previous: Vec<(String, Aes256Gcm)>,
}

/// The cipher and public id of a base64 key of 32 bytes.
fn key_of(text: &str) -> Result<(Aes256Gcm, String), MasterKeyError> {
    let bytes = Zeroizing::new(
        base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|_| MasterKeyError::Malformed)?,
    );
    if bytes.len() != 32 {
        return Err(MasterKeyError::Malformed);
    }
    let cipher = Aes256Gcm::new_from_slice(&bytes).map_err(|_| MasterKeyError::Malformed)?;
    // A public name for the key: a hash of a hash, so it reveals nothing usable.
    let key_id = hex::encode(&Sha256::digest(Sha256::digest(bytes.as_slice()))[..8]);
    Ok((cipher, key_id))
}

impl AesGcmSealer {
    /// A sealer from `KUATIA_MASTER_KEY` (base64 of 32 bytes).
    pub fn from_base64(text: &str) -> Result<Self, MasterKeyError> {
        let (cipher, key_id) = key_of(text)?;
        Ok(Self {
            cipher,
            key_id,
            previous: Vec::new(),
        })
    }

    /// Also opens secrets sealed under these earlier keys (`KUATIA_MASTER_KEY_PREVIOUS`: base64
    /// keys separated by commas; blanks ignored). The current key among them is ignored.
    pub fn with_previous(mut self, list: &str) -> Result<Self, MasterKeyError> {
        for text in list.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (cipher, key_id) = key_of(text)?;
            if key_id != self.key_id && !self.previous.iter().any(|(id, _)| *id == key_id) {
                self.previous.push((key_id, cipher));
            }
        }
        Ok(self)
    }

    /// The key in `dir/master.key`, when the file is there (demo mode's, read by the commands
    /// that must never create one).
    pub fn load(dir: &Path) -> Result<Option<Self>, MasterKeyError> {
        let path = dir.join("master.key");
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(Self::from_base64(&text)?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(MasterKeyError::File {
                path: path.display().to_string(),
                source,
            }),
        }
    }

    /// Demo mode: the key in `dir/master.key`, created (mode 0600) on first use. Returns the
    /// sealer and whether the key was created now.
    pub fn load_or_create(dir: &Path) -> Result<(Self, bool), MasterKeyError> {
        let path = dir.join("master.key");
        let file_error = |source| MasterKeyError::File {
            path: path.display().to_string(),
            source,
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok((Self::from_base64(&text)?, false)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                crate::create_private_dir_all(dir).map_err(file_error)?;
                let mut key = Zeroizing::new([0u8; 32]);
                rand::rng().fill(&mut key[..]);
                let text = Zeroizing::new(base64::engine::general_purpose::STANDARD.encode(key.as_slice()));
                write_private(&path, text.as_bytes()).map_err(file_error)?;
                Ok((Self::from_base64(&text)?, true))
            }
            Err(e) => Err(file_error(e)),
        }
    }
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::write(path, bytes)
}

impl Sealer for AesGcmSealer {
    fn key_id(&self) -> &str {
        &self.key_id
    }

    /// The ids of the earlier keys this sealer can open with.
    fn previous_key_ids(&self) -> Vec<String> {
        self.previous.iter().map(|(id, _)| id.clone()).collect()
    }

    fn seal(&self, aad: &[u8], plaintext: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rng().fill(&mut nonce[..]);
        let ciphertext = self
            .cipher
            .encrypt(&Nonce::from(nonce), Payload { msg: plaintext, aad })
            .unwrap_or_else(|_| unreachable!("AES-GCM encrypts any message under 64 GiB"));
        let mut out = Vec::with_capacity(1 + NONCE_LEN + ciphertext.len());
        out.push(VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ciphertext);
        out
    }

    fn open(&self, key_id: &str, aad: &[u8], sealed: &[u8]) -> Result<Zeroizing<Vec<u8>>, VaultError> {
        let cipher = if key_id == self.key_id {
            &self.cipher
        } else {
            match self.previous.iter().find(|(id, _)| id == key_id) {
                Some((_, cipher)) => cipher,
                None => return Err(VaultError::KeyUnavailable(key_id.to_owned())),
            }
        };
        let [VERSION, rest @ ..] = sealed else {
            return Err(VaultError::Unsealable);
        };
        if rest.len() < NONCE_LEN + 16 {
            return Err(VaultError::Unsealable);
        }
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        let nonce: [u8; NONCE_LEN] = nonce.try_into().map_err(|_| VaultError::Unsealable)?;
        cipher
            .decrypt(&Nonce::from(nonce), Payload { msg: ciphertext, aad })
            .map(Zeroizing::new)
            .map_err(|_| VaultError::Unsealable)
    }
}

/// Opens PFX files with p12-keystore, checks them with OpenSSL, reads them with x509-parser.
#[derive(Debug, Default, Clone, Copy)]
pub struct P12Reader;

fn unsupported(what: &str) -> impl Fn(openssl::error::ErrorStack) -> PfxError + '_ {
    move |_| PfxError::Unsupported(what.to_owned())
}

/// The RUC in a name's serialNumber (`RUC80069563-1` → `80069563-1`).
fn ruc_in(name: &X509Name<'_>) -> Option<String> {
    name.iter_by_oid(&x509_parser::oid_registry::OID_X509_SERIALNUMBER)
        .filter_map(|attr| attr.as_str().ok())
        .find_map(|value| {
            let value = value.trim();
            let number = value.strip_prefix("RUC").or_else(|| value.strip_prefix("ruc"))?;
            Some(number.trim().to_owned())
        })
}

fn utc(seconds: i64) -> Result<DateTime<Utc>, PfxError> {
    DateTime::from_timestamp(seconds, 0)
        .ok_or_else(|| PfxError::Unsupported("a validity date out of range".into()))
}

impl PfxReader for P12Reader {
    fn open(&self, pfx: &[u8], password: &str) -> Result<OpenedPfx, PfxError> {
        // Bound the key-derivation work before doing any of it.
        crate::pfx_work::check(pfx, password, crate::pfx_work::Limits::default()).map_err(|e| match e {
            crate::pfx_work::WorkError::Malformed => PfxError::NotPkcs12,
            crate::pfx_work::WorkError::TooMuch(why) => PfxError::TooMuchWork(why),
        })?;
        let store =
            p12_keystore::KeyStore::from_pkcs12(pfx, password, p12_keystore::Pkcs12ImportPolicy::Relaxed)
                .map_err(|e| match e {
                    p12_keystore::error::Error::MacError(_) => PfxError::WrongPassword,
                    p12_keystore::error::Error::UnpadError
                    | p12_keystore::error::Error::InvalidPrivateKey => PfxError::WrongPassword,
                    p12_keystore::error::Error::UnsupportedEncryptionScheme
                    | p12_keystore::error::Error::UnsupportedMacAlgorithm => PfxError::Unsupported(
                        "its encryption scheme (MD5-based schemes are not supported)".into(),
                    ),
                    _ => PfxError::NotPkcs12,
                })?;
        let (_, chain) = store.private_key_chain().ok_or(PfxError::NoKey)?;
        let leaf_der = chain.certs().first().ok_or(PfxError::NoKey)?.as_der();

        let key = openssl::pkey::PKey::private_key_from_der(chain.key().as_der())
            .map_err(unsupported("its private key"))?;
        let leaf = openssl::x509::X509::from_der(leaf_der).map_err(unsupported("its certificate"))?;
        let leaf_key = leaf
            .public_key()
            .map_err(unsupported("its certificate's public key"))?;
        let key_algorithm = match key.id() {
            openssl::pkey::Id::RSA => "RSA",
            openssl::pkey::Id::EC => "EC",
            openssl::pkey::Id::ED25519 => "Ed25519",
            _ => "other",
        };

        let mut x509s = Vec::with_capacity(chain.certs().len());
        for cert in chain.certs() {
            x509s.push(
                openssl::x509::X509::from_der(cert.as_der()).map_err(unsupported("a chain certificate"))?,
            );
        }
        let chain_facts = examine_chain(&x509s);

        let mut pem = Zeroizing::new(String::new());
        let key_pem = Zeroizing::new(
            key.private_key_to_pem_pkcs8()
                .map_err(unsupported("its private key"))?,
        );
        pem.push_str(std::str::from_utf8(&key_pem).map_err(|_| PfxError::Unsupported("PEM".into()))?);
        for cert in chain.certs() {
            let x509 =
                openssl::x509::X509::from_der(cert.as_der()).map_err(unsupported("a chain certificate"))?;
            let cert_pem = x509.to_pem().map_err(unsupported("a chain certificate"))?;
            pem.push_str(&String::from_utf8_lossy(&cert_pem));
        }

        let (_, cert) = X509Certificate::from_der(leaf_der)
            .map_err(|_| PfxError::Unsupported("its certificate".into()))?;
        let san_ruc = cert.subject_alternative_name().ok().flatten().and_then(|san| {
            san.value.general_names.iter().find_map(|name| match name {
                GeneralName::DirectoryName(dn) => ruc_in(dn),
                _ => None,
            })
        });
        let client_auth = cert
            .extended_key_usage()
            .ok()
            .flatten()
            .is_some_and(|eku| eku.value.client_auth);
        let facts = CertificateFacts {
            subject: cert.subject().to_string(),
            issuer: cert.issuer().to_string(),
            serial_number: hex::encode(cert.raw_serial()),
            ruc: ruc_in(cert.subject()).or(san_ruc),
            not_before: utc(cert.validity().not_before.timestamp())?,
            not_after: utc(cert.validity().not_after.timestamp())?,
            fingerprint_sha256: hex::encode(Sha256::digest(leaf_der)),
            key_algorithm: key_algorithm.to_owned(),
            key_bits: key.bits(),
            key_matches: key.public_eq(&leaf_key),
            client_auth,
            chain_length: u32::try_from(chain.certs().len()).unwrap_or(u32::MAX),
            chain: Some(chain_facts),
        };
        Ok(OpenedPfx { facts, pem })
    }
}

/// A certificate's subject as the facts write names (RFC 4514, as `x509-parser` renders it).
fn subject_of(cert: &openssl::x509::X509Ref) -> String {
    cert.to_der()
        .ok()
        .and_then(|der| {
            X509Certificate::from_der(&der)
                .ok()
                .map(|(_, c)| c.subject().to_string())
        })
        .unwrap_or_default()
}

/// How `certs` (the holder's first, then whatever else the file carries, in any order) chain up:
/// from the holder's, each step to the file's certificate whose subject is the issuer's name,
/// its signature verified, until a self-signed one (a root) or one whose issuer the file does not
/// carry. (Names, not `X509_check_issued`: that also asks for the keyCertSign usage, which a
/// self-signed signing certificate does not have.)
fn examine_chain(certs: &[openssl::x509::X509]) -> ChainFacts {
    use openssl::x509::X509Ref;
    let name = |n: &openssl::x509::X509NameRef| n.to_der().unwrap_or_default();
    let verifies =
        |cert: &X509Ref, by: &X509Ref| by.public_key().and_then(|key| cert.verify(&key)).unwrap_or(false);
    let self_issued = |cert: &X509Ref| name(cert.subject_name()) == name(cert.issuer_name());
    let mut facts = ChainFacts {
        self_signed: false,
        issuers: Vec::new(),
        reaches_root: false,
        broken_at: None,
    };
    let Some(holder) = certs.first() else {
        return facts;
    };
    if self_issued(holder) {
        if verifies(holder, holder) {
            facts.self_signed = true;
            facts.reaches_root = true;
        } else {
            facts.broken_at = Some(subject_of(holder));
        }
        return facts;
    }
    let mut current: &X509Ref = holder;
    // At most one step per certificate: a loop in the file ends the walk.
    for _ in 1..certs.len() {
        let wanted = name(current.issuer_name());
        let Some(issuer) = certs
            .iter()
            .map(|c| -> &X509Ref { c })
            .find(|c| !std::ptr::eq(*c, current) && name(c.subject_name()) == wanted)
        else {
            return facts;
        };
        if !verifies(current, issuer) {
            facts.broken_at = Some(subject_of(current));
            return facts;
        }
        facts.issuers.push(subject_of(issuer));
        if self_issued(issuer) {
            facts.reaches_root = verifies(issuer, issuer);
            if !facts.reaches_root {
                facts.broken_at = Some(subject_of(issuer));
            }
            return facts;
        }
        current = issuer;
    }
    facts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealer() -> AesGcmSealer {
        AesGcmSealer::from_base64(&base64::engine::general_purpose::STANDARD.encode([7u8; 32])).unwrap()
    }

    #[test]
    fn sealed_secrets_open_only_with_their_key_and_context() {
        let s = sealer();
        let sealed = s.seal(b"tenant:a", b"ABCD0000000000000000000000000000");
        assert!(!sealed.windows(4).any(|w| w == b"ABCD"));
        assert_eq!(
            s.open(s.key_id(), b"tenant:a", &sealed).unwrap().as_slice(),
            b"ABCD0000000000000000000000000000"
        );
        assert!(matches!(
            s.open(s.key_id(), b"tenant:b", &sealed),
            Err(VaultError::Unsealable)
        ));
        let other =
            AesGcmSealer::from_base64(&base64::engine::general_purpose::STANDARD.encode([8u8; 32])).unwrap();
        assert!(matches!(
            other.open(s.key_id(), b"tenant:a", &sealed),
            Err(VaultError::KeyUnavailable(id)) if id == s.key_id()
        ));
        // Under another key's name, the bytes still do not open.
        assert!(matches!(
            other.open(other.key_id(), b"tenant:a", &sealed),
            Err(VaultError::Unsealable)
        ));
        let mut tampered = sealed.clone();
        let last = tampered.len() - 1;
        tampered[last] ^= 1;
        assert!(matches!(
            s.open(s.key_id(), b"tenant:a", &tampered),
            Err(VaultError::Unsealable)
        ));
        assert_ne!(s.seal(b"x", b"same"), s.seal(b"x", b"same"), "nonces differ");
    }

    #[test]
    fn during_a_rotation_secrets_of_an_earlier_key_open_and_new_ones_seal_under_the_current_key() {
        let b64 = |n: u8| base64::engine::general_purpose::STANDARD.encode([n; 32]);
        let old = sealer();
        let sealed_before = old.seal(b"ctx", b"csc");
        let new = AesGcmSealer::from_base64(&b64(9))
            .unwrap()
            .with_previous(&format!(" {} , ,{}", b64(7), b64(9)))
            .unwrap();
        assert_eq!(
            new.previous_key_ids(),
            vec![old.key_id()],
            "the current key is not listed twice"
        );
        assert_eq!(
            new.open(old.key_id(), b"ctx", &sealed_before).unwrap().as_slice(),
            b"csc"
        );
        let sealed_now = new.seal(b"ctx", b"csc");
        assert!(matches!(
            old.open(old.key_id(), b"ctx", &sealed_now),
            Err(VaultError::Unsealable)
        ));
        assert_eq!(
            new.open(new.key_id(), b"ctx", &sealed_now).unwrap().as_slice(),
            b"csc"
        );
        assert!(
            AesGcmSealer::from_base64(&b64(9))
                .unwrap()
                .with_previous("short")
                .is_err()
        );
    }

    #[test]
    fn a_master_key_is_base64_of_32_bytes() {
        assert!(AesGcmSealer::from_base64("c2hvcnQ=").is_err());
        assert!(AesGcmSealer::from_base64("not base64!").is_err());
        assert_eq!(sealer().key_id().len(), 16);
    }

    #[test]
    fn demo_mode_creates_the_key_once_and_reads_it_back() {
        let dir = std::env::temp_dir().join(format!("kuatia-key-{}", uuid::Uuid::now_v7()));
        let (first, created) = AesGcmSealer::load_or_create(&dir).unwrap();
        assert!(created);
        let (second, created) = AesGcmSealer::load_or_create(&dir).unwrap();
        assert!(!created);
        let sealed = first.seal(b"", b"secret");
        assert_eq!(
            second.open(first.key_id(), b"", &sealed).unwrap().as_slice(),
            b"secret"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join("master.key"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
