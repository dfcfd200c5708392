//! HMAC-SHA-256, the one message authentication code of the service: webhook signatures
//! (`X-Webhook-Signature`, docs/webhooks.md) and artifact download URLs (docs/artifacts.md) are
//! both computed here, so there is one implementation to review and to keep constant-time.

use hmac::{KeyInit, Mac};
use sha2::Sha256;

type HmacSha256 = hmac::Hmac<Sha256>;

/// A tag being computed over a message given in parts (the parts are simply concatenated).
fn keyed(key: &[u8], parts: &[&[u8]]) -> HmacSha256 {
    // HMAC takes a key of any length (a long one is hashed first), so this cannot fail.
    let mut mac = <HmacSha256 as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
    for part in parts {
        mac.update(part);
    }
    mac
}

/// HMAC-SHA-256 under `key` of the concatenation of `parts`.
pub fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    keyed(key, parts).finalize().into_bytes().into()
}

/// [`hmac_sha256`] in lower-case hex (64 characters).
pub fn hmac_sha256_hex(key: &[u8], parts: &[&[u8]]) -> String {
    hex::encode(hmac_sha256(key, parts))
}

/// Whether `tag` is the HMAC-SHA-256 under `key` of the concatenation of `parts`, compared in
/// constant time (a tag of the wrong length is simply wrong).
pub fn verify_hmac_sha256(key: &[u8], parts: &[&[u8]], tag: &[u8]) -> bool {
    keyed(key, parts).verify_slice(tag).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_rfc_4231_hmac_sha256_and_parts_concatenate() {
        // RFC 4231, test case 2.
        assert_eq!(
            hmac_sha256_hex(b"Jefe", &[b"what do ya want for nothing?"]),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hmac_sha256(b"Jefe", &[b"what do ya ", b"", b"want for nothing?"]),
            hmac_sha256(b"Jefe", &[b"what do ya want for nothing?"])
        );
    }

    #[test]
    fn verification_takes_the_right_tag_only() {
        let tag = hmac_sha256(b"key", &[b"message"]);
        assert!(verify_hmac_sha256(b"key", &[b"message"], &tag));
        assert!(!verify_hmac_sha256(b"key", &[b"messagE"], &tag));
        assert!(!verify_hmac_sha256(b"other", &[b"message"], &tag));
        assert!(!verify_hmac_sha256(b"key", &[b"message"], &tag[..31]));
        assert!(!verify_hmac_sha256(b"key", &[b"message"], &[]));
    }
}
