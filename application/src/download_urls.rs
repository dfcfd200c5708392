//! Presigned artifact download URLs: `"<document id>:<artifact id>:<expires>"` signed with
//! HMAC-SHA256 under the service's URL key (`crate::mac`), checked in constant time. The
//! download route (`kuatia_api::routes::artifacts`) is their only reader.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// What the HMAC of a derived URL key is computed over (a fixed label: one purpose, one key).
const DERIVATION_LABEL: &[u8] = b"kuatia artifact download URLs v1";

/// The URL key derived from the master key: HMAC-SHA256(master key, a fixed label). The master
/// key itself never signs anything outside the vault.
pub fn derive_url_key(master_key: &[u8]) -> Vec<u8> {
    crate::mac::hmac_sha256(master_key, &[DERIVATION_LABEL]).to_vec()
}

/// Signs and verifies download URLs.
#[derive(Clone)]
pub struct UrlSigner {
    key: Vec<u8>,
    ttl_secs: i64,
}

impl std::fmt::Debug for UrlSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UrlSigner")
            .field("ttl_secs", &self.ttl_secs)
            .finish_non_exhaustive()
    }
}

impl UrlSigner {
    /// A signer with `key`, handing out URLs valid for `ttl_secs`.
    pub fn new(key: Vec<u8>, ttl_secs: u64) -> Self {
        Self {
            key,
            ttl_secs: i64::try_from(ttl_secs).unwrap_or(i64::MAX / 2),
        }
    }

    /// What is signed: `"<document id>:<artifact id>:<expires>"`.
    fn message(document_id: Uuid, artifact_id: Uuid, expires: i64) -> String {
        format!("{document_id}:{artifact_id}:{expires}")
    }

    /// The hex signature of `"<document id>:<artifact id>:<expires>"`.
    pub fn signature(&self, document_id: Uuid, artifact_id: Uuid, expires: i64) -> String {
        let message = Self::message(document_id, artifact_id, expires);
        crate::mac::hmac_sha256_hex(&self.key, &[message.as_bytes()])
    }

    /// When a URL signed `now` expires (unix seconds).
    pub fn expires(&self, now: DateTime<Utc>) -> i64 {
        now.timestamp().saturating_add(self.ttl_secs)
    }

    /// Whether `signature` is right for the ids and `expires`, and `expires` is not past. The
    /// signature is compared in constant time.
    pub fn verify(
        &self,
        document_id: Uuid,
        artifact_id: Uuid,
        expires: i64,
        signature: &str,
        now: DateTime<Utc>,
    ) -> bool {
        let Ok(given) = hex::decode(signature) else {
            return false;
        };
        let message = Self::message(document_id, artifact_id, expires);
        let valid = crate::mac::verify_hmac_sha256(&self.key, &[message.as_bytes()], &given);
        valid && now.timestamp() <= expires
    }

    /// The path and query of a download URL.
    pub fn path(&self, document_id: Uuid, artifact_id: Uuid, expires: i64) -> String {
        format!(
            "/v1/documents/{document_id}/artifacts/{artifact_id}/download?expires={expires}&signature={}",
            self.signature(document_id, artifact_id, expires)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_signature_binds_both_ids_and_the_expiry_and_expires() {
        let signer = UrlSigner::new(derive_url_key(&[7; 32]), 900);
        let (d, a) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let now = Utc.timestamp_opt(1_800_000_000, 0).single().expect("time");
        let exp = signer.expires(now);
        assert_eq!(exp, 1_800_000_900);
        let sig = signer.signature(d, a, exp);
        // Computed independently: the derived key is `printf 'kuatia artifact download URLs v1' |
        // openssl dgst -sha256 -mac HMAC -macopt hexkey:0707…07` (32 bytes of 7), and the
        // signature `printf '<d>:<a>:1800000900' | openssl dgst -sha256 -mac HMAC -macopt
        // hexkey:<derived key>`.
        assert_eq!(
            hex::encode(derive_url_key(&[7; 32])),
            "6a0a0aa314a354be70dedd2b198dca99fc7c841bfa6eaed75f297b1c56b03173"
        );
        assert_eq!(
            sig,
            "ce98e95bae3920ae960ca4de88ad946567ee3b6d48f19f32f6bdc9381c5748b6"
        );
        assert!(signer.verify(d, a, exp, &sig, now));
        assert!(signer.verify(d, a, exp, &sig, now + chrono::TimeDelta::seconds(900)));
        assert!(!signer.verify(d, a, exp, &sig, now + chrono::TimeDelta::seconds(901)));
        assert!(!signer.verify(d, a, exp + 1, &sig, now));
        assert!(!signer.verify(a, d, exp, &sig, now));
        assert!(!signer.verify(d, a, exp, "zz", now));
        assert!(!signer.verify(d, a, exp, &sig[..62], now));
        let other = UrlSigner::new(derive_url_key(&[8; 32]), 900);
        assert!(!other.verify(d, a, exp, &sig, now));
    }
}
