//! How much key derivation opening a PFX would cost, measured before any is done for real.
//!
//! A PKCS#12 file names its own work: every MAC, encrypted safe and shrouded key carries its KDF
//! and iteration count (or scrypt cost), and a hostile file can ask for a gigabyte of scrypt
//! memory or thousands of safes of a million PBKDF2 iterations each. [`check`] walks the
//! structure (RFC 7292) and adds up what opening it would take, refusing beyond [`Limits`]
//! before the reader derives a single key. What an encrypted safe holds is visible only once it
//! is decrypted, so the walk decrypts each encrypted safe whose own cost fits (that cost is
//! counted twice: here and in the reader) and goes on inside it.

use cms::cert::x509::spki::AlgorithmIdentifierOwned;
use cms::content_info::ContentInfo;
use cms::encrypted_data::EncryptedData;
use der::asn1::{ObjectIdentifier, OctetString};
use der::{Decode, Encode, Sequence};
use pkcs12::pbe_params::EncryptedPrivateKeyInfo;
use pkcs12::pfx::Pfx;
use pkcs12::safe_bag::SafeContents;

const DATA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.7.1");
const ENCRYPTED_DATA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.7.6");
const PBES2: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.5.13");
const PBE_SHA1_3DES: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.12.1.3");
const PBE_SHA1_RC2_40: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.12.1.6");
const SHROUDED_KEY_BAG: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.12.10.1.2");
const SECRET_BAG: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.12.10.1.5");

/// What one PFX may cost to open. The defaults fit every PFX the Paraguayan CAs and the usual
/// tools write (2 000 to 10 000 iterations, three derivations) with a wide margin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Iterations of one key derivation (PBKDF2, or the PKCS#12 KDF of legacy files and MACs).
    pub iterations_per_derivation: u64,
    /// Iterations of all derivations together (scrypt counts `N × p`).
    pub total_iterations: u64,
    /// Key derivations in one file (the MAC, each encrypted safe, each shrouded key).
    pub derivations: usize,
    /// Memory of one scrypt derivation (`128 × N × r` bytes).
    pub scrypt_memory_bytes: u64,
    /// Safes in the file, and bags in all of them.
    pub safes: usize,
    /// Bags in all safes together.
    pub bags: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            iterations_per_derivation: 600_000,
            total_iterations: 2_000_000,
            derivations: 8,
            scrypt_memory_bytes: 32 << 20,
            safes: 8,
            bags: 64,
        }
    }
}

/// The work a PFX asks for (what [`check`] counted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    /// Key derivations.
    pub derivations: usize,
    /// Their iterations together.
    pub iterations: u64,
    /// Safes.
    pub safes: usize,
    /// Bags.
    pub bags: usize,
}

/// Why a PFX is refused before it is opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkError {
    /// Not the structure of RFC 7292 (the reader would refuse it too).
    #[error("the file is not a PKCS#12 (PFX/P12) file")]
    Malformed,
    /// A limit is exceeded (the message names it).
    #[error("{0}")]
    TooMuch(String),
}

/// A secret bag (RFC 7292 §4.2.5) whose value is an encrypted private key.
#[derive(Sequence)]
struct SecretBag {
    _secret_type: ObjectIdentifier,
    #[asn1(context_specific = "0")]
    value: OctetString,
}

struct Walk<'a> {
    limits: Limits,
    password: &'a str,
    work: Work,
}

fn malformed<E>(_: E) -> WorkError {
    WorkError::Malformed
}

impl Walk<'_> {
    fn derivation(&mut self, iterations: u64, what: &str) -> Result<(), WorkError> {
        let l = self.limits;
        if iterations > l.iterations_per_derivation {
            return Err(WorkError::TooMuch(format!(
                "{what} asks for {iterations} key-derivation iterations; at most {} are accepted",
                l.iterations_per_derivation
            )));
        }
        self.work.derivations += 1;
        self.work.iterations = self.work.iterations.saturating_add(iterations);
        if self.work.derivations > l.derivations {
            return Err(WorkError::TooMuch(format!(
                "the file asks for more than {} key derivations",
                l.derivations
            )));
        }
        if self.work.iterations > l.total_iterations {
            return Err(WorkError::TooMuch(format!(
                "the file asks for more than {} key-derivation iterations in all",
                l.total_iterations
            )));
        }
        Ok(())
    }

    /// Counts the derivation an encryption algorithm asks for.
    fn algorithm(&mut self, alg: &AlgorithmIdentifierOwned, what: &str) -> Result<(), WorkError> {
        let params = match &alg.parameters {
            Some(p) => p.to_der().map_err(malformed)?,
            None => return Ok(()),
        };
        if alg.oid == PBES2 {
            let parameters = pkcs5::pbes2::Parameters::from_der(&params).map_err(malformed)?;
            match &parameters.kdf {
                pkcs5::pbes2::Kdf::Pbkdf2(p) => self.derivation(u64::from(p.iteration_count), what),
                pkcs5::pbes2::Kdf::Scrypt(s) => {
                    let memory = 128u64
                        .saturating_mul(s.cost_parameter)
                        .saturating_mul(u64::from(s.block_size));
                    if memory > self.limits.scrypt_memory_bytes {
                        return Err(WorkError::TooMuch(format!(
                            "{what} asks for {} MiB of scrypt memory; at most {} MiB are accepted",
                            memory >> 20,
                            self.limits.scrypt_memory_bytes >> 20
                        )));
                    }
                    self.derivation(
                        s.cost_parameter.saturating_mul(u64::from(s.parallelization)),
                        what,
                    )
                }
                // A KDF this version does not know: the reader cannot use it either.
                _ => Ok(()),
            }
        } else if alg.oid == PBE_SHA1_3DES || alg.oid == PBE_SHA1_RC2_40 {
            let p = pkcs12::pbe_params::Pkcs12PbeParams::from_der(&params).map_err(malformed)?;
            self.derivation(u64::try_from(p.iterations).map_err(malformed)?, what)
        } else {
            // The reader refuses what it cannot decrypt, without deriving anything.
            Ok(())
        }
    }

    fn bags(&mut self, contents: &[u8]) -> Result<(), WorkError> {
        let bags = SafeContents::from_der(contents).map_err(malformed)?;
        self.work.bags += bags.len();
        if self.work.bags > self.limits.bags {
            return Err(WorkError::TooMuch(format!(
                "the file holds more than {} bags",
                self.limits.bags
            )));
        }
        for bag in &bags {
            if bag.bag_id == SHROUDED_KEY_BAG {
                let info = der::asn1::ContextSpecific::<EncryptedPrivateKeyInfo>::from_der(&bag.bag_value)
                    .map_err(malformed)?;
                self.algorithm(&info.value.encryption_algorithm, "a private key")?;
            } else if bag.bag_id == SECRET_BAG {
                let Ok(secret) = der::asn1::ContextSpecific::<SecretBag>::from_der(&bag.bag_value) else {
                    continue;
                };
                if let Ok(info) = EncryptedPrivateKeyInfo::from_der(secret.value.value.as_bytes()) {
                    self.algorithm(&info.encryption_algorithm, "a secret")?;
                }
            }
        }
        Ok(())
    }

    fn safe(&mut self, safe: &ContentInfo) -> Result<(), WorkError> {
        let content = safe.content.to_der().map_err(malformed)?;
        if safe.content_type == DATA {
            let data = OctetString::from_der(&content).map_err(malformed)?;
            self.bags(data.as_bytes())
        } else if safe.content_type == ENCRYPTED_DATA {
            let encrypted = EncryptedData::from_der(&content).map_err(malformed)?;
            let info = &encrypted.enc_content_info;
            self.algorithm(&info.content_enc_alg, "an encrypted safe")?;
            let Some(ciphertext) = info.encrypted_content.as_ref() else {
                return Ok(());
            };
            match decrypt(&info.content_enc_alg, ciphertext.as_bytes(), self.password) {
                // Bags only under the right password: a wrong one decrypts to noise whose padding
                // still looks right about once in 256 tries, and noise is not a malformed file.
                Some(plain) if SafeContents::from_der(&plain).is_ok() => self.bags(&plain),
                // A wrong password or an unknown scheme: the reader says which, at a cost
                // already counted.
                _ => Ok(()),
            }
        } else {
            Ok(())
        }
    }
}

/// Decrypts an encrypted safe (PBES2, or the legacy SHA-1 3DES and RC2-40 of RFC 7292 App. C).
fn decrypt(alg: &AlgorithmIdentifierOwned, data: &[u8], password: &str) -> Option<Vec<u8>> {
    use cbc::cipher::{BlockModeDecrypt, KeyIvInit, block_padding::Pkcs7};
    let params = alg.parameters.as_ref()?.to_der().ok()?;
    if alg.oid == PBES2 {
        let parameters = pkcs5::pbes2::Parameters::from_der(&params).ok()?;
        return parameters.decrypt(password.as_bytes(), data).ok();
    }
    let p = pkcs12::pbe_params::Pkcs12PbeParams::from_der(&params).ok()?;
    let key_len = if alg.oid == PBE_SHA1_3DES {
        24
    } else if alg.oid == PBE_SHA1_RC2_40 {
        5
    } else {
        return None;
    };
    let derive = |kind, len| {
        pkcs12::kdf::derive_key_utf8::<sha1::Sha1>(password, p.salt.as_bytes(), kind, p.iterations, len).ok()
    };
    let key = derive(pkcs12::kdf::Pkcs12KeyType::EncryptionKey, key_len)?;
    let iv = derive(pkcs12::kdf::Pkcs12KeyType::Iv, 8)?;
    if key_len == 24 {
        cbc::Decryptor::<des::TdesEde3>::new_from_slices(&key, &iv)
            .ok()?
            .decrypt_padded_vec::<Pkcs7>(data)
            .ok()
    } else {
        cbc::Decryptor::<rc2::Rc2>::new_from_slices(&key, &iv)
            .ok()?
            .decrypt_padded_vec::<Pkcs7>(data)
            .ok()
    }
}

/// Adds up the key-derivation work of opening `pfx` with `password`, refusing beyond `limits`.
pub fn check(pfx: &[u8], password: &str, limits: Limits) -> Result<Work, WorkError> {
    let pfx = Pfx::from_der(pfx).map_err(malformed)?;
    let mut walk = Walk {
        limits,
        password,
        work: Work::default(),
    };
    if let Some(mac) = &pfx.mac_data {
        walk.derivation(u64::try_from(mac.iterations).map_err(malformed)?, "the MAC")?;
    }
    if pfx.auth_safe.content_type != DATA {
        return Ok(walk.work);
    }
    let content = pfx.auth_safe.content.to_der().map_err(malformed)?;
    let safes =
        pkcs12::AuthenticatedSafe::from_der(OctetString::from_der(&content).map_err(malformed)?.as_bytes())
            .map_err(malformed)?;
    walk.work.safes = safes.len();
    if safes.len() > limits.safes {
        return Err(WorkError::TooMuch(format!(
            "the file holds more than {} safes",
            limits.safes
        )));
    }
    for safe in &safes {
        walk.safe(safe)?;
    }
    Ok(walk.work)
}
